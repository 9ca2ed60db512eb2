/*
 * tests/unit/check_ops.c: contracts every built-in operator must keep,
 * checked over the whole registry so a new operator cannot forget them.
 *
 * restored_source_computes_no_position (issue 8, item 1): a source with
 * per-worker state, opened with shmrun_task_restoring() true and given no
 * entry — an instance that had finished, or one a rescale dealt nothing —
 * produces nothing: its position is its restored entries, never what open()
 * computes. The same source opened for a first start produces records (so
 * the test sees a source that would read its input again).
 *
 * pacing_param_is_a_rate_of_a_source (issue 9): an operator's pacing_param
 * names one of its own RATE params, and only sources have one.
 *
 * latency_sink_percentiles (issue 10, item 8): latency_sink's summary of
 * latencies fed through process() and process_batch() — 1..1000 ms, one
 * stamped in the future, some unstamped — gives the nearest-rank percentiles
 * within the histogram's 1/128 bucket width (plus the time the feeding took),
 * the exact max, and buckets that add up to the count.
 */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shmrun/job.h"
#include "shmrun/operator.h"
#include "worker.h"

#include "common/tmpdir.h"

/* A value for a required key of type @d (the smallest sensible one). */
static void value_for(const struct shmrun_param_def *d, const char *input, char *buf, size_t len)
{
	switch (d->type) {
	case SHMRUN_PARAM_PATH:
	case SHMRUN_PARAM_PATHS:
		snprintf(buf, len, "%s", input);
		break;
	case SHMRUN_PARAM_COUNT:
		snprintf(buf, len, "%llu", (unsigned long long)(d->min > 10 ? d->min : 10));
		break;
	case SHMRUN_PARAM_SIZE:
		snprintf(buf, len, "4K");
		break;
	case SHMRUN_PARAM_RATE:
		snprintf(buf, len, "1000");
		break;
	case SHMRUN_PARAM_BOOL:
		snprintf(buf, len, "true");
		break;
	case SHMRUN_PARAM_ENUM:
		snprintf(buf, len, "%.*s", (int)strcspn(d->choices, " "), d->choices);
		break;
	case SHMRUN_PARAM_DURATION:
		snprintf(buf, len, "1s");
		break;
	default:
		snprintf(buf, len, "x");
		break;
	}
}

/* Load a job whose stage "src" runs source @op at width 2 into a null_sink. */
static void load_job(const struct shmrun_operator *op, struct shmrun_job *job)
{
	char conf[PATH_MAX], input[PATH_MAX], val[PATH_MAX];
	struct shmrun_job_errors errs = {0};
	FILE *f;
	int err;

	snprintf(input, sizeof(input), "%s/input.txt", tmpdir);
	f = fopen(input, "w");
	ck_assert_ptr_nonnull(f);
	fputs("one\ntwo\nthree\nfour\n", f);
	fclose(f);
	snprintf(conf, sizeof(conf), "%s/%s.conf", tmpdir, op->name);
	f = fopen(conf, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "[src]\nop = %s\nwidth = 2\n", op->name);
	for (const struct shmrun_param_def *d = op->params; d && d->key; d++)
		if (d->required) {
			value_for(d, input, val, sizeof(val));
			fprintf(f, "%s = %s\n", d->key, val);
		}
	if (!strcmp(op->name, "sequence")) /* one piece per instance */
		fprintf(f, "piece_records = 5\n");
	fprintf(f, "[out]\nop = null_sink\ninput = src\n");
	fclose(f);
	err = shmrun_job_load(conf, job, &errs);
	for (uint32_t i = 0; err && i < errs.n; i++)
		fprintf(stderr, "%s\n", errs.msgs[i]);
	ck_assert_msg(err == 0, "operator %s: the generated conf does not load", op->name);
	shmrun_job_errors_free(&errs);
}

/* Records instance @inst of stage 0 produces when opened with @restoring and no entry. */
static uint64_t produced(const struct shmrun_job *job, uint32_t inst, bool restoring)
{
	struct shmrun_worker_stats stats;
	struct shmrun_control ctl = {.restored_epoch = restoring ? 7 : 0};
	struct shmrun_worker w = {.stats = &stats, .ctl = &ctl};
	const struct shmrun_stage *st = &job->stages[0];
	struct shmrun_task t = {
		.stage = st,
		.op = st->op,
		.instance = inst,
		.width = st->width,
		.vnodes = job->vnodes,
		.w = &w,
		.restoring = restoring,
	};
	void *state = NULL;
	int r = 1;

	memset(&stats, 0, sizeof(stats));
	ck_assert_int_eq(st->op->open(&t, &state), 0);
	for (int i = 0; i < 1000 && r > 0; i++)
		r = st->op->produce(&t, state, 64);
	ck_assert_msg(r == 0, "%s [%u]: produce() returned %d (%s)", st->op->name, inst, r,
		      stats.error);
	if (st->op->close)
		st->op->close(&t, state);
	return t.records_in;
}

