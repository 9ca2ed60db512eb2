/*
 * runtime/ckpt/ckpt_io.h: checkpoint state files — the block format, an in-memory
 * encoder, an io_uring writer with a pwrite/fsync fallback, and a verifying
 * reader (private to runtime/; docs/checkpoints.md "State file format" and
 * "Writer" are the reference, docs/design.md §6 the design).
 *
 * A state file is a sequence of blocks; its logical content is the
 * concatenation of the blocks' payloads:
 *
 *     offset 0                     16                   16 + len
 *     +-----------+-----------+----------------+---------------------+---------
 *     | u32 magic | u32 len   | u64 xxh64      | payload: len bytes  | next block
 *     | "SHBK"    | ≤ 1 MiB   | XXH64(payload) |                     | header ...
 *     +-----------+-----------+----------------+---------------------+---------
 *
 *  - integers are little-endian; magic is 0x4b424853 (the bytes "SHBK");
 *  - xxh64 is XXH64(payload, len, seed 0);
 *  - 0 ≤ len ≤ SHMRUN_CKPT_BLOCK; there is no padding: the next header follows
 *    the payload directly. The encoder fills every block but the last to
 *    exactly SHMRUN_CKPT_BLOCK bytes (so every header sits at a multiple of
 *    1 MiB + 16, 8-byte aligned) and never writes an empty block, so an empty
 *    stream is an empty file. Readers accept any len in range;
 *  - the whole file's size and XXH64(file bytes, seed 0) go into the MANIFEST,
 *    which is what tells a complete file from a truncated one.
 *
 * The idea is the one of LevelDB's log blocks and Flink's checkpoint streams: a
 * checksum per bounded block, so damage is reported by block and offset, and a
 * whole-file size and checksum kept elsewhere (the commit record).
 *
 * Functions that act return 0 on success and a negative errno on failure; they
 * never set errno. Nothing here prints: @why buffers carry the one-line message
 * for the caller to log. Thread/process safety: a buffer or writer is used by
 * one thread; a writer must not cross fork() (the io_uring is shared with the
 * parent): create it in the process that writes.
 */
#ifndef SHMRUN_RT_CKPT_IO_H
#define SHMRUN_RT_CKPT_IO_H

#include <liburing.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

/* Largest block payload, bytes (1 MiB). */
#define SHMRUN_CKPT_BLOCK (1u << 20)
/* Block header, bytes: magic, payload length, payload checksum. */
#define SHMRUN_CKPT_HEADER 16u
/* Block magic: the little-endian u32 of the bytes "SHBK". */
#define SHMRUN_CKPT_MAGIC 0x4b424853u
/* Writes in flight when shmrun_ckpt_writer_init() is given depth 0. */
#define SHMRUN_CKPT_DEPTH_DEFAULT 16u
/* Largest io_uring depth shmrun_ckpt_writer_init() accepts. */
#define SHMRUN_CKPT_DEPTH_MAX 4096u

/* ---- encoder --------------------------------------------------------------- */

/*
 * An append-only logical byte stream, built as blocks in memory. Each block is
 * one allocation of SHMRUN_CKPT_HEADER + SHMRUN_CKPT_BLOCK bytes holding the
 * header and the payload contiguously, so one block is one iovec and one write.
 * A block's header is filled in when the block is sealed: when it is full and
 * more bytes arrive, or by shmrun_ckpt_buf_seal() for the last one.
 *
 * Fields are private to ckpt_io.c except through the inline fast path of
 * shmrun_ckpt_buf_append().
 */
struct shmrun_ckpt_buf {
	unsigned char *pos; /* next free payload byte of the current block, NULL if none */
	size_t room;	    /* payload bytes left in the current block; 0 when sealed */
	struct iovec *iov;  /* per block: header + payload, in file order */
	size_t nblocks;	    /* blocks in use; the last is the current one until sealed */
	size_t nalloc;	    /* iov entries with a block allocated (≥ nblocks, kept by reset) */
	size_t cap;	    /* iov entries allocated */
	uint64_t len;	    /* logical bytes appended */
	bool sealed;
};

