/*
 * tools/bench/bench_checkpoint.c: the `checkpoint` subcommand — how fast
 * shmrun's snapshot writers make key-bound state durable, how long a
 * checkpoint stops a worker, and plain O_DIRECT io_uring writes to the same
 * directory as the reference.
 *
 * The job. Two workers run
 *
 *     src (sequence, width 2) -> count (by key, emit = final, width 2) -> out (null_sink, width 2)
 *
 * with keys = 27000 per MB of --state-mb per worker (a key "k1234567" costs
 * ~37 bytes of key-bound state: 8-byte entry header, 8-byte count, the key
 * padded to 8, and an 8-byte slot at load <= 3/4 — so 100 MB is 2.7 M keys per
 * worker) and count = 6 x keys records, so the state is full after the first
 * sixth of the run and about ten checkpoints (checkpoint_interval = 1s) are
 * taken with the full state while records keep flowing. Each repetition gets
 * a fresh checkpoint_dir (no restore).
 *
 * What is measured, from outside the runtime. The bench watches the
 * checkpoint directory with inotify and timestamps (CLOCK_MONOTONIC, when the
 * event is read) the creation of every ckpt-<e>/ directory, the creation and
 * the close of every file in it, and the rename of MANIFEST into place; at
 * that rename it reads the MANIFEST for every file's size and key-bound bytes.
 * The runtime's writer creates a state file, writes it (io_uring, buffered),
 * fsyncs it and closes it (runtime/ckpt_io.c write_segments()), so a file's
 * create-to-close interval is its write + fsync. For one epoch:
 *
 *     write window  = union of the create..close intervals of the files that
 *                     hold key-bound state (the two count.<i>.state files; the
 *                     two writers run in parallel)
 *     write GB/s    = their bytes / write window          (10^9 bytes)
 *     end to end    = ckpt-<e>/ created (the first snapshot child, at the
 *                     sources' barrier) .. MANIFEST renamed: barrier travel,
 *                     fork, serialising the state, write, fsync, MANIFEST
 *
 * Only epochs whose key-bound state is >= 90% of the run's largest count, and
 * not the final epoch (taken after end of input, when the workers are idle);
 * a run's figure is the median of its epochs' (one slow epoch on a shared
 * disk does not sink it; the total bytes over the total window is printed
 * too). Timestamps
 * are late by the bench's wake-up latency; to bound it, each state file's
 * birth time (statx btime) is compared with the time its creation event was
 * read, and the worst lag is printed — against windows of a hundred
 * milliseconds or more. A runtime log of per-snapshot serialise/write/fsync
 * times would make this exact; the runtime has none today.
 *
 * Stalls are the launcher's own figures: it logs "checkpoint stalls: N
 * snapshots, p50 X ms, p99 Y ms, max Z ms (worst worker)" when the job ends;
 * a stall there is operator snapshot() + fork() in the worker (worker.c
 * task_snapshot()). It does not include the copy-on-write faults the worker
 * takes afterwards while the snapshot child still shares its pages; the
 * "throughput" '#' line (the same job without checkpoints, run once) shows
 * what checkpointing costs in all.
 *
 * The reference, run right after each job into the same directory (same file
 * system): one new file, O_CREAT | O_EXCL | O_DIRECT, written front to back in
 * 1 MiB writes through io_uring with 16 in flight (IORING_OP_WRITE from 16
 * page-aligned buffers filled with random bytes), then fsync(); the bytes are
 * the mean key-bound bytes per measured epoch, rounded up to 1 MiB; timed from
 * open() to the end of fsync(). If the file system refuses O_DIRECT (EINVAL)
 * the reference is buffered writes + fsync, and a '#' line says so. Every
 * figure is the best of --reps repetitions (job and reference interleaved).
 *
 * Checks (every run): the job exits 0; the launcher's records in and distinct
 * keys equal count and keys; `shmrun ckpt verify` accepts the checkpoint
 * directory; at least one epoch carried key-bound state. With --quick the
 * reference file is also read back and compared.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <liburing.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#define CK_WORKERS	 2
#define CK_KEYS_PER_MB	 27000 /* per worker */
#define CK_PASSES	 6     /* records = CK_PASSES x keys */
#define CK_DEFAULT_MB	 100
#define CK_QUICK_MB	 4
#define CK_RUN_TIMEOUT_S 600.0
#define CK_FULL_STATE	 0.9 /* an epoch counts if its state >= 90% of the largest */
#define CK_MAX_FILES	 16
#define CK_REF_BLOCK	 (1u << 20)
#define CK_REF_DEPTH	 16

/* Targets from issue 4 items 4 and 11. */
#define TARGET_RATIO	0.8
#define TARGET_STALL_MS 10.0

static const char ck_usage_text[] =
    "Usage: shmrun-bench checkpoint [--state-mb N] [--dir DIR] [--reps N] [--quick] [-v]\n"
    "\n"
    "Runs a checkpointed job (sequence -> count by key -> null_sink, 2 workers) whose\n"
    "key-bound state is about N MB per worker, measures how fast its snapshot writers\n"
    "make each checkpoint durable and the launcher's stall percentiles, and in the\n"
    "same run writes as many bytes to the same directory with O_DIRECT io_uring.\n"
    "\n"
    "  --state-mb N  key-bound state per worker in MB (10^6 bytes; default 100)\n"
    "  --dir DIR     work in a new directory under DIR and keep it: topologies,\n"
    "                logs, checkpoints (default: a temporary directory under\n"
    "                $TMPDIR, else under the build directory, removed at the end;\n"
    "                the reference's file is always removed)\n"
    "  --reps N      repetitions, the best is reported (default 3)\n"
    "  --quick       4 MB, one repetition: a correctness smoke test (ctest)\n"
    "  -v            print every repetition and every measured epoch as '#' lines\n"
    "\n"
    "Output:\n"
    "  checkpoint state_mb=N write_gb_s=F stall_ms_p50=F stall_ms_p99=F\n"
    "  reference odirect_gb_s=F\n"
    "  ratio write_vs_odirect=F\n"
    "Exit status: 0 ok (targets are reported, not enforced), 1 a run or a check\n"
    "failed, 2 usage error.\n";

