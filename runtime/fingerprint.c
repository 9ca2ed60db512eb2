/*
 * runtime/fingerprint.c: the fingerprint that guards every restore.
 *
 * Restoring state into a topology it was not made for corrupts results
 * silently: a source that loses read positions skips input, one that gets them
 * twice duplicates output (docs/state.md). So every
 * checkpoint records a fingerprint of the topology that wrote it, and a restore
 * into a different one is refused, naming each difference.
 *
 * The fingerprint is XXH64 of a canonical text encoding — one item per line,
 * in a fixed order, values as validated (defaults applied, paths resolved), so
 * key order, spacing and comments in topology.conf do not matter:
 *
 *     shmrun-topology 1
 *     vnodes 256
 *     stage count op=count width=4 rule=none
 *     param count emit=final
 *     edge words count shuffle
 *     members members=2:0,1            (Members::fingerprint_clause; absent when solo)
 *     members members=4:0,1,2,3 hosts=2   (hosts > 1: all hosts' workers, and H)
 *
 * Stages sorted by name, each with its params in the operator's declaration
 * order (numbers, sizes and durations in their unit, so "32M" = "33554432"),
 * leaving out tuning keys (`rate`) that change speed, not state; edges sorted
 * by their stages' names.
 * The members line is the member set's clause, empty for a solo run, so a solo
 * run's fingerprint never depends on member-related settings. A multi-host
 * job's member set is every host's workers (global worker g = h·w + i) and the
 * line adds " hosts=H": restoring onto another host count is a rescale, as any
 * change of the member set is (docs/multihost.md). The line is written whole
 * however long it is (4096 workers: about 19 KB; it once went through a
 * 1024-byte buffer, which cut every member set past ~280 workers at the same
 * place, so two sets that differed after it shared a fingerprint).
 *
 * The MANIFEST carries the same lines (prefixed "topo "), which is what lets a
 * refusal say what differs, in the field's terms.
 *
 * Who uses it: the launcher puts the hash in the segment header; every
 * MANIFEST records the hash and the text (ckpt/manifest.c); a restore, `shmrun
 * check` and a rescale compare a checkpoint's hash with the job's and, when
 * they differ, shmrun_fingerprint_diff() turns the two texts into the
 * message ("stage count: width 4 → 2; members: 2 → 3 workers").
 *
 * Invariants:
 *   - The encoding is a function of the validated job alone: no address, no
 *     time, no environment, no CPU number. Every process that computes it
 *     (the launcher, each worker, `shmrun check`, a rescale) gets the same
 *     bytes, and so does the same topology next week.
 *   - It holds everything that decides where a piece of state lives and what
 *     it means — vnode count, each stage's name (state files are named
 *     <stage>.<instance>, so a renamed stage is a removed one and a new one),
 *     operator, width, per-worker rule, non-tuning keys, edges and their
 *     kinds, the member set — and nothing that only changes speed: tuning
 *     keys, and the [job] keys cpus, idle, ring_bytes and the checkpoint
 *     keys. A key added to an operator with a default enters the encoding
 *     of every job using it, and so refuses their checkpoints: one that
 *     changes speed only is declared tuning (operator.h).
 *   - The first line versions the encoding: any change to what is written,
 *     or how, changes every fingerprint and so refuses every existing
 *     checkpoint; it is made on purpose, with the version, or not at all.
 *   - The diff reads texts only, never a job, so it can describe a checkpoint
 *     whose conf file is long gone; a difference it does not know how to name
 *     still refuses ("the topologies differ").
 *
 * Rejected:
 *   - hashing the bytes of topology.conf: a comment, a reordered key, "32M"
 *     for "33554432" or a moved job directory would refuse a restore that is
 *     safe;
 *   - hashing struct shmrun_job in memory: pointers and padding differ
 *     between processes and builds, and a hash of it cannot say what differs;
 *   - keeping only the hash in the MANIFEST: a refusal could then only say
 *     "fingerprint a → b", and the user would have to guess which change of
 *     theirs it was;
 *   - covering cpus, idle or the tuning keys: moving a job to other CPUs or
 *     changing a source's rate would throw its state away for nothing;
 *   - a cryptographic hash: the fingerprint guards against mistakes, not
 *     against an adversary who writes checkpoint_dir; XXH64 is what the rest
 *     of the runtime already links.
 */
