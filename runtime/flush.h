/*
 * runtime/flush.h: the flush phase of the worker loop (private to runtime/):
 * asking operators that hold output back (op->flush) to write it out.
 * flush.c tells when and why.
 */
#ifndef SHMRUN_RT_FLUSH_H
#define SHMRUN_RT_FLUSH_H

#include <stdbool.h>
#include <stdint.h>

#define FLUSH_CLOCK_TURNS 64u /* loop turns between two looks at the clock */

struct shmrun_task;
struct shmrun_worker;

/*
 * flush_task() - ask @t to write out what it holds (op->flush), if it has
 * one, is open, has not ended and its worker has not failed; a failure is
 * reported as the task's error. @now (ns, CLOCK_MONOTONIC; non-zero: a flush
 * by the clock) sets the next one due flush_interval later; 0 leaves it.
 */
void flush_task(struct shmrun_task *t, int64_t now);

/*
 * flush_setup() - once, after every task of @w opened: each flushing task's
 * interval (its stage's flush_interval, ns) and first deadline; counts them
 * in w->nflush.
 */
void flush_setup(struct shmrun_worker *w);

/*
 * flush_tasks() - every task of @w with op->flush: now (@due_only false: the
 * worker is idle or stopping), or those whose flush_interval has passed
 * (@due_only: a busy worker, every FLUSH_CLOCK_TURNS calls). Cheap when
 * no task flushes or between clock looks: one test.
 */
void flush_tasks(struct shmrun_worker *w, bool due_only);

#endif /* SHMRUN_RT_FLUSH_H */
