/*
 * runtime/conf.c: topology.conf -> struct shmrun_job, with every check that can
 * be made before a process starts, and a message a person can act on for each.
 *
 * What it is for. `shmrun check|plan|run topology.conf` all start here. The
 * file is INI (docs/design.md §7): a [job] section and one section per stage. What
 * comes out is a job whose every value is typed, in range and resolved (paths
 * against the conf file's directory), whose graph is acyclic, reachable from a
 * source and drained by a sink, with every edge's kind decided and a
 * topological order computed. Everything after this file trusts the job.
 *
 * Pipeline, in three passes over the file's contents:
 *
 *     file --read_line()--> inih --on_key()--> sections[] (name, line, key/values)
 *          syntax, [sections]                 duplicates
 *     sections[] --load_job()--> [job] keys   --load_stage()--> ops, widths, params
 *     stages --load_graph()--> edges, cycles, sources, sinks, topo order
 *
 * One file per pass, sharing struct loader through conf_internal.h:
 *
 *     conf.c        the entry points, load_all() running the passes in order,
 *                   the messages and the typo suggestions
 *     conf_ini.c    pass 1: read_line() and on_key(), lines -> sections
 *     conf_value.c  strict numbers, CPU lists, check_value() and load_params():
 *                   a key's text -> a typed value
 *     conf_job.c    pass 2: [job] (workers, cpus, checkpoints) and the stages
 *     conf_graph.c  pass 3: `input =` -> edges, cycles, sources, sinks, order
 *
 * Every pass records errors and carries on, so one run of `shmrun check` lists
 * all of them; the messages are sorted by line at the end. Every message is
 * "file:line: what is wrong; what to do", the line being that of the
 * offending key, or of the section header when the problem is the section.
 *
 * Why a custom inih reader. inih (Debian's build) has no line numbers in its
 * handler, stops a line at 200 bytes, and reports only the first syntax error.
 * read_line() hands inih one physical line at a time, so the line it counts
 * is the line the handler is called for; it strips indentation, classifies the
 * line the way inih will (comment, [section], key = value) and reports every
 * malformed or over-long line itself, passing inih an empty line in its place.
 * It also records section headers, which inih does not report: a section with
 * no keys still exists, and duplicate sections are caught at their header line.
 *
 * Continuation lines. An indented line that does not itself read as a key
 * line (`name =`), a comment or a section header continues the previous key's
 * value: read_line() appends it, after one blank, to the value on_key() stored
 * last, and hands inih an empty line. Debian builds inih with multi-line
 * values on, but inih would call the handler once per continuation line with
 * the same key (our duplicate-key check) and still cut each line at 200
 * bytes; done here, a long `path =` list may span any number of lines of any
 * length, and an indented `key = value` stays an ordinary key as it always was.
 *
 * Overrides (`--set SECTION.KEY=VALUE`, shmrun_job_load_set()). They are
 * applied between pass 1 and pass 2 (apply_overrides() in conf_ini.c), as
 * key/values of the sections read from the file, so every later check
 * treats them as the file's own lines. Each is stored with a negative line,
 * OVR_LINE(k): messages name it ("--set count.width=x: ...") instead of
 * file:line, and check_value() resolves a relative path in it against the
 * current directory. The loaded job stores such lines as 0
 * (clear_override_lines()). Rejected: rewriting the file's text with the
 * overrides (a temporary file) — messages would name lines of a file the
 * user never saw; applying them to the loaded job — every check of pass 2
 * and 3 (ranges, graph, widths <= vnodes) would have to run again.
 *
 * Keys are declared as data (struct shmrun_param_def): the operators' tables in
 * runtime/ops/, and job_keys[] and stage_keys[] in conf_job.c. One checker,
 * check_value(), turns text into typed values for all of them, so `3x`, `-1`,
 * ` 5`, overflow and unknown units fail the same way everywhere.
 *
 * Rejected designs.
 *   - Looking keys up as the handler sees them (inih's usual style): it cannot
 *     report a missing required key, a key that depends on another section
 *     (width <= [job] vnodes, wherever [job] sits), or a graph error.
 *   - Stopping at the first error: a user fixing a file one error per run is a
 *     user who stops reading the errors.
 *   - Lenient numbers (strtoull): accepts " 5", "-1" (as 2^64-1) and "5x".
 */
#include <errno.h>
#include <sys/stat.h>
#include <ini.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ctype.h>
#include <unistd.h>

