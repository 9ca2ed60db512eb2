/*
 * runtime/conf.c: topology.conf -> struct shmrun_job, with every check that can
 * be made before a process starts, and a message a person can act on for each.
 *
 * What it is for. `shmrun check|plan|run topology.conf` all start here. The
 * file is INI (docs/design.md §7): a [job] section and one section per stage. What
 * comes out is a job whose every value is typed, in range and resolved (paths
 * against the conf file's directory), whose graph is acyclic, reachable from a
 * source and drained by a sink, with every edge's kind decided and a
 * topological order computed. Everything after this file trusts the job.
 *
 * Pipeline, in three passes over the file's contents:
 *
 *     file --read_line()--> inih --on_key()--> sections[] (name, line, key/values)
 *          syntax, [sections]                 duplicates
 *     sections[] --load_job()--> [job] keys   --load_stage()--> ops, widths, params
 *     stages --load_graph()--> edges, cycles, sources, sinks, topo order
 *
 * Every pass records errors and carries on, so one run of `shmrun check` lists
 * all of them; the messages are sorted by line at the end. Every message is
 * "file:line: what is wrong; what to do", the line being that of the
 * offending key, or of the section header when the problem is the section.
 *
 * Why a custom inih reader. inih (Debian's build) has no line numbers in its
 * handler, stops a line at 200 bytes, and reports only the first syntax error.
 * read_line() hands inih one physical line at a time, so the line it counts
 * is the line the handler is called for; it strips indentation, classifies the
 * line the way inih will (comment, [section], key = value) and reports every
 * malformed or over-long line itself, passing inih an empty line in its place.
 * It also records section headers, which inih does not report: a section with
 * no keys still exists, and duplicate sections are caught at their header line.
 *
 * Continuation lines. An indented line that does not itself read as a key
 * line (`name =`), a comment or a section header continues the previous key's
 * value: read_line() appends it, after one blank, to the value on_key() stored
 * last, and hands inih an empty line. Debian builds inih with multi-line
 * values on, but inih would call the handler once per continuation line with
 * the same key (our duplicate-key check) and still cut each line at 200
 * bytes; done here, a long `path =` list may span any number of lines of any
 * length, and an indented `key = value` stays an ordinary key as it always was.
 *
 * Keys are declared as data (struct shmrun_param_def): the operators' tables in
 * runtime/ops/, and job_keys[] and stage_keys[] below. One checker,
 * check_value(), turns text into typed values for all of them, so `3x`, `-1`,
 * ` 5`, overflow and unknown units fail the same way everywhere.
 *
 * Rejected designs.
 *   - Looking keys up as the handler sees them (inih's usual style): it cannot
 *     report a missing required key, a key that depends on another section
 *     (width <= [job] vnodes, wherever [job] sits), or a graph error.
 *   - Stopping at the first error: a user fixing a file one error per run is a
 *     user who stops reading the errors.
 *   - Lenient numbers (strtoull): accepts " 5", "-1" (as 2^64-1) and "5x".
 */
#include <ctype.h>
#include <errno.h>
#include <sys/stat.h>
#include <ini.h>
#include <libgen.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "shmrun/job.h"
#include "shmrun/ring.h"

#define MAX_CPU	     4095u /* highest CPU number a cpus list may name */
#define CPU_WORDS    ((MAX_CPU + 1) / 64)
#define MAX_WORKERS  4096u
#define MAX_VNODES   65536u
#define MAX_NAME_LEN 64u  /* stage and job names */
/*
 * Longest duration a key accepts: 365 days in ns. Durations are added to a
 * CLOCK_MONOTONIC reading in signed 64-bit ns (now + interval, started +
 * timeout); this bound keeps that sum ~290 years below INT64_MAX.
 */
#define MAX_DURATION_NS (365ull * 86400 * 1000000000)
#define CUR_NONE     (-1) /* no section header seen yet */
#define CUR_SKIP     (-2) /* inside a duplicate section: its keys are not read */
#define CONT_NONE	(-1) /* no key for a continuation line to extend */
#define CONT_IGNORE	(-2) /* the key was rejected: drop its continuation lines */
/* The largest topology, from a file or standard input. */
#define CONF_MAX_BYTES (16u << 20)

/* One `key = value` line. */
struct kv {
	char *key;
	char *value;
	int line;
	int cont_line; /* the first continuation line that extended it, or 0 */
};

/* A key line refused as too long: its error waits until the key's type is known. */
struct refused {
	int sec;	/* index into loader.sec */
	char key[64];
	int line;
	bool reported;
};

/* One [section] and its keys, in file order. */
struct section {
	char *name;
	int line;
	struct kv *kv;
	uint32_t nkv, cap;
};

/* Messages with the line they are about, for sorting. */
struct msgs {
	char **text;
	int *line;
	uint32_t n, cap;
};

struct loader {
	const char *path; /* as given: the prefix of every message */
	FILE *f;
	char *buf; /* read_line()'s buffer */
	size_t bufcap;
	uint64_t bytes; /* read so far: at most CONF_MAX_BYTES */
	bool too_big;	/* more than that: reported, nothing else is */
	int lineno;
	int read_err; /* errno of a failed read, 0 if none */

	struct section *sec;
	uint32_t nsec, capsec;
	int cur; /* index into sec of the current line's section, or CUR_* */
	/* What an indented continuation line extends: CONT_NONE (nothing: an
	 * error), CONT_IGNORE (a key that was rejected: its continuation lines
	 * add nothing), or the index into sec[cur].kv of the last key stored. */
	int cont;

	struct msgs errs, warns;
	bool nomem;
	struct refused *refused; /* over-long key lines */
	uint32_t nrefused;

	struct shmrun_job *job;
	int job_sec;		    /* index of [job] in sec, or -1 */
	struct section **stage_sec; /* the section of each stage */
	const struct kv **input;    /* each stage's `input` key, or NULL */
	bool vnodes_ok;		    /* job->vnodes was given correctly or defaulted */
	bool ops_ok;		    /* every stage names a known operator */
	bool *width_ok;		    /* per stage */
	bool edges_missing;	    /* an `input` entry was wrong: the edge set is incomplete */
	uint64_t online[CPU_WORDS], allowed[CPU_WORDS];
};

/* ------------------------------------------------------------------------ */
/* Messages */

static void msg_vadd(struct loader *ld, struct msgs *m, int line, const char *fmt, va_list ap)
{
	char *body = NULL, *full = NULL;
	int r;

	if (vasprintf(&body, fmt, ap) < 0)
		goto err_nomem;
	for (char *c = body; *c; c++) /* a message never echoes control bytes */
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	if (line > 0)
		r = asprintf(&full, "%s:%d: %s", ld->path, line, body);
	else
		r = asprintf(&full, "%s: %s", ld->path, body);
	free(body);
	if (r < 0)
		goto err_nomem;
	if (m->n == m->cap) {
		uint32_t cap = m->cap ? 2 * m->cap : 8;
		char **t = realloc(m->text, cap * sizeof(*t));
		int *l;

		if (!t)
			goto err_free;
		m->text = t;
		l = realloc(m->line, cap * sizeof(*l));
		if (!l)
			goto err_free;
		m->line = l;
		m->cap = cap;
	}
	m->text[m->n] = full;
	m->line[m->n] = line;
	m->n++;
	return;

err_free:
	free(full);
err_nomem:
	ld->nomem = true;
}

static void __attribute__((format(printf, 3, 4)))
errorf(struct loader *ld, int line, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	msg_vadd(ld, &ld->errs, line, fmt, ap);
	va_end(ap);
}

static void __attribute__((format(printf, 3, 4)))
warnf(struct loader *ld, int line, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	msg_vadd(ld, &ld->warns, line, fmt, ap);
	va_end(ap);
}

static void msgs_free(struct msgs *m)
{
	for (uint32_t i = 0; i < m->n; i++)
		free(m->text[i]);
	free(m->text);
	free(m->line);
	memset(m, 0, sizeof(*m));
}

/* Stable sort of the messages by line (insertion sort: lists are short). */
static void msgs_sort(struct msgs *m)
{
	for (uint32_t i = 1; i < m->n; i++) {
		char *t = m->text[i];
		int l = m->line[i];
		uint32_t j = i;

		for (; j > 0 && m->line[j - 1] > l; j--) {
			m->text[j] = m->text[j - 1];
			m->line[j] = m->line[j - 1];
		}
		m->text[j] = t;
		m->line[j] = l;
	}
}

/* Hand the texts over to a plain array (the line array is freed). */
static void msgs_take(struct msgs *m, char ***text, uint32_t *n)
{
	msgs_sort(m);
	*text = m->text;
	*n = m->n;
	free(m->line);
	memset(m, 0, sizeof(*m));
}

/* ------------------------------------------------------------------------ */
/* Suggestions: the nearest known word by edit distance */

/* Optimal string alignment distance (transpositions count 1), ASCII case-folded. */
static unsigned edit_distance(const char *a, const char *b)
{
	enum { MAXLEN = 64 };
	unsigned d[MAXLEN + 1][MAXLEN + 1];
	size_t la = strlen(a), lb = strlen(b);

	if (la > MAXLEN || lb > MAXLEN)
		return UINT32_MAX;
	for (size_t i = 0; i <= la; i++)
		d[i][0] = (unsigned)i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = (unsigned)j;
	for (size_t i = 1; i <= la; i++) {
		for (size_t j = 1; j <= lb; j++) {
			int ca = tolower((unsigned char)a[i - 1]),
			    cb = tolower((unsigned char)b[j - 1]);
			unsigned cost = ca != cb, v = d[i - 1][j - 1] + cost;

			if (d[i - 1][j] + 1 < v)
				v = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < v)
				v = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) &&
			    tolower((unsigned char)a[i - 2]) == cb && d[i - 2][j - 2] + 1 < v)
				v = d[i - 2][j - 2] + 1;
			d[i][j] = v;
		}
	}
	return d[la][lb];
}

/* The candidate nearest to @word if it is near enough to be a typo, else NULL. */
static const char *nearest(const char *word, const char *const *cands, uint32_t n)
{
	size_t len = strlen(word);
	unsigned limit = len <= 3 ? 1 : len <= 6 ? 2 : 3, best = UINT32_MAX;
	const char *found = NULL;

	for (uint32_t i = 0; i < n; i++) {
		unsigned dist = edit_distance(word, cands[i]);

		if (dist < best) {
			best = dist;
			found = cands[i];
		}
	}
	return best <= limit ? found : NULL;
}

