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
 *   hosts    a multi-host job's hosts here, NAME.h0, NAME.h1, ...: the name
 *            rules (jobsock_host_of(), jobsock_base_len(), the ps order
 *            NAME.h2 before NAME.h10), jobsock_list_hosts(); and with two
 *            forked fake launchers of job "mh" (real metrics blocks of a
 *            hosts = 2 plan): `shmrun ps` lists mh.h0 then mh.h1 with a HOST
 *            column 0/2, 1/2 and one worker each (--json: host, hosts);
 *            `shmrun top mh` asks which; `shmrun stop mh` sends one stop (to
 *            mh.h0: a second request would stop without the final
 *            checkpoint), waits for both and reports both, exit 0 (it said
 *            "no job named mh is running")
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/tmpdir.h"
#include "jobsock.h"
#include "metrics.h"
#include "plan.h"
#include "top.h"

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

START_TEST(test_host_names)
{
	/* by job (the name less a host suffix), the job itself first, then by host */
	static const char *const order[] = {"a",    "a.h0", "a.h1",  "a.h2", "a.h10",	"a.h1x",
					    "a.hx", "ab",   "ab.h0", "b.h1", "b.h1023", "b.h01"};
	size_t n = sizeof(order) / sizeof(order[0]);

	ck_assert_int_eq(jobsock_host_of("wc.h0", "wc"), 0);
	ck_assert_int_eq(jobsock_host_of("wc.h12", "wc"), 12);
	ck_assert_int_eq(jobsock_host_of("wc.h1023", "wc"), 1023);
	ck_assert_int_eq(jobsock_host_of("wc.h1024", "wc"), -1);
	ck_assert_int_eq(jobsock_host_of("wc.h01", "wc"), -1);
	ck_assert_int_eq(jobsock_host_of("wc.h", "wc"), -1);
	ck_assert_int_eq(jobsock_host_of("wc.hx", "wc"), -1);
	ck_assert_int_eq(jobsock_host_of("wc.h-1", "wc"), -1);
	ck_assert_int_eq(jobsock_host_of("wc", "wc"), -1);
	ck_assert_int_eq(jobsock_host_of("wcx.h0", "wc"), -1);
	ck_assert_int_eq(jobsock_host_of("wc.h0", "w"), -1);
	ck_assert_int_eq(jobsock_host_of("wc.h0", ""), -1);
	ck_assert_int_eq(jobsock_host_of("a.b.h3", "a.b"), 3);
	ck_assert_uint_eq(jobsock_base_len("wc.h1"), 2);
	ck_assert_uint_eq(jobsock_base_len("wc"), 2);
	ck_assert_uint_eq(jobsock_base_len("wc.h01"), 6);
	ck_assert_uint_eq(jobsock_base_len("a.b.h3"), 3);
	ck_assert_uint_eq(jobsock_base_len(".h1"), 3);
	/* the ps order, a total one: every pair in order both ways */
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < n; j++) {
			int c = jobsock_name_cmp(order[i], order[j]);

			ck_assert_msg(i < j   ? c < 0
				      : i > j ? c > 0
					      : c == 0,
				      "%s vs %s: %d", order[i], order[j], c);
		}
}
END_TEST

START_TEST(test_hosts_listed)
{
	static const char *const open_names[] = {"mh.h10", "mh.h1",  "mh.h0", "mh.h2",
						 "mh.h01", "mhx.h0", "mh",    "other"};
	struct jobsock js[8];
	char dir[PATH_MAX], **names;
	int n;

	private_runtime("rt_hosts", dir, sizeof(dir));
	for (int i = 0; i < 8; i++)
		ck_assert_int_eq(jobsock_open(&js[i], open_names[i], -1, why, sizeof(why)), 0);
	n = jobsock_list_hosts("mh", &names);
	ck_assert_int_eq(n, 4);
	ck_assert_str_eq(names[0], "mh.h0");
	ck_assert_str_eq(names[1], "mh.h1");
	ck_assert_str_eq(names[2], "mh.h2");
	ck_assert_str_eq(names[3], "mh.h10");
	jobsock_list_free(names, n);
	ck_assert_int_eq(jobsock_list_hosts("other", &names), 0);
	ck_assert_ptr_null(names);
	ck_assert_int_eq(jobsock_list_hosts("mhx", &names), 1);
	ck_assert_str_eq(names[0], "mhx.h0");
	jobsock_list_free(names, 1);
	for (int i = 0; i < 8; i++)
		jobsock_close(&js[i]);
	ck_assert_int_eq(jobsock_list_hosts("mh", &names), 0);
}
END_TEST

