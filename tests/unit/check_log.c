/*
 * tests/unit/check_log.c: log lines (runtime/log.c) and the progress line's
 * text (runtime/progress.c), through runtime/internal.h. stderr is pointed at
 * a temporary file for each test and read back.
 *
 * TCases:
 *   text      time, job ("-" before one is set), level, process, a task's
 *             stage and instance, the message
 *   json      each line parses (jansson) with exactly the fields it should
 *             have: worker only from a worker, stage and instance only from a
 *             task, job null before one is set; a message longer than a line
 *             becomes a note, never bad JSON; plain report lines become info
 *             records
 *   status    with the status line on, every log line, plain lines and draws
 *             start with "\r\e[K"; a draw has no newline; end() erases it and
 *             turns the erasing off
 *   progress  the progress line's text: percentage, sizes, rate, ETA,
 *             checkpoint, an unknown total, an unknown rate
 *   parse     --log-format values
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

static int saved_fd = -1;
static char path[64];

/* Point stderr at a new temporary file. */
static void capture(void)
{
	int fd;

	snprintf(path, sizeof(path), "/tmp/check_log.XXXXXX");
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	fflush(stderr);
	saved_fd = dup(STDERR_FILENO);
	ck_assert_int_ge(saved_fd, 0);
	ck_assert_int_eq(dup2(fd, STDERR_FILENO), STDERR_FILENO);
	close(fd);
}

/* Restore stderr; return what was written (malloc'd, NUL-terminated). */
static char *captured(void)
{
	static char buf[1 << 16];
	ssize_t n;
	int fd;

	ck_assert_int_eq(dup2(saved_fd, STDERR_FILENO), STDERR_FILENO);
	close(saved_fd);
	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	n = read(fd, buf, sizeof(buf) - 1);
	ck_assert_int_ge(n, 0);
	buf[n] = '\0';
	close(fd);
	unlink(path);
	return strdup(buf);
}

/* Back to the defaults between tests (each runs in a fork, but be explicit). */
static void reset(void)
{
	shmrun_log_set_format(SHMRUN_LOG_TEXT);
	shmrun_log_set_level(SHMRUN_LOG_INFO);
	shmrun_log_set_job(NULL);
	shmrun_log_set_role("launcher");
	shmrun_status_enable(false);
}

static const char *TIME_RE_FREE_PREFIX = "2"; /* every time begins with the millennium */

START_TEST(test_text)
{
	char *out, *l2, *l3;

	reset();
	capture();
	shmrun_log(SHMRUN_LOG_INFO, "before %d", 1);
	shmrun_log_set_job("wc");
	shmrun_log_set_worker(3);
	shmrun_log(SHMRUN_LOG_WARN, "hello %s", "there");
	shmrun_log_task(SHMRUN_LOG_ERROR, NULL, "count", 2, "bad");
	shmrun_log_task(SHMRUN_LOG_DEBUG, NULL, "count", 2, "dropped at info");
	out = captured();
	/* "2026-12-02T03:24:24.780Z - INFO  launcher: before 1" */
	ck_assert_msg(strncmp(out, TIME_RE_FREE_PREFIX, 1) == 0 && out[10] == 'T' && out[23] == 'Z',
		      "%s", out);
	ck_assert_msg(strncmp(out + 24, " - INFO  launcher: before 1\n", 28) == 0, "%s", out);
	l2 = strchr(out, '\n') + 1;
	ck_assert_msg(strncmp(l2 + 24, " wc WARN  worker 3: hello there\n", 32) == 0, "%s", l2);
	l3 = strchr(l2, '\n') + 1;
	ck_assert_msg(strcmp(l3 + 24, " wc ERROR worker 3: stage 'count' [2]: bad\n") == 0, "%s", l3);
	free(out);
}
END_TEST

/* The @i-th (from 0) line of @out, parsed. */
static json_t *json_line(const char *out, int i)
{
	json_error_t err;
	const char *p = out, *nl;
	json_t *o;

	while (i-- > 0) {
		p = strchr(p, '\n');
		ck_assert_ptr_nonnull(p);
		p++;
	}
	nl = strchr(p, '\n');
	ck_assert_ptr_nonnull(nl);
	o = json_loadb(p, (size_t)(nl - p), 0, &err);
	ck_assert_msg(o && json_is_object(o), "line not JSON: %.*s (%s)", (int)(nl - p), p, err.text);
	return o;
}

static const char *str(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	ck_assert_msg(json_is_string(v), "%s is not a string", k);
	return json_string_value(v);
}

