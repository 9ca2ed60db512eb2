/*
 * tools/bench/bench.h: what the shmrun-bench sources share.
 *
 * bench.c owns main() and option parsing, and calls the subcommands;
 * bench_util.c owns the process plumbing every subcommand needs (pinning,
 * forking two measured processes and reaping them on every path, the shared
 * control block, timestamps, percentiles, spinning); bench_ring.c holds the
 * ring and pingpong subcommands, bench_wordcount.c, bench_checkpoint.c,
 * bench_shuffle.c, bench_latency.c, bench_nexmark.c and bench_multihost.c
 * theirs; bench_job.c the helpers that run the shmrun CLI, time whole runs
 * (marginal rates) and end a subcommand; bench.c also the option parsing the
 * CLI-driving subcommands share; bench_shuffle.c also the shuffle job (conf,
 * check of its output), which multihost runs too. Only public shmrun headers
 * are used.
 */
#ifndef SHMRUN_TOOLS_BENCH_H
#define SHMRUN_TOOLS_BENCH_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "shmrun/ring.h"

/* Exit codes: 0 ok, 1 the benchmark failed (checksum, ring error, child
 * died), 2 usage error. */
#define BENCH_EXIT_FAIL	 1
#define BENCH_EXIT_USAGE 2

#define BENCH_MAX_SIZES 16

/* Options of one invocation; defaults set by bench.c per subcommand. */
struct bench_opts {
	uint64_t ring_bytes;		 /* ring capacity, bytes (power of two) */
	double seconds;			 /* timed part of one throughput measurement */
	uint64_t records;		 /* if non-zero, timed records per measurement instead */
	uint64_t iters;			 /* pingpong round trips per measurement */
	unsigned reps;			 /* repetitions; the best is reported */
	uint64_t batch;			 /* shmrun_ring_set_batch() bytes, 0 = ring default */
	enum shmrun_idle idle;		 /* idle strategy on the ring's wait paths */
	int cpu[2];			 /* CPUs of the two measured processes, -1 = unpinned */
	uint32_t sizes[BENCH_MAX_SIZES]; /* ring: payload bytes per record, each case */
	unsigned nsizes;
	bool quick;   /* tiny volumes, verify checksums, for ctest */
	bool verbose; /* print every measurement as a '#' line */
};

/*
 * Control block shared by the parent and its two measured children, mapped
 * MAP_SHARED before fork. The children meet at a start barrier (ready) so
 * neither measures the other's start-up; results are written by the children
 * before they exit and read by the parent after it has reaped them (the
 * exit/wait pair orders them).
 */
struct bench_ctl {
	alignas(SHMRUN_CACHELINE) _Atomic uint32_t ready; /* children past attach */
	/* results, written by the children */
	alignas(SHMRUN_CACHELINE) uint64_t sent; /* records the producer sent */
	uint64_t sent_sum;			 /* sum of every payload word sent */
	uint64_t recv;				 /* records the consumer read */
	uint64_t recv_sum;			 /* sum of every payload word read */
	uint64_t timed;				 /* records inside the timed window */
	int64_t timed_ns;			 /* length of the timed window */
	uint64_t p50_ns, p99_ns, p999_ns;	 /* pingpong percentiles */
	uint64_t waits[2];			 /* ring: wait_writable / wait_readable calls */
};

/* A child's work: returns 0 or an exit code; runs pinned to its CPU. */
typedef int (*bench_child_fn)(int side, void *arg);

/*
 * bench_run_pair() - fork two children running @fn(0, @arg) and @fn(1, @arg),
 * pinned to opts->cpu[0] and opts->cpu[1], and reap both.
 *
 * Each child dies with the parent (PR_SET_PDEATHSIG). If a child fails or
 * @timeout_s passes, the other is killed; both are always reaped.
 *
 * Return: 0 if both exited 0; -1 otherwise (the reason has been printed).
 */
int bench_run_pair(const struct bench_opts *opts, struct bench_ctl *ctl, bench_child_fn fn,
		   void *arg, double timeout_s);

