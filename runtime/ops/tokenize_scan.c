/*
 * runtime/ops/tokenize_scan.c: find the tokens ([A-Za-z0-9]+ runs) of a span
 * of bytes without a branch per byte.
 *
 * The span is cut into 64-byte blocks. classify() turns a block into a
 * 64-bit mask, bit i set when byte i is a token byte, and writes the block
 * lower-cased when asked. Tokens are the runs of set bits, found from the
 * mask's edges:
 *
 *     m        = ..0011100111..   token bytes of this block (bit 0 = byte 0)
 *     prev     = m << 1 | carry   carry: the previous block's last byte was one
 *     starts   = m & ~prev        a token begins at each set bit
 *     ends     = ~m & prev        a token ended just before each set bit
 *
 * A token open at the start of a block (carry) takes the block's first end;
 * after that starts and ends alternate, so the k-th start pairs with the k-th
 * end, or stays open into the next block when the ends run out. The costs
 * are per block (classification) and per token (two count-trailing-zeros),
 * never per byte; the branches taken follow the tokens.
 *
 * Classification. SSE2 (shmrun_tok_scan_sse2(), x86-64 always): 16 bytes at a
 * time, digits by one unsigned range compare (c - '0' < 10, done as a signed
 * compare after adding 0x80 - '0'), letters by one on c | 0x20 (which maps
 * A-Z onto a-z and nothing else into a-z); movemask gives 16 bits. The
 * lower-cased copy is c | (letter & 0x20): A-Z become a-z, everything else,
 * a-z included, stays. Scalar (shmrun_tok_scan_scalar()): the same tests in
 * integer arithmetic, a byte at a time but without branches.
 *
 * Invariants: nothing outside p[0, n) is read: the last, short block is
 * classified 16 bytes at a time, and its last 1..15 bytes by loading the last
 * 16 bytes of the span again and shifting the known bits out (byte by byte
 * when the whole span is shorter than 16); bits past the end are 0, so a
 * token running to the end of the span ends there. Nothing outside
 * lower[0, n) is written; a
 * token is returned only whole, and *end is n or the start of the first
 * token not returned, so a caller resuming at *end sees the same tokens.
 *
 * Designs rejected:
 *  - a table lookup and a branch per byte (the tokenizer until issue 10):
 *    about three mispredicted branches per token on prose.
 *  - scanning one record at a time when records are lines of one buffer:
 *    a call, a short tail and a batch of emits per line, 2.3-2.8x slower
 *    than spans on the benchmark's corpus; the span (shmrun_tok_span())
 *    scans many lines in one pass when the bytes between them are
 *    separators, which is what makes it exact.
 *  - SSE4.2 PCMPISTRM ranges or AVX2: not on every x86-64 (the build does not
 *    dispatch at run time), and the scan is not the bottleneck after SSE2.
 *  - reading whole 16-byte vectors past the end when they stay within the
 *    page: faster tails, but reads outside p[0, n) that sanitizers rightly
 *    report.
 *  - copying the short last block into a zeroed local one (the first
 *    version): two variable-length memcpy and store-forwarding stalls on
 *    every line; the overlapping load was as fast on one-line records
 *    (661-825 against 662-683 MB/s in CPU time) and needs no copy.
 *
 * Source of the idea: the bitmask-and-ctz run finding of simdjson's
 * structural indexing (Langdale & Lemire, "Parsing Gigabytes of JSON per
 * Second", 2019), and the SSE2 reference word count in
 * tools/bench/bench_wordcount.c, written independently of this file.
 */
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "tokenize_scan.h"

#define BLOCK 64u

#define ALWAYS_INLINE inline __attribute__((always_inline))

/* classify_bytes() - the token-byte mask of the @k <= 64 bytes at @p (bit i
 * for byte i); with @lowering, the @k bytes lower-cased into @lower (which may
 * be @p). Arithmetic, no table and no branch on the byte. */
