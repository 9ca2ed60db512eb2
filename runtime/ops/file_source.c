/*
 * runtime/ops/file_source.c: one record per line of a set of files.
 *
 * `path` names files, directories (read recursively; a symbolic link named
 * in `path` or matched by a pattern is followed, links found inside
 * directories are not) and glob patterns; `match` keeps, of the files found inside
 * directories, only those whose name matches a glob (files named directly or
 * by a pattern are always read). A name listed twice is read once; a file
 * reached by two names (a link) is read under each. The file list is sorted, so every
 * instance computes the same list and the same pieces: each file is cut into
 * pieces of at most `piece_bytes`, ending just after a '\n' (a longer line
 * makes a longer piece), and piece k goes to instance k mod width. An instance
 * reads its pieces in order, in 1 MiB reads, and emits each line without its
 * '\n' (a final line without '\n' is still a line; any byte is allowed; a line
 * may be longer than the buffer, which then grows). Empty files have no lines.
 *
 * `rate` limits the whole stage to that many records per second, however the
 * pieces fell (the worker paces every source from one counter per stage, see
 * pace.c).
 *
 * Inputs are regular files whose size is known: a FIFO, device or socket
 * named in `path` is refused before anything starts (opening a FIFO would
 * block, and a piece needs a size), and so is a file that reports size 0 but
 * has content, a file on a pseudo file system (/proc, /sys, debugfs...: its
 * reported size is not its content's) and one shorter than its reported size
 * (copy such files first). Inside directories, non-regular files are skipped.
 * A named directory that yields no file is a warning; no file at all, an error.
 * Every entry must name something: a missing file, or a pattern matching
 * nothing, is an error. Braces are expanded by expand_paths() before glob(3)
 * (not by GLOB_BRACE), so that each alternative is an entry of its own under
 * that rule: glob(GLOB_BRACE | GLOB_NOCHECK) drops an alternative that matches
 * nothing as soon as another one matches, and `{a,b}.txt` without b.txt ran
 * without a word. The expansion reads braces as preflight.c does.
 *
 * Origins (ops.h): each batch is emitted with shmrun_emit_batch_origin(), so
 * an operator directly behind on a forward edge (extract, for its bad-line
 * messages) may ask where a record was read: source_describe() gives
 * "path:line". The line number is not tracked while reading (a piece may
 * start mid-file, and its line number would need every byte before it
 * counted); it is counted when asked, from the record's byte offset (known
 * from where its bytes lie in the read buffer), by pread()ing the file from
 * the last count (same file, lower offset) or from 0. Nothing per line on the
 * data path; one pointer store per batch. Restored read positions are byte
 * offsets too, so line numbers after a restore need nothing saved.
 *
 * A file is read up to the size it had when the job first listed it (at the
 * first start, not on a restore): bytes appended later are not read, by this
 * run or by any resumed one; start fresh (STREAM_RESET_STATE=1) to read them.
 *
 * Per-worker state (rule split): one entry per piece not yet fully read, the
 * current one first:
 *
 *     struct pos_entry (72 bytes: magic, offset, end, the file's identity at
 *     the first start — st_dev, st_ino, size, mtime — and XXH64 of the
 *     `window` bytes just before offset, window = min(offset, 4 KiB))
 *     [path bytes: relative to the conf file's directory when the file lies
 *      under it, so a job directory moved between stop and resume still
 *      finds it; absolute otherwise]
 *
 * A move within one file system keeps device and inode, so the identity
 * check passes; a copy (cp -a, a move across file systems) gives new inodes,
 * and the restore refuses it as replaced.
 *
 * A restore checks each entry's file against its identity and refuses, naming
 * the file and what changed, one that was replaced (other device or inode),
 * shrank, was modified in place (same size, other mtime) or whose bytes just
 * before the offset differ; reading from the old offset would tear lines. A
 * file that only grew is accepted (read up to the recorded size, see above).
 * Only a bounded window before the offset is checksummed, so a restore costs
 * one small read per entry; a change further back in a file that kept its
 * inode, size and mtime is not seen. Entries of the older format ([u64
 * offset][u64 end][path], no identity) are still restored, unchecked. On a restore
 * (shmrun_task_restoring()) open() lists no file and cuts no piece: the
 * instance's pieces are exactly the entries restore() gets, so reading resumes
 * at the first line not yet emitted before the checkpoint's barrier, and an
 * instance given no entry (it had finished) reads nothing.
 *
 * `follow = true` (follow.c) is another source behind the same keys: open()
 * gives s->fw, and every call below hands over to follow.c when it is set
 * (check_restore(), without state, looks at the key). It shares `path`,
 * `match` and the checks before the start (prepare(), which then accepts a
 * directory without files), not the pieces: a growing file has no end to cut
 * at. Its entries are one per watch, under the same rule split (follow.c says
 * why that is right for it too).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <fnmatch.h>
#include <ftw.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "follow.h"
#include "input_check.h"
#include "ops.h"

#define READ_BYTES (1u << 20)
#define LINES_PER_EMIT 256u               /* lines handed on in one shmrun_emit_batch() */
#define WINDOW_BYTES 4096u                 /* checksummed before a saved offset */
#define SCAN_BYTES (64u << 10)             /* read at a time to count lines (origins) */
#define POS_MAGIC 0x3250534652524d48ull    /* "HMRRFSP2": a pos_entry */

/* What identifies a file's content as of the first start. */
struct file_id {
	uint64_t dev, ino, size;
	int64_t mtime_ns;
};

