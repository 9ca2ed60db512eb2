/*
 * runtime/ops/framer.h: cutting a byte stream into records, for the sources
 * that read one a piece at a time (stdin_source, socket_source).
 *
 * Two framings: FRAMER_LINE, a record per line without its '\n' (a final line
 * without '\n' is a record too, taken with framer_rest() at the end of the
 * stream); FRAMER_LENGTH, a 4-byte big-endian length and then that many bytes.
 * The bytes live in one buffer per stream that grows up to what the longest
 * allowed record needs (max + 4 bytes) and no further, so a stream that never
 * sends a '\n' costs a bounded amount of memory and is refused with
 * -EMSGSIZE instead.
 *
 * Records returned point into the buffer: they stay valid until the next
 * framer_room() (which may move the unread bytes to its start) or
 * framer_free(). Hand them on (shmrun_emit_batch()) before asking for room.
 */
#ifndef SHMRUN_OPS_FRAMER_H
#define SHMRUN_OPS_FRAMER_H

#include <stddef.h>
#include <stdint.h>

enum framer_mode {
	FRAMER_LINE = 0,
	FRAMER_LENGTH = 1,
};

struct framer {
	unsigned char *buf;
	size_t cap;    /* bytes allocated */
	size_t lo, hi; /* unread bytes are buf[lo, hi) */
	size_t scan;   /* FRAMER_LINE: no '\n' in buf[lo, scan) */
	uint32_t max;  /* longest record, bytes */
	enum framer_mode mode;
};

/*
 * framer_init() - an empty framer of @mode for records of at most @max bytes,
 * starting with a buffer of min(@initial, what @max needs) bytes.
 * Return: 0; -ENOMEM.
 */
int framer_init(struct framer *f, enum framer_mode mode, uint32_t max, size_t initial);

/* framer_free() - release the buffer. Safe on a zeroed or freed framer. */
void framer_free(struct framer *f);

/*
 * framer_room() - where the next read may put bytes: *@at, and how many.
 * Moves the unread bytes to the buffer's start when that makes room, and
 * grows the buffer (doubling, at most to max + 4 bytes) when it is full:
 * records framer_next() returned before are invalid afterwards.
 * Return: bytes of room, >= 1 when framer_next() last returned 0; 0 only if
 * called while a whole record or an over-long one is still unread; -ENOMEM
 * (as a negative ssize-like value in a long).
 */
long framer_room(struct framer *f, unsigned char **at);

/* framer_fill() - @n bytes were read into the room framer_room() gave. */
static inline void framer_fill(struct framer *f, size_t n)
{
	f->hi += n;
}

/*
 * framer_next() - the next whole record: *@v, *@len (pointing into the buffer).
 * Return: 1; 0 if no whole record is buffered; -EMSGSIZE if the next record
 * is longer than max bytes (FRAMER_LINE: max bytes without a '\n';
 * FRAMER_LENGTH: a length prefix above max). After -EMSGSIZE the framer's
 * content is meaningless: drop the stream (or framer_reset()).
 */
int framer_next(struct framer *f, const void **v, uint32_t *len);

/*
 * framer_rest() - at the end of the stream, what is left: FRAMER_LINE, the
 * final line without '\n' as a record (1), or nothing (0); FRAMER_LENGTH, 0
 * if nothing is left, -EPROTO if a frame was cut short (*@len: the bytes
 * left). Empties the framer.
 */
int framer_rest(struct framer *f, const void **v, uint32_t *len);

/* framer_pending() - bytes buffered and not yet returned as a record. */
static inline size_t framer_pending(const struct framer *f)
{
	return f->hi - f->lo;
}

/* framer_reset() - drop every buffered byte (keeps the buffer). */
static inline void framer_reset(struct framer *f)
{
	f->lo = f->hi = f->scan = 0;
}

#endif /* SHMRUN_OPS_FRAMER_H */
