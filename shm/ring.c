/*
 * shm/ring.c: the single-producer single-consumer byte ring.
 *
 * What it is for. Every channel of a job (one sending task, one receiving task)
 * is one of these rings. Worker processes are single-threaded, so each ring has
 * exactly one producer and one consumer, and the ring needs no locks and no
 * read-modify-write atomics on its data path.
 *
 * Layout (struct shmrun_ring_shared in layout.h, docs/shm-layout.md):
 *
 *     line 0  magic, version, header size, capacity      immutable
 *     line 1  tail, producer pid                          producer writes
 *     line 2  head, consumer pid                          consumer writes
 *     line 3  data_bell, room_bell (struct shmrun_bell)   doorbells
 *     data    capacity bytes of frames
 *
 *     frame   [commit word 8][len 4][kind 2][flags 2][src 4][dst 4][payload][pad]
 *     skip    [commit word 8][don't care ... up to the wrap]
 *
 * Frame commit. The consumer learns that a frame is ready by loading (acquire)
 * the commit word at its own head, which the producer stores (release) after
 * the frame's bytes: the frame's own cache line carries the signal, so a
 * message costs one line transfer, not two (a tail line, then the frame line).
 * This is how Aeron's log buffers (the frame length as commit word) and the
 * LMAX Disruptor (a sequence per slot) publish. The word holds the bytes to
 * step over, the lap of the position (index >> log2(capacity)) and a frame/skip
 * bit, so it is never 0. The shared tail is still stored at every publication, for diagnostics and
 * for attach, but the consumer never reads it on its path.
 *
 * Stale bytes. The data area holds bytes of earlier laps, payload included,
 * which may look like anything. The consumer must never take them for a frame:
 *   - before publishing a batch that ends at t, the producer stores 0 in the
 *     word at t (inside the batch, each frame's word is stored at its commit,
 *     before the batch is published), so the consumer, which reaches t only
 *     through the acquires of the batch's words, finds there 0 or the next
 *     frame's word;
 *   - the one exception is a ring full up to t (t = head + capacity): that
 *     word is the commit word of the frame at head, written in the previous
 *     lap, which the consumer may be reading; its lap tag tells it apart;
 *   - init zeroes the data area, so a ring starts with 0 everywhere.
 * So the word at head is this lap's commit word, 0, or the previous lap's
 * commit word; anything else is corruption (-EPROTO).
 *
 * Invariants.
 *   - head <= tail_pub <= tail <= head + capacity, as free-running uint64_t byte
 *     indices (differences are taken modulo 2^64, so the indices may wrap
 *     through 2^64).
 *   - Every frame starts at an 8-byte boundary and lies wholly inside the data
 *     area: when a frame does not fit before the end, the producer writes a skip
 *     marker (its commit word, 8 bytes) and the frame starts at offset 0. The
 *     bytes from the marker to the end belong to the skip.
 *   - A frame's bytes are written before the release store of a commit word
 *     that makes them reachable, and are not overwritten before the consumer's
 *     release store of a head that is past them.
 *   - A frame takes at most capacity / 2 + 8 bytes (the largest payload is
 *     capacity / 2 - 16, as before the commit word), so a producer that waits
 *     for an empty ring can always place it: the skip before it is at most
 *     capacity / 2 - 8 bytes, except at offset capacity / 2, where the skip is
 *     published alone and the frame waits for the consumer to pass it.
 *
 * Batching. Commits advance a private tail; a batch becomes visible when the
 * commit word of its first frame is stored (shmrun_ring_set_batch(),
 * shmrun_ring_flush(), or when reserve finds the ring full). The later frames'
 * words are stored at commit, but the consumer cannot step past the batch's
 * first frame, so they stay invisible until then, and the doorbell check (a
 * seq_cst fence) is paid once per batch, never per commit. The consumer stores
 * head at every release — that line is read by the producer only when its
 * cached head says the ring is full, so the store stays in the consumer's cache
 * — but checks the producer's doorbell only once per release batch and when it
 * finds the ring empty.
 *
 * Sleeping. A side with nothing to do may sleep on a futex in the doorbell line
 * (FUTEX_WAIT, not private: the two sides are different processes). The
 * protocol is Dekker's: the sleeper stores its waiting flag, issues a seq_cst
 * fence and re-checks the ring (the commit word at head, or head); the waker
 * stores the word that makes progress (the batch's first commit word, or
 * head), issues a seq_cst fence and reads the waiting flag. At least one of
 * them sees the other's store, so a wake-up is never lost. The bell is a
 * counter read before the flag is set and passed to FUTEX_WAIT, so a wake that
 * lands between the re-check and the syscall makes the syscall return at once.
 * A NULL wake bell (shmrun_ring_set_wake_bell()) skips the waker's half: both
 * ends are served by one thread, which never sleeps on this ring.
 *
 * Threat model: a buggy or crashed producer. The consumer shares memory
 * with another process that runs shmrun's own code but may have died
 * mid-write or be wrong; it does not trust what it finds. It reads only
 * inside the data area whatever the words and headers say (a frame's
 * commit word is checked to hold a header before the header is read, its
 * step against the wrap, its len and kind against the step), steps only
 * over what it validated, takes at most a lap of frames from memory that
 * does not change (the lap tags change), and reports anything else as
 * corruption (-EPROTO), the same way on every peek. attach refuses
 * inconsistent indices (-EINVAL). tests/fuzz/fuzz_ring.c checks this over
 * rings and segments of garbage. Not covered: a producer that keeps
 * writing a frame after committing it (a data race no check can close
 * without copying every frame); each frame is validated once, at peek.
 *
 * Liveness. Each side records its pid at attach. A waiting side checks at least
 * every SHMRUN_RING_LIVENESS_NS that its peer lives, through a pidfd (readable
 * once the process has exited, zombie or reaped; immune to pid reuse once open),
 * falling back to kill(pid, 0) where pidfd_open is missing. A producer killed
 * mid-frame never stored that frame's commit word, so the consumer sees nothing
 * of it.
 *
 * Rejected designs.
 *   - The consumer polls a shared tail, then reads the frame (layout version
 *     1): two serialised line transfers per message, the issue-10 ping-pong
 *     gap of 1.6-3.5x a bare line round trip.
 *   - The frame's own len/kind as commit word (Aeron's way): callers fill
 *     those in place between reserve and commit, so the consumer's polling
 *     load would race with their plain stores. A ring-owned word costs 8
 *     bytes per frame, which batches (many records per frame) amortise.
 *   - Lap tags without zeroing: a stale payload byte pattern could forge the
 *     expected tag. Zeroing without lap tags: the word at the consumer's head
 *     after a full ring could not be zeroed (the consumer may be reading it),
 *     and would look committed.
 *   - Keeping one free slot (never filling the ring) instead of lap tags: it
 *     changes the capacity callers see, and lap tags cost nothing.
 *   - Storing every commit word at commit with a fence and doorbell check each:
 *     a seq_cst fence per record costs more than the transfer it saves.
 *   - Fixed-size slots (the "ideal" loop of shmrun-bench): records vary from a
 *     few bytes to megabytes; slots waste memory or force a second level.
 *   - Splitting a frame across the wrap: every reader would need a gather path
 *     and could not use a frame in place.
 *   - A lock or a futex on every publication: one syscall per batch at best,
 *     and it couples the producer's progress to the consumer's scheduling.
 *   - Multi-producer rings: they need a CAS on tail and make holding back one
 *     channel (barrier alignment) impossible without buffering (docs/design.md §4).
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "layout.h"

#if defined(__has_feature)
#define __has_feature_thread_sanitizer __has_feature(thread_sanitizer)
#else
#define __has_feature_thread_sanitizer 0
#endif

#define ALIGN_UP(x, a) (((x) + ((a) - 1)) & ~((uint64_t)(a) - 1))

/* Ring bytes of a frame of @len payload bytes: commit word, header, payload,
 * padding. */
