/*
 * tests/unit/check_prom.c: the Prometheus page and the summary file from a
 * metrics block whose counters the test sets by hand (runtime/prom.c,
 * runtime/summary.c): the `metrics =` address forms, the exposition lines
 * (exact values, seconds from ns, watermarks absent / +Inf, ring fill, label
 * escaping), and the summary document read back with jansson.
 */
#include <check.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "metrics.h"
#include "multihost.h"
#include "plan.h"
#include "prom.h"
#include "shmrun/job.h"
#include "summary.h"

#include "common/tmpdir.h"

static char dir[sizeof(tmpdir) + 16];

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

/* gen (width 2) -> out (width 1) on 2 workers: 3 tasks, 2 rings. */
static const char *conf = "[job]\nname = t\nworkers = 2\n"
			  "[gen]\nop = sequence\ncount = 10\nwidth = 2\n"
			  "[out]\nop = null_sink\ninput = gen\n";

START_TEST(addresses)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char why[256];
	static const char *const bad[] = {
	    "",		"abc",	      "0",	     "65536",  ":",
	    "1.2.3:80", "host:80",    "[::1]",	     "[::1]9", "::1:80",
	    "[zz]:80",	"127.0.0.1:", "12345678901", "-1",     "80x"};

	ck_assert_int_eq(shmrun_prom_parse("9464", &ss, &len, why, sizeof(why)), 0);
	ck_assert_int_eq(ss.ss_family, AF_INET);
	ck_assert_int_eq(ntohs(((struct sockaddr_in *)&ss)->sin_port), 9464);
	ck_assert_uint_eq(ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr), INADDR_LOOPBACK);
	ck_assert_int_eq(shmrun_prom_parse(":1", &ss, &len, why, sizeof(why)), 0);
	ck_assert_uint_eq(ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr), INADDR_LOOPBACK);
	ck_assert_int_eq(shmrun_prom_parse("0.0.0.0:65535", &ss, &len, why, sizeof(why)), 0);
	ck_assert_uint_eq(ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr), INADDR_ANY);
	ck_assert_int_eq(ntohs(((struct sockaddr_in *)&ss)->sin_port), 65535);
	ck_assert_int_eq(shmrun_prom_parse("[::1]:9464", &ss, &len, why, sizeof(why)), 0);
	ck_assert_int_eq(ss.ss_family, AF_INET6);
	ck_assert_int_eq(len, sizeof(struct sockaddr_in6));
	ck_assert_int_eq(ntohs(((struct sockaddr_in6 *)&ss)->sin6_port), 9464);
	ck_assert_int_eq(shmrun_prom_parse("localhost:80", NULL, NULL, why, sizeof(why)), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int r = shmrun_prom_parse(bad[i], &ss, &len, why, sizeof(why));

		ck_assert_msg(r == -EINVAL || r == -ERANGE, "'%s' accepted", bad[i]);
		ck_assert_msg(why[0], "'%s': no reason", bad[i]);
	}
	ck_assert_int_eq(shmrun_prom_parse("65536", NULL, NULL, why, sizeof(why)), -ERANGE);
	ck_assert_ptr_nonnull(strstr(why, "1 to 65535"));
	ck_assert_int_eq(shmrun_prom_parse("abc", NULL, NULL, why, sizeof(why)), -EINVAL);
	/* a long number is a port out of range, also after a host; leading zeros count for nothing */
	ck_assert_int_eq(shmrun_prom_parse("99999999999999999999", NULL, NULL, why, sizeof(why)),
			 -ERANGE);
	ck_assert_ptr_nonnull(strstr(why, "port 99999999999999999999, out of range"));
	ck_assert_int_eq(shmrun_prom_parse("1.2.3.4:1234567890", NULL, NULL, why, sizeof(why)),
			 -ERANGE);
	ck_assert_int_eq(shmrun_prom_parse("1.2.3.4:0", NULL, NULL, why, sizeof(why)), -ERANGE);
	ck_assert_int_eq(shmrun_prom_parse("0000000009464", &ss, &len, why, sizeof(why)), 0);
	ck_assert_uint_eq(ntohs(((struct sockaddr_in *)&ss)->sin_port), 9464);
}
END_TEST

/* A block of @conf with hand-set counters. */
static struct shmrun_metrics *block(struct shmrun_job *job, struct shmrun_plan **plan, int *fd)
{
	struct shmrun_metrics *m;

