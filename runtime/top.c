/*
 * runtime/top.c: `shmrun top [JOB]` — a live view of a running job, read from
 * its metrics block (metrics.h) through the job's socket (jobsock.h); the
 * reference for the screen and the JSON is docs/observability.md
 * "shmrun top".
 *
 * What it is for. The person running a low-latency job wants to see, while it
 * runs, where the records go (records in/out per second per stage and task),
 * which ring is full (ring fill), which task is backpressured (its share of
 * time parked on a full output), where each task runs (worker, CPU, pid) and
 * how old the last checkpoint is: Flink's web UI and AeronStat in a terminal.
 *
 * How. top gets a read-only descriptor of the block once, maps it, closes the
 * descriptor and from then on only loads counters (relaxed, SHMRUN_METRIC()):
 * it costs the job nothing, and it keeps the mapping when the job exits, so it
 * can show the final numbers. Every refresh takes a sample — a copy of every
 * counter with the CLOCK_MONOTONIC time it was taken at — and shows the
 * difference of the newest two: rates are (b - a) / (tb - ta), and busy,
 * backpressure and idle are each one's share of the task's accounted time
 * (busy + idle + backpressure) between the samples. With one sample only
 * (`--interval 0` off a terminal) rates are absent and the shares are over the
 * whole run.
 *
 * Three outputs from the same rows (struct row):
 *  - a terminal (stdin and stdout both TTYs): the alternate screen, redrawn
 *    every --interval (1 s) until q, ^C or a stop signal; the terminal is put
 *    in non-canonical no-echo mode and restored on every way out: q, ^C and
 *    SIGTERM/SIGHUP/SIGQUIT (handlers set a flag), ^Z (restored, stopped,
 *    raw again on SIGCONT), a crash (SIGSEGV etc. restore then re-raise), and
 *    the job's end (the final numbers are printed on the normal screen);
 *  - otherwise one text snapshot, rates over one --interval;
 *  - --json: one JSON snapshot (jansson), rates over one --interval.
 *
 * A hidden option, --metrics-path PATH, maps the block from a file rather
 * than through the job socket (e.g. /proc/PID/fd/N of a launcher's memfd):
 * for tests and debugging only, not in the usage.
 *
 * Rejected:
 *  - ncurses: a screen of fixed-width lines redrawn in place needs three
 *    escape sequences (home, clear to end of line, clear to end of screen)
 *    and the alternate screen, which every terminal tmux and xterm emulate;
 *  - per-task rows only: a wide stage would hide the stage's total, which
 *    is what one looks at first; the stage row sums its tasks, takes the
 *    fullest ring of any of them and the smallest watermark (the stage's
 *    watermark, as Flink's operator watermark is its subtasks' minimum);
 *  - ring fill summed over a task's output channels: one full ring is what
 *    parks a task, and a sum over many near-empty rings would hide it; the
 *    fill shown is the task's fullest output ring.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "jobsock.h"
#include "metrics.h"
#include "top.h"
#include "util.h"

/* ---- formatting helpers (pure; tests/unit/check_top.c) ---- */

/* @v (>= 0) scaled by @base into @units: "12.3k", "4.50 MiB". */
static const char *scaled(char *buf, size_t len, double v, double base, const char *const *units,
			  int nunits, const char *sep)
{
	int u = 0;

	if (!(v > 0))
		v = 0;
	while (u < nunits - 1 && v >= base - 0.5) {
		v /= base;
		u++;
	}
	if (u == 0 && v == floor(v))
		snprintf(buf, len, "%.0f%s%s", v, sep, units[0]);
	else if (v < 9.995)
		snprintf(buf, len, "%.2f%s%s", v, sep, units[u]);
	else if (v < 99.95)
		snprintf(buf, len, "%.1f%s%s", v, sep, units[u]);
	else
		snprintf(buf, len, "%.0f%s%s", v, sep, units[u]);
	return buf;
}

const char *top_fmt_bytes(char *buf, size_t len, double bytes)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};

	if (isnan(bytes)) {
		snprintf(buf, len, "-");
		return buf;
	}
	return scaled(buf, len, bytes, 1024, units, 7, " ");
}

const char *top_fmt_count(char *buf, size_t len, double n)
{
	static const char *const units[] = {"", "k", "M", "G", "T", "P", "E"};

	if (isnan(n)) {
		snprintf(buf, len, "-");
		return buf;
	}
	return scaled(buf, len, n, 1000, units, 7, "");
}

const char *top_fmt_duration(char *buf, size_t len, int64_t ns)
{
	int64_t s = ns / 1000000000;

	if (ns < 0)
		snprintf(buf, len, "-");
	else if (ns == 0)
		snprintf(buf, len, "0s");
	else if (ns < 1000)
		snprintf(buf, len, "%" PRId64 "ns", ns);
	else if (ns < 999500)
		snprintf(buf, len, "%.0fus", (double)ns / 1e3);
	else if (ns < 999500000)
		snprintf(buf, len, "%.0fms", (double)ns / 1e6);
	else if (ns < 59950000000)
		snprintf(buf, len, "%.1fs", (double)ns / 1e9);
	else if (s < 3600)
		snprintf(buf, len, "%" PRId64 "m%02" PRId64 "s", s / 60, s % 60);
	else if (s < 86400)
		snprintf(buf, len, "%" PRId64 "h%02" PRId64 "m", s / 3600, s / 60 % 60);
	else
		snprintf(buf, len, "%" PRId64 "d%02" PRId64 "h", s / 86400, s / 3600 % 24);
	return buf;
}

const char *top_fmt_bar(char *buf, size_t len, double share, int width)
{
	char bar[131];
	int n;

	if (width < 1)
		width = 1;
	if (width > 128)
		width = 128;
	if (isnan(share)) {
		n = -1;
	} else {
		if (share < 0)
			share = 0;
		if (share > 1)
			share = 1;
		n = (int)lround(share * width);
		if (share > 0 && n == 0)
			n = 1;
		if (share < 1 && n == width && width > 1)
			n = width - 1;
	}
	bar[0] = '[';
	for (int i = 0; i < width; i++)
		bar[1 + i] = n < 0 ? '-' : i < n ? '#' : ' ';
	bar[1 + width] = ']';
	bar[2 + width] = '\0';
	snprintf(buf, len, "%s", bar);
	return buf;
}

double top_rate(uint64_t a, uint64_t b, uint64_t dt_ns)
{
	if (!dt_ns)
		return NAN;
	if (b < a)
		return 0;
	return (double)(b - a) * 1e9 / (double)dt_ns;
}

