/*
 * runtime/ckpt/recovery.c: what the launcher decides about checkpoints before
 * each start of the job — STREAM_RESET_STATE (move every checkpoint aside),
 * which checkpoint to restore and whether it fits this topology, and the same
 * decision made ahead by `shmrun check` (shmrun_check_restore()).
 *
 * Invariants: nothing here deletes a checkpoint — a reset renames them into
 * checkpoint_dir/reset-<UTC time>/, a refused one is left as it is; the
 * choice is made while no worker runs, so the incomplete epochs it removes
 * (shmrun_ckpt_remove_incomplete()) cannot be in the middle of a write; new
 * epochs number past every ckpt-N directory present (ctl->epoch_floor), so no
 * epoch writes into a directory it did not create.
 *
 * Rejected: choosing inside each worker (every worker must restore the same
 * epoch, and a worker cannot refuse the whole job cleanly); deleting on
 * STREAM_RESET_STATE (a mistyped variable would destroy a job's state).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "ckpt/ckpt_io.h"
#include "ckpt/hosts.h"
#include "ckpt/manifest.h"
#include "ckpt/recovery.h"
#include "internal.h"
#include "plan.h"

/* STREAM_RESET_STATE: 1/true/yes -> 1; unset, empty, 0/false/no -> 0; else -1. */
int shmrun_reset_requested(void)
{
	static const char *const yes[] = {"1", "true", "yes"}, *const no[] = {"", "0", "false", "no"};
	const char *v = getenv("STREAM_RESET_STATE");

	if (!v)
		return 0;
	for (size_t i = 0; i < 3; i++)
		if (strcasecmp(v, yes[i]) == 0)
			return 1;
	for (size_t i = 0; i < 4; i++)
		if (strcasecmp(v, no[i]) == 0)
			return 0;
	return -1;
}

int shmrun_reset_checked(void)
{
	int reset = shmrun_reset_requested();

	if (reset < 0)
		shmrun_log(SHMRUN_LOG_ERROR,
			   "STREAM_RESET_STATE=%s: expected 1, true or yes (start from empty state) "
			   "or 0, false, no or empty; nothing was started",
			   getenv("STREAM_RESET_STATE"));
	return reset;
}


/* The first stage whose source cannot be replayed (SHMRUN_OP_UNREPLAYABLE), or NULL. */
static const struct shmrun_stage *unreplayable_stage(const struct shmrun_job *job)
{
	for (uint32_t i = 0; i < job->nstages; i++)
		if (job->stages[i].op && (job->stages[i].op->flags & SHMRUN_OP_UNREPLAYABLE))
			return &job->stages[i];
	return NULL;
}

/*
 * STREAM_RESET_STATE=1: move every ckpt-* of @dir into @dir/reset-<UTC time>/
 * (never delete), so the job starts from empty state. Return: 0, or -errno
 * after a message; nothing is half-moved on the first failure.
 */
int shmrun_ckpt_reset(const char *dir)
{
	char aside[PATH_MAX], from[PATH_MAX], to[PATH_MAX + 32], stamp[32];
	uint64_t *epochs;
	time_t now = time(NULL);
	struct tm tm;
	int n = shmrun_ckpt_list(dir, &epochs);

	if (n == -ENOENT || n == 0) {
		free(epochs);
		shmrun_log(SHMRUN_LOG_INFO, "STREAM_RESET_STATE=1: %s holds no checkpoint", dir);
		return 0;
	}
	if (n < 0) {
		shmrun_log(SHMRUN_LOG_ERROR, "STREAM_RESET_STATE=1: cannot read %s: %s", dir,
			   strerror(-n));
		return n;
	}
	gmtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	snprintf(aside, sizeof(aside), "%s/reset-%s", dir, stamp);
	for (int k = 0, err; (err = shmrun_ckpt_mkdir(aside)) < 0; k++) {
		if (err != -EEXIST || k > 100) {
			shmrun_log(SHMRUN_LOG_ERROR, "STREAM_RESET_STATE=1: cannot create %s: %s",
				   aside, strerror(-err));
			free(epochs);
			return -EIO;
		}
		snprintf(aside, sizeof(aside), "%s/reset-%s-%d", dir, stamp, k + 1);
	}
	for (int i = 0; i < n; i++) {
		shmrun_ckpt_path(dir, epochs[i], from, sizeof(from));
		snprintf(to, sizeof(to), "%s/ckpt-%" PRIu64, aside, epochs[i]);
		if (rename(from, to) < 0) {
			shmrun_log(SHMRUN_LOG_ERROR, "STREAM_RESET_STATE=1: moving %s to %s: %s",
				   from, to, strerror(errno));
			free(epochs);
			return -EIO;
		}
	}
	free(epochs);
	shmrun_log(SHMRUN_LOG_WARN,
		   "STREAM_RESET_STATE=1: moved %d checkpoint%s to %s; starting from empty state",
		   n, n == 1 ? "" : "s", aside);
	return 0;
}

