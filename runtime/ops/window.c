/*
 * runtime/ops/window.c: event-time windows per key (`op = window`).
 *
 * What it is for. "Actions per hour", "bytes per user session": an aggregate
 * over the records of one key whose event times fall into a window, emitted
 * once the watermark says the window is complete. The model is Flink's
 * WindowOperator with its EventTimeTrigger:
 *
 *   - window assigners: `kind = tumbling` ([k*size, (k+1)*size), aligned to
 *     the epoch), `sliding` (windows of `size` starting every `slide`; a
 *     record is in size/slide of them) and `session` (a record at t opens
 *     [t, t+gap); sessions of a key that overlap or touch merge, Flink's
 *     MergingWindowAssigner);
 *   - every window [start, end) has an event-time timer at end - 1 (its
 *     maxTimestamp): it fires when the watermark reaches end - 1, i.e. when
 *     no record of the window can still come in order; with `emit = final`
 *     the window's aggregate goes out then;
 *   - a cleanup timer at end - 1 + allowed_lateness deletes the window's
 *     state (the same timer when allowed_lateness is 0). Until then a record
 *     for the window that arrives after it fired updates it and, with
 *     `emit = final`, the window is emitted again at once (a late firing, as
 *     Flink's EventTimeTrigger does). A record all of whose windows have
 *     end - 1 + allowed_lateness <= watermark is late: dropped and counted
 *     (SHMRUN_COUNT_LATE_RECORDS, "late records:" in the run summary) and,
 *     with `late = PATH`, written there ("key TAB time TAB value") through
 *     file_sink's own code (file_out.h): exactly-once with checkpoints; its
 *     committed length is then the only per-worker state (no rule, so such
 *     a stage's width cannot change under --rescale; without `late` there
 *     is none and any rescale works).
 *
 * State. Tumbling and sliding: one struct agg per (key, window start) in
 * namespaced key-bound state (shmrun_keyed_state_ns(), ns = start as u64).
 * Session: the key's open sessions, a short list kept in pages of
 * SESSIONS_PER_PAGE (ns = page 0, 1, ...; every value of a task has one
 * size), read whole into a scratch array, changed, written back compacted.
 * Both live in the key's vnode, and so do the timers: a checkpoint holds them
 * together with the task's watermark, and `--rescale` moves them with the
 * vnode, so a restored or rescaled job neither loses a window nor fires one
 * twice.
 *
 * Invariants:
 *   - a timer is set only at a time after the task's watermark (a window that
 *     is already due is emitted at once instead), so on_timer(T) is called at
 *     most once per (key, T) and each window fires once at T = end - 1;
 *   - on_timer(T) does both jobs that can fall on T: fire the window(s) whose
 *     end - 1 == T, clean up those whose end - 1 + allowed_lateness == T
 *     (a key has one timer per time, so the two may share it);
 *   - timers of sessions merged away are not deleted: when they fire, no
 *     session ends there (or one that does is due there anyway), so they do
 *     nothing; they are bounded by the watermark like every timer.
 *
 * Output: key; value "start<TAB>end<TAB>aggregate" with start/end as
 * ISO-8601 UTC (`time_format = iso`, "2026-12-01T21:00:00Z", with a fraction
 * only when the time is not a whole second) or epoch milliseconds
 * (`time_format = ms`); event_time_ns = end - 1. count is an integer; sum,
 * min, max and avg are doubles printed in the shortest form that reads back
 * as the same double ("6", "2.5", "0.30000000000000004").
 *
 * Values: count ignores them; sum/min/max/avg parse the whole value as a
 * number (strtod: decimal, exponent, hex float; blanks around allowed; nan
 * and inf refused). A value that does not parse skips the record: counted
 * per task, the first few logged as warnings, the total logged at end of
 * input.
 *
 * Rejected:
 *   - one timer per window for both firing and cleanup (rescheduling on
 *     fire): the second timer is set with the first, so a restore between
 *     them needs no special case;
 *   - deleting the timers of merged sessions: another session of the key may
 *     need a timer at the same time (fire of one = cleanup of another), and
 *     a stale timer costs one lookup;
 *   - sessions in one namespace per session start: merging must find all of
 *     a key's sessions, and key-bound state has no "namespaces of a key"
 *     lookup;
 *   - a combiner in front: windows need each record's event time, which a
 *     partial aggregate loses.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "file_out.h"
#include "ops.h"

#define MAX_WINDOWS_PER_RECORD 4096 /* size / slide of a sliding window, at most */
#define SESSIONS_PER_PAGE 5
#define WARN_BAD_VALUES 3 /* values that are not numbers logged per task */

