#!/usr/bin/env bash
# tests/integration/summary.sh SHMRUN: `shmrun --summary FILE` writes a JSON
# document at exit on every way a started run ends (runtime/summary.c,
# docs/observability.md "The summary file"), checked with python3's json
# against the job's input and output:
#   - done: records read by the source == input lines, records written by the
#     sink == output lines, per-stage sums == the sums of its instances, wall
#     and CPU time, no FILE.tmp left;
#   - failed: status failed, exit status 1, the cause (the bad record) named;
#   - kill -9 of a worker with checkpoints: restarts 1, a restored epoch, and
#     the printed summary counts every start's records (regression: it counted
#     only those after the restore, fewer than the source made);
#   - stopped with a final checkpoint: "stopped at epoch N", N as printed;
#     signaled without checkpoints: status signaled, signal 15;
#   - an unwritable FILE (missing directory, a file as directory, a
#     directory as FILE), or one that is the topology file or an output, is
#     refused before anything starts, exit 2, naming it.
set -euo pipefail
shmrun=${1:?usage: summary.sh path/to/shmrun}
export LC_ALL=C
. "$(dirname "$0")/lib.sh"

# py FILE CODE: run python3 CODE with the summary FILE loaded as `d`
py() {
	local f=$1
	shift
	python3 - "$f" "$@" <<PY || fail "summary $f: check failed (see above)"
import json, sys
d = json.load(open(sys.argv[1]))
def stage(name):
    return [s for s in d["stages"] if s["name"] == name][0]
$(cat)
PY
}

# --- 1. done: file_source -> tokenize -> count -> file_sink -----------------------
mkdir -p "$tmp/d"
for i in $(seq 1 3000); do echo "w$((i % 97)) x$((i % 13)) line $i"; done > "$tmp/d/in.txt"
cat > "$tmp/d/wc.conf" <<'CONF'
[job]
workers = 2
[read]
op = file_source
path = in.txt
piece_bytes = 4K
width = 2
[words]
op = tokenize
input = read
width = 2
[count]
op = count
input = words by key
width = 2
combine = false
[out]
op = file_sink
input = count
path = out.tsv
CONF
(cd "$tmp/d" && "$shmrun" --summary s.json wc.conf) 2> "$tmp/log" || fail "the job failed"
lines_in=$(wc -l < "$tmp/d/in.txt")
lines_out=$(wc -l < "$tmp/d/out.tsv")
[ ! -e "$tmp/d/s.json.tmp" ] || fail "s.json.tmp left behind"
py "$tmp/d/s.json" "$lines_in" "$lines_out" "$(wc -c < "$tmp/d/in.txt")" <<'PY'
lines_in, lines_out, bytes_in = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
assert d["job"] == "wc", d["job"]
assert d["conf"] == "wc.conf", d["conf"]
assert d["status"] == "done" and d["reason"] == "done" and d["exit_status"] == 0, d["reason"]
assert d["counters"] is True
assert [s["name"] for s in d["stages"]] == ["read", "words", "count", "out"]
assert stage("read")["records_in"] == lines_in, (stage("read")["records_in"], lines_in)
assert d["totals"]["records_read"] == lines_in
assert stage("out")["records_out"] == lines_out, (stage("out")["records_out"], lines_out)
assert d["totals"]["records_written"] == lines_out
# every word reaches count (no combiner): 4 tokens per line, "w.. x.. line N"
assert stage("count")["records_in"] == stage("words")["records_out"]
assert stage("words")["records_out"] == 4 * lines_in, stage("words")["records_out"]
for s in d["stages"]:
    assert len(s["instances"]) == s["width"], s
    for k in ("records_in", "records_out", "bytes_in", "bytes_out", "records_bad", "keys",
              "state_bytes"):
        assert s[k] == sum(i[k] for i in s["instances"]), (s["name"], k)
