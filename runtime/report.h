/*
 * runtime/report.h: what the launcher tells a person about workers and runs
 * (private to runtime/; report.c).
 */
#ifndef SHMRUN_RT_REPORT_H
#define SHMRUN_RT_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "control.h"
#include "metrics.h"
#include "plan.h"

/*
 * describe_tasks() - the tasks of @worker, "count[0], out[1]", into @buf
 * (@len bytes, cut short if longer); "none" for a worker without tasks.
 */
void describe_tasks(const struct shmrun_plan *plan, uint32_t worker, char *buf, size_t len);

/*
 * describe_outputs() - the output files of @worker's tasks (every parameter
 * of io SHMRUN_PARAM_OUTPUT; "a.tsv.0, a.tsv.1" for a wider stage) into @buf
 * (@len bytes, cut short if longer); "" when it writes none.
 */
void describe_outputs(const struct shmrun_plan *plan, uint32_t worker, char *buf, size_t len);

/*
 * print_summary() - the end-of-run summary: one INFO line (records in and
 * out, distinct keys, key-bound state per key) and, on stderr, the counters
 * and every output file. @m: the run's metrics block, or NULL
 * (SHMRUN_COUNTERS=off): records in, out, bad and late are its totals since
 * the launcher started (records read by source stages, written by sink
 * stages), so a run that restarted counts what every start did; without it
 * they are the last start's, from @stats. @stats: the last start's worker
 * counters (read after the workers exited): keys, state, frames.
 * @elapsed_ns: the run's wall time, ns.
 */
void print_summary(const struct shmrun_plan *plan, const struct shmrun_metrics *m,
		   struct shmrun_worker_stats *stats, int64_t elapsed_ns);

/*
 * print_stalls() - one INFO line with the checkpoint stalls of the run: the
 * snapshots taken and the worst worker's p50, p99 and max stall (ms); nothing
 * when no snapshot was taken.
 */
void print_stalls(const struct shmrun_plan *plan, struct shmrun_worker_stats *stats);

/* The watchdog's memory of stopped workers (watch_workers()). */
struct watch {
	int64_t next_ns;     /* next look */
	int64_t *stopped_ns; /* per worker: when it was first seen stopped, 0 */
	bool *told;	     /* per worker: the warning was logged */
};

/*
 * watch_workers() - once a second (@now, CLOCK_MONOTONIC ns), look at the
 * state of every worker in @pids (/proc/PID/stat) and warn once a worker has
 * been stopped (SIGSTOP, job control, a debugger) for WATCH_STOPPED_NS,
 * naming it with its CPU and tasks and saying how to continue it; and again
 * when it runs again. @wt->stopped_ns and @wt->told are arrays of one entry
 * per worker owned by the caller (nothing is done while either is NULL).
 */
void watch_workers(struct watch *wt, const struct shmrun_plan *plan, const pid_t *pids,
		   int64_t now);

#endif /* SHMRUN_RT_REPORT_H */
