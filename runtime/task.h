/*
 * runtime/task.h: one task (a stage instance placed on a worker) and the
 * operator API's task functions (private to runtime/).
 *
 * What it is for. struct shmrun_task is what an operator's callbacks receive
 * as their opaque `struct shmrun_task *` (shmrun/operator.h). task.c
 * implements the operator API's functions on it: accessors, parameters,
 * errors and logs, counters, key-bound state, and what snapshot() may call
 * (shmrun_pw_add(), shmrun_task_sync_fd()). The worker loop (worker.c) owns
 * the task's life: it creates tasks in setup(), wires their channels, calls
 * the callbacks and frees them at teardown.
 *
 * Invariants:
 * - a task belongs to one worker (@w) and is used by that worker's one thread
 *   only; nothing here locks;
 * - a task's first error wins: stats->error and fail_errno keep the first
 *   (shmrun_task_error(), note_fail_errno()); w->failed stops the loop;
 * - in the launcher (prepare, prepare.c) a task lives on a quiet worker
 *   (w->quiet) with no shared control area: errors are kept whole for the
 *   launcher (shmrun_task_quiet_error()) instead of logged.
 *
 * Designs rejected: handing operators the worker, or a struct they may read
 * (every field would become API, and a change to the loop would break
 * operators built against it); keeping only the summary of an error in shared
 * memory (it has a fixed size: the whole message goes to the log, or in the
 * launcher to the caller).
 */
#ifndef SHMRUN_RT_TASK_H
#define SHMRUN_RT_TASK_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "channel.h"
#include "control.h"
#include "metrics.h"
#include "plan.h"
#include "shmrun/operator.h"
#include "state.h"
#include "timer.h"
#include "watermark.h"

struct shmrun_worker;

struct shmrun_task {
	uint32_t id;
	const struct shmrun_stage *stage;
	const struct shmrun_operator *op;
	uint32_t instance, width, vnodes, vnode_lo, vnode_hi;
	struct shmrun_worker *w;
	void *state;
	bool opened, source_done, ended;
	struct out_edge *outs;
	uint32_t nouts;
	struct chan_in **ins;
	uint32_t nins;
	uint32_t inputs_open; /* open ring channels + forward upstreams */
	struct shmrun_kv kv;
	struct shmrun_timers timers; /* ABI 1.1: keyed timers (timer.c) */
	unsigned char *ns_key;	     /* shmrun_keyed_state_ns(): key || ns being built */
	uint32_t ns_key_cap;
	/* checkpoints */
	uint64_t barrier_epoch;  /* newest epoch this task snapshotted and forwarded */
	uint64_t align_epoch;    /* epoch being aligned, 0 if none */
	uint32_t aligned;        /* inputs that delivered align_epoch's barrier */
	uint32_t fwd_inputs;     /* forward inputs (direct calls from upstream tasks) */
	bool *fwd_slot_held;     /* per forward input (out_edge.fwd_slot): it delivered
				    align_epoch, so its upstream parks (that one only) */
	uint32_t fwd_nheld;      /* how many are; each counts in w->fwd_holds */
	bool exhausted;          /* source: no more input, waiting for the final epoch */
	bool in_snapshot;        /* inside op->snapshot(): shmrun_pw_add() allowed */
	unsigned char *pw;       /* per-worker entries of the snapshot: [u32 len][bytes]... */
	size_t pw_len, pw_cap;
	uint32_t pw_n;
	int *sync_fds;           /* fds to fsync with the snapshot */
	uint32_t nsync, sync_cap;
	unsigned char *restore_pw; /* restored per-worker entries, same encoding */
	bool restoring;            /* per-worker state comes from the restored checkpoint */
	size_t restore_pw_len;
	const void *cur_key;  /* key of the record being processed, if its hash is known */
	uint32_t cur_key_len;
	uint64_t cur_hash;    /* XXH3-64 of cur_key */
	const struct shmrun_record *cur_recs; /* process_batch(): the records, if hashes known */
	const uint64_t *cur_hashes;           /* their key hashes */
	uint32_t cur_n, cur_i;                /* how many; the next one expected */
	uint32_t cur_input;   /* shmrun_task_input(): the input (index in the stage's `input =`
				 list) of the records being delivered; set before each delivery */
	bool busy;            /* this loop turn: used its whole input budget (combiners wait) */
	uint64_t records_in, records_out, records_bad, records_late;
	uint64_t rate;           /* source: its op->pacing_param, records/s, 0 = unlimited */
	int64_t flush_every_ns;  /* op->flush: the stage's flush_interval */
	int64_t flush_due_ns;    /* op->flush: next flush by the clock */
	struct shmrun_task_slot *rate_slot; /* paced sources: the stage's shared tokens */
	double rate_host;	 /* paced: records/s this host's instances of the stage share,
				    rate x (its instances) / width (pace_host_rate()) */
	uint64_t rate_used;	 /* paced sources: tokens this instance has used (pace.c) */
	/* event time (ABI 1.1). wm: this task's watermark (SHMRUN_WATERMARK_MIN
	 * until one is known), owned by watermark.c; a snapshot saves it and a
	 * restore sets it before open() (the minimum over the old instances of
	 * the stage after a rescale). */
	int64_t wm;
	/* watermarks (watermark.c); t->wm above is the one truth, these serve it */
	int64_t wm_sent;          /* newest watermark sent downstream (MIN: none) */
	bool wm_gen;              /* the stage sets watermark_delay: t generates its own */
	int64_t wm_max_ts;        /* wm_gen: largest event time emitted (MIN: none) */
	int64_t wm_delay_ns;      /* wm_gen: the stage's watermark_delay */
	int64_t wm_interval_ns;   /* wm_gen: the stage's watermark_interval */
	int64_t wm_due_ns;        /* wm_gen: next generation, CLOCK_MONOTONIC */
	struct wm_input *fwd_wm;  /* one per forward input (out_edge.fwd_slot) */
	/* live counters (metrics.h), published by the worker once per turn */
	struct shmrun_metrics_task *mx; /* this task's block; NULL without a metrics block */
	uint64_t m_in, m_out;           /* records delivered to it / emitted by it */
	uint64_t m_in_bytes, m_out_bytes; /* their key + value bytes */
	uint64_t m_busy_ns, m_idle_ns, m_bp_ns; /* time busy, idle, parked */
	int64_t m_turn_ns;              /* busy time in this loop turn so far */
	uint64_t m_src_pos, m_src_total; /* file sources: shmrun_task_source_progress() */
	uint64_t m_bad0, m_late0;       /* records_bad, records_late published before this start */
};

