/*
 * runtime/ops/sequence.c: generated records for tests and benchmarks.
 *
 * Record i (0 <= i < count) has key "k<i mod keys>" and value i in decimal.
 * The range is cut into pieces of `piece_records` and piece k goes to instance
 * k mod width, as file_source deals file pieces; so the output, as a multiset,
 * does not depend on the width. `rate` limits the whole stage.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ops.h"

struct sequence {
	uint64_t count, keys, piece;
	uint64_t next_piece; /* global index of the piece being generated */
	uint64_t i;          /* next record of that piece */
	uint32_t width, me;
	double per_ns;
	int64_t start_ns;
	uint64_t emitted;
};

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int seq_open(struct shmrun_task *task, void **state)
{
	struct sequence *s = calloc(1, sizeof(*s));
	uint64_t rate = shmrun_task_param_u64(task, "rate", 0);

	if (!s)
		return -ENOMEM;
	s->count = shmrun_task_param_u64(task, "count", 0);
	s->keys = shmrun_task_param_u64(task, "keys", 1);
	s->piece = shmrun_task_param_u64(task, "piece_records", 1u << 20);
	s->width = shmrun_task_width(task);
	s->me = shmrun_task_instance(task);
	s->next_piece = s->me;
	s->i = s->next_piece * s->piece;
	if (rate)
		s->per_ns = (double)rate / s->width / 1e9;
	s->start_ns = now_ns();
	*state = s;
	return 0;
}

static int seq_produce(struct shmrun_task *task, void *state, uint32_t budget)
{
	struct sequence *s = state;
	char key[24], value[24];

	if (s->per_ns > 0) {
		double allowed = (double)(now_ns() - s->start_ns) * s->per_ns + 1;

		if ((double)s->emitted >= allowed)
			return 1;
		if ((double)budget > allowed - (double)s->emitted)
			budget = (uint32_t)(allowed - (double)s->emitted) + 1;
	}
	while (budget-- > 0) {
		struct shmrun_record rec = {.key = key, .value = value};
		uint64_t piece_end;
		int err;

		if (s->i >= s->count)
			return 0;
		rec.key_len = (uint32_t)snprintf(key, sizeof(key), "k%" PRIu64, s->i % s->keys);
		rec.value_len = (uint32_t)snprintf(value, sizeof(value), "%" PRIu64, s->i);
		s->i++;
		s->emitted++;
		piece_end = (s->next_piece + 1) * s->piece;
		if (s->i == piece_end || s->i == s->count) {
			s->next_piece += s->width;
			s->i = s->next_piece * s->piece;
		}
		shmrun_task_count(task, SHMRUN_COUNT_RECORDS_IN, 1);
		err = shmrun_emit(task, &rec);
		if (err)
			return err;
	}
	return s->i < s->count;
}

static void seq_close(struct shmrun_task *task, void *state)
{
	(void)task;
	free(state);
}

static const struct shmrun_param_def params[] = {
	{.key = "count", .type = SHMRUN_PARAM_COUNT, .required = true, .min = 1,
	 .max = UINT64_MAX / 4, .doc = "records in all"},
	{.key = "keys", .type = SHMRUN_PARAM_COUNT, .def = "1", .min = 1, .max = UINT32_MAX,
	 .doc = "record i has key k<i mod keys>"},
	{.key = "piece_records", .type = SHMRUN_PARAM_COUNT, .def = "1048576", .min = 1,
	 .max = UINT64_MAX / 4, .doc = "the range is cut into pieces of this many records"},
	{.key = "rate", .type = SHMRUN_PARAM_RATE, .min = 1, .max = 1000000000000ull,
	 .doc = "records per second for the whole stage (default: unlimited)"},
	{0},
};

const struct shmrun_operator shmrun_op_sequence = {
	.name = "sequence",
	.summary = "generates records: key k<i mod keys>, value i in decimal",
	.flags = SHMRUN_OP_SOURCE,
	.params = params,
	.open = seq_open,
	.produce = seq_produce,
	.close = seq_close,
};
