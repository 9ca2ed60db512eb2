/*
 * runtime/idle.c: the idle phase of the worker loop (idle.h): what a worker
 * does when a loop turn made no progress.
 *
 * What it is for. A worker that found nothing to do must neither burn a CPU
 * another worker needs nor miss new input by sleeping too long. Its job's
 * `idle` strategy says how: spin (a pause instruction per turn), hybrid
 * (spin SHMRUN_RING_SPIN_NS, then sleep) or sleep. It sleeps on its doorbell
 * (shm/: every producer into and consumer of its rings rings it after
 * publishing), re-checking with worker_ready() after announcing itself, so a
 * frame published in between is never slept through; a rate-limited source
 * bounds the sleep by its stage's next token.
 *
 * Invariants: a worker never sleeps while any task can progress (worker_ready()
 * is the check the doorbell runs after arming); checkpoint progress rings no
 * bell, so with checkpoints on a worker looks again every millisecond; a
 * worker without tasks (other than worker 0, the coordinator) naps 100 ms.
 *
 * Designs rejected: a fixed sleep per idle turn (latency, or wakeups for
 * nothing); one futex per ring (a worker with many inputs would have to wait
 * on all of them; one bell per worker is what a single-threaded loop needs).
 */
#include <string.h>

#include "idle.h"
#include "pace.h"
#include "util.h"
#include "worker.h"

/* Whether anything would progress now: the re-check before the worker sleeps. */
static bool worker_ready(void *arg)
{
	struct shmrun_worker *w = arg;

	for (uint32_t x = 0; x < w->ntasks; x++) {
		struct shmrun_task *t = &w->tasks[x];

		if (t->ended || task_parked(t))
			continue;
		for (uint32_t i = 0; i < t->nins; i++)
			if (!t->ins[i]->ended && !t->ins[i]->held &&
			    shmrun_ring_readable(&t->ins[i]->ring))
				return true;
	}
	for (uint32_t c = 0; c < w->nouts; c++) {
		struct chan_out *o = &w->outs[c];
		uint32_t len;

		if (!chan_backlogged(o))
			continue;
		memcpy(&len, o->ovf + o->ovf_off, 4);
		if (shmrun_ring_writable(&o->ring, len))
			return true;
	}
	return *w->stop != 0;
}

/*
 * How long the worker may sleep as far as its sources go, at most @max_ns: a
 * rate-limited source until its stage's next token is due (at least
 * RATE_MIN_SLEEP_NS, so a high rate is served in batches, not a wake-up per
 * record); an unlimited one that is neither parked (its rings' bells wake
 * the worker) nor exhausted only briefly.
 */
#define RATE_MIN_SLEEP_NS 50000
#define SOURCE_POLL_NS 100000
static int64_t sources_sleep_ns(const struct shmrun_worker *w, int64_t max_ns)
{
	int64_t now = shmrun_now_ns();

	for (uint32_t x = 0; x < w->ntasks; x++) {
		const struct shmrun_task *t = &w->tasks[x];
		int64_t ns;

		if (!(t->op->flags & SHMRUN_OP_SOURCE) || t->ended || t->exhausted ||
		    task_parked(t))
			continue;
		ns = t->rate ? rate_wait_ns(t, now) : SOURCE_POLL_NS;
		if (ns < RATE_MIN_SLEEP_NS)
			ns = RATE_MIN_SLEEP_NS;
		if (ns < max_ns)
			max_ns = ns;
	}
	return max_ns;
}

/*
 * Nothing progressed: spin (spin, or hybrid for its first SHMRUN_RING_SPIN_NS),
 * then sleep on this worker's bell, which every producer into and consumer of
 * its rings rings after publishing, until the next token of a rate-limited
 * source is due (sources_sleep_ns()); otherwise up to 10 ms between checks.
 */
void idle_wait(struct shmrun_worker *w, int64_t *idle_since)
{
	enum shmrun_idle idle = w->plan->job->idle;

	if (idle == SHMRUN_IDLE_SPIN) {
		shmrun_cpu_relax();
		return;
	}
	if (!*idle_since)
		*idle_since = shmrun_now_ns();
	if (idle == SHMRUN_IDLE_HYBRID && shmrun_now_ns() - *idle_since < SHMRUN_RING_SPIN_NS) {
		shmrun_cpu_relax();
		return;
	}
	/* Checkpoint progress (snapshot children, MANIFEST, commits) rings no
	 * bell: with checkpoints on, look again every millisecond. A worker
	 * the placement gave no task only waits for the job's end (and is not
	 * the coordinator): every 100 ms, so that many more workers than CPUs
	 * (workers = 4096 on 2 CPUs) do not flood the CPUs with wakeups. */
	int64_t nap = w->checkpointing ? 1000000 : 10000000;

	if (w->ntasks == 0 && w->index != 0)
		nap = 100000000;
	shmrun_bell_sleep(&w->stats->bell, worker_ready, w, sources_sleep_ns(w, nap));
}