/* "a, b, c" into @buf (truncated with "..." if it does not fit). */
static const char *join_words(char *buf, size_t len, const char *const *w, uint32_t n)
{
	size_t off = 0;

	buf[0] = '\0';
	for (uint32_t i = 0; i < n; i++) {
		int r = snprintf(buf + off, len - off, "%s%s", i ? ", " : "", w[i]);

		if (r < 0 || (size_t)r >= len - off) {
			if (len > 4)
				strcpy(buf + len - 4, "...");
			break;
		}
		off += (size_t)r;
	}
	return buf;
}

/* Keys of a NULL-terminated table appended to @out (at most @max in all). */
static uint32_t table_keys(const struct shmrun_param_def *t, const char **out, uint32_t n,
			   uint32_t max)
{
	for (; t && t->key && n < max; t++)
		out[n++] = t->key;
	return n;
}

/* ------------------------------------------------------------------------ */
/* Strict numbers */

/*
 * Leading decimal digits of *@sp into @v; *@sp advances past them.
 * Return: 0; -EINVAL if there is no digit; -ERANGE if they overflow (all digits
 * are still consumed, so the caller can tell bad syntax from a large number).
 */
static int parse_digits(const char **sp, uint64_t *v)
{
	const char *s = *sp;
	uint64_t x = 0;
	bool over = false;

	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	for (; isdigit((unsigned char)*s); s++) {
		unsigned dig = (unsigned)(*s - '0');

		if (x > (UINT64_MAX - dig) / 10)
			over = true;
		else
			x = x * 10 + dig;
	}
	*sp = s;
	*v = x;
	return over ? -ERANGE : 0;
}

int shmrun_parse_count(const char *s, uint64_t *n)
{
	uint64_t v;
	int r = parse_digits(&s, &v);

	if (r == -EINVAL || *s)
		return -EINVAL;
	if (r)
		return r;
	*n = v;
	return 0;
}

/* @v * @mul, or -ERANGE. */
static int mul_checked(uint64_t v, uint64_t mul, uint64_t *out)
{
	if (mul && v > UINT64_MAX / mul)
		return -ERANGE;
	*out = v * mul;
	return 0;
}

int shmrun_parse_size(const char *s, uint64_t *bytes)
{
	uint64_t v, mul = 1;
	int r = parse_digits(&s, &v);

	if (r == -EINVAL)
		return r;
	if (*s == 'K')
		mul = 1ull << 10;
	else if (*s == 'M')
		mul = 1ull << 20;
	else if (*s == 'G')
		mul = 1ull << 30;
	else if (*s == 'T')
		mul = 1ull << 40;
	else if (*s)
		return -EINVAL;
	if (*s && s[1])
		return -EINVAL;
	if (r)
		return r;
	return mul_checked(v, mul, bytes);
}

int shmrun_parse_duration(const char *s, uint64_t *ns)
{
	uint64_t v, mul;
	int r = parse_digits(&s, &v);

	if (r == -EINVAL)
		return r;
	if (strcmp(s, "ms") == 0)
		mul = 1000000ull;
	else if (strcmp(s, "s") == 0)
		mul = 1000000000ull;
	else
		return -EINVAL;
	if (r)
		return r;
	return mul_checked(v, mul, ns);
}

static void bit_set(uint64_t *map, uint32_t b)
{
	map[b / 64] |= 1ull << (b % 64);
}

static bool bit_test(const uint64_t *map, uint32_t b)
{
	return b <= MAX_CPU && (map[b / 64] >> (b % 64)) & 1;
}

/*
 * "0-3,8" into a bitmap. @dup receives the first CPU named twice, or -1.
 * Return: 0; -EINVAL (syntax, reversed range); -ERANGE (a CPU above MAX_CPU).
 */
static int parse_cpulist(const char *s, uint64_t *map, int32_t *dup)
{
	*dup = -1;
	memset(map, 0, CPU_WORDS * sizeof(*map));
	for (;;) {
		uint64_t lo, hi;
		int r = parse_digits(&s, &lo), r2 = 0;

		if (r == -EINVAL)
			return r;
		hi = lo;
		if (*s == '-') {
			s++;
			r2 = parse_digits(&s, &hi);
			if (r2 == -EINVAL)
				return r2;
		}
		if (*s && *s != ',')
			return -EINVAL;
		if (r || r2 || hi > MAX_CPU)
			return -ERANGE;
		if (hi < lo)
			return -EINVAL;
		for (uint64_t c = lo; c <= hi; c++) {
			if (bit_test(map, (uint32_t)c) && *dup < 0)
				*dup = (int32_t)c;
			bit_set(map, (uint32_t)c);
		}
		if (!*s)
			return 0;
		s++; /* ',' */
	}
}

/* The set bits of @map as a sorted array. */
static int cpulist_array(const uint64_t *map, int32_t **cpus, uint32_t *n)
{
	uint32_t k = 0;

	for (uint32_t c = 0; c <= MAX_CPU; c++)
		k += bit_test(map, c);
	*cpus = malloc((k ? k : 1) * sizeof(**cpus));
	if (!*cpus)
		return -ENOMEM;
	*n = 0;
	for (uint32_t c = 0; c <= MAX_CPU; c++)
		if (bit_test(map, c))
			(*cpus)[(*n)++] = (int32_t)c;
	return 0;
}

int shmrun_parse_cpus(const char *s, int32_t **cpus, uint32_t *n)
{
	uint64_t map[CPU_WORDS];
	int32_t dup;
	int r = parse_cpulist(s, map, &dup);

	if (r)
		return r;
	return cpulist_array(map, cpus, n);
}

/* "0-1,4" for a bitmap, into @buf. */
static const char *fmt_cpulist(const uint64_t *map, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (uint32_t c = 0; c <= MAX_CPU; c++) {
		uint32_t e = c;
		int r;

		if (!bit_test(map, c))
			continue;
		while (e < MAX_CPU && bit_test(map, e + 1))
			e++;
		if (e == c)
			r = snprintf(buf + off, len - off, "%s%u", off ? "," : "", c);
		else
			r = snprintf(buf + off, len - off, "%s%u-%u", off ? "," : "", c, e);
		if (r < 0 || (size_t)r >= len - off)
			break;
		off += (size_t)r;
		c = e;
	}
	if (!off)
		snprintf(buf, len, "none");
	return buf;
}

/* The CPUs that are online, and those this process may run on. */
static void probe_cpus(struct loader *ld)
{
	char text[4096];
	size_t sz = CPU_ALLOC_SIZE(MAX_CPU + 1);
	cpu_set_t *set;
	int32_t dup;
	FILE *f;
	size_t n = 0;

	memset(ld->online, 0, sizeof(ld->online));
	f = fopen("/sys/devices/system/cpu/online", "r");
	if (f) {
		n = fread(text, 1, sizeof(text) - 1, f);
		fclose(f);
	}
	while (n && isspace((unsigned char)text[n - 1]))
		n--;
	text[n] = '\0';
	if (!n || parse_cpulist(text, ld->online, &dup) != 0) {
		long k = sysconf(_SC_NPROCESSORS_ONLN);

		memset(ld->online, 0, sizeof(ld->online));
		for (long c = 0; c < (k > 0 ? k : 1) && c <= MAX_CPU; c++)
			bit_set(ld->online, (uint32_t)c);
	}

	memcpy(ld->allowed, ld->online, sizeof(ld->allowed));
	set = CPU_ALLOC(MAX_CPU + 1);
	if (set && sched_getaffinity(0, sz, set) == 0) {
		memset(ld->allowed, 0, sizeof(ld->allowed));
		for (uint32_t c = 0; c <= MAX_CPU; c++)
			if (CPU_ISSET_S(c, sz, set) && bit_test(ld->online, c))
				bit_set(ld->allowed, c);
	}
	if (set)
		CPU_FREE(set);
}

/* ------------------------------------------------------------------------ */
/* Pass 1: lines -> sections (the inih reader and handler) */

/* Characters of stage and job names: they appear in `input =`, messages and file names. */
#define NAME_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-."

static bool is_name_char(char c)
{
	return c && strchr(NAME_CHARS, c);
}

/* Mirror of inih's scan: first of @chars, or an inline ';' comment after a space. */
static const char *find_chars_or_comment(const char *s, const char *chars)
{
	bool was_space = false;

	while (*s && !strchr(chars, *s) && !(was_space && *s == ';')) {
		was_space = isspace((unsigned char)*s);
		s++;
	}
	return s;
}

static void open_section(struct loader *ld, const char *name, size_t len)
{
	struct section *s;
	char *copy;

	while (len && isspace((unsigned char)*name)) {
		name++;
		len--;
	}
	while (len && isspace((unsigned char)name[len - 1]))
		len--;
	copy = strndup(name, len);
	if (!copy) {
		ld->nomem = true;
		ld->cur = CUR_SKIP;
		return;
	}
	if (len == 0 || len > MAX_NAME_LEN || strspn(copy, NAME_CHARS) != len) {
		if (len == 0)
			errorf(ld, ld->lineno,
			       "empty section name '[]'; name the stage, e.g. [count]");
		else
			errorf(ld, ld->lineno,
			       "section name '%s' must be 1 to %u letters, digits, '_', '-' or '.'",
			       copy, MAX_NAME_LEN);
		free(copy);
		ld->cur = CUR_SKIP; /* its keys would only add noise */
		return;
	}
	for (uint32_t i = 0; i < ld->nsec; i++) {
		if (strcmp(ld->sec[i].name, copy) == 0) {
			errorf(ld, ld->lineno, "duplicate section [%s] (first at line %d); %s",
			       copy, ld->sec[i].line,
			       strcmp(copy, "job") == 0 ? "merge the two [job] sections"
							: "stage names must be unique");
			free(copy);
			ld->cur = CUR_SKIP;
			return;
		}
	}
	if (ld->nsec == ld->capsec) {
		uint32_t cap = ld->capsec ? 2 * ld->capsec : 8;

		s = realloc(ld->sec, cap * sizeof(*s));
		if (!s) {
			free(copy);
			ld->nomem = true;
			ld->cur = CUR_SKIP;
			return;
		}
		ld->sec = s;
		ld->capsec = cap;
	}
	s = &ld->sec[ld->nsec];
	memset(s, 0, sizeof(*s));
	s->name = copy;
	s->line = ld->lineno;
	ld->cur = (int)ld->nsec++;
}

