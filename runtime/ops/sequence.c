/*
 * runtime/ops/sequence.c: generated records for tests and benchmarks.
 *
 * Record i (0 <= i < count) has key "k<i mod keys>" and value i in decimal.
 * The range is cut into pieces of `piece_records` and piece k goes to instance
 * k mod width, as file_source deals file pieces; so the output, as a multiset,
 * does not depend on the width. `rate` limits the whole stage (the worker
 * paces every source, see pace.c).
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

#include "ops.h"

struct range {
	uint64_t next, end;
};

struct sequence {
	uint64_t keys;
	struct range *ranges; /* this instance's, in order */
	uint32_t n, cap, cur;
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

	if (!s)
		return -ENOMEM;
	*state = s;
	s->keys = shmrun_task_param_u64(task, "keys", 1);
	if (shmrun_task_restoring(task))
		return 0; /* the ranges are the restored entries, if any */
	for (uint64_t k = shmrun_task_instance(task); k * piece < count; k += width) {
		uint64_t end = (k + 1) * piece < count ? (k + 1) * piece : count;

		if (add_range(s, k * piece, end))
			return -ENOMEM;
	}
	return 0;
}

static int seq_produce(struct shmrun_task *task, void *state, uint32_t budget)
{
	struct sequence *s = state;
	char key[24], value[24];

	while (budget-- > 0) {
		struct shmrun_record rec = {.key = key, .value = value};
		struct range *r;
		int err;

		while (s->cur < s->n && s->ranges[s->cur].next >= s->ranges[s->cur].end)
			s->cur++;
		if (s->cur == s->n)
			return 0;
		r = &s->ranges[s->cur];
		rec.key_len = (uint32_t)snprintf(key, sizeof(key), "k%" PRIu64, r->next % s->keys);
		rec.value_len = (uint32_t)snprintf(value, sizeof(value), "%" PRIu64, r->next);
		r->next++;
		shmrun_task_count(task, SHMRUN_COUNT_RECORDS_IN, 1);
		err = shmrun_emit(task, &rec);
		if (err)
			return err;
	}
	return 1;
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
	if (s)
		free(s->ranges);
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
	{0},
};

const struct shmrun_operator shmrun_op_sequence = {
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
