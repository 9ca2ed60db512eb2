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
 * Record encoding in a DATA frame's payload (host byte order, the same host):
 *
 *     [u32 key_len][u32 value_len][u64 key hash][i64 event_time_ns]?[key][value]
 *      \______________ REC_HDR = 16 ______________/ \_ 8, REC_TIMED _/
 *
 * The event time is present only when non-zero (frame flag REC_TIMED). The key
 * hash (XXH3-64 of the key, which picked the vnode and so the receiver) travels
 * along so the receiver's key-bound state does not hash the key again.
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

#include "shmrun/job.h"
#include "shmrun/operator.h"
#include "shmrun/ring.h"

#define REC_HDR 16u    /* record header bytes before the optional time */
#define REC_TIMED 0x1u /* frame flag: an 8-byte event time follows the header */

struct shmrun_task;

/* A producer's view of one channel, with its overflow for a full ring. */
struct chan_out {
	struct shmrun_ring ring;
	uint32_t *backlogged; /* the worker's count of backlogged channels (not owned) */
	uint32_t src_task, dst_task;
	unsigned char *ovf; /* encoded frames waiting for room: [u32 len][u16 kind][u16 flags][payload] */
	size_t ovf_off, ovf_len, ovf_cap;
};

struct chan_in {
	struct shmrun_ring ring;
	bool ended;
	uint64_t held; /* barrier epoch this channel is held back for (aligning), 0 if none */
};

struct out_edge {
	enum shmrun_edge_kind kind;
	struct shmrun_task *forward; /* FORWARD: the downstream task, same worker */
	struct chan_out **chans;     /* others: one per downstream instance */
	uint32_t nchans;
	uint32_t rr;                 /* REBALANCE cursor */
	uint32_t *instance_of_vnode; /* SHUFFLE: vnode -> downstream instance */
	uint32_t max_payload;        /* largest frame payload of these rings */
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
 * chan_record_header() - the first REC_HDR bytes of @rec's DATA payload into
 * @hdr: key and value lengths and @hash, the XXH3-64 of the key.
 */
static inline void chan_record_header(unsigned char hdr[REC_HDR], const struct shmrun_record *rec,
				      uint64_t hash)
{
	memcpy(hdr, &rec->key_len, 4);
	memcpy(hdr + 4, &rec->value_len, 4);
	memcpy(hdr + 8, &hash, 8);
}

/*
 * chan_record_bytes() - payload bytes of @rec's DATA frame: header, event
 * time when non-zero, key and value. 64 bits: may exceed any ring.
 */
static inline uint64_t chan_record_bytes(const struct shmrun_record *rec)
{
	return (uint64_t)REC_HDR + (rec->event_time_ns != 0 ? 8 : 0) + rec->key_len +
	       rec->value_len;
}

/*
 * chan_put_record() - a DATA frame of @rec on channel @c, with header @hdr
 * (chan_record_header()), the event time when @timed, and @total payload
 * bytes (chan_record_bytes(), checked by the caller to fit the ring): written
 * straight into the ring in the common case (fixed-size copies the compiler
 * inlines), queued behind a full or already backlogged ring otherwise.
 * Return: as chan_put().
 */
static inline int chan_put_record(struct chan_out *c, const unsigned char *hdr,
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

		return chan_ovf_append(c, SHMRUN_FRAME_DATA, &pc);
	}
}

/*
 * chan_decode_record() - the record in DATA frame @f: @rec's key and value
 * point into @f's payload (valid until the frame is released), @hash gets the
 * key hash the sender computed. Return: 0, or -EBADMSG when the lengths in the
 * header do not add up to the frame's length (@rec and @hash then undefined).
 */
static inline int chan_decode_record(const struct shmrun_frame *f, struct shmrun_record *rec,
				     uint64_t *hash)
{
	uint32_t kl, vl, hl = REC_HDR;

	*rec = (struct shmrun_record){.event_time_ns = 0};
	if (f->len < REC_HDR)
		return -EBADMSG;
	memcpy(&kl, f->payload, 4);
	memcpy(&vl, f->payload + 4, 4);
	memcpy(hash, f->payload + 8, 8);
	if (f->flags & REC_TIMED) {
		if (f->len < REC_HDR + 8)
			return -EBADMSG;
		memcpy(&rec->event_time_ns, f->payload + REC_HDR, 8);
		hl += 8;
	}
	if ((uint64_t)hl + kl + vl != f->len)
		return -EBADMSG;
	rec->key = f->payload + hl;
	rec->key_len = kl;
	rec->value = f->payload + hl + kl;
	rec->value_len = vl;
	return 0;
}

#endif /* SHMRUN_RT_CHANNEL_H */
