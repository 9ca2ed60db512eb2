/*
 * shmrun/operator.h: the operator API.
 *
 * A stage of a topology names an operator (`op = count`). An operator is a
 * struct shmrun_operator: a name, the topology.conf keys it accepts (declared
 * as data, so `shmrun check` validates them with file:line before anything
 * starts), and callbacks the worker calls on one thread:
 *
 *     open -> (produce | process)* -> end_of_input -> close
 *
 * Sources (no input) implement produce(); every other operator implements
 * process(). Both hand records downstream with shmrun_emit(). Built-in
 * operators (runtime/ops/) use only this header; user operators will too.
 *
 * The record model follows Flink/Kafka Streams: a record is key bytes, value
 * bytes and an event time. Keys decide the vnode (xxHash of the key bytes,
 * scaled to the job's vnode count) and with it the instance a shuffle edge
 * sends the record to (docs/design.md §2, §5).
 */
#ifndef SHMRUN_OPERATOR_H
#define SHMRUN_OPERATOR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Exported by libshmrun.so.0, which is built with -fvisibility=hidden: see
 * runtime/libshmrun.map. Also keeps these default in a plugin built hidden. */
#pragma GCC visibility push(default)

/**
 * The operator ABI this header describes (docs/operators.md, "Stability"). A
 * plugin records the version it was compiled against in its struct
 * shmrun_plugin; the runtime loads it when the majors are equal and the
 * plugin's minor is not newer than the runtime's. A minor version only adds
 * (a field at the end of struct shmrun_operator, a function); a major version
 * may change or remove anything.
 */
#define SHMRUN_ABI_MAJOR 1
#define SHMRUN_ABI_MINOR 2 /* 1.1: event time (watermarks, timers, namespaced and deletable key-bound state,
			      the input of a record); 1.2: SHMRUN_OP_UNREPLAYABLE, SHMRUN_OP_KEYED */

/**
 * Event time (docs/event-time.md). A watermark W says "no more records with
 * event_time_ns <= W will come" (Flink's model). SHMRUN_WATERMARK_MIN: none yet;
 * SHMRUN_WATERMARK_MAX: end of input (a task's watermark reaches it when all
 * its inputs ended). Since ABI 1.1.
 */
#define SHMRUN_WATERMARK_MIN INT64_MIN
#define SHMRUN_WATERMARK_MAX INT64_MAX

/** The clock a timer follows. Since ABI 1.1. */
enum shmrun_time_domain {
	SHMRUN_TIME_EVENT = 0,      /**< fires when the task's watermark reaches its time */
	SHMRUN_TIME_PROCESSING = 1, /**< fires when CLOCK_REALTIME (ns since the epoch) reaches it */
};

/** A record. Borrowed: valid only during the callback that receives it. */
struct shmrun_record {
	const void *key;       /**< key bytes (may be NULL when key_len is 0) */
	uint32_t key_len;      /**< bytes */
	const void *value;     /**< value bytes (may be NULL when value_len is 0) */
	uint32_t value_len;    /**< bytes */
	int64_t event_time_ns; /**< event time, ns since the epoch; 0 if none */
};

/** Type of a topology.conf key an operator accepts. */
enum shmrun_param_type {
	SHMRUN_PARAM_STRING,   /**< any non-empty text */
	SHMRUN_PARAM_PATH,     /**< one path, resolved against the conf file's directory */
	SHMRUN_PARAM_PATHS,    /**< blank-separated paths/globs, each resolved likewise; the
				    value handed to the operator has one per line */
	SHMRUN_PARAM_COUNT,    /**< unsigned decimal integer within [min, max] */
	SHMRUN_PARAM_SIZE,     /**< bytes, with optional K/M/G suffix (powers of 1024) */
	SHMRUN_PARAM_RATE,     /**< records per second, decimal, > 0 */
	SHMRUN_PARAM_BOOL,     /**< true/false, yes/no, on/off, 1/0 */
	SHMRUN_PARAM_ENUM,     /**< one of the words in choices */
	SHMRUN_PARAM_DURATION, /**< ns, written with ms or s suffix */
};

/**
 * What a PATH/PATHS key names, for the checks every run and `shmrun check`
 * make before anything starts (runtime/preflight.c): no output may be, or lie
 * inside, an input or the checkpoint_dir's input side; every output must be
 * writable and is locked against a second live run.
 */