/* ---- what inotify saw ---------------------------------------------------- */

struct ck_file {
	char name[64];
	int64_t t_create, t_close; /* 0 = not seen */
	uint64_t size, kv;	   /* from the MANIFEST */
};

struct ck_epoch {
	uint64_t epoch;
	int wd;
	int64_t t_dir, t_manifest; /* 0 = not seen */
	bool manifest_ok;	   /* MANIFEST read and parsed */
	struct ck_file files[CK_MAX_FILES];
	unsigned nfiles;
};

struct ck_monitor {
	int fd, root_wd;
	const char *root; /* the checkpoint_dir */
	struct ck_epoch *ep;
	size_t n, cap;
	bool overflow, lost;	 /* queue overflow; a file or watch we could not follow */
	int64_t real_minus_mono; /* CLOCK_REALTIME - CLOCK_MONOTONIC, ns */
	int64_t lag_max_ns;	 /* largest event time - birth time (statx) seen */
	uint64_t lag_n;		 /* files whose birth time could be read */
};

/* CLOCK_REALTIME - CLOCK_MONOTONIC, to put file times on the event clock. */
static int64_t real_minus_mono(void)
{
	struct timespec r;
	int64_t m = bench_now_ns();

	clock_gettime(CLOCK_REALTIME, &r);
	return (int64_t)r.tv_sec * 1000000000 + r.tv_nsec - m;
}

/*
 * How late the event of @name's creation was read: now - its birth time
 * (statx btime, from the kernel's coarse clock: up to a tick early, so this
 * is an upper bound).
 */
static void ck_note_lag(struct ck_monitor *m, const struct ck_epoch *e, const char *name,
			int64_t now)
{
	char path[PATH_MAX];
	struct statx stx;
	int64_t born, lag;

	if (bench_pathf(path, sizeof(path), "%s/ckpt-%" PRIu64 "/%s", m->root, e->epoch, name) ||
	    statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_BTIME, &stx) ||
	    !(stx.stx_mask & STATX_BTIME))
		return;
	born =
	    (int64_t)stx.stx_btime.tv_sec * 1000000000 + stx.stx_btime.tv_nsec - m->real_minus_mono;
	lag = now - born;
	if (lag > m->lag_max_ns)
		m->lag_max_ns = lag;
	m->lag_n++;
}

static struct ck_epoch *ck_epoch_by_wd(struct ck_monitor *m, int wd)
{
	for (size_t i = m->n; i-- > 0;)
		if (m->ep[i].wd == wd)
			return &m->ep[i];
	return NULL;
}

static struct ck_file *ck_file_get(struct ck_monitor *m, struct ck_epoch *e, const char *name,
				   bool create)
{
	for (unsigned i = 0; i < e->nfiles; i++)
		if (!strcmp(e->files[i].name, name))
			return &e->files[i];
	if (!create)
		return NULL;
	if (e->nfiles == CK_MAX_FILES || strlen(name) >= sizeof(e->files[0].name)) {
		m->lost = true;
		return NULL;
	}
	memset(&e->files[e->nfiles], 0, sizeof(e->files[0]));
	strcpy(e->files[e->nfiles].name, name);
	return &e->files[e->nfiles++];
}

/* Read ckpt-<e>/MANIFEST: size and key-bound bytes of every file. */
static void ck_read_manifest(struct ck_monitor *m, struct ck_epoch *e)
{
	char path[PATH_MAX], *text = NULL, *line, *save = NULL;
	size_t len;

	if (bench_pathf(path, sizeof(path), "%s/ckpt-%" PRIu64 "/MANIFEST", m->root, e->epoch) ||
	    bench_read_text(path, &text, &len)) {
		m->lost = true;
		return;
	}
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char name[64];
		uint64_t size, kv;
		struct ck_file *f;

		if (sscanf(line, "file %63s %" SCNu64 " %*s %" SCNu64, name, &size, &kv) != 3)
			continue;
		f = ck_file_get(m, e, name, true);
		if (f) {
			f->size = size;
			f->kv = kv;
		}
	}
	free(text);
	e->manifest_ok = true;
}

