/*
 * docs/examples/nexmark/join.c: the operators of NEXMark's join queries
 * (Flink's nexmark SQL, q3 and q8), over `nexmark` person and auction
 * records keyed by person (`key = person` on the sources: a person's id, an
 * auction's seller).
 *
 *   nexmark_local_items  q3, local item suggestion: a regular (unbounded)
 *                        inner join of the auctions of category `category`
 *                        (10) with their sellers living in OR, ID or CA;
 *                        one row per auction that has such a seller:
 *                        key = person id, value
 *                        name TAB city TAB state TAB auction id;
 *   nexmark_new_users    q8, monitor new users: reduces window_join's pairs
 *                        (person, auction) of a tumbling window of `size`
 *                        to one row per (person, window): key = person id,
 *                        value name TAB window start (ms since the epoch).
 *
 * nexmark_local_items. `input = persons by key, auctions by key`: the first
 * input carries persons, the second auctions (shmrun_task_input() tells them
 * apart, as Flink's CoProcessFunction has processElement1/2). Either may come
 * first for a seller: a seller can be a person not registered yet (NEXMark's
 * person id lead), and at width > 1 the two sources interleave in any order.
 * So each side waits for the other in key-bound state, as Flink's regular
 * join keeps both inputs: per person id (the key), namespace 0 holds a
 * struct q3_head:
 *   - the person has come (and lives in one of the states): its name, city
 *     and state, and nothing else of it; an auction arriving later is
 *     emitted at once and not kept;
 *   - the person has not come: the ids of the category-`category` auctions
 *     waiting for it, the first Q3_INLINE in the head, the rest in pages of
 *     Q3_PAGE_IDS ids at namespaces 1, 2, ...; when the person comes, every
 *     waiting auction is emitted and the pages are deleted.
 * A person of another state is not kept: its waiting auctions are deleted
 * when it comes. Person ids are unique in NEXMark, so nothing else needs
 * it, but an auction of such a seller arriving after it cannot tell that
 * seller from one yet to come: it waits, forever. The state therefore grows
 * with the persons of the three states and with the sellers of those
 * auctions: a key per 100 and per 300 events, about 1.4 bytes of state per
 * event (13.8 MB after 10 million events; Flink's q3 without a state TTL
 * grows likewise, with every filtered person and auction). Every value is
 * Q3_VALUE bytes.
 * Everything is key-bound: checkpoints, kill -9 and `--rescale` keep it
 * exact, and the output is the same multiset whatever the arrival order:
 * each matching auction meets its seller exactly once, when the second of
 * the two arrives. A row's event time is that of the record that completed
 * it (the later of the two to arrive).
 *
 * nexmark_new_users. Flink's q8 joins the persons of each tumbling 10 s
 * window with the sellers of auctions in the same window (each side grouped
 * per id and window). Here window_join (size 10 s) pairs every person and
 * auction of a seller in one window, with event time end - 1, and this
 * operator keeps the first pair of each (person, window): a namespaced
 * key-bound flag (key = person id, ns = window end), deleted by an
 * event-time timer at end - 1 that fires with the watermark window_join
 * forwards right after the window's pairs. So the state holds only the
 * windows being emitted. The window start comes from the pair's event time
 * and `size`, which must equal window_join's: a person whose time is not in
 * [end - size, end) fails the job, naming the mismatch.
 *
 * Both fail the job on a record that is not what they read (the wrong
 * `events` or `key` on a source, swapped inputs) and on a key that is not in
 * the instance's vnodes (an input not `by key`: key-bound state would be in
 * the wrong instance). Records go out in batches (shmrun_emit_batch()) from
 * buffers allocated once per instance; nothing is allocated per record.
 *
 * Rejected:
 *   - keeping each person of another state as a marker, so that later
 *     auctions of its sellers are dropped: a marker for every such person
 *     costs more than the few auctions that wait for one;
 *   - q8 in one operator, grouping both sides itself: window_join does the
 *     grouping by window already; the pairs it emits are as many as the
 *     auctions of new sellers, few beside the events;
 *   - a stateless "skip the pair equal to the previous one" for q8: right
 *     only while a window's pairs arrive one after the other, which holds on
 *     a forward edge but not on a shuffle; the keyed flag holds on either.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "nexmark.h"

#define BATCH_OUT 64 /* rows gathered per shmrun_emit_batch() */

