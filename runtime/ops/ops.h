/*
 * runtime/ops/ops.h: the built-in operators (one file each, public API only,
 * plus the runtime's small shared idioms in util.h: growable arrays, mkdir -p,
 * read loops — no runtime state).
 */
#ifndef SHMRUN_OPS_H
#define SHMRUN_OPS_H

#include "shmrun/operator.h"
#include "util.h"

extern const struct shmrun_operator shmrun_op_file_source;
extern const struct shmrun_operator shmrun_op_sequence;
extern const struct shmrun_operator shmrun_op_stdin_source;
extern const struct shmrun_operator shmrun_op_socket_source;
extern const struct shmrun_operator shmrun_op_nexmark;
extern const struct shmrun_operator shmrun_op_tokenize;
extern const struct shmrun_operator shmrun_op_count;
extern const struct shmrun_operator shmrun_op_lookup;
extern const struct shmrun_operator shmrun_op_extract;
extern const struct shmrun_operator shmrun_op_file_sink;
extern const struct shmrun_operator shmrun_op_stdout_sink;
extern const struct shmrun_operator shmrun_op_null_sink;
extern const struct shmrun_operator shmrun_op_latency_sink;
extern const struct shmrun_operator shmrun_op_postgres_sink;
extern const struct shmrun_operator shmrun_op_window;
extern const struct shmrun_operator shmrun_op_interval_join;
extern const struct shmrun_operator shmrun_op_window_join;

/*
 * SHMRUN_OP_PW_IN_FLIGHT: an operator flag for built-ins only (a plugin's
 * unknown flags are refused, plugin.c): the operator's per-worker state is
 * output in flight — postgres_sink's epochs staged until their commit — whose
 * size follows throughput x checkpoint_interval, not the data held, so the
 * per-worker state guard (ckpt/coordinator.c: per_worker_state_warn, growth
 * at each checkpoint) does not apply to it.
 */
#define SHMRUN_OP_PW_IN_FLIGHT 0x80000000u

/*
 * SHMRUN_OP_PW_BOUNDED: an operator flag for built-ins only: the operator's
 * per-worker state is bounded by something outside the stream — file_source
 * keeps one entry per followed file (the files in the watched directories,
 * and at most 1024 remembered ones per instance, follow.c) — so it grows as
 * log rotations add files, and shrinks when they are deleted. The growth
 * warning of the per-worker state guard (ckpt/coordinator.c) does not apply
 * to it; the size warning (per_worker_state_warn) does.
 */
#define SHMRUN_OP_PW_BOUNDED 0x40000000u

/*
 * shmrun_task_error_at() - shmrun_task_error() about the value of the
 * stage's key @key (NULL: the stage; "input": the stage's `input =` list):
 * when the error stops the job before anything starts (prepare(), in the
 * launcher), its message names the file:line of that key rather than of the
 * stage. Implemented in task.c.
 * Not (yet) in the public API: a plugin's prepare() errors name the stage.
 */
