/*
 * runtime/ops_doc.c: `shmrun ops [NAME]` — every operator a stage may name,
 * described from the same tables the loader checks topology.conf against
 * (struct shmrun_operator and its struct shmrun_param_def keys), as text for
 * a terminal or as the markdown of docs/operators.md's reference section.
 *
 * Invariant: nothing here is written by hand per operator. What the list says
 * about a key (type, default, range, input or output) is what `shmrun check`
 * enforces; tests/integration/ops.sh compares the markdown of the built-ins
 * with docs/operators.md, so the reference cannot drift from the code.
 *
 * Rejected: a hand-written reference table (it drifted: issue 11 asked for
 * one source); generating docs/operators.md whole at build time (the guide
 * around the reference is prose people edit).
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* What a plugin left out (struct shmrun_operator.summary, shmrun_param.doc are optional). */
#define NO_SUMMARY "(no summary: its plugin gives none)"
#define NO_DOC "(not documented by its plugin)"

/* What an operator is, in a word (@cap: capitalised, to start a sentence). */
static const char *kind_of(const struct shmrun_operator *op, bool cap)
{
	if (op->flags & SHMRUN_OP_SOURCE)
		return cap ? "Source" : "source";
	if (op->flags & SHMRUN_OP_SINK)
		return cap ? "Sink" : "sink";
	return cap ? "Operator" : "operator";
}

/* Its per-worker state and how a rescale deals it (docs/state.md). */
static const char *pw_of(const struct shmrun_operator *op)
{
	switch (op->pw_rule) {
	case SHMRUN_PW_SPLIT:
		return "split: on a rescale every old instance's entries are pooled and dealt "
		       "out, each owned by one new instance";
	case SHMRUN_PW_UNION:
		return "union: on a rescale every new instance gets every entry";
	case SHMRUN_PW_NONE:
		break;
	}
	return op->snapshot ? "none declared: a rescale cannot change this stage's width once it has "
			      "saved per-worker entries"
			    : "none";
}

/* @s with markdown's inline specials escaped (@md), or as it is. */
static void put_text(FILE *out, const char *s, bool md)
{
	for (; s && *s; s++) {
		if (md && strchr("\\`*_[]<>#|", *s))
			fputc('\\', out);
		fputc(*s, out);
	}
}

/* One key: "type; required | default D; range; input|output". */
static void put_key(FILE *out, const struct shmrun_param_def *d, bool md)
{
	const char *type, *form;
	char range[128];

	shmrun_param_describe(d, &type, &form, range, sizeof(range));
	if (md)
		fprintf(out, "- **%s** (%s", d->key, type);
	else
		fprintf(out, "    %-18s %s", d->key, type);
	if (d->required)
		fputs("; required", out);
	else if (d->def)
		fprintf(out, "; default %s", d->def);
	else
		fputs("; optional", out);
	if (range[0])
		fprintf(out, "; %s", range);
	if (d->type == SHMRUN_PARAM_ENUM) {
		fputs("; one of: ", out);
		put_text(out, d->choices, md);
	}
	if (d->io == SHMRUN_PARAM_INPUT)
		fputs("; read", out);
	else if (d->io == SHMRUN_PARAM_OUTPUT)
		fputs("; written, one file per instance above width 1", out);
	if (d->tuning)
		fputs("; tuning: not part of the fingerprint", out);
	fputs(md ? "): " : "\n        ", out);
	put_text(out, d->doc ? d->doc : NO_DOC, md);
	fputc('\n', out);
}

/* The callbacks and flags that tell a user something: batches, combiner, pacing,
 * commit, flush, cannot be replayed. */
