/*
 * docs/examples/nexmark/agg.c: the operators of NEXMark's aggregating
 * queries q4 and q7 (Flink's nexmark SQL), over `nexmark` records.
 *
 * q4, average closing price per category:
 *
 *   nexmark ──by key──► nexmark_closing_price ──by key──► nexmark_average
 *   (events = all,       (key = auction id)    (category     (end of input)
 *    key = join)                                -> price)
 *
 *   nexmark_closing_price  the join of auctions and bids by auction id,
 *       SQL's `B.dateTime BETWEEN A.dateTime AND A.expires` (inclusive, ms),
 *       with MAX(B.price) per auction: when the watermark passes an
 *       auction's expiry (the last ns of its `expires` ms) it emits key =
 *       category, value = the highest price of its bids in range, event time
 *       that instant; an auction with no bid in range emits nothing (inner
 *       join). Its input (one stage of all events, or an auction and a bid
 *       stage) `by key` with the source's `key = join` (a bid's key is its
 *       auction, an auction's its id); the record key must be the auction
 *       id, else the job fails (a `key = person` source would join in the
 *       wrong place). A person fails the job too, unless `others = skip`.
 *   nexmark_average  per key, the integer average of the values (unsigned
 *       decimals), rounded down (floor(sum / count), the sum in 128 bits),
 *       one record per key at end of input: key, value = the average.
 *
 * q7, highest bid per tumbling window of `size` (10 s) of event time, all of
 * the bids with the top price on a tie:
 *
 *   bids ──forward──► nexmark_top_bids_partial ──by key──► nexmark_top_bids
 *                     (per instance, per window)  (key = window end, ms)
 *
 *   nexmark_top_bids_partial  per instance and window, the highest price and
 *       the bids with it; when the watermark passes the window's end - 1 it
 *       emits one record per such bid: key = window end (ms, decimal), value
 *       = price TAB auction TAB bidder TAB date_time, event time end - 1 ns.
 *   nexmark_top_bids  per window (its key), the highest price over the
 *       partials and every bid with it; a timer at the window's end - 1 (the
 *       partials' event time) emits each: key = auction, value = price TAB
 *       bidder TAB date_time, event time end - 1 ns.
 *
 * State. nexmark_closing_price keeps per auction id (namespaced key-bound
 * state, CP_VALUE bytes per value): ns 0, the head (the auction's category,
 * open and expiry ms, the max price so far, and the first CP_INLINE pending
 * bids), ns 1.. pages of further pending bids. A bid whose auction has not
 * arrived (bids name up to 10 auctions not yet opened, and source
 * instances, or an auction and a bid input, interleave) is pending: kept as (date_time ms, price), bids
 * of one ms folded into their max, until the auction arrives (those in range
 * count then) or the watermark passes the end of the bid's ms: an auction
 * still to come is then from a later ms, and a bid before its auction's
 * dateTime never counts. A timer at that instant prunes it. An auction that
 * fired is kept as a closed head for CP_RETAIN_NS of event time, so the bids
 * still naming it are dropped at once instead of pending; deleting it
 * earlier or later changes the cost, never the result (a bid after expiry
 * never counts). So state holds about watermark lag + expiry span +
 * CP_RETAIN_NS of auctions, however long the job runs. nexmark_average
 * keeps (count, sum) per key; nexmark_top_bids per window a head (ns 0:
 * price, ties) and pages of tied bids (ns 1..). Everything is in the key's
 * vnode with its timers: checkpoints, kill -9 and --rescale neither lose nor
 * repeat anything.
 *
 * nexmark_top_bids_partial keeps its windows per instance (plain memory, no
 * keys: its input is forward, records are in no vnode of theirs), saved as
 * per-worker state, one entry per open window, rule split: a rescale deals
 * the windows out (two entries of one window dealt to one instance merge),
 * and whichever instance holds a window emits it, as the final step merges
 * partials from anywhere. Its watermark is its source instance's, so a
 * partial goes out ahead of the watermark that closes the window, and
 * nexmark_top_bids' watermark (the minimum over all partial instances)
 * passes end - 1 only after every instance's partial came.
 *
 * Keys: the three keyed operators check, on the first record of each
 * batch, that the record's key is in one of the instance's vnodes, so an
 * input that is not `by key` fails the job at once (at width > 1) instead
 * of joining or summing apart; nexmark_closing_price also checks that the
 * key is the record's auction id.
 *
 * Late records (event time at or behind the watermark; with the source's
 * `watermark_delay = 0s` there are none): dropped and counted (`late
 * records:`), as interval_join and window do.
 *
 * Rejected:
 *   - q7 with a combiner on the shuffle into nexmark_top_bids: a partial has
 *     a fixed size (<= 256 bytes) and add() cannot fail, so ties beyond a
 *     few bids could not be kept exactly; the partial step costs one
 *     compare per bid and sends a record per window per instance;
 *   - q7 in one keyed step (bids by window key): every bid crosses a ring;
 *   - q4's average by `window` (aggregate = avg): IEEE doubles per window,
 *     not one exact integer per category at end of input;
 *   - q4 keeping every pending bid until its auction arrives: bids naming
 *     auctions that closed would stay forever;
 *   - q4.conf with an auction source and a bid source (events = auction,
 *     events = bid): unpaced, the auction source makes one record per 16
 *     events and runs ahead in event time; the watermark (the minimum) is
 *     the bids', so every auction they have not reached is held: 94 MB of
 *     state instead of 5.5 MB over 10 M events on one worker, and slower.
 *     One source of all events keeps both in step (the persons, 2 %, are
 *     skipped). (Unpaced instances of one source drift apart too, as
 *     nothing aligns their event times: at width 2 the peak grows with the
 *     run, 30 MB over 10 M events, 90 MB over 20 M.)
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "nexmark.h"

#define BATCH_OUT 64 /* records gathered per shmrun_emit_batch() */
#define NS_PER_MS 1000000ll

