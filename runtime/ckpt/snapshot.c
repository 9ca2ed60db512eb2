/*
 * runtime/ckpt/snapshot.c: a worker's side of the checkpoint protocol —
 * steps 3 and 4 of docs/design.md §6 for one task, and restore.
 *
 *   worker loop                         snapshot child (fork)
 *   -----------                         ---------------------
 *   task aligned on barrier(e)
 *   shmrun_snapshot_take():
 *     op->snapshot() -> per-worker entries
 *     fork() ------------------------>  write_state_file():
 *     track the child, record the         encode (state_file.h), io_uring
 *     stall (snapshot() + fork)           write + fsync (ckpt_io.h),
 *     go on processing at once            slot: size, xxh64, done_epoch (release)
 *   reap_children() (worker.c)
 *     -> shmrun_snapshot_reaped(): a child dead without reporting
 *        fails its epoch at once (failed_epoch = e, -ECHILD)
 *
 * Restore (before the tasks open): the MANIFEST of ctl->restored_epoch is
 * read once, each task's state file is read and verified (ckpt_io.h), parsed
 * (state_file.h), its keys go into the task's kv and its per-worker entries
 * wait for shmrun_snapshot_restore_entries(), after open().
 *
 * Invariants. The stall of a snapshot is O(per-worker state): the key-bound
 * state is written by the child from its copy-on-write image, never by the
 * worker. A child never outlives its worker (PR_SET_PDEATHSIG, and a check of
 * getppid() after it), so a restarted run never sees a late file of the run
 * that crashed. A late writer of an aborted epoch removes its own file (the
 * seq_cst pair with abort_epoch(), coordinator.c). ctl->writers counts the
 * children in flight across the job.
 *
 * Rejected: writing the state file in the worker (the stall would grow with
 * the key-bound state); a writer thread (a consistent image of the state
 * would need a copy or locks on the hot path, where fork's copy-on-write
 * gives one for free); one child per worker per epoch for all its tasks (a
 * task would wait for the alignment of every other task of its worker).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "callback.h"
#include "ckpt_io.h"
#include "fault.h"
#include "manifest.h"
#include "plan.h"
#include "proctitle.h"
#include "snapshot.h"
#include "state_file.h"
#include "task.h"
#include "timer.h"
#include "util.h"

/*
 * The snapshot child: write @t's state file of epoch @e into its checkpoint
 * directory with io_uring, fsync it and the task's registered fds, and record
 * the result in the task's slot. Runs in a forked child of the worker, on a
 * copy-on-write image of the state as of the barrier.
 */
static int write_state_file(struct shmrun_worker *w, struct shmrun_task *t, uint64_t e)
{
	const struct shmrun_job *job = w->plan->job;
	struct shmrun_task_slot *slot = &w->slots[t->id];
	struct shmrun_ckpt_writer wr;
	struct shmrun_ckpt_buf buf;
	char path[PATH_MAX], name[160], why[200];
	struct shmrun_slot_file f = {0};
	uint64_t kv_bytes = 0;
	int dirfd = -1, err;

	shmrun_ckpt_buf_init(&buf);
	shmrun_ckpt_path(job->checkpoint_dir, e, path, sizeof(path));
	shmrun_ckpt_file_name(w->plan, t->id, name, sizeof(name));
	/* an epoch aborted before its barrier reached this task: write nothing
	 * (the coordinator has removed, or will remove, its directory) */
	if (e <= atomic_load_explicit(&w->ctl->aborted_epoch, memory_order_seq_cst))
		return 0;
	shmrun_fault_slow_snapshot(e);
	err = shmrun_ckpt_mkdir(job->checkpoint_dir);
	if (err && err != -EEXIST)
		goto out;
	err = shmrun_ckpt_mkdir(path); /* 0700: state may hold secrets */
	if (err && err != -EEXIST)
		goto out;
	/* never through a symlink: a ckpt-N the runtime did not make is not
	 * written into (ELOOP fails the epoch) */
	dirfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dirfd < 0) {
		err = -errno;
		goto out;
	}
	err = shmrun_state_encode(&buf,
				  &(struct shmrun_state_src){.kv = &t->kv,
							     .timers = &t->timers,
							     .epoch = e,
							     .instance = t->instance,
							     .width = t->width,
							     .vnodes = t->vnodes,
							     .wm = t->wm,
							     .pw = t->pw,
							     .pw_len = t->pw_len,
							     .npw = t->pw_n},
				  &kv_bytes);
	if (!err)
		err = shmrun_ckpt_buf_seal(&buf);
	if (err)
		goto out;
	for (uint32_t i = 0; i < t->nsync && !err; i++)
		if (fsync(t->sync_fds[i]) < 0)
			err = -errno;
	if (err)
		goto out;
	shmrun_fault_snapshot_epoch(e);
	err = shmrun_ckpt_writer_init(&wr, 32, why, sizeof(why));
	if (err)
		goto out;
	unlinkat(dirfd, name, 0); /* a retry of an aborted epoch */
	err = shmrun_ckpt_write_file(&wr, dirfd, name, &buf, &f.size, &f.xxh64);
	if (!err)
		err = shmrun_ckpt_fsync_dir(dirfd);
	shmrun_ckpt_writer_close(&wr);
	shmrun_fault_slow_snapshot(e);
