/*
 * shmrun/ring.h: single-producer single-consumer byte ring of framed records.
 *
 * One ring carries one channel (docs/design.md §4): exactly one producer process (or
 * thread) and exactly one consumer. The ring lives in memory the caller provides
 * (two-step init, after DPDK's rte_ring_get_memsize()/rte_ring_init()):
 *
 *     size_t n = shmrun_ring_memsize(64 * 1024);      // bytes the ring needs
 *     shmrun_ring_init(mem, n, 64 * 1024);              // lay it out (creator)
 *     shmrun_ring_attach(&r, mem, n, SHMRUN_RING_PRODUCER);  // each side, own handle
 *
 * Producer:  shmrun_ring_reserve() -> write the payload in place ->
 *            shmrun_ring_commit(); commits become visible to the consumer in
 *            batches (shmrun_ring_flush(), or automatically when a batch fills).
 * Consumer:  shmrun_ring_peek() -> use the frame in place -> shmrun_ring_release().
 *
 * Frames are 8-byte aligned, never split across the wrap (a skip marker fills the
 * end of the ring instead), and carry a commit word, length, kind, source task
 * and destination task. The consumer learns that a frame is ready from the
 * frame's own commit word (as Aeron's log buffers and the LMAX Disruptor do), not
 * from a shared tail index, so one message moves one frame's cache line(s) from
 * producer to consumer. Indices are free-running 64-bit byte counters; the
 * producer caches the consumer's head and re-reads it only when the cached value
 * says the ring is full (Aeron's aeron_rb, Vyukov's cached SPSC queue). The byte
 * layout and every memory-ordering pair are in docs/shm-layout.md.
 *
 * Thread/process safety: one producer handle and one consumer handle per ring, each
 * used by a single thread; the two may live in different processes. The handles
 * are private memory; only struct shmrun_ring_shared lives in shared memory.
 *
 * Functions that act return 0 (or a count) on success and a negative errno on
 * failure; they never set errno.
 */
#ifndef SHMRUN_RING_H
#define SHMRUN_RING_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shmrun/idle.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Cache line size the shared layouts are aligned to, bytes. */
#define SHMRUN_CACHELINE 64

/** Smallest ring capacity, bytes. Capacities are powers of two. */
#define SHMRUN_RING_MIN_CAPACITY 4096u
/** Largest ring capacity, bytes (1 GiB). */
#define SHMRUN_RING_MAX_CAPACITY (1ull << 30)
/** Every frame starts and ends on this boundary, bytes. */
#define SHMRUN_FRAME_ALIGN 8u

/** Kind of a frame. Values are part of the shared layout (docs/shm-layout.md). */
enum shmrun_frame_kind {
	SHMRUN_FRAME_DATA = 1,      /**< a record */
	SHMRUN_FRAME_BARRIER = 2,   /**< checkpoint barrier; payload = epoch */
	SHMRUN_FRAME_WATERMARK = 3, /**< event-time progress marker */
	SHMRUN_FRAME_END = 4,       /**< end of input on this channel */
	/* 0x7fff is the ring's internal skip marker; never seen by callers. */
};

/**
 * Frame header, 16 bytes, followed by @len payload bytes, then padding up to the
 * next SHMRUN_FRAME_ALIGN boundary. The fields belong to the caller between
 * shmrun_ring_reserve() and shmrun_ring_commit() on the producer side and are
 * read-only on the consumer side.
 *
 * In the ring every frame is preceded by an 8-byte commit word owned by the ring
 * (SHMRUN_FRAME_COMMIT; callers never see it). The producer stores it last
 * (release) when the frame is published, and the consumer learns that a frame
 * is ready by loading it (acquire) at its own head, so one message costs the
 * transfer of the cache line(s) holding the frame and nothing else
 * (docs/shm-layout.md, "Frames and commit words"). The commit word alone is
 * enough to step over a frame, which is what lets a skip marker fit in the last
 * 8 bytes before the wrap.
 */
struct shmrun_frame {
	uint32_t len;      /**< payload bytes (header and padding excluded) */
	uint16_t kind;     /**< enum shmrun_frame_kind */
	uint16_t flags;    /**< free for the runtime (e.g. fragment bits); ring ignores it */
	uint32_t src_task; /**< task id of the sender */
	uint32_t dst_task; /**< task id of the receiver */
	unsigned char payload[];
};

