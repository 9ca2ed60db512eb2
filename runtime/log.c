/*
 * runtime/log.c: one-line log records on stderr, as text or JSON, and the
 * status line (the progress line) that log lines must not interleave with.
 *
 * Text (--log-format=text, the default):
 *
 *     2026-11-29T21:48:22.123Z wordcount INFO  launcher: job wordcount: 2 workers, ...
 *     2026-11-29T21:48:22.125Z wordcount WARN  worker 1: stage 'parse' [0]: bad record 17
 *
 * time (UTC, ms), job ("-" before the topology is loaded), level, the process
 * (launcher or worker N), then for a task's line "stage 'S' [i]: ", then the
 * message. Whitespace-separated up to the ':' after the process, so `awk` and
 * `grep "ERROR launcher:"` keep working.
 *
 * JSON (--log-format=json): one object per line, made with jansson:
 *
 *     {"time":"2026-11-29T21:48:22.125Z","level":"warn","job":"wordcount",
 *      "worker":1,"stage":"parse","instance":0,"msg":"bad record 17"}
 *
 * worker only in a worker's lines, stage and instance only in a task's
 * (shmrun_log_task()); job is null before the topology is loaded.
 *
 * Each line is formatted into one buffer and written with one write(2), so lines
 * from several worker processes sharing stderr never interleave mid-line (up to
 * PIPE_BUF bytes; longer lines, which name long paths, are still written whole
 * up to LINE_MAX_BYTES, and past that lose their middle, never their end; a
 * JSON line that long is replaced by one saying so, never cut into bad JSON).
 *
 * The status line. The launcher draws one line on stderr without a newline
 * (shmrun_status_draw(): "\r\e[K" + text) and redraws it every tick; workers,
 * other processes, write log lines to the same terminal at any time. So when
 * a status line may be on screen (shmrun_status_enable() before the workers
 * are forked: stderr is a TTY and the progress line is wanted; workers
 * inherit the flag), every log line of every process begins with "\r\e[K"
 * inside its one write(2): it erases whatever partial line the cursor is on —
 * the status line — and starts at column 0, so the log line stands whole on
 * a line of its own and the next tick draws the status line again below it.
 * A terminal takes one write(2) whole (the tty layer serialises writers per
 * call), so a draw and a log line never mix. Output that does not come
 * through here (an operator's own fprintf(stderr)) is not covered: it may
 * start after the status line; the next draw erases only its last partial line.
 *
 * Rejected: relaying the workers' stderr through a pipe to the launcher (one
 * writer to the terminal, but a crashing worker's last lines would then
 * depend on the launcher reading them in time, and every line costs a copy);
 * a lock shared by the processes around each write (a worker killed while
 * holding it would stop every log line).
 */
#include <errno.h>
#include <jansson.h>
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

/* Erase the line the cursor is on and go to its column 0 (ECMA-48 EL). */
#define ERASE "\r\033[K"

static enum shmrun_log_level threshold = SHMRUN_LOG_INFO;
static enum shmrun_log_format format = SHMRUN_LOG_TEXT;
static char role[32] = "launcher";
static long worker = -1; /* this process's worker index, -1 in the launcher */
static char job[80];     /* "" until the topology is loaded */
static bool status_on;   /* a status line may be on screen: erase before each line */

static const char *const names[] = {"ERROR", "WARN", "INFO", "DEBUG"};
static const char *const json_names[] = {"error", "warn", "info", "debug"};

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

int shmrun_log_parse_format(const char *s)
{
	if (strcmp(s, "text") == 0)
		return SHMRUN_LOG_TEXT;
	if (strcmp(s, "json") == 0)
		return SHMRUN_LOG_JSON;
	return -EINVAL;
}

void shmrun_log_set_format(enum shmrun_log_format f)
{
	format = f;
}

enum shmrun_log_format shmrun_log_get_format(void)
{
	return format;
}

void shmrun_log_set_role(const char *r)
{
	snprintf(role, sizeof(role), "%s", r);
}

void shmrun_log_set_worker(uint32_t index)
{
	worker = index;
	snprintf(role, sizeof(role), "worker %u", index);
}

void shmrun_log_set_job(const char *name)
{
	snprintf(job, sizeof(job), "%s", name ? name : "");
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

/* Write all of @buf (@n bytes) to stderr in one write(2) unless interrupted. */
static void write_line(const char *buf, size_t n)
{
	while (write(STDERR_FILENO, buf, n) < 0 && errno == EINTR)
		;
}

/* "2026-11-29T21:48:22.123Z" (RFC 3339, UTC, milliseconds) into @buf of at least 32 bytes. */
static void now_utc(char *buf, size_t len)
{
	struct timespec ts;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ts.tv_nsec / 1000000));
}

/* @o.@key = @v (taken over); false when out of memory. */
static bool put(json_t *o, const char *key, json_t *v)
{
	return v && json_object_set_new(o, key, v) == 0;
}

/* One JSON line of @msg into @line (@cap bytes, after @n bytes already there). Return: its length, or -1. */
static int format_json(char *line, size_t cap, size_t n, const char *when,
		       enum shmrun_log_level level, const char *stage, long instance, const char *msg)
{
	json_t *o = json_object();
	size_t k;