/* A per-worker entry, followed by the path bytes (host byte order). */
struct pos_entry {
	uint64_t magic; /* POS_MAGIC */
	uint64_t off, end;
	struct file_id id;
	uint64_t sum;    /* XXH64 (seed 0) of the window bytes before off */
	uint32_t window; /* min(off, WINDOW_BYTES) */
	uint32_t pad;
};

struct piece {
	uint32_t file;
	uint64_t off, end;
	uint64_t sum;    /* XXH64 of the window before off */
	uint32_t window;
};

struct file_list {
	char **files;
	uint32_t n, cap;
	const char *match;
	int err;
};

struct source {
	struct follow *fw;    /* follow = true: all of it is there (follow.c) */
	struct file_list fl;
	struct file_id *ids;  /* per file of fl: its identity at the first start */
	bool *checked;        /* per file of fl: restored identity checked (or old format) */
	uint32_t ids_cap;
	struct piece *pieces; /* this instance's */
	uint32_t npieces, cur, cap_pieces;
	bool unsorted;        /* restored pieces, put in (file, offset) order before use */
	int fd;
	uint64_t pos;        /* file offset of buf[lo] */
	unsigned char *buf;
	size_t cap, lo, hi;  /* unread bytes are buf[lo, hi) */
	struct shmrun_record lines[LINES_PER_EMIT]; /* read, not yet emitted (into buf) */
	uint32_t nlines;
	/* origins of the lines emitted (source_describe()) */
	struct shmrun_origin origin;
	unsigned char *scan;  /* counting buffer, SCAN_BYTES, allocated at first use */
	uint32_t nl_file;     /* file (index in fl) of the last count, UINT32_MAX: none */
	uint64_t nl_off;      /* offset counted up to in it */
	uint64_t nl_count;    /* '\n' in [0, nl_off) of it */
	/* progress (shmrun_task_source_progress()): bytes of the pieces left at
	 * the first produce() of this start, and of those finished since */
	bool prog_known;
	uint64_t prog_total, prog_done;
};

static struct file_list *walk_list; /* nftw has no user pointer */
/* A directory named through a symbolic link is walked as "link/." (nftw's
 * FTW_PHYS would not enter the link itself); its files are listed as
 * "link/name": walk_top is "link", walk_skip the length of "link/." */
static const char *walk_top;
static size_t walk_skip;

static int add_file(struct file_list *fl, const char *path, bool filter)
{
	const char *base = strrchr(path, '/');

	if (filter && fl->match && fnmatch(fl->match, base ? base + 1 : path, 0) != 0)
		return 0;
	if (shmrun_grow_u32(&fl->files, &fl->cap, (size_t)fl->n + 1, sizeof(*fl->files), 64))
		return -ENOMEM;
	fl->files[fl->n] = strdup(path);
	if (!fl->files[fl->n])
		return -ENOMEM;
	fl->n++;
	return 0;
}

static int walk_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)ftw;
	if (type == FTW_F && S_ISREG(st->st_mode)) {
		char *p;
		int err;

		if (!walk_top)
			return add_file(walk_list, path, true) ? 1 : 0;
		if (asprintf(&p, "%s%s", walk_top, path + walk_skip) < 0)
			return 1;
		err = add_file(walk_list, p, true);
		free(p);
		return err ? 1 : 0;
	}
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_list(struct file_list *fl)
{
	for (uint32_t i = 0; i < fl->n; i++)
		free(fl->files[i]);
	free(fl->files);
	memset(fl, 0, sizeof(*fl));
}

/* An entry list being built: *out, a malloc'd string of '\n'-terminated
 * entries, *len bytes. */
struct entries {
	char **out;
	size_t *len;
};

/* shmrun_brace_expand()'s emit: append @alt as one entry. */
static int append_entry(void *arg, const char *alt)
{
	struct entries *e = arg;
	size_t n = strlen(alt);
	char *o = realloc(*e->out, *e->len + n + 2);

	if (!o)
		return -ENOMEM;
	memcpy(o + *e->len, alt, n);
	o[*e->len + n] = '\n';
	o[*e->len + n + 1] = '\0';
	*e->out = o;
	*e->len += n + 1;
	return 0;
}

/*
 * Append to *@out (*@len bytes) every alternative of the brace pattern @pat
 * (shmrun_brace_expand(), util.h: as preflight.c reads it). Each alternative
 * is then listed as its own `path` entry, so a missing file or a pattern
 * matching nothing is an error as if written alone (glob(GLOB_BRACE) dropped
 * such an alternative silently when another matched). Return: as
 * shmrun_brace_expand().
 */
static int brace_expand(char **out, size_t *len, const char *pat, uint32_t *count)
{
	struct entries e = {out, len};

	return shmrun_brace_expand(pat, append_entry, &e, count);
}

/* `path` (resolved, one entry per line) with every brace pattern replaced by
 * its alternatives, one per line, into *@out (malloc'd). Return: 0; -E2BIG
 * (reported); -ENOMEM. */
static int expand_paths(struct shmrun_task *task, char **out)
{
	char *paths = strdup(shmrun_task_param(task, "path")), *save = NULL;
	size_t len = 0;
	int err = 0;

	*out = NULL;
	if (!paths)
		return -ENOMEM;
	for (char *tok = strtok_r(paths, "\n", &save); tok && !err;
	     tok = strtok_r(NULL, "\n", &save)) {
		uint32_t count = 0;

		err = brace_expand(out, &len, tok, &count);
		if (err == -E2BIG)
			shmrun_task_error(task,
					  "path '%s': more than %u brace alternatives; list fewer",
					  tok, SHMRUN_BRACE_MAX);
	}
	free(paths);
	if (!err && !*out)
		*out = strdup("");
	if (!err && !*out)
		err = -ENOMEM;
	if (err) {
		free(*out);
		*out = NULL;
	}
	return err;
}