/* The last ns of ms @ms (a record of that ms has event time <= it), saturated. */
static int64_t ms_end_ns(int64_t ms)
{
	if (ms >= INT64_MAX / NS_PER_MS - 1)
		return INT64_MAX - 1;
	if (ms < INT64_MIN / NS_PER_MS + 1)
		return INT64_MIN + 1;
	return (ms + 1) * NS_PER_MS - 1;
}

/* floor(t / d), for d > 0 and any t */
static int64_t floor_div(int64_t t, int64_t d)
{
	int64_t q = t / d;

	return (t % d < 0) ? q - 1 : q;
}

/* Unsigned decimal @s (@len bytes) into *@v. Return: false if not one. */
static bool parse_u64(const char *s, uint32_t len, uint64_t *v)
{
	struct nx_fields f = {.n = 1, .f = {s}, .len = {len}};

	return nx_u64(&f, 0, v);
}

/*
 * Cut @v (@len bytes) at its TABs into exactly @n unsigned decimals.
 * Return: false when it has another number of fields or one is not a number.
 */
static bool parse_u64s(const void *v, uint32_t len, uint64_t *out, unsigned n)
{
	const char *p = v, *end = p + len;

	for (unsigned i = 0; i < n; i++) {
		const char *t = i + 1 < n ? memchr(p, '\t', (size_t)(end - p)) : end;

		if (!t || !parse_u64(p, (uint32_t)(t - p), &out[i]))
			return false;
		p = t + 1;
	}
	return true;
}

/*
 * nx_check_by_key() on the first record of a batch (a wrong edge kind sends
 * most records astray, so it shows at once), not per record.
 */
static int check_by_key(struct shmrun_task *task, const struct shmrun_record *rec, const char *fix)
{
	uint32_t lo, hi;

	shmrun_task_vnode_range(task, &lo, &hi);
	return nx_check_by_key(task, rec, lo, hi, fix);
}

/* ==== q4: nexmark_closing_price ============================================ */

#define CP_VALUE     128u	  /* bytes of every value of the task */
#define CP_INLINE    4u		  /* pending bids in the head */
#define CP_PER_PAGE  8u		  /* pending bids per page */
#define CP_RETAIN_NS 1000000000ll /* how long a fired auction's head stays (1 s) */

enum { CP_KNOWN = 1, CP_BID = 2, CP_CLOSED = 4 };

struct cp_state {
	bool skip_persons; /* others = skip */
};

struct cp_pending {
	int64_t ms;	/* the bid's date_time */
	uint64_t price; /* the highest price of the pending bids of that ms */
};

struct cp_head {
	uint64_t category;
	int64_t opened_ms, expires_ms; /* the auction's date_time and expires */
	uint64_t max_price;	       /* with CP_BID: the highest price in range */
	int64_t prune_at;	       /* ns: the earliest prune timer set; 0: none */
	uint32_t flags;		       /* CP_* */
	uint32_t pending;	       /* pending bids: in[], then pages 1.. */
	struct cp_pending in[CP_INLINE];
};

struct cp_page {
	struct cp_pending e[CP_PER_PAGE];
};

_Static_assert(sizeof(struct cp_head) <= CP_VALUE, "head fits a value");
_Static_assert(sizeof(struct cp_page) <= CP_VALUE, "page fits a value");

/* A walk over the pending list of one key: the page in hand is cached. */
struct cp_walk {
	struct shmrun_task *task;
	const void *key;
	uint32_t key_len;
	struct cp_head *h;
	uint64_t page_no; /* 0: none in hand */
	struct cp_page *page;
};

static uint32_t cp_pages(uint32_t pending)
{
	return pending <= CP_INLINE ? 0 : (pending - CP_INLINE + CP_PER_PAGE - 1) / CP_PER_PAGE;
}