enum kind { TUMBLING, SLIDING, SESSION };
enum aggregate { AGG_COUNT, AGG_SUM, AGG_MIN, AGG_MAX, AGG_AVG };

/* One window's aggregate: 32 bytes of key-bound state. */
struct agg {
	uint64_t n; /* records folded in */
	double sum, min, max;
};

struct session {
	int64_t start, end; /* [start, end), ns */
	struct agg a;
};

/* One page of a key's session list (namespace = page number). */
struct session_page {
	uint32_t n; /* sessions in s[] */
	uint32_t reserved;
	struct session s[SESSIONS_PER_PAGE];
};

struct window {
	enum kind kind;
	enum aggregate agg;
	bool update;  /* emit = update */
	bool iso;     /* time_format = iso */
	int64_t size, slide, gap, lateness; /* ns */
	uint64_t bad_values;
	uint64_t bad_times; /* records whose windows would not fit 64 bits */
	struct shmrun_file_out *late; /* `late = PATH`, or NULL */
	/* a key's sessions while a record or timer is handled */
	struct session *sess;
	uint32_t nsess, cap;
	uint32_t pages; /* pages the key had when read */
};

static const char *const kinds[] = {"tumbling", "sliding", "session"};
static const char *const aggs[] = {"count", "sum", "min", "max", "avg"};

static int word_index(const char *v, const char *const *words, int n)
{
	for (int i = 0; v && i < n; i++)
		if (strcmp(v, words[i]) == 0)
			return i;
	return 0;
}

/* a + b, saturated to [INT64_MIN, INT64_MAX] */
static int64_t sat_add(int64_t a, int64_t b)
{
	int64_t r;

	if (__builtin_add_overflow(a, b, &r))
		return b > 0 ? INT64_MAX : INT64_MIN;
	return r;
}

/* floor(t / d) * d, for d > 0 and any t */
static int64_t floor_to(int64_t t, int64_t d)
{
	int64_t r = t % d;

	return r < 0 ? t - r - d : t - r;
}

/* ---- checks (prepare(), in the launcher, and `shmrun check`) ---------------- */