enum shmrun_param_io {
	SHMRUN_PARAM_IO_NONE = 0, /**< not a file the stage reads or writes (or not a path) */
	SHMRUN_PARAM_INPUT = 1,   /**< files (or directories, read recursively, or globs) the
				       stage reads */
	SHMRUN_PARAM_OUTPUT = 2,  /**< a file the stage writes (PATH only): a stage of width 1
				       writes it, of width k writes path.<instance>; hidden
				       files beside it (.<name>.*) are the stage's too */
};

/** One key an operator accepts. Tables end with an entry whose key is NULL. */
struct shmrun_param_def {
	const char *key;
	enum shmrun_param_type type;
	bool required;
	const char *def;     /**< default as written in a conf file, or NULL for none */
	uint64_t min, max;   /**< bounds for COUNT/SIZE/RATE/DURATION (0, 0: none) */
	const char *choices; /**< ENUM: space-separated words */
	const char *doc;     /**< one line for docs and `shmrun check` messages */
	bool tuning;         /**< changes speed, not state (e.g. rate): left out of the fingerprint */
	enum shmrun_param_io io; /**< PATH/PATHS: input, output or neither (default) */
	uint64_t reserved[2];    /**< zero; room for fields in a minor version (a table's
				      stride cannot change within a major one) */
};

struct shmrun_task; /* opaque: the runtime's view of one instance of one stage */

/**
 * A combiner: how a keyed aggregation folds records into a fixed-size partial
 * aggregate on the sending side of a shuffle edge, and merges partials into
 * its key-bound state on the receiving side (the combiner of MapReduce,
 * Dean & Ghemawat 2004; Flink's pre-aggregation of a keyed reduce).
 *
 * When the receiving stage's operator declares one and the stage does not set
 * `combine = false`, the runtime keeps, per sending task and receiving
 * instance, a table of (key -> partial); every record the edge carries is
 * folded in with add() instead of being sent, and the partials are sent as
 * records whose value is the partial (partial_bytes bytes) and handed to
 * merge() instead of process(). The table is flushed when the sending task's
 * input has drained, when it is full, and before every barrier and END frame,
 * so checkpoints contain no partial that is still on the sending side: what a
 * checkpoint holds is the same with or without the combiner.
 */
struct shmrun_combiner {
	/** Size of one partial, bytes, 1..256; a new key's partial starts zeroed. */
	uint32_t partial_bytes;
	/**
	 * add() - fold @rec into @partial (the key's partial, @partial_bytes
	 * bytes, 8-byte aligned). Runs on the sending task's worker, outside
	 * every task: it must use nothing but its arguments.
	 */
	void (*add)(void *partial, const struct shmrun_record *rec);
	/**
	 * merge() - the receiving task's side: fold one partial into the task's
	 * state. @partial->key is the key, @partial->value the partial bytes
	 * (@partial_bytes long), @partial->event_time_ns the largest event time
	 * folded into it. Called instead of process() for every combined record.
	 * Return: 0, or a negative errno after shmrun_task_error().
	 */
	int (*merge)(struct shmrun_task *task, void *state, const struct shmrun_record *partial);
	/**
	 * enabled() - optional: whether this stage's settings allow combining
	 * (count: only with `emit = final`, as updates per record are the output
	 * otherwise). Called in the launcher with a task of instance 0, before
	 * any worker starts. NULL: always.
	 */
	bool (*enabled)(const struct shmrun_task *task);
};

/**
 * How an operator's per-worker state is redistributed when its stage's width
 * changes (docs/design.md §5): there is no silent "keep what you had".
 */
enum shmrun_pw_rule {
	SHMRUN_PW_NONE = 0,  /**< no rule: a checkpoint holding per-worker entries of the stage cannot
				  be restored into another width (--rescale refuses); without
				  entries (only key-bound state) the width may change */
	SHMRUN_PW_SPLIT = 1, /**< pool every old instance's entries, deal them out: each entry owned once */
	SHMRUN_PW_UNION = 2, /**< every new instance gets every entry */
};

/** Operator flags. */
#define SHMRUN_OP_SOURCE 0x1u /**< has no input; implements produce() */
#define SHMRUN_OP_SINK 0x2u   /**< emits nothing; a graph needs at least one */
/**
 * A source whose input cannot be read again after a restore (standard input,
 * a socket): records it read since the last checkpoint are lost on a crash,
 * so the job is at-most-once across a crash for them. A job with
 * checkpoint_dir and such a source is refused (`shmrun check` and every run)
 * unless `[job] allow_data_loss_on_crash = true`; `shmrun stress` refuses it
 * (docs/checkpoints.md, "Sources that cannot be replayed"). Such a source
 * snapshots no read position. Since ABI 1.2.
 */