static inline uint64_t frame_bytes(uint32_t len)
{
	return ALIGN_UP((uint64_t)SHMRUN_FRAME_COMMIT + SHMRUN_FRAME_HEADER + len,
			SHMRUN_FRAME_ALIGN);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static bool valid_capacity(uint64_t capacity)
{
	return capacity >= SHMRUN_RING_MIN_CAPACITY && capacity <= SHMRUN_RING_MAX_CAPACITY &&
	       (capacity & (capacity - 1)) == 0;
}

size_t shmrun_ring_memsize(uint64_t capacity)
{
	if (!valid_capacity(capacity))
		return 0;
	return sizeof(struct shmrun_ring_shared) + capacity;
}

int shmrun_ring_init(void *mem, size_t len, uint64_t capacity)
{
	struct shmrun_ring_shared *sh = mem;

	if (!valid_capacity(capacity) || ((uintptr_t)mem % SHMRUN_CACHELINE) != 0)
		return -EINVAL;
	if (len < shmrun_ring_memsize(capacity))
		return -ENOSPC;
	memset(sh, 0, sizeof(*sh));
	sh->magic = SHMRUN_RING_MAGIC;
	sh->version = SHMRUN_RING_LAYOUT_VERSION;
	sh->header_bytes = sizeof(*sh);
	sh->capacity = capacity;
	/* relaxed: nobody is attached yet; the segment's ready word (release)
	 * publishes the whole ring to other processes. */
	atomic_store_explicit(&sh->tail, 0, memory_order_relaxed);
	atomic_store_explicit(&sh->head, 0, memory_order_relaxed);
	/* Every commit word starts 0, whatever the indices are set to later. */
	memset((unsigned char *)mem + sizeof(*sh), 0, capacity);
	return 0;
}

/*
 * The end of the frames a consumer can see, starting at @tail (a frame
 * boundary, at most @head + capacity): walk the commit words of this lap.
 */
static uint64_t published_end(const struct shmrun_ring *r, uint64_t head, uint64_t tail)
{
	while (tail - head < r->capacity) {
		/* acquire: pairs with the release store of this word by the
		 * previous producer; the frame behind it is complete. */
		uint64_t w = atomic_load_explicit(shmrun_ring_word_(r, tail), memory_order_acquire);
		uint32_t hi = (uint32_t)(w >> 32), step = (uint32_t)w;
		uint64_t to_end = r->capacity - (tail & r->mask);

		if (hi == shmrun_ring_tag_(r, tail, SHMRUN_RING_COMMIT_SKIP)) {
			if (step != to_end)
				break;
		} else if (hi != shmrun_ring_tag_(r, tail, SHMRUN_RING_COMMIT_FRAME) ||
			   step < frame_bytes(0) || step % SHMRUN_FRAME_ALIGN || step > to_end) {
			break;
		}
		if (tail + step - head > r->capacity)
			break;
		tail += step;
	}
	return tail;
}

int shmrun_ring_attach(struct shmrun_ring *r, void *mem, size_t len, enum shmrun_ring_role role)
{
	struct shmrun_ring_shared *sh = mem;
	uint64_t head, tail;

	memset(r, 0, sizeof(*r));
	r->peer_pidfd = -1;
	if (((uintptr_t)mem % SHMRUN_CACHELINE) != 0 || len < sizeof(*sh))
		return -EINVAL;
	if (sh->magic != SHMRUN_RING_MAGIC || sh->version != SHMRUN_RING_LAYOUT_VERSION ||
	    sh->header_bytes != sizeof(*sh))
		return -EPROTO;
	if (!valid_capacity(sh->capacity) || len < shmrun_ring_memsize(sh->capacity))
		return -EINVAL;
	if (role != SHMRUN_RING_PRODUCER && role != SHMRUN_RING_CONSUMER)
		return -EINVAL;
	/* acquire: pairs with the release stores of head and tail by a previous
	 * owner of either side, so a handle resumes where the ring stands. */
	head = atomic_load_explicit(&sh->head, memory_order_acquire);
	tail = atomic_load_explicit(&sh->tail, memory_order_acquire);
	if (tail - head > sh->capacity || (head % SHMRUN_FRAME_ALIGN) != 0 ||
	    (tail % SHMRUN_FRAME_ALIGN) != 0)
		return -EINVAL;

	r->sh = sh;
	r->data = (unsigned char *)mem + sizeof(*sh);
	r->capacity = sh->capacity;
	r->mask = sh->capacity - 1;
	r->lap_shift = (unsigned)__builtin_ctzll(sh->capacity);
	r->role = role;
	r->wake = role == SHMRUN_RING_PRODUCER ? &sh->data_bell : &sh->room_bell;
	r->head_p = &sh->head;
	r->max_payload = (uint32_t)(sh->capacity / 2 - SHMRUN_FRAME_HEADER);
	if (role == SHMRUN_RING_PRODUCER) {
		/* The shared tail is stored after the commit word that publishes
		 * a batch; a producer that died between the two leaves it behind
		 * frames the consumer can already see. Step over those. */
		tail = published_end(r, head, tail);
		atomic_store_explicit(&sh->tail, tail, memory_order_relaxed);
	}
	r->tail = r->tail_pub = tail;
	r->head_cache = head;
	r->head = r->head_pub = head;
	r->batch_bytes = r->capacity / 16 < 65536 ? r->capacity / 16 : 65536;
	r->release_batch = r->batch_bytes;
	/* relaxed: the pid is a hint read by the peer's liveness check only. */
	if (role == SHMRUN_RING_PRODUCER)
		atomic_store_explicit(&sh->producer_pid, (int32_t)getpid(), memory_order_relaxed);
	else
		atomic_store_explicit(&sh->consumer_pid, (int32_t)getpid(), memory_order_relaxed);
	return 0;
}

void shmrun_ring_detach(struct shmrun_ring *r)
{
	if (!r->sh)
		return;
	if (r->role == SHMRUN_RING_PRODUCER)
		shmrun_ring_flush(r);
	else
		shmrun_ring_consumer_flush(r);
	if (r->peer_pidfd >= 0)
		close(r->peer_pidfd);
	r->peer_pidfd = -1;
	r->sh = NULL;
}

uint32_t shmrun_ring_max_payload(const struct shmrun_ring *r)
{
	return (uint32_t)(r->capacity / 2 - SHMRUN_FRAME_HEADER);
}

/* ---- doorbells ---------------------------------------------------------- */

static void futex_wake(_Atomic uint32_t *word)
{
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void futex_wait(_Atomic uint32_t *word, uint32_t expected, int64_t timeout_ns)
{
	struct timespec ts = {
		.tv_sec = timeout_ns / 1000000000,
		.tv_nsec = timeout_ns % 1000000000,
	};

	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, expected, &ts, NULL, 0);
}

/*
 * full_fence() - a seq_cst fence. On x86-64 a locked add to the stack (what
 * Linux's smp_mb() emits) orders every earlier store before every later load
 * as mfence does, at a fraction of its cost (mfence also waits for the
 * write-combining buffers this protocol never uses). Elsewhere, and under
 * ThreadSanitizer (which only understands C11 fences), the C11 fence.
 */
static inline void full_fence(void)
{
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__) && !__has_feature_thread_sanitizer
	__asm__ __volatile__("lock; addl $0,-4(%%rsp)" ::: "memory", "cc");
#else
	atomic_thread_fence(memory_order_seq_cst);
#endif
}

