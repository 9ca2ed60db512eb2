/*
 * tests/unit/check_jobsock.c: the job's socket through runtime/jobsock.h.
 *
 * TCases:
 *   dir      jobsock_dir_from()'s choice: $XDG_RUNTIME_DIR when an absolute
 *            path of a directory of ours, else RUN_USER/UID when ours, else
 *            TMP/shmrun-UID; made 0700 whatever the umask (also fixed when
 *            found with another mode); refused when a symbolic link or (as
 *            root) another user's; with create false nothing is made
 *   names    jobsock_name_ok(): '/', ".", "..", empty, too long
 *   lock     open makes JOB.sock and JOB.lock 0600 under umask 0; a second
 *            open of the name is -EEXIST naming our pid, and leaves the
 *            first's files; list and pid see the job; close removes both
 *   serve    a forked client gets a read-only descriptor of the block (a
 *            writable mapping of it fails, its bytes are the block's) and
 *            asks a stop, which jobsock_serve() reports; an unknown request
 *            is answered with an error
 *   stale    a launcher that exits without closing (kill -9) leaves JOB.sock:
 *            a client is told -ECONNREFUSED, the list is empty, and the next
 *            open replaces it
 *   longdir  a runtime directory too long for sun_path works through
 *            /proc/self/fd
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/tmpdir.h"
#include "jobsock.h"

static char why[1024];

/* @sub made under tmpdir with @mode; its path in a static buffer. */
static const char *make(const char *sub, mode_t mode)
{
	static char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", tmpdir, sub);
	ck_assert_int_eq(mkdir(path, mode), 0);
	ck_assert_int_eq(chmod(path, mode), 0);
	return path;
}

static mode_t mode_of(const char *path)
{
	struct stat st;

	ck_assert_int_eq(lstat(path, &st), 0);
	return st.st_mode & 07777;
}

START_TEST(test_dir_xdg)
{
	char xdg[PATH_MAX], buf[PATH_MAX], want[PATH_MAX + 16];

	snprintf(xdg, sizeof(xdg), "%s", make("xdg", 0700));
	umask(0777); /* the directory is 0700 all the same */
	ck_assert_int_eq(jobsock_dir_from(xdg, "/nonexistent", "/nonexistent", true, buf,
					  sizeof(buf), why, sizeof(why)),
			 0);
	snprintf(want, sizeof(want), "%s/shmrun", xdg);
	ck_assert_str_eq(buf, want);
	ck_assert_uint_eq(mode_of(buf), 0700);
}
END_TEST

START_TEST(test_dir_fallbacks)
{
	char ru[PATH_MAX], uid_dir[PATH_MAX + 16], tmp[PATH_MAX], file[PATH_MAX], buf[PATH_MAX];
	char want[PATH_MAX + 32];

	snprintf(ru, sizeof(ru), "%s", make("run_user", 0755));
	snprintf(tmp, sizeof(tmp), "%s", make("tmp", 01777));
	snprintf(file, sizeof(file), "%s/a_file", tmpdir);
	close(open(file, O_CREAT | O_WRONLY, 0600));
	/* no RUN_USER/UID: TMP/shmrun-UID, whatever XDG is when unusable */
	const char *bad_xdg[] = {NULL, "", "relative/dir", file, "/nonexistent/xdg"};

	snprintf(want, sizeof(want), "%s/shmrun-%u", tmp, (unsigned)geteuid());
	for (size_t i = 0; i < sizeof(bad_xdg) / sizeof(bad_xdg[0]); i++) {
		ck_assert_int_eq(
		    jobsock_dir_from(bad_xdg[i], ru, tmp, true, buf, sizeof(buf), why, sizeof(why)),
		    0);
		ck_assert_str_eq(buf, want);
	}
	ck_assert_uint_eq(mode_of(want), 0700);
	/* RUN_USER/UID of ours: RUN_USER/UID/shmrun */
	snprintf(uid_dir, sizeof(uid_dir), "%s/%u", ru, (unsigned)geteuid());
	ck_assert_int_eq(mkdir(uid_dir, 0700), 0);
	snprintf(want, sizeof(want), "%s/shmrun", uid_dir);
	ck_assert_int_eq(jobsock_dir_from(NULL, ru, tmp, true, buf, sizeof(buf), why, sizeof(why)),
			 0);
	ck_assert_str_eq(buf, want);
	ck_assert_uint_eq(mode_of(want), 0700);
}
END_TEST

