/*
 * runtime/ops/tokenize_scan.h: the tokenizer's scanner (private to
 * runtime/ops; the tokenize operator and tests/unit/check_tokenize.c use it).
 *
 * A token is a maximal run of ASCII [A-Za-z0-9]; every other byte (NUL, CR,
 * bytes >= 0x80, ...) separates tokens, and so do the start and the end of
 * the scanned bytes. shmrun_tok_scan() finds the tokens of a whole span of
 * bytes at once (a line, or many lines of one read buffer: see
 * shmrun_tok_span()) and can write the span lower-cased on the way.
 *
 * Thread safety: every function here is pure (no state), callable from any
 * thread.
 */
#ifndef SHMRUN_OPS_TOKENIZE_SCAN_H
#define SHMRUN_OPS_TOKENIZE_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shmrun/operator.h"

/** One token: bytes [off, off + len) of the scanned span; len >= 1. */
struct shmrun_tok {
	uint32_t off; /**< bytes from the start of the span */
	uint32_t len; /**< bytes */
};

/*
 * The largest separator gap shmrun_tok_span() bridges between two records,
 * bytes: 1 is a '\n', more are blank lines in between ("\n\n"), whose empty
 * records emit nothing. Kept far below a page, so that every gap byte lies
 * on the page of the byte before it or of the byte after it (see
 * shmrun_tok_span()).
 */
#define SHMRUN_TOK_MAX_GAP 4u

/* shmrun_tok_is_word() - whether @c is a token byte ([A-Za-z0-9]). Branch-free. */
static inline bool shmrun_tok_is_word(unsigned char c)
{
	return (unsigned)(c - '0') < 10u || (unsigned)((c | 0x20) - 'a') < 26u;
}

/*
 * shmrun_tok_scan() - the tokens of @p[0, @n), in order.
 * @p:     the bytes; only p[0, n) is ever read (none when @n is 0; @p may
 *         then be NULL).
 * @n:     bytes, at most UINT32_MAX (offsets are 32-bit).
 * @lower: NULL, or room for @n bytes: p[0, *@end) is written there with
 *         A-Z lower-cased (every other byte as it is), so that a token's
 *         lower-cased bytes are lower + off. Bytes of lower[*end, n) may be
 *         written too (with the same rule) and are to be ignored. It must
 *         not overlap @p, except that @lower == @p (in place) is allowed.
 * @tok:   room for @max tokens; receives the tokens found.
 * @max:   tokens wanted at most; 0 finds none (and *@end stops at the
 *         first token's start).
 * @end:   receives the bytes fully scanned, in [0, n]: @n when every token
 *         of p[0, n) is in @tok, else the offset of the first token not
 *         returned (the one that did not fit). A token never straddles it,
 *         so scanning resumes correctly at p + *end (offsets are then
 *         relative to p + *end); with @max >= 1 and @n >= 1, *@end >= 1,
 *         so resuming always progresses.
 *
 * Uses shmrun_tok_scan_sse2() where the compiler targets SSE2 (always on
 * x86-64), else shmrun_tok_scan_scalar(); both give the same result.
 *
 * Return: tokens written to @tok, 0..@max. No error cases.
 */
size_t shmrun_tok_scan(const unsigned char *p, size_t n, unsigned char *lower,
		       struct shmrun_tok *tok, size_t max, size_t *end);

/*
 * shmrun_tok_scan_scalar() - shmrun_tok_scan() in portable C: a 64-bit mask
 * of token bytes per 64-byte block built with arithmetic (no table, no
 * branch per byte), runs found from its edges as the SSE2 version does.
 * Always compiled, so tests can compare both. Same parameters and return.
 */
size_t shmrun_tok_scan_scalar(const unsigned char *p, size_t n, unsigned char *lower,
			      struct shmrun_tok *tok, size_t max, size_t *end);

#if defined(__SSE2__)
/*
 * shmrun_tok_scan_sse2() - shmrun_tok_scan() with SSE2: each 16 bytes are
 * classified by range compares into a movemask, four of them into a 64-bit
 * mask per block. Same parameters and return.
 */
size_t shmrun_tok_scan_sse2(const unsigned char *p, size_t n, unsigned char *lower,
			    struct shmrun_tok *tok, size_t max, size_t *end);
#endif

/*
 * shmrun_tok_span() - how many of @recs[0, @n) can be scanned as one span of
 * bytes, with exactly the tokens that scanning each record alone would give,
 * all with the event time of @recs[0].
 * @recs:      records in order (borrowed; not changed).
 * @n:         records, >= 1.
 * @max_bytes: the span may grow past @recs[0] only while it stays within
 *             this many bytes (a bound for the caller's lower-case buffer);
 *             the first record is always taken whole.
 * @start:     receives the span's first byte (NULL when *@len is 0).
 * @len:       receives the span's length, bytes (0: nothing to scan).
 *
 * The span starts with @recs[0]'s value and takes the next record while:
 *  - it is empty (it has no token: it is skipped, whatever its pointer and
 *    event time); or
 *  - it has @recs[0]'s event time, and its value starts 1 to
 *    SHMRUN_TOK_MAX_GAP bytes after the end of the last non-empty value
 *    taken, and each of those gap bytes is a separator (so no token can run
 *    from one record into the next: lines of one read buffer split at '\n').
 * The gap bytes are read: they lie between two bytes of records (the last of
 * one value, the first of the next), less than a page apart, so they are
 * readable. The caller must hold them unchanged while it scans the span (as
 * it holds the records: e.g. lines of one buffer, records of one frame).
 * When @recs[0] is empty, the span is the run of leading empty records and
 * *@len is 0.
 *
 * Return: records the span covers, 1..@n.
 */
uint32_t shmrun_tok_span(const struct shmrun_record *recs, uint32_t n, size_t max_bytes,
			 const unsigned char **start, size_t *len);

#endif /* SHMRUN_OPS_TOKENIZE_SCAN_H */
