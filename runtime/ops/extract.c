/*
 * runtime/ops/extract.c: set a record's key, value and event time from its
 * text (the value: a line, as file_source emits it).
 *
 * Two ways to cut a line:
 *  - fields (no `regex`): fields are the runs of non-blank bytes (space and
 *    TAB separate, leading blanks are skipped, as awk's default), or, with
 *    `separator`, the text between occurrences of that string (empty
 *    fields count, as awk -F). `key`, `value`, `time` name a field N (1 is
 *    the first, 0 the whole line), a range N-M (the text from field N's start
 *    to field M's end, separators included: `time = 1-2` of
 *    "2024-01-31 12:34:56 status ..." is "2024-01-31 12:34:56") or N- (to
 *    the last field). A line with fewer fields than a key needs is bad.
 *  - `regex`: a PCRE2 pattern (bytes; (*UTF) at its start turns UTF-8 on),
 *    compiled once per task with the JIT when the platform has one, with
 *    match data per task. The keys name a capture group by number (0: the
 *    whole match) or by name ((?<action>...)). A line the pattern does not
 *    match is bad; a group that took no part in the match gives an empty
 *    key or value, and a bad line when it is the time.
 * A key left unset keeps the input's key, value or event time. The event
 * time is read by event_time.c (`time_format`, `time_zone`).
 *
 * Bad lines are counted (the run summary's "bad records"); the first
 * `log_bad` of each task are logged as warnings with where the line is, the
 * reason and the line (cut at 160 bytes, unprintable bytes as \xHH).
 * `on_bad_record = fail` makes the first one fail the job instead (exit
 * status 1, errno EILSEQ, which the launcher does not restart: the same input
 * fails again), named the same way. Where: "path:line" when the runtime knows
 * the record's origin (shmrun_task_record_origin(), ops.h: directly behind
 * file_source on a forward edge, the line number counted by file_source only
 * when asked), else "input record N of this instance" and why no path:line.
 *
 * Everything a conf can get wrong (a regex PCRE2 refuses, with its message
 * and offset; a group name or number the pattern does not have; a field
 * spec; a time_format; a zone) is found by prepare() before anything starts,
 * and named with the file:line of the key (shmrun_task_error_at()).
 *
 * `rejects = PATH`: every bad line is also written there, as it came (one
 * line each), by file_sink's own code (file_out.h): exactly-once with
 * checkpoints, width k writing PATH.<instance>. The runtime has no side
 * outputs yet (an operator's emits go to every output edge), so rejected
 * lines reach a file rather than a downstream stage; a later job can read it.
 *
 * State: none of its own. With `rejects` and checkpoints, the rejects file's
 * committed length is per-worker state without a rule, as file_sink's: such a
 * stage's width cannot change under --rescale. Without rejects: any rescale.
 *
 * Rejected: carrying each record's origin across rings (a file id and line
 * or offset in every frame record, 12-16 bytes each on every ring, for a
 * message about the first few bad lines; and the receiving worker would also
 * need the sender's file list): put extract on a forward edge behind its
 * file_source (same width, shuffle after it) to get path:line. A line
 * number kept per piece in file_source's checkpoint entries (it would need
 * every byte before a piece counted at the first start, by every instance;
 * counting on demand costs nothing when no line is bad). Side outputs (an
 * edge that carries only rejected records) — the
 * plan and the channels know one set of output edges per task; a file is the
 * simplest sound form until they do. Our own
 * regex engine (PCRE2 is maintained and has a JIT); std::regex-like
 * backtracking per record without JIT (ten times slower on log lines).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "extract.h"
#include "file_out.h"
#include "ops.h"

#define OUT_MAX	   256u /* records per shmrun_emit_batch() */
#define SHOW_BYTES 160u /* of a bad line, in its log message */
#define FIELD_MAX  1024u /* the highest field number a key may name */

