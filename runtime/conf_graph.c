/*
 * runtime/conf_graph.c: pass 3 of the topology loader, the stages' `input =`
 * keys into the job's edges, and the checks only a whole graph allows.
 *
 * What it does. Each `input` entry ("a", "a by key", "a rebalance",
 * "a broadcast", "a forward") becomes an edge (struct shmrun_edge) whose kind
 * is decided from the widths when none is written. Then: every cycle is
 * reported at the `input` line that closes it (depth-first search), sources
 * take no input, every other stage has one, nothing reads from a sink, every
 * stage is reachable from a source and feeds a sink. With no error at all,
 * job->topo gets a topological order (Kahn's algorithm, lowest index first).
 *
 * Invariants.
 *   - An edge between two width-1 stages is always FORWARD, whatever was
 *     written: every routing sends each record to the one instance, in order.
 *   - Sources, sinks and reachability are checked only when every stage has a
 *     known operator and every `input` entry made an edge (ld->ops_ok,
 *     !ld->edges_missing): on a partial graph they would only echo the errors
 *     already reported.
 *   - job->topo is set only when the whole file had no error, so everything
 *     after the loader may rely on it.
 *
 * Rejected designs.
 *   - Stopping at the first cycle: each cycle is reported, so a file with two
 *     is fixed in one run.
 *   - Checking sources, sinks and reachability on a partial graph (an unknown
 *     operator, a wrong `input` entry): they would only repeat, in other
 *     words, the errors already reported.
 *   - Keeping the written kind of an edge between two width-1 stages: a ring
 *     where a direct call delivers the same records in the same order.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf_internal.h"
#include "util.h"

/* ------------------------------------------------------------------------ */
/* Pass 3: the graph */

static int stage_index(const struct shmrun_job *job, const char *name, size_t len)
{
	for (uint32_t i = 0; i < job->nstages; i++)
		if (strlen(job->stages[i].name) == len &&
		    strncmp(job->stages[i].name, name, len) == 0)
			return (int)i;
	return -1;
}

static int add_edge(struct loader *ld, uint32_t *cap, uint32_t from, uint32_t to,
		    enum shmrun_edge_kind kind, bool by_key, int line)
{
	struct shmrun_job *job = ld->job;

	if (shmrun_grow_u32(&job->edges, cap, (size_t)job->nedges + 1, sizeof(*job->edges), 8))
		return -ENOMEM;
	job->edges[job->nedges++] =
	    (struct shmrun_edge){.from = from, .to = to, .kind = kind, .by_key = by_key,
				 .line = line};
	return 0;
}

static bool word_is(const char *tok, size_t len, const char *word)
{
	return len == strlen(word) && strncmp(tok, word, len) == 0;
}

/* Stage @name (@len bytes) in the input of stage @to, at @line, names no stage:
 * reported with the nearest stage name. Return: 0 or -ENOMEM. */
static int report_unknown_stage(struct loader *ld, uint32_t to, const char *name, size_t len,
				int line)
{
	struct shmrun_job *job = ld->job;
	const char **names = malloc((job->nstages ? job->nstages : 1) * sizeof(*names));
	const char *near;
	char list[512];
	char *want = strndup(name, len);

	if (!names || !want) {
		free(names);
		free(want);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < job->nstages; i++)
		names[i] = job->stages[i].name;
	near = nearest(want, names, job->nstages);
	if (near)
		errorf(ld, line, "unknown stage '%s' in input of stage '%s'; did you mean '%s'?",
		       want, job->stages[to].name, near);
	else
		errorf(ld, line, "unknown stage '%s' in input of stage '%s'; stages: %s", want,
		       job->stages[to].name, join_words(list, sizeof(list), names, job->nstages));
	free(names);
	free(want);
	ld->edges_missing = true;
	return 0;
}

