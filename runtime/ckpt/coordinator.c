/*
 * runtime/ckpt/coordinator.c: worker 0's side of the checkpoint protocol —
 * trigger, abort, the MANIFEST child and its reaping, the per-worker state
 * guard, the description of a timed-out epoch.
 *
 * The protocol (Chandy–Lamport as Flink's asynchronous barrier snapshots,
 * docs/design.md §6; docs/checkpoints.md):
 *
 *   1. Worker 0 starts epoch e: trigger_epoch = e (release).
 *   2. Each source task, between two records, snapshots its read positions and
 *      sends barrier(e) on every output. A task with several inputs holds back
 *      each input that delivered barrier(e) until all have (alignment), then
 *      snapshots and forwards barrier(e). (worker.c, ckpt/snapshot.c)
 *   3. A snapshot is taken in the task's worker in O(per-worker state): the
 *      worker forks, and the child — holding a copy-on-write image of the
 *      key-bound state as of the barrier — writes the task's state file with
 *      io_uring, fsyncs it and records size and checksum in the task's slot.
 *      The parent goes on processing at once.
 *   4. When every task's slot shows e done, worker 0 forks a child that writes
 *      MANIFEST to a temporary name, fsyncs it, renames it into place, fsyncs
 *      the directory and only then stores complete_epoch = e. Then it retires
 *      checkpoints beyond the newest checkpoint_retain restorable ones, never
 *      before (only files it made, MANIFEST first: shmrun_ckpt_remove()).
 *   5. Sinks learn complete_epoch and commit the output they staged up to e.
 *
 * An epoch whose snapshot failed, or that is not complete within
 * checkpoint_timeout, is aborted: aborted_epoch = e, its directory removed,
 * tasks drop its alignment, stale barrier(e) frames are ignored, and the next
 * epoch starts. The previous checkpoint is untouched.
 *
 * End of input: a source that has no more input does not end; it reports
 * itself exhausted. Once every source is, worker 0 starts the final epoch;
 * sources send its barrier and then end. So the last checkpoint holds the
 * whole input and commits the sinks' tail. A stop request (SIGTERM) also
 * makes the next epoch the final one.
 *
 * Invariants: complete_epoch is stored only by the MANIFEST child, after the
 * MANIFEST is durable and retention is done; aborted_epoch only by the
 * coordinator (seq_cst, paired with the snapshot writers' loads). The
 * MANIFEST child is forked by shmrun_coordinate() (fork_manifest()) and judged
 * by it (judge_manifest(): complete_epoch, then waitpid); the worker loop's waitpid(-1) hands it back
 * through shmrun_coordinator_reaped(), so no other code knows its pid. Step 3
 * is ckpt/snapshot.c, the MANIFEST's text ckpt/manifest.c.
 *
 * Rejected: the launcher as coordinator — docs/design.md §1: no control plane,
 * the leader is an ordinary worker; writing the MANIFEST in worker 0's loop —
 * two fsyncs would stall its tasks.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "coordinator.h"
#include "fault.h"
#include "hosts.h"
#include "manifest.h"
#include "metrics.h"
#include "ops/ops.h" /* SHMRUN_OP_PW_IN_FLIGHT, SHMRUN_OP_PW_BOUNDED */
#include "preflight.h"
#include "proctitle.h"
#include "shmrun/runtime.h"
#include "util.h"

/*
 * The manifest child: write MANIFEST (temporary name, fsync, rename, fsync
 * the directory), apply retention, then publish complete_epoch. Runs in a
 * child of worker 0 so that none of it stalls worker 0's tasks.
 */
