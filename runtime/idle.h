/*
 * runtime/idle.h: the idle phase of the worker loop (private to runtime/):
 * spin or sleep on the worker's doorbell when a loop turn made no progress.
 * idle.c tells how and why.
 */
#ifndef SHMRUN_RT_IDLE_H
#define SHMRUN_RT_IDLE_H

#include <stdint.h>

struct shmrun_worker;

/*
 * idle_wait() - one idle turn of worker @w, by its job's `idle` strategy:
 * spin once, or sleep on its doorbell until a peer rings it, the next token
 * of a rate-limited source is due, or a nap passes (1 ms with checkpoints,
 * 10 ms without, 100 ms for a worker with no task that is not worker 0).
 * @idle_since: in/out, CLOCK_MONOTONIC ns of the first idle turn in a row,
 * 0 when the last turn made progress (the caller resets it); hybrid spins
 * for SHMRUN_RING_SPIN_NS from it before it sleeps.
 */
void idle_wait(struct shmrun_worker *w, int64_t *idle_since);

#endif /* SHMRUN_RT_IDLE_H */