/* bench_barrier() - a child's start barrier: wait until both children reach it. */
int bench_barrier(struct bench_ctl *ctl);

/* Shared anonymous memory (MAP_SHARED, inherited across fork), page aligned. */
void *bench_map_shared(size_t bytes);
void bench_unmap_shared(void *mem, size_t bytes);

/* CLOCK_MONOTONIC, nanoseconds. */
int64_t bench_now_ns(void);

/*
 * Cheap timestamps for per-round-trip timing: the TSC on x86-64 (serialised
 * with rdtscp + lfence, calibrated against CLOCK_MONOTONIC by bench_ts_init()),
 * CLOCK_MONOTONIC elsewhere. bench_ts_to_ns() converts a difference.
 */
void bench_ts_init(void);
uint64_t bench_ts(void);
uint64_t bench_ts_to_ns(uint64_t ticks);

/* Sort @n values ascending; then the @q-quantile (0 < q <= 1, nearest rank). */
void bench_sort_u64(uint64_t *v, size_t n);
uint64_t bench_percentile_sorted(const uint64_t *v, size_t n, double q);

/*
 * Spin-wait bookkeeping for the hand-written reference loops and the start
 * barrier: bench_spin() pauses once, and every 4096 calls checks the deadline
 * (every 16, yielding the CPU, when both children share one CPU).
 */
struct bench_spin {
	uint32_t n;
	int64_t deadline; /* CLOCK_MONOTONIC ns */
};

/* Set when the two children share a CPU (one CPU online): spinners yield. */
extern bool bench_shared_cpu;

static inline void bench_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

void bench_spin_start(struct bench_spin *s, int64_t timeout_ns);
/* Return: 0 to keep spinning, -ETIMEDOUT once the deadline has passed. */
int bench_spin_slow(struct bench_spin *s);

static inline int bench_spin(struct bench_spin *s)
{
	bench_relax();
	if (++s->n % (bench_shared_cpu ? 16 : 4096))
		return 0;
	return bench_spin_slow(s);
}

/* The subcommands: return an exit code. */
int bench_ring_main(const struct bench_opts *opts);
int bench_pingpong_main(const struct bench_opts *opts);

/*
 * bench_ideal_rate() - one measurement of the ring subcommand's ideal SPSC
 * loop (Lamport slots, bench_ring.c) moving @len-byte records (a multiple of
 * 8) between two processes pinned to opts->cpu[]: opts->ring_bytes of slots,
 * warmed by two passes, then opts->seconds (or opts->records records) timed.
 * Return: records per second, or -1 after printing why.
 */
double bench_ideal_rate(const struct bench_opts *opts, uint32_t len);

/*
 * bench_pingpong_rtt() - one measurement of the pingpong subcommand: 32-byte
 * round trips through two shmrun rings (@ideal false, waiting with
 * opts->idle) or through one bare cache line (@ideal true), opts->iters of
 * them after a warm-up, on opts->cpu[]. Fills @pct with the p50, p99 and
 * p99.9 round trip in ns. Return: 0, or -1 after printing why.
 */
int bench_pingpong_rtt(const struct bench_opts *opts, bool ideal, uint64_t pct[3]);

/*
 * bench_choose_cpus() - the pinning main() chooses without --cpus (bench.c):
 * CPUs 0 and 1 if allowed, else the first two allowed, else unpinned (one
 * CPU: sets bench_shared_cpu and hybrid waits). Return: 0, or an exit code.
 */
int bench_choose_cpus(struct bench_opts *o);

/*
 * shuffle and latency run the shmrun CLI and parse their own options, like
 * wordcount (bench_shuffle.c, bench_latency.c). Return an exit code.
 */
int bench_shuffle_main(int argc, char **argv);
int bench_latency_main(int argc, char **argv);
/* nexmark: the nexmark source against a C generator loop (bench_nexmark.c). */
int bench_nexmark_main(int argc, char **argv);

/*
 * multihost (bench_multihost.c, built with MPI only: SHMRUN_BENCH_MPI): the
 * subcommand, and its hidden MPI program `multihost-ping BYTES CPU OUTFILE`
 * that it runs under mpirun. Return an exit code.
 */
