#!/usr/bin/env bash
# tests/integration/multihost_conf.sh SHMRUN: [job] hosts without mpirun
# (docs/multihost.md) — `shmrun plan` of a multi-host job on one box (host
# column, channels marked "crosses hosts", --json agreeing with the text), and
# every refusal before a run starts: hosts > 1 not under mpirun, a world of
# another size, hosts = 1 under several processes, a malformed MPI
# environment, stdin_source and socket_source listen with hosts > 1, `shmrun
# stress`, a build without MPI. Each exits 2, says why, and creates nothing
# (no output file, no checkpoint_dir). Then the fingerprint: a checkpoint of
# one host is refused on two, naming "hosts: 1 → 2", unless --rescale.
set -euo pipefail
shmrun=${1:?usage: multihost_conf.sh path/to/shmrun}
. "$(dirname "$0")/lib.sh"
jc=$(dirname "$0")/json_check.py
# whatever launched the test: no MPI world of its own
unset OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_RANK PMI_SIZE PMIX_RANK PMI_RANK SLURM_NTASKS SLURM_PROCID \
	PMIX_NAMESPACE PMI_FD SLURM_STEP_ID
for v in $(env | sed -n 's/^\(PMIX_SERVER_URI[0-9]*\)=.*/\1/p'); do unset "$v"; done
# what mpirun (Open MPI 4.1) sets besides OMPI_COMM_WORLD_*: its PMIx server
ompi=(PMIX_NAMESPACE=1882980353 "PMIX_SERVER_URI41=1882980352.0;tcp4://127.0.0.1:47773")

cat > "$tmp/mh.conf" <<'CONF'
[job]
workers = 2
[read]
op = sequence
count = 1000
keys = 7
width = 2
[count]
op = count
input = read by key
width = 4
[out]
op = file_sink
input = count
width = 4
path = out/o.tsv
CONF

# --- plan on one box ---------------------------------------------------------
"$shmrun" plan --set job.hosts=2 "$tmp/mh.conf" > "$tmp/plan" || fail "plan --set job.hosts=2"
grep -qx "job mh: 4 workers on 2 hosts (2 per host), 3 stages, 10 tasks, 256 vnodes, 8 channels" \
	"$tmp/plan" || fail "plan header: $(head -1 "$tmp/plan")"
grep -qx "task   stage            instance worker host cpu  vnodes" "$tmp/plan" ||
	fail "plan: no host column"
# read[1] runs on worker 2 = host 1; count[3] on worker 3 = host 1
grep -Eq "^1 +read +1 +2 +1 +[0-9]+ +\[128, 256\)$" "$tmp/plan" || fail "plan: read[1]'s row"
grep -Eq "^5 +count +3 +3 +1 +[0-9]+ +\[192, 256\)$" "$tmp/plan" || fail "plan: count[3]'s row"
grep -qx "  read -> count: shuffle by key, 8 channels (4 cross hosts), combined (partials of the receiver's combiner)" \
	"$tmp/plan" || fail "plan: the edge's count of channels crossing hosts"
grep -qx "    read\[0\] -> count\[3\]: ring 3, crosses hosts (worker 0 -> 3, host 0 -> 1)" "$tmp/plan" ||
	fail "plan: ring 3 not marked as crossing hosts"
grep -qx "    read\[1\] -> count\[2\]: ring 6, local (worker 2 -> 2, host 1 -> 1)" "$tmp/plan" ||
	fail "plan: ring 6"
[ "$(grep -c "crosses hosts" "$tmp/plan")" -eq 4 ] || fail "plan: not 4 channels crossing hosts"
grep -q "(6 cross workers, 4 cross hosts), [0-9]* bytes in all on each host$" "$tmp/plan" ||
	fail "plan: segment line"
"$shmrun" plan --json --set job.hosts=2 "$tmp/mh.conf" > "$tmp/plan.json"
python3 "$jc" plan "$tmp/plan" "$tmp/plan.json" > /dev/null || fail "plan --json with hosts = 2 differs from the text"
# one host: no host column, no host marks
"$shmrun" plan "$tmp/mh.conf" > "$tmp/plan1"
! grep -q "host" "$tmp/plan1" || fail "plan of one host mentions hosts"
"$shmrun" plan --json "$tmp/mh.conf" > "$tmp/plan1.json"
python3 "$jc" plan "$tmp/plan1" "$tmp/plan1.json" > /dev/null || fail "plan --json of one host"
# the host count from the environment, as under mpirun -np 3
env "${ompi[@]}" OMPI_COMM_WORLD_SIZE=3 OMPI_COMM_WORLD_RANK=1 "$shmrun" plan "$tmp/mh.conf" | head -1 |
	qgrep -x "job mh: 6 workers on 3 hosts (2 per host), 3 stages, 10 tasks, 256 vnodes, 8 channels" ||
	fail "plan under OMPI_COMM_WORLD_SIZE=3"
