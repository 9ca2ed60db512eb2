/*
 * runtime/conf_job.c: pass 2 of the topology loader, [job] and the stages:
 * the job's keys into struct shmrun_job, and each stage's operator, width and
 * parameters into struct shmrun_stage.
 *
 * What it does. The keys are tables: job_keys[] (indexed by JK_*) for [job],
 * stage_keys[] for what every stage accepts, and each operator's own params
 * (runtime/ops/). load_job() reads [job] through load_params() and then checks
 * what the table cannot say: a name's characters, ring_bytes a power of two,
 * checkpoint_dir a directory short enough, `workers` and `cpus` not both, the
 * listed CPUs online and in this process's affinity mask (probe_cpus()).
 * load_stage() finds the operator (or the nearest name), checks the width
 * against vnodes and loads the operator's params.
 *
 * Invariants.
 *   - load_job() runs before any load_stage(): a width is checked against
 *     the vnodes [job] gave, wherever [job] sits in the file; if vnodes was
 *     wrong (ld->vnodes_ok false), against MAX_VNODES, so one error is not
 *     reported twice.
 *   - With no error reported, job->workers >= 1 and job->cpus holds one CPU
 *     per worker: the listed CPUs, or the allowed CPUs round-robin.
 *   - ld->ops_ok is false if any stage lacks a known operator, and
 *     ld->width_ok[i] says whether stage i's width was valid: the graph pass
 *     checks only what these make meaningful.
 *
 * Rejected designs.
 *   - Keys looked up by name in code (if key == "vnodes" ...): the tables are
 *     also what shmrun_job_keys() hands out and what the "did you mean"
 *     suggestions and the "accepted keys" lists search; code and lists would
 *     drift apart.
 *   - Checking each key as inih hands it over: a stage's width depends on
 *     [job] vnodes, wherever [job] sits in the file, and a missing required
 *     key is known only once the whole section has been read.
 */
#include <ctype.h>
#include <errno.h>
#include <glob.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/hosts.h"
#include "conf_internal.h"
#include "control.h"
#include "multihost.h"
#include "prom.h"
#include "task.h"

/* The CPUs that are online, and those this process may run on. */
void probe_cpus(struct loader *ld)
{
	char text[4096];
	size_t sz = CPU_ALLOC_SIZE(MAX_CPU + 1);
	cpu_set_t *set;
	int32_t dup;
	FILE *f;
	size_t n = 0;

	memset(ld->online, 0, sizeof(ld->online));
	f = fopen("/sys/devices/system/cpu/online", "r");
	if (f) {
		n = fread(text, 1, sizeof(text) - 1, f);
		fclose(f);
	}
	while (n && isspace((unsigned char)text[n - 1]))
		n--;
	text[n] = '\0';
	if (!n || parse_cpulist(text, ld->online, &dup) != 0) {
		long k = sysconf(_SC_NPROCESSORS_ONLN);

		memset(ld->online, 0, sizeof(ld->online));
		for (long c = 0; c < (k > 0 ? k : 1) && c <= MAX_CPU; c++)
			bit_set(ld->online, (uint32_t)c);
	}

	memcpy(ld->allowed, ld->online, sizeof(ld->allowed));
	set = CPU_ALLOC(MAX_CPU + 1);
	if (set && sched_getaffinity(0, sz, set) == 0) {
		memset(ld->allowed, 0, sizeof(ld->allowed));
		for (uint32_t c = 0; c <= MAX_CPU; c++)
			if (CPU_ISSET_S(c, sz, set) && bit_test(ld->online, c))
				bit_set(ld->allowed, c);
	}
	if (set)
		CPU_FREE(set);
}

/* ------------------------------------------------------------------------ */
/* Pass 2: [job] */

enum {
	JK_NAME,
	JK_WORKERS,
	JK_CPUS,
	JK_HOSTS,
	JK_HOST_FLUSH,
	JK_HOST_TIMEOUT,
	JK_VNODES,
	JK_RING_BYTES,
	JK_IDLE,
	JK_CKPT_DIR,
	JK_CKPT_INTERVAL,
	JK_CKPT_TIMEOUT,
	JK_CKPT_RETAIN,
	JK_CKPT_LAYOUT,
	JK_RESTART_ATTEMPTS,
	JK_UNION_LIMIT,
	JK_PW_WARN,
	JK_PLUGINS,
	JK_OP_TIMEOUT,
	JK_IDLE_TIMEOUT,
	JK_METRICS,
	JK_ALLOW_LOSS,
	JK_COUNT,
};

