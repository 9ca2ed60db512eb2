/*
 * tools/bench/bench_multihost.c: the `multihost` subcommand (issue 16 §6),
 * built only with MPI (tools/CMakeLists.txt: MPI_C_FOUND).
 *
 * What it measures, in one run on one machine, on the same two CPUs:
 *
 *   (a) mpi    MPI's own bandwidth: rank 0 streams bytes to rank 1 in
 *              messages of the gateway's size (256 KiB), with the transport
 *              the multi-host tests and docs use (mpirun -np 2 --bind-to none
 *              --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo);
 *   (b) rings  the shuffle job of `shmrun-bench shuffle` (sequence, width 2
 *              -> by key -> count, width 2, no combiner -> file_sink) on one
 *              host: `shmrun topology.conf`, 2 workers, rings between them;
 *   (c) hosts  the same job across two "hosts": `[job] hosts = 2`, one worker
 *              per host, under mpirun with the same settings, so every record
 *              whose key belongs to the other count instance crosses the
 *              gateways instead of a ring.
 *
 * and prints records/s and bytes/s of each, then the ratios: (c) against (b)
 * (what going through the gateways costs the job) and (c)'s bytes across
 * hosts per second against (a) (how much of MPI's bandwidth the job gets).
 *
 * Bytes. A record of the job is, in a batch frame (docs/data-path.md), 16
 * bytes of lengths and key hash, its key "k<i mod K>" and its value i in
 * decimal: mh_record_bytes() sums that exactly over the N records (frame
 * headers, 16 bytes per frame of up to 16 KiB, left out). Each gen instance
 * makes every key about N/(2K) times and the count instances own disjoint
 * key sets, so half of the records (and of their bytes) cross hosts in (c).
 * (a) streams exactly that many bytes — "the same bytes": (c)'s share
 * across hosts — in 256 KiB messages.
 *
 * How (a) streams. A hidden subcommand of this program, `multihost-ping`,
 * runs under mpirun (one rank per CPU, MPMD so each pins itself). The
 * receiver keeps 8 receives pre-posted as the gateway does (persistent,
 * MPI_Recv_init/MPI_Start, in two banks of 4), the sender has at most 8
 * messages in flight: after sending bank b's 4 messages it sends the next
 * bank while the receiver acknowledges bank b with a small message once it
 * has reposted those receives (a double-buffered form of the OSU
 * micro-benchmarks' osu_bw window). Nothing lands in MPI's unexpected-message
 * queue. Each message carries its index in its first 8 bytes, checked in
 * order by the receiver, and the bytes received are counted. Rank 0 times
 * each pass from a barrier to the last acknowledgement; passes repeat for at
 * least 0.5 s (one with --quick), and the best pass is the result: one pass
 * of (c)'s few megabytes takes milliseconds, which one preemption on a
 * shared machine would dominate.
 *
 * How (b) and (c) are timed: as `shuffle` does, whole runs from fork/exec to
 * exit, with the marginal rate (N - 2) / (t(N) - t(2)), so start-up (and
 * mpirun's own, about a second) is left out; best of --reps. Every run's
 * output is checked as shuffle checks it. (c) pins its two workers to the
 * two CPUs with `--set job.cpus=C` per rank (MPMD); (b) with `cpus = A,B`.
 *
 * When (c) cannot run. A shmrun built without MPI (`shmrun --version` does
 * not say "mpi: on"), or one that refuses hosts = 2 in `shmrun check`, or
 * whose run says the gateway is not supported (or not built, or that the
 * launcher does not run multi-host jobs yet): with --quick this is one line
 * starting "# hosts: skipped:" and (a) and (b) are still measured (exit 0);
 * without --quick the same line, and exit 1. Any other failure of (c) is a
 * failure (exit 1) with the end of its log. No mpirun on PATH: exit 77 with
 * --quick (ctest: skipped), else 1.
 *
 * Rejected: timing (c) by its own "done in" line (no mpirun start-up, but no
 * marginal rate either, and it is the launcher's view of one host only);
 * MPI_Send/MPI_Recv in lock step for (a) (one message in flight is not what
 * the gateway does, and measures latency more than bandwidth).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <mpi.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"

#define MH_MSG_BYTES	 (256u << 10) /* the gateway's message size (runtime/gateway.c) */
#define MH_BANK		 4u /* receives per bank; two banks: 8 in flight, as the gateway */
#define MH_RUN_TIMEOUT_S 180.0
#define MH_ACK_TAG	 2
#define MH_DATA_TAG	 1