void shmrun_task_error_at(struct shmrun_task *task, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * shmrun_task_job_name() - the job's name ([job] name, default the conf
 * file's basename without .conf), as `shmrun ps` shows it: what a sink
 * writing into a shared external system (postgres_sink's progress table)
 * tells its rows apart by. Known from prepare() on; never NULL. Implemented
 * in task.c; not (yet) in the public API.
 */
const char *shmrun_task_job_name(const struct shmrun_task *task);

/*
 * shmrun_task_may_connect() - in prepare(): whether the operator may reach an
 * external system (a database server) to check what it needs. False in
 * `shmrun check` without --connect: a check must not depend on a server.
 * shmrun_task_may_create() - whether prepare() may also create what is
 * missing (a table of its own): only in a run, never in `shmrun check`.
 * Both true outside prepare(). Implemented in prepare.c (set by the CLI:
 * shmrun_prepare_set_mode(), internal.h).
 */
bool shmrun_task_may_connect(const struct shmrun_task *task);
bool shmrun_task_may_create(const struct shmrun_task *task);

/*
 * shmrun_task_input_by_key() - whether input @i of the stage (its index in
 * the `input =` list) is written `by key`: what a join needs so that both
 * sides of a key meet in one instance. Known from prepare() on; false for
 * an @i out of range. Implemented in task.c; not (yet) in the public API.
 */
bool shmrun_task_input_by_key(const struct shmrun_task *task, uint32_t i);

/*
 * shmrun_task_require_by_key() - prepare() of an operator whose state is per
 * key (count, window): at a width above 1 every input must be `by key`, or
 * the records of one key would be split over instances and each would
 * aggregate a part (a forward or rebalance edge at width 2 gave partial
 * counts, silently). At width 1 any input will do. Return: 0, or -EINVAL
 * after an error at the line of `input`. Implemented in task.c.
 */
int shmrun_task_require_by_key(struct shmrun_task *task, const char *op);

/*
 * shmrun_task_max_record() - the largest record (key + value bytes, without
 * an event time) a ring of this job holds: ring_bytes/2 - 32. A source that
 * buffers a record until it is whole (stdin_source's line, socket_source's
 * frame) bounds its buffer by it; a longer record would fail at the emit of
 * any ring edge anyway. Implemented in task.c; not (yet) in the public API.
 */
uint32_t shmrun_task_max_record(const struct shmrun_task *task);

/*
 * Record origins: where a source read the records of the batch it is
 * emitting, for messages about one of them (extract's bad-record warnings
 * name path:line). Runtime-internal, built-ins only: not (yet) in the public
 * API, so neither its shape nor how far an origin travels is an ABI promise.
 * The idea is the record metadata of Vector (file + offset of a file source's
 * event), Logstash (the `path` field and the file input's offset) and
 * Flink's source split positions; here it is not carried with each record but
 * asked for, by record pointer, only when a message needs it (nothing per
 * record on the data path, one pointer store per batch).
 *
 * The source fills a struct shmrun_origin and emits with
 * shmrun_emit_batch_origin(); while that call runs, an operator directly
 * behind the source on a forward edge may ask shmrun_task_record_origin()
 * about a record it was handed, from its process() / process_batch().
 * Anywhere else (behind a ring: shuffle or a width change; behind another
 * operator; outside the call) the answer is "not known".
 *
 * Rejected, for now: a public ABI 1.2 pair (plugin sources setting origins,
 * plugin operators asking): no plugin needs it yet, and once public the
 * shape (a describe() callback, answers only on a forward edge) would be
 * fixed for the ABI major version; it can be added the way ABI 1.1 was when
 * one does. Carrying origins in ring frames: see extract.c.
 */
struct shmrun_origin {
	/* describe() - write where record @i (0-based index in the batch being
	 * emitted) of the source task @task (its open() state @state) was read
	 * into @buf (@len bytes, NUL-terminated, cut if longer), e.g.
	 * "/data/a.log:17". Called in the source's worker while the emit runs.
	 * Return: 0, or a negative errno (then nothing is said). */
	int (*describe)(struct shmrun_task *task, void *state, uint32_t i, char *buf, size_t len);
	struct shmrun_task *task; /* the emitting source's task */
	void *state;              /* its state, for describe() */
	/* set by shmrun_emit_batch_origin(): the batch being emitted */
	const struct shmrun_record *recs;
	uint32_t n;
};

/*
 * shmrun_task_source_progress() - a file source says how far it is: @pos
 * bytes of its input read of @total (0: not known), both since this start
 * (after a restore: of what was left to read). Published in the metrics
 * block (source_pos, source_total) for the progress line and `shmrun top`.
 * Cost: two stores. Implemented in worker.c.
 */
void shmrun_task_source_progress(struct shmrun_task *task, uint64_t pos, uint64_t total);

/*
 * shmrun_emit_batch_origin() - shmrun_emit_batch() of @n records @recs (owned
 * by the caller, as there) whose origin @o (owned by the caller, alive for
 * the call; its recs and n are set here) can describe. Return: as
 * shmrun_emit_batch(). Implemented in worker.c.
 */
int shmrun_emit_batch_origin(struct shmrun_task *task, const struct shmrun_record *recs,
			     uint32_t n, struct shmrun_origin *o);

/*
 * shmrun_task_record_origin() - where @rec, a record handed to @task's
 * process() or process_batch() now (the pointer it was given, not a copy),
 * was read: into @buf (@len bytes, NUL-terminated), e.g. "/data/a.log:17".
 * Known only when @task is directly behind the source on a forward edge and
 * the source emitted with an origin (file_source). Cost: a few compares when
 * not known; when known, what describe() costs (file_source: counting the
 * '\n' before the line, see file_source.c). Return: true if @buf was
 * written; false: not known (@buf untouched). Implemented in worker.c.
 */
bool shmrun_task_record_origin(struct shmrun_task *task, const struct shmrun_record *rec,
			       char *buf, size_t len);

#endif /* SHMRUN_OPS_H */
