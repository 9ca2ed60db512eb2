/*
 * runtime/stress.c: `shmrun stress [options] topology.conf`, fault-injection
 * runs that check a topology's exactly-once promise, built to be a yes-or-no
 * step of a CI pipeline (docs/stress.md).
 *
 * What it does. It runs the job once without faults (the golden run, run-0;
 * or takes the golden output from --expect DIR) and measures its duration
 * T0. Then it runs the job again N times (--runs, or for --duration) while
 * injecting faults from a seeded schedule, and compares, for every output
 * file key of every stage, the lines of the faulted run with the golden run's
 * as a multiset (and in order where the topology promises an order). Exit 0
 * only when every run matched.
 *
 * Each run is a child process: an exec of /proc/self/exe (this shmrun) with
 * the user's topology and --set overrides (conf.c shmrun_job_load_set()):
 *
 *     job.name=<name>-stress-<pid>        its own job socket: a running job
 *                                         of the user's name is not touched
 *     job.checkpoint_dir=WORK/run-K/ckpt  always: recovery needs it
 *     <stage>.<key>=WORK/run-K/out/<stage>.<key>/<basename>
 *                                         every output path (param io
 *                                         SHMRUN_PARAM_OUTPUT), so the user's
 *                                         outputs and checkpoints are never
 *                                         written
 *
 * in its own process group, output into WORK/run-K/log. WORK is --workdir or
 * a fresh mkdtemp() directory, removed when every run matched (unless --keep).
 *
 * The schedule. A splitmix64 generator (Steele, Lea and Flood, "Fast
 * splittable pseudorandom number generators", OOPSLA 2014; the constants of
 * Vigna's public-domain reference, prng.di.unimi.it) seeded with the run's
 * seed draws, for each fault, its time as a fraction of T0 in [5%, 90%], its
 * kind, a worker index, a stop length (50-500 ms) and rescale targets
 * (workers 1..2x, a width 1..2x per non-sink stage). Every value is drawn for
 * every fault whatever its kind, so a schedule depends only on the seed, the
 * fault count, the kinds and the topology's widths, and --print-schedule
 * shows it without running anything. Run k (1-based) uses seed S + k - 1, so
 * `--seed S+k-1 --runs 1` repeats run k alone.
 *
 * The faults.
 *   kill     SIGKILL of a worker: its pid from the job's metrics block
 *            (jobsock_metrics_fd(), the worker table: exact, by index), or,
 *            with SHMRUN_COUNTERS=off, from /proc/<launcher>/task/<launcher>/
 *            children; a pid is checked to be the launcher's child before
 *            the signal. The launcher restarts from the last checkpoint.
 *   stop     SIGSTOP of a worker, the stop length, SIGCONT.
 *   term     SIGTERM to the launcher (a final checkpoint, exit 0), then the
 *            same command again: it resumes from the newest checkpoint.
 *   rescale  as term, then `shmrun --rescale` with a changed job.workers and
 *            widths, validated first by `shmrun check --rescale` with the same
 *            overrides; refused: workers only; refused again: a plain resume.
 *   damage   as term, then one byte of a state file of the newest complete
 *            checkpoint is flipped (when there is an older one): the restore
 *            must skip it and fall back (docs/checkpoints.md "Restore").
 * A fault due after the job ended is reported as not injected.
 *
 * Invariants.
 *   - No child outlives stress: each run's launcher leads its own process
 *     group, killed (SIGKILL) on a timeout, a signal to stress or an error,
 *     and waited for until the group is empty.
 *   - The user's outputs and checkpoint_dir are never opened.
 *   - Same seed, same topology, same options: the same schedule.
 *
 * Rejected designs.
 *   - Faults at absolute times: a schedule would mean nothing on a machine
 *     twice as slow; fractions of T0 scale with it.
 *   - Running the job in this process (shmrun_run()): a fault that kills the
 *     launcher would kill stress, and the launcher's signal handling is the
 *     thing under test.
 *   - Comparing only record counts: a duplicated record and a lost one would
 *     cancel out; the multiset of lines cannot.
 *   - Finding workers with `pgrep -P`: it cannot tell a worker's index, and a
 *     pid reused meanwhile would be killed; the metrics block names them.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "jobsock.h"
#include "metrics.h"
#include "shmrun/job.h"
#include "shmrun/runtime.h"
#include "util.h"

#define MAX_SETS     256
#define MAX_PLUGINS  64
#define MAX_FAULTS   1000
#define TAIL_LINES   20
#define DIFF_SHOW    5
#define MAX_DURATION_S (365ull * 86400) /* --duration, --timeout */

enum fault_kind { F_KILL, F_STOP, F_TERM, F_RESCALE, F_DAMAGE, F_NKINDS };
static const char *const kind_names[F_NKINDS] = {"kill", "stop", "term", "rescale", "damage"};

/* One fault of a schedule: drawn (top), then what happened (below). */
struct fault {
	uint32_t permille; /* time as a fraction of T0, 50..900 */
	enum fault_kind kind;
	uint32_t worker;   /* index, taken modulo the workers running */
	uint32_t stop_ms;  /* stop: SIGSTOP to SIGCONT */
	uint32_t workers;  /* rescale: job.workers */
	uint32_t *widths;  /* rescale: per stage (0: keep; sinks and sources keep) */
	uint64_t pick;     /* damage: which state file and byte */

	bool injected;
	enum fault_kind done; /* what was done: a damage with nothing to fall back to is a term */
	double at_s;       /* seconds since the run started */
	pid_t pid;
	char note[256];    /* what was done, for the report */
};

/* The lines of one output (all its instance files), sorted. */
struct lines {
	char *buf;
	size_t len;
	const char **v;
	size_t *n;     /* lengths, parallel to v */
	size_t count;
	const char **ordered; /* file order, width-1 outputs only */
	size_t *ordered_n;
};

/* One output file key of one stage, relocated into the work dir. */
struct output {
	uint32_t stage;
	const char *key;
	char *base;     /* basename of the user's path */
	bool ordered;   /* order is promised: the stage and all upstream width 1 */
	struct lines golden;
};

struct stress {
	/* options */
	const char *conf, *workdir_opt, *expect, *junit, *log_level;
	const char *sets[MAX_SETS], *plugins[MAX_PLUGINS];
	uint32_t nsets, nplugins;
	uint32_t runs, faults;
	int64_t duration_ns, timeout_ns;
	uint64_t seed;
	bool seed_given, keep, print_schedule, runs_given;
	bool kinds[F_NKINDS];

	/* the topology */
	struct shmrun_job job;
	char name[65];
	struct output *outs;
	uint32_t nouts;

	/* the work */
	char work[PATH_MAX];
	bool work_made;
	int64_t t0_ns;

	/* the running child */
	pid_t child;
	const struct shmrun_metrics *m;
	pid_t m_launcher;
	/* workers this child's run was sent SIGKILL: dead, even while the
	 * metrics block still names them (until the launcher reaps them) */
	pid_t killed[MAX_FAULTS];
	uint32_t nkilled;
	int exit_st; /* wait status of the last child reaped (0 after a start) */
	/* the rescale in force in this run (NULL: the topology as given): every
	 * later start of the run must name the same workers and widths */
	const struct fault *cur;
	bool cur_widths;
	/* epochs this run damaged: neither the newest nor a fallback any more */
	uint64_t damaged[MAX_FAULTS];
	uint32_t ndamaged;

	/* totals */
	uint32_t injected[F_NKINDS], not_injected, runs_done, runs_failed;
	FILE *junit_f;
	char *junit_body;
	size_t junit_len;
	double total_s;
};

static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
	got_signal = sig;
}

/* ------------------------------------------------------------------------ */
/* The generator: splitmix64 */

/* Uniform in [0, n) (n > 0); the modulo bias is below 2^-40 for n < 2^24. */
static uint32_t below(uint64_t *x, uint32_t n)
{
	return (uint32_t)(shmrun_splitmix64(x) % n);
}

/* ------------------------------------------------------------------------ */
/* Messages */

