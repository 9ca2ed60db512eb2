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
	const unsigned char *map; /* lower or keep */
	unsigned char *buf;
	size_t cap;
};

static const unsigned char *const empty = (const unsigned char *)"";

/* word_byte[c]: 0 for a separator, else c lower-cased (lower[]) or as is (keep[]). */
static unsigned char lower[256], keep[256];

__attribute__((constructor)) static void init_tables(void)
{
	for (int c = 0; c < 256; c++) {
		bool w = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');

		keep[c] = w ? (unsigned char)c : 0;
		lower[c] = w ? (unsigned char)(c >= 'A' && c <= 'Z' ? c | 0x20 : c) : 0;
	}
}

static int tok_open(struct shmrun_task *task, void **state)
{
	struct tokenize *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	t->map = shmrun_task_param_bool(task, "lowercase", true) ? lower : keep;
	*state = t;
	return 0;
}

static int tok_process(struct shmrun_task *task, void *state, const struct shmrun_record *rec)
{
	struct tokenize *t = state;
	const unsigned char *p = rec->value, *end = p + rec->value_len;
	struct shmrun_record out = {.value = empty, .event_time_ns = rec->event_time_ns};
	const unsigned char *map = t->map;
	unsigned char *buf;

	if (rec->value_len > t->cap) { /* a token is at most the whole value */
		unsigned char *nb = realloc(t->buf, rec->value_len);

		if (!nb)
			return -ENOMEM;
		t->buf = nb;
		t->cap = rec->value_len;
	}
	buf = t->buf;
	out.key = buf;
	while (p < end) {
		uint32_t n = 0;
		unsigned char c;
		int err;

		while (p < end && !keep[*p])
			p++;
		/* one pass: map (lower-case or keep) and copy until a separator */
		while (p < end && (c = map[*p]) != 0) {
			buf[n++] = c;
			p++;
		}
		if (!n)
			break;
		out.key_len = n;
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
