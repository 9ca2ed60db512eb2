/*
 * runtime/metrics.h: the live counters of a job, in a shared-memory block
 * that processes outside the job may map read-only (private to runtime/;
 * metrics.c; docs/shm-layout.md "Metrics area" is the reference).
 *
 * What it is for. A running job's numbers — records and bytes per task, time
 * busy, idle and backpressured, ring fill, watermarks, checkpoints, restarts —
 * for `shmrun top`, the Prometheus endpoint, the progress line and the
 * summary file, while the job runs. The idea is Aeron's counters (AeronStat):
 * each number has one writer, which stores it with a relaxed atomic store on
 * a cache line it owns; readers in other processes load it relaxed and never
 * write, so reading costs the data path nothing.
 *
 * The block is a memfd made by the launcher once per invocation (it lives
 * across restarts: counters of tasks and the job keep counting), mapped
 * MAP_SHARED before the first fork so every worker inherits it, and sealed
 * against resizing. A client gets a read-only descriptor of it over the job's
 * socket (jobsock.h) and maps it PROT_READ; it can neither write it nor make
 * the job fault.
 *
 *     +---------------------------+  0
 *     | struct shmrun_metrics     |  layout, job identity, job line, checkpoint line
 *     +---------------------------+  stages_off
 *     | stage 0 … S-1 (128 B)     |  name, operator, width, first task   (static)
 *     +---------------------------+  tasks_off
 *     | task 0 … T-1 (192 B)      |  hot counters | state, source | placement
 *     +---------------------------+  chans_off
 *     | channel 0 … C-1 (128 B)   |  producer line (tail) | consumer line (head)
 *     +---------------------------+  workers_off
 *     | worker 0 … W-1 (64 B)     |  pid, cpu, turns, sleep time, stall
 *     +---------------------------+  bytes
 *
 * "Static" fields are written by shmrun_metrics_create(), before the first
 * fork, and never again. Every other field is atomic and names its one
 * writer; all stores and loads are relaxed: a reader sees each number on its
 * own, possibly a little stale, never torn (8-byte aligned 64-bit atomics).
 * Counters are totals since the launcher started ("_total" in Prometheus):
 * after a restart from a checkpoint the replayed records count again, as in
 * Flink's numRecordsIn.
 *
 * Rejected:
 *  - the counters in the control area: it is MAP_ANONYMOUS (no descriptor to
 *    hand out) and made anew at each restart, and it holds words a reader must
 *    never be able to see mid-protocol (slots, epochs it would misread);
 *  - a per-record counter in shared memory: the worker keeps its counters in
 *    the task (task.h) and publishes them once per loop turn;
 *  - a named file in /dev/shm for readers to open: a killed job would leave
 *    it behind, and its mode would be the only access check.
 */
#ifndef SHMRUN_RT_METRICS_H
#define SHMRUN_RT_METRICS_H

#include <assert.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shmrun/segment.h" /* SHMRUN_CACHELINE */

struct shmrun_plan;

/* "SHMRUNMT" as a little-endian 64-bit word. */
#define SHMRUN_METRICS_MAGIC 0x544d4e55524d4853ull
#define SHMRUN_METRICS_LAYOUT_VERSION 1u

#define SHMRUN_METRICS_NAME_BYTES 64  /* job, stage names: NUL-terminated, cut short */
#define SHMRUN_METRICS_OP_BYTES 32    /* operator names */
#define SHMRUN_METRICS_PATH_BYTES 512 /* the topology file's path */

/* struct shmrun_metrics.state: where the job is (written by the launcher) */
enum shmrun_metrics_state {
	SHMRUN_JOB_STARTING = 0,   /* before the first start's workers run */
	SHMRUN_JOB_RUNNING = 1,    /* workers running */
	SHMRUN_JOB_STOPPING = 2,   /* a stop was requested: final checkpoint under way */
	SHMRUN_JOB_RESTARTING = 3, /* a start failed; backoff before the next one */
	SHMRUN_JOB_DONE = 4,       /* every worker ended well (end of input or stop) */
	SHMRUN_JOB_FAILED = 5,     /* the run failed and will not restart */
};

/* One stage (static). */
struct shmrun_metrics_stage {
	char name[SHMRUN_METRICS_NAME_BYTES]; /* the section name */
	char op[SHMRUN_METRICS_OP_BYTES];     /* the operator's name */
	uint32_t width;                       /* instances */
	uint32_t task0;                       /* task index of instance 0; instance i is task0 + i */
	uint32_t flags;                       /* the operator's SHMRUN_OP_* flags */
	uint32_t reserved[5];
} __attribute__((aligned(64)));

