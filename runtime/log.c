/*
 * runtime/log.c: one-line log records on stderr.
 *
 *     2026-11-29T21:48:22.123Z INFO  launcher: started 2 workers
 *
 * Each line is formatted into one buffer and written with one write(2), so lines
 * from several worker processes sharing stderr never interleave mid-line (up to
 * PIPE_BUF bytes; longer lines, which name long paths, are still written whole
 * up to LINE_MAX_BYTES, and past that lose their middle, never their end).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "shmrun/runtime.h"

/* The longest log line: room for a few paths of PATH_MAX (4096) bytes. */
#define LINE_MAX_BYTES (16u << 10)

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

char *shmrun_fit_middle(char *dst, size_t cap, const char *src)
{
	static const char mark[] = " … ";
	size_t len = strlen(src), m = sizeof(mark) - 1, head, tail;

	if (cap == 0)
		return dst;
	if (len < cap) {
		memcpy(dst, src, len + 1);
		return dst;
	}
	if (cap <= m + 2) {
		memcpy(dst, src + len - (cap - 1), cap); /* the end, NUL included */
		return dst;
	}
	/* keep the end whole: a third of the room for the head, the rest for the tail */
	head = (cap - 1 - m) / 3;
	tail = cap - 1 - m - head;
	while (head && ((unsigned char)src[head] & 0xC0) == 0x80)
		head--; /* not inside a UTF-8 sequence */
	while (tail && ((unsigned char)src[len - tail] & 0xC0) == 0x80)
		tail--;
	memcpy(dst, src, head);
	memcpy(dst + head, mark, m);
	memcpy(dst + head + m, src + len - tail, tail + 1);
	return dst;
}

void shmrun_vlog(enum shmrun_log_level level, const char *fmt, va_list ap)
{
	char line[LINE_MAX_BYTES], *msg = NULL;
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
	/* one write of at most LINE_MAX_BYTES; a longer message loses its middle */
	if (vasprintf(&msg, fmt, ap) < 0)
		return;
	shmrun_fit_middle(line + n, sizeof(line) - 1 - (size_t)n, msg);
	free(msg);
	n += (int)strlen(line + n);
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
