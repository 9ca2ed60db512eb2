/*
 * runtime/worker.c: the single-threaded loop of one worker process.
 *
 * What it is for. A worker runs every task the plan placed on it, on one
 * thread, with no locks: forward edges are direct calls (operator chaining),
 * every other edge is a channel, one SPSC ring per (sender, receiver) pair.
 * This file is the loop and its phases, as libuv's uv_run() calls one
 * function per phase; the rooms around it:
 *
 *     channel.h/.c   a channel's ends, the record frame, the overflow queue
 *     task.h/.c      struct shmrun_task and the operator API's task functions
 *     pace.h/.c      records per second for a paced source's stage
 *     flush.h/.c     the flush phase: operators that hold output back
 *     idle.h/.c      the idle phase: spin, or sleep on the worker's doorbell
 *     prepare.c      a stage's checks in the launcher, before any worker
 *     control.c      the run's control area; ckpt/ the checkpoint protocol
 *
 * The loop (shmrun_worker_run(), one turn = step()):
 *
 *     setup(): tasks in topological order, rings attached, wire_task()
 *     open every task, hand it its restored per-worker entries
 *     for (;;) {
 *         drain overflows into their rings            (frames that found a ring full)
 *         for each task, downstream first:
 *             source: barrier of a new epoch, then produce() a budget of
 *                     records (paced: its stage's tokens)  unless parked
 *             others: read a budget of frames from each open input ring,
 *                     unless parked or held for barrier alignment
 *         publish every ring with pending commits      (one release store per ring)
 *         checkpoints: commit complete epochs; worker 0 coordinates
 *         all tasks ended and nothing pending -> exit
 *         no progress -> flush held output, idle (spin, then sleep on the bell)
 *     }
 *     wait for snapshot writers, publish stats, close every task
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
 * A record larger than the ring's largest frame is rejected with an error
 * naming the stage and the size (no fragmentation: docs/topology.md says how
 * to raise ring_bytes). The frame's encoding is channel.h's.
 *
 * Barrier alignment (docs/design.md §6). A barrier(e) arriving on one input
 * holds that input (chan_in.held; a forward input parks its upstream through
 * fwd_slot_held, that upstream only) until it has arrived on every input
 * still open; then the task
 * snapshots (op->snapshot() and a forked writer of its state file) and sends
 * barrier(e) on, before any record that came after it on any input. A newer
 * epoch's barrier, or the abort of e, drops the alignment.
 *
 * Watermarks (watermark.c, docs/event-time.md): a WATERMARK frame or a
 * forward call moves one input's watermark; the task follows the minimum.
 *
 * End of input: a task whose inputs have all ended calls end_of_input(), then
 * sends an END frame on each of its output channels and ends its forward
 * successors in turn. A consumer counts END frames, one per input channel.
 * With checkpoints, END carries the final epoch and is that epoch's barrier.
 *
 * Invariants:
 * - one thread: every field of the worker and its tasks is this thread's;
 *   the shared control area and the rings are reached only through atomics
 *   whose pairs are named where they are used;
 * - a channel's frames arrive in the order they were put (the overflow
 *   queue keeps order), and nothing a task emitted after a barrier or END
 *   goes out before it;
 * - the worker exits only once every task ended, every queued frame was
 *   published and, with checkpoints, the final epoch is committed.
 *
 * Designs rejected:
 * - a thread per task or per stage: cross-thread handoff costs more than the
 *   work of a typical operator, and locks or more rings would be needed
 *   where a direct call does today;
 * - reading inputs round-robin upstream first: rings fill faster than they
 *   drain; downstream first empties them before sources fill them again;
 * - blocking on a full ring or busy-retrying it (deadlock, or a core burnt
 *   while another task could run): the overflow queue and parking instead;
 * - looking at the clock every turn: an unpaced source reads none, flushing
 *   looks every FLUSH_CLOCK_TURNS turns.
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

#include "callback.h"
#include "channel.h"
#include "ckpt/ckpt_io.h"
#include "ckpt/coordinator.h"
#include "ckpt/fault.h"
#include "ckpt/manifest.h"
#include "ckpt/snapshot.h"
#include "ckpt/state_file.h"
#include "util.h"
#include "flush.h"
#include "idle.h"
#include "ops/ops.h" /* struct shmrun_origin */
#include "pace.h"
#include "shmrun/placement.h"
#include "task.h"
#include "worker.h"

#define READ_BYTES 65536u /* payload bytes read from one input ring per loop turn, at most */

/* ---- emit and delivery ----------------------------------------------------- */

/* Hand @rec to @t. @hash is the key's hash when @hashed (it came off a ring). */
static int task_end(struct shmrun_task *t, uint64_t e, bool stop);
static int task_checkpoint(struct shmrun_task *t, uint64_t e);
static void task_unhold(struct shmrun_task *t);
static int deliver_barrier(struct shmrun_task *t, uint64_t e, int32_t slot);

/* @what ("process", "merge of a partial") of @t returned @err: say so once, keep the errno. */
static int callback_failed(struct shmrun_task *t, const char *what, int err)
{
	if (err && !t->w->failed)
		shmrun_task_error(t, "%s failed: %s", what, strerror(-err));
	if (err && t->w->stats)
		note_fail_errno(t->w, err);
	return err;
}

static int deliver(struct shmrun_task *t, const struct shmrun_record *rec, uint64_t hash,
		   bool hashed)
{
	uint64_t where;
	int err;

	if (t->w->failed)
		return -ECANCELED;
	t->m_in++;
	t->m_in_bytes += (uint64_t)rec->key_len + rec->value_len;
	t->cur_key = hashed ? rec->key : NULL;
	t->cur_key_len = rec->key_len;
	t->cur_hash = hash;
	where = cb_enter(t, SHMRUN_CB_PROCESS);
	err = t->op->process(t, t->state, rec);
	cb_leave(t, where);
	t->cur_key = NULL;
	return callback_failed(t, "process", err);
}

/*
 * Hand @n records to @t at once: process_batch() when the operator has it,
 * else process() for each. @hashes: their key hashes when they came off a
 * ring, else NULL.
 */
static int deliver_batch(struct shmrun_task *t, const struct shmrun_record *recs,
			 const uint64_t *hashes, uint32_t n)
{
	uint64_t where;
	int err = 0;

	if (t->w->failed)
		return -ECANCELED;
	if (!t->op->process_batch) {
		for (uint32_t i = 0; i < n && !err; i++)
			err = deliver(t, &recs[i], hashes ? hashes[i] : 0, hashes != NULL);
		return err;
	}
	t->m_in += n;
	for (uint32_t i = 0; i < n; i++)
		t->m_in_bytes += (uint64_t)recs[i].key_len + recs[i].value_len;
	if (hashes) {
		t->cur_recs = recs;
		t->cur_hashes = hashes;
		t->cur_n = n;
		t->cur_i = 0;
	}
	where = cb_enter(t, SHMRUN_CB_PROCESS_BATCH);
	err = t->op->process_batch(t, t->state, recs, n);
	cb_leave(t, where);
	t->cur_n = 0;
	return callback_failed(t, "process", err);
}

