/*
 * tests/integration/check_ring_procs.c: one ring of a real segment between two
 * real processes.
 *
 * Transfer: the parent creates a segment (memfd) with one ring and forks; the
 * child attaches (after the fork) as producer and sends the stream of
 * tests/common/ring_stream.h (random lengths up to the largest frame, sequence
 * numbers, XXH64 of every payload): 100 MiB through a 64 KiB ring in the hybrid
 * idle mode, smaller volumes in sleep and spin modes and through a 4 KiB ring.
 * The parent consumes in place and checks order, lengths, checksums and counts.
 *
 * Dead peer: a producer child that exits or is SIGKILLed, after its frames are
 * published, makes the consumer's wait_readable() return -EOWNERDEAD within
 * 100 ms of its death, after every frame it published has been delivered; a
 * consumer child that dies while the producer waits for room on a full ring
 * makes wait_writable() return -EOWNERDEAD within 100 ms. The child is not reaped
 * before the check (its zombie must count as dead), then it is.
 *
 * Every child is reaped. A child dies with the test process (PR_SET_PDEATHSIG)
 * and after an alarm() at the latest; every wait has a timeout; on a failed
 * check the parent kills and reaps its children before it reports.
 */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/ring_stream.h"
#include "shmrun/ring.h"
#include "shmrun/segment.h"

#define MiB (1024ull * 1024ull)
#define MS  1000000ll
/* Deadline for a dead peer to be reported, from its death. */
#define DEAD_REPORT_NS (100 * MS)

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- children ------------------------------------------------------------ */

static pid_t kids[4];
static unsigned n_kids;

/* Kill and reap every child not reaped yet (the failure path). */
static void kill_kids(void)
{
	while (n_kids) {
		pid_t pid = kids[--n_kids];

		kill(pid, SIGKILL);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
}

static void forget_kid(pid_t pid)
{
	for (unsigned i = 0; i < n_kids; i++)
		if (kids[i] == pid)
			kids[i] = kids[--n_kids];
}

/* A check made while children live: on failure, kill and reap them first. */
#define REQUIRE(cond, ...)                                                                         \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			kill_kids();                                                               \
			ck_abort_msg(__VA_ARGS__);                                                 \
		}                                                                                  \
	} while (0)

/*
 * Fork a child that runs @fn(@arg) and _exits with its return value. It dies
 * with the test process and after @alarm_s seconds at the latest.
 */
static pid_t spawn(int (*fn)(void *), void *arg, unsigned alarm_s)
{
	pid_t parent = getpid(), pid;

	ck_assert_uint_lt(n_kids, sizeof(kids) / sizeof(kids[0]));
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(120);
		alarm(alarm_s);
		_exit(fn(arg));
	}
	kids[n_kids++] = pid;
	return pid;
}

/* Reap @pid, giving it @timeout_ms to exit; returns its wait status. */
static int reap(pid_t pid, int timeout_ms)
{
	int64_t deadline = now_ns() + timeout_ms * MS;
	int status = 0;
	pid_t w;

	while ((w = waitpid(pid, &status, WNOHANG)) == 0 && now_ns() < deadline)
		usleep(1000);
	REQUIRE(w == pid, "child %d not reaped within %d ms (waitpid %d, errno %d)", (int)pid,
		timeout_ms, (int)w, errno);
	forget_kid(pid);
	return status;
}

/* Wait until @pid has exited, without reaping it; returns the siginfo. */
static siginfo_t wait_exited(pid_t pid, int timeout_ms)
{
	int64_t deadline = now_ns() + timeout_ms * MS;
	siginfo_t si;

	for (;;) {
		memset(&si, 0, sizeof(si));
		REQUIRE(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0,
			"waitid: errno %d", errno);
		if (si.si_pid == pid)
			return si;
		REQUIRE(now_ns() < deadline, "child %d still alive after %d ms", (int)pid,
			timeout_ms);
		usleep(200);
	}
}

