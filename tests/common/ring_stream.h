/*
 * tests/common/ring_stream.h: the checked frame stream that the ring transfer
 * tests push through one ring, from two processes (integration/check_ring_procs.c)
 * or two threads (unit/check_ring_threads.c).
 *
 * Frame seq (0, 1, 2, ...) is a DATA frame with src_task = (uint32_t)seq,
 * dst_task = ~(uint32_t)seq and the payload
 *
 *     [u64 seq][u64 XXH64(body, seed = seq)][body]
 *
 * The body length comes from a PRNG seeded with cfg->seed, so the consumer
 * replays the exact length sequence; one frame in four has a short body (0..63
 * bytes), the others a body of 0..max_payload-16 bytes, so frames cover every
 * size and every 8-byte wrap position. The body bytes come from a per-frame PRNG.
 * An END frame closes the stream with [u64 frames][u64 payload bytes].
 *
 * The producer fills frames in place (reserve/commit) and the consumer verifies
 * them in place (peek/release), waiting with shmrun_ring_wait_writable() and
 * shmrun_ring_wait_readable() in cfg->idle mode. Neither side aborts: each
 * returns 0 or -1 with a message in res->msg, so a forked child can _exit with
 * a status and a thread can hand its result to the main thread's assertions.
 *
 * XXH_INLINE_ALL compiles XXH64 into the test, so a sanitizer build checks its
 * reads of the ring too.
 */
#ifndef SHMRUN_TESTS_RING_STREAM_H
#define SHMRUN_TESTS_RING_STREAM_H

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "shmrun/ring.h"

/* Bytes of [seq][checksum] in front of every DATA body. */
#define RS_PREFIX 16u

struct rs_cfg {
	uint64_t seed;	       /* lengths and contents */
	uint64_t bytes;	       /* send DATA frames until this many payload bytes */
	enum shmrun_idle idle; /* how both sides wait */
	int64_t wait_ns;       /* give up if one wait lasts longer */
};

struct rs_result {
	uint64_t frames; /* DATA frames sent or verified */
	uint64_t bytes;	 /* their payload bytes */
	uint64_t waits;	 /* calls of shmrun_ring_wait_*() */
	char msg[200];	 /* what went wrong, "" on success */
};