out:
	/*
	 * A late writer of an aborted epoch removes what it wrote, and the
	 * directory once it is empty. seq_cst: pairs with the seq_cst store of
	 * aborted_epoch in abort_epoch() (coordinator.c). Either this load sees
	 * the abort, or it comes before that store, and then so did this file's
	 * creation: the coordinator's removal, after its store, finds the file.
	 */
	if (e <= atomic_load_explicit(&w->ctl->aborted_epoch, memory_order_seq_cst)) {
		if (dirfd >= 0)
			unlinkat(dirfd, name, 0);
		rmdir(path); /* fails while another late writer's file is there */
	}
	if (dirfd >= 0)
		close(dirfd);
	shmrun_ckpt_buf_free(&buf);
	f.kv_bytes = kv_bytes;
	f.pw_bytes = t->pw_len;
	shmrun_slot_report(w->ctl, slot, e, err, &f);
	return err;
}

static void track_child(struct shmrun_worker *w, pid_t pid, uint32_t task, uint64_t epoch)
{
	if (shmrun_grow_u32(&w->children, &w->children_cap, (size_t)w->nchildren + 1,
			    sizeof(*w->children), 16))
		return; /* untracked: its death is caught by checkpoint_timeout */
	w->children[w->nchildren++] = (struct snap_child){pid, task, epoch};
}

static void record_stall(struct shmrun_worker *w, int64_t ns)
{
	if (!w->stalls) {
		w->stalls = calloc(1024, sizeof(*w->stalls));
		if (!w->stalls)
			return;
	}
	w->stalls[w->nstalls++ % 1024] = ns;
	if (w->mxw) { /* live counters (metrics.h): this worker's line */
		atomic_store_explicit(&w->mxw->stall_last_ns, (uint64_t)ns, memory_order_relaxed);
		if ((uint64_t)ns > atomic_load_explicit(&w->mxw->stall_max_ns, memory_order_relaxed))
			atomic_store_explicit(&w->mxw->stall_max_ns, (uint64_t)ns,
					      memory_order_relaxed);
		atomic_store_explicit(&w->mxw->snapshots, w->m_snap0 + w->nstalls,
				      memory_order_relaxed);
	}
}

/*
 * Snapshot @t for epoch @e. The stall — the time @t processes nothing because
 * of the checkpoint — is the operator's snapshot() plus one fork(); the state
 * file is written by the child from its copy-on-write image while the worker
 * goes on.
 */
int shmrun_snapshot_take(struct shmrun_task *t, uint64_t e)
{
	struct shmrun_worker *w = t->w;
	int64_t t0 = shmrun_now_ns();
	pid_t pid, worker_pid;
	int err = 0;

	t->pw_len = 0;
	t->pw_n = 0;
	t->nsync = 0;
	t->in_snapshot = true;
	if (t->op->snapshot) {
		uint64_t where = cb_enter(t, SHMRUN_CB_SNAPSHOT);

		err = t->op->snapshot(t, t->state, e);
		cb_leave(t, where);
	}
	t->in_snapshot = false;
	if (err) {
		if (!w->failed)
			shmrun_task_error(t, "snapshot of epoch %" PRIu64 " failed: %s", e,
					  strerror(-err));
		note_fail_errno(w, err);
		return err;
	}
	worker_pid = getpid();
	pid = fork();
	if (pid == 0) {
		/* die with the worker — and if it died before prctl() took
		 * effect, write nothing: a run that restarted must never see a
		 * late file from the one that crashed */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != worker_pid)
			_exit(1);
		/* not the worker's title: `ps` and a pgrep for "worker N" see
		 * one process per worker, the writer by what it is */
		shmrun_proctitle_set("shmrun snap", "shmrun: %s snapshot writer of worker %u epoch %" PRIu64,
				     w->plan->job->name, w->index, e);
		_exit(write_state_file(w, t, e) ? 1 : 0);
	}
	if (pid < 0) {
		atomic_store_explicit(&w->slots[t->id].error, -errno, memory_order_relaxed);
		atomic_store_explicit(&w->slots[t->id].failed_epoch, e, memory_order_release);
	} else {
		atomic_fetch_add_explicit(&w->ctl->writers, 1, memory_order_relaxed);
		track_child(w, pid, t->id, e);
	}
	record_stall(w, shmrun_now_ns() - t0);
	t->barrier_epoch = e;
	return 0;
}

