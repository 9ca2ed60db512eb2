#!/usr/bin/env bash
# tests/integration/top.sh SHMRUN: `shmrun top` against real jobs (issue 13 §3).
#   - bad usage exits 2; no running job, an unknown job, several jobs with
#     none named, a job that has exited: exit 1 with a message naming them;
#   - `top --json` read twice while a paced job runs: records counted go up,
#     rates are > 0 and near the configured rate, stage names, operators and
#     widths are the topology's, every task's worker and CPU are the ones
#     `shmrun plan` prints, every worker's pid is the process pinned there;
#   - the snapshot without a terminal names every stage and task;
#   - a worker killed (-9): top shows one restart, the restored epoch, the new
#     worker's pid, and rates again;
#   - a job that ends while `top --json --interval` samples it: its final
#     numbers, state "done", exit 0;
#   - the screen in a real terminal (tmux): it shows the stages, q quits with
#     status 0 and leaves the terminal as it was (canonical mode, echo, the
#     normal screen); so does ^C; a job that ends while watched is reported
#     and top exits 0 (skipped with a message without tmux).
# Jobs run under the test's own XDG_RUNTIME_DIR (lib.sh), so other jobs of
# this user are not seen and do not count as "several".
set -euo pipefail
shmrun=${1:?usage: top.sh path/to/shmrun}
. "$(dirname "$0")/lib.sh"

pids=() # every background launcher, killed on exit
sock="$tmp/tmux.sock"
cleanup_top() {
	tmux -S "$sock" kill-server 2> /dev/null || true
	for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null || true; done
	cleanup
}
trap cleanup_top EXIT

conf() { # dir name count rate
	mkdir -p "$1"
	cat > "$1/job.conf" <<CONF
[job]
name = $2
workers = 2
checkpoint_dir = ckpt
checkpoint_interval = 200ms
[gen]
op = sequence
count = $3
keys = 1000
width = 2
rate = $4
[count]
op = count
input = gen by key
width = 2
[out]
op = null_sink
input = count
CONF
}

start() { # dir: start the job there in the background; sets $launcher
	(cd "$1" && exec "$shmrun" job.conf 2> log) &
	launcher=$!
	pids+=("$launcher")
	wait_started "$1/log" || fail "$1: no start line in 60 s"
	kill -0 "$launcher" 2> /dev/null || fail "$1: the job exited at once: $(cat "$1/log")"
	# the socket is served from the launcher's loop: wait until top attaches
	for _ in $(seq 100); do
		"$shmrun" top --json --interval 0 "$(sed -n 's/^name = //p' "$1/job.conf")" \
			> /dev/null 2>&1 && return 0
		sleep 0.05
	done
	fail "$1: top cannot attach within 5 s"
}

expect_status() { # status pattern cmd...: exit status and a stderr line
	local want=$1 pat=$2 rc=0
	shift 2
	"$@" > "$tmp/out" 2> "$tmp/err" || rc=$?
	[ "$rc" = "$want" ] || fail "$*: exit $rc, expected $want: $(cat "$tmp/err")"
	qgrep -E "$pat" "$tmp/err" || fail "$*: stderr lacks /$pat/: $(cat "$tmp/err")"
}

# --- usage and no job --------------------------------------------------------
expect_status 2 "interval must be seconds" "$shmrun" top --interval soon
expect_status 2 "interval must be seconds" "$shmrun" top --interval -1
expect_status 2 "at most one JOB" "$shmrun" top a b
expect_status 2 "unrecognized option" "$shmrun" top --bogus
expect_status 1 "^shmrun top: no running job$" "$shmrun" top
expect_status 1 "nosuch" "$shmrun" top nosuch
expect_status 1 "nosuch" "$shmrun" top --json nosuch
[ ! -s "$tmp/out" ] || fail "top --json of no job printed something: $(cat "$tmp/out")"
"$shmrun" top --help | qgrep -F "usage: shmrun top" || fail "top --help"
echo "ok usage, no job, unknown job"

