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
 *     yet, the same canonical path), that lies inside an input directory
 *     (existing or not), that an input's glob pattern matches, or that lies
 *     inside a directory the pattern matches or would match once the run
 *     creates it (file_source reads directories recursively), would be read
 *     while it is written: refused, naming both stages and keys. Input
 *     patterns are understood as file_source expands them: glob(3) with
 *     GLOB_BRACE, so braces (nested too) are expanded into alternatives
 *     first (brace_add()), each then matched with fnmatch(3). An output's
 *     lock files are checked the same way: no input may read them. So is one
 *     output written by two stages, an existing output that is not a regular
 *     file (no lock file is ever made beside /dev/null), and a path too long
 *     for its lock file. Plugin operators get the same check by declaring .io.
 *     Paths in messages are shortened in the middle (brief()), so that a
 *     message never loses its reason to a long path.
 *   - An output or checkpoint_dir cannot be written (read-only file system,
 *     permissions; a directory on a pseudo file system such as /proc, where
 *     nothing can be created whatever the permission bits say, which root
 *     passes; a missing directory behind a dangling symbolic link): refused
 *     with the path and the reason, instead of failing at the first
 *     checkpoint and restarting for nothing. Known without creating
 *     anything: the nearest existing directory is looked at (access(2),
 *     fstatfs(2)). Not known: space and quotas, a security module's
 *     (SELinux, AppArmor) refusal, a network file system's server-side
 *     rules, and changes between the check and the run.
 *   - Another live run uses the same checkpoint_dir or writes the same
 *     output. Two runs would interleave their epochs and outputs (and one's
 *     STREAM_RESET_STATE=1 would move the other's checkpoints away). Each run
 *     holds an exclusive flock(2) for its whole life, restarts included, on
 *
 *         checkpoint_dir/.lock          (the checkpoint_dir; with hosts > 1
 *                                        .lock.hH on host H, and host 0 .lock too)
 *         <dir>/.<name>.lock            (each output <dir>/<name>, whatever its width,
 *         <dir>/.<name>.<i>.lock         and, for width k, each file <name>.<i> it writes;
 *                                        with hosts > 1 only the instances on this
 *                                        host, .<name>.lock with instance 0)
 *
 *     each holding the holder's pid, and on each output file itself (its
 *     device and inode: the same file through a hard link is excluded too;
 *     the launcher creates it, empty, if missing, and holds it open; the
 *     sink then writes through its own descriptor, which flock does not
 *     hinder). A second run is refused before it touches anything, naming
 *     that pid (for the output file itself, from /proc/locks): every lock on
 *     what exists is tried first, and only then is what is missing created
 *     (checkpoint_dir 0700, output directories, lock files, outputs). A job without checkpoint_dir still
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
#include <sys/sysmacros.h>
#include <unistd.h>

#include "ckpt/ckpt_io.h"
#include "ops/input_check.h"
#include "internal.h"
#include "multihost.h"
#include "preflight.h"
#include "shmrun/placement.h"
#include "shmrun/operator.h"
#include "shmrun/runtime.h"
#include "util.h"

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
	char *lock[2]; /* an output's lock files (lock_path()); NULL if none or too long */
	bool lock_too_long; /* its lock file name would not fit NAME_MAX or PATH_MAX */
};

struct io_list {
	struct io_path *v;
	uint32_t n, cap;
};

static int io_add(struct io_list *l, const char *what, const char *path, size_t len, int line)
{
	if (shmrun_grow_u32(&l->v, &l->cap, (size_t)l->n + 1, sizeof(*l->v), 16))
		return -ENOMEM;
	l->v[l->n].path = strndup(path, len);
	l->v[l->n].what = strdup(what);
	if (!l->v[l->n].path || !l->v[l->n].what) {
		free(l->v[l->n].path);
		free(l->v[l->n].what);
		return -ENOMEM;
	}
	l->v[l->n].line = line;
	l->v[l->n].pattern = strpbrk(l->v[l->n].path, "*?[") != NULL;
	l->v[l->n].lock[0] = l->v[l->n].lock[1] = NULL;
	l->v[l->n].lock_too_long = false;
	l->n++;
	return 0;
}

