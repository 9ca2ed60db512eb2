/*
 * tests/unit/check_util.c: the runtime's shared idioms through runtime/util.h.
 *
 * TCases:
 *   grow        from an empty array, doubling with the contents kept, a jump
 *               past one doubling, @min 0, the uint32_t capacity variant
 *   exact       a need the capacity already holds changes nothing
 *   overflow    @need * @elem past SIZE_MAX and @need past UINT32_MAX are
 *               -ENOMEM with the array and its capacity untouched; @elem 0 is
 *               -EINVAL
 *   nomem       (not under sanitizers) a realloc that fails under an
 *               address-space limit: -ENOMEM, the old pointer still valid
 *   mkdir_p     nested directories, modes with and without EXACT whatever the
 *               umask, PARENT on a file path, existing paths, a file in the
 *               way, a path too long, the empty path
 *   read_all    a file read whole, in part, at its end, into 0 bytes; a pipe
 *               fed in pieces; a bad descriptor
 *   now_ns      monotonic, and a sleep is seen
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/address_space.h"
#include "common/tmpdir.h"
#include "util.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif

static int trial_n;

/* A fresh directory for one test under the suite's, into @dir (PATH_MAX). */
static void trial_dir(char *dir)
{
	snprintf(dir, PATH_MAX, "%s/t%d-%d", tmpdir, (int)getpid(), trial_n++);
	ck_assert_int_eq(mkdir(dir, 0700), 0);
}

static mode_t mode_of(const char *path)
{
	struct stat st;

	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	return st.st_mode & 07777;
}

/* ---- grow ------------------------------------------------------------------- */

START_TEST(test_grow_from_empty)
{
	uint64_t *v = NULL;
	size_t cap = 0;

	ck_assert_int_eq(shmrun_grow(&v, &cap, 1, sizeof(*v), 8), 0);
	ck_assert_ptr_nonnull(v);
	ck_assert_uint_eq(cap, 8);
	for (uint64_t i = 0; i < 8; i++)
		v[i] = i * 3;
	/* one past: doubles, contents kept */
	ck_assert_int_eq(shmrun_grow(&v, &cap, 9, sizeof(*v), 8), 0);
	ck_assert_uint_eq(cap, 16);
	for (uint64_t i = 0; i < 8; i++)
		ck_assert_uint_eq(v[i], i * 3);
	/* a jump past one doubling: the first power-of-two multiple that holds it */
	ck_assert_int_eq(shmrun_grow(&v, &cap, 100, sizeof(*v), 8), 0);
	ck_assert_uint_eq(cap, 128);
	v[99] = 7;
	for (uint64_t i = 0; i < 8; i++)
		ck_assert_uint_eq(v[i], i * 3);
	free(v);
}
END_TEST

START_TEST(test_grow_min_zero)
{
	char *p = NULL;
	size_t cap = 0;

	/* min 0 means 1: the sequence is 1, 2, 4 */
	ck_assert_int_eq(shmrun_grow(&p, &cap, 1, 1, 0), 0);
	ck_assert_uint_eq(cap, 1);
	ck_assert_int_eq(shmrun_grow(&p, &cap, 3, 1, 0), 0);
	ck_assert_uint_eq(cap, 4);
	/* a need above min on the first call doubles from min */
	free(p);
	p = NULL;
	cap = 0;
	ck_assert_int_eq(shmrun_grow(&p, &cap, 300, 1, 256), 0);
	ck_assert_uint_eq(cap, 512);
	free(p);
}
END_TEST

START_TEST(test_grow_u32)
{
	struct pair {
		uint32_t a, b;
	} *v = NULL;
	uint32_t cap = 0;

	ck_assert_int_eq(shmrun_grow_u32(&v, &cap, 1, sizeof(*v), 16), 0);
	ck_assert_uint_eq(cap, 16);
	for (uint32_t i = 0; i < 16; i++)
		v[i] = (struct pair){i, ~i};
	ck_assert_int_eq(shmrun_grow_u32(&v, &cap, 17, sizeof(*v), 16), 0);
	ck_assert_uint_eq(cap, 32);
	for (uint32_t i = 0; i < 16; i++) {
		ck_assert_uint_eq(v[i].a, i);
		ck_assert_uint_eq(v[i].b, ~i);
	}
	free(v);
}
END_TEST

