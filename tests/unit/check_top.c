/*
 * tests/unit/check_top.c: the pure helpers `shmrun top` formats its numbers
 * with (runtime/top.h), against hand-computed strings and values.
 *
 *   fmt    top_fmt_bytes(), top_fmt_count(), top_fmt_duration(): unit steps,
 *          rounding at the unit boundaries, zero, NaN and negatives, a short
 *          buffer
 *   bar    top_fmt_bar(): empty, full, rounding, "some" never looks empty
 *          and "almost full" never looks full, clamping, NaN, widths
 *   math   top_rate(), top_ring_fill(), top_share(): no interval, counter
 *          resets, positions seen out of order, clamping
 *   hosts  `shmrun top --json` (and the text) of host 1 of a 2-host job's
 *          block lists that host's workers and tasks only, every task with
 *          its worker's pid, and says host 1 of 2 (it listed the other
 *          host's tasks with a null pid); one host: host 0 of 1, all tasks
 *
 * tests/integration/top.sh runs the command against real jobs.
 */
#include <check.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/tmpdir.h"
#include "metrics.h"
#include "plan.h"
#include "top.h"

static char buf[64];

START_TEST(fmt_bytes)
{
	ck_assert_str_eq(top_fmt_bytes(buf, sizeof(buf), 0), "0 B");
	ck_assert_str_eq(top_fmt_bytes(buf, sizeof(buf), 999), "999 B");
	ck_assert_str_eq(top_fmt_bytes(buf, sizeof(buf), 1023), "1023 B");
	ck_assert_str_eq(top_fmt_bytes(buf, sizeof(buf), 1024), "1.00 KiB");
	ck_assert_str_eq(top_fmt_bytes(buf, sizeof(buf), 1536), "1.50 KiB");
	ck_assert_str_eq(top_fmt_bytes(buf, sizeof(buf), 12.3 * 1024 * 1024), "12.3 MiB");
	ck_assert_str_eq(top_fmt_bytes(buf, sizeof(buf), 512.0 * 1024 * 1024 * 1024), "512 GiB");
	ck_assert_str_eq(top_fmt_bytes(buf, sizeof(buf), 1.5 * 1024 * 1024 * 1024 * 1024),
			 "1.50 TiB");
	/* a byte rate is not a whole number: three significant digits */
	ck_assert_str_eq(top_fmt_bytes(buf, sizeof(buf), 2.5), "2.50 B");
	ck_assert_str_eq(top_fmt_bytes(buf, sizeof(buf), -5), "0 B");
	ck_assert_str_eq(top_fmt_bytes(buf, sizeof(buf), NAN), "-");
	/* a short buffer is cut, still terminated */
	ck_assert_str_eq(top_fmt_bytes(buf, 4, 1536), "1.5");
}
END_TEST

START_TEST(fmt_count)
{
	ck_assert_str_eq(top_fmt_count(buf, sizeof(buf), 0), "0");
	ck_assert_str_eq(top_fmt_count(buf, sizeof(buf), 999), "999");
	ck_assert_str_eq(top_fmt_count(buf, sizeof(buf), 1000), "1.00k");
	ck_assert_str_eq(top_fmt_count(buf, sizeof(buf), 12345), "12.3k");
	ck_assert_str_eq(top_fmt_count(buf, sizeof(buf), 999499), "999k");
	/* 999.5k rounds to 1000k: shown as 1.00M instead */
	ck_assert_str_eq(top_fmt_count(buf, sizeof(buf), 999500), "1.00M");
	ck_assert_str_eq(top_fmt_count(buf, sizeof(buf), 512e9), "512G");
	ck_assert_str_eq(top_fmt_count(buf, sizeof(buf), 4.2e12), "4.20T");
	/* rates below 1000 that are not whole */
	ck_assert_str_eq(top_fmt_count(buf, sizeof(buf), 0.5), "0.50");
	ck_assert_str_eq(top_fmt_count(buf, sizeof(buf), 42.25), "42.2");
	ck_assert_str_eq(top_fmt_count(buf, sizeof(buf), 999.7), "1.00k");
	ck_assert_str_eq(top_fmt_count(buf, sizeof(buf), NAN), "-");
	ck_assert_str_eq(top_fmt_count(buf, sizeof(buf), -3), "0");
}
END_TEST