/*
 * The waker's half of the Dekker protocol: called right after a release store
 * of an index. The seq_cst fence orders that store before the load of the
 * waiting flag; pairs with the fence in shmrun_bell_sleep().
 */
void shmrun_bell_ring(struct shmrun_bell *b)
{
	if (!b)
		return; /* nobody sleeps separately (shmrun_ring_set_wake_bell()) */
	full_fence();
	if (atomic_load_explicit(&b->waiting, memory_order_relaxed)) {
		/* release: the sleeper's acquire load of seq in shmrun_bell_sleep()
		 * then sees the index store that came before. */
		atomic_fetch_add_explicit(&b->seq, 1, memory_order_release);
		futex_wake(&b->seq);
	}
}

void shmrun_ring_set_wake_bell(struct shmrun_ring *r, struct shmrun_bell *bell)
{
	r->wake = bell;
}

/* ---- producer ----------------------------------------------------------- */

void shmrun_ring_flush(struct shmrun_ring *r)
{
	if (r->tail == r->tail_pub)
		return;
	/* Zero the word where the next batch starts, so that the consumer,
	 * arriving there after this batch, finds 0 and not bytes of an earlier
	 * lap. Skipped when the ring is full up to there: that word is then the
	 * commit word of the frame at head, tagged with the previous lap.
	 * relaxed: the release store below orders it before the consumer's
	 * load. (Inside the batch, each frame's word was stored before this.) */
	if (r->tail - r->head_cache < r->capacity)
		atomic_store_explicit(shmrun_ring_word_(r, r->tail), 0, memory_order_relaxed);
	/* release: pairs with the acquire load of this word in shmrun_ring_peek();
	 * publishes the batch: this frame's bytes, and the words and bytes of
	 * every later frame of the batch, stored before it. */
	atomic_store_explicit(shmrun_ring_word_(r, r->tail_pub), r->pend_word,
			      memory_order_release);
	/* release: pairs with the acquire load of tail in shmrun_ring_attach();
	 * the consumer's path never reads it. */
	atomic_store_explicit(&r->sh->tail, r->tail, memory_order_release);
	r->tail_pub = r->tail;
	if (r->wake)
		shmrun_bell_ring(r->wake);
}