/* clang-format off */
/* The [job] keys, in the order of the JK_* indices (docs/topology.md lists them). */
static const struct shmrun_param_def job_keys[] = {
	[JK_NAME] = {.key = "name", .type = SHMRUN_PARAM_STRING,
		     .doc = "job name (default: the conf file's name without .conf)"},
	[JK_WORKERS] = {.key = "workers", .type = SHMRUN_PARAM_COUNT, .min = 1,
			.max = MAX_WORKERS, .doc = "worker processes (default 1)"},
	[JK_CPUS] = {.key = "cpus", .type = SHMRUN_PARAM_STRING,
		     .doc = "one worker per listed CPU, e.g. 0-3,8"},
	[JK_HOSTS] = {.key = "hosts", .type = SHMRUN_PARAM_COUNT, .min = 1,
		      .max = SHMRUN_MAX_HOSTS,
		      .doc = "hosts the job runs on, one MPI process each, each with `workers` "
			     "workers (default: the MPI world size from the environment, else 1; "
			     "docs/multihost.md)"},
	[JK_HOST_FLUSH] = {.key = "host_flush", .type = SHMRUN_PARAM_DURATION, .def = "1ms",
			   .min = 1000000, .max = 1000000000ull, .tuning = true,
			   .doc = "frames towards another host leave at the latest this long after "
				  "the first one was buffered (hosts > 1)"},
	[JK_HOST_TIMEOUT] = {.key = "host_timeout", .type = SHMRUN_PARAM_DURATION,
			     .def = "10s", .min = 1000000000ull, .max = MAX_DURATION_NS,
			     .tuning = true,
			     .doc = "a host silent this long aborts the job (hosts > 1)"},
	[JK_VNODES] = {.key = "vnodes", .type = SHMRUN_PARAM_COUNT, .def = "256", .min = 1,
		       .max = MAX_VNODES, .doc = "key buckets V"},
	[JK_RING_BYTES] = {.key = "ring_bytes", .type = SHMRUN_PARAM_SIZE, .def = "1M",
			   .min = SHMRUN_RING_MIN_CAPACITY, .max = SHMRUN_RING_MAX_CAPACITY,
			   .doc = "capacity of each ring, a power of two"},
	[JK_IDLE] = {.key = "idle", .type = SHMRUN_PARAM_ENUM, .def = "hybrid",
		     .choices = "spin sleep hybrid", .doc = "what an idle worker does"},
	[JK_CKPT_DIR] = {.key = "checkpoint_dir", .type = SHMRUN_PARAM_PATH,
			 .doc = "where checkpoints go (absent: no checkpoints)"},
	[JK_CKPT_INTERVAL] = {.key = "checkpoint_interval", .type = SHMRUN_PARAM_DURATION,
			      .def = "500ms", .min = 1000000, .max = MAX_DURATION_NS,
			      .doc = "time between checkpoints"},
	[JK_CKPT_TIMEOUT] = {.key = "checkpoint_timeout", .type = SHMRUN_PARAM_DURATION,
			     .def = "60s", .min = 1000000, .max = MAX_DURATION_NS,
			     .doc = "a checkpoint not complete by then fails"},
	[JK_CKPT_RETAIN] = {.key = "checkpoint_retain", .type = SHMRUN_PARAM_COUNT, .def = "2",
			    .min = 1, .max = 1000000, .doc = "complete checkpoints kept"},
	[JK_CKPT_LAYOUT] = {.key = "checkpoint_layout", .type = SHMRUN_PARAM_ENUM, .def = "shared",
			    .choices = "shared per_host",
			    .doc = "with hosts > 1: one checkpoint_dir every host shares, or one per "
				   "host ({host} in checkpoint_dir is the host index)"},
	[JK_RESTART_ATTEMPTS] = {.key = "restart_attempts", .type = SHMRUN_PARAM_COUNT,
				 .def = "10", .max = 1000000,
				 .doc = "restarts after a crash before the job gives up"},
	[JK_UNION_LIMIT] = {.key = "union_state_limit", .type = SHMRUN_PARAM_SIZE, .def = "64M",
			    .min = 1, .max = 1ull << 40,
			    .doc = "largest pool of union per-worker state a rescale hands to "
				   "every instance"},
	[JK_PW_WARN] = {.key = "per_worker_state_warn", .type = SHMRUN_PARAM_SIZE, .def = "1M",
			.min = 1, .max = 1ull << 40,
			.doc = "warn when an instance's per-worker state passes this size"},
	[JK_PLUGINS] = {.key = "plugins", .type = SHMRUN_PARAM_PATHS,
			.doc = "operator plugins to load: shared objects (docs/operators.md)"},
	[JK_OP_TIMEOUT] = {.key = "operator_timeout", .type = SHMRUN_PARAM_DURATION,
			   .min = 1000000, .max = MAX_DURATION_NS,
			   .doc = "report an operator callback that has not returned within it "
				  "(default: off)"},
	[JK_IDLE_TIMEOUT] = {.key = "idle_timeout", .type = SHMRUN_PARAM_DURATION,
			     .min = 1000000, .max = MAX_DURATION_NS,
			     .doc = "an input that delivered nothing for this long stops holding "
				    "back the watermark of the task it feeds (default: off)"},
	[JK_METRICS] = {.key = "metrics", .type = SHMRUN_PARAM_STRING,
			.doc = "serve Prometheus metrics at http://ADDRESS/metrics: PORT (loopback), "
			       "HOST:PORT or [IPV6]:PORT (default: off)"},
	[JK_ALLOW_LOSS] = {.key = "allow_data_loss_on_crash", .type = SHMRUN_PARAM_BOOL,
			   .def = "false", .tuning = true,
			   .doc = "accept checkpoint_dir with a source that cannot be replayed "
				  "(stdin_source, socket_source): what it read since the last "
				  "checkpoint is lost on a crash (at-most-once)"},
	[JK_COUNT] = {0},
};

/* Stage keys every operator accepts, besides its own; the SK_* are the
 * indices load_stage() reads by. */
