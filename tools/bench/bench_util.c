/*
 * tools/bench/bench_util.c: the process plumbing every shmrun-bench
 * subcommand shares: timestamps, percentiles, spin-waiting and the start
 * barrier, shared memory, and running the two measured processes.
 *
 * What it does. bench_run_pair() forks two children from a parent that only
 * supervises: each child pins itself to its CPU (sched_setaffinity), runs the
 * subcommand's function, which attaches its side and meets the other at
 * bench_barrier() in the shared control block, then writes its results into
 * the block and exits. The parent waits on pidfds (no polling wake-ups to
 * disturb the two pinned CPUs), kills the survivor if one child fails or the
 * run overruns, and always reaps both; children also die with the parent
 * (PR_SET_PDEATHSIG).
 *
 * Round-trip timestamps come from the TSC on x86-64 (rdtscp then lfence, so
 * the read waits for the loads before it), calibrated against CLOCK_MONOTONIC
 * for 20 ms at start-up (bench_ts_init()); the TSC is constant and shared by
 * all CPUs wherever the kernel uses it as its clocksource. Elsewhere they are
 * CLOCK_MONOTONIC.
 *
 * Invariants.
 *   - bench_run_pair() returns only after both children have been reaped, on
 *     every path: no benchmark leaves a process behind.
 *   - The children's results in struct bench_ctl are read only after the
 *     parent has reaped them (the exit/wait pair orders them).
 *
 * Rejected designs.
 *   - Keeping these in bench.c beside main(): bench.c called the subcommands
 *     and the subcommands called back into bench.c, a cycle; now bench.c
 *     dispatches, the subcommands use this file, and this file uses neither.
 *   - Threads instead of processes: the runtime's workers are processes
 *     sharing only the segment, and the ring is measured between the same
 *     kind of processes (bench.c).
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "bench.h"

bool bench_shared_cpu;

/* The name in messages, as in bench.c. */
static const char *prog = "shmrun-bench";

/* ---- time --------------------------------------------------------------- */

int64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double ns_per_tick = 1.0;

uint64_t bench_ts(void)
{
#if defined(__x86_64__)
	unsigned int aux;
	uint64_t t = __rdtscp(&aux);

	_mm_lfence();
	return t;
#else
	return (uint64_t)bench_now_ns();
#endif
}

void bench_ts_init(void)
{
#if defined(__x86_64__)
	int64_t t0 = bench_now_ns(), t1;
	uint64_t c0 = bench_ts(), c1;

	do {
		t1 = bench_now_ns();
	} while (t1 - t0 < 20000000);
	c1 = bench_ts();
	if (c1 > c0)
		ns_per_tick = (double)(t1 - t0) / (double)(c1 - c0);
#endif
}

uint64_t bench_ts_to_ns(uint64_t ticks)
{
	return (uint64_t)llround((double)ticks * ns_per_tick);
}

/* ---- percentiles ---------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

void bench_sort_u64(uint64_t *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_u64);
}

uint64_t bench_percentile_sorted(const uint64_t *v, size_t n, double q)
{
	size_t rank;

	if (!n)
		return 0;
	rank = (size_t)ceil(q * (double)n);
	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return v[rank - 1];
}

/* ---- spinning and the start barrier ------------------------------------- */

void bench_spin_start(struct bench_spin *s, int64_t timeout_ns)
{
	s->n = 0;
	s->deadline = bench_now_ns() + timeout_ns;
}

int bench_spin_slow(struct bench_spin *s)
{
	if (bench_shared_cpu)
		sched_yield();
	return bench_now_ns() > s->deadline ? -ETIMEDOUT : 0;
}

int bench_barrier(struct bench_ctl *ctl)
{
	struct bench_spin s;

	/* acq_rel: pairs with the other child's acquire load below, so each
	 * child's attach (pid stores in the ring) precedes the other's run. */
	atomic_fetch_add_explicit(&ctl->ready, 1, memory_order_acq_rel);
	bench_spin_start(&s, 10 * 1000000000ll);
	/* acquire: pairs with the other child's fetch_add above. */
	while (atomic_load_explicit(&ctl->ready, memory_order_acquire) < 2) {
		if (bench_spin(&s)) {
			fprintf(stderr,
				"%s: pid %d: the other process never reached the start barrier\n",
				prog, (int)getpid());
			return -1;
		}
	}
	return 0;
}

/* ---- shared memory ---------------------------------------------------- */

void *bench_map_shared(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		fprintf(stderr, "%s: mmap of %zu shared bytes failed: %s\n", prog, bytes,
			strerror(errno));
		return NULL;
	}
	return p;
}

