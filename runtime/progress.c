/*
 * runtime/progress.c: the progress line of a job with finite input (issue 13
 * item 5), drawn by the launcher on stderr when that is a terminal:
 *
 *     wordcount: 41% 12.3 MiB of 30.1 MiB, 8.2 MiB/s, ETA 2 s, checkpoint 12
 *
 * What it reads: the metrics block (metrics.h), never the workers: the sum of
 * source_pos and of source_total over the tasks of file_source stages (the
 * job line's input_bytes when the sources do not know their total yet), both
 * of the current start (after a restore: of what was left to read). The
 * rate is over the last RATE_WINDOW draws (about two seconds), so it follows
 * changes of pace; the ETA is what is left at that rate. The checkpoint is
 * the newest complete epoch (ckpt_epoch): the per-epoch log lines are at
 * debug level, so this is where a person sees checkpoints being taken.
 *
 * When: shmrun_progress_tick() runs once per supervision tick (the launcher's
 * serve_outside(), <= 100 ms apart) and draws at most every DRAW_NS (4x/s);
 * shmrun_progress_pause() erases it when a start ends (before the end-of-run
 * report, and during a restart's backoff; the next start's ticks draw it
 * again). Log lines never interleave with it: log.c erases it before every
 * log line of every process (its opening comment says how).
 *
 * Off: stderr not a terminal, --no-progress, no file_source stage, or the
 * metrics block off (SHMRUN_COUNTERS=off).
 *
 * The line is cut to the terminal's width less one column: a line that wraps
 * could not be erased by "\r\e[K", which erases one screen row.
 *
 * Rejected: drawing from a worker (workers do not know the other workers'
 * positions, and a worker must never block on a terminal); a thread in the
 * launcher (the supervision tick already comes often enough).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "internal.h"
#include "metrics.h"
#include "util.h"

#define DRAW_NS 250000000ll /* at most 4 draws a second */
#define RATE_WINDOW 8       /* draws the rate is taken over: about 2 s */

static struct {
	bool on;
	int64_t last_draw_ns;
	uint32_t nsamples, next;
	struct {
		int64_t t_ns;
		uint64_t pos;
	} samples[RATE_WINDOW];
} pg;

/* Whether @job has a file_source stage. */
static bool has_file_source(const struct shmrun_job *job)
{
	for (uint32_t s = 0; s < job->nstages; s++)
		if (strcmp(job->stages[s].op->name, "file_source") == 0)
			return true;
	return false;
}

void shmrun_progress_setup(const struct shmrun_job *job, bool want)
{
	pg.on = want && isatty(STDERR_FILENO) && has_file_source(job);
	shmrun_status_enable(pg.on);
}

/* "12.3 MiB" of @bytes into @buf. */
static void human(char *buf, size_t len, double bytes)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	int u = 0;

	while (bytes >= 1024 && u < 5) {
		bytes /= 1024;
		u++;
	}
	snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", bytes, units[u]);
}

/* "2 s", "3 min 5 s", "1 h 02 min" of @secs into @buf. */
static void duration(char *buf, size_t len, double secs)
{
	unsigned long s = secs < 0 ? 0 : (unsigned long)(secs + 0.5);

	if (s < 60)
		snprintf(buf, len, "%lu s", s);
	else if (s < 3600)
		snprintf(buf, len, "%lu min %lu s", s / 60, s % 60);
	else
		snprintf(buf, len, "%lu h %02lu min", s / 3600, s % 3600 / 60);
}

/* The bytes the file sources of @m have read, and of how many (0: unknown). */
static void input_position(const struct shmrun_metrics *m, uint64_t *pos, uint64_t *total)
{
	*pos = *total = 0;
	for (uint32_t s = 0; s < m->stages; s++) {
		const struct shmrun_metrics_stage *st = shmrun_metrics_stage(m, s);

		if (strcmp(st->op, "file_source") != 0)
			continue;
		for (uint32_t i = 0; i < st->width; i++) {
			const struct shmrun_metrics_task *t = shmrun_metrics_task(m, st->task0 + i);

			/* relaxed: counters, each a value of its own (metrics.h) */
			*pos += atomic_load_explicit(&t->source_pos, memory_order_relaxed);
			*total += atomic_load_explicit(&t->source_total, memory_order_relaxed);
		}
	}
	if (!*total)
		*total = atomic_load_explicit(&m->input_bytes, memory_order_relaxed);
}

