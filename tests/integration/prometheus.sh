#!/usr/bin/env bash
# tests/integration/prometheus.sh SHMRUN: `[job] metrics = ADDRESS` serves the
# Prometheus text exposition format at /metrics while the job runs
# (runtime/prom.c, docs/observability.md "Prometheus").
#   - two scrapes of a paced job: every line is a HELP, a TYPE or a sample of
#     the format, every sample's family has its HELP and TYPE first, the names
#     and labels the docs list are there, and records_in_total of the source
#     and records_out_total of the sink grow between the scrapes;
#   - another path is 404, another method 405; the endpoint is gone once the
#     job ends, and no worker ever held the port; another job on the same
#     port is refused for it, creating nothing, and the first goes on serving;
#   - through a kill -9 and restart: the same endpoint answers, restarts_total
#     is 1, records_in_total never goes back, the checkpoint metrics move;
#   - bad `metrics =` values are refused naming file:line (exit 2);
#   - a port in use is refused naming the address, exit 2, nothing started
#     (no output, no checkpoint_dir, no summary);
#   - [::1]:PORT serves too, where the host has IPv6 loopback.
# Ports: tests run in parallel, so each run tries random ports until one is
# free (a port another program holds is refused, which is itself tested).
set -euo pipefail
shmrun=${1:?usage: prometheus.sh path/to/shmrun}
. "$(dirname "$0")/lib.sh"
command -v curl > /dev/null || { echo "skipped: no curl" >&2; exit 77; }

# job_conf FILE ADDRESS_WITHOUT_PORT PORT [JOB_LINE]: a paced job of 60 s at
# most (each case stops it with SIGTERM once it has seen what it needs)
job_conf() {
	cat > "$1" <<CONF
[job]
workers = 2
metrics = $2$3
${4:-}
[gen]
op = sequence
count = 600000
keys = 100
piece_records = 100
rate = 10000
width = 2
[count]
op = count
input = gen by key
width = 2
[out]
op = file_sink
input = count
path = out.tsv
CONF
}

# start_job HOST [JOB_LINE]: start the paced job in the background on a free
# port; sets $port and $launcher. Return: 1 if no port was found.
start_job() {
	local host=$1
	for _ in $(seq 20); do
		port=$((20000 + RANDOM % 30000))
		rm -f "$tmp/out.tsv"
		job_conf "$tmp/p.conf" "$host" "$port" "${2:-}"
		(cd "$tmp" && exec "$shmrun" p.conf) 2> "$tmp/log" &
		launcher=$!
		wait_started || fail "the job did not start within 60 s"
		if grep -q "the address is in use" "$tmp/log"; then
			wait "$launcher" || true
			launcher=
			continue
		fi
		kill -0 "$launcher" 2> /dev/null || fail "the job ended early"
		return 0
	done
	return 1
}

# scrape URL FILE: GET URL into FILE; fail unless 200 with the format's type
scrape() {
	local code ctype
	read -r code ctype < <(curl -sS -g --max-time 10 -o "$2" -w '%{http_code} %{content_type}\n' "$1") ||
		fail "curl $1 failed"
	[ "$code" = 200 ] || fail "GET $1: HTTP $code, expected 200"
	case "$ctype" in
	"text/plain; version=0.0.4"*) ;;
	*) fail "GET $1: Content-Type '$ctype', expected text/plain; version=0.0.4" ;;
	esac
}

# check_format FILE: the exposition format, line by line (python3)
check_format() {
	python3 - "$1" <<'PY' || fail "$1 is not in the text exposition format (see above)"
import re, sys
name = r'[a-zA-Z_:][a-zA-Z0-9_:]*'
label = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
sample = re.compile(r'^(%s)(\{%s(?:,%s)*\})? (-?[0-9]+(?:\.[0-9]+)?(?:e[+-]?[0-9]+)?|\+Inf|-Inf|NaN)$' % (name, label, label))
helps, types, bad = {}, {}, 0
for n, line in enumerate(open(sys.argv[1]), 1):
    line = line.rstrip('\n')
    m = re.match(r'^# HELP (%s) (.+)$' % name, line)
    if m:
        if m.group(1) in helps: print("line %d: second HELP for %s" % (n, m.group(1))); bad = 1
        helps[m.group(1)] = n
        continue
    m = re.match(r'^# TYPE (%s) (counter|gauge|histogram|summary|untyped)$' % name, line)
    if m:
        if m.group(1) in types: print("line %d: second TYPE for %s" % (n, m.group(1))); bad = 1
        types[m.group(1)] = (n, m.group(2))
        continue
    m = sample.match(line)
    if not m:
        print("line %d: not a sample: %r" % (n, line)); bad = 1; continue
    f = m.group(1)
    if f not in helps or f not in types:
        print("line %d: %s has no HELP or TYPE before it" % (n, f)); bad = 1
    elif types[f][1] == 'counter' and not f.endswith('_total'):
        print("line %d: counter %s does not end in _total" % (n, f)); bad = 1
sys.exit(bad)
PY
}

