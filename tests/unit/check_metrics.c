/*
 * tests/unit/check_metrics.c: the metrics block (runtime/metrics.h) — its
 * static tables filled from a plan, the per-start reset, a reader's read-only
 * mapping through a descriptor, and the checks that refuse a block of another
 * layout or with an index out of range before anything follows it.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "metrics.h"
#include "plan.h"
#include "shmrun/job.h"

#include "common/tmpdir.h"

static char dir[sizeof(tmpdir) + 16];
static struct shmrun_job job;
static struct shmrun_plan *plan;

static const char *conf = "[job]\n"
			  "name = mx\n"
			  "cpus = 0,1\n"
			  "[read]\n"
			  "op = sequence\n"
			  "count = 10\n"
			  "width = 2\n"
			  "[count]\n"
			  "op = count\n"
			  "input = read by key\n"
			  "width = 3\n"
			  "[out]\n"
			  "op = file_sink\n"
			  "input = count\n"
			  "path = out.tsv\n";

static void setup(void)
{
	char path[PATH_MAX];
	struct shmrun_job_errors errs = {0};
	FILE *f;

	snprintf(dir, sizeof(dir), "%s/t.XXXXXX", tmpdir);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/mx.conf", dir);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(conf, f);
	fclose(f);
	ck_assert_int_eq(shmrun_job_load(path, &job, &errs), 0);
	shmrun_job_errors_free(&errs);
	ck_assert_int_eq(shmrun_plan_build(&job, &plan), 0);
}

static void teardown(void)
{
	char cmd[300];

	shmrun_plan_free(plan);
	shmrun_job_free(&job);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

START_TEST(tables_come_from_the_plan)
{
	int fd;
	struct shmrun_metrics *m = shmrun_metrics_create(plan, &fd);

	ck_assert_ptr_nonnull(m);
	ck_assert_int_ge(fd, 0);
	ck_assert_uint_eq(m->stages, 3);
	ck_assert_uint_eq(m->tasks, 6); /* 2 + 3 + 1 */
	ck_assert_uint_eq(m->chans, plan->nchannels);
	ck_assert_uint_eq(m->workers, 2);
	ck_assert_str_eq(m->job, "mx");
	ck_assert_str_eq(shmrun_metrics_stage(m, 1)->name, "count");
	ck_assert_str_eq(shmrun_metrics_stage(m, 1)->op, "count");
	ck_assert_uint_eq(shmrun_metrics_stage(m, 1)->width, 3);
	ck_assert_uint_eq(shmrun_metrics_stage(m, 1)->task0, plan->stage_task0[1]);
	for (uint32_t i = 0; i < m->tasks; i++) {
		const struct shmrun_metrics_task *t = shmrun_metrics_task(m, i);

		ck_assert_uint_eq(t->stage, plan->tasks[i].stage);
		ck_assert_uint_eq(t->instance, plan->tasks[i].instance);
		ck_assert_uint_eq(t->worker, plan->tasks[i].worker);
		ck_assert_int_eq(t->cpu, job.cpus[plan->tasks[i].worker]);
		ck_assert_int_eq(SHMRUN_METRIC(t->watermark), INT64_MIN);
		ck_assert_uint_eq(SHMRUN_METRIC(t->records_in), 0);
	}
	for (uint32_t c = 0; c < m->chans; c++) {
		ck_assert_uint_eq(shmrun_metrics_chan(m, c)->src_task, plan->channels[c].src_task);
		ck_assert_uint_eq(shmrun_metrics_chan(m, c)->capacity, plan->rings[c].capacity);
	}
	ck_assert_uint_eq(m->bytes, shmrun_metrics_memsize(3, 6, m->chans, 2));
	ck_assert_uint_eq(m->bytes % 64, 0);
	/* sealed: nobody can resize it under a reader */
	ck_assert_int_ne(ftruncate(fd, (off_t)m->bytes * 2), 0);
	shmrun_metrics_destroy(m, fd);
}
END_TEST

START_TEST(a_new_start_resets_positions_and_counts_restarts)
{
	int fd;
	struct shmrun_metrics *m = shmrun_metrics_create(plan, &fd);

	ck_assert_ptr_nonnull(m);
	atomic_store(&shmrun_metrics_chan(m, 0)->tail, 4096);
	atomic_store(&shmrun_metrics_chan(m, 0)->head, 1024);
	atomic_store(&shmrun_metrics_task(m, 0)->records_in, 7);
	atomic_store(&shmrun_metrics_task(m, 0)->ended, 1);
	shmrun_metrics_new_start(m, 0, false);
	ck_assert_uint_eq(SHMRUN_METRIC(m->restarts), 0);
	ck_assert_uint_eq(SHMRUN_METRIC(m->state), SHMRUN_JOB_RUNNING);
	ck_assert_uint_eq(SHMRUN_METRIC(shmrun_metrics_chan(m, 0)->tail), 0);
	ck_assert_uint_eq(SHMRUN_METRIC(shmrun_metrics_chan(m, 0)->head), 0);
	ck_assert_uint_eq(SHMRUN_METRIC(shmrun_metrics_task(m, 0)->ended), 0);
	/* totals survive a restart */
	ck_assert_uint_eq(SHMRUN_METRIC(shmrun_metrics_task(m, 0)->records_in), 7);
	shmrun_metrics_new_start(m, 12, true);
	ck_assert_uint_eq(SHMRUN_METRIC(m->restarts), 1);
	ck_assert_uint_eq(SHMRUN_METRIC(m->restored_epoch), 12);
	shmrun_metrics_destroy(m, fd);
}
END_TEST

