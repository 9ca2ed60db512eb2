/*
 * tests/unit/check_channel.c: a channel's two ends (runtime/channel.h) over a
 * real SPSC ring in private memory, both ends in one thread.
 *
 * Covers the record frame in both directions (empty key and value, timed and
 * untimed, negative event time, the largest record a ring takes, the byte
 * layout of the header), the decoder's refusal of damaged and short frames,
 * the overflow queue behind a full ring (frames come out in the order they
 * were put, later frames queue behind earlier ones even once the ring has
 * room, the worker's backlogged count rises and falls once per channel),
 * END and BARRIER frames through the queue with their kind and flags, and the
 * zero cases: draining a channel with nothing queued or a ring still full.
 */
#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "channel.h"
#include "shmrun/ring.h"

#define CAP 4096u

/* ---- a channel over a ring in private memory ------------------------------ */

struct tc {
	void *mem;
	size_t len;
	uint32_t backlogged; /* the worker's count */
	struct chan_out out;
	struct chan_in in;
};

static void tc_open(struct tc *c)
{
	memset(c, 0, sizeof(*c));
	c->len = shmrun_ring_memsize(CAP);
	c->mem = aligned_alloc(SHMRUN_CACHELINE, c->len);
	ck_assert_ptr_nonnull(c->mem);
	ck_assert_int_eq(shmrun_ring_init(c->mem, c->len, CAP), 0);
	ck_assert_int_eq(shmrun_ring_attach(&c->out.ring, c->mem, c->len, SHMRUN_RING_PRODUCER), 0);
	ck_assert_int_eq(shmrun_ring_attach(&c->in.ring, c->mem, c->len, SHMRUN_RING_CONSUMER), 0);
	c->out.backlogged = &c->backlogged;
	c->out.src_task = 7;
	c->out.dst_task = 9;
	ck_assert_int_eq(chan_batch_init(&c->out), 0);
	ck_assert_uint_eq(c->out.batch_cap, CAP / 8); /* a small ring: an eighth of it */
}

static void tc_close(struct tc *c)
{
	shmrun_ring_detach(&c->out.ring);
	shmrun_ring_detach(&c->in.ring);
	free(c->out.ovf);
	free(c->out.batch);
	free(c->mem);
	memset(c, 0, sizeof(*c));
}

static uint16_t flags_of(const struct shmrun_record *rec)
{
	return rec->event_time_ns != 0 ? REC_TIMED : 0;
}

static uint64_t chan_record_bytes(const struct shmrun_record *rec)
{
	return chan_rec_bytes(rec, flags_of(rec));
}

/* Put @rec as the worker's emit does, then close its batch: one record per frame. */
static int put_rec(struct tc *c, const struct shmrun_record *rec)
{
	int err = chan_put_rec(&c->out, rec, XXH3_64bits(rec->key, rec->key_len), flags_of(rec),
			       (uint32_t)chan_record_bytes(rec));

	return err ? err : chan_flush_batch(&c->out);
}

/* The one record of frame @f, as the worker decodes it. */
static int chan_decode_record(const struct shmrun_frame *f, struct shmrun_record *rec,
			      uint64_t *hash)
{
	const unsigned char *p = f->payload, *end = f->payload + f->len;
	int err = chan_next_record(&p, end, f->flags, rec, hash);

	return err ? err : p == end ? 0 : -EBADMSG;
}

/* The next frame on @c's ring (published first), or NULL if none. */
static const struct shmrun_frame *next_frame(struct tc *c)
{
	const struct shmrun_frame *f;

	shmrun_ring_flush(&c->out.ring);
	return shmrun_ring_peek(&c->in.ring, &f) == 0 ? f : NULL;
}

static void release(struct tc *c, const struct shmrun_frame *f)
{
	shmrun_ring_release(&c->in.ring, f);
	shmrun_ring_consumer_flush(&c->in.ring);
}

