/*
 * runtime/supervise.c: `shmrun supervise [--restarts N] [--backoff DUR] --
 * COMMAND [ARG]...`, the outer restart loop of a multi-host job
 * (docs/multihost.md "Failures", docs/shmrun.1.md).
 *
 * Why it exists. On one host the launcher restarts the job itself when a
 * worker dies. Across hosts it cannot: Open MPI in Debian has no ULFM (no
 * way to survive a dead rank), MPI must not be used after a fork, and a
 * launcher that ends takes the whole MPI job with it. So the launcher of a
 * multi-host job exits 75 (EX_TEMPFAIL, "restartable") when a worker or a
 * peer host died or hung, mpirun ends every rank, and something outside
 * MPI must start the job again, which then restores the last complete
 * checkpoint as a local restart does (Timely's rule: on any failure,
 * restart the whole job). That something is this loop:
 *
 *     shmrun supervise -- mpirun -np 2 ... shmrun topology.conf
 *
 *     run COMMAND in its own process group ──▶ wait ──▶ exit 0: done
 *        ▲                                      │  ├──▶ restartable (verdict):
 *        └──── backoff (1 s, 2 s, 4 s … 60 s) ◀─┘  │    rerun, at most N times
 *                                                  └──▶ otherwise: its status
 *
 * What restarts is shmrun_supervise_verdict()'s rule: exit 75; death by a
 * signal, or exit 128+S, which is how mpirun reports a rank killed by signal
 * S (Open MPI 4.1.4 measured: a rank kill -9'd → mpirun exits 137, SIGSEGV →
 * 139, a rank exiting 75 or calling MPI_Abort(…, 75) → 75, a rank exiting 3
 * → 3; mpirun itself given SIGTERM, SIGINT or SIGHUP → 1, whatever its ranks
 * did); not the stop signals, SIGPIPE, SIGXFSZ or SIGXCPU.
 *
 * Invariants.
 *   - A signal to supervise (SIGINT, SIGTERM, SIGHUP) is never followed by a
 *     rerun: it is forwarded to COMMAND's process group (each copy: a second
 *     signal asks shmrun to stop at once), supervise waits for COMMAND and
 *     ends as it ended (its exit status, or death by its signal). Between two
 *     runs (the backoff) it ends at once by the signal. One its caller
 *     ignores (nohup: SIGHUP) stays ignored, by supervise and COMMAND alike.
 *   - COMMAND leads a process group of its own, so a terminal's Ctrl-C reaches
 *     supervise alone and arrives once, forwarded; and when COMMAND has
 *     exited, anything it left in its group is killed (SIGKILL) before the
 *     next run, so a rerun never meets its predecessor's processes. The group
 *     is killed while COMMAND is still a zombie (waitid WNOWAIT): its pid,
 *     the group's id, cannot have been reused yet.
 *   - Nothing of a run outlives it, in its group or not: supervise is a child
 *     subreaper (PR_SET_CHILD_SUBREAPER), so what COMMAND leaves behind
 *     becomes supervise's child, and after COMMAND it SIGKILLs and reaps every
 *     child it has, within ORPHANS_NS (end_orphans()). A kill -9'd mpirun
 *     leaves its ranks running for about a second (Open MPI 4.1.4 measured),
 *     each holding its host's run lock: a rerun then was refused (exit 2,
 *     "in use by another run") and supervise gave up.
 *   - COMMAND dies with supervise: PR_SET_PDEATHSIG sends it SIGTERM (a stop,
 *     which mpirun passes on to every rank) if supervise is killed.
 *   - A COMMAND that cannot be executed is reported once, with the reason,
 *     and not retried (exit 127 not found, 126 otherwise, as a shell does):
 *     the child tells the parent exec's errno through a close-on-exec pipe.
 *   - With a terminal on standard input COMMAND reads /dev/null instead: a
 *     background process group reading the terminal would be stopped by
 *     SIGTTIN (mpirun reads its standard input for rank 0), and supervise
 *     would wait for ever. A pipe or file on standard input is passed on.
 *
 * Rejected designs.
 *   - Putting COMMAND in the terminal's foreground group (tcsetpgrp): Ctrl-C
 *     would then reach COMMAND directly, and supervise could not tell a stop
 *     the user asked for from a crash, which it must never rerun after.
 *   - Restarting in the launcher under mpirun (fork after MPI_Init): not
 *     allowed by MPI, and a dead rank ends the MPI job anyway.
 *   - Resetting the restart count after a long healthy run: a job that fails
 *     every hour would then run for ever unnoticed; --restarts counts every
 *     rerun of one supervise.
 */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "callback.h"	    /* shmrun_signal_name() */
