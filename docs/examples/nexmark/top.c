/*
 * docs/examples/nexmark/top.c: the last step of NEXMark q5 ("hot items"):
 * per window, the auction(s) with the most bids, all of them on a tie
 * (Flink's nexmark q5: the bid counts per auction and window joined with
 * their maximum per window, `num >= maxn`).
 *
 * The count step is the built-in `window` (key = auction, value
 * "start<TAB>end<TAB>count", event time end - 1 ns). Its instances each hold
 * some of a window's auctions, so the maximum needs them in one place:
 *
 *   window (by auction) -> nexmark_window_key -> by key -> nexmark_top
 *                          (forward, same width)           (by window)
 *
 *   nexmark_window_key  re-keys a window's output by its window: key
 *                       "start<TAB>end", value "auction<TAB>count", event
 *                       time unchanged; stateless.
 *   nexmark_top         per window key, the largest count and the auctions
 *                       that have it, in key-bound state; an event-time timer
 *                       at the window's event time (end - 1 ns) emits them,
 *                       as the window emitted them: key = auction, value
 *                       "start<TAB>end<TAB>count", event time end - 1 ns.
 *
 * Why the timer is exact at any width: a `window` instance emits a window's
 * records when its watermark reaches end - 1, before it forwards that
 * watermark; nexmark_top's watermark is the minimum over all its input
 * channels, so when it reaches end - 1 every window instance has sent all
 * its records of that window (channels keep order). A record at or behind
 * nexmark_top's watermark (only possible after a late firing upstream, with
 * allowed_lateness) is dropped and counted as late.
 *
 * State (namespaced key-bound state, 16 bytes a value, all in the window
 * key's vnode, so a checkpoint holds it with the timer and --rescale moves
 * them together; no per-worker state):
 *
 *   (window, ns 0)        struct top_head: the largest count so far, and the
 *                         first auction of the tie list (0: none);
 *   (window, ns auction)  struct top_entry: a tied auction, the next one.
 *
 * The tie list holds exactly the auctions whose count equals the largest so
 * far: a larger count deletes the list and starts a new one, so the state
 * per open window is the current ties, and each record costs O(1) amortised.
 * Auction ids and counts are >= 1 (NEXMark ids start at 1000), so ns 0 and
 * count 0 are free for the head and "new window".
 *
 * The same (window, auction) twice, before the window's timer: a late firing
 * upstream (`allowed_lateness`) re-emits the window with a larger count,
 * which then counts as any larger count does; the same count again changes
 * nothing. Counts of a window only grow, so the smaller one never needs to
 * come back. After the timer such a record is late (above).
 *
 * Rejected: the maximum by watermark (on_watermark() walking every window):
 * timers already live in the key's vnode and fire in a deterministic order;
 * a fixed-size array of tied auctions (not exact when ties are many);
 * one state value holding every auction's count of the window (the top
 * needs only the ties, and values have one size per task).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "nexmark.h"

#define BATCH_OUT      64 /* records gathered per shmrun_emit_batch() */
#define WINDOW_KEY_MAX 96 /* bytes of "start<TAB>end" (ISO or ms times) */
#define VALUE_MAX      160
#define WARN_LATE      3 /* late records logged per task */

/* ---- nexmark_window_key -------------------------------------------------------- */

/* The offset of @v's second TAB (@len bytes), or -1 when it has not exactly two. */
static int64_t second_tab(const char *v, uint32_t len)
{
	const char *t1 = memchr(v, '\t', len), *t2;

	if (!t1)
		return -1;
	t2 = memchr(t1 + 1, '\t', (size_t)(v + len - t1 - 1));
	if (!t2 || memchr(t2 + 1, '\t', (size_t)(v + len - t2 - 1)))
		return -1;
	return t2 - v;
}

static int not_window_output(struct shmrun_task *task, const struct shmrun_record *rec)
{
	shmrun_task_error(task,
			  "a record that is not a window's output (value 'start<TAB>end<TAB>"
			  "count', key an auction, at most %d bytes of window): key '%.*s', "
			  "value '%.*s' (feed this stage from an `op = window` stage)",
			  WINDOW_KEY_MAX, (int)(rec->key_len < 40 ? rec->key_len : 40),
			  (const char *)rec->key, (int)(rec->value_len < 80 ? rec->value_len : 80),
			  (const char *)rec->value);
	return -EILSEQ; /* the same input again: no restart cures it */
}

/* @rec re-keyed by its window, at @buf (VALUE_MAX bytes), into *@out. */
static int window_key_one(struct shmrun_task *task, const struct shmrun_record *rec, char *buf,
			  struct shmrun_record *out)
{
	const char *v = rec->value;
	int64_t t2 = rec->value_len ? second_tab(v, rec->value_len) : -1;
	uint32_t agg;