/* inotify is readable: take every queued event. */
static void ck_monitor_read(void *arg)
{
	struct ck_monitor *m = arg;
	char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));

	for (;;) {
		ssize_t n = read(m->fd, buf, sizeof(buf));
		int64_t now = bench_now_ns();

		if (n <= 0)
			return; /* EAGAIN: drained */
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const void *)p;
			struct ck_epoch *e;
			struct ck_file *f;

			p += sizeof(*ev) + ev->len;
			if (ev->mask & IN_Q_OVERFLOW) {
				m->overflow = true;
				continue;
			}
			if (!ev->len)
				continue;
			if (ev->wd == m->root_wd) {
				char path[PATH_MAX];
				uint64_t epoch;
				char *end;

				if (!(ev->mask & IN_CREATE) || !(ev->mask & IN_ISDIR) ||
				    strncmp(ev->name, "ckpt-", 5))
					continue;
				epoch = strtoull(ev->name + 5, &end, 10);
				if (*end)
					continue;
				if (m->n == m->cap) {
					size_t ncap = m->cap ? m->cap * 2 : 64;
					struct ck_epoch *ne = realloc(m->ep, ncap * sizeof(*ne));

					if (!ne) {
						m->lost = true;
						continue;
					}
					m->ep = ne;
					m->cap = ncap;
				}
				e = &m->ep[m->n];
				memset(e, 0, sizeof(*e));
				e->epoch = epoch;
				e->t_dir = now;
				e->wd = -1;
				if (!bench_pathf(path, sizeof(path), "%s/%s", m->root, ev->name))
					e->wd = inotify_add_watch(m->fd, path,
								  IN_CREATE | IN_CLOSE_WRITE |
								      IN_MOVED_TO | IN_ONLYDIR);
				if (e->wd < 0)
					m->lost = true; /* removed already (aborted) or no watch */
				m->n++;
				continue;
			}
			e = ck_epoch_by_wd(m, ev->wd);
			if (!e || (ev->mask & IN_ISDIR))
				continue;
			if ((ev->mask & IN_MOVED_TO) && !strcmp(ev->name, "MANIFEST")) {
				e->t_manifest = now;
				ck_read_manifest(m, e);
			} else if (ev->mask & IN_CREATE) {
				f = ck_file_get(m, e, ev->name, true);
				if (f)
					f->t_create = now;
				if (f && strncmp(ev->name, "MANIFEST", 8))
					ck_note_lag(m, e, ev->name, now);
			} else if (ev->mask & IN_CLOSE_WRITE) {
				f = ck_file_get(m, e, ev->name, false);
				if (f && !f->t_close)
					f->t_close = now;
			}
		}
	}
}

/* ---- per epoch and per run figures ---------------------------------------- */

struct ck_epoch_fig {
	uint64_t bytes;	  /* key-bound state files of the epoch, on disk */
	int64_t write_ns; /* union of their create..close intervals */
	int64_t e2e_ns;	  /* ckpt-<e>/ created .. MANIFEST renamed */
	int64_t prep_ns;  /* ckpt-<e>/ created .. the first state file created */
};

