/*
 * runtime/watermark.c: event-time watermarks in the worker (Flink's model;
 * docs/event-time.md).
 *
 * What it is for. A watermark W in a stream says "no more records with
 * event_time_ns <= W will come"; operators that wait for event time (windows,
 * joins, event-time timers) act when it passes. This file decides what each
 * task's watermark is and when it moves; worker.c carries watermarks between
 * tasks (WATERMARK frames on rings, direct calls on forward edges) and
 * timer.c fires the timers a move makes due.
 *
 * The rules:
 *   - Generation. A stage with `watermark_delay = D` generates: every
 *     `watermark_interval` each task of it takes the largest event time it
 *     emitted so far, M, and its watermark becomes M - D (bounded
 *     out-of-orderness, Flink's forBoundedOutOfOrderness with its periodic
 *     autoWatermarkInterval). Such a task ignores the watermarks of its own
 *     inputs (as Flink's assignTimestampsAndWatermarks does), except that
 *     its end of input still takes it to MAX.
 *   - Propagation. Every other task's watermark is the minimum over its
 *     inputs of the newest watermark each delivered: a ring channel per
 *     upstream instance, or a forward upstream. An input whose upstream
 *     finished delivered MAX (it leaves the minimum to the others).
 *   - Idleness. With `[job] idle_timeout`, an input that delivered nothing
 *     (no record, watermark or barrier) for that long is idle and left out of
 *     the minimum until it delivers again (Flink's withIdleness, judged by the
 *     receiver). With every input idle or finished, the watermark stays.
 *   - MAX only at end of input. Once every input ended (not a stop), the
 *     task's watermark becomes SHMRUN_WATERMARK_MAX: timers fire, then
 *     on_watermark(MAX), then end_of_input(), then MAX goes downstream ahead
 *     of END; so what end_of_input() emits is not late downstream. A minimum
 *     of MAX over inputs that delivered MAX but whose END is still to come
 *     (a finished source waits for the final checkpoint) does not move the
 *     task: its END comes soon and does it in that order.
 *   - Monotonic. t->wm never decreases: a restore sets it before open(), and
 *     inputs restart at MIN, so the minimum stays below it until the inputs
 *     catch up; an input back from idleness may hold a smaller watermark,
 *     which then moves nothing (its records at or below t->wm are late).
 *   - Each move (wm_advance()): t->wm is set, shmrun_timers_fire_event(),
 *     op->on_watermark(), then downstream (worker_send_watermark(), which
 *     sends only what is newer than the last one sent).
 *
 * Cost. Nothing per record but a predictable branch in shmrun_emit*() and,
 * for a generating task, a compare per record. A watermark is sent only when
 * it advanced, at most once per interval per generating task and once per
 * arriving watermark downstream; the minimum is recomputed only when the
 * input that moved could have been holding it. The clock is read once per
 * loop turn, and only on workers that need it (w->wm_clocked).
 *
 * Invariants: a parked task (output queued behind a full ring, or a forward
 * successor holding its input for barrier alignment) neither generates nor
 * fires processing-time timers until it is unparked, so nothing it sends
 * overtakes a barrier; a stop's END does not count as MAX, so a stopped
 * job's checkpoint never holds a watermark its input did not justify.
 *
 * Designs rejected:
 *   - a watermark per record or per batch: frames and callbacks for nothing
 *     between two intervals; Flink generates periodically for this reason;
 *   - idleness announced by the sender (Flink's WatermarkStatus): the
 *     receiver sees silence just as well, and no new frame kind is needed;
 *   - forwarding MAX as soon as every input delivered it: a task's
 *     end_of_input() output would then follow MAX and be late downstream;
 *   - a heap over the inputs for the minimum: watermarks are rare, and the
 *     rescan happens only when the input holding the minimum moves.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "callback.h"
#include "shmrun/operator.h"
#include "task.h"
#include "timer.h"
#include "util.h"
#include "watermark.h"
#include "worker.h"

#define IDLE_CHECK_MIN_NS 1000000 /* look for idle inputs at most every 1 ms */

int64_t shmrun_task_watermark(const struct shmrun_task *t)
{
	return t->wm;
}

static uint32_t task_inputs(const struct shmrun_task *t)
{
	return t->nins + t->fwd_inputs;
}

int wm_advance(struct shmrun_task *t, int64_t wm, bool forward)
{
	int err = 0;

	if (t->ended || t->w->failed)
		return t->w->failed ? -ECANCELED : 0;
	if (wm > t->wm) {
		t->wm = wm;
		err = shmrun_timers_fire_event(t, wm);
		if (!err && t->op->on_watermark) {
			uint64_t where = cb_enter(t, SHMRUN_CB_ON_WATERMARK);

			err = t->op->on_watermark(t, t->state, wm);
			cb_leave(t, where);
			if (err && !t->w->failed)
				shmrun_task_error(t, "on_watermark failed: %s", strerror(-err));
			if (err)
				note_fail_errno(t->w, err);
		}
	}
	if (!err && forward)
		err = worker_send_watermark(t);
	return err;
}