/* The child has exited (@code, @status) and is still a zombie, not reaped. */
static void expect_zombie(pid_t pid, int code, int status)
{
	siginfo_t si;
	char path[64], buf[256], *p;
	FILE *f;

	memset(&si, 0, sizeof(si));
	REQUIRE(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid,
		"child %d is not waitable", (int)pid);
	REQUIRE(si.si_code == code && si.si_status == status,
		"child %d: si_code %d si_status %d, want %d %d", (int)pid, si.si_code, si.si_status,
		code, status);
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	REQUIRE(f != NULL, "%s: errno %d", path, errno);
	p = fgets(buf, sizeof(buf), f);
	fclose(f);
	p = p ? strrchr(buf, ')') : NULL;
	REQUIRE(p && p[1] == ' ' && p[2] == 'Z', "child %d is not a zombie: %s", (int)pid, buf);
}

/* Shared with the children: set up before each fork. */
struct ctl {
	struct shmrun_segment seg;
	struct rs_cfg cfg;
	enum shmrun_idle idle;
	int pipe[2];		/* child -> parent: one status byte */
	_Atomic int64_t t_exit; /* CLOCK_MONOTONIC just before the child's _exit */
};

static struct ctl *ctl_create(uint64_t capacity)
{
	struct shmrun_segment_ring_spec spec = {.capacity = capacity, .producer = 1, .consumer = 0};
	struct ctl *c =
	    mmap(NULL, sizeof(*c), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	ck_assert_ptr_ne(c, MAP_FAILED);
	ck_assert_int_eq(shmrun_segment_create(&c->seg, &spec, 1, 0xfeedull), 0);
	ck_assert_int_eq(pipe(c->pipe), 0);
	return c;
}

static void ctl_destroy(struct ctl *c)
{
	close(c->pipe[0]);
	close(c->pipe[1]);
	shmrun_segment_close(&c->seg);
	munmap(c, sizeof(*c));
}

/* In a child: attach the inherited segment and open one side of ring 0. */
static int child_attach(struct ctl *c, struct shmrun_ring *r, enum shmrun_ring_role role)
{
	struct shmrun_segment seg;
	size_t len;
	void *mem;

	if (shmrun_segment_attach(&seg, c->seg.base, c->seg.len))
		return -1;
	if (shmrun_segment_fingerprint(&seg) != 0xfeedull)
		return -1;
	mem = shmrun_segment_ring(&seg, 0, &len);
	if (!mem || shmrun_ring_attach(r, mem, len, role))
		return -1;
	return 0;
}

/* In the parent: open one side of ring 0 of the segment it created. */
static void parent_attach(struct ctl *c, struct shmrun_ring *r, enum shmrun_ring_role role)
{
	size_t len;
	void *mem = shmrun_segment_ring(&c->seg, 0, &len);

	ck_assert_ptr_nonnull(mem);
	ck_assert_int_eq(shmrun_ring_attach(r, mem, len, role), 0);
}

static void child_say(struct ctl *c, char byte)
{
	ssize_t n = write(c->pipe[1], &byte, 1);

	(void)n;
}

/* Read the child's status byte, waiting at most @timeout_ms. */
static char parent_hear(struct ctl *c, int timeout_ms)
{
	struct pollfd pfd = {.fd = c->pipe[0], .events = POLLIN};
	char byte = 0;

	REQUIRE(poll(&pfd, 1, timeout_ms) == 1, "no word from the child in %d ms", timeout_ms);
	REQUIRE(read(c->pipe[0], &byte, 1) == 1, "read from the child: errno %d", errno);
	return byte;
}

/* ---- transfer --------------------------------------------------------------- */

static int producer_child(void *arg)
{
	struct ctl *c = arg;
	struct shmrun_ring r;
	struct rs_result res;

	if (child_attach(c, &r, SHMRUN_RING_PRODUCER))
		return 10;
	if (rs_produce(&r, &c->cfg, &res)) {
		fprintf(stderr, "producer child: %s\n", res.msg);
		return 11;
	}
	shmrun_ring_detach(&r);
	return 0;
}

struct transfer {
	const char *name;
	enum shmrun_idle idle;
	uint64_t capacity;
	uint64_t bytes;
};

static const struct transfer transfers[] = {
    {"hybrid, 64 KiB ring, 100 MiB", SHMRUN_IDLE_HYBRID, 64 * 1024, 100 * MiB},
    {"sleep, 64 KiB ring, 16 MiB", SHMRUN_IDLE_SLEEP, 64 * 1024, 16 * MiB},
    {"spin, 64 KiB ring, 32 MiB", SHMRUN_IDLE_SPIN, 64 * 1024, 32 * MiB},
    {"hybrid, 4 KiB ring, 8 MiB", SHMRUN_IDLE_HYBRID, 4096, 8 * MiB},
    {"sleep, 4 KiB ring, 4 MiB", SHMRUN_IDLE_SLEEP, 4096, 4 * MiB},
};

START_TEST(test_transfer)
{
	const struct transfer *t = &transfers[_i];
	struct ctl *c = ctl_create(t->capacity);
	struct shmrun_ring r;
	struct rs_result res;
	int64_t t0, dt;
	int rc, status;
	pid_t pid;

	c->cfg = (struct rs_cfg){.seed = 0xc0ffee00u + (uint64_t)_i,
				 .bytes = t->bytes,
				 .idle = t->idle,
				 .wait_ns = 20000 * MS};
	parent_attach(c, &r, SHMRUN_RING_CONSUMER);
	t0 = now_ns();
	pid = spawn(producer_child, c, 200);
	rc = rs_consume(&r, &c->cfg, &res);
	dt = now_ns() - t0;
	REQUIRE(rc == 0, "%s: consumer: %s", t->name, res.msg);
	status = reap(pid, 10000);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: producer status %#x",
		      t->name, status);
	ck_assert_uint_ge(res.bytes, t->bytes);
	ck_assert_uint_gt(res.frames, t->bytes / shmrun_ring_max_payload(&r));
	fprintf(stderr,
		"check_ring_procs: %s: %" PRIu64 " frames, %" PRIu64
		" bytes in %.3f s (%.0f MiB/s), consumer waited %" PRIu64 " times\n",
		t->name, res.frames, res.bytes, dt / 1e9, res.bytes / (double)MiB / (dt / 1e9),
		res.waits);
	shmrun_ring_detach(&r);
	ctl_destroy(c);
}
END_TEST

