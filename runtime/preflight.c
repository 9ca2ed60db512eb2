/*
 * runtime/preflight.c: the files a job reads and writes, checked and locked
 * before anything starts.
 *
 * What it is for. A run must not start when it is bound to fail or to harm
 * data, and what can be known before the start is refused then, with exit 2,
 * the conf's file:line and the path (docs/errors.md):
 *
 *   - An output is an input. Every PATH/PATHS key of an operator says what it
 *     names (struct shmrun_param_def.io): an input (file_source's path,
 *     lookup's table) or an output (file_sink's path; a stage of width k
 *     writes path.<instance>). An output (or checkpoint_dir) that is the same
 *     file as an input (same device and inode; for a file that does not exist
 *     yet, the same canonical path), that lies inside an input directory, or
 *     that an input's glob pattern matches, would be read while it is written:
 *     refused, naming both stages and keys. So is one output written by two
 *     stages. Plugin operators get the same check by declaring .io.
 *   - An output or checkpoint_dir cannot be written (read-only file system,
 *     permissions): refused with the path and the reason, instead of failing
 *     at the first checkpoint and restarting for nothing.
 *   - Another live run uses the same checkpoint_dir or writes the same
 *     output. Two runs would interleave their epochs and outputs (and one's
 *     STREAM_RESET_STATE=1 would move the other's checkpoints away). Each run
 *     holds an exclusive flock(2) for its whole life, restarts included, on
 *
 *         checkpoint_dir/.lock          (the checkpoint_dir)
 *         <dir>/.<name>.lock            (each output <dir>/<name>, whatever its width,
 *         <dir>/.<name>.<i>.lock         and, for width k, each file <name>.<i> it writes)
 *
 *     each holding the holder's pid. A second run is refused before it
 *     touches anything, naming that pid. A job without checkpoint_dir still
 *     locks its outputs; two jobs with different checkpoint_dirs writing one
 *     output exclude each other through the output's lock. The lock files
 *     stay (removing one would let a waiter lock a file no longer in the
 *     directory); they are empty of meaning once no process holds them.
 *     flock belongs to the open file: the launcher's descriptors are the
 *     only ones (workers close their inherited copies at once,
 *     shmrun_locks_forget()), so the locks end with the launcher, whatever
 *     kills it, and no stray child can keep them.
 *
 * Rejected: fcntl (POSIX) record locks — released when the process closes
 * any descriptor of the file, and not inherited, which makes them easy to
 * drop by accident; a lock on the output's directory — two jobs writing
 * different files of one directory are fine; writing a probe file to test
 * writability — it would modify directories a check must only look at
 * (access(2) with the effective ids answers the same question).
 */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "preflight.h"
#include "shmrun/operator.h"
#include "shmrun/runtime.h"

bool shmrun_errno_is_permanent(int err)
{
	return err == EACCES || err == EPERM || err == EROFS;
}

bool shmrun_errno_is_lasting(int err)
{
	return err == ENOSPC || err == EDQUOT;
}

/* One path a stage reads or writes, as the conf names it. */
struct io_path {
	char *what; /* "stage 'read' path" or "checkpoint_dir" */
	char *path; /* resolved (as the run opens it) */
	int line;
	bool pattern; /* an input with glob characters */
};

struct io_list {
	struct io_path *v;
	uint32_t n, cap;
};

