/*
 * runtime/timer.c: keyed timers (timer.h) — the store behind
 * shmrun_timer_set()/shmrun_timer_delete() and the firing passes the worker
 * calls when event time (the watermark) or processing time (the clock)
 * advances.
 *
 * Timers are key-bound state (Flink's InternalTimerService keeps them in the
 * key group of their key, and so does this): a task's timers live in a
 * struct shmrun_kv of their own, one hash table per vnode, so a checkpoint
 * writes them in the vnode's section of the state file and a rescale moves
 * them with the vnode (ckpt/state_file.h). One entry per timer:
 *
 *     stored key   key bytes || i64 time (LE) || u8 domain   (key_len + 9 bytes)
 *     value        u64 heap index, u64 XXH3-64 of the key bytes
 *     slot hash    XXH3-64 of the stored key; vnode: that of the key bytes
 *
 * The table is what makes a timer unique per (domain, key, time) — setting it
 * twice finds the entry — and what finds it to delete. Firing order comes from
 * one binary min-heap per domain of (time, entry) references, ordered by time,
 * then key bytes, then key length, so that due timers fire in time order and
 * ties in an order that depends on nothing but the timers (not on insertion,
 * hashing or the width a rescale chose). Each entry keeps its heap index, which
 * every sift updates, so a delete removes it from the middle of the heap in
 * O(log n). A deleted or fired timer's entry goes back to the store's free
 * lists (state.c), so a job that sets and fires timers for ever runs in the
 * memory of its peak.
 *
 * Firing (shmrun_timers_fire_event/processing()): while the earliest timer
 * is due, copy its key into fire_key, remove it from heap and table, then call
 * op->on_timer() — deleted first, so the callback may set the same timer
 * again (to repeat) and sees shmrun_task_timers() without it. The loop looks
 * at the heap's top again after every call, so a timer the callback set at or
 * before the limit fires in the same pass (as Flink's advanceWatermark()
 * does): one pass leaves nothing due, and a second call with the same limit
 * fires nothing. During the callback the task's current key is the timer's
 * (cur_key/cur_hash, task.h), so shmrun_keyed_state() on it does not hash
 * again.
 *
 * Invariants: heap[d].v[i].value's first word is i; every entry of the table
 * is in exactly one heap and vice versa; shmrun_timers_count() is the table's
 * keys; a firing pass of a task is never reentered (firing).
 *
 * Rejected: a timer wheel (Kafka's, Netty's) — event time jumps by whole
 * watermarks, often by hours at end of input, and processing-time timers of a
 * stream job are few; a wheel's cost per tick buys nothing here, while a heap
 * pops in O(log n) whatever the jump. One ordered tree per vnode (Flink's
 * RocksDB timers are ordered per key group, with a heap of the key groups'
 * heads) — the per-vnode order is needed for a merge across key groups
 * without loading them; here every timer is in memory and a rescale moves
 * raw sections, so one heap per task is simpler and as fast. Keeping timers
 * in the task's key-bound state table — their value size differs, and
 * shmrun_keyed_state_foreach() would show them to the operator.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "callback.h"
#include "shmrun/operator.h"
#include "shmrun/placement.h"
#include "task.h"
#include "timer.h"
#include "worker.h"

#define VALUE_BYTES 16u /* u64 heap index, u64 key hash */

/* ---- the heap -------------------------------------------------------------- */

static inline uint64_t *val_words(unsigned char *value)
{
	return (uint64_t *)(void *)value;
}

/* Whether timer @a fires before @b: time, then key bytes, then key length. */
static bool before(const struct shmrun_timers *tm, const struct shmrun_timer_ref *a,
		   const struct shmrun_timer_ref *b)
{
	const unsigned char *ka, *kb;
	uint32_t la, lb;
	int c;

	if (a->time != b->time)
		return a->time < b->time;
	ka = shmrun_kv_entry_key(&tm->kv, a->value, &la);
	kb = shmrun_kv_entry_key(&tm->kv, b->value, &lb);
	la -= SHMRUN_TIMER_SUFFIX;
	lb -= SHMRUN_TIMER_SUFFIX;
	c = memcmp(ka, kb, la < lb ? la : lb);
	return c ? c < 0 : la < lb;
}

