#!/usr/bin/env bash
# tests/integration/nexmark_queries.sh SHMRUN SHMRUN_BENCH QUERY_DIR [QUERY...]:
# the NEXMark queries of docs/examples/nexmark (issue 12 §7). QUERY_DIR is
# the build's copy (build/docs/examples/nexmark: every qN.conf beside
# nexmark_queries.so). For each query (default: every qN.conf there):
#   - the conf runs as it is, and its output equals, as a multiset, the
#     single-threaded reference's over the same events
#     (`shmrun-bench nexmark --reference qN`, tools/bench/nexmark_ref*.c),
#     and is not empty;
#   - with 1 worker and every width 1 it equals the reference again;
# then the operators' bad input: a stream of the wrong kind fails the job
# with a message naming the operator's stage and the record.
set -euo pipefail
shmrun=${1:?usage: nexmark_queries.sh SHMRUN SHMRUN_BENCH QUERY_DIR [QUERY...]}
bench=${2:?}
qdir=${3:?}
shift 3
export LC_ALL=C
. "$(dirname "$0")/lib.sh"

queries=("$@")
if [ ${#queries[@]} -eq 0 ]; then
	for f in "$qdir"/q*.conf; do
		queries+=("$(basename "$f" .conf)")
	done
fi

# the value of KEY in CONF (its first occurrence: every source of a query
# has the same count and seed)
key_of() {
	sed -n "s/^$1[ \t]*=[ \t]*\([0-9]*\).*/\1/p" "$2" | head -1
}

# check QUERY DIR: the output of the run in DIR (every out/QUERY.tsv*) equals
# the reference over the conf's count and seed.
check() {
	local q=$1 d=$2 n seed
	n=$(key_of count "$d/$q.conf")
	seed=$(key_of seed "$d/$q.conf")
	[ -n "$n" ] && [ -n "$seed" ] || fail "$q.conf: no count or seed"
	"$bench" nexmark --reference "$q" --events "$n" --seed "$seed" | sort > "$tmp/want" ||
		fail "$q: the reference failed"
	cat "$d"/out/"$q".tsv* | sort > "$tmp/got"
	[ -s "$tmp/want" ] || fail "$q: the reference output nothing over $n events"
	if ! cmp -s "$tmp/want" "$tmp/got"; then
		diff "$tmp/want" "$tmp/got" | head -8 >&2 || true
		fail "$q ($d): output differs from the reference ($(wc -l < "$tmp/got") lines," \
			"want $(wc -l < "$tmp/want"))"
	fi
	echo "ok $q ($(basename "$d")): $(wc -l < "$tmp/got") lines equal the reference's over $n events"
}

for q in "${queries[@]}"; do
	[ -f "$qdir/$q.conf" ] || fail "$qdir/$q.conf: no such query"
	# as shipped
	d=$tmp/$q
	mkdir -p "$d"
	cp "$qdir/$q.conf" "$qdir/nexmark_queries.so" "$d/"
	(cd "$d" && "$shmrun" "$q.conf") 2> "$tmp/log" || fail "$q: exit $?"
	check "$q" "$d"
	# one worker, every stage at width 1
	d=$tmp/$q.w1
	mkdir -p "$d"
	cp "$qdir/nexmark_queries.so" "$d/"
	sed -e 's/^workers[ \t]*=.*/workers = 1/' -e 's/^width[ \t]*=.*/width = 1/' \
		"$qdir/$q.conf" > "$d/$q.conf"
	(cd "$d" && "$shmrun" "$q.conf") 2> "$tmp/log" || fail "$q at width 1: exit $?"
	check "$q" "$d"
done

# ---- the wrong stream: a plugin operator fed persons fails, naming it -------
d=$tmp/wrong
mkdir -p "$d"
cp "$qdir/nexmark_queries.so" "$d/"
for op in nexmark_currency nexmark_filter; do
	cat > "$d/job.conf" <<-CONF
	[job]
	plugins = nexmark_queries.so
	[gen]
	op = nexmark
	count = 1000
	events = person
	[q]
	op = $op
	input = gen
	[out]
	op = file_sink
	input = q
	path = out.tsv
	CONF
	rc=0
	(cd "$d" && "$shmrun" job.conf) 2> "$tmp/log" || rc=$?
	[ $rc -eq 1 ] || fail "$op fed persons: exit $rc, want 1"
	qgrep -F "stage 'q' [0]: a record that is not a bid of the nexmark source: 'person\\t0\\t1000" "$tmp/log" ||
		fail "$op fed persons: no message naming the stage and the record"
	echo "ok $op fed persons: the job fails, naming the stage and the record"
done

# ---- an output over the topology file or a plugin is refused -----------------
# The run reads both (a restart reads the conf again; workers map the plugins):
# a width-1 file_sink once overwrote the conf, or truncated the plugin (SIGBUS).
for victim in job.conf nexmark_queries.so; do
	d=$tmp/victim
	rm -rf "$d"
	mkdir -p "$d"
	cp "$qdir/nexmark_queries.so" "$d/"
	printf '[job]\nplugins = nexmark_queries.so\n[gen]\nop = nexmark\ncount = 100\nevents = bid\n[q]\nop = nexmark_filter\ninput = gen\n[out]\nop = file_sink\ninput = q\npath = %s\n' \
		"$victim" > "$d/job.conf"
	before=$(md5sum "$d/job.conf" "$d/nexmark_queries.so")
	rc=0
	(cd "$d" && "$shmrun" job.conf) 2> "$tmp/log" || rc=$?
	[ $rc -eq 2 ] || fail "an output over $victim: exit $rc, want 2"
	qgrep "job.conf:13: stage 'out' path = .*$victim is the same file as the input of" "$tmp/log" ||
		fail "an output over $victim: no message naming it"
	[ "$before" = "$(md5sum "$d/job.conf" "$d/nexmark_queries.so")" ] || fail "an output over $victim: the file changed"
	echo "ok an output over $victim is refused (exit 2), the file untouched"
done
