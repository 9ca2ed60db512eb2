/*
 * runtime/channel.c: the overflow queue of a channel (channel.h), what runs
 * when a ring is full.
 *
 * What it is for. A sender never waits for room (docs/design.md §5): a frame
 * that does not fit its ring, or that comes while older frames of the same
 * channel still wait, goes to the back of the channel's overflow buffer, and
 * chan_drain() moves the queue into the ring, oldest first, as the receiver
 * frees room. The buffer is the sender's private memory.
 *
 * Invariants (channel.h): frames leave a channel in the order they were put;
 * *backlogged counts the worker's channels whose queue is non-empty, exactly.
 * The queue is consumed from ovf_off and appended at ovf_len; it is compacted
 * (memmove to the front) only when an append would otherwise grow it, and
 * starts again at offset 0 on the first append after it drained; a channel
 * that overflows now and then keeps one buffer of its worst burst's size.
 *
 * The record encoding and the per-record fast path are static inline in
 * channel.h; nothing here runs per record while rings have room.
 *
 * Designs rejected: a linked list of queued frames (one allocation per frame
 * at the moment memory is tightest); a bounded queue that drops or blocks
 * (drops lose records, blocking deadlocks two workers: the overflow of a
 * parked task is bounded instead by what one input record or one produce()
 * budget expands to, worker.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "channel.h"
#include "util.h"

static void copy_pieces(unsigned char *dst, const struct pieces *pc)
{
	for (int i = 0; i < 4; i++)
		if (pc->n[i]) {
			memcpy(dst, pc->p[i], pc->n[i]);
			dst += pc->n[i];
		}
}

int chan_ovf_append(struct chan_out *c, uint16_t kind, const struct pieces *pc)
{
	size_t need = 8 + (((size_t)pc->total + 7) & ~(size_t)7);

	if (c->ovf_off == c->ovf_len)
		c->ovf_off = c->ovf_len = 0;
	if (c->ovf_len + need > c->ovf_cap && c->ovf_off > 0) {
		memmove(c->ovf, c->ovf + c->ovf_off, c->ovf_len - c->ovf_off);
		c->ovf_len -= c->ovf_off;
		c->ovf_off = 0;
	}
	if (shmrun_grow(&c->ovf, &c->ovf_cap, c->ovf_len + need, 1, 65536))
		return -ENOMEM;
	if (c->ovf_off == c->ovf_len)
		(*c->backlogged)++; /* this channel becomes backlogged */
	memcpy(c->ovf + c->ovf_len, &pc->total, 4);
	memcpy(c->ovf + c->ovf_len + 4, &kind, 2);
	memcpy(c->ovf + c->ovf_len + 6, &pc->flags, 2);
	copy_pieces(c->ovf + c->ovf_len + 8, pc);
	c->ovf_len += need;
	return 0;
}

/* Write one frame, or queue it behind a full ring (never waits). */
int chan_put(struct chan_out *c, uint16_t kind, const struct pieces *pc)
{
	struct shmrun_frame *f;
	int err;

	if (kind != SHMRUN_FRAME_DATA && c->batch_len) {
		/* nothing goes ahead of the records before it */
		err = chan_flush_batch(c);
		if (err)
			return err;
	}
	c->frames++;
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
	c->ovf_frames++;
	return chan_ovf_append(c, kind, pc);
}

int chan_batch_init(struct chan_out *c)
{
	/* an eighth of the ring at most: a small ring then holds several
	 * batches, and a full one is rare (it overflowed on 63% of frames with
	 * half-ring batches on 4 KiB rings) */
	uint64_t eighth = c->ring.capacity / 8;

	c->batch_cap = eighth < BATCH_BYTES ? (uint32_t)eighth : BATCH_BYTES;
	c->batch_len = 0;
	c->batch = malloc((size_t)c->batch_cap + BATCH_SLACK);
	return c->batch ? 0 : -ENOMEM;
}

int chan_flush_batch(struct chan_out *c)
{
	struct pieces pc = {.p = {c->batch}, .n = {c->batch_len}, .total = c->batch_len,
			    .flags = c->batch_flags};

	if (!c->batch_len)
		return 0;
	c->batch_len = 0;
	return chan_put(c, SHMRUN_FRAME_DATA, &pc);
}

int chan_put_alone(struct chan_out *c, const struct shmrun_record *rec, uint64_t hash,
		   uint16_t flags, uint32_t need)
{
	unsigned char hdr[REC_HDR];
	struct pieces pc = {
		.p = {hdr, &rec->event_time_ns, rec->key, rec->value},
		.n = {REC_HDR, (flags & REC_TIMED) ? 8 : 0, rec->key_len, rec->value_len},
		.total = need,
		.flags = flags,
	};

	memcpy(hdr, &rec->key_len, 4);
	memcpy(hdr + 4, &rec->value_len, 4);
	memcpy(hdr + 8, &hash, 8);
	return chan_put(c, SHMRUN_FRAME_DATA, &pc);
}

/* Move queued frames into the ring while they fit. Return: frames moved. */
uint32_t chan_drain(struct chan_out *c)
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
		(*c->backlogged)--;
	return moved;
}
