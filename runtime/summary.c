/*
 * runtime/summary.c: the summary file of a run (summary.h), `shmrun --summary
 * FILE`: one JSON document at exit, built with jansson.
 *
 * What it holds (docs/observability.md "The summary file" is the reference):
 * how the run ended (status, reason, exit status), the job's totals, each
 * stage's counters and each instance's, checkpoints, restarts, the restored
 * epoch, state sizes, and wall and CPU time. Every counter comes from the
 * metrics block (metrics.h): totals since the launcher started, so a job that
 * restarted from a checkpoint counts the records it replayed again, as
 * Flink's numRecordsIn does; "records_read" of a source stage and
 * "records_written" of a sink stage are what a person compares with the
 * input and the output.
 *
 * Invariants.
 *   - Written once, after every worker was reaped (the counters are final
 *     and getrusage(RUSAGE_CHILDREN) holds every worker's CPU time), on every
 *     way a started run ends; a run refused before it started writes none.
 *   - Atomic: FILE.tmp, fsync, rename. A reader sees the previous document or
 *     this one, never half of one.
 *   - The path was checked before anything started (shmrun_summary_check(),
 *     from cli.c): a run is never done before its summary is found unwritable.
 *
 * Rejected: hand-written JSON (escaping of names and causes, numbers); the
 * per-worker control-area counters (control.h), which a restart zeroes.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "metrics.h"
#include "plan.h"
#include "shmrun/job.h"
#include "shmrun/runtime.h"
#include "multihost.h"
#include "summary.h"

static const char *summary_file;

void shmrun_summary_set_path(const char *path)
{
	summary_file = path;
}

const char *shmrun_summary_path(void)
{
	return summary_file;
}

int shmrun_summary_check(const char *path, char *why, size_t why_len)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	struct stat st;

	if (!*path || strlen(path) + 5 > PATH_MAX) {
		snprintf(why, why_len, "--summary %s: %s", path,
			 *path ? "the path is too long" : "an empty path; name a file");
		return *path ? -ENAMETOOLONG : -ENOENT;
	}
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	if (stat(dir, &st) < 0) {
		int err = errno;

		snprintf(why, why_len,
			 "--summary %s: its directory %s %s; create it first or name a file in "
			 "an existing directory",
			 path, dir, err == ENOENT ? "does not exist" : strerror(err));
		return -err;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(why, why_len,
			 "--summary %s: %s is not a directory; name a file in a "
			 "directory",
			 path, dir);
		return -ENOTDIR;
	}
	if (access(dir, W_OK | X_OK) < 0) {
		snprintf(why, why_len,
			 "--summary %s: cannot create files in %s (%s); name a file in a "
			 "directory you may write",
			 path, dir, strerror(errno));
		return -EACCES;
	}
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		snprintf(why, why_len, "--summary %s: is a directory; name a file", path);
		return -EISDIR;
	}
	return 0;
}

/*
 * @path as "DIR/NAME" with DIR made absolute and free of links (realpath), so
 * two spellings of one place compare equal. Return: 0, or -errno of realpath.
 */
static int place(const char *path, char *out, size_t len)
{
	const char *slash = strrchr(path, '/');
	char dir[PATH_MAX], *real;

	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else
		snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int)(slash - path), path);
	real = realpath(dir, NULL);
	if (!real)
		return -errno;
	snprintf(out, len, "%s/%s", strcmp(real, "/") ? real : "", slash ? slash + 1 : path);
	free(real);
	return 0;
}

/* Whether @name is @base or @base.<digits> (an output of a wider stage). */
static bool output_name(const char *name, const char *base)
{
	size_t n = strlen(base);

	return strncmp(name, base, n) == 0 &&
	       (!name[n] || (name[n] == '.' && name[n + 1] &&
			     strspn(name + n + 1, "0123456789") == strlen(name + n + 1)));
}

/* Whether the places @sum and @out (of place()) are one directory, and @sum's
 * name is @out's or one of its PATH.<instance> names. */
static bool same_output(const char *sum, const char *out)
{
	const char *ss = strrchr(sum, '/'), *os = strrchr(out, '/');

	return ss - sum == os - out && strncmp(sum, out, (size_t)(ss - sum)) == 0 &&
	       output_name(ss + 1, os + 1);
}

