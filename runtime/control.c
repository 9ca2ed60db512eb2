/*
 * runtime/control.c: the control area — the run's second shared mapping,
 * beside the segment of rings (docs/shm-layout.md "Control area" is the
 * reference; control.h has the structs and their static_asserts).
 *
 * What it is for: everything the processes of one run tell each other that is
 * not a record. The coordinator (worker 0) publishes epochs there, snapshot
 * children report their state files in per-task slots, the launcher sets the
 * stop flags and reads each worker's counters and error after it exits, and
 * each worker's futex doorbell lives in its block, where its peers ring it.
 *
 * Layout, each block 64-byte aligned (header rounded up, then fixed-size
 * blocks whose sizes are multiples of 64):
 *
 *     +--------------------------+  0
 *     | struct shmrun_control    |  line 0: magic, version, descriptor, counts, offsets
 *     |                          |  line 1…: epochs, stop flags, failure text
 *     +--------------------------+  stats_off = round_up(sizeof header, 64)
 *     | worker 0 stats (640 B)   |  bell | counters | error text | pid, heartbeat
 *     | …  worker W-1            |
 *     +--------------------------+  slots_off = stats_off + W x 640
 *     | task 0 slot (128 B)      |  checkpoint words | rate tokens
 *     | …  task T-1 (at least 1) |
 *     +--------------------------+  bytes
 *
 * Invariants:
 *  - the layout words (line 0) are written here, once, before the launcher
 *    forks; nothing writes them afterwards, so they need no atomics (fork
 *    orders them before every reader);
 *  - a worker refuses an area whose magic, version, descriptor, counts or
 *    offsets differ from what its own build lays out (shmrun_control_check());
 *  - counts are bounded (SHMRUN_CONTROL_MAX_*), so sizes are computed in
 *    64 bits without overflow and the mapping stays far below what any
 *    overcommit policy refuses;
 *  - every other word starts at 0 (the kernel zeroes anonymous mappings) and
 *    is synchronised as control.h says beside it.
 *
 * Rejected:
 *  - the control words in the segment of rings (shm/): shm/ knows nothing of
 *    epochs or operators (docs/design.md §4), and the segment is sized and
 *    NUMA-bound per ring; this mapping is small and created with the run;
 *  - a named file in /dev/shm: a crash would leave it behind, and only
 *    processes forked from the launcher ever need it;
 *  - pointers between the blocks: offsets from the base stay right in every
 *    process whatever address the mapping has (today the same, after fork);
 *  - trusting the layout without a check, since today every worker is a
 *    fork of the launcher (the same build): the check costs a few loads once
 *    per worker, and it catches a layout change the day a process maps the
 *    area without being a fork of its creator (a tool reading a live run, an
 *    exec'd worker).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include "control.h"

/* sizeof(struct shmrun_control) rounded up to a cache line: stats_off. */
#define CONTROL_HEAD                                                                               \
	((sizeof(struct shmrun_control) + SHMRUN_CACHELINE - 1) & ~(uint64_t)(SHMRUN_CACHELINE - 1))

uint64_t shmrun_control_memsize(uint32_t workers, uint32_t tasks)
{
	if (workers > SHMRUN_CONTROL_MAX_WORKERS || tasks > SHMRUN_CONTROL_MAX_TASKS)
		return 0;
	return CONTROL_HEAD + (uint64_t)workers * sizeof(struct shmrun_worker_stats) +
	       (uint64_t)(tasks ? tasks : 1) * sizeof(struct shmrun_task_slot);
}

struct shmrun_control *shmrun_control_create(uint32_t workers, uint32_t tasks)
{
	uint64_t head = CONTROL_HEAD;
	uint64_t stats = (uint64_t)workers * sizeof(struct shmrun_worker_stats);
	uint64_t bytes = shmrun_control_memsize(workers, tasks);
	struct shmrun_control *c;

	if (!bytes || bytes > SIZE_MAX)
		return NULL;
	c = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (c == MAP_FAILED)
		return NULL;
	c->magic = SHMRUN_CONTROL_MAGIC;
	c->version = SHMRUN_CONTROL_LAYOUT_VERSION;
	c->header_bytes = sizeof(struct shmrun_control);
	c->stats_bytes = sizeof(struct shmrun_worker_stats);
	c->slot_bytes = sizeof(struct shmrun_task_slot);
	c->cacheline = SHMRUN_CACHELINE;
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
		munmap(c, (size_t)c->bytes);
}

/* One failed check: the reason into @why, -EPROTO. */
static int refuse(char *why, size_t len, const char *what, uint64_t found, uint64_t want)
{
	if (why && len)
		snprintf(why, len,
			 "control area: %s is %" PRIu64 ", this build expects %" PRIu64
			 " (a mapping of another layout or another run)",
			 what, found, want);
	return -EPROTO;
}