# value FILE METRIC LABELS: the sum of the samples of METRIC whose labels
# include LABELS (a regex over the {...} part)
value() {
	awk -v m="$2" -v l="$3" '
		{ split($0, a, "{"); if (a[1] != m) next; if ($0 !~ l) next; s += $NF; n++ }
		END { if (!n) exit 1; printf "%.0f\n", s }' "$1" || fail "no sample of $2 matching $3 in $1"
}

# --- 1. two scrapes while it runs ----------------------------------------------
start_job 127.0.0.1: || fail "no free port found in 20 tries"
url="http://127.0.0.1:$port/metrics"
scrape "$url" "$tmp/m1"
sleep 1.5
scrape "$url" "$tmp/m2"
check_format "$tmp/m1"
check_format "$tmp/m2"
for f in records_in_total records_out_total bytes_in_total bytes_out_total busy_seconds_total \
	idle_seconds_total backpressure_seconds_total records_bad_total records_late_total \
	state_bytes keys watermark_seconds ring_fill_bytes ring_capacity_bytes \
	worker_sleep_seconds_total restarts_total up state checkpoints_total \
	checkpoints_aborted_total checkpoint_epoch checkpoint_duration_seconds \
	checkpoint_size_bytes last_checkpoint_timestamp_seconds start_time_seconds; do
	qgrep -x "# HELP shmrun_$f .*" "$tmp/m2" || fail "no HELP line for shmrun_$f"
	qgrep -x "# TYPE shmrun_$f \(counter\|gauge\)" "$tmp/m2" || fail "no TYPE line for shmrun_$f"
done
# per task {job, stage, instance}: 2 + 2 + 1 tasks
[ "$(grep -c '^shmrun_records_in_total{job="p",stage="[a-z]*",instance="[0-9]"} ' "$tmp/m2")" = 5 ] ||
	fail "expected 5 records_in_total samples labelled {job, stage, instance}"
qgrep -x 'shmrun_records_in_total{job="p",stage="gen",instance="1"} [0-9]*' "$tmp/m2" ||
	fail "no records_in_total of gen instance 1"
# per channel: gen[i] -> count[j] (4 rings), count[j] -> out[0] (2 rings)
[ "$(grep -c '^shmrun_ring_capacity_bytes{job="p",from_stage="[a-z]*",from_instance="[0-9]",to_stage="[a-z]*",to_instance="[0-9]"} 1048576$' "$tmp/m2")" = 6 ] ||
	fail "expected 6 ring_capacity_bytes samples of 1 MiB with {job, from_stage, from_instance, to_stage, to_instance}"
qgrep -x 'shmrun_ring_fill_bytes{job="p",from_stage="gen",from_instance="1",to_stage="count",to_instance="0"} [0-9]*' "$tmp/m2" ||
	fail "no ring_fill_bytes of gen[1] -> count[0]"
[ "$(grep -c '^shmrun_worker_sleep_seconds_total{job="p",worker="[01]",cpu="[0-9]*"} ' "$tmp/m2")" = 2 ] ||
	fail "expected 2 worker_sleep_seconds_total samples"
qgrep -x 'shmrun_up{job="p"} 1' "$tmp/m2" || fail "shmrun_up is not 1"
qgrep -x 'shmrun_state{job="p",state="running"} 1' "$tmp/m2" || fail "state running is not 1"
[ "$(value "$tmp/m2" shmrun_restarts_total 'job="p"')" = 0 ] || fail "restarts_total is not 0"
# the start time is now, give or take the run
st=$(value "$tmp/m2" shmrun_start_time_seconds 'job="p"')
[ $((st - $(date +%s))) -le 1 ] && [ $(($(date +%s) - st)) -le 120 ] ||
	fail "start_time_seconds $st is not the start of this run"
