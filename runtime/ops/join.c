/*
 * runtime/ops/join.c: the event-time joins of two keyed inputs:
 * `op = interval_join` and `op = window_join`.
 *
 * What it is for. "Bids placed within 10 s after the auction opened": pair
 * every record of one input (the left, the first of `input =`) with every
 * record of the other (the right, the second) that has the same key and an
 * event time within a bound of it. The model is Flink's IntervalJoin
 * (KeyedStream.intervalJoin().between(lower, upper)): a left record at t
 * joins the right records of its key at s with t + lower <= s <= t + upper;
 * lower <= upper, either may be negative.
 *
 * How. Each record, when it arrives, is joined with the records of the other
 * side buffered so far, then buffered itself, so every pair is emitted once,
 * when its second record arrives (whichever side that is). A pair goes out
 * as key, value = left value TAB right value, event_time_ns = the larger of
 * the two times.
 *
 * State. The buffers are namespaced key-bound state (shmrun_keyed_state_ns()):
 * per key, side and event-time bucket (`bucket`, aligned to the epoch) a
 * chain of pages of PAGE_BYTES, each holding entries (time, value length,
 * value bytes) packed one after the other; ns = side (bit 63) | bucket
 * number (bits 62..16, two's complement cut to 47 bits: only ever recomputed
 * from a time, never read back) | page (bits 15..0). A probe reads the
 * buckets that overlap [t + lower, t + upper] (or [s - upper, s - lower]).
 * Everything lives in the key's vnode: a checkpoint holds it with the
 * event-time timers and the watermark, and `--rescale` moves it with the
 * vnode, so a restored or rescaled job emits exactly the pairs of a
 * fault-free one.
 *
 * Trimming (what keeps state bounded). A left record at t can meet no right
 * record still to come once the watermark W >= t + upper (a right record at
 * s <= W is late); a right record at s none once W >= s - lower. So each
 * buffered bucket [bB, (b+1)B) has one event-time timer, set with its first
 * page: at (b+1)B - 1 + upper (left) or (b+1)B - 1 - lower (right); when it
 * fires the bucket's pages are deleted. With a bounded out-of-orderness the
 * watermark trails the newest event time by that bound, so the buffers hold
 * about (delay + upper - lower + bucket) of event time per key.
 *
 * Invariants:
 *   - a record with event_time_ns <= the task's watermark is late: dropped
 *     and counted (SHMRUN_COUNT_LATE_RECORDS), as Flink's IntervalJoin drops
 *     records behind the watermark. A record that is not late finds every
 *     partner that was not late: a left t > W needs rights s >= t + lower >
 *     W + lower, which are kept until W >= s - lower; symmetrically for right;
 *   - a record is buffered only if it can still meet a record to come
 *     (t + upper > W, or s - lower > W), so a timer is set only after the
 *     watermark and fires at most once per (key, time);
 *   - on_timer(T) trims both buckets that can fall on T: the left one whose
 *     (b+1)B - 1 + upper == T and the right one whose (b+1)B - 1 - lower == T
 *     (a key has one timer per time, so the two may share it).
 *
 * Rejected:
 *   - one namespace per record (ns = time and a sequence number): a probe
 *     could not find a key's records in a time range without a "namespaces
 *     of a key" lookup, which key-bound state does not have;
 *   - a per-record trim timer: one timer per bucket costs far less, and a
 *     bucket is dropped at most `bucket` of event time after its last record
 *     could have matched;
 *   - values spanning pages: PAGE_BYTES bounds a value (MAX_VALUE); a longer
 *     one fails the job with a message naming it, rather than a second,
 *     rarely used layout.
 *
 * window_join is Flink's window join (stream.join(other).where().equalTo()
 * .window(TumblingEventTimeWindows.of(size))): every left record and every
 * right record of a key whose event times fall into the same tumbling
 * window [k*size, (k+1)*size) (aligned to the epoch) form a pair. Both sides
 * are buffered in the same pages, with the window's number as the bucket;
 * both set the one timer of the (key, window) at its end - 1 (Flink's
 * window.maxTimestamp()), which emits every pair of the window, left records
 * in arrival order outer, right inner, with event time end - 1, and deletes
 * both buffers. A record whose window's end - 1 is at or behind the
 * watermark is late: dropped and counted.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

#define PAGE_BYTES 512u			       /* one value of key-bound state */
#define PAGE_DATA (PAGE_BYTES - 8u)	       /* after the page header */
#define ENTRY_HEAD 12u			       /* time (8) + value length (4) */
#define MAX_VALUE (PAGE_DATA - ENTRY_HEAD)     /* longest value a side may buffer */
#define MAX_PAGES 65536u		       /* pages per (key, side, bucket): 16 bits of ns */
#define MAX_PROBE_BUCKETS 4096		       /* (upper - lower) / bucket + 1, at most */
#define MAX_DURATION (365ll * 86400 * 1000000000) /* as the job's durations */