START_TEST(test_exact)
{
	int *v = NULL, *was;
	size_t cap = 0;
	uint32_t cap32;

	ck_assert_int_eq(shmrun_grow(&v, &cap, 5, sizeof(*v), 4), 0);
	ck_assert_uint_eq(cap, 8);
	was = v;
	/* need == cap and need < cap: nothing moves */
	ck_assert_int_eq(shmrun_grow(&v, &cap, 8, sizeof(*v), 4), 0);
	ck_assert_ptr_eq(v, was);
	ck_assert_uint_eq(cap, 8);
	ck_assert_int_eq(shmrun_grow(&v, &cap, 0, sizeof(*v), 4), 0);
	ck_assert_ptr_eq(v, was);
	ck_assert_uint_eq(cap, 8);
	cap32 = 8;
	ck_assert_int_eq(shmrun_grow_u32(&v, &cap32, 8, sizeof(*v), 4), 0);
	ck_assert_ptr_eq(v, was);
	ck_assert_uint_eq(cap32, 8);
	free(v);
}
END_TEST

/* ---- overflow ------------------------------------------------------------- */

START_TEST(test_overflow)
{
	uint64_t *v = NULL, *was;
	size_t cap = 0;
	uint32_t cap32;

	ck_assert_int_eq(shmrun_grow(&v, &cap, 4, sizeof(*v), 4), 0);
	for (uint64_t i = 0; i < 4; i++)
		v[i] = 100 + i;
	was = v;
	/* need * elem past SIZE_MAX: refused before any allocation */
	ck_assert_int_eq(shmrun_grow(&v, &cap, SIZE_MAX / sizeof(*v) + 1, sizeof(*v), 4), -ENOMEM);
	ck_assert_int_eq(shmrun_grow(&v, &cap, SIZE_MAX, sizeof(*v), 4), -ENOMEM);
	ck_assert_ptr_eq(v, was);
	ck_assert_uint_eq(cap, 4);
	for (uint64_t i = 0; i < 4; i++)
		ck_assert_uint_eq(v[i], 100 + i);
	/* the uint32_t capacity cannot name more than UINT32_MAX */
	cap32 = 4;
	ck_assert_int_eq(shmrun_grow_u32(&v, &cap32, (size_t)UINT32_MAX + 1, sizeof(*v), 4),
			 -ENOMEM);
	ck_assert_ptr_eq(v, was);
	ck_assert_uint_eq(cap32, 4);
	/* elem 0 is a caller's mistake */
	ck_assert_int_eq(shmrun_grow(&v, &cap, 5, 0, 4), -EINVAL);
	ck_assert_ptr_eq(v, was);
	ck_assert_uint_eq(cap, 4);
	/* the array is still the caller's, whole */
	ck_assert_int_eq(shmrun_grow(&v, &cap, 5, sizeof(*v), 4), 0);
	ck_assert_uint_eq(cap, 8);
	for (uint64_t i = 0; i < 4; i++)
		ck_assert_uint_eq(v[i], 100 + i);
	free(v);
}
END_TEST

#ifndef SANITIZED
START_TEST(test_nomem)
{
	unsigned char *v = NULL, *was;
	size_t cap = 0;

	ck_assert_int_eq(shmrun_grow(&v, &cap, 4096, 1, 4096), 0);
	memset(v, 0x5a, cap);
	was = v;
	limit_address_space(64u << 20);
	/* 1 GiB does not fit: realloc fails, the old block is still ours */
	ck_assert_int_eq(shmrun_grow(&v, &cap, 1u << 30, 1, 4096), -ENOMEM);
	ck_assert_ptr_eq(v, was);
	ck_assert_uint_eq(cap, 4096);
	for (size_t i = 0; i < cap; i++)
		ck_assert_uint_eq(v[i], 0x5a);
	free(v);
}
END_TEST
#endif

/* ---- mkdir_p ---------------------------------------------------------------- */