/*
 * The minimum over @t's inputs that count (not idle; an ended one counts),
 * and whether any does. Return: true with *@m set, or false (all idle).
 */
static bool inputs_min(const struct shmrun_task *t, int64_t *m)
{
	bool any = false;

	*m = SHMRUN_WATERMARK_MAX;
	for (uint32_t i = 0; i < t->nins; i++) {
		const struct wm_input *in = &t->ins[i]->wmi;

		if (in->idle && !in->ended)
			continue;
		any = true;
		if (in->wm < *m)
			*m = in->wm;
	}
	for (uint32_t i = 0; i < t->fwd_inputs; i++) {
		const struct wm_input *in = &t->fwd_wm[i];

		if (in->idle && !in->ended)
			continue;
		any = true;
		if (in->wm < *m)
			*m = in->wm;
	}
	return any;
}

/*
 * Whether every input of @t, idle or not, has delivered MAX: each upstream
 * finished (a source exhausted while it waits for the final checkpoint
 * sends MAX, not END), so no record will come to @t any more.
 */
static bool inputs_all_max(const struct shmrun_task *t)
{
	for (uint32_t i = 0; i < t->nins; i++)
		if (t->ins[i]->wmi.wm != SHMRUN_WATERMARK_MAX)
			return false;
	for (uint32_t i = 0; i < t->fwd_inputs; i++)
		if (t->fwd_wm[i].wm != SHMRUN_WATERMARK_MAX)
			return false;
	return t->nins + t->fwd_inputs > 0;
}

/*
 * @t's watermark follows its inputs' minimum; a generating task ignores
 * its inputs' watermarks. MAX only once every input delivered MAX: then no
 * record can come, and a generating task too is done with event time
 * (without this, a stage such as extract behind a file_source instance that
 * finished first held every window downstream until the job's end when
 * checkpoints keep finished sources waiting).
 */
static int follow_inputs(struct shmrun_task *t)
{
	int64_t m;

	if (t->wm < SHMRUN_WATERMARK_MAX && inputs_all_max(t))
		return wm_advance(t, SHMRUN_WATERMARK_MAX, true);
	if (t->wm_gen || !inputs_min(t, &m) || m == SHMRUN_WATERMARK_MAX || m <= t->wm)
		return 0;
	return wm_advance(t, m, true);
}

int wm_input_advanced(struct shmrun_task *t, struct wm_input *in, int64_t wm)
{
	int64_t old = in->wm;

	if (wm <= old)
		return 0;
	in->wm = wm;
	if (in->idle) {
		in->idle = false; /* it delivered: it counts again */
		in->last_ns = t->w->turn_ns;
	}
	/* an input above t->wm was not holding the minimum: nothing can move,
	 * unless it was the last one to reach MAX */
	if (old > t->wm && (wm != SHMRUN_WATERMARK_MAX || !inputs_all_max(t)))
		return 0;
	return follow_inputs(t);
}

void wm_input_active(struct shmrun_task *t, struct wm_input *in)
{
	in->last_ns = t->w->turn_ns;
	in->idle = false;
	/* back from idleness: the minimum may only have dropped, and t->wm stays */
}

void wm_track_batch(struct shmrun_task *t, const struct shmrun_record *recs, uint32_t n)
{
	int64_t m = t->wm_max_ts;

	for (uint32_t i = 0; i < n; i++)
		if (recs[i].event_time_ns > m && recs[i].event_time_ns != 0)
			m = recs[i].event_time_ns;
	t->wm_max_ts = m;
}

/* The watermark a generating task's emits justify: max - delay, below MAX. */
static int64_t generated(const struct shmrun_task *t)
{
	int64_t m = t->wm_max_ts;

	if (m == SHMRUN_WATERMARK_MIN || m < SHMRUN_WATERMARK_MIN + t->wm_delay_ns)
		return SHMRUN_WATERMARK_MIN;
	m -= t->wm_delay_ns;
	return m == SHMRUN_WATERMARK_MAX ? SHMRUN_WATERMARK_MAX - 1 : m;
}

int wm_setup(struct shmrun_worker *w)
{
	const struct shmrun_job *job = w->plan->job;
	int64_t now = shmrun_now_ns();
	int err = 0;

	w->turn_ns = now;
	w->wm_idle_check_ns = now;
	for (uint32_t x = 0; x < w->ntasks; x++) {
		struct shmrun_task *t = &w->tasks[x];

		t->wm_sent = SHMRUN_WATERMARK_MIN;
		t->wm_max_ts = SHMRUN_WATERMARK_MIN;
		if (t->stage->watermarks) {
			t->wm_gen = true;
			t->wm_delay_ns = (int64_t)t->stage->watermark_delay_ns;
			t->wm_interval_ns = (int64_t)t->stage->watermark_interval_ns;
			t->wm_due_ns = now + t->wm_interval_ns;
			w->wm_clocked = true;
		}
		if (t->op->on_timer)
			w->wm_clocked = true;
		if (job->idle_timeout_ns && task_inputs(t) > 1)
			w->wm_clocked = true;
		for (uint32_t i = 0; i < t->nins; i++)
			t->ins[i]->wmi.last_ns = now;
		for (uint32_t i = 0; i < t->fwd_inputs; i++)
			t->fwd_wm[i].last_ns = now;
	}
	/* topological order: a forward successor hears its upstream's first */
	for (uint32_t x = 0; x < w->ntasks && !err; x++)
		if (w->tasks[x].wm > SHMRUN_WATERMARK_MIN && !w->tasks[x].ended)
			err = worker_send_watermark(&w->tasks[x]);
	return err;
}