/* ---- dead peers ------------------------------------------------------------- */

#define SMALL_LEN 100u
/* Ring bytes of one SMALL_LEN frame, header and padding included. */
#define SMALL_FRAME ((SHMRUN_FRAME_COMMIT + SHMRUN_FRAME_HEADER + SMALL_LEN + 7) & ~7u)
#define N_SMALL	    5u

static void small_fill(unsigned char *p, uint32_t i)
{
	for (uint32_t k = 0; k < SMALL_LEN; k++)
		p[k] = (unsigned char)(i * 29 + k);
}

static int small_send(struct shmrun_ring *r, uint32_t i)
{
	unsigned char buf[SMALL_LEN];

	small_fill(buf, i);
	return shmrun_ring_write(r, SHMRUN_FRAME_DATA, i, 1000 + i, buf, SMALL_LEN);
}

static bool small_ok(const struct shmrun_frame *f, uint32_t i)
{
	unsigned char buf[SMALL_LEN];

	small_fill(buf, i);
	return f->kind == SHMRUN_FRAME_DATA && f->src_task == i && f->dst_task == 1000 + i &&
	       f->len == SMALL_LEN && memcmp(f->payload, buf, SMALL_LEN) == 0;
}

/* Receive frame @i, waiting at most a second. */
static int small_recv(struct shmrun_ring *r, enum shmrun_idle idle, uint32_t i)
{
	const struct shmrun_frame *f;
	int err = shmrun_ring_wait_readable(r, idle, 1000 * MS);

	if (err)
		return err;
	err = shmrun_ring_peek(r, &f);
	if (err)
		return err;
	if (!small_ok(f, i))
		return -EBADMSG;
	shmrun_ring_release(r, f);
	return 0;
}