/* ---- shared ------------------------------------------------------------------ */

/* What nx_check_by_key() tells to write. */
#define BY_KEY_FIX "write every input of this stage `by key`"

/* The record's key must be field @i of @fs (the person id, the seller). */
static bool key_is(const struct shmrun_record *rec, const struct nx_fields *fs, unsigned i)
{
	return rec->key_len == fs->len[i] && !memcmp(rec->key, fs->f[i], fs->len[i]);
}

/* ---- q3: nexmark_local_items -------------------------------------------------- */

#define Q3_VALUE    64u			 /* bytes of every key-bound value */
#define Q3_TEXT	    (Q3_VALUE - 8u)	 /* name, city, state of a person */
#define Q3_INLINE   (Q3_TEXT / 8u)	 /* waiting auction ids in the head */
#define Q3_PAGE_IDS (Q3_VALUE / 8u)	 /* waiting auction ids per page */
#define Q3_ROW	    (Q3_TEXT + 3u + 20u) /* name TAB city TAB state TAB id */

/* The states of q3's WHERE: P.state IN ('OR', 'ID', 'CA'). */
static const char q3_states[][3] = {"OR", "ID", "CA"};

struct q3_head {
	uint32_t waiting; /* auctions waiting for the person (0 once it came) */
	uint8_t person;	  /* 1: the person came; text holds it */
	uint8_t name_len, city_len, state_len;
	union {
		char text[Q3_TEXT];	 /* name, city, state, one after the other */
		uint64_t ids[Q3_INLINE]; /* the first waiting auctions */
	} u;
};
_Static_assert(sizeof(struct q3_head) == Q3_VALUE, "a head is one value");

struct q3_page {
	uint64_t ids[Q3_PAGE_IDS];
};

struct q3 {
	uint64_t category;
	uint32_t lo, hi; /* this instance's vnodes [lo, hi) */
	uint32_t n;	 /* rows gathered in out[] */
	struct shmrun_record out[BATCH_OUT];
	char row[BATCH_OUT][Q3_ROW];
};

static int q3_prepare(struct shmrun_task *task)
{
	if (shmrun_task_inputs(task) != 2) {
		shmrun_task_error(
		    task,
		    "nexmark_local_items needs two inputs, the persons first and the "
		    "auctions second (input = persons by key, auctions by key), not %u",
		    shmrun_task_inputs(task));
		return -EINVAL;
	}
	return 0;
}

static int q3_open(struct shmrun_task *task, void **state)
{
	struct q3 *q = calloc(1, sizeof(*q));

	if (!q) {
		shmrun_task_error(task, "out of memory");
		return -ENOMEM;
	}
	q->category = shmrun_task_param_u64(task, "category", 10);
	shmrun_task_vnode_range(task, &q->lo, &q->hi);
	*state = q;
	return 0;
}

static void q3_close(struct shmrun_task *task, void *state)
{
	(void)task;
	free(state);
}

static int q3_flush(struct shmrun_task *task, struct q3 *q)
{
	uint32_t n = q->n;

	q->n = 0;
	return n ? shmrun_emit_batch(task, q->out, n) : 0;
}

/* Gather the row of person @h (key @rec's) and auction @id, at @rec's event time. */
static int q3_row(struct shmrun_task *task, struct q3 *q, const struct shmrun_record *rec,
		  const struct q3_head *h, uint64_t id)
{
	char *p = q->row[q->n], *t = p;
	const char *s = h->u.text;

	memcpy(t, s, h->name_len);
	t += h->name_len;
	*t++ = '\t';
	memcpy(t, s + h->name_len, h->city_len);
	t += h->city_len;
	*t++ = '\t';
	memcpy(t, s + h->name_len + h->city_len, h->state_len);
	t += h->state_len;
	*t++ = '\t';
	t = nx_put_u64(t, id);
	q->out[q->n] = (struct shmrun_record){.key = rec->key,
					      .key_len = rec->key_len,
					      .value = p,
					      .value_len = (uint32_t)(t - p),
					      .event_time_ns = rec->event_time_ns};
	return ++q->n == BATCH_OUT ? q3_flush(task, q) : 0;
}

