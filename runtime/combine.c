/*
 * runtime/combine.c: the sending side of a combiner (combine.h has the
 * layout, invariants and designs rejected).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "combine.h"

#define ENTRY_HDR 32u

struct entry_hdr {
	uint64_t hash;
	uint32_t key_off, key_len;
	int64_t max_time;
	uint32_t slot, pad;
};

int comb_init(struct combiner *cb, const struct shmrun_combiner *op)
{
	*cb = (struct combiner){.op = op};
	if (!op || !op->add || !op->merge || op->partial_bytes == 0 ||
	    op->partial_bytes > COMB_MAX_PARTIAL)
		return -EINVAL;
	cb->stride = ENTRY_HDR + ((op->partial_bytes + 7u) & ~7u);
	cb->slot_mask = 2 * COMB_MAX_ENTRIES - 1;
	cb->slots = calloc(2 * COMB_MAX_ENTRIES, sizeof(*cb->slots));
	cb->entries = malloc((size_t)COMB_MAX_ENTRIES * cb->stride);
	cb->keys = malloc((size_t)COMB_MAX_ENTRIES * COMB_MAX_KEY);
	if (!cb->slots || !cb->entries || !cb->keys) {
		comb_free(cb);
		return -ENOMEM;
	}
	return 0;
}

void comb_free(struct combiner *cb)
{
	free(cb->slots);
	free(cb->entries);
	free(cb->keys);
	*cb = (struct combiner){0};
}

int comb_add(struct combiner *cb, const struct shmrun_record *rec, uint64_t hash)
{
	uint32_t i = (uint32_t)hash & cb->slot_mask;
	struct entry_hdr *e;

	if (cb->folds >= COMB_MAX_FOLDS)
		return -ENOSPC;
	for (;; i = (i + 1) & cb->slot_mask) {
		uint32_t s = cb->slots[i];

		if (s == 0)
			break;
		e = (struct entry_hdr *)(cb->entries + (size_t)(s - 1) * cb->stride);
		if (e->hash == hash && e->key_len == rec->key_len &&
		    memcmp(cb->keys + e->key_off, rec->key, rec->key_len) == 0)
			goto found;
	}
	if (cb->n == COMB_MAX_ENTRIES)
		return -ENOSPC;
	e = (struct entry_hdr *)(cb->entries + (size_t)cb->n * cb->stride);
	e->hash = hash;
	e->key_off = cb->keys_len;
	e->key_len = rec->key_len;
	e->max_time = rec->event_time_ns;
	e->slot = i;
	e->pad = 0;
	if (rec->key_len)
		memcpy(cb->keys + cb->keys_len, rec->key, rec->key_len);
	cb->keys_len += rec->key_len;
	memset((unsigned char *)e + ENTRY_HDR, 0, cb->stride - ENTRY_HDR);
	cb->slots[i] = ++cb->n;
found:
	if (rec->event_time_ns > e->max_time)
		e->max_time = rec->event_time_ns;
	cb->op->add((unsigned char *)e + ENTRY_HDR, rec);
	cb->folds++;
	return 0;
}

int comb_flush(struct combiner *cb,
	       int (*put)(void *arg, const struct shmrun_record *partial, uint64_t hash),
	       void *arg)
{
	int err = 0;

	for (uint32_t k = 0; k < cb->n; k++) {
		struct entry_hdr *e = (struct entry_hdr *)(cb->entries + (size_t)k * cb->stride);
		struct shmrun_record rec = {
			.key = cb->keys + e->key_off,
			.key_len = e->key_len,
			.value = (unsigned char *)e + ENTRY_HDR,
			.value_len = cb->op->partial_bytes,
			.event_time_ns = e->max_time,
		};

		cb->slots[e->slot] = 0;
		if (!err)
			err = put(arg, &rec, e->hash);
	}
	cb->n = 0;
	cb->folds = 0;
	cb->keys_len = 0;
	return err;
}
