/*
 * tests/unit/check_preflight.c: runtime/preflight.c — inputs against outputs,
 * writability, and the run's locks (issue 8, items 4, 6, 9, 15).
 *
 * Every PATH/PATHS key of every built-in operator says whether it is an input
 * or an output; an output that is an input (same file, hard link, inside an
 * input directory, matched by a glob, per instance for width k) is refused,
 * distinct files are not; the locks exclude another process, survive a
 * worker's shmrun_locks_forget(), and are taken once per process.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "preflight.h"
#include "shmrun/job.h"
#include "shmrun/operator.h"
#include "shmrun/runtime.h"
#include "common/tmpdir.h"

static void put(const char *name, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

/* Load a conf whose [read] reads @in and whose [out] (width @width) writes @out. */
static int preflight_of(const char *in, const char *out, unsigned width)
{
	struct shmrun_job job;
	struct shmrun_job_errors errs = {0};
	char conf[1024], path[512];
	int err;

	snprintf(conf, sizeof(conf),
		 "[read]\nop = file_source\npath = %s\nwidth = %u\n"
		 "[out]\nop = file_sink\ninput = read\npath = %s\nwidth = %u\n",
		 in, width, out, width);
	put("t.conf", conf);
	snprintf(path, sizeof(path), "%s/t.conf", tmpdir);
	err = shmrun_job_load(path, &job, &errs);
	ck_assert_msg(err == 0, "load: %s", errs.n ? errs.msgs[0] : "?");
	err = shmrun_preflight(&job);
	shmrun_job_free(&job);
	return err;
}

START_TEST(every_path_key_declares_input_or_output)
{
	const struct shmrun_operator *const *ops = shmrun_operators();

	for (; *ops; ops++)
		for (const struct shmrun_param_def *d = (*ops)->params; d && d->key; d++)
			if (d->type == SHMRUN_PARAM_PATH || d->type == SHMRUN_PARAM_PATHS)
				ck_assert_msg(d->io != SHMRUN_PARAM_IO_NONE,
					      "%s: key %s names a file but declares no io",
					      (*ops)->name, d->key);
}
END_TEST

START_TEST(builtin_declarations)
{
	struct {
		const char *op, *key;
		enum shmrun_param_io io;
	} want[] = {
	    {"file_source", "path", SHMRUN_PARAM_INPUT},
	    {"lookup", "table", SHMRUN_PARAM_INPUT},
	    {"file_sink", "path", SHMRUN_PARAM_OUTPUT},
	};

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const struct shmrun_operator *op = shmrun_operator_find(want[i].op);
		const struct shmrun_param_def *d;

		ck_assert_ptr_nonnull(op);
		for (d = op->params; d->key && strcmp(d->key, want[i].key) != 0; d++)
			;
		ck_assert_ptr_nonnull(d->key);
		ck_assert_int_eq(d->io, want[i].io);
	}
}
END_TEST

START_TEST(output_that_is_an_input)
{
	char a[512], b[512];

	put("data.txt", "1\n2\n");
	mkdir(strcat(strcpy(a, tmpdir), "/in"), 0777);
	put("in/x.txt", "1\n");
	snprintf(a, sizeof(a), "%s/data.txt", tmpdir);
	snprintf(b, sizeof(b), "%s/alias.txt", tmpdir);
	unlink(b);
	ck_assert_int_eq(link(a, b), 0);
	ck_assert_int_eq(preflight_of("data.txt", "data.txt", 1), -EINVAL);
	ck_assert_int_eq(preflight_of("data.txt", "./data.txt", 1), -EINVAL);
	ck_assert_int_eq(preflight_of("data.txt", "alias.txt", 1), -EINVAL);  /* same inode */
	ck_assert_int_eq(preflight_of("in", "in/deeper/o.tsv", 1), -EINVAL);  /* inside a dir */
	ck_assert_int_eq(preflight_of("in/*.txt", "in/new.txt", 1), -EINVAL); /* glob */
	/* width 2 writes path.0 and path.1 */
	put("o.tsv.1", "x\n");
	ck_assert_int_eq(preflight_of("o.tsv.1", "o.tsv", 2), -EINVAL);
	/* apart */
	ck_assert_int_eq(preflight_of("data.txt", "out/data.txt", 1), 0);
	ck_assert_int_eq(preflight_of("in/*.txt", "in.txt", 1), 0);
	ck_assert_int_eq(preflight_of("o.tsv.1", "o.tsv", 1), 0);
}
END_TEST

START_TEST(output_not_a_directory)
{
	char d[512];

	snprintf(d, sizeof(d), "%s/adir", tmpdir);
	mkdir(d, 0777);
	put("data.txt", "1\n");
	ck_assert_int_eq(preflight_of("data.txt", "adir", 1), -EINVAL);
	put("afile", "x\n");
	ck_assert_int_eq(preflight_of("data.txt", "afile/o.tsv", 1), -EINVAL);
}
END_TEST

