/*
 * runtime/callback.c: naming the operator callback a worker crashed or hangs
 * in (callback.h has the design, the word layout, its memory-ordering pair
 * and the designs rejected).
 *
 * Three parts, all on the launcher's side (the worker's side is the inline
 * cb_enter()/cb_leave() of callback.h):
 *   - shmrun_cb_describe(): a cb_where word in the user's terms — callback,
 *     stage, instance, operator and its origin (built-in or plugin file);
 *   - shmrun_cb_watch(): operator_timeout. The supervise loop calls it every
 *     operator_timeout/4; a worker whose cb_seq has not moved since a sample
 *     at least operator_timeout ago while its cb_where is non-zero has been
 *     in one call that long (it entered before that sample). So a call is
 *     reported between operator_timeout and 1.25 x operator_timeout after it
 *     began, once; when it returns, one more line says after how long;
 *   - shmrun_cb_guard_begin()/end(): prepare() and check_restore() run in
 *     the launcher itself, where no supervisor would see them crash: a
 *     handler on an alternate stack (a stack overflow still reports) writes
 *     one composed-in-advance line with write(2), the only async-signal-safe
 *     output, and re-raises the signal with its default action.
 *
 * Invariants: the watch never signals, stops or restarts anything (report
 * only, callback.h says why); the guard's handler calls only write(2),
 * sigaction(2) and raise(3), and reads only static memory written before the
 * callback was called.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "callback.h"
#include "control.h"
#include "internal.h"
#include "plan.h"
#include "shmrun/runtime.h"

static const char *const cb_names[SHMRUN_CB_COUNT] = {
	[SHMRUN_CB_NONE] = "no callback",
	[SHMRUN_CB_OPEN] = "open()",
	[SHMRUN_CB_PRODUCE] = "produce()",
	[SHMRUN_CB_PROCESS] = "process()",
	[SHMRUN_CB_PROCESS_BATCH] = "process_batch()",
	[SHMRUN_CB_MERGE] = "merge()",
	[SHMRUN_CB_ADD] = "add()",
	[SHMRUN_CB_END_OF_INPUT] = "end_of_input()",
	[SHMRUN_CB_CLOSE] = "close()",
	[SHMRUN_CB_SNAPSHOT] = "snapshot()",
	[SHMRUN_CB_RESTORE] = "restore()",
	[SHMRUN_CB_COMMIT] = "commit()",
	[SHMRUN_CB_FLUSH] = "flush()",
	[SHMRUN_CB_PREPARE] = "prepare()",
	[SHMRUN_CB_CHECK_RESTORE] = "check_restore()",
	[SHMRUN_CB_ON_TIMER] = "on_timer()",
	[SHMRUN_CB_ON_WATERMARK] = "on_watermark()",
};

const char *shmrun_cb_name(unsigned cb)
{
	return cb < SHMRUN_CB_COUNT ? cb_names[cb] : "?()";
}

void shmrun_cb_operator(const struct shmrun_operator *op, char *buf, size_t len)
{
	const struct shmrun_plugin_info *pi = op ? shmrun_operator_plugin(op) : NULL;
	const char *name = op && op->name ? op->name : "?";

	if (!pi)
		snprintf(buf, len, "operator %s (built-in)", name);
	else /* as `shmrun ops` writes a plugin's origin */
		snprintf(buf, len, "operator %s of plugin %s %s (%s)", name,
			 pi->name ? pi->name : "?", pi->version ? pi->version : "?",
			 pi->path ? pi->path : "?");
}