static int write_manifest(const struct shmrun_plan *plan, struct shmrun_control *ctl, uint64_t e)
{
	const struct shmrun_job *job = plan->job;
	struct shmrun_task_slot *slots = shmrun_control_slots(ctl);
	struct shmrun_manifest_file *files = calloc(plan->ntasks + 1, sizeof(*files));
	struct shmrun_ckpt_scope scope;
	int err;

	if (!files)
		return -ENOMEM;
	for (uint32_t k = 0; k < plan->ntasks; k++) {
		shmrun_ckpt_file_name(plan, k, files[k].name, sizeof(files[k].name));
		files[k].size = slots[k].size;
		files[k].xxh64 = slots[k].xxh64;
		files[k].kv_bytes = slots[k].kv_bytes;
		files[k].pw_bytes = slots[k].pw_bytes;
	}
	err = shmrun_ckpt_write_manifest(
		job, e,
		atomic_load_explicit(&ctl->final_epoch, memory_order_acquire) == e &&
			!atomic_load_explicit(&ctl->final_is_stop, memory_order_acquire),
		files, plan->ntasks);
	free(files);
	if (err)
		return err;
	/*
	 * Retention: after the new MANIFEST is durable, never before; with
	 * several hosts only this host's state files are looked at (ckpt/hosts.h).
	 */
	shmrun_ckpt_scope_of(plan, plan->hosts, &scope);
	shmrun_ckpt_retain(job, &scope, e);
	/* release: pairs with the acquire loads of complete_epoch in every
	 * worker; the MANIFEST is durable (and retention done, so a job that
	 * ends with this epoch leaves exactly checkpoint_retain behind)
	 * before any sink commits epoch e. */
	atomic_store_explicit(&ctl->complete_epoch, e, memory_order_release);
	return 0;
}

/* ---- the coordinator --------------------------------------------------------------- */

static void abort_epoch(struct shmrun_coordinator *co, const struct shmrun_plan *plan,
			struct shmrun_control *ctl, const char *why)
{
	shmrun_log(SHMRUN_LOG_WARN, "epoch %" PRIu64 " aborted: %s; the previous checkpoint "
				    "stands and the next epoch starts",
		   co->epoch, why);
	/*
	 * seq_cst (also a release: tasks aligning this epoch drop it, acquire in
	 * worker.c): pairs with the seq_cst loads of aborted_epoch in
	 * write_state_file() (ckpt/snapshot.c). A snapshot child of this epoch that is
	 * still running, or not yet started, cannot be waited for here — a
	 * task may snapshot the epoch at any later moment until it sees the
	 * abort. So the directory is removed now, and every late writer removes
	 * its own file (and the directory, when it is the last) after it sees
	 * the abort; whichever comes second finds the other's work. A directory
	 * left by a writer killed mid-way (the job ended or crashed) is removed
	 * at the next start (shmrun_ckpt_remove_incomplete()).
	 */
	atomic_store_explicit(&ctl->aborted_epoch, co->epoch, memory_order_seq_cst);
	if (shmrun_run_metrics) { /* the checkpoint line of the live counters (metrics.h) */
		atomic_fetch_add_explicit(&shmrun_run_metrics->ckpt_aborted, 1, memory_order_relaxed);
		atomic_store_explicit(&shmrun_run_metrics->ckpt_in_flight, 0, memory_order_relaxed);
	}
	{
		char rwhy[300];

		/* the epoch numbers past every directory there at the start, so
		 * -EEXIST means someone put a file into it meanwhile: left alone */
		if (shmrun_ckpt_remove(plan->job->checkpoint_dir, co->epoch, rwhy, sizeof(rwhy)) ==
		    -EEXIST)
			shmrun_log(SHMRUN_LOG_WARN, "epoch %" PRIu64 ": %s/%s; the directory is left "
				   "as it is", co->epoch, plan->job->checkpoint_dir, rwhy);
	}
	if (atomic_load_explicit(&ctl->final_epoch, memory_order_acquire) == co->epoch)
		atomic_store_explicit(&ctl->failed, 1, memory_order_release);
	co->epoch = 0;
}

/*
 * The per-worker state guard (docs/state.md, "the sizing trap"): per-worker state
 * must grow with the width, not with the data. At every complete checkpoint,
 * log each stage's per-worker bytes per instance, and warn when an instance
 * passes per_worker_state_warn or has grown at each of the last
 * SHMRUN_PW_GROWTH_CHECKPOINTS checkpoints (the width cannot change within a
 * run, so growth means it grows with the data and should be key-bound state).
 */
static void guard_per_worker_state(struct shmrun_coordinator *co, const struct shmrun_plan *plan,
				   struct shmrun_control *ctl)
{
	const struct shmrun_job *job = plan->job;
	struct shmrun_task_slot *slots = shmrun_control_slots(ctl);