int shmrun_file_source_paths(struct shmrun_task *task, char **out)
{
	return expand_paths(task, out);
}

/* Expand `path` into a sorted, de-duplicated (by name) list of regular files;
 * @warn: say when a named directory yields none (once, in prepare()). Each
 * brace alternative is an entry of its own (expand_paths()). */
static int list_files(struct shmrun_task *task, struct file_list *fl, bool warn)
{
	char *paths, *save = NULL;
	int err;

	memset(fl, 0, sizeof(*fl));
	fl->match = shmrun_task_param(task, "match");
	err = expand_paths(task, &paths);
	if (err)
		return err;
	/* resolved paths, one per line (conf.c) */
	for (char *tok = strtok_r(paths, "\n", &save); tok && !err;
	     tok = strtok_r(NULL, "\n", &save)) {
		glob_t g;
		int r = glob(tok, GLOB_NOCHECK, NULL, &g); /* braces: expand_paths() */

		if (r != 0) {
			shmrun_task_error(task, "path '%s': cannot expand", tok);
			err = -EINVAL;
			break;
		}
		for (size_t i = 0; i < g.gl_pathc && !err; i++) {
			const char *p = g.gl_pathv[i];
			struct stat st;

			if (stat(p, &st) < 0) {
				shmrun_task_error(task, "input '%s': %s%s", p, strerror(errno),
						  strpbrk(tok, "*?[") ? " (no file matches the pattern)"
								      : "");
				err = -errno;
			} else if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
				shmrun_task_error(task,
						  "input '%s' in path = is not a regular file (%s): "
						  "file_source reads regular files and directories "
						  "only; copy the data into a file first",
						  p, shmrun_file_kind(st.st_mode));
				err = -EINVAL;
			} else if (S_ISDIR(st.st_mode)) {
				struct stat lst;
				char *dot = NULL, *top;
				uint32_t before = fl->n;
				int wr;

				/* a named link to a directory is followed (only here,
				 * at the top: links inside directories are not) */
				walk_list = fl;
				walk_top = NULL;
				/* "link/" names the link too: lstat(2) would follow it
				 * because of the slash, so look at "link" */
				top = strdup(p);
				if (!top) {
					err = -ENOMEM;
					break;
				}
				for (size_t n = strlen(top); n > 1 && top[n - 1] == '/';)
					top[--n] = 0;
				if (lstat(top, &lst) == 0 && S_ISLNK(lst.st_mode)) {
					if (asprintf(&dot, "%s/.", top) < 0) {
						free(top);
						err = -ENOMEM;
						break;
					}
					walk_top = top;
					walk_skip = strlen(dot);
				}
				errno = 0;
				wr = nftw(dot ? dot : p, walk_one, 32, FTW_PHYS);
				walk_top = NULL;
				free(dot);
				free(top);
				if (wr != 0) {
					shmrun_task_error(task, "input directory '%s': %s", p,
							  strerror(errno ? errno : EIO));
					err = -EIO;
				} else if (fl->n == before && warn) {
					/* named, yet yields nothing: say so */
					shmrun_task_warn(task,
							 "input directory '%s' (in path) holds no "
							 "regular file%s%s: it adds no records",
							 p, fl->match ? " matching " : "",
							 fl->match ? fl->match : "");
				}
			} else if (access(p, R_OK) < 0) {
				shmrun_task_error(task, "input '%s': %s", p, strerror(errno));
				err = -errno;
			} else if (add_file(fl, p, false)) {
				err = -ENOMEM;
			}
		}
		globfree(&g);
	}
	free(paths);
	if (err)
		return err;
	if (fl->n > 1)
		qsort(fl->files, fl->n, sizeof(*fl->files), cmp_str);
	for (uint32_t i = 1; i < fl->n;) { /* a file named twice is read once */
		if (strcmp(fl->files[i], fl->files[i - 1]) == 0) {
			free(fl->files[i]);
			memmove(&fl->files[i], &fl->files[i + 1], (fl->n - i - 1) * sizeof(char *));
			fl->n--;
		} else {
			i++;
		}
	}
	return 0;
}

/*
 * A file whose size is not known in advance would be misread: refuse one on a
 * pseudo file system (/proc, /sys, debugfs...: its reported size is not its
 * content's), one reporting size 0 that has content, and one whose last
 * reported byte cannot be read. Return: 0, or -EINVAL after a message.
 */
static int check_sized(struct shmrun_task *task, const char *path, int fd, const struct stat *st)
{
	const char *pseudo = shmrun_pseudo_fs(fd);
	char c;

	if (pseudo || shmrun_size_overstated(fd, st->st_size)) {
		shmrun_task_error(task,
				  "input '%s' in path = is %s%s%s: its reported size (%lld bytes) "
				  "is not its content's, so file_source cannot cut it into pieces; "
				  "copy it first, e.g. cp %s data/",
				  path, pseudo ? "on a pseudo file system (" : "shorter than it says",
				  pseudo ? pseudo : "", pseudo ? ")" : "", (long long)st->st_size,
				  path);
		return -EINVAL;
	}
	if (st->st_size != 0 || pread(fd, &c, 1, 0) != 1)
		return 0;
	shmrun_task_error(task,
			  "input '%s' in path = reports size 0 but has content (a /proc or /sys "
			  "file?): file_source needs files whose size is known; copy it first, "
			  "e.g. cp %s data/",
			  path, path);
	return -EINVAL;
}