# the values move: the source made more, count received more (it emits at
# end of input only), its state holds the 100 keys, the workers ran
in1=$(value "$tmp/m1" shmrun_records_in_total 'stage="gen"')
in2=$(value "$tmp/m2" shmrun_records_in_total 'stage="gen"')
out1=$(value "$tmp/m1" shmrun_records_in_total 'stage="count"')
out2=$(value "$tmp/m2" shmrun_records_in_total 'stage="count"')
keys2=$(value "$tmp/m2" shmrun_keys 'stage="count"')
bytes1=$(value "$tmp/m1" shmrun_bytes_out_total 'stage="gen"')
bytes2=$(value "$tmp/m2" shmrun_bytes_out_total 'stage="gen"')
busy2=$(awk '/^shmrun_busy_seconds_total\{.*stage="count"/ { s += $NF } END { print (s > 0) }' "$tmp/m2")
[ "$in2" -gt "$in1" ] || fail "records_in_total of gen did not grow: $in1 then $in2"
[ "$in2" -lt 600000 ] || fail "records_in_total of gen is $in2 while the job runs"
[ "$out2" -gt "$out1" ] || fail "records_in_total of count did not grow: $out1 then $out2"
[ "$bytes2" -gt "$bytes1" ] || fail "bytes_out_total of gen did not grow: $bytes1 then $bytes2"
[ "$keys2" = 100 ] || fail "keys of count is $keys2 after 1.5 s, expected the 100 keys"
[ "$busy2" = 1 ] || fail "busy_seconds_total of count is 0 after 1.5 s"
echo "ok scrapes: records_in_total of gen $in1 -> $in2, of count $out1 -> $out2"