double top_ring_fill(uint64_t tail, uint64_t head, uint64_t capacity)
{
	if (!capacity)
		return NAN;
	if (tail <= head)
		return 0;
	if (tail - head >= capacity)
		return 1;
	return (double)(tail - head) / (double)capacity;
}

double top_share(uint64_t part, uint64_t whole)
{
	if (!whole)
		return NAN;
	if (part >= whole)
		return 1;
	return (double)part / (double)whole;
}

/* ---- samples: a copy of every counter at one moment ---- */

struct task_sample {
	uint64_t rin, rout, bin, bout, busy, idle, bp;
	uint64_t state_bytes, keys, bad, late;
	int64_t wm;
	uint32_t parked, ended;
};

struct sample {
	int64_t mono_ns, wall_ns;
	uint32_t state;
	int32_t exit_status;
	bool launcher_gone; /* not done or failed, and the launcher's pid is gone */
	uint64_t restarts, restored_epoch;
	int64_t start_wall_ns;
	uint64_t ck_epoch, ck_completed, ck_aborted, ck_duration_ns, ck_bytes, ck_in_flight;
	int64_t ck_wall_ns;
	struct task_sample *t; /* [m->tasks] */
	uint64_t *tail, *head; /* [m->chans] */
	int32_t *pid;	       /* [m->workers] */
	uint64_t *turns, *sleep_ns, *stall_last_ns, *stall_max_ns;
};

static int sample_alloc(struct sample *s, const struct shmrun_metrics *m)
{
	memset(s, 0, sizeof(*s));
	s->t = calloc(m->tasks ? m->tasks : 1, sizeof(*s->t));
	s->tail = calloc(m->chans ? m->chans : 1, sizeof(*s->tail));
	s->head = calloc(m->chans ? m->chans : 1, sizeof(*s->head));
	s->pid = calloc(m->workers ? m->workers : 1, sizeof(*s->pid));
	s->turns = calloc(m->workers ? m->workers : 1, sizeof(*s->turns));
	s->sleep_ns = calloc(m->workers ? m->workers : 1, sizeof(*s->sleep_ns));
	s->stall_last_ns = calloc(m->workers ? m->workers : 1, sizeof(*s->stall_last_ns));
	s->stall_max_ns = calloc(m->workers ? m->workers : 1, sizeof(*s->stall_max_ns));
	return s->t && s->tail && s->head && s->pid && s->turns && s->sleep_ns &&
		       s->stall_last_ns && s->stall_max_ns
		   ? 0
		   : -ENOMEM;
}

static void sample_free(struct sample *s)
{
	free(s->t);
	free(s->tail);
	free(s->head);
	free(s->pid);
	free(s->turns);
	free(s->sleep_ns);
	free(s->stall_last_ns);
	free(s->stall_max_ns);
}

static void sample_take(struct sample *s, const struct shmrun_metrics *m)
{
	/* the block is mapped read-only: loads only, each one relaxed */
	struct shmrun_metrics *w = (struct shmrun_metrics *)m;

	s->mono_ns = shmrun_now_ns();
	s->wall_ns = shmrun_wall_ns();
	s->state = SHMRUN_METRIC(w->state);
	s->exit_status = SHMRUN_METRIC(w->exit_status);
	s->restarts = SHMRUN_METRIC(w->restarts);
	s->restored_epoch = SHMRUN_METRIC(w->restored_epoch);
	s->start_wall_ns = SHMRUN_METRIC(w->start_wall_ns);
	s->ck_epoch = SHMRUN_METRIC(w->ckpt_epoch);
	s->ck_completed = SHMRUN_METRIC(w->ckpt_completed);
	s->ck_aborted = SHMRUN_METRIC(w->ckpt_aborted);
	s->ck_duration_ns = SHMRUN_METRIC(w->ckpt_duration_ns);
	s->ck_bytes = SHMRUN_METRIC(w->ckpt_bytes);
	s->ck_wall_ns = SHMRUN_METRIC(w->ckpt_wall_ns);
	s->ck_in_flight = SHMRUN_METRIC(w->ckpt_in_flight);
	for (uint32_t i = 0; i < m->tasks; i++) {
		struct shmrun_metrics_task *t = shmrun_metrics_task(m, i);
		struct task_sample *o = &s->t[i];

		o->rin = SHMRUN_METRIC(t->records_in);
		o->rout = SHMRUN_METRIC(t->records_out);
		o->bin = SHMRUN_METRIC(t->bytes_in);
		o->bout = SHMRUN_METRIC(t->bytes_out);
		o->busy = SHMRUN_METRIC(t->busy_ns);
		o->idle = SHMRUN_METRIC(t->idle_ns);
		o->bp = SHMRUN_METRIC(t->backpressure_ns);
		o->wm = SHMRUN_METRIC(t->watermark);
		o->state_bytes = SHMRUN_METRIC(t->state_bytes);
		o->keys = SHMRUN_METRIC(t->keys);
		o->bad = SHMRUN_METRIC(t->records_bad);
		o->late = SHMRUN_METRIC(t->records_late);
		o->parked = SHMRUN_METRIC(t->parked);
		o->ended = SHMRUN_METRIC(t->ended);
	}
	for (uint32_t c = 0; c < m->chans; c++) {
		struct shmrun_metrics_chan *ch = shmrun_metrics_chan(m, c);

		/* head first: a tail loaded after it is never behind it in one start */
		s->head[c] = SHMRUN_METRIC(ch->head);
		s->tail[c] = SHMRUN_METRIC(ch->tail);
	}
	for (uint32_t k = 0; k < m->workers; k++) {
		struct shmrun_metrics_worker *wk = shmrun_metrics_worker(m, k);

		s->pid[k] = SHMRUN_METRIC(wk->pid);
		s->turns[k] = SHMRUN_METRIC(wk->turns);
		s->sleep_ns[k] = SHMRUN_METRIC(wk->sleep_ns);
		s->stall_last_ns[k] = SHMRUN_METRIC(wk->stall_last_ns);
		s->stall_max_ns[k] = SHMRUN_METRIC(wk->stall_max_ns);
	}
	s->launcher_gone = s->state != SHMRUN_JOB_DONE && s->state != SHMRUN_JOB_FAILED &&
			   kill(m->launcher_pid, 0) && errno == ESRCH;
}

/* Whether the job has ended (done, failed, or its launcher is gone), now. */
static bool job_over(const struct shmrun_metrics *m)
{
	uint32_t st = SHMRUN_METRIC(((struct shmrun_metrics *)m)->state);

	return st == SHMRUN_JOB_DONE || st == SHMRUN_JOB_FAILED ||
	       (kill(m->launcher_pid, 0) && errno == ESRCH);
}

