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
#include <stdbool.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"
#include "multihost.h"
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
	/* brace patterns, as file_source's glob(GLOB_BRACE) expands them */
	mkdir(strcat(strcpy(a, tmpdir), "/d"), 0777);
	put("d/a.txt", "1\n");
	put("d/b.txt", "1\n");
	ck_assert_int_eq(preflight_of("d/{a,b}.txt", "d/a.txt", 1), -EINVAL);
	ck_assert_int_eq(preflight_of("d/{c,{z,a}}.txt", "d/a.txt", 1), -EINVAL); /* nested */
	ck_assert_int_eq(preflight_of("d/{c,*}.txt", "d/new.txt", 1), -EINVAL);   /* not there yet */
	ck_assert_int_eq(preflight_of("{d,e}/[ab].txt", "d/b.txt", 1), -EINVAL);
	ck_assert_int_eq(preflight_of("{d,e}", "e/o.tsv", 1), -EINVAL); /* a directory to be */
	ck_assert_int_eq(preflight_of("d/{a,b}.txt", "d/c.txt", 1), 0);
	ck_assert_int_eq(preflight_of("d/{a,b}.txt", "d/{a,b}.tsv", 1), 0);
	/* inside a directory the pattern matches once the run creates it */
	ck_assert_int_eq(preflight_of("d/*", "d/sub/new.txt", 1), -EINVAL);
	ck_assert_int_eq(preflight_of("d/{x,s*}", "d/sub/deeper/new.txt", 1), -EINVAL);
	ck_assert_int_eq(preflight_of("d/*.txt", "d/sub/new.txt", 1), 0);
	/* an input directory that does not exist yet */
	ck_assert_int_eq(preflight_of("later", "later/o.tsv", 1), -EINVAL);
	/* the lock file .o.tsv.lock beside the output, matched by an input */
	ck_assert_int_eq(preflight_of("d/.*", "d/o.tsv", 1), -EINVAL);
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

/* Outputs that are not regular files, and names too long for their lock file. */
START_TEST(output_not_a_regular_file_or_too_long)
{
	char p[512];

	put("data.txt", "1\n");
	snprintf(p, sizeof(p), "%s/fifo", tmpdir);
	unlink(p);
	ck_assert_int_eq(mkfifo(p, 0600), 0);
	ck_assert_int_eq(preflight_of("data.txt", "fifo", 1), -EINVAL);
	ck_assert_int_eq(preflight_of("data.txt", "/dev/null", 1), -EINVAL);
	/* .<name>.lock is 6 bytes longer than the output's path: a conf in a
	 * directory of about 4050 bytes, an output named relative to it */
	{
		char dir[4200], conf[4300], text[1024], name[300];
		struct shmrun_job job;
		struct shmrun_job_errors errs = {0};
		size_t n = strlen(tmpdir);
		FILE *f;

		snprintf(dir, sizeof(dir), "%s", tmpdir);
		while (n + 201 < 4050) {
			dir[n++] = '/';
			memset(dir + n, 'a', 200);
			n += 200;
			dir[n] = 0;
			ck_assert(mkdir(dir, 0777) == 0 || errno == EEXIST);
		}
		snprintf(conf, sizeof(conf), "%s/t.conf", dir);
		for (size_t total = 4088; total <= 4095; total++) {
			size_t k = total - n - 1;

			memset(name, 'n', k);
			name[k] = 0;
			snprintf(text, sizeof(text),
				 "[read]\nop = file_source\npath = %s/data.txt\n"
				 "[out]\nop = file_sink\ninput = read\npath = %s\n",
				 tmpdir, name);
			f = fopen(conf, "w");
			ck_assert_ptr_nonnull(f);
			fputs(text, f);
			fclose(f);
			ck_assert_int_eq(shmrun_job_load(conf, &job, &errs), 0);
			/* up to 4089 bytes, its lock's path has at most 4095 */
			ck_assert_int_eq(shmrun_preflight(&job), total <= 4089 ? 0 : -EINVAL);
			shmrun_job_free(&job);
		}
	}
}
END_TEST