/** Bytes of struct shmrun_frame before the payload. */
#define SHMRUN_FRAME_HEADER 16u
/** Ring bytes before each struct shmrun_frame: its commit word. A frame takes
 * SHMRUN_FRAME_COMMIT + SHMRUN_FRAME_HEADER + len bytes of ring, rounded up to
 * SHMRUN_FRAME_ALIGN. */
#define SHMRUN_FRAME_COMMIT 8u

/*
 * The commit word (docs/shm-layout.md): bits 0..31 the bytes to step over (the
 * padded frame, or the rest of the ring for a skip marker); bits 32..61 the lap
 * of the frame's position (index >> log2(capacity), low 30 bits); bit 62 set for
 * a frame, bit 63 set for a skip marker. It is never 0, and 0 is what the
 * producer stores at the next frame position before it publishes a frame, so
 * the word at the consumer's head is either this lap's commit word, 0, or (only
 * when the ring was full) the previous lap's commit word of the same position.
 */
#define SHMRUN_RING_COMMIT_FRAME (1u << 30)
#define SHMRUN_RING_COMMIT_SKIP (1u << 31)
#define SHMRUN_RING_COMMIT_LAP_MASK ((1u << 30) - 1)

/** Which side of a ring a handle is. */
enum shmrun_ring_role {
	SHMRUN_RING_PRODUCER = 1,
	SHMRUN_RING_CONSUMER = 2,
};

/** How long the hybrid idle strategy spins before it sleeps, nanoseconds. */
#define SHMRUN_RING_SPIN_NS 50000

/** A waiting side checks its peer is alive at least this often, nanoseconds. */
#define SHMRUN_RING_LIVENESS_NS 20000000

struct shmrun_ring_shared; /* the shared-memory layout; see ring.c */

/**
 * A futex doorbell in shared memory (8 bytes, two words). A side with nothing to
 * do announces itself in @waiting and sleeps on @seq (shmrun_bell_sleep()); a
 * side that made progress for it bumps @seq and wakes it (shmrun_bell_ring()).
 * Every ring has two (data: the consumer sleeps; room: the producer sleeps);
 * a runtime whose thread serves many rings gives each thread one bell and
 * points the rings' wake-ups at it (shmrun_ring_set_wake_bell()).
 * Zero-initialised memory is a valid idle bell.
 */
struct shmrun_bell {
	_Atomic uint32_t waiting; /**< 1 while a sleeper is (about to be) asleep */
	_Atomic uint32_t seq;     /**< futex word: bumped by every wake-up */
};

/**
 * A process-private handle on one side of a ring. Fill it with
 * shmrun_ring_attach(); fields are private to ring.c (they are here only so the
 * handle can live on the stack or inside another struct without allocation).
 */
struct shmrun_ring {
	struct shmrun_ring_shared *sh; /* the shared header */
	unsigned char *data;           /* first byte of the data area */
	uint64_t capacity;             /* data bytes, power of two */
	uint64_t mask;                 /* capacity - 1 */
	unsigned lap_shift;            /* log2(capacity): index >> lap_shift is the lap */
	int role;                      /* enum shmrun_ring_role */
	struct shmrun_bell *wake;      /* rung after publishing: the peer's bell, or NULL */
	_Atomic uint64_t *head_p;      /* &shared head */
	uint32_t max_payload;          /* capacity / 2 - SHMRUN_FRAME_HEADER */
	int peer_pidfd;                /* pidfd of the peer, -1 until opened */
	int32_t peer_pid;              /* pid that peer_pidfd refers to */
	/* producer side */
	uint64_t tail;          /* end of committed frames (maybe unpublished) */
	uint64_t tail_pub;      /* end of published frames: where the batch starts */
	uint64_t pend_word;     /* commit word held back for the frame at tail_pub */
	uint64_t head_cache;    /* last head read from shared memory */
	uint32_t reserved_len;  /* payload bytes of the open reservation */
	bool reserving;         /* a reservation is open */
	uint64_t batch_bytes;   /* publish once this many committed bytes are pending */
	/* consumer side */
	uint64_t head;          /* start of the next unreleased frame */
	uint64_t head_pub;      /* last head announced with the producer's bell */
	uint64_t release_batch; /* ring the producer's bell once this many bytes are released */
};

