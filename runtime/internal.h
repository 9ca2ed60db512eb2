/*
 * runtime/internal.h: what the files of shmrun_rt share with each other and
 * with the shmrun CLI (runtime/cli.c), beyond the public headers (private to
 * runtime/, never installed).
 *
 * The public headers in include/shmrun/ hold what a user needs: operator.h to
 * write an operator, job.h and runtime.h to load, check and run a job from a
 * program of their own. Everything else that crosses a file boundary inside
 * the runtime, or that only the CLI's own subcommands call, lives here:
 *   - topology.conf's key tables, value parsers and the operator registry
 *     (conf.c, ops/registry.c);
 *   - the topology fingerprint that guards every restore (fingerprint.c);
 *   - the authorised rescale and the read-only restore check behind
 *     `shmrun --rescale`, `shmrun plan --rescale-from` and `shmrun check`
 *     (rescale.c, launcher.c);
 *   - `shmrun ckpt list` and `shmrun ckpt verify` (ckpt/manifest.c);
 *   - two logging helpers (log.c).
 * plan.h includes this header, so every file that works on a plan sees it;
 * the CLI (runtime/cli.c) is part of shmrun_rt, so includes it by name; the
 * shared library libshmrun.so does not export what it declares.
 *
 * Rejected: keeping these in job.h and runtime.h — every program embedding the
 * runtime would see, and come to depend on, the CLI's internals (issue 9);
 * one header per module (fingerprint.h, rescale.h, ...) — a dozen
 * declarations do not need five files, and the CLI would include them all.
 */
#ifndef SHMRUN_RT_INTERNAL_H
#define SHMRUN_RT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "shmrun/job.h"
#include "shmrun/operator.h"
#include "shmrun/runtime.h"

/* --- topology.conf: key tables, values, operators (conf.c, ops/registry.c) --- */

/**
 * shmrun_job_keys() - the [job] keys topology.conf accepts, with their types,
 * defaults and ranges; a table ending with an entry whose key is NULL. Every
 * numeric key (count, size, rate, duration) has a max: the range within which
 * the runtime's arithmetic with it cannot overflow. Static; never freed.
 */
const struct shmrun_param_def *shmrun_job_keys(void);

/**
 * shmrun_job_load_set() - shmrun_job_load() with overrides: `--set` of the CLI.
 * @path:  topology.conf, or "-" for standard input
 * @sets:  @nsets strings "SECTION.KEY=VALUE", applied in order as if each were
 *         a line `KEY = VALUE` of [SECTION]: the file's value of that key is
 *         replaced (or the key added). KEY follows the last '.' before the
 *         first '=' (section names may contain dots). [job] is created when
 *         the file has none; any other SECTION must be in the file. A later
 *         override of the same key wins. Not copied; read during the call only.
 * @nsets: number of overrides (0: exactly shmrun_job_load())
 * @job, @errs: as shmrun_job_load()
 *
 * Values go through the same checks as the file's; a message about an
 * override starts "--set SPEC: " instead of "file:line: ". A relative path
 * in an override resolves against the current directory, not the conf
 * file's. In the loaded job an override's line is 0 (as a default's).
 *
 * Return: as shmrun_job_load(): 0; -EINVAL (errors in @errs); -ENOMEM; -errno.
 * Internal (not in job.h): the public ABI of libshmrun is unchanged.
 */
int shmrun_job_load_set(const char *path, const char *const *sets, uint32_t nsets,
			struct shmrun_job *job, struct shmrun_job_errors *errs);

/**
 * shmrun_stress_main() - `shmrun stress [options] topology.conf` (stress.c):
 * fault-injection runs compared with a fault-free run (docs/stress.md).
 * @argc, @argv: the arguments after "shmrun" ("stress" is argv[0]).
 * Return: the exit status: 0 every run matched; 1 a mismatch or a failed run;
 * 2 bad usage or a topology that cannot be verified. Stopped by a signal, it
 * stops its runs and dies by that signal.
 */
int shmrun_stress_main(int argc, char **argv);

/** shmrun_stage_keys() - the keys every stage accepts (op, width, input, combine,
 * watermark_delay, watermark_interval); as above. */
const struct shmrun_param_def *shmrun_stage_keys(void);