/* A record whose 8-byte value is @seq, the key "k", @pad more value bytes. */
static uint64_t seq_of(const struct shmrun_frame *f)
{
	struct shmrun_record rec;
	uint64_t hash, seq;

	ck_assert_int_eq(chan_decode_record(f, &rec, &hash), 0);
	ck_assert_uint_ge(rec.value_len, 8);
	memcpy(&seq, rec.value, 8);
	return seq;
}

static int put_seq(struct tc *c, uint64_t seq, uint32_t pad)
{
	unsigned char value[512] = {0};
	struct shmrun_record rec = {.key = "k", .key_len = 1, .value = value, .value_len = 8 + pad};

	ck_assert_uint_le(8 + pad, sizeof(value));
	memcpy(value, &seq, 8);
	return put_rec(c, &rec);
}

/* ---- record frames ----------------------------------------------------------- */

static void round_trip(struct tc *c, const struct shmrun_record *rec)
{
	const struct shmrun_frame *f;
	struct shmrun_record got;
	uint64_t hash, want = XXH3_64bits(rec->key, rec->key_len);
	uint32_t kl, vl;

	ck_assert_int_eq(put_rec(c, rec), 0);
	ck_assert_uint_eq(c->backlogged, 0);
	f = next_frame(c);
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(f->kind, SHMRUN_FRAME_DATA);
	ck_assert_uint_eq(f->flags, rec->event_time_ns ? REC_TIMED : 0);
	ck_assert_uint_eq(f->src_task, 7);
	ck_assert_uint_eq(f->dst_task, 9);
	ck_assert_uint_eq(f->len, chan_record_bytes(rec));
	/* the header's layout: key_len, value_len, hash, host byte order */
	memcpy(&kl, f->payload, 4);
	memcpy(&vl, f->payload + 4, 4);
	memcpy(&hash, f->payload + 8, 8);
	ck_assert_uint_eq(kl, rec->key_len);
	ck_assert_uint_eq(vl, rec->value_len);
	ck_assert_uint_eq(hash, want);

	hash = 0;
	ck_assert_int_eq(chan_decode_record(f, &got, &hash), 0);
	ck_assert_uint_eq(hash, want);
	ck_assert_uint_eq(got.key_len, rec->key_len);
	ck_assert_uint_eq(got.value_len, rec->value_len);
	ck_assert_int_eq(got.event_time_ns, rec->event_time_ns);
	if (rec->key_len)
		ck_assert_int_eq(memcmp(got.key, rec->key, rec->key_len), 0);
	if (rec->value_len)
		ck_assert_int_eq(memcmp(got.value, rec->value, rec->value_len), 0);
	release(c, f);
	ck_assert_ptr_null(next_frame(c));
}

START_TEST(record_round_trips)
{
	struct tc c;
	const struct shmrun_record recs[] = {
	    {.key = NULL, .key_len = 0, .value = NULL, .value_len = 0},
	    {.key = "k", .key_len = 1, .value = NULL, .value_len = 0},
	    {.key = NULL, .key_len = 0, .value = "value", .value_len = 5},
	    {.key = "word", .key_len = 4, .value = "1", .value_len = 1},
	    {.key = "word", .key_len = 4, .value = "1", .value_len = 1, .event_time_ns = 123456789},
	    {.key = NULL, .key_len = 0, .value = NULL, .value_len = 0, .event_time_ns = -1},
	};

	tc_open(&c);
	for (size_t i = 0; i < sizeof(recs) / sizeof(recs[0]); i++)
		round_trip(&c, &recs[i]);
	tc_close(&c);
}
END_TEST

START_TEST(record_bytes)
{
	struct shmrun_record rec = {.key_len = 3, .value_len = 5};

	ck_assert_uint_eq(REC_HDR, 16);
	ck_assert_uint_eq(chan_record_bytes(&(struct shmrun_record){0}), 16);
	ck_assert_uint_eq(chan_record_bytes(&rec), 16 + 3 + 5);
	rec.event_time_ns = 1;
	ck_assert_uint_eq(chan_record_bytes(&rec), 16 + 8 + 3 + 5);
	rec.key_len = UINT32_MAX;
	rec.value_len = UINT32_MAX;
	ck_assert_uint_eq(chan_record_bytes(&rec), 24 + 2 * (uint64_t)UINT32_MAX); /* no wrap */
}
END_TEST