static int cmp_interval(const void *a, const void *b)
{
	const int64_t *x = a, *y = b;

	return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Figures of @e; false if its key-bound files were not all followed. */
static bool ck_epoch_figures(const struct ck_epoch *e, struct ck_epoch_fig *fig)
{
	int64_t iv[CK_MAX_FILES][2], end = 0;
	unsigned n = 0;

	memset(fig, 0, sizeof(*fig));
	if (!e->manifest_ok || !e->t_dir || !e->t_manifest)
		return false;
	for (unsigned i = 0; i < e->nfiles; i++) {
		const struct ck_file *f = &e->files[i];

		if (!f->kv)
			continue;
		if (!f->t_create || !f->t_close || f->t_close < f->t_create)
			return false;
		iv[n][0] = f->t_create;
		iv[n][1] = f->t_close;
		fig->bytes += f->size;
		n++;
	}
	if (!n)
		return false;
	qsort(iv, n, sizeof(iv[0]), cmp_interval);
	for (unsigned i = 0; i < n; i++) {
		int64_t s = iv[i][0] > end ? iv[i][0] : end;

		if (iv[i][1] > s)
			fig->write_ns += iv[i][1] - s;
		if (iv[i][1] > end)
			end = iv[i][1];
	}
	fig->e2e_ns = e->t_manifest - e->t_dir;
	fig->prep_ns = iv[0][0] - e->t_dir;
	return fig->write_ns > 0;
}

struct ck_run {
	unsigned epochs, measured; /* checkpoints completed; measured ones */
	uint64_t bytes;		   /* measured epochs, total */
	int64_t write_ns, e2e_ns, prep_ns;
	double write_med, e2e_med;     /* GB/s, median over the measured epochs */
	uint64_t max_kv;	       /* largest key-bound bytes of one epoch (MANIFEST) */
	double p50_ms, p99_ms, max_ms; /* stalls, from the launcher */
	uint64_t snapshots;
	uint64_t records_in, keys, state_bytes; /* from the launcher */
	int64_t lag_max_ns;			/* inotify lag bound (ck_note_lag) */
	uint64_t lag_n;
	double job_s; /* the launcher's "done in" */
};

static uint64_t ck_kv_of(const struct ck_epoch *e)
{
	uint64_t kv = 0;

	for (unsigned i = 0; i < e->nfiles; i++)
		kv += e->files[i].kv;
	return kv;
}

/* Bytes per second of @bytes in @ns. */
static uint64_t ck_rate(uint64_t bytes, int64_t ns)
{
	return ns > 0 ? (uint64_t)((double)bytes * 1e9 / (double)ns) : 0;
}

static int ck_summarise(struct ck_monitor *m, struct ck_run *run, bool verbose, unsigned rep)
{
	uint64_t *wr = calloc(m->n + 1, sizeof(*wr)), *er = calloc(m->n + 1, sizeof(*er));
	size_t last = 0;
	bool any_last_only = false;

	if (!wr || !er) {
		free(wr);
		free(er);
		fprintf(stderr, "shmrun-bench: out of memory\n");
		return -1;
	}
	for (size_t i = 0; i < m->n; i++) {
		if (!m->ep[i].manifest_ok)
			continue;
		run->epochs++;
		if (ck_kv_of(&m->ep[i]) > run->max_kv)
			run->max_kv = ck_kv_of(&m->ep[i]);
		if (m->ep[i].epoch >= m->ep[last].epoch || !m->ep[last].manifest_ok)
			last = i;
	}
	/* Two passes: without the final epoch; if that leaves none (tiny runs), with it. */
	for (int pass = 0; pass < 2 && !run->measured; pass++) {
		for (size_t i = 0; i < m->n; i++) {
			const struct ck_epoch *e = &m->ep[i];
			struct ck_epoch_fig fig;

			if (!e->manifest_ok || (pass == 0 && i == last) ||
			    (double)ck_kv_of(e) < CK_FULL_STATE * (double)run->max_kv ||
			    !ck_epoch_figures(e, &fig))
				continue;
			wr[run->measured] = ck_rate(fig.bytes, fig.write_ns);
			er[run->measured] = ck_rate(fig.bytes, fig.e2e_ns);
			run->measured++;
			run->bytes += fig.bytes;
			run->write_ns += fig.write_ns;
			run->e2e_ns += fig.e2e_ns;
			run->prep_ns += fig.prep_ns;
			if (verbose)
				printf("# rep %u epoch %" PRIu64 ": %.1f MB of state files, dir to "
				       "first state file %.0f ms, write+fsync %.0f ms (%.3f GB/s), "
				       "dir to MANIFEST %.0f ms\n",
				       rep, e->epoch, (double)fig.bytes / 1e6,
				       (double)fig.prep_ns / 1e6, (double)fig.write_ns / 1e6,
				       (double)fig.bytes / (double)fig.write_ns,
				       (double)fig.e2e_ns / 1e6);
		}
		any_last_only = pass == 1;
	}
	if (any_last_only && run->measured)
		printf("# rep %u: only the final checkpoint could be measured\n", rep);
	bench_sort_u64(wr, run->measured);
	bench_sort_u64(er, run->measured);
	run->write_med = (double)bench_percentile_sorted(wr, run->measured, 0.5) / 1e9;
	run->e2e_med = (double)bench_percentile_sorted(er, run->measured, 0.5) / 1e9;
	free(wr);
	free(er);
	return 0;
}

/* ---- the launcher's log ---------------------------------------------------- */

static int ck_parse_log(const char *log_path, struct ck_run *run)
{
	char *text = NULL, *p;
	size_t len;
	int found = 0;

	if (bench_read_text(log_path, &text, &len))
		return -1;
	p = strstr(text, "checkpoint stalls: ");
	if (p && sscanf(p,
			"checkpoint stalls: %" SCNu64 " snapshots, p50 %lf ms, p99 %lf ms, "
			"max %lf ms",
			&run->snapshots, &run->p50_ms, &run->p99_ms, &run->max_ms) == 4)
		found |= 1;
	p = strstr(text, " done in ");
	if (p &&
	    sscanf(p, " done in %lf s: records in %" SCNu64, &run->job_s, &run->records_in) == 2)
		found |= 2;
	p = strstr(text, "distinct keys ");
	if (p && sscanf(p, "distinct keys %" SCNu64 ", key-bound state %" SCNu64, &run->keys,
			&run->state_bytes) == 2)
		found |= 4;
	free(text);
	if (found != 7) {
		fprintf(stderr, "shmrun-bench: %s lacks the launcher's %s line\n", log_path,
			!(found & 1) ? "\"checkpoint stalls:\"" : "\"done in\"");
		return -1;
	}
	return 0;
}

/* ---- the reference: O_DIRECT io_uring writes ------------------------------ */

static uint64_t xorshift(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* Block @i's bytes: the same random MiB in every buffer, @i in its first 8 bytes. */
static void ref_stamp(unsigned char *blk, uint64_t i)
{
	memcpy(blk, &i, sizeof(i));
}

struct ref_io {
	unsigned char *buf[CK_REF_DEPTH];
	struct io_uring ring;
	bool ring_ok;
};

static void ref_free(struct ref_io *r)
{
	if (r->ring_ok)
		io_uring_queue_exit(&r->ring);
	for (unsigned i = 0; i < CK_REF_DEPTH; i++)
		free(r->buf[i]);
	memset(r, 0, sizeof(*r));
}

static int ref_init(struct ref_io *r)
{
	uint64_t x = 0x2545f4914f6cdd1dull;
	int err;

	memset(r, 0, sizeof(*r));
	for (unsigned i = 0; i < CK_REF_DEPTH; i++) {
		r->buf[i] = aligned_alloc(4096, CK_REF_BLOCK);
		if (!r->buf[i]) {
			fprintf(stderr, "shmrun-bench: reference buffers: out of memory\n");
			ref_free(r);
			return -1;
		}
		if (i) {
			memcpy(r->buf[i], r->buf[0], CK_REF_BLOCK);
			continue;
		}
		for (size_t k = 0; k < CK_REF_BLOCK / 8; k++) {
			uint64_t w = xorshift(&x); /* not compressible */

			memcpy(r->buf[0] + k * 8, &w, 8);
		}
	}
	err = io_uring_queue_init(CK_REF_DEPTH * 2, &r->ring, 0);
	if (err) {
		fprintf(stderr,
			"shmrun-bench: io_uring_queue_init: %s; the reference needs "
			"io_uring\n",
			strerror(-err));
		ref_free(r);
		return -1;
	}
	r->ring_ok = true;
	return 0;
}

/*
 * Write @blocks 1 MiB blocks to the new file @path, with O_DIRECT if @direct,
 * CK_REF_DEPTH in flight, then fsync(). @ns: open() to the end of fsync().
 * Return: 0; -EINVAL if O_DIRECT was refused (the file is removed); -1 after
 * printing the error. Nothing is in flight when it returns.
 */
static int ref_write(struct ref_io *r, const char *path, uint64_t blocks, bool direct, int64_t *ns)
{
	enum { FREE, READY, INFLIGHT };
	struct {
		int state;
		uint64_t blk;
		uint32_t done;
	} s[CK_REF_DEPTH] = {{0}};
	uint64_t next = 0, written = 0;
	unsigned inflight = 0, queued = 0;
	bool broken = false;
	int64_t t0;
	int fd, err = 0;

	unlink(path);
	t0 = bench_now_ns();
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | (direct ? O_DIRECT : 0), 0644);
	if (fd < 0) {
		if (direct && errno == EINVAL)
			return -EINVAL;
		fprintf(stderr, "shmrun-bench: cannot create %s: %s\n", path, strerror(errno));
		return -1;
	}
	while (written < blocks && !err) {
		struct io_uring_cqe *cqe;
		int ret;

		/* Every free buffer takes the next block; every ready one is queued. */
		for (unsigned i = 0; i < CK_REF_DEPTH; i++) {
			struct io_uring_sqe *sqe;

			if (s[i].state == FREE && next < blocks) {
				s[i].state = READY;
				s[i].blk = next++;
				s[i].done = 0;
				ref_stamp(r->buf[i], s[i].blk);
			}
			if (s[i].state != READY)
				continue;
			sqe = io_uring_get_sqe(&r->ring);
			if (!sqe)
				break;
			io_uring_prep_write(sqe, fd, r->buf[i] + s[i].done,
					    CK_REF_BLOCK - s[i].done,
					    s[i].blk * CK_REF_BLOCK + s[i].done);
			io_uring_sqe_set_data64(sqe, i);
			s[i].state = INFLIGHT;
			queued++;
		}
		if (queued) {
			ret = io_uring_submit(&r->ring);
			if (ret > 0) {
				inflight += (unsigned)ret;
				queued -= (unsigned)ret;
			} else if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY) {
				err = ret;
				broken = true;
				break;
			}
		}
		if (!inflight)
			continue;
		ret = io_uring_wait_cqe(&r->ring, &cqe);
		if (ret == -EINTR)
			continue;
		if (ret) {
			err = ret;
			broken = true;
			break;
		}
		do {
			unsigned i = (unsigned)io_uring_cqe_get_data64(cqe);
			int res = cqe->res;

			io_uring_cqe_seen(&r->ring, cqe);
			inflight--;
			s[i].state = READY;
			if (res == -EINTR || res == -EAGAIN)
				continue; /* queued again in the next round */
			if (res <= 0) {
				err = res ? res : -EIO;
				continue;
			}
			s[i].done += (uint32_t)res;
			if (s[i].done >= CK_REF_BLOCK) {
				s[i].state = FREE;
				written++;
			}
		} while (!io_uring_peek_cqe(&r->ring, &cqe));
	}
	/* Reap what is still in flight: its buffer must not be reused before. */
	while (inflight && !broken) {
		struct io_uring_cqe *cqe;
		int ret = io_uring_wait_cqe(&r->ring, &cqe);

		if (ret == -EINTR)
			continue;
		if (ret)
			break;
		io_uring_cqe_seen(&r->ring, cqe);
		inflight--;
	}
	if (broken) {
		/* Closing the ring cancels and waits for what is queued. */
		io_uring_queue_exit(&r->ring);
		r->ring_ok = false;
	}
	if (!err && fsync(fd))
		err = -errno;
	close(fd);
	*ns = bench_now_ns() - t0;
	if (err == -EINVAL && direct) {
		unlink(path);
		return -EINVAL;
	}
	if (err) {
		fprintf(stderr, "shmrun-bench: writing %s: %s\n", path, strerror(-err));
		return -1;
	}
	return 0;
}

