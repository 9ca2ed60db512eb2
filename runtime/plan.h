/*
 * runtime/plan.h: a job placed on its workers (private to runtime/).
 *
 * Tasks are numbered densely, stage by stage in file order, instance by
 * instance. Every non-forward edge from stage A (width a) to stage B (width b)
 * has a*b channels, channel (i, j) carrying records from instance i of A to
 * instance j of B; each channel is one SPSC ring of the segment, ring index =
 * channel index. Forward edges have no channel: they are direct calls.
 */
#ifndef SHMRUN_RT_PLAN_H
#define SHMRUN_RT_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "internal.h" /* what shmrun_rt shares beyond the public headers */
#include "shmrun/job.h"
#include "shmrun/runtime.h"
#include "shmrun/segment.h"

struct shmrun_plan_task {
	uint32_t stage;              /* index into job->stages */
	uint32_t instance;           /* 0..width-1 */
	uint32_t worker;             /* index into the member set */
	uint32_t vnode_lo, vnode_hi; /* vnode_ranges of this instance */
};

struct shmrun_plan_channel {
	uint32_t edge;     /* index into job->edges */
	uint32_t src_task; /* producer task */
	uint32_t dst_task; /* consumer task */
	bool local;        /* both tasks on the same worker */
};

struct shmrun_plan {
	const struct shmrun_job *job;
	/* The member set: hosts x workers_per_host global workers, worker
	 * g = h * workers_per_host + i runs on host h as its local worker i
	 * (docs/multihost.md); every host builds the same plan. One host:
	 * workers = workers_per_host = job->workers. */
	uint32_t workers;          /* M = hosts * workers_per_host */
	uint32_t hosts;            /* job->hosts */
	uint32_t workers_per_host; /* job->workers */
	uint32_t ntasks;
	struct shmrun_plan_task *tasks;
	uint32_t *stage_task0;  /* per stage: task id of instance 0 */
	uint32_t *edge_chan0;   /* per edge: channel index of (0, 0), or UINT32_MAX if forward */
	uint32_t nchannels;
	struct shmrun_plan_channel *channels;
	struct shmrun_segment_ring_spec *rings; /* one per channel */
	uint64_t segment_bytes;
};

/* The channel from instance @i of edge @e's upstream stage to instance @j downstream. */
static inline uint32_t shmrun_plan_channel_of(const struct shmrun_plan *p, uint32_t e, uint32_t i,
					      uint32_t j)
{
	const struct shmrun_job *job = p->job;

	return p->edge_chan0[e] + i * job->stages[job->edges[e].to].width + j;
}

/* The host of global worker @w: w / workers_per_host. */
static inline uint32_t shmrun_plan_host_of(const struct shmrun_plan *p, uint32_t w)
{
	return w / p->workers_per_host;
}

/* The CPU global worker @w is pinned to on its host: the local index's entry
 * of job->cpus (every host reads the same cpus/workers keys). */
static inline int32_t shmrun_plan_cpu_of(const struct shmrun_plan *p, uint32_t w)
{
	return p->job->cpus[w % p->workers_per_host];
}

/* Whether channel @c's producer and consumer run on different hosts. */
static inline bool shmrun_plan_channel_crosses_hosts(const struct shmrun_plan *p, uint32_t c)
{
	const struct shmrun_plan_channel *ch = &p->channels[c];

	return shmrun_plan_host_of(p, p->tasks[ch->src_task].worker) !=
	       shmrun_plan_host_of(p, p->tasks[ch->dst_task].worker);
}

/*
 * shmrun_plan_ring_node() - the NUMA node a channel's ring memory belongs on:
 * its consumer worker's CPU's node, as @node_of_cpu reports it (numa_node_of_cpu
 * in production, a table in tests). Return: the node, or -1 if unknown.
 */
int shmrun_plan_ring_node(const struct shmrun_plan *p, uint32_t channel, int (*node_of_cpu)(int));

#endif /* SHMRUN_RT_PLAN_H */
