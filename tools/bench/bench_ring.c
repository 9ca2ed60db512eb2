/*
 * tools/bench/bench_ring.c: the `ring` and `pingpong` subcommands.
 *
 * ring: throughput of one shmrun ring between a producer process on CPU A and
 * a consumer process on CPU B, for payloads of 16, 32, 64, 256 and 1024 bytes.
 * The launcher-like parent creates a segment with shmrun_segment_create() and
 * forks; each child attaches the segment and its side of the ring. The
 * producer reserves a frame, writes the payload in place (word j of record s
 * is s + j) and commits; the consumer peeks, adds up every 64-bit payload word,
 * checks the first word is the record's sequence number and releases. Both wait
 * through shmrun_ring_wait_writable()/wait_readable() with the chosen idle
 * strategy. The first records (two passes over the ring, to fault in and warm
 * every page) are not timed; the consumer times the rest, up to the END frame
 * the producer sends after --seconds (or --records). The sums of both sides
 * must match, or the run fails.
 *
 * The reference ("ideal") moves the same payload bytes between two processes
 * pinned the same way through the simplest fast SPSC queue there is: Lamport's
 * ring of fixed-size slots (slot = payload, no header) with head and tail on
 * their own cache lines, each side caching the other's index and re-reading it
 * only when the cached value says full/empty (Vyukov; Rigtorp's SPSCQueue), one
 * release store of the index per record, no batching. Same fill, same sum, same
 * check, same warm-up, same timing. Each case takes the best of --reps
 * repetitions of the ring and of the reference, interleaved, so both see the
 * same noise.
 *
 * pingpong: round-trip latency of 32-byte frames. Process A writes a frame into
 * ring A->B and flushes it, process B waits for it (spin), copies the payload
 * into a frame of ring B->A and flushes, A waits for the echo. A timestamps
 * every round trip (bench_ts()) into an array allocated and faulted in before
 * the start barrier, then sorts it for the percentiles. The reference bounces
 * the same 32 bytes plus a sequence counter in one shared cache line: A writes
 * the payload and stores seq = 2i+1, B waits for it, writes the payload back and
 * stores 2i+2. A second reference ("ideal2") answers on a second line, one line
 * per direction as any pair of rings must: the floor for a ring design, which
 * the single line beats because B's answer reuses the line it already holds.
 * Each percentile is the best (lowest) of --reps repetitions.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "shmrun/segment.h"

/* A side gives up waiting for the other after this long (it is then dead or
 * descheduled for good; the parent's own deadline is longer). */
#define WAIT_NS (10 * 1000000000ll)

#define PINGPONG_BYTES 32u
#define PINGPONG_WORDS (PINGPONG_BYTES / 8)

/* ---- payload ------------------------------------------------------------- */

static inline void fill_payload(uint64_t *w, uint32_t nwords, uint64_t seq)
{
	for (uint32_t j = 0; j < nwords; j++)
		w[j] = seq + j;
}

/* Sum of the words fill_payload() writes, modulo 2^64. */
static inline uint64_t payload_sum(uint32_t nwords, uint64_t seq)
{
	return (uint64_t)nwords * seq + (uint64_t)nwords * (nwords - 1) / 2;
}

static inline uint64_t sum_words(const uint64_t *w, uint32_t nwords)
{
	uint64_t s = 0;

	for (uint32_t j = 0; j < nwords; j++)
		s += w[j];
	return s;
}

static const char *side_name(int side)
{
	return side ? "consumer" : "producer";
}

/* ---- ring throughput: the shmrun ring ------------------------------------ */

/* What both children of one throughput measurement need (set before fork). */
struct tput_run {
	const struct bench_opts *opts;
	struct bench_ctl *ctl;
	struct shmrun_segment *seg; /* ring measurement: the parent's segment */
	void *queue;		    /* ideal measurement: the shared queue */
	uint32_t len;		    /* payload bytes */
	uint64_t warm;		    /* untimed records first */
	uint64_t records;	    /* timed records, 0 = run for opts->seconds */
};

/* Whether the producer, which has sent @seq records, should stop. */
static inline bool producer_done(const struct tput_run *t, uint64_t seq, int64_t t_start)
{
	if (seq < t->warm)
		return false;
	if (t->records)
		return seq - t->warm >= t->records;
	return (seq - t->warm) % 1024 == 0 && seq > t->warm &&
	       bench_now_ns() - t_start >= (int64_t)(t->opts->seconds * 1e9);
}

static int ring_fail(int side, const char *what, int err)
{
	fprintf(stderr, "shmrun-bench: ring %s (pid %d): %s: %s\n", side_name(side), (int)getpid(),
		what, strerror(-err));
	return BENCH_EXIT_FAIL;
}

