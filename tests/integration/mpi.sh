# tests/integration/mpi.sh: sourced by the multi-host tests (after lib.sh).
# Two "hosts" on this machine are two MPI processes over TCP loopback, as
# root too, with the transport pinned: Open MPI's default choice is slow here
# and may differ between machines (docs/multihost.md):
#   mpirun -np 2 --oversubscribe --bind-to none
#          --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo
# need_mpi: exit 77 (skipped) without mpirun. mpi_run N ARGS...: run ARGS as
# N MPI processes; Open MPI's session directory goes into $tmp (TMPDIR), so
# nothing is left in /tmp.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
need_mpi() {
	if ! command -v mpirun > /dev/null; then
		echo "skipped: no mpirun (apt-get install openmpi-bin)" >&2
		exit 77
	fi
}
mpi_run() {
	local n=$1
	shift
	TMPDIR="$tmp" mpirun -np "$n" --oversubscribe --bind-to none \
		--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo "$@"
}