#define SHMRUN_OP_UNREPLAYABLE 0x4u
/**
 * Keeps its state per key (shmrun_keyed_state()): at a width above 1 every
 * record of a key must reach the instance owning the key's vnode, so
 * `shmrun check` refuses, naming the line of `input`, an input that is
 * neither `by key` nor a forward edge (equal widths) from a stage whose
 * records are already partitioned by key, e.g. a forward edge that another
 * width made a rebalance. Without the flag such a job fails at its first
 * misplaced record. Not on a source. Since ABI 1.2.
 */
#define SHMRUN_OP_KEYED 0x8u

struct shmrun_operator {
	/**
	 * sizeof(struct shmrun_operator) as the operator was compiled: the
	 * runtime reads only the fields that fit in it, and treats the ones
	 * after it (added by a later minor version) as absent (NULL, 0). A
	 * plugin operator with size 0 or smaller than ABI 1.0's struct is
	 * refused. Always write `.size = sizeof(struct shmrun_operator)`.
	 */
	uint32_t size;
	const char *name;                      /**< the `op =` value */
	const char *summary;                   /**< one line for --help and docs */
	unsigned flags;                        /**< SHMRUN_OP_* */
	const struct shmrun_param_def *params; /**< accepted keys, NULL-key terminated */
	/**
	 * Sources only, optional: the key of one of @params, of type
	 * SHMRUN_PARAM_RATE, that paces this source: when the stage sets it, the
	 * runtime lets every instance of the stage together produce at most that
	 * many records per second (produce() gets smaller budgets, and the
	 * worker sleeps until the next record is due). NULL, or the key unset in
	 * the stage: unpaced. The operator itself does nothing for it.
	 */
	const char *pacing_param;

	/**
	 * Operators with flush() only, optional: the key of one of @params, of
	 * type SHMRUN_PARAM_DURATION, that sets how often flush() is called at
	 * the latest while input keeps coming (see flush()). NULL, or the key
	 * unset in the stage and without a default: every 100 ms.
	 */
	const char *flush_param;

	/**
	 * open() - optional (NULL: the instance's state is NULL): set up one
	 * instance. @state receives the instance's private state (owned by the
	 * operator until close()).
	 *
	 * When shmrun_task_restoring() is true, open() must NOT compute the
	 * instance's per-worker state (read positions, ranges, a table): that
	 * state is exactly the entries restore() hands over next — possibly
	 * none, for an instance that had finished or that a rescale gave
	 * nothing — and anything open() computed would be read a second time.
	 * Return: 0, or a negative errno after shmrun_task_error() said why.
	 */
	int (*open)(struct shmrun_task *task, void **state);

	/**
	 * produce() - sources only: emit up to @budget records.
	 * Return: 1 if more input remains, 0 when exhausted (end of input follows),
	 * or a negative errno after shmrun_task_error().
	 */
	int (*produce)(struct shmrun_task *task, void *state, uint32_t budget);

	/**
	 * process() - handle one input record (borrowed; copy what you keep).
	 * Return: 0, or a negative errno after shmrun_task_error().
	 */
	int (*process)(struct shmrun_task *task, void *state, const struct shmrun_record *rec);

	/**
	 * process_batch() - optional: handle @n input records at once (borrowed,
	 * valid during the call; copy what you keep), in order. When present the
	 * runtime calls it instead of process() whenever it has records in hand
	 * together (a batch frame off a ring, or a shmrun_emit_batch() upstream);
	 * it must do exactly what @n calls of process() would. @n >= 1.
	 * Return: 0, or a negative errno after shmrun_task_error().
	 */
	int (*process_batch)(struct shmrun_task *task, void *state, const struct shmrun_record *recs,
			     uint32_t n);

	/**
	 * Optional: the combiner of a keyed aggregation (struct shmrun_combiner):
	 * partial aggregates are built on the sending side of a shuffle edge into
	 * this operator's stage, and merged here. NULL: no combining.
	 */
	const struct shmrun_combiner *combiner;