/* Shared with the fake launchers: stop requests each received, the job stopping. */
struct fake_shared {
	atomic_int ready[2], asked[2], stopping;
};

/* The metrics block of host @host of job "mh" on 2 hosts of 1 worker, checkpointed. */
static struct shmrun_metrics *mh_block(uint32_t host, int *fd)
{
	char path[PATH_MAX];
	struct shmrun_job_errors errs = {0};
	struct shmrun_job job;
	struct shmrun_plan *plan;
	struct shmrun_metrics *m;
	FILE *f;

	snprintf(path, sizeof(path), "%s/mh%u.conf", tmpdir, host);
	f = fopen(path, "w");
	if (!f)
		return NULL;
	fputs("[job]\nname = mh\nworkers = 1\nhosts = 2\ncheckpoint_dir = ck\n"
	      "[gen]\nop = sequence\ncount = 10\nwidth = 2\n"
	      "[out]\nop = null_sink\ninput = gen\nwidth = 2\n",
	      f);
	fclose(f);
	if (shmrun_job_load(path, &job, &errs)) {
		for (uint32_t i = 0; i < errs.n; i++)
			fprintf(stderr, "%s\n", errs.msgs[i]);
		return NULL;
	}
	shmrun_job_errors_free(&errs);
	if (shmrun_plan_build(&job, &plan))
		return NULL;
	m = shmrun_metrics_create(plan, fd);
	shmrun_plan_free(plan);
	shmrun_job_free(&job);
	if (m)
		m->host = host; /* as the launcher of host @host has it */
	return m;
}

/*
 * A launcher of host @host of job "mh": serves mh.hHOST until a client asks
 * a stop, or until another host was asked (its gateway would pass the stop
 * on), then ends as a stop at epoch 7 does.
 */
static int fake_host(uint32_t host, struct fake_shared *sh)
{
	struct jobsock js;
	struct shmrun_metrics *m;
	char name[16];
	int fd;

	m = mh_block(host, &fd);
	if (!m)
		return 2;
	atomic_store(&m->state, SHMRUN_JOB_RUNNING);
	snprintf(name, sizeof(name), "mh.h%u", host);
	if (jobsock_open(&js, name, fd, why, sizeof(why))) {
		fprintf(stderr, "fake host %u: %s\n", host, why);
		return 3;
	}
	atomic_store(&sh->ready[host], 1);
	for (int i = 0; i < 3000 && !atomic_load(&sh->stopping); i++) {
		if (jobsock_serve(&js)) {
			atomic_fetch_add(&sh->asked[host], 1);
			atomic_store(&sh->stopping, 1);
		}
		usleep(10000);
	}
	atomic_store(&m->ckpt_epoch, 7);
	atomic_store(&m->exit_status, 0);
	atomic_store(&m->state, SHMRUN_JOB_DONE);
	jobsock_close(&js);
	return atomic_load(&sh->stopping) ? 0 : 4;
}

/* Run @cmd(@argv) in a child, its stdout and stderr into @out. Return: its exit status. */
static int run_cmd(int (*cmd)(int, char **), char **argv, char *out, size_t len)
{
	char file[PATH_MAX];
	int st, fd;
	ssize_t n;
	pid_t pid;
	int argc = 0;

	while (argv[argc])
		argc++;
	snprintf(file, sizeof(file), "%s/cmd.out", tmpdir);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0 || dup2(fd, STDERR_FILENO) < 0)
			_exit(99);
		st = cmd(argc, argv);
		fflush(stdout);
		_exit(st);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st));
	fd = open(file, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	n = read(fd, out, len - 1);
	close(fd);
	out[n > 0 ? n : 0] = 0;
	return WEXITSTATUS(st);
}