#include <errno.h>
#include <limits.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "internal.h"
#include "shmrun/job.h"
#include "shmrun/placement.h"
#include "text.h"

static const char *edge_word(enum shmrun_edge_kind k)
{
	static const char *const w[] = {"forward", "shuffle", "rebalance", "broadcast"};

	return (unsigned)k < 4 ? w[k] : "?";
}

const char *shmrun_pw_rule_name(enum shmrun_pw_rule rule)
{
	return rule == SHMRUN_PW_SPLIT ? "split" : rule == SHMRUN_PW_UNION ? "union" : "none";
}

static int edge_cmp(const struct shmrun_job *job, uint32_t a, uint32_t b)
{
	int c = strcmp(job->stages[job->edges[a].from].name, job->stages[job->edges[b].from].name);

	return c ? c : strcmp(job->stages[job->edges[a].to].name, job->stages[job->edges[b].to].name);
}

/*
 * A key's value; paths inside the conf file's directory are written relative
 * to it, so a job directory that is moved or copied keeps its fingerprint.
 */
static void put_value(struct shmrun_text *o, const struct shmrun_job *job, const struct shmrun_param *p)
{
	size_t dl = job->conf_dir ? strlen(job->conf_dir) : 0;
	const char *v = p->value;

	switch (p->def->type) {
	case SHMRUN_PARAM_COUNT:
	case SHMRUN_PARAM_SIZE:
	case SHMRUN_PARAM_RATE:
	case SHMRUN_PARAM_DURATION:
		shmrun_text_printf(o, "%" PRIu64, p->u64); /* "32M" and "33554432" are one value */
		return;
	case SHMRUN_PARAM_BOOL:
		shmrun_text_printf(o, "%s", p->u64 ? "true" : "false");
		return;
	case SHMRUN_PARAM_PATH:
	case SHMRUN_PARAM_PATHS:
		break;
	default:
		shmrun_text_printf(o, "%s", v);
		return;
	}
	while (*v) {
		size_t n = strcspn(v, "\n"); /* PATHS: one resolved path per line */

		if (dl && n > dl && strncmp(v, job->conf_dir, dl) == 0 && v[dl] == '/')
			shmrun_text_printf(o, "%.*s", (int)(n - dl - 1), v + dl + 1);
		else
			shmrun_text_printf(o, "%.*s", (int)n, v);
		v += n;
		if (*v) {
			shmrun_text_printf(o, " ");
			v += strspn(v, "\n");
		}
	}
}

/*
 * The members line of member set @ids (@n ids) on @hosts hosts into @o: the
 * clause written whole, however long (4096 workers: about 19 KB), so two
 * member sets that differ anywhere give two lines. Nothing for a solo run.
 */
static void members_line(struct shmrun_text *o, const uint32_t *ids, uint32_t n, uint32_t hosts)
{
	struct shmrun_members m;
	char *clause;
	int need;

	if (!n) /* no workers given (a job not validated): as solo */
		return;
	if (shmrun_members_init(&m, ids, n, UINT32_MAX)) {
		o->err = o->err ? o->err : -ENOMEM;
		return;
	}
	need = shmrun_members_fingerprint_clause(&m, NULL, 0);
	if (need <= 0) { /* solo, or -EINVAL: nothing to write */
		if (need < 0 && !o->err)
			o->err = need;
		shmrun_members_free(&m);
		return;
	}
	clause = malloc((size_t)need + 1);
	if (!clause) {
		o->err = o->err ? o->err : -ENOMEM;
		shmrun_members_free(&m);
		return;
	}
	shmrun_members_fingerprint_clause(&m, clause, (uint32_t)need + 1);
	/* hosts only when > 1: a one-host job's fingerprint is what it was */
	if (hosts > 1)
		shmrun_text_printf(o, "members %s hosts=%u\n", clause, hosts);
	else
		shmrun_text_printf(o, "members %s\n", clause);
	free(clause);
	shmrun_members_free(&m);
}

