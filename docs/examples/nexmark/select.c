/*
 * docs/examples/nexmark/select.c: the operators of NEXMark's stateless
 * queries (Flink's nexmark SQL, q1 and q2), over `nexmark` bid records.
 *
 *   nexmark_currency  q1: each bid with its price in euro cents,
 *                     price x 908 / 1000 (Flink: 0.908 * price), truncated
 *                     to a whole cent; key and event time unchanged;
 *   nexmark_filter    q2: the bids whose auction is a multiple of `modulo`
 *                     (123), as key = auction, value = price.
 *
 * Both fail the job on a record that is not a well-formed bid: a query fed
 * the wrong stream should stop loudly, not output nothing (put
 * `events = bid` on the source). Integer arithmetic keeps the results exact
 * and equal to the reference's (tools/bench/nexmark_ref_select.c).
 * Rejected: a general expression language for map and filter: this is an
 * example of plugin operators, and SQL is what RisingWave and Flink offer
 * for it.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "nexmark.h"

#define BATCH_OUT 64 /* records gathered per shmrun_emit_batch() */

struct select_state {
	uint64_t modulo; /* nexmark_filter */
};

static int select_open(struct shmrun_task *task, void **state)
{
	struct select_state *st = calloc(1, sizeof(*st));

	if (!st)
		return -ENOMEM;
	st->modulo = shmrun_task_param_u64(task, "modulo", 123);
	*state = st;
	return 0;
}

static void select_close(struct shmrun_task *task, void *state)
{
	(void)task;
	free(state);
}

/*
 * q1: @rec's value with the price in euro cents, at @buf (NX_MAP_VALUE_MAX bytes),
 * into *@out. Return: 0, or -EILSEQ (reported) for a record not a bid.
 */
static int currency_one(struct shmrun_task *task, const struct shmrun_record *rec, char *buf,
			struct shmrun_record *out)
{
	struct nx_fields fs;
	uint64_t price;
	char *p;
	size_t head, tail;
	const char *v = rec->value;

	if (!nx_split(rec->value, rec->value_len, &fs) || fs.kind != NX_BID ||
	    !nx_u64(&fs, NX_BID_PRICE, &price) || rec->value_len > NX_MAP_VALUE_MAX - 20)
		return nx_bad_record(task, rec, "a bid");
	head = (size_t)(fs.f[NX_BID_PRICE] - v);
	tail = rec->value_len - head - fs.len[NX_BID_PRICE];
	memcpy(buf, v, head);
	/* price x 908 / 1000, truncated, without overflow for any price */
	p = nx_put_u64(buf + head, price / 1000 * 908 + price % 1000 * 908 / 1000);
	memcpy(p, v + head + fs.len[NX_BID_PRICE], tail);
	*out = *rec;
	out->value = buf;
	out->value_len = (uint32_t)(p + tail - buf);
	return 0;
}

static int currency_batch(struct shmrun_task *task, void *state, const struct shmrun_record *recs,
			  uint32_t n)
{
	(void)state;
	return nx_map_batch(task, recs, n, currency_one);
}

static int currency_process(struct shmrun_task *task, void *state, const struct shmrun_record *rec)
{
	return currency_batch(task, state, rec, 1);
}

/* q2: the bid @rec as (auction, price) into *@out when it passes. */
static int filter_one(struct shmrun_task *task, const struct select_state *st,
		      const struct shmrun_record *rec, struct shmrun_record *out, bool *keep)
{
	struct nx_fields fs;
	uint64_t auction, price;

	if (!nx_split(rec->value, rec->value_len, &fs) || fs.kind != NX_BID ||
	    !nx_u64(&fs, NX_BID_AUCTION, &auction) || !nx_u64(&fs, NX_BID_PRICE, &price))
		return nx_bad_record(task, rec, "a bid");
	*keep = auction % st->modulo == 0;
	if (*keep) {
		out->key = fs.f[NX_BID_AUCTION];
		out->key_len = fs.len[NX_BID_AUCTION];
		out->value = fs.f[NX_BID_PRICE];
		out->value_len = fs.len[NX_BID_PRICE];
		out->event_time_ns = rec->event_time_ns;
	}
	return 0;
}

static int filter_batch(struct shmrun_task *task, void *state, const struct shmrun_record *recs,
			uint32_t n)
{
	struct shmrun_record out[BATCH_OUT];
	uint32_t k = 0;
	int err;

	for (uint32_t i = 0; i < n; i++) {
		bool keep;

		err = filter_one(task, state, &recs[i], &out[k], &keep);
		if (err)
			return err;
		if (keep && ++k == BATCH_OUT) {
			err = shmrun_emit_batch(task, out, k);
			if (err)
				return err;
			k = 0;
		}
	}
	return k ? shmrun_emit_batch(task, out, k) : 0;
}

static int filter_process(struct shmrun_task *task, void *state, const struct shmrun_record *rec)
{
	return filter_batch(task, state, rec, 1);
}

static const struct shmrun_param_def currency_params[] = {
    {0},
};

static const struct shmrun_param_def filter_params[] = {
    {.key = "modulo",
     .type = SHMRUN_PARAM_COUNT,
     .def = "123",
     .min = 1,
     .max = 1000000000,
     .doc = "keep the bids whose auction id is a multiple of this (NEXMark q2: 123)"},
    {0},
};

const struct shmrun_operator nx_currency_op = {
    .size = sizeof(struct shmrun_operator),
    .name = "nexmark_currency",
    .summary = "NEXMark q1: each bid with its price in euro cents (x 0.908, truncated); key and "
	       "event time unchanged; a record not a bid fails the job",
    .params = currency_params,
    .open = select_open,
    .process = currency_process,
    .process_batch = currency_batch,
    .close = select_close,
    .state_version = "1",
};

const struct shmrun_operator nx_filter_op = {
    .size = sizeof(struct shmrun_operator),
    .name = "nexmark_filter",
    .summary = "NEXMark q2: the bids whose auction is a multiple of `modulo`, as key = auction, "
	       "value = price; a record not a bid fails the job",
    .params = filter_params,
    .open = select_open,
    .process = filter_process,
    .process_batch = filter_batch,
    .close = select_close,
    .state_version = "1",
};