static ALWAYS_INLINE uint64_t classify_bytes(const unsigned char *p, size_t k, unsigned char *lower,
					     bool lowering)
{
	uint64_t m = 0;

	for (size_t i = 0; i < k; i++) {
		unsigned c = p[i];
		unsigned letter = (unsigned)((c | 0x20) - 'a') < 26u;
		unsigned digit = (unsigned)(c - '0') < 10u;

		m |= (uint64_t)(letter | digit) << i;
		if (lowering)
			lower[i] = (unsigned char)(c | letter << 5);
	}
	return m;
}

#if defined(__SSE2__)
static ALWAYS_INLINE uint64_t classify16_sse2(const unsigned char *p, unsigned char *lower,
					      bool lowering)
{
	__m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
	__m128i d = _mm_cmplt_epi8(_mm_add_epi8(v, _mm_set1_epi8((char)(0x80 - '0'))),
				   _mm_set1_epi8((char)(-128 + 10)));
	__m128i l = _mm_or_si128(v, _mm_set1_epi8(0x20));
	__m128i a = _mm_cmplt_epi8(_mm_add_epi8(l, _mm_set1_epi8((char)(0x80 - 'a'))),
				   _mm_set1_epi8((char)(-128 + 26)));

	if (lowering)
		_mm_storeu_si128((__m128i *)(void *)lower,
				 _mm_or_si128(v, _mm_and_si128(a, _mm_set1_epi8(0x20))));
	return (uint32_t)_mm_movemask_epi8(_mm_or_si128(d, a));
}

static ALWAYS_INLINE uint64_t classify_sse2(const unsigned char *p, unsigned char *lower,
					    bool lowering)
{
	/* no arithmetic on @lower when it is NULL (!@lowering) */
	uint64_t m0 = classify16_sse2(p, lower, lowering);
	uint64_t m1 = classify16_sse2(p + 16, lowering ? lower + 16 : NULL, lowering);
	uint64_t m2 = classify16_sse2(p + 32, lowering ? lower + 32 : NULL, lowering);
	uint64_t m3 = classify16_sse2(p + 48, lowering ? lower + 48 : NULL, lowering);

	return m0 | m1 << 16 | m2 << 32 | m3 << 48;
}
#endif

/*
 * classify() - the token-byte mask of p[base, n) (at most 64 bytes: bits
 * beyond n - base are 0), lower-cased into lower[base, n) with @lowering,
 * with the classifier @simd names (scalar without SSE2). Only p[0, n) is
 * read: a short last piece of 1..15 bytes is classified by loading the last
 * 16 bytes of p[0, n) (they overlap bytes already classified, whose bits are
 * shifted out, and whose lower-cased copy is written again, the same) or,
 * when n < 16, byte by byte.
 */
static ALWAYS_INLINE uint64_t classify(const unsigned char *p, size_t base, size_t n,
				       unsigned char *lower, bool lowering, bool simd)
{
	size_t left = n - base, q = 0;
	uint64_t m = 0;

#if defined(__SSE2__)
	if (simd) {
		if (left >= BLOCK)
			return classify_sse2(p + base, lowering ? lower + base : NULL, lowering);
		for (; left - q >= 16; q += 16)
			m |= classify16_sse2(p + base + q, lowering ? lower + base + q : NULL,
					     lowering)
			     << q;
		if (q == left)
			return m;
		if (n >= 16)
			return m | (classify16_sse2(p + n - 16, lowering ? lower + n - 16 : NULL,
						    lowering) >>
				    (16 - (left - q)))
				       << q;
	}
#endif
	(void)simd;
	if (left > BLOCK)
		left = BLOCK;
	return m |
	       classify_bytes(p + base + q, left - q, lowering ? lower + base + q : NULL, lowering)
		   << q;
}

/*
 * The scan itself, instantiated per classifier (@simd) and per @lowering
 * (both constants after inlining, so the block loop has no test of them).
 */