enum { SK_OP, SK_WIDTH, SK_INPUT, SK_COMBINE, SK_WM_DELAY, SK_WM_INTERVAL };
static const struct shmrun_param_def stage_keys[] = {
	{.key = "op", .type = SHMRUN_PARAM_STRING, .required = true, .doc = "the operator"},
	{.key = "width", .type = SHMRUN_PARAM_COUNT, .def = "1", .min = 1, .max = MAX_VNODES,
	 .doc = "parallelism, 1..vnodes"},
	{.key = "input", .type = SHMRUN_PARAM_STRING, .doc = "upstream stages and edge kinds"},
	{.key = "combine", .type = SHMRUN_PARAM_BOOL,
	 .doc = "pre-aggregate on the sending side of shuffle edges into this stage (default: "
		"on where the operator has a combiner)"},
	[SK_WM_DELAY] = {.key = "watermark_delay", .type = SHMRUN_PARAM_DURATION,
			 .max = MAX_DURATION_NS,
			 .doc = "generate watermarks: the largest event time emitted so far less "
				"this bounded out-of-orderness (default: off, none generated)"},
	[SK_WM_INTERVAL] = {.key = "watermark_interval", .type = SHMRUN_PARAM_DURATION,
			    .def = "200ms", .min = 1000000, .max = MAX_DURATION_NS,
			    .doc = "how often a stage with watermark_delay generates a watermark"},
	{0},
};
/* clang-format on */

const struct shmrun_param_def *shmrun_job_keys(void)
{
	return job_keys;
}

const struct shmrun_param_def *shmrun_stage_keys(void)
{
	return stage_keys;
}

static bool valid_name(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > MAX_NAME_LEN)
		return false;
	for (; *s; s++)
		if (!is_name_char(*s))
			return false;
	return true;
}

/* Longest checkpoint_dir: see job.h. */
enum { CKPT_DIR_MAX = SHMRUN_CKPT_DIR_MAX };

/* Default job name: the file's base name without ".conf", made a valid name. */
static char *default_name(const char *path)
{
	const char *base = strrchr(path, '/');
	size_t n;
	char *out;

	if (strcmp(path, SHMRUN_STDIN_NAME) == 0)
		return strdup("stdin");
	base = base ? base + 1 : path;
	n = strlen(base);
	if (n > 5 && strcmp(base + n - 5, ".conf") == 0)
		n -= 5;
	if (n > MAX_NAME_LEN)
		n = MAX_NAME_LEN;
	if (n == 0 || (n <= 2 && strspn(base, ".") >= n)) /* "", ".", "..": no file name */
		return strdup("job");
	out = strndup(base, n);
	for (size_t i = 0; out && i < n; i++)
		if (!is_name_char(out[i]))
			out[i] = '_';
	return out;
}

/* [job] cpus = LIST (@cp): checked against the CPUs online and allowed, then
 * one worker per CPU. Return: 0 (errors are reported) or -ENOMEM. */
static int load_cpu_list(struct loader *ld, const struct shmrun_param *cp)
{
	struct shmrun_job *job = ld->job;
	uint64_t map[CPU_WORDS];
	char list[256];
	int32_t dup;
	int r;

	r = parse_cpulist(cp->value, map, &dup);
	if (r == -EINVAL) {
		errorf(ld, cp->line,
		       "cpus = '%s' in [job] is not a valid CPU list; expected CPU numbers "
		       "and ranges separated by commas, e.g. 0-3,8",
		       cp->value);
		return 0;
	}
	if (r == -ERANGE) {
		errorf(ld, cp->line,
		       "cpus = '%s' in [job] names a CPU above %u; CPU numbers go from 0 "
		       "to %u (online CPUs: %s)",
		       cp->value, MAX_CPU, MAX_CPU, fmt_cpulist(ld->online, list, sizeof(list)));
		return 0;
	}
	if (dup >= 0) {
		errorf(ld, cp->line, "cpus = '%s' in [job] lists CPU %d twice", cp->value, dup);
		return 0;
	}
	for (uint32_t c = 0; c <= MAX_CPU; c++) {
		if (!bit_test(map, c))
			continue;
		if (!bit_test(ld->online, c)) {
			errorf(ld, cp->line,
			       "cpus = '%s' in [job]: CPU %u is not online (online CPUs: "
			       "%s)",
			       cp->value, c, fmt_cpulist(ld->online, list, sizeof(list)));
			return 0;
		} else if (!bit_test(ld->allowed, c)) {
			errorf(ld, cp->line,
			       "cpus = '%s' in [job]: CPU %u is online but not in this "
			       "process's CPU affinity mask (allowed: %s)",
			       cp->value, c, fmt_cpulist(ld->allowed, list, sizeof(list)));
			return 0;
		}
	}
	r = cpulist_array(map, &job->cpus, &job->workers);
	if (r)
		return r;
	job->cpus_listed = true;
	return 0;
}

static int load_cpus(struct loader *ld, const struct shmrun_param *p)
{
	struct shmrun_job *job = ld->job;
	const struct shmrun_param *cp = &p[JK_CPUS], *wp = &p[JK_WORKERS];
	char list[256];
	uint32_t nallowed = 0;
	int32_t *allowed;
	int r;

	if (cp->line && wp->line) {
		char wl[160], cl[160];

		/* where each was given: a line of the file, or an override */
		for (int i = 0; i < 2; i++) {
			int line = i ? cp->line : wp->line;
			char *buf = i ? cl : wl;

			if (line < 0)
				snprintf(buf, sizeof(wl), "--set %.140s", ld->sets[OVR_INDEX(line)]);
			else
				snprintf(buf, sizeof(wl), "line %d", line);
		}
		errorf(ld, cp->line > wp->line ? cp->line : wp->line,
		       "both 'workers' (%s) and 'cpus' (%s) are given in [job]; use "
		       "one: workers = N, or cpus = LIST for one pinned worker per CPU",
		       wl, cl);
		return 0;
	}
	if (cp->line && cp->value)
		return load_cpu_list(ld, cp);

	/* workers = N (default 1): round-robin over the CPUs this process may use. */
	job->workers = wp->value ? (uint32_t)wp->u64 : 1;
	r = cpulist_array(ld->allowed, &allowed, &nallowed);
	if (r)
		return r;
	job->cpus = malloc(job->workers * sizeof(*job->cpus));
	if (!job->cpus) {
		free(allowed);
		return -ENOMEM;
	}
	for (uint32_t k = 0; k < job->workers; k++)
		job->cpus[k] = nallowed ? allowed[k % nallowed] : (int32_t)k;
	free(allowed);
	if (job->workers > nallowed && nallowed)
		warnf(ld, wp->line ? wp->line : 1,
		      "workers = %u exceeds the %u CPU%s this process may run on (%s); workers "
		      "share CPUs round-robin, expect lower throughput",
		      job->workers, nallowed, nallowed == 1 ? "" : "s",
		      fmt_cpulist(ld->allowed, list, sizeof(list)));
	return 0;
}

