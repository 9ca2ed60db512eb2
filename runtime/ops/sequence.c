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
 * [u64 next][u64 end], the current one first. On a restore
 * (shmrun_task_restoring()) open() computes no range: the restored entries
 * are all there is to do, and an instance given none has finished.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops.h"

/* Text of one record: "k" + 20 digits + NUL, and 20 digits + NUL, rounded up. */
#define KEY_BYTES 24
#define VALUE_BYTES 24

struct range {
	uint64_t next, end;
};

struct sequence {
	uint64_t keys;
	bool stamp;	      /* event_time = now */
	bool seq_time;	      /* event_time = sequence */
	int64_t t0, step;     /* seq_time: event_time_start and event_time_step, ns */
	struct range *ranges; /* this instance's, in order */
	uint32_t n, cap, cur;
	/* produce()'s batch: recs[i] points into text[i] (KEY_BYTES + VALUE_BYTES) */
	struct shmrun_record *recs;
	char (*text)[KEY_BYTES + VALUE_BYTES];
	uint32_t recs_cap, text_cap;
};

static int add_range(struct sequence *s, uint64_t next, uint64_t end)
{
	if (shmrun_grow_u32(&s->ranges, &s->cap, (size_t)s->n + 1, sizeof(*s->ranges), 16))
		return -ENOMEM;
	s->ranges[s->n++] = (struct range){next, end};
	return 0;
}

static int seq_open(struct shmrun_task *task, void **state)
{
	struct sequence *s = calloc(1, sizeof(*s));
	uint64_t count = shmrun_task_param_u64(task, "count", 0);
	uint64_t piece = shmrun_task_param_u64(task, "piece_records", 1u << 20);
	uint32_t width = shmrun_task_width(task);
	const char *stamp;

	if (!s)
		return -ENOMEM;
	*state = s;
	s->keys = shmrun_task_param_u64(task, "keys", 1);
	stamp = shmrun_task_param(task, "event_time");
	s->stamp = stamp && strcmp(stamp, "now") == 0;
	s->seq_time = stamp && strcmp(stamp, "sequence") == 0;
	/* bounded by the keys' ranges: start <= 1e15 ms fits in ns, step <= 365 days */
	s->t0 = (int64_t)shmrun_task_param_u64(task, "event_time_start", 1000) * 1000000;
	s->step = (int64_t)shmrun_task_param_u64(task, "event_time_step", 1000000);
	if (shmrun_task_restoring(task))
		return 0; /* the ranges are the restored entries, if any */
	for (uint64_t k = shmrun_task_instance(task); k * piece < count; k += width) {
		uint64_t end = (k + 1) * piece < count ? (k + 1) * piece : count;

		if (add_range(s, k * piece, end))
			return -ENOMEM;
	}
	return 0;
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

/*
 * @v in decimal at @out (at most 20 bytes, no NUL), as "%" PRIu64 writes it,
 * without snprintf's cost (it was two thirds of a record's): the length
 * first, then two digits at a time from the end. Return: bytes.
 */
static uint32_t dec(char *out, uint64_t v)
{
	static const char pairs[201] = "00010203040506070809101112131415161718192021222324"
				       "25262728293031323334353637383940414243444546474849"
				       "50515253545556575859606162636465666768697071727374"
				       "75767778798081828384858687888990919293949596979899";
	static const uint64_t p10[20] = {
		1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull, 10000000ull,
		100000000ull, 1000000000ull, 10000000000ull, 100000000000ull, 1000000000000ull,
		10000000000000ull, 100000000000000ull, 1000000000000000ull, 10000000000000000ull,
		100000000000000000ull, 1000000000000000000ull, 10000000000000000000ull};
	uint32_t n = 1;

	while (n < 20 && v >= p10[n])
		n++;
	for (uint32_t i = n;;) {
		if (v >= 10) {
			uint32_t d = (uint32_t)(v % 100) * 2;

			out[--i] = pairs[d + 1];
			out[--i] = pairs[d];
			v /= 100;
			if (v == 0 && i == 0)
				break;
		} else {
			out[--i] = (char)('0' + v);
			break;
		}
	}
	return n;
}

static int seq_produce(struct shmrun_task *task, void *state, uint32_t budget)
{
	struct sequence *s = state;
	uint32_t n = 0;
	bool more = true;
	const struct range *kr = NULL; /* the range kidx belongs to */
	uint64_t kidx = 0;             /* kr->next % keys, kept without a division per record */

	/* both grow together (a failed second grow leaves the first larger) */
	if ((budget > s->recs_cap || budget > s->text_cap) &&
	    (shmrun_grow_u32(&s->recs, &s->recs_cap, budget, sizeof(*s->recs), 64) ||
	     shmrun_grow_u32(&s->text, &s->text_cap, budget, sizeof(*s->text), 64))) {
		shmrun_task_error(task, "out of memory for a batch of %u records", budget);
		return -ENOMEM;
	}
	while (n < budget) {
		struct shmrun_record *rec = &s->recs[n];
		char *key = s->text[n], *value = key + KEY_BYTES;
		struct range *r;

		while (s->cur < s->n && s->ranges[s->cur].next >= s->ranges[s->cur].end)
			s->cur++;
		if (s->cur == s->n) {
			more = false;
			break;
		}
		r = &s->ranges[s->cur];
		rec->key = key;
		rec->value = value;
		key[0] = 'k';
		if (r != kr) {
			kr = r;
			kidx = r->next % s->keys;
		}
		rec->key_len = 1 + dec(key + 1, kidx);
		if (++kidx == s->keys)
			kidx = 0;
		rec->value_len = dec(value, r->next);
		rec->event_time_ns = s->stamp ? realtime_ns() : s->seq_time ? seq_event_time(s, r->next) : 0;
		r->next++;
		n++;
	}
	if (n) {
		int err;

		shmrun_task_count(task, SHMRUN_COUNT_RECORDS_IN, n);
		err = shmrun_emit_batch(task, s->recs, n);
		if (err)
			return err;
	}
	return more ? 1 : 0;
}

static int seq_snapshot(struct shmrun_task *task, void *state, uint64_t epoch)
{
	struct sequence *s = state;

	(void)epoch;
	for (uint32_t i = s->cur; i < s->n; i++) {
		int err;

		if (s->ranges[i].next >= s->ranges[i].end)
			continue;
		err = shmrun_pw_add(task, &s->ranges[i], sizeof(s->ranges[i]));
		if (err)
			return err;
	}
	return 0;
}

static int seq_restore(struct shmrun_task *task, void *state, const void *entry, uint32_t len)
{
	struct sequence *s = state;
	struct range r;

	if (len != sizeof(r)) {
		shmrun_task_error(task, "restored range is malformed (%u bytes)", len);
		return -EBADMSG;
	}
	memcpy(&r, entry, sizeof(r));
	return add_range(s, r.next, r.end);
}

static void seq_close(struct shmrun_task *task, void *state)
{
	struct sequence *s = state;

	(void)task;
	if (s) {
		free(s->ranges);
		free(s->recs);
		free(s->text);
	}
	free(s);
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
	 .max = 1000000000000000ull,
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
	.open = seq_open,
	.produce = seq_produce,
	.close = seq_close,
	.pw_rule = SHMRUN_PW_SPLIT,
	.snapshot = seq_snapshot,
	.restore = seq_restore,
};