/**
 * shmrun_ring_memsize() - bytes of memory a ring of @capacity data bytes needs.
 * @capacity: data area, bytes; a power of two in
 *            [SHMRUN_RING_MIN_CAPACITY, SHMRUN_RING_MAX_CAPACITY].
 *
 * Return: header plus data bytes (a multiple of SHMRUN_CACHELINE), or 0 if
 * @capacity is not a valid capacity.
 */
size_t shmrun_ring_memsize(uint64_t capacity);

/**
 * shmrun_ring_init() - lay out an empty ring in caller-provided memory.
 * @mem:      at least shmrun_ring_memsize(@capacity) bytes, SHMRUN_CACHELINE
 *            aligned, writable; typically inside a shared segment. The caller
 *            keeps ownership.
 * @len:      bytes available at @mem.
 * @capacity: data bytes, as for shmrun_ring_memsize().
 *
 * Must complete before any side attaches; publication to other processes is the
 * segment's business (its ready word), not the ring's.
 *
 * Return: 0; -EINVAL for a bad capacity or misaligned @mem; -ENOSPC if @len is
 * smaller than shmrun_ring_memsize(@capacity).
 */
int shmrun_ring_init(void *mem, size_t len, uint64_t capacity);

/**
 * shmrun_ring_attach() - validate a ring laid out by shmrun_ring_init() and
 * open one side of it.
 * @r:    handle to fill (private memory, owned by the caller).
 * @mem:  the ring's memory as mapped in this process.
 * @len:  bytes mapped at @mem.
 * @role: SHMRUN_RING_PRODUCER or SHMRUN_RING_CONSUMER.
 *
 * Records the calling process's pid as that side's owner, which is what the
 * peer's liveness check watches: attach in the process that will use the side.
 * The indices may start anywhere (free-running), so a handle resumes wherever
 * the shared indices stand.
 *
 * Return: 0; -EPROTO if the magic, layout version or header size is not this
 * build's; -EINVAL if @mem is misaligned, the capacity is not a power of two in
 * range, the ring does not fit in @len, the indices are inconsistent
 * (head > tail or tail - head > capacity), or @role is not a role.
 */
int shmrun_ring_attach(struct shmrun_ring *r, void *mem, size_t len, enum shmrun_ring_role role);

/**
 * shmrun_ring_detach() - release the handle's private resources (the peer pidfd).
 * The producer's pending commits are flushed first. Does not touch the memory's
 * ownership. Safe to call twice.
 */
void shmrun_ring_detach(struct shmrun_ring *r);

/**
 * shmrun_ring_max_payload() - largest payload a single frame may carry, bytes.
 *
 * Equal to capacity / 2 - SHMRUN_FRAME_HEADER, so the largest frame takes
 * capacity / 2 + SHMRUN_FRAME_COMMIT bytes of ring. It fits in an empty ring
 * whatever the wrap position (the skip before it is smaller than capacity / 2),
 * except at offset capacity / 2, where the skip marker is published alone first
 * and the frame goes at offset 0 once the consumer has stepped over it. So a
 * producer that waits long enough always makes progress.
 */
uint32_t shmrun_ring_max_payload(const struct shmrun_ring *r);

/* ---- producer ---------------------------------------------------------- */

/**
 * shmrun_ring_reserve() - reserve room for a frame of up to @len payload bytes.
 * @r:     producer handle.
 * @len:   payload bytes, at most shmrun_ring_max_payload().
 * @frame: on success, the frame to fill in place (8-byte aligned, inside the
 *         ring). Its len is set to @len; the caller sets kind, flags, src_task,
 *         dst_task and the payload, and may lower len before committing.
 *
 * At most one reservation is open at a time. If the ring is full the pending
 * commits are flushed first (so a waiting consumer sees them) before giving up.
 *
 * Return: 0; -EAGAIN if there is no room now (wait with
 * shmrun_ring_wait_writable()); -EMSGSIZE if @len exceeds the largest frame;
 * -EBUSY if a reservation is already open.
 */