/* The rate in bytes/s over the samples kept, after adding (@now, @pos); < 0: not known yet. */
static double rate_of(int64_t now, uint64_t pos)
{
	uint32_t oldest;
	double dt;

	if (pg.nsamples && pos < pg.samples[(pg.next + RATE_WINDOW - 1) % RATE_WINDOW].pos)
		pg.nsamples = 0; /* went back: a restart restored an earlier position */
	pg.samples[pg.next].t_ns = now;
	pg.samples[pg.next].pos = pos;
	pg.next = (pg.next + 1) % RATE_WINDOW;
	if (pg.nsamples < RATE_WINDOW)
		pg.nsamples++;
	if (pg.nsamples < 2)
		return -1;
	oldest = (pg.next + RATE_WINDOW - pg.nsamples) % RATE_WINDOW;
	dt = (double)(now - pg.samples[oldest].t_ns) / 1e9;
	return dt > 0 ? (double)(pos - pg.samples[oldest].pos) / dt : -1;
}

/* The columns of the terminal on stderr, 80 if it does not say. */
static unsigned columns(void)
{
	struct winsize ws;

	if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		return ws.ws_col;
	return 80;
}

void shmrun_progress_format(char *buf, size_t len, const char *job, uint64_t pos, uint64_t total,
			    double rate, uint64_t epoch)
{
	char a[32], b[32], r[32], eta[40];
	size_t n;
	int k;

	human(a, sizeof(a), (double)pos);
	if (total) {
		human(b, sizeof(b), (double)total);
		k = snprintf(buf, len, "%s: %u%% %s of %s", job,
			     (unsigned)(pos >= total ? 100 : pos * 100 / total), a, b);
	} else {
		k = snprintf(buf, len, "%s: %s read", job, a);
	}
	if (k < 0 || (size_t)k >= len)
		return;
	n = (size_t)k;
	if (rate >= 0) {
		human(r, sizeof(r), rate);
		if (total && pos < total && rate > 0) {
			duration(eta, sizeof(eta), (double)(total - pos) / rate);
			k = snprintf(buf + n, len - n, ", %s/s, ETA %s", r, eta);
		} else {
			k = snprintf(buf + n, len - n, ", %s/s", r);
		}
		if (k < 0 || (size_t)k >= len - n)
			return;
		n += (size_t)k;
	}
	if (epoch)
		snprintf(buf + n, len - n, ", checkpoint %" PRIu64, epoch);
}

void shmrun_progress_tick(const struct shmrun_metrics *m)
{
	int64_t now = shmrun_now_ns();
	uint64_t pos, total;
	char line[256];
	unsigned cols;
	double rate;

	if (!pg.on || !m || now - pg.last_draw_ns < DRAW_NS ||
	    atomic_load_explicit(&m->state, memory_order_relaxed) != SHMRUN_JOB_RUNNING)
		return;
	pg.last_draw_ns = now;
	input_position(m, &pos, &total);
	rate = rate_of(now, pos);
	shmrun_progress_format(line, sizeof(line), m->job, pos, total, rate,
			       atomic_load_explicit(&m->ckpt_epoch, memory_order_relaxed));
	cols = columns();
	if (strlen(line) >= cols)
		line[cols > 1 ? cols - 1 : 0] = '\0'; /* never wrap: see the top */
	shmrun_status_draw(line);
}

void shmrun_progress_pause(void)
{
	if (!pg.on)
		return;
	shmrun_status_draw(""); /* erases it; an empty line stays, at column 0 */
	pg.last_draw_ns = 0;
	pg.nsamples = 0;
}