#include "internal.h"	    /* shmrun_parse_count(), shmrun_parse_duration() */
#include "shmrun/runtime.h" /* shmrun_die_by_signal() */
#include "supervise.h"

#define MAX_RESTARTS 1000000u

static const int stops[] = {SIGINT, SIGTERM, SIGHUP}; /* forwarded; no rerun after one */
#define MAX_BACKOFF_NS (3600ull * 1000000000ull)      /* --backoff: at most 1 h */

static void usage(FILE *out)
{
	fprintf(out,
		"usage: shmrun supervise [--restarts N] [--backoff DUR] [--] COMMAND [ARG]...\n"
		"\n"
		"Runs COMMAND (typically `mpirun ... shmrun topology.conf`, a multi-host\n"
		"job) in a process group of its own, and runs it again when it ended in a\n"
		"way a restart from the last complete checkpoint may cure:\n"
		"  - exit status 75 (a multi-host launcher saw a worker or a host die or hang);\n"
		"  - killed by a signal, or exit status 128+S (mpirun's report of a rank\n"
		"    killed by signal S: 137 for kill -9) -- but not SIGINT, SIGTERM, SIGHUP\n"
		"    (a stop someone asked for), SIGPIPE, SIGXFSZ or SIGXCPU.\n"
		"Any other status ends supervise with that status. One line on standard\n"
		"error per restart.\n"
		"\n"
		"options:\n"
		"  --restarts N    rerun at most N times (default %u; 0: never), then exit\n"
		"                  with COMMAND's last status\n"
		"  --backoff DUR   wait DUR before the first rerun (default 1s; e.g. 500ms,\n"
		"                  0s), doubling before each next one up to 60s (or DUR when\n"
		"                  it is longer)\n"
		"  -h, --help      this text\n"
		"\n"
		"SIGINT, SIGTERM and SIGHUP are forwarded to COMMAND's process group and end\n"
		"the loop: no rerun after them; supervise then exits as COMMAND did. COMMAND\n"
		"gets SIGTERM if supervise is killed. See docs/multihost.md.\n"
		"\n"
		"exit status: COMMAND's (128+S when it was killed by signal S); 2 bad usage;\n"
		"126/127 COMMAND cannot be executed / was not found.\n",
		SHMRUN_SUPERVISE_RESTARTS);
}

