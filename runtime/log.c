/*
 * runtime/log.c: one-line log records on stderr.
 *
 *     2026-11-29T21:48:22.123Z INFO  launcher: started 2 workers
 *
 * Each line is formatted into one buffer and written with one write(2), so lines
 * from several worker processes sharing stderr never interleave mid-line (up to
 * PIPE_BUF bytes).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "shmrun/runtime.h"

static enum shmrun_log_level threshold = SHMRUN_LOG_INFO;
static char role[32] = "launcher";

static const char *const names[] = {"ERROR", "WARN", "INFO", "DEBUG"};

void shmrun_log_set_level(enum shmrun_log_level level)
{
	threshold = level;
}

int shmrun_log_parse_level(const char *s)
{
	for (int i = 0; i < 4; i++)
		if (strcasecmp(s, names[i]) == 0)
			return i;
	if (strcasecmp(s, "warning") == 0)
		return SHMRUN_LOG_WARN;
	return -EINVAL;
}

void shmrun_log_set_role(const char *r)
{
	snprintf(role, sizeof(role), "%s", r);
}

void shmrun_vlog(enum shmrun_log_level level, const char *fmt, va_list ap)
{
	char line[4096];
	struct timespec ts;
	struct tm tm;
	int n;

	if (level > threshold)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s %s: ",
		     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		     ts.tv_nsec / 1000000, names[level], role);
	if (n < 0)
		return;
	n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	while (write(STDERR_FILENO, line, (size_t)n) < 0 && errno == EINTR)
		;
}

void shmrun_log(enum shmrun_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	shmrun_vlog(level, fmt, ap);
	va_end(ap);
}
