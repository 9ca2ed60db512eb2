/*
 * tools/bench/bench_nexmark.c: the `nexmark` subcommand: how fast the
 * nexmark source makes NEXMark events in a whole shmrun run, against a
 * single-threaded C loop that makes the same events, measured in the same run.
 *
 * What it measures. Events per second of
 *
 *     gen (nexmark, width W) -> forward -> out (null_sink, width W)
 *
 * at workers = width = 1 and 2 (per core: divided by W), and of the
 * reference: this file's own generator loop (ref_event(), written from the
 * same description, runtime/ops/nexmark.c's header and docs/topology.md,
 * not sharing its code: tools use public headers only) formatting each event
 * into a 256-byte slot, the bytes summed so nothing is optimised away. The
 * ratio says what the runtime (tasks, batches, the sink, pacing checks)
 * costs over the bare generator.
 *
 * How. As shuffle (bench_shuffle.c): each whole run is timed from fork/exec
 * to exit, and the rate is the marginal one, (N - 2) / (t(N) - t(2)), with
 * the smallest t(2) of all repetitions; idle = spin.
 *
 * Checked: before timing, a run of 5000 events at width 1 into file_sink must
 * equal the reference's text byte for byte (so the two generate the same
 * events), and every timed run's log must report N records out.
 *
 * Rejected: timing the reference in a child pinned like a worker (it is one
 * loop on one CPU; the parent is as good, and the job is not running then).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "nexmark_ref.h"

#define NX_RUN_TIMEOUT_S 120.0
#define NX_CHECK_EVENTS 5000u
#define NX_SEED 42u
#define NX_SLOT 256u

static const char nx_usage_text[] =
    "Usage: shmrun-bench nexmark [--events N] [--reps N] [--keep DIR] [--quick] [-v]\n"
    "       shmrun-bench nexmark --reference QUERY [--events N] [--seed S]\n"
    "\n"
    "Times whole shmrun runs of nexmark -> null_sink at workers 1 and 2, and a\n"
    "single-threaded C loop generating the same events, in the same run. The\n"
    "shmrun rate is marginal: (N - 2) / (t(N) - t(2)), start-up and exit left out.\n"
    "\n"
    "  --events N  events per run (default 20000000)\n"
    "  --reps N    repetitions, the best is reported (default 3)\n"
    "  --keep DIR  write topologies, outputs and logs into DIR and keep them\n"
    "  --quick     small runs, one repetition: a smoke test\n"
    "  -v          print every run as a '#' line\n"
    "  --reference QUERY  print the single-threaded reference's output of QUERY\n"
    "              (q0, q1, ...: docs/examples/nexmark/QUERY.conf) over events\n"
    "              0..N-1 of seed S (default 1; N default 200000), as file_sink\n"
    "              lines, and exit: what the tests compare a shmrun run with\n"
    "\n"
    "Output:\n"
    "  nexmark workers=W mev_s=F mev_s_per_core=F\n"
    "  reference workers=1 mev_s=F\n"
    "  ratio workers=W per_core_vs_reference=F\n"
    "Exit status: 0 ok, 1 a run failed or its output is wrong, 2 usage error.\n";

/* The reference loop over @n events; events per second. */
static double ref_rate(uint64_t n, uint64_t *sum)
{
	static char slot[NX_SLOT * 2];
	int64_t t0 = bench_now_ns(), t1;
	uint64_t s = 0;

	for (uint64_t i = 0; i < n; i++) {
		struct nx_ref_event e;
		char *end;

		nx_ref_make(NX_SEED, i, &e);
		end = nx_ref_format(&e, slot);
		s += (uint64_t)(end - slot) + (unsigned char)slot[(i * 7) % 16];
	}
	t1 = bench_now_ns();
	*sum = s;
	return (double)n / ((double)(t1 - t0) / 1e9);
}

/* ---- --reference: a query's reference output on stdout ---------------------- */

static void nx_print_line(void *ctx, const char *line, size_t len)
{
	fwrite(line, 1, len, ctx);
	putc('\n', ctx);
}

static int nx_print_reference(const char *name, uint64_t seed, uint64_t n)
{
	const struct nx_ref_query *q = nx_ref_query_find(name);

	if (!q) {
		fprintf(stderr, "shmrun-bench nexmark: --reference '%s': no such query; the queries:",
			name);
		for (unsigned i = 0; nx_ref_queries[i]; i++)
			fprintf(stderr, " %s", nx_ref_queries[i]->name);
		fputc('\n', stderr);
		return BENCH_EXIT_USAGE;
	}
	if (nx_ref_run(q, seed, n, nx_print_line, stdout)) {
		fprintf(stderr, "shmrun-bench nexmark: --reference %s: out of memory\n", name);
		return BENCH_EXIT_FAIL;
	}
	if (fflush(stdout) || ferror(stdout)) {
		fprintf(stderr, "shmrun-bench nexmark: --reference %s: writing stdout: %s\n", name,
			strerror(errno));
		return BENCH_EXIT_FAIL;
	}
	return 0;
}