# a file source's bytes in are the file's bytes; what count emits reaches out
assert stage("read")["bytes_in"] == bytes_in, (stage("read")["bytes_in"], bytes_in)
assert stage("out")["records_in"] == stage("count")["records_out"] == lines_out
assert stage("out")["bytes_in"] == stage("count")["bytes_out"] > 0
# state at the end: count holds one key per output line
assert stage("count")["keys"] == lines_out, (stage("count")["keys"], lines_out)
assert stage("count")["state_bytes"] > 0 and d["totals"]["keys"] == lines_out
assert d["restarts"] == 0 and d["restored_epoch"] == 0
assert d["checkpoints"]["completed"] == 0
assert d["wall_seconds"] > 0 and d["cpu_seconds"]["total"] > 0
assert d["cpu_seconds"]["total"] >= d["cpu_seconds"]["user"]
assert d["workers"] == 2
PY
# the printed summary says the same
qgrep -x "records in: *$lines_in" "$tmp/log" || fail "printed records in is not $lines_in"
qgrep -x "records out: *$lines_out" "$tmp/log" || fail "printed records out is not $lines_out"
echo "ok done: $lines_in lines in, $lines_out out"

# --- 2. failed: a bad record with on_bad_record = fail ----------------------------
mkdir -p "$tmp/f"
printf 'a 1\nb 2\nbad\nc 3\n' > "$tmp/f/in.txt"
cat > "$tmp/f/f.conf" <<'CONF'
[read]
op = file_source
path = in.txt
[ex]
op = extract
input = read
key = 1
value = 2
on_bad_record = fail
[out]
op = file_sink
input = ex
path = out.tsv
CONF
rc=0
(cd "$tmp/f" && "$shmrun" --summary s.json f.conf) 2> "$tmp/log" || rc=$?
[ "$rc" = 1 ] || fail "the failing job exited $rc, expected 1"
py "$tmp/f/s.json" <<'PY'
assert d["status"] == "failed" and d["exit_status"] == 1, d
assert d["reason"].startswith("failed: "), d["reason"]
assert "bad record" in d["cause"] and "in.txt:3" in d["cause"], d["cause"]
assert d["reason"] == "failed: " + d["cause"]
PY
echo "ok failed: the cause is named"

# --- 3. kill -9 of a worker, restart from a checkpoint -------------------------
mkdir -p "$tmp/k"
cat > "$tmp/k/k.conf" <<'CONF'
[job]
workers = 2
checkpoint_dir = ckpt
checkpoint_interval = 100ms
[gen]
op = sequence
count = 40000
piece_records = 100
rate = 10000
width = 2
[out]
op = file_sink
input = gen
path = out.tsv
width = 2
CONF
(cd "$tmp/k" && exec "$shmrun" --summary s.json k.conf) 2> "$tmp/log" &
launcher=$!
wait_started || fail "the job did not start"
wait_manifest "$tmp/k/ckpt" || fail "no checkpoint within 30 s"
sleep 0.3
victim=$(first_child "$launcher")
[ -n "$victim" ] || fail "no worker found"
kill -9 "$victim"
wait "$launcher" || fail "the job did not recover from kill -9"
launcher=
qgrep "restart 1 of" "$tmp/log" || fail "no restart logged"
out=$(cat "$tmp/k"/out.tsv.* | wc -l)
[ "$out" = 40000 ] || fail "output has $out lines, expected 40000"
printed_in=$(sed -n 's/^records in: *//p' "$tmp/log")
py "$tmp/k/s.json" "$printed_in" <<'PY'
printed_in = int(sys.argv[2])
assert d["status"] == "done" and d["exit_status"] == 0, d["reason"]
assert d["restarts"] == 1, d["restarts"]
assert d["restored_epoch"] >= 1, d["restored_epoch"]
assert d["checkpoints"]["completed"] >= 1
assert d["checkpoints"]["last_epoch"] >= d["restored_epoch"]
# totals since launch: what the source made before the crash counts too
assert d["totals"]["records_read"] >= 40000, d["totals"]["records_read"]
assert d["totals"]["records_written"] >= 40000, d["totals"]["records_written"]
assert printed_in == d["totals"]["records_read"], (printed_in, d["totals"]["records_read"])
PY
[ "$printed_in" -ge 40000 ] ||
	fail "printed records in is $printed_in after a restart, fewer than the 40000 made (only the last start's)"
echo "ok kill -9: restarts 1, printed records in $printed_in"

