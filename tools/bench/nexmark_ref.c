/*
 * tools/bench/nexmark_ref.c: shmrun-bench's own NEXMark generator, in struct
 * form, and the table of reference queries (nexmark_ref.h says why both).
 *
 * The draws, in order, per kind (each from splitmix64 seeded with
 * seed ^ n * 0xd1b54a32d192ed03, after one draw thrown away):
 *   person:  first name, last name, email (7 letters @ 5 letters .com),
 *            credit card (4 groups of 4 digits), city, state;
 *   auction: seller (hot with 3/4, else one of the last 1000 people + 10),
 *            category, initial bid, reserve (initial + another price),
 *            item name (1 to 20 letters), expires;
 *   bid:     auction (hot with 1/2, else one of the last 100 + 10),
 *            bidder (hot with 3/4, else as a seller), price, channel.
 * The bench checks, before it times anything, that a shmrun run's text is
 * nx_ref_format()'s byte for byte.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nexmark_ref.h"

static uint64_t ref_mix(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t ref_below(uint64_t *x, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)ref_mix(x) * n) >> 64);
}

static uint64_t ref_price(uint64_t *x)
{
	return (uint64_t)llround(pow(10.0, (double)(ref_mix(x) >> 11) * 0x1p-53 * 6.0) * 100.0);
}

/* The newest auction (0-based) at event @n; -1 before the first. */
static int64_t ref_last_auction(uint64_t n)
{
	int64_t e = (int64_t)(n / 50), o = (int64_t)(n % 50);

	if (o < 1) {
		e--;
		o = 2;
	} else if (o >= 4) {
		o = 2;
	} else {
		o -= 1;
	}
	return e * 3 + o;
}

static uint64_t ref_next_person(uint64_t n, uint64_t *x)
{
	uint64_t people = n / 50 + 1, active = people < 1000 ? people : 1000;

	return people - active + ref_below(x, active + 10);
}

static const char *const ref_first[] = {"Peter", "Paul",  "Luke",  "John",   "Saul",  "Vicky",
					"Kate",	 "Julie", "Sarah", "Deiter", "Walter"};
static const char *const ref_last[] = {"Shultz", "Abrams", "Spencer", "White", "Bartels",
				       "Walton", "Smith",  "Jones",   "Noris"};
static const char *const ref_cities[] = {"Phoenix",  "Los Angeles", "San Francisco", "Boise",
					 "Portland", "Bend",	    "Redmond",	     "Seattle",
					 "Kent",     "Cheyenne"};
static const char *const ref_states[] = {"AZ", "CA", "ID", "OR", "WA", "WY"};
static const char *const ref_channels[] = {"Google", "Facebook", "Baidu", "Apple"};
#define REF_PICK(x, a) ((a)[ref_below(x, sizeof(a) / sizeof((a)[0]))])

static char *ref_s(char *p, const char *s)
{
	size_t n = strlen(s);

	memcpy(p, s, n);
	return p + n;
}

char *nx_ref_u(char *p, uint64_t v)
{
	char d[20];
	int n = 0;

	do
		d[n++] = (char)('0' + v % 10);
	while (v /= 10);
	while (n)
		*p++ = d[--n];
	return p;
}

static char *ref_word(char *p, uint64_t *x, uint64_t len)
{
	while (len--)
		*p++ = (char)('a' + ref_below(x, 26));
	return p;
}