/* Check one line (no indentation, no newline) the way inih will read it. */
static bool classify_line(struct loader *ld, const char *s)
{
	const char *end;

	if (!*s || *s == ';' || *s == '#')
		return true;
	if (*s == '[') {
		const char *rest;

		end = find_chars_or_comment(s + 1, "]");
		if (*end != ']') {
			errorf(ld, ld->lineno, "section header has no closing ']'");
			ld->cur = CUR_SKIP;
			return false;
		}
		for (rest = end + 1; isspace((unsigned char)*rest); rest++)
			;
		if (*rest && *rest != ';' && *rest != '#') {
			errorf(ld, ld->lineno, "unexpected text '%s' after the section header",
			       rest);
			ld->cur = CUR_SKIP;
			return false;
		}
		open_section(ld, s + 1, (size_t)(end - s - 1));
		return true;
	}
	end = find_chars_or_comment(s, "=:");
	if (*end != '=' && *end != ':') {
		errorf(ld, ld->lineno,
		       "expected 'key = value', '[section]' or a comment, got '%.60s'", s);
		return false;
	}
	if (end == s) {
		errorf(ld, ld->lineno, "missing key before '%c'", *end);
		return false;
	}
	return true;
}

/* Whether @s starts like a key line: key characters, blanks, then '=' or ':'. */
static bool looks_like_key(const char *s)
{
	size_t n = strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.");

	if (!n)
		return false;
	s += strspn(s + n, " \t") + n;
	return *s == '=' || *s == ':';
}

/*
 * An indented line that is not a key line, a comment or a section header:
 * the continuation of the previous key's value, appended to it after one
 * blank (inline comments and trailing blanks dropped, as inih does for the
 * key's own line). Continuation lines are not handed to inih, so they have
 * no length limit of their own.
 */
static void continue_value(struct loader *ld, const char *s)
{
	struct kv *kv;
	size_t len = (size_t)(find_chars_or_comment(s, "") - s), old;
	char *v;

	while (len && isspace((unsigned char)s[len - 1]))
		len--;
	if (ld->cont == CONT_IGNORE || len == 0)
		return;
	if (ld->cont == CONT_NONE || ld->cur < 0) {
		errorf(ld, ld->lineno,
		       "indented line '%.40s' continues no key: a continuation line must "
		       "follow a 'key = value' line or another continuation line",
		       s);
		ld->cont = CONT_IGNORE;
		return;
	}
	kv = &ld->sec[ld->cur].kv[ld->cont];
	if (!kv->cont_line)
		kv->cont_line = ld->lineno; /* load_params() checks the key takes a list */
	old = strlen(kv->value);
	v = realloc(kv->value, old + 1 + len + 1);
	if (!v) {
		ld->nomem = true;
		return;
	}
	if (old)
		v[old++] = ' ';
	memcpy(v + old, s, len);
	v[old + len] = '\0';
	kv->value = v;
}

/*
 * One line of ld->f into ld->buf, '\n' included, like getline(), but never
 * past CONF_MAX_BYTES in all (/dev/zero on standard input has no '\n').
 * Return: its length; -1 at the end or on an error; -2 past the limit (reported).
 */
static ssize_t read_bounded(struct loader *ld)
{
	size_t n = 0;
	int c;

	for (;;) {
		c = getc(ld->f);
		if (c == EOF)
			break;
		if (++ld->bytes > CONF_MAX_BYTES) {
			errorf(ld, 0, "is larger than 16 MiB, the limit of a topology; "
				      "nothing was read past it");
			ld->too_big = true;
			return -2;
		}
		if (n + 2 > ld->bufcap) {
			size_t cap = ld->bufcap ? ld->bufcap * 2 : 256;
			char *b = realloc(ld->buf, cap);

			if (!b) {
				ld->nomem = true;
				errno = ENOMEM;
				return -2;
			}
			ld->buf = b;
			ld->bufcap = cap;
		}
		ld->buf[n++] = (char)c;
		if (c == '\n')
			break;
	}
	if (n == 0)
		return -1;
	ld->buf[n] = '\0';
	return (ssize_t)n;
}

/*
 * An over-long line: a key line's error waits for load_params(), which knows
 * whether the key takes a list (then continuation lines help) or one value;
 * any other line is reported now.
 */
static void refuse_long_line(struct loader *ld, const char *s, int limit)
{
	size_t k = strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.");
	struct refused *r;

	if (ld->cur >= 0 && looks_like_key(s) && k < sizeof(r->key)) {
		r = realloc(ld->refused, (ld->nrefused + 1) * sizeof(*r));
		if (!r) {
			ld->nomem = true;
			return;
		}
		ld->refused = r;
		r = &r[ld->nrefused++];
		memset(r, 0, sizeof(*r));
		r->sec = ld->cur;
		memcpy(r->key, s, k);
		r->line = ld->lineno;
		return;
	}
	errorf(ld, ld->lineno,
	       "line is longer than %d characters, the INI parser's limit; shorten it, or "
	       "split a list value over indented continuation lines (see docs/topology.md)",
	       limit);
}

/* The refused over-long line of key @key in section @s, or NULL. */
static struct refused *find_refused(struct loader *ld, const struct section *s, const char *key)
{
	for (uint32_t i = 0; i < ld->nrefused; i++)
		if (&ld->sec[ld->refused[i].sec] == s && strcmp(ld->refused[i].key, key) == 0)
			return &ld->refused[i];
	return NULL;
}

/* Whether key @d's value is a blank- or comma-separated list (continuation lines allowed). */
static bool is_list_key(const struct shmrun_param_def *d)
{
	return d->type == SHMRUN_PARAM_PATHS || strcmp(d->key, "input") == 0;
}

/* Report over-long line @r of key @d (NULL: not known) in @what. */
static void report_refused(struct loader *ld, struct refused *r, const struct shmrun_param_def *d,
			   const char *what)
{
	if (r->reported)
		return;
	r->reported = true;
	if (d ? is_list_key(d) : strcmp(r->key, "input") == 0) /* input: read by load_graph() */
		errorf(ld, r->line,
		       "line of key '%s' in %s is longer than 197 characters, the INI parser's "
		       "limit; split its list over indented continuation lines (see "
		       "docs/topology.md)",
		       r->key, what);
	else if (!d)
		errorf(ld, r->line,
		       "line of key '%s' in %s is longer than 197 characters, the INI parser's "
		       "limit; shorten it (only list keys, such as file_source's path, continue "
		       "on indented lines)",
		       r->key, what);
	else
		errorf(ld, r->line,
		       "line of key '%s' in %s is longer than 197 characters, the INI parser's "
		       "limit; '%s' takes one value, so shorten it%s",
		       r->key, what, r->key,
		       d && (d->type == SHMRUN_PARAM_PATH)
			   ? " (e.g. a path relative to the conf file's directory)"
			   : "");
}

/* inih's reader: one physical line per call, checked and de-indented. */
static char *read_line(char *str, int num, void *stream)
{
	struct loader *ld = stream;
	ssize_t n;
	size_t len;
	char *s;
	bool indented;

	errno = 0;
	n = read_bounded(ld);
	if (n == -2)
		return NULL; /* over CONF_MAX_BYTES, reported */
	if (n < 0) {
		if (!feof(ld->f))
			ld->read_err = errno ? errno : EIO;
		return NULL;
	}
	ld->lineno++;
	s = ld->buf;
	len = (size_t)n;
	if (memchr(s, '\0', len)) {
		errorf(ld, ld->lineno, "line contains a NUL byte");
		goto blank;
	}
	while (len && (s[len - 1] == '\n' || s[len - 1] == '\r'))
		len--;
	s[len] = '\0';
	if (ld->lineno == 1 && len >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0) {
		s += 3;
		len -= 3;
	}
	indented = len && (*s == ' ' || *s == '\t');
	while (len && isspace((unsigned char)*s)) {
		s++;
		len--;
	}
	if (!len || *s == '[') /* a blank line or a section ends a value */
		ld->cont = CONT_NONE;
	if (len && *s != ';' && *s != '#' && *s != '[' && indented && !looks_like_key(s)) {
		continue_value(ld, s);
		goto blank;
	}
	/* inih wants 3 bytes to spare: '\r', '\n', NUL. */
	if (num < 4 || len > (size_t)num - 3) {
		refuse_long_line(ld, s, num - 3);
		ld->cont = CONT_IGNORE;
		goto blank;
	}
	if (len && *s != ';' && *s != '#' && *s != '[')
		ld->cont = CONT_IGNORE; /* a key line: on_key() says where it is stored */
	if (!classify_line(ld, s))
		goto blank;
	memcpy(str, s, len);
	str[len] = '\n';
	str[len + 1] = '\0';
	return str;

blank:
	str[0] = '\n';
	str[1] = '\0';
	return str;
}

static const char *section_what(const struct loader *ld, const struct section *s, char *buf,
				size_t len)
{
	if (ld->job_sec >= 0 && s == &ld->sec[ld->job_sec])
		snprintf(buf, len, "[job]");
	else
		snprintf(buf, len, "stage '%s'", s->name);
	return buf;
}

/* inih's handler: one key = value of the current section. */
static int on_key(void *user, const char *section, const char *name, const char *value)
{
	struct loader *ld = user;
	struct section *s;
	struct kv *kv;

	(void)section; /* inih truncates it at 50 bytes; ld->cur is exact */
	if (!value)
		value = "";
	if (ld->cur == CUR_SKIP)
		return 1;
	if (ld->cur == CUR_NONE) {
		errorf(ld, ld->lineno,
		       "key '%s' before any section; put it under [job] or under a stage's "
		       "[name]",
		       name);
		return 1;
	}
	s = &ld->sec[ld->cur];
	for (uint32_t i = 0; i < s->nkv; i++) {
		if (strcmp(s->kv[i].key, name) == 0) {
			bool job = strcmp(s->name, "job") == 0;

			errorf(ld, ld->lineno, "duplicate key '%s' in %s%s%s (first at line %d)",
			       name, job ? "[job]" : "stage '", job ? "" : s->name, job ? "" : "'",
			       s->kv[i].line);
			return 1;
		}
	}
	if (s->nkv == s->cap) {
		uint32_t cap = s->cap ? 2 * s->cap : 8;

		kv = realloc(s->kv, cap * sizeof(*kv));
		if (!kv)
			goto err_nomem;
		s->kv = kv;
		s->cap = cap;
	}
	kv = &s->kv[s->nkv];
	kv->key = strdup(name);
	kv->value = strdup(value);
	kv->line = ld->lineno;
	kv->cont_line = 0;
	if (!kv->key || !kv->value) {
		free(kv->key);
		free(kv->value);
		goto err_nomem;
	}
	ld->cont = (int)s->nkv; /* continuation lines extend this value */
	s->nkv++;
	return 1;

err_nomem:
	ld->nomem = true;
	return 0;
}

static const struct kv *find_kv(const struct section *s, const char *key)
{
	for (uint32_t i = 0; i < s->nkv; i++)
		if (strcmp(s->kv[i].key, key) == 0)
			return &s->kv[i];
	return NULL;
}

/* ------------------------------------------------------------------------ */
/* Typed values */