	if (!o || !put(o, "time", json_string(when)) ||
	    !put(o, "level", json_string(json_names[level])) ||
	    !put(o, "job", *job ? json_string(job) : json_null()) ||
	    (worker >= 0 && !put(o, "worker", json_integer(worker))) ||
	    (stage && (!put(o, "stage", json_string(stage)) ||
		       !put(o, "instance", json_integer(instance)))) ||
	    !put(o, "msg", json_string(msg))) {
		json_decref(o);
		return -1;
	}
	k = json_dumpb(o, line + n, cap - n - 1, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (k > cap - n - 1) { /* too long: say so rather than cut the JSON */
		char note[200];

		snprintf(note, sizeof(note), "(a log line of %zu bytes, too long for one line)", k);
		json_object_set_new(o, "msg", json_string(note));
		k = json_dumpb(o, line + n, cap - n - 1, JSON_COMPACT | JSON_PRESERVE_ORDER);
	}
	json_decref(o);
	return k > cap - n - 1 ? -1 : (int)(n + k);
}

int shmrun_log_format_json(enum shmrun_log_level level, const char *msg, char *buf, size_t cap)
{
	char when[80];

	now_utc(when, sizeof(when));
	if (cap < 2)
		return -1;
	return format_json(buf, cap, 0, when, level, NULL, 0, msg);
}

/*
 * The line of @msg (whole, any length) at @level; of task (@stage, @instance)
 * if @stage; @where ("job.conf:7", or NULL) goes before the stage in text and
 * before the message in JSON.
 */
static void emit(enum shmrun_log_level level, const char *where, const char *stage, long instance,
		 const char *msg)
{
	char line[LINE_MAX_BYTES], when[80], *joined = NULL;
	int n = 0;

	now_utc(when, sizeof(when));
	if (status_on) {
		memcpy(line, ERASE, sizeof(ERASE) - 1);
		n = sizeof(ERASE) - 1;
	}
	if (format == SHMRUN_LOG_JSON) {
		if (where && asprintf(&joined, "%s: %s", where, msg) < 0)
			return;
		n = format_json(line, sizeof(line), (size_t)n, when, level, stage, instance,
				joined ? joined : msg);
		free(joined);
		if (n < 0)
			return;
	} else {
		int k = snprintf(line + n, sizeof(line) - (size_t)n, "%s %s %-5s %s: ", when,
				 *job ? job : "-", names[level], role);

		if (k < 0)
			return;
		n += k;
		if (where) {
			k = snprintf(line + n, sizeof(line) - (size_t)n, "%s: ", where);
			if (k < 0 || (size_t)(n + k) >= sizeof(line) / 2)
				return;
			n += k;
		}
		if (stage) {
			k = snprintf(line + n, sizeof(line) - (size_t)n, "stage '%s' [%ld]: ", stage,
				     instance);
			if (k < 0 || (size_t)(n + k) >= sizeof(line) / 2)
				return;
			n += k;
		}
		/* one write of at most LINE_MAX_BYTES; a longer message loses its middle */
		shmrun_fit_middle(line + n, sizeof(line) - 1 - (size_t)n, msg);
		n += (int)strlen(line + n);
	}
	line[n++] = '\n';
	write_line(line, (size_t)n);
}

void shmrun_vlog(enum shmrun_log_level level, const char *fmt, va_list ap)
{
	char *msg = NULL;

	if (level > threshold)
		return;
	if (vasprintf(&msg, fmt, ap) < 0)
		return;
	emit(level, NULL, NULL, 0, msg);
	free(msg);
}

void shmrun_log(enum shmrun_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	shmrun_vlog(level, fmt, ap);
	va_end(ap);
}

void shmrun_log_plain(const char *fmt, ...)
{
	va_list ap;
	char *text = NULL;

	va_start(ap, fmt);
	if (vasprintf(&text, fmt, ap) < 0)
		text = NULL;
	va_end(ap);
	if (!text)
		return;
	if (format == SHMRUN_LOG_JSON) {
		/* each line its own record: stderr stays one JSON object per line */
		for (char *line = text, *nl; *line; line = nl) {
			nl = strchrnul(line, '\n');
			if (*nl)
				*nl++ = '\0';
			if (*line)
				emit(SHMRUN_LOG_INFO, NULL, NULL, 0, line);
		}
	} else if (status_on) {
		char *erased = NULL;

		if (asprintf(&erased, ERASE "%s", text) >= 0) {
			write_line(erased, strlen(erased));
			free(erased);
		}
	} else {
		write_line(text, strlen(text));
	}
	free(text);
}

void shmrun_log_task(enum shmrun_log_level level, const char *where, const char *stage,
		     uint32_t instance, const char *msg)
{
	if (level > threshold)
		return;
	emit(level, where, stage, instance, msg);
}

/* ---- the status line ---------------------------------------------------------- */

static bool status_shown; /* this process drew it and nothing has erased it since */

void shmrun_status_enable(bool on)
{
	status_on = on;
}

bool shmrun_status_enabled(void)
{
	return status_on;
}

void shmrun_status_draw(const char *text)
{
	char buf[512];
	int n;

	if (!status_on)
		return;
	/* no newline: the cursor stays on it, and the next line (a log
	 * line, or the next draw) erases it first */
	n = snprintf(buf, sizeof(buf), ERASE "%s", text);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(buf))
		n = sizeof(buf) - 1;
	write_line(buf, (size_t)n);
	status_shown = true;
}

void shmrun_status_end(const char *final)
{
	if (!status_on)
		return;
	if (final && *final) {
		char buf[512];
		int n = snprintf(buf, sizeof(buf), ERASE "%s\n", final);

		if (n > 0 && (size_t)n < sizeof(buf))
			write_line(buf, (size_t)n);
	} else if (status_shown) {
		write_line(ERASE, sizeof(ERASE) - 1);
	}
	status_shown = false;
	status_on = false; /* what follows (the report) is plain output */
}