	/**
	 * end_of_input() - every input channel has ended; emit what is final.
	 * Return: 0, or a negative errno after shmrun_task_error().
	 */
	int (*end_of_input)(struct shmrun_task *task, void *state);

	/** close() - optional: free @state. Called once, also after an error. */
	void (*close)(struct shmrun_task *task, void *state);

	/**
	 * prepare() - optional: called once per stage in the launcher, before any
	 * worker starts, with a task of instance 0, to check what the job needs
	 * (e.g. that every input path exists). A failure stops the job with exit
	 * status 2 before anything starts. Return: 0 or a negative errno after
	 * shmrun_task_error().
	 */
	int (*prepare)(struct shmrun_task *task);

	/** The composition rule of this operator's per-worker state. */
	enum shmrun_pw_rule pw_rule;

	/**
	 * snapshot() - optional: called at barrier(@epoch), once the task is
	 * aligned, before the barrier goes downstream; record this instance's
	 * per-worker state with shmrun_pw_add(), one entry per item (a read
	 * position, a committed length). Key-bound state is saved by the runtime.
	 * Must be quick: the task does not process records meanwhile (its stall).
	 * Return: 0, or a negative errno after shmrun_task_error().
	 */
	int (*snapshot)(struct shmrun_task *task, void *state, uint64_t epoch);

	/**
	 * restore() - optional: called after open(), before any record, once per
	 * per-worker entry this instance got from the restored checkpoint
	 * (shmrun_task_restored_epoch()). Key-bound state is already restored.
	 *
	 * Contract: when shmrun_task_restoring() is true the entries are the
	 * instance's whole per-worker state. There is no call at all when there
	 * are no entries (an instance that had finished snapshots none; a split
	 * may deal an instance none), so an operator must not rely on restore()
	 * to discard what open() computed: open() computes nothing then.
	 * Return: 0, or a negative errno after shmrun_task_error().
	 */
	int (*restore)(struct shmrun_task *task, void *state, const void *entry, uint32_t len);

	/**
	 * commit() - optional: every epoch up to @epoch is complete (its MANIFEST
	 * is durable): make the output staged for them visible (two-phase commit).
	 * Return: 0, or a negative errno after shmrun_task_error().
	 */
	int (*commit)(struct shmrun_task *task, void *state, uint64_t epoch);

	/**
	 * flush() - optional, for operators that hold output back (a sink's line
	 * buffer): write out everything the instance holds now, so that it is
	 * visible to whoever reads the output (a file, a pipe, a terminal).
	 *
	 * The worker calls it, on the task's thread, between records:
	 *  - when the task's input has drained: it read nothing in a loop turn
	 *    (its ring inputs were empty), or its whole worker found nothing to do;
	 *  - at least every flush interval (the stage's value of the key named
	 *    by .flush_param, else 100 ms) while input keeps
	 *    coming: the worker looks at the clock every 64 loop turns, never per
	 *    record;
	 *  - when the worker stops without a final checkpoint (SIGTERM without
	 *    checkpoint_dir, a second stop signal), before close().
	 * It is not called after end_of_input() (which should write everything
	 * itself) nor after a failure. At a barrier the runtime calls snapshot(),
	 * not flush(): an operator whose held output must be out before a
	 * checkpoint counts it writes it there.
	 *
	 * Called often while the worker idles: return at once when nothing is
	 * held. Must not emit. Return: 0, or a negative errno after
	 * shmrun_task_error() said why (the task fails as if process() had).
	 */
	int (*flush)(struct shmrun_task *task, void *state);

	/**
	 * check_restore() - optional: called in the launcher before any worker
	 * starts, once per per-worker entry of the checkpoint the run will
	 * restore (with a task of the entry's instance; no open(), no state),
	 * to refuse a restore that cannot be right, e.g. an input file that
	 * changed since its read position was saved. A failure stops the job
	 * with exit status 2 before anything starts. restore() should check
	 * the same again (a restart after a crash does not call this).
	 * Return: 0, or a negative errno after shmrun_task_error().
	 */
	int (*check_restore)(struct shmrun_task *task, const void *entry, uint32_t len);

	/**
	 * Optional, plugins: the version of this operator's state format (its
	 * key-bound values and per-worker entries), e.g. "1". It goes into the
	 * topology fingerprint in place of the plugin's version, so a new
	 * release of a plugin that keeps the format can restore the previous
	 * release's checkpoints; change it whenever the format changes. NULL:
	 * the plugin's version stands for it (every release refuses the last
	 * one's checkpoints). Ignored for built-in operators.
	 */
	const char *state_version;