static void io_free(struct io_list *l)
{
	for (uint32_t i = 0; i < l->n; i++) {
		free(l->v[i].path);
		free(l->v[i].what);
		free(l->v[i].lock[0]);
		free(l->v[i].lock[1]);
	}
	free(l->v);
}

/*
 * @path as a message shows it: whole up to BRIEF_MAX bytes, else its first
 * and last 60 bytes around "…", so that a message never loses its reason and
 * fix to a path of thousands of bytes (shmrun_log() keeps 4095 bytes).
 */
#define BRIEF_MAX 160
static const char *brief(const char *path, char buf[BRIEF_MAX])
{
	size_t n = strlen(path);

	if (n < BRIEF_MAX)
		return path;
	snprintf(buf, BRIEF_MAX, "%.60s…%s", path, path + n - 60);
	return buf;
}

/*
 * The lock file of the output @target: "<dir>/.<name>.lock", or, @inst >= 0,
 * "<dir>/.<name>.<inst>.lock" (the lock of the instance file <name>.<inst>).
 * Return: 0; -ENAMETOOLONG if the lock's name exceeds NAME_MAX or its path
 * PATH_MAX - 1 bytes (it needs 6 bytes more than the output: '.' and ".lock").
 */
static int lock_path(const char *target, long inst, char *buf, size_t len)
{
	const char *slash = strrchr(target, '/');
	const char *name = slash ? slash + 1 : target;
	int dir = slash ? (int)(slash - target) + 1 : 0;
	char suffix[24] = "";
	int n;

	if (inst >= 0)
		snprintf(suffix, sizeof(suffix), ".%ld", inst);
	if (strlen(name) + strlen(suffix) + 6 > NAME_MAX)
		return -ENAMETOOLONG;
	n = snprintf(buf, len, "%.*s.%s%s.lock", dir, target, name, suffix);
	if (n < 0 || (size_t)n >= len || n >= PATH_MAX)
		return -ENAMETOOLONG;
	return 0;
}

/* shmrun_brace_expand()'s emit for brace_add(): one alternative into a list. */
struct brace_to_list {
	struct io_list *l;
	const char *what;
	int line;
};

static int add_alternative(void *arg, const char *alt)
{
	struct brace_to_list *b = arg;

	return io_add(b->l, b->what, alt, strlen(alt), b->line);
}

/*
 * Add to @l every alternative of the brace pattern @pat (shmrun_brace_expand(),
 * util.h, as file_source expands it): "d/{a,b{1,2}}.txt" gives d/a.txt,
 * d/b1.txt, d/b2.txt. Each alternative may still hold *, ? and [..].
 * Return: 0; -E2BIG past SHMRUN_BRACE_MAX alternatives; -ENOMEM.
 */
static int brace_add(struct io_list *l, const char *what, const char *pat, int line,
		     uint32_t *count)
{
	struct brace_to_list b = {l, what, line};

	return shmrun_brace_expand(pat, add_alternative, &b, count);
}

/*
 * @real (canonical) followed by the components of @tail, with "." and empty
 * components dropped and ".." taking the last component off (never above
 * "/"), into @out. Return: false if it does not fit in @len bytes.
 */
static bool join_lexically(const char *real, const char *tail, char *out, size_t len)
{
	size_t n = (size_t)snprintf(out, len, "%s", strcmp(real, "/") == 0 ? "" : real);

	if (n >= len)
		return false;
	for (const char *c = tail; *c;) {
		const char *end = strchrnul(c, '/');
		size_t k = (size_t)(end - c);

		if (k == 2 && c[0] == '.' && c[1] == '.') {
			char *last = strrchr(out, '/');

			n = last ? (size_t)(last - out) : 0;
			out[n] = 0;
		} else if (k && !(k == 1 && c[0] == '.')) {
			if (n + 1 + k >= len)
				return false;
			out[n++] = '/';
			memcpy(out + n, c, k);
			n += k;
			out[n] = 0;
		}
		c = *end ? end + 1 : end;
	}
	if (!n)
		snprintf(out, len, "/");
	return true;
}

/*
 * The canonical absolute form of @path, which need not exist: the longest
 * existing prefix through realpath(3), the rest appended with "." and ".."
 * taken lexically (a directory that does not exist yet is made a real
 * directory by the run, so x/../f is f whether x exists or not; before this,
 * such a path was compared as written and slipped past every overlap check),
 * then canonicalised again, since taking ".." off may reach an existing
 * prefix, symlinks included. @path as written if it would not fit in @len.
 */