static inline int shmrun_ring_reserve(struct shmrun_ring *r, uint32_t len,
				      struct shmrun_frame **frame);
/* The out-of-line part of shmrun_ring_reserve(); call shmrun_ring_reserve(). */
int shmrun_ring_reserve_slow(struct shmrun_ring *r, uint32_t len, struct shmrun_frame **frame);

/**
 * shmrun_ring_commit() - make the reserved frame part of the stream.
 * @r:     producer handle with an open reservation.
 * @frame: the frame shmrun_ring_reserve() returned; its len must not exceed the
 *         reserved length (a smaller len gives the unused room back).
 *
 * The frame becomes visible to the consumer at the next publication: when the
 * pending bytes reach the batch size (shmrun_ring_set_batch()) or at
 * shmrun_ring_flush(). Commit itself stores at most one word (this frame's
 * commit word, unless it opens the batch), with no fence and no doorbell.
 *
 * Return: 0; -EINVAL if no reservation is open, @frame is not it, or len grew.
 */
static inline int shmrun_ring_commit(struct shmrun_ring *r, struct shmrun_frame *frame);

/**
 * shmrun_ring_write() - reserve, copy @len bytes from @payload, commit.
 * Return: as shmrun_ring_reserve().
 */
int shmrun_ring_write(struct shmrun_ring *r, uint16_t kind, uint32_t src_task, uint32_t dst_task,
		      const void *payload, uint32_t len);

/**
 * shmrun_ring_skip() - publish a skip marker over the bytes from the tail to
 * the end of the data area, so that the next frame starts at offset 0. For a
 * relay that copies another ring frame by frame and must reproduce its skip
 * markers (runtime/gateway.c: the other ring placed a frame behind a skip
 * that this ring's reserve would not have put there, e.g. one published
 * alone, see shmrun_ring_max_payload()). Publishes at once (with the pending
 * commits) and rings the consumer's bell.
 *
 * Return: 0 (also when the tail is at offset 0: nothing to do); -EAGAIN if the
 * skip does not fit yet; -EBUSY if a reservation is open.
 */
int shmrun_ring_skip(struct shmrun_ring *r);

/**
 * shmrun_ring_flush() - publish every committed frame now (one release store:
 * the commit word of the batch's first frame) and ring the consumer's doorbell
 * if it sleeps (one seq_cst fence; none with a NULL wake bell). Also stores the
 * shared tail, which only diagnostics and shmrun_ring_attach() read. Cheap when
 * nothing is pending.
 */
void shmrun_ring_flush(struct shmrun_ring *r);

/**
 * shmrun_ring_set_batch() - publish automatically once @bytes committed bytes
 * are pending. @bytes is clamped to [1, capacity / 2]; 1 publishes every commit.
 * The default is capacity / 16, at most 64 KiB.
 */
void shmrun_ring_set_batch(struct shmrun_ring *r, uint64_t bytes);

/** shmrun_ring_pending() - committed bytes not yet published. */
uint64_t shmrun_ring_pending(const struct shmrun_ring *r);

/**
 * shmrun_ring_writable() - whether a frame of @len payload bytes fits now.
 * Re-reads the consumer's index only if the cached one says no.
 */
bool shmrun_ring_writable(struct shmrun_ring *r, uint32_t len);

/* ---- consumer ---------------------------------------------------------- */

/**
 * shmrun_ring_peek() - the oldest published frame, in place.
 * @r:     consumer handle.
 * @frame: on success, the frame; valid until shmrun_ring_release().
 *
 * Skip markers are stepped over. Peeking twice without releasing returns the
 * same frame. When the ring is empty the consumer's released bytes are
 * published first, so a waiting producer sees the room.
 *
 * Return: 0; -EAGAIN if the ring is empty (wait with
 * shmrun_ring_wait_readable()); -EPROTO if the next frame is corrupt (a commit
 * word of a foreign lap or running past the wrap, a kind out of range, or a len
 * that disagrees with the commit word).
 */
static inline int shmrun_ring_peek(struct shmrun_ring *r, const struct shmrun_frame **frame);
/* The out-of-line part of shmrun_ring_peek(); call shmrun_ring_peek(). */
int shmrun_ring_peek_slow(struct shmrun_ring *r, const struct shmrun_frame **frame);

