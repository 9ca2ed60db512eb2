/*
 * tests/unit/check_watermark.c: the watermark rules of runtime/watermark.c
 * (docs/event-time.md) on one task with two ring inputs and one forward
 * input, without rings or processes: the minimum over inputs, monotonic
 * moves from a restored watermark, MAX only at end of input, idle inputs
 * left out and taken back, generation as max - delay. The operator's
 * on_watermark() records every call; each test asserts that list.
 */
#include <check.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "task.h"
#include "util.h"
#include "watermark.h"
#include "worker.h"

#define MIN SHMRUN_WATERMARK_MIN
#define MAX SHMRUN_WATERMARK_MAX

static int64_t seen[64];
static int nseen;

static int probe_wm(struct shmrun_task *task, void *state, int64_t wm)
{
	(void)state;
	ck_assert_int_eq(shmrun_task_watermark(task), wm);
	ck_assert_int_lt(nseen, 64);
	seen[nseen++] = wm;
	return 0;
}

static int probe_process(struct shmrun_task *task, void *state, const struct shmrun_record *rec)
{
	(void)task;
	(void)state;
	(void)rec;
	return 0;
}

static const struct shmrun_operator probe = {
    .size = sizeof(struct shmrun_operator),
    .name = "probe",
    .process = probe_process,
    .on_watermark = probe_wm,
};

static struct shmrun_job job;
static struct shmrun_plan plan;
static struct shmrun_worker_stats stats;
static struct shmrun_worker w;
static struct shmrun_stage stage;
static struct chan_in rings[2], *ins[2];
static struct wm_input fwd[1];
static bool fwd_held[1];
static struct shmrun_task t;
static volatile sig_atomic_t stop_flag;

/* One task: inputs rings[0], rings[1] and fwd[0]; @restored: its t->wm. */
static void setup_task(uint64_t idle_timeout_ns, int64_t restored)
{
	memset(&job, 0, sizeof(job));
	memset(&plan, 0, sizeof(plan));
	memset(&w, 0, sizeof(w));
	memset(&t, 0, sizeof(t));
	memset(&stage, 0, sizeof(stage));
	memset(rings, 0, sizeof(rings));
	job.idle_timeout_ns = idle_timeout_ns;
	plan.job = &job;
	w.plan = &plan;
	w.stats = &stats;
	w.stop = &stop_flag;
	w.tasks = &t;
	w.ntasks = 1;
	stage.name = (char *)"probe";
	t.w = &w;
	t.op = &probe;
	t.stage = &stage;
	t.opened = true;
	t.wm = restored;
	for (int i = 0; i < 2; i++) {
		ins[i] = &rings[i];
		wm_input_init(&rings[i].wmi);
	}
	t.ins = ins;
	t.nins = 2;
	wm_input_init(&fwd[0]);
	fwd_held[0] = false;
	t.fwd_wm = fwd;
	t.fwd_slot_held = fwd_held;
	t.fwd_inputs = 1;
	t.inputs_open = 3;
	nseen = 0;
	ck_assert_int_eq(wm_setup(&w), 0);
}

static void expect_seen(int n, const int64_t *want)
{
	ck_assert_int_eq(nseen, n);
	for (int i = 0; i < n; i++)
		ck_assert_int_eq(seen[i], want[i]);
}

START_TEST(test_min_over_inputs)
{
	setup_task(0, MIN);
	ck_assert_int_eq(wm_input_advanced(&t, &rings[0].wmi, 10), 0);
	ck_assert_int_eq(t.wm, MIN); /* two inputs still at MIN */
	wm_input_advanced(&t, &rings[1].wmi, 20);
	ck_assert_int_eq(t.wm, MIN);
	wm_input_advanced(&t, &fwd[0], 15);
	ck_assert_int_eq(t.wm, 10);
	wm_input_advanced(&t, &rings[0].wmi, 30); /* min(30, 20, 15) */
	ck_assert_int_eq(t.wm, 15);
	wm_input_advanced(&t, &rings[1].wmi, 5); /* stale: ignored */
	ck_assert_int_eq(rings[1].wmi.wm, 20);
	wm_input_advanced(&t, &fwd[0], 40); /* min(30, 20, 40) */
	ck_assert_int_eq(t.wm, 20);
	wm_input_advanced(&t, &rings[0].wmi, 35); /* not the minimum's input: no move */
	ck_assert_int_eq(t.wm, 20);
	wm_input_advanced(&t, &rings[1].wmi, 50);
	ck_assert_int_eq(t.wm, 35);
	expect_seen(4, (const int64_t[]){10, 15, 20, 35});
	ck_assert_int_eq(shmrun_task_watermark(&t), 35);
}
END_TEST

START_TEST(test_max_when_every_input_is)
{
	setup_task(0, MIN);
	wm_input_advanced(&t, &rings[0].wmi, 7);
	wm_input_advanced(&t, &rings[1].wmi, MAX); /* a finished upstream */
	wm_input_advanced(&t, &fwd[0], MAX);
	ck_assert_int_eq(t.wm, 7);
	wm_input_advanced(&t, &rings[0].wmi, MAX);
	/* every input at MAX: each upstream finished, no record can come (with
	 * checkpoints a finished source sends MAX and waits for the final
	 * checkpoint, not END): MAX now, not at end of input */
	ck_assert_int_eq(t.wm, MAX);
	ck_assert_int_eq(wm_advance(&t, MAX, false), 0); /* at end of input: once */
	expect_seen(2, (const int64_t[]){7, MAX});
}
END_TEST

