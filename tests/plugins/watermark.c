/*
 * tests/plugins/watermark.c: operators that show what the runtime does with
 * watermarks, for tests/integration/watermarks.sh (issue 12, docs/event-time.md).
 *
 *   wm_probe   passes every record on unchanged and writes one line per call
 *              of on_watermark() and one at end_of_input() to `path` (width
 *              k: path.<instance>):
 *                  wm <W> <max> <records> <late>
 *                  end <records> <late> <W>
 *              W: the watermark (`max` for SHMRUN_WATERMARK_MAX, `min` for
 *              none); max: the largest event time it received so far (0:
 *              none); records: records received so far; late: of which
 *              arrived with event_time_ns <= shmrun_task_watermark();
 *   wm_sink    the same, as a sink (emits nothing);
 *   quiet      a source that emits `count` records with event times `start`
 *              (ms since the epoch) + i * `step` at once, then nothing
 *              until `hold` after it began, then `again` more records
 *              continuing the sequence, and ends: an input that goes silent
 *              and comes back.
 *
 * Built as a CMake MODULE library, watermark.so (tests/plugins/CMakeLists.txt).
 * Nothing of the runtime is used but the public API, as a user's plugin.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <shmrun/operator.h>

struct probe {
	FILE *out;
	uint64_t records, late;
	int64_t max_seen;
	bool sink;
};

static void put_wm(FILE *f, int64_t wm)
{
	if (wm == SHMRUN_WATERMARK_MAX)
		fputs("max", f);
	else if (wm == SHMRUN_WATERMARK_MIN)
		fputs("min", f);
	else
		fprintf(f, "%" PRId64, wm);
}

static int probe_open_as(struct shmrun_task *task, void **state, bool sink)
{
	struct probe *p = calloc(1, sizeof(*p));
	const char *path = shmrun_task_param(task, "path");
	char name[PATH_MAX];

	if (!p) {
		shmrun_task_error(task, "out of memory");
		return -ENOMEM;
	}
	*state = p;
	p->sink = sink;
	if (shmrun_task_width(task) > 1)
		snprintf(name, sizeof(name), "%s.%u", path, shmrun_task_instance(task));
	else
		snprintf(name, sizeof(name), "%s", path);
	p->out = fopen(name, "w");
	if (!p->out) {
		shmrun_task_error(task, "cannot write %s: %s", name, strerror(errno));
		return -errno;
	}
	return 0;
}

static int probe_open(struct shmrun_task *task, void **state)
{
	return probe_open_as(task, state, false);
}

static int sink_open(struct shmrun_task *task, void **state)
{
	return probe_open_as(task, state, true);
}

static int probe_process(struct shmrun_task *task, void *state, const struct shmrun_record *rec)
{
	struct probe *p = state;

	p->records++;
	if (rec->event_time_ns > p->max_seen)
		p->max_seen = rec->event_time_ns;
	if (rec->event_time_ns != 0 && rec->event_time_ns <= shmrun_task_watermark(task))
		p->late++;
	return p->sink ? 0 : shmrun_emit(task, rec);
}

static int probe_watermark(struct shmrun_task *task, void *state, int64_t wm)
{
	struct probe *p = state;

	if (wm != shmrun_task_watermark(task)) {
		shmrun_task_error(task,
				  "on_watermark(%" PRId64 ") but shmrun_task_watermark() "
				  "says %" PRId64,
				  wm, shmrun_task_watermark(task));
		return -EPROTO;
	}
	fputs("wm ", p->out);
	put_wm(p->out, wm);
	fprintf(p->out, " %" PRId64 " %" PRIu64 " %" PRIu64 "\n", p->max_seen, p->records, p->late);
	return 0;
}

static int probe_end(struct shmrun_task *task, void *state)
{
	struct probe *p = state;

	fprintf(p->out, "end %" PRIu64 " %" PRIu64 " ", p->records, p->late);
	put_wm(p->out, shmrun_task_watermark(task));
	fputc('\n', p->out);
	return fflush(p->out) ? -EIO : 0;
}

static void probe_close(struct shmrun_task *task, void *state)
{
	struct probe *p = state;

	(void)task;
	if (p && p->out)
		fclose(p->out);
	free(p);
}

static const struct shmrun_param_def probe_params[] = {
    {.key = "path",
     .type = SHMRUN_PARAM_PATH,
     .required = true,
     .io = SHMRUN_PARAM_OUTPUT,
     .doc = "where the lines go; width k writes path.<instance>"},
    {.key = NULL},
};

static const struct shmrun_operator wm_probe = {
    .size = sizeof(struct shmrun_operator),
    .name = "wm_probe",
    .summary = "passes records on, writes the watermarks it sees (test plugin)",
    .params = probe_params,
    .open = probe_open,
    .process = probe_process,
    .end_of_input = probe_end,
    .close = probe_close,
    .on_watermark = probe_watermark,
};

static const struct shmrun_operator wm_sink = {
    .size = sizeof(struct shmrun_operator),
    .name = "wm_sink",
    .summary = "writes the watermarks it sees (test plugin)",
    .flags = SHMRUN_OP_SINK,
    .params = probe_params,
    .open = sink_open,
    .process = probe_process,
    .end_of_input = probe_end,
    .close = probe_close,
    .on_watermark = probe_watermark,
};

/* quiet: `count` records at once, silence until `hold` has passed, `again` more. */
struct quiet {
	uint64_t next, count, again;
	int64_t start_ns, step_ns, hold_ns, began;
	char value[24];
};

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int quiet_open(struct shmrun_task *task, void **state)
{
	struct quiet *q = calloc(1, sizeof(*q));

	if (!q) {
		shmrun_task_error(task, "out of memory");
		return -ENOMEM;
	}
	q->count = shmrun_task_param_u64(task, "count", 0);
	q->start_ns = (int64_t)shmrun_task_param_u64(task, "start", 1) * 1000000;
	q->step_ns = (int64_t)shmrun_task_param_u64(task, "step", 1000000);
	q->hold_ns = (int64_t)shmrun_task_param_u64(task, "hold", 0);
	q->again = shmrun_task_param_u64(task, "again", 0);
	q->began = mono_ns();
	*state = q;
	return 0;
}

