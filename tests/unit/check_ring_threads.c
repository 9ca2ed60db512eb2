/*
 * tests/unit/check_ring_threads.c: one ring, a producer thread and a consumer
 * thread in one process, in each idle mode (spin, sleep, hybrid).
 *
 * The stream of tests/common/ring_stream.h (random lengths up to the largest
 * frame, sequence numbers, XXH64 of every payload) goes through a 64 KiB ring
 * and through a 4 KiB ring (many more wraps and wake-ups per byte); the consumer
 * checks order, lengths and checksums in place. The doorbell tests check that
 * a side asleep in shmrun_ring_wait_readable()/wait_writable() (sleep and
 * hybrid modes) is woken by its peer's publication at once, not by its 20 ms
 * liveness timeout: a lost wake-up shows as a latency near that period.
 *
 * This is the test .ci/run runs under TSan (label "tsan"): it is where a missing
 * acquire/release pair on head or tail shows up as a data race on frame bytes.
 */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "common/ring_stream.h"
#include "shmrun/ring.h"

#define MiB (1024u * 1024u)

struct side {
	struct shmrun_ring r;
	struct rs_cfg cfg;
	struct rs_result res;
	int rc;
};

static void *producer_main(void *arg)
{
	struct side *p = arg;

	p->rc = rs_produce(&p->r, &p->cfg, &p->res);
	shmrun_ring_detach(&p->r);
	return NULL;
}

static const char *idle_name(enum shmrun_idle idle)
{
	return idle == SHMRUN_IDLE_SPIN ? "spin" : idle == SHMRUN_IDLE_SLEEP ? "sleep" : "hybrid";
}

static void transfer(uint64_t cap, uint64_t bytes, enum shmrun_idle idle, uint64_t seed)
{
	size_t len = shmrun_ring_memsize(cap);
	void *mem = aligned_alloc(SHMRUN_CACHELINE, len);
	struct side p, c;
	pthread_t tid;

	ck_assert_ptr_nonnull(mem);
	ck_assert_int_eq(shmrun_ring_init(mem, len, cap), 0);
	ck_assert_int_eq(shmrun_ring_attach(&p.r, mem, len, SHMRUN_RING_PRODUCER), 0);
	ck_assert_int_eq(shmrun_ring_attach(&c.r, mem, len, SHMRUN_RING_CONSUMER), 0);
	p.cfg =
	    (struct rs_cfg){.seed = seed, .bytes = bytes, .idle = idle, .wait_ns = 20000000000ll};
	c.cfg = p.cfg;
	ck_assert_int_eq(pthread_create(&tid, NULL, producer_main, &p), 0);
	c.rc = rs_consume(&c.r, &c.cfg, &c.res);
	shmrun_ring_detach(&c.r);
	ck_assert_int_eq(pthread_join(tid, NULL), 0);

	ck_assert_msg(p.rc == 0, "producer: %s", p.res.msg);
	ck_assert_msg(c.rc == 0, "consumer: %s", c.res.msg);
	ck_assert_uint_ge(p.res.bytes, bytes);
	ck_assert_uint_eq(c.res.frames, p.res.frames);
	ck_assert_uint_eq(c.res.bytes, p.res.bytes);
	ck_assert_uint_gt(c.res.frames, bytes / shmrun_ring_max_payload(&p.r));
	fprintf(stderr,
		"check_ring_threads: %s, %" PRIu64 "-byte ring: %" PRIu64 " frames, %" PRIu64
		" bytes, waits: producer %" PRIu64 ", consumer %" PRIu64 "\n",
		idle_name(idle), cap, c.res.frames, c.res.bytes, p.res.waits, c.res.waits);
	free(mem);
}

static const enum shmrun_idle idles[] = {SHMRUN_IDLE_SPIN, SHMRUN_IDLE_SLEEP, SHMRUN_IDLE_HYBRID};

START_TEST(test_threads_64k)
{
	transfer(64 * 1024, 20 * MiB, idles[_i], 0x5eed0000u + (uint64_t)_i);
}
END_TEST

START_TEST(test_threads_4k)
{
	transfer(4096, 2 * MiB, idles[_i], 0x4b000000u + (uint64_t)_i);
}
END_TEST

/* ---- doorbells ------------------------------------------------------------ */

#define ROUNDS 15
/* A woken sleeper returns within this median latency; a lost wake-up costs
 * most of SHMRUN_RING_LIVENESS_NS (20 ms), the period a sleeper naps at most. */
#define WAKE_MEDIAN_NS 5000000

struct bell_test {
	struct shmrun_ring p, c;
	_Atomic int round;     /* the main thread is about to wait in this round */
	_Atomic int64_t t_act; /* when the helper published for it */
	_Atomic int done;      /* the last round the helper finished */
	_Atomic int failed;
};

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Wait until the main thread enters round @i, then give it time to fall asleep. */
static void await_round(struct bell_test *b, int i)
{
	struct timespec ts = {0, 3000000};

	while (atomic_load(&b->round) != i)
		sched_yield();
	nanosleep(&ts, NULL);
}

/* Helper producer: one frame per round, while the consumer sleeps. */
static void *data_waker(void *arg)
{
	struct bell_test *b = arg;

	for (int i = 1; i <= ROUNDS; i++) {
		await_round(b, i);
		atomic_store(&b->t_act, now_ns());
		if (shmrun_ring_write(&b->p, SHMRUN_FRAME_DATA, (uint32_t)i, 0, &i, sizeof(i)))
			atomic_store(&b->failed, 1);
		shmrun_ring_flush(&b->p);
	}
	return NULL;
}

