/*
 * runtime/metrics.c: the metrics block — lay it out, fill its static tables
 * from the plan, reset it per start, and map and check it in a reader
 * (metrics.h has the layout and its rules; docs/shm-layout.md "Metrics area").
 *
 * Invariants:
 *  - every table starts on a 64-byte boundary and every entry is a multiple
 *    of 64 bytes, so each writer's fields sit on lines no other writer
 *    stores to (the launcher's job line, worker 0's checkpoint line, each
 *    task's and each channel side's own lines);
 *  - a reader checks the layout and every index before it follows one
 *    (shmrun_metrics_check()): the block comes over a socket from a process
 *    that may be another build.
 *
 * Rejected: growing the block as tasks come and go (rescale restarts the
 * launcher, which makes a new block; a restart keeps the plan), so readers
 * map it once; a pointer-free but variable-length string table for names
 * (fixed name fields cut long names short, which a display does anyway).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "control.h" /* SHMRUN_CONTROL_MAX_* */
#include "metrics.h"
#include "multihost.h"
#include "plan.h"
#include "util.h"

#define ROUND64(x) (((x) + 63) & ~(uint64_t)63)

struct shmrun_metrics *shmrun_run_metrics;

uint64_t shmrun_metrics_memsize(uint32_t stages, uint32_t tasks, uint32_t chans, uint32_t workers)
{
	if (stages > SHMRUN_CONTROL_MAX_TASKS || tasks > SHMRUN_CONTROL_MAX_TASKS ||
	    chans > SHMRUN_CONTROL_MAX_TASKS * 64ull || workers > SHMRUN_CONTROL_MAX_WORKERS)
		return 0;
	return ROUND64(sizeof(struct shmrun_metrics)) +
	       (uint64_t)stages * sizeof(struct shmrun_metrics_stage) +
	       (uint64_t)tasks * sizeof(struct shmrun_metrics_task) +
	       (uint64_t)chans * sizeof(struct shmrun_metrics_chan) +
	       (uint64_t)workers * sizeof(struct shmrun_metrics_worker);
}

/* Copy @s into the @n-byte field @dst, cut short, NUL-terminated, zero-padded. */
static void put_name(char *dst, size_t n, const char *s)
{
	memset(dst, 0, n);
	if (s)
		strncpy(dst, s, n - 1);
}

static void fill_tables(struct shmrun_metrics *m, const struct shmrun_plan *plan)
{
	const struct shmrun_job *job = plan->job;

	for (uint32_t s = 0; s < m->stages; s++) {
		struct shmrun_metrics_stage *st =
			(struct shmrun_metrics_stage *)shmrun_metrics_stage(m, s);

		put_name(st->name, sizeof(st->name), job->stages[s].name);
		put_name(st->op, sizeof(st->op), job->stages[s].op->name);
		st->width = job->stages[s].width;
		st->task0 = plan->stage_task0[s];
		st->flags = job->stages[s].op->flags;
	}
	for (uint32_t i = 0; i < m->tasks; i++) {
		struct shmrun_metrics_task *t = shmrun_metrics_task(m, i);

		t->stage = plan->tasks[i].stage;
		t->instance = plan->tasks[i].instance;
		t->worker = plan->tasks[i].worker;
		t->cpu = shmrun_plan_cpu_of(plan, plan->tasks[i].worker);
		t->vnode_lo = plan->tasks[i].vnode_lo;
		t->vnode_hi = plan->tasks[i].vnode_hi;
		atomic_store_explicit(&t->watermark, INT64_MIN, memory_order_relaxed);
	}
	for (uint32_t c = 0; c < m->chans; c++) {
		struct shmrun_metrics_chan *ch = shmrun_metrics_chan(m, c);

		ch->src_task = plan->channels[c].src_task;
		ch->dst_task = plan->channels[c].dst_task;
		ch->capacity = plan->rings[c].capacity;
	}
	for (uint32_t w = 0; w < m->workers; w++)
		shmrun_metrics_worker(m, w)->cpu = shmrun_plan_cpu_of(plan, w);
}

