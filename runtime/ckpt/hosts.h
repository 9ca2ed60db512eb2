/*
 * runtime/ckpt/hosts.h: checkpoints across hosts (issue 16) — the layouts of
 * checkpoint_dir, which state files one host checks, the MANIFEST bytes rank
 * 0 sends in a COMMIT and their installation on the other hosts, retention,
 * and the choice of the epoch to restore that the hosts agree on (private to
 * runtime/; docs/checkpoints.md "Across hosts" is the reference, the
 * architecture is /work/notes/multihost-design.md "Control across hosts").
 *
 * Who calls what, and when (H = hosts > 1; with H = 1 nothing here is called
 * but through the one-host paths, which behave as before):
 *
 *   the topology loader (conf_job.c), with hosts > 1 under mpirun: job->host
 *   = the rank the MPI environment gives, {host} expanded for it
 *       shmrun_ckpt_set_host(job, rank)                   (any later caller
 *                                                          that knows better)
 *   launcher, before it forks its workers:
 *       shmrun_ckpt_scope_of(plan, job->hosts, &scope)
 *       shmrun_ckpt_choose_scoped(job, &scope, ctl, ...)   this host's choice
 *   gateway, after MPI_Init, before any worker reads ctl->restored_epoch
 *   (every host sends rank 0 its choice, ctl->restored_epoch, and its
 *   ctl->epoch_floor; rank 0 answers with the agreed epoch E and, if E > 0,
 *   its MANIFEST bytes of E; rank 0's coordinator numbers past the largest
 *   floor, so no host's stale ckpt-N is written into):
 *       shmrun_ckpt_agree(choices, H, ...)                  rank 0: E
 *       shmrun_ckpt_manifest_bytes(dir, E, fingerprint, …)  rank 0
 *       shmrun_ckpt_restore_instead(job, &scope, ctl, E, bytes, len, …)
 *                                                           a host whose
 *                                                           choice is not E
 *   rank 0, when its MANIFEST child has published complete_epoch = e:
 *       shmrun_ckpt_manifest_bytes(job->checkpoint_dir, e, fingerprint, …)
 *       → the COMMIT control entry to every host carries these bytes
 *   host h != 0, on COMMIT(e, bytes), before it publishes complete_epoch = e
 *   in its own control area:
 *       shmrun_ckpt_commit_received(job, &scope, e, bytes, len, …)
 *       (per_host: install the bytes, then retention; shared: nothing)
 *
 * Nothing here calls MPI: the gateway moves the bytes. Every function is
 * tested without it (tests/unit/check_ckpt_hosts.c).
 */
#ifndef SHMRUN_RT_CKPT_HOSTS_H
#define SHMRUN_RT_CKPT_HOSTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "control.h"
#include "plan.h"

struct shmrun_manifest;

/* Longest decimal host index: {host} grows a path by at most this minus 6. */
#define SHMRUN_CKPT_HOST_DIGITS 10

/*
 * Which state files of a checkpoint this host checks. With one host (plan
 * NULL) every file the MANIFEST names; with H hosts only the files of the
 * tasks placed on @host: task k is on host plan->tasks[k].worker /
 * workers_per_host (the global worker g = h·w + local index).
 */
struct shmrun_ckpt_scope {
	const struct shmrun_plan *plan; /* NULL: every file (one host, the tools) */
	uint32_t host;			/* this host, 0 .. H-1 */
	uint32_t workers_per_host;	/* w, >= 1 */
};

/*
 * shmrun_ckpt_dir_expand() - @tmpl with every "{host}" replaced by the decimal
 * @host, into @out of @len bytes. A @tmpl without "{host}" is copied.
 * Return: 0; -ENAMETOOLONG if the result does not fit (@out then holds "").
 */
int shmrun_ckpt_dir_expand(const char *tmpl, uint32_t host, char *out, size_t len);

/*
 * shmrun_ckpt_set_host() - make @job this process's view as host @host:
 * job->host = @host and, when checkpoint_dir was written with {host}
 * (job->checkpoint_dir_template, per_host layout only), job->checkpoint_dir
 * re-expanded for @host. The loader already does this for the rank of the
 * MPI environment (host 0 without one); call it before anything uses
 * checkpoint_dir.
 * Return: 0; -ENOMEM (job unchanged); -ENAMETOOLONG (the expansion would be
 * longer than SHMRUN_CKPT_DIR_MAX; job unchanged).
 */
int shmrun_ckpt_set_host(struct shmrun_job *job, uint32_t host);

/*
 * shmrun_ckpt_scope_of() - the scope of this process: host job->host of
 * @hosts (job->hosts), with plan->workers / @hosts workers each. @hosts <= 1,
 * or a plan whose worker count @hosts does not divide, gives the one-host
 * scope (plan NULL: every file).
 */