/* One element of `input =`: "a", "a by key", "a rebalance", "a broadcast", "a forward". */
static int parse_input_item(struct loader *ld, uint32_t to, const char *item, size_t len, int line,
			    uint32_t *cap)
{
	struct shmrun_job *job = ld->job;
	const char *tok[4];
	size_t tlen[4];
	uint32_t ntok = 0;
	enum shmrun_edge_kind kind = SHMRUN_EDGE_FORWARD;
	bool by_key = false;
	bool explicit_kind = true;
	int from;

	for (size_t i = 0; i < len;) {
		while (i < len && isspace((unsigned char)item[i]))
			i++;
		if (i == len)
			break;
		if (ntok == 4) {
			ntok++;
			break;
		}
		tok[ntok] = item + i;
		while (i < len && !isspace((unsigned char)item[i]))
			i++;
		tlen[ntok] = (size_t)(item + i - tok[ntok]);
		ntok++;
	}
	if (ntok == 1)
		explicit_kind = false;
	else if (ntok == 2 && word_is(tok[1], tlen[1], "rebalance"))
		kind = SHMRUN_EDGE_REBALANCE;
	else if (ntok == 2 && word_is(tok[1], tlen[1], "broadcast"))
		kind = SHMRUN_EDGE_BROADCAST;
	else if (ntok == 2 && word_is(tok[1], tlen[1], "forward"))
		kind = SHMRUN_EDGE_FORWARD;
	else if (ntok == 3 && word_is(tok[1], tlen[1], "by") && word_is(tok[2], tlen[2], "key"))
		kind = SHMRUN_EDGE_SHUFFLE, by_key = true;
	else
		ntok = 0;
	if (ntok == 0) {
		errorf(ld, line,
		       "input '%.*s' of stage '%s' is not valid; expected STAGE, 'STAGE by key', "
		       "'STAGE rebalance', 'STAGE broadcast' or 'STAGE forward', several "
		       "separated by commas",
		       (int)len, item, job->stages[to].name);
		ld->edges_missing = true;
		return 0;
	}

	from = stage_index(job, tok[0], tlen[0]);
	if (from < 0)
		return report_unknown_stage(ld, to, tok[0], tlen[0], line);
	for (uint32_t e = 0; e < job->nedges; e++) {
		if (job->edges[e].to == to && job->edges[e].from == (uint32_t)from) {
			errorf(ld, line, "stage '%s' is named twice in the input of stage '%s'",
			       job->stages[from].name, job->stages[to].name);
			ld->edges_missing = true;
			return 0;
		}
	}
	if (ld->width_ok[from] && ld->width_ok[to]) {
		bool equal = job->stages[from].width == job->stages[to].width;

		if (!explicit_kind)
			kind = equal ? SHMRUN_EDGE_FORWARD : SHMRUN_EDGE_REBALANCE;
		else if (kind == SHMRUN_EDGE_FORWARD && !equal)
			errorf(ld, line,
			       "input '%s forward' of stage '%s': a forward edge needs equal "
			       "widths, but '%s' has width %u and '%s' width %u; make the widths "
			       "equal or use 'by key', 'rebalance' or 'broadcast'",
			       job->stages[from].name, job->stages[to].name, job->stages[from].name,
			       job->stages[from].width, job->stages[to].name,
			       job->stages[to].width);
		/* Between two width-1 stages every routing sends each record to
		 * the one downstream instance in order: the same as a forward edge,
		 * which is a direct call instead of a ring. */
		if (job->stages[from].width == 1 && job->stages[to].width == 1)
			kind = SHMRUN_EDGE_FORWARD;
	}
	return add_edge(ld, cap, (uint32_t)from, to, kind, by_key, line);
}

/*
 * Depth-first search from @u for back edges: each one closes a cycle, which
 * is reported at the `input` line that closes it.
 */
static void find_cycles(struct loader *ld, uint32_t u, uint8_t *color, uint32_t *path,
			uint32_t depth, bool *on_cycle)
{
	struct shmrun_job *job = ld->job;

	color[u] = 1;
	path[depth] = u;
	for (uint32_t e = 0; e < job->nedges; e++) {
		uint32_t v = job->edges[e].to;

		if (job->edges[e].from != u)
			continue;
		if (color[v] == 0) {
			find_cycles(ld, v, color, path, depth + 1, on_cycle);
		} else if (color[v] == 1) {
			char chain[512];
			size_t off = 0;
			uint32_t k = depth + 1;

			while (k > 0 && path[k - 1] != v)
				k--;
			chain[0] = '\0';
			for (uint32_t j = k ? k - 1 : 0; j <= depth; j++) {
				int r = snprintf(chain + off, sizeof(chain) - off, "%s -> ",
						 job->stages[path[j]].name);

				on_cycle[path[j]] = true;
				if (r < 0 || (size_t)r >= sizeof(chain) - off)
					break;
				off += (size_t)r;
			}
			snprintf(chain + off, sizeof(chain) - off, "%s", job->stages[v].name);
			errorf(ld, job->edges[e].line,
			       "input of stage '%s' closes a cycle: %s; a topology must be acyclic",
			       job->stages[v].name, chain);
		}
	}
	color[u] = 2;
}

