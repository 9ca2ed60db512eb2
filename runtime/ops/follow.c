/*
 * runtime/ops/follow.c: file_source with `follow = true`: read files as they
 * grow, pick up new ones, survive rotation, never end (tail -F, Filebeat).
 *
 * Watches. Each `path` entry (after brace expansion) is a watch: a file, a
 * directory (its files, recursively, those whose name matches `match`) or a
 * glob. Watch k belongs to instance k mod width, so a rotation (which stays
 * inside one watch) is seen by one instance; a width above the number of
 * watches leaves instances idle. The files of an instance's watches are its
 * tracked files:
 *
 *     struct tfile: path (last name seen), watch, (dev, ino), off (every line
 *     before it emitted), seen (bytes [off, seen) hold no '\n': a partial
 *     line), size, the file's first min(size, 1 KiB) bytes (head), an open
 *     fd (kept: a file renamed or deleted is still read to its end), state:
 *
 *       READ   read as it grows
 *       PROBE  new, possibly a copy being written (its bytes so far are a
 *              prefix of a READ file's head): not read; decided when it
 *              changes, or READ after one poll_interval
 *       HELD   a copy of READ file T (its head equals T's): not read; when T
 *              is found truncated (copytruncate) at offset X it becomes READ
 *              at min(X, its size): the bytes T had between X and the copy
 *              are read from it, nothing twice. When T is dropped (finished),
 *              READ at min(T's off, its size): a copy holds what T held, so
 *              its bytes past T's end (a file replaced atomically by itself
 *              plus new lines) are new; a copy no longer than T is read from
 *              its end (nothing twice)
 *
 * What wakes it. produce() never blocks and returns 1 without emitting when
 * nothing is new (the worker then sleeps, idle.c). An inotify fd
 * (IN_NONBLOCK) watches each watch's directory (IN_CREATE, IN_MOVED_TO, ...:
 * rescan) and each tracked file (IN_MODIFY, IN_ATTRIB, IN_MOVE_SELF,
 * IN_DELETE_SELF: fstat that file); produce() drains it. Every
 * `poll_interval` it rescans and fstats every tracked file anyway: that is the whole mechanism
 * when inotify is not available (inotify_init fails, a watch limit is hit:
 * one warning, then polling only; SHMRUN_TEST_NO_INOTIFY=1 in a
 * fault-injection build), and it drives the rotation grace.
 *
 * Lines. Only whole lines are emitted, without their '\n'. A partial last
 * line waits for its '\n'; it is emitted without one only when its file was
 * rotated away or deleted (no matching name points to the inode any more),
 * is read to its end and has not changed for one poll_interval: then the file
 * is finished, its fd closed and it is no longer tracked.
 *
 * Listing. A scan that cannot list a watch (its directory moved away or
 * unreadable, out of fds: any opendir/readdir/glob error, fw->lerr) is not
 * a listing: every tracked file of the watch stays as it is (named), one
 * warning per watch and errno, and the next poll lists again. Taking it
 * for "no file any more" finished every file, and the next whole listing
 * found them all again as new: read twice from 0.
 *
 * Forgotten files. A READ file dropped (finished), or a saved one not
 * found at a restore, is remembered (struct gone: watch, (dev, ino), off,
 * head; the last GONE_MAX per instance, saved in the checkpoint after the
 * tracked files). A new file with the same (dev, ino), the same head and at
 * least off bytes is that file come back (moved out of the watch and back):
 * READ from off, not 0. Same risk as a restore's: a reused inode whose new
 * file starts with the old one's head is taken for it.
 *
 * Rotation. rename-and-create: the renamed inode is still tracked (by
 * (dev, ino), under its new name when that matches, else by the fd until
 * drained as above); the new file is new: read from 0. copytruncate: a
 * tracked file that shrank, or whose head changed, was truncated: its HELD
 * copies, and PROBE files holding the start of its head (a copy made while
 * it was shorter), are released (above) and it is read again from 0; without a copy
 * among the watched files, the bytes between the last read and the
 * truncation are lost (a warning says so).
 *
 * Per-worker state (rule split, one entry per watch, not per file): the
 * runtime deals entries out to new instances whole, so with one entry per
 * owned watch (also when it tracks no file) every watch, with all of its
 * files, belongs to exactly one instance after a restore at any width, and
 * the instance owns exactly the watches of the entries it got (an instance
 * given none idles). One entry per file under the split rule would scatter a
 * watch's files over instances, and each would then take the others' files
 * for new ones (read twice); the union rule would need the operator's
 * pw_rule to depend on a key (file_source with follow = false must stay
 * split).
 *
 *     struct fol_head (magic, watch, number of watches, number of files,
 *     number of remembered files: 0 in entries written before there were)
 *     then per READ file, then per remembered file: struct fol_file (dev,
 *     ino, off, XXH64 of the first head_len bytes, head_len, path length) and
 *     the path (relative to the conf file's directory when under it)
 *
 * PROBE and HELD files are not saved: a restore meets them again as new.
 * A restore finds each saved file (at the first produce()) among all files
 * of the watch's directory, any name (x.log renamed to x.log.1 while the job
 * was down), by (dev, ino) with the same head (not a reused inode) and at
 * least off bytes; failing that, among the matching untracked files, one with
 * the same head and at least off bytes (a copy: copytruncate or a move across
 * file systems while down) is read from off (one with the same head but
 * fewer bytes holds only bytes read already: tracked at its end); failing
 * that, a warning names
 * the file and the offset (bytes after it, if any, are lost). Then files
 * not saved are new: probed as above (they may be copies made while down),
 * then read from 0. On a fresh start every file found is read from 0.
 *
 * Descriptors. A tracked file keeps its fd (a renamed-away or deleted file
 * is drained through it) up to max_open per instance: max_open_files, at
 * most (RLIMIT_NOFILE soft - FD_RESERVE) / width, so that the checkpoint,
 * the rings and the worker's other instances keep fds. A new file found
 * with no fd to spare (max_open reached, or EMFILE/ENFILE: a warning naming
 * the limits) is not tracked yet (fw->deferred): at the end of produce()
 * park() closes down to half of max_open and the next call scans again, so
 * the files are read by turns; a fresh start reads all files there at its
 * first scans whole (first_scan_done waits for a scan without deferral).
 * Beyond max_open
 * park() closes those read to their end under a matching name, least
 * recently changed first, and check() reopens one by name (same inode) when
 * it changes (its inotify watch stays). A parked file renamed out of the
 * match cannot be drained: what is appended to it after that is lost.
 *
 * Rejected: reading a partial line at EOF (it would be torn when the writer
 * completes it); one fd per open()/close() per poll (a renamed, unmatched
 * file could not be drained); checksumming whole files (the head is what
 * logrotate's copy and its original share).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <glob.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "follow.h"
#include "ops.h"

#define HEAD_MAX     1024u		   /* bytes of a file's head */
#define GONE_MAX     1024u		   /* files remembered after they are dropped */
#define FD_RESERVE   64u		   /* fds left to the rest of the worker */
#define FREAD_BYTES  (256u << 10)	   /* first buffer size */
#define FLINES	     256u		   /* lines per shmrun_emit_batch() */
#define FOLLOW_MAGIC 0x314c4f4652524d48ull /* "HMRRFOL1": an entry of a following source */
#define INO_EVENTS   (IN_MODIFY | IN_ATTRIB | IN_MOVE_SELF | IN_DELETE_SELF)
#define DIR_EVENTS                                                                                 \
	(IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF)