/* Helper consumer: empty the ring each round, while the producer sleeps. */
static void *room_waker(void *arg)
{
	struct bell_test *b = arg;
	const struct shmrun_frame *f;

	for (int i = 1; i <= ROUNDS; i++) {
		await_round(b, i);
		atomic_store(&b->t_act, now_ns());
		while (shmrun_ring_peek(&b->c, &f) == 0)
			shmrun_ring_release(&b->c, f);
		atomic_store(&b->done, i);
	}
	return NULL;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

static void bell_open(struct bell_test *b, void **mem)
{
	size_t len = shmrun_ring_memsize(4096);

	*mem = aligned_alloc(SHMRUN_CACHELINE, len);
	ck_assert_ptr_nonnull(*mem);
	ck_assert_int_eq(shmrun_ring_init(*mem, len, 4096), 0);
	ck_assert_int_eq(shmrun_ring_attach(&b->p, *mem, len, SHMRUN_RING_PRODUCER), 0);
	ck_assert_int_eq(shmrun_ring_attach(&b->c, *mem, len, SHMRUN_RING_CONSUMER), 0);
	atomic_store(&b->round, 0);
	atomic_store(&b->done, 0);
	atomic_store(&b->failed, 0);
}

static void check_latencies(int64_t *lat, const char *what, enum shmrun_idle idle)
{
	qsort(lat, ROUNDS, sizeof(lat[0]), cmp_i64);
	fprintf(stderr, "check_ring_threads: %s, %s: wake-up latency median %.3f ms, max %.3f ms\n",
		what, idle_name(idle), lat[ROUNDS / 2] / 1e6, lat[ROUNDS - 1] / 1e6);
	ck_assert_msg(lat[ROUNDS / 2] < WAKE_MEDIAN_NS,
		      "%s, %s: median wake-up latency %.3f ms: wake-ups are lost", what,
		      idle_name(idle), lat[ROUNDS / 2] / 1e6);
}

static const enum shmrun_idle sleepers[] = {SHMRUN_IDLE_SLEEP, SHMRUN_IDLE_HYBRID};

START_TEST(test_doorbell_data)
{
	/* The consumer sleeps on an empty ring; each frame wakes it. */
	enum shmrun_idle idle = sleepers[_i];
	const struct shmrun_frame *f;
	int64_t lat[ROUNDS];
	struct bell_test b;
	pthread_t tid;
	void *mem;

	bell_open(&b, &mem);
	ck_assert_int_eq(pthread_create(&tid, NULL, data_waker, &b), 0);
	for (int i = 1; i <= ROUNDS; i++) {
		int err;

		atomic_store(&b.round, i);
		err = shmrun_ring_wait_readable(&b.c, idle, 2000000000);
		lat[i - 1] = now_ns() - atomic_load(&b.t_act);
		ck_assert_int_eq(err, 0);
		ck_assert_int_eq(shmrun_ring_peek(&b.c, &f), 0);
		ck_assert_uint_eq(f->src_task, (uint32_t)i);
		shmrun_ring_release(&b.c, f);
		ck_assert_int_eq(shmrun_ring_peek(&b.c, &f), -EAGAIN);
	}
	ck_assert_int_eq(pthread_join(tid, NULL), 0);
	ck_assert_int_eq(atomic_load(&b.failed), 0);
	check_latencies(lat, "data bell", idle);
	free(mem);
}
END_TEST

START_TEST(test_doorbell_room)
{
	/* The producer sleeps on a full ring; the consumer emptying it wakes it. */
	enum shmrun_idle idle = sleepers[_i];
	int64_t lat[ROUNDS];
	struct bell_test b;
	pthread_t tid;
	void *mem;

	bell_open(&b, &mem);
	ck_assert_int_eq(pthread_create(&tid, NULL, room_waker, &b), 0);
	for (int i = 1; i <= ROUNDS; i++) {
		unsigned n = 0;
		int err;

		while (shmrun_ring_write(&b.p, SHMRUN_FRAME_DATA, n, 0, "0123456789", 10) == 0)
			n++;
		ck_assert_uint_ge(
		    n, 4096 / ((SHMRUN_FRAME_COMMIT + SHMRUN_FRAME_HEADER + 10 + 7) & ~7u) - 1);
		atomic_store(&b.round, i);
		err = shmrun_ring_wait_writable(&b.p, 10, idle, 2000000000);
		lat[i - 1] = now_ns() - atomic_load(&b.t_act);
		ck_assert_int_eq(err, 0);
		/* woken by the first released batch; let the helper finish */
		while (atomic_load(&b.done) != i)
			sched_yield();
	}
	ck_assert_int_eq(pthread_join(tid, NULL), 0);
	check_latencies(lat, "room bell", idle);
	free(mem);
}
END_TEST

static Suite *ring_threads_suite(void)
{
	Suite *s = suite_create("ring_threads");
	TCase *tc = tcase_create("transfer");

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_threads_64k, 0, 3);
	tcase_add_loop_test(tc, test_threads_4k, 0, 3);
	suite_add_tcase(s, tc);

	tc = tcase_create("doorbell");
	tcase_set_timeout(tc, 30);
	tcase_add_loop_test(tc, test_doorbell_data, 0, 2);
	tcase_add_loop_test(tc, test_doorbell_room, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(ring_threads_suite());
	int failed;

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
