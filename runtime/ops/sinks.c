/*
 * runtime/ops/sinks.c: file_sink, stdout_sink, null_sink.
 *
 * Both writing sinks write one line per record: key, TAB, value, '\n' — or the
 * value alone when the key is empty. Lines are gathered in a 1 MiB buffer and
 * written with write(2) in whole lines.
 *
 * When the buffer is written (flushed): when it is full; at every barrier
 * (snapshot()), so a checkpoint never counts lines that are still in memory;
 * at end of input; and through flush(), which the worker calls when the
 * sink's input has drained (nothing to read right now), at least every
 * `flush_interval` while the sink is busy, and when the job stops without a
 * checkpoint (SIGTERM). So a slow job's lines appear at once, and a stop
 * leaves whole lines, never a file cut at a buffer boundary.
 *
 * Several stdout_sink instances, in several worker processes, share one
 * standard output. A write(2) of more than PIPE_BUF bytes into a pipe may be
 * interleaved with another process's write, tearing lines. So when standard
 * output is a pipe or FIFO, a flush holds a POSIX write lock (fcntl F_SETLKW,
 * per process, so it excludes the other workers although they share the open
 * file description) on it for the whole write: every flush lands in one
 * piece. Where the lock is refused, a flush writes only whole lines in
 * writes of at most PIPE_BUF bytes, which the kernel keeps whole (a line
 * longer than PIPE_BUF may then interleave). A regular file needs neither:
 * Linux serialises writes through one shared file offset.
 *
 * Every I/O error message names the file and says what to do.
 *
 * file_sink: width 1 writes `path`, width k writes `path.<instance>`; missing
 * parent directories are created.
 *
 * Without checkpoints the file is replaced and written directly.
 *
 * With checkpoints it is exactly-once (two-phase commit, docs/design.md §6). The
 * output of epoch e — the lines between barrier(e-1) and barrier(e) — goes to
 * a hidden staging file beside the visible one, `.<name>.<e>.staged`. At
 * barrier(e) the staging file is closed (fsynced with the checkpoint) and the
 * sink's per-worker state records L(e): the length the visible file has once
 * every epoch up to e is committed. When e completes (its MANIFEST is
 * durable), each staged file up to e is copied to the visible file at its
 * offset, the visible file is fsynced, and the staged file removed. A crash
 * anywhere leaves staged files that are either uncommitted or committed but
 * not yet removed; restoring epoch r therefore replays every staged file up
 * to r at the offsets that end at L(r) (idempotent pwrites), removes staged
 * files after r, and truncates the visible file to L(r): output after the
 * restored checkpoint is rolled back, so a replay cannot duplicate it.
 *
 * stdout_sink is at-least-once under restarts (standard output cannot be
 * rolled back): its snapshot() writes every line before barrier(e), so once
 * epoch e is complete every line it covers is out; a restore replays at most
 * the lines after it. null_sink only counts.
 *
 * file_out.h offers file_sink's output file, with the same code and the same
 * guarantees, as a part of another operator (extract's `rejects`): its key
 * is that operator's, its lines are not counted as the job's records out.
 *
 * Path lengths: a name is never cut short. file_sink's prepare() refuses
 * (exit 2, naming the path) an output path of PATH_MAX bytes or more, and,
 * with checkpoints, a path whose staging file name would not fit NAME_MAX or
 * PATH_MAX; every buffer below is then large enough by construction.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file_out.h"
#include "input_check.h"
#include "ops.h"

#define BUF_BYTES (1u << 20)
/* ".<base>.<epoch>.staged": the bytes a staging name adds to base, epoch of 20 digits */
#define STAGED_EXTRA (1 + 1 + 20 + 7)

/* A staged epoch not yet committed. */
struct staged {
	uint64_t epoch;
	uint64_t offset; /* where it goes in the visible file */
	uint64_t size;
	int fd;
};

