#!/usr/bin/env bash
# tests/integration/stress_cmd.sh SHMRUN PLUGIN_DIR: `shmrun stress`
# (runtime/stress.c, docs/stress.md).
#
#   wc, seq    the word count and a keyed count with emit = update, paced with
#              `rate` to run ~2 s: exit 0 under kill, stop, term and rescale
#              faults, every kind injected at least once, the summary line;
#              the user's outputs and checkpoint_dir are never written
#   leaky      tests/plugins/leaky_sink.c (claims exactly-once, appends at
#              once): exit 1 under kill, the seed, duplicated lines, the
#              reproduce command, a JUnit <failure> that parses
#   refused    stdout_sink, file_source with follow = true: exit 2 with the reason; bad options exit 2
#   schedule   --print-schedule: the same seed twice is the same schedule,
#              another seed another
#   expect     --runs 0 --keep makes a golden output; --expect uses it (and
#              catches one that lacks a line); a run past --timeout fails
#   signal     SIGTERM to stress: exit 143, its runs killed, work dir kept
# No process or work directory is left behind (checked at the end).
set -euo pipefail
shmrun=${1:?usage: stress_cmd.sh path/to/shmrun plugin_dir}
pdir=${2:?usage: stress_cmd.sh path/to/shmrun plugin_dir}
. "$(dirname "$0")/lib.sh"
export TMPDIR="$tmp/tmpdir" # stress's default work dirs: checked at the end
mkdir -p "$TMPDIR"

wc_conf() { # dir
	mkdir -p "$1/in"
	for i in $(seq 1 30); do
		seq 1 $((i * 100)) | sed "s/^/alpha$((i % 7)) beta w/" > "$1/in/f$i.txt"
	done
	cat > "$1/wc.conf" <<CONF
[job]
workers = 2
checkpoint_dir = ckpt
checkpoint_interval = 50ms
[read]
op = file_source
path = in
piece_bytes = 8K
rate = 23000
width = 2
[words]
op = tokenize
input = read
width = 2
[count]
op = count
input = words by key
emit = update
width = 3
[out]
op = file_sink
input = count
path = out/result.tsv
width = 1
CONF
}