/**
 * shmrun_ring_release() - hand the peeked frame's bytes back to the producer.
 * The room is visible to the producer at once (head is stored with release at
 * every release; the producer reads it only when it finds the ring full); the
 * producer's doorbell is checked once per release batch and whenever
 * shmrun_ring_peek() finds the ring empty.
 */
static inline void shmrun_ring_release(struct shmrun_ring *r, const struct shmrun_frame *frame);
/* The out-of-line part of shmrun_ring_release(): the doorbell check once per
 * release batch. Call shmrun_ring_release(). */
void shmrun_ring_release_slow(struct shmrun_ring *r);

/**
 * shmrun_ring_consumer_flush() - publish the released room now and ring the
 * producer's doorbell if it sleeps waiting for room.
 */
void shmrun_ring_consumer_flush(struct shmrun_ring *r);

/** shmrun_ring_readable() - whether a published frame is waiting. */
bool shmrun_ring_readable(struct shmrun_ring *r);

/* ---- positions ---------------------------------------------------------- */

/*
 * Two rings of the same capacity that carry the same frames in the same order
 * from the same starting index hold every frame at the same index (skip
 * markers included: where a frame goes depends only on the index and the
 * frame's size). The multi-host gateway (runtime/gateway.c) relies on that to
 * turn a remote ring's consumer position into credits for a local ring.
 */

/**
 * shmrun_ring_capacity() - data bytes of the ring (a power of two).
 */
static inline uint64_t shmrun_ring_capacity(const struct shmrun_ring *r)
{
	return r->capacity;
}

/**
 * shmrun_ring_position() - this handle's free-running byte index: for a
 * producer the end of its committed frames (published or not), for a consumer
 * the start of the frame shmrun_ring_peek() returned or returns next (after any
 * skip marker it stepped over). Private memory only; no atomics.
 */
static inline uint64_t shmrun_ring_position(const struct shmrun_ring *r)
{
	return r->role == SHMRUN_RING_PRODUCER ? r->tail : r->head;
}

/**
 * shmrun_ring_consumed() - the consumer's released bytes as it stored them in
 * shared memory (its head, a free-running index), read from either side.
 */
static inline uint64_t shmrun_ring_consumed(const struct shmrun_ring *r)
{
	/* acquire: pairs with the consumer's release store of head in
	 * shmrun_ring_release(); the bytes below it are no longer read. */
	return atomic_load_explicit(r->head_p, memory_order_acquire);
}

/* ---- waiting ------------------------------------------------------------ */

/**
 * shmrun_ring_wait_readable() - wait until a frame can be peeked.
 * @r:          consumer handle.
 * @idle:       enum shmrun_idle.
 * @timeout_ns: give up after this many nanoseconds; negative waits forever.
 *
 * While waiting, checks at least every SHMRUN_RING_LIVENESS_NS that the producer
 * process is alive; frames it published before dying are still delivered first.
 *
 * Return: 0 when readable; -ETIMEDOUT; -EOWNERDEAD if the ring is empty and the
 * producer has died (reported within 100 ms of its death).
 */
int shmrun_ring_wait_readable(struct shmrun_ring *r, enum shmrun_idle idle, int64_t timeout_ns);

/**
 * shmrun_ring_wait_writable() - wait until a frame of @len payload bytes fits.
 * @r:          producer handle; pending commits are flushed first.
 * @len:        payload bytes.
 * @idle:       enum shmrun_idle.
 * @timeout_ns: as for shmrun_ring_wait_readable().
 *
 * Return: 0 when writable; -ETIMEDOUT; -EMSGSIZE if @len exceeds the largest
 * frame; -EOWNERDEAD if there is no room and the consumer has died.
 */
int shmrun_ring_wait_writable(struct shmrun_ring *r, uint32_t len, enum shmrun_idle idle,
			      int64_t timeout_ns);

