/*
 * runtime/control.h: the control area, the run's second shared mapping
 * (private to runtime/; docs/shm-layout.md "Control area" is the byte-by-byte
 * reference, with every memory-ordering pair). runtime/control.c lays it out.
 *
 * The launcher creates one control area per run (MAP_SHARED | MAP_ANONYMOUS)
 * before it forks the workers, which inherit it; a restart creates a new one.
 * It holds what the processes of a run tell each other outside the rings: the
 * checkpoint epochs and the stop flags (struct shmrun_control), one block of
 * counters and the doorbell per worker (struct shmrun_worker_stats), and one
 * checkpoint slot per task (struct shmrun_task_slot):
 *
 *     0                 struct shmrun_control      magic, version, layout descriptor, epochs
 *     stats_off         workers x struct shmrun_worker_stats    (640 bytes each)
 *     slots_off         max(tasks, 1) x struct shmrun_task_slot (128 bytes each)
 *     bytes             end
 *
 * stats_off is sizeof(struct shmrun_control) rounded up to 64; every block is
 * a multiple of 64 bytes, so every block starts on its own cache line.
 *
 * Invariants: shared structs hold fixed-width integers only (no pointers, no
 * bool, no size_t); every offset and size is pinned by a static_assert below;
 * the layout words (magic to cacheline) are written once, by
 * shmrun_control_create(), before the first fork, and never again; each field
 * says who writes it and how readers are ordered against the writer.
 */
#ifndef SHMRUN_RT_CONTROL_H
#define SHMRUN_RT_CONTROL_H

#include <assert.h>
#include <limits.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shmrun/ring.h"

/* "SHMRUNCT" as a little-endian 64-bit word. */
#define SHMRUN_CONTROL_MAGIC 0x54434e55524d4853ull
#define SHMRUN_CONTROL_LAYOUT_VERSION 5u

/*
 * The largest counts shmrun_control_memsize() lays out. Far above any job
 * (tasks are bounded by stages x width, width by vnodes <= 65536; workers by
 * the CPUs), low enough that the mapping (2 GiB of slots at most) never
 * depends on how the kernel overcommits.
 */
#define SHMRUN_CONTROL_MAX_WORKERS 65536u
#define SHMRUN_CONTROL_MAX_TASKS (1u << 24)

/*
 * Per-task checkpoint slot in the shared control mapping. Written by the
 * task's worker and its snapshot children; read by worker 0 (the coordinator).
 * size/xxh64/kv_bytes/pw_bytes are stored before done_epoch (release), so a
 * reader that loads done_epoch with acquire sees the ones of that epoch.
 */
struct shmrun_task_slot {
	_Atomic uint64_t done_epoch;   /* newest epoch whose state file is durable */
	_Atomic uint64_t failed_epoch; /* newest epoch whose snapshot failed */
	_Atomic int32_t error;         /* -errno of failed_epoch */
	_Atomic uint32_t exhausted;    /* source: produce() has returned 0 */
	uint64_t size, xxh64;          /* of the state file of done_epoch */
	uint64_t kv_bytes, pw_bytes;   /* its key-bound and per-worker parts, bytes */
	/* pid of the snapshot writer inside shmrun_slot_report(), 0 if none:
	 * writers of two epochs of one task (a late one of an aborted epoch and
	 * the next epoch's) report one at a time (acquire/release; see there). */
	_Atomic int32_t reporter;
	uint32_t reserved;             /* 0 */
	/*
	 * Used only in the slot of a stage's instance 0: the tokens of the
	 * stage's `rate`, shared by all its instances on every worker, so the
	 * rate holds for the whole stage whatever the pieces (pace.c,
	 * source_budget()). Both relaxed: they order nothing else. On their own
	 * cache line, away from the checkpoint words above.
	 */
	_Alignas(64) _Atomic int64_t rate_start_ns; /* CLOCK_MONOTONIC of the first token, 0 before */
	_Atomic uint64_t rate_taken;                /* tokens taken since (records produced) */
} __attribute__((aligned(64)));

/*
 * Per-worker counters and bell. Written by one worker (relaxed; the launcher
 * reads counters only after the worker has exited, which waitpid orders).
 */
