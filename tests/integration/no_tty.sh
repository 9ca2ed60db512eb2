#!/usr/bin/env bash
# tests/integration/no_tty.sh SHMRUN: no control characters in any output
# when no terminal is attached, as in CI logs (issue 14 §2; docs/ci-machines.md).
#
# stdin is /dev/null, stdout and stderr are files, and TERM is unset, "dumb",
# then "xterm-256color" (a CI runner often exports a TERM without a terminal:
# shmrun must look at isatty(), not at TERM). In each case these outputs hold
# no byte below 0x20 but \n and \t, and no DEL (0x7f) — no ESC sequence, no
# \r progress line, no BEL:
#   - a checkpointed run (its log, the progress it would draw on a terminal,
#     its summary), stopped with `shmrun stop` and resumed to its end, and
#     the same with --log-format=json;
#   - while it runs: `top` (its screen without a terminal), `top --json`,
#     `ps`, `ps --json`;
#   - `check` of a conf with errors (exit 2), `plan`, `ops`, `ckpt list`,
#     `ckpt verify`, `--help`, `--version`, an unknown command;
#   - a job that fails (a worker killed, no checkpoints: exit 1).
# Each output must also be non-empty where the command prints something, so
# the test cannot pass on silence.
set -euo pipefail
shmrun=$(realpath "${1:?usage: no_tty.sh path/to/shmrun}")
. "$(dirname "$0")/lib.sh"

# clean FILE WHAT: FILE has no control character but \n and \t
clean() {
	python3 - "$1" "$2" <<'PY' || fail "$2: control characters in its output (above)"
import sys
data = open(sys.argv[1], "rb").read()
for i, b in enumerate(data):
    if (b < 0x20 and b not in (0x0a, 0x09)) or b == 0x7f:
        line = data.count(b"\n", 0, i) + 1
        print("%s: byte 0x%02x at offset %d (line %d): %r" % (sys.argv[2], b, i, line,
              data[max(0, i - 40):i + 20]), file=sys.stderr)
        sys.exit(1)
PY
}
# the checker itself must see what a terminal-minded program writes
printf 'progress 10%%\r' > "$tmp/cr"
printf '\033[1mbold\033[0m\n' > "$tmp/esc"
for f in cr esc; do
	if (clean "$tmp/$f" "self-test $f") 2> /dev/null; then
		fail "the checker passes a file with a control character ($f)"
	fi
done
# nonempty FILE WHAT
nonempty() {
	[ -s "$1" ] || fail "$2: printed nothing"
}