/** shmrun_operator_find() - an operator (built-in or from a loaded plugin) by name, or NULL. */
const struct shmrun_operator *shmrun_operator_find(const char *name);

/**
 * shmrun_operators() - every operator a stage may name: the built-ins, then
 * those of each loaded plugin in load order; NULL-terminated. Valid until the
 * next shmrun_plugin_load().
 */
const struct shmrun_operator *const *shmrun_operators(void);

/** shmrun_operator_nearest() - the operator name nearest to @name, if it is a plausible typo of it; else NULL. */
const char *shmrun_operator_nearest(const char *name);

/** A loaded plugin (runtime/plugin.c). */
struct shmrun_plugin_info {
	const char *path;    /**< canonical path of the shared object */
	const char *name;    /**< its struct shmrun_plugin's name */
	const char *version; /**< and version */
};

/** shmrun_plugin_path_at() - the path of loaded plugin @i (load order), or NULL past the last. */
const char *shmrun_plugin_path_at(uint32_t i);

/**
 * shmrun_operator_plugin() - the plugin that provided @op (as
 * shmrun_operator_find() returned it): NULL for a built-in operator. Valid
 * until the process ends.
 */
const struct shmrun_plugin_info *shmrun_operator_plugin(const struct shmrun_operator *op);

/**
 * shmrun_plugin_load() - load the operator plugin @path (runtime/plugin.c):
 * dlopen() it, check its struct shmrun_plugin and every operator in it, and
 * register them for shmrun_operator_find(). All or nothing. The same file
 * (device and inode) a second time is a no-op. Never unloaded.
 * @path: the shared object (relative: to the current directory).
 * @err:  on failure, a malloc'd message naming @path and what to do (caller
 *        frees; NULL on success and on -ENOMEM).
 * Return: 0; -ENOENT (no such file); -EINVAL (refused: not a regular file,
 * dlopen() failed (its message verbatim in @err), no SHMRUN_PLUGIN_SYMBOL,
 * another ABI major or a newer minor, a descriptor without name, version or
 * operators, an operator with a bad size, name, flags, callbacks, combiner or
 * key table, or a name already taken, both origins named); -ENOMEM; -errno
 * of stat() or realpath().
 */
int shmrun_plugin_load(const char *path, char **err);

/**
 * shmrun_param_describe() - how key @d is written, for `shmrun ops`: @type
 * the type's word ("size", "path list"), @form how a value looks ("bytes as
 * an unsigned integer with an optional K, M, G or T suffix ..."), and @range
 * its bounds as a conf file writes them ("1 to 1T"; empty when unbounded).
 * @type and @form are static strings; @range is @len bytes.
 */
void shmrun_param_describe(const struct shmrun_param_def *d, const char **type,
			   const char **form, char *range, size_t len);

/**
 * shmrun_ops_print() - `shmrun ops [NAME]`: every operator a stage may name
 * (built-in, then from loaded plugins), one line each, or with @name the
 * whole of one: what it does, its kind, its callbacks of note, its
 * per-worker state rule and every key with type, default, range and doc.
 * @markdown: the same as the reference section of docs/operators.md (whose
 * built-in part a test compares with this output, so the two cannot drift).
 * Return: exit status: 0; 2 if @name is no operator (message on stderr,
 * with the nearest name).
 */
int shmrun_ops_print(FILE *out, const char *name, bool markdown);

/**
 * shmrun_parse_size() - "64", "4K", "1M", "2G" (powers of 1024) into bytes.
 * Return: 0; -EINVAL for anything else (signs, spaces inside, other units,
 * empty); -ERANGE on overflow.
 */
int shmrun_parse_size(const char *s, uint64_t *bytes);

/** shmrun_parse_duration() - "500ms", "2s" into ns. Errors as shmrun_parse_size(). */
int shmrun_parse_duration(const char *s, uint64_t *ns);

/** shmrun_parse_count() - plain unsigned decimal. Errors as shmrun_parse_size(). */
int shmrun_parse_count(const char *s, uint64_t *n);

/**
 * shmrun_parse_cpus() - "0-3,8" into a sorted, de-duplicated CPU list.
 * @cpus, @n: allocated list (caller frees) and its length.
 * Return: 0; -EINVAL for bad syntax or a reversed range; -ERANGE beyond 4095.
 */
