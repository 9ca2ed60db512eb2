/*
 * runtime/ckpt/recovery.h: the launcher's checkpoint decisions before each
 * start of the job: STREAM_RESET_STATE, the checkpoint to restore, whether it
 * fits this topology (private to runtime/; docs/checkpoints.md "Restore").
 */
#ifndef SHMRUN_RT_CKPT_RECOVERY_H
#define SHMRUN_RT_CKPT_RECOVERY_H

#include <stdbool.h>
#include <stdint.h>

#include "control.h"
#include "shmrun/job.h"

/*
 * shmrun_reset_requested() - how the environment's STREAM_RESET_STATE reads
 * (case-insensitive). Return: 1 for 1/true/yes; 0 when unset, empty or
 * 0/false/no; -1 for anything else (the caller refuses to start).
 */
int shmrun_reset_requested(void);

/*
 * shmrun_reset_checked() - shmrun_reset_requested(), logging the error that
 * names the value and the accepted ones when it is -1 (the caller exits 2:
 * nothing was started). Return: as shmrun_reset_requested().
 */
int shmrun_reset_checked(void);

/*
 * shmrun_ckpt_reset() - STREAM_RESET_STATE=1: move every ckpt-<epoch> of @dir
 * into @dir/reset-<UTC time>/ (never delete), so the job starts from empty
 * state; logs what it moved. Return: 0 (also when @dir holds no checkpoint or
 * does not exist); -EIO (the aside directory cannot be made or a rename
 * failed: logged, the first failure stops the moves); -errno if @dir cannot
 * be read.
 */
int shmrun_ckpt_reset(const char *dir);

/*
 * shmrun_ckpt_choose() - pick the checkpoint this start of @job restores and
 * record it in @ctl (restored_epoch, restored_finished, epoch_floor) before
 * any worker is forked. Applies STREAM_RESET_STATE=1 once per invocation
 * (@reset_done, in/out: a restart after a crash restores what this run
 * checkpointed), selects the newest checkpoint that verifies, removes
 * incomplete epochs, and refuses one written by another topology with a
 * message naming STREAM_RESET_STATE and `--rescale`. @epoch receives the
 * restored epoch (left unchanged on a fresh start). A job without
 * checkpoint_dir restores nothing. Return: 0; -ESTALE (another topology,
 * logged); -EBADMSG (checkpoints present, none verifies, logged); -EIO from
 * the reset; -errno.
 */
int shmrun_ckpt_choose(const struct shmrun_job *job, struct shmrun_control *ctl, bool *reset_done,
		       uint64_t *epoch);

/*
 * shmrun_ckpt_newest_complete() - the newest epoch under @dir whose MANIFEST
 * parses (its state files are not read). @m (optional) receives that
 * MANIFEST, owned by the caller (shmrun_manifest_free()); untouched when
 * none parses. Return: that epoch, or 0 if none (also when @dir cannot be
 * read).
 */
struct shmrun_manifest;
uint64_t shmrun_ckpt_newest_complete(const char *dir, struct shmrun_manifest *m);

#endif /* SHMRUN_RT_CKPT_RECOVERY_H */
