#!/usr/bin/env bash
# tests/integration/postgres.sh SHMRUN: postgres_sink against a real server
# (a throw-away one in $tmp, pg_server.sh; missing server binaries FAIL).
#   - append, exactly-once: a paced sequence -> postgres_sink (width 2), worker
#     kill -9 several times and the launcher once (then run again): the table
#     holds every record exactly once, as the fault-free run's table does;
#   - upsert: a keyed count (emit = update) -> postgres_sink mode = upsert
#     under kills: the final table equals the fault-free counts;
#   - the server goes away mid-run (pg_terminate_backend of the sink's
#     connections, then the server stopped for 3 s): no loss, no duplicates;
#   - a stop, then --rescale of the sink's width 2 -> 1: every row once;
#   - an older checkpoint restored (the newest moved away): warned, no row lost;
#   - a fresh start (STREAM_RESET_STATE=1) forgets the job's progress rows
#     and appends again;
#   - without checkpoint_dir: every row written once (no faults);
#   - rows the server refuses (bigint column fed "k0"): exit 1, SQLSTATE named,
#     no restart;
#   - jobs starting at once on a new progress_table all start;
#   - before anything starts, exit 2 naming file:line: a wrong password
#     (never printed), a missing table, a missing column, upsert without a
#     unique index, a progress_table of another layout, a user who may not
#     create the progress table or lacks DELETE on it; `shmrun check` does not connect (passes with the server
#     stopped), `check --connect` reports what a run would.
set -euo pipefail
shmrun=${1:?usage: postgres.sh path/to/shmrun}
export LC_ALL=C
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pg_server.sh"

pg_start

# conf DIR TABLE COLUMNS MODE COUNT KEYS UPSTREAM [CKPT]: a job in DIR/job.conf
conf() {
	local dir=$1 table=$2 columns=$3 mode=$4 count=$5 keys=$6 up=$7 ckpt=${8:-yes}
	mkdir -p "$dir"
	{
		echo "[job]"
		echo "workers = 2"
		[ "$ckpt" = yes ] && echo "checkpoint_dir = ckpt" && echo "checkpoint_interval = 200ms"
		echo "restart_attempts = 30"
		echo "[gen]"
		echo "op = sequence"
		echo "count = $count"
		echo "keys = $keys"
		echo "rate = 20000"
		echo "piece_records = 5000"
		echo "width = 2"
		if [ "$up" = count ]; then
			echo "[count]"
			echo "op = count"
			echo "input = gen by key"
			echo "emit = update"
			echo "width = 2"
			echo "[out]"
			echo "input = count"
		else
			echo "[out]"
			echo "input = gen"
		fi
		echo "op = postgres_sink"
		echo "width = 2"
		echo "conninfo = $pg_conninfo"
		echo "table = $table"
		echo "columns = $columns"
		echo "mode = $mode"
		echo "retry_max = 30s"
	} > "$dir/job.conf"
}

# start DIR: run the job in the background
start() {
	(cd "$1" && exec "$shmrun" job.conf) 2>> "$tmp/log" &
	launcher=$!
}

# finish: wait for the job; it must exit 0
finish() {
	wait "$launcher" || fail "job failed (exit $?)"
	launcher=
}

# kill_workers DIR N: N times, once a checkpoint is there, kill -9 one worker
# (alternately 0 and 1) and wait for the restart
kill_workers() {
	local i w
	wait_manifest "$1/ckpt" || fail "no checkpoint in $1"
	for i in $(seq "$2"); do
		sleep 1
		w=$(pgrep -P "$launcher" | sed -n "$((i % 2 + 1))p" || true)
		[ -n "$w" ] || break # finished already
		kill -9 "$w" 2> /dev/null || true
		for _ in $(seq 200); do # the restart: new workers
			pgrep -P "$launcher" | qgrep -vx "$w" && break
			sleep 0.05
		done
	done
}

restarts() { grep -c "launcher: restart [0-9]* of" "$tmp/log" || true; }