enum side { LEFT = 0, RIGHT = 1 };

struct page {
	uint32_t used; /* bytes of data[] in use */
	uint32_t n;    /* entries */
	unsigned char data[PAGE_DATA];
};

struct join {
	int64_t lower, upper, bucket; /* ns */
	char *out;		      /* the output value being built */
	uint32_t out_cap;
};

/* a + b, saturated to [INT64_MIN, INT64_MAX] */
static int64_t sat_add(int64_t a, int64_t b)
{
	int64_t r;

	if (__builtin_add_overflow(a, b, &r))
		return b > 0 ? INT64_MAX : INT64_MIN;
	return r;
}

/* floor(t / d), for d > 0 and any t */
static int64_t floor_div(int64_t t, int64_t d)
{
	int64_t q = t / d;

	return (t % d < 0) ? q - 1 : q;
}

static uint64_t ns_of(enum side side, int64_t bucket, uint32_t page)
{
	return ((uint64_t)side << 63) | (((uint64_t)bucket & ((1ull << 47) - 1)) << 16) | page;
}

/*
 * A signed duration: optional '-', decimal digits, "ms" or "s"; at most
 * MAX_DURATION either way. Return: 0, or -EINVAL.
 */
static int parse_signed_duration(const char *s, int64_t *ns)
{
	bool neg = *s == '-';
	uint64_t v = 0, mul;
	const char *p = s + neg;

	if (*p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++)
		if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, (uint64_t)(*p - '0'), &v))
			return -EINVAL;
	if (strcmp(p, "ms") == 0)
		mul = 1000000;
	else if (strcmp(p, "s") == 0)
		mul = 1000000000;
	else
		return -EINVAL;
	if (__builtin_mul_overflow(v, mul, &v) || v > (uint64_t)MAX_DURATION)
		return -EINVAL;
	*ns = neg ? -(int64_t)v : (int64_t)v;
	return 0;
}

/* Read lower, upper and bucket of @task. Return: 0, or -EINVAL after an error at the key. */
static int read_bounds(struct shmrun_task *task, int64_t *lower, int64_t *upper, int64_t *bucket)
{
	static const char *const keys[] = {"lower", "upper"};
	int64_t *dst[] = {lower, upper};

	for (int i = 0; i < 2; i++) {
		const char *v = shmrun_task_param(task, keys[i]);

		if (!v || parse_signed_duration(v, dst[i])) {
			shmrun_task_error_at(task, keys[i],
					     "%s = '%s' is not a duration: write an optional '-', "
					     "digits and ms or s (e.g. %s = -2s), at most 365 days",
					     keys[i], v ? v : "", keys[i]);
			return -EINVAL;
		}
	}
	*bucket = (int64_t)shmrun_task_param_u64(task, "bucket", 1000000000);
	return 0;
}

/* ---- checks (prepare(), in the launcher, and `shmrun check`) ---------------- */

/*
 * Exactly two inputs, both `by key` (so that both sides of a key meet in the
 * instance that owns its vnode, at any width). Return: 0, or -EINVAL after
 * an error at the line of `input`.
 */