# --- 4. stopped with a final checkpoint; signaled without ------------------------
rm -rf "$tmp/k/ckpt" "$tmp/k"/out.tsv* "$tmp/k/s.json"
(cd "$tmp/k" && exec "$shmrun" --summary s.json k.conf) 2> "$tmp/log" &
launcher=$!
wait_started || fail "the job did not start"
wait_manifest "$tmp/k/ckpt" || fail "no checkpoint within 30 s"
kill -TERM "$launcher"
wait "$launcher" || fail "a stop with checkpoint exited non-zero"
launcher=
epoch=$(sed -n 's/^stopped at epoch //p' "$tmp/log")
[ -n "$epoch" ] || fail "no 'stopped at epoch' line"
py "$tmp/k/s.json" "$epoch" <<'PY'
e = int(sys.argv[2])
assert d["status"] == "stopped" and d["exit_status"] == 0, d
assert d["stopped_epoch"] == e and d["reason"] == "stopped at epoch %d" % e, d["reason"]
PY
echo "ok stopped at epoch $epoch"

sed -i '/^checkpoint_/d' "$tmp/k/k.conf"
rm -f "$tmp/k"/out.tsv* "$tmp/k/s.json"
(cd "$tmp/k" && exec "$shmrun" --summary s.json k.conf) 2> "$tmp/log" &
launcher=$!
wait_started || fail "the job did not start"
sleep 0.5
kill -TERM "$launcher"
rc=0
wait "$launcher" || rc=$?
launcher=
[ "$rc" = 143 ] || fail "SIGTERM without checkpoints: exit $rc, expected 143"
py "$tmp/k/s.json" <<'PY'
assert d["status"] == "signaled" and d["signal"] == 15 and d["exit_status"] == 143, d
assert d["reason"].startswith("signal: "), d["reason"]
# stopped midway; every worker published its last numbers as it exited
assert d["totals"]["records_written"] <= d["totals"]["records_read"] < 40000, d["totals"]
PY
echo "ok signaled"

# --- 5. an unwritable FILE is refused before anything starts ----------------------
cd "$tmp/d"
rm -f out.tsv
: > afile
mkdir -p adir
for bad in "$tmp/nodir/s.json:does not exist" "$tmp/d/afile/s.json:is not a directory" \
	"$tmp/d/adir:is a directory"; do
	path=${bad%%:*}
	why=${bad#*:}
	rc=0
	"$shmrun" --summary "$path" wc.conf 2> "$tmp/log" || rc=$?
	[ "$rc" = 2 ] || fail "--summary $path: exit $rc, expected 2"
	qgrep -F -- "--summary $path" "$tmp/log" || fail "--summary $path: the path is not named"
	qgrep -F -- "$why" "$tmp/log" || fail "--summary $path: not '$why'"
	[ ! -e out.tsv ] || fail "--summary $path: the job ran"
done
if [ "$(id -u)" != 0 ]; then
	mkdir -p ro && chmod 555 ro
	rc=0
	"$shmrun" --summary ro/s.json wc.conf 2> "$tmp/log" || rc=$?
	chmod 755 ro
	[ "$rc" = 2 ] && qgrep "cannot create files in ro" "$tmp/log" || fail "a read-only directory is not refused"
	[ ! -e out.tsv ] || fail "--summary ro/s.json: the job ran"
fi
# over the topology file or an output: refused, neither touched
cp wc.conf wc.conf.orig
for over in wc.conf:"is the topology file" "$tmp/d/./out.tsv:is an output of stage 'out'"; do
	path=${over%%:*}
	rc=0
	"$shmrun" --summary "$path" wc.conf 2> "$tmp/log" || rc=$?
	[ "$rc" = 2 ] || fail "--summary $path: exit $rc, expected 2"
	qgrep -F -- "--summary $path ${over#*:}" "$tmp/log" || fail "--summary $path: not refused as ${over#*:}"
	cmp -s wc.conf wc.conf.orig || fail "--summary $path: the topology file changed"
	[ ! -e out.tsv ] || fail "--summary $path: the job ran"
done
rc=0
"$shmrun" check --summary s.json wc.conf 2> "$tmp/log" || rc=$?
[ "$rc" = 2 ] && qgrep "summary goes with a run" "$tmp/log" || fail "check --summary not refused"
cd /
echo "ok bad paths refused up front"
echo "summary: all cases pass"
