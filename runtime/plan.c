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
 * `shmrun plan` prints the plan as text (shmrun_plan_print()) or as JSON
 * (shmrun_plan_print_json(), --json); both read only this struct and the job,
 * and what either derives (edge kind, combined edges, rings crossing workers)
 * comes from the one helper each, so the two cannot drift. The JSON field
 * names are a documented interface (docs/shmrun.1.md, `plan --json`).
 *
 * Rejected: one ring per pair of workers shared by all channels between them.
 * Fewer rings, but a held channel would block every other channel in its ring.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plan.h"
#include "task.h"
#include "shmrun/placement.h"

/* Whether edge @ed carries partials of its receiver's (@to) combiner. */
static bool edge_combined(const struct shmrun_edge *ed, const struct shmrun_stage *to)
{
	return ed->by_key && shmrun_stage_combines(to);
}

/* ", combined (…)" when edge @ed carries partials of its receiver's combiner, else "". */
static const char *combined_note(const struct shmrun_edge *ed, const struct shmrun_stage *to)
{
	return edge_combined(ed, to) ? ", combined (partials of the receiver's combiner)" : "";
}

/* The edge kind: @json, the JSON identifier ("shuffle"); else the text ("shuffle by key"). */
static const char *edge_kind_name(enum shmrun_edge_kind k, bool json)
{
	switch (k) {
	case SHMRUN_EDGE_FORWARD:
		return "forward";
	case SHMRUN_EDGE_SHUFFLE:
		return json ? "shuffle" : "shuffle by key";
	case SHMRUN_EDGE_REBALANCE:
		return "rebalance";
	case SHMRUN_EDGE_BROADCAST:
		return "broadcast";
	}
	return "?";
}

/* How many of @p's rings connect two different workers. */
static uint32_t rings_crossing(const struct shmrun_plan *p)
{
	uint32_t n = 0;

	for (uint32_t c = 0; c < p->nchannels; c++)
		n += !p->channels[c].local;
	return n;
}

/* How many of @p's rings connect workers on two different hosts. */
static uint32_t rings_crossing_hosts(const struct shmrun_plan *p)
{
	uint32_t n = 0;

	for (uint32_t c = 0; c < p->nchannels; c++)
		n += shmrun_plan_channel_crosses_hosts(p, c);
	return n;
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
	p->hosts = job->hosts ? job->hosts : 1;
	p->workers_per_host = job->workers;
	p->workers = p->hosts * job->workers; /* conf_job.c: at most SHMRUN_CONTROL_MAX_WORKERS */
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
		shmrun_placement_assign(widths, job->nstages, p->workers, owner);
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
	return node_of_cpu(shmrun_plan_cpu_of(p, w));
}

/*
 * The text of `shmrun plan`. With hosts > 1 the header says how the workers
 * are spread, each task row has a host column, and every channel whose ends
 * are on two hosts says "crosses hosts" (the gateways carry it); with one
 * host the text is what it always was.
 */