int shmrun_parse_cpus(const char *s, int32_t **cpus, uint32_t *n);

/* --- the topology fingerprint (fingerprint.c) --- */

/**
 * shmrun_fingerprint_text() - the canonical encoding of @job's state-relevant
 * topology (stages, operators and their non-tuning keys, widths, per-worker
 * rules, edges, vnode count, and the member set's fingerprint clause, empty
 * for a solo run), one item per line; see runtime/fingerprint.c.
 * @text: receives a malloc'd NUL-terminated string (caller frees); @len its length.
 * Return: 0; -ENOMEM.
 */
int shmrun_fingerprint_text(const struct shmrun_job *job, char **text, size_t *len);

/**
 * shmrun_fingerprint_text_members() - shmrun_fingerprint_text() of @job placed
 * on the member set @ids (@members ids, any order; duplicates count once)
 * rather than on the job's own workers 0 … hosts·workers-1: what the
 * fingerprint of another member set would be. The members line holds the
 * whole set however many members it has.
 * Return: 0; -ENOMEM (*@text untouched).
 */
int shmrun_fingerprint_text_members(const struct shmrun_job *job, const uint32_t *ids,
				    uint32_t members, char **text, size_t *len);

/** shmrun_fingerprint() - XXH64 of shmrun_fingerprint_text(); 0 on ENOMEM. */
uint64_t shmrun_fingerprint(const struct shmrun_job *job);

/**
 * shmrun_job_text() - the canonical encoding of the whole effective @job, as
 * every host of a multi-host job must run it (the gateway's start exchange
 * compares its hash: runtime/gateway.c): shmrun_fingerprint_text() plus what
 * it leaves out on purpose — every [job] key that is the same on every host
 * (workers, hosts, ring_bytes, idle, the checkpoint keys with checkpoint_dir
 * as written, i.e. before {host} is expanded, host_flush, host_timeout, ...),
 * the tuning keys of every stage (`rate`), `combine` and the watermark keys —
 * and the job's name, one item per line, values after --set and defaults.
 * Not in it: cpus (a host's own CPUs), metrics (an address of each host), host_timeout (a host's own tolerance),
 * the conf file's path.
 * @text: receives a malloc'd NUL-terminated string (caller frees); @len its length.
 * Return: 0; -ENOMEM.
 */
int shmrun_job_text(const struct shmrun_job *job, char **text, size_t *len);

/** shmrun_job_hash() - XXH64 of shmrun_job_text(); 0 on ENOMEM. */
uint64_t shmrun_job_hash(const struct shmrun_job *job);

/**
 * shmrun_fingerprint_diff() - every difference between two canonical
 * encodings, in the field's terms ("stage count: width 4 → 2", "members: 2 → 3
 * workers", "vnodes: 256 → 128", "stage filter: new"), joined by "; ".
 * @msg: receives a malloc'd string (caller frees).
 * Return: 0; -ENOMEM.
 */
int shmrun_fingerprint_diff(const char *old_text, const char *new_text, char **msg);

/*
 * shmrun_fingerprint_param_diff() - the keys of stage @stage whose values
 * differ between canonical encodings @old_text and @new_text (tuning keys are
 * not in them), as "stage S: key: old → new" items joined by "; ", in *@msg
 * (malloc'd, the caller frees), or NULL when none differs or the stage is not
 * in both. Return: 0, or -ENOMEM.
 */
int shmrun_fingerprint_param_diff(const char *old_text, const char *new_text, const char *stage,
				  char **msg);

/**
 * shmrun_fingerprint_plugin_state() - in canonical encoding @text, the state
 * format of stage @stage's plugin operator: "version=V" (the plugin's
 * version) or "state=S" (the operator's state_version), into @buf of @len.
 * Return: 1 if the stage's operator came from a plugin; 0 if not (@buf empty).
 */
int shmrun_fingerprint_plugin_state(const char *text, const char *stage, char *buf, size_t len);

