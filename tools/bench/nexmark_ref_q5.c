/*
 * tools/bench/nexmark_ref_q5.c: the reference of docs/examples/nexmark/q5.conf
 * (nexmark_ref.h), NEXMark q5 "hot items": per sliding window of 10 s every
 * 2 s of event time (windows aligned to the epoch), the auction(s) with the
 * most bids, every one of them on a tie, as the topology emits them:
 * auction TAB start TAB end TAB count (ms since the epoch). A window
 * without bids has no line.
 *
 * The events come in event-time order, so a window is final as soon as an
 * event at or past its end arrives: at most size / slide = 5 windows are open,
 * each a hash table auction -> count; when one closes, one pass finds its
 * largest count and a second emits the auctions that have it, clearing the
 * table.
 */
#include <stdlib.h>
#include <string.h>

#include "nexmark_ref.h"

#define Q5_SIZE_MS  10000
#define Q5_SLIDE_MS 2000
#define Q5_OPEN	    (Q5_SIZE_MS / Q5_SLIDE_MS)

/* auction -> count, open addressing, linear probing; key 0 = empty (ids >= 1000) */
struct q5_table {
	uint64_t *key, *count;
	size_t cap, used; /* cap a power of two */
};

struct q5 {
	uint64_t start[Q5_OPEN]; /* window i's start, ms; UINT64_MAX: none */
	struct q5_table t[Q5_OPEN];
};

static int q5_table_grow(struct q5_table *t)
{
	size_t cap = t->cap ? t->cap * 2 : 1024;
	uint64_t *key = calloc(cap, sizeof(*key)), *count = calloc(cap, sizeof(*count));

	if (!key || !count) {
		free(key);
		free(count);
		return -1;
	}
	for (size_t i = 0; i < t->cap; i++) {
		size_t h;

		if (!t->key[i])
			continue;
		for (h = (t->key[i] * 0x9e3779b97f4a7c15ull) & (cap - 1); key[h];
		     h = (h + 1) & (cap - 1))
			;
		key[h] = t->key[i];
		count[h] = t->count[i];
	}
	free(t->key);
	free(t->count);
	t->key = key;
	t->count = count;
	t->cap = cap;
	return 0;
}

static void q5_table_add(struct q5_table *t, uint64_t k)
{
	size_t h;

	if ((t->used + 1) * 2 > t->cap && q5_table_grow(t))
		abort(); /* out of memory in a benchmark's reference: nothing to save */
	for (h = (k * 0x9e3779b97f4a7c15ull) & (t->cap - 1); t->key[h] && t->key[h] != k;
	     h = (h + 1) & (t->cap - 1))
		;
	if (!t->key[h]) {
		t->key[h] = k;
		t->used++;
	}
	t->count[h]++;
}

static void q5_emit_window(struct q5 *q, unsigned i, nx_ref_emit_fn emit, void *ctx)
{
	struct q5_table *t = &q->t[i];
	uint64_t max = 0;
	char line[96], *p;

	for (size_t h = 0; h < t->cap; h++)
		if (t->key[h] && t->count[h] > max)
			max = t->count[h];
	for (size_t h = 0; h < t->cap; h++) {
		if (!t->key[h])
			continue;
		if (t->count[h] == max) {
			p = nx_ref_u(line, t->key[h]);
			*p++ = '\t';
			p = nx_ref_u(p, q->start[i]);
			*p++ = '\t';
			p = nx_ref_u(p, q->start[i] + Q5_SIZE_MS);
			*p++ = '\t';
			p = nx_ref_u(p, t->count[h]);
			emit(ctx, line, (size_t)(p - line));
		}
		t->key[h] = 0;
		t->count[h] = 0;
	}
	t->used = 0;
	q->start[i] = UINT64_MAX;
}

static void *q5_open(void)
{
	struct q5 *q = calloc(1, sizeof(*q));

	if (q)
		for (unsigned i = 0; i < Q5_OPEN; i++)
			q->start[i] = UINT64_MAX;
	return q;
}

/* Emit and clear the open windows that end at or before @t ms, oldest first. */
static void q5_close_until(struct q5 *q, uint64_t t, nx_ref_emit_fn emit, void *ctx)
{
	for (;;) {
		unsigned oldest = Q5_OPEN;

		for (unsigned i = 0; i < Q5_OPEN; i++)
			if (q->start[i] != UINT64_MAX &&
			    (oldest == Q5_OPEN || q->start[i] < q->start[oldest]))
				oldest = i;
		if (oldest == Q5_OPEN || q->start[oldest] + Q5_SIZE_MS > t)
			break;
		q5_emit_window(q, oldest, emit, ctx);
	}
}

static void q5_event(void *st, const struct nx_ref_event *e, nx_ref_emit_fn emit, void *ctx)
{
	struct q5 *q = st;
	uint64_t last = e->time_ms / Q5_SLIDE_MS * Q5_SLIDE_MS; /* the newest window's start */

	if (e->kind != NX_BID)
		return;
	q5_close_until(q, e->time_ms, emit, ctx);
	for (unsigned k = 0; k < Q5_OPEN; k++) {
		uint64_t s = last - (uint64_t)k * Q5_SLIDE_MS;
		unsigned slot = (unsigned)(s / Q5_SLIDE_MS % Q5_OPEN);

		q->start[slot] = s;
		q5_table_add(&q->t[slot], e->auction);
	}
}

static void q5_end(void *st, nx_ref_emit_fn emit, void *ctx)
{
	q5_close_until(st, UINT64_MAX - Q5_SIZE_MS, emit, ctx);
}

static void q5_close(void *st)
{
	struct q5 *q = st;

	for (unsigned i = 0; i < Q5_OPEN; i++) {
		free(q->t[i].key);
		free(q->t[i].count);
	}
	free(q);
}

const struct nx_ref_query nx_ref_q5 = {
    .name = "q5",
    .about = "hot items: per sliding window of 10 s every 2 s, the auction(s) with the most bids",
    .open = q5_open,
    .event = q5_event,
    .end = q5_end,
    .close = q5_close,
};