int bench_multihost_main(int argc, char **argv);
int bench_multihost_ping_main(int argc, char **argv);

/* Write @text (NUL-terminated) into @path, created or truncated.
 * Return: 0, or -1 after printing why. (bench_shuffle.c) */
int bench_write_text(const char *path, const char *text);

/*
 * bench_run_conf() - run `shmrun --log-level info @dir/@name.conf` with its
 * stderr in @dir/@name.log, stopped after @timeout_s seconds, and put its
 * wall-clock time (fork/exec to reaped exit) in *@secs, seconds.
 * Return: 0 if it exited 0; -1 after printing why and the log's end.
 * (bench_shuffle.c)
 */
int bench_run_conf(const char *shmrun, const char *dir, const char *name, double timeout_s,
		   double *secs);

/*
 * The shuffle job, which shuffle times on one host and multihost on one and
 * on two hosts (bench_shuffle.c): gen (sequence, width 2, @n records, @keys
 * keys) -> by key -> count (width 2, emit = final, no combiner) -> out
 * (file_sink into @dir/out-@name.tsv), idle = spin.
 *
 * bench_shuffle_conf() - write it as @dir/@name.conf; the job is named
 * bench-@jobtag-@name, the first comment line names subcommand @sub, and
 * @placement (whole lines, e.g. "workers = 2
" or "hosts = 2
") goes into
 * [job]. Return: 0, or -1 after printing why (path too long, write failed).
 *
 * bench_shuffle_verify() - check @dir/out-@name.tsv: min(@n, @keys) lines
 * "KEY	COUNT", counts summing to @n, each @n / @keys rounded down or up.
 * Return: 0, or -1 after printing what is wrong (or why it cannot be read).
 */
int bench_shuffle_conf(const char *dir, const char *name, const char *sub, const char *jobtag,
		       const char *placement, uint64_t n, uint64_t keys);
int bench_shuffle_verify(const char *dir, const char *name, uint64_t n, uint64_t keys);

/*
 * wordcount and checkpoint run the shmrun CLI and parse their own options:
 * @argc/@argv start at the subcommand's name. Return an exit code.
 * (bench_wordcount.c, bench_checkpoint.c)
 */
int bench_wordcount_main(int argc, char **argv);
int bench_checkpoint_main(int argc, char **argv);

/* ---- running the shmrun CLI (bench_wordcount.c) ---------------------------- */

/*
 * bench_catch_signals() - make SIGINT, SIGTERM and SIGHUP set a flag instead
 * of killing shmrun-bench, so a running job is stopped and reaped and the
 * temporary files are removed; bench_interrupted() reads the flag.
 */
void bench_catch_signals(void);
bool bench_interrupted(void);

/* The shmrun CLI next to this executable (/proc/self/exe) into @buf.
 * Return: 0, or -1 after printing why (not built, path too long). */
int bench_shmrun_path(char *buf, size_t len);

/*
 * bench_shmrun_copy() - copy the executable @exe into @dir (same name, mode
 * 0755) and put the copy's path into @buf: every run of a benchmark then runs
 * the same binary even if the build directory is rebuilt meanwhile (it is
 * shared). The libshmrun.so.0 it links is copied into @dir too, and
 * LD_LIBRARY_PATH set to @dir for every child (an installed shmrun's RUNPATH,
 * $ORIGIN/../lib, means nothing from @dir). Return: 0, or -1 after printing why.
 */
int bench_shmrun_copy(const char *exe, const char *dir, char *buf, size_t len);

/* mkdtemp() of @parent/shmrun-bench-@tag.XXXXXX into @buf. Return: 0 or -1 (printed). */
int bench_make_workdir(const char *parent, const char *tag, char *buf, size_t len);

/*
 * bench_open_workdir() - the directory a subcommand works in, into @buf:
 * @keep (created if missing, kept afterwards) when given, else a new
 * $TMPDIR (or /tmp)/shmrun-bench-@tag.XXXXXX, for which *@made is set (the
 * caller removes it). Return: 0 or -1 (printed).
 */