struct shmrun_worker_stats {
	struct shmrun_bell bell;      /* this worker sleeps here; its peers ring it */
	_Atomic uint64_t records_in;  /* records read by sources */
	_Atomic uint64_t records_out; /* records written by sinks */
	_Atomic uint64_t keys;        /* distinct keys in key-bound state at exit */
	_Atomic uint64_t state_bytes; /* bytes of key-bound state at exit */
	_Atomic uint64_t key_bytes;   /* of which the keys themselves */
	_Atomic uint64_t stall_p50_ns, stall_p99_ns, stall_max_ns, snapshots; /* checkpoint stalls */
	char error[432];              /* why the worker failed, if it did */
	/* Liveness, read by worker 0 when an epoch times out (relaxed: a hint
	 * for a message, nothing is synchronised by it). Away from the bell's
	 * cache line, which peers write. */
	_Atomic int32_t pid;	    /* the worker's process, set when it starts */
	_Atomic uint64_t heartbeat; /* loop turns; an idle worker still turns every <= 10 ms */
	_Atomic int32_t fail_errno;   /* the errno an operator's failure returned (positive), 0 */
	_Atomic uint64_t frames;      /* frames this worker put on channels, at exit */
	_Atomic uint64_t overflow_frames; /* of which went through an overflow queue */
	/*
	 * The operator callback the worker is in (runtime/callback.h): read by
	 * the launcher after waitpid (a crash names the callback it died in)
	 * and every operator_timeout/4 while it runs (a callback that does not
	 * return). cb_seq is stored (relaxed) before cb_where at every entry;
	 * cb_where is stored with release at entry and exit, and the launcher
	 * loads it with acquire and then cb_seq: a where it sees comes with the
	 * seq of its entry or a later one (callback.h, pair C13).
	 */
	_Atomic uint64_t cb_where;    /* shmrun_cb_where() of the innermost callback, 0 outside */
	_Atomic uint64_t cb_seq;      /* callback entries so far */
	_Atomic uint64_t records_bad; /* records operators dropped as malformed, at exit */
	_Atomic uint64_t records_late; /* records operators dropped as late (op = window), at exit */
	_Atomic uint64_t state_peak_bytes; /* sum over its tasks of each one's largest key-bound
					      state (shmrun_kv.peak), at exit */
} __attribute__((aligned(64)));

/*
 * The shared control mapping of one run (MAP_SHARED | MAP_ANONYMOUS, created
 * by the launcher before it forks; a restart creates a new one):
 *
 *     struct shmrun_control | workers x struct shmrun_worker_stats | tasks x struct shmrun_task_slot
 *
 * Epoch words are written by worker 0 (the coordinator) or its manifest child
 * and read by everyone with acquire; stop_requested by the launcher.
 */
#define SHMRUN_GO_RUN 1
#define SHMRUN_GO_NOTHING 2

struct shmrun_control {
	/* line 0, the layout: written once by shmrun_control_create(), before
	 * the first fork (which orders it for every reader); checked by every
	 * worker when it starts (shmrun_control_check()) */
	uint64_t magic;                  /* SHMRUN_CONTROL_MAGIC */
	uint32_t version;                /* SHMRUN_CONTROL_LAYOUT_VERSION */
	uint32_t header_bytes;           /* sizeof(struct shmrun_control) */
	uint32_t stats_bytes;            /* sizeof(struct shmrun_worker_stats) */
	uint32_t slot_bytes;             /* sizeof(struct shmrun_task_slot) */
	uint32_t workers, tasks;
	uint64_t stats_off, slots_off;   /* from the start of the mapping */
	uint64_t bytes;                  /* of the whole mapping */
	uint32_t cacheline;              /* SHMRUN_CACHELINE */
	/* hosts > 1 only: the workers wait for it before they restore or touch
	 * anything (launcher.c worker_main()); the gateway sets it once the
	 * hosts agreed on the job and the epoch to restore (gateway.c
	 * agree()): SHMRUN_GO_RUN, or SHMRUN_GO_NOTHING (exit 0 at once: the
	 * agreed checkpoint ends a finished run and this host cannot restore
	 * it). Stays 0 when they did not agree: the launcher kills them. */
	_Atomic uint32_t go;

