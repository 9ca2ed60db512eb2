/*
 * tests/unit/check_timer.c: keyed timers (runtime/timer.c) and namespaced,
 * deletable key-bound state (runtime/task.c), through the operator API on a
 * task of a fake worker (no process, no segment), and timer.h.
 *
 * One TCase per behaviour:
 *
 *   order     due timers fire in time order, equal times by key bytes then
 *             length, whatever order they were set in (random times, keys
 *             and insertion order); only those at or before the limit fire;
 *             the callback gets the key, the time and the domain, and the
 *             timer is gone during the call
 *   dedup     one timer per (domain, key, time): setting it again is a
 *             no-op; the other domain or time is another timer; the domains
 *             fire apart; next_processing is the earliest processing time
 *   delete    shmrun_timer_delete() of a timer in the middle of the heap, of
 *             random halves: the rest fire, in order, exactly once; -ENOENT
 *             for a timer that is not there (also: never set, fired)
 *   reentry   a callback sets timers: one already due (earlier than the one
 *             firing) fires in the same pass, one after the limit stays; a
 *             second pass with the same limit fires nothing; a callback
 *             that fails stops the pass and leaves the rest
 *   memory    timers set and fired for a long run: the store's reserved
 *             memory and heap stay flat
 *   refusals  shmrun_timer_set() without on_timer(), or with a domain that
 *             does not exist: -EINVAL and the task's error
 *   ns        shmrun_keyed_state_ns(): one value per (key, ns), in the key's
 *             vnode, shown by foreach as key || ns; delete of a pair and of
 *             a plain key; the two APIs are not mixed; a lookup before the
 *             first insert finds nothing and fails nothing (regression); a
 *             long run creating and deleting pairs stays flat
 */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "shmrun/job.h"
#include "shmrun/operator.h"
#include "shmrun/placement.h"
#include "control.h"
#include "task.h"
#include "timer.h"
#include "worker.h"

#define VNODES 16u

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond))                                                                       \
			ck_abort_msg(__VA_ARGS__);                                                 \
	} while (0)

/* One firing, as the callback saw it. */
struct fired {
	char key[24];
	uint32_t key_len;
	int64_t time;
	enum shmrun_time_domain domain;
	uint64_t pending; /* shmrun_task_timers() during the call */
};

/* What the test operator's on_timer() does: record, maybe set more, maybe fail. */
static struct {
	struct fired *v;
	uint32_t n, cap;
	int fail_at;	     /* fail (-EIO) on this firing, counted from 1; 0: never */
	bool reset_on_first; /* the first firing sets "early" at 1 and "late" at 10^6 */
	bool touch_state;    /* the callback reads the key's state */
} rec;

static int on_timer(struct shmrun_task *t, void *state, const void *key, uint32_t key_len,
		    int64_t time_ns, enum shmrun_time_domain domain)
{
	struct fired *f;

	(void)state;
	if (rec.n == rec.cap) {
		rec.cap = rec.cap ? rec.cap * 2 : 256;
		rec.v = realloc(rec.v, rec.cap * sizeof(*rec.v));
		ck_assert_ptr_nonnull(rec.v);
	}
	f = &rec.v[rec.n++];
	memset(f, 0, sizeof(*f));
	ck_assert_uint_lt(key_len, sizeof(f->key));
	memcpy(f->key, key, key_len);
	f->key_len = key_len;
	f->time = time_ns;
	f->domain = domain;
	f->pending = shmrun_task_timers(t);
	if (rec.reset_on_first && rec.n == 1) {
		ck_assert_int_eq(shmrun_timer_set(t, SHMRUN_TIME_EVENT, "early", 5, 1), 0);
		ck_assert_int_eq(shmrun_timer_set(t, SHMRUN_TIME_EVENT, "late", 4, 1000000), 0);
		/* the timer firing now was deleted before the call: set again, it is new */
		ck_assert_int_eq(shmrun_timer_set(t, SHMRUN_TIME_EVENT, key, key_len, 2000000), 0);
	}
	if (rec.touch_state) {
		uint64_t *v = shmrun_keyed_state(t, key, key_len, 8, true);

		ck_assert_ptr_nonnull(v);
		(*v)++;
	}
	if (rec.fail_at && (int)rec.n == rec.fail_at) {
		shmrun_task_error(t, "test: failing on purpose");
		return -EIO;
	}
	return 0;
}