static void canon_at(const char *path, char *out, size_t len, int depth)
{
	char head[PATH_MAX], real[PATH_MAX], joined[PATH_MAX];
	const char *tail = "";
	char *slash;

	snprintf(head, sizeof(head), "%s", path);
	for (;;) {
		if (realpath(head[0] ? head : "/", real)) {
			if (!join_lexically(real, tail, joined, sizeof(joined)) ||
			    strlen(joined) >= len) {
				snprintf(out, len, "%s", path); /* compare it as written */
				return;
			}
			/* a tail with ".." may now lead through an existing
			 * prefix: once more (the new tail has no ".." left) */
			if (depth < 4 && strstr(tail, "..") && strcmp(joined, path) != 0)
				canon_at(joined, out, len, depth + 1);
			else
				snprintf(out, len, "%s", joined);
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

static void canon(const char *path, char *out, size_t len)
{
	canon_at(path, out, len, 0);
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
 * How @target relates to the input @in (one alternative of a brace pattern):
 * false (apart), or true with a message fragment in @rel ("is the same file
 * as", ...). A directory an input names or its pattern matches is read
 * recursively, so @target is refused inside one, also inside a directory
 * that does not exist yet but that the pattern would match once the run
 * creates it (an output's parent directory).
 */
static bool overlaps(const char *target, const struct io_path *in, char *rel, size_t len)
{
	char ct[PATH_MAX], ci[PATH_MAX], b[BRIEF_MAX];
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
		/* an ancestor directory the pattern matches, now or once created */
		for (char *slash = strrchr(ct, '/'); slash && slash > ct; slash = strrchr(ct, '/')) {
			*slash = 0;
			if (pattern_matches(in->path, ct)) {
				snprintf(rel, len, "lies inside %s, a directory the input pattern "
						   "matches (read recursively)",
					 brief(ct, b));
				return true;
			}
		}
		canon(target, ct, sizeof(ct));
		if (glob(in->path, GLOB_NOSORT, NULL, &g) != 0)
			return false;
	}
	for (size_t k = 0; k < (in->pattern ? g.gl_pathc : 1) && !hit; k++) {
		const char *p = in->pattern ? g.gl_pathv[k] : in->path;
		bool i_exists = stat(p, &st_i) == 0;

		canon(p, ci, sizeof(ci));
		if ((t_exists && i_exists && st_t.st_dev == st_i.st_dev &&
		     st_t.st_ino == st_i.st_ino) ||
		    strcmp(ct, ci) == 0) {
			snprintf(rel, len, "is the same %s as the input",
				 i_exists && S_ISDIR(st_i.st_mode) ? "directory" : "file");
			hit = true;
		} else if ((!i_exists || S_ISDIR(st_i.st_mode)) && inside(ct, ci)) {
			/* a missing input directory would be created by the run itself */
			snprintf(rel, len, "lies inside %s, an input directory", brief(ci, b));
			hit = true;
		}
	}
	if (in->pattern)
		globfree(&g);
	return hit;
}

/*
 * Files and directories can be created in the existing directory @dir by
 * anyone: it is not on a pseudo file system (procfs, sysfs, cgroupfs, ...:
 * shmrun_pseudo_fs()), where creating fails whatever the permission bits say
 * (root passes every access(2) test there: mkdir /proc/x gives ENOENT) or
 * makes a kernel object (a cgroup) instead of a directory. Return: true, or
 * false with the reason in @why. A directory that cannot be opened is left
 * to the access(2) test and to the run.
 */
static bool creatable_in(const char *dir, char *why, size_t len)
{
	char b[BRIEF_MAX];
	const char *pseudo;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return true;
	pseudo = shmrun_pseudo_fs(fd);
	close(fd);
	if (!pseudo)
		return true;
	snprintf(why, len,
		 "directory %s is on a pseudo file system (%s), where no file or directory "
		 "can be created",
		 brief(dir, b), pseudo);
	return false;
}

/*
 * @path (an output file or, @dir, a directory) can be created or written by
 * this process. Return: true, or false with the reason in @why.
 */
static bool writable(const char *path, bool dir, char *why, size_t len)
{
	char head[PATH_MAX], b[BRIEF_MAX];
	struct stat st;
	char *slash;

	if (stat(path, &st) == 0) {
		if (!dir && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
			/* no lock file is ever made beside it (/dev/.null.lock) */
			snprintf(why, len, "it is %s, not a regular file; an output is a regular "
					   "file (write to a file, then copy it where it must go)",
				 shmrun_file_kind(st.st_mode));
			return false;
		}
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
				 brief(path, b), strerror(errno));
			return false;
		}
		if (dir)
			return creatable_in(path, why, len);
	} else if (errno == ENOENT && lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
		/* the run would lock and open it through the link and find nothing */
		snprintf(why, len,
			 "it is a symbolic link to a missing target (create the target)");
		return false;
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
		/* S_ISLNK: not a directory that appeared between the two calls
		 * (another host of the job making its own {host} directory) */
		if (errno == ENOENT && lstat(head, &st) == 0 && S_ISLNK(st.st_mode)) {
			/* mkdir -p would find it there (EEXIST) and not a directory */
			snprintf(why, len, "%s is a symbolic link to a missing target",
				 brief(head, b));
			return false;
		}
		if (slash == head)
			break;
	}
	if (!slash)
		snprintf(head, sizeof(head), ".");
	if (stat(head, &st) < 0 || !S_ISDIR(st.st_mode)) {
		snprintf(why, len, "%s is not a directory", brief(head, b));
		return false;
	}
	if (faccessat(AT_FDCWD, head, W_OK | X_OK, AT_EACCESS) < 0) {
		snprintf(why, len, "directory %s is not writable: %s", brief(head, b),
			 strerror(errno));
		return false;
	}
	return creatable_in(head, why, len);
}

/* Every input and output of @job, each output once per file the stage writes. */
static int collect(const struct shmrun_job *job, struct io_list *in, struct io_list *out)
{
	const char *plugin;
	int err = 0;

	/* the run reads these too (a restart reads the conf again, a worker maps
	 * the plugins): an output over one would destroy the job itself */
	if (strcmp(job->conf_path, "-") != 0)
		err = io_add(in, "the topology file", job->conf_path, strlen(job->conf_path), 1);
	for (uint32_t i = 0; !err && (plugin = shmrun_plugin_path_at(i)) != NULL; i++)
		err = io_add(in, "a plugin", plugin, strlen(plugin), 1);

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
					uint32_t count = 0;
					char *one = strndup(v, n);

					/* as written (lookup), and each brace alternative
					 * (file_source's glob(GLOB_BRACE)) */
					err = !one ? -ENOMEM
					      : n  ? io_add(in, what, v, n, conf_line(job, st, p))
						   : 0;
					if (!err && n && strchr(one, '{')) {
						char alt[160 + BRIEF_MAX + 32], b[BRIEF_MAX];

						snprintf(alt, sizeof(alt),
							 "%s (the brace pattern %s gives)", what,
							 brief(one, b));
						err = brace_add(in, alt, one, conf_line(job, st, p),
								&count);
					}
					if (err == -E2BIG) {
						char b[BRIEF_MAX];

						shmrun_log(SHMRUN_LOG_ERROR,
							   "%s: %s: the pattern %s has more than %d "
							   "brace alternatives, too many to check against "
							   "the outputs; list fewer; nothing was started",
							   SHMRUN_CONF_AT(job->conf_path, conf_line(job, st, p)), what,
							   brief(one, b), SHMRUN_BRACE_MAX);
						err = -EINVAL;
					}
					free(one);
					v += n + (v[n] == '\n');
				}
				continue;
			}
			for (uint32_t k = 0; k < (st->width > 1 ? st->width : 1) && !err; k++) {
				char one[PATH_MAX + 16], lock[PATH_MAX];
				struct io_path *o;

				snprintf(one, sizeof(one), st->width > 1 ? "%s.%u" : "%s", v, k);
				err = io_add(out, what, one, strlen(one), conf_line(job, st, p));
				if (err)
					break;
				/* its lock files (shmrun_lock_job()): its own, and width k's
				 * .<name>.lock */
				o = &out->v[out->n - 1];
				for (int l = 0; l < (st->width > 1 ? 2 : 1) && !err; l++) {
					if (lock_path(l ? v : one, -1, lock, sizeof(lock)) < 0)
						o->lock_too_long = true;
					else if (!(o->lock[l] = strdup(lock)))
						err = -ENOMEM;
				}
			}
		}
	}
	if (!err && job->checkpoint_dir) {
		err = io_add(out, "checkpoint_dir", job->checkpoint_dir,
			     strlen(job->checkpoint_dir), job->checkpoint_dir_line);
		/* its lock is checkpoint_dir/.lock */
		if (!err && strlen(job->checkpoint_dir) + sizeof("/.lock") > PATH_MAX)
			out->v[out->n - 1].lock_too_long = true;
	}
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
		char rel[PATH_MAX + 256], why[PATH_MAX + 128], co[PATH_MAX], cp[PATH_MAX];
		char b1[BRIEF_MAX], b2[BRIEF_MAX], b3[BRIEF_MAX];

		if (op->lock_too_long) {
			/* the run locks it through a file whose name is 6 bytes longer */
			shmrun_log(SHMRUN_LOG_ERROR,
				   "%s: %s: the path is too long for its lock file (%s needs "
				   "6 bytes more than the name: at most %d bytes a file name, "
				   "%d a path); choose a shorter path; nothing was started: %s",
				   SHMRUN_CONF_AT(job->conf_path, op->line), op->what,
				   ckpt ? "checkpoint_dir/.lock" : ".<name>.lock", NAME_MAX,
				   PATH_MAX - 1, brief(op->path, b1));
			failed = -EINVAL;
		}
		for (uint32_t i = 0; i < in.n; i++) {
			const char *lock = NULL;
			bool hit = overlaps(op->path, &in.v[i], rel, sizeof(rel));

			/* its lock files are written too: no input may read them */
			for (int l = 0; l < 2 && !hit; l++) {
				char lrel[PATH_MAX];

				if (op->lock[l] && overlaps(op->lock[l], &in.v[i], lrel, sizeof(lrel))) {
					lock = op->lock[l];
					snprintf(rel, sizeof(rel), "has its lock file %s, which %s",
						 brief(lock, b3), lrel);
					hit = true;
				}
			}
			if (!hit)
				continue;
			shmrun_log(
			    SHMRUN_LOG_ERROR,
			    "%s: %s = %s %s of %s = %s (%s): %s would be read while "
			    "it is written, and the input destroyed; choose %s outside every "
			    "input; nothing was started",
			    SHMRUN_CONF_AT(job->conf_path, op->line), op->what, brief(op->path, b1), rel,
			    in.v[i].what, brief(in.v[i].path, b2), SHMRUN_CONF_AT(job->conf_path, in.v[i].line),
			    ckpt ? "the checkpoint_dir" : "the output",
			    ckpt ? "a checkpoint_dir" : "an output path");
			failed = -EINVAL;
		}
		canon(op->path, co, sizeof(co));
		for (uint32_t p = 0; p < o; p++) {
			struct stat s1, s2;
			bool same_name, same_file;

			canon(out.v[p].path, cp, sizeof(cp));
			same_name = strcmp(co, cp) == 0;
			/* one file under two names (a hard link): by identity */
			same_file = !same_name && stat(op->path, &s1) == 0 &&
				    stat(out.v[p].path, &s2) == 0 && s1.st_dev == s2.st_dev &&
				    s1.st_ino == s2.st_ino;
			if (!same_name && !same_file && !(ckpt && inside(cp, co)))
				continue;
			shmrun_log(SHMRUN_LOG_ERROR,
				   "%s: %s = %s is also written by %s (%s)%s; give each "
				   "output its own path; nothing was started",
				   SHMRUN_CONF_AT(job->conf_path, op->line), op->what, brief(op->path, b1),
				   out.v[p].what, SHMRUN_CONF_AT(job->conf_path, out.v[p].line),
				   same_name   ? ""
				   : same_file ? " as the same file under another name (a hard link)"
					       : ", inside the checkpoint_dir");
			failed = -EINVAL;
		}
		if (!writable(op->path, ckpt, why, sizeof(why))) {
			shmrun_log(SHMRUN_LOG_ERROR,
				   "%s: %s = %s cannot be written: %s; make it writable or "
				   "choose another path; nothing was started",
				   SHMRUN_CONF_AT(job->conf_path, op->line), op->what, brief(op->path, b1), why);
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
	bool output; /* the output file itself (its identity), not a lock file */
	bool created; /* output: this process created it (shmrun_lock_job_undo()) */
};