/* Open input @path for reading without blocking (a FIFO put there since). */
static int open_input(const char *path)
{
	return open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
}

static int prepare(struct shmrun_task *task)
{
	struct file_list fl;
	int err = list_files(task, &fl, true);

	for (uint32_t f = 0; !err && f < fl.n; f++) {
		struct stat st;
		int fd = open_input(fl.files[f]);

		if (fd < 0 || fstat(fd, &st) < 0) {
			shmrun_task_error(task, "input '%s': %s", fl.files[f], strerror(errno));
			err = -errno;
		} else {
			err = check_sized(task, fl.files[f], fd, &st);
		}
		if (fd >= 0)
			close(fd);
	}

	/* following, an empty directory is a place to wait for files */
	if (!err && fl.n == 0 && !shmrun_task_param_bool(task, "follow", false)) {
		shmrun_task_error(task, "no input file found under path = %s%s%s (one per line)",
				  shmrun_task_param(task, "path"),
				  fl.match ? " matching " : "", fl.match ? fl.match : "");
		err = -ENOENT;
	}
	free_list(&fl);
	return err;
}

/* Offset just past the first '\n' at or after @from, or @size. */
static int64_t next_line_start(int fd, uint64_t from, uint64_t size, unsigned char *buf)
{
	while (from < size) {
		ssize_t n = pread(fd, buf, READ_BYTES, (off_t)from);
		unsigned char *nl;

		if (n <= 0)
			return n < 0 ? -errno : (int64_t)size;
		nl = memchr(buf, '\n', (size_t)n);
		if (nl)
			return (int64_t)(from + (uint64_t)(nl - buf) + 1);
		from += (uint64_t)n;
	}
	return (int64_t)size;
}

/* XXH64 of the min(@off, WINDOW_BYTES) bytes before @off of @fd. Return: 0 or -errno. */
static int window_sum(int fd, uint64_t off, uint64_t *sum, uint32_t *window)
{
	unsigned char b[WINDOW_BYTES];
	uint32_t n = off < WINDOW_BYTES ? (uint32_t)off : WINDOW_BYTES;
	ssize_t r;

	do
		r = pread(fd, b, n, (off_t)(off - n));
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	if ((uint32_t)r != n)
		return -ENODATA; /* the file is shorter than @off */
	*sum = XXH64(b, n, 0);
	*window = n;
	return 0;
}

/* Make room for file index @f in ids/checked. Return: 0 or -ENOMEM. */
static int ids_reserve(struct source *s, uint32_t f)
{
	if (f >= s->ids_cap) {
		uint32_t icap = s->ids_cap, cap = s->ids_cap;

		if (shmrun_grow_u32(&s->ids, &icap, (size_t)f + 1, sizeof(*s->ids), 64) ||
		    shmrun_grow_u32(&s->checked, &cap, (size_t)f + 1, sizeof(*s->checked), 64))
			return -ENOMEM;
		memset(s->checked + s->ids_cap, 0, (cap - s->ids_cap) * sizeof(*s->checked));
		s->ids_cap = cap;
	}
	return 0;
}

