/*
 * tools/bench/nexmark_ref_q3.c: the reference of docs/examples/nexmark/q3.conf
 * (nexmark_ref.h): the auctions of category 10 joined with their sellers who
 * live in OR, ID or CA, one line per such auction, as nexmark_local_items
 * emits it: person id TAB name TAB city TAB state TAB auction id.
 *
 * NEXMark's person ids are dense (1000 + n / 50), so a single-threaded
 * program indexes arrays by id - 1000 rather than hashing: per id whether
 * the person came (and whether it lives in one of the states, with its
 * name, city and state), and the category-10 auctions that came before it,
 * as a chain through a pool. An auction whose seller came is emitted at once
 * (or dropped, for another state); one that came first waits in its
 * seller's chain, emitted when the person comes. The same multiset as the
 * join's whatever the order, since each auction meets its seller once.
 */
#include <stdlib.h>
#include <string.h>

#include "nexmark_ref.h"

#define Q3_CATEGORY 10
#define Q3_FIRST_ID 1000
#define Q3_NONE	    UINT32_MAX

struct q3_person {
	uint8_t came, kept; /* kept: in one of the states */
	char name[24], city[16], state[4];
	uint32_t waiting; /* the first waiting auction in the pool, Q3_NONE: none */
};

struct q3_wait {
	uint64_t auction;
	uint32_t next;
};

struct q3 {
	struct q3_person *p; /* by id - Q3_FIRST_ID */
	size_t cap;
	struct q3_wait *pool;
	uint32_t used, pool_cap, free; /* free: a chain of returned slots */
};

static struct q3_person *q3_at(struct q3 *q, uint64_t id)
{
	size_t i = (size_t)(id - Q3_FIRST_ID);

	if (i >= q->cap) {
		size_t cap = q->cap ? q->cap : 4096;
		struct q3_person *p;

		while (cap <= i)
			cap *= 2;
		p = realloc(q->p, cap * sizeof(*p));
		if (!p)
			abort(); /* out of memory in a benchmark's reference: nothing to save */
		for (size_t k = q->cap; k < cap; k++) {
			memset(&p[k], 0, sizeof(p[k]));
			p[k].waiting = Q3_NONE;
		}
		q->p = p;
		q->cap = cap;
	}
	return &q->p[i];
}

static void q3_row(const struct q3_person *p, uint64_t id, uint64_t auction, nx_ref_emit_fn emit,
		   void *ctx)
{
	char line[128], *t = nx_ref_u(line, id);
	size_t n;

	*t++ = '\t';
	n = strlen(p->name);
	memcpy(t, p->name, n);
	t += n;
	*t++ = '\t';
	n = strlen(p->city);
	memcpy(t, p->city, n);
	t += n;
	*t++ = '\t';
	n = strlen(p->state);
	memcpy(t, p->state, n);
	t += n;
	*t++ = '\t';
	t = nx_ref_u(t, auction);
	emit(ctx, line, (size_t)(t - line));
}

static void *q3_open(void)
{
	struct q3 *q = calloc(1, sizeof(*q));

	if (q)
		q->free = Q3_NONE;
	return q;
}

static void q3_event(void *st, const struct nx_ref_event *e, nx_ref_emit_fn emit, void *ctx)
{
	struct q3 *q = st;
	struct q3_person *p;

	if (e->kind == NX_PERSON) {
		p = q3_at(q, e->id);
		p->came = 1;
		p->kept =
		    !strcmp(e->state, "OR") || !strcmp(e->state, "ID") || !strcmp(e->state, "CA");
		memcpy(p->name, e->name, sizeof(p->name));
		memcpy(p->city, e->city, sizeof(p->city));
		memcpy(p->state, e->state, sizeof(p->state));
		while (p->waiting != Q3_NONE) {
			uint32_t w = p->waiting;

			if (p->kept)
				q3_row(p, e->id, q->pool[w].auction, emit, ctx);
			p->waiting = q->pool[w].next;
			q->pool[w].next = q->free;
			q->free = w;
		}
	} else if (e->kind == NX_AUCTION && e->category == Q3_CATEGORY) {
		uint32_t w;

		p = q3_at(q, e->seller);
		if (p->came) {
			if (p->kept)
				q3_row(p, e->seller, e->id, emit, ctx);
			return;
		}
		if (q->free != Q3_NONE) {
			w = q->free;
			q->free = q->pool[w].next;
		} else {
			if (q->used == q->pool_cap) {
				uint32_t cap = q->pool_cap ? q->pool_cap * 2 : 1024;
				struct q3_wait *pool = realloc(q->pool, cap * sizeof(*pool));

				if (!pool)
					abort();
				q->pool = pool;
				q->pool_cap = cap;
			}
			w = q->used++;
		}
		q->pool[w].auction = e->id;
		q->pool[w].next = p->waiting;
		p->waiting = w;
	}
}

static void q3_end(void *st, nx_ref_emit_fn emit, void *ctx)
{
	(void)st; /* auctions still waiting have no seller: no row */
	(void)emit;
	(void)ctx;
}

static void q3_close(void *st)
{
	struct q3 *q = st;

	free(q->p);
	free(q->pool);
	free(q);
}

const struct nx_ref_query nx_ref_q3 = {
    .name = "q3",
    .about = "local item suggestion: category-10 auctions joined with their sellers in OR, ID, CA",
    .open = q3_open,
    .event = q3_event,
    .end = q3_end,
    .close = q3_close,
};