# --- append, exactly-once under worker and launcher kills --------------------
psql_q "CREATE TABLE ev (k text NOT NULL, v bigint NOT NULL, t timestamptz)"
psql_q "CREATE TABLE ev_ref (k text NOT NULL, v bigint NOT NULL, t timestamptz)"
conf "$tmp/ref" ev_ref "k=key v=value" append 200000 1 gen
start "$tmp/ref"
finish
conf "$tmp/app" ev "k=key v=value" append 200000 1 gen
: > "$tmp/log"
start "$tmp/app"
wait_started
kill_workers "$tmp/app" 3
# the launcher: its workers die with it; the run again restores
if kill -0 "$launcher" 2> /dev/null; then
	kill -9 "$launcher"
	wait "$launcher" 2> /dev/null || true
	launcher=
	for _ in $(seq 100); do pgrep -f "$tmp/app" > /dev/null || break; sleep 0.05; done
	start "$tmp/app"
	wait_started
	kill_workers "$tmp/app" 2
fi
finish
[ "$(restarts)" -ge 2 ] || fail "append: expected restarts after the kills, got $(restarts); slow the job down"
psql_q "SELECT v FROM ev ORDER BY v" > "$tmp/ev.got"
psql_q "SELECT v FROM ev_ref ORDER BY v" > "$tmp/ev.ref"
seq 0 199999 > "$tmp/ev.exp"
cmp -s "$tmp/ev.ref" "$tmp/ev.exp" || fail "append: the fault-free run's table is not 0..199999"
cmp -s "$tmp/ev.got" "$tmp/ev.exp" ||
	fail "append: table differs after kills: $(psql_q "SELECT count(*), count(DISTINCT v) FROM ev") (rows, distinct; want 200000)"
[ "$(psql_q "SELECT count(*) FROM ev WHERE k <> 'k0'")" = 0 ] || fail "append: wrong keys"
# the progress rows: one per committed epoch and staging instance, none twice
[ "$(psql_q "SELECT count(*) > 0 FROM shmrun_progress WHERE job = 'job' AND sink = 'out' AND target = 'public.ev'")" = t ] ||
	fail "append: no progress rows"
echo "ok: append exactly-once under $(restarts) restarts"

# --- upsert of a keyed count (emit = update) under kills ---------------------
psql_q "CREATE TABLE wc (word text PRIMARY KEY, n bigint NOT NULL)"
psql_q "CREATE TABLE wc_ref (word text PRIMARY KEY, n bigint NOT NULL)"
conf "$tmp/upref" wc_ref "word=key n=value" upsert 100000 100 count
start "$tmp/upref"
finish
conf "$tmp/up" wc "word=key n=value" upsert 100000 100 count
: > "$tmp/log"
start "$tmp/up"
wait_started
kill_workers "$tmp/up" 3
finish
[ "$(restarts)" -ge 1 ] || fail "upsert: expected restarts after the kills"
psql_q "SELECT word, n FROM wc" | sort > "$tmp/wc.got"
psql_q "SELECT word, n FROM wc_ref" | sort > "$tmp/wc.ref"
for i in $(seq 0 99); do echo "k$i|1000"; done | sort > "$tmp/wc.exp"
cmp -s "$tmp/wc.ref" "$tmp/wc.exp" || fail "upsert: the fault-free counts are wrong"
cmp -s "$tmp/wc.got" "$tmp/wc.exp" || fail "upsert: counts differ after kills: $(diff "$tmp/wc.got" "$tmp/wc.exp" | head -5)"
echo "ok: upsert under $(restarts) restarts"

# --- the server goes away mid-run --------------------------------------------
psql_q "CREATE TABLE lost (k text, v bigint)"
conf "$tmp/lost" lost "k=key v=value" append 200000 1 gen
: > "$tmp/log"
start "$tmp/lost"
wait_started
wait_manifest "$tmp/lost/ckpt" || fail "lost: no checkpoint"
sleep 1
for _ in 1 2 3; do
	psql_q "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name LIKE 'shmrun job/out%'" > /dev/null
	sleep 0.7
