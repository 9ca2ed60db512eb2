/*
 * tests/unit/check_window.c: `op = window` (runtime/ops/window.c) against the
 * event-time contract of shmrun/operator.h, with hand-computed results.
 *
 * The operator is linked alone with a small model of the runtime side of the
 * contract (below): key-bound state per (key, namespace), one event-time
 * timer per (key, time), and a watermark that, when advanced, fires the due
 * timers in time order (timers set meanwhile at or before it fire in the same
 * pass) before anything else runs. So these tests pin the operator's own
 * logic — window assignment, aggregates, firing, lateness, session merging,
 * state cleanup — whatever the state of the runtime's timer store; the
 * integration tests (window.sh) run it on the real one.
 */
#include <check.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/file_out.h"
#include "ops/ops.h"

#define S 1000000000ll /* ns per second */

/* ---- the model of the runtime ------------------------------------------------ */

struct entry {
	char key[32];
	uint64_t ns;
	uint64_t value[64]; /* 512 bytes, 8-byte aligned */
	bool used;
};

struct timer {
	char key[32];
	int64_t time;
};

struct shmrun_task {
	const char *params[16][2];
	struct entry state[256];
	struct timer timers[256];
	int ntimers;
	int64_t wm;
	char out[64][160]; /* "key|value|event_time_ns" */
	int nout;
	uint64_t late;
	int errors;
	void *op_state;
};

static struct shmrun_task T;

const char *shmrun_task_param(const struct shmrun_task *t, const char *key)
{
	for (int i = 0; i < 16 && t->params[i][0]; i++)
		if (strcmp(t->params[i][0], key) == 0)
			return t->params[i][1];
	for (const struct shmrun_param_def *d = shmrun_op_window.params; d->key; d++)
		if (strcmp(d->key, key) == 0)
			return d->def;
	return NULL;
}

uint64_t shmrun_task_param_u64(const struct shmrun_task *t, const char *key, uint64_t def)
{
	const char *v = shmrun_task_param(t, key);
	char *end;
	uint64_t n;

	if (!v)
		return def;
	n = strtoull(v, &end, 10);
	return strcmp(end, "ms") == 0 ? n * 1000000 : n * (uint64_t)S;
}

void shmrun_task_error(struct shmrun_task *t, const char *fmt, ...)
{
	(void)fmt;
	t->errors++;
}

void shmrun_task_error_at(struct shmrun_task *t, const char *key, const char *fmt, ...)
{
	(void)key;
	(void)fmt;
	t->errors++;
}

int shmrun_task_require_by_key(struct shmrun_task *t, const char *op)
{
	(void)t;
	(void)op;
	return 0; /* the inputs are integration tests' (window_check.sh) */
}

void shmrun_task_warn(struct shmrun_task *t, const char *fmt, ...)
{
	(void)t;
	(void)fmt;
}

void shmrun_task_count(struct shmrun_task *t, enum shmrun_counter c, uint64_t n)
{
	if (c == SHMRUN_COUNT_LATE_RECORDS)
		t->late += n;
}

int64_t shmrun_task_watermark(const struct shmrun_task *t)
{
	return t->wm;
}

int shmrun_emit(struct shmrun_task *t, const struct shmrun_record *rec)
{
	ck_assert_int_lt(t->nout, 64);
	snprintf(t->out[t->nout++], sizeof(t->out[0]), "%.*s|%.*s|%" PRId64, (int)rec->key_len,
		 (const char *)rec->key, (int)rec->value_len, (const char *)rec->value,
		 rec->event_time_ns);
	return 0;
}

static struct entry *find(struct shmrun_task *t, const void *key, uint32_t len, uint64_t ns)
{
	for (int i = 0; i < 256; i++)
		if (t->state[i].used && t->state[i].ns == ns && strlen(t->state[i].key) == len &&
		    memcmp(t->state[i].key, key, len) == 0)
			return &t->state[i];
	return NULL;
}

void *shmrun_keyed_state_ns(struct shmrun_task *t, const void *key, uint32_t key_len, uint64_t ns,
			    uint32_t value_bytes, bool create)
{
	struct entry *e = find(t, key, key_len, ns);

	ck_assert_uint_le(value_bytes, sizeof(e->value));
	if (e || !create)
		return e ? e->value : NULL;
	for (int i = 0; i < 256; i++)
		if (!t->state[i].used) {
			e = &t->state[i];
			memset(e, 0, sizeof(*e));
			e->used = true;
			memcpy(e->key, key, key_len);
			e->ns = ns;
			return e->value;
		}
	ck_abort_msg("model state full");
	return NULL;
}

