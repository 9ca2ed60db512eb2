/*
 * runtime/ops/file_out.h: file_sink's output file as a part of another
 * operator (extract's `rejects`), private to runtime/ops/. The same code as
 * file_sink (sinks.c), so the same guarantees: without checkpoints the file
 * is replaced and written directly; with checkpoints it is exactly-once by
 * a two-phase commit (staged per epoch, committed when the epoch completes,
 * rolled back to the committed length on a restore). Width k writes
 * <path>.<instance>. The operator that embeds one forwards its callbacks:
 * prepare, open, snapshot (which adds one per-worker entry, the committed
 * length), restore (that entry), commit, flush, end_of_input, close. As for
 * file_sink, such a stage's width cannot change under --rescale once the
 * output has per-worker entries (SHMRUN_PW_NONE).
 *
 * Each function returns 0 or a negative errno after shmrun_task_error()
 * named the file and what to do, as file_sink's callbacks do.
 */
#ifndef SHMRUN_OPS_FILE_OUT_H
#define SHMRUN_OPS_FILE_OUT_H

#include <stdint.h>

#include "shmrun/operator.h"

struct shmrun_file_out;

/* Check the output named by the stage's PATH key @key (declared with
 * .io = SHMRUN_PARAM_OUTPUT) for every instance: fits, is not a non-file. */
int shmrun_file_out_prepare(struct shmrun_task *task, const char *key);
/* Open this instance's file of key @key into *@out (NULL on failure). */
int shmrun_file_out_open(struct shmrun_task *task, const char *key, struct shmrun_file_out **out);
/* Write @line (@len bytes) and '\n'; not counted as the job's records out. */
int shmrun_file_out_put(struct shmrun_task *task, struct shmrun_file_out *out, const void *line,
			uint32_t len);
int shmrun_file_out_snapshot(struct shmrun_task *task, struct shmrun_file_out *out, uint64_t epoch);
int shmrun_file_out_restore(struct shmrun_task *task, struct shmrun_file_out *out,
			    const void *entry, uint32_t len);
int shmrun_file_out_commit(struct shmrun_task *task, struct shmrun_file_out *out, uint64_t epoch);
int shmrun_file_out_flush(struct shmrun_task *task, struct shmrun_file_out *out);
int shmrun_file_out_end(struct shmrun_task *task, struct shmrun_file_out *out);
void shmrun_file_out_close(struct shmrun_task *task, struct shmrun_file_out *out);

#endif /* SHMRUN_OPS_FILE_OUT_H */
