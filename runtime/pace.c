/*
 * runtime/pace.c: pacing of sources, records per second for a whole stage
 * (pace.h).
 *
 * What it is for. A source operator names one of its RATE keys in
 * op->pacing_param (sequence and file_source: `rate`); when the stage sets
 * it, the worker loop asks source_budget() how many records the source may
 * produce now, gives back what produce() did not use (rate_return()), and
 * sleeps no longer than rate_wait_ns() when nothing else is to be done.
 *
 * How. The rate is for the whole stage, whatever its width and however its
 * pieces fell: every instance, on any worker of a host, takes tokens from one
 * counter in the slot of the stage's instance 0 in that host's control area.
 * Since the host's first token of the stage (rate_start_ns), (now - start) *
 * rate_host + 1 tokens are due, rate_host being the host's share of the rate
 * (below); an instance takes up to PRODUCE_BUDGET of those not yet taken, and
 * gives back what produce() did not use, so an instance that has finished (or
 * is parked) leaves the whole rate to the others, and a stage behind (parked,
 * or starting) catches up in PRODUCE_BUDGET steps. The counter lives as long
 * as the run's control area: a restart starts the pace again.
 *
 * Multi-host ([job] hosts > 1). Each host has its own control area, so its
 * own counter: paced at the stage's rate each, H hosts would run the stage at
 * up to H times it. So each host paces its share, rate_host = rate x (its
 * instances of the stage) / width (pace_host_rate()): the shares add up to
 * the rate exactly (as real numbers; a share is not rounded to whole records,
 * so a host with 1 of 3 instances of a stage at 1 record/s makes one every
 * 3 s rather than none or one a second). One host: rate_host = rate. The
 * split follows placement (instances of a stage are contiguous per host),
 * not what each host's instances have left to do: a host whose instances
 * finished leaves its share unused (the hosts share no counter; a shared one
 * would cost a gateway round trip per PRODUCE_BUDGET tokens).
 *
 * Invariants: an instance takes only tokens already due (rate_taken <= due
 * at every take, by compare-and-swap); every access is relaxed (the counter orders nothing
 * else: a token is a permission, not a publication); the first instance to
 * produce sets rate_start_ns once, by compare-and-swap.
 *
 * Fairness within a worker. The worker visits its tasks in one order every
 * turn, so of two instances of a stage on one worker the first would take
 * every token due and the second none until the first finished: its events
 * would lag, and the watermark, the minimum over instances, with them
 * (event-time state grows without bound). So an instance defers, for a
 * turn, to a sibling on its worker (same stage, paced, still producing)
 * that has used PRODUCE_BUDGET tokens fewer and is not parked (worker.c,
 * rate_defers()): between siblings
 * on one worker the tokens are shared evenly; across workers the counter is
 * (each worker takes as its loop turns).
 *
 * Designs rejected: a rate per instance (rate / width each: a skewed or
 * finished instance would leave the stage below its rate); sleeping inside
 * produce() (it would stall every other task of the worker); a token bucket
 * refilled by a timer (one more thing to wake; tokens due follow from the
 * clock alone).
 */
#include <stdatomic.h>
#include <stdint.h>

#include "control.h"
#include "pace.h"
#include "plan.h"
#include "task.h"

double pace_host_rate(const struct shmrun_plan *p, uint32_t stage, uint32_t host, uint64_t rate)
{
	uint32_t width = p->job->stages[stage].width, mine = 0;

	for (uint32_t i = 0; i < width; i++)
		mine += shmrun_plan_host_of(p, p->tasks[p->stage_task0[stage] + i].worker) == host;
	if (mine == width) /* one host, or every instance here: the rate itself, unrounded */
		return (double)rate;
	return (double)rate * ((double)mine / (double)width);
}

/* Tokens due for @t's stage on this host at @now since its first one (at least 1). */
static uint64_t rate_due(const struct shmrun_task *t, int64_t start, int64_t now)
{
	double due = (double)(now - start) * t->rate_host / 1e9 + 1;

	return due < 1e18 ? (uint64_t)due : (uint64_t)1e18;
}

/* How many records source @t may produce now (tokens taken: see rate_return()). */
int source_budget(struct shmrun_task *t, int64_t now)
{
	struct shmrun_task_slot *rs = t->rate_slot;
	int64_t start, zero = 0;
	uint64_t due, taken, k;

	if (!t->rate)
		return (int)PRODUCE_BUDGET;
	start = atomic_load_explicit(&rs->rate_start_ns, memory_order_relaxed);
	if (!start) {
		/* relaxed: the first instance of the stage to produce starts the pace */
		if (atomic_compare_exchange_strong_explicit(&rs->rate_start_ns, &zero, now,
							    memory_order_relaxed,
							    memory_order_relaxed))
			start = now;
		else
			start = zero;
	}
	due = rate_due(t, start, now);
	taken = atomic_load_explicit(&rs->rate_taken, memory_order_relaxed);
	do {
		if (taken >= due)
			return 0;
		k = due - taken < PRODUCE_BUDGET ? due - taken : PRODUCE_BUDGET;
	} while (!atomic_compare_exchange_weak_explicit(&rs->rate_taken, &taken, taken + k,
							memory_order_relaxed, memory_order_relaxed));
	return (int)k;
}

/* Give back the tokens of @t's budget @took that produce() did not use (@used). */
void rate_return(struct shmrun_task *t, uint64_t took, uint64_t used)
{
	t->rate_used += used < took ? used : took;
	if (t->rate && used < took)
		atomic_fetch_sub_explicit(&t->rate_slot->rate_taken, took - used,
					  memory_order_relaxed);
}

/* ns from @now until rate-limited source @t's next token is due; 0 if due now. */
int64_t rate_wait_ns(const struct shmrun_task *t, int64_t now)
{
	const struct shmrun_task_slot *rs = t->rate_slot;
	int64_t start = atomic_load_explicit(&rs->rate_start_ns, memory_order_relaxed);
	uint64_t taken = atomic_load_explicit(&rs->rate_taken, memory_order_relaxed);
	double at;

	if (!start)
		return 0;
	/* token taken + 1 is due once (now - start) * rate_host / 1e9 + 1 >= taken + 1 */
	at = (double)start + (double)taken * 1e9 / t->rate_host - (double)now;
	if (at <= 0)
		return 0;
	return at < 1e10 ? (int64_t)at + 1 : (int64_t)10000000000; /* at most 10 s */
}
