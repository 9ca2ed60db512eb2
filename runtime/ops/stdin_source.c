/*
 * runtime/ops/stdin_source.c: one record per line of the job's standard input.
 *
 * What it is for: `tail -F app.log | shmrun job.conf`, `zcat x.gz | shmrun
 * job.conf`. Each line becomes a record with an empty key and the line
 * without its '\n' as value (as file_source emits); a final line without
 * '\n' is emitted at end of input, and end of input (the writer closed the
 * pipe, end of a redirected file) ends the source.
 *
 * Never blocks: produce() reads only when poll(2) with a zero timeout says
 * fd 0 is readable (or at its end), one read(2) at a time; when nothing is
 * there it returns 1 and the worker calls it again about 100 µs later (an
 * unpaced source, idle.c). O_NONBLOCK is not set: it is a flag of the open
 * file description, shared with whoever else holds it (the shell's
 * terminal), and would outlive the job there.
 *
 * Who reads fd 0: the stage has width 1 and a job has at most one such
 * stage, and the topology must not come from standard input itself (all
 * refused by the loader, conf_job.c check_sources()); the launcher reads
 * nothing from it, and every worker that does not run this stage points
 * its fd 0 at /dev/null (launcher.c), so the one worker that runs it is the
 * only reader.
 *
 * A line longer than the largest record a ring of this job holds
 * (shmrun_task_max_record(): ring_bytes/2 - 32) fails the job with a message
 * naming the limit: the buffer grows up to that and no further, so input
 * without a '\n' (a binary file) cannot take unbounded memory.
 *
 * Not replayable (SHMRUN_OP_UNREPLAYABLE): what was read from a pipe cannot
 * be read again, so the source snapshots no position and a job with
 * checkpoint_dir needs [job] allow_data_loss_on_crash = true (at-most-once
 * for what it read since the last checkpoint). Rejected: spooling the input
 * to a file inside checkpoint_dir to replay it (unbounded disk for a stream
 * that never ends, and a second copy of every byte on the data path).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "framer.h"
#include "ops.h"

#define READ_BYTES     (1u << 20)
#define LINES_PER_EMIT 256u

struct stdin_src {
	struct framer fr;
	struct shmrun_record lines[LINES_PER_EMIT]; /* queued, pointing into fr */
	uint32_t nlines;
	uint64_t lineno; /* lines emitted, for messages */
	bool eof;
};

static int flush_lines(struct shmrun_task *task, struct stdin_src *s)
{
	uint32_t n = s->nlines;

	if (!n)
		return 0;
	s->nlines = 0;
	s->lineno += n;
	shmrun_task_count(task, SHMRUN_COUNT_RECORDS_IN, n);
	return shmrun_emit_batch(task, s->lines, n);
}

static int queue_line(struct shmrun_task *task, struct stdin_src *s, const void *v, uint32_t len)
{
	s->lines[s->nlines++] = (struct shmrun_record){.value = v, .value_len = len};
	return s->nlines == LINES_PER_EMIT ? flush_lines(task, s) : 0;
}

static int too_long(struct shmrun_task *task, struct stdin_src *s)
{
	shmrun_task_error(task,
			  "line %llu of standard input is longer than %u bytes, the largest "
			  "record a ring of this job holds (ring_bytes/2 - 32); raise ring_bytes "
			  "in [job], or split the input into shorter lines",
			  (unsigned long long)(s->lineno + s->nlines + 1), s->fr.max);
	return -EMSGSIZE;
}

static int stdin_open(struct shmrun_task *task, void **state)
{
	struct stdin_src *s = calloc(1, sizeof(*s));
	int fl;

	if (!s)
		return -ENOMEM;
	*state = s;
	fl = fcntl(STDIN_FILENO, F_GETFL);
	if (fl < 0 || (fl & O_ACCMODE) == O_WRONLY) {
		shmrun_task_error(
		    task,
		    "standard input is %s: stdin_source has nothing to read; start the "
		    "job with its input on standard input, e.g. tail -F app.log | "
		    "shmrun job.conf",
		    fl < 0 ? "closed" : "open for writing only");
		return -EBADF;
	}
	return framer_init(&s->fr, FRAMER_LINE, shmrun_task_max_record(task), READ_BYTES);
}

static int stdin_produce(struct shmrun_task *task, void *state, uint32_t budget)
{
	struct stdin_src *s = state;
	const void *v;
	uint32_t len;
	int r, err;

	while (budget > 0) {
		struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN};
		unsigned char *at;
		long room;
		ssize_t n;

		r = framer_next(&s->fr, &v, &len);
		if (r == -EMSGSIZE) {
			err = flush_lines(task, s);
			return err ? err : too_long(task, s);
		}
		if (r == 1) {
			budget--;
			err = queue_line(task, s, v, len);
			if (err)
				return err;
			continue;
		}
		if (s->eof) {
			if (framer_rest(&s->fr, &v, &len) == 1) {
				err = queue_line(task, s, v, len);
				if (err)
					return err;
			}
			err = flush_lines(task, s);
			return err ? err : 0;
		}
		/* framer_room() may move the bytes the queued lines point into */
		err = flush_lines(task, s);
		if (err)
			return err;
		r = poll(&pfd, 1, 0);
		if (r < 0 && errno != EINTR) {
			shmrun_task_error(task, "standard input: poll: %s", strerror(errno));
			return -errno;
		}
		if (r <= 0)
			break; /* nothing to read now: come back later */
		if (pfd.revents & POLLNVAL) {
			shmrun_task_error(task, "standard input was closed");
			return -EBADF;
		}
		room = framer_room(&s->fr, &at);
		if (room < 0)
			return (int)room;
		do
			n = read(STDIN_FILENO, at, (size_t)room);
		while (n < 0 && errno == EINTR);
		if (n < 0 && errno == EAGAIN)
			break; /* someone set O_NONBLOCK and took the bytes: later */
		if (n < 0) {
			shmrun_task_error(task, "reading standard input: %s", strerror(errno));
			return -errno;
		}
		if (n == 0)
			s->eof = true;
		framer_fill(&s->fr, (size_t)n);
	}
	err = flush_lines(task, s);
	return err ? err : 1;
}

static void stdin_close(struct shmrun_task *task, void *state)
{
	struct stdin_src *s = state;

	(void)task;
	if (!s)
		return;
	framer_free(&s->fr);
	free(s);
}

static const struct shmrun_param_def params[] = {
    {.key = "rate",
     .type = SHMRUN_PARAM_RATE,
     .min = 1,
     .max = 1000000000000ull,
     .doc = "records per second at most (default: unlimited)",
     .tuning = true},
    {0},
};

const struct shmrun_operator shmrun_op_stdin_source = {
    .size = sizeof(struct shmrun_operator),
    .name = "stdin_source",
    .summary = "reads lines of the job's standard input: one record per line, value = the "
	       "line without \\n; ends at end of input; width 1; cannot be replayed",
    .flags = SHMRUN_OP_SOURCE | SHMRUN_OP_UNREPLAYABLE,
    .params = params,
    .pacing_param = "rate",
    .open = stdin_open,
    .produce = stdin_produce,
    .close = stdin_close,
};