# no checkpoint_dir: stress adds one (recovery needs it)
seq_conf() { # dir
	cat > "$1/seq.conf" <<CONF
[job]
workers = 2
ring_bytes = 64K
checkpoint_interval = 50ms
[gen]
op = sequence
count = 100000
keys = 300
piece_records = 1000
rate = 50000
width = 2
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

# kinds_in_summary LOG KINDS: every kind of KINDS (a,b,c) injected > 0 times
kinds_in_summary() {
	local sum
	sum=$(grep "^stress: .* runs\?, .* faults\? injected" "$1" | tail -1)
	[ -n "$sum" ] || return 1
	for k in ${2//,/ }; do
		echo "$sum" | grep -Eq "$k [1-9]" || { echo "no $k fault injected: $sum" >&2; return 1; }
	done
}

# first_seed CONF FAULTS KINDS [FROM]: the first seed from FROM (default 1)
# whose schedule holds every kind of KINDS
first_seed() {
	local out s
	for s in $(seq "${4:-1}" 300); do
		out=$("$shmrun" stress --print-schedule --seed "$s" --faults "$2" --kinds "$3" "$1")
		echo "$out" | qgrep "kill -9" && echo "$out" | qgrep "SIGSTOP" &&
			echo "$out" | qgrep "SIGTERM the launcher, resume$" &&
			echo "$out" | qgrep -- "--rescale" || continue
		case $3 in *damage*) echo "$out" | qgrep "damage the newest" || continue ;; esac
		echo "$s"
		return 0
	done
	return 1
}

# --- wc and seq: exact under every fault kind ------------------------------
# Both are paced to ~2 s with little work per second: a loaded machine slows
# the golden run and a faulted run alike, so the schedule (fractions of T0)
# still falls within the faulted run.
# seq also damages checkpoints (--kinds ...,damage: recovery falls back)
for job in wc seq; do
	d="$tmp/$job"
	mkdir -p "$d"
	"${job}_conf" "$d"
	kinds=kill,stop,term,rescale faults=5
	[ $job = wc ] || kinds=$kinds,damage faults=6
	# The schedule is in fractions of the golden run's time: on a loaded
	# machine a faulted run can end before its last faults (stress says so,
	# "not injected (the job had ended)"); then the next such seed, twice.
	from=1
	for attempt in 1 2 3; do
		seed=$(first_seed "$d/$job.conf" $faults $kinds $from) ||
			fail "$job: no seed in $from..300 schedules every kind"
		set +e
		(cd "$d" && "$shmrun" stress --seed "$seed" --runs 1 --faults $faults --kinds $kinds \
			--junit "$d/junit.xml" "$job.conf") > "$tmp/log" 2>&1
		rc=$?
		set -e
		[ $rc -eq 0 ] || fail "$job: stress exit $rc (expected 0)"
		grep -q "^stress: seed $seed, work dir " "$tmp/log" || fail "$job: the seed is not printed"
		grep -q "every sink's output matched the fault-free run" "$tmp/log" || fail "$job: no summary line"
		kinds_in_summary "$tmp/log" $kinds && break
		grep -q "not injected (the job had ended)" "$tmp/log" && [ $attempt -lt 3 ] ||
			fail "$job: a fault kind was never injected"
		from=$((seed + 1))
	done
	grep -Eq "^stress: run 1/1 seed $seed: fault [0-9]/$faults at [0-9.]+ s: kill -9 worker [0-9]+ \(pid [0-9]+\)" "$tmp/log" ||
		fail "$job: no progress line of a kill"
	# no terminal: no control characters (colours, \r redraws)
	! LC_ALL=C grep -q '[[:cntrl:]]' <(tr -d '\n\t' < "$tmp/log") || fail "$job: control characters in the output"
	# the user's outputs and checkpoints: untouched
	[ ! -e "$d/out" ] && [ ! -e "$d/ckpt" ] || fail "$job: stress wrote the user's out/ or ckpt/"
	python3 -c 'import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); assert r.tag == "testsuite" and r.get("name") == "shmrun-stress" and r.get("tests") == "1" and r.get("failures") == "0", r.attrib; assert "kill -9 worker" in r.find("testcase/system-out").text' "$d/junit.xml" ||
		fail "$job: junit"
	echo "ok $job: seed $seed, $(grep -o '[0-9]* faults\? injected ([^)]*)' "$tmp/log")"
done

# --- kills in quick succession: each one kills a live worker -------------------
# A killed worker stays in the metrics block (a zombie, its launcher's child)
# until the launcher reaps it; a second kill soon after went to the same dead
# pid and was counted as injected. Every kill must name a pid of its own.
d="$tmp/seq"
(cd "$d" && "$shmrun" stress --seed 7 --runs 1 --faults 12 --kinds kill seq.conf) > "$tmp/log" 2>&1 ||
	fail "kills: stress exit $?"
sed -n 's/.*: kill -9 worker [0-9]* (pid \([0-9]*\))$/\1/p' "$tmp/log" > "$tmp/pids"
[ "$(wc -l < "$tmp/pids")" -ge 2 ] || fail "kills: fewer than 2 kills injected: $(cat "$tmp/log")"
[ -z "$(sort "$tmp/pids" | uniq -d)" ] || fail "kills: a pid was killed twice: $(grep "kill -9" "$tmp/log")"
echo "ok $(wc -l < "$tmp/pids") kills, each of a live worker"

# --- rescale keeps forward-joined stages at one width ----------------------------
# NEXMark q8's stage q8 reads pairs forward (equal widths): pairs' keys stay on
# their instances. A rescale that gave them different widths (seed 78: pairs 3,
# q8 2) made the edge a rebalance and q8 failed ("a record of key ... reached
# an instance owning vnodes ..."): a false failure.
nx=$(dirname "$shmrun")/../docs/examples/nexmark
if [ -f "$nx/q8.conf" ]; then
	(cd "$nx" && "$shmrun" stress --workdir "$tmp/q8w" --seed 78 --runs 2 --faults 1 --kinds rescale \
		--set persons.rate=500000 --set auctions.rate=500000 q8.conf) > "$tmp/log" 2>&1 ||
		fail "q8 rescale: stress exit $? (pairs and q8 split?)"
	# and in every schedule: pairs and q8 get one width (or keep theirs)
	for sd in $(seq 1 40); do
		(cd "$nx" && "$shmrun" stress --print-schedule --seed $sd --faults 3 --kinds rescale q8.conf)
	done | awk '/rescale/ { p = q = ""
		for (i = 1; i < NF - 1; i++) { if ($i == "pairs") p = $(i + 2); if ($i == "q8") q = $(i + 2) }
		gsub(/[^0-9]/, "", p); gsub(/[^0-9]/, "", q)
		if (p != q) { print; bad = 1 } } END { exit bad }' > "$tmp/split" ||
		fail "q8 rescale: a schedule gives pairs and q8 different widths: $(head -3 "$tmp/split")"
	echo "ok q8 rescaled with pairs and q8 (a forward edge) at one width"
