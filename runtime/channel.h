/*
 * runtime/channel.h: one worker's end of a channel, the overflow queue behind a
 * full ring, and the record frame (private to runtime/).
 *
 * What it is for. Every edge that is not a forward edge is a set of channels,
 * one SPSC ring (shm/ring.h) per (sender, receiver) pair. The sender holds a
 * struct chan_out, the receiver a struct chan_in. This header owns what goes
 * into a frame and how it comes out again; the worker loop (worker.c) decides
 * when to write, read, park and drain.
 *
 * Batch frames. A DATA frame carries one or more records back to back (a
 * batch; docs/data-path.md), each as (host byte order, the same host):
 *
 *     [u32 key_len][u32 value_len][u64 key hash][i64 event_time_ns]?[key][value]
 *      \______________ REC_HDR = 16 ______________/ \_ 8, REC_TIMED _/
 *
 * Records are not padded. The event time is present in every record of a
 * frame with flag REC_TIMED (a record without one then carries 0) and in none
 * otherwise. The key hash (XXH3-64 of the key, which picked the vnode and so
 * the receiver) travels along so the receiver's key-bound state does not hash
 * the key again. A frame with flag REC_COMBINED carries partial aggregates of
 * the receiving operator's combiner (the value is the partial). A sender
 * builds each channel's batch in private memory (chan_out.batch) and puts it
 * into the ring as one frame when it is full (BATCH_BYTES), when the sending
 * task's input has drained, and before any other frame kind; a record larger
 * than a batch goes alone in a frame of its size.
 *
 * The overflow queue. Emit never waits on a full ring (docs/design.md §5): a
 * frame that does not fit is appended to the channel's overflow buffer, in the
 * encoding
 *
 *     [u32 len][u16 kind][u16 flags][payload, padded to 8 bytes]
 *
 * and moved into the ring by chan_drain() when room appears. Invariants:
 * - order: once a channel is backlogged (frames queued), every later frame of
 *   that channel is queued behind them, never written to the ring ahead of
 *   them; the receiver sees the frames in the order they were put;
 * - the counter *backlogged (the worker's) counts the channels of the worker
 *   that have queued frames: it rises when a channel's queue becomes non-empty
 *   and falls when chan_drain() empties it, so the loop asks one integer
 *   whether any task may be parked.
 *
 * Hot path. chan_put_record() and chan_decode_record() run once per record per
 * channel: they are static inline here, so the fixed-size copies stay inlined
 * into the worker's emit and read loops as they were when this lived in
 * worker.c. The rest (queueing, draining) runs only at a full ring.
 *
 * Designs rejected:
 * - blocking on a full ring: two workers each writing into the other's full
 *   ring deadlock (docs/design.md §5);
 * - fragmenting records larger than a frame: a record larger than the ring's
 *   largest frame is refused with a message saying which ring_bytes holds it;
 * - queueing in the ring's own memory: the ring layout is shared with another
 *   process and fixed; the queue is the sender's private memory.
 */
#ifndef SHMRUN_RT_CHANNEL_H
#define SHMRUN_RT_CHANNEL_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "combine.h"
#include "shmrun/job.h"
#include "shmrun/operator.h"
#include "shmrun/ring.h"
#include "watermark.h"

#define REC_HDR 16u       /* record header bytes before the optional time */
#define REC_TIMED 0x1u    /* frame flag: an 8-byte event time follows each header */
#define REC_COMBINED 0x2u /* frame flag: the records are partials (struct shmrun_combiner) */
#define BATCH_BYTES 16384u /* a batch frame's payload, at most (an eighth of a small ring) */
#define BATCH_SLACK 16u   /* bytes past batch_cap a short copy may touch */

struct shmrun_task;
struct shmrun_metrics_chan;

/* A producer's view of one channel, with its overflow for a full ring. */
struct chan_out {
	struct shmrun_ring ring;
	uint32_t *backlogged; /* the worker's count of backlogged channels (not owned) */
	uint32_t src_task, dst_task;
	unsigned char *ovf; /* encoded frames waiting for room: [u32 len][u16 kind][u16 flags][payload] */
	size_t ovf_off, ovf_len, ovf_cap;
	unsigned char *batch; /* the open batch: batch_cap + BATCH_SLACK bytes, owned */
	uint32_t batch_len;   /* bytes of records in it */
	uint32_t batch_cap;   /* min(BATCH_BYTES, an eighth of the ring) */
	uint16_t batch_flags; /* REC_* flags of the records in it */
	uint64_t frames;      /* frames put on this channel */
	uint64_t ovf_frames;  /* of which went through the overflow queue */
	struct shmrun_metrics_chan *mx; /* its live counters (metrics.h), or NULL */
};