	load(conf, job);
	ck_assert_int_eq(shmrun_plan_build(job, plan), 0);
	m = shmrun_metrics_create(*plan, fd);
	ck_assert_ptr_nonnull(m);
	ck_assert_uint_eq(m->tasks, 3);
	ck_assert_uint_eq(m->chans, 2);
	/* gen[0]: 5 records, 1.5 s busy, a watermark; gen[1]: end of input; out: none */
	atomic_store(&shmrun_metrics_task(m, 0)->records_out, 5);
	atomic_store(&shmrun_metrics_task(m, 0)->records_in, 5);
	atomic_store(&shmrun_metrics_task(m, 1)->records_in, 7);
	atomic_store(&shmrun_metrics_task(m, 0)->busy_ns, 1500000000);
	atomic_store(&shmrun_metrics_task(m, 0)->watermark, 1700000000123456789ll);
	atomic_store(&shmrun_metrics_task(m, 1)->watermark, INT64_MAX);
	atomic_store(&shmrun_metrics_task(m, 2)->records_out, 12);
	atomic_store(&shmrun_metrics_task(m, 2)->records_in, 12);
	atomic_store(&shmrun_metrics_task(m, 2)->state_bytes, 100);
	atomic_store(&shmrun_metrics_chan(m, 1)->tail, 4096);
	atomic_store(&shmrun_metrics_chan(m, 1)->head, 1024);
	atomic_store(&m->restarts, 2);
	atomic_store(&m->ckpt_completed, 3);
	atomic_store(&m->ckpt_epoch, 9);
	atomic_store(&m->ckpt_duration_ns, 25000000);
	atomic_store(&m->state, SHMRUN_JOB_RUNNING);
	return m;
}

static char *render(const struct shmrun_metrics *m, const char *job)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	ck_assert_ptr_nonnull(out);
	ck_assert_int_eq(shmrun_prom_render(m, job, out), 0);
	fclose(out);
	return buf;
}

/* Whether @page has @line as a whole line. */
static bool has_line(const char *page, const char *line)
{
	size_t n = strlen(line);

	for (const char *p = page; (p = strstr(p, line)); p++)
		if ((p == page || p[-1] == '\n') && p[n] == '\n')
			return true;
	return false;
}

/* A channel sample, gen[@from] -> out[0], of value @v. */
#define RING(what, from, v)                                                                        \
	("shmrun_ring_" what "_bytes{job=\"t\",from_stage=\"gen\",from_instance=\"" from           \
	 "\",to_stage=\"out\",to_instance=\"0\"} " v)

START_TEST(exposition_page)
{
	struct shmrun_job job;
	struct shmrun_plan *plan;
	int fd;
	struct shmrun_metrics *m = block(&job, &plan, &fd);
	char *page = render(m, "t");
	static const char *const lines[] = {
	    "# TYPE shmrun_records_in_total counter",
	    "shmrun_records_in_total{job=\"t\",stage=\"gen\",instance=\"1\"} 7",
	    "shmrun_records_out_total{job=\"t\",stage=\"out\",instance=\"0\"} 12",
	    "shmrun_busy_seconds_total{job=\"t\",stage=\"gen\",instance=\"0\"} 1.500000000",
	    "shmrun_state_bytes{job=\"t\",stage=\"out\",instance=\"0\"} 100",
	    "shmrun_watermark_seconds{job=\"t\",stage=\"gen\",instance=\"0\"} 1700000000.123456789",
	    "shmrun_watermark_seconds{job=\"t\",stage=\"gen\",instance=\"1\"} +Inf",
	    RING("fill", "1", "3072"),
	    RING("capacity", "0", "1048576"),
	    "shmrun_restarts_total{job=\"t\"} 2",
	    "shmrun_checkpoints_total{job=\"t\"} 3",
	    "shmrun_checkpoint_epoch{job=\"t\"} 9",
	    "shmrun_checkpoint_duration_seconds{job=\"t\"} 0.025000000",
	    "shmrun_state{job=\"t\",state=\"running\"} 1",
	    "shmrun_state{job=\"t\",state=\"done\"} 0",
	    "shmrun_up{job=\"t\"} 1",
	};

	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
		ck_assert_msg(has_line(page, lines[i]), "no line: %s\n%s", lines[i], page);
	/* no watermark yet: no sample; no checkpoint time yet: no sample */
	ck_assert_ptr_null(strstr(page, "shmrun_watermark_seconds{job=\"t\",stage=\"out\""));
	ck_assert_ptr_null(strstr(page, "shmrun_last_checkpoint_timestamp_seconds{"));
	ck_assert(has_line(page, "# TYPE shmrun_last_checkpoint_timestamp_seconds gauge"));
	free(page);
	/* label values escaped: backslash, quote, newline */
	page = render(m, "a\"b\\c\nd");
	ck_assert(has_line(page, "shmrun_up{job=\"a\\\"b\\\\c\\nd\"} 1"));
	free(page);
	/* without a block: shmrun_up alone */
	page = render(NULL, "t");
	ck_assert_str_eq(page, "# HELP shmrun_up 1 while the job's launcher answers.\n"
			       "# TYPE shmrun_up gauge\nshmrun_up{job=\"t\"} 1\n");
	free(page);
	shmrun_metrics_destroy(m, fd);
	shmrun_plan_free(plan);
	shmrun_job_free(&job);
}
END_TEST