/* Pending entry @i; NULL when out of memory (@create) or its page is missing. */
static struct cp_pending *cp_at(struct cp_walk *w, uint32_t i, bool create)
{
	uint64_t page;

	if (i < CP_INLINE)
		return &w->h->in[i];
	i -= CP_INLINE;
	page = 1 + i / CP_PER_PAGE;
	if (page != w->page_no) {
		w->page =
		    shmrun_keyed_state_ns(w->task, w->key, w->key_len, page, CP_VALUE, create);
		w->page_no = w->page ? page : 0;
		if (!w->page)
			return NULL;
	}
	return &w->page->e[i % CP_PER_PAGE];
}

/* Delete the pages that hold entries [@from, @to) beyond those [0, @from) need. */
static void cp_drop_pages(struct cp_walk *w, uint32_t from, uint32_t to)
{
	for (uint32_t p = cp_pages(from) + 1; p <= cp_pages(to); p++)
		(void)shmrun_keyed_state_delete(w->task, w->key, w->key_len, true, p);
	w->page_no = 0;
}

static int cp_timer(struct shmrun_task *task, const void *key, uint32_t key_len, int64_t t)
{
	return shmrun_timer_set(task, SHMRUN_TIME_EVENT, key, key_len, t);
}

/* A bid (auction @key, @ms, @price) that is not late. */
static int cp_bid(struct shmrun_task *task, const void *key, uint32_t key_len, int64_t ms,
		  uint64_t price)
{
	struct cp_walk w = {.task = task, .key = key, .key_len = key_len};
	struct cp_pending *e;
	int64_t end;

	w.h = shmrun_keyed_state_ns(task, key, key_len, 0, CP_VALUE, false);
	if (w.h && (w.h->flags & CP_KNOWN)) {
		if (!(w.h->flags & CP_CLOSED) && ms >= w.h->opened_ms && ms <= w.h->expires_ms &&
		    (!(w.h->flags & CP_BID) || price > w.h->max_price)) {
			w.h->max_price = price;
			w.h->flags |= CP_BID;
		}
		return 0;
	}
	/* its auction has not come: pending, the bids of one ms folded into one */
	if (!w.h) {
		w.h = shmrun_keyed_state_ns(task, key, key_len, 0, CP_VALUE, true);
		if (!w.h)
			return -ENOMEM;
	}
	if (w.h->pending) {
		e = cp_at(&w, w.h->pending - 1, false);
		if (e && e->ms == ms) {
			if (price > e->price)
				e->price = price;
			return 0;
		}
	}
	e = cp_at(&w, w.h->pending, true);
	if (!e)
		return -ENOMEM;
	e->ms = ms;
	e->price = price;
	w.h->pending++;
	end = ms_end_ns(ms);
	if (w.h->prune_at == 0 || end < w.h->prune_at) {
		w.h->prune_at = end;
		return cp_timer(task, key, key_len, end);
	}
	return 0;
}

/* An auction that is not late: its pending bids in range count, then none is pending. */
static int cp_auction(struct shmrun_task *task, const void *key, uint32_t key_len,
		      uint64_t category, int64_t opened, int64_t expires)
{
	struct cp_walk w = {.task = task, .key = key, .key_len = key_len};

	w.h = shmrun_keyed_state_ns(task, key, key_len, 0, CP_VALUE, true);
	if (!w.h)
		return -ENOMEM;
	if (w.h->flags & CP_KNOWN) {
		shmrun_task_warn(task, "auction %.*s came twice: the second is ignored",
				 (int)key_len, (const char *)key);
		return 0;
	}
	w.h->category = category;
	w.h->opened_ms = opened;
	w.h->expires_ms = expires;
	w.h->flags = CP_KNOWN;
	for (uint32_t i = 0; i < w.h->pending; i++) {
		struct cp_pending *e = cp_at(&w, i, false);

		if (!e)
			break; /* cannot be: the pages of [0, pending) exist */
		if (e->ms >= opened && e->ms <= expires &&
		    (!(w.h->flags & CP_BID) || e->price > w.h->max_price)) {
			w.h->max_price = e->price;
			w.h->flags |= CP_BID;
		}
	}
	cp_drop_pages(&w, 0, w.h->pending);
	w.h->pending = 0;
	return cp_timer(task, key, key_len, ms_end_ns(expires));
}

/* Prune the pending bids of @key whose ms ended at or before @t. */
static int cp_prune(struct cp_walk *w, int64_t t)
{
	uint32_t keep = 0, n = w->h->pending;
	int64_t next = 0;

	for (uint32_t i = 0; i < n; i++) {
		struct cp_pending *e = cp_at(w, i, false), v;

		if (!e)
			break;
		v = *e;
		if (ms_end_ns(v.ms) <= t)
			continue;
		if (!next || ms_end_ns(v.ms) < next)
			next = ms_end_ns(v.ms);
		e = cp_at(w, keep++, false); /* keep <= i: its page exists */
		if (e)
			*e = v;
	}
	cp_drop_pages(w, keep, n);
	w->h->pending = keep;
	w->h->prune_at = next;
	if (!keep) {
		(void)shmrun_keyed_state_delete(w->task, w->key, w->key_len, true, 0);
		return 0;
	}
	return cp_timer(w->task, w->key, w->key_len, next);
}

