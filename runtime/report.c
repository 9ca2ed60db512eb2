/*
 * runtime/report.c: what the launcher tells a person about the workers and
 * the run (report.h): which tasks and output files a worker holds (for the
 * messages that name a worker), the summary at the end of a run, the
 * checkpoint stall percentiles, and the watchdog that names a stopped worker.
 *
 * Invariants: output files are found by the io of each stage's parameters
 * (SHMRUN_PARAM_OUTPUT), with ".<instance>" for a stage wider than one, as
 * preflight.c finds them: never by an operator's or key's name. Counters are
 * read only after the workers exited (waitpid orders them), except by the
 * watchdog, which reads /proc only.
 *
 * Designs rejected: printing from the workers (their lines would interleave
 * and a crashed worker would say nothing); a summary per worker (the user
 * asked for a job, and the per-worker view belongs to `shmrun top`).
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "ckpt/coordinator.h"
#include "multihost.h"
#include "report.h"
#include "shmrun/runtime.h"

void describe_tasks(const struct shmrun_plan *plan, uint32_t worker, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = 0;
	for (uint32_t t = 0; t < plan->ntasks && n + 1 < len; t++) {
		const struct shmrun_plan_task *pt = &plan->tasks[t];
		int k;

		if (pt->worker != worker)
			continue;
		k = snprintf(buf + n, len - n, "%s%s[%u]", n ? ", " : "",
			     plan->job->stages[pt->stage].name, pt->instance);
		if (k < 0)
			break;
		n += (size_t)k;
	}
	if (!n)
		snprintf(buf, len, "none"); /* more workers than instances */
}

void describe_outputs(const struct shmrun_plan *plan, uint32_t worker, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = 0;
	for (uint32_t t = 0; t < plan->ntasks && n + 1 < len; t++) {
		const struct shmrun_plan_task *pt = &plan->tasks[t];
		const struct shmrun_stage *st = &plan->job->stages[pt->stage];

		if (pt->worker != worker)
			continue;
		for (uint32_t i = 0; i < st->nparams && n + 1 < len; i++) {
			const struct shmrun_param *p = &st->params[i];
			int k;

			if (!p->value || p->def->io != SHMRUN_PARAM_OUTPUT)
				continue;
			if (st->width == 1)
				k = snprintf(buf + n, len - n, "%s%s", n ? ", " : "", p->value);
			else
				k = snprintf(buf + n, len - n, "%s%s.%u", n ? ", " : "", p->value,
					     pt->instance);
			if (k < 0)
				return;
			n += (size_t)k;
		}
	}
}


/*
 * With hosts > 1, the files of output @path of stage @s that this host's
 * workers wrote: its instances of the stage are contiguous (placement), so
 * one line, "path" (width 1), "path.i" or "path.i .. path.j"; nothing when
 * none of them is here. Counts the lines in *@n.
 */
static void local_outputs(const struct shmrun_plan *plan, uint32_t s, const char *path,
			  uint32_t *n)
{
	uint32_t lo = UINT32_MAX, hi = 0, width = plan->job->stages[s].width;

	for (uint32_t k = 0; k < plan->ntasks; k++) {
		const struct shmrun_plan_task *t = &plan->tasks[k];

		if (t->stage != s || t->worker / plan->workers_per_host != shmrun_host_self())
			continue;
		lo = t->instance < lo ? t->instance : lo;
		hi = t->instance > hi ? t->instance : hi;
	}
	if (lo == UINT32_MAX)
		return;
	(*n)++;
	if (width <= 1)
		shmrun_log_plain("output:        %s\n", path);
	else if (lo == hi)
		shmrun_log_plain("output:        %s.%u\n", path, lo);
	else
		shmrun_log_plain("output:        %s.%u .. %s.%u\n", path, lo, path, hi);
}

/*
 * Records read by source stages, written by sink stages, bad and late, from
 * the metrics block @m: totals since the launcher started, every start's.
 */