int shmrun_ckpt_choose(const struct shmrun_job *job, struct shmrun_control *ctl, bool *reset_done,
		       uint64_t *epoch)
{
	return shmrun_ckpt_choose_scoped(job, NULL, ctl, reset_done, epoch);
}

/*
 * The restored checkpoint @e of @job, whose MANIFEST is @m, into @ctl:
 * restored_epoch and restored_finished (a finished run's last checkpoint,
 * told differently when a stage cannot be replayed).
 */
static void set_restored(const struct shmrun_job *job, struct shmrun_control *ctl, uint64_t e,
			 const struct shmrun_manifest *m)
{
	ctl->restored_finished = 0;
	if (m->finished && unreplayable_stage(job)) {
		/* the input now waiting on standard input or a socket is another
		 * input, not the rest of the finished one: reading nothing and
		 * exiting 0 would drop it without a word */
		shmrun_log(SHMRUN_LOG_WARN,
			   "%s/ckpt-%" PRIu64 " is the last checkpoint of a finished run, so "
			   "nothing is read: stage '%s' (op %s) cannot be replayed, and what "
			   "it would read now is new input, which this run ignores; "
			   "STREAM_RESET_STATE=1 starts the job over to read it",
			   job->checkpoint_dir, e, unreplayable_stage(job)->name,
			   unreplayable_stage(job)->op->name);
		ctl->restored_finished = 1;
	} else if (m->finished) {
		shmrun_log(SHMRUN_LOG_INFO,
			   "%s/ckpt-%" PRIu64 " is the last checkpoint of a finished run: every "
			   "record was processed and all output committed; nothing to do "
			   "(STREAM_RESET_STATE=1 runs the job again from the start)",
			   job->checkpoint_dir, e);
		/* the workers still restore it: a sink whose last commit was cut
		 * short by a crash completes it, then every worker exits */
		ctl->restored_finished = 1;
	}
	ctl->restored_epoch = e;
}

int shmrun_ckpt_choose_scoped(const struct shmrun_job *job, const struct shmrun_ckpt_scope *s,
			      struct shmrun_control *ctl, bool *reset_done, uint64_t *epoch)
{
	struct shmrun_manifest m = {0};
	uint64_t *epochs = NULL;
	char why[300];
	int64_t e;
	int n;