START_TEST(fmt_duration)
{
	ck_assert_str_eq(top_fmt_duration(buf, sizeof(buf), 0), "0s");
	ck_assert_str_eq(top_fmt_duration(buf, sizeof(buf), 999), "999ns");
	ck_assert_str_eq(top_fmt_duration(buf, sizeof(buf), 850000), "850us");
	ck_assert_str_eq(top_fmt_duration(buf, sizeof(buf), 12000000), "12ms");
	/* 999.6 ms would print as "1000ms": it is 1.0s */
	ck_assert_str_eq(top_fmt_duration(buf, sizeof(buf), 999600000), "1.0s");
	ck_assert_str_eq(top_fmt_duration(buf, sizeof(buf), 4300000000), "4.3s");
	ck_assert_str_eq(top_fmt_duration(buf, sizeof(buf), 245000000000), "4m05s");
	ck_assert_str_eq(
	    top_fmt_duration(buf, sizeof(buf), (2 * 3600 + 3 * 60 + 59) * 1000000000ll), "2h03m");
	ck_assert_str_eq(
	    top_fmt_duration(buf, sizeof(buf), (3 * 86400 + 4 * 3600 + 5) * 1000000000ll), "3d04h");
	ck_assert_str_eq(top_fmt_duration(buf, sizeof(buf), -1), "-");
}
END_TEST

START_TEST(bar_cells)
{
	ck_assert_str_eq(top_fmt_bar(buf, sizeof(buf), 0, 8), "[        ]");
	ck_assert_str_eq(top_fmt_bar(buf, sizeof(buf), 1, 8), "[########]");
	ck_assert_str_eq(top_fmt_bar(buf, sizeof(buf), 0.375, 8), "[###     ]");
	ck_assert_str_eq(top_fmt_bar(buf, sizeof(buf), 0.5, 10), "[#####     ]");
	/* rounds to the nearest cell: 0.44 x 10 = 4.4 -> 4, 0.46 x 10 -> 5 */
	ck_assert_str_eq(top_fmt_bar(buf, sizeof(buf), 0.44, 10), "[####      ]");
	ck_assert_str_eq(top_fmt_bar(buf, sizeof(buf), 0.46, 10), "[#####     ]");
}
END_TEST

START_TEST(bar_edges)
{
	/* a little is never drawn as nothing, almost all never as all */
	ck_assert_str_eq(top_fmt_bar(buf, sizeof(buf), 0.001, 10), "[#         ]");
	ck_assert_str_eq(top_fmt_bar(buf, sizeof(buf), 0.999, 10), "[######### ]");
	/* clamped */
	ck_assert_str_eq(top_fmt_bar(buf, sizeof(buf), -0.5, 4), "[    ]");
	ck_assert_str_eq(top_fmt_bar(buf, sizeof(buf), 7, 4), "[####]");
	/* no data */
	ck_assert_str_eq(top_fmt_bar(buf, sizeof(buf), NAN, 4), "[----]");
	/* width 1 and below */
	ck_assert_str_eq(top_fmt_bar(buf, sizeof(buf), 0.5, 1), "[#]");
	ck_assert_str_eq(top_fmt_bar(buf, sizeof(buf), 0, 0), "[ ]");
	/* a short buffer */
	ck_assert_str_eq(top_fmt_bar(buf, 4, 1, 10), "[##");
}
END_TEST