static int cp_on_timer(struct shmrun_task *task, void *state, const void *key, uint32_t key_len,
		       int64_t t, enum shmrun_time_domain domain)
{
	struct cp_walk w = {.task = task, .key = key, .key_len = key_len};
	char cat[24], price[24];
	struct shmrun_record out;
	int64_t end, gone;
	int err;

	(void)state;
	(void)domain;
	w.h = shmrun_keyed_state_ns(task, key, key_len, 0, CP_VALUE, false);
	if (!w.h)
		return 0; /* a prune timer of a key deleted since */
	if (!(w.h->flags & CP_KNOWN))
		return cp_prune(&w, t);
	end = ms_end_ns(w.h->expires_ms);
	gone = end > INT64_MAX - 1 - CP_RETAIN_NS ? INT64_MAX - 1 : end + CP_RETAIN_NS;
	if (!(w.h->flags & CP_CLOSED)) {
		if (t < end)
			return 0; /* a prune timer set before the auction came */
		w.h->flags |= CP_CLOSED;
		if (w.h->flags & CP_BID) {
			out.key = cat;
			out.key_len = (uint32_t)(nx_put_u64(cat, w.h->category) - cat);
			out.value = price;
			out.value_len = (uint32_t)(nx_put_u64(price, w.h->max_price) - price);
			out.event_time_ns = end;
			err = shmrun_emit(task, &out);
			if (err)
				return err;
		}
		return cp_timer(task, key, key_len, gone); /* the closed head's deletion */
	}
	if (t >= gone)
		(void)shmrun_keyed_state_delete(task, key, key_len, true, 0);
	return 0;
}

static int cp_batch(struct shmrun_task *task, void *state, const struct shmrun_record *recs,
		    uint32_t n)
{
	int64_t wm = shmrun_task_watermark(task);
	int err = check_by_key(task, &recs[0], "write input = auctions by key, bids by key");

	const struct cp_state *st = state;

	if (err)
		return err;
	for (uint32_t i = 0; i < n; i++) {
		const struct shmrun_record *rec = &recs[i];
		struct nx_fields fs;
		uint64_t a, b, c;
		unsigned id;

		if (!nx_split(rec->value, rec->value_len, &fs) ||
		    (fs.kind != NX_BID && fs.kind != NX_AUCTION)) {
			if (fs.kind == NX_PERSON && st->skip_persons)
				continue;
			return nx_bad_record(task, rec, "an auction or a bid");
		}
		id = fs.kind == NX_BID ? NX_BID_AUCTION : NX_AUCTION_ID;
		if (rec->key_len != fs.len[id] || memcmp(rec->key, fs.f[id], fs.len[id])) {
			shmrun_task_error(task,
					  "a record whose key '%.*s' is not its auction id '%.*s' "
					  "(set key = join on the nexmark sources, and read them "
					  "by key)",
					  (int)(rec->key_len < 40 ? rec->key_len : 40),
					  (const char *)rec->key, (int)fs.len[id], fs.f[id]);
			return -EILSEQ; /* the same input again: no restart cures it */
		}
		if (rec->event_time_ns <= wm) {
			shmrun_task_count(task, SHMRUN_COUNT_LATE_RECORDS, 1);
			continue;
		}
		if (fs.kind == NX_BID) {
			if (!nx_u64(&fs, NX_BID_PRICE, &a) || !nx_u64(&fs, NX_BID_TIME, &b) ||
			    b > INT64_MAX)
				return nx_bad_record(task, rec, "a bid");
			err = cp_bid(task, rec->key, rec->key_len, (int64_t)b, a);
		} else {
			uint64_t cat;

			if (!nx_u64(&fs, NX_AUCTION_CATEGORY, &cat) ||
			    !nx_u64(&fs, NX_AUCTION_TIME, &b) ||
			    !nx_u64(&fs, NX_AUCTION_EXPIRES, &c) || b > INT64_MAX || c > INT64_MAX)
				return nx_bad_record(task, rec, "an auction");
			err = cp_auction(task, rec->key, rec->key_len, cat, (int64_t)b, (int64_t)c);
		}
		if (err)
			return err;
	}
	return 0;
}

static int cp_process(struct shmrun_task *task, void *state, const struct shmrun_record *rec)
{
	return cp_batch(task, state, rec, 1);
}

static int cp_open(struct shmrun_task *task, void **state)
{
	struct cp_state *st = calloc(1, sizeof(*st));
	const char *others = shmrun_task_param(task, "others");

	if (!st)
		return -ENOMEM;
	st->skip_persons = others && !strcmp(others, "skip");
	*state = st;
	return 0;
}