static const struct shmrun_operator op_timers = {
    .size = sizeof(struct shmrun_operator),
    .name = "timer_test",
    .on_timer = on_timer,
};
static const struct shmrun_operator op_plain = {
    .size = sizeof(struct shmrun_operator),
    .name = "no_timers",
};

/* A task of a fake worker: what the operator API and cb_enter() need. */
struct fixture {
	struct shmrun_worker_stats stats;
	struct shmrun_control ctl;
	struct shmrun_worker w;
	struct shmrun_stage stage;
	struct shmrun_task t;
};

static void setup_task(struct fixture *fx, const struct shmrun_operator *op)
{
	memset(fx, 0, sizeof(*fx));
	fx->w.stats = &fx->stats;
	fx->w.ctl = &fx->ctl;
	fx->stage.name = "tm";
	fx->stage.op = op;
	fx->stage.width = 1;
	fx->t.stage = &fx->stage;
	fx->t.op = op;
	fx->t.width = 1;
	fx->t.vnodes = VNODES;
	fx->t.vnode_hi = VNODES;
	fx->t.w = &fx->w;
	fx->t.wm = SHMRUN_WATERMARK_MIN;
	ck_assert_int_eq(shmrun_kv_init(&fx->t.kv, VNODES), 0);
	free(rec.v);
	memset(&rec, 0, sizeof(rec));
}

static void teardown_task(struct fixture *fx)
{
	shmrun_kv_free(&fx->t.kv);
	shmrun_timers_free(&fx->t.timers);
	free(fx->t.ns_key);
}

/* Whether firing @a before @b is the documented order. */
static bool in_order(const struct fired *a, const struct fired *b)
{
	uint32_t n = a->key_len < b->key_len ? a->key_len : b->key_len;
	int c;

	if (a->time != b->time)
		return a->time < b->time;
	c = memcmp(a->key, b->key, n);
	return c ? c < 0 : a->key_len < b->key_len;
}

static uint32_t key_name(char *buf, uint32_t i)
{
	/* lengths 1..9, shared prefixes: "k", "k1", "k12", ... tie-breaks by bytes and length */
	static const char digits[] = "123456789";
	uint32_t len = 1 + i % 9;

	buf[0] = 'k';
	memcpy(buf + 1, digits, len - 1);
	buf[len - 1] = (char)(len > 1 ? 'a' + (char)(i / 9 % 20) : 'k');
	return len;
}

/* ---- order ------------------------------------------------------------------ */

START_TEST(fires_in_time_then_key_order)
{
	enum { N = 3000 };
	struct fixture fx;
	char k[16];
	uint32_t set = 0;

	setup_task(&fx, &op_timers);
	srandom(7);
	for (uint32_t i = 0; i < N; i++) {
		uint32_t len = key_name(k, (uint32_t)random() % 180);
		int64_t time = (int64_t)(random() % 200) - 50; /* many ties, negatives too */
		uint64_t before = shmrun_task_timers(&fx.t);

		ck_assert_int_eq(shmrun_timer_set(&fx.t, SHMRUN_TIME_EVENT, k, len, time), 0);
		set += shmrun_task_timers(&fx.t) > before;
	}
	ck_assert_uint_eq(shmrun_task_timers(&fx.t), set);
	/* up to 49: only those at or before it */
	ck_assert_int_eq(shmrun_timers_fire_event(&fx.t, 49), 0);
	for (uint32_t i = 0; i < rec.n; i++) {
		CHECK(rec.v[i].time <= 49, "fired %" PRId64 " at watermark 49", rec.v[i].time);
		CHECK(rec.v[i].domain == SHMRUN_TIME_EVENT, "domain %d", rec.v[i].domain);
		CHECK(rec.v[i].pending == set - i - 1,
		      "firing %u: %" PRIu64 " pending, expected %u", i, rec.v[i].pending,
		      set - i - 1);
		CHECK(i == 0 || in_order(&rec.v[i - 1], &rec.v[i]),
		      "firing %u (%.*s at %" PRId64 ") after %.*s at %" PRId64, i,
		      (int)rec.v[i].key_len, rec.v[i].key, rec.v[i].time, (int)rec.v[i - 1].key_len,
		      rec.v[i - 1].key, rec.v[i - 1].time);
	}
	ck_assert_uint_gt(rec.n, 0);
	ck_assert_uint_lt(rec.n, set);
	/* the rest, at the end of input */
	ck_assert_int_eq(shmrun_timers_fire_event(&fx.t, SHMRUN_WATERMARK_MAX), 0);
	ck_assert_uint_eq(rec.n, set);
	for (uint32_t i = 1; i < rec.n; i++)
		CHECK(in_order(&rec.v[i - 1], &rec.v[i]), "firing %u out of order", i);
	ck_assert_uint_eq(shmrun_task_timers(&fx.t), 0);
	ck_assert_uint_eq(fx.t.timers.kv.keys, 0);
	teardown_task(&fx);
}
END_TEST