	if (t2 < 0 || t2 > WINDOW_KEY_MAX || !rec->key_len ||
	    rec->key_len + rec->value_len - t2 > VALUE_MAX)
		return not_window_output(task, rec);
	agg = rec->value_len - (uint32_t)t2; /* "<TAB>count" */
	memcpy(buf, rec->key, rec->key_len);
	memcpy(buf + rec->key_len, v + t2, agg);
	out->key = v;
	out->key_len = (uint32_t)t2;
	out->value = buf;
	out->value_len = rec->key_len + agg;
	out->event_time_ns = rec->event_time_ns;
	return 0;
}

static int window_key_batch(struct shmrun_task *task, void *state, const struct shmrun_record *recs,
			    uint32_t n)
{
	(void)state;
	return nx_map_batch(task, recs, n, window_key_one);
}

static int window_key_process(struct shmrun_task *task, void *state,
			      const struct shmrun_record *rec)
{
	return window_key_batch(task, state, rec, 1);
}

/* ---- nexmark_top --------------------------------------------------------------- */

struct top_head {
	uint64_t max;  /* the largest count of the window so far; 0: a new window */
	uint64_t head; /* the first tied auction, 0: none */
};

struct top_entry {
	uint64_t next;	/* the next tied auction, 0: the last */
	uint64_t count; /* == the head's max while listed; 0: not listed */
};

_Static_assert(sizeof(struct top_head) == sizeof(struct top_entry),
	       "key-bound values have one size per task");

struct top_state {
	uint64_t late; /* records dropped as late */
};

static int top_open(struct shmrun_task *task, void **state)
{
	struct top_state *st = calloc(1, sizeof(*st));

	(void)task;
	if (!st)
		return -ENOMEM;
	*state = st;
	return 0;
}

static void top_close(struct shmrun_task *task, void *state)
{
	(void)task;
	free(state);
}

/* Window @w's key-bound value of namespace @ns deleted. Return: 0 or a negative
 * errno (reported). */
static int top_delete(struct shmrun_task *task, const void *w, uint32_t wlen, uint64_t ns)
{
	int err = shmrun_keyed_state_delete(task, w, wlen, true, ns);

	if (err)
		shmrun_task_error(task, "window '%.*s': deleting its state (%" PRIu64 "): %s",
				  (int)wlen, (const char *)w, ns, strerror(-err));
	return err;
}

/* Delete window @w's tie list, from auction @a on. Return: 0 or a negative
 * errno (reported). */
static int top_drop_list(struct shmrun_task *task, const void *w, uint32_t wlen, uint64_t a)
{
	int err;

	while (a) {
		struct top_entry *e = shmrun_keyed_state_ns(task, w, wlen, a, sizeof(*e), false);
		uint64_t next;

		if (!e) {
			shmrun_task_error(task,
					  "window '%.*s': tied auction %" PRIu64
					  " missing from the key-bound state",
					  (int)wlen, (const char *)w, a);
			return -EIO;
		}
		next = e->next;
		err = top_delete(task, w, wlen, a);
		if (err)
			return err;
		a = next;
	}
	return 0;
}

static int top_bad(struct shmrun_task *task, const struct shmrun_record *rec)
{
	shmrun_task_error(task,
			  "a record that is not a window count re-keyed by nexmark_window_key "
			  "(key 'start<TAB>end', value 'auction<TAB>count', both >= 1, an event "
			  "time): key '%.*s', value '%.*s' (feed this stage from "
			  "nexmark_window_key by key)",
			  (int)(rec->key_len < 80 ? rec->key_len : 80), (const char *)rec->key,
			  (int)(rec->value_len < 80 ? rec->value_len : 80),
			  (const char *)rec->value);
	return -EILSEQ; /* the same input again: no restart cures it */
}