#include "conf_internal.h"
#include "util.h"

/* ------------------------------------------------------------------------ */
/* Messages */

static void msg_vadd(struct loader *ld, struct msgs *m, int line, const char *fmt, va_list ap)
{
	char *body = NULL, *full = NULL;
	int r;

	if (vasprintf(&body, fmt, ap) < 0)
		goto err_nomem;
	for (char *c = body; *c; c++) /* a message never echoes control bytes */
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	if (line < 0) /* an override: named as given, not by a line of the file */
		r = asprintf(&full, "--set %s: %s", ld->sets[OVR_INDEX(line)], body);
	else if (line > 0)
		r = asprintf(&full, "%s:%d: %s", ld->path, line, body);
	else
		r = asprintf(&full, "%s: %s", ld->path, body);
	free(body);
	if (r < 0)
		goto err_nomem;
	if (m->n == m->cap) {
		uint32_t tcap = m->cap, lcap = m->cap;

		if (shmrun_grow_u32(&m->text, &tcap, (size_t)m->n + 1, sizeof(*m->text), 8) ||
		    shmrun_grow_u32(&m->line, &lcap, (size_t)m->n + 1, sizeof(*m->line), 8))
			goto err_free;
		m->cap = lcap;
	}
	m->text[m->n] = full;
	m->line[m->n] = line;
	m->n++;
	return;

err_free:
	free(full);
err_nomem:
	ld->nomem = true;
}

void __attribute__((format(printf, 3, 4)))
errorf(struct loader *ld, int line, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	msg_vadd(ld, &ld->errs, line, fmt, ap);
	va_end(ap);
}

void __attribute__((format(printf, 3, 4)))
warnf(struct loader *ld, int line, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	msg_vadd(ld, &ld->warns, line, fmt, ap);
	va_end(ap);
}

static void msgs_free(struct msgs *m)
{
	for (uint32_t i = 0; i < m->n; i++)
		free(m->text[i]);
	free(m->text);
	free(m->line);
	memset(m, 0, sizeof(*m));
}

/* Where a message sorts: by line; the overrides' (negative lines) last, in the order given. */
static int64_t msg_order(int line)
{
	return line < 0 ? (int64_t)INT32_MAX - line : line;
}

/* Stable sort of the messages by line (insertion sort: lists are short). */
static void msgs_sort(struct msgs *m)
{
	for (uint32_t i = 1; i < m->n; i++) {
		char *t = m->text[i];
		int l = m->line[i];
		uint32_t j = i;

		for (; j > 0 && msg_order(m->line[j - 1]) > msg_order(l); j--) {
			m->text[j] = m->text[j - 1];
			m->line[j] = m->line[j - 1];
		}
		m->text[j] = t;
		m->line[j] = l;
	}
}

/* Hand the texts over to a plain array (the line array is freed). */
static void msgs_take(struct msgs *m, char ***text, uint32_t *n)
{
	msgs_sort(m);
	*text = m->text;
	*n = m->n;
	free(m->line);
	memset(m, 0, sizeof(*m));
}

/* ------------------------------------------------------------------------ */
/* Suggestions: the nearest known word by edit distance */

/* Optimal string alignment distance (transpositions count 1), ASCII case-folded. */
unsigned edit_distance(const char *a, const char *b)
{
	enum { MAXLEN = 64 };
	unsigned d[MAXLEN + 1][MAXLEN + 1];
	size_t la = strlen(a), lb = strlen(b);

	if (la > MAXLEN || lb > MAXLEN)
		return UINT32_MAX;
	for (size_t i = 0; i <= la; i++)
		d[i][0] = (unsigned)i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = (unsigned)j;
	for (size_t i = 1; i <= la; i++) {
		for (size_t j = 1; j <= lb; j++) {
			int ca = tolower((unsigned char)a[i - 1]),
			    cb = tolower((unsigned char)b[j - 1]);
			unsigned cost = ca != cb, v = d[i - 1][j - 1] + cost;

			if (d[i - 1][j] + 1 < v)
				v = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < v)
				v = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) &&
			    tolower((unsigned char)a[i - 2]) == cb && d[i - 2][j - 2] + 1 < v)
				v = d[i - 2][j - 2] + 1;
			d[i][j] = v;
		}
	}
	return d[la][lb];
}