START_TEST(test_restored_never_back)
{
	setup_task(0, 100); /* a restore set it before open() */
	wm_input_advanced(&t, &rings[0].wmi, 50);
	wm_input_advanced(&t, &rings[1].wmi, 60);
	wm_input_advanced(&t, &fwd[0], 70);
	ck_assert_int_eq(t.wm, 100);
	ck_assert_int_eq(nseen, 0);
	wm_input_advanced(&t, &rings[0].wmi, 120);
	wm_input_advanced(&t, &rings[1].wmi, 130);
	ck_assert_int_eq(t.wm, 100); /* fwd still at 70 */
	wm_input_advanced(&t, &fwd[0], 110);
	ck_assert_int_eq(t.wm, 110);
	expect_seen(1, (const int64_t[]){110});
}
END_TEST

START_TEST(test_idle_timeout)
{
	int64_t t0;

	setup_task(10000000, MIN); /* idle_timeout = 10 ms */
	t0 = w.turn_ns;
	wm_input_advanced(&t, &rings[0].wmi, 10);
	wm_input_advanced(&t, &rings[1].wmi, 20);
	wm_input_advanced(&t, &fwd[0], 30);
	ck_assert_int_eq(t.wm, 10);
	/* 5 ms later rings[1] and fwd deliver; rings[0] stays silent */
	w.turn_ns = t0 + 5000000;
	wm_input_active(&t, &rings[1].wmi);
	wm_input_active(&t, &fwd[0]);
	ck_assert_uint_eq(wm_tick(&w, t0 + 9000000), 0); /* not yet 10 ms */
	ck_assert_int_eq(t.wm, 10);
	ck_assert_uint_eq(wm_tick(&w, t0 + 12000000), 1); /* rings[0] idle: min(20, 30) */
	ck_assert(rings[0].wmi.idle);
	ck_assert_int_eq(t.wm, 20);
	/* back from idleness with a smaller watermark: t.wm does not go back */
	w.turn_ns = t0 + 13000000;
	wm_input_advanced(&t, &rings[0].wmi, 15);
	ck_assert(!rings[0].wmi.idle);
	ck_assert_int_eq(t.wm, 20);
	wm_input_advanced(&t, &rings[1].wmi, 40);
	ck_assert_int_eq(t.wm, 20);		  /* rings[0] at 15 holds it again */
	wm_input_advanced(&t, &rings[0].wmi, 50); /* min(50, 40, 30) */
	ck_assert_int_eq(t.wm, 30);
	/* every input silent: idle, and the watermark stays */
	wm_tick(&w, t0 + 100000000);
	ck_assert(rings[0].wmi.idle && rings[1].wmi.idle && fwd[0].idle);
	ck_assert_int_eq(t.wm, 30);
	expect_seen(3, (const int64_t[]){10, 20, 30});
}
END_TEST

START_TEST(test_held_input_not_idle)
{
	int64_t t0;

	setup_task(10000000, MIN);
	t0 = w.turn_ns;
	rings[0].held = 3; /* aligning barrier 3 on it: we do not read it */
	wm_tick(&w, t0 + 50000000);
	ck_assert(!rings[0].wmi.idle);
	ck_assert(rings[1].wmi.idle);
}
END_TEST

START_TEST(test_generation)
{
	struct shmrun_record recs[3] = {
	    {.event_time_ns = 5000}, {.event_time_ns = 9000}, {.event_time_ns = 0}};
	int64_t t0;

	memset(&stage, 0, sizeof(stage));
	setup_task(0, MIN);
	stage.watermarks = true;
	stage.watermark_delay_ns = 1000;
	stage.watermark_interval_ns = 2000000;
	ck_assert_int_eq(wm_setup(&w), 0);
	ck_assert(t.wm_gen);
	t0 = w.turn_ns;
	wm_track_batch(&t, recs, 3); /* 0 is "none": ignored */
	ck_assert_int_eq(t.wm_max_ts, 9000);
	ck_assert_uint_eq(wm_tick(&w, t0 + 1000000), 0); /* before the interval */
	ck_assert_int_eq(t.wm, MIN);
	ck_assert_uint_eq(wm_tick(&w, t0 + 2000000), 1);
	ck_assert_int_eq(t.wm, 8000); /* max - delay */
	/* its inputs' watermarks do not move a generating task */
	wm_input_advanced(&t, &rings[0].wmi, 100000);
	wm_input_advanced(&t, &rings[1].wmi, 100000);
	wm_input_advanced(&t, &fwd[0], 100000);
	ck_assert_int_eq(t.wm, 8000);
	/* nothing newer: no watermark at the next interval */
	ck_assert_uint_eq(wm_tick(&w, t0 + 4000000), 0);
	recs[0].event_time_ns = 20000;
	wm_track_batch(&t, recs, 1);
	ck_assert_uint_eq(wm_tick(&w, t0 + 6000000), 1);
	ck_assert_int_eq(t.wm, 19000);
	ck_assert_int_eq(t.wm_sent, 19000);
	expect_seen(2, (const int64_t[]){8000, 19000});
}
END_TEST

static Suite *watermark_suite(void)
{
	Suite *s = suite_create("watermark");
	TCase *tc = tcase_create("rules");

	tcase_add_test(tc, test_min_over_inputs);
	tcase_add_test(tc, test_max_when_every_input_is);
	tcase_add_test(tc, test_restored_never_back);
	tcase_add_test(tc, test_idle_timeout);
	tcase_add_test(tc, test_held_input_not_idle);
	tcase_add_test(tc, test_generation);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(watermark_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