int shmrun_fingerprint_text(const struct shmrun_job *job, char **text, size_t *len)
{
	/* the member set: every host's workers, global worker g = h * workers + i */
	uint32_t hosts = job->hosts ? job->hosts : 1, members = hosts * job->workers;
	uint32_t *ids = calloc(members ? members : 1, sizeof(*ids));
	int err;

	if (!ids)
		return -ENOMEM;
	for (uint32_t w = 0; w < members; w++)
		ids[w] = w;
	err = shmrun_fingerprint_text_members(job, ids, members, text, len);
	free(ids);
	return err;
}

int shmrun_fingerprint_text_members(const struct shmrun_job *job, const uint32_t *ids,
				    uint32_t members, char **text, size_t *len)
{
	struct shmrun_text o = {0};
	uint32_t hosts = job->hosts ? job->hosts : 1;
	uint32_t *order = calloc(job->nstages + job->nedges + 1, sizeof(*order));
	uint32_t *eorder = order ? order + job->nstages : NULL;

	if (!order)
		return -ENOMEM;
	/* Stages by name and edges by (from, to) name: the order of sections in
	 * the file does not matter (state files are named by stage and instance). */
	for (uint32_t s = 0; s < job->nstages; s++) {
		uint32_t j = s;

		for (; j > 0 && strcmp(job->stages[order[j - 1]].name, job->stages[s].name) > 0; j--)
			order[j] = order[j - 1];
		order[j] = s;
	}
	for (uint32_t e = 0; e < job->nedges; e++) {
		uint32_t j = e;

		for (; j > 0 && edge_cmp(job, eorder[j - 1], e) > 0; j--)
			eorder[j] = eorder[j - 1];
		eorder[j] = e;
	}
	shmrun_text_printf(&o, "shmrun-topology 1\nvnodes %u\n", job->vnodes);
	for (uint32_t x = 0; x < job->nstages; x++) {
		const struct shmrun_stage *st = &job->stages[order[x]];

		const struct shmrun_plugin_info *pi = shmrun_operator_plugin(st->op);

		shmrun_text_printf(&o, "stage %s op=%s width=%u rule=%s\n", st->name, st->op->name, st->width,
		    shmrun_pw_rule_name(st->op->pw_rule));
		/* a plugin's operator: its file, and the format of its state (the
		 * operator's state_version, else the plugin's version); the path
		 * last, as it may hold blanks. A plugin inside the conf file's
		 * directory is written relative to it, as put_value() writes paths,
		 * so a job directory moved or copied with its plugin still resumes. */
		char fmt[200];

		if (shmrun_stage_plugin_state(st, fmt, sizeof(fmt))) {
			size_t dl = job->conf_dir ? strlen(job->conf_dir) : 0;
			const char *path = pi->path;

			if (dl && strlen(path) > dl + 1 && strncmp(path, job->conf_dir, dl) == 0 &&
			    path[dl] == '/')
				path += dl + 1;
			shmrun_text_printf(&o, "plugin %s %s path=%s\n", st->name, fmt, path);
		}
		for (uint32_t i = 0; i < st->nparams; i++) {
			const struct shmrun_param *p = &st->params[i];

			if (p->def->tuning || !p->value)
				continue;
			shmrun_text_printf(&o, "param %s %s=", st->name, p->def->key);
			put_value(&o, job, p);
			shmrun_text_printf(&o, "\n");
		}
	}
	for (uint32_t x = 0; x < job->nedges; x++) {
		const struct shmrun_edge *ed = &job->edges[eorder[x]];

		shmrun_text_printf(&o, "edge %s %s %s\n", job->stages[ed->from].name, job->stages[ed->to].name,
		    edge_word(ed->kind));
	}
	free(order);
	members_line(&o, ids, members, hosts);
	if (o.err) {
		free(o.p);
		return o.err;
	}
	*text = o.p;
	*len = o.len;
	return 0;
}

/* XXH64 of the text @describe writes for @job; 0 if it could not be made. */
static uint64_t hash_text(const struct shmrun_job *job,
			  int (*describe)(const struct shmrun_job *, char **, size_t *))
{
	char *text;
	size_t len;
	uint64_t h;

	if (describe(job, &text, &len))
		return 0;
	h = XXH64(text, len, 0);
	free(text);
	return h;
}