START_TEST(test_dir_found_mode_fixed)
{
	char tmp[PATH_MAX], d[PATH_MAX + 32], buf[PATH_MAX];

	snprintf(tmp, sizeof(tmp), "%s", make("tmp_mode", 0755));
	snprintf(d, sizeof(d), "%s/shmrun-%u", tmp, (unsigned)geteuid());
	ck_assert_int_eq(mkdir(d, 0755), 0);
	ck_assert_int_eq(chmod(d, 0755), 0);
	ck_assert_int_eq(
	    jobsock_dir_from(NULL, "/nonexistent", tmp, true, buf, sizeof(buf), why, sizeof(why)),
	    0);
	ck_assert_uint_eq(mode_of(d), 0700);
}
END_TEST

START_TEST(test_dir_refused)
{
	char tmp[PATH_MAX], d[PATH_MAX + 32], target[PATH_MAX], buf[PATH_MAX];

	/* a symbolic link where the directory goes: someone could point it anywhere */
	snprintf(tmp, sizeof(tmp), "%s", make("tmp_link", 0755));
	snprintf(target, sizeof(target), "%s", make("elsewhere", 0700));
	snprintf(d, sizeof(d), "%s/shmrun-%u", tmp, (unsigned)geteuid());
	ck_assert_int_eq(symlink(target, d), 0);
	ck_assert_int_eq(
	    jobsock_dir_from(NULL, "/nonexistent", tmp, true, buf, sizeof(buf), why, sizeof(why)),
	    -ENOTDIR);
	ck_assert_ptr_nonnull(strstr(why, "symbolic link"));
	/* another user's (only root can make one) */
	if (geteuid() == 0) {
		snprintf(tmp, sizeof(tmp), "%s", make("tmp_other", 0755));
		snprintf(d, sizeof(d), "%s/shmrun-0", tmp);
		ck_assert_int_eq(mkdir(d, 0700), 0);
		ck_assert_int_eq(chown(d, 65534, 65534), 0);
		ck_assert_int_eq(jobsock_dir_from(NULL, "/nonexistent", tmp, true, buf, sizeof(buf),
						  why, sizeof(why)),
				 -EPERM);
		ck_assert_ptr_nonnull(strstr(why, "belongs to uid 65534"));
	}
}
END_TEST

START_TEST(test_dir_no_create)
{
	char tmp[PATH_MAX], d[PATH_MAX + 32], buf[PATH_MAX];

	snprintf(tmp, sizeof(tmp), "%s", make("tmp_nocreate", 0755));
	snprintf(d, sizeof(d), "%s/shmrun-%u", tmp, (unsigned)geteuid());
	ck_assert_int_eq(
	    jobsock_dir_from(NULL, "/nonexistent", tmp, false, buf, sizeof(buf), why, sizeof(why)),
	    -ENOENT);
	ck_assert_int_eq(access(d, F_OK), -1);
}
END_TEST

START_TEST(test_names)
{
	char long_name[JOBSOCK_NAME_MAX + 2];

	ck_assert(jobsock_name_ok("wordcount"));
	ck_assert(jobsock_name_ok("a.b-c_1"));
	ck_assert(jobsock_name_ok(".hidden"));
	ck_assert(!jobsock_name_ok(""));
	ck_assert(!jobsock_name_ok(NULL));
	ck_assert(!jobsock_name_ok("."));
	ck_assert(!jobsock_name_ok(".."));
	ck_assert(!jobsock_name_ok("a/b"));
	memset(long_name, 'x', sizeof(long_name) - 1);
	long_name[JOBSOCK_NAME_MAX] = 0;
	ck_assert(jobsock_name_ok(long_name));
	long_name[JOBSOCK_NAME_MAX] = 'x';
	long_name[JOBSOCK_NAME_MAX + 1] = 0;
	ck_assert(!jobsock_name_ok(long_name));
}
END_TEST