static struct file_id id_of(const struct stat *st)
{
	return (struct file_id){(uint64_t)st->st_dev, (uint64_t)st->st_ino, (uint64_t)st->st_size,
				(int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec};
}

static int make_pieces(struct shmrun_task *task, struct source *s)
{
	uint64_t piece = shmrun_task_param_u64(task, "piece_bytes", 32u << 20), k = 0;
	uint32_t width = shmrun_task_width(task), me = shmrun_task_instance(task), cap = 0;

	if (s->fl.n && ids_reserve(s, s->fl.n - 1))
		return -ENOMEM;
	for (uint32_t f = 0; f < s->fl.n; f++) {
		int fd = open_input(s->fl.files[f]);
		struct stat st;
		uint64_t off = 0;
		int err;

		if (fd < 0 || fstat(fd, &st) < 0) {
			shmrun_task_error(task, "input '%s': %s", s->fl.files[f], strerror(errno));
			if (fd >= 0)
				close(fd);
			return -errno;
		}
		if (!S_ISREG(st.st_mode)) {
			shmrun_task_error(task, "input '%s' is no longer a regular file",
					  s->fl.files[f]);
			close(fd);
			return -EINVAL;
		}
		err = check_sized(task, s->fl.files[f], fd, &st);
		if (err) {
			close(fd);
			return err;
		}
		s->ids[f] = id_of(&st);
		while (off < (uint64_t)st.st_size) {
			uint64_t end = (uint64_t)st.st_size;

			if (off + piece < end) {
				/* a piece ends just after the first '\n' at or past
				 * its nominal end - 1, so pieces start at line starts */
				int64_t e = next_line_start(fd, off + piece - 1, end, s->buf);

				if (e < 0) {
					shmrun_task_error(task, "input '%s': %s", s->fl.files[f],
							  strerror((int)-e));
					close(fd);
					return (int)e;
				}
				end = (uint64_t)e;
			}
			if (k++ % width == me) {
				struct piece pc = {f, off, end, XXH64(NULL, 0, 0), 0};

				if (shmrun_grow_u32(&s->pieces, &cap, (size_t)s->npieces + 1,
						    sizeof(*s->pieces), 64)) {
					close(fd);
					return -ENOMEM;
				}
				err = window_sum(fd, off, &pc.sum, &pc.window);
				if (err) {
					shmrun_task_error(task, "input '%s': %s", s->fl.files[f],
							  strerror(-err));
					close(fd);
					return err;
				}
				s->pieces[s->npieces++] = pc;
			}
			off = end;
		}
		close(fd);
	}
	s->cap_pieces = cap;
	return 0;
}

static void source_close(struct shmrun_task *task, void *state)
{
	struct source *s = state;

	(void)task;
	if (!s)
		return;
	if (s->fd >= 0)
		close(s->fd);
	shmrun_follow_close(s->fw);
	free_list(&s->fl);
	free(s->ids);
	free(s->checked);
	free(s->pieces);
	free(s->buf);
	free(s->scan);
	free(s);
}

/*
 * Count the '\n' in [0, @off) of the current piece's file (open, s->fd) into
 * *@count, from where the last count of that file stopped when it is at or
 * before @off (the lines of an instance come in file order, offsets rising),
 * else from 0. Return: 0, or -errno.
 */
static int count_lines(struct source *s, uint64_t off, uint64_t *count)
{
	uint32_t f = s->pieces[s->cur].file;
	uint64_t at = 0, n = 0;

	if (s->nl_file == f && s->nl_off <= off) {
		at = s->nl_off;
		n = s->nl_count;
	}
	if (!s->scan && !(s->scan = malloc(SCAN_BYTES)))
		return -ENOMEM;
	while (at < off) {
		size_t want = off - at < SCAN_BYTES ? (size_t)(off - at) : SCAN_BYTES;
		ssize_t r = pread(s->fd, s->scan, want, (off_t)at);
		const unsigned char *p = s->scan, *e;

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EIO;
		e = p + r;
		while ((p = memchr(p, '\n', (size_t)(e - p))) != NULL) {
			n++;
			p++;
		}
		at += (uint64_t)r;
	}
	s->nl_file = f;
	s->nl_off = off;
	s->nl_count = n;
	*count = n;
	return 0;
}

/*
 * struct shmrun_origin's describe() (ops.h): line @i of the batch being
 * emitted (s->lines, pointing into s->buf, which has not moved since they
 * were queued) as "path:line". Its file offset follows from where its bytes
 * lie in the buffer (buf[lo] is at file offset s->pos); its line number
 * counts the '\n' before it in the file (count_lines()): paid only when a
 * message asks, so a piece starting mid-file, or a restored position, needs
 * no line count in its pieces or checkpoints. A failed count says
 * "path, byte offset N" instead.
 */
static int source_describe(struct shmrun_task *task, void *state, uint32_t i, char *buf, size_t len)
{
	struct source *s = state;
	const unsigned char *v = s->lines[i].value;
	uint64_t off, lines = 0;

	(void)task;
	if (s->fd < 0 || s->cur >= s->npieces || v < s->buf || v > s->buf + s->lo)
		return -EINVAL;
	off = s->pos - (uint64_t)(s->buf + s->lo - v);
	if (count_lines(s, off, &lines) == 0)
		snprintf(buf, len, "%s:%" PRIu64, s->fl.files[s->pieces[s->cur].file], lines + 1);
	else
		snprintf(buf, len, "%s, byte offset %" PRIu64, s->fl.files[s->pieces[s->cur].file],
			 off);
	return 0;
}

static int source_open(struct shmrun_task *task, void **state)
{
	struct source *s = calloc(1, sizeof(*s));
	int err;

	if (!s)
		return -ENOMEM;
	*state = s;
	s->fd = -1;
	if (shmrun_task_param_bool(task, "follow", false))
		return shmrun_follow_open(task, &s->fw);
	s->origin = (struct shmrun_origin){.describe = source_describe, .task = task, .state = s};
	s->nl_file = UINT32_MAX;
	s->cap = READ_BYTES;
	s->buf = malloc(s->cap);
	if (!s->buf)
		return -ENOMEM;
	if (shmrun_task_restoring(task))
		return 0; /* the pieces are the restored entries, if any */
	err = list_files(task, &s->fl, false);
	if (!err)
		err = make_pieces(task, s);
	return err;
}

/* Open piece s->cur. Return: 0, or -errno after an error message. */
static int open_piece(struct shmrun_task *task, struct source *s)
{
	const struct piece *p = &s->pieces[s->cur];
	const struct file_id *id = &s->ids[p->file];
	struct stat st;

	s->fd = open_input(s->fl.files[p->file]);
	if (s->fd < 0 || fstat(s->fd, &st) < 0) {
		shmrun_task_error(task, "input '%s': %s", s->fl.files[p->file], strerror(errno));
		return -errno;
	}
	/* ino 0: restored from the older format, identity unknown */
	if (!S_ISREG(st.st_mode) ||
	    (id->ino && ((uint64_t)st.st_dev != id->dev || (uint64_t)st.st_ino != id->ino)) ||
	    (uint64_t)st.st_size < id->size) {
		shmrun_task_error(task,
				  "input '%s' was replaced or truncated while the job read it "
				  "(inode %" PRIu64 " → %" PRIu64 ", size %" PRIu64 " → %" PRIu64
				  "); its remaining pieces no longer fit it. Replace input files "
				  "only while the job is not running, and start fresh "
				  "(STREAM_RESET_STATE=1) to read the new content",
				  s->fl.files[p->file], id->ino, (uint64_t)st.st_ino, id->size,
				  (uint64_t)st.st_size);
		return -ESTALE;
	}
	posix_fadvise(s->fd, (off_t)p->off, (off_t)(p->end - p->off), POSIX_FADV_SEQUENTIAL);
	s->pos = p->off;
	s->lo = s->hi = 0;
	return 0;
}

/* Read more of the current piece into buf, keeping buf[lo, hi). Return: bytes read. */
static ssize_t fill(struct shmrun_task *task, struct source *s)
{
	const struct piece *p = &s->pieces[s->cur];
	uint64_t file_off = s->pos + (s->hi - s->lo), want;
	ssize_t n;

	if (s->lo > 0) {
		memmove(s->buf, s->buf + s->lo, s->hi - s->lo);
		s->hi -= s->lo;
		s->lo = 0;
	}
	/* one line fills the buffer: grow it */
	if (shmrun_grow(&s->buf, &s->cap, s->hi + 1, 1, READ_BYTES))
		return -ENOMEM;
	want = p->end - file_off;
	if (want > s->cap - s->hi)
		want = s->cap - s->hi;
	if (want == 0)
		return 0;
	do
		n = pread(s->fd, s->buf + s->hi, want, (off_t)file_off);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		shmrun_task_error(task, "reading '%s': %s", s->fl.files[p->file], strerror(errno));
		return -errno;
	}
	if (n == 0) {
		shmrun_task_error(task, "input '%s' shrank while being read",
				  s->fl.files[p->file]);
		return -EIO;
	}
	s->hi += (size_t)n;
	return n;
}

