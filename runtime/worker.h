/*
 * runtime/worker.h: one worker process's tasks and loop (private to runtime/).
 */
#ifndef SHMRUN_RT_WORKER_H
#define SHMRUN_RT_WORKER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "plan.h"
#include "shmrun/segment.h"
#include "state.h"

/*
 * Per-worker counters in a MAP_SHARED anonymous mapping the launcher creates
 * before forking. Written by one worker (relaxed; read by the launcher only
 * after the worker has exited, which waitpid orders).
 */
struct shmrun_worker_stats {
	struct shmrun_bell bell;      /* this worker sleeps here; its peers ring it */
	_Atomic uint64_t records_in;  /* records read by sources */
	_Atomic uint64_t records_out; /* records written by sinks */
	_Atomic uint64_t keys;        /* distinct keys in key-bound state at end of input */
	_Atomic uint64_t state_bytes; /* bytes of key-bound state at end of input */
	_Atomic uint64_t key_bytes;   /* of which the keys themselves */
	char error[464];              /* why the worker failed, if it did */
} __attribute__((aligned(SHMRUN_CACHELINE)));

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
	const void *cur_key;  /* key of the record being processed, if its hash is known */
	uint32_t cur_key_len;
	uint64_t cur_hash;    /* XXH3-64 of cur_key */
	uint64_t records_in, records_out;
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
	struct shmrun_worker_stats *stats;     /* this worker's */
	struct shmrun_worker_stats *all_stats; /* every worker's, for their bells */
	const volatile int *stop;    /* set by a signal handler: stop now */
	uint32_t backlogged;         /* channels with frames queued behind a full ring */
	bool failed;
};

/*
 * shmrun_worker_run() - the body of worker process @index (its counters and
 * bell are all_stats[index]; the others' bells are rung): attach its rings,
 * open its tasks, loop until every task reached end of input and every frame
 * is published, close. Return: the process exit status (0, or 1 after a
 * failure described in stats->error and the log).
 */
int shmrun_worker_run(const struct shmrun_plan *plan, const struct shmrun_segment *seg,
		      uint32_t index, struct shmrun_worker_stats *all_stats,
		      const volatile int *stop);

/*
 * shmrun_task_prepare_stage() - run a stage's prepare() callback in the
 * launcher. Return: 0, or a negative errno with the reason in @msg.
 */
int shmrun_task_prepare_stage(const struct shmrun_plan *plan, uint32_t stage, char *msg,
			      size_t msglen);

#endif /* SHMRUN_RT_WORKER_H */