static int usage_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_err(const char *fmt, ...)
{
	va_list ap;

	fputs("shmrun stress: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry 'shmrun stress --help' for more information.\n", stderr);
	return 2;
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;

	fputs("stress: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void stress_usage(FILE *out)
{
	fprintf(out,
		"usage: shmrun stress [options] topology.conf\n"
		"\n"
		"Runs the job once without faults (or takes --expect DIR), then again while\n"
		"killing, freezing, stopping and rescaling it on a seeded schedule, and\n"
		"checks that every output matches the fault-free run (docs/stress.md).\n"
		"The user's outputs and checkpoint_dir are never written: every run writes\n"
		"into a work directory.\n"
		"\n"
		"options:\n"
		"  --runs N           faulted runs (default 1; 0: the golden run only)\n"
		"  --duration T       keep starting faulted runs until T has passed since\n"
		"                     the start, golden run included (e.g. 5m; at least\n"
		"                     one run; instead of --runs)\n"
		"  --faults N         faults per run (default 3)\n"
		"  --kinds LIST       of kill, stop, term, rescale, damage (default\n"
		"                     kill,stop,term,rescale)\n"
		"  --seed S           the first run's seed (default: from the clock; always\n"
		"                     printed); run k uses S+k-1\n"
		"  --print-schedule   print the faults each run would inject, run nothing\n"
		"  --expect DIR       the golden output (DIR/<stage>.<key>/ files, as\n"
		"                     WORK/run-0/out of a --keep run) instead of a golden run\n"
		"  --timeout T        per faulted run (default max(60s, 20 x T0))\n"
		"  --workdir DIR      where runs write (default $TMPDIR/shmrun-stress-XXXXXX)\n"
		"  --keep             keep the work directory when every run matched\n"
		"  --junit FILE       write a JUnit XML report (one testcase per faulted run)\n"
		"  --set SECTION.KEY=VALUE, --plugin PATH, --log-level LEVEL\n"
		"                     passed to every run, as for `shmrun`\n"
		"  -h, --help         this text\n"
		"\n"
		"exit status: 0 every run matched; 1 a mismatch or a failed run; 2 bad usage,\n"
		"a bad topology or one that cannot be verified (e.g. stdout_sink).\n");
}

/* ------------------------------------------------------------------------ */
/* Small helpers */

/*
 * snprintf() whose truncation gcc does not second-guess: the work dir is at
 * most PATH_MAX - 512 bytes (make_workdir()), stage names and keys 64, so
 * every path built here fits; a cut one would fail to open, not overflow.
 */
static void fmt(char *buf, size_t len, const char *f, ...) __attribute__((format(printf, 3, 4)));
static void fmt(char *buf, size_t len, const char *f, ...)
{
	va_list ap;

	va_start(ap, f);
	vsnprintf(buf, len, f, ap);
	va_end(ap);
}

static double secs(int64_t ns)
{
	return (double)ns / 1e9;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL); /* a signal cuts it short: the callers check got_signal */
}

/* Growing argv. */
struct args {
	char **v;
	uint32_t n, cap;
};

static void args_add(struct args *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void args_add(struct args *a, const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	if (!s || shmrun_grow_u32(&a->v, &a->cap, (size_t)a->n + 2, sizeof(*a->v), 16)) {
		fputs("shmrun stress: out of memory\n", stderr);
		exit(1);
	}
	a->v[a->n++] = s;
	a->v[a->n] = NULL;
}

static void args_free(struct args *a)
{
	for (uint32_t i = 0; i < a->n; i++)
		free(a->v[i]);
	free(a->v);
	memset(a, 0, sizeof(*a));
}

static int rm_tree(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;

	if (!d)
		return unlink(path) == 0 || errno == ENOENT ? 0 : -errno;
	while ((e = readdir(d))) {
		char sub[PATH_MAX];
		struct stat st;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		fmt(sub, sizeof(sub), "%s/%s", path, e->d_name);
		if (lstat(sub, &st) == 0 && S_ISDIR(st.st_mode))
			rm_tree(sub);
		else
			unlink(sub);
	}
	closedir(d);
	return rmdir(path) == 0 ? 0 : -errno;
}

static int mkdirs(const char *path)
{
	char buf[PATH_MAX];

	fmt(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0700) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	return mkdir(buf, 0700) && errno != EEXIST ? -errno : 0;
}

/* Print the last TAIL_LINES lines of @path, control bytes as '?'. */
static void print_tail(const char *path)
{
	FILE *f = fopen(path, "re");
	char *ring[TAIL_LINES] = {0}, *line = NULL;
	size_t cap = 0, n = 0;
	ssize_t len;

	if (!f)
		return;
	while ((len = getline(&line, &cap, f)) >= 0) {
		free(ring[n % TAIL_LINES]);
		ring[n % TAIL_LINES] = strdup(line);
		n++;
	}
	free(line);
	fclose(f);
	fprintf(stderr, "stress: the last lines of %s:\n", path);
	for (size_t i = n > TAIL_LINES ? n - TAIL_LINES : 0; i < n; i++) {
		char *s = ring[i % TAIL_LINES];

		for (char *c = s; c && *c; c++)
			if (((unsigned char)*c < 0x20 && *c != '\n' && *c != '\t') || *c == 0x7f)
				*c = '?';
		fprintf(stderr, "  | %s", s ? s : "\n");
	}
	for (size_t i = 0; i < TAIL_LINES; i++)
		free(ring[i]);
}

/* ------------------------------------------------------------------------ */
/* Options */

/*
 * A duration on the command line: what a conf's DURATION keys take (ms, s)
 * and, for spans a CI job is given, m and h (`--duration 10m`, `1h`).
 * Return: 0, or -EINVAL (also for 0 and past MAX_DURATION_S).
 */
static int parse_span(const char *arg, uint64_t *ns)
{
	size_t n = strlen(arg);
	uint64_t mul = 0, v;

	if (n > 1 && arg[n - 1] == 'm' && arg[n - 2] >= '0' && arg[n - 2] <= '9')
		mul = 60;
	else if (n > 1 && arg[n - 1] == 'h' && arg[n - 2] >= '0' && arg[n - 2] <= '9')
		mul = 3600;
	if (mul) {
		char digits[32];

		if (n - 1 >= sizeof(digits))
			return -EINVAL;
		memcpy(digits, arg, n - 1);
		digits[n - 1] = '\0';
		if (shmrun_parse_count(digits, &v) || v == 0 || v > MAX_DURATION_S / mul)
			return -EINVAL;
		*ns = v * mul * 1000000000ull;
		return 0;
	}
	if (shmrun_parse_duration(arg, &v) || v == 0 || v > MAX_DURATION_S * 1000000000ull)
		return -EINVAL;
	*ns = v;
	return 0;
}

static int parse_kinds(struct stress *s, const char *list)
{
	char *copy = strdup(list), *save = NULL;

	if (!copy)
		return -ENOMEM;
	memset(s->kinds, 0, sizeof(s->kinds));
	if (list[0] == ',' || strstr(list, ",,") || (list[0] && list[strlen(list) - 1] == ',')) {
		usage_err("--kinds '%s': an empty fault kind (write kinds separated by single "
			  "commas, e.g. kill,stop)",
			  list);
		free(copy);
		return -EINVAL;
	}
	for (char *w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
		int k = -1;

		for (int i = 0; i < F_NKINDS; i++)
			if (strcmp(w, kind_names[i]) == 0)
				k = i;
		if (k < 0) {
			usage_err("--kinds: unknown fault kind '%s' (kinds: kill, stop, term, "
				  "rescale, damage)",
				  w);
			free(copy);
			return -EINVAL;
		}
		s->kinds[k] = true;
	}
	free(copy);
	for (int i = 0; i < F_NKINDS; i++)
		if (s->kinds[i])
			return 0;
	usage_err("--kinds: name at least one fault kind (kill, stop, term, rescale, damage)");
	return -EINVAL;
}

static int parse_options(struct stress *s, int argc, char **argv)
{
	static const struct option opts[] = {
		{"runs", required_argument, NULL, 'r'},
		{"duration", required_argument, NULL, 'd'},
		{"faults", required_argument, NULL, 'f'},
		{"kinds", required_argument, NULL, 'k'},
		{"seed", required_argument, NULL, 's'},
		{"print-schedule", no_argument, NULL, 'P'},
		{"expect", required_argument, NULL, 'e'},
		{"timeout", required_argument, NULL, 't'},
		{"workdir", required_argument, NULL, 'w'},
		{"keep", no_argument, NULL, 'K'},
		{"junit", required_argument, NULL, 'j'},
		{"set", required_argument, NULL, 'S'},
		{"plugin", required_argument, NULL, 'p'},
		{"log-level", required_argument, NULL, 'l'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	uint64_t v;
	int c;

	s->runs = 1;
	s->faults = 3;
	s->kinds[F_KILL] = s->kinds[F_STOP] = s->kinds[F_TERM] = s->kinds[F_RESCALE] = true;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			if (shmrun_parse_count(optarg, &v) || v > 100000)
				return usage_err("--runs '%s' is not a count of runs (0 to 100000)",
						 optarg);
			s->runs = (uint32_t)v;
			s->runs_given = true;
			break;
		case 'd':
			if (parse_span(optarg, &v))
				return usage_err("--duration '%s' is not a duration (e.g. 90s, 10m, 2h; "
						 "at most 365 days)",
						 optarg);
			s->duration_ns = (int64_t)v;
			break;
		case 'f':
			if (shmrun_parse_count(optarg, &v) || v > MAX_FAULTS)
				return usage_err("--faults '%s' is not a count of faults (0 to %d)",
						 optarg, MAX_FAULTS);
			s->faults = (uint32_t)v;
			break;
		case 'k':
			if (parse_kinds(s, optarg))
				return 2;
			break;
		case 's':
			if (shmrun_parse_count(optarg, &v))
				return usage_err("--seed '%s' is not an unsigned decimal integer",
						 optarg);
			s->seed = v;
			s->seed_given = true;
			break;
		case 'P':
			s->print_schedule = true;
			break;
		case 'e':
			s->expect = optarg;
			break;
		case 't':
			if (parse_span(optarg, &v))
				return usage_err("--timeout '%s' is not a duration (e.g. 120s, 5m)",
						 optarg);
			s->timeout_ns = (int64_t)v;
			break;
		case 'w':
			s->workdir_opt = optarg;
			break;
		case 'K':
			s->keep = true;
			break;
		case 'j':
			s->junit = optarg;
			break;
		case 'S':
			if (s->nsets == MAX_SETS)
				return usage_err("too many --set options (at most %d)", MAX_SETS);
			s->sets[s->nsets++] = optarg;
			break;
		case 'p':
			if (s->nplugins == MAX_PLUGINS)
				return usage_err("too many --plugin options (at most %d)",
						 MAX_PLUGINS);
			s->plugins[s->nplugins++] = optarg;
			break;
		case 'l':
			if (shmrun_log_parse_level(optarg) < 0)
				return usage_err("--log-level must be error, warn, info or debug, "
						 "not '%s'",
						 optarg);
			s->log_level = optarg;
			break;
		case 'h':
			stress_usage(stdout);
			return -1;
		default:
			fputs("Try 'shmrun stress --help' for more information.\n", stderr);
			return 2;
		}
	}
	if (optind == argc)
		return usage_err("missing topology.conf");
	if (argc - optind > 1)
		return usage_err("expected one topology.conf, got %d arguments", argc - optind);
	s->conf = argv[optind];
	if (strcmp(s->conf, "-") == 0)
		return usage_err("the topology cannot be standard input: every run reads it "
				 "again; give a file");
	if (s->duration_ns && s->runs_given)
		return usage_err("give --runs or --duration, not both");
	if (s->expect && s->runs == 0)
		return usage_err("--runs 0 runs the golden run only; with --expect there is "
				 "nothing to do");
	if (!s->seed_given) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		s->seed = ((uint64_t)ts.tv_sec * 1000003u + (uint64_t)ts.tv_nsec / 1000) % 1000000000u;
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* The topology: what can be verified, where outputs go */

/* Why the sink of stage @st cannot be verified, or NULL. */
static const char *unverifiable(const struct shmrun_stage *st)
{
	const struct shmrun_operator *op = st->op;

	if (strcmp(op->name, "postgres_sink") == 0)
		return "postgres_sink is exactly-once, but its output is a database table, not a "
		       "file stress can collect and compare; compare its table yourself after "
		       "kills (docs/checkpoints.md, \"Exactly-once into PostgreSQL\"; "
		       "tests/integration/postgres.sh does), or stress the job with a file_sink "
		       "in its place";
	if (!(op->flags & SHMRUN_OP_SINK) || op->commit || strcmp(op->name, "null_sink") == 0)
		return NULL;
	if (strcmp(op->name, "stdout_sink") == 0)
		return "stdout_sink writes records as they arrive; after a kill the records "
		       "replayed from the last checkpoint appear twice, and its output is not "
		       "a file stress can collect; use file_sink";
	if (strcmp(op->name, "latency_sink") == 0)
		return "latency_sink writes timings as records arrive: they differ from run "
		       "to run and repeat after a restart; use file_sink to check the records "
		       "(or null_sink)";
	return "the operator has no commit(): its output is not exactly-once (no two-phase "
	       "commit), so records replayed after a restart reach it twice; give it a "
	       "commit() that publishes staged output, or use file_sink";
}

/* Why source stage @st cannot be verified (it never ends), or NULL. */
static const char *endless(const struct shmrun_stage *st)
{
	if (!(st->op->flags & SHMRUN_OP_SOURCE))
		return NULL;
	for (uint32_t j = 0; j < st->nparams; j++) {
		const struct shmrun_param *p = &st->params[j];

		if (p->def && strcmp(p->def->key, "follow") == 0 && p->value && p->u64)
			return "follow = true never ends, so there is no final output to compare "
			       "with the golden run's; verify a copy of the stage with follow = "
			       "false (tests/integration/follow.sh checks following under kills)";
	}
	return NULL;
}

/* Whether every stage upstream of @idx, and @idx, has width 1. */
static bool width1_upstream(const struct shmrun_job *job, uint32_t idx, uint32_t depth)
{
	if (job->stages[idx].width != 1 || depth > job->nstages)
		return false;
	for (uint32_t e = 0; e < job->nedges; e++)
		if (job->edges[e].to == idx && !width1_upstream(job, job->edges[e].from, depth + 1))
			return false;
	return true;
}

static int load_topology(struct stress *s)
{
	struct shmrun_job_errors errs = {0};
	int r, refused = 0;
	const char *job_name;
	size_t keep;

	r = shmrun_job_load_set(s->conf, s->sets, s->nsets, &s->job, &errs);
	if (r) {
		for (uint32_t i = 0; i < errs.n && i < 50; i++)
			fprintf(stderr, "%s\n", errs.msgs[i]);
		if (errs.n == 0)
			fprintf(stderr, "%s: %s\n", s->conf, strerror(-r));
		fprintf(stderr, "shmrun stress: %u error%s in %s; nothing was started\n",
			errs.n ? errs.n : 1, errs.n == 1 ? "" : "s", s->conf);
		shmrun_job_errors_free(&errs);
		return 2;
	}
	if (s->job.hosts > 1) {
		/* its faults target one host's workers and its reruns fork them
		 * again: a multi-host job restarts from outside (docs/multihost.md) */
		fprintf(stderr,
			"shmrun stress: %s: hosts = %u: stress runs and kills the job's workers "
			"on this one machine, and a multi-host job is started by mpirun, one "
			"launcher per host; stress it with hosts = 1 (--set job.hosts=1); "
			"nothing was started\n",
			s->conf, s->job.hosts);
		refused = 1;
	}
	for (uint32_t i = 0; i < s->job.nstages; i++) {
		const struct shmrun_stage *st = &s->job.stages[i];

		if (st->op->flags & SHMRUN_OP_UNREPLAYABLE) {
			fprintf(stderr,
				"shmrun stress: %s: stage '%s' (op %s) cannot be verified: its input "
				"cannot be read again, so the golden run and the runs under kills "
				"cannot read the same records, and a restart cannot replay what it "
				"read since the last checkpoint (at-most-once); use file_source or "
				"sequence; nothing was started\n",
				s->conf, st->name, st->op->name);
			refused = 1;
		}
	}
	for (uint32_t i = 0; i < s->job.nstages; i++) {
		const char *why = unverifiable(&s->job.stages[i]);

		if (!why)
			why = endless(&s->job.stages[i]);
		if (why) {
			fprintf(stderr,
				"shmrun stress: %s: stage '%s' (op %s) cannot be verified: %s; "
				"nothing was started\n",
				s->conf, s->job.stages[i].name, s->job.stages[i].op->name, why);
			refused = 1;
		}
	}
	if (refused)
		return 2;
	for (uint32_t i = 0; i < s->job.nstages; i++) {
		const struct shmrun_stage *st = &s->job.stages[i];

		for (uint32_t j = 0; j < st->nparams; j++) {
			const struct shmrun_param *p = &st->params[j];
			struct output *o;
			const char *slash;

			if (!p->def || p->def->io != SHMRUN_PARAM_OUTPUT || !p->value || !*p->value)
				continue;
			o = realloc(s->outs, (s->nouts + 1) * sizeof(*o));
			if (!o)
				return -ENOMEM;
			s->outs = o;
			o = &o[s->nouts++];
			memset(o, 0, sizeof(*o));
			o->stage = i;
			o->key = p->def->key;
			slash = strrchr(p->value, '/');
			o->base = strdup(slash ? slash + 1 : p->value);
			if (!o->base)
				return -ENOMEM;
			o->ordered = width1_upstream(&s->job, i, 0);
		}
	}
	if (!s->nouts) {
		fprintf(stderr,
			"shmrun stress: %s has no output file to compare (no stage writes a "
			"path, e.g. file_sink); nothing was started\n",
			s->conf);
		return 2;
	}
	/* <name>-stress-<pid>, at most 64 characters */
	job_name = s->job.name;
	{
		char tail[32];

		fmt(tail, sizeof(tail), "-stress-%ld", (long)getpid());
		keep = strlen(job_name);
		if (keep + strlen(tail) > 64)
			keep = 64 - strlen(tail);
		fmt(s->name, sizeof(s->name), "%.*s%s", (int)keep, job_name, tail);
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Schedules */

static uint32_t nkinds(const struct stress *s, enum fault_kind *out)
{
	uint32_t n = 0;

	for (int i = 0; i < F_NKINDS; i++)
		if (s->kinds[i])
			out[n++] = (enum fault_kind)i;
	return n;
}

static void schedule_free(struct fault *f, uint32_t n)
{
	for (uint32_t i = 0; f && i < n; i++)
		free(f[i].widths);
	free(f);
}

/* The representative of stage @j in @up (union-find, path halving). */
static uint32_t group_of(uint32_t *up, uint32_t j)
{
	while (up[j] != j)
		j = up[j] = up[up[j]];
	return j;
}

/*
 * Stages joined by a forward edge (`input = a` of equal widths, or `a
 * forward`) stay joined: one width for the whole group, the first member's
 * pick, or each keeps its own when the group holds a source or a sink. A
 * forward edge between unequal widths would become a rebalance and carry a
 * keyed stage's records to instances that do not own their keys.
 */
static void forward_groups(const struct stress *s, uint32_t *widths)
{
	uint32_t nst = s->job.nstages, *up = calloc(nst, sizeof(*up)), *pick;

	if (!up)
		return;
	pick = calloc(nst, sizeof(*pick));
	if (!pick) {
		free(up);
		return;
	}
	for (uint32_t j = 0; j < nst; j++) {
		up[j] = j;
		pick[j] = UINT32_MAX; /* unset */
	}
	for (uint32_t e = 0; e < s->job.nedges; e++) {
		const struct shmrun_edge *ed = &s->job.edges[e];

		if (ed->kind == SHMRUN_EDGE_FORWARD && !ed->by_key)
			up[group_of(up, ed->from)] = group_of(up, ed->to);
	}
	for (uint32_t j = 0; j < nst; j++) {
		uint32_t g = group_of(up, j);

		if (!widths[j])
			pick[g] = 0; /* a source or a sink: the group keeps its widths */
		else if (pick[g] == UINT32_MAX)
			pick[g] = widths[j];
	}
	for (uint32_t j = 0; j < nst; j++)
		widths[j] = pick[group_of(up, j)];
	free(pick);
	free(up);
}

/* The schedule of seed @seed: s->faults faults sorted by time. NULL: out of memory. */
static struct fault *schedule_make(const struct stress *s, uint64_t seed)
{
	enum fault_kind kinds[F_NKINDS];
	uint32_t nk = nkinds(s, kinds), nst = s->job.nstages;
	struct fault *f = calloc(s->faults ? s->faults : 1, sizeof(*f));
	uint64_t x = seed;

	if (!f)
		return NULL;
	for (uint32_t i = 0; i < s->faults; i++) {
		f[i].permille = 50 + below(&x, 851);
		f[i].kind = kinds[below(&x, nk)];
		f[i].done = f[i].kind;
		f[i].worker = below(&x, s->job.workers);
		f[i].stop_ms = 50 + below(&x, 451);
		f[i].workers = 1 + below(&x, 2 * s->job.workers);
		if (s->job.cpus_listed) /* one worker per listed CPU: widths only */
			f[i].workers = s->job.workers;
		f[i].pick = shmrun_splitmix64(&x);
		f[i].widths = calloc(nst, sizeof(*f[i].widths));
		if (!f[i].widths) {
			schedule_free(f, i + 1);
			return NULL;
		}
		for (uint32_t j = 0; j < nst; j++) {
			const struct shmrun_stage *st = &s->job.stages[j];
			uint32_t w = 1 + below(&x, 2 * st->width);

			if (w > s->job.vnodes)
				w = s->job.vnodes;
			/* sinks keep theirs (file_sink's per-worker entries cannot be
			 * re-dealt), sources too (their split is their input's) */
			f[i].widths[j] = st->op->flags & (SHMRUN_OP_SINK | SHMRUN_OP_SOURCE) ? 0 : w;
		}
		forward_groups(s, f[i].widths);
	}
	/* sorted by time, stable: insertion sort */
	for (uint32_t i = 1; i < s->faults; i++) {
		struct fault t = f[i];
		uint32_t j = i;

		for (; j > 0 && f[j - 1].permille > t.permille; j--)
			f[j] = f[j - 1];
		f[j] = t;
	}
	return f;
}

/* "kill -9 worker 1", "stop worker 0 for 120 ms", "rescale to 3 workers, count 4". */
static void describe(const struct stress *s, const struct fault *f, char *buf, size_t len)
{
	size_t off;

	switch (f->kind) {
	case F_KILL:
		fmt(buf, len, "kill -9 worker %u", f->worker);
		break;
	case F_STOP:
		fmt(buf, len, "SIGSTOP worker %u for %u ms, then SIGCONT", f->worker, f->stop_ms);
		break;
	case F_TERM:
		fmt(buf, len, "SIGTERM the launcher, resume");
		break;
	case F_DAMAGE:
		fmt(buf, len, "SIGTERM the launcher, damage the newest checkpoint, resume");
		break;
	case F_RESCALE:
		off = (size_t)snprintf(buf, len, "SIGTERM the launcher, resume with --rescale to %u "
					    "worker%s", f->workers, f->workers == 1 ? "" : "s");
		for (uint32_t j = 0; j < s->job.nstages && off < len; j++)
			if (f->widths[j])
				off += (size_t)snprintf(buf + off, len - off, ", %s width %u",
							s->job.stages[j].name, f->widths[j]);
		break;
	default:
		fmt(buf, len, "?");
	}
}

static uint64_t run_seed(const struct stress *s, uint32_t k)
{
	return s->seed + k - 1;
}

static int print_schedule(struct stress *s)
{
	uint32_t runs = s->duration_ns ? 1 : s->runs;

	for (uint32_t k = 1; k <= runs; k++) {
		struct fault *f = schedule_make(s, run_seed(s, k));

		if (!f)
			return 1;
		printf("run %u seed %" PRIu64 ": %u fault%s\n", k, run_seed(s, k), s->faults,
		       s->faults == 1 ? "" : "s");
		for (uint32_t i = 0; i < s->faults; i++) {
			char what[512];

			describe(s, &f[i], what, sizeof(what));
			printf("  fault %u/%u at %.1f%% of T0: %s\n", i + 1, s->faults,
			       f[i].permille / 10.0, what);
		}
		schedule_free(f, s->faults);
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Child processes */

/*
 * The command of one run into @a: this shmrun, subcommand @cmd (NULL: a run;
 * "check"), the pass-through options, --rescale if @rescale, the overrides of
 * run @k, then those of rescale @resc (NULL: none): its job.workers and, if
 * @widths, its stage widths.
 */
static void run_args(const struct stress *s, uint32_t k, const char *cmd, bool rescale,
		     const struct fault *resc, bool widths, struct args *a)
{
	args_add(a, "shmrun");
	if (cmd)
		args_add(a, "%s", cmd);
	if (s->log_level)
		args_add(a, "--log-level=%s", s->log_level);
	if (!cmd)
		args_add(a, "--no-progress");
	if (rescale)
		args_add(a, "--rescale");
	for (uint32_t i = 0; i < s->nplugins; i++)
		args_add(a, "--plugin=%s", s->plugins[i]);
	for (uint32_t i = 0; i < s->nsets; i++)
		args_add(a, "--set=%s", s->sets[i]);
	args_add(a, "--set=job.name=%s", s->name);
	args_add(a, "--set=job.checkpoint_dir=%s/run-%u/ckpt", s->work, k);
	if (s->kinds[F_DAMAGE] && s->job.checkpoint_retain < 3)
		args_add(a, "--set=job.checkpoint_retain=3");
	/* every kill is a restart: the faults asked must not use up the
	 * job's own attempts (a start after a term or rescale counts anew) */
	if (s->kinds[F_KILL])
		args_add(a, "--set=job.restart_attempts=%u",
			 s->job.restart_attempts + s->faults > 1000000 ? 1000000
								: s->job.restart_attempts + s->faults);
	for (uint32_t i = 0; i < s->nouts; i++) {
		const struct output *o = &s->outs[i];

		args_add(a, "--set=%s.%s=%s/run-%u/out/%s.%s/%s", s->job.stages[o->stage].name,
			 o->key, s->work, k, s->job.stages[o->stage].name, o->key, o->base);
	}
	if (resc) {
		if (!s->job.cpus_listed) /* `cpus =` fixes the workers; `workers` with it is refused */
			args_add(a, "--set=job.workers=%u", resc->workers);
		for (uint32_t j = 0; widths && j < s->job.nstages; j++)
			if (resc->widths[j])
				args_add(a, "--set=%s.width=%u", s->job.stages[j].name,
					 resc->widths[j]);
	}
	args_add(a, "%s", s->conf);
}

/* Start @a with output appended to @log, in its own process group. Return: pid or -errno. */
static pid_t spawn(char **argv, const char *log)
{
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		sigset_t none;
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);

		setpgid(0, 0);
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (fd < 0 || nul < 0 || dup2(nul, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(127);
		execv("/proc/self/exe", argv);
		dprintf(2, "shmrun stress: exec of /proc/self/exe: %s\n", strerror(errno));
		_exit(127);
	}
	setpgid(pid, pid); /* also here: no race with a signal sent at once */
	return pid;
}

/* Kill @pid's process group and wait until it is empty (at most ~3 s). */
static void kill_group(pid_t pid)
{
	int st;

	if (pid <= 0)
		return;
	kill(-pid, SIGCONT);
	kill(-pid, SIGKILL);
	waitpid(pid, &st, 0);
	for (int i = 0; i < 300 && kill(-pid, 0) == 0; i++) {
		kill(-pid, SIGKILL);
		sleep_ms(10);
	}
}

static void unmap_metrics(struct stress *s)
{
	if (s->m)
		shmrun_metrics_unmap(s->m);
	s->m = NULL;
	s->m_launcher = 0;
}

/*
 * Wait for s->child to exit, until @deadline (monotonic ns; 0: poll once).
 * Return: its wait status (>= 0); -ETIMEDOUT; -EINTR on a signal to stress.
 */
static int wait_child(struct stress *s, int64_t deadline)
{
	for (;;) {
		int st;
		pid_t r = waitpid(s->child, &st, WNOHANG);

		if (r == s->child) {
			/* the group may outlive the launcher for a moment */
			for (int i = 0; i < 300 && kill(-s->child, 0) == 0; i++)
				sleep_ms(10);
			if (kill(-s->child, 0) == 0)
				kill(-s->child, SIGKILL);
			s->child = 0;
			s->exit_st = st;
			unmap_metrics(s);
			return st;
		}
		if (got_signal)
			return -EINTR;
		if (shmrun_now_ns() >= deadline)
			return -ETIMEDOUT;
		sleep_ms(5);
	}
}

/* "exit 1", "killed by signal 9" */
static const char *status_text(int st, char *buf, size_t len)
{
	if (WIFEXITED(st))
		fmt(buf, len, "exit status %d", WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		fmt(buf, len, "killed by signal %d", WTERMSIG(st));
	else
		fmt(buf, len, "status %d", st);
	return buf;
}

/*
 * Whether @pid is a live child of @parent (/proc/PID/stat): not a zombie,
 * which a killed worker is until its launcher reaps it (a fault sent to it
 * would be counted and do nothing).
 */
static bool child_of(pid_t pid, pid_t parent)
{
	char path[64], buf[512], *p, state = '?';
	FILE *f;
	long ppid = -1;

	fmt(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	p = strrchr(buf, ')'); /* the name may hold blanks and ')' */
	if (!p || sscanf(p + 1, " %c %ld", &state, &ppid) != 2)
		return false;
	return ppid == parent && state != 'Z' && state != 'X';
}

/*
 * The pid of worker @idx (modulo the workers running) of the running child,
 * or 0 if none runs now (starting, restarting). *@widx: the index used.
 */
static pid_t worker_pid(struct stress *s, uint32_t idx, uint32_t *widx)
{
	char why[512];

	if (s->m && s->m_launcher != s->child)
		unmap_metrics(s);
	if (!s->m) {
		int fd = jobsock_metrics_fd(s->name, why, sizeof(why));

		if (fd >= 0) {
			s->m = shmrun_metrics_map(fd, why, sizeof(why));
			close(fd);
			if (s->m && s->m->launcher_pid != s->child)
				unmap_metrics(s);
			else if (s->m)
				s->m_launcher = s->child;
		} else if (fd == -ENODATA) { /* SHMRUN_COUNTERS=off: the launcher's children */
			char path[96], list[4096];
			pid_t pids[256];
			uint32_t n = 0;
			FILE *f;

			fmt(path, sizeof(path), "/proc/%ld/task/%ld/children", (long)s->child,
				 (long)s->child);
			f = fopen(path, "re");
			if (!f)
				return 0;
			if (!fgets(list, sizeof(list), f))
				list[0] = '\0';
			fclose(f);
			for (char *save = NULL, *w = strtok_r(list, " \n", &save); w && n < 256;
			     w = strtok_r(NULL, " \n", &save)) {
				pid_t c = (pid_t)atol(w);
				bool dead = !child_of(c, s->child);

				for (uint32_t i = 0; i < s->nkilled && !dead; i++)
					dead = s->killed[i] == c;
				if (!dead)
					pids[n++] = c;
			}
			if (!n)
				return 0;
			*widx = idx % n;
			return pids[*widx];
		}
	}
	if (!s->m || SHMRUN_METRIC(s->m->state) != SHMRUN_JOB_RUNNING || !s->m->workers)
		return 0;
	*widx = idx % s->m->workers;
	{
		pid_t pid = SHMRUN_METRIC(shmrun_metrics_worker(s->m, *widx)->pid);

		for (uint32_t i = 0; i < s->nkilled; i++)
			if (s->killed[i] == pid)
				return 0; /* killed, not reaped yet: the restart is coming */
		return pid > 0 && child_of(pid, s->child) ? pid : 0;
	}
}

/* Whether the running child's job serves its socket yet (its run loop started). */
static bool job_up(struct stress *s)
{
	uint32_t w;

	return worker_pid(s, 0, &w) > 0;
}

/* ------------------------------------------------------------------------ */
/* Reading and comparing outputs */

static void lines_free(struct lines *l)
{
	free(l->buf);
	free(l->v);
	free(l->n);
	free(l->ordered);
	free(l->ordered_n);
	memset(l, 0, sizeof(*l));
}

static int line_cmp(const char *a, size_t an, const char *b, size_t bn)
{
	int c = memcmp(a, b, an < bn ? an : bn);

	return c ? c : (an > bn) - (an < bn);
}

/* qsort_r() of indices into the struct lines @ctx */
static int idx_cmp(const void *x, const void *y, void *ctx)
{
	const struct lines *l = ctx;
	size_t i = *(const size_t *)x, j = *(const size_t *)y;

	return line_cmp(l->v[i], l->n[i], l->v[j], l->n[j]);
}

/* Whether directory entry @name is the output @base or an instance file base.N. */
static bool output_file(const char *name, const char *base)
{
	size_t bl = strlen(base);

	if (strcmp(name, base) == 0)
		return true;
	if (strncmp(name, base, bl) != 0 || name[bl] != '.' || !name[bl + 1])
		return false;
	return strspn(name + bl + 1, "0123456789") == strlen(name + bl + 1);
}

static int append_file(struct lines *l, const char *path)
{
	FILE *f = fopen(path, "re");
	char chunk[65536];
	size_t n;

	if (!f)
		return -errno;
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		char *b = realloc(l->buf, l->len + n + 2);

		if (!b) {
			fclose(f);
			return -ENOMEM;
		}
		l->buf = b;
		memcpy(l->buf + l->len, chunk, n);
		l->len += n;
	}
	fclose(f);
	if (l->len && l->buf[l->len - 1] != '\n') { /* a last line without its newline */
		char *b = realloc(l->buf, l->len + 2);

		if (!b)
			return -ENOMEM;
		l->buf = b;
		l->buf[l->len++] = '\n';
	}
	return 0;
}

/* Instance files sorted by instance number: base, base.0, base.1, ... */
static int name_cmp(const void *a, const void *b)
{
	const char *x = *(char *const *)a, *y = *(char *const *)b;
	size_t lx = strlen(x), ly = strlen(y);

	return lx != ly ? (lx > ly) - (lx < ly) : strcmp(x, y);
}

/* Read every file of output @o in @dir into @l, split into lines, sorted. */
static int read_output(const struct output *o, const char *dir, struct lines *l)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char **names = NULL;
	size_t nn = 0;
	size_t *idx;
	int r = 0;

	memset(l, 0, sizeof(*l));
	if (!d)
		return errno == ENOENT ? 0 : -errno; /* no file: no lines */
	while ((e = readdir(d))) {
		char **t;

		if (!output_file(e->d_name, o->base))
			continue;
		t = realloc(names, (nn + 1) * sizeof(*names));
		if (!t || !(t[nn] = strdup(e->d_name))) {
			free(t ? t : names);
			closedir(d);
			return -ENOMEM;
		}
		names = t;
		nn++;
	}
	closedir(d);
	qsort(names, nn, sizeof(*names), name_cmp);
	for (size_t i = 0; i < nn; i++) {
		char path[PATH_MAX];

		fmt(path, sizeof(path), "%s/%s", dir, names[i]);
		if (!r)
			r = append_file(l, path);
		free(names[i]);
	}
	free(names);
	if (r)
		return r;
	for (size_t i = 0; i < l->len; i++)
		l->count += l->buf[i] == '\n';
	l->v = calloc(l->count + 1, sizeof(*l->v));
	l->n = calloc(l->count + 1, sizeof(*l->n));
	l->ordered = calloc(l->count + 1, sizeof(*l->ordered));
	l->ordered_n = calloc(l->count + 1, sizeof(*l->ordered_n));
	idx = calloc(l->count + 1, sizeof(*idx));
	if (!l->v || !l->n || !l->ordered || !l->ordered_n || !idx) {
		free(idx);
		return -ENOMEM;
	}
	for (size_t i = 0, k = 0, start = 0; i < l->len; i++) {
		if (l->buf[i] != '\n')
			continue;
		l->v[k] = l->buf + start;
		l->n[k] = i - start;
		l->buf[i] = '\0'; /* for printing; lengths are kept */
		start = i + 1;
		k++;
	}
	memcpy(l->ordered, l->v, l->count * sizeof(*l->v));
	memcpy(l->ordered_n, l->n, l->count * sizeof(*l->n));
	for (size_t i = 0; i < l->count; i++)
		idx[i] = i;
	qsort_r(idx, l->count, sizeof(*idx), idx_cmp, l);
	{
		const char **v = malloc((l->count + 1) * sizeof(*v));
		size_t *n = malloc((l->count + 1) * sizeof(*n));

		if (!v || !n) {
			free(v);
			free(n);
			free(idx);
			return -ENOMEM;
		}
		for (size_t i = 0; i < l->count; i++) {
			v[i] = l->v[idx[i]];
			n[i] = l->n[idx[i]];
		}
		free(l->v);
		free(l->n);
		l->v = v;
		l->n = n;
	}
	free(idx);
	return 0;
}

/* A growing text (the failure report of a run). */
struct text {
	char *s;
	size_t len;
};

static void text_add(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void text_add(struct text *t, const char *fmt, ...)
{
	va_list ap;
	char *add;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&add, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	{
		char *s = realloc(t->s, t->len + (size_t)n + 1);

		if (s) {
			t->s = s;
			memcpy(t->s + t->len, add, (size_t)n + 1);
			t->len += (size_t)n;
		}
	}
	free(add);
}

/* One shown line: at most 120 bytes, control bytes as '?'. */
static void text_line(struct text *t, const char *tag, const char *p, size_t n)
{
	char buf[128];
	size_t k = n < 120 ? n : 120;

	for (size_t i = 0; i < k; i++)
		buf[i] = ((unsigned char)p[i] < 0x20 || p[i] == 0x7f) ? '?' : p[i];
	buf[k] = '\0';
	text_add(t, "    %s %s%s\n", tag, buf, n > k ? "..." : "");
}

/*
 * Compare @got with golden @want of output @o (of a run @ordered may be
 * checked in); append the differences to @t. Return: true if they match.
 */
static bool compare(const struct stress *s, const struct output *o, const struct lines *want,
		    const struct lines *got, bool ordered, struct text *t)
{
	size_t i = 0, j = 0, missing = 0, dup = 0, extra = 0;
	size_t shown_m = 0, shown_d = 0, shown_e = 0;
	struct text m = {0}, d = {0}, e = {0};
	const char *name = s->job.stages[o->stage].name;

	while (i < want->count || j < got->count) {
		int c = i == want->count   ? 1
			: j == got->count ? -1
					  : line_cmp(want->v[i], want->n[i], got->v[j], got->n[j]);

		if (c == 0) {
			i++;
			j++;
		} else if (c < 0) { /* in the golden output only */
			missing++;
			if (shown_m++ < DIFF_SHOW)
				text_line(&m, "-", want->v[i], want->n[i]);
			i++;
		} else { /* in the run only: a duplicate if the line is a golden one */
			/* both sorted: a golden line equal to it, if any, was the
			 * last one matched (want[i - 1]); else it was never golden */
			bool is_dup = i > 0 && line_cmp(got->v[j], got->n[j], want->v[i - 1],
							want->n[i - 1]) == 0;

			if (is_dup) {
				dup++;
				if (shown_d++ < DIFF_SHOW)
					text_line(&d, "+", got->v[j], got->n[j]);
			} else {
				extra++;
				if (shown_e++ < DIFF_SHOW)
					text_line(&e, "+", got->v[j], got->n[j]);
			}
			j++;
		}
	}
	if (missing || dup || extra) {
		text_add(t, "  %s.%s: %zu lines, the fault-free run %zu: %zu missing, %zu "
			    "duplicated, %zu extra\n",
			 name, o->key, got->count, want->count, missing, dup, extra);
		if (missing)
			text_add(t, "   missing (first %zu):\n%s", shown_m < DIFF_SHOW ? shown_m : DIFF_SHOW, m.s);
		if (dup)
			text_add(t, "   duplicated (first %zu):\n%s", shown_d < DIFF_SHOW ? shown_d : DIFF_SHOW, d.s);
		if (extra)
			text_add(t, "   extra (first %zu):\n%s", shown_e < DIFF_SHOW ? shown_e : DIFF_SHOW, e.s);
		free(m.s);
		free(d.s);
		free(e.s);
		return false;
	}
	free(m.s);
	free(d.s);
	free(e.s);
	if (ordered) {
		for (size_t k = 0; k < got->count; k++) {
			if (line_cmp(got->ordered[k], got->ordered_n[k], want->ordered[k],
				     want->ordered_n[k]) != 0) {
				text_add(t, "  %s.%s: the same lines, but out of order (the stage and "
					    "every stage before it have width 1, so the order is "
					    "promised); first difference at line %zu:\n",
					 name, o->key, k + 1);
				text_line(t, "want", want->ordered[k], want->ordered_n[k]);
				text_line(t, "got ", got->ordered[k], got->ordered_n[k]);
				return false;
			}
		}
	}
	return true;
}

/* ------------------------------------------------------------------------ */
/* JUnit */

static void xml_escape(struct text *t, const char *s)
{
	for (; s && *s; s++) {
		switch (*s) {
		case '&': text_add(t, "&amp;"); break;
		case '<': text_add(t, "&lt;"); break;
		case '>': text_add(t, "&gt;"); break;
		case '"': text_add(t, "&quot;"); break;
		case '\'': text_add(t, "&apos;"); break;
		default:
			/* XML 1.0 has no place for control bytes but tab and newline */
			if (((unsigned char)*s < 0x20 && *s != '\n' && *s != '\t') || *s == 0x7f)
				text_add(t, "?");
			else
				text_add(t, "%c", *s);
		}
	}
}

static struct text junit_cases;
static uint32_t junit_tests, junit_failures;

static void junit_case(const struct stress *s, uint32_t k, uint64_t seed, double dur,
		       const char *failure, const char *detail, const char *schedule)
{
	char name[128];

	fmt(name, sizeof(name), "run %u seed %" PRIu64, k, seed);
	junit_tests++;
	text_add(&junit_cases, "  <testcase classname=\"shmrun-stress.");
	xml_escape(&junit_cases, s->job.name);
	text_add(&junit_cases, "\" name=\"");
	xml_escape(&junit_cases, name);
	text_add(&junit_cases, "\" time=\"%.3f\">\n", dur);
	if (failure) {
		junit_failures++;
		text_add(&junit_cases, "    <failure message=\"");
		xml_escape(&junit_cases, failure);
		text_add(&junit_cases, "\" type=\"mismatch\">");
		xml_escape(&junit_cases, detail);
		text_add(&junit_cases, "</failure>\n");
	}
	/* the schedule as injected, for a run that passed too */
	text_add(&junit_cases, "    <system-out>");
	xml_escape(&junit_cases, schedule);
	text_add(&junit_cases, "</system-out>\n  </testcase>\n");
}

static uint32_t junit_errors;

/*
 * A testcase @name that could not be judged (the golden run failed, stress
 * was stopped): an <error>, so a CI view shows red rather than an empty
 * green suite, and a report of an earlier run is replaced.
 */
static void junit_error(const struct stress *s, const char *name, const char *why)
{
	junit_tests++;
	junit_errors++;
	text_add(&junit_cases, "  <testcase classname=\"shmrun-stress.");
	xml_escape(&junit_cases, s->job.name);
	text_add(&junit_cases, "\" name=\"");
	xml_escape(&junit_cases, name);
	text_add(&junit_cases, "\" time=\"0\">\n    <error message=\"");
	xml_escape(&junit_cases, why);
	text_add(&junit_cases, "\" type=\"error\"/>\n  </testcase>\n");
}

static int junit_write(const struct stress *s)
{
	char tmp[PATH_MAX];
	FILE *f;
	int fd;

	if (!s->junit)
		return 0;
	if (snprintf(tmp, sizeof(tmp), "%s.tmp-XXXXXX", s->junit) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = mkstemp(tmp);
	if (fd < 0 || !(f = fdopen(fd, "w"))) {
		fprintf(stderr, "shmrun stress: --junit %s: cannot create %s: %s\n", s->junit, tmp,
			strerror(errno));
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	fchmod(fd, 0644);
	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		   "<testsuite name=\"shmrun-stress\" tests=\"%u\" failures=\"%u\" errors=\"%u\" "
		   "time=\"%.3f\">\n%s</testsuite>\n",
		junit_tests, junit_failures, junit_errors, s->total_s,
		junit_cases.s ? junit_cases.s : "");
	if (fflush(f) || fsync(fileno(f)) || fclose(f) || rename(tmp, s->junit)) {
		fprintf(stderr, "shmrun stress: --junit %s: cannot write it: %s\n", s->junit,
			strerror(errno));
		unlink(tmp);
		return -EIO;
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Runs */

static void run_paths(const struct stress *s, uint32_t k, char *dir, char *log)
{
	fmt(dir, PATH_MAX, "%s/run-%u", s->work, k);
	fmt(log, PATH_MAX, "%s/run-%u/log", s->work, k);
}

static int start_run(struct stress *s, uint32_t k, bool rescale)
{
	const struct fault *resc = s->cur;
	bool widths = s->cur_widths;
	char dir[PATH_MAX], log[PATH_MAX];
	struct args a = {0};
	pid_t pid;

	run_paths(s, k, dir, log);
	run_args(s, k, NULL, rescale, resc, widths, &a);
	{
		FILE *f = fopen(log, "ae");

		if (f) { /* the command, for whoever reads the log */
			fputs("+", f);
			for (uint32_t i = 0; i < a.n; i++)
				fprintf(f, " %s", a.v[i]);
			fputc('\n', f);
			fclose(f);
		}
	}
	pid = spawn(a.v, log);
	args_free(&a);
	if (pid < 0)
		return (int)pid;
	s->child = pid;
	s->nkilled = 0;
	s->exit_st = 0;
	unmap_metrics(s);
	return 0;
}

/* `shmrun check --rescale` with the overrides of @f: whether the rescale is valid. */
static bool rescale_valid(struct stress *s, uint32_t k, const struct fault *f, bool widths)
{
	char dir[PATH_MAX], log[PATH_MAX];
	struct args a = {0};
	pid_t pid;
	int st = -1;

	run_paths(s, k, dir, log);
	run_args(s, k, "check", true, f, widths, &a);
	pid = spawn(a.v, log);
	args_free(&a);
	if (pid < 0)
		return false;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		if (got_signal)
			kill(-pid, SIGKILL);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* Flip one byte of a state file of the newest complete checkpoint of run @k
 * when there is an older complete one. Return: 0 done; 1 not (why in @note). */
static int damage_newest(struct stress *s, uint32_t k, struct fault *f)
{
	char dir[PATH_MAX], path[PATH_MAX];
	uint64_t newest = 0, older = 0;
	struct dirent *e;
	DIR *d;

	fmt(dir, sizeof(dir), "%s/run-%u/ckpt", s->work, k);
	d = opendir(dir);
	if (!d) {
		fmt(f->note, sizeof(f->note), "no checkpoint directory");
		return 1;
	}
	while ((e = readdir(d))) {
		uint64_t ep;
		char *end;
		struct stat st;

		if (strncmp(e->d_name, "ckpt-", 5) != 0)
			continue;
		ep = strtoull(e->d_name + 5, &end, 10);
		if (*end)
			continue;
		fmt(path, sizeof(path), "%s/%s/MANIFEST", dir, e->d_name);
		if (stat(path, &st))
			continue;
		for (uint32_t i = 0; i < s->ndamaged; i++)
			if (s->damaged[i] == ep)
				ep = 0;
		if (!ep)
			continue;
		if (ep > newest) {
			older = newest;
			newest = ep;
		} else if (ep > older) {
			older = ep;
		}
	}
	closedir(d);
	if (!newest || !older) {
		fmt(f->note, sizeof(f->note),
			 "only %s complete checkpoint: nothing to fall back to, not damaged",
			 newest ? "one" : "no");
		return 1;
	}
	fmt(dir, sizeof(dir), "%s/run-%u/ckpt/ckpt-%" PRIu64, s->work, k, newest);
	d = opendir(dir);
	if (!d)
		return 1;
	{
		char *files[256];
		uint32_t n = 0;

		while ((e = readdir(d)) && n < 256) {
			size_t l = strlen(e->d_name);
			struct stat st;

			fmt(path, sizeof(path), "%s/%s", dir, e->d_name);
			if (l > 6 && strcmp(e->d_name + l - 6, ".state") == 0 && stat(path, &st) == 0 &&
			    st.st_size > 0)
				files[n++] = strdup(e->d_name);
		}
		closedir(d);
		if (!n) {
			fmt(f->note, sizeof(f->note),
				 "checkpoint %" PRIu64 " has no state file: not damaged", newest);
			return 1;
		}
		qsort(files, n, sizeof(*files), name_cmp); /* readdir order is not the seed's */
		{
			uint32_t which = (uint32_t)(f->pick % n);
			struct stat st;
			int fd;
			unsigned char b;
			off_t at;

			fmt(path, sizeof(path), "%s/%s", dir, files[which]);
			fd = open(path, O_RDWR | O_CLOEXEC);
			if (fd < 0 || fstat(fd, &st)) {
				if (fd >= 0)
					close(fd);
				for (uint32_t i = 0; i < n; i++)
					free(files[i]);
				return 1;
			}
			at = (off_t)((f->pick >> 20) % (uint64_t)st.st_size);
			if (pread(fd, &b, 1, at) == 1) {
				b ^= 0xff;
				if (pwrite(fd, &b, 1, at) == 1)
					fsync(fd);
				if (s->ndamaged < MAX_FAULTS)
					s->damaged[s->ndamaged++] = newest;
			}
			close(fd);
			fmt(f->note, sizeof(f->note),
				 "flipped byte %lld of ckpt-%" PRIu64 "/%s (older: ckpt-%" PRIu64 ")",
				 (long long)at, newest, files[which], older);
		}
		for (uint32_t i = 0; i < n; i++)
			free(files[i]);
	}
	return 0;
}

/*
 * SIGTERM the running child and wait for it (a final checkpoint, exit 0).
 * Return: 0 stopped after a final checkpoint; 2 stopped without one (it was
 * restarting workers); -1 failed (reported in @t); -EINTR.
 */
static int term_child(struct stress *s, int64_t deadline, struct text *t)
{
	char b[64];
	int st;

	kill(s->child, SIGTERM);
	st = wait_child(s, deadline);
	if (st == -EINTR)
		return -EINTR;
	if (st == -ETIMEDOUT) {
		text_add(t, "  the launcher did not stop after SIGTERM before the run's timeout\n");
		return -1;
	}
	/* SIGTERM while the launcher restarts workers (after a kill) stops it at
	 * the last complete checkpoint, exit 0; one whose final checkpoint is
	 * overdue stops without it and dies by the signal (docs/shmrun.1.md,
	 * SIGNALS), and a rerun resumes from the last checkpoint. Either is a stop. */
	if (WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM)
		return 2;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		text_add(t, "  after SIGTERM the run ended with %s (expected 0: a stop with a final "
			    "checkpoint)\n",
			 status_text(st, b, sizeof(b)));
		return -1;
	}
	return 0;
}

/* Inject fault @f into run @k. Return: 0; -1 the run failed (in @t); -EINTR. */
static int inject(struct stress *s, uint32_t k, struct fault *f, int64_t started,
		  int64_t deadline, struct text *t)
{
	uint32_t widx = 0;
	pid_t pid;
	int r;

	switch (f->kind) {
	case F_KILL:
	case F_STOP:
		/* a worker may be restarting (after a kill: up to the restart
		 * backoff, which doubles): wait for one, until the run's deadline */
		while (!(pid = worker_pid(s, f->worker, &widx)) && shmrun_now_ns() < deadline) {
			if (got_signal)
				return -EINTR;
			if (wait_child(s, 0) >= 0)
				return 0; /* it ended meanwhile: not injected */
			sleep_ms(5);
		}
		if (!pid)
			return 0;
		f->injected = true;
		f->pid = pid;
		f->at_s = secs(shmrun_now_ns() - started);
		if (f->kind == F_KILL) {
			kill(pid, SIGKILL);
			if (s->nkilled < MAX_FAULTS)
				s->killed[s->nkilled++] = pid;
			fmt(f->note, sizeof(f->note), "kill -9 worker %u (pid %ld)", widx,
				 (long)pid);
		} else {
			kill(pid, SIGSTOP);
			for (uint32_t ms = 0; ms < f->stop_ms && !got_signal; ms += 10)
				sleep_ms(10);
			kill(pid, SIGCONT);
			fmt(f->note, sizeof(f->note),
				 "SIGSTOP worker %u (pid %ld) for %u ms, SIGCONT", widx, (long)pid,
				 f->stop_ms);
		}
		return got_signal ? -EINTR : 0;
	case F_TERM:
	case F_RESCALE:
	case F_DAMAGE: {
		pid_t launcher = s->child;
		bool widths = true;

		f->at_s = secs(shmrun_now_ns() - started);
		r = term_child(s, deadline, t);
		if (r < 0)
			return r;
		f->injected = true;
		f->pid = launcher;
		if (f->kind == F_TERM) {
			fmt(f->note, sizeof(f->note), "SIGTERM launcher (pid %ld)%s, resumed",
			    (long)launcher, r == 2 ? " (stopped without a final checkpoint)" : "");
			return start_run(s, k, false) ? -1 : 0;
		}
		if (f->kind == F_DAMAGE) {
			char note[sizeof(f->note)];

			if (damage_newest(s, k, f))
				f->done = F_TERM;
			fmt(note, sizeof(note), "SIGTERM launcher (pid %ld), %s, resumed",
				 (long)launcher, f->note);
			fmt(f->note, sizeof(f->note), "%s", note);
			return start_run(s, k, false) ? -1 : 0;
		}
		if (!rescale_valid(s, k, f, true)) {
			widths = false;
			if (!rescale_valid(s, k, f, false)) {
				fmt(f->note, sizeof(f->note),
					 "SIGTERM launcher (pid %ld); `check --rescale` refused %u "
					 "workers: resumed without a rescale",
					 (long)launcher, f->workers);
				f->done = F_TERM; /* counted as what it was */
				return start_run(s, k, false) ? -1 : 0;
			}
		}
		fmt(f->note, sizeof(f->note), "SIGTERM launcher (pid %ld), --rescale to %u worker%s%s",
		    (long)launcher, f->workers, f->workers == 1 ? "" : "s",
		    widths ? " with new widths" : " (widths refused: workers only)");
		s->job.workers = f->workers; /* later faults pick among these */
		s->cur = f;
		s->cur_widths = widths;
		return start_run(s, k, true) ? -1 : 0;
	}
	default:
		return 0;
	}
}

/*
 * Faulted run @k: the schedule of its seed, then the comparison. Return: 0
 * matched; 1 failed (reported); -EINTR.
 */
static int faulted_run(struct stress *s, uint32_t k, uint32_t nruns)
{
	uint64_t seed = run_seed(s, k);
	struct fault *f = schedule_make(s, seed);
	char dir[PATH_MAX], log[PATH_MAX], tag[64];
	struct text t = {0};
	int64_t started, deadline, timeout;
	uint32_t saved_workers = s->job.workers, ninj = 0;
	bool failed = false, any_rescale = false;
	int rc = 0, st;

	if (!f)
		return -ENOMEM;
	s->cur = NULL;
	s->ndamaged = 0;
	if (nruns)
		fmt(tag, sizeof(tag), "run %u/%u seed %" PRIu64, k, nruns, seed);
	else
		fmt(tag, sizeof(tag), "run %u seed %" PRIu64, k, seed);
	run_paths(s, k, dir, log);
	if (mkdirs(dir)) {
		fprintf(stderr, "shmrun stress: cannot create %s: %s\n", dir, strerror(errno));
		schedule_free(f, s->faults);
		return 1;
	}
	timeout = s->timeout_ns ? s->timeout_ns : 20 * s->t0_ns;
	if (!s->timeout_ns && timeout < 60 * 1000000000ll)
		timeout = 60 * 1000000000ll;
	say("%s: %u fault%s over %.2f s", tag, s->faults, s->faults == 1 ? "" : "s", secs(s->t0_ns));
	started = shmrun_now_ns();
	deadline = started + timeout;
	if (start_run(s, k, false)) {
		text_add(&t, "  cannot start the run: %s\n", strerror(errno));
		failed = true;
	}
	for (uint32_t i = 0; i < s->faults && !failed; i++) {
		int64_t due = started + (int64_t)((double)s->t0_ns * f[i].permille / 1000.0);
		char what[512];

		/* until it is due; the run may end first */
		while (shmrun_now_ns() < due && s->child) {
			st = wait_child(s, 0);
			if (st == -EINTR) {
				rc = -EINTR;
				goto out;
			}
			if (st >= 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
				char b[64];

				text_add(&t, "  the run ended with %s\n", status_text(st, b, sizeof(b)));
				failed = true;
				break;
			}
			if (st >= 0)
				break;
			sleep_ms(2);
		}
		if (failed)
			break;
		if (!s->child) { /* it ended: the rest are not injected */
			s->not_injected += s->faults - i;
			say("%s: the job ended after %.2f s; %u fault%s not injected", tag,
			    secs(shmrun_now_ns() - started), s->faults - i,
			    s->faults - i == 1 ? "" : "s");
			break;
		}
		/* a fault that needs the job's socket waits for it to come up */
		while (!job_up(s) && s->child && shmrun_now_ns() < deadline && !got_signal) {
			if (wait_child(s, 0) >= 0)
				break;
			sleep_ms(5);
		}
		if (got_signal) {
			rc = -EINTR;
			goto out;
		}
		if (!s->child) {
			s->not_injected += s->faults - i;
			say("%s: the job ended after %.2f s; %u fault%s not injected", tag,
			    secs(shmrun_now_ns() - started), s->faults - i,
			    s->faults - i == 1 ? "" : "s");
			break;
		}
		rc = inject(s, k, &f[i], started, deadline, &t);
		if (rc == -EINTR)
			goto out;
		if (rc) {
			failed = true;
			break;
		}
		rc = 0;
		describe(s, &f[i], what, sizeof(what));
		if (f[i].injected) {
			s->injected[f[i].done]++;
			ninj++;
			if (f[i].kind == F_RESCALE)
				any_rescale = true;
			say("%s: fault %u/%u at %.2f s: %s", tag, i + 1, s->faults, f[i].at_s,
			    f[i].note);
		} else {
			s->not_injected++;
			say("%s: fault %u/%u (%s): not injected, no worker was running", tag, i + 1,
			    s->faults, what);
		}
	}
	if (!failed && !s->child && s->exit_st) { /* it ended badly while a fault waited */
		char b[64];

		text_add(&t, "  the run ended with %s\n", status_text(s->exit_st, b, sizeof(b)));
		failed = true;
	}
	if (!failed && s->child) {
		st = wait_child(s, deadline);
		if (st == -EINTR) {
			rc = -EINTR;
			goto out;
		}
		if (st == -ETIMEDOUT) {
			kill_group(s->child);
			s->child = 0;
			text_add(&t, "  the run did not end within its timeout (%.1f s; --timeout)\n",
				 secs(timeout));
			failed = true;
		} else if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
			char b[64];

			text_add(&t, "  the run ended with %s\n", status_text(st, b, sizeof(b)));
			failed = true;
		}
	}
	if (!failed) {
		for (uint32_t i = 0; i < s->nouts; i++) {
			const struct output *o = &s->outs[i];
			char odir[PATH_MAX];
			struct lines got;
			int r;

			fmt(odir, sizeof(odir), "%s/out/%s.%s", dir, s->job.stages[o->stage].name,
				 o->key);
			r = read_output(o, odir, &got);
			if (r) {
				text_add(&t, "  cannot read %s: %s\n", odir, strerror(-r));
				failed = true;
			} else if (!compare(s, o, &o->golden, &got, o->ordered && !any_rescale, &t)) {
				failed = true;
			}
			lines_free(&got);
		}
	}
	s->runs_done++;
	{
		double dur = secs(shmrun_now_ns() - started);
		struct text sched = {0}, detail = {0};
		char reproduce[PATH_MAX + 128];

		for (uint32_t i = 0; i < s->faults; i++) {
			char what[512];

			describe(s, &f[i], what, sizeof(what));
			if (f[i].injected)
				text_add(&sched, "  fault %u at %.2f s: %s\n", i + 1, f[i].at_s,
					 f[i].note);
			else
				text_add(&sched, "  fault %u at %.1f%% of T0: %s: not injected\n",
					 i + 1, f[i].permille / 10.0, what);
		}
		fmt(reproduce, sizeof(reproduce),
			 "shmrun stress --seed %" PRIu64 " --runs 1 --faults %u (same --kinds, "
			 "--set, --plugin) %s",
			 seed, s->faults, s->conf);
		if (failed) {
			s->runs_failed++;
			text_add(&detail, "seed %" PRIu64 ", %u of %u faults injected\nschedule:\n%s"
					  "differences:\n%sreproduce: %s\n",
				 seed, ninj, s->faults, sched.s ? sched.s : "  (none)\n",
				 t.s ? t.s : "", reproduce);
			say("%s: FAILED", tag);
			fprintf(stderr, "%s", detail.s);
			print_tail(log);
			junit_case(s, k, seed, dur, "the output differs from the fault-free run, or "
						    "the run failed",
				   detail.s, sched.s);
		} else {
			say("%s: ok, %u fault%s injected, every output matched (%.2f s)", tag, ninj,
			    ninj == 1 ? "" : "s", dur);
			junit_case(s, k, seed, dur, NULL, NULL, sched.s);
		}
		free(sched.s);
		free(detail.s);
	}
out:
	if (rc == -EINTR && s->child) {
		kill_group(s->child);
		s->child = 0;
	}
	s->job.workers = saved_workers;
	s->cur = NULL;
	free(t.s);
	schedule_free(f, s->faults);
	return rc == -EINTR ? -EINTR : failed;
}

/* The golden run (run-0): T0 and the golden outputs. Return: 0; 1 failed; 2 refused; -EINTR. */
static int golden_run(struct stress *s)
{
	char dir[PATH_MAX], log[PATH_MAX];
	int64_t started;
	int st;

	run_paths(s, 0, dir, log);
	if (mkdirs(dir)) {
		fprintf(stderr, "shmrun stress: cannot create %s: %s\n", dir, strerror(errno));
		return 1;
	}
	say("golden run: %s without faults", s->conf);
	started = shmrun_now_ns();
	if (start_run(s, 0, false))
		return 1;
	st = wait_child(s, s->timeout_ns ? started + s->timeout_ns : INT64_MAX);
	if (st == -EINTR)
		return -EINTR;
	if (st == -ETIMEDOUT) {
		kill_group(s->child);
		s->child = 0;
		fprintf(stderr, "shmrun stress: the golden run did not end within --timeout\n");
		print_tail(log);
		return 1;
	}
	s->t0_ns = shmrun_now_ns() - started;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		char b[64];

		fprintf(stderr, "shmrun stress: the golden run (without faults) ended with %s%s\n",
			status_text(st, b, sizeof(b)),
			WIFEXITED(st) && WEXITSTATUS(st) == 2 ? " (it refused to start)" : "");
		print_tail(log);
		return WIFEXITED(st) && WEXITSTATUS(st) == 2 ? 2 : 1;
	}
	{
		char path[PATH_MAX];
		FILE *f;

		fmt(path, sizeof(path), "%s/out/T0", dir);
		f = fopen(path, "we");
		if (f) {
			fprintf(f, "%.3f\n", secs(s->t0_ns));
			fclose(f);
		}
	}
	for (uint32_t i = 0; i < s->nouts; i++) {
		char odir[PATH_MAX];
		int r;

		fmt(odir, sizeof(odir), "%s/out/%s.%s", dir, s->job.stages[s->outs[i].stage].name,
			 s->outs[i].key);
		r = read_output(&s->outs[i], odir, &s->outs[i].golden);
		if (r) {
			fprintf(stderr, "shmrun stress: cannot read %s: %s\n", odir, strerror(-r));
			return 1;
		}
	}
	say("golden run: %.2f s, %s", secs(s->t0_ns), "outputs recorded");
	return 0;
}

/* The golden outputs from --expect DIR. Return: 0; 2 (reported). */
static int read_expect(struct stress *s)
{
	char path[PATH_MAX];
	FILE *f;
	double t0 = 0;

	for (uint32_t i = 0; i < s->nouts; i++) {
		char odir[PATH_MAX];
		struct stat st;
		int r;

		fmt(odir, sizeof(odir), "%s/%s.%s", s->expect,
			 s->job.stages[s->outs[i].stage].name, s->outs[i].key);
		if (stat(odir, &st) || !S_ISDIR(st.st_mode)) {
			fprintf(stderr,
				"shmrun stress: --expect %s: no directory %s.%s/ for stage '%s' key "
				"%s; make one with `shmrun stress --runs 0 --keep --workdir W "
				"topology.conf` and pass W/run-0/out\n",
				s->expect, s->job.stages[s->outs[i].stage].name, s->outs[i].key,
				s->job.stages[s->outs[i].stage].name, s->outs[i].key);
			return 2;
		}
		r = read_output(&s->outs[i], odir, &s->outs[i].golden);
		if (r) {
			fprintf(stderr, "shmrun stress: --expect: cannot read %s: %s\n", odir,
				strerror(-r));
			return 2;
		}
	}
	fmt(path, sizeof(path), "%s/T0", s->expect);
	f = fopen(path, "re");
	if (f) {
		char extra;
		int n = fscanf(f, "%lf %c", &t0, &extra);

		fclose(f);
		/* also NaN: !(t0 > 0) */
		if (n != 1 || !(t0 > 0 && t0 <= 86400)) {
			fprintf(stderr,
				"shmrun stress: --expect: %s must hold the golden run's duration in "
				"seconds, a number above 0 and at most 86400 (e.g. 2.31)\n",
				path);
			return 2;
		}
	}
	if (t0 <= 0) {
		t0 = 2;
		say("--expect %s has no T0 file (the golden run's duration in seconds); faults are "
		    "scheduled over 2 s",
		    s->expect);
	}
	s->t0_ns = (int64_t)(t0 * 1e9);
	return 0;
}

static int make_workdir(struct stress *s)
{
	if (s->workdir_opt) {
		char *real;

		if (mkdirs(s->workdir_opt)) {
			fprintf(stderr, "shmrun stress: --workdir %s: cannot create it: %s\n",
				s->workdir_opt, strerror(errno));
			return 2;
		}
		real = realpath(s->workdir_opt, NULL);
		if (!real || strlen(real) > PATH_MAX - 512) {
			fprintf(stderr, "shmrun stress: --workdir %s: %s\n", s->workdir_opt,
				real ? "path too long" : strerror(errno));
			free(real);
			return 2;
		}
		fmt(s->work, sizeof(s->work), "%s", real);
		free(real);
		{
			DIR *d = opendir(s->work);
			struct dirent *e;
			bool empty = true;

			while (d && (e = readdir(d)))
				if (strncmp(e->d_name, "run-", 4) == 0)
					empty = false;
			if (d)
				closedir(d);
			if (!empty) {
				fprintf(stderr, "shmrun stress: --workdir %s holds run-* directories "
						"of an earlier stress run; remove them or give another "
						"directory\n",
					s->work);
				return 2;
			}
		}
	} else {
		const char *tmp = getenv("TMPDIR");
		char tmpl[PATH_MAX], *real;

		fmt(tmpl, sizeof(tmpl), "%s/shmrun-stress-XXXXXX", tmp && *tmp ? tmp : "/tmp");
		if (!mkdtemp(tmpl)) {
			fprintf(stderr, "shmrun stress: cannot create a work directory %s: %s (set "
					"TMPDIR or --workdir)\n",
				tmpl, strerror(errno));
			return 2;
		}
		real = realpath(tmpl, NULL);
		fmt(s->work, sizeof(s->work), "%s", real ? real : tmpl);
		free(real);
		s->work_made = true;
	}
	return 0;
}

static void summary(struct stress *s)
{
	uint32_t total = 0;
	char kinds[256] = "", missed[64] = "";
	size_t off = 0;

	/* the kinds asked, and a term done in place of a damage */
	for (int i = 0; i < F_NKINDS; i++) {
		total += s->injected[i];
		if (s->kinds[i] || s->injected[i])
			off += (size_t)snprintf(kinds + off, sizeof(kinds) - off, "%s%s %u",
						off ? ", " : "", kind_names[i], s->injected[i]);
	}
	if (s->not_injected)
		fmt(missed, sizeof(missed), ", %u not injected (the job had ended)", s->not_injected);
	if (s->runs_failed)
		say("%u run%s, %u failed, %u fault%s injected (%s)%s", s->runs_done,
		    s->runs_done == 1 ? "" : "s", s->runs_failed, total, total == 1 ? "" : "s", kinds,
		    missed);
	else
		say("%u run%s, %u fault%s injected (%s)%s, every sink's output matched the "
		    "fault-free run",
		    s->runs_done, s->runs_done == 1 ? "" : "s", total, total == 1 ? "" : "s", kinds,
		    missed);
}

int shmrun_stress_main(int argc, char **argv)
{
	struct stress *s = calloc(1, sizeof(*s));
	struct sigaction sa;
	int rc, r;
	int64_t began = 0;
	bool junit_done = false;

	if (!s)
		return 1;
	{
		sigset_t set;

		sigemptyset(&set);
		sigaddset(&set, SIGTERM);
		sigaddset(&set, SIGINT);
		sigaddset(&set, SIGHUP);
		sigprocmask(SIG_UNBLOCK, &set, NULL);
	}
	rc = parse_options(s, argc, argv);
	if (rc) {
		free(s);
		return rc < 0 ? 0 : rc;
	}
	if (s->log_level)
		shmrun_log_set_level(shmrun_log_parse_level(s->log_level));
	for (uint32_t i = 0; i < s->nplugins; i++) {
		char *err = NULL;

		r = shmrun_plugin_load(s->plugins[i], &err);
		if (r) {
			fprintf(stderr, "shmrun stress: --plugin: %s\n", err ? err : strerror(-r));
			free(err);
			free(s);
			return 2;
		}
	}
	rc = load_topology(s);
	if (rc) {
		rc = rc < 0 ? 1 : rc;
		goto out_job;
	}
	if (s->print_schedule) {
		rc = print_schedule(s);
		goto out_job;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	if (s->junit) { /* refused now, not after an hour of runs */
		char tmp[PATH_MAX];
		struct stat jst;
		int fd;

		if (stat(s->junit, &jst) == 0 && !S_ISREG(jst.st_mode)) {
			rc = usage_err("--junit %s: not a regular file; name the report file",
				       s->junit);
			goto out_job;
		}
		fmt(tmp, sizeof(tmp), "%s.tmp-XXXXXX", s->junit);
		fd = mkstemp(tmp);
		if (fd < 0) {
			rc = usage_err("--junit %s: cannot write beside it (%s): %s", s->junit, tmp,
				       strerror(errno));
			goto out_job;
		}
		close(fd);
		unlink(tmp);
	}
	rc = make_workdir(s);
	if (rc)
		goto out_job;
	say("seed %" PRIu64 ", work dir %s", s->seed, s->work);
	began = shmrun_now_ns();
	rc = s->expect ? read_expect(s) : golden_run(s);
	if (rc) {
		if (rc != -EINTR)
			junit_error(s, s->expect ? "golden output (--expect)" : "golden run",
				    s->expect ? "the --expect directory cannot be used (see the output)"
					      : "the run without faults failed (see the output); "
						"nothing was compared");
		goto out;
	}
	if (s->t0_ns < 300 * 1000000ll && s->faults)
		say("warning: the job takes %.0f ms: faults may come after it ended; slow a "
		    "source with `rate` (e.g. --set SOURCE.rate=50000) so it runs a few seconds",
		    secs(s->t0_ns) * 1000);
	for (uint32_t k = 1;; k++) {
		if (s->duration_ns ? (k > 1 && shmrun_now_ns() - began >= s->duration_ns) : k > s->runs)
			break;
		r = faulted_run(s, k, s->duration_ns ? 0 : s->runs);
		if (r == -EINTR) {
			rc = -EINTR;
			goto out;
		}
		if (r < 0) {
			junit_error(s, "faulted run", "a run could not be started (see the output)");
			rc = 1;
			goto out;
		}
	}
	rc = s->runs_failed ? 1 : 0;
	s->total_s = secs(shmrun_now_ns() - began);
	summary(s);
	if (junit_write(s) && !rc)
		rc = 1;
	junit_done = true;
out:
	if (s->child) {
		kill_group(s->child);
		s->child = 0;
	}
	unmap_metrics(s);
	if (rc == -EINTR) {
		say("stopped by signal %d; the runs were stopped; work dir kept: %s", (int)got_signal,
		    s->work);
		s->total_s = secs(shmrun_now_ns() - began);
		{
			char why[64];

			fmt(why, sizeof(why), "stopped by signal %d before the runs ended",
			    (int)got_signal);
			junit_error(s, "interrupted", why);
		}
		junit_write(s);
		junit_done = true;
	} else if (rc == 0 && !s->keep && s->work_made) {
		rm_tree(s->work);
	} else if (rc == 0 && !s->keep) { /* --workdir: what stress made in it */
		DIR *d = opendir(s->work);
		struct dirent *e;

		while (d && (e = readdir(d))) {
			char sub[PATH_MAX + 256];

			if (strncmp(e->d_name, "run-", 4) != 0)
				continue;
			fmt(sub, sizeof(sub), "%s/%s", s->work, e->d_name);
			rm_tree(sub);
		}
		if (d)
			closedir(d);
	} else {
		say("work dir kept: %s", s->work);
	}
	if (!junit_done && began)
		junit_write(s); /* a failure before the summary: its <error> */
out_job:
	for (uint32_t i = 0; i < s->nouts; i++) {
		lines_free(&s->outs[i].golden);
		free(s->outs[i].base);
	}
	free(s->outs);
	free(junit_cases.s);
	shmrun_job_free(&s->job);
	{
		int sig = got_signal;

		free(s);
		if (rc == -EINTR)
			shmrun_die_by_signal(sig);
	}
	return rc;
}
