/*
 * tools/bench/nexmark_ref_q8.c: the reference of docs/examples/nexmark/q8.conf
 * (nexmark_ref.h): the persons who registered and opened an auction in the
 * same tumbling window of 10 s (aligned to the epoch), one line per such
 * person and window, as nexmark_new_users emits it: person id TAB name TAB
 * window start (ms).
 *
 * The events come in event-time order, so one window is open at a time: its
 * persons in a list, and per id (NEXMark's ids are dense: an array by
 * id - 1000) the last window in which the id sold something. When an event
 * of a later window comes (or the stream ends), the window's persons that
 * sold in it are emitted.
 */
#include <stdlib.h>
#include <string.h>

#include "nexmark_ref.h"

#define Q8_SIZE_MS  10000
#define Q8_FIRST_ID 1000

struct q8_person {
	uint64_t id;
	char name[24];
};

struct q8 {
	uint64_t window; /* the open window's number + 1; 0: none yet */
	uint64_t *sold;	 /* by id - Q8_FIRST_ID: the last window (number + 1) it sold in */
	size_t cap;
	struct q8_person *p; /* the open window's persons */
	size_t n, pcap;
};

static uint64_t *q8_sold(struct q8 *q, uint64_t id)
{
	size_t i = (size_t)(id - Q8_FIRST_ID);

	if (i >= q->cap) {
		size_t cap = q->cap ? q->cap : 4096;
		uint64_t *s;

		while (cap <= i)
			cap *= 2;
		s = realloc(q->sold, cap * sizeof(*s));
		if (!s)
			abort(); /* out of memory in a benchmark's reference: nothing to save */
		memset(s + q->cap, 0, (cap - q->cap) * sizeof(*s));
		q->sold = s;
		q->cap = cap;
	}
	return &q->sold[i];
}

static void q8_close_window(struct q8 *q, nx_ref_emit_fn emit, void *ctx)
{
	char line[96], *t;

	for (size_t i = 0; i < q->n; i++) {
		size_t len = strlen(q->p[i].name);

		if (*q8_sold(q, q->p[i].id) != q->window)
			continue;
		t = nx_ref_u(line, q->p[i].id);
		*t++ = '\t';
		memcpy(t, q->p[i].name, len);
		t += len;
		*t++ = '\t';
		t = nx_ref_u(t, (q->window - 1) * Q8_SIZE_MS);
		emit(ctx, line, (size_t)(t - line));
	}
	q->n = 0;
}

static void *q8_open(void)
{
	return calloc(1, sizeof(struct q8));
}

static void q8_event(void *st, const struct nx_ref_event *e, nx_ref_emit_fn emit, void *ctx)
{
	struct q8 *q = st;
	uint64_t w = e->time_ms / Q8_SIZE_MS + 1;

	if (e->kind == NX_BID)
		return;
	if (w != q->window) {
		q8_close_window(q, emit, ctx);
		q->window = w;
	}
	if (e->kind == NX_AUCTION) {
		*q8_sold(q, e->seller) = w;
		return;
	}
	if (q->n == q->pcap) {
		size_t cap = q->pcap ? q->pcap * 2 : 1024;
		struct q8_person *p = realloc(q->p, cap * sizeof(*p));

		if (!p)
			abort();
		q->p = p;
		q->pcap = cap;
	}
	q->p[q->n].id = e->id;
	memcpy(q->p[q->n].name, e->name, sizeof(q->p[q->n].name));
	q->n++;
}

static void q8_end(void *st, nx_ref_emit_fn emit, void *ctx)
{
	q8_close_window(st, emit, ctx);
}

static void q8_close(void *st)
{
	struct q8 *q = st;

	free(q->sold);
	free(q->p);
	free(q);
}

const struct nx_ref_query nx_ref_q8 = {
    .name = "q8",
    .about = "monitor new users: persons who registered and sold in the same 10 s window",
    .open = q8_open,
    .event = q8_event,
    .end = q8_end,
    .close = q8_close,
};
