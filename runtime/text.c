/*
 * runtime/text.c: a growable text buffer (see text.h). The error is sticky so
 * that a writer can print a whole file and check once at the end.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "text.h"
#include "util.h"

void shmrun_text_printf(struct shmrun_text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (t->err)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(t->p ? t->p + t->len : NULL, t->p ? t->cap - t->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			t->err = -EINVAL;
			return;
		}
		if (t->p && t->len + (size_t)n < t->cap) {
			t->len += (size_t)n;
			return;
		}
		if (shmrun_grow(&t->p, &t->cap, t->len + (size_t)n + 1, 1, 256)) {
			t->err = -ENOMEM;
			return;
		}
	}
}