static bool sample_ended(const struct sample *s)
{
	return s->state == SHMRUN_JOB_DONE || s->state == SHMRUN_JOB_FAILED || s->launcher_gone;
}

static const char *state_name(const struct sample *s)
{
	static const char *const names[] = {"starting",	  "running", "stopping",
					    "restarting", "done",    "failed"};

	if (s->launcher_gone)
		return "gone";
	return s->state < sizeof(names) / sizeof(names[0]) ? names[s->state] : "unknown";
}

/* ---- rows: what a stage or a task shows, from two samples ---- */

struct row {
	uint64_t rin, rout, bin, bout;		 /* totals */
	double rin_s, rout_s, bin_s, bout_s;	 /* per second; NaN without an interval */
	uint64_t busy, idle, bp;		 /* ns over the interval (or totals) */
	double busy_share, bp_share, idle_share; /* NaN when no time was accounted */
	double fill;				 /* the fullest output ring; NaN: none */
	uint64_t fill_bytes, fill_cap;		 /* that ring's tail - head and capacity */
	uint32_t nout;				 /* output ring channels */
	int64_t wm;				 /* watermark (stage: the minimum) */
	uint64_t state_bytes, keys, bad, late;
	uint32_t parked, ended, n; /* tasks parked, ended, in the row */
};

static uint64_t delta(uint64_t a, uint64_t b)
{
	return b > a ? b - a : 0;
}

/*
 * A ring's fill from its tail and head, in bytes, at most @cap: the two ends
 * are published by two workers at different moments (each at most a loop
 * turn stale), so tail - head may for a moment exceed what the ring holds.
 */
static uint64_t fill_of(uint64_t head, uint64_t tail, uint64_t cap)
{
	uint64_t f = delta(head, tail);

	return f > cap ? cap : f;
}

static void row_shares(struct row *r)
{
	uint64_t all = r->busy + r->idle + r->bp;

	r->busy_share = top_share(r->busy, all);
	r->bp_share = top_share(r->bp, all);
	r->idle_share = top_share(r->idle, all);
}

static void task_row(struct row *r, const struct shmrun_metrics *m, const struct sample *a,
		     const struct sample *b, uint32_t i)
{
	const struct task_sample *x = &b->t[i], *p = a ? &a->t[i] : NULL;
	uint64_t dt = a ? (uint64_t)(b->mono_ns - a->mono_ns) : 0;

	memset(r, 0, sizeof(*r));
	r->n = 1;
	r->rin = x->rin;
	r->rout = x->rout;
	r->bin = x->bin;
	r->bout = x->bout;
	r->rin_s = p ? top_rate(p->rin, x->rin, dt) : NAN;
	r->rout_s = p ? top_rate(p->rout, x->rout, dt) : NAN;
	r->bin_s = p ? top_rate(p->bin, x->bin, dt) : NAN;
	r->bout_s = p ? top_rate(p->bout, x->bout, dt) : NAN;
	r->busy = p ? delta(p->busy, x->busy) : x->busy;
	r->idle = p ? delta(p->idle, x->idle) : x->idle;
	r->bp = p ? delta(p->bp, x->bp) : x->bp;
	row_shares(r);
	r->fill = NAN;
	for (uint32_t c = 0; c < m->chans; c++) {
		const struct shmrun_metrics_chan *ch = shmrun_metrics_chan(m, c);
		double f;

		if (ch->src_task != i)
			continue;
		r->nout++;
		f = top_ring_fill(b->tail[c], b->head[c], ch->capacity);
		if (isnan(r->fill) || f > r->fill) {
			r->fill = f;
			r->fill_bytes = fill_of(b->head[c], b->tail[c], ch->capacity);
			r->fill_cap = ch->capacity;
		}
	}
	r->wm = x->wm;
	r->state_bytes = x->state_bytes;
	r->keys = x->keys;
	r->bad = x->bad;
	r->late = x->late;
	r->parked = x->parked;
	r->ended = x->ended;
}

/* Add task row @t into stage row @s (@s zeroed, fill NaN, wm INT64_MAX first). */
static void stage_add(struct row *s, const struct row *t)
{
	s->rin += t->rin;
	s->rout += t->rout;
	s->bin += t->bin;
	s->bout += t->bout;
	s->rin_s = s->n ? s->rin_s + t->rin_s : t->rin_s;
	s->rout_s = s->n ? s->rout_s + t->rout_s : t->rout_s;
	s->bin_s = s->n ? s->bin_s + t->bin_s : t->bin_s;
	s->bout_s = s->n ? s->bout_s + t->bout_s : t->bout_s;
	s->busy += t->busy;
	s->idle += t->idle;
	s->bp += t->bp;
	row_shares(s);
	if (!isnan(t->fill) && (isnan(s->fill) || t->fill > s->fill)) {
		s->fill = t->fill;
		s->fill_bytes = t->fill_bytes;
		s->fill_cap = t->fill_cap;
	}
	s->nout += t->nout;
	if (t->wm < s->wm)
		s->wm = t->wm;
	s->state_bytes += t->state_bytes;
	s->keys += t->keys;
	s->bad += t->bad;
	s->late += t->late;
	s->parked += t->parked;
	s->ended += t->ended;
	s->n++;
}

/* ---- the view: names and rows of every stage and task ---- */

struct view {
	const struct shmrun_metrics *m;
	const struct sample *a, *b; /* a NULL: one sample only */
	char job[SHMRUN_METRICS_NAME_BYTES];
	struct row *stage; /* [m->stages] */
	struct row *task;  /* [m->tasks] */
};

/* A NUL-terminated copy of the fixed field @src of @n bytes (may lack its NUL). */
static void field(char *dst, const char *src, size_t n)
{
	size_t l = strnlen(src, n - 1);

	memcpy(dst, src, l);
	dst[l] = '\0';
}

static int view_make(struct view *v, const struct shmrun_metrics *m, const struct sample *a,
		     const struct sample *b)
{
	v->m = m;
	v->a = a;
	v->b = b;
	field(v->job, m->job, sizeof(m->job));
	v->stage = calloc(m->stages ? m->stages : 1, sizeof(*v->stage));
	v->task = calloc(m->tasks ? m->tasks : 1, sizeof(*v->task));
	if (!v->stage || !v->task) {
		free(v->stage);
		free(v->task);
		return -ENOMEM;
	}
	for (uint32_t s = 0; s < m->stages; s++) {
		v->stage[s].fill = NAN;
		v->stage[s].wm = INT64_MAX;
		v->stage[s].rin_s = v->stage[s].rout_s = NAN;
		v->stage[s].bin_s = v->stage[s].bout_s = NAN;
		row_shares(&v->stage[s]);
	}
	for (uint32_t i = 0; i < m->tasks; i++) {
		task_row(&v->task[i], m, a, b, i);
		stage_add(&v->stage[shmrun_metrics_task(m, i)->stage], &v->task[i]);
	}
	for (uint32_t s = 0; s < m->stages; s++)
		if (!v->stage[s].n)
			v->stage[s].wm = INT64_MIN;
	return 0;
}