static const char mh_usage_text[] =
    "Usage: shmrun-bench multihost [--seconds S] [--reps N] [--keys N] [--keep DIR] [--quick] "
    "[-v]\n"
    "\n"
    "On one machine, with Open MPI over TCP loopback (mpirun -np 2 --oversubscribe\n"
    "--bind-to none --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo):\n"
    "  (a) mpi    rank 0 streams to rank 1 in 256 KiB messages (the gateway's size),\n"
    "             8 in flight, the bytes (c) moves across hosts;\n"
    "  (b) rings  sequence -> by key -> count (no combiner) -> file_sink on 2 workers\n"
    "             of one host: `shmrun topology.conf`;\n"
    "  (c) hosts  the same job with [job] hosts = 2, one worker per host, under mpirun.\n"
    "Records/s of (b) and (c) are marginal: (N - 2) / (t(N) - t(2)).\n"
    "\n"
    "  --seconds S  records per run: about S seconds' worth of (b) (default 1.5)\n"
    "  --reps N     repetitions, the best is reported (default 3)\n"
    "  --keys N     distinct keys (default 1024)\n"
    "  --keep DIR   write topologies, outputs and logs into DIR and keep them\n"
    "  --quick      tiny runs, one repetition: a smoke test (ctest); (c) is skipped\n"
    "               with a line when this shmrun cannot run hosts > 1\n"
    "  -v           print every run as a '#' line\n"
    "\n"
    "Output (bytes: the records' bytes in batch frames; MB = 10^6 bytes):\n"
    "  mpi msg_bytes=262144 bytes=B mb_s=F\n"
    "  rings workers=2 records=N mrec_s=F mb_s=F\n"
    "  hosts hosts=2 workers_per_host=1 records=N mrec_s=F mb_s=F cross_host_mb_s=F\n"
    "  ratio hosts_vs_rings=F cross_host_vs_mpi=F\n"
    "(c)'s lines are '-' when it was skipped.\n"
    "Exit status: 0 ok, 1 a run failed or its output is wrong (or (c) cannot run,\n"
    "without --quick), 2 usage error, 77 no mpirun (with --quick).\n";

/* ---- the MPI side: `shmrun-bench multihost-ping` under mpirun ------------- */