static void cp_close(struct shmrun_task *task, void *state)
{
	(void)task;
	free(state);
}

/* ==== q4: nexmark_average ================================================== */

struct avg_value {
	uint64_t count;
	uint64_t sum_lo, sum_hi; /* the sum, 128 bits */
};

static int avg_batch(struct shmrun_task *task, void *state, const struct shmrun_record *recs,
		     uint32_t n)
{
	int err =
	    check_by_key(task, &recs[0], "write `by key` after the upstream stage in `input =`");

	(void)state;
	if (err)
		return err;
	for (uint32_t i = 0; i < n; i++) {
		struct avg_value *a;
		uint64_t v;

		if (!parse_u64(recs[i].value, recs[i].value_len, &v))
			return nx_fail_record(task, &recs[i], "a number (an unsigned decimal integer)",
					 "feed it nexmark_closing_price's output, or records "
					 "whose value is the number to average");
		a = shmrun_keyed_state(task, recs[i].key, recs[i].key_len, sizeof(*a), true);
		if (!a)
			return -ENOMEM;
		a->count++;
		a->sum_lo += v;
		a->sum_hi += a->sum_lo < v;
	}
	return 0;
}

static int avg_process(struct shmrun_task *task, void *state, const struct shmrun_record *rec)
{
	return avg_batch(task, state, rec, 1);
}

struct avg_out {
	struct shmrun_task *task;
	uint32_t k;
	struct shmrun_record r[BATCH_OUT];
	char v[BATCH_OUT][48];
};

static int avg_emit_one(void *arg, const void *key, uint32_t key_len, void *value)
{
	struct avg_out *o = arg;
	const struct avg_value *a = value;
	unsigned __int128 sum = ((unsigned __int128)a->sum_hi << 64) | a->sum_lo;
	uint64_t avg = a->count ? (uint64_t)(sum / a->count) : 0; /* < 2^64: a mean of u64s */

	o->r[o->k] = (struct shmrun_record){
	    .key = key,
	    .key_len = key_len,
	    .value = o->v[o->k],
	    .value_len = (uint32_t)(nx_put_u64(o->v[o->k], avg) - o->v[o->k]),
	};
	if (++o->k < BATCH_OUT)
		return 0;
	o->k = 0;
	return shmrun_emit_batch(o->task, o->r, BATCH_OUT);
}

static int avg_end(struct shmrun_task *task, void *state)
{
	struct avg_out *o = malloc(sizeof(*o));
	int err;

	(void)state;
	if (!o)
		return -ENOMEM;
	o->task = task;
	o->k = 0;
	/* the keys' bytes stay valid while their values live: until close */
	err = shmrun_keyed_state_foreach(task, avg_emit_one, o);
	if (!err && o->k)
		err = shmrun_emit_batch(task, o->r, o->k);
	free(o);
	return err;
}

/* ==== q7: nexmark_top_bids_partial ========================================= */

struct tb_bid {
	uint64_t auction, bidder, time_ms;
};

struct tb_window {
	int64_t start;	 /* ns */
	uint64_t max;	 /* the highest price; meaningful when n > 0 */
	uint32_t n, cap; /* bids with it */
	struct tb_bid *bids;
};

/* A per-worker entry: one open window, then its n bids. */
struct tb_entry {
	int64_t start;
	uint64_t max;
	uint32_t n, pad;
};

struct tbp {
	int64_t size; /* ns */
	uint32_t nwin, capwin;
	struct tb_window *w;
	uint32_t last; /* the window the last record went to, < nwin if any */
};

static int tbp_open(struct shmrun_task *task, void **state)
{
	struct tbp *st = calloc(1, sizeof(*st));

	if (!st)
		return -ENOMEM;
	st->size = (int64_t)shmrun_task_param_u64(task, "size", 10000000000ull);
	*state = st;
	return 0;
}

static void tbp_close(struct shmrun_task *task, void *state)
{
	struct tbp *st = state;

	(void)task;
	if (!st)
		return;
	for (uint32_t i = 0; i < st->nwin; i++)
		free(st->w[i].bids);
	free(st->w);
	free(st);
}

/* The window starting at @start, created empty if absent; NULL: out of memory. */
static struct tb_window *tbp_window(struct tbp *st, int64_t start)
{
	struct tb_window *w;

	if (st->last < st->nwin && st->w[st->last].start == start)
		return &st->w[st->last];
	for (uint32_t i = 0; i < st->nwin; i++)
		if (st->w[i].start == start) {
			st->last = i;
			return &st->w[i];
		}
	if (st->nwin == st->capwin) {
		uint32_t cap = st->capwin ? st->capwin * 2 : 4;

		w = realloc(st->w, cap * sizeof(*w));
		if (!w)
			return NULL;
		st->w = w;
		st->capwin = cap;
	}
	st->last = st->nwin++;
	w = &st->w[st->last];
	*w = (struct tb_window){.start = start};
	return w;
}

