/*
 * runtime/flush.c: the flush phase of the worker loop, for operators that
 * hold output back (op->flush, flush.h).
 *
 * What it is for. An operator may keep output in memory to write it in
 * larger pieces (a sink's buffer, a window's partial lines). The loop asks it
 * to write out what it holds at three moments: when the task's input drained
 * (it read nothing in a loop turn, or its worker is idle), at least every
 * flush interval while input keeps coming (the stage's value of the key the
 * operator names in .flush_param, else FLUSH_DEFAULT_NS), and when the worker stops without a
 * final checkpoint.
 *
 * Invariants: the clock is read at most once every FLUSH_CLOCK_TURNS loop
 * turns, never per record; a task is flushed only while open, not ended, and
 * its worker has not failed; a flush that fails fails the task like a
 * process() that fails (first error wins, task.h).
 *
 * Designs rejected: a timer signal or timerfd per flushing task (a wakeup
 * and a system call where a counter does); flushing after every loop turn
 * (small writes, which holding output was meant to avoid).
 */
#include <string.h>

#include "callback.h"
#include "util.h"
#include "flush.h"
#include "task.h"
#include "worker.h"

#define FLUSH_DEFAULT_NS 100000000 /* the interval of an operator without .flush_param */

/*
 * Ask @t to write out what it holds. @now (non-zero: a flush by the clock)
 * sets the next one due flush_interval later.
 */
void flush_task(struct shmrun_task *t, int64_t now)
{
	uint64_t where;
	int err;

	if (now)
		t->flush_due_ns = now + t->flush_every_ns;
	if (!t->op->flush || !t->opened || t->ended || t->w->failed)
		return;
	where = cb_enter(t, SHMRUN_CB_FLUSH);
	err = t->op->flush(t, t->state);
	cb_leave(t, where);
	if (err && !t->w->failed)
		shmrun_task_error(t, "flush failed: %s", strerror(-err));
	if (err)
		note_fail_errno(t->w, err);
}

/* Once, after open(): each flushing task's interval and first deadline. */
void flush_setup(struct shmrun_worker *w)
{
	int64_t now = shmrun_now_ns();

	for (uint32_t x = 0; x < w->ntasks; x++) {
		struct shmrun_task *t = &w->tasks[x];

		if (!t->op->flush)
			continue;
		t->flush_every_ns =
			t->op->flush_param
				? (int64_t)shmrun_task_param_u64(t, t->op->flush_param, FLUSH_DEFAULT_NS)
				: FLUSH_DEFAULT_NS;
		t->flush_due_ns = now + t->flush_every_ns;
		w->nflush++;
	}
}

/*
 * Every task with op->flush: now (@due_only false: the worker is idle or
 * stopping), or those whose flush_interval has passed (@due_only: a busy
 * worker, every FLUSH_CLOCK_TURNS loop turns).
 */
void flush_tasks(struct shmrun_worker *w, bool due_only)
{
	int64_t now;

	if (!w->nflush || (due_only && ++w->flush_turns % FLUSH_CLOCK_TURNS))
		return;
	now = due_only ? shmrun_now_ns() : 0;
	for (uint32_t x = 0; x < w->ntasks; x++)
		if (w->tasks[x].op->flush && (!due_only || now >= w->tasks[x].flush_due_ns))
			flush_task(&w->tasks[x], now);
}