	/* ---- ABI 1.1: event time ------------------------------------------------ */

	/**
	 * on_timer() - optional (required by an operator that sets timers): a
	 * timer this task set with shmrun_timer_set() fired. An event-time timer
	 * fires when the task's watermark becomes >= @time_ns, before that
	 * watermark reaches on_watermark() and goes downstream; every event-time
	 * timer still pending fires at end of input (watermark
	 * SHMRUN_WATERMARK_MAX), before end_of_input(). A processing-time timer
	 * fires when the clock reaches @time_ns (checked by the worker between
	 * records; an idle worker wakes up for the earliest timer); one still
	 * pending when its task reaches end of input does not fire. A stop with checkpoint fires
	 * nothing: pending timers are in the final checkpoint. Due timers fire
	 * in @time_ns order (equal times: by key bytes, then key length; the
	 * same order in every run). The timer is deleted before the call: set
	 * it again to repeat.
	 * @key: the key the timer was set for (borrowed; valid during the call).
	 * The callback may emit, read and write the key's state (any key's),
	 * and set or delete timers; a timer set at or before the watermark being
	 * processed fires in the same pass.
	 * Return: 0, or a negative errno after shmrun_task_error().
	 */
	int (*on_timer)(struct shmrun_task *task, void *state, const void *key, uint32_t key_len,
			int64_t time_ns, enum shmrun_time_domain domain);

	/**
	 * on_watermark() - optional: the task's watermark advanced to
	 * @watermark_ns (the minimum over its inputs; SHMRUN_WATERMARK_MAX once
	 * every input ended, before end_of_input()). Called after the event-time
	 * timers it made due have fired and before the watermark is forwarded
	 * downstream. May emit.
	 * Return: 0, or a negative errno after shmrun_task_error().
	 */
	int (*on_watermark)(struct shmrun_task *task, void *state, int64_t watermark_ns);
};

/**
 * What a plugin (a shared object named by `[job] plugins =` or `--plugin`)
 * exports, under the name SHMRUN_PLUGIN_SYMBOL; SHMRUN_PLUGIN() defines it.
 * The runtime refuses a plugin whose abi_major differs from
 * SHMRUN_ABI_MAJOR or whose abi_minor is newer than SHMRUN_ABI_MINOR, one
 * without a name, version or operators, and one whose operator lacks a name,
 * its callbacks (produce() for a source, process() otherwise) or a valid
 * size, has flags this runtime does not know or SHMRUN_OP_UNREPLAYABLE
 * without SHMRUN_OP_SOURCE, or has the name of another operator (built-in or
 * from a plugin).
 * Everything it points to must stay valid while the plugin is loaded (it
 * is never unloaded before the process ends).
 */
struct shmrun_plugin {
	uint32_t abi_major;  /**< SHMRUN_ABI_MAJOR as the plugin was compiled */
	uint32_t abi_minor;  /**< SHMRUN_ABI_MINOR as the plugin was compiled */
	const char *name;    /**< e.g. "dpkg"; for messages and `shmrun ops` */
	const char *version; /**< the plugin's release, e.g. "1.2.0"; goes into the fingerprint */
	/** The operators, ending with NULL; at least one. */
	const struct shmrun_operator *const *operators;
};

/* A plugin's descriptor is exported also when it is built with -fvisibility=hidden. */
#if defined(__GNUC__)
#define SHMRUN_PLUGIN_VISIBLE __attribute__((visibility("default")))
#else
#define SHMRUN_PLUGIN_VISIBLE
#endif

/** The name of the struct shmrun_plugin a plugin exports. */
#define SHMRUN_PLUGIN_SYMBOL "shmrun_plugin"

/**
 * SHMRUN_PLUGIN() - define the plugin's exported descriptor, in one source
 * file of the plugin, at file scope:
 *
 *     SHMRUN_PLUGIN("dpkg", "1.0.0", &dpkg_parse);
 *
 * @name_, @version_: string literals; then one or more pointers to
 * struct shmrun_operator. Works in C11 and C++.
 */