static const char *type_word(enum shmrun_param_type t)
{
	switch (t) {
	case SHMRUN_PARAM_COUNT:
		return "count";
	case SHMRUN_PARAM_SIZE:
		return "size";
	case SHMRUN_PARAM_RATE:
		return "rate";
	case SHMRUN_PARAM_BOOL:
		return "boolean";
	case SHMRUN_PARAM_DURATION:
		return "duration";
	case SHMRUN_PARAM_ENUM:
		return "choice";
	case SHMRUN_PARAM_PATH:
		return "path";
	case SHMRUN_PARAM_PATHS:
		return "path list";
	case SHMRUN_PARAM_STRING:
		break;
	}
	return "text";
}

static const char *type_form(enum shmrun_param_type t)
{
	switch (t) {
	case SHMRUN_PARAM_COUNT:
		return "an unsigned decimal integer, e.g. 4";
	case SHMRUN_PARAM_SIZE:
		return "bytes as an unsigned integer with an optional K, M, G or T suffix "
		       "(powers of 1024), e.g. 64K or 1M";
	case SHMRUN_PARAM_RATE:
		return "records per second as an unsigned decimal integer, e.g. 10000";
	case SHMRUN_PARAM_BOOL:
		return "true/false, yes/no, on/off or 1/0";
	case SHMRUN_PARAM_DURATION:
		return "an unsigned integer followed by ms or s, e.g. 500ms or 2s";
	case SHMRUN_PARAM_ENUM:
		return "one of the listed words";
	case SHMRUN_PARAM_PATH:
		return "a path (relative paths are taken from the conf file's directory)";
	case SHMRUN_PARAM_PATHS:
		return "one or more space-separated paths or glob patterns";
	case SHMRUN_PARAM_STRING:
		break;
	}
	return "non-empty text";
}

/* A value in the unit of its type, for range messages: "4K", "500ms", "12". */
static void fmt_unit(enum shmrun_param_type t, uint64_t v, char *buf, size_t len)
{
	if (t == SHMRUN_PARAM_SIZE && v && v % (1ull << 40) == 0)
		snprintf(buf, len, "%lluT", (unsigned long long)(v >> 40));
	else if (t == SHMRUN_PARAM_SIZE && v && v % (1ull << 30) == 0)
		snprintf(buf, len, "%lluG", (unsigned long long)(v >> 30));
	else if (t == SHMRUN_PARAM_SIZE && v && v % (1ull << 20) == 0)
		snprintf(buf, len, "%lluM", (unsigned long long)(v >> 20));
	else if (t == SHMRUN_PARAM_SIZE && v && v % (1ull << 10) == 0)
		snprintf(buf, len, "%lluK", (unsigned long long)(v >> 10));
	else if (t == SHMRUN_PARAM_DURATION && v % 1000000000ull == 0)
		snprintf(buf, len, "%llus", (unsigned long long)(v / 1000000000ull));
	else if (t == SHMRUN_PARAM_DURATION && v % 1000000ull == 0)
		snprintf(buf, len, "%llums", (unsigned long long)(v / 1000000ull));
	else if (t == SHMRUN_PARAM_DURATION)
		snprintf(buf, len, "%lluns", (unsigned long long)v);
	else
		snprintf(buf, len, "%llu", (unsigned long long)v);
}

/*
 * @v in the unit @written uses ("17179869184G" -> G, "9s" -> s, "9ms" -> ms,
 * "9" -> bytes), if it is a whole number of that unit; else as fmt_unit().
 */
static void fmt_unit_as(enum shmrun_param_type t, uint64_t v, const char *written, char *buf,
			size_t len)
{
	size_t n = written ? strlen(written) : 0;
	uint64_t mul = 0;
	const char *suffix = "";

	if (t == SHMRUN_PARAM_SIZE && n) {
		char c = written[n - 1];

		mul = c == 'T' ? 1ull << 40 : c == 'G' ? 1ull << 30 : c == 'M' ? 1ull << 20
		    : c == 'K' ? 1ull << 10 : 1;
		suffix = c == 'T' ? "T" : c == 'G' ? "G" : c == 'M' ? "M" : c == 'K' ? "K" : "";
	} else if (t == SHMRUN_PARAM_DURATION && n >= 2 && strcmp(written + n - 2, "ms") == 0) {
		mul = 1000000ull;
		suffix = "ms";
	} else if (t == SHMRUN_PARAM_DURATION && n >= 1 && written[n - 1] == 's') {
		mul = 1000000000ull;
		suffix = "s";
	}
	if (mul && v % mul == 0)
		snprintf(buf, len, "%llu%s", (unsigned long long)(v / mul), suffix);
	else
		fmt_unit(t, v, buf, len);
}

/*
 * "MIN to MAX" of a key in natural units ("4K to 1G"), followed by the maximum
 * in the unit of the value @written when that reads differently, so a user who
 * wrote "10000000000s" or "2000000K" sees the bound in their own unit:
 * "1ms to 31536000s", "4K to 1G (1048576K)".
 */
static const char *fmt_range(enum shmrun_param_type t, uint64_t min, uint64_t max,
			     const char *written, char *buf, size_t len)
{
	char a[32], b[32], c[32];

	if (t == SHMRUN_PARAM_RATE && min == 0)
		min = 1;
	fmt_unit(t, min, a, sizeof(a));
	fmt_unit(t, max, b, sizeof(b));
	fmt_unit_as(t, max, written, c, sizeof(c));
	if (max && strcmp(b, c) != 0)
		snprintf(buf, len, "%s to %s (%s)", a, b, c);
	else if (max)
		snprintf(buf, len, "%s to %s", a, b);
	else
		snprintf(buf, len, "at least %s", a);
	return buf;
}

/* @rel against @dir: "./x" -> "dir/x"; absolute paths are kept. */
static char *resolve_path(const char *dir, const char *rel, size_t len)
{
	char *out;

	if (len && rel[0] == '/')
		return strndup(rel, len);
	while (len >= 2 && rel[0] == '.' && rel[1] == '/') {
		rel += 2;
		len -= 2;
		while (len && rel[0] == '/') {
			rel++;
			len--;
		}
	}
	if (len == 0 || (len == 1 && rel[0] == '.'))
		return strdup(dir);
	if (asprintf(&out, "%s%s%.*s", dir, strcmp(dir, "/") == 0 ? "" : "/", (int)len, rel) < 0)
		return NULL;
	return out;
}

/* Space-separated paths, each resolved, joined by single spaces. */
static char *resolve_paths(const char *dir, const char *value)
{
	char *out = strdup(""), *tmp;
	const char *p = value;

	while (out && *p) {
		size_t n;
		char *one;

		while (isspace((unsigned char)*p))
			p++;
		for (n = 0; p[n] && !isspace((unsigned char)p[n]); n++)
			;
		if (!n)
			break;
		one = resolve_path(dir, p, n);
		/* joined by newlines: a resolved path may contain blanks (the conf
		 * file's directory), a newline it cannot */
		if (!one || asprintf(&tmp, "%s%s%s", out, *out ? "\n" : "", one) < 0)
			tmp = NULL;
		free(one);
		free(out);
		out = tmp;
		p += n;
	}
	return out;
}

static int parse_bool(const char *s, uint64_t *v)
{
	static const char *const yes[] = {"true", "yes", "on", "1"};
	static const char *const no[] = {"false", "no", "off", "0"};

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*v = 1;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*v = 0;
			return 0;
		}
	}
	return -EINVAL;
}

/* Index of @s among the space-separated @choices, or -1. */
static int enum_index(const char *choices, const char *s)
{
	size_t len = strlen(s);
	int i = 0;

	for (const char *c = choices; c && *c; i++) {
		size_t n = strcspn(c, " ");

		if (n == len && strncmp(c, s, n) == 0)
			return i;
		c += n;
		while (*c == ' ')
			c++;
	}
	return -1;
}

/*
 * Check @value of key @d in @what ("[job]", "stage 'x'"), written at @line.
 * On success *@text is the value to store (allocated; paths resolved) and *@u64
 * its number. Return: 0; 1 if wrong (reported); -ENOMEM.
 */
static int check_value(struct loader *ld, const char *what, const struct shmrun_param_def *d,
		       const char *value, int line, char **text, uint64_t *u64)
{
	char range[128];
	uint64_t v = 0;
	int r = 0;

	*text = NULL;
	*u64 = 0;
	if (!*value) {
		errorf(ld, line, "%s in %s has an empty value; expected %s", d->key, what,
		       type_form(d->type));
		return 1;
	}
	switch (d->type) {
	case SHMRUN_PARAM_COUNT:
	case SHMRUN_PARAM_RATE:
		r = shmrun_parse_count(value, &v);
		break;
	case SHMRUN_PARAM_SIZE:
		r = shmrun_parse_size(value, &v);
		break;
	case SHMRUN_PARAM_DURATION:
		r = shmrun_parse_duration(value, &v);
		break;
	case SHMRUN_PARAM_BOOL:
		r = parse_bool(value, &v);
		break;
	case SHMRUN_PARAM_ENUM: {
		int i = enum_index(d->choices, value);

		if (i < 0) {
			const char *w[16] = {0}, *near;
			uint32_t n = 0;
			char list[256];

			for (const char *c = d->choices; c && *c && n < 16;) {
				size_t k = strcspn(c, " ");

				w[n] = strndup(c, k);
				if (!w[n]) {
					ld->nomem = true;
					break;
				}
				n++;
				c += k;
				while (*c == ' ')
					c++;
			}
			near = nearest(value, w, n);
			errorf(ld, line, "%s = '%s' in %s is not one of: %s%s%s%s", d->key, value,
			       what, join_words(list, sizeof(list), w, n),
			       near ? "; did you mean '" : "", near ? near : "", near ? "'?" : "");
			for (uint32_t j = 0; j < n; j++)
				free((char *)w[j]);
			return 1;
		}
		v = (uint64_t)i;
		break;
	}
	case SHMRUN_PARAM_PATH:
		*text = resolve_path(ld->job->conf_dir, value, strlen(value));
		return *text ? 0 : -ENOMEM;
	case SHMRUN_PARAM_PATHS:
		*text = resolve_paths(ld->job->conf_dir, value);
		return *text ? 0 : -ENOMEM;
	case SHMRUN_PARAM_STRING:
		break;
	}
	if (r == -EINVAL) {
		errorf(ld, line, "%s = '%s' in %s is not a valid %s; expected %s", d->key, value,
		       what, type_word(d->type), type_form(d->type));
		return 1;
	}
	if (r == -ERANGE) {
		if (d->max)
			errorf(ld, line, "%s = '%s' in %s is too large; expected %s", d->key, value,
			       what,
			       fmt_range(d->type, d->min, d->max, value, range, sizeof(range)));
		else
			errorf(ld, line, "%s = '%s' in %s is too large; it does not fit in 64 bits",
			       d->key, value, what);
		return 1;
	}
	if (d->type == SHMRUN_PARAM_COUNT || d->type == SHMRUN_PARAM_SIZE ||
	    d->type == SHMRUN_PARAM_RATE || d->type == SHMRUN_PARAM_DURATION) {
		if (v < d->min || (d->max && v > d->max) || (d->type == SHMRUN_PARAM_RATE && !v)) {
			errorf(ld, line, "%s = '%s' in %s is out of range; expected %s", d->key,
			       value, what,
			       fmt_range(d->type, d->min, d->max, value, range, sizeof(range)));
			return 1;
		}
	}
	*text = strdup(value);
	*u64 = v;
	return *text ? 0 : -ENOMEM;
}