static int ring_produce(struct tput_run *t, struct shmrun_ring *r)
{
	const uint32_t len = t->len, nwords = len / 8;
	const enum shmrun_idle idle = t->opts->idle;
	uint64_t seq = 0, sum = 0, waits = 0;
	int64_t t_start = 0;
	struct shmrun_frame *f;
	int err;

	for (;;) {
		if (seq == t->warm && !t_start)
			t_start = bench_now_ns();
		if (producer_done(t, seq, t_start))
			break;
		err = shmrun_ring_reserve(r, len, &f);
		if (err == -EAGAIN) {
			err = shmrun_ring_wait_writable(r, len, idle, WAIT_NS);
			if (err)
				return ring_fail(0, "shmrun_ring_wait_writable", err);
			waits++;
			continue;
		}
		if (err)
			return ring_fail(0, "shmrun_ring_reserve", err);
		f->kind = SHMRUN_FRAME_DATA;
		f->src_task = 0;
		f->dst_task = 1;
		fill_payload((uint64_t *)f->payload, nwords, seq);
		err = shmrun_ring_commit(r, f);
		if (err)
			return ring_fail(0, "shmrun_ring_commit", err);
		sum += payload_sum(nwords, seq);
		seq++;
	}
	while ((err = shmrun_ring_reserve(r, 0, &f)) == -EAGAIN) {
		err = shmrun_ring_wait_writable(r, 0, idle, WAIT_NS);
		if (err)
			return ring_fail(0, "shmrun_ring_wait_writable", err);
	}
	if (err)
		return ring_fail(0, "shmrun_ring_reserve", err);
	f->kind = SHMRUN_FRAME_END;
	f->src_task = 0;
	f->dst_task = 1;
	err = shmrun_ring_commit(r, f);
	if (err)
		return ring_fail(0, "shmrun_ring_commit", err);
	shmrun_ring_flush(r);
	t->ctl->sent = seq;
	t->ctl->sent_sum = sum;
	t->ctl->waits[0] = waits;
	return 0;
}

static int ring_consume(struct tput_run *t, struct shmrun_ring *r)
{
	const uint32_t len = t->len, nwords = len / 8;
	const enum shmrun_idle idle = t->opts->idle;
	const struct shmrun_frame *f;
	uint64_t n = 0, sum = 0, waits = 0;
	int64_t t_start = 0, t_end;
	int err;

	for (;;) {
		err = shmrun_ring_peek(r, &f);
		if (err == -EAGAIN) {
			err = shmrun_ring_wait_readable(r, idle, WAIT_NS);
			if (err)
				return ring_fail(1, "shmrun_ring_wait_readable", err);
			waits++;
			continue;
		}
		if (err)
			return ring_fail(1, "shmrun_ring_peek", err);
		if (f->kind == SHMRUN_FRAME_END)
			break;
		const uint64_t *w = (const uint64_t *)f->payload;

		if (f->kind != SHMRUN_FRAME_DATA || f->len != len || w[0] != n) {
			fprintf(stderr,
				"shmrun-bench: ring consumer: record %" PRIu64
				" is wrong (kind %u, len %u, first word %" PRIu64 ")\n",
				n, f->kind, f->len, w[0]);
			return BENCH_EXIT_FAIL;
		}
		sum += sum_words(w, nwords);
		shmrun_ring_release(r, f);
		if (++n == t->warm)
			t_start = bench_now_ns();
	}
	t_end = bench_now_ns();
	shmrun_ring_release(r, f);
	shmrun_ring_consumer_flush(r);
	t->ctl->recv = n;
	t->ctl->recv_sum = sum;
	t->ctl->timed = n - t->warm;
	t->ctl->timed_ns = t_end - t_start;
	t->ctl->waits[1] = waits;
	return 0;
}

static int ring_child(int side, void *arg)
{
	struct tput_run *t = arg;
	struct shmrun_segment seg;
	struct shmrun_ring r;
	size_t len;
	void *mem;
	int err, rc;

	/* Attach as a worker would: validate the inherited mapping, then open
	 * this process's side of the ring. */
	err = shmrun_segment_attach(&seg, t->seg->base, t->seg->len);
	if (err)
		return ring_fail(side, "shmrun_segment_attach", err);
	mem = shmrun_segment_ring(&seg, 0, &len);
	err = shmrun_ring_attach(&r, mem, len, side ? SHMRUN_RING_CONSUMER : SHMRUN_RING_PRODUCER);
	if (err)
		return ring_fail(side, "shmrun_ring_attach", err);
	if (!side && t->opts->batch)
		shmrun_ring_set_batch(&r, t->opts->batch);
	if (bench_barrier(t->ctl))
		rc = BENCH_EXIT_FAIL;
	else
		rc = side ? ring_consume(t, &r) : ring_produce(t, &r);
	shmrun_ring_detach(&r);
	shmrun_segment_close(&seg);
	return rc;
}

/* ---- ring throughput: the ideal reference queue ------------------------------ */

/*
 * The reference queue, in shared memory: three cache lines of indices, then
 * ideal_slots() slots of the payload size each (no header).
 */
struct ideal_queue {
	/* producer writes (release per record); consumer reads when it thinks
	 * the queue is empty */
	alignas(SHMRUN_CACHELINE) _Atomic uint64_t tail;
	/* consumer writes (release per record); producer reads when it thinks
	 * the queue is full */
	alignas(SHMRUN_CACHELINE) _Atomic uint64_t head;
	/* producer writes once, after its last tail: the record count */
	alignas(SHMRUN_CACHELINE) _Atomic uint64_t done;
};

#define IDEAL_NOT_DONE UINT64_MAX