struct shmrun_file_out {
	int fd;        /* visible file (or stdout) */
	bool owns_fd;
	bool exactly_once;
	bool is_pipe;          /* fd is a pipe or FIFO: lock it around each write */
	bool no_lock;          /* locking it was refused: PIPE_BUF-sized writes instead */
	bool count_out;        /* a sink: its lines are the job's "records out" */
	char path[PATH_MAX];
	char dir[PATH_MAX], base[NAME_MAX + 1]; /* of path, for staging names */
	unsigned char *buf;
	size_t len;
	unsigned char *copy;   /* for copying staged files into the visible one */
	/* exactly-once */
	int stage_fd;          /* staging file of the open epoch, -1 if none yet */
	uint64_t stage_epoch;  /* the epoch it belongs to */
	uint64_t stage_size;
	uint64_t length;       /* L: visible length once everything staged is committed */
	struct staged *pending;
	uint32_t npending, cap;
};

/* What to do about an I/O error @err (an errno), for messages. */
static const char *io_hint(int err)
{
	switch (err) {
	case EFBIG:
		return "the file reached the file size limit (RLIMIT_FSIZE, `ulimit -f`) or its "
		       "file system's largest file: raise the limit (or set path to another file "
		       "system), then run the job again";
	case ENOSPC:
	case EDQUOT:
		return "free space on its file system (or set path to another one), then run the "
		       "job again";
	case EACCES:
	case EPERM:
	case EROFS:
		return "make its directory writable (or set path to a writable place), then run "
		       "the job again";
	case ENAMETOOLONG:
		return "use a shorter path";
	case EPIPE:
		return "the reader of standard output went away";
	default:
		return "check the file system, then run the job again";
	}
}

/* Report a failed @verb ("fsync", "truncating") of @path with errno @e. Return: -@e. */
static int io_error(struct shmrun_task *task, const char *verb, const char *path, int e)
{
	shmrun_task_error(task, "%s %s failed: %s; %s", verb, path, strerror(e), io_hint(e));
	return -e;
}

