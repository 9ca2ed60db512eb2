/*
 * runtime/ckpt/snapshot.h: a worker's side of the checkpoint protocol — the
 * forked state-file writer, its children, the stalls it costs, and restore
 * of the worker's tasks from a checkpoint (private to runtime/; the worker
 * loop in worker.c calls these; docs/design.md §6, steps 3 and restore).
 */
#ifndef SHMRUN_RT_CKPT_SNAPSHOT_H
#define SHMRUN_RT_CKPT_SNAPSHOT_H

#include <stdint.h>

#include "worker.h"

/*
 * shmrun_snapshot_take() - snapshot task @t for epoch @e, once it is aligned
 * on barrier(@e): call the operator's snapshot() (per-worker entries,
 * fds to sync), then fork a child that writes @t's state file from its
 * copy-on-write image and reports in @t's slot (done_epoch or failed_epoch).
 * The worker goes on at once; the stall (snapshot() plus the fork) is
 * recorded for the worker's stall percentiles. A failed fork fails the epoch
 * in the slot, not the task. Sets t->barrier_epoch = @e.
 * Return: 0, or the operator's -errno from snapshot() (logged as the task's
 * error; the task fails).
 */
int shmrun_snapshot_take(struct shmrun_task *t, uint64_t e);

/*
 * shmrun_snapshot_reaped() - child @pid of worker @w exited with @status
 * (from waitpid()). If it is one of @w's snapshot writers it is forgotten and
 * ctl->writers decremented; one that died without reporting in its slot
 * fails its epoch (error -ECHILD) at once, logged. Another pid is ignored.
 */
void shmrun_snapshot_reaped(struct shmrun_worker *w, int pid, int status);

/*
 * shmrun_snapshot_restore() - restore every task of @w from the checkpoint
 * ctl->restored_epoch of checkpoint_dir (the MANIFEST is read once): each
 * task's key-bound state goes into its kv, its per-worker entries are kept
 * for shmrun_snapshot_restore_entries(). Call before the tasks open.
 * Return: 0; -EBADMSG (MANIFEST or state file damaged), -ENOENT, -ENOMEM,
 * -errno; the reason is in w->stats->error (w->failed set) or the task's error.
 */
int shmrun_snapshot_restore(struct shmrun_worker *w);

/*
 * shmrun_snapshot_restore_entries() - hand @t's restored per-worker entries
 * to its operator's restore(), one call per entry, after open(), and free
 * them. Return: 0; -EBADMSG (truncated entries, logged); the operator's -errno.
 */
int shmrun_snapshot_restore_entries(struct shmrun_task *t);

#endif /* SHMRUN_RT_CKPT_SNAPSHOT_H */
