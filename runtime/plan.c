/*
 * runtime/plan.c: job + placement -> tasks, channels and the ring table.
 *
 * What it is for. Every process of a run (the launcher and each worker) needs
 * the same answer to "which task runs where, and which ring connects whom".
 * The plan computes it from the job and the member count alone (placement is
 * pure arithmetic), so the launcher only has to fork: a worker reads its own
 * tasks and rings out of the same plan it inherited.
 *
 * Invariants.
 *   - Task ids are dense, stage by stage in file order, instances in order.
 *   - One channel, and one ring, per (upstream instance, downstream instance)
 *     pair of every non-forward edge: holding back one channel during barrier
 *     alignment is then just not reading one ring (docs/design.md §4).
 *   - A ring's memory is bound to its consumer's NUMA node.
 *
 * Rejected: one ring per pair of workers shared by all channels between them.
 * Fewer rings, but a held channel would block every other channel in its ring.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plan.h"
#include "task.h"
#include "shmrun/placement.h"

/* ", combined (…)" when edge @ed carries partials of its receiver's combiner, else "". */
static const char *combined_note(const struct shmrun_edge *ed, const struct shmrun_stage *to)
{
	return ed->by_key && shmrun_stage_combines(to)
		       ? ", combined (partials of the receiver's combiner)"
		       : "";
}

static const char *edge_kind_name(enum shmrun_edge_kind k)
{
	switch (k) {
	case SHMRUN_EDGE_FORWARD:
		return "forward";
	case SHMRUN_EDGE_SHUFFLE:
		return "shuffle by key";
	case SHMRUN_EDGE_REBALANCE:
		return "rebalance";
	case SHMRUN_EDGE_BROADCAST:
		return "broadcast";
	}
	return "?";
}

int shmrun_plan_build(const struct shmrun_job *job, struct shmrun_plan **out)
{
	struct shmrun_plan *p = calloc(1, sizeof(*p));
	uint32_t *widths = NULL, c = 0;
	uint64_t nchan = 0;
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);

	if (!p)
		return -ENOMEM;
	p->job = job;
	p->workers = job->workers;
	widths = calloc(job->nstages, sizeof(*widths));
	p->stage_task0 = calloc(job->nstages, sizeof(*p->stage_task0));
	p->edge_chan0 = calloc(job->nedges ? job->nedges : 1, sizeof(*p->edge_chan0));
	if (!widths || !p->stage_task0 || !p->edge_chan0)
		goto err_nomem;
	for (uint32_t s = 0; s < job->nstages; s++) {
		widths[s] = job->stages[s].width;
		p->stage_task0[s] = p->ntasks;
		p->ntasks += widths[s];
	}
	p->tasks = calloc(p->ntasks, sizeof(*p->tasks));
	if (!p->tasks)
		goto err_nomem;
	{
		uint32_t *owner = calloc(p->ntasks, sizeof(*owner));

		if (!owner)
			goto err_nomem;
		shmrun_placement_assign(widths, job->nstages, job->workers, owner);
		for (uint32_t s = 0; s < job->nstages; s++)
			for (uint32_t i = 0; i < widths[s]; i++) {
				struct shmrun_plan_task *t = &p->tasks[p->stage_task0[s] + i];

				t->stage = s;
				t->instance = i;
				t->worker = owner[p->stage_task0[s] + i];
				shmrun_placement_vnode_range(i, widths[s], job->vnodes, &t->vnode_lo,
							     &t->vnode_hi);
			}
		free(owner);
	}
	for (uint32_t e = 0; e < job->nedges; e++)
		if (job->edges[e].kind != SHMRUN_EDGE_FORWARD)
			nchan += (uint64_t)widths[job->edges[e].from] * widths[job->edges[e].to];
	if (nchan > SHMRUN_SEGMENT_MAX_RINGS) {
		shmrun_log(SHMRUN_LOG_ERROR,
			   "%s: the graph needs %" PRIu64 " channels, more than the %u rings a "
			   "segment holds; lower the widths of shuffled stages",
			   job->conf_path, nchan, SHMRUN_SEGMENT_MAX_RINGS);
		goto err_fbig;
	}
	p->nchannels = (uint32_t)nchan;
	p->channels = calloc(nchan ? nchan : 1, sizeof(*p->channels));
	p->rings = calloc(nchan ? nchan : 1, sizeof(*p->rings));
	if (!p->channels || !p->rings)
		goto err_nomem;
	for (uint32_t e = 0; e < job->nedges; e++) {
		const struct shmrun_edge *ed = &job->edges[e];

		if (ed->kind == SHMRUN_EDGE_FORWARD) {
			p->edge_chan0[e] = UINT32_MAX;
			continue;
		}
		p->edge_chan0[e] = c;
		for (uint32_t i = 0; i < widths[ed->from]; i++)
			for (uint32_t j = 0; j < widths[ed->to]; j++, c++) {
				struct shmrun_plan_channel *ch = &p->channels[c];

				ch->edge = e;
				ch->src_task = p->stage_task0[ed->from] + i;
				ch->dst_task = p->stage_task0[ed->to] + j;
				ch->local = p->tasks[ch->src_task].worker ==
					    p->tasks[ch->dst_task].worker;
				p->rings[c].capacity = job->ring_bytes;
				p->rings[c].producer = p->tasks[ch->src_task].worker;
				p->rings[c].consumer = p->tasks[ch->dst_task].worker;
			}
	}
	p->segment_bytes = shmrun_segment_memsize(p->rings, p->nchannels);
	if (!p->segment_bytes || (pages > 0 && page > 0 &&
				  p->segment_bytes > (uint64_t)pages * (uint64_t)page / 2)) {
		shmrun_log(SHMRUN_LOG_ERROR,
			   "%s: %u ring%s of ring_bytes=%" PRIu64 " need%s %" PRIu64
			   " MiB of shared memory, more than half of this host's; lower ring_bytes "
			   "or the widths of shuffled stages",
			   job->conf_path, p->nchannels, p->nchannels == 1 ? "" : "s",
			   job->ring_bytes, p->nchannels == 1 ? "s" : "", p->segment_bytes >> 20);
		goto err_fbig;
	}
	free(widths);
	*out = p;
	return 0;