void shmrun_ckpt_scope_of(const struct shmrun_plan *plan, uint32_t hosts,
			  struct shmrun_ckpt_scope *s);

/*
 * shmrun_ckpt_scope_has() - whether @s checks the state file of instance
 * @instance of stage @stage. True for every file with a one-host scope
 * (plan NULL or NULL @s), and for a stage or instance the plan does not have
 * (a file of another topology is never skipped unchecked).
 */
bool shmrun_ckpt_scope_has(const struct shmrun_ckpt_scope *s, const char *stage, uint32_t instance);

/*
 * shmrun_ckpt_manifest_bytes() - the bytes of checkpoint_dir/ckpt-@e/MANIFEST
 * in @dir, for rank 0's COMMIT: read, then parsed and checked before they
 * leave (its closing checksum, epoch @e, fingerprint @fingerprint), so a host
 * never receives a MANIFEST rank 0 would not restore.
 * @bytes: receives a malloc'd buffer (the caller frees it), NUL-terminated
 *         one past *@len; NULL on failure. @len: its length in bytes.
 * @why:   one line on failure, naming the path; @whylen its size.
 * Return: 0; -ENOENT (no such MANIFEST: epoch @e is not complete here);
 * -EBADMSG (it does not parse, names another epoch, or is empty);
 * -ESTALE (another fingerprint); -EFBIG (larger than
 * SHMRUN_CKPT_MANIFEST_MAX); -ENOMEM; another -errno of open/read.
 */
#define SHMRUN_CKPT_MANIFEST_MAX (64u << 20)
int shmrun_ckpt_manifest_bytes(const char *dir, uint64_t e, uint64_t fingerprint, char **bytes,
			       size_t *len, char *why, size_t whylen);

/*
 * shmrun_ckpt_install_manifest() - commit epoch @e on this host with the
 * MANIFEST rank 0 wrote (@bytes, @len bytes, from the COMMIT): check that
 * the bytes parse (closing checksum included), name epoch @e and carry
 * @job's fingerprint; create checkpoint_dir and ckpt-@e if missing (a host
 * without tasks writes no state file); write them as MANIFEST.tmp, fsync it,
 * rename it to MANIFEST, fsync the directory. Installing the same bytes
 * twice is harmless (the rename replaces). Nothing is written when a check
 * fails. Call before publishing complete_epoch = @e locally (the sinks of
 * this host commit on it).
 * @why: one line on failure naming the path and the reason.
 * Return: 0; -EINVAL (@job has no checkpoint_dir or the shared layout — rank
 * 0's MANIFEST is already there —, @e is 0, or @bytes NULL);
 * -EBADMSG (does not parse, truncated, names another epoch); -ESTALE (another
 * fingerprint: another topology); -EFBIG (@len > SHMRUN_CKPT_MANIFEST_MAX);
 * -ELOOP (ckpt-@e is a symlink or not a directory); -ENOMEM; another
 * -errno of mkdir, open, write, fsync or rename (-EACCES, -EROFS, -ENOSPC,
 * -EIO, ...), MANIFEST.tmp then removed.
 */
int shmrun_ckpt_install_manifest(const struct shmrun_job *job, uint64_t e, const void *bytes,
				 size_t len, char *why, size_t whylen);

/*
 * shmrun_ckpt_commit_received() - what host s->host (not rank 0) does with a
 * COMMIT of epoch @e before it publishes complete_epoch = @e locally: with
 * checkpoint_layout = per_host, shmrun_ckpt_install_manifest() of @bytes
 * (@len bytes) and then shmrun_ckpt_retain() for scope @s; with the shared
 * layout (or no checkpoint_dir) nothing — rank 0's MANIFEST is already in the
 * one directory, and rank 0 retires old checkpoints there — and @bytes may
 * be NULL. Return: 0; the errors of shmrun_ckpt_install_manifest() (@why
 * names the path); complete_epoch must then not be published.
 */
int shmrun_ckpt_commit_received(const struct shmrun_job *job, const struct shmrun_ckpt_scope *s,
				uint64_t e, const void *bytes, size_t len, char *why,
				size_t whylen);

/*
 * shmrun_ckpt_retain() - retention after epoch @e's MANIFEST is durable: keep
 * the newest job->checkpoint_retain checkpoints <= @e that look restorable
 * for scope @s (MANIFEST parses, this host's state files there with their
 * sizes: shmrun_ckpt_looks_good_scoped()), and retire every ckpt-N older than
 * the oldest one kept, MANIFEST first (shmrun_ckpt_remove()). Run by rank 0's
 * MANIFEST child (coordinator.c) and, per_host, by each host after
 * shmrun_ckpt_install_manifest(); with the shared layout only rank 0 runs it
 * (one directory). Return: how many were retired; 0 when @job has no
 * checkpoint_dir or it cannot be read.
 */