static int top_process(struct shmrun_task *task, void *state, const struct shmrun_record *rec)
{
	struct top_state *st = state;
	struct nx_fields fs;
	struct top_head *h;
	struct top_entry *e;
	uint64_t auction, count;
	const char *v = rec->value;
	const char *t = rec->value_len ? memchr(v, '\t', rec->value_len) : NULL;

	if (!t || !rec->key_len || rec->key_len > WINDOW_KEY_MAX || !rec->event_time_ns)
		return top_bad(task, rec);
	fs.f[0] = v;
	fs.len[0] = (uint32_t)(t - v);
	fs.f[1] = t + 1;
	fs.len[1] = rec->value_len - fs.len[0] - 1;
	if (!nx_u64(&fs, 0, &auction) || !nx_u64(&fs, 1, &count) || !auction || !count)
		return top_bad(task, rec);
	if (rec->event_time_ns <= shmrun_task_watermark(task)) {
		shmrun_task_count(task, SHMRUN_COUNT_LATE_RECORDS, 1);
		if (st->late++ < WARN_LATE)
			shmrun_task_warn(task,
					 "window '%.*s': count of auction %" PRIu64
					 " behind the watermark (a late firing upstream?): dropped",
					 (int)rec->key_len, (const char *)rec->key, auction);
		return 0;
	}
	h = shmrun_keyed_state_ns(task, rec->key, rec->key_len, 0, sizeof(*h), true);
	if (!h)
		return -ENOMEM; /* reported by the runtime */
	if (!h->max) {
		int err = shmrun_timer_set(task, SHMRUN_TIME_EVENT, rec->key, rec->key_len,
					   rec->event_time_ns);

		if (err)
			return err;
	}
	if (count < h->max)
		return 0;
	if (count > h->max) {
		int err = top_drop_list(task, rec->key, rec->key_len, h->head);

		if (err)
			return err;
		h->max = count;
		h->head = 0;
	}
	e = shmrun_keyed_state_ns(task, rec->key, rec->key_len, auction, sizeof(*e), true);
	if (!e)
		return -ENOMEM;
	if (e->count)
		return 0; /* listed already, with this count: the same record again */
	e->count = count;
	e->next = h->head;
	h->head = auction;
	return 0;
}

static int top_process_batch(struct shmrun_task *task, void *state,
			     const struct shmrun_record *recs, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		int err = top_process(task, state, &recs[i]);

		if (err)
			return err;
	}
	return 0;
}

/* Window @key is complete: emit its tied auctions, delete its state. */
static int top_timer(struct shmrun_task *task, void *state, const void *key, uint32_t key_len,
		     int64_t time_ns, enum shmrun_time_domain domain)
{
	struct top_head *h = shmrun_keyed_state_ns(task, key, key_len, 0, sizeof(*h), false);
	char buf[BATCH_OUT][VALUE_MAX], kbuf[BATCH_OUT][24];
	struct shmrun_record out[BATCH_OUT];
	uint32_t k = 0;
	uint64_t a;
	int err;

	(void)state;
	if (domain != SHMRUN_TIME_EVENT || !h)
		return 0; /* never set; or a window already emitted */
	for (a = h->head; a;) {
		struct top_entry *e =
		    shmrun_keyed_state_ns(task, key, key_len, a, sizeof(*e), false);
		char *p;

		if (!e)
			return top_drop_list(task, key, key_len, a); /* reports it */
		out[k].key = kbuf[k];
		out[k].key_len = (uint32_t)(nx_put_u64(kbuf[k], a) - kbuf[k]);
		memcpy(buf[k], key, key_len);
		buf[k][key_len] = '\t';
		p = nx_put_u64(buf[k] + key_len + 1, e->count);
		out[k].value = buf[k];
		out[k].value_len = (uint32_t)(p - buf[k]);
		out[k].event_time_ns = time_ns;
		a = e->next;
		if (++k == BATCH_OUT) {
			err = shmrun_emit_batch(task, out, k);
			if (err)
				return err;
			k = 0;
		}
	}
	if (k) {
		err = shmrun_emit_batch(task, out, k);
		if (err)
			return err;
	}
	err = top_drop_list(task, key, key_len, h->head);
	return err ? err : top_delete(task, key, key_len, 0);
}

static int top_end(struct shmrun_task *task, void *state)
{
	struct top_state *st = state;

	/* every window's timer fired at watermark SHMRUN_WATERMARK_MAX, just before */
	if (st->late)
		shmrun_task_warn(task, "%" PRIu64 " late window count%s dropped", st->late,
				 st->late == 1 ? "" : "s");
	return 0;
}

static const struct shmrun_param_def no_params[] = {
    {0},
};

const struct shmrun_operator nx_window_key_op = {
    .size = sizeof(struct shmrun_operator),
    .name = "nexmark_window_key",
    .summary = "NEXMark q5: a window's output re-keyed by its window: key = start TAB end, "
	       "value = auction TAB count, event time unchanged",
    .params = no_params,
    .process = window_key_process,
    .process_batch = window_key_batch,
    .state_version = "1",
};

const struct shmrun_operator nx_top_op = {
    .size = sizeof(struct shmrun_operator),
    .flags = SHMRUN_OP_KEYED, /* key-bound state: check refuses unpartitioned inputs */
    .name = "nexmark_top",
    .summary = "NEXMark q5: per window (input keyed by nexmark_window_key), the auction(s) with "
	       "the largest count, all on a tie, at the window's event time: key = auction, "
	       "value = start TAB end TAB count",
    .params = no_params,
    .open = top_open,
    .process = top_process,
    .process_batch = top_process_batch,
    .on_timer = top_timer,
    .end_of_input = top_end,
    .close = top_close,
    .pw_rule = SHMRUN_PW_NONE, /* key-bound state and timers only: any rescale works */
    .state_version = "1",
};
