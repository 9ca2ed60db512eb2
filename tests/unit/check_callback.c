/*
 * tests/unit/check_callback.c: naming the operator callback a worker is in
 * (runtime/callback.h): the cb_where word in the user's terms, the words
 * cb_enter()/cb_leave() leave in the control area (nested calls included),
 * the launcher's operator_timeout watch (reported once, then "returned";
 * an idle worker never), the watch's sampling period, signal names, and the
 * launcher's guard, whose handler writes its line and dies by the signal.
 */
#include <check.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "callback.h"
#include "control.h"
#include "internal.h"
#include "plan.h"
#include "shmrun/job.h"

#include "common/tmpdir.h"

static char dir[sizeof(tmpdir) + 16];

static void load(const char *text, struct shmrun_job *job)
{
	char path[PATH_MAX];
	struct shmrun_job_errors errs = {0};
	FILE *f;
	int err;

	snprintf(path, sizeof(path), "%s/t.conf", dir);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	err = shmrun_job_load(path, job, &errs);
	for (uint32_t i = 0; err && i < errs.n; i++)
		fprintf(stderr, "%s\n", errs.msgs[i]);
	ck_assert_int_eq(err, 0);
	shmrun_job_errors_free(&errs);
}

static void setup(void)
{
	snprintf(dir, sizeof(dir), "%s/t.XXXXXX", tmpdir);
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* gen (2) -> count (2, by key: combines with emit = final) -> out (1) */
static const char *conf = "[job]\n"
			  "workers = 2\n"
			  "operator_timeout = 200ms\n"
			  "[gen]\nop = sequence\ncount = 10\nwidth = 2\n"
			  "[count]\nop = count\ninput = gen by key\nemit = final\nwidth = 2\n"
			  "[out]\nop = null_sink\ninput = count\n";

static uint32_t stage_of(const struct shmrun_job *job, const char *name)
{
	for (uint32_t s = 0; s < job->nstages; s++)
		if (!strcmp(job->stages[s].name, name))
			return s;
	ck_abort_msg("no stage %s", name);
	return 0;
}

START_TEST(describe_names_stage_instance_operator_callback)
{
	struct shmrun_job job;
	struct shmrun_plan *plan;
	uint32_t count, gen;
	char buf[512];

	load(conf, &job);
	ck_assert_int_eq(shmrun_plan_build(&job, &plan), 0);
	count = stage_of(&job, "count");
	gen = stage_of(&job, "gen");
	ck_assert(shmrun_cb_describe(
	    plan, shmrun_cb_where(plan->stage_task0[count] + 1, SHMRUN_CB_PROCESS_BATCH, 0), buf,
	    sizeof(buf)));
	ck_assert_str_eq(buf, "process_batch() of stage count, instance 1, operator count (built-in)");
	ck_assert(shmrun_cb_describe(plan, shmrun_cb_where(plan->stage_task0[gen], SHMRUN_CB_OPEN, 0),
				     buf, sizeof(buf)));
	ck_assert_str_eq(buf, "open() of stage gen, instance 0, operator sequence (built-in)");
	/* add() runs on the sending side: the combiner's stage and the sender are both named */
	ck_assert(shmrun_cb_describe(
	    plan, shmrun_cb_where(plan->stage_task0[gen] + 1, SHMRUN_CB_ADD, count + 1), buf,
	    sizeof(buf)));
	ck_assert_str_eq(buf, "add() of the combiner of stage count, operator count (built-in), "
			      "on the sending side in stage gen, instance 1");
	/* nothing running, or a word naming no task of the plan: false and "" */
	ck_assert(!shmrun_cb_describe(plan, 0, buf, sizeof(buf)));
	ck_assert_str_eq(buf, "");
	ck_assert(!shmrun_cb_describe(plan, shmrun_cb_where(plan->ntasks, SHMRUN_CB_PROCESS, 0), buf,
				      sizeof(buf)));
	ck_assert_str_eq(buf, "");
	/* cut short, never overrun */
	ck_assert(shmrun_cb_describe(
	    plan, shmrun_cb_where(plan->stage_task0[count], SHMRUN_CB_COMMIT, 0), buf, 10));
	ck_assert_str_eq(buf, "commit() ");
	ck_assert_str_eq(shmrun_cb_name(SHMRUN_CB_CHECK_RESTORE), "check_restore()");
	ck_assert_str_eq(shmrun_cb_name(200), "?()");
	shmrun_plan_free(plan);
	shmrun_job_free(&job);
}
END_TEST

START_TEST(enter_leave_nest_and_count)
{
	struct shmrun_control *ctl = shmrun_control_create(1, 8);
	struct shmrun_worker_stats *st;
	struct shmrun_worker w = {0};
	struct shmrun_operator op = {.name = "x"};
	struct shmrun_task a = {.id = 3, .op = &op, .w = &w}, b = {.id = 5, .op = &op, .w = &w};
	uint64_t pa, pb;

	ck_assert_ptr_nonnull(ctl);
	st = shmrun_control_stats(ctl);
	w.stats = st;
	pa = cb_enter(&a, SHMRUN_CB_PROCESS_BATCH);
	ck_assert_uint_eq(pa, 0);
	ck_assert_uint_eq(atomic_load(&st->cb_where),
			  shmrun_cb_where(3, SHMRUN_CB_PROCESS_BATCH, 0));
	/* a's callback emits into b over a forward edge: b's process() inside it */
	pb = cb_enter(&b, SHMRUN_CB_PROCESS);
	ck_assert_uint_eq(pb, shmrun_cb_where(3, SHMRUN_CB_PROCESS_BATCH, 0));
	ck_assert_uint_eq(atomic_load(&st->cb_where), shmrun_cb_where(5, SHMRUN_CB_PROCESS, 0));
	ck_assert_uint_eq(atomic_load(&st->cb_seq), 2);
	cb_leave(&b, pb);
	ck_assert_uint_eq(atomic_load(&st->cb_where),
			  shmrun_cb_where(3, SHMRUN_CB_PROCESS_BATCH, 0));
	cb_leave(&a, pa);
	ck_assert_uint_eq(atomic_load(&st->cb_where), 0);
	ck_assert_uint_eq(atomic_load(&st->cb_seq), 2); /* entries, not exits */
	shmrun_control_destroy(ctl);
}
END_TEST

START_TEST(watch_reports_a_call_once_then_its_return)
{
	const int64_t ms = 1000000, t0 = 1000 * ms;
	struct shmrun_job job;
	struct shmrun_plan *plan;
	struct shmrun_control *ctl;
	struct shmrun_worker_stats *st;
	struct cb_watch cw;
	pid_t pids[2] = {100, 101}; /* never signalled: the watch only reads */
	uint64_t wh;

	load(conf, &job);
	ck_assert_int_eq(shmrun_plan_build(&job, &plan), 0);
	ck_assert_uint_eq(job.operator_timeout_ns, 200 * ms);
	ctl = shmrun_control_create(2, plan->ntasks);
	ck_assert_ptr_nonnull(ctl);
	st = shmrun_control_stats(ctl);
	ck_assert_int_eq(shmrun_cb_watch_init(&cw, 2), 0);
	wh = shmrun_cb_where(plan->stage_task0[stage_of(&job, "count")], SHMRUN_CB_PROCESS, 0);

	/* worker 0 enters a call; worker 1 stays idle (where 0) throughout */
	atomic_store(&st[0].cb_seq, 1);
	atomic_store(&st[0].cb_where, wh);
	shmrun_cb_watch(&cw, plan, ctl, pids, t0); /* first seen at t0 */
	ck_assert_int_eq(cw.state[0], CB_WATCHING);
	shmrun_cb_watch(&cw, plan, ctl, pids, t0 + 20 * ms); /* before the next sample: nothing */
	shmrun_cb_watch(&cw, plan, ctl, pids, t0 + 150 * ms);
	ck_assert_int_eq(cw.state[0], CB_WATCHING);
	shmrun_cb_watch(&cw, plan, ctl, pids, t0 + 210 * ms);
	ck_assert_int_eq(cw.state[0], CB_TOLD);
	shmrun_cb_watch(&cw, plan, ctl, pids, t0 + 300 * ms);
	ck_assert_int_eq(cw.state[0], CB_TOLD); /* once */
	/* it returns: said once, and that call is not reported again */
	atomic_store(&st[0].cb_where, 0);
	shmrun_cb_watch(&cw, plan, ctl, pids, t0 + 400 * ms);
	ck_assert_int_eq(cw.state[0], CB_QUIET);
	shmrun_cb_watch(&cw, plan, ctl, pids, t0 + 900 * ms);
	ck_assert_int_eq(cw.state[0], CB_QUIET);
	/* a new call of the same callback is a new call */
	atomic_store(&st[0].cb_seq, 2);
	atomic_store(&st[0].cb_where, wh);
	shmrun_cb_watch(&cw, plan, ctl, pids, t0 + 1000 * ms);
	ck_assert_int_eq(cw.state[0], CB_WATCHING);
	/* reaped while told: returned since (its final where differs) or died in it */
	shmrun_cb_watch(&cw, plan, ctl, pids, t0 + 1300 * ms);
	ck_assert_int_eq(cw.state[0], CB_TOLD);
	shmrun_cb_watch_ended(&cw, plan, ctl, 0, pids[0], t0 + 1350 * ms); /* died in it */
	ck_assert_int_eq(cw.state[0], CB_QUIET);
	cw.state[0] = CB_TOLD;
	atomic_store(&st[0].cb_where, 0);
	shmrun_cb_watch_ended(&cw, plan, ctl, 0, pids[0], t0 + 1350 * ms); /* "returned within" */
	ck_assert_int_eq(cw.state[0], CB_QUIET);
	shmrun_cb_watch_ended(&cw, plan, ctl, 1, pids[1], t0 + 1350 * ms); /* never told: nothing */
	ck_assert_int_eq(cw.state[1], CB_WATCHING);
	atomic_store(&st[0].cb_seq, 3);
	atomic_store(&st[0].cb_where, wh);
	shmrun_cb_watch(&cw, plan, ctl, pids, t0 + 1400 * ms);
	ck_assert_int_eq(cw.state[0], CB_WATCHING);
	/* a reaped worker (pid 0) is not looked at */
	pids[0] = 0;
	shmrun_cb_watch(&cw, plan, ctl, pids, t0 + 3000 * ms);
	ck_assert_int_eq(cw.state[0], CB_WATCHING);
	ck_assert_int_eq(cw.state[1], CB_WATCHING);
	shmrun_cb_watch_free(&cw);
	shmrun_cb_watch_free(&cw); /* twice: harmless */
	shmrun_control_destroy(ctl);
	shmrun_plan_free(plan);
	shmrun_job_free(&job);
}
END_TEST

START_TEST(watch_tick)
{
	const int64_t ms = 1000000;

	ck_assert_int_eq(shmrun_cb_watch_tick_ns(0, 100 * ms), 100 * ms);
	ck_assert_int_eq(shmrun_cb_watch_tick_ns(200 * ms, 100 * ms), 50 * ms);
	ck_assert_int_eq(shmrun_cb_watch_tick_ns(1 * ms, 100 * ms), 1 * ms);
	ck_assert_int_eq(shmrun_cb_watch_tick_ns(10000 * ms, 100 * ms), 100 * ms);
	ck_assert_str_eq(shmrun_signal_name(SIGSEGV), "SIGSEGV");
	ck_assert_str_eq(shmrun_signal_name(SIGABRT), "SIGABRT");
	ck_assert_str_eq(shmrun_signal_name(999), "SIG?");
}
END_TEST

/*
 * A real segmentation fault: a store to a page mapped PROT_NONE. Unlike a store
 * through a null pointer it is not undefined behaviour, so UBSan (built with
 * -fno-sanitize-recover) does not stop the process first with exit status 1.
 */
static void segv_now(void)
{
	void *p = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p != MAP_FAILED)
		*(volatile int *)p = 1;
	raise(SIGSEGV); /* no mapping to fault on: the same signal */
}