START_TEST(test_mkdir_nested)
{
	char dir[PATH_MAX], path[PATH_MAX + 32];

	trial_dir(dir);
	snprintf(path, sizeof(path), "%s/a/b/c", dir);
	umask(0277); /* EXACT: 0700 all the same (the fork of this test only) */
	ck_assert_int_eq(shmrun_mkdir_p(path, 0700, SHMRUN_MKDIR_EXACT), 0);
	ck_assert_uint_eq(mode_of(path), 0700);
	snprintf(path, sizeof(path), "%s/a/b", dir);
	ck_assert_uint_eq(mode_of(path), 0700);
	snprintf(path, sizeof(path), "%s/a", dir);
	ck_assert_uint_eq(mode_of(path), 0700);
	/* again: everything exists, 0, modes left alone */
	snprintf(path, sizeof(path), "%s/a/b/c", dir);
	ck_assert_int_eq(chmod(path, 0750), 0);
	ck_assert_int_eq(shmrun_mkdir_p(path, 0700, SHMRUN_MKDIR_EXACT), 0);
	ck_assert_uint_eq(mode_of(path), 0750);
	/* without EXACT the umask applies */
	umask(022);
	snprintf(path, sizeof(path), "%s/u/v", dir);
	ck_assert_int_eq(shmrun_mkdir_p(path, 0777, 0), 0);
	ck_assert_uint_eq(mode_of(path), 0755);
	/* a trailing slash and a relative path */
	ck_assert_int_eq(chdir(dir), 0);
	ck_assert_int_eq(shmrun_mkdir_p("rel/x/", 0777, 0), 0);
	ck_assert_uint_eq(mode_of("rel/x"), 0755);
	ck_assert_int_eq(shmrun_mkdir_p(".", 0777, 0), 0);
	ck_assert_int_eq(shmrun_mkdir_p("/", 0777, 0), 0);
}
END_TEST

START_TEST(test_mkdir_parent)
{
	char dir[PATH_MAX], path[PATH_MAX + 32];
	struct stat st;

	trial_dir(dir);
	snprintf(path, sizeof(path), "%s/out/day/part.txt", dir);
	ck_assert_int_eq(shmrun_mkdir_p(path, 0777, SHMRUN_MKDIR_PARENT), 0);
	ck_assert_int_eq(stat(path, &st), -1); /* the file itself is not made */
	ck_assert_int_eq(errno, ENOENT);
	snprintf(path, sizeof(path), "%s/out/day", dir);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	/* a bare file name has no directory to make */
	ck_assert_int_eq(chdir(dir), 0);
	ck_assert_int_eq(shmrun_mkdir_p("part.txt", 0777, SHMRUN_MKDIR_PARENT), 0);
	ck_assert_int_eq(stat("part.txt", &st), -1);
}
END_TEST

START_TEST(test_mkdir_errors)
{
	char dir[PATH_MAX], path[PATH_MAX + 32], *longp;
	int fd;

	trial_dir(dir);
	/* a file where a directory should be */
	snprintf(path, sizeof(path), "%s/f", dir);
	fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	snprintf(path, sizeof(path), "%s/f/sub/deeper", dir);
	ck_assert_int_eq(shmrun_mkdir_p(path, 0700, SHMRUN_MKDIR_EXACT), -ENOTDIR);
	/* the last name being a file is passed over: the caller checks it */
	snprintf(path, sizeof(path), "%s/f", dir);
	ck_assert_int_eq(shmrun_mkdir_p(path, 0700, 0), 0);
	/* PATH_MAX bytes and longer */
	longp = malloc(PATH_MAX + 1);
	ck_assert_ptr_nonnull(longp);
	memset(longp, 'a', PATH_MAX);
	longp[PATH_MAX] = '\0';
	ck_assert_int_eq(shmrun_mkdir_p(longp, 0700, 0), -ENAMETOOLONG);
	free(longp);
	ck_assert_int_eq(shmrun_mkdir_p("", 0700, 0), -ENOENT);
	/* not writable: the error of mkdir(2) (root may write anywhere) */
	if (geteuid() != 0) {
		snprintf(path, sizeof(path), "%s/ro", dir);
		ck_assert_int_eq(mkdir(path, 0500), 0);
		snprintf(path, sizeof(path), "%s/ro/x/y", dir);
		ck_assert_int_eq(shmrun_mkdir_p(path, 0700, 0), -EACCES);
		snprintf(path, sizeof(path), "%s/ro", dir);
		ck_assert_int_eq(chmod(path, 0700), 0);
	}
}
END_TEST

/* ---- read_all --------------------------------------------------------------- */