START_TEST(restored_source_computes_no_position)
{
	uint32_t checked = 0;

	for (const struct shmrun_operator *const *op = shmrun_operators(); *op; op++) {
		struct shmrun_job job;
		uint64_t fresh = 0;

		if (!((*op)->flags & SHMRUN_OP_SOURCE) || (*op)->pw_rule == SHMRUN_PW_NONE)
			continue;
		load_job(*op, &job);
		for (uint32_t i = 0; i < 2; i++) {
			ck_assert_msg(produced(&job, i, true) == 0,
				      "%s [%u], restored with no entry, produced records: its "
				      "open() computed a position (see restore() in operator.h)",
				      (*op)->name, i);
			fresh += produced(&job, i, false);
		}
		ck_assert_msg(fresh > 0, "%s: a first start produced nothing", (*op)->name);
		shmrun_job_free(&job);
		checked++;
	}
	ck_assert_uint_ge(checked, 2); /* sequence and file_source at least */
}
END_TEST

/*
 * pacing_param names a rate (issue 9, item 4): the runtime paces a source by
 * the key its operator names, never by a key name of its own; that key must
 * be one of the operator's params, of type SHMRUN_PARAM_RATE, on a source.
 */
START_TEST(pacing_param_is_a_rate_of_a_source)
{
	uint32_t paced = 0;

	for (const struct shmrun_operator *const *op = shmrun_operators(); *op; op++) {
		const struct shmrun_param_def *found = NULL;

		if (!(*op)->pacing_param)
			continue;
		ck_assert_msg((*op)->flags & SHMRUN_OP_SOURCE, "%s: paced but not a source",
			      (*op)->name);
		for (const struct shmrun_param_def *d = (*op)->params; d && d->key; d++)
			if (strcmp(d->key, (*op)->pacing_param) == 0)
				found = d;
		ck_assert_msg(found, "%s: pacing_param '%s' is not one of its params", (*op)->name,
			      (*op)->pacing_param);
		ck_assert_msg(found->type == SHMRUN_PARAM_RATE, "%s: pacing_param '%s' is no RATE",
			      (*op)->name, (*op)->pacing_param);
		paced++;
	}
	ck_assert_uint_ge(paced, 2); /* sequence and file_source at least */
}
END_TEST

/*
 * flush_param names a duration (issue 9, item 4): the runtime reads a
 * flushing operator's interval by the key the operator names, never by a key
 * name of its own; that key must be one of its params, of type
 * SHMRUN_PARAM_DURATION, on an operator with flush().
 */
START_TEST(flush_param_is_a_duration_of_a_flusher)
{
	uint32_t named = 0;

	for (const struct shmrun_operator *const *op = shmrun_operators(); *op; op++) {
		const struct shmrun_param_def *found = NULL;

		if (!(*op)->flush_param)
			continue;
		ck_assert_msg((*op)->flush, "%s: flush_param without flush()", (*op)->name);
		for (const struct shmrun_param_def *d = (*op)->params; d && d->key; d++)
			if (strcmp(d->key, (*op)->flush_param) == 0)
				found = d;
		ck_assert_msg(found, "%s: flush_param '%s' is not one of its params", (*op)->name,
			      (*op)->flush_param);
		ck_assert_msg(found->type == SHMRUN_PARAM_DURATION,
			      "%s: flush_param '%s' is no DURATION", (*op)->name, (*op)->flush_param);
		named++;
	}
	ck_assert_uint_ge(named, 2); /* file_sink and stdout_sink */
}
END_TEST

static int64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The value of "key N" in summary @text; -1 if absent. */
static long long summary_value(const char *text, const char *key)
{
	size_t n = strlen(key);

	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (!strncmp(p, key, n) && p[n] == ' ')
			return atoll(p + n + 1);
	return -1;
}