#define SHMRUN_PLUGIN(name_, version_, ...)                                                    \
	static const struct shmrun_operator *const shmrun_plugin_operators_[] = {__VA_ARGS__,  \
										  NULL};        \
	const struct shmrun_plugin shmrun_plugin = {                                          \
		SHMRUN_ABI_MAJOR, SHMRUN_ABI_MINOR, (name_), (version_), shmrun_plugin_operators_}

/* Declared here so that, in C++ too, SHMRUN_PLUGIN()'s definition has external
 * linkage with C names. The runtime never defines it. */
extern SHMRUN_PLUGIN_VISIBLE const struct shmrun_plugin shmrun_plugin;

/**
 * shmrun_emit() - send a record downstream on every output edge.
 * @task: the emitting task (the one whose callback is running).
 * @rec:  borrowed; copied before the call returns.
 *
 * Never blocks: a record that does not fit into a full ring is kept by the
 * runtime and the task is parked (not given more input) until it drains
 * (docs/design.md §5). Records larger than the ring's largest frame are rejected.
 *
 * Return: 0; -EMSGSIZE if the record cannot fit any ring of this job (the task
 * fails with a message naming the stage and size); -ENOMEM.
 */
int shmrun_emit(struct shmrun_task *task, const struct shmrun_record *rec);

/**
 * shmrun_emit_batch() - send @n records downstream, in order, as @n calls of
 * shmrun_emit() would, at a fraction of the per-record cost: a forward edge
 * hands them to the next operator's process_batch() in one call, a channel
 * packs them into batch frames (docs/data-path.md).
 * @task: the emitting task.
 * @recs: @n records, borrowed; copied before the call returns.
 * @n:    records, >= 0.
 *
 * Return: 0; -EMSGSIZE or -ENOMEM as shmrun_emit() (records before the one
 * that failed were sent); the error of a downstream callback.
 */
int shmrun_emit_batch(struct shmrun_task *task, const struct shmrun_record *recs, uint32_t n);

/** shmrun_task_stage() - the stage name (the conf section), e.g. "count". */
const char *shmrun_task_stage(const struct shmrun_task *task);
/** shmrun_task_instance() - this task's instance index, 0..width-1. */
uint32_t shmrun_task_instance(const struct shmrun_task *task);
/** shmrun_task_width() - the stage's width. */
uint32_t shmrun_task_width(const struct shmrun_task *task);
/** shmrun_task_vnodes() - the job's vnode count V. */
uint32_t shmrun_task_vnodes(const struct shmrun_task *task);
/**
 * shmrun_task_vnode_range() - the vnodes this instance owns, [*lo, *hi)
 * (vnode_ranges, docs/design.md §2).
 */
void shmrun_task_vnode_range(const struct shmrun_task *task, uint32_t *lo, uint32_t *hi);
/**
 * shmrun_task_vnode_of() - the vnode of key bytes: the high 32 bits of
 * XXH3-64(key) scaled to [0, V) (shmrun_placement_vnode_of_hash()).
 */
uint32_t shmrun_task_vnode_of(const struct shmrun_task *task, const void *key, uint32_t len);

/**
 * shmrun_task_inputs() - how many upstream stages the stage reads from: the
 * entries of its `input =` list (0 for a source). Known from prepare() on.
 * Since ABI 1.1.
 */
uint32_t shmrun_task_inputs(const struct shmrun_task *task);
/**
 * shmrun_task_input() - which input the record(s) being handed to
 * process(), process_batch() or a combiner's merge() came from: the
 * upstream stage's index in this stage's `input =` list, 0..inputs-1, as
 * written (`input = bids by key, auctions by key`: bids 0, auctions 1),
 * whatever the edge kind. All records of one process_batch() call come from
 * one input. Meaningful only inside those callbacks (elsewhere: the input of
 * the last record delivered, 0 before any). What a two-input operator
 * (interval_join) needs to tell its sides apart; Flink's
 * CoProcessFunction has processElement1/2 for it. Since ABI 1.1.
 */
uint32_t shmrun_task_input(const struct shmrun_task *task);

/**
 * shmrun_task_param() - the value of a key declared in the operator's params,
 * as written (after default substitution; PATH/PATHS already resolved against
 * the conf file's directory). NULL if absent and without default.
 */
const char *shmrun_task_param(const struct shmrun_task *task, const char *key);
/**
 * shmrun_task_param_u64() - a COUNT, SIZE, RATE or DURATION key parsed into
 * its unit (count, bytes, records/s, ns). @def if absent and without default.
 */