static int check_inputs(struct shmrun_task *task, const char *op)
{
	uint32_t inputs = shmrun_task_inputs(task);

	if (inputs != 2) {
		shmrun_task_error_at(task, "input",
				     "%s needs exactly two inputs, the left and the right side "
				     "(input = left by key, right by key), not %u",
				     op, inputs);
		return -EINVAL;
	}
	for (uint32_t i = 0; i < 2; i++)
		if (!shmrun_task_input_by_key(task, i)) {
			shmrun_task_error_at(task, "input",
					     "%s's %s input is not `by key`: both sides of a key "
					     "must meet in one instance; write input = left by "
					     "key, right by key",
					     op, i == 0 ? "left (first)" : "right (second)");
			return -EINVAL;
		}
	return 0;
}

static int join_prepare(struct shmrun_task *task)
{
	int64_t lower, upper, bucket;

	if (check_inputs(task, "interval_join"))
		return -EINVAL;
	if (read_bounds(task, &lower, &upper, &bucket))
		return -EINVAL;
	if (lower > upper) {
		shmrun_task_error_at(task, "lower",
				     "lower (%" PRId64 " ms) is after upper (%" PRId64
				     " ms): a left record at t joins right records in [t + lower, "
				     "t + upper]; swap them",
				     lower / 1000000, upper / 1000000);
		return -EINVAL;
	}
	if ((upper - lower) / bucket + 1 > MAX_PROBE_BUCKETS) {
		shmrun_task_error_at(task, "bucket",
				     "(upper - lower) / bucket = %" PRId64 " buckets per probe is "
				     "more than %d; choose a larger bucket",
				     (upper - lower) / bucket, MAX_PROBE_BUCKETS - 1);
		return -EINVAL;
	}
	return 0;
}

/* ---- open, close ------------------------------------------------------------ */

static int join_open(struct shmrun_task *task, void **state)
{
	struct join *j = calloc(1, sizeof(*j));

	if (!j) {
		shmrun_task_error(task, "out of memory");
		return -ENOMEM;
	}
	*state = j;
	if (read_bounds(task, &j->lower, &j->upper, &j->bucket) || j->lower > j->upper ||
	    j->bucket <= 0 || shmrun_task_inputs(task) != 2) {
		shmrun_task_error(task, "invalid interval_join settings"); /* prepare() said why */
		return -EINVAL;
	}
	return 0;
}

static void join_close(struct shmrun_task *task, void *state)
{
	struct join *j = state;

	(void)task;
	if (j)
		free(j->out);
	free(j);
}

/* ---- buffers ---------------------------------------------------------------- */

/* The event-time timer that trims bucket @b of @side. */
static int64_t trim_time(const struct join *j, enum side side, int64_t b)
{
	int64_t end; /* (b + 1) * bucket: the bucket's end */

	if (__builtin_mul_overflow(b + 1, j->bucket, &end))
		end = b < 0 ? INT64_MIN : INT64_MAX;
	return side == LEFT ? sat_add(sat_add(end, -1), j->upper)
			    : sat_add(sat_add(end, -1), -j->lower);
}

/*
 * Append @rec (of @side) to its key's bucket @b; with its first page, set
 * the bucket's event-time timer at @due.
 */
