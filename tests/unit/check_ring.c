/*
 * tests/unit/check_ring.c: the SPSC ring of shm/ring.c, both sides in one thread.
 *
 * Covers framing (header round trip, 8-byte alignment), the wrap at every 8-byte
 * offset of a 4096-byte ring (skip markers invisible, frames intact, placed
 * exactly where the layout says), indices running through 2^64, full/empty and
 * the exact number of frames that fit, the largest frame, commit with a smaller
 * or larger len, double reserve, batched publication and pending(), init/attach
 * validation against corrupt headers, and wait timeouts in every idle mode.
 *
 * Streams are checked against a model of the producer (struct model) that
 * predicts every frame's offset in the data area, skip markers included.
 */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "layout.h"
#include "shmrun/ring.h"

#define CAP 4096u
#define HDR ((uint64_t)sizeof(struct shmrun_ring_shared))

/*
 * Assertions for the hot loops: Check's ck_assert_*() records its location with
 * a write() to the runner at every call, which would dominate the stream tests.
 * These evaluate each argument once and call into Check only on failure.
 */
#define CHECK_EQ(a, b)                                                                             \
	do {                                                                                       \
		uint64_t a_ = (uint64_t)(a), b_ = (uint64_t)(b);                                   \
		if (a_ != b_)                                                                      \
			ck_abort_msg("%s:%d: %s == %s failed: %" PRIu64 " != %" PRIu64, __FILE__,  \
				     __LINE__, #a, #b, a_, b_);                                    \
	} while (0)
#define CHECK_PTR_EQ(a, b) CHECK_EQ((uintptr_t)(a), (uintptr_t)(b))
#define CHECK_TRUE(c)	   CHECK_EQ(!!(c), 1)

/* Ring bytes before a frame's payload: its commit word and header. */
#define FRAME_OVERHEAD (SHMRUN_FRAME_COMMIT + SHMRUN_FRAME_HEADER)

/* Ring bytes of a frame of @len payload bytes. */
static uint64_t fbytes(uint32_t len)
{
	return ((uint64_t)FRAME_OVERHEAD + len + 7) & ~(uint64_t)7;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static unsigned char pat(uint32_t id, uint32_t i)
{
	return (unsigned char)(id * 131u + i * 7u + (i >> 8));
}

/* ---- a ring in private memory with both handles ------------------------- */

struct tr {
	void *mem;
	size_t len;
	struct shmrun_ring_shared *sh;
	unsigned char *data;
	struct shmrun_ring p, c;
};

static void tr_layout(struct tr *t, uint64_t cap)
{
	t->len = shmrun_ring_memsize(cap);
	ck_assert_uint_eq(t->len, HDR + cap);
	t->mem = aligned_alloc(SHMRUN_CACHELINE, t->len);
	ck_assert_ptr_nonnull(t->mem);
	ck_assert_int_eq(shmrun_ring_init(t->mem, t->len, cap), 0);
	t->sh = t->mem;
	t->data = (unsigned char *)t->mem + HDR;
}

static void tr_attach(struct tr *t)
{
	ck_assert_int_eq(shmrun_ring_attach(&t->p, t->mem, t->len, SHMRUN_RING_PRODUCER), 0);
	ck_assert_int_eq(shmrun_ring_attach(&t->c, t->mem, t->len, SHMRUN_RING_CONSUMER), 0);
}

/* A ring whose free-running indices both start at @index. */
static void tr_open_at(struct tr *t, uint64_t cap, uint64_t index)
{
	tr_layout(t, cap);
	atomic_store(&t->sh->head, index);
	atomic_store(&t->sh->tail, index);
	tr_attach(t);
}

static void tr_open(struct tr *t, uint64_t cap)
{
	tr_open_at(t, cap, 0);
}

static void tr_close(struct tr *t)
{
	shmrun_ring_detach(&t->p);
	shmrun_ring_detach(&t->c);
	free(t->mem);
	memset(t, 0, sizeof(*t));
}

/* Reserve, fill with pat(id), commit; returns reserve's error. */
static int put(struct shmrun_ring *r, uint16_t kind, uint32_t id, uint32_t len,
	       struct shmrun_frame **out)
{
	struct shmrun_frame *f;
	int err = shmrun_ring_reserve(r, len, &f);

	if (err)
		return err;
	CHECK_EQ(f->len, len);
	f->kind = kind;
	f->flags = (uint16_t)(id ^ 0x5a5a);
	f->src_task = id;
	f->dst_task = ~id;
	for (uint32_t i = 0; i < len; i++)
		f->payload[i] = pat(id, i);
	if (out)
		*out = f;
	CHECK_EQ(shmrun_ring_commit(r, f), 0);
	return 0;
}

static void check_frame(const struct shmrun_frame *f, uint16_t kind, uint32_t id, uint32_t len)
{
	CHECK_EQ((uintptr_t)f % SHMRUN_FRAME_ALIGN, 0);
	CHECK_EQ(f->kind, kind);
	CHECK_EQ(f->flags, (uint16_t)(id ^ 0x5a5a));
	CHECK_EQ(f->src_task, id);
	CHECK_EQ(f->dst_task, ~id);
	CHECK_EQ(f->len, len);
	for (uint32_t i = 0; i < len; i++)
		if (f->payload[i] != pat(id, i))
			ck_abort_msg("frame %u: payload byte %u is %u, want %u", id, i,
				     f->payload[i], pat(id, i));
}

/* ---- a model of the producer's placement -------------------------------- */

#define QLEN 1024u

struct expect {
	uint32_t id, len;
	uint64_t off; /* offset in the data area */
};

struct model {
	struct tr t;
	uint64_t cap;
	uint64_t pos;	/* the producer's tail, as the layout predicts it */
	uint64_t start; /* pos when the model was opened */
	uint64_t skips; /* skip markers the producer must have written */
	uint32_t next_id;
	struct expect q[QLEN];
	unsigned qh, qt; /* frames in flight: q[qh..qt) */
};

static void model_open(struct model *m, uint64_t cap, uint64_t index)
{
	memset(m, 0, sizeof(*m));
	tr_open_at(&m->t, cap, index);
	m->cap = cap;
	m->pos = m->start = index;
}

/* Produce one frame of @len payload bytes; returns reserve's error. */
static int model_push(struct model *m, uint32_t len)
{
	uint64_t need = fbytes(len), pos = m->pos, to_end = m->cap - (pos & (m->cap - 1));
	struct shmrun_frame *f;
	bool skip = need > to_end;
	int err;

	CHECK_TRUE(m->qt - m->qh < QLEN);
	err = put(&m->t.p, (uint16_t)(SHMRUN_FRAME_DATA + m->next_id % 4), m->next_id, len, &f);
	if (err)
		return err;
	if (skip) {
		pos += to_end;
		m->skips++;
	}
	/* The frame sits exactly where the layout says, wholly inside the data area. */
	CHECK_PTR_EQ(f, m->t.data + (pos & (m->cap - 1)) + SHMRUN_FRAME_COMMIT);
	CHECK_TRUE((pos & (m->cap - 1)) + need <= m->cap);
	m->q[m->qt % QLEN] = (struct expect){m->next_id, len, pos & (m->cap - 1)};
	m->qt++;
	m->next_id++;
	m->pos = pos + need;
	return 0;
}

/* Consume the oldest frame in flight and check it. */
static void model_pop(struct model *m)
{
	const struct shmrun_frame *f;
	struct expect e;

	CHECK_TRUE(m->qt != m->qh);
	e = m->q[m->qh % QLEN];
	CHECK_EQ(shmrun_ring_peek(&m->t.c, &f), 0);
	/* A skip marker is never handed out: the frame is the expected one. */
	CHECK_TRUE(f->kind != SHMRUN_FRAME_SKIP);
	CHECK_PTR_EQ(f, m->t.data + e.off + SHMRUN_FRAME_COMMIT);
	check_frame(f, (uint16_t)(SHMRUN_FRAME_DATA + e.id % 4), e.id, e.len);
	shmrun_ring_release(&m->t.c, f);
	m->qh++;
}

/* Flush, consume everything, check the ring is empty with head = tail = pos. */
static void model_drain(struct model *m)
{
	const struct shmrun_frame *f;

	shmrun_ring_flush(&m->t.p);
	ck_assert_uint_eq(shmrun_ring_pending(&m->t.p), 0);
	while (m->qt != m->qh)
		model_pop(m);
	ck_assert_int_eq(shmrun_ring_peek(&m->t.c, &f), -EAGAIN);
	ck_assert(!shmrun_ring_readable(&m->t.c));
	ck_assert_uint_eq(atomic_load(&m->t.sh->tail), m->pos);
	ck_assert_uint_eq(atomic_load(&m->t.sh->head), m->pos);
}

/* Push @n frames of lengths @lens[i]; consume only when the ring is full. */
static void model_stream(struct model *m, const uint32_t *lens, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		int err;

		while ((err = model_push(m, lens[i])) == -EAGAIN) {
			/* reserve flushed on -EAGAIN: every commit is visible. */
			CHECK_EQ(shmrun_ring_pending(&m->t.p), 0);
			if (m->qt == m->qh) {
				/* The largest frame at offset CAP / 2: its skip went
				 * ahead alone; the consumer steps over it. */
				const struct shmrun_frame *f;

				CHECK_EQ(m->pos % m->cap, m->cap / 2);
				CHECK_EQ(shmrun_ring_peek(&m->t.c, &f), -EAGAIN);
				continue;
			}
			model_pop(m);
		}
		if (err)
			ck_abort_msg("frame %u (len %" PRIu32 ") at index %" PRIu64 ": error %d", i,
				     lens[i], m->pos, err);
	}
	model_drain(m);
}

static void model_close(struct model *m)
{
	tr_close(&m->t);
}

/* ---- framing ------------------------------------------------------------ */

START_TEST(test_framing_round_trip)
{
	static const uint32_t lens[] = {0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 63, 64, 65, 255, 1000};
	const struct shmrun_frame *f;
	struct tr t;
	uint32_t id = 0;

	tr_open(&t, 65536);
	shmrun_ring_set_batch(&t.p, 1);
	for (uint16_t kind = SHMRUN_FRAME_DATA; kind <= SHMRUN_FRAME_END; kind++) {
		for (unsigned i = 0; i < sizeof(lens) / sizeof(lens[0]); i++, id++) {
			struct shmrun_frame *w;

			ck_assert_int_eq(put(&t.p, kind, id * 0x10001u + 3, lens[i], &w), 0);
			ck_assert_uint_eq((uintptr_t)w % SHMRUN_FRAME_ALIGN, 0);
			ck_assert_int_eq(shmrun_ring_peek(&t.c, &f), 0);
			ck_assert_ptr_eq(f, w);
			/* Peeking twice without release returns the same frame. */
			ck_assert_int_eq(shmrun_ring_peek(&t.c, &f), 0);
			ck_assert_ptr_eq(f, w);
			check_frame(f, kind, id * 0x10001u + 3, lens[i]);
			shmrun_ring_release(&t.c, f);
		}
	}
	/* Frames follow one another at their padded size. */
	ck_assert_int_eq(shmrun_ring_write(&t.p, SHMRUN_FRAME_BARRIER, 7, 9, "epoch-42", 8), 0);
	ck_assert_int_eq(shmrun_ring_write(&t.p, SHMRUN_FRAME_WATERMARK, 0xffffffffu, 0, "x", 1),
			 0);
	ck_assert_int_eq(shmrun_ring_write(&t.p, SHMRUN_FRAME_END, 1, 2, NULL, 0), 0);
	ck_assert_int_eq(shmrun_ring_peek(&t.c, &f), 0);
	ck_assert_uint_eq(f->kind, SHMRUN_FRAME_BARRIER);
	ck_assert_uint_eq(f->src_task, 7);
	ck_assert_uint_eq(f->dst_task, 9);
	ck_assert_uint_eq(f->len, 8);
	ck_assert_mem_eq(f->payload, "epoch-42", 8);
	shmrun_ring_release(&t.c, f);
	ck_assert_int_eq(shmrun_ring_peek(&t.c, &f), 0);
	ck_assert_uint_eq(f->kind, SHMRUN_FRAME_WATERMARK);
	ck_assert_uint_eq(f->src_task, 0xffffffffu);
	ck_assert_uint_eq(f->len, 1);
	ck_assert_uint_eq(f->payload[0], 'x');
	shmrun_ring_release(&t.c, f);
	ck_assert_int_eq(shmrun_ring_peek(&t.c, &f), 0);
	ck_assert_uint_eq(f->kind, SHMRUN_FRAME_END);
	ck_assert_uint_eq(f->len, 0);
	ck_assert_ptr_eq((const unsigned char *)f,
			 (const unsigned char *)t.data +
			     (atomic_load(&t.sh->tail) - fbytes(0)) % 65536 + SHMRUN_FRAME_COMMIT);
	shmrun_ring_release(&t.c, f);
	ck_assert_int_eq(shmrun_ring_peek(&t.c, &f), -EAGAIN);
	tr_close(&t);
}
END_TEST

START_TEST(test_framing_alignment_every_length)
{
	struct model m;
	uint32_t lens[600];

	/* Every payload length 0..599: each frame pointer is 8-byte aligned (checked
	 * by put() and check_frame()) and placed at the padded offset. */
	for (uint32_t i = 0; i < 600; i++)
		lens[i] = i;
	model_open(&m, CAP, 0);
	model_stream(&m, lens, 600);
	ck_assert_uint_gt(m.skips, 0);
	model_close(&m);
}
END_TEST

/* ---- wrap at every 8-byte offset ------------------------------------------ */

/*
 * A fresh 4096-byte ring whose head and tail stand at @off (mod 4096). Offsets
 * from FRAME_OVERHEAD up are reached by writing and consuming filler
 * frames. Smaller offsets cannot be reached that way (the smallest frame is
 * FRAME_OVERHEAD bytes and a frame that does not fit before the end moves
 * to offset 0), so they are seeded through the indices.
 */
static void open_at_offset(struct model *m, uint64_t off)
{
	uint32_t lens[4];
	unsigned n = 0;
	uint64_t left = off;

	model_open(m, CAP, off < FRAME_OVERHEAD ? off : 0);
	if (off < FRAME_OVERHEAD)
		return;
	while (left) {
		uint64_t chunk = left > CAP / 2 ? CAP / 2 : left;

		if (left - chunk != 0 && left - chunk < FRAME_OVERHEAD)
			chunk = left - FRAME_OVERHEAD;
		lens[n++] = (uint32_t)(chunk - FRAME_OVERHEAD);
		left -= chunk;
	}
	model_stream(m, lens, n);
	ck_assert_uint_eq(m->skips, 0);
	ck_assert_uint_eq(m->pos % CAP, off);
}

START_TEST(test_wrap_every_offset)
{
	const uint32_t max = CAP / 2 - SHMRUN_FRAME_HEADER;
	uint32_t lens[400];

	for (uint64_t off = 0; off < CAP; off += 8) {
		uint64_t to_end = CAP - off;
		struct model m;
		unsigned n;

		/* 1. One frame 8 bytes too big for the room before the end: a skip
		 * marker fills the end and the frame starts at offset 0. */
		if (to_end + 8 <= CAP / 2) {
			open_at_offset(&m, off);
			/* (near the end even an empty frame is too big) */
			lens[0] = to_end + 8 >= FRAME_OVERHEAD
				      ? (uint32_t)(to_end + 8 - FRAME_OVERHEAD)
				      : 0;
			lens[1] = 5;
			lens[2] = 0;
			model_stream(&m, lens, 3);
			ck_assert_uint_eq(m.skips, 1);
			model_close(&m);
		}
		/* 2. A frame that fills the room before the end exactly: no skip,
		 * the next frame starts at offset 0. */
		if (to_end >= FRAME_OVERHEAD && to_end <= CAP / 2) {
			open_at_offset(&m, off);
			lens[0] = (uint32_t)(to_end - FRAME_OVERHEAD);
			lens[1] = 3;
			model_stream(&m, lens, 2);
			ck_assert_uint_eq(m.skips, 0);
			ck_assert_uint_eq(m.pos % CAP, fbytes(3));
			model_close(&m);
		}
		/* 3. Largest frames back to back across the end. */
		open_at_offset(&m, off);
		for (n = 0; n < 5; n++)
			lens[n] = max - n * (uint32_t)(off % 24);
		model_stream(&m, lens, n);
		ck_assert_uint_gt(m.pos - m.start, CAP + off);
		model_close(&m);
		/* 4. Small frames of every padded size, wrapping several times,
		 * with the ring full most of the time. */
		open_at_offset(&m, off);
		for (n = 0; n < 400; n++)
			lens[n] = (uint32_t)((n * 5 + off / 8) % 61);
		model_stream(&m, lens, n);
		ck_assert_uint_ge(m.pos - m.start, 3 * CAP);
		ck_assert_uint_gt(m.skips, 0);
		model_close(&m);
	}
}
END_TEST

/* ---- indices running through 2^64 ----------------------------------------- */

/* k values such that UINT64_MAX - k is 8-byte aligned, at many ring offsets. */
static const uint64_t near_top_k[] = {7,    15,	  23,	31,   39,    2039,  2047,  2055,
				      4087, 4095, 4103, 8191, 12295, 65535, 131071};
#define N_NEAR_TOP (sizeof(near_top_k) / sizeof(near_top_k[0]))

START_TEST(test_index_wrap_2_64)
{
	uint64_t start = UINT64_MAX - near_top_k[_i];
	uint32_t lens[3000];
	struct model m;

	ck_assert_uint_eq(start % 8, 0);
	for (unsigned n = 0; n < 3000; n++)
		lens[n] = (uint32_t)((n * 37 + _i * 11) %
				     (n % 50 == 0 ? CAP / 2 - SHMRUN_FRAME_HEADER + 1 : 97));
	model_open(&m, CAP, start);
	model_stream(&m, lens, 3000);
	/* The indices went through 2^64 and came out small. */
	ck_assert_uint_lt(m.pos, start);
	ck_assert_uint_gt(m.pos - start, 10 * CAP);
	model_close(&m);
}
END_TEST

START_TEST(test_index_wrap_2_64_full)
{
	/* Filling the ring while it straddles 2^64: the exact count still fits. */
	uint64_t start = UINT64_MAX - near_top_k[_i];
	const struct shmrun_frame *f;
	struct tr t;
	unsigned n = 0;

	/* Empty frames (fbytes(0) each) from the ring offset of @start: those
	 * that fit before the end, a skip marker over the gap at the end, then
	 * those that fit from offset 0 up to head. */
	const uint64_t fb = fbytes(0), off = start % CAP, k1 = (CAP - off) / fb;
	const uint64_t gap = CAP - off - k1 * fb, k2 = off / fb;
	uint64_t used = k1 * fb + (k2 ? gap + k2 * fb : 0);

	tr_open_at(&t, CAP, start);
	while (put(&t.p, SHMRUN_FRAME_DATA, n, 0, NULL) == 0)
		n++;
	ck_assert_uint_eq(n, k1 + k2);
	ck_assert_uint_eq(atomic_load(&t.sh->tail) - atomic_load(&t.sh->head), used);
	for (unsigned i = 0; i < n; i++) {
		ck_assert_int_eq(shmrun_ring_peek(&t.c, &f), 0);
		check_frame(f, SHMRUN_FRAME_DATA, i, 0);
		shmrun_ring_release(&t.c, f);
	}
	ck_assert_int_eq(shmrun_ring_peek(&t.c, &f), -EAGAIN);
	ck_assert_uint_eq(atomic_load(&t.sh->head), start + used);
	tr_close(&t);
}
END_TEST

/*
 * Regression: the open reservation was marked by its end index, with 0 meaning
 * "none", so a frame ending exactly at 2^64 looked unreserved and its commit
 * failed with -EINVAL.
 */
START_TEST(test_commit_frame_ending_at_2_64)
{
	const struct shmrun_frame *cf;
	struct shmrun_frame *f;
	struct tr t;

	for (uint32_t len = 0; len <= 64; len += 8) {
		tr_open_at(&t, CAP, 0 - fbytes(len));
		ck_assert_int_eq(shmrun_ring_reserve(&t.p, len, &f), 0);
		f->kind = SHMRUN_FRAME_DATA;
		ck_assert_int_eq(shmrun_ring_commit(&t.p, f), 0);
		ck_assert_int_eq(shmrun_ring_reserve(&t.p, 1, &f), 0);
		f->kind = SHMRUN_FRAME_END;
		ck_assert_int_eq(shmrun_ring_commit(&t.p, f), 0);
		shmrun_ring_flush(&t.p);
		ck_assert_uint_eq(atomic_load(&t.sh->tail), fbytes(1));
		ck_assert_int_eq(shmrun_ring_peek(&t.c, &cf), 0);
		ck_assert_uint_eq(cf->len, len);
		shmrun_ring_release(&t.c, cf);
		ck_assert_int_eq(shmrun_ring_peek(&t.c, &cf), 0);
		ck_assert_uint_eq(cf->kind, SHMRUN_FRAME_END);
		ck_assert_ptr_eq(cf, t.data + SHMRUN_FRAME_COMMIT);
		shmrun_ring_release(&t.c, cf);
		tr_close(&t);
	}
}
END_TEST

/*
 * Regression: commit compared start + frame size with the reservation's end in
 * 64-bit arithmetic, which wrapped near 2^64, so a grown len was accepted.
 */
START_TEST(test_commit_grown_len_across_2_64)
{
	struct shmrun_frame *f;
	struct tr t;

	tr_open_at(&t, CAP, UINT64_MAX - 63);
	ck_assert_int_eq(shmrun_ring_reserve(&t.p, 0, &f), 0);
	f->len = 100;
	ck_assert_int_eq(shmrun_ring_commit(&t.p, f), -EINVAL);
	f->len = UINT32_MAX;
	ck_assert_int_eq(shmrun_ring_commit(&t.p, f), -EINVAL);
	ck_assert_uint_eq(shmrun_ring_pending(&t.p), 0);
	f->len = 0;
	ck_assert_int_eq(shmrun_ring_commit(&t.p, f), 0);
	ck_assert_uint_eq(shmrun_ring_pending(&t.p), fbytes(0));
	tr_close(&t);
}
END_TEST

/* ---- full and empty ------------------------------------------------------ */

START_TEST(test_empty)
{
	const struct shmrun_frame *f = NULL;
	struct tr t;

	tr_open(&t, CAP);
	ck_assert_int_eq(shmrun_ring_peek(&t.c, &f), -EAGAIN);
	ck_assert_ptr_null(f);
	ck_assert(!shmrun_ring_readable(&t.c));
	ck_assert(shmrun_ring_writable(&t.p, 0));
	ck_assert(shmrun_ring_writable(&t.p, CAP / 2 - SHMRUN_FRAME_HEADER));
	ck_assert_int_eq(put(&t.p, SHMRUN_FRAME_DATA, 1, 10, NULL), 0);
	shmrun_ring_flush(&t.p);
	ck_assert(shmrun_ring_readable(&t.c));
	ck_assert_int_eq(shmrun_ring_peek(&t.c, &f), 0);
	shmrun_ring_release(&t.c, f);
	ck_assert_int_eq(shmrun_ring_peek(&t.c, &f), -EAGAIN);
	ck_assert_int_eq(shmrun_ring_peek(&t.c, &f), -EAGAIN);
	tr_close(&t);
}
END_TEST

static const uint32_t full_lens[] = {0,	 1,   7,    8,	  9,
				     48, 100, 1000, 1360, CAP / 2 - SHMRUN_FRAME_HEADER};

START_TEST(test_full_exact_count)
{
	uint32_t len = full_lens[_i];
	uint64_t fb = fbytes(len);
	const struct shmrun_frame *f;
	struct shmrun_frame *w;
	unsigned n = 0;
	struct tr t;

	tr_open(&t, CAP);
	shmrun_ring_set_batch(&t.p, CAP); /* nothing published until full */
	while (put(&t.p, SHMRUN_FRAME_DATA, n, len, NULL) == 0)
		n++;
	/* From offset 0 frames pack back to back; the next one would need a skip
	 * and a frame's room, and the ring has neither. */
	ck_assert_uint_eq(n, CAP / fb);
	ck_assert_int_eq(shmrun_ring_reserve(&t.p, len, &w), -EAGAIN);
	ck_assert(!shmrun_ring_writable(&t.p, len));
	/* An empty frame still fits iff its bytes are left before the end. */
	ck_assert(shmrun_ring_writable(&t.p, 0) == (CAP % fb >= fbytes(0)));
	/* -EAGAIN flushed: every committed frame is visible. */
	ck_assert_uint_eq(shmrun_ring_pending(&t.p), 0);
	ck_assert_uint_eq(atomic_load(&t.sh->tail), n * fb);
	/* Release one frame: room at offset 0 for one more (after a skip if the
	 * end had a gap). */
	ck_assert_int_eq(shmrun_ring_peek(&t.c, &f), 0);
	check_frame(f, SHMRUN_FRAME_DATA, 0, len);
	shmrun_ring_release(&t.c, f);
	ck_assert(shmrun_ring_writable(&t.p, len));
	ck_assert_int_eq(put(&t.p, SHMRUN_FRAME_DATA, n, len, &w), 0);
	ck_assert_ptr_eq(w, t.data + SHMRUN_FRAME_COMMIT);
	ck_assert_int_eq(shmrun_ring_reserve(&t.p, len, &w), -EAGAIN);
	for (unsigned i = 1; i <= n; i++) {
		ck_assert_int_eq(shmrun_ring_peek(&t.c, &f), 0);
		check_frame(f, SHMRUN_FRAME_DATA, i, len);
		shmrun_ring_release(&t.c, f);
	}
	ck_assert_int_eq(shmrun_ring_peek(&t.c, &f), -EAGAIN);
	tr_close(&t);
}
END_TEST

START_TEST(test_full_exact_count_mid_ring)
{
	/* 100-byte frames (fb = 128 padded) from offset 1000: k1 = 24 fit before
	 * the end (to 4072), then a 24-byte skip; the frames at 0.. may reach
	 * head (1000): k2 = 7 more (896). 31 in all. */
	const uint64_t fb = fbytes(100), k1 = (CAP - 1000) / fb, k2 = 1000 / fb;
	struct model m;
	unsigned n = 0;

	open_at_offset(&m, 1000);
	shmrun_ring_set_batch(&m.t.p, CAP);
	while (model_push(&m, 100) == 0)
		n++;
	ck_assert_uint_eq(n, k1 + k2);
	ck_assert_uint_eq(m.skips, 1);
	ck_assert_uint_eq(atomic_load(&m.t.sh->tail) - atomic_load(&m.t.sh->head),
			  (CAP - 1000 - k1 * fb) + (k1 + k2) * fb);
	model_drain(&m);
	model_close(&m);
}
END_TEST

/* ---- largest frame ------------------------------------------------------- */

static const uint64_t caps[] = {4096, 8192, 65536, 1u << 20};

START_TEST(test_max_payload)
{
	uint64_t cap = caps[_i];
	uint32_t max = (uint32_t)(cap / 2 - SHMRUN_FRAME_HEADER);
	const struct shmrun_frame *f;
	struct shmrun_frame *w;
	struct tr t;

	tr_open(&t, cap);
	ck_assert_uint_eq(shmrun_ring_max_payload(&t.p), max);
	ck_assert_uint_eq(shmrun_ring_max_payload(&t.c), max);
	/* One more byte is refused everywhere, even on an empty ring. */
	ck_assert_int_eq(shmrun_ring_reserve(&t.p, max + 1, &w), -EMSGSIZE);
	ck_assert_int_eq(shmrun_ring_reserve(&t.p, UINT32_MAX, &w), -EMSGSIZE);
	ck_assert_int_eq(shmrun_ring_write(&t.p, SHMRUN_FRAME_DATA, 0, 0, "", max + 1), -EMSGSIZE);
	ck_assert(!shmrun_ring_writable(&t.p, max + 1));
	ck_assert_int_eq(shmrun_ring_wait_writable(&t.p, max + 1, SHMRUN_IDLE_SPIN, 0), -EMSGSIZE);
	ck_assert_int_eq(shmrun_ring_wait_writable(&t.p, max + 1, SHMRUN_IDLE_SLEEP, -1),
			 -EMSGSIZE);
	ck_assert_int_eq(shmrun_ring_wait_writable(&t.p, UINT32_MAX, SHMRUN_IDLE_HYBRID, -1),
			 -EMSGSIZE);
	ck_assert_uint_eq(atomic_load(&t.sh->tail), 0);
	/* The largest frame works. It takes half the ring plus its commit word,
	 * so a second one waits until the first is released, then goes at
	 * offset 0 behind a skip marker. */
	ck_assert(shmrun_ring_writable(&t.p, max));
	ck_assert_int_eq(put(&t.p, SHMRUN_FRAME_DATA, 1, max, &w), 0);
	ck_assert_ptr_eq(w, t.data + SHMRUN_FRAME_COMMIT);
	ck_assert_int_eq(put(&t.p, SHMRUN_FRAME_DATA, 2, max, &w), -EAGAIN);
	ck_assert_int_eq(shmrun_ring_wait_writable(&t.p, max, SHMRUN_IDLE_SPIN, 0), -ETIMEDOUT);
	ck_assert_int_eq(shmrun_ring_peek(&t.c, &f), 0);
	check_frame(f, SHMRUN_FRAME_DATA, 1, max);
	shmrun_ring_release(&t.c, f);
	ck_assert_int_eq(shmrun_ring_wait_writable(&t.p, max, SHMRUN_IDLE_SPIN, 0), 0);
	ck_assert_int_eq(put(&t.p, SHMRUN_FRAME_DATA, 2, max, &w), 0);
	ck_assert_ptr_eq(w, t.data + SHMRUN_FRAME_COMMIT);
	ck_assert_int_eq(shmrun_ring_reserve(&t.p, 0, &w), -EAGAIN);
	ck_assert_int_eq(shmrun_ring_peek(&t.c, &f), 0);
	check_frame(f, SHMRUN_FRAME_DATA, 2, max);
	shmrun_ring_release(&t.c, f);
	ck_assert_int_eq(shmrun_ring_wait_writable(&t.p, max, SHMRUN_IDLE_SPIN, 0), 0);
	tr_close(&t);
}
END_TEST

START_TEST(test_max_payload_every_offset)
{
	/* The largest frame fits in an empty ring at every offset; at offset
	 * CAP / 2, where it and the skip before it would exceed the ring, once
	 * the consumer has stepped over the skip published alone. */
	const uint32_t max = CAP / 2 - SHMRUN_FRAME_HEADER;
	uint32_t lens[2] = {max, max};

	for (uint64_t off = 0; off < CAP; off += 8) {
		const struct shmrun_frame *f;
		struct model m;

		model_open(&m, CAP, off);
		if (off == CAP / 2) {
			ck_assert(!shmrun_ring_writable(&m.t.p, max));
			ck_assert_uint_eq(shmrun_ring_pending(&m.t.p), 0);
			ck_assert_uint_eq(atomic_load(&m.t.sh->tail), off + CAP / 2);
			ck_assert_int_eq(shmrun_ring_peek(&m.t.c, &f), -EAGAIN);
			m.pos += CAP / 2;
			m.skips++;
		}
		ck_assert(shmrun_ring_writable(&m.t.p, max));
		ck_assert_int_eq(model_push(&m, max), 0);
		model_pop(&m);
		model_stream(&m, lens, 2);
		model_close(&m);
	}
}
END_TEST

/* ---- commit --------------------------------------------------------------- */

START_TEST(test_commit_smaller_len)
{
	const struct shmrun_frame *f;
	struct shmrun_frame *w, *w2;
	struct tr t;
	unsigned n;

	tr_open(&t, CAP);
	shmrun_ring_set_batch(&t.p, CAP);
	ck_assert_int_eq(shmrun_ring_reserve(&t.p, 1000, &w), 0);
	w->kind = SHMRUN_FRAME_DATA;
	w->src_task = 4;
	w->dst_task = 5;
	memcpy(w->payload, "0123456789", 10);
	w->len = 10;
	ck_assert_int_eq(shmrun_ring_commit(&t.p, w), 0);
	ck_assert_uint_eq(shmrun_ring_pending(&t.p), fbytes(10));
	/* The unused room came back: the next frame follows at 32 bytes. */
	ck_assert_int_eq(shmrun_ring_reserve(&t.p, 0, &w2), 0);
	ck_assert_ptr_eq((unsigned char *)w2, (unsigned char *)w + fbytes(10));
	w2->kind = SHMRUN_FRAME_END;
	ck_assert_int_eq(shmrun_ring_commit(&t.p, w2), 0);
	shmrun_ring_flush(&t.p);
	ck_assert_int_eq(shmrun_ring_peek(&t.c, &f), 0);
	ck_assert_uint_eq(f->len, 10);
	ck_assert_mem_eq(f->payload, "0123456789", 10);
	shmrun_ring_release(&t.c, f);
	ck_assert_int_eq(shmrun_ring_peek(&t.c, &f), 0);
	ck_assert_uint_eq(f->kind, SHMRUN_FRAME_END);
	shmrun_ring_release(&t.c, f);
	tr_close(&t);

	/* Reserving the largest frame and committing it empty leaves room for
	 * CAP / fbytes(0) - 1 more empty frames, as if it had asked for 0. */
	tr_open(&t, CAP);
	ck_assert_int_eq(shmrun_ring_reserve(&t.p, CAP / 2 - SHMRUN_FRAME_HEADER, &w), 0);
	w->kind = SHMRUN_FRAME_DATA;
	w->len = 0;
	ck_assert_int_eq(shmrun_ring_commit(&t.p, w), 0);
	for (n = 1; put(&t.p, SHMRUN_FRAME_DATA, n, 0, NULL) == 0; n++)
		;
	ck_assert_uint_eq(n, CAP / fbytes(0));
	tr_close(&t);
}
END_TEST

START_TEST(test_commit_larger_len)
{
	struct shmrun_frame *w, other;
	const struct shmrun_frame *f;
	struct tr t;

	tr_open(&t, CAP);
	/* No reservation open. */
	memset(&other, 0, sizeof(other));
	ck_assert_int_eq(shmrun_ring_commit(&t.p, &other), -EINVAL);
	ck_assert_int_eq(shmrun_ring_reserve(&t.p, 100, &w), 0);
	w->kind = SHMRUN_FRAME_DATA;
	w->len = 101; /* still inside the padding of a 100-byte frame, but grown */
	ck_assert_int_eq(shmrun_ring_commit(&t.p, w), -EINVAL);
	w->len = 200;
	ck_assert_int_eq(shmrun_ring_commit(&t.p, w), -EINVAL);
	w->len = UINT32_MAX;
	ck_assert_int_eq(shmrun_ring_commit(&t.p, w), -EINVAL);
	/* Not the reserved frame. */
	w->len = 100;
	ck_assert_int_eq(shmrun_ring_commit(&t.p, &other), -EINVAL);
	ck_assert_int_eq(shmrun_ring_commit(&t.p, (struct shmrun_frame *)((char *)w + 8)), -EINVAL);
	ck_assert_uint_eq(shmrun_ring_pending(&t.p), 0);
	ck_assert_uint_eq(atomic_load(&t.sh->tail), 0);
	/* The reservation is still open and commits at its reserved length. */
	ck_assert_int_eq(shmrun_ring_reserve(&t.p, 1, &w), -EBUSY);
	ck_assert_int_eq(shmrun_ring_commit(&t.p, w), 0);
	ck_assert_int_eq(shmrun_ring_commit(&t.p, w), -EINVAL);
	shmrun_ring_flush(&t.p);
	ck_assert_uint_eq(atomic_load(&t.sh->tail), fbytes(100));
	ck_assert_int_eq(shmrun_ring_peek(&t.c, &f), 0);
	ck_assert_uint_eq(f->len, 100);
	tr_close(&t);
}
END_TEST

START_TEST(test_double_reserve)
{
	struct shmrun_frame *a, *b = NULL;
	struct tr t;

	tr_open(&t, CAP);
	ck_assert_int_eq(shmrun_ring_reserve(&t.p, 10, &a), 0);
	ck_assert_int_eq(shmrun_ring_reserve(&t.p, 10, &b), -EBUSY);
	ck_assert_int_eq(shmrun_ring_reserve(&t.p, 0, &b), -EBUSY);
	ck_assert_int_eq(shmrun_ring_write(&t.p, SHMRUN_FRAME_DATA, 0, 0, "x", 1), -EBUSY);
	ck_assert_ptr_null(b);
	a->kind = SHMRUN_FRAME_DATA;
	ck_assert_int_eq(shmrun_ring_commit(&t.p, a), 0);
	ck_assert_int_eq(shmrun_ring_reserve(&t.p, 10, &b), 0);
	ck_assert_ptr_eq((unsigned char *)b, (unsigned char *)a + fbytes(10));
	tr_close(&t);
}
END_TEST

/* ---- batching --------------------------------------------------------------- */

/* Peek everything visible; return how many frames. */
static unsigned drain_visible(struct tr *t)
{
	const struct shmrun_frame *f;
	unsigned n = 0;

	while (shmrun_ring_peek(&t->c, &f) == 0) {
		shmrun_ring_release(&t->c, f);
		n++;
	}
	return n;
}

START_TEST(test_batch_publication)
{
	const struct shmrun_frame *f;
	struct tr t;

	tr_open(&t, 65536);
	shmrun_ring_set_batch(&t.p, 1000);
	/* 104-byte frames (104 - FRAME_OVERHEAD payload): nine stay
	 * private, the tenth publishes. */
	ck_assert_uint_eq(fbytes(104 - FRAME_OVERHEAD), 104);
	for (unsigned i = 0; i < 9; i++) {
		ck_assert_int_eq(put(&t.p, SHMRUN_FRAME_DATA, i, 104 - FRAME_OVERHEAD, NULL), 0);
		ck_assert_uint_eq(shmrun_ring_pending(&t.p), (i + 1) * 104);
	}
	ck_assert_int_eq(put(&t.p, SHMRUN_FRAME_DATA, 9, 104 - FRAME_OVERHEAD, NULL), 0);
	ck_assert_uint_eq(shmrun_ring_pending(&t.p), 0);
	ck_assert_uint_eq(atomic_load(&t.sh->tail), 10 * 104);
	for (unsigned i = 0; i < 10; i++) {
		ck_assert_int_eq(shmrun_ring_peek(&t.c, &f), 0);
		check_frame(f, SHMRUN_FRAME_DATA, i, 104 - FRAME_OVERHEAD);
		shmrun_ring_release(&t.c, f);
	}
	ck_assert_int_eq(shmrun_ring_peek(&t.c, &f), -EAGAIN);
	/* Below the batch, frames appear only at flush. */
	for (unsigned i = 0; i < 3; i++)
		ck_assert_int_eq(put(&t.p, SHMRUN_FRAME_DATA, 10 + i, 0, NULL), 0);
	ck_assert_uint_eq(shmrun_ring_pending(&t.p), 3 * fbytes(0));
	ck_assert_int_eq(shmrun_ring_peek(&t.c, &f), -EAGAIN);
	ck_assert(!shmrun_ring_readable(&t.c));
	shmrun_ring_flush(&t.p);
	ck_assert_uint_eq(shmrun_ring_pending(&t.p), 0);
	shmrun_ring_flush(&t.p); /* nothing pending: no change */
	ck_assert_uint_eq(atomic_load(&t.sh->tail), 10 * 104 + 3 * fbytes(0));
	ck_assert_uint_eq(drain_visible(&t), 3);
	/* Batch 1 (and 0, clamped to 1) publishes every commit. */
	for (uint64_t b = 0; b <= 1; b++) {
		shmrun_ring_set_batch(&t.p, b);
		ck_assert_int_eq(put(&t.p, SHMRUN_FRAME_DATA, 20, 0, NULL), 0);
		ck_assert_uint_eq(shmrun_ring_pending(&t.p), 0);
		ck_assert_uint_eq(drain_visible(&t), 1);
	}
	/* A huge batch is clamped to capacity / 2. */
	shmrun_ring_set_batch(&t.p, UINT64_MAX);
	for (unsigned i = 0; i < 255; i++)
		ck_assert_int_eq(put(&t.p, SHMRUN_FRAME_DATA, i, 128 - FRAME_OVERHEAD, NULL), 0);
	ck_assert_uint_eq(shmrun_ring_pending(&t.p), 255 * 128);
	ck_assert_uint_eq(drain_visible(&t), 0);
	ck_assert_int_eq(put(&t.p, SHMRUN_FRAME_DATA, 255, 128 - FRAME_OVERHEAD, NULL), 0);
	ck_assert_uint_eq(shmrun_ring_pending(&t.p), 0);
	ck_assert_uint_eq(drain_visible(&t), 256);
	/* detach flushes what is pending */
	ck_assert_int_eq(put(&t.p, SHMRUN_FRAME_END, 1, 0, NULL), 0);
	ck_assert_uint_eq(drain_visible(&t), 0);
	shmrun_ring_detach(&t.p);
	ck_assert_uint_eq(drain_visible(&t), 1);
	tr_close(&t);
}
END_TEST

START_TEST(test_batch_default)
{
	/* Default batch: capacity / 16, at most 64 KiB. */
	static const uint64_t defaults[][2] = {
	    {4096, 256}, {65536, 4096}, {1u << 20, 65536}, {1u << 22, 65536}};
	struct tr t;

	for (unsigned k = 0; k < 4; k++) {
		uint64_t batch = defaults[k][1], n = batch / 64;

		tr_open(&t, defaults[k][0]);
		for (uint64_t i = 0; i + 1 < n; i++)
			ck_assert_int_eq(
			    put(&t.p, SHMRUN_FRAME_DATA, (uint32_t)i, 64 - FRAME_OVERHEAD, NULL),
			    0);
		ck_assert_uint_eq(shmrun_ring_pending(&t.p), batch - 64);
		ck_assert_uint_eq(atomic_load(&t.sh->tail), 0);
		ck_assert_int_eq(
		    put(&t.p, SHMRUN_FRAME_DATA, (uint32_t)n, 64 - FRAME_OVERHEAD, NULL), 0);
		ck_assert_uint_eq(shmrun_ring_pending(&t.p), 0);
		ck_assert_uint_eq(atomic_load(&t.sh->tail), batch);
		tr_close(&t);
	}
}
END_TEST

START_TEST(test_consumer_publishes_room)
{
	/* The consumer stores head at every release; a producer that re-reads it
	 * sees the room at once. */
	const struct shmrun_frame *f;
	struct tr t;

	tr_open(&t, CAP);
	for (unsigned i = 0; i < 4; i++)
		ck_assert_int_eq(put(&t.p, SHMRUN_FRAME_DATA, i, 1000, NULL), 0);
	ck_assert(!shmrun_ring_writable(&t.p, 1000));
	ck_assert_int_eq(shmrun_ring_peek(&t.c, &f), 0);
	shmrun_ring_release(&t.c, f);
	ck_assert_uint_eq(atomic_load(&t.sh->head), fbytes(1000));
	ck_assert(shmrun_ring_writable(&t.p, 1000));
	shmrun_ring_consumer_flush(&t.c);
	ck_assert_uint_eq(atomic_load(&t.sh->head), fbytes(1000));
	tr_close(&t);
}
END_TEST

/* ---- init and attach validation --------------------------------------------- */

START_TEST(test_memsize)
{
	static const uint64_t bad[] = {
	    0, 1, 8, 2048, 4095, 4097, 6144, 12288, 1u << 31, (1ull << 30) + 4096, UINT64_MAX};

	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_uint_eq(shmrun_ring_memsize(bad[i]), 0);
	for (uint64_t cap = 4096; cap <= SHMRUN_RING_MAX_CAPACITY; cap <<= 1) {
		ck_assert_uint_eq(shmrun_ring_memsize(cap), 256 + cap);
		ck_assert_uint_eq(shmrun_ring_memsize(cap) % SHMRUN_CACHELINE, 0);
	}
}
END_TEST

START_TEST(test_init_validation)
{
	static const uint64_t bad[] = {0, 2048, 4095, 4097, 5000, 6144, 1ull << 31, UINT64_MAX};
	size_t len = shmrun_ring_memsize(2 * CAP);
	unsigned char *mem = aligned_alloc(SHMRUN_CACHELINE, len + SHMRUN_CACHELINE);

	ck_assert_ptr_nonnull(mem);
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_int_eq(shmrun_ring_init(mem, len, bad[i]), -EINVAL);
	for (unsigned off = 8; off < SHMRUN_CACHELINE; off += 8)
		ck_assert_int_eq(shmrun_ring_init(mem + off, len, CAP), -EINVAL);
	ck_assert_int_eq(shmrun_ring_init(mem, shmrun_ring_memsize(2 * CAP) - 1, 2 * CAP), -ENOSPC);
	ck_assert_int_eq(shmrun_ring_init(mem, HDR, CAP), -ENOSPC);
	ck_assert_int_eq(shmrun_ring_init(mem, 0, CAP), -ENOSPC);
	/* Exactly memsize is enough; more is fine. */
	ck_assert_int_eq(shmrun_ring_init(mem, shmrun_ring_memsize(CAP), CAP), 0);
	ck_assert_int_eq(shmrun_ring_init(mem, len, CAP), 0);
	ck_assert_uint_eq(((struct shmrun_ring_shared *)mem)->capacity, CAP);
	ck_assert_uint_eq(((struct shmrun_ring_shared *)mem)->magic, SHMRUN_RING_MAGIC);
	free(mem);
}
END_TEST

/* Lay out a ring, corrupt it with @fn, expect attach to return @want. */
struct corrupt {
	const char *what;
	void (*fn)(struct shmrun_ring_shared *sh);
	int want;
};

static void c_magic(struct shmrun_ring_shared *sh)
{
	sh->magic ^= 1;
}

static void c_magic_segment(struct shmrun_ring_shared *sh)
{
	sh->magic = SHMRUN_SEGMENT_MAGIC;
}

static void c_version(struct shmrun_ring_shared *sh)
{
	sh->version = SHMRUN_RING_LAYOUT_VERSION + 1;
}

static void c_version0(struct shmrun_ring_shared *sh)
{
	sh->version = 0;
}

static void c_header_bytes(struct shmrun_ring_shared *sh)
{
	sh->header_bytes = 3 * SHMRUN_CACHELINE;
}

static void c_cap_npot(struct shmrun_ring_shared *sh)
{
	sh->capacity = 3 * CAP;
}

static void c_cap_small(struct shmrun_ring_shared *sh)
{
	sh->capacity = CAP / 2;
}

static void c_cap_zero(struct shmrun_ring_shared *sh)
{
	sh->capacity = 0;
}

static void c_cap_larger_than_len(struct shmrun_ring_shared *sh)
{
	sh->capacity = 4 * CAP;
}

static void set_idx(struct shmrun_ring_shared *sh, uint64_t head, uint64_t tail)
{
	atomic_store(&sh->head, head);
	atomic_store(&sh->tail, tail);
}

static void c_head_after_tail(struct shmrun_ring_shared *sh)
{
	set_idx(sh, 16, 8);
}

static void c_overfull(struct shmrun_ring_shared *sh)
{
	set_idx(sh, 0, 2 * CAP + 8);
}

static void c_overfull_by_8(struct shmrun_ring_shared *sh)
{
	set_idx(sh, 64, 64 + 2 * CAP + 8);
}

static void c_head_after_tail_2_64(struct shmrun_ring_shared *sh)
{
	set_idx(sh, 8, UINT64_MAX - 7);
}

static void c_head_misaligned(struct shmrun_ring_shared *sh)
{
	set_idx(sh, 4, 4);
}

static void c_tail_misaligned(struct shmrun_ring_shared *sh)
{
	set_idx(sh, 0, 12);
}

static void c_full_ok(struct shmrun_ring_shared *sh)
{
	set_idx(sh, 64, 64 + 2 * CAP);
}

static void c_straddle_2_64_ok(struct shmrun_ring_shared *sh)
{
	set_idx(sh, UINT64_MAX - 7, 8);
}

static void c_none(struct shmrun_ring_shared *sh)
{
	(void)sh;
}

/* The ring under test has capacity 2 * CAP. */
static const struct corrupt corrupts[] = {
    {"intact", c_none, 0},
    {"magic", c_magic, -EPROTO},
    {"segment magic", c_magic_segment, -EPROTO},
    {"version+1", c_version, -EPROTO},
    {"version 0", c_version0, -EPROTO},
    {"header_bytes", c_header_bytes, -EPROTO},
    {"capacity not a power of two", c_cap_npot, -EINVAL},
    {"capacity below minimum", c_cap_small, -EINVAL},
    {"capacity zero", c_cap_zero, -EINVAL},
    {"capacity beyond len", c_cap_larger_than_len, -EINVAL},
    {"head > tail", c_head_after_tail, -EINVAL},
    {"tail - head > capacity", c_overfull, -EINVAL},
    {"tail - head = capacity + 8", c_overfull_by_8, -EINVAL},
    {"head > tail across 2^64", c_head_after_tail_2_64, -EINVAL},
    {"head misaligned", c_head_misaligned, -EINVAL},
    {"tail misaligned", c_tail_misaligned, -EINVAL},
    {"full ring", c_full_ok, 0},
    {"indices straddling 2^64", c_straddle_2_64_ok, 0},
};
#define N_CORRUPTS (sizeof(corrupts) / sizeof(corrupts[0]))

START_TEST(test_attach_validation)
{
	const struct corrupt *c = &corrupts[_i];
	struct shmrun_ring r;
	struct tr t;

	tr_layout(&t, 2 * CAP);
	c->fn(t.sh);
	for (int role = SHMRUN_RING_PRODUCER; role <= SHMRUN_RING_CONSUMER; role++) {
		int err = shmrun_ring_attach(&r, t.mem, t.len, role);

		ck_assert_msg(err == c->want, "%s, role %d: attach returned %d, want %d", c->what,
			      role, err, c->want);
		if (!err)
			shmrun_ring_detach(&r);
	}
	free(t.mem);
}
END_TEST

START_TEST(test_attach_args)
{
	unsigned char *mem = aligned_alloc(SHMRUN_CACHELINE, shmrun_ring_memsize(CAP) + 128);
	size_t len = shmrun_ring_memsize(CAP);
	struct shmrun_ring r;

	ck_assert_ptr_nonnull(mem);
	ck_assert_int_eq(shmrun_ring_init(mem, len, CAP), 0);
	/* misaligned memory */
	for (unsigned off = 8; off < SHMRUN_CACHELINE; off += 8)
		ck_assert_int_eq(shmrun_ring_attach(&r, mem + off, len, SHMRUN_RING_PRODUCER),
				 -EINVAL);
	/* the ring does not fit the mapping */
	ck_assert_int_eq(shmrun_ring_attach(&r, mem, len - 1, SHMRUN_RING_PRODUCER), -EINVAL);
	ck_assert_int_eq(shmrun_ring_attach(&r, mem, HDR, SHMRUN_RING_CONSUMER), -EINVAL);
	ck_assert_int_eq(shmrun_ring_attach(&r, mem, HDR - 1, SHMRUN_RING_CONSUMER), -EINVAL);
	ck_assert_int_eq(shmrun_ring_attach(&r, mem, 0, SHMRUN_RING_CONSUMER), -EINVAL);
	/* not a role */
	ck_assert_int_eq(shmrun_ring_attach(&r, mem, len, 0), -EINVAL);
	ck_assert_int_eq(shmrun_ring_attach(&r, mem, len, 3), -EINVAL);
	/* a failed attach left no pid behind */
	ck_assert_int_eq(atomic_load(&((struct shmrun_ring_shared *)mem)->producer_pid), 0);
	ck_assert_int_eq(atomic_load(&((struct shmrun_ring_shared *)mem)->consumer_pid), 0);
	/* a good attach records this process as the side's owner */
	ck_assert_int_eq(shmrun_ring_attach(&r, mem, len, SHMRUN_RING_CONSUMER), 0);
	ck_assert_int_eq(atomic_load(&((struct shmrun_ring_shared *)mem)->consumer_pid), getpid());
	ck_assert(shmrun_ring_peer_alive(&r)); /* no producer yet: nothing to watch */
	shmrun_ring_detach(&r);
	shmrun_ring_detach(&r); /* twice is safe */
	free(mem);
}
END_TEST

START_TEST(test_attach_resumes)
{
	/* A handle attached to a ring in use resumes where the indices stand. */
	const struct shmrun_frame *f;
	struct shmrun_ring c2;
	struct tr t;

	tr_open(&t, CAP);
	shmrun_ring_set_batch(&t.p, 1);
	for (uint32_t i = 0; i < 5; i++)
		ck_assert_int_eq(put(&t.p, SHMRUN_FRAME_DATA, i, i * 10, NULL), 0);
	for (uint32_t i = 0; i < 2; i++) {
		ck_assert_int_eq(shmrun_ring_peek(&t.c, &f), 0);
		shmrun_ring_release(&t.c, f);
	}
	shmrun_ring_detach(&t.c);
	ck_assert_int_eq(shmrun_ring_attach(&c2, t.mem, t.len, SHMRUN_RING_CONSUMER), 0);
	for (uint32_t i = 2; i < 5; i++) {
		ck_assert_int_eq(shmrun_ring_peek(&c2, &f), 0);
		check_frame(f, SHMRUN_FRAME_DATA, i, i * 10);
		shmrun_ring_release(&c2, f);
	}
	ck_assert_int_eq(shmrun_ring_peek(&c2, &f), -EAGAIN);
	shmrun_ring_detach(&c2);
	tr_close(&t);
}
END_TEST

START_TEST(test_peek_corrupt_frame)
{
	/* A published frame with a bad kind or a length past the tail is -EPROTO. */
	const struct shmrun_frame *f;
	struct shmrun_frame *w;
	struct tr t;

	tr_open(&t, CAP);
	ck_assert_int_eq(put(&t.p, SHMRUN_FRAME_DATA, 1, 8, &w), 0);
	shmrun_ring_flush(&t.p);
	w->kind = 0;
	ck_assert_int_eq(shmrun_ring_peek(&t.c, &f), -EPROTO);
	w->kind = SHMRUN_FRAME_END + 1;
	ck_assert_int_eq(shmrun_ring_peek(&t.c, &f), -EPROTO);
	w->kind = SHMRUN_FRAME_DATA;
	w->len = 9;
	ck_assert_int_eq(shmrun_ring_peek(&t.c, &f), -EPROTO);
	w->len = 8;
	ck_assert_int_eq(shmrun_ring_peek(&t.c, &f), 0);
	check_frame(f, SHMRUN_FRAME_DATA, 1, 8);
	tr_close(&t);
}
END_TEST

/* ---- frame commit: stale bytes are never a frame -------------------------- */

/*
 * Fill @len payload bytes of frame @f, which starts at free-running index @at,
 * with forged frames for the next lap: at every index q = at + 24k + 24 + 8j the
 * words of an empty DATA frame whose commit word carries the lap of q + CAP.
 * A consumer that took stale bytes for a frame would find one that checks out.
 */
static void forge_next_lap(struct shmrun_frame *f, uint64_t at, uint32_t len)
{
	for (uint32_t i = 0; i + 8 <= len; i += 8) {
		uint64_t q = at + FRAME_OVERHEAD + i, w;

		switch ((q / 8) % 3) {
		case 0:
			w = fbytes(0) |
			    (uint64_t)(SHMRUN_RING_COMMIT_FRAME |
				       ((uint32_t)((q + CAP) / CAP) & SHMRUN_RING_COMMIT_LAP_MASK))
				<< 32;
			break;
		case 1: /* len 0, kind DATA, flags */
			w = (uint64_t)SHMRUN_FRAME_DATA << 32;
			break;
		default: /* src_task, dst_task */
			w = 0xdeadbeefull | 0xfeedfaceull << 32;
			break;
		}
		memcpy(f->payload + i, &w, 8);
	}
}

START_TEST(test_stale_lap_never_a_frame)
{
	/* From every 8-byte offset: a lap and a half of frames whose payloads
	 * are forged frames of the next lap (some committed smaller than they
	 * were reserved), each consumed at once; then small frames of every
	 * size over the forged bytes, each peeked right after its commit and
	 * followed by an empty peek; then the ring filled and drained. The
	 * consumer sees exactly the frames committed, never a forged one. */
	const uint32_t big = 400 - FRAME_OVERHEAD;
	const struct shmrun_frame *f;
	uint32_t lens[300];
	struct shmrun_frame *w;
	struct model m;

	for (uint64_t off = 0; off < CAP; off += 8) {
		uint64_t start = 3 * CAP + off, pos = start;
		uint32_t id = 0, len;

		model_open(&m, CAP, start);
		shmrun_ring_set_batch(&m.t.p, 1);
		while (pos - start < CAP + CAP / 2) {
			ck_assert_int_eq(shmrun_ring_reserve(&m.t.p, big, &w), 0);
			/* (the handle's private tail: where the frame starts) */
			forge_next_lap(w, m.t.p.tail, big);
			len = id % 3 == 0 ? 8 : big; /* smaller than reserved */
			w->kind = SHMRUN_FRAME_DATA;
			w->src_task = id;
			w->len = len;
			ck_assert_int_eq(shmrun_ring_commit(&m.t.p, w), 0);
			ck_assert_int_eq(shmrun_ring_peek(&m.t.c, &f), 0);
			ck_assert_ptr_eq(f, w);
			ck_assert_uint_eq(f->src_task, id);
			ck_assert_uint_eq(f->len, len);
			shmrun_ring_release(&m.t.c, f);
			ck_assert_int_eq(shmrun_ring_peek(&m.t.c, &f), -EAGAIN);
			pos = m.t.p.tail;
			id++;
		}
		m.pos = pos;
		for (uint32_t n = 0; n < 300; n++) {
			ck_assert_int_eq(model_push(&m, (n * 7 + (uint32_t)off / 8) % 61), 0);
			model_pop(&m);
			ck_assert_int_eq(shmrun_ring_peek(&m.t.c, &f), -EAGAIN);
		}
		for (uint32_t n = 0; n < 300; n++)
			lens[n] = (n * 13 + (uint32_t)off) % 200;
		shmrun_ring_set_batch(&m.t.p, CAP);
		model_stream(&m, lens, 300);
		model_close(&m);
	}
}
END_TEST

START_TEST(test_full_ring_previous_lap_word)
{
	/* A ring filled exactly: the word where the next frame goes is the
	 * commit word of the frame at head, one lap old. Once drained, the
	 * consumer finds that old word at its head and reports empty. */
	const uint64_t fb = fbytes(64 - FRAME_OVERHEAD);
	const struct shmrun_frame *f;
	struct tr t;
	uint32_t n = 0;

	ck_assert_uint_eq(fb, 64);
	tr_open_at(&t, CAP, 5 * CAP);
	while (put(&t.p, SHMRUN_FRAME_DATA, n, 64 - FRAME_OVERHEAD, NULL) == 0)
		n++;
	ck_assert_uint_eq(n, CAP / fb);
	for (uint32_t i = 0; i < n; i++) {
		ck_assert_int_eq(shmrun_ring_peek(&t.c, &f), 0);
		check_frame(f, SHMRUN_FRAME_DATA, i, 64 - FRAME_OVERHEAD);
		shmrun_ring_release(&t.c, f);
	}
	ck_assert_uint_ne(atomic_load((_Atomic uint64_t *)(void *)t.data), 0);
	ck_assert_int_eq(shmrun_ring_peek(&t.c, &f), -EAGAIN);
	ck_assert(!shmrun_ring_readable(&t.c));
	ck_assert_int_eq(put(&t.p, SHMRUN_FRAME_END, 99, 0, NULL), 0);
	shmrun_ring_flush(&t.p);
	ck_assert_int_eq(shmrun_ring_peek(&t.c, &f), 0);
	check_frame(f, SHMRUN_FRAME_END, 99, 0);
	tr_close(&t);
}
END_TEST

START_TEST(test_peek_foreign_commit_word)
{
	/* A commit word of neither this lap nor the previous one is corrupt. */
	const struct shmrun_frame *f;
	struct tr t;

	tr_open_at(&t, CAP, 4 * CAP);
	atomic_store((_Atomic uint64_t *)(void *)t.data,
		     fbytes(0) | (uint64_t)(SHMRUN_RING_COMMIT_FRAME | 2u) << 32);
	ck_assert_int_eq(shmrun_ring_peek(&t.c, &f), -EPROTO);
	/* lap 3, previous: empty */
	atomic_store((_Atomic uint64_t *)(void *)t.data,
		     fbytes(0) | (uint64_t)(SHMRUN_RING_COMMIT_FRAME | 3u) << 32);
	ck_assert_int_eq(shmrun_ring_peek(&t.c, &f), -EAGAIN);
	/* a skip marker that does not reach the end */
	atomic_store((_Atomic uint64_t *)(void *)t.data,
		     8 | (uint64_t)(SHMRUN_RING_COMMIT_SKIP | 4u) << 32);
	ck_assert_int_eq(shmrun_ring_peek(&t.c, &f), -EPROTO);
	tr_close(&t);
}
END_TEST

START_TEST(test_peek_word_in_last_bytes)
{
	/*
	 * A frame's commit word in the last 8 (or 16) bytes of the data area,
	 * where no frame header fits (found by fuzzing: tests/fuzz/corpus/ring/
	 * commit-word-in-last-bytes): -EPROTO, and the header is never read. The
	 * ring ends at a PROT_NONE page, so a read past it is a SIGSEGV here,
	 * in any build (the fast path read the header before it checked the
	 * word's step against the end).
	 */
	long page = sysconf(_SC_PAGESIZE);
	size_t bytes = shmrun_ring_memsize(CAP);
	size_t span = ((bytes + (size_t)page - 1) / (size_t)page + 1) * (size_t)page;
	unsigned char *base =
	    mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	unsigned char *mem, *data;
	struct shmrun_ring_shared *sh;
	const struct shmrun_frame *f;
	struct shmrun_ring c;

	ck_assert_ptr_ne(base, MAP_FAILED);
	ck_assert_int_eq(mprotect(base + span - (size_t)page, (size_t)page, PROT_NONE), 0);
	mem = base + span - (size_t)page - bytes; /* the data area ends at the guard page */
	ck_assert_uint_eq((uintptr_t)mem % SHMRUN_CACHELINE, 0);
	ck_assert_int_eq(shmrun_ring_init(mem, bytes, CAP), 0);
	sh = (struct shmrun_ring_shared *)(void *)mem;
	data = mem + HDR;
	for (uint64_t back = 8; back <= 16; back += 8) {
		uint64_t head = CAP - back; /* lap 0 */

		atomic_store(&sh->head, head);
		atomic_store(&sh->tail, head);
		ck_assert_int_eq(shmrun_ring_attach(&c, mem, bytes, SHMRUN_RING_CONSUMER), 0);
		shmrun_ring_set_wake_bell(&c, NULL);
		/* steps of 8, 16 and 24 (a header's worth, which does not fit either) */
		for (uint64_t step = 8; step <= 24; step += 8) {
			atomic_store((_Atomic uint64_t *)(void *)(data + head),
				     step | (uint64_t)SHMRUN_RING_COMMIT_FRAME << 32);
			ck_assert_int_eq(shmrun_ring_peek(&c, &f), -EPROTO);
			ck_assert_uint_eq(c.head, head);
		}
		shmrun_ring_detach(&c);
	}
	munmap(base, span);
}
END_TEST

START_TEST(test_null_wake_bell)
{
	/* With a NULL wake bell publishing neither rings nor reads a bell; with
	 * the default one it rings the sleeper announced in the bell. */
	const struct shmrun_frame *f;
	struct tr t;

	tr_open(&t, CAP);
	shmrun_ring_set_wake_bell(&t.p, NULL);
	shmrun_ring_set_wake_bell(&t.c, NULL);
	atomic_store(&t.sh->data_bell.waiting, 1);
	atomic_store(&t.sh->room_bell.waiting, 1);
	for (uint32_t i = 0; i < 100; i++) {
		ck_assert_int_eq(put(&t.p, SHMRUN_FRAME_DATA, i, i, NULL), 0);
		shmrun_ring_flush(&t.p);
		ck_assert_int_eq(shmrun_ring_peek(&t.c, &f), 0);
		check_frame(f, SHMRUN_FRAME_DATA, i, i);
		shmrun_ring_release(&t.c, f);
		ck_assert_int_eq(shmrun_ring_peek(&t.c, &f), -EAGAIN);
	}
	ck_assert_uint_eq(atomic_load(&t.sh->data_bell.seq), 0);
	ck_assert_uint_eq(atomic_load(&t.sh->room_bell.seq), 0);
	/* back to the ring's own bells: both ring */
	shmrun_ring_set_wake_bell(&t.p, &t.sh->data_bell);
	shmrun_ring_set_wake_bell(&t.c, &t.sh->room_bell);
	ck_assert_int_eq(put(&t.p, SHMRUN_FRAME_DATA, 100, 1, NULL), 0);
	shmrun_ring_flush(&t.p);
	ck_assert_uint_eq(atomic_load(&t.sh->data_bell.seq), 1);
	ck_assert_int_eq(shmrun_ring_peek(&t.c, &f), 0);
	shmrun_ring_release(&t.c, f);
	ck_assert_int_eq(shmrun_ring_peek(&t.c, &f), -EAGAIN);
	ck_assert_uint_eq(atomic_load(&t.sh->room_bell.seq), 1);
	atomic_store(&t.sh->data_bell.waiting, 0);
	atomic_store(&t.sh->room_bell.waiting, 0);
	tr_close(&t);
}
END_TEST

/* ---- waiting ---------------------------------------------------------------- */

static const enum shmrun_idle idles[] = {SHMRUN_IDLE_SPIN, SHMRUN_IDLE_SLEEP, SHMRUN_IDLE_HYBRID};

START_TEST(test_wait_timeouts)
{
	enum shmrun_idle idle = idles[_i];
	const int64_t ms = 1000000;
	int64_t t0, dt;
	struct tr t;
	uint32_t n = 0;

	tr_open(&t, CAP);
	/* Empty ring: the consumer times out; its live peer (this process) is
	 * checked along the way (the timeout is past the liveness interval). */
	t0 = now_ns();
	ck_assert_int_eq(shmrun_ring_wait_readable(&t.c, idle, 50 * ms), -ETIMEDOUT);
	dt = now_ns() - t0;
	ck_assert_int_ge(dt, 50 * ms);
	ck_assert_int_lt(dt, 1000 * ms);
	ck_assert_int_eq(shmrun_ring_wait_readable(&t.c, idle, 0), -ETIMEDOUT);
	ck_assert_int_eq(shmrun_ring_wait_writable(&t.p, 100, idle, 0), 0);
	/* Full ring: the producer times out. One frame fbytes(0) shorter than
	 * the others (which divide CAP) leaves exactly fbytes(0) bytes. */
	ck_assert_uint_eq(CAP % fbytes(100), 0);
	ck_assert_int_eq(put(&t.p, SHMRUN_FRAME_DATA, n++,
			     (uint32_t)(fbytes(100) - fbytes(0) - FRAME_OVERHEAD), NULL),
			 0);
	while (put(&t.p, SHMRUN_FRAME_DATA, n, 100, NULL) == 0)
		n++;
	ck_assert_uint_eq(n, CAP / fbytes(100));
	t0 = now_ns();
	ck_assert_int_eq(shmrun_ring_wait_writable(&t.p, 100, idle, 30 * ms), -ETIMEDOUT);
	dt = now_ns() - t0;
	ck_assert_int_ge(dt, 30 * ms);
	ck_assert_int_lt(dt, 1000 * ms);
	/* fbytes(0) bytes are left: an empty frame fits, an 8-byte one does not. */
	ck_assert_int_eq(shmrun_ring_wait_writable(&t.p, 0, idle, 0), 0);
	ck_assert_int_eq(shmrun_ring_wait_writable(&t.p, 8, idle, 0), -ETIMEDOUT);
	/* Ready at once: no wait. */
	ck_assert_int_eq(shmrun_ring_wait_readable(&t.c, idle, 0), 0);
	ck_assert_int_eq(shmrun_ring_wait_readable(&t.c, idle, -1), 0);
	tr_close(&t);
}
END_TEST

START_TEST(test_wait_unattached_peer)
{
	/* A side whose peer never attached waits (the peer counts as alive). */
	enum shmrun_idle idle = idles[_i];
	struct shmrun_ring r;
	struct tr t;

	tr_layout(&t, CAP);
	ck_assert_int_eq(shmrun_ring_attach(&r, t.mem, t.len, SHMRUN_RING_CONSUMER), 0);
	ck_assert(shmrun_ring_peer_alive(&r));
	ck_assert_int_eq(shmrun_ring_wait_readable(&r, idle, 45000000), -ETIMEDOUT);
	shmrun_ring_detach(&r);
	free(t.mem);
}
END_TEST

/*
 * Positions (ring.h, "positions"): the multi-host gateway relays frames from
 * ring A (its consumer) into ring B of the same capacity (its producer) and
 * takes a frame out of A only when B's consumer position + capacity covers the
 * index after it in A. Pinned here: the index after every frame is the same in
 * both rings (skip markers included, the largest frame at every offset too),
 * and a frame so covered always fits in B (reserve never says -EAGAIN).
 *
 * Skip markers are reproduced explicitly: whenever A's frame lies behind a
 * skip, the relay has B publish its own (shmrun_ring_skip()) as soon as the
 * skip is covered, before the frame. Reserve in B would not always put the
 * same skip: A's producer may have published it alone for the largest frame
 * at offset capacity / 2 (place_skip_alone()) and then written another frame
 * (found by this test: B placed that frame without the skip, 2 KiB apart),
 * and the largest frame itself is only covered once B's consumer has stepped
 * over B's copy of the skip (without it the relay waited forever).
 */
START_TEST(test_positions_relay)
{
	struct tr a, b;
	uint64_t cap = 4096, rng = 88172645463325252ull;
	uint32_t max, relayed = 0, written = 0, consumed = 0, skips = 0, alone = 0;
	uint64_t last_end = 0; /* index after the last frame relayed */
	bool skip_done = false;
	uint32_t retry = 0; /* length of the frame that did not fit */
	unsigned char buf[4096];

	tr_open(&a, cap);
	tr_open(&b, cap);
	max = shmrun_ring_max_payload(&a.p);
	ck_assert_uint_eq(shmrun_ring_capacity(&a.p), cap);
	ck_assert_uint_eq(shmrun_ring_capacity(&b.c), cap);
	while (consumed < 20000) {
		const struct shmrun_frame *f;
		struct shmrun_frame *w;

		rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
		/* produce into A: lengths from 0 to the largest frame, often frames
		 * of 256 ring bytes (so offset capacity / 2 comes up), a frame that
		 * did not fit retried like a worker's overflow queue does, or not */
		if (written < 20000 && (rng & 3)) {
			uint32_t len = (rng >> 8) % 5 == 0   ? max
				       : (rng >> 8) % 5 == 1 ? 256 - 24
							     : (uint32_t)((rng >> 16) % (max + 1));

			if (retry && (rng >> 50) % 4)
				len = retry;
			retry = 0;

			memset(buf, (int)written, len);
			if (shmrun_ring_write(&a.p, SHMRUN_FRAME_DATA, written, 0, buf, len) == 0) {
				written++;
				shmrun_ring_flush(&a.p);
			} else {
				retry = len;
			}
		}
		/* relay A -> B under the credit rule */
		if (shmrun_ring_peek(&a.c, &f) == 0) {
			uint64_t pos = shmrun_ring_position(&a.c);
			uint64_t after = pos + shmrun_ring_frame_bytes_(f->len);

			if (pos != last_end && !skip_done &&
			    pos - shmrun_ring_consumed(&b.p) <= cap) {
				/* a skip before the frame in A: B publishes its own */
				ck_assert_int_eq(shmrun_ring_skip(&b.p), 0);
				ck_assert_uint_eq(shmrun_ring_position(&b.p), pos);
				skip_done = true;
				skips++;
				alone += after - last_end > cap; /* skip and frame exceed the ring */
			}
			if ((pos == last_end || skip_done) &&
			    after - shmrun_ring_consumed(&b.p) <= cap) {
				ck_assert_int_eq(shmrun_ring_reserve(&b.p, f->len, &w), 0);
				w->kind = f->kind;
				w->src_task = f->src_task;
				memcpy(w->payload, f->payload, f->len);
				ck_assert_int_eq(shmrun_ring_commit(&b.p, w), 0);
				ck_assert_uint_eq(shmrun_ring_position(&b.p), after);
				shmrun_ring_flush(&b.p);
				shmrun_ring_release(&a.c, f);
				last_end = after;
				skip_done = false;
				relayed++;
			}
		}
		/* consume B, now and then */
		if ((rng >> 40) % 3 == 0 && shmrun_ring_peek(&b.c, &f) == 0) {
			ck_assert_uint_eq(f->src_task, consumed);
			memset(buf, (int)consumed, f->len);
			ck_assert(memcmp(f->payload, buf, f->len) == 0);
			shmrun_ring_release(&b.c, f);
			consumed++;
			ck_assert_uint_eq(shmrun_ring_consumed(&b.p), shmrun_ring_position(&b.c));
		} else if ((rng >> 40) % 3 == 0) {
			/* an empty ring: peek stepped over any skip (as a consumer does) */
			ck_assert_uint_eq(shmrun_ring_consumed(&b.p), shmrun_ring_position(&b.c));
		}
	}
	ck_assert_uint_eq(relayed, 20000);
	ck_assert_uint_gt(skips, 100);
	ck_assert_uint_gt(alone, 0);
	ck_assert_uint_eq(shmrun_ring_position(&a.c), shmrun_ring_position(&b.c));
	tr_close(&a);
	tr_close(&b);
}
END_TEST

static Suite *ring_suite(void)
{
	Suite *s = suite_create("ring");
	TCase *tc;

	tc = tcase_create("framing");
	tcase_add_test(tc, test_framing_round_trip);
	tcase_add_test(tc, test_framing_alignment_every_length);
	suite_add_tcase(s, tc);

	tc = tcase_create("wrap");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_wrap_every_offset);
	tcase_add_test(tc, test_max_payload_every_offset);
	suite_add_tcase(s, tc);

	tc = tcase_create("index_2_64");
	tcase_set_timeout(tc, 30);
	tcase_add_loop_test(tc, test_index_wrap_2_64, 0, N_NEAR_TOP);
	tcase_add_loop_test(tc, test_index_wrap_2_64_full, 0, N_NEAR_TOP);
	tcase_add_test(tc, test_commit_frame_ending_at_2_64);
	tcase_add_test(tc, test_commit_grown_len_across_2_64);
	suite_add_tcase(s, tc);

	tc = tcase_create("full_empty");
	tcase_add_test(tc, test_empty);
	tcase_add_loop_test(tc, test_full_exact_count, 0, sizeof(full_lens) / sizeof(full_lens[0]));
	tcase_add_test(tc, test_full_exact_count_mid_ring);
	suite_add_tcase(s, tc);

	tc = tcase_create("max_payload");
	tcase_add_loop_test(tc, test_max_payload, 0, sizeof(caps) / sizeof(caps[0]));
	suite_add_tcase(s, tc);

	tc = tcase_create("commit");
	tcase_add_test(tc, test_commit_smaller_len);
	tcase_add_test(tc, test_commit_larger_len);
	tcase_add_test(tc, test_double_reserve);
	suite_add_tcase(s, tc);

	tc = tcase_create("batching");
	tcase_add_test(tc, test_batch_publication);
	tcase_add_test(tc, test_batch_default);
	tcase_add_test(tc, test_consumer_publishes_room);
	suite_add_tcase(s, tc);

	tc = tcase_create("validation");
	tcase_add_test(tc, test_memsize);
	tcase_add_test(tc, test_init_validation);
	tcase_add_loop_test(tc, test_attach_validation, 0, N_CORRUPTS);
	tcase_add_test(tc, test_attach_args);
	tcase_add_test(tc, test_attach_resumes);
	tcase_add_test(tc, test_peek_corrupt_frame);
	suite_add_tcase(s, tc);

	tc = tcase_create("frame_commit");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_stale_lap_never_a_frame);
	tcase_add_test(tc, test_full_ring_previous_lap_word);
	tcase_add_test(tc, test_peek_foreign_commit_word);
	tcase_add_test(tc, test_peek_word_in_last_bytes);
	tcase_add_test(tc, test_null_wake_bell);
	suite_add_tcase(s, tc);

	tc = tcase_create("positions");
	tcase_add_test(tc, test_positions_relay);
	suite_add_tcase(s, tc);

	tc = tcase_create("wait");
	tcase_set_timeout(tc, 20);
	tcase_add_loop_test(tc, test_wait_timeouts, 0, 3);
	tcase_add_loop_test(tc, test_wait_unattached_peer, 0, 3);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(ring_suite());
	int failed;

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
