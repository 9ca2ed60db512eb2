/*
 * runtime/worker.c: the single-threaded loop of one worker process, and the
 * operator API's task functions.
 *
 * What it is for. A worker runs every task the plan placed on it, on one
 * thread, with no locks: forward edges are direct calls (operator chaining),
 * every other edge is a channel, one SPSC ring per (sender, receiver) pair.
 *
 * The loop:
 *
 *     for (;;) {
 *         drain overflows into their rings            (frames that found a ring full)
 *         for each task, downstream first:
 *             source: produce() a budget of records    unless parked
 *             others: read a budget of frames from each open input ring, unless parked
 *         publish every ring with pending commits      (one release store per ring)
 *         all tasks ended and nothing pending -> exit
 *         no progress -> idle (spin, then back off)
 *     }
 *
 * Never blocking on a full ring (docs/design.md §5). Two workers that each block
 * writing into the other's full ring while neither drains its own inbound ring
 * deadlock. So emit never waits: a frame that does not fit is appended to that
 * channel's overflow buffer and the task that produced it is *parked*: it gets
 * no more input until every channel downstream of it (through forward edges
 * too) has drained. The overflow of a parked task is bounded by what one input
 * record (or one produce() budget) expands to. The worker meanwhile keeps
 * reading other rings and running other tasks; the graph is acyclic, so the
 * most downstream tasks can always progress, and so, in turn, can everyone.
 *
 * Record encoding in a DATA frame's payload (host byte order, the same host):
 *
 *     [u32 key_len][u32 value_len][u64 key hash][i64 event_time_ns]?[key][value]
 *
 * The event time is present only when non-zero (frame flag REC_TIMED). The key
 * hash (XXH3-64 of the key, which picked the vnode and so the receiver) travels
 * along so the receiver's key-bound state does not hash the key again.
 *
 * A record larger than the ring's largest frame is rejected with an error
 * naming the stage and the size (no fragmentation: docs/topology.md says how
 * to raise ring_bytes).
 *
 * End of input: a task whose inputs have all ended calls end_of_input(), then
 * sends an END frame on each of its output channels and ends its forward
 * successors in turn. A consumer counts END frames, one per input channel.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "ckpt/ckpt_io.h"
#include "ckpt/coordinator.h"
#include "ckpt/manifest.h"
#include "ckpt/snapshot.h"
#include "ckpt/state_file.h"
#include "shmrun/placement.h"
#include "worker.h"

#define REC_HDR 16u    /* record header bytes before the optional time */
#define REC_TIMED 0x1u /* frame flag: an 8-byte event time follows the header */
#define PRODUCE_BUDGET 256u
#define READ_BUDGET 256u

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- operator API: task accessors ---------------------------------------- */

const char *shmrun_task_stage(const struct shmrun_task *t)
{
	return t->stage->name;
}

uint32_t shmrun_task_instance(const struct shmrun_task *t)
{
	return t->instance;
}

uint32_t shmrun_task_width(const struct shmrun_task *t)
{
	return t->width;
}

uint32_t shmrun_task_vnodes(const struct shmrun_task *t)
{
	return t->vnodes;
}

void shmrun_task_vnode_range(const struct shmrun_task *t, uint32_t *lo, uint32_t *hi)
{
	*lo = t->vnode_lo;
	*hi = t->vnode_hi;
}

uint32_t shmrun_task_vnode_of(const struct shmrun_task *t, const void *key, uint32_t len)
{
	return shmrun_placement_vnode_of_hash(XXH3_64bits(key, len), t->vnodes);
}

static const struct shmrun_param *find_param(const struct shmrun_task *t, const char *key)
{
	for (uint32_t i = 0; i < t->stage->nparams; i++)
		if (strcmp(t->stage->params[i].def->key, key) == 0)
			return &t->stage->params[i];
	return NULL;
}

const char *shmrun_task_param(const struct shmrun_task *t, const char *key)
{
	const struct shmrun_param *p = find_param(t, key);

	return p ? p->value : NULL;
}

uint64_t shmrun_task_param_u64(const struct shmrun_task *t, const char *key, uint64_t def)
{
	const struct shmrun_param *p = find_param(t, key);

	return p && p->value ? p->u64 : def;
}

bool shmrun_task_param_bool(const struct shmrun_task *t, const char *key, bool def)
{
	const struct shmrun_param *p = find_param(t, key);

	return p && p->value ? p->u64 != 0 : def;
}

/* Keep the first errno an operator failed with, for the launcher to judge
 * whether a restart can cure it (shmrun_errno_is_permanent()). */
void note_fail_errno(struct shmrun_worker *w, int err)
{
	int32_t none = 0;

	if (err < 0)
		atomic_compare_exchange_strong_explicit(&w->stats->fail_errno, &none, -err,
							memory_order_relaxed, memory_order_relaxed);
}

/* The whole first error of a quiet task (prepare, in the launcher): stats->error may cut it. */
static char *quiet_error;

static void task_verror(struct shmrun_task *t, const char *fmt, va_list ap)
{
	char *msg = NULL; /* whole: shmrun_log() cuts the middle of a very long line */

	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	if (!msg)
		msg = strdup(fmt);
	if (!msg)
		return;
	if (t->w) {
		/* the summary in shared memory may be cut short; the log line is whole */
		if (!t->w->failed && t->w->stats) {
			char *full = NULL;

			/* cut in the middle: the end says what to do */
			if (asprintf(&full, "stage '%s' [%u]: %s", t->stage->name, t->instance,
				     msg) >= 0) {
				shmrun_fit_middle(t->w->stats->error, sizeof(t->w->stats->error),
						  full);
				free(full);
			}
		}
		t->w->failed = true;
		if (t->w->quiet) {
			if (!quiet_error &&
			    asprintf(&quiet_error, "stage '%s' [%u]: %s", t->stage->name,
				     t->instance, msg) < 0)
				quiet_error = NULL;
			free(msg);
			return; /* the caller reports it (prepare) */
		}
	}
	shmrun_log(SHMRUN_LOG_ERROR, "stage '%s' [%u]: %s", t->stage->name, t->instance, msg);
	free(msg);
}

/* Log @fmt at @level tagged with the stage and instance, never cut at the end. */
static void task_vlog(struct shmrun_task *t, enum shmrun_log_level level, const char *fmt,
		      va_list ap)
{
	char *msg = NULL;

	if (vasprintf(&msg, fmt, ap) < 0)
		return;
	shmrun_log(level, "stage '%s' [%u]: %s", t->stage->name, t->instance, msg);
	free(msg);
}

void shmrun_task_error(struct shmrun_task *t, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	task_verror(t, fmt, ap);
	va_end(ap);
}

void shmrun_task_log(struct shmrun_task *t, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	task_vlog(t, SHMRUN_LOG_INFO, fmt, ap);
	va_end(ap);
}

const char *shmrun_task_conf_dir(const struct shmrun_task *t)
{
	return t->w && t->w->plan && t->w->plan->job ? t->w->plan->job->conf_dir : NULL;
}

void shmrun_task_warn(struct shmrun_task *t, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	task_vlog(t, SHMRUN_LOG_WARN, fmt, ap);
	va_end(ap);
}

void shmrun_task_count(struct shmrun_task *t, enum shmrun_counter counter, uint64_t n)
{
	if (counter == SHMRUN_COUNT_RECORDS_IN)
		t->records_in += n;
	else if (counter == SHMRUN_COUNT_RECORDS_OUT)
		t->records_out += n;
}

