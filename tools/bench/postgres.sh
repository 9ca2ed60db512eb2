#!/usr/bin/env bash
# tools/bench/postgres.sh [options]: postgres_sink's throughput against a
# throw-away PostgreSQL server (initdb + pg_ctl in a temp dir, unix socket
# only, fsync off: the database's disk is not what is measured), beside
# psql's \copy of the same rows from a file into the same server, in the same
# run; prints rows/s of each and the ratio.
#
#   tools/bench/postgres.sh                    # N = 1000000 rows, width 1, 3 reps
#   tools/bench/postgres.sh --rows 200000 --width 2 --reps 1
#   tools/bench/postgres.sh --latency --interval 500ms   # needs socket_source
#
# Throughput: a job `sequence (count = N) -> postgres_sink (columns = k=key
# v=value)`, checkpoint_interval 1s (--interval), timed from the launch to its
# exit, which is after the final epoch's commit: every row committed. The
# reference: the same N rows (k0<TAB>i) written to a file beforehand, loaded
# with `\copy t FROM file` (one COPY, one transaction), timed alike. Each is
# the best of --reps into a freshly truncated table; the row count is checked.
#
# --latency: a job `socket_source (listen = PORT, protocol = tcp, framing =
# line) -> postgres_sink (columns = sent=f1 line=value)`; lines "ns-since-epoch
# TAB n" are sent at --rate lines/s for --seconds, and the table's
# committed_at - sent per row (a trigger stamps clock_timestamp() at insert)
# gives p50/p99/max of send-to-commit. The job sets allow_data_loss_on_crash
# (socket_source cannot be replayed; nothing crashes here).
#
# Options: --shmrun PATH (default: build/tools/shmrun beside this tree),
# --rows N, --width W, --reps R, --interval DURATION, --latency, --rate R,
# --seconds S.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
shmrun=$here/build/tools/shmrun
rows=1000000
width=1
reps=3
interval=1s
latency=0
rate=1000
seconds=10
while [ $# -gt 0 ]; do
	case $1 in
	--shmrun) shmrun=$2; shift 2 ;;
	--rows) rows=$2; shift 2 ;;
	--width) width=$2; shift 2 ;;
	--reps) reps=$2; shift 2 ;;
	--interval) interval=$2; shift 2 ;;
	--latency) latency=1; shift ;;
	--rate) rate=$2; shift 2 ;;
	--seconds) seconds=$2; shift 2 ;;
	-h | --help) sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "postgres.sh: unknown option $1 (--help)" >&2; exit 2 ;;
	esac
done
[ -x "$shmrun" ] || { echo "postgres.sh: no shmrun at $shmrun (--shmrun PATH)" >&2; exit 2; }

# what tests/integration/lib.sh gives its tests: $tmp, cleanup, fail
tmp=$(mktemp -d)
export XDG_RUNTIME_DIR="$tmp/run"
mkdir -m 700 "$XDG_RUNTIME_DIR"
launcher=
cleanup() {
	[ -n "$launcher" ] && kill -9 "$launcher" 2> /dev/null || true
	rm -rf "$tmp"
}
fail() {
	echo "postgres.sh: $*" >&2
	exit 1
}
. "$here/tests/integration/pg_server.sh" # sets the EXIT trap: server stopped, $tmp removed
pg_start

now_ns() { date +%s%N; }

job_conf() { # source-lines... : a job into table t
	{
		echo "[job]"
		echo "workers = $((width > 1 ? 2 : 1))"
		echo "checkpoint_dir = ckpt"
		echo "checkpoint_interval = $interval"
		# socket_source cannot be replayed: the latency job accepts it
		[ "$latency" = 1 ] && echo "allow_data_loss_on_crash = true"
		cat
		echo "[out]"
		echo "op = postgres_sink"
		echo "input = src"
		echo "width = $width"
		echo "conninfo = $pg_conninfo"
		echo "table = t"
	} > "$tmp/job/job.conf"
}

if [ "$latency" = 1 ]; then
	command -v python3 > /dev/null || fail "--latency needs python3 (the sender)"
	psql_q "CREATE TABLE t (sent bigint, line text, at timestamptz DEFAULT clock_timestamp())"
	port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	mkdir -p "$tmp/job"
	job_conf << CONF