/* Each stage's `input =` entries into edges; a wrong entry is reported and
 * sets ld->edges_missing. Return: 0 or -ENOMEM. */
static int load_inputs(struct loader *ld)
{
	struct shmrun_job *job = ld->job;
	uint32_t n = job->nstages, cap = 0;
	int r;

	for (uint32_t i = 0; i < n; i++) {
		const struct kv *in = ld->input[i];
		const char *p;

		if (!in)
			continue;
		if (!*in->value) {
			errorf(ld, in->line,
			       "input in stage '%s' has an empty value; name the "
			       "stage it reads from",
			       job->stages[i].name);
			ld->edges_missing = true;
			continue;
		}
		for (p = in->value;;) {
			size_t len = strcspn(p, ",");
			size_t k = 0;

			while (k < len && isspace((unsigned char)p[k]))
				k++;
			if (k == len) {
				errorf(ld, in->line,
				       "input of stage '%s' has an empty entry; separate stages "
				       "with single commas",
				       job->stages[i].name);
				ld->edges_missing = true;
			} else {
				r = parse_input_item(ld, i, p, len, in->line, &cap);
				if (r)
					return r;
			}
			if (!p[len])
				break;
			p += len + 1;
		}
	}
	return 0;
}

/*
 * Sources take no input and the other stages do, nothing reads from a sink,
 * every stage is reached from a source, and there is a sink that every stage
 * feeds. @has_out (the stage has an outgoing edge) and @on_cycle are filled,
 * one per stage; @reached (all false) and @queue are per-stage scratch.
 */
static void check_flow(struct loader *ld, bool *reached, const bool *has_out, const bool *on_cycle,
		       uint32_t *queue)
{
	struct shmrun_job *job = ld->job;
	uint32_t n = job->nstages, nsinks = 0;
	uint32_t head = 0, tail = 0, leaf = UINT32_MAX;

	for (uint32_t i = 0; i < n; i++) {
		const struct shmrun_stage *st = &job->stages[i];

		if (st->op->flags & SHMRUN_OP_SINK)
			nsinks++;
		if ((st->op->flags & SHMRUN_OP_SOURCE) && ld->input[i])
			errorf(ld, ld->input[i]->line,
			       "stage '%s' (op %s) is a source and takes no input; remove "
			       "'input'",
			       st->name, st->op->name);
		if (!(st->op->flags & SHMRUN_OP_SOURCE) && !ld->input[i] &&
		    !find_refused(ld, ld->stage_sec[i], "input"))
			errorf(ld, st->line,
			       "stage '%s' (op %s) has no 'input'; name the stage it reads "
			       "from, e.g. input = %s",
			       st->name, st->op->name, i ? job->stages[i - 1].name : "read");
		if (st->op->flags & SHMRUN_OP_SOURCE) {
			reached[i] = true;
			queue[tail++] = i;
		}
		if (!has_out[i] && !(st->op->flags & SHMRUN_OP_SINK) && leaf == UINT32_MAX)
			leaf = i;
	}
	for (uint32_t e = 0; e < job->nedges; e++) {
		const struct shmrun_stage *from = &job->stages[job->edges[e].from];

		if (from->op->flags & SHMRUN_OP_SINK)
			errorf(ld, job->edges[e].line,
			       "stage '%s' reads from '%s', a sink (op %s) that emits "
			       "nothing",
			       job->stages[job->edges[e].to].name, from->name, from->op->name);
	}
	if (tail == 0)
		errorf(ld, job->stages[0].line,
		       "no source stage: nothing produces records; add one, e.g. [read] "
		       "op = file_source, path = input.txt");
	while (head < tail) {
		uint32_t u = queue[head++];

		for (uint32_t e = 0; e < job->nedges; e++) {
			uint32_t v = job->edges[e].to;

			if (job->edges[e].from == u && !reached[v]) {
				reached[v] = true;
				queue[tail++] = v;
			}
		}
	}
	for (uint32_t i = 0; i < n; i++)
		if (!reached[i] && ld->input[i] && !on_cycle[i])
			errorf(ld, job->stages[i].line,
			       "stage '%s' has no path from a source: every chain of inputs "
			       "leading to it starts at a stage that is not a source",
			       job->stages[i].name);
	if (nsinks == 0) {
		errorf(ld, job->stages[leaf == UINT32_MAX ? n - 1 : leaf].line,
		       "no sink stage: the job's records go nowhere; add one, e.g. "
		       "[out] op = file_sink, input = %s, path = out.tsv",
		       job->stages[leaf == UINT32_MAX ? n - 1 : leaf].name);
	} else {
		for (uint32_t i = 0; i < n; i++)
			if (!has_out[i] && !(job->stages[i].op->flags & SHMRUN_OP_SINK))
				errorf(ld, job->stages[i].line,
				       "stage '%s' (op %s) feeds no stage, so its records "
				       "would be dropped; read it from a sink (input = %s) "
				       "or remove it",
				       job->stages[i].name, job->stages[i].op->name,
				       job->stages[i].name);
	}
}

