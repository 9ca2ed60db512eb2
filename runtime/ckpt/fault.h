/*
 * runtime/ckpt/fault.h: the seam between checkpoint code and its test-only
 * fault switches (fault.c). Built with -DSHMRUN_FAULT_INJECTION=ON (the test
 * build, tools/bootstrap.sh) the functions below read the environment;
 * without it (the default, release builds) they are inline no-ops and the
 * product reads no SHMRUN_FAULT or SHMRUN_TEST_* variable.
 * shmrun_fault_injection() tells which (`shmrun --version` prints it, so a
 * shell test can skip, exit 77, on a build without the hooks).
 *
 * Fault switch (TEST-ONLY). SHMRUN_FAULT holds comma-separated rules; each
 * fires once, on the n-th operation of its kind counted in this process from
 * 1 (resubmissions count as new write submissions):
 *
 *     write:<ERRNO>:<n>   the n-th write submission completes with -ERRNO and
 *                         writes nothing (ERRNO: EIO ENOSPC EDQUOT EFBIG EROFS
 *                         EINTR EAGAIN ECANCELED)
 *     fsync:<ERRNO>:<n>   the n-th fsync (of a file or a directory) fails with
 *                         -ERRNO without syncing
 *     short:<n>           the n-th write submission really writes only the
 *                         first half (rounded up) of its bytes
 *     eintr:<n>           = write:EINTR:<n>;  eagain:<n> = write:EAGAIN:<n>
 *
 * e.g. SHMRUN_FAULT=write:EIO:3 or SHMRUN_FAULT=short:1,fsync:EIO:1. In
 * io_uring mode an injected error is an IORING_OP_NOP whose completion reports
 * the error, so it travels the real completion path. The rules and counters
 * are process-global, for single-threaded use; a child of fork() inherits them.
 */
#ifndef SHMRUN_RT_CKPT_FAULT_H
#define SHMRUN_RT_CKPT_FAULT_H

#include <stdbool.h>
#include <stdint.h>

#ifdef SHMRUN_FAULT_INJECTION

/* shmrun_fault_injection() - whether this build has the fault switches. */
static inline bool shmrun_fault_injection(void)
{
	return true;
}

/*
 * shmrun_fault_on_write() - count a write submission. Return: 0 (write as
 * usual), a -errno the submission must report instead, or 1 (write only the
 * first half of its bytes).
 */
int shmrun_fault_on_write(void);

/* shmrun_fault_on_fsync() - count an fsync. Return: 0, or a -errno to report instead. */
int shmrun_fault_on_fsync(void);

/* shmrun_fault_bad() - SHMRUN_FAULT is set but not understood (a writer refuses: -EINVAL). */
bool shmrun_fault_bad(void);

/*
 * shmrun_ckpt_fault_reload() - (TEST-ONLY) forget the parsed rules and zero
 * the counters, so that the next writer reads SHMRUN_FAULT again.
 */
void shmrun_ckpt_fault_reload(void);

/*
 * shmrun_ckpt_fault_counts() - (TEST-ONLY) write submissions and fsyncs
 * counted since the last reload (either pointer may be NULL); lets a test see
 * that a short or interrupted write really was resubmitted.
 */
void shmrun_ckpt_fault_counts(unsigned long *writes, unsigned long *fsyncs);

/*
 * shmrun_fault_slow_snapshot() - SHMRUN_TEST_SLOW_SNAPSHOT=e:ms: in a snapshot
 * writer of epoch @e, sleep ms milliseconds (called before the directory is
 * made and after the file is written: a late writer of an aborted epoch).
 */
void shmrun_fault_slow_snapshot(uint64_t e);

/*
 * shmrun_fault_snapshot_epoch() - in a snapshot writer of epoch @e, before it
 * writes: SHMRUN_TEST_KILL_SNAPSHOT_EPOCH=e kills it (SIGKILL, unreported);
 * SHMRUN_TEST_FAIL_EPOCH=e arms SHMRUN_FAULT=write:EIO:1 for it.
 */
