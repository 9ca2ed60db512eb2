/*
 * runtime/ops/count.c: records per key, as key-bound state.
 *
 * Each key's count is an 8-byte value in the task's key-bound state (one hash
 * table per vnode, jemalloc arena; runtime/state.c). `emit = final` (default)
 * emits one record per key at end of input, value = the count in decimal;
 * `emit = update` emits the key's new count at every record. Put a shuffle
 * edge in front (`input = words by key`) so each key is counted in one place.
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

static const struct shmrun_param_def params[] = {
	{.key = "emit", .type = SHMRUN_PARAM_ENUM, .def = "final", .choices = "final update",
	 .doc = "final: one record per key at end of input; update: one per change"},
	{0},
};

const struct shmrun_operator shmrun_op_count = {
	.name = "count",
	.summary = "counts records per key (key-bound state); value = decimal count",
	.params = params,
	.open = count_open,
	.process = count_process,
	.end_of_input = count_end,
};