static struct lock *locks;
static uint32_t nlocks;

/* mkdir -p @path, each directory made 0700 (@ckpt, shmrun_ckpt_mkdir()) or 0777. */
static int make_dirs(const char *path, bool ckpt)
{
	return ckpt ? shmrun_mkdir_p(path, 0700, SHMRUN_MKDIR_EXACT)
		    : shmrun_mkdir_p(path, 0777, 0);
}

/* The pid holding a flock on the file of @fd, from /proc/locks ("unknown"). */
static void holder_of(int fd, char *pid, size_t len)
{
	char line[256], type[16];
	struct stat st;
	unsigned int maj, min;
	unsigned long ino;
	long p;
	FILE *f;

	snprintf(pid, len, "unknown");
	if (fstat(fd, &st) < 0 || !(f = fopen("/proc/locks", "re")))
		return;
	while (fgets(line, sizeof(line), f)) {
		if (strstr(line, "->")) /* a waiter */
			continue;
		if (sscanf(line, "%*d: %15s %*s %*s %ld %x:%x:%lu", type, &p, &maj, &min, &ino) ==
			5 &&
		    strcmp(type, "FLOCK") == 0 && ino == st.st_ino && maj == major(st.st_dev) &&
		    min == minor(st.st_dev)) {
			snprintf(pid, len, "%ld", p);
			break;
		}
	}
	fclose(f);
}