enum tstate { T_READ, T_PROBE, T_HELD };

struct tfile {
	char *path;
	uint32_t watch;
	enum tstate state;
	uint64_t dev, ino;
	uint64_t off, seen, size;
	int64_t changed_ns;	     /* CLOCK_MONOTONIC when size last changed (or found) */
	int64_t mtime_ns;	     /* st_mtim at the last fstat */
	uint64_t copy_dev, copy_ino; /* HELD: the file this copies */
	int fd, wd;
	bool named; /* a matching name pointed to it at the last scan */
	bool was_named; /* ... at the scan before (scan(): the grace of a rename) */
	bool dirty; /* an inotify event for it since the last check() */
	uint32_t head_len;
	unsigned char head[HEAD_MAX];
};

struct watch {
	char *pat;
	bool owned;
	bool is_dir;	/* its path was a directory when last listed */
	int wd;		/* inotify watch of its directory, -1 */
	int warned_err; /* errno of the listing failure last warned about, 0 */
};

/*
 * A file no longer tracked (finished, or saved but not found because its
 * directory could not be listed): found again with the same (dev, ino) and
 * head and at least off bytes, it goes on from off (not 0: read twice).
 */
struct gone {
	uint32_t watch;
	uint64_t dev, ino, off, head_sum;
	uint32_t head_len;
	char *path;
};

/* A saved entry's file, kept until the first produce() resolves it. */
struct saved {
	uint32_t watch;
	uint64_t dev, ino, off, head_sum;
	uint32_t head_len;
	char *path;
};

struct fol_head {
	uint64_t magic; /* FOLLOW_MAGIC */
	uint32_t watch, nwatches, nfiles;
	uint32_t ngone; /* then this many remembered files (struct gone); 0 before */
};

struct fol_file {
	uint64_t dev, ino, off, head_sum;
	uint32_t head_len, path_len;
};

struct follow {
	struct watch *w;
	uint32_t nw;
	const char *match;
	uint64_t poll_ns;
	struct tfile **f;
	uint32_t nf, capf;
	struct saved *sv;
	uint32_t nsv, capsv;
	struct gone *gone; /* a ring of GONE_MAX: the oldest forgotten first */
	uint32_t ngone, capgone;
	bool restoring, resolved, first_scan_done;
	int ino;		  /* inotify fd, -1: polling only */
	uint32_t nopen, max_open; /* fds of tracked files open; their cap (open()) */
	uint64_t max_open_key;	  /* max_open_files */
	uint64_t nofile;	  /* RLIMIT_NOFILE soft limit at open() */
	int lerr;		  /* errno of the first listing failure of list_watch() */
	bool lall;		  /* list_watch() listed nothing: the whole watch failed */
	char **lfail;		  /* else the directories it could not list */
	uint32_t nlfail, caplfail;
	bool deferred;		       /* a new file was left for later: no fd for it */
	int fd_warned;		       /* EMFILE/ENFILE last warned about, 0 */
	bool cap_said;		       /* max_open reached: said once */
	bool rescan, check, check_all; /* to do: scan(); check() the dirty files, all files */
	int64_t next_poll;
	unsigned char *buf;
	size_t cap;
	struct shmrun_record lines[FLINES];
	uint32_t nlines;
	unsigned char *entry; /* snapshot scratch */
	size_t entry_cap;
};