else
	echo "skipped: q8 rescale ($nx/q8.conf not built)"
fi

# --- many kills: the job's restart_attempts (10) do not run out -------------------
(cd "$tmp/seq" && "$shmrun" stress --seed 8 --runs 1 --faults 14 --kinds kill --set job.restart_attempts=2 seq.conf) > "$tmp/log" 2>&1 ||
	fail "14 kills with restart_attempts = 2: stress exit $? (no restart attempts left?)"
echo "ok 14 kills with restart_attempts = 2"

# --- a sink that is not exactly-once is caught ---------------------------------
d="$tmp/leaky"
mkdir -p "$d"
cat > "$d/leaky.conf" <<CONF
[job]
checkpoint_interval = 50ms
[gen]
op = sequence
count = 150000
keys = 1000
piece_records = 1000
rate = 100000
[out]
op = leaky_sink
input = gen
path = out/leaky.tsv
CONF
set +e
(cd "$d" && "$shmrun" stress --plugin "$pdir/leaky_sink.so" --seed 7 --runs 1 --faults 2 --kinds kill \
	--junit "$d/junit.xml" --workdir "$d/work" leaky.conf) > "$tmp/log" 2>&1
rc=$?
set -e
[ $rc -eq 1 ] || fail "leaky_sink: stress exit $rc (expected 1: duplicates after a kill)"
grep -q "^stress: run 1/1 seed 7: FAILED" "$tmp/log" || fail "leaky_sink: no FAILED line"
# (the second kill may find the job restarting after the first: not injected)
grep -Eq "^seed 7, [12] of 2 faults injected" "$tmp/log" || fail "leaky_sink: seed or faults not reported"
grep -Eq "^  out.path: [0-9]+ lines, the fault-free run 150000: 0 missing, [1-9][0-9]* duplicated, 0 extra" "$tmp/log" ||
	fail "leaky_sink: no count of duplicated lines"
grep -q "^   duplicated (first 5):" "$tmp/log" || fail "leaky_sink: duplicated lines not shown"
grep -Eq "^  fault [12] at [0-9.]+ s: kill -9 worker 0 \(pid [0-9]+\)" "$tmp/log" || fail "leaky_sink: schedule not printed"
grep -q "^reproduce: shmrun stress --seed 7 --runs 1 --faults 2" "$tmp/log" || fail "leaky_sink: no reproduce command"
grep -q "work dir kept: $d/work" "$tmp/log" && [ -d "$d/work/run-1" ] || fail "leaky_sink: work dir not kept"
python3 - "$d/junit.xml" <<'PY' || fail "leaky_sink: junit"
import sys, xml.etree.ElementTree as E
r = E.parse(sys.argv[1]).getroot()
assert r.get("tests") == "1" and r.get("failures") == "1", r.attrib
f = r.find("testcase/failure")
assert f is not None and "duplicated" in f.text and "seed 7" in f.text, f
PY
echo "ok leaky_sink caught: $(grep -o '[0-9]* duplicated' "$tmp/log" | head -1)"