/*
 * job->topo: Kahn's algorithm, lowest stage index first: sources first, file
 * order. @indeg (n + 1 entries) and @reached (n) are scratch. Return: 0 or
 * -ENOMEM.
 */
static int topo_order(struct loader *ld, uint32_t *indeg, bool *reached)
{
	struct shmrun_job *job = ld->job;
	uint32_t n = job->nstages;

	job->topo = malloc(n * sizeof(*job->topo));
	if (!job->topo)
		return -ENOMEM;
	memset(indeg, 0, (n + 1) * sizeof(*indeg));
	memset(reached, 0, n * sizeof(*reached));
	for (uint32_t e = 0; e < job->nedges; e++)
		indeg[job->edges[e].to]++;
	for (uint32_t k = 0; k < n; k++) {
		uint32_t u = 0;

		while (u < n && (reached[u] || indeg[u]))
			u++;
		if (u == n) { /* unreachable: cycles were reported above */
			while (k < n)
				job->topo[k++] = n;
			break;
		}
		reached[u] = true;
		job->topo[k] = u;
		for (uint32_t e = 0; e < job->nedges; e++)
			if (job->edges[e].from == u)
				indeg[job->edges[e].to]--;
	}
	return 0;
}

/*
 * Warn about a stage whose operator works by event-time watermarks (the
 * built-in window and joins) while no stage upstream generates any: its
 * timers then fire only at end of input (SHMRUN_WATERMARK_MAX), which is
 * right for a finite input read as a batch but surprising on a live one.
 * Only a warning: a batch job needs nothing more. @gets (n entries) is
 * scratch. Needs job->topo.
 */
static void check_watermark_sources(struct loader *ld, bool *gets)
{
	static const char *const event_time_ops[] = {"window", "interval_join", "window_join"};
	struct shmrun_job *job = ld->job;
	uint32_t n = job->nstages;

	memset(gets, 0, n * sizeof(*gets));
	for (uint32_t k = 0; k < n; k++) {
		uint32_t u = job->topo[k];

		if (u >= n)
			return; /* a cycle cut the order short: reported already */
		for (uint32_t e = 0; e < job->nedges; e++)
			if (job->edges[e].from == u)
				gets[job->edges[e].to] |= gets[u] || job->stages[u].watermarks;
	}
	for (uint32_t i = 0; i < n; i++) {
		const struct shmrun_stage *st = &job->stages[i];

		if (gets[i] || !st->op)
			continue;
		for (size_t k = 0; k < sizeof(event_time_ops) / sizeof(event_time_ops[0]); k++)
			if (strcmp(st->op->name, event_time_ops[k]) == 0)
				warnf(ld, st->line,
				      "stage '%s' (op %s): no stage upstream generates watermarks, so "
				      "it fires only at end of input; set watermark_delay on the "
				      "source or on the stage that sets event times "
				      "(docs/event-time.md)",
				      st->name, st->op->name);
	}
}

/*
 * An operator flagged SHMRUN_OP_KEYED (a plugin's nexmark_new_users) keeps
 * its state per key, so at width > 1 every record of a key must reach the
 * instance that owns the key's vnode. An input delivers that when it is
 * `by key`, or when it is a forward edge (equal widths) from a stage whose
 * own records are so partitioned (part[], in topological order: a source's
 * are not). A forward edge that a width change made a rebalance deals
 * records out in turn: the run would fail at the first misplaced record
 * ("reached an instance owning vnodes ..."), so check refuses it first, at
 * the line of `input`, with what to write. Built-in count and window check
 * their inputs in prepare() (shmrun_task_require_by_key()). @part (n
 * entries) is scratch. Needs job->topo.
 */
