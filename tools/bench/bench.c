/*
 * tools/bench/bench.c: shmrun-bench, micro-benchmarks of the shm/ rings.
 *
 * What it measures. Each subcommand compares the shmrun ring with a minimal
 * hand-written reference measured in the same run, on the same CPUs, between
 * the same kind of processes (bench_ring.c): `ring` the throughput of one
 * producer and one consumer process, `pingpong` the round-trip latency of small
 * frames bounced between two processes.
 *
 * How. This file holds main() and nothing else it does not need: it parses
 * the options, chooses the two CPUs and calls the subcommand (bench_ring.c,
 * bench_wordcount.c, bench_checkpoint.c). bench_util.c runs every measurement:
 * it forks two children from a parent that only supervises, each pinned to
 * its CPU, meeting the other at a start barrier in a shared control block,
 * and always reaps both; it also keeps the timestamps (the TSC on x86-64).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static const char *prog = "shmrun-bench";

static const char usage_text[] =
    "Usage: shmrun-bench ring     [options]   producer/consumer throughput vs an ideal SPSC loop\n"
    "       shmrun-bench pingpong [options]   32-byte round-trip latency vs a bare cache line\n"
    "       shmrun-bench wordcount [--mb N] [--reps N] [--keep DIR] [--quick]\n"
    "                 whole shmrun word-count runs vs a single-threaded C word count\n"
    "       shmrun-bench checkpoint [--state-mb N] [--dir DIR] [--reps N] [--quick]\n"
    "                 checkpoint write GB/s and stalls vs O_DIRECT io_uring writes\n"
    "       shmrun-bench shuffle [--seconds S] [--reps N] [--keys N] [--quick]\n"
    "                 sequence -> by key -> count, 2 workers, records/s vs the ideal SPSC loop\n"
    "       shmrun-bench latency [--seconds S] [--reps N] [--quick]\n"
    "                 source-to-sink latency at 10/50/90 % of peak, idle spin and hybrid,\n"
    "                 beside the ping-pong round trip\n"
    "       shmrun-bench nexmark [--events N] [--reps N] [--query Q,...] [--quick]\n"
    "                 each NEXMark query's events/s/core at workers 1 and 2 vs its\n"
    "                 single-threaded reference, and its p50/p99 latency at half peak\n"
    "       shmrun-bench multihost [--seconds S] [--reps N] [--quick]\n"
    "                 the shuffle across two \"hosts\" under mpirun (TCP loopback) vs the\n"
    "                 same job on one host with rings vs MPI's own 256 KiB stream\n"
    "                 (built with MPI only)\n"
    "       shmrun-bench --help\n"
    "\n"
    "ring and pingpong run two processes pinned to two CPUs and print, for each\n"
    "case, the ring's result, an ideal reference measured right after it in the\n"
    "same run, and their ratio. Lines starting with '#' are commentary.\n"
    "\n"
    "Each subcommand has --help of its own.\n"
    "\n"
    "Options (ring and pingpong):\n"
    "  --ring-bytes N   ring capacity, a power of two (K/M/G suffixes; default 1M)\n"
    "  --reps N         repetitions per case, the best is reported (default 3)\n"
    "  --idle MODE      ring wait strategy: spin or hybrid (default spin)\n"
    "  --cpus A,B       CPUs of the two processes (default 0,1)\n"
    "  --quick          tiny volumes, one repetition, verify checksums (ctest)\n"
    "  -v, --verbose    also print every repetition (and, for ring, how often\n"
    "                   each side had to wait) as '#' lines\n"
    "Options (ring):\n"
    "  --seconds S      timed part of each measurement (default 0.5)\n"
    "  --records N      timed records per measurement instead of --seconds\n"
    "  --batch N        shmrun_ring_set_batch() bytes (default: the ring's)\n"
    "  --sizes A,B,...  payload bytes per record, multiples of 8 (default\n"
    "                   16,32,64,256,1024)\n"
    "Options (pingpong):\n"
    "  --iters N        round trips per measurement (default 1000000)\n"
    "\n"
    "Output:\n"
    "  ring bytes=B mrec_s=F gb_s=F        (B payload bytes per record)\n"
    "  ideal bytes=B mrec_s=F gb_s=F\n"
    "  ratio bytes=B ring_vs_ideal=F\n"
    "  pingpong bytes=32 rtt_ns_p50=N rtt_ns_p99=N rtt_ns_p999=N\n"
    "  ideal bytes=32 rtt_ns_p50=N rtt_ns_p99=N rtt_ns_p999=N\n"
    "  ideal2 bytes=32 rtt_ns_p50=N rtt_ns_p99=N rtt_ns_p999=N   (one line per direction)\n"
    "  ratio bytes=32 p50_vs_ideal=F\n"
    "  ratio2 bytes=32 p50_vs_ideal2=F ideal2_vs_ideal=F\n"
    "\n"
    "Exit status: 0 ok, 1 the benchmark failed (checksum mismatch, ring error,\n"
    "a process died), 2 usage error.\n";

static void usage(FILE *out)
{
	fputs(usage_text, out);
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry '%s --help'.\n", prog);
	return BENCH_EXIT_USAGE;
}

/* ---- options ------------------------------------------------------------ */