/* Page @k (namespace 1 + k) of @rec's key, created if @create. */
static struct q3_page *q3_page(struct shmrun_task *task, const struct shmrun_record *rec,
			       uint32_t k, bool create)
{
	return shmrun_keyed_state_ns(task, rec->key, rec->key_len, 1 + (uint64_t)k, Q3_VALUE,
				     create);
}

/* Waiting auction @i of @h. */
static uint64_t q3_waiting(struct shmrun_task *task, const struct shmrun_record *rec,
			   const struct q3_head *h, uint32_t i)
{
	const struct q3_page *pg;

	if (i < Q3_INLINE)
		return h->u.ids[i];
	pg = q3_page(task, rec, (i - Q3_INLINE) / Q3_PAGE_IDS, false);
	return pg ? pg->ids[(i - Q3_INLINE) % Q3_PAGE_IDS] : 0; /* always there */
}

/* Delete @h's pages (its waiting auctions past the inline ones). */
static void q3_drop_pages(struct shmrun_task *task, const struct shmrun_record *rec,
			  const struct q3_head *h)
{
	uint32_t pages =
	    h->waiting > Q3_INLINE ? (h->waiting - Q3_INLINE + Q3_PAGE_IDS - 1) / Q3_PAGE_IDS : 0;

	for (uint32_t k = 0; k < pages; k++)
		shmrun_keyed_state_delete(task, rec->key, rec->key_len, true, 1 + (uint64_t)k);
}

static bool q3_state_kept(const struct nx_fields *fs)
{
	if (fs->len[NX_PERSON_STATE] != 2)
		return false;
	for (size_t i = 0; i < sizeof(q3_states) / sizeof(q3_states[0]); i++)
		if (!memcmp(fs->f[NX_PERSON_STATE], q3_states[i], 2))
			return true;
	return false;
}

/* A person (the first input). */
static int q3_person(struct shmrun_task *task, struct q3 *q, const struct shmrun_record *rec)
{
	struct nx_fields fs;
	struct q3_head *h;
	uint32_t name, city, st;
	int err;

	if (!nx_split(rec->value, rec->value_len, &fs) || fs.kind != NX_PERSON)
		return nx_bad_record(task, rec, "a person (the first input)");
	if (!key_is(rec, &fs, NX_PERSON_ID))
		return nx_bad_record(task, rec, "a person keyed by its id (key = person)");
	if ((err = nx_check_by_key(task, rec, q->lo, q->hi, BY_KEY_FIX)))
		return err;
	name = fs.len[NX_PERSON_NAME];
	city = fs.len[NX_PERSON_CITY];
	st = fs.len[NX_PERSON_STATE];
	if (!q3_state_kept(&fs)) {
		/* no auction of this seller will ever be emitted: forget those waiting */
		h = shmrun_keyed_state_ns(task, rec->key, rec->key_len, 0, Q3_VALUE, false);
		if (h && !h->person) {
			q3_drop_pages(task, rec, h);
			shmrun_keyed_state_delete(task, rec->key, rec->key_len, true, 0);
		}
		return 0;
	}
	if (name + city + st > Q3_TEXT || name > 255 || city > 255) {
		shmrun_task_error(task,
				  "person %.*s: name, city and state of %u bytes together are more "
				  "than the %u this operator keeps",
				  (int)rec->key_len, (const char *)rec->key, name + city + st,
				  Q3_TEXT);
		return -EMSGSIZE;
	}
	h = shmrun_keyed_state_ns(task, rec->key, rec->key_len, 0, Q3_VALUE, true);
	if (!h)
		return -ENOMEM;
	if (!h->person && h->waiting) {
		struct q3_head p = {.person = 1,
				    .name_len = (uint8_t)name,
				    .city_len = (uint8_t)city,
				    .state_len = (uint8_t)st};

		memcpy(p.u.text, fs.f[NX_PERSON_NAME], name);
		memcpy(p.u.text + name, fs.f[NX_PERSON_CITY], city);
		memcpy(p.u.text + name + city, fs.f[NX_PERSON_STATE], st);
		for (uint32_t i = 0; i < h->waiting; i++)
			if ((err = q3_row(task, q, rec, &p, q3_waiting(task, rec, h, i))))
				return err;
		q3_drop_pages(task, rec, h);
	}
	h->waiting = 0;
	h->person = 1;
	h->name_len = (uint8_t)name;
	h->city_len = (uint8_t)city;
	h->state_len = (uint8_t)st;
	memcpy(h->u.text, fs.f[NX_PERSON_NAME], name);
	memcpy(h->u.text + name, fs.f[NX_PERSON_CITY], city);
	memcpy(h->u.text + name + city, fs.f[NX_PERSON_STATE], st);
	return 0;
}

