/*
 * runtime/checkpoint.c: the control area of a run — the second shared
 * mapping (counters, bells, checkpoint slots, epoch words). The checkpoint
 * protocol itself lives in runtime/ckpt/ (see ckpt/README.md).
 */
#include <stdint.h>
#include <sys/mman.h>

#include "checkpoint.h"

/* ---- control area ---------------------------------------------------------- */

struct shmrun_control *shmrun_control_create(uint32_t workers, uint32_t tasks)
{
	size_t head = (sizeof(struct shmrun_control) + 63) & ~(size_t)63;
	size_t stats = workers * sizeof(struct shmrun_worker_stats);
	size_t slots = (tasks ? tasks : 1) * sizeof(struct shmrun_task_slot);
	size_t bytes = head + stats + slots;
	struct shmrun_control *c = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
					MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (c == MAP_FAILED)
		return NULL;
	c->workers = workers;
	c->tasks = tasks;
	c->stats_off = head;
	c->slots_off = head + stats;
	c->bytes = bytes;
	return c;
}

void shmrun_control_destroy(struct shmrun_control *c)
{
	if (c)
		munmap(c, c->bytes);
}
