/*
 * runtime/ops/event_time.c: an event time out of text (extract's `time`,
 * `time_format`, `time_zone`).
 *
 * Formats. `epoch_s` and `epoch_ms` read a decimal count of seconds or
 * milliseconds since 1970-01-01 UTC, with an optional sign and fraction
 * ("1706704496.25"). Anything else is a strptime(3) format (glibc's, in the C
 * locale) plus one conversion of our own, %f: 1 to 9 digits of a fraction of
 * a second (as in Python's strptime). The conversions are checked when the
 * job is loaded: the date and time fields (%Y %m %d %H %M %S %b %e %j %y %C
 * %p %I, the composites %F %T %D %R %r), %z (a numeric offset such as +0100:
 * then the text says its own offset and time_zone is not used), %n %t %%
 * and %f. Refused with a reason: %s (use epoch_s), %Z (glibc's strptime
 * reads and ignores it: use time_zone or %z), %c %x %X (the locale's
 * layouts: write the fields), week-based conversions (%U %W %V %G %g %u %w,
 * which glibc does not turn into a date) and anything unknown. Fields the
 * format leaves out are those of 1970-01-01 00:00:00 (a format without a
 * year reads times of 1970). The field's whole text must be read.
 *
 * Zones. A zone is the name of a TZif file under the system's zoneinfo
 * directory ($TZDIR, else /usr/share/zoneinfo: Debian's tzdata), e.g.
 * Europe/Berlin; "UTC" needs none. Its UTC offsets are turned into a table of
 * (UTC instant, offset) intervals once per task (shmrun_tz_load()), by asking
 * glibc's localtime_r() with TZ set to that file for every day from 1900 to
 * 2100 and bisecting each day whose offset changed to the second; afterwards
 * TZ is put back as it was. So the tzdata parsing, including the rule that
 * continues a zone past its last listed transition, is glibc's, and a record
 * costs a lookup in a small sorted table (with a hint: a log's lines are
 * close in time), not a call into the C library's time zone code.
 * A process keeps the tables it sampled (up to 8 zones), so workers forked
 * after the launcher's prepare() inherit them instead of sampling again.
 * Setting TZ is process-wide: that is sound here because shmrun_tz_load()
 * runs while the process has a single thread (a worker's open(); prepare()
 * in the launcher), and nothing in shmrun reads local time (logs and
 * checkpoint names are UTC). Limits: times before 1900 take the offset of
 * 1900, after 2100 that of 2100; a day on which the offset changes and
 * changes back to the same value is not seen (no zone in tzdata has one).
 *
 * Local to UTC: a wall-clock time that occurs twice (the hour repeated when
 * summer time ends) is taken at its first occurrence (the summer-time one);
 * one that does not occur (the hour skipped when it starts) is read with the
 * offset in force before the change, so 02:30 on that day in Europe/Berlin is
 * 01:30 UTC, which is 03:30 summer time (as mktime(3) does with tm_isdst 0).
 *
 * Designs rejected:
 *  - TZ set for the whole worker and mktime() per record: a lock and a
 *    getenv() per call, and two stages with two zones in one worker would
 *    fight over TZ;
 *  - our own TZif reader: the transitions are easy, but a slim TZif file
 *    ends with a POSIX TZ rule (M3.5.0/2 ...) that would need its own
 *    parser; glibc already has both;
 *  - ICU: a large dependency for one conversion.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "event_time.h"

#define DAY_S	   86400ll
#define TABLE_FROM (-2208988800ll) /* 1900-01-01T00:00:00Z */
#define TABLE_TO   4102444800ll	   /* 2100-01-01T00:00:00Z */
#define TEXT_MAX   256		   /* the longest time text read */

static int32_t offset_at(int64_t t)
{
	time_t tt = (time_t)t;
	struct tm tm;

	return localtime_r(&tt, &tm) ? (int32_t)tm.tm_gmtoff : 0;
}