"$shmrun" check --set job.hosts=2 "$tmp/mh.conf" | qgrep -x "$tmp/mh.conf: ok (3 stages, 2 workers on each of 2 hosts)" ||
	fail "check of hosts = 2"
echo "ok plan of 2 hosts: host column, 4 channels crossing hosts, --json agrees"

# --- refusals: exit 2, why, nothing created -------------------------------
# refused CMD...: the run exits 2, its message ($tmp/err) matches $want, and
# neither the output nor checkpoint_dir exists
refused() {
	local rc=0
	rm -rf "$tmp/out" "$tmp/ck"
	"$@" > /dev/null 2> "$tmp/err" || rc=$?
	[ "$rc" -eq 2 ] || fail "$*: exit $rc, want 2: $(cat "$tmp/err")"
	grep -q -- "$want" "$tmp/err" || fail "$*: want '$want', got: $(cat "$tmp/err")"
	[ ! -e "$tmp/out" ] || fail "$*: created the output"
	[ ! -e "$tmp/ck" ] || fail "$*: created checkpoint_dir"
}
sets=(--set job.checkpoint_dir="$tmp/ck")
if "$shmrun" --version | qgrep -x "mpi: off"; then
	want="hosts = 2 (--set), but this shmrun was built without MPI: install Open MPI"
	refused "$shmrun" "${sets[@]}" --set job.hosts=2 "$tmp/mh.conf"
	echo "ok hosts = 2 in a build without MPI: refused"
else
	want="^shmrun: hosts = 2 (--set) needs 2 MPI processes: mpirun -np 2 shmrun $tmp/mh.conf (docs/multihost.md); nothing was started$"
	refused "$shmrun" "${sets[@]}" --set job.hosts=2 "$tmp/mh.conf"
	sed 's/^workers = 2$/workers = 2\nhosts = 2/' "$tmp/mh.conf" > "$tmp/mh2.conf"
	want="^shmrun: hosts = 2 ($tmp/mh2.conf:3) needs 2 MPI processes"
	refused "$shmrun" "${sets[@]}" "$tmp/mh2.conf"
	want="hosts = 2 ($tmp/mh2.conf:3), but this is one of 3 MPI processes (OMPI_COMM_WORLD_SIZE = 3): start it with mpirun -np 2, or set hosts = 3"
	refused env "${ompi[@]}" OMPI_COMM_WORLD_SIZE=3 OMPI_COMM_WORLD_RANK=0 "$shmrun" "${sets[@]}" "$tmp/mh2.conf"
	want="hosts = 2 ($tmp/mh2.conf:3), but this is one of 4 MPI processes (SLURM_NTASKS = 4)"
	SLURM_STEP_ID=0 PMI_RANK=3 SLURM_NTASKS=4 SLURM_PROCID=3 refused "$shmrun" "${sets[@]}" "$tmp/mh2.conf"
	want="OMPI_COMM_WORLD_SIZE = 2 in the environment, but OMPI_COMM_WORLD_RANK is '2', not a rank below 2"
	refused env "${ompi[@]}" OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=2 "$shmrun" "${sets[@]}" "$tmp/mh2.conf"
	echo "ok hosts = 2 without 2 MPI processes: refused"