START_TEST(guard_writes_its_line_and_dies_by_the_signal)
{
	struct shmrun_job job;
	struct sigaction before, now;
	char out[1024] = "";
	int fds[2], status;
	ssize_t n = 0, k;
	pid_t pid;

	load(conf, &job);
	/* outside a guard the old handler is back (SIG_DFL, or ASan's in its build) */
	ck_assert_int_eq(sigaction(SIGSEGV, NULL, &before), 0);
	shmrun_cb_guard_begin(&job, stage_of(&job, "gen"), 0, SHMRUN_CB_PREPARE);
	shmrun_cb_guard_end();
	ck_assert_int_eq(sigaction(SIGSEGV, NULL, &now), 0);
	ck_assert_ptr_eq(now.sa_handler, before.sa_handler);

	ck_assert_int_eq(pipe(fds), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(fds[1], STDERR_FILENO);
		shmrun_cb_guard_begin(&job, stage_of(&job, "gen"), 0, SHMRUN_CB_PREPARE);
		segv_now();
		_exit(0);
	}
	close(fds[1]);
	while ((k = read(fds[0], out + n, sizeof(out) - 1 - (size_t)n)) > 0)
		n += k;
	out[n] = '\0';
	close(fds[0]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status));
	ck_assert_int_eq(WTERMSIG(status), SIGSEGV);
	ck_assert_str_eq(out, "ERROR launcher: prepare() of stage gen, instance 0, operator "
			      "sequence (built-in) crashed with SIGSEGV in the launcher, before "
			      "any worker started; nothing was started\n");
	shmrun_job_free(&job);
}
END_TEST

static Suite *callback_suite(void)
{
	Suite *s = suite_create("callback");
	TCase *tc;

	tc = tcase_create("describe");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, describe_names_stage_instance_operator_callback);
	suite_add_tcase(s, tc);
	tc = tcase_create("enter_leave");
	tcase_add_test(tc, enter_leave_nest_and_count);
	suite_add_tcase(s, tc);
	tc = tcase_create("watch");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, watch_reports_a_call_once_then_its_return);
	tcase_add_test(tc, watch_tick);
	suite_add_tcase(s, tc);
	tc = tcase_create("guard");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, guard_writes_its_line_and_dies_by_the_signal);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr;
	int failed;

	sr = srunner_create(callback_suite());
	tmpdir_create("shmrun-check-callback");
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	tmpdir_remove();
	return failed ? 1 : 0;
}
