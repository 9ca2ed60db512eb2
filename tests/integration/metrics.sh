#!/usr/bin/env bash
# tests/integration/metrics.sh SHMRUN: the live counters themselves (issue 13
# §1, runtime/metrics.h), read through `shmrun top --json`:
#   - totals never go back: a worker killed with -9 restarts from a checkpoint
#     and every task's records, bytes and times are at least what they were
#     (each restarted worker starts from what the block holds); restarts 1;
#   - a paced file job sampled while it runs: the source's records out equal
#     its records in, its bytes in (the input it read) are within the input's
#     size, downstream received no more than was sent, ring fill is within
#     capacity; the summary counts every line;
#   - SHMRUN_COUNTERS=off (what benchmarks compare against) runs the job the
#     same, with nothing to attach to: top says why, exit 1;
#   - a job restarting again and again (a crash at every start) is served
#     during its restart backoff: ps shows it "restarting", and `shmrun stop`
#     ends it there at once (exit 0, stopped at its last checkpoint).
set -euo pipefail
shmrun=${1:?usage: metrics.sh path/to/shmrun}
. "$(dirname "$0")/lib.sh"

pids=()
cleanup_metrics() {
	for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null || true; done
	cleanup
}
trap cleanup_metrics EXIT

snap() { # name file: one JSON snapshot of running job NAME, totals only
	"$shmrun" top --json --interval 0 "$1" > "$2"
}

# ---- totals never go back across a restart ----------------------------------
d=$tmp/restart
mkdir -p "$d"
cat > "$d/job.conf" <<CONF
[job]
name = mx-restart
workers = 2
checkpoint_dir = ckpt
checkpoint_interval = 100ms
[gen]
op = sequence
count = 30000000
keys = 1000
width = 2
rate = 1000000
[count]
op = count
input = gen by key
width = 2
[out]
op = null_sink
input = count
CONF
(cd "$d" && exec "$shmrun" job.conf 2> log) &
launcher=$!
pids+=("$launcher")
wait_started "$d/log" || fail "no start line: $(cat "$d/log")"
ok=0
for _ in $(seq 100); do
	if snap mx-restart "$d/a.json" 2> /dev/null &&
		python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["checkpoints"]["completed"] >= 2 and d["stages"][0]["records_out"] > 0 else 1)' "$d/a.json"; then
		ok=1
		break
	fi
	sleep 0.1
done
[ $ok = 1 ] || fail "no checkpoint and records within 10 s: $(cat "$d/log")"
worker=$(first_child "$launcher")
[ -n "$worker" ] || fail "no worker of $launcher"
kill -9 "$worker"
ok=0
for _ in $(seq 100); do
	if snap mx-restart "$d/b.json" 2> /dev/null &&
		python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["restarts"] == 1 and d["state"] == "running" else 1)' "$d/b.json"; then
		ok=1
		break
	fi
	sleep 0.1
done
[ $ok = 1 ] || fail "top shows no restart within 10 s: $(cat "$d/log")"
sleep 0.5
snap mx-restart "$d/c.json" || fail "top after the restart"
python3 - "$d/a.json" "$d/b.json" "$d/c.json" <<'PY' || fail "a total went back across the restart"
import json, sys
a, b, c = (json.load(open(p)) for p in sys.argv[1:])
keys = ["records_in", "records_out", "bytes_in", "bytes_out", "busy_ns", "idle_ns",
        "backpressure_ns"]
def tasks(d):
    return {(s["name"], t["instance"]): t for s in d["stages"] for t in s["tasks"]}
ta, tb, tc = tasks(a), tasks(b), tasks(c)
assert ta.keys() == tb.keys() == tc.keys(), (ta.keys(), tb.keys())
for k in ta:
    for f in keys:
        assert ta[k][f] <= tb[k][f] <= tc[k][f], (k, f, ta[k][f], tb[k][f], tc[k][f])
# and the job moved on after the restart
assert sum(t["records_out"] for (s, i), t in tc.items() if s == "gen") > \
       sum(t["records_out"] for (s, i), t in tb.items() if s == "gen"), "no progress"
assert c["checkpoints"]["completed"] >= a["checkpoints"]["completed"]
assert c["restored_epoch"] is not None and c["restored_epoch"] >= 1
PY
kill -TERM "$launcher"
wait "$launcher" || true

# ---- a finished job's counters equal what it did ----------------------------
d=$tmp/done
mkdir -p "$d"
seq 1 200000 > "$d/in.txt"
size=$(stat -c %s "$d/in.txt")
cat > "$d/job.conf" <<CONF
[job]
name = mx-done
workers = 2
[read]
op = file_source
path = in.txt
piece_bytes = 64K
width = 2
rate = 100000
[words]
op = tokenize
input = read
width = 2
[count]
op = count
input = words by key
width = 2
[out]
op = file_sink
input = count
path = out.tsv
CONF
(cd "$d" && exec "$shmrun" job.conf 2> log) &
launcher=$!
pids+=("$launcher")
wait_started "$d/log" || fail "no start line: $(cat "$d/log")"
last=""
# sample until the job ends; top --interval 1 ends with the job (state done)
for _ in $(seq 200); do
	snap mx-done "$d/s.json" 2> /dev/null && last=$(cat "$d/s.json") || break
	sleep 0.05
