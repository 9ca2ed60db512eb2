/*
 * shmrun/runtime.h: what a program that runs a job needs (the shmrun CLI, or
 * one embedding the runtime): logging, the plan, the checks made before a
 * start, and running a job (launcher + workers). See shmrun(1) in
 * docs/shmrun.1.md. What only the runtime's own files and the CLI's other
 * subcommands share (rescale, `shmrun ckpt`, the fingerprint) is in
 * runtime/internal.h, which is not installed.
 */
#ifndef SHMRUN_RUNTIME_H
#define SHMRUN_RUNTIME_H

#include <stdarg.h>
#include <stdio.h>

#include "shmrun/job.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Exported by libshmrun.so.0, which is built with -fvisibility=hidden: see
 * runtime/libshmrun.map. Also keeps these default in a plugin built hidden. */
#pragma GCC visibility push(default)

/** Log levels, most severe first. */
enum shmrun_log_level {
	SHMRUN_LOG_ERROR = 0,
	SHMRUN_LOG_WARN = 1,
	SHMRUN_LOG_INFO = 2,
	SHMRUN_LOG_DEBUG = 3,
};

/**
 * shmrun_log_set_level() - lines above @level are dropped (default INFO).
 * shmrun_log_parse_level() - "error", "warn", "info", "debug" -> level;
 * Return: the level, or -EINVAL.
 */
void shmrun_log_set_level(enum shmrun_log_level level);
int shmrun_log_parse_level(const char *s);

/**
 * shmrun_log() - one line to stderr: UTC timestamp with milliseconds, level,
 * the process's role (launcher / worker N), and the message. The line is
 * written with one write(2), so lines of several processes never interleave;
 * one longer than 16 KiB loses its middle, never its end. Returns nothing:
 * a line that cannot be allocated or that stderr does not take is lost. shmrun_vlog() is the same with a
 * va_list.
 */