/* shmrun_ckpt_buf_init() - an empty, unsealed stream. Allocates nothing. */
void shmrun_ckpt_buf_init(struct shmrun_ckpt_buf *buf);

/*
 * shmrun_ckpt_buf_append_slow() - the out-of-line part of
 * shmrun_ckpt_buf_append(): new blocks, sealing the full one. Call
 * shmrun_ckpt_buf_append() instead.
 */
int shmrun_ckpt_buf_append_slow(struct shmrun_ckpt_buf *buf, const void *p, size_t n);

/*
 * shmrun_ckpt_buf_append() - append @n bytes at @p to the stream.
 * A memcpy into the current block when the bytes fit (inline); otherwise the
 * full block is sealed (its payload checksummed while still in cache) and new
 * blocks are allocated. Bytes may straddle blocks: the stream is logical.
 * Return: 0; -EINVAL if the buffer is sealed; -ENOMEM, in which case the
 * stream is unchanged (every block needed is allocated before any byte is
 * copied).
 */
static inline int shmrun_ckpt_buf_append(struct shmrun_ckpt_buf *buf, const void *p, size_t n)
{
	if (n && n <= buf->room) {
		memcpy(buf->pos, p, n);
		buf->pos += n;
		buf->room -= n;
		buf->len += n;
		return 0;
	}
	return shmrun_ckpt_buf_append_slow(buf, p, n);
}

/*
 * shmrun_ckpt_buf_seal() - end the stream: fill in the last block's header.
 * Afterwards the buffer is read-only (appends return -EINVAL) until
 * shmrun_ckpt_buf_reset(). Sealing twice is harmless. Return: 0.
 */
int shmrun_ckpt_buf_seal(struct shmrun_ckpt_buf *buf);

/*
 * shmrun_ckpt_buf_iov() - the sealed blocks, one iovec each (header + payload),
 * in file order; their concatenation is the state file's bytes. @iov stays
 * valid, and its bytes unchanged, until reset or free. Return: 0 with *@iov
 * and *@nblocks (0 blocks, *@iov NULL, for an empty stream); -EINVAL if not
 * sealed.
 */
int shmrun_ckpt_buf_iov(const struct shmrun_ckpt_buf *buf, const struct iovec **iov,
			size_t *nblocks);

/* shmrun_ckpt_buf_len() - logical bytes appended so far. */
uint64_t shmrun_ckpt_buf_len(const struct shmrun_ckpt_buf *buf);

/* shmrun_ckpt_buf_file_size() - the state file's size for the bytes so far, bytes. */
uint64_t shmrun_ckpt_buf_file_size(const struct shmrun_ckpt_buf *buf);

/*
 * shmrun_ckpt_buf_reset() - empty and unseal the stream, keeping its blocks'
 * memory for the next epoch (no allocation or page faults on reuse). Only
 * once no write of it is in flight, i.e. after shmrun_ckpt_write_file()
 * returned.
 */
void shmrun_ckpt_buf_reset(struct shmrun_ckpt_buf *buf);

/* shmrun_ckpt_buf_free() - release every block; the buffer is then as after init. */
void shmrun_ckpt_buf_free(struct shmrun_ckpt_buf *buf);

/* ---- writer ---------------------------------------------------------------- */

struct ckpt_slot; /* one write in flight, private to ckpt_io.c */

struct shmrun_ckpt_writer {
	bool uring;		 /* true: io_uring; false: pwrite/fsync fallback */
	unsigned depth;		 /* writes in flight at most (io_uring mode) */
	struct io_uring ring;	 /* valid while uring */
	struct ckpt_slot *slots; /* depth entries (io_uring mode) */
};