/* Read @path back: @blocks blocks, each as ref_write() wrote it. Return: 0 or -1. */
static int ref_check(struct ref_io *r, const char *path, uint64_t blocks)
{
	unsigned char *b = malloc(CK_REF_BLOCK), *want = malloc(CK_REF_BLOCK);
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = -1;

	if (!b || !want || fd < 0 || fstat(fd, &st)) {
		fprintf(stderr, "shmrun-bench: cannot read back %s: %s\n", path, strerror(errno));
		goto out;
	}
	if ((uint64_t)st.st_size != blocks * CK_REF_BLOCK) {
		fprintf(stderr, "shmrun-bench: %s has %lld bytes, wrote %" PRIu64 "\n", path,
			(long long)st.st_size, blocks * CK_REF_BLOCK);
		goto out;
	}
	memcpy(want, r->buf[0], CK_REF_BLOCK);
	for (uint64_t i = 0; i < blocks; i++) {
		if (pread(fd, b, CK_REF_BLOCK, (off_t)(i * CK_REF_BLOCK)) != CK_REF_BLOCK) {
			fprintf(stderr, "shmrun-bench: reading back %s: short read\n", path);
			goto out;
		}
		ref_stamp(want, i);
		if (memcmp(b, want, CK_REF_BLOCK)) {
			fprintf(stderr,
				"shmrun-bench: %s: block %" PRIu64 " differs from what "
				"was written\n",
				path, i);
			goto out;
		}
	}
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	free(b);
	free(want);
	return rc;
}

/* ---- the subcommand --------------------------------------------------------- */

struct ck_ctx {
	char shmrun[PATH_MAX];
	char dir[PATH_MAX]; /* work directory */
	uint64_t state_mb, keys, count;
	const char *interval;
	bool verbose, quick, keep;
};

static const char *fs_name(const char *dir)
{
	struct statfs sf;

	if (statfs(dir, &sf))
		return "unknown";
	switch ((unsigned long)sf.f_type) {
	case 0xEF53:
		return "ext2/3/4";
	case 0x58465342:
		return "xfs";
	case 0x9123683E:
		return "btrfs";
	case 0x01021994:
		return "tmpfs";
	case 0x794c7630:
		return "overlayfs";
	case 0x6969:
		return "nfs";
	case 0x2fc12fc1:
		return "zfs";
	default:
		return "other";
	}
}