START_TEST(math_rate)
{
	ck_assert(isnan(top_rate(0, 100, 0)));
	ck_assert_double_eq_tol(top_rate(100, 1100, 500000000), 2000, 1e-9);
	ck_assert_double_eq_tol(top_rate(7, 7, 1000000000), 0, 1e-12);
	/* a reset between the samples is no negative rate */
	ck_assert_double_eq_tol(top_rate(1000, 10, 1000000000), 0, 1e-12);
	ck_assert_double_eq_tol(top_rate(0, UINT64_C(1) << 40, 1000000000),
				(double)(UINT64_C(1) << 40), 1);
}
END_TEST

START_TEST(math_fill)
{
	ck_assert(isnan(top_ring_fill(10, 0, 0)));
	ck_assert_double_eq_tol(top_ring_fill(0, 0, 4096), 0, 1e-12);
	ck_assert_double_eq_tol(top_ring_fill(5000, 3976, 4096), 0.25, 1e-12);
	ck_assert_double_eq_tol(top_ring_fill(8192, 4096, 4096), 1, 1e-12);
	/* head seen ahead of tail (loaded later), or tail a lap ahead of a stale head */
	ck_assert_double_eq_tol(top_ring_fill(100, 200, 4096), 0, 1e-12);
	ck_assert_double_eq_tol(top_ring_fill(100000, 0, 4096), 1, 1e-12);
}
END_TEST

START_TEST(math_share)
{
	ck_assert(isnan(top_share(0, 0)));
	ck_assert_double_eq_tol(top_share(1, 4), 0.25, 1e-12);
	ck_assert_double_eq_tol(top_share(0, 4), 0, 1e-12);
	ck_assert_double_eq_tol(top_share(9, 4), 1, 1e-12);
}
END_TEST

/* A job of @hosts hosts of 2 workers each: a source of width 3 shuffling into
 * a count of width 5 (widths that do not divide by the members), a sink. */
static void load_hosts(uint32_t hosts, struct shmrun_job *job)
{
	char path[PATH_MAX];
	struct shmrun_job_errors errs = {0};
	FILE *f;
	int err;

	snprintf(path, sizeof(path), "%s/top%u.conf", tmpdir, hosts);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f,
		"[job]\nname = mh\nworkers = 2\nhosts = %u\n"
		"[gen]\nop = sequence\ncount = 10\nwidth = 3\n"
		"[count]\nop = count\ninput = gen by key\nwidth = 5\n"
		"[out]\nop = null_sink\ninput = count\nwidth = 1\n",
		hosts);
	fclose(f);
	err = shmrun_job_load(path, job, &errs);
	for (uint32_t i = 0; err && i < errs.n; i++)
		fprintf(stderr, "%s\n", errs.msgs[i]);
	ck_assert_int_eq(err, 0);
	shmrun_job_errors_free(&errs);
}

/* `shmrun top --interval 0 [--json]` of the block @fd in a child; its output in @out. */
static void top_of(int fd, bool json, char *out, size_t len)
{
	char path[64], file[PATH_MAX];
	int st, o;
	ssize_t n;
	pid_t pid;

	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)getpid(), fd);
	snprintf(file, sizeof(file), "%s/top.out", tmpdir);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char *argv[7] = {"top", "--interval", "0", "--metrics-path", path};
		int ofd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

		argv[5] = json ? "--json" : NULL;
		if (ofd < 0 || dup2(ofd, STDOUT_FILENO) < 0)
			_exit(99);
		_exit(shmrun_top_main(json ? 6 : 5, argv));
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "shmrun top: status %d", st);
	o = open(file, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(o, 0);
	n = read(o, out, len - 1);
	close(o);
	ck_assert_int_gt(n, 0);
	out[n] = 0;
}