/* Pin this process to @cpu (-1: leave it). */
static void pin(int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

/* Messages of window @w (from 0) of a stream of @nmsg messages. */
static uint64_t window_len(uint64_t nmsg, uint64_t w)
{
	uint64_t first = w * MH_BANK;

	return nmsg - first < MH_BANK ? nmsg - first : MH_BANK;
}

static int ping_send(char *buf, uint64_t bytes, uint64_t nmsg, double *secs)
{
	uint64_t nwin = (nmsg + MH_BANK - 1) / MH_BANK;
	MPI_Request ack[2], send[MH_BANK * 2];
	char ackbuf[2][8];
	double t0;

	for (int b = 0; b < 2; b++)
		MPI_Recv_init(ackbuf[b], 8, MPI_BYTE, 1, MH_ACK_TAG + b, MPI_COMM_WORLD, &ack[b]);
	for (uint64_t i = 0; i < MH_BANK * 2; i++)
		send[i] = MPI_REQUEST_NULL;
	for (int b = 0; b < 2; b++)
		MPI_Start(&ack[b]);
	MPI_Barrier(MPI_COMM_WORLD); /* rank 1 has posted both banks */
	t0 = MPI_Wtime();
	for (uint64_t w = 0; w < nwin; w++) {
		unsigned b = (unsigned)(w % 2);
		uint64_t n = window_len(nmsg, w);

		if (w >= 2) { /* bank b's receives are posted again */
			MPI_Wait(&ack[b], MPI_STATUS_IGNORE);
			MPI_Waitall(MH_BANK, &send[b * MH_BANK], MPI_STATUSES_IGNORE);
			MPI_Start(&ack[b]);
		}
		for (uint64_t i = 0; i < n; i++) {
			uint64_t m = w * MH_BANK + i;
			int len = m + 1 < nmsg || bytes % MH_MSG_BYTES == 0
				      ? (int)MH_MSG_BYTES
				      : (int)(bytes % MH_MSG_BYTES);
			char *p = buf + (size_t)(b * MH_BANK + i) * MH_MSG_BYTES;

			memcpy(p, &m, sizeof(m)); /* only len bytes of it leave */
			MPI_Isend(p, len, MPI_BYTE, 1, MH_DATA_TAG, MPI_COMM_WORLD,
				  &send[b * MH_BANK + i]);
		}
	}
	/* the last (up to) two windows' acknowledgements: every byte arrived */
	for (uint64_t w = nwin >= 2 ? nwin - 2 : 0; w < nwin; w++)
		MPI_Wait(&ack[w % 2], MPI_STATUS_IGNORE);
	*secs = MPI_Wtime() - t0;
	MPI_Waitall(MH_BANK * 2, send, MPI_STATUSES_IGNORE);
	for (int b = 0; b < 2; b++) {
		/* the bank whose ack was not consumed again is still active */
		if (nwin < 2 && (uint64_t)b >= nwin) {
			MPI_Cancel(&ack[b]);
			MPI_Wait(&ack[b], MPI_STATUS_IGNORE);
		}
		MPI_Request_free(&ack[b]);
	}
	return 0;
}

static int ping_recv(char *buf, uint64_t bytes, uint64_t nmsg)
{
	uint64_t nwin = (nmsg + MH_BANK - 1) / MH_BANK, expect = 0, got = 0;
	MPI_Request rq[MH_BANK * 2];
	char ackbuf[8] = {0};
	int bad = 0;

	for (unsigned i = 0; i < MH_BANK * 2; i++)
		MPI_Recv_init(buf + (size_t)i * MH_MSG_BYTES, (int)MH_MSG_BYTES, MPI_BYTE, 0,
			      MH_DATA_TAG, MPI_COMM_WORLD, &rq[i]);
	MPI_Startall(MH_BANK * (nwin >= 2 ? 2 : 1), rq);
	MPI_Barrier(MPI_COMM_WORLD);
	for (uint64_t w = 0; w < nwin; w++) {
		unsigned b = (unsigned)(w % 2);
		uint64_t n = window_len(nmsg, w);

		/* a window shorter than a bank is the last: its other receives
		 * stay posted and are cancelled below */
		for (uint64_t i = 0; i < n; i++) {
			MPI_Status st;
			uint64_t m;
			int cnt = 0;

			MPI_Wait(&rq[b * MH_BANK + i], &st);
			MPI_Get_count(&st, MPI_BYTE, &cnt);
			got += (uint64_t)cnt;
			memcpy(&m, buf + (size_t)(b * MH_BANK + i) * MH_MSG_BYTES, sizeof(m));
			/* a last message shorter than the index carries part of it */
			if (cnt >= (int)sizeof(m) && m != expect)
				bad = 1;
			expect++;
		}
		if (w + 2 < nwin)
			MPI_Startall((int)window_len(nmsg, w + 2), &rq[b * MH_BANK]);
		MPI_Send(ackbuf, 8, MPI_BYTE, 0, MH_ACK_TAG + (int)b, MPI_COMM_WORLD);
	}
	for (unsigned i = 0; i < MH_BANK * 2; i++) {
		int active_done;
		MPI_Status st;

		/* still posted: a bank the stream did not fill */
		MPI_Test(&rq[i], &active_done, &st);
		if (!active_done) {
			MPI_Cancel(&rq[i]);
			MPI_Wait(&rq[i], MPI_STATUS_IGNORE);
		}
		MPI_Request_free(&rq[i]);
	}
	return bad || got != bytes;
}

/*
 * `shmrun-bench multihost-ping BYTES CPU MIN_SECONDS OUTFILE` (not in --help):
 * under mpirun -np 2, rank 0 streams BYTES to rank 1, again and again until
 * MIN_SECONDS have passed (at least once), each pass timed on its own; rank 0
 * writes "BYTES BEST_SECONDS PASSES\n" to OUTFILE. Exit 0, or 1 (wrong order,
 * content or length, a bad argument).
 */
int bench_multihost_ping_main(int argc, char **argv)
{
	uint64_t bytes, nmsg;
	int rank = -1, size = 0, cpu, bad = 0, more = 1, passes = 0;
	double best = 0, total = 0, min_secs;
	char *buf;

	if (argc != 5 || bench_parse_count(argv[1], UINT64_MAX / 2, &bytes)) {
		fprintf(stderr,
			"shmrun-bench multihost-ping: usage: BYTES CPU MIN_SECONDS OUTFILE\n");
		return BENCH_EXIT_USAGE;
	}
	cpu = atoi(argv[2]);
	min_secs = atof(argv[3]);
	pin(cpu);
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size != 2) {
		if (rank == 0)
			fprintf(stderr, "shmrun-bench multihost-ping: needs 2 ranks, has %d\n",
				size);
		MPI_Finalize();
		return BENCH_EXIT_FAIL;
	}
	nmsg = (bytes + MH_MSG_BYTES - 1) / MH_MSG_BYTES;
	if (nmsg == 0)
		nmsg = 1;
	buf = aligned_alloc(4096, (size_t)MH_BANK * 2 * MH_MSG_BYTES);
	if (!buf) {
		fprintf(stderr, "shmrun-bench multihost-ping: out of memory\n");
		MPI_Abort(MPI_COMM_WORLD, BENCH_EXIT_FAIL);
	}
	memset(buf, 0x5a, (size_t)MH_BANK * 2 * MH_MSG_BYTES);
	while (more && !bad) {
		double secs = 0;

		if (rank == 0) {
			ping_send(buf, bytes, nmsg, &secs);
			best = !passes || secs < best ? secs : best;
			total += secs;
			more = total < min_secs && passes + 1 < 100000;
		} else {
			bad = ping_recv(buf, bytes, nmsg);
		}
		passes++;
		MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
		MPI_Bcast(&more, 1, MPI_INT, 0, MPI_COMM_WORLD);
	}
	MPI_Finalize();
	free(buf);
	if (bad) {
		if (rank == 0)
			fprintf(stderr, "shmrun-bench multihost-ping: messages arrived out of "
					"order, damaged or not all of them\n");
		return BENCH_EXIT_FAIL;
	}
	if (rank == 0) {
		char line[96];

		snprintf(line, sizeof(line), "%" PRIu64 " %.9f %d\n", bytes, best, passes);
		if (bench_write_text(argv[4], line))
			return BENCH_EXIT_FAIL;
	}
	return 0;
}