static uint64_t ideal_slots(const struct bench_opts *o, uint32_t len)
{
	uint64_t n = 1;

	while (n * 2 * len <= o->ring_bytes)
		n *= 2;
	return n;
}

static size_t ideal_bytes(const struct bench_opts *o, uint32_t len)
{
	return sizeof(struct ideal_queue) + ideal_slots(o, len) * len;
}

static int ideal_timeout(int side)
{
	fprintf(stderr, "shmrun-bench: ideal %s (pid %d): the other side stopped moving\n",
		side_name(side), (int)getpid());
	return BENCH_EXIT_FAIL;
}

static int ideal_produce(struct tput_run *t)
{
	struct ideal_queue *q = t->queue;
	unsigned char *slots = (unsigned char *)(q + 1);
	const uint32_t len = t->len, nwords = len / 8;
	const uint64_t nslots = ideal_slots(t->opts, len), mask = nslots - 1;
	uint64_t tail = 0, head_cache = 0, sum = 0;
	int64_t t_start = 0;
	struct bench_spin s;

	for (;;) {
		if (tail == t->warm)
			t_start = bench_now_ns();
		if (producer_done(t, tail, t_start))
			break;
		if (tail - head_cache == nslots) {
			bench_spin_start(&s, WAIT_NS);
			/* acquire: pairs with the consumer's release store of head;
			 * it has read the slot we are about to overwrite. */
			while (tail - (head_cache =
					   atomic_load_explicit(&q->head, memory_order_acquire)) ==
			       nslots)
				if (bench_spin(&s))
					return ideal_timeout(0);
		}
		fill_payload((uint64_t *)(slots + (tail & mask) * len), nwords, tail);
		sum += payload_sum(nwords, tail);
		/* release: pairs with the consumer's acquire load of tail; publishes
		 * the slot. */
		atomic_store_explicit(&q->tail, ++tail, memory_order_release);
	}
	/* release: pairs with the consumer's acquire load of done. */
	atomic_store_explicit(&q->done, tail, memory_order_release);
	t->ctl->sent = tail;
	t->ctl->sent_sum = sum;
	return 0;
}

static int ideal_consume(struct tput_run *t)
{
	struct ideal_queue *q = t->queue;
	const unsigned char *slots = (const unsigned char *)(q + 1);
	const uint32_t len = t->len, nwords = len / 8;
	const uint64_t mask = ideal_slots(t->opts, len) - 1;
	uint64_t head = 0, tail_cache = 0, sum = 0;
	int64_t t_start = 0, t_end;
	struct bench_spin s;

	for (;;) {
		if (head == tail_cache) {
			bench_spin_start(&s, WAIT_NS);
			/* acquire: pairs with the producer's release store of tail;
			 * the slots below it are written. */
			while ((tail_cache =
				    atomic_load_explicit(&q->tail, memory_order_acquire)) == head) {
				/* acquire: pairs with the release store of done, which
				 * follows the producer's last tail store. */
				if (atomic_load_explicit(&q->done, memory_order_acquire) == head)
					goto finished;
				if (bench_spin(&s))
					return ideal_timeout(1);
			}
		}
		const uint64_t *w = (const uint64_t *)(slots + (head & mask) * len);

		if (w[0] != head) {
			fprintf(stderr,
				"shmrun-bench: ideal consumer: record %" PRIu64
				" is wrong (first word %" PRIu64 ")\n",
				head, w[0]);
			return BENCH_EXIT_FAIL;
		}
		sum += sum_words(w, nwords);
		/* release: pairs with the producer's acquire load of head; our
		 * reads of the slot happen before it is overwritten. */
		atomic_store_explicit(&q->head, ++head, memory_order_release);
		if (head == t->warm)
			t_start = bench_now_ns();
	}
finished:
	t_end = bench_now_ns();
	t->ctl->recv = head;
	t->ctl->recv_sum = sum;
	t->ctl->timed = head - t->warm;
	t->ctl->timed_ns = t_end - t_start;
	return 0;
}

static int ideal_child(int side, void *arg)
{
	struct tput_run *t = arg;

	if (bench_barrier(t->ctl))
		return BENCH_EXIT_FAIL;
	return side ? ideal_consume(t) : ideal_produce(t);
}

/* ---- ring throughput: driver ---------------------------------------------- */

static double parent_timeout(const struct bench_opts *o)
{
	return 60.0 + (o->records ? 0.0 : 4.0 * o->seconds);
}

/* Check one finished measurement; return records per second, or -1. */
static double tput_result(const char *what, const struct tput_run *t, const struct bench_ctl *c)
{
	if (c->sent != c->recv || c->sent_sum != c->recv_sum) {
		fprintf(stderr,
			"shmrun-bench: %s bytes=%u: checksum mismatch: sent %" PRIu64
			" records (sum %#" PRIx64 "), received %" PRIu64 " (sum %#" PRIx64 ")\n",
			what, t->len, c->sent, c->sent_sum, c->recv, c->recv_sum);
		return -1;
	}
	if (c->timed == 0 || c->timed_ns <= 0) {
		fprintf(stderr, "shmrun-bench: %s bytes=%u: nothing was timed\n", what, t->len);
		return -1;
	}
	return (double)c->timed * 1e9 / (double)c->timed_ns;
}