/* Emit the lines queued in s->lines (they point into s->buf). */
static int emit_lines(struct shmrun_task *task, struct source *s)
{
	uint32_t n = s->nlines;

	if (!n)
		return 0;
	s->nlines = 0;
	shmrun_task_count(task, SHMRUN_COUNT_RECORDS_IN, n);
	return shmrun_emit_batch_origin(task, s->lines, n, &s->origin);
}

/*
 * Queue the line at buf[lo] of @len bytes (without its '\n'); the queue goes
 * out in one shmrun_emit_batch() when full, before the buffer moves (fill())
 * and when produce() returns.
 */
static int emit_line(struct shmrun_task *task, struct source *s, size_t len)
{
	if (len > UINT32_MAX - 64) {
		shmrun_task_error(task, "a line of %zu bytes is longer than a record can be", len);
		return -EMSGSIZE;
	}
	s->lines[s->nlines++] = (struct shmrun_record){.value = s->buf + s->lo,
						       .value_len = (uint32_t)len};
	s->lo += len;
	s->pos += len;
	return s->nlines == LINES_PER_EMIT ? emit_lines(task, s) : 0;
}

static int source_produce_lines(struct shmrun_task *task, struct source *s, uint32_t budget);

static int source_produce(struct shmrun_task *task, void *state, uint32_t budget)
{
	struct source *s = state;
	int r, err;
	uint64_t pos;

	if (s->fw)
		return shmrun_follow_produce(task, s->fw, budget);
	if (!s->prog_known) {
		for (uint32_t i = s->cur; i < s->npieces; i++)
			s->prog_total += s->pieces[i].end - s->pieces[i].off;
		s->prog_known = true;
	}
	r = source_produce_lines(task, s, budget);
	err = emit_lines(task, s);
	pos = s->prog_done;
	if (s->fd >= 0 && s->cur < s->npieces && s->pos > s->pieces[s->cur].off)
		pos += s->pos - s->pieces[s->cur].off;
	shmrun_task_source_progress(task, pos, s->prog_total);
	return r < 0 ? r : err ? err : r;
}

static int piece_cmp(const void *a, const void *b)
{
	const struct piece *x = a, *y = b;

	if (x->file != y->file)
		return x->file < y->file ? -1 : 1;
	return x->off < y->off ? -1 : x->off > y->off;
}

static int source_produce_lines(struct shmrun_task *task, struct source *s, uint32_t budget)
{
	int err;

	/*
	 * Restored pieces come in the order a rescale dealt them (pooled by old
	 * instance): a later piece of a file could precede an earlier one, and
	 * event times set downstream (extract) would go backwards, making
	 * records late under a small watermark_delay. Read each file's pieces
	 * in offset order, as a fresh run does; files in the order the entries
	 * first name them.
	 */
	if (s->unsorted) {
		qsort(s->pieces + s->cur, s->npieces - s->cur, sizeof(*s->pieces), piece_cmp);
		s->unsorted = false;
	}

	while (budget > 0) {
		unsigned char *nl;

		if (s->fd < 0) {
			if (s->cur == s->npieces)
				return 0;
			err = open_piece(task, s);
			if (err)
				return err;
		}
		nl = memchr(s->buf + s->lo, '\n', s->hi - s->lo);
		if (nl) {
			size_t len = (size_t)(nl - (s->buf + s->lo));

			err = emit_line(task, s, len);
			s->lo++; /* the '\n' */
			s->pos++;
			budget--;
			if (err)
				return err;
			continue;
		}
		if (s->pos + (s->hi - s->lo) < s->pieces[s->cur].end) {
			ssize_t n;

			err = emit_lines(task, s); /* fill() moves the buffer they point into */
			if (err)
				return err;
			n = fill(task, s);

			if (n < 0)
				return (int)n;
			continue;
		}
		if (s->hi > s->lo) { /* a final line without '\n' */
			err = emit_line(task, s, s->hi - s->lo);
			budget--;
			if (err)
				return err;
		}
		err = emit_lines(task, s);
		if (err)
			return err;
		close(s->fd);
		s->fd = -1;
		s->prog_done += s->pieces[s->cur].end - s->pieces[s->cur].off;
		s->cur++;
	}
	return 1;
}

/*
 * The window checksum before s->pos of the open current piece: from the
 * buffer when it holds the window (buf[lo] is at pos), else one small pread.
 */
