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
 *
 * The store (struct shmrun_timers, one per task; timer.c has the layout and
 * the designs rejected) is also what a checkpoint writes and a restore fills
 * (ckpt/state_file.c, ckpt/snapshot.c): shmrun_timers_add() and
 * shmrun_timers_foreach_in() work on it without a task.
 */
#ifndef SHMRUN_RT_TIMER_H
#define SHMRUN_RT_TIMER_H

#include <stdbool.h>
#include <stdint.h>

#include "shmrun/operator.h"
#include "state.h"

struct shmrun_task;

/* A timer's place in its domain's heap: its time (the sort key, kept here so
 * that a sift reads no entry unless times tie) and its entry's value. */
struct shmrun_timer_ref {
	int64_t time;	      /* ns */
	unsigned char *value; /* the kv value: u64 heap index, u64 XXH3-64 of the key */
};

/* A binary min-heap by (time, key bytes, key length). */
struct shmrun_timer_heap {
	struct shmrun_timer_ref *v; /* v[0] fires first */
	uint64_t n, cap;
};

/* One task's timers (timer.c). Zeroed: empty, created on first use. */
struct shmrun_timers {
	struct shmrun_kv kv; /* per vnode: key || i64 time (LE) || u8 domain -> 16-byte value */
	struct shmrun_timer_heap heap[2]; /* by enum shmrun_time_domain */
	unsigned char *buf;		  /* a composite key being built */
	uint32_t buf_cap;
	unsigned char *fire_key; /* the key of the timer whose on_timer() runs */
	uint32_t fire_cap;
	bool firing; /* inside a firing pass of this task (not reentered) */
};

/* Bytes a timer adds to its key in the store: i64 time + u8 domain. */
#define SHMRUN_TIMER_SUFFIX 9u

/*
 * shmrun_timers_add() - add the timer (@domain, @key, @time_ns) to @tm
 * unless it is there: in vnode @vnode (of @key_hash, the key's XXH3-64) of a
 * job of @vnodes vnodes (the store is created with it on first use) and in its
 * domain's heap. Used by shmrun_timer_set() and by restore.
 * Return: 1 added; 0 already there; -EINVAL (a domain other than the two, a
 * key longer than UINT32_MAX - SHMRUN_TIMER_SUFFIX); -ENOMEM.
 */
int shmrun_timers_add(struct shmrun_timers *tm, uint32_t vnodes, uint32_t vnode,
		      uint64_t key_hash, enum shmrun_time_domain domain, const void *key,
		      uint32_t key_len, int64_t time_ns);

/*
 * shmrun_timers_remove() - remove the timer (@domain, @key, @time_ns) of
 * vnode @vnode from @tm. Return: 0; -ENOENT if there is none; -ENOMEM (no
 * memory to build its stored key).
 */
int shmrun_timers_remove(struct shmrun_timers *tm, uint32_t vnode,
			 enum shmrun_time_domain domain, const void *key, uint32_t key_len,
			 int64_t time_ns);

/* shmrun_timers_count() - @tm's timers, both domains. */
static inline uint64_t shmrun_timers_count(const struct shmrun_timers *tm)
{
	return tm->heap[0].n + tm->heap[1].n;
}

/* shmrun_timers_vnode_count() - @tm's timers in vnode @vnode (0 out of range). */
uint64_t shmrun_timers_vnode_count(const struct shmrun_timers *tm, uint32_t vnode);

/*
 * shmrun_timers_foreach_in() - call @fn for every timer of vnode @vnode
 * (in no particular order; the heap orders them again on restore). @fn must
 * not add or remove timers. Return: 0, or the first non-zero @fn returned.
 */
int shmrun_timers_foreach_in(struct shmrun_timers *tm, uint32_t vnode,
			     int (*fn)(void *arg, enum shmrun_time_domain domain, const void *key,
				       uint32_t key_len, int64_t time_ns),
			     void *arg);

/* shmrun_timers_free() - free everything of @tm and zero it (safe on a zeroed one). */
void shmrun_timers_free(struct shmrun_timers *tm);

/*
 * shmrun_timers_fire_event() - fire @t's event-time timers with time <= @wm,
 * in time order (equal times: by key bytes, then key length), each through
 * op->on_timer() (deleted first). Timers the callbacks set at or before @wm
 * fire in the same pass, so a second call with the same @wm (e.g.
 * SHMRUN_WATERMARK_MAX twice at end of input) finds nothing due. Does not
 * change t->wm. A call from inside a firing pass of @t returns 0 at once.
 * Return: 0, or the first callback error (the task has failed; the rest
 * stay); -EINVAL for a due timer of an operator without on_timer();
 * -ECANCELED if the worker has failed.
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