/* A combined record (a partial of @t's combiner) off a ring, to merge(). */
static int deliver_partial(struct shmrun_task *t, const struct shmrun_record *rec, uint64_t hash)
{
	uint64_t where;
	int err;

	if (t->w->failed)
		return -ECANCELED;
	t->m_in++;
	t->m_in_bytes += (uint64_t)rec->key_len + rec->value_len;
	if (!t->op->combiner) {
		shmrun_task_error(t, "corrupt frame: a combined record for an operator without "
				     "a combiner");
		return -EBADMSG;
	}
	t->cur_key = rec->key;
	t->cur_key_len = rec->key_len;
	t->cur_hash = hash;
	where = cb_enter(t, SHMRUN_CB_MERGE);
	err = t->op->combiner->merge(t, t->state, rec);
	cb_leave(t, where);
	t->cur_key = NULL;
	return callback_failed(t, "merge of a partial", err);
}

static int emit_edges(struct shmrun_task *t, const struct shmrun_record *rec);
static int comb_flush_task(struct shmrun_task *t);

static int comb_flush_edge(struct shmrun_task *t, struct out_edge *e);

/*
 * Mark the worker as in the combiner's add() (@where: an edge's add_where),
 * or back in the emitting callback (w->cb_where): callback.h. add() runs
 * inside the emitting task's callback, so no entry is counted; a batch is
 * marked once (shmrun_emit_batch()), not per record.
 */
static inline void add_mark(struct shmrun_worker *w, uint64_t where)
{
	/* release: pairs with the acquire load in shmrun_cb_watch() (C13) */
	atomic_store_explicit(&w->stats->cb_where, where, memory_order_release);
}

/* Fold @rec into @e's combiner (flushing it when full); the caller marked add(). */
static inline int combine_rec(struct shmrun_task *t, struct out_edge *e,
			      const struct shmrun_record *rec)
{
	int err = comb_add(&e->comb, rec);

	if (__builtin_expect(err == -ENOSPC, 0)) {
		err = comb_flush_edge(t, e); /* may call merge(), which leaves its own mark */
		add_mark(t->w, e->add_where);
		if (!err)
			err = comb_add(&e->comb, rec);
	}
	return err;
}

/* combine_rec() of one record, marked as add() around it. */
static inline int combine_one(struct shmrun_task *t, struct out_edge *e,
			      const struct shmrun_record *rec)
{
	int err;

	add_mark(t->w, e->add_where);
	err = combine_rec(t, e, rec);
	add_mark(t->w, t->w->cb_where);
	return err;
}

static int emit_one(struct shmrun_task *t, const struct shmrun_record *rec);

int shmrun_emit(struct shmrun_task *t, const struct shmrun_record *rec)
{
	t->m_out++;
	t->m_out_bytes += (uint64_t)rec->key_len + rec->value_len;
	return emit_one(t, rec);
}

/* shmrun_emit() but counted by the caller. */
static int emit_one(struct shmrun_task *t, const struct shmrun_record *rec)
{
	/* a generating stage's task: the largest event time it emitted (0 = none) */
	if (__builtin_expect(t->wm_gen, 0) && rec->event_time_ns > t->wm_max_ts &&
	    rec->event_time_ns != 0)
		t->wm_max_ts = rec->event_time_ns;
	if (t->nouts == 1) {
		struct out_edge *e = &t->outs[0];

		/* one combining edge: folded here, hashed and sent at flush */
		if (e->combining && rec->key_len <= COMB_MAX_KEY)
			return combine_one(t, e, rec);
		/* the common chain: one forward edge, a direct call */
		if (e->kind == SHMRUN_EDGE_FORWARD) {
			e->forward->cur_input = e->fwd_input;
			return deliver(e->forward, rec, 0, false);
		}
	}
	return emit_edges(t, rec);
}

/*
 * A batch on @t's one output edge @e, a shuffle without a combiner: hash,
 * route and append each record, with none of emit_edges()'s per-edge
 * dispatch. Oversized records go through emit_edges() for its message.
 */
static int emit_shuffle_batch(struct shmrun_task *t, struct out_edge *e,
			      const struct shmrun_record *recs, uint32_t n)
{
	int err = 0;

	for (uint32_t i = 0; i < n && !err; i++) {
		const struct shmrun_record *rec = &recs[i];
		uint16_t flags = rec->event_time_ns != 0 ? REC_TIMED : 0;
		uint64_t total = chan_rec_bytes(rec, flags), hash;
		uint32_t j;

		if (__builtin_expect(total > e->max_payload, 0)) {
			err = emit_edges(t, rec);
			continue;
		}
		hash = XXH3_64bits(rec->key, rec->key_len);
		j = e->instance_of_vnode[shmrun_placement_vnode_of_hash(hash, t->vnodes)];
		err = chan_put_rec(e->chans[j], rec, hash, flags, (uint32_t)total);
		if (err)
			shmrun_task_error(t, "cannot queue output behind a full ring: %s",
					  strerror(-err));
	}
	return err;
}

int shmrun_emit_batch(struct shmrun_task *t, const struct shmrun_record *recs, uint32_t n)
{
	int err = 0;

	if (n == 0)
		return 0;
	t->m_out += n;
	for (uint32_t i = 0; i < n; i++)
		t->m_out_bytes += (uint64_t)recs[i].key_len + recs[i].value_len;
	if (__builtin_expect(t->wm_gen, 0))
		wm_track_batch(t, recs, n);
	/* the common chain: one forward edge, one call for the whole batch */
	if (t->nouts == 1 && t->outs[0].kind == SHMRUN_EDGE_FORWARD && !t->outs[0].combining) {
		t->outs[0].forward->cur_input = t->outs[0].fwd_input;
		return deliver_batch(t->outs[0].forward, recs, NULL, n);
	}
	if (t->nouts == 1 && t->outs[0].kind == SHMRUN_EDGE_SHUFFLE && !t->outs[0].combining)
		return emit_shuffle_batch(t, &t->outs[0], recs, n);
	if (t->nouts == 1 && t->outs[0].combining) {
		/* one combining edge: each record folded, marked as add() once */
		struct out_edge *e = &t->outs[0];

		add_mark(t->w, e->add_where);
		for (uint32_t i = 0; i < n && !err; i++)
			err = recs[i].key_len <= COMB_MAX_KEY ? combine_rec(t, e, &recs[i])
							      : emit_edges(t, &recs[i]);
		add_mark(t->w, t->w->cb_where);
		return err;
	}
	for (uint32_t i = 0; i < n && !err; i++)
		err = emit_one(t, &recs[i]);
	return err;
}

int shmrun_emit_batch_origin(struct shmrun_task *t, const struct shmrun_record *recs,
			     uint32_t n, struct shmrun_origin *o)
{
	const struct shmrun_origin *outer = t->w->origin;
	int err;

	o->recs = recs;
	o->n = n;
	t->w->origin = o;
	err = shmrun_emit_batch(t, recs, n);
	t->w->origin = outer;
	return err;
}