/*
 * Fill @out (one per entry of table @defs, same order) from section @s:
 * given keys are checked, absent ones take their default (line 0), absent
 * required ones are errors at the section header. Return: 0 or -ENOMEM.
 */
static int load_params(struct loader *ld, const struct section *s, const char *what,
		       const char *opname, const struct shmrun_param_def *defs,
		       struct shmrun_param *out)
{
	for (uint32_t i = 0; defs[i].key; i++) {
		const struct shmrun_param_def *d = &defs[i];
		const struct kv *kv = find_kv(s, d->key);
		int r = 0;

		out[i].def = d;
		if (kv && kv->cont_line && !is_list_key(d)) {
			errorf(ld, kv->cont_line,
			       "indented line continues key '%s' in %s (line %d), which takes one "
			       "value, not a list: the value would become '%.60s'; write it on the "
			       "key's line (continuation lines extend list keys only, such as "
			       "file_source's path)",
			       d->key, what, kv->line, kv->value);
			r = 1;
		} else if (kv) {
			r = check_value(ld, what, d, kv->value, kv->line, &out[i].value,
					&out[i].u64);
			out[i].line = kv->line;
		} else if (d->def) {
			r = check_value(ld, what, d, d->def, s->line, &out[i].value, &out[i].u64);
			out[i].line = 0;
		} else if (find_refused(ld, s, d->key)) {
			/* its line was refused: no follow-on "missing" error */
			report_refused(ld, find_refused(ld, s, d->key), d, what);
		} else if (d->required) {
			errorf(ld, s->line, "%s%s%s%s is missing required key '%s' (%s)", what,
			       opname ? " (op " : "", opname ? opname : "", opname ? ")" : "",
			       d->key, d->doc ? d->doc : type_form(d->type));
		}
		if (r < 0)
			return r;
	}
	return 0;
}

/* Report every key of @s that is in none of the tables @t1, @t2. */
static void check_unknown_keys(struct loader *ld, const struct section *s, const char *what,
			       const struct shmrun_param_def *t1, const struct shmrun_param_def *t2)
{
	const char *keys[64];
	uint32_t n = table_keys(t1, keys, 0, 64);

	n = table_keys(t2, keys, n, 64);
	for (uint32_t i = 0; i < s->nkv; i++) {
		const char *key = s->kv[i].key, *near;
		bool known = false;
		char list[512];

		for (uint32_t j = 0; j < n && !known; j++)
			known = strcmp(keys[j], key) == 0;
		if (known)
			continue;
		near = nearest(key, keys, n);
		if (near)
			errorf(ld, s->kv[i].line, "unknown key '%s' in %s; did you mean '%s'?", key,
			       what, near);
		else
			errorf(ld, s->kv[i].line, "unknown key '%s' in %s; accepted keys: %s", key,
			       what, join_words(list, sizeof(list), keys, n));
	}
}

static void params_free(struct shmrun_param *p, uint32_t n)
{
	for (uint32_t i = 0; p && i < n; i++)
		free(p[i].value);
	free(p);
}

/* ------------------------------------------------------------------------ */
/* Pass 2: [job] */

enum {
	JK_NAME,
	JK_WORKERS,
	JK_CPUS,
	JK_VNODES,
	JK_RING_BYTES,
	JK_IDLE,
	JK_CKPT_DIR,
	JK_CKPT_INTERVAL,
	JK_CKPT_TIMEOUT,
	JK_CKPT_RETAIN,
	JK_RESTART_ATTEMPTS,
	JK_UNION_LIMIT,
	JK_PW_WARN,
	JK_COUNT,
};

/* clang-format off */
/* The [job] keys, in the order of the JK_* indices (docs/topology.md lists them). */
static const struct shmrun_param_def job_keys[] = {
	[JK_NAME] = {.key = "name", .type = SHMRUN_PARAM_STRING,
		     .doc = "job name (default: the conf file's name without .conf)"},
	[JK_WORKERS] = {.key = "workers", .type = SHMRUN_PARAM_COUNT, .min = 1,
			.max = MAX_WORKERS, .doc = "worker processes (default 1)"},
	[JK_CPUS] = {.key = "cpus", .type = SHMRUN_PARAM_STRING,
		     .doc = "one worker per listed CPU, e.g. 0-3,8"},
	[JK_VNODES] = {.key = "vnodes", .type = SHMRUN_PARAM_COUNT, .def = "256", .min = 1,
		       .max = MAX_VNODES, .doc = "key buckets V"},
	[JK_RING_BYTES] = {.key = "ring_bytes", .type = SHMRUN_PARAM_SIZE, .def = "1M",
			   .min = SHMRUN_RING_MIN_CAPACITY, .max = SHMRUN_RING_MAX_CAPACITY,
			   .doc = "capacity of each ring, a power of two"},
	[JK_IDLE] = {.key = "idle", .type = SHMRUN_PARAM_ENUM, .def = "hybrid",
		     .choices = "spin sleep hybrid", .doc = "what an idle worker does"},
	[JK_CKPT_DIR] = {.key = "checkpoint_dir", .type = SHMRUN_PARAM_PATH,
			 .doc = "where checkpoints go (absent: no checkpoints)"},
	[JK_CKPT_INTERVAL] = {.key = "checkpoint_interval", .type = SHMRUN_PARAM_DURATION,
			      .def = "500ms", .min = 1000000, .max = MAX_DURATION_NS,
			      .doc = "time between checkpoints"},
	[JK_CKPT_TIMEOUT] = {.key = "checkpoint_timeout", .type = SHMRUN_PARAM_DURATION,
			     .def = "60s", .min = 1000000, .max = MAX_DURATION_NS,
			     .doc = "a checkpoint not complete by then fails"},
	[JK_CKPT_RETAIN] = {.key = "checkpoint_retain", .type = SHMRUN_PARAM_COUNT, .def = "2",
			    .min = 1, .max = 1000000, .doc = "complete checkpoints kept"},
	[JK_RESTART_ATTEMPTS] = {.key = "restart_attempts", .type = SHMRUN_PARAM_COUNT,
				 .def = "10", .max = 1000000,
				 .doc = "restarts after a crash before the job gives up"},
	[JK_UNION_LIMIT] = {.key = "union_state_limit", .type = SHMRUN_PARAM_SIZE, .def = "64M",
			    .min = 1, .max = 1ull << 40,
			    .doc = "largest pool of union per-worker state a rescale hands to "
				   "every instance"},
	[JK_PW_WARN] = {.key = "per_worker_state_warn", .type = SHMRUN_PARAM_SIZE, .def = "1M",
			.min = 1, .max = 1ull << 40,
			.doc = "warn when an instance's per-worker state passes this size"},
	[JK_COUNT] = {0},
};

/* Stage keys every operator accepts, besides its own. */
static const struct shmrun_param_def stage_keys[] = {
	{.key = "op", .type = SHMRUN_PARAM_STRING, .required = true, .doc = "the operator"},
	{.key = "width", .type = SHMRUN_PARAM_COUNT, .def = "1", .min = 1, .max = MAX_VNODES,
	 .doc = "parallelism, 1..vnodes"},
	{.key = "input", .type = SHMRUN_PARAM_STRING, .doc = "upstream stages and edge kinds"},
	{0},
};
/* clang-format on */

const struct shmrun_param_def *shmrun_job_keys(void)
{
	return job_keys;
}

const struct shmrun_param_def *shmrun_stage_keys(void)
{
	return stage_keys;
}

static bool valid_name(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > MAX_NAME_LEN)
		return false;
	for (; *s; s++)
		if (!is_name_char(*s))
			return false;
	return true;
}

/* Longest checkpoint_dir: see job.h. */
enum { CKPT_DIR_MAX = SHMRUN_CKPT_DIR_MAX };

/* Default job name: the file's base name without ".conf", made a valid name. */
static char *default_name(const char *path)
{
	const char *base = strrchr(path, '/');
	size_t n;
	char *out;

	if (strcmp(path, SHMRUN_STDIN_NAME) == 0)
		return strdup("stdin");
	base = base ? base + 1 : path;
	n = strlen(base);
	if (n > 5 && strcmp(base + n - 5, ".conf") == 0)
		n -= 5;
	if (n > MAX_NAME_LEN)
		n = MAX_NAME_LEN;
	if (n == 0)
		return strdup("job");
	out = strndup(base, n);
	for (size_t i = 0; out && i < n; i++)
		if (!is_name_char(out[i]))
			out[i] = '_';
	return out;
}