[src]
op = socket_source
listen = 127.0.0.1:$port
protocol = tcp
framing = line
CONF
	echo "columns = sent=f1 line=value" >> "$tmp/job/job.conf"
	if ! "$shmrun" check "$tmp/job/job.conf" > "$tmp/check.log" 2>&1; then
		cat "$tmp/check.log" >&2
		fail "--latency: the job was refused (see above)"
	fi
	(cd "$tmp/job" && exec "$shmrun" job.conf) 2> "$tmp/job.log" &
	launcher=$!
	python3 - "$port" "$rate" "$seconds" << 'PY'
import socket, sys, time
port, rate, secs = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
for _ in range(200):
    try:
        s = socket.create_connection(("127.0.0.1", port)); break
    except OSError:
        time.sleep(0.05)
else:
    sys.exit("no socket_source listening on port %d" % port)
t0, n = time.monotonic(), 0
while time.monotonic() - t0 < secs:
    due = t0 + n / rate
    d = due - time.monotonic()
    if d > 0:
        time.sleep(d)
    s.sendall(b"%d\t%d\n" % (time.time_ns(), n)); n += 1
s.close()
PY
	sleep 2
	"$shmrun" stop job > /dev/null 2>&1 || kill -TERM "$launcher" 2> /dev/null || true
	wait "$launcher" || true
	launcher=
	psql_q "SELECT count(*),
		round((percentile_cont(0.5) WITHIN GROUP (ORDER BY ms))::numeric, 1),
		round((percentile_cont(0.99) WITHIN GROUP (ORDER BY ms))::numeric, 1),
		round(max(ms)::numeric, 1)
		FROM (SELECT (extract(epoch FROM at) * 1e3 - sent / 1e6) AS ms FROM t) x" |
		awk -F'|' -v i="$interval" -v r="$rate" '{ printf "postgres_latency checkpoint_interval=%s rate_lines_s=%s rows=%s p50_ms=%s p99_ms=%s max_ms=%s\n", i, r, $1, $2, $3, $4 }'
	exit 0
fi

psql_q "CREATE TABLE t (k text, v bigint)"
seq 0 $((rows - 1)) | sed 's/^/k0\t/' > "$tmp/rows.tsv"
mkdir -p "$tmp/job"
job_conf << CONF
[src]
op = sequence
count = $rows
width = $width
CONF
echo "columns = k=key v=value" >> "$tmp/job/job.conf"

best_sink=0 best_copy=0
for r in $(seq "$reps"); do
	psql_q "TRUNCATE t"
	rm -rf "$tmp/job/ckpt"
	t0=$(now_ns)
	(cd "$tmp/job" && "$shmrun" --no-progress job.conf) 2> "$tmp/job.log" || { tail "$tmp/job.log" >&2; fail "the job failed"; }
	t1=$(now_ns)
	[ "$(psql_q "SELECT count(*) FROM t")" = "$rows" ] || fail "the job wrote $(psql_q "SELECT count(*) FROM t") rows, not $rows"
	sink=$((rows * 1000000000 / (t1 - t0)))
	[ "$sink" -gt "$best_sink" ] && best_sink=$sink
	psql_q "TRUNCATE t"
	t0=$(now_ns)
	psql "$pg_conninfo" -X -q -v ON_ERROR_STOP=1 -c "\\copy t FROM '$tmp/rows.tsv'" > /dev/null
	t1=$(now_ns)
	[ "$(psql_q "SELECT count(*) FROM t")" = "$rows" ] || fail "\\copy wrote the wrong row count"
	copy=$((rows * 1000000000 / (t1 - t0)))
	[ "$copy" -gt "$best_copy" ] && best_copy=$copy
	echo "rep $r: postgres_sink $sink rows/s, \\copy $copy rows/s" >&2
done
awk -v n="$rows" -v w="$width" -v i="$interval" -v s="$best_sink" -v c="$best_copy" 'BEGIN {
	printf "postgres rows=%d width=%d checkpoint_interval=%s sink_rows_s=%d copy_rows_s=%d sink_vs_copy=%.2f\n", n, w, i, s, c, s / c }'