# --- one paced job: values move, names and placement right ------------------
d=$tmp/paced
conf "$d" toppaced 100000000 20000
start "$d"
main_launcher=$launcher
"$shmrun" plan "$d/job.conf" > "$tmp/plan" || fail "shmrun plan"
"$shmrun" top --json --interval 0.5 toppaced > "$tmp/j1" || fail "top --json (first)"
sleep 1
# JOB left out: the only running job
"$shmrun" top --json --interval 1 > "$tmp/j2" || fail "top --json without JOB"
python3 - "$tmp/j1" "$tmp/j2" "$tmp/plan" "$main_launcher" <<'PY' || fail "top --json values"
import json, sys
j1, j2 = (json.load(open(p)) for p in sys.argv[1:3])
plan = [l.split() for l in open(sys.argv[3]) if l[:1].isdigit()]
launcher = int(sys.argv[4])
def proc(pid, key): # a line of /proc/PID/status
    for l in open("/proc/%d/status" % pid):
        if l.startswith(key + ":"):
            return l.split()[1]
def check(c, what):
    if not c:
        sys.exit("FAIL: " + what)
for j in (j1, j2):
    check(j["format"] == 1, "format")
    check(j["job"] == "toppaced", "job name %r" % j["job"])
    check(j["pid"] == launcher, "pid %d, launcher %d" % (j["pid"], launcher))
    check(j["state"] == "running", "state %r" % j["state"])
    check(j["exit_status"] is None, "exit status while running")
    check(j["restarts"] == 0, "restarts")
    check(j["checkpoints"]["enabled"] and abs(j["checkpoints"]["interval_s"] - 0.2) < 1e-9,
          "checkpoint interval")
    check([(s["name"], s["operator"], s["width"]) for s in j["stages"]] ==
          [("gen", "sequence", 2), ("count", "count", 2), ("out", "null_sink", 1)],
          "stages %r" % [(s["name"], s["operator"], s["width"]) for s in j["stages"]])
    tasks = [(str(t["task"]), s["name"], str(t["instance"]), str(t["worker"]), str(t["cpu"]))
             for s in j["stages"] for t in s["tasks"]]
    check(tasks == [tuple(p[:5]) for p in plan], "placement %r vs plan %r" % (tasks, plan))
    # each worker: the CPU of its tasks in the plan, its pid a child of the
    # launcher pinned to that CPU alone, its tasks those the plan puts there
    check(len(j["workers"]) == 2, "workers")
    for w, jw in enumerate(j["workers"]):
        cpus = {p[4] for p in plan if p[3] == str(w)}
        check(cpus == {str(jw["cpu"])}, "worker %d cpu %r, plan %r" % (w, jw["cpu"], cpus))
        check(proc(jw["pid"], "PPid") == str(launcher), "worker %d pid %r: not the launcher's child" % (w, jw["pid"]))
        check(proc(jw["pid"], "Cpus_allowed_list") == str(jw["cpu"]), "worker %d pid %r: not on cpu %r" % (w, jw["pid"], jw["cpu"]))
        check(jw["tasks"] == [int(p[0]) for p in plan if p[3] == str(w)], "worker %d tasks %r" % (w, jw["tasks"]))
        for s in j["stages"]:
            for t in s["tasks"]:
                if t["worker"] == w:
                    check(t["pid"] == jw["pid"], "task %d pid" % t["task"])
    # the sources' outputs: 2 rings each (to count[0], count[1]); count's: 1 each
    check([len(t["outputs"]) for s in j["stages"] for t in s["tasks"]] == [2, 2, 1, 1, 0],
          "output rings")
    for s in j["stages"]:
        for t in s["tasks"]:
            for o in t["outputs"]:
                check(0 <= o["fill"] <= 1 and o["capacity_bytes"] > 0, "ring fill %r" % o)
check(j2["sampled_unix_ns"] > j1["sampled_unix_ns"], "sample times")
check(abs(j2["interval_s"] - 1) < 0.5, "interval %r" % j2["interval_s"])
for name in ("gen", "count"):
    s1 = next(s for s in j1["stages"] if s["name"] == name)
    s2 = next(s for s in j2["stages"] if s["name"] == name)
    check(s2["records_in"] > s1["records_in"] > 0,
          "%s records_in %d then %d" % (name, s1["records_in"], s2["records_in"]))
    check(s2["records_in_per_s"] > 0, "%s rate %r" % (name, s2["records_in_per_s"]))
    check(sum(t["records_in"] for t in s2["tasks"]) == s2["records_in"], "stage = sum of tasks")
    check(s2["busy_share"] is not None and 0 <= s2["busy_share"] <= 1, "busy share")