fi
want="hosts = 1 (--set), but this is one of 2 MPI processes (OMPI_COMM_WORLD_SIZE = 2): each would run the whole job"
refused env "${ompi[@]}" OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0 "$shmrun" "${sets[@]}" --set job.hosts=1 "$tmp/mh.conf"
want="\[job\] hosts is not given and the MPI environment cannot be read: PMI_SIZE = 'two' in the environment is not a process count 1..1024"
PMI_FD=3 PMI_SIZE=two refused "$shmrun" "${sets[@]}" "$tmp/mh.conf"
want="hosts = 2: stress runs and kills the job's workers on this one machine"
refused "$shmrun" stress --set job.hosts=2 "$tmp/mh.conf"
grep -q "^shmrun stress: $tmp/mh.conf: hosts = 2: stress runs" "$tmp/err" || fail "stress: $(cat "$tmp/err")"
printf '[job]\nhosts = 2\n[in]\nop = stdin_source\n[out]\nop = file_sink\ninput = in\npath = out/o.tsv\n' > "$tmp/stdin.conf"
want="^$tmp/stdin.conf:4: stage 'in': op = stdin_source cannot run with hosts = 2 ($tmp/stdin.conf:2): an MPI job hands standard input to one process only"
refused "$shmrun" "$tmp/stdin.conf"
refused "$shmrun" check "$tmp/stdin.conf"
printf '[in]\nop = socket_source\nlisten = 127.0.0.1:0\n[out]\nop = file_sink\ninput = in\npath = out/o.tsv\n' > "$tmp/sock.conf"
want="^$tmp/sock.conf:3: stage 'in': socket_source with listen = 127.0.0.1:0 cannot run with hosts = 3 (--set): its instances listen on whichever host"
refused "$shmrun" --set job.hosts=3 "$tmp/sock.conf"
# a brace that is not {host} in checkpoint_dir: a warning, the path as it is
for typo in '{hosts}' '{HOST}' '{host'; do
	"$shmrun" check --set "job.checkpoint_dir=ck$typo" "$tmp/mh.conf" > /dev/null 2> "$tmp/err" ||
		fail "checkpoint_dir ck$typo: check refused it: $(cat "$tmp/err")"
	qgrep -F "'{' not part of {host} is taken as it is (the only placeholder is {host}, lower case)" "$tmp/err" ||
		fail "checkpoint_dir ck$typo: no warning: $(cat "$tmp/err")"
done
"$shmrun" check --set 'job.checkpoint_dir=ck{host}' --set job.checkpoint_layout=per_host "$tmp/mh.conf" 2> "$tmp/err" > /dev/null || true
qgrep "not part of {host}" "$tmp/err" && fail "checkpoint_dir ck{host}: warned: $(cat "$tmp/err")"
echo "ok refusals: exit 2, the reason, nothing created"

# --- a stale launcher environment: one host, or refused -------------------
# A plain shmrun in an sbatch script (--ntasks=4) sees SLURM_NTASKS and
# SLURM_PROCID without srun's step; an exported copy of one variable outlives
# its mpirun. Neither started this process: one host, with a warning naming
# what was ignored, and the same output as without them; hosts = 2 is refused.
printf '[job]\nworkers = 2\n[read]\nop = sequence\ncount = 500\nkeys = 5\nwidth = 2\n[count]\nop = count\ninput = read by key\nwidth = 2\n[out]\nop = file_sink\ninput = count\npath = out/one.tsv\n' > "$tmp/one.conf"
(cd "$tmp" && "$shmrun" one.conf 2> "$tmp/log") || fail "a plain run: $(cat "$tmp/log")"
sort "$tmp/out/one.tsv" > "$tmp/one.want"
[ -s "$tmp/one.want" ] || fail "a plain run wrote nothing"
mkdir "$tmp/stale-tmp"
stale() { # stale WANT VAR=VALUE...: a plain run with these variables
	local want=$1 rc=0
	shift
	rm -rf "$tmp/out"
	(cd "$tmp" && env TMPDIR="$tmp/stale-tmp" "$@" "$shmrun" one.conf > "$tmp/sout" 2> "$tmp/log") || rc=$?
	[ "$rc" -eq 0 ] || fail "$*: exit $rc: $(cat "$tmp/log")"
	grep -q "launcher: one.conf: running on one host: ignored $want in the environment, as no mpirun or srun started this process" "$tmp/log" ||
		fail "$*: no warning naming $want: $(cat "$tmp/log")"
	! grep -q "host 0 of\|gateway" "$tmp/log" "$tmp/sout" || fail "$*: started as one of several hosts: $(cat "$tmp/log")"
	sort "$tmp/out/one.tsv" | cmp -s - "$tmp/one.want" || fail "$*: output differs from the plain run"
}
stale "SLURM_NTASKS=4, SLURM_PROCID=0" SLURM_NTASKS=4 SLURM_PROCID=0 SLURM_JOB_ID=7
stale "PMI_SIZE=2" PMI_SIZE=2
stale "OMPI_COMM_WORLD_SIZE=2" OMPI_COMM_WORLD_SIZE=2
# srun's step without an MPI plugin's rank, mpirun's variables without its server
stale "SLURM_NTASKS=2, SLURM_PROCID=1" SLURM_NTASKS=2 SLURM_PROCID=1 SLURM_STEP_ID=0
stale "OMPI_COMM_WORLD_SIZE=2, OMPI_COMM_WORLD_RANK=1" OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=1 PMIX_NAMESPACE=9
# Open MPI's session directory (ompi.HOST.UID/) would go into TMPDIR: a
# private one, as /tmp is shared with other tests' and users' MPI jobs
[ -z "$(ls -A "$tmp/stale-tmp")" ] ||
	fail "a plain run called MPI_Init: it left $(find "$tmp/stale-tmp" | tr '\n' ' ')"
