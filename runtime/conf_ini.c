/*
 * runtime/conf_ini.c: pass 1 of the topology loader, the file's lines into
 * sections of key/value pairs (struct section), with every syntax error
 * reported at its line.
 *
 * What it does. inih drives the reading: ini_parse_stream() calls read_line()
 * for each line and on_key() for each `key = value`. read_line() hands inih
 * one physical line at a time (so inih's line count is ours), strips the
 * indentation and a UTF-8 BOM, appends continuation lines to the value stored
 * last (continue_value()), and classifies each line as inih will read it
 * (classify_line()): a malformed line is reported here and inih is given an
 * empty line in its place. Section headers are opened here too, since inih
 * reports no section without keys. conf.c's essay says why the reader is ours.
 *
 * It also applies the command line's overrides once the file is read
 * (apply_overrides(), at the end of this file): see conf.c's essay.
 *
 * Invariants.
 *   - ld->lineno is the number of the line inih is handling; every message of
 *     this pass carries it.
 *   - ld->cur is the index of the current section, or CUR_NONE (no header
 *     yet) or CUR_SKIP (a duplicate or invalid header: its keys are dropped,
 *     the header was reported).
 *   - ld->cont is what an indented line extends: a key's index in
 *     sec[cur].kv, CONT_NONE (nothing: an error) or CONT_IGNORE (a rejected
 *     key: its continuation lines are dropped silently).
 *   - Nothing is read past CONF_MAX_BYTES, from a file or from standard input.
 *   - Values are stored as written; their type is checked in conf_value.c.
 *     An over-long key line waits (struct refused) until then, since whether
 *     continuation lines would help depends on the key's type.
 *   - The 197-character limit is inih's, so it applies only to what inih is
 *     given: key lines and section headers, without their inline comment.
 *     Comment lines (any length) are dropped here; an over-long header is one
 *     error and its keys are skipped (CUR_SKIP).
 *
 * Rejected designs.
 *   - inih's own multi-line values: it calls the handler once per line with
 *     the same key (our duplicate-key check) and still cuts each line at 200
 *     bytes.
 *   - Reporting an over-long key line at once: the advice differs for list
 *     keys (split over continuation lines) and one-value keys (shorten it), and
 *     the key's table is known only in pass 2.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "conf_internal.h"
#include "util.h"

/* ------------------------------------------------------------------------ */
/* Pass 1: lines -> sections (the inih reader and handler) */

/* Characters of stage and job names: they appear in `input =`, messages and file names. */
#define NAME_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-."

