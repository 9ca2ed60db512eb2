/*
 * tests/plugins/test_plugin.c: the plugins tests/integration/plugins.sh loads,
 * one source built into several shared objects (tests/plugins/CMakeLists.txt),
 * chosen by PLUGIN_CASE:
 *
 *   good         operator `tag` (value = the stage's `tag` key, a TAB, the
 *                record's value; key-bound state: a count per key, so a
 *                restore has state to check) and a source `tag_numbers`
 *                (lines "n<i>" for i in [0, count), per-worker state: the next i)
 *   no_symbol    exports nothing under SHMRUN_PLUGIN_SYMBOL
 *   abi_major    built for ABI major + 1
 *   abi_minor    built for a minor newer than the runtime's
 *   no_name      an operator without a name
 *   no_process   an operator without process()
 *   dup_builtin  an operator named `count`
 *   bad_size     an operator with .size = 0
 *   unresolved   needs a function no library defines (dlopen fails)
 *   no_ops       a descriptor without operators
 *   bad_default  `tag`'s key `mode` defaults to a word that is not a choice
 *   bad_range    `tag_numbers`' key `count` defaults to 0, below its minimum
 *   bare         `tag` without a summary and its keys without docs (optional)
 *   keyed_source `tag_numbers` flagged SHMRUN_OP_KEYED too (a source: refused)
 *   unreplayable `tag_numbers` flagged SHMRUN_OP_UNREPLAYABLE (ABI 1.2)
 *   unreplayable_tag  `tag` (not a source) flagged SHMRUN_OP_UNREPLAYABLE
 *
 * PLUGIN_VERSION and PLUGIN_STATE_VERSION (optional) set the plugin's version
 * and `tag`'s state_version, for the fingerprint tests.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shmrun/operator.h>

#ifndef PLUGIN_VERSION
#define PLUGIN_VERSION "1.0.0"
#endif
#ifndef PLUGIN_STATE_VERSION
#define PLUGIN_STATE_VERSION NULL
#endif

struct tag_state {
	const char *tag;
	size_t tag_len;
	char *buf;
	size_t cap;
};

static int tag_open(struct shmrun_task *task, void **state)
{
	struct tag_state *s = calloc(1, sizeof(*s));

	if (!s) {
		shmrun_task_error(task, "out of memory");
		return -ENOMEM;
	}
	s->tag = shmrun_task_param(task, "tag");
	s->tag_len = strlen(s->tag);
	*state = s;
	return 0;
}

static int __attribute__((unused))
tag_process(struct shmrun_task *task, void *state, const struct shmrun_record *rec)
{
	struct tag_state *s = state;
	struct shmrun_record out = *rec;
	size_t need = s->tag_len + 1 + rec->value_len;
	uint64_t *seen;

#if defined(PLUGIN_UNRESOLVED)
	extern void shmrun_test_no_such_function(void);
	shmrun_test_no_such_function();
#endif
	if (need > s->cap) {
		char *b = realloc(s->buf, need);

		if (!b) {
			shmrun_task_error(task, "out of memory");
			return -ENOMEM;
		}
		s->buf = b;
		s->cap = need;
	}
	memcpy(s->buf, s->tag, s->tag_len);
	s->buf[s->tag_len] = '\t';
	if (rec->value_len)
		memcpy(s->buf + s->tag_len + 1, rec->value, rec->value_len);
	seen = shmrun_keyed_state(task, rec->key, rec->key_len, sizeof(*seen), true);
	if (!seen)
		return -ENOMEM;
	(*seen)++;
	out.value = s->buf;
	out.value_len = (uint32_t)need;
	return shmrun_emit(task, &out);
}

static void tag_close(struct shmrun_task *task, void *state)
{
	struct tag_state *s = state;

	(void)task;
	if (s)
		free(s->buf);
	free(s);
}

static const struct shmrun_param_def tag_params[] = {
#if defined(PLUGIN_BARE)
	{.key = "tag", .type = SHMRUN_PARAM_STRING, .required = true},
#else
	{.key = "tag", .type = SHMRUN_PARAM_STRING, .required = true, .doc = "text put before each value"},
#endif
#if defined(PLUGIN_BAD_DEFAULT)
	{.key = "mode", .type = SHMRUN_PARAM_ENUM, .def = "weird", .choices = "plain fancy",
#else
	{.key = "mode", .type = SHMRUN_PARAM_ENUM, .def = "plain", .choices = "plain fancy",
#endif
	 .doc = "a choice, to test validation"},
	{.key = NULL},
};

static const struct shmrun_operator tag_op = {
	.size = sizeof(struct shmrun_operator),
#if defined(PLUGIN_NO_NAME)
	.name = NULL,
#elif defined(PLUGIN_DUP_BUILTIN)
	.name = "count",
#else
	.name = "tag",
#endif
#if !defined(PLUGIN_BARE)
	.summary = "value = the tag, a TAB and the value (test plugin)",
#endif
#if defined(PLUGIN_UNREPLAYABLE_TAG)
	.flags = SHMRUN_OP_UNREPLAYABLE, /* refused: only a source may be */