static int ck_write_conf(const struct ck_ctx *c, const char *name, bool checkpoints)
{
	char path[PATH_MAX], text[1024], ckpt[160] = "";
	int fd, err = 0;
	size_t len;

	if (checkpoints)
		snprintf(ckpt, sizeof(ckpt), "checkpoint_dir = %s.ckpt\ncheckpoint_interval = %s\n",
			 name, c->interval);
	len = (size_t)snprintf(
	    text, sizeof(text),
	    "; written by shmrun-bench checkpoint\n"
	    "[job]\nname = bench-ckpt\nworkers = %d\n%s\n"
	    "[src]\nop = sequence\ncount = %" PRIu64 "\nkeys = %" PRIu64 "\nwidth = 2\n\n"
	    "[count]\nop = count\ninput = src by key\nemit = final\nwidth = 2\n\n"
	    "[out]\nop = null_sink\ninput = count\nwidth = 2\n",
	    CK_WORKERS, ckpt, c->count, c->keys);
	if (bench_pathf(path, sizeof(path), "%s/%s.conf", c->dir, name))
		return -1;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, text, len) != (ssize_t)len)
		err = -1;
	if (fd >= 0 && close(fd))
		err = -1;
	if (err)
		fprintf(stderr, "shmrun-bench: writing %s: %s\n", path, strerror(errno));
	return err;
}

/* Run `shmrun ckpt verify @ckpt_dir`; 0 if it exits 0. */
static int ck_verify(const struct ck_ctx *c, const char *ckpt_dir, const char *log)
{
	char *argv[] = {(char *)c->shmrun, "ckpt", "verify", (char *)ckpt_dir, NULL};
	struct bench_job job;

	if (bench_job_start(&job, c->shmrun, argv, log))
		return -1;
	if (bench_job_wait(&job, CK_RUN_TIMEOUT_S, -1, NULL, NULL, log)) {
		fprintf(stderr, "shmrun-bench: shmrun ckpt verify %s failed\n", ckpt_dir);
		return -1;
	}
	return 0;
}

/* One checkpointed run, followed by inotify. Return: 0 or -1 (printed). */
static int ck_run_job(const struct ck_ctx *c, unsigned rep, struct ck_run *run)
{
	char name[32], conf[PATH_MAX], log[PATH_MAX], vlog[PATH_MAX], ckpt[PATH_MAX];
	char *argv[] = {(char *)c->shmrun, "--log-level", "info", conf, NULL};
	struct ck_monitor m = {.fd = -1, .root = ckpt, .real_minus_mono = real_minus_mono()};
	struct bench_job job;
	int rc = -1;

	memset(run, 0, sizeof(*run));
	snprintf(name, sizeof(name), "rep%u", rep);
	if (bench_pathf(conf, sizeof(conf), "%s/%s.conf", c->dir, name) ||
	    bench_pathf(log, sizeof(log), "%s/%s.log", c->dir, name) ||
	    bench_pathf(vlog, sizeof(vlog), "%s/%s.verify.log", c->dir, name) ||
	    bench_pathf(ckpt, sizeof(ckpt), "%s/%s.ckpt", c->dir, name) ||
	    ck_write_conf(c, name, true))
		return -1;
	/* The directory exists before the job starts, so it can be watched. */
	if (mkdir(ckpt, 0777)) {
		fprintf(stderr, "shmrun-bench: cannot create %s: %s\n", ckpt, strerror(errno));
		return -1;
	}
	m.fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (m.fd < 0 || (m.root_wd = inotify_add_watch(m.fd, ckpt, IN_CREATE | IN_ONLYDIR)) < 0) {
		fprintf(stderr, "shmrun-bench: inotify on %s: %s\n", ckpt, strerror(errno));
		goto out;
	}
	if (bench_job_start(&job, c->shmrun, argv, log))
		goto out;
	if (bench_job_wait(&job, CK_RUN_TIMEOUT_S, m.fd, ck_monitor_read, &m, log))
		goto out;
	if (ck_parse_log(log, run))
		goto out;
	if (run->records_in != c->count || run->keys != c->keys) {
		fprintf(stderr,
			"shmrun-bench: rep %u: records in %" PRIu64 ", distinct keys %" PRIu64
			"; expected %" PRIu64 " and %" PRIu64 " (see %s)\n",
			rep, run->records_in, run->keys, c->count, c->keys, log);
		goto out;
	}
	if (m.overflow || m.lost)
		printf("# rep %u: inotify %s; epochs not followed completely are left out\n", rep,
		       m.overflow ? "queue overflowed" : "missed a file or a directory");
	if (ck_summarise(&m, run, c->verbose, rep))
		goto out;
	run->lag_max_ns = m.lag_max_ns;
	run->lag_n = m.lag_n;
	if (!run->measured) {
		fprintf(stderr,
			"shmrun-bench: rep %u: no checkpoint with key-bound state could be "
			"measured (%u completed)\n",
			rep, run->epochs);
		goto out;
	}
	if (ck_verify(c, ckpt, vlog))
		goto out;
	rc = 0;
out:
	if (m.fd >= 0)
		close(m.fd);
	free(m.ep);
	if (!c->keep)
		bench_rmtree(ckpt);
	return rc;
}