START_TEST(test_hosts_ps_top_stop)
{
	struct fake_shared *sh =
	    mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	char dir[PATH_MAX], out[8192], *l0, *l1;
	char *ps[] = {"ps", NULL}, *psj[] = {"ps", "--json", NULL};
	char *top[] = {"top", "--interval", "0", "mh", NULL};
	char *stop[] = {"stop", "--timeout", "20", "mh", NULL};
	pid_t host[2];
	int st, rc;

	ck_assert_ptr_ne(sh, MAP_FAILED);
	private_runtime("rt_mh", dir, sizeof(dir));
	for (uint32_t k = 0; k < 2; k++) {
		host[k] = fork();
		ck_assert_int_ge(host[k], 0);
		if (host[k] == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL); /* none left if the test fails */
			_exit(fake_host(k, sh));
		}
	}
	for (int i = 0; i < 1000 && !(atomic_load(&sh->ready[0]) && atomic_load(&sh->ready[1]));
	     i++)
		usleep(10000);
	ck_assert(atomic_load(&sh->ready[0]) && atomic_load(&sh->ready[1]));

	/* ps: the job's hosts in order, which host of how many, this host's workers */
	ck_assert_int_eq(run_cmd(shmrun_jobs_ps, ps, out, sizeof(out)), 0);
	ck_assert_msg(strstr(out, "CKPT_AGE    HOST\n") != NULL, "ps header: %s", out);
	l0 = strstr(out, "\nmh.h0 ");
	l1 = strstr(out, "\nmh.h1 ");
	ck_assert_msg(l0 && l1 && l0 < l1, "ps rows: %s", out);
	ck_assert_msg(strstr(l0, "     1 ") && strstr(l0, "     0/2\n"), "ps mh.h0: %s", out);
	ck_assert_msg(strstr(l1, "     1/2\n") != NULL, "ps mh.h1: %s", out);
	ck_assert_int_eq(run_cmd(shmrun_jobs_ps, psj, out, sizeof(out)), 0);
	{
		json_error_t jerr;
		json_t *rows = json_loads(out, 0, &jerr);

		ck_assert_msg(rows != NULL, "ps --json: %s\n%s", jerr.text, out);
		ck_assert_uint_eq(json_array_size(rows), 2);
		for (size_t k = 0; k < 2; k++) {
			json_t *r = json_array_get(rows, k);
			char name[16];

			snprintf(name, sizeof(name), "mh.h%zu", k);
			ck_assert_str_eq(json_string_value(json_object_get(r, "job")), name);
			ck_assert_int_eq(json_integer_value(json_object_get(r, "host")), k);
			ck_assert_int_eq(json_integer_value(json_object_get(r, "hosts")), 2);
			ck_assert_int_eq(json_integer_value(json_object_get(r, "workers")), 1);
			ck_assert_int_eq(json_integer_value(json_object_get(r, "pid")), host[k]);
		}
		json_decref(rows);
	}

	/* top mh: two hosts here, it asks which */
	ck_assert_int_eq(run_cmd(shmrun_top_main, top, out, sizeof(out)), 1);
	ck_assert_msg(strstr(out, "shmrun top: job mh runs as 2 hosts here: mh.h0, mh.h1; name "
				  "one: shmrun top mh.h0\n") != NULL,
		      "top mh: %s", out);

	/* stop mh: one stop, to host 0; both launchers waited for and reported */
	rc = run_cmd(shmrun_jobs_stop, stop, out, sizeof(out));
	ck_assert_msg(rc == 0, "stop mh: exit %d: %s", rc, out);
	ck_assert_msg(strstr(out, "job mh: stopping it through mh.h0; waiting for its hosts here: "
				  "mh.h0, mh.h1\n") != NULL,
		      "stop mh: %s", out);
	ck_assert_msg(strstr(out, "job mh.h0 stopped at epoch 7\n") &&
			  strstr(out, "job mh.h1 stopped at epoch 7\n"),
		      "stop mh: %s", out);
	ck_assert_int_eq(atomic_load(&sh->asked[0]), 1);
	ck_assert_int_eq(atomic_load(&sh->asked[1]), 0);
	for (int k = 0; k < 2; k++) {
		ck_assert_int_eq(waitpid(host[k], &st, 0), host[k]);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fake host %d: status %d", k,
			      st);
	}
	/* gone: stop mh says so, as for any job not running */
	ck_assert_int_eq(run_cmd(shmrun_jobs_stop, stop, out, sizeof(out)), 1);
	ck_assert_msg(strstr(out, "no job named mh is running") != NULL, "stop mh again: %s", out);
	munmap(sh, sizeof(*sh));
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
	tc = tcase_create("hosts");
	tcase_add_test(tc, test_host_names);
	tcase_add_test(tc, test_hosts_listed);
	tcase_add_test(tc, test_hosts_ps_top_stop);
	tcase_set_timeout(tc, 60);
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
