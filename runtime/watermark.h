/*
 * runtime/watermark.h: event-time watermarks in the worker (private to
 * runtime/). watermark.c tells the model; docs/event-time.md tells the user.
 *
 * The worker loop (worker.c) calls in here at five points:
 *   - setup: wm_setup() once every task opened (and was restored);
 *   - emit: wm_track() for every record a generating task emits;
 *   - a watermark arrived on an input (a WATERMARK frame off a ring, or a
 *     forward upstream's call): wm_input_advanced();
 *   - end of input: wm_advance(t, SHMRUN_WATERMARK_MAX, false) before
 *     end_of_input(), then worker_send_watermark() before END;
 *   - every loop turn: wm_tick() (generation, idleness, processing-time
 *     timers); and idle.c asks wm_sleep_ns() how long it may sleep.
 */
#ifndef SHMRUN_RT_WATERMARK_H
#define SHMRUN_RT_WATERMARK_H

#include <stdbool.h>
#include <stdint.h>

struct shmrun_record;
struct shmrun_task;
struct shmrun_worker;

/*
 * What a task knows of one of its inputs (a ring channel: chan_in.wmi; a
 * forward input: shmrun_task.fwd_wm[slot]). Written by the receiving task's
 * worker only.
 */
struct wm_input {
	int64_t wm;	 /* the newest watermark it delivered, SHMRUN_WATERMARK_MIN before any */
	int64_t last_ns; /* CLOCK_MONOTONIC of the loop turn it last delivered anything in */
	bool idle;	 /* silent for the job's idle_timeout: left out of the minimum */
	bool ended;	 /* its END came (a stop's END keeps its wm; another's is MAX) */
};

/* wm_input_init() - an input that has delivered nothing yet. */
static inline void wm_input_init(struct wm_input *in)
{
	in->wm = INT64_MIN;
	in->last_ns = 0;
	in->idle = false;
	in->ended = false;
}

/*
 * wm_setup() - once, after every task of @w opened: each generating task's
 * delay and interval, every input's idle clock, and the watermark each
 * restored task had (t->wm from the checkpoint) sent downstream again, since
 * its receivers restart every input at MIN.
 * Return: 0, or a callback's error (the worker has failed).
 */
int wm_setup(struct shmrun_worker *w);

/*
 * wm_track_batch() - a generating task @t emits @n records @recs: keep the
 * largest event time (0 = none, ignored). Called from shmrun_emit*() only
 * when t->wm_gen.
 */
void wm_track_batch(struct shmrun_task *t, const struct shmrun_record *recs, uint32_t n);

/*
 * wm_input_advanced() - input @in of @t delivered watermark @wm: kept if
 * newer than what it had; @t's watermark becomes the minimum over its inputs
 * if that is larger (wm_advance()). A generating task keeps the input's
 * value but does not follow it. Return: 0, or a callback's error.
 */
int wm_input_advanced(struct shmrun_task *t, struct wm_input *in, int64_t wm);

/*
 * wm_input_active() - input @in of @t delivered something in this loop turn
 * (w->turn_ns): its idle clock restarts, and an idle one counts again.
 */
void wm_input_active(struct shmrun_task *t, struct wm_input *in);

/*
 * wm_advance() - @t's watermark becomes @wm if that is larger: its
 * event-time timers fire (shmrun_timers_fire_event()), then
 * op->on_watermark(), then, with @forward, the watermark goes downstream
 * (worker_send_watermark()). Return: 0, or the first error (the task failed).
 */
int wm_advance(struct shmrun_task *t, int64_t wm, bool forward);

/*
 * wm_tick() - the loop turn's event-time work for @w at @now (CLOCK_MONOTONIC
 * ns, w->turn_ns): generating tasks whose interval passed emit a watermark,
 * inputs silent for idle_timeout become idle, due processing-time timers
 * fire. Parked and ended tasks are left alone. Return: how many watermarks
 * and timers it moved (progress for the loop).
 */
uint32_t wm_tick(struct shmrun_worker *w, int64_t now);

/*
 * wm_sleep_ns() - how long @w may sleep, at most @max_ns, before wm_tick()
 * has work: a generating task's next interval (only if a newer watermark is
 * pending), an input about to become idle, a processing-time timer.
 */
int64_t wm_sleep_ns(const struct shmrun_worker *w, int64_t max_ns);

/*
 * worker_send_watermark() - send @t's watermark downstream if it is newer
 * than the last one sent: partials held in combiners go first (records
 * before the watermark that covers them), then a WATERMARK frame on every
 * channel of every output edge, and wm_input_advanced() on each forward
 * successor. In worker.c. Return: 0, or a negative errno (recorded).
 */
int worker_send_watermark(struct shmrun_task *t);

#endif /* SHMRUN_RT_WATERMARK_H */