/*
 * shmrun_ckpt_writer_init() - set up a writer with an io_uring of @depth
 * entries (writes in flight at most; 0 = SHMRUN_CKPT_DEPTH_DEFAULT).
 *
 * Falls back to pwrite/fsync, still returning 0, when io_uring cannot be used:
 * SHMRUN_NO_IO_URING=1 in the environment (tests), kernel.io_uring_disabled=2,
 * or io_uring_queue_init() failing with ENOSYS (no io_uring, or a seccomp
 * filter), EPERM/EACCES (the sysctl, seccomp, an LSM) or ENOMEM (a low
 * RLIMIT_MEMLOCK: the rings count against it for a user without
 * CAP_IPC_LOCK, e.g. any user but root). Then @why receives one line naming
 * the reason and what to do, for the caller to log as one warning; otherwise
 * @why is set to "". @why may be NULL (@whylen 0).
 *
 * In a build with SHMRUN_FAULT_INJECTION, reads SHMRUN_FAULT (the fault
 * switch, fault.h) the first time any writer is set up in the process.
 *
 * Return: 0; -EINVAL (@depth > SHMRUN_CKPT_DEPTH_MAX, or SHMRUN_FAULT not
 * understood: @why says so); -ENOMEM; another -errno of io_uring_queue_init()
 * (e.g. -EMFILE), with @why.
 */
int shmrun_ckpt_writer_init(struct shmrun_ckpt_writer *w, unsigned depth, char *why, size_t whylen);

/*
 * shmrun_ckpt_uring_why() - the one line shmrun_ckpt_writer_init() gives when
 * io_uring cannot be used: "io_uring is unavailable: io_uring_setup failed
 * with EPERM: <cause and what to do>; checkpoints use pwrite+fsync".
 * @err: io_uring_queue_init()'s -errno (-ENOSYS, -EPERM, -EACCES, -ENOMEM,
 *	 other: its strerror), or 0 when it was not tried because @sysctl is 2
 * @sysctl: kernel.io_uring_disabled (0, 1, 2), -1 if unknown; names the
 *	 sysctl as the cause of an EPERM/EACCES when 1 or 2, else seccomp/LSM
 * @memlock: RLIMIT_MEMLOCK's soft limit in bytes (RLIM_INFINITY: none); named
 *	 as the cause of an ENOMEM when finite
 * @why, @whylen: the buffer; truncated to fit, one line, no newline
 *
 * Split from the writer so every cause can be tested without the machine
 * state it needs (a sysctl only root on the host can set).
 */
void shmrun_ckpt_uring_why(int err, int sysctl, unsigned long long memlock, char *why,
			   size_t whylen);

/* shmrun_ckpt_writer_uses_uring() - true in io_uring mode, false in the fallback. */
bool shmrun_ckpt_writer_uses_uring(const struct shmrun_ckpt_writer *w);

/*
 * shmrun_ckpt_write_file() - write the sealed @buf as the new file @name in
 * directory @dirfd, durably.
 *
 * Creates @name (O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC) with mode 0600 whatever
 * the umask (state may hold secrets: a lookup table, keys), writes
 * every block — in io_uring mode as batched IORING_OP_WRITEV submissions, up to
 * the writer's depth in flight — and checks every completion: a short write is
 * resubmitted for the rest; -EINTR, -EAGAIN and -ECANCELED (the kernel
 * dropping a request it never ran, e.g. under a storm of signals — this
 * module never cancels one) are retried, up to 1000 times in a row without
 * progress; anything else aborts. After an error no new write is submitted,
 * and the call returns only once every write in flight has completed, so @buf
 * may be freed as soon as it returns. Only after every write has completed is
 * the file fsynced (IORING_OP_FSYNC or fsync(2)); an fsync that ran and
 * failed is not retried (the kernel may have dropped the dirty pages), one
 * that did not run (the three errors above) is.
 *
 * @size, @xxh64 (either may be NULL) receive the file's size in bytes and
 * XXH64 (seed 0) of its bytes, computed from the blocks as they are submitted
 * (no re-read) — the pair the MANIFEST records.
 *
 * Return: 0; -EINVAL if @buf is not sealed; -EEXIST; the -errno of openat(),
 * of a write (-EIO, -ENOSPC, -EDQUOT, -EFBIG, ...), of the fsync, or of
 * io_uring_submit(). On error after the file was created, the partial file is
 * left in place for the caller to remove (usually with the whole ckpt-<epoch>
 * directory). If io_uring_submit() itself fails, the writer has fallen back to
 * pwrite/fsync for later calls.
 */
