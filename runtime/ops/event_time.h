/*
 * runtime/ops/event_time.h: reading an event time out of text — a named time
 * zone's UTC offsets, and a time format (strptime-style, or epoch seconds or
 * milliseconds). Used by extract (extract.c); private to runtime/ops/.
 * event_time.c has the design and the rules.
 */
#ifndef SHMRUN_OPS_EVENT_TIME_H
#define SHMRUN_OPS_EVENT_TIME_H

#include <stddef.h>
#include <stdint.h>

/*
 * A time zone as a table of UTC offsets: from at[i] (UTC seconds) on, local
 * time is UTC + off[i] seconds; at[0] is INT64_MIN. n = 1 for UTC. hint is
 * the interval of the last lookup (lines of a log are close in time).
 */
struct shmrun_tz {
	int64_t *at;
	int32_t *off;
	uint32_t n, hint;
};

/*
 * shmrun_tz_load() - the offsets of zone @name ("UTC", or a file under the
 * system's zoneinfo directory such as "Europe/Berlin"), from 1900 to 2100.
 * Sets TZ in this process for the time of the call and restores it: call it
 * only while the process has one thread (a worker's open(), the launcher).
 * @why: @len bytes for the reason of a failure.
 * Return: 0; -ENOENT (no such zone; @why names the file looked for and the
 * directory zones live in); -EINVAL (a name with "..", absolute, not a TZif
 * file); -ENOMEM.
 */
int shmrun_tz_load(struct shmrun_tz *tz, const char *name, char *why, size_t len);

/*
 * shmrun_tz_utc() - the UTC seconds of local time @local_s (seconds of the
 * local wall clock counted as if it were UTC). A local time that occurs twice
 * (the hour repeated when summer time ends) is its first occurrence; one that
 * does not occur (the hour skipped when it starts) is read with the offset in
 * force before the change (02:30 on that day is 03:30 summer time).
 */
int64_t shmrun_tz_utc(struct shmrun_tz *tz, int64_t local_s);

/* shmrun_tz_free() - free the table (a zeroed or loaded @tz). */
void shmrun_tz_free(struct shmrun_tz *tz);

enum shmrun_timefmt_kind {
	SHMRUN_TIMEFMT_STRPTIME = 0,
	SHMRUN_TIMEFMT_EPOCH_S,	 /* decimal seconds since the epoch, optional .fraction */
	SHMRUN_TIMEFMT_EPOCH_MS, /* decimal milliseconds, optional .fraction */
};

/* A checked time_format. */
struct shmrun_timefmt {
	enum shmrun_timefmt_kind kind;
	char *pre, *post; /* strptime formats before and after %f (post NULL: no %f) */
	int has_z;	  /* %z: the offset written in the text wins over the zone */
	int has_j;	  /* %j: the day of the year, checked against the year and date */
};

/*
 * shmrun_timefmt_compile() - check @fmt and prepare it.
 * Return: 0; -EINVAL with the reason in @why (@len bytes); -ENOMEM.
 */
int shmrun_timefmt_compile(struct shmrun_timefmt *f, const char *fmt, char *why, size_t len);

/*
 * shmrun_timefmt_parse() - the event time of text @s (@n bytes, not
 * NUL-terminated) in ns since the epoch, into *@ns. The whole text must be
 * read by the format. @tz: the zone of a format without %z.
 * Return: 0; -EINVAL when the text does not fit the format or is out of range.
 */
int shmrun_timefmt_parse(const struct shmrun_timefmt *f, struct shmrun_tz *tz, const char *s,
			 size_t n, int64_t *ns);

void shmrun_timefmt_free(struct shmrun_timefmt *f);

#endif /* SHMRUN_OPS_EVENT_TIME_H */
