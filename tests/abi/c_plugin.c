/*
 * tests/abi/c_plugin.c: the smallest plugin in C11, which
 * tests/integration/public_headers.sh compiles against the public headers
 * with -std=c11 -pedantic -Wall -Wextra -Werror -fvisibility=hidden, and
 * tests/integration/install.sh against an installed prefix with
 * $(pkg-config --cflags --libs shmrun). The point is that it compiles and
 * exports shmrun_plugin, not what it does: an operator "abi_c_upper" that
 * emits each record with its key's ASCII letters upper-cased.
 *
 * It calls a function of each public header a plugin may use (operator.h's
 * task and emit functions, runtime.h's log), so that an undeclared or
 * misdeclared one fails here.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <shmrun/operator.h>
#include <shmrun/runtime.h>

static const struct shmrun_param_def upper_params[] = {
	{.key = "max_key", .type = SHMRUN_PARAM_COUNT, .def = "64", .min = 1, .max = 4096,
	 .doc = "longest key upper-cased, bytes"},
	{.key = NULL},
};

struct upper {
	uint64_t max_key;
	char *buf;
};

static int upper_open(struct shmrun_task *task, void **state)
{
	struct upper *u = calloc(1, sizeof(*u));

	if (!u)
		return -ENOMEM;
	u->max_key = shmrun_task_param_u64(task, "max_key", 64);
	u->buf = malloc(u->max_key);
	if (!u->buf) {
		free(u);
		return -ENOMEM;
	}
	shmrun_log(SHMRUN_LOG_DEBUG, "abi_c_upper %s[%u] open", shmrun_task_stage(task),
		   shmrun_task_instance(task));
	*state = u;
	return 0;
}

static int upper_process(struct shmrun_task *task, void *state, const struct shmrun_record *rec)
{
	struct upper *u = state;
	struct shmrun_record out = *rec;

	/* ABI 1.1: the stage has one input, so every record comes from input 0 */
	if (shmrun_task_inputs(task) != 1 || shmrun_task_input(task) != 0) {
		shmrun_task_error(task, "record from input %u of %u, expected 0 of 1",
				  shmrun_task_input(task), shmrun_task_inputs(task));
		return -EINVAL;
	}
	if (rec->key_len > u->max_key) {
		shmrun_task_error(task, "key of %u bytes, max_key is %llu", rec->key_len,
				  (unsigned long long)u->max_key);
		return -EMSGSIZE;
	}
	for (uint32_t i = 0; i < rec->key_len; i++) {
		char c = ((const char *)rec->key)[i];

		u->buf[i] = c >= 'a' && c <= 'z' ? (char)(c - 'a' + 'A') : c;
	}
	out.key = u->buf;
	return shmrun_emit(task, &out);
}

static void upper_close(struct shmrun_task *task, void *state)
{
	struct upper *u = state;

	(void)task;
	if (u)
		free(u->buf);
	free(u);
}

static const struct shmrun_operator upper_op = {
	.size = sizeof(struct shmrun_operator),
	.name = "abi_c_upper",
	.summary = "upper-cases each record's key",
	.params = upper_params,
	.open = upper_open,
	.process = upper_process,
	.close = upper_close,
	.state_version = "1",
};

SHMRUN_PLUGIN("abi_c", "0.1.0", &upper_op);
