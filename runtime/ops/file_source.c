/*
 * runtime/ops/file_source.c: one record per line of a set of files.
 *
 * `path` names files, directories (read recursively, symbolic links not
 * followed) and glob patterns; `match` keeps, of the files found inside
 * directories, only those whose name matches a glob (files named directly or
 * by a pattern are always read). The file list is sorted, so every
 * instance computes the same list and the same pieces: each file is cut into
 * pieces of at most `piece_bytes`, ending just after a '\n' (a longer line
 * makes a longer piece), and piece k goes to instance k mod width. An instance
 * reads its pieces in order, in 1 MiB reads, and emits each line without its
 * '\n' (a final line without '\n' is still a line; any byte is allowed; a line
 * may be longer than the buffer, which then grows). Empty files have no lines.
 *
 * `rate` limits the whole stage to that many records per second (each instance
 * takes rate / width; the worker paces every source, see worker.c).
 *
 * Per-worker state (rule split): one entry per piece not yet fully read, the
 * current one first: [u64 offset][u64 end][path bytes]. On a restore
 * (shmrun_task_restoring()) open() lists no file and cuts no piece: the
 * instance's pieces are exactly the entries restore() gets, so reading resumes
 * at the first line not yet emitted before the checkpoint's barrier, and an
 * instance given no entry (it had finished) reads nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <ftw.h>
#include <glob.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ops.h"

#define READ_BYTES (1u << 20)

struct piece {
	uint32_t file;
	uint64_t off, end;
};

struct file_list {
	char **files;
	uint32_t n, cap;
	const char *match;
	int err;
};

struct source {
	struct file_list fl;
	struct piece *pieces; /* this instance's */
	uint32_t npieces, cur, cap_pieces;
	int fd;
	uint64_t pos;        /* file offset of buf[lo] */
	unsigned char *buf;
	size_t cap, lo, hi;  /* unread bytes are buf[lo, hi) */
};

static struct file_list *walk_list; /* nftw has no user pointer */

static int add_file(struct file_list *fl, const char *path, bool filter)
{
	const char *base = strrchr(path, '/');

	if (filter && fl->match && fnmatch(fl->match, base ? base + 1 : path, 0) != 0)
		return 0;
	if (fl->n == fl->cap) {
		uint32_t cap = fl->cap ? fl->cap * 2 : 64;
		char **n = realloc(fl->files, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		fl->files = n;
		fl->cap = cap;
	}
	fl->files[fl->n] = strdup(path);
	if (!fl->files[fl->n])
		return -ENOMEM;
	fl->n++;
	return 0;
}

static int walk_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)ftw;
	if (type == FTW_F && S_ISREG(st->st_mode))
		return add_file(walk_list, path, true) ? 1 : 0;
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

