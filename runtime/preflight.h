/*
 * runtime/preflight.h: what runtime/preflight.c offers the rest of runtime/
 * (private; the CLI's part is in shmrun/runtime.h).
 */
#ifndef SHMRUN_RT_PREFLIGHT_H
#define SHMRUN_RT_PREFLIGHT_H

#include <stdbool.h>

/*
 * shmrun_errno_is_permanent() - @err (a positive errno) cannot be cured by
 * retrying or restarting: EACCES, EPERM, EROFS. A checkpoint write failing
 * with one stops the job at once, and the launcher does not restart it.
 */
bool shmrun_errno_is_permanent(int err);

/*
 * shmrun_errno_is_lasting() - @err is "out of space" (ENOSPC, EDQUOT): a
 * later epoch may succeed once retention or the operator frees space, but a
 * restart, which re-does the same work, cannot. Fatal on the final epoch.
 */
bool shmrun_errno_is_lasting(int err);

/*
 * shmrun_lock_job_check() - the first half of shmrun_lock_job(): try the lock
 * on everything of @job that exists, create nothing, then release every lock
 * this process holds. For a run refused on another ground (its job name is
 * taken, jobsock.h) that should rather name a run holding its checkpoint_dir
 * or outputs, as a second run of the same job is refused. Return: as
 * shmrun_lock_job() (a refusal logged), 0 if nothing is held elsewhere.
 */
int shmrun_lock_job_check(const struct shmrun_job *job);

/*
 * shmrun_lock_job_undo() - for a run refused or failed after
 * shmrun_lock_job() but before any worker started (its checkpoint does not
 * fit, a rescale is refused, the segment cannot be made): remove each output
 * file that shmrun_lock_job() created and that is still empty and still at
 * its path, so a refusal leaves no output behind; then release every lock
 * (shmrun_unlock_job()). Lock files (.<name>.lock) and directories stay:
 * unlinking a lock file another run may hold open would let a third run lock
 * a new file of the same name. Not thread-safe; idempotent.
 */
void shmrun_lock_job_undo(void);

/*
 * shmrun_locks_forget() - in a freshly forked worker: close this process's
 * copies of the run's lock files without releasing the locks (the launcher
 * keeps them), so that no stray child (a snapshot writer, a worker that
 * outlives a launcher) holds a lock after the launcher is gone.
 */
void shmrun_locks_forget(void);

#endif /* SHMRUN_RT_PREFLIGHT_H */