if ! "$shmrun" --version | qgrep -x "mpi: off"; then
	want="^shmrun: hosts = 2 (--set) needs 2 MPI processes: mpirun -np 2 shmrun $tmp/mh.conf (docs/multihost.md); ignored SLURM_NTASKS=2, SLURM_PROCID=0: no mpirun or srun started this process; nothing was started$"
	SLURM_NTASKS=2 SLURM_PROCID=0 refused "$shmrun" "${sets[@]}" --set job.hosts=2 "$tmp/mh.conf"
fi
echo "ok a stale MPI/Slurm environment: one host with a warning, hosts = 2 refused"

# --- MPI_Init that does not give the world asked for: nothing left --------
# mpirun's variables with a server that is not there: MPI starts as a
# singleton (1 process, its own orted). The gateway says why, finalizes, and
# leaves no session directory in TMPDIR (it left ompi.HOST.UID/jf.N and the
# orted behind).
if ! "$shmrun" --version | qgrep -x "mpi: off"; then
	mkdir "$tmp/mpitmp"
	rc=0
	(cd "$tmp" && env TMPDIR="$tmp/mpitmp" "${ompi[@]}" OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0 \
		timeout 120 "$shmrun" --set job.hosts=2 one.conf > /dev/null 2> "$tmp/log") || rc=$?
	[ "$rc" -eq 1 ] || fail "MPI singleton under hosts = 2: exit $rc, want 1: $(cat "$tmp/log")"
	grep -q "gateway of host 0: hosts = 2, this is host 0, but the MPI job has 1 processes and this is rank 0: start one process per host" "$tmp/log" ||
		fail "MPI singleton: the gateway's reason not said: $(cat "$tmp/log")"
	grep -q "cannot start the gateway to the other hosts" "$tmp/log" || fail "MPI singleton: $(cat "$tmp/log")"
	# the orted removes its part as it exits, a moment after shmrun
	for _ in $(seq 100); do [ -z "$(ls -A "$tmp/mpitmp")" ] && break; sleep 0.1; done
	[ -z "$(ls -A "$tmp/mpitmp")" ] || fail "MPI singleton left $(find "$tmp/mpitmp" | tr '\n' ' ')"
	echo "ok MPI_Init of another world: the reason, exit 1, no Open MPI session directory left"
fi

# --- the fingerprint: another host count is a rescale ---------------------
"$shmrun" --set job.checkpoint_dir="$tmp/ck" --set read.count=200 "$tmp/mh.conf" 2> "$tmp/log" ||
	fail "a run of one host"
ls "$tmp"/ck/ckpt-*/MANIFEST > /dev/null 2>&1 || fail "no checkpoint written"
rc=0
"$shmrun" check --set job.checkpoint_dir="$tmp/ck" --set read.count=200 --set job.hosts=2 \
	"$tmp/mh.conf" > /dev/null 2> "$tmp/err" || rc=$?
[ "$rc" -eq 2 ] || fail "check of 2 hosts against a checkpoint of 1: exit $rc"
grep -q "was written by a different topology: members: 2 → 4 workers; hosts: 1 → 2\." "$tmp/err" ||
	fail "check of 2 hosts: $(cat "$tmp/err")"
grep -q "if the change is a new width, worker count or host count, re-assign the state with \`shmrun --rescale" "$tmp/err" ||
	fail "check of 2 hosts: no way out named: $(cat "$tmp/err")"
"$shmrun" check --rescale --set job.checkpoint_dir="$tmp/ck" --set read.count=200 --set job.hosts=2 \
	"$tmp/mh.conf" > "$tmp/out.txt" 2> "$tmp/err" || fail "check --rescale to 2 hosts: $(cat "$tmp/err")"
echo "ok a checkpoint of 1 host is refused on 2 (hosts: 1 → 2), --rescale plans it"
