/*
 * runtime/ops/registry.c: the table of built-in operators, looked up by the
 * `op =` value of a stage.
 */
#include <string.h>

#include "internal.h"
#include "ops.h"
#include "shmrun/job.h"

static const struct shmrun_operator *const builtins[] = {
	&shmrun_op_file_source, &shmrun_op_sequence,    &shmrun_op_tokenize,
	&shmrun_op_count,       &shmrun_op_lookup,      &shmrun_op_file_sink,
	&shmrun_op_stdout_sink, &shmrun_op_null_sink,   &shmrun_op_latency_sink,
	NULL,
};

const struct shmrun_operator *const *shmrun_operators(void)
{
	return builtins;
}

const struct shmrun_operator *shmrun_operator_find(const char *name)
{
	for (const struct shmrun_operator *const *op = builtins; *op; op++)
		if (strcmp((*op)->name, name) == 0)
			return *op;
	return NULL;
}

const struct shmrun_plugin_info *shmrun_operator_plugin(const struct shmrun_operator *op)
{
	(void)op;
	return NULL; /* TODO(issue 11): plugins */
}
