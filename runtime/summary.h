/*
 * runtime/summary.h: the summary file, `shmrun --summary FILE` (private to
 * runtime/; summary.c; docs/observability.md "The summary file" lists its
 * fields).
 *
 * At the end of a run that started (done, stopped, failed, signaled) the
 * launcher writes one JSON document, with jansson, from the metrics block
 * (totals since the launcher started): how the run ended, per-stage and
 * per-instance counters, checkpoints, restarts, the restored epoch, state
 * sizes, wall and CPU time. For CI systems and the stress mode, as Flink's
 * job result or `/usr/bin/time -v` serve people.
 */
#ifndef SHMRUN_RT_SUMMARY_H
#define SHMRUN_RT_SUMMARY_H

#include <stddef.h>
#include <stdint.h>

struct shmrun_job;
struct shmrun_metrics;
struct shmrun_plan;

/* How the run ended, for the summary (from launcher.c's struct run). */
struct shmrun_summary_end {
	int exit_status;    /* shmrun's exit status (128+N: died by signal N) */
	const char *status; /* "done", "stopped", "failed" or "signaled" */
	uint64_t epoch;	    /* "stopped": the epoch it stopped at (0 none) */
	const char *cause;  /* "failed", "signaled": why (may be "" or NULL) */
	int signal;	    /* "signaled": the signal, else 0 */
};

/*
 * shmrun_summary_set_path() - where the run of this process writes its
 * summary (cli.c, from --summary), or NULL for none (the default). @path is
 * not copied: it must outlive the run (an argv string does).
 */
void shmrun_summary_set_path(const char *path);

/* shmrun_summary_path() - the path of shmrun_summary_set_path(), or NULL. */
const char *shmrun_summary_path(void);

/*
 * shmrun_summary_check() - whether the summary can be written to @path, before
 * anything starts: its directory exists and this process may create files in
 * it, and @path is not a directory. As preflight.c checks outputs.
 * @why: receives "PATH: reason; what to do" on failure (@why_len bytes).
 * Return: 0; -ENOENT, -ENOTDIR, -EISDIR, -EACCES, -ENAMETOOLONG.
 */
int shmrun_summary_check(const char *path, char *why, size_t why_len);

/*
 * shmrun_summary_check_job() - whether the summary at @path would overwrite a
 * file of @job: the topology file, or an output of a stage (a parameter of
 * io SHMRUN_PARAM_OUTPUT, or its PATH.<instance> files). Paths compare by
 * their directories' real paths and their names.
 * @why: receives "--summary PATH is ...; name another file" (@why_len bytes).
 * Return: 0, or -EEXIST.
 */
int shmrun_summary_check_job(const char *path, const struct shmrun_job *job, char *why,
			     size_t why_len);

/*
 * shmrun_summary_write() - write the summary to @path: the document to
 * PATH.tmp (mode 0644 less the umask), fsync'ed, then renamed over @path, so
 * a reader never sees half a document.
 * @m:       the run's metrics block (NULL with SHMRUN_COUNTERS=off: the
 *           counters are then absent and "counters" is false);
 * @plan:    the run's plan (stage names, widths);
 * @end:     how the run ended;
 * @wall_ns: the run's wall time, ns.
 * CPU time is the launcher's and its reaped children's (getrusage
 * RUSAGE_SELF + RUSAGE_CHILDREN): call it after every worker was reaped.
 * Return: 0, or -errno (logged, naming the path; the run's exit status does
 * not change).
 */
int shmrun_summary_write(const char *path, const struct shmrun_metrics *m,
			 const struct shmrun_plan *plan, const struct shmrun_summary_end *end,
			 int64_t wall_ns);

#endif /* SHMRUN_RT_SUMMARY_H */
