/*
 * tests/plugins/crash.c: a plugin whose operator misbehaves on request, for
 * tests/integration/plugin_crash.sh (crash containment, issue 11 §5).
 *
 * Operator `crash`: passes every record on unchanged, and at the n-th record
 * an instance processes (counted from 1 since its open()):
 *
 *     segv_at = n    process() stores through a NULL pointer (SIGSEGV)
 *     abort_at = n   process() calls abort() (SIGABRT)
 *     sleep_at = n   process() sleeps `sleep` (a duration), then goes on
 *     exit_at = n    process() calls exit(0), which an operator must not
 *     once = PATH    any of these happens only if PATH can be created
 *                    (O_EXCL): once per job, whatever the restarts and
 *                    instances, so a checkpointed job can recover
 *     after_commit = true   a fault that is due waits until a checkpoint is
 *                    complete (commit() was called), so that a restart is
 *                    sure to restore one however slow the machine is
 *
 * Built as a CMake MODULE library, crash.so (tests/plugins/CMakeLists.txt).
 * Nothing of the runtime is used but the public API, as a user's plugin.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <shmrun/operator.h>

struct crash_state {
	uint64_t seen;                      /* records processed by this instance */
	uint64_t segv_at, abort_at, sleep_at, exit_at;
	uint64_t sleep_ns;
	const char *once;                   /* NULL: every time */
	bool after_commit, committed;       /* wait for a complete checkpoint */
	bool done[4];                       /* segv, abort, exit, sleep: happened */
};

/*
 * A real segmentation fault: a store to a page mapped PROT_NONE. Unlike a store
 * through a null pointer it is not undefined behaviour, so UBSan (built with
 * -fno-sanitize-recover) does not stop the process first with exit status 1.
 */
static void crash_segv(void)
{
	void *p = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p != MAP_FAILED)
		*(volatile int *)p = 1;
	raise(SIGSEGV); /* no mapping to fault on: the same signal */
}

static int crash_open(struct shmrun_task *task, void **state)
{
	struct crash_state *s = calloc(1, sizeof(*s));

	if (!s) {
		shmrun_task_error(task, "out of memory");
		return -ENOMEM;
	}
	s->segv_at = shmrun_task_param_u64(task, "segv_at", 0);
	s->abort_at = shmrun_task_param_u64(task, "abort_at", 0);
	s->sleep_at = shmrun_task_param_u64(task, "sleep_at", 0);
	s->exit_at = shmrun_task_param_u64(task, "exit_at", 0);
	s->sleep_ns = shmrun_task_param_u64(task, "sleep", 0);
	s->once = shmrun_task_param(task, "once");
	s->after_commit = shmrun_task_param_bool(task, "after_commit", false);
	*state = s;
	return 0;
}

/*
 * Whether fault @i, due at record @at (0: never), happens now: at record @at,
 * or with after_commit at the first record from @at on that follows a complete
 * checkpoint; once per instance, and with s->once once per job.
 */
static int may_fire(struct crash_state *s, int i, uint64_t at)
{
	int fd;

	if (!at || s->done[i] || s->seen < at || (s->seen > at && !s->after_commit) ||
	    (s->after_commit && !s->committed))
		return 0;
	s->done[i] = true;
	if (!s->once)
		return 1;
	fd = open(s->once, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return 0;
	close(fd);
	return 1;
}

static int crash_process(struct shmrun_task *task, void *state, const struct shmrun_record *rec)
{
	struct crash_state *s = state;

	s->seen++;
	if (may_fire(s, 0, s->segv_at))
		crash_segv(); /* the bug this plugin has */
	if (may_fire(s, 1, s->abort_at))
		abort();
	if (may_fire(s, 2, s->exit_at))
		exit(0);
	if (may_fire(s, 3, s->sleep_at)) {
		struct timespec ts = {(time_t)(s->sleep_ns / 1000000000),
				      (long)(s->sleep_ns % 1000000000)};

		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
	}
	return shmrun_emit(task, rec);
}

static int crash_commit(struct shmrun_task *task, void *state, uint64_t epoch)
{
	struct crash_state *s = state;

	(void)task;
	(void)epoch;
	s->committed = true;
	return 0;
}

static void crash_close(struct shmrun_task *task, void *state)
{
	(void)task;
	free(state);
}

static const struct shmrun_param_def crash_params[] = {
	{.key = "segv_at", .type = SHMRUN_PARAM_COUNT, .def = "0", .max = 1000000000,
	 .doc = "dereference NULL at this record of an instance (0: never)"},
	{.key = "abort_at", .type = SHMRUN_PARAM_COUNT, .def = "0", .max = 1000000000,
	 .doc = "abort() at this record of an instance (0: never)"},
	{.key = "exit_at", .type = SHMRUN_PARAM_COUNT, .def = "0", .max = 1000000000,
	 .doc = "exit(0) at this record of an instance (0: never)"},
	{.key = "sleep_at", .type = SHMRUN_PARAM_COUNT, .def = "0", .max = 1000000000,
	 .doc = "sleep `sleep` at this record of an instance (0: never)"},
	{.key = "sleep", .type = SHMRUN_PARAM_DURATION, .def = "1s", .min = 1000000,
	 .max = 60000000000ull, .doc = "how long sleep_at sleeps"},
	{.key = "once", .type = SHMRUN_PARAM_PATH,
	 .doc = "a file the fault creates: it happens once per job (absent: every time)"},
	{.key = "after_commit", .type = SHMRUN_PARAM_BOOL, .def = "false",
	 .doc = "a due fault waits for a complete checkpoint (commit())"},
	{.key = NULL},
};

static const struct shmrun_operator crash_op = {
	.size = sizeof(struct shmrun_operator),
	.name = "crash",
	.summary = "passes records on; crashes or sleeps at a given record (test plugin)",
	.params = crash_params,
	.open = crash_open,
	.process = crash_process,
	.commit = crash_commit,
	.close = crash_close,
	.pw_rule = SHMRUN_PW_NONE,
};

SHMRUN_PLUGIN("crash", "1.0.0", &crash_op);