static int load_cpus(struct loader *ld, const struct shmrun_param *p)
{
	struct shmrun_job *job = ld->job;
	const struct shmrun_param *cp = &p[JK_CPUS], *wp = &p[JK_WORKERS];
	uint64_t map[CPU_WORDS];
	char list[256];
	uint32_t nallowed = 0;
	int32_t *allowed;
	int32_t dup;
	int r;

	if (cp->line && wp->line) {
		errorf(ld, cp->line > wp->line ? cp->line : wp->line,
		       "both 'workers' (line %d) and 'cpus' (line %d) are given in [job]; use "
		       "one: workers = N, or cpus = LIST for one pinned worker per CPU",
		       wp->line, cp->line);
		return 0;
	}
	if (cp->line && cp->value) {
		r = parse_cpulist(cp->value, map, &dup);
		if (r == -EINVAL) {
			errorf(ld, cp->line,
			       "cpus = '%s' in [job] is not a valid CPU list; expected CPU numbers "
			       "and ranges separated by commas, e.g. 0-3,8",
			       cp->value);
			return 0;
		}
		if (r == -ERANGE) {
			errorf(ld, cp->line,
			       "cpus = '%s' in [job] names a CPU above %u; CPU numbers go from 0 "
			       "to %u (online CPUs: %s)",
			       cp->value, MAX_CPU, MAX_CPU,
			       fmt_cpulist(ld->online, list, sizeof(list)));
			return 0;
		}
		if (dup >= 0) {
			errorf(ld, cp->line, "cpus = '%s' in [job] lists CPU %d twice", cp->value,
			       dup);
			return 0;
		}
		for (uint32_t c = 0; c <= MAX_CPU; c++) {
			if (!bit_test(map, c))
				continue;
			if (!bit_test(ld->online, c)) {
				errorf(ld, cp->line,
				       "cpus = '%s' in [job]: CPU %u is not online (online CPUs: "
				       "%s)",
				       cp->value, c, fmt_cpulist(ld->online, list, sizeof(list)));
				return 0;
			} else if (!bit_test(ld->allowed, c)) {
				errorf(ld, cp->line,
				       "cpus = '%s' in [job]: CPU %u is online but not in this "
				       "process's CPU affinity mask (allowed: %s)",
				       cp->value, c, fmt_cpulist(ld->allowed, list, sizeof(list)));
				return 0;
			}
		}
		r = cpulist_array(map, &job->cpus, &job->workers);
		if (r)
			return r;
		job->cpus_listed = true;
		return 0;
	}

	/* workers = N (default 1): round-robin over the CPUs this process may use. */
	job->workers = wp->value ? (uint32_t)wp->u64 : 1;
	r = cpulist_array(ld->allowed, &allowed, &nallowed);
	if (r)
		return r;
	job->cpus = malloc(job->workers * sizeof(*job->cpus));
	if (!job->cpus) {
		free(allowed);
		return -ENOMEM;
	}
	for (uint32_t k = 0; k < job->workers; k++)
		job->cpus[k] = nallowed ? allowed[k % nallowed] : (int32_t)k;
	free(allowed);
	if (job->workers > nallowed && nallowed)
		warnf(ld, wp->line ? wp->line : 1,
		      "workers = %u exceeds the %u CPUs this process may run on (%s); workers "
		      "share CPUs round-robin, expect lower throughput",
		      job->workers, nallowed, fmt_cpulist(ld->allowed, list, sizeof(list)));
	return 0;
}

static int load_job(struct loader *ld)
{
	static const struct section empty = {.name = (char *)"job", .line = 1};
	struct shmrun_param p[JK_COUNT];
	struct shmrun_job *job = ld->job;
	const struct section *s = ld->job_sec >= 0 ? &ld->sec[ld->job_sec] : &empty;
	bool vnodes_bad;
	int r;

	memset(p, 0, sizeof(p));
	check_unknown_keys(ld, s, "[job]", job_keys, NULL);
	r = load_params(ld, s, "[job]", NULL, job_keys, p);
	if (r)
		goto out;

	if (p[JK_NAME].value && !valid_name(p[JK_NAME].value))
		errorf(ld, p[JK_NAME].line,
		       "name = '%s' in [job] must be 1 to %u letters, digits, '_', '-' or '.'",
		       p[JK_NAME].value, MAX_NAME_LEN);
	job->name = p[JK_NAME].value ? strdup(p[JK_NAME].value) : default_name(job->conf_path);
	if (!job->name) {
		r = -ENOMEM;
		goto out;
	}

	vnodes_bad = p[JK_VNODES].value == NULL;
	ld->vnodes_ok = !vnodes_bad;
	job->vnodes = vnodes_bad ? 256 : (uint32_t)p[JK_VNODES].u64;

	job->ring_bytes = p[JK_RING_BYTES].value ? p[JK_RING_BYTES].u64 : 1u << 20;
	if (p[JK_RING_BYTES].value && (job->ring_bytes & (job->ring_bytes - 1)))
		errorf(ld, p[JK_RING_BYTES].line,
		       "ring_bytes = '%s' in [job] is not a power of two; expected e.g. 64K, "
		       "1M or 16M",
		       p[JK_RING_BYTES].value);

	job->idle = SHMRUN_IDLE_HYBRID;
	if (p[JK_IDLE].value && strcmp(p[JK_IDLE].value, "spin") == 0)
		job->idle = SHMRUN_IDLE_SPIN;
	else if (p[JK_IDLE].value && strcmp(p[JK_IDLE].value, "sleep") == 0)
		job->idle = SHMRUN_IDLE_SLEEP;

	if (p[JK_CKPT_DIR].value) {
		struct stat st;

		if (stat(p[JK_CKPT_DIR].value, &st) == 0 && !S_ISDIR(st.st_mode))
			errorf(ld, p[JK_CKPT_DIR].line,
			       "checkpoint_dir = %s exists and is not a directory; name a directory "
			       "(it is created if missing)",
			       p[JK_CKPT_DIR].value);
		/* room inside it for reset-<time>/ckpt-<epoch>/<stage>.<instance>.state:
		 * no path built from it is ever cut short */
		if (strlen(p[JK_CKPT_DIR].value) > CKPT_DIR_MAX)
			errorf(ld, p[JK_CKPT_DIR].line,
			       "checkpoint_dir is too long (%zu bytes; at most %d, to leave room for "
			       "ckpt-<epoch>/<stage>.<instance>.state inside it); use a shorter path: "
			       "%s",
			       strlen(p[JK_CKPT_DIR].value), CKPT_DIR_MAX, p[JK_CKPT_DIR].value);
		job->checkpoint_dir = p[JK_CKPT_DIR].value;
		job->checkpoint_dir_line = p[JK_CKPT_DIR].line;
		p[JK_CKPT_DIR].value = NULL;
	} else {
		static const int ck[] = {JK_CKPT_INTERVAL, JK_CKPT_TIMEOUT, JK_CKPT_RETAIN,
					 JK_RESTART_ATTEMPTS};

		for (size_t i = 0; i < sizeof(ck) / sizeof(ck[0]); i++)
			if (p[ck[i]].line)
				warnf(ld, p[ck[i]].line,
				      "%s has no effect without checkpoint_dir (checkpoints are "
				      "off)",
				      job_keys[ck[i]].key);
	}
	job->checkpoint_interval_ns =
	    p[JK_CKPT_INTERVAL].value ? p[JK_CKPT_INTERVAL].u64 : 500000000ull;
	job->checkpoint_timeout_ns =
	    p[JK_CKPT_TIMEOUT].value ? p[JK_CKPT_TIMEOUT].u64 : 60000000000ull;
	job->checkpoint_retain = p[JK_CKPT_RETAIN].value ? (uint32_t)p[JK_CKPT_RETAIN].u64 : 2;
	job->restart_attempts =
	    p[JK_RESTART_ATTEMPTS].value ? (uint32_t)p[JK_RESTART_ATTEMPTS].u64 : 10;
	job->union_state_limit = p[JK_UNION_LIMIT].value ? p[JK_UNION_LIMIT].u64 : 64ull << 20;
	job->per_worker_state_warn = p[JK_PW_WARN].value ? p[JK_PW_WARN].u64 : 1ull << 20;
	r = load_cpus(ld, p);

out:
	for (uint32_t i = 0; i < JK_COUNT; i++)
		free(p[i].value);
	return r;
}

/* ------------------------------------------------------------------------ */
/* Pass 2: stages */

static bool near_job(const char *name)
{
	return edit_distance(name, "job") <= 1;
}

static int load_stage(struct loader *ld, uint32_t idx)
{
	struct shmrun_stage *st = &ld->job->stages[idx];
	const struct section *s = ld->stage_sec[idx];
	const struct kv *op = find_kv(s, "op"), *width = find_kv(s, "width");
	const struct shmrun_operator *const *all = shmrun_operators();
	char what[MAX_NAME_LEN + 16];
	uint32_t nparams = 0;
	int r;

	section_what(ld, s, what, sizeof(what));
	st->name = strdup(s->name);
	if (!st->name)
		return -ENOMEM;
	st->line = s->line;
	st->width = 1;
	ld->input[idx] = find_kv(s, "input");

	if (!op && find_refused(ld, s, "op")) {
		ld->ops_ok = false; /* its line was refused */
	} else if (!op) {
		if (near_job(s->name) || find_kv(s, "workers") || find_kv(s, "vnodes"))
			errorf(ld, s->line,
			       "stage [%s] has no 'op' key; did you mean [job]? (every section "
			       "other than [job] is a stage)",
			       s->name);
		else
			errorf(ld, s->line,
			       "stage '%s' is missing required key 'op' (the operator, e.g. "
			       "op = count)",
			       s->name);
		ld->ops_ok = false;
	} else {
		st->op = shmrun_operator_find(op->value);
		if (!st->op) {
			const char *names[32], *near;
			uint32_t n = 0;
			char list[512];

			for (; n < 32 && all[n]; n++)
				names[n] = all[n]->name;
			near = nearest(op->value, names, n);
			if (near)
				errorf(ld, op->line,
				       "unknown operator '%s' in stage '%s'; did you mean '%s'?",
				       op->value, s->name, near);
			else
				errorf(ld, op->line,
				       "unknown operator '%s' in stage '%s'; known operators: %s",
				       op->value, s->name,
				       join_words(list, sizeof(list), names, n));
			ld->ops_ok = false;
		}
	}

	if (width) {
		struct shmrun_param_def wd = stage_keys[1];
		uint32_t vmax = ld->vnodes_ok ? ld->job->vnodes : MAX_VNODES;
		char *text;
		uint64_t v;

		/* past vnodes (but within MAX_VNODES) has its own message below */
		r = check_value(ld, what, &wd, width->value, width->line, &text, &v);
		if (r < 0)
			return r;
		free(text);
		if (r == 0 && v > vmax) {
			errorf(ld, width->line,
			       "width = %llu of stage '%s' exceeds vnodes = %u: every instance "
			       "needs at least one vnode; lower the width or raise vnodes in [job]",
			       (unsigned long long)v, s->name, vmax);
			r = 1;
		}
		if (r == 0)
			st->width = (uint32_t)v;
		ld->width_ok[idx] = r == 0;
	} else {
		ld->width_ok[idx] = true;
	}

	if (!st->op)
		return 0;
	check_unknown_keys(ld, s, what, stage_keys, st->op->params);
	for (const struct shmrun_param_def *d = st->op->params; d && d->key; d++)
		nparams++;
	st->params = calloc(nparams ? nparams : 1, sizeof(*st->params));
	if (!st->params)
		return -ENOMEM;
	st->nparams = nparams;
	if (!nparams)
		return 0;
	return load_params(ld, s, what, st->op->name, st->op->params, st->params);
}

/* ------------------------------------------------------------------------ */
/* Pass 3: the graph */

static int stage_index(const struct shmrun_job *job, const char *name, size_t len)
{
	for (uint32_t i = 0; i < job->nstages; i++)
		if (strlen(job->stages[i].name) == len &&
		    strncmp(job->stages[i].name, name, len) == 0)
			return (int)i;
	return -1;
}

