/*
 * runtime/pace.h: pacing of sources, records per second for a whole stage,
 * shared by its instances on every worker (private to runtime/). pace.c
 * tells how.
 *
 * A task is paced when its operator names a RATE key in op->pacing_param and
 * the stage sets it: then t->rate (records/s, > 0), t->rate_host (this
 * host's share of it, pace_host_rate()) and t->rate_slot (the slot of the
 * stage's instance 0 in this host's control area, whose rate_start_ns and
 * rate_taken hold the tokens of the stage's instances on this host) are set
 * by the worker at setup.
 *
 * Designs rejected: reading a key by a name the runtime chooses (`rate`):
 * the operator names its key, the runtime knows none.
 */
#ifndef SHMRUN_RT_PACE_H
#define SHMRUN_RT_PACE_H

#include <stdint.h>

#define PRODUCE_BUDGET 256u /* records one produce() call may emit, at most */

struct shmrun_plan;
struct shmrun_task;

/*
 * pace_host_rate() - the records per second @host's instances of @stage pace
 * together when the stage's rate is @rate (records/s, > 0): rate x (the
 * stage's instances placed on @host's workers) / width. The shares of the
 * hosts add up to @rate (exactly as real numbers; each is a double, not
 * rounded to whole records, so a host with a small share still produces).
 * With one host, or all of the stage's instances on @host: @rate itself; 0
 * for a host with none. Every host computes the same shares from the same
 * plan (docs/multihost.md: instances of a stage are contiguous per host).
 * @p: the plan; @stage: index into p->job->stages; @host: < p->hosts.
 * Return: the host's share, records/s; never fails.
 */
double pace_host_rate(const struct shmrun_plan *p, uint32_t stage, uint32_t host, uint64_t rate);

/*
 * source_budget() - how many records source @t may produce at @now (ns,
 * CLOCK_MONOTONIC): PRODUCE_BUDGET for an unpaced task, else the tokens it
 * took from its stage's counter on this host (t->rate_host tokens a second),
 * 0..PRODUCE_BUDGET (0: not yet). The first call of any instance of the
 * stage on this host starts the host's pace at @now. Return: the budget;
 * never fails.
 */
int source_budget(struct shmrun_task *t, int64_t now);

/*
 * rate_return() - give back the tokens of @t's budget @took that produce()
 * did not use (@used records emitted, @used <= @took). No-op for an unpaced
 * task.
 */
void rate_return(struct shmrun_task *t, uint64_t took, uint64_t used);

/*
 * rate_wait_ns() - ns from @now until paced source @t's next token is due:
 * 0 if due now or the pace has not started, at most 10 s. @t must be paced
 * (t->rate > 0).
 */
int64_t rate_wait_ns(const struct shmrun_task *t, int64_t now);

#endif /* SHMRUN_RT_PACE_H */