/* ---- dedup ------------------------------------------------------------------- */

START_TEST(one_timer_per_domain_key_time)
{
	struct fixture fx;

	setup_task(&fx, &op_timers);
	ck_assert_int_eq(shmrun_timers_next_processing(&fx.t), INT64_MAX);
	ck_assert_int_eq(shmrun_timer_set(&fx.t, SHMRUN_TIME_EVENT, "a", 1, 10), 0);
	ck_assert_int_eq(shmrun_timer_set(&fx.t, SHMRUN_TIME_EVENT, "a", 1, 10), 0);
	ck_assert_uint_eq(shmrun_task_timers(&fx.t), 1);
	ck_assert_int_eq(shmrun_timer_set(&fx.t, SHMRUN_TIME_PROCESSING, "a", 1, 10), 0);
	ck_assert_int_eq(shmrun_timer_set(&fx.t, SHMRUN_TIME_EVENT, "a", 1, 11), 0);
	ck_assert_int_eq(shmrun_timer_set(&fx.t, SHMRUN_TIME_EVENT, "a\0", 2, 10), 0);
	ck_assert_int_eq(shmrun_timer_set(&fx.t, SHMRUN_TIME_PROCESSING, "b", 1, 7), 0);
	ck_assert_uint_eq(shmrun_task_timers(&fx.t), 5);
	ck_assert_int_eq(shmrun_timers_next_processing(&fx.t), 7);
	/* event time fires only event timers */
	ck_assert_int_eq(shmrun_timers_fire_event(&fx.t, 100), 0);
	ck_assert_uint_eq(rec.n, 3);
	ck_assert_str_eq(rec.v[0].key, "a");
	ck_assert_uint_eq(rec.v[0].key_len, 1);
	ck_assert_int_eq(rec.v[0].time, 10);
	ck_assert_uint_eq(rec.v[1].key_len, 2); /* "a\0": same bytes, longer: after "a" */
	ck_assert_int_eq(rec.v[1].time, 10);
	ck_assert_int_eq(rec.v[2].time, 11);
	ck_assert_uint_eq(shmrun_task_timers(&fx.t), 2);
	/* processing time: up to 9 fires "b" at 7 only, then next is 10 */
	ck_assert_int_eq(shmrun_timers_fire_processing(&fx.t, 9), 0);
	ck_assert_uint_eq(rec.n, 4);
	ck_assert_str_eq(rec.v[3].key, "b");
	ck_assert_int_eq(rec.v[3].domain, SHMRUN_TIME_PROCESSING);
	ck_assert_int_eq(shmrun_timers_next_processing(&fx.t), 10);
	ck_assert_int_eq(shmrun_timers_fire_processing(&fx.t, 10), 0);
	ck_assert_uint_eq(rec.n, 5);
	ck_assert_int_eq(shmrun_timers_next_processing(&fx.t), INT64_MAX);
	ck_assert_uint_eq(shmrun_task_timers(&fx.t), 0);
	teardown_task(&fx);
}
END_TEST

/* ---- delete ------------------------------------------------------------------ */