/*
 * Lock @path for this process: a lock file (opened O_RDWR, created 0600 if
 * @create) or, @output, the output file itself (its device and inode: a hard
 * link or another name of it is excluded too; created, empty, if @create).
 * Return: 0 (also when this process holds it already, or, !@create, when it
 * does not exist yet); -EBUSY with the holder's pid in @pid; -EINVAL if an
 * output is not a regular file; -errno.
 */
static int take_lock(const char *path, bool output, bool create, char *pid, size_t len)
{
	struct lock *n;
	struct stat st;
	ssize_t got;
	int fd, flags = O_CLOEXEC | (create ? O_CREAT : 0);
	bool created = false;

	for (uint32_t i = 0; i < nlocks; i++)
		if (strcmp(locks[i].path, path) == 0)
			return 0;
	if (output) {
		/* never opens a FIFO for reading (O_NONBLOCK), nor creates beside
		 * one; whether it created the file, for shmrun_lock_job_undo() */
		fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0 && errno == EACCES)
			fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0 && errno == ENOENT && create) {
			fd = open(path, O_RDONLY | O_NONBLOCK | O_EXCL | flags, 0666);
			if (fd < 0 && errno == EACCES)
				fd = open(path, O_WRONLY | O_NONBLOCK | O_EXCL | flags, 0666);
			created = fd >= 0;
		}
	} else {
		fd = open(path, O_RDWR | O_NOFOLLOW | flags, 0600);
	}
	if (fd < 0)
		return !create && errno == ENOENT ? 0 : -errno;
	if (output && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
		close(fd);
		return -EINVAL;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int err = errno == EWOULDBLOCK ? -EBUSY : -errno;

		/*
		 * The holder from /proc/locks first: the pid a lock file holds is
		 * written by its holder only after it took every lock, so a run
		 * refused in between would read the pid of a run before it
		 * (dead). The file's pid only where /proc/locks cannot say.
		 */
		holder_of(fd, pid, len);
		if (!output && strcmp(pid, "unknown") == 0) {
			got = pread(fd, pid, len - 1, 0);
			pid[got > 0 ? got : 0] = 0;
			pid[strcspn(pid, "\n")] = 0;
			if (!pid[0])
				snprintf(pid, len, "unknown");
		}
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
	locks[nlocks].output = output;
	locks[nlocks].created = created;
	locks[nlocks].path = strdup(path);
	if (!locks[nlocks].path) {
		close(fd);
		return -ENOMEM;
	}
	nlocks++;
	return 0;
}