static double measure_ring(struct tput_run *t)
{
	struct shmrun_segment_ring_spec spec = {
	    .capacity = t->opts->ring_bytes,
	    .producer = 0,
	    .consumer = 1,
	};
	struct shmrun_segment seg;
	double rate = -1;
	int err;

	memset(t->ctl, 0, sizeof(*t->ctl));
	err = shmrun_segment_create(&seg, &spec, 1, 0x62656e6368ull /* "bench" */);
	if (err) {
		fprintf(stderr, "shmrun-bench: shmrun_segment_create (%" PRIu64 "-byte ring): %s\n",
			spec.capacity, strerror(-err));
		return -1;
	}
	t->seg = &seg;
	if (!bench_run_pair(t->opts, t->ctl, ring_child, t, parent_timeout(t->opts)))
		rate = tput_result("ring", t, t->ctl);
	t->seg = NULL;
	shmrun_segment_close(&seg);
	return rate;
}

static double measure_ideal(struct tput_run *t)
{
	size_t bytes = ideal_bytes(t->opts, t->len);
	struct ideal_queue *q;
	double rate = -1;

	memset(t->ctl, 0, sizeof(*t->ctl));
	q = bench_map_shared(bytes);
	if (!q)
		return -1;
	atomic_store_explicit(&q->tail, 0, memory_order_relaxed);
	atomic_store_explicit(&q->head, 0, memory_order_relaxed);
	atomic_store_explicit(&q->done, IDEAL_NOT_DONE, memory_order_relaxed);
	t->queue = q;
	if (!bench_run_pair(t->opts, t->ctl, ideal_child, t, parent_timeout(t->opts)))
		rate = tput_result("ideal", t, t->ctl);
	t->queue = NULL;
	bench_unmap_shared(q, bytes);
	return rate;
}

static const char *idle_name(enum shmrun_idle idle)
{
	return idle == SHMRUN_IDLE_SPIN ? "spin" : idle == SHMRUN_IDLE_HYBRID ? "hybrid" : "sleep";
}

static void print_cpus(const struct bench_opts *o)
{
	if (o->cpu[0] < 0)
		printf("unpinned");
	else
		printf("on CPUs %d,%d", o->cpu[0], o->cpu[1]);
}

int bench_ring_main(const struct bench_opts *opts)
{
	struct bench_ctl *ctl = bench_map_shared(sizeof(*ctl));
	unsigned checked = 0;
	int rc = 0;

	if (!ctl)
		return BENCH_EXIT_FAIL;
	printf("# ring: producer and consumer processes ");
	print_cpus(opts);
	printf(", ring_bytes=%" PRIu64 " idle=%s", opts->ring_bytes, idle_name(opts->idle));
	if (opts->batch)
		printf(" batch=%" PRIu64, opts->batch);
	if (opts->records)
		printf(" records=%" PRIu64, opts->records);
	else
		printf(" seconds=%.2f", opts->seconds);
	printf(", best of %u\n", opts->reps);

	for (unsigned i = 0; i < opts->nsizes; i++) {
		struct tput_run t = {
		    .opts = opts,
		    .ctl = ctl,
		    .len = opts->sizes[i],
		    .records = opts->records,
		};
		double best_ring = 0, best_ideal = 0, rate;

		/* Two passes over the ring fault in and warm every page; quick
		 * runs only need a few records before the timed ones. */
		t.warm = opts->quick ? 1000 : 2 * opts->ring_bytes / t.len;
		for (unsigned rep = 0; rep < opts->reps; rep++) {
			rate = measure_ring(&t);
			if (rate < 0)
				goto err_fail;
			if (opts->verbose)
				printf("# ring bytes=%u rep=%u mrec_s=%.2f records=%" PRIu64
				       " producer_waits=%" PRIu64 " consumer_waits=%" PRIu64 "\n",
				       t.len, rep + 1, rate / 1e6, ctl->recv, ctl->waits[0],
				       ctl->waits[1]);
			if (rate > best_ring)
				best_ring = rate;
			rate = measure_ideal(&t);
			if (rate < 0)
				goto err_fail;
			if (opts->verbose)
				printf("# ideal bytes=%u rep=%u mrec_s=%.2f records=%" PRIu64 "\n",
				       t.len, rep + 1, rate / 1e6, ctl->recv);
			if (rate > best_ideal)
				best_ideal = rate;
			checked += 2;
		}
		printf("ring bytes=%u mrec_s=%.2f gb_s=%.3f\n", t.len, best_ring / 1e6,
		       best_ring * t.len / 1e9);
		printf("ideal bytes=%u mrec_s=%.2f gb_s=%.3f\n", t.len, best_ideal / 1e6,
		       best_ideal * t.len / 1e9);
		printf("ratio bytes=%u ring_vs_ideal=%.2f\n", t.len, best_ring / best_ideal);
		fflush(stdout);
	}
	printf("# checksums: %u measurements, every consumer sum matched its producer's\n",
	       checked);
	goto out_unmap;

err_fail:
	rc = BENCH_EXIT_FAIL;
out_unmap:
	bench_unmap_shared(ctl, sizeof(*ctl));
	return rc;
}

/* ---- pingpong -------------------------------------------------------------- */