void shmrun_ring_set_batch(struct shmrun_ring *r, uint64_t bytes)
{
	if (bytes < 1)
		bytes = 1;
	if (bytes > r->capacity / 2)
		bytes = r->capacity / 2;
	r->batch_bytes = bytes;
}

uint64_t shmrun_ring_pending(const struct shmrun_ring *r)
{
	return r->tail - r->tail_pub;
}

/*
 * Bytes a frame of @need bytes takes at the current tail, skip included. The
 * one placement where the skip and the frame together exceed the ring (the
 * largest frame, capacity / 2 + 8 bytes, at offset capacity / 2) takes the
 * skip alone first: see place_skip_alone().
 */
static uint64_t placement_bytes(const struct shmrun_ring *r, uint64_t need)
{
	uint64_t to_end = r->capacity - (r->tail & r->mask);

	if (need <= to_end)
		return need;
	return to_end + need <= r->capacity ? to_end + need : to_end;
}

static bool has_room(struct shmrun_ring *r, uint64_t total)
{
	if (r->tail + total - r->head_cache <= r->capacity)
		return true;
	/* acquire: pairs with the release store of head in shmrun_ring_release();
	 * the consumer has finished reading every byte below head, so they may
	 * be overwritten. */
	r->head_cache = atomic_load_explicit(&r->sh->head, memory_order_acquire);
	return r->tail + total - r->head_cache <= r->capacity;
}