/* The candidate nearest to @word if it is near enough to be a typo, else NULL. */
const char *nearest(const char *word, const char *const *cands, uint32_t n)
{
	size_t len = strlen(word);
	unsigned limit = len <= 3 ? 1 : len <= 6 ? 2 : 3, best = UINT32_MAX;
	const char *found = NULL;

	for (uint32_t i = 0; i < n; i++) {
		unsigned dist = edit_distance(word, cands[i]);

		if (dist < best) {
			best = dist;
			found = cands[i];
		}
	}
	return best <= limit ? found : NULL;
}

/* "a, b, c" into @buf (truncated with "..." if it does not fit). */
const char *join_words(char *buf, size_t len, const char *const *w, uint32_t n)
{
	size_t off = 0;

	buf[0] = '\0';
	for (uint32_t i = 0; i < n; i++) {
		int r = snprintf(buf + off, len - off, "%s%s", i ? ", " : "", w[i]);

		if (r < 0 || (size_t)r >= len - off) {
			if (len > 4)
				strcpy(buf + len - 4, "...");
			break;
		}
		off += (size_t)r;
	}
	return buf;
}

/* Keys of a NULL-terminated table appended to @out (at most @max in all). */
uint32_t table_keys(const struct shmrun_param_def *t, const char **out, uint32_t n,
			   uint32_t max)
{
	for (; t && t->key && n < max; t++)
		out[n++] = t->key;
	return n;
}

/* ------------------------------------------------------------------------ */
/* Entry points */

static void loader_free(struct loader *ld)
{
	for (uint32_t i = 0; i < ld->nsec; i++) {
		for (uint32_t j = 0; j < ld->sec[i].nkv; j++) {
			free(ld->sec[i].kv[j].key);
			free(ld->sec[i].kv[j].value);
		}
		free(ld->sec[i].kv);
		free(ld->sec[i].name);
	}
	free(ld->sec);
	free(ld->buf);
	free(ld->refused);
	free(ld->stage_sec);
	free(ld->input);
	free(ld->width_ok);
	free(ld->cwd);
	msgs_free(&ld->errs);
	msgs_free(&ld->warns);
}

/* The directory relative paths resolve against: absolute, symlinks resolved. */
static char *conf_dir_of(const char *path)
{
	char *copy = strdup(path), *dir, *real = NULL;

	if (!copy)
		return NULL;
	dir = dirname(copy);
	real = realpath(dir, NULL);
	if (!real)
		real = strdup(dir);
	free(copy);
	return real;
}

static int load_all(struct loader *ld)
{
	struct shmrun_job *job = ld->job;
	int r;

	r = ini_parse_stream(read_line, ld, on_key, ld);
	if (ld->nomem || r == -2)
		return -ENOMEM;
	if (ld->too_big)
		return -EFBIG;
	if (ld->read_err) {
		errorf(ld, 0, "read error after line %d: %s", ld->lineno, strerror(ld->read_err));
		return -ld->read_err;
	}
	if (r > 0) {
		bool seen = false;

		for (uint32_t i = 0; i < ld->errs.n && !seen; i++)
			seen = ld->errs.line[i] == r;
		if (!seen)
			errorf(ld, r, "syntax error");
	}
	r = apply_overrides(ld);
	if (r)
		return r;

	ld->job_sec = -1;
	for (uint32_t i = 0; i < ld->nsec; i++)
		if (strcmp(ld->sec[i].name, "job") == 0)
			ld->job_sec = (int)i;
	job->nstages = ld->nsec - (ld->job_sec >= 0);
	job->stages = calloc(job->nstages ? job->nstages : 1, sizeof(*job->stages));
	ld->stage_sec = calloc(job->nstages ? job->nstages : 1, sizeof(*ld->stage_sec));
	ld->input = calloc(job->nstages ? job->nstages : 1, sizeof(*ld->input));
	ld->width_ok = calloc(job->nstages ? job->nstages : 1, sizeof(*ld->width_ok));
	if (!job->stages || !ld->stage_sec || !ld->input || !ld->width_ok)
		return -ENOMEM;
	for (uint32_t i = 0, k = 0; i < ld->nsec; i++)
		if ((int)i != ld->job_sec)
			ld->stage_sec[k++] = &ld->sec[i];

	probe_cpus(ld);
	r = load_job(ld);
	if (r)
		return r;
	ld->ops_ok = true;
	for (uint32_t i = 0; i < job->nstages; i++) {
		r = load_stage(ld, i);
		if (r)
			return r;
	}
	check_sources(ld);
	r = load_graph(ld);
	if (r)
		return r;
	for (uint32_t i = 0; i < ld->nrefused; i++) { /* keys no table knows */
		char what[MAX_NAME_LEN + 16];

		report_refused(ld, &ld->refused[i], NULL,
			       section_what(ld, &ld->sec[ld->refused[i].sec], what, sizeof(what)));
	}
	return ld->nomem ? -ENOMEM : 0;
}