static void view_free(struct view *v)
{
	free(v->stage);
	free(v->task);
}

static double interval_s(const struct view *v)
{
	return v->a ? (double)(v->b->mono_ns - v->a->mono_ns) / 1e9 : 0;
}

/* ---- text: the screen and the snapshot ---- */

#define BAR 10

static const char *pct(char *buf, size_t len, double share)
{
	if (isnan(share))
		snprintf(buf, len, "-");
	else if (share > 0 && share < 0.005) /* not "0%" next to a bar that is not empty */
		snprintf(buf, len, "<1%%");
	else
		snprintf(buf, len, "%.0f%%", share * 100);
	return buf;
}

/* The watermark's lag behind the sample's wall clock: "-" none yet, "end". */
static const char *wm_lag(char *buf, size_t len, int64_t wm, int64_t now)
{
	if (wm == INT64_MIN)
		snprintf(buf, len, "-");
	else if (wm == INT64_MAX)
		snprintf(buf, len, "end");
	else
		top_fmt_duration(buf, len, wm < now ? now - wm : 0);
	return buf;
}

static const char *row_state(char *buf, size_t len, const struct row *r)
{
	if (r->n && r->ended == r->n)
		snprintf(buf, len, "ended");
	else if (r->parked && r->n > 1)
		snprintf(buf, len, "parked %u", r->parked);
	else if (r->parked)
		snprintf(buf, len, "parked");
	else if (r->ended)
		snprintf(buf, len, "ended %u", r->ended);
	else if (len)
		buf[0] = '\0';
	return buf;
}

/* Print @line without its trailing blanks, then a newline. */
static void put_line(FILE *out, char *line)
{
	size_t n = strlen(line);

	while (n && line[n - 1] == ' ')
		line[--n] = '\0';
	fprintf(out, "%s\n", line);
}

#define ROWFMT "%-22.22s %3s %3s %7s %7s %7s %7s %4s %s %4s %4s %s %4s %7s %9s %s"

static void print_row(FILE *out, const char *name, const char *wk, const char *cpu,
		      const struct row *r, int64_t now)
{
	char b[16][32], line[512];

	snprintf(line, sizeof(line), ROWFMT, name, wk, cpu, top_fmt_count(b[0], 32, r->rin_s),
		 top_fmt_count(b[1], 32, r->rout_s), top_fmt_count(b[2], 32, (double)r->rin),
		 top_fmt_count(b[3], 32, (double)r->rout), pct(b[4], 32, r->busy_share),
		 top_fmt_bar(b[5], 32, r->bp_share, BAR), pct(b[6], 32, r->bp_share),
		 pct(b[7], 32, r->idle_share),
		 r->nout ? top_fmt_bar(b[8], 32, r->fill, BAR) : "             ",
		 r->nout ? pct(b[9], 32, r->fill) : "", wm_lag(b[10], 32, r->wm, now),
		 top_fmt_bytes(b[11], 32, (double)r->state_bytes), row_state(b[12], 32, r));
	put_line(out, line);
}