START_TEST(test_read_file)
{
	char dir[PATH_MAX], path[PATH_MAX + 32];
	unsigned char data[10000], buf[20000];
	int fd;

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (unsigned char)(i * 7 + 1);
	trial_dir(dir);
	snprintf(path, sizeof(path), "%s/data", dir);
	fd = open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, data, sizeof(data)), (ssize_t)sizeof(data));
	/* in part from the start, then the rest up to the end */
	ck_assert_int_eq(lseek(fd, 0, SEEK_SET), 0);
	ck_assert_int_eq(shmrun_read_all(fd, buf, 4000), 4000);
	ck_assert_int_eq(memcmp(buf, data, 4000), 0);
	ck_assert_int_eq(shmrun_read_all(fd, buf + 4000, sizeof(buf) - 4000), 6000);
	ck_assert_int_eq(memcmp(buf, data, sizeof(data)), 0);
	/* at the end, and into nothing */
	ck_assert_int_eq(shmrun_read_all(fd, buf, sizeof(buf)), 0);
	ck_assert_int_eq(lseek(fd, 0, SEEK_SET), 0);
	ck_assert_int_eq(shmrun_read_all(fd, buf, 0), 0);
	ck_assert_int_eq(lseek(fd, 0, SEEK_CUR), 0);
	close(fd);
	/* an empty file */
	snprintf(path, sizeof(path), "%s/empty", dir);
	fd = open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(shmrun_read_all(fd, buf, sizeof(buf)), 0);
	close(fd);
	/* a bad descriptor and a directory */
	ck_assert_int_eq(shmrun_read_all(-1, buf, 1), -EBADF);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(shmrun_read_all(fd, buf, 1), -EISDIR);
	close(fd);
}
END_TEST

