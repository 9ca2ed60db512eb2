/*
 * runtime/ckpt/coordinator.h: worker 0's checkpoint duties — trigger, abort,
 * the MANIFEST child and its reaping, the per-worker state guard (private to
 * runtime/; the protocol is described in coordinator.c, docs/design.md §6).
 */
#ifndef SHMRUN_RT_CKPT_COORDINATOR_H
#define SHMRUN_RT_CKPT_COORDINATOR_H

#include <stdbool.h>
#include <stdint.h>

#include "control.h"
#include "plan.h"

/* Checkpoints of steady growth after which per-worker state draws a warning. */
#define SHMRUN_PW_GROWTH_CHECKPOINTS 5

struct shmrun_coordinator {
	uint64_t epoch;        /* in flight, 0 if none */
	int64_t started_ns;    /* when it was triggered */
	int64_t next_ns;       /* when to trigger the next one */
	int manifest_pid;      /* child writing epoch's MANIFEST, 0 if none */
	bool manifest_exited;  /* that child was reaped by someone else's waitpid(-1) */
	uint64_t *pw_history;  /* per task: per-worker bytes at the last checkpoints */
	uint64_t pw_checkpoints;
	uint64_t manifest_epoch;
	uint64_t *beats; /* per worker: heartbeat when the epoch in flight started */
};

/*
 * shmrun_coordinate() - worker 0's checkpoint duties, called every loop turn:
 * trigger epochs every checkpoint_interval (and the final one once every
 * source is exhausted or a stop was requested), notice when every task's
 * snapshot is durable and have the MANIFEST written (by a child, off the
 * processing path), abort an epoch past checkpoint_timeout or with a failed
 * write. An epoch that times out is logged with the tasks that did not report
 * and, for each of their workers, its pid, CPU and tasks, and whether it made
 * no progress since the epoch started (its heartbeat did not move) and is
 * stopped (state T in /proc/PID/stat: SIGSTOP?); a worker none of whose tasks
 * is late is not named, one without a pid is "not started yet". The first
 * epoch numbers past ctl->restored_epoch and ctl->epoch_floor. After the
 * MANIFEST, retention keeps the newest checkpoint_retain checkpoints that look
 * restorable and retires older ones, MANIFEST first. co->beats is allocated here;
 * the caller frees it with co->pw_history. Return: true if it did something.
 */
bool shmrun_coordinate(struct shmrun_coordinator *co, const struct shmrun_plan *plan,
		       struct shmrun_control *ctl, int64_t now_ns);

/*
 * shmrun_coordinator_reaped() - the worker loop reaped child @pid (waitpid(-1)):
 * if it is the MANIFEST child, note it for shmrun_coordinate(), which judges
 * it by complete_epoch. Return: true if @pid was the coordinator's child.
 */
bool shmrun_coordinator_reaped(struct shmrun_coordinator *co, int pid);


/*
 * shmrun_process_state() - the state letter of process @pid from
 * /proc/PID/stat: R running, S sleeping, D uninterruptible wait, T stopped
 * (SIGSTOP, job control), t stopped by a debugger, Z zombie. Return: that
 * letter, or 0 if @pid <= 0 or the file cannot be read.
 */
char shmrun_process_state(int pid);

#endif /* SHMRUN_RT_CKPT_COORDINATOR_H */
