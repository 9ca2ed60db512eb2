/*
 * runtime/ops/tokenize.c: one record per word.
 *
 * A token is a maximal run of ASCII letters and digits in the record's value
 * ([A-Za-z0-9]+; every other byte, including NUL, CR and UTF-8 bytes >= 0x80,
 * separates tokens, and a token never runs from one record into the next).
 * Each token is emitted as the key, lower-cased unless `lowercase = false`,
 * with an empty value and the input's event time.
 *
 * How: process_batch() cuts its records into spans (shmrun_tok_span(): lines
 * of one read buffer, back to back with only separators between them, one
 * event time), and each span is scanned in one pass by shmrun_tok_scan()
 * (tokenize_scan.c: SSE2 masks, no branch per byte), which also writes it
 * lower-cased into this instance's buffer. Tokens are gathered as records in
 * out[] and handed on with shmrun_emit_batch() when out[] is full, when the
 * buffer has no room for the next span, and before the call returns. process()
 * is the same for a span of one record.
 *
 * Invariants: a key points into buf[0, used) (lower-cased) or, with
 * `lowercase = false`, into the input records themselves; either way only
 * until the shmrun_emit_batch() that sends it, which always happens before
 * process() or process_batch() returns (nothing is held between calls, as
 * the input is borrowed). buf is at least SPAN_BYTES once allocated, and
 * grows only for a single record longer than that.
 *
 * Designs rejected:
 *  - a table lookup and a branch per byte, one line at a time (this file
 *    until issue 10): ~3 mispredicted branches per token.
 *  - one shmrun_emit() per token: the batch API lets a forward edge hand
 *    every token to the next operator in one call.
 *  - scanning a whole batch as one span whatever lies between records: a
 *    letter just before a record's first letter would join two tokens; the
 *    gap bytes are checked, and records that are not back to back are
 *    scanned alone.
 */
#include <errno.h>
#include <stdlib.h>

#include "ops.h"
#include "tokenize_scan.h"

#define OUT_MAX	   256u	       /* tokens per shmrun_emit_batch() */
#define SPAN_BYTES (64u << 10) /* a span grows past its first record up to this */

struct tokenize {
	bool lowercase;
	unsigned char *buf; /* lower-cased spans; keys point here until emitted */
	size_t cap, used;   /* bytes */
	uint32_t nout;
	struct shmrun_record out[OUT_MAX];
	struct shmrun_tok tok[OUT_MAX];
};

static const unsigned char *const empty = (const unsigned char *)"";

static int tok_open(struct shmrun_task *task, void **state)
{
	struct tokenize *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	t->lowercase = shmrun_task_param_bool(task, "lowercase", true);
	*state = t;
	return 0;
}

/* Send out[0, nout) and make buf free again. Return: 0 or shmrun_emit_batch()'s error. */
static int flush_out(struct shmrun_task *task, struct tokenize *t)
{
	uint32_t n = t->nout;

	t->nout = 0;
	t->used = 0;
	return n ? shmrun_emit_batch(task, t->out, n) : 0;
}

/* Tokens of the span p[0, len) (len >= 1), each with event time @time, into out[]. */
static int scan_span(struct shmrun_task *task, struct tokenize *t, const unsigned char *p,
		     size_t len, int64_t time)
{
	unsigned char *lower = NULL;
	size_t pos = 0;
	int err;

	if (t->lowercase) {
		if (len > t->cap - t->used) {
			err = flush_out(task, t);
			if (err)
				return err;
		}
		if (len > t->cap) {
			size_t cap = len > SPAN_BYTES ? len : SPAN_BYTES;
			unsigned char *nb = malloc(cap);

			if (!nb)
				return -ENOMEM;
			free(t->buf);
			t->buf = nb;
			t->cap = cap;
		}
		lower = t->buf + t->used;
		t->used += len;
	}
	while (pos < len) {
		const unsigned char *keys;
		size_t k, done;

		if (t->nout == OUT_MAX) {
			/* keeps buf: the rest of this span is still to be written there */
			size_t used = t->used;

			err = flush_out(task, t);
			t->used = used;
			if (err)
				return err;
		}
		k = shmrun_tok_scan(p + pos, len - pos, lower ? lower + pos : NULL, t->tok,
				    OUT_MAX - t->nout, &done);
		keys = (lower ? lower : p) + pos;
		for (size_t i = 0; i < k; i++)
			t->out[t->nout++] = (struct shmrun_record){
			    .key = keys + t->tok[i].off,
			    .key_len = t->tok[i].len,
			    .value = empty,
			    .event_time_ns = time,
			};
		pos += done;
	}
	return 0;
}

static int tok_process(struct shmrun_task *task, void *state, const struct shmrun_record *rec)
{
	struct tokenize *t = state;
	int err = 0;

	if (rec->value_len)
		err = scan_span(task, t, rec->value, rec->value_len, rec->event_time_ns);
	if (err) {
		t->nout = 0;
		t->used = 0;
		return err;
	}
	return flush_out(task, t);
}

static int tok_process_batch(struct shmrun_task *task, void *state,
			     const struct shmrun_record *recs, uint32_t n)
{
	struct tokenize *t = state;
	int err = 0;

	for (uint32_t i = 0, k; i < n && !err; i += k) {
		const unsigned char *p;
		size_t len;

		k = shmrun_tok_span(recs + i, n - i, SPAN_BYTES, &p, &len);
		if (len)
			err = scan_span(task, t, p, len, recs[i].event_time_ns);
	}
	if (err) {
		t->nout = 0;
		t->used = 0;
		return err;
	}
	return flush_out(task, t);
}

static void tok_close(struct shmrun_task *task, void *state)
{
	struct tokenize *t = state;

	(void)task;
	if (t)
		free(t->buf);
	free(t);
}

static const struct shmrun_param_def params[] = {
	{.key = "lowercase", .type = SHMRUN_PARAM_BOOL, .def = "true",
	 .doc = "lower-case ASCII letters of each token"},
	{0},
};

const struct shmrun_operator shmrun_op_tokenize = {
	.size = sizeof(struct shmrun_operator),
	.name = "tokenize",
	.summary = "emits each maximal run of ASCII letters and digits as a key, value empty",
	.params = params,
	.open = tok_open,
	.process = tok_process,
	.process_batch = tok_process_batch,
	.close = tok_close,
};
