#!/usr/bin/env bash
# tests/soak/soak.sh SHMRUN [MINUTES]: a long checkpointed run under faults,
# watched for growth (README.md beside this file).
#
# Runs a paced keyed count (sequence -> count, emit = update -> file_sink,
# checkpointed every 200 ms) for MINUTES (default 30) while injecting faults:
# kill -9 of a random worker every ~20 s, SIGSTOP/SIGCONT of a random worker
# for 1-3 s every ~45 s, and SIGTERM of the launcher followed by a resume every
# ~3 min. Every 5 s it appends a row to soak.csv: RSS, open fds and memfds of
# the launcher and the workers, /dev/shm use, and the checkpoint directory's
# size and ckpt-* count.
#
# Pass/fail, comparing the first quarter after the warm-up with the last:
# - RSS (launcher, largest worker): last max > first max * 1.2 + 4 MiB;
# - open fds, memfds (launcher, worker sum): last median > first max;
# - /dev/shm: last max > first max;
# - checkpoint dir size: last max > first max * 2 + 1 MiB;
# - any sample with more than checkpoint_retain + 1 ckpt-* dirs;
# - the committed output of every round is exact: each round is one job run
#   to its end (a round ended by the deadline is stopped with SIGTERM and
#   resumed without `rate` to finish at full speed, unsampled), and its output
#   must be, for each key k<j>, exactly the updates 1..n_j, once each;
#   `shmrun ckpt verify` must pass on its checkpoint_dir.
# Exit 0 pass, 1 fail, 2 usage. No process or segment outlives it, also on
# Ctrl-C. As root it runs in a mount namespace of its own with a private
# /dev/shm (so other programs' segments do not count); otherwise /dev/shm is
# the host's and the figure includes everyone's.
set -euo pipefail
shmrun=${1:?usage: soak.sh path/to/shmrun [minutes]}
minutes=${2:-30}
case $minutes in '' | *[!0-9]*) echo "soak.sh: MINUTES must be a whole number" >&2; exit 2 ;; esac
[ "$minutes" -ge 1 ] || { echo "soak.sh: MINUTES must be at least 1" >&2; exit 2; }
shmrun=$(realpath "$shmrun")
[ -x "$shmrun" ] || { echo "soak.sh: $shmrun is not executable" >&2; exit 2; }

retain=2 # checkpoint_retain
warmup=$((minutes * 60 / 6)) # samples before this are not compared
[ $warmup -le 60 ] || warmup=60