uint64_t shmrun_task_param_u64(const struct shmrun_task *task, const char *key, uint64_t def);
/** shmrun_task_param_bool() - a BOOL key; @def if absent. */
bool shmrun_task_param_bool(const struct shmrun_task *task, const char *key, bool def);

/**
 * shmrun_keyed_state() - the key-bound state of @key for this task: a value of
 * @value_bytes bytes (the same for every key of a task) in the key's vnode
 * (docs/design.md §5). Memory comes from the worker's jemalloc arena.
 * @task:        the running task.
 * @key:         key bytes (borrowed; copied on insert).
 * @value_bytes: size of the value, bytes; fixed by the first call.
 * @create:      insert a zero-filled value if the key is absent.
 *
 * Return: the value (8-byte aligned, valid until the task closes or the key
 * is deleted with shmrun_keyed_state_delete()), or NULL if absent and
 * !@create (also before the task's first insert). NULL when creating means
 * out of memory or a @value_bytes different from the first call; the task
 * fails with a message.
 */
void *shmrun_keyed_state(struct shmrun_task *task, const void *key, uint32_t key_len,
			 uint32_t value_bytes, bool create);

/**
 * shmrun_keyed_state_foreach() - call @fn for every key of this task, vnode by
 * vnode (order within a vnode unspecified). @fn must not insert keys. Stops at
 * the first non-zero return of @fn and returns it; 0 otherwise.
 */
int shmrun_keyed_state_foreach(struct shmrun_task *task,
			       int (*fn)(void *arg, const void *key, uint32_t key_len,
					 void *value),
			       void *arg);

/**
 * shmrun_keyed_state_ns() - as shmrun_keyed_state(), for the pair (@key,
 * @ns): one value per key and namespace, e.g. per key and window start
 * (Flink's namespaced keyed state). The pair lives in @key's vnode, so it
 * is checkpointed and moved by a rescale with the key. Stored as the key's
 * bytes followed by @ns (8 bytes, little-endian): shmrun_keyed_state_foreach()
 * shows it so (key_len + 8 bytes). An operator uses either this or
 * shmrun_keyed_state(), not both: a task's first insert decides, and a call
 * of the other kind fails the task with a message (and returns NULL).
 * Since ABI 1.1.
 * @key_len: bytes, at most UINT32_MAX - 8.
 * Return: as shmrun_keyed_state(). A lookup (!@create) before the task's
 * first insert returns NULL (as it does for shmrun_keyed_state()).
 */
void *shmrun_keyed_state_ns(struct shmrun_task *task, const void *key, uint32_t key_len,
			    uint64_t ns, uint32_t value_bytes, bool create);

/**
 * shmrun_keyed_state_delete() - remove @key's value (from shmrun_keyed_state())
 * or, with @namespaced, the pair (@key, @ns)'s (from shmrun_keyed_state_ns()),
 * so that state stays bounded as windows close: its memory is reused by
 * later inserts and it is not in the next checkpoint. Pointers to the
 * deleted value are invalid afterwards; others stay valid. Must not be
 * called from inside shmrun_keyed_state_foreach(). Since ABI 1.1.
 * Return: 0; -ENOENT if absent (also: of the kind the task does not use);
 * -ENOMEM (@namespaced: no memory to build the pair's stored key).
 */
int shmrun_keyed_state_delete(struct shmrun_task *task, const void *key, uint32_t key_len,
			      bool namespaced, uint64_t ns);

/** shmrun_keyed_state_keys() - distinct keys in this task's key-bound state. */
uint64_t shmrun_keyed_state_keys(const struct shmrun_task *task);

/**
 * shmrun_timer_set() - register a timer for @key at @time_ns in @domain
 * (Flink's keyed timers). It lives in the key's vnode: it is part of the
 * checkpoint and moves with the vnode on a rescale, so a pending timer is
 * neither lost nor fired twice. One timer per (domain, key, time): setting
 * it again is a no-op. An event-time timer at or before the current
 * watermark fires at the next watermark step (at the latest at end of input).
 * The operator must have on_timer(). Since ABI 1.1.
 * @key: borrowed, copied. @time_ns: ns since the epoch.
 * Return: 0; -ENOMEM (the task fails with a message); -EINVAL without
 * on_timer(), for a @domain that is neither of the two, or a key longer than
 * UINT32_MAX - 9 bytes (the task fails with a message).
 */