static int write_fd(struct shmrun_task *task, const char *what, int fd, const unsigned char *p,
		    size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			int e = errno;

			shmrun_task_error(task, "writing %s failed: %s; %s", what, strerror(e),
					  io_hint(e));
			return -e;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Take (F_WRLCK) or drop (F_UNLCK) the write lock on @fd. Return: 0 or -errno. */
static int lock_fd(int fd, short type)
{
	struct flock fl = {.l_type = type, .l_whence = SEEK_SET};

	while (fcntl(fd, F_SETLKW, &fl) < 0)
		if (errno != EINTR)
			return -errno;
	return 0;
}

/*
 * Write @n bytes of whole lines into a pipe shared with other writers, so that
 * no line tears: under the write lock in one go, or else in writes of whole
 * lines of at most PIPE_BUF bytes each (atomic for a pipe).
 */
static int write_pipe(struct shmrun_task *task, struct shmrun_file_out *s, const unsigned char *p, size_t n)
{
	int err;

	if (!s->no_lock && lock_fd(s->fd, F_WRLCK) == 0) {
		err = write_fd(task, s->path, s->fd, p, n);
		lock_fd(s->fd, F_UNLCK);
		return err;
	}
	s->no_lock = true;
	while (n > 0) {
		size_t k = n;

		if (k > PIPE_BUF) {
			/* the last line end within PIPE_BUF; a longer line goes whole */
			const unsigned char *nl = NULL;

			for (size_t i = PIPE_BUF; i-- > 0;)
				if (p[i] == '\n') {
					nl = p + i;
					break;
				}
			if (nl) {
				k = (size_t)(nl - p) + 1;
			} else {
				nl = memchr(p, '\n', n);
				k = nl ? (size_t)(nl - p) + 1 : n;
			}
		}
		err = write_fd(task, s->path, s->fd, p, k);
		if (err)
			return err;
		p += k;
		n -= k;
	}
	return 0;
}

static void staged_name(const struct shmrun_file_out *s, uint64_t epoch, char *buf, size_t len)
{
	snprintf(buf, len, "%s/.%s.%" PRIu64 ".staged", s->dir, s->base, epoch);
}

/* Where the buffer goes: the visible file, or the open epoch's staging file. */
static int sink_flush(struct shmrun_task *task, struct shmrun_file_out *s)
{
	int err;

	if (!s->len)
		return 0;
	if (!s->exactly_once) {
		/* a line longer than the buffer is flushed in pieces: whole lines
		 * only when the buffer ends with one */
		if (s->is_pipe && s->buf[s->len - 1] == '\n')
			err = write_pipe(task, s, s->buf, s->len);
		else
			err = write_fd(task, s->path, s->fd, s->buf, s->len);
		s->len = 0;
		return err;
	}
	if (s->stage_fd < 0) {
		char name[PATH_MAX + NAME_MAX + 40];

		s->stage_epoch = 0; /* set at the barrier that closes it */
		staged_name(s, 0, name, sizeof(name));
		/* the epoch is not known until its barrier: open as ".0" and
		 * rename at the barrier */
		/* 0600 whatever the umask: staged output is not yet the user's to
		 * share (the committed file keeps the umask, see docs/checkpoints.md) */
		s->stage_fd = open(name, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (s->stage_fd >= 0 && fchmod(s->stage_fd, 0600) < 0) {
			close(s->stage_fd);
			s->stage_fd = -1;
		}
		if (s->stage_fd < 0) {
			int e = errno;

			shmrun_task_error(task, "cannot create staging file %s of %s: %s; %s", name,
					  s->path, strerror(e), io_hint(e));
			return -e;
		}
		s->stage_size = 0;
	}
	{
		char what[PATH_MAX + NAME_MAX + 80];

		snprintf(what, sizeof(what), "%s (staging file .%s.0.staged beside it)", s->path,
			 s->base);
		err = write_fd(task, what, s->stage_fd, s->buf, s->len);
	}
	s->stage_size += s->len;
	s->len = 0;
	return err;
}

/*
 * Whether output file @name fits every buffer here: below PATH_MAX, and with
 * checkpoints (@staged) its staging name ".<base>.<epoch>.staged" within
 * NAME_MAX and its staging path below PATH_MAX. Return: 0, or -ENAMETOOLONG
 * after a message naming the path.
 */
static int check_name(struct shmrun_task *task, const char *name, bool staged)
{
	const char *slash = strrchr(name, '/');
	size_t len = strlen(name), blen = strlen(slash ? slash + 1 : name);

	if (len >= PATH_MAX || blen > NAME_MAX) {
		/* the reason first: a message with a path this long is cut short */
		shmrun_task_error(task, "output path too long (%zu bytes, a file name of %zu; "
					"paths must be shorter than %d bytes, file names at most %d; "
					"use a shorter path): %s",
				  len, blen, PATH_MAX, NAME_MAX, name);
		return -ENAMETOOLONG;
	}
	if (staged && (blen + STAGED_EXTRA > NAME_MAX || len + STAGED_EXTRA >= PATH_MAX)) {
		shmrun_task_error(task, "output path too long for checkpoints (its staging file "
					".<name>.<epoch>.staged beside it needs %d more bytes; file "
					"names at most %d, paths shorter than %d; use a shorter "
					"path): %s",
				  STAGED_EXTRA, NAME_MAX, PATH_MAX, name);
		return -ENAMETOOLONG;
	}
	return 0;
}

/* @name passed check_name(): every copy below fits. */
static int sink_new(void **state, int fd, const char *name)
{
	struct shmrun_file_out *s = calloc(1, sizeof(*s));
	const char *slash;
	size_t len = strlen(name);

	if (!s)
		return -ENOMEM;
	*state = s;
	s->fd = fd;
	s->stage_fd = -1;
	if (len >= sizeof(s->path))
		return -ENAMETOOLONG;
	memcpy(s->path, name, len + 1);
	slash = strrchr(name, '/');
	if (slash) {
		memcpy(s->dir, name, (size_t)(slash - name));
		s->dir[slash - name] = 0;
		if (slash == name)
			strcpy(s->dir, "/");
	} else {
		strcpy(s->dir, ".");
	}
	slash = slash ? slash + 1 : name;
	if (strlen(slash) >= sizeof(s->base))
		return -ENAMETOOLONG;
	memcpy(s->base, slash, strlen(slash) + 1);
	s->buf = malloc(BUF_BYTES);
	return s->buf ? 0 : -ENOMEM;
}

/* Remove staging files of this sink whose epoch is above @keep_upto. */
static void remove_staged_after(struct shmrun_file_out *s, uint64_t keep_upto)
{
	DIR *d = opendir(s->dir);
	struct dirent *de;
	size_t blen = strlen(s->base);

	if (!d)
		return;
	while ((de = readdir(d))) {
		const char *n = de->d_name;
		char *end;
		unsigned long long e;
		char full[PATH_MAX + NAME_MAX + 2];

		if (n[0] != '.' || strncmp(n + 1, s->base, blen) != 0 || n[1 + blen] != '.')
			continue;
		e = strtoull(n + 2 + blen, &end, 10);
		if (strcmp(end, ".staged") != 0 || e <= keep_upto)
			continue;
		snprintf(full, sizeof(full), "%s/%s", s->dir, n);
		unlink(full);
	}
	closedir(d);
}

/*
 * The output file of instance @i: the value of key @key (`path`), or `path.<i>` for width > 1, in
 * @name of PATH_MAX bytes. Return: 0, or -ENAMETOOLONG after a message.
 */
static int output_name(struct shmrun_task *task, const char *key, uint32_t i, char *name)
{
	const char *path = shmrun_task_param(task, key);
	int n;

	if (shmrun_task_width(task) > 1)
		n = snprintf(name, PATH_MAX, "%s.%u", path, i);
	else
		n = snprintf(name, PATH_MAX, "%s", path);
	if (n < 0 || n >= PATH_MAX) {
		shmrun_task_error(task, "output path too long (paths must be shorter than %d "
					"bytes; use a shorter path): %s%s",
				  PATH_MAX, path, shmrun_task_width(task) > 1 ? ".<instance>" : "");
		return -ENAMETOOLONG;
	}
	return check_name(task, name, shmrun_task_checkpointing(task));
}

/* Refuse @name, the output of key @key, which is @kind. Return: -EINVAL. */
static int not_regular(struct shmrun_task *task, const char *key, const char *name,
		       const char *kind)
{
	/* file_sink's path, or another operator's output file (extract's rejects) */
	const char *who = strcmp(key, "path") == 0 ? "file_sink" : "this output";

	if (strcmp(kind, "a directory") == 0) {
		shmrun_task_error_at(task, key,
				     "%s = %s: %s is a directory, and %s writes only regular "
				     "files; name a file (e.g. %s/out.tsv)",
				     key, shmrun_task_param(task, key), name, who, name);
		return -EINVAL;
	}
	shmrun_task_error_at(task, key,
			     "%s = %s: %s is %s, and %s writes only regular files (it "
			     "truncates, rolls back and fsyncs them; a FIFO would block or be "
			     "refused). To write into a pipe or device, use op = stdout_sink and "
			     "redirect: shmrun job.conf > %s",
			     key, shmrun_task_param(task, key), name, kind, who, name);
	return -EINVAL;
}

/* Before anything starts: every instance's output path fits and, if it
 * exists, is a regular file (exit 2 if not). */
int shmrun_file_out_prepare(struct shmrun_task *task, const char *key)
{
	char name[PATH_MAX];
	int err = 0;

	for (uint32_t i = 0; i < shmrun_task_width(task) && !err; i++) {
		struct stat st;

		err = output_name(task, key, i, name);
		if (!err && stat(name, &st) == 0 && !S_ISREG(st.st_mode))
			err = not_regular(task, key, name, shmrun_file_kind(st.st_mode));
	}
	return err;
}

static int file_prepare(struct shmrun_task *task)
{
	return shmrun_file_out_prepare(task, "path");
}

int shmrun_file_out_open(struct shmrun_task *task, const char *key, struct shmrun_file_out **state)
{
	bool exactly_once = shmrun_task_checkpointing(task);
	char name[PATH_MAX];
	struct shmrun_file_out *s;
	int err, fd;

	*state = NULL;
	err = output_name(task, key, shmrun_task_instance(task), name);
	if (err)
		return err;
	err = shmrun_mkdir_p(name, 0777, SHMRUN_MKDIR_PARENT);
	if (err) {
		shmrun_task_error(task, "cannot create the directory of %s: %s; %s", name,
				  strerror(-err), io_hint(-err));
		return err;
	}
	/* Exactly-once: keep what is there until restore() says what is committed. */
	/* O_NONBLOCK: a FIFO put there since prepare() cannot block the open
	 * (without a reader it fails with ENXIO, as a socket does); then only a
	 * regular file is kept, before anything is truncated or written. */
	fd = open(name, O_WRONLY | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0666);
	if (fd < 0 && errno == ENXIO)
		return not_regular(task, key, name, "a FIFO or socket");
	if (fd < 0) {
		return io_error(task, "opening for writing", name, errno);
	}
	{
		struct stat st;

		if (fstat(fd, &st) < 0) {
			err = errno;
			close(fd);
			return io_error(task, "fstat of", name, err);
		}
		if (!S_ISREG(st.st_mode)) {
			close(fd);
			return not_regular(task, key, name, shmrun_file_kind(st.st_mode));
		}
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
		if (!exactly_once && ftruncate(fd, 0) < 0) {
			err = errno;
			close(fd);
			return io_error(task, "truncating", name, err);
		}
	}
	err = sink_new((void **)state, fd, name);
	s = *state;
	if (!s) {
		close(fd);
		return err;
	}
	s->owns_fd = true;
	s->exactly_once = exactly_once;
	if (exactly_once && shmrun_task_restored_epoch(task) == 0) {
		/* a fresh start: nothing is committed */
		remove_staged_after(s, 0);
		if (ftruncate(fd, 0) < 0) {
			return io_error(task, "truncating", name, errno);
		}
	}
	return err;
}

static int file_open(struct shmrun_task *task, void **state)
{
	struct shmrun_file_out *s;
	int err = shmrun_file_out_open(task, "path", &s);

	*state = s;
	if (s)
		s->count_out = true;
	return err;
}

static int stdout_open(struct shmrun_task *task, void **state)
{
	struct stat st;
	int err = sink_new(state, STDOUT_FILENO, "standard output");

	(void)task;
	if (*state)
		((struct shmrun_file_out *)*state)->count_out = true;
	if (!err && fstat(STDOUT_FILENO, &st) == 0 && S_ISFIFO(st.st_mode))
		((struct shmrun_file_out *)*state)->is_pipe = true;
	return err;
}

/* Write out every line held: the worker's flush() hook, also on a stop. */
static int sink_flush_cb(struct shmrun_task *task, void *state)
{
	return sink_flush(task, state);
}

/*
 * Barrier(e) of stdout_sink: every line before the barrier is written before
 * the checkpoint can complete (at-least-once: a restore replays only lines
 * after it).
 */
static int stdout_snapshot(struct shmrun_task *task, void *state, uint64_t epoch)
{
	(void)epoch;
	return sink_flush(task, state);
}

static int sink_process(struct shmrun_task *task, void *state, const struct shmrun_record *rec)
{
	struct shmrun_file_out *s = state;
	size_t need = (size_t)rec->key_len + rec->value_len + 2;
	int err;

	if (s->len + need > BUF_BYTES) {
		err = sink_flush(task, s);
		if (err)
			return err;
	}
	if (s->count_out)
		shmrun_task_count(task, SHMRUN_COUNT_RECORDS_OUT, 1);
	if (need > BUF_BYTES) { /* a line longer than the buffer: in pieces */
		const unsigned char *parts[3] = {rec->key, (const unsigned char *)"\t", rec->value};
		size_t lens[3] = {rec->key_len, rec->key_len ? 1 : 0, rec->value_len};

		for (int i = 0; i < 3; i++)
			for (size_t done = 0; done < lens[i];) {
				size_t n = lens[i] - done < BUF_BYTES - s->len ? lens[i] - done
									 : BUF_BYTES - s->len;

				memcpy(s->buf + s->len, parts[i] + done, n);
				s->len += n;
				done += n;
				if (s->len == BUF_BYTES && (err = sink_flush(task, s)))
					return err;
			}
		s->buf[s->len++] = '\n';
		return 0;
	}
	if (rec->key_len) {
		memcpy(s->buf + s->len, rec->key, rec->key_len);
		s->len += rec->key_len;
		s->buf[s->len++] = '\t';
	}
	if (rec->value_len)
		memcpy(s->buf + s->len, rec->value, rec->value_len);
	s->len += rec->value_len;
	s->buf[s->len++] = '\n';
	return 0;
}

static int sink_end(struct shmrun_task *task, void *state)
{
	struct shmrun_file_out *s = state;
	int err = sink_flush(task, s);

	if (!err && s->owns_fd && !s->exactly_once && fsync(s->fd) < 0 && errno != EINVAL)
		err = io_error(task, "fsync of", s->path, errno);
	return err;
}

/* Barrier(e): close epoch e's staging file and record L(e). */
static int file_snapshot(struct shmrun_task *task, void *state, uint64_t epoch)
{
	struct shmrun_file_out *s = state;
	int err;

	if (!s->exactly_once)
		return 0;
	err = sink_flush(task, s);
	if (err)
		return err;
	if (s->stage_fd >= 0) {
		char from[PATH_MAX + NAME_MAX + 40], to[PATH_MAX + NAME_MAX + 40];

		staged_name(s, 0, from, sizeof(from));
		staged_name(s, epoch, to, sizeof(to));
		if (rename(from, to) < 0) {
			return io_error(task, "renaming staging file", from, errno);
		}
		if (shmrun_grow_u32(&s->pending, &s->cap, (size_t)s->npending + 1,
				    sizeof(*s->pending), 8))
			return -ENOMEM;
		s->pending[s->npending++] =
			(struct staged){epoch, s->length, s->stage_size, s->stage_fd};
		s->length += s->stage_size;
		err = shmrun_task_sync_fd(task, s->stage_fd);
		s->stage_fd = -1;
		if (err)
			return err;
	}
	return shmrun_pw_add(task, &s->length, sizeof(s->length));
}

/* Copy staged file @from (its fd or path) into the visible file at @offset. */
static int copy_staged(struct shmrun_task *task, struct shmrun_file_out *s, int fd, uint64_t offset,
		       uint64_t size)
{
	uint64_t done = 0;

	/* not s->buf: it holds the lines of the epoch now open */
	if (!s->copy && !(s->copy = malloc(BUF_BYTES)))
		return -ENOMEM;
	while (done < size) {
		ssize_t n = pread(fd, s->copy, size - done < BUF_BYTES ? size - done : BUF_BYTES,
				  (off_t)done);
		ssize_t w;

		if (n <= 0) {
			if (n < 0)
				return io_error(task, "reading a staging file of", s->path, errno);
			shmrun_task_error(task, "a staging file of %s is shorter than recorded; "
						"move %s aside and run the job again",
					  s->path, s->path);
			return -EIO;
		}
		for (ssize_t off = 0; off < n; off += w) {
			w = pwrite(s->fd, s->copy + off, (size_t)(n - off),
				   (off_t)(offset + done + (uint64_t)off));
			if (w < 0 && errno == EINTR) {
				w = 0;
				continue;
			}
			if (w < 0)
				return io_error(task, "writing", s->path, errno);
		}
		done += (uint64_t)n;
	}
	return 0;
}

/* Epochs up to @epoch are complete: make their staged output visible. */
static int file_commit(struct shmrun_task *task, void *state, uint64_t epoch)
{
	struct shmrun_file_out *s = state;
	uint32_t k = 0;
	int err = 0;

	if (!s->exactly_once || !s->npending || s->pending[0].epoch > epoch)
		return 0;
	for (; k < s->npending && s->pending[k].epoch <= epoch && !err; k++)
		err = copy_staged(task, s, s->pending[k].fd, s->pending[k].offset,
				  s->pending[k].size);
	if (!err && fsync(s->fd) < 0)
		err = io_error(task, "fsync of", s->path, errno);
	if (err)
		return err;
	for (uint32_t i = 0; i < k; i++) {
		char name[PATH_MAX + NAME_MAX + 40];

		staged_name(s, s->pending[i].epoch, name, sizeof(name));
		close(s->pending[i].fd);
		unlink(name);
	}
	if (k) /* none pending: s->pending may be NULL, memmove()'s UB */
		memmove(s->pending, s->pending + k, (s->npending - k) * sizeof(*s->pending));
	s->npending -= k;
	return 0;
}

/* qsort: staged epochs, newest first */
static int cmp_epoch_desc(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? 1 : x > y ? -1 : 0;
}

/*
 * Restore to L(r): replay staged files up to r (their offsets end at L(r)),
 * drop later ones, truncate the visible file to L(r).
 */
static int file_restore(struct shmrun_task *task, void *state, const void *entry, uint32_t len)
{
	struct shmrun_file_out *s = state;
	uint64_t r = shmrun_task_restored_epoch(task), target, cursor, *epochs = NULL;
	uint32_t n = 0, cap = 0;
	size_t blen = strlen(s->base);
	DIR *d;
	struct dirent *de;
	int err = 0;

	if (!s->exactly_once || len != sizeof(target)) {
		shmrun_task_error(task, "restored committed length is malformed");
		return -EBADMSG;
	}
	memcpy(&target, entry, sizeof(target));
	remove_staged_after(s, r);
	d = opendir(s->dir);
	if (!d) {
		return io_error(task, "reading the directory", s->dir, errno);
	}
	while ((de = readdir(d))) {
		const char *nm = de->d_name;
		char *end;
		unsigned long long e;

		if (nm[0] != '.' || strncmp(nm + 1, s->base, blen) != 0 || nm[1 + blen] != '.')
			continue;
		e = strtoull(nm + 2 + blen, &end, 10);
		if (strcmp(end, ".staged") != 0 || e == 0 || e > r)
			continue;
		if (shmrun_grow_u32(&epochs, &cap, (size_t)n + 1, sizeof(*epochs), 8)) {
			closedir(d);
			free(epochs);
			return -ENOMEM;
		}
		epochs[n++] = e;
	}
	closedir(d);
	if (n > 1)
		qsort(epochs, n, sizeof(*epochs), cmp_epoch_desc);
	cursor = target;
	for (uint32_t i = 0; i < n && !err; i++) {
		char name[PATH_MAX + NAME_MAX + 40];
		struct stat st;
		int fd;

		staged_name(s, epochs[i], name, sizeof(name));
		fd = open(name, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &st) < 0 || (uint64_t)st.st_size > cursor) {
			shmrun_task_error(task, "staging file %s does not fit the committed length "
						"%" PRIu64 " of %s",
					  name, target, s->path);
			if (fd >= 0)
				close(fd);
			err = -EBADMSG;
			break;
		}
		cursor -= (uint64_t)st.st_size;
		err = copy_staged(task, s, fd, cursor, (uint64_t)st.st_size);
		close(fd);
	}
	if (!err && ftruncate(s->fd, (off_t)target) < 0)
		err = io_error(task, "truncating", s->path, errno);
	if (!err && fsync(s->fd) < 0)
		err = io_error(task, "fsync of", s->path, errno);
	/* Oldest first: if a crash cuts this short, the staged files left are
	 * again the newest ones, contiguous up to L(r), as the replay assumes. */
	for (uint32_t i = n; i-- > 0 && !err;) {
		char name[PATH_MAX + NAME_MAX + 40];

		staged_name(s, epochs[i], name, sizeof(name));
		unlink(name);
	}
	free(epochs);
	s->length = target;
	return err;
}

static void sink_close(struct shmrun_task *task, void *state)
{
	struct shmrun_file_out *s = state;

	(void)task;
	if (!s)
		return;
	if (s->owns_fd)
		close(s->fd);
	if (s->stage_fd >= 0)
		close(s->stage_fd);
	for (uint32_t i = 0; i < s->npending; i++)
		close(s->pending[i].fd);
	free(s->pending);
	free(s->copy);
	free(s->buf);
	free(s);
}

/* ---- file_out.h: file_sink's output as a part of another operator ---------- */

int shmrun_file_out_put(struct shmrun_task *task, struct shmrun_file_out *out, const void *line,
			uint32_t len)
{
	struct shmrun_record rec = {.value = line, .value_len = len};

	return sink_process(task, out, &rec);
}

int shmrun_file_out_snapshot(struct shmrun_task *task, struct shmrun_file_out *out, uint64_t epoch)
{
	return file_snapshot(task, out, epoch);
}

int shmrun_file_out_restore(struct shmrun_task *task, struct shmrun_file_out *out, const void *entry,
			    uint32_t len)
{
	return file_restore(task, out, entry, len);
}

int shmrun_file_out_commit(struct shmrun_task *task, struct shmrun_file_out *out, uint64_t epoch)
{
	return file_commit(task, out, epoch);
}

int shmrun_file_out_flush(struct shmrun_task *task, struct shmrun_file_out *out)
{
	return sink_flush(task, out);
}

int shmrun_file_out_end(struct shmrun_task *task, struct shmrun_file_out *out)
{
	return sink_end(task, out);
}

void shmrun_file_out_close(struct shmrun_task *task, struct shmrun_file_out *out)
{
	sink_close(task, out);
}

static int null_process(struct shmrun_task *task, void *state, const struct shmrun_record *rec)
{
	(void)state;
	(void)rec;
	shmrun_task_count(task, SHMRUN_COUNT_RECORDS_OUT, 1);
	return 0;
}

/* flush_interval: named by .flush_param, read by the worker (flush.c). */
#define FLUSH_INTERVAL_PARAM                                                                     \
	{.key = "flush_interval", .type = SHMRUN_PARAM_DURATION, .def = "100ms",                 \
	 .min = 1000000ull, .max = 3600000000000ull, .tuning = true,                             \
	 .doc = "buffered lines are written at least this often while input keeps coming"}

static const struct shmrun_param_def file_params[] = {
	{.key = "path", .type = SHMRUN_PARAM_PATH, .required = true,
	 .doc = "output file; width k writes path.<instance>", .io = SHMRUN_PARAM_OUTPUT},
	FLUSH_INTERVAL_PARAM,
	{0},
};

static const struct shmrun_param_def stdout_params[] = {
	FLUSH_INTERVAL_PARAM,
	{0},
};

static const struct shmrun_param_def no_params[] = {{0}};

const struct shmrun_operator shmrun_op_file_sink = {
	.size = sizeof(struct shmrun_operator),
	.name = "file_sink",
	.summary = "writes key<TAB>value lines (value alone when the key is empty)",
	.flags = SHMRUN_OP_SINK,
	.params = file_params,
	.prepare = file_prepare,
	.open = file_open,
	.process = sink_process,
	.end_of_input = sink_end,
	.close = sink_close,
	/* no rule: a committed length belongs to one file, path or path.<i>;
	 * it cannot be split or copied, so a file_sink's width cannot change
	 * under --rescale (its worker count can). */
	.pw_rule = SHMRUN_PW_NONE,
	.snapshot = file_snapshot,
	.restore = file_restore,
	.commit = file_commit,
	.flush = sink_flush_cb,
	.flush_param = "flush_interval",
};

const struct shmrun_operator shmrun_op_stdout_sink = {
	.size = sizeof(struct shmrun_operator),
	.name = "stdout_sink",
	.summary = "writes key<TAB>value lines to standard output",
	.flags = SHMRUN_OP_SINK,
	.params = stdout_params,
	.open = stdout_open,
	.process = sink_process,
	.end_of_input = sink_end,
	.close = sink_close,
	.snapshot = stdout_snapshot,
	.flush = sink_flush_cb,
	.flush_param = "flush_interval",
};

const struct shmrun_operator shmrun_op_null_sink = {
	.size = sizeof(struct shmrun_operator),
	.name = "null_sink",
	.summary = "discards records (counts them)",
	.flags = SHMRUN_OP_SINK,
	.params = no_params,
	.process = null_process,
};
