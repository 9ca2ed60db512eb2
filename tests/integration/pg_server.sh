# tests/integration/pg_server.sh: a throw-away PostgreSQL server for the shell
# tests and tools/bench/postgres.sh. Sourced after lib.sh (needs $tmp, fail()).
#
# pg_start: initdb + pg_ctl start in $tmp/pg, listening on a unix socket in
# that directory only (listen_addresses=''), password authentication
# (scram-sha-256) for user postgres with password $PGPASSWORD. As root the
# server runs as the `postgres` user (initdb refuses root); $tmp is opened to
# it. FAILS (not skips) when the server binaries are missing: tools/bootstrap.sh
# installs them. pg_stop (also on exit, through the EXIT trap set here) stops
# it with -m immediate; pg_bounce SECONDS stops it and starts it again after
# SECONDS (run the job in the background meanwhile).
#
# After pg_start: $pg_conninfo (without password), psql_q SQL (one query,
# unaligned, tuples only), $pg_bin.
pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2> /dev/null | sort -V | tail -1)
pg_dir=$tmp/pg
pg_port=5432 # the socket is in $pg_dir: no clash with another server
export PGPASSWORD=shmrun-test-pw
pg_conninfo="host=$pg_dir port=$pg_port dbname=postgres user=postgres"
pg_as=()
pg_up=0

pg_stop() {
	if [ "$pg_up" = 1 ] && [ -f "$pg_dir/data/postmaster.pid" ]; then
		"${pg_as[@]}" "$pg_bin/pg_ctl" -D "$pg_dir/data" -m immediate -w stop > /dev/null 2>&1 || true
	fi
	pg_up=0
}

pg_cleanup() {
	pg_stop
	cleanup
}
trap pg_cleanup EXIT

pg_start_server() {
	"${pg_as[@]}" "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/server.log" -w -t 60 \
		-o "-k $pg_dir -p $pg_port -c listen_addresses='' -c fsync=off -c max_connections=50" \
		start > /dev/null || { tail -20 "$pg_dir/server.log" >&2; fail "pg_ctl start failed"; }
	pg_up=1
}

pg_start() {
	[ -n "$pg_bin" ] && [ -x "$pg_bin/initdb" ] && [ -x "$pg_bin/pg_ctl" ] ||
		fail "PostgreSQL server binaries not found (/usr/lib/postgresql/*/bin/initdb): run tools/bootstrap.sh (installs postgresql)"
	command -v psql > /dev/null || fail "psql not found: run tools/bootstrap.sh"
	mkdir -p "$pg_dir"
	if [ "$(id -u)" = 0 ]; then
		chmod 711 "$tmp"
		chown postgres:postgres "$pg_dir"
		pg_as=(setpriv --reuid=postgres --regid=postgres --init-groups)
	fi
	printf '%s\n' "$PGPASSWORD" > "$pg_dir/pw"
	[ "$(id -u)" = 0 ] && chown postgres "$pg_dir/pw"
	"${pg_as[@]}" "$pg_bin/initdb" -D "$pg_dir/data" -U postgres --pwfile="$pg_dir/pw" \
		--auth=scram-sha-256 -E UTF8 --no-sync > "$pg_dir/initdb.log" 2>&1 ||
		{ tail -20 "$pg_dir/initdb.log" >&2; fail "initdb failed"; }
	pg_start_server
}

pg_bounce() {
	pg_stop
	sleep "$1"
	pg_start_server
}

psql_q() {
	psql "$pg_conninfo" -X -q -At -v ON_ERROR_STOP=1 -c "$1"
}