static int64_t id_mtime(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static bool no_inotify_switch(void)
{
#ifdef SHMRUN_FAULT_INJECTION
	const char *e = getenv("SHMRUN_TEST_NO_INOTIFY"); /* test-only: polling alone */

	return e && strcmp(e, "1") == 0;
#else
	return false;
#endif
}

/* Stop using inotify (a limit was hit): say so once; polling goes on. */
static void drop_inotify(struct shmrun_task *task, struct follow *fw, const char *path, int err)
{
	if (fw->ino < 0)
		return;
	shmrun_task_warn(task,
			 "inotify watch of '%s': %s: following by polling every %" PRIu64
			 " ms instead (raise fs.inotify.max_user_watches)",
			 path, strerror(err), fw->poll_ns / 1000000);
	close(fw->ino);
	fw->ino = -1;
	for (uint32_t i = 0; i < fw->nw; i++)
		fw->w[i].wd = -1;
	for (uint32_t i = 0; i < fw->nf; i++)
		fw->f[i]->wd = -1;
}

static int add_wd(struct shmrun_task *task, struct follow *fw, const char *path, uint32_t mask)
{
	int wd;

	if (fw->ino < 0)
		return -1;
	wd = inotify_add_watch(fw->ino, path, mask);
	if (wd < 0 && (errno == ENOSPC || errno == ENOMEM))
		drop_inotify(task, fw, path, errno);
	return wd < 0 ? -1 : wd;
}

/* Read the first min(size, HEAD_MAX) bytes of @t into t->head. Return: 0 or -errno. */
static int read_head(struct tfile *t)
{
	ssize_t n;

	do
		n = pread(t->fd, t->head, HEAD_MAX, 0);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	t->head_len = (uint32_t)n;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Listing a watch's files */

typedef int (*file_cb)(struct follow *fw, uint32_t watch, const char *path, const struct stat *st,
		       void *arg);

/* Listing @dir failed with @err (the whole watch if @dir is NULL): see list_watch(). */
static void list_failed(struct follow *fw, const char *dir, int err)
{
	char *p = dir ? strdup(dir) : NULL;

	if (!fw->lerr)
		fw->lerr = err ? err : EIO;
	if (!p || shmrun_grow_u32(&fw->lfail, &fw->caplfail, (size_t)fw->nlfail + 1,
				  sizeof(*fw->lfail), 4)) {
		free(p);
		fw->lall = true; /* no memory for it: as if nothing was listed */
		return;
	}
	fw->lfail[fw->nlfail++] = p;
}

/* Whether @path is in a directory that list_watch() could not list. */
static bool in_failed(const struct follow *fw, const char *path)
{
	if (fw->lall)
		return true;
	for (uint32_t i = 0; i < fw->nlfail; i++) {
		size_t n = strlen(fw->lfail[i]);

		if (strncmp(path, fw->lfail[i], n) == 0 && path[n] == '/')
			return true;
	}
	return false;
}

static int walk(struct follow *fw, uint32_t watch, const char *dir, bool recursive, bool filter,
		file_cb cb, void *arg)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int err = 0;

	if (!d) { /* not a listing: nothing in it may be taken for gone (scan()) */
		list_failed(fw, dir, errno);
		return 0;
	}
	for (;;) {
		errno = 0;
		if (err || (de = readdir(d)) == NULL)
			break;
		struct stat st;
		char *p;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (asprintf(&p, "%s/%s", dir, de->d_name) < 0) {
			err = -ENOMEM;
			break;
		}
		if (lstat(p, &st) == 0) { /* links inside directories are not followed */
			if (S_ISDIR(st.st_mode) && recursive)
				err = walk(fw, watch, p, true, filter, cb, arg);
			else if (S_ISREG(st.st_mode) &&
				 (!filter || !fw->match || fnmatch(fw->match, de->d_name, 0) == 0))
				err = cb(fw, watch, p, &st, arg);
		}
		free(p);
	}
	if (!err && !de && errno)
		list_failed(fw, dir, errno);
	closedir(d);
	return err;
}

static __thread struct follow *glob_fw; /* glob_failed()'s */

static int glob_failed(const char *path, int err)
{
	list_failed(glob_fw, path, err);
	return 0; /* go on with the other directories */
}

/*
 * Call @cb for each regular file of watch @k: @all false, the files it
 * follows (named, matched by its glob, or in its directory and matching
 * `match`); @all true, every file of its directories, any name (where a
 * restore looks for a renamed file).
 */
/*
 * A listing that could not read a directory (moved away, no permission, no
 * fd left) sets fw->lerr (the first errno) and fw->lfail (the directories),
 * or fw->lall (the watch's own directory), and lists what it could: scan()
 * then keeps the tracked files in them as they are.
 */
static int list_watch(struct follow *fw, uint32_t k, bool all, file_cb cb, void *arg)
{
	const char *pat = fw->w[k].pat;
	struct stat st;
	glob_t g;
	int err = 0, rc;

	fw->lerr = 0;
	fw->lall = false;
	while (fw->nlfail)
		free(fw->lfail[--fw->nlfail]);
	rc = stat(pat, &st) == 0 ? 0 : errno;
	if (rc == 0 && S_ISDIR(st.st_mode)) {
		fw->w[k].is_dir = true;
		return walk(fw, k, pat, true, !all, cb, arg);
	}
	if (fw->w[k].is_dir) { /* the watched directory moved away or cannot be seen */
		list_failed(fw, NULL, rc ? rc : ENOTDIR);
		return 0;
	}
	if (!strpbrk(pat, "*?[")) { /* a named file: its directory must be readable */
		char *copy = strdup(pat);
		DIR *d;

		if (!copy)
			return -ENOMEM;
		d = opendir(dirname(copy));
		if (d)
			closedir(d);
		else
			list_failed(fw, NULL, errno);
		free(copy);
		if (!d)
			return 0;
	}
	if (all) { /* the directory of the named file or pattern */
		char *copy = strdup(pat), *dir;

		if (!copy)
			return -ENOMEM;
		dir = dirname(copy);
		if (glob(dir, GLOB_ONLYDIR, NULL, &g) == 0) {
			for (size_t i = 0; i < g.gl_pathc && !err; i++)
				err = walk(fw, k, g.gl_pathv[i], false, false, cb, arg);
			globfree(&g);
		}
		free(copy);
	}
	if (err)
		return err;
	glob_fw = fw;
	rc = glob(pat, 0, glob_failed, &g);
	if (rc == GLOB_NOSPACE)
		return -ENOMEM;
	if (rc != 0) {
		globfree(&g);
		return 0;
	}
	for (size_t i = 0; i < g.gl_pathc && !err; i++) {
		if (stat(g.gl_pathv[i], &st) != 0)
			continue;
		if (S_ISDIR(st.st_mode))
			err = walk(fw, k, g.gl_pathv[i], true, !all, cb, arg);
		else if (S_ISREG(st.st_mode) && !all)
			err = cb(fw, k, g.gl_pathv[i], &st, arg);
	}
	globfree(&g);
	return err;
}

/* ------------------------------------------------------------------ */
/* Tracked files */

static struct tfile *find_ino(struct follow *fw, uint64_t dev, uint64_t ino)
{
	for (uint32_t i = 0; i < fw->nf; i++)
		if (fw->f[i]->dev == dev && fw->f[i]->ino == ino)
			return fw->f[i];
	return NULL;
}

/*
 * Out of fds (EMFILE: this process's RLIMIT_NOFILE, ENFILE: the system's):
 * say so once per kind, naming what to change. The file or directory is
 * left for a later scan (nothing dropped, nothing read again).
 */
static void fd_limit_warn(struct shmrun_task *task, struct follow *fw, const char *path, int err)
{
	if (fw->fd_warned == err)
		return;
	fw->fd_warned = err;
	shmrun_task_warn(task,
			 "opening '%s': %s: %u followed files are open (max_open_files = %" PRIu64
			 ", RLIMIT_NOFILE %" PRIu64 "): files are left for later until some can be "
			 "closed; lower max_open_files or raise the limit (ulimit -n%s)",
			 path, strerror(err), fw->nopen, fw->max_open_key, fw->nofile,
			 err == ENFILE ? "; the system's: fs.file-max" : "");
}

/*
 * Track @path of watch @k, in @state at @off. Return: it, or NULL: *@err
 * -ENOMEM, or 0 when it is left for a later scan (gone meanwhile, or no fd
 * to spare: max_open reached or EMFILE/ENFILE; fw->deferred set).
 */
static struct tfile *track(struct shmrun_task *task, struct follow *fw, uint32_t k,
			   const char *path, enum tstate state, uint64_t off, int *err)
{
	struct tfile *t;
	struct stat st;

	*err = 0;
	if (fw->nopen >= fw->max_open) {
		fw->deferred = true; /* no fd to spare: a later scan takes it */
		if (!fw->cap_said && fw->max_open < fw->max_open_key)
			shmrun_task_warn(
			    task,
			    "more files to follow than fds to spare: RLIMIT_NOFILE (ulimit -n) is "
			    "%" PRIu64 ", which leaves %u open followed files per instance, below "
			    "max_open_files = %" PRIu64 ": the others wait until files read to "
			    "their end are closed; raise ulimit -n or lower max_open_files",
			    fw->nofile, fw->max_open, fw->max_open_key);
		else if (!fw->cap_said)
			shmrun_task_log(task,
					"more files to follow than max_open_files = %u: the others "
					"wait until files read to their end are closed",
					fw->max_open);
		fw->cap_said = true;
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	*err = -ENOMEM;
	if (!t || shmrun_grow_u32(&fw->f, &fw->capf, (size_t)fw->nf + 1, sizeof(*fw->f), 16) ||
	    !(t->path = strdup(path))) {
		free(t);
		return NULL;
	}
	t->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (t->fd < 0 && (errno == EMFILE || errno == ENFILE)) {
		fd_limit_warn(task, fw, path, errno);
		fw->deferred = true;
	}
	if (t->fd < 0 || fstat(t->fd, &st) < 0 || !S_ISREG(st.st_mode) || read_head(t) < 0) {
		*err = 0; /* gone or changed meanwhile: the next scan sees it again */
		if (t->fd >= 0)
			close(t->fd);
		free(t->path);
		free(t);
		return NULL;
	}
	t->watch = k;
	t->state = state;
	t->dev = (uint64_t)st.st_dev;
	t->ino = (uint64_t)st.st_ino;
	t->size = (uint64_t)st.st_size;
	t->mtime_ns = id_mtime(&st);
	t->off = t->seen = off;
	t->changed_ns = now_ns();
	t->named = true;
	t->wd = add_wd(task, fw, path, INO_EVENTS);
	fw->f[fw->nf++] = t;
	fw->nopen++;
	*err = 0;
	return t;
}

static void untrack(struct follow *fw, uint32_t i)
{
	struct tfile *t = fw->f[i];

	if (t->wd >= 0 && fw->ino >= 0)
		inotify_rm_watch(fw->ino, t->wd);
	if (t->fd >= 0) {
		close(t->fd);
		fw->nopen--;
	}
	free(t->path);
	free(t);
	fw->f[i] = fw->f[--fw->nf];
}

/* Remember a file no longer tracked: read up to @off (the oldest of GONE_MAX forgotten). */
static void remember(struct follow *fw, uint32_t k, uint64_t dev, uint64_t ino, uint64_t off,
		     uint64_t head_sum, uint32_t head_len, const char *path)
{
	struct gone g = {k, dev, ino, off, head_sum, head_len, strdup(path)};

	if (!g.path)
		return; /* no memory: forgotten now rather than later */
	for (uint32_t i = 0; i < fw->ngone; i++) {
		if (fw->gone[i].dev == dev && fw->gone[i].ino == ino) { /* newer news */
			free(fw->gone[i].path);
			fw->gone[i] = g;
			return;
		}
	}
	if (fw->ngone == GONE_MAX) {
		free(fw->gone[0].path);
		memmove(fw->gone, fw->gone + 1, (GONE_MAX - 1) * sizeof(*fw->gone));
		fw->ngone--;
	}
	if (shmrun_grow_u32(&fw->gone, &fw->capgone, (size_t)fw->ngone + 1, sizeof(*fw->gone),
			    16)) {
		free(g.path);
		return;
	}
	fw->gone[fw->ngone++] = g;
}

static void forget(struct follow *fw, uint32_t i)
{
	free(fw->gone[i].path);
	memmove(fw->gone + i, fw->gone + i + 1, (fw->ngone - i - 1) * sizeof(*fw->gone));
	fw->ngone--;
}

static void remember_file(struct follow *fw, const struct tfile *t, uint64_t off)
{
	remember(fw, t->watch, t->dev, t->ino, off, XXH64(t->head, t->head_len, 0), t->head_len,
		 t->path);
}

/*
 * Decide a new (PROBE) file @c: a copy of a READ file T (its head holds T's
 * whole head): HELD; its bytes so far a prefix of T's head, for less than
 * one poll_interval: still PROBE; else READ from 0.
 */
static void probe(struct follow *fw, struct tfile *c, int64_t now)
{
	bool prefix = false;

	if (read_head(c) < 0)
		return;
	for (uint32_t i = 0; i < fw->nf; i++) {
		const struct tfile *t = fw->f[i];

		if (t == c || t->state != T_READ || t->head_len == 0)
			continue;
		if (c->head_len >= t->head_len && memcmp(c->head, t->head, t->head_len) == 0) {
			c->state = T_HELD;
			c->copy_dev = t->dev;
			c->copy_ino = t->ino;
			return;
		}
		if (c->head_len < t->head_len && memcmp(c->head, t->head, c->head_len) == 0)
			prefix = true;
	}
	if (!prefix || now - c->changed_ns >= (int64_t)fw->poll_ns)
		c->state = T_READ;
}

/* The HELD copies of @t become READ at min(@x, size): @x is where @t's lines stopped. */
static uint32_t release_copies(struct shmrun_task *task, struct follow *fw, const struct tfile *t,
			       uint64_t x)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < fw->nf; i++) {
		struct tfile *c = fw->f[i];

		struct stat st;

		if (c->state != T_HELD || c->copy_dev != t->dev || c->copy_ino != t->ino)
			continue;
		/* its size as of now: one taken for the copy in truncated() may
		 * not have been looked at since it was found (empty, as cp
		 * creates it), and min(x, 0) read it from 0: every line twice */
		if (c->fd >= 0 && fstat(c->fd, &st) == 0 && (uint64_t)st.st_size != c->size) {
			c->size = (uint64_t)st.st_size;
			c->mtime_ns = id_mtime(&st);
		}
		c->state = T_READ;
		c->off = c->seen = x < c->size ? x : c->size;
		if (x < c->size)
			shmrun_task_log(
			    task, "input '%s' is a copy of '%s': reading it from offset %" PRIu64,
			    c->path, t->path, x);
		n++;
	}
	return n;
}