/* ---- the shmrun runs -------------------------------------------------------- */

static int nx_write_conf(const char *dir, const char *name, uint64_t n, unsigned w, bool to_file)
{
	char path[PATH_MAX], text[1024];

	snprintf(text, sizeof(text),
		 "; written by shmrun-bench nexmark\n"
		 "[job]\nname = bench-nexmark-%s\nworkers = %u\nidle = spin\n\n"
		 "[gen]\nop = nexmark\ncount = %" PRIu64 "\nseed = %u\npiece_events = %" PRIu64
		 "\nwidth = %u\n\n"
		 "[out]\nop = %s\ninput = gen\n%swidth = %u\n",
		 name, w, n, NX_SEED, (n + w - 1) / w, w, to_file ? "file_sink" : "null_sink",
		 to_file ? "path = out.tsv\n" : "", w);
	if (bench_pathf(path, sizeof(path), "%s/%s.conf", dir, name))
		return -1;
	return bench_write_text(path, text);
}

/* @dir/@name.log reports @n records out. Return: 0, or -1 after printing. */
static int nx_check_log(const char *dir, const char *name, uint64_t n)
{
	char path[PATH_MAX], want[64], *text = NULL;
	size_t len;
	int rc;

	if (bench_pathf(path, sizeof(path), "%s/%s.log", dir, name) ||
	    bench_read_text(path, &text, &len))
		return -1;
	snprintf(want, sizeof(want), "records out %" PRIu64 ",", n);
	rc = strstr(text, want) ? 0 : -1;
	if (rc)
		fprintf(stderr, "shmrun-bench: %s: no '%s' (wrong number of events)\n", path, want);
	free(text);
	return rc;
}

static int nx_run(const char *shmrun, const char *dir, const char *name, uint64_t n, unsigned w,
		  double *secs)
{
	if (nx_write_conf(dir, name, n, w, false) ||
	    bench_run_conf(shmrun, dir, name, NX_RUN_TIMEOUT_S, secs))
		return -1;
	return nx_check_log(dir, name, n);
}

/* A width-1 run into a file equals the reference's text. Return: 0 or -1 (printed). */
static int nx_check_events(const char *shmrun, const char *dir)
{
	char path[PATH_MAX], *got = NULL, *want = malloc((size_t)NX_CHECK_EVENTS * NX_SLOT), *p;
	size_t len;
	double secs;
	int rc = -1;

	if (!want)
		return -1;
	p = want;
	for (uint64_t i = 0; i < NX_CHECK_EVENTS; i++) {
		struct nx_ref_event e;

		nx_ref_make(NX_SEED, i, &e);
		p = nx_ref_format(&e, p);
	}
	if (nx_write_conf(dir, "check", NX_CHECK_EVENTS, 1, true) ||
	    bench_run_conf(shmrun, dir, "check", NX_RUN_TIMEOUT_S, &secs) ||
	    bench_pathf(path, sizeof(path), "%s/out.tsv", dir) || bench_read_text(path, &got, &len))
		goto out;
	if (len != (size_t)(p - want) || memcmp(got, want, len)) {
		size_t i = 0;

		while (i < len && i < (size_t)(p - want) && got[i] == want[i])
			i++;
		fprintf(stderr,
			"shmrun-bench: %s differs from the reference generator at byte %zu "
			"(%zu bytes, want %zu)\n",
			path, i, len, (size_t)(p - want));
		goto out;
	}
	rc = 0;
out:
	free(got);
	free(want);
	return rc;
}

