/*
 * shmrun/job.h: a topology.conf turned into a validated job description.
 *
 * shmrun_job_load() parses the file with inih and validates everything that can
 * be known before a process starts (docs/design.md §7): every key, every value, the
 * graph. Errors are collected as "file:line: message" strings; a job with any
 * error must not run. Data flows one way: conf -> placement -> plan ->
 * launcher -> worker (docs/design.md §8).
 */
#ifndef SHMRUN_JOB_H
#define SHMRUN_JOB_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "shmrun/idle.h"
#include "shmrun/operator.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Exported by libshmrun.so.0, which is built with -fvisibility=hidden: see
 * runtime/libshmrun.map. Also keeps these default in a plugin built hidden. */
#pragma GCC visibility push(default)

/** How an edge routes records from the upstream stage's instances. */
enum shmrun_edge_kind {
	SHMRUN_EDGE_FORWARD,   /**< instance i -> instance i; equal widths; in-process */
	SHMRUN_EDGE_SHUFFLE,   /**< by key: to the instance owning the key's vnode */
	SHMRUN_EDGE_REBALANCE, /**< round-robin over the downstream instances */
	SHMRUN_EDGE_BROADCAST, /**< to every downstream instance */
};

/** One edge of the graph: stage `from` feeds stage `to`. */
struct shmrun_edge {
	uint32_t from, to;          /**< stage indices */
	enum shmrun_edge_kind kind; /**< resolved: `input = a` is forward for equal widths, else rebalance */
	bool by_key;                /**< written `a by key`: a shuffle, also when two width-1
				      stages made it forward (its combiner still applies) */
	int line;                   /**< line of the `input =` key */
};

/** One key = value of a stage, as validated against its operator's params. */
struct shmrun_param {
	const struct shmrun_param_def *def; /**< the declaration it matched */
	char *value;                        /**< text after default substitution / path resolution;
					      NULL if absent and without default */
	uint64_t u64;                       /**< parsed COUNT/SIZE/RATE/DURATION; BOOL as 0/1;
					      ENUM as the index of the choice */
	int line;                           /**< 0 for a default */
};

/** One stage (a section other than [job]). */
struct shmrun_stage {
	char *name;                        /**< the section name */
	int line;                          /**< line of the section header */
	const struct shmrun_operator *op;  /**< from the built-in registry */
	uint32_t width;                    /**< parallelism, 1..vnodes */
	int combine;                       /**< `combine =`: 1 true, 0 false, -1 not set */
	int combine_line;                  /**< line of the `combine` key, 0 if not set */
	struct shmrun_param *params;       /**< one per op->params entry, same order */
	uint32_t nparams;
	/* event time (docs/event-time.md) */
	bool watermarks;                   /**< `watermark_delay` is set: the stage generates
					      watermarks from the event times it emits */
	uint64_t watermark_delay_ns;       /**< bounded out-of-orderness, ns (0 with !watermarks) */
	uint64_t watermark_interval_ns;    /**< how often a watermark is generated, ns, default 200ms */
	int watermark_line;                /**< line of the `watermark_delay` key, 0 if not set */
};