	if (!co->pw_history) {
		co->pw_history = calloc((size_t)plan->ntasks * (SHMRUN_PW_GROWTH_CHECKPOINTS + 1),
					sizeof(*co->pw_history));
		if (!co->pw_history)
			return;
	}
	co->pw_checkpoints++;
	for (uint32_t s = 0; s < job->nstages; s++) {
		char line[900];
		size_t n = 0;
		uint64_t total = 0;

		for (uint32_t i = 0; i < job->stages[s].width; i++) {
			uint32_t k = plan->stage_task0[s] + i;
			uint64_t b = slots[k].pw_bytes, *h;
			bool grew = co->pw_checkpoints > SHMRUN_PW_GROWTH_CHECKPOINTS;

			h = &co->pw_history[(size_t)k * (SHMRUN_PW_GROWTH_CHECKPOINTS + 1)];
			memmove(h, h + 1, SHMRUN_PW_GROWTH_CHECKPOINTS * sizeof(*h));
			h[SHMRUN_PW_GROWTH_CHECKPOINTS] = b;
			for (int j = 0; j < SHMRUN_PW_GROWTH_CHECKPOINTS && grew; j++)
				grew = h[j + 1] > h[j];
			total += b;
			if (n < sizeof(line))
				n += (size_t)snprintf(line + n, sizeof(line) - n, "%s%" PRIu64,
						      i ? " " : "", b);
			if (job->stages[s].op->flags & SHMRUN_OP_PW_IN_FLIGHT)
				; /* output in flight (a sink's staged epochs): sized by throughput */
			else if (b > job->per_worker_state_warn)
				shmrun_log(SHMRUN_LOG_WARN,
					   "stage %s [%u]: per-worker state is %" PRIu64
					   " bytes, past per_worker_state_warn = %" PRIu64
					   "; per-worker state should stay small (it is pooled "
					   "whole at a rescale) — keep large state key-bound",
					   job->stages[s].name, i, b, job->per_worker_state_warn);
			else if (grew && !(job->stages[s].op->flags & SHMRUN_OP_PW_BOUNDED))
				shmrun_log(SHMRUN_LOG_WARN,
					   "stage %s [%u]: per-worker state grew at each of the last "
					   "%d checkpoints (now %" PRIu64 " bytes) while the width "
					   "stayed %u: it grows with the data, not the width, and "
					   "should be key-bound state",
					   job->stages[s].name, i, SHMRUN_PW_GROWTH_CHECKPOINTS, b,
					   job->stages[s].width);
		}
		if (total) /* at every checkpoint: DEBUG (the warnings above stay) */
			shmrun_log(SHMRUN_LOG_DEBUG,
				   "epoch %" PRIu64 ": stage %s per-worker state per instance: %s "
				   "bytes",
				   co->manifest_epoch, job->stages[s].name, line);
	}
}

/* Every worker's heartbeat now, for describe_timeout(). */
static void note_heartbeats(struct shmrun_coordinator *co, struct shmrun_control *ctl)
{
	struct shmrun_worker_stats *stats = shmrun_control_stats(ctl);

	if (!co->beats)
		co->beats = calloc(ctl->workers ? ctl->workers : 1, sizeof(*co->beats));
	for (uint32_t w = 0; co->beats && w < ctl->workers; w++)
		co->beats[w] = atomic_load_explicit(&stats[w].heartbeat, memory_order_relaxed);
}