/* ---- the bench side -------------------------------------------------------- */

struct mh {
	char dir[PATH_MAX];
	char shmrun[PATH_MAX]; /* the copy in dir */
	char mpirun[PATH_MAX];
	char self[PATH_MAX]; /* this program, for multihost-ping */
	uint64_t keys;
	int cpu[2];
	bool verbose;
};

/* The absolute path of @name on PATH into @buf. Return: 0, or -1 (not found). */
static int find_on_path(const char *name, char *buf, size_t len)
{
	const char *path = getenv("PATH");

	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		const char *colon = strchr(path, ':');
		size_t n = colon ? (size_t)(colon - path) : strlen(path);

		if (n && (size_t)snprintf(buf, len, "%.*s/%s", (int)n, path, name) < len &&
		    access(buf, X_OK) == 0)
			return 0;
		path += n + (colon ? 1 : 0);
	}
	return -1;
}

/* Decimal digits of @v. */
static unsigned digits(uint64_t v)
{
	unsigned d = 1;

	while (v >= 10) {
		v /= 10;
		d++;
	}
	return d;
}

/*
 * The bytes records 0..@n-1 of the sequence take in batch frames: per record
 * 8 bytes of lengths, 8 of key hash, key "k<i mod keys>", value i in decimal.
 */
static uint64_t mh_record_bytes(uint64_t n, uint64_t keys)
{
	uint64_t total = 0, lo = 0;

	/* values: by runs of equal digit counts */
	for (uint64_t p = 10, d = 1; lo<n; p = p> UINT64_MAX / 10 ? UINT64_MAX : p * 10, d++) {
		uint64_t hi = p < n ? p : n;

		total += (hi - lo) * (16 + d);
		lo = hi;
	}
	/* keys: n / keys full rounds of every key, then the first n % keys */
	for (uint64_t k = 0; k < keys && k < n; k++)
		total += (1 + digits(k)) * (n / keys + (k < n % keys));
	return total;
}