/* Producer child: publish N_SMALL frames, record the time and _exit. */
static int producer_then_exit(void *arg)
{
	struct ctl *c = arg;
	struct shmrun_ring r;

	if (child_attach(c, &r, SHMRUN_RING_PRODUCER))
		return 10;
	for (uint32_t i = 0; i < N_SMALL; i++)
		if (small_send(&r, i))
			return 11;
	shmrun_ring_flush(&r);
	atomic_store(&c->t_exit, now_ns());
	return 0; /* _exit(0), no detach */
}

/* Producer child: publish N_SMALL frames, tell the parent, wait to be killed. */
static int producer_then_pause(void *arg)
{
	struct ctl *c = arg;
	struct shmrun_ring r;

	if (child_attach(c, &r, SHMRUN_RING_PRODUCER))
		return 10;
	for (uint32_t i = 0; i < N_SMALL; i++)
		if (small_send(&r, i))
			return 11;
	shmrun_ring_flush(&r);
	child_say(c, 'K');
	for (;;)
		pause();
}

/* Consumer child: receive N_SMALL frames, tell the parent how it went. */
static int consume_small(struct ctl *c, struct shmrun_ring *r)
{
	if (child_attach(c, r, SHMRUN_RING_CONSUMER))
		return -1;
	for (uint32_t i = 0; i < N_SMALL; i++)
		if (small_recv(r, c->idle, i))
			return -1;
	shmrun_ring_consumer_flush(r);
	return 0;
}

static int consumer_then_exit(void *arg)
{
	struct ctl *c = arg;
	struct shmrun_ring r;

	if (consume_small(c, &r)) {
		child_say(c, 'X');
		return 10;
	}
	child_say(c, 'K');
	atomic_store(&c->t_exit, now_ns());
	return 0;
}

static int consumer_then_pause(void *arg)
{
	struct ctl *c = arg;
	struct shmrun_ring r;

	if (consume_small(c, &r)) {
		child_say(c, 'X');
		return 10;
	}
	child_say(c, 'K');
	for (;;)
		pause();
}

/* Kills the child @delay_ns after start and records when. */
struct killer {
	pthread_t tid;
	pid_t pid;
	int64_t delay_ns;
	_Atomic int64_t t_kill;
};

static void *killer_main(void *arg)
{
	struct killer *k = arg;
	struct timespec ts = {0, (long)k->delay_ns};

	nanosleep(&ts, NULL);
	atomic_store(&k->t_kill, now_ns());
	kill(k->pid, SIGKILL);
	return NULL;
}

static void killer_start(struct killer *k, pid_t pid, int64_t delay_ns)
{
	k->pid = pid;
	k->delay_ns = delay_ns;
	atomic_store(&k->t_kill, 0);
	REQUIRE(pthread_create(&k->tid, NULL, killer_main, k) == 0, "pthread_create");
}

static const enum shmrun_idle idles[] = {SHMRUN_IDLE_SPIN, SHMRUN_IDLE_SLEEP, SHMRUN_IDLE_HYBRID};
static const char *const idle_names[] = {"spin", "sleep", "hybrid"};

/* The parent consumer drains the N_SMALL frames of a (maybe dead) producer. */
static void parent_drain_small(struct shmrun_ring *r, enum shmrun_idle idle)
{
	const struct shmrun_frame *f;

	for (uint32_t i = 0; i < N_SMALL; i++) {
		int err = small_recv(r, idle, i);

		REQUIRE(err == 0, "frame %u: %d", i, err);
	}
	REQUIRE(shmrun_ring_peek(r, &f) == -EAGAIN, "more frames than sent");
}