char shmrun_process_state(int pid)
{
	char path[40], buf[512], *p;
	ssize_t n;
	int fd;

	if (pid <= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* "pid (comm) S ...": comm may hold blanks and ')' */
	return p && p[1] == ' ' ? p[2] : 0;
}

/*
 * Why epoch co->epoch timed out, into @buf: the tasks that did not report
 * their snapshot and, for each worker running one, whether it is making
 * progress — a worker whose loop has not turned since the epoch started is
 * stuck, and one whose process is in state T was stopped (SIGSTOP, or a
 * terminal's job control). Only those are named, so a message points at the
 * worker to look at, not at every worker downstream of it.
 */
static void describe_timeout(const struct shmrun_coordinator *co, const struct shmrun_plan *plan,
			     struct shmrun_control *ctl, int64_t now_ns, char *buf, size_t len)
{
	const struct shmrun_job *job = plan->job;
	struct shmrun_task_slot *slots = shmrun_control_slots(ctl);
	struct shmrun_worker_stats *stats = shmrun_control_stats(ctl);
	double secs = (double)(now_ns - co->started_ns) / 1e9;
	size_t off = 0;
	uint32_t late = 0;

#define PUT(...)                                                                                   \
	do {                                                                                       \
		if (off < len)                                                                     \
			off += (size_t)snprintf(buf + off, len - off, __VA_ARGS__);                \
	} while (0)
	PUT("not complete within checkpoint_timeout (%.1f s); not reported by", secs);
	for (uint32_t k = 0; k < plan->ntasks; k++) {
		const struct shmrun_plan_task *t = &plan->tasks[k];

		if (atomic_load_explicit(&slots[k].done_epoch, memory_order_acquire) == co->epoch)
			continue;
		if (late++ < 8)
			PUT("%s %s[%u] (worker %u)", late > 1 ? "," : "",
			    job->stages[t->stage].name, t->instance, t->worker);
	}
	if (late > 8)
		PUT(" and %u more task%s", late - 8, late - 8 == 1 ? "" : "s");
	for (uint32_t w = 0; w < ctl->workers && co->beats; w++) {
		int pid = atomic_load_explicit(&stats[w].pid, memory_order_relaxed);
		uint64_t beat = atomic_load_explicit(&stats[w].heartbeat, memory_order_relaxed);
		char state = shmrun_process_state(pid);
		bool stuck = beat == co->beats[w], any = false;

		bool stopped = state == 'T' || state == 't';
		bool busy = false;

		for (uint32_t k = 0; k < plan->ntasks && !busy; k++)
			busy = plan->tasks[k].worker == w &&
			       atomic_load_explicit(&slots[k].done_epoch, memory_order_acquire) !=
				       co->epoch;
		/* a loop turn can take a while (a large batch): no progress is
		 * worth naming only past a second */
		stuck = stuck && secs >= 1.0;
		/* only a worker with a task that has not reported can hold up
		 * the epoch: the others (no tasks, all reported) are not named */
		if ((!stuck && !stopped) || !busy)
			continue;
		if (shmrun_plan_host_of(plan, w) != 0) {
			/* another host's worker: its liveness is that host's (its
			 * launcher names it); its tasks' slots are mirrored here */
			PUT("; worker %u (on host %u)", w, shmrun_plan_host_of(plan, w));
			continue;
		}
		if (pid <= 0) {
			PUT("; worker %u (CPU %d) has not started yet", w,
			    shmrun_plan_cpu_of(plan, w));
			continue;
		}
		PUT("; worker %u (pid %d, CPU %d, tasks", w, pid, shmrun_plan_cpu_of(plan, w));
		for (uint32_t k = 0; k < plan->ntasks; k++)
			if (plan->tasks[k].worker == w) {
				PUT("%s %s[%u]", any ? "," : "",
				    job->stages[plan->tasks[k].stage].name,
				    plan->tasks[k].instance);
				any = true;
			}
		if (stuck)
			PUT(") has made no progress for %.1f s", secs);
		else
			PUT(")");
		PUT("%s", state == 'T'	 ? " (process is stopped: SIGSTOP?)"
			  : state == 't' ? " (process is stopped by a debugger)"
			  : state == 'D' ? " (process is in an uninterruptible wait: disk?)"
					 : "");
	}
#undef PUT
}

/*
 * The checkpoint line of the live counters (metrics.h; only worker 0 writes
 * it): epoch co->manifest_epoch is complete; its size is the sum of the
 * task slots' state files, which hold it until the next epoch starts.
 */
static void metrics_complete(const struct shmrun_coordinator *co, const struct shmrun_plan *plan,
			     struct shmrun_control *ctl, struct shmrun_metrics *m)
{
	struct shmrun_task_slot *slots = shmrun_control_slots(ctl);
	uint64_t bytes = 0;

	for (uint32_t k = 0; k < plan->ntasks; k++)
		bytes += slots[k].size;
	atomic_store_explicit(&m->ckpt_epoch, co->manifest_epoch, memory_order_relaxed);
	atomic_fetch_add_explicit(&m->ckpt_completed, 1, memory_order_relaxed);
	atomic_store_explicit(&m->ckpt_duration_ns, (uint64_t)(shmrun_now_ns() - co->started_ns),
			      memory_order_relaxed);
	atomic_store_explicit(&m->ckpt_bytes, bytes, memory_order_relaxed);
	atomic_store_explicit(&m->ckpt_wall_ns, shmrun_wall_ns(),
			      memory_order_relaxed);
	atomic_store_explicit(&m->ckpt_in_flight, 0, memory_order_relaxed);
}

/*
 * Commit phase: judge the MANIFEST child by complete_epoch, then by its
 * exit; a MANIFEST not written aborts its epoch. Return: false while it is
 * still writing, else true.
 */
static bool judge_manifest(struct shmrun_coordinator *co, const struct shmrun_plan *plan,
			   struct shmrun_control *ctl)
{
	/* acquire: pairs with the MANIFEST child's release store. */
	bool ok = atomic_load_explicit(&ctl->complete_epoch, memory_order_acquire) >=
		  co->manifest_epoch;

	shmrun_fault_slow_judge();
	if (!ok && !co->manifest_exited) {
		if (waitpid(co->manifest_pid, NULL, WNOHANG) != co->manifest_pid)
			return false; /* still writing */
		/* It exited after the load above, maybe right after it committed:
		 * look again. Its release store of complete_epoch came before its
		 * exit, which waitpid() orders before this load. (Judging by the
		 * first load aborted, and removed, an epoch just committed.) */
		ok = atomic_load_explicit(&ctl->complete_epoch, memory_order_acquire) >=
		     co->manifest_epoch;
	} else if (!co->manifest_exited) {
		waitpid(co->manifest_pid, NULL, WNOHANG);
	}
	co->manifest_pid = 0;
	co->manifest_exited = false;
	if (!ok) {
		co->epoch = co->manifest_epoch;
		abort_epoch(co, plan, ctl, "its MANIFEST could not be written");
		return true;
	}
	shmrun_log(SHMRUN_LOG_DEBUG, "epoch %" PRIu64 " complete", co->manifest_epoch);
	if (shmrun_run_metrics)
		metrics_complete(co, plan, ctl, shmrun_run_metrics);
	guard_per_worker_state(co, plan, ctl);
	co->epoch = 0;
	return true;
}

/*
 * Watch phase, a failed slot: task @k's snapshot of the epoch in flight
 * failed; abort the epoch, and fail the job when no later epoch (nor a
 * restart) can succeed.
 */
static void abort_failed(struct shmrun_coordinator *co, const struct shmrun_plan *plan,
			 struct shmrun_control *ctl, uint32_t k)
{
	const struct shmrun_job *job = plan->job;
	struct shmrun_task_slot *slots = shmrun_control_slots(ctl);
	char why[2 * PATH_MAX];
	char name[160], dir[PATH_MAX];
	int err = -atomic_load(&slots[k].error);

	shmrun_ckpt_file_name(plan, k, name, sizeof(name));
	shmrun_ckpt_path(job->checkpoint_dir, co->epoch, dir, sizeof(dir));
	if (err == ECHILD)
		snprintf(why, sizeof(why), "the writer of %s/%s died", dir, name);
	else
		snprintf(why, sizeof(why), "writing %s/%s failed: %s", dir, name,
			 strerror(err));
	if (shmrun_errno_is_permanent(err) ||
	    (shmrun_errno_is_lasting(err) &&
	     atomic_load_explicit(&ctl->final_epoch, memory_order_acquire) ==
		     co->epoch)) {
		/* no later epoch (nor a restart) can succeed: the
		 * job stops, and the launcher does not restart it */
		snprintf(ctl->failed_why, sizeof(ctl->failed_why),
			 "epoch %" PRIu64 ": %.*s", co->epoch,
			 (int)sizeof(ctl->failed_why) - 32, why);
		atomic_store_explicit(&ctl->failed_errno, err,
				      memory_order_relaxed);
		abort_epoch(co, plan, ctl, why);
		/* release: pairs with the acquire of failed in every
		 * worker's loop; failed_why is visible with it */
		atomic_store_explicit(&ctl->failed, 1, memory_order_release);
		return;
	}
	abort_epoch(co, plan, ctl, why);
}

/*
 * Commit phase, its start: every task's snapshot is durable, so fork the
 * child that writes the MANIFEST (write_manifest()); a failed fork aborts
 * the epoch.
 */
static void fork_manifest(struct shmrun_coordinator *co, const struct shmrun_plan *plan,
			  struct shmrun_control *ctl)
{
	pid_t pid, worker0 = getpid();

	co->manifest_epoch = co->epoch;
	pid = fork();
	if (pid == 0) {
		/* as the snapshot children: never outlive worker 0, and
		 * never commit for a worker that died before prctl() */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != worker0)
			_exit(1);
		shmrun_proctitle_set("shmrun manifest", "shmrun: %s MANIFEST writer of epoch %" PRIu64,
				     plan->job->name, co->manifest_epoch);
		_exit(write_manifest(plan, ctl, co->manifest_epoch) ? 1 : 0);
	}
	if (pid < 0) {
		abort_epoch(co, plan, ctl, "fork of the MANIFEST writer failed");
		return;
	}
	co->manifest_pid = pid;
}

