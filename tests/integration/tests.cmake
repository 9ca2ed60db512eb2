# Integration tests of shm/ (docs/design.md §4): a real segment shared by forked
# processes, with timeouts (every child is reaped; see the test's header).
shmrun_check_test(check_ring_procs
	SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_ring_procs.c
	LIBS shmrun_shm
	LABELS ring
	TIMEOUT 300)

# The Prometheus endpoint and the summary file (issue 13 §4, §6): real runs
# scraped with curl, summaries checked against the job's output.
if(TARGET shmrun)
	foreach(t prometheus summary)
		add_test(NAME ${t} COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/${t}.sh
			 $<TARGET_FILE:shmrun>)
		set_tests_properties(${t} PROPERTIES TIMEOUT 600 LABELS "runtime;integration"
				     SKIP_RETURN_CODE 77)
	endforeach()
	# `shmrun top` (issue 13 §3) against real jobs: --json read twice while a paced
	# job runs, the snapshot, several jobs, a job that ends; the screen in tmux.
	add_test(NAME top COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/top.sh $<TARGET_FILE:shmrun>)
	set_tests_properties(top PROPERTIES TIMEOUT 300 LABELS "runtime;integration"
			     SKIP_RETURN_CODE 77)
	# The live counters (issue 13 §1): no total goes back across a restart,
	# a running job's numbers agree with each other, SHMRUN_COUNTERS=off.
	add_test(NAME metrics COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/metrics.sh $<TARGET_FILE:shmrun>)
	set_tests_properties(metrics PROPERTIES TIMEOUT 300 LABELS "runtime;integration"
			     SKIP_RETURN_CODE 77)
	# The job's socket (issue 13 §2, §8): shmrun ps and stop, process titles, a
	# second job of the same name refused, a kill -9'd launcher's socket replaced.
	add_test(NAME jobsock COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/jobsock.sh $<TARGET_FILE:shmrun>)
	set_tests_properties(jobsock PROPERTIES TIMEOUT 600 LABELS "runtime;integration"
			     SKIP_RETURN_CODE 77)
	# file_source with follow = true (issue 15): exactly-once through rotations
	# (rename, copytruncate), kills and a restart; two watches at width 2 polling;
	# a last line without '\n'; bad input.
	add_test(NAME follow COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/follow.sh $<TARGET_FILE:shmrun>)
	set_tests_properties(follow PROPERTIES TIMEOUT 300 LABELS "runtime;integration"
			     SKIP_RETURN_CODE 77)
	# `shmrun stress` (issue 14 §1): the word count and a keyed count under
	# kill/stop/term/rescale faults, a leaky sink caught, refusals, schedules.
	add_test(NAME stress_cmd COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/stress_cmd.sh
		 $<TARGET_FILE:shmrun> ${CMAKE_CURRENT_BINARY_DIR}/plugins)
	set_tests_properties(stress_cmd PROPERTIES TIMEOUT 300 LABELS "runtime;integration")
	# stdin_source and socket_source (issue 15 §2): exact output through a pipe
	# and over TCP/UDP, stops, backpressure, and the refusals of sources that
	# cannot be replayed (checkpoint_dir without allow_data_loss_on_crash).
	foreach(t stdin sockets)
		add_test(NAME ${t} COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/${t}.sh
			 $<TARGET_FILE:shmrun>)
		set_tests_properties(${t} PROPERTIES TIMEOUT 300 LABELS "runtime;integration"
				     SKIP_RETURN_CODE 77)
	endforeach()
endif()

# CI machines (issue 14 §2): io_uring blocked by a seccomp filter (no_uring, a
# wrapper that installs one with libseccomp and execs its arguments), fewer
# CPUs than workers, a low RLIMIT_MEMLOCK and a small /dev/shm, a user that is
# not root, no terminal (docs/ci-machines.md).
add_executable(no_uring ${CMAKE_CURRENT_LIST_DIR}/no_uring.c)
target_link_libraries(no_uring PRIVATE PkgConfig::SECCOMP)
if(TARGET shmrun)
	add_test(NAME no_uring COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/no_uring.sh
		 $<TARGET_FILE:shmrun> $<TARGET_FILE:no_uring>)
	set_tests_properties(no_uring PROPERTIES TIMEOUT 600 LABELS "runtime;integration"
			     SKIP_RETURN_CODE 77)
	add_test(NAME memlock COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/memlock.sh
		 $<TARGET_FILE:shmrun> $<TARGET_FILE:no_uring>)
	foreach(t few_cpus not_root no_tty multihost_conf)
		add_test(NAME ${t} COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/${t}.sh $<TARGET_FILE:shmrun>)
	endforeach()
	set_tests_properties(memlock few_cpus not_root no_tty multihost_conf PROPERTIES TIMEOUT 300
			     LABELS "runtime;integration" SKIP_RETURN_CODE 77)
