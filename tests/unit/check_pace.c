/*
 * tests/unit/check_pace.c: the pacing of sources across hosts (runtime/pace.c).
 *
 * A stage's `rate` is for the whole stage. Each host keeps its own token
 * counter (in its own control area), so with [job] hosts = H each host must
 * pace its share, rate x (its instances of the stage) / width; paced at the
 * whole rate, H hosts ran the stage at up to H times it. No multi-host run
 * here: plans are built from conf files over H hosts, and the tokens are
 * taken with a clock the test advances.
 *
 *   share   pace_host_rate() for hosts = 1, 2, 3, 1-3 workers per host,
 *           widths 1-10 (most not divisible by the hosts or the members):
 *           each host's share is rate x (its instances, counted from the
 *           plan) / width, they add up to the rate, a host with instances
 *           has a share > 0, one host gets the rate itself; hand-computed
 *           cases (width 5 on 2 hosts of 2 workers: 3/5 and 2/5)
 *   tokens  source_budget() over 10 s of a fake clock, every instance of a
 *           stage of width 5 at 1000 records/s taking what it may, each
 *           host's instances on their host's own counter: 10000 records in
 *           all (+1 first token per host), 6000 on host 0 and 4000 on host 1
 *           (20000 before the fix); 3 hosts likewise; rate_wait_ns() waits
 *           for the host's next token at its share (400/s: 2.5 ms)
 */
#include <check.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/tmpdir.h"
#include "control.h"
#include "pace.h"
#include "plan.h"
#include "task.h"

/* A job of @hosts hosts x @workers workers: a sequence of @width at @rate, a sink. */
static void load(uint32_t hosts, uint32_t workers, uint32_t width, uint64_t rate,
		 struct shmrun_job *job, struct shmrun_plan **plan)
{
	char path[PATH_MAX];
	struct shmrun_job_errors errs = {0};
	FILE *f;
	int err;

	snprintf(path, sizeof(path), "%s/pace.conf", tmpdir);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f,
		"[job]\nworkers = %u\nhosts = %u\n"
		"[gen]\nop = sequence\ncount = 10\nwidth = %u\nrate = %llu\n"
		"[out]\nop = null_sink\ninput = gen\nwidth = 1\n",
		workers, hosts, width, (unsigned long long)rate);
	fclose(f);
	err = shmrun_job_load(path, job, &errs);
	for (uint32_t i = 0; err && i < errs.n; i++)
		fprintf(stderr, "%s\n", errs.msgs[i]);
	ck_assert_int_eq(err, 0);
	shmrun_job_errors_free(&errs);
	ck_assert_int_eq(shmrun_plan_build(job, plan), 0);
	ck_assert_uint_eq((*plan)->hosts, hosts);
}

/* Instances of stage 0 (gen) on @host, counted from the plan. */
static uint32_t instances_on(const struct shmrun_plan *p, uint32_t host)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < p->job->stages[0].width; i++)
		n += shmrun_plan_host_of(p, p->tasks[p->stage_task0[0] + i].worker) == host;
	return n;
}

/* The shares of one job's hosts: rate x (instances on the host) / width, adding up to @rate. */
static void check_shares(uint32_t hosts, uint32_t workers, uint32_t width, uint64_t rate)
{
	struct shmrun_job job;
	struct shmrun_plan *p;
	uint32_t placed = 0;
	double sum = 0, tol = 1e-12 * (double)rate;

	load(hosts, workers, width, rate, &job, &p);
	for (uint32_t h = 0; h < hosts; h++) {
		uint32_t mine = instances_on(p, h);
		double share = pace_host_rate(p, 0, h, rate);

		ck_assert_msg(fabs(share - (double)rate * mine / width) <= tol,
			      "hosts %u x %u workers, width %u, rate %llu: host %u (%u instances) "
			      "paces %.17g",
			      hosts, workers, width, (unsigned long long)rate, h, mine, share);
		ck_assert(mine == 0 || share > 0);
		if (mine == width) /* one host, or all here: the rate itself */
			ck_assert(share == (double)rate);
		sum += share;
		placed += mine;
	}
	ck_assert_uint_eq(placed, width);
	ck_assert_msg(fabs(sum - (double)rate) <= tol,
		      "hosts %u x %u workers, width %u: the shares add up to %.17g, not %llu",
		      hosts, workers, width, sum, (unsigned long long)rate);
	shmrun_plan_free(p);
	shmrun_job_free(&job);
}