/* An auction (the second input). */
static int q3_auction(struct shmrun_task *task, struct q3 *q, const struct shmrun_record *rec)
{
	struct nx_fields fs;
	struct q3_head *h;
	uint64_t id, category;
	int err;

	if (!nx_split(rec->value, rec->value_len, &fs) || fs.kind != NX_AUCTION ||
	    !nx_u64(&fs, NX_AUCTION_ID, &id) || !nx_u64(&fs, NX_AUCTION_CATEGORY, &category))
		return nx_bad_record(task, rec, "an auction (the second input)");
	if (!key_is(rec, &fs, NX_AUCTION_SELLER))
		return nx_bad_record(task, rec, "an auction keyed by its seller (key = person)");
	if (category != q->category)
		return 0;
	if ((err = nx_check_by_key(task, rec, q->lo, q->hi, BY_KEY_FIX)))
		return err;
	h = shmrun_keyed_state_ns(task, rec->key, rec->key_len, 0, Q3_VALUE, true);
	if (!h)
		return -ENOMEM;
	if (h->person)
		return q3_row(task, q, rec, h, id);
	if (h->waiting == UINT32_MAX) {
		shmrun_task_error(task, "seller %.*s: too many auctions waiting for it",
				  (int)rec->key_len, (const char *)rec->key);
		return -E2BIG;
	}
	if (h->waiting < Q3_INLINE) {
		h->u.ids[h->waiting] = id;
	} else {
		uint32_t i = h->waiting - Q3_INLINE;
		struct q3_page *pg = q3_page(task, rec, i / Q3_PAGE_IDS, true);

		if (!pg)
			return -ENOMEM;
		pg->ids[i % Q3_PAGE_IDS] = id;
	}
	h->waiting++;
	return 0;
}

static int q3_batch(struct shmrun_task *task, void *state, const struct shmrun_record *recs,
		    uint32_t n)
{
	struct q3 *q = state;
	bool persons = shmrun_task_input(task) == 0; /* one input per call */
	int err = 0;

	q->n = 0;
	for (uint32_t i = 0; i < n && !err; i++)
		err = persons ? q3_person(task, q, &recs[i]) : q3_auction(task, q, &recs[i]);
	if (err) {
		q->n = 0;
		return err;
	}
	return q3_flush(task, q);
}

static int q3_process(struct shmrun_task *task, void *state, const struct shmrun_record *rec)
{
	return q3_batch(task, state, rec, 1);
}

static const struct shmrun_param_def q3_params[] = {
    {.key = "category",
     .type = SHMRUN_PARAM_COUNT,
     .def = "10",
     .min = 0,
     .max = 1000000000,
     .doc = "join the auctions of this category (NEXMark q3: 10)"},
    {0},
};