static int window_prepare(struct shmrun_task *task)
{
	enum kind k = (enum kind)word_index(shmrun_task_param(task, "kind"), kinds, 3);
	const char *kind = kinds[k];
	bool has_size = shmrun_task_param(task, "size") != NULL;
	bool has_slide = shmrun_task_param(task, "slide") != NULL;
	bool has_gap = shmrun_task_param(task, "gap") != NULL;
	uint64_t size = shmrun_task_param_u64(task, "size", 0);
	uint64_t slide = shmrun_task_param_u64(task, "slide", 0);

	if (shmrun_task_require_by_key(task, "window"))
		return -EINVAL;
	if (k != SESSION && !has_size) {
		shmrun_task_error_at(task, "kind",
					"kind = %s needs size (e.g. size = 60s); add it", kind);
		return -EINVAL;
	}
	if (k == SESSION && !has_gap) {
		shmrun_task_error_at(task, "kind",
					"kind = session needs gap (the inactivity that ends a "
					"session, e.g. gap = 30s); add it");
		return -EINVAL;
	}
	if (k == SESSION && has_size) {
		shmrun_task_error_at(task, "size",
					"size is not used by kind = session (a session lasts "
					"while records come less than gap apart); remove it");
		return -EINVAL;
	}
	if (k != SESSION && has_gap) {
		shmrun_task_error_at(task, "gap",
					"gap is only for kind = session, not %s; remove it",
					kind);
		return -EINVAL;
	}
	if (k == TUMBLING && has_slide) {
		shmrun_task_error_at(task, "slide",
					"slide is only for kind = sliding (a tumbling window "
					"slides by its size); remove it or use kind = sliding");
		return -EINVAL;
	}
	if (k == SLIDING && !has_slide) {
		shmrun_task_error_at(task, "kind",
					"kind = sliding needs slide (how often a window starts, "
					"e.g. slide = 10s); add it");
		return -EINVAL;
	}
	if (k == SLIDING && (slide > size || size % slide)) {
		shmrun_task_error_at(task, "slide",
					"slide (%" PRIu64 " ms) must divide size (%" PRIu64
					" ms) so that every record is in size/slide windows; "
					"choose a slide that does",
					slide / 1000000, size / 1000000);
		return -EINVAL;
	}
	if (k == SLIDING && size / slide > MAX_WINDOWS_PER_RECORD) {
		shmrun_task_error_at(task, "slide",
					"size/slide = %" PRIu64 " windows per record is more than "
					"%d; choose a larger slide",
					size / slide, MAX_WINDOWS_PER_RECORD);
		return -EINVAL;
	}
	if (shmrun_task_param(task, "late"))
		return shmrun_file_out_prepare(task, "late");
	return 0;
}

/* ---- open, close ------------------------------------------------------------ */

static int window_open(struct shmrun_task *task, void **state)
{
	struct window *w = calloc(1, sizeof(*w));
	const char *emit = shmrun_task_param(task, "emit");
	const char *tf = shmrun_task_param(task, "time_format");

	if (!w) {
		shmrun_task_error(task, "out of memory");
		return -ENOMEM;
	}
	*state = w;
	w->kind = (enum kind)word_index(shmrun_task_param(task, "kind"), kinds, 3);
	w->agg = (enum aggregate)word_index(shmrun_task_param(task, "aggregate"), aggs, 5);
	w->update = emit && strcmp(emit, "update") == 0;
	w->iso = !tf || strcmp(tf, "iso") == 0;
	/* durations are < 2^63 ns by the conf's bounds (see params) */
	w->size = (int64_t)shmrun_task_param_u64(task, "size", 0);
	w->slide = (int64_t)shmrun_task_param_u64(task, "slide", 0);
	w->gap = (int64_t)shmrun_task_param_u64(task, "gap", 0);
	w->lateness = (int64_t)shmrun_task_param_u64(task, "allowed_lateness", 0);
	if (w->kind == TUMBLING)
		w->slide = w->size;
	if ((w->kind != SESSION && (w->size <= 0 || w->slide <= 0 || w->size % w->slide)) ||
	    (w->kind == SESSION && w->gap <= 0)) { /* prepare() said why already */
		shmrun_task_error(task, "invalid window settings");
		return -EINVAL;
	}
	if (shmrun_task_param(task, "late"))
		return shmrun_file_out_open(task, "late", &w->late);
	return 0;
}

static void window_close(struct shmrun_task *task, void *state)
{
	struct window *w = state;

	if (w && w->late)
		shmrun_file_out_close(task, w->late);
	if (w)
		free(w->sess);
	free(w);
}

/* ---- values and output ------------------------------------------------------ */