/* scan's callback: a file a watch follows. */
static int scan_one(struct follow *fw, uint32_t k, const char *path, const struct stat *st,
		    void *arg)
{
	struct shmrun_task *task = arg;
	struct tfile *t = find_ino(fw, (uint64_t)st->st_dev, (uint64_t)st->st_ino);
	int err = 0;

	if (t) {
		t->named = true;
		if (strcmp(t->path, path) != 0) { /* renamed within the watch */
			char *p = strdup(path);

			if (!p)
				return -ENOMEM;
			free(t->path);
			t->path = p;
		}
		return 0;
	}
	/* new: before the first scan of a fresh start, content to read whole */
	t = track(task, fw, k, path, fw->first_scan_done || fw->restoring ? T_PROBE : T_READ, 0,
		  &err);
	if (!t)
		return err;
	for (uint32_t i = 0; i < fw->ngone; i++) {
		const struct gone *g = &fw->gone[i];

		if (g->dev != t->dev || g->ino != t->ino)
			continue;
		/* dropped before (moved out and back, its directory away): the
		 * same file if its head is the same and it is not shorter */
		if (t->head_len >= g->head_len && t->size >= g->off &&
		    XXH64(t->head, g->head_len, 0) == g->head_sum) {
			t->state = T_READ;
			t->off = t->seen = g->off;
			if (g->off > 0)
				shmrun_task_log(task,
						"input '%s' (was '%s') is followed again: reading "
						"on from offset %" PRIu64,
						t->path, g->path, g->off);
		}
		forget(fw, i); /* else another file on a reused inode */
		break;
	}
	if (t->state == T_PROBE)
		probe(fw, t, now_ns());
	return 0;
}

/*
 * The listing of watch @k failed (list_watch()): keep its tracked files in
 * what could not be listed, and say so once per watch and errno.
 */
static void listing_failed(struct shmrun_task *task, struct follow *fw, uint32_t k)
{
	const char *what = fw->lall || !fw->nlfail ? fw->w[k].pat : fw->lfail[0];
	int err = fw->lerr;
	uint32_t n = 0;

	for (uint32_t i = 0; i < fw->nf; i++) {
		struct tfile *t = fw->f[i];

		if (t->watch == k && in_failed(fw, t->path)) {
			t->named = true; /* not a listing: not rotated away */
			n++;
		}
	}
	if (fw->w[k].warned_err == err)
		return;
	fw->w[k].warned_err = err;
	if (err == EMFILE || err == ENFILE) {
		fd_limit_warn(task, fw, what, err);
		return;
	}
	shmrun_task_warn(task,
			 "cannot list '%s': %s: its %u tracked files are kept as they are "
			 "(none is taken for rotated away); listing again every %" PRIu64 " ms",
			 what, strerror(err), n, fw->poll_ns / 1000000);
}

