# Unit tests of shm/ (docs/design.md §4): rings and segments in one process.
# check_ring_threads also carries the "tsan" label: .ci/run runs it under TSan.
shmrun_check_test(check_ring
	SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_ring.c
	LIBS shmrun_shm
	LABELS ring
	TIMEOUT 180)
shmrun_check_test(check_segment
	SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_segment.c
	LIBS shmrun_shm
	LABELS ring
	TIMEOUT 60)
shmrun_check_test(check_ring_threads
	SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_ring_threads.c
	LIBS shmrun_shm
	LABELS ring tsan
	TIMEOUT 240)

# Unit tests of runtime/ (docs/design.md §3, §7): placement properties, topology.conf.
shmrun_check_test(check_placement
	SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_placement.c
	LIBS shmrun_rt
	LABELS runtime
	TIMEOUT 120)
shmrun_check_test(check_metrics
	SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_metrics.c
	LIBS shmrun_rt
	LABELS runtime
	TIMEOUT 60)
shmrun_check_test(check_conf
	SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_conf.c
	LIBS shmrun_rt
	LABELS runtime
	TIMEOUT 120)
# The topology loader's shared helpers through runtime/conf_internal.h: CPU lists,
# typo suggestions, one key's check and its message.
shmrun_check_test(check_conf_internal
	SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_conf_internal.c
	LIBS shmrun_rt
	LABELS runtime
	TIMEOUT 60)
# [job] hosts (issue 16): the MPI launcher's environment, the refusals before a run.
shmrun_check_test(check_multihost
	SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_multihost.c
	LIBS shmrun_rt
	LABELS runtime
	TIMEOUT 60)
# A stage's rate across hosts (issue 16): each host paces its instances' share
# (runtime/pace.c), the shares add up to the rate, tokens taken on a fake clock.
shmrun_check_test(check_pace
	SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_pace.c
	LIBS shmrun_rt
	LABELS runtime
	TIMEOUT 120)
shmrun_check_test(check_plan
	SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_plan.c
	LIBS shmrun_rt
	LABELS runtime
	TIMEOUT 60)

# Key-bound state (runtime/state.c, docs/design.md §5) through state.h: round
# trips, per-vnode counts, foreach order, growth, bytes accounting, ENOMEM.
shmrun_check_test(check_state
	SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_state.c
	LIBS shmrun_rt
	LABELS runtime
	TIMEOUT 120)

# Keyed timers (runtime/timer.c) and namespaced, deletable key-bound state (task.c)
# through the operator API on a fake worker's task: firing order, dedup, delete,
# timers set while firing, flat memory over long runs, refusals.
shmrun_check_test(check_timer
	SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_timer.c
	LIBS shmrun_rt
	LABELS runtime
	TIMEOUT 120)

# Checkpoint state files (docs/design.md §6, docs/checkpoints.md): block format, io_uring
# writer and its pwrite/fsync fallback, the SHMRUN_FAULT switch, the verifying reader.
shmrun_check_test(check_ckpt_io
	SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_ckpt_io.c
	LIBS shmrun_rt
	LABELS runtime
	TIMEOUT 120)

# The state file's logical content through runtime/ckpt/state_file.h (its one owner):
# encode -> parse round trips, zero cases, damaged input -> -EBADMSG.
shmrun_check_test(check_state_file
	SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_state_file.c
	LIBS shmrun_rt
	LABELS runtime
	TIMEOUT 60)

# Checkpoint directories through runtime/ckpt/manifest.h: MANIFEST round trip and
# damage, verify, restore selection, listing, removal of incomplete epochs.
shmrun_check_test(check_manifest
	SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_manifest.c
	LIBS shmrun_rt
	LABELS runtime
	TIMEOUT 60)

# Log lines as text and JSON, the status line's erasing, the progress line's
# text (runtime/log.c, runtime/progress.c; issue 13 items 5 and 7).
shmrun_check_test(check_log
	SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_log.c
	LIBS shmrun_rt PkgConfig::JANSSON
	LABELS runtime
	TIMEOUT 60)

# The runtime's shared idioms through runtime/util.h: the growable array (growth,
# exact need, overflow and a failed realloc leave the array intact), mkdir -p,
# the read loop, the monotonic clock.
shmrun_check_test(check_util
	SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_util.c
	LIBS shmrun_rt
	LABELS runtime
	TIMEOUT 60)

# The topology fingerprint that guards every restore (docs/design.md §6, issue 5):
# what changes it, what must not, and the messages naming each difference.
shmrun_check_test(check_fingerprint
	SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_fingerprint.c
	LIBS shmrun_rt
	LABELS runtime
	TIMEOUT 60)

# shmrun_rescale() on fabricated checkpoints (runtime/ckpt/rescale.c): split dealing of
# per-worker state, whole-vnode moves of key-bound state, refusals, plan mode.
shmrun_check_test(check_rescale
	SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_rescale.c
	LIBS shmrun_rt
	LABELS runtime
	TIMEOUT 120)

# runtime/channel.c (issue 9): record frames both ways over a real ring, damaged
# frames, the overflow queue's order and backlogged count, the zero cases.
shmrun_check_test(check_channel
	SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_channel.c
	LIBS shmrun_rt
	LABELS runtime
	TIMEOUT 60)