/* Write a skip marker over the @to_end bytes from the tail to the wrap (room
 * checked). Only its commit word is written: the end may be 8 bytes away. */
static void put_skip(struct shmrun_ring *r, uint64_t to_end)
{
	/* The word at offset 0, where the consumer goes next, is the next
	 * frame's (stored at its commit) or zeroed at publication. */
	shmrun_ring_put_word_(
	    r, to_end | (uint64_t)shmrun_ring_tag_(r, r->tail, SHMRUN_RING_COMMIT_SKIP) << 32);
	r->tail += to_end;
}

/*
 * A frame of @need bytes that does not fit before the wrap and that, with the
 * skip before it, would exceed the ring: publish the skip alone now if it
 * fits, so the frame can go at offset 0 once the consumer has stepped over it.
 * Return: whether the tail is now at offset 0 (or was: nothing to do).
 */
static bool place_skip_alone(struct shmrun_ring *r, uint64_t need)
{
	uint64_t to_end = r->capacity - (r->tail & r->mask);

	if (need <= to_end || to_end + need <= r->capacity)
		return true;
	if (r->reserving || !has_room(r, to_end))
		return false;
	put_skip(r, to_end);
	shmrun_ring_flush(r);
	return true;
}

bool shmrun_ring_writable(struct shmrun_ring *r, uint32_t len)
{
	uint64_t need = frame_bytes(len);

	if (len > shmrun_ring_max_payload(r))
		return false;
	if (!place_skip_alone(r, need))
		return false;
	return has_room(r, placement_bytes(r, need));
}

int shmrun_ring_reserve_slow(struct shmrun_ring *r, uint32_t len, struct shmrun_frame **frame)
{
	uint64_t need, to_end;

	if (r->reserving)
		return -EBUSY;
	if (len > shmrun_ring_max_payload(r))
		return -EMSGSIZE;
	need = frame_bytes(len);
	if (!place_skip_alone(r, need) || !has_room(r, placement_bytes(r, need))) {
		shmrun_ring_flush(r);
		return -EAGAIN;
	}
	to_end = r->capacity - (r->tail & r->mask);
	if (need > to_end)
		put_skip(r, to_end);
	*frame = shmrun_ring_open_frame_(r, len);
	return 0;
}