/*
 * [job] hosts (@p[JK_HOSTS]), host_flush and host_timeout: hosts defaults to
 * the MPI world size the environment gives (shmrun_mpi_env()), else 1. Runs
 * after load_cpus(): hosts x workers members must fit the control area.
 */
static void load_hosts(struct loader *ld, const struct shmrun_param *p)
{
	struct shmrun_job *job = ld->job;
	const struct shmrun_param *hp = &p[JK_HOSTS];
	struct shmrun_mpi_env e;
	char why[256];
	int r;

	job->host_flush_ns = p[JK_HOST_FLUSH].value ? p[JK_HOST_FLUSH].u64 : 1000000ull;
	job->host_timeout_ns = p[JK_HOST_TIMEOUT].value ? p[JK_HOST_TIMEOUT].u64 : 10000000000ull;
	job->hosts = 1;
	job->hosts_line = hp->line;
	if (hp->value) {
		job->hosts = (uint32_t)hp->u64;
		job->hosts_set = true;
	} else {
		r = shmrun_mpi_env(&e, why, sizeof(why));
		if (r < 0) {
			errorf(ld, 0,
			       "[job] hosts is not given and the MPI environment cannot be read: "
			       "%s; set hosts = N in [job]",
			       why);
			return;
		}
		if (r == 1) {
			job->hosts = e.size;
			job->hosts_env = e.size_var;
		} else if (e.ignored[0]) {
			warnf(ld, 0,
			      "running on one host: ignored %s in the environment, as no mpirun "
			      "or srun started this process (no PMIX_NAMESPACE with "
			      "PMIX_SERVER_URI*, PMI_FD, or SLURM_STEP_ID with PMIX_RANK/PMI_RANK; "
			      "docs/multihost.md)",
			      e.ignored);
		}
	}
	if (job->workers && (uint64_t)job->hosts * job->workers > SHMRUN_CONTROL_MAX_WORKERS)
		errorf(ld, hp->line,
		       "hosts = %u%s%s%s x workers = %u is %llu workers in all, more than the %u "
		       "a job may have; lower workers or hosts",
		       job->hosts, job->hosts_env ? " (from " : "",
		       job->hosts_env ? job->hosts_env : "", job->hosts_env ? ")" : "",
		       job->workers, (unsigned long long)job->hosts * job->workers,
		       SHMRUN_CONTROL_MAX_WORKERS);
}

/*
 * checkpoint_layout, and {host} in checkpoint_dir (already in the job): only
 * per_host expands {host}, here for host 0 (the launcher re-expands it for
 * its host: shmrun_ckpt_set_host()), the template kept in the job.
 */
static void load_ckpt_layout(struct loader *ld, const struct shmrun_param *p)
{
	struct shmrun_job *job = ld->job;
	char *dir;

	job->checkpoint_per_host = p[JK_CKPT_LAYOUT].value && p[JK_CKPT_LAYOUT].u64 == 1;
	for (const char *b = strchr(job->checkpoint_dir, '{'); b; b = strchr(b + 1, '{'))
		if (strncmp(b, "{host}", 6) != 0) {
			/* {hosts}, {HOST}, {host: a typo stays in the path as it is */
			warnf(ld, p[JK_CKPT_DIR].line,
			      "checkpoint_dir = %s: '{' not part of {host} is taken as it is (the "
			      "only placeholder is {host}, lower case)",
			      job->checkpoint_dir);
			break;
		}
	if (!strstr(job->checkpoint_dir, "{host}"))
		return;
	if (!job->checkpoint_per_host) {
		errorf(ld, p[JK_CKPT_DIR].line,
		       "checkpoint_dir = %s holds {host}, which only checkpoint_layout = per_host "
		       "expands (to the host index); set checkpoint_layout = per_host in [job], "
		       "or remove {host} for one directory every host shares",
		       job->checkpoint_dir);
		return;
	}
	/* the longest index must fit too: no host's path is ever cut short */
	if (strlen(job->checkpoint_dir) + SHMRUN_CKPT_HOST_DIGITS > CKPT_DIR_MAX) {
		errorf(ld, p[JK_CKPT_DIR].line,
		       "checkpoint_dir is too long with {host} expanded (at most %d bytes with "
		       "%d digits for the host index); use a shorter path: %s",
		       CKPT_DIR_MAX, SHMRUN_CKPT_HOST_DIGITS, job->checkpoint_dir);
		return;
	}
	dir = malloc(strlen(job->checkpoint_dir) + SHMRUN_CKPT_HOST_DIGITS + 1);
	if (!dir || shmrun_ckpt_dir_expand(job->checkpoint_dir, 0, dir,
					   strlen(job->checkpoint_dir) + SHMRUN_CKPT_HOST_DIGITS + 1)) {
		free(dir);
		ld->nomem = true;
		return;
	}
	job->checkpoint_dir_template = job->checkpoint_dir;
	job->checkpoint_dir = dir;
}