static int push(struct shmrun_tz *tz, uint32_t *cap, int64_t at, int32_t off)
{
	if (tz->n == *cap) {
		uint32_t ncap = *cap ? *cap * 2 : 64;
		int64_t *a = realloc(tz->at, ncap * sizeof(*a));

		if (!a)
			return -ENOMEM;
		tz->at = a;
		int32_t *o = realloc(tz->off, ncap * sizeof(*o));

		if (!o)
			return -ENOMEM;
		tz->off = o;
		*cap = ncap;
	}
	tz->at[tz->n] = at;
	tz->off[tz->n] = off;
	tz->n++;
	return 0;
}

/* The intervals, sampled day by day with TZ already set. */
static int sample(struct shmrun_tz *tz)
{
	uint32_t cap = 0;
	int32_t prev = offset_at(TABLE_FROM);
	int err = push(tz, &cap, INT64_MIN, prev);

	for (int64_t t = TABLE_FROM + DAY_S; !err && t <= TABLE_TO; t += DAY_S) {
		int64_t lo = t - DAY_S;

		/* several changes in one day are found one after the other */
		while (!err && offset_at(t) != prev) {
			int64_t hi = t;

			while (hi - lo > 1) {
				int64_t mid = lo + (hi - lo) / 2;

				if (offset_at(mid) == prev)
					lo = mid;
				else
					hi = mid;
			}
			prev = offset_at(hi);
			err = push(tz, &cap, hi, prev);
			lo = hi;
		}
	}
	return err;
}

/*
 * The tables this process sampled, by zone file: a stage's prepare() in the
 * launcher samples a zone once (about 25 ms), and the workers, forked from
 * the launcher after it (restarts too), find it here, as do further
 * instances in one worker. Never freed (reachable until the process ends);
 * single-threaded as shmrun_tz_load() is.
 */
#define CACHE_ZONES 8
static struct {
	char *path;
	int64_t *at;
	int32_t *off;
	uint32_t n;
} cache[CACHE_ZONES];

/* A copy of the cached table of zone file @path into @tz. Return: 0, or -ENOENT. */
static int cache_get(struct shmrun_tz *tz, const char *path)
{
	for (uint32_t i = 0; i < CACHE_ZONES && cache[i].path; i++) {
		if (strcmp(cache[i].path, path) != 0)
			continue;
		tz->at = malloc(cache[i].n * sizeof(*tz->at));
		tz->off = malloc(cache[i].n * sizeof(*tz->off));
		if (!tz->at || !tz->off) {
			shmrun_tz_free(tz);
			return -ENOENT; /* sample it anew */
		}
		memcpy(tz->at, cache[i].at, cache[i].n * sizeof(*tz->at));
		memcpy(tz->off, cache[i].off, cache[i].n * sizeof(*tz->off));
		tz->n = cache[i].n;
		return 0;
	}
	return -ENOENT;
}

/* Keep a copy of @tz as the table of @path (if there is room: it is only a cache). */
static void cache_put(const struct shmrun_tz *tz, const char *path)
{
	for (uint32_t i = 0; i < CACHE_ZONES; i++) {
		if (cache[i].path)
			continue;
		cache[i].at = malloc(tz->n * sizeof(*tz->at));
		cache[i].off = malloc(tz->n * sizeof(*tz->off));
		cache[i].path = strdup(path);
		if (!cache[i].at || !cache[i].off || !cache[i].path) {
			free(cache[i].at);
			free(cache[i].off);
			free(cache[i].path);
			memset(&cache[i], 0, sizeof(cache[i]));
			return;
		}
		memcpy(cache[i].at, tz->at, tz->n * sizeof(*tz->at));
		memcpy(cache[i].off, tz->off, tz->n * sizeof(*tz->off));
		cache[i].n = tz->n;
		return;
	}
}