static int io_add(struct io_list *l, const char *what, const char *path, size_t len, int line)
{
	if (l->n == l->cap) {
		uint32_t cap = l->cap ? l->cap * 2 : 16;
		struct io_path *v = realloc(l->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n].path = strndup(path, len);
	l->v[l->n].what = strdup(what);
	if (!l->v[l->n].path || !l->v[l->n].what) {
		free(l->v[l->n].path);
		free(l->v[l->n].what);
		return -ENOMEM;
	}
	l->v[l->n].line = line;
	l->v[l->n].pattern = strpbrk(l->v[l->n].path, "*?[") != NULL;
	l->n++;
	return 0;
}

static void io_free(struct io_list *l)
{
	for (uint32_t i = 0; i < l->n; i++) {
		free(l->v[i].path);
		free(l->v[i].what);
	}
	free(l->v);
}

/*
 * The canonical absolute form of @path, which need not exist: the longest
 * existing prefix through realpath(3), the rest appended as written (or
 * @path as written if that would not fit in @len bytes).
 */
static void canon(const char *path, char *out, size_t len)
{
	char head[PATH_MAX], real[PATH_MAX];
	const char *tail = "";
	char *slash;

	snprintf(head, sizeof(head), "%s", path);
	for (;;) {
		if (realpath(head[0] ? head : "/", real)) {
			int n = snprintf(out, len, "%s%s%s",
					 strcmp(real, "/") == 0 && *tail ? "" : real,
					 *tail ? "/" : "", tail);

			/* longer than a path can be: compare it as written */
			if (n < 0 || (size_t)n >= len)
				snprintf(out, len, "%s", path);
			return;
		}
		slash = strrchr(head, '/');
		if (!slash || slash == head) {
			snprintf(out, len, "%s", path);
			return;
		}
		*slash = 0;
		tail = path + (slash - head) + 1;
	}
}

/* @inner lies strictly inside directory @dir (both canonical). */
static bool inside(const char *inner, const char *dir)
{
	size_t n = strlen(dir);

	if (strcmp(dir, "/") == 0)
		return inner[0] == '/' && inner[1];
	return strncmp(inner, dir, n) == 0 && inner[n] == '/';
}

/* An input glob @pat matches @target (canonical), spelled either way. */
static bool pattern_matches(const char *pat, const char *target)
{
	const char *slash = strrchr(pat, '/');
	char dir[PATH_MAX], full[PATH_MAX + NAME_MAX + 2];

	if (fnmatch(pat, target, FNM_PATHNAME | FNM_PERIOD) == 0)
		return true;
	if (!slash || strpbrk(pat, "*?[") < slash)
		return false;
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - pat), pat);
	canon(dir[0] ? dir : "/", full, sizeof(full));
	snprintf(full + strlen(full), sizeof(full) - strlen(full), "%s", slash);
	return fnmatch(full, target, FNM_PATHNAME | FNM_PERIOD) == 0;
}

static int conf_line(const struct shmrun_job *job, const struct shmrun_stage *st,
		     const struct shmrun_param *p)
{
	(void)job;
	return p->line ? p->line : st->line;
}

/*
 * How @target relates to the input @in: 0 (apart), or a message fragment
 * in @rel ("is the same file as", ...).
 */
static bool overlaps(const char *target, const struct io_path *in, char *rel, size_t len)
{
	char ct[PATH_MAX], ci[PATH_MAX];
	struct stat st_t, st_i;
	bool t_exists;
	glob_t g = {0};
	bool hit = false;

	canon(target, ct, sizeof(ct));
	t_exists = stat(target, &st_t) == 0;
	if (in->pattern) {
		if (pattern_matches(in->path, ct)) {
			snprintf(rel, len, "matches the input pattern");
			return true;
		}
		if (glob(in->path, GLOB_NOSORT, NULL, &g) != 0)
			return false;
	}
	for (size_t k = 0; k < (in->pattern ? g.gl_pathc : 1) && !hit; k++) {
		const char *p = in->pattern ? g.gl_pathv[k] : in->path;

		if (stat(p, &st_i) < 0)
			continue;
		canon(p, ci, sizeof(ci));
		if ((t_exists && st_t.st_dev == st_i.st_dev && st_t.st_ino == st_i.st_ino) ||
		    strcmp(ct, ci) == 0) {
			snprintf(rel, len, "is the same %s as the input",
				 S_ISDIR(st_i.st_mode) ? "directory" : "file");
			hit = true;
		} else if (S_ISDIR(st_i.st_mode) && inside(ct, ci)) {
			snprintf(rel, len, "lies inside %s, an input directory", ci);
			hit = true;
		}
	}
	if (in->pattern)
		globfree(&g);
	return hit;
}