static void print_text(FILE *out, const struct view *v, bool screen, double every_s)
{
	const struct shmrun_metrics *m = v->m;
	const struct sample *b = v->b;
	char t[8][32], line[512];

	/* the job line */
	fprintf(out, "job %s  pid %d", v->job, (int)m->launcher_pid);
	if (m->hosts > 1)
		fprintf(out, "  host %u of %u (its tasks only)", m->host, m->hosts);
	fprintf(out, "  %s", state_name(b));
	if (b->state == SHMRUN_JOB_DONE || b->state == SHMRUN_JOB_FAILED)
		fprintf(out, " (exit status %d)", (int)b->exit_status);
	fprintf(out, "  up %s  restarts %" PRIu64,
		top_fmt_duration(t[0], 32, b->wall_ns - m->started_wall_ns), b->restarts);
	if (b->restored_epoch)
		fprintf(out, "  restored epoch %" PRIu64, b->restored_epoch);
	else
		fprintf(out, "  restored epoch -");
	if (b->restarts)
		fprintf(out, "  this start %s",
			top_fmt_duration(t[1], 32, b->wall_ns - b->start_wall_ns));
	fputc('\n', out);

	/* the checkpoint line */
	if (!m->checkpoint_interval_ns) {
		fprintf(out, "checkpoints: off (no checkpoint_dir)\n");
	} else {
		fprintf(out, "checkpoints: every %s",
			top_fmt_duration(t[0], 32, (int64_t)m->checkpoint_interval_ns));
		if (b->ck_epoch)
			fprintf(out, "  last epoch %" PRIu64 "  age %s  took %s  size %s",
				b->ck_epoch, top_fmt_duration(t[1], 32, b->wall_ns - b->ck_wall_ns),
				b->ck_duration_ns ? top_fmt_duration(t[2], 32, (int64_t)b->ck_duration_ns)
						  : "-",
				top_fmt_bytes(t[3], 32, (double)b->ck_bytes));
		else
			fprintf(out, "  none completed yet");
		fprintf(out, "  completed %" PRIu64 "  aborted %" PRIu64, b->ck_completed,
			b->ck_aborted);
		if (b->ck_in_flight)
			fprintf(out, "  taking epoch %" PRIu64, b->ck_in_flight);
		fputc('\n', out);
	}
	if (v->a)
		fprintf(out, "rates over %.1fs", interval_s(v));
	else
		fprintf(out, "totals only (one sample)");
	if (screen)
		fprintf(out, " (refresh %.1fs, q quits)", every_s);
	fprintf(out, "; BUSY/BACKPRESSURE/IDLE: shares of each task's time; RING: its fullest "
		     "output ring\n");
	fputc('\n', out);

	/* stages and tasks */
	snprintf(line, sizeof(line), ROWFMT, "STAGE / TASK", "WKR", "CPU", "IN/s", "OUT/s", "IN",
		 "OUT", "BUSY", "BACKPRESSURE", "", "IDLE", "RING FILL   ", "", "WM LAG", "STATE",
		 "");
	put_line(out, line);
	for (uint32_t s = 0; s < m->stages; s++) {
		const struct shmrun_metrics_stage *st = shmrun_metrics_stage(m, s);
		char name[SHMRUN_METRICS_NAME_BYTES], op[SHMRUN_METRICS_OP_BYTES], label[128];

		field(name, st->name, sizeof(st->name));
		field(op, st->op, sizeof(st->op));
		snprintf(label, sizeof(label), "%s (%s)", name, op);
		print_row(out, label, "", "", &v->stage[s], b->wall_ns);
		for (uint32_t k = 0; k < st->width; k++) {
			uint32_t i = st->task0 + k;
			const struct shmrun_metrics_task *tk = shmrun_metrics_task(m, i);
			char wk[16], cpu[16];

			if (!shmrun_metrics_here(m, tk->worker))
				continue; /* another host's task: `shmrun top` there */
			snprintf(label, sizeof(label), "  %s[%u]", name, k);
			snprintf(wk, sizeof(wk), "%u", tk->worker);
			snprintf(cpu, sizeof(cpu), "%d", (int)tk->cpu);
			print_row(out, label, wk, cpu, &v->task[i], b->wall_ns);
		}
	}

	/* workers */
	fprintf(out, "\n%-6s %4s %8s %7s %7s %5s %7s %7s  %s\n", "WORKER", "CPU", "PID", "TURNS",
		"TURNS/s", "SLEEP", "STALL", "MAX", "TASKS");
	for (uint32_t k = 0; k < m->workers; k++) {
		const struct shmrun_metrics_worker *wk = shmrun_metrics_worker(m, k);
		uint64_t dt = v->a ? (uint64_t)(b->mono_ns - v->a->mono_ns) : 0;
		double sleep = v->a ? top_share(delta(v->a->sleep_ns[k], b->sleep_ns[k]), dt) : NAN;
		char pid[16];

		if (!shmrun_metrics_here(m, k))
			continue; /* another host's worker */
		if (b->pid[k])
			snprintf(pid, sizeof(pid), "%d", (int)b->pid[k]);
		else
			snprintf(pid, sizeof(pid), "-");
		fprintf(
		    out, "%-6u %4d %8s %7s %7s %5s %7s %7s ", k, (int)wk->cpu, pid,
		    top_fmt_count(t[0], 32, (double)b->turns[k]),
		    v->a ? top_fmt_count(t[1], 32, top_rate(v->a->turns[k], b->turns[k], dt)) : "-",
		    pct(t[2], 32, sleep), top_fmt_duration(t[3], 32, (int64_t)b->stall_last_ns[k]),
		    top_fmt_duration(t[4], 32, (int64_t)b->stall_max_ns[k]));
		for (uint32_t i = 0; i < m->tasks; i++) {
			const struct shmrun_metrics_task *tk = shmrun_metrics_task(m, i);
			char name[SHMRUN_METRICS_NAME_BYTES];

			if (tk->worker != k)
				continue;
			field(name, shmrun_metrics_stage(m, tk->stage)->name,
			      SHMRUN_METRICS_NAME_BYTES);
			fprintf(out, " %s[%u]", name, tk->instance);
		}
		fputc('\n', out);
	}
}

/* ---- JSON ---- */

static json_t *jreal(double v)
{
	return isnan(v) ? json_null() : json_real(v);
}

static json_t *ju64(uint64_t v)
{
	return json_integer(v > (uint64_t)INT64_MAX ? INT64_MAX : (json_int_t)v);
}

static void jset(json_t *o, const char *k, json_t *v)
{
	json_object_set_new(o, k, v);
}

static void row_json(json_t *o, const struct row *r, int64_t now)
{
	jset(o, "records_in", ju64(r->rin));
	jset(o, "records_out", ju64(r->rout));
	jset(o, "bytes_in", ju64(r->bin));
	jset(o, "bytes_out", ju64(r->bout));
	jset(o, "records_in_per_s", jreal(r->rin_s));
	jset(o, "records_out_per_s", jreal(r->rout_s));
	jset(o, "bytes_in_per_s", jreal(r->bin_s));
	jset(o, "bytes_out_per_s", jreal(r->bout_s));
	jset(o, "busy_ns", ju64(r->busy));
	jset(o, "idle_ns", ju64(r->idle));
	jset(o, "backpressure_ns", ju64(r->bp));
	jset(o, "busy_share", jreal(r->busy_share));
	jset(o, "backpressure_share", jreal(r->bp_share));
	jset(o, "idle_share", jreal(r->idle_share));
	jset(o, "output_rings", json_integer(r->nout));
	jset(o, "ring_fill", jreal(r->nout ? r->fill : NAN));
	jset(o, "ring_fill_bytes", r->nout ? ju64(r->fill_bytes) : json_null());
	jset(o, "ring_capacity_bytes", r->nout ? ju64(r->fill_cap) : json_null());
	if (r->wm == INT64_MIN || r->wm == INT64_MAX) {
		jset(o, "watermark_ns", json_null());
		jset(o, "watermark_lag_s", json_null());
	} else {
		jset(o, "watermark_ns", json_integer(r->wm));
		jset(o, "watermark_lag_s",
		     json_real(r->wm < now ? (double)(now - r->wm) / 1e9 : 0));
	}
	jset(o, "watermark_end", json_boolean(r->wm == INT64_MAX));
	jset(o, "state_bytes", ju64(r->state_bytes));
	jset(o, "keys", ju64(r->keys));
	jset(o, "records_bad", ju64(r->bad));
	jset(o, "records_late", ju64(r->late));
	jset(o, "parked", json_integer(r->parked));
	jset(o, "ended", json_integer(r->ended));
}

