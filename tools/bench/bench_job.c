/*
 * tools/bench/bench_job.c: what the benchmarks that drive the shmrun CLI share —
 * locating and copying the shmrun binary, work directories, running a job
 * with its stderr in a log and a timeout (always reaped), reading logs,
 * usage errors, option parsing, load average notes, the marginal rate of
 * whole timed runs, and the common end of a subcommand (bench_finish()).
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <glob.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <emmintrin.h>
#include <xxhash.h>
#include "bench.h"

static volatile sig_atomic_t interrupted;

int bench_write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int bench_usage_error(const char *sub, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "shmrun-bench: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'shmrun-bench %s --help'.\n", sub);
	return BENCH_EXIT_USAGE;
}

/* A count from 1 to @max, digits only. */
int bench_parse_count(const char *s, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || !v || v > max)
		return -1;
	*out = v;
	return 0;
}

void bench_print_loadavg(const char *when)
{
	char buf[128] = "";
	FILE *f = fopen("/proc/loadavg", "r");

	if (f) {
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = '\0';
		fclose(f);
	}
	buf[strcspn(buf, "\n")] = '\0';
	printf("# load average %s: %s\n", when, buf[0] ? buf : "unknown");
}

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}

void bench_catch_signals(void)
{
	struct sigaction sa = {.sa_handler = on_signal};

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}

bool bench_interrupted(void)
{
	return interrupted != 0;
}

int bench_shmrun_path(char *buf, size_t len)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	if (n < 0) {
		fprintf(stderr, "shmrun-bench: readlink /proc/self/exe: %s\n", strerror(errno));
		return -1;
	}
	self[n] = '\0';
	slash = strrchr(self, '/');
	if (slash)
		*slash = '\0';
	if ((size_t)snprintf(buf, len, "%s/shmrun", slash ? self : ".") >= len)
		return -1;
	if (access(buf, X_OK)) {
		fprintf(stderr,
			"shmrun-bench: %s: %s; the benchmark runs the shmrun CLI built next to "
			"shmrun-bench (cmake --build build)\n",
			buf, strerror(errno));
		return -1;
	}
	return 0;
}

/* Copy the file @exe into @dir, same name, mode 0755; its path into @buf. */
static int copy_into(const char *exe, const char *dir, char *buf, size_t len)
{
	const char *base = strrchr(exe, '/');
	char tmp[PATH_MAX];
	char data[1 << 16];
	int in = -1, out = -1, rc = -1;
	ssize_t n;

	base = base ? base + 1 : exe;
	if (bench_pathf(buf, len, "%s/%s", dir, base) ||
	    bench_pathf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, base))
		return -1;
	in = open(exe, O_RDONLY | O_CLOEXEC);
	out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	if (in < 0 || out < 0)
		goto out;
	while ((n = read(in, data, sizeof(data))) > 0)
		if (bench_write_all(out, data, (size_t)n))
			goto out;
	if (n < 0 || close(out))
		goto out;
	out = -1;
	/* rename: the copy is whole before it has its name, and no fd stays open
	 * for writing (exec would fail with ETXTBSY) */
	if (rename(tmp, buf))
		goto out;
	rc = 0;
out:
	if (rc)
		fprintf(stderr, "shmrun-bench: cannot copy %s into %s: %s\n", exe, dir,
			strerror(errno));
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	if (rc)
		unlink(tmp);
	return rc;
}

/*
 * The libshmrun.so.0 the shmrun next to this executable loads: installed,
 * SHMRUN_BENCH_LIB_REL from the executable's directory (its RUNPATH
 * $ORIGIN/...); in the build tree, SHMRUN_BENCH_LIB_BUILD
 * (tools/CMakeLists.txt sets both). Return: 0, or -1 if neither exists.
 */