enum {
	OPT_RING_BYTES = 256,
	OPT_SECONDS,
	OPT_RECORDS,
	OPT_ITERS,
	OPT_REPS,
	OPT_BATCH,
	OPT_IDLE,
	OPT_CPUS,
	OPT_QUICK,
	OPT_SIZES,
	OPT_VERBOSE,
	OPT_HELP,
};

static const struct option long_opts[] = {
    {"ring-bytes", required_argument, NULL, OPT_RING_BYTES},
    {"seconds", required_argument, NULL, OPT_SECONDS},
    {"records", required_argument, NULL, OPT_RECORDS},
    {"iters", required_argument, NULL, OPT_ITERS},
    {"reps", required_argument, NULL, OPT_REPS},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"idle", required_argument, NULL, OPT_IDLE},
    {"cpus", required_argument, NULL, OPT_CPUS},
    {"quick", no_argument, NULL, OPT_QUICK},
    {"sizes", required_argument, NULL, OPT_SIZES},
    {"verbose", no_argument, NULL, OPT_VERBOSE},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

/* Parse a count with an optional binary K/M/G suffix; 0 on success. */
static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	if (!*s || *s == '-')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -1;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		end++;
		break;
	case 'm':
	case 'M':
		shift = 20;
		end++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		end++;
		break;
	}
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

/* A comma-separated list of payload sizes, each a multiple of 8 from 8 to 1G. */
static int parse_sizes(const char *s, struct bench_opts *o)
{
	o->nsizes = 0;
	for (;;) {
		char *end;
		unsigned long v;

		errno = 0;
		v = strtoul(s, &end, 10);
		if (errno || end == s || *s == '-' || !v || v % 8 || v > (1ul << 30) ||
		    o->nsizes == BENCH_MAX_SIZES)
			return -1;
		o->sizes[o->nsizes++] = (uint32_t)v;
		if (!*end)
			return 0;
		if (*end != ',')
			return -1;
		s = end + 1;
	}
}

static int parse_cpus(const char *s, int cpu[2])
{
	char *end;
	long a, b;

	errno = 0;
	a = strtol(s, &end, 10);
	if (errno || end == s || *end != ',' || a < 0 || a >= CPU_SETSIZE)
		return -1;
	s = end + 1;
	b = strtol(s, &end, 10);
	if (errno || end == s || *end || b < 0 || b >= CPU_SETSIZE || a == b)
		return -1;
	cpu[0] = (int)a;
	cpu[1] = (int)b;
	return 0;
}

/*
 * Decide the pinning: the requested CPUs (default 0 and 1) if this process may
 * run on both; without --cpus, the first two it may run on; unpinned, sharing
 * one CPU, if it may run on only one. Return: 0, or an exit code.
 */
static int choose_cpus(struct bench_opts *o, bool cpus_given)
{
	cpu_set_t allowed;
	int i, n = 0;

	if (sched_getaffinity(0, sizeof(allowed), &allowed)) {
		fprintf(stderr, "%s: sched_getaffinity: %s\n", prog, strerror(errno));
		return BENCH_EXIT_FAIL;
	}
	if (CPU_COUNT(&allowed) < 2) {
		printf("# only one CPU is online (or allowed): running unpinned, both processes "
		       "share it; ring waits use hybrid and spinners yield, so the numbers "
		       "mean little\n");
		o->cpu[0] = o->cpu[1] = -1;
		o->idle = SHMRUN_IDLE_HYBRID;
		bench_shared_cpu = true;
		return 0;
	}
	if (CPU_ISSET(o->cpu[0], &allowed) && CPU_ISSET(o->cpu[1], &allowed))
		return 0;
	if (cpus_given) {
		fprintf(stderr,
			"%s: --cpus %d,%d: CPU %d is not online or not allowed for "
			"this process\n",
			prog, o->cpu[0], o->cpu[1],
			CPU_ISSET(o->cpu[0], &allowed) ? o->cpu[1] : o->cpu[0]);
		return BENCH_EXIT_FAIL;
	}
	for (i = 0; i < CPU_SETSIZE && n < 2; i++)
		if (CPU_ISSET(i, &allowed))
			o->cpu[n++] = i;
	printf("# CPUs 0 and 1 are not both available: using %d and %d\n", o->cpu[0], o->cpu[1]);
	return 0;
}