/* The job's conf for @n records as @dir/@name.conf, the shuffle job of
 * `shmrun-bench shuffle` (bench_shuffle_conf()); @hosts 1 or 2. */
static int mh_write_conf(const struct mh *m, const char *name, uint64_t n, unsigned hosts)
{
	char placement[64];

	if (hosts > 1) /* cpus per rank: --set job.cpus=C (mh_run_hosts) */
		snprintf(placement, sizeof(placement), "hosts = %u\n", hosts);
	else
		snprintf(placement, sizeof(placement), "cpus = %d,%d\n", m->cpu[0], m->cpu[1]);
	return bench_shuffle_conf(m->dir, name, "multihost", "mh", placement, n, m->keys);
}

/*
 * The command line mpirun @m->mpirun GLOBAL -np 1 RANK0... : -np 1 RANK1...
 * into @argv (NULL-terminated, at most 63 words): the transport settings once,
 * then one app context per rank (MPMD), so each rank gets its own words.
 */
static void mpmd(const struct mh *m, char **argv, char *const rank[2][8])
{
	static const char *const global[] = {
	    "--oversubscribe",
	    "--bind-to",
	    "none",
	    "--mca",
	    "pml",
	    "ob1",
	    "--mca",
	    "btl",
	    "tcp,self",
	    "--mca",
	    "btl_tcp_if_include",
	    "lo",
	};
	int n = 0;

	argv[n++] = (char *)m->mpirun;
	for (size_t i = 0; i < sizeof(global) / sizeof(global[0]); i++)
		argv[n++] = (char *)global[i];
	for (int h = 0; h < 2; h++) {
		if (h)
			argv[n++] = (char *)":";
		argv[n++] = (char *)"-np";
		argv[n++] = (char *)"1";
		for (int i = 0; rank[h][i]; i++)
			argv[n++] = rank[h][i];
	}
	argv[n] = NULL;
}

/* The line of the log in which a run refused hosts > 1 (mh_run_hosts()). */
static char mh_refusal[400];

/*
 * Run (c)'s @name under mpirun: rank h is `shmrun --set job.cpus=C_h
 * --log-level info conf` (MPMD). Its time in *@secs. Return: 0; -1 failed
 * (said why, with the log's end); 1 this shmrun cannot run hosts > 1 (the
 * log says the gateway is not supported; that line in mh_refusal).
 */
static int mh_run_hosts(const struct mh *m, const char *name, double *secs)
{
	char conf[PATH_MAX], log[PATH_MAX], set[2][32], *argv[64], *rank[2][8], *text = NULL;
	size_t len;

	if (bench_pathf(conf, sizeof(conf), "%s/%s.conf", m->dir, name) ||
	    bench_pathf(log, sizeof(log), "%s/%s.log", m->dir, name))
		return -1;
	for (int h = 0; h < 2; h++) {
		snprintf(set[h], sizeof(set[h]), "job.cpus=%d", m->cpu[h]);
		rank[h][0] = (char *)m->shmrun;
		rank[h][1] = (char *)"--set";
		rank[h][2] = set[h];
		rank[h][3] = (char *)"--log-level";
		rank[h][4] = (char *)"info";
		rank[h][5] = conf;
		rank[h][6] = NULL;
	}
	mpmd(m, argv, rank);
	/* its log's end is printed below, unless it is a refusal */
	if (!bench_job_run(m->mpirun, argv, log, MH_RUN_TIMEOUT_S, false, secs))
		return 0;
	/* the words of the refusals a shmrun without a working gateway gives:
	 * -ENOTSUP's, the stub gateway's, a launcher before multi-host runs */
	if (!bench_read_text(log, &text, &len)) {
		static const char *const refusals[] = {"not supported", "without MPI",
						       "gateway is not built",
						       "does not run multi-host"};

		for (size_t i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++) {
			char *hit = strstr(text, refusals[i]), *b, *e;

			if (!hit)
				continue;
			for (b = hit; b > text && b[-1] != '\n'; b--)
				;
			e = strchr(hit, '\n');
			snprintf(mh_refusal, sizeof(mh_refusal), "%.*s",
				 (int)(e ? e - b : (ptrdiff_t)strlen(b)), b);
			free(text);
			return 1;
		}
	}
	free(text);
	bench_print_tail(log, 30);
	return -1;
}