struct pp_run {
	const struct bench_opts *opts;
	struct bench_ctl *ctl;
	struct shmrun_segment *seg; /* ring measurement: rings 0 (A->B) and 1 (B->A) */
	void *line;		    /* ideal measurement: the shared cache line */
	bool two_lines;		    /* ideal: B answers on a second line (struct pp_line[2]) */
	uint64_t warm;		    /* untimed round trips first */
	uint64_t iters;		    /* timed round trips */
};

/* The reference: one cache line holding the sequence counter and payload. */
struct pp_line {
	/* stored by A (odd values) and B (even values), release; each side
	 * waits for the other's with acquire */
	alignas(SHMRUN_CACHELINE) _Atomic uint64_t seq;
	uint64_t payload[PINGPONG_WORDS]; /* written by whoever seq says owns the line */
};

static int pp_fail(int side, const char *what, int err)
{
	fprintf(stderr, "shmrun-bench: pingpong process %c (pid %d): %s: %s\n", side ? 'B' : 'A',
		(int)getpid(), what, strerror(-err));
	return BENCH_EXIT_FAIL;
}

/* Reserve a frame on @r, waiting if needed. */
static int pp_reserve(int side, struct shmrun_ring *r, enum shmrun_idle idle, uint32_t len,
		      struct shmrun_frame **f)
{
	int err;

	while ((err = shmrun_ring_reserve(r, len, f)) == -EAGAIN) {
		err = shmrun_ring_wait_writable(r, len, idle, WAIT_NS);
		if (err)
			return pp_fail(side, "shmrun_ring_wait_writable", err);
	}
	return err ? pp_fail(side, "shmrun_ring_reserve", err) : 0;
}

/* Peek the next frame on @r, waiting if needed. */
static int pp_peek(int side, struct shmrun_ring *r, enum shmrun_idle idle,
		   const struct shmrun_frame **f)
{
	int err;

	while ((err = shmrun_ring_peek(r, f)) == -EAGAIN) {
		err = shmrun_ring_wait_readable(r, idle, WAIT_NS);
		if (err)
			return pp_fail(side, "shmrun_ring_wait_readable", err);
	}
	return err ? pp_fail(side, "shmrun_ring_peek", err) : 0;
}

/* Sort the round trips and store the percentiles. */
static void pp_percentiles(struct bench_ctl *ctl, uint64_t *rtt, uint64_t n)
{
	bench_sort_u64(rtt, n);
	ctl->p50_ns = bench_ts_to_ns(bench_percentile_sorted(rtt, n, 0.50));
	ctl->p99_ns = bench_ts_to_ns(bench_percentile_sorted(rtt, n, 0.99));
	ctl->p999_ns = bench_ts_to_ns(bench_percentile_sorted(rtt, n, 0.999));
}

static int pp_ring_ping(struct pp_run *p, struct shmrun_ring *out, struct shmrun_ring *in,
			uint64_t *rtt)
{
	const enum shmrun_idle idle = p->opts->idle;
	const uint64_t total = p->warm + p->iters;
	uint64_t sent_sum = 0, echo_sum = 0;
	const struct shmrun_frame *g;
	struct shmrun_frame *f;
	int err;

	for (uint64_t i = 0; i < total; i++) {
		uint64_t t0 = bench_ts(), t1;

		if (pp_reserve(0, out, idle, PINGPONG_BYTES, &f))
			return BENCH_EXIT_FAIL;
		f->kind = SHMRUN_FRAME_DATA;
		f->src_task = 0;
		f->dst_task = 1;
		fill_payload((uint64_t *)f->payload, PINGPONG_WORDS, i);
		err = shmrun_ring_commit(out, f);
		if (err)
			return pp_fail(0, "shmrun_ring_commit", err);
		shmrun_ring_flush(out);

		if (pp_peek(0, in, idle, &g))
			return BENCH_EXIT_FAIL;
		const uint64_t *w = (const uint64_t *)g->payload;

		if (g->kind != SHMRUN_FRAME_DATA || g->len != PINGPONG_BYTES || w[0] != i) {
			fprintf(stderr,
				"shmrun-bench: pingpong A: echo %" PRIu64
				" is wrong (kind %u, len %u, first word %" PRIu64 ")\n",
				i, g->kind, g->len, w[0]);
			return BENCH_EXIT_FAIL;
		}
		echo_sum += sum_words(w, PINGPONG_WORDS);
		shmrun_ring_release(in, g);
		t1 = bench_ts();
		sent_sum += payload_sum(PINGPONG_WORDS, i);
		if (i >= p->warm)
			rtt[i - p->warm] = t1 - t0;
	}
	if (pp_reserve(0, out, idle, 0, &f))
		return BENCH_EXIT_FAIL;
	f->kind = SHMRUN_FRAME_END;
	f->src_task = 0;
	f->dst_task = 1;
	err = shmrun_ring_commit(out, f);
	if (err)
		return pp_fail(0, "shmrun_ring_commit", err);
	shmrun_ring_flush(out);
	p->ctl->sent = total;
	p->ctl->sent_sum = sent_sum;
	/* A's echo must match what it sent; B's count and sum are checked
	 * against these by the parent. */
	if (echo_sum != sent_sum) {
		fprintf(stderr, "shmrun-bench: pingpong A: echoed payload sum differs\n");
		return BENCH_EXIT_FAIL;
	}
	return 0;
}