void bench_unmap_shared(void *mem, size_t bytes)
{
	if (mem)
		munmap(mem, bytes);
}

/* ---- the two measured processes --------------------------------------- */

static int pin_to(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		fprintf(stderr, "%s: pid %d: cannot pin to CPU %d: %s\n", prog, (int)getpid(), cpu,
			strerror(errno));
		return -1;
	}
	return 0;
}

static _Noreturn void child_main(int side, int cpu, pid_t parent, bench_child_fn fn, void *arg)
{
	/* Die with the parent; the getppid() check closes the race with a
	 * parent that died before prctl(). */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent)
		_exit(BENCH_EXIT_FAIL);
	if (cpu >= 0 && pin_to(cpu))
		_exit(BENCH_EXIT_FAIL);
	_exit(fn(side, arg));
}

static int child_failed(int side, pid_t pid, int status)
{
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFEXITED(status))
		fprintf(stderr, "%s: process %d (pid %d) exited with status %d\n", prog, side,
			(int)pid, WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		fprintf(stderr, "%s: process %d (pid %d) was killed by signal %d (%s)\n", prog,
			side, (int)pid, WTERMSIG(status), strsignal(WTERMSIG(status)));
	return -1;
}

/* Wait for whichever live child exits first, until @deadline; -1 on timeout. */
static int wait_any(const pid_t pid[2], const int pidfd[2], const bool reaped[2], int64_t deadline,
		    int *status)
{
	for (;;) {
		struct pollfd pfd[2];
		int n = 0, i, ms;
		int64_t left = deadline - bench_now_ns();

		for (i = 0; i < 2; i++) {
			if (reaped[i])
				continue;
			if (waitpid(pid[i], status, WNOHANG) == pid[i])
				return i;
		}
		if (left <= 0)
			return -1;
		ms = left / 1000000 + 1 < INT_MAX ? (int)(left / 1000000 + 1) : INT_MAX;
		for (i = 0; i < 2; i++) {
			if (!reaped[i] && pidfd[i] >= 0) {
				pfd[n].fd = pidfd[i];
				pfd[n].events = POLLIN;
				n++;
			}
		}
		if (n == 2 - reaped[0] - reaped[1]) {
			/* Every live child has a pidfd: sleep until one exits. */
			if (poll(pfd, (nfds_t)n, ms) < 0 && errno != EINTR)
				return -1;
		} else {
			/* No pidfd (old kernel): look again every 10 ms. */
			struct timespec ts = {0, 10000000};

			nanosleep(&ts, NULL);
		}
	}
}

int bench_run_pair(const struct bench_opts *opts, struct bench_ctl *ctl, bench_child_fn fn,
		   void *arg, double timeout_s)
{
	pid_t parent = getpid(), pid[2] = {-1, -1};
	int pidfd[2] = {-1, -1}, status, rc = 0, i;
	bool reaped[2] = {false, false};
	int64_t deadline = bench_now_ns() + (int64_t)(timeout_s * 1e9);

	atomic_store_explicit(&ctl->ready, 0, memory_order_relaxed);
	fflush(stdout);
	fflush(stderr);
	for (i = 0; i < 2; i++) {
		pid[i] = fork();
		if (pid[i] < 0) {
			fprintf(stderr, "%s: fork failed: %s\n", prog, strerror(errno));
			rc = -1;
			goto err_kill;
		}
		if (pid[i] == 0)
			child_main(i, opts->cpu[i], parent, fn, arg);
		pidfd[i] = (int)syscall(SYS_pidfd_open, pid[i], 0);
	}

	/* Reap both; the first failure or the deadline kills the other. */
	while (!reaped[0] || !reaped[1]) {
		i = wait_any(pid, pidfd, reaped, deadline, &status);
		if (i < 0) {
			fprintf(stderr, "%s: the measurement overran %.0f s; killing it\n", prog,
				timeout_s);
			rc = -1;
			goto err_kill;
		}
		reaped[i] = true;
		if (child_failed(i, pid[i], status)) {
			rc = -1;
			goto err_kill;
		}
	}
	goto out_close;

err_kill:
	for (i = 0; i < 2; i++) {
		if (pid[i] > 0 && !reaped[i]) {
			kill(pid[i], SIGKILL);
			while (waitpid(pid[i], &status, 0) < 0 && errno == EINTR)
				;
			reaped[i] = true;
		}
	}
out_close:
	for (i = 0; i < 2; i++)
		if (pidfd[i] >= 0)
			close(pidfd[i]);
	return rc;
}
