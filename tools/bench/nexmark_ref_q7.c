/*
 * tools/bench/nexmark_ref_q7.c: the reference of docs/examples/nexmark/q7.conf
 * (nexmark_ref.h): NEXMark q7, the highest bid: per tumbling window of 10 s
 * of event time ([k x 10 s, (k + 1) x 10 s), aligned to the epoch), every bid
 * with the window's highest price, as auction TAB price TAB bidder TAB
 * date_time.
 *
 * The events come in event-time order, so one window is open at a time: its
 * highest price and the bids with it, emitted when a bid of a later window
 * (or the end) comes.
 */
#include <stdlib.h>

#include "nexmark_ref.h"

#define Q7_SIZE_MS 10000

struct q7_bid {
	uint64_t auction, bidder, time_ms;
};

struct q7 {
	uint64_t start; /* the open window's, ms; UINT64_MAX: none */
	uint64_t max;
	size_t n, cap;
	struct q7_bid *bids;
};

static void *q7_open(void)
{
	struct q7 *q = calloc(1, sizeof(*q));

	if (q)
		q->start = UINT64_MAX;
	return q;
}

static void q7_flush(struct q7 *q, nx_ref_emit_fn emit, void *ctx)
{
	char line[96], *p;

	for (size_t i = 0; i < q->n; i++) {
		p = nx_ref_u(line, q->bids[i].auction);
		*p++ = '\t';
		p = nx_ref_u(p, q->max);
		*p++ = '\t';
		p = nx_ref_u(p, q->bids[i].bidder);
		*p++ = '\t';
		p = nx_ref_u(p, q->bids[i].time_ms);
		emit(ctx, line, (size_t)(p - line));
	}
	q->n = 0;
}

static void q7_event(void *st, const struct nx_ref_event *e, nx_ref_emit_fn emit, void *ctx)
{
	struct q7 *q = st;
	uint64_t start = e->time_ms / Q7_SIZE_MS * Q7_SIZE_MS;

	if (e->kind != NX_BID)
		return;
	if (start != q->start) {
		q7_flush(q, emit, ctx);
		q->start = start;
	}
	if (q->n && e->price < q->max)
		return;
	if (q->n && e->price > q->max)
		q->n = 0;
	q->max = e->price;
	if (q->n == q->cap) {
		size_t cap = q->cap ? q->cap * 2 : 8;
		struct q7_bid *b = realloc(q->bids, cap * sizeof(*b));

		if (!b)
			abort(); /* out of memory in a benchmark's reference */
		q->bids = b;
		q->cap = cap;
	}
	q->bids[q->n++] = (struct q7_bid){e->auction, e->bidder, e->time_ms};
}

static void q7_end(void *st, nx_ref_emit_fn emit, void *ctx)
{
	q7_flush(st, emit, ctx);
}

static void q7_close(void *st)
{
	struct q7 *q = st;

	free(q->bids);
	free(q);
}

const struct nx_ref_query nx_ref_q7 = {
    .name = "q7",
    .about = "highest bid: the bids with the top price per tumbling window of 10 s",
    .open = q7_open,
    .event = q7_event,
    .end = q7_end,
    .close = q7_close,
};