int shmrun_summary_check_job(const char *path, const struct shmrun_job *job, char *why,
			     size_t why_len)
{
	char sum[2 * PATH_MAX], other[2 * PATH_MAX];
	struct stat a, b;

	if (place(path, sum, sizeof(sum)))
		return 0; /* shmrun_summary_check() said why */
	if (stat(path, &a) == 0 && stat(job->conf_path, &b) == 0 && a.st_dev == b.st_dev &&
	    a.st_ino == b.st_ino) {
		snprintf(why, why_len, "--summary %s is the topology file %s; name another file",
			 path, job->conf_path);
		return -EEXIST;
	}
	for (uint32_t s = 0; s < job->nstages; s++) {
		const struct shmrun_stage *st = &job->stages[s];

		for (uint32_t i = 0; i < st->nparams; i++) {
			const struct shmrun_param *p = &st->params[i];

			if (!p->value || p->def->io != SHMRUN_PARAM_OUTPUT ||
			    place(p->value, other, sizeof(other)) || !same_output(sum, other))
				continue;
			snprintf(why, why_len,
				 "--summary %s is an output of stage '%s' (%s = %s); name another "
				 "file",
				 path, st->name, p->def->key, p->value);
			return -EEXIST;
		}
	}
	return 0;
}

/* ------------------------------------------------------------------------ */

static json_t *seconds(uint64_t ns)
{
	return json_real((double)ns / 1e9);
}

/* The numbers of one task, or their sums over tasks, in one place. */
struct counts {
	uint64_t records_in, records_out, bytes_in, bytes_out, bad, late, state_bytes, keys;
	uint64_t busy_ns, idle_ns, backpressure_ns;
};

static void add_task(struct counts *c, const struct shmrun_metrics_task *t)
{
	c->records_in += SHMRUN_METRIC(t->records_in);
	c->records_out += SHMRUN_METRIC(t->records_out);
	c->bytes_in += SHMRUN_METRIC(t->bytes_in);
	c->bytes_out += SHMRUN_METRIC(t->bytes_out);
	c->bad += SHMRUN_METRIC(t->records_bad);
	c->late += SHMRUN_METRIC(t->records_late);
	c->state_bytes += SHMRUN_METRIC(t->state_bytes);
	c->keys += SHMRUN_METRIC(t->keys);
	c->busy_ns += SHMRUN_METRIC(t->busy_ns);
	c->idle_ns += SHMRUN_METRIC(t->idle_ns);
	c->backpressure_ns += SHMRUN_METRIC(t->backpressure_ns);
}

static void add_counts(struct counts *c, const struct counts *d)
{
	c->records_in += d->records_in;
	c->records_out += d->records_out;
	c->bytes_in += d->bytes_in;
	c->bytes_out += d->bytes_out;
	c->bad += d->bad;
	c->late += d->late;
	c->state_bytes += d->state_bytes;
	c->keys += d->keys;
	c->busy_ns += d->busy_ns;
	c->idle_ns += d->idle_ns;
	c->backpressure_ns += d->backpressure_ns;
}

/* The counters of @c into @o (json_object_set_new steals each value). */
static void put_counts(json_t *o, const struct counts *c)
{
	json_object_set_new(o, "records_in", json_integer((json_int_t)c->records_in));
	json_object_set_new(o, "records_out", json_integer((json_int_t)c->records_out));
	json_object_set_new(o, "bytes_in", json_integer((json_int_t)c->bytes_in));
	json_object_set_new(o, "bytes_out", json_integer((json_int_t)c->bytes_out));
	json_object_set_new(o, "records_bad", json_integer((json_int_t)c->bad));
	json_object_set_new(o, "records_late", json_integer((json_int_t)c->late));
	json_object_set_new(o, "state_bytes", json_integer((json_int_t)c->state_bytes));
	json_object_set_new(o, "keys", json_integer((json_int_t)c->keys));
	json_object_set_new(o, "busy_seconds", seconds(c->busy_ns));
	json_object_set_new(o, "idle_seconds", seconds(c->idle_ns));
	json_object_set_new(o, "backpressure_seconds", seconds(c->backpressure_ns));
}

/* "stages": per stage its name, operator, width, counters and instances. */
static json_t *stages_json(const struct shmrun_metrics *m, const struct shmrun_plan *plan,
			   struct counts *job_total, uint64_t *read, uint64_t *written)
{
	const struct shmrun_job *job = plan->job;
	json_t *arr = json_array();