/* Lock @what = @target through @path (take_lock()); log a refusal. */
static int lock_one(const struct shmrun_job *job, int line, const char *what, const char *target,
		    const char *path, bool output, bool create)
{
	char pid[32], b1[BRIEF_MAX], b2[BRIEF_MAX];
	int err = take_lock(path, output, create, pid, sizeof(pid));

	if (err == -EBUSY)
		shmrun_log(SHMRUN_LOG_ERROR,
			   "%s: %s = %s is in use by another run of shmrun (pid %s, holding "
			   "%s%s); two runs would corrupt %s. Wait for that run to end or stop it "
			   "(kill -TERM %s); nothing was started",
			   SHMRUN_CONF_AT(job->conf_path, line), what, brief(target, b2), pid, brief(path, b1),
			   output ? ": a lock on the file itself, whatever its name (a hard link)"
				  : "",
			   strcmp(what, "checkpoint_dir") == 0 ? "its checkpoints" : "the output",
			   pid);
	else if (err == -EINVAL)
		shmrun_log(SHMRUN_LOG_ERROR,
			   "%s: %s: %s is not a regular file; an output is a regular file; "
			   "nothing was started",
			   SHMRUN_CONF_AT(job->conf_path, line), what, brief(path, b1));
	else if (err)
		shmrun_log(SHMRUN_LOG_ERROR,
			   "%s: %s = %s: cannot lock %s: %s; nothing was started",
			   SHMRUN_CONF_AT(job->conf_path, line), what, brief(target, b2), brief(path, b1),
			   strerror(-err));
	return err;
}