static int add_edge(struct loader *ld, uint32_t *cap, uint32_t from, uint32_t to,
		    enum shmrun_edge_kind kind, int line)
{
	struct shmrun_job *job = ld->job;

	if (job->nedges == *cap) {
		uint32_t c = *cap ? 2 * *cap : 8;
		struct shmrun_edge *e = realloc(job->edges, c * sizeof(*e));

		if (!e)
			return -ENOMEM;
		job->edges = e;
		*cap = c;
	}
	job->edges[job->nedges++] =
	    (struct shmrun_edge){.from = from, .to = to, .kind = kind, .line = line};
	return 0;
}

static bool word_is(const char *tok, size_t len, const char *word)
{
	return len == strlen(word) && strncmp(tok, word, len) == 0;
}

/* One element of `input =`: "a", "a by key", "a rebalance", "a broadcast", "a forward". */
static int parse_input_item(struct loader *ld, uint32_t to, const char *item, size_t len, int line,
			    uint32_t *cap)
{
	struct shmrun_job *job = ld->job;
	const char *tok[4];
	size_t tlen[4];
	uint32_t ntok = 0;
	enum shmrun_edge_kind kind = SHMRUN_EDGE_FORWARD;
	bool explicit_kind = true;
	int from;

	for (size_t i = 0; i < len;) {
		while (i < len && isspace((unsigned char)item[i]))
			i++;
		if (i == len)
			break;
		if (ntok == 4) {
			ntok++;
			break;
		}
		tok[ntok] = item + i;
		while (i < len && !isspace((unsigned char)item[i]))
			i++;
		tlen[ntok] = (size_t)(item + i - tok[ntok]);
		ntok++;
	}
	if (ntok == 1)
		explicit_kind = false;
	else if (ntok == 2 && word_is(tok[1], tlen[1], "rebalance"))
		kind = SHMRUN_EDGE_REBALANCE;
	else if (ntok == 2 && word_is(tok[1], tlen[1], "broadcast"))
		kind = SHMRUN_EDGE_BROADCAST;
	else if (ntok == 2 && word_is(tok[1], tlen[1], "forward"))
		kind = SHMRUN_EDGE_FORWARD;
	else if (ntok == 3 && word_is(tok[1], tlen[1], "by") && word_is(tok[2], tlen[2], "key"))
		kind = SHMRUN_EDGE_SHUFFLE;
	else
		ntok = 0;
	if (ntok == 0) {
		errorf(ld, line,
		       "input '%.*s' of stage '%s' is not valid; expected STAGE, 'STAGE by key', "
		       "'STAGE rebalance', 'STAGE broadcast' or 'STAGE forward', several "
		       "separated by commas",
		       (int)len, item, job->stages[to].name);
		ld->edges_missing = true;
		return 0;
	}

	from = stage_index(job, tok[0], tlen[0]);
	if (from < 0) {
		const char **names = malloc((job->nstages ? job->nstages : 1) * sizeof(*names));
		const char *near;
		char list[512];
		char *want = strndup(tok[0], tlen[0]);

		if (!names || !want) {
			free(names);
			free(want);
			return -ENOMEM;
		}
		for (uint32_t i = 0; i < job->nstages; i++)
			names[i] = job->stages[i].name;
		near = nearest(want, names, job->nstages);
		if (near)
			errorf(ld, line,
			       "unknown stage '%s' in input of stage '%s'; did you mean '%s'?",
			       want, job->stages[to].name, near);
		else
			errorf(ld, line, "unknown stage '%s' in input of stage '%s'; stages: %s",
			       want, job->stages[to].name,
			       join_words(list, sizeof(list), names, job->nstages));
		free(names);
		free(want);
		ld->edges_missing = true;
		return 0;
	}
	for (uint32_t e = 0; e < job->nedges; e++) {
		if (job->edges[e].to == to && job->edges[e].from == (uint32_t)from) {
			errorf(ld, line, "stage '%s' is named twice in the input of stage '%s'",
			       job->stages[from].name, job->stages[to].name);
			ld->edges_missing = true;
			return 0;
		}
	}
	if (ld->width_ok[from] && ld->width_ok[to]) {
		bool equal = job->stages[from].width == job->stages[to].width;

		if (!explicit_kind)
			kind = equal ? SHMRUN_EDGE_FORWARD : SHMRUN_EDGE_REBALANCE;
		else if (kind == SHMRUN_EDGE_FORWARD && !equal)
			errorf(ld, line,
			       "input '%s forward' of stage '%s': a forward edge needs equal "
			       "widths, but '%s' has width %u and '%s' width %u; make the widths "
			       "equal or use 'by key', 'rebalance' or 'broadcast'",
			       job->stages[from].name, job->stages[to].name, job->stages[from].name,
			       job->stages[from].width, job->stages[to].name,
			       job->stages[to].width);
		/* Between two width-1 stages every routing sends each record to
		 * the one downstream instance in order: the same as a forward edge,
		 * which is a direct call instead of a ring. */
		if (job->stages[from].width == 1 && job->stages[to].width == 1)
			kind = SHMRUN_EDGE_FORWARD;
	}
	return add_edge(ld, cap, (uint32_t)from, to, kind, line);
}

/*
 * Depth-first search from @u for back edges: each one closes a cycle, which
 * is reported at the `input` line that closes it.
 */
static void find_cycles(struct loader *ld, uint32_t u, uint8_t *color, uint32_t *path,
			uint32_t depth, bool *on_cycle)
{
	struct shmrun_job *job = ld->job;

	color[u] = 1;
	path[depth] = u;
	for (uint32_t e = 0; e < job->nedges; e++) {
		uint32_t v = job->edges[e].to;

		if (job->edges[e].from != u)
			continue;
		if (color[v] == 0) {
			find_cycles(ld, v, color, path, depth + 1, on_cycle);
		} else if (color[v] == 1) {
			char chain[512];
			size_t off = 0;
			uint32_t k = depth + 1;

			while (k > 0 && path[k - 1] != v)
				k--;
			chain[0] = '\0';
			for (uint32_t j = k ? k - 1 : 0; j <= depth; j++) {
				int r = snprintf(chain + off, sizeof(chain) - off, "%s -> ",
						 job->stages[path[j]].name);

				on_cycle[path[j]] = true;
				if (r < 0 || (size_t)r >= sizeof(chain) - off)
					break;
				off += (size_t)r;
			}
			snprintf(chain + off, sizeof(chain) - off, "%s", job->stages[v].name);
			errorf(ld, job->edges[e].line,
			       "input of stage '%s' closes a cycle: %s; a topology must be acyclic",
			       job->stages[v].name, chain);
		}
	}
	color[u] = 2;
}

static int load_graph(struct loader *ld)
{
	struct shmrun_job *job = ld->job;
	uint32_t n = job->nstages, cap = 0, nsinks = 0, *queue = NULL, *path = NULL;
	uint8_t *color = NULL;
	bool *on_cycle = NULL, *reached = NULL, *has_out = NULL;
	int r;

	for (uint32_t i = 0; i < n; i++) {
		const struct kv *in = ld->input[i];
		const char *p;

		if (!in)
			continue;
		if (!*in->value) {
			errorf(ld, in->line,
			       "input in stage '%s' has an empty value; name the "
			       "stage it reads from",
			       job->stages[i].name);
			ld->edges_missing = true;
			continue;
		}
		for (p = in->value;;) {
			size_t len = strcspn(p, ",");
			size_t k = 0;

			while (k < len && isspace((unsigned char)p[k]))
				k++;
			if (k == len) {
				errorf(ld, in->line,
				       "input of stage '%s' has an empty entry; separate stages "
				       "with single commas",
				       job->stages[i].name);
				ld->edges_missing = true;
			} else {
				r = parse_input_item(ld, i, p, len, in->line, &cap);
				if (r)
					return r;
			}
			if (!p[len])
				break;
			p += len + 1;
		}
	}

	if (n == 0) {
		errorf(ld, ld->job_sec >= 0 ? ld->sec[ld->job_sec].line : 1,
		       "no stages: a job needs at least a source stage and a sink stage, e.g. "
		       "[read] op = file_source and [out] op = file_sink");
		return 0;
	}

	r = -ENOMEM;
	color = calloc(n, sizeof(*color));
	path = calloc(n + 1, sizeof(*path));
	on_cycle = calloc(n, sizeof(*on_cycle));
	reached = calloc(n, sizeof(*reached));
	has_out = calloc(n, sizeof(*has_out));
	queue = calloc(n, sizeof(*queue));
	if (!color || !path || !on_cycle || !reached || !has_out || !queue)
		goto out;
	for (uint32_t i = 0; i < n; i++)
		if (color[i] == 0)
			find_cycles(ld, i, color, path, 0, on_cycle);
	for (uint32_t e = 0; e < job->nedges; e++)
		has_out[job->edges[e].from] = true;

	/*
	 * Sources, sinks and reachability need every stage's operator and every
	 * edge; on a partial graph they would only repeat the errors above.
	 */
	if (ld->ops_ok && !ld->edges_missing) {
		uint32_t head = 0, tail = 0, leaf = UINT32_MAX;

		for (uint32_t i = 0; i < n; i++) {
			const struct shmrun_stage *st = &job->stages[i];

			if (st->op->flags & SHMRUN_OP_SINK)
				nsinks++;
			if ((st->op->flags & SHMRUN_OP_SOURCE) && ld->input[i])
				errorf(ld, ld->input[i]->line,
				       "stage '%s' (op %s) is a source and takes no input; remove "
				       "'input'",
				       st->name, st->op->name);
			if (!(st->op->flags & SHMRUN_OP_SOURCE) && !ld->input[i] &&
			    !find_refused(ld, ld->stage_sec[i], "input"))
				errorf(ld, st->line,
				       "stage '%s' (op %s) has no 'input'; name the stage it reads "
				       "from, e.g. input = %s",
				       st->name, st->op->name,
				       i ? job->stages[i - 1].name : "read");
			if (st->op->flags & SHMRUN_OP_SOURCE) {
				reached[i] = true;
				queue[tail++] = i;
			}
			if (!has_out[i] && !(st->op->flags & SHMRUN_OP_SINK) && leaf == UINT32_MAX)
				leaf = i;
		}
		for (uint32_t e = 0; e < job->nedges; e++) {
			const struct shmrun_stage *from = &job->stages[job->edges[e].from];

			if (from->op->flags & SHMRUN_OP_SINK)
				errorf(ld, job->edges[e].line,
				       "stage '%s' reads from '%s', a sink (op %s) that emits "
				       "nothing",
				       job->stages[job->edges[e].to].name, from->name,
				       from->op->name);
		}
		if (tail == 0)
			errorf(ld, job->stages[0].line,
			       "no source stage: nothing produces records; add one, e.g. [read] "
			       "op = file_source, path = input.txt");
		while (head < tail) {
			uint32_t u = queue[head++];

			for (uint32_t e = 0; e < job->nedges; e++) {
				uint32_t v = job->edges[e].to;

				if (job->edges[e].from == u && !reached[v]) {
					reached[v] = true;
					queue[tail++] = v;
				}
			}
		}
		for (uint32_t i = 0; i < n; i++)
			if (!reached[i] && ld->input[i] && !on_cycle[i])
				errorf(
				    ld, job->stages[i].line,
				    "stage '%s' has no path from a source: every chain of inputs "
				    "leading to it starts at a stage that is not a source",
				    job->stages[i].name);
		if (nsinks == 0) {
			errorf(ld, job->stages[leaf == UINT32_MAX ? n - 1 : leaf].line,
			       "no sink stage: the job's records go nowhere; add one, e.g. "
			       "[out] op = file_sink, input = %s, path = out.tsv",
			       job->stages[leaf == UINT32_MAX ? n - 1 : leaf].name);
		} else {
			for (uint32_t i = 0; i < n; i++)
				if (!has_out[i] && !(job->stages[i].op->flags & SHMRUN_OP_SINK))
					errorf(ld, job->stages[i].line,
					       "stage '%s' (op %s) feeds no stage, so its records "
					       "would be dropped; read it from a sink (input = %s) "
					       "or remove it",
					       job->stages[i].name, job->stages[i].op->name,
					       job->stages[i].name);
		}
	}

	if (ld->errs.n == 0) {
		/* Kahn's algorithm, lowest stage index first: sources first, file order. */
		uint32_t *indeg = path;

		job->topo = malloc(n * sizeof(*job->topo));
		if (!job->topo)
			goto out;
		memset(indeg, 0, (n + 1) * sizeof(*indeg));
		memset(reached, 0, n * sizeof(*reached));
		for (uint32_t e = 0; e < job->nedges; e++)
			indeg[job->edges[e].to]++;
		for (uint32_t k = 0; k < n; k++) {
			uint32_t u = 0;

			while (u < n && (reached[u] || indeg[u]))
				u++;
			if (u == n) /* unreachable: cycles were reported above */
				break;
			reached[u] = true;
			job->topo[k] = u;
			for (uint32_t e = 0; e < job->nedges; e++)
				if (job->edges[e].from == u)
					indeg[job->edges[e].to]--;
		}
	}
	r = 0;
out:
	free(color);
	free(path);
	free(on_cycle);
	free(reached);
	free(has_out);
	free(queue);
	return r;
}

