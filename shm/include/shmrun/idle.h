/*
 * shmrun/idle.h: what a side of a ring does while it has nothing to read or no
 * room to write — the one enum both the ring API (shmrun/ring.h, its wait
 * functions) and a job description (shmrun/job.h, the [job] key `idle`) need.
 *
 * It has a header of its own so that shmrun/job.h can name the strategy
 * without pulling in the ring API: a user who loads and runs a job never sees
 * a ring (runtime/README.md). SHMRUN_RING_SPIN_NS, the hybrid strategy's spin,
 * stays in shmrun/ring.h. The values are the ones shmrun_ring_wait_*()
 * take, so the worker passes job->idle to the rings as it is.
 *
 * Rejected: a second enum in job.h mapped onto this one by the worker — two
 * names for one thing, and a mapping to keep in step.
 */
#ifndef SHMRUN_IDLE_H
#define SHMRUN_IDLE_H

#ifdef __cplusplus
extern "C" {
#endif

/** What a side does while it has nothing to read or no room to write. */
enum shmrun_idle {
	SHMRUN_IDLE_SPIN = 0,   /**< busy-poll; lowest latency, burns the CPU */
	SHMRUN_IDLE_SLEEP = 1,  /**< sleep on the ring's futex doorbell at once */
	SHMRUN_IDLE_HYBRID = 2, /**< spin ~SHMRUN_RING_SPIN_NS, then sleep (default) */
};

#ifdef __cplusplus
}
#endif
#endif /* SHMRUN_IDLE_H */