endif()

# postgres_sink (issue 15 §3) against a real server started in a temp dir
# (initdb + pg_ctl, unix socket only): exactly-once append and upsert under
# kills, lost connections, errors before the start, check --connect. The
# server binaries come from tools/bootstrap.sh; missing ones fail the test.
if(TARGET shmrun)
	add_test(NAME postgres COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/postgres.sh
		 $<TARGET_FILE:shmrun>)
	set_tests_properties(postgres PROPERTIES TIMEOUT 600 LABELS "runtime;integration"
			     SKIP_RETURN_CODE 77)
	# the shipped example docs/examples/follow-dpkg.conf (issue 15 §4): a
	# followed, rotated copy of dpkg.log into PostgreSQL, kill -9, stop, resume
	add_test(NAME follow_dpkg COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/follow_dpkg.sh
		 $<TARGET_FILE:shmrun>)
	set_tests_properties(follow_dpkg PROPERTIES TIMEOUT 300 LABELS "runtime;integration")
endif()

# Multi-host (issue 16): two "hosts" are two MPI processes on this machine over
# TCP loopback (tests/integration/mpi.sh). Only when MPI was found.
#   multihost_wordcount  the word count equals the one-host run, with
#                        checkpoints in a shared checkpoint_dir
#   multihost_faults     a keyed count (tests/integration/mhkeyed.sh) on 2 hosts
#                        x 2 workers under `shmrun supervise`: kill -9 of a
#                        worker, kill -9 of a launcher (its workers die with
#                        it), SIGTERM to supervise then a new run: each exact
#                        against the one-host run, nothing left behind
#   multihost_stop       stops asked on both hosts 5 ms apart: one stop at a
#                        final checkpoint; a stop whose final checkpoint fails
#                        is not restarted by supervise (exit 0 on every host)
#   multihost_stopped    a host's launcher stopped (kill -STOP) longer than
#                        host_timeout, then continued: it says it was stopped,
#                        and blames no peer
#   multihost_status     host 1's ps CKPT_EPOCH and top checkpoints (mirrored
#                        from host 0's COMMITs); each host's summary lists only
#                        its own outputs
#   multihost_rescale    the keyed count moved between host counts at `shmrun
#                        stop`s: 1 host -> 2 hosts -> 1 host with --rescale, a
#                        shared checkpoint_dir: exact
#   multihost_per_host   checkpoint_layout = per_host (ck{host}): stopped and
#                        resumed on 2 hosts, exact: host 1 installs rank 0's
#                        MANIFEST from the COMMIT
#   multihost_agree      the hosts agree before anything starts: another job
#                        (--set) or worker count on one rank is refused (exit 2,
#                        nothing written); a host that missed rank 0's last
#                        COMMIT restores rank 0's epoch; a finished job run
#                        again does nothing on every host (docs/multihost.md)
if(TARGET shmrun AND MPI_C_FOUND AND MPIEXEC_EXECUTABLE)
	foreach(t multihost_wordcount multihost_faults multihost_stop multihost_stopped multihost_status
		  multihost_rescale multihost_per_host multihost_agree)
		add_test(NAME ${t} COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/${t}.sh $<TARGET_FILE:shmrun>)
		set_tests_properties(${t} PROPERTIES TIMEOUT 300 LABELS "runtime;integration;mpi"
				     SKIP_RETURN_CODE 77)
	endforeach()
	set_tests_properties(multihost_agree PROPERTIES TIMEOUT 600)
endif()

# `shmrun supervise` (issue 16 §4): the outer restart loop of multi-host jobs,
# with a fake COMMAND (exit 75, exit 3, kill -9, signals to supervise, leftover
# processes, --restarts exhausted, usage), then under real mpirun (a rank
# kill -9'd, a rank exiting 75, SIGTERM) through tests/integration/mpi.sh.
if(TARGET shmrun)
	add_test(NAME supervise COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/supervise.sh
		 $<TARGET_FILE:shmrun>)
	set_tests_properties(supervise PROPERTIES TIMEOUT 300 LABELS "runtime;integration"
			     SKIP_RETURN_CODE 77)
endif()