uint64_t shmrun_fingerprint(const struct shmrun_job *job)
{
	return hash_text(job, shmrun_fingerprint_text);
}

/* ---- the whole job (multi-host start exchange) ----------------------------- */

int shmrun_job_text(const struct shmrun_job *job, char **text, size_t *len)
{
	struct shmrun_text o = {0};
	char *fp;
	size_t fl;
	int err = shmrun_fingerprint_text(job, &fp, &fl);

	if (err)
		return err;
	shmrun_text_printf(&o, "%s", fp);
	free(fp);
	shmrun_text_printf(&o,
			   "job name=%s workers=%u hosts=%u vnodes=%u ring_bytes=%" PRIu64
			   " idle=%d\n",
			   job->name ? job->name : "", job->workers, job->hosts ? job->hosts : 1,
			   job->vnodes, job->ring_bytes, (int)job->idle);
	shmrun_text_printf(&o,
			   "job checkpoint_dir=%s layout=%s interval=%" PRIu64 " timeout=%" PRIu64
			   " retain=%u restart_attempts=%u\n",
			   job->checkpoint_dir_template ? job->checkpoint_dir_template
			   : job->checkpoint_dir	 ? job->checkpoint_dir
							 : "",
			   job->checkpoint_per_host ? "per_host" : "shared",
			   job->checkpoint_interval_ns, job->checkpoint_timeout_ns,
			   job->checkpoint_retain, job->restart_attempts);
	shmrun_text_printf(&o,
			   "job union_state_limit=%" PRIu64 " per_worker_state_warn=%" PRIu64
			   " operator_timeout=%" PRIu64 " idle_timeout=%" PRIu64
			   " allow_data_loss_on_crash=%d host_flush=%" PRIu64 "\n",
			   job->union_state_limit, job->per_worker_state_warn,
			   job->operator_timeout_ns, job->idle_timeout_ns,
			   (int)job->allow_data_loss_on_crash, job->host_flush_ns);
	/* host_timeout is left out, like cpus: how long this host waits for a
	 * silent peer is its own tolerance (a host on a slower network may
	 * wait longer), and nothing else depends on it */
	for (uint32_t s = 0; s < job->nstages; s++) {
		const struct shmrun_stage *st = &job->stages[s];

		shmrun_text_printf(&o, "stage %s combine=%d watermarks=%d delay=%" PRIu64
				       " interval=%" PRIu64 "\n",
				   st->name, st->combine, (int)st->watermarks,
				   st->watermark_delay_ns, st->watermark_interval_ns);
		for (uint32_t i = 0; i < st->nparams; i++) {
			const struct shmrun_param *p = &st->params[i];

			if (!p->value)
				continue;
			shmrun_text_printf(&o, "key %s %s=", st->name, p->def->key);
			put_value(&o, job, p);
			shmrun_text_printf(&o, "\n");
		}
	}
	if (o.err) {
		free(o.p);
		return o.err;
	}
	*text = o.p;
	*len = o.len;
	return 0;
}

uint64_t shmrun_job_hash(const struct shmrun_job *job)
{
	return hash_text(job, shmrun_job_text);
}

/* ---- differences ------------------------------------------------------------ */

struct topo {
	char **lines;
	uint32_t n;
};

static int split_lines(const char *text, struct topo *t)
{
	const char *p = text;

	t->lines = NULL;
	t->n = 0;
	while (*p) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		char **nv = realloc(t->lines, (t->n + 1) * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		t->lines = nv;
		t->lines[t->n] = strndup(p, n);
		if (!t->lines[t->n])
			return -ENOMEM;
		t->n++;
		p += n + (nl ? 1 : 0);
	}
	return 0;
}

static void free_lines(struct topo *t)
{
	for (uint32_t i = 0; i < t->n; i++)
		free(t->lines[i]);
	free(t->lines);
}

/* The line of @t starting with @prefix followed by a space or '=', or NULL. */
static const char *find(const struct topo *t, const char *prefix)
{
	size_t n = strlen(prefix);

	for (uint32_t i = 0; i < t->n; i++)
		if (strncmp(t->lines[i], prefix, n) == 0 &&
		    (t->lines[i][n] == ' ' || t->lines[i][n] == '=' || !t->lines[i][n]))
			return t->lines[i];
	return NULL;
}