	for (uint32_t s = 0; s < job->nstages && arr; s++) {
		const struct shmrun_stage *st = &job->stages[s];
		json_t *o = json_object(), *inst = json_array();
		struct counts sum = {0};

		json_object_set_new(o, "name", json_string(st->name));
		json_object_set_new(o, "op", json_string(st->op->name));
		json_object_set_new(o, "width", json_integer(st->width));
		for (uint32_t i = 0; m && i < st->width; i++) {
			const struct shmrun_metrics_task *t =
			    shmrun_metrics_task(m, plan->stage_task0[s] + i);
			struct counts one = {0};
			json_t *io = json_object();

			add_task(&one, t);
			add_task(&sum, t);
			json_object_set_new(io, "instance", json_integer(i));
			json_object_set_new(io, "worker", json_integer(t->worker));
			json_object_set_new(io, "cpu", json_integer(t->cpu));
			put_counts(io, &one);
			json_array_append_new(inst, io);
		}
		if (m) {
			put_counts(o, &sum);
			json_object_set_new(o, "instances", inst);
			add_counts(job_total, &sum);
			if (st->op->flags & SHMRUN_OP_SOURCE)
				*read += sum.records_in;
			if (st->op->flags & SHMRUN_OP_SINK)
				*written += sum.records_out;
		} else {
			json_decref(inst);
		}
		json_array_append_new(arr, o);
	}
	return arr;
}

static json_t *timeval_json(struct timeval tv)
{
	return json_real((double)tv.tv_sec + (double)tv.tv_usec / 1e6);
}

/* "cpu_seconds": the launcher's and its reaped children's user and system time. */
static json_t *cpu_json(void)
{
	struct rusage self, kids;
	struct timeval user, sys, total;
	json_t *o = json_object();

	if (getrusage(RUSAGE_SELF, &self) || getrusage(RUSAGE_CHILDREN, &kids))
		return json_null();
	timeradd(&self.ru_utime, &kids.ru_utime, &user);
	timeradd(&self.ru_stime, &kids.ru_stime, &sys);
	timeradd(&user, &sys, &total);
	json_object_set_new(o, "user", timeval_json(user));
	json_object_set_new(o, "system", timeval_json(sys));
	json_object_set_new(o, "total", timeval_json(total));
	json_object_set_new(o, "launcher", timeval_json(self.ru_utime));
	json_object_set_new(
	    o, "max_rss_kib",
	    json_integer(kids.ru_maxrss > self.ru_maxrss ? kids.ru_maxrss : self.ru_maxrss));
	return o;
}

/* CLOCK_REALTIME ns as "2026-12-02T03:04:05.678Z"; null for 0. */
static json_t *utc_json(int64_t ns)
{
	time_t t = (time_t)(ns / 1000000000);
	struct tm tm;
	char buf[64];

	if (ns <= 0 || !gmtime_r(&t, &tm))
		return json_null();
	snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		 (int)(ns / 1000000 % 1000));
	return json_string(buf);
}

static json_t *checkpoints_json(const struct shmrun_metrics *m)
{
	json_t *o = json_object();

	json_object_set_new(o, "completed",
			    json_integer((json_int_t)SHMRUN_METRIC(m->ckpt_completed)));
	json_object_set_new(o, "aborted", json_integer((json_int_t)SHMRUN_METRIC(m->ckpt_aborted)));
	json_object_set_new(o, "last_epoch",
			    json_integer((json_int_t)SHMRUN_METRIC(m->ckpt_epoch)));
	json_object_set_new(o, "last_duration_seconds",
			    seconds(SHMRUN_METRIC(m->ckpt_duration_ns)));
	json_object_set_new(o, "last_size_bytes",
			    json_integer((json_int_t)SHMRUN_METRIC(m->ckpt_bytes)));
	json_object_set_new(o, "last_at", utc_json(SHMRUN_METRIC(m->ckpt_wall_ns)));
	return o;
}