static json_t *view_json(const struct view *v)
{
	const struct shmrun_metrics *m = v->m;
	const struct sample *b = v->b;
	json_t *root = json_object(), *ck = json_object(), *stages = json_array(),
	       *workers = json_array();
	char path[SHMRUN_METRICS_PATH_BYTES];
	uint64_t dt = v->a ? (uint64_t)(b->mono_ns - v->a->mono_ns) : 0;

	field(path, m->conf_path, sizeof(m->conf_path));
	jset(root, "format", json_integer(1));
	jset(root, "job", json_string(v->job));
	jset(root, "conf", json_string(path));
	jset(root, "pid", json_integer(m->launcher_pid));
	/* the host this block is of: its tasks and workers are those listed */
	jset(root, "host", json_integer(m->hosts > 1 ? m->host : 0));
	jset(root, "hosts", json_integer(m->hosts > 1 ? m->hosts : 1));
	jset(root, "state", json_string(state_name(b)));
	jset(root, "exit_status",
	     b->state == SHMRUN_JOB_DONE || b->state == SHMRUN_JOB_FAILED
		 ? json_integer(b->exit_status)
		 : json_null());
	jset(root, "sampled_unix_ns", json_integer(b->wall_ns));
	jset(root, "interval_s", json_real(interval_s(v)));
	jset(root, "started_unix_ns", json_integer(m->started_wall_ns));
	jset(root, "uptime_s", json_real((double)(b->wall_ns - m->started_wall_ns) / 1e9));
	jset(root, "start_unix_ns", json_integer(b->start_wall_ns));
	jset(root, "restarts", ju64(b->restarts));
	jset(root, "restored_epoch", b->restored_epoch ? ju64(b->restored_epoch) : json_null());

	jset(ck, "enabled", json_boolean(m->checkpoint_interval_ns != 0));
	jset(ck, "interval_s", json_real((double)m->checkpoint_interval_ns / 1e9));
	jset(ck, "last_epoch", b->ck_epoch ? ju64(b->ck_epoch) : json_null());
	jset(ck, "age_s",
	     b->ck_epoch ? json_real((double)(b->wall_ns - b->ck_wall_ns) / 1e9) : json_null());
	jset(ck, "duration_s",
	     b->ck_epoch ? json_real((double)b->ck_duration_ns / 1e9) : json_null());
	jset(ck, "bytes", b->ck_epoch ? ju64(b->ck_bytes) : json_null());
	jset(ck, "completed", ju64(b->ck_completed));
	jset(ck, "aborted", ju64(b->ck_aborted));
	jset(ck, "in_flight_epoch", b->ck_in_flight ? ju64(b->ck_in_flight) : json_null());
	jset(root, "checkpoints", ck);

	for (uint32_t s = 0; s < m->stages; s++) {
		const struct shmrun_metrics_stage *st = shmrun_metrics_stage(m, s);
		char name[SHMRUN_METRICS_NAME_BYTES], op[SHMRUN_METRICS_OP_BYTES];
		json_t *so = json_object(), *tasks = json_array();

		field(name, st->name, sizeof(st->name));
		field(op, st->op, sizeof(st->op));
		jset(so, "name", json_string(name));
		jset(so, "operator", json_string(op));
		jset(so, "width", json_integer(st->width));
		row_json(so, &v->stage[s], b->wall_ns);
		for (uint32_t k = 0; k < st->width; k++) {
			uint32_t i = st->task0 + k;
			const struct shmrun_metrics_task *tk = shmrun_metrics_task(m, i);
			json_t *to, *outs;

			if (!shmrun_metrics_here(m, tk->worker))
				continue; /* another host's task: `shmrun top` there */
			to = json_object();
			outs = json_array();
			jset(to, "task", json_integer(i));
			jset(to, "instance", json_integer(tk->instance));
			jset(to, "worker", json_integer(tk->worker));
			jset(to, "cpu", json_integer(tk->cpu));
			jset(to, "pid",
			     b->pid[tk->worker] ? json_integer(b->pid[tk->worker]) : json_null());
			jset(to, "vnode_lo", json_integer(tk->vnode_lo));
			jset(to, "vnode_hi", json_integer(tk->vnode_hi));
			row_json(to, &v->task[i], b->wall_ns);
			for (uint32_t c = 0; c < m->chans; c++) {
				const struct shmrun_metrics_chan *ch = shmrun_metrics_chan(m, c);
				json_t *co;

				if (ch->src_task != i)
					continue;
				co = json_object();
				jset(co, "channel", json_integer(c));
				jset(co, "to_task", json_integer(ch->dst_task));
				jset(co, "capacity_bytes", ju64(ch->capacity));
				jset(co, "fill_bytes",
				     ju64(fill_of(b->head[c], b->tail[c], ch->capacity)));
				jset(co, "fill",
				     jreal(top_ring_fill(b->tail[c], b->head[c], ch->capacity)));
				json_array_append_new(outs, co);
			}
			jset(to, "outputs", outs);
			json_array_append_new(tasks, to);
		}
		jset(so, "tasks", tasks);
		json_array_append_new(stages, so);
	}
	jset(root, "stages", stages);

	for (uint32_t k = 0; k < m->workers; k++) {
		const struct shmrun_metrics_worker *wk = shmrun_metrics_worker(m, k);
		json_t *wo, *tasks;

		if (!shmrun_metrics_here(m, k))
			continue; /* another host's worker */
		wo = json_object();
		tasks = json_array();
		jset(wo, "worker", json_integer(k));
		jset(wo, "cpu", json_integer(wk->cpu));
		jset(wo, "pid", b->pid[k] ? json_integer(b->pid[k]) : json_null());
		jset(wo, "turns", ju64(b->turns[k]));
		jset(wo, "turns_per_s",
		     jreal(v->a ? top_rate(v->a->turns[k], b->turns[k], dt) : NAN));
		jset(wo, "sleep_ns", ju64(b->sleep_ns[k]));
		jset(wo, "checkpoint_stall_last_ns", ju64(b->stall_last_ns[k]));
		jset(wo, "checkpoint_stall_max_ns", ju64(b->stall_max_ns[k]));
		jset(wo, "sleep_share",
		     jreal(v->a ? top_share(delta(v->a->sleep_ns[k], b->sleep_ns[k]), dt) : NAN));
		for (uint32_t i = 0; i < m->tasks; i++)
			if (shmrun_metrics_task(m, i)->worker == k)
				json_array_append_new(tasks, json_integer(i));
		jset(wo, "tasks", tasks);
		json_array_append_new(workers, wo);
	}
	jset(root, "workers", workers);
	return root;
}

/* ---- the terminal ---- */

static struct termios saved_tio;
static volatile sig_atomic_t tty_raw, got_stop, got_winch, got_tstp;
static const char enter_seq[] = "\033[?1049h\033[?25l\033[H\033[2J";
static const char leave_seq[] = "\033[?25h\033[?1049l";

/* Async-signal-safe: write() and tcsetattr() only. */
static void term_restore(void)
{
	if (!tty_raw)
		return;
	tty_raw = 0;
	if (write(STDOUT_FILENO, leave_seq, sizeof(leave_seq) - 1) < 0) {
		/* nothing more to do for a terminal that is gone */
	}
	tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_tio);
}