/* Parse @rec's value as a finite number into *@x. Return: whether it is one. */
static bool parse_value(const struct shmrun_record *rec, double *x)
{
	char buf[128], *end;
	uint32_t n = rec->value_len;

	if (n == 0 || n >= sizeof(buf))
		return false;
	memcpy(buf, rec->value, n);
	buf[n] = '\0';
	*x = strtod(buf, &end);
	if (end == buf)
		return false;
	while (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n')
		end++;
	return *end == '\0' && isfinite(*x);
}

static void agg_add(struct agg *a, double x)
{
	if (a->n == 0 || x < a->min)
		a->min = x;
	if (a->n == 0 || x > a->max)
		a->max = x;
	a->sum += x;
	a->n++;
}

static void agg_merge(struct agg *a, const struct agg *b)
{
	if (!b->n)
		return;
	if (a->n == 0 || b->min < a->min)
		a->min = b->min;
	if (a->n == 0 || b->max > a->max)
		a->max = b->max;
	a->sum += b->sum;
	a->n += b->n;
}

/* @x in the shortest of %.15g..%.17g that reads back as @x. */
static int put_double(char *buf, size_t len, double x)
{
	int n = 0;

	for (int prec = 15; prec <= 17; prec++) {
		n = snprintf(buf, len, "%.*g", prec, x);
		if (strtod(buf, NULL) == x)
			break;
	}
	return n;
}

/* A time (ns since the epoch) as ISO-8601 UTC or epoch ms. */
static int put_time(const struct window *w, char *buf, size_t len, int64_t t)
{
	int64_t secs = floor_to(t, 1000000000) / 1000000000;
	int64_t frac = t - secs * 1000000000; /* 0 .. 1e9-1 */
	time_t tt = (time_t)secs;
	struct tm tm;
	size_t n;

	if (!w->iso)
		return snprintf(buf, len, "%" PRId64, floor_to(t, 1000000) / 1000000);
	if (!gmtime_r(&tt, &tm))
		return snprintf(buf, len, "%" PRId64 "ns", t);
	n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
	if (frac % 1000000 == 0 && frac)
		n += (size_t)snprintf(buf + n, len - n, ".%03" PRId64, frac / 1000000);
	else if (frac)
		n += (size_t)snprintf(buf + n, len - n, ".%09" PRId64, frac);
	n += (size_t)snprintf(buf + n, len - n, "Z");
	return (int)n;
}

static int emit_window(struct shmrun_task *task, const struct window *w, const void *key,
		       uint32_t key_len, int64_t start, int64_t end, const struct agg *a)
{
	char value[192];
	struct shmrun_record rec = {.key = key, .key_len = key_len, .value = value,
				    .event_time_ns = end - 1};
	int n = put_time(w, value, 64, start);

	value[n++] = '\t';
	n += put_time(w, value + n, 64, end);
	value[n++] = '\t';
	switch (w->agg) {
	case AGG_COUNT:
		n += snprintf(value + n, sizeof(value) - (size_t)n, "%" PRIu64, a->n);
		break;
	case AGG_SUM:
		n += put_double(value + n, sizeof(value) - (size_t)n, a->sum);
		break;
	case AGG_MIN:
		n += put_double(value + n, sizeof(value) - (size_t)n, a->min);
		break;
	case AGG_MAX:
		n += put_double(value + n, sizeof(value) - (size_t)n, a->max);
		break;
	case AGG_AVG:
		n += put_double(value + n, sizeof(value) - (size_t)n, a->sum / (double)a->n);
		break;
	}
	rec.value_len = (uint32_t)n;
	return shmrun_emit(task, &rec);
}

/*
 * A late record: counted, and with `late = PATH` written there as
 * "key<TAB>event time<TAB>value" (the time as time_format says).
 */
static int drop_late(struct shmrun_task *task, struct window *w, const struct shmrun_record *rec)
{
	char head[96];
	char *line;
	int n, err;

	shmrun_task_count(task, SHMRUN_COUNT_LATE_RECORDS, 1);
	if (!w->late)
		return 0;
	n = put_time(w, head, 64, rec->event_time_ns);
	line = malloc((size_t)rec->key_len + (size_t)n + rec->value_len + 2);
	if (!line) {
		shmrun_task_error(task, "out of memory");
		return -ENOMEM;
	}
	if (rec->key_len) /* an empty key or value may be NULL: no memcpy from NULL */
		memcpy(line, rec->key, rec->key_len);
	line[rec->key_len] = '\t';
	memcpy(line + rec->key_len + 1, head, (size_t)n);
	line[rec->key_len + 1 + (size_t)n] = '\t';
	if (rec->value_len)
		memcpy(line + rec->key_len + 2 + (size_t)n, rec->value, rec->value_len);
	err = shmrun_file_out_put(task, w->late, line,
				  rec->key_len + (uint32_t)n + 2 + rec->value_len);
	free(line);
	return err;
}

static int set_timer(struct shmrun_task *task, const void *key, uint32_t key_len, int64_t t)
{
	return shmrun_timer_set(task, SHMRUN_TIME_EVENT, key, key_len, t);
}

/* ---- tumbling and sliding --------------------------------------------------- */

/*
 * Fold @x into window [start, start + size) of @rec's key. Return: 1 if the
 * window took it, 0 if it is late for it, or a negative errno.
 */
static int fold_fixed(struct shmrun_task *task, struct window *w,
		      const struct shmrun_record *rec, int64_t start, double x, int64_t wm)
{
	int64_t end = sat_add(start, w->size);
	int64_t due = end - 1, cleanup = sat_add(due, w->lateness);
	struct agg *a;
	bool fresh;
	int err;

	if (cleanup <= wm)
		return 0; /* its state is gone (or would be at once): late */
	a = shmrun_keyed_state_ns(task, rec->key, rec->key_len, (uint64_t)start, sizeof(*a),
				  true);
	if (!a)
		return -ENOMEM;
	fresh = a->n == 0;
	agg_add(a, x);
	if (fresh && due > wm && (err = set_timer(task, rec->key, rec->key_len, due)))
		return err;
	if (fresh && cleanup != due && (err = set_timer(task, rec->key, rec->key_len, cleanup)))
		return err;
	/* update: every change; final: a window that fired already fires again */
	if (w->update || due <= wm) {
		err = emit_window(task, w, rec->key, rec->key_len, start, end, a);
		if (err)
			return err;
	}
	return 1;
}

static int fixed_process(struct shmrun_task *task, struct window *w,
			 const struct shmrun_record *rec, double x, int64_t wm)
{
	int64_t t = rec->event_time_ns;
	int64_t last = floor_to(t, w->slide);
	int took = 0;

	/* the windows [s, s + size) with s <= t < s + size, s a multiple of slide */
	for (int64_t s = last; s > t - w->size; s -= w->slide) {
		int r = fold_fixed(task, w, rec, s, x, wm);

		if (r < 0)
			return r;
		took |= r;
	}
	return took ? 0 : drop_late(task, w, rec);
}

static int fixed_timer(struct shmrun_task *task, struct window *w, const void *key,
		       uint32_t key_len, int64_t time)
{
	int64_t start = time + 1 - w->size; /* the window this fires */
	struct agg *a = shmrun_keyed_state_ns(task, key, key_len, (uint64_t)start, sizeof(*a),
					      false);
	int err;

	if (a && !w->update && (err = emit_window(task, w, key, key_len, start, time + 1, a)))
		return err;
	if (a && w->lateness == 0)
		shmrun_keyed_state_delete(task, key, key_len, true, (uint64_t)start);
	if (w->lateness > 0) /* the window this cleans up */
		shmrun_keyed_state_delete(task, key, key_len, true,
					  (uint64_t)(start - w->lateness));
	return 0;
}

/* ---- sessions ----------------------------------------------------------------- */

/* Read @key's session list into w->sess. Return: 0 or -ENOMEM. */
static int sessions_load(struct shmrun_task *task, struct window *w, const void *key,
			 uint32_t key_len)
{
	w->nsess = 0;
	for (w->pages = 0;; w->pages++) {
		struct session_page *p = shmrun_keyed_state_ns(task, key, key_len, w->pages,
							       sizeof(*p), false);

		if (!p)
			return 0;
		if (shmrun_grow_u32(&w->sess, &w->cap, (size_t)w->nsess + p->n, sizeof(*w->sess),
				    16))
			return -ENOMEM;
		memcpy(w->sess + w->nsess, p->s, p->n * sizeof(*p->s));
		w->nsess += p->n;
	}
}

/* Write w->sess back as @key's list, in as few pages as it needs. */
static int sessions_store(struct shmrun_task *task, struct window *w, const void *key,
			  uint32_t key_len)
{
	uint32_t pages = (w->nsess + SESSIONS_PER_PAGE - 1) / SESSIONS_PER_PAGE;

	for (uint32_t i = 0; i < pages; i++) {
		struct session_page *p = shmrun_keyed_state_ns(task, key, key_len, i, sizeof(*p),
							       true);
		uint32_t n = w->nsess - i * SESSIONS_PER_PAGE;

		if (!p)
			return -ENOMEM;
		p->n = n < SESSIONS_PER_PAGE ? n : SESSIONS_PER_PAGE;
		memcpy(p->s, w->sess + i * SESSIONS_PER_PAGE, p->n * sizeof(*p->s));
	}
	for (uint32_t i = pages; i < w->pages; i++)
		shmrun_keyed_state_delete(task, key, key_len, true, i);
	return 0;
}

static int session_process(struct shmrun_task *task, struct window *w,
			   const struct shmrun_record *rec, double x, int64_t wm)
{
	int64_t t = rec->event_time_ns;
	struct session m = {.start = t, .end = sat_add(t, w->gap)};
	int64_t due, cleanup;
	uint32_t i, kept;
	bool merged;
	int err;

	if (sat_add(m.end - 1, w->lateness) <= wm)
		return drop_late(task, w, rec);
	agg_add(&m.a, x);
	err = sessions_load(task, w, rec->key, rec->key_len);
	if (err)
		return err;
	/* Flink's TimeWindow.intersects(): sessions that overlap or touch merge;
	 * repeat until no session of the key meets the merged one */
	do {
		merged = false;
		for (i = 0, kept = 0; i < w->nsess; i++) {
			struct session *s = &w->sess[i];

			if (s->start <= m.end && m.start <= s->end) {
				m.start = s->start < m.start ? s->start : m.start;
				m.end = s->end > m.end ? s->end : m.end;
				agg_merge(&m.a, &s->a);
				merged = true;
			} else {
				w->sess[kept++] = *s;
			}
		}
		w->nsess = kept;
	} while (merged);
	if (shmrun_grow_u32(&w->sess, &w->cap, (size_t)w->nsess + 1, sizeof(*w->sess), 16))
		return -ENOMEM;
	w->sess[w->nsess++] = m;
	err = sessions_store(task, w, rec->key, rec->key_len);
	if (err)
		return err;
	due = m.end - 1;
	cleanup = sat_add(due, w->lateness);
	if (due > wm && (err = set_timer(task, rec->key, rec->key_len, due)))
		return err;
	if (cleanup != due && (err = set_timer(task, rec->key, rec->key_len, cleanup)))
		return err;
	if (w->update || due <= wm)
		return emit_window(task, w, rec->key, rec->key_len, m.start, m.end, &m.a);
	return 0;
}

static int session_timer(struct shmrun_task *task, struct window *w, const void *key,
			 uint32_t key_len, int64_t time)
{
	uint32_t i, kept = 0;
	bool changed = false;
	int err = sessions_load(task, w, key, key_len);

	if (err)
		return err;
	for (i = 0; i < w->nsess; i++) {
		struct session *s = &w->sess[i];

		if (!w->update && s->end - 1 == time) {
			err = emit_window(task, w, key, key_len, s->start, s->end, &s->a);
			if (err)
				return err;
		}
		if (sat_add(s->end - 1, w->lateness) == time)
			changed = true; /* cleaned up */
		else
			w->sess[kept++] = *s;
	}
	w->nsess = kept;
	return changed ? sessions_store(task, w, key, key_len) : 0;
}

/* ---- callbacks ------------------------------------------------------------------ */

/*
 * Whether every window of a record at @t, and its timers, fit in int64_t ns:
 * the earliest start of a sliding window (t - size - slide at worst, in the
 * assigner's loop), the latest window's end, and end - 1 + allowed_lateness.
 * A record with one window that does not fit is skipped whole. Durations are at
 * most 365 days, so this leaves out only about two years at each end of the
 * range (1677-1679 and 2260-2262). Without it the arithmetic overflowed: a
 * window's end saturated and its timer fired a window that was never found
 * (the record was lost without a count), or floor_to() overflowed.
 */
static bool time_fits(const struct window *w, int64_t t)
{
	int64_t span = w->kind == SESSION ? w->gap : w->size;
	/* the latest window of t starts at t (a session) or floor(t / slide) * slide */
	int64_t last = w->kind == SESSION || t < 0 ? t : floor_to(t, w->slide);

	return t >= INT64_MIN + 2 * span && last <= INT64_MAX - 1 - span - w->lateness;
}

static int window_process(struct shmrun_task *task, void *state, const struct shmrun_record *rec)
{
	struct window *w = state;
	int64_t wm = shmrun_task_watermark(task);
	double x = 0;

	if (w->agg != AGG_COUNT && !parse_value(rec, &x)) {
		if (w->bad_values++ < WARN_BAD_VALUES)
			shmrun_task_warn(task,
					 "value '%.*s' of key '%.*s' is not a number: record "
					 "skipped",
					 (int)(rec->value_len < 64 ? rec->value_len : 64),
					 (const char *)rec->value,
					 (int)(rec->key_len < 64 ? rec->key_len : 64),
					 (const char *)rec->key);
		return 0;
	}
	if (!time_fits(w, rec->event_time_ns)) {
		shmrun_task_count(task, SHMRUN_COUNT_RECORDS_BAD, 1);
		if (w->bad_times++ < WARN_BAD_VALUES)
			shmrun_task_warn(task,
					 "event time %" PRId64 " ns of key '%.*s' is too close "
					 "to the end of the 64-bit ns range (years 1677 and "
					 "2262) for its windows: record skipped",
					 rec->event_time_ns,
					 (int)(rec->key_len < 64 ? rec->key_len : 64),
					 (const char *)rec->key);
		return 0;
	}
	if (w->kind == SESSION)
		return session_process(task, w, rec, x, wm);
	return fixed_process(task, w, rec, x, wm);
}

static int window_process_batch(struct shmrun_task *task, void *state,
				const struct shmrun_record *recs, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		int err = window_process(task, state, &recs[i]);

		if (err)
			return err;
	}
	return 0;
}