/* The same job without checkpoints: records per second. */
static int ck_run_plain(const struct ck_ctx *c, double *rec_s)
{
	char conf[PATH_MAX], log[PATH_MAX];
	char *argv[] = {(char *)c->shmrun, "--log-level", "info", conf, NULL};
	struct bench_job job;
	struct ck_run run = {0};
	char *text = NULL, *p;
	size_t len;

	if (bench_pathf(conf, sizeof(conf), "%s/plain.conf", c->dir) ||
	    bench_pathf(log, sizeof(log), "%s/plain.log", c->dir) ||
	    ck_write_conf(c, "plain", false) || bench_job_start(&job, c->shmrun, argv, log) ||
	    bench_job_wait(&job, CK_RUN_TIMEOUT_S, -1, NULL, NULL, log) ||
	    bench_read_text(log, &text, &len))
		return -1;
	p = strstr(text, " done in ");
	if (!p ||
	    sscanf(p, " done in %lf s: records in %" SCNu64, &run.job_s, &run.records_in) != 2 ||
	    run.job_s <= 0) {
		fprintf(stderr, "shmrun-bench: %s lacks the launcher's \"done in\" line\n", log);
		free(text);
		return -1;
	}
	free(text);
	*rec_s = (double)run.records_in / run.job_s;
	return 0;
}

/* The default parent directory: $TMPDIR, else the build directory (../ of tools/). */
static int ck_default_parent(const char *built, char *buf, size_t len)
{
	const char *tmp = getenv("TMPDIR");
	char *slash;

	if (tmp && *tmp)
		return bench_pathf(buf, len, "%s", tmp);
	if (bench_pathf(buf, len, "%s", built))
		return -1;
	for (int i = 0; i < 2; i++) {
		slash = strrchr(buf, '/');
		if (!slash || slash == buf)
			return bench_pathf(buf, len, ".");
		*slash = '\0';
	}
	return 0;
}