START_TEST(a_reader_maps_it_read_only)
{
	char path[64], why[200];
	int fd, ro;
	struct shmrun_metrics *m = shmrun_metrics_create(plan, &fd);
	const struct shmrun_metrics *r;

	ck_assert_ptr_nonnull(m);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ro = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(ro, 0);
	r = shmrun_metrics_map(ro, why, sizeof(why));
	ck_assert_msg(r != NULL, "%s", why);
	atomic_store(&shmrun_metrics_task(m, 2)->records_out, 99);
	ck_assert_uint_eq(SHMRUN_METRIC(shmrun_metrics_task(r, 2)->records_out), 99);
	ck_assert_str_eq(shmrun_metrics_stage(r, 2)->name, "out");
	/* the descriptor is read-only: no writable mapping */
	ck_assert_ptr_eq(mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, ro, 0), MAP_FAILED);
	ck_assert_int_eq(errno, EACCES);
	shmrun_metrics_unmap(r);
	close(ro);
	shmrun_metrics_destroy(m, fd);
}
END_TEST

START_TEST(bad_blocks_are_refused_before_use)
{
	int fd;
	struct shmrun_metrics *m = shmrun_metrics_create(plan, &fd);
	unsigned char *copy;
	struct shmrun_metrics *c;
	char why[200];

	ck_assert_ptr_nonnull(m);
	copy = aligned_alloc(64, m->bytes);
	ck_assert_ptr_nonnull(copy);
	c = (struct shmrun_metrics *)copy;
#define FRESH() memcpy(copy, m, m->bytes)
	FRESH();
	ck_assert_int_eq(shmrun_metrics_check(c, m->bytes, why, sizeof(why)), 0);
	ck_assert_int_eq(shmrun_metrics_check(c, 100, why, sizeof(why)), -EINVAL);
	c->magic ^= 1;
	ck_assert_int_eq(shmrun_metrics_check(c, m->bytes, why, sizeof(why)), -EPROTO);
	FRESH();
	c->version = 2;
	ck_assert_int_eq(shmrun_metrics_check(c, m->bytes, why, sizeof(why)), -EPROTO);
	ck_assert_ptr_nonnull(strstr(why, "version"));
	FRESH();
	c->task_bytes = 128;
	ck_assert_int_eq(shmrun_metrics_check(c, m->bytes, why, sizeof(why)), -EPROTO);
	FRESH();
	ck_assert_int_eq(shmrun_metrics_check(c, m->bytes - 64, why, sizeof(why)), -EINVAL);
	FRESH();
	c->tasks = 1000000;
	ck_assert_int_eq(shmrun_metrics_check(c, m->bytes, why, sizeof(why)), -EINVAL);
	FRESH();
	c->chans_off += 8;
	ck_assert_int_eq(shmrun_metrics_check(c, m->bytes, why, sizeof(why)), -EINVAL);
	FRESH();
	shmrun_metrics_task(c, 3)->stage = 3;
	ck_assert_int_eq(shmrun_metrics_check(c, m->bytes, why, sizeof(why)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "task"));
	FRESH();
	shmrun_metrics_task(c, 3)->worker = 2;
	ck_assert_int_eq(shmrun_metrics_check(c, m->bytes, why, sizeof(why)), -EINVAL);
	FRESH();
	((struct shmrun_metrics_stage *)shmrun_metrics_stage(c, 2))->width = 2;
	ck_assert_int_eq(shmrun_metrics_check(c, m->bytes, why, sizeof(why)), -EINVAL);
	if (c->chans) {
		FRESH();
		shmrun_metrics_chan(c, 0)->dst_task = 6;
		ck_assert_int_eq(shmrun_metrics_check(c, m->bytes, why, sizeof(why)), -EINVAL);
	}
#undef FRESH
	free(copy);
	shmrun_metrics_destroy(m, fd);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("metrics");
	TCase *tc = tcase_create("metrics");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, tables_come_from_the_plan);
	tcase_add_test(tc, a_new_start_resets_positions_and_counts_restarts);
	tcase_add_test(tc, a_reader_maps_it_read_only);
	tcase_add_test(tc, bad_blocks_are_refused_before_use);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	tmpdir_create("shmrun-check-metrics");
	srunner_run_all(sr, CK_NORMAL);
	tmpdir_remove();
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