/*
 * @path (an output file or, @dir, a directory) can be created or written by
 * this process. Return: true, or false with the reason in @why.
 */
static bool writable(const char *path, bool dir, char *why, size_t len)
{
	char head[PATH_MAX];
	struct stat st;
	char *slash;

	if (stat(path, &st) == 0) {
		if (dir && !S_ISDIR(st.st_mode)) {
			snprintf(why, len, "it exists and is not a directory");
			return false;
		}
		if (!dir && S_ISDIR(st.st_mode)) {
			snprintf(why, len, "it is a directory");
			return false;
		}
		if (faccessat(AT_FDCWD, path, dir ? W_OK | X_OK : W_OK, AT_EACCESS) < 0) {
			snprintf(why, len, "%s %s is not writable: %s", dir ? "directory" : "file",
				 path, strerror(errno));
			return false;
		}
		if (dir)
			return true;
	}
	/* the nearest existing directory above it is where it gets created */
	snprintf(head, sizeof(head), "%s", path);
	while ((slash = strrchr(head, '/')) != NULL) {
		if (slash == head)
			slash[1] = 0;
		else
			*slash = 0;
		if (stat(head, &st) == 0)
			break;
		if (slash == head)
			break;
	}
	if (!slash)
		snprintf(head, sizeof(head), ".");
	if (stat(head, &st) < 0 || !S_ISDIR(st.st_mode)) {
		snprintf(why, len, "%s is not a directory", head);
		return false;
	}
	if (faccessat(AT_FDCWD, head, W_OK | X_OK, AT_EACCESS) < 0) {
		snprintf(why, len, "directory %s is not writable: %s", head, strerror(errno));
		return false;
	}
	return true;
}

/* Every input and output of @job, each output once per file the stage writes. */
static int collect(const struct shmrun_job *job, struct io_list *in, struct io_list *out)
{
	int err = 0;

	for (uint32_t s = 0; s < job->nstages && !err; s++) {
		const struct shmrun_stage *st = &job->stages[s];

		for (uint32_t i = 0; i < st->nparams && !err; i++) {
			const struct shmrun_param *p = &st->params[i];
			const char *v = p->value;
			char what[160];

			if (!v || p->def->io == SHMRUN_PARAM_IO_NONE)
				continue;
			snprintf(what, sizeof(what), "stage '%s' %s", st->name, p->def->key);
			if (p->def->io == SHMRUN_PARAM_INPUT) {
				while (*v && !err) {
					size_t n = strcspn(v, "\n");

					if (n)
						err = io_add(in, what, v, n, conf_line(job, st, p));
					v += n + (v[n] == '\n');
				}
				continue;
			}
			for (uint32_t k = 0; k < (st->width > 1 ? st->width : 1) && !err; k++) {
				char one[PATH_MAX + 16];

				snprintf(one, sizeof(one), st->width > 1 ? "%s.%u" : "%s", v, k);
				err = io_add(out, what, one, strlen(one), conf_line(job, st, p));
			}
		}
	}
	if (!err && job->checkpoint_dir)
		err = io_add(out, "checkpoint_dir", job->checkpoint_dir,
			     strlen(job->checkpoint_dir), job->checkpoint_dir_line);
	return err;
}

