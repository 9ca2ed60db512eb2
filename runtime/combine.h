/*
 * runtime/combine.h: the sending side of a combiner (private to runtime/).
 *
 * What it is for. When a shuffle edge leads into a stage whose operator
 * declares a struct shmrun_combiner (shmrun/operator.h), the sending task
 * folds the records it would send into one partial aggregate per key, in a
 * small table of its own per edge, and sends (key, partial) records instead:
 * a word that occurs 50 times between two flushes crosses the ring once.
 * This is the combiner of MapReduce (Dean & Ghemawat, OSDI 2004) and Flink's
 * local pre-aggregation; docs/data-path.md says when it is flushed.
 *
 * Layout. An open-addressing table (linear probing) of uint32 slots, each 0
 * (empty) or 1 + the index of an entry; entries are fixed-size
 *
 *     [u64 hash][u32 key_off][u32 key_len][i64 max event time][u32 slot][u32 0][partial]
 *
 * and the keys live in one byte arena. Nothing is freed one by one: a flush
 * hands every entry out, in insertion order, and empties the table by
 * clearing the slots the entries name (not the whole slot array).
 *
 * Invariants: at most COMB_MAX_ENTRIES entries (slots at most half full);
 * keys are at most COMB_MAX_KEY bytes (longer keys bypass the combiner);
 * a partial starts zero-filled.
 *
 * Designs rejected: combining in the receiver's ring (the ring is shared
 * memory and append-only); a table per receiving instance (more memory for
 * the same flush points: the flush routes each partial by its hash anyway);
 * flushing on a timer (no timers on the data path: the flush points are the
 * sender's own events).
 */
#ifndef SHMRUN_RT_COMBINE_H
#define SHMRUN_RT_COMBINE_H

#include <stdbool.h>
#include <stdint.h>

#include "shmrun/operator.h"

#define COMB_MAX_KEY 64u         /* longer keys are sent as plain records */
#define COMB_MAX_ENTRIES 8192u   /* distinct keys between flushes */
#define COMB_MAX_FOLDS 65536u    /* records folded between flushes, at most */
#define COMB_MAX_PARTIAL 256u    /* largest partial_bytes a combiner may declare */

struct combiner {
	const struct shmrun_combiner *op; /* the receiving operator's (not owned) */
	uint32_t stride;                  /* bytes per entry */
	uint32_t *slots;                  /* 2 * COMB_MAX_ENTRIES */
	uint32_t slot_mask;
	unsigned char *entries;           /* COMB_MAX_ENTRIES * stride */
	uint32_t n;                       /* entries in use */
	uint32_t folds;                   /* records folded since the last flush */
	unsigned char *keys;              /* COMB_MAX_ENTRIES * COMB_MAX_KEY */
	uint32_t keys_len;
};

/*
 * comb_init() - an empty table for @op in @cb (all memory owned by @cb).
 * Return: 0; -EINVAL if @op->partial_bytes is 0 or above COMB_MAX_PARTIAL or
 * a callback is missing; -ENOMEM.
 */
int comb_init(struct combiner *cb, const struct shmrun_combiner *op);

/* comb_free() - free @cb's memory; safe on a zeroed or freed @cb. */
void comb_free(struct combiner *cb);

/*
 * comb_add() - fold @rec (key hash @hash, key at most COMB_MAX_KEY bytes)
 * into its key's partial. Return: 0; -ENOSPC when the table is full (or has
 * folded COMB_MAX_FOLDS records): flush it with comb_flush() and add again.
 */
int comb_add(struct combiner *cb, const struct shmrun_record *rec, uint64_t hash);

/*
 * comb_flush() - hand every partial to @put (key, value = the partial,
 * event time = the largest folded) with its key hash, in insertion order,
 * then empty the table. Stops at the first non-zero return of @put and
 * returns it (the table is emptied all the same: the caller fails).
 * Return: 0 or @put's error.
 */
int comb_flush(struct combiner *cb,
	       int (*put)(void *arg, const struct shmrun_record *partial, uint64_t hash),
	       void *arg);

/* comb_pending() - whether @cb holds partials. */
static inline bool comb_pending(const struct combiner *cb)
{
	return cb->n != 0;
}

#endif /* SHMRUN_RT_COMBINE_H */