/* Whether instance @k of a @width-wide stage runs on @host: placement over
 * @members global workers, @per_host of them on each host (plan.h). */
static bool local_instance(uint32_t k, uint32_t width, uint32_t members, uint32_t per_host,
			   uint32_t host)
{
	return shmrun_placement_owner_of(k, width, members) / per_host == host;
}

/*
 * One pass over everything the run locks. !@create: lock what exists
 * already, create nothing (a conflict refuses the run before it touches
 * anything). @create: make the missing directories, lock files and output
 * files, and lock them.
 */
static int lock_pass(const struct shmrun_job *job, bool create)
{
	char path[PATH_MAX], b[BRIEF_MAX];
	/* hosts > 1: this host locks what it writes (docs/multihost.md) */
	bool multi = job->hosts > 1;
	uint32_t host = shmrun_host_self(), members = job->hosts * job->workers;
	int err;

	if (job->checkpoint_dir) {
		err = create ? make_dirs(job->checkpoint_dir, true) : 0;
		if (err) {
			shmrun_log(SHMRUN_LOG_ERROR,
				   "%s: checkpoint_dir cannot be created: %s; nothing was "
				   "started: %s",
				   SHMRUN_CONF_AT(job->conf_path, job->checkpoint_dir_line), strerror(-err),
				   brief(job->checkpoint_dir, b));
			return err;
		}
		/* one host: .lock; host h of several: .lock.hH (two "hosts" on
		 * one machine, or a shared file system), and host 0 also .lock,
		 * so a one-host run of the same directory is refused */
		if (multi) {
			/* checkpoint_dir is at most SHMRUN_CKPT_DIR_MAX: room for it */
			if (snprintf(path, sizeof(path), "%s/.lock.h%u", job->checkpoint_dir,
				     host) >= (int)sizeof(path))
				return -ENAMETOOLONG;
			err = lock_one(job, job->checkpoint_dir_line, "checkpoint_dir",
				       job->checkpoint_dir, path, false, create);
			if (err)
				return err;
		}
		if (!multi || host == 0) {
			if (snprintf(path, sizeof(path), "%s/.lock", job->checkpoint_dir) >=
			    (int)sizeof(path))
				return -ENAMETOOLONG; /* refused by shmrun_preflight() */
			err = lock_one(job, job->checkpoint_dir_line, "checkpoint_dir",
				       job->checkpoint_dir, path, false, create);
			if (err)
				return err;
		}
	}
	for (uint32_t s = 0; s < job->nstages; s++) {
		const struct shmrun_stage *st = &job->stages[s];

		for (uint32_t i = 0; i < st->nparams; i++) {
			const struct shmrun_param *p = &st->params[i];
			uint32_t width = st->width > 1 ? st->width : 1;
			const char *slash;
			char what[160], dir[PATH_MAX], file[PATH_MAX + 16];

			if (!p->value || p->def->io != SHMRUN_PARAM_OUTPUT)
				continue;
			snprintf(what, sizeof(what), "stage '%s' %s", st->name, p->def->key);
			slash = strrchr(p->value, '/');
			if (slash)
				snprintf(dir, sizeof(dir), "%.*s",
					 (int)(slash - p->value) + (slash == p->value), p->value);
			else
				snprintf(dir, sizeof(dir), ".");
			err = create ? make_dirs(dir, false) : 0;
			if (err) {
				shmrun_log(SHMRUN_LOG_ERROR,
					   "%s: %s: directory %s cannot be created: %s; "
					   "nothing was started",
					   SHMRUN_CONF_AT(job->conf_path, conf_line(job, st, p)), what,
					   brief(dir, b), strerror(-err));
				return err;
			}
			/* .<name>.lock; width k also writes path.<i>, which a job of
			 * width 1 may name: .<name>.<i>.lock; and each file written.
			 * With hosts > 1 only the instances placed on this host
			 * (.<name>.lock with instance 0), so that two "hosts" on one
			 * machine do not refuse each other */
			err = 0;
			if (!multi || local_instance(0, width, members, job->workers, host)) {
				err = lock_path(p->value, -1, path, sizeof(path));
				if (!err)
					err = lock_one(job, conf_line(job, st, p), what, p->value,
						       path, false, create);
			}
			for (uint32_t k = 0; !err && st->width > 1 && k < width; k++) {
				if (multi && !local_instance(k, width, members, job->workers, host))
					continue;
				err = lock_path(p->value, k, path, sizeof(path));
				if (!err)
					err = lock_one(job, conf_line(job, st, p), what, p->value,
						       path, false, create);
			}
			for (uint32_t k = 0; !err && k < width; k++) {
				if (multi && !local_instance(k, width, members, job->workers, host))
					continue;
				snprintf(file, sizeof(file), st->width > 1 ? "%s.%u" : "%s", p->value,
					 k);
				err = lock_one(job, conf_line(job, st, p), what, p->value, file,
					       true, create);
			}
			if (err == -ENAMETOOLONG)
				shmrun_log(SHMRUN_LOG_ERROR,
					   "%s: %s: the path is too long for its lock file "
					   "(.<name>.lock); choose a shorter path; nothing was "
					   "started: %s",
					   SHMRUN_CONF_AT(job->conf_path, conf_line(job, st, p)), what,
					   brief(p->value, b));
			if (err)
				return err;
		}
	}
	return 0;
}