START_TEST(share_sums_to_rate)
{
	static const uint64_t rates[] = {1, 7, 1000, 1000000000000ull};

	for (uint32_t hosts = 1; hosts <= 3; hosts++)
		for (uint32_t workers = 1; workers <= 3; workers++)
			for (uint32_t width = 1; width <= 10; width++)
				for (size_t r = 0; r < sizeof(rates) / sizeof(rates[0]); r++)
					check_shares(hosts, workers, width, rates[r]);
}
END_TEST

/* Hand-computed: placement floor(i * M / width) over M = hosts x workers members. */
START_TEST(share_by_hand)
{
	struct shmrun_job job;
	struct shmrun_plan *p;

	/* width 5 over 4 members (2 hosts of 2): workers 0,0,1,2,3: 3 on host 0, 2 on host 1 */
	load(2, 2, 5, 1000, &job, &p);
	ck_assert_double_eq_tol(pace_host_rate(p, 0, 0, 1000), 600, 1e-9);
	ck_assert_double_eq_tol(pace_host_rate(p, 0, 1, 1000), 400, 1e-9);
	shmrun_plan_free(p);
	shmrun_job_free(&job);
	/* width 7 over 3 hosts of 1: 3, 2, 2 instances; 7 records/s: 3, 2, 2 */
	load(3, 1, 7, 7, &job, &p);
	ck_assert_double_eq_tol(pace_host_rate(p, 0, 0, 7), 3, 1e-12);
	ck_assert_double_eq_tol(pace_host_rate(p, 0, 1, 7), 2, 1e-12);
	ck_assert_double_eq_tol(pace_host_rate(p, 0, 2, 7), 2, 1e-12);
	shmrun_plan_free(p);
	shmrun_job_free(&job);
	/* width 3 over 2 hosts of 1, 10 records/s: 2 and 1 instances, 20/3 and 10/3 */
	load(2, 1, 3, 10, &job, &p);
	ck_assert_double_eq_tol(pace_host_rate(p, 0, 0, 10), 20.0 / 3, 1e-12);
	ck_assert_double_eq_tol(pace_host_rate(p, 0, 1, 10), 10.0 / 3, 1e-12);
	shmrun_plan_free(p);
	shmrun_job_free(&job);
	/* width 1 over 2 hosts: the one instance's host paces it all, the other none */
	load(2, 2, 1, 5, &job, &p);
	ck_assert(pace_host_rate(p, 0, 0, 5) == 5);
	ck_assert(pace_host_rate(p, 0, 1, 5) == 0);
	shmrun_plan_free(p);
	shmrun_job_free(&job);
}
END_TEST

/*
 * Every instance of gen, on @hosts hosts of @workers, takes all it may every
 * 1 ms of a fake clock for 10 s, each host's on that host's own counter (as
 * in its own control area), with its share set as the worker sets it.
 * Return: records taken on each host into @taken.
 */