static int scan(struct shmrun_task *task, struct follow *fw)
{
	int64_t now = now_ns();
	int err = 0;

	fw->deferred = false;
	for (uint32_t i = 0; i < fw->nf; i++) {
		fw->f[i]->was_named = fw->f[i]->named;
		fw->f[i]->named = false;
	}
	for (uint32_t k = 0; k < fw->nw && !err; k++) {
		if (!fw->w[k].owned)
			continue;
		err = list_watch(fw, k, false, scan_one, task);
		if (err)
			break;
		if (fw->lerr) { /* not a whole listing: what it missed stays as it is */
			listing_failed(task, fw, k);
		} else if (fw->w[k].warned_err) {
			shmrun_task_log(task, "'%s' can be listed again", fw->w[k].pat);
			fw->w[k].warned_err = 0;
		}
	}
	/* renamed away (logrotate's create) just now: the grace before it is
	 * finished counts from here, not from its last growth. A writer still
	 * appends to it until it reopens its log; counted from a growth long
	 * ago, the file was closed at once and those lines were lost. (A
	 * listing that failed kept its files named: listing_failed()) */
	for (uint32_t i = 0; i < fw->nf; i++)
		if (fw->f[i]->was_named && !fw->f[i]->named)
			fw->f[i]->changed_ns = now;
	/* a fresh start reads whole every file there at the start, also those
	 * left for later (no fd to spare): only then do new files get probed */
	if (!fw->deferred)
		fw->first_scan_done = true;
	if (!fw->deferred && fw->fd_warned) {
		shmrun_task_log(task, "every followed file has an fd again");
		fw->fd_warned = 0;
	}
	fw->rescan = false;
	if (err)
		shmrun_task_error(task, "following files: %s", strerror(-err));
	return err;
}

/*
 * @t (READ) was truncated in place (copytruncate): its copies take over
 * from its offset; it is read again from 0.
 */
static int truncated(struct shmrun_task *task, struct follow *fw, struct tfile *t)
{
	uint64_t x = t->off;
	int err = scan(task, fw); /* the copy may be new since the last scan */

	if (err)
		return err;
	/* a new file holding its head, or the start of it (a copy made while
	 * it was shorter: its head grew since). The copy's head is read again
	 * here: a PROBE file found while cp was still writing it (empty, or a
	 * part) is checked only later in this same check() turn, and with its
	 * stale head it was not taken for the copy, then read from 0 once the
	 * truncated original's head no longer matched it: every line twice */
	for (uint32_t i = 0; i < fw->nf; i++) {
		struct tfile *c = fw->f[i];
		uint32_t n;

		if (c->state != T_PROBE || read_head(c) < 0)
			continue;
		n = c->head_len < t->head_len ? c->head_len : t->head_len;
		if (n > 0 && memcmp(c->head, t->head, n) == 0) {
			c->state = T_HELD;
			c->copy_dev = t->dev;
			c->copy_ino = t->ino;
		}
	}
	if (release_copies(task, fw, t, x) == 0 && x > 0)
		shmrun_task_warn(
		    task,
		    "input '%s' was truncated in place (copytruncate?) after %" PRIu64
		    " bytes were read: reading it again from 0; no copy of it was found "
		    "among the followed files, so lines written after the last read and "
		    "before the truncation are lost (match the rotated copy, e.g. "
		    "match = %s*)",
		    t->path, x, strrchr(t->path, '/') ? strrchr(t->path, '/') + 1 : t->path);
	t->off = t->seen = 0;
	return read_head(t);
}

/*
 * A parked file (fd closed: more than max_open_files were open): reopen it
 * when its name still points to its inode and it changed. Return: whether
 * it is open again (*@st its fstat).
 */