# The figures: start (first sample after the warm-up), end, max; growth
# checks over the first and the last quarter of the compared samples.
# figures CSV: print them; non-zero on growth
figures() {
awk -F, -v warm="$warmup" -v retain="$retain" '
NR == 1 { for (i = 1; i <= NF; i++) name[i] = $i; next }
{ if ($14 + 0 > retain + 1) { printf "FAIL: %d ckpt-* dirs at %s s (checkpoint_retain = %d)\n", $14, $1, retain; bad = 1 } }
$1 + 0 < warm { next }
{ n++; t[n] = $1; for (i = 3; i <= NF; i++) v[n, i] = $i }
function qmax(i, a, b,   k, m) { m = -1; for (k = a; k <= b; k++) if (v[k, i] != "" && v[k, i] + 0 > m) m = v[k, i] + 0; return m }
function qmedian(i, a, b,   k, c, s, x, j, tmp) {
	c = 0
	for (k = a; k <= b; k++) if (v[k, i] != "") s[++c] = v[k, i] + 0
	if (!c) return -1
	for (x = 2; x <= c; x++) for (j = x; j > 1 && s[j - 1] > s[j]; j--) { tmp = s[j]; s[j] = s[j - 1]; s[j - 1] = tmp }
	return s[int((c + 1) / 2)]
}
function first(i,   k) { for (k = 1; k <= n; k++) if (v[k, i] != "") return v[k, i]; return "-" }
function last(i,   k) { for (k = n; k >= 1; k--) if (v[k, i] != "") return v[k, i]; return "-" }
END {
	if (n < 8) { printf "FAIL: %d samples after the warm-up, too few to compare (run longer)\n", n; exit 1 }
	q = int(n / 4); a1 = 1; b1 = q; a2 = n - q + 1; b2 = n
	printf "%-20s %10s %10s %10s %12s %12s\n", "figure", "start", "end", "max", "q1 max/med", "q4 max/med"
	for (i = 3; i <= 14; i++) {
		if (i == 6) continue
		printf "%-20s %10s %10s %10s %6d/%-5d %6d/%-5d\n", name[i], first(i), last(i), qmax(i, 1, n),
			qmax(i, a1, b1), qmedian(i, a1, b1), qmax(i, a2, b2), qmedian(i, a2, b2)
	}
	# RSS: launcher (3), largest worker (5)
	split("3 5", rss, " ")
	for (k in rss) { i = rss[k]
		if (qmax(i, a2, b2) > qmax(i, a1, b1) * 1.2 + 4096) { printf "FAIL: %s grew: %d -> %d KiB\n", name[i], qmax(i, a1, b1), qmax(i, a2, b2); bad = 1 } }
	# fds and memfds: launcher fds (7), worker fds (8), memfds (9)
	split("7 8 9", fd, " ")
	for (k in fd) { i = fd[k]
		if (qmedian(i, a2, b2) > qmax(i, a1, b1)) { printf "FAIL: %s grew: max %d in the first quarter, median %d in the last\n", name[i], qmax(i, a1, b1), qmedian(i, a2, b2); bad = 1 } }
	if (qmax(12, a2, b2) > qmax(12, a1, b1)) { printf "FAIL: /dev/shm use grew: %d -> %d KiB\n", qmax(12, a1, b1), qmax(12, a2, b2); bad = 1 }
	if (qmax(13, a2, b2) > qmax(13, a1, b1) * 2 + 1024) { printf "FAIL: checkpoint dir grew: %d -> %d KiB\n", qmax(13, a1, b1), qmax(13, a2, b2); bad = 1 }
	printf "%d samples compared (%d per quarter), from %s s to %s s\n", n, q, t[1], t[n]
	exit bad
}' "$1"
}

# SOAK_CHECK_CSV=FILE: only judge an existing CSV (a soak's, or one made up to
# test the checks), with the warm-up of MINUTES; no job is run
if [ -n "${SOAK_CHECK_CSV:-}" ]; then
	figures "$SOAK_CHECK_CSV" && { echo "soak: figures pass"; exit 0; }
	echo "soak: figures FAIL"
	exit 1
fi

if [ "$(id -u)" = 0 ] && [ -z "${SOAK_NS:-}" ] && command -v unshare > /dev/null; then
	# a private /dev/shm: exec keeps the pid, so a Ctrl-C still reaches the trap
	exec env SOAK_NS=1 unshare -m --propagation private "$0" "$@"
fi
if [ -n "${SOAK_NS:-}" ]; then
	mount -t tmpfs -o size=1G,mode=1777 soak-shm /dev/shm
	shm_note="private tmpfs (mount namespace)"
else
	shm_note="the host's (includes other programs' segments)"
fi

