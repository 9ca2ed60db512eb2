# tests/integration/mhkeyed.sh: sourced by the multi-host tests of a keyed
# count (multihost_agree.sh, multihost_faults.sh, multihost_per_host.sh,
# multihost_rescale.sh) once they have set $shmrun (an absolute path). It
# sources lib.sh and mpi.sh, exports LC_ALL=C and exits 77 (skipped) unless
# mpirun and an MPI build of $shmrun are there (need_mpi). The keyed job
# these tests run and what they check after every run:
#
#   keyed_conf DIR NAME HOSTS WORKERS RATE CKPT [LAYOUT]
#       writes the job to DIR/job.conf (creating DIR): a `sequence` of
#       $keyed_count records over $keyed_keys keys (width 2, paced at RATE
#       records/s for the whole stage, so a kill or a stop lands mid-run)
#       -> by key -> count (width 4, emit = update,
#       no combiner: key k gets exactly the lines "k<TAB>1" .. "k<TAB>n", so
#       a record lost or counted twice, or an update written twice, shows in
#       the output) -> file_sink (width 2, out/result.tsv.0 and .1). CKPT is
#       the checkpoint_dir (relative to DIR), LAYOUT checkpoint_layout.
#   keyed_reference
#       $tmp/ref.sorted: the one-host, fault-free run's output, sorted; it
#       must equal the arithmetic expectation (checked once)
#   keyed_exact DIR WHAT
#       fail unless DIR/out/result.tsv.* sorted equals $tmp/ref.sorted
#   no_leftovers WHAT
#       fail if anything of the job outlived its run: a process of this test's
#       mpirun (mpi_leftovers) or named after the job, an Open MPI session
#       directory in $tmp (mpi.sh puts them there), a file left in /dev/shm
#       since the test began (shmrun's segments are memfds; Open MPI's shared
#       memory would show here), a temp file in a checkpoint_dir
#       (MANIFEST.tmp, *.tmp). MPI ranks end a few seconds after a lost peer:
#       waits up to 20 s for processes to go.
#   stop_midway CKPT JOB HOSTS WHAT
#       once the run in $launcher (stderr in $tmp/log) has a complete
#       checkpoint in CKPT, `shmrun stop JOB`; the run must exit 0, before the
#       end of input, with "stopped at epoch" from each of its HOSTS hosts;
#       then no_leftovers
#   in_dir DIR CMD...
#       CMD in DIR, its output in $tmp/log

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.sh"
. "$here/mpi.sh"
export LC_ALL=C
need_mpi "$shmrun"

keyed_count=120000
keyed_keys=300
keyed_per_key=$((keyed_count / keyed_keys))
shm_before=$(ls /dev/shm | sort)

keyed_conf() {
	local dir=$1 name=$2 hosts=$3 workers=$4 rate=$5 ckpt=$6 layout=${7:-shared}
	mkdir -p "$dir"
	cat > "$dir/job.conf" << CONF
[job]
name = $name
hosts = $hosts
workers = $workers
ring_bytes = 64K
checkpoint_dir = $ckpt
checkpoint_layout = $layout
checkpoint_interval = 100ms
[gen]
op = sequence
count = $keyed_count
keys = $keyed_keys
piece_records = 1000
rate = $rate
width = 2
[count]
op = count
input = gen by key
emit = update
combine = false
width = 4
[out]
op = file_sink
input = count
path = out/result.tsv
width = 2
CONF
}

keyed_reference() {
	local d=$tmp/ref
	keyed_conf "$d" "ref_$$" 1 2 100000000 ck
	"$shmrun" "$d/job.conf" > "$tmp/log" 2>&1 || fail "one-host reference run failed"
	sort "$d"/out/result.tsv.* > "$tmp/ref.sorted"
	local k
	for k in $(seq 0 $((keyed_keys - 1))); do
		seq 1 $keyed_per_key | sed "s/^/k$k\t/"
	done | sort > "$tmp/expected.sorted"
	cmp -s "$tmp/ref.sorted" "$tmp/expected.sorted" ||
		fail "the one-host reference differs from k<TAB>1..$keyed_per_key per key: $(diff "$tmp/expected.sorted" "$tmp/ref.sorted" | head -5)"
}

keyed_exact() {
	sort "$1"/out/result.tsv.* > "$tmp/got.sorted" 2> /dev/null || true
	cmp -s "$tmp/ref.sorted" "$tmp/got.sorted" ||
		fail "$2: output differs from the one-host run ($(wc -l < "$tmp/got.sorted") lines, want $(wc -l < "$tmp/ref.sorted")): $(diff "$tmp/ref.sorted" "$tmp/got.sorted" | head -5 | tr '\n' ' ')"
}

no_leftovers() {
	local left=
	for _ in $(seq 200); do
		left="$(mpi_leftovers) $(pgrep -f "shmrun: ${name}[ _]" || true)"
		[ -z "${left// /}" ] && break
		sleep 0.1
	done
	[ -z "${left// /}" ] || fail "$1: processes left: $(ps -o pid,ppid,args -p "${left// /,}" | tail -n +2 | tr '\n' ';')"
	local sess
	sess=$(find "$tmp" -maxdepth 1 -name 'ompi.*' | head -3)
	[ -z "$sess" ] || fail "$1: Open MPI session directories left: $sess $(find $sess | head -5)"
	local shm
	shm=$(ls /dev/shm | sort | comm -13 <(echo "$shm_before") - | grep -Ei 'shmrun|vader|ompi|pmix|sm_segment' || true)
	[ -z "$shm" ] || fail "$1: left in /dev/shm: $shm"
	local t
	t=$(find "$tmp" -path "$tmp/ref" -prune -o \( -name '*.tmp' -o -name 'MANIFEST.tmp*' \) -print | head -3)
	[ -z "$t" ] || fail "$1: temp files left: $t"
}

stop_midway() {
	wait_manifest "$1" || fail "$4: no checkpoint completed"
	sleep 0.3
	"$shmrun" stop "$2" > "$tmp/stop.out" 2>&1 || fail "$4: shmrun stop $2: $(cat "$tmp/stop.out")"
	local rc
	wait_launcher
	[ "$rc" = 0 ] || fail "$4: the run exited $rc after shmrun stop $2"
	[ "$(grep -c "launcher: stopped at epoch" "$tmp/log")" = "$3" ] ||
		fail "$4: not all $3 hosts said they stopped at a final checkpoint"
	qgrep "launcher: job $name done" "$tmp/log" && fail "$4: the job ended before the stop; slow it down"
	no_leftovers "$4"
}

in_dir() {
	(cd "$1" && shift && exec "$@") > "$tmp/log" 2>&1
}