static int buffer_add(struct shmrun_task *task, enum side side, const struct shmrun_record *rec,
		      int64_t b, int64_t due)
{
	uint32_t need = ENTRY_HEAD + rec->value_len;
	struct page *pg = NULL;
	uint32_t p;

	if (rec->value_len > MAX_VALUE) {
		shmrun_task_error(task,
				  "a %s value of %" PRIu32 " bytes (key '%.*s') is longer than "
				  "the join buffers take (%u bytes): shorten the values, e.g. with "
				  "extract",
				  side == LEFT ? "left" : "right", rec->value_len,
				  (int)(rec->key_len < 64 ? rec->key_len : 64),
				  (const char *)rec->key, MAX_VALUE);
		return -EMSGSIZE;
	}
	for (p = 0; p < MAX_PAGES; p++) {
		pg = shmrun_keyed_state_ns(task, rec->key, rec->key_len, ns_of(side, b, p),
					   sizeof(*pg), true);
		if (!pg)
			return -ENOMEM;
		if (PAGE_DATA - pg->used >= need)
			break;
	}
	if (p == MAX_PAGES) {
		shmrun_task_error(task, "more than %u pages of records of one key in one bucket: "
					"choose a smaller bucket (or window)", MAX_PAGES);
		return -E2BIG;
	}
	if (p == 0 && pg->n == 0) { /* the bucket's first record */
		int err = shmrun_timer_set(task, SHMRUN_TIME_EVENT, rec->key, rec->key_len, due);

		if (err)
			return err;
	}
	memcpy(pg->data + pg->used, &rec->event_time_ns, 8);
	memcpy(pg->data + pg->used + 8, &rec->value_len, 4);
	if (rec->value_len)
		memcpy(pg->data + pg->used + ENTRY_HEAD, rec->value, rec->value_len);
	pg->used += need;
	pg->n++;
	return 0;
}

/* Emit key @key with value @lv TAB @rv and event time @t. */
static int emit_pair(struct shmrun_task *task, struct join *j, const void *key, uint32_t key_len,
		     const void *lv, uint32_t ll, const void *rv, uint32_t rl, int64_t t)
{
	struct shmrun_record out = {.key = key, .key_len = key_len, .event_time_ns = t};

	if (shmrun_grow_u32(&j->out, &j->out_cap, (size_t)ll + rl + 1, 1, 256))
		return -ENOMEM;
	if (ll)
		memcpy(j->out, lv, ll);
	j->out[ll] = '\t';
	if (rl)
		memcpy(j->out + ll + 1, rv, rl);
	out.value = j->out;
	out.value_len = ll + rl + 1;
	return shmrun_emit(task, &out);
}

/* Join @rec (of @side) with the other side's buffered records of its key in [lo, hi]. */
static int probe(struct shmrun_task *task, struct join *j, enum side side,
		 const struct shmrun_record *rec, int64_t lo, int64_t hi)
{
	enum side other = side == LEFT ? RIGHT : LEFT;

	for (int64_t b = floor_div(lo, j->bucket); b <= floor_div(hi, j->bucket); b++) {
		for (uint32_t p = 0; p < MAX_PAGES; p++) {
			const struct page *pg = shmrun_keyed_state_ns(
				task, rec->key, rec->key_len, ns_of(other, b, p), sizeof(*pg), false);
			uint32_t off = 0;

			if (!pg)
				break;
			for (uint32_t i = 0; i < pg->n; i++) {
				const unsigned char *v;
				int64_t t, et;
				uint32_t len;
				int err;

				memcpy(&t, pg->data + off, 8);
				memcpy(&len, pg->data + off + 8, 4);
				v = pg->data + off + ENTRY_HEAD;
				et = t > rec->event_time_ns ? t : rec->event_time_ns;
				if (t >= lo && t <= hi && side == LEFT &&
				    (err = emit_pair(task, j, rec->key, rec->key_len, rec->value,
						     rec->value_len, v, len, et)))
					return err;
				if (t >= lo && t <= hi && side == RIGHT &&
				    (err = emit_pair(task, j, rec->key, rec->key_len, v, len,
						     rec->value, rec->value_len, et)))
					return err;
				off += ENTRY_HEAD + len;
			}
		}
		if (b == INT64_MAX)
			break;
	}
	return 0;
}

/* ---- callbacks ------------------------------------------------------------------ */

static int join_process(struct shmrun_task *task, void *state, const struct shmrun_record *rec)
{
	struct join *j = state;
	enum side side = shmrun_task_input(task) == 0 ? LEFT : RIGHT;
	int64_t wm = shmrun_task_watermark(task), t = rec->event_time_ns;
	int64_t lo, hi, dead; /* partners in [lo, hi]; buffer while dead > wm */
	int err;

	if (t <= wm) { /* late: its partners may be gone already */
		shmrun_task_count(task, SHMRUN_COUNT_LATE_RECORDS, 1);
		return 0;
	}
	if (side == LEFT) {
		lo = sat_add(t, j->lower);
		hi = sat_add(t, j->upper);
		dead = hi;
	} else {
		lo = sat_add(t, -j->upper);
		hi = sat_add(t, -j->lower);
		dead = sat_add(t, -j->lower);
	}
	err = probe(task, j, side, rec, lo, hi);
	if (!err && dead > wm) {
		int64_t b = floor_div(t, j->bucket);

		err = buffer_add(task, side, rec, b, trim_time(j, side, b));
	}
	return err;
}