/* XDG_RUNTIME_DIR = a new directory @sub under tmpdir; the jobs' directory into @dir. */
static void private_runtime(const char *sub, char *dir, size_t len)
{
	setenv("XDG_RUNTIME_DIR", make(sub, 0700), 1);
	snprintf(dir, len, "%s/shmrun", getenv("XDG_RUNTIME_DIR"));
}

static bool exists(const char *dir, const char *name)
{
	char p[PATH_MAX + 128];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return access(p, F_OK) == 0;
}

START_TEST(test_lock)
{
	struct jobsock a, b;
	char dir[PATH_MAX], p[PATH_MAX + 64], want[64], **names;

	private_runtime("rt_lock", dir, sizeof(dir));
	umask(0);
	ck_assert_int_eq(jobsock_open(&a, "j1", -1, why, sizeof(why)), 0);
	snprintf(p, sizeof(p), "%s/j1.sock", dir);
	ck_assert_uint_eq(mode_of(p), 0600);
	snprintf(p, sizeof(p), "%s/j1.lock", dir);
	ck_assert_uint_eq(mode_of(p), 0600);
	ck_assert_uint_eq(mode_of(dir), 0700);
	/* a second job of the name: refused with our pid, the first's files kept */
	ck_assert_int_eq(jobsock_open(&b, "j1", -1, why, sizeof(why)), -EEXIST);
	snprintf(want, sizeof(want), "job j1 is already running (pid %d)", (int)getpid());
	ck_assert_ptr_nonnull(strstr(why, want));
	ck_assert(exists(dir, "j1.sock") && exists(dir, "j1.lock"));
	ck_assert_int_eq(jobsock_list(&names), 1);
	ck_assert_str_eq(names[0], "j1");
	jobsock_list_free(names, 1);
	ck_assert_int_eq(jobsock_pid("j1"), getpid());
	ck_assert_int_eq(jobsock_pid("j2"), -ENOENT);
	jobsock_close(&b); /* never opened: a no-op */
	jobsock_close(&a);
	ck_assert(!exists(dir, "j1.sock") && !exists(dir, "j1.lock"));
	ck_assert_int_eq(jobsock_list(&names), 0);
	ck_assert_int_eq(jobsock_metrics_fd("j1", why, sizeof(why)), -ENOENT);
	ck_assert_ptr_nonnull(strstr(why, "no job named j1 is running"));
	/* a bad name is refused */
	ck_assert_int_eq(jobsock_open(&b, "a/b", -1, why, sizeof(why)), -EINVAL);
}
END_TEST

/* Serve @js until child @pid exits. Return: whether a stop was asked; its exit status in *@st. */
static bool serve_until(struct jobsock *js, pid_t pid, int *st)
{
	bool stop = false;

	for (int i = 0; i < 1000; i++) {
		if (jobsock_serve(js))
			stop = true;
		if (waitpid(pid, st, WNOHANG) == pid)
			return stop;
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, st, 0);
	ck_abort_msg("the client did not finish within 10 s");
	return stop;
}

/* The client: a read-only descriptor of the 4 KiB block "metrics!". Exit: 0 if so. */
static int metrics_client(const char *job)
{
	int fd = jobsock_metrics_fd(job, why, sizeof(why));
	char b[9] = "";
	struct stat st;
	void *w;

	if (fd < 0) {
		fprintf(stderr, "client: %s\n", why);
		return 1;
	}
	if (fstat(fd, &st) || st.st_size != 4096 || pread(fd, b, 8, 0) != 8 ||
	    strcmp(b, "metrics!") != 0)
		return 2;
	w = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (w != MAP_FAILED || errno != EACCES)
		return 3; /* the client can write the block */
	if (write(fd, "x", 1) != -1)
		return 4;
	return 0;
}