struct chan_in {
	struct shmrun_ring ring;
	bool ended;
	uint64_t held; /* barrier epoch this channel is held back for (aligning), 0 if none */
	struct wm_input wmi; /* its watermark and idleness (watermark.h) */
	uint32_t input;      /* its upstream's index in the reading stage's `input =` list
				(shmrun_task_input()) */
	struct shmrun_metrics_chan *mx; /* its live counters (metrics.h), or NULL */
};

struct out_edge {
	enum shmrun_edge_kind kind;
	struct shmrun_task *forward; /* FORWARD: the downstream task, same worker */
	uint32_t fwd_slot;           /* FORWARD: this edge's index in forward->fwd_wm */
	uint32_t fwd_input;          /* FORWARD: this stage's index in the `input =` list
					of forward's stage (shmrun_task_input()) */
	struct chan_out **chans;     /* others: one per downstream instance */
	uint32_t nchans;
	uint32_t rr;                 /* REBALANCE cursor */
	uint32_t *instance_of_vnode; /* SHUFFLE: vnode -> downstream instance */
	uint32_t max_payload;        /* largest frame payload of these rings */
	bool combining;              /* SHUFFLE into a stage that combines: comb is set up */
	struct combiner comb;        /* the sending side of that stage's combiner */
	uint64_t add_where;          /* combining: cb_where of its add() (callback.h) */
};

/* A frame's payload in up to four pieces (record header, time, key, value). */
struct pieces {
	const void *p[4];
	uint32_t n[4];
	uint32_t total;
	uint16_t flags; /* frame flags */
};

/*
 * chan_backlogged() - whether @c has frames queued behind its ring. Every
 * frame put on @c while it is goes to the back of the queue.
 */
static inline bool chan_backlogged(const struct chan_out *c)
{
	return c->ovf_off < c->ovf_len;
}

/*
 * chan_ovf_append() - queue one frame of @kind, payload @pc (@pc->total bytes,
 * flags @pc->flags), at the back of @c's overflow; the queue grows as needed
 * (doubling, from 64 KiB) and is owned by @c (freed by its owner with free()).
 * Increments *@c->backlogged when the queue was empty. Return: 0, or -ENOMEM
 * (nothing queued).
 */
int chan_ovf_append(struct chan_out *c, uint16_t kind, const struct pieces *pc);

/*
 * chan_put() - write one frame of @kind with payload @pc into @c's ring (it
 * is published by the next shmrun_ring_flush()), or queue it behind a full or
 * already backlogged ring. Never waits. @pc->total must fit the ring
 * (shmrun_ring_max_payload()). Return: 0, -ENOMEM (the queue cannot grow), or
 * a negative errno of shmrun_ring_reserve() other than -EAGAIN.
 */
int chan_put(struct chan_out *c, uint16_t kind, const struct pieces *pc);

/*
 * chan_drain() - move queued frames of @c into its ring, in order, while they
 * fit. Decrements *@c->backlogged when the queue empties. Return: frames
 * moved (0 for a channel with nothing queued or a ring still full).
 */
uint32_t chan_drain(struct chan_out *c);

/*
 * chan_batch_init() - give @c its batch buffer, sized for its ring (call after
 * the ring is attached). Return: 0 or -ENOMEM.
 */
int chan_batch_init(struct chan_out *c);

/*
 * chan_flush_batch() - put @c's open batch, if any, into its ring as one DATA
 * frame (or queue it behind a full ring). Return: as chan_put().
 */
int chan_flush_batch(struct chan_out *c);

/*
 * chan_put_alone() - @rec (hash @hash, frame flags @flags) as the only record
 * of a frame of its own: for a record larger than a batch. @c's batch must be
 * empty. Return: as chan_put().
 */
int chan_put_alone(struct chan_out *c, const struct shmrun_record *rec, uint64_t hash,
		   uint16_t flags, uint32_t need);

