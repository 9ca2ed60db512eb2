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

#endif /* SHMRUN_OPS_H */