int bench_open_workdir(const char *keep, const char *tag, char *buf, size_t len, bool *made);

/* snprintf() into a path buffer. Return: 0, or -1 after printing that the
 * path would be too long. */
int bench_pathf(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Remove @path and everything under it (no symbolic link followed). */
void bench_rmtree(const char *path);

/* Read a whole file into a malloc'ed, NUL-terminated @text of @len bytes.
 * Return: 0, or -1 after printing why. */
int bench_read_text(const char *path, char **text, size_t *len);

/* One run of the shmrun CLI. */
struct bench_job {
	pid_t pid;
	int pidfd;	  /* -1 if pidfd_open() is unavailable */
	int64_t start_ns; /* CLOCK_MONOTONIC just before fork() */
	int64_t end_ns;	  /* CLOCK_MONOTONIC once it has been reaped */
	int status;	  /* waitpid() status */
};

/*
 * bench_job_start() - fork and exec @exe with @argv; stdin and stdout are
 * /dev/null, stderr goes to @log_path (created or truncated). The child gets
 * SIGTERM if shmrun-bench dies (PR_SET_PDEATHSIG), so the launcher still stops
 * its workers. Its XDG_RUNTIME_DIR is @log_path's directory: the job's socket
 * (jobsock.h) goes there, so a benchmark's job collides with no other job of
 * the same name. Return: 0, or -1 after printing why (nothing is left running).
 */
int bench_job_start(struct bench_job *job, const char *exe, char *const argv[],
		    const char *log_path);

/*
 * bench_job_wait() - wait until @job exits and reap it. Meanwhile, if @fd >= 0,
 * call @on_fd(@arg) whenever @fd is readable (and once more after the exit). At
 * @timeout_s after the start, or on bench_interrupted(), the job gets SIGTERM,
 * and SIGKILL 10 s later. Return: 0 if it exited 0 on its own; -1 otherwise,
 * after printing why and, if @log_path is given, the log's last lines.
 */
int bench_job_wait(struct bench_job *job, double timeout_s, int fd, void (*on_fd)(void *arg),
		   void *arg, const char *log_path);

/*
 * bench_job_run() - bench_job_start() then bench_job_wait() with no fd to
 * watch: run @exe with @argv, stderr into @log_path, stopped after
 * @timeout_s seconds. If @secs is not NULL it gets the wall-clock time from
 * fork/exec to the reaped exit, in seconds (set only on success). On failure
 * the log's last lines are printed if @tail_log, else left to the caller
 * (who may want to read the log first, see bench_print_tail()).
 * Return: 0 if it exited 0; -1 after printing why (nothing is left running).
 */
int bench_job_run(const char *exe, char *const argv[], const char *log_path, double timeout_s,
		  bool tail_log, double *secs);

/* Print the last @lines lines of the file @path to stderr, indented, under
 * a line naming it; nothing if it cannot be read. */
void bench_print_tail(const char *path, int lines);

/*
 * bench_prepare_run() - what a subcommand that pins the shmrun it runs does
 * first: the shmrun CLI next to this executable into @built (@len bytes,
 * bench_shmrun_path()), then the two CPUs into o->cpu (bench_choose_cpus()).
 * Return: 0, or an exit code after printing why (BENCH_EXIT_FAIL: no shmrun
 * built, or bench_choose_cpus()'s).
 */
int bench_prepare_run(struct bench_opts *o, char *built, size_t len);

/*
 * Marginal rates of whole timed runs (shuffle, latency, nexmark, multihost):
 * a run of @n records takes @secs seconds, one of 2 records of the same job
 * @fixed seconds (start-up and exit, paid by every run).
 *
 * bench_marginal_rate() - (@n - 2) / (@secs - @fixed) records per second;
 * (@n - 2) / @secs if @secs <= @fixed (a noisy run: never negative).
 *
 * bench_calibrated_records() - from a calibration run of @n records in @secs
 * seconds: how many records make a run of about @seconds seconds at its
 * marginal rate (@secs - @fixed taken as at least 1 ms), at least 100000.
 */
double bench_marginal_rate(uint64_t n, double secs, double fixed);
uint64_t bench_calibrated_records(uint64_t n, double secs, double fixed, double seconds);

/*
 * bench_finish() - the end of a CLI-driving subcommand, on every path: says
 * "interrupted" on stderr after a caught signal (and then returns
 * BENCH_EXIT_FAIL whatever @rc is), removes the work directory @dir if
 * @made_dir (bench_open_workdir() made it), else prints "# kept: @dir" if
 * @keep (--keep was given); flushes stdout.
 * Return: the exit code, @rc or BENCH_EXIT_FAIL.
 */
int bench_finish(int rc, const char *dir, bool made_dir, const char *keep);

/* A usage error of subcommand @sub: message, a --help hint; returns BENCH_EXIT_USAGE. */
int bench_usage_error(const char *sub, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Write all @n bytes at @p to @fd (EINTR retried). Return: 0 or -errno. */
int bench_write_all(int fd, const char *p, size_t n);

/* A count from 1 to @max, digits only. Return: 0, or -1. */
int bench_parse_count(const char *s, uint64_t max, uint64_t *out);

/* The options the CLI-driving subcommands share (shuffle, latency, nexmark,
 * multihost). */
struct bench_common {
	uint64_t reps;	  /* --reps N (1..100); 0 when not given */
	uint64_t keys;	  /* --keys N (1..16M), where the subcommand has it; 0 when not given */
	const char *keep; /* --keep DIR, or NULL */
	bool quick, verbose;
};
#define BENCH_OPT_DONE (-2) /* taken into @co: go on parsing */

/* getopt_long() entries of the shared options, for a subcommand's table. */
/* clang-format off */
#define BENCH_COMMON_LONGOPTS                                                        \
	{"reps", required_argument, NULL, 'r'}, {"keep", required_argument, NULL, 'k'}, \
	{"quick", no_argument, NULL, 'q'}, {"verbose", no_argument, NULL, 'v'},         \
	{"help", no_argument, NULL, 'h'}
/* clang-format on */

/*
 * bench_common_option() - take getopt_long()'s @c for subcommand @sub: a
 * shared option, 'r' (--reps), 'K' (--keys), 'k' (--keep), 'q', 'v', 'h'
 * (prints @usage); or ':' (a missing value), '?' or any other (an unknown
 * option, named from @argv).
 * Return: BENCH_OPT_DONE, or an exit code to return (0 after --help,
 * BENCH_EXIT_USAGE after a usage error, which it has printed).
 */
int bench_common_option(int c, const char *sub, const char *usage, char **argv,
			struct bench_common *co);

/*
 * bench_seconds_option() - parse the value @arg of subcommand @sub's
 * --seconds into *@secs, seconds: a number > 0, >= @min (0: no bound but
 * > 0) and <= @max. Return: BENCH_OPT_DONE (taken), or BENCH_EXIT_USAGE
 * after printing the range; so a getopt loop treats it as bench_common_option().
 */
int bench_seconds_option(const char *sub, const char *arg, double min, double max, double *secs);

/*
 * bench_parse_seconds_keys() - parse the whole command line of subcommand
 * @sub (@argv[0] is its name) when its only options of its own are
 * --seconds S (into *@secs, seconds, in (0, 60]; untouched if not given)
 * and, if @keys, --keys N (into co->keys): the shared ones go into @co,
 * --help prints @usage, and no operand is taken (shuffle, latency,
 * multihost). Return: BENCH_OPT_DONE to go on, or an exit code to return
 * (0 after --help, BENCH_EXIT_USAGE after a usage error, which it printed).
 */
int bench_parse_seconds_keys(int argc, char **argv, const char *sub, const char *usage, bool keys,
			     double *secs, struct bench_common *co);

/* A '#' line with /proc/loadavg, tagged @when ("start", "end"). */
void bench_print_loadavg(const char *when);

#endif /* SHMRUN_TOOLS_BENCH_H */