void shmrun_fault_snapshot_epoch(uint64_t e);

/*
 * shmrun_fault_state_enomem() - (TEST-ONLY) SHMRUN_TEST_STATE_ENOMEM=1: a
 * worker's key-bound state cannot be allocated at setup, as when memory runs
 * out. Return: true when armed.
 */
bool shmrun_fault_state_enomem(void);

/*
 * shmrun_fault_slow_judge() - (TEST-ONLY) SHMRUN_TEST_SLOW_JUDGE=ms: worker
 * 0 sleeps ms milliseconds between reading complete_epoch and looking for
 * the MANIFEST child's exit (a descheduled coordinator), every loop turn
 * while a MANIFEST is being written.
 */
void shmrun_fault_slow_judge(void);

/*
 * shmrun_fault_slow_exit() - (TEST-ONLY) SHMRUN_TEST_SLOW_EXIT=ms: the
 * launcher sleeps ms milliseconds after its run ended and before it exits
 * (a slow exit, as under a leak checker), so a test can signal it then.
 */
void shmrun_fault_slow_exit(void);

/*
 * shmrun_fault_slow_restore() - (TEST-ONLY) SHMRUN_TEST_SLOW_RESTORE=w:ms:
 * worker @worker, if it is w, sleeps ms milliseconds before it restores (a
 * worker descheduled at its start while the others checkpoint on).
 */
void shmrun_fault_slow_restore(uint32_t worker);

/*
 * shmrun_fault_callback() - (TEST-ONLY) the worker (or the launcher) enters
 * callback @cb ("process_batch()") of operator @op: SHMRUN_TEST_CALLBACK =
 * <op>.<callback>:<action>:<n>[:<file>] makes the n-th such entry counted
 * in this process (from 1) crash or hang, as if inside the callback:
 *
 *     segv  a store through a NULL pointer (a real SIGSEGV)
 *     abort abort() (SIGABRT)
 *     bus, fpe, ill   raise(SIGBUS), raise(SIGFPE), raise(SIGILL)
 *     hang=<ms>       sleep ms milliseconds, then return as usual
 *
 * e.g. count.process_batch:segv:40. With <file>, every entry from the n-th
 * on tries to create that file (O_EXCL) and fires when it can: once per job
 * whatever the restarts and workers (a restarted worker counts from 1
 * again), so the job can recover; and a test that created the file before
 * the start arms the rule by removing it (after a checkpoint, say).
 */
void shmrun_fault_callback(const char *op, const char *cb);

#else /* !SHMRUN_FAULT_INJECTION: no hooks */

static inline bool shmrun_fault_injection(void)
{
	return false;
}

static inline int shmrun_fault_on_write(void)
{
	return 0;
}

static inline int shmrun_fault_on_fsync(void)
{
	return 0;
}

static inline bool shmrun_fault_bad(void)
{
	return false;
}

static inline void shmrun_ckpt_fault_reload(void)
{
}

static inline void shmrun_ckpt_fault_counts(unsigned long *writes, unsigned long *fsyncs)
{
	if (writes)
		*writes = 0;
	if (fsyncs)
		*fsyncs = 0;
}

static inline void shmrun_fault_slow_snapshot(uint64_t e)
{
	(void)e;
}

static inline void shmrun_fault_snapshot_epoch(uint64_t e)
{
	(void)e;
}

static inline bool shmrun_fault_state_enomem(void)
{
	return false;
}

static inline void shmrun_fault_slow_judge(void)
{
}

static inline void shmrun_fault_slow_restore(uint32_t worker)
{
	(void)worker;
}

static inline void shmrun_fault_slow_exit(void)
{
}

static inline void shmrun_fault_callback(const char *op, const char *cb)
{
	(void)op;
	(void)cb;
}

#endif /* SHMRUN_FAULT_INJECTION */

#endif /* SHMRUN_RT_CKPT_FAULT_H */