const struct shmrun_operator nx_local_items_op = {
    .size = sizeof(struct shmrun_operator),
    .flags = SHMRUN_OP_KEYED, /* key-bound state: check refuses unpartitioned inputs */
    .name = "nexmark_local_items",
    .summary = "NEXMark q3: auctions of `category` joined with their sellers in OR, ID or CA "
	       "(input = persons by key, auctions by key; key = person); key = person id, value "
	       "= name TAB city TAB state TAB auction; a record not of its input's kind fails "
	       "the job",
    .params = q3_params,
    .prepare = q3_prepare,
    .open = q3_open,
    .process = q3_process,
    .process_batch = q3_batch,
    .close = q3_close,
    .state_version = "1",
};

/* ---- q8: nexmark_new_users ------------------------------------------------------ */

#define Q8_ROW	    96 /* name (at most 64) TAB start (at most 20) */
#define Q8_NAME_MAX 64
#define PAIR_FIELDS 19 /* a person's 9, an auction's 10 */

struct q8 {
	int64_t size;	 /* ns */
	uint32_t lo, hi; /* as q3's */
	uint32_t n;
	struct shmrun_record out[BATCH_OUT];
	char row[BATCH_OUT][Q8_ROW];
};

static int q8_prepare(struct shmrun_task *task)
{
	if (shmrun_task_inputs(task) != 1) {
		shmrun_task_error(task,
				  "nexmark_new_users reads one input, a window_join of persons and "
				  "auctions, not %u",
				  shmrun_task_inputs(task));
		return -EINVAL;
	}
	return 0;
}

static int q8_open(struct shmrun_task *task, void **state)
{
	struct q8 *q = calloc(1, sizeof(*q));

	if (!q) {
		shmrun_task_error(task, "out of memory");
		return -ENOMEM;
	}
	q->size = (int64_t)shmrun_task_param_u64(task, "size", 10000000000ull);
	shmrun_task_vnode_range(task, &q->lo, &q->hi);
	*state = q;
	return 0;
}

static void q8_close(struct shmrun_task *task, void *state)
{
	(void)task;
	free(state);
}

static int q8_flush(struct shmrun_task *task, struct q8 *q)
{
	uint32_t n = q->n;

	q->n = 0;
	return n ? shmrun_emit_batch(task, q->out, n) : 0;
}

/*
 * Cut the pair @rec (person TAB auction, as window_join emits it) into the
 * person's fields *@p and the auction's *@a. Return: whether both are well
 * formed.
 */
static bool q8_split(const struct shmrun_record *rec, struct nx_fields *p, struct nx_fields *a)
{
	const char *v = rec->value, *end = v + rec->value_len, *t = v;

	for (unsigned i = 0; i < nx_fields_of(NX_PERSON); i++) { /* the TAB after the person */
		t = memchr(t, '\t', (size_t)(end - t));
		if (!t)
			return false;
		t++;
	}
	return nx_split(v, (uint32_t)(t - 1 - v), p) && p->kind == NX_PERSON &&
	       nx_split(t, (uint32_t)(end - t), a) && a->kind == NX_AUCTION;
}