int shmrun_preflight(const struct shmrun_job *job)
{
	struct io_list in = {0}, out = {0};
	int failed = 0, err;

	err = collect(job, &in, &out);
	if (err) {
		failed = err;
		goto out;
	}
	for (uint32_t o = 0; o < out.n; o++) {
		const struct io_path *op = &out.v[o];
		bool ckpt = strcmp(op->what, "checkpoint_dir") == 0;
		char rel[PATH_MAX + 64], why[PATH_MAX + 128], co[PATH_MAX], cp[PATH_MAX];

		for (uint32_t i = 0; i < in.n; i++) {
			if (!overlaps(op->path, &in.v[i], rel, sizeof(rel)))
				continue;
			shmrun_log(
			    SHMRUN_LOG_ERROR,
			    "%s:%d: %s = %s %s of %s = %s (%s:%d): %s would be read while "
			    "it is written, and the input destroyed; choose %s outside every "
			    "input; nothing was started",
			    job->conf_path, op->line, op->what, op->path, rel, in.v[i].what,
			    in.v[i].path, job->conf_path, in.v[i].line,
			    ckpt ? "the checkpoint_dir" : "the output",
			    ckpt ? "a checkpoint_dir" : "an output path");
			failed = -EINVAL;
		}
		canon(op->path, co, sizeof(co));
		for (uint32_t p = 0; p < o; p++) {
			canon(out.v[p].path, cp, sizeof(cp));
			if (strcmp(co, cp) != 0 && !(ckpt && inside(cp, co)))
				continue;
			shmrun_log(SHMRUN_LOG_ERROR,
				   "%s:%d: %s = %s is also written by %s (%s:%d)%s; give each "
				   "output its own path; nothing was started",
				   job->conf_path, op->line, op->what, op->path, out.v[p].what,
				   job->conf_path, out.v[p].line,
				   strcmp(co, cp) ? ", inside the checkpoint_dir" : "");
			failed = -EINVAL;
		}
		if (!writable(op->path, ckpt, why, sizeof(why))) {
			shmrun_log(SHMRUN_LOG_ERROR,
				   "%s:%d: %s = %s cannot be written: %s; make it writable or "
				   "choose another path; nothing was started",
				   job->conf_path, op->line, op->what, op->path, why);
			failed = -EINVAL;
		}
	}
out:
	io_free(&in);
	io_free(&out);
	return failed;
}

/* ---- locks ------------------------------------------------------------------ */

struct lock {
	int fd;
	char *path;
};

static struct lock *locks;
static uint32_t nlocks;

/* mkdir -p @path. Return: 0, or -errno. */
static int make_dirs(const char *path)
{
	char buf[PATH_MAX];

	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	for (char *p = strchr(buf + 1, '/');; p = strchr(p + 1, '/')) {
		if (p)
			*p = 0;
		if (mkdir(buf, 0777) < 0 && errno != EEXIST)
			return -errno;
		if (!p)
			return 0;
		*p = '/';
	}
}

/*
 * Lock @path (created if missing) for this process. Return: 0 (also when
 * this process holds it already); -EBUSY with the holder's pid in @pid
 * ("unknown" if it wrote none yet); -errno.
 */
static int take_lock(const char *path, char *pid, size_t len)
{
	struct lock *n;
	ssize_t got;
	int fd;

	for (uint32_t i = 0; i < nlocks; i++)
		if (strcmp(locks[i].path, path) == 0)
			return 0;
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int err = errno == EWOULDBLOCK ? -EBUSY : -errno;

		got = pread(fd, pid, len - 1, 0);
		pid[got > 0 ? got : 0] = 0;
		pid[strcspn(pid, "\n")] = 0;
		if (!pid[0])
			snprintf(pid, len, "unknown");
		close(fd);
		/* one run names one file twice (two spellings): it holds it */
		if (err == -EBUSY && (pid_t)atol(pid) == getpid())
			return 0;
		return err;
	}
	n = realloc(locks, (nlocks + 1) * sizeof(*n));
	if (!n) {
		close(fd);
		return -ENOMEM;
	}
	locks = n;
	locks[nlocks].fd = fd;
	locks[nlocks].path = strdup(path);
	if (!locks[nlocks].path) {
		close(fd);
		return -ENOMEM;
	}
	nlocks++;
	if (ftruncate(fd, 0) == 0)
		dprintf(fd, "%ld\n", (long)getpid());
	return 0;
}