# --- refused topologies and bad usage: exit 2 -----------------------------------
d="$tmp/refuse"
mkdir -p "$d"
printf '[gen]\nop = sequence\ncount = 10\n[out]\nop = stdout_sink\ninput = gen\n' > "$d/stdout.conf"
expect2() { # grep-pattern args...
	local pat=$1
	shift
	set +e
	"$shmrun" stress "$@" > "$tmp/log" 2>&1
	local rc=$?
	set -e
	[ $rc -eq 2 ] || fail "stress $*: exit $rc (expected 2)"
	grep -q -- "$pat" "$tmp/log" || fail "stress $*: no message '$pat'"
}
expect2 "stage 'out' (op stdout_sink) cannot be verified: stdout_sink writes records as they arrive; after a kill the records replayed" "$d/stdout.conf"
printf 'x\n' > "$d/in.txt"
printf '[src]\nop = file_source\npath = in.txt\nfollow = yes\n[out]\nop = file_sink\ninput = src\npath = o.tsv\n' > "$d/follow.conf"
expect2 "stage 'src' (op file_source) cannot be verified: follow = true never ends" "$d/follow.conf"
# postgres_sink: exactly-once, but a table is no file to compare (and no server is reached)
printf '[gen]\nop = sequence\ncount = 10\n[out]\nop = postgres_sink\ninput = gen\nconninfo = host=/nonexistent\ntable = t\ncolumns = v=value\n' > "$d/pg.conf"
expect2 "stage 'out' (op postgres_sink) cannot be verified: postgres_sink is exactly-once, but its output is a database table" "$d/pg.conf"
expect2 "--faults 'x' is not a count" --faults x "$d/stdout.conf"
expect2 "--kinds: unknown fault kind 'bogus'" --kinds kill,bogus "$d/stdout.conf"
expect2 "--kinds 'kill,,stop': an empty fault kind" --kinds kill,,stop "$d/stdout.conf"
expect2 "--kinds 'kill,': an empty fault kind" --kinds kill, "$d/stdout.conf"
expect2 "--duration '0m' is not a duration" --duration 0m "$d/stdout.conf"
expect2 "--duration '9000h' is not a duration" --duration 9000h "$d/stdout.conf"
expect2 "--timeout 'xm' is not a duration" --timeout xm "$d/stdout.conf"
# m and h are durations (the refusal that follows is the topology's, not the option's)
expect2 "stage 'out' (op stdout_sink) cannot be verified" --duration 10m "$d/stdout.conf"
expect2 "stage 'out' (op stdout_sink) cannot be verified" --duration 1h --timeout 2m "$d/stdout.conf"
expect2 "missing topology.conf"
expect2 "$d/nope.conf: cannot open" "$d/nope.conf"
expect2 "give --runs or --duration, not both" --runs 2 --duration 5s "$d/stdout.conf"
expect2 "^--set gen.count=x: count = 'x'" --set gen.count=x "$d/stdout.conf"
printf '[gen]\nop = sequence\ncount = 10\n[out]\nop = file_sink\ninput = gen\npath = o.tsv\n' > "$d/ok.conf"
expect2 "--junit $d/nodir/j.xml: cannot write beside it" --junit "$d/nodir/j.xml" "$d/ok.conf"
# nothing was started: no work dir made
[ -z "$(ls "$TMPDIR")" ] || fail "a refused stress left $(ls "$TMPDIR")"
echo "ok refused: stdout_sink, follow = true and bad usage exit 2"

# --- --print-schedule: a function of the seed ------------------------------------
c="$tmp/wc/wc.conf"
"$shmrun" stress --print-schedule --seed 42 --runs 2 --faults 4 "$c" > "$tmp/s1"
"$shmrun" stress --print-schedule --seed 42 --runs 2 --faults 4 "$c" > "$tmp/s2"
"$shmrun" stress --print-schedule --seed 43 --runs 2 --faults 4 "$c" > "$tmp/s3"
cmp -s "$tmp/s1" "$tmp/s2" || fail "--print-schedule: seed 42 printed two schedules"
! cmp -s "$tmp/s1" "$tmp/s3" || fail "--print-schedule: seeds 42 and 43 printed the same schedule"
[ "$(grep -c '^  fault [1-4]/4 at ' "$tmp/s1")" -eq 8 ] || fail "--print-schedule: $(cat "$tmp/s1")"
# run 2 of seed 42 is run 1 of seed 43
diff <(sed -n '/^run 2 /,$p' "$tmp/s1" | sed 1d) <(sed -n '/^run 2 /q;/^run 1 /,$p' "$tmp/s3" | sed 1d) > /dev/null ||
	fail "--print-schedule: run 2 of seed 42 is not run 1 of seed 43"
echo "ok print-schedule"

# --- --expect DIR: the golden output of a kept run, no golden run ---------------
d="$tmp/seq"
(cd "$d" && "$shmrun" stress --runs 0 --keep --workdir "$d/gold" seq.conf) > "$tmp/log" 2>&1 ||
	fail "--runs 0 --keep: exit $?"
[ -s "$d/gold/run-0/out/out.path/result.tsv.0" ] && [ -s "$d/gold/run-0/out/T0" ] ||
	fail "--runs 0 --keep: no golden output in $d/gold/run-0/out"
(cd "$d" && "$shmrun" stress --expect "$d/gold/run-0/out" --seed 5 --faults 1 --kinds kill seq.conf) > "$tmp/log" 2>&1 ||
	fail "--expect: exit $?"
grep -q "^stress: golden run" "$tmp/log" && fail "--expect: a golden run was made"
grep -q "every sink's output matched" "$tmp/log" || fail "--expect: no summary"
# a golden output that is not the job's: caught
sed -i '1d' "$d/gold/run-0/out/out.path/result.tsv.0"
set +e
(cd "$d" && "$shmrun" stress --expect "$d/gold/run-0/out" --seed 5 --faults 1 --kinds stop \
	--workdir "$d/bad" seq.conf) > "$tmp/log" 2>&1
