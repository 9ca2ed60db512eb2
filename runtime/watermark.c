/*
 * runtime/watermark.c: event-time watermarks in the worker. PLACEHOLDER: being
 * built (issue 12); until then no task has a watermark.
 */
#include <stdint.h>

#include "shmrun/operator.h"
#include "task.h"

int64_t shmrun_task_watermark(const struct shmrun_task *t)
{
	return SHMRUN_WATERMARK_MIN;
}
