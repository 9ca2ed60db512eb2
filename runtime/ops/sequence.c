/*
 * runtime/ops/sequence.c: generated records for tests and benchmarks.
 *
 * Record i (0 <= i < count) has key "k<i mod keys>" and value i in decimal.
 * The range is cut into pieces of `piece_records` and piece k goes to instance
 * k mod width, as file_source deals file pieces; so the output, as a multiset,
 * does not depend on the width. `rate` limits the whole stage (the worker
 * paces every source, see pace.c).
 *
 * Event time: none (0) by default. With `event_time = now` each record carries
 * the CLOCK_REALTIME time, in ns, at which produce() formatted it, so a sink
 * downstream (latency_sink) can measure how long it took to get there. The
 * clock is read once per record while the batch is filled, just before the
 * batch is emitted; the emit itself is not in the stamp. With `event_time =
 * sequence` record i carries event_time_start + i * event_time_step: a
 * deterministic event time, in order within an instance, for tests and
 * examples of watermarks and windows (docs/event-time.md); past INT64_MAX - 1
 * it stays there.
 *
 * produce() fills an array of up to `budget` records (keys and values in one
 * text buffer beside it, both grown once to the largest budget seen, never per
 * record) and hands them over with one shmrun_emit_batch(), so a batch data
 * path downstream gets whole batches. The records of one batch may span ranges.
 * Rejected: stamping once per batch (all of a batch's records would share the
 * first one's time, hiding the cost of formatting the rest).
 *
 * Per-worker state (rule split): one entry per range still to generate,
 * [u64 next][u64 end], the current one first; ranges.c keeps them (nexmark.c
 * uses the same). On a restore (shmrun_task_restoring()) open() computes no
 * range: the restored entries are all there is to do, and an instance given
 * none has finished.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops.h"
#include "ranges.h"

/* Text of one record: "k" + 20 digits + NUL, and 20 digits + NUL, rounded up. */
#define KEY_BYTES 24
#define VALUE_BYTES 24

struct sequence {
	struct shmrun_range_source src; /* first: its callbacks take the state */
	uint64_t keys;
	bool stamp;	      /* event_time = now */
	bool seq_time;	      /* event_time = sequence */
	int64_t t0, step;     /* seq_time: event_time_start and event_time_step, ns */
};

static int seq_open(struct shmrun_task *task, void **state)
{
	struct sequence *s = calloc(1, sizeof(*s));
	uint64_t count = shmrun_task_param_u64(task, "count", 0);
	uint64_t piece = shmrun_task_param_u64(task, "piece_records", 1u << 20);
	const char *stamp;

	if (!s)
		return -ENOMEM;
	*state = s;
	s->src.slot = KEY_BYTES + VALUE_BYTES;
	s->keys = shmrun_task_param_u64(task, "keys", 1);
	stamp = shmrun_task_param(task, "event_time");
	s->stamp = stamp && strcmp(stamp, "now") == 0;
	s->seq_time = stamp && strcmp(stamp, "sequence") == 0;
	/* bounded by the keys' ranges: start <= 9e12 ms (INT64_MAX ns is about
	 * 9.22e12 ms, year 2262) fits in ns, step <= 365 days; seq_prepare()
	 * refuses a count whose last record would not fit */
	s->t0 = (int64_t)shmrun_task_param_u64(task, "event_time_start", 1000) * 1000000;
	s->step = (int64_t)shmrun_task_param_u64(task, "event_time_step", 1000000);
	return shmrun_ranges_deal(&s->src.ranges, task, count, piece);
}

/* Check: with event_time = sequence, the last record's time fits in ns. */
static int seq_prepare(struct shmrun_task *task)
{
	const char *stamp = shmrun_task_param(task, "event_time");

	if (!stamp || strcmp(stamp, "sequence"))
		return 0;
	return shmrun_ranges_check_times(
	    task, "event_time_start + (count - 1) x event_time_step",
	    (int64_t)shmrun_task_param_u64(task, "event_time_start", 1000) * 1000000,
	    (int64_t)shmrun_task_param_u64(task, "event_time_step", 1000000),
	    shmrun_task_param_u64(task, "count", 0));
}