/* One verified run of @n records on @hosts hosts; its time in *@secs. As mh_run_hosts(). */
static int mh_run(const struct mh *m, const char *name, unsigned hosts, uint64_t n, double *secs)
{
	int rc;

	if (mh_write_conf(m, name, n, hosts))
		return -1;
	rc = hosts > 1 ? mh_run_hosts(m, name, secs)
		       : bench_run_conf(m->shmrun, m->dir, name, MH_RUN_TIMEOUT_S, secs);
	if (rc)
		return rc;
	return bench_shuffle_verify(m->dir, name, n, m->keys);
}

/*
 * (a): stream @bytes from rank 0 to rank 1 under mpirun, passes for at least
 * @min_secs (a string: "0.5"). Return: bytes/s of the best pass, or -1.
 */
static double mh_ping(const struct mh *m, uint64_t bytes, const char *min_secs)
{
	char out[PATH_MAX], log[PATH_MAX], nbytes[32], cpu[2][16], *argv[64], *rank[2][8];
	char *text = NULL;
	unsigned long long b;
	double secs;
	size_t len;
	int passes = 0;

	if (bench_pathf(out, sizeof(out), "%s/ping.out", m->dir) ||
	    bench_pathf(log, sizeof(log), "%s/ping.log", m->dir))
		return -1;
	unlink(out);
	snprintf(nbytes, sizeof(nbytes), "%" PRIu64, bytes);
	for (int h = 0; h < 2; h++) {
		snprintf(cpu[h], sizeof(cpu[h]), "%d", m->cpu[h]);
		rank[h][0] = (char *)m->self;
		rank[h][1] = (char *)"multihost-ping";
		rank[h][2] = nbytes;
		rank[h][3] = cpu[h];
		rank[h][4] = (char *)min_secs;
		rank[h][5] = out;
		rank[h][6] = NULL;
	}
	mpmd(m, argv, rank);
	if (bench_job_run(m->mpirun, argv, log, MH_RUN_TIMEOUT_S, true, NULL))
		return -1;
	if (bench_read_text(out, &text, &len))
		return -1;
	if (sscanf(text, "%llu %lf %d", &b, &secs, &passes) != 3 || b != bytes || !(secs > 0)) {
		fprintf(stderr, "shmrun-bench: %s: not 'BYTES SECONDS PASSES': %s\n", out, text);
		free(text);
		return -1;
	}
	free(text);
	if (m->verbose)
		printf("# mpi: best of %d passes of %" PRIu64 " bytes: %.6f s\n", passes, bytes,
		       secs);
	return (double)bytes / secs;
}

/*
 * Whether this shmrun can run hosts = 2: its --version says "mpi: on" and
 * `shmrun check` takes the conf with hosts = 2. Return: true, or false with
 * the reason in @why.
 */
static bool mh_hosts_supported(const struct mh *m, char *why, size_t len)
{
	char log[PATH_MAX], conf[PATH_MAX], *text = NULL, *argv[8];
	size_t n;

	if (bench_pathf(log, sizeof(log), "%s/version.log", m->dir) ||
	    bench_pathf(conf, sizeof(conf), "%s/probe.conf", m->dir))
		return false;
	/* --version prints to stdout, which bench_job_start() discards: a shell
	 * puts it into the log */
	{
		char cmd[PATH_MAX + 16];

		snprintf(cmd, sizeof(cmd), "\"$0\" --version >&2");
		argv[0] = (char *)"/bin/sh";
		argv[1] = (char *)"-c";
		argv[2] = cmd;
		argv[3] = (char *)m->shmrun;
		argv[4] = NULL;
		if (bench_job_run("/bin/sh", argv, log, 60, true, NULL) ||
		    bench_read_text(log, &text, &n))
			return snprintf(why, len, "shmrun --version failed"), false;
		if (!strstr(text, "\nmpi: on\n")) {
			snprintf(why, len,
				 "this shmrun is built without MPI (--version does not say "
				 "'mpi: on')");
			free(text);
			return false;
		}
		free(text);
		text = NULL;
	}
	if (mh_write_conf(m, "probe", 2, 2))
		return snprintf(why, len, "cannot write a conf"), false;
	if (bench_pathf(log, sizeof(log), "%s/probe.log", m->dir))
		return false;
	argv[0] = (char *)m->shmrun;
	argv[1] = (char *)"check";
	argv[2] = conf;
	argv[3] = NULL;
	if (bench_job_run(m->shmrun, argv, log, 60, false, NULL)) {
		char *nl;

		if (!bench_read_text(log, &text, &n) && (nl = strchr(text, '\n')))
			*nl = '\0';
		snprintf(why, len, "shmrun check refuses hosts = 2: %s", text ? text : "?");
		free(text);
		return false;
	}
	return true;
}