START_TEST(test_dead_producer_exit)
{
	/* The producer publishes and exits before the consumer reads anything:
	 * its frames still arrive, then the consumer learns it is dead. */
	enum shmrun_idle idle = idles[_i];
	struct ctl *c = ctl_create(64 * 1024);
	int64_t t_ret;
	struct shmrun_ring r;
	int err, status;
	pid_t pid;

	parent_attach(c, &r, SHMRUN_RING_CONSUMER);
	pid = spawn(producer_then_exit, c, 10);
	wait_exited(pid, 5000);
	parent_drain_small(&r, idle);
	err = shmrun_ring_wait_readable(&r, idle, 2000 * MS);
	t_ret = now_ns();
	REQUIRE(err == -EOWNERDEAD, "%s: wait_readable returned %d", idle_names[_i], err);
	REQUIRE(atomic_load(&c->t_exit) != 0, "child did not record its exit");
	REQUIRE(t_ret - atomic_load(&c->t_exit) < DEAD_REPORT_NS,
		"%s: dead producer reported %.1f ms after its exit", idle_names[_i],
		(t_ret - atomic_load(&c->t_exit)) / 1e6);
	fprintf(stderr, "check_ring_procs: %s: dead producer reported %.1f ms after its exit\n",
		idle_names[_i], (t_ret - atomic_load(&c->t_exit)) / 1e6);
	expect_zombie(pid, CLD_EXITED, 0);
	/* Still dead, still nothing to read, on every later wait. */
	REQUIRE(shmrun_ring_wait_readable(&r, idle, 2000 * MS) == -EOWNERDEAD, "second wait");
	status = reap(pid, 1000);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	shmrun_ring_detach(&r);
	ctl_destroy(c);
}
END_TEST

START_TEST(test_dead_producer_killed)
{
	/* The producer is SIGKILLed while the consumer waits on an empty ring. */
	enum shmrun_idle idle = idles[_i];
	struct ctl *c = ctl_create(64 * 1024);
	struct killer k;
	int64_t t_start, t_ret;
	struct shmrun_ring r;
	int err, status;
	pid_t pid;

	parent_attach(c, &r, SHMRUN_RING_CONSUMER);
	pid = spawn(producer_then_pause, c, 30);
	REQUIRE(parent_hear(c, 5000) == 'K', "producer child failed");
	parent_drain_small(&r, idle);
	t_start = now_ns();
	killer_start(&k, pid, 30 * MS);
	err = shmrun_ring_wait_readable(&r, idle, 2000 * MS);
	t_ret = now_ns();
	pthread_join(k.tid, NULL);
	REQUIRE(err == -EOWNERDEAD, "%s: wait_readable returned %d", idle_names[_i], err);
	REQUIRE(atomic_load(&k.t_kill) > t_start, "the wait ended before the kill");
	REQUIRE(t_ret - atomic_load(&k.t_kill) < DEAD_REPORT_NS,
		"%s: dead producer reported %.1f ms after the kill", idle_names[_i],
		(t_ret - atomic_load(&k.t_kill)) / 1e6);
	fprintf(stderr, "check_ring_procs: %s: dead producer reported %.1f ms after the kill\n",
		idle_names[_i], (t_ret - atomic_load(&k.t_kill)) / 1e6);
	expect_zombie(pid, CLD_KILLED, SIGKILL);
	status = reap(pid, 1000);
	ck_assert(WIFSIGNALED(status));
	ck_assert_int_eq(WTERMSIG(status), SIGKILL);
	shmrun_ring_detach(&r);
	ctl_destroy(c);
}
END_TEST

/*
 * Producer child: publish N_SMALL frames; commit two more without publishing
 * them (a large batch); reserve a fifth and fill its header and half its
 * payload; tell the parent and wait to be killed mid-frame.
 */
static int producer_mid_frame(void *arg)
{
	struct ctl *c = arg;
	struct shmrun_frame *f;
	struct shmrun_ring r;

	if (child_attach(c, &r, SHMRUN_RING_PRODUCER))
		return 10;
	for (uint32_t i = 0; i < N_SMALL; i++)
		if (small_send(&r, i))
			return 11;
	shmrun_ring_flush(&r);
	shmrun_ring_set_batch(&r, 1u << 30);
	for (uint32_t i = N_SMALL; i < N_SMALL + 2; i++)
		if (small_send(&r, i))
			return 12;
	if (shmrun_ring_pending(&r) != 2 * SMALL_FRAME)
		return 13;
	if (shmrun_ring_reserve(&r, SMALL_LEN, &f))
		return 14;
	f->kind = SHMRUN_FRAME_DATA;
	f->src_task = N_SMALL + 2;
	f->dst_task = 1000 + N_SMALL + 2;
	small_fill(f->payload, N_SMALL + 2);
	memset(f->payload + SMALL_LEN / 2, 0, SMALL_LEN / 2);
	child_say(c, 'K');
	for (;;)
		pause();
}