/* splitmix64: a tiny seeded PRNG, the same on both sides. */
static inline uint64_t rs_rand(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Next body length of the stream; @max_payload is the ring's. */
static inline uint32_t rs_body_len(uint64_t *lens, uint32_t max_payload)
{
	uint64_t x = rs_rand(lens);
	uint32_t max_body = max_payload - RS_PREFIX;

	if ((x & 3) == 0)
		return (uint32_t)((x >> 2) % 64);
	return (uint32_t)((x >> 2) % ((uint64_t)max_body + 1));
}

static inline void rs_fill(unsigned char *p, uint32_t n, uint64_t seed, uint64_t seq)
{
	uint64_t st = seed ^ (seq * 0xd1342543de82ef95ull), w;
	uint32_t i;

	for (i = 0; i + 8 <= n; i += 8) {
		w = rs_rand(&st);
		memcpy(p + i, &w, 8);
	}
	if (i < n) {
		w = rs_rand(&st);
		memcpy(p + i, &w, n - i);
	}
}

static inline int rs_fail(struct rs_result *res, const char *what, uint64_t seq, int64_t got,
			  int64_t want)
{
	snprintf(res->msg, sizeof(res->msg),
		 "%s at frame %" PRIu64 ": got %" PRId64 ", want %" PRId64, what, seq, got, want);
	return -1;
}

/* Reserve @len bytes, waiting for room as long as it takes. */
static inline int rs_reserve(struct shmrun_ring *r, const struct rs_cfg *cfg, uint32_t len,
			     uint64_t seq, struct shmrun_frame **f, struct rs_result *res)
{
	int err;

	for (;;) {
		err = shmrun_ring_reserve(r, len, f);
		if (err != -EAGAIN)
			break;
		res->waits++;
		err = shmrun_ring_wait_writable(r, len, cfg->idle, cfg->wait_ns);
		if (err)
			return rs_fail(res, "wait_writable", seq, err, 0);
	}
	if (err)
		return rs_fail(res, "reserve", seq, err, 0);
	if ((uintptr_t)*f % SHMRUN_FRAME_ALIGN != 0 || (*f)->len != len)
		return rs_fail(res, "reserved frame misaligned or wrong len", seq, (*f)->len, len);
	return 0;
}

static inline int rs_produce(struct shmrun_ring *r, const struct rs_cfg *cfg, struct rs_result *res)
{
	uint32_t max_payload = shmrun_ring_max_payload(r);
	uint64_t lens = cfg->seed, seq = 0, bytes = 0, trailer[2];
	struct shmrun_frame *f;
	int err;

	memset(res, 0, sizeof(*res));
	while (bytes < cfg->bytes) {
		uint32_t body = rs_body_len(&lens, max_payload);
		uint32_t len = RS_PREFIX + body;
		uint64_t sum;

		if (rs_reserve(r, cfg, len, seq, &f, res))
			return -1;
		f->kind = SHMRUN_FRAME_DATA;
		f->src_task = (uint32_t)seq;
		f->dst_task = ~(uint32_t)seq;
		rs_fill(f->payload + RS_PREFIX, body, cfg->seed, seq);
		sum = XXH64(f->payload + RS_PREFIX, body, seq);
		memcpy(f->payload, &seq, 8);
		memcpy(f->payload + 8, &sum, 8);
		err = shmrun_ring_commit(r, f);
		if (err)
			return rs_fail(res, "commit", seq, err, 0);
		seq++;
		bytes += len;
	}
	if (rs_reserve(r, cfg, sizeof(trailer), seq, &f, res))
		return -1;
	f->kind = SHMRUN_FRAME_END;
	f->src_task = (uint32_t)seq;
	f->dst_task = ~(uint32_t)seq;
	trailer[0] = seq;
	trailer[1] = bytes;
	memcpy(f->payload, trailer, sizeof(trailer));
	err = shmrun_ring_commit(r, f);
	if (err)
		return rs_fail(res, "commit END", seq, err, 0);
	shmrun_ring_flush(r);
	if (shmrun_ring_pending(r) != 0)
		return rs_fail(res, "pending after flush", seq, (int64_t)shmrun_ring_pending(r), 0);
	res->frames = seq;
	res->bytes = bytes;
	return 0;
}

/* Check one DATA frame against what the producer must have sent as @seq. */
static inline int rs_verify(const struct shmrun_frame *f, uint64_t seq, uint32_t body,
			    struct rs_result *res)
{
	uint64_t got_seq, got_sum;

	if (f->len != RS_PREFIX + body)
		return rs_fail(res, "len", seq, f->len, RS_PREFIX + body);
	if (f->src_task != (uint32_t)seq || f->dst_task != ~(uint32_t)seq)
		return rs_fail(res, "src/dst task", seq, f->src_task, (uint32_t)seq);
	memcpy(&got_seq, f->payload, 8);
	memcpy(&got_sum, f->payload + 8, 8);
	if (got_seq != seq)
		return rs_fail(res, "sequence number (order)", seq, (int64_t)got_seq, (int64_t)seq);
	if (got_sum != XXH64(f->payload + RS_PREFIX, body, seq))
		return rs_fail(res, "XXH64 checksum", seq, (int64_t)got_sum,
			       (int64_t)XXH64(f->payload + RS_PREFIX, body, seq));
	return 0;
}

static inline int rs_consume(struct shmrun_ring *r, const struct rs_cfg *cfg, struct rs_result *res)
{
	uint32_t max_payload = shmrun_ring_max_payload(r);
	uint64_t lens = cfg->seed, seq = 0, bytes = 0, trailer[2];
	const struct shmrun_frame *f;
	int err;

	memset(res, 0, sizeof(*res));
	for (;;) {
		err = shmrun_ring_peek(r, &f);
		if (err == -EAGAIN) {
			res->waits++;
			err = shmrun_ring_wait_readable(r, cfg->idle, cfg->wait_ns);
			if (err)
				return rs_fail(res, "wait_readable", seq, err, 0);
			continue;
		}
		if (err)
			return rs_fail(res, "peek", seq, err, 0);
		if ((uintptr_t)f % SHMRUN_FRAME_ALIGN != 0)
			return rs_fail(res, "misaligned frame", seq, (int64_t)(uintptr_t)f, 0);
		if (f->kind == SHMRUN_FRAME_END)
			break;
		if (f->kind != SHMRUN_FRAME_DATA)
			return rs_fail(res, "kind", seq, f->kind, SHMRUN_FRAME_DATA);
		if (rs_verify(f, seq, rs_body_len(&lens, max_payload), res))
			return -1;
		bytes += f->len;
		seq++;
		shmrun_ring_release(r, f);
	}
	if (f->len != sizeof(trailer))
		return rs_fail(res, "END len", seq, f->len, sizeof(trailer));
	memcpy(trailer, f->payload, sizeof(trailer));
	if (trailer[0] != seq)
		return rs_fail(res, "END frame count", seq, (int64_t)trailer[0], (int64_t)seq);
	if (trailer[1] != bytes)
		return rs_fail(res, "END byte count", seq, (int64_t)trailer[1], (int64_t)bytes);
	shmrun_ring_release(r, f);
	err = shmrun_ring_peek(r, &f);
	if (err != -EAGAIN)
		return rs_fail(res, "peek after END", seq, err, -EAGAIN);
	res->frames = seq;
	res->bytes = bytes;
	return 0;
}

#endif /* SHMRUN_TESTS_RING_STREAM_H */
