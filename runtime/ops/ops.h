/*
 * runtime/ops/ops.h: the built-in operators (one file each, public API only,
 * plus the runtime's small shared idioms in util.h: growable arrays, mkdir -p,
 * read loops — no runtime state).
 */
#ifndef SHMRUN_OPS_H
#define SHMRUN_OPS_H

#include "shmrun/operator.h"
#include "util.h"

extern const struct shmrun_operator shmrun_op_file_source;
extern const struct shmrun_operator shmrun_op_sequence;
extern const struct shmrun_operator shmrun_op_tokenize;
extern const struct shmrun_operator shmrun_op_count;
extern const struct shmrun_operator shmrun_op_lookup;
extern const struct shmrun_operator shmrun_op_file_sink;
extern const struct shmrun_operator shmrun_op_stdout_sink;
extern const struct shmrun_operator shmrun_op_null_sink;
extern const struct shmrun_operator shmrun_op_latency_sink;
extern const struct shmrun_operator shmrun_op_window;

/*
 * shmrun_task_param_error() - shmrun_task_error() about the stage's key @key
 * (one of the operator's params): from prepare(), in the launcher, the
 * message is reported at the line of @key in topology.conf when the file
 * sets it, instead of the section's line (runtime/task.c). Built-ins only:
 * not part of the operator ABI.
 */
void shmrun_task_param_error(struct shmrun_task *task, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif /* SHMRUN_OPS_H */