/* "N", "N-M", "N-" into @s (fields). Return: 0 or -EINVAL. */
static int parse_fields(const char *v, struct shmrun_extract_sel *s)
{
	char *end;
	unsigned long lo, hi;

	if (*v < '0' || *v > '9')
		return -EINVAL;
	lo = strtoul(v, &end, 10);
	hi = lo;
	if (*end == '-') {
		if (end[1] == 0 && lo > 0) {
			hi = UINT32_MAX;
		} else {
			if (end[1] < '0' || end[1] > '9' || lo == 0)
				return -EINVAL;
			hi = strtoul(end + 1, &end, 10);
			if (*end || hi < lo || lo == 0)
				return -EINVAL;
		}
	} else if (*end) {
		return -EINVAL;
	}
	if (lo > FIELD_MAX || (hi != UINT32_MAX && hi > FIELD_MAX))
		return -EINVAL;
	*s = (struct shmrun_extract_sel){true, (uint32_t)lo, (uint32_t)hi};
	return 0;
}

/* A group by number or name of x->re into @s. */
static int parse_group(struct shmrun_extract *x, const char *v, struct shmrun_extract_sel *s,
		       char *why, size_t len)
{
	uint32_t groups = 0;
	int n;

	pcre2_pattern_info(x->re, PCRE2_INFO_CAPTURECOUNT, &groups);
	if (*v >= '0' && *v <= '9') {
		char *end;
		unsigned long g = strtoul(v, &end, 10);

		if (*end || g > groups) {
			snprintf(why, len,
				 "the regex has %u capture group%s (0 is the whole match): no "
				 "group '%s'",
				 groups, groups == 1 ? "" : "s", v);
			return -EINVAL;
		}
		*s = (struct shmrun_extract_sel){true, (uint32_t)g, (uint32_t)g};
		return 0;
	}
	n = pcre2_substring_number_from_name(x->re, (PCRE2_SPTR)v);
	if (n == PCRE2_ERROR_NOUNIQUESUBSTRING) {
		snprintf(why, len, "several groups of the regex are named '%s'; name one group", v);
		return -EINVAL;
	}
	if (n < 0) {
		snprintf(why, len,
			 "the regex has no group named '%s' (name one with (?<%s>...), or give "
			 "a group number)",
			 v, v);
		return -EINVAL;
	}
	*s = (struct shmrun_extract_sel){true, (uint32_t)n, (uint32_t)n};
	return 0;
}

/* The separator with \t and \\ read as TAB and backslash. */
static int parse_separator(struct shmrun_extract *x, const char *v, char *why, size_t len)
{
	size_t n = 0;

	for (const char *p = v; *p; p++) {
		char c = *p;

		if (c == '\\' && (p[1] == 't' || p[1] == '\\'))
			c = *++p == 't' ? '\t' : '\\';
		if (n + 1 >= sizeof(x->sep)) {
			snprintf(why, len, "a separator has at most %zu bytes", sizeof(x->sep) - 1);
			return -EINVAL;
		}
		x->sep[n++] = c;
	}
	x->sep[n] = 0;
	x->sep_len = n;
	return 0;
}