/* Load @conf (a file in tmpdir) into @job. */
static void load(const char *conf, struct shmrun_job *job)
{
	struct shmrun_job_errors errs = {0};
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", tmpdir, conf);
	ck_assert_int_eq(shmrun_job_load(path, job, &errs), 0);
}

static bool exists(const char *name)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	return access(path, F_OK) == 0;
}

/* Run @fn(@job) in a child that forgot the parent's locks; its result. */
static int in_child(int (*fn)(const struct shmrun_job *), const struct shmrun_job *job)
{
	int status;
	pid_t child = fork();

	if (child == 0) {
		shmrun_locks_forget();
		_exit(-fn(job));
	}
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert(WIFEXITED(status));
	return -WEXITSTATUS(status);
}

/*
 * An output is locked by its identity too: the launcher creates it and holds
 * a lock on the file, so a job naming it through a hard link is refused; a
 * refused run creates nothing (no checkpoint_dir, no output directory).
 */
START_TEST(locks_by_identity_and_create_nothing_when_refused)
{
	struct shmrun_job a, b, c, f;
	char x[512], y[512];

	put("data.txt", "1\n");
	put("ia.conf", "[job]\ncheckpoint_dir = ia_ck\n[read]\nop = file_source\npath = data.txt\n"
		       "[out]\nop = file_sink\ninput = read\npath = h/o.tsv\n");
	put("ib.conf", "[read]\nop = file_source\npath = data.txt\n"
		       "[out]\nop = file_sink\ninput = read\npath = h2/hard.tsv\n");
	put("ic.conf", "[job]\ncheckpoint_dir = ic_ck/deep\n[read]\nop = file_source\n"
		       "path = data.txt\n[a]\nop = file_sink\ninput = read\npath = ic_out/x.tsv\n"
		       "[b]\nop = file_sink\ninput = read\npath = h/o.tsv\n");
	load("ia.conf", &a);
	load("ib.conf", &b);
	load("ic.conf", &c);
	ck_assert_int_eq(shmrun_lock_job(&a), 0);
	ck_assert(exists("h/o.tsv")); /* created, so that it is locked from the start */
	mkdir(strcat(strcpy(x, tmpdir), "/h2"), 0777);
	snprintf(x, sizeof(x), "%s/h/o.tsv", tmpdir);
	snprintf(y, sizeof(y), "%s/h2/hard.tsv", tmpdir);
	unlink(y);
	ck_assert_int_eq(link(x, y), 0);
	ck_assert_int_eq(in_child(shmrun_lock_job, &b), -EBUSY);
	ck_assert(!exists("h2/.hard.tsv.lock"));
	ck_assert_int_eq(in_child(shmrun_lock_job, &c), -EBUSY);
	ck_assert(!exists("ic_ck"));
	ck_assert(!exists("ic_out"));
	shmrun_unlock_job();
	ck_assert_int_eq(in_child(shmrun_lock_job, &b), 0);
	/* no lock file beside a FIFO */
	snprintf(x, sizeof(x), "%s/ff", tmpdir);
	unlink(x);
	ck_assert_int_eq(mkfifo(x, 0600), 0);
	put("if.conf", "[read]\nop = file_source\npath = data.txt\n"
		       "[out]\nop = file_sink\ninput = read\npath = ff\n");
	load("if.conf", &f);
	ck_assert_int_eq(in_child(shmrun_lock_job, &f), -EINVAL);
	ck_assert(!exists(".ff.lock"));
	shmrun_job_free(&a);
	shmrun_job_free(&b);
	shmrun_job_free(&c);
	shmrun_job_free(&f);
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

/*
 * hosts = 2 (docs/multihost.md): each host's launcher locks checkpoint_dir as
 * .lock.hH (host 0 also .lock) and only the outputs of the sink instances
 * placed on it, so two "hosts" on one machine run side by side; a second
 * start of the same host is refused; a one-host run of the same directory is
 * refused by host 0's .lock.
 */
START_TEST(locks_per_host)
{
	struct shmrun_job job, one;
	struct shmrun_job_errors errs = {0};
	char path[512], why[512];
	uint32_t host = 9;
	int status;
	pid_t child;

	put("data.txt", "1\n");
	/* 4 members: out[0..3] on workers 0..3, hosts 0, 0, 1, 1 */
	put("mh.conf", "[job]\nhosts = 2\nworkers = 2\ncheckpoint_dir = mhck\n"
		       "[read]\nop = file_source\npath = data.txt\n"
		       "[out]\nop = file_sink\ninput = read\npath = mh/o.tsv\nwidth = 4\n");
	put("one.conf", "[job]\ncheckpoint_dir = mhck\n[read]\nop = file_source\npath = data.txt\n"
			"[out]\nop = null_sink\ninput = read\n");
	snprintf(path, sizeof(path), "%s/mh.conf", tmpdir);
	ck_assert_int_eq(shmrun_job_load(path, &job, &errs), 0);
	snprintf(path, sizeof(path), "%s/one.conf", tmpdir);
	ck_assert_int_eq(shmrun_job_load(path, &one, &errs), 0);

	/* host 1, as mpirun's rank 1 of 2 */
	setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
	setenv("OMPI_COMM_WORLD_RANK", "1", 1);
	/* mpirun (Open MPI 4.1) also sets its PMIx server: multihost.c trusts the pair only then */
	setenv("PMIX_NAMESPACE", "1882980353", 1);
	setenv("PMIX_SERVER_URI41", "1882980352.0;tcp4://127.0.0.1:47773", 1);
	ck_assert_int_eq(shmrun_hosts_check(&job, &host, why, sizeof(why)), 0);
	ck_assert_uint_eq(host, 1);
	ck_assert_uint_eq(shmrun_host_self(), 1);
	ck_assert_int_eq(shmrun_lock_job(&job), 0);
	ck_assert(exists("mhck/.lock.h1"));
	ck_assert(!exists("mhck/.lock"));
	ck_assert(exists("mh/o.tsv.2") && exists("mh/o.tsv.3"));
	ck_assert(exists("mh/.o.tsv.2.lock") && exists("mh/.o.tsv.3.lock"));
	ck_assert(!exists("mh/o.tsv.0") && !exists("mh/o.tsv.1"));
	ck_assert(!exists("mh/.o.tsv.lock")); /* instance 0's host takes it */
	/* a second start of host 1: refused (in a child, which holds no lock) */
	ck_assert_int_eq(in_child(shmrun_lock_job, &job), -EBUSY);

	/* host 0 beside it, in another process: its own files, no conflict */
	child = fork();
	if (child == 0) {
		shmrun_locks_forget();
		setenv("OMPI_COMM_WORLD_RANK", "0", 1);
		if (shmrun_hosts_check(&job, &host, why, sizeof(why)) || host != 0 ||
		    shmrun_lock_job(&job))
			_exit(1);
		/* while host 0 holds .lock, a one-host run of the directory is refused */
		unsetenv("OMPI_COMM_WORLD_SIZE");
		unsetenv("PMIX_NAMESPACE");
		unsetenv("PMIX_SERVER_URI41");
		_exit(in_child(shmrun_lock_job, &one) == -EBUSY ? 0 : 2);
	}
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "host 0: status %d", status);
	ck_assert(exists("mhck/.lock.h0") && exists("mhck/.lock"));
	ck_assert(exists("mh/o.tsv.0") && exists("mh/o.tsv.1") && exists("mh/.o.tsv.lock"));
	shmrun_unlock_job();
	unsetenv("OMPI_COMM_WORLD_SIZE");
	unsetenv("PMIX_NAMESPACE");
	unsetenv("PMIX_SERVER_URI41");
	unsetenv("OMPI_COMM_WORLD_RANK");
	shmrun_job_free(&job);
	shmrun_job_free(&one);
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
	tcase_add_test(tc, output_not_a_regular_file_or_too_long);
	suite_add_tcase(s, tc);
	tc = tcase_create("locks");
	tcase_add_test(tc, locks_exclude_other_processes);
	tcase_add_test(tc, locks_cover_every_instance_file);
	tcase_add_test(tc, locks_by_identity_and_create_nothing_when_refused);
	tcase_add_test(tc, errno_classes);
	tcase_add_test(tc, locks_per_host);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	tmpdir_remove();
	return failed ? 1 : 0;
}
