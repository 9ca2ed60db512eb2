/*
 * tools/bench/bench_latency.c: the `latency` subcommand.
 *
 * What it measures. How long a record takes from its source to its sink
 * through a shuffle, at 10 %, 50 % and 90 % of the job's peak rate, with
 * `idle = spin` and `idle = hybrid`:
 *
 *     gen (sequence, width 2, event_time = now, rate = R) -> by key
 *         -> lat (latency_sink, width 2)                      workers = 2
 *
 * sequence stamps each record with CLOCK_REALTIME when it produces it;
 * latency_sink takes now - stamp into a log-linear histogram per instance and
 * writes it at end of input (runtime/ops/latency_sink.c). This benchmark
 * merges the two instances' bucket lines (exact: same buckets) and reads the
 * p50, p99 and p99.9 off the merged histogram; every run must have measured
 * every record, none unstamped, except each sink instance's first records
 * of the first 0.1 s at the run's rate (at most a quarter of the run:
 * latency_sink's warmup_records), which are start-up, not steady state.
 *
 * Peak: the same topology unpaced (idle = spin), records per second as the
 * shuffle subcommand takes them: marginal, (N - 2) / (t(N) - t(2)), the best
 * of --reps runs. The paced runs then move --seconds' worth of records each at
 * rate = 10/50/90 % of it (the rate is the whole stage's, shared by the two gen
 * instances; the worker paces the source, runtime/pace.c). Each percentile is
 * the best (lowest) of --reps runs, as pingpong reports them.
 *
 * The reference, in the same run: the pingpong subcommand's round trip of a
 * 32-byte frame through two shmrun rings (idle spin and idle hybrid) and
 * through one bare cache line, between processes on the same two CPUs
 * (bench_ring.c). A record's one-way trip through the job cannot beat half a
 * ring round trip; what it adds on top is the runtime's (pacing bursts,
 * framing, the worker loop, the batch of the source waiting for the whole
 * batch to be formatted).
 *
 * Rejected: timestamps with the TSC (event times are wall-clock ns by the
 * record model, and the sink runs in another process); averaging the
 * instances' percentiles (wrong when their loads differ).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"

#define LAT_RUN_TIMEOUT_S 120.0
#define LAT_KEYS	  1024u
#define LAT_MAX_BUCKETS	  8192u /* latency_sink has 7424 */
#define LAT_WARMUP_S	  0.1	/* each paced run's first 0.1 s is not measured */

static const char lat_usage_text[] =
    "Usage: shmrun-bench latency [--seconds S] [--reps N] [--keep DIR] [--quick] [-v]\n"
    "\n"
    "Source-to-sink latency of sequence (event_time = now) -> by key -> latency_sink\n"
    "on 2 workers, at 10, 50 and 90 % of the job's peak rate (measured first,\n"
    "unpaced), with idle = spin and idle = hybrid, beside the pingpong round trip\n"
    "of shmrun rings (spin, hybrid) and of a bare cache line in the same run.\n"
    "\n"
    "  --seconds S  length of each paced run (default 1); its first 0.1 s is warm-up\n"
    "  --reps N     repetitions; each percentile is the best (default 2)\n"
    "  --keep DIR   write topologies, summaries and logs into DIR and keep them\n"
    "  --quick      tiny runs, one repetition: a smoke test (ctest)\n"
    "  -v           print every run as a '#' line\n"
    "\n"
    "Output:\n"
    "  pingpong idle=spin|hybrid rtt_ns_p50=N rtt_ns_p99=N rtt_ns_p999=N\n"
    "  ideal rtt_ns_p50=N rtt_ns_p99=N rtt_ns_p999=N\n"
    "  peak workers=2 mrec_s=F\n"
    "  latency idle=spin|hybrid load_pct=P rate=R p50_ns=N p99_ns=N p999_ns=N max_ns=N\n"
    "Exit status: 0 ok, 1 a run failed or a sink measured the wrong records, 2 usage\n"
    "error.\n";

/* A merged histogram: the highest value of each non-empty bucket, its count. */
struct lat_hist {
	uint64_t hi[LAT_MAX_BUCKETS], n[LAT_MAX_BUCKETS];
	uint32_t nb;
	uint64_t count, warmup, unstamped, max;
};

struct lat_result {
	uint64_t p50, p99, p999, max;
};