static int join_process_batch(struct shmrun_task *task, void *state,
			      const struct shmrun_record *recs, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		int err = join_process(task, state, &recs[i]);

		if (err)
			return err;
	}
	return 0;
}

/* Delete every page of bucket @b of @side of @key. */
static void trim(struct shmrun_task *task, enum side side, const void *key, uint32_t key_len,
		 int64_t b)
{
	for (uint32_t p = 0; p < MAX_PAGES; p++)
		if (shmrun_keyed_state_delete(task, key, key_len, true, ns_of(side, b, p)))
			break;
}

static int join_timer(struct shmrun_task *task, void *state, const void *key, uint32_t key_len,
		      int64_t time_ns, enum shmrun_time_domain domain)
{
	struct join *j = state;

	if (domain != SHMRUN_TIME_EVENT)
		return 0; /* never set */
	for (int s = LEFT; s <= RIGHT; s++) {
		/* the bucket b of side s with trim_time(s, b) == time_ns, if any */
		int64_t x = sat_add(sat_add(time_ns, s == LEFT ? -j->upper : j->lower), 1);
		int64_t b = floor_div(x, j->bucket), bx;

		if (x != INT64_MAX && x != INT64_MIN && !__builtin_mul_overflow(b, j->bucket, &bx) &&
		    bx == x &&
		    trim_time(j, (enum side)s, b - 1) == time_ns)
			trim(task, (enum side)s, key, key_len, b - 1);
	}
	return 0;
}

static const struct shmrun_param_def interval_params[] = {
	{.key = "lower", .type = SHMRUN_PARAM_STRING, .required = true,
	 .doc = "signed duration (e.g. -2s, 0ms): a left record at t joins right records from "
		"t + lower on"},
	{.key = "upper", .type = SHMRUN_PARAM_STRING, .required = true,
	 .doc = "signed duration, >= lower: ... up to t + upper (inclusive)"},
	{.key = "bucket", .type = SHMRUN_PARAM_DURATION, .def = "1s", .min = 1000000,
	 .max = (uint64_t)MAX_DURATION,
	 .doc = "event-time granularity of the buffers and of their trimming; (upper - lower) / "
		"bucket <= 4095"},
	{0},
};

const struct shmrun_operator shmrun_op_interval_join = {
	.size = sizeof(struct shmrun_operator),
	.name = "interval_join",
	.summary = "event-time interval join of two keyed inputs (Flink's IntervalJoin); "
		   "value = left value TAB right value",
	.params = interval_params,
	.prepare = join_prepare,
	.open = join_open,
	.process = join_process,
	.process_batch = join_process_batch,
	.on_timer = join_timer,
	.close = join_close,
	/* no per-worker state: the buffers are key-bound, any rescale works */
	.pw_rule = SHMRUN_PW_NONE,
};

/* ---- window_join ------------------------------------------------------------------ */

static int wjoin_prepare(struct shmrun_task *task)
{
	return check_inputs(task, "window_join");
}

static int wjoin_open(struct shmrun_task *task, void **state)
{
	struct join *j = calloc(1, sizeof(*j));

	if (!j) {
		shmrun_task_error(task, "out of memory");
		return -ENOMEM;
	}
	*state = j;
	/* the window's size is the bucket: a bucket is a window */
	j->bucket = (int64_t)shmrun_task_param_u64(task, "size", 0);
	if (j->bucket <= 0 || shmrun_task_inputs(task) != 2) {
		shmrun_task_error(task, "invalid window_join settings"); /* prepare() said why */
		return -EINVAL;
	}
	return 0;
}

