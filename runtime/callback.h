/*
 * runtime/callback.h: which operator callback a worker is in, told to the
 * launcher through the control area (private to runtime/; callback.c).
 *
 * What it is for. An operator — a plugin especially — may crash (SIGSEGV,
 * SIGBUS, SIGFPE, SIGILL, abort()) or never return. The launcher already sees
 * a worker die and restarts the job; with this it can also say where: the
 * stage, the instance, the operator and its origin (built-in, or which
 * plugin file) and the callback. And with `operator_timeout` set it reports a
 * callback that has not returned within it.
 *
 * How. Around every call of an operator callback the worker stores a small
 * word into its block of the control area (struct shmrun_worker_stats):
 *
 *     cb_where = task id (bits 0-31) | callback (bits 32-39) | aux (bits 40-63)
 *     cb_seq   = entries so far
 *
 * cb_enter() stores cb_seq, then cb_where (release); cb_leave() stores back
 * the where of the enclosing callback (a callback that emits runs its
 * forward successor's process() inside its own: the words form a stack kept
 * in the C stack's locals), 0 at the outermost. That is three plain stores
 * on x86 per callback and no clock read: per record (process()) as cheap as
 * a counter. aux is the stage of the combiner's operator for add(), which
 * runs on the sending side inside the sending task's callback; else 0.
 * add() is marked without an entry counted, once per batch on a combining
 * edge (worker.c, add_mark()): per record it cost 3-4 % of word count. So a
 * slow (not stuck) callback that folds records is seen alternating between
 * itself and add(); a stuck one is named exactly.
 *
 * The launcher reads cb_where after waitpid for a crash (the words of a dead
 * process are final), and, with operator_timeout, samples cb_where (acquire)
 * then cb_seq every operator_timeout/4 (shmrun_cb_watch()): the same seq with
 * a non-zero where for operator_timeout means one call has not returned.
 * Pair C13 (docs/shm-layout.md): the release store of cb_where in
 * cb_enter()/cb_leave() and the launcher's acquire load of it; cb_seq was
 * stored before it, so a where the launcher sees comes with the seq of its
 * entry or a later one, and a new call is never taken for the old one.
 *
 * Invariants: cb_where is non-zero exactly while the worker's thread is
 * inside an operator callback (or the runtime code that callback called,
 * shmrun_emit() and what it reaches); only the worker writes its words;
 * nothing here allocates or reads the clock on the worker's side.
 *
 * Rejected:
 *  - a clock read per callback in the worker (a deadline per call): tens of
 *    ns per record on a data path that spends tens of ns per record;
 *  - a watchdog thread or timer signal in the worker: workers are
 *    single-threaded by design (worker.c), and a timer signal interrupts the
 *    operator's system calls;
 *  - a SIGSEGV handler in every worker that reports and re-raises: the
 *    launcher's line exists anyway (it sees the death and reads the words),
 *    and a second line for the same event is noise. The launcher's own
 *    callbacks (prepare(), check_restore()) have no one watching them, so
 *    there a handler on an alternate stack writes the line
 *    (shmrun_cb_guard_begin());
 *  - killing a callback past operator_timeout: slow is not wrong (an fsync
 *    on a busy disk, a plugin waiting on the network), and a restart re-does
 *    the same call on the same input, so a slow job would become a restart
 *    loop. The launcher reports, and the message says how to kill it
 *    (docs/topology.md, operator_timeout).
 */
#ifndef SHMRUN_RT_CALLBACK_H
#define SHMRUN_RT_CALLBACK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ckpt/fault.h"
#include "worker.h"

/* The operator callbacks, as cb_where names them (0: none). */
enum shmrun_cb {
	SHMRUN_CB_NONE = 0,
	SHMRUN_CB_OPEN,
	SHMRUN_CB_PRODUCE,
	SHMRUN_CB_PROCESS,
	SHMRUN_CB_PROCESS_BATCH,
	SHMRUN_CB_MERGE,         /* struct shmrun_combiner's merge() */
	SHMRUN_CB_ADD,           /* struct shmrun_combiner's add(), on the sending side */
	SHMRUN_CB_END_OF_INPUT,
	SHMRUN_CB_CLOSE,
	SHMRUN_CB_SNAPSHOT,
	SHMRUN_CB_RESTORE,
	SHMRUN_CB_COMMIT,
	SHMRUN_CB_FLUSH,
	SHMRUN_CB_PREPARE,       /* in the launcher */
	SHMRUN_CB_CHECK_RESTORE, /* in the launcher */
	SHMRUN_CB_ON_TIMER,      /* ABI 1.1: a timer fired (timer.c) */
	SHMRUN_CB_ON_WATERMARK, /* ABI 1.1: the watermark advanced (watermark.c) */
	SHMRUN_CB_COUNT,
};

/*
 * shmrun_cb_name() - "process_batch()", "add()", ... for @cb; "?()" for a
 * value out of range (a corrupt word). Static strings.
 */
const char *shmrun_cb_name(unsigned cb);

/* shmrun_cb_where() - the cb_where word of callback @cb of task @task, @aux as above. */
static inline uint64_t shmrun_cb_where(uint32_t task, enum shmrun_cb cb, uint32_t aux)
{
	return (uint64_t)task | (uint64_t)cb << 32 | (uint64_t)aux << 40;
}

/*
 * cb_enter() - @t's worker enters callback @cb of @t: cb_seq, then cb_where
 * (release, C13). Return: the enclosing callback's where, for cb_leave().
 * In a build with the fault switches, SHMRUN_TEST_CALLBACK may crash or
 * hang here (fault.h), as if inside the callback.
 */