int shmrun_control_check(const struct shmrun_control *c, uint32_t workers, uint32_t tasks,
			 char *why, size_t len)
{
	uint64_t stats_off = CONTROL_HEAD;
	uint64_t slots_off = stats_off + (uint64_t)workers * sizeof(struct shmrun_worker_stats);

	if (!c) {
		if (why && len)
			snprintf(why, len, "control area: none (NULL)");
		return -EINVAL;
	}
	if (c->magic != SHMRUN_CONTROL_MAGIC)
		return refuse(why, len, "magic", c->magic, SHMRUN_CONTROL_MAGIC);
	if (c->version != SHMRUN_CONTROL_LAYOUT_VERSION)
		return refuse(why, len, "layout version", c->version,
			      SHMRUN_CONTROL_LAYOUT_VERSION);
	if (c->header_bytes != sizeof(struct shmrun_control))
		return refuse(why, len, "header_bytes", c->header_bytes,
			      sizeof(struct shmrun_control));
	if (c->stats_bytes != sizeof(struct shmrun_worker_stats))
		return refuse(why, len, "stats_bytes", c->stats_bytes,
			      sizeof(struct shmrun_worker_stats));
	if (c->slot_bytes != sizeof(struct shmrun_task_slot))
		return refuse(why, len, "slot_bytes", c->slot_bytes,
			      sizeof(struct shmrun_task_slot));
	if (c->cacheline != SHMRUN_CACHELINE)
		return refuse(why, len, "cacheline", c->cacheline, SHMRUN_CACHELINE);
	if (c->workers != workers)
		return refuse(why, len, "workers", c->workers, workers);
	if (c->tasks != tasks)
		return refuse(why, len, "tasks", c->tasks, tasks);
	if (c->stats_off != stats_off)
		return refuse(why, len, "stats_off", c->stats_off, stats_off);
	if (c->slots_off != slots_off)
		return refuse(why, len, "slots_off", c->slots_off, slots_off);
	if (c->bytes != shmrun_control_memsize(workers, tasks))
		return refuse(why, len, "bytes", c->bytes, shmrun_control_memsize(workers, tasks));
	return 0;
}

/* ---- slot reports ------------------------------------------------------------ */

/* Take @slot's reporter lock for this process; a holder that died is replaced. */
static void slot_lock(struct shmrun_task_slot *slot)
{
	int32_t me = (int32_t)getpid(), cur = 0;

	/* acquire: pairs with the release in slot_unlock(); the previous
	 * reporter's stores are visible to this one's checks */
	while (!atomic_compare_exchange_weak_explicit(&slot->reporter, &cur, me,
						      memory_order_acquire, memory_order_relaxed)) {
		if (cur && kill(cur, 0) < 0 && errno == ESRCH)
			continue; /* cur is dead: the CAS now tries cur -> me */
		cur = 0;
		sched_yield();
	}
}

static void slot_unlock(struct shmrun_task_slot *slot)
{
	atomic_store_explicit(&slot->reporter, 0, memory_order_release);
}

bool shmrun_slot_stale(const struct shmrun_control *c, const struct shmrun_task_slot *slot,
		       uint64_t e)
{
	/* seq_cst: pairs with the seq_cst store of aborted_epoch in
	 * abort_epoch() (ckpt/coordinator.c); acquire: a report's fields */
	return e <= atomic_load_explicit(&c->aborted_epoch, memory_order_seq_cst) ||
	       e <= atomic_load_explicit(&slot->done_epoch, memory_order_acquire) ||
	       e <= atomic_load_explicit(&slot->failed_epoch, memory_order_acquire);
}

int shmrun_slot_report(struct shmrun_control *c, struct shmrun_task_slot *slot, uint64_t e,
		       int err, const struct shmrun_slot_file *f)
{
	int stored = 0;

	slot_lock(slot);
	/* An abort the check misses is harmless: the next epoch's writer
	 * reports after us, under the lock. */
	if (!shmrun_slot_stale(c, slot, e)) {
		if (err) {
			atomic_store_explicit(&slot->error, err, memory_order_relaxed);
			/* release: the error is visible with failed_epoch */
			atomic_store_explicit(&slot->failed_epoch, e, memory_order_release);
		} else {
			slot->size = f->size;
			slot->xxh64 = f->xxh64;
			slot->kv_bytes = f->kv_bytes;
			slot->pw_bytes = f->pw_bytes;
			/* release: pairs with the coordinator's acquire load of
			 * done_epoch; the fields above are visible with it */
			atomic_store_explicit(&slot->done_epoch, e, memory_order_release);
		}
		stored = 1;
	}
	slot_unlock(slot);
	return stored;
}