static int window_timer(struct shmrun_task *task, void *state, const void *key, uint32_t key_len,
			int64_t time_ns, enum shmrun_time_domain domain)
{
	struct window *w = state;

	if (domain != SHMRUN_TIME_EVENT)
		return 0; /* never set */
	if (w->kind == SESSION)
		return session_timer(task, w, key, key_len, time_ns);
	return fixed_timer(task, w, key, key_len, time_ns);
}

static int window_end(struct shmrun_task *task, void *state)
{
	struct window *w = state;

	/* every window fired and was cleaned up when the watermark reached
	 * SHMRUN_WATERMARK_MAX, just before this call */
	if (w->bad_values)
		shmrun_task_warn(task, "%" PRIu64 " record%s skipped: value not a number",
				 w->bad_values, w->bad_values == 1 ? "" : "s");
	if (w->bad_times)
		shmrun_task_warn(task,
				 "%" PRIu64 " record%s skipped: event time too close to the end "
				 "of the 64-bit ns range",
				 w->bad_times, w->bad_times == 1 ? "" : "s");
	return w->late ? shmrun_file_out_end(task, w->late) : 0;
}

/* The late file's callbacks (file_out.h); nothing to do without one. */
static int window_snapshot(struct shmrun_task *task, void *state, uint64_t epoch)
{
	struct window *w = state;

	return w->late ? shmrun_file_out_snapshot(task, w->late, epoch) : 0;
}

