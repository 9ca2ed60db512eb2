#!/usr/bin/env bash
# tests/integration/multihost_status.sh SHMRUN: what host 1 of a two-"host"
# job (tests/integration/mpi.sh) reports about checkpoints and outputs.
#   - `shmrun ps` shows host 1's CKPT_EPOCH (it was always `-`: only host 0
#     runs the coordinator, and host 1's metrics were never written), and
#     `shmrun top --json NAME.h1` a completed epoch;
#   - the end summary of each host lists only the outputs its own workers
#     wrote: a width-1 file_sink is on host 0, so host 1 says "none on this
#     host" (it printed the path although it wrote nothing); a width-2 sink
#     is one file per host.
set -euo pipefail
shmrun=$(realpath "${1:?usage: multihost_status.sh path/to/shmrun}")
export LC_ALL=C
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mpi.sh"
need_mpi "$shmrun"

name=mhst_$$
cat > "$tmp/job.conf" <<CONF
[job]
name = $name
workers = 1
checkpoint_dir = ck
checkpoint_interval = 200ms
[read]
op = sequence
count = 100000000
keys = 7
rate = 20000
width = 2
[count]
op = count
input = read by key
width = 2
[one]
op = file_sink
input = count
path = out/one.tsv
[two]
op = file_sink
input = count
width = 2
path = out/two.tsv
CONF
(cd "$tmp" && exec "${mpirun2_cmd[@]}" "$shmrun" job.conf) > "$tmp/log" 2>&1 &
launcher=$!
# host 1's ps row shows a complete epoch once host 0 has one
ok=
for _ in $(seq 300); do
	kill -0 $launcher 2> /dev/null || fail "the job ended early"
	"$shmrun" ps > "$tmp/ps" 2>&1 || true
	e=$(awk -v n="$name.h1" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "CKPT_EPOCH") c = i }
		NR > 1 && $1 == n { print $c }' "$tmp/ps")
	if [[ "$e" =~ ^[0-9]+$ ]] && [ "$e" -gt 0 ]; then
		ok=1
		break
	fi
	sleep 0.1
done
[ -n "$ok" ] || fail "ps: host 1's CKPT_EPOCH is not a complete epoch: $(cat "$tmp/ps")"
echo "ok ps: $name.h1 CKPT_EPOCH $e"
"$shmrun" top --json "$name.h1" > "$tmp/top.json" || fail "top --json $name.h1"
python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))["checkpoints"]
assert c["last_epoch"] and c["last_epoch"] > 0 and c["completed"] > 0, c
' "$tmp/top.json" || fail "top --json $name.h1: no completed checkpoint: $(cat "$tmp/top.json" | head -c 800)"
"$shmrun" top --json "$name.h1" > /dev/null
echo "ok top $name.h1: a completed checkpoint"
"$shmrun" stop "$name" > /dev/null 2>&1 || fail "shmrun stop $name"
wait_launcher
[ "$rc" = 0 ] || fail "the stopped job: mpirun exited $rc"

# a job to its end: each host's summary lists its own outputs only
sed -i -e 's/^count = 100000000$/count = 5000/' -e '/^rate = /d' -e '/^checkpoint/d' "$tmp/job.conf"
rm -rf "$tmp/out"
(cd "$tmp" && "${mpirun2_cmd[@]}" --tag-output "$shmrun" job.conf) > "$tmp/log" 2>&1 ||
	fail "the finite job failed"
# --tag-output: each line starts [JOBID,RANK]<stdxxx>:
sed -n 's/^\[[0-9]*,\([01]\)\]<std[a-z]*>:\(output: .*\)$/\1: \2/p' "$tmp/log" | sort > "$tmp/outs"
cat > "$tmp/outs.want" <<WANT
0: output:        $tmp/out/one.tsv
0: output:        $tmp/out/two.tsv.0
1: output:        $tmp/out/two.tsv.1
WANT
diff "$tmp/outs.want" "$tmp/outs" > /dev/null ||
	fail "summary outputs per host: $(cat "$tmp/outs" | tr "\n" "|"); log: $(grep -A8 '^records in' "$tmp/log")"
[ -s "$tmp/out/one.tsv" ] && [ -s "$tmp/out/two.tsv.0" ] && [ -s "$tmp/out/two.tsv.1" ] ||
	fail "outputs missing: $(ls -l "$tmp/out")"
# only the width-1 sink (on host 0): host 1 says it wrote none
sed -i '/^\[two\]$/,$d' "$tmp/job.conf"
rm -rf "$tmp/out"
(cd "$tmp" && "${mpirun2_cmd[@]}" --tag-output "$shmrun" job.conf) > "$tmp/log" 2>&1 ||
	fail "the job with one sink failed"
sed -n 's/^\[[0-9]*,\([01]\)\]<std[a-z]*>:\(output: .*\)$/\1: \2/p' "$tmp/log" | sort > "$tmp/outs"
printf '0: output:        %s\n1: output:        none on this host (its workers run no sink instance that writes a file)\n' \
	"$tmp/out/one.tsv" > "$tmp/outs.want"
diff "$tmp/outs.want" "$tmp/outs" > /dev/null ||
	fail "summary outputs, one sink: $(tr '\n' '|' < "$tmp/outs")"
echo "ok each host's summary lists only its outputs, or none"
mpi_none_left
