/*
 * runtime/combine.c: the sending side of a combiner (combine.h has the
 * layout, invariants and designs rejected).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "combine.h"

#define XXH_INLINE_ALL
#include <xxhash.h>
#define ENTRY_HDR 48u

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

struct entry_hdr *comb_insert(struct combiner *cb, const struct shmrun_record *rec, uint64_t w0,
				uint64_t w1, uint32_t slot, uint32_t tag)
{
	struct entry_hdr *e;
	uint32_t len = rec->key_len;

	if (cb->n == COMB_MAX_ENTRIES)
		return NULL;
	e = (struct entry_hdr *)(cb->entries + (size_t)cb->n * cb->stride);
	e->w0 = w0;
	e->w1 = w1;
	e->key_off = cb->keys_len;
	e->key_len = len;
	e->max_time = rec->event_time_ns;
	e->slot = slot;
	if (len)
		memcpy(cb->keys + cb->keys_len, rec->key, len);
	cb->keys_len += len;
	memset((unsigned char *)e + ENTRY_HDR, 0, cb->stride - ENTRY_HDR);
	cb->slots[slot] = (uint64_t)tag << 32 | cb->n++;
	return e;
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
			err = put(arg, &rec, XXH3_64bits(rec.key, rec.key_len));
	}
	cb->n = 0;
	cb->folds = 0;
	cb->keys_len = 0;
	return err;
}