done
pg_bounce 3
finish
psql_q "SELECT v FROM lost ORDER BY v" > "$tmp/lost.got"
cmp -s "$tmp/lost.got" "$tmp/ev.exp" ||
	fail "lost connection: table differs: $(psql_q "SELECT count(*), count(DISTINCT v) FROM lost")"
qgrep -E "connection to PostgreSQL .* lost|cannot connect to PostgreSQL" "$tmp/log" ||
	fail "lost connection: no warning about the lost connection"
echo "ok: lost connections and a server restart: no loss, no duplicates"

# --- a stop, then --rescale of the sink 2 -> 1 (pending epochs dealt by split)
psql_q "CREATE TABLE rs (k text, v bigint)"
conf "$tmp/rs" rs "k=key v=value" append 100000 1 gen
: > "$tmp/log"
start "$tmp/rs"
wait_started
wait_manifest "$tmp/rs/ckpt" || fail "rescale: no checkpoint"
sleep 1
kill -TERM "$launcher"
finish
qgrep "stopped at epoch" "$tmp/log" || fail "rescale: finished before the stop; slow it down"
sed -i '/^\[out\]/,$ s/^width = 2/width = 1/' "$tmp/rs/job.conf"
(cd "$tmp/rs" && "$shmrun" --rescale job.conf) 2>> "$tmp/log" || fail "rescale: the rescaled run failed"
[ "$(psql_q "SELECT count(*), count(DISTINCT v), min(v), max(v) FROM rs")" = "100000|100000|0|99999" ] ||
	fail "rescale: got $(psql_q "SELECT count(*), count(DISTINCT v), min(v), max(v) FROM rs")"
echo "ok: stop, then --rescale of the sink's width"

# --- restoring an older checkpoint than what was committed: warned, nothing lost
psql_q "CREATE TABLE old (k text, v bigint)"
conf "$tmp/old" old "k=key v=value" append 100000 1 gen
sed -i 's/^restart_attempts = 30/restart_attempts = 30\ncheckpoint_retain = 4/' "$tmp/old/job.conf"
: > "$tmp/log"
start "$tmp/old"
wait_started
wait_manifest "$tmp/old/ckpt" || fail "older: no checkpoint"
sleep 1.5
kill -TERM "$launcher"
finish
qgrep "stopped at epoch" "$tmp/log" || fail "older: finished before the stop; slow it down"
newest=$(ls -d "$tmp/old/ckpt"/ckpt-* | sort -t- -k2 -n | tail -1)
mv "$newest" "$tmp/old.moved"
(cd "$tmp/old" && "$shmrun" job.conf) 2>> "$tmp/log" || fail "older: the run from the older checkpoint failed"
qgrep "epochs [0-9]*\.\.[0-9]* were committed into public.old after checkpoint [0-9]*, which is restored" "$tmp/log" ||
	fail "older: no warning about the epochs committed after the restored checkpoint"
[ "$(psql_q "SELECT count(DISTINCT v), min(v), max(v) FROM old")" = "100000|0|99999" ] ||
	fail "older: rows lost: $(psql_q "SELECT count(*), count(DISTINCT v), min(v), max(v) FROM old")"
echo "ok: an older checkpoint restored: warned, no row lost ($(psql_q "SELECT count(*) - 100000 FROM old") written twice)"

# --- a fresh start appends again, with a clean progress table ----------------
psql_q "CREATE TABLE again (k text, v bigint)"
conf "$tmp/again" again "k=key v=value" append 2000 1 gen
: > "$tmp/log"
(cd "$tmp/again" && "$shmrun" job.conf) 2>> "$tmp/log" || fail "fresh: first run failed"
(cd "$tmp/again" && STREAM_RESET_STATE=1 "$shmrun" job.conf) 2>> "$tmp/log" || fail "fresh: second run failed"
[ "$(psql_q "SELECT count(*), count(DISTINCT v) FROM again")" = "4000|2000" ] ||
	fail "fresh: want every row twice, got $(psql_q "SELECT count(*), count(DISTINCT v) FROM again")"
qgrep "fresh start: forgot" "$tmp/log" || fail "fresh: no word about the earlier run's progress rows"
echo "ok: a fresh start appends again"