/*
 * After load_hosts(): with hosts > 1, this process's host index from the MPI
 * environment (0 without one: the launcher refuses that run anyway) into
 * job->host, and checkpoint_dir expanded for it, so that every command (a run,
 * check, plan, --rescale) under mpirun sees its own host's directory; with one
 * host, per_host has no effect: a warning. Return: 0 or -ENOMEM.
 */
static int load_host_index(struct loader *ld, const struct shmrun_param *p)
{
	struct shmrun_job *job = ld->job;
	struct shmrun_mpi_env e;
	char why[256];
	int r;

	if (job->hosts <= 1) {
		if (job->checkpoint_dir && job->checkpoint_per_host && p[JK_CKPT_LAYOUT].line)
			warnf(ld, p[JK_CKPT_LAYOUT].line,
			      "checkpoint_layout = per_host has no effect with one host (hosts = "
			      "1): the one host's checkpoint_dir is the job's");
		return 0;
	}
	if (shmrun_mpi_env(&e, why, sizeof(why)) != 1 || e.rank >= job->hosts)
		return 0;
	r = shmrun_ckpt_set_host(job, e.rank);
	if (r == -ENAMETOOLONG)
		errorf(ld, p[JK_CKPT_DIR].line,
		       "checkpoint_dir is too long with {host} = %u: use a shorter path: %s",
		       e.rank, job->checkpoint_dir_template);
	return r == -ENOMEM ? r : 0;
}

/* checkpoint_dir (taken from @p into the job) or, without it, a warning for
 * each checkpoint key given, which has no effect. */
static void load_ckpt_dir(struct loader *ld, struct shmrun_param *p)
{
	struct shmrun_job *job = ld->job;

	if (p[JK_CKPT_DIR].value) {
		struct stat st;

		if (stat(p[JK_CKPT_DIR].value, &st) == 0 && !S_ISDIR(st.st_mode))
			errorf(ld, p[JK_CKPT_DIR].line,
			       "checkpoint_dir = %s exists and is not a directory; name a directory "
			       "(it is created if missing)",
			       p[JK_CKPT_DIR].value);
		/* room inside it for reset-<time>/ckpt-<epoch>/<stage>.<instance>.state:
		 * no path built from it is ever cut short */
		if (strlen(p[JK_CKPT_DIR].value) > CKPT_DIR_MAX)
			errorf(ld, p[JK_CKPT_DIR].line,
			       "checkpoint_dir is too long (%zu bytes; at most %d, to leave room for "
			       "ckpt-<epoch>/<stage>.<instance>.state inside it); use a shorter path: "
			       "%s",
			       strlen(p[JK_CKPT_DIR].value), CKPT_DIR_MAX, p[JK_CKPT_DIR].value);
		job->checkpoint_dir = p[JK_CKPT_DIR].value;
		job->checkpoint_dir_line = p[JK_CKPT_DIR].line;
		p[JK_CKPT_DIR].value = NULL;
		load_ckpt_layout(ld, p);
	} else {
		static const int ck[] = {JK_CKPT_INTERVAL, JK_CKPT_TIMEOUT, JK_CKPT_RETAIN,
					 JK_CKPT_LAYOUT, JK_RESTART_ATTEMPTS};

		for (size_t i = 0; i < sizeof(ck) / sizeof(ck[0]); i++)
			if (p[ck[i]].line)
				warnf(ld, p[ck[i]].line,
				      "%s has no effect without checkpoint_dir (checkpoints are "
				      "off)",
				      job_keys[ck[i]].key);
	}
}

/* Load one plugin file for [job] plugins at @line; a refusal is an error there. */
static int load_plugin_at(struct loader *ld, const char *path, int line)
{
	char *err = NULL;
	int r = shmrun_plugin_load(path, &err);

	if (r == -ENOMEM && !err)
		return r;
	if (r) {
		errorf(ld, line, "%s", err ? err : strerror(-r));
		ld->plugins_failed_line = line;
	}
	free(err);
	return 0;
}

/*
 * [job] plugins = PATHS (@p: resolved, one per line): each loaded before any
 * stage names its operators; a refusal is an error at the key's line. A path
 * with a wildcard (* ? [) is a glob(3) pattern, as in file_source's path: its
 * matches load in sorted order, and one that matches nothing is an error.
 * Return: 0 (refusals are reported) or -ENOMEM.
 */
static int load_plugins(struct loader *ld, const struct shmrun_param *p)
{
	const char *s = p->value;

	while (s && *s) {
		size_t n = strcspn(s, "\n");
		char *path = strndup(s, n);
		int r = 0;

		if (!path)
			return -ENOMEM;
		if (strpbrk(path, "*?[")) {
			glob_t g;
			int gr = glob(path, 0, NULL, &g);

			if (gr == GLOB_NOSPACE) {
				r = -ENOMEM;
			} else if (gr) {
				errorf(ld, p->line,
				       "plugin pattern %s matches no file; name the shared objects "
				       "to load (build them first)",
				       path);
				ld->plugins_failed_line = p->line;
			} else {
				for (size_t i = 0; i < g.gl_pathc && !r; i++)
					r = load_plugin_at(ld, g.gl_pathv[i], p->line);
			}
			globfree(&g); /* glob() set it up, also when it failed */
		} else {
			r = load_plugin_at(ld, path, p->line);
		}
		free(path);
		if (r)
			return r;
		s += n + (s[n] == '\n');
	}
	return 0;
}