START_TEST(test_read_pipe)
{
	unsigned char buf[64];
	int p[2], status;
	pid_t pid;

	/* read(2) on a pipe returns what is there: the loop collects pieces */
	ck_assert_int_eq(pipe(p), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct timespec ms = {0, 2000000};

		close(p[0]);
		for (int k = 0; k < 5; k++) {
			unsigned char piece[7];

			memset(piece, 'a' + k, sizeof(piece));
			if (write(p[1], piece, sizeof(piece)) != (ssize_t)sizeof(piece))
				_exit(1);
			nanosleep(&ms, NULL);
		}
		_exit(0);
	}
	close(p[1]);
	ck_assert_int_eq(shmrun_read_all(p[0], buf, 20), 20);			 /* stops at @len */
	ck_assert_int_eq(shmrun_read_all(p[0], buf + 20, sizeof(buf) - 20), 15); /* then EOF */
	for (int i = 0; i < 35; i++)
		ck_assert_int_eq(buf[i], 'a' + i / 7);
	close(p[0]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
END_TEST

/* ---- now_ns ----------------------------------------------------------------- */

START_TEST(test_now_ns)
{
	struct timespec ms = {0, 1000000};
	int64_t a = shmrun_now_ns(), b, c;

	ck_assert_int_gt(a, 0);
	b = shmrun_now_ns();
	ck_assert_int_ge(b, a);
	nanosleep(&ms, NULL);
	c = shmrun_now_ns();
	ck_assert_int_ge(c - b, 1000000);
}
END_TEST

/* ---- shmrun_brace_expand() ------------------------------------------------- */

struct alts {
	char text[4096]; /* alternatives, each followed by '|' */
	int stop_at;     /* emit returns -EIO at this call (1-based), 0 never */
	int calls;
};

static int collect(void *arg, const char *alt)
{
	struct alts *a = arg;

	if (++a->calls == a->stop_at)
		return -EIO;
	if (strlen(a->text) + strlen(alt) + 2 <= sizeof(a->text)) { /* else: only counted */
		strcat(a->text, alt);
		strcat(a->text, "|");
	}
	return 0;
}

static void expect_alts(const char *pat, const char *want, uint32_t want_count)
{
	struct alts a = {.text = ""};
	uint32_t count = 0;

	ck_assert_int_eq(shmrun_brace_expand(pat, collect, &a, &count), 0);
	ck_assert_str_eq(a.text, want);
	ck_assert_uint_eq(count, want_count);
}

START_TEST(test_brace_forms)
{
	expect_alts("plain.txt", "plain.txt|", 1);
	expect_alts("", "|", 1);
	expect_alts("d/{a,b}.txt", "d/a.txt|d/b.txt|", 2);
	expect_alts("d/{a,b{1,2}}.txt", "d/a.txt|d/b1.txt|d/b2.txt|", 3);
	expect_alts("{x,y}{1,2}", "x1|x2|y1|y2|", 4);
	expect_alts("{,a}", "|a|", 2);            /* an empty alternative */
	expect_alts("{a}", "a|", 1);              /* one alternative */
	expect_alts("a{b", "a{b|", 1);            /* unclosed: literal */
	expect_alts("a\\{b,c}", "a\\{b,c}|", 1);  /* escaped '{': literal */
	expect_alts("{a\\,b,c}", "a\\,b|c|", 2);  /* escaped ',' stays in its alternative */
	expect_alts("{*.log,x?}", "*.log|x?|", 2); /* wildcards kept for glob(3) */
}
END_TEST

START_TEST(test_brace_limits)
{
	struct alts a = {.text = ""};
	uint32_t count = SHMRUN_BRACE_MAX - 1;

	/* the count runs across calls: one more fits, the second does not */
	ck_assert_int_eq(shmrun_brace_expand("{a,b}", collect, &a, &count), -E2BIG);
	ck_assert_str_eq(a.text, "a|");
	ck_assert_uint_eq(count, SHMRUN_BRACE_MAX + 1);
	/* 16 x 16 x 16 = 4096 alternatives fit exactly; x 2 more does not */
	count = 0;
	a = (struct alts){.stop_at = 0};
	ck_assert_int_eq(shmrun_brace_expand("{0,1,2,3,4,5,6,7,8,9,a,b,c,d,e,f}"
					     "{0,1,2,3,4,5,6,7,8,9,a,b,c,d,e,f}"
					     "{0,1,2,3,4,5,6,7,8,9,a,b,c,d,e,f}",
					     collect, &a, &count),
			 0);
	ck_assert_uint_eq(count, 4096);
	count = 0;
	ck_assert_int_eq(shmrun_brace_expand("{0,1,2,3,4,5,6,7,8,9,a,b,c,d,e,f}"
					     "{0,1,2,3,4,5,6,7,8,9,a,b,c,d,e,f}"
					     "{0,1,2,3,4,5,6,7,8,9,a,b,c,d,e,f}{x,y}",
					     collect, &a, &count),
			 -E2BIG);
}
END_TEST

START_TEST(test_brace_emit_error_stops)
{
	struct alts a = {.text = "", .stop_at = 2};
	uint32_t count = 0;

	ck_assert_int_eq(shmrun_brace_expand("{a,b,c}", collect, &a, &count), -EIO);
	ck_assert_str_eq(a.text, "a|");
	ck_assert_int_eq(a.calls, 2);
}
END_TEST

static Suite *util_suite(void)
{
	Suite *s = suite_create("util");
	TCase *tc;

	tc = tcase_create("grow");
	tcase_add_test(tc, test_grow_from_empty);
	tcase_add_test(tc, test_grow_min_zero);
	tcase_add_test(tc, test_grow_u32);
	suite_add_tcase(s, tc);
	tc = tcase_create("exact");
	tcase_add_test(tc, test_exact);
	suite_add_tcase(s, tc);
	tc = tcase_create("overflow");
	tcase_add_test(tc, test_overflow);
	suite_add_tcase(s, tc);
#ifndef SANITIZED
	tc = tcase_create("nomem");
	tcase_add_test(tc, test_nomem);
	suite_add_tcase(s, tc);
#endif
	tc = tcase_create("mkdir_p");
	tcase_add_test(tc, test_mkdir_nested);
	tcase_add_test(tc, test_mkdir_parent);
	tcase_add_test(tc, test_mkdir_errors);
	suite_add_tcase(s, tc);
	tc = tcase_create("read_all");
	tcase_add_test(tc, test_read_file);
	tcase_add_test(tc, test_read_pipe);
	suite_add_tcase(s, tc);
	tc = tcase_create("now_ns");
	tcase_add_test(tc, test_now_ns);
	suite_add_tcase(s, tc);
	tc = tcase_create("brace_expand");
	tcase_add_test(tc, test_brace_forms);
	tcase_add_test(tc, test_brace_limits);
	tcase_add_test(tc, test_brace_emit_error_stops);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(util_suite());
	int failed;

	tmpdir_create("shmrun-check-util");
	srunner_run_all(sr, CK_NORMAL);
	tmpdir_remove();
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