# --- without checkpoint_dir ---------------------------------------------------
psql_q "CREATE TABLE noc (k text, v bigint, t timestamptz)"
conf "$tmp/noc" noc "k=key v=value" append 50000 1 gen no
: > "$tmp/log"
(cd "$tmp/noc" && "$shmrun" job.conf) 2>> "$tmp/log" || fail "no checkpoints: run failed"
[ "$(psql_q "SELECT count(*), count(DISTINCT v), min(v), max(v) FROM noc")" = "50000|50000|0|49999" ] ||
	fail "no checkpoints: got $(psql_q "SELECT count(*), count(DISTINCT v), min(v), max(v) FROM noc")"
echo "ok: without checkpoints every row once"

# --- fields and event time ---------------------------------------------------
psql_q "CREATE TABLE ft (k text, whole text, f1 bigint, f3 text, t timestamptz)"
mkdir -p "$tmp/ft"
cat > "$tmp/ft/job.conf" << CONF
[job]
checkpoint_dir = ckpt
[read]
op = sequence
count = 3
event_time = sequence
event_time_start = 1700000000000
event_time_step = 1500ms
[out]
op = postgres_sink
input = read
conninfo = $pg_conninfo
table = ft
columns = k=key whole=value f1=f1 f3=f3 t=event_time
CONF
(cd "$tmp/ft" && "$shmrun" job.conf) 2> "$tmp/log" || fail "fields: run failed"
[ "$(psql_q "SELECT k, whole, f1, f3 IS NULL, (extract(epoch FROM t) * 1000)::bigint FROM ft ORDER BY f1")" = \
	"k0|0|0|t|1700000000000
k0|1|1|t|1700000001500
k0|2|2|t|1700000003000" ] || fail "fields: got $(psql_q "SELECT * FROM ft ORDER BY f1")"
# COPY's special bytes in values: backslash, a literal \N, TAB-separated fields, CR
psql_q "CREATE TABLE esc (whole text, f1 text, f2 text, f3 text)"
mkdir -p "$tmp/esc"
printf 'a\\b\tc\n\\N\n\tx\ty\rz\n' > "$tmp/esc/in.txt"
cat > "$tmp/esc/job.conf" << CONF
[job]
checkpoint_dir = ckpt
[read]
op = file_source
path = in.txt
[out]
op = postgres_sink
input = read
conninfo = $pg_conninfo
table = esc
columns = whole=value f1=f1 f2=f2 f3=f3
CONF
(cd "$tmp/esc" && "$shmrun" job.conf) 2> "$tmp/log" || fail "escapes: run failed"
psql_q "SELECT concat_ws('|', whole, f1, coalesce(f2, '<null>'), coalesce(f3, '<null>')) FROM esc" > "$tmp/esc.got"
printf 'a\\b\tc|a\\b|c|<null>\n\\N|\\N|<null>|<null>\n\tx\ty\rz||x|y\rz\n' | sort > "$tmp/esc.exp"
sort "$tmp/esc.got" | cmp -s - "$tmp/esc.exp" || fail "escapes: got $(cat "$tmp/esc.got"), want $(cat "$tmp/esc.exp")"
echo "ok: key, value, fields, event_time, escapes"

# --- rows the server refuses: the task fails, and the job is not restarted --
psql_q "CREATE TABLE typed (n bigint, v bigint)"
conf "$tmp/typed" typed "n=key v=value" append 1000 1 gen
rc=0
(cd "$tmp/typed" && "$shmrun" job.conf) > /dev/null 2> "$tmp/log" || rc=$?
[ "$rc" = 1 ] || fail "refused rows: want exit 1, got $rc"
qgrep 'COPY into public.typed failed: .*invalid input syntax for type bigint: "k0".*(SQLSTATE 22P02); the server refuses these rows' "$tmp/log" ||
	fail "refused rows: no message naming the value and SQLSTATE"
[ "$(restarts)" = 0 ] || fail "refused rows: restarted $(restarts) times; a restart meets the same rows"
[ "$(psql_q "SELECT count(*) FROM typed")" = 0 ] || fail "refused rows: some rows went in"
echo "ok: refused rows fail the job without restarts"

# --- errors before anything starts ------------------------------------------
expect_exit2() { # dir pattern...: run, expect exit 2, "nothing was started", every pattern
	local dir=$1 rc=0 p
	shift
	(cd "$dir" && "$shmrun" job.conf) > /dev/null 2> "$tmp/log" || rc=$?
	[ "$rc" = 2 ] || fail "$dir: want exit 2, got $rc"
	qgrep "nothing was started" "$tmp/log" || fail "$dir: no 'nothing was started'"
	for p in "$@"; do qgrep -e "$p" "$tmp/log" || fail "$dir: message lacks '$p'"; done
	[ ! -d "$dir/ckpt" ] || [ -z "$(ls "$dir/ckpt")" ] || fail "$dir: a checkpoint was written"
}
conf "$tmp/pw" ev "k=key v=value" append 10 1 gen
sed -i "s|^conninfo = .*|conninfo = $pg_conninfo password=wrong-secret-42|" "$tmp/pw/job.conf"
line=$(grep -n '^conninfo' "$tmp/pw/job.conf" | cut -d: -f1)
expect_exit2 "$tmp/pw" "job.conf:$line:" "password authentication failed" "cannot connect to PostgreSQL"
qgrep "wrong-secret-42" "$tmp/log" && fail "the password is in the message"
conf "$tmp/notab" nosuch "k=key v=value" append 10 1 gen
line=$(grep -n '^table' "$tmp/notab/job.conf" | cut -d: -f1)
expect_exit2 "$tmp/notab" "job.conf:$line:" "table = nosuch: no such table"
conf "$tmp/nocol" ev "k=key vv=value" append 10 1 gen
line=$(grep -n '^columns' "$tmp/nocol/job.conf" | cut -d: -f1)
expect_exit2 "$tmp/nocol" "job.conf:$line:" "has no column vv (it has: k v t)"
conf "$tmp/nouniq" ev "k=key v=value" upsert 10 1 gen
line=$(grep -n '^mode' "$tmp/nouniq/job.conf" | cut -d: -f1)
expect_exit2 "$tmp/nouniq" "job.conf:$line:" "mode = upsert needs a unique index"
conf "$tmp/badcol" ev "k=key v=valu" append 10 1 gen
expect_exit2 "$tmp/badcol" "'v=valu' is not COLUMN=SOURCE"
psql_q "CREATE TABLE badprog (x int)"
conf "$tmp/badprog" ev "k=key v=value" append 10 1 gen
echo "progress_table = badprog" >> "$tmp/badprog/job.conf"
line=$(grep -n '^progress_table' "$tmp/badprog/job.conf" | cut -d: -f1)
expect_exit2 "$tmp/badprog" "job.conf:$line:" "progress_table = badprog exists .* but is not a progress table"
# a user with INSERT on its table but no CREATE on the schema (PostgreSQL 15's
# default for who does not own the database): refused before the start
# (exit 2) while the progress table is missing, with the DDL to give its
# owner; then without DELETE on it; then it runs. It once failed after the
# start, and a missing DELETE right looped through restarts.
psql_q "CREATE ROLE lim LOGIN PASSWORD '$PGPASSWORD'"
psql_q "CREATE TABLE limt (k text, v bigint)"
psql_q "GRANT INSERT, SELECT ON limt TO lim"
conf "$tmp/lim" limt "k=key v=value" append 50 1 gen
sed -i "s|^conninfo = .*|conninfo = ${pg_conninfo/user=postgres/user=lim}|" "$tmp/lim/job.conf"
echo "progress_table = lim_progress" >> "$tmp/lim/job.conf"
line=$(grep -n '^progress_table' "$tmp/lim/job.conf" | cut -d: -f1)
expect_exit2 "$tmp/lim" "job.conf:$line: .*progress_table = lim_progress does not exist and this user may not create it" \
	"have its owner run CREATE TABLE IF NOT EXISTS lim_progress (job text NOT NULL, sink text NOT NULL, target text NOT NULL, instance integer NOT NULL, epoch bigint NOT NULL, committed_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (job, sink, target, instance, epoch)), and GRANT SELECT, INSERT, DELETE ON lim_progress"
rc=0
"$shmrun" check --connect "$tmp/lim/job.conf" > /dev/null 2> "$tmp/log" || rc=$?
[ "$rc" = 2 ] && qgrep "lim_progress does not exist and this user may not create it" "$tmp/log" ||
	fail "check --connect said ok for a user who may not create the progress table"
psql_q "CREATE TABLE lim_progress (job text NOT NULL, sink text NOT NULL, target text NOT NULL, instance integer NOT NULL, epoch bigint NOT NULL, committed_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (job, sink, target, instance, epoch))"
psql_q "GRANT SELECT, INSERT ON lim_progress TO lim"
expect_exit2 "$tmp/lim" "job.conf:$line: .*progress_table = lim_progress .*this user has no DELETE right on it; have its owner GRANT SELECT, INSERT, DELETE ON lim_progress"
psql_q "GRANT DELETE ON lim_progress TO lim"
(cd "$tmp/lim" && "$shmrun" job.conf) > /dev/null 2> "$tmp/log" || fail "a user with the rights it needs (no CREATE) failed: exit $?"
[ "$(psql_q "SELECT count(*) FROM limt")" = 50 ] || fail "least-privilege user: $(psql_q "SELECT count(*) FROM limt") rows, want 50"
echo "ok: errors before the start"

# --- check connects only with --connect ---------------------------------------
"$shmrun" check --connect "$tmp/app/job.conf" > /dev/null 2> "$tmp/log" || fail "check --connect of a good job failed"
pg_stop
"$shmrun" check "$tmp/nocol/job.conf" > /dev/null 2> "$tmp/log" ||
	fail "check without --connect connected (or failed): $(cat "$tmp/log")"
rc=0
"$shmrun" check --connect "$tmp/app/job.conf" > /dev/null 2> "$tmp/log" || rc=$?
[ "$rc" = 2 ] || fail "check --connect with the server down: want exit 2, got $rc"
qgrep "cannot connect to PostgreSQL" "$tmp/log" || fail "check --connect: no connection error"
pg_start_server
rc=0
"$shmrun" check --connect "$tmp/nocol/job.conf" > /dev/null 2> "$tmp/log" || rc=$?
[ "$rc" = 2 ] && qgrep "has no column vv" "$tmp/log" || fail "check --connect: missing column not reported"
rc=0
"$shmrun" --connect "$tmp/app/job.conf" > /dev/null 2> "$tmp/log" || rc=$?
[ "$rc" = 2 ] && qgrep -- "--connect goes with \`shmrun check\`" "$tmp/log" || fail "--connect with a run: want a usage error"
echo "ok: check and check --connect"

# --- jobs starting at once on a new progress table ------------------------------
# CREATE TABLE IF NOT EXISTS raced itself: one of several jobs starting at once
# failed on pg_type_typname_nsp_index (exit 2). 4 jobs, 4 times, a new table each
psql_q "CREATE TABLE par (k text, v bigint)"
for round in 1 2 3 4; do
	pids=()
	for j in 1 2 3 4; do
		conf "$tmp/par$j" par "k=key v=value" append 100 1 gen
		sed -i "s/^\[job\]/[job]\nname = par$j/; s/^rate = .*/rate = 100000/" "$tmp/par$j/job.conf"
		echo "progress_table = prog_race$round" >> "$tmp/par$j/job.conf"
		rm -rf "$tmp/par$j/ckpt"
		(cd "$tmp/par$j" && exec "$shmrun" job.conf) > /dev/null 2> "$tmp/par$j.log" &
		pids+=($!)
	done
	for j in 1 2 3 4; do
		wait "${pids[$((j - 1))]}" || { cp "$tmp/par$j.log" "$tmp/log"; fail "round $round: job par$j of 4 starting at once failed"; }
	done
done
[ "$(psql_q "SELECT count(*) FROM par")" = 1600 ] || fail "4 x 4 jobs of 100 rows: $(psql_q "SELECT count(*) FROM par") rows"
echo "ok: jobs starting at once create one progress table"
echo "PASS"