/* ------------------------------------------------------------------------ */
/* Entry points */

static void loader_free(struct loader *ld)
{
	for (uint32_t i = 0; i < ld->nsec; i++) {
		for (uint32_t j = 0; j < ld->sec[i].nkv; j++) {
			free(ld->sec[i].kv[j].key);
			free(ld->sec[i].kv[j].value);
		}
		free(ld->sec[i].kv);
		free(ld->sec[i].name);
	}
	free(ld->sec);
	free(ld->buf);
	free(ld->refused);
	free(ld->stage_sec);
	free(ld->input);
	free(ld->width_ok);
	msgs_free(&ld->errs);
	msgs_free(&ld->warns);
}

/* The directory relative paths resolve against: absolute, symlinks resolved. */
static char *conf_dir_of(const char *path)
{
	char *copy = strdup(path), *dir, *real = NULL;

	if (!copy)
		return NULL;
	dir = dirname(copy);
	real = realpath(dir, NULL);
	if (!real)
		real = strdup(dir);
	free(copy);
	return real;
}

static int load_all(struct loader *ld)
{
	struct shmrun_job *job = ld->job;
	int r;

	r = ini_parse_stream(read_line, ld, on_key, ld);
	if (ld->nomem || r == -2)
		return -ENOMEM;
	if (ld->too_big)
		return -EFBIG;
	if (ld->read_err) {
		errorf(ld, 0, "read error after line %d: %s", ld->lineno, strerror(ld->read_err));
		return -ld->read_err;
	}
	if (r > 0) {
		bool seen = false;

		for (uint32_t i = 0; i < ld->errs.n && !seen; i++)
			seen = ld->errs.line[i] == r;
		if (!seen)
			errorf(ld, r, "syntax error");
	}

	ld->job_sec = -1;
	for (uint32_t i = 0; i < ld->nsec; i++)
		if (strcmp(ld->sec[i].name, "job") == 0)
			ld->job_sec = (int)i;
	job->nstages = ld->nsec - (ld->job_sec >= 0);
	job->stages = calloc(job->nstages ? job->nstages : 1, sizeof(*job->stages));
	ld->stage_sec = calloc(job->nstages ? job->nstages : 1, sizeof(*ld->stage_sec));
	ld->input = calloc(job->nstages ? job->nstages : 1, sizeof(*ld->input));
	ld->width_ok = calloc(job->nstages ? job->nstages : 1, sizeof(*ld->width_ok));
	if (!job->stages || !ld->stage_sec || !ld->input || !ld->width_ok)
		return -ENOMEM;
	for (uint32_t i = 0, k = 0; i < ld->nsec; i++)
		if ((int)i != ld->job_sec)
			ld->stage_sec[k++] = &ld->sec[i];

	probe_cpus(ld);
	r = load_job(ld);
	if (r)
		return r;
	ld->ops_ok = true;
	for (uint32_t i = 0; i < job->nstages; i++) {
		r = load_stage(ld, i);
		if (r)
			return r;
	}
	r = load_graph(ld);
	if (r)
		return r;
	for (uint32_t i = 0; i < ld->nrefused; i++) { /* keys no table knows */
		char what[MAX_NAME_LEN + 16];

		report_refused(ld, &ld->refused[i], NULL,
			       section_what(ld, &ld->sec[ld->refused[i].sec], what, sizeof(what)));
	}
	return ld->nomem ? -ENOMEM : 0;
}

/*
 * shmrun_job_load() of "-": the topology from standard input, named "<stdin>"
 * in messages; relative paths resolve against the current directory.
 */
static int load_stdin(struct loader *ld, struct shmrun_job *job, struct shmrun_job_errors *errs)
{
	int fd = dup(STDIN_FILENO), r;

	ld->path = SHMRUN_STDIN_NAME;
	ld->cur = CUR_NONE;
	ld->cont = CONT_NONE;
	ld->job_sec = -1;
	ld->job = job;
	ld->f = fd >= 0 ? fdopen(fd, "re") : NULL;
	if (!ld->f) {
		r = -errno;
		errorf(ld, 0, "cannot read standard input: %s", strerror(-r));
		if (fd >= 0)
			close(fd);
		goto err_free;
	}
	job->conf_path = strdup(SHMRUN_STDIN_NAME);
	job->conf_dir = getcwd(NULL, 0);
	if (!job->conf_path || !job->conf_dir) {
		r = -ENOMEM;
		goto err_close;
	}
	r = load_all(ld);
	if (!r && ld->errs.n)
		r = -EINVAL;
	if (r)
		goto err_close;
	fclose(ld->f);
	msgs_take(&ld->warns, &job->warnings, &job->nwarnings);
	loader_free(ld);
	return 0;

err_close:
	fclose(ld->f);
err_free:
	shmrun_job_free(job);
	if (ld->nomem && r != -ENOMEM)
		r = -ENOMEM;
	msgs_take(&ld->errs, &errs->msgs, &errs->n);
	loader_free(ld);
	return r;
}

int shmrun_job_load(const char *path, struct shmrun_job *job, struct shmrun_job_errors *errs)
{
	struct loader ld;
	int r;

	memset(job, 0, sizeof(*job));
	memset(errs, 0, sizeof(*errs));
	memset(&ld, 0, sizeof(ld));
	if (strcmp(path, "-") == 0)
		return load_stdin(&ld, job, errs);
	ld.path = path;
	ld.cur = CUR_NONE;
	ld.cont = CONT_NONE;
	ld.job_sec = -1;
	ld.job = job;

	{
		struct stat st;

		/* a FIFO would block and /dev/zero never end: regular files only */
		if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
			r = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
			errorf(&ld, 0, "is not a regular file (%s); give the path of a "
				       "topology.conf file",
			       S_ISDIR(st.st_mode) ? "a directory" : "a FIFO, socket or device");
			goto err_free;
		}
		if (stat(path, &st) == 0 && st.st_size > CONF_MAX_BYTES) {
			r = -EFBIG;
			errorf(&ld, 0, "is %lld bytes, too large for a topology (at most 16 MiB)",
			       (long long)st.st_size);
			goto err_free;
		}
	}
	ld.f = fopen(path, "re");
	if (!ld.f) {
		int e = errno;

		r = -e;
		errorf(&ld, 0, "cannot open: %s", strerror(e));
		goto err_free;
	}
	job->conf_path = strdup(path);
	job->conf_dir = conf_dir_of(path);
	if (!job->conf_path || !job->conf_dir) {
		r = -ENOMEM;
		goto err_close;
	}
	r = load_all(&ld);
	if (r)
		goto err_close;
	if (ld.errs.n) {
		r = -EINVAL;
		goto err_close;
	}
	fclose(ld.f);
	msgs_take(&ld.warns, &job->warnings, &job->nwarnings);
	loader_free(&ld);
	return 0;

err_close:
	fclose(ld.f);
err_free:
	shmrun_job_free(job);
	if (ld.nomem && r != -ENOMEM)
		r = -ENOMEM;
	msgs_take(&ld.errs, &errs->msgs, &errs->n);
	loader_free(&ld);
	return r;
}

void shmrun_job_free(struct shmrun_job *job)
{
	for (uint32_t i = 0; job->stages && i < job->nstages; i++) {
		free(job->stages[i].name);
		params_free(job->stages[i].params, job->stages[i].nparams);
	}
	free(job->stages);
	for (uint32_t i = 0; i < job->nwarnings; i++)
		free(job->warnings[i]);
	free(job->warnings);
	free(job->conf_path);
	free(job->conf_dir);
	free(job->name);
	free(job->cpus);
	free(job->checkpoint_dir);
	free(job->edges);
	free(job->topo);
	memset(job, 0, sizeof(*job));
}

void shmrun_job_errors_free(struct shmrun_job_errors *errs)
{
	for (uint32_t i = 0; i < errs->n; i++)
		free(errs->msgs[i]);
	free(errs->msgs);
	memset(errs, 0, sizeof(*errs));
}