static int pp_ring_pong(struct pp_run *p, struct shmrun_ring *in, struct shmrun_ring *out)
{
	const enum shmrun_idle idle = p->opts->idle;
	const struct shmrun_frame *g;
	struct shmrun_frame *f;
	uint64_t n = 0, sum = 0;
	int err;

	for (;;) {
		if (pp_peek(1, in, idle, &g))
			return BENCH_EXIT_FAIL;
		if (g->kind == SHMRUN_FRAME_END)
			break;
		if (pp_reserve(1, out, idle, g->len, &f))
			return BENCH_EXIT_FAIL;
		f->kind = g->kind;
		f->src_task = 1;
		f->dst_task = 0;
		memcpy(f->payload, g->payload, g->len);
		err = shmrun_ring_commit(out, f);
		if (err)
			return pp_fail(1, "shmrun_ring_commit", err);
		shmrun_ring_flush(out);
		sum += sum_words((const uint64_t *)g->payload, g->len / 8);
		shmrun_ring_release(in, g);
		n++;
	}
	shmrun_ring_release(in, g);
	p->ctl->recv = n;
	p->ctl->recv_sum = sum;
	return 0;
}

/* A's round-trip array, allocated and faulted in before the start barrier. */
static uint64_t *pp_alloc_rtt(uint64_t n)
{
	uint64_t *rtt = malloc(n * sizeof(*rtt));

	if (!rtt)
		fprintf(stderr, "shmrun-bench: pingpong A: no memory for %" PRIu64 " samples\n", n);
	else
		memset(rtt, 0, n * sizeof(*rtt));
	return rtt;
}

static int pp_ring_child(int side, void *arg)
{
	struct pp_run *p = arg;
	struct shmrun_segment seg;
	struct shmrun_ring out, in;
	uint64_t *rtt = NULL;
	size_t len;
	void *mem;
	int err, rc = BENCH_EXIT_FAIL;

	/* A produces on ring 0 and consumes ring 1; B the other way round. */
	err = shmrun_segment_attach(&seg, p->seg->base, p->seg->len);
	if (err)
		return pp_fail(side, "shmrun_segment_attach", err);
	mem = shmrun_segment_ring(&seg, side ? 1 : 0, &len);
	err = shmrun_ring_attach(&out, mem, len, SHMRUN_RING_PRODUCER);
	if (err) {
		pp_fail(side, "shmrun_ring_attach (producer)", err);
		goto out_seg;
	}
	mem = shmrun_segment_ring(&seg, side ? 0 : 1, &len);
	err = shmrun_ring_attach(&in, mem, len, SHMRUN_RING_CONSUMER);
	if (err) {
		pp_fail(side, "shmrun_ring_attach (consumer)", err);
		goto out_out;
	}
	if (!side && !(rtt = pp_alloc_rtt(p->iters)))
		goto out_in;
	if (bench_barrier(p->ctl))
		goto out_in;
	rc = side ? pp_ring_pong(p, &in, &out) : pp_ring_ping(p, &out, &in, rtt);
	if (!rc && !side)
		pp_percentiles(p->ctl, rtt, p->iters);
out_in:
	free(rtt);
	shmrun_ring_detach(&in);
out_out:
	shmrun_ring_detach(&out);
out_seg:
	shmrun_segment_close(&seg);
	return rc;
}

static int pp_ideal_ping(struct pp_run *p, struct pp_line *l, uint64_t *rtt)
{
	struct pp_line *back = p->two_lines ? l + 1 : l; /* where B answers */
	const uint64_t total = p->warm + p->iters;
	uint64_t sent_sum = 0, echo_sum = 0;
	struct bench_spin s;

	for (uint64_t i = 0; i < total; i++) {
		uint64_t t0 = bench_ts(), t1;

		fill_payload(l->payload, PINGPONG_WORDS, i);
		/* release: pairs with B's acquire load of seq; publishes payload. */
		atomic_store_explicit(&l->seq, 2 * i + 1, memory_order_release);
		bench_spin_start(&s, WAIT_NS);
		/* acquire: pairs with B's release store of 2i+2; its payload is
		 * visible. */
		while (atomic_load_explicit(&back->seq, memory_order_acquire) != 2 * i + 2)
			if (bench_spin(&s)) {
				fprintf(stderr, "shmrun-bench: ideal pingpong A: B stopped\n");
				return BENCH_EXIT_FAIL;
			}
		echo_sum += sum_words(back->payload, PINGPONG_WORDS);
		t1 = bench_ts();
		sent_sum += payload_sum(PINGPONG_WORDS, i);
		if (i >= p->warm)
			rtt[i - p->warm] = t1 - t0;
	}
	p->ctl->sent = total;
	p->ctl->sent_sum = sent_sum;
	if (echo_sum != sent_sum) {
		fprintf(stderr, "shmrun-bench: ideal pingpong A: echoed payload sum differs\n");
		return BENCH_EXIT_FAIL;
	}
	return 0;
}