static void check_keyed_inputs(struct loader *ld, bool *part)
{
	struct shmrun_job *job = ld->job;
	uint32_t n = job->nstages;

	memset(part, 0, n * sizeof(*part));
	for (uint32_t k = 0; k < n; k++) {
		uint32_t u = job->topo[k];
		const struct shmrun_stage *st;
		bool all = true, any = false;

		if (u >= n)
			return; /* a cycle cut the order short: reported already */
		st = &job->stages[u];
		for (uint32_t e = 0; e < job->nedges; e++) {
			const struct shmrun_edge *ed = &job->edges[e];
			const struct shmrun_stage *from = &job->stages[ed->from];

			if (ed->to != u)
				continue;
			any = true;
			if (ed->by_key || (ed->kind == SHMRUN_EDGE_FORWARD && part[ed->from]))
				continue;
			all = false;
			if (!st->op || !(st->op->flags & SHMRUN_OP_KEYED) || st->width <= 1)
				continue;
			if (from->width != st->width)
				errorf(ld, ed->line,
				       "stage '%s' (op %s) keeps its state per key, and at width %u "
				       "the records of a key must all reach one instance: its input "
				       "'%s' (width %u) is not 'by key' and has another width, so its "
				       "records are dealt out in turn (rebalance); write '%s by key', "
				       "or give both the same width",
				       st->name, st->op->name, st->width, from->name, from->width,
				       from->name);
			else
				errorf(ld, ed->line,
				       "stage '%s' (op %s) keeps its state per key, and at width %u "
				       "the records of a key must all reach one instance: its input "
				       "'%s' is not 'by key', and no 'by key' edge before it sends "
				       "each key to one instance; write '%s by key', or set width = 1",
				       st->name, st->op->name, st->width, from->name, from->name);
		}
		part[u] = any && all;
	}
}

int load_graph(struct loader *ld)
{
	struct shmrun_job *job = ld->job;
	uint32_t n = job->nstages, *queue = NULL, *path = NULL;
	uint8_t *color = NULL;
	bool *on_cycle = NULL, *reached = NULL, *has_out = NULL;
	int r;

	r = load_inputs(ld);
	if (r)
		return r;

	if (n == 0) {
		errorf(ld, ld->job_sec >= 0 ? ld->sec[ld->job_sec].line : 1,
		       "no stages: a job needs at least a source stage and a sink stage, e.g. "
		       "[read] op = file_source and [out] op = file_sink");
		return 0;
	}

	r = -ENOMEM;
	color = calloc(n, sizeof(*color));
	path = calloc(n + 1, sizeof(*path));
	on_cycle = calloc(n, sizeof(*on_cycle));
	reached = calloc(n, sizeof(*reached));
	has_out = calloc(n, sizeof(*has_out));
	queue = calloc(n, sizeof(*queue));
	if (!color || !path || !on_cycle || !reached || !has_out || !queue)
		goto out;
	for (uint32_t i = 0; i < n; i++)
		if (color[i] == 0)
			find_cycles(ld, i, color, path, 0, on_cycle);
	for (uint32_t e = 0; e < job->nedges; e++)
		has_out[job->edges[e].from] = true;

	/*
	 * Sources, sinks and reachability need every stage's operator and every
	 * edge; on a partial graph they would only repeat the errors above.
	 */
	if (ld->ops_ok && !ld->edges_missing)
		check_flow(ld, reached, has_out, on_cycle, queue);

	/* combine = true needs an input it can work on: a `by key` edge */
	for (uint32_t i = 0; i < n && !ld->edges_missing; i++) {
		const struct shmrun_stage *st = &job->stages[i];
		bool keyed = false;

		for (uint32_t e = 0; e < job->nedges; e++)
			keyed |= job->edges[e].to == i && job->edges[e].by_key;
		if (st->combine == 1 && !keyed)
			errorf(ld, st->combine_line,
			       "combine = true in stage '%s', but none of its inputs is 'by key': "
			       "a combiner works on the edges that send each key to one instance; "
			       "write 'STAGE by key' in its input or remove the key",
			       st->name);
	}

	/* path, done with, holds the in-degrees (n + 1 words) */
	if (ld->errs.n == 0 && topo_order(ld, path, reached))
		goto out;
	if (ld->errs.n == 0 && ld->ops_ok && !ld->edges_missing && job->topo)
		check_watermark_sources(ld, reached);
	if (ld->errs.n == 0 && ld->ops_ok && !ld->edges_missing && job->topo)
		check_keyed_inputs(ld, reached);
	r = 0;
out:
	free(color);
	free(path);
	free(on_cycle);
	free(reached);
	free(has_out);
	free(queue);
	return r;
}