	if (!job->checkpoint_dir)
		return 0;
	if (shmrun_reset_requested() > 0 && !*reset_done) {
		/* once per invocation: a restart after a crash restores what this
		 * run checkpointed, it does not reset again */
		int err;

		if (s && s->plan && s->host != 0 && !job->checkpoint_per_host) {
			/* one directory for every host: host 0 moves it aside (two
			 * hosts renaming the same ckpt-N race, and a host reading
			 * it meanwhile would restore what is being moved away) */
			shmrun_log(SHMRUN_LOG_INFO,
				   "STREAM_RESET_STATE=1: host 0 moves the checkpoints of the shared "
				   "%s aside; host %u starts from empty state",
				   job->checkpoint_dir, s->host);
			*reset_done = true;
			return 0;
		}
		err = shmrun_ckpt_reset(job->checkpoint_dir);
		if (err)
			return err;
		*reset_done = true;
	}
	e = shmrun_ckpt_select_scoped(job->checkpoint_dir, s, &m);
	if (e < 0)
		return (int)e;
	/* New epochs number past every directory there, damaged ones included,
	 * so no epoch ever writes into a directory it did not create. */
	n = shmrun_ckpt_list(job->checkpoint_dir, &epochs);
	if (n > 0)
		ctl->epoch_floor = epochs[0];
	free(epochs);
	/* several hosts: a newer incomplete epoch may be completed by rank 0's
	 * MANIFEST, or be in a shared directory another host writes (hosts.h) */
	shmrun_ckpt_remove_incomplete_below(job->checkpoint_dir,
					    s && s->plan ? (uint64_t)e : UINT64_MAX);
	if (e == 0) {
		shmrun_log(SHMRUN_LOG_INFO, "no checkpoint in %s: starting from empty state",
			   job->checkpoint_dir);
		return 0;
	}
	if (shmrun_ckpt_check_topology(&m, job, why, sizeof(why))) {
		shmrun_log(
		    SHMRUN_LOG_ERROR,
		    "%s/ckpt-%" PRId64 " was written by a different topology: %s. "
		    "Restoring it would corrupt state, so it is refused. Either start "
		    "from empty state with STREAM_RESET_STATE=1 (the old checkpoints "
		    "are moved aside, not deleted), or, if the change is a new width, "
		    "worker count or host count, re-assign the state with `shmrun --rescale %s` "
		    "(see `shmrun plan --rescale-from %s %s` first)",
		    job->checkpoint_dir, e, why, job->conf_path, job->checkpoint_dir,
		    job->conf_path);
		shmrun_manifest_free(&m);
		return -ESTALE;
	}
	set_restored(job, ctl, (uint64_t)e, &m);
	shmrun_manifest_free(&m);
	*epoch = (uint64_t)e;
	shmrun_log(SHMRUN_LOG_INFO, "restoring epoch %" PRId64 " from %s/ckpt-%" PRId64, e,
		   job->checkpoint_dir, e);
	return 0;
}

/* Remove checkpoint_dir/ckpt-<e>/MANIFEST again (an installed one that did not verify). */
static void uninstall_manifest(const char *dir, uint64_t e)
{
	char path[PATH_MAX];
	int fd;

	shmrun_ckpt_path(dir, e, path, sizeof(path));
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	if (unlinkat(fd, "MANIFEST", 0) == 0)
		shmrun_ckpt_fsync_dir(fd);
	close(fd);
}

int shmrun_ckpt_restore_instead(const struct shmrun_job *job, const struct shmrun_ckpt_scope *s,
				struct shmrun_control *ctl, uint64_t e, const void *manifest,
				size_t len, char *why, size_t whylen)
{
	struct shmrun_manifest m = {0};
	char reason[PATH_MAX + 300];
	bool installed = false;
	int err;

	if (!job->checkpoint_dir || e == 0) {
		ctl->restored_epoch = 0;
		ctl->restored_finished = 0;
		shmrun_log(SHMRUN_LOG_INFO, "the hosts agreed on a fresh start: no checkpoint is "
					    "restored");
		return 0;
	}
	err = shmrun_ckpt_read_manifest(job->checkpoint_dir, e, &m, reason, sizeof(reason));
	if (err == 0)
		shmrun_manifest_free(&m);
	if (err == -ENOENT && manifest) {
		/* rank 0 committed e, its COMMIT did not reach this host before
		 * the crash: this host's state files of e are durable (it
		 * reported them before rank 0 wrote the MANIFEST) */
		err = shmrun_ckpt_install_manifest(job, e, manifest, len, reason, sizeof(reason));
		installed = err == 0;
	}
	if (!err)
		err = shmrun_ckpt_verify_scoped(job->checkpoint_dir, e, s, &m, reason,
						sizeof(reason));
	if (!err && shmrun_ckpt_check_topology(&m, job, reason, sizeof(reason)))
		err = -ESTALE;
	if (err) {
		if (installed)
			uninstall_manifest(job->checkpoint_dir, e);
		shmrun_manifest_free(&m);
		snprintf(why, whylen, "%s/ckpt-%" PRIu64 ", the epoch the hosts agreed on, cannot "
			 "be restored on host %" PRIu32 ": %s",
			 job->checkpoint_dir, e, s ? s->host : job->host, reason);
		shmrun_log(SHMRUN_LOG_ERROR, "%s", why);
		return err;
	}
	shmrun_log(SHMRUN_LOG_INFO,
		   "restoring epoch %" PRIu64 " from %s/ckpt-%" PRIu64 "%s: the epoch the hosts "
		   "agreed on (this host chose %" PRIu64 ")",
		   e, job->checkpoint_dir, e, installed ? " with rank 0's MANIFEST" : "",
		   ctl->restored_epoch);
	set_restored(job, ctl, e, &m);
	shmrun_manifest_free(&m);
	return 0;
}

