/*
 * runtime/ops/count.c: records per key, as key-bound state.
 *
 * Each key's count is an 8-byte value in the task's key-bound state (one hash
 * table per vnode, jemalloc arena; runtime/state.c). `emit = final` (default)
 * emits one record per key at end of input, value = the count in decimal;
 * `emit = update` emits the key's new count at every record. Put a shuffle
 * edge in front (`input = words by key`) so each key is counted in one place.
 *
 * With `emit = final` the shuffle edge in front combines (shmrun/operator.h,
 * struct shmrun_combiner): senders count each key's records themselves and
 * send (key, u64 count) partials, which merge here by addition; the counts,
 * and what a checkpoint holds, are the same.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ops.h"

struct emit_ctx {
	struct shmrun_task *task;
	int err;
};

static int count_open(struct shmrun_task *task, void **state)
{
	const char *emit = shmrun_task_param(task, "emit");

	*state = (void *)(uintptr_t)(emit && strcmp(emit, "update") == 0);
	return 0;
}

static int emit_count(struct shmrun_task *task, const void *key, uint32_t key_len, uint64_t n)
{
	char value[24];
	struct shmrun_record rec = {.key = key, .key_len = key_len, .value = value};

	rec.value_len = (uint32_t)snprintf(value, sizeof(value), "%" PRIu64, n);
	return shmrun_emit(task, &rec);
}

static int count_process(struct shmrun_task *task, void *state, const struct shmrun_record *rec)
{
	uint64_t *n = shmrun_keyed_state(task, rec->key, rec->key_len, sizeof(uint64_t), true);

	if (!n)
		return -ENOMEM;
	++*n;
	return state ? emit_count(task, rec->key, rec->key_len, *n) : 0;
}

static int count_process_batch(struct shmrun_task *task, void *state,
			       const struct shmrun_record *recs, uint32_t n)
{
	if (state) { /* emit = update: one record out per record in */
		for (uint32_t i = 0; i < n; i++) {
			int err = count_process(task, state, &recs[i]);

			if (err)
				return err;
		}
		return 0;
	}
	for (uint32_t i = 0; i < n; i++) {
		uint64_t *c = shmrun_keyed_state(task, recs[i].key, recs[i].key_len,
						 sizeof(uint64_t), true);

		if (!c)
			return -ENOMEM;
		++*c;
	}
	return 0;
}

/* The combiner: a partial is the number of records of the key, a u64. */
static void count_add(void *partial, const struct shmrun_record *rec)
{
	(void)rec;
	++*(uint64_t *)partial;
}

static int count_merge(struct shmrun_task *task, void *state, const struct shmrun_record *partial)
{
	uint64_t *c = shmrun_keyed_state(task, partial->key, partial->key_len, sizeof(uint64_t),
					 true);
	uint64_t add;

	(void)state;
	if (!c)
		return -ENOMEM;
	memcpy(&add, partial->value, sizeof(add));
	*c += add;
	return 0;
}

/* emit = update makes every record's new count the output: no combining then. */
static bool count_combines(const struct shmrun_task *task)
{
	const char *emit = shmrun_task_param(task, "emit");

	return !emit || strcmp(emit, "final") == 0;
}

static const struct shmrun_combiner count_combiner = {
	.partial_bytes = sizeof(uint64_t),
	.add = count_add,
	.merge = count_merge,
	.enabled = count_combines,
};

static int emit_one(void *arg, const void *key, uint32_t key_len, void *value)
{
	struct emit_ctx *c = arg;
	uint64_t n;

	memcpy(&n, value, sizeof(n));
	c->err = emit_count(c->task, key, key_len, n);
	return c->err;
}

static int count_end(struct shmrun_task *task, void *state)
{
	struct emit_ctx c = {.task = task};

	if (state) /* emit = update: everything was emitted already */
		return 0;
	shmrun_keyed_state_foreach(task, emit_one, &c);
	return c.err;
}

/* Check: the records of a key meet in one instance (ops.h). */
static int count_prepare(struct shmrun_task *task)
{
	return shmrun_task_require_by_key(task, "count");
}

static const struct shmrun_param_def params[] = {
	{.key = "emit", .type = SHMRUN_PARAM_ENUM, .def = "final", .choices = "final update",
	 .doc = "final: one record per key at end of input; update: one per change"},
	{0},
};

const struct shmrun_operator shmrun_op_count = {
	.size = sizeof(struct shmrun_operator),
	.name = "count",
	.summary = "counts records per key (key-bound state); value = decimal count",
	.params = params,
	.prepare = count_prepare,
	.open = count_open,
	.process = count_process,
	.process_batch = count_process_batch,
	.combiner = &count_combiner,
	.end_of_input = count_end,
};