int shmrun_tz_load(struct shmrun_tz *tz, const char *name, char *why, size_t len)
{
	const char *dir = getenv("TZDIR");
	char path[4096], magic[4], *old = NULL, *val = NULL;
	struct stat st;
	int fd, err;

	memset(tz, 0, sizeof(*tz));
	if (!dir || !*dir)
		dir = "/usr/share/zoneinfo";
	if (strcmp(name, "UTC") == 0) {
		uint32_t cap = 0;

		return push(tz, &cap, INT64_MIN, 0);
	}
	if (!*name || name[0] == '/' || strstr(name, "..")) {
		snprintf(why, len,
			 "'%s' is not a zone name: zones are named relative to %s, like "
			 "Europe/Berlin or UTC",
			 name, dir);
		return -EINVAL;
	}
	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path)) {
		snprintf(why, len, "zone name too long");
		return -EINVAL;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		err = errno;
		snprintf(why, len,
			 "no time zone '%s': %s: %s (zones are the files under %s, from the "
			 "tzdata package, e.g. Europe/Berlin, America/New_York, UTC; "
			 "`ls %s` lists them)",
			 name, path, strerror(err), dir, dir);
		return err == ENOENT || err == ENOTDIR ? -ENOENT : -err;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || read(fd, magic, 4) != 4 ||
	    memcmp(magic, "TZif", 4) != 0) {
		close(fd);
		snprintf(why, len,
			 "'%s' is not a time zone: %s is not a TZif file (zones are the files "
			 "under %s, e.g. Europe/Berlin)",
			 name, path, dir);
		return -EINVAL;
	}
	close(fd);
	if (cache_get(tz, path) == 0)
		return 0;
	if (getenv("TZ") && !(old = strdup(getenv("TZ"))))
		return -ENOMEM;
	if (asprintf(&val, ":%s", path) < 0) {
		free(old);
		return -ENOMEM;
	}
	setenv("TZ", val, 1);
	tzset();
	err = sample(tz);
	if (old)
		setenv("TZ", old, 1);
	else
		unsetenv("TZ");
	tzset();
	free(old);
	free(val);
	if (!err)
		cache_put(tz, path);
	if (err) {
		shmrun_tz_free(tz);
		snprintf(why, len, "out of memory");
	}
	return err;
}

void shmrun_tz_free(struct shmrun_tz *tz)
{
	free(tz->at);
	free(tz->off);
	memset(tz, 0, sizeof(*tz));
}

/* The interval that holds UTC instant @t. */
static uint32_t find(struct shmrun_tz *tz, int64_t t)
{
	uint32_t lo = 0, hi = tz->n, h = tz->hint;

	if (h < tz->n && tz->at[h] <= t && (h + 1 == tz->n || t < tz->at[h + 1]))
		return h;
	while (hi - lo > 1) { /* at[lo] <= t < at[hi] */
		uint32_t mid = lo + (hi - lo) / 2;

		if (tz->at[mid] <= t)
			lo = mid;
		else
			hi = mid;
	}
	tz->hint = lo;
	return lo;
}

int64_t shmrun_tz_utc(struct shmrun_tz *tz, int64_t local_s)
{
	uint32_t k0, from, to;
	int64_t best = 0;
	bool found = false;

	if (tz->n <= 1)
		return local_s - (tz->n ? tz->off[0] : 0);
	/* offsets are below a day and intervals longer: the answer's interval
	 * is next to the one holding local_s read as UTC */
	k0 = find(tz, local_s);
	from = k0 ? k0 - 1 : 0;
	to = k0 + 1 < tz->n ? k0 + 1 : k0;
	for (uint32_t k = from; k <= to; k++) {
		int64_t u = local_s - tz->off[k];

		if (tz->at[k] <= u && (k + 1 == tz->n || u < tz->at[k + 1]) &&
		    (!found || u < best)) {
			best = u; /* the earliest of two occurrences */
			found = true;
		}
	}
	if (found)
		return best;
	/* skipped: the offset before the change */
	for (uint32_t k = to + 1; k-- > from;) {
		int64_t u = local_s - tz->off[k];

		if (k + 1 < tz->n && u >= tz->at[k + 1])
			return u;
	}
	return local_s - tz->off[k0];
}

