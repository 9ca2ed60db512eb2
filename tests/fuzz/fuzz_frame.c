/*
 * tests/fuzz/fuzz_frame.c: the record-frame decoder (chan_next_record(),
 * runtime/channel.h) over arbitrary payloads, and the channel path that
 * encodes frames, checked against it.
 *
 * Input: [u16 frame flags][u8 ring size][payload...]. The payload is a DATA
 * frame's payload as the receiver's deliver_frame() (worker.c) walks it:
 * records back to back, [u32 key_len][u32 value_len][u64 hash][i64 time]?
 * [key][value]. Decoding stops at the first record that runs past the end
 * (-EBADMSG, which the worker reports as a corrupt frame).
 *
 * Then the records decoded are sent again through a real channel (a
 * struct chan_out on a ring of 4 to 32 KiB, chosen by the input): batches,
 * a record alone in its frame when larger than a batch, the overflow queue
 * behind a full ring and chan_drain(); a consumer handle reads the ring and
 * decodes every frame. What comes out must be exactly what went in: the same
 * records, in order, with the same hashes and times.
 *
 * What must hold: no crash, read outside the payload, leak or UB; every
 * decoded key and value inside the payload; decoding always makes progress;
 * the round trip is exact.
 */
#include <errno.h>
#include <string.h>

#include "channel.h"
#include "fuzz.h"

#define MAX_RECS 4096

struct rec {
	struct shmrun_record r;
	uint64_t hash;
};

static struct rec recs[MAX_RECS];

/* Consume every frame the ring holds, checking its records against recs[*@next..]. */
static void consume(struct shmrun_ring *in, uint16_t flags, uint32_t n, uint32_t *next)
{
	const struct shmrun_frame *f;
	int err;

	while ((err = shmrun_ring_peek(in, &f)) == 0) {
		const unsigned char *p = f->payload, *end = f->payload + f->len;

		FUZZ_CHECK(f->kind == SHMRUN_FRAME_DATA && f->flags == flags);
		FUZZ_CHECK(f->src_task == 7 && f->dst_task == 9);
		while (p < end) {
			struct shmrun_record r;
			uint64_t hash;

			FUZZ_CHECK(chan_next_record(&p, end, f->flags, &r, &hash) == 0);
			FUZZ_CHECK(*next < n);
			FUZZ_CHECK(r.key_len == recs[*next].r.key_len &&
				   r.value_len == recs[*next].r.value_len &&
				   hash == recs[*next].hash &&
				   r.event_time_ns == recs[*next].r.event_time_ns);
			FUZZ_CHECK(!r.key_len || memcmp(r.key, recs[*next].r.key, r.key_len) == 0);
			FUZZ_CHECK(!r.value_len ||
				   memcmp(r.value, recs[*next].r.value, r.value_len) == 0);
			(*next)++;
		}
		shmrun_ring_release(in, f);
	}
	FUZZ_CHECK(err == -EAGAIN);
}

static void round_trip(uint16_t flags, unsigned shift, uint32_t n)
{
	uint64_t capacity = (uint64_t)SHMRUN_RING_MIN_CAPACITY << shift;
	size_t bytes = shmrun_ring_memsize(capacity);
	void *mem = aligned_alloc(SHMRUN_CACHELINE, bytes);
	struct chan_out out = {0};
	struct shmrun_ring in;
	uint32_t backlogged = 0, next = 0;

	FUZZ_CHECK(mem != NULL);
	FUZZ_CHECK(shmrun_ring_init(mem, bytes, capacity) == 0);
	FUZZ_CHECK(shmrun_ring_attach(&out.ring, mem, bytes, SHMRUN_RING_PRODUCER) == 0);
	FUZZ_CHECK(shmrun_ring_attach(&in, mem, bytes, SHMRUN_RING_CONSUMER) == 0);
	shmrun_ring_set_wake_bell(&out.ring, NULL);
	shmrun_ring_set_wake_bell(&in, NULL);
	out.backlogged = &backlogged;
	out.src_task = 7;
	out.dst_task = 9;
	FUZZ_CHECK(chan_batch_init(&out) == 0);
	for (uint32_t i = 0; i < n; i++) {
		uint64_t need = chan_rec_bytes(&recs[i].r, flags);

		if (need > shmrun_ring_max_payload(&out.ring)) {
			n = i; /* the worker refuses such a record before it gets here */
			break;
		}
		FUZZ_CHECK(chan_put_rec(&out, &recs[i].r, recs[i].hash, flags, (uint32_t)need) == 0);
		if (i % 7 == 6) { /* now and then the receiver reads */
			shmrun_ring_flush(&out.ring);
			consume(&in, flags, n, &next);
			chan_drain(&out);
		}
	}
	FUZZ_CHECK(chan_flush_batch(&out) == 0);
	for (int rounds = 0; rounds < 100000; rounds++) {
		shmrun_ring_flush(&out.ring);
		consume(&in, flags, n, &next);
		if (!chan_backlogged(&out))
			break;
		chan_drain(&out);
	}
	FUZZ_CHECK(!chan_backlogged(&out) && backlogged == 0);
	shmrun_ring_flush(&out.ring);
	consume(&in, flags, n, &next);
	FUZZ_CHECK(next == n);
	shmrun_ring_detach(&out.ring);
	shmrun_ring_detach(&in);
	free(out.batch);
	free(out.ovf);
	free(mem);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const unsigned char *p, *end = data + size;
	uint16_t flags;
	unsigned shift;
	uint32_t n = 0;

	if (size < 3)
		return 0;
	memcpy(&flags, data, 2);
	shift = data[2] & 3;
	p = data + 3;
	while (p < end && n < MAX_RECS) {
		const unsigned char *before = p;
		struct rec *r = &recs[n];

		if (chan_next_record(&p, end, flags, &r->r, &r->hash))
			break;
		FUZZ_CHECK(p > before && p <= end);
		FUZZ_CHECK(!r->r.key_len ||
			   ((const unsigned char *)r->r.key >= data + 3 &&
			    (const unsigned char *)r->r.key + r->r.key_len <= end));
		FUZZ_CHECK(!r->r.value_len ||
			   ((const unsigned char *)r->r.value >= data + 3 &&
			    (const unsigned char *)r->r.value + r->r.value_len <= end));
		n++;
	}
	/* the sender's flags: only the record-format bits travel with records */
	round_trip(flags & (REC_TIMED | REC_COMBINED), shift, n);
	return 0;
}
