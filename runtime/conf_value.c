/*
 * runtime/conf_value.c: a key's text into a typed value, for every key of
 * topology.conf: counts, sizes (K, M, G, T), rates, durations (ms, s),
 * booleans, choices, paths and path lists, and the CPU lists of [job] cpus.
 *
 * What it does. The strict parsers (shmrun_parse_count(), _size(), _duration(),
 * _cpus(), public in shmrun/job.h) accept exactly the documented forms. check_value() applies them to one key
 * of a table (struct shmrun_param_def: type, default, range, choices) and
 * reports a wrong value with the form expected and the range in the unit the
 * user wrote; load_params() fills a section's params from a whole table,
 * defaults and missing required keys included; check_unknown_keys() reports
 * keys no table knows, with the nearest known key.
 *
 * Invariants.
 *   - A number is digits only, with an optional unit: no sign, no blanks, no
 *     hex; overflow is -ERANGE, never a wrapped value.
 *   - A value that passes check_value() is in [min, max] of its key (max 0:
 *     no bound), a rate is never 0, and a relative path is resolved against
 *     job->conf_dir (the conf file's directory); path lists are joined by
 *     newlines, since a resolved path may hold a blank but no newline.
 *     An output path (io SHMRUN_PARAM_OUTPUT) names a file: one whose last
 *     component is empty, "." or ".." is refused here, so check and run
 *     refuse it alike before anything is created.
 *   - Every message names the key, where it is ("[job]", "stage 'x'") and
 *     what was expected.
 *
 * Rejected designs.
 *   - strtoull() and friends: they accept " 5", "-1" (as 2^64-1) and "5x".
 *   - Checking values in each operator: `3x` and overflow would fail in as
 *     many ways as there are operators; one checker keeps the messages alike.
 *   - Bounds in one fixed unit: a user who wrote "10000000000s" would read
 *     the maximum in ns; fmt_range() adds it in the unit they wrote.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "conf_internal.h"

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

void bit_set(uint64_t *map, uint32_t b)
{
	map[b / 64] |= 1ull << (b % 64);
}

bool bit_test(const uint64_t *map, uint32_t b)
{
	return b <= MAX_CPU && (map[b / 64] >> (b % 64)) & 1;
}

/*
 * "0-3,8" into a bitmap. @dup receives the first CPU named twice, or -1.
 * Return: 0; -EINVAL (syntax, reversed range); -ERANGE (a CPU above MAX_CPU).
 */
int parse_cpulist(const char *s, uint64_t *map, int32_t *dup)
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
int cpulist_array(const uint64_t *map, int32_t **cpus, uint32_t *n)
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
const char *fmt_cpulist(const uint64_t *map, char *buf, size_t len)
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

/*
 * @path, as written, names a directory whatever exists: its last component is
 * empty ("o/", "/"), "." or ".." ("o.tsv/.", "sub/..", "."). An output is a
 * file: the run would make its lock file .<name>.lock inside that directory
 * and then find a directory where it writes a file (width k: "sub/.0").
 */
