/*
 * runtime/worker.h: one worker process's tasks and loop (private to runtime/).
 */
#ifndef SHMRUN_RT_WORKER_H
#define SHMRUN_RT_WORKER_H

#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "control.h"
#include "ckpt/coordinator.h"
#include "plan.h"
#include "shmrun/segment.h"
#include "state.h"

struct shmrun_worker;

/* A producer's view of one channel, with its overflow for a full ring. */
struct chan_out {
	struct shmrun_ring ring;
	struct shmrun_worker *w;
	uint32_t src_task, dst_task;
	unsigned char *ovf; /* encoded frames waiting for room: [u32 len][u16 kind][u16 0][payload] */
	size_t ovf_off, ovf_len, ovf_cap;
};

struct chan_in {
	struct shmrun_ring ring;
	bool ended;
	uint64_t held; /* barrier epoch this channel is held back for (aligning), 0 if none */
};

struct out_edge {
	enum shmrun_edge_kind kind;
	struct shmrun_task *forward; /* FORWARD: the downstream task, same worker */
	struct chan_out **chans;     /* others: one per downstream instance */
	uint32_t nchans;
	uint32_t rr;                 /* REBALANCE cursor */
	uint32_t *instance_of_vnode; /* SHUFFLE: vnode -> downstream instance */
	uint32_t max_payload;        /* largest frame payload of these rings */
};

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
	/* checkpoints */
	uint64_t barrier_epoch;  /* newest epoch this task snapshotted and forwarded */
	uint64_t align_epoch;    /* epoch being aligned, 0 if none */
	uint32_t aligned;        /* inputs that delivered align_epoch's barrier */
	uint32_t fwd_inputs;     /* forward inputs (direct calls from upstream tasks) */
	bool fwd_held;           /* a forward input delivered align_epoch: upstream parks */
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
	uint64_t records_in, records_out;
	uint64_t rate;           /* the stage's `rate` key, records/s, 0 = unlimited */
	int64_t flush_every_ns;  /* op->flush: the stage's flush_interval */
	int64_t flush_due_ns;    /* op->flush: next flush by the clock */
	struct shmrun_task_slot *rate_slot; /* sources with `rate`: the stage's shared tokens */
};

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
 * without its middle if longer than @msglen: its end says what to do).
 */
int shmrun_task_prepare_stage(const struct shmrun_plan *plan, uint32_t stage, char *msg,
			      size_t msglen);

#endif /* SHMRUN_RT_WORKER_H */