static int shmrun_lib_path(const char *exe, char *buf, size_t len)
{
#if defined(SHMRUN_BENCH_LIB_REL) && defined(SHMRUN_BENCH_LIB_BUILD)
	const char *slash = strrchr(exe, '/');
	int dirlen = slash ? (int)(slash - exe) : 1;

	int rc = SHMRUN_BENCH_LIB_REL[0] == '/' /* an absolute libdir */
			 ? bench_pathf(buf, len, "%s/libshmrun.so.0", SHMRUN_BENCH_LIB_REL)
			 : bench_pathf(buf, len, "%.*s/%s/libshmrun.so.0", dirlen,
				       slash ? exe : ".", SHMRUN_BENCH_LIB_REL);

	if (!rc && access(buf, R_OK) == 0)
		return 0;
	if (!bench_pathf(buf, len, "%s/libshmrun.so.0", SHMRUN_BENCH_LIB_BUILD) &&
	    access(buf, R_OK) == 0)
		return 0;
#endif
	(void)exe, (void)buf, (void)len;
	return -1;
}

int bench_shmrun_copy(const char *exe, const char *dir, char *buf, size_t len)
{
	char lib[PATH_MAX], copy[PATH_MAX];

	if (copy_into(exe, dir, buf, len))
		return -1;
	/* shmrun links libshmrun.so.0: the copy runs with a copy of it too, found
	 * first through LD_LIBRARY_PATH (before the RUNPATH, which from @dir
	 * would lead nowhere for an installed shmrun) */
	if (shmrun_lib_path(exe, lib, sizeof(lib)))
		return 0; /* a shmrun linked statically */
	if (copy_into(lib, dir, copy, sizeof(copy)))
		return -1;
	if (setenv("LD_LIBRARY_PATH", dir, 1)) {
		fprintf(stderr, "shmrun-bench: setenv LD_LIBRARY_PATH: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

int bench_make_workdir(const char *parent, const char *tag, char *buf, size_t len)
{
	if ((size_t)snprintf(buf, len, "%s/shmrun-bench-%s.XXXXXX", parent, tag) >= len) {
		fprintf(stderr, "shmrun-bench: directory name too long under %s\n", parent);
		return -1;
	}
	if (!mkdtemp(buf)) {
		fprintf(stderr, "shmrun-bench: cannot create a directory in %s: %s\n", parent,
			strerror(errno));
		return -1;
	}
	return 0;
}

int bench_pathf(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= len) {
		fprintf(stderr, "shmrun-bench: a path under %.60s... is too long\n", buf);
		return -1;
	}
	return 0;
}

static int rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)type;
	(void)ftw;
	if (remove(path))
		fprintf(stderr, "shmrun-bench: cannot remove %s: %s\n", path, strerror(errno));
	return 0;
}