void shmrun_plan_print(const struct shmrun_plan *p, FILE *out)
{
	const struct shmrun_job *job = p->job;
	uint32_t rings_cross = rings_crossing(p), hosts_cross = rings_crossing_hosts(p);
	bool multi = p->hosts > 1;

	fprintf(out, "job %s: %u worker%s", job->name, p->workers, p->workers == 1 ? "" : "s");
	if (multi)
		fprintf(out, " on %u hosts (%u per host)", p->hosts, p->workers_per_host);
	fprintf(out, ", %u stage%s, %u task%s, %u vnode%s, %u channel%s\n", job->nstages,
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
	if (multi)
		fprintf(out, "\n%-6s %-16s %-8s %-6s %-4s %-4s %s\n", "task", "stage", "instance",
			"worker", "host", "cpu", "vnodes");
	else
		fprintf(out, "\n%-6s %-16s %-8s %-6s %-4s %s\n", "task", "stage", "instance",
			"worker", "cpu", "vnodes");
	for (uint32_t t = 0; t < p->ntasks; t++) {
		const struct shmrun_plan_task *pt = &p->tasks[t];

		fprintf(out, "%-6u %-16s %-8u %-6u ", t, job->stages[pt->stage].name, pt->instance,
			pt->worker);
		if (multi)
			fprintf(out, "%-4u ", shmrun_plan_host_of(p, pt->worker));
		fprintf(out, "%-4d [%u, %u)\n", shmrun_plan_cpu_of(p, pt->worker), pt->vnode_lo,
			pt->vnode_hi);
	}
	fprintf(out, "\nedges\n");
	for (uint32_t e = 0; e < job->nedges; e++) {
		const struct shmrun_edge *ed = &job->edges[e];
		const struct shmrun_stage *a = &job->stages[ed->from], *b = &job->stages[ed->to];
		uint32_t across = 0;

		if (ed->kind == SHMRUN_EDGE_FORWARD) {
			fprintf(out, "  %s -> %s: forward, local (in-process call) x%u%s\n", a->name,
				b->name, a->width, combined_note(ed, b));
			continue;
		}
		for (uint32_t c = 0; c < a->width * b->width; c++)
			across += shmrun_plan_channel_crosses_hosts(p, p->edge_chan0[e] + c);
		fprintf(out, "  %s -> %s: %s, %u channel%s", a->name, b->name,
			edge_kind_name(ed->kind, false), a->width * b->width,
			a->width * b->width == 1 ? "" : "s");
		if (multi)
			fprintf(out, " (%u cross%s hosts)", across, across == 1 ? "es" : "");
		fprintf(out, "%s\n", combined_note(ed, b));
		for (uint32_t i = 0; i < a->width; i++)
			for (uint32_t j = 0; j < b->width; j++) {
				uint32_t c = shmrun_plan_channel_of(p, e, i, j);
				const struct shmrun_plan_channel *ch = &p->channels[c];
				uint32_t wa = p->tasks[ch->src_task].worker;
				uint32_t wb = p->tasks[ch->dst_task].worker;

				const char *how = ch->local ? "local" : "crosses workers";

				if (shmrun_plan_channel_crosses_hosts(p, c))
					how = "crosses hosts";
				fprintf(out, "    %s[%u] -> %s[%u]: ring %u, %s (worker %u -> %u",
					a->name, i, b->name, j, c, how, wa, wb);
				if (multi)
					fprintf(out, ", host %u -> %u", shmrun_plan_host_of(p, wa),
						shmrun_plan_host_of(p, wb));
				fprintf(out, ")\n");
			}
	}
	fprintf(out, "\nsegment: %u ring%s of %" PRIu64 " bytes (%u cross%s workers", p->nchannels,
		p->nchannels == 1 ? "" : "s", job->ring_bytes, rings_cross,
		rings_cross == 1 ? "es" : "");
	if (multi)
		fprintf(out, ", %u cross%s hosts", hosts_cross, hosts_cross == 1 ? "es" : "");
	fprintf(out, "), %" PRIu64 " bytes in all%s\n", p->segment_bytes,
		multi ? " on each host" : "");
}

/*
 * Add @key = @val to @obj, which takes @val over (jansson's _new calls take
 * the reference even when they fail). Return: false when out of memory.
 * Containers are attached to their parent first and filled after, so that
 * freeing the root frees everything on every path.
 */
static bool put(json_t *obj, const char *key, json_t *val)
{
	return val && json_object_set_new(obj, key, val) == 0;
}

/* A new array or object attached to @obj as @key, or NULL. */
static json_t *put_new(json_t *obj, const char *key, json_t *val)
{
	return put(obj, key, val) ? val : NULL;
}

/* A new object appended to @arr, or NULL. */
static json_t *append_object(json_t *arr)
{
	json_t *o = json_object();

	return o && json_array_append_new(arr, o) == 0 ? o : NULL;
}

static bool task_json(const struct shmrun_plan *p, uint32_t t, json_t *o)
{
	const struct shmrun_plan_task *pt = &p->tasks[t];

	return put(o, "task", json_integer(t)) &&
	       put(o, "stage", json_string(p->job->stages[pt->stage].name)) &&
	       put(o, "instance", json_integer(pt->instance)) &&
	       put(o, "worker", json_integer(pt->worker)) &&
	       put(o, "cpu", json_integer(shmrun_plan_cpu_of(p, pt->worker))) &&
	       put(o, "host", json_integer(shmrun_plan_host_of(p, pt->worker))) &&
	       put(o, "vnode_lo", json_integer(pt->vnode_lo)) &&
	       put(o, "vnode_hi", json_integer(pt->vnode_hi));
}

static bool edge_json(const struct shmrun_plan *p, uint32_t e, json_t *o)
{
	const struct shmrun_job *job = p->job;
	const struct shmrun_edge *ed = &job->edges[e];
	const struct shmrun_stage *a = &job->stages[ed->from], *b = &job->stages[ed->to];
	json_t *chans = NULL;

	if (!put(o, "from", json_string(a->name)) || !put(o, "to", json_string(b->name)) ||
	    !put(o, "kind", json_string(edge_kind_name(ed->kind, true))) ||
	    !put(o, "combined", json_boolean(edge_combined(ed, b))) ||
	    !(chans = put_new(o, "channels", json_array())))
		return false;
	if (ed->kind == SHMRUN_EDGE_FORWARD)
		return true; /* a direct call: no channel */
	for (uint32_t i = 0; i < a->width; i++)
		for (uint32_t j = 0; j < b->width; j++) {
			uint32_t c = shmrun_plan_channel_of(p, e, i, j);
			const struct shmrun_plan_channel *ch = &p->channels[c];
			json_t *co = append_object(chans);

			if (!co || !put(co, "ring", json_integer(c)) ||
			    !put(co, "from_instance", json_integer(i)) ||
			    !put(co, "to_instance", json_integer(j)) ||
			    !put(co, "local", json_boolean(ch->local)) ||
			    !put(co, "from_worker", json_integer(p->tasks[ch->src_task].worker)) ||
			    !put(co, "to_worker", json_integer(p->tasks[ch->dst_task].worker)) ||
			    !put(co, "from_host",
				 json_integer(
				     shmrun_plan_host_of(p, p->tasks[ch->src_task].worker))) ||
			    !put(co, "to_host",
				 json_integer(
				     shmrun_plan_host_of(p, p->tasks[ch->dst_task].worker))) ||
			    !put(co, "crosses_hosts",
				 json_boolean(shmrun_plan_channel_crosses_hosts(p, c))))
				return false;
		}
	return true;
}

int shmrun_plan_print_json(const struct shmrun_plan *p, FILE *out)
{
	const struct shmrun_job *job = p->job;
	json_t *root = json_object(), *stages = NULL, *tasks = NULL, *edges = NULL, *seg = NULL;
	int rc = -ENOMEM;

	if (!root || !put(root, "job", json_string(job->name)) ||
	    !put(root, "workers", json_integer(p->workers)) ||
	    !put(root, "hosts", json_integer(p->hosts)) ||
	    !put(root, "workers_per_host", json_integer(p->workers_per_host)) ||
	    !put(root, "vnodes", json_integer(job->vnodes)) ||
	    !(stages = put_new(root, "stages", json_array())) ||
	    !(tasks = put_new(root, "tasks", json_array())) ||
	    !(edges = put_new(root, "edges", json_array())) ||
	    !(seg = put_new(root, "segment", json_object())))
		goto out;
	for (uint32_t s = 0; s < job->nstages; s++) {
		const struct shmrun_stage *st = &job->stages[s];
		const struct shmrun_plugin_info *pi = shmrun_operator_plugin(st->op);
		json_t *o = append_object(stages), *plug;

		if (!o || !put(o, "name", json_string(st->name)) ||
		    !put(o, "op", json_string(st->op->name)) ||
		    !put(o, "width", json_integer(st->width)))
			goto out;
		if (!pi) {
			if (!put(o, "plugin", json_null()))
				goto out;
			continue;
		}
		if (!(plug = put_new(o, "plugin", json_object())) ||
		    !put(plug, "name", json_string(pi->name)) ||
		    !put(plug, "version", json_string(pi->version)) ||
		    !put(plug, "path", json_string(pi->path)))
			goto out;
	}
	for (uint32_t t = 0; t < p->ntasks; t++) {
		json_t *o = append_object(tasks);

		if (!o || !task_json(p, t, o))
			goto out;
	}
	for (uint32_t e = 0; e < job->nedges; e++) {
		json_t *o = append_object(edges);

		if (!o || !edge_json(p, e, o))
			goto out;
	}
	if (!put(seg, "rings", json_integer(p->nchannels)) ||
	    !put(seg, "ring_bytes", json_integer((json_int_t)job->ring_bytes)) ||
	    !put(seg, "rings_crossing_workers", json_integer(rings_crossing(p))) ||
	    !put(seg, "rings_crossing_hosts", json_integer(rings_crossing_hosts(p))) ||
	    !put(seg, "bytes", json_integer((json_int_t)p->segment_bytes)))
		goto out;
	rc = json_dumpf(root, out, JSON_INDENT(2) | JSON_PRESERVE_ORDER) || fputc('\n', out) == EOF
		     ? -EIO
		     : 0;
out:
	json_decref(root);
	return rc;
}