/* The document. Return: it (json_decref() it), or NULL (out of memory). */
static json_t *summary_json(const struct shmrun_metrics *m, const struct shmrun_plan *plan,
			    const struct shmrun_summary_end *end, int64_t wall_ns)
{
	const struct shmrun_job *job = plan->job;
	json_t *doc = json_object(), *totals = json_object();
	struct counts all = {0};
	uint64_t read = 0, written = 0;
	char reason[1400];

	if (!doc || !totals) {
		json_decref(doc);
		json_decref(totals);
		return NULL;
	}
	if (strcmp(end->status, "stopped") == 0)
		snprintf(reason, sizeof(reason), "stopped at epoch %" PRIu64, end->epoch);
	else if (strcmp(end->status, "failed") == 0)
		snprintf(reason, sizeof(reason), "failed: %s",
			 end->cause && end->cause[0] ? end->cause : "see the log");
	else if (strcmp(end->status, "signaled") == 0)
		snprintf(reason, sizeof(reason), "signal: %s%s%s", strsignal(end->signal),
			 end->cause && end->cause[0] ? "; " : "", end->cause ? end->cause : "");
	else
		snprintf(reason, sizeof(reason), "%s", end->status);
	json_object_set_new(doc, "job", json_string(job->name));
	json_object_set_new(doc, "conf", json_string(job->conf_path));
	json_object_set_new(doc, "status", json_string(end->status));
	json_object_set_new(doc, "reason", json_string(reason));
	json_object_set_new(doc, "exit_status", json_integer(end->exit_status));
	if (strcmp(end->status, "stopped") == 0)
		json_object_set_new(doc, "stopped_epoch", json_integer((json_int_t)end->epoch));
	if (end->cause && end->cause[0])
		json_object_set_new(doc, "cause", json_string(end->cause));
	if (end->signal)
		json_object_set_new(doc, "signal", json_integer(end->signal));
	json_object_set_new(doc, "workers", json_integer(job->workers));
	if (plan->hosts > 1) { /* the counts below are this host's workers' */
		json_object_set_new(doc, "hosts", json_integer(plan->hosts));
		json_object_set_new(doc, "host", json_integer(shmrun_host_self()));
	}
	json_object_set_new(doc, "wall_seconds", seconds((uint64_t)wall_ns));
	json_object_set_new(doc, "cpu_seconds", cpu_json());
	json_object_set_new(doc, "counters", json_boolean(m != NULL));
	json_object_set_new(doc, "stages", stages_json(m, plan, &all, &read, &written));
	if (m) {
		json_object_set_new(doc, "started_at", utc_json(m->started_wall_ns));
		json_object_set_new(doc, "restarts",
				    json_integer((json_int_t)SHMRUN_METRIC(m->restarts)));
		json_object_set_new(doc, "restored_epoch",
				    json_integer((json_int_t)SHMRUN_METRIC(m->restored_epoch)));
		json_object_set_new(doc, "checkpoints", checkpoints_json(m));
		json_object_set_new(totals, "records_read", json_integer((json_int_t)read));
		json_object_set_new(totals, "records_written", json_integer((json_int_t)written));
		json_object_set_new(totals, "records_bad", json_integer((json_int_t)all.bad));
		json_object_set_new(totals, "records_late", json_integer((json_int_t)all.late));
		json_object_set_new(totals, "state_bytes",
				    json_integer((json_int_t)all.state_bytes));
		json_object_set_new(totals, "keys", json_integer((json_int_t)all.keys));
		json_object_set_new(doc, "totals", totals);
	} else {
		json_decref(totals);
	}
	return doc;
}

/* Write @len bytes of @text to @fd. Return: 0 or -errno. */
static int write_all(int fd, const char *text, size_t len)
{
	while (len) {
		ssize_t n = write(fd, text, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		text += n;
		len -= (size_t)n;
	}
	return 0;
}

int shmrun_summary_write(const char *path, const struct shmrun_metrics *m,
			 const struct shmrun_plan *plan, const struct shmrun_summary_end *end,
			 int64_t wall_ns)
{
	json_t *doc = summary_json(m, plan, end, wall_ns);
	char tmp[PATH_MAX];
	char *text =
	    doc ? json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9))
		: NULL;
	int fd, err = 0;

	json_decref(doc);
	if (!text) {
		err = -ENOMEM;
		goto out;
	}
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp)) {
		err = -ENAMETOOLONG;
		goto out;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		err = -errno;
		goto out;
	}
	err = write_all(fd, text, strlen(text));
	if (!err)
		err = write_all(fd, "\n", 1);
	if (!err && fsync(fd) < 0)
		err = -errno;
	if (close(fd) < 0 && !err)
		err = -errno;
	if (!err && rename(tmp, path) < 0)
		err = -errno;
	if (err)
		unlink(tmp);
out:
	free(text);
	if (err)
		shmrun_log(SHMRUN_LOG_ERROR, "cannot write the summary file %s: %s", path,
			   strerror(-err));
	return err;
}