START_TEST(test_json)
{
	char *out, *big;
	json_t *o;

	reset();
	shmrun_log_set_format(SHMRUN_LOG_JSON);
	capture();
	shmrun_log(SHMRUN_LOG_INFO, "say \"%s\"\n", "hi");
	shmrun_log_set_job("wc");
	shmrun_log_plain("records in:    %d\noutput:        %s\n", 5, "/x");
	shmrun_log_set_worker(1);
	shmrun_log_task(SHMRUN_LOG_WARN, "job.conf:7", "parse", 0, "bad record 3");
	big = malloc(20000);
	memset(big, 'x', 19999);
	big[19999] = '\0';
	shmrun_log(SHMRUN_LOG_ERROR, "%s", big);
	free(big);
	out = captured();

	o = json_line(out, 0);
	ck_assert_int_eq(json_object_size(o), 4);
	ck_assert_str_eq(str(o, "level"), "info");
	ck_assert(json_is_null(json_object_get(o, "job")));
	ck_assert_str_eq(str(o, "msg"), "say \"hi\"\n");
	ck_assert_uint_eq(strlen(str(o, "time")), 24);
	ck_assert_int_eq(str(o, "time")[23], 'Z');
	json_decref(o);

	o = json_line(out, 1); /* the plain report, one record per line */
	ck_assert_str_eq(str(o, "job"), "wc");
	ck_assert_str_eq(str(o, "msg"), "records in:    5");
	ck_assert_ptr_null(json_object_get(o, "worker"));
	json_decref(o);
	o = json_line(out, 2);
	ck_assert_str_eq(str(o, "msg"), "output:        /x");
	json_decref(o);

	o = json_line(out, 3);
	ck_assert_int_eq(json_object_size(o), 7);
	ck_assert_str_eq(str(o, "level"), "warn");
	ck_assert_int_eq(json_integer_value(json_object_get(o, "worker")), 1);
	ck_assert_str_eq(str(o, "stage"), "parse");
	ck_assert_int_eq(json_integer_value(json_object_get(o, "instance")), 0);
	ck_assert_str_eq(str(o, "msg"), "job.conf:7: bad record 3");
	json_decref(o);

	o = json_line(out, 4); /* too long for a line: a note, still JSON */
	ck_assert_str_eq(str(o, "level"), "error");
	ck_assert_msg(strstr(str(o, "msg"), "too long") != NULL, "%s", str(o, "msg"));
	json_decref(o);
	ck_assert_ptr_null(strchr(strchr(strstr(out, "too long"), '\n') + 1, '\n'));
	free(out);
}
END_TEST

START_TEST(test_status)
{
	char *out;

	reset();
	shmrun_log_set_job("wc");
	capture();
	shmrun_status_draw("not enabled: nothing");
	shmrun_status_enable(true);
	ck_assert(shmrun_status_enabled());
	shmrun_status_draw("wc: 10% 1 MiB of 10 MiB");
	shmrun_log(SHMRUN_LOG_INFO, "a line");
	shmrun_log_plain("records in:    5\n");
	shmrun_status_draw("wc: 20%");
	shmrun_status_end(NULL);
	ck_assert(!shmrun_status_enabled());
	shmrun_log(SHMRUN_LOG_INFO, "after");
	out = captured();
	ck_assert_msg(strncmp(out, "\r\033[Kwc: 10% 1 MiB of 10 MiB\r\033[K2", 32) == 0, "%s", out);
	ck_assert_msg(strstr(out, " wc INFO  launcher: a line\n\r\033[Krecords in:    5\n\r\033[Kwc: 20%"
				  "\r\033[K2") != NULL,
		      "%s", out);
	ck_assert_msg(strstr(out, " wc INFO  launcher: after\n") != NULL, "%s", out);
	ck_assert_ptr_null(strstr(out, "nothing"));
	ck_assert_ptr_null(strstr(strstr(out, "after"), "\033")); /* off after end() */
	free(out);
}
END_TEST

START_TEST(test_progress_text)
{
	char buf[256];

	shmrun_progress_format(buf, sizeof(buf), "wc", 12897485, 31562138, 8598323, 12);
	ck_assert_str_eq(buf, "wc: 40% 12.3 MiB of 30.1 MiB, 8.2 MiB/s, ETA 2 s, checkpoint 12");
	shmrun_progress_format(buf, sizeof(buf), "wc", 1000, 0, 500, 0);
	ck_assert_str_eq(buf, "wc: 1000 B read, 500 B/s");
	shmrun_progress_format(buf, sizeof(buf), "wc", 0, 4096, -1, 0);
	ck_assert_str_eq(buf, "wc: 0% 0 B of 4.0 KiB");
	shmrun_progress_format(buf, sizeof(buf), "wc", 4096, 4096, 100, 3);
	ck_assert_str_eq(buf, "wc: 100% 4.0 KiB of 4.0 KiB, 100 B/s, checkpoint 3");
	/* 1 GiB left at 1 MiB/s: 1024 s */
	shmrun_progress_format(buf, sizeof(buf), "wc", 0, 1ull << 30, 1 << 20, 0);
	ck_assert_str_eq(buf, "wc: 0% 0 B of 1.0 GiB, 1.0 MiB/s, ETA 17 min 4 s");
	shmrun_progress_format(buf, sizeof(buf), "wc", 0, 10ull << 30, 1 << 20, 0);
	ck_assert_str_eq(buf, "wc: 0% 0 B of 10.0 GiB, 1.0 MiB/s, ETA 2 h 50 min");
	/* cut short, still a string */
	shmrun_progress_format(buf, 12, "wc", 0, 4096, 1, 0);
	ck_assert_uint_lt(strlen(buf), 12);
}
END_TEST

START_TEST(test_parse)
{
	ck_assert_int_eq(shmrun_log_parse_format("text"), SHMRUN_LOG_TEXT);
	ck_assert_int_eq(shmrun_log_parse_format("json"), SHMRUN_LOG_JSON);
	ck_assert_int_eq(shmrun_log_parse_format("JSON"), -EINVAL);
	ck_assert_int_eq(shmrun_log_parse_format(""), -EINVAL);
	ck_assert_int_eq(shmrun_log_parse_format("xml"), -EINVAL);
}
END_TEST

static Suite *log_suite(void)
{
	Suite *s = suite_create("log");
	TCase *tc;

	tc = tcase_create("text");
	tcase_add_test(tc, test_text);
	suite_add_tcase(s, tc);
	tc = tcase_create("json");
	tcase_add_test(tc, test_json);
	suite_add_tcase(s, tc);
	tc = tcase_create("status");
	tcase_add_test(tc, test_status);
	suite_add_tcase(s, tc);
	tc = tcase_create("progress");
	tcase_add_test(tc, test_progress_text);
	suite_add_tcase(s, tc);
	tc = tcase_create("parse");
	tcase_add_test(tc, test_parse);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(log_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