/**
 * shmrun_ring_set_wake_bell() - the bell this side rings after it publishes
 * (producer: new frames; consumer: new room).
 * @r:    either handle.
 * @bell: the bell to ring, or NULL.
 *
 * Default: the ring's own data bell for a producer and room bell for a
 * consumer, which shmrun_ring_wait_*() sleep on. A runtime whose peer thread
 * sleeps on a bell of its own (one per thread, serving many rings) points this
 * at that bell; the peer's shmrun_ring_wait_*() then wake only by their
 * liveness period.
 *
 * NULL means that nobody sleeps on the other side separately: both ends of the
 * ring are served by one thread of one process (a channel between two tasks of
 * the same worker), which never waits on this ring while it could make the
 * progress itself. Publishing then costs neither the seq_cst fence nor the
 * bell's load (shmrun_bell_ring()); a shmrun_ring_wait_*() on the other side
 * would wake only by its liveness period or timeout, so do not call it there.
 */
void shmrun_ring_set_wake_bell(struct shmrun_ring *r, struct shmrun_bell *bell);

/**
 * shmrun_bell_ring() - the waker's half: call right after the release store
 * that made progress for the sleeper. Costs one seq_cst fence and one load
 * when nobody sleeps; a FUTEX_WAKE otherwise.
 */
void shmrun_bell_ring(struct shmrun_bell *bell);

/**
 * shmrun_bell_sleep() - the sleeper's half: announce, re-check @ready(@arg),
 * and sleep on @bell for at most @max_ns unless it turned true or the bell
 * rang. Returns when woken, on timeout or at once if ready; the caller checks
 * again. Never loses a wake-up rung after @ready saw nothing (Dekker: see
 * docs/shm-layout.md). One sleeper per bell.
 */
void shmrun_bell_sleep(struct shmrun_bell *bell, bool (*ready)(void *arg), void *arg,
		       int64_t max_ns);

/**
 * shmrun_ring_peer_alive() - whether the other side's process is alive.
 *
 * True while the peer has not attached yet (there is nothing to watch) and
 * while its process exists and has not exited. Uses a pidfd, so a recycled pid
 * is not mistaken for the peer once the pidfd is open.
 */
bool shmrun_ring_peer_alive(struct shmrun_ring *r);


/* ---- inline fast paths ------------------------------------------------------ */

/*
 * The four per-record calls are inline (as DPDK's rte_ring): the common case —
 * room before the wrap, a valid frame already published — touches only the
 * private handle and the frame; everything else (a skip marker, refreshing the
 * peer's index, publishing, errors) is in the *_slow functions of ring.c,
 * which the inline versions call and which callers never call directly.
 */

static inline uint64_t shmrun_ring_frame_bytes_(uint32_t len)
{
	return ((uint64_t)SHMRUN_FRAME_COMMIT + SHMRUN_FRAME_HEADER + len +
		(SHMRUN_FRAME_ALIGN - 1)) &
	       ~(uint64_t)(SHMRUN_FRAME_ALIGN - 1);
}

/* The commit word of the frame position @pos & mask (the first 8 bytes there). */
static inline _Atomic uint64_t *shmrun_ring_word_(const struct shmrun_ring *r, uint64_t pos)
{
	return (_Atomic uint64_t *)(void *)(r->data + (pos & r->mask));
}

/* Bits 32..63 of the commit word of a frame (@bit: SHMRUN_RING_COMMIT_FRAME or
 * _SKIP) at free-running index @pos. */
static inline uint32_t shmrun_ring_tag_(const struct shmrun_ring *r, uint64_t pos, uint32_t bit)
{
	return bit | ((uint32_t)(pos >> r->lap_shift) & SHMRUN_RING_COMMIT_LAP_MASK);
}

/* Open the reservation of a @len-byte frame at the tail (room checked). */
static inline struct shmrun_frame *shmrun_ring_open_frame_(struct shmrun_ring *r, uint32_t len)
{
	struct shmrun_frame *f =
	    (struct shmrun_frame *)(r->data + (r->tail & r->mask) + SHMRUN_FRAME_COMMIT);

	f->len = len;
	f->kind = 0;
	f->flags = 0;
	r->reserved_len = len;
	r->reserving = true;
	return f;
}

/*
 * Store commit word @w for the frame (or skip marker) at the tail. The first
 * frame of a batch (tail == tail_pub) is held back until shmrun_ring_flush():
 * the consumer cannot step past it, so the later frames of the batch, whose
 * words are stored at once, stay invisible until then too.
 */