static int usage_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_err(const char *fmt, ...)
{
	va_list ap;

	fputs("shmrun supervise: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry 'shmrun supervise --help' for more information.\n", stderr);
	return 2;
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;

	fputs("shmrun supervise: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* "SIGKILL", or "signal 40" for one without a name here; in @buf. */
static const char *sig_name(int sig, char *buf, size_t len)
{
	const char *n = shmrun_signal_name(sig);

	if (strcmp(n, "SIG?") != 0)
		return n;
	snprintf(buf, len, "signal %d", sig);
	return buf;
}

/* Whether a death by @sig is one a rerun may cure (see the header). */
static bool signal_restarts(int sig)
{
	return sig != SIGINT && sig != SIGTERM && sig != SIGHUP && sig != SIGPIPE &&
	       sig != SIGXFSZ && sig != SIGXCPU;
}

enum shmrun_supervise_verdict shmrun_supervise_verdict(int wstatus, char *why, size_t len)
{
	char nb[32];

	if (WIFSIGNALED(wstatus)) {
		int sig = WTERMSIG(wstatus);
		bool again = signal_restarts(sig);

		snprintf(why, len, "was killed by %s%s", sig_name(sig, nb, sizeof(nb)),
			 again ? "" : " (not restarted after it)");
		return again ? SHMRUN_SV_RESTART : SHMRUN_SV_FINAL;
	}
	if (!WIFEXITED(wstatus)) { /* not an end (stopped, continued): not given here */
		snprintf(why, len, "ended with wait status %#x", (unsigned)wstatus);
		return SHMRUN_SV_FINAL;
	}
	int code = WEXITSTATUS(wstatus);

	if (code == 0) {
		snprintf(why, len, "exited with status 0");
		return SHMRUN_SV_DONE;
	}
	if (code == SHMRUN_EXIT_RESTARTABLE) {
		snprintf(why, len, "exited with status %d (restartable)", code);
		return SHMRUN_SV_RESTART;
	}
	if (code > 128 && code <= 128 + 64) {
		int sig = code - 128;
		bool again = signal_restarts(sig);

		snprintf(why, len, "exited with status %d: a process was killed by %s%s", code,
			 sig_name(sig, nb, sizeof(nb)), again ? "" : " (not restarted after it)");
		return again ? SHMRUN_SV_RESTART : SHMRUN_SV_FINAL;
	}
	snprintf(why, len, "exited with status %d", code);
	return SHMRUN_SV_FINAL;
}

/* "1.5s", "250ms", "2m" for the restart line. */
static const char *fmt_wait(uint64_t ns, char *buf, size_t len)
{
	const uint64_t s = 1000000000u, m = 60 * s;

	if (ns >= m && ns % m == 0)
		snprintf(buf, len, "%" PRIu64 "m", (uint64_t)(ns / m));
	else if (ns % s == 0)
		snprintf(buf, len, "%" PRIu64 "s", (uint64_t)(ns / s));
	else if (ns < s)
		snprintf(buf, len, "%" PRIu64 "ms", (uint64_t)(ns / 1000000u));
	else
		snprintf(buf, len, "%.1fs", (double)ns / 1e9);
	return buf;
}

/* The wait before rerun @k (from 1): @first doubled k-1 times, at most the cap. */
static uint64_t backoff_ns(uint64_t first, uint32_t k)
{
	uint64_t cap =
	    first > SHMRUN_SUPERVISE_BACKOFF_CAP_NS ? first : SHMRUN_SUPERVISE_BACKOFF_CAP_NS;
	uint64_t ns = first;

	for (uint32_t i = 1; i < k && ns < cap; i++)
		ns *= 2;
	return ns < cap ? ns : cap;
}

/*
 * The child's side of start(): a group of its own, the caller's signal mask
 * and default dispositions back, death with supervise, then exec. Only
 * async-signal-safe calls (we forked). Never returns.
 */
static void child(char **cmd, const sigset_t *oldmask, pid_t parent, int errfd)
{
	struct sigaction sa;
	int err;

	setpgid(0, 0);
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(stops) / sizeof(stops[0]); i++) {
		struct sigaction old;

		/* SIG_IGN discards a copy of a group signal meant for supervise
		 * that is pending here (supervise forwards its own); an ignored
		 * signal stays ignored across exec, as the caller had it */
		sa.sa_handler = SIG_IGN;
		sigaction(stops[i], &sa, &old);
		if (old.sa_handler != SIG_IGN) {
			sa.sa_handler = SIG_DFL;
			sigaction(stops[i], &sa, NULL);
		}
	}
	sa.sa_handler = SIG_DFL;
	sigaction(SIGCHLD, &sa, NULL);
	if (prctl(PR_SET_PDEATHSIG, SIGTERM) == 0 && getppid() != parent)
		_exit(SHMRUN_EXIT_RESTARTABLE); /* supervise is gone already */
	if (isatty(STDIN_FILENO)) {
		int fd = open("/dev/null", O_RDONLY);

		if (fd >= 0 && fd != STDIN_FILENO) {
			dup2(fd, STDIN_FILENO);
			close(fd);
		}
	}
	sigprocmask(SIG_SETMASK, oldmask, NULL);
	execvp(cmd[0], cmd);
	err = errno;
	if (write(errfd, &err, sizeof(err)) < 0) {
		/* nothing to do: the parent then sees exit 127 without a reason */
	}
	_exit(err == ENOENT ? 127 : 126);
}

/*
 * Fork and exec @cmd in a process group of its own. Return: its pid; -1 when it
 * could not be executed or forked (said why; *@status: 127, 126 or 1).
 */
static pid_t start(char **cmd, const sigset_t *oldmask, int *status)
{
	int pfd[2], err = 0;
	pid_t pid, me = getpid();
	ssize_t n;

	if (pipe2(pfd, O_CLOEXEC)) {
		say("cannot start %s: pipe: %s", cmd[0], strerror(errno));
		*status = 1;
		return -1;
	}
	fflush(NULL); /* nothing buffered is written twice */
	pid = fork();
	if (pid < 0) {
		say("cannot start %s: fork: %s", cmd[0], strerror(errno));
		close(pfd[0]);
		close(pfd[1]);
		*status = 1;
		return -1;
	}
	if (pid == 0) {
		close(pfd[0]);
		child(cmd, oldmask, me, pfd[1]);
	}
	setpgid(pid, pid); /* also here: a signal forwarded at once finds the group */
	close(pfd[1]);
	do {
		n = read(pfd[0], &err, sizeof(err));
	} while (n < 0 && errno == EINTR);
	close(pfd[0]);
	if (n == (ssize_t)sizeof(err)) { /* exec failed: the child exits at once */
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		say("cannot run '%s': %s", cmd[0], strerror(err));
		*status = err == ENOENT ? 127 : 126;
		return -1;
	}
	return pid;
}

/*
 * Wait for the run @pid (leader of its group), forwarding stop signals to the
 * group; *@stop_sig receives the first one (kept if already set). Kills what
 * the run left in its group, then reaps it. Return: its wait status.
 */
static int wait_run(pid_t pid, const sigset_t *set, int *stop_sig)
{
	for (;;) {
		siginfo_t si;
		int sig = sigwaitinfo(set, &si);

		if (sig < 0)
			continue; /* EINTR: a signal outside @set (SIGSTOP/SIGCONT) */
		if (sig != SIGCHLD) {
			if (!*stop_sig) {
				char nb[32];

				*stop_sig = sig;
				say("%s: forwarding it to %d's process group; no restart after it",
				    sig_name(sig, nb, sizeof(nb)), (int)pid);
			}
			kill(-pid, sig);
			continue;
		}
		memset(&si, 0, sizeof(si));
		if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) || si.si_pid != pid)
			continue; /* another child (none is ours) or not yet */
		/* the leader is a zombie: its pid, the group's id, is still taken */
		kill(-pid, SIGKILL);
		for (;;) {
			int status;

			if (waitpid(pid, &status, 0) == pid)
				return status;
			if (errno != EINTR)
				return W_EXITCODE(1, 0); /* cannot happen: it is our child */
		}
	}
}