/* The largest record the ring takes, timed and not; its bytes intact. */
START_TEST(largest_record)
{
	struct tc c;
	uint32_t max;
	unsigned char *buf;

	tc_open(&c);
	max = shmrun_ring_max_payload(&c.out.ring);
	ck_assert_uint_eq(max, CAP / 2 - SHMRUN_FRAME_HEADER);
	buf = malloc(max);
	ck_assert_ptr_nonnull(buf);
	for (uint32_t i = 0; i < max; i++)
		buf[i] = (unsigned char)(i * 31 + 7);
	{
		struct shmrun_record untimed = {.key = buf,
						.key_len = 100,
						.value = buf + 100,
						.value_len = max - REC_HDR - 100};
		struct shmrun_record timed = {.key = buf,
					      .key_len = 0,
					      .value = buf,
					      .value_len = max - REC_HDR - 8,
					      .event_time_ns = 42};
		struct shmrun_record key_only = {.key = buf, .key_len = max - REC_HDR};

		ck_assert_uint_eq(chan_record_bytes(&untimed), max);
		ck_assert_uint_eq(chan_record_bytes(&timed), max);
		round_trip(&c, &untimed);
		round_trip(&c, &timed);
		round_trip(&c, &key_only);
	}
	free(buf);
	tc_close(&c);
}
END_TEST

/* ---- damaged frames ------------------------------------------------------------ */

/* A frame in private memory with a header of @kl, @vl and @len, @flags. */
static struct shmrun_frame *frame(uint32_t len, uint16_t flags, uint32_t kl, uint32_t vl)
{
	struct shmrun_frame *f = aligned_alloc(8, 256);

	ck_assert_ptr_nonnull(f);
	memset(f, 0xee, 256);
	f->len = len;
	f->kind = SHMRUN_FRAME_DATA;
	f->flags = flags;
	memcpy(f->payload, &kl, 4);
	memcpy(f->payload + 4, &vl, 4);
	return f;
}

static int decode(struct shmrun_frame *f)
{
	struct shmrun_record rec;
	uint64_t hash;
	int err = chan_decode_record(f, &rec, &hash);

	free(f);
	return err;
}

START_TEST(damaged_frames)
{
	/* sound ones first: the checks below fail for their damage only */
	ck_assert_int_eq(decode(frame(16, 0, 0, 0)), 0);
	ck_assert_int_eq(decode(frame(16 + 3 + 4, 0, 3, 4)), 0);
	ck_assert_int_eq(decode(frame(24 + 3 + 4, REC_TIMED, 3, 4)), 0);
	/* shorter than the header, or than header and time */
	ck_assert_int_eq(decode(frame(0, 0, 0, 0)), -EBADMSG);
	ck_assert_int_eq(decode(frame(15, 0, 0, 0)), -EBADMSG);
	ck_assert_int_eq(decode(frame(16, REC_TIMED, 0, 0)), -EBADMSG);
	ck_assert_int_eq(decode(frame(23, REC_TIMED, 0, 0)), -EBADMSG);
	/* lengths that do not add up: too long, too short, the time flag lost */
	ck_assert_int_eq(decode(frame(16 + 3 + 4, 0, 3, 5)), -EBADMSG);
	ck_assert_int_eq(decode(frame(16 + 3 + 4, 0, 3, 3)), -EBADMSG);
	ck_assert_int_eq(decode(frame(24 + 3 + 4, 0, 3, 4)), -EBADMSG);
	/* lengths whose 32-bit sum wraps to the frame's length */
	ck_assert_int_eq(decode(frame(16 + 8, 0, UINT32_MAX, 9)), -EBADMSG);
	ck_assert_int_eq(decode(frame(200, 0, UINT32_MAX, UINT32_MAX)), -EBADMSG);
}
END_TEST

/* ---- the overflow queue ------------------------------------------------------- */