static inline void shmrun_ring_put_word_(struct shmrun_ring *r, uint64_t w)
{
	if (r->tail == r->tail_pub)
		r->pend_word = w;
	else
		/* release: pairs with the consumer's acquire load of this word in
		 * shmrun_ring_peek(); makes the frame's bytes visible. (The consumer
		 * reaches it only after the batch's first word, published later.) */
		atomic_store_explicit(shmrun_ring_word_(r, r->tail), w, memory_order_release);
}

static inline int shmrun_ring_reserve(struct shmrun_ring *r, uint32_t len,
				      struct shmrun_frame **frame)
{
	uint64_t need = shmrun_ring_frame_bytes_(len), pos = r->tail & r->mask;

	if (__builtin_expect(!r->reserving && len <= r->max_payload && need <= r->capacity - pos &&
				     r->tail + need - r->head_cache <= r->capacity,
			     1)) {
		*frame = shmrun_ring_open_frame_(r, len);
		return 0;
	}
	return shmrun_ring_reserve_slow(r, len, frame);
}

static inline int shmrun_ring_commit(struct shmrun_ring *r, struct shmrun_frame *frame)
{
	uint64_t step, next;

	/* The word where the next frame will start is zeroed at publication
	 * (shmrun_ring_flush()), not here: inside a batch the next commit
	 * overwrites it before anyone may look. */
	if (__builtin_expect(!r->reserving ||
				     (unsigned char *)frame !=
					 r->data + (r->tail & r->mask) + SHMRUN_FRAME_COMMIT ||
				     frame->len > r->reserved_len,
			     0))
		return -EINVAL;
	step = shmrun_ring_frame_bytes_(frame->len);
	next = r->tail + step;
	shmrun_ring_put_word_(
	    r, step | (uint64_t)shmrun_ring_tag_(r, r->tail, SHMRUN_RING_COMMIT_FRAME) << 32);
	r->tail = next;
	r->reserving = false;
	if (r->tail - r->tail_pub >= r->batch_bytes)
		shmrun_ring_flush(r);
	return 0;
}

static inline int shmrun_ring_peek(struct shmrun_ring *r, const struct shmrun_frame **frame)
{
	uint64_t pos = r->head & r->mask;
	/* acquire: pairs with the release store of this commit word in
	 * shmrun_ring_put_word_() or shmrun_ring_flush(); the frame's bytes
	 * are visible. */
	uint64_t w = atomic_load_explicit(shmrun_ring_word_(r, r->head), memory_order_acquire);

	/* The word's step is checked to hold a frame header inside the data
	 * area before the header is read: a word forged (or left) in the last
	 * 8 or 16 bytes of the ring would otherwise have the header read past
	 * the end of the ring's memory (found by fuzzing, tests/fuzz/fuzz_ring.c). */
	if (__builtin_expect(
		    (uint32_t)(w >> 32) == shmrun_ring_tag_(r, r->head, SHMRUN_RING_COMMIT_FRAME) &&
			(uint32_t)w <= r->capacity - pos &&
			(uint32_t)w >= SHMRUN_FRAME_COMMIT + SHMRUN_FRAME_HEADER,
		    1)) {
		const struct shmrun_frame *f =
		    (const struct shmrun_frame *)(r->data + pos + SHMRUN_FRAME_COMMIT);

		if (f->kind >= SHMRUN_FRAME_DATA && f->kind <= SHMRUN_FRAME_END &&
		    shmrun_ring_frame_bytes_(f->len) == (uint32_t)w) {
			*frame = f;
			return 0;
		}
	}
	return shmrun_ring_peek_slow(r, frame);
}

static inline void shmrun_ring_release(struct shmrun_ring *r, const struct shmrun_frame *frame)
{
	r->head += shmrun_ring_frame_bytes_(frame->len);
	/* release: pairs with the acquire load of head in the producer's
	 * has_room() (ring.c); every read of the bytes below head happens
	 * before the producer may reuse them. */
	atomic_store_explicit(r->head_p, r->head, memory_order_release);
	if (r->head - r->head_pub >= r->release_batch)
		shmrun_ring_release_slow(r);
}

#ifdef __cplusplus
}
#endif
#endif /* SHMRUN_RING_H */