void bench_rmtree(const char *path)
{
	nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int bench_read_text(const char *path, char **text, size_t *len)
{
	size_t cap = 1 << 16, n = 0;
	char *p = malloc(cap);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t r;

	if (fd < 0 || !p) {
		fprintf(stderr, "shmrun-bench: cannot read %s: %s\n", path,
			fd < 0 ? strerror(errno) : "out of memory");
		goto err;
	}
	for (;;) {
		if (n + 1 >= cap) {
			char *np = realloc(p, cap * 2);

			if (!np) {
				fprintf(stderr, "shmrun-bench: reading %s: out of memory\n", path);
				goto err;
			}
			p = np;
			cap *= 2;
		}
		r = read(fd, p + n, cap - n - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			fprintf(stderr, "shmrun-bench: reading %s: %s\n", path, strerror(errno));
			goto err;
		}
		if (!r)
			break;
		n += (size_t)r;
	}
	close(fd);
	p[n] = '\0';
	*text = p;
	*len = n;
	return 0;
err:
	if (fd >= 0)
		close(fd);
	free(p);
	return -1;
}

int bench_job_start(struct bench_job *job, const char *exe, char *const argv[],
		    const char *log_path)
{
	pid_t parent = getpid();
	char dir[PATH_MAX], run[PATH_MAX];
	const char *slash = strrchr(log_path, '/');
	int log_fd;

	/* the job's runtime directory (its socket, docs/observability.md): run/
	 * in the work directory the log is in, so that a benchmark's job never
	 * collides with a user's job of the same name, nor with another
	 * shmrun-bench's. Not the work directory itself: the job makes its
	 * sockets in RUNTIME_DIR/shmrun/, and the work directory holds the copy
	 * of the executable called shmrun (bench_shmrun_copy()) */
	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - log_path) + (slash == log_path) : 1,
		 slash ? log_path : ".");
	if (!realpath(dir, run)) {
		fprintf(stderr, "shmrun-bench: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	if (strlen(run) + sizeof("/run") > sizeof(run)) {
		fprintf(stderr, "shmrun-bench: %s: path too long\n", run);
		return -1;
	}
	strcat(run, "/run");
	if (mkdir(run, 0700) && errno != EEXIST) {
		fprintf(stderr, "shmrun-bench: cannot create %s: %s\n", run, strerror(errno));
		return -1;
	}
	memset(job, 0, sizeof(*job));
	job->pidfd = -1;
	log_fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (log_fd < 0) {
		fprintf(stderr, "shmrun-bench: cannot create %s: %s\n", log_path, strerror(errno));
		return -1;
	}
	fflush(stdout);
	fflush(stderr);
	job->start_ns = bench_now_ns();
	job->pid = fork();
	if (job->pid < 0) {
		fprintf(stderr, "shmrun-bench: fork: %s\n", strerror(errno));
		close(log_fd);
		return -1;
	}
	if (job->pid == 0) {
		int null = open("/dev/null", O_RDWR);

		/* SIGTERM, not SIGKILL: the launcher then stops its workers and
		 * removes its segment. The getppid() check closes the race with a
		 * parent that died before prctl(). */
		if (prctl(PR_SET_PDEATHSIG, SIGTERM) || getppid() != parent || null < 0)
			_exit(127);
		dup2(null, STDIN_FILENO);
		dup2(null, STDOUT_FILENO);
		dup2(log_fd, STDERR_FILENO);
		setenv("XDG_RUNTIME_DIR", run, 1); /* this process is single-threaded */
		execv(exe, argv);
		dprintf(STDERR_FILENO, "shmrun-bench: exec %s: %s\n", exe, strerror(errno));
		_exit(127);
	}
	close(log_fd);
	job->pidfd = (int)syscall(SYS_pidfd_open, job->pid, 0);
	return 0;
}

void bench_print_tail(const char *path, int lines)
{
	char *text = NULL, *p;
	size_t len;

	if (bench_read_text(path, &text, &len))
		return;
	p = text + len;
	if (p > text && p[-1] == '\n')
		p--;
	while (p > text && lines) {
		p--;
		if (*p == '\n')
			lines--;
	}
	if (*p == '\n')
		p++;
	fprintf(stderr, "shmrun-bench: the end of %s:\n", path);
	while (*p) {
		char *nl = strchr(p, '\n');

		fprintf(stderr, "    %.*s\n", nl ? (int)(nl - p) : (int)strlen(p), p);
		if (!nl)
			break;
		p = nl + 1;
	}
	free(text);
}