/* Fill @c's ring until a record queues; return how many went. */
static uint64_t fill(struct tc *c, uint32_t pad)
{
	uint64_t seq = 0;

	while (!chan_backlogged(&c->out)) {
		ck_assert_int_eq(put_seq(c, seq++, pad), 0);
		ck_assert_uint_lt(seq, CAP); /* the ring is bounded */
	}
	return seq;
}

START_TEST(overflow_keeps_order)
{
	struct tc c;
	const struct shmrun_frame *f;
	uint64_t n, want = 0, put;

	tc_open(&c);
	n = fill(&c, 100);
	ck_assert_uint_gt(n, 1);
	ck_assert_uint_eq(c.backlogged, 1);
	/* room appears, but later records queue behind the queued one */
	f = next_frame(&c);
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(seq_of(f), want++);
	release(&c, f);
	for (put = n; put < n + 40; put++)
		ck_assert_int_eq(put_seq(&c, put, 100), 0);
	ck_assert_uint_eq(c.backlogged, 1); /* counted once per channel */
	/* the ring holds only what went in before the queue started */
	while ((f = next_frame(&c)) && want < n - 1) {
		ck_assert_uint_eq(seq_of(f), want++);
		release(&c, f);
	}
	ck_assert_ptr_null(f);
	ck_assert_uint_eq(want, n - 1);
	/* drain after room appears: everything, in order, then not backlogged */
	while (want < put) {
		uint32_t moved = chan_drain(&c.out);

		ck_assert_uint_gt(moved, 0);
		while ((f = next_frame(&c))) {
			ck_assert_uint_eq(seq_of(f), want++);
			release(&c, f);
		}
	}
	ck_assert(!chan_backlogged(&c.out));
	ck_assert_uint_eq(c.backlogged, 0);
	ck_assert_uint_eq(chan_drain(&c.out), 0);
	ck_assert_uint_eq(c.backlogged, 0);
	/* after the queue drained, a record goes straight to the ring again */
	ck_assert_int_eq(put_seq(&c, put, 0), 0);
	ck_assert(!chan_backlogged(&c.out));
	f = next_frame(&c);
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(seq_of(f), put);
	release(&c, f);
	tc_close(&c);
}
END_TEST

/* A full ring drains nothing; the queue and the count stay as they are. */
START_TEST(drain_full_ring)
{
	struct tc c;

	tc_open(&c);
	fill(&c, 200);
	ck_assert_uint_eq(chan_drain(&c.out), 0);
	ck_assert(chan_backlogged(&c.out));
	ck_assert_uint_eq(c.backlogged, 1);
	tc_close(&c);
}
END_TEST

/* END and BARRIER frames through a full ring keep kind, flags and payload. */
START_TEST(control_frames_queue)
{
	struct tc c;
	const struct shmrun_frame *f;
	uint64_t epoch = 5, n, got = 0;
	struct {
		uint64_t epoch;
		uint32_t stop, pad;
	} end = {6, 1, 0};
	struct pieces barrier = {.p = {&epoch}, .n = {8}, .total = 8};
	struct pieces endpc = {.p = {&end}, .n = {sizeof(end)}, .total = sizeof(end)};
	struct pieces empty = {.total = 0, .flags = 0x8};

	tc_open(&c);
	n = fill(&c, 64);
	ck_assert_int_eq(chan_put(&c.out, SHMRUN_FRAME_BARRIER, &barrier), 0);
	ck_assert_int_eq(chan_put(&c.out, SHMRUN_FRAME_WATERMARK, &empty), 0);
	ck_assert_int_eq(chan_put(&c.out, SHMRUN_FRAME_END, &endpc), 0);
	ck_assert_uint_eq(c.backlogged, 1);
	for (;;) {
		while ((f = next_frame(&c)) && f->kind == SHMRUN_FRAME_DATA) {
			ck_assert_uint_eq(seq_of(f), got++);
			release(&c, f);
		}
		if (f)
			break;
		ck_assert_uint_gt(chan_drain(&c.out), 0);
	}
	ck_assert_uint_eq(got, n);
	ck_assert_uint_eq(f->kind, SHMRUN_FRAME_BARRIER);
	ck_assert_uint_eq(f->len, 8);
	ck_assert_uint_eq(f->src_task, 7);
	ck_assert_uint_eq(f->dst_task, 9);
	ck_assert_int_eq(memcmp(f->payload, &epoch, 8), 0);
	release(&c, f);
	if (!(f = next_frame(&c))) {
		chan_drain(&c.out);
		f = next_frame(&c);
	}
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(f->kind, SHMRUN_FRAME_WATERMARK);
	ck_assert_uint_eq(f->len, 0);
	ck_assert_uint_eq(f->flags, 0x8);
	release(&c, f);
	if (!(f = next_frame(&c))) {
		chan_drain(&c.out);
		f = next_frame(&c);
	}
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(f->kind, SHMRUN_FRAME_END);
	ck_assert_uint_eq(f->len, sizeof(end));
	ck_assert_int_eq(memcmp(f->payload, &end, sizeof(end)), 0);
	release(&c, f);
	ck_assert_uint_eq(chan_drain(&c.out), 0);
	ck_assert_uint_eq(c.backlogged, 0);
	ck_assert_ptr_null(next_frame(&c));
	tc_close(&c);
}
END_TEST