gen = next(s for s in j2["stages"] if s["name"] == "gen")
# paced at 20000/s for the stage: the rate over 1 s is that, give or take
check(5000 < gen["records_out_per_s"] < 60000, "gen rate %r" % gen["records_out_per_s"])
check(sum(w["turns"] for w in j2["workers"]) > sum(w["turns"] for w in j1["workers"]), "turns")
# checkpoints every 200 ms: some completed, each worker stalled for its snapshots
ck = j2["checkpoints"]
check(ck["completed"] > 0 and ck["last_epoch"] >= 1 and ck["age_s"] >= 0 and ck["duration_s"] > 0,
      "checkpoints %r" % ck)
check(ck["completed"] >= j1["checkpoints"]["completed"], "checkpoints completed go back")
check(all(w["checkpoint_stall_max_ns"] > 0 for w in j2["workers"]), "stalls %r" % j2["workers"])
PY
echo "ok top --json: values move, names and placement right"

"$shmrun" top --interval 0.3 toppaced > "$tmp/snap" || fail "top snapshot"
for s in "gen (sequence)" "count (count)" "out (null_sink)" "  gen[0]" "  gen[1]" "  count[1]" \
	"  out[0]" "job toppaced" "rates over" "WORKER"; do
	qgrep -F "$s" "$tmp/snap" || fail "the snapshot lacks '$s': $(cat "$tmp/snap")"
done
if qgrep -F $'\033' "$tmp/snap"; then fail "the snapshot has escape sequences"; fi
"$shmrun" top --interval 0 toppaced | qgrep -F "totals only" || fail "top --interval 0"
echo "ok snapshot without a terminal"

# --- several jobs, none named ----------------------------------------------
d2=$tmp/other
conf "$d2" topother 100000000 1000
start "$d2"
other=$launcher
expect_status 1 "2 jobs are running: topother, toppaced; name one" "$shmrun" top
"$shmrun" top --json --interval 0 topother | qgrep -F '"job": "topother"' ||
	fail "top of the second job by name"
kill -TERM "$other"
wait "$other" || fail "the second job's stop"
echo "ok several jobs"

# --- a restart: kill -9 a worker; top shows the restart and the new worker -----
old_pid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["workers"][1]["pid"])' "$tmp/j2")
kill -9 "$old_pid"
restarted=
for _ in $(seq 100); do
	"$shmrun" top --json --interval 0.2 toppaced > "$tmp/j4" || fail "top --json after a restart"
	if python3 - "$tmp/j4" "$old_pid" <<'PY'; then restarted=1; break; fi
import json, sys
j = json.load(open(sys.argv[1]))
w = j["workers"][1]["pid"]
sys.exit(0 if j["restarts"] == 1 and j["state"] == "running" and j["restored_epoch"] and
         w and w != int(sys.argv[2]) and j["stages"][0]["records_in_per_s"] > 0 else 1)
PY
	sleep 0.1
done
[ -n "$restarted" ] || fail "no restart seen by top: $(head -c 600 "$tmp/j4")"
"$shmrun" top --interval 0 toppaced | qgrep -E "restarts 1  restored epoch [0-9]+  this start" ||
	fail "the snapshot's header after a restart"
echo "ok a restart"

# --- a job that ends while sampled -------------------------------------------
d3=$tmp/short
conf "$d3" topshort 40000 20000
start "$d3"
short=$launcher
"$shmrun" top --json --interval 5 topshort > "$tmp/j3" || fail "top of a job that ends"
wait "$short" || fail "the short job failed"
python3 - "$tmp/j3" <<'PY' || fail "top --json of an ended job"
import json, sys
j = json.load(open(sys.argv[1]))
if j["state"] != "done" or j["exit_status"] != 0:
    sys.exit("FAIL: state %r exit %r" % (j["state"], j["exit_status"]))
gen = next(s for s in j["stages"] if s["name"] == "gen")
if gen["records_out"] != 40000 or gen["ended"] != 2:
    sys.exit("FAIL: gen made %r records, %r ended" % (gen["records_out"], gen["ended"]))
PY
expect_status 1 "topshort" "$shmrun" top topshort
echo "ok a job that ends while sampled"