/* A window_join pair of a person and an auction of one window. */
static int q8_pair(struct shmrun_task *task, struct q8 *q, const struct shmrun_record *rec)
{
	struct nx_fields p, a;
	uint64_t pt, at, *seen;
	int64_t end, start; /* the pair's window, ns */
	char *row, *t;
	uint32_t name;
	int err;

	if (!q8_split(rec, &p, &a) || !nx_u64(&p, NX_PERSON_TIME, &pt) ||
	    !nx_u64(&a, NX_AUCTION_TIME, &at) ||
	    __builtin_add_overflow(rec->event_time_ns, 1, &end) ||
	    __builtin_sub_overflow(end, q->size, &start))
		return nx_bad_record(task, rec, "a window_join pair of a person and an auction");
	if (!key_is(rec, &p, NX_PERSON_ID) || !key_is(rec, &a, NX_AUCTION_SELLER))
		return nx_bad_record(task, rec,
				     "a pair of a person and an auction it sells, keyed by the "
				     "person (key = person on both sources)");
	if ((err = nx_check_by_key(task, rec, q->lo, q->hi, BY_KEY_FIX)))
		return err;
	if (pt > INT64_MAX / 1000000 || at > INT64_MAX / 1000000 || (int64_t)pt * 1000000 < start ||
	    (int64_t)pt * 1000000 >= end || (int64_t)at * 1000000 < start ||
	    (int64_t)at * 1000000 >= end) {
		shmrun_task_error(task,
				  "person %.*s at %" PRIu64 " ms and auction at %" PRIu64
				  " ms are not in the window [%" PRId64 ", %" PRId64
				  ") ms that size = %" PRId64 " ms gives: set size equal to the "
				  "window_join's size",
				  (int)rec->key_len, (const char *)rec->key, pt, at,
				  start / 1000000, end / 1000000, q->size / 1000000);
		return -EILSEQ; /* the same input again: no restart cures it */
	}
	name = p.len[NX_PERSON_NAME];
	if (name > Q8_NAME_MAX)
		return nx_bad_record(task, rec, "a person with a name of at most 64 bytes");
	seen = shmrun_keyed_state_ns(task, rec->key, rec->key_len, (uint64_t)end, 8, true);
	if (!seen)
		return -ENOMEM;
	if (*seen)
		return 0; /* this person's row of this window is out already */
	*seen = 1;
	/* forget it when the watermark passes the window, just after its pairs */
	err = shmrun_timer_set(task, SHMRUN_TIME_EVENT, rec->key, rec->key_len, end - 1);
	if (err)
		return err;
	row = t = q->row[q->n];
	memcpy(t, p.f[NX_PERSON_NAME], name);
	t += name;
	*t++ = '\t';
	t = nx_put_u64(t, (uint64_t)(start / 1000000));
	q->out[q->n] = (struct shmrun_record){.key = rec->key,
					      .key_len = rec->key_len,
					      .value = row,
					      .value_len = (uint32_t)(t - row),
					      .event_time_ns = rec->event_time_ns};
	return ++q->n == BATCH_OUT ? q8_flush(task, q) : 0;
}

static int q8_batch(struct shmrun_task *task, void *state, const struct shmrun_record *recs,
		    uint32_t n)
{
	struct q8 *q = state;
	int err = 0;

	q->n = 0;
	for (uint32_t i = 0; i < n && !err; i++)
		err = q8_pair(task, q, &recs[i]);
	if (err) {
		q->n = 0;
		return err;
	}
	return q8_flush(task, q);
}

static int q8_process(struct shmrun_task *task, void *state, const struct shmrun_record *rec)
{
	return q8_batch(task, state, rec, 1);
}

static int q8_timer(struct shmrun_task *task, void *state, const void *key, uint32_t key_len,
		    int64_t time_ns, enum shmrun_time_domain domain)
{
	(void)state;
	if (domain == SHMRUN_TIME_EVENT && time_ns != INT64_MAX) /* (never set at INT64_MAX) */
		shmrun_keyed_state_delete(task, key, key_len, true, (uint64_t)(time_ns + 1));
	return 0;
}

static const struct shmrun_param_def q8_params[] = {
    {.key = "size",
     .type = SHMRUN_PARAM_DURATION,
     .def = "10s",
     .min = 1000000,
     .max = 31536000000000000ull,
     .doc = "the window_join's window length, to tell each window's start (NEXMark q8: 10s)"},
    {0},
};

const struct shmrun_operator nx_new_users_op = {
    .size = sizeof(struct shmrun_operator),
    .flags = SHMRUN_OP_KEYED, /* key-bound state: check refuses unpartitioned inputs */
    .name = "nexmark_new_users",
    .summary = "NEXMark q8: window_join's (person, auction) pairs of a tumbling window of `size` "
	       "reduced to one row per person and window; key = person id, value = name TAB "
	       "window start (ms); a record not such a pair fails the job",
    .params = q8_params,
    .prepare = q8_prepare,
    .open = q8_open,
    .process = q8_process,
    .process_batch = q8_batch,
    .on_timer = q8_timer,
    .close = q8_close,
    .state_version = "1",
};