int shmrun_keyed_state_delete(struct shmrun_task *t, const void *key, uint32_t key_len,
			      bool namespaced, uint64_t ns)
{
	struct entry *e = find(t, key, key_len, ns);

	ck_assert(namespaced);
	if (!e)
		return -ENOENT;
	e->used = false;
	return 0;
}

int shmrun_timer_set(struct shmrun_task *t, enum shmrun_time_domain domain, const void *key,
		     uint32_t key_len, int64_t time_ns)
{
	ck_assert_int_eq(domain, SHMRUN_TIME_EVENT);
	/* the operator's invariant: never a timer the watermark has passed */
	ck_assert_int_gt(time_ns, t->wm);
	for (int i = 0; i < t->ntimers; i++)
		if (t->timers[i].time == time_ns && strlen(t->timers[i].key) == key_len &&
		    memcmp(t->timers[i].key, key, key_len) == 0)
			return 0;
	ck_assert_int_lt(t->ntimers, 256);
	memset(&t->timers[t->ntimers], 0, sizeof(t->timers[0]));
	memcpy(t->timers[t->ntimers].key, key, key_len);
	t->timers[t->ntimers++].time = time_ns;
	return 0;
}

/* The `late` file (ops/file_out.h) is file_sink's code, tested with it; these
 * tests never set `late`, so none of it may be called. */
#define NOT_CALLED(name) ck_abort_msg(#name " called without late")
int shmrun_file_out_prepare(struct shmrun_task *t, const char *key)
{
	NOT_CALLED(prepare);
	return 0;
}
int shmrun_file_out_open(struct shmrun_task *t, const char *key, struct shmrun_file_out **out)
{
	NOT_CALLED(open);
	return 0;
}
int shmrun_file_out_put(struct shmrun_task *t, struct shmrun_file_out *out, const void *line,
			uint32_t len)
{
	NOT_CALLED(put);
	return 0;
}
int shmrun_file_out_end(struct shmrun_task *t, struct shmrun_file_out *out)
{
	NOT_CALLED(end);
	return 0;
}
void shmrun_file_out_close(struct shmrun_task *t, struct shmrun_file_out *out)
{
	NOT_CALLED(close);
}
int shmrun_file_out_snapshot(struct shmrun_task *t, struct shmrun_file_out *out, uint64_t epoch)
{
	NOT_CALLED(snapshot);
	return 0;
}
int shmrun_file_out_restore(struct shmrun_task *t, struct shmrun_file_out *out, const void *entry,
			    uint32_t len)
{
	NOT_CALLED(restore);
	return 0;
}
int shmrun_file_out_commit(struct shmrun_task *t, struct shmrun_file_out *out, uint64_t epoch)
{
	NOT_CALLED(commit);
	return 0;
}
int shmrun_file_out_flush(struct shmrun_task *t, struct shmrun_file_out *out)
{
	NOT_CALLED(flush);
	return 0;
}

static int live_entries(void)
{
	int n = 0;

	for (int i = 0; i < 256; i++)
		n += T.state[i].used;
	return n;
}

/* ---- driving the operator ------------------------------------------------------ */

static void setup(const char *const *kv)
{
	memset(&T, 0, sizeof(T));
	T.wm = SHMRUN_WATERMARK_MIN;
	for (int i = 0; kv[i]; i += 2) {
		T.params[i / 2][0] = kv[i];
		T.params[i / 2][1] = kv[i + 1];
	}
	ck_assert_int_eq(shmrun_op_window.prepare(&T), 0);
	ck_assert_int_eq(shmrun_op_window.open(&T, &T.op_state), 0);
}

static void teardown(void)
{
	shmrun_op_window.close(&T, T.op_state);
}

static void rec(const char *key, int64_t t_ns, const char *value)
{
	struct shmrun_record r = {.key = key, .key_len = (uint32_t)strlen(key), .value = value,
				  .value_len = (uint32_t)strlen(value), .event_time_ns = t_ns};

	ck_assert_int_eq(shmrun_op_window.process(&T, T.op_state, &r), 0);
}