bool shmrun_task_record_origin(struct shmrun_task *t, const struct shmrun_record *rec, char *buf,
			       size_t len)
{
	const struct shmrun_origin *o = t->w->origin;
	uintptr_t r = (uintptr_t)rec, lo;
	bool forward = false;

	if (!o || !len)
		return false;
	/* the very record the source emitted, not a copy (a ring's, another
	 * operator's): then its index in the batch says where it was read */
	lo = (uintptr_t)o->recs;
	if (r < lo || r >= lo + (uintptr_t)o->n * sizeof(*rec) || (r - lo) % sizeof(*rec))
		return false;
	/* and @t is directly behind the source (an operator that passes the
	 * record on unchanged could hand it further: keep the rule simple) */
	for (uint32_t k = 0; k < o->task->nouts && !forward; k++)
		forward = o->task->outs[k].kind == SHMRUN_EDGE_FORWARD &&
			  o->task->outs[k].forward == t;
	if (!forward)
		return false;
	return o->describe(o->task, o->state, (uint32_t)((r - lo) / sizeof(*rec)), buf, len) == 0;
}

/*
 * Send @t's watermark downstream (watermark.h): partials first, then a
 * WATERMARK frame (payload: the i64 watermark, ns) on every channel of every
 * output edge, and the forward successors' inputs. Only a newer one than
 * the last sent goes.
 */
int worker_send_watermark(struct shmrun_task *t)
{
	int64_t wm = t->wm;
	struct pieces pc = {.p = {&wm}, .n = {8}, .total = 8};
	int err;

	if (wm <= t->wm_sent || t->w->failed)
		return 0;
	/* records folded before the watermark go out before it, or they would be late */
	err = comb_flush_task(t);
	t->wm_sent = wm;
	for (uint32_t o = 0; o < t->nouts && !err; o++) {
		struct out_edge *oe = &t->outs[o];

		if (oe->kind == SHMRUN_EDGE_FORWARD) {
			err = wm_input_advanced(oe->forward, &oe->forward->fwd_wm[oe->fwd_slot], wm);
			continue;
		}
		for (uint32_t j = 0; j < oe->nchans && !err; j++)
			err = chan_put(oe->chans[j], SHMRUN_FRAME_WATERMARK, &pc);
		if (err && !t->w->failed)
			shmrun_task_error(t, "cannot queue a watermark behind a full ring: %s",
					  strerror(-err));
	}
	return err;
}

/*
 * Say why @rec (@total bytes with its framing) does not fit @e's rings, in the
 * user's terms — key + value bytes, against the largest key + value a ring
 * takes: ring_bytes/2 - 32 (a frame is at most half a ring,
 * shmrun_ring_max_payload(), less its 16-byte frame header and the 16-byte
 * record header), 8 fewer for a record with an event time — and what to do
 * that is true: the smallest ring_bytes that would hold it, or, past the
 * largest ring, that no ring ever will.
 */
static void record_too_large(struct shmrun_task *t, const struct out_edge *e,
			     const struct shmrun_record *rec, uint64_t total)
{
	uint64_t cap = e->chans[0]->ring.capacity, need = cap;
	uint64_t kv = (uint64_t)rec->key_len + rec->value_len;
	uint64_t framing = total - kv; /* record header, and the event time if any */
	uint64_t largest = SHMRUN_RING_MAX_CAPACITY / 2 - SHMRUN_FRAME_HEADER;
	const char *rule = framing > REC_HDR ? "ring_bytes/2 - 40 for a record with an event time"
					     : "ring_bytes/2 - 32";

	while (need < SHMRUN_RING_MAX_CAPACITY && need / 2 - SHMRUN_FRAME_HEADER < total)
		need *= 2;
	if (total <= largest)
		shmrun_task_error(t,
				  "record of %" PRIu64 " bytes of key + value (key %u + value %u) "
				  "does not fit a ring of ring_bytes=%" PRIu64 ", whose largest "
				  "record is %" PRIu64 " bytes of key + value (%s); raise "
				  "ring_bytes in [job] to at least %" PRIu64 "%s",
				  kv, rec->key_len, rec->value_len, cap, e->max_payload - framing,
				  rule, need >= (1u << 20) ? need >> 20 : need >> 10,
				  need >= (1u << 20) ? "M" : "K");
	else
		shmrun_task_error(
		    t,
		    "record of %" PRIu64 " bytes of key + value (key %u + value %u) can never "
		    "fit a ring: the largest record is %" PRIu64 " bytes of key + value (%s) "
		    "even at the maximum ring_bytes = 1G; split the record into smaller ones "
		    "(for a file_source: shorten its lines, one line is one record)",
		    kv, rec->key_len, rec->value_len, largest - framing, rule);
}

/* comb_flush()'s sink: one partial into its receiver's batch. */
struct partial_put {
	struct out_edge *e;
	uint32_t vnodes;
};

static int put_partial(void *arg, const struct shmrun_record *rec, uint64_t hash)
{
	struct partial_put *pp = arg;
	uint16_t flags = REC_COMBINED | (rec->event_time_ns != 0 ? REC_TIMED : 0);
	uint32_t j;

	if (pp->e->kind == SHMRUN_EDGE_FORWARD) { /* a keyed edge between width-1 stages */
		pp->e->forward->cur_input = pp->e->fwd_input;
		return deliver_partial(pp->e->forward, rec, hash);
	}
	j = pp->e->instance_of_vnode[shmrun_placement_vnode_of_hash(hash, pp->vnodes)];
	return chan_put_rec(pp->e->chans[j], rec, hash, flags, (uint32_t)chan_rec_bytes(rec, flags));
}

/* Send every partial @e's combiner holds into the receivers' batches. */
static int comb_flush_edge(struct shmrun_task *t, struct out_edge *e)
{
	struct partial_put pp = {.e = e, .vnodes = t->vnodes};
	int err;

	if (!e->combining || !comb_pending(&e->comb))
		return 0;
	err = comb_flush(&e->comb, put_partial, &pp);
	if (err && !t->w->failed)
		shmrun_task_error(t, "cannot queue output behind a full ring: %s", strerror(-err));
	return err;
}

/* Every combiner of @t's output edges flushed (before a barrier or END, or drained). */
static int comb_flush_task(struct shmrun_task *t)
{
	int err = 0;

	for (uint32_t o = 0; o < t->nouts && !err; o++)
		err = comb_flush_edge(t, &t->outs[o]);
	return err;
}