static bool names_directory(const char *path)
{
	const char *slash = strrchr(path, '/');
	const char *name = slash ? slash + 1 : path;

	return !*name || strcmp(name, ".") == 0 || strcmp(name, "..") == 0;
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

/* @value of enum key @d in @what, at @line, is none of its choices: reported
 * with the choices and the nearest one. */
static void report_bad_choice(struct loader *ld, const char *what, const struct shmrun_param_def *d,
			      const char *value, int line)
{
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
	errorf(ld, line, "%s = '%s' in %s is not one of: %s%s%s%s", d->key, value, what,
	       join_words(list, sizeof(list), w, n), near ? "; did you mean '" : "",
	       near ? near : "", near ? "'?" : "");
	for (uint32_t j = 0; j < n; j++)
		free((char *)w[j]);
}

/*
 * The number @value of key @d (a count, rate, size, duration or bool) in *@v,
 * unchecked against the key's range; other types are not numbers: 0, *@v
 * untouched. Return: 0; -EINVAL (not of its form); -ERANGE (over 64 bits).
 */
static int parse_number(const struct shmrun_param_def *d, const char *value, uint64_t *v)
{
	switch (d->type) {
	case SHMRUN_PARAM_COUNT:
	case SHMRUN_PARAM_RATE:
		return shmrun_parse_count(value, v);
	case SHMRUN_PARAM_SIZE:
		return shmrun_parse_size(value, v);
	case SHMRUN_PARAM_DURATION:
		return shmrun_parse_duration(value, v);
	case SHMRUN_PARAM_BOOL:
		return parse_bool(value, v);
	default:
		return 0;
	}
}

/* Whether number @v is in key @d's range (a rate is never 0). */
static bool in_range(const struct shmrun_param_def *d, uint64_t v)
{
	return v >= d->min && (!d->max || v <= d->max) && (d->type != SHMRUN_PARAM_RATE || v);
}

/*
 * Check @value of key @d in @what ("[job]", "stage 'x'"), written at @line.
 * On success *@text is the value to store (allocated; paths resolved) and *@u64
 * its number. Return: 0; 1 if wrong (reported); -ENOMEM.
 */
int check_value(struct loader *ld, const char *what, const struct shmrun_param_def *d,
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
	r = parse_number(d, value, &v);
	switch (d->type) {
	case SHMRUN_PARAM_COUNT:
	case SHMRUN_PARAM_RATE:
	case SHMRUN_PARAM_SIZE:
	case SHMRUN_PARAM_DURATION:
	case SHMRUN_PARAM_BOOL:
		break;
	case SHMRUN_PARAM_ENUM: {
		int i = enum_index(d->choices, value);

		if (i < 0) {
			report_bad_choice(ld, what, d, value, line);
			return 1;
		}
		v = (uint64_t)i;
		break;
	}
	case SHMRUN_PARAM_PATH:
		if (d->io == SHMRUN_PARAM_OUTPUT && names_directory(value)) {
			size_t n = strlen(value);

			errorf(ld, line,
			       "%s %s = '%s' names a directory; name a file (e.g. %s%sout.tsv)",
			       what, d->key, value, value, value[n - 1] == '/' ? "" : "/");
			return 1;
		}
		/* an override (--set, line < 0) resolves against the current directory */
		*text = resolve_path(line < 0 ? ld->cwd : ld->job->conf_dir, value, strlen(value));
		return *text ? 0 : -ENOMEM;
	case SHMRUN_PARAM_PATHS:
		*text = resolve_paths(line < 0 ? ld->cwd : ld->job->conf_dir, value);
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
		if (!in_range(d, v)) {
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

bool refuse_continuation(struct loader *ld, const struct shmrun_param_def *d, const struct kv *kv,
			 const char *what)
{
	if (!kv->cont_line || is_list_key(d))
		return false;
	errorf(ld, kv->cont_line,
	       "indented line continues key '%s' in %s (line %d), which takes one "
	       "value, not a list: the value would become '%.60s'; write it on the "
	       "key's line (continuation lines extend list keys only, such as "
	       "file_source's path)",
	       d->key, what, kv->line, kv->value);
	return true;
}

/*
 * Fill @out (one per entry of table @defs, same order) from section @s:
 * given keys are checked, absent ones take their default (line 0), absent
 * required ones are errors at the section header. Return: 0 or -ENOMEM.
 */
int load_params(struct loader *ld, const struct section *s, const char *what,
		       const char *opname, const struct shmrun_param_def *defs,
		       struct shmrun_param *out)
{
	for (uint32_t i = 0; defs[i].key; i++) {
		const struct shmrun_param_def *d = &defs[i];
		const struct kv *kv = find_kv(s, d->key);
		int r = 0;

		out[i].def = d;
		if (kv && refuse_continuation(ld, d, kv, what)) {
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
void check_unknown_keys(struct loader *ld, const struct section *s, const char *what,
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

void params_free(struct shmrun_param *p, uint32_t n)
{
	for (uint32_t i = 0; p && i < n; i++)
		free(p[i].value);
	free(p);
}

int param_value_problem(const struct shmrun_param_def *d, const char *value, char *why,
			size_t len)
{
	char range[128];
	uint64_t v = 0;
	int r = 0;

	if (!*value) {
		snprintf(why, len, "empty; expected %s", type_form(d->type));
		return -EINVAL;
	}
	r = parse_number(d, value, &v);
	switch (d->type) {
	case SHMRUN_PARAM_COUNT:
	case SHMRUN_PARAM_RATE:
	case SHMRUN_PARAM_SIZE:
	case SHMRUN_PARAM_DURATION:
	case SHMRUN_PARAM_BOOL:
		break;
	case SHMRUN_PARAM_ENUM:
		if (enum_index(d->choices, value) < 0) {
			snprintf(why, len, "not one of its choices (%s)",
				 d->choices ? d->choices : "none");
			return -EINVAL;
		}
		return 0;
	case SHMRUN_PARAM_PATH:
	case SHMRUN_PARAM_PATHS:
	case SHMRUN_PARAM_STRING:
		return 0;
	}
	if (r == -EINVAL) {
		snprintf(why, len, "not a valid %s; expected %s", type_word(d->type),
			 type_form(d->type));
		return -EINVAL;
	}
	if (r == -ERANGE || !in_range(d, v)) {
		snprintf(why, len, "out of range; expected %s",
			 fmt_range(d->type, d->min, d->max, value, range, sizeof(range)));
		return -ERANGE;
	}
	return 0;
}

void shmrun_param_describe(const struct shmrun_param_def *d, const char **type,
			   const char **form, char *range, size_t len)
{
	*type = type_word(d->type);
	*form = type_form(d->type);
	range[0] = '\0';
	if ((d->type == SHMRUN_PARAM_COUNT || d->type == SHMRUN_PARAM_SIZE ||
	     d->type == SHMRUN_PARAM_RATE || d->type == SHMRUN_PARAM_DURATION) &&
	    (d->min || d->max))
		fmt_range(d->type, d->min, d->max, NULL, range, len);
}
