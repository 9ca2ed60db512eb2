/*
 * tools/bench/nexmark_ref_q4.c: the reference of docs/examples/nexmark/q4.conf
 * (nexmark_ref.h): NEXMark q4, the average closing price per category: per
 * auction the highest price of its bids with date_time in [its date_time,
 * its expires] (ms, both ends included), auctions without such a bid left
 * out; per category the integer average of those prices, rounded down
 * (floor(sum / count)), one line per category at the end:
 * category TAB average.
 *
 * The events come in event-time order and auction ids are dense (1000 + k
 * for the k-th auction), so the open auctions live in a ring indexed by id:
 * an auction 4096 ids old expired long ago (expiry is within 334 ms, 4096
 * auctions take 6.8 s; checked, the run aborts otherwise) and is folded into
 * its category when its slot is reused, or at the end. A bid can name an
 * auction not opened yet (the generator's lead of 10); it can count only if
 * that auction opens within the same ms (BETWEEN is inclusive), so such bids
 * are kept for the current ms only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nexmark_ref.h"

#define Q4_RING	   4096u /* a power of two */
#define Q4_PENDING 256u

struct q4_auction {
	uint64_t id; /* 0: slot empty */
	uint64_t category, opened, expires, max;
	int has; /* a bid in range */
};

struct q4_category {
	uint64_t category, count;
	unsigned __int128 sum;
};

struct q4 {
	struct q4_auction ring[Q4_RING];
	uint64_t newest; /* the highest auction id seen; 0: none */
	/* bids of the current ms naming auctions not opened yet */
	uint64_t pending_ms;
	unsigned npending;
	struct {
		uint64_t auction, price;
	} pending[Q4_PENDING];
	struct q4_category cat[64];
	unsigned ncat;
};

static void *q4_open(void)
{
	return calloc(1, sizeof(struct q4));
}

/* Fold the auction of @a into its category's average. */
static void q4_fold(struct q4 *q, const struct q4_auction *a)
{
	unsigned i;

	if (!a->id || !a->has)
		return;
	for (i = 0; i < q->ncat && q->cat[i].category != a->category; i++)
		;
	if (i == q->ncat) {
		if (q->ncat == sizeof(q->cat) / sizeof(q->cat[0]))
			abort(); /* NEXMark has 5 categories */
		q->cat[q->ncat++] = (struct q4_category){.category = a->category};
	}
	q->cat[i].count++;
	q->cat[i].sum += a->max;
}

static void q4_event(void *st, const struct nx_ref_event *e, nx_ref_emit_fn emit, void *ctx)
{
	struct q4 *q = st;
	struct q4_auction *a;

	(void)emit;
	(void)ctx;
	if (e->time_ms != q->pending_ms) {
		q->pending_ms = e->time_ms;
		q->npending = 0;
	}
	if (e->kind == NX_AUCTION) {
		a = &q->ring[e->id & (Q4_RING - 1)];
		if (a->id) {
			if (a->expires >= e->time_ms) {
				fprintf(stderr,
					"q4 reference: auction %llu still open when its slot "
					"is reused\n",
					(unsigned long long)a->id);
				abort();
			}
			q4_fold(q, a);
		}
		*a = (struct q4_auction){.id = e->id,
					 .category = e->category,
					 .opened = e->time_ms,
					 .expires = e->expires};
		for (unsigned i = 0; i < q->npending; i++)
			if (q->pending[i].auction == e->id && e->time_ms <= e->expires &&
			    (!a->has || q->pending[i].price > a->max)) {
				a->max = q->pending[i].price;
				a->has = 1;
			}
		if (e->id > q->newest)
			q->newest = e->id;
	} else if (e->kind == NX_BID) {
		if (e->auction > q->newest || !q->newest) {
			if (q->npending == Q4_PENDING)
				abort(); /* at most 10 events per ms */
			q->pending[q->npending].auction = e->auction;
			q->pending[q->npending++].price = e->price;
			return;
		}
		a = &q->ring[e->auction & (Q4_RING - 1)];
		/* a slot holding another id: the auction expired and was folded */
		if (a->id == e->auction && e->time_ms >= a->opened && e->time_ms <= a->expires &&
		    (!a->has || e->price > a->max)) {
			a->max = e->price;
			a->has = 1;
		}
	}
}

static void q4_end(void *st, nx_ref_emit_fn emit, void *ctx)
{
	struct q4 *q = st;
	char line[64], *p;

	for (unsigned i = 0; i < Q4_RING; i++)
		q4_fold(q, &q->ring[i]);
	for (unsigned i = 0; i < q->ncat; i++) {
		p = nx_ref_u(line, q->cat[i].category);
		*p++ = '\t';
		p = nx_ref_u(p, (uint64_t)(q->cat[i].sum / q->cat[i].count));
		emit(ctx, line, (size_t)(p - line));
	}
}

static void q4_close(void *st)
{
	free(st);
}

const struct nx_ref_query nx_ref_q4 = {
    .name = "q4",
    .about = "average closing price per category (integer, rounded down)",
    .open = q4_open,
    .event = q4_event,
    .end = q4_end,
    .close = q4_close,
};