void shmrun_log(enum shmrun_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void shmrun_vlog(enum shmrun_log_level level, const char *fmt, va_list ap);

struct shmrun_plan; /* tasks, channels and rings of a job; see runtime/plan.h */

/**
 * shmrun_plan_build() - place every task and lay out every channel of @job.
 * @job:  a loaded job (borrowed; must outlive the plan).
 * @plan: receives a new plan; free with shmrun_plan_free().
 * Return: 0; -ENOMEM; -EFBIG if the rings need more memory than the host has
 * (logged, naming ring_bytes and the ring count).
 */
int shmrun_plan_build(const struct shmrun_job *job, struct shmrun_plan **plan);

/** shmrun_plan_free() - release a plan from shmrun_plan_build(); NULL is a no-op. */
void shmrun_plan_free(struct shmrun_plan *plan);

/**
 * shmrun_plan_print() - the placement for `shmrun plan`: one line per task
 * (task, stage, instance, worker, CPU, vnode range) and per edge (local or ring,
 * with the ring count and bytes).
 */
void shmrun_plan_print(const struct shmrun_plan *plan, FILE *out);

/**
 * shmrun_prepare() - every stage's prepare() check (inputs exist, tables
 * parse), as `shmrun check` and a run do before anything starts; each failure
 * is logged once as "conf:line: stage 'x' [0]: what; nothing was started".
 * Return: 0, or -EINVAL if any stage failed.
 */
int shmrun_prepare(const struct shmrun_job *job, const struct shmrun_plan *plan);

/**
 * shmrun_preflight() - the checks of every file @job reads and writes, as
 * `shmrun check` and a run make before anything starts (runtime/preflight.c):
 * no output (an operator key declared SHMRUN_PARAM_OUTPUT, one file per
 * instance for a width above 1) nor checkpoint_dir is the same file as an
 * input (SHMRUN_PARAM_INPUT; same device and inode, or the same canonical
 * path for a file not yet there), lies inside an input directory (existing
 * or not), matches an input's pattern (braces, nested braces, *, ?, [..],
 * exactly as file_source expands them) or lies inside a directory such a
 * pattern matches or would match once created; no input pattern matches an
 * output's lock file; no two stages write one output; every output and
 * checkpoint_dir can be created or written by this process; an existing
 * output is a regular file; every lock file name fits NAME_MAX and PATH_MAX.
 * Each failure is logged as "conf:line: what = path ...; nothing was
 * started", paths past 160 bytes shortened in the middle. Touches nothing.
 * Return: 0; -EINVAL if any check failed; -ENOMEM.
 */
int shmrun_preflight(const struct shmrun_job *job);

/**
 * shmrun_lock_job() - exclude every other run from @job's checkpoint_dir and
 * outputs: an exclusive flock(2) on checkpoint_dir/.lock and on .<name>.lock
 * beside each output, each file holding this pid, and on each output file
 * itself (its identity: a hard link is excluded too). First every lock on
 * what exists is tried, creating nothing; only if none is held elsewhere are
 * checkpoint_dir (0700), the outputs' directories, the lock files and the
 * output files (empty, an existing one is not truncated) created and locked.
 * No lock file is made beside an output that is not a regular file. Held until
 * shmrun_unlock_job() or the process ends, restarts included; idempotent.
 * Call it before anything reads or changes checkpoint_dir (--rescale,
 * STREAM_RESET_STATE, restore). Not thread-safe.
 * Return: 0; -EBUSY if another process holds one (logged with its pid and
 * conf:line); -EINVAL if an output is not a regular file (logged);
 * -ENAMETOOLONG if a lock file name does not fit (logged); -errno if a lock
 * file or directory cannot be created (logged).
 */
int shmrun_lock_job(const struct shmrun_job *job);

/** shmrun_unlock_job() - release every lock shmrun_lock_job() took. */
void shmrun_unlock_job(void);

/**
 * shmrun_die_by_signal() - end the process by @sig with its default action
 * (after every cleanup), as a program stopped by a signal must so that its
 * parent (a shell, systemd) sees "killed by @sig", not an exit status: other
 * stop signals still pending are discarded, @sig is unblocked and raised.
 * Falls back to exit(128 + @sig) if the signal's default action does not end
 * the process.
 */
__attribute__((noreturn)) void shmrun_die_by_signal(int sig);

/**
 * shmrun_run() - run @job to completion: create the segment, fork and pin one
 * worker per member, supervise, clean up.
 * Stop signals (SIGTERM, SIGINT, SIGHUP), to the launcher, a worker or the
 * whole process group, are one request: with checkpoint_dir a final
 * checkpoint, then 0; without, every worker is stopped and 128+signal is
 * returned (the caller should then shmrun_die_by_signal()).
 * Return: the process exit status for the CLI: 0 when every worker reached end
 * of input, or a requested stop completed its final checkpoint; 1 when a
 * worker failed or died (logged with worker, tasks and signal), at once
 * without restarts when the cause cannot be cured by one (EACCES, EPERM,
 * EROFS; ENOSPC, EDQUOT on the final epoch); 2 when the job could not start
 * (a missing input, an output that is an input or cannot be written, another
 * live run holding checkpoint_dir or an output, a checkpoint of another
 * topology; logged); 128+signal when
 * stopped by a signal without a final checkpoint.
 */
int shmrun_run(const struct shmrun_job *job);

/**
 * shmrun_main() - the shmrun(1) command line as a function, so a program can
 * embed it: `shmrun [run|plan|check] [options] topology.conf` and `shmrun ckpt
 * list|verify DIR`, exactly as docs/shmrun.1.md describes (the shmrun
 * executable is main() calling it).
 * @argc: the number of words in @argv.
 * @argv: the words, @argv[0] the program's name (replaced by "shmrun", for
 *        getopt_long's messages); @argc >= 1. The words may be permuted by
 *        getopt_long(3); they are borrowed, and must outlive the call.
 * Call it once per process, from the main thread: it blocks SIGTERM, SIGINT
 * and SIGHUP first (a run serves them as stop requests), uses getopt_long's
 * global state (optind), sets the log level, and may fork workers. Messages go
 * to stdout and stderr.
 * Return: the exit status: 0 done (or stopped after a final checkpoint);
 * 1 the job failed; 2 bad usage or a bad topology, nothing started. A run
 * stopped by signal N without a final checkpoint does not return: the process
 * ends by signal N (shmrun_die_by_signal()).
 */
int shmrun_main(int argc, char **argv);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif /* SHMRUN_RUNTIME_H */