int shmrun_ckpt_retain(const struct shmrun_job *job, const struct shmrun_ckpt_scope *s, uint64_t e);

/*
 * shmrun_ckpt_choose_scoped() - shmrun_ckpt_choose() (recovery.h) for host
 * s->host: a checkpoint is restorable when its MANIFEST verifies and the
 * state files of this host's tasks verify (a per_host directory holds no
 * other; a shared one is not relied on for them). With a multi-host scope,
 * only incomplete epochs older than the one chosen are removed: a newer one
 * may be completed by rank 0's MANIFEST (shmrun_ckpt_restore_instead()), and
 * in a shared directory another host's workers may be writing past it.
 * STREAM_RESET_STATE=1 with the shared layout: host 0 alone moves the
 * checkpoints aside, every other host starts from empty state without
 * reading the directory. @s NULL: exactly shmrun_ckpt_choose().
 * Return: as shmrun_ckpt_choose().
 */
int shmrun_ckpt_choose_scoped(const struct shmrun_job *job, const struct shmrun_ckpt_scope *s,
			      struct shmrun_control *ctl, bool *reset_done, uint64_t *epoch);

/*
 * shmrun_ckpt_host_epoch() - the epoch host s->host would restore from @dir,
 * without changing anything (no reset, no removal): the newest checkpoint
 * whose MANIFEST and this host's state files verify. What each host sends
 * after MPI_Init to compare. Return: that epoch; 0 if none (fresh start);
 * -EBADMSG when checkpoints are there but none verifies; -errno.
 */
int64_t shmrun_ckpt_host_epoch(const char *dir, const struct shmrun_ckpt_scope *s);

/*
 * shmrun_ckpt_agree() - the epoch every host restores, from @choice[h], the
 * epoch host h would restore (shmrun_ckpt_host_epoch()), for @hosts hosts.
 * Rank 0's MANIFEST is the commit point, as worker 0's is on one host, so
 * the answer is @choice[0]:
 *   - a host ahead of it (rank 0's newer checkpoint is damaged) restores the
 *     smaller @choice[0] instead; each host keeps >= 2 complete checkpoints
 *     (shmrun_ckpt_retain()), so it still has it;
 *   - a host behind it missed rank 0's COMMIT of that epoch (a crash between
 *     rank 0's MANIFEST and the COMMIT reaching it): its state files of that
 *     epoch are durable (it reported them before rank 0 wrote the MANIFEST),
 *     so it completes the epoch with rank 0's MANIFEST bytes
 *     (shmrun_ckpt_restore_instead() with them). Restoring the smallest
 *     choice instead would replay an epoch whose output rank 0's sinks (and
 *     those of every host the COMMIT reached) have already committed.
 * @why: on failure, one line naming the hosts.
 * A host with no checkpoint at all (0) while rank 0 has one is behind it
 * too (it missed the COMMIT of the first epoch).
 * Return: the epoch (>= 0; 0 when every host starts fresh); -ENOENT when
 * rank 0 has no checkpoint and another host has one (rank 0's were lost:
 * starting fresh would drop that host's state, restoring it would lose
 * rank 0's; refused, @why names the hosts); -EINVAL (@hosts 0, @choice NULL).
 */
int64_t shmrun_ckpt_agree(const uint64_t *choice, uint32_t hosts, char *why, size_t whylen);

/*
 * shmrun_ckpt_restore_instead() - host s->host restores epoch @e instead of
 * the one shmrun_ckpt_choose_scoped() chose (the agreed one differs). With
 * @manifest (@len bytes, rank 0's MANIFEST of @e) it is installed first when
 * this host has none for @e (shmrun_ckpt_install_manifest(): a COMMIT that
 * did not arrive before a crash); then ckpt-@e must verify for this host's
 * tasks, and ctl->restored_epoch, ctl->restored_finished are set from it
 * (epoch_floor is left: it is past every directory). Call before any
 * worker reads ctl->restored_epoch (workers restore when they start).
 * @e 0 sets a fresh start (restored_epoch 0).
 * Return: 0; -ESTALE (another topology's checkpoint); -ENOENT (no complete
 * ckpt-@e here and no @manifest); -EBADMSG (it, or a state file of this
 * host, does not verify; an installed MANIFEST is then removed again);
 * the errors of shmrun_ckpt_install_manifest(). Logged, with the path.
 */
int shmrun_ckpt_restore_instead(const struct shmrun_job *job, const struct shmrun_ckpt_scope *s,
				struct shmrun_control *ctl, uint64_t e, const void *manifest,
				size_t len, char *why, size_t whylen);

#endif /* SHMRUN_RT_CKPT_HOSTS_H */