static inline uint64_t cb_enter(struct shmrun_task *t, enum shmrun_cb cb)
{
	struct shmrun_worker *w = t->w;
	uint64_t prev = w->cb_where, where = shmrun_cb_where(t->id, cb, 0);

	w->cb_where = where;
	atomic_store_explicit(&w->stats->cb_seq, ++w->cb_seq, memory_order_relaxed);
	/* release: pairs with the acquire load in shmrun_cb_watch(); cb_seq is seen with it */
	atomic_store_explicit(&w->stats->cb_where, where, memory_order_release);
	shmrun_fault_callback(t->op->name, shmrun_cb_name(cb));
	return prev;
}

/* cb_leave() - back to the enclosing callback's where @prev (0: none); release, C13. */
static inline void cb_leave(struct shmrun_task *t, uint64_t prev)
{
	struct shmrun_worker *w = t->w;

	w->cb_where = prev;
	/* release: pairs with the acquire load in shmrun_cb_watch() */
	atomic_store_explicit(&w->stats->cb_where, prev, memory_order_release);
}

/*
 * shmrun_cb_describe() - @where (a cb_where word of @plan's run) in the
 * user's terms, into @buf (@len bytes, cut short if longer):
 * "process_batch() of stage count, instance 0, operator count (built-in)",
 * "add() of the combiner of stage count, operator count (built-in), on the
 * sending side in stage words, instance 1", a plugin's operator as
 * shmrun_cb_operator() writes it.
 * Return: false (and "" in @buf) when @where is 0 or names no task of @plan.
 */
bool shmrun_cb_describe(const struct shmrun_plan *plan, uint64_t where, char *buf, size_t len);

/*
 * shmrun_cb_operator() - @op and its origin into @buf (@len bytes, cut short
 * if longer): "operator count (built-in)", or, from a plugin
 * (shmrun_operator_plugin()), "operator dpkg_parse of plugin dpkg 1.0.0
 * (/usr/lib/x/dpkg.so)", the origin as `shmrun ops` writes it.
 */
void shmrun_cb_operator(const struct shmrun_operator *op, char *buf, size_t len);

/* What the watch knows of a worker's call at cb_watch.seq (cb_watch.state). */
enum cb_watch_state {
	CB_WATCHING = 0, /* not reported (yet) */
	CB_TOLD,         /* reported as not returned within operator_timeout */
	CB_QUIET,        /* reported, then returned: not reported again */
};

/* The launcher's memory of each worker's callbacks, for operator_timeout. */
struct cb_watch {
	int64_t next_ns;   /* next sample, CLOCK_MONOTONIC ns */
	uint64_t *seq;     /* per worker: cb_seq at the last change seen */
	uint64_t *where;   /* per worker: cb_where then */
	int64_t *since_ns; /* per worker: when that change was first seen */
	uint8_t *state;    /* per worker: enum cb_watch_state */
	uint32_t n;        /* workers */
};

/*
 * shmrun_cb_watch_init() - arrays for @workers workers, the first sample now.
 * Return: 0; -ENOMEM (nothing allocated: the watch does nothing).
 */
int shmrun_cb_watch_init(struct cb_watch *cw, uint32_t workers);

/* shmrun_cb_watch_free() - release @cw's arrays (zeroed; may be called twice). */
void shmrun_cb_watch_free(struct cb_watch *cw);

/*
 * shmrun_cb_watch_tick_ns() - how often the launcher should call
 * shmrun_cb_watch() for @timeout_ns: timeout/4, at least 1 ms, at most
 * @max_ns; @max_ns when @timeout_ns is 0 (off).
 */
int64_t shmrun_cb_watch_tick_ns(uint64_t timeout_ns, int64_t max_ns);

/*
 * shmrun_cb_watch() - the launcher's sample of every running worker's
 * callback words (@ctl, @pids: 0 for a reaped worker), at most every
 * operator_timeout/4 (@now, CLOCK_MONOTONIC ns; earlier calls return at
 * once; nothing when job->operator_timeout_ns is 0). A call seen in progress
 * for operator_timeout is reported once (WARN, naming worker, pid, stage,
 * instance, operator, origin and callback, and how to kill it); when it then
 * returns, one INFO line says after how long.
 */
void shmrun_cb_watch(struct cb_watch *cw, const struct shmrun_plan *plan,
		     struct shmrun_control *ctl, const pid_t *pids, int64_t now);

/*
 * shmrun_cb_watch_ended() - worker @w (@pid) was reaped (@now, CLOCK_MONOTONIC
 * ns): if a call of it was reported and has returned since (its final words
 * say so), one INFO line says it returned within the time since it was first
 * seen; nothing if it died in that call (the crash names it).
 */
void shmrun_cb_watch_ended(struct cb_watch *cw, const struct shmrun_plan *plan,
			   struct shmrun_control *ctl, uint32_t w, pid_t pid, int64_t now);

/*
 * shmrun_cb_guard_begin() - the launcher is about to call callback @cb
 * (prepare() or check_restore()) of @stage's operator, @instance: until
 * shmrun_cb_guard_end(), SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT are
 * caught on an alternate stack, and the handler writes one line naming the
 * callback, stage, instance, operator and signal with write(2), then
 * re-raises the signal with its default action (the process dies of it, as
 * it would have). The line is composed here, before the call: the handler
 * only appends the signal's name.
 */
void shmrun_cb_guard_begin(const struct shmrun_job *job, uint32_t stage, uint32_t instance,
			   enum shmrun_cb cb);

/* shmrun_cb_guard_end() - the previous handlers back (and the alternate stack). */
void shmrun_cb_guard_end(void);

/* shmrun_signal_name() - "SIGSEGV" for 11, ...; "signal N" style "SIG?" if unknown. */
const char *shmrun_signal_name(int sig);

#endif /* SHMRUN_RT_CALLBACK_H */