/* Inputs of @t silent since before @now - @timeout become idle. Return: whether any did. */
static bool mark_idle(struct shmrun_task *t, int64_t now, int64_t timeout)
{
	bool changed = false;

	for (uint32_t i = 0; i < t->nins; i++) {
		struct wm_input *in = &t->ins[i]->wmi;

		/* held for barrier alignment: silent because we do not read it */
		if (!in->idle && !in->ended && !t->ins[i]->held && now - in->last_ns >= timeout)
			changed = in->idle = true;
	}
	for (uint32_t i = 0; i < t->fwd_inputs; i++) {
		struct wm_input *in = &t->fwd_wm[i];

		if (!in->idle && !in->ended && now - in->last_ns >= timeout)
			changed = in->idle = true;
	}
	return changed;
}

uint32_t wm_tick(struct shmrun_worker *w, int64_t now)
{
	int64_t timeout = (int64_t)w->plan->job->idle_timeout_ns, rt = 0;
	bool idle_check = timeout && now >= w->wm_idle_check_ns;
	uint32_t moved = 0;

	if (idle_check) {
		int64_t step = timeout / 8 > IDLE_CHECK_MIN_NS ? timeout / 8 : IDLE_CHECK_MIN_NS;

		w->wm_idle_check_ns = now + step;
	}
	for (uint32_t x = 0; x < w->ntasks && !w->failed; x++) {
		struct shmrun_task *t = &w->tasks[x];

		if (t->ended || !t->opened || task_parked(t))
			continue;
		if (t->wm_gen && now >= t->wm_due_ns) {
			int64_t g = generated(t);

			t->wm_due_ns = now + t->wm_interval_ns;
			if (g > t->wm) {
				wm_advance(t, g, true);
				moved++;
			}
		}
		if (idle_check && !t->wm_gen && task_inputs(t) > 1 && mark_idle(t, now, timeout)) {
			int64_t before = t->wm;

			follow_inputs(t);
			moved += t->wm != before;
		}
		if (t->op->on_timer) {
			if (!rt)
				rt = shmrun_wall_ns();
			if (shmrun_timers_next_processing(t) <= rt) {
				shmrun_timers_fire_processing(t, rt);
				moved++;
			}
		}
	}
	return moved;
}

/* When wm_tick() will find @in idle: its deadline, at the next idle check or later. */
static int64_t idle_due(const struct shmrun_worker *w, const struct wm_input *in, int64_t timeout)
{
	int64_t due = in->last_ns + timeout;

	return due > w->wm_idle_check_ns ? due : w->wm_idle_check_ns;
}

int64_t wm_sleep_ns(const struct shmrun_worker *w, int64_t max_ns)
{
	int64_t timeout = (int64_t)w->plan->job->idle_timeout_ns, now, rt = 0;

	if (!w->wm_clocked)
		return max_ns;
	now = shmrun_now_ns();
	for (uint32_t x = 0; x < w->ntasks; x++) {
		const struct shmrun_task *t = &w->tasks[x];
		bool watch_idle = timeout && !t->wm_gen && task_inputs(t) > 1;
		int64_t ns;

		/* a parked task's work waits for its output to drain, which rings the bell */
		if (t->ended || !t->opened || task_parked(t))
			continue;
		/* a newer watermark is waiting for the interval */
		if (t->wm_gen && generated(t) > t->wm) {
			ns = t->wm_due_ns - now;
			if (ns < max_ns)
				max_ns = ns;
		}
		/* an input holding the minimum is about to become idle (looked
		 * for at wm_idle_check_ns at the earliest) */
		for (uint32_t i = 0; watch_idle && i < t->nins; i++) {
			const struct wm_input *in = &t->ins[i]->wmi;

			if (in->idle || in->ended || t->ins[i]->held || in->wm > t->wm)
				continue;
			ns = idle_due(w, in, timeout) - now;
			if (ns < max_ns)
				max_ns = ns;
		}
		for (uint32_t i = 0; watch_idle && i < t->fwd_inputs; i++) {
			const struct wm_input *in = &t->fwd_wm[i];

			if (in->idle || in->ended || in->wm > t->wm)
				continue;
			ns = idle_due(w, in, timeout) - now;
			if (ns < max_ns)
				max_ns = ns;
		}
		if (t->op->on_timer) {
			int64_t next = shmrun_timers_next_processing(t);

			if (next == INT64_MAX)
				continue;
			if (!rt)
				rt = shmrun_wall_ns();
			ns = next <= rt ? 0 : next - rt;
			if (ns < max_ns)
				max_ns = ns;
		}
	}
	return max_ns < 0 ? 0 : max_ns;
}