# runtime/preflight.c (issue 8): every path key declares input or output; an
# output that is an input is refused; the run's locks exclude other processes.
shmrun_check_test(check_preflight
	SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_preflight.c
	LIBS shmrun_rt
	LABELS runtime
	TIMEOUT 60)

# Contracts every built-in operator keeps, over the whole registry (issue 8):
# a restored source with no per-worker entry computes no position in open().
shmrun_check_test(check_ops
	SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_ops.c
	LIBS shmrun_rt
	LABELS runtime
	TIMEOUT 60)

# The control area as a format (runtime/control.h, docs/shm-layout.md "Control
# area", issue 9): layout words, offsets and alignment, the check every worker
# makes, counts too large to lay out.
shmrun_check_test(check_control
	SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_control.c
	LIBS shmrun_rt
	LABELS runtime
	TIMEOUT 60)

shmrun_check_test(check_snapshot
	SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_snapshot.c
	LIBS shmrun_rt
	LABELS runtime
	TIMEOUT 60)

# runtime/combine.c (issue 10): the sending side of a combiner folds every
# record into its key's partial, flushes each key once with its hash, reports a
# full table, never reads past a key.
shmrun_check_test(check_combine
	SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_combine.c
	LIBS shmrun_rt
	LABELS runtime
	TIMEOUT 60)
# The tokenizer (runtime/ops/tokenize_scan.c, tokenize.c; issue 10 item 4): the SSE2
# and scalar scanners against a byte-loop reference (every length 0..300 at every
# alignment, resuming after max tokens), the span rule, process_batch() == process().
shmrun_check_test(check_tokenize
	SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_tokenize.c
	LIBS shmrun_rt
	LABELS runtime
	TIMEOUT 180)
# Which operator callback a worker crashed or hangs in (runtime/callback.h):
# the launcher's words for it, the control-area words, operator_timeout's watch.
shmrun_check_test(check_callback
	SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_callback.c
	LIBS shmrun_rt
	LABELS runtime
	TIMEOUT 60)
# The extract operator's rules (runtime/ops/extract.c, event_time.c; issue 12 item 1):
# zones against glibc's own conversion, the skipped and repeated hours, time
# formats, fields, separators, regex groups, and every bad conf with its key.
# stdin_source's and socket_source's record cutting (runtime/ops/framer.c).
shmrun_check_test(check_framer
	SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_framer.c
	LIBS shmrun_rt
	LABELS runtime
	TIMEOUT 60)
# socket_source's listen/connect address parser (runtime/ops/netaddr.c).
shmrun_check_test(check_netaddr
	SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_netaddr.c
	LIBS shmrun_rt
	LABELS runtime
	TIMEOUT 60)
shmrun_check_test(check_extract
	SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_extract.c
	LIBS shmrun_rt
	LABELS runtime
	TIMEOUT 180)
# op = window (runtime/ops/window.c) linked alone with a model of the event-time
# contract of shmrun/operator.h (timers, namespaced state, watermark): its logic,
# with hand-computed results, whatever the runtime's timer store.
shmrun_check_test(check_window
	SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_window.c ${PROJECT_SOURCE_DIR}/runtime/ops/window.c
		${PROJECT_SOURCE_DIR}/runtime/util.c
	LABELS runtime
	TIMEOUT 60)
target_include_directories(check_window PRIVATE ${PROJECT_SOURCE_DIR}/runtime/include)

# Watermarks (runtime/watermark.c, docs/event-time.md) on one task without
# rings: minimum over inputs, restored watermark, MAX at end, idleness, generation.
shmrun_check_test(check_watermark
	SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_watermark.c
	LIBS shmrun_rt
	LABELS runtime
	TIMEOUT 60)

# The Prometheus page and the summary file from hand-set counters (runtime/prom.c,
# runtime/summary.c, issue 13 §4, §6).
shmrun_check_test(check_prom
	SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_prom.c
	LIBS shmrun_rt
	LABELS runtime
	TIMEOUT 60)
# `shmrun top`'s number formatting (runtime/top.h): sizes, counts, rates,
# durations, bars, ring fill; tests/integration/top.sh runs the command.
shmrun_check_test(check_top
	SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_top.c
	LIBS shmrun_rt PkgConfig::JANSSON
	LABELS runtime
	TIMEOUT 60)
# The job's socket (issue 13: shmrun ps, stop, top): the runtime directory's
# fallbacks, the name lock, a forked client served, a stale socket replaced.
shmrun_check_test(check_jobsock
	SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_jobsock.c
	LIBS shmrun_rt PkgConfig::JANSSON
	LABELS runtime
	TIMEOUT 120)

# Checkpoints across hosts (runtime/ckpt/hosts.h, issue 16) without MPI: two
# "hosts" as two views of one per_host job — {host}, the MANIFEST bytes of a
# COMMIT and their installation, retention by one host's files, the epoch the
# hosts agree to restore.
shmrun_check_test(check_ckpt_hosts
	SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_ckpt_hosts.c
	LIBS shmrun_rt
	LABELS runtime
	TIMEOUT 60)
# `shmrun supervise` (issue 16 §4): which ends of a COMMAND (and of mpirun,
# as Open MPI 4.1 reports a rank's death) are rerun.
shmrun_check_test(check_supervise
	SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_supervise.c
	LIBS shmrun_rt
	LABELS runtime
	TIMEOUT 60)
