#!/usr/bin/env bash
# tests/integration/limits.sh SHMRUN: values at their limits behave (issue 8).
#   - checkpoint_interval and checkpoint_timeout at their maximum (31536000s)
#     are accepted and sane: a 100-record job ends with exit 0, exact output
#     and one (final) checkpoint; an interval of 10ms with the longest timeout
#     checkpoints normally. 10000000000s is refused before anything starts
#     (exit 2, file:line and the range).
#   - a record too large for ring_bytes names the ring_bytes that fits, and
#     that value does run; a record too large for any ring says so, with the
#     largest record size, and does not say to raise ring_bytes. Sizes are key
#     + value bytes: at ring_bytes = 4K a 2016-byte line (ring_bytes/2 - 32)
#     passes, a 2017-byte one is refused with the limit (2016) named.
#   - a 5000-character path list written over indented continuation lines
#     reads every file.
set -euo pipefail
shmrun=$(realpath "${1:?usage: limits.sh path/to/shmrun}")
export LC_ALL=C
. "$(dirname "$0")/lib.sh"

run() { # conf: run to completion (at most 120 s), stderr in $tmp/log
	(cd "$tmp" && timeout 120 "$shmrun" "$1") 2> "$tmp/log"
}

# 1. Durations at their maximum.
for keys in "checkpoint_interval = 31536000s
checkpoint_timeout = 31536000s" "checkpoint_interval = 10ms
checkpoint_timeout = 31536000000ms"; do
	rm -rf "$tmp/ck" "$tmp/out.tsv"
	cat > "$tmp/d.conf" <<CONF
[job]
checkpoint_dir = ck
$keys
[gen]
op = sequence
count = 100
rate = 200
[out]
op = file_sink
input = gen
path = out.tsv
CONF
	run d.conf || fail "$keys: exit $?"
	[ "$(sort -u "$tmp/out.tsv" | wc -l)" -eq 100 ] && [ "$(wc -l < "$tmp/out.tsv")" -eq 100 ] ||
		fail "$keys: output is not the 100 records"
	n=$(find "$tmp/ck" -name MANIFEST | wc -l)
	case $keys in
	*31536000s*31536000s) [ "$n" -eq 1 ] || fail "longest interval: $n checkpoints, want only the final one" ;;
	*) grep -q "aborted" "$tmp/log" && fail "10ms/longest timeout: an epoch was aborted" ;;
	esac
done
echo "ok durations at their maximum"
sed -i 's/^checkpoint_interval = .*/checkpoint_interval = 10000000000s/' "$tmp/d.conf"
set +e; run d.conf; rc=$?; set -e
[ $rc -eq 2 ] || fail "10000000000s: exit $rc, want 2"
grep -q "d.conf:3: checkpoint_interval = '10000000000s' in \[job\] is out of range; expected 1ms to 31536000s" "$tmp/log" ||
	fail "10000000000s: no file:line and range"
echo "ok 10000000000s refused"

# 2. Records too large.
head -c 5000 /dev/zero | tr '\0' 'y' > "$tmp/big.txt"
big_conf() { # ring_bytes file
	cat > "$tmp/big.conf" <<CONF
[job]
workers = 2
ring_bytes = $1
[read]
op = file_source
path = $2
[out]
op = null_sink
input = read
width = 2
CONF
}
big_conf 4K big.txt
set +e; run big.conf; rc=$?; set -e
[ $rc -eq 1 ] || fail "large record: exit $rc, want 1"
grep -q "record of 5000 bytes of key + value (key 0 + value 5000) does not fit a ring of ring_bytes=4096, whose largest record is 2016 bytes of key + value (ring_bytes/2 - 32); raise ring_bytes in \[job\] to at least 16K" "$tmp/log" ||
	fail "large record: does not name the limit in key + value bytes and the ring_bytes that fits"
big_conf 16K big.txt
run big.conf || fail "large record: ring_bytes = 16K, as advised, fails"
# the boundary: ring_bytes/2 - 32 = 2016 bytes of key + value pass, 2017 do not
head -c 2016 /dev/zero | tr '\0' 'y' > "$tmp/edge.txt"
big_conf 4K edge.txt
run big.conf || fail "a record of exactly 2016 bytes (ring_bytes/2 - 32) with ring_bytes = 4K: exit $?"
head -c 2017 /dev/zero | tr '\0' 'y' > "$tmp/edge.txt"
set +e; run big.conf; rc=$?; set -e
[ $rc -eq 1 ] || fail "a record of 2017 bytes with ring_bytes = 4K: exit $rc, want 1"
grep -q "record of 2017 bytes of key + value (key 0 + value 2017) does not fit a ring of ring_bytes=4096, whose largest record is 2016 bytes of key + value (ring_bytes/2 - 32); raise ring_bytes in \[job\] to at least 8K" "$tmp/log" ||
	fail "a record of 2017 bytes with ring_bytes = 4K: not the message"
echo "ok the largest record is ring_bytes/2 - 32 bytes of key + value: 2016 pass, 2017 refused"
truncate -s 520M "$tmp/huge.txt" # one 520 MiB line (sparse)
big_conf 4K huge.txt
set +e; run big.conf; rc=$?; set -e
rm -f "$tmp/huge.txt"
[ $rc -eq 1 ] || fail "huge record: exit $rc, want 1"
grep -q "can never fit a ring: the largest record is 536870880 bytes of key + value (ring_bytes/2 - 32) even at the maximum ring_bytes = 1G" "$tmp/log" ||
	fail "huge record: does not say it can never fit"
grep -q "split the record" "$tmp/log" || fail "huge record: says nothing to do"
grep -q "raise ring_bytes" "$tmp/log" && fail "huge record: advises raising ring_bytes"
echo "ok record-too-large advice"

# 3. A long path list over continuation lines.
mkdir -p "$tmp/in"
list=
n=0
while [ ${#list} -lt 5000 ]; do
	f=in/file-with-a-rather-long-name-$n.txt
	echo "line $n" > "$tmp/$f"
	if [ $((n % 4)) -eq 0 ]; then list="$list
    $f"; else list="$list $f"; fi
	n=$((n + 1))
done
cat > "$tmp/cont.conf" <<CONF
[job]
[read]
op = file_source
path = $list
  width = 2
[out]
op = file_sink
input = read
path = cont.tsv
CONF
run cont.conf || fail "continuation lines: exit $?"
[ "$(sort -u "$tmp/cont.tsv" | wc -l)" -eq $n ] || fail "continuation lines: $(wc -l < "$tmp/cont.tsv") lines, want $n"
echo "ok $n files listed over continuation lines"