static inline void heap_put(struct shmrun_timer_heap *h, uint64_t i, struct shmrun_timer_ref r)
{
	h->v[i] = r;
	val_words(r.value)[0] = i;
}

static void sift_up(const struct shmrun_timers *tm, struct shmrun_timer_heap *h, uint64_t i)
{
	struct shmrun_timer_ref r = h->v[i];

	while (i > 0) {
		uint64_t parent = (i - 1) / 2;

		if (!before(tm, &r, &h->v[parent]))
			break;
		heap_put(h, i, h->v[parent]);
		i = parent;
	}
	heap_put(h, i, r);
}

static void sift_down(const struct shmrun_timers *tm, struct shmrun_timer_heap *h, uint64_t i)
{
	struct shmrun_timer_ref r = h->v[i];

	for (;;) {
		uint64_t c = 2 * i + 1;

		if (c >= h->n)
			break;
		if (c + 1 < h->n && before(tm, &h->v[c + 1], &h->v[c]))
			c++;
		if (!before(tm, &h->v[c], &r))
			break;
		heap_put(h, i, h->v[c]);
		i = c;
	}
	heap_put(h, i, r);
}

static void heap_remove(const struct shmrun_timers *tm, struct shmrun_timer_heap *h, uint64_t i)
{
	struct shmrun_timer_ref last = h->v[--h->n];

	if (i == h->n)
		return;
	heap_put(h, i, last);
	if (i > 0 && before(tm, &h->v[i], &h->v[(i - 1) / 2]))
		sift_up(tm, h, i);
	else
		sift_down(tm, h, i);
}

/* ---- the store ------------------------------------------------------------- */

/* Grow *@buf to @n bytes at least. Return: 0 or -ENOMEM. */
static int grow(unsigned char **buf, uint32_t *cap, size_t n)
{
	unsigned char *p;
	size_t ncap = *cap ? *cap : 64;

	if (n <= *cap)
		return 0;
	while (ncap < n)
		ncap *= 2;
	if (ncap > UINT32_MAX)
		ncap = UINT32_MAX;
	p = realloc(*buf, ncap);
	if (!p)
		return -ENOMEM;
	*buf = p;
	*cap = (uint32_t)ncap;
	return 0;
}

/* The stored key of (@domain, @key, @time_ns) in tm->buf. Return: its length, or 0 for ENOMEM. */
static uint32_t compose(struct shmrun_timers *tm, enum shmrun_time_domain domain, const void *key,
			uint32_t key_len, int64_t time_ns)
{
	uint32_t n = key_len + SHMRUN_TIMER_SUFFIX;
	unsigned char d = (unsigned char)domain;

	if (grow(&tm->buf, &tm->buf_cap, n))
		return 0;
	if (key_len)
		memcpy(tm->buf, key, key_len);
	memcpy(tm->buf + key_len, &time_ns, 8); /* little-endian: state.h insists */
	tm->buf[key_len + 8] = d;
	return n;
}