#endif
	.params = tag_params,
	.open = tag_open,
#if !defined(PLUGIN_NO_PROCESS)
	.process = tag_process,
#endif
	.close = tag_close,
	.pw_rule = SHMRUN_PW_NONE,
	.state_version = PLUGIN_STATE_VERSION,
};

/* tag_numbers: a source of "n<i>" lines, one instance. */
struct num_state {
	uint64_t next, count;
};

static int num_open(struct shmrun_task *task, void **state)
{
	struct num_state *s = calloc(1, sizeof(*s));

	if (!s) {
		shmrun_task_error(task, "out of memory");
		return -ENOMEM;
	}
	s->count = shmrun_task_param_u64(task, "count", 1000);
	*state = s;
	return 0;
}

static int num_produce(struct shmrun_task *task, void *state, uint32_t budget)
{
	struct num_state *s = state;
	char line[32];

	for (; budget && s->next < s->count; budget--, s->next++) {
		struct shmrun_record r = {.key = line, .value = line};
		int n = snprintf(line, sizeof(line), "n%llu", (unsigned long long)s->next);
		int err;

		r.key_len = r.value_len = (uint32_t)n;
		err = shmrun_emit(task, &r);
		if (err)
			return err;
		shmrun_task_count(task, SHMRUN_COUNT_RECORDS_IN, 1);
	}
	return s->next < s->count;
}

static int num_snapshot(struct shmrun_task *task, void *state, uint64_t epoch)
{
	struct num_state *s = state;

	(void)epoch;
	return shmrun_pw_add(task, &s->next, sizeof(s->next));
}

static int num_restore(struct shmrun_task *task, void *state, const void *entry, uint32_t len)
{
	struct num_state *s = state;

	if (len != sizeof(s->next)) {
		shmrun_task_error(task, "bad saved position (%u bytes)", len);
		return -EINVAL;
	}
	memcpy(&s->next, entry, sizeof(s->next));
	return 0;
}

static void num_close(struct shmrun_task *task, void *state)
{
	(void)task;
	free(state);
}

static const struct shmrun_param_def num_params[] = {
#if defined(PLUGIN_BAD_RANGE)
	{.key = "count", .type = SHMRUN_PARAM_COUNT, .def = "0", .min = 1, .max = 1000000000,
#else
	{.key = "count", .type = SHMRUN_PARAM_COUNT, .def = "1000", .min = 1, .max = 1000000000,
#endif
	 .doc = "lines to produce"},
	{.key = NULL},
};

static const struct shmrun_operator num_op = {
#if defined(PLUGIN_BAD_SIZE)
	.size = 0,
#else
	.size = sizeof(struct shmrun_operator),
#endif
	.name = "tag_numbers",
	.summary = "n0, n1, ... as key and value (test plugin)",
#if defined(PLUGIN_KEYED_SOURCE)
	.flags = SHMRUN_OP_SOURCE | SHMRUN_OP_KEYED, /* refused: a source has no input */
#elif defined(PLUGIN_UNREPLAYABLE)
	.flags = SHMRUN_OP_SOURCE | SHMRUN_OP_UNREPLAYABLE,
#else
	.flags = SHMRUN_OP_SOURCE,
#endif
	.params = num_params,
	.open = num_open,
	.produce = num_produce,
	.close = num_close,
	.pw_rule = SHMRUN_PW_SPLIT,
	.snapshot = num_snapshot,
	.restore = num_restore,
	.state_version = "1",
};

#if defined(PLUGIN_NO_SYMBOL) || defined(PLUGIN_NO_OPS)
/* not under SHMRUN_PLUGIN_SYMBOL, or not listed in it */
const struct shmrun_operator *const test_plugin_unlisted[] = {&tag_op, &num_op};
#endif
#if defined(PLUGIN_NO_SYMBOL)
/* nothing exported under SHMRUN_PLUGIN_SYMBOL */
#elif defined(PLUGIN_ABI_MAJOR) || defined(PLUGIN_ABI_MINOR) || defined(PLUGIN_NO_OPS)
static const struct shmrun_operator *const ops_[] = {
#if !defined(PLUGIN_NO_OPS)
	&tag_op, &num_op,
#endif
	NULL};
const struct shmrun_plugin shmrun_plugin = {
#if defined(PLUGIN_ABI_MAJOR)
	SHMRUN_ABI_MAJOR + 1, 0,
#elif defined(PLUGIN_ABI_MINOR)
	SHMRUN_ABI_MAJOR, SHMRUN_ABI_MINOR + 7,
#else
	SHMRUN_ABI_MAJOR, SHMRUN_ABI_MINOR,
#endif
	"test", PLUGIN_VERSION, ops_};
#else
SHMRUN_PLUGIN("test", PLUGIN_VERSION, &tag_op, &num_op);
#endif