/** A validated job. Everything is owned by the job; free with shmrun_job_free(). */
struct shmrun_job {
	char *conf_path;           /**< as given */
	char *conf_dir;            /**< directory relative paths resolve against */
	char *name;                /**< [job] name (default: the file's basename without .conf) */
	uint32_t workers;          /**< workers per host (the member count when hosts = 1) */
	int32_t *cpus;             /**< CPU of each worker (workers entries) */
	bool cpus_listed;          /**< `cpus =` given (else: workers = N, CPUs 0..N-1 round-robin) */
	uint32_t vnodes;           /**< V, default 256 */
	uint64_t ring_bytes;       /**< capacity of each ring, power of two, default 1M */
	enum shmrun_idle idle;     /**< idle strategy, default hybrid */
	char *checkpoint_dir;      /**< resolved against conf_dir; NULL: no checkpoints */
	uint64_t checkpoint_interval_ns; /**< time between checkpoints, default 500ms, > 0 */
	uint64_t checkpoint_timeout_ns;  /**< a checkpoint not complete by then fails, default 60s */
	uint32_t checkpoint_retain;      /**< complete checkpoints kept, default 2, >= 1 */
	uint32_t restart_attempts;       /**< restarts after a crash before giving up, default 10 */
	uint64_t union_state_limit;      /**< bytes: largest union pool a rescale deals, default 64M */
	uint64_t per_worker_state_warn;  /**< bytes: warn past this per-worker state per instance, default 1M */
	uint64_t operator_timeout_ns;    /**< report an operator callback running longer, 0 = off (default) */
	struct shmrun_stage *stages;
	uint32_t nstages;          /**< in file order */
	struct shmrun_edge *edges;
	uint32_t nedges;
	uint32_t *topo;            /**< stage indices in a topological order (sources first) */
	char **warnings;           /**< non-fatal notes, e.g. more workers than CPUs */
	uint32_t nwarnings;
	int checkpoint_dir_line;   /**< line of the checkpoint_dir key (0 if absent) */
	bool checkpoint_per_host;  /**< [job] checkpoint_layout = per_host: each host its own
				      checkpoint_dir; default shared (docs/checkpoints.md) */
	uint32_t host;             /**< this process's host index, 0 .. hosts-1: 0 until the
				      launcher sets it (runtime/ckpt/hosts.h) */
	char *checkpoint_dir_template; /**< checkpoint_dir as written when it holds {host}
					  (per_host only), else NULL; checkpoint_dir is it
					  with {host} = `host` */
	uint64_t idle_timeout_ns;  /**< an input silent this long stops holding back a task's
				      watermark (docs/event-time.md), 0 = off (default) */
	char *metrics;             /**< [job] metrics: the Prometheus endpoint's address as
				      written (PORT, HOST:PORT, [IPV6]:PORT); NULL: off (default) */
	int metrics_line;          /**< line of the metrics key (0 if absent) */
	bool allow_data_loss_on_crash; /**< [job] allow_data_loss_on_crash: run checkpoint_dir
					  with a source that cannot be replayed
					  (SHMRUN_OP_UNREPLAYABLE), at-most-once for it across a
					  crash; default false: such a job is refused */
	/* multi-host runs (docs/multihost.md) */
	uint32_t hosts;            /**< [job] hosts H, 1..1024: the job runs as H launchers
				      (one MPI process each), each with `workers` workers;
				      default: the MPI world size of the environment
				      (hosts_env), else 1 */
	int hosts_line;            /**< line of the hosts key (0: not in the file) */
	bool hosts_set;            /**< hosts given, in the file or by --set */
	const char *hosts_env;     /**< the variable hosts was taken from
				      (e.g. "OMPI_COMM_WORLD_SIZE"), a static string; NULL
				      when given or 1 by default */
	uint64_t host_flush_ns;    /**< [job] host_flush: a gateway's send buffer towards
				      a host goes out at the latest this long after its
				      first frame, ns, default 1ms */
	uint64_t host_timeout_ns;  /**< [job] host_timeout: a host silent this long aborts
				      the job, ns, default 10s */
};

/** Collected errors of a load; every message is "file:line: text". */
struct shmrun_job_errors {
	char **msgs;
	uint32_t n;
};

/**
 * Longest checkpoint_dir, bytes: PATH_MAX less room for what goes inside it
 * (reset-<time>/ckpt-<epoch>/<stage>.<instance>.state), so no path built from
 * it is cut short. A longer one is refused (topology error, or usage error for
 * `shmrun ckpt ... DIR`).
 */
#define SHMRUN_CKPT_DIR_MAX (PATH_MAX - 256)

/** conf_path of a topology read from standard input, and its name in messages. */
#define SHMRUN_STDIN_NAME "<stdin>"

/**
 * shmrun_job_load() - parse and validate a topology.conf.
 * @path: the file; "-" reads standard input (messages then say "<stdin>:N:",
 *        relative paths resolve against the current directory, the default
 *        job name is "stdin").
 * @job:  filled on success; free with shmrun_job_free().
 * @errs: on failure, every error found (free with shmrun_job_errors_free()).
 *
 * Return: 0; -EINVAL if the file has errors (see @errs); -ENOENT/-EACCES/... if
 * it cannot be read (also in @errs, naming the path); -ENOMEM.
 */
int shmrun_job_load(const char *path, struct shmrun_job *job, struct shmrun_job_errors *errs);

/** shmrun_job_free() - release everything a loaded job owns. */
void shmrun_job_free(struct shmrun_job *job);

/** shmrun_job_errors_free() - release collected errors. */
void shmrun_job_errors_free(struct shmrun_job_errors *errs);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif /* SHMRUN_JOB_H */