void *shmrun_keyed_state(struct shmrun_task *t, const void *key, uint32_t key_len,
			 uint32_t value_bytes, bool create)
{
	uint64_t h = key == t->cur_key && key_len == t->cur_key_len ? t->cur_hash
								     : XXH3_64bits(key, key_len);
	int err;
	void *v = shmrun_kv_get(&t->kv, shmrun_placement_vnode_of_hash(h, t->vnodes), h, key, key_len, value_bytes,
				create, &err);

	if (!v && err == -ENOMEM)
		shmrun_task_error(t, "out of memory for key-bound state (%" PRIu64 " keys, %" PRIu64
				     " bytes)", t->kv.keys, t->kv.bytes);
	else if (!v && err)
		shmrun_task_error(t, "key-bound state used with %u-byte values after %u-byte ones",
				  value_bytes, t->kv.value_bytes);
	return v;
}

int shmrun_keyed_state_foreach(struct shmrun_task *t,
			       int (*fn)(void *arg, const void *key, uint32_t key_len,
					 void *value),
			       void *arg)
{
	return shmrun_kv_foreach(&t->kv, fn, arg);
}

uint64_t shmrun_keyed_state_keys(const struct shmrun_task *t)
{
	return t->kv.keys;
}

/* ---- channels ------------------------------------------------------------ */

/* A frame's payload in up to four pieces (record header, time, key, value). */
struct pieces {
	const void *p[4];
	uint32_t n[4];
	uint32_t total;
	uint16_t flags; /* frame flags */
};

static void copy_pieces(unsigned char *dst, const struct pieces *pc)
{
	for (int i = 0; i < 4; i++)
		if (pc->n[i]) {
			memcpy(dst, pc->p[i], pc->n[i]);
			dst += pc->n[i];
		}
}

static bool chan_backlogged(const struct chan_out *c)
{
	return c->ovf_off < c->ovf_len;
}

static int ovf_append(struct chan_out *c, uint16_t kind, const struct pieces *pc)
{
	size_t need = 8 + (((size_t)pc->total + 7) & ~(size_t)7);

	if (c->ovf_off == c->ovf_len)
		c->ovf_off = c->ovf_len = 0;
	if (c->ovf_len + need > c->ovf_cap && c->ovf_off > 0) {
		memmove(c->ovf, c->ovf + c->ovf_off, c->ovf_len - c->ovf_off);
		c->ovf_len -= c->ovf_off;
		c->ovf_off = 0;
	}
	if (c->ovf_len + need > c->ovf_cap) {
		size_t cap = c->ovf_cap ? c->ovf_cap : 65536;
		unsigned char *n;

		while (c->ovf_len + need > cap)
			cap *= 2;
		n = realloc(c->ovf, cap);
		if (!n)
			return -ENOMEM;
		c->ovf = n;
		c->ovf_cap = cap;
	}
	if (c->ovf_off == c->ovf_len)
		c->w->backlogged++; /* this channel becomes backlogged */
	memcpy(c->ovf + c->ovf_len, &pc->total, 4);
	memcpy(c->ovf + c->ovf_len + 4, &kind, 2);
	memcpy(c->ovf + c->ovf_len + 6, &pc->flags, 2);
	copy_pieces(c->ovf + c->ovf_len + 8, pc);
	c->ovf_len += need;
	return 0;
}

/* Write one frame, or queue it behind a full ring (never waits). */
static int chan_put(struct chan_out *c, uint16_t kind, const struct pieces *pc)
{
	struct shmrun_frame *f;
	int err;

	if (!chan_backlogged(c)) {
		err = shmrun_ring_reserve(&c->ring, pc->total, &f);
		if (err == 0) {
			f->kind = kind;
			f->flags = pc->flags;
			f->src_task = c->src_task;
			f->dst_task = c->dst_task;
			copy_pieces(f->payload, pc);
			return shmrun_ring_commit(&c->ring, f);
		}
		if (err != -EAGAIN)
			return err;
	}
	return ovf_append(c, kind, pc);
}

/* Move queued frames into the ring while they fit. Return: frames moved. */
static uint32_t chan_drain(struct chan_out *c)
{
	uint32_t moved = 0;

	while (chan_backlogged(c)) {
		unsigned char *p = c->ovf + c->ovf_off;
		struct shmrun_frame *f;
		uint32_t len;
		uint16_t kind, flags;

		memcpy(&len, p, 4);
		memcpy(&kind, p + 4, 2);
		memcpy(&flags, p + 6, 2);
		if (shmrun_ring_reserve(&c->ring, len, &f) != 0)
			break;
		f->kind = kind;
		f->flags = flags;
		f->src_task = c->src_task;
		f->dst_task = c->dst_task;
		memcpy(f->payload, p + 8, len);
		shmrun_ring_commit(&c->ring, f);
		c->ovf_off += 8 + (((size_t)len + 7) & ~(size_t)7);
		moved++;
	}
	if (moved && !chan_backlogged(c))
		c->w->backlogged--;
	return moved;
}

/* Whether @t (or a forward successor) has output queued behind a full ring. */
static bool task_parked_slow(const struct shmrun_task *t)
{
	for (uint32_t o = 0; o < t->nouts; o++) {
		const struct out_edge *e = &t->outs[o];

		if (e->kind == SHMRUN_EDGE_FORWARD) {
			if (e->forward->fwd_held || task_parked_slow(e->forward))
				return true;
			continue;
		}
		for (uint32_t j = 0; j < e->nchans; j++)
			if (chan_backlogged(e->chans[j]))
				return true;
	}
	return false;
}

static inline bool task_parked(const struct shmrun_task *t)
{
	return (t->w->backlogged || t->w->fwd_holds) && task_parked_slow(t);
}

/* ---- emit and delivery ----------------------------------------------------- */

/* Hand @rec to @t. @hash is the key's hash when @hashed (it came off a ring). */
static int task_end(struct shmrun_task *t, uint64_t e, bool stop);
static int task_checkpoint(struct shmrun_task *t, uint64_t e);
static void task_unhold(struct shmrun_task *t);
static int deliver_barrier(struct shmrun_task *t, uint64_t e, bool forward);

static int deliver(struct shmrun_task *t, const struct shmrun_record *rec, uint64_t hash,
		   bool hashed)
{
	int err;

	if (t->w->failed)
		return -ECANCELED;
	t->cur_key = hashed ? rec->key : NULL;
	t->cur_key_len = rec->key_len;
	t->cur_hash = hash;
	err = t->op->process(t, t->state, rec);
	t->cur_key = NULL;
	if (err && !t->w->failed)
		shmrun_task_error(t, "process failed: %s", strerror(-err));
	if (err && t->w->stats)
		note_fail_errno(t->w, err);
	return err;
}

static int emit_edges(struct shmrun_task *t, const struct shmrun_record *rec);

int shmrun_emit(struct shmrun_task *t, const struct shmrun_record *rec)
{
	/* the common chain: one forward edge, a direct call */
	if (t->nouts == 1 && t->outs[0].kind == SHMRUN_EDGE_FORWARD)
		return deliver(t->outs[0].forward, rec, 0, false);
	return emit_edges(t, rec);
}

/*
 * A DATA frame of @rec on channel @c: written straight into the ring in the
 * common case (fixed-size copies the compiler inlines), queued behind a full
 * or already backlogged ring otherwise. @total fits the ring (checked).
 */
