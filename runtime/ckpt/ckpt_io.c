/*
 * runtime/ckpt/ckpt_io.c: checkpoint state files — encoder, writer, reader.
 *
 * A worker turns its tasks' state into one byte stream per task (the encoder,
 * struct shmrun_ckpt_buf), writes it as a file with io_uring (the writer), and
 * at restore reads it back, refusing any byte that does not verify (the reader).
 * The format is in ckpt_io.h and docs/checkpoints.md:
 *
 *     [SHBK][len][xxh64(payload)][payload ≤ 1 MiB][SHBK][len][xxh64]...
 *
 * Encoder. Blocks are single allocations, header then payload, so a block is
 * one iovec and one write. Appends are a memcpy into the current block (inline
 * in the header); when a block is full its payload is hashed at once, while
 * it is still in cache. Every block needed by an append is allocated before a
 * byte is copied, so -ENOMEM leaves the stream as it was.
 *
 * Writer. Segments (blocks, or the one buffer of write_bytes) are written at
 * consecutive offsets of a new file. In io_uring mode each of `depth` slots
 * carries one segment and its own iovec; a slot is FREE, READY (to be
 * submitted: new, short, or to retry) or BUSY (submitted, or queued in
 * the SQ ring). The loop hands segments to free slots in file order, submits
 * the ready ones in one io_uring_enter, hashes the newly submitted segments
 * into the whole-file XXH64 while the kernel copies them, then reaps every
 * completion available. The pwrite fallback runs the same rules one segment
 * at a time.
 *
 * Invariants:
 *  - a completion is matched to its slot by user_data = slot index; a call
 *    returns only when no submission of it is in flight, so no CQE of one call
 *    is ever seen by the next, and the caller may free its buffer at once;
 *  - after the first error nothing new is queued, but every write in flight
 *    is still reaped;
 *  - the fsync is submitted only after every write completed in full;
 *  - buffers are only read (by the kernel, and by the hash) — never written —
 *    between seal and the end of the write.
 *
 * Rejected designs:
 *  - a checksum for the whole file only: damage could not be located, and a
 *    restore would learn of it only at the end; per block only: a file cut at
 *    a block boundary, or the wrong file, would verify. Both are kept.
 *  - padding blocks (to 8 bytes, or to 4 KiB for O_DIRECT): only the last
 *    block can be short, so headers are aligned anyway; O_DIRECT would need
 *    aligned lengths and offsets, and buffered writes plus one fsync let the
 *    kernel merge and write back while the next blocks are copied.
 *  - IOSQE_IO_LINK from the writes to the fsync: a short write breaks the
 *    chain (the fsync completes -ECANCELED) and must be handled anyway;
 *    submitting the fsync after the last completion is simpler and as fast.
 *  - IORING_OP_WRITE_FIXED (registered buffers): pins the state in memory
 *    (RLIMIT_MEMLOCK) for a small gain on buffered writes of 1 MiB.
 *  - IORING_OP_WRITE (kernel 5.6): IORING_OP_WRITEV with the slot's own iovec
 *    costs the same for 1 MiB writes and works on every io_uring kernel (5.1).
 *  - hashing the whole file in the encoder: it would need an XXH64 state in
 *    the buffer; the writer hashes each block right after submitting it, which
 *    overlaps with the kernel's copy.
 *  - unlinking a partial file here: the caller removes the whole ckpt-<epoch>
 *    directory of an aborted epoch.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "ckpt_io.h"
#include "fault.h"
#include "util.h"

/* Consecutive retries of one segment (or fsync) without progress before giving up. */
#define MAX_RETRIES 1000
/* user_data of the fsync submission (slots use their index). */
#define FSYNC_TAG UINT64_MAX