int bench_job_wait(struct bench_job *job, double timeout_s, int fd, void (*on_fd)(void *arg),
		   void *arg, const char *log_path)
{
	int64_t deadline = job->start_ns + (int64_t)(timeout_s * 1e9), kill_at = INT64_MAX;
	bool stopping = false, timed_out = false, reaped = false;
	int status = 0;

	for (;;) {
		struct pollfd pfd[2];
		nfds_t n = 0;
		int64_t now, wake;
		pid_t r = waitpid(job->pid, &status, WNOHANG);

		if (r == job->pid) {
			reaped = true;
			break;
		}
		if (r < 0 && errno != EINTR) {
			fprintf(stderr, "shmrun-bench: waitpid %d: %s\n", (int)job->pid,
				strerror(errno));
			break;
		}
		now = bench_now_ns();
		if (!stopping && (interrupted || now > deadline)) {
			/* SIGTERM: a graceful stop; SIGKILL 10 s later. */
			timed_out = !interrupted;
			kill(job->pid, SIGTERM);
			stopping = true;
			kill_at = now + 10 * 1000000000ll;
		}
		if (now > kill_at) {
			kill(job->pid, SIGKILL);
			kill_at = INT64_MAX;
		}
		if (job->pidfd >= 0) {
			pfd[n].fd = job->pidfd;
			pfd[n++].events = POLLIN;
		}
		if (fd >= 0) {
			pfd[n].fd = fd;
			pfd[n++].events = POLLIN;
		}
		wake = stopping ? kill_at : deadline;
		if (job->pidfd < 0 && now + 10000000 < wake)
			wake = now + 10000000; /* no pidfd: look again every 10 ms */
		if (wake - now > 1000000000)
			wake = now + 1000000000; /* re-check the flags every second */
		if (poll(pfd, n, (int)((wake - now) / 1000000 + 1)) < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "shmrun-bench: poll: %s\n", strerror(errno));
			kill(job->pid, SIGKILL);
			while (waitpid(job->pid, &status, 0) < 0 && errno == EINTR)
				;
			break;
		}
		if (fd >= 0 && (pfd[n - 1].revents & POLLIN))
			on_fd(arg);
	}
	job->end_ns = bench_now_ns();
	job->status = status;
	if (fd >= 0)
		on_fd(arg); /* what arrived just before the exit */
	if (job->pidfd >= 0)
		close(job->pidfd);
	job->pidfd = -1;
	if (!reaped)
		return -1;
	if (!stopping && WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (timed_out)
		fprintf(stderr, "shmrun-bench: shmrun (pid %d) overran %.0f s and was stopped\n",
			(int)job->pid, timeout_s);
	else if (stopping)
		fprintf(stderr, "shmrun-bench: interrupted; stopped shmrun (pid %d)\n",
			(int)job->pid);
	else if (WIFEXITED(status))
		fprintf(stderr, "shmrun-bench: shmrun (pid %d) exited with status %d\n",
			(int)job->pid, WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		fprintf(stderr, "shmrun-bench: shmrun (pid %d) was killed by signal %d (%s)\n",
			(int)job->pid, WTERMSIG(status), strsignal(WTERMSIG(status)));
	if (log_path && !stopping)
		bench_print_tail(log_path, 20);
	return -1;
}

int bench_open_workdir(const char *keep, const char *tag, char *buf, size_t len, bool *made)
{
	const char *tmp = getenv("TMPDIR");

	*made = false;
	if (keep) {
		if (mkdir(keep, 0777) && errno != EEXIST) {
			fprintf(stderr, "shmrun-bench: --keep %s: %s\n", keep, strerror(errno));
			return -1;
		}
		return bench_pathf(buf, len, "%s", keep) ? -1 : 0;
	}
	if (bench_make_workdir(tmp && *tmp ? tmp : "/tmp", tag, buf, len))
		return -1;
	*made = true;
	return 0;
}

int bench_job_run(const char *exe, char *const argv[], const char *log_path, double timeout_s,
		  bool tail_log, double *secs)
{
	struct bench_job job;

	if (bench_job_start(&job, exe, argv, log_path) ||
	    bench_job_wait(&job, timeout_s, -1, NULL, NULL, tail_log ? log_path : NULL))
		return -1;
	if (secs)
		*secs = (double)(job.end_ns - job.start_ns) / 1e9;
	return 0;
}

int bench_prepare_run(struct bench_opts *o, char *built, size_t len)
{
	if (bench_shmrun_path(built, len))
		return BENCH_EXIT_FAIL;
	return bench_choose_cpus(o);
}

/* ---- marginal rates ------------------------------------------------------ */

double bench_marginal_rate(uint64_t n, double secs, double fixed)
{
	return (double)(n - 2) / (secs > fixed ? secs - fixed : secs);
}

uint64_t bench_calibrated_records(uint64_t n, double secs, double fixed, double seconds)
{
	double rate = (double)(n - 2) / (secs > fixed + 1e-3 ? secs - fixed : 1e-3);

	n = (uint64_t)(rate * seconds);
	return n < 100000 ? 100000 : n;
}

int bench_finish(int rc, const char *dir, bool made_dir, const char *keep)
{
	if (bench_interrupted()) {
		fprintf(stderr, "shmrun-bench: interrupted\n");
		rc = BENCH_EXIT_FAIL;
	}
	if (made_dir)
		bench_rmtree(dir);
	else if (keep)
		printf("# kept: %s\n", dir);
	fflush(stdout);
	return rc;
}