bool shmrun_cb_describe(const struct shmrun_plan *plan, uint64_t where, char *buf, size_t len)
{
	const struct shmrun_job *job = plan->job;
	uint32_t task = (uint32_t)where, cb = (uint32_t)(where >> 32) & 0xff;
	uint32_t aux = (uint32_t)(where >> 40);
	const struct shmrun_plan_task *pt;
	const struct shmrun_stage *st;
	char opname[PATH_MAX + 256];

	buf[0] = '\0';
	if (!where || task >= plan->ntasks)
		return false;
	pt = &plan->tasks[task];
	st = &job->stages[pt->stage];
	if (cb == SHMRUN_CB_ADD && aux >= 1 && aux <= job->nstages) {
		const struct shmrun_stage *to = &job->stages[aux - 1];

		shmrun_cb_operator(to->op, opname, sizeof(opname));
		snprintf(buf, len,
			 "add() of the combiner of stage %s, %s, on the sending side in stage %s, "
			 "instance %u",
			 to->name, opname, st->name, pt->instance);
		return true;
	}
	shmrun_cb_operator(st->op, opname, sizeof(opname));
	snprintf(buf, len, "%s of stage %s, instance %u, %s", shmrun_cb_name(cb), st->name,
		 pt->instance, opname);
	return true;
}

/* ---- operator_timeout --------------------------------------------------------- */

int shmrun_cb_watch_init(struct cb_watch *cw, uint32_t workers)
{
	*cw = (struct cb_watch){.n = workers};
	cw->seq = calloc(workers + 1, sizeof(*cw->seq));
	cw->where = calloc(workers + 1, sizeof(*cw->where));
	cw->since_ns = calloc(workers + 1, sizeof(*cw->since_ns));
	cw->state = calloc(workers + 1, sizeof(*cw->state));
	if (!cw->seq || !cw->where || !cw->since_ns || !cw->state) {
		shmrun_cb_watch_free(cw);
		return -ENOMEM;
	}
	return 0;
}

void shmrun_cb_watch_free(struct cb_watch *cw)
{
	free(cw->seq);
	free(cw->where);
	free(cw->since_ns);
	free(cw->state);
	*cw = (struct cb_watch){0};
}

int64_t shmrun_cb_watch_tick_ns(uint64_t timeout_ns, int64_t max_ns)
{
	int64_t q = (int64_t)(timeout_ns / 4);

	if (!timeout_ns || q >= max_ns)
		return max_ns;
	return q < 1000000 ? 1000000 : q;
}

enum say { SAY_STUCK, SAY_RETURNED, SAY_ENDED };

/*
 * Call @where of worker @w (@pid) seen running for @ns: SAY_STUCK, past
 * operator_timeout; SAY_RETURNED, back in its caller or a new call;
 * SAY_ENDED, the worker exited after it returned (within @ns).
 */
static void say(const struct shmrun_plan *plan, uint32_t w, pid_t pid, uint64_t where, int64_t ns,
		enum say what_now)
{
	const struct shmrun_job *job = plan->job;
	char what[PATH_MAX + 512];

	shmrun_cb_describe(plan, where, what, sizeof(what));
	if (what_now != SAY_STUCK) {
		shmrun_log(SHMRUN_LOG_INFO, "worker %u (pid %d): %s returned %s %.2f s%s", w,
			   (int)pid, what, what_now == SAY_RETURNED ? "after about" : "within",
			   (double)ns / 1e9,
			   what_now == SAY_RETURNED ? "" : " (seen when the worker ended)");
		return;
	}
	shmrun_log(SHMRUN_LOG_WARN,
		   "worker %u (pid %d, CPU %d): %s has not returned for %.2f s (operator_timeout "
		   "%.3g s); the job waits for it. If it is stuck, `kill -KILL %d` ends the "
		   "worker: %s",
		   w, (int)pid, shmrun_plan_cpu_of(plan, w), what, (double)ns / 1e9,
		   (double)job->operator_timeout_ns / 1e9, (int)pid,
		   job->checkpoint_dir ? "the job then restarts from its last complete checkpoint"
				       : "the job then fails (no checkpoint_dir: no restart)");
}

void shmrun_cb_watch(struct cb_watch *cw, const struct shmrun_plan *plan,
		     struct shmrun_control *ctl, const pid_t *pids, int64_t now)
{
	uint64_t timeout = plan->job->operator_timeout_ns;
	struct shmrun_worker_stats *stats;

