/*
 * runtime/ops/latency_sink.c: latency_sink, how long records took to get here.
 *
 * For every record with an event time (sequence with `event_time = now`
 * stamps one), the sink takes CLOCK_REALTIME now - event_time_ns into a
 * histogram; at end of input it writes a small text summary to its `path`
 * (width k: path.<instance>, as file_sink):
 *
 *     # latency_sink <stage>.<instance>: ns from event time to the sink
 *     count N          records measured
 *     warmup N         the first `warmup_records` records (not measured)
 *     unstamped N      records without an event time (not measured)
 *     negative N       records stamped in the future (clock stepped back): taken as 0
 *     p50_ns N  p90_ns N  p99_ns N  p999_ns N  max_ns N   (one per line)
 *     bucket LO HI N   one line per non-empty bucket: N values in [LO, HI] ns
 *
 * `warmup_records` (default 0) leaves each instance's first records out of
 * the histogram: a job's first milliseconds (workers starting one after the
 * other, rings and pages touched for the first time) are not its steady state.
 *
 * The bucket lines let a reader merge the summaries of several instances
 * exactly (shmrun-bench latency does) instead of averaging percentiles.
 *
 * The histogram (after HdrHistogram, Gil Tene): log-linear buckets in fixed
 * memory, one array allocated by open(), nothing per record. Values below
 * 2^SUB_BITS (256 ns) have a bucket each; above, every power of two
 * [2^e, 2^(e+1)) is cut into HALF (128) equal buckets, so a bucket is at most
 * 1/128 (0.8 %) of its values wide, over the whole uint64_t range:
 *
 *     index = v                                        v < 256
 *           = 256 + (e - 8) * 128 + (v >> (e - 7)) - 128   e = floor(log2 v) >= 8
 *
 * 7424 counters, 58 KiB per instance. A percentile is reported as the highest
 * value of its bucket (capped at the largest value seen), as HdrHistogram's
 * highestEquivalentValue: never below the true value, at most 0.8 % above.
 * Nearest rank: the q-percentile is the smallest value with at least
 * ceil(q * count) values at or below it.
 *
 * Time: one clock_gettime(CLOCK_REALTIME) per process() call, one per
 * process_batch() call (the records of a batch arrive together). CLOCK_REALTIME
 * because event times are wall-clock times (ns since the epoch); a step of the
 * clock between stamp and arrival shows as a wrong latency (a negative one is
 * counted in `negative` and taken as 0).
 *
 * Not exactly-once, and it does not pretend to be: the histogram lives in
 * memory only (no per-worker state, pw_rule none: the stage cannot be
 * rescaled). A restart after a crash or a resume after a stop begins an empty
 * histogram, which then counts the records replayed after the restored
 * checkpoint (some of which the earlier run had counted too) and misses those
 * before it; the summary describes the last run only. It is written once, at
 * end of input; a run stopped before that leaves the file empty (open()
 * truncates it, so a stale summary is never taken for a new one).
 *
 * Rejected: a sorted array of every latency (exact, but memory grows with the
 * input and sorting costs at the end); a summary of percentiles only (cannot
 * be merged across instances); CLOCK_MONOTONIC (a record's event time is a
 * wall-clock time by the record model, operator.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ops.h"

#define SUB_BITS 8u
#define SUB	 (1u << SUB_BITS)		 /* exact buckets: values 0..255 */
#define HALF	 (SUB / 2)			 /* buckets per power of two above */
#define NBUCKETS (SUB + (64u - SUB_BITS) * HALF) /* 7424 */

struct latency {
	int fd; /* the output, truncated by open(), written at end of input */
	char path[PATH_MAX];
	uint64_t warmup; /* records still to leave out */
	uint64_t count, skipped, unstamped, negative, max;
	uint64_t buckets[NBUCKETS];
};

static inline uint32_t bucket_of(uint64_t v)
{
	unsigned e, shift;

	if (v < SUB)
		return (uint32_t)v;
	e = 63u - (unsigned)__builtin_clzll(v); /* >= SUB_BITS */
	shift = e - (SUB_BITS - 1);		/* v >> shift is in [HALF, SUB) */
	return SUB + (e - SUB_BITS) * HALF + (uint32_t)((v >> shift) - HALF);
}

/* The values of bucket @b: [*lo, *hi]. */
static void bucket_range(uint32_t b, uint64_t *lo, uint64_t *hi)
{
	uint32_t k, e, shift;

	if (b < SUB) {
		*lo = *hi = b;
		return;
	}
	k = b - SUB;
	e = SUB_BITS + k / HALF;
	shift = e - (SUB_BITS - 1);
	*lo = (uint64_t)(HALF + k % HALF) << shift;
	*hi = *lo + ((1ull << shift) - 1);
}

static int64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void take(struct latency *l, const struct shmrun_record *rec, int64_t now)
{
	uint64_t d;

	if (l->warmup) {
		l->warmup--;
		l->skipped++;
		return;
	}
	if (rec->event_time_ns == 0) {
		l->unstamped++;
		return;
	}
	if (now < rec->event_time_ns) {
		l->negative++;
		d = 0;
	} else {
		d = (uint64_t)(now - rec->event_time_ns);
	}
	l->buckets[bucket_of(d)]++;
	l->count++;
	if (d > l->max)
		l->max = d;
}

/* The @q-quantile (0 < q <= 1), nearest rank, as its bucket's highest value. */
static uint64_t percentile(const struct latency *l, double q)
{
	uint64_t rank, seen = 0, lo, hi;

	if (!l->count)
		return 0;
	rank = (uint64_t)((double)l->count * q);
	if ((double)rank < (double)l->count * q)
		rank++;
	if (rank == 0)
		rank = 1;
	for (uint32_t b = 0; b < NBUCKETS; b++) {
		seen += l->buckets[b];
		if (seen >= rank) {
			bucket_range(b, &lo, &hi);
			return hi < l->max ? hi : l->max;
		}
	}
	return l->max;
}