/**
 * shmrun_stage_plugin_state() - the same for a loaded stage @st: "state=S"
 * (its operator's state_version) or "version=V" (its plugin's version) into
 * @buf of @len, as the fingerprint writes it. Return: 1 if @st's operator
 * came from a plugin; 0 if not (@buf empty).
 */
int shmrun_stage_plugin_state(const struct shmrun_stage *st, char *buf, size_t len);

/** shmrun_pw_rule_name() - "split", "union" or "none", as MANIFEST and fingerprint write it. */
const char *shmrun_pw_rule_name(enum shmrun_pw_rule rule);

/* --- rescale and restore checks (rescale.c, launcher.c) --- */

/**
 * shmrun_rescale() - authorised re-assignment (`shmrun --rescale`, `shmrun plan
 * --rescale-from`): re-deal the newest checkpoint of @dir to @job's topology —
 * key-bound state whole vnode by whole vnode to the new owners, per-worker
 * state by each operator's declared rule (split or union) — see
 * runtime/rescale.c for every rule and refusal.
 * @drop, @ndrop: stages whose state may be dropped (--drop-state=STAGE).
 * @plan_out: if not NULL, print what would move and write nothing.
 * @new_epoch: receives the epoch of the checkpoint written (0 if nothing needed).
 * Every refusal names @job's conf (file:line of the stage or key concerned) and
 * says what to do.
 * Return: 0; -EPERM (refused: vnodes changed, a removed stage not dropped, an
 * operator changed, per-worker state without a rule whose width changed);
 * -EFBIG (a union pool over union_state_limit); -ENOENT (no checkpoint);
 * -EBADMSG (none verifies); -ETIMEDOUT (a host other than 0 sharing
 * checkpoint_dir, which leaves the writing to host 0 and waits for its
 * result up to checkpoint_timeout: it did not appear); -errno. Every refusal
 * is logged with its reason.
 */
int shmrun_rescale(const struct shmrun_job *job, const char *dir, const char *const *drop,
		   uint32_t ndrop, FILE *plan_out, uint64_t *new_epoch);

/*
 * shmrun_rescale_dry_run() - the rescale `shmrun --rescale` would do on
 * @job's checkpoint_dir (dropping the state of the @ndrop stages in @drop),
 * planned into /dev/null: reads checkpoint_dir only, so a refusal (logged,
 * naming the conf) leaves nothing behind. Return: 0, -errno if /dev/null
 * cannot be opened, or shmrun_rescale()'s error.
 */
int shmrun_rescale_dry_run(const struct shmrun_job *job, const char *const *drop, uint32_t ndrop);

/**
 * shmrun_check_restore() - read-only: what a run would do with @job's
 * checkpoint_dir before it starts. STREAM_RESET_STATE must be 1 or 0 (-EINVAL,
 * logged); with 1, says the checkpoints would be moved aside. Otherwise the
 * checkpoint a restore would select must fit @job's topology; if it does not
 * and @rescale, the rescale is planned (nothing written, @drop/@ndrop as
 * shmrun_rescale()) and its refusal returned; else -ESTALE with the reason and
 * what to do, logged. Creates, moves and removes nothing.
 * With @rescale and no checkpoint to rescale (checkpoint_dir absent, empty, or
 * none verifies) the rescale is refused as a run refuses it (-ENOENT, -EBADMSG).
 * Return: 0 (also: no checkpoint_dir; without @rescale, no checkpoint); -EINVAL;
 * -ESTALE; -EBADMSG (checkpoints but none verifies); a shmrun_rescale() error;
 * -errno.
 */
int shmrun_check_restore(const struct shmrun_job *job, bool rescale, const char *const *drop,
			 uint32_t ndrop);

/**
 * shmrun_plan_print_json() - `shmrun plan --json`: what shmrun_plan_print()
 * prints, from the same plan, as one JSON document (jansson) on @out. Fields
 * (stable; docs/shmrun.1.md): job, workers, vnodes; stages[] {name, op,
 * width, plugin: null or {name, version, path}}; tasks[] {task, stage,
 * instance, worker, cpu, vnode_lo, vnode_hi (the range [lo, hi))}; edges[]
 * {from, to, kind: forward|shuffle|rebalance|broadcast, combined, channels[]
 * {ring, from_instance, to_instance, local, from_worker, to_worker}, empty
 * for forward}; segment {rings, ring_bytes, rings_crossing_workers, bytes}.
 * Return: 0; -ENOMEM; -EIO if @out did not take it.
 */
