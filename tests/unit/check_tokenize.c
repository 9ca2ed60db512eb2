/*
 * tests/unit/check_tokenize.c: the tokenizer (runtime/ops/tokenize_scan.c and
 * runtime/ops/tokenize.c, issue 10 item 4) against a trivial reference.
 *
 * The reference is the token rule written the plainest way: a byte loop, a
 * token is a maximal run of [A-Za-z0-9] (spelled out as ranges, not through
 * shmrun_tok_is_word()), lower-cased by c + 32 for A-Z.
 *
 * TCases:
 *  - every_byte_value: each of the 256 bytes alone and between letters.
 *  - scanners_equal_reference: the SSE2 scanner (where built), the scalar one
 *    and the reference agree on tokens, *end and the lower-cased copy, on
 *    random inputs of every length 0..300 at every alignment 0..15, in
 *    buffers that end exactly where the input ends (so an over-read is a
 *    sanitizer report) and with a guard after the lower-case buffer (an
 *    over-write is a failure); inputs of all byte values and inputs made of
 *    long runs that cross the 16- and 64-byte block edges; 300 random inputs
 *    of up to 5000 bytes.
 *  - max_tokens_and_resume: with max = 0..5 tokens per call, resuming at
 *    *end gives the same tokens; *end is n or the next token's start.
 *  - long_tokens: one token of 300 KB, tokens ending exactly at a block edge
 *    and at the end, and in-place lower-casing (lower == p).
 *  - span_rules: shmrun_tok_span() takes lines of one buffer split by
 *    separators, skips empty records, and stops at a gap with a token byte
 *    (the regression a blind join would be: "abc" "x" "def" -> "abcxdef"),
 *    at records back to back without a gap, at another event time, past
 *    SHMRUN_TOK_MAX_GAP and past max_bytes.
 *  - batch_equals_process: the tokenize operator's process_batch() and
 *    process() record by record emit the same records (key, value, event
 *    time, order) as the reference, through a real shmrun_emit_batch() into
 *    a capturing operator on a forward edge, on lines of one buffer (CRLF,
 *    NUL, bytes >= 0x80, blank lines, a 300 KB line, more tokens than one
 *    emit batch holds), on records whose gap byte is a letter, on records
 *    back to back, on mixed event times, with lowercase true and false.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "channel.h"
#include "internal.h"
#include "ops/tokenize_scan.h"
#include "shmrun/job.h"
#include "shmrun/operator.h"
#include "task.h"
#include "worker.h"

/* ---- reference and helpers ---------------------------------------------- */