/*
 * A snapshot child reports through its task's slot; one that died without
 * reporting (killed, out of memory) fails its epoch here, at once, instead of
 * at checkpoint_timeout. The worker loop's reap_children() calls this for
 * every child that is not the coordinator's.
 */
void shmrun_snapshot_reaped(struct shmrun_worker *w, int pid, int status)
{
	for (uint32_t i = 0; i < w->nchildren; i++) {
		struct snap_child c = w->children[i];
		struct shmrun_task_slot *slot;

		if (c.pid != pid)
			continue;
		w->children[i] = w->children[--w->nchildren];
		atomic_fetch_sub_explicit(&w->ctl->writers, 1, memory_order_relaxed);
		slot = &w->slots[c.task];
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
			break;
		if (atomic_load_explicit(&slot->done_epoch, memory_order_acquire) == c.epoch ||
		    atomic_load_explicit(&slot->failed_epoch, memory_order_acquire) == c.epoch)
			break;
		/* it exited after a failure whose report shmrun_slot_report()
		 * dropped as stale (its epoch was aborted, or the slot holds a
		 * newer one): it did not die, and nothing waits for it */
		if (WIFEXITED(status) && shmrun_slot_stale(w->ctl, slot, c.epoch))
			break;
		{
			const struct shmrun_plan *plan = w->plan;
			const struct shmrun_plan_task *pt = plan ? &plan->tasks[c.task] : NULL;
			char msg[160];

			snprintf(msg, sizeof(msg),
				 "the snapshot writer (task %u) for epoch %" PRIu64 " died (%s %d)",
				 c.task, c.epoch, WIFSIGNALED(status) ? "signal" : "exit status",
				 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
			if (pt) /* of the task's stage and instance: fields in JSON */
				shmrun_log_task(SHMRUN_LOG_WARN, NULL,
						plan->job->stages[pt->stage].name, pt->instance,
						msg);
			else /* a unit test's worker, without a plan */
				shmrun_log(SHMRUN_LOG_WARN, "%s", msg);
		}
		atomic_store_explicit(&slot->error, -ECHILD, memory_order_relaxed);
		/* release: pairs with the coordinator's acquire of failed_epoch */
		atomic_store_explicit(&slot->failed_epoch, c.epoch, memory_order_release);
		break;
	}
}

/* Restore @t's key-bound state and stash its per-worker entries: from the restored checkpoint @dirfd (at @path) whose MANIFEST is @m. */
static int restore_task(struct shmrun_task *t, const struct shmrun_manifest *m, int dirfd,
			const char *path)
{
	struct shmrun_worker *w = t->w;
	char name[160], why[256];
	const struct shmrun_manifest_file *f = NULL;
	struct shmrun_state_view view = {0};
	unsigned char *data = NULL;
	size_t len;
	int err;

	shmrun_ckpt_file_name(w->plan, t->id, name, sizeof(name));
	for (uint32_t i = 0; i < m->nfiles; i++)
		if (strcmp(m->files[i].name, name) == 0)
			f = &m->files[i];
	if (!f) {
		shmrun_task_error(t, "restore from %s: MANIFEST lists no %s", path, name);
		return -EBADMSG;
	}
	err = shmrun_ckpt_read_file(dirfd, name, f->size, f->xxh64, (void **)&data, &len, why,
				    sizeof(why));
	if (err) {
		shmrun_task_error(t, "restore of %s/%s: %s", path, name, why);
		return err;
	}
	err = shmrun_state_parse(data, len, &view);
	if (err == -EPROTO) {
		shmrun_task_error(t,
				  "restore of %s/%s: state file format version %u is not one this "
				  "shmrun reads (1 to %u): a newer shmrun wrote it; restore it with "
				  "that one, or start from empty state with STREAM_RESET_STATE=1",
				  path, name, view.version, SHMRUN_STATE_VERSION);
		free(data);
		return err;
	}
	if (err)
		goto bad;
	for (uint32_t s = 0; s < view.nsections; s++) {
		const struct shmrun_state_section *sec = &view.sections[s];
		struct shmrun_state_timer_cursor tc;
		struct shmrun_state_cursor cur;
		const void *key, *value;
		uint32_t kl, domain;
		int64_t time_ns;

		shmrun_state_keys_begin(&view, sec, &cur);
		while (shmrun_state_keys_next(&cur, &key, &kl, &value)) {
			void *v;
			int e2;

			v = shmrun_kv_get(&t->kv, sec->vnode, XXH3_64bits(key, kl), key, kl,
					  view.value_bytes, true, &e2);
			if (!v) {
				err = e2 ? e2 : -ENOMEM;
				goto bad;
			}
			memcpy(v, value, view.value_bytes);
		}
		/* the vnode's timers, back into the task's store and heaps (timer.c) */
		shmrun_state_timers_begin(sec, &tc);
		while (shmrun_state_timers_next(&tc, &domain, &key, &kl, &time_ns)) {
			int r = shmrun_timers_add(&t->timers, t->vnodes, sec->vnode,
						  XXH3_64bits(key, kl),
						  (enum shmrun_time_domain)domain, key, kl, time_ns);

			if (r < 0) {
				err = r;
				goto bad;
			}
		}
	}
	if (t->kv.keys)
		t->kv.mode = view.flags & SHMRUN_STATE_NAMESPACED ? SHMRUN_KV_MODE_NS
								  : SHMRUN_KV_MODE_PLAIN;
	t->wm = view.wm; /* before open(); a rescale wrote the stage's minimum */
	t->restore_pw = malloc(view.pw_len + 1);
	if (!t->restore_pw) {
		err = -ENOMEM;
		goto bad;
	}
	memcpy(t->restore_pw, view.pw, view.pw_len);
	t->restore_pw_len = view.pw_len;
	/* epoch 0: a stage new to this checkpoint (written by --rescale), which
	 * starts as on a first start; any other state file restores the
	 * instance's position, even with no entry at all (it had finished) */
	t->restoring = view.epoch != 0;
	t->barrier_epoch = w->ctl->restored_epoch;
	shmrun_state_view_free(&view);
	free(data);
	return 0;
bad:
	shmrun_task_error(t, "restore of %s/%s: %s", path, name,
			  err == -EBADMSG ? "state file content is malformed" : strerror(-err));
	shmrun_state_view_free(&view);
	free(data);
	return err;
}

/* Restore every task of this worker: the MANIFEST is read once. */
int shmrun_snapshot_restore(struct shmrun_worker *w)
{
	const char *dir = w->plan->job->checkpoint_dir;
	char path[PATH_MAX], why[256];
	struct shmrun_manifest m;
	int dirfd, err;

	shmrun_ckpt_path(dir, w->ctl->restored_epoch, path, sizeof(path));
	err = shmrun_ckpt_read_manifest(dir, w->ctl->restored_epoch, &m, why, sizeof(why));
	if (err) {
		snprintf(w->stats->error, sizeof(w->stats->error), "restore from %.200s: %.200s", path,
			 why);
		w->failed = true;
		return err;
	}
	dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	err = dirfd < 0 ? -errno : 0;
	for (uint32_t x = 0; x < w->ntasks && !err; x++)
		err = restore_task(&w->tasks[x], &m, dirfd, path);
	if (dirfd >= 0)
		close(dirfd);
	shmrun_manifest_free(&m);
	return err;
}

/* Hand the restored per-worker entries to the operator, after open(). */
int shmrun_snapshot_restore_entries(struct shmrun_task *t)
{
	/* no restore: restore_pw is NULL, and NULL + 0 is undefined (clang's UBSan) */
	const unsigned char *p = t->restore_pw, *end = p ? p + t->restore_pw_len : NULL;
	const void *entry;
	uint32_t len;
	int err = 0, more;

	while (p && !err && (more = shmrun_state_pw_next(&p, end, &entry, &len)) != 0) {
		if (more < 0) {
			shmrun_task_error(t, "restored per-worker state is truncated");
			return -EBADMSG;
		}
		if (t->op->restore) {
			uint64_t where = cb_enter(t, SHMRUN_CB_RESTORE);

			err = t->op->restore(t, t->state, entry, len);
			cb_leave(t, where);
		}
	}
	free(t->restore_pw);
	t->restore_pw = NULL;
	return err;
}