int shmrun_plan_print_json(const struct shmrun_plan *plan, FILE *out);

/* --- `shmrun ckpt` (ckpt/manifest.c) --- */

/**
 * shmrun_ckpt_print_list() - `shmrun ckpt list DIR`: one line per checkpoint
 * directory under @dir, newest first: epoch, time (UTC), total size, status
 * (ok, incomplete, or damaged with the reason) and the state size of each
 * stage (key-bound + per-worker bytes).
 * @json: print one JSON document instead (see shmrun_ckpt_print_verify()).
 * Return: exit status: 0; 1 if @dir cannot be read (message on stderr).
 */
int shmrun_ckpt_print_list(const char *dir, FILE *out, bool json);

/**
 * shmrun_ckpt_print_verify() - `shmrun ckpt verify DIR`: verify every
 * checkpoint under @dir (MANIFEST checksum, every file's size, whole-file and
 * per-block checksums) and print one line each, then what a restore would
 * do: the checkpoint it would use (the newest that verifies) and why any
 * newer directory would be passed over (incomplete: no MANIFEST, an aborted or
 * interrupted epoch; or damaged). Safe on the directory of a running job: a
 * checkpoint whose MANIFEST or directory vanished during its check is listed
 * as retired (retention), not damaged, and a live run holding @dir/.lock
 * (from /proc/locks; no lock is taken) is named.
 * Return: exit status: 0 if a restore would use a checkpoint and no committed
 * checkpoint is damaged (incomplete and retired directories are not failures); 1 otherwise
 * (also when there is no complete checkpoint).
 * @json: the same, collected once, printed as one JSON document (jansson):
 * {dir, checkpoints[] {epoch, name, status: ok|incomplete|damaged|retired,
 * reason (null when ok), time (RFC 3339 UTC), time_ns, bytes, finished,
 * stages[] {name, width, key_bound_bytes, per_worker_bytes,
 * per_worker_max_bytes}}}; verify adds restore {action: use|refuse|empty,
 * epoch (null unless use), skipped_newer[] (names)}, live_run_pid (null when
 * none), damaged, incomplete, ok (the exit status is 0). Fields of a
 * checkpoint that is not ok are null or empty. An unreadable @dir is an error
 * on stderr as in text, with no JSON.
 */
int shmrun_ckpt_print_verify(const char *dir, FILE *out, bool json);

/* --- logging helpers (log.c) --- */

/** shmrun_log_set_role() - the tag after the level, e.g. "worker 1"; @role is
 * copied (at most 31 bytes kept). Per process: a forked worker sets its own. */
void shmrun_log_set_role(const char *role);

/** shmrun_log_set_worker() - this process is worker @index: its lines say
 * "worker N" (text) and carry "worker": N (JSON). Called once after fork. */
void shmrun_log_set_worker(uint32_t index);

/** shmrun_log_set_job() - the job every line names (copied, at most 79 bytes;
 * NULL or "" for none: "-" in text, null in JSON). Set once the topology is
 * loaded; forked workers inherit it. */
void shmrun_log_set_job(const char *name);

/** The log line formats (--log-format): docs/observability.md#logs. */
enum shmrun_log_format {
	SHMRUN_LOG_TEXT = 0,
	SHMRUN_LOG_JSON = 1,
};

/**
 * shmrun_log_parse_format() - "text" or "json" (exactly) -> the format.
 * Return: the format, or -EINVAL.
 * shmrun_log_set_format() - the format of every following line of this
 * process and of the processes it forks (default text).
 * shmrun_log_get_format() - the current one.
 */
int shmrun_log_parse_format(const char *s);
void shmrun_log_set_format(enum shmrun_log_format format);
enum shmrun_log_format shmrun_log_get_format(void);

/**
 * shmrun_log_format_json() - the JSON record (no newline) of a line @msg at
 * @level from this process, as --log-format=json writes it, into @buf of
 * @cap bytes, NUL-terminated. For a line composed in advance (a signal
 * handler's, callback.c). Return: its length, or -1 (too long, no memory).
 */