rc=$?
set -e
[ $rc -eq 1 ] && grep -Eq "^  out.path: .* 0 missing, 0 duplicated, 1 extra" "$tmp/log" ||
	fail "--expect with a line removed: exit $rc"
# a faulted run past --timeout: killed, the run fails, nothing left running
for bad in abc 0 -5 nan 1e308 "2 s"; do
	echo "$bad" > "$d/gold/run-0/out/T0"
	rc=0
	(cd "$d" && "$shmrun" stress --expect "$d/gold/run-0/out" --faults 1 --kinds stop \
		--workdir "$d/badt0" seq.conf) > "$tmp/log" 2>&1 || rc=$?
	[ $rc -eq 2 ] && qgrep "T0 must hold the golden run's duration" "$tmp/log" ||
		fail "--expect with T0 '$bad': exit $rc: $(tail -2 "$tmp/log")"
	rm -rf "$d/badt0"
done
echo 0.2 > "$d/gold/run-0/out/T0"
set +e
(cd "$d" && "$shmrun" stress --expect "$d/gold/run-0/out" --seed 5 --faults 1 --kinds stop \
	--timeout 500ms --workdir "$d/slow" seq.conf) > "$tmp/log" 2>&1
rc=$?
set -e
[ $rc -eq 1 ] && grep -q "^  the run did not end within its timeout (0.5 s; --timeout)" "$tmp/log" ||
	fail "--timeout 500ms: exit $rc"
! "$shmrun" ps | qgrep -- "-stress-" || fail "--timeout: the run was left running: $("$shmrun" ps)"
rm -rf "$d/gold" "$d/bad" "$d/slow"
echo "ok expect, timeout"

# --- JUnit when nothing could be compared: an <error>, never an old green report --
echo '<testsuite name="shmrun-stress" tests="1" failures="0"/>' > "$d/old.xml"
set +e
(cd "$d" && "$shmrun" stress --timeout 1ms --junit "$d/old.xml" --workdir "$d/tw" seq.conf) > "$tmp/log" 2>&1
rc=$?
set -e
[ $rc -eq 1 ] || fail "golden run past --timeout: exit $rc"
python3 -c 'import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); assert r.get("errors") == "1" and r.find("testcase/error") is not None, r.attrib' "$d/old.xml" ||
	fail "a failed golden run left the old report: $(cat "$d/old.xml")"
mkdir -p "$d/jdir"
rc=0
"$shmrun" stress --junit "$d/jdir" "$d/seq.conf" > "$tmp/log" 2>&1 || rc=$?
[ $rc -eq 2 ] && qgrep "not a regular file" "$tmp/log" || fail "--junit DIR: exit $rc: $(cat "$tmp/log")"
rm -rf "$d/tw" "$d/jdir" "$d/old.xml"
echo "ok junit: an <error> when the golden run fails; a directory refused"

# --- SIGTERM to stress: its runs stop, nothing is left, the work dir is kept ----
d="$tmp/wc"
(cd "$d" && exec "$shmrun" stress --seed 1 --runs 3 --workdir "$d/sig" wc.conf) > "$tmp/log" 2>&1 &
launcher=$!
for _ in $(seq 600); do
	grep -q "^stress: run 1/3 seed 1: " "$tmp/log" && break
	sleep 0.05
done
grep -q "^stress: run 1/3 seed 1: " "$tmp/log" || fail "SIGTERM: no faulted run started"
sleep 0.3
kill -TERM "$launcher"
set +e
wait "$launcher"
rc=$?
set -e
launcher=
[ $rc -eq 143 ] || fail "SIGTERM to stress: exit $rc (expected 143)"
grep -q "stopped by signal 15; the runs were stopped; work dir kept: $d/sig" "$tmp/log" ||
	fail "SIGTERM to stress: message"
[ -d "$d/sig/run-1" ] || fail "SIGTERM to stress: work dir removed"
sleep 0.2
! "$shmrun" ps | qgrep -- "-stress-" || fail "SIGTERM to stress: a run was left: $("$shmrun" ps)"
rm -rf "$d/sig"
echo "ok SIGTERM"

# --- nothing left behind ------------------------------------------------------------
[ -z "$(ls "$TMPDIR")" ] || fail "work dirs left in TMPDIR: $(ls "$TMPDIR")"
# every run's job has a socket in $XDG_RUNTIME_DIR while its launcher lives
! "$shmrun" ps | qgrep -- "-stress-" || fail "stress left a running job: $("$shmrun" ps)"
echo "stress_cmd: ok"
