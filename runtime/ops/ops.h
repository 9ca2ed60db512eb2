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
extern const struct shmrun_operator shmrun_op_nexmark;
extern const struct shmrun_operator shmrun_op_tokenize;
extern const struct shmrun_operator shmrun_op_count;
extern const struct shmrun_operator shmrun_op_lookup;
extern const struct shmrun_operator shmrun_op_extract;
extern const struct shmrun_operator shmrun_op_file_sink;
extern const struct shmrun_operator shmrun_op_stdout_sink;
extern const struct shmrun_operator shmrun_op_null_sink;
extern const struct shmrun_operator shmrun_op_latency_sink;
extern const struct shmrun_operator shmrun_op_window;
extern const struct shmrun_operator shmrun_op_interval_join;
extern const struct shmrun_operator shmrun_op_window_join;

/*
 * shmrun_task_error_at() - shmrun_task_error() about the value of the
 * stage's key @key (NULL: the stage; "input": the stage's `input =` list):
 * when the error stops the job before anything starts (prepare(), in the
 * launcher), its message names the file:line of that key rather than of the
 * stage. Implemented in task.c.
 * Not (yet) in the public API: a plugin's prepare() errors name the stage.
 */
void shmrun_task_error_at(struct shmrun_task *task, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * shmrun_task_input_by_key() - whether input @i of the stage (its index in
 * the `input =` list) is written `by key`: what a join needs so that both
 * sides of a key meet in one instance. Known from prepare() on; false for
 * an @i out of range. Implemented in task.c; not (yet) in the public API.
 */
bool shmrun_task_input_by_key(const struct shmrun_task *task, uint32_t i);

#endif /* SHMRUN_OPS_H */