/* The time window @b fires at: its end - 1 (saturated). */
static int64_t window_due(const struct join *j, int64_t b)
{
	int64_t end;

	if (__builtin_mul_overflow(b + 1, j->bucket, &end))
		end = b < 0 ? INT64_MIN : INT64_MAX;
	return sat_add(end, -1);
}

static int wjoin_process(struct shmrun_task *task, void *state, const struct shmrun_record *rec)
{
	struct join *j = state;
	enum side side = shmrun_task_input(task) == 0 ? LEFT : RIGHT;
	int64_t b = floor_div(rec->event_time_ns, j->bucket), due = window_due(j, b);

	if (due <= shmrun_task_watermark(task)) { /* its window fired already */
		shmrun_task_count(task, SHMRUN_COUNT_LATE_RECORDS, 1);
		return 0;
	}
	return buffer_add(task, side, rec, b, due);
}

static int wjoin_process_batch(struct shmrun_task *task, void *state,
			       const struct shmrun_record *recs, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		int err = wjoin_process(task, state, &recs[i]);

		if (err)
			return err;
	}
	return 0;
}

/* Window @b of @key is complete: every left record with every right one, then both go. */
static int wjoin_fire(struct shmrun_task *task, struct join *j, const void *key, uint32_t key_len,
		      int64_t b, int64_t due)
{
	for (uint32_t lp = 0; lp < MAX_PAGES; lp++) {
		const struct page *l = shmrun_keyed_state_ns(task, key, key_len, ns_of(LEFT, b, lp),
							     sizeof(*l), false);

		if (!l)
			break;
		for (uint32_t li = 0, loff = 0; li < l->n; li++) {
			uint32_t ll;

			memcpy(&ll, l->data + loff + 8, 4);
			for (uint32_t rp = 0; rp < MAX_PAGES; rp++) {
				const struct page *r = shmrun_keyed_state_ns(
					task, key, key_len, ns_of(RIGHT, b, rp), sizeof(*r), false);

				if (!r)
					break;
				for (uint32_t ri = 0, roff = 0; ri < r->n; ri++) {
					uint32_t rl;
					int err;

					memcpy(&rl, r->data + roff + 8, 4);
					err = emit_pair(task, j, key, key_len, l->data + loff + ENTRY_HEAD,
							ll, r->data + roff + ENTRY_HEAD, rl, due);
					if (err)
						return err;
					roff += ENTRY_HEAD + rl;
				}
			}
			loff += ENTRY_HEAD + ll;
		}
	}
	trim(task, LEFT, key, key_len, b);
	trim(task, RIGHT, key, key_len, b);
	return 0;
}

static int wjoin_timer(struct shmrun_task *task, void *state, const void *key, uint32_t key_len,
		       int64_t time_ns, enum shmrun_time_domain domain)
{
	struct join *j = state;
	int64_t b = floor_div(time_ns, j->bucket);

	if (domain != SHMRUN_TIME_EVENT || window_due(j, b) != time_ns)
		return 0; /* never set */
	return wjoin_fire(task, j, key, key_len, b, time_ns);
}

static const struct shmrun_param_def window_params[] = {
	{.key = "size", .type = SHMRUN_PARAM_DURATION, .required = true, .min = 1000000,
	 .max = (uint64_t)MAX_DURATION,
	 .doc = "length of the tumbling windows, aligned to the epoch; records of a key in the "
		"same window pair up"},
	{0},
};

const struct shmrun_operator shmrun_op_window_join = {
	.size = sizeof(struct shmrun_operator),
	.name = "window_join",
	.summary = "pairs of two keyed inputs' records in the same tumbling event-time window "
		   "(Flink's window join); value = left value TAB right value",
	.params = window_params,
	.prepare = wjoin_prepare,
	.open = wjoin_open,
	.process = wjoin_process,
	.process_batch = wjoin_process_batch,
	.on_timer = wjoin_timer,
	.close = join_close,
	/* no per-worker state: the buffers are key-bound, any rescale works */
	.pw_rule = SHMRUN_PW_NONE,
};