/* Fold bid @b at @price into @w (a higher price replaces the ties). Return: 0, -ENOMEM. */
static int tb_fold(struct tb_window *w, uint64_t price, const struct tb_bid *b)
{
	if (w->n && price < w->max)
		return 0;
	if (!w->n || price > w->max) {
		w->max = price;
		w->n = 0;
	}
	if (w->n == w->cap) {
		uint32_t cap = w->cap ? w->cap * 2 : 2;
		struct tb_bid *p = realloc(w->bids, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		w->bids = p;
		w->cap = cap;
	}
	w->bids[w->n++] = *b;
	return 0;
}

/* The end of the window at @start, saturated. */
static int64_t tb_end(const struct tbp *st, int64_t start)
{
	return start > INT64_MAX - st->size ? INT64_MAX : start + st->size;
}

static int tbp_batch(struct shmrun_task *task, void *state, const struct shmrun_record *recs,
		     uint32_t n)
{
	struct tbp *st = state;
	int64_t wm = shmrun_task_watermark(task);

	for (uint32_t i = 0; i < n; i++) {
		const struct shmrun_record *rec = &recs[i];
		struct nx_fields fs;
		struct tb_window *w;
		struct tb_bid b;
		uint64_t price;
		int64_t start = floor_div(rec->event_time_ns, st->size) * st->size;

		if (!nx_split(rec->value, rec->value_len, &fs) || fs.kind != NX_BID ||
		    !nx_u64(&fs, NX_BID_PRICE, &price))
			return nx_bad_record(task, rec, "a bid");
		if (tb_end(st, start) - 1 <= wm) {
			shmrun_task_count(task, SHMRUN_COUNT_LATE_RECORDS, 1);
			continue;
		}
		w = tbp_window(st, start);
		if (!w)
			return -ENOMEM;
		if (w->n && price < w->max)
			continue;
		if (!nx_u64(&fs, NX_BID_AUCTION, &b.auction) ||
		    !nx_u64(&fs, NX_BID_BIDDER, &b.bidder) || !nx_u64(&fs, NX_BID_TIME, &b.time_ms))
			return nx_bad_record(task, rec, "a bid");
		if (tb_fold(w, price, &b))
			return -ENOMEM;
	}
	return 0;
}

static int tbp_process(struct shmrun_task *task, void *state, const struct shmrun_record *rec)
{
	return tbp_batch(task, state, rec, 1);
}

/* Emit every window whose end - 1 is at or before @wm, and forget it. */
static int tbp_on_watermark(struct shmrun_task *task, void *state, int64_t wm)
{
	struct tbp *st = state;
	struct shmrun_record out[BATCH_OUT];
	char key[BATCH_OUT][24], val[BATCH_OUT][96];
	uint32_t k = 0;
	int err;

	for (uint32_t i = 0; i < st->nwin;) {
		struct tb_window *w = &st->w[i];
		int64_t end = tb_end(st, w->start);

		if (end - 1 > wm) {
			i++;
			continue;
		}
		for (uint32_t j = 0; j < w->n; j++) {
			const struct tb_bid *b = &w->bids[j];
			char *p = val[k];

			p = nx_put_u64(p, w->max);
			*p++ = '\t';
			p = nx_put_u64(p, b->auction);
			*p++ = '\t';
			p = nx_put_u64(p, b->bidder);
			*p++ = '\t';
			p = nx_put_u64(p, b->time_ms);
			out[k] = (struct shmrun_record){
			    .key = key[k],
			    .key_len = (uint32_t)(nx_put_u64(key[k], (uint64_t)(end / NS_PER_MS)) -
						  key[k]),
			    .value = val[k],
			    .value_len = (uint32_t)(p - val[k]),
			    .event_time_ns = end - 1,
			};
			if (++k == BATCH_OUT) {
				err = shmrun_emit_batch(task, out, k);
				if (err)
					return err;
				k = 0;
			}
		}
		free(w->bids);
		st->w[i] = st->w[--st->nwin];
		st->last = UINT32_MAX;
	}
	return k ? shmrun_emit_batch(task, out, k) : 0;
}

static int tbp_end_of_input(struct shmrun_task *task, void *state)
{
	return tbp_on_watermark(task, state, SHMRUN_WATERMARK_MAX);
}

static int tbp_snapshot(struct shmrun_task *task, void *state, uint64_t epoch)
{
	struct tbp *st = state;
	struct tb_entry *e = NULL;
	size_t cap = 0;
	int err = 0;

	(void)epoch;
	for (uint32_t i = 0; i < st->nwin && !err; i++) {
		const struct tb_window *w = &st->w[i];
		size_t len = sizeof(*e) + (size_t)w->n * sizeof(struct tb_bid);

		if (len > cap) {
			void *p = realloc(e, len);

			if (!p) {
				err = -ENOMEM;
				break;
			}
			e = p;
			cap = len;
		}
		*e = (struct tb_entry){.start = w->start, .max = w->max, .n = w->n};
		if (w->n)
			memcpy(e + 1, w->bids, (size_t)w->n * sizeof(struct tb_bid));
		err = shmrun_pw_add(task, e, (uint32_t)len);
	}
	free(e);
	return err;
}

static int tbp_restore(struct shmrun_task *task, void *state, const void *entry, uint32_t len)
{
	struct tbp *st = state;
	struct tb_entry e;
	struct tb_window *w;

	if (len < sizeof(e))
		goto bad;
	memcpy(&e, entry, sizeof(e));
	if (len != sizeof(e) + (uint64_t)e.n * sizeof(struct tb_bid))
		goto bad;
	w = tbp_window(st, e.start);
	if (!w)
		return -ENOMEM;
	for (uint32_t j = 0; j < e.n; j++) {
		struct tb_bid b;

		memcpy(&b, (const char *)entry + sizeof(e) + j * sizeof(b), sizeof(b));
		if (tb_fold(w, e.max, &b))
			return -ENOMEM;
	}
	return 0;
bad:
	shmrun_task_error(task, "restored window is malformed (%u bytes)", len);
	return -EINVAL;
}

/* ==== q7: nexmark_top_bids ================================================= */

#define TB_VALUE    128u
#define TB_PER_PAGE 5u /* tied bids per page (ns 1..) */

struct tb_head {
	uint64_t max;
	uint32_t n; /* bids with it, in pages 1.. */
	uint32_t pad;
};

struct tb_page {
	struct tb_bid b[TB_PER_PAGE];
};

_Static_assert(sizeof(struct tb_head) <= TB_VALUE, "head fits a value");
_Static_assert(sizeof(struct tb_page) <= TB_VALUE, "page fits a value");

static void tb_drop_pages(struct shmrun_task *task, const void *key, uint32_t key_len, uint32_t n)
{
	for (uint32_t p = 1; p <= (n + TB_PER_PAGE - 1) / TB_PER_PAGE; p++)
		(void)shmrun_keyed_state_delete(task, key, key_len, true, p);
}

static int tb_batch(struct shmrun_task *task, void *state, const struct shmrun_record *recs,
		    uint32_t n)
{
	int64_t wm = shmrun_task_watermark(task);
	int err =
	    check_by_key(task, &recs[0], "write `by key` after the upstream stage in `input =`");

	(void)state;
	if (err)
		return err;
	for (uint32_t i = 0; i < n; i++) {
		const struct shmrun_record *rec = &recs[i];
		uint64_t f[4], window;
		struct tb_head *h;
		struct tb_page *pg;
		bool fresh;

		if (!parse_u64s(rec->value, rec->value_len, f, 4) ||
		    !parse_u64(rec->key, rec->key_len, &window))
			return nx_fail_record(task, rec,
					 "an output of nexmark_top_bids_partial (key = window "
					 "end, value = price TAB auction TAB bidder TAB date_time)",
					 "feed it from a nexmark_top_bids_partial stage, by key");
		if (rec->event_time_ns <= wm) {
			shmrun_task_count(task, SHMRUN_COUNT_LATE_RECORDS, 1);
			continue;
		}
		h = shmrun_keyed_state_ns(task, rec->key, rec->key_len, 0, TB_VALUE, false);
		fresh = !h;
		if (!h) {
			h = shmrun_keyed_state_ns(task, rec->key, rec->key_len, 0, TB_VALUE, true);
			if (!h)
				return -ENOMEM;
		}
		if (h->n && f[0] < h->max)
			continue;
		if (h->n && f[0] > h->max) {
			tb_drop_pages(task, rec->key, rec->key_len, h->n);
			h->n = 0;
		}
		h->max = f[0];
		pg = shmrun_keyed_state_ns(task, rec->key, rec->key_len, 1 + h->n / TB_PER_PAGE,
					   TB_VALUE, true);
		if (!pg)
			return -ENOMEM;
		pg->b[h->n % TB_PER_PAGE] = (struct tb_bid){f[1], f[2], f[3]};
		h->n++;
		if (fresh) {
			err = shmrun_timer_set(task, SHMRUN_TIME_EVENT, rec->key, rec->key_len,
					       rec->event_time_ns);
			if (err)
				return err;
		}
	}
	return 0;
}

static int tb_process(struct shmrun_task *task, void *state, const struct shmrun_record *rec)
{
	return tb_batch(task, state, rec, 1);
}

static int tb_on_timer(struct shmrun_task *task, void *state, const void *key, uint32_t key_len,
		       int64_t t, enum shmrun_time_domain domain)
{
	struct tb_head *h = shmrun_keyed_state_ns(task, key, key_len, 0, TB_VALUE, false);
	struct shmrun_record out[BATCH_OUT];
	char okey[BATCH_OUT][24], val[BATCH_OUT][72];
	uint32_t k = 0;
	int err = 0;

	(void)state;
	(void)domain;
	if (!h)
		return 0;
	for (uint32_t j = 0; j < h->n && !err; j++) {
		const struct tb_page *pg =
		    shmrun_keyed_state_ns(task, key, key_len, 1 + j / TB_PER_PAGE, TB_VALUE, false);
		const struct tb_bid *b;
		char *p = val[k];

		if (!pg)
			break; /* cannot be: pages of [0, n) exist */
		b = &pg->b[j % TB_PER_PAGE];
		p = nx_put_u64(p, h->max);
		*p++ = '\t';
		p = nx_put_u64(p, b->bidder);
		*p++ = '\t';
		p = nx_put_u64(p, b->time_ms);
		out[k] = (struct shmrun_record){
		    .key = okey[k],
		    .key_len = (uint32_t)(nx_put_u64(okey[k], b->auction) - okey[k]),
		    .value = val[k],
		    .value_len = (uint32_t)(p - val[k]),
		    .event_time_ns = t,
		};
		if (++k == BATCH_OUT) {
			err = shmrun_emit_batch(task, out, k);
			k = 0;
		}
	}
	if (!err && k)
		err = shmrun_emit_batch(task, out, k);
	if (err)
		return err;
	tb_drop_pages(task, key, key_len, h->n);
	(void)shmrun_keyed_state_delete(task, key, key_len, true, 0);
	return 0;
}

/* ==== the operators ======================================================== */

static const struct shmrun_param_def no_params[] = {
    {0},
};

static const struct shmrun_param_def cp_params[] = {
    {.key = "others",
     .type = SHMRUN_PARAM_ENUM,
     .def = "fail",
     .choices = "fail skip",
     .doc = "a person record: fail the job (the input should be auctions and bids), or skip "
	    "it (the input is a nexmark source with events = all)"},
    {0},
};

static const struct shmrun_param_def tbp_params[] = {
    {.key = "size",
     .type = SHMRUN_PARAM_DURATION,
     .def = "10s",
     .min = 1000000,
     .max = 31536000000000000ull,
     .doc = "the length of the tumbling windows of event time, aligned to the epoch (NEXMark "
	    "q7: 10s)"},
    {0},
};

const struct shmrun_operator nx_closing_price_op = {
    .size = sizeof(struct shmrun_operator),
    .flags = SHMRUN_OP_KEYED, /* key-bound state: check refuses unpartitioned inputs */
    .name = "nexmark_closing_price",
    .summary = "NEXMark q4's join: per auction, the highest price of its bids between its "
	       "date_time and expires, emitted as key = category, value = price when the "
	       "watermark passes the expiry; inputs auctions and bids by key (key = join)",
    .params = cp_params,
    .open = cp_open,
    .process = cp_process,
    .process_batch = cp_batch,
    .close = cp_close,
    .on_timer = cp_on_timer,
    .state_version = "1",
};

const struct shmrun_operator nx_average_op = {
    .size = sizeof(struct shmrun_operator),
    .flags = SHMRUN_OP_KEYED, /* key-bound state: check refuses unpartitioned inputs */
    .name = "nexmark_average",
    .summary = "per key, the average of the values (unsigned integers), rounded down, one "
	       "record per key at end of input (NEXMark q4's AVG)",
    .params = no_params,
    .process = avg_process,
    .process_batch = avg_batch,
    .end_of_input = avg_end,
    .state_version = "1",
};

const struct shmrun_operator nx_top_bids_partial_op = {
    .size = sizeof(struct shmrun_operator),
    .name = "nexmark_top_bids_partial",
    .summary = "NEXMark q7's partial step: per instance and tumbling window of `size`, the "
	       "bids with the highest price, emitted when the watermark passes the window as "
	       "key = window end (ms), value = price, auction, bidder, date_time",
    .params = tbp_params,
    .open = tbp_open,
    .process = tbp_process,
    .process_batch = tbp_batch,
    .end_of_input = tbp_end_of_input,
    .close = tbp_close,
    .pw_rule = SHMRUN_PW_SPLIT,
    .snapshot = tbp_snapshot,
    .restore = tbp_restore,
    .state_version = "1",
    .on_watermark = tbp_on_watermark,
};

const struct shmrun_operator nx_top_bids_op = {
    .size = sizeof(struct shmrun_operator),
    .flags = SHMRUN_OP_KEYED, /* key-bound state: check refuses unpartitioned inputs */
    .name = "nexmark_top_bids",
    .summary = "NEXMark q7's final step: per window (key), the bids with the highest price "
	       "over nexmark_top_bids_partial's outputs, at the window's end as key = auction, "
	       "value = price, bidder, date_time",
    .params = no_params,
    .process = tb_process,
    .process_batch = tb_batch,
    .on_timer = tb_on_timer,
    .state_version = "1",
};