void nx_ref_make(uint64_t seed, uint64_t n, struct nx_ref_event *e)
{
	uint64_t x = seed ^ (n * 0xd1b54a32d192ed03ull), o = n % 50, lp = n / 50;
	char *p;

	(void)ref_mix(&x);
	e->n = n;
	e->time_ms = 1000000000000ull + n / 10; /* 100 us apart */
	if (o < 1) {
		e->kind = NX_PERSON;
		e->id = 1000 + lp;
		p = ref_s(e->name, REF_PICK(&x, ref_first));
		*p++ = ' ';
		p = ref_s(p, REF_PICK(&x, ref_last));
		*p = '\0';
		p = ref_word(e->email, &x, 7);
		*p++ = '@';
		p = ref_word(p, &x, 5);
		p = ref_s(p, ".com");
		*p = '\0';
		p = e->credit_card;
		for (int g = 0; g < 4; g++) {
			uint64_t d = ref_below(&x, 10000);

			if (g)
				*p++ = ' ';
			for (uint64_t q = 1000; q; q /= 10)
				*p++ = (char)('0' + d / q % 10);
		}
		*p = '\0';
		strcpy(e->city, REF_PICK(&x, ref_cities));
		strcpy(e->state, REF_PICK(&x, ref_states));
	} else if (o < 4) {
		e->kind = NX_AUCTION;
		e->id = 1000 + (uint64_t)ref_last_auction(n);
		e->seller = 1000 + (ref_below(&x, 4) > 0 ? lp / 4 * 4 : ref_next_person(n, &x));
		e->category = 10 + ref_below(&x, 5);
		e->initial_bid = ref_price(&x);
		e->reserve = e->initial_bid + ref_price(&x);
		p = ref_word(e->item_name, &x, 1 + ref_below(&x, 20));
		*p = '\0';
		/* 2 x 1666 events x 100 us, in ms, + 1 */
		e->expires =
		    e->time_ms + 1 + ref_below(&x, 2ull * 100000 * (100 * 50 / 3) / 1000000 + 1);
	} else {
		e->kind = NX_BID;
		if (ref_below(&x, 2) > 0) {
			e->auction = (uint64_t)ref_last_auction(n) / 2 * 2;
		} else {
			int64_t hi = ref_last_auction(n), lo = hi - 100 < 0 ? 0 : hi - 100;

			e->auction = (uint64_t)lo + ref_below(&x, (uint64_t)(hi - lo) + 11);
		}
		e->auction += 1000;
		e->bidder = 1000 + (ref_below(&x, 4) > 0 ? lp / 4 * 4 + 1 : ref_next_person(n, &x));
		e->price = ref_price(&x);
		e->channel = REF_PICK(&x, ref_channels);
	}
}

/* TAB and decimal @v, or TAB and @str, at @p; return the end. */
static char *ref_tu(char *p, uint64_t v)
{
	*p++ = '\t';
	return nx_ref_u(p, v);
}

static char *ref_ts(char *p, const char *str)
{
	*p++ = '\t';
	return ref_s(p, str);
}

char *nx_ref_format(const struct nx_ref_event *e, char *p)
{
	switch (e->kind) {
	case NX_PERSON:
		p = ref_ts(nx_ref_u(p, e->id), "person");
		p = ref_tu(ref_tu(p, e->n), e->id);
		p = ref_ts(ref_ts(ref_ts(p, e->name), e->email), e->credit_card);
		p = ref_tu(ref_ts(ref_ts(p, e->city), e->state), e->time_ms);
		break;
	case NX_AUCTION:
		p = ref_ts(nx_ref_u(p, e->id), "auction");
		p = ref_ts(ref_tu(ref_tu(p, e->n), e->id), e->item_name);
		p = ref_tu(ref_tu(ref_tu(p, e->initial_bid), e->reserve), e->time_ms);
		p = ref_tu(ref_tu(ref_tu(p, e->expires), e->seller), e->category);
		break;
	case NX_BID:
		p = ref_ts(nx_ref_u(p, e->auction), "bid");
		p = ref_tu(ref_tu(ref_tu(p, e->n), e->auction), e->bidder);
		p = ref_tu(ref_ts(ref_tu(p, e->price), e->channel), e->time_ms);
		break;
	}
	*p++ = '\n';
	return p;
}

/* In name order; a query's file defines its struct (nexmark_ref.h). */
const struct nx_ref_query *const nx_ref_queries[] = {
    &nx_ref_q0, &nx_ref_q1, &nx_ref_q2, &nx_ref_q3, &nx_ref_q5,
    &nx_ref_q8, &nx_ref_q4, &nx_ref_q7, NULL,
};

const struct nx_ref_query *nx_ref_query_find(const char *name)
{
	for (unsigned i = 0; nx_ref_queries[i]; i++)
		if (!strcmp(nx_ref_queries[i]->name, name))
			return nx_ref_queries[i];
	return NULL;
}

int nx_ref_run(const struct nx_ref_query *q, uint64_t seed, uint64_t count, nx_ref_emit_fn emit,
	       void *ctx)
{
	struct nx_ref_event e;
	void *st = q->open();

	if (!st)
		return -ENOMEM;
	for (uint64_t n = 0; n < count; n++) {
		nx_ref_make(seed, n, &e);
		q->event(st, &e, emit, ctx);
	}
	if (q->end)
		q->end(st, emit, ctx);
	q->close(st);
	return 0;
}