/* For the subcommands that parse their own options (shuffle, latency). */
int bench_choose_cpus(struct bench_opts *o)
{
	return choose_cpus(o, false);
}

int main(int argc, char **argv)
{
	struct bench_opts o = {
	    .ring_bytes = 1u << 20,
	    .seconds = 0.5,
	    .iters = 1000000,
	    .reps = 3,
	    .idle = SHMRUN_IDLE_SPIN,
	    .cpu = {0, 1},
	    .sizes = {16, 32, 64, 256, 1024},
	    .nsizes = 5,
	};
	bool is_ring, cpus_given = false, records_given = false, seconds_given = false;
	bool reps_given = false;
	char **av = argv + 1; /* the subcommand's argv: av[0] is its name */
	const char *cmd;
	uint64_t v;
	char *end;
	int c, rc;

	if (argc < 2)
		return usage_error("missing subcommand (ring, pingpong, wordcount, checkpoint, "
				   "shuffle, latency, nexmark or multihost)");
	cmd = argv[1];
	if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(cmd, "wordcount")) /* own options: see bench_wordcount.c */
		return bench_wordcount_main(argc - 1, argv + 1);
	if (!strcmp(cmd, "checkpoint")) /* own options: see bench_checkpoint.c */
		return bench_checkpoint_main(argc - 1, argv + 1);
	if (!strcmp(cmd, "shuffle")) /* own options: see bench_shuffle.c */
		return bench_shuffle_main(argc - 1, argv + 1);
	if (!strcmp(cmd, "latency")) /* own options: see bench_latency.c */
		return bench_latency_main(argc - 1, argv + 1);
	if (!strcmp(cmd, "nexmark")) /* own options: see bench_nexmark.c */
		return bench_nexmark_main(argc - 1, argv + 1);
	if (!strcmp(cmd, "multihost")) { /* own options: see bench_multihost.c */
#ifdef SHMRUN_BENCH_MPI
		return bench_multihost_main(argc - 1, argv + 1);
#else
		fprintf(stderr, "%s: multihost: this shmrun-bench was built without MPI "
				"(apt-get install libopenmpi-dev, then configure again)\n",
			prog);
		return BENCH_EXIT_FAIL;
#endif
	}
#ifdef SHMRUN_BENCH_MPI
	if (!strcmp(cmd, "multihost-ping")) /* (a) of multihost, run by it under mpirun */
		return bench_multihost_ping_main(argc - 1, argv + 1);
#endif
	if (strcmp(cmd, "ring") && strcmp(cmd, "pingpong"))
		return usage_error("unknown subcommand '%s' (expected ring, pingpong, wordcount, "
				   "checkpoint, shuffle, latency or nexmark)",
				   cmd);
	is_ring = !strcmp(cmd, "ring");

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc - 1, av, ":hv", long_opts, NULL)) != -1) {
		const char *arg = optarg;

		switch (c) {
		case 'h':
		case OPT_HELP:
			usage(stdout);
			return 0;
		case OPT_RING_BYTES:
			if (parse_size(arg, &o.ring_bytes) || !shmrun_ring_memsize(o.ring_bytes))
				return usage_error("--ring-bytes '%s': need a power of two from 4K "
						   "to 1G",
						   arg);
			break;
		case OPT_SECONDS:
			if (!is_ring)
				return usage_error("--seconds applies to ring only");
			errno = 0;
			o.seconds = strtod(arg, &end);
			if (errno || end == arg || *end || !(o.seconds > 0) || o.seconds > 3600)
				return usage_error("--seconds '%s': need a number in (0, 3600]",
						   arg);
			seconds_given = true;
			break;
		case OPT_RECORDS:
			if (!is_ring)
				return usage_error("--records applies to ring only");
			if (parse_size(arg, &o.records) || !o.records)
				return usage_error("--records '%s': need a positive count", arg);
			records_given = true;
			break;
		case OPT_ITERS:
			if (is_ring)
				return usage_error("--iters applies to pingpong only");
			if (parse_size(arg, &o.iters) || !o.iters || o.iters > (1ull << 30))
				return usage_error("--iters '%s': need a count from 1 to 1G", arg);
			break;
		case OPT_REPS:
			if (parse_size(arg, &v) || !v || v > 1000)
				return usage_error("--reps '%s': need a count from 1 to 1000", arg);
			o.reps = (unsigned)v;
			reps_given = true;
			break;
		case OPT_BATCH:
			if (!is_ring)
				return usage_error("--batch applies to ring only");
			if (parse_size(arg, &o.batch) || !o.batch)
				return usage_error("--batch '%s': need a positive byte count", arg);
			break;
		case OPT_IDLE:
			if (!strcmp(arg, "spin"))
				o.idle = SHMRUN_IDLE_SPIN;
			else if (!strcmp(arg, "hybrid"))
				o.idle = SHMRUN_IDLE_HYBRID;
			else
				return usage_error("--idle '%s': need spin or hybrid", arg);
			break;
		case OPT_CPUS:
			if (parse_cpus(arg, o.cpu))
				return usage_error("--cpus '%s': need two different CPU numbers, "
						   "e.g. 0,1",
						   arg);
			cpus_given = true;
			break;
		case OPT_QUICK:
			o.quick = true;
			break;
		case 'v':
		case OPT_VERBOSE:
			o.verbose = true;
			break;
		case OPT_SIZES:
			if (!is_ring)
				return usage_error("--sizes applies to ring only");
			if (parse_sizes(arg, &o))
				return usage_error("--sizes '%s': need up to %d multiples of 8, "
						   "comma-separated",
						   arg, BENCH_MAX_SIZES);
			break;
		case ':':
			return usage_error("option '%s' needs a value", av[optind - 1]);
		default:
			return usage_error("unknown option '%s'", av[optind - 1]);
		}
	}
	if (optind < argc - 1)
		return usage_error("unexpected argument '%s'", av[optind]);
	for (unsigned i = 0; is_ring && i < o.nsizes; i++)
		if (o.sizes[i] > o.ring_bytes / 2 - SHMRUN_FRAME_HEADER)
			return usage_error("a %" PRIu32 "-byte record does not fit a %" PRIu64
					   "-byte ring (at most half the ring, header included)",
					   o.sizes[i], o.ring_bytes);
	if (records_given && seconds_given)
		return usage_error("--records and --seconds exclude each other");
	if (o.quick) {
		if (!records_given)
			o.records = 20000;
		if (!reps_given)
			o.reps = 1;
		if (!is_ring && o.iters == 1000000)
			o.iters = 20000;
	}

	rc = choose_cpus(&o, cpus_given);
	if (rc)
		return rc;
	bench_ts_init();
	rc = is_ring ? bench_ring_main(&o) : bench_pingpong_main(&o);
	fflush(stdout);
	return rc;
}

