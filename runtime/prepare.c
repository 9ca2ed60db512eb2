/*
 * runtime/prepare.c: a stage's checks in the launcher, before any worker
 * starts (shmrun_task_prepare_stage(), declared in worker.h).
 *
 * What it is for. A job that cannot run should fail at once with exit status
 * 2 and a message, not after forking workers and building rings: each stage's
 * operator may check what it needs (op->prepare(), e.g. that every input path
 * exists), and, when the run will restore a checkpoint, whether the
 * per-worker entries it will get make sense to it (op->check_restore(), e.g.
 * that the files a position points into are still there and unchanged).
 *
 * How. The launcher calls shmrun_task_prepare_stage() once per stage. It
 * builds a task of instance 0 on a stack worker that has no segment, no
 * rings and no shared control area, marked quiet: the task's first error is
 * kept whole (shmrun_task_quiet_error(), task.c) and handed back in the
 * caller's buffer, never logged, so the launcher prints it once, its way.
 * For check_restore() the task takes each instance's id in turn and sees
 * shmrun_task_restored_epoch() and shmrun_task_restoring() as a worker would.
 *
 * Invariants: nothing here writes to the checkpoint directory; a checkpoint
 * the launcher would not pick (no MANIFEST, another topology, a damaged state
 * file) is not checked here: the launcher refuses or rescales it, or the
 * restore reports it, with a better message than a guess made here.
 *
 * Designs rejected: running prepare() in each worker (a failure would then
 * surface as a crashed worker and a restart loop, and every instance would
 * repeat the same checks); reading state files through the restore code of
 * the worker (it fills key-bound state this check does not need).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "callback.h"
#include "ckpt/ckpt_io.h"
#include "ckpt/manifest.h"
#include "ckpt/recovery.h"
#include "ckpt/state_file.h"
#include "internal.h"
#include "ops/ops.h"
#include "task.h"
#include "worker.h"

/* shmrun_prepare_set_mode(): a run may connect and create; check may not */
static bool may_connect = true, may_create = true;

void shmrun_prepare_set_mode(bool connect, bool create)
{
	may_connect = connect;
	may_create = create;
}

bool shmrun_task_may_connect(const struct shmrun_task *t)
{
	(void)t;
	return may_connect;
}

bool shmrun_task_may_create(const struct shmrun_task *t)
{
	(void)t;
	return may_create;
}

/*
 * Offer every per-worker entry of @t's stage in the checkpoint this run will
 * restore to the operator's check_restore(), before anything starts. The
 * checkpoint is the newest whose MANIFEST parses and fits this topology (as
 * the launcher will pick unless a state file is damaged: then this check is
 * skipped for the stage, and the restore reports what it finds). Return: 0,
 * or the operator's negative errno (reason in stats->error).
 */
static int prepare_restore_check(const struct shmrun_plan *plan, uint32_t stage,
				 struct shmrun_task *t)
{
	const struct shmrun_job *job = plan->job;
	struct shmrun_manifest m = {0};
	struct shmrun_control ctl = {0};
	char path[PATH_MAX], why[256];
	int dirfd = -1, err = 0;

	if (!job->checkpoint_dir || !t->op->check_restore || shmrun_reset_requested() > 0)
		return 0;
	ctl.restored_epoch = shmrun_ckpt_newest_complete(job->checkpoint_dir, &m);
	if (!ctl.restored_epoch)
		return 0;
	if (shmrun_ckpt_check_topology(&m, job, why, sizeof(why)) != 0)
		goto out; /* refused (or rescaled) by the launcher later */
	shmrun_ckpt_path(job->checkpoint_dir, ctl.restored_epoch, path, sizeof(path));
	dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	t->w->ctl = &ctl;
	for (uint32_t i = 0; dirfd >= 0 && i < job->stages[stage].width && !err; i++) {
		struct shmrun_state_view view = {0};
		const struct shmrun_manifest_file *f = NULL;
		unsigned char *data = NULL;
		char name[160];
		size_t len;

		t->id = plan->stage_task0[stage] + i;
		t->instance = i;
		shmrun_ckpt_file_name(plan, t->id, name, sizeof(name));
		for (uint32_t k = 0; k < m.nfiles; k++)
			if (strcmp(m.files[k].name, name) == 0)
				f = &m.files[k];
		if (!f || shmrun_ckpt_read_file(dirfd, name, f->size, f->xxh64, (void **)&data, &len,
						why, sizeof(why)))
			break; /* damaged: the restore skips or reports it */
		if (shmrun_state_parse(data, len, &view) == 0 && view.epoch != 0) {
			t->restoring = true;
			const unsigned char *p = view.pw, *end = view.pw + view.pw_len;
			const void *entry;
			uint32_t el;

			shmrun_cb_guard_begin(job, stage, i, SHMRUN_CB_CHECK_RESTORE);
			while (!err && shmrun_state_pw_next(&p, end, &entry, &el) == 1) {
				uint64_t where = cb_enter(t, SHMRUN_CB_CHECK_RESTORE);

				err = t->op->check_restore(t, entry, el);
				cb_leave(t, where);
			}
			shmrun_cb_guard_end();
		}
		shmrun_state_view_free(&view);
		free(data);
	}
	t->w->ctl = NULL;
	t->id = plan->stage_task0[stage];
	t->instance = 0;
	t->restoring = false;
out:
	if (dirfd >= 0)
		close(dirfd);
	shmrun_manifest_free(&m);
	return err;
}

int shmrun_task_prepare_stage(const struct shmrun_plan *plan, uint32_t stage, char *msg,
			      size_t msglen, int *line)
{
	const struct shmrun_job *job = plan->job;
	struct shmrun_worker_stats stats;
	struct shmrun_worker w = {.plan = plan, .stats = &stats, .quiet = true,
				  .checkpointing = job->checkpoint_dir != NULL};

	struct shmrun_task t = {
		.id = plan->stage_task0[stage],
		.stage = &job->stages[stage],
		.op = job->stages[stage].op,
		.width = job->stages[stage].width,
		.vnodes = job->vnodes,
		.w = &w,
	};
	int err;

	memset(&stats, 0, sizeof(stats));
	shmrun_task_quiet_error_reset();
	err = 0;
	if (t.op->prepare) {
		uint64_t where;

		shmrun_cb_guard_begin(job, stage, 0, SHMRUN_CB_PREPARE);
		where = cb_enter(&t, SHMRUN_CB_PREPARE);
		err = t.op->prepare(&t);
		cb_leave(&t, where);
		shmrun_cb_guard_end();
	}
	if (!err)
		err = prepare_restore_check(plan, stage, &t);
	*line = shmrun_task_quiet_error_line() ? shmrun_task_quiet_error_line()
					       : shmrun_prepare_line(&job->stages[stage]);
	if (err) /* too long for @msg: its middle goes, never its end */
		shmrun_fit_middle(msg, msglen,
				  shmrun_task_quiet_error() ? shmrun_task_quiet_error()
				  : stats.error[0] ? stats.error : strerror(-err));
	shmrun_task_quiet_error_reset();
	return err;
}

int shmrun_prepare_line(const struct shmrun_stage *st)
{
	for (uint32_t i = 0; i < st->nparams; i++)
		if (st->params[i].line > 0 && (st->params[i].def->type == SHMRUN_PARAM_PATH ||
					       st->params[i].def->type == SHMRUN_PARAM_PATHS))
			return st->params[i].line;
	return st->line;
}
