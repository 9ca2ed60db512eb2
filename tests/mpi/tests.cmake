# Multi-host gateway tests (issue 16): two MPI ranks on this machine over TCP
# loopback, registered only when MPI was found (SHMRUN_MPI, top level). The
# transport is pinned (ob1 + tcp on lo), as docs/multihost.md explains: Open
# MPI's default choice is slow here and may differ between machines.
if(MPI_C_FOUND AND MPIEXEC_EXECUTABLE)
	add_executable(gateway_pair ${CMAKE_CURRENT_LIST_DIR}/gateway_pair.c)
	target_include_directories(gateway_pair PRIVATE ${PROJECT_SOURCE_DIR}/runtime)
	target_link_libraries(gateway_pair PRIVATE shmrun_rt Threads::Threads)
	# frames both ways with credits, control mirroring; a silent host times out
	add_test(NAME gateway_pair COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run.sh
		 ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:gateway_pair> ${SHMRUN_FAULT_INJECTION})
	set_tests_properties(gateway_pair PROPERTIES TIMEOUT 180 LABELS "runtime;mpi"
			     SKIP_RETURN_CODE 77)
endif()