int shmrun_lock_job(const struct shmrun_job *job)
{
	int err = lock_pass(job, false);

	if (!err)
		err = lock_pass(job, true);
	if (err) {
		shmrun_lock_job_undo(); /* outputs created before the refusal */
		return err;
	}
	/* every lock file names its holder, for a refused run's message */
	for (uint32_t i = 0; i < nlocks; i++)
		if (!locks[i].output && ftruncate(locks[i].fd, 0) == 0) {
			char pid[24];
			int n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());

			if (pwrite(locks[i].fd, pid, n, 0) != n)
				continue; /* the pid only helps a message */
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

void shmrun_lock_job_undo(void)
{
	for (uint32_t i = 0; i < nlocks; i++) {
		struct stat held, named;

		/* only a file this run created, still empty, still at its path */
		if (!locks[i].output || !locks[i].created || fstat(locks[i].fd, &held) ||
		    held.st_size != 0 || stat(locks[i].path, &named) ||
		    named.st_dev != held.st_dev || named.st_ino != held.st_ino)
			continue;
		if (unlink(locks[i].path) == 0)
			shmrun_log(SHMRUN_LOG_DEBUG, "removed %s: created empty by this refused run",
				   locks[i].path);
	}
	shmrun_unlock_job();
}

void shmrun_locks_forget(void)
{
	shmrun_unlock_job(); /* closes this process's copies; the launcher's stay */
}

int shmrun_lock_job_check(const struct shmrun_job *job)
{
	int err = lock_pass(job, false); /* creates nothing */

	shmrun_unlock_job();
	return err;
}
