/*
 * tools/bench/bench_shuffle.c: the `shuffle` subcommand; the helpers the job
 * benchmarks share for writing a conf and one timed run; and the shuffle job
 * itself (its conf, the check of its output), which multihost runs on one
 * host and across two.
 *
 * What it measures. The raw shuffle path, records per second, with 2 workers:
 *
 *     gen (sequence, width 2) -> by key -> count (width 2, emit = final,
 *         no combiner) -> out (file_sink, width 1)
 *
 * Each worker runs one gen and one count instance; with K keys (default 1024)
 * half of each gen's records go to the other worker's count through a ring and
 * half to its own through a ring of the same worker. Every record crosses
 * a ring: a combiner would hide exactly that, so the count stage says
 * `combine = false`.
 *
 * How. A whole `shmrun topology.conf` run is timed from fork/exec to exit
 * (bench_job.c). Start-up and exit (forking, pinning, the segment, the final
 * emit of K counts) are paid once per run whatever its size, so each
 * repetition also times a run of 2 records of the same topology, and the
 * rate is the marginal one: (N - 2) / (t(N) - t(2)), with the smallest t(2)
 * of all repetitions. N is chosen by a calibration run so that a run moves
 * about --seconds of records. idle = spin, as the reference spins.
 *
 * The reference, in the same run and interleaved with the shmrun runs: the
 * ring subcommand's ideal SPSC loop (Lamport slots, no header, one release
 * store per record; bench_ring.c) between two processes pinned to the same
 * two CPUs the workers are pinned to, moving 32-byte records: a sequence
 * record on a channel is a 16-byte record header, a key "k<i mod K>" of 2-5
 * bytes and a value of up to ~10 digits, so 32 bytes is its size rounded up
 * to the reference's 8-byte granule. The reference moves one stream between
 * two CPUs; the job moves two streams (one per gen) on the same two CPUs,
 * each CPU also running its own count: the ratio says how close the whole
 * shuffle path comes to one bare queue. Target (issue 10 item 8): >= 0.5x.
 *
 * Every run's output is checked: K lines (fewer if N < K), counts summing to
 * N, each key's count N/K rounded down or up.
 *
 * Rejected: the job's own "done in" line (it leaves out fork/exec and the
 * exit, and has no notion of a marginal rate); a count with emit = update
 * (it doubles the records the job moves, into the sink).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"

#define SH_RECORD_BYTES	 32u
#define SH_RUN_TIMEOUT_S 120.0
#define SH_TARGET	 0.5

static const char sh_usage_text[] =
    "Usage: shmrun-bench shuffle [--seconds S] [--reps N] [--keys N] [--keep DIR] [--quick] [-v]\n"
    "\n"
    "Times whole shmrun runs of sequence -> by key -> count (no combiner) on 2\n"
    "workers, and the ideal SPSC loop of `shmrun-bench ring` with 32-byte records\n"
    "in the same run, on the same two CPUs. The shmrun rate is marginal:\n"
    "(N - 2) / (t(N) - t(2)), start-up and exit left out.\n"
    "\n"
    "  --seconds S  records per run: about S seconds' worth (default 1.5)\n"
    "  --reps N     repetitions, the best is reported (default 3)\n"
    "  --keys N     distinct keys (default 1024)\n"
    "  --keep DIR   write topologies, outputs and logs into DIR and keep them\n"
    "  --quick      tiny runs, one repetition: a smoke test (ctest)\n"
    "  -v           print every run as a '#' line\n"
    "\n"
    "Output:\n"
    "  shuffle workers=2 mrec_s=F\n"
    "  ideal bytes=32 mrec_s=F\n"
    "  ratio shuffle_vs_ideal=F\n"
    "Exit status: 0 ok (the target is reported, not enforced), 1 a run failed or\n"
    "its output is wrong, 2 usage error.\n";

int bench_write_text(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644), err;

	if (fd < 0) {
		fprintf(stderr, "shmrun-bench: cannot create %s: %s\n", path, strerror(errno));
		return -1;
	}
	err = bench_write_all(fd, text, strlen(text));
	if (close(fd) && !err)
		err = -errno;
	if (err)
		fprintf(stderr, "shmrun-bench: writing %s: %s\n", path, strerror(-err));
	return err ? -1 : 0;
}

int bench_run_conf(const char *shmrun, const char *dir, const char *name, double timeout_s,
		   double *secs)
{
	char conf[PATH_MAX], log[PATH_MAX];
	char *argv[] = {(char *)shmrun, "--log-level", "info", conf, NULL};

	if (bench_pathf(conf, sizeof(conf), "%s/%s.conf", dir, name) ||
	    bench_pathf(log, sizeof(log), "%s/%s.log", dir, name))
		return -1;
	return bench_job_run(shmrun, argv, log, timeout_s, true, secs);
}

int bench_shuffle_conf(const char *dir, const char *name, const char *sub, const char *jobtag,
		       const char *placement, uint64_t n, uint64_t keys)
{
	char path[PATH_MAX], text[1200];

	snprintf(text, sizeof(text),
		 "; written by shmrun-bench %s\n"
		 "[job]\nname = bench-%s-%s\n%sidle = spin\n\n"
		 "[gen]\nop = sequence\ncount = %" PRIu64 "\nkeys = %" PRIu64
		 "\npiece_records = %" PRIu64 "\nwidth = 2\n\n"
		 "; no combiner: every record crosses a ring (a gateway across hosts)\n"
		 "[count]\nop = count\ninput = gen by key\nemit = final\ncombine = false\nwidth = "
		 "2\n\n"
		 "[out]\nop = file_sink\ninput = count\npath = out-%s.tsv\n",
		 sub, jobtag, name, placement, n, keys, (n + 1) / 2, name);
	if (bench_pathf(path, sizeof(path), "%s/%s.conf", dir, name))
		return -1;
	return bench_write_text(path, text);
}

int bench_shuffle_verify(const char *dir, const char *name, uint64_t n, uint64_t keys)
{
	char path[PATH_MAX], *text = NULL, *p;
	uint64_t lines = 0, sum = 0, lo = n / keys, hi = lo + (n % keys != 0);
	size_t len;
	int rc = 0;

	if (bench_pathf(path, sizeof(path), "%s/out-%s.tsv", dir, name) ||
	    bench_read_text(path, &text, &len))
		return -1;
	for (p = text; *p && !rc;) {
		char *tab = strchr(p, '\t'), *nl, *end;
		unsigned long long c;

		nl = strchr(p, '\n');
		if (!tab || !nl || tab > nl) {
			rc = -1;
			break;
		}
		errno = 0;
		c = strtoull(tab + 1, &end, 10);
		if (errno || end != nl || c < lo || c > hi)
			rc = -1;
		sum += c;
		lines++;
		p = nl + 1;
	}
	if (!rc && (sum != n || lines != (n < keys ? n : keys)))
		rc = -1;
	if (rc)
		fprintf(stderr,
			"shmrun-bench: %s: wrong output (%" PRIu64 " lines, counts sum %" PRIu64
			"; want %" PRIu64 " lines, sum %" PRIu64 ", each %" PRIu64 "..%" PRIu64
			")\n",
			path, lines, sum, n < keys ? n : keys, n, lo, hi);
	free(text);
	return rc;
}

/* One verified run of @n records; its wall-clock time in *@secs. */
static int sh_run(const char *shmrun, const char *dir, const char *name, uint64_t n, uint64_t keys,
		  double *secs)
{
	if (bench_shuffle_conf(dir, name, "shuffle", "shuffle", "workers = 2\n", n, keys) ||
	    bench_run_conf(shmrun, dir, name, SH_RUN_TIMEOUT_S, secs))
		return -1;
	return bench_shuffle_verify(dir, name, n, keys);
}