static int pp_ideal_pong(struct pp_run *p, struct pp_line *l)
{
	struct pp_line *back = p->two_lines ? l + 1 : l; /* where B answers */
	const uint64_t total = p->warm + p->iters;
	uint64_t sum = 0, w[PINGPONG_WORDS];
	struct bench_spin s;

	for (uint64_t i = 0; i < total; i++) {
		bench_spin_start(&s, WAIT_NS);
		/* acquire: pairs with A's release store of 2i+1. */
		while (atomic_load_explicit(&l->seq, memory_order_acquire) != 2 * i + 1)
			if (bench_spin(&s)) {
				fprintf(stderr, "shmrun-bench: ideal pingpong B: A stopped\n");
				return BENCH_EXIT_FAIL;
			}
		/* Read the payload and write it back, as the ring's B copies it
		 * into its reply. */
		memcpy(w, l->payload, sizeof(w));
		sum += sum_words(w, PINGPONG_WORDS);
		memcpy(back->payload, w, sizeof(w));
		/* release: pairs with A's acquire load of seq. */
		atomic_store_explicit(&back->seq, 2 * i + 2, memory_order_release);
	}
	p->ctl->recv = total;
	p->ctl->recv_sum = sum;
	return 0;
}

static int pp_ideal_child(int side, void *arg)
{
	struct pp_run *p = arg;
	uint64_t *rtt = NULL;
	int rc = BENCH_EXIT_FAIL;

	if (!side && !(rtt = pp_alloc_rtt(p->iters)))
		return BENCH_EXIT_FAIL;
	if (bench_barrier(p->ctl))
		goto out_free;
	rc = side ? pp_ideal_pong(p, p->line) : pp_ideal_ping(p, p->line, rtt);
	if (!rc && !side)
		pp_percentiles(p->ctl, rtt, p->iters);
out_free:
	free(rtt);
	return rc;
}

static int pp_result(const char *what, const struct bench_ctl *c)
{
	if (c->sent != c->recv || c->sent_sum != c->recv_sum) {
		fprintf(stderr,
			"shmrun-bench: %s: checksum mismatch: A sent %" PRIu64
			" frames (sum %#" PRIx64 "), B received %" PRIu64 " (sum %#" PRIx64 ")\n",
			what, c->sent, c->sent_sum, c->recv, c->recv_sum);
		return -1;
	}
	return 0;
}

static double pp_timeout(const struct pp_run *p)
{
	/* 100 us per round trip is far beyond any sane run, spin or hybrid. */
	return 60.0 + (double)(p->warm + p->iters) * 100e-6;
}

static int measure_pp_ring(struct pp_run *p)
{
	struct shmrun_segment_ring_spec spec[2] = {
	    {.capacity = p->opts->ring_bytes, .producer = 0, .consumer = 1},
	    {.capacity = p->opts->ring_bytes, .producer = 1, .consumer = 0},
	};
	struct shmrun_segment seg;
	int err, rc = -1;

	memset(p->ctl, 0, sizeof(*p->ctl));
	err = shmrun_segment_create(&seg, spec, 2, 0x70696e67ull /* "ping" */);
	if (err) {
		fprintf(stderr,
			"shmrun-bench: shmrun_segment_create (2 rings of %" PRIu64 " bytes): %s\n",
			spec[0].capacity, strerror(-err));
		return -1;
	}
	p->seg = &seg;
	if (!bench_run_pair(p->opts, p->ctl, pp_ring_child, p, pp_timeout(p)))
		rc = pp_result("pingpong", p->ctl);
	p->seg = NULL;
	shmrun_segment_close(&seg);
	return rc;
}

static int measure_pp_ideal(struct pp_run *p)
{
	struct pp_line *l;
	int rc = -1;

	memset(p->ctl, 0, sizeof(*p->ctl));
	l = bench_map_shared(2 * sizeof(*l));
	if (!l)
		return -1;
	atomic_store_explicit(&l[0].seq, 0, memory_order_relaxed);
	atomic_store_explicit(&l[1].seq, 0, memory_order_relaxed);
	p->line = l;
	if (!bench_run_pair(p->opts, p->ctl, pp_ideal_child, p, pp_timeout(p)))
		rc = pp_result(p->two_lines ? "ideal pingpong (two lines)" : "ideal pingpong",
			       p->ctl);
	p->line = NULL;
	bench_unmap_shared(l, 2 * sizeof(*l));
	return rc;
}

static void keep_best(uint64_t best[3], const struct bench_ctl *c)
{
	if (!best[0] || c->p50_ns < best[0])
		best[0] = c->p50_ns;
	if (!best[1] || c->p99_ns < best[1])
		best[1] = c->p99_ns;
	if (!best[2] || c->p999_ns < best[2])
		best[2] = c->p999_ns;
}

