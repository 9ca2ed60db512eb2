# Integration tests of shm/ (docs/design.md §4): a real segment shared by forked
# processes, with timeouts (every child is reaped; see the test's header).
shmrun_check_test(check_ring_procs
	SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_ring_procs.c
	LIBS shmrun_shm
	LABELS ring
	TIMEOUT 300)