START_TEST(delete_from_the_middle)
{
	enum { N = 2000 };
	struct fixture fx;
	bool *deleted = calloc(N, sizeof(*deleted));
	uint32_t *seen = calloc(N, sizeof(*seen)), left = N;
	char k[16];

	ck_assert_ptr_nonnull(deleted);
	ck_assert_ptr_nonnull(seen);
	setup_task(&fx, &op_timers);
	ck_assert_int_eq(shmrun_timer_delete(&fx.t, SHMRUN_TIME_EVENT, "x", 1, 1), -ENOENT);
	srandom(3);
	for (uint32_t i = 0; i < N; i++) {
		uint32_t len = (uint32_t)snprintf(k, sizeof(k), "t%u", i);

		ck_assert_int_eq(
		    shmrun_timer_set(&fx.t, SHMRUN_TIME_EVENT, k, len, (int64_t)(random() % 500)),
		    0);
	}
	ck_assert_uint_eq(shmrun_task_timers(&fx.t), N);
	/* the time is part of the timer: the wrong one is not there */
	for (uint32_t i = 0; i < N; i++) {
		uint32_t len = (uint32_t)snprintf(k, sizeof(k), "t%u", i);

		if (random() % 2)
			continue;
		/* find its time by trying: only the right one deletes */
		for (int64_t time = 0; time < 500; time++) {
			int r = shmrun_timer_delete(&fx.t, SHMRUN_TIME_EVENT, k, len, time);

			if (r == 0) {
				deleted[i] = true;
				left--;
				CHECK(shmrun_timer_delete(&fx.t, SHMRUN_TIME_EVENT, k, len, time) ==
					  -ENOENT,
				      "deleted t%u twice", i);
				break;
			}
			CHECK(r == -ENOENT, "delete t%u at %" PRId64 ": %d", i, time, r);
		}
		CHECK(deleted[i], "t%u: no time deleted it", i);
	}
	ck_assert_uint_eq(shmrun_task_timers(&fx.t), left);
	ck_assert_int_eq(shmrun_timers_fire_event(&fx.t, SHMRUN_WATERMARK_MAX), 0);
	ck_assert_uint_eq(rec.n, left);
	for (uint32_t i = 0; i < rec.n; i++) {
		unsigned idx = (unsigned)atoi(rec.v[i].key + 1);

		CHECK(i == 0 || in_order(&rec.v[i - 1], &rec.v[i]), "firing %u out of order", i);
		CHECK(!deleted[idx], "deleted timer %s fired", rec.v[i].key);
		CHECK(seen[idx]++ == 0, "timer %s fired twice", rec.v[i].key);
	}
	/* a fired timer is gone */
	ck_assert_int_eq(shmrun_timer_delete(&fx.t, SHMRUN_TIME_EVENT, rec.v[0].key,
					     rec.v[0].key_len, rec.v[0].time),
			 -ENOENT);
	free(deleted);
	free(seen);
	teardown_task(&fx);
}
END_TEST

/* ---- reentry ------------------------------------------------------------------ */

START_TEST(callback_sets_timers_while_firing)
{
	struct fixture fx;

	setup_task(&fx, &op_timers);
	rec.reset_on_first = true;
	rec.touch_state = true;
	ck_assert_int_eq(shmrun_timer_set(&fx.t, SHMRUN_TIME_EVENT, "first", 5, 10), 0);
	ck_assert_int_eq(shmrun_timer_set(&fx.t, SHMRUN_TIME_EVENT, "second", 6, 20), 0);
	ck_assert_int_eq(shmrun_timers_fire_event(&fx.t, 500), 0);
	/* first at 10 sets early at 1 (due: fires next, in this pass), late at 10^6
	 * and first again at 2*10^6 (both stay); then second at 20 */
	ck_assert_uint_eq(rec.n, 3);
	ck_assert_str_eq(rec.v[0].key, "first");
	ck_assert_str_eq(rec.v[1].key, "early");
	ck_assert_int_eq(rec.v[1].time, 1);
	ck_assert_str_eq(rec.v[2].key, "second");
	ck_assert_uint_eq(shmrun_task_timers(&fx.t), 2);
	/* a second pass at the same watermark: nothing due */
	ck_assert_int_eq(shmrun_timers_fire_event(&fx.t, 500), 0);
	ck_assert_uint_eq(rec.n, 3);
	/* the callbacks reached each key's state under its key */
	ck_assert_uint_eq(*(uint64_t *)shmrun_keyed_state(&fx.t, "first", 5, 8, false), 1);
	ck_assert_uint_eq(*(uint64_t *)shmrun_keyed_state(&fx.t, "early", 5, 8, false), 1);
	/* end of input twice: the two left fire once */
	ck_assert_int_eq(shmrun_timers_fire_event(&fx.t, SHMRUN_WATERMARK_MAX), 0);
	ck_assert_int_eq(shmrun_timers_fire_event(&fx.t, SHMRUN_WATERMARK_MAX), 0);
	ck_assert_uint_eq(rec.n, 5);
	ck_assert_str_eq(rec.v[3].key, "late");
	ck_assert_str_eq(rec.v[4].key, "first");
	ck_assert_int_eq(rec.v[4].time, 2000000);
	ck_assert_uint_eq(*(uint64_t *)shmrun_keyed_state(&fx.t, "first", 5, 8, false), 2);
	teardown_task(&fx);
}
END_TEST