static int compile_regex(struct shmrun_extract *x, const char *pattern, char *why, size_t len)
{
	int code;
	PCRE2_SIZE off;

	x->re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, 0, &code, &off, NULL);
	if (!x->re) {
		PCRE2_UCHAR msg[256];

		pcre2_get_error_message(code, msg, sizeof(msg));
		snprintf(why, len, "PCRE2 error at offset %zu: %s (here: '%.*s' >>> '%s')",
			 (size_t)off, (const char *)msg, (int)off, pattern,
			 pattern + (off <= strlen(pattern) ? off : strlen(pattern)));
		return -EINVAL;
	}
	/* without a JIT (or when it fails) the interpreter matches the same */
	(void)pcre2_jit_compile(x->re, PCRE2_JIT_COMPLETE);
	x->md = pcre2_match_data_create_from_pattern(x->re, NULL);
	if (!x->md) {
		snprintf(why, len, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

int shmrun_extract_compile(struct shmrun_extract *x, const struct shmrun_extract_conf *c,
			   const char **bad_key, char *why, size_t len)
{
	struct {
		const char *key, *v;
		struct shmrun_extract_sel *sel;
	} sels[] = {
		{"key", c->key, &x->key},
		{"value", c->value, &x->value},
		{"time", c->time, &x->time},
	};
	int err;

	memset(x, 0, sizeof(*x));
	*bad_key = "op";
	if (!c->key && !c->value && !c->time) {
		snprintf(why, len, "extract sets nothing: give key, value or time (or all three)");
		return -EINVAL;
	}
	/* nothing is silently ignored: time's companions without time */
	if (!c->time && (c->time_format || (c->time_zone && strcmp(c->time_zone, "UTC") != 0))) {
		*bad_key = c->time_format ? "time_format" : "time_zone";
		snprintf(why, len,
			 "%s is given but time is not: name the field or group that holds the "
			 "event time with time = ...",
			 *bad_key);
		return -EINVAL;
	}
	if (c->regex && c->separator) {
		*bad_key = "separator";
		snprintf(why, len, "separator cuts fields, regex groups: give one of them");
		return -EINVAL;
	}
	if (c->regex) {
		*bad_key = "regex";
		err = compile_regex(x, c->regex, why, len);
		if (err)
			return err;
	}
	if (c->separator) {
		*bad_key = "separator";
		err = parse_separator(x, c->separator, why, len);
		if (err)
			return err;
	}
	for (uint32_t i = 0; i < 3; i++) {
		if (!sels[i].v)
			continue;
		*bad_key = sels[i].key;
		if (x->re) {
			err = parse_group(x, sels[i].v, sels[i].sel, why, len);
		} else {
			err = parse_fields(sels[i].v, sels[i].sel);
			if (err)
				snprintf(why, len,
					 "'%s' is not a field: write N (1 is the first field, 0 "
					 "the whole line), N-M or N- (with regex: a group number "
					 "or name); fields are at most %u",
					 sels[i].v, FIELD_MAX);
		}
		if (err)
			return err;
	}
	if (!x->re) { /* the fields a line is cut into: up to the last one named */
		for (uint32_t i = 0; i < 3; i++)
			if (sels[i].sel->set && sels[i].sel->lo > 0) {
				uint32_t last = sels[i].sel->hi == UINT32_MAX ? sels[i].sel->lo
									       : sels[i].sel->hi;

				x->nf = last > x->nf ? last : x->nf;
			}
		x->fb = calloc(x->nf ? x->nf : 1, sizeof(*x->fb));
		x->fe = calloc(x->nf ? x->nf : 1, sizeof(*x->fe));
		if (!x->fb || !x->fe) {
			snprintf(why, len, "out of memory");
			return -ENOMEM;
		}
	}
	if (c->time) {
		*bad_key = "time_format";
		if (!c->time_format) {
			*bad_key = "time";
			snprintf(why, len,
				 "time needs time_format (a strptime format such as "
				 "%%Y-%%m-%%d %%H:%%M:%%S, or epoch_s or epoch_ms)");
			return -EINVAL;
		}
		err = shmrun_timefmt_compile(&x->tf, c->time_format, why, len);
		if (err)
			return err;
		*bad_key = "time_zone";
		err = shmrun_tz_load(&x->tz, c->time_zone ? c->time_zone : "UTC", why, len);
		if (err)
			return err;
	}
	*bad_key = NULL;
	return 0;
}

void shmrun_extract_free(struct shmrun_extract *x)
{
	free(x->fb);
	free(x->fe);
	pcre2_match_data_free(x->md);
	pcre2_code_free(x->re);
	shmrun_timefmt_free(&x->tf);
	shmrun_tz_free(&x->tz);
	memset(x, 0, sizeof(*x));
}

static bool is_blank(unsigned char c)
{
	return c == ' ' || c == '\t';
}

/*
 * Cut @p (@n bytes) into its first x->nf fields, their bounds into
 * x->fb[]/x->fe[], in one pass that stops at the last field a key needs.
 * Return: the number of fields found (at most x->nf).
 */
static uint32_t split(struct shmrun_extract *x, const unsigned char *p, size_t n)
{
	size_t pos = 0;
	uint32_t f = 0;

	if (n == 0)
		return 0; /* an empty line has no fields, in both modes */
	while (f < x->nf) {
		if (x->sep_len) {
			/* a separator at the end leaves an empty last field */
			const unsigned char *hit =
				pos < n ? memmem(p + pos, n - pos, x->sep, x->sep_len) : NULL;

			x->fb[f] = (uint32_t)pos;
			x->fe[f] = hit ? (uint32_t)(hit - p) : (uint32_t)n;
			f++;
			if (!hit)
				break;
			pos = (size_t)(hit - p) + x->sep_len;
		} else {
			while (pos < n && is_blank(p[pos]))
				pos++;
			if (pos == n)
				break;
			x->fb[f] = (uint32_t)pos;
			while (pos < n && !is_blank(p[pos]))
				pos++;
			x->fe[f++] = (uint32_t)pos;
		}
	}
	return f;
}

/*
 * The text of fields @s->lo..@s->hi of @p (@n bytes, @found fields cut by
 * split()) in [*b, *e). Return: whether the line has them.
 */
static bool field_span(const struct shmrun_extract *x, uint32_t found, const unsigned char *p,
		       size_t n, const struct shmrun_extract_sel *s, size_t *b, size_t *e)
{
	if (s->lo == 0) {
		*b = 0;
		*e = n;
		return true;
	}
	if (s->lo > found || (s->hi != UINT32_MAX && s->hi > found))
		return false;
	*b = x->fb[s->lo - 1];
	if (s->hi != UINT32_MAX) {
		*e = x->fe[s->hi - 1];
	} else if (x->sep_len) {
		*e = n; /* to the last field: the end of the line */
	} else {
		*e = n; /* the end of the last field: trailing blanks are not in it */
		while (*e > *b && is_blank(p[*e - 1]))
			--*e;
	}
	return true;
}

/* Group @g of the last match in [*b, *e). Return: whether it took part. */
static bool group_span(const struct shmrun_extract *x, uint32_t g, size_t *b, size_t *e)
{
	PCRE2_SIZE *ov = pcre2_get_ovector_pointer(x->md);

	if (ov[2 * g] == PCRE2_UNSET)
		return false;
	*b = ov[2 * g];
	*e = ov[2 * g + 1];
	return true;
}

int shmrun_extract_line(struct shmrun_extract *x, const struct shmrun_record *in,
			struct shmrun_record *out, const char **why)
{
	const unsigned char *p = in->value_len ? in->value : (const unsigned char *)"";
	size_t n = in->value_len, b = 0, e = 0;
	uint32_t found = 0;

	*out = *in;
	if (!x->re && x->nf)
		found = split(x, p, n);
	if (x->re) {
		int rc = pcre2_match(x->re, p, n, 0, 0, x->md, NULL);

		if (rc == PCRE2_ERROR_NOMATCH) {
			*why = "the regex does not match";
			return -EILSEQ;
		}
		if (rc < 0) { /* a match limit, invalid UTF-8 under (*UTF): PCRE2 says which */
			PCRE2_UCHAR msg[96];

			pcre2_get_error_message(rc, msg, sizeof(msg));
			snprintf(x->why, sizeof(x->why), "the regex failed on this line: %s",
				 (const char *)msg);
			*why = x->why;
			return -EILSEQ;
		}
	}
	if (x->key.set) {
		bool ok =
		    x->re ? group_span(x, x->key.lo, &b, &e) : field_span(x, found, p, n, &x->key, &b, &e);

		if (!ok && !x->re) {
			*why = "the line has fewer fields than key needs";
			return -EILSEQ;
		}
		out->key = ok ? p + b : p;
		out->key_len = ok ? (uint32_t)(e - b) : 0;
	}
	if (x->value.set) {
		bool ok = x->re ? group_span(x, x->value.lo, &b, &e)
				: field_span(x, found, p, n, &x->value, &b, &e);

		if (!ok && !x->re) {
			*why = "the line has fewer fields than value needs";
			return -EILSEQ;
		}
		out->value = ok ? p + b : p;
		out->value_len = ok ? (uint32_t)(e - b) : 0;
	}
	if (x->time.set) {
		bool ok = x->re ? group_span(x, x->time.lo, &b, &e)
				: field_span(x, found, p, n, &x->time, &b, &e);

		if (!ok) {
			*why = x->re ? "the time group took no part in the match"
				     : "the line has fewer fields than time needs";
			return -EILSEQ;
		}
		if (shmrun_timefmt_parse(&x->tf, &x->tz, (const char *)p + b, e - b,
					 &out->event_time_ns)) {
			*why = "the time does not fit time_format";
			return -EILSEQ;
		}
	}
	return 0;
}

/* ------------------------------------------------------------------------- */
/* The operator. */

struct extract {
	struct shmrun_extract x;
	bool fail;                   /* on_bad_record = fail */
	uint64_t log_max, bad, seen; /* bad lines to log; counts */
	struct shmrun_file_out *rej; /* `rejects`, or NULL */
	uint32_t nout;
	struct shmrun_record out[OUT_MAX];
};

static void read_conf(struct shmrun_task *task, struct shmrun_extract_conf *c)
{
	*c = (struct shmrun_extract_conf){
		.regex = shmrun_task_param(task, "regex"),
		.separator = shmrun_task_param(task, "separator"),
		.key = shmrun_task_param(task, "key"),
		.value = shmrun_task_param(task, "value"),
		.time = shmrun_task_param(task, "time"),
		.time_format = shmrun_task_param(task, "time_format"),
		.time_zone = shmrun_task_param(task, "time_zone"),
	};
}

/* Compile the stage's keys into @x. Return: 0, or -errno after a message
 * naming the key (and, before anything starts, its file:line). */
static int compile(struct shmrun_task *task, struct shmrun_extract *x)
{
	struct shmrun_extract_conf c;
	const char *bad_key = NULL, *v;
	char why[1024];
	int err;

	read_conf(task, &c);
	err = shmrun_extract_compile(x, &c, &bad_key, why, sizeof(why));
	if (err) {
		v = bad_key ? shmrun_task_param(task, bad_key) : NULL;
		if (v)
			shmrun_task_error_at(task, bad_key, "%s = %s: %s", bad_key, v, why);
		else
			shmrun_task_error_at(task, bad_key, "%s", why);
		shmrun_extract_free(x);
	}
	return err;
}

static int ex_prepare(struct shmrun_task *task)
{
	struct shmrun_extract x;
	int err = compile(task, &x);

	if (!err)
		shmrun_extract_free(&x);
	if (!err && shmrun_task_param(task, "rejects"))
		err = shmrun_file_out_prepare(task, "rejects");
	return err;
}

static int ex_open(struct shmrun_task *task, void **state)
{
	struct extract *s = calloc(1, sizeof(*s));
	const char *on_bad = shmrun_task_param(task, "on_bad_record");
	int err;

	if (!s)
		return -ENOMEM;
	*state = s;
	s->fail = on_bad && strcmp(on_bad, "fail") == 0;
	s->log_max = shmrun_task_param_u64(task, "log_bad", 5);
	err = compile(task, &s->x);
	if (err) {
		free(s);
		*state = NULL;
		return err;
	}
	if (shmrun_task_param(task, "rejects"))
		err = shmrun_file_out_open(task, "rejects", &s->rej);
	return err; /* close() frees what there is */
}

/* @rec as text for a message: at most SHOW_BYTES, unprintable bytes as \xHH. */
static void show(const struct shmrun_record *rec, char *buf, size_t len)
{
	const unsigned char *p = rec->value;
	size_t o = 0;
	uint32_t i = 0;

	for (; i < rec->value_len && i < SHOW_BYTES && o + 5 < len; i++) {
		if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\'' && p[i] != '\\')
			buf[o++] = (char)p[i];
		else
			o += (size_t)snprintf(buf + o, len - o, "\\x%02x", p[i]);
	}
	if (i < rec->value_len && o + 4 < len)
		o += (size_t)snprintf(buf + o, len - o, "...");
	buf[o] = 0;
}

/*
 * Where @rec came from, for a message, into @buf: "PATH:LINE" when the
 * runtime knows it (directly behind file_source on a forward edge:
 * shmrun_task_record_origin()), else "input record N of this instance", with
 * why there is no PATH:LINE.
 */
static void where(struct shmrun_task *task, const struct extract *s,
		  const struct shmrun_record *rec, char *buf, size_t len)
{
	if (!shmrun_task_record_origin(task, rec, buf, len))
		snprintf(buf, len,
			 "input record %" PRIu64 " of this instance; no file:line: it is known "
			 "only directly behind file_source on a forward edge",
			 s->seen);
}

/* A line that does not fit: count it, write it to rejects, log it or fail. */
static int bad_line(struct shmrun_task *task, struct extract *s, const struct shmrun_record *rec,
		    const char *why)
{
	char text[SHOW_BYTES * 4 + 8], at[PATH_MAX + 160];
	int err;

	s->bad++;
	shmrun_task_count(task, SHMRUN_COUNT_RECORDS_BAD, 1);
	if (s->fail) {
		show(rec, text, sizeof(text));
		where(task, s, rec, at, sizeof(at));
		shmrun_task_error(task,
				  "bad record (%s): %s: '%s'; on_bad_record = fail stops the job "
				  "at the first bad record (skip counts and logs them instead)",
				  at, why, text);
		return -EILSEQ;
	}
	if (s->rej) {
		err = shmrun_file_out_put(task, s->rej, rec->value, rec->value_len);
		if (err)
			return err;
	}
	if (s->bad <= s->log_max) {
		show(rec, text, sizeof(text));
		where(task, s, rec, at, sizeof(at));
		shmrun_task_warn(task, "bad record %" PRIu64 " (%s): %s: '%s'%s", s->bad, at, why,
				 text,
				 s->bad == s->log_max ? "; further bad records are counted, not logged"
						      : "");
	}
	return 0;
}

static int flush_out(struct shmrun_task *task, struct extract *s)
{
	uint32_t n = s->nout;

	s->nout = 0;
	return n ? shmrun_emit_batch(task, s->out, n) : 0;
}

static int ex_process_batch(struct shmrun_task *task, void *state, const struct shmrun_record *recs,
			    uint32_t n)
{
	struct extract *s = state;
	int err = 0;

	for (uint32_t i = 0; i < n && !err; i++) {
		const char *why;

		s->seen++;
		if (shmrun_extract_line(&s->x, &recs[i], &s->out[s->nout], &why)) {
			err = bad_line(task, s, &recs[i], why);
			continue;
		}
		if (++s->nout == OUT_MAX)
			err = flush_out(task, s);
	}
	if (err) {
		s->nout = 0;
		return err;
	}
	return flush_out(task, s);
}

static int ex_process(struct shmrun_task *task, void *state, const struct shmrun_record *rec)
{
	return ex_process_batch(task, state, rec, 1);
}

static int ex_end(struct shmrun_task *task, void *state)
{
	struct extract *s = state;
	int err = s->rej ? shmrun_file_out_end(task, s->rej) : 0;

	if (s->bad)
		shmrun_task_log(task,
				"%" PRIu64 " bad record%s of %" PRIu64 " skipped (%" PRIu64
				" logged%s)",
				s->bad, s->bad == 1 ? "" : "s", s->seen,
				s->bad < s->log_max ? s->bad : s->log_max,
				s->rej ? ", all written to rejects" : "");
	return err;
}

/* The rejects file's callbacks (file_out.h); nothing to do without one. */
static int ex_snapshot(struct shmrun_task *task, void *state, uint64_t epoch)
{
	struct extract *s = state;

	return s->rej ? shmrun_file_out_snapshot(task, s->rej, epoch) : 0;
}

static int ex_restore(struct shmrun_task *task, void *state, const void *entry, uint32_t len)
{
	struct extract *s = state;

	if (!s->rej) { /* the fingerprint includes rejects: a checkpoint of another topology */
		shmrun_task_error(task, "the checkpoint holds a rejects file's length, but rejects "
					"is not set: restore with the topology that wrote it");
		return -EINVAL;
	}
	return shmrun_file_out_restore(task, s->rej, entry, len);
}

static int ex_commit(struct shmrun_task *task, void *state, uint64_t epoch)
{
	struct extract *s = state;

	return s->rej ? shmrun_file_out_commit(task, s->rej, epoch) : 0;
}

static int ex_flush(struct shmrun_task *task, void *state)
{
	struct extract *s = state;

	return s->rej ? shmrun_file_out_flush(task, s->rej) : 0;
}

static void ex_close(struct shmrun_task *task, void *state)
{
	struct extract *s = state;

	if (!s)
		return;
	if (s->rej)
		shmrun_file_out_close(task, s->rej);
	shmrun_extract_free(&s->x);
	free(s);
}

static const struct shmrun_param_def params[] = {
	{.key = "regex", .type = SHMRUN_PARAM_STRING,
	 .doc = "PCRE2 pattern; key, value and time then name its groups (number or name)"},
	{.key = "separator", .type = SHMRUN_PARAM_STRING,
	 .doc = "field separator (\\t for TAB); unset: runs of blanks, as awk"},
	{.key = "key", .type = SHMRUN_PARAM_STRING,
	 .doc = "the key: field N, N-M or N- (0: the line), or a regex group; unset: unchanged"},
	{.key = "value", .type = SHMRUN_PARAM_STRING,
	 .doc = "the value, as key; unset: unchanged (the line)"},
	{.key = "time", .type = SHMRUN_PARAM_STRING,
	 .doc = "the event time's text, as key; unset: unchanged"},
	{.key = "time_format", .type = SHMRUN_PARAM_STRING,
	 .doc = "strptime format (plus %f: fraction of a second), or epoch_s or epoch_ms"},
	{.key = "time_zone", .type = SHMRUN_PARAM_STRING, .def = "UTC",
	 .doc = "zone of the local times read, e.g. Europe/Berlin (a file under "
		"/usr/share/zoneinfo)"},
	{.key = "on_bad_record", .type = SHMRUN_PARAM_ENUM, .def = "skip", .choices = "skip fail",
	 .doc = "a line that does not fit: skip (count and log it) or fail the job"},
	{.key = "log_bad", .type = SHMRUN_PARAM_COUNT, .def = "5", .min = 0, .max = 1000000,
	 .doc = "bad lines logged per instance; later ones are only counted"},
	{.key = "rejects", .type = SHMRUN_PARAM_PATH, .io = SHMRUN_PARAM_OUTPUT,
	 .doc = "bad lines are also written to this file as they came (exactly-once with "
		"checkpoints); width k writes rejects.<instance>"},
	{0},
};

const struct shmrun_operator shmrun_op_extract = {
	.size = sizeof(struct shmrun_operator),
	.name = "extract",
	.summary = "sets key, value and event time from fields or regex groups of each line",
	.params = params,
	.prepare = ex_prepare,
	.open = ex_open,
	.process = ex_process,
	.process_batch = ex_process_batch,
	.end_of_input = ex_end,
	.close = ex_close,
	/* only a rejects file has per-worker state (its committed length): no
	 * rule, as file_sink; without rejects nothing is saved, any rescale works */
	.pw_rule = SHMRUN_PW_NONE,
	.snapshot = ex_snapshot,
	.restore = ex_restore,
	.commit = ex_commit,
	.flush = ex_flush,
};