/* [job] metrics = ADDRESS (@p): checked (prom.c parses it), then taken into the job. */
static void load_metrics(struct loader *ld, struct shmrun_param *p)
{
	char why[256];

	if (!p->value)
		return;
	if (shmrun_prom_parse(p->value, NULL, NULL, why, sizeof(why))) {
		errorf(ld, p->line, "metrics = '%s' in [job] %s", p->value, why);
		return;
	}
	ld->job->metrics = p->value;
	ld->job->metrics_line = p->line;
	p->value = NULL;
}

int load_job(struct loader *ld)
{
	static const struct section empty = {.name = (char *)"job", .line = 1};
	struct shmrun_param p[JK_COUNT];
	struct shmrun_job *job = ld->job;
	const struct section *s = ld->job_sec >= 0 ? &ld->sec[ld->job_sec] : &empty;
	bool vnodes_bad;
	int r;

	memset(p, 0, sizeof(p));
	check_unknown_keys(ld, s, "[job]", job_keys, NULL);
	r = load_params(ld, s, "[job]", NULL, job_keys, p);
	if (r)
		goto out;

	if (p[JK_NAME].value && !valid_name(p[JK_NAME].value))
		errorf(ld, p[JK_NAME].line,
		       "name = '%s' in [job] must be 1 to %u letters, digits, '_', '-' or '.'",
		       p[JK_NAME].value, MAX_NAME_LEN);
	else if (p[JK_NAME].value && strspn(p[JK_NAME].value, ".") == strlen(p[JK_NAME].value) &&
		 strlen(p[JK_NAME].value) <= 2)
		/* the job's socket is NAME.sock (docs/observability.md) */
		errorf(ld, p[JK_NAME].line,
		       "name = '%s' in [job] cannot be '.' or '..': it names the job's socket "
		       "file; choose another name",
		       p[JK_NAME].value);
	job->name = p[JK_NAME].value ? strdup(p[JK_NAME].value) : default_name(job->conf_path);
	if (!job->name) {
		r = -ENOMEM;
		goto out;
	}

	vnodes_bad = p[JK_VNODES].value == NULL;
	ld->vnodes_ok = !vnodes_bad;
	job->vnodes = vnodes_bad ? 256 : (uint32_t)p[JK_VNODES].u64;

	job->ring_bytes = p[JK_RING_BYTES].value ? p[JK_RING_BYTES].u64 : 1u << 20;
	if (p[JK_RING_BYTES].value && (job->ring_bytes & (job->ring_bytes - 1)))
		errorf(ld, p[JK_RING_BYTES].line,
		       "ring_bytes = '%s' in [job] is not a power of two; expected e.g. 64K, "
		       "1M or 16M",
		       p[JK_RING_BYTES].value);

	job->idle = SHMRUN_IDLE_HYBRID;
	if (p[JK_IDLE].value && strcmp(p[JK_IDLE].value, "spin") == 0)
		job->idle = SHMRUN_IDLE_SPIN;
	else if (p[JK_IDLE].value && strcmp(p[JK_IDLE].value, "sleep") == 0)
		job->idle = SHMRUN_IDLE_SLEEP;

	load_ckpt_dir(ld, p);
	r = load_plugins(ld, &p[JK_PLUGINS]);
	if (r)
		goto out;
	job->checkpoint_interval_ns =
	    p[JK_CKPT_INTERVAL].value ? p[JK_CKPT_INTERVAL].u64 : 500000000ull;
	job->checkpoint_timeout_ns =
	    p[JK_CKPT_TIMEOUT].value ? p[JK_CKPT_TIMEOUT].u64 : 60000000000ull;
	job->checkpoint_retain = p[JK_CKPT_RETAIN].value ? (uint32_t)p[JK_CKPT_RETAIN].u64 : 2;
	job->restart_attempts =
	    p[JK_RESTART_ATTEMPTS].value ? (uint32_t)p[JK_RESTART_ATTEMPTS].u64 : 10;
	job->union_state_limit = p[JK_UNION_LIMIT].value ? p[JK_UNION_LIMIT].u64 : 64ull << 20;
	job->per_worker_state_warn = p[JK_PW_WARN].value ? p[JK_PW_WARN].u64 : 1ull << 20;
	job->operator_timeout_ns = p[JK_OP_TIMEOUT].value ? p[JK_OP_TIMEOUT].u64 : 0;
	job->idle_timeout_ns = p[JK_IDLE_TIMEOUT].value ? p[JK_IDLE_TIMEOUT].u64 : 0;
	load_metrics(ld, &p[JK_METRICS]);
	job->allow_data_loss_on_crash = p[JK_ALLOW_LOSS].value && p[JK_ALLOW_LOSS].u64;
	r = load_cpus(ld, p);
	if (!r)
		load_hosts(ld, p);
	if (!r)
		r = load_host_index(ld, p);

out:
	for (uint32_t i = 0; i < JK_COUNT; i++)
		free(p[i].value);
	return r;
}

/* ------------------------------------------------------------------------ */
/* Pass 2: stages */

static bool near_job(const char *name)
{
	return edit_distance(name, "job") <= 1;
}

/* Stage @st's operator, from key @op (NULL: absent) of section @s: a missing
 * or unknown operator is reported (with the nearest name) and clears
 * ld->ops_ok. A continuation line on `op` is refused like any single-value
 * key's (refuse_continuation()), before the name is looked up. */