static void say(char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void say(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	if (!why || !whylen)
		return;
	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
}

static void put_le32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void put_le64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_le32(const unsigned char *p)
{
	uint32_t v = 0;

	for (int i = 3; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint64_t get_le64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/*
 * Whether an operation that completed with @err may simply be issued again.
 * -EINTR and -EAGAIN: interrupted or would block, nothing done. -ECANCELED:
 * this module never cancels a request, so the kernel gave up on it before it
 * ran: under a storm of signals io-wq can fail to create the worker a
 * request was punted to, and cancels the request (seen on Linux 6.18 by
 * check_ckpt_io's signal storm; Neon and PostgreSQL's AIO report it too).
 * Writes here are idempotent (pwrite semantics, fixed offsets), so a retry
 * is always safe.
 */
static bool retryable(int err)
{
	return err == -EINTR || err == -EAGAIN || err == -ECANCELED;
}

/* ---- encoder ---------------------------------------------------------------- */

void shmrun_ckpt_buf_init(struct shmrun_ckpt_buf *buf)
{
	memset(buf, 0, sizeof(*buf));
}

/* Fill in the header of the current block (the last in use). */
static void seal_block(struct shmrun_ckpt_buf *buf)
{
	struct iovec *v = &buf->iov[buf->nblocks - 1];
	unsigned char *hdr = v->iov_base;
	size_t len = (size_t)(buf->pos - (hdr + SHMRUN_CKPT_HEADER));

	put_le32(hdr, SHMRUN_CKPT_MAGIC);
	put_le32(hdr + 4, (uint32_t)len);
	put_le64(hdr + 8, XXH64(hdr + SHMRUN_CKPT_HEADER, len, 0));
	v->iov_len = SHMRUN_CKPT_HEADER + len;
}

/* Make sure blocks [0, want) are allocated. Return: 0 or -ENOMEM. */
static int reserve_blocks(struct shmrun_ckpt_buf *buf, size_t want)
{
	if (shmrun_grow(&buf->iov, &buf->cap, want, sizeof(*buf->iov), 16))
		return -ENOMEM;
	while (buf->nalloc < want) {
		void *b = malloc(SHMRUN_CKPT_HEADER + SHMRUN_CKPT_BLOCK);

		if (!b)
			return -ENOMEM;
		buf->iov[buf->nalloc].iov_base = b;
		buf->iov[buf->nalloc].iov_len = 0;
		buf->nalloc++;
	}
	return 0;
}

int shmrun_ckpt_buf_append_slow(struct shmrun_ckpt_buf *buf, const void *p, size_t n)
{
	const unsigned char *src = p;
	size_t extra, k;
	int err;

	if (buf->sealed)
		return -EINVAL;
	if (!n)
		return 0;
	/* Blocks beyond the current one that these bytes need. */
	extra = n > buf->room ? (n - buf->room + SHMRUN_CKPT_BLOCK - 1) / SHMRUN_CKPT_BLOCK : 0;
	err = reserve_blocks(buf, buf->nblocks + extra);
	if (err)
		return err;
	buf->len += n;
	while (n) {
		if (!buf->room) {
			if (buf->nblocks)
				seal_block(buf);
			buf->pos =
			    (unsigned char *)buf->iov[buf->nblocks].iov_base + SHMRUN_CKPT_HEADER;
			buf->room = SHMRUN_CKPT_BLOCK;
			buf->nblocks++;
		}
		k = n < buf->room ? n : buf->room;
		memcpy(buf->pos, src, k);
		buf->pos += k;
		buf->room -= k;
		src += k;
		n -= k;
	}
	return 0;
}

int shmrun_ckpt_buf_seal(struct shmrun_ckpt_buf *buf)
{
	if (buf->sealed)
		return 0;
	if (buf->nblocks)
		seal_block(buf);
	buf->room = 0;
	buf->sealed = true;
	return 0;
}

int shmrun_ckpt_buf_iov(const struct shmrun_ckpt_buf *buf, const struct iovec **iov,
			size_t *nblocks)
{
	if (!buf->sealed)
		return -EINVAL;
	*iov = buf->nblocks ? buf->iov : NULL;
	*nblocks = buf->nblocks;
	return 0;
}

uint64_t shmrun_ckpt_buf_len(const struct shmrun_ckpt_buf *buf)
{
	return buf->len;
}

uint64_t shmrun_ckpt_buf_file_size(const struct shmrun_ckpt_buf *buf)
{
	return buf->len + (uint64_t)buf->nblocks * SHMRUN_CKPT_HEADER;
}

void shmrun_ckpt_buf_reset(struct shmrun_ckpt_buf *buf)
{
	buf->pos = NULL;
	buf->room = 0;
	buf->nblocks = 0;
	buf->len = 0;
	buf->sealed = false;
}

void shmrun_ckpt_buf_free(struct shmrun_ckpt_buf *buf)
{
	for (size_t i = 0; i < buf->nalloc; i++)
		free(buf->iov[i].iov_base);
	free(buf->iov);
	shmrun_ckpt_buf_init(buf);
}

/* ---- writer ----------------------------------------------------------------- */

enum slot_state { SLOT_FREE, SLOT_READY, SLOT_BUSY };

struct ckpt_slot {
	struct iovec iov; /* what the submission writes; read by the kernel until completion */
	const unsigned char *base; /* the segment */
	size_t len, done;	   /* its bytes, and those written so far */
	uint64_t off;		   /* its file offset */
	int inject;		   /* -errno the completion reports instead (fault switch) */
	unsigned retries;	   /* retries in a row without progress */
	enum slot_state state;
};

/* kernel.io_uring_disabled (0 allow, 1 group only, 2 never), -1 if unknown. */
static int uring_sysctl(void)
{
	FILE *f = fopen("/proc/sys/kernel/io_uring_disabled", "re");
	int v = -1;

	if (!f)
		return -1;
	if (fscanf(f, "%d", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/* The symbolic name of the errno values io_uring setup is explained for. */
static const char *errno_name(int err)
{
	switch (err) {
	case ENOSYS:
		return "ENOSYS";
	case EPERM:
		return "EPERM";
	case EACCES:
		return "EACCES";
	case ENOMEM:
		return "ENOMEM";
	default:
		return "error";
	}
}

void shmrun_ckpt_uring_why(int err, int sysctl, unsigned long long memlock, char *why,
			   size_t whylen)
{
	const char *tail = "checkpoints use pwrite+fsync";
	char cause[200];

	if (!err) {
		say(why, whylen,
		    "io_uring is unavailable: kernel.io_uring_disabled=%d disables it for every "
		    "process (sysctl -w kernel.io_uring_disabled=0 allows it); %s",
		    sysctl, tail);
		return;
	}
	if (err == -ENOSYS)
		snprintf(cause, sizeof(cause),
			 "a kernel built without io_uring, or a seccomp filter that blocks it "
			 "(older container profiles)");
	else if ((err == -EPERM || err == -EACCES) && sysctl == 1)
		snprintf(cause, sizeof(cause),
			 "kernel.io_uring_disabled=1 allows it only to the group "
			 "kernel.io_uring_group; set the sysctl to 0 or run in that group");
	else if ((err == -EPERM || err == -EACCES) && sysctl == 2)
		snprintf(cause, sizeof(cause),
			 "kernel.io_uring_disabled=2 disables it; set the sysctl to 0");
	else if (err == -EPERM || err == -EACCES)
		snprintf(
		    cause, sizeof(cause),
		    "a seccomp filter (Docker's default profile blocks io_uring) or a "
		    "security module denies it; allow io_uring_setup/enter/register to use it");
	else if (err == -ENOMEM && memlock != (unsigned long long)RLIM_INFINITY)
		snprintf(
		    cause, sizeof(cause),
		    "RLIMIT_MEMLOCK is %llu KiB, too low for the rings (counted without "
		    "CAP_IPC_LOCK); raise it: ulimit -l, LimitMEMLOCK=, docker --ulimit memlock=",
		    memlock / 1024);
	else
		snprintf(cause, sizeof(cause), "%s", strerror(-err));
	say(why, whylen, "io_uring is unavailable: io_uring_setup failed with %s: %s; %s",
	    errno_name(-err), cause, tail);
}

/* shmrun_ckpt_uring_why() for this process: its sysctl and RLIMIT_MEMLOCK. */
static void explain_init(int err, char *why, size_t whylen)
{
	struct rlimit rl = {.rlim_cur = RLIM_INFINITY};

	getrlimit(RLIMIT_MEMLOCK, &rl);
	shmrun_ckpt_uring_why(err, uring_sysctl(), rl.rlim_cur, why, whylen);
}

int shmrun_ckpt_writer_init(struct shmrun_ckpt_writer *w, unsigned depth, char *why, size_t whylen)
{
	const char *no = getenv("SHMRUN_NO_IO_URING");
	int err;

	memset(w, 0, sizeof(*w));
	say(why, whylen, "%s", "");
	if (!depth)
		depth = SHMRUN_CKPT_DEPTH_DEFAULT;
	if (depth > SHMRUN_CKPT_DEPTH_MAX) {
		say(why, whylen, "io_uring depth %u > %u", depth, SHMRUN_CKPT_DEPTH_MAX);
		return -EINVAL;
	}
	if (shmrun_fault_bad()) {
		say(why, whylen,
		    "SHMRUN_FAULT=%s: not understood (test-only switch, see ckpt/fault.h)",
		    getenv("SHMRUN_FAULT"));
		return -EINVAL;
	}
	w->depth = depth;
	if (no && !strcmp(no, "1")) {
		say(why, whylen,
		    "io_uring is not used: SHMRUN_NO_IO_URING=1 is set; checkpoints use "
		    "pwrite+fsync");
		return 0;
	}
	if (uring_sysctl() == 2) {
		explain_init(0, why, whylen);
		return 0;
	}
	w->slots = calloc(depth, sizeof(*w->slots));
	if (!w->slots)
		return -ENOMEM;
	err = io_uring_queue_init(depth, &w->ring, 0);
	if (err == -ENOSYS || err == -EPERM || err == -EACCES || err == -ENOMEM) {
		explain_init(err, why, whylen);
		err = 0;
		goto err_free;
	}
	if (err < 0) {
		say(why, whylen, "io_uring_queue_init(%u): %s", depth, strerror(-err));
		goto err_free;
	}
	w->uring = true;
	return 0;

err_free:
	free(w->slots);
	w->slots = NULL;
	return err;
}

bool shmrun_ckpt_writer_uses_uring(const struct shmrun_ckpt_writer *w)
{
	return w->uring;
}

void shmrun_ckpt_writer_close(struct shmrun_ckpt_writer *w)
{
	if (w->uring)
		io_uring_queue_exit(&w->ring);
	free(w->slots);
	memset(w, 0, sizeof(*w));
}

/*
 * Queue the rest of slot @s's segment (or, for an injected error, a NOP whose
 * completion reports it).
 */
static void prep_slot(struct shmrun_ckpt_writer *w, struct io_uring_sqe *sqe, unsigned idx, int fd)
{
	struct ckpt_slot *s = &w->slots[idx];
	int f = shmrun_fault_on_write();

	s->iov.iov_base = (void *)(s->base + s->done);
	s->iov.iov_len = s->len - s->done;
	s->inject = f < 0 ? f : 0;
	if (f == 1)
		s->iov.iov_len = (s->iov.iov_len + 1) / 2;
	if (f < 0)
		io_uring_prep_nop(sqe);
	else
		io_uring_prep_writev(sqe, fd, &s->iov, 1, s->off + s->done);
	io_uring_sqe_set_data64(sqe, idx);
	s->state = SLOT_BUSY;
}

/* Account for one completion of a write slot; returns the error it ends with, or 0. */
static int complete_slot(struct ckpt_slot *s, int res)
{
	if (s->inject) {
		res = s->inject;
		s->inject = 0;
	}
	if (retryable(res)) {
		if (++s->retries > MAX_RETRIES)
			goto fail;
		s->state = SLOT_READY;
		return 0;
	}
	if (res < 0)
		goto fail;
	if (res == 0 || (size_t)res > s->len - s->done) {
		res = -EIO; /* no progress, or more than asked: never retry blindly */
		goto fail;
	}
	s->done += (size_t)res;
	s->retries = 0;
	s->state = s->done == s->len ? SLOT_FREE : SLOT_READY;
	return 0;

fail:
	s->state = SLOT_FREE;
	return res;
}

/*
 * Write phase, fill: hand segments from *@next (at file offset *@off) to
 * free slots, in file order, skipping empty ones; both advance.
 */
static void fill_slots(struct shmrun_ckpt_writer *w, const struct iovec *seg, size_t nseg,
		       size_t *next, uint64_t *off)
{
	for (unsigned i = 0; i < w->depth && *next < nseg; i++) {
		struct ckpt_slot *s = &w->slots[i];

		if (s->state != SLOT_FREE)
			continue;
		while (*next < nseg && !seg[*next].iov_len)
			(*next)++;
		if (*next == nseg)
			break;
		s->base = seg[*next].iov_base;
		s->len = seg[*next].iov_len;
		s->done = 0;
		s->off = *off;
		s->retries = 0;
		s->state = SLOT_READY;
		*off += seg[*next].iov_len;
		(*next)++;
	}
}

/*
 * Write phase, queue: an SQE for every ready slot, or, when @drop (after an
 * error, or with the ring broken), free them instead. Return: SQEs queued.
 */
static unsigned queue_slots(struct shmrun_ckpt_writer *w, int fd, bool drop)
{
	unsigned queued = 0;

	for (unsigned i = 0; i < w->depth; i++) {
		struct io_uring_sqe *sqe;

		if (w->slots[i].state != SLOT_READY)
			continue;
		if (drop) {
			w->slots[i].state = SLOT_FREE;
			continue;
		}
		sqe = io_uring_get_sqe(&w->ring);
		if (!sqe)
			break; /* cannot happen: busy slots <= depth <= SQ entries */
		prep_slot(w, sqe, i, fd);
		queued++;
	}
	return queued;
}

/*
 * Write phase, reap: account for completion @cqe and every one available
 * after it; the first error goes to *@err unless one is there. Return: how many.
 */
static unsigned reap_slots(struct shmrun_ckpt_writer *w, struct io_uring_cqe *cqe, int *err)
{
	unsigned reaped = 0;

	do {
		int e = complete_slot(&w->slots[io_uring_cqe_get_data64(cqe)], cqe->res);

		if (e && !*err)
			*err = e;
		io_uring_cqe_seen(&w->ring, cqe);
		reaped++;
	} while (!io_uring_peek_cqe(&w->ring, &cqe));
	return reaped;
}

/*
 * Write @nseg segments at consecutive offsets from 0 with io_uring, hashing
 * them into @h (may be NULL) in file order. Returns once nothing is in flight.
 */
static int uring_write(struct shmrun_ckpt_writer *w, int fd, const struct iovec *seg, size_t nseg,
		       XXH64_state_t *h)
{
	struct io_uring *ring = &w->ring;
	struct io_uring_cqe *cqe;
	size_t next = 0, hashed = 0;
	uint64_t off = 0;
	unsigned inflight = 0, queued = 0, stuck = 0;
	bool ring_broken = false;
	int err = 0, ret;

	for (unsigned i = 0; i < w->depth; i++)
		w->slots[i].state = SLOT_FREE;
	for (;;) {
		/* Hand segments to free slots, in file order. */
		if (!err)
			fill_slots(w, seg, nseg, &next, &off);
		/* Queue every ready slot (none after an error). */
		queued += queue_slots(w, fd, err || ring_broken);
		if (queued && !ring_broken) {
			ret = io_uring_submit(ring);
			if (ret > 0) {
				inflight += (unsigned)ret;
				queued -= (unsigned)ret;
				stuck = 0;
			} else if (ret == 0 || ret == -EINTR || ret == -EAGAIN || ret == -EBUSY) {
				/* Transient: reap (below) or yield, then retry. */
				if (!inflight && ++stuck > MAX_RETRIES) {
					err = err ? err : (ret ? ret : -EIO);
					ring_broken = true;
				} else if (!inflight) {
					sched_yield();
				}
			} else {
				/* Queued SQEs cannot be taken back: retire the ring below. */
				err = err ? err : ret;
				ring_broken = true;
			}
		}
		/* Hash what the kernel is now copying. */
		for (; h && hashed < next; hashed++)
			XXH64_update(h, seg[hashed].iov_base, seg[hashed].iov_len);
		if (!inflight) {
			if (!queued || ring_broken)
				break;
			continue;
		}
		/* Reap at least one completion, then every one available. */
		ret = io_uring_wait_cqe(ring, &cqe);
		if (ret == -EINTR || ret == -EAGAIN)
			continue;
		if (ret < 0) {
			/* Cannot reap: retire the ring (closing it cancels what is in flight). */
			err = err ? err : ret;
			ring_broken = true;
			break;
		}
		inflight -= reap_slots(w, cqe, &err);
	}
	if (ring_broken) {
		io_uring_queue_exit(ring);
		w->uring = false;
	}
	return err;
}

/* fsync @fd through the ring; a retryable completion is submitted again. */
static int uring_fsync(struct shmrun_ckpt_writer *w, int fd)
{
	struct io_uring *ring = &w->ring;
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	unsigned tries = 0;
	int inject, ret;

again:
	inject = shmrun_fault_on_fsync();
	sqe = io_uring_get_sqe(ring);
	if (!sqe)
		return -EBUSY; /* cannot happen: the SQ ring is empty between calls */
	if (inject)
		io_uring_prep_nop(sqe);
	else
		io_uring_prep_fsync(sqe, fd, 0);
	io_uring_sqe_set_data64(sqe, FSYNC_TAG);
	do {
		ret = io_uring_submit(ring);
	} while (ret == -EINTR);
	if (ret < 0)
		goto err_retire; /* the SQE may still sit in the ring */
	do {
		ret = io_uring_wait_cqe(ring, &cqe);
	} while (ret == -EINTR || ret == -EAGAIN);
	if (ret < 0)
		goto err_retire;
	ret = inject ? inject : cqe->res;
	io_uring_cqe_seen(ring, cqe);
	if (retryable(ret) && ++tries <= MAX_RETRIES)
		goto again; /* it did not run: not an fsync error */
	return ret < 0 ? ret : 0;

err_retire:
	/* Retire the ring, fall back to pwrite/fsync for later calls. */
	io_uring_queue_exit(ring);
	w->uring = false;
	return ret;
}

/* The pwrite fallback of uring_write(), one segment at a time. */
static int plain_write(int fd, const struct iovec *seg, size_t nseg, XXH64_state_t *h)
{
	uint64_t off = 0;

	for (size_t i = 0; i < nseg; i++) {
		const unsigned char *base = seg[i].iov_base;
		size_t len = seg[i].iov_len, done = 0;
		unsigned retries = 0;

		if (h)
			XXH64_update(h, base, len);
		while (done < len) {
			int f = shmrun_fault_on_write();
			size_t n = len - done;
			ssize_t r;
			int e;

			if (f == 1)
				n = (n + 1) / 2;
			if (f < 0) {
				r = -1;
				e = -f;
			} else {
				r = pwrite(fd, base + done, n, (off_t)(off + done));
				e = errno;
			}
			if (r < 0 && retryable(-e) && ++retries <= MAX_RETRIES)
				continue;
			if (r < 0)
				return -e;
			if (r == 0)
				return -EIO;
			done += (size_t)r;
			retries = 0;
		}
		off += len;
	}
	return 0;
}

/* fsync(2), with the fault switch; a retryable error is tried again. */
static int plain_fsync(int fd)
{
	unsigned tries = 0;
	int err;

	do {
		err = shmrun_fault_on_fsync();
		if (!err && fsync(fd) < 0)
			err = -errno;
	} while (retryable(err) && ++tries <= MAX_RETRIES);
	return err;
}

int shmrun_ckpt_mkdir(const char *path)
{
	if (mkdir(path, 0700) < 0)
		return -errno;
	/* the umask may have removed bits we need (0277 gives 0500) */
	if (chmod(path, 0700) < 0)
		return -errno;
	return 0;
}

/*
 * Create @name in @dirfd for writing, mode 0600 whatever the umask (an
 * existing file replaced with O_TRUNC gets 0600 too). Return: fd or -errno.
 */
static int create_file(int dirfd, const char *name, bool excl)
{
	int flags = O_CREAT | O_WRONLY | O_CLOEXEC | (excl ? O_EXCL : O_TRUNC);
	int fd;

	do {
		fd = openat(dirfd, name, flags, 0600);
	} while (fd < 0 && errno == EINTR);
	if (fd >= 0 && fchmod(fd, 0600) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd < 0 ? -errno : fd;
}

/* Write @nseg segments as the new file @name, fsync it, close it. */
static int write_segments(struct shmrun_ckpt_writer *w, int dirfd, const char *name, bool excl,
			  const struct iovec *seg, size_t nseg, XXH64_state_t *h)
{
	int fd, err;

	fd = create_file(dirfd, name, excl);
	if (fd < 0)
		return fd;
	if (w->uring)
		err = uring_write(w, fd, seg, nseg, h);
	else
		err = plain_write(fd, seg, nseg, h);
	if (err)
		goto err_close;
	err = w->uring ? uring_fsync(w, fd) : plain_fsync(fd);

err_close:
	/* After a successful fsync a close error still means lost data (NFS). */
	if (close(fd) < 0 && !err && errno != EINTR)
		err = -errno;
	return err;
}

int shmrun_ckpt_write_file(struct shmrun_ckpt_writer *w, int dirfd, const char *name,
			   const struct shmrun_ckpt_buf *buf, uint64_t *size, uint64_t *xxh64)
{
	const struct iovec *iov;
	XXH64_state_t h;
	size_t n;
	int err;

	err = shmrun_ckpt_buf_iov(buf, &iov, &n);
	if (err)
		return err;
	XXH64_reset(&h, 0);
	err = write_segments(w, dirfd, name, true, iov, n, &h);
	if (err)
		return err;
	if (size)
		*size = shmrun_ckpt_buf_file_size(buf);
	if (xxh64)
		*xxh64 = XXH64_digest(&h);
	return 0;
}

int shmrun_ckpt_write_bytes(struct shmrun_ckpt_writer *w, int dirfd, const char *name,
			    const void *p, size_t n, int flags)
{
	struct iovec seg = {.iov_base = (void *)p, .iov_len = n};

	if (flags & ~SHMRUN_CKPT_TRUNC)
		return -EINVAL;
	return write_segments(w, dirfd, name, !(flags & SHMRUN_CKPT_TRUNC), &seg, 1, NULL);
}

int shmrun_ckpt_fsync_dir(int dirfd)
{
	return plain_fsync(dirfd);
}

/* ---- reader ----------------------------------------------------------------- */

/*
 * Walk the blocks of @p[0, @size), checking each, and move the payloads to
 * the front of @p. Return: 0 with *@len and *@nblocks, or -EBADMSG with @why.
 */
static int walk_blocks(unsigned char *p, size_t size, size_t *len, size_t *nblocks, char *why,
		       size_t whylen)
{
	size_t off = 0, out = 0, b = 0;

	while (off < size) {
		const unsigned char *hdr = p + off;
		uint32_t magic, plen;
		uint64_t sum, got;

		if (size - off < SHMRUN_CKPT_HEADER) {
			say(why, whylen, "truncated block header at offset %zu: %zu of %u bytes",
			    off, size - off, SHMRUN_CKPT_HEADER);
			return -EBADMSG;
		}
		magic = get_le32(hdr);
		plen = get_le32(hdr + 4);
		sum = get_le64(hdr + 8);
		if (magic != SHMRUN_CKPT_MAGIC) {
			say(why, whylen,
			    "block %zu at offset %zu: bad magic 0x%08x (want 0x%08x, \"SHBK\")", b,
			    off, magic, SHMRUN_CKPT_MAGIC);
			return -EBADMSG;
		}
		if (plen > SHMRUN_CKPT_BLOCK) {
			say(why, whylen, "block %zu at offset %zu: payload length %u > %u", b, off,
			    plen, SHMRUN_CKPT_BLOCK);
			return -EBADMSG;
		}
		if (size - off - SHMRUN_CKPT_HEADER < plen) {
			say(why, whylen,
			    "truncated block %zu at offset %zu: needs %u payload bytes, the file "
			    "ends at %zu",
			    b, off, plen, size);
			return -EBADMSG;
		}
		got = XXH64(hdr + SHMRUN_CKPT_HEADER, plen, 0);
		if (got != sum) {
			say(why, whylen,
			    "block %zu at offset %zu: checksum mismatch (stored 0x%016llx, "
			    "computed 0x%016llx)",
			    b, off, (unsigned long long)sum, (unsigned long long)got);
			return -EBADMSG;
		}
		memmove(p + out, hdr + SHMRUN_CKPT_HEADER, plen);
		out += plen;
		off += SHMRUN_CKPT_HEADER + plen;
		b++;
	}
	*len = out;
	*nblocks = b;
	return 0;
}

/* Append " (size A != B in MANIFEST)" to @why when the sizes differ. */
static void note_size(char *why, size_t whylen, uint64_t size, uint64_t want)
{
	size_t used;

	if (!why || !whylen || size == want)
		return;
	used = strlen(why);
	say(why + used, whylen - used, " (size %llu != %llu in MANIFEST)", (unsigned long long)size,
	    (unsigned long long)want);
}

/*
 * Reader, verify phase: check the @size bytes read at @p against the
 * MANIFEST's size and hash, and every block, moving the payloads to the
 * front. Return: 0 with *@out payload bytes, or -EBADMSG with @why.
 */
static int verify_file(unsigned char *p, size_t size, uint64_t want_size, uint64_t want_xxh64,
		       size_t *out, char *why, size_t whylen)
{
	size_t nblocks;
	uint64_t sum;
	int err;

	/* The whole-file hash first: walking the blocks moves the payloads. */
	sum = XXH64(p, size, 0);
	err = walk_blocks(p, size, out, &nblocks, why, whylen);
	if (err) {
		note_size(why, whylen, size, want_size);
		return err;
	}
	if (size != want_size) {
		say(why, whylen,
		    "size %zu != %llu in MANIFEST: the file ends at offset %zu, after %zu whole "
		    "blocks",
		    size, (unsigned long long)want_size, size, nblocks);
		return -EBADMSG;
	}
	if (sum != want_xxh64) {
		say(why, whylen,
		    "xxh64 0x%016llx != 0x%016llx in MANIFEST (every block verifies: not the file "
		    "the "
		    "MANIFEST names)",
		    (unsigned long long)sum, (unsigned long long)want_xxh64);
		return -EBADMSG;
	}
	return 0;
}

int shmrun_ckpt_read_file(int dirfd, const char *name, uint64_t want_size, uint64_t want_xxh64,
			  void **data, size_t *len, char *why, size_t whylen)
{
	unsigned char *p = NULL;
	struct stat st;
	size_t size, out;
	ssize_t got;
	int fd, err;

	*data = NULL;
	*len = 0;
	say(why, whylen, "%s", "");
	do {
		fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	} while (fd < 0 && errno == EINTR);
	if (fd < 0) {
		err = -errno;
		say(why, whylen, "open %s: %s", name, strerror(-err));
		return err;
	}
	if (fstat(fd, &st) < 0) {
		err = -errno;
		say(why, whylen, "stat %s: %s", name, strerror(-err));
		goto err_close;
	}
	if ((uint64_t)st.st_size > want_size) {
		say(why, whylen, "size %llu != %llu in MANIFEST", (unsigned long long)st.st_size,
		    (unsigned long long)want_size);
		err = -EBADMSG;
		goto err_close;
	}
	size = (size_t)st.st_size;
	p = malloc(size ? size : 1);
	if (!p) {
		err = -ENOMEM;
		say(why, whylen, "%s: no memory for %zu bytes", name, size);
		goto err_close;
	}
	got = shmrun_read_all(fd, p, size); /* < size if it shrank */
	if (got < 0) {
		err = (int)got;
		say(why, whylen, "read %s: %s", name, strerror(-err));
		goto err_free;
	}
	size = (size_t)got;
	err = verify_file(p, size, want_size, want_xxh64, &out, why, whylen);
	if (err)
		goto err_free;
	if (out < size) {
		void *q = realloc(p, out ? out : 1);

		if (q)
			p = q;
	}
	close(fd);
	*data = p;
	*len = out;
	return 0;

err_free:
	free(p);
err_close:
	close(fd);
	return err;
}