int bench_pingpong_main(const struct bench_opts *opts)
{
	struct bench_ctl *ctl = bench_map_shared(sizeof(*ctl));
	struct pp_run p = {
	    .opts = opts,
	    .ctl = ctl,
	    .iters = opts->iters,
	};
	uint64_t ring[3] = {0}, ideal[3] = {0}, ideal2[3] = {0};
	int rc = 0;

	if (!ctl)
		return BENCH_EXIT_FAIL;
	/* Warm up with one pass over each ring (every page faulted in), or a
	 * tenth of the run for quick ones. */
	p.warm =
	    opts->ring_bytes / (SHMRUN_FRAME_COMMIT + SHMRUN_FRAME_HEADER + PINGPONG_BYTES) + 1;
	if (opts->quick || p.warm > opts->iters)
		p.warm = opts->iters / 10 + 1;
	printf("# pingpong: two processes ");
	print_cpus(opts);
	printf(", %u-byte frames, ring_bytes=%" PRIu64 " idle=%s, %" PRIu64
	       " round trips (+%" PRIu64 " warm-up), each percentile best of %u\n",
	       PINGPONG_BYTES, opts->ring_bytes, idle_name(opts->idle), p.iters, p.warm,
	       opts->reps);
	for (unsigned rep = 0; rep < opts->reps; rep++) {
		if (measure_pp_ring(&p))
			goto err_fail;
		if (opts->verbose)
			printf("# pingpong rep=%u rtt_ns_p50=%" PRIu64 " rtt_ns_p99=%" PRIu64
			       " rtt_ns_p999=%" PRIu64 "\n",
			       rep + 1, ctl->p50_ns, ctl->p99_ns, ctl->p999_ns);
		keep_best(ring, ctl);
		if (measure_pp_ideal(&p))
			goto err_fail;
		if (opts->verbose)
			printf("# ideal rep=%u rtt_ns_p50=%" PRIu64 " rtt_ns_p99=%" PRIu64
			       " rtt_ns_p999=%" PRIu64 "\n",
			       rep + 1, ctl->p50_ns, ctl->p99_ns, ctl->p999_ns);
		keep_best(ideal, ctl);
		p.two_lines = true;
		if (measure_pp_ideal(&p))
			goto err_fail;
		p.two_lines = false;
		if (opts->verbose)
			printf("# ideal2 rep=%u rtt_ns_p50=%" PRIu64 " rtt_ns_p99=%" PRIu64
			       " rtt_ns_p999=%" PRIu64 "\n",
			       rep + 1, ctl->p50_ns, ctl->p99_ns, ctl->p999_ns);
		keep_best(ideal2, ctl);
	}
	printf("pingpong bytes=%u rtt_ns_p50=%" PRIu64 " rtt_ns_p99=%" PRIu64
	       " rtt_ns_p999=%" PRIu64 "\n",
	       PINGPONG_BYTES, ring[0], ring[1], ring[2]);
	printf("ideal bytes=%u rtt_ns_p50=%" PRIu64 " rtt_ns_p99=%" PRIu64 " rtt_ns_p999=%" PRIu64
	       "\n",
	       PINGPONG_BYTES, ideal[0], ideal[1], ideal[2]);
	printf("ideal2 bytes=%u rtt_ns_p50=%" PRIu64 " rtt_ns_p99=%" PRIu64 " rtt_ns_p999=%" PRIu64
	       "\n",
	       PINGPONG_BYTES, ideal2[0], ideal2[1], ideal2[2]);
	printf("ratio bytes=%u p50_vs_ideal=%.2f\n", PINGPONG_BYTES,
	       ideal[0] ? (double)ring[0] / (double)ideal[0] : 0.0);
	printf("ratio2 bytes=%u p50_vs_ideal2=%.2f ideal2_vs_ideal=%.2f\n", PINGPONG_BYTES,
	       ideal2[0] ? (double)ring[0] / (double)ideal2[0] : 0.0,
	       ideal[0] ? (double)ideal2[0] / (double)ideal[0] : 0.0);
	printf("# checksums: %u measurements, every echo matched what was sent\n", 3 * opts->reps);
	goto out_unmap;

err_fail:
	rc = BENCH_EXIT_FAIL;
out_unmap:
	bench_unmap_shared(ctl, sizeof(*ctl));
	return rc;
}

/* ---- for the job benchmarks (shuffle, latency) ------------------------------ */

double bench_ideal_rate(const struct bench_opts *opts, uint32_t len)
{
	struct bench_ctl *ctl = bench_map_shared(sizeof(*ctl));
	struct tput_run t = {
	    .opts = opts,
	    .ctl = ctl,
	    .len = len,
	    .records = opts->records,
	};
	double rate;

	if (!ctl)
		return -1;
	t.warm = opts->quick ? 1000 : 2 * opts->ring_bytes / len;
	rate = measure_ideal(&t);
	bench_unmap_shared(ctl, sizeof(*ctl));
	return rate;
}

int bench_pingpong_rtt(const struct bench_opts *opts, bool ideal, uint64_t pct[3])
{
	struct bench_ctl *ctl = bench_map_shared(sizeof(*ctl));
	struct pp_run p = {
	    .opts = opts,
	    .ctl = ctl,
	    .iters = opts->iters,
	};
	int rc;

	if (!ctl)
		return -1;
	p.warm = opts->ring_bytes / (SHMRUN_FRAME_HEADER + PINGPONG_BYTES) + 1;
	if (opts->quick || p.warm > opts->iters)
		p.warm = opts->iters / 10 + 1;
	rc = ideal ? measure_pp_ideal(&p) : measure_pp_ring(&p);
	if (!rc) {
		pct[0] = ctl->p50_ns;
		pct[1] = ctl->p99_ns;
		pct[2] = ctl->p999_ns;
	}
	bench_unmap_shared(ctl, sizeof(*ctl));
	return rc;
}
