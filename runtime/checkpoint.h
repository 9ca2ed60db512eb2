/*
 * runtime/checkpoint.h: epochs, barriers' bookkeeping, state files, MANIFEST,
 * restore selection (private to runtime/; docs/checkpoints.md is the reference).
 */
#ifndef SHMRUN_RT_CHECKPOINT_H
#define SHMRUN_RT_CHECKPOINT_H

#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "plan.h"
#include "shmrun/ring.h"

#include "control.h"

/* ---- on disk -------------------------------------------------------------- */

/* One state file of a checkpoint, as the MANIFEST lists it. */
struct shmrun_manifest_file {
	char name[160];      /* "<stage>.<instance>.state" */
	char stage[72];
	uint32_t instance;
	uint64_t size, xxh64;
	uint64_t kv_bytes, pw_bytes;
};

struct shmrun_manifest_stage {
	char name[72], op[40];
	uint32_t width;
	int rule; /* enum shmrun_pw_rule */
};

struct shmrun_manifest {
	uint32_t version;
	uint64_t epoch;
	int64_t time_ns;     /* CLOCK_REALTIME when written */
	uint64_t fingerprint;
	char job[72];
	uint32_t vnodes, workers;
	struct shmrun_manifest_stage *stages;
	uint32_t nstages;
	struct shmrun_manifest_file *files;
	uint32_t nfiles;
	char *topology; /* the canonical topology encoding it was written by (malloc'd) */
	bool finished;  /* the end-of-input epoch: every record processed, all output committed */
};

void shmrun_manifest_free(struct shmrun_manifest *m);

/*
 * shmrun_ckpt_verify() - read checkpoint_dir/ckpt-<epoch>/: parse its MANIFEST
 * and check every file's size and checksums. @m (optional) receives the
 * parsed MANIFEST. Return: 0; -ENOENT (no MANIFEST: incomplete); -EBADMSG
 * (damaged; @why says what, naming the file); -errno for I/O.
 */
int shmrun_ckpt_verify(const char *dir, uint64_t epoch, struct shmrun_manifest *m, char *why,
		       size_t whylen);

/*
 * shmrun_ckpt_read_manifest() - parse checkpoint_dir/ckpt-<epoch>/MANIFEST
 * (its own checksum included) without reading the state files.
 * Return: as shmrun_ckpt_verify().
 */
int shmrun_ckpt_read_manifest(const char *dir, uint64_t epoch, struct shmrun_manifest *m,
			      char *why, size_t whylen);

/*
 * shmrun_ckpt_list() - the epochs of every ckpt-<epoch> directory under @dir,
 * newest first, in a malloc'd array. Return: count, or -errno (-ENOENT if @dir
 * does not exist).
 */
int shmrun_ckpt_list(const char *dir, uint64_t **epochs);

/*
 * shmrun_ckpt_select() - the checkpoint to restore: the newest one that
 * verifies, logging each newer one that does not (by directory name, with the
 * reason) as skipped. Return: its epoch; 0 when @dir holds no checkpoint;
 * -EBADMSG when it holds some but none verifies (logged); -errno.
 */
int64_t shmrun_ckpt_select(const char *dir, struct shmrun_manifest *m);

/*
 * shmrun_ckpt_remove_incomplete() - remove every ckpt-<epoch> directory of
 * @dir that has no MANIFEST: an epoch that was aborted or interrupted (a crash,
 * a snapshot writer killed mid-way) and so never committed — the rename of
 * MANIFEST is the commit. A directory with a MANIFEST, even a damaged one, is
 * never touched. Only files the runtime makes are removed, never through a
 * symlink: a ckpt-<epoch> that is a symlink, or holds anything else, is left
 * alone and logged (a warning, once per process for each such directory).
 * Logs one line naming what it removed. Call only when no
 * process of the job can be writing into @dir: at start, after the restore
 * selection (shmrun_ckpt_select()), before any worker runs.
 * Return: how many were removed; -errno if @dir cannot be read (-ENOENT: 0).
 */
int shmrun_ckpt_remove_incomplete(const char *dir);

/*
 * shmrun_ckpt_check_topology() - whether @m was written by this topology: the
 * same fingerprint. Return: 0, or -ESTALE with every difference in @why.
 */
int shmrun_ckpt_check_topology(const struct shmrun_manifest *m, const struct shmrun_job *job,
			       char *why, size_t whylen);

/*
 * shmrun_ckpt_write_manifest() - write checkpoint_dir/ckpt-<e>/MANIFEST for
 * @job with @files (@finished: e is the end-of-input epoch of a finished run): to a temporary name, fsync, rename into place, fsync the
 * directory. Return: 0 or -errno (logged).
 */