/*
 * A loaded job keeps the line of every key for later messages ("file:line:"
 * of preflight, prepare and the tasks). A key set by --set has no line of
 * the file: it is stored as 0, "not from a line", as a default is, so those
 * messages point at the stage's section instead of a negative line.
 */
static void clear_override_lines(struct shmrun_job *job)
{
	for (uint32_t i = 0; i < job->nstages; i++) {
		struct shmrun_stage *st = &job->stages[i];

		for (uint32_t j = 0; j < st->nparams; j++)
			if (st->params[j].line < 0)
				st->params[j].line = 0;
		if (st->combine_line < 0)
			st->combine_line = 0;
		if (st->watermark_line < 0)
			st->watermark_line = 0;
	}
	for (uint32_t e = 0; e < job->nedges; e++)
		if (job->edges[e].line < 0)
			job->edges[e].line = 0;
	if (job->checkpoint_dir_line < 0)
		job->checkpoint_dir_line = 0;
	if (job->metrics_line < 0)
		job->metrics_line = 0;
	if (job->hosts_line < 0)
		job->hosts_line = 0;
}

/*
 * Load from the open stream @f (taken: closed here) named @name in messages,
 * relative paths resolving against @dir (copied). shmrun_job_load() of "-"
 * and shmrun_job_load_mem() (the fuzz harness, tests/fuzz/) come here.
 */
static int load_stream(struct loader *ld, FILE *f, const char *name, const char *dir,
		       struct shmrun_job *job, struct shmrun_job_errors *errs)
{
	int r;

	ld->path = name;
	ld->cur = CUR_NONE;
	ld->cont = CONT_NONE;
	ld->job_sec = -1;
	ld->job = job;
	ld->f = f;
	job->conf_path = strdup(name);
	job->conf_dir = dir ? strdup(dir) : NULL;
	if (!job->conf_path || !job->conf_dir) {
		r = -ENOMEM;
		goto err_close;
	}
	r = load_all(ld);
	if (!r && ld->errs.n)
		r = -EINVAL;
	if (r)
		goto err_close;
	fclose(ld->f);
	clear_override_lines(job);
	msgs_take(&ld->warns, &job->warnings, &job->nwarnings);
	loader_free(ld);
	return 0;

err_close:
	fclose(ld->f);
	shmrun_job_free(job);
	if (ld->nomem && r != -ENOMEM)
		r = -ENOMEM;
	msgs_take(&ld->errs, &errs->msgs, &errs->n);
	loader_free(ld);
	return r;
}

/*
 * shmrun_job_load() of "-": the topology from standard input, named "<stdin>"
 * in messages; relative paths resolve against the current directory.
 */
static int load_stdin(struct loader *ld, struct shmrun_job *job, struct shmrun_job_errors *errs)
{
	int fd = dup(STDIN_FILENO), r;
	char *cwd;
	FILE *f;

	ld->path = SHMRUN_STDIN_NAME;
	f = fd >= 0 ? fdopen(fd, "re") : NULL;
	if (!f) {
		r = -errno;
		errorf(ld, 0, "cannot read standard input: %s", strerror(-r));
		if (fd >= 0)
			close(fd);
		shmrun_job_free(job);
		msgs_take(&ld->errs, &errs->msgs, &errs->n);
		loader_free(ld);
		return r;
	}
	cwd = getcwd(NULL, 0);
	r = load_stream(ld, f, SHMRUN_STDIN_NAME, cwd, job, errs);
	free(cwd);
	return r;
}

int shmrun_job_load_mem(const char *name, const char *dir, const void *text, size_t len,
			struct shmrun_job *job, struct shmrun_job_errors *errs)
{
	struct loader ld;
	FILE *f;