/*
 * One task (a stage instance). Lines 0 and 1 are written by the worker that
 * runs the task, once per loop turn that did work (line 0) or on change
 * (line 1), relaxed; line 2 is static.
 */
struct shmrun_metrics_task {
	/* line 0: the hot counters, totals since the launcher started */
	alignas(SHMRUN_CACHELINE) _Atomic uint64_t records_in; /* records received (sources: made) */
	_Atomic uint64_t records_out;     /* records emitted */
	_Atomic uint64_t bytes_in;        /* key + value bytes received (sources: bytes read) */
	_Atomic uint64_t bytes_out;       /* key + value bytes emitted */
	_Atomic uint64_t busy_ns;         /* time inside this task's callbacks and delivery */
	_Atomic uint64_t idle_ns;         /* time the worker spent elsewhere or asleep, not parked */
	_Atomic uint64_t backpressure_ns; /* time parked: an output channel was full */
	_Atomic int64_t watermark;        /* the task's watermark, ns since the Unix epoch;
					     INT64_MIN none yet, INT64_MAX end of input */
	/* line 1: slower-moving numbers */
	alignas(SHMRUN_CACHELINE) _Atomic uint64_t state_bytes; /* key-bound state now, bytes */
	_Atomic uint64_t keys;            /* distinct keys in key-bound state now */
	_Atomic uint64_t records_bad;     /* records dropped as malformed */
	_Atomic uint64_t records_late;    /* records dropped as late */
	_Atomic uint64_t source_pos;      /* file sources: bytes of input read so far */
	_Atomic uint64_t source_total;    /* file sources: bytes of input to read, 0 unknown */
	_Atomic uint32_t parked;          /* 1 while backpressured (an output is full) */
	_Atomic uint32_t ended;           /* 1 once the task ended (end of input or stop) */
	uint64_t reserved1;
	/* line 2: placement (static) */
	alignas(SHMRUN_CACHELINE) uint32_t stage; /* index into the stage table */
	uint32_t instance;                        /* 0 … width-1 */
	uint32_t worker;                          /* index into the worker table */
	int32_t cpu;                              /* the worker's CPU */
	uint32_t vnode_lo, vnode_hi;              /* its vnode range [lo, hi) */
	uint32_t reserved2[10];
};

/*
 * One ring channel (a producer task, a consumer task). fill = tail - head
 * bytes of capacity, both ring positions of the current start; the launcher
 * zeroes both before each start (no worker runs then).
 */
struct shmrun_metrics_chan {
	/* line 0: static, then the producer's worker */
	alignas(SHMRUN_CACHELINE) uint32_t src_task; /* producer task index (static) */
	uint32_t dst_task;                            /* consumer task index (static) */
	uint64_t capacity;                                      /* ring data bytes (static) */
	_Atomic uint64_t tail;            /* producer: end of published frames, bytes */
	_Atomic uint64_t frames;          /* producer: frames put, totals since launch */
	_Atomic uint64_t overflow_frames; /* producer: of which found the ring full */
	uint64_t reserved0[3];
	/* line 1: the consumer's worker */
	alignas(SHMRUN_CACHELINE) _Atomic uint64_t head; /* consumer: end of released bytes */
	uint64_t reserved1[7];
};

/* One worker: its own line, written by the worker (pid, cpu: the launcher at fork). */
struct shmrun_metrics_worker {
	alignas(SHMRUN_CACHELINE) _Atomic int32_t pid; /* launcher, at each fork; 0 when exited */
	int32_t cpu;                                    /* static */
	_Atomic uint64_t turns;          /* loop turns, totals */
	_Atomic uint64_t sleep_ns;       /* time asleep in the idle phase */
	_Atomic uint64_t stall_last_ns;  /* its last checkpoint stall (snapshot), ns */
	_Atomic uint64_t stall_max_ns;   /* its largest checkpoint stall, ns */
	_Atomic uint64_t snapshots;      /* snapshots taken, totals */
	_Atomic uint64_t heartbeat_ns;   /* CLOCK_REALTIME of its last published turn */
	uint64_t reserved;
};