START_TEST(failing_callback_stops_the_pass)
{
	struct fixture fx;

	setup_task(&fx, &op_timers);
	rec.fail_at = 2;
	for (int64_t i = 1; i <= 5; i++) {
		char k[4] = {'k', (char)('0' + i), 0, 0};

		ck_assert_int_eq(shmrun_timer_set(&fx.t, SHMRUN_TIME_EVENT, k, 2, i), 0);
	}
	ck_assert_int_eq(shmrun_timers_fire_event(&fx.t, 100), -EIO);
	ck_assert_uint_eq(rec.n, 2);
	ck_assert_uint_eq(shmrun_task_timers(&fx.t), 3);
	ck_assert(fx.w.failed);
	ck_assert_ptr_nonnull(strstr(fx.stats.error, "failing on purpose"));
	/* the worker failed: nothing more fires */
	ck_assert_int_eq(shmrun_timers_fire_event(&fx.t, 100), -ECANCELED);
	ck_assert_uint_eq(rec.n, 2);
	teardown_task(&fx);
}
END_TEST

/* ---- memory ------------------------------------------------------------------ */

START_TEST(set_and_fire_stays_flat)
{
	enum { ROUNDS = 300000, AHEAD = 500 };
	struct fixture fx;
	uint64_t reserved = 0, heap_cap = 0;
	char k[32];

	setup_task(&fx, &op_timers);
	for (uint32_t i = 0; i < ROUNDS; i++) {
		uint32_t len = (uint32_t)snprintf(k, sizeof(k), "key-%u", i % 5000);

		/* a timer AHEAD ticks in the future, then the watermark moves one tick */
		CHECK(shmrun_timer_set(&fx.t, SHMRUN_TIME_EVENT, k, len, (int64_t)i + AHEAD) == 0,
		      "set %u", i);
		CHECK(shmrun_timers_fire_event(&fx.t, (int64_t)i) == 0, "fire %u", i);
		if (rec.n > 4096)
			rec.n = 0; /* keep the record small */
		if (i == 4 * AHEAD) {
			reserved = fx.t.timers.kv.reserved;
			heap_cap = fx.t.timers.heap[SHMRUN_TIME_EVENT].cap;
		}
	}
	ck_assert_uint_eq(shmrun_task_timers(&fx.t), AHEAD);
	ck_assert_uint_gt(reserved, 0);
	ck_assert_uint_eq(fx.t.timers.kv.reserved, reserved);
	ck_assert_uint_eq(fx.t.timers.heap[SHMRUN_TIME_EVENT].cap, heap_cap);
	teardown_task(&fx);
}
END_TEST

/* ---- refusals ------------------------------------------------------------------ */