static void load_op(struct loader *ld, struct shmrun_stage *st, const struct section *s,
		    const struct kv *op, const char *what)
{
	const struct shmrun_operator *const *all = shmrun_operators();

	if (op && refuse_continuation(ld, &stage_keys[SK_OP], op, what)) {
		ld->ops_ok = false; /* reported at the continuation line */
	} else if (!op && find_refused(ld, s, "op")) {
		ld->ops_ok = false; /* its line was refused */
	} else if (!op) {
		if (near_job(s->name) || find_kv(s, "workers") || find_kv(s, "vnodes"))
			errorf(ld, s->line,
			       "stage [%s] has no 'op' key; did you mean [job]? (every section "
			       "other than [job] is a stage)",
			       s->name);
		else
			errorf(ld, s->line,
			       "stage '%s' is missing required key 'op' (the operator, e.g. "
			       "op = count)",
			       s->name);
		ld->ops_ok = false;
	} else {
		st->op = shmrun_operator_find(op->value);
		if (!st->op) {
			const char *names[64], *near = shmrun_operator_nearest(op->value);
			uint32_t n = 0;
			char list[1024];

			for (; n < 64 && all[n]; n++)
				names[n] = all[n]->name;
			if (ld->plugins_failed_line)
				errorf(ld, op->line,
				       "unknown operator '%s' in stage '%s'; a plugin of [job] "
				       "plugins (line %d) was refused, see above",
				       op->value, s->name, ld->plugins_failed_line);
			else if (near)
				errorf(ld, op->line,
				       "unknown operator '%s' in stage '%s'; did you mean '%s'?",
				       op->value, s->name, near);
			else
				errorf(ld, op->line,
				       "unknown operator '%s' in stage '%s'; known operators: %s",
				       op->value, s->name,
				       join_words(list, sizeof(list), names, n));
			ld->ops_ok = false;
		}
	}
}

/*
 * Stage @st's `watermark_delay` and `watermark_interval` (section @s): the
 * delay turns generation on; a sink emits nothing to generate from, so the
 * key is refused there; an interval without a delay does nothing and says
 * so. Return: 0 (errors are reported) or -ENOMEM.
 */
static int load_watermark_keys(struct loader *ld, struct shmrun_stage *st,
			       const struct section *s, const char *what)
{
	const struct kv *dk = find_kv(s, "watermark_delay"), *ik = find_kv(s, "watermark_interval");
	const struct shmrun_param_def *dd = &stage_keys[SK_WM_DELAY], *id = &stage_keys[SK_WM_INTERVAL];
	char *text = NULL;
	uint64_t v = 0;
	int r;

	st->watermark_interval_ns = 200000000ull;
	if (ik && !refuse_continuation(ld, id, ik, what)) {
		r = check_value(ld, what, id, ik->value, ik->line, &text, &v);
		if (r < 0)
			return r;
		free(text);
		if (r == 0)
			st->watermark_interval_ns = v;
		if (r == 0 && !dk)
			warnf(ld, ik->line,
			      "watermark_interval has no effect in stage '%s' without "
			      "watermark_delay (the stage generates no watermarks)",
			      st->name);
	}
	if (!dk || refuse_continuation(ld, dd, dk, what))
		return 0;
	r = check_value(ld, what, dd, dk->value, dk->line, &text, &v);
	if (r < 0)
		return r;
	free(text);
	if (r)
		return 0;
	if (st->op->flags & SHMRUN_OP_SINK) {
		errorf(ld, dk->line,
		       "watermark_delay in stage '%s': operator '%s' is a sink and emits no "
		       "records, so it has no event times to generate watermarks from; set "
		       "watermark_delay on the source (or the stage that sets event times) "
		       "upstream instead",
		       st->name, st->op->name);
		return 0;
	}
	st->watermarks = true;
	st->watermark_delay_ns = v;
	st->watermark_line = dk->line;
	return 0;
}

int load_stage(struct loader *ld, uint32_t idx)
{
	struct shmrun_stage *st = &ld->job->stages[idx];
	const struct section *s = ld->stage_sec[idx];
	const struct kv *op = find_kv(s, "op"), *width = find_kv(s, "width");
	char what[MAX_NAME_LEN + 16];
	uint32_t nparams = 0;
	int r;

	section_what(ld, s, what, sizeof(what));
	st->name = strdup(s->name);
	if (!st->name)
		return -ENOMEM;
	st->line = s->line;
	st->width = 1;
	ld->input[idx] = find_kv(s, "input");

	load_op(ld, st, s, op, what);

	if (width && refuse_continuation(ld, &stage_keys[SK_WIDTH], width, what)) {
		ld->width_ok[idx] = false;
	} else if (width) {
		struct shmrun_param_def wd = stage_keys[SK_WIDTH];
		uint32_t vmax = ld->vnodes_ok ? ld->job->vnodes : MAX_VNODES;
		char *text;
		uint64_t v;

		/* past vnodes (but within MAX_VNODES) has its own message below */
		r = check_value(ld, what, &wd, width->value, width->line, &text, &v);
		if (r < 0)
			return r;
		free(text);
		if (r == 0 && v > vmax) {
			errorf(ld, width->line,
			       "width = %llu of stage '%s' exceeds vnodes = %u: every instance "
			       "needs at least one vnode; lower the width or raise vnodes in [job]",
			       (unsigned long long)v, s->name, vmax);
			r = 1;
		}
		if (r == 0)
			st->width = (uint32_t)v;
		ld->width_ok[idx] = r == 0;
	} else {
		ld->width_ok[idx] = true;
	}

	if (!st->op)
		return 0;
	st->combine = -1;
	{
		const struct kv *cb = find_kv(s, "combine");
		char *text = NULL;
		uint64_t v = 0;

		if (cb && refuse_continuation(ld, &stage_keys[SK_COMBINE], cb, what)) {
			/* reported */
		} else if (cb) {
			r = check_value(ld, what, &stage_keys[SK_COMBINE], cb->value, cb->line, &text, &v);
			if (r < 0)
				return r;
			free(text);
			if (r == 0 && v && !st->op->combiner)
				errorf(ld, cb->line,
				       "combine = true in stage '%s', but operator '%s' has no "
				       "combiner; remove the key (operators with one: count)",
				       s->name, st->op->name);
			else if (r == 0)
				st->combine = v ? 1 : 0;
			st->combine_line = cb->line;
		}
	}
	r = load_watermark_keys(ld, st, s, what);
	if (r < 0)
		return r;
	check_unknown_keys(ld, s, what, stage_keys, st->op->params);
	for (const struct shmrun_param_def *d = st->op->params; d && d->key; d++)
		nparams++;
	st->params = calloc(nparams ? nparams : 1, sizeof(*st->params));
	if (!st->params)
		return -ENOMEM;
	st->nparams = nparams;
	if (!nparams)
		return 0;
	r = load_params(ld, s, what, st->op->name, st->op->params, st->params);
	if (r == 0 && st->combine == 1 && !shmrun_stage_combines(st))
		errorf(ld, st->combine_line,
		       "combine = true in stage '%s', but operator '%s' cannot combine with this "
		       "stage's other settings (count combines only with emit = final: with emit "
		       "= update every record's new count is the output); remove the key",
		       s->name, st->op->name);
	return r;
}