/* Two channels of one worker: the count is of channels, not frames. */
START_TEST(backlogged_counts_channels)
{
	struct tc a, b;
	const struct shmrun_frame *f;
	uint32_t shared = 0;

	tc_open(&a);
	tc_open(&b);
	a.out.backlogged = b.out.backlogged = &shared;
	fill(&a, 100);
	ck_assert_uint_eq(shared, 1);
	fill(&b, 100);
	ck_assert_uint_eq(shared, 2);
	ck_assert_int_eq(put_seq(&a, 999, 100), 0);
	ck_assert_uint_eq(shared, 2);
	/* empty a's ring, then drain a: only a's count goes */
	while ((f = next_frame(&a)))
		release(&a, f);
	while (chan_backlogged(&a.out)) {
		ck_assert_uint_gt(chan_drain(&a.out), 0);
		while ((f = next_frame(&a)))
			release(&a, f);
	}
	ck_assert_uint_eq(shared, 1);
	ck_assert(chan_backlogged(&b.out));
	tc_close(&a);
	tc_close(&b);
}
END_TEST

/* ---- zero cases ------------------------------------------------------------- */

START_TEST(zero_cases)
{
	struct tc c;

	tc_open(&c);
	/* a fresh channel: nothing queued, nothing to drain, empty ring */
	ck_assert(!chan_backlogged(&c.out));
	ck_assert_uint_eq(chan_drain(&c.out), 0);
	ck_assert_uint_eq(c.backlogged, 0);
	ck_assert_ptr_null(next_frame(&c));
	ck_assert_ptr_null(c.out.ovf);
	/* a zero-byte frame through chan_put() */
	ck_assert_int_eq(chan_put(&c.out, SHMRUN_FRAME_WATERMARK, &(struct pieces){.total = 0}), 0);
	{
		const struct shmrun_frame *f = next_frame(&c);

		ck_assert_ptr_nonnull(f);
		ck_assert_uint_eq(f->kind, SHMRUN_FRAME_WATERMARK);
		ck_assert_uint_eq(f->len, 0);
		release(&c, f);
	}
	ck_assert_ptr_null(c.out.ovf); /* the queue is allocated only when needed */
	tc_close(&c);
}
END_TEST

/* ---- batches ------------------------------------------------------------------ */

