/*
 * runtime/ckpt/manifest.h: checkpoint directories on disk — names, the
 * MANIFEST (write, parse, verify), restore selection, removal of incomplete
 * epochs, the topology check, and the `shmrun ckpt` listing (private to
 * runtime/; docs/checkpoints.md is the reference, MANIFEST's text is described
 * in manifest.c).
 *
 * Invariant: the rename of MANIFEST into place is the commit of a checkpoint.
 * A ckpt-<epoch> directory without MANIFEST never held a checkpoint; one with a
 * MANIFEST is only ever retired MANIFEST first (shmrun_ckpt_remove()).
 *
 * Nothing here knows the state files' content (ckpt/state_file.h) or the
 * control area: a MANIFEST lists files by name, size and checksum.
 */
#ifndef SHMRUN_RT_CKPT_MANIFEST_H
#define SHMRUN_RT_CKPT_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "plan.h"

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

/*
 * shmrun_manifest_parse() - parse the MANIFEST text @text of @len bytes
 * (@text[@len] must be 0; the text is modified) into @m. What
 * shmrun_ckpt_read_manifest() does after reading the file; the fuzz harness
 * (tests/fuzz/fuzz_manifest.c) calls it directly.
 * Return: 0; -EBADMSG with @why (no end line, checksum mismatch, a line not
 * understood, no version or epoch); -ENOMEM. On failure @m may hold what was
 * parsed so far: free it with shmrun_manifest_free().
 */
int shmrun_manifest_parse(char *text, size_t len, struct shmrun_manifest *m, char *why,
			  size_t whylen);

/* shmrun_manifest_free() - free what a parsed @m owns and zero it; safe on a zeroed one. */
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
 * shmrun_ckpt_remove_incomplete_below() - shmrun_ckpt_remove_incomplete() for
 * the epochs below @bound only (UINT64_MAX: all). With several hosts a newer
 * incomplete epoch may still be completed by rank 0's MANIFEST, or be written
 * by another host's workers in a shared directory (ckpt/hosts.h).
 * Return: as shmrun_ckpt_remove_incomplete().
 */
int shmrun_ckpt_remove_incomplete_below(const char *dir, uint64_t bound);

/*
 * Scoped forms (ckpt/hosts.h): the same, checking only the state files that
 * scope @s names (NULL: every file, as the forms above). A per_host
 * checkpoint_dir holds only its host's state files; the MANIFEST is checked
 * whole (checksum, epoch) in every case.
 */
struct shmrun_ckpt_scope;
int shmrun_ckpt_verify_scoped(const char *dir, uint64_t epoch, const struct shmrun_ckpt_scope *s,
			      struct shmrun_manifest *m, char *why, size_t whylen);
bool shmrun_ckpt_looks_good_scoped(const char *dir, uint64_t epoch,
				   const struct shmrun_ckpt_scope *s);
int64_t shmrun_ckpt_select_scoped(const char *dir, const struct shmrun_ckpt_scope *s,
				  struct shmrun_manifest *m);

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
 * shmrun_ckpt_remove() - retire checkpoint_dir/ckpt-<epoch>: remove the files
 * the runtime wrote there (MANIFEST first, then the directory is fsynced) and
 * the directory, and nothing else; never through a symlink.
 * Return: 0 (removed, or already gone); -ELOOP (a symlink or not a
 * directory); -EEXIST (holds something the runtime did not make; @why, of
 * @whylen bytes, names it); -ENOTEMPTY (a file appeared meanwhile); -errno.
 */
int shmrun_ckpt_remove(const char *dir, uint64_t epoch, char *why, size_t whylen);

/*
 * shmrun_ckpt_looks_good() - whether checkpoint_dir/ckpt-<epoch> looks
 * restorable, cheaply: a real directory whose MANIFEST parses and whose every
 * state file is a regular file of the size MANIFEST gives (no checksums read).
 */
bool shmrun_ckpt_looks_good(const char *dir, uint64_t epoch);

/* The path of checkpoint_dir/ckpt-<epoch> into @buf. */
void shmrun_ckpt_path(const char *dir, uint64_t epoch, char *buf, size_t len);

/* The state file name of a task. */
void shmrun_ckpt_file_name(const struct shmrun_plan *plan, uint32_t task, char *buf, size_t len);

#endif /* SHMRUN_RT_CKPT_MANIFEST_H */