/* --------------------------------------------------------------------------- */

/* Whether strptime conversion @c (after % and an optional E or O) is allowed;
 * else *@hint says why not. */
static bool conversion_ok(char c, const char **hint)
{
	switch (c) {
	case 's':
		*hint = "%s reads epoch seconds through the local zone: use time_format = "
			"epoch_s";
		return false;
	case 'Z':
		*hint = "glibc's strptime reads and ignores a zone name: use time_zone, or %z "
			"for a numeric offset such as +0100";
		return false;
	case 'c':
	case 'x':
	case 'X':
		*hint = "the locale's layout: write its fields, e.g. %Y-%m-%d %H:%M:%S";
		return false;
	case 'U':
	case 'W':
	case 'V':
	case 'G':
	case 'g':
	case 'u':
	case 'w':
		*hint = "week-based fields do not make a date in glibc's strptime: use %Y-%m-%d "
			"or %j";
		return false;
	default:
		if (c && strchr("aAbBhCdeDFHIjmMntprRSTyYz%f", c))
			return true;
		*hint = "not a strptime conversion (see strptime(3); %f is fractional seconds)";
		return false;
	}
}

int shmrun_timefmt_compile(struct shmrun_timefmt *f, const char *fmt, char *why, size_t len)
{
	const char *fpos = NULL, *hint;
	uint32_t conv = 0;

	memset(f, 0, sizeof(*f));
	if (strcmp(fmt, "epoch_s") == 0 || strcmp(fmt, "epoch_ms") == 0) {
		f->kind = fmt[6] == 's' ? SHMRUN_TIMEFMT_EPOCH_S : SHMRUN_TIMEFMT_EPOCH_MS;
		return 0;
	}
	for (const char *p = fmt; *p; p++) {
		const char *at = p;

		if (*p != '%')
			continue;
		p++;
		if (*p == 'E' || *p == 'O')
			p++;
		if (!*p) {
			snprintf(why, len, "'%s' ends with a lone %%: write %%%% for a literal %%",
				 fmt);
			return -EINVAL;
		}
		if (!conversion_ok(*p, &hint)) {
			snprintf(why, len, "'%s': %%%c at offset %zu is not supported: %s", fmt, *p,
				 (size_t)(at - fmt), hint);
			return -EINVAL;
		}
		if (*p == 'f') {
			if (fpos) {
				snprintf(why, len, "'%s' has %%f twice", fmt);
				return -EINVAL;
			}
			fpos = at;
		}
		if (*p == 'z')
			f->has_z = 1;
		if (*p == 'j')
			f->has_j = 1;
		if (*p != '%' && *p != 'n' && *p != 't')
			conv++;
	}
	if (!conv) {
		snprintf(why, len,
			 "'%s' reads no date or time: use strptime conversions such as "
			 "%%Y-%%m-%%d %%H:%%M:%%S, or epoch_s or epoch_ms",
			 fmt);
		return -EINVAL;
	}
	f->kind = SHMRUN_TIMEFMT_STRPTIME;
	if (fpos) {
		f->pre = strndup(fmt, (size_t)(fpos - fmt));
		f->post = strdup(fpos + 2);
	} else {
		f->pre = strdup(fmt);
	}
	if (!f->pre || (fpos && !f->post)) {
		shmrun_timefmt_free(f);
		snprintf(why, len, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

void shmrun_timefmt_free(struct shmrun_timefmt *f)
{
	free(f->pre);
	free(f->post);
	memset(f, 0, sizeof(*f));
}

/* Days from 1970-01-01 to y-m-d of the proleptic Gregorian calendar
 * (H. Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, int64_t m, int64_t d)
{
	int64_t era, yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

/* The days of month @m (1-12) of year @y, proleptic Gregorian. */
static int days_in_month(int64_t y, int m)
{
	static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;

	if (m < 1 || m > 12)
		return 31;
	return days[m - 1] + (m == 2 && leap);
}

/* Up to @maxd digits of a fraction at *@pp into ns (9 digits). Return: digits read. */
static int fraction(const char **pp, int maxd, int64_t *ns)
{
	const char *p = *pp;
	int64_t v = 0;
	int d = 0;

	while (isdigit((unsigned char)*p) && d < maxd) {
		v = v * 10 + (*p++ - '0');
		d++;
	}
	for (int i = d; i < 9; i++)
		v *= 10;
	*ns = v;
	*pp = p;
	return d;
}

static int parse_epoch(const struct shmrun_timefmt *f, const char *s, int64_t *ns)
{
	const bool ms = f->kind == SHMRUN_TIMEFMT_EPOCH_MS;
	const int64_t unit = ms ? 1000000 : 1000000000;
	const int64_t limit = INT64_MAX / unit - 1;
	const char *p = s;
	int64_t v = 0, frac = 0;
	bool neg = false;
	int d = 0;

	if (*p == '-' || *p == '+')
		neg = *p++ == '-';
	while (isdigit((unsigned char)*p)) {
		if (v > (limit - (*p - '0')) / 10) /* v * unit + frac stays in range */
			return -EINVAL;
		v = v * 10 + (*p++ - '0');
		d++;
	}
	if (*p == '.') {
		p++;
		if (fraction(&p, ms ? 6 : 9, &frac) == 0)
			return -EINVAL;
		if (ms)
			frac /= 1000; /* 6 digits of a millisecond, in ns */
	}
	if (!d || *p)
		return -EINVAL;
	*ns = v * unit + frac;
	if (neg)
		*ns = -*ns;
	return 0;
}

int shmrun_timefmt_parse(const struct shmrun_timefmt *f, struct shmrun_tz *tz, const char *s,
			 size_t n, int64_t *ns)
{
	char buf[TEXT_MAX];
	struct tm tm = {.tm_year = 70, .tm_mday = 1};
	const char *p;
	int64_t frac = 0, secs;

	if (n >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, n);
	buf[n] = 0;
	if (memchr(buf, 0, n)) /* a NUL inside would end the text early */
		return -EINVAL;
	if (f->kind != SHMRUN_TIMEFMT_STRPTIME)
		return parse_epoch(f, buf, ns);
	p = strptime(buf, f->pre, &tm);
	if (p && f->post) {
		if (fraction(&p, 9, &frac) == 0)
			return -EINVAL;
		p = *f->post ? strptime(p, f->post, &tm) : p;
	}
	if (!p || *p)
		return -EINVAL;
	/* glibc's strptime takes %d up to 31 in any month (2025-02-31 would
	 * become 2025-03-03), %S up to 61, and a %j past the year's last day
	 * (2023 366 became 2025-02-01) or against its %m %d: what no calendar
	 * has is not a time */
	if (tm.tm_mon < 0 || tm.tm_mon > 11 || tm.tm_sec > 60 ||
	    tm.tm_mday > days_in_month((int64_t)tm.tm_year + 1900, tm.tm_mon + 1))
		return -EINVAL;
	if (f->has_j && tm.tm_yday != days_from_civil((int64_t)tm.tm_year + 1900, tm.tm_mon + 1,
						       tm.tm_mday) -
					   days_from_civil((int64_t)tm.tm_year + 1900, 1, 1))
		return -EINVAL;
	secs = days_from_civil((int64_t)tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday) * DAY_S +
	       tm.tm_hour * 3600ll + tm.tm_min * 60ll + tm.tm_sec;
	secs = f->has_z ? secs - tm.tm_gmtoff : shmrun_tz_utc(tz, secs);
	if (secs > INT64_MAX / 1000000000 - 1 || secs < INT64_MIN / 1000000000 + 1)
		return -EINVAL;
	*ns = secs * 1000000000 + frac;
	return 0;
}