static void metrics_totals(const struct shmrun_plan *plan, const struct shmrun_metrics *m,
			   uint64_t *in, uint64_t *out, uint64_t *bad, uint64_t *late)
{
	*in = *out = *bad = *late = 0;
	for (uint32_t i = 0; i < m->tasks; i++) {
		const struct shmrun_metrics_task *t = shmrun_metrics_task(m, i);
		uint32_t flags = plan->job->stages[t->stage].op->flags;

		if (flags & SHMRUN_OP_SOURCE)
			*in += SHMRUN_METRIC(t->records_in);
		if (flags & SHMRUN_OP_SINK)
			*out += SHMRUN_METRIC(t->records_out);
		*bad += SHMRUN_METRIC(t->records_bad);
		*late += SHMRUN_METRIC(t->records_late);
	}
}

void print_summary(const struct shmrun_plan *plan, const struct shmrun_metrics *m,
		   struct shmrun_worker_stats *stats, int64_t elapsed_ns)
{
	const struct shmrun_job *job = plan->job;
	uint64_t in = 0, out = 0, bad = 0, late = 0, keys = 0, bytes = 0, key_bytes = 0, frames = 0,
		 ovf = 0, peak = 0;
	double secs = (double)elapsed_ns / 1e9;
	uint32_t outputs = 0; /* hosts > 1: output lines of this host */

	/* every worker of the plan: with hosts > 1, those of other hosts have
	 * zeros in this host's control area, so these are this host's sums */
	for (uint32_t w = 0; w < plan->workers; w++) {
		in += atomic_load_explicit(&stats[w].records_in, memory_order_relaxed);
		out += atomic_load_explicit(&stats[w].records_out, memory_order_relaxed);
		bad += atomic_load_explicit(&stats[w].records_bad, memory_order_relaxed);
		late += atomic_load_explicit(&stats[w].records_late, memory_order_relaxed);
		keys += atomic_load_explicit(&stats[w].keys, memory_order_relaxed);
		bytes += atomic_load_explicit(&stats[w].state_bytes, memory_order_relaxed);
		peak += atomic_load_explicit(&stats[w].state_peak_bytes, memory_order_relaxed);
		key_bytes += atomic_load_explicit(&stats[w].key_bytes, memory_order_relaxed);
		frames += atomic_load_explicit(&stats[w].frames, memory_order_relaxed);
		ovf += atomic_load_explicit(&stats[w].overflow_frames, memory_order_relaxed);
	}
	if (m) /* the last start's counters miss what earlier starts did */
		metrics_totals(plan, m, &in, &out, &bad, &late);
	shmrun_log(SHMRUN_LOG_INFO,
		   "job %s done in %.3f s: records in %" PRIu64 ", records out %" PRIu64
		   ", distinct keys %" PRIu64 ", key-bound state %" PRIu64
		   " bytes (%.1f per key beyond the key), frames %" PRIu64
		   " on channels (%" PRIu64 " through an overflow queue, %.2f%%), peak key-bound"
		   " state %" PRIu64 " bytes",
		   job->name, secs, in, out, keys, bytes,
		   keys ? (double)(bytes - key_bytes) / (double)keys : 0.0, frames, ovf,
		   frames ? 100.0 * (double)ovf / (double)frames : 0.0, peak);
	shmrun_log_plain(
		"records in:    %" PRIu64 "\nrecords out:   %" PRIu64 "\ndistinct keys: %" PRIu64
		"\n",
		in, out, keys);
	if (bad) /* only when there are: the summary of a clean job does not change */
		shmrun_log_plain("bad records:   %" PRIu64 " (dropped as malformed; see the warnings)\n",
			bad);
	if (late) /* likewise: only event-time operators drop records as late */
		shmrun_log_plain("late records:  %" PRIu64 " (dropped: behind the watermark past "
				"allowed_lateness)\n",
			late);
	if (plan->hosts > 1)
		shmrun_log_plain("host:          %u of %u: the counts above are this host's "
				 "workers' (%u to %u)\n",
				 shmrun_host_self(), plan->hosts,
				 shmrun_host_self() * plan->workers_per_host,
				 (shmrun_host_self() + 1) * plan->workers_per_host - 1);
	for (uint32_t s = 0; s < job->nstages; s++) {
		const struct shmrun_stage *st = &job->stages[s];

		for (uint32_t i = 0; i < st->nparams; i++) {
			const char *path = st->params[i].value;

			if (!path || st->params[i].def->io != SHMRUN_PARAM_OUTPUT)
				continue;
			if (plan->hosts > 1)
				local_outputs(plan, s, path, &outputs);
			else if (st->width == 1)
				shmrun_log_plain("output:        %s\n", path);
			else
				shmrun_log_plain("output:        %s.0 .. %s.%u\n", path, path,
					st->width - 1);
		}
	}
	if (plan->hosts > 1 && !outputs)
		shmrun_log_plain("output:        none on this host (its workers run no sink "
				 "instance that writes a file)\n");
}

