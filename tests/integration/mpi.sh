# tests/integration/mpi.sh: sourced by the multi-host tests, after lib.sh.
# Two "hosts" on one machine are two MPI processes started by Open MPI's
# mpirun over TCP loopback (docs/multihost.md "Transport settings"):
#
#   mpirun2 ARGS...     mpirun -np 2 with the settings below; ARGS is the
#                       program and its arguments (or more mpirun options
#                       first)
#   "${mpirun2_cmd[@]}" ARGS...
#                       the same as a command line, for a program that
#                       executes it (shmrun supervise -- "${mpirun2_cmd[@]}" ...)
#   mpi_run N ARGS...   the same with N processes
#   need_mpirun         exit 77 (skipped) unless mpirun is on PATH
#   need_mpi_build SHMRUN
#                       exit 77 unless SHMRUN has the MPI gateway
#                       (`SHMRUN --version` says "mpi: on"; -DSHMRUN_MPI)
#   need_mpi SHMRUN     both: what every multihost_*.sh needs
#   mpi_leftovers       the pids of processes mpirun2 started (ranks,
#                       launchers, workers) that are still there; empty when
#                       none is: a test may assert that
#   mpi_none_left       fail unless mpi_leftovers is empty within 5 s (what
#                       a test checks at its end)
#   mpi_cleanup         SIGKILL every one of them (also on exit: the trap)
#
# The settings, and why (the test machines run as root on 2 cores):
#   -np 2 --oversubscribe   two ranks even where Open MPI counts fewer slots
#   --bind-to none          the launcher pins its own workers; Open MPI's
#                           binding would confine them to one core
#   --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo
#                           TCP over loopback, never Open MPI's default
#                           choice of transport (slow here, and not what
#                           crosses real hosts)
#   OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
#                           mpirun refuses root without both (exported too,
#                           for a test's own mpirun line)
#   TMPDIR=$tmp             Open MPI's session directory (ompi.HOST.UID/)
#                           goes into the test's $tmp: a killed mpirun leaves
#                           its own behind, which lib.sh's cleanup removes
#
# Cleanup: every process mpirun2 starts carries SHMRUN_MPI_TEST_TAG (unique
# to this test) in its environment: mpirun, the ranks it forks (they inherit
# it, and -x passes it on to remote ones), the launchers' workers. A test
# that fails half-way may leave any of them (a kill -9'd mpirun leaves ranks
# that make no MPI calls running, measured with Open MPI 4.1.4; MPI ranks end
# a few seconds later), so the trap kills by that tag, not by name: a test
# never touches another test's, or a user's, processes.

mpi_tag="shmrun-mpi-test-$$-$RANDOM"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Under ASan (the CI's sanitizer build) Open MPI 4.1's own allocations are
# still live at exit (MPI_Init's PMIx, hwloc and MCA component state; the
# components are dlclose()d, so their stacks cannot even be named in a
# suppression file): LeakSanitizer would fail every run that called
# MPI_Init. Leak checking is off for MPI runs only; ASan's other checks stay.
# Binaries built without ASan ignore the variable.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"

mpi_env=(SHMRUN_MPI_TEST_TAG="$mpi_tag" TMPDIR="$tmp"
	OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
mpi_flags=(--oversubscribe --bind-to none
	--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo
	-x SHMRUN_MPI_TEST_TAG)
mpirun2_cmd=(env "${mpi_env[@]}" mpirun -np 2 "${mpi_flags[@]}")

mpirun2() {
	"${mpirun2_cmd[@]}" "$@"
}

# mpi_run N ARGS...: the same with N processes (mpirun2 is mpi_run 2)
mpi_run() {
	local n=$1
	shift
	env "${mpi_env[@]}" mpirun -np "$n" "${mpi_flags[@]}" "$@"
}

# need_mpi SHMRUN: need_mpirun and need_mpi_build SHMRUN
need_mpi() {
	need_mpirun
	need_mpi_build "$1"
}

need_mpirun() {
	if ! command -v mpirun > /dev/null 2>&1; then
		echo "skipped: no mpirun (apt-get install openmpi-bin; tools/bootstrap.sh does)" >&2
		exit 77
	fi
}

need_mpi_build() {
	if ! "$1" --version | qgrep -x "mpi: on"; then
		echo "skipped: $1 is built without MPI (libopenmpi-dev, -DSHMRUN_MPI)" >&2
		exit 77
	fi
}

mpi_leftovers() {
	# grep -z: environ's entries end in NUL; a process that exits meanwhile
	# cannot be read (no message); zombies' environ is empty
	grep -lzx "SHMRUN_MPI_TEST_TAG=$mpi_tag" /proc/[0-9]*/environ 2> /dev/null |
		sed 's|^/proc/\([0-9]*\)/environ$|\1|' || true
}

mpi_none_left() {
	for _ in $(seq 50); do
		[ -z "$(mpi_leftovers)" ] && break
		sleep 0.1
	done
	[ -z "$(mpi_leftovers)" ] || fail "processes left: $(mpi_leftovers | tr '\n' ' ')"
}

mpi_cleanup() {
	local p pass
	for pass in 1 2 3; do # a process may fork while we look: look again
		for p in $(mpi_leftovers); do
			kill -9 "$p" 2> /dev/null || true
		done
		[ -z "$(mpi_leftovers)" ] && return 0
		sleep 0.2
	done
}

trap 'mpi_cleanup; cleanup' EXIT