/*
 * The text after the first @n bytes of @line (a line find() returned for a
 * prefix of @n bytes) and the one ' ' or '=' that find() let follow them; ""
 * when nothing follows. The old topology comes back from a MANIFEST on disk:
 * its lines are not trusted to have the shape shmrun_fingerprint_text() gives
 * them ("vnodes" alone, "param s k" without '=': found by fuzzing,
 * tests/fuzz/fuzz_manifest.c), so nothing here steps past a line's end.
 */
static const char *after(const char *line, size_t n)
{
	return line[n] ? line + n + 1 : line + n;
}

/* The value of " key=" in a stage line. */
static void field(const char *line, const char *key, char *buf, size_t len)
{
	char k[40];
	const char *p;

	snprintf(k, sizeof(k), " %s=", key);
	p = line ? strstr(line, k) : NULL;
	buf[0] = 0;
	if (p) {
		p += strlen(k);
		snprintf(buf, len, "%.*s", (int)strcspn(p, " "), p);
	}
}

static uint32_t members_of(const struct topo *t)
{
	const char *m = find(t, "members");
	unsigned n = 1;

	if (m && sscanf(m, "members members=%u", &n) != 1 && sscanf(m, "members %u", &n) != 1)
		n = 1;
	return n;
}

/* The host count of a members line (" hosts=H"; 1 without it). */
static uint32_t hosts_of(const struct topo *t)
{
	const char *m = find(t, "members"), *h = m ? strstr(m, " hosts=") : NULL;
	unsigned n = 1;

	if (h && sscanf(h, " hosts=%u", &n) != 1)
		n = 1;
	return n;
}

/* Whether two members lines list the same members (their host counts aside). */
static bool same_member_set(const struct topo *a, const struct topo *b)
{
	const char *ma = find(a, "members"), *mb = find(b, "members");
	const char *ha = ma ? strstr(ma, " hosts=") : NULL, *hb = mb ? strstr(mb, " hosts=") : NULL;
	size_t la = ma ? (ha ? (size_t)(ha - ma) : strlen(ma)) : 0;
	size_t lb = mb ? (hb ? (size_t)(hb - mb) : strlen(mb)) : 0;

	return la == lb && (!la || memcmp(ma, mb, la) == 0);
}

static void add(struct shmrun_text *o, const char *what)
{
	shmrun_text_printf(o, "%s%s", o->len ? "; " : "", what);
}

/* The "plugin STAGE (version|state)=V path=P" line @line of one topology
 * against @y, the other (@pass 0: @line is the old one). A stage whose
 * operator became or stopped being a plugin's is an op change, reported with
 * the stage lines. */
static void plugin_diff(struct shmrun_text *o, const char *line, const struct topo *y,
			const char *stage, int pass)
{
	char prefix[100], s2[100], buf[PATH_MAX * 2 + 200];
	const char *other, *path_a, *path_b, *va, *vb;
	size_t la, lb;

	snprintf(prefix, sizeof(prefix), "plugin %s", stage);
	snprintf(s2, sizeof(s2), "stage %s", stage);
	other = find(y, prefix);
	if (pass || !other || !find(y, s2) || strcmp(other, line) == 0)
		return;
	path_a = strstr(line, " path=");
	path_b = strstr(other, " path=");
	va = after(line, strlen(prefix));
	vb = after(other, strlen(prefix));
	if (!path_a || !path_b || path_a < va || path_b < vb)
		return; /* not "plugin STAGE V path=P" */
	la = (size_t)(path_a - va);
	lb = (size_t)(path_b - vb);
	if (strcmp(path_a, path_b)) {
		snprintf(buf, sizeof(buf), "stage %s: plugin %s → %s", stage, path_a + 6, path_b + 6);
		add(o, buf);
	}
	if (la != lb || memcmp(va, vb, la)) {
		/* "version=1.0.0" or "state=s1": the plugin's version, or its
		 * operator's state format */
		snprintf(buf, sizeof(buf),
			 "stage %s: plugin %.*s → %.*s (a plugin's version or state_version "
			 "changed: its state format may have; restore with the old plugin, or "
			 "STREAM_RESET_STATE=1 to start afresh)",
			 stage, (int)la, va, (int)lb, vb);
		add(o, buf);
	}
}