static bool ref_word(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static unsigned char ref_lower(unsigned char c)
{
	return c >= 'A' && c <= 'Z' ? (unsigned char)(c + 32) : c;
}

/* The tokens of p[0, n) into tok (room for n tokens). Return: how many. */
static size_t ref_scan(const unsigned char *p, size_t n, struct shmrun_tok *tok)
{
	size_t k = 0;

	for (size_t i = 0; i < n;) {
		size_t s;

		while (i < n && !ref_word(p[i]))
			i++;
		s = i;
		while (i < n && ref_word(p[i]))
			i++;
		if (i > s)
			tok[k++] = (struct shmrun_tok){(uint32_t)s, (uint32_t)(i - s)};
	}
	return k;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Random bytes: mode 0 any value; 1 mostly letters and digits (long runs);
 * 2 mostly separators of every kind (NUL, CR, LF, >= 0x80) and short runs. */
static void fill(unsigned char *p, size_t n, int mode)
{
	static const char word[] = "abcXYZ019qQ";
	static const unsigned char sep[] = {0,	 '\r', '\n', ' ', 0x80, 0xff,
					    '@', '[',  '`',  '{', '/',	':'};

	for (size_t i = 0; i < n; i++) {
		uint64_t r = rnd();

		if (mode == 0)
			p[i] = (unsigned char)r;
		else if (mode == 1)
			p[i] = (r >> 8) % 16 ? (unsigned char)word[r % 11] : sep[(r >> 16) % 12];
		else
			p[i] = (r >> 8) % 3 ? sep[r % 12] : (unsigned char)word[(r >> 16) % 11];
	}
}

typedef size_t (*scan_fn)(const unsigned char *, size_t, unsigned char *, struct shmrun_tok *,
			  size_t, size_t *);

static const struct {
	const char *name;
	scan_fn fn;
} scanners[] = {
    {"default", shmrun_tok_scan},
    {"scalar", shmrun_tok_scan_scalar},
#if defined(__SSE2__)
    {"sse2", shmrun_tok_scan_sse2},
#endif
};
#define NSCANNERS (sizeof(scanners) / sizeof(scanners[0]))

#define GUARD 32

/*
 * EXPECT() - ck_assert_msg() for the hot loops, which check millions of
 * values: a passing ck_assert records its location with the runner (under
 * CK_FORK a write per call: 30 s of system time for this file); this checks
 * first and calls into Check only to fail.
 */
#define EXPECT(cond, ...)                                                                          \
	do {                                                                                       \
		if (!(cond))                                                                       \
			ck_abort_msg(__VA_ARGS__);                                                 \
	} while (0)

/*
 * Check every scanner on src[0, n) placed at alignment @align in a buffer
 * that ends where the input ends, with and without lower-casing.
 */
static void check_all(const unsigned char *src, size_t n, size_t align)
{
	unsigned char *buf = malloc(align + n + 1), *p = buf + align;
	unsigned char *lower = malloc(n + GUARD);
	struct shmrun_tok *want = malloc((n + 1) * sizeof(*want));
	struct shmrun_tok *got = malloc((n + 1) * sizeof(*got));
	size_t nwant;

	ck_assert_ptr_nonnull(buf);
	ck_assert_ptr_nonnull(lower);
	memcpy(p, src, n);
	nwant = ref_scan(p, n, want);
	for (size_t s = 0; s < NSCANNERS; s++) {
		for (int lowering = 0; lowering < 2; lowering++) {
			size_t end = (size_t)-1, k;

			memset(lower, 0xa5, n + GUARD);
			k = scanners[s].fn(n ? p : NULL, n, lowering ? lower : NULL, got, n + 1,
					   &end);
			EXPECT(k == nwant, "%s: %zu tokens, want %zu (n %zu, align %zu)",
			       scanners[s].name, k, nwant, n, align);
			EXPECT(end == n, "%s: end %zu, n %zu", scanners[s].name, end, n);
			for (size_t i = 0; i < k; i++) {
				EXPECT(got[i].off == want[i].off && got[i].len == want[i].len,
				       "%s: token %zu is [%u,+%u), want [%u,+%u) (n %zu)",
				       scanners[s].name, i, got[i].off, got[i].len, want[i].off,
				       want[i].len, n);
			}
			for (size_t i = 0; lowering && i < n; i++)
				EXPECT(lower[i] == ref_lower(p[i]), "%s: lower[%zu] = %#x for %#x",
				       scanners[s].name, i, lower[i], p[i]);
			for (size_t i = 0; i < GUARD; i++)
				EXPECT(lower[n + i] == 0xa5, "%s: wrote lower[%zu], n %zu",
				       scanners[s].name, n + i, n);
		}
	}
	free(got);
	free(want);
	free(lower);
	free(buf);
}

/* ---- scanners ----------------------------------------------------------- */

START_TEST(every_byte_value)
{
	for (unsigned c = 0; c < 256; c++) {
		unsigned char one = (unsigned char)c, three[3] = {'a', (unsigned char)c, 'B'};
		struct shmrun_tok tok[4];
		unsigned char lower[3];
		size_t end;

		for (size_t s = 0; s < NSCANNERS; s++) {
			size_t k = scanners[s].fn(&one, 1, lower, tok, 4, &end);

			EXPECT(k == ref_word(one) && end == 1 && lower[0] == ref_lower(one),
			       "%s: byte %#x alone: %zu tokens, end %zu, lower %#x",
			       scanners[s].name, c, k, end, lower[0]);
			k = scanners[s].fn(three, 3, lower, tok, 4, &end);
			EXPECT(k == (ref_word(three[1]) ? 1u : 2u), "%s: byte %#x: %zu tokens",
			       scanners[s].name, c, k);
			EXPECT(tok[0].off == 0 && tok[k - 1].off + tok[k - 1].len == 3 &&
				   lower[2] == 'b' && lower[1] == ref_lower(three[1]),
			       "%s: byte %#x between letters", scanners[s].name, c);
		}
	}
}
END_TEST

START_TEST(scanners_equal_reference)
{
	unsigned char src[300];

	for (int mode = 0; mode < 3; mode++)
		for (size_t n = 0; n <= 300; n++)
			for (size_t align = 0; align < 16; align++) {
				fill(src, n, mode);
				check_all(src, n, align);
			}
	/* runs that end exactly at, one before and one after each block edge */
	for (size_t edge = 16; edge <= 256; edge += 16)
		for (int d = -1; d <= 1; d++) {
			memset(src, 'Q', 300);
			src[edge + (size_t)d] = ' ';
			check_all(src, 300, (size_t)d + 1);
			check_all(src, edge + (size_t)d + 1, 0);
			check_all(src, edge, 3);
		}
	/* longer inputs: many blocks, runs across every block edge */
	for (int round = 0; round < 300; round++) {
		unsigned char big[5000];
		size_t n = rnd() % sizeof(big);

		fill(big, n, round % 3);
		check_all(big, n, (size_t)round % 16);
	}
}
END_TEST

START_TEST(max_tokens_and_resume)
{
	unsigned char src[300];
	struct shmrun_tok want[301], got[8];

	for (int round = 0; round < 2000; round++) {
		size_t n = rnd() % 301, nwant;

		fill(src, n, 1 + round % 2);
		nwant = ref_scan(src, n, want);
		for (size_t s = 0; s < NSCANNERS; s++)
			for (size_t max = 0; max <= 5; max++) {
				const char *name = scanners[s].name;
				size_t pos = 0, seen = 0, calls = 0;

				while (pos < n && calls++ < n + 2) {
					size_t end, k = scanners[s].fn(src + pos, n - pos, NULL,
								       got, max, &end);

					EXPECT(k <= max && end <= n - pos,
					       "%s max %zu: %zu tokens, end %zu of %zu", name, max,
					       k, end, n - pos);
					for (size_t i = 0; i < k; i++, seen++)
						EXPECT(seen < nwant &&
							   pos + got[i].off == want[seen].off &&
							   got[i].len == want[seen].len,
						       "%s max %zu: token %zu differs", name, max,
						       seen);
					if (pos + end < n) /* stopped at the next token's start */
						EXPECT(seen < nwant && want[seen].off == pos + end,
						       "%s max %zu: end %zu is no token start",
						       name, max, pos + end);
					if (max == 0) {
						EXPECT(k == 0 &&
							   pos + end == (nwant ? want[0].off : n),
						       "%s max 0: %zu tokens, end %zu", name, k,
						       end);
						break;
					}
					EXPECT(end >= 1, "%s max %zu: no progress", name, max);
					pos += end;
				}
				if (max)
					EXPECT(seen == nwant, "%s max %zu: %zu tokens, want %zu",
					       name, max, seen, nwant);
			}
	}
}
END_TEST

START_TEST(long_tokens)
{
	size_t n = 300 << 10;
	unsigned char *p = malloc(n), *lower = malloc(n);
	struct shmrun_tok tok[4];

	ck_assert_ptr_nonnull(p);
	ck_assert_ptr_nonnull(lower);
	for (size_t s = 0; s < NSCANNERS; s++) {
		size_t end, k;

		memset(p, 'X', n);
		k = scanners[s].fn(p, n, lower, tok, 4, &end);
		ck_assert_uint_eq(k, 1);
		ck_assert_uint_eq(tok[0].off, 0);
		ck_assert_uint_eq(tok[0].len, n);
		ck_assert_uint_eq(end, n);
		ck_assert(lower[0] == 'x' && lower[n - 1] == 'x');
		/* a token ending exactly at a block edge, another at the end */
		p[64] = '\n';
		k = scanners[s].fn(p + 1, 128 - 1, NULL, tok, 4, &end);
		ck_assert_uint_eq(k, 2);
		ck_assert_uint_eq(tok[0].len, 63);
		ck_assert_uint_eq(tok[1].off, 64);
		ck_assert_uint_eq(tok[1].len, 63);
		/* in place */
		k = scanners[s].fn(p, 200, p, tok, 4, &end);
		ck_assert_uint_eq(k, 2);
		ck_assert(p[0] == 'x' && p[63] == 'x' && p[64] == '\n' && p[199] == 'x');
		ck_assert(p[200] == 'X');
	}
	free(lower);
	free(p);
}
END_TEST

/* ---- spans -------------------------------------------------------------- */

/* Records of buf split at '\n' (each line without it), as file_source emits them. */
static uint32_t lines(const char *buf, size_t len, struct shmrun_record *recs, uint32_t max)
{
	uint32_t n = 0;
	size_t s = 0;

	for (size_t i = 0; i <= len && n < max; i++)
		if (i == len || buf[i] == '\n') {
			if (i == len && s == len)
				break; /* no line after a final '\n' */
			recs[n++] = (struct shmrun_record){.value = buf + s,
							   .value_len = (uint32_t)(i - s)};
			s = i + 1;
		}
	return n;
}

START_TEST(span_rules)
{
	static const char text[] = "one two\n\nthree\r\n\n\nfour\n\n\n\n\nfive";
	static const char joined[] = "abcxdef";
	struct shmrun_record r[16];
	const unsigned char *p;
	size_t len;
	uint32_t n = lines(text, sizeof(text) - 1, r, 16), k;

	ck_assert_uint_eq(n, 11);
	/* blank lines (gaps of 2 and 3 bytes) are bridged, 5 are not */
	k = shmrun_tok_span(r, n, 1 << 20, &p, &len);
	ck_assert_uint_eq(k, 10); /* "one two" .. "four" and the empty records after it */
	ck_assert_ptr_eq(p, text);
	ck_assert_uint_eq(len, (size_t)(strstr(text, "four") + 4 - text));
	k = shmrun_tok_span(r + 6, n - 6, 1 << 20, &p, &len);
	ck_assert_uint_eq(k, 4); /* starting at an empty record: the run of them */
	ck_assert_ptr_null(p);
	ck_assert_uint_eq(len, 0);
	k = shmrun_tok_span(r + 10, 1, 1 << 20, &p, &len);
	ck_assert_uint_eq(k, 1);
	ck_assert_uint_eq(len, 4);
	/* max_bytes: the first record whole, then nothing that passes it */
	k = shmrun_tok_span(r, n, 3, &p, &len);
	ck_assert_uint_eq(k, 2); /* "one two" and the empty record after it */
	ck_assert_uint_eq(len, 7);
	k = shmrun_tok_span(r, n, 14, &p, &len); /* "one two\n\nthree\r" is 15 */
	ck_assert_uint_eq(k, 2);
	k = shmrun_tok_span(r, n, 15, &p, &len);
	ck_assert_uint_eq(k, 5); /* up to "four", which does not fit */
	ck_assert_uint_eq(len, 15);
	/* a letter in the gap: never joined */
	r[0] = (struct shmrun_record){.value = joined, .value_len = 3};
	r[1] = (struct shmrun_record){.value = joined + 4, .value_len = 3};
	ck_assert_uint_eq(shmrun_tok_span(r, 2, 1 << 20, &p, &len), 1);
	ck_assert_uint_eq(len, 3);
	/* back to back, no gap byte at all */
	r[1].value = joined + 3;
	ck_assert_uint_eq(shmrun_tok_span(r, 2, 1 << 20, &p, &len), 1);
	/* another event time */
	n = lines("a\nb", 3, r, 16);
	r[1].event_time_ns = 5;
	ck_assert_uint_eq(shmrun_tok_span(r, n, 1 << 20, &p, &len), 1);
	r[0].event_time_ns = 5;
	ck_assert_uint_eq(shmrun_tok_span(r, n, 1 << 20, &p, &len), 2);
	ck_assert_uint_eq(len, 3);
	/* before the previous record: never joined */
	r[1] = (struct shmrun_record){.value = "b", .value_len = 1, .event_time_ns = 5};
	r[0] = r[1];
	ck_assert_uint_eq(shmrun_tok_span(r, 2, 1 << 20, &p, &len), 1);
}
END_TEST

/* ---- the operator ------------------------------------------------------- */

/* What the capturing operator received: "key|value|time\n" per record. */
struct capture {
	char *text;
	size_t len, cap;
};

static void cap_add(struct capture *c, const void *key, size_t key_len, const void *val,
		    size_t val_len, int64_t time)
{
	char tail[64];
	int t = snprintf(tail, sizeof(tail), "|%lld\n", (long long)time);
	size_t need = c->len + key_len + val_len + 1 + (size_t)t + 1;

	if (need > c->cap) {
		c->cap = need * 2;
		c->text = realloc(c->text, c->cap);
		ck_assert_ptr_nonnull(c->text);
	}
	memcpy(c->text + c->len, key, key_len);
	c->len += key_len;
	c->text[c->len++] = '|';
	memcpy(c->text + c->len, val, val_len);
	c->len += val_len;
	memcpy(c->text + c->len, tail, (size_t)t);
	c->len += (size_t)t;
	c->text[c->len] = '\0';
}

static int capture_process(struct shmrun_task *task, void *state, const struct shmrun_record *rec)
{
	(void)task;
	cap_add(state, rec->key, rec->key_len, rec->value, rec->value_len, rec->event_time_ns);
	return 0;
}

static const struct shmrun_operator capture_op = {
    .name = "capture",
    .process = capture_process,
    .flags = SHMRUN_OP_SINK,
};

/*
 * Run tokenize (lowercase @lc) over recs[0, n): with process() per record
 * when !@batch, else with process_batch() over slices of @slice records.
 * Return: the capture's text (malloc'd).
 */
static char *run_tokenize(const struct shmrun_record *recs, uint32_t n, bool lc, bool batch,
			  uint32_t slice)
{
	const struct shmrun_operator *op = shmrun_operator_find("tokenize");
	struct shmrun_worker_stats stats;
	struct shmrun_worker w = {.stats = &stats};
	struct shmrun_param param = {.value = (char *)(lc ? "true" : "false"), .u64 = lc};
	struct shmrun_stage stage = {.name = "words", .width = 1, .params = &param, .nparams = 1};
	struct capture cap = {0};
	struct shmrun_task sink = {.op = &capture_op, .w = &w, .state = &cap, .width = 1};
	struct out_edge edge = {.kind = SHMRUN_EDGE_FORWARD, .forward = &sink};
	struct shmrun_task t = {
	    .stage = &stage, .op = op, .w = &w, .width = 1, .outs = &edge, .nouts = 1};
	void *state = NULL;

	ck_assert_ptr_nonnull(op);
	ck_assert_ptr_nonnull(op->process_batch);
	ck_assert_str_eq(op->params[0].key, "lowercase");
	param.def = &op->params[0];
	stage.op = op;
	memset(&stats, 0, sizeof(stats));
	ck_assert_int_eq(op->open(&t, &state), 0);
	for (uint32_t i = 0; i < n;) {
		uint32_t m = batch ? (n - i < slice ? n - i : slice) : 1;

		if (batch)
			ck_assert_int_eq(op->process_batch(&t, state, recs + i, m), 0);
		else
			ck_assert_int_eq(op->process(&t, state, recs + i), 0);
		i += m;
	}
	op->close(&t, state);
	if (!cap.text)
		cap.text = calloc(1, 1);
	return cap.text;
}

/* The reference's output for recs[0, n). */
static char *reference(const struct shmrun_record *recs, uint32_t n, bool lc)
{
	struct capture cap = {0};

	for (uint32_t i = 0; i < n; i++) {
		const unsigned char *p = recs[i].value;
		struct shmrun_tok *tok = malloc((recs[i].value_len + 1) * sizeof(*tok));
		size_t k = ref_scan(p, recs[i].value_len, tok);

		for (size_t j = 0; j < k; j++) {
			unsigned char *w = malloc(tok[j].len);

			for (uint32_t b = 0; b < tok[j].len; b++)
				w[b] = lc ? ref_lower(p[tok[j].off + b]) : p[tok[j].off + b];
			cap_add(&cap, w, tok[j].len, "", 0, recs[i].event_time_ns);
			free(w);
		}
		free(tok);
	}
	if (!cap.text)
		cap.text = calloc(1, 1);
	return cap.text;
}

static void compare_all(const struct shmrun_record *recs, uint32_t n, const char *what)
{
	static const uint32_t slices[] = {1, 2, 3, 7, 64, 1000000};

	for (int lc = 0; lc < 2; lc++) {
		char *want = reference(recs, n, lc), *got = run_tokenize(recs, n, lc, false, 1);

		ck_assert_msg(strcmp(got, want) == 0,
			      "%s, lowercase %d: process() differs from "
			      "the reference",
			      what, lc);
		free(got);
		for (size_t s = 0; s < sizeof(slices) / sizeof(slices[0]); s++) {
			got = run_tokenize(recs, n, lc, true, slices[s]);
			ck_assert_msg(strcmp(got, want) == 0,
				      "%s, lowercase %d, batches of %u: process_batch() differs "
				      "from the reference",
				      what, lc, slices[s]);
			free(got);
		}
		free(want);
	}
}

START_TEST(batch_equals_process)
{
	static const char odd[] = "nul\0in\0the\0Middle\n\x80\xff\xc3\xa9t\xe9 caf\xc3\xa9\n";
	size_t big = 400 << 10;
	char *buf = malloc(big), *b2;
	struct shmrun_record *recs = malloc(100000 * sizeof(*recs));
	uint32_t n;
	size_t len = 0;

	ck_assert_ptr_nonnull(buf);
	ck_assert_ptr_nonnull(recs);
	/* lines of one buffer: every kind of separator, blank lines, a 300 KB line */
	len += (size_t)sprintf(buf + len, "Hello World\r\nCRLF\r\n\r\nend\n\n\n\n\n\nx\n");
	memcpy(buf + len, odd, sizeof(odd) - 1);
	len += sizeof(odd) - 1;
	for (int i = 0; i < 3000; i++) /* more tokens than one emit batch, spans > 64 KB */
		len += (size_t)sprintf(buf + len, "Word%d w%c%d\n", i % 97, 'A' + i % 26, i);
	memset(buf + len, 'Z', 300 << 10);
	len += 300 << 10;
	len += (size_t)sprintf(buf + len, "\nlast line\n");
	ck_assert_uint_lt(len, big);
	n = lines(buf, len, recs, 100000);
	compare_all(recs, n, "lines of one buffer");
	/* random bytes cut into random records, each gap byte random (letters too) */
	fill((unsigned char *)buf, 200000, 0);
	fill((unsigned char *)buf + 100000, 100000, 1);
	n = 0;
	for (size_t pos = 0; pos < 200000 && n < 100000;) {
		size_t l = rnd() % 40, g = rnd() % 4; /* g = 0: back to back */

		if (pos + l > 200000)
			l = 200000 - pos;
		recs[n++] = (struct shmrun_record){.value = buf + pos,
						   .value_len = (uint32_t)l,
						   .event_time_ns = (int64_t)(rnd() % 8 == 0)};
		pos += l + g;
	}
	compare_all(recs, n, "random records and gaps");
	/* records in separate allocations, with event times */
	b2 = strdup("Second Buffer");
	recs[0] = (struct shmrun_record){.value = "first abc", .value_len = 9, .event_time_ns = 7};
	recs[1] = (struct shmrun_record){.value = b2, .value_len = 13, .event_time_ns = 7};
	recs[2] = (struct shmrun_record){.value = b2 + 7, .value_len = 6, .event_time_ns = 9};
	recs[3] = (struct shmrun_record){.value = NULL, .value_len = 0, .event_time_ns = 1};
	compare_all(recs, 4, "separate buffers");
	free(b2);
	free(recs);
	free(buf);
}
END_TEST

static Suite *tokenize_suite(void)
{
	Suite *s = suite_create("tokenize");
	TCase *tc;

	tc = tcase_create("every_byte_value");
	tcase_add_test(tc, every_byte_value);
	suite_add_tcase(s, tc);
	tc = tcase_create("scanners_equal_reference");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, scanners_equal_reference);
	suite_add_tcase(s, tc);
	tc = tcase_create("max_tokens_and_resume");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, max_tokens_and_resume);
	suite_add_tcase(s, tc);
	tc = tcase_create("long_tokens");
	tcase_add_test(tc, long_tokens);
	suite_add_tcase(s, tc);
	tc = tcase_create("span_rules");
	tcase_add_test(tc, span_rules);
	suite_add_tcase(s, tc);
	tc = tcase_create("batch_equals_process");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, batch_equals_process);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(tokenize_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