static void run_tokens(uint32_t hosts, uint32_t workers, uint32_t width, uint64_t rate,
		       uint64_t *taken)
{
	static struct shmrun_task_slot slots[3]; /* one counter per host */
	struct shmrun_task tasks[16];
	struct shmrun_job job;
	struct shmrun_plan *p;
	const int64_t t0 = 1000000000;

	ck_assert_uint_le(hosts, 3);
	ck_assert_uint_le(width, 16);
	memset(slots, 0, sizeof(slots));
	memset(tasks, 0, sizeof(tasks));
	load(hosts, workers, width, rate, &job, &p);
	for (uint32_t i = 0; i < width; i++) {
		uint32_t h = shmrun_plan_host_of(p, p->tasks[p->stage_task0[0] + i].worker);

		tasks[i].rate = rate;
		tasks[i].rate_slot = &slots[h];
		tasks[i].rate_host = pace_host_rate(p, 0, h, rate);
	}
	for (uint32_t h = 0; h < hosts; h++)
		taken[h] = 0;
	for (int64_t now = t0; now <= t0 + 10 * (int64_t)1000000000; now += 1000000)
		for (uint32_t i = 0; i < width; i++) {
			int k;

			while ((k = source_budget(&tasks[i], now)) > 0) {
				rate_return(&tasks[i], (uint64_t)k, (uint64_t)k);
				taken[shmrun_plan_host_of(
				    p, p->tasks[p->stage_task0[0] + i].worker)] += (uint64_t)k;
			}
		}
	shmrun_plan_free(p);
	shmrun_job_free(&job);
}

/* The wait for the next token follows the host's share: 400/s, 2.5 ms apart. */
START_TEST(wait_follows_share)
{
	struct shmrun_task_slot *slot = aligned_alloc(64, sizeof(*slot));
	struct shmrun_task t = {0};
	struct shmrun_job job;
	struct shmrun_plan *p;
	const int64_t t0 = 1000000000;
	int64_t wait;

	ck_assert_ptr_nonnull(slot);
	memset(slot, 0, sizeof(*slot));
	load(2, 2, 5, 1000, &job, &p); /* host 1: 2 instances of 5 */
	t.rate = 1000;
	t.rate_slot = slot;
	t.rate_host = pace_host_rate(p, 0, 1, 1000);
	ck_assert_int_eq(source_budget(&t, t0), 1);	       /* the first token */
	ck_assert_int_eq(source_budget(&t, t0 + 10000000), 4); /* 10 ms at 400/s */
	wait = rate_wait_ns(&t, t0 + 10000000);
	ck_assert_msg(wait > 2400000 && wait <= 2500001, "next token in %lld ns, not 2.5 ms",
		      (long long)wait);
	shmrun_plan_free(p);
	shmrun_job_free(&job);
	free(slot);
}
END_TEST

START_TEST(tokens_split_over_hosts)
{
	uint64_t taken[3];

	/* 2 hosts of 2 workers, width 5 at 1000/s: 3 instances on host 0, 2 on host 1 */
	run_tokens(2, 2, 5, 1000, taken);
	ck_assert_msg(taken[0] + taken[1] <= 10000 + 2,
		      "the stage made %llu records in 10 s at 1000/s (host 0 %llu, host 1 %llu)",
		      (unsigned long long)(taken[0] + taken[1]), (unsigned long long)taken[0],
		      (unsigned long long)taken[1]);
	ck_assert_uint_eq(taken[0], 6000 + 1);
	ck_assert_uint_eq(taken[1], 4000 + 1);
	/* 3 hosts of 1 worker, width 4 at 300/s: instances 2, 1, 1 (placement 0,0,1,2) */
	run_tokens(3, 1, 4, 300, taken);
	ck_assert_uint_eq(taken[0], 1500 + 1);
	ck_assert_uint_eq(taken[1], 750 + 1);
	ck_assert_uint_eq(taken[2], 750 + 1);
	/* one host: the whole rate, as before */
	run_tokens(1, 2, 5, 1000, taken);
	ck_assert_uint_eq(taken[0], 10000 + 1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("pace");
	TCase *share = tcase_create("share"), *tokens = tcase_create("tokens");
	SRunner *sr;
	int failed;

	tcase_add_test(share, share_sums_to_rate);
	tcase_add_test(share, share_by_hand);
	tcase_set_timeout(share, 60);
	suite_add_tcase(s, share);
	tcase_add_test(tokens, tokens_split_over_hosts);
	tcase_add_test(tokens, wait_follows_share);
	tcase_set_timeout(tokens, 60);
	suite_add_tcase(s, tokens);
	sr = srunner_create(s);
	tmpdir_create("shmrun-check-pace");
	srunner_run_all(sr, CK_NORMAL);
	tmpdir_remove();
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