/* Advance the watermark to @wm: due timers fire in time order first. */
static void watermark(int64_t wm)
{
	T.wm = wm;
	for (;;) {
		int best = -1;
		struct timer tm;

		for (int i = 0; i < T.ntimers; i++)
			if (T.timers[i].time <= wm &&
			    (best < 0 || T.timers[i].time < T.timers[best].time))
				best = i;
		if (best < 0)
			break;
		tm = T.timers[best];
		T.timers[best] = T.timers[--T.ntimers];
		ck_assert_int_eq(shmrun_op_window.on_timer(&T, T.op_state, tm.key,
							   (uint32_t)strlen(tm.key), tm.time,
							   SHMRUN_TIME_EVENT),
				 0);
	}
}

static void end_of_input(void)
{
	watermark(SHMRUN_WATERMARK_MAX);
	ck_assert_int_eq(shmrun_op_window.end_of_input(&T, T.op_state), 0);
	/* everything fired and was cleaned up */
	ck_assert_int_eq(live_entries(), 0);
	ck_assert_int_eq(T.ntimers, 0);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* The outputs since the last call, sorted, must be exactly @want (NULL-ended). */
static void expect(const char *const *want)
{
	int n = 0;

	qsort(T.out, (size_t)T.nout, sizeof(T.out[0]), cmp_str);
	for (; want[n]; n++) {
		ck_assert_int_lt(n, T.nout);
		ck_assert_str_eq(T.out[n], want[n]);
	}
	ck_assert_int_eq(T.nout, n);
	T.nout = 0;
}

#define WANT(...) expect((const char *const[]){__VA_ARGS__, NULL})
#define NONE() expect((const char *const[]){NULL})
#define KV(...) ((const char *const[]){__VA_ARGS__, NULL})

/* ---- tumbling ------------------------------------------------------------------ */

START_TEST(tumbling_count_fires_at_end)
{
	setup(KV("kind", "tumbling", "size", "10s"));
	rec("a", 1 * S, "");
	rec("a", 5 * S, "");
	rec("b", 3 * S, "");
	rec("a", 12 * S, "");
	watermark(10 * S - 2); /* one ns before [0, 10s)'s last instant */
	NONE();
	watermark(10 * S - 1);
	WANT("a|1970-01-01T00:00:00Z\t1970-01-01T00:00:10Z\t2|9999999999",
	     "b|1970-01-01T00:00:00Z\t1970-01-01T00:00:10Z\t1|9999999999");
	ck_assert_int_eq(live_entries(), 1); /* a's [10s, 20s) */
	end_of_input();
	WANT("a|1970-01-01T00:00:10Z\t1970-01-01T00:00:20Z\t1|19999999999");
	ck_assert_uint_eq(T.late, 0);
	teardown();
}
END_TEST

START_TEST(tumbling_aggregates)
{
	static const char *const want[5] = {"4", "10.5", "-1", "8", "2.625"};
	static const char *const names[5] = {"count", "sum", "min", "max", "avg"};

	for (int i = 0; i < 5; i++) {
		char w[128];

		setup(KV("kind", "tumbling", "size", "60s", "aggregate", names[i],
			 "time_format", "ms"));
		rec("k", 61 * S, "8");
		rec("k", 62 * S, " 2.5 ");
		rec("k", 70 * S, "-1");
		rec("k", 80 * S, "1e0");
		if (i) /* not numbers: skipped, not counted as late */
			rec("k", 90 * S, "x1");
		if (i)
			rec("k", 91 * S, "nan");
		end_of_input();
		snprintf(w, sizeof(w), "k|60000\t120000\t%s|119999999999", want[i]);
		WANT(w);
		ck_assert_uint_eq(T.late, 0);
		teardown();
	}
}
END_TEST

START_TEST(negative_times_and_fractions)
{
	setup(KV("kind", "tumbling", "size", "1500ms"));
	rec("k", -1, ""); /* in [-1.5s, 0) */
	rec("k", 1500000000ll, "");
	end_of_input();
	WANT("k|1969-12-31T23:59:58.500Z\t1970-01-01T00:00:00Z\t1|-1",
	     "k|1970-01-01T00:00:01.500Z\t1970-01-01T00:00:03Z\t1|2999999999");
	teardown();
}
END_TEST

/* ---- sliding ------------------------------------------------------------------- */

START_TEST(sliding_record_in_size_over_slide_windows)
{
	setup(KV("kind", "sliding", "size", "10s", "slide", "5s", "aggregate", "sum",
		 "time_format", "ms"));
	rec("a", 7 * S, "1");  /* [0,10) [5,15) */
	rec("a", 12 * S, "2"); /* [5,15) [10,20) */
	rec("a", 15 * S, "4"); /* [10,20) [15,25) */
	watermark(15 * S - 1);
	WANT("a|0\t10000\t1|9999999999", "a|5000\t15000\t3|14999999999");
	end_of_input();
	WANT("a|10000\t20000\t6|19999999999", "a|15000\t25000\t4|24999999999");
	teardown();
}
END_TEST

/* ---- session ------------------------------------------------------------------- */

START_TEST(session_merges)
{
	setup(KV("kind", "session", "gap", "5s", "time_format", "ms"));
	rec("a", 1 * S, "");
	rec("a", 3 * S, "");  /* [1,8) */
	rec("a", 20 * S, ""); /* [20,25) */
	rec("a", 24 * S, ""); /* [20,29) */
	rec("a", 10 * S, ""); /* [10,15): meets neither */
	rec("b", 2 * S, "");  /* b's own [2,7) */
	/* [15,20) touches [10,15) and [20,29): all three merge into [10,29) */
	rec("a", 15 * S, "");
	watermark(8 * S - 1);
	WANT("a|1000\t8000\t2|7999999999", "b|2000\t7000\t1|6999999999");
	watermark(28 * S); /* the stale timers of merged sessions do nothing */
	NONE();
	end_of_input();
	WANT("a|10000\t29000\t4|28999999999");
	teardown();
}
END_TEST

START_TEST(session_many_open_pages)
{
	/* 12 sessions of one key open at once: the list spans 3 pages */
	setup(KV("kind", "session", "gap", "1s", "aggregate", "max", "time_format", "ms"));
	for (int i = 11; i >= 0; i--) {
		char v[8];

		snprintf(v, sizeof(v), "%d", i);
		rec("k", i * 10 * S, v);
	}
	rec("k", 50 * S + S / 2, "99"); /* joins [50s, 51s) -> [50s, 51.5s) */
	end_of_input();
	ck_assert_int_eq(T.nout, 12);
	qsort(T.out, (size_t)T.nout, sizeof(T.out[0]), cmp_str);
	ck_assert_str_eq(T.out[0], "k|0\t1000\t0|999999999");
	ck_assert_str_eq(T.out[7], "k|50000\t51500\t99|51499999999");
	T.nout = 0;
	teardown();
}
END_TEST

/* ---- lateness ------------------------------------------------------------------- */

START_TEST(late_without_lateness_dropped)
{
	setup(KV("kind", "tumbling", "size", "10s", "time_format", "ms"));
	rec("a", 1 * S, "");
	watermark(10 * S - 1);
	WANT("a|0\t10000\t1|9999999999");
	rec("a", 2 * S, ""); /* [0,10) has fired and is gone */
	rec("a", 10 * S, ""); /* on time for [10,20) */
	ck_assert_uint_eq(T.late, 1);
	end_of_input();
	WANT("a|10000\t20000\t1|19999999999");
	teardown();
}
END_TEST

START_TEST(allowed_lateness_refires)
{
	setup(KV("kind", "tumbling", "size", "10s", "allowed_lateness", "5s", "time_format",
		 "ms"));
	rec("a", 1 * S, "");
	watermark(10 * S - 1);
	WANT("a|0\t10000\t1|9999999999");
	rec("a", 2 * S, ""); /* late but within 5s: a late firing with the new count */
	WANT("a|0\t10000\t2|9999999999");
	watermark(15 * S - 2);
	rec("a", 3 * S, ""); /* still within */
	WANT("a|0\t10000\t3|9999999999");
	watermark(15 * S - 1); /* end - 1 + lateness: cleaned up */
	NONE();
	ck_assert_int_eq(live_entries(), 0);
	rec("a", 4 * S, "");
	ck_assert_uint_eq(T.late, 1);
	end_of_input();
	NONE();
	teardown();
}
END_TEST

START_TEST(sliding_late_only_if_late_for_every_window)
{
	setup(KV("kind", "sliding", "size", "10s", "slide", "5s", "time_format", "ms"));
	watermark(10 * S - 1); /* [0,10) is closed, [5,15) is not */
	rec("a", 7 * S, "");
	ck_assert_uint_eq(T.late, 0);
	rec("a", 3 * S, ""); /* only in [0,10) and [-5,5): late */
	ck_assert_uint_eq(T.late, 1);
	end_of_input();
	WANT("a|5000\t15000\t1|14999999999");
	teardown();
}
END_TEST

START_TEST(session_late_merge_refires)
{
	setup(KV("kind", "session", "gap", "5s", "allowed_lateness", "10s", "time_format",
		 "ms"));
	rec("a", 1 * S, "");
	watermark(6 * S - 1);
	WANT("a|1000\t6000\t1|5999999999");
	rec("a", 2 * S, ""); /* merges with the fired [1,6) into [1,7), due later */
	NONE();
	watermark(7 * S - 1);
	WANT("a|1000\t7000\t2|6999999999");
	rec("a", 1500000000ll, ""); /* merges into the fired [1,7): fires again at once */
	WANT("a|1000\t7000\t3|6999999999");
	watermark(17 * S - 1); /* 7s - 1 + 10s: cleaned up */
	ck_assert_int_eq(live_entries(), 0);
	rec("a", 3 * S, ""); /* [3,8): 8s - 1 + 10s > 17s - 1: not late, a new session */
	WANT("a|3000\t8000\t1|7999999999");
	rec("a", 1 * S, ""); /* [1,6): late */
	ck_assert_uint_eq(T.late, 1);
	end_of_input();
	NONE();
	teardown();
}
END_TEST

/* ---- emit = update -------------------------------------------------------------- */

START_TEST(update_emits_every_change_and_nothing_at_close)
{
	setup(KV("kind", "tumbling", "size", "10s", "emit", "update", "aggregate", "avg",
		 "time_format", "ms"));
	rec("a", 1 * S, "1");
	WANT("a|0\t10000\t1|9999999999");
	rec("a", 2 * S, "2");
	WANT("a|0\t10000\t1.5|9999999999");
	rec("a", 2 * S, "oops"); /* skipped: no update */
	NONE();
	end_of_input();
	NONE();
	teardown();
}
END_TEST

START_TEST(update_sessions)
{
	setup(KV("kind", "session", "gap", "5s", "emit", "update", "time_format", "ms"));
	rec("a", 1 * S, "");
	WANT("a|1000\t6000\t1|5999999999");
	rec("a", 4 * S, "");
	WANT("a|1000\t9000\t2|8999999999");
	end_of_input();
	NONE();
	teardown();
}
END_TEST

START_TEST(prepare_refuses)
{
	const char *const *bad[] = {
		KV("kind", "tumbling"),
		KV("kind", "sliding", "size", "10s"),
		KV("kind", "sliding", "size", "10s", "slide", "3s"),
		KV("kind", "sliding", "size", "10s", "slide", "20s"),
		KV("kind", "tumbling", "size", "10s", "slide", "5s"),
		KV("kind", "session"),
		KV("kind", "session", "gap", "1s", "size", "10s"),
		KV("kind", "tumbling", "size", "10s", "gap", "1s"),
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&T, 0, sizeof(T));
		for (int k = 0; bad[i][k]; k += 2) {
			T.params[k / 2][0] = bad[i][k];
			T.params[k / 2][1] = bad[i][k + 1];
		}
		ck_assert_int_eq(shmrun_op_window.prepare(&T), -EINVAL);
		ck_assert_int_eq(T.errors, 1);
	}
}
END_TEST