/*
 * The "param STAGE key=value" line @line of one topology against @y, the other
 * (@pass 0: @line is the old one; a key only in @y is reported from the other
 * pass): its change added to @o, for the stages of both only, and for stage
 * @only alone when it is not NULL. Return: whether @line is a param line.
 */
static bool param_diff_line(struct shmrun_text *o, const char *line, const struct topo *y,
			    int pass, const char *only)
{
	char s1[80], s2[100], k[80], prefix[200], buf[600];
	const char *other, *eq;

	if (sscanf(line, "param %79s %79s", s1, k) != 2)
		return false;
	eq = strchr(k, '=');
	if (!eq || (only && strcmp(only, s1) != 0))
		return true;
	snprintf(prefix, sizeof(prefix), "param %s %.*s", s1, (int)(eq - k), k);
	snprintf(s2, sizeof(s2), "stage %s", s1);
	if (!find(y, s2))
		return true; /* the stage itself is new or removed */
	other = find(y, prefix);
	if (!other && pass) {
		snprintf(buf, sizeof(buf), "stage %s: %.*s: (unset) → %s", s1, (int)(eq - k), k,
			 eq + 1);
		add(o, buf);
	} else if (!other) {
		snprintf(buf, sizeof(buf), "stage %s: %.*s: %s → (unset)", s1, (int)(eq - k), k,
			 eq + 1);
		add(o, buf);
	} else if (!pass && strcmp(other, line)) {
		snprintf(buf, sizeof(buf), "stage %s: %.*s: %s → %s", s1, (int)(eq - k), k, eq + 1,
			 after(other, strlen(prefix)));
		add(o, buf);
	}
	return true;
}

int shmrun_fingerprint_param_diff(const char *old_text, const char *new_text, const char *stage,
				  char **msg)
{
	struct topo a = {0}, b = {0};
	struct shmrun_text o = {0};
	int err = split_lines(old_text, &a);

	err = err ? err : split_lines(new_text, &b);
	*msg = NULL;
	if (err) {
		free_lines(&a);
		free_lines(&b);
		return err;
	}
	for (int pass = 0; pass < 2; pass++) {
		const struct topo *x = pass ? &b : &a, *y = pass ? &a : &b;

		for (uint32_t i = 0; i < x->n; i++)
			param_diff_line(&o, x->lines[i], y, pass, stage);
	}
	free_lines(&a);
	free_lines(&b);
	if (o.err) {
		free(o.p);
		return o.err;
	}
	*msg = o.p;
	return 0;
}