/*
 * The backoff before a rerun: @ns nanoseconds, ended early by a stop signal.
 * Return: 0 waited; the signal's number.
 */
static int backoff(uint64_t ns, const sigset_t *set)
{
	struct timespec end, now, left;

	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += (time_t)(ns / 1000000000ull);
	end.tv_nsec += (long)(ns % 1000000000ull);
	if (end.tv_nsec >= 1000000000L) {
		end.tv_sec++;
		end.tv_nsec -= 1000000000L;
	}
	for (;;) {
		int64_t d;
		int sig;

		clock_gettime(CLOCK_MONOTONIC, &now);
		d = (int64_t)(end.tv_sec - now.tv_sec) * 1000000000LL + (end.tv_nsec - now.tv_nsec);
		if (d <= 0)
			return 0;
		left.tv_sec = (time_t)(d / 1000000000LL);
		left.tv_nsec = (long)(d % 1000000000LL);
		sig = sigtimedwait(set, NULL, &left);
		if (sig > 0 && sig != SIGCHLD)
			return sig;
	}
}

/*
 * The name COMMAND goes by in messages: @cmd[0], or for `env [-opts]
 * [NAME=VALUE]... PROGRAM ...` the PROGRAM env runs (supervise -- env
 * OMPI_...=1 mpirun ... is "mpirun").
 */