int shmrun_ring_skip(struct shmrun_ring *r)
{
	uint64_t to_end = r->capacity - (r->tail & r->mask);

	if (r->reserving)
		return -EBUSY;
	if (to_end == r->capacity)
		return 0; /* at offset 0: nothing to step over */
	if (!has_room(r, to_end))
		return -EAGAIN;
	put_skip(r, to_end);
	shmrun_ring_flush(r);
	return 0;
}

int shmrun_ring_write(struct shmrun_ring *r, uint16_t kind, uint32_t src_task, uint32_t dst_task,
		      const void *payload, uint32_t len)
{
	struct shmrun_frame *f;
	int err = shmrun_ring_reserve(r, len, &f);

	if (err)
		return err;
	f->kind = kind;
	f->src_task = src_task;
	f->dst_task = dst_task;
	if (len)
		memcpy(f->payload, payload, len);
	return shmrun_ring_commit(r, f);
}

/* ---- consumer ----------------------------------------------------------- */

static void publish_head_bell(struct shmrun_ring *r)
{
	r->head_pub = r->head;
	if (r->wake)
		shmrun_bell_ring(r->wake);
}

void shmrun_ring_consumer_flush(struct shmrun_ring *r)
{
	if (r->head != r->head_pub)
		publish_head_bell(r);
}

static void store_head(struct shmrun_ring *r)
{
	/* release: pairs with the acquire load of head in has_room(); every read
	 * of the bytes below head happens before the producer may reuse them. */
	atomic_store_explicit(&r->sh->head, r->head, memory_order_release);
}

int shmrun_ring_peek_slow(struct shmrun_ring *r, const struct shmrun_frame **frame)
{
	const struct shmrun_frame *f;
	uint64_t w, to_end;
	uint32_t hi, step, lap;

	for (;;) {
		/* acquire: pairs with the release store of this commit word in
		 * shmrun_ring_put_word_() or shmrun_ring_flush(); the frame's (or
		 * marker's) bytes and the zeroed word after it are visible. */
		w = atomic_load_explicit(shmrun_ring_word_(r, r->head), memory_order_acquire);
		hi = (uint32_t)(w >> 32);
		step = (uint32_t)w;
		to_end = r->capacity - (r->head & r->mask);
		if (hi == shmrun_ring_tag_(r, r->head, SHMRUN_RING_COMMIT_SKIP)) {
			if (step != to_end)
				return -EPROTO;
			r->head += to_end;
			store_head(r);
			continue;
		}
		if (hi != shmrun_ring_tag_(r, r->head, SHMRUN_RING_COMMIT_FRAME)) {
			/* 0, or the previous lap's word of a ring that was full:
			 * nothing published here yet. */
			lap =
			    (uint32_t)((r->head >> r->lap_shift) - 1) & SHMRUN_RING_COMMIT_LAP_MASK;
			if (w == 0 || ((hi & ~SHMRUN_RING_COMMIT_LAP_MASK) != 0 &&
				       (hi & SHMRUN_RING_COMMIT_LAP_MASK) == lap)) {
				shmrun_ring_consumer_flush(r);
				return -EAGAIN;
			}
			return -EPROTO;
		}
		f = (const struct shmrun_frame *)(r->data + (r->head & r->mask) +
						  SHMRUN_FRAME_COMMIT);
		if (step < frame_bytes(0) || step > to_end || frame_bytes(f->len) != step ||
		    f->kind < SHMRUN_FRAME_DATA || f->kind > SHMRUN_FRAME_END)
			return -EPROTO;
		*frame = f;
		return 0;
	}
}

void shmrun_ring_release_slow(struct shmrun_ring *r)
{
	publish_head_bell(r);
}

bool shmrun_ring_readable(struct shmrun_ring *r)
{
	const struct shmrun_frame *f;

	return shmrun_ring_peek(r, &f) != -EAGAIN;
}

/* ---- liveness ------------------------------------------------------------ */

bool shmrun_ring_peer_alive(struct shmrun_ring *r)
{
	_Atomic int32_t *slot =
		r->role == SHMRUN_RING_PRODUCER ? &r->sh->consumer_pid : &r->sh->producer_pid;
	int32_t pid = atomic_load_explicit(slot, memory_order_relaxed);
	struct pollfd pfd;

	if (pid <= 0 || pid == (int32_t)getpid())
		return true; /* not attached yet, or the peer is a thread of ours */
	if (r->peer_pidfd < 0 || r->peer_pid != pid) {
		if (r->peer_pidfd >= 0)
			close(r->peer_pidfd);
		r->peer_pid = pid;
		r->peer_pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
		if (r->peer_pidfd < 0) {
			if (errno == ESRCH)
				return false;
			return !(kill(pid, 0) == -1 && errno == ESRCH);
		}
	}
	pfd.fd = r->peer_pidfd;
	pfd.events = POLLIN;
	pfd.revents = 0;
	/* A pidfd polls readable once its process has exited. */
	return poll(&pfd, 1, 0) == 0;
}