/* Records put without a flush share frames; all come back, in order, intact. */
START_TEST(batch_many_records_per_frame)
{
	struct tc c;
	const struct shmrun_frame *f;
	char key[160]; /* XXH3 may read up to 128 bytes in the eyes of -Warray-bounds */
	uint32_t put = 0, got = 0, frames = 0;

	tc_open(&c);
	for (put = 0; put < 60; put++) {
		struct shmrun_record rec = {.key = key, .value = &put, .value_len = 4};

		rec.key_len = (uint32_t)snprintf(key, sizeof(key), "w%u", put * 7919u);
		ck_assert_int_eq(chan_put_rec(&c.out, &rec, XXH3_64bits(key, rec.key_len), 0,
					      (uint32_t)chan_rec_bytes(&rec, 0)),
				 0);
		if (put == 9) { /* ~270 bytes: nothing is in the ring until a flush */
			ck_assert_uint_gt(c.out.batch_len, 0);
			ck_assert_uint_eq(c.out.frames, 0);
		}
	}
	ck_assert_int_eq(chan_flush_batch(&c.out), 0);
	while ((f = next_frame(&c))) {
		const unsigned char *p = f->payload, *end = p + f->len;

		frames++;
		ck_assert_uint_eq(f->kind, SHMRUN_FRAME_DATA);
		while (p < end) {
			struct shmrun_record rec;
			uint64_t hash;
			uint32_t v;
			char want[160];
			int wl = snprintf(want, sizeof(want), "w%u", got * 7919u);

			ck_assert_int_eq(chan_next_record(&p, end, f->flags, &rec, &hash), 0);
			ck_assert_uint_eq(rec.key_len, (uint32_t)wl);
			ck_assert_int_eq(memcmp(rec.key, want, (size_t)wl), 0);
			ck_assert_uint_eq(hash, XXH3_64bits(want, (size_t)wl));
			ck_assert_uint_eq(rec.value_len, 4);
			memcpy(&v, rec.value, 4);
			ck_assert_uint_eq(v, got);
			got++;
		}
		release(&c, f);
	}
	ck_assert_uint_eq(got, put);
	/* 60 records of ~25 bytes: a few frames of a 512-byte batch, not 60 */
	ck_assert_uint_le(frames, 4);
	ck_assert_uint_ge(frames, 1);
	ck_assert_uint_eq(c.out.frames, frames);
	tc_close(&c);
}
END_TEST

/* Records of other flags (timed, combined) close the batch; each frame one kind. */
START_TEST(batch_flags_split_frames)
{
	struct tc c;
	const struct shmrun_frame *f;
	struct shmrun_record plain = {.key = "a", .key_len = 1};
	struct shmrun_record timed = {.key = "b", .key_len = 1, .event_time_ns = -5};
	uint16_t want[] = {0, REC_TIMED, REC_TIMED, REC_COMBINED, 0};
	uint32_t nwant[] = {2, 0, 0, 0, 1}, k = 0;

	tc_open(&c);
	ck_assert_int_eq(chan_put_rec(&c.out, &plain, 1, 0, 17), 0);
	ck_assert_int_eq(chan_put_rec(&c.out, &plain, 1, 0, 17), 0);
	ck_assert_int_eq(chan_put_rec(&c.out, &timed, 2, REC_TIMED, 25), 0);
	ck_assert_int_eq(chan_put_rec(&c.out, &timed, 2, REC_TIMED, 25), 0);
	ck_assert_int_eq(chan_put_rec(&c.out, &plain, 1, REC_COMBINED, 17), 0);
	ck_assert_int_eq(chan_put_rec(&c.out, &plain, 1, 0, 17), 0);
	ck_assert_int_eq(chan_flush_batch(&c.out), 0);
	nwant[1] = 2;
	nwant[3] = 1;
	for (uint32_t i = 0; i < 5; i++) {
		uint32_t n = 0;
		const unsigned char *p, *end;

		if (i == 2)
			continue;
		f = next_frame(&c);
		ck_assert_ptr_nonnull(f);
		ck_assert_uint_eq(f->flags, want[i]);
		for (p = f->payload, end = p + f->len; p < end; n++) {
			struct shmrun_record rec;
			uint64_t hash;

			ck_assert_int_eq(chan_next_record(&p, end, f->flags, &rec, &hash), 0);
			ck_assert_int_eq(rec.event_time_ns, (f->flags & REC_TIMED) ? -5 : 0);
		}
		ck_assert_uint_eq(n, nwant[i]);
		release(&c, f);
		k++;
	}
	ck_assert_uint_eq(k, 4);
	ck_assert_ptr_null(next_frame(&c));
	tc_close(&c);
}
END_TEST