static int term_enter(void)
{
	struct termios raw = saved_tio;

	/* keys one at a time, unechoed; ISIG stays: ^C is SIGINT, ^Z SIGTSTP */
	raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
	raw.c_cc[VMIN] = 1;
	raw.c_cc[VTIME] = 0;
	if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw))
		return -errno;
	tty_raw = 1;
	if (write(STDOUT_FILENO, enter_seq, sizeof(enter_seq) - 1) < 0) {
		int e = errno;

		term_restore();
		return -e;
	}
	return 0;
}

static void on_stop(int sig)
{
	got_stop = sig;
}

static void on_winch(int sig)
{
	(void)sig;
	got_winch = 1;
}

static void on_tstp(int sig)
{
	(void)sig;
	got_tstp = 1;
}

/* A crash while the terminal is raw: restore it, then die of the signal. */
static void on_fatal(int sig)
{
	term_restore();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void handlers(void)
{
	static const int stops[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
	static const int fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_stop; /* no SA_RESTART: poll() returns EINTR */
	for (size_t i = 0; i < sizeof(stops) / sizeof(stops[0]); i++)
		sigaction(stops[i], &sa, NULL);
	sa.sa_handler = on_winch;
	sigaction(SIGWINCH, &sa, NULL);
	sa.sa_handler = on_tstp;
	sigaction(SIGTSTP, &sa, NULL);
	sa.sa_handler = on_fatal;
	sa.sa_flags = SA_RESETHAND;
	for (size_t i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++)
		sigaction(fatal[i], &sa, NULL);
}

/* Draw @text on the screen: home, each line cut to @cols and cleared to its
 * end, at most @rows lines, the rest of the screen cleared. */
static void draw(const char *text, int rows, int cols)
{
	FILE *out = stdout;
	int row = 0;

	fputs("\033[H", out);
	while (*text && row < rows) {
		const char *nl = strchr(text, '\n');
		int n = nl ? (int)(nl - text) : (int)strlen(text);

		if (row)
			fputs("\r\n", out);
		fprintf(out, "%.*s\033[K", n < cols ? n : cols, text);
		row++;
		text += n + (nl ? 1 : 0);
	}
	fputs("\033[J", out);
	fflush(out);
}

static void term_size(int *rows, int *cols)
{
	struct winsize ws;

	*rows = 24;
	*cols = 80;
	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col) {
		*rows = ws.ws_row;
		*cols = ws.ws_col;
	}
}

/* Render the view of (@a, @b) as text into a malloc'd string. */
static char *render(const struct shmrun_metrics *m, const struct sample *a, const struct sample *b,
		    bool screen, double every_s)
{
	struct view v;
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	if (view_make(&v, m, a, b))
		return NULL;
	f = open_memstream(&text, &len);
	if (f) {
		print_text(f, &v, screen, every_s);
		if (fclose(f)) {
			free(text);
			text = NULL;
		}
	}
	view_free(&v);
	return text;
}

static void ended_message(const struct shmrun_metrics *m, const struct sample *b)
{
	char job[SHMRUN_METRICS_NAME_BYTES];

	field(job, m->job, sizeof(m->job));
	if (b->launcher_gone)
		printf("shmrun top: job %s: its launcher (pid %d) is gone; these are its last "
		       "numbers\n",
		       job, (int)m->launcher_pid);
	else
		printf(
		    "shmrun top: job %s ended: %s, exit status %d; these are its final numbers\n",
		    job, state_name(b), (int)b->exit_status);
}

static int watch(const struct shmrun_metrics *m, double every_s)
{
	struct sample s[2] = {0};
	int cur = 0, rows, cols, rc = 0, err;
	bool have_prev = false;
	int64_t every_ns = (int64_t)(every_s * 1e9), next;
	char *text = NULL;

	if (sample_alloc(&s[0], m) || sample_alloc(&s[1], m)) {
		fprintf(stderr, "shmrun top: out of memory\n");
		rc = 1;
		goto out_free;
	}
	if (tcgetattr(STDIN_FILENO, &saved_tio)) {
		fprintf(stderr, "shmrun top: the terminal: %s\n", strerror(errno));
		rc = 1;
		goto out_free;
	}
	handlers();
	err = term_enter();
	if (err) {
		fprintf(stderr, "shmrun top: cannot set up the terminal: %s\n", strerror(-err));
		rc = 1;
		goto out_free;
	}
	sample_take(&s[cur], m);
	next = s[cur].mono_ns + every_ns;
	for (bool redraw = true;;) {
		struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN};
		int64_t now, wait_ms;

		if (redraw) {
			free(text);
			text = render(m, have_prev ? &s[cur ^ 1] : NULL, &s[cur], true, every_s);
			term_size(&rows, &cols);
			if (text)
				draw(text, rows, cols);
			redraw = false;
		}
		if (sample_ended(&s[cur])) {
			/* the final numbers on the normal screen, without the keys line */
			term_restore();
			free(text);
			text = render(m, have_prev ? &s[cur ^ 1] : NULL, &s[cur], false, 0);
			if (text)
				fputs(text, stdout);
			ended_message(m, &s[cur]);
			break;
		}
		now = shmrun_now_ns();
		wait_ms = next > now ? (next - now + 999999) / 1000000 : 0;
		if (poll(&pfd, 1, (int)wait_ms) > 0 && (pfd.revents & (POLLIN | POLLHUP))) {
			char key[64];
			ssize_t n = read(STDIN_FILENO, key, sizeof(key));

			if (n <= 0) /* the terminal is gone */
				break;
			if (memchr(key, 'q', (size_t)n) || memchr(key, 'Q', (size_t)n) ||
			    memchr(key, 3, (size_t)n))
				break;
		}
		if (got_stop)
			break;
		if (got_tstp) { /* ^Z: the terminal back as it was, stop, resume raw */
			got_tstp = 0;
			term_restore();
			fflush(stdout);
			kill(getpid(), SIGSTOP);
			if (term_enter())
				break;
			redraw = true;
		}
		if (got_winch) {
			got_winch = 0;
			redraw = true;
		}
		if (shmrun_now_ns() >= next) {
			cur ^= 1;
			sample_take(&s[cur], m);
			have_prev = true;
			next += every_ns;
			if (next <= s[cur].mono_ns) /* fell behind (stopped): start again */
				next = s[cur].mono_ns + every_ns;
			redraw = true;
		}
	}
	term_restore();
out_free:
	free(text);
	sample_free(&s[0]);
	sample_free(&s[1]);
	return rc;
}