/* The newest epoch of @dir with a MANIFEST that parses, or 0. */
uint64_t shmrun_ckpt_newest_complete(const char *dir, struct shmrun_manifest *out)
{
	uint64_t *epochs, e = 0;
	int n = shmrun_ckpt_list(dir, &epochs);

	for (int i = 0; i < n && !e; i++) {
		struct shmrun_manifest m;
		char why[200];

		if (shmrun_ckpt_read_manifest(dir, epochs[i], &m, why, sizeof(why)) == 0) {
			e = epochs[i];
			if (out)
				*out = m;
			else
				shmrun_manifest_free(&m);
		}
	}
	if (n >= 0)
		free(epochs);
	return e;
}

int shmrun_rescale_dry_run(const struct shmrun_job *job, const char *const *drop, uint32_t ndrop)
{
	FILE *null = fopen("/dev/null", "w");
	int err;

	if (!null)
		return -errno;
	err = shmrun_rescale(job, job->checkpoint_dir, drop, ndrop, null, NULL);
	fclose(null);
	return err;
}

/*
 * shmrun_ckpt_select() as this host's run would select: with hosts > 1 by its
 * own tasks' state files only (a per_host directory holds no other).
 */
static int64_t select_for_host(const struct shmrun_job *job, struct shmrun_manifest *m)
{
	struct shmrun_ckpt_scope scope = {0};
	struct shmrun_plan *plan = NULL;
	int64_t e;

	if (job->hosts > 1 && shmrun_plan_build(job, &plan) == 0)
		shmrun_ckpt_scope_of(plan, job->hosts, &scope);
	e = shmrun_ckpt_select_scoped(job->checkpoint_dir, &scope, m);
	shmrun_plan_free(plan);
	return e;
}

int shmrun_check_restore(const struct shmrun_job *job, bool rescale, const char *const *drop,
			 uint32_t ndrop)
{
	struct shmrun_manifest m = {0};
	int reset = shmrun_reset_checked();
	char why[300];
	int64_t e;

	if (reset < 0)
		return -EINVAL;
	if (!job->checkpoint_dir)
		return 0;
	if (reset > 0) {
		shmrun_log(SHMRUN_LOG_INFO,
			   "STREAM_RESET_STATE=1: a run would move the checkpoints of %s aside and "
			   "start from empty state",
			   job->checkpoint_dir);
		return 0;
	}
	if (!rescale && access(job->checkpoint_dir, F_OK) != 0)
		return 0; /* a run creates it: nothing to restore */
	e = select_for_host(job, &m);
	if (e <= 0 && rescale) /* nothing to rescale: refused as the run refuses it */
		return shmrun_rescale_dry_run(job, drop, ndrop);
	if (e <= 0)
		return (int)e;
	if (!shmrun_ckpt_check_topology(&m, job, why, sizeof(why))) {
		shmrun_manifest_free(&m);
		/* the same topology: a run with --rescale still plans it (and
		 * refuses a --drop-state naming no removed stage): so does check */
		return rescale ? shmrun_rescale_dry_run(job, drop, ndrop) : 0;
	}
	shmrun_manifest_free(&m);
	if (rescale) {
		int err = shmrun_rescale_dry_run(job, drop, ndrop);

		if (!err)
			shmrun_log(SHMRUN_LOG_INFO,
				   "%s/ckpt-%" PRId64 " was written by a different topology (%s): "
				   "--rescale would re-assign its state (`shmrun plan --rescale-from "
				   "%s %s` shows what moves)",
				   job->checkpoint_dir, e, why, job->checkpoint_dir, job->conf_path);
		return err;
	}
	shmrun_log(SHMRUN_LOG_ERROR,
		   "%s/ckpt-%" PRId64 " was written by a different topology: %s. "
		   "Restoring it would corrupt state, so it is refused and nothing was started. "
		   "Either start from empty state with STREAM_RESET_STATE=1 (the old checkpoints "
		   "are moved aside, not deleted), or, if the change is a new width, "
		   "worker count or host count, re-assign the state with `shmrun --rescale %s` "
		   "(see `shmrun plan --rescale-from %s %s` first)",
		   job->checkpoint_dir, e, why, job->conf_path, job->checkpoint_dir,
		   job->conf_path);
	return -ESTALE;
}