static const char *display_name(char **cmd)
{
	const char *base = strrchr(cmd[0], '/');

	if (strcmp(base ? base + 1 : cmd[0], "env") != 0)
		return cmd[0];
	for (char **a = cmd + 1; *a; a++) {
		if ((strcmp(*a, "-u") == 0 || strcmp(*a, "-C") == 0) && a[1])
			a++; /* -u NAME, -C DIR: a value of its own */
		else if ((*a)[0] != '-' && !strchr(*a, '='))
			return *a;
	}
	return cmd[0];
}

/* How long end_orphans() keeps at it: a process stuck in the kernel (D
 * state) ignores even SIGKILL for a while. */
#define ORPHANS_NS 10000000000ll

/* SIGKILL every child of this process; the count signalled. */
static int kill_children(void)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	pid_t me = getpid();
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)) != NULL) {
		char path[300], buf[512], *p;
		long ppid;
		ssize_t len;
		int fd;

		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		len = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (len <= 0)
			continue;
		buf[len] = 0;
		p = strrchr(buf, ')'); /* comm may hold spaces and parentheses */
		if (!p || sscanf(p + 1, " %*c %ld", &ppid) != 1 || ppid != me)
			continue;
		kill((pid_t)atol(e->d_name), SIGKILL);
		n++;
	}
	closedir(d);
	return n;
}

/*
 * After a run: every process it left that became ours (we are a subreaper)
 * is killed and reaped, so the next run, or whatever follows supervise,
 * never meets one (a run's lock still held, a port still bound).
 */
static void end_orphans(void)
{
	struct timespec start, now, nap = {0, 20000000};
	bool told = false;

	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		pid_t p;
		int n;

		while ((p = waitpid(-1, NULL, WNOHANG)) > 0)
			;
		if (p < 0 && errno == ECHILD)
			return;
		n = kill_children();
		if (n && !told) {
			say("%d process%s of the run outlived it (e.g. ranks of a killed mpirun): "
			    "killed",
			    n, n == 1 ? "" : "es");
			told = true;
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((now.tv_sec - start.tv_sec) * 1000000000ll + (now.tv_nsec - start.tv_nsec) >
		    ORPHANS_NS) {
			say("processes of the run are still there after SIGKILL for 10 s; going on");
			return;
		}
		nanosleep(&nap, NULL);
	}
}