static bool unpark(struct follow *fw, struct tfile *t, struct stat *st)
{
	int fd;

	(void)fw;
	if (stat(t->path, st) < 0 || (uint64_t)st->st_dev != t->dev ||
	    (uint64_t)st->st_ino != t->ino ||
	    ((uint64_t)st->st_size == t->size && id_mtime(st) == t->mtime_ns))
		return false; /* unchanged, or renamed: a scan finds its new name */
	fd = open(t->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return false;
	if (fstat(fd, st) < 0 || (uint64_t)st->st_dev != t->dev || (uint64_t)st->st_ino != t->ino) {
		close(fd);
		return false;
	}
	t->fd = fd;
	fw->nopen++;
	return true;
}

/*
 * Keep at most max_open_files open: close the fds of the READ files read
 * to their end under a matching name, least recently changed first. A
 * parked file is reopened by name when it changes (unpark()).
 */
static void park(struct follow *fw, uint32_t target)
{
	while (fw->nopen > target) {
		struct tfile *oldest = NULL;

		for (uint32_t i = 0; i < fw->nf; i++) {
			struct tfile *t = fw->f[i];

			if (t->fd >= 0 && t->state == T_READ && t->named && t->seen >= t->size &&
			    (!oldest || t->changed_ns < oldest->changed_ns))
				oldest = t;
		}
		if (!oldest)
			return; /* all busy: more open for now */
		close(oldest->fd);
		oldest->fd = -1;
		fw->nopen--;
	}
}

/* fstat each tracked file (fw->check_all) or those with events, and PROBE
 * files: growth, truncation, PROBE decisions. */
static int check(struct shmrun_task *task, struct follow *fw, int64_t now)
{
	for (uint32_t i = 0; i < fw->nf; i++) {
		struct tfile *t = fw->f[i];
		struct stat st;
		uint64_t size;

		if (!fw->check_all && !t->dirty && t->state != T_PROBE)
			continue;
		t->dirty = false;
		if (t->fd < 0 && !unpark(fw, t, &st))
			continue;
		if (t->fd >= 0 && fstat(t->fd, &st) < 0)
			continue;
		size = (uint64_t)st.st_size;
		/* the mtime too: truncated and grown back to the same size */
		if (size != t->size || id_mtime(&st) != t->mtime_ns) {
			bool shrank = size < t->size;

			t->size = size;
			t->mtime_ns = id_mtime(&st);
			t->changed_ns = now;
			if (t->state == T_READ) {
				unsigned char old[HEAD_MAX];
				uint32_t len = t->head_len;
				int err;

				memcpy(old, t->head, len);
				if (read_head(t) < 0)
					continue;
				if (shrank || t->head_len < len || memcmp(old, t->head, len) != 0) {
					memcpy(t->head, old,
					       len); /* its copies carry the old head */
					t->head_len = len;
					err = truncated(task, fw, t);
					if (err)
						return err;
				}
			}
		}
		if (t->state == T_PROBE)
			probe(fw, t, now);
	}
	fw->check = fw->check_all = false;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Reading */

static int flush_lines(struct shmrun_task *task, struct follow *fw)
{
	uint32_t n = fw->nlines;

	if (!n)
		return 0;
	fw->nlines = 0;
	shmrun_task_count(task, SHMRUN_COUNT_RECORDS_IN, n);
	return shmrun_emit_batch(task, fw->lines, n);
}

static int queue_line(struct shmrun_task *task, struct follow *fw, const unsigned char *v,
		      size_t len)
{
	if (len > UINT32_MAX - 64) {
		shmrun_task_error(task, "a line of %zu bytes is longer than a record can be", len);
		return -EMSGSIZE;
	}
	fw->lines[fw->nlines++] = (struct shmrun_record){.value = v, .value_len = (uint32_t)len};
	return fw->nlines == FLINES ? flush_lines(task, fw) : 0;
}

/*
 * Emit @t's whole lines from t->off, up to *@budget of them; @final: also a
 * last line without '\n' (a finished file). Return: 0, or -errno after a
 * message.
 */
static int read_lines(struct shmrun_task *task, struct follow *fw, struct tfile *t,
		      uint32_t *budget, bool final)
{
	size_t lo = 0, hi = 0, scanned = 0;
	int err = 0;

	while (*budget > 0) {
		unsigned char *nl = memchr(fw->buf + lo + scanned, '\n', hi - lo - scanned);
		ssize_t n;

		if (nl) {
			size_t len = (size_t)(nl - (fw->buf + lo));

			err = queue_line(task, fw, fw->buf + lo, len);
			lo += len + 1;
			t->off += len + 1;
			scanned = 0;
			(*budget)--;
			if (err)
				return err;
			continue;
		}
		scanned = hi - lo;
		err = flush_lines(task, fw); /* the buffer moves */
		if (err)
			return err;
		memmove(fw->buf, fw->buf + lo, hi - lo);
		hi -= lo;
		lo = 0;
		if (shmrun_grow(&fw->buf, &fw->cap, hi + 1, 1, FREAD_BYTES))
			return -ENOMEM;
		do
			n = pread(t->fd, fw->buf + hi, fw->cap - hi, (off_t)(t->off + hi));
		while (n < 0 && errno == EINTR);
		if (n < 0) {
			shmrun_task_error(task, "reading '%s': %s", t->path, strerror(errno));
			return -errno;
		}
		if (n == 0)
			break;
		hi += (size_t)n;
		if (t->off + hi > t->size) {
			t->size = t->off + hi;
			t->changed_ns = now_ns();
		}
	}
	if (*budget == 0) {
		t->seen = t->off; /* lines left in the buffer: read them at the next call */
	} else if (final && hi > lo) {
		err = queue_line(task, fw, fw->buf + lo, hi - lo);
		t->off += hi - lo;
		t->seen = t->off;
		(*budget)--;
	} else {
		t->seen = t->off + (hi - lo);
	}
	return err ? err : flush_lines(task, fw);
}

/*
 * Files no matching name points to any more (rotated away, deleted): a READ
 * one read to its end and unchanged for one poll_interval is finished (its
 * last line without '\n' emitted) and dropped; HELD and PROBE ones are
 * dropped.
 */
static int finish(struct shmrun_task *task, struct follow *fw, int64_t now, uint32_t *budget)
{
	for (uint32_t i = 0; i < fw->nf;) {
		struct tfile *t = fw->f[i];
		int err;

		if (t->named ||
		    (t->state == T_READ &&
		     (t->seen < t->size || now - t->changed_ns < (int64_t)fw->poll_ns))) {
			i++;
			continue;
		}
		if (t->state == T_READ && t->fd >= 0) {
			if (*budget == 0)
				return 0; /* at the next call */
			err = read_lines(task, fw, t, budget, true);
			if (err)
				return err;
			if (t->seen < t->size) { /* grew meanwhile */
				i++;
				continue;
			}
		}
		if (t->state == T_READ) {
			/* its copies go on where it stopped (a file replaced by a
			 * longer copy of itself: the new lines are read) */
			release_copies(task, fw, t, t->off);
			remember_file(fw, t, t->off);
		} else if (t->state == T_HELD) {
			const struct tfile *o = find_ino(fw, t->copy_dev, t->copy_ino);

			/* its bytes up to where its original was read are read */
			if (o)
				remember_file(fw, t, o->off < t->size ? o->off : t->size);
		}
		untrack(fw, i);
	}
	return 0;
}

/* Drain the inotify fd: directory events (and an overflow) ask for a rescan
 * and a check of every file, a file's events for a check of that file. */
static void drain_events(struct follow *fw)
{
	char ev[4096] __attribute__((aligned(__alignof__(struct inotify_event))));

	for (;;) {
		ssize_t n = read(fw->ino, ev, sizeof(ev));

		if (n <= 0)
			return;
		for (char *p = ev; p < ev + n;) {
			const struct inotify_event *e = (const struct inotify_event *)(void *)p;
			bool dir = e->wd < 0 || (e->mask & IN_Q_OVERFLOW);

			for (uint32_t k = 0; k < fw->nw && !dir; k++)
				dir = fw->w[k].wd == e->wd;
			if (dir)
				fw->rescan = fw->check_all = true;
			for (uint32_t i = 0; i < fw->nf && !dir; i++) {
				if (fw->f[i]->wd == e->wd) {
					fw->f[i]->dirty = fw->check = true;
					break;
				}
			}
			p += sizeof(*e) + e->len;
		}
	}
}

/* ------------------------------------------------------------------ */
/* Restore */

static int parse(struct shmrun_task *task, const unsigned char *e, uint32_t len, struct fol_head *h)
{
	uint32_t at = sizeof(*h);

	if (len < sizeof(*h))
		goto bad;
	memcpy(h, e, sizeof(*h));
	if (h->magic != FOLLOW_MAGIC) {
		shmrun_task_error(task,
				  "restored read position is not one of a following file_source "
				  "(follow = true); start over with STREAM_RESET_STATE=1");
		return -EBADMSG;
	}
	for (uint32_t i = 0; i < h->nfiles + h->ngone; i++) {
		struct fol_file ff;

		if (i >= h->nfiles && i - h->nfiles >= GONE_MAX)
			goto bad;
		if (len - at < sizeof(ff))
			goto bad;
		memcpy(&ff, e + at, sizeof(ff));
		at += (uint32_t)sizeof(ff);
		if (ff.path_len == 0 || ff.path_len >= PATH_MAX || len - at < ff.path_len ||
		    ff.head_len > HEAD_MAX)
			goto bad;
		at += ff.path_len;
	}
	if (at == len)
		return 0;
bad:
	shmrun_task_error(
	    task, "restored read position of a following source is malformed (%u bytes)", len);
	return -EBADMSG;
}

int shmrun_follow_check_restore(struct shmrun_task *task, const void *entry, uint32_t len)
{
	struct fol_head h;

	return parse(task, entry, len, &h);
}

int shmrun_follow_restore(struct shmrun_task *task, struct follow *fw, const void *entry,
			  uint32_t len)
{
	const unsigned char *e = entry;
	const char *dir = shmrun_task_conf_dir(task);
	struct fol_head h;
	uint32_t at = sizeof(h);
	int err = parse(task, e, len, &h);

	if (err)
		return err;
	if (h.nwatches != fw->nw || h.watch >= fw->nw) {
		shmrun_task_error(
		    task,
		    "restored read positions are of %u path entries, path = now has %u: "
		    "start over with STREAM_RESET_STATE=1 to follow other files",
		    h.nwatches, fw->nw);
		return -EBADMSG;
	}
	fw->w[h.watch].owned = true;
	for (uint32_t i = 0; i < h.nfiles + h.ngone; i++) {
		struct fol_file ff;
		struct saved *s;
		char *p;

		memcpy(&ff, e + at, sizeof(ff));
		at += (uint32_t)sizeof(ff);
		if (e[at] == '/' || !dir)
			p = strndup((const char *)e + at, ff.path_len);
		else if (asprintf(&p, "%s/%.*s", dir, (int)ff.path_len, (const char *)e + at) < 0)
			p = NULL;
		at += ff.path_len;
		if (p && i >= h.nfiles) { /* remembered: not tracked when saved */
			remember(fw, h.watch, ff.dev, ff.ino, ff.off, ff.head_sum, ff.head_len, p);
			free(p);
			continue;
		}
		if (!p || shmrun_grow_u32(&fw->sv, &fw->capsv, (size_t)fw->nsv + 1, sizeof(*fw->sv),
					  16)) {
			free(p);
			return -ENOMEM;
		}
		s = &fw->sv[fw->nsv++];
		*s = (struct saved){h.watch, ff.dev, ff.ino, ff.off, ff.head_sum, ff.head_len, p};
	}
	return 0;
}

struct cand {
	char *path;
	uint32_t watch;
	struct stat st;
};

struct cands {
	struct cand *c;
	uint32_t n, cap;
};

static int add_cand(struct follow *fw, uint32_t k, const char *path, const struct stat *st,
		    void *arg)
{
	struct cands *cs = arg;

	(void)fw;
	if (shmrun_grow_u32(&cs->c, &cs->cap, (size_t)cs->n + 1, sizeof(*cs->c), 16))
		return -ENOMEM;
	cs->c[cs->n] = (struct cand){strdup(path), k, *st};
	return cs->c[cs->n++].path ? 0 : -ENOMEM;
}

/* Whether @path's first @len bytes hash to @sum and it has at least @need bytes. */
static bool head_is(const char *path, uint32_t len, uint64_t sum, uint64_t need)
{
	unsigned char b[HEAD_MAX];
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	struct stat st;
	bool ok = false;

	if (fd < 0)
		return false;
	if (fstat(fd, &st) == 0 && (uint64_t)st.st_size >= need && (uint64_t)st.st_size >= len &&
	    pread(fd, b, len, 0) == (ssize_t)len)
		ok = XXH64(b, len, 0) == sum;
	close(fd);
	return ok;
}

/* Find the saved files (see the comment at the top); then the rest is new. */
static int resolve(struct shmrun_task *task, struct follow *fw)
{
	struct cands all = {0}, matched = {0};
	bool *found = calloc(fw->nsv + 1, sizeof(*found));
	int err = found ? 0 : -ENOMEM;

	for (uint32_t k = 0; k < fw->nw && !err; k++) {
		if (!fw->w[k].owned)
			continue;
		err = list_watch(fw, k, true, add_cand, &all);
		if (!err && fw->lerr)
			listing_failed(task, fw, k);
		if (!err)
			err = list_watch(fw, k, false, add_cand, &matched);
		if (!err && fw->lerr)
			listing_failed(task, fw, k);
	}
	/* by inode, with the same head (not a reused inode) and not shorter */
	for (uint32_t i = 0; i < fw->nsv && !err; i++) {
		const struct saved *s = &fw->sv[i];

		for (uint32_t j = 0; j < all.n && !found[i] && !err; j++) {
			const struct cand *c = &all.c[j];

			if ((uint64_t)c->st.st_dev != s->dev || (uint64_t)c->st.st_ino != s->ino ||
			    find_ino(fw, s->dev, s->ino) ||
			    !head_is(c->path, s->head_len, s->head_sum, s->off))
				continue;
			found[i] = track(task, fw, s->watch, c->path, T_READ, s->off, &err) != NULL;
			if (found[i] && strcmp(c->path, s->path) != 0)
				shmrun_task_log(
				    task, "input '%s' is now '%s': reading on from offset %" PRIu64,
				    s->path, c->path, s->off);
		}
	}
	/* else a copy among the matching files not tracked */
	for (uint32_t i = 0; i < fw->nsv && !err; i++) {
		const struct saved *s = &fw->sv[i];

		for (uint32_t j = 0; j < matched.n && !found[i] && !err; j++) {
			const struct cand *c = &matched.c[j];

			if (c->watch != s->watch ||
			    find_ino(fw, (uint64_t)c->st.st_dev, (uint64_t)c->st.st_ino) ||
			    s->head_len == 0 || !head_is(c->path, s->head_len, s->head_sum, 0))
				continue;
			if ((uint64_t)c->st.st_size < s->off) {
				/* a copy of bytes all read already: nothing to read in it */
				track(task, fw, s->watch, c->path, T_READ, (uint64_t)c->st.st_size,
				      &err);
				continue;
			}
			found[i] = track(task, fw, s->watch, c->path, T_READ, s->off, &err) != NULL;
			if (found[i])
				shmrun_task_log(
				    task,
				    "input '%s' was rotated while the job was down; its "
				    "copy '%s' is read from offset %" PRIu64,
				    s->path, c->path, s->off);
		}
		if (found[i] || err)
			continue;
		/* found later by (dev, ino) and head: read on from its offset */
		remember(fw, s->watch, s->dev, s->ino, s->off, s->head_sum, s->head_len, s->path);
		if (!fw->w[s->watch].warned_err && !fw->deferred) /* else said why */
			shmrun_task_warn(
			    task,
			    "input '%s' (read up to offset %" PRIu64 " at checkpoint "
			    "epoch %" PRIu64 ") is gone, truncated or replaced, and no "
			    "followed file holds its first bytes: lines after that offset, "
			    "if any, are lost (unless it comes back)",
			    s->path, s->off, shmrun_task_restored_epoch(task));
	}
	for (uint32_t j = 0; j < all.n; j++)
		free(all.c[j].path);
	for (uint32_t j = 0; j < matched.n; j++)
		free(matched.c[j].path);
	free(all.c);
	free(matched.c);
	free(found);
	for (uint32_t i = 0; i < fw->nsv; i++)
		free(fw->sv[i].path);
	free(fw->sv);
	fw->sv = NULL;
	fw->nsv = fw->capsv = 0;
	fw->resolved = true;
	if (err) {
		shmrun_task_error(task, "following files: %s", strerror(-err));
		return err;
	}
	return scan(task, fw);
}

/* Watch the directories of the owned watches (their new files). */
static void watch_dirs(struct shmrun_task *task, struct follow *fw)
{
	for (uint32_t k = 0; k < fw->nw && fw->ino >= 0; k++) {
		struct stat st;
		char *copy;

		if (!fw->w[k].owned)
			continue;
		if (stat(fw->w[k].pat, &st) == 0 && S_ISDIR(st.st_mode)) {
			fw->w[k].wd = add_wd(task, fw, fw->w[k].pat, DIR_EVENTS);
			continue;
		}
		copy = strdup(fw->w[k].pat);
		if (copy && !strpbrk(dirname(copy), "*?[")) /* a pattern's directories: polled */
			fw->w[k].wd = add_wd(task, fw, copy, DIR_EVENTS);
		free(copy);
	}
}

/* ------------------------------------------------------------------ */
/* The operator's calls */

int shmrun_follow_open(struct shmrun_task *task, struct follow **out)
{
	struct follow *fw = calloc(1, sizeof(*fw));
	uint32_t width = shmrun_task_width(task), me = shmrun_task_instance(task);
	char *paths = NULL, *save = NULL;
	struct rlimit rl;
	int err;

	*out = fw;
	if (!fw)
		return -ENOMEM;
	fw->ino = -1;
	fw->match = shmrun_task_param(task, "match");
	fw->poll_ns = shmrun_task_param_u64(task, "poll_interval", 250000000ull);
	fw->max_open_key = shmrun_task_param_u64(task, "max_open_files", 1024);
	fw->max_open = (uint32_t)fw->max_open_key;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
		/* leave fds to the checkpoint, the rings and the other instances
		 * of the worker (at most width of them) */
		uint64_t room =
		    rl.rlim_cur > 2 * FD_RESERVE ? rl.rlim_cur - FD_RESERVE : rl.rlim_cur / 2;

		fw->nofile = rl.rlim_cur;
		room /= width;
		if (room < 1)
			room = 1;
		if (room < fw->max_open)
			fw->max_open = (uint32_t)room; /* said when it is reached: track() */
	}
	fw->restoring = shmrun_task_restoring(task);
	fw->cap = FREAD_BYTES;
	fw->buf = malloc(fw->cap);
	if (!fw->buf)
		return -ENOMEM;
	err = shmrun_file_source_paths(task, &paths);
	if (err)
		return err;
	for (char *tok = strtok_r(paths, "\n", &save); tok && !err;
	     tok = strtok_r(NULL, "\n", &save)) {
		uint32_t cap = fw->nw;

		if (shmrun_grow_u32(&fw->w, &cap, (size_t)fw->nw + 1, sizeof(*fw->w), 1) ||
		    !(fw->w[fw->nw].pat = strdup(tok))) {
			err = -ENOMEM;
			break;
		}
		fw->w[fw->nw] = (struct watch){
		    .pat = fw->w[fw->nw].pat,
		    .wd = -1,
		    /* a fresh start owns watch k mod width; a restore the watches of its entries */
		    .owned = !fw->restoring && fw->nw % width == me,
		};
		fw->nw++;
	}
	free(paths);
	if (err)
		return err;
	if (no_inotify_switch()) {
		shmrun_task_log(
		    task,
		    "SHMRUN_TEST_NO_INOTIFY=1: following files by polling every %" PRIu64 " ms",
		    fw->poll_ns / 1000000);
	} else {
		fw->ino = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
		if (fw->ino < 0)
			shmrun_task_warn(
			    task,
			    "inotify_init1: %s: following files by polling every %" PRIu64 " ms",
			    strerror(errno), fw->poll_ns / 1000000);
	}
	return 0;
}

int shmrun_follow_produce(struct shmrun_task *task, struct follow *fw, uint32_t budget)
{
	int64_t now = now_ns();
	int err = 0;

	if (!fw->resolved) {
		watch_dirs(task, fw);
		err = resolve(task, fw);
		if (err)
			return err;
		fw->next_poll = now + (int64_t)fw->poll_ns;
		fw->check_all = true;
	}
	if (fw->ino >= 0)
		drain_events(fw);
	if (now >= fw->next_poll) {
		fw->rescan = fw->check_all = true;
		fw->next_poll = now + (int64_t)fw->poll_ns;
	}
	if (fw->rescan)
		err = scan(task, fw);
	if (!err && (fw->check || fw->check_all))
		err = check(task, fw, now);
	for (uint32_t i = 0; i < fw->nf && !err && budget > 0; i++) {
		struct tfile *t = fw->f[i];

		if (t->state == T_READ && t->seen < t->size)
			err = read_lines(task, fw, t, &budget, false);
	}
	if (!err)
		err = finish(task, fw, now, &budget);
	if (!err && fw->deferred) {
		/* files wait for an fd: close half of those idle, then scan */
		park(fw, fw->max_open / 2);
		if (fw->nopen < fw->max_open)
			fw->rescan = true;
	} else if (!err) {
		park(fw, fw->max_open);
	}
	return err ? err : 1;
}

int shmrun_follow_snapshot(struct shmrun_task *task, struct follow *fw)
{
	const char *dir = shmrun_task_conf_dir(task);
	size_t dl = dir ? strlen(dir) : 0;
	int err;

	if (!fw->resolved) { /* restored, not produced yet: find the files first */
		watch_dirs(task, fw);
		err = resolve(task, fw);
		if (err)
			return err;
	}
	for (uint32_t k = 0; k < fw->nw; k++) {
		struct fol_head h = {FOLLOW_MAGIC, k, fw->nw, 0, 0};
		size_t len = sizeof(h);

		if (!fw->w[k].owned)
			continue;
		for (uint32_t i = 0; i < fw->nf + fw->ngone; i++) {
			const struct tfile *t = i < fw->nf ? fw->f[i] : NULL;
			const struct gone *g = t ? NULL : &fw->gone[i - fw->nf];
			const char *p = t ? t->path : g->path;
			struct fol_file ff;

			if (t && (t->watch != k || t->state != T_READ))
				continue;
			if (g && g->watch != k)
				continue;
			if (dl > 1 && strncmp(p, dir, dl) == 0 && p[dl] == '/' && p[dl + 1])
				p += dl + 1; /* relative to the conf file's directory */
			if (t)
				ff = (struct fol_file){t->dev,	    t->ino,
						       t->off,	    XXH64(t->head, t->head_len, 0),
						       t->head_len, (uint32_t)strlen(p)};
			else
				ff = (struct fol_file){g->dev,	    g->ino,
						       g->off,	    g->head_sum,
						       g->head_len, (uint32_t)strlen(p)};
			if (shmrun_grow(&fw->entry, &fw->entry_cap, len + sizeof(ff) + ff.path_len,
					1, 4096))
				return -ENOMEM;
			memcpy(fw->entry + len, &ff, sizeof(ff));
			memcpy(fw->entry + len + sizeof(ff), p, ff.path_len);
			len += sizeof(ff) + ff.path_len;
			if (t)
				h.nfiles++;
			else
				h.ngone++;
		}
		if (shmrun_grow(&fw->entry, &fw->entry_cap, len, 1, 4096))
			return -ENOMEM;
		memcpy(fw->entry, &h, sizeof(h));
		if (len > UINT32_MAX)
			return -E2BIG;
		err = shmrun_pw_add(task, fw->entry, (uint32_t)len);
		if (err)
			return err;
	}
	return 0;
}

void shmrun_follow_close(struct follow *fw)
{
	if (!fw)
		return;
	while (fw->nf)
		untrack(fw, fw->nf - 1);
	for (uint32_t k = 0; k < fw->nw; k++)
		free(fw->w[k].pat);
	for (uint32_t i = 0; i < fw->nsv; i++)
		free(fw->sv[i].path);
	for (uint32_t i = 0; i < fw->ngone; i++)
		free(fw->gone[i].path);
	free(fw->gone);
	while (fw->nlfail)
		free(fw->lfail[--fw->nlfail]);
	free(fw->lfail);
	if (fw->ino >= 0)
		close(fw->ino);
	free(fw->w);
	free(fw->f);
	free(fw->sv);
	free(fw->buf);
	free(fw->entry);
	free(fw);
}
