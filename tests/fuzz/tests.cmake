# libFuzzer harnesses (tests/fuzz/README.md): one per parser of untrusted bytes.
#
#   fuzz_conf        topology.conf loader (shmrun_job_load_mem(), runtime/conf*.c)
#   fuzz_manifest    MANIFEST parser (shmrun_manifest_parse(), runtime/ckpt/manifest.c)
#   fuzz_state_file  state-file reader (shmrun_state_parse() and its iterators)
#   fuzz_frame       record-frame decoder (chan_next_record(), runtime/channel.h)
#   fuzz_ring        a ring's (and a segment's) consumer over garbage shared memory
#
# Tests:
#   fuzz_<t>_corpus  every input of corpus/<t>/ once; in every build (a plain
#                    main() drives the harness when libFuzzer is not linked: a
#                    second or so), label "fuzz"
#   fuzz_<t>         -DSHMRUN_FUZZ=ON only: libFuzzer for 60 s over a copy of
#                    corpus/<t>/ (tests/fuzz/run.sh), fails on any crash, leak,
#                    timeout (10 s per input) or RSS above 2 GiB; labels
#                    "fuzz;fuzz_long"
set(shmrun_fuzz_targets conf manifest state_file frame ring)
foreach(t ${shmrun_fuzz_targets})
	set(exe fuzz_${t})
	if(SHMRUN_FUZZ)
		add_executable(${exe} ${CMAKE_CURRENT_LIST_DIR}/fuzz_${t}.c)
		target_link_options(${exe} PRIVATE -fsanitize=fuzzer)
	else()
		add_executable(${exe} ${CMAKE_CURRENT_LIST_DIR}/fuzz_${t}.c
			       ${CMAKE_CURRENT_LIST_DIR}/replay_main.c)
	endif()
	target_include_directories(${exe} PRIVATE ${PROJECT_SOURCE_DIR}/shm
				   ${PROJECT_SOURCE_DIR}/runtime ${PROJECT_SOURCE_DIR}/runtime/ckpt)
	target_link_libraries(${exe} PRIVATE shmrun_rt shmrun_shm PkgConfig::XXHASH Threads::Threads)
	add_test(NAME ${exe}_corpus COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run.sh replay
		 $<TARGET_FILE:${exe}> ${CMAKE_CURRENT_LIST_DIR}/corpus/${t})
	set_tests_properties(${exe}_corpus PROPERTIES TIMEOUT 120 LABELS "fuzz")
	if(SHMRUN_FUZZ)
		add_test(NAME ${exe} COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run.sh fuzz
			 $<TARGET_FILE:${exe}> ${CMAKE_CURRENT_LIST_DIR}/corpus/${t}
			 ${CMAKE_CURRENT_BINARY_DIR}/fuzz-artifacts)
		set_tests_properties(${exe} PROPERTIES TIMEOUT 240 LABELS "fuzz;fuzz_long")
	endif()
endforeach()