/*
 * chan_rec_bytes() - bytes @rec takes in a batch with frame flags @flags:
 * header, event time when REC_TIMED, key and value. 64 bits: may exceed any
 * ring.
 */
static inline uint64_t chan_rec_bytes(const struct shmrun_record *rec, uint16_t flags)
{
	return (uint64_t)REC_HDR + ((flags & REC_TIMED) ? 8 : 0) + rec->key_len + rec->value_len;
}

/*
 * chan_copy_short() - copy @n bytes (any n) without a libc call for n <= 16:
 * @dst must have BATCH_SLACK writable bytes past @n; @src is read only within
 * [src, src + n).
 */
static inline void chan_copy_short(unsigned char *dst, const void *src, uint32_t n)
{
	const unsigned char *s = src;

	if (n >= 8 && n <= 16) {
		uint64_t a, b;

		memcpy(&a, s, 8);
		memcpy(&b, s + n - 8, 8);
		memcpy(dst, &a, 8);
		memcpy(dst + n - 8, &b, 8);
	} else if (n >= 4 && n < 8) {
		uint32_t a, b;

		memcpy(&a, s, 4);
		memcpy(&b, s + n - 4, 4);
		memcpy(dst, &a, 4);
		memcpy(dst + n - 4, &b, 4);
	} else if (n < 4) {
		for (uint32_t i = 0; i < n; i++)
			dst[i] = s[i];
	} else {
		memcpy(dst, s, n);
	}
}

/*
 * chan_put_rec() - append @rec (key hash @hash) to @c's open batch, with
 * frame flags @flags (REC_TIMED when the record has an event time,
 * REC_COMBINED for a partial); @need = chan_rec_bytes(@rec, @flags), checked
 * by the caller to fit the ring. The batch goes into the ring first when the
 * record does not fit it or its flags differ; a record larger than a batch
 * goes alone. Return: 0, or as chan_put().
 */
static inline int chan_put_rec(struct chan_out *c, const struct shmrun_record *rec, uint64_t hash,
			       uint16_t flags, uint32_t need)
{
	unsigned char *p;

	if (__builtin_expect(c->batch_len + need > c->batch_cap ||
				     (c->batch_len && flags != c->batch_flags),
			     0)) {
		int err = chan_flush_batch(c);

		if (err)
			return err;
		if (need > c->batch_cap)
			return chan_put_alone(c, rec, hash, flags, need);
	}
	c->batch_flags = flags;
	p = c->batch + c->batch_len;
	memcpy(p, &rec->key_len, 4);
	memcpy(p + 4, &rec->value_len, 4);
	memcpy(p + 8, &hash, 8);
	p += REC_HDR;
	if (flags & REC_TIMED) {
		memcpy(p, &rec->event_time_ns, 8);
		p += 8;
	}
	chan_copy_short(p, rec->key, rec->key_len);
	p += rec->key_len;
	if (rec->value_len)
		chan_copy_short(p, rec->value, rec->value_len);
	c->batch_len += need;
	return 0;
}

/*
 * chan_next_record() - decode the record at *@pp of a DATA frame with flags
 * @flags whose payload ends at @end: @rec's key and value point into the
 * payload (valid until the frame is released), @hash gets the key hash the
 * sender computed, *@pp moves past the record. Return: 0, or -EBADMSG when
 * the record runs past @end (@rec and @hash then undefined).
 */
static inline int chan_next_record(const unsigned char **pp, const unsigned char *end,
				   uint16_t flags, struct shmrun_record *rec, uint64_t *hash)
{
	const unsigned char *p = *pp;
	uint32_t kl, vl;
	size_t hl = REC_HDR + ((flags & REC_TIMED) ? 8 : 0);

	if ((size_t)(end - p) < hl)
		return -EBADMSG;
	memcpy(&kl, p, 4);
	memcpy(&vl, p + 4, 4);
	memcpy(hash, p + 8, 8);
	rec->event_time_ns = 0;
	if (flags & REC_TIMED)
		memcpy(&rec->event_time_ns, p + REC_HDR, 8);
	p += hl;
	if ((uint64_t)kl + vl > (uint64_t)(end - p))
		return -EBADMSG;
	rec->key = p;
	rec->key_len = kl;
	rec->value = p + kl;
	rec->value_len = vl;
	*pp = p + kl + vl;
	return 0;
}

#endif /* SHMRUN_RT_CHANNEL_H */