int bench_multihost_main(int argc, char **argv)
{
	struct bench_opts o = {.cpu = {0, 1}};
	struct mh m = {.keys = 1024};
	struct bench_common co = {0};
	char built[PATH_MAX], why[512] = "";
	double seconds = 1.5, rings = 0, hosts = 0, mpi = 0, fixed1 = 0, fixed2 = 0, t;
	uint64_t reps, n, bytes, cross;
	bool made_dir = false, run_hosts = true;
	ssize_t sl;
	int c, rc = BENCH_EXIT_FAIL;

	c = bench_parse_seconds_keys(argc, argv, "multihost", mh_usage_text, true, &seconds, &co);
	if (c != BENCH_OPT_DONE)
		return c;
	if (co.keys)
		m.keys = co.keys;
	m.verbose = co.verbose;
	reps = co.reps ? co.reps : co.quick ? 1 : 3;

	if (find_on_path("mpirun", m.mpirun, sizeof(m.mpirun))) {
		fprintf(stderr, "shmrun-bench: multihost: no mpirun on PATH (apt-get install "
				"openmpi-bin; tools/bootstrap.sh does)\n");
		return co.quick ? 77 : BENCH_EXIT_FAIL;
	}
	sl = readlink("/proc/self/exe", m.self, sizeof(m.self) - 1);
	if (sl < 0) {
		fprintf(stderr, "shmrun-bench: readlink /proc/self/exe: %s\n", strerror(errno));
		return BENCH_EXIT_FAIL;
	}
	m.self[sl] = '\0';
	rc = bench_prepare_run(&o, built, sizeof(built));
	if (rc)
		return rc;
	rc = BENCH_EXIT_FAIL;
	m.cpu[0] = o.cpu[0];
	m.cpu[1] = o.cpu[1];
	if (m.cpu[0] < 0 || m.cpu[1] < 0 || m.cpu[0] == m.cpu[1]) {
		fprintf(stderr, "shmrun-bench: multihost needs two CPUs\n");
		return BENCH_EXIT_FAIL;
	}
	/* mpirun refuses root without both (docs/multihost.md) */
	setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
	setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
	bench_catch_signals();
	if (bench_open_workdir(co.keep, "multihost", m.dir, sizeof(m.dir), &made_dir))
		return BENCH_EXIT_FAIL;
	if (bench_shmrun_copy(built, m.dir, m.shmrun, sizeof(m.shmrun)))
		goto out;
	/* Open MPI's session directories (TMPDIR/ompi.HOST.UID/): in the work
	 * directory, removed with it; a killed mpirun leaves its own behind */
	if (setenv("TMPDIR", m.dir, 1)) {
		fprintf(stderr, "shmrun-bench: setenv TMPDIR: %s\n", strerror(errno));
		goto out;
	}
	bench_print_loadavg("at start");
	printf("# shmrun: %s (runs from a copy in %s); mpirun: %s; CPUs %d,%d\n", built, m.dir,
	       m.mpirun, m.cpu[0], m.cpu[1]);
	printf("# transport: --oversubscribe --bind-to none --mca pml ob1 --mca btl tcp,self "
	       "--mca btl_tcp_if_include lo\n");
	run_hosts = mh_hosts_supported(&m, why, sizeof(why));
	if (!run_hosts)
		printf("# hosts: skipped: %s\n", why);

	/* Calibration: the fixed costs, then N from (b)'s rate. */
	if (mh_run(&m, "fixed1", 1, 2, &fixed1))
		goto out;
	n = co.quick ? 100000 : 2000000;
	if (mh_run(&m, "calibrate", 1, n, &t))
		goto out;
	if (!co.quick)
		n = bench_calibrated_records(n, t, fixed1, seconds);
	bytes = mh_record_bytes(n, m.keys);
	cross = bytes / 2;
	printf("# %" PRIu64 " records per run (%" PRIu64 " bytes in batch frames, %" PRIu64
	       " of them across hosts in (c)), %" PRIu64 " keys, best of %" PRIu64 " reps\n",
	       n, bytes, cross, m.keys, reps);
	fflush(stdout);

	for (uint64_t r = 0; r < reps; r++) {
		double secs, rate, fx;
		int hr;

		if (bench_interrupted())
			goto out;
		/* (b) */
		if (mh_run(&m, "fixed1", 1, 2, &fx))
			goto out;
		fixed1 = fx < fixed1 ? fx : fixed1;
		if (mh_run(&m, "rings", 1, n, &secs))
			goto out;
		rate = bench_marginal_rate(n, secs, fixed1);
		rings = rate > rings ? rate : rings;
		if (m.verbose)
			printf("# rep %" PRIu64 ": rings %.3f s (fixed %.3f s) %.3f Mrec/s\n",
			       r + 1, secs, fx, rate / 1e6);
		/* (c) */
		if (run_hosts) {
			hr = mh_run(&m, "fixed2", 2, 2, &fx);
			if (!hr) {
				fixed2 = !fixed2 || fx < fixed2 ? fx : fixed2;
				hr = mh_run(&m, "hosts", 2, n, &secs);
			}
			if (hr > 0) {
				snprintf(why, sizeof(why), "the run refuses hosts > 1: %s",
					 mh_refusal);
				printf("# hosts: skipped: %s\n", why);
				run_hosts = false;
			} else if (hr < 0) {
				fprintf(stderr,
					"shmrun-bench: multihost: (c), the job with hosts = 2 "
					"under mpirun, failed (above)\n");
				goto out;
			} else {
				rate = bench_marginal_rate(n, secs, fixed2);
				hosts = rate > hosts ? rate : hosts;
				if (m.verbose)
					printf("# rep %" PRIu64
					       ": hosts %.3f s (fixed %.3f s) %.3f "
					       "Mrec/s\n",
					       r + 1, secs, fx, rate / 1e6);
			}
		}
		/* (a) */
		rate = mh_ping(&m, cross, co.quick ? "0" : "0.5");
		if (rate < 0)
			goto out;
		mpi = rate > mpi ? rate : mpi;
		if (m.verbose)
			printf("# rep %" PRIu64 ": mpi %.1f MB/s\n", r + 1, rate / 1e6);
		fflush(stdout);
	}
	printf("# every run's output matched: %" PRIu64 " keys, counts summing to the records\n",
	       m.keys < n ? m.keys : n);
	printf("# fixed cost (a 2-record run): rings %.3f s, hosts %.3f s (mpirun included)\n",
	       fixed1, fixed2);
	printf("mpi msg_bytes=%u bytes=%" PRIu64 " mb_s=%.1f\n", MH_MSG_BYTES, cross, mpi / 1e6);
	printf("rings workers=2 records=%" PRIu64 " mrec_s=%.3f mb_s=%.1f\n", n, rings / 1e6,
	       rings * (double)bytes / (double)n / 1e6);
	if (run_hosts && hosts > 0) {
		double mb = hosts * (double)bytes / (double)n / 1e6;

		printf("hosts hosts=2 workers_per_host=1 records=%" PRIu64
		       " mrec_s=%.3f mb_s=%.1f cross_host_mb_s=%.1f\n",
		       n, hosts / 1e6, mb, mb / 2);
		printf("ratio hosts_vs_rings=%.3f cross_host_vs_mpi=%.3f\n", hosts / rings,
		       mpi > 0 ? mb / 2 / (mpi / 1e6) : 0.0);
	} else {
		printf("hosts hosts=2 workers_per_host=1 records=%" PRIu64
		       " mrec_s=- mb_s=- cross_host_mb_s=-\n",
		       n);
		printf("ratio hosts_vs_rings=- cross_host_vs_mpi=-\n");
		printf("# hosts: skipped: %s\n", why);
	}
	bench_print_loadavg("at end");
	rc = run_hosts || co.quick ? 0 : BENCH_EXIT_FAIL;
out:
	return bench_finish(rc, m.dir, made_dir, co.keep);
}