START_TEST(set_without_on_timer_or_domain)
{
	struct fixture fx;

	setup_task(&fx, &op_plain);
	ck_assert_int_eq(shmrun_timer_set(&fx.t, SHMRUN_TIME_EVENT, "a", 1, 1), -EINVAL);
	ck_assert_ptr_nonnull(strstr(fx.stats.error, "no on_timer()"));
	ck_assert_uint_eq(shmrun_task_timers(&fx.t), 0);
	teardown_task(&fx);
	setup_task(&fx, &op_timers);
	ck_assert_int_eq(shmrun_timer_set(&fx.t, (enum shmrun_time_domain)2, "a", 1, 1), -EINVAL);
	ck_assert_ptr_nonnull(strstr(fx.stats.error, "time domain 2"));
	ck_assert_int_eq(shmrun_timer_delete(&fx.t, (enum shmrun_time_domain)2, "a", 1, 1),
			 -ENOENT);
	teardown_task(&fx);
}
END_TEST

/* ---- namespaced state ------------------------------------------------------------ */

struct ns_walk {
	uint32_t n, in_vnode;
	const struct shmrun_task *t;
};

static int ns_entry(void *arg, const void *key, uint32_t key_len, void *value)
{
	struct ns_walk *nw = arg;
	uint64_t ns, v;

	ck_assert_uint_eq(key_len, 3 + 8);
	memcpy(&ns, (const char *)key + 3, 8);
	memcpy(&v, value, 8);
	ck_assert_uint_eq(v, ns * 10); /* the value written for this pair */
	nw->in_vnode +=
	    shmrun_task_vnode_of(nw->t, key, 3) == shmrun_task_vnode_of(nw->t, "usr", 3);
	nw->n++;
	return 0;
}

START_TEST(namespaced_state)
{
	struct fixture fx;
	struct ns_walk nw = {.t = NULL};
	uint32_t vnode = 0;
	uint64_t *a, *b;

	setup_task(&fx, &op_timers);
	nw.t = &fx.t;
	ck_assert_ptr_null(shmrun_keyed_state_ns(&fx.t, "usr", 3, 100, 8, false));
	for (uint64_t ns = 100; ns < 105; ns++) {
		uint64_t *v = shmrun_keyed_state_ns(&fx.t, "usr", 3, ns, 8, true);

		ck_assert_ptr_nonnull(v);
		ck_assert_uint_eq(*v, 0);
		*v = ns * 10;
	}
	a = shmrun_keyed_state_ns(&fx.t, "usr", 3, 101, 8, false);
	b = shmrun_keyed_state_ns(&fx.t, "usr", 3, 102, 8, false);
	ck_assert_uint_eq(*a, 1010);
	ck_assert_uint_eq(*b, 1020);
	ck_assert_uint_eq(shmrun_keyed_state_keys(&fx.t), 5);
	/* every pair in the vnode of the key bytes alone */
	for (uint32_t v = 0; v < VNODES; v++)
		if (shmrun_kv_vnode_keys(&fx.t.kv, v)) {
			vnode = v;
			ck_assert_uint_eq(shmrun_kv_vnode_keys(&fx.t.kv, v), 5);
		}
	ck_assert_uint_eq(vnode, shmrun_task_vnode_of(&fx.t, "usr", 3));
	ck_assert_int_eq(shmrun_keyed_state_foreach(&fx.t, ns_entry, &nw), 0);
	ck_assert_uint_eq(nw.n, 5);
	ck_assert_uint_eq(nw.in_vnode, 5);
	/* delete one pair: the others stay, at their addresses */
	ck_assert_int_eq(shmrun_keyed_state_delete(&fx.t, "usr", 3, true, 101), 0);
	ck_assert_int_eq(shmrun_keyed_state_delete(&fx.t, "usr", 3, true, 101), -ENOENT);
	ck_assert_int_eq(shmrun_keyed_state_delete(&fx.t, "usr", 3, false, 0), -ENOENT);
	ck_assert_ptr_null(shmrun_keyed_state_ns(&fx.t, "usr", 3, 101, 8, false));
	ck_assert_ptr_eq(shmrun_keyed_state_ns(&fx.t, "usr", 3, 102, 8, false), b);
	ck_assert_uint_eq(*b, 1020);
	ck_assert_uint_eq(shmrun_keyed_state_keys(&fx.t), 4);
	/* the plain API on a namespaced task: refused, with a message */
	ck_assert(!fx.w.failed);
	ck_assert_ptr_null(shmrun_keyed_state(&fx.t, "usr", 3, 8, true));
	ck_assert(fx.w.failed);
	ck_assert_ptr_nonnull(strstr(fx.stats.error, "shmrun_keyed_state() used after "
						     "shmrun_keyed_state_ns()"));
	teardown_task(&fx);
}
END_TEST