/*
 * hosts = 2, this block host 1's: only its workers, their tasks and the rings
 * with an end on it are exported (host 0's endpoint serves the rest).
 */
START_TEST(exposition_of_one_host)
{
	struct shmrun_job job;
	struct shmrun_plan *plan;
	struct shmrun_metrics *m;
	char why[256], *page;
	uint32_t host;
	int fd;

	setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
	setenv("OMPI_COMM_WORLD_RANK", "1", 1);
	/* mpirun (Open MPI 4.1) also sets its PMIx server: multihost.c trusts the pair only then */
	setenv("PMIX_NAMESPACE", "1882980353", 1);
	setenv("PMIX_SERVER_URI41", "1882980352.0;tcp4://127.0.0.1:47773", 1);
	/* gen[0] on worker 0 (host 0), gen[1] on worker 1 (host 1), out[0] on worker 0 */
	load("[job]\nname = t\nworkers = 1\nhosts = 2\n"
	     "[gen]\nop = sequence\ncount = 10\nwidth = 2\n"
	     "[out]\nop = null_sink\ninput = gen\n",
	     &job);
	ck_assert_int_eq(shmrun_hosts_check(&job, &host, why, sizeof(why)), 0);
	ck_assert_uint_eq(host, 1);
	ck_assert_int_eq(shmrun_plan_build(&job, &plan), 0);
	m = shmrun_metrics_create(plan, &fd);
	ck_assert_ptr_nonnull(m);
	ck_assert_uint_eq(m->hosts, 2);
	ck_assert_uint_eq(m->host, 1);
	ck_assert(!shmrun_metrics_here(m, 0));
	ck_assert(shmrun_metrics_here(m, 1));
	atomic_store(&shmrun_metrics_task(m, 1)->records_in, 7);
	page = render(m, "t");
	ck_assert_msg(
	    has_line(page, "shmrun_records_in_total{job=\"t\",stage=\"gen\",instance=\"1\"} 7"),
	    "%s", page);
	ck_assert_ptr_null(strstr(page, "stage=\"gen\",instance=\"0\""));
	ck_assert_ptr_null(strstr(page, "stage=\"out\",instance=\"0\""));
	ck_assert_msg(has_line(page, RING("capacity", "1", "1048576")), "%s", page);
	ck_assert_ptr_null(strstr(page, "from_instance=\"0\""));
	ck_assert_ptr_nonnull(
	    strstr(page, "shmrun_worker_sleep_seconds_total{job=\"t\",worker=\"1\""));
	ck_assert_ptr_null(strstr(page, "worker=\"0\""));
	free(page);
	shmrun_metrics_destroy(m, fd);
	shmrun_plan_free(plan);
	shmrun_job_free(&job);
	unsetenv("OMPI_COMM_WORLD_SIZE");
	unsetenv("PMIX_NAMESPACE");
	unsetenv("PMIX_SERVER_URI41");
	unsetenv("OMPI_COMM_WORLD_RANK");
}
END_TEST

START_TEST(summary_paths)
{
	char path[PATH_MAX], why[PATH_MAX + 256];

	snprintf(path, sizeof(path), "%s/s.json", dir);
	ck_assert_int_eq(shmrun_summary_check(path, why, sizeof(why)), 0);
	snprintf(path, sizeof(path), "%s/missing/s.json", dir);
	ck_assert_int_eq(shmrun_summary_check(path, why, sizeof(why)), -ENOENT);
	ck_assert_ptr_nonnull(strstr(why, "does not exist"));
	ck_assert_ptr_nonnull(strstr(why, path));
	snprintf(path, sizeof(path), "%s/f", dir);
	fclose(fopen(path, "w"));
	snprintf(path, sizeof(path), "%s/f/s.json", dir);
	ck_assert_int_eq(shmrun_summary_check(path, why, sizeof(why)), -ENOTDIR);
	ck_assert_int_eq(shmrun_summary_check(dir, why, sizeof(why)), -EISDIR);
	ck_assert_int_eq(shmrun_summary_check("", why, sizeof(why)), -ENOENT);
	ck_assert_int_eq(shmrun_summary_check("s.json", why, sizeof(why)),
			 access(".", W_OK | X_OK) ? -EACCES : 0);
}
END_TEST