static void put_features(FILE *out, const struct shmrun_operator *op)
{
	const char *sep = "";

	if (op->process_batch) {
		fputs("batches (process_batch())", out);
		sep = ", ";
	}
	if (op->combiner) {
		fprintf(out, "%sa combiner (combine = true by default)", sep);
		sep = ", ";
	}
	if (op->pacing_param) {
		fprintf(out, "%spaced by its key %s", sep, op->pacing_param);
		sep = ", ";
	}
	if (op->commit) {
		fprintf(out, "%sexactly-once output (two-phase commit at checkpoints)", sep);
		sep = ", ";
	}
	if (op->flush) {
		fprintf(out, "%sflushes held output", sep);
		sep = ", ";
	}
	if (op->flags & SHMRUN_OP_UNREPLAYABLE) {
		fprintf(out,
			"%scannot be replayed: at-most-once across a crash (with checkpoint_dir "
			"only if [job] allow_data_loss_on_crash = true)",
			sep);
		sep = ", ";
	}
	if (!*sep)
		fputs("none", out);
}

static void put_origin(FILE *out, const struct shmrun_operator *op)
{
	const struct shmrun_plugin_info *pi = shmrun_operator_plugin(op);

	if (pi)
		fprintf(out, "plugin %s %s (%s)", pi->name, pi->version, pi->path);
	else
		fputs("built-in", out);
}

static void put_one(FILE *out, const struct shmrun_operator *op, bool md)
{
	const struct shmrun_param_def *d = op->params;

	if (md) {
		fprintf(out, "### %s\n\n", op->name);
		put_text(out, op->summary ? op->summary : NO_SUMMARY, md);
		fprintf(out, "\n\n%s; per-worker state: %s; features: ", kind_of(op, true),
			pw_of(op));
		put_features(out, op);
		fputs(".\n\n", out);
		if (!d || !d->key)
			fputs("Keys: none besides those of every stage.\n\n", out);
		else
			fputs("Keys, besides those of every stage:\n\n", out);
		for (; d && d->key; d++)
			put_key(out, d, md);
		if (op->params && op->params->key)
			fputc('\n', out);
		return;
	}
	fprintf(out, "%s: %s\n", op->name, op->summary ? op->summary : NO_SUMMARY);
	fprintf(out, "  kind:             %s\n  origin:           ", kind_of(op, false));
	put_origin(out, op);
	fprintf(out, "\n  per-worker state: %s\n  features:         ", pw_of(op));
	put_features(out, op);
	/* the keys of every stage, from their table (conf_job.c), as a list */
	fputs("\n  keys, besides", out);
	for (const struct shmrun_param_def *k = shmrun_stage_keys(); k->key; k++)
		fprintf(out, "%s %s", k == shmrun_stage_keys() ? "" : k[1].key ? "," : " and",
			k->key);
	fputs(":\n", out);
	if (!d || !d->key)
		fputs("    (none)\n", out);
	for (; d && d->key; d++)
		put_key(out, d, md);
}

int shmrun_ops_print(FILE *out, const char *name, bool markdown)
{
	const struct shmrun_operator *const *all = shmrun_operators();

	if (name) {
		const struct shmrun_operator *op = shmrun_operator_find(name);

		if (!op) {
			const char *near = shmrun_operator_nearest(name);

			if (near)
				fprintf(stderr, "shmrun: no operator '%s'; did you mean '%s'? "
					"(`shmrun ops` lists them)\n", name, near);
			else
				fprintf(stderr, "shmrun: no operator '%s'; `shmrun ops` lists them "
					"(an operator from a plugin needs --plugin PATH)\n", name);
			return 2;
		}
		put_one(out, op, markdown);
		return 0;
	}
	for (; *all; all++) {
		if (markdown) {
			put_one(out, *all, true);
			continue;
		}
		fprintf(out, "%-14s %-9s %s", (*all)->name, kind_of(*all, false),
			(*all)->summary ? (*all)->summary : NO_SUMMARY);
		if (shmrun_operator_plugin(*all)) {
			fputs(" [", out);
			put_origin(out, *all);
			fputc(']', out);
		}
		fputc('\n', out);
	}
	if (!markdown)
		fputs("\n`shmrun ops NAME` shows an operator's keys.\n", out);
	return 0;
}