static int lat_write_conf(const char *dir, const char *name, uint64_t n, uint64_t rate,
			  uint64_t warmup, const char *idle)
{
	char path[PATH_MAX], text[1024], rate_line[64] = "";

	if (rate)
		snprintf(rate_line, sizeof(rate_line), "rate = %" PRIu64 "\n", rate);
	snprintf(text, sizeof(text),
		 "; written by shmrun-bench latency\n"
		 "[job]\nname = bench-latency-%s\nworkers = 2\nidle = %s\n\n"
		 "[gen]\nop = sequence\ncount = %" PRIu64 "\nkeys = %u\npiece_records = %" PRIu64
		 "\nevent_time = now\n%swidth = 2\n\n"
		 "[lat]\nop = latency_sink\ninput = gen by key\npath = lat-%s.txt\n"
		 "warmup_records = %" PRIu64 "\nwidth = 2\n",
		 name, idle, n, LAT_KEYS, (n + 1) / 2, rate_line, name, warmup);
	if (bench_pathf(path, sizeof(path), "%s/%s.conf", dir, name))
		return -1;
	return bench_write_text(path, text);
}

/* Add the bucket lines of summary @path into @h. Return: 0 or -1 (printed). */
static int lat_merge(struct lat_hist *h, const char *path)
{
	char *text = NULL, *p;
	size_t len;
	int rc = 0;

	if (bench_read_text(path, &text, &len))
		return -1;
	for (p = text; *p && !rc; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p)) {
		unsigned long long a, b, c;

		if (sscanf(p, "count %llu", &a) == 1) {
			h->count += a;
		} else if (sscanf(p, "warmup %llu", &a) == 1) {
			h->warmup += a;
		} else if (sscanf(p, "unstamped %llu", &a) == 1) {
			h->unstamped += a;
		} else if (sscanf(p, "max_ns %llu", &a) == 1) {
			if (a > h->max)
				h->max = a;
		} else if (sscanf(p, "bucket %llu %llu %llu", &a, &b, &c) == 3) {
			uint32_t i;

			for (i = 0; i < h->nb && h->hi[i] != b; i++)
				;
			if (i == h->nb) {
				if (h->nb == LAT_MAX_BUCKETS) {
					rc = -1;
					break;
				}
				h->hi[h->nb] = b;
				h->n[h->nb++] = 0;
			}
			h->n[i] += c;
		}
	}
	if (rc)
		fprintf(stderr, "shmrun-bench: %s: more than %u buckets\n", path, LAT_MAX_BUCKETS);
	free(text);
	return rc;
}

/* The @q-quantile of @h, nearest rank, as its bucket's highest value (<= max). */
static uint64_t lat_quantile(const struct lat_hist *h, double q)
{
	uint64_t rank = (uint64_t)((double)h->count * q), seen = 0;

	if ((double)rank < (double)h->count * q)
		rank++;
	if (!rank)
		rank = 1;
	for (uint32_t i = 0; i < h->nb; i++) {
		seen += h->n[i];
		if (seen >= rank)
			return h->hi[i] < h->max ? h->hi[i] : h->max;
	}
	return h->max;
}

/* Sort the buckets by value (insertion sort: a few thousand, once per run). */
static void lat_sort(struct lat_hist *h)
{
	for (uint32_t i = 1; i < h->nb; i++) {
		uint64_t hi = h->hi[i], n = h->n[i];
		uint32_t j = i;

		for (; j > 0 && h->hi[j - 1] > hi; j--) {
			h->hi[j] = h->hi[j - 1];
			h->n[j] = h->n[j - 1];
		}
		h->hi[j] = hi;
		h->n[j] = n;
	}
}

/*
 * One run of @n records at @rate (0: unpaced) with @idle, each sink instance
 * leaving its first @warmup records out; its wall-clock time in *@secs and
 * the merged percentiles in *@res. Return: 0 or -1 (printed).
 */