START_TEST(test_dead_producer_mid_frame)
{
	/* A producer killed with unpublished commits and a half-written frame:
	 * the consumer sees nothing of them, and a new producer resumes where
	 * the published frames end. */
	enum shmrun_idle idle = idles[_i];
	struct ctl *c = ctl_create(64 * 1024);
	const struct shmrun_frame *f;
	struct shmrun_ring r, p2;
	int err, status;
	size_t len;
	void *mem;
	pid_t pid;

	parent_attach(c, &r, SHMRUN_RING_CONSUMER);
	pid = spawn(producer_mid_frame, c, 30);
	REQUIRE(parent_hear(c, 5000) == 'K', "producer child failed");
	parent_drain_small(&r, idle);
	REQUIRE(shmrun_ring_peek(&r, &f) == -EAGAIN, "unpublished frame visible before the kill");
	kill(pid, SIGKILL);
	status = reap(pid, 5000);
	REQUIRE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "child status %#x", status);
	err = shmrun_ring_wait_readable(&r, idle, 2000 * MS);
	REQUIRE(err == -EOWNERDEAD, "%s: wait_readable returned %d", idle_names[_i], err);
	REQUIRE(shmrun_ring_peek(&r, &f) == -EAGAIN, "a frame of the dead producer is visible");
	REQUIRE(atomic_load(&c->t_exit) == 0, "child exited by itself");
	/* A new producer takes over at the end of what was published. */
	mem = shmrun_segment_ring(&c->seg, 0, &len);
	ck_assert_int_eq(shmrun_ring_attach(&p2, mem, len, SHMRUN_RING_PRODUCER), 0);
	ck_assert_int_eq(shmrun_ring_write(&p2, SHMRUN_FRAME_END, 7, 8, "end", 3), 0);
	shmrun_ring_flush(&p2);
	ck_assert_int_eq(shmrun_ring_peek(&r, &f), 0);
	ck_assert_uint_eq(f->kind, SHMRUN_FRAME_END);
	ck_assert_uint_eq(f->src_task, 7);
	ck_assert_uint_eq(f->len, 3);
	ck_assert_mem_eq(f->payload, "end", 3);
	shmrun_ring_release(&r, f);
	ck_assert_int_eq(shmrun_ring_peek(&r, &f), -EAGAIN);
	shmrun_ring_detach(&p2);
	shmrun_ring_detach(&r);
	ctl_destroy(c);
}
END_TEST

/* The parent producer fills the ring; returns how many frames it took. */
static unsigned parent_fill(struct shmrun_ring *r)
{
	unsigned n = 0;
	int err;

	while ((err = small_send(r, 100 + n)) == 0)
		n++;
	REQUIRE(err == -EAGAIN, "write: %d", err);
	REQUIRE(!shmrun_ring_writable(r, SMALL_LEN), "writable when full");
	return n;
}

