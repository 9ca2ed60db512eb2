/*
 * runtime/checkpoint.h: the control area of a run — epoch words, task
 * checkpoint slots, worker counters and bells (private to runtime/). The
 * checkpoint protocol that uses it is in runtime/ckpt/ (ckpt/README.md;
 * docs/checkpoints.md is the reference).
 */
#ifndef SHMRUN_RT_CHECKPOINT_H
#define SHMRUN_RT_CHECKPOINT_H

#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "plan.h"
#include "shmrun/ring.h"

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
	/*
	 * Used only in the slot of a stage's instance 0: the tokens of the
	 * stage's `rate`, shared by all its instances on every worker, so the
	 * rate holds for the whole stage whatever the pieces (worker.c,
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
struct shmrun_control {
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
	uint32_t workers, tasks;
	uint64_t stats_off, slots_off;   /* from the start of the mapping */
	size_t bytes;                    /* of the whole mapping */
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

static inline struct shmrun_worker_stats *shmrun_control_stats(struct shmrun_control *c)
{
	return (struct shmrun_worker_stats *)((unsigned char *)c + c->stats_off);
}

static inline struct shmrun_task_slot *shmrun_control_slots(struct shmrun_control *c)
{
	return (struct shmrun_task_slot *)((unsigned char *)c + c->slots_off);
}

/* shmrun_control_create() - map and lay out a zeroed control area. NULL on ENOMEM. */
struct shmrun_control *shmrun_control_create(uint32_t workers, uint32_t tasks);
void shmrun_control_destroy(struct shmrun_control *c);

#endif /* SHMRUN_RT_CHECKPOINT_H */