static int put_record(struct chan_out *c, const unsigned char *hdr,
		      const struct shmrun_record *rec, bool timed, uint32_t total)
{
	struct shmrun_frame *f;

	if (__builtin_expect(!chan_backlogged(c), 1) &&
	    shmrun_ring_reserve(&c->ring, total, &f) == 0) {
		unsigned char *p = f->payload;

		f->kind = SHMRUN_FRAME_DATA;
		f->flags = timed ? REC_TIMED : 0;
		f->src_task = c->src_task;
		f->dst_task = c->dst_task;
		memcpy(p, hdr, REC_HDR);
		p += REC_HDR;
		if (timed) {
			memcpy(p, &rec->event_time_ns, 8);
			p += 8;
		}
		if (rec->key_len) {
			memcpy(p, rec->key, rec->key_len);
			p += rec->key_len;
		}
		if (rec->value_len)
			memcpy(p, rec->value, rec->value_len);
		return shmrun_ring_commit(&c->ring, f);
	}
	{
		struct pieces pc = {
			.p = {hdr, &rec->event_time_ns, rec->key, rec->value},
			.n = {REC_HDR, timed ? 8 : 0, rec->key_len, rec->value_len},
			.total = total,
			.flags = timed ? REC_TIMED : 0,
		};

		return ovf_append(c, SHMRUN_FRAME_DATA, &pc);
	}
}

/*
 * Say why @rec (@total bytes with its framing) does not fit @e's rings, and
 * what to do that is true: the smallest ring_bytes that would hold it, or,
 * past the largest ring, that no ring ever will (a frame is at most half a
 * ring: shmrun_ring_max_payload()).
 */
static void record_too_large(struct shmrun_task *t, const struct out_edge *e,
			     const struct shmrun_record *rec, uint64_t total)
{
	uint64_t cap = e->chans[0]->ring.capacity, need = cap;
	uint64_t framing = total - rec->key_len - rec->value_len;
	uint64_t largest = SHMRUN_RING_MAX_CAPACITY / 2 - SHMRUN_FRAME_HEADER;

	while (need < SHMRUN_RING_MAX_CAPACITY && need / 2 - SHMRUN_FRAME_HEADER < total)
		need *= 2;
	if (total <= largest)
		shmrun_task_error(t,
				  "record of %" PRIu64 " bytes (key %u + value %u + %" PRIu64
				  " of framing) does not fit a ring of ring_bytes=%" PRIu64
				  " (largest record: %u bytes); raise ring_bytes in [job] to at "
				  "least %" PRIu64 "%s",
				  total, rec->key_len, rec->value_len, framing, cap, e->max_payload,
				  need >= (1u << 20) ? need >> 20 : need >> 10,
				  need >= (1u << 20) ? "M" : "K");
	else
		shmrun_task_error(
		    t,
		    "record of %" PRIu64 " bytes (key %u + value %u + %" PRIu64
		    " of framing) can never fit a ring: the largest record is %" PRIu64
		    " bytes (key + value at most %" PRIu64 "), even at the maximum "
		    "ring_bytes = 1G; split the record into smaller ones (for a "
		    "file_source: shorten its lines, one line is one record)",
		    total, rec->key_len, rec->value_len, framing, largest, largest - framing);
}

static int emit_edges(struct shmrun_task *t, const struct shmrun_record *rec)
{
	unsigned char hdr[REC_HDR];
	bool timed = rec->event_time_ns != 0;
	uint64_t total = (uint64_t)REC_HDR + (timed ? 8 : 0) + rec->key_len + rec->value_len;
	uint64_t hash = 0;
	bool hashed = false;
	int err = 0;

	for (uint32_t o = 0; o < t->nouts && !err; o++) {
		struct out_edge *e = &t->outs[o];
		uint32_t j, lo, hi;

		if (e->kind == SHMRUN_EDGE_FORWARD) {
			err = deliver(e->forward, rec, 0, false);
			continue;
		}
		if (total > e->max_payload) {
			record_too_large(t, e, rec, total);
			if (t->w && t->w->stats)
				note_fail_errno(t->w, -EMSGSIZE); /* a restart makes it again */
			return -EMSGSIZE;
		}
		if (!hashed) {
			hash = XXH3_64bits(rec->key, rec->key_len);
			memcpy(hdr, &rec->key_len, 4);
			memcpy(hdr + 4, &rec->value_len, 4);
			memcpy(hdr + 8, &hash, 8);
			hashed = true;
		}
		switch (e->kind) {
		case SHMRUN_EDGE_SHUFFLE:
			lo = e->instance_of_vnode[shmrun_placement_vnode_of_hash(hash, t->vnodes)];
			hi = lo + 1;
			break;
		case SHMRUN_EDGE_REBALANCE:
			lo = e->rr;
			hi = lo + 1;
			e->rr = e->rr + 1 == e->nchans ? 0 : e->rr + 1;
			break;
		default:
			lo = 0;
			hi = e->nchans;
			break;
		}
		for (j = lo; j < hi && !err; j++)
			err = put_record(e->chans[j], hdr, rec, timed, (uint32_t)total);
		if (err)
			shmrun_task_error(t, "cannot queue output behind a full ring: %s",
					  strerror(-err));
	}
	return err;
}

/*
 * End of input for @t: final emits (unless the job is stopping), the snapshot
 * of the final epoch @e (0 without checkpoints), then END(@e) on every channel
 * and the end of each forward successor. END is the final epoch's barrier: it
 * comes after everything the task emitted, so the last checkpoint holds it all.
 */
static int task_end(struct shmrun_task *t, uint64_t e, bool stop)
{
	struct {
		uint64_t epoch;
		uint32_t stop, pad;
	} end = {e, stop, 0};
	struct pieces pc = {.p = {&end}, .n = {sizeof(end)}, .total = sizeof(end)};
	int err = 0;

	if (t->op->end_of_input && !stop)
		err = t->op->end_of_input(t, t->state);
	if (err) {
		if (!t->w->failed)
			shmrun_task_error(t, "end of input failed: %s", strerror(-err));
		note_fail_errno(t->w, err);
		return err;
	}
	if (e)
		err = shmrun_snapshot_take(t, e);
	if (err)
		return err;
	task_unhold(t);
	t->ended = true;
	for (uint32_t o = 0; o < t->nouts && !err; o++) {
		struct out_edge *oe = &t->outs[o];

		if (oe->kind == SHMRUN_EDGE_FORWARD) {
			if (--oe->forward->inputs_open == 0)
				err = task_end(oe->forward, e, stop);
			continue;
		}
		for (uint32_t j = 0; j < oe->nchans && !err; j++)
			err = chan_put(oe->chans[j], SHMRUN_FRAME_END, &pc);
	}
	return err;
}

/* Read up to READ_BUDGET frames from one input channel of @t. Return: frames read. */
static uint32_t read_channel(struct shmrun_task *t, struct chan_in *in)
{
	const struct shmrun_frame *f;
	uint32_t n = 0;
	int err;

	while (n < READ_BUDGET && !t->w->failed && !task_parked(t)) {
		err = shmrun_ring_peek(&in->ring, &f);
		if (err == -EAGAIN)
			break;
		if (err) {
			shmrun_task_error(t, "corrupt frame on an input ring (%s)", strerror(-err));
			break;
		}
		n++;
		if (f->kind == SHMRUN_FRAME_DATA) {
			struct shmrun_record rec = {.event_time_ns = 0};
			uint32_t kl, vl, hl = REC_HDR;
			uint64_t hash;

			memcpy(&kl, f->payload, 4);
			memcpy(&vl, f->payload + 4, 4);
			memcpy(&hash, f->payload + 8, 8);
			if (f->flags & REC_TIMED) {
				memcpy(&rec.event_time_ns, f->payload + REC_HDR, 8);
				hl += 8;
			}
			if ((uint64_t)hl + kl + vl != f->len) {
				shmrun_task_error(t, "corrupt record frame from task %u", f->src_task);
				break;
			}
			rec.key = f->payload + hl;
			rec.key_len = kl;
			rec.value = f->payload + hl + kl;
			rec.value_len = vl;
			deliver(t, &rec, hash, true);
		} else if (f->kind == SHMRUN_FRAME_END) {
			uint64_t e = 0;
			uint32_t stop = 0;

			if (f->len >= 12) {
				memcpy(&e, f->payload, 8);
				memcpy(&stop, f->payload + 8, 4);
			}
			in->ended = true;
			shmrun_ring_release(&in->ring, f);
			if (--t->inputs_open == 0)
				task_end(t, e, stop);
			break;
		} else if (f->kind == SHMRUN_FRAME_BARRIER) {
			uint64_t e = 0;

			if (f->len >= 8)
				memcpy(&e, f->payload, 8);
			shmrun_ring_release(&in->ring, f);
			if (e > t->barrier_epoch &&
			    e > atomic_load_explicit(&t->w->ctl->aborted_epoch, memory_order_acquire)) {
				in->held = e; /* hold this channel until every input has e */
				deliver_barrier(t, e, false);
			}
			break;
		}
		shmrun_ring_release(&in->ring, f);
	}
	return n;
}