struct shmrun_metrics *shmrun_metrics_create(const struct shmrun_plan *plan, int *fd)
{
	const struct shmrun_job *job = plan->job;
	uint32_t nstages = job->nstages, ntasks = plan->ntasks, nchans = plan->nchannels;
	uint64_t bytes = shmrun_metrics_memsize(nstages, ntasks, nchans, plan->workers);
	struct shmrun_metrics *m;
	int f;

	*fd = -1;
	if (!bytes) {
		errno = ENOMEM;
		return NULL;
	}
	f = memfd_create("shmrun-metrics", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (f < 0)
		return NULL;
	if (ftruncate(f, (off_t)bytes) ||
	    fcntl(f, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL)) {
		int e = errno;

		close(f);
		errno = e;
		return NULL;
	}
	m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
	if (m == MAP_FAILED) {
		int e = errno;

		close(f);
		errno = e;
		return NULL;
	}
	m->magic = SHMRUN_METRICS_MAGIC;
	m->version = SHMRUN_METRICS_LAYOUT_VERSION;
	m->header_bytes = sizeof(struct shmrun_metrics);
	m->stage_bytes = sizeof(struct shmrun_metrics_stage);
	m->task_bytes = sizeof(struct shmrun_metrics_task);
	m->chan_bytes = sizeof(struct shmrun_metrics_chan);
	m->worker_bytes = sizeof(struct shmrun_metrics_worker);
	m->stages = nstages;
	m->tasks = ntasks;
	m->chans = nchans;
	m->workers = plan->workers;
	m->stages_off = ROUND64(sizeof(struct shmrun_metrics));
	m->tasks_off = m->stages_off + (uint64_t)nstages * sizeof(struct shmrun_metrics_stage);
	m->chans_off = m->tasks_off + (uint64_t)ntasks * sizeof(struct shmrun_metrics_task);
	m->workers_off = m->chans_off + (uint64_t)nchans * sizeof(struct shmrun_metrics_chan);
	m->bytes = bytes;
	m->cacheline = SHMRUN_CACHELINE;
	m->launcher_pid = (int32_t)getpid();
	m->started_wall_ns = shmrun_wall_ns();
	m->checkpoint_interval_ns = job->checkpoint_dir ? job->checkpoint_interval_ns : 0;
	m->hosts = plan->hosts;
	m->host = shmrun_host_self();
	m->workers_per_host = plan->workers_per_host;
	put_name(m->job, sizeof(m->job), job->name);
	put_name(m->conf_path, sizeof(m->conf_path), job->conf_path);
	fill_tables(m, plan);
	*fd = f;
	return m;
}

void shmrun_metrics_destroy(struct shmrun_metrics *m, int fd)
{
	if (m)
		munmap(m, m->bytes);
	if (fd >= 0)
		close(fd);
}

void shmrun_metrics_new_start(struct shmrun_metrics *m, uint64_t restored_epoch, bool restart)
{
	for (uint32_t c = 0; c < m->chans; c++) {
		struct shmrun_metrics_chan *ch = shmrun_metrics_chan(m, c);

		atomic_store_explicit(&ch->tail, 0, memory_order_relaxed);
		atomic_store_explicit(&ch->head, 0, memory_order_relaxed);
	}
	for (uint32_t i = 0; i < m->tasks; i++) {
		struct shmrun_metrics_task *t = shmrun_metrics_task(m, i);

		atomic_store_explicit(&t->parked, 0, memory_order_relaxed);
		atomic_store_explicit(&t->ended, 0, memory_order_relaxed);
	}
	if (restart)
		atomic_fetch_add_explicit(&m->restarts, 1, memory_order_relaxed);
	atomic_store_explicit(&m->restored_epoch, restored_epoch, memory_order_relaxed);
	/* the restored checkpoint is complete too: the newest one is at least it */
	if (restored_epoch > atomic_load_explicit(&m->ckpt_epoch, memory_order_relaxed))
		atomic_store_explicit(&m->ckpt_epoch, restored_epoch, memory_order_relaxed);
	atomic_store_explicit(&m->start_wall_ns, shmrun_wall_ns(), memory_order_relaxed);
	atomic_store_explicit(&m->state, SHMRUN_JOB_RUNNING, memory_order_relaxed);
}

static int bad(char *why, size_t len, int err, const char *fmt, const char *what, uint64_t v)
{
	if (why && len)
		snprintf(why, len, fmt, what, v);
	return err;
}

int shmrun_metrics_check(const struct shmrun_metrics *m, uint64_t len, char *why, size_t why_len)
{
	const char *proto = "metrics block: %s %" PRIu64 " is not this build's (another shmrun "
			    "version wrote it)";
	const char *range = "metrics block: %s %" PRIu64 " lies outside the block";
	struct table {
		uint64_t off, n, size;
		const char *what;
	} tab[4];

	if (len < sizeof(*m))
		return bad(why, why_len, -EINVAL, "metrics block: %s %" PRIu64 " bytes is too short",
			   "size", len);
	if (m->magic != SHMRUN_METRICS_MAGIC)
		return bad(why, why_len, -EPROTO, proto, "magic", m->magic);
	if (m->version != SHMRUN_METRICS_LAYOUT_VERSION)
		return bad(why, why_len, -EPROTO, proto, "layout version", m->version);
	if (m->header_bytes != sizeof(*m) || m->stage_bytes != sizeof(struct shmrun_metrics_stage) ||
	    m->task_bytes != sizeof(struct shmrun_metrics_task) ||
	    m->chan_bytes != sizeof(struct shmrun_metrics_chan) ||
	    m->worker_bytes != sizeof(struct shmrun_metrics_worker) ||
	    m->cacheline != SHMRUN_CACHELINE)
		return bad(why, why_len, -EPROTO, proto, "header size", m->header_bytes);
	if (m->bytes > len)
		return bad(why, why_len, -EINVAL, range, "size", m->bytes);
	tab[0] = (struct table){m->stages_off, m->stages, m->stage_bytes, "stage table at"};
	tab[1] = (struct table){m->tasks_off, m->tasks, m->task_bytes, "task table at"};
	tab[2] = (struct table){m->chans_off, m->chans, m->chan_bytes, "channel table at"};
	tab[3] = (struct table){m->workers_off, m->workers, m->worker_bytes, "worker table at"};
	for (int i = 0; i < 4; i++)
		if (tab[i].off % 64 || tab[i].off < sizeof(*m) || tab[i].off > m->bytes ||
		    tab[i].n > (m->bytes - tab[i].off) / tab[i].size)
			return bad(why, why_len, -EINVAL, range, tab[i].what, tab[i].off);
	for (uint32_t s = 0; s < m->stages; s++) {
		const struct shmrun_metrics_stage *st = shmrun_metrics_stage(m, s);

		if (st->task0 > m->tasks || st->width > m->tasks - st->task0)
			return bad(why, why_len, -EINVAL, range, "stage", s);
	}
	for (uint32_t i = 0; i < m->tasks; i++) {
		const struct shmrun_metrics_task *t = shmrun_metrics_task(m, i);

		if (t->stage >= m->stages || t->worker >= m->workers)
			return bad(why, why_len, -EINVAL, range, "task", i);
	}
	for (uint32_t c = 0; c < m->chans; c++) {
		const struct shmrun_metrics_chan *ch = shmrun_metrics_chan(m, c);

		if (ch->src_task >= m->tasks || ch->dst_task >= m->tasks)
			return bad(why, why_len, -EINVAL, range, "channel", c);
	}
	return 0;
}

const struct shmrun_metrics *shmrun_metrics_map(int fd, char *why, size_t len)
{
	struct stat st;
	void *p;
	int err;

	if (fstat(fd, &st)) {
		if (why && len)
			snprintf(why, len, "metrics block: fstat: %s", strerror(errno));
		return NULL;
	}
	if ((uint64_t)st.st_size < sizeof(struct shmrun_metrics)) {
		bad(why, len, -EINVAL, "metrics block: %s %" PRIu64 " bytes is too short", "size",
		    (uint64_t)st.st_size);
		errno = EINVAL;
		return NULL;
	}
	p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		if (why && len)
			snprintf(why, len, "metrics block: mmap: %s", strerror(errno));
		return NULL;
	}
	err = shmrun_metrics_check(p, (uint64_t)st.st_size, why, len);
	if (err) {
		munmap(p, (size_t)st.st_size);
		errno = -err;
		return NULL;
	}
	return p;
}

void shmrun_metrics_unmap(const struct shmrun_metrics *m)
{
	if (m)
		munmap((void *)m, m->bytes);
}