int shmrun_fingerprint_diff(const char *old_text, const char *new_text, char **msg)
{
	struct topo a, b;
	struct shmrun_text o = {0};
	char buf[600];
	int err;

	err = split_lines(old_text, &a);
	if (!err)
		err = split_lines(new_text, &b);
	if (err)
		return err;
	{
		const char *va = find(&a, "vnodes"), *vb = find(&b, "vnodes");

		if (va && vb && strcmp(va, vb)) {
			snprintf(buf, sizeof(buf), "vnodes: %s → %s", after(va, 6), after(vb, 6));
			add(&o, buf);
		}
	}
	if (members_of(&a) != members_of(&b)) {
		snprintf(buf, sizeof(buf), "members: %u → %u workers", members_of(&a),
			 members_of(&b));
		add(&o, buf);
	}
	if (members_of(&a) == members_of(&b) && !same_member_set(&a, &b)) {
		/* as many members, not the same ones; or a checkpoint of a shmrun
		 * that cut the line at 1023 bytes (281 workers or more) */
		snprintf(buf, sizeof(buf), "members: another set of %u workers", members_of(&a));
		add(&o, buf);
	}
	if (hosts_of(&a) != hosts_of(&b)) {
		snprintf(buf, sizeof(buf), "hosts: %u → %u", hosts_of(&a), hosts_of(&b));
		add(&o, buf);
	}
	for (int pass = 0; pass < 2; pass++) { /* 0: stages of a, 1: stages only in b */
		const struct topo *x = pass ? &b : &a, *y = pass ? &a : &b;

		for (uint32_t i = 0; i < x->n; i++) {
			char name[80], prefix[100], f1[80], f2[80];
			const char *other;

			if (sscanf(x->lines[i], "stage %79s", name) != 1)
				continue;
			snprintf(prefix, sizeof(prefix), "stage %s", name);
			other = find(y, prefix);
			if (!other) {
				snprintf(buf, sizeof(buf), "stage %s: %s", name,
					 pass ? "new" : "removed");
				add(&o, buf);
				continue;
			}
			if (pass)
				continue;
			field(x->lines[i], "op", f1, sizeof(f1));
			field(other, "op", f2, sizeof(f2));
			if (strcmp(f1, f2)) {
				snprintf(buf, sizeof(buf), "stage %s: op %s → %s", name, f1, f2);
				add(&o, buf);
				continue;
			}
			field(x->lines[i], "width", f1, sizeof(f1));
			field(other, "width", f2, sizeof(f2));
			if (strcmp(f1, f2)) {
				snprintf(buf, sizeof(buf), "stage %s: width %s → %s", name, f1, f2);
				add(&o, buf);
			}
			field(x->lines[i], "rule", f1, sizeof(f1));
			field(other, "rule", f2, sizeof(f2));
			if (strcmp(f1, f2)) {
				snprintf(buf, sizeof(buf), "stage %s: per-worker rule %s → %s", name,
					 f1, f2);
				add(&o, buf);
			}
		}
	}
	for (int pass = 0; pass < 2; pass++) { /* params and edges */
		const struct topo *x = pass ? &b : &a, *y = pass ? &a : &b;

		for (uint32_t i = 0; i < x->n; i++) {
			char s1[80], s2[100], prefix[200];
			const char *other;

			if (param_diff_line(&o, x->lines[i], y, pass, NULL))
				continue;
			if (sscanf(x->lines[i], "plugin %79s", s1) == 1) {
				plugin_diff(&o, x->lines[i], y, s1, pass);
				continue;
			}
			if (sscanf(x->lines[i], "edge %79s %79s", s1, s2) == 2) {
				snprintf(prefix, sizeof(prefix), "edge %s %s", s1, s2);
				other = find(y, prefix);
				if (!other) {
					snprintf(buf, sizeof(buf), "edge %s → %s: %s", s1, s2,
						 pass ? "new" : "removed");
					add(&o, buf);
				} else if (!pass && strcmp(other, x->lines[i])) {
					snprintf(buf, sizeof(buf), "edge %s → %s: %s → %s", s1, s2,
						 strrchr(x->lines[i], ' ') + 1, strrchr(other, ' ') + 1);
					add(&o, buf);
				}
			}
		}
	}
	free_lines(&a);
	free_lines(&b);
	if (o.err) {
		free(o.p);
		return o.err;
	}
	if (!o.p)
		o.p = strdup("the topologies differ");
	*msg = o.p;
	return o.p ? 0 : -ENOMEM;
}

int shmrun_fingerprint_plugin_state(const char *text, const char *stage, char *buf, size_t len)
{
	size_t n = strlen(stage);

	buf[0] = '\0';
	for (const char *l = text; l && *l;) {
		const char *nl = strchr(l, '\n');

		if (strncmp(l, "plugin ", 7) == 0 && strncmp(l + 7, stage, n) == 0 && l[7 + n] == ' ') {
			const char *v = l + 8 + n, *end = strstr(v, " path=");

			if (!end || (nl && end > nl))
				return 0;
			snprintf(buf, len, "%.*s", (int)(end - v), v);
			return 1;
		}
		l = nl ? nl + 1 : NULL;
	}
	return 0;
}

int shmrun_stage_plugin_state(const struct shmrun_stage *st, char *buf, size_t len)
{
	const struct shmrun_plugin_info *pi = shmrun_operator_plugin(st->op);

	buf[0] = '\0';
	if (!pi)
		return 0;
	if (st->op->state_version)
		snprintf(buf, len, "state=%s", st->op->state_version);
	else
		snprintf(buf, len, "version=%s", pi->version);
	return 1;
}