/* ---- checkpoints -------------------------------------------------------------- */

int shmrun_pw_add(struct shmrun_task *t, const void *entry, uint32_t len)
{
	size_t need = 4 + (size_t)len;

	if (!t->in_snapshot)
		return -EINVAL;
	if (t->pw_len + need > t->pw_cap) {
		size_t cap = t->pw_cap ? t->pw_cap : 256;
		unsigned char *n;

		while (t->pw_len + need > cap)
			cap *= 2;
		n = realloc(t->pw, cap);
		if (!n)
			return -ENOMEM;
		t->pw = n;
		t->pw_cap = cap;
	}
	memcpy(t->pw + t->pw_len, &len, 4);
	if (len)
		memcpy(t->pw + t->pw_len + 4, entry, len);
	t->pw_len += need;
	t->pw_n++;
	return 0;
}

int shmrun_task_sync_fd(struct shmrun_task *t, int fd)
{
	if (!t->in_snapshot)
		return -EINVAL;
	if (t->nsync == t->sync_cap) {
		uint32_t cap = t->sync_cap ? t->sync_cap * 2 : 4;
		int *n = realloc(t->sync_fds, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		t->sync_fds = n;
		t->sync_cap = cap;
	}
	t->sync_fds[t->nsync++] = fd;
	return 0;
}

bool shmrun_task_checkpointing(const struct shmrun_task *t)
{
	return t->w && t->w->checkpointing;
}

uint64_t shmrun_task_restored_epoch(const struct shmrun_task *t)
{
	return t->w && t->w->ctl ? t->w->ctl->restored_epoch : 0;
}

bool shmrun_task_restoring(const struct shmrun_task *t)
{
	return t->restoring;
}

static void task_unhold(struct shmrun_task *t)
{
	for (uint32_t i = 0; i < t->nins; i++)
		t->ins[i]->held = 0;
	if (t->fwd_held)
		t->w->fwd_holds--;
	t->fwd_held = false;
	t->align_epoch = 0;
	t->aligned = 0;
}

static int deliver_barrier(struct shmrun_task *t, uint64_t e, bool forward);

/* @t is aligned on barrier(@e): snapshot it and send the barrier on. */
static int task_checkpoint(struct shmrun_task *t, uint64_t e)
{
	struct pieces pc = {.p = {&e}, .n = {8}, .total = 8};
	int err = shmrun_snapshot_take(t, e);

	task_unhold(t);
	for (uint32_t o = 0; o < t->nouts && !err; o++) {
		struct out_edge *oe = &t->outs[o];

		if (oe->kind == SHMRUN_EDGE_FORWARD) {
			err = deliver_barrier(oe->forward, e, true);
			continue;
		}
		for (uint32_t j = 0; j < oe->nchans && !err; j++)
			err = chan_put(oe->chans[j], SHMRUN_FRAME_BARRIER, &pc);
	}
	return err;
}

/* Inputs of @t that still deliver barriers: open ring channels and forward inputs. */
static uint32_t barrier_inputs(const struct shmrun_task *t)
{
	uint32_t n = t->fwd_inputs;

	for (uint32_t i = 0; i < t->nins; i++)
		n += !t->ins[i]->ended;
	return n;
}

/*
 * Barrier(@e) arrived at @t on one input (a ring channel, already marked held
 * by the caller, or a forward input). Aligned on every input -> checkpoint.
 */
static int deliver_barrier(struct shmrun_task *t, uint64_t e, bool forward)
{
	struct shmrun_worker *w = t->w;

	if (e <= t->barrier_epoch ||
	    e <= atomic_load_explicit(&w->ctl->aborted_epoch, memory_order_acquire))
		return 0; /* stale: an aborted epoch's barrier */
	if (t->align_epoch != e) {
		/* a newer epoch: whatever was aligned before was aborted */
		uint64_t keep = forward ? 0 : e;

		for (uint32_t i = 0; i < t->nins; i++)
			if (t->ins[i]->held != keep)
				t->ins[i]->held = 0;
		if (t->fwd_held)
			w->fwd_holds--;
		t->fwd_held = false;
		t->align_epoch = e;
		t->aligned = 0;
		for (uint32_t i = 0; i < t->nins; i++)
			t->aligned += t->ins[i]->held == e;
		if (!forward)
			t->aligned = t->aligned ? t->aligned - 1 : 0; /* counted below */
	}
	if (forward) {
		t->fwd_held = true;
		w->fwd_holds++;
	}
	if (++t->aligned < barrier_inputs(t))
		return 0;
	return task_checkpoint(t, e);
}

/* Drop an alignment whose epoch was aborted. */
static void drop_aborted(struct shmrun_task *t)
{
	if (t->align_epoch &&
	    t->align_epoch <= atomic_load_explicit(&t->w->ctl->aborted_epoch, memory_order_acquire))
		task_unhold(t);
}

/* A source: inject the barrier of a newly triggered epoch, end after the final one. */
static int source_barrier(struct shmrun_task *t)
{
	struct shmrun_control *ctl = t->w->ctl;
	/* acquire: pairs with the release store of trigger_epoch in
	 * shmrun_coordinate(); final_epoch is visible with it. */
	uint64_t e = atomic_load_explicit(&ctl->trigger_epoch, memory_order_acquire);
	int err;

	if (e <= t->barrier_epoch)
		return 0;
	if (e == atomic_load_explicit(&ctl->final_epoch, memory_order_acquire))
		err = task_end(t, e, atomic_load_explicit(&ctl->final_is_stop, memory_order_acquire));
	else
		err = task_checkpoint(t, e);
	return err ? err : 1;
}

/* Sinks: commit every epoch up to the newest complete one. */
static uint32_t commit_epochs(struct shmrun_worker *w)
{
	/* acquire: pairs with the release store of complete_epoch by the
	 * MANIFEST writer; the checkpoint is durable. */
	uint64_t done = atomic_load_explicit(&w->ctl->complete_epoch, memory_order_acquire);

	if (done <= w->committed_epoch)
		return 0;
	w->committed_epoch = done;
	for (uint32_t x = 0; x < w->ntasks; x++) {
		struct shmrun_task *t = &w->tasks[x];

		int err = t->op->commit && t->opened ? t->op->commit(t, t->state, done) : 0;

		if (err && !w->failed)
			shmrun_task_error(t, "commit of epoch %" PRIu64 " failed", done);
		if (err)
			note_fail_errno(w, err);
	}
	return 1;
}

/*
 * Reap finished children: the MANIFEST child goes to the coordinator, a
 * snapshot writer to ckpt/snapshot.c (one that died without reporting fails
 * its epoch there, at once, instead of at checkpoint_timeout).
 */
static void reap_children(struct shmrun_worker *w)
{
	int status;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
		if (!shmrun_coordinator_reaped(&w->co, pid))
			shmrun_snapshot_reaped(w, pid, status);
}

/* ---- setup ----------------------------------------------------------------- */

/* The index in @outs/@ins arrays of the handle on segment ring @c, or -1. */
static struct chan_out *find_out(struct shmrun_worker *w, uint32_t c)
{
	void *mem = shmrun_segment_ring(w->seg, c, NULL);

	for (uint32_t y = 0; y < w->nouts; y++)
		if ((void *)w->outs[y].ring.sh == mem)
			return &w->outs[y];
	return NULL;
}

static struct chan_in *find_in(struct shmrun_worker *w, uint32_t c)
{
	void *mem = shmrun_segment_ring(w->seg, c, NULL);

	for (uint32_t y = 0; y < w->nins; y++)
		if ((void *)w->ins[y].ring.sh == mem)
			return &w->ins[y];
	return NULL;
}

static int wire_task(struct shmrun_worker *w, struct shmrun_task *t, const uint32_t *task_slot)
{
	const struct shmrun_plan *p = w->plan;
	const struct shmrun_job *job = p->job;
	uint32_t stage = p->tasks[t->id].stage, nin = 0;

	for (uint32_t e = 0; e < job->nedges; e++) {
		const struct shmrun_edge *ed = &job->edges[e];

		if (ed->from == stage)
			t->nouts++;
		if (ed->to == stage && ed->kind != SHMRUN_EDGE_FORWARD)
			nin += job->stages[ed->from].width;
	}
	t->outs = calloc(t->nouts + 1, sizeof(*t->outs));
	t->ins = calloc(nin + 1, sizeof(*t->ins));
	if (!t->outs || !t->ins)
		return -ENOMEM;
	t->nouts = 0;
	for (uint32_t e = 0; e < job->nedges; e++) {
		const struct shmrun_edge *ed = &job->edges[e];
		const struct shmrun_stage *to = &job->stages[ed->to];
		struct out_edge *oe;

		if (ed->to == stage && ed->kind == SHMRUN_EDGE_FORWARD) {
			t->inputs_open++;
			t->fwd_inputs++;
		}
		else if (ed->to == stage)
			for (uint32_t i = 0; i < job->stages[ed->from].width; i++) {
				t->ins[t->nins++] =
					find_in(w, shmrun_plan_channel_of(p, e, i, t->instance));
				t->inputs_open++;
			}
		if (ed->from != stage)
			continue;
		oe = &t->outs[t->nouts++];
		oe->kind = ed->kind;
		if (ed->kind == SHMRUN_EDGE_FORWARD) {
			oe->forward = &w->tasks[task_slot[p->stage_task0[ed->to] + t->instance]];
			continue;
		}
		oe->nchans = to->width;
		oe->chans = calloc(to->width, sizeof(*oe->chans));
		if (!oe->chans)
			return -ENOMEM;
		for (uint32_t j = 0; j < to->width; j++)
			oe->chans[j] = find_out(w, shmrun_plan_channel_of(p, e, t->instance, j));
		oe->max_payload = shmrun_ring_max_payload(&oe->chans[0]->ring);
		if (ed->kind == SHMRUN_EDGE_SHUFFLE) {
			oe->instance_of_vnode = malloc(job->vnodes * sizeof(uint32_t));
			if (!oe->instance_of_vnode)
				return -ENOMEM;
			for (uint32_t v = 0; v < job->vnodes; v++)
				oe->instance_of_vnode[v] =
					shmrun_placement_instance_of_vnode(v, to->width, job->vnodes);
		}
	}
	return 0;
}

static int setup(struct shmrun_worker *w)
{
	const struct shmrun_plan *p = w->plan;
	const struct shmrun_job *job = p->job;
	uint32_t *task_slot = NULL;
	int err = -ENOMEM;

	w->outs = calloc(p->nchannels + 1, sizeof(*w->outs));
	w->ins = calloc(p->nchannels + 1, sizeof(*w->ins));
	w->tasks = calloc(p->ntasks + 1, sizeof(*w->tasks));
	task_slot = malloc((p->ntasks + 1) * sizeof(*task_slot));
	if (!w->outs || !w->ins || !task_slot || !w->tasks)
		goto out;
	err = 0; /* a worker may have no task and no ring at all: it idles */

	/* This worker's tasks in topological order of their stages: the loop
	 * walks them in reverse, downstream first, so rings drain before
	 * sources fill them further. */
	for (uint32_t x = 0; x < job->nstages; x++) {
		uint32_t s = job->topo[x];

		for (uint32_t i = 0; i < job->stages[s].width; i++) {
			uint32_t id = p->stage_task0[s] + i;
			const struct shmrun_plan_task *pt = &p->tasks[id];
			struct shmrun_task *t;

			task_slot[id] = UINT32_MAX;
			if (pt->worker != w->index)
				continue;
			task_slot[id] = w->ntasks;
			t = &w->tasks[w->ntasks++];
			t->id = id;
			t->stage = &job->stages[s];
			t->op = t->stage->op;
			t->instance = pt->instance;
			t->width = t->stage->width;
			t->vnodes = job->vnodes;
			t->vnode_lo = pt->vnode_lo;
			t->vnode_hi = pt->vnode_hi;
			t->w = w;
			/* looked up once: source_budget() runs every loop turn */
			t->rate = shmrun_task_param_u64(t, "rate", 0);
			t->rate_slot = &w->slots[p->stage_task0[s]];
			if (shmrun_kv_init(&t->kv, job->vnodes))
				goto out;
		}
	}
	/* Each ring this worker touches, attached on the side it plays. */
	for (uint32_t c = 0; c < p->nchannels; c++) {
		const struct shmrun_plan_channel *ch = &p->channels[c];
		size_t len;
		void *mem = shmrun_segment_ring(w->seg, c, &len);

		if (p->tasks[ch->src_task].worker == w->index) {
			struct chan_out *o = &w->outs[w->nouts++];

			err = shmrun_ring_attach(&o->ring, mem, len, SHMRUN_RING_PRODUCER);
			if (err)
				goto out;
			o->src_task = ch->src_task;
			o->dst_task = ch->dst_task;
			o->w = w;
			shmrun_ring_set_wake_bell(
				&o->ring, &w->all_stats[p->tasks[ch->dst_task].worker].bell);
		}
		if (p->tasks[ch->dst_task].worker == w->index) {
			struct chan_in *in = &w->ins[w->nins++];

			err = shmrun_ring_attach(&in->ring, mem, len, SHMRUN_RING_CONSUMER);
			if (err)
				goto out;
			shmrun_ring_set_wake_bell(
				&in->ring, &w->all_stats[p->tasks[ch->src_task].worker].bell);
		}
	}
	for (uint32_t x = 0; x < w->ntasks; x++) {
		err = wire_task(w, &w->tasks[x], task_slot);
		if (err)
			goto out;
	}
	if (w->ctl->restored_epoch)
		err = shmrun_snapshot_restore(w);
out:
	free(task_slot);
	return err;
}

static void teardown(struct shmrun_worker *w)
{
	for (uint32_t x = 0; x < w->ntasks; x++) {
		struct shmrun_task *t = &w->tasks[x];

		if (t->opened && t->op->close)
			t->op->close(t, t->state);
		for (uint32_t o = 0; o < t->nouts && t->outs; o++) {
			free(t->outs[o].chans);
			free(t->outs[o].instance_of_vnode);
		}
		free(t->outs);
		free(t->ins);
		free(t->pw);
		free(t->sync_fds);
		free(t->restore_pw);
		shmrun_kv_free(&t->kv);
	}
	for (uint32_t c = 0; c < w->nouts; c++) {
		shmrun_ring_detach(&w->outs[c].ring);
		free(w->outs[c].ovf);
	}
	for (uint32_t c = 0; c < w->nins; c++)
		shmrun_ring_detach(&w->ins[c].ring);
	free(w->tasks);
	free(w->outs);
	free(w->ins);
	free(w->stalls);
	free(w->children);
	free(w->co.pw_history);
	free(w->co.beats);
}

/* ---- the loop --------------------------------------------------------------- */

/*
 * Rate limits. A stage's `rate` key is records per second for the whole
 * stage, whatever its width and however its pieces fell: every instance, on
 * any worker, takes tokens from one counter in the slot of the stage's
 * instance 0 in the shared control area. Since the stage's first token
 * (rate_start_ns), (now - start) * rate + 1 tokens are due; an instance
 * takes up to PRODUCE_BUDGET of those not yet taken, and gives back what
 * produce() did not use, so an instance that has finished (or is parked)
 * leaves the whole rate to the others, and a stage behind (parked, or
 * starting) catches up in PRODUCE_BUDGET steps. The counter lives as long as
 * the run's control area: a restart starts the pace again.
 */

/* Tokens due for @t's stage at @now since its first one (at least 1). */
static uint64_t rate_due(const struct shmrun_task *t, int64_t start, int64_t now)
{
	double due = (double)(now - start) * (double)t->rate / 1e9 + 1;

	return due < 1e18 ? (uint64_t)due : (uint64_t)1e18;
}

/* How many records source @t may produce now (tokens taken: see rate_return()). */
static int source_budget(struct shmrun_task *t, int64_t now)
{
	struct shmrun_task_slot *rs = t->rate_slot;
	int64_t start, zero = 0;
	uint64_t due, taken, k;

	if (!t->rate)
		return (int)PRODUCE_BUDGET;
	start = atomic_load_explicit(&rs->rate_start_ns, memory_order_relaxed);
	if (!start) {
		/* relaxed: the first instance of the stage to produce starts the pace */
		if (atomic_compare_exchange_strong_explicit(&rs->rate_start_ns, &zero, now,
							    memory_order_relaxed,
							    memory_order_relaxed))
			start = now;
		else
			start = zero;
	}
	due = rate_due(t, start, now);
	taken = atomic_load_explicit(&rs->rate_taken, memory_order_relaxed);
	do {
		if (taken >= due)
			return 0;
		k = due - taken < PRODUCE_BUDGET ? due - taken : PRODUCE_BUDGET;
	} while (!atomic_compare_exchange_weak_explicit(&rs->rate_taken, &taken, taken + k,
							memory_order_relaxed, memory_order_relaxed));
	return (int)k;
}

/* Give back the tokens of @t's budget @took that produce() did not use (@used). */
static void rate_return(struct shmrun_task *t, uint64_t took, uint64_t used)
{
	if (t->rate && used < took)
		atomic_fetch_sub_explicit(&t->rate_slot->rate_taken, took - used,
					  memory_order_relaxed);
}

/* ns from @now until rate-limited source @t's next token is due; 0 if due now. */
static int64_t rate_wait_ns(const struct shmrun_task *t, int64_t now)
{
	const struct shmrun_task_slot *rs = t->rate_slot;
	int64_t start = atomic_load_explicit(&rs->rate_start_ns, memory_order_relaxed);
	uint64_t taken = atomic_load_explicit(&rs->rate_taken, memory_order_relaxed);
	double at;

	if (!start)
		return 0;
	/* token taken + 1 is due once (now - start) * rate / 1e9 + 1 >= taken + 1 */
	at = (double)start + (double)taken * 1e9 / (double)t->rate - (double)now;
	if (at <= 0)
		return 0;
	return at < 1e10 ? (int64_t)at + 1 : (int64_t)10000000000; /* at most 10 s */
}

/* ---- flushing held output (op->flush) ------------------------------------- */

#define FLUSH_DEFAULT_NS 100000000 /* flush_interval of an operator that declares none */
#define FLUSH_CLOCK_TURNS 64u      /* loop turns between two looks at the clock */

/*
 * Ask @t to write out what it holds. @now (non-zero: a flush by the clock)
 * sets the next one due flush_interval later.
 */
static void flush_task(struct shmrun_task *t, int64_t now)
{
	int err;

	if (now)
		t->flush_due_ns = now + t->flush_every_ns;
	if (!t->op->flush || !t->opened || t->ended || t->w->failed)
		return;
	err = t->op->flush(t, t->state);
	if (err && !t->w->failed)
		shmrun_task_error(t, "flush failed: %s", strerror(-err));
	if (err)
		note_fail_errno(t->w, err);
}

/* Once, after open(): each flushing task's interval and first deadline. */
static void flush_setup(struct shmrun_worker *w)
{
	int64_t now = now_ns();

	for (uint32_t x = 0; x < w->ntasks; x++) {
		struct shmrun_task *t = &w->tasks[x];

		if (!t->op->flush)
			continue;
		t->flush_every_ns = (int64_t)shmrun_task_param_u64(t, "flush_interval",
								   FLUSH_DEFAULT_NS);
		t->flush_due_ns = now + t->flush_every_ns;
		w->nflush++;
	}
}

/*
 * Every task with op->flush: now (@due_only false: the worker is idle or
 * stopping), or those whose flush_interval has passed (@due_only: a busy
 * worker, every FLUSH_CLOCK_TURNS loop turns).
 */
static void flush_tasks(struct shmrun_worker *w, bool due_only)
{
	int64_t now;

	if (!w->nflush || (due_only && ++w->flush_turns % FLUSH_CLOCK_TURNS))
		return;
	now = due_only ? now_ns() : 0;
	for (uint32_t x = 0; x < w->ntasks; x++)
		if (w->tasks[x].op->flush && (!due_only || now >= w->tasks[x].flush_due_ns))
			flush_task(&w->tasks[x], now);
}

static uint32_t step(struct shmrun_worker *w)
{
	uint32_t progress = 0;

	for (uint32_t c = 0; c < w->nouts; c++)
		if (chan_backlogged(&w->outs[c]))
			progress += chan_drain(&w->outs[c]);
	for (uint32_t x = w->ntasks; x-- > 0 && !w->failed;) {
		struct shmrun_task *t = &w->tasks[x];

		if (t->align_epoch && w->checkpointing)
			drop_aborted(t);
		if (t->ended || task_parked(t))
			continue;
		if (t->op->flags & SHMRUN_OP_SOURCE) {
			uint64_t before = t->records_in;
			int r, budget;

			if (w->checkpointing) {
				r = source_barrier(t);
				progress += r > 0;
				if (t->ended || t->exhausted || r < 0)
					continue;
			}
			/* no clock read for an unpaced source: this runs every turn */
			budget = t->rate ? source_budget(t, now_ns()) : (int)PRODUCE_BUDGET;
			if (budget == 0)
				continue; /* paced: not yet */
			r = t->op->produce(t, t->state, (uint32_t)budget);
			rate_return(t, (uint64_t)budget, t->records_in - before);
			progress += (uint32_t)(t->records_in - before) + (r <= 0);
			if (r < 0) {
				if (!w->failed)
					shmrun_task_error(t, "produce failed: %s", strerror(-r));
				note_fail_errno(w, r);
			} else if (r == 0 && w->checkpointing) {
				/* wait for the final epoch, which ends it */
				t->exhausted = true;
				atomic_store_explicit(&w->slots[t->id].exhausted, 1,
						      memory_order_release);
			} else if (r == 0) {
				task_end(t, 0, false);
			}
			continue;
		}
		{
			uint32_t got = 0;

			for (uint32_t i = 0; i < t->nins && !t->ended; i++)
				if (!t->ins[i]->ended && !t->ins[i]->held)
					got += read_channel(t, t->ins[i]);
			progress += got;
			if (!got && t->nins && t->op->flush)
				flush_task(t, 0); /* its input drained */
		}
	}
	for (uint32_t c = 0; c < w->nouts; c++)
		shmrun_ring_flush(&w->outs[c].ring);
	if (w->checkpointing) {
		progress += commit_epochs(w);
		if (w->index == 0)
			progress += shmrun_coordinate(&w->co, w->plan, w->ctl, now_ns());
	}
	return progress;
}

static bool all_done(const struct shmrun_worker *w)
{
	for (uint32_t x = 0; x < w->ntasks; x++)
		if (!w->tasks[x].ended)
			return false;
	for (uint32_t c = 0; c < w->nouts; c++)
		if (chan_backlogged(&w->outs[c]) || shmrun_ring_pending(&w->outs[c].ring))
			return false;
	if (w->checkpointing) {
		/* acquire: pairs with the coordinator's release stores. */
		uint64_t fin = atomic_load_explicit(&w->ctl->final_epoch, memory_order_acquire);

		if (!fin || w->committed_epoch < fin)
			return false;
		if (w->index == 0 && w->co.manifest_pid)
			return false;
	}
	return true;
}

/* Whether anything would progress now: the re-check before the worker sleeps. */
static bool worker_ready(void *arg)
{
	struct shmrun_worker *w = arg;

	for (uint32_t x = 0; x < w->ntasks; x++) {
		struct shmrun_task *t = &w->tasks[x];

		if (t->ended || task_parked(t))
			continue;
		for (uint32_t i = 0; i < t->nins; i++)
			if (!t->ins[i]->ended && !t->ins[i]->held &&
			    shmrun_ring_readable(&t->ins[i]->ring))
				return true;
	}
	for (uint32_t c = 0; c < w->nouts; c++) {
		struct chan_out *o = &w->outs[c];
		uint32_t len;

		if (!chan_backlogged(o))
			continue;
		memcpy(&len, o->ovf + o->ovf_off, 4);
		if (shmrun_ring_writable(&o->ring, len))
			return true;
	}
	return *w->stop != 0;
}

/*
 * How long the worker may sleep as far as its sources go, at most @max_ns: a
 * rate-limited source until its stage's next token is due (at least
 * RATE_MIN_SLEEP_NS, so a high rate is served in batches, not a wake-up per
 * record); an unlimited one that is neither parked (its rings' bells wake
 * the worker) nor exhausted only briefly.
 */
#define RATE_MIN_SLEEP_NS 50000
#define SOURCE_POLL_NS 100000
static int64_t sources_sleep_ns(const struct shmrun_worker *w, int64_t max_ns)
{
	int64_t now = now_ns();

	for (uint32_t x = 0; x < w->ntasks; x++) {
		const struct shmrun_task *t = &w->tasks[x];
		int64_t ns;

		if (!(t->op->flags & SHMRUN_OP_SOURCE) || t->ended || t->exhausted ||
		    task_parked(t))
			continue;
		ns = t->rate ? rate_wait_ns(t, now) : SOURCE_POLL_NS;
		if (ns < RATE_MIN_SLEEP_NS)
			ns = RATE_MIN_SLEEP_NS;
		if (ns < max_ns)
			max_ns = ns;
	}
	return max_ns;
}

/*
 * Nothing progressed: spin (spin, or hybrid for its first SHMRUN_RING_SPIN_NS),
 * then sleep on this worker's bell, which every producer into and consumer of
 * its rings rings after publishing, until the next token of a rate-limited
 * source is due (sources_sleep_ns()); otherwise up to 10 ms between checks.
 */
static void idle_wait(struct shmrun_worker *w, int64_t *idle_since)
{
	enum shmrun_idle idle = w->plan->job->idle;

	if (idle == SHMRUN_IDLE_SPIN) {
		cpu_relax();
		return;
	}
	if (!*idle_since)
		*idle_since = now_ns();
	if (idle == SHMRUN_IDLE_HYBRID && now_ns() - *idle_since < SHMRUN_RING_SPIN_NS) {
		cpu_relax();
		return;
	}
	/* Checkpoint progress (snapshot children, MANIFEST, commits) rings no
	 * bell: with checkpoints on, look again every millisecond. A worker
	 * the placement gave no task only waits for the job's end (and is not
	 * the coordinator): every 100 ms, so that many more workers than CPUs
	 * (workers = 4096 on 2 CPUs) do not flood the CPUs with wakeups. */
	int64_t nap = w->checkpointing ? 1000000 : 10000000;

	if (w->ntasks == 0 && w->index != 0)
		nap = 100000000;
	shmrun_bell_sleep(&w->stats->bell, worker_ready, w, sources_sleep_ns(w, nap));
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

static void publish_stats(struct shmrun_worker *w)
{
	struct shmrun_worker_stats *stats = w->stats;
	uint64_t n = w->nstalls < 1024 ? w->nstalls : 1024;

	for (uint32_t x = 0; x < w->ntasks; x++) {
		struct shmrun_task *t = &w->tasks[x];

		atomic_fetch_add_explicit(&stats->records_in, t->records_in, memory_order_relaxed);
		atomic_fetch_add_explicit(&stats->records_out, t->records_out, memory_order_relaxed);
		atomic_fetch_add_explicit(&stats->keys, t->kv.keys, memory_order_relaxed);
		atomic_fetch_add_explicit(&stats->state_bytes, t->kv.bytes, memory_order_relaxed);
		atomic_fetch_add_explicit(&stats->key_bytes, t->kv.key_bytes, memory_order_relaxed);
	}
	if (n) {
		qsort(w->stalls, n, sizeof(*w->stalls), cmp_i64);
		atomic_store_explicit(&stats->stall_p50_ns, (uint64_t)w->stalls[n / 2],
				      memory_order_relaxed);
		atomic_store_explicit(&stats->stall_p99_ns, (uint64_t)w->stalls[(n * 99) / 100],
				      memory_order_relaxed);
		atomic_store_explicit(&stats->stall_max_ns, (uint64_t)w->stalls[n - 1],
				      memory_order_relaxed);
		atomic_store_explicit(&stats->snapshots, w->nstalls, memory_order_relaxed);
	}
}

int shmrun_worker_run(const struct shmrun_plan *plan, const struct shmrun_segment *seg,
		      uint32_t index, struct shmrun_control *ctl,
		      const volatile sig_atomic_t *stop)
{
	struct shmrun_worker_stats *all = shmrun_control_stats(ctl);
	struct shmrun_worker w = {
		.plan = plan,
		.seg = seg,
		.index = index,
		.ctl = ctl,
		.stats = &all[index],
		.all_stats = all,
		.slots = shmrun_control_slots(ctl),
		.checkpointing = plan->job->checkpoint_dir != NULL,
		.committed_epoch = ctl->restored_epoch,
		.stop = stop,
	};
	int64_t idle_since = 0;
	uint32_t turns = 0;
	uint64_t beats = 0;
	char why[200];
	int err;

	/* a control area of another layout: refuse it before touching it */
	if (shmrun_control_check(ctl, plan->job->workers, plan->ntasks, why, sizeof(why))) {
		shmrun_log(SHMRUN_LOG_ERROR, "worker %u: %s", index, why);
		return 1;
	}
	atomic_store_explicit(&w.stats->pid, (int32_t)getpid(), memory_order_relaxed);
	err = shmrun_state_arena_init();
	if (!err)
		err = setup(&w);
	if (err) {
		if (!w.failed)
			snprintf(w.stats->error, sizeof(w.stats->error), "worker setup failed: %s",
				 strerror(-err));
		shmrun_log(SHMRUN_LOG_ERROR, "%s", w.stats->error);
		teardown(&w);
		return 1;
	}
	for (uint32_t x = 0; x < w.ntasks && !w.failed; x++) {
		struct shmrun_task *t = &w.tasks[x];

		err = t->op->open ? t->op->open(t, &t->state) : 0;
		if (err) {
			if (!w.failed)
				shmrun_task_error(t, "open failed: %s", strerror(-err));
			note_fail_errno(&w, err);
			break;
		}
		t->opened = true;
		err = shmrun_snapshot_restore_entries(t);
		if (err && !w.failed)
			shmrun_task_error(t, "restore of per-worker state failed");
		if (err)
			note_fail_errno(&w, err);
	}
	flush_setup(&w);
	w.co.next_ns = now_ns() + (int64_t)plan->job->checkpoint_interval_ns;
	if (ctl->restored_finished) {
		/* Restored from the end-of-input checkpoint of a finished run: the
		 * restore above completed any interrupted sink commit; there is
		 * nothing left to process (end_of_input must not run twice). */
		for (uint32_t x = 0; x < w.ntasks; x++)
			w.tasks[x].ended = true;
		goto done;
	}
	while (!w.failed && !*stop) {
		/* relaxed: a liveness hint for worker 0's timeout message */
		atomic_store_explicit(&w.stats->heartbeat, ++beats, memory_order_relaxed);
		if (atomic_load_explicit(&ctl->failed, memory_order_acquire)) {
			snprintf(w.stats->error, sizeof(w.stats->error), "%s%.400s",
				 ctl->failed_why[0] ? "checkpoint failed: " : "the final checkpoint failed",
				 ctl->failed_why);
			w.failed = true;
			break;
		}
		if (w.nchildren && (++turns & 63) == 0)
			reap_children(&w);
		if (step(&w)) {
			idle_since = 0;
			flush_tasks(&w, true);
			continue;
		}
		flush_tasks(&w, false); /* nothing to do: every input drained */
		if (all_done(&w))
			break;
		reap_children(&w);
		idle_wait(&w, &idle_since);
	}
	if (*stop && !w.failed)
		flush_tasks(&w, false); /* a stop without final checkpoint: whole lines out */
done:
	/* Snapshot children still writing (late writers of an aborted epoch)
	 * are waited for, up to 10 s: each removes what it wrote once it sees
	 * the abort, which it could not do if this worker's exit killed it
	 * (PR_SET_PDEATHSIG) mid-way. When the job fails on a checkpoint, the
	 * other workers' writers too (ctl->writers): the launcher kills every
	 * worker once one has exited. What a killed one leaves is removed at
	 * the next start (shmrun_ckpt_remove_incomplete()). */
	reap_children(&w);
	for (int64_t until = now_ns() + 10000000000LL;
	     (w.nchildren ||
	      (atomic_load_explicit(&ctl->failed, memory_order_acquire) &&
	       atomic_load_explicit(&ctl->writers, memory_order_relaxed))) &&
	     now_ns() < until;) {
		usleep(1000);
		reap_children(&w);
	}
	publish_stats(&w);
	err = w.failed ? 1 : *stop ? 3 : 0;
	teardown(&w);
	return err;
}

/* ---- prepare (launcher side) ---------------------------------------------- */

/* STREAM_RESET_STATE asks for a fresh start (the launcher's reading of it). */
static bool reset_state_requested(void)
{
	const char *v = getenv("STREAM_RESET_STATE");

	return v && (!strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "yes"));
}

/*
 * Offer every per-worker entry of @t's stage in the checkpoint this run will
 * restore to the operator's check_restore(), before anything starts. The
 * checkpoint is the newest whose MANIFEST parses and fits this topology (as
 * the launcher will pick unless a state file is damaged: then this check is
 * skipped for the stage, and the restore reports what it finds). Return: 0,
 * or the operator's negative errno (reason in stats->error).
 */
static int prepare_restore_check(const struct shmrun_plan *plan, uint32_t stage,
				 struct shmrun_task *t)
{
	const struct shmrun_job *job = plan->job;
	struct shmrun_manifest m = {0};
	struct shmrun_control ctl = {0};
	uint64_t *epochs = NULL;
	char path[PATH_MAX], why[256];
	int n, dirfd = -1, err = 0;
	bool have = false;

	if (!job->checkpoint_dir || !t->op->check_restore || reset_state_requested())
		return 0;
	n = shmrun_ckpt_list(job->checkpoint_dir, &epochs);
	for (int i = 0; i < n && !have; i++)
		if (shmrun_ckpt_read_manifest(job->checkpoint_dir, epochs[i], &m, why,
					      sizeof(why)) == 0) {
			have = true;
			ctl.restored_epoch = epochs[i];
		}
	if (n >= 0)
		free(epochs);
	if (!have)
		return 0;
	if (shmrun_ckpt_check_topology(&m, job, why, sizeof(why)) != 0)
		goto out; /* refused (or rescaled) by the launcher later */
	shmrun_ckpt_path(job->checkpoint_dir, ctl.restored_epoch, path, sizeof(path));
	dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	t->w->ctl = &ctl;
	for (uint32_t i = 0; dirfd >= 0 && i < job->stages[stage].width && !err; i++) {
		struct shmrun_state_view view = {0};
		const struct shmrun_manifest_file *f = NULL;
		unsigned char *data = NULL, *p;
		char name[160];
		size_t len;

		t->id = plan->stage_task0[stage] + i;
		t->instance = i;
		shmrun_ckpt_file_name(plan, t->id, name, sizeof(name));
		for (uint32_t k = 0; k < m.nfiles; k++)
			if (strcmp(m.files[k].name, name) == 0)
				f = &m.files[k];
		if (!f || shmrun_ckpt_read_file(dirfd, name, f->size, f->xxh64, (void **)&data, &len,
						why, sizeof(why)))
			break; /* damaged: the restore skips or reports it */
		if (shmrun_state_parse(data, len, &view) == 0 && view.epoch != 0) {
			t->restoring = true;
			p = (unsigned char *)view.pw;
			for (uint64_t k = 0; k < view.npw && !err; k++) {
				uint32_t el;

				memcpy(&el, p, 4);
				err = t->op->check_restore(t, p + 4, el);
				p += 4 + el;
			}
		}
		shmrun_state_view_free(&view);
		free(data);
	}
	t->w->ctl = NULL;
	t->id = plan->stage_task0[stage];
	t->instance = 0;
	t->restoring = false;
out:
	if (dirfd >= 0)
		close(dirfd);
	shmrun_manifest_free(&m);
	return err;
}

int shmrun_task_prepare_stage(const struct shmrun_plan *plan, uint32_t stage, char *msg,
			      size_t msglen)
{
	const struct shmrun_job *job = plan->job;
	struct shmrun_worker_stats stats;
	struct shmrun_worker w = {.plan = plan, .stats = &stats, .quiet = true,
				  .checkpointing = job->checkpoint_dir != NULL};

	struct shmrun_task t = {
		.id = plan->stage_task0[stage],
		.stage = &job->stages[stage],
		.op = job->stages[stage].op,
		.width = job->stages[stage].width,
		.vnodes = job->vnodes,
		.w = &w,
	};
	int err;

	memset(&stats, 0, sizeof(stats));
	free(quiet_error);
	quiet_error = NULL;
	err = t.op->prepare ? t.op->prepare(&t) : 0;
	if (!err)
		err = prepare_restore_check(plan, stage, &t);
	if (err) /* too long for @msg: its middle goes, never its end */
		shmrun_fit_middle(msg, msglen,
				  quiet_error ? quiet_error
				  : stats.error[0] ? stats.error : strerror(-err));
	free(quiet_error);
	quiet_error = NULL;
	return err;
}
