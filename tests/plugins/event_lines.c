/*
 * tests/plugins/event_lines.c: event_lines.so, the operator `event_lines`
 * for tests/integration/window.sh: it turns a line "KEY TIME_MS [VALUE]"
 * (file_source's value) into a record with that key, event time TIME_MS
 * milliseconds since the epoch (may be negative) and the rest of the line,
 * after one blank, as the value. A line that does not fit fails the task.
 * It lets the window tests set event times by hand without another
 * operator; with `watermark_delay` on its stage it generates watermarks as
 * any stage does.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <shmrun/operator.h>

static int ev_process(struct shmrun_task *task, void *state, const struct shmrun_record *rec)
{
	const char *s = rec->value, *end = s + rec->value_len, *sp, *t;
	char num[32];
	struct shmrun_record out = {0};
	char *e;
	long long ms;
	size_t n;

	(void)state;
	sp = memchr(s, ' ', rec->value_len);
	if (!sp)
		goto bad;
	out.key = s;
	out.key_len = (uint32_t)(sp - s);
	t = sp + 1;
	sp = memchr(t, ' ', (size_t)(end - t));
	n = (size_t)((sp ? sp : end) - t);
	if (n == 0 || n >= sizeof(num))
		goto bad;
	memcpy(num, t, n);
	num[n] = '\0';
	ms = strtoll(num, &e, 10);
	if (*e)
		goto bad;
	out.event_time_ns = ms * 1000000ll;
	if (sp) {
		out.value = sp + 1;
		out.value_len = (uint32_t)(end - sp - 1);
	}
	return shmrun_emit(task, &out);
bad:
	shmrun_task_error(task, "line '%.*s' is not 'KEY TIME_MS [VALUE]'", (int)rec->value_len,
			  (const char *)rec->value);
	return -EINVAL;
}

static const struct shmrun_param_def ev_params[] = {{0}};

static const struct shmrun_operator ev_op = {
	.size = sizeof(struct shmrun_operator),
	.name = "event_lines",
	.summary = "KEY TIME_MS [VALUE] lines to records with event times (tests)",
	.params = ev_params,
	.process = ev_process,
};

SHMRUN_PLUGIN("event_lines", "1.0.0", &ev_op);