	if (!timeout || !cw->seq || now < cw->next_ns)
		return;
	cw->next_ns = now + shmrun_cb_watch_tick_ns(timeout, INT64_MAX);
	stats = shmrun_control_stats(ctl);
	for (uint32_t w = 0; w < cw->n; w++) {
		/* acquire: pairs with the release stores of cb_where in
		 * cb_enter()/cb_leave(); cb_seq is at least that entry's (C13) */
		uint64_t where = atomic_load_explicit(&stats[w].cb_where, memory_order_acquire);
		uint64_t seq = atomic_load_explicit(&stats[w].cb_seq, memory_order_relaxed);

		if (pids[w] <= 0)
			continue;
		if (seq != cw->seq[w]) { /* a new call since the last sample */
			if (cw->state[w] == CB_TOLD)
				say(plan, w, pids[w], cw->where[w], now - cw->since_ns[w], SAY_RETURNED);
			cw->seq[w] = seq;
			cw->since_ns[w] = now;
			cw->state[w] = CB_WATCHING;
			continue;
		}
		if (cw->state[w] == CB_TOLD && where != cw->where[w]) {
			/* back in its caller (or idle): that call returned */
			say(plan, w, pids[w], cw->where[w], now - cw->since_ns[w], SAY_RETURNED);
			cw->state[w] = CB_QUIET;
		} else if (cw->state[w] == CB_WATCHING && where &&
			   now - cw->since_ns[w] >= (int64_t)timeout) {
			say(plan, w, pids[w], where, now - cw->since_ns[w], SAY_STUCK);
			cw->where[w] = where;
			cw->state[w] = CB_TOLD;
		}
	}
}

/* ---- the launcher's own callbacks --------------------------------------------- */

static const struct {
	int sig;
	const char *name;
} sig_names[] = {
	{SIGSEGV, "SIGSEGV"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},   {SIGILL, "SIGILL"},
	{SIGABRT, "SIGABRT"}, {SIGKILL, "SIGKILL"}, {SIGTERM, "SIGTERM"}, {SIGINT, "SIGINT"},
	{SIGHUP, "SIGHUP"},   {SIGQUIT, "SIGQUIT"}, {SIGPIPE, "SIGPIPE"}, {SIGXFSZ, "SIGXFSZ"},
	{SIGXCPU, "SIGXCPU"}, {SIGTRAP, "SIGTRAP"}, {SIGSYS, "SIGSYS"},   {SIGALRM, "SIGALRM"},
	{SIGUSR1, "SIGUSR1"}, {SIGUSR2, "SIGUSR2"},
};

const char *shmrun_signal_name(int sig)
{
	for (size_t i = 0; i < sizeof(sig_names) / sizeof(sig_names[0]); i++)
		if (sig_names[i].sig == sig)
			return sig_names[i].name;
	return "SIG?";
}

static const int guard_sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
#define NGUARD (sizeof(guard_sigs) / sizeof(guard_sigs[0]))
#define GUARD_STACK (64u << 10)

static struct {
	bool on;
	char head[PATH_MAX + 640]; /* "ERROR launcher: prepare() of stage ... crashed with " */
	char tail[160];            /* "; nothing was started ...\n" */
	struct sigaction old[NGUARD];
	stack_t old_stack;
	char *stack;
} guard;