START_TEST(plain_delete_and_mixing)
{
	struct fixture fx;

	setup_task(&fx, &op_timers);
	/* regression: a lookup before the first insert failed the task ("used with
	 * 8-byte values after 0-byte ones") */
	ck_assert_ptr_null(shmrun_keyed_state(&fx.t, "k", 1, 8, false));
	ck_assert(!fx.w.failed);
	ck_assert_ptr_nonnull(shmrun_keyed_state(&fx.t, "k", 1, 8, true));
	ck_assert_int_eq(shmrun_keyed_state_delete(&fx.t, "k", 1, true, 0), -ENOENT);
	ck_assert_int_eq(shmrun_keyed_state_delete(&fx.t, "k", 1, false, 0), 0);
	ck_assert_int_eq(shmrun_keyed_state_delete(&fx.t, "k", 1, false, 0), -ENOENT);
	ck_assert_ptr_null(shmrun_keyed_state(&fx.t, "k", 1, 8, false));
	ck_assert_uint_eq(shmrun_keyed_state_keys(&fx.t), 0);
	ck_assert_ptr_null(shmrun_keyed_state_ns(&fx.t, "k", 1, 7, 8, true));
	ck_assert_ptr_nonnull(strstr(fx.stats.error, "shmrun_keyed_state_ns() used after "
						     "shmrun_keyed_state()"));
	teardown_task(&fx);
}
END_TEST

/* Windows per key opened and closed for a long run: memory stays flat. */
START_TEST(namespaced_churn_stays_flat)
{
	enum { ROUNDS = 200000, OPEN = 300 };
	struct fixture fx;
	uint64_t reserved = 0, bytes = 0;
	char k[32];

	setup_task(&fx, &op_timers);
	for (uint32_t i = 0; i < ROUNDS; i++) {
		uint32_t len = (uint32_t)snprintf(k, sizeof(k), "user-%u", i % 97);
		uint64_t *v = shmrun_keyed_state_ns(&fx.t, k, len, i, 8, true);

		CHECK(v && *v == 0, "window %u", i);
		*v = i;
		if (i >= OPEN) {
			len = (uint32_t)snprintf(k, sizeof(k), "user-%u", (i - OPEN) % 97);
			CHECK(shmrun_keyed_state_delete(&fx.t, k, len, true, i - OPEN) == 0,
			      "close window %u", i - OPEN);
		}
		if (i == 4 * OPEN) {
			reserved = fx.t.kv.reserved;
			bytes = fx.t.kv.bytes;
		}
	}
	ck_assert_uint_eq(shmrun_keyed_state_keys(&fx.t), OPEN);
	ck_assert_uint_eq(fx.t.kv.reserved, reserved);
	ck_assert_uint_eq(fx.t.kv.bytes, bytes);
	teardown_task(&fx);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("timer");
	TCase *tc;
	SRunner *sr;
	int failed;

	shmrun_state_arena_init();
	tc = tcase_create("order");
	tcase_add_test(tc, fires_in_time_then_key_order);
	suite_add_tcase(s, tc);
	tc = tcase_create("dedup");
	tcase_add_test(tc, one_timer_per_domain_key_time);
	suite_add_tcase(s, tc);
	tc = tcase_create("delete");
	tcase_add_test(tc, delete_from_the_middle);
	suite_add_tcase(s, tc);
	tc = tcase_create("reentry");
	tcase_add_test(tc, callback_sets_timers_while_firing);
	tcase_add_test(tc, failing_callback_stops_the_pass);
	suite_add_tcase(s, tc);
	tc = tcase_create("memory");
	tcase_add_test(tc, set_and_fire_stays_flat);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	tc = tcase_create("refusals");
	tcase_add_test(tc, set_without_on_timer_or_domain);
	suite_add_tcase(s, tc);
	tc = tcase_create("ns");
	tcase_add_test(tc, namespaced_state);
	tcase_add_test(tc, plain_delete_and_mixing);
	tcase_add_test(tc, namespaced_churn_stays_flat);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	free(rec.v);
	return failed ? 1 : 0;
}