int shmrun_ckpt_write_file(struct shmrun_ckpt_writer *w, int dirfd, const char *name,
			   const struct shmrun_ckpt_buf *buf, uint64_t *size, uint64_t *xxh64);

/*
 * shmrun_ckpt_mkdir() - create the directory @path with mode 0700 whatever the
 * umask (fchmod-like chmod after mkdir(2), so a umask of 022, 000 or 0277 all
 * give 0700): checkpoint directories and every directory the runtime makes
 * for them (checkpoint_dir and its parents, ckpt-<epoch>/, reset-<time>/).
 * Return: 0 when created; -EEXIST if @path exists (its mode is left alone:
 * the caller decides whether that is an error); another -errno of mkdir(2)
 * or chmod(2).
 */
int shmrun_ckpt_mkdir(const char *path);

/* Flag of shmrun_ckpt_write_bytes(): replace an existing file (O_TRUNC) instead of -EEXIST. */
#define SHMRUN_CKPT_TRUNC 0x1

/*
 * shmrun_ckpt_write_bytes() - write @n bytes at @p as the plain file @name in
 * @dirfd (no block format), then fsync it: for small files such as a MANIFEST
 * written to a temporary name before rename(2) and shmrun_ckpt_fsync_dir().
 * @flags: 0 or SHMRUN_CKPT_TRUNC. Same creation mode, completion checks and
 * fault switch as shmrun_ckpt_write_file().
 * Return: 0; -EINVAL (unknown @flags); -EEXIST (without SHMRUN_CKPT_TRUNC);
 * -errno of open, write or fsync (the partial file is left in place).
 */
int shmrun_ckpt_write_bytes(struct shmrun_ckpt_writer *w, int dirfd, const char *name,
			    const void *p, size_t n, int flags);

/*
 * shmrun_ckpt_fsync_dir() - fsync(2) the directory @dirfd, so that files
 * created or renamed in it survive a crash. -EINTR, -EAGAIN and -ECANCELED
 * are retried.
 * Return: 0 or -errno (-EBADF, -EIO, ...). Counts as an fsync for SHMRUN_FAULT.
 */
int shmrun_ckpt_fsync_dir(int dirfd);

/*
 * shmrun_ckpt_writer_close() - tear down the io_uring and free the writer's
 * memory. Safe after a failed shmrun_ckpt_writer_init(), and twice.
 */
void shmrun_ckpt_writer_close(struct shmrun_ckpt_writer *w);

/* ---- reader ---------------------------------------------------------------- */

/*
 * shmrun_ckpt_read_file() - read and verify the state file @name in @dirfd
 * against the MANIFEST's @want_size (bytes) and @want_xxh64, and return its
 * logical content.
 *
 * Checks, in order: the size is not larger than @want_size (else nothing is
 * read); every block's magic, length (≤ SHMRUN_CKPT_BLOCK, within the file)
 * and checksum; the size equals @want_size; XXH64 of the whole file equals
 * @want_xxh64. Memory: one buffer of the file's size; payloads are compacted
 * in place.
 *
 * On success *@data is a malloc'd buffer (never NULL; the caller frees it) of
 * *@len bytes, the payloads concatenated. On failure *@data is NULL, *@len 0,
 * and @why (may be NULL) holds one line naming the block and file offset, e.g.
 * "block 3 at offset 3145776: checksum mismatch (stored 0x…, computed 0x…)",
 * "truncated block header at offset 5242960: 7 of 16 bytes (size 5242967 !=
 * 5767264 in MANIFEST)", "size 100 != 4096 in MANIFEST"; for I/O errors it
 * names the call and the file.
 *
 * Return: 0; -EBADMSG for any mismatch; -ENOENT (no such file); -ENOMEM;
 * another -errno of open/fstat/read.
 */
int shmrun_ckpt_read_file(int dirfd, const char *name, uint64_t want_size, uint64_t want_xxh64,
			  void **data, size_t *len, char *why, size_t whylen);

#endif /* SHMRUN_RT_CKPT_IO_H */