START_TEST(summary_document)
{
	struct shmrun_job job;
	struct shmrun_plan *plan;
	int fd;
	struct shmrun_metrics *m = block(&job, &plan, &fd);
	struct shmrun_summary_end end = {.exit_status = 0, .status = "stopped", .epoch = 9};
	char path[PATH_MAX], tmp[PATH_MAX + 8];
	json_error_t jerr;
	json_t *d, *gen, *inst;

	snprintf(path, sizeof(path), "%s/s.json", dir);
	ck_assert_int_eq(shmrun_summary_write(path, m, plan, &end, 2500000000ll), 0);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	ck_assert_int_ne(access(tmp, F_OK), 0); /* renamed over */
	d = json_load_file(path, 0, &jerr);
	ck_assert_msg(d != NULL, "%s", jerr.text);
	ck_assert_str_eq(json_string_value(json_object_get(d, "job")), "t");
	ck_assert_str_eq(json_string_value(json_object_get(d, "status")), "stopped");
	ck_assert_str_eq(json_string_value(json_object_get(d, "reason")), "stopped at epoch 9");
	ck_assert_int_eq(json_integer_value(json_object_get(d, "stopped_epoch")), 9);
	ck_assert_int_eq(json_integer_value(json_object_get(d, "restarts")), 2);
	ck_assert(json_real_value(json_object_get(d, "wall_seconds")) == 2.5);
	gen = json_array_get(json_object_get(d, "stages"), 0);
	ck_assert_str_eq(json_string_value(json_object_get(gen, "name")), "gen");
	ck_assert_int_eq(json_integer_value(json_object_get(gen, "records_in")), 12); /* 5 + 7 */
	ck_assert(json_real_value(json_object_get(gen, "busy_seconds")) == 1.5);
	inst = json_array_get(json_object_get(gen, "instances"), 1);
	ck_assert_int_eq(json_integer_value(json_object_get(inst, "records_in")), 7);
	ck_assert_int_eq(json_integer_value(json_object_get(inst, "worker")), 1);
	ck_assert_int_eq(
	    json_integer_value(json_object_get(json_object_get(d, "totals"), "records_read")), 12);
	ck_assert_int_eq(
	    json_integer_value(json_object_get(json_object_get(d, "totals"), "records_written")),
	    12);
	ck_assert_int_eq(
	    json_integer_value(json_object_get(json_object_get(d, "checkpoints"), "completed")), 3);
	json_decref(d);

	/* failed, and without counters (SHMRUN_COUNTERS=off) */
	end = (struct shmrun_summary_end){.exit_status = 1, .status = "failed", .cause = "boom"};
	ck_assert_int_eq(shmrun_summary_write(path, NULL, plan, &end, 1), 0);
	d = json_load_file(path, 0, &jerr);
	ck_assert_ptr_nonnull(d);
	ck_assert_str_eq(json_string_value(json_object_get(d, "reason")), "failed: boom");
	ck_assert(json_is_false(json_object_get(d, "counters")));
	ck_assert_ptr_null(json_object_get(d, "totals"));
	ck_assert_ptr_null(
	    json_object_get(json_array_get(json_object_get(d, "stages"), 0), "records_in"));
	json_decref(d);

	/* an unwritable place: an error, no file */
	snprintf(path, sizeof(path), "%s/missing/s.json", dir);
	ck_assert_int_eq(shmrun_summary_write(path, m, plan, &end, 1), -ENOENT);
	shmrun_metrics_destroy(m, fd);
	shmrun_plan_free(plan);
	shmrun_job_free(&job);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("prom");
	TCase *tc = tcase_create("prom");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, addresses);
	tcase_add_test(tc, exposition_page);
	tcase_add_test(tc, exposition_of_one_host);
	tcase_add_test(tc, summary_paths);
	tcase_add_test(tc, summary_document);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	tmpdir_create("shmrun-check-prom");
	srunner_run_all(sr, CK_NORMAL);
	tmpdir_remove();
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