/* The header. */
struct shmrun_metrics {
	/* line 0 on: the layout (static) */
	uint64_t magic;                  /* SHMRUN_METRICS_MAGIC */
	uint32_t version;                /* SHMRUN_METRICS_LAYOUT_VERSION */
	uint32_t header_bytes;           /* sizeof(struct shmrun_metrics) */
	uint32_t stage_bytes, task_bytes, chan_bytes, worker_bytes; /* entry sizes */
	uint32_t stages, tasks, chans, workers;                      /* entry counts */
	uint64_t stages_off, tasks_off, chans_off, workers_off;      /* from the base */
	uint64_t bytes;                  /* of the whole block */
	uint32_t cacheline;              /* SHMRUN_CACHELINE */
	int32_t launcher_pid;            /* the launcher's pid */
	int64_t started_wall_ns;         /* CLOCK_REALTIME when the launcher made the block */
	uint64_t checkpoint_interval_ns; /* [job] checkpoint_interval; 0 without checkpoint_dir */
	char job[SHMRUN_METRICS_NAME_BYTES];       /* [job] name */
	char conf_path[SHMRUN_METRICS_PATH_BYTES]; /* the topology file as given */

	/* the job line: written by the launcher */
	alignas(SHMRUN_CACHELINE) _Atomic uint32_t state; /* enum shmrun_metrics_state */
	_Atomic int32_t exit_status;       /* once DONE or FAILED: the exit status */
	_Atomic uint64_t restarts;         /* starts after the first */
	_Atomic uint64_t restored_epoch;   /* the checkpoint the current start restored, 0 none */
	_Atomic int64_t start_wall_ns;     /* CLOCK_REALTIME of the current start */
	_Atomic uint64_t input_bytes;      /* bytes of every file source's input, 0 unknown */
	/* multi-host ([job] hosts > 1): static, set before the first fork. The
	 * block counts this host's workers only: worker w (global numbering) is
	 * this host's iff w / workers_per_host == host (shmrun_metrics_here()).
	 * Once reserved words: 0 in both reads as one host. */
	uint32_t hosts, host;              /* 0 or 1: one host */
	uint32_t workers_per_host, reserved_u32;
	uint64_t reserved_job;

	/* the checkpoint line: written by worker 0 (the coordinator) */
	alignas(SHMRUN_CACHELINE) _Atomic uint64_t ckpt_epoch; /* newest complete epoch, 0 none */
	_Atomic uint64_t ckpt_completed;   /* checkpoints completed, totals */
	_Atomic uint64_t ckpt_aborted;     /* checkpoints given up, totals */
	_Atomic uint64_t ckpt_duration_ns; /* the newest one's, trigger to durable MANIFEST */
	_Atomic uint64_t ckpt_bytes;       /* the newest one's state files, bytes */
	_Atomic int64_t ckpt_wall_ns;      /* CLOCK_REALTIME when the newest one completed */
	_Atomic uint64_t ckpt_in_flight;   /* epoch being taken now, 0 none */
	uint64_t reserved_ckpt;
} __attribute__((aligned(64)));

/* Whether worker @w (global) runs on the host whose block @m is: always with one host. */
static inline bool shmrun_metrics_here(const struct shmrun_metrics *m, uint32_t w)
{
	return m->hosts <= 1 || !m->workers_per_host || w / m->workers_per_host == m->host;
}

static_assert(sizeof(struct shmrun_metrics_stage) == 128, "metrics stage layout");
static_assert(sizeof(struct shmrun_metrics_task) == 192, "metrics task layout");
static_assert(offsetof(struct shmrun_metrics_task, state_bytes) == 64, "metrics task line 1");
static_assert(offsetof(struct shmrun_metrics_task, stage) == 128, "metrics task line 2");
static_assert(sizeof(struct shmrun_metrics_chan) == 128, "metrics channel layout");
static_assert(offsetof(struct shmrun_metrics_chan, head) == 64, "metrics channel line 1");
static_assert(sizeof(struct shmrun_metrics_worker) == 64, "metrics worker layout");
static_assert(offsetof(struct shmrun_metrics, conf_path) == 176, "metrics header layout");
static_assert(offsetof(struct shmrun_metrics, state) == 704, "metrics job line");
static_assert(offsetof(struct shmrun_metrics, ckpt_epoch) == 768, "metrics checkpoint line");
static_assert(sizeof(struct shmrun_metrics) == 832, "metrics header layout");

/* Entry @i of each table; no check (shmrun_metrics_check() validated the offsets). */
static inline const struct shmrun_metrics_stage *shmrun_metrics_stage(const struct shmrun_metrics *m,
								      uint32_t i)
{
	return (const struct shmrun_metrics_stage *)((const unsigned char *)m + m->stages_off) + i;
}

static inline struct shmrun_metrics_task *shmrun_metrics_task(const struct shmrun_metrics *m,
							      uint32_t i)
{
	return (struct shmrun_metrics_task *)((const unsigned char *)m + m->tasks_off) + i;
}

static inline struct shmrun_metrics_chan *shmrun_metrics_chan(const struct shmrun_metrics *m,
							      uint32_t i)
{
	return (struct shmrun_metrics_chan *)((const unsigned char *)m + m->chans_off) + i;
}