static ALWAYS_INLINE size_t scan(const unsigned char *p, size_t n, unsigned char *lower,
				 struct shmrun_tok *tok, size_t max, size_t *end, bool lowering,
				 bool simd)
{
	size_t ntok = 0, open_at = 0, base;
	bool open = false; /* a token started at open_at is not closed yet */
	uint64_t carry = 0;

	for (base = 0; base < n; base += BLOCK) {
		uint64_t m, prev, s, e;

		m = classify(p, base, n, lower, lowering, simd);
		prev = m << 1 | carry;
		s = m & ~prev;
		e = ~m & prev;
		carry = m >> 63;
		if (open && e) {
			size_t en = base + (size_t)__builtin_ctzll(e);

			tok[ntok++] =
			    (struct shmrun_tok){(uint32_t)open_at, (uint32_t)(en - open_at)};
			e &= e - 1;
			open = false;
		}
		while (s) {
			size_t st = base + (size_t)__builtin_ctzll(s);

			s &= s - 1;
			if (ntok == max) {
				*end = st;
				return ntok;
			}
			if (e) {
				size_t en = base + (size_t)__builtin_ctzll(e);

				e &= e - 1;
				tok[ntok++] =
				    (struct shmrun_tok){(uint32_t)st, (uint32_t)(en - st)};
			} else {
				open_at = st;
				open = true;
			}
		}
	}
	if (open) /* ran to the end of a span that is a whole number of blocks */
		tok[ntok++] = (struct shmrun_tok){(uint32_t)open_at, (uint32_t)(n - open_at)};
	*end = n;
	return ntok;
}

size_t shmrun_tok_scan_scalar(const unsigned char *p, size_t n, unsigned char *lower,
			      struct shmrun_tok *tok, size_t max, size_t *end)
{
	if (lower)
		return scan(p, n, lower, tok, max, end, true, false);
	return scan(p, n, NULL, tok, max, end, false, false);
}

#if defined(__SSE2__)
size_t shmrun_tok_scan_sse2(const unsigned char *p, size_t n, unsigned char *lower,
			    struct shmrun_tok *tok, size_t max, size_t *end)
{
	if (lower)
		return scan(p, n, lower, tok, max, end, true, true);
	return scan(p, n, NULL, tok, max, end, false, true);
}
#endif

size_t shmrun_tok_scan(const unsigned char *p, size_t n, unsigned char *lower,
		       struct shmrun_tok *tok, size_t max, size_t *end)
{
#if defined(__SSE2__)
	return shmrun_tok_scan_sse2(p, n, lower, tok, max, end);
#else
	return shmrun_tok_scan_scalar(p, n, lower, tok, max, end);
#endif
}

uint32_t shmrun_tok_span(const struct shmrun_record *recs, uint32_t n, size_t max_bytes,
			 const unsigned char **start, size_t *len)
{
	const unsigned char *first = recs[0].value;
	uintptr_t lo, hi; /* the span so far: [lo, hi) */
	int64_t t = recs[0].event_time_ns;
	uint32_t i;

	if (recs[0].value_len == 0) {
		for (i = 1; i < n && recs[i].value_len == 0; i++)
			;
		*start = NULL;
		*len = 0;
		return i;
	}
	lo = (uintptr_t)first;
	hi = lo + recs[0].value_len;
	for (i = 1; i < n; i++) {
		const unsigned char *v = recs[i].value;
		uintptr_t at = (uintptr_t)v, gap = at - hi;

		if (recs[i].value_len == 0)
			continue;
		if (recs[i].event_time_ns != t || at <= hi || gap > SHMRUN_TOK_MAX_GAP ||
		    recs[i].value_len > max_bytes || at + recs[i].value_len - lo > max_bytes)
			break;
		for (uintptr_t k = 1; k <= gap; k++)
			if (shmrun_tok_is_word(v[-(ptrdiff_t)k]))
				goto done;
		hi = at + recs[i].value_len;
	}
done:
	*start = first;
	*len = (size_t)(hi - lo);
	return i;
}