/* CLOCK_REALTIME, ns since the epoch (what latency_sink compares against). */
static int64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Record @i's event time with event_time = sequence: t0 + i * step, saturated. */
static int64_t seq_event_time(const struct sequence *s, uint64_t i)
{
	int64_t d, t;

	if (i > (uint64_t)INT64_MAX || __builtin_mul_overflow((int64_t)i, s->step, &d) ||
	    __builtin_add_overflow(s->t0, d, &t) || t == INT64_MAX)
		return INT64_MAX - 1;
	return t;
}

static int seq_produce(struct shmrun_task *task, void *state, uint32_t budget)
{
	struct sequence *s = state;
	uint32_t n = 0;
	bool more = true;
	int err;
	const struct shmrun_range *kr = NULL; /* the range kidx belongs to */
	uint64_t kidx = 0;             /* kr->next % keys, kept without a division per record */

	if (shmrun_range_source_reserve(&s->src, task, budget))
		return -ENOMEM;
	while (n < budget) {
		struct shmrun_record *rec = &s->src.recs[n];
		char *key = shmrun_range_source_text(&s->src, n), *value = key + KEY_BYTES;
		struct shmrun_range *r = shmrun_ranges_current(&s->src.ranges);

		if (!r) {
			more = false;
			break;
		}
		rec->key = key;
		rec->value = value;
		key[0] = 'k';
		if (r != kr) {
			kr = r;
			kidx = r->next % s->keys;
		}
		rec->key_len = 1 + shmrun_fmt_u64(key + 1, kidx);
		if (++kidx == s->keys)
			kidx = 0;
		rec->value_len = shmrun_fmt_u64(value, r->next);
		rec->event_time_ns = s->stamp ? realtime_ns() : s->seq_time ? seq_event_time(s, r->next) : 0;
		r->next++;
		n++;
	}
	err = shmrun_range_source_emit(&s->src, task, n);
	return err ? err : more ? 1 : 0;
}

static const struct shmrun_param_def params[] = {
	/* open() computes (k + 1) * piece_records for k up to count / piece_records
	 * + width: these bounds (with width <= 65536) keep it below 2^64 */
	{.key = "count", .type = SHMRUN_PARAM_COUNT, .required = true, .min = 1,
	 .max = 1000000000000000000ull, .doc = "records in all"},
	{.key = "keys", .type = SHMRUN_PARAM_COUNT, .def = "1", .min = 1, .max = UINT32_MAX,
	 .doc = "record i has key k<i mod keys>"},
	{.key = "piece_records", .type = SHMRUN_PARAM_COUNT, .def = "1048576", .min = 1,
	 .max = 1000000000000ull, .doc = "the range is cut into pieces of this many records"},
	{.key = "rate", .type = SHMRUN_PARAM_RATE, .min = 1, .max = 1000000000000ull,
	 .doc = "records per second for the whole stage (default: unlimited)", .tuning = true},
	/* tuning: out of the fingerprint (no state depends on it), so adding the
	 * key refuses no existing checkpoint, and a resume may switch it */
	{.key = "event_time", .type = SHMRUN_PARAM_ENUM, .def = "none",
	 .choices = "none now sequence",
	 .doc = "none: records carry no event time; now: each carries the CLOCK_REALTIME ns at "
		"which it was produced; sequence: record i carries event_time_start + i x "
		"event_time_step",
	 .tuning = true},
	{.key = "event_time_start", .type = SHMRUN_PARAM_COUNT, .def = "1000", .min = 1,
	 .max = 9000000000000ull, /* in ns it must fit an int64_t */
	 .doc = "event_time = sequence: the event time of record 0, ms since the epoch",
	 .tuning = true},
	{.key = "event_time_step", .type = SHMRUN_PARAM_DURATION, .def = "1ms", .min = 1000000,
	 .max = 365ull * 86400 * 1000000000,
	 .doc = "event_time = sequence: event time between record i and record i + 1",
	 .tuning = true},
	{0},
};

const struct shmrun_operator shmrun_op_sequence = {
	.size = sizeof(struct shmrun_operator),
	.name = "sequence",
	.summary = "generates records: key k<i mod keys>, value i in decimal",
	.flags = SHMRUN_OP_SOURCE,
	.params = params,
	.pacing_param = "rate",
	.prepare = seq_prepare,
	.open = seq_open,
	.produce = seq_produce,
	.close = shmrun_range_source_close,
	.pw_rule = SHMRUN_PW_SPLIT,
	.snapshot = shmrun_range_source_snapshot,
	.restore = shmrun_range_source_restore,
};
