/*
 * tests/plugins/leaky_sink.c: a deliberately broken sink, for
 * tests/integration/stress_cmd.sh: `shmrun stress` must catch it.
 *
 * leaky_sink CLAIMS exactly-once — it has a commit(), so stress accepts the
 * topology — but its commit() does nothing: process() appends each record to
 * its output file at once ("KEY<TAB>VALUE\n", width k: path.<instance>). After
 * a kill -9 the launcher restarts from the last checkpoint and the records
 * processed since then are appended a second time: duplicated lines, which a
 * correct sink (file_sink: staged files published by commit(), the visible
 * file truncated to its committed length on restore) never shows.
 *
 * Rejected: a sink that loses records instead: a kill would still be caught,
 * but duplicates are the classic at-least-once failure this guards against.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <shmrun/operator.h>

struct leaky_state {
	int fd;
};

static int leaky_open(struct shmrun_task *task, void **state)
{
	const char *path = shmrun_task_param(task, "path");
	struct leaky_state *s = calloc(1, sizeof(*s));
	char name[4096];

	if (!s)
		return -ENOMEM;
	if (shmrun_task_width(task) > 1)
		snprintf(name, sizeof(name), "%s.%u", path, shmrun_task_instance(task));
	else
		snprintf(name, sizeof(name), "%s", path);
	/* appended to, never truncated or rolled back: the bug */
	s->fd = open(name, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (s->fd < 0) {
		int e = errno;

		shmrun_task_error(task, "cannot open %s: %s", name, strerror(e));
		free(s);
		return -e;
	}
	*state = s;
	return 0;
}

static int leaky_process(struct shmrun_task *task, void *state, const struct shmrun_record *rec)
{
	struct leaky_state *s = state;
	struct iovec iov[4] = {
		{(void *)rec->key, rec->key_len},
		{(void *)"\t", 1},
		{(void *)rec->value, rec->value_len},
		{(void *)"\n", 1},
	};

	if (writev(s->fd, iov, 4) < 0) {
		int e = errno;

		shmrun_task_error(task, "write: %s", strerror(e));
		return -e;
	}
	return 0;
}

/* Claims two-phase commit; publishes nothing (everything is visible already). */
static int leaky_commit(struct shmrun_task *task, void *state, uint64_t epoch)
{
	(void)task;
	(void)state;
	(void)epoch;
	return 0;
}

static void leaky_close(struct shmrun_task *task, void *state)
{
	struct leaky_state *s = state;

	(void)task;
	close(s->fd);
	free(s);
}

static const struct shmrun_param_def leaky_params[] = {
	{.key = "path", .type = SHMRUN_PARAM_PATH, .required = true, .io = SHMRUN_PARAM_OUTPUT,
	 .doc = "file the records are appended to (width k: path.<instance>)"},
	{.key = NULL},
};

static const struct shmrun_operator leaky_op = {
	.size = sizeof(struct shmrun_operator),
	.name = "leaky_sink",
	.summary = "appends records at once, commit() does nothing: NOT exactly-once (test plugin)",
	.flags = SHMRUN_OP_SINK,
	.params = leaky_params,
	.open = leaky_open,
	.process = leaky_process,
	.commit = leaky_commit,
	.close = leaky_close,
	.pw_rule = SHMRUN_PW_NONE,
};

SHMRUN_PLUGIN("leaky_sink", "1.0.0", &leaky_op);