static int emit_edges(struct shmrun_task *t, const struct shmrun_record *rec)
{
	uint16_t flags = rec->event_time_ns != 0 ? REC_TIMED : 0;
	uint64_t total = chan_rec_bytes(rec, flags);
	uint64_t hash = 0;
	bool hashed = false;
	int err = 0;

	for (uint32_t o = 0; o < t->nouts && !err; o++) {
		struct out_edge *e = &t->outs[o];
		uint32_t j, lo, hi;

		if (e->combining && rec->key_len <= COMB_MAX_KEY) {
			/* folded; the partial is hashed and routed at flush */
			err = combine_one(t, e, rec);
			continue;
		}
		if (e->kind == SHMRUN_EDGE_FORWARD) {
			e->forward->cur_input = e->fwd_input;
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
			err = chan_put_rec(e->chans[j], rec, hash, flags, (uint32_t)total);
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
	uint64_t where;
	int err = 0;

	/* the watermark reaches MAX: timers, on_watermark(), then end_of_input();
	 * MAX goes downstream after what end_of_input() emits (watermark.c) */
	if (!stop)
		err = wm_advance(t, SHMRUN_WATERMARK_MAX, false);
	if (err)
		return err;
	if (t->op->end_of_input && !stop) {
		where = cb_enter(t, SHMRUN_CB_END_OF_INPUT);
		err = t->op->end_of_input(t, t->state);
		cb_leave(t, where);
	}
	if (err) {
		if (!t->w->failed)
			shmrun_task_error(t, "end of input failed: %s", strerror(-err));
		note_fail_errno(t->w, err);
		return err;
	}
	err = comb_flush_task(t); /* partials go out before END, and before the snapshot */
	if (!err && !stop)
		err = worker_send_watermark(t); /* MAX, ahead of END */
	if (!err && e)
		err = shmrun_snapshot_take(t, e);
	if (err)
		return err;
	task_unhold(t);
	t->ended = true;
	for (uint32_t o = 0; o < t->nouts && !err; o++) {
		struct out_edge *oe = &t->outs[o];

		if (oe->kind == SHMRUN_EDGE_FORWARD) {
			oe->forward->fwd_wm[oe->fwd_slot].ended = true;
			if (--oe->forward->inputs_open == 0)
				err = task_end(oe->forward, e, stop);
			continue;
		}
		for (uint32_t j = 0; j < oe->nchans && !err; j++)
			err = chan_put(oe->chans[j], SHMRUN_FRAME_END, &pc);
	}
	return err;
}

/*
 * The records of DATA frame @f to @t: partials to merge(), a batch to
 * process_batch() (up to BATCH_RECORDS at a time), or one by one to
 * process(). Return: 0, or -EBADMSG for a corrupt frame (error recorded), or
 * a callback's error.
 */
static int deliver_frame(struct shmrun_task *t, const struct shmrun_frame *f)
{
	const unsigned char *p = f->payload, *end = f->payload + f->len;
	struct shmrun_worker *w = t->w;
	int err = 0;

	while (p < end && !err) {
		if (t->op->process_batch && !(f->flags & REC_COMBINED)) {
			uint32_t n = 0;

			while (p < end && n < BATCH_RECORDS &&
			       !(err = chan_next_record(&p, end, f->flags, &w->rbuf[n], &w->rhash[n])))
				n++;
			if (n && !err)
				err = deliver_batch(t, w->rbuf, w->rhash, n);
			else if (n && err == -EBADMSG)
				deliver_batch(t, w->rbuf, w->rhash, n);
		} else {
			struct shmrun_record rec;
			uint64_t hash;

			err = chan_next_record(&p, end, f->flags, &rec, &hash);
			if (!err)
				err = (f->flags & REC_COMBINED) ? deliver_partial(t, &rec, hash)
								: deliver(t, &rec, hash, true);
		}
	}
	if (err == -EBADMSG && !w->failed)
		shmrun_task_error(t, "corrupt record frame from task %u", f->src_task);
	return err;
}

/*
 * Read frames from one input channel of @t, up to READ_BYTES of payload;
 * @t->busy when the budget ran out before the ring did. Return: frames read.
 */
static uint32_t read_channel(struct shmrun_task *t, struct chan_in *in)
{
	const struct shmrun_frame *f;
	uint64_t bytes = 0;
	uint32_t n = 0, delivered = 0;
	int err;

	while (!t->w->failed && !task_parked(t)) {
		if (bytes >= READ_BYTES) {
			t->busy = true;
			break;
		}
		err = shmrun_ring_peek(&in->ring, &f);
		if (err == -EAGAIN)
			break;
		if (err) {
			shmrun_task_error(t, "corrupt frame on an input ring (%s)", strerror(-err));
			break;
		}
		n++;
		/* records, watermarks, END: what keeps an input from being idle; a
		 * barrier alone does not (it comes every checkpoint_interval) */
		delivered += f->kind != SHMRUN_FRAME_BARRIER;
		bytes += SHMRUN_FRAME_HEADER + f->len; /* (plus the ring's commit word: a budget) */
		if (f->kind == SHMRUN_FRAME_DATA) {
			t->cur_input = in->input;
			if (deliver_frame(t, f) == -EBADMSG)
				break;
		} else if (f->kind == SHMRUN_FRAME_WATERMARK) {
			int64_t wm = SHMRUN_WATERMARK_MIN;

			if (f->len >= 8)
				memcpy(&wm, f->payload, 8);
			shmrun_ring_release(&in->ring, f);
			wm_input_advanced(t, &in->wmi, wm);
			continue;
		} else if (f->kind == SHMRUN_FRAME_END) {
			uint64_t e = 0;
			uint32_t stop = 0;

			if (f->len >= 12) {
				memcpy(&e, f->payload, 8);
				memcpy(&stop, f->payload + 8, 4);
			}
			in->ended = true;
			in->wmi.ended = true; /* MAX came before it, unless this is a stop */
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
				deliver_barrier(t, e, -1);
			}
			break;
		}
		shmrun_ring_release(&in->ring, f);
	}
	if (delivered && t->w->wm_clocked)
		wm_input_active(t, &in->wmi);
	return n;
}

/* Release every forward input @t holds (and the worker's count of them). */
static void fwd_unhold(struct shmrun_task *t)
{
	t->w->fwd_holds -= t->fwd_nheld;
	for (uint32_t i = 0; i < t->fwd_inputs && t->fwd_nheld; i++)
		t->fwd_slot_held[i] = false;
	t->fwd_nheld = 0;
}

static void task_unhold(struct shmrun_task *t)
{
	for (uint32_t i = 0; i < t->nins; i++)
		t->ins[i]->held = 0;
	fwd_unhold(t);
	t->align_epoch = 0;
	t->aligned = 0;
}

static int deliver_barrier(struct shmrun_task *t, uint64_t e, int32_t slot);

/* @t is aligned on barrier(@e): snapshot it and send the barrier on. */
static int task_checkpoint(struct shmrun_task *t, uint64_t e)
{
	struct pieces pc = {.p = {&e}, .n = {8}, .total = 8};
	/* partials go out before the barrier: the checkpoint holds none on this side */
	int err = comb_flush_task(t);

	if (!err)
		err = shmrun_snapshot_take(t, e);
	task_unhold(t);
	for (uint32_t o = 0; o < t->nouts && !err; o++) {
		struct out_edge *oe = &t->outs[o];

		if (oe->kind == SHMRUN_EDGE_FORWARD) {
			/* a barrier is no delivery for idleness: it comes every
			 * checkpoint_interval, and an input with nothing else is idle */
			err = deliver_barrier(oe->forward, e, (int32_t)oe->fwd_slot);
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
 * Barrier(@e) arrived at @t on one input: a ring channel (@slot -1, already
 * marked held by the caller) or forward input @slot, which is held: its
 * upstream parks (task_parked_slow()), and only it, as a ring holds only the
 * channel that delivered; the other forward upstreams run on until they
 * deliver theirs. Aligned on every input -> checkpoint.
 */
static int deliver_barrier(struct shmrun_task *t, uint64_t e, int32_t slot)
{
	struct shmrun_worker *w = t->w;
	bool forward = slot >= 0;

	if (e <= t->barrier_epoch ||
	    e <= atomic_load_explicit(&w->ctl->aborted_epoch, memory_order_acquire))
		return 0; /* stale: an aborted epoch's barrier */
	if (t->align_epoch != e) {
		/* a newer epoch: whatever was aligned before was aborted */
		uint64_t keep = forward ? 0 : e;

		for (uint32_t i = 0; i < t->nins; i++)
			if (t->ins[i]->held != keep)
				t->ins[i]->held = 0;
		fwd_unhold(t);
		t->align_epoch = e;
		t->aligned = 0;
		for (uint32_t i = 0; i < t->nins; i++)
			t->aligned += t->ins[i]->held == e;
		if (!forward)
			t->aligned = t->aligned ? t->aligned - 1 : 0; /* counted below */
	}
	if (forward && !t->fwd_slot_held[slot]) {
		t->fwd_slot_held[slot] = true;
		t->fwd_nheld++;
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
		uint64_t where;
		int err = 0;

		if (t->op->commit && t->opened) {
			where = cb_enter(t, SHMRUN_CB_COMMIT);
			err = t->op->commit(t, t->state, done);
			cb_leave(t, where);
		}

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

/*
 * The index of edge @e's upstream in its downstream stage's `input =` list:
 * conf_graph.c adds a stage's edges in the order of that list, so it is the
 * number of edges into the same stage before @e.
 */
static uint32_t input_index(const struct shmrun_job *job, uint32_t e)
{
	uint32_t k = 0;

	for (uint32_t e2 = 0; e2 < e; e2++)
		k += job->edges[e2].to == job->edges[e].to;
	return k;
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
				t->ins[t->nins] =
					find_in(w, shmrun_plan_channel_of(p, e, i, t->instance));
				t->ins[t->nins++]->input = input_index(job, e);
				t->inputs_open++;
			}
		if (ed->from != stage)
			continue;
		oe = &t->outs[t->nouts++];
		oe->kind = ed->kind;
		/* a `by key` edge (a shuffle, or a direct call between width-1
		 * stages) into a stage that combines */
		if (ed->by_key && shmrun_stage_combines(to)) {
			int err = comb_init(&oe->comb, to->op->combiner);

			if (err)
				return err;
			oe->combining = true;
			oe->add_where = shmrun_cb_where(t->id, SHMRUN_CB_ADD, ed->to + 1);
		}
		if (ed->kind == SHMRUN_EDGE_FORWARD) {
			oe->forward = &w->tasks[task_slot[p->stage_task0[ed->to] + t->instance]];
			oe->fwd_input = input_index(job, e);
			/* its index among the forward edges into ed->to, in edge order */
			for (uint32_t e2 = 0; e2 < e; e2++)
				oe->fwd_slot += job->edges[e2].to == ed->to &&
						job->edges[e2].kind == SHMRUN_EDGE_FORWARD;
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
	t->fwd_wm = calloc(t->fwd_inputs + 1, sizeof(*t->fwd_wm));
	t->fwd_slot_held = calloc(t->fwd_inputs + 1, sizeof(*t->fwd_slot_held));
	if (!t->fwd_wm || !t->fwd_slot_held)
		return -ENOMEM;
	for (uint32_t i = 0; i < t->fwd_inputs; i++)
		wm_input_init(&t->fwd_wm[i]);
	return 0;
}

/*
 * Setup phase, the tasks: w->tasks filled, each with its key-value store; @task_slot maps a
 * plan task to its index in w->tasks (UINT32_MAX: another worker's). Return: 0, or -ENOMEM.
 */
static int place_tasks(struct shmrun_worker *w, uint32_t *task_slot)
{
	const struct shmrun_plan *p = w->plan;
	const struct shmrun_job *job = p->job;

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
			t->wm = SHMRUN_WATERMARK_MIN; /* a restore sets the checkpoint's */
			/* looked up once: source_budget() runs every loop turn */
			t->rate = t->op->pacing_param
					  ? shmrun_task_param_u64(t, t->op->pacing_param, 0)
					  : 0;
			t->rate_slot = &w->slots[p->stage_task0[s]];
			/* this host's share: each host has its own counter */
			t->rate_host =
			    t->rate
				? pace_host_rate(p, s, shmrun_plan_host_of(p, w->index), t->rate)
				: 0;
			if (shmrun_fault_state_enomem() || shmrun_kv_init(&t->kv, job->vnodes))
				return -ENOMEM;
		}
	}
	return 0;
}

/*
 * Setup phase, the rings: w->outs and w->ins, each end's wake bell the peer worker's.
 * Return: 0, or the -errno of shmrun_ring_attach().
 */
static int attach_rings(struct shmrun_worker *w)
{
	const struct shmrun_plan *p = w->plan;
	int err;

	/* Each ring this worker touches, attached on the side it plays. */
	for (uint32_t c = 0; c < p->nchannels; c++) {
		const struct shmrun_plan_channel *ch = &p->channels[c];
		size_t len;
		void *mem = shmrun_segment_ring(w->seg, c, &len);

		if (p->tasks[ch->src_task].worker == w->index) {
			struct chan_out *o = &w->outs[w->nouts++];

			err = shmrun_ring_attach(&o->ring, mem, len, SHMRUN_RING_PRODUCER);
			if (err)
				return err;
			o->src_task = ch->src_task;
			o->dst_task = ch->dst_task;
			o->mx = w->mx ? shmrun_metrics_chan(w->mx, c) : NULL;
			o->backlogged = &w->backlogged;
			err = chan_batch_init(o);
			if (err)
				return err;
			/* a channel between two tasks of this worker: nobody sleeps on
			 * its other side separately, so publishing rings no bell and
			 * pays no fence (shmrun_ring_set_wake_bell()) */
			shmrun_ring_set_wake_bell(
				&o->ring, p->tasks[ch->dst_task].worker == w->index
						  ? NULL
						  : &w->all_stats[p->tasks[ch->dst_task].worker].bell);
		}
		if (p->tasks[ch->dst_task].worker == w->index) {
			struct chan_in *in = &w->ins[w->nins++];

			err = shmrun_ring_attach(&in->ring, mem, len, SHMRUN_RING_CONSUMER);
			if (err)
				return err;
			wm_input_init(&in->wmi);
			in->mx = w->mx ? shmrun_metrics_chan(w->mx, c) : NULL;
			shmrun_ring_set_wake_bell(
				&in->ring, p->tasks[ch->src_task].worker == w->index
						   ? NULL
						   : &w->all_stats[p->tasks[ch->src_task].worker].bell);
		}
	}
	return 0;
}

static int setup(struct shmrun_worker *w)
{
	const struct shmrun_plan *p = w->plan;
	uint32_t *task_slot = NULL;
	int err = -ENOMEM;

	w->outs = calloc(p->nchannels + 1, sizeof(*w->outs));
	w->ins = calloc(p->nchannels + 1, sizeof(*w->ins));
	w->tasks = calloc(p->ntasks + 1, sizeof(*w->tasks));
	task_slot = malloc((p->ntasks + 1) * sizeof(*task_slot));
	if (!w->outs || !w->ins || !task_slot || !w->tasks)
		goto out;
	err = 0; /* a worker may have no task and no ring at all: it idles */

	err = place_tasks(w, task_slot);
	if (err)
		goto out;
	err = attach_rings(w);
	if (err)
		goto out;
	for (uint32_t x = 0; x < w->ntasks; x++) {
		err = wire_task(w, &w->tasks[x], task_slot);
		if (err)
			goto out;
	}
	/*
	 * A worker without tasks restores nothing, and must not read the
	 * checkpoint at all: no barrier waits for it, so the other workers may
	 * complete later epochs meanwhile and retention may have removed the
	 * restored one by the time a descheduled idle worker gets here.
	 */
	shmrun_fault_slow_restore(w->index);
	if (w->ctl->restored_epoch && w->ntasks)
		err = shmrun_snapshot_restore(w);
out:
	free(task_slot);
	return err;
}

static void teardown(struct shmrun_worker *w)
{
	for (uint32_t x = 0; x < w->ntasks; x++) {
		struct shmrun_task *t = &w->tasks[x];

		if (t->opened && t->op->close) {
			uint64_t where = cb_enter(t, SHMRUN_CB_CLOSE);

			t->op->close(t, t->state);
			cb_leave(t, where);
		}
		for (uint32_t o = 0; o < t->nouts && t->outs; o++) {
			free(t->outs[o].chans);
			free(t->outs[o].instance_of_vnode);
			comb_free(&t->outs[o].comb);
		}
		free(t->outs);
		free(t->ins);
		free(t->pw);
		free(t->sync_fds);
		free(t->restore_pw);
		free(t->fwd_wm);
		free(t->fwd_slot_held);
		shmrun_kv_free(&t->kv);
		shmrun_timers_free(&t->timers);
		free(t->ns_key);
	}
	for (uint32_t c = 0; c < w->nouts; c++) {
		shmrun_ring_detach(&w->outs[c].ring);
		free(w->outs[c].ovf);
		free(w->outs[c].batch);
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
 * The end of a loop turn: the combiners of every task whose input drained
 * (not busy, itself or through a forward upstream) send their partials; then
 * every open batch goes into its ring and every ring is published. A record
 * therefore waits for company at most until the end of the turn that made
 * it, a partial until its task's input drains (or COMB_MAX_FOLDS records).
 */
static void end_of_turn(struct shmrun_worker *w)
{
	for (uint32_t x = 0; x < w->ntasks && !w->failed; x++) {
		struct shmrun_task *t = &w->tasks[x];

		for (uint32_t o = 0; o < t->nouts && t->busy; o++)
			if (t->outs[o].kind == SHMRUN_EDGE_FORWARD)
				t->outs[o].forward->busy = true; /* tasks are in topological order */
		if (!t->busy)
			comb_flush_task(t);
		t->busy = false;
	}
	for (uint32_t c = 0; c < w->nouts; c++) {
		if (w->outs[c].batch_len && chan_flush_batch(&w->outs[c]) && !w->failed) {
			snprintf(w->stats->error, sizeof(w->stats->error),
				 "cannot queue output behind a full ring: out of memory");
			w->failed = true;
		}
		shmrun_ring_flush(&w->outs[c].ring);
	}
}

/* @t made progress this turn: its forward successors' inputs from it are not idle. */
static void mark_forward_active(struct shmrun_task *t)
{
	for (uint32_t o = 0; o < t->nouts; o++)
		if (t->outs[o].kind == SHMRUN_EDGE_FORWARD)
			wm_input_active(t->outs[o].forward,
					&t->outs[o].forward->fwd_wm[t->outs[o].fwd_slot]);
}

/*
 * Whether paced source @t lets a sibling go first this turn: an instance of
 * its stage on this worker, paced, producing and not parked, that has used
 * PRODUCE_BUDGET tokens fewer (pace.c, "Fairness within a worker").
 */
static bool rate_defers(const struct shmrun_task *t)
{
	const struct shmrun_worker *w = t->w;

	for (uint32_t i = 0; i < w->ntasks; i++) {
		const struct shmrun_task *u = &w->tasks[i];

		if (u != t && u->stage == t->stage && u->rate && !u->ended && !u->exhausted &&
		    u->rate_used + PRODUCE_BUDGET <= t->rate_used && !task_parked(u))
			return true;
	}
	return false;
}

/*
 * One task's share of a loop turn: a source's barrier and produce() budget,
 * or a budget of frames from each of its open input rings. Return: progress.
 */
static uint32_t step_task(struct shmrun_worker *w, struct shmrun_task *t)
{
	uint32_t progress = 0;

	if (t->op->flags & SHMRUN_OP_SOURCE) {
		uint64_t before = t->records_in, where;
		int r, budget;

		if (w->checkpointing) {
			r = source_barrier(t);
			progress += r > 0;
			if (t->ended || t->exhausted || r < 0)
				return progress;
		}
		/* no clock read for an unpaced source: this runs every turn */
		if (t->rate && rate_defers(t))
			return progress; /* a sibling on this worker is behind: its turn */
		budget = t->rate ? source_budget(t, shmrun_now_ns()) : (int)PRODUCE_BUDGET;
		if (budget == 0)
			return progress; /* paced: not yet */
		where = cb_enter(t, SHMRUN_CB_PRODUCE);
		r = t->op->produce(t, t->state, (uint32_t)budget);
		cb_leave(t, where);
		rate_return(t, (uint64_t)budget, t->records_in - before);
		/* busy: it had more than a whole budget to give (a paced source is
		 * held back by its pace, not by work in hand: its partials go
		 * out every turn) */
		t->busy = r > 0 && !t->rate && t->records_in - before >= (uint64_t)budget;
		progress += (uint32_t)(t->records_in - before) + (r <= 0);
		if (t->records_in != before && w->wm_clocked)
			mark_forward_active(t);
		if (r < 0) {
			if (!w->failed)
				shmrun_task_error(t, "produce failed: %s", strerror(-r));
			note_fail_errno(w, r);
		} else if (r == 0 && w->checkpointing) {
			/* wait for the final epoch, which ends it; its watermark
			 * is MAX now: a finished source holds nobody back */
			t->exhausted = true;
			atomic_store_explicit(&w->slots[t->id].exhausted, 1, memory_order_release);
			wm_advance(t, SHMRUN_WATERMARK_MAX, true);
		} else if (r == 0) {
			task_end(t, 0, false);
		}
		return progress;
	}
	for (uint32_t i = 0; i < t->nins && !t->ended; i++)
		if (!t->ins[i]->ended && !t->ins[i]->held)
			progress += read_channel(t, t->ins[i]);
	if (progress && w->wm_clocked)
		mark_forward_active(t);
	if (!progress && t->nins && t->op->flush)
		flush_task(t, 0); /* its input drained */
	return progress;
}

/* ---- live counters (metrics.h) ---------------------------------------------- */

#define METRICS_PUBLISH_NS 1000000 /* publish at most once a millisecond */

#define PUT(field, v) atomic_store_explicit(&(field), (v), memory_order_relaxed)

/*
 * Store every counter of the worker's tasks and channels in the metrics
 * block: relaxed stores to lines only this worker writes (metrics.h).
 */
static void metrics_publish(struct shmrun_worker *w, int64_t now)
{
	for (uint32_t x = 0; x < w->ntasks; x++) {
		struct shmrun_task *t = &w->tasks[x];
		struct shmrun_metrics_task *m = t->mx;

		/* a source's records in are those it read, a sink's records
		 * out those it wrote (shmrun_task_count()); no other operator
		 * counts them, so the sums count nothing twice */
		PUT(m->records_in, t->m_in + t->records_in);
		PUT(m->records_out, t->m_out + t->records_out);
		PUT(m->bytes_in, t->m_in_bytes + t->m_src_pos);
		PUT(m->bytes_out, t->m_out_bytes);
		PUT(m->busy_ns, t->m_busy_ns);
		PUT(m->idle_ns, t->m_idle_ns);
		PUT(m->backpressure_ns, t->m_bp_ns);
		PUT(m->watermark, t->wm);
		PUT(m->state_bytes, t->kv.bytes);
		PUT(m->keys, t->kv.keys);
		PUT(m->records_bad, t->m_bad0 + t->records_bad);
		PUT(m->records_late, t->m_late0 + t->records_late);
		PUT(m->source_pos, t->m_src_pos);
		PUT(m->source_total, t->m_src_total);
		PUT(m->parked, (uint32_t)(!t->ended && task_parked(t)));
		PUT(m->ended, (uint32_t)t->ended);
	}
	for (uint32_t c = 0; c < w->nouts; c++) {
		struct chan_out *o = &w->outs[c];

		PUT(o->mx->tail, o->ring.tail_pub);
		PUT(o->mx->frames, o->frames);
		PUT(o->mx->overflow_frames, o->ovf_frames);
	}
	for (uint32_t c = 0; c < w->nins; c++)
		PUT(w->ins[c].mx->head, w->ins[c].ring.head);
	PUT(w->mxw->turns, w->m_turns);
	PUT(w->mxw->sleep_ns, w->m_sleep_ns);
	PUT(w->mxw->heartbeat_ns, shmrun_wall_ns());
	w->m_pub_ns = now;
	w->m_dirty = false;
}

/*
 * The end of a loop turn: each task's time since the last turn ended is its
 * busy time (measured around its share, step_task()) and the rest, which is
 * backpressure while it is parked and idle otherwise (the worker ran other
 * tasks or slept). So busy + idle + backpressure is the task's wall time.
 * Publishes at most every METRICS_PUBLISH_NS.
 */
static void metrics_turn(struct shmrun_worker *w, uint32_t progress)
{
	int64_t now = shmrun_now_ns(), dt = now - w->m_last_ns;

	for (uint32_t x = 0; x < w->ntasks; x++) {
		struct shmrun_task *t = &w->tasks[x];
		int64_t busy = t->m_turn_ns < dt ? t->m_turn_ns : dt;

		t->m_turn_ns = 0;
		if (t->ended)
			continue;
		t->m_busy_ns += (uint64_t)busy;
		if (task_parked(t))
			t->m_bp_ns += (uint64_t)(dt - busy);
		else
			t->m_idle_ns += (uint64_t)(dt - busy);
	}
	w->m_last_ns = now;
	w->m_turns++;
	w->m_dirty |= progress != 0;
	if (now - w->m_pub_ns >= METRICS_PUBLISH_NS)
		metrics_publish(w, now);
}

/*
 * The worker's tasks and line in the metrics block. Counters are totals
 * since the launcher started, and a restarted worker's own start at 0: each
 * takes what the block holds as its start (a source's and a sink's operator
 * counts start again at 0 and add to it), so no total ever goes back.
 */
static void metrics_attach(struct shmrun_worker *w)
{
	w->mxw = shmrun_metrics_worker(w->mx, w->index);
	for (uint32_t x = 0; x < w->ntasks; x++) {
		struct shmrun_task *t = &w->tasks[x];
		struct shmrun_metrics_task *m = shmrun_metrics_task(w->mx, t->id);

		t->mx = m;
		t->m_in = SHMRUN_METRIC(m->records_in);
		t->m_out = SHMRUN_METRIC(m->records_out);
		t->m_in_bytes = SHMRUN_METRIC(m->bytes_in);
		t->m_out_bytes = SHMRUN_METRIC(m->bytes_out);
		t->m_busy_ns = SHMRUN_METRIC(m->busy_ns);
		t->m_idle_ns = SHMRUN_METRIC(m->idle_ns);
		t->m_bp_ns = SHMRUN_METRIC(m->backpressure_ns);
		t->m_bad0 = SHMRUN_METRIC(m->records_bad);
		t->m_late0 = SHMRUN_METRIC(m->records_late);
	}
	w->m_turns = SHMRUN_METRIC(w->mxw->turns);
	w->m_sleep_ns = SHMRUN_METRIC(w->mxw->sleep_ns);
	w->m_snap0 = SHMRUN_METRIC(w->mxw->snapshots);
	w->m_last_ns = shmrun_now_ns();
}

void shmrun_task_source_progress(struct shmrun_task *t, uint64_t pos, uint64_t total)
{
	t->m_src_pos = pos;
	t->m_src_total = total;
}

static uint32_t step(struct shmrun_worker *w)
{
	uint32_t progress = 0;
	int64_t t0 = w->mx ? shmrun_now_ns() : 0;

	if (w->wm_clocked)
		w->turn_ns = shmrun_now_ns();
	for (uint32_t c = 0; c < w->nouts; c++)
		if (chan_backlogged(&w->outs[c]))
			progress += chan_drain(&w->outs[c]);
	for (uint32_t x = w->ntasks; x-- > 0 && !w->failed;) {
		struct shmrun_task *t = &w->tasks[x];

		if (t->align_epoch && w->checkpointing)
			drop_aborted(t);
		if (t->ended || task_parked(t))
			continue;
		progress += step_task(w, t);
		if (w->mx) {
			int64_t t1 = shmrun_now_ns();

			t->m_turn_ns += t1 - t0;
			t0 = t1;
		}
	}
	if (w->wm_clocked && !w->failed)
		progress += wm_tick(w, w->turn_ns);
	end_of_turn(w);
	if (w->checkpointing) {
		progress += commit_epochs(w);
		if (w->index == 0)
			progress += shmrun_coordinate(&w->co, w->plan, w->ctl, shmrun_now_ns());
	}
	if (w->mx)
		metrics_turn(w, progress);
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
		atomic_fetch_add_explicit(&stats->records_bad, t->records_bad, memory_order_relaxed);
		atomic_fetch_add_explicit(&stats->records_late, t->records_late, memory_order_relaxed);
		atomic_fetch_add_explicit(&stats->keys, t->kv.keys, memory_order_relaxed);
		atomic_fetch_add_explicit(&stats->state_bytes, t->kv.bytes, memory_order_relaxed);
		atomic_fetch_add_explicit(&stats->state_peak_bytes, t->kv.peak,
					  memory_order_relaxed);
		atomic_fetch_add_explicit(&stats->key_bytes, t->kv.key_bytes, memory_order_relaxed);
	}
	for (uint32_t c = 0; c < w->nouts; c++) {
		atomic_fetch_add_explicit(&stats->frames, w->outs[c].frames, memory_order_relaxed);
		atomic_fetch_add_explicit(&stats->overflow_frames, w->outs[c].ovf_frames,
					  memory_order_relaxed);
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

/*
 * Setup phase: refuse a control area of another layout, then set up tasks
 * and rings (setup()); a failure is logged and what was set up torn down.
 * Return: 0, or 1 (the worker's exit status).
 */
static int start_worker(struct shmrun_worker *w)
{
	char why[200];
	int err;

	/* a control area of another layout: refuse it before touching it */
	if (shmrun_control_check(w->ctl, w->plan->workers, w->plan->ntasks, why, sizeof(why))) {
		shmrun_log(SHMRUN_LOG_ERROR, "worker %u: %s", w->index, why);
		return 1;
	}
	atomic_store_explicit(&w->stats->pid, (int32_t)getpid(), memory_order_relaxed);
	err = shmrun_state_arena_init();
	if (!err)
		err = setup(w);
	if (err) {
		if (!w->failed)
			snprintf(w->stats->error, sizeof(w->stats->error), "worker setup failed: %s",
				 strerror(-err));
		shmrun_log(SHMRUN_LOG_ERROR, "%s", w->stats->error);
		teardown(w);
		return 1;
	}
	return 0;
}

/*
 * Open phase: open every task, in order, and hand it its restored
 * per-worker entries; the first failure marks the worker failed.
 */
static void open_tasks(struct shmrun_worker *w)
{
	int err;

	for (uint32_t x = 0; x < w->ntasks && !w->failed; x++) {
		struct shmrun_task *t = &w->tasks[x];
		uint64_t where;

		err = 0;
		if (t->op->open) {
			where = cb_enter(t, SHMRUN_CB_OPEN);
			err = t->op->open(t, &t->state);
			cb_leave(t, where);
		}
		if (err) {
			if (!w->failed)
				shmrun_task_error(t, "open failed: %s", strerror(-err));
			note_fail_errno(w, err);
			break;
		}
		t->opened = true;
		err = shmrun_snapshot_restore_entries(t);
		if (err && !w->failed)
			shmrun_task_error(t, "restore of per-worker state failed");
		if (err)
			note_fail_errno(w, err);
	}
}

/*
 * Loop phase: turn (step()) until every task ended, the worker failed (or
 * the job's checkpoint did), or a stop; flush and idle between turns.
 */
static void run_loop(struct shmrun_worker *w)
{
	struct shmrun_control *ctl = w->ctl;
	int64_t idle_since = 0;
	uint32_t turns = 0;
	uint64_t beats = 0;

	while (!w->failed && !*w->stop) {
		/* relaxed: a liveness hint for worker 0's timeout message */
		atomic_store_explicit(&w->stats->heartbeat, ++beats, memory_order_relaxed);
		if (atomic_load_explicit(&ctl->failed, memory_order_acquire)) {
			snprintf(w->stats->error, sizeof(w->stats->error), "%s%.400s",
				 ctl->failed_why[0] ? "checkpoint failed: " : "the final checkpoint failed",
				 ctl->failed_why);
			w->failed = true;
			break;
		}
		if (w->nchildren && (++turns & 63) == 0)
			reap_children(w);
		if (step(w)) {
			idle_since = 0;
			flush_tasks(w, true);
			continue;
		}
		flush_tasks(w, false); /* nothing to do: every input drained */
		if (all_done(w))
			break;
		reap_children(w);
		if (w->mx) {
			int64_t t0 = shmrun_now_ns();

			/* what the turns since the last publication did is
			 * published before sleeping: a ring this worker drained
			 * must not look full to a reader while it sleeps */
			if (w->m_dirty)
				metrics_publish(w, t0);
			idle_wait(w, &idle_since);
			w->m_sleep_ns += (uint64_t)(shmrun_now_ns() - t0);
		} else {
			idle_wait(w, &idle_since);
		}
	}
	if (*w->stop && !w->failed)
		flush_tasks(w, false); /* a stop without final checkpoint: whole lines out */
}

/*
 * End phase: wait for the snapshot children still writing, up to 10 s (the
 * comment inside says why).
 */
static void wait_children(struct shmrun_worker *w)
{
	struct shmrun_control *ctl = w->ctl;

	/* Snapshot children still writing (late writers of an aborted epoch)
	 * are waited for, up to 10 s: each removes what it wrote once it sees
	 * the abort, which it could not do if this worker's exit killed it
	 * (PR_SET_PDEATHSIG) mid-way. When the job fails on a checkpoint, the
	 * other workers' writers too (ctl->writers): the launcher kills every
	 * worker once one has exited. What a killed one leaves is removed at
	 * the next start (shmrun_ckpt_remove_incomplete()). */
	reap_children(w);
	for (int64_t until = shmrun_now_ns() + 10000000000LL;
	     (w->nchildren ||
	      (atomic_load_explicit(&ctl->failed, memory_order_acquire) &&
	       atomic_load_explicit(&ctl->writers, memory_order_relaxed))) &&
	     shmrun_now_ns() < until;) {
		usleep(1000);
		reap_children(w);
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
		.mx = shmrun_run_metrics,
	};
	int err;

	if (start_worker(&w))
		return 1;
	if (w.mx)
		metrics_attach(&w);
	open_tasks(&w);
	flush_setup(&w);
	w.co.next_ns = shmrun_now_ns() + (int64_t)plan->job->checkpoint_interval_ns;
	if (ctl->restored_finished) {
		/* Restored from the end-of-input checkpoint of a finished run: the
		 * restore above completed any interrupted sink commit; there is
		 * nothing left to process (end_of_input must not run twice). */
		for (uint32_t x = 0; x < w.ntasks; x++)
			w.tasks[x].ended = true;
		goto done;
	}
	wm_setup(&w);
	run_loop(&w);
done:
	wait_children(&w);
	publish_stats(&w);
	if (w.mx)
		metrics_publish(&w, shmrun_now_ns());
	err = w.failed ? 1 : *stop ? 3 : 0;
	teardown(&w);
	return err;
}
