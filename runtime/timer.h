/*
 * runtime/timer.h: keyed timers (private to runtime/): the store behind
 * shmrun_timer_set()/shmrun_timer_delete() (shmrun/operator.h, ABI 1.1) and
 * the two calls the worker loop makes to fire them.
 *
 * What it is for. An operator that waits for event time (a window that
 * closes when the watermark passes its end, a join that trims its buffer)
 * registers timers per key; the runtime keeps them in the key's vnode, so a
 * checkpoint holds them with the key's state and a rescale moves them with
 * the vnode (Flink's InternalTimerService: timers are keyed state). The
 * worker (worker.c, watermark.c) decides *when* time advances; this file
 * decides *which* timers are due and calls op->on_timer() for each.
 *
 * Contract between the two sides:
 * - shmrun_timers_fire_event(t, wm) is called by the watermark code each time
 *   t's watermark advances to @wm (and with SHMRUN_WATERMARK_MAX at end of
 *   input, before end_of_input()), before on_watermark() and before the
 *   watermark goes downstream;
 * - shmrun_timers_fire_processing(t, now) is called by the worker loop
 *   between records, at least every millisecond while the worker runs, with
 *   CLOCK_REALTIME ns;
 * - shmrun_timers_next_processing(t) tells the idle code how long it may sleep.
 */
#ifndef SHMRUN_RT_TIMER_H
#define SHMRUN_RT_TIMER_H

#include <stdint.h>

struct shmrun_task;

/*
 * shmrun_timers_fire_event() - fire @t's event-time timers with time <= @wm,
 * in time order, each through op->on_timer() (deleted first).
 * Return: 0, or the first callback error (the task has failed; the rest stay).
 */
int shmrun_timers_fire_event(struct shmrun_task *t, int64_t wm);

/*
 * shmrun_timers_fire_processing() - as shmrun_timers_fire_event(), for the
 * processing-time timers with time <= @now_ns (CLOCK_REALTIME).
 * Return: 0, or the first callback error.
 */
int shmrun_timers_fire_processing(struct shmrun_task *t, int64_t now_ns);

/*
 * shmrun_timers_next_processing() - the time of @t's earliest processing-time
 * timer (CLOCK_REALTIME ns), or INT64_MAX for none.
 */
int64_t shmrun_timers_next_processing(const struct shmrun_task *t);

#endif /* SHMRUN_RT_TIMER_H */