int shmrun_timers_add(struct shmrun_timers *tm, uint32_t vnodes, uint32_t vnode, uint64_t key_hash,
		      enum shmrun_time_domain domain, const void *key, uint32_t key_len,
		      int64_t time_ns)
{
	struct shmrun_timer_heap *h;
	uint64_t before_keys;
	unsigned char *v;
	uint32_t n;
	int err;

	if ((unsigned)domain > SHMRUN_TIME_PROCESSING || key_len > UINT32_MAX - SHMRUN_TIMER_SUFFIX)
		return -EINVAL;
	if (!tm->kv.tables && shmrun_kv_init(&tm->kv, vnodes))
		return -ENOMEM;
	n = compose(tm, domain, key, key_len, time_ns);
	if (!n)
		return -ENOMEM;
	h = &tm->heap[domain];
	if (h->n == h->cap) {
		uint64_t ncap = h->cap ? h->cap * 2 : 64;
		struct shmrun_timer_ref *nv = realloc(h->v, ncap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		h->v = nv;
		h->cap = ncap;
	}
	before_keys = tm->kv.keys;
	v = shmrun_kv_get(&tm->kv, vnode, XXH3_64bits(tm->buf, n), tm->buf, n, VALUE_BYTES, true,
			  &err);
	if (!v)
		return err ? err : -ENOMEM;
	if (tm->kv.keys == before_keys)
		return 0; /* one timer per (domain, key, time) */
	val_words(v)[1] = key_hash;
	heap_put(h, h->n, (struct shmrun_timer_ref){time_ns, v});
	h->n++;
	sift_up(tm, h, h->n - 1);
	return 1;
}

int shmrun_timers_remove(struct shmrun_timers *tm, uint32_t vnode, enum shmrun_time_domain domain,
			 const void *key, uint32_t key_len, int64_t time_ns)
{
	unsigned char *v;
	uint64_t hash;
	uint32_t n;
	int err;

	if (!tm->kv.tables || (unsigned)domain > SHMRUN_TIME_PROCESSING ||
	    key_len > UINT32_MAX - SHMRUN_TIMER_SUFFIX)
		return -ENOENT;
	n = compose(tm, domain, key, key_len, time_ns);
	if (!n)
		return -ENOMEM;
	hash = XXH3_64bits(tm->buf, n);
	v = shmrun_kv_get(&tm->kv, vnode, hash, tm->buf, n, VALUE_BYTES, false, &err);
	if (!v)
		return -ENOENT;
	heap_remove(tm, &tm->heap[domain], val_words(v)[0]);
	return shmrun_kv_delete(&tm->kv, vnode, hash, tm->buf, n);
}

uint64_t shmrun_timers_vnode_count(const struct shmrun_timers *tm, uint32_t vnode)
{
	return tm->kv.tables ? shmrun_kv_vnode_keys(&tm->kv, vnode) : 0;
}

struct foreach_arg {
	int (*fn)(void *arg, enum shmrun_time_domain domain, const void *key, uint32_t key_len,
		  int64_t time_ns);
	void *arg;
};

static int foreach_entry(void *arg, const void *key, uint32_t key_len, void *value)
{
	struct foreach_arg *fa = arg;
	const unsigned char *k = key;
	uint32_t kl = key_len - SHMRUN_TIMER_SUFFIX;
	int64_t time_ns;

	(void)value;
	memcpy(&time_ns, k + kl, 8);
	return fa->fn(fa->arg, (enum shmrun_time_domain)k[kl + 8], key, kl, time_ns);
}

int shmrun_timers_foreach_in(struct shmrun_timers *tm, uint32_t vnode,
			     int (*fn)(void *arg, enum shmrun_time_domain domain, const void *key,
				       uint32_t key_len, int64_t time_ns),
			     void *arg)
{
	struct foreach_arg fa = {fn, arg};

	return tm->kv.tables ? shmrun_kv_foreach_in(&tm->kv, vnode, foreach_entry, &fa) : 0;
}

void shmrun_timers_free(struct shmrun_timers *tm)
{
	shmrun_kv_free(&tm->kv);
	free(tm->heap[0].v);
	free(tm->heap[1].v);
	free(tm->buf);
	free(tm->fire_key);
	memset(tm, 0, sizeof(*tm));
}

/* ---- the operator API ------------------------------------------------------- */

static uint64_t key_hash_of(struct shmrun_task *t, const void *key, uint32_t key_len)
{
	uint64_t h;

	if (!task_known_hash(t, key, key_len, &h))
		h = XXH3_64bits(key, key_len);
	return h;
}

int shmrun_timer_set(struct shmrun_task *t, enum shmrun_time_domain domain, const void *key,
		     uint32_t key_len, int64_t time_ns)
{
	uint64_t h;
	int r;

	if (!t->op->on_timer) {
		shmrun_task_error(t,
				  "shmrun_timer_set(): operator %s has no on_timer() to call "
				  "when the timer fires",
				  t->op->name);
		return -EINVAL;
	}
	if ((unsigned)domain > SHMRUN_TIME_PROCESSING) {
		shmrun_task_error(t,
				  "shmrun_timer_set(): time domain %u is neither "
				  "SHMRUN_TIME_EVENT nor SHMRUN_TIME_PROCESSING",
				  (unsigned)domain);
		return -EINVAL;
	}
	h = key_hash_of(t, key, key_len);
	r = shmrun_timers_add(&t->timers, t->vnodes, shmrun_placement_vnode_of_hash(h, t->vnodes),
			      h, domain, key, key_len, time_ns);
	if (r == -ENOMEM)
		shmrun_task_error(t, "out of memory for timers (%" PRIu64 " pending)",
				  shmrun_timers_count(&t->timers));
	else if (r < 0)
		shmrun_task_error(t, "shmrun_timer_set(): a key of %u bytes is too long", key_len);
	return r < 0 ? r : 0;
}

int shmrun_timer_delete(struct shmrun_task *t, enum shmrun_time_domain domain, const void *key,
			uint32_t key_len, int64_t time_ns)
{
	uint64_t h;

	if (!t->timers.kv.tables)
		return -ENOENT;
	h = key_hash_of(t, key, key_len);
	return shmrun_timers_remove(&t->timers, shmrun_placement_vnode_of_hash(h, t->vnodes),
				    domain, key, key_len, time_ns);
}

uint64_t shmrun_task_timers(const struct shmrun_task *t)
{
	return shmrun_timers_count(&t->timers);
}

/* ---- firing ------------------------------------------------------------------ */

/*
 * Pop and call every timer of @domain with time <= @limit, earliest first.
 * See the top of this file.
 */
static int fire(struct shmrun_task *t, enum shmrun_time_domain domain, int64_t limit)
{
	struct shmrun_timers *tm = &t->timers;
	struct shmrun_timer_heap *h = &tm->heap[domain];
	int err = 0;

	if (tm->firing)
		return 0;
	tm->firing = true;
	while (h->n && h->v[0].time <= limit) {
		struct shmrun_timer_ref top = h->v[0];
		const unsigned char *stored;
		const void *saved_key = t->cur_key;
		uint32_t saved_len = t->cur_key_len, stored_len, kl, vnode;
		uint64_t saved_hash = t->cur_hash, key_hash = val_words(top.value)[1], where;

		if (t->w && t->w->failed) {
			err = -ECANCELED;
			break;
		}
		if (!t->op->on_timer) {
			shmrun_task_error(t, "a timer is due, but operator %s has no on_timer()",
					  t->op->name);
			err = -EINVAL;
			break;
		}
		stored = shmrun_kv_entry_key(&tm->kv, top.value, &stored_len);
		kl = stored_len - SHMRUN_TIMER_SUFFIX;
		if (grow(&tm->fire_key, &tm->fire_cap, kl ? kl : 1)) {
			shmrun_task_error(t, "out of memory firing a timer");
			err = -ENOMEM;
			break;
		}
		memcpy(tm->fire_key, stored, kl);
		vnode = shmrun_placement_vnode_of_hash(key_hash, tm->kv.vnodes);
		heap_remove(tm, h, 0);
		shmrun_kv_delete(&tm->kv, vnode, XXH3_64bits(stored, stored_len), stored,
				 stored_len);
		t->cur_key = tm->fire_key;
		t->cur_key_len = kl;
		t->cur_hash = key_hash;
		where = cb_enter(t, SHMRUN_CB_ON_TIMER);
		err = t->op->on_timer(t, t->state, tm->fire_key, kl, top.time, domain);
		cb_leave(t, where);
		t->cur_key = saved_key;
		t->cur_key_len = saved_len;
		t->cur_hash = saved_hash;
		if (err) {
			if (!t->w->failed)
				shmrun_task_error(t, "on_timer() failed: %s", strerror(-err));
			note_fail_errno(t->w, err);
			break;
		}
	}
	tm->firing = false;
	return err;
}

int shmrun_timers_fire_event(struct shmrun_task *t, int64_t wm)
{
	return fire(t, SHMRUN_TIME_EVENT, wm);
}

int shmrun_timers_fire_processing(struct shmrun_task *t, int64_t now_ns)
{
	return fire(t, SHMRUN_TIME_PROCESSING, now_ns);
}

int64_t shmrun_timers_next_processing(const struct shmrun_task *t)
{
	const struct shmrun_timer_heap *h = &t->timers.heap[SHMRUN_TIME_PROCESSING];

	return h->n ? h->v[0].time : INT64_MAX;
}