int bench_shuffle_main(int argc, char **argv)
{
	struct bench_opts o = {
	    .ring_bytes = 1u << 20,
	    .seconds = 1.5,
	    .iters = 200000,
	    .reps = 3,
	    .idle = SHMRUN_IDLE_SPIN,
	    .cpu = {0, 1},
	};
	char built[PATH_MAX], shmrun[PATH_MAX], dir[PATH_MAX];
	const char *keep = NULL;
	uint64_t reps = 0, keys = 1024, n, spread_n = 0;
	double fixed = 0, best = 0, worst = 0, ideal = 0, ideal_worst = 0, secs, t0;
	bool quick = false, verbose = false, made_dir = false, reps_given = false;
	struct bench_common co = {0};
	int c, rc = BENCH_EXIT_FAIL;

	c = bench_parse_seconds_keys(argc, argv, "shuffle", sh_usage_text, true, &o.seconds, &co);
	if (c != BENCH_OPT_DONE)
		return c;
	keep = co.keep;
	quick = co.quick;
	verbose = co.verbose;
	reps = co.reps;
	reps_given = co.reps != 0;
	if (co.keys)
		keys = co.keys;
	if (quick) {
		o.seconds = 0.05;
		o.quick = true;
		o.records = 20000;
	}
	if (!reps_given)
		reps = quick ? 1 : 3;
	o.reps = (unsigned)reps;

	rc = bench_prepare_run(&o, built, sizeof(built));
	if (rc)
		return rc;
	rc = BENCH_EXIT_FAIL;
	bench_ts_init();
	bench_catch_signals();
	if (bench_open_workdir(keep, "shuffle", dir, sizeof(dir), &made_dir))
		return BENCH_EXIT_FAIL;
	if (bench_shmrun_copy(built, dir, shmrun, sizeof(shmrun)))
		goto out;
	bench_print_loadavg("at start");
	printf("# shmrun: %s (runs from a copy in %s), workers on the first two allowed CPUs, "
	       "reference on CPUs %d,%d\n",
	       built, dir, o.cpu[0], o.cpu[1]);

	/* Calibration: the fixed cost, then a first guess of the rate. */
	if (sh_run(shmrun, dir, "fixed", 2, keys, &fixed))
		goto out;
	n = quick ? 200000 : 2000000;
	if (sh_run(shmrun, dir, "calibrate", n, keys, &t0))
		goto out;
	if (!quick)
		n = bench_calibrated_records(n, t0, fixed, o.seconds);
	printf("# %" PRIu64 " records per run, %" PRIu64 " keys, best of %" PRIu64
	       " reps; reference: %u-byte records, %.2f s timed (%s)\n",
	       n, keys, reps, SH_RECORD_BYTES, o.seconds,
	       o.records ? "quick: 20000 records" : "after two passes over a 1 MiB ring");
	fflush(stdout);

	for (uint64_t r = 0; r < reps; r++) {
		double t, rate, ideal_rate;

		if (bench_interrupted())
			goto out;
		if (sh_run(shmrun, dir, "fixed", 2, keys, &t))
			goto out;
		if (t < fixed)
			fixed = t;
		if (sh_run(shmrun, dir, "shuffle", n, keys, &secs))
			goto out;
		rate = bench_marginal_rate(n, secs, fixed);
		ideal_rate = bench_ideal_rate(&o, SH_RECORD_BYTES);
		if (ideal_rate < 0)
			goto out;
		if (verbose)
			printf("# rep %" PRIu64 ": shmrun %.3f s (fixed %.3f s) %.2f Mrec/s, "
			       "ideal %.2f Mrec/s\n",
			       r + 1, secs, t, rate / 1e6, ideal_rate / 1e6);
		if (rate > best)
			best = rate;
		if (!worst || rate < worst)
			worst = rate;
		if (ideal_rate > ideal)
			ideal = ideal_rate;
		if (!ideal_worst || ideal_rate < ideal_worst)
			ideal_worst = ideal_rate;
		spread_n++;
		fflush(stdout);
	}
	printf("# every run's output matched: %" PRIu64 " keys, counts summing to the records\n",
	       keys < n ? keys : n);
	printf("# fixed cost (a 2-record run) %.3f s; spread over %" PRIu64
	       " reps: shmrun %.2f..%.2f, ideal %.2f..%.2f Mrec/s\n",
	       fixed, spread_n, worst / 1e6, best / 1e6, ideal_worst / 1e6, ideal / 1e6);
	printf("shuffle workers=2 mrec_s=%.2f\n", best / 1e6);
	printf("ideal bytes=%u mrec_s=%.2f\n", SH_RECORD_BYTES, ideal / 1e6);
	printf("ratio shuffle_vs_ideal=%.3f\n", ideal > 0 ? best / ideal : 0.0);
	printf("# target: >= %.1fx the ideal loop (%s); count runs without a combiner\n", SH_TARGET,
	       ideal > 0 && best / ideal >= SH_TARGET ? "met" : "missed");
	bench_print_loadavg("at end");
	rc = 0;
out:
	return bench_finish(rc, dir, made_dir, keep);
}