START_TEST(test_dead_consumer_exit)
{
	/* The consumer reads a few frames and exits; the producer fills the ring
	 * and waits for room that never comes. */
	enum shmrun_idle idle = idles[_i];
	struct ctl *c = ctl_create(4096);
	struct shmrun_ring r;
	int64_t t_ret;
	unsigned n;
	int err, status;
	pid_t pid;

	c->idle = idle;
	parent_attach(c, &r, SHMRUN_RING_PRODUCER);
	for (uint32_t i = 0; i < N_SMALL; i++)
		ck_assert_int_eq(small_send(&r, i), 0);
	shmrun_ring_flush(&r);
	pid = spawn(consumer_then_exit, c, 10);
	REQUIRE(parent_hear(c, 5000) == 'K', "consumer child got bad frames");
	wait_exited(pid, 5000);
	n = parent_fill(&r);
	REQUIRE(n == 4096 / SMALL_FRAME, "%u frames filled the ring", n);
	err = shmrun_ring_wait_writable(&r, SMALL_LEN, idle, 2000 * MS);
	t_ret = now_ns();
	REQUIRE(err == -EOWNERDEAD, "%s: wait_writable returned %d", idle_names[_i], err);
	REQUIRE(t_ret - atomic_load(&c->t_exit) < DEAD_REPORT_NS,
		"%s: dead consumer reported %.1f ms after its exit", idle_names[_i],
		(t_ret - atomic_load(&c->t_exit)) / 1e6);
	fprintf(stderr, "check_ring_procs: %s: dead consumer reported %.1f ms after its exit\n",
		idle_names[_i], (t_ret - atomic_load(&c->t_exit)) / 1e6);
	expect_zombie(pid, CLD_EXITED, 0);
	status = reap(pid, 1000);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	shmrun_ring_detach(&r);
	ctl_destroy(c);
}
END_TEST

START_TEST(test_dead_consumer_killed)
{
	/* The consumer is SIGKILLed while the producer waits for room. */
	enum shmrun_idle idle = idles[_i];
	struct ctl *c = ctl_create(4096);
	int64_t t_start, t_ret;
	struct shmrun_ring r;
	struct killer k;
	unsigned n;
	int err, status;
	pid_t pid;

	c->idle = idle;
	parent_attach(c, &r, SHMRUN_RING_PRODUCER);
	for (uint32_t i = 0; i < N_SMALL; i++)
		ck_assert_int_eq(small_send(&r, i), 0);
	shmrun_ring_flush(&r);
	pid = spawn(consumer_then_pause, c, 30);
	REQUIRE(parent_hear(c, 5000) == 'K', "consumer child got bad frames");
	n = parent_fill(&r);
	REQUIRE(n == 4096 / SMALL_FRAME, "%u frames filled the ring", n);
	t_start = now_ns();
	killer_start(&k, pid, 30 * MS);
	err = shmrun_ring_wait_writable(&r, SMALL_LEN, idle, 2000 * MS);
	t_ret = now_ns();
	pthread_join(k.tid, NULL);
	REQUIRE(err == -EOWNERDEAD, "%s: wait_writable returned %d", idle_names[_i], err);
	REQUIRE(atomic_load(&k.t_kill) > t_start, "the wait ended before the kill");
	REQUIRE(t_ret - atomic_load(&k.t_kill) < DEAD_REPORT_NS,
		"%s: dead consumer reported %.1f ms after the kill", idle_names[_i],
		(t_ret - atomic_load(&k.t_kill)) / 1e6);
	fprintf(stderr, "check_ring_procs: %s: dead consumer reported %.1f ms after the kill\n",
		idle_names[_i], (t_ret - atomic_load(&k.t_kill)) / 1e6);
	expect_zombie(pid, CLD_KILLED, SIGKILL);
	status = reap(pid, 1000);
	ck_assert(WIFSIGNALED(status));
	ck_assert_int_eq(WTERMSIG(status), SIGKILL);
	shmrun_ring_detach(&r);
	ctl_destroy(c);
}
END_TEST

static Suite *ring_procs_suite(void)
{
	Suite *s = suite_create("ring_procs");
	TCase *tc;

	tc = tcase_create("transfer");
	tcase_set_timeout(tc, 240);
	tcase_add_loop_test(tc, test_transfer, 0, sizeof(transfers) / sizeof(transfers[0]));
	suite_add_tcase(s, tc);

	tc = tcase_create("dead_peer");
	tcase_set_timeout(tc, 20);
	tcase_add_loop_test(tc, test_dead_producer_exit, 0, 3);
	tcase_add_loop_test(tc, test_dead_producer_killed, 0, 3);
	tcase_add_loop_test(tc, test_dead_producer_mid_frame, 0, 3);
	tcase_add_loop_test(tc, test_dead_consumer_exit, 0, 3);
	tcase_add_loop_test(tc, test_dead_consumer_killed, 0, 3);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(ring_procs_suite());
	int failed;

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