/*
 * task_known_hash() - the key hash the runtime already has for @key (the
 * record being processed came off a ring with it), in *@h: the record of
 * process(), or the next record of process_batch() (records are usually
 * looked up in order). Return: whether it was known.
 */
static inline bool task_known_hash(struct shmrun_task *t, const void *key, uint32_t key_len,
				   uint64_t *h)
{
	uint32_t i = t->cur_i;

	if (key == t->cur_key && key_len == t->cur_key_len && key) {
		*h = t->cur_hash;
		return true;
	}
	if (i < t->cur_n && key == t->cur_recs[i].key && key_len == t->cur_recs[i].key_len) {
		*h = t->cur_hashes[i];
		t->cur_i = i + 1;
		return true;
	}
	return false;
}

/*
 * note_fail_errno() - keep @err (a negative errno; 0 or positive is ignored)
 * as the first errno an operator of worker @w failed with, in
 * w->stats->fail_errno (which must be set), for the launcher to judge whether
 * a restart can cure it (shmrun_errno_is_permanent()). A later one is dropped.
 */
void note_fail_errno(struct shmrun_worker *w, int err);

/*
 * shmrun_task_quiet_error() - the whole first error a task of a quiet worker
 * (w->quiet: prepare, in the launcher) reported since the last
 * shmrun_task_quiet_error_reset(), or NULL. Owned by task.c; valid until the
 * next reset.
 */
const char *shmrun_task_quiet_error(void);

/*
 * shmrun_task_quiet_error_line() - the conf line of the key the quiet error
 * is about (it came from shmrun_task_error_at() with a key set in the
 * file), or 0.
 */
int shmrun_task_quiet_error_line(void);

/* shmrun_task_quiet_error_reset() - forget (and free) the quiet error. */
void shmrun_task_quiet_error_reset(void);

/*
 * shmrun_stage_combines() - whether shuffle edges into stage @st pre-aggregate
 * with its operator's combiner: the operator has one, the stage does not set
 * `combine = false`, and the combiner's enabled() (asked with a task of the
 * stage that has parameters only) agrees.
 */
bool shmrun_stage_combines(const struct shmrun_stage *st);

#endif /* SHMRUN_RT_TASK_H */