	/* line 1 on: the run */
	_Atomic uint64_t trigger_epoch;  /* newest epoch worker 0 started */
	_Atomic uint64_t complete_epoch; /* newest epoch whose MANIFEST is durable */
	_Atomic uint64_t aborted_epoch;  /* newest epoch given up (timeout, write error) */
	_Atomic uint64_t final_epoch;    /* the last epoch (end of input or stop), 0 until chosen */
	_Atomic uint32_t stop_requested; /* launcher: take a final checkpoint, then stop */
	_Atomic uint32_t failed;         /* the final epoch failed: every worker stops, exit 1 */
	_Atomic uint32_t final_is_stop;  /* final_epoch is a stop, not end of input */
	/* launcher, before it SIGTERMs the workers: stop at once. A worker's
	 * stop handler stops on any stop signal once this is set, whoever sent
	 * it (a group's copy still pending merges with the launcher's). */
	_Atomic uint32_t stop_now;
	uint64_t restored_epoch;         /* launcher, before fork: 0 = fresh start */
	/* launcher, before fork: the newest ckpt-N in checkpoint_dir (any kind:
	 * damaged, incomplete, not ours). New epochs number past it, so no epoch
	 * writes into a directory it did not create. Only the coordinator reads
	 * it: trigger_epoch starts at restored_epoch, never past it, or sources
	 * would inject a barrier of an epoch that was never started. */
	uint64_t epoch_floor;
	uint32_t restored_finished;      /* launcher: that checkpoint ends a finished run */
	/* A checkpoint failure the job must stop for (an errno a restart cannot
	 * cure, or the final epoch's): worker 0 writes both, then failed (release). */
	_Atomic int32_t failed_errno;    /* positive errno, 0 if none */
	/* Snapshot writers running in the whole job: each worker adds its own
	 * when it forks one and takes it off when it reaps it (relaxed: a count
	 * to wait on). When the job fails on a checkpoint (failed), every worker
	 * waits for it to reach 0 before it exits, because the launcher kills
	 * the others once one has exited, and a writer killed mid-way leaves its
	 * aborted epoch's directory behind. */
	_Atomic uint32_t writers;
	char failed_why[PATH_MAX + 512]; /* "epoch 3: writing /path/ckpt-3/x.0.state failed: ..." */
};

/* The layout, pinned (docs/shm-layout.md "Control area" lists the same numbers). */
static_assert(sizeof(_Atomic uint64_t) == 8 && sizeof(_Atomic uint32_t) == 4 &&
		      sizeof(_Atomic int64_t) == 8 && sizeof(_Atomic int32_t) == 4,
	      "lock-free atomics of plain size");
static_assert(SHMRUN_CACHELINE == 64, "control area blocks are 64-byte aligned");

static_assert(offsetof(struct shmrun_task_slot, done_epoch) == 0, "slot layout");
static_assert(offsetof(struct shmrun_task_slot, failed_epoch) == 8, "slot layout");
static_assert(offsetof(struct shmrun_task_slot, error) == 16, "slot layout");
static_assert(offsetof(struct shmrun_task_slot, exhausted) == 20, "slot layout");
static_assert(offsetof(struct shmrun_task_slot, size) == 24, "slot layout");
static_assert(offsetof(struct shmrun_task_slot, xxh64) == 32, "slot layout");
static_assert(offsetof(struct shmrun_task_slot, kv_bytes) == 40, "slot layout");
static_assert(offsetof(struct shmrun_task_slot, pw_bytes) == 48, "slot layout");
static_assert(offsetof(struct shmrun_task_slot, reporter) == 56, "slot layout");
static_assert(offsetof(struct shmrun_task_slot, reserved) == 60, "slot layout");
static_assert(offsetof(struct shmrun_task_slot, rate_start_ns) == 64, "slot rate line");
static_assert(offsetof(struct shmrun_task_slot, rate_taken) == 72, "slot layout");
static_assert(sizeof(struct shmrun_task_slot) == 128, "slot layout");
static_assert(alignof(struct shmrun_task_slot) == 64, "slot alignment");