static void guard_write(const char *s)
{
	size_t n = strlen(s);

	while (n) {
		ssize_t k = write(STDERR_FILENO, s, n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return;
		s += k;
		n -= (size_t)k;
	}
}

/* SA_RESETHAND | SA_NODEFER: the raise() below meets the default action at once. */
static void on_guard_signal(int sig)
{
	guard_write(guard.head);
	guard_write(shmrun_signal_name(sig));
	guard_write(guard.tail);
	raise(sig);
}

/*
 * --log-format=json: guard.head and guard.tail become the two halves of the
 * JSON record of the same message, split where the signal's name goes (a
 * marker that JSON escapes as \u0001SIG, which no other text produces;
 * signal names need no escaping). Left as text if it does not fit.
 */
static void guard_json(void)
{
	static const char mark[] = "\\u0001SIG";
	char msg[sizeof(guard.head) + sizeof(guard.tail) + 8], line[sizeof(guard.head) + 256];
	const char *cut;
	size_t head_len = strlen(guard.head) - strlen("ERROR launcher: ");
	int n;

	snprintf(msg, sizeof(msg), "%.*s\001SIG%s", (int)head_len,
		 guard.head + strlen("ERROR launcher: "), guard.tail);
	msg[strcspn(msg, "\n")] = '\0';
	n = shmrun_log_format_json(SHMRUN_LOG_ERROR, msg, line, sizeof(line));
	if (n < 0 || !(cut = strstr(line, mark)) ||
	    strlen(cut + strlen(mark)) + 2 > sizeof(guard.tail) ||
	    (size_t)(cut - line) + 1 > sizeof(guard.head))
		return;
	snprintf(guard.tail, sizeof(guard.tail), "%s\n", cut + strlen(mark));
	memcpy(guard.head, line, (size_t)(cut - line));
	guard.head[cut - line] = '\0';
}

void shmrun_cb_guard_begin(const struct shmrun_job *job, uint32_t stage, uint32_t instance,
			   enum shmrun_cb cb)
{
	const struct shmrun_stage *st = &job->stages[stage];
	char opname[PATH_MAX + 256];
	struct sigaction sa;
	stack_t ss;

	if (guard.on)
		return;
	shmrun_cb_operator(st->op, opname, sizeof(opname));
	snprintf(guard.head, sizeof(guard.head),
		 "ERROR launcher: %s of stage %s, instance %u, %s crashed with ", shmrun_cb_name(cb),
		 st->name, instance, opname);
	snprintf(guard.tail, sizeof(guard.tail),
		 " in the launcher, before any worker started; nothing was started\n");
	if (shmrun_log_get_format() == SHMRUN_LOG_JSON)
		guard_json(); /* the same words as one JSON record */
	if (!guard.stack)
		guard.stack = malloc(GUARD_STACK); /* kept for the next guard, reachable */
	if (guard.stack) {
		ss = (stack_t){.ss_sp = guard.stack, .ss_size = GUARD_STACK};
		sigaltstack(&ss, &guard.old_stack);
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_guard_signal;
	sa.sa_flags = SA_ONSTACK | SA_RESETHAND | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < NGUARD; i++)
		sigaction(guard_sigs[i], &sa, &guard.old[i]);
	guard.on = true;
}

void shmrun_cb_guard_end(void)
{
	if (!guard.on)
		return;
	for (size_t i = 0; i < NGUARD; i++)
		sigaction(guard_sigs[i], &guard.old[i], NULL);
	if (guard.stack)
		sigaltstack(&guard.old_stack, NULL);
	guard.on = false;
}

void shmrun_cb_watch_ended(struct cb_watch *cw, const struct shmrun_plan *plan,
			   struct shmrun_control *ctl, uint32_t w, pid_t pid, int64_t now)
{
	uint64_t where, seq;

	if (!cw->seq || w >= cw->n || cw->state[w] != CB_TOLD)
		return;
	/* after waitpid: the dead worker's last stores are final (relaxed) */
	where = atomic_load_explicit(&shmrun_control_stats(ctl)[w].cb_where, memory_order_relaxed);
	seq = atomic_load_explicit(&shmrun_control_stats(ctl)[w].cb_seq, memory_order_relaxed);
	if (where != cw->where[w] || seq != cw->seq[w]) /* else it died in that call */
		say(plan, w, pid, cw->where[w], now - cw->since_ns[w], SAY_ENDED);
	cw->state[w] = CB_QUIET;
}