/* Lock @what = @target through the lock file @path; log a refusal. */
static int lock_one(const struct shmrun_job *job, int line, const char *what, const char *target,
		    const char *path)
{
	char pid[32];
	int err = take_lock(path, pid, sizeof(pid));

	if (err == -EBUSY)
		shmrun_log(SHMRUN_LOG_ERROR,
			   "%s:%d: %s = %s is in use by another run of shmrun (pid %s, holding "
			   "%s); two runs would corrupt %s. Wait for that run to end or stop it "
			   "(kill -TERM %s); nothing was started",
			   job->conf_path, line, what, target, pid, path,
			   strcmp(what, "checkpoint_dir") == 0 ? "its checkpoints" : "the output",
			   pid);
	else if (err)
		shmrun_log(SHMRUN_LOG_ERROR,
			   "%s:%d: %s = %s: cannot lock %s: %s; nothing was started",
			   job->conf_path, line, what, target, path, strerror(-err));
	return err;
}

int shmrun_lock_job(const struct shmrun_job *job)
{
	char path[PATH_MAX + NAME_MAX + 16];
	int err;

	if (job->checkpoint_dir) {
		err = make_dirs(job->checkpoint_dir);
		if (err) {
			shmrun_log(SHMRUN_LOG_ERROR,
				   "%s:%d: checkpoint_dir %s cannot be created: %s; nothing was "
				   "started",
				   job->conf_path, job->checkpoint_dir_line, job->checkpoint_dir,
				   strerror(-err));
			return err;
		}
		snprintf(path, sizeof(path), "%s/.lock", job->checkpoint_dir);
		err = lock_one(job, job->checkpoint_dir_line, "checkpoint_dir", job->checkpoint_dir,
			       path);
		if (err)
			return err;
	}
	for (uint32_t s = 0; s < job->nstages; s++) {
		const struct shmrun_stage *st = &job->stages[s];

		for (uint32_t i = 0; i < st->nparams; i++) {
			const struct shmrun_param *p = &st->params[i];
			const char *slash;
			char what[160], dir[PATH_MAX];

			if (!p->value || p->def->io != SHMRUN_PARAM_OUTPUT)
				continue;
			slash = strrchr(p->value, '/');
			if (slash)
				snprintf(dir, sizeof(dir), "%.*s",
					 (int)(slash - p->value) + (slash == p->value), p->value);
			else
				snprintf(dir, sizeof(dir), ".");
			err = make_dirs(dir);
			snprintf(path, sizeof(path), "%s%s.%s.lock", dir,
				 strcmp(dir, "/") == 0 ? "" : "/", slash ? slash + 1 : p->value);
			snprintf(what, sizeof(what), "stage '%s' %s", st->name, p->def->key);
			if (err) {
				shmrun_log(SHMRUN_LOG_ERROR,
					   "%s:%d: %s = %s: directory %s cannot be created: %s; "
					   "nothing was started",
					   job->conf_path, conf_line(job, st, p), what, p->value,
					   dir, strerror(-err));
				return err;
			}
			err = lock_one(job, conf_line(job, st, p), what, p->value, path);
			/* width k also writes path.<i>, which a job of width 1 may name */
			for (uint32_t k = 0; !err && st->width > 1 && k < st->width; k++) {
				snprintf(path, sizeof(path), "%s%s.%s.%u.lock", dir,
					 strcmp(dir, "/") == 0 ? "" : "/",
					 slash ? slash + 1 : p->value, k);
				err = lock_one(job, conf_line(job, st, p), what, p->value, path);
			}
			if (err)
				return err;
		}
	}
	return 0;
}

void shmrun_unlock_job(void)
{
	for (uint32_t i = 0; i < nlocks; i++) {
		close(locks[i].fd);
		free(locks[i].path);
	}
	free(locks);
	locks = NULL;
	nlocks = 0;
}

void shmrun_locks_forget(void)
{
	shmrun_unlock_job(); /* closes this process's copies; the launcher's stay */
}