# --- the screen in a terminal --------------------------------------------------
if ! command -v tmux > /dev/null 2>&1; then
	echo "skipped: the screen in a terminal (tmux is not installed; tools/bootstrap.sh installs it)"
	exit 0
fi
tmux_keep "$sock"
# watch_screen KEY: run top in a tmux pane, wait for its screen, send KEY;
# the pane records top's exit status and the terminal's settings before and after
cat > "$tmp/run-top.sh" <<SH
stty -a > '$tmp/stty0'
'$shmrun' top --interval 0.2 "\$1"
echo \$? > '$tmp/rc.tmp'
stty -a > '$tmp/stty'
mv '$tmp/rc.tmp' '$tmp/rc'
sleep 600
SH
watch_screen() {
	local key=$1 name=s$RANDOM
	rm -f "$tmp/rc" "$tmp/stty"
	tmux -S "$sock" new-session -d -s "$name" -x 160 -y 50 "bash '$tmp/run-top.sh' toppaced"
	for _ in $(seq 100); do
		tmux -S "$sock" capture-pane -p -t "$name" > "$tmp/pane" 2> /dev/null || true
		qgrep -F "rates over" "$tmp/pane" && break
		sleep 0.1
	done
	for s in "job toppaced" "running" "gen (sequence)" "count (count)" "out (null_sink)" \
		"  gen[1]" "WORKER" "q quits" "checkpoints: every 200ms" "rates over"; do
		qgrep -F "$s" "$tmp/pane" || fail "the screen lacks '$s': $(cat "$tmp/pane")"
	done
	tmux -S "$sock" send-keys -t "$name" "$key"
	for _ in $(seq 100); do [ -e "$tmp/rc" ] && break; sleep 0.1; done
	[ "$(cat "$tmp/rc" 2> /dev/null)" = 0 ] || fail "top after $key: status $(cat "$tmp/rc" 2> /dev/null)"
	# the terminal as it was: the same settings, the normal screen back
	diff "$tmp/stty0" "$tmp/stty" > /dev/null || fail "stty after $key: $(diff "$tmp/stty0" "$tmp/stty")"
	qgrep -E "(^| )icanon( |$)" "$tmp/stty" && qgrep -E "(^| )echo( |$)" "$tmp/stty" || fail "not canonical after $key"
	tmux -S "$sock" capture-pane -p -t "$name" > "$tmp/pane"
	if qgrep -F "STAGE / TASK" "$tmp/pane"; then fail "top's screen stayed after $key"; fi
	tmux -S "$sock" kill-session -t "$name"
}
watch_screen q
echo "ok the screen; q quits and restores the terminal"
watch_screen C-c
echo "ok ^C quits and restores the terminal"

# a job that ends while watched: reported, its final numbers, exit 0
conf "$d3" topshort 60000 20000
rm -rf "$d3/ckpt"
start "$d3"
short=$launcher
rm -f "$tmp/rc"
tmux -S "$sock" new-session -d -s end -x 160 -y 50 "bash '$tmp/run-top.sh' topshort"
wait "$short" || fail "the short job failed"
for _ in $(seq 100); do [ -e "$tmp/rc" ] && break; sleep 0.1; done
[ "$(cat "$tmp/rc" 2> /dev/null)" = 0 ] || fail "top of an ending job: status $(cat "$tmp/rc" 2> /dev/null)"
tmux -S "$sock" capture-pane -p -t end > "$tmp/pane"
qgrep -F "job topshort ended: done, exit status 0" "$tmp/pane" || fail "no end message: $(cat "$tmp/pane")"
qgrep -F "gen (sequence)" "$tmp/pane" || fail "no final numbers: $(cat "$tmp/pane")"
# the workers exited: their pids are `-` (a pid there would name a process that may be reused)
awk '$1 == "WORKER" { w = 1; next } w && $1 ~ /^[0-9]+$/ { n++; if ($3 != "-") bad++ } END { exit !(n > 0 && !bad) }' \
	"$tmp/pane" || fail "the final screen shows worker pids: $(cat "$tmp/pane")"
tmux -S "$sock" kill-session -t end
echo "ok a job that ends while watched"

kill -TERM "$main_launcher"
wait "$main_launcher" || fail "the paced job's stop"
expect_status 1 "toppaced" "$shmrun" top toppaced
echo "ok"
