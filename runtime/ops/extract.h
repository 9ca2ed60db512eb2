/*
 * runtime/ops/extract.h: the rules of the extract operator (extract.c) as
 * plain functions, so that the operator and the unit tests share them:
 * compile a stage's keys into a struct shmrun_extract, then cut lines.
 * Private to runtime/ops/ (and tests/unit/check_extract.c).
 */
#ifndef SHMRUN_OPS_EXTRACT_H
#define SHMRUN_OPS_EXTRACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "event_time.h"
#include "shmrun/operator.h"

/* A stage's keys as written (NULL: not set). */
struct shmrun_extract_conf {
	const char *regex, *separator, *key, *value, *time, *time_format, *time_zone;
};

/* What sets one output (key, value or time): a field range or a group. */
struct shmrun_extract_sel {
	bool set;
	uint32_t lo, hi; /* fields lo..hi (1-based; 0 = the line; hi UINT32_MAX: to the
			    last); regex mode: group lo (0 = the whole match) */
};

struct shmrun_extract {
	void *re;     /* pcre2_code_8, NULL in field mode */
	void *md;     /* pcre2_match_data_8 */
	char sep[16]; /* field separator; empty: runs of blanks */
	size_t sep_len;
	struct shmrun_extract_sel key, value, time;
	uint32_t nf;           /* fields mode: fields cut per line (the last one a key names) */
	uint32_t *fb, *fe;     /* their bounds in the line being cut, nf each */
	char why[160];         /* the reason of the last bad line, when not a constant */
	struct shmrun_timefmt tf;
	struct shmrun_tz tz;
};

/*
 * shmrun_extract_compile() - check @c and build @x from it: the regex
 * compiled (JIT where available), its match data, the time format and zone.
 * @bad_key: on failure, the key the error is about ("regex", "time_zone"...).
 * @why: @len bytes for the reason (PCRE2's message and offset for a regex).
 * Return: 0; -EINVAL (reason in @why); -ENOENT (unknown zone); -ENOMEM.
 */
int shmrun_extract_compile(struct shmrun_extract *x, const struct shmrun_extract_conf *c,
			   const char **bad_key, char *why, size_t len);

/*
 * shmrun_extract_line() - cut @in into @out: key, value and event time set
 * from what the keys select, the rest from @in. @out points into @in.
 * Return: 0; -EILSEQ when the line does not fit (no match, a missing field,
 * a time that does not parse), with the reason in *@why (valid until the
 * next call).
 */
int shmrun_extract_line(struct shmrun_extract *x, const struct shmrun_record *in,
			struct shmrun_record *out, const char **why);

/* shmrun_extract_free() - free what compile built (also after a failed one). */
void shmrun_extract_free(struct shmrun_extract *x);

#endif /* SHMRUN_OPS_EXTRACT_H */