int shmrun_ckpt_write_manifest(const struct shmrun_job *job, uint64_t e, bool finished,
			       const struct shmrun_manifest_file *files, uint32_t nfiles);

/*
 * A parsed state file (see worker.c for the layout): pointers into @data.
 * Sections are whole vnodes, copied as they are when a rescale moves them.
 */
struct shmrun_state_section {
	uint32_t vnode;
	uint64_t keys;
	const unsigned char *bytes; /* the whole section: header + entries */
	size_t len;
};

struct shmrun_state_view {
	uint32_t value_bytes, instance, width, vnodes;
	uint64_t epoch;
	struct shmrun_state_section *sections; /* malloc'd */
	uint32_t nsections;
	const unsigned char *pw;  /* [u32 len][bytes]... */
	size_t pw_len;
	uint64_t npw;
};

#define SHMRUN_STATE_MAGIC "SHMRSTAT"
#define SHMRUN_STATE_VERSION 1u
#define SHMRUN_STATE_HEAD 40u /* magic + 6 x u32/u64 fields + vnodes + nsections */

/*
 * shmrun_state_put_header() - append a state file's header (SHMRUN_STATE_HEAD
 * bytes); @nsections vnode sections and the per-worker entries follow.
 * Return: 0 or the buffer's -errno.
 */
struct shmrun_ckpt_buf;
int shmrun_state_put_header(struct shmrun_ckpt_buf *buf, uint32_t value_bytes, uint64_t epoch,
			    uint32_t instance, uint32_t width, uint32_t vnodes, uint32_t nsections);

/*
 * shmrun_state_parse() - check and index a state file's logical content.
 * Return: 0; -EBADMSG if malformed; -ENOMEM.
 */
int shmrun_state_parse(const unsigned char *data, size_t len, struct shmrun_state_view *v);
void shmrun_state_view_free(struct shmrun_state_view *v);

/* ---- the coordinator (worker 0) -------------------------------------------- */

/* Checkpoints of steady growth after which per-worker state draws a warning. */
#define SHMRUN_PW_GROWTH_CHECKPOINTS 5

struct shmrun_coordinator {
	uint64_t epoch;        /* in flight, 0 if none */
	int64_t started_ns;    /* when it was triggered */
	int64_t next_ns;       /* when to trigger the next one */
	int manifest_pid;      /* child writing epoch's MANIFEST, 0 if none */
	bool manifest_exited;  /* that child was reaped by someone else's waitpid(-1) */
	uint64_t *pw_history;  /* per task: per-worker bytes at the last checkpoints */
	uint64_t pw_checkpoints;
	uint64_t manifest_epoch;
	uint64_t *beats; /* per worker: heartbeat when the epoch in flight started */
};

/*
 * shmrun_coordinate() - worker 0's checkpoint duties, called every loop turn:
 * trigger epochs every checkpoint_interval (and the final one once every
 * source is exhausted or a stop was requested), notice when every task's
 * snapshot is durable and have the MANIFEST written (by a child, off the
 * processing path), abort an epoch past checkpoint_timeout or with a failed
 * write. An epoch that times out is logged with the tasks that did not report
 * and, for each of their workers, its pid, CPU and tasks, and whether it made
 * no progress since the epoch started (its heartbeat did not move) and is
 * stopped (state T in /proc/PID/stat: SIGSTOP?); a worker none of whose tasks
 * is late is not named, one without a pid is "not started yet". The first
 * epoch numbers past ctl->restored_epoch and ctl->epoch_floor. After the
 * MANIFEST, retention keeps the newest checkpoint_retain checkpoints that look
 * restorable and retires older ones, MANIFEST first. co->beats is allocated here;
 * the caller frees it with co->pw_history. Return: true if it did something.
 */
bool shmrun_coordinate(struct shmrun_coordinator *co, const struct shmrun_plan *plan,
		       struct shmrun_control *ctl, int64_t now_ns);

/* The path of checkpoint_dir/ckpt-<epoch> into @buf. */
void shmrun_ckpt_path(const char *dir, uint64_t epoch, char *buf, size_t len);

/* The state file name of a task. */
void shmrun_ckpt_file_name(const struct shmrun_plan *plan, uint32_t task, char *buf, size_t len);

/*
 * shmrun_process_state() - the state letter of process @pid from
 * /proc/PID/stat: R running, S sleeping, D uninterruptible wait, T stopped
 * (SIGSTOP, job control), t stopped by a debugger, Z zombie. Return: that
 * letter, or 0 if @pid <= 0 or the file cannot be read.
 */
char shmrun_process_state(int pid);

#endif /* SHMRUN_RT_CHECKPOINT_H */