done
[ -n "$last" ] || fail "never attached to mx-done"
wait "$launcher" || fail "mx-done failed: $(cat "$d/log")"
printf '%s\n' "$last" > "$d/last.json"
python3 - "$d/last.json" "$size" <<'PY' || fail "the counters of mx-done are wrong"
import json, sys
d = json.load(open(sys.argv[1])); size = int(sys.argv[2])
st = {s["name"]: s for s in d["stages"]}
# the last snapshot was taken while it ran: counts up to then, within bounds
r = st["read"]
assert 0 < r["records_in"] <= 200000, r["records_in"]
assert r["records_out"] == r["records_in"], (r["records_out"], r["records_in"])
assert 0 < r["bytes_in"] <= size, (r["bytes_in"], size)
w = st["words"]
assert w["records_in"] <= r["records_out"]
for s in d["stages"]:
    for t in s["tasks"]:
        if t["ring_fill_bytes"] is not None:
            assert 0 <= t["ring_fill_bytes"] <= t["ring_capacity_bytes"], t
PY
qgrep -E "records in: +200000$" "$d/log" || fail "summary: $(tail -5 "$d/log")"

# ---- SHMRUN_COUNTERS=off ------------------------------------------------------
d=$tmp/off
mkdir -p "$d"
sed 's/^name = mx-done/name = mx-off/; s/^rate = 100000/rate = 50000/' "$tmp/done/job.conf" > "$d/job.conf"
cp "$tmp/done/in.txt" "$d/"
(cd "$d" && SHMRUN_COUNTERS=off exec "$shmrun" job.conf 2> log) &
launcher=$!
pids+=("$launcher")
wait_started "$d/log" || fail "no start line: $(cat "$d/log")"
rc=0
for _ in $(seq 50); do
	rc=0
	"$shmrun" top --json --interval 0 mx-off > "$d/t.out" 2> "$d/t.err" || rc=$?
	[ $rc != 0 ] && qgrep -v "no running job" "$d/t.err" && break
	sleep 0.1
done
[ $rc = 1 ] || fail "top of a job without counters: exit $rc, $(cat "$d/t.err")"
qgrep -i "counters" "$d/t.err" || fail "top does not say why: $(cat "$d/t.err")"
wait "$launcher" || fail "mx-off failed: $(cat "$d/log")"
cmp <(sort "$d/out.tsv") <(sort "$tmp/done/out.tsv") || fail "SHMRUN_COUNTERS=off changed the output"
# ---- served during a restart's backoff -----------------------------------------
d=$tmp/backoff
mkdir -p "$d"
cat > "$d/job.conf" <<CONF
[job]
name = mx-backoff
workers = 1
checkpoint_dir = ckpt
checkpoint_interval = 100ms
[gen]
op = sequence
count = 100000000
keys = 10
[count]
op = count
input = gen by key
[out]
op = null_sink
input = count
CONF
# every start crashes in gen after a while: restarts with backoff 0.1,
# 0.2, 0.4, 0.8, 1.6 s ...
(cd "$d" && SHMRUN_TEST_CALLBACK=sequence.produce:segv:400 exec "$shmrun" job.conf 2> log) &
launcher=$!
pids+=("$launcher")
wait_started "$d/log" || fail "no start line: $(cat "$d/log")"
seen=0
for _ in $(seq 300); do
	"$shmrun" ps --json > "$d/ps.json" 2> /dev/null || true
	if python3 -c 'import json,sys; j=[x for x in json.load(open(sys.argv[1])) if x["job"]=="mx-backoff"]; sys.exit(0 if j and j[0]["state"]=="restarting" and j[0]["restarts"]>=3 else 1)' "$d/ps.json" 2> /dev/null; then
		seen=1
		break
	fi
	sleep 0.05
done
[ $seen = 1 ] || fail "ps never showed mx-backoff restarting (restart 3 on): $(cat "$d/ps.json"; tail -3 "$d/log")"
start=$SECONDS
"$shmrun" stop --timeout 10 mx-backoff > "$d/stop.out" 2>&1 || fail "stop during the backoff: $(cat "$d/stop.out"; tail -3 "$d/log")"
rc=0
wait "$launcher" || rc=$?
[ $rc = 0 ] || fail "a job stopped during its backoff exited $rc: $(tail -3 "$d/log")"
[ $((SECONDS - start)) -le 3 ] || fail "stop during the backoff took $((SECONDS - start)) s"
qgrep "during restart backoff: stopping" "$d/log" || fail "no backoff stop in the log: $(tail -3 "$d/log")"
echo "metrics: ok"