static Suite *window_suite(void)
{
	Suite *s = suite_create("window");
	TCase *tc;

	tc = tcase_create("tumbling");
	tcase_add_test(tc, tumbling_count_fires_at_end);
	tcase_add_test(tc, tumbling_aggregates);
	tcase_add_test(tc, negative_times_and_fractions);
	suite_add_tcase(s, tc);
	tc = tcase_create("sliding");
	tcase_add_test(tc, sliding_record_in_size_over_slide_windows);
	suite_add_tcase(s, tc);
	tc = tcase_create("session");
	tcase_add_test(tc, session_merges);
	tcase_add_test(tc, session_many_open_pages);
	suite_add_tcase(s, tc);
	tc = tcase_create("lateness");
	tcase_add_test(tc, late_without_lateness_dropped);
	tcase_add_test(tc, allowed_lateness_refires);
	tcase_add_test(tc, sliding_late_only_if_late_for_every_window);
	tcase_add_test(tc, session_late_merge_refires);
	suite_add_tcase(s, tc);
	tc = tcase_create("update");
	tcase_add_test(tc, update_emits_every_change_and_nothing_at_close);
	tcase_add_test(tc, update_sessions);
	suite_add_tcase(s, tc);
	tc = tcase_create("prepare");
	tcase_add_test(tc, prepare_refuses);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(window_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