START_TEST(test_serve)
{
	struct jobsock js;
	char dir[PATH_MAX];
	int mfd = memfd_create("test-metrics", MFD_CLOEXEC), st;
	pid_t pid;

	ck_assert_int_ge(mfd, 0);
	ck_assert_int_eq(ftruncate(mfd, 4096), 0);
	ck_assert_int_eq(pwrite(mfd, "metrics!", 8, 0), 8);
	private_runtime("rt_serve", dir, sizeof(dir));
	ck_assert_int_eq(jobsock_open(&js, "j2", mfd, why, sizeof(why)), 0);
	/* metrics, also with the only job named by NULL */
	for (int i = 0; i < 2; i++) {
		pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0)
			_exit(metrics_client(i ? NULL : "j2"));
		ck_assert(!serve_until(&js, pid, &st));
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "metrics client: status %d",
			      st);
	}
	/* stop: the launcher's pid, a pidfd of it */
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int pidfd;
		pid_t l = jobsock_request_stop("j2", &pidfd, why, sizeof(why));

		_exit(l == getppid() && pidfd >= 0 ? 0 : 1);
	}
	ck_assert(serve_until(&js, pid, &st));
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* without counters: "metrics" is answered with an error */
	jobsock_close(&js);
	ck_assert_int_eq(jobsock_open(&js, "j2", -1, why, sizeof(why)), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(jobsock_metrics_fd("j2", why, sizeof(why)) == -ENODATA &&
			      strstr(why, "without counters")
			  ? 0
			  : 1);
	ck_assert(!serve_until(&js, pid, &st));
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	jobsock_close(&js);
	close(mfd);
}
END_TEST

START_TEST(test_stale)
{
	struct jobsock js;
	char dir[PATH_MAX], **names;
	int st;
	pid_t pid;

	private_runtime("rt_stale", dir, sizeof(dir));
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(jobsock_open(&js, "j3", -1, why, sizeof(why)) ? 1 : 0); /* no close */
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	ck_assert(exists(dir, "j3.sock"));
	ck_assert_int_eq(jobsock_metrics_fd("j3", why, sizeof(why)), -ECONNREFUSED);
	ck_assert_ptr_nonnull(strstr(why, "left by a launcher that was killed"));
	ck_assert_int_eq(jobsock_list(&names), 0);
	ck_assert_int_eq(jobsock_open(&js, "j3", -1, why, sizeof(why)), 0);
	ck_assert_int_eq(jobsock_pid("j3"), getpid());
	jobsock_close(&js);
	ck_assert(!exists(dir, "j3.sock") && !exists(dir, "j3.lock"));
}
END_TEST

START_TEST(test_long_dir)
{
	struct jobsock js;
	char sub[200], dir[PATH_MAX];
	int st;
	pid_t pid;

	memset(sub, 'd', 150);
	sub[150] = 0;
	private_runtime(sub, dir, sizeof(dir));
	ck_assert_uint_gt(strlen(dir), 108);
	ck_assert_int_eq(jobsock_open(&js, "j4", -1, why, sizeof(why)), 0);
	ck_assert(exists(dir, "j4.sock"));
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(jobsock_request_stop("j4", NULL, why, sizeof(why)) == getppid() ? 0 : 1);
	ck_assert(serve_until(&js, pid, &st));
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	jobsock_close(&js);
	ck_assert(!exists(dir, "j4.sock"));
}
END_TEST

static Suite *jobsock_suite(void)
{
	Suite *s = suite_create("jobsock");
	TCase *tc;

	tc = tcase_create("dir");
	tcase_add_test(tc, test_dir_xdg);
	tcase_add_test(tc, test_dir_fallbacks);
	tcase_add_test(tc, test_dir_found_mode_fixed);
	tcase_add_test(tc, test_dir_refused);
	tcase_add_test(tc, test_dir_no_create);
	suite_add_tcase(s, tc);
	tc = tcase_create("names");
	tcase_add_test(tc, test_names);
	suite_add_tcase(s, tc);
	tc = tcase_create("lock");
	tcase_add_test(tc, test_lock);
	suite_add_tcase(s, tc);
	tc = tcase_create("serve");
	tcase_add_test(tc, test_serve);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	tc = tcase_create("stale");
	tcase_add_test(tc, test_stale);
	suite_add_tcase(s, tc);
	tc = tcase_create("longdir");
	tcase_add_test(tc, test_long_dir);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(jobsock_suite());
	int failed;

	tmpdir_create("shmrun-check-jobsock");
	srunner_run_all(sr, CK_NORMAL);
	tmpdir_remove();
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