int shmrun_log_format_json(enum shmrun_log_level level, const char *msg, char *buf, size_t cap);

/**
 * shmrun_log_plain() - the end-of-run report's plain lines ("records in: 5"):
 * with --log-format=text written as they are (no timestamp), one write(2);
 * with json each line becomes an info record, so stderr stays one JSON
 * object per line. Not filtered by the level.
 */
void shmrun_log_plain(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/**
 * shmrun_log_task() - one line at @level from a task: stage @stage, instance
 * @instance (text: "stage 'S' [i]: " before @msg; JSON: the stage and instance
 * fields). @where ("job.conf:7", or NULL) names the topology line the message
 * is about (text: before the stage; JSON: before @msg). @msg is not a format.
 * Lines above the level set are dropped.
 */
void shmrun_log_task(enum shmrun_log_level level, const char *where, const char *stage,
		     uint32_t instance, const char *msg);

/*
 * The status line (the progress line: runtime/progress.c) and log lines on one
 * terminal; log.c's opening comment has the design.
 *
 * shmrun_status_enable() - @on: a status line may be drawn on stderr, so every
 * log line of this process, and of the processes forked after, starts by
 * erasing the current terminal line. Call before forking the workers; only
 * when stderr is a terminal.
 * shmrun_status_enabled() - whether it is on.
 * shmrun_status_draw() - (re)draw the status line: erase the current line,
 * write @text (one line, no newline; cut at 500 bytes). No-op unless enabled.
 * shmrun_status_end() - the last of it: write @final as a whole line, or with
 * NULL erase the line drawn, and stop erasing before log lines (what follows
 * is plain output). No-op unless enabled.
 */
void shmrun_status_enable(bool on);
bool shmrun_status_enabled(void);
void shmrun_status_draw(const char *text);
void shmrun_status_end(const char *final);

/* --- the progress line (progress.c) --- */

struct shmrun_metrics;

/**
 * shmrun_progress_setup() - decide whether the run of @job shows a progress
 * line: @want (not --no-progress), stderr a terminal, and a file_source stage;
 * if so, enable the status line (shmrun_status_enable()). Call before
 * shmrun_run(), so that the forked workers inherit the decision.
 */
void shmrun_progress_setup(const struct shmrun_job *job, bool want);

/**
 * shmrun_progress_tick() - in the launcher, once per supervision tick: redraw
 * the progress line from the metrics block @m (NULL: nothing), at most 4
 * times a second, while the job runs. No-op when the line is off.
 * shmrun_progress_pause() - erase it (a start ended); the next tick draws it
 * again.
 */
void shmrun_progress_tick(const struct shmrun_metrics *m);
void shmrun_progress_pause(void);

/**
 * shmrun_progress_format() - the progress line's text into @buf (@len bytes):
 * "JOB: P% POS of TOTAL, RATE/s, ETA T, checkpoint E" (@pos, @total in bytes,
 * @total 0: unknown, "JOB: POS read, RATE/s"; @rate in bytes/s, < 0: not known
 * yet, left out; @epoch the newest complete checkpoint, 0: none, left out).
 * Sizes in binary units (KiB, MiB, ...).
 */
void shmrun_progress_format(char *buf, size_t len, const char *job, uint64_t pos, uint64_t total,
			    double rate, uint64_t epoch);

/**
 * shmrun_fit_middle() - copy @src into @dst of @cap bytes (NUL included); a
 * text too long loses its middle, marked " … ", never its end (where messages
 * say what to do). Return: @dst.
 */
char *shmrun_fit_middle(char *dst, size_t cap, const char *src);

/**
 * shmrun_prepare_set_mode() - what the operators' prepare() may do in this
 * process, asked with shmrun_task_may_connect() / shmrun_task_may_create()
 * (ops/ops.h): a run (the default) may do both; `shmrun check` neither,
 * `shmrun check --connect` connect but not create (postgres_sink: reach the
 * server and check the table, but not create its progress table). Call
 * before shmrun_prepare(); not thread-safe (the CLI calls it once).
 * prepare.c.
 */
void shmrun_prepare_set_mode(bool connect, bool create);

#endif /* SHMRUN_RT_INTERNAL_H */
