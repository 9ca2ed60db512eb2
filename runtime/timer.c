/*
 * runtime/timer.c: keyed timers (timer.h). PLACEHOLDER: the store is being
 * built (issue 12); until then setting a timer fails with -ENOSYS.
 */
#include <errno.h>
#include <stdint.h>

#include "shmrun/operator.h"
#include "task.h"
#include "timer.h"

int shmrun_timer_set(struct shmrun_task *t, enum shmrun_time_domain domain, const void *key,
		     uint32_t key_len, int64_t time_ns)
{
	shmrun_task_error(t, "timers are not implemented yet");
	return -ENOSYS;
}

int shmrun_timer_delete(struct shmrun_task *t, enum shmrun_time_domain domain, const void *key,
			uint32_t key_len, int64_t time_ns)
{
	return -ENOENT;
}

uint64_t shmrun_task_timers(const struct shmrun_task *t)
{
	return 0;
}

int shmrun_timers_fire_event(struct shmrun_task *t, int64_t wm)
{
	return 0;
}

int shmrun_timers_fire_processing(struct shmrun_task *t, int64_t now_ns)
{
	return 0;
}

int64_t shmrun_timers_next_processing(const struct shmrun_task *t)
{
	return INT64_MAX;
}

void *shmrun_keyed_state_ns(struct shmrun_task *t, const void *key, uint32_t key_len, uint64_t ns,
			    uint32_t value_bytes, bool create)
{
	shmrun_task_error(t, "namespaced key-bound state is not implemented yet");
	return NULL;
}

int shmrun_keyed_state_delete(struct shmrun_task *t, const void *key, uint32_t key_len,
			      bool namespaced, uint64_t ns)
{
	return -ENOENT;
}
