#!/usr/bin/env bash
# tests/integration/follow_dpkg.sh SHMRUN: the shipped example
# docs/examples/follow-dpkg.conf against a real PostgreSQL server (pg_server.sh),
# on a copy of this machine's /var/log/dpkg.log (or of a made-up one where
# there is none) that the test appends to and rotates (rename and create, as
# logrotate does), with a worker killed -9 and the job stopped and resumed
# across a rotation: the table must equal the actions per package counted by
# awk over every line written, and the run must stop with exit 0.
set -euo pipefail
shmrun=${1:?usage: follow_dpkg.sh path/to/shmrun}
export LC_ALL=C
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pg_server.sh"
conf=$(cd "$(dirname "$0")/../../docs/examples" && pwd)/follow-dpkg.conf

pg_start
psql_q "CREATE TABLE dpkg_actions (package text PRIMARY KEY, actions bigint NOT NULL)"

d=$tmp/logs
mkdir -p "$d"
if [ -s /var/log/dpkg.log ]; then
	cp /var/log/dpkg.log "$d/dpkg.log"
else
	printf '2026-01-01 10:00:00 startup archives unpack\n2026-01-01 10:00:01 install base:amd64 <none> 1\n' > "$d/dpkg.log"
fi
# the actions per package of every line written, as the example counts them
want() {
	cat "$d"/dpkg.log* |
		awk '$3 ~ /^(install|upgrade|remove|purge|configure|trigproc)$/ && NF >= 4 { c[$4]++ }
		     END { for (p in c) print p "|" c[p] }' | sort
}
got() { psql_q "SELECT package || '|' || actions FROM dpkg_actions ORDER BY 1" | sort; }
# wait_table: until the table equals want (60 s)
wait_table() {
	want > "$tmp/want"
	for _ in $(seq 600); do
		got > "$tmp/got"
		cmp -s "$tmp/want" "$tmp/got" && return 0
		sleep 0.1
	done
	diff "$tmp/want" "$tmp/got" | head -8 >&2 || true
	fail "$1: the table is not the log's actions per package"
}
# append N: N more lines for made-up packages, as dpkg writes them
n=0
append() {
	local i
	for i in $(seq "$1"); do
		n=$((n + 1))
		printf '2026-12-02 10:%02d:%02d install pkg%d:amd64 <none> 1.%d\n' $((n / 60 % 60)) $((n % 60)) $((n % 37)) "$n"
		printf '2026-12-02 10:%02d:%02d status installed pkg%d:amd64 1.%d\n' $((n / 60 % 60)) $((n % 60)) $((n % 37)) "$n"
	done >> "$d/dpkg.log"
}
# rotate K: logrotate's create: rename, then a new empty log
rotate() {
	mv "$d/dpkg.log" "$d/dpkg.log.$1"
	: > "$d/dpkg.log"
}
start() {
	(cd "$tmp" && exec "$shmrun" --set read.path="$d/dpkg.log" --set db.conninfo="$pg_conninfo" \
		--set job.checkpoint_dir="$tmp/ck" "$conf") 2>> "$tmp/log" &
	launcher=$!
	wait_started || fail "no start"
}
stop() {
	local rc=0
	kill -TERM "$launcher"
	wait "$launcher" || rc=$?
	launcher=
	[ $rc -eq 0 ] || fail "$1: the stop exited $rc, not 0"
	qgrep "stopped at epoch" "$tmp/log" || fail "$1: no final checkpoint"
}

start
wait_table "the log as it was"
echo "ok the example counts the actions of the log it starts on"
append 300
wait_table "lines appended"
rotate 1
append 200
wait_table "a rotation (rename and create)"
echo "ok lines appended, and a rotation, reach the table"
w=$(first_child "$launcher")
kill -9 "$w"
append 200
wait_table "after kill -9 of worker 0"
qgrep "launcher: restart 1 of" "$tmp/log" || fail "no restart after kill -9"
echo "ok kill -9 of a worker: every action counted once"
stop "the first stop"
# while the job is down: more lines, a rotation, more lines
append 100
rotate 2
append 100
: > "$tmp/log"
start
wait_table "a rotation while the job was down"
stop "the second stop"
echo "ok stopped with exit 0, then resumed across a rotation made while it was down"