static_assert(offsetof(struct shmrun_worker_stats, bell) == 0, "stats layout");
static_assert(sizeof(struct shmrun_bell) == 8, "bell layout");
static_assert(offsetof(struct shmrun_worker_stats, records_in) == 8, "stats layout");
static_assert(offsetof(struct shmrun_worker_stats, records_out) == 16, "stats layout");
static_assert(offsetof(struct shmrun_worker_stats, keys) == 24, "stats layout");
static_assert(offsetof(struct shmrun_worker_stats, state_bytes) == 32, "stats layout");
static_assert(offsetof(struct shmrun_worker_stats, key_bytes) == 40, "stats layout");
static_assert(offsetof(struct shmrun_worker_stats, stall_p50_ns) == 48, "stats layout");
static_assert(offsetof(struct shmrun_worker_stats, stall_p99_ns) == 56, "stats layout");
static_assert(offsetof(struct shmrun_worker_stats, stall_max_ns) == 64, "stats layout");
static_assert(offsetof(struct shmrun_worker_stats, snapshots) == 72, "stats layout");
static_assert(offsetof(struct shmrun_worker_stats, error) == 80, "stats layout");
static_assert(sizeof(((struct shmrun_worker_stats *)0)->error) == 432, "stats layout");
static_assert(offsetof(struct shmrun_worker_stats, pid) == 512, "stats liveness line");
static_assert(offsetof(struct shmrun_worker_stats, heartbeat) == 520, "stats layout");
static_assert(offsetof(struct shmrun_worker_stats, fail_errno) == 528, "stats layout");
static_assert(offsetof(struct shmrun_worker_stats, frames) == 536, "stats layout");
static_assert(offsetof(struct shmrun_worker_stats, overflow_frames) == 544, "stats layout");
static_assert(offsetof(struct shmrun_worker_stats, cb_where) == 552, "stats layout");
static_assert(offsetof(struct shmrun_worker_stats, cb_seq) == 560, "stats layout");
static_assert(offsetof(struct shmrun_worker_stats, records_bad) == 568, "stats layout");
static_assert(offsetof(struct shmrun_worker_stats, records_late) == 576, "stats layout");
static_assert(offsetof(struct shmrun_worker_stats, state_peak_bytes) == 584, "stats layout");
static_assert(sizeof(struct shmrun_worker_stats) == 640, "stats layout");
static_assert(alignof(struct shmrun_worker_stats) == 64, "stats alignment");

static_assert(offsetof(struct shmrun_control, magic) == 0, "control layout");
static_assert(offsetof(struct shmrun_control, version) == 8, "control layout");
static_assert(offsetof(struct shmrun_control, header_bytes) == 12, "control layout");
static_assert(offsetof(struct shmrun_control, stats_bytes) == 16, "control layout");
static_assert(offsetof(struct shmrun_control, slot_bytes) == 20, "control layout");
static_assert(offsetof(struct shmrun_control, workers) == 24, "control layout");
static_assert(offsetof(struct shmrun_control, tasks) == 28, "control layout");
static_assert(offsetof(struct shmrun_control, stats_off) == 32, "control layout");
static_assert(offsetof(struct shmrun_control, slots_off) == 40, "control layout");
static_assert(offsetof(struct shmrun_control, bytes) == 48, "control layout");
static_assert(offsetof(struct shmrun_control, cacheline) == 56, "control layout");
static_assert(offsetof(struct shmrun_control, go) == 60, "control layout");
static_assert(offsetof(struct shmrun_control, trigger_epoch) == 64, "control epoch line");
static_assert(offsetof(struct shmrun_control, complete_epoch) == 72, "control layout");
static_assert(offsetof(struct shmrun_control, aborted_epoch) == 80, "control layout");
static_assert(offsetof(struct shmrun_control, final_epoch) == 88, "control layout");
static_assert(offsetof(struct shmrun_control, stop_requested) == 96, "control layout");
static_assert(offsetof(struct shmrun_control, failed) == 100, "control layout");
static_assert(offsetof(struct shmrun_control, final_is_stop) == 104, "control layout");
static_assert(offsetof(struct shmrun_control, stop_now) == 108, "control layout");
static_assert(offsetof(struct shmrun_control, restored_epoch) == 112, "control layout");
static_assert(offsetof(struct shmrun_control, epoch_floor) == 120, "control layout");
static_assert(offsetof(struct shmrun_control, restored_finished) == 128, "control layout");
static_assert(offsetof(struct shmrun_control, failed_errno) == 132, "control layout");
static_assert(offsetof(struct shmrun_control, writers) == 136, "control layout");
static_assert(offsetof(struct shmrun_control, failed_why) == 140, "control layout");
static_assert(PATH_MAX == 4096, "failed_why is PATH_MAX + 512 = 4608 bytes");
static_assert(sizeof(struct shmrun_control) == 4752, "control layout");

/*
 * shmrun_control_stats() - the first of the control area's worker blocks.
 * @c: a control area from shmrun_control_create().
 * Return: &stats[0] of c->workers blocks (index by worker); no check.
 */
static inline struct shmrun_worker_stats *shmrun_control_stats(struct shmrun_control *c)
{
	return (struct shmrun_worker_stats *)((unsigned char *)c + c->stats_off);
}

/*
 * shmrun_control_slots() - the first of the control area's task slots.
 * @c: a control area from shmrun_control_create().
 * Return: &slots[0] of c->tasks slots (index by plan task id); no check.
 */
static inline struct shmrun_task_slot *shmrun_control_slots(struct shmrun_control *c)
{
	return (struct shmrun_task_slot *)((unsigned char *)c + c->slots_off);
}