/*
 * The launcher's watchdog over stopped workers. A worker stopped by SIGSTOP
 * (or a terminal's job control, or a debugger) holds up every epoch and, with
 * a full ring, its neighbours; worker 0's coordinator names such a worker
 * when an epoch times out, but nothing would name worker 0 itself, nor any
 * worker of a job without checkpoints. So the launcher looks at each
 * worker's process state once a second and warns once a worker has been
 * stopped for WATCH_STOPPED_NS, and again when it continues.
 */
#define WATCH_STOPPED_NS 5000000000ll

void watch_workers(struct watch *wt, const struct shmrun_plan *plan, const pid_t *pids, int64_t now)
{
	if (now < wt->next_ns || !wt->stopped_ns || !wt->told)
		return;
	wt->next_ns = now + 1000000000ll;
	for (uint32_t w = 0; w < plan->workers; w++) { /* another host's: pid 0 */
		char state = pids[w] > 0 ? shmrun_process_state(pids[w]) : 0;
		char tasks[256];

		if (state != 'T' && state != 't') {
			if (wt->told[w])
				shmrun_log(SHMRUN_LOG_WARN, "worker %u (pid %d) runs again", w,
					   (int)pids[w]);
			wt->stopped_ns[w] = 0;
			wt->told[w] = false;
			continue;
		}
		if (!wt->stopped_ns[w])
			wt->stopped_ns[w] = now;
		if (wt->told[w] || now - wt->stopped_ns[w] < WATCH_STOPPED_NS)
			continue;
		describe_tasks(plan, w, tasks, sizeof(tasks));
		shmrun_log(SHMRUN_LOG_WARN,
			   "worker %u (pid %d, CPU %d, tasks %s) has been stopped for %.0f s (%s); "
			   "the job makes no progress through it: continue it with kill -CONT %d",
			   w, (int)pids[w], shmrun_plan_cpu_of(plan, w), tasks,
			   (double)(now - wt->stopped_ns[w]) / 1e9,
			   state == 'T' ? "SIGSTOP or job control" : "a debugger", (int)pids[w]);
		wt->told[w] = true;
	}
}

void print_stalls(const struct shmrun_plan *plan, struct shmrun_worker_stats *stats)
{
	uint64_t snaps = 0, p50 = 0, p99 = 0, max = 0;

	for (uint32_t w = 0; w < plan->workers; w++) {
		snaps += stats[w].snapshots;
		if (stats[w].stall_p50_ns > p50)
			p50 = stats[w].stall_p50_ns;
		if (stats[w].stall_p99_ns > p99)
			p99 = stats[w].stall_p99_ns;
		if (stats[w].stall_max_ns > max)
			max = stats[w].stall_max_ns;
	}
	if (snaps)
		shmrun_log(SHMRUN_LOG_INFO,
			   "checkpoint stalls: %" PRIu64 " snapshot%s, p50 %.3f ms, p99 %.3f ms, "
			   "max %.3f ms (worst worker)",
			   snaps, snaps == 1 ? "" : "s", (double)p50 / 1e6, (double)p99 / 1e6,
			   (double)max / 1e6);
}