static int window_restore(struct shmrun_task *task, void *state, const void *entry, uint32_t len)
{
	struct window *w = state;

	if (!w->late) { /* the fingerprint includes late: a checkpoint of another topology */
		shmrun_task_error(task, "the checkpoint holds a late file's length, but late is "
					"not set: restore with the topology that wrote it");
		return -EINVAL;
	}
	return shmrun_file_out_restore(task, w->late, entry, len);
}

static int window_commit(struct shmrun_task *task, void *state, uint64_t epoch)
{
	struct window *w = state;

	return w->late ? shmrun_file_out_commit(task, w->late, epoch) : 0;
}

static int window_flush(struct shmrun_task *task, void *state)
{
	struct window *w = state;

	return w->late ? shmrun_file_out_flush(task, w->late) : 0;
}

/* Durations: at most 365 days, as the job's (conf_internal.h's MAX_DURATION_NS),
 * so window arithmetic on real event times stays far from overflow. */
#define MAX_DURATION (365ull * 86400 * 1000000000)

static const struct shmrun_param_def params[] = {
	{.key = "kind", .type = SHMRUN_PARAM_ENUM, .required = true,
	 .choices = "tumbling sliding session",
	 .doc = "window assigner: tumbling (size), sliding (size, slide), session (gap)"},
	{.key = "size", .type = SHMRUN_PARAM_DURATION, .min = 1000000, .max = MAX_DURATION,
	 .doc = "length of a tumbling or sliding window; windows are aligned to the epoch"},
	{.key = "slide", .type = SHMRUN_PARAM_DURATION, .min = 1000000, .max = MAX_DURATION,
	 .doc = "sliding: a window starts every slide; must divide size"},
	{.key = "gap", .type = SHMRUN_PARAM_DURATION, .min = 1000000, .max = MAX_DURATION,
	 .doc = "session: a session ends after this long without a record of its key"},
	{.key = "aggregate", .type = SHMRUN_PARAM_ENUM, .def = "count",
	 .choices = "count sum min max avg",
	 .doc = "what a window computes; sum/min/max/avg parse the value as a number"},
	{.key = "allowed_lateness", .type = SHMRUN_PARAM_DURATION, .def = "0s",
	 .max = MAX_DURATION,
	 .doc = "how long past its end a window still takes records (late firing)"},
	{.key = "emit", .type = SHMRUN_PARAM_ENUM, .def = "final", .choices = "final update",
	 .doc = "final: a window when the watermark passes its end; update: one per change"},
	{.key = "time_format", .type = SHMRUN_PARAM_ENUM, .def = "iso", .choices = "iso ms",
	 .doc = "window start and end in the output: ISO-8601 UTC or epoch milliseconds"},
	{.key = "late", .type = SHMRUN_PARAM_PATH, .io = SHMRUN_PARAM_OUTPUT,
	 .doc = "also write each late record there, as key TAB event time TAB value (exactly-once "
		"with checkpoints); width k writes late.<instance>"},
	{0},
};

const struct shmrun_operator shmrun_op_window = {
	.size = sizeof(struct shmrun_operator),
	.name = "window",
	.summary = "event-time windows per key (tumbling, sliding, session); "
		   "value = start TAB end TAB aggregate",
	.params = params,
	.prepare = window_prepare,
	.open = window_open,
	.process = window_process,
	.process_batch = window_process_batch,
	.on_timer = window_timer,
	.end_of_input = window_end,
	.close = window_close,
	/* only a late file has per-worker state (its committed length): no rule,
	 * as file_sink; without late nothing is saved, any rescale works */
	.pw_rule = SHMRUN_PW_NONE,
	.snapshot = window_snapshot,
	.restore = window_restore,
	.commit = window_commit,
	.flush = window_flush,
};