int bench_checkpoint_main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"state-mb", required_argument, NULL, 's'},
	    {"dir", required_argument, NULL, 'd'},
	    {"reps", required_argument, NULL, 'r'},
	    {"quick", no_argument, NULL, 'q'},
	    {"verbose", no_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct ck_ctx c = {.interval = "1s"};
	struct ck_run best = {0}, run;
	struct ref_io ref = {0};
	const char *dir_opt = NULL;
	char built[PATH_MAX], parent[PATH_MAX], refpath[PATH_MAX];
	uint64_t reps = 0;
	double best_write = 0, best_e2e = 0, best_ref = 0, best_p50 = -1, best_p99 = -1;
	double best_rec_s = 0, plain_rec_s = 0, best_write_all = 0, best_prep_ms = 0;
	int64_t lag_max_ns = 0;
	uint64_t lag_n = 0;
	bool direct = true, made_dir = false;
	int ch, rc = BENCH_EXIT_FAIL;

	opterr = 0;
	optind = 1;
	while ((ch = getopt_long(argc, argv, ":hv", opts, NULL)) != -1) {
		switch (ch) {
		case 's':
			if (bench_parse_count(optarg, 100000, &c.state_mb))
				return bench_usage_error("checkpoint", 
				    "--state-mb '%s': need a size in MB from 1 to "
				    "100000",
				    optarg);
			break;
		case 'd':
			dir_opt = optarg;
			break;
		case 'r':
			if (bench_parse_count(optarg, 1000, &reps))
				return bench_usage_error("checkpoint", "--reps '%s': need a count from 1 to 1000",
						      optarg);
			break;
		case 'q':
			c.quick = true;
			break;
		case 'v':
			c.verbose = true;
			break;
		case 'h':
			fputs(ck_usage_text, stdout);
			return 0;
		case ':':
			return bench_usage_error("checkpoint", "option '%s' needs a value", argv[optind - 1]);
		default:
			return bench_usage_error("checkpoint", "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return bench_usage_error("checkpoint", "unexpected argument '%s'", argv[optind]);
	if (!c.state_mb)
		c.state_mb = c.quick ? CK_QUICK_MB : CK_DEFAULT_MB;
	if (!reps)
		reps = c.quick ? 1 : 3;
	if (c.quick)
		c.interval = "100ms";
	c.keys = c.state_mb * CK_KEYS_PER_MB * CK_WORKERS;
	c.count = c.keys * CK_PASSES;
	c.keep = dir_opt != NULL;

	if (bench_shmrun_path(built, sizeof(built)))
		return BENCH_EXIT_FAIL;
	bench_catch_signals();
	if (dir_opt) {
		if (mkdir(dir_opt, 0777) && errno != EEXIST) {
			fprintf(stderr, "shmrun-bench: --dir %s: %s\n", dir_opt, strerror(errno));
			return BENCH_EXIT_FAIL;
		}
		if (bench_pathf(parent, sizeof(parent), "%s", dir_opt))
			return BENCH_EXIT_FAIL;
	} else if (ck_default_parent(built, parent, sizeof(parent))) {
		return BENCH_EXIT_FAIL;
	}
	if (bench_make_workdir(parent, "ckpt", c.dir, sizeof(c.dir)))
		return BENCH_EXIT_FAIL;
	made_dir = true;
	if (bench_shmrun_copy(built, c.dir, c.shmrun, sizeof(c.shmrun)) || ref_init(&ref))
		goto out;

	printf("# shmrun: %s (runs from a copy in the directory below)\n", built);
	printf("# directory: %s (%s)\n", c.dir, fs_name(c.dir));
	printf("# job: 2 workers, sequence count=%" PRIu64 " keys=%" PRIu64
	       " -> count by key (emit=final) -> null_sink, checkpoint_interval=%s\n",
	       c.count, c.keys, c.interval);
	fflush(stdout);
	for (unsigned r = 1; r <= reps; r++) {
		uint64_t blocks;
		int64_t ns;
		double w, e2e, g, w_all, prep_ms;
		int err;

		if (bench_interrupted() || ck_run_job(&c, r, &run))
			goto out;
		w = run.write_med;
		e2e = run.e2e_med;
		w_all = (double)run.bytes / (double)run.write_ns;
		prep_ms = (double)run.prep_ns / run.measured / 1e6;
		/* The reference: as many bytes as one measured epoch, in the same directory. */
		blocks = (run.bytes / run.measured + CK_REF_BLOCK - 1) / CK_REF_BLOCK;
		if (bench_pathf(refpath, sizeof(refpath), "%s/odirect-reference.dat", c.dir))
			goto out;
		err = ref_write(&ref, refpath, blocks, direct, &ns);
		if (err == -EINVAL) {
			printf("# O_DIRECT is not supported in %s (EINVAL): the reference is "
			       "buffered writes + fsync\n",
			       c.dir);
			direct = false;
			err = ref_write(&ref, refpath, blocks, direct, &ns);
		}
		if (!err && c.quick)
			err = ref_check(&ref, refpath, blocks);
		unlink(refpath);
		if (err)
			goto out;
		g = (double)(blocks * CK_REF_BLOCK) / (double)ns;
		if (c.verbose)
			printf("# rep %u: %u checkpoints, %u measured, %.1f MB each: write %.3f "
			       "GB/s (median; all epochs together %.3f), end to end %.3f GB/s, "
			       "before the write %.0f ms (mean); stalls p50 %.3f p99 %.3f max "
			       "%.3f ms; reference %.3f GB/s; job %.2f s\n",
			       r, run.epochs, run.measured, (double)run.bytes / run.measured / 1e6,
			       w, w_all, e2e, prep_ms, run.p50_ms, run.p99_ms, run.max_ms, g,
			       run.job_s);
		if (w > best_write)
			best_write = w;
		if (e2e > best_e2e)
			best_e2e = e2e;
		if (w_all > best_write_all)
			best_write_all = w_all;
		if (!best_prep_ms || prep_ms < best_prep_ms)
			best_prep_ms = prep_ms;
		if (g > best_ref)
			best_ref = g;
		if (best_p50 < 0 || run.p50_ms < best_p50)
			best_p50 = run.p50_ms;
		if (best_p99 < 0 || run.p99_ms < best_p99)
			best_p99 = run.p99_ms;
		if (run.job_s > 0 && (double)run.records_in / run.job_s > best_rec_s)
			best_rec_s = (double)run.records_in / run.job_s;
		if (r == 1 || run.measured > best.measured)
			best = run;
		if (run.lag_max_ns > lag_max_ns)
			lag_max_ns = run.lag_max_ns;
		lag_n += run.lag_n;
		fflush(stdout);
	}
	if (!c.quick && ck_run_plain(&c, &plain_rec_s))
		goto out;

	printf("# state: %" PRIu64 " keys; key-bound state in memory %.1f MB per worker "
	       "(launcher); %.1f MB per checkpoint on disk, both workers (MANIFEST)\n",
	       best.keys, (double)best.state_bytes / CK_WORKERS / 1e6,
	       (double)best.bytes / best.measured / 1e6);
	printf("# checkpoints: %u completed, %u measured (state >= %.0f%% of the largest, "
	       "not the final one)\n",
	       best.epochs, best.measured, CK_FULL_STATE * 100);
	if (!c.quick && best.measured < 3)
		printf("# warning: fewer than 3 checkpoints with the full state were measured\n");
	printf("# write = per checkpoint, the key-bound state files' bytes over the union of "
	       "their create..close intervals (write + fsync, both writers; inotify), the "
	       "median checkpoint of a rep; all measured checkpoints together %.3f GB/s\n",
	       best_write_all);
	printf("# end to end (ckpt dir created .. MANIFEST renamed) %.3f GB/s; before the "
	       "first state file is created (barrier, fork, serialising in the snapshot "
	       "child) %.0f ms on average\n",
	       best_e2e, best_prep_ms);
	if (lag_n)
		printf("# timestamps: every state file's creation was seen at most %.1f ms after "
		       "its birth time (statx btime, a clock tick coarse; %" PRIu64 " files)\n",
		       (double)lag_max_ns / 1e6, lag_n);
	printf("# stalls: the launcher's figures (worst worker), snapshot() + fork(); "
	       "copy-on-write faults after the fork are not in them\n");
	if (plain_rec_s > 0)
		printf("# throughput: %.2f M records/s with checkpoints (best rep), %.2f M "
		       "without (one run)\n",
		       best_rec_s / 1e6, plain_rec_s / 1e6);
	printf("# reference: %s sequential 1 MiB writes, io_uring, %d in flight, then fsync, "
	       "same directory; best of %" PRIu64 " reps for every figure; GB = 10^9 bytes\n",
	       direct ? "O_DIRECT" : "buffered (O_DIRECT refused)", CK_REF_DEPTH, reps);
	printf("checkpoint state_mb=%" PRIu64 " write_gb_s=%.3f stall_ms_p50=%.3f "
	       "stall_ms_p99=%.3f\n",
	       c.state_mb, best_write, best_p50, best_p99);
	printf("reference odirect_gb_s=%.3f\n", best_ref);
	printf("ratio write_vs_odirect=%.3f\n", best_ref > 0 ? best_write / best_ref : 0);
	printf("# targets: write >= %.1fx reference (%s), stall p99 <= %.0f ms (%s)\n",
	       TARGET_RATIO, best_write >= TARGET_RATIO * best_ref ? "met" : "missed",
	       TARGET_STALL_MS, best_p99 <= TARGET_STALL_MS ? "met" : "missed");
	rc = 0;
out:
	if (bench_interrupted()) {
		fprintf(stderr, "shmrun-bench: interrupted\n");
		rc = BENCH_EXIT_FAIL;
	}
	ref_free(&ref);
	if (made_dir && !c.keep)
		bench_rmtree(c.dir);
	else if (made_dir)
		printf("# kept: %s\n", c.dir);
	fflush(stdout);
	return rc;
}