static int lat_run(const char *shmrun, const char *dir, const char *name, uint64_t n, uint64_t rate,
		   uint64_t warmup, const char *idle, double *secs, struct lat_result *res)
{
	static struct lat_hist h;
	char path[PATH_MAX];

	if (lat_write_conf(dir, name, n, rate, warmup, idle) ||
	    bench_run_conf(shmrun, dir, name, LAT_RUN_TIMEOUT_S, secs))
		return -1;
	memset(&h, 0, sizeof(h));
	for (int i = 0; i < 2; i++)
		if (bench_pathf(path, sizeof(path), "%s/lat-%s.txt.%d", dir, name, i) ||
		    lat_merge(&h, path))
			return -1;
	if (h.count + h.warmup != n || h.unstamped || h.warmup > 2 * warmup) {
		fprintf(stderr,
			"shmrun-bench: latency %s: the sinks measured %" PRIu64
			" records, left out %" PRIu64 " (warm-up), %" PRIu64
			" unstamped; the source produced %" PRIu64 "\n",
			name, h.count, h.warmup, h.unstamped, n);
		return -1;
	}
	lat_sort(&h);
	res->p50 = lat_quantile(&h, 0.50);
	res->p99 = lat_quantile(&h, 0.99);
	res->p999 = lat_quantile(&h, 0.999);
	res->max = h.max;
	return 0;
}

static void keep_lowest(uint64_t *best, uint64_t v)
{
	if (!*best || v < *best)
		*best = v;
}