bool is_name_char(char c)
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
	if (shmrun_grow_u32(&ld->sec, &ld->capsec, (size_t)ld->nsec + 1, sizeof(*ld->sec), 8)) {
		free(copy);
		ld->nomem = true;
		ld->cur = CUR_SKIP;
		return;
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
		if (shmrun_grow(&ld->buf, &ld->bufcap, n + 2, 1, 256)) {
			ld->nomem = true;
			errno = ENOMEM;
			return -2;
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
 * An over-long line (inline comment already dropped): a key line's error
 * waits for load_params(), which knows whether the key takes a list (then
 * continuation lines help) or one value; a section header is reported now and
 * its keys are skipped (ld->cur = CUR_SKIP), so that they add no "key before any
 * section" or duplicate-key errors; a key line of a skipped section is dropped
 * silently, like its short key lines; any other line is reported now.
 */
static void refuse_long_line(struct loader *ld, const char *s, int limit)
{
	size_t k = strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.");
	struct refused *r;

	if (*s == '[') {
		/* one error; the keys under it are skipped, as a bad header's are */
		errorf(ld, ld->lineno,
		       "section header is longer than %d characters, the INI parser's limit; "
		       "a section name is 1 to %u letters, digits, '_', '-' or '.' (the keys "
		       "under this header were not read)",
		       limit, MAX_NAME_LEN);
		ld->cur = CUR_SKIP;
		return;
	}
	if (ld->cur == CUR_SKIP && looks_like_key(s))
		return; /* a key of a skipped section: dropped like its other keys */
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
struct refused *find_refused(struct loader *ld, const struct section *s, const char *key)
{
	for (uint32_t i = 0; i < ld->nrefused; i++)
		if (&ld->sec[ld->refused[i].sec] == s && strcmp(ld->refused[i].key, key) == 0)
			return &ld->refused[i];
	return NULL;
}

/* Whether key @d's value is a blank- or comma-separated list (continuation lines allowed). */
bool is_list_key(const struct shmrun_param_def *d)
{
	return d->type == SHMRUN_PARAM_PATHS || strcmp(d->key, "input") == 0;
}

/* Report over-long line @r of key @d (NULL: not known) in @what. */
void report_refused(struct loader *ld, struct refused *r, const struct shmrun_param_def *d,
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
char *read_line(char *str, int num, void *stream)
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
	if (*s == ';' || *s == '#')
		goto blank; /* a comment line, of any length: inih would drop it too */
	/* inih wants 3 bytes to spare: '\r', '\n', NUL. */
	if (num >= 4 && len > (size_t)num - 3) {
		/* an inline comment (inih drops it) does not count: judge what is left */
		size_t kept = (size_t)(find_chars_or_comment(s, "") - s);

		while (kept && isspace((unsigned char)s[kept - 1]))
			kept--;
		if (kept <= (size_t)num - 3) {
			len = kept;
			s[len] = '\0';
		}
	}
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

const char *section_what(const struct loader *ld, const struct section *s, char *buf,
				size_t len)
{
	if (ld->job_sec >= 0 && s == &ld->sec[ld->job_sec])
		snprintf(buf, len, "[job]");
	else
		snprintf(buf, len, "stage '%s'", s->name);
	return buf;
}

/* inih's handler: one key = value of the current section. */
int on_key(void *user, const char *section, const char *name, const char *value)
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
	if (shmrun_grow_u32(&s->kv, &s->cap, (size_t)s->nkv + 1, sizeof(*s->kv), 8))
		goto err_nomem;
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

const struct kv *find_kv(const struct section *s, const char *key)
{
	for (uint32_t i = 0; i < s->nkv; i++)
		if (strcmp(s->kv[i].key, key) == 0)
			return &s->kv[i];
	return NULL;
}

/* Drop the refused over-long line of key @key in section @sec, if any: an override replaced it. */
static void drop_refused(struct loader *ld, int sec, const char *key)
{
	for (uint32_t i = 0; i < ld->nrefused; i++) {
		if (ld->refused[i].sec == sec && strcmp(ld->refused[i].key, key) == 0) {
			ld->refused[i] = ld->refused[--ld->nrefused];
			return;
		}
	}
}

int apply_overrides(struct loader *ld)
{
	for (uint32_t k = 0; k < ld->nsets; k++) {
		const char *spec = ld->sets[k], *eq = strchr(spec, '='), *dot;
		int line = OVR_LINE(k), sec = -1;
		struct section *s;
		struct kv *kv = NULL;
		char *section, *key, *value;

		dot = eq ? memrchr(spec, '.', (size_t)(eq - spec)) : NULL;
		if (!eq || !dot || dot == spec || dot + 1 == eq) {
			errorf(ld, line, "expected SECTION.KEY=VALUE, e.g. job.workers=4 or "
					 "count.width=2");
			continue;
		}
		section = strndup(spec, (size_t)(dot - spec));
		key = strndup(dot + 1, (size_t)(eq - dot - 1));
		value = strdup(eq + 1);
		if (!section || !key || !value)
			goto err_nomem;
		for (uint32_t i = 0; i < ld->nsec; i++)
			if (strcmp(ld->sec[i].name, section) == 0)
				sec = (int)i;
		if (sec < 0 && strcmp(section, "job") == 0) {
			/* [job] may be absent from the file: its keys all have defaults */
			if (shmrun_grow_u32(&ld->sec, &ld->capsec, (size_t)ld->nsec + 1,
					    sizeof(*ld->sec), 8))
				goto err_nomem;
			sec = (int)ld->nsec;
			memset(&ld->sec[sec], 0, sizeof(ld->sec[sec]));
			ld->sec[sec].name = section;
			ld->sec[sec].line = 1; /* as the [job] of a file without one */
			section = NULL;
			ld->nsec++;
		}
		if (sec < 0) {
			errorf(ld, line, "there is no section [%s] in the topology; --set changes "
					 "a key of an existing stage (or of [job])",
			       section);
			free(section);
			free(key);
			free(value);
			continue;
		}
		free(section);
		s = &ld->sec[sec];
		for (uint32_t i = 0; i < s->nkv; i++)
			if (strcmp(s->kv[i].key, key) == 0)
				kv = &s->kv[i];
		if (kv) { /* replaces the file's value, continuation lines included */
			free(kv->key);
			free(kv->value);
		} else {
			if (shmrun_grow_u32(&s->kv, &s->cap, (size_t)s->nkv + 1, sizeof(*s->kv),
					    8))
				goto err_nomem;
			kv = &s->kv[s->nkv++];
		}
		kv->key = key;
		kv->value = value;
		kv->line = line;
		kv->cont_line = 0;
		drop_refused(ld, sec, key);
		continue;

err_nomem:
		free(section);
		free(key);
		free(value);
		ld->nomem = true;
		return -ENOMEM;
	}
	return 0;
}