static int current_sum(struct shmrun_task *task, struct source *s, uint64_t *sum, uint32_t *window)
{
	const struct piece *p = &s->pieces[s->cur];
	uint32_t n = s->pos < WINDOW_BYTES ? (uint32_t)s->pos : WINDOW_BYTES;
	int err;

	if (s->pos == p->off) {
		*sum = p->sum;
		*window = p->window;
		return 0;
	}
	if (s->lo >= n) {
		*sum = XXH64(s->buf + s->lo - n, n, 0);
		*window = n;
		return 0;
	}
	err = window_sum(s->fd, s->pos, sum, window);
	if (err)
		shmrun_task_error(task, "reading '%s': %s", s->fl.files[p->file], strerror(-err));
	return err;
}

/*
 * @path as a saved position names it: relative to the conf file's directory
 * when it lies under it (so a moved job directory still finds it), else as is.
 */
static const char *saved_path(struct shmrun_task *task, const char *path)
{
	const char *dir = shmrun_task_conf_dir(task);
	size_t dl = dir ? strlen(dir) : 0;

	if (dl > 1 && strncmp(path, dir, dl) == 0 && path[dl] == '/' && path[dl + 1])
		return path + dl + 1;
	return path;
}

/* Per-worker state: the pieces still to read, from the current position on. */
static int source_snapshot(struct shmrun_task *task, void *state, uint64_t epoch)
{
	struct source *s = state;
	unsigned char entry[sizeof(struct pos_entry) + PATH_MAX];

	(void)epoch;
	if (s->fw)
		return shmrun_follow_snapshot(task, s->fw);
	for (uint32_t i = s->cur; i < s->npieces; i++) {
		const struct piece *p = &s->pieces[i];
		struct pos_entry pe = {.magic = POS_MAGIC, .off = p->off, .end = p->end,
				       .id = s->ids[p->file], .sum = p->sum, .window = p->window};
		const char *path = saved_path(task, s->fl.files[p->file]);
		size_t n = strlen(path);
		int err;

		if (i == s->cur && s->fd >= 0) {
			pe.off = s->pos;
			err = current_sum(task, s, &pe.sum, &pe.window);
			if (err)
				return err;
		}
		if (pe.off >= p->end)
			continue;
		memcpy(entry, &pe, sizeof(pe));
		memcpy(entry + sizeof(pe), path, n);
		err = shmrun_pw_add(task, entry, (uint32_t)(sizeof(pe) + n));
		if (err)
			return err;
	}
	return 0;
}

/* Find or add @path in the file list. Return: its index, or -ENOMEM. */
static int file_index(struct source *s, const char *path)
{
	for (uint32_t f = 0; f < s->fl.n; f++)
		if (strcmp(s->fl.files[f], path) == 0)
			return (int)f;
	return add_file(&s->fl, path, false) ? -ENOMEM : (int)s->fl.n - 1;
}

/*
 * Whether restored file @path still is the file of @pe: the same device and
 * inode, not shorter, the same mtime unless it grew, the same bytes in the
 * window before the offset. Return: 0, or -ESTALE after a message naming it.
 */
static int check_identity(struct shmrun_task *task, const char *path, const struct pos_entry *pe)
{
	char what[200];
	struct stat st;
	uint64_t sum;
	uint32_t window;
	int fd = open_input(path), err = 0;

	if (fd < 0 || fstat(fd, &st) < 0) {
		snprintf(what, sizeof(what), "%s", strerror(errno));
	} else if (!S_ISREG(st.st_mode)) {
		snprintf(what, sizeof(what), "it is no longer a regular file");
	} else if ((uint64_t)st.st_dev != pe->id.dev || (uint64_t)st.st_ino != pe->id.ino) {
		snprintf(what, sizeof(what),
			 "it was replaced (device:inode %" PRIu64 ":%" PRIu64 " → %" PRIu64
			 ":%" PRIu64 ")",
			 pe->id.dev, pe->id.ino, (uint64_t)st.st_dev, (uint64_t)st.st_ino);
	} else if ((uint64_t)st.st_size < pe->id.size) {
		snprintf(what, sizeof(what), "it shrank (%" PRIu64 " → %" PRIu64 " bytes)",
			 pe->id.size, (uint64_t)st.st_size);
	} else if ((uint64_t)st.st_size == pe->id.size &&
		   id_of(&st).mtime_ns != pe->id.mtime_ns) {
		snprintf(what, sizeof(what), "it was modified in place (same size, new mtime)");
	} else if ((err = window_sum(fd, pe->off, &sum, &window)) != 0 || window != pe->window ||
		   sum != pe->sum) {
		snprintf(what, sizeof(what), "its %u bytes before offset %" PRIu64 " changed",
			 pe->window, pe->off);
	} else {
		close(fd);
		return 0;
	}
	if (fd >= 0)
		close(fd);
	shmrun_task_error(task,
			  "input '%s' changed since checkpoint epoch %" PRIu64
			  " saved its read position (offset %" PRIu64 "): %s; resuming there "
			  "would misread it. Put the original file back, or start over with "
			  "STREAM_RESET_STATE=1",
			  path, shmrun_task_restored_epoch(task), pe->off, what);
	return -ESTALE;
}

/* Parse entry @e of @len bytes into @pe and @path. Return: 0, or -EBADMSG after a message. */
static int parse_entry(struct shmrun_task *task, const unsigned char *e, uint32_t len,
		       struct pos_entry *pe, char path[PATH_MAX], bool *old)
{
	uint32_t head = 16;