# --- 2. other paths and methods --------------------------------------------------
code=$(curl -sS -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/")
[ "$code" = 404 ] || fail "GET / answered $code, expected 404"
code=$(curl -sS -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/metricsx")
[ "$code" = 404 ] || fail "GET /metricsx answered $code, expected 404"
code=$(curl -sS -o /dev/null -w '%{http_code}' -X POST -d x "http://127.0.0.1:$port/metrics")
[ "$code" = 405 ] || fail "POST /metrics answered $code, expected 405"
# no worker holds a socket: only the launcher listens
for w in $(pgrep -P "$launcher"); do
	! ls -l "/proc/$w/fd" 2> /dev/null | qgrep socket: || fail "worker $w holds a socket"
done
echo "ok 404, 405, no socket in the workers"
# another job on the same port (a second run of the same job is refused
# earlier, for its name): refused for the port, before it locks or creates
# anything; the first one goes on serving
rc=0
sed 's/^path = out.tsv/path = other.tsv/; s/^\[job\]/[job]\nname = p-other/' "$tmp/p.conf" > "$tmp/q.conf"
(cd "$tmp" && "$shmrun" q.conf) 2> "$tmp/second.log" || rc=$?
[ "$rc" = 2 ] || fail "a second job on the port exited $rc, expected 2"
[ ! -e "$tmp/other.tsv" ] || fail "the refused job created its output"
qgrep -F "q.conf:4: metrics = 127.0.0.1:$port: the address is in use" "$tmp/second.log" ||
	{ cat "$tmp/second.log" >&2; fail "a second run is not refused for the port"; }
scrape "$url" "$tmp/m3"
[ "$(value "$tmp/m3" shmrun_records_in_total 'stage="gen"')" -ge "$in2" ] ||
	fail "records_in_total of gen went back"
echo "ok another job on the port is refused"

kill -TERM "$launcher"
rc=0
wait "$launcher" || rc=$?
launcher=
[ "$rc" = 143 ] || fail "SIGTERM without checkpoints: exit $rc, expected 143"
! curl -s --max-time 5 -o /dev/null "$url" || fail "the endpoint still answers after the job ended"
echo "ok the endpoint closes with the job"

# --- 3. through a restart: the endpoint stays, the counters never go back -------
start_job 127.0.0.1: "checkpoint_dir = ckpt" || fail "no free port found in 20 tries"
url="http://127.0.0.1:$port/metrics"
wait_manifest "$tmp/ckpt" || fail "no checkpoint within 30 s"
# the MANIFEST is renamed into place before the coordinator publishes the
# epoch in the metrics block: under load a scrape in between sees epoch 0
for _ in $(seq 100); do
	scrape "$url" "$tmp/r1"
	[ "$(value "$tmp/r1" shmrun_checkpoint_epoch 'job="p"')" -ge 1 ] && break
	sleep 0.1
done
before=$(value "$tmp/r1" shmrun_records_in_total 'stage="gen"')
[ "$(value "$tmp/r1" shmrun_checkpoint_epoch 'job="p"')" -ge 1 ] || fail "checkpoint_epoch is 0 after a checkpoint"
[ "$(value "$tmp/r1" shmrun_checkpoints_total 'job="p"')" -ge 1 ] || fail "checkpoints_total is 0 after a checkpoint"
qgrep '^shmrun_last_checkpoint_timestamp_seconds{job="p"} [0-9]' "$tmp/r1" || fail "no last checkpoint time"
kill -9 "$(first_child "$launcher")"
for _ in $(seq 100); do grep -q "restoring epoch" "$tmp/log" && break; sleep 0.1; done
sleep 0.5
scrape "$url" "$tmp/r2"
check_format "$tmp/r2"
after=$(value "$tmp/r2" shmrun_records_in_total 'stage="gen"')
[ "$(value "$tmp/r2" shmrun_restarts_total 'job="p"')" = 1 ] || fail "restarts_total is not 1 after kill -9"
[ "$(value "$tmp/r2" shmrun_restored_epoch 'job="p"')" -ge 1 ] || fail "restored_epoch is 0 after the restore"
[ "$after" -ge "$before" ] || fail "records_in_total of gen went back across the restart: $before then $after"
kill -TERM "$launcher"
wait "$launcher" || fail "the job did not recover from kill -9 and stop with a final checkpoint"
launcher=
qgrep "^stopped at epoch" "$tmp/log" || fail "no final checkpoint"
! curl -s --max-time 5 -o /dev/null "$url" || fail "the endpoint still answers after the job stopped"
echo "ok through a restart: restarts_total 1, records_in_total of gen $before -> $after"

# --- 4. bad values, at their line ------------------------------------------------
for v in 0 65536 99999 abc 1.2.3:80 host:9464 '[::1]' '::1:9464' '127.0.0.1:' '[zz]:80' ''; do
	job_conf "$tmp/bad.conf" "$v" ""
	rc=0
	"$shmrun" check "$tmp/bad.conf" > /dev/null 2> "$tmp/bad.log" || rc=$?
	[ "$rc" = 2 ] || fail "metrics = '$v': check exited $rc, expected 2"
	qgrep -F "$tmp/bad.conf:3: metrics" "$tmp/bad.log" ||
		{ cat "$tmp/bad.log" >&2; fail "metrics = '$v' not refused at $tmp/bad.conf:3"; }
done
job_conf "$tmp/bad.conf" "" 70000
"$shmrun" check "$tmp/bad.conf" > "$tmp/bad.log" 2>&1 || true
qgrep -F "bad.conf:3: metrics = '70000' in [job] names port 70000, out of range; a port is 1 to 65535" "$tmp/bad.log" ||
	fail "port 70000 not refused as out of range"
for v in 9464 :9464 127.0.0.1:9464 0.0.0.0:9464 '[::1]:9464' localhost:9464; do
	job_conf "$tmp/ok.conf" "$v" ""
	"$shmrun" check "$tmp/ok.conf" > /dev/null 2> "$tmp/ok.log" ||
		{ cat "$tmp/ok.log" >&2; fail "metrics = $v refused"; }
done
echo "ok bad values refused at their line, good ones accepted"

# --- 5. a port in use ------------------------------------------------------------
python3 - "$tmp/busyport" <<'PY' &
import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(1)
open(sys.argv[1], "w").write("%d\n" % s.getsockname()[1])
time.sleep(30)
PY
holder=$!
for _ in $(seq 100); do [ -s "$tmp/busyport" ] && break; sleep 0.1; done
busy=$(cat "$tmp/busyport")
job_conf "$tmp/busy.conf" 127.0.0.1: "$busy" "checkpoint_dir = busy_ckpt"
sed -i "s|^path = out.tsv|path = busy.tsv|" "$tmp/busy.conf"
rc=0
(cd "$tmp" && "$shmrun" --summary busy.json busy.conf) 2> "$tmp/log" || rc=$?
kill "$holder" 2> /dev/null || true
wait "$holder" 2> /dev/null || true
[ "$rc" = 2 ] || fail "a port in use: exit $rc, expected 2"
qgrep -F "busy.conf:3: metrics = 127.0.0.1:$busy: the address is in use" "$tmp/log" ||
	fail "a port in use is not named with its line and address"
qgrep "choose another port" "$tmp/log" || fail "the message does not say what to do"
[ ! -e "$tmp/busy.tsv" ] && [ ! -e "$tmp/busy.tsv.tmp" ] || fail "a refused run created its output"
[ ! -e "$tmp/busy.json" ] || fail "a run refused before it started wrote a summary"
[ ! -e "$tmp/busy_ckpt" ] || fail "a run refused for its port created its checkpoint_dir"
! grep -q "launcher: job" "$tmp/log" || fail "workers started although the port was in use"
echo "ok a port in use is refused before anything starts"

# --- 6. IPv6 loopback -------------------------------------------------------------
if python3 -c 'import socket; s = socket.socket(socket.AF_INET6); s.bind(("::1", 0))' 2> /dev/null; then
	start_job '[::1]:' || fail "no free IPv6 port found in 20 tries"
	scrape "http://[::1]:$port/metrics" "$tmp/m6"
	check_format "$tmp/m6"
	qgrep -x 'shmrun_up{job="p"} 1' "$tmp/m6" || fail "IPv6: shmrun_up is not 1"
	kill -TERM "$launcher"
	wait "$launcher" 2> /dev/null || true
	launcher=
	echo "ok [::1]:$port"
else
	echo "no IPv6 loopback here: [::1] not tested"
fi
echo "prometheus: all cases pass"