err_fbig:
	free(widths);
	shmrun_plan_free(p);
	return -EFBIG;
err_nomem:
	free(widths);
	shmrun_plan_free(p);
	return -ENOMEM;
}

void shmrun_plan_free(struct shmrun_plan *p)
{
	if (!p)
		return;
	free(p->tasks);
	free(p->stage_task0);
	free(p->edge_chan0);
	free(p->channels);
	free(p->rings);
	free(p);
}

int shmrun_plan_ring_node(const struct shmrun_plan *p, uint32_t channel, int (*node_of_cpu)(int))
{
	uint32_t w;

	if (channel >= p->nchannels)
		return -1;
	w = p->tasks[p->channels[channel].dst_task].worker;
	return node_of_cpu(p->job->cpus[w]);
}

void shmrun_plan_print(const struct shmrun_plan *p, FILE *out)
{
	const struct shmrun_job *job = p->job;
	uint32_t rings_cross = 0;

	fprintf(out, "job %s: %u worker%s, %u stage%s, %u task%s, %u vnode%s, %u channel%s\n",
		job->name, job->workers, job->workers == 1 ? "" : "s", job->nstages,
		job->nstages == 1 ? "" : "s", p->ntasks, p->ntasks == 1 ? "" : "s", job->vnodes,
		job->vnodes == 1 ? "" : "s", p->nchannels, p->nchannels == 1 ? "" : "s");
	for (uint32_t s = 0, first = 1; s < job->nstages; s++) {
		const struct shmrun_plugin_info *pi = shmrun_operator_plugin(job->stages[s].op);

		if (!pi)
			continue;
		if (first)
			fprintf(out, "\noperators from plugins\n");
		first = 0;
		fprintf(out, "  stage %s: %s, from plugin %s %s (%s)\n", job->stages[s].name,
			job->stages[s].op->name, pi->name, pi->version, pi->path);
	}
	fprintf(out, "\n%-6s %-16s %-8s %-6s %-4s %s\n", "task", "stage", "instance", "worker",
		"cpu", "vnodes");
	for (uint32_t t = 0; t < p->ntasks; t++) {
		const struct shmrun_plan_task *pt = &p->tasks[t];

		fprintf(out, "%-6u %-16s %-8u %-6u %-4d [%u, %u)\n", t, job->stages[pt->stage].name,
			pt->instance, pt->worker, job->cpus[pt->worker], pt->vnode_lo, pt->vnode_hi);
	}
	fprintf(out, "\nedges\n");
	for (uint32_t e = 0; e < job->nedges; e++) {
		const struct shmrun_edge *ed = &job->edges[e];
		const struct shmrun_stage *a = &job->stages[ed->from], *b = &job->stages[ed->to];

		if (ed->kind == SHMRUN_EDGE_FORWARD) {
			fprintf(out, "  %s -> %s: forward, local (in-process call) x%u%s\n", a->name,
				b->name, a->width, combined_note(ed, b));
			continue;
		}
		fprintf(out, "  %s -> %s: %s, %u channel%s%s\n", a->name, b->name,
			edge_kind_name(ed->kind), a->width * b->width,
			a->width * b->width == 1 ? "" : "s", combined_note(ed, b));
		for (uint32_t i = 0; i < a->width; i++)
			for (uint32_t j = 0; j < b->width; j++) {
				uint32_t c = shmrun_plan_channel_of(p, e, i, j);
				const struct shmrun_plan_channel *ch = &p->channels[c];

				fprintf(out, "    %s[%u] -> %s[%u]: ring %u, %s (worker %u -> %u)\n",
					a->name, i, b->name, j, c,
					ch->local ? "local" : "crosses workers",
					p->tasks[ch->src_task].worker, p->tasks[ch->dst_task].worker);
				rings_cross += !ch->local;
			}
	}
	fprintf(out,
		"\nsegment: %u ring%s of %" PRIu64 " bytes (%u cross%s workers), %" PRIu64
		" bytes in all\n",
		p->nchannels, p->nchannels == 1 ? "" : "s", job->ring_bytes, rings_cross,
		rings_cross == 1 ? "es" : "", p->segment_bytes);
}