	memset(job, 0, sizeof(*job));
	memset(errs, 0, sizeof(*errs));
	memset(&ld, 0, sizeof(ld));
	ld.path = name;
	if (len > CONF_MAX_BYTES) {
		errorf(&ld, 0, "is %zu bytes, too large for a topology (at most 16 MiB)", len);
		msgs_take(&ld.errs, &errs->msgs, &errs->n);
		loader_free(&ld);
		return -EFBIG;
	}
	/* fmemopen() of 0 bytes is refused (EINVAL): an empty text reads as /dev/null */
	f = len ? fmemopen((void *)(uintptr_t)text, len, "r") : fopen("/dev/null", "re");
	if (!f) {
		int r = -errno;

		msgs_take(&ld.errs, &errs->msgs, &errs->n);
		loader_free(&ld);
		return r;
	}
	return load_stream(&ld, f, name, dir, job, errs);
}

int shmrun_job_load(const char *path, struct shmrun_job *job, struct shmrun_job_errors *errs)
{
	return shmrun_job_load_set(path, NULL, 0, job, errs);
}

int shmrun_job_load_set(const char *path, const char *const *sets, uint32_t nsets,
			struct shmrun_job *job, struct shmrun_job_errors *errs)
{
	struct loader ld;
	int r;

	memset(job, 0, sizeof(*job));
	memset(errs, 0, sizeof(*errs));
	memset(&ld, 0, sizeof(ld));
	ld.sets = sets;
	ld.nsets = nsets;
	ld.path = strcmp(path, "-") == 0 ? SHMRUN_STDIN_NAME : path; /* for the message below */
	/* an override's relative path resolves against the current directory */
	ld.cwd = nsets ? getcwd(NULL, 0) : NULL;
	if (nsets && !ld.cwd) {
		r = -errno;
		errorf(&ld, 0, "cannot read the current directory (for --set paths): %s",
		       strerror(errno));
		goto err_free;
	}
	if (strcmp(path, "-") == 0)
		return load_stdin(&ld, job, errs);
	ld.path = path;
	ld.cur = CUR_NONE;
	ld.cont = CONT_NONE;
	ld.job_sec = -1;
	ld.job = job;

	{
		struct stat st;

		/* a FIFO would block and /dev/zero never end: regular files only */
		if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
			r = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
			errorf(&ld, 0, "is not a regular file (%s); give the path of a "
				       "topology.conf file",
			       S_ISDIR(st.st_mode) ? "a directory" : "a FIFO, socket or device");
			goto err_free;
		}
		if (stat(path, &st) == 0 && st.st_size > CONF_MAX_BYTES) {
			r = -EFBIG;
			errorf(&ld, 0, "is %lld bytes, too large for a topology (at most 16 MiB)",
			       (long long)st.st_size);
			goto err_free;
		}
	}
	ld.f = fopen(path, "re");
	if (!ld.f) {
		int e = errno;

		r = -e;
		errorf(&ld, 0, "cannot open: %s", strerror(e));
		goto err_free;
	}
	job->conf_path = strdup(path);
	job->conf_dir = conf_dir_of(path);
	if (!job->conf_path || !job->conf_dir) {
		r = -ENOMEM;
		goto err_close;
	}
	r = load_all(&ld);
	if (r)
		goto err_close;
	if (ld.errs.n) {
		r = -EINVAL;
		goto err_close;
	}
	fclose(ld.f);
	clear_override_lines(job);
	msgs_take(&ld.warns, &job->warnings, &job->nwarnings);
	loader_free(&ld);
	return 0;

err_close:
	fclose(ld.f);
err_free:
	shmrun_job_free(job);
	if (ld.nomem && r != -ENOMEM)
		r = -ENOMEM;
	msgs_take(&ld.errs, &errs->msgs, &errs->n);
	loader_free(&ld);
	return r;
}

void shmrun_job_free(struct shmrun_job *job)
{
	for (uint32_t i = 0; job->stages && i < job->nstages; i++) {
		free(job->stages[i].name);
		params_free(job->stages[i].params, job->stages[i].nparams);
	}
	free(job->stages);
	for (uint32_t i = 0; i < job->nwarnings; i++)
		free(job->warnings[i]);
	free(job->warnings);
	free(job->conf_path);
	free(job->conf_dir);
	free(job->name);
	free(job->cpus);
	free(job->checkpoint_dir);
	free(job->checkpoint_dir_template);
	free(job->metrics);
	free(job->edges);
	free(job->topo);
	memset(job, 0, sizeof(*job));
}

void shmrun_job_errors_free(struct shmrun_job_errors *errs)
{
	for (uint32_t i = 0; i < errs->n; i++)
		free(errs->msgs[i]);
	free(errs->msgs);
	memset(errs, 0, sizeof(*errs));
}