	*old = true;
	memset(pe, 0, sizeof(*pe));
	if (len >= sizeof(*pe)) {
		memcpy(pe, e, sizeof(*pe));
		*old = pe->magic != POS_MAGIC;
	}
	if (*old) { /* the older format: [u64 offset][u64 end][path], no identity */
		memset(pe, 0, sizeof(*pe));
		if (len > 16) {
			memcpy(&pe->off, e, 8);
			memcpy(&pe->end, e + 8, 8);
		}
	} else {
		head = sizeof(*pe);
	}
	if (len <= head || len - head >= PATH_MAX) {
		shmrun_task_error(task, "restored read position is malformed (%u bytes)", len);
		return -EBADMSG;
	}
	memcpy(path, e + head, len - head);
	path[len - head] = 0;
	if (path[0] != '/') { /* saved relative to the conf file's directory */
		const char *dir = shmrun_task_conf_dir(task);
		char rel[PATH_MAX];

		memcpy(rel, path, len - head + 1);
		if (!dir || snprintf(path, PATH_MAX, "%s/%s", dir, rel) >= PATH_MAX) {
			shmrun_task_error(task,
					  "restored read position names '%s' relative to the conf "
					  "file's directory%s%s, which makes a path too long",
					  rel, dir ? " " : "", dir ? dir : "");
			return -ENAMETOOLONG;
		}
	}
	return 0;
}

/* In the launcher, before anything starts: refuse to resume a changed input. */
static int source_check_restore(struct shmrun_task *task, const void *entry, uint32_t len)
{
	struct pos_entry pe;
	char path[PATH_MAX];
	bool old;
	int err;

	if (shmrun_task_param_bool(task, "follow", false))
		return shmrun_follow_check_restore(task, entry, len);
	err = parse_entry(task, entry, len, &pe, path, &old);
	return err ? err : old ? 0 : check_identity(task, path, &pe);
}

static int source_restore(struct shmrun_task *task, void *state, const void *entry, uint32_t len)
{
	struct source *s = state;
	struct pos_entry pe;
	char path[PATH_MAX];
	bool old;
	int f, err;

	if (s->fw)
		return shmrun_follow_restore(task, s->fw, entry, len);
	err = parse_entry(task, entry, len, &pe, path, &old);
	if (err)
		return err;
	f = file_index(s, path);
	if (f < 0 || ids_reserve(s, (uint32_t)f))
		return -ENOMEM;
	if (!s->checked[f]) {
		if (old) {
			shmrun_task_log(task,
					"input '%s': its saved read position is of an older format "
					"without the file's identity; resuming unchecked",
					path);
			pe.id.size = pe.end; /* as much as open_piece() can check */
		} else {
			err = check_identity(task, path, &pe);
			if (err)
				return err;
		}
		s->ids[f] = pe.id;
		s->checked[f] = true;
	} else if (!old) {
		err = check_identity(task, path, &pe);
		if (err)
			return err;
	}
	if (shmrun_grow_u32(&s->pieces, &s->cap_pieces, (size_t)s->npieces + 1, sizeof(*s->pieces),
			    64))
		return -ENOMEM;
	s->pieces[s->npieces++] = (struct piece){(uint32_t)f, pe.off, pe.end, pe.sum, pe.window};
	s->unsorted = true;
	return 0;
}

static const struct shmrun_param_def params[] = {
	{.key = "path", .type = SHMRUN_PARAM_PATHS, .required = true,
	 .doc = "files, directories (read recursively) or glob patterns, space-separated",
	 .io = SHMRUN_PARAM_INPUT},
	{.key = "match", .type = SHMRUN_PARAM_STRING,
	 .doc = "of the files found inside directories, read only those whose name matches this glob, e.g. *.py"},
	{.key = "piece_bytes", .type = SHMRUN_PARAM_SIZE, .def = "32M", .min = 1, .max = 1ull << 40,
	 .doc = "files are cut into pieces of at most this many bytes, at line starts"},
	{.key = "rate", .type = SHMRUN_PARAM_RATE, .min = 1, .max = 1000000000000ull,
	 .doc = "records per second for the whole stage (default: unlimited)", .tuning = true},
	{.key = "follow", .type = SHMRUN_PARAM_BOOL, .def = "false",
	 .doc = "never end: read files as they grow, new files that match, rotated ones (tail -F); see docs/operators.md, Following files"},
	{.key = "poll_interval", .type = SHMRUN_PARAM_DURATION, .def = "250ms", .min = 1000000,
	 .max = 3600000000000ull,
	 .doc = "follow = true: look for changes at least this often (all the time without inotify), and the rotation grace", .tuning = true},
	{.key = "max_open_files", .type = SHMRUN_PARAM_COUNT, .def = "1024", .min = 1, .max = 1000000,
	 .doc = "follow = true: files kept open per instance; beyond it, files read to their end are closed and reopened by name when they change", .tuning = true},
	{0},
};

const struct shmrun_operator shmrun_op_file_source = {
	.size = sizeof(struct shmrun_operator),
	.name = "file_source",
	.summary = "reads lines of files: one record per line, value = the line without \\n",
	/* following, one entry per followed file: bounded by the directories */
	.flags = SHMRUN_OP_SOURCE | SHMRUN_OP_PW_BOUNDED,
	.params = params,
	.pacing_param = "rate",
	.prepare = prepare,
	.open = source_open,
	.produce = source_produce,
	.close = source_close,
	.pw_rule = SHMRUN_PW_SPLIT,
	.snapshot = source_snapshot,
	.restore = source_restore,
	.check_restore = source_check_restore,
};