int bench_latency_main(int argc, char **argv)
{
	static const char *const idles[2] = {"spin", "hybrid"};
	static const unsigned pcts[3] = {10, 50, 90};
	struct bench_opts o = {
	    .ring_bytes = 1u << 20,
	    .iters = 200000,
	    .reps = 1,
	    .idle = SHMRUN_IDLE_SPIN,
	    .cpu = {0, 1},
	};
	char built[PATH_MAX], shmrun[PATH_MAX], dir[PATH_MAX];
	const char *keep = NULL;
	uint64_t reps = 0, n, pp[2][3] = {{0}}, ideal[3] = {0}, pct[3];
	struct lat_result best[2][3], res;
	double seconds = 1.0, fixed = 0, peak = 0, peak_worst = 0, secs, t0;
	bool quick = false, verbose = false, made_dir = false;
	struct bench_common co = {0};
	int c, rc = BENCH_EXIT_FAIL;

	memset(best, 0, sizeof(best));
	c = bench_parse_seconds_keys(argc, argv, "latency", lat_usage_text, false, &seconds, &co);
	if (c != BENCH_OPT_DONE)
		return c;
	keep = co.keep;
	quick = co.quick;
	verbose = co.verbose;
	reps = co.reps;
	if (quick) {
		seconds = 0.05;
		o.quick = true;
		o.iters = 20000;
	}
	if (!reps)
		reps = quick ? 1 : 2;

	rc = bench_prepare_run(&o, built, sizeof(built));
	if (rc)
		return rc;
	rc = BENCH_EXIT_FAIL;
	bench_ts_init();
	bench_catch_signals();
	if (bench_open_workdir(keep, "latency", dir, sizeof(dir), &made_dir))
		return BENCH_EXIT_FAIL;
	if (bench_shmrun_copy(built, dir, shmrun, sizeof(shmrun)))
		goto out;
	bench_print_loadavg("at start");
	printf("# shmrun: %s (runs from a copy in %s); pingpong on CPUs %d,%d, %" PRIu64
	       " round trips\n",
	       built, dir, o.cpu[0], o.cpu[1], o.iters);

	/* The reference: ring round trips (spin, hybrid) and the bare cache line. */
	for (uint64_t r = 0; r < reps; r++) {
		for (int i = 0; i < 2; i++) {
			o.idle = i ? SHMRUN_IDLE_HYBRID : SHMRUN_IDLE_SPIN;
			if (bench_pingpong_rtt(&o, false, pct))
				goto out;
			for (int k = 0; k < 3; k++)
				keep_lowest(&pp[i][k], pct[k]);
		}
		if (bench_pingpong_rtt(&o, true, pct))
			goto out;
		for (int k = 0; k < 3; k++)
			keep_lowest(&ideal[k], pct[k]);
	}
	for (int i = 0; i < 2; i++)
		printf("pingpong idle=%s rtt_ns_p50=%" PRIu64 " rtt_ns_p99=%" PRIu64
		       " rtt_ns_p999=%" PRIu64 "\n",
		       idles[i], pp[i][0], pp[i][1], pp[i][2]);
	printf("ideal rtt_ns_p50=%" PRIu64 " rtt_ns_p99=%" PRIu64 " rtt_ns_p999=%" PRIu64 "\n",
	       ideal[0], ideal[1], ideal[2]);
	fflush(stdout);

	/* Peak: calibrate, then the best of --reps unpaced runs. */
	if (lat_run(shmrun, dir, "fixed", 2, 0, 0, "spin", &fixed, &res))
		goto out;
	n = quick ? 100000 : 2000000;
	if (lat_run(shmrun, dir, "calibrate", n, 0, 0, "spin", &t0, &res))
		goto out;
	if (!quick)
		n = bench_calibrated_records(n, t0, fixed, seconds);
	for (uint64_t r = 0; r < reps; r++) {
		double t, rate;

		if (lat_run(shmrun, dir, "fixed", 2, 0, 0, "spin", &t, &res))
			goto out;
		if (t < fixed)
			fixed = t;
		if (lat_run(shmrun, dir, "peak", n, 0, 0, "spin", &secs, &res))
			goto out;
		rate = bench_marginal_rate(n, secs, fixed);
		if (verbose)
			printf("# peak rep %" PRIu64 ": %" PRIu64
			       " records in %.3f s (fixed %.3f s): "
			       "%.2f Mrec/s; unpaced latency p50 %" PRIu64 " p99 %" PRIu64 " ns\n",
			       r + 1, n, secs, t, rate / 1e6, res.p50, res.p99);
		if (rate > peak)
			peak = rate;
		if (!peak_worst || rate < peak_worst)
			peak_worst = rate;
	}
	printf("peak workers=2 mrec_s=%.2f\n", peak / 1e6);
	printf("# peak: marginal rate of %" PRIu64 " unpaced records (idle = spin), "
	       "fixed cost %.3f s left out; spread %.2f..%.2f Mrec/s\n",
	       n, fixed, peak_worst / 1e6, peak / 1e6);
	fflush(stdout);

	/* Paced: every idle x load, --reps times, interleaved. */
	for (uint64_t r = 0; r < reps; r++)
		for (int i = 0; i < 2; i++)
			for (int k = 0; k < 3; k++) {
				uint64_t rate = (uint64_t)(peak * pcts[k] / 100.0);
				uint64_t m = (uint64_t)((double)rate * seconds);
				uint64_t warm = (uint64_t)((double)rate * LAT_WARMUP_S / 2);
				char name[32];

				if (bench_interrupted())
					goto out;
				if (rate < 1)
					rate = 1;
				if (m < 1000)
					m = 1000;
				if (warm > m / 4)
					warm = m / 4;
				snprintf(name, sizeof(name), "%s-%u", idles[i], pcts[k]);
				if (lat_run(shmrun, dir, name, m, rate, warm, idles[i], &secs,
					    &res))
					goto out;
				if (verbose)
					printf("# rep %" PRIu64 " idle=%s load_pct=%u: %" PRIu64
					       " records in %.3f s, p50 %" PRIu64 " p99 %" PRIu64
					       " p999 %" PRIu64 " max %" PRIu64 " ns\n",
					       r + 1, idles[i], pcts[k], m, secs, res.p50, res.p99,
					       res.p999, res.max);
				keep_lowest(&best[i][k].p50, res.p50);
				keep_lowest(&best[i][k].p99, res.p99);
				keep_lowest(&best[i][k].p999, res.p999);
				keep_lowest(&best[i][k].max, res.max);
				fflush(stdout);
			}
	for (int i = 0; i < 2; i++)
		for (int k = 0; k < 3; k++)
			printf("latency idle=%s load_pct=%u rate=%" PRIu64 " p50_ns=%" PRIu64
			       " p99_ns=%" PRIu64 " p999_ns=%" PRIu64 " max_ns=%" PRIu64 "\n",
			       idles[i], pcts[k], (uint64_t)(peak * pcts[k] / 100.0),
			       best[i][k].p50, best[i][k].p99, best[i][k].p999, best[i][k].max);
	printf("# each latency figure: the lowest of %" PRIu64 " runs of %.2f s, the first "
	       "%.2f s of each (at most a quarter) left out as warm-up; every other record was "
	       "measured; values are latency_sink bucket tops (<= 0.8 %% high)\n",
	       reps, seconds, LAT_WARMUP_S);
	printf("# one-way source-to-sink vs ring round trip: p50 spin %.1fx, hybrid %.1fx the "
	       "pingpong p50 of the same idle\n",
	       pp[0][0] ? (double)best[0][1].p50 / (double)pp[0][0] : 0.0,
	       pp[1][0] ? (double)best[1][1].p50 / (double)pp[1][0] : 0.0);
	bench_print_loadavg("at end");
	rc = 0;
out:
	return bench_finish(rc, dir, made_dir, keep);
}