static int quiet_produce(struct shmrun_task *task, void *state, uint32_t budget)
{
	struct quiet *q = state;
	bool held = mono_ns() - q->began < q->hold_ns;
	uint64_t upto = held ? q->count : q->count + q->again;
	uint32_t n = 0;

	for (; q->next < upto && n < budget; q->next++, n++) {
		struct shmrun_record rec = {.key = "q", .key_len = 1, .value = q->value};
		int err;

		rec.value_len = (uint32_t)snprintf(q->value, sizeof(q->value), "%" PRIu64, q->next);
		rec.event_time_ns = q->start_ns + (int64_t)q->next * q->step_ns;
		err = shmrun_emit(task, &rec);
		if (err)
			return err;
	}
	if (n)
		shmrun_task_count(task, SHMRUN_COUNT_RECORDS_IN, n);
	return q->next < q->count + q->again || held ? 1 : 0;
}

static void quiet_close(struct shmrun_task *task, void *state)
{
	(void)task;
	free(state);
}

static const struct shmrun_param_def quiet_params[] = {
    {.key = "count",
     .type = SHMRUN_PARAM_COUNT,
     .required = true,
     .max = 1000000,
     .doc = "records emitted at once"},
    {.key = "start",
     .type = SHMRUN_PARAM_COUNT,
     .def = "1",
     .min = 1,
     .max = 1000000000000ull,
     .doc = "event time of record 0, ms since the epoch"},
    {.key = "step",
     .type = SHMRUN_PARAM_DURATION,
     .def = "1ms",
     .min = 1000000,
     .max = 86400000000000ull,
     .doc = "event time between two records"},
    {.key = "hold",
     .type = SHMRUN_PARAM_DURATION,
     .def = "0s",
     .max = 86400000000000ull,
     .doc = "stay open (emitting nothing) until this long after open"},
    {.key = "again",
     .type = SHMRUN_PARAM_COUNT,
     .def = "0",
     .max = 1000000,
     .doc = "records emitted once hold has passed"},
    {.key = NULL},
};

static const struct shmrun_operator quiet = {
    .size = sizeof(struct shmrun_operator),
    .name = "quiet",
    .summary = "a few records, then silence, then the end (test plugin)",
    .flags = SHMRUN_OP_SOURCE,
    .params = quiet_params,
    .open = quiet_open,
    .produce = quiet_produce,
    .close = quiet_close,
};

SHMRUN_PLUGIN("watermark", "1.0.0", &wm_probe, &wm_sink, &quiet);