START_TEST(latency_sink_percentiles)
{
	char conf[PATH_MAX], out[PATH_MAX], text[1 << 16];
	struct shmrun_job_errors errs = {0};
	struct shmrun_job job;
	struct shmrun_worker_stats stats;
	struct shmrun_control ctl = {0};
	struct shmrun_worker w = {.stats = &stats, .ctl = &ctl};
	struct shmrun_record batch[500];
	const struct shmrun_stage *st = NULL;
	long long p50, p90, p99, p999, max, lo, hi, cnt, sum = 0;
	int64_t t0, slack;
	void *state = NULL;
	size_t len;
	FILE *f;

	snprintf(out, sizeof(out), "%s/lat.txt", tmpdir);
	snprintf(conf, sizeof(conf), "%s/lat.conf", tmpdir);
	f = fopen(conf, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "[gen]\nop = sequence\ncount = 10\n[lat]\nop = latency_sink\ninput = gen\n"
		   "path = %s\n", out);
	fclose(f);
	ck_assert_int_eq(shmrun_job_load(conf, &job, &errs), 0);
	for (uint32_t i = 0; i < job.nstages; i++)
		if (!strcmp(job.stages[i].name, "lat"))
			st = &job.stages[i];
	ck_assert_ptr_nonnull(st);
	memset(&stats, 0, sizeof(stats));
	struct shmrun_task t = {
		.stage = st,
		.op = st->op,
		.width = 1,
		.vnodes = job.vnodes,
		.w = &w,
	};

	ck_assert_int_eq(st->op->open(&t, &state), 0);
	t0 = realtime_ns();
	/* 1..500 ms one by one, 501..1000 ms as one batch */
	for (int i = 1; i <= 500; i++) {
		struct shmrun_record r = {.event_time_ns = realtime_ns() - i * 1000000ll};

		ck_assert_int_eq(st->op->process(&t, state, &r), 0);
	}
	for (int i = 0; i < 500; i++)
		batch[i] = (struct shmrun_record){.event_time_ns =
							  realtime_ns() - (501 + i) * 1000000ll};
	ck_assert_int_eq(st->op->process_batch(&t, state, batch, 500), 0);
	for (int i = 0; i < 7; i++) { /* unstamped: not measured */
		struct shmrun_record r = {0};

		ck_assert_int_eq(st->op->process(&t, state, &r), 0);
	}
	{ /* in the future: counted as 0 */
		struct shmrun_record r = {.event_time_ns = realtime_ns() + 1000000000ll};

		ck_assert_int_eq(st->op->process(&t, state, &r), 0);
	}
	slack = realtime_ns() - t0; /* no latency is more than this above its own */
	ck_assert_int_eq(st->op->end_of_input(&t, state), 0);
	st->op->close(&t, state);
	ck_assert_uint_eq(t.records_out, 1008);

	f = fopen(out, "r");
	ck_assert_ptr_nonnull(f);
	len = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[len] = '\0';
	ck_assert_int_eq(summary_value(text, "count"), 1001);
	ck_assert_int_eq(summary_value(text, "unstamped"), 7);
	ck_assert_int_eq(summary_value(text, "negative"), 1);
	/* sorted: 0, 1 ms, ..., 1000 ms; nearest rank ceil(q * 1001) */
	p50 = summary_value(text, "p50_ns");   /* rank 501: 500 ms */
	p90 = summary_value(text, "p90_ns");   /* rank 901: 900 ms */
	p99 = summary_value(text, "p99_ns");   /* rank 991: 990 ms */
	p999 = summary_value(text, "p999_ns"); /* rank 1000: 999 ms */
	max = summary_value(text, "max_ns");   /* 1000 ms */
	ck_assert_int_ge(p50, 500000000);
	ck_assert_int_le(p50, 500000000 + 500000000 / 128 + slack);
	ck_assert_int_ge(p90, 900000000);
	ck_assert_int_le(p90, 900000000 + 900000000 / 128 + slack);
	ck_assert_int_ge(p99, 990000000);
	ck_assert_int_le(p99, 990000000 + 990000000 / 128 + slack);
	ck_assert_int_ge(p999, 999000000);
	ck_assert_int_le(p999, max);
	ck_assert_int_ge(max, 1000000000);
	ck_assert_int_le(max, 1000000000 + slack);
	/* the first bucket is [0, 0] with the future record; all add up to count */
	ck_assert_ptr_nonnull(strstr(text, "\nbucket 0 0 1\n"));
	for (const char *p = strstr(text, "\nbucket "); p; p = strstr(p + 1, "\nbucket ")) {
		ck_assert_int_eq(sscanf(p, "\nbucket %lld %lld %lld", &lo, &hi, &cnt), 3);
		ck_assert_int_le(lo, hi);
		ck_assert_int_le(hi - lo, lo / 128 + 1); /* 1/128 of its values wide at most */
		sum += cnt;
	}
	ck_assert_int_eq(sum, 1001);
	shmrun_job_free(&job);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ops");
	TCase *tc = tcase_create("restore");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, restored_source_computes_no_position);
	suite_add_tcase(s, tc);
	tc = tcase_create("pacing");
	tcase_add_test(tc, pacing_param_is_a_rate_of_a_source);
	tcase_add_test(tc, flush_param_is_a_duration_of_a_flusher);
	suite_add_tcase(s, tc);
	tc = tcase_create("latency_sink");
	tcase_add_test(tc, latency_sink_percentiles);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	tmpdir_create("shmrun-check-ops");
	srunner_run_all(sr, CK_NORMAL);
	tmpdir_remove();
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