int bench_nexmark_main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"events", required_argument, NULL, 'e'}, {"reps", required_argument, NULL, 'r'},
	    {"keep", required_argument, NULL, 'k'},   {"quick", no_argument, NULL, 'q'},
	    {"verbose", no_argument, NULL, 'v'},      {"help", no_argument, NULL, 'h'},
	    {"reference", required_argument, NULL, 'R'}, {"seed", required_argument, NULL, 'S'},
	    {NULL, 0, NULL, 0},
	};
	char built[PATH_MAX], shmrun[PATH_MAX], dir[PATH_MAX];
	const char *keep = NULL, *reference = NULL;
	uint64_t reps = 0, n = 20000000, sum = 0, seed = 1;
	bool seed_given = false;
	double fixed[3] = {0, 0, 0}, best[3] = {0, 0, 0}, ref = 0;
	bool quick = false, verbose = false, made_dir = false, n_given = false;
	struct bench_common co = {0};
	int c, rc = BENCH_EXIT_FAIL;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":hv", opts, NULL)) != -1) {
		switch (c) {
		case 'e':
			if (bench_parse_count(optarg, 1000000000000ull, &n) || n < 100)
				return bench_usage_error(
				    "nexmark", "--events '%s': need a count from 100 to 10^12", optarg);
			n_given = true;
			break;
		case 'R':
			reference = optarg;
			break;
		case 'S':
			if (bench_parse_count(optarg, 1000000000000000000ull, &seed))
				return bench_usage_error(
				    "nexmark", "--seed '%s': need a count from 1 to 10^18", optarg);
			seed_given = true;
			break;
		default:
			c = bench_common_option(c, "nexmark", nx_usage_text, argv, &co);
			if (c != BENCH_OPT_DONE)
				return c == BENCH_OPT_NOT_COMMON
					   ? bench_usage_error("nexmark", "unknown option '%s'",
							       argv[optind - 1])
					   : c;
		}
	}
	keep = co.keep;
	quick = co.quick;
	verbose = co.verbose;
	reps = co.reps;
	if (optind < argc)
		return bench_usage_error("nexmark", "unexpected argument '%s'", argv[optind]);
	if (seed_given && !reference)
		return bench_usage_error("nexmark", "--seed is for --reference (the timed runs use "
						    "seed %u)", NX_SEED);
	if (reference)
		return nx_print_reference(reference, seed, n_given ? n : 200000);
	if (quick && !n_given)
		n = 200000;
	if (!reps)
		reps = quick ? 1 : 3;

	if (bench_shmrun_path(built, sizeof(built)))
		return BENCH_EXIT_FAIL;
	bench_catch_signals();
	if (bench_open_workdir(keep, "nexmark", dir, sizeof(dir), &made_dir))
		return BENCH_EXIT_FAIL;
	if (bench_shmrun_copy(built, dir, shmrun, sizeof(shmrun)))
		goto out;
	bench_print_loadavg("at start");
	if (nx_check_events(shmrun, dir))
		goto out;
	printf("# %u events at width 1 equal the reference generator's, byte for byte\n",
	       NX_CHECK_EVENTS);
	printf("# %" PRIu64 " events per run (seed %u, all kinds), best of %" PRIu64 " reps\n", n,
	       NX_SEED, reps);
	fflush(stdout);
	for (uint64_t r = 0; r < reps; r++) {
		double rr;

		for (unsigned w = 1; w <= 2; w++) {
			double t, secs, rate;

			if (bench_interrupted())
				goto out;
			if (nx_run(shmrun, dir, "fixed", 2, w, &t))
				goto out;
			if (!fixed[w] || t < fixed[w])
				fixed[w] = t;
			if (nx_run(shmrun, dir, "nexmark", n, w, &secs))
				goto out;
			rate = (double)(n - 2) / (secs > fixed[w] ? secs - fixed[w] : secs);
			if (verbose)
				printf("# rep %" PRIu64 " workers=%u: %.3f s (fixed %.3f s) %.2f "
				       "Mev/s\n",
				       r + 1, w, secs, t, rate / 1e6);
			if (rate > best[w])
				best[w] = rate;
		}
		rr = ref_rate(n, &sum);
		if (verbose)
			printf("# rep %" PRIu64 " reference: %.2f Mev/s (checksum %" PRIu64 ")\n",
			       r + 1, rr / 1e6, sum);
		if (rr > ref)
			ref = rr;
		fflush(stdout);
	}
	for (unsigned w = 1; w <= 2; w++)
		printf("nexmark workers=%u mev_s=%.2f mev_s_per_core=%.2f\n", w, best[w] / 1e6,
		       best[w] / w / 1e6);
	printf("reference workers=1 mev_s=%.2f\n", ref / 1e6);
	for (unsigned w = 1; w <= 2; w++)
		printf("ratio workers=%u per_core_vs_reference=%.3f\n", w,
		       ref > 0 ? best[w] / w / ref : 0.0);
	bench_print_loadavg("at end");
	rc = 0;
out:
	if (bench_interrupted()) {
		fprintf(stderr, "shmrun-bench: interrupted\n");
		rc = BENCH_EXIT_FAIL;
	}
	if (made_dir)
		bench_rmtree(dir);
	else if (keep)
		printf("# kept: %s\n", dir);
	fflush(stdout);
	return rc;
}