/* A barrier never overtakes the records of an open batch; a big record goes alone. */
START_TEST(batch_flushed_before_barrier_and_big_alone)
{
	struct tc c;
	const struct shmrun_frame *f;
	uint64_t epoch = 3;
	struct pieces barrier = {.p = {&epoch}, .n = {8}, .total = 8};
	static unsigned char big[1500];
	struct shmrun_record small = {.key = "s", .key_len = 1};
	struct shmrun_record large = {.key = "L", .key_len = 1, .value = big, .value_len = 1500};
	struct shmrun_record rec;
	const unsigned char *p;
	uint64_t hash;

	tc_open(&c);
	ck_assert_int_eq(chan_put_rec(&c.out, &small, 9, 0, 17), 0);
	ck_assert_int_eq(chan_put(&c.out, SHMRUN_FRAME_BARRIER, &barrier), 0);
	ck_assert_uint_eq(c.out.batch_len, 0);
	f = next_frame(&c);
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(f->kind, SHMRUN_FRAME_DATA);
	ck_assert_uint_eq(f->len, 17);
	release(&c, f);
	f = next_frame(&c);
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(f->kind, SHMRUN_FRAME_BARRIER);
	release(&c, f);
	/* 340 bytes of small records, then one larger than a batch (512) */
	for (int i = 0; i < 20; i++)
		ck_assert_int_eq(chan_put_rec(&c.out, &small, 9, 0, 17), 0);
	ck_assert_int_eq(chan_put_rec(&c.out, &large, 8, 0, 1517), 0);
	ck_assert_int_eq(chan_flush_batch(&c.out), 0);
	f = next_frame(&c);
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(f->len, 20 * 17);
	release(&c, f);
	f = next_frame(&c);
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(f->len, 1517);
	p = f->payload;
	ck_assert_int_eq(chan_next_record(&p, f->payload + f->len, f->flags, &rec, &hash), 0);
	ck_assert_uint_eq(hash, 8);
	ck_assert_uint_eq(rec.value_len, 1500);
	release(&c, f);
	ck_assert_ptr_null(next_frame(&c));
	tc_close(&c);
}
END_TEST

/* chan_copy_short() copies every length exactly and writes only the slack. */
START_TEST(copy_short_lengths)
{
	unsigned char src[64], dst[64 + BATCH_SLACK];

	for (uint32_t i = 0; i < sizeof(src); i++)
		src[i] = (unsigned char)(i * 13 + 1);
	for (uint32_t n = 0; n <= 40; n++) {
		memset(dst, 0xaa, sizeof(dst));
		chan_copy_short(dst, src + 3, n);
		ck_assert_int_eq(memcmp(dst, src + 3, n), 0);
		for (uint32_t i = n; i < sizeof(dst); i++)
			ck_assert_uint_eq(dst[i], 0xaa); /* nothing past n is written */
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("channel");
	TCase *tc;
	SRunner *sr;
	int failed;

	tc = tcase_create("record");
	tcase_add_test(tc, record_round_trips);
	tcase_add_test(tc, record_bytes);
	tcase_add_test(tc, largest_record);
	tcase_add_test(tc, batch_many_records_per_frame);
	tcase_add_test(tc, batch_flags_split_frames);
	tcase_add_test(tc, batch_flushed_before_barrier_and_big_alone);
	tcase_add_test(tc, copy_short_lengths);
	suite_add_tcase(s, tc);
	tc = tcase_create("damaged");
	tcase_add_test(tc, damaged_frames);
	suite_add_tcase(s, tc);
	tc = tcase_create("overflow");
	tcase_add_test(tc, overflow_keeps_order);
	tcase_add_test(tc, drain_full_ring);
	tcase_add_test(tc, control_frames_queue);
	tcase_add_test(tc, backlogged_counts_channels);
	suite_add_tcase(s, tc);
	tc = tcase_create("zero");
	tcase_add_test(tc, zero_cases);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