static int lat_open(struct shmrun_task *task, void **state)
{
	const char *path = shmrun_task_param(task, "path");
	struct latency *l = calloc(1, sizeof(*l));
	int n, err;

	if (!l)
		return -ENOMEM;
	*state = l;
	l->fd = -1;
	l->warmup = shmrun_task_param_u64(task, "warmup_records", 0);
	if (shmrun_task_width(task) > 1)
		n = snprintf(l->path, sizeof(l->path), "%s.%u", path, shmrun_task_instance(task));
	else
		n = snprintf(l->path, sizeof(l->path), "%s", path);
	if (n < 0 || (size_t)n >= sizeof(l->path)) {
		shmrun_task_error(task,
				  "output path too long (paths must be shorter than %d "
				  "bytes; use a shorter path): %s",
				  PATH_MAX, path);
		return -ENAMETOOLONG;
	}
	err = shmrun_mkdir_p(l->path, 0777, SHMRUN_MKDIR_PARENT);
	if (err) {
		shmrun_task_error(task,
				  "cannot create the directory of %s: %s; make it writable "
				  "or set path to a writable place",
				  l->path, strerror(-err));
		return err;
	}
	l->fd = open(l->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK, 0666);
	if (l->fd < 0) {
		err = -errno;
		shmrun_task_error(task,
				  "cannot open %s for writing: %s; make its directory "
				  "writable or set path to a writable place",
				  l->path, strerror(-err));
		return err;
	}
	return 0;
}

static int lat_process(struct shmrun_task *task, void *state, const struct shmrun_record *rec)
{
	take(state, rec, realtime_ns());
	shmrun_task_count(task, SHMRUN_COUNT_RECORDS_OUT, 1);
	return 0;
}

static int lat_process_batch(struct shmrun_task *task, void *state,
			     const struct shmrun_record *recs, uint32_t n)
{
	int64_t now = realtime_ns();

	for (uint32_t i = 0; i < n; i++)
		take(state, &recs[i], now);
	shmrun_task_count(task, SHMRUN_COUNT_RECORDS_OUT, n);
	return 0;
}

/* Append printf output to @buf (@len bytes, *@used of them used); false if full. */
static bool append(char *buf, size_t len, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static bool append(char *buf, size_t len, size_t *used, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf + *used, len - *used, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= len - *used)
		return false;
	*used += (size_t)n;
	return true;
}

static int lat_end(struct shmrun_task *task, void *state)
{
	struct latency *l = state;
	/* every line is < 80 bytes: the header, 8 figures, one line per bucket */
	size_t len = (size_t)(NBUCKETS + 16) * 80 + PATH_MAX, used = 0;
	char *buf = malloc(len);
	const char *p;
	bool ok;
	int err = 0;

	if (!buf)
		return -ENOMEM;
	ok = append(buf, len, &used,
		    "# latency_sink %s.%u: ns from event time to the sink\n"
		    "count %" PRIu64 "\nwarmup %" PRIu64 "\nunstamped %" PRIu64
		    "\nnegative %" PRIu64 "\n"
		    "p50_ns %" PRIu64 "\np90_ns %" PRIu64 "\np99_ns %" PRIu64 "\np999_ns %" PRIu64
		    "\nmax_ns %" PRIu64 "\n",
		    shmrun_task_stage(task), shmrun_task_instance(task), l->count, l->skipped,
		    l->unstamped, l->negative, percentile(l, 0.50), percentile(l, 0.90),
		    percentile(l, 0.99), percentile(l, 0.999), l->max);
	for (uint32_t b = 0; ok && b < NBUCKETS; b++) {
		uint64_t lo, hi;

		if (!l->buckets[b])
			continue;
		bucket_range(b, &lo, &hi);
		ok = append(buf, len, &used, "bucket %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", lo, hi,
			    l->buckets[b]);
	}
	for (p = buf; ok && p < buf + used;) {
		ssize_t w = write(l->fd, p, (size_t)(buf + used - p));

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			err = w < 0 ? -errno : -EIO;
			shmrun_task_error(task,
					  "writing %s: %s; free space on its file system or "
					  "set path to another one, then run the job again",
					  l->path, strerror(-err));
			break;
		}
		p += w;
	}
	free(buf);
	return err;
}

static void lat_close(struct shmrun_task *task, void *state)
{
	struct latency *l = state;

	(void)task;
	if (l && l->fd >= 0)
		close(l->fd);
	free(l);
}

static const struct shmrun_param_def params[] = {
    {.key = "path",
     .type = SHMRUN_PARAM_PATH,
     .required = true,
     .doc = "summary file; width k writes path.<instance>",
     .io = SHMRUN_PARAM_OUTPUT},
    {.key = "warmup_records",
     .type = SHMRUN_PARAM_COUNT,
     .def = "0",
     .min = 0,
     .max = 1000000000000000000ull,
     .doc = "each instance leaves its first this many records out of the histogram"},
    {0},
};

const struct shmrun_operator shmrun_op_latency_sink = {
    .size = sizeof(struct shmrun_operator),
    .name = "latency_sink",
    .summary = "histogram of now - event time per record; p50..p99.9 and max in ns to a file",
    .flags = SHMRUN_OP_SINK,
    .params = params,
    .open = lat_open,
    .process = lat_process,
    .process_batch = lat_process_batch,
    .end_of_input = lat_end,
    .close = lat_close,
    .pw_rule = SHMRUN_PW_NONE,
};