/* top of host @host of a @hosts-host job: the JSON lists its tasks and workers only. */
static void check_host(uint32_t hosts, uint32_t host)
{
	struct shmrun_job job;
	struct shmrun_plan *plan;
	struct shmrun_metrics *m;
	static char out[1 << 20];
	uint32_t here = 0, listed = 0;
	json_t *root, *v;
	json_error_t jerr;
	size_t i, j;
	int fd;

	load_hosts(hosts, &job);
	ck_assert_int_eq(shmrun_plan_build(&job, &plan), 0);
	m = shmrun_metrics_create(plan, &fd);
	ck_assert_ptr_nonnull(m);
	m->host = host; /* what shmrun_host_self() says in that host's launcher */
	/* this host's workers run (a pid each); the others' slots stay 0 */
	for (uint32_t w = 0; w < plan->workers; w++)
		if (shmrun_plan_host_of(plan, w) == host)
			atomic_store(&shmrun_metrics_worker(m, w)->pid, 1000 + (int32_t)w);
	for (uint32_t t = 0; t < plan->ntasks; t++)
		here += shmrun_plan_host_of(plan, plan->tasks[t].worker) == host;
	ck_assert_uint_gt(here, 0);
	ck_assert_uint_lt(here, hosts > 1 ? plan->ntasks : plan->ntasks + 1);

	top_of(fd, true, out, sizeof(out));
	root = json_loads(out, 0, &jerr);
	ck_assert_msg(root != NULL, "not JSON: %s\n%s", jerr.text, out);
	ck_assert_int_eq(json_integer_value(json_object_get(root, "host")), host);
	ck_assert_int_eq(json_integer_value(json_object_get(root, "hosts")), hosts);
	json_array_foreach(json_object_get(root, "stages"), i, v)
	{
		json_t *t;

		json_array_foreach(json_object_get(v, "tasks"), j, t)
		{
			json_int_t w = json_integer_value(json_object_get(t, "worker"));
			json_t *pid = json_object_get(t, "pid");

			ck_assert_msg(shmrun_plan_host_of(plan, (uint32_t)w) == host,
				      "task %lld of worker %lld (another host's) listed",
				      json_integer_value(json_object_get(t, "task")), w);
			ck_assert_msg(json_is_integer(pid), "task on worker %lld: pid not a number",
				      w);
			ck_assert_int_eq(json_integer_value(pid), 1000 + w);
			listed++;
		}
	}
	ck_assert_uint_eq(listed, here);
	v = json_object_get(root, "workers");
	ck_assert_uint_eq(json_array_size(v), 2);
	for (i = 0; i < 2; i++)
		ck_assert_int_eq(
		    json_integer_value(json_object_get(json_array_get(v, i), "worker")),
		    host * 2 + i);
	json_decref(root);

	/* the text view says which host it shows (one host: nothing new) */
	top_of(fd, false, out, sizeof(out));
	if (hosts > 1) {
		char want[64];

		snprintf(want, sizeof(want), "  host %u of %u (its tasks only)", host, hosts);
		ck_assert_msg(strstr(out, want) != NULL, "no '%s' in:\n%s", want, out);
	} else {
		ck_assert_ptr_null(strstr(out, " host "));
	}
	shmrun_metrics_destroy(m, fd);
	shmrun_plan_free(plan);
	shmrun_job_free(&job);
}

START_TEST(hosts_json_lists_this_host)
{
	check_host(2, 1);
	check_host(2, 0);
	check_host(1, 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("top");
	TCase *fmt = tcase_create("fmt"), *bar = tcase_create("bar"), *math = tcase_create("math");
	TCase *hosts;
	SRunner *sr;
	int failed;

	tcase_add_test(fmt, fmt_bytes);
	tcase_add_test(fmt, fmt_count);
	tcase_add_test(fmt, fmt_duration);
	suite_add_tcase(s, fmt);
	tcase_add_test(bar, bar_cells);
	tcase_add_test(bar, bar_edges);
	suite_add_tcase(s, bar);
	tcase_add_test(math, math_rate);
	tcase_add_test(math, math_fill);
	tcase_add_test(math, math_share);
	suite_add_tcase(s, math);
	hosts = tcase_create("hosts");
	tcase_add_test(hosts, hosts_json_lists_this_host);
	tcase_set_timeout(hosts, 30);
	suite_add_tcase(s, hosts);
	sr = srunner_create(s);
	tmpdir_create("shmrun-check-top");
	srunner_run_all(sr, CK_NORMAL);
	tmpdir_remove();
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
