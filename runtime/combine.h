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
 * Layout. An open-addressing table (linear probing) of uint64 slots, each 0
 * (empty) or a 32-bit tag of the key's hash (never 0) above the index of an
 * entry, so a probe that misses never touches the entry; entries are
 * fixed-size
 *
 *     [u64 w0][u64 w1][u32 key_off][u32 key_len][i64 max time][u32 slot][12 x 0][partial]
 *
 * and the keys live in one byte arena. A key of up to 16 bytes is identified
 * by its length and two words read from it (w0, w1), so a lookup compares
 * words and never calls memcmp; the table hashes those words with a
 * multiply-xorshift. XXH3-64 of the key, which routes a partial to its
 * receiver, is computed once per entry at flush instead of once per record. Nothing is freed one by one: a flush
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
#include <string.h>

#include "shmrun/operator.h"

#define COMB_MAX_KEY 64u         /* longer keys are sent as plain records */
#define COMB_MAX_ENTRIES 8192u   /* distinct keys between flushes */
#define COMB_MAX_FOLDS 65536u    /* records folded between flushes, at most */
#define COMB_MAX_PARTIAL 256u    /* largest partial_bytes a combiner may declare */

struct combiner {
	const struct shmrun_combiner *op; /* the receiving operator's (not owned) */
	uint32_t stride;                  /* bytes per entry */
	uint64_t *slots;                  /* 2 * COMB_MAX_ENTRIES: 0, or tag << 32 | entry */
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
 * An entry's header. Keys of up to 16 bytes are compared as two words
 * (w0, w1: comb_key_words()) without touching the key arena or calling memcmp;
 * the table hashes those words cheaply (comb_mix()); XXH3-64, which routes the
 * partial to its receiver, is computed once per entry at flush, not per
 * record.
 */
struct entry_hdr {
	uint64_t w0, w1;   /* key_words() of the key */
	uint32_t key_off, key_len;
	int64_t max_time;
	uint32_t slot, pad;
	uint64_t pad2;
};

#define ENTRY_HDR 48u /* bytes of struct entry_hdr, before the partial */

_Static_assert(sizeof(struct entry_hdr) == ENTRY_HDR, "entry header size");

static inline uint64_t comb_load64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

static inline uint32_t comb_load32(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

/*
 * Two words that, with the length, identify a key of at most 16 bytes, read
 * only within [key, key + len) (overlapping loads, as XXH3 does for short
 * inputs); for a longer key its first and last 8 bytes (a hint: the arena is
 * compared too).
 */
static inline void comb_key_words(const unsigned char *k, uint32_t len, uint64_t *w0, uint64_t *w1)
{
	if (len >= 8) {
		*w0 = comb_load64(k);
		*w1 = comb_load64(k + len - 8);
	} else if (len >= 4) {
		*w0 = comb_load32(k) | (uint64_t)comb_load32(k + len - 4) << 32;
		*w1 = 0;
	} else {
		*w0 = len ? k[0] | (uint64_t)k[len >> 1] << 8 | (uint64_t)k[len - 1] << 16 : 0;
		*w1 = 0;
	}
}

/* The table's hash of a key's words (a multiply-xorshift; not XXH3). */
static inline uint64_t comb_mix(uint64_t w0, uint64_t w1, uint32_t len)
{
	uint64_t h = w0 * 0x9e3779b97f4a7c15ull + w1 * 0xc2b2ae3d27d4eb4full + len;

	h ^= h >> 29;
	h *= 0xd6e8feb86659fd93ull;
	return h ^ (h >> 32);
}

/* The out-of-line part of comb_add(): a new key's entry, or NULL when full. */
struct entry_hdr *comb_insert(struct combiner *cb, const struct shmrun_record *rec, uint64_t w0,
				uint64_t w1, uint32_t slot, uint32_t tag);

/*
 * comb_add() - fold @rec (key at most COMB_MAX_KEY bytes) into its key's
 * partial. Inline: it runs once per record of a combining edge. Return: 0;
 * -ENOSPC when the table is full (or has folded COMB_MAX_FOLDS records):
 * flush it with comb_flush() and add again.
 */
static inline int comb_add(struct combiner *cb, const struct shmrun_record *rec)
{
	const unsigned char *key = rec->key;
	uint32_t len = rec->key_len, i, tag;
	uint64_t w0, w1, h;
	struct entry_hdr *e;

	if (__builtin_expect(cb->folds >= COMB_MAX_FOLDS, 0))
		return -ENOSPC;
	comb_key_words(key, len, &w0, &w1);
	h = comb_mix(w0, w1, len);
	tag = (uint32_t)(h >> 32) | 1; /* never 0: a slot of 0 is empty */
	for (i = (uint32_t)h & cb->slot_mask;; i = (i + 1) & cb->slot_mask) {
		uint64_t s = cb->slots[i];

		if (s == 0)
			break;
		if ((uint32_t)(s >> 32) != tag)
			continue;
		e = (struct entry_hdr *)(cb->entries + (size_t)(uint32_t)s * cb->stride);
		if (e->w0 == w0 && e->w1 == w1 && e->key_len == len &&
		    (len <= 16 || memcmp(cb->keys + e->key_off, key, len) == 0))
			goto found;
	}
	e = comb_insert(cb, rec, w0, w1, i, tag);
	if (!e)
		return -ENOSPC;
found:
	if (rec->event_time_ns > e->max_time)
		e->max_time = rec->event_time_ns;
	cb->op->add((unsigned char *)e + ENTRY_HDR, rec);
	cb->folds++;
	return 0;
}

/*
 * comb_flush() - hand every partial to @put (key, value = the partial,
 * event time = the largest folded) with its key's XXH3-64 hash, in insertion order,
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