START_TEST(locks_exclude_other_processes)
{
	struct shmrun_job job;
	struct shmrun_job_errors errs = {0};
	char path[512], lock[600], pid[32] = "";
	int status, fd;
	pid_t child;

	put("data.txt", "1\n");
	put("l.conf", "[job]\ncheckpoint_dir = ck\n[read]\nop = file_source\npath = data.txt\n"
		      "[out]\nop = file_sink\ninput = read\npath = out/o.tsv\n");
	snprintf(path, sizeof(path), "%s/l.conf", tmpdir);
	ck_assert_int_eq(shmrun_job_load(path, &job, &errs), 0);
	ck_assert_int_eq(shmrun_lock_job(&job), 0);
	ck_assert_int_eq(shmrun_lock_job(&job), 0); /* idempotent in one process */
	snprintf(lock, sizeof(lock), "%s/ck/.lock", tmpdir);
	fd = open(lock, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_gt(read(fd, pid, sizeof(pid) - 1), 0);
	close(fd);
	ck_assert_int_eq(atoi(pid), getpid());
	child = fork();
	if (child == 0) {
		/* a worker: forgets its copies, the parent keeps the lock */
		shmrun_locks_forget();
		_exit(shmrun_lock_job(&job) == -EBUSY ? 0 : 1);
	}
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "another process could take the lock, or the forgotten copy released it");
	shmrun_unlock_job();
	child = fork();
	if (child == 0)
		_exit(shmrun_lock_job(&job) == 0 ? 0 : 1);
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "unlocked, yet refused");
	snprintf(lock, sizeof(lock), "%s/out/.o.tsv.lock", tmpdir);
	ck_assert_int_eq(access(lock, F_OK), 0);
	shmrun_job_free(&job);
}
END_TEST

/* A width-2 sink writes o.tsv.0 and o.tsv.1: a width-1 job naming o.tsv.1 is excluded. */
START_TEST(locks_cover_every_instance_file)
{
	struct shmrun_job a, b;
	struct shmrun_job_errors errs = {0};
	char path[512];
	int status;
	pid_t child;

	put("data.txt", "1\n");
	put("a.conf", "[read]\nop = file_source\npath = data.txt\nwidth = 2\n"
		      "[out]\nop = file_sink\ninput = read\npath = w/o.tsv\nwidth = 2\n");
	put("b.conf", "[read]\nop = file_source\npath = data.txt\n"
		      "[out]\nop = file_sink\ninput = read\npath = w/o.tsv.1\n");
	snprintf(path, sizeof(path), "%s/a.conf", tmpdir);
	ck_assert_int_eq(shmrun_job_load(path, &a, &errs), 0);
	snprintf(path, sizeof(path), "%s/b.conf", tmpdir);
	ck_assert_int_eq(shmrun_job_load(path, &b, &errs), 0);
	ck_assert_int_eq(shmrun_lock_job(&a), 0);
	child = fork();
	if (child == 0) {
		shmrun_locks_forget();
		_exit(shmrun_lock_job(&b) == -EBUSY ? 0 : 1);
	}
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "a job writing o.tsv.1 was not excluded by one writing o.tsv with width 2");
	shmrun_unlock_job();
	shmrun_job_free(&a);
	shmrun_job_free(&b);
}
END_TEST

START_TEST(errno_classes)
{
	ck_assert(shmrun_errno_is_permanent(EACCES));
	ck_assert(shmrun_errno_is_permanent(EROFS));
	ck_assert(shmrun_errno_is_permanent(EPERM));
	ck_assert(!shmrun_errno_is_permanent(EIO));
	ck_assert(!shmrun_errno_is_permanent(ENOSPC));
	ck_assert(shmrun_errno_is_lasting(ENOSPC));
	ck_assert(shmrun_errno_is_lasting(EDQUOT));
	ck_assert(!shmrun_errno_is_lasting(EIO));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("preflight");
	TCase *tc = tcase_create("declarations");
	SRunner *sr;
	int failed;

	tmpdir_create("check_preflight");
	shmrun_log_set_level(SHMRUN_LOG_ERROR); /* the refusals are expected */
	tcase_add_test(tc, every_path_key_declares_input_or_output);
	tcase_add_test(tc, builtin_declarations);
	suite_add_tcase(s, tc);
	tc = tcase_create("inputs_and_outputs");
	tcase_add_test(tc, output_that_is_an_input);
	tcase_add_test(tc, output_not_a_directory);
	suite_add_tcase(s, tc);
	tc = tcase_create("locks");
	tcase_add_test(tc, locks_exclude_other_processes);
	tcase_add_test(tc, locks_cover_every_instance_file);
	tcase_add_test(tc, errno_classes);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	tmpdir_remove();
	return failed ? 1 : 0;
}
