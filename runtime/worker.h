/*
 * runtime/worker.h: one worker process's tasks and loop (private to runtime/).
 */
#ifndef SHMRUN_RT_WORKER_H
#define SHMRUN_RT_WORKER_H

#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "channel.h"
#include "ckpt/coordinator.h"
#include "control.h"
#include "plan.h"
#include "shmrun/segment.h"
#include "state.h"
#include "task.h"

struct shmrun_worker;

#define BATCH_RECORDS 256u /* records handed to one process_batch() call off a ring, at most */

/* A snapshot child in flight. */
struct snap_child {
	int pid;
	uint32_t task;
	uint64_t epoch;
};

struct shmrun_worker {
	const struct shmrun_plan *plan;
	const struct shmrun_segment *seg;
	uint32_t index; /* in the member set */
	struct shmrun_task *tasks;   /* this worker's tasks, in topological order */
	uint32_t ntasks;
	struct chan_out *outs;       /* every channel this worker produces */
	uint32_t nouts;
	struct chan_in *ins;         /* every channel this worker consumes */
	uint32_t nins;
	struct shmrun_control *ctl;            /* the run's shared control area */
	struct shmrun_worker_stats *stats;     /* this worker's */
	struct shmrun_worker_stats *all_stats; /* every worker's, for their bells */
	struct shmrun_task_slot *slots;        /* every task's checkpoint slot */
	bool checkpointing;                    /* checkpoint_dir is set */
	uint64_t committed_epoch;              /* newest epoch committed to sinks */
	struct shmrun_coordinator co;          /* worker 0 only */
	int64_t *stalls;                       /* snapshot stalls, ns (ring of 1024) */
	struct snap_child *children;           /* snapshot children not yet reaped */
	uint32_t nchildren, children_cap;
	uint64_t nstalls;
	const volatile sig_atomic_t *stop; /* set by a signal handler: stop now */
	uint32_t backlogged;         /* channels with frames queued behind a full ring */
	uint32_t fwd_holds;          /* tasks holding a forward input for alignment */
	bool failed;
	bool quiet; /* errors are recorded in stats->error, not logged (prepare) */
	uint32_t nflush;      /* tasks with op->flush */
	uint32_t flush_turns; /* loop turns, to look at the clock every 64 */
	uint64_t cb_where;    /* the callback running now, as stats->cb_where (callback.h) */
	uint64_t cb_seq;      /* callback entries so far, as stats->cb_seq */
	/* event time (watermark.c) */
	bool wm_clocked;      /* some task needs the clock each turn: it generates
				 watermarks, has on_timer(), or idle_timeout is set */
	int64_t turn_ns;      /* wm_clocked: CLOCK_MONOTONIC at the start of this turn */
	int64_t wm_idle_check_ns; /* next look for inputs that became idle */
	/* the batch a source is emitting with shmrun_emit_batch_origin() (ops.h)
	 * and where it was read; NULL outside that call */
	const struct shmrun_origin *origin;
	/* live counters (metrics.h): NULL without a metrics block */
	struct shmrun_metrics *mx;
	struct shmrun_metrics_worker *mxw; /* this worker's line */
	int64_t m_last_ns;  /* end of the last accounted turn, CLOCK_MONOTONIC */
	int64_t m_pub_ns;   /* last publication */
	uint64_t m_turns, m_sleep_ns;
	uint64_t m_snap0;   /* snapshots published before this start */
	bool m_dirty;       /* a turn made progress since the last publication */
	struct shmrun_record rbuf[BATCH_RECORDS]; /* records of a frame for process_batch() */
	uint64_t rhash[BATCH_RECORDS];            /* their key hashes */
};

/*
 * shmrun_worker_run() - the body of worker process @index (its counters, bell
 * and checkpoint slots are in @ctl, shared with every worker): attach its rings,
 * open its tasks, loop until every task reached end of input and every frame
 * is published, close. Return: the process exit status (0, or 1 after a
 * failure described in stats->error and the log).
 */
int shmrun_worker_run(const struct shmrun_plan *plan, const struct shmrun_segment *seg,
		      uint32_t index, struct shmrun_control *ctl,
		      const volatile sig_atomic_t *stop);

/*
 * note_fail_errno() - keep the first errno (@err, negative; 0 is ignored) an
 * operator or a snapshot failed with in w->stats->fail_errno, for the
 * launcher to judge whether a restart can cure it.
 */
void note_fail_errno(struct shmrun_worker *w, int err);

/*
 * shmrun_task_prepare_stage() - run a stage's prepare() callback in the
 * launcher. Return: 0, or a negative errno with the reason in @msg (whole, or
 * without its middle if longer than @msglen: its end says what to do) and in
 * *@line the conf line to name: the key's the operator blamed
 * (shmrun_task_error_at()), else shmrun_prepare_line().
 */
int shmrun_task_prepare_stage(const struct shmrun_plan *plan, uint32_t stage, char *msg,
			      size_t msglen, int *line);

/*
 * shmrun_prepare_line() - the conf line what prepare() says about @st is
 * reported at: prepare() checks the stage's files, so the line of its first
 * path key given in the file (`path =`, `table =`), else the section header.
 */
int shmrun_prepare_line(const struct shmrun_stage *st);

/*
 * task_parked_slow() - whether @t, or a forward successor, has output queued
 * behind a full ring, or a forward successor holds the input from @t (or
 * from the forward chain @t feeds it through) back for barrier alignment:
 * then @t must not produce or process now (it parks).
 */
static inline bool task_parked_slow(const struct shmrun_task *t)
{
	for (uint32_t o = 0; o < t->nouts; o++) {
		const struct out_edge *e = &t->outs[o];

		if (e->kind == SHMRUN_EDGE_FORWARD) {
			if (e->forward->fwd_slot_held[e->fwd_slot] || task_parked_slow(e->forward))
				return true;
			continue;
		}
		for (uint32_t j = 0; j < e->nchans; j++)
			if (chan_backlogged(e->chans[j]))
				return true;
	}
	return false;
}

/* task_parked() - task_parked_slow(), after the test that settles most calls:
 * a worker with no backlog and no held forward input parks nothing. */
static inline bool task_parked(const struct shmrun_task *t)
{
	return (t->w->backlogged || t->w->fwd_holds) && task_parked_slow(t);
}

#endif /* SHMRUN_RT_WORKER_H */