int bench_common_option(int c, const char *sub, const char *usage, char **argv,
			struct bench_common *co)
{
	switch (c) {
	case 'r':
		if (bench_parse_count(optarg, 100, &co->reps))
			return bench_usage_error(sub, "--reps '%s': need a count from 1 to 100",
						 optarg);
		return BENCH_OPT_DONE;
	case 'K':
		if (bench_parse_count(optarg, 1u << 24, &co->keys))
			return bench_usage_error(sub, "--keys '%s': need a count from 1 to 16M",
						 optarg);
		return BENCH_OPT_DONE;
	case 'k':
		co->keep = optarg;
		return BENCH_OPT_DONE;
	case 'q':
		co->quick = true;
		return BENCH_OPT_DONE;
	case 'v':
		co->verbose = true;
		return BENCH_OPT_DONE;
	case 'h':
		fputs(usage, stdout);
		return 0;
	case ':':
		return bench_usage_error(sub, "option '%s' needs a value", argv[optind - 1]);
	default: /* '?', or an option of the table the subcommand does not take */
		return bench_usage_error(sub, "unknown option '%s'", argv[optind - 1]);
	}
}

int bench_seconds_option(const char *sub, const char *arg, double min, double max, double *secs)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(arg, &end);
	if (errno || end == arg || *end || !(v > 0) || !(v >= min) || v > max) {
		if (min > 0)
			return bench_usage_error(sub, "--seconds '%s': need a number in [%g, %g]",
						 arg, min, max);
		return bench_usage_error(sub, "--seconds '%s': need a number in (0, %g]", arg, max);
	}
	*secs = v;
	return BENCH_OPT_DONE;
}

int bench_parse_seconds_keys(int argc, char **argv, const char *sub, const char *usage, bool keys,
			     double *secs, struct bench_common *co)
{
	static const struct option with_keys[] = {
	    {"seconds", required_argument, NULL, 's'},
	    {"keys", required_argument, NULL, 'K'},
	    BENCH_COMMON_LONGOPTS,
	    {NULL, 0, NULL, 0},
	};
	static const struct option without_keys[] = {
	    {"seconds", required_argument, NULL, 's'},
	    BENCH_COMMON_LONGOPTS,
	    {NULL, 0, NULL, 0},
	};
	int c;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":hv", keys ? with_keys : without_keys, NULL)) != -1) {
		c = c == 's' ? bench_seconds_option(sub, optarg, 0, 60, secs)
			     : bench_common_option(c, sub, usage, argv, co);
		if (c != BENCH_OPT_DONE)
			return c;
	}
	if (optind < argc)
		return bench_usage_error(sub, "unexpected argument '%s'", argv[optind]);
	return BENCH_OPT_DONE;
}