rate=${SOAK_RATE:-4000}			 # records per second
keys=500
period=5				 # seconds between samples
out_dir=${SOAK_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/shmrun-soak.XXXXXX")}
mkdir -p "$out_dir"
csv=$out_dir/soak.csv
log=$out_dir/shmrun.log
export XDG_RUNTIME_DIR=$out_dir/run
mkdir -p "$XDG_RUNTIME_DIR"
chmod 700 "$XDG_RUNTIME_DIR"
launcher=
stopped=

cleanup() {
	trap - EXIT INT TERM
	set +e # each step may find its process gone
	[ -n "$stopped" ] && kill -CONT "$stopped" 2> /dev/null
	if [ -n "$launcher" ]; then
		# its workers first: they are the launcher's children, gone with it
		pkill -9 -P "$launcher" 2> /dev/null
		kill -9 "$launcher" 2> /dev/null
		wait "$launcher" 2> /dev/null
		launcher=
	fi
	set -e
	return 0
}
trap cleanup EXIT
trap 'echo "soak: interrupted (files kept in $out_dir)" >&2; exit 130' INT TERM

now() { date +%s; }
start=$(now)
deadline=$((start + minutes * 60))
term_every=$((minutes * 60 / 3)) # SIGTERM + resume: every 150-225 s, more often in a short soak
[ $term_every -le 150 ] || term_every=150

conf() { # dir count [rate]
	cat > "$1/job.conf" <<CONF
[job]
name = soak
workers = 2
checkpoint_dir = ckpt
checkpoint_interval = 200ms
checkpoint_retain = $retain
restart_attempts = 1000000
ring_bytes = 64K
[gen]
op = sequence
count = $2
keys = $keys
piece_records = 20000
width = 2
${3:+rate = $3}
[count]
op = count
input = gen by key
emit = update
width = 3
[out]
op = file_sink
input = count
path = out/result.tsv
width = 2
CONF
}

# run DIR: start (or resume) the round's job in the background into $launcher,
# and wait (at most 60 s) for its start line: before it, SIGTERM kills the
# launcher instead of stopping the job (tests/integration/lib.sh, wait_started)
run() {
	local before end=$((SECONDS + 60))
	before=$(grep -c "launcher: job .*: [0-9]* worker" "$log" 2> /dev/null || true)
	(cd "$1" && exec "$shmrun" --log-level info job.conf) >> "$log" 2>&1 &
	launcher=$!
	while [ "$(grep -c "launcher: job .*: [0-9]* worker" "$log" 2> /dev/null || true)" -le "${before:-0}" ]; do
		kill -0 "$launcher" 2> /dev/null || return 0
		[ $SECONDS -lt $end ] || return 0
		sleep 0.05
	done
}

# finish DIR: wait for the launcher; non-zero if the job did not end well
finish() {
	local rc=0
	wait "$launcher" || rc=$?
	launcher=
	return $rc
}

workers() { [ -n "$launcher" ] && pgrep -P "$launcher" || true; }

# verify DIR COUNT: exactly-once check of a finished round, and ckpt verify
verify() {
	local d=$1 n=$2
	"$shmrun" ckpt verify "$d/ckpt" > "$d/verify.txt" 2>&1 ||
		{ echo "FAIL: shmrun ckpt verify $d/ckpt:"; cat "$d/verify.txt"; return 1; }
	cat "$d"/out/result.tsv* | LC_ALL=C sort -t "$(printf '\t')" -k1,1 -k2,2n |
		awk -F '\t' -v n="$n" -v keys="$keys" '
		function close_key() {
			if (key == "") return
			j = substr(key, 2) + 0
			want = int(n / keys) + (j < n % keys ? 1 : 0)
			if (c != want) { printf "key %s: updates 1..%d, want 1..%d\n", key, c, want; bad = 1 }
			seen++
		}
		NF != 2 || $1 !~ /^k[0-9]+$/ { printf "line %d: not key<TAB>count: %s\n", NR, $0; bad = 1; next }
		$1 != key { close_key(); key = $1; c = 0 }
		{ if ($2 != c + 1) { printf "key %s: update %s after %d (lost or duplicated)\n", $1, $2, c; bad = 1 } c = $2 }
		END {
			close_key()
			want_keys = n < keys ? n : keys
			if (seen != want_keys) { printf "%d keys, want %d\n", seen, want_keys; bad = 1 }
			exit bad
		}' | head -20 > "$d/exact.txt" || true
	if [ -s "$d/exact.txt" ]; then
		echo "FAIL: round $d: committed output is not exactly-once:"
		cat "$d/exact.txt"
		return 1
	fi
	[ -z "$(find "$d/out" -name '*.staged' | head -1)" ] || { echo "FAIL: round $d: staging files left"; return 1; }
	return 0
}

# rss_kb PID: VmRSS in KiB (empty if gone)
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2> /dev/null || true; }
# fds PID: "open memfd" counts (empty if gone)
fds() {
	local n=0 m=0 f l
	[ -d "/proc/$1/fd" ] || return 0
	for f in /proc/$1/fd/*; do
		l=$(readlink "$f" 2> /dev/null) || continue
		n=$((n + 1))
		case $l in /memfd:*) m=$((m + 1)) ;; esac
	done
	echo "$n $m"
}

sample() { # dir
	local t=$(($(now) - start)) lr='' lf='' lm='' wn=0 rs=0 rm=0 fs=0 ms=0 w r f m shm ck ckn
	if [ -n "$launcher" ] && kill -0 "$launcher" 2> /dev/null; then
		lr=$(rss_kb "$launcher")
		read -r lf lm < <(fds "$launcher") || true
		for w in $(workers); do
			r=$(rss_kb "$w")
			[ -n "$r" ] || continue
			read -r f m < <(fds "$w") || continue
			wn=$((wn + 1)) rs=$((rs + r)) fs=$((fs + f)) ms=$((ms + m))
			[ "$r" -le "$rm" ] || rm=$r
		done
	fi
	shm=$(du -sk /dev/shm 2> /dev/null | awk '{ print $1 }')
	ck=$(du -sk "$1/ckpt" 2> /dev/null | awk '{ print $1 }')
	ckn=$(find "$1/ckpt" -maxdepth 1 -name 'ckpt-*' -type d 2> /dev/null | wc -l)
	# a row without a launcher (between a stop and its resume) has empty process columns
	if [ -z "$lr" ] || [ $wn -eq 0 ]; then
		echo "$t,$round,,,,,,,,,,$shm,$ck,$ckn" >> "$csv"
	else
		echo "$t,$round,$lr,$rs,$rm,$wn,$lf,$fs,$((lm + ms)),$lm,$ms,$shm,$ck,$ckn" >> "$csv"
	fi
}

echo "time_s,round,launcher_rss_kb,workers_rss_sum_kb,workers_rss_max_kb,workers,launcher_fds,workers_fds_sum,memfds,launcher_memfds,workers_memfds,dev_shm_kb,ckpt_kb,ckpt_dirs" > "$csv"
echo "soak: $minutes min, rate $rate/s, files in $out_dir; /dev/shm: $shm_note"

failed=0
round=0
kills=0 stops=0 terms=0 rounds_ok=0 last_kill=-100
next_kill=$((start + 15 + RANDOM % 10))
next_stop=$((start + 30 + RANDOM % 30))
next_term=$((start + term_every + RANDOM % (term_every / 2 + 1)))
while [ "$(now)" -lt "$deadline" ]; do
	round=$((round + 1))
	d=$out_dir/round-$round
	mkdir -p "$d"
	# enough records for the time left, so a round is normally cut by the deadline
	count=$(((deadline - $(now)) * rate + rate))
	conf "$d" "$count" "$rate"
	run "$d"
	next_sample=$(now)
	while :; do
		t=$(now)
		if ! kill -0 "$launcher" 2> /dev/null; then
			rc=0
			finish || rc=$?
			if [ $rc -ne 0 ]; then
				echo "FAIL: round $round: the job exited with status $rc (log: $log)"
				failed=1
				break 2
			fi
			if verify "$d" "$count"; then
				rounds_ok=$((rounds_ok + 1))
				echo "soak: round $round finished at $((t - start)) s: output exact"
			else
				failed=1
				break 2
			fi
			break
		fi
		# a stop (SIGTERM) never within 5 s of a kill, so that each stop
		# takes its final checkpoint (a worker killed during it makes the
		# stop end at the last complete one, exit 0: a different path)
		if [ "$t" -ge "$deadline" ] && [ $((t - last_kill)) -ge 5 ]; then
			# stop, then finish the rest unpaced (rate is tuning: not part of the fingerprint)
			kill -TERM "$launcher"
			finish || { echo "FAIL: round $round: the stop at the deadline failed (log: $log)"; failed=1; break 2; }
			conf "$d" "$count"
			run "$d"
			finish || { echo "FAIL: round $round: the unpaced resume failed (log: $log)"; failed=1; break 2; }
			if verify "$d" "$count"; then
				rounds_ok=$((rounds_ok + 1))
				echo "soak: round $round finished after the deadline (unpaced): output exact"
			else
				failed=1
			fi
			break 2
		fi
		if [ "$t" -ge "$next_sample" ]; then
			sample "$d"
			next_sample=$((next_sample + period))
		fi
		if [ "$t" -ge "$next_kill" ]; then
			mapfile -t ws < <(workers)
			if [ ${#ws[@]} -gt 0 ]; then
				kill -9 "${ws[$((RANDOM % ${#ws[@]}))]}" 2> /dev/null && kills=$((kills + 1))
				last_kill=$t
			fi
			next_kill=$((t + 15 + RANDOM % 11))
			# and no kill just before a due stop
			[ "$next_kill" -lt "$next_term" ] || [ "$next_kill" -gt $((next_term + 5)) ] ||
				next_kill=$((next_term + 6))
		fi
		if [ "$t" -ge "$next_stop" ]; then
			mapfile -t ws < <(workers)
			if [ ${#ws[@]} -gt 0 ]; then
				stopped=${ws[$((RANDOM % ${#ws[@]}))]}
				if kill -STOP "$stopped" 2> /dev/null; then
					stops=$((stops + 1))
					sleep "$((1 + RANDOM % 3))"
					kill -CONT "$stopped" 2> /dev/null || true
				fi
				stopped=
			fi
			next_stop=$((t + 30 + RANDOM % 31))
		fi
		if [ "$t" -ge "$next_term" ] && [ $((t - last_kill)) -ge 5 ]; then
			kill -TERM "$launcher" 2> /dev/null || true
			rc=0
			finish || rc=$?
			if [ $rc -ne 0 ]; then
				echo "FAIL: round $round: the stop (SIGTERM) exited with status $rc (log: $log)"
				failed=1
				break 2
			fi
			terms=$((terms + 1))
			sample "$d" # the gap: no processes
			run "$d"
			next_term=$((t + term_every + RANDOM % (term_every / 2 + 1)))
		fi
		sleep 0.5
	done
done
cleanup
trap cleanup EXIT

figures "$csv" || failed=1

echo "soak: $kills kill -9, $stops SIGSTOP/SIGCONT, $terms SIGTERM+resume, $(grep -c "launcher: restart [0-9]* of" "$log" || true) restarts logged, $round round(s), $rounds_ok verified exact"
# every process of the job runs in a round's directory (the launcher's cwd, inherited)
left=
for p in /proc/[0-9]*; do
	case $(readlink "$p/cwd" 2> /dev/null) in "$out_dir"/*) left="$left ${p#/proc/}" ;; esac
done
[ -z "$left" ] || { echo "FAIL: processes left:$left"; failed=1; }
if [ -z "${SOAK_NS:-}" ]; then
	:
elif [ -n "$(ls -A /dev/shm)" ]; then
	echo "FAIL: segments left in /dev/shm: $(ls -A /dev/shm | head -5)"
	failed=1
fi
if [ $failed -ne 0 ]; then
	echo "soak: FAIL (CSV and logs kept in $out_dir)"
	exit 1
fi
# the outputs are large; the CSV and the log stay
[ -n "${SOAK_KEEP:-}" ] || rm -rf "$out_dir"/round-*
echo "soak: pass (CSV: $csv, log: $log)"
