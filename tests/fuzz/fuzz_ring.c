/*
 * tests/fuzz/fuzz_ring.c: a ring's consumer facing a hostile producer, and a
 * segment attached over damaged memory (shm/ring.c, shm/segment.c).
 *
 * Threat model (shm/ring.c's file comment): the producer is another process
 * that may be buggy or die mid-write; the bytes it shares — indices, commit
 * words, frame headers, payloads, and (segment mode) the segment header and
 * ring table — may hold anything. The consumer must not crash, read outside
 * the ring's data area, or loop forever over them; it reports what it cannot
 * trust as corruption (-EPROTO from shmrun_ring_peek(), -EINVAL/-EPROTO from
 * the attach calls). A producer scribbling on a frame while the consumer reads
 * it is not modelled here (one thread): the consumer validates each frame once,
 * at peek, and steps over exactly what it validated.
 *
 * Input: [u8 mode][u64 head][u32 tail - head][u16 offset][bytes...]
 *   mode bit 0    capacity 4 KiB or 8 KiB
 *   mode bit 1    prefill: a producer first writes valid frames whose payload
 *                 lengths are the input's bytes (times 7), then the bytes are
 *                 XORed over the data area from offset: damage to a real ring;
 *                 without it the bytes are copied there (a ring of garbage)
 *   mode bit 2    segment: a segment of two rings (both prefilled), the bytes
 *                 XORed over the whole mapping from offset (headers and ring
 *                 table included), then shmrun_segment_attach() and every ring
 *   head, tail    the shared indices before the consumer attaches (head is
 *                 aligned to 8 bytes; tail is taken as it is, for attach to judge)
 *
 * Every frame the consumer is handed must lie inside the data area, with a
 * kind in range; DATA frames are decoded as the worker does
 * (chan_next_record()); WATERMARK, END and BARRIER frames are read only when
 * long enough (as worker.c read_channel()). The consumer may take at most one
 * lap's worth of frames before it finds nothing (static memory: the lap tags
 * change); more is a loop. A corrupt frame is reported again, unchanged, by
 * the next peek. A producer attaching afterwards finds tail - head <= capacity.
 */
#include <errno.h>
#include <string.h>

#include "channel.h"
#include "fuzz.h"
#include "layout.h"

/* Drain @r (consumer handle on @data, @capacity bytes) as a worker would. */
static void drain(struct shmrun_ring *r)
{
	const unsigned char *data = r->data;
	uint64_t max_frames = 2 * r->capacity / SHMRUN_FRAME_ALIGN + 4, frames = 0;
	const struct shmrun_frame *f;
	int err;

	while ((err = shmrun_ring_peek(r, &f)) == 0) {
		const unsigned char *fb = (const unsigned char *)f;
		uint64_t head = r->head;

		FUZZ_CHECK(++frames <= max_frames); /* else: the consumer loops */
		FUZZ_CHECK(fb >= data + SHMRUN_FRAME_COMMIT &&
			   fb + SHMRUN_FRAME_HEADER + (uint64_t)f->len <= data + r->capacity);
		FUZZ_CHECK(f->kind >= SHMRUN_FRAME_DATA && f->kind <= SHMRUN_FRAME_END);
		if (f->kind == SHMRUN_FRAME_DATA) {
			const unsigned char *p = f->payload, *end = f->payload + f->len;
			struct shmrun_record rec;
			uint64_t hash;

			while (p < end && chan_next_record(&p, end, f->flags, &rec, &hash) == 0)
				FUZZ_CHECK(p <= end);
		} else if (f->len >= 12) { /* WATERMARK, BARRIER: 8 bytes; END: 12 */
			uint64_t e;
			uint32_t stop;

			memcpy(&e, f->payload, 8);
			memcpy(&stop, f->payload + 8, 4);
			(void)e;
			(void)stop;
		}
		shmrun_ring_release(r, f);
		/* free-running indices: the difference, modulo 2^64 */
		FUZZ_CHECK(r->head - head > 0 && r->head - head <= r->capacity);
	}
	FUZZ_CHECK(err == -EAGAIN || err == -EPROTO);
	if (err == -EPROTO) {
		uint64_t head = r->head;

		FUZZ_CHECK(shmrun_ring_peek(r, &f) == -EPROTO && r->head == head);
		FUZZ_CHECK(shmrun_ring_readable(r)); /* something is there: not -EAGAIN */
	}
	shmrun_ring_consumer_flush(r);
}