int shmrun_timer_set(struct shmrun_task *task, enum shmrun_time_domain domain, const void *key,
		     uint32_t key_len, int64_t time_ns);

/**
 * shmrun_timer_delete() - remove the timer (@domain, @key, @time_ns).
 * Return: 0; -ENOENT if there is none. Since ABI 1.1.
 */
int shmrun_timer_delete(struct shmrun_task *task, enum shmrun_time_domain domain,
			const void *key, uint32_t key_len, int64_t time_ns);

/** shmrun_task_timers() - this task's pending timers, both domains. Since ABI 1.1. */
uint64_t shmrun_task_timers(const struct shmrun_task *task);

/**
 * shmrun_task_watermark() - this task's current event-time watermark: the
 * minimum over its inputs of the newest watermark each delivered (an input
 * that ended counts as SHMRUN_WATERMARK_MAX; one idle for the job's
 * idle_timeout is left out), never decreasing; for a task that generates
 * watermarks (its stage sets watermark_delay), the watermark it generated.
 * After a restore it starts at the checkpoint's. SHMRUN_WATERMARK_MIN
 * before any. A record with event_time_ns <= it is late. Since ABI 1.1.
 */
int64_t shmrun_task_watermark(const struct shmrun_task *task);

/**
 * shmrun_pw_add() - add one per-worker state entry (copied) during snapshot().
 * Return: 0; -ENOMEM; -EINVAL outside snapshot().
 */
int shmrun_pw_add(struct shmrun_task *task, const void *entry, uint32_t len);

/**
 * shmrun_task_sync_fd() - during snapshot(): @fd must be fsynced before the
 * checkpoint counts as durable (a sink's staged output). The runtime fsyncs it
 * off the processing path. Return: 0; -EINVAL outside snapshot(); -ENOMEM.
 */
int shmrun_task_sync_fd(struct shmrun_task *task, int fd);

/** shmrun_task_checkpointing() - whether the job takes checkpoints (checkpoint_dir set). */
bool shmrun_task_checkpointing(const struct shmrun_task *task);

/**
 * shmrun_task_restored_epoch() - the epoch this run restored from, 0 for a
 * fresh start. Known from open() on.
 */
uint64_t shmrun_task_restored_epoch(const struct shmrun_task *task);

/**
 * shmrun_task_restoring() - whether this instance's per-worker state comes
 * from the restored checkpoint: true on every restore (after a stop, a crash
 * or a rescale) except for a stage that is new to the checkpoint (added by
 * `shmrun --rescale`), which starts as on a first start. When true, open()
 * must compute no per-worker state (see restore()). Known from open() on.
 */
bool shmrun_task_restoring(const struct shmrun_task *task);

/**
 * shmrun_task_error() - record why the task failed (printf-style). The worker
 * logs it with the stage and instance and the job exits non-zero.
 */
void shmrun_task_error(struct shmrun_task *task, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/** shmrun_task_log() - log an info line tagged with the stage and instance. */
void shmrun_task_log(struct shmrun_task *task, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/**
 * shmrun_task_conf_dir() - the directory of the topology.conf (resolved, no
 * trailing '/'; the current directory for a topology on standard input),
 * against which relative paths resolve; NULL if not known. A saved position
 * that names a file under it relative to it still finds the file after the
 * job directory moved.
 */
const char *shmrun_task_conf_dir(const struct shmrun_task *task);

/** shmrun_task_warn() - log a warning line tagged with the stage and instance. */
void shmrun_task_warn(struct shmrun_task *task, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/** The job's end-of-run counters, summed over all tasks and printed at the end. */
enum shmrun_counter {
	SHMRUN_COUNT_RECORDS_IN = 0,  /**< records a source read */
	SHMRUN_COUNT_RECORDS_OUT = 1, /**< records a sink wrote */
	/** records an operator dropped as malformed (extract's bad lines); since ABI 1.1 */
	SHMRUN_COUNT_RECORDS_BAD = 2,
	/** records an operator dropped as late: event time behind the watermark past
	 * allowed lateness (op = window); since ABI 1.1 */
	SHMRUN_COUNT_LATE_RECORDS = 3,
};

/** shmrun_task_count() - add @n to one of the job's counters. */
void shmrun_task_count(struct shmrun_task *task, enum shmrun_counter counter, uint64_t n);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif /* SHMRUN_OPERATOR_H */