/* Exit as a run that ended with @status after supervise was asked to stop. */
static int end_as(int status)
{
	if (WIFSIGNALED(status))
		shmrun_die_by_signal(WTERMSIG(status));
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int shmrun_supervise_main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"restarts", required_argument, NULL, 'r'},
	    {"backoff", required_argument, NULL, 'b'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	uint32_t max_restarts = SHMRUN_SUPERVISE_RESTARTS;
	uint64_t first_ns = SHMRUN_SUPERVISE_BACKOFF_NS, v;
	sigset_t set, oldmask;
	struct sigaction sa;
	bool help = false;
	int c, stop_sig = 0;

	optind = 1;
	opterr = 1;
	/* "+": stop at COMMAND, whose own options are not ours */
	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			if (shmrun_parse_count(optarg, &v) || v > MAX_RESTARTS)
				return usage_err(
				    "--restarts '%s' is not a count of restarts (0 to %u)", optarg,
				    MAX_RESTARTS);
			max_restarts = (uint32_t)v;
			break;
		case 'b':
			if (shmrun_parse_duration(optarg, &v) || v > MAX_BACKOFF_NS)
				return usage_err(
				    "--backoff '%s' is not a duration from 0s to 3600s "
				    "(e.g. 500ms, 2s)",
				    optarg);
			first_ns = v;
			break;
		case 'h':
			help = true;
			break;
		default: /* getopt_long said what */
			fputs("Try 'shmrun supervise --help' for more information.\n", stderr);
			return 2;
		}
	}
	if (help) {
		usage(stdout);
		return 0;
	}
	if (optind >= argc)
		return usage_err("missing COMMAND: shmrun supervise [options] -- mpirun ... shmrun "
				 "topology.conf");
	char **cmd = argv + optind;
	const char *name = display_name(cmd);

	/* every signal we wait for is blocked before the first fork: none is
	 * lost between two waits; SIGCHLD not ignored (or children vanish) */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGCHLD, &sa, NULL);
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	for (size_t i = 0; i < sizeof(stops) / sizeof(stops[0]); i++) {
		struct sigaction cur;

		/* a stop signal our caller ignores (nohup: SIGHUP; a background
		 * job of a script: SIGINT) stays ignored, by supervise and by
		 * COMMAND alike: not waited for, so never forwarded */
		if (sigaction(stops[i], NULL, &cur) == 0 && cur.sa_handler != SIG_IGN)
			sigaddset(&set, stops[i]);
	}
	sigprocmask(SIG_BLOCK, &set, &oldmask);
	/* shmrun_main() blocked the stop signals before we came: COMMAND gets
	 * the mask its caller gave shmrun, without them */
	sigdelset(&oldmask, SIGINT);
	sigdelset(&oldmask, SIGTERM);
	sigdelset(&oldmask, SIGHUP);
	sigdelset(&oldmask, SIGCHLD);

	/* orphans of a run are ours to end (end_orphans()) */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
		say("cannot become a child subreaper (%s): what a run leaves behind is not "
		    "ended",
		    strerror(errno));

	for (uint32_t restarts = 0;; restarts++) {
		char why[160], wait_s[32];
		int status, sig;
		pid_t pid = start(cmd, &oldmask, &status);

		if (pid < 0)
			return status;
		status = wait_run(pid, &set, &stop_sig);
		end_orphans();
		if (stop_sig)
			return end_as(status);
		switch (shmrun_supervise_verdict(status, why, sizeof(why))) {
		case SHMRUN_SV_DONE:
			return 0;
		case SHMRUN_SV_FINAL:
			say("%s %s; not restarted", name, why);
			return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
		case SHMRUN_SV_RESTART:
			break;
		}
		if (restarts == max_restarts) {
			say("%s %s; giving up after %u restart%s (--restarts %u)", name, why,
			    restarts, restarts == 1 ? "" : "s", max_restarts);
			return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
		}
		v = backoff_ns(first_ns, restarts + 1);
		say("%s %s; restart %u of %u in %s", name, why, restarts + 1, max_restarts,
		    fmt_wait(v, wait_s, sizeof(wait_s)));
		sig = backoff(v, &set);
		if (sig) {
			char nb[32];

			say("%s before restart %u: %s is not run again",
			    sig_name(sig, nb, sizeof(nb)), restarts + 1, name);
			shmrun_die_by_signal(sig);
		}
	}
}
