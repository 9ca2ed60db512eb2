/*
 * tools/bench/nexmark_ref_select.c: the reference of NEXMark's stateless
 * queries (nexmark_ref.h), as Flink's nexmark SQL defines them:
 *
 *   q0  pass-through: every bid as the source emits it;
 *   q1  currency conversion: every bid with its price in euro cents,
 *       price x 908 / 1000, truncated (Flink: 0.908 * price);
 *   q2  selection: auction and price of the bids whose auction % 123 == 0.
 *
 * Output lines are docs/examples/nexmark/qN.conf's file_sink lines (key TAB
 * value): the key is the bid's auction in all three.
 */
#include <stdlib.h>
#include <string.h>

#include "nexmark_ref.h"

/* The queries keep no state: open() returns a non-NULL token. */
static char nx_no_state;

static void *sel_open(void)
{
	return &nx_no_state;
}

static void sel_close(void *st)
{
	(void)st;
}

static void q0_event(void *st, const struct nx_ref_event *e, nx_ref_emit_fn emit, void *ctx)
{
	char line[NX_REF_LINE_MAX], *end;

	(void)st;
	if (e->kind != NX_BID)
		return;
	end = nx_ref_format(e, line);
	emit(ctx, line, (size_t)(end - 1 - line)); /* without the NL */
}

static void q1_event(void *st, const struct nx_ref_event *e, nx_ref_emit_fn emit, void *ctx)
{
	struct nx_ref_event eur;
	char line[NX_REF_LINE_MAX], *end;

	(void)st;
	if (e->kind != NX_BID)
		return;
	eur = *e;
	eur.price = e->price * 908 / 1000;
	end = nx_ref_format(&eur, line);
	emit(ctx, line, (size_t)(end - 1 - line));
}

static void q2_event(void *st, const struct nx_ref_event *e, nx_ref_emit_fn emit, void *ctx)
{
	char line[64], *p;

	(void)st;
	if (e->kind != NX_BID || e->auction % 123)
		return;
	p = nx_ref_u(line, e->auction);
	*p++ = '\t';
	p = nx_ref_u(p, e->price);
	emit(ctx, line, (size_t)(p - line));
}

const struct nx_ref_query nx_ref_q0 = {
    .name = "q0",
    .about = "pass-through: every bid",
    .open = sel_open,
    .event = q0_event,
    .close = sel_close,
};

const struct nx_ref_query nx_ref_q1 = {
    .name = "q1",
    .about = "currency conversion: every bid, its price in euro cents (x 0.908)",
    .open = sel_open,
    .event = q1_event,
    .close = sel_close,
};

const struct nx_ref_query nx_ref_q2 = {
    .name = "q2",
    .about = "selection: auction and price of the bids with auction % 123 == 0",
    .open = sel_open,
    .event = q2_event,
    .close = sel_close,
};
