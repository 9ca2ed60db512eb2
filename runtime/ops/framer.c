/*
 * runtime/ops/framer.c: a byte stream cut into line or length-prefixed
 * records (framer.h has the contract).
 *
 * Invariants: buf[lo, hi) are the unread bytes; FRAMER_LINE keeps scan in
 * [lo, hi] with no '\n' in buf[lo, scan), so bytes that arrive a few at a
 * time (a terminal, `tail -F`) are searched once, not once per read. The
 * buffer never exceeds max + 4 bytes (the longest length-prefixed frame;
 * a line needs max + 1), so one stream's memory is bounded by the record
 * limit.
 *
 * Rejected: one ring buffer per stream (records would wrap and need a copy
 * to be contiguous for the emit); reading straight into the emit path (a
 * record may arrive over many reads).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "framer.h"

static size_t limit(const struct framer *f)
{
	return (size_t)f->max + 4;
}

int framer_init(struct framer *f, enum framer_mode mode, uint32_t max, size_t initial)
{
	memset(f, 0, sizeof(*f));
	f->mode = mode;
	f->max = max;
	f->cap = initial < limit(f) ? initial : limit(f);
	if (f->cap < 16)
		f->cap = 16;
	f->buf = malloc(f->cap);
	return f->buf ? 0 : -ENOMEM;
}

void framer_free(struct framer *f)
{
	free(f->buf);
	f->buf = NULL;
	f->cap = f->lo = f->hi = f->scan = 0;
}

long framer_room(struct framer *f, unsigned char **at)
{
	if (f->lo > 0 && (f->lo == f->hi || f->hi == f->cap || f->lo >= f->cap / 2)) {
		size_t n = f->hi - f->lo;

		memmove(f->buf, f->buf + f->lo, n);
		f->scan -= f->lo;
		f->lo = 0;
		f->hi = n;
	}
	if (f->hi == f->cap && f->cap < limit(f)) {
		size_t ncap = f->cap * 2 < limit(f) ? f->cap * 2 : limit(f);
		unsigned char *nb = realloc(f->buf, ncap);

		if (!nb)
			return -ENOMEM;
		f->buf = nb;
		f->cap = ncap;
	}
	*at = f->buf + f->hi;
	return (long)(f->cap - f->hi);
}

int framer_next(struct framer *f, const void **v, uint32_t *len)
{
	if (f->mode == FRAMER_LINE) {
		unsigned char *nl;

		if (f->scan < f->lo)
			f->scan = f->lo;
		nl = memchr(f->buf + f->scan, '\n', f->hi - f->scan);
		if (!nl) {
			f->scan = f->hi;
			return f->hi - f->lo > f->max ? -EMSGSIZE : 0;
		}
		if ((size_t)(nl - (f->buf + f->lo)) > f->max)
			return -EMSGSIZE;
		*v = f->buf + f->lo;
		*len = (uint32_t)(nl - (f->buf + f->lo));
		f->lo = (size_t)(nl - f->buf) + 1;
		f->scan = f->lo;
		return 1;
	}
	if (f->hi - f->lo < 4)
		return 0;
	{
		const unsigned char *p = f->buf + f->lo;
		uint32_t n =
		    (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];

		if (n > f->max)
			return -EMSGSIZE;
		if (f->hi - f->lo - 4 < n)
			return 0;
		*v = p + 4;
		*len = n;
		f->lo += 4 + (size_t)n;
		return 1;
	}
}

int framer_rest(struct framer *f, const void **v, uint32_t *len)
{
	size_t n = f->hi - f->lo;
	int r = 0;

	*v = f->buf + f->lo;
	*len = (uint32_t)n;
	if (n && f->mode == FRAMER_LINE)
		r = 1;
	else if (n)
		r = -EPROTO;
	f->lo = f->hi;
	f->scan = f->hi;
	return r;
}