conf() { # dir name [checkpoints: yes] [rate]
	cat > "$1/job.conf" <<CONF
[job]
name = $2
workers = 2
${3:+checkpoint_dir = ckpt}
checkpoint_interval = 50ms
[gen]
op = sequence
count = 60000
keys = 50
piece_records = 1000
${4:+rate = $4}
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

# term_env VALUE: the environment for one case ("unset": no TERM)
run_env() { # value cmd...
	local v=$1
	shift
	if [ "$v" = unset ]; then
		env -u TERM -u COLORTERM "$@"
	else
		env -u COLORTERM TERM="$v" "$@"
	fi
}

n=0
for term in unset dumb xterm-256color; do
	for fmt in text json; do
		n=$((n + 1))
		d=$tmp/c$n
		name=notty$n
		mkdir -p "$d"
		conf "$d" $name yes 6000 # 10 s: the commands below come well before its end
		(cd "$d" && exec env $([ $term = unset ] && echo -u TERM || echo TERM=$term) \
			"$shmrun" --log-format=$fmt job.conf) < /dev/null > "$d/run.out" 2> "$d/run.err" &
		launcher=$!
		# the start line, in either log format (wait_started knows the text one)
		for _ in $(seq 600); do
			grep -q "job $name: [0-9]* workers" "$d/run.err" 2> /dev/null && break
			kill -0 $launcher 2> /dev/null || fail "TERM=$term $fmt: the run ended early"
			sleep 0.05
		done
		wait_manifest "$d/ckpt" || fail "TERM=$term $fmt: no checkpoint"
		run_env $term "$shmrun" ps < /dev/null > "$d/ps" 2>&1 || fail "TERM=$term: ps failed"
		run_env $term "$shmrun" ps --json < /dev/null > "$d/psj" 2>&1 || fail "TERM=$term: ps --json failed"
		run_env $term "$shmrun" top --json $name < /dev/null > "$d/topj" 2>&1 || { cat "$d/topj" >&2; fail "TERM=$term: top --json failed"; }
		# top's screen without a terminal: a few frames, then SIGINT as a user's Ctrl-C
		set +e
		run_env $term timeout -s INT 1.5 "$shmrun" top --interval 0.3 $name < /dev/null > "$d/top" 2>&1
		rc=$?
		set -e
		[ $rc -eq 0 ] || [ $rc -eq 124 ] || [ $rc -eq 130 ] || fail "TERM=$term: top exit status $rc: $(head -5 "$d/top")"
		run_env $term "$shmrun" stop $name < /dev/null > "$d/stop" 2>&1 || fail "TERM=$term: stop failed: $(cat "$d/stop")"
		set +e; wait $launcher; rc=$?; set -e
		launcher=
		[ $rc -eq 0 ] || fail "TERM=$term $fmt: the stopped run exited $rc"
		# the resume, to its end, unpaced (rate is tuning: the same fingerprint)
		conf "$d" $name yes
		(cd "$d" && run_env $term "$shmrun" --log-format=$fmt job.conf) < /dev/null >> "$d/run.out" 2>> "$d/run.err" ||
			fail "TERM=$term $fmt: the resume failed"
		for f in run.err ps psj topj top stop; do
			nonempty "$d/$f" "TERM=$term $fmt: $f"
			clean "$d/$f" "TERM=$term $fmt: $f"
		done
		clean "$d/run.out" "TERM=$term $fmt: run.out" # a run prints to stderr only
		qgrep -F "$name" "$d/top" || fail "TERM=$term: top's screen does not show the job: $(head -3 "$d/top")"
		[ "$(cat "$d"/out/result.tsv* | wc -l)" -eq 60000 ] || fail "TERM=$term $fmt: output has not 60000 lines"
	done

	# commands without a job
	d=$tmp/cmd-$term
	mkdir -p "$d"
	conf "$d" cmds yes
	printf '[job]\nworkers = lots\n[gen]\nop = sequence\n[x]\nop = nosuch\ninput = gen\n' > "$d/bad.conf"
	set +e
	run_env $term "$shmrun" check "$d/bad.conf" < /dev/null > "$d/check" 2>&1
	rc=$?
	set -e
	[ $rc -eq 2 ] || fail "TERM=$term: check of a bad conf: exit status $rc, want 2"
	run_env $term "$shmrun" plan "$d/job.conf" < /dev/null > "$d/plan" 2>&1 || fail "TERM=$term: plan failed"
	run_env $term "$shmrun" ops < /dev/null > "$d/ops" 2>&1 || fail "TERM=$term: ops failed"
	run_env $term "$shmrun" --help < /dev/null > "$d/help" 2>&1 || fail "TERM=$term: --help failed"
	run_env $term "$shmrun" --version < /dev/null > "$d/version" 2>&1 || fail "TERM=$term: --version failed"
	run_env $term "$shmrun" ckpt list "$tmp/c1/ckpt" < /dev/null > "$d/list" 2>&1 || fail "TERM=$term: ckpt list failed"
	run_env $term "$shmrun" ckpt verify "$tmp/c1/ckpt" < /dev/null > "$d/verify" 2>&1 || fail "TERM=$term: ckpt verify failed"
	set +e
	run_env $term "$shmrun" nosuchcommand < /dev/null > "$d/unknown" 2>&1
	rc=$?
	set -e
	[ $rc -ne 0 ] || fail "TERM=$term: an unknown command: exit 0"
	# a failing job: a worker killed, no checkpoints
	conf "$d" fails "" 6000
	(cd "$d" && exec env $([ $term = unset ] && echo -u TERM || echo TERM=$term) \
		"$shmrun" job.conf) < /dev/null > "$d/fail.out" 2> "$d/fail.err" &
	launcher=$!
	wait_started "$d/fail.err" || fail "TERM=$term: the failing run did not start"
	w=$(pgrep -P $launcher | head -1 || true)
	[ -n "$w" ] && kill -9 "$w"
	set +e; wait $launcher; rc=$?; set -e
	launcher=
	[ $rc -eq 1 ] || fail "TERM=$term: a job whose worker was killed: exit status $rc, want 1"
	for f in check plan ops help version list verify unknown fail.err; do
		nonempty "$d/$f" "TERM=$term: $f"
		clean "$d/$f" "TERM=$term: $f"
	done
	clean "$d/fail.out" "TERM=$term: fail.out"
	echo "ok TERM=$term: no control characters in runs (text and json logs), top, top --json, ps, stop, check errors, plan, ops, ckpt, --help, a failed job"
done