/* One snapshot: text or JSON, rates over @every_s (0: totals only). */
static int snapshot(const struct shmrun_metrics *m, double every_s, bool json)
{
	struct sample a = {0}, b = {0};
	int rc = 1;

	if (sample_alloc(&a, m) || sample_alloc(&b, m)) {
		fprintf(stderr, "shmrun top: out of memory\n");
		goto out;
	}
	sample_take(&a, m);
	if (every_s > 0) {
		/* the interval, cut short when the job ends: rates are over the
		 * time actually measured, and a script is not kept waiting */
		int64_t end = a.mono_ns + (int64_t)(every_s * 1e9);

		for (;;) {
			int64_t left = end - shmrun_now_ns();
			struct timespec ts = {0, left > 100000000 ? 100000000 : left};

			if (left <= 0)
				break;
			nanosleep(&ts, NULL);
			if (job_over(m))
				break;
		}
		sample_take(&b, m);
	}
	if (json) {
		struct view v;
		json_t *root;

		if (view_make(&v, m, every_s > 0 ? &a : NULL, every_s > 0 ? &b : &a)) {
			fprintf(stderr, "shmrun top: out of memory\n");
			goto out;
		}
		root = view_json(&v);
		view_free(&v);
		rc = json_dumpf(root, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(9)) ? 1 : 0;
		json_decref(root);
		fputc('\n', stdout);
	} else {
		char *text = render(m, every_s > 0 ? &a : NULL, every_s > 0 ? &b : &a, false, 0);

		if (!text) {
			fprintf(stderr, "shmrun top: out of memory\n");
			goto out;
		}
		fputs(text, stdout);
		free(text);
		rc = 0;
	}
	if (fflush(stdout) || ferror(stdout)) {
		fprintf(stderr, "shmrun top: writing standard output: %s\n", strerror(errno));
		rc = 1;
	}
out:
	sample_free(&a);
	sample_free(&b);
	return rc;
}

/* ---- the command ---- */

static void top_usage(FILE *out)
{
	fprintf(out, "usage: shmrun top [--json] [--interval SECONDS] [JOB]\n"
		     "\n"
		     "Shows a running job's stages and tasks (records in/out per second, busy,\n"
		     "backpressure and idle shares, the fullest output ring, watermark lag, state\n"
		     "size), its workers and CPUs, checkpoints and restarts. JOB may be left out\n"
		     "when one job runs. On a terminal it refreshes every SECONDS (default 1)\n"
		     "until q or ^C; otherwise it prints one snapshot, rates measured over\n"
		     "SECONDS (0: totals only), and exits.\n"
		     "\n"
		     "  --json              one snapshot as JSON (docs/observability.md)\n"
		     "  --interval SECONDS  refresh period and rate interval, 0 to 3600\n"
		     "  -h, --help          this text\n");
}

static int top_usage_error(const char *fmt, const char *arg)
{
	fputs("shmrun top: ", stderr);
	fprintf(stderr, fmt, arg);
	fputs("\nTry 'shmrun top --help' for more information.\n", stderr);
	return 2;
}

/* The block of job @job (NULL: the only running one) or of the file @path. */
static const struct shmrun_metrics *attach(const char *job, const char *path)
{
	const struct shmrun_metrics *m;
	char why[512] = "", **names = NULL, only[256];
	int fd, n;

	if (path) {
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			fprintf(stderr, "shmrun top: %s: %s\n", path, strerror(errno));
			return NULL;
		}
		job = path;
	} else {
		if (!job) {
			n = jobsock_list(&names);
			if (n < 0) {
				fprintf(stderr, "shmrun top: cannot list the running jobs: %s\n",
					strerror(-n));
				return NULL;
			}
			if (n == 0)
				fprintf(stderr, "shmrun top: no running job\n");
			if (n > 1) {
				fprintf(stderr, "shmrun top: %d jobs are running:", n);
				for (int i = 0; i < n; i++)
					fprintf(stderr, "%s %s", i ? "," : "", names[i]);
				fprintf(stderr, "; name one: shmrun top JOB\n");
			}
			if (n == 1)
				snprintf(only, sizeof(only), "%s", names[0]);
			jobsock_list_free(names, n);
			if (n != 1)
				return NULL;
			job = only;
		} else if (jobsock_pid(job) <= 0) {
			/* a multi-host job: its hosts here are NAME.h0, NAME.h1, ... */
			n = jobsock_list_hosts(job, &names);
			if (n > 1) {
				fprintf(stderr, "shmrun top: job %s runs as %d hosts here:", job,
					n);
				for (int i = 0; i < n; i++)
					fprintf(stderr, "%s %s", i ? "," : "", names[i]);
				fprintf(stderr, "; name one: shmrun top %s\n", names[0]);
			}
			if (n == 1)
				snprintf(only, sizeof(only), "%s", names[0]);
			if (n > 0)
				jobsock_list_free(names, n);
			if (n > 1)
				return NULL;
			if (n == 1)
				job = only;
		}
		fd = jobsock_metrics_fd(job, why, sizeof(why));
		if (fd < 0) {
			fprintf(stderr, "shmrun top: %s\n", why[0] ? why : strerror(-fd));
			return NULL;
		}
	}
	m = shmrun_metrics_map(fd, why, sizeof(why));
	if (!m)
		fprintf(stderr, "shmrun top: %s: %s\n", job, why[0] ? why : strerror(errno));
	close(fd);
	return m;
}

int shmrun_top_main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"interval", required_argument, NULL, 'i'},
	    {"metrics-path", required_argument, NULL, 'P'}, /* hidden: tests */
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	const char *path = NULL;
	const struct shmrun_metrics *m;
	double every_s = 1;
	bool json = false, screen;
	int c, rc;

	argv[0] = (char *)"shmrun top";
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'i': {
			char *end;

			errno = 0;
			every_s = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(every_s >= 0 && every_s <= 3600))
				return top_usage_error("--interval must be seconds from 0 to 3600, "
						       "not '%s'",
						       optarg);
			break;
		}
		case 'P':
			path = optarg;
			break;
		case 'h':
			top_usage(stdout);
			return 0;
		default: /* getopt_long said what */
			fputs("Try 'shmrun top --help' for more information.\n", stderr);
			return 2;
		}
	}
	if (argc - optind > 1)
		return top_usage_error("takes at most one JOB, got %s", "several");
	screen = !json && isatty(STDOUT_FILENO) && isatty(STDIN_FILENO);
	if (screen && every_s < 0.1) {
		char given[32];

		snprintf(given, sizeof(given), "%g", every_s);
		return top_usage_error("--interval on a terminal must be at least 0.1, not %s",
				       given);
	}
	m = attach(optind < argc ? argv[optind] : NULL, path);
	if (!m)
		return 1;
	rc = screen ? watch(m, every_s) : snapshot(m, every_s, json);
	shmrun_metrics_unmap(m);
	return rc;
}