/* A producer's frames into the ring at @mem: payload lengths from @len[0..@n). */
static void prefill(void *mem, size_t bytes, const uint8_t *len, size_t n)
{
	static const unsigned char zeros[SHMRUN_RING_MIN_CAPACITY * 2];
	struct shmrun_ring p;

	if (shmrun_ring_attach(&p, mem, bytes, SHMRUN_RING_PRODUCER))
		return;
	shmrun_ring_set_wake_bell(&p, NULL);
	shmrun_ring_set_batch(&p, 1 + (n ? len[0] : 0) * 16u);
	for (size_t i = 0; i < n; i++) {
		uint32_t l = len[i] * 7u;

		if (shmrun_ring_write(&p, (uint16_t)(1 + i % 4), (uint32_t)i, 1, zeros, l) == -EAGAIN)
			break;
	}
	shmrun_ring_detach(&p); /* flushes */
}

/* Attach a consumer to the ring at @mem, drain it, then attach a producer. */
static void consume(void *mem, size_t bytes)
{
	struct shmrun_ring c, p;

	if (shmrun_ring_attach(&c, mem, bytes, SHMRUN_RING_CONSUMER))
		return;
	shmrun_ring_set_wake_bell(&c, NULL);
	drain(&c);
	shmrun_ring_detach(&c);
	/* a producer attaching after it walks the commit words (published_end()) */
	if (shmrun_ring_attach(&p, mem, bytes, SHMRUN_RING_PRODUCER) == 0) {
		FUZZ_CHECK(p.tail - p.head_cache <= p.capacity);
		shmrun_ring_set_wake_bell(&p, NULL);
		shmrun_ring_detach(&p);
	}
}

static void xor_over(unsigned char *mem, size_t len, size_t off, const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		mem[(off + i) % len] ^= b[i];
}

static void ring_mode(uint8_t mode, uint64_t head, uint32_t gap, uint16_t off, const uint8_t *b,
		      size_t n)
{
	uint64_t capacity = SHMRUN_RING_MIN_CAPACITY << (mode & 1);
	size_t bytes = shmrun_ring_memsize(capacity);
	unsigned char *mem = aligned_alloc(SHMRUN_CACHELINE, bytes);
	struct shmrun_ring_shared *sh = (struct shmrun_ring_shared *)mem;
	unsigned char *data = mem + sizeof(*sh);

	FUZZ_CHECK(mem && shmrun_ring_init(mem, bytes, capacity) == 0);
	head &= ~(uint64_t)(SHMRUN_FRAME_ALIGN - 1);
	atomic_store(&sh->head, head);
	atomic_store(&sh->tail, head);
	if (mode & 2) {
		prefill(mem, bytes, b, n);
		xor_over(data, capacity, off, b, n);
	} else {
		for (size_t i = 0; i < n && i < capacity; i++)
			data[(head + off + i) & (capacity - 1)] = b[i];
	}
	atomic_store(&sh->tail, head + gap);
	consume(mem, bytes);
	free(mem);
}

static void segment_mode(uint16_t off, const uint8_t *b, size_t n)
{
	const struct shmrun_segment_ring_spec spec[2] = {{SHMRUN_RING_MIN_CAPACITY, 1, 2},
							  {SHMRUN_RING_MIN_CAPACITY, 2, 1}};
	size_t total = shmrun_segment_memsize(spec, 2);
	unsigned char *mem = aligned_alloc(SHMRUN_SEGMENT_RING_ALIGN, total);
	struct shmrun_segment seg;

	FUZZ_CHECK(mem && shmrun_segment_init(mem, total, spec, 2, 42) == 0);
	FUZZ_CHECK(shmrun_segment_attach(&seg, mem, total) == 0);
	for (uint32_t i = 0; i < 2; i++) {
		size_t len;
		void *ring = shmrun_segment_ring(&seg, i, &len);

		prefill(ring, len, b, n);
	}
	shmrun_segment_close(&seg);
	xor_over(mem, total, off * 8u, b, n);
	if (shmrun_segment_attach(&seg, mem, total) == 0) {
		FUZZ_CHECK(seg.rings <= SHMRUN_SEGMENT_MAX_RINGS);
		for (uint32_t i = 0; i < seg.rings; i++) {
			size_t len;
			unsigned char *ring = shmrun_segment_ring(&seg, i, &len);

			FUZZ_CHECK(ring && ring >= mem && len <= total &&
				   (size_t)(ring - mem) <= total - len);
			consume(ring, len);
		}
		shmrun_segment_close(&seg);
	}
	free(mem);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t head;
	uint32_t gap;
	uint16_t off;

	if (size < 15)
		return 0;
	memcpy(&head, data + 1, 8);
	memcpy(&gap, data + 9, 4);
	memcpy(&off, data + 13, 2);
	if (data[0] & 4)
		segment_mode(off, data + 15, size - 15);
	else
		ring_mode(data[0], head, gap, off, data + 15, size - 15);
	return 0;
}