/* Expand `path` into a sorted, de-duplicated list of regular files. */
static int list_files(struct shmrun_task *task, struct file_list *fl)
{
	char *paths = strdup(shmrun_task_param(task, "path")), *save = NULL;
	int err = 0;

	memset(fl, 0, sizeof(*fl));
	fl->match = shmrun_task_param(task, "match");
	if (!paths)
		return -ENOMEM;
	/* resolved paths, one per line (conf.c) */
	for (char *tok = strtok_r(paths, "\n", &save); tok && !err;
	     tok = strtok_r(NULL, "\n", &save)) {
		glob_t g;
		int r = glob(tok, GLOB_NOCHECK | GLOB_BRACE, NULL, &g);

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
			} else if (S_ISDIR(st.st_mode)) {
				walk_list = fl;
				if (nftw(p, walk_one, 32, FTW_PHYS) != 0) {
					shmrun_task_error(task, "input directory '%s': %s", p,
							  strerror(errno ? errno : EIO));
					err = -EIO;
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

static int prepare(struct shmrun_task *task)
{
	struct file_list fl;
	int err = list_files(task, &fl);

	if (!err && fl.n == 0) {
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

static int make_pieces(struct shmrun_task *task, struct source *s)
{
	uint64_t piece = shmrun_task_param_u64(task, "piece_bytes", 32u << 20), k = 0;
	uint32_t width = shmrun_task_width(task), me = shmrun_task_instance(task), cap = 0;

	for (uint32_t f = 0; f < s->fl.n; f++) {
		int fd = open(s->fl.files[f], O_RDONLY | O_CLOEXEC);
		struct stat st;
		uint64_t off = 0;

		if (fd < 0 || fstat(fd, &st) < 0) {
			shmrun_task_error(task, "input '%s': %s", s->fl.files[f], strerror(errno));
			if (fd >= 0)
				close(fd);
			return -errno;
		}
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
				if (s->npieces == cap) {
					struct piece *n;

					cap = cap ? cap * 2 : 64;
					n = realloc(s->pieces, cap * sizeof(*n));
					if (!n) {
						close(fd);
						return -ENOMEM;
					}
					s->pieces = n;
				}
				s->pieces[s->npieces++] = (struct piece){f, off, end};
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
	free_list(&s->fl);
	free(s->pieces);
	free(s->buf);
	free(s);
}

static int source_open(struct shmrun_task *task, void **state)
{
	struct source *s = calloc(1, sizeof(*s));
	int err;

	if (!s)
		return -ENOMEM;
	*state = s;
	s->fd = -1;
	s->cap = READ_BYTES;
	s->buf = malloc(s->cap);
	if (!s->buf)
		return -ENOMEM;
	if (shmrun_task_restoring(task))
		return 0; /* the pieces are the restored entries, if any */
	err = list_files(task, &s->fl);
	if (!err)
		err = make_pieces(task, s);
	return err;
}

/* Open piece s->cur. Return: 0, or -errno after an error message. */
static int open_piece(struct shmrun_task *task, struct source *s)
{
	const struct piece *p = &s->pieces[s->cur];

	s->fd = open(s->fl.files[p->file], O_RDONLY | O_CLOEXEC);
	if (s->fd < 0) {
		shmrun_task_error(task, "input '%s': %s", s->fl.files[p->file], strerror(errno));
		return -errno;
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
	if (s->hi == s->cap) { /* one line fills the buffer: grow it */
		unsigned char *nb = realloc(s->buf, s->cap * 2);

		if (!nb)
			return -ENOMEM;
		s->buf = nb;
		s->cap *= 2;
	}
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

static int emit_line(struct shmrun_task *task, struct source *s, size_t len)
{
	struct shmrun_record rec = {.value = s->buf + s->lo, .value_len = (uint32_t)len};

	if (len > UINT32_MAX - 64) {
		shmrun_task_error(task, "a line of %zu bytes is longer than a record can be", len);
		return -EMSGSIZE;
	}
	s->lo += len;
	s->pos += len;
	shmrun_task_count(task, SHMRUN_COUNT_RECORDS_IN, 1);
	return shmrun_emit(task, &rec);
}

static int source_produce(struct shmrun_task *task, void *state, uint32_t budget)
{
	struct source *s = state;
	int err;

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
			ssize_t n = fill(task, s);

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
		close(s->fd);
		s->fd = -1;
		s->cur++;
	}
	return 1;
}

/* Per-worker state: the pieces still to read, from the current position on. */
static int source_snapshot(struct shmrun_task *task, void *state, uint64_t epoch)
{
	struct source *s = state;
	unsigned char entry[16 + PATH_MAX];

	(void)epoch;
	for (uint32_t i = s->cur; i < s->npieces; i++) {
		const struct piece *p = &s->pieces[i];
		uint64_t off = i == s->cur && s->fd >= 0 ? s->pos : p->off;
		size_t n = strlen(s->fl.files[p->file]);
		int err;

		if (off >= p->end)
			continue;
		memcpy(entry, &off, 8);
		memcpy(entry + 8, &p->end, 8);
		memcpy(entry + 16, s->fl.files[p->file], n);
		err = shmrun_pw_add(task, entry, (uint32_t)(16 + n));
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

static int source_restore(struct shmrun_task *task, void *state, const void *entry, uint32_t len)
{
	struct source *s = state;
	const unsigned char *e = entry;
	char path[PATH_MAX];
	uint64_t off, end;
	int f;

	if (len <= 16 || len - 16 >= PATH_MAX) {
		shmrun_task_error(task, "restored read position is malformed (%u bytes)", len);
		return -EBADMSG;
	}
	memcpy(&off, e, 8);
	memcpy(&end, e + 8, 8);
	memcpy(path, e + 16, len - 16);
	path[len - 16] = 0;
	f = file_index(s, path);
	if (f < 0)
		return f;
	if (s->npieces == s->cap_pieces) {
		uint32_t cap = s->cap_pieces ? s->cap_pieces * 2 : 64;
		struct piece *n = realloc(s->pieces, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		s->pieces = n;
		s->cap_pieces = cap;
	}
	s->pieces[s->npieces++] = (struct piece){(uint32_t)f, off, end};
	return 0;
}

static const struct shmrun_param_def params[] = {
	{.key = "path", .type = SHMRUN_PARAM_PATHS, .required = true,
	 .doc = "files, directories (read recursively) or glob patterns, space-separated"},
	{.key = "match", .type = SHMRUN_PARAM_STRING,
	 .doc = "of the files found inside directories, read only those whose name matches this glob, e.g. *.py"},
	{.key = "piece_bytes", .type = SHMRUN_PARAM_SIZE, .def = "32M", .min = 1, .max = 1ull << 40,
	 .doc = "files are cut into pieces of at most this many bytes, at line starts"},
	{.key = "rate", .type = SHMRUN_PARAM_RATE, .min = 1, .max = 1000000000000ull,
	 .doc = "records per second for the whole stage (default: unlimited)", .tuning = true},
	{0},
};

const struct shmrun_operator shmrun_op_file_source = {
	.name = "file_source",
	.summary = "reads lines of files: one record per line, value = the line without \\n",
	.flags = SHMRUN_OP_SOURCE,
	.params = params,
	.prepare = prepare,
	.open = source_open,
	.produce = source_produce,
	.close = source_close,
	.pw_rule = SHMRUN_PW_SPLIT,
	.snapshot = source_snapshot,
	.restore = source_restore,
};
