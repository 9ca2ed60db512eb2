/*
 * runtime/ops/sinks.c: file_sink, stdout_sink, null_sink.
 *
 * Both writing sinks write one line per record: key, TAB, value, '\n' — or the
 * value alone when the key is empty. Lines are gathered in a 1 MiB buffer and
 * written with write(2) in whole lines, so the lines of several instances
 * sharing standard output never interleave mid-line.
 *
 * file_sink: width 1 writes `path`, width k writes `path.<instance>`; missing
 * parent directories are created; an existing file is replaced.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ops.h"

#define BUF_BYTES (1u << 20)

struct sink {
	int fd;
	bool owns_fd;
	char path[PATH_MAX];
	unsigned char *buf;
	size_t len;
};

static int write_all(struct shmrun_task *task, struct sink *s, const unsigned char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(s->fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			shmrun_task_error(task, "writing %s: %s", s->path, strerror(errno));
			return -errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int sink_flush(struct shmrun_task *task, struct sink *s)
{
	int err = write_all(task, s, s->buf, s->len);

	s->len = 0;
	return err;
}

static int mkdirs(char *path)
{
	for (char *p = strchr(path + 1, '/'); p; p = strchr(p + 1, '/')) {
		*p = 0;
		if (mkdir(path, 0777) < 0 && errno != EEXIST) {
			*p = '/';
			return -errno;
		}
		*p = '/';
	}
	return 0;
}

static int sink_new(struct shmrun_task *task, void **state, int fd, const char *name)
{
	struct sink *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	*state = s;
	s->fd = fd;
	snprintf(s->path, sizeof(s->path), "%s", name);
	s->buf = malloc(BUF_BYTES);
	return s->buf ? 0 : -ENOMEM;
}

static int file_open(struct shmrun_task *task, void **state)
{
	const char *path = shmrun_task_param(task, "path");
	char name[PATH_MAX];
	struct sink *s;
	int err, fd;

	if (shmrun_task_width(task) > 1)
		snprintf(name, sizeof(name), "%s.%u", path, shmrun_task_instance(task));
	else
		snprintf(name, sizeof(name), "%s", path);
	err = mkdirs(name);
	if (err) {
		shmrun_task_error(task, "cannot create the directory of %s: %s", name,
				  strerror(-err));
		return err;
	}
	fd = open(name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (fd < 0) {
		shmrun_task_error(task, "cannot open %s for writing: %s", name, strerror(errno));
		return -errno;
	}
	err = sink_new(task, state, fd, name);
	s = *state;
	if (s)
		s->owns_fd = true;
	else
		close(fd);
	return err;
}

static int stdout_open(struct shmrun_task *task, void **state)
{
	return sink_new(task, state, STDOUT_FILENO, "standard output");
}

static int sink_process(struct shmrun_task *task, void *state, const struct shmrun_record *rec)
{
	struct sink *s = state;
	size_t need = (size_t)rec->key_len + rec->value_len + 2;
	int err;

	if (s->len + need > BUF_BYTES) {
		err = sink_flush(task, s);
		if (err)
			return err;
	}
	shmrun_task_count(task, SHMRUN_COUNT_RECORDS_OUT, 1);
	if (need > BUF_BYTES) { /* a line longer than the buffer goes straight out */
		const unsigned char tab = '\t', nl = '\n';

		if (rec->key_len && ((err = write_all(task, s, rec->key, rec->key_len)) ||
				     (err = write_all(task, s, &tab, 1))))
			return err;
		if ((err = write_all(task, s, rec->value, rec->value_len)))
			return err;
		return write_all(task, s, &nl, 1);
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
	struct sink *s = state;
	int err = sink_flush(task, s);

	if (!err && s->owns_fd && fsync(s->fd) < 0 && errno != EINVAL) {
		shmrun_task_error(task, "fsync %s: %s", s->path, strerror(errno));
		err = -errno;
	}
	return err;
}

static void sink_close(struct shmrun_task *task, void *state)
{
	struct sink *s = state;

	(void)task;
	if (!s)
		return;
	if (s->owns_fd)
		close(s->fd);
	free(s->buf);
	free(s);
}

static int null_process(struct shmrun_task *task, void *state, const struct shmrun_record *rec)
{
	(void)state;
	(void)rec;
	shmrun_task_count(task, SHMRUN_COUNT_RECORDS_OUT, 1);
	return 0;
}

static const struct shmrun_param_def file_params[] = {
	{.key = "path", .type = SHMRUN_PARAM_PATH, .required = true,
	 .doc = "output file; width k writes path.<instance>"},
	{0},
};

static const struct shmrun_param_def no_params[] = {{0}};

const struct shmrun_operator shmrun_op_file_sink = {
	.name = "file_sink",
	.summary = "writes key<TAB>value lines (value alone when the key is empty)",
	.flags = SHMRUN_OP_SINK,
	.params = file_params,
	.open = file_open,
	.process = sink_process,
	.end_of_input = sink_end,
	.close = sink_close,
};

const struct shmrun_operator shmrun_op_stdout_sink = {
	.name = "stdout_sink",
	.summary = "writes key<TAB>value lines to standard output",
	.flags = SHMRUN_OP_SINK,
	.params = no_params,
	.open = stdout_open,
	.process = sink_process,
	.end_of_input = sink_end,
	.close = sink_close,
};

const struct shmrun_operator shmrun_op_null_sink = {
	.name = "null_sink",
	.summary = "discards records (counts them)",
	.flags = SHMRUN_OP_SINK,
	.params = no_params,
	.process = null_process,
};
