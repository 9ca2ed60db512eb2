/*
 * runtime/util.c: small idioms written once (see util.h): a growable array,
 * mkdir -p and a read loop.
 *
 * Invariants: nothing here prints or sets errno for the caller; each function
 * returns 0 (or a count) or -errno. A failed shmrun_grow() leaves the array
 * as it was, so a caller's error path frees exactly what it had.
 *
 * Designs rejected: growth by a fixed step (+1 or +N) — quadratic copying on
 * the lists that grow with the input (file lists, lookup rows, MANIFEST files
 * of a rescale); doubling is amortised O(1). Reading with fstat()'s size
 * alone — a file may grow or shrink while it is read, so the loop ends at
 * end of file, and the callers decide what a size change means.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

int shmrun_grow(void *pptr, size_t *cap, size_t need, size_t elem, size_t min)
{
	size_t c = *cap ? *cap : min ? min : 1;
	void *p, *np;

	if (!elem)
		return -EINVAL;
	if (need <= *cap)
		return 0;
	if (need > SIZE_MAX / elem)
		return -ENOMEM;
	while (c < need)
		c = c > SIZE_MAX / 2 ? need : c * 2;
	if (c > SIZE_MAX / elem)
		c = need;
	memcpy(&p, pptr, sizeof(p));
	np = realloc(p, c * elem);
	if (!np)
		return -ENOMEM;
	memcpy(pptr, &np, sizeof(np));
	*cap = c;
	return 0;
}

int shmrun_mkdir_p(const char *path, mode_t mode, unsigned flags)
{
	char buf[PATH_MAX];

	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	/* a leading '/' is the root, not a directory to make */
	for (char *p = strchr(buf + (buf[0] == '/'), '/');; p = strchr(p + 1, '/')) {
		if (p)
			*p = 0;
		else if (flags & SHMRUN_MKDIR_PARENT)
			return 0;
		if (mkdir(buf, mode) < 0) {
			if (errno != EEXIST)
				return -errno;
		} else if ((flags & SHMRUN_MKDIR_EXACT) && chmod(buf, mode) < 0) {
			/* the umask may have removed bits we need (0277 gives 0500) */
			return -errno;
		}
		if (!p)
			return 0;
		*p = '/';
	}
}

ssize_t shmrun_read_all(int fd, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t r = read(fd, (char *)buf + got, len - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

/* The '}' closing the '{' at @open, or NULL; a backslash escapes (as glob(3)). */
static const char *brace_end(const char *open)
{
	int depth = 0;

	for (const char *c = open; *c; c++) {
		if (*c == '\\' && c[1])
			c++;
		else if (*c == '{')
			depth++;
		else if (*c == '}' && --depth == 0)
			return c;
	}
	return NULL;
}

int shmrun_brace_expand(const char *pat, int (*emit)(void *arg, const char *alt), void *arg,
			uint32_t *count)
{
	const char *open = NULL, *close = NULL;

	for (const char *c = pat; *c; c++) {
		if (*c == '\\' && c[1]) {
			c++;
		} else if (*c == '{' && (close = brace_end(c)) != NULL) {
			open = c;
			break;
		}
	}
	if (!open) {
		if (++*count > SHMRUN_BRACE_MAX)
			return -E2BIG;
		return emit(arg, pat);
	}
	for (const char *alt = open + 1;;) {
		const char *end = alt;
		int depth = 0, err;
		char *one;

		for (; end < close; end++) {
			if (*end == '\\' && end + 1 < close)
				end++;
			else if (*end == '{')
				depth++;
			else if (*end == '}')
				depth--;
			else if (*end == ',' && depth == 0)
				break;
		}
		if (asprintf(&one, "%.*s%.*s%s", (int)(open - pat), pat, (int)(end - alt), alt,
			     close + 1) < 0)
			return -ENOMEM;
		err = shmrun_brace_expand(one, emit, arg, count);
		free(one);
		if (err || end >= close)
			return err;
		alt = end + 1;
	}
}

const char *shmrun_conf_at(char *buf, size_t len, const char *path, int line)
{
	if (line > 0)
		snprintf(buf, len, "%s:%d", path, line);
	else
		snprintf(buf, len, "%s", path);
	return buf;
}