/*
 * Watch phase: the epoch in flight, by its slots (a failed one aborts it,
 * all done commits it) and its age (past checkpoint_timeout: abort).
 * Return: true if it did something.
 */
static bool watch_epoch(struct shmrun_coordinator *co, const struct shmrun_plan *plan,
			struct shmrun_control *ctl, int64_t now_ns)
{
	const struct shmrun_job *job = plan->job;
	struct shmrun_task_slot *slots = shmrun_control_slots(ctl);
	uint32_t done = 0;

	for (uint32_t k = 0; k < plan->ntasks; k++) {
		if (atomic_load_explicit(&slots[k].failed_epoch, memory_order_acquire) ==
		    co->epoch) {
			abort_failed(co, plan, ctl, k);
			return true;
		}
		/* acquire: pairs with the release store of done_epoch by the
		 * snapshot child; its size and checksum are visible. */
		if (atomic_load_explicit(&slots[k].done_epoch, memory_order_acquire) ==
		    co->epoch)
			done++;
	}
	if (done == plan->ntasks) {
		fork_manifest(co, plan, ctl);
		return true;
	}
	if (now_ns - co->started_ns > (int64_t)job->checkpoint_timeout_ns) {
		char why[1400];

		describe_timeout(co, plan, ctl, now_ns, why, sizeof(why));
		abort_epoch(co, plan, ctl, why);
		return true;
	}
	return false;
}