static inline struct shmrun_metrics_worker *shmrun_metrics_worker(const struct shmrun_metrics *m,
								  uint32_t i)
{
	return (struct shmrun_metrics_worker *)((const unsigned char *)m + m->workers_off) + i;
}

/* A relaxed load of a counter: what every reader uses. */
#define SHMRUN_METRIC(field) atomic_load_explicit(&(field), memory_order_relaxed)

/*
 * shmrun_run_metrics - the metrics block of the run this process belongs to:
 * set by the launcher (shmrun_run()) before it forks, so its workers inherit
 * it; NULL outside a run (the launcher's prepare, `shmrun check`, unit tests)
 * and with SHMRUN_COUNTERS=off in the environment (which benchmarks use to
 * measure what the counters cost): then nothing is published.
 */
extern struct shmrun_metrics *shmrun_run_metrics;

/*
 * shmrun_metrics_memsize() - bytes of a metrics block for @stages stages,
 * @tasks tasks, @chans ring channels and @workers workers (header rounded up
 * to 64, then the tables). Return: the size, a multiple of 64; 0 if a count
 * is above the control area's maximum (SHMRUN_CONTROL_MAX_TASKS for stages,
 * tasks and channels/64, SHMRUN_CONTROL_MAX_WORKERS).
 */
uint64_t shmrun_metrics_memsize(uint32_t stages, uint32_t tasks, uint32_t chans, uint32_t workers);

/*
 * shmrun_metrics_create() - make the metrics block of a run of @plan: a
 * memfd ("shmrun-metrics", MFD_CLOEXEC | MFD_ALLOW_SEALING) of
 * shmrun_metrics_memsize() bytes, sealed against growing and shrinking,
 * mapped MAP_SHARED read-write, with the layout, the job's identity and every
 * static table written from @plan. Counters start at 0, watermarks at
 * INT64_MIN, state at SHMRUN_JOB_STARTING.
 * @plan: the run's plan (read only).
 * @fd:   receives the memfd, owned by the caller (close it with
 *        shmrun_metrics_destroy()); jobsock.c hands out read-only copies.
 * Return: the block, owned by the caller; NULL with errno set (ENOMEM, EMFILE,
 * or what memfd_create(), ftruncate() or mmap() failed with).
 */
struct shmrun_metrics *shmrun_metrics_create(const struct shmrun_plan *plan, int *fd);

/*
 * shmrun_metrics_destroy() - unmap @m (of shmrun_metrics_create(), or NULL)
 * and close @fd (or -1). Workers keep their inherited mappings until they exit.
 */
void shmrun_metrics_destroy(struct shmrun_metrics *m, int fd);

/*
 * shmrun_metrics_new_start() - the launcher, before it forks the workers of
 * a start: every channel's tail and head back to 0 (the new segment's rings
 * start there), every task's parked and ended to 0, restarts counted (from
 * the second start on), @restored_epoch and the start time stored, state
 * RUNNING. No worker runs when it is called.
 */
void shmrun_metrics_new_start(struct shmrun_metrics *m, uint64_t restored_epoch, bool restart);

/*
 * shmrun_metrics_map() - map a metrics block from a descriptor (from
 * jobsock_metrics_fd()) read-only and check it as shmrun_metrics_check() does.
 * @fd:  a descriptor of the block, opened read-only; not closed here.
 * @why: receives a one-line reason on failure, may be NULL; @len its size.
 * Return: the mapping (unmap with shmrun_metrics_unmap()); NULL on failure,
 * errno EPROTO (another layout or version: a reader of another build), EINVAL
 * (too short, offsets outside the block) or what fstat() or mmap() failed with.
 */
const struct shmrun_metrics *shmrun_metrics_map(int fd, char *why, size_t len);

/* shmrun_metrics_unmap() - unmap a block of shmrun_metrics_map(), or NULL. */
void shmrun_metrics_unmap(const struct shmrun_metrics *m);

/*
 * shmrun_metrics_check() - whether the @len bytes at @m are a metrics block
 * this build can read: magic, version, entry sizes and cache line are this
 * build's, every table lies inside @len bytes and at its 64-aligned offset,
 * and every task's stage, worker and every channel's tasks are in range.
 * Return: 0; -EPROTO (magic, version, sizes) or -EINVAL (bounds), with a
 * one-line reason in @why (may be NULL; @why_len its size).
 */
int shmrun_metrics_check(const struct shmrun_metrics *m, uint64_t len, char *why, size_t why_len);

#endif /* SHMRUN_RT_METRICS_H */