/*
 * shmrun_control_memsize() - bytes of a control area for @workers and @tasks.
 * @workers: worker blocks, 0 … SHMRUN_CONTROL_MAX_WORKERS.
 * @tasks:   task slots, 0 … SHMRUN_CONTROL_MAX_TASKS (0 still gets one slot).
 * Return: header rounded up to 64, plus @workers x 640, plus max(@tasks, 1) x
 * 128 bytes; 0 if a count is above its maximum (never an overflowed size).
 */
uint64_t shmrun_control_memsize(uint32_t workers, uint32_t tasks);

/*
 * shmrun_control_create() - map and lay out a zeroed control area.
 * @workers, @tasks: as for shmrun_control_memsize().
 *
 * Maps shmrun_control_memsize() bytes MAP_SHARED | MAP_ANONYMOUS (zeroed by
 * the kernel; children forked afterwards share it) and writes the layout
 * words: magic, version, the descriptor, counts and offsets. Every other
 * field starts at 0.
 * Return: the area, owned by the caller (free with shmrun_control_destroy());
 * NULL on ENOMEM — the mapping failed, or a count is above its maximum.
 */
struct shmrun_control *shmrun_control_create(uint32_t workers, uint32_t tasks);

/*
 * shmrun_control_destroy() - unmap a control area of this process.
 * @c: from shmrun_control_create(), or NULL (nothing happens). Processes
 * forked before keep their own mapping until they exit or unmap it.
 */
void shmrun_control_destroy(struct shmrun_control *c);

/*
 * shmrun_control_check() - is @c a control area this build can use, laid out
 * for @workers workers and @tasks tasks? Each worker calls it when it starts,
 * before it touches any other field. Reads only line 0; changes nothing.
 * @c:       the mapping, at least 64 bytes readable.
 * @workers: the job's worker count; @tasks: the plan's task count.
 * @why:     receives a one-line reason on failure ("control area: ... "), may
 *           be NULL; @len: its size in bytes.
 * Return: 0; -EINVAL if @c is NULL; -EPROTO if the magic, the version, a size
 * of the layout descriptor, a count or an offset differs from what this build
 * lays out for @workers and @tasks.
 */
int shmrun_control_check(const struct shmrun_control *c, uint32_t workers, uint32_t tasks,
			 char *why, size_t len);

/* What a snapshot writer reports of the state file it made. */
struct shmrun_slot_file {
	uint64_t size, xxh64;        /* bytes and XXH64 of the whole file */
	uint64_t kv_bytes, pw_bytes; /* its key-bound and per-worker parts, bytes */
};

/*
 * shmrun_slot_report() - the snapshot writer of epoch @e of a task reports
 * into the task's @slot of control area @c: with @err 0, @f's fields and then
 * done_epoch = @e (release: pairs with the coordinator's acquire of
 * done_epoch, which then reads @f's fields); with @err < 0, error = @err and
 * then failed_epoch = @e (release). @f is read only when @err is 0.
 *
 * Nothing is stored when the report is stale, checked under the slot's
 * reporter lock: when @e was aborted (aborted_epoch >= @e, seq_cst, as the
 * coordinator's abort stores it), or when the slot already holds a newer
 * epoch (done_epoch or failed_epoch > @e). Without this, the late writer of
 * an aborted epoch, finishing after the next epoch's writer of the same task
 * had reported, set done_epoch back (the next epoch timed out) or overwrote
 * the sizes and checksum the MANIFEST writer was about to read. The lock is
 * the writer's pid; one held by a process that no longer exists (killed
 * inside the few stores) is taken over, so a crash never wedges a slot.
 *
 * Return: 1 if the report was stored, 0 if it was stale and dropped.
 */
/*
 * shmrun_slot_stale() - whether a report of epoch @e into @slot of control
 * area @c would be dropped: @e was aborted (aborted_epoch >= @e) or the slot
 * already holds @e or a newer epoch (done_epoch or failed_epoch >= @e).
 * shmrun_slot_report() judges by it under the slot's lock; a worker reaping
 * a writer that left no report judges by it whether the writer died.
 */
bool shmrun_slot_stale(const struct shmrun_control *c, const struct shmrun_task_slot *slot,
		       uint64_t e);

int shmrun_slot_report(struct shmrun_control *c, struct shmrun_task_slot *slot, uint64_t e,
		       int err, const struct shmrun_slot_file *f);

#endif /* SHMRUN_RT_CONTROL_H */