/*
 * Trigger phase: start the next epoch once checkpoint_interval has passed,
 * or at once as the final one (every source exhausted, or a stop was
 * requested). Return: true if it started one.
 */
static bool trigger_epoch(struct shmrun_coordinator *co, const struct shmrun_plan *plan,
			  struct shmrun_control *ctl, int64_t now_ns)
{
	const struct shmrun_job *job = plan->job;
	struct shmrun_task_slot *slots = shmrun_control_slots(ctl);
	uint32_t sources = 0, exhausted = 0;

	for (uint32_t k = 0; k < plan->ntasks; k++) {
		if (!(job->stages[plan->tasks[k].stage].op->flags & SHMRUN_OP_SOURCE))
			continue;
		sources++;
		exhausted += atomic_load_explicit(&slots[k].exhausted, memory_order_acquire) != 0;
	}
	{
		bool final = exhausted == sources ||
			     atomic_load_explicit(&ctl->stop_requested, memory_order_acquire);
		uint64_t e;

		if (!final && now_ns < co->next_ns)
			return false;
		e = atomic_load_explicit(&ctl->trigger_epoch, memory_order_relaxed) + 1;
		if (e <= ctl->restored_epoch)
			e = ctl->restored_epoch + 1;
		if (e <= ctl->epoch_floor)
			e = ctl->epoch_floor + 1;
		if (final && exhausted != sources)
			atomic_store_explicit(&ctl->final_is_stop, 1, memory_order_relaxed);
		if (final)
			atomic_store_explicit(&ctl->final_epoch, e, memory_order_release);
		co->epoch = e;
		co->started_ns = now_ns;
		if (shmrun_run_metrics)
			atomic_store_explicit(&shmrun_run_metrics->ckpt_in_flight, e,
					      memory_order_relaxed);
		note_heartbeats(co, ctl);
		co->next_ns = now_ns + (int64_t)job->checkpoint_interval_ns;
		/* release: pairs with the acquire load of trigger_epoch by sources
		 * (worker.c); final_epoch above is visible with it. */
		atomic_store_explicit(&ctl->trigger_epoch, e, memory_order_release);
		shmrun_log(SHMRUN_LOG_DEBUG, "epoch %" PRIu64 " started%s", e, final ? " (final)" : "");
	}
	return true;
}

bool shmrun_coordinate(struct shmrun_coordinator *co, const struct shmrun_plan *plan,
		       struct shmrun_control *ctl, int64_t now_ns)
{
	if (co->manifest_pid > 0)
		return judge_manifest(co, plan, ctl);
	if (co->epoch)
		return watch_epoch(co, plan, ctl, now_ns);
	if (atomic_load_explicit(&ctl->final_epoch, memory_order_acquire))
		return false; /* the final epoch is done (or failed): nothing more */
	return trigger_epoch(co, plan, ctl, now_ns);
}

bool shmrun_coordinator_reaped(struct shmrun_coordinator *co, int pid)
{
	if (pid != co->manifest_pid)
		return false;
	co->manifest_exited = true; /* the coordinator judges it */
	return true;
}