/* The line to name for stage @idx's key @key: the key's, else the section's. */
static int key_line(const struct loader *ld, uint32_t idx, const char *key)
{
	const struct kv *k = find_kv(ld->stage_sec[idx], key);

	return k ? k->line : ld->stage_sec[idx]->line;
}

/* The value of stage @st's parameter @key, or NULL if not set. */
static const struct shmrun_param *stage_param(const struct shmrun_stage *st, const char *key)
{
	for (uint32_t j = 0; j < st->nparams; j++)
		if (strcmp(st->params[j].def->key, key) == 0)
			return st->params[j].value ? &st->params[j] : NULL;
	return NULL;
}

/*
 * Sources a multi-host job (hosts > 1) cannot run: stdin_source, since only
 * one process of an MPI job gets the terminal's standard input and a failure
 * restarts the whole job (docs/multihost.md), which a pipe cannot replay; a
 * socket_source with listen, since its instances listen on whichever host the
 * placement gives them, and senders would have to follow the plan.
 */
static void check_multihost_source(struct loader *ld, uint32_t i)
{
	const struct shmrun_job *job = ld->job;
	const struct shmrun_stage *st = &job->stages[i];
	const struct shmrun_param *lp;
	char where[300];

	if (job->hosts <= 1)
		return;
	shmrun_hosts_where(job, where, sizeof(where));
	if (strcmp(st->op->name, "stdin_source") == 0)
		errorf(ld, key_line(ld, i, "op"),
		       "stage '%s': op = stdin_source cannot run with hosts = %u (%s): an MPI "
		       "job hands standard input to one process only, and a failure on any "
		       "host restarts the whole job, which cannot read a pipe again; write "
		       "the input to a file and read it with file_source, or set hosts = 1",
		       st->name, job->hosts, where);
	else if (strcmp(st->op->name, "socket_source") == 0 && (lp = stage_param(st, "listen")))
		errorf(ld, lp->line ? lp->line : key_line(ld, i, "op"),
		       "stage '%s': socket_source with listen = %s cannot run with hosts = %u "
		       "(%s): its instances listen on whichever host the placement puts them, "
		       "so senders would have to follow the plan; use connect = HOST:PORT (the "
		       "job connects to the sender), or set hosts = 1",
		       st->name, lp->value, job->hosts, where);
}

void check_sources(struct loader *ld)
{
	const struct shmrun_job *job = ld->job;
	int stdin_stage = -1;

	for (uint32_t i = 0; i < job->nstages; i++) {
		const struct shmrun_stage *st = &job->stages[i];

		if (!st->op)
			continue;
		if ((st->op->flags & SHMRUN_OP_UNREPLAYABLE) && job->checkpoint_dir &&
		    !job->allow_data_loss_on_crash)
			errorf(ld, key_line(ld, i, "op"),
			       "stage '%s': op = %s cannot be replayed after a restore, yet [job] "
			       "sets checkpoint_dir: the records it read since the last checkpoint "
			       "would be lost on a crash while the job claims exactly-once; remove "
			       "checkpoint_dir, or set allow_data_loss_on_crash = true in [job] to "
			       "accept at-most-once for this source",
			       st->name, st->op->name);
		check_multihost_source(ld, i);
		if (strcmp(st->op->name, "stdin_source") != 0)
			continue;
		if (st->width != 1)
			errorf(ld, key_line(ld, i, "width"),
			       "width = %u of stage '%s': stdin_source reads the job's one "
			       "standard input, so its width must be 1; spread its records with a "
			       "rebalance or by-key edge into a wider stage instead",
			       st->width, st->name);
		if (stdin_stage >= 0)
			errorf(ld, key_line(ld, i, "op"),
			       "stage '%s' is a second stdin_source (stage '%s' at line %d is the "
			       "first): the job has one standard input; read it in one stage and "
			       "let several stages take that stage as input",
			       st->name, job->stages[stdin_stage].name, job->stages[stdin_stage].line);
		else
			stdin_stage = (int)i;
		if (job->conf_path && strcmp(job->conf_path, SHMRUN_STDIN_NAME) == 0)
			errorf(ld, key_line(ld, i, "op"),
			       "stage '%s': op = stdin_source reads standard input, but the "
			       "topology itself was read from standard input ('-'); write the "
			       "topology to a file and pass its path",
			       st->name);
	}
}
