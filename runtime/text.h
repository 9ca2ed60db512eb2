/*
 * runtime/text.h: a growable text buffer for the small text files shmrun
 * writes and hashes (the MANIFEST, the canonical topology encoding).
 */
#ifndef SHMRUN_RT_TEXT_H
#define SHMRUN_RT_TEXT_H

#include <stddef.h>

struct shmrun_text {
	char *p;          /* NUL-terminated once anything was printed; malloc'd */
	size_t len, cap;  /* bytes used, allocated */
	int err;          /* sticky: the first -errno (-ENOMEM, -EINVAL); later prints do nothing */
};

/* shmrun_text_printf() - append printf-style text; a failure sets t->err. */
void shmrun_text_printf(struct shmrun_text *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif /* SHMRUN_RT_TEXT_H */