/* ---- waiting ------------------------------------------------------------- */

/*
 * The sleeper's half of the Dekker protocol (see shmrun_bell_ring()). Sleeps
 * at most @max_ns unless @ready() turns true, which it re-checks after
 * announcing itself. Returns with the waiting flag cleared.
 */
void shmrun_bell_sleep(struct shmrun_bell *b, bool (*ready)(void *arg), void *arg,
		       int64_t max_ns)
{
	/* acquire: pairs with the release fetch_add in shmrun_bell_ring(). */
	uint32_t seen = atomic_load_explicit(&b->seq, memory_order_acquire);

	atomic_store_explicit(&b->waiting, 1, memory_order_relaxed);
	/* seq_cst: orders the flag store before the index re-check in ready();
	 * pairs with the fence in shmrun_bell_ring(). */
	full_fence();
	if (!ready(arg))
		futex_wait(&b->seq, seen, max_ns);
	atomic_store_explicit(&b->waiting, 0, memory_order_relaxed);
}

struct ring_wait {
	struct shmrun_ring *r;
	uint32_t len;   /* payload bytes wanted (writable) */
	bool writable;  /* wait for room, not for data */
};

static bool ring_ready(void *arg)
{
	struct ring_wait *rw = arg;

	return rw->writable ? shmrun_ring_writable(rw->r, rw->len) : shmrun_ring_readable(rw->r);
}

static int wait_until(struct ring_wait *rw, struct shmrun_bell *bell, enum shmrun_idle idle,
		      int64_t timeout_ns)
{
	/* A short wait is the common one: look a few times before reading the
	 * clock (a clock_gettime() per wait was a fifth of a ping-pong). */
	for (int i = 0; idle != SHMRUN_IDLE_SLEEP && i < 64; i++) {
		if (ring_ready(rw))
			return 0;
		cpu_relax();
	}

	int64_t start = now_ns(), now = start, next_check = start + SHMRUN_RING_LIVENESS_NS;
	int64_t deadline = timeout_ns < 0 ? INT64_MAX : start + timeout_ns;
	int64_t spin_until = idle == SHMRUN_IDLE_SPIN     ? INT64_MAX
			     : idle == SHMRUN_IDLE_HYBRID ? start + SHMRUN_RING_SPIN_NS
							  : start;
	unsigned spins = 0;

	for (;;) {
		if (ring_ready(rw))
			return 0;
		if (now < spin_until) {
			cpu_relax();
			if (++spins % 128)
				continue;
		} else {
			int64_t nap = next_check - now;

			if (deadline - now < nap)
				nap = deadline - now;
			if (nap > 0)
				shmrun_bell_sleep(bell, ring_ready, rw, nap);
			if (ring_ready(rw))
				return 0;
		}
		now = now_ns();
		if (now >= next_check) {
			if (!shmrun_ring_peer_alive(rw->r))
				return ring_ready(rw) ? 0 : -EOWNERDEAD;
			next_check = now + SHMRUN_RING_LIVENESS_NS;
		}
		if (now >= deadline)
			return -ETIMEDOUT;
	}
}

int shmrun_ring_wait_readable(struct shmrun_ring *r, enum shmrun_idle idle, int64_t timeout_ns)
{
	struct ring_wait rw = {.r = r};

	shmrun_ring_consumer_flush(r);
	return wait_until(&rw, &r->sh->data_bell, idle, timeout_ns);
}

int shmrun_ring_wait_writable(struct shmrun_ring *r, uint32_t len, enum shmrun_idle idle,
			      int64_t timeout_ns)
{
	struct ring_wait rw = {.r = r, .len = len, .writable = true};

	if (len > shmrun_ring_max_payload(r))
		return -EMSGSIZE;
	shmrun_ring_flush(r);
	return wait_until(&rw, &r->sh->room_bell, idle, timeout_ns);
}
