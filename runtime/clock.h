/*
 * runtime/clock.h: the runtime's monotonic clock in nanoseconds (private to
 * runtime/).
 *
 * What it is for. The worker loop, its pacing and flushing, snapshot stalls
 * and the checkpoint coordinator measure intervals, never dates: they read
 * CLOCK_MONOTONIC, which no clock adjustment moves. One definition, inline,
 * because the loop reads it on its paths that run every turn (paced sources).
 *
 * Invariants: values only compare and subtract among themselves in one boot;
 * they are never stored across a reboot or compared with a wall-clock time.
 *
 * Designs rejected: CLOCK_MONOTONIC_RAW (slower to read through the vDSO on
 * some kernels, and slewing does not matter at these intervals); the TSC
 * directly (not invariant on every host, and needs calibration).
 */
#ifndef SHMRUN_RT_CLOCK_H
#define SHMRUN_RT_CLOCK_H

#include <stdint.h>
#include <time.h>

/* now_ns() - CLOCK_MONOTONIC, ns. Return: the time; never fails. */
static inline int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#endif /* SHMRUN_RT_CLOCK_H */
