/*
 * tests/plugins/timers.c: a plugin whose operator keeps windows in
 * namespaced key-bound state and closes them with keyed timers, for
 * tests/integration/timers.sh (issue 12 §3: timers in key-bound state).
 *
 * Operator `windows` (ABI 1.1): a tumbling-window count and sum per key,
 * over a "time" that is the record's value read as a decimal number (the
 * `sequence` source's record number), so that the windows of a run do not
 * depend on the clock:
 *
 *     process(key, t):  start = t - t mod size
 *                       state (key, start) += {1, t}   shmrun_keyed_state_ns()
 *                       event-time timer (key, start + size - 1)
 *     on_timer(event):  emit key, "start <TAB> count <TAB> sum", delete the state
 *
 * With `time = event` a record's time is its event time in ms instead, and a
 * window closes when the task's watermark passes its end: during the run,
 * wherever the job generates watermarks.
 *
 * With `tick = <duration>`, the first record of key `tick_key` (default k0)
 * also sets a processing-time timer that far ahead, remembered in the key's
 * state (namespace UINT64_MAX) so that it is set once per job, across
 * restores; when it fires it emits (tick_key, "tick").
 *
 * Every event-time timer fires at end of input at the latest (the runtime
 * fires them with the watermark SHMRUN_WATERMARK_MAX before end_of_input()),
 * so a job's output has exactly one line per (key, window) whatever stops,
 * restores and width changes happened — the point of the test.
 *
 * Built as a CMake MODULE library, timers.so (tests/plugins/CMakeLists.txt).
 * Nothing of the runtime is used but the public API, as a user's plugin.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <shmrun/operator.h>

#define TICK_NS UINT64_MAX /* the namespace of the "tick set" flag */

struct windows {
	uint64_t size;
	bool event;	 /* time = event: the record's event time, in ms */
	int64_t tick_ns; /* 0: no processing-time timer */
	const char *tick_key;
	uint32_t tick_key_len;
};

struct window {
	uint64_t count, sum;
};

static int win_open(struct shmrun_task *task, void **state)
{
	struct windows *s = calloc(1, sizeof(*s));

	if (!s) {
		shmrun_task_error(task, "out of memory");
		return -ENOMEM;
	}
	s->size = shmrun_task_param_u64(task, "size", 1000);
	s->event = strcmp(shmrun_task_param(task, "time"), "event") == 0;
	s->tick_ns = (int64_t)shmrun_task_param_u64(task, "tick", 0);
	s->tick_key = shmrun_task_param(task, "tick_key");
	s->tick_key_len = (uint32_t)strlen(s->tick_key);
	*state = s;
	return 0;
}

static int64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int win_process(struct shmrun_task *task, void *state, const struct shmrun_record *rec)
{
	struct windows *s = state;
	const char *p = rec->value;
	uint64_t t = 0, start;
	struct window *w;
	int err;

	for (uint32_t i = 0; i < rec->value_len && !s->event; i++) {
		if (p[i] < '0' || p[i] > '9') {
			shmrun_task_error(task, "value '%.*s' is not a decimal number",
					  (int)rec->value_len, p);
			return -EINVAL;
		}
		t = t * 10 + (uint64_t)(p[i] - '0');
	}
	if (s->event)
		t = (uint64_t)(rec->event_time_ns > 0 ? rec->event_time_ns : 0) / 1000000;
	start = t - t % s->size;
	w = shmrun_keyed_state_ns(task, rec->key, rec->key_len, start, sizeof(*w), true);
	if (!w)
		return -ENOMEM;
	w->count++;
	w->sum += t;
	/* the window [start, start + size) closes when the watermark reaches its last instant */
	err = shmrun_timer_set(task, SHMRUN_TIME_EVENT, rec->key, rec->key_len,
			       s->event ? (int64_t)((start + s->size) * 1000000 - 1)
					: (int64_t)(start + s->size - 1));
	if (err)
		return err;
	if (s->tick_ns && rec->key_len == s->tick_key_len &&
	    memcmp(rec->key, s->tick_key, s->tick_key_len) == 0) {
		struct window *flag = shmrun_keyed_state_ns(task, rec->key, rec->key_len, TICK_NS,
							    sizeof(*flag), true);

		if (!flag)
			return -ENOMEM;
		if (!flag->count) {
			flag->count = 1;
			err = shmrun_timer_set(task, SHMRUN_TIME_PROCESSING, rec->key, rec->key_len,
					       realtime_ns() + s->tick_ns);
		}
	}
	return err;
}

static int win_on_timer(struct shmrun_task *task, void *state, const void *key, uint32_t key_len,
			int64_t time_ns, enum shmrun_time_domain domain)
{
	struct windows *s = state;
	struct shmrun_record out = {.key = key, .key_len = key_len};
	char text[80];
	struct window *w;
	uint64_t start;
	int n;

	if (domain == SHMRUN_TIME_PROCESSING) {
		out.value = "tick";
		out.value_len = 4;
		return shmrun_emit(task, &out);
	}
	start = s->event ? ((uint64_t)time_ns + 1) / 1000000 - s->size
			 : (uint64_t)time_ns + 1 - s->size;
	w = shmrun_keyed_state_ns(task, key, key_len, start, sizeof(*w), false);
	if (!w) {
		shmrun_task_error(task,
				  "the timer of window %" PRIu64 " of key '%.*s' found no state",
				  start, (int)key_len, (const char *)key);
		return -ENOENT;
	}
	n = snprintf(text, sizeof(text), "%" PRIu64 "\t%" PRIu64 "\t%" PRIu64, start, w->count,
		     w->sum);
	out.value = text;
	out.value_len = (uint32_t)n;
	out.event_time_ns = time_ns;
	n = shmrun_emit(task, &out);
	if (n)
		return n;
	return shmrun_keyed_state_delete(task, key, key_len, true, start);
}

static int win_end(struct shmrun_task *task, void *state)
{
	struct windows *s = state;
	uint64_t left = shmrun_keyed_state_keys(task);

	/* every window's timer fired before this call and deleted its state:
	 * only the tick flag (one key, with tick) may be left */
	if (left > (s->tick_ns ? 1u : 0u)) {
		shmrun_task_error(task, "%" PRIu64 " windows still open at end of input", left);
		return -EPROTO;
	}
	return 0;
}

static void win_close(struct shmrun_task *task, void *state)
{
	(void)task;
	free(state);
}

static const struct shmrun_param_def win_params[] = {
    {.key = "size",
     .type = SHMRUN_PARAM_COUNT,
     .def = "1000",
     .min = 1,
     .max = 1000000000,
     .doc = "window size, in record numbers"},
    {.key = "time",
     .type = SHMRUN_PARAM_ENUM,
     .def = "value",
     .choices = "value event",
     .doc = "value: a record's time is its value, a decimal number; event: its event time, in ms"},
    {.key = "tick",
     .type = SHMRUN_PARAM_DURATION,
     .min = 1,
     .max = 3600000000000ull,
     .doc = "a processing-time timer this far after tick_key's first record emits tick"},
    {.key = "tick_key",
     .type = SHMRUN_PARAM_STRING,
     .def = "k0",
     .doc = "the key whose first record sets the tick timer"},
    {0},
};

static const struct shmrun_operator windows_op = {
    .size = sizeof(struct shmrun_operator),
    .name = "windows",
    .summary = "test: tumbling-window count and sum per key, closed by keyed timers",
    .params = win_params,
    .open = win_open,
    .process = win_process,
    .end_of_input = win_end,
    .close = win_close,
    .on_timer = win_on_timer,
};

SHMRUN_PLUGIN("timers", "1.0.0", &windows_op);
