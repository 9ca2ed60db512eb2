/*
 * runtime/ops/tokenize.c: one record per word.
 *
 * A token is a maximal run of ASCII letters and digits in the record's value
 * ([A-Za-z0-9]+; every other byte, including UTF-8 bytes >= 0x80, separates
 * tokens). Each token is emitted as the key, lower-cased unless
 * `lowercase = false`, with an empty value and the input's event time.
 */
#include <errno.h>
#include <stdlib.h>

#include "ops.h"

struct tokenize {
	bool lower;
	unsigned char *buf;
	size_t cap;
};

static const unsigned char *const empty = (const unsigned char *)"";

static inline bool is_word(unsigned char c)
{
	return (unsigned char)((c | 0x20) - 'a') < 26 || (unsigned char)(c - '0') < 10;
}

static int tok_open(struct shmrun_task *task, void **state)
{
	struct tokenize *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	t->lower = shmrun_task_param_bool(task, "lowercase", true);
	*state = t;
	return 0;
}

static int tok_process(struct shmrun_task *task, void *state, const struct shmrun_record *rec)
{
	struct tokenize *t = state;
	const unsigned char *p = rec->value, *end = p + rec->value_len;
	struct shmrun_record out = {.value = empty, .event_time_ns = rec->event_time_ns};

	while (p < end) {
		const unsigned char *start;
		size_t n;
		int err;

		while (p < end && !is_word(*p))
			p++;
		if (p == end)
			break;
		start = p;
		while (p < end && is_word(*p))
			p++;
		n = (size_t)(p - start);
		if (t->lower) {
			if (n > t->cap) {
				unsigned char *nb = realloc(t->buf, n);

				if (!nb)
					return -ENOMEM;
				t->buf = nb;
				t->cap = n;
			}
			for (size_t i = 0; i < n; i++)
				t->buf[i] = start[i] >= 'A' && start[i] <= 'Z' ? start[i] | 0x20
									       : start[i];
			out.key = t->buf;
		} else {
			out.key = start;
		}
		out.key_len = (uint32_t)n;
		err = shmrun_emit(task, &out);
		if (err)
			return err;
	}
	return 0;
}

static void tok_close(struct shmrun_task *task, void *state)
{
	struct tokenize *t = state;

	(void)task;
	if (t)
		free(t->buf);
	free(t);
}

static const struct shmrun_param_def params[] = {
	{.key = "lowercase", .type = SHMRUN_PARAM_BOOL, .def = "true",
	 .doc = "lower-case ASCII letters of each token"},
	{0},
};

const struct shmrun_operator shmrun_op_tokenize = {
	.name = "tokenize",
	.summary = "emits each maximal run of ASCII letters and digits as a key, value empty",
	.params = params,
	.open = tok_open,
	.process = tok_process,
	.close = tok_close,
};
