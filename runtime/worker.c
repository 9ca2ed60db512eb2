/*
 * runtime/worker.c: the single-threaded loop of one worker process.
 *
 * What it is for. A worker runs every task the plan placed on it, on one
 * thread, with no locks: forward edges are direct calls (operator chaining),
 * every other edge is a channel, one SPSC ring per (sender, receiver) pair.
 * This file is the loop and its phases, as libuv's uv_run() calls one
 * function per phase; the rooms around it:
 *
 *     channel.h/.c   a channel's ends, the record frame, the overflow queue
 *     task.h/.c      struct shmrun_task and the operator API's task functions
 *     pace.h/.c      records per second for a paced source's stage
 *     flush.h/.c     the flush phase: operators that hold output back
 *     prepare.c      a stage's checks in the launcher, before any worker
 *     checkpoint.c   the coordinator (worker 0) and the run's control area
 *
 * The loop (shmrun_worker_run(), one turn = step()):
 *
 *     setup(): tasks in topological order, rings attached, wire_task()
 *     open every task, hand it its restored per-worker entries
 *     for (;;) {
 *         drain overflows into their rings            (frames that found a ring full)
 *         for each task, downstream first:
 *             source: barrier of a new epoch, then produce() a budget of
 *                     records (paced: its stage's tokens)  unless parked
 *             others: read a budget of frames from each open input ring,
 *                     unless parked or held for barrier alignment
 *         publish every ring with pending commits      (one release store per ring)
 *         checkpoints: commit complete epochs; worker 0 coordinates
 *         all tasks ended and nothing pending -> exit
 *         no progress -> flush held output, idle (spin, then sleep on the bell)
 *     }
 *     wait for snapshot writers, publish stats, close every task
 *
 * Never blocking on a full ring (docs/design.md §5). Two workers that each block
 * writing into the other's full ring while neither drains its own inbound ring
 * deadlock. So emit never waits: a frame that does not fit is appended to that
 * channel's overflow buffer and the task that produced it is *parked*: it gets
 * no more input until every channel downstream of it (through forward edges
 * too) has drained. The overflow of a parked task is bounded by what one input
 * record (or one produce() budget) expands to. The worker meanwhile keeps
 * reading other rings and running other tasks; the graph is acyclic, so the
 * most downstream tasks can always progress, and so, in turn, can everyone.
 *
 * A record larger than the ring's largest frame is rejected with an error
 * naming the stage and the size (no fragmentation: docs/topology.md says how
 * to raise ring_bytes). The frame's encoding is channel.h's.
 *
 * Barrier alignment (docs/design.md §6). A barrier(e) arriving on one input
 * holds that input (chan_in.held; a forward input parks its upstream through
 * fwd_held) until it has arrived on every input still open; then the task
 * snapshots (op->snapshot() and a forked writer of its state file) and sends
 * barrier(e) on, before any record that came after it on any input. A newer
 * epoch's barrier, or the abort of e, drops the alignment.
 *
 * End of input: a task whose inputs have all ended calls end_of_input(), then
 * sends an END frame on each of its output channels and ends its forward
 * successors in turn. A consumer counts END frames, one per input channel.
 * With checkpoints, END carries the final epoch and is that epoch's barrier.
 *
 * Invariants:
 * - one thread: every field of the worker and its tasks is this thread's;
 *   the shared control area and the rings are reached only through atomics
 *   whose pairs are named where they are used;
 * - a channel's frames arrive in the order they were put (the overflow
 *   queue keeps order), and nothing a task emitted after a barrier or END
 *   goes out before it;
 * - the worker exits only once every task ended, every queued frame was
 *   published and, with checkpoints, the final epoch is committed.
 *
 * Designs rejected:
 * - a thread per task or per stage: cross-thread handoff costs more than the
 *   work of a typical operator, and locks or more rings would be needed
 *   where a direct call does today;
 * - reading inputs round-robin upstream first: rings fill faster than they
 *   drain; downstream first empties them before sources fill them again;
 * - blocking on a full ring or busy-retrying it (deadlock, or a core burnt
 *   while another task could run): the overflow queue and parking instead;
 * - looking at the clock every turn: an unpaced source reads none, flushing
 *   looks every FLUSH_CLOCK_TURNS turns.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "channel.h"
#include "ckpt_io.h"
#include "clock.h"
#include "flush.h"
#include "pace.h"
#include "shmrun/placement.h"
#include "task.h"
#include "worker.h"

#define READ_BUDGET 256u

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* Whether @t (or a forward successor) has output queued behind a full ring. */
static bool task_parked_slow(const struct shmrun_task *t)
{
	for (uint32_t o = 0; o < t->nouts; o++) {
		const struct out_edge *e = &t->outs[o];

		if (e->kind == SHMRUN_EDGE_FORWARD) {
			if (e->forward->fwd_held || task_parked_slow(e->forward))
				return true;
			continue;
		}
		for (uint32_t j = 0; j < e->nchans; j++)
			if (chan_backlogged(e->chans[j]))
				return true;
	}
	return false;
}

static inline bool task_parked(const struct shmrun_task *t)
{
	return (t->w->backlogged || t->w->fwd_holds) && task_parked_slow(t);
}

/* ---- emit and delivery ----------------------------------------------------- */

/* Hand @rec to @t. @hash is the key's hash when @hashed (it came off a ring). */
static int task_end(struct shmrun_task *t, uint64_t e, bool stop);
static int task_checkpoint(struct shmrun_task *t, uint64_t e);
static int task_snapshot(struct shmrun_task *t, uint64_t e);
static void task_unhold(struct shmrun_task *t);
static int deliver_barrier(struct shmrun_task *t, uint64_t e, bool forward);

static int deliver(struct shmrun_task *t, const struct shmrun_record *rec, uint64_t hash,
		   bool hashed)
{
	int err;

	if (t->w->failed)
		return -ECANCELED;
	t->cur_key = hashed ? rec->key : NULL;
	t->cur_key_len = rec->key_len;
	t->cur_hash = hash;
	err = t->op->process(t, t->state, rec);
	t->cur_key = NULL;
	if (err && !t->w->failed)
		shmrun_task_error(t, "process failed: %s", strerror(-err));
	if (err && t->w->stats)
		note_fail_errno(t->w, err);
	return err;
}

static int emit_edges(struct shmrun_task *t, const struct shmrun_record *rec);

int shmrun_emit(struct shmrun_task *t, const struct shmrun_record *rec)
{
	/* the common chain: one forward edge, a direct call */
	if (t->nouts == 1 && t->outs[0].kind == SHMRUN_EDGE_FORWARD)
		return deliver(t->outs[0].forward, rec, 0, false);
	return emit_edges(t, rec);
}

/*
 * Say why @rec (@total bytes with its framing) does not fit @e's rings, and
 * what to do that is true: the smallest ring_bytes that would hold it, or,
 * past the largest ring, that no ring ever will (a frame is at most half a
 * ring: shmrun_ring_max_payload()).
 */
static void record_too_large(struct shmrun_task *t, const struct out_edge *e,
			     const struct shmrun_record *rec, uint64_t total)
{
	uint64_t cap = e->chans[0]->ring.capacity, need = cap;
	uint64_t framing = total - rec->key_len - rec->value_len;
	uint64_t largest = SHMRUN_RING_MAX_CAPACITY / 2 - SHMRUN_FRAME_HEADER;

	while (need < SHMRUN_RING_MAX_CAPACITY && need / 2 - SHMRUN_FRAME_HEADER < total)
		need *= 2;
	if (total <= largest)
		shmrun_task_error(t,
				  "record of %" PRIu64 " bytes (key %u + value %u + %" PRIu64
				  " of framing) does not fit a ring of ring_bytes=%" PRIu64
				  " (largest record: %u bytes); raise ring_bytes in [job] to at "
				  "least %" PRIu64 "%s",
				  total, rec->key_len, rec->value_len, framing, cap, e->max_payload,
				  need >= (1u << 20) ? need >> 20 : need >> 10,
				  need >= (1u << 20) ? "M" : "K");
	else
		shmrun_task_error(
		    t,
		    "record of %" PRIu64 " bytes (key %u + value %u + %" PRIu64
		    " of framing) can never fit a ring: the largest record is %" PRIu64
		    " bytes (key + value at most %" PRIu64 "), even at the maximum "
		    "ring_bytes = 1G; split the record into smaller ones (for a "
		    "file_source: shorten its lines, one line is one record)",
		    total, rec->key_len, rec->value_len, framing, largest, largest - framing);
}

static int emit_edges(struct shmrun_task *t, const struct shmrun_record *rec)
{
	unsigned char hdr[REC_HDR];
	bool timed = rec->event_time_ns != 0;
	uint64_t total = chan_record_bytes(rec);
	uint64_t hash = 0;
	bool hashed = false;
	int err = 0;

	for (uint32_t o = 0; o < t->nouts && !err; o++) {
		struct out_edge *e = &t->outs[o];
		uint32_t j, lo, hi;

		if (e->kind == SHMRUN_EDGE_FORWARD) {
			err = deliver(e->forward, rec, 0, false);
			continue;
		}
		if (total > e->max_payload) {
			record_too_large(t, e, rec, total);
			if (t->w && t->w->stats)
				note_fail_errno(t->w, -EMSGSIZE); /* a restart makes it again */
			return -EMSGSIZE;
		}
		if (!hashed) {
			hash = XXH3_64bits(rec->key, rec->key_len);
			chan_record_header(hdr, rec, hash);
			hashed = true;
		}
		switch (e->kind) {
		case SHMRUN_EDGE_SHUFFLE:
			lo = e->instance_of_vnode[shmrun_placement_vnode_of_hash(hash, t->vnodes)];
			hi = lo + 1;
			break;
		case SHMRUN_EDGE_REBALANCE:
			lo = e->rr;
			hi = lo + 1;
			e->rr = e->rr + 1 == e->nchans ? 0 : e->rr + 1;
			break;
		default:
			lo = 0;
			hi = e->nchans;
			break;
		}
		for (j = lo; j < hi && !err; j++)
			err = chan_put_record(e->chans[j], hdr, rec, timed, (uint32_t)total);
		if (err)
			shmrun_task_error(t, "cannot queue output behind a full ring: %s",
					  strerror(-err));
	}
	return err;
}

/*
 * End of input for @t: final emits (unless the job is stopping), the snapshot
 * of the final epoch @e (0 without checkpoints), then END(@e) on every channel
 * and the end of each forward successor. END is the final epoch's barrier: it
 * comes after everything the task emitted, so the last checkpoint holds it all.
 */
static int task_end(struct shmrun_task *t, uint64_t e, bool stop)
{
	struct {
		uint64_t epoch;
		uint32_t stop, pad;
	} end = {e, stop, 0};
	struct pieces pc = {.p = {&end}, .n = {sizeof(end)}, .total = sizeof(end)};
	int err = 0;

	if (t->op->end_of_input && !stop)
		err = t->op->end_of_input(t, t->state);
	if (err) {
		if (!t->w->failed)
			shmrun_task_error(t, "end of input failed: %s", strerror(-err));
		note_fail_errno(t->w, err);
		return err;
	}
	if (e)
		err = task_snapshot(t, e);
	if (err)
		return err;
	task_unhold(t);
	t->ended = true;
	for (uint32_t o = 0; o < t->nouts && !err; o++) {
		struct out_edge *oe = &t->outs[o];

		if (oe->kind == SHMRUN_EDGE_FORWARD) {
			if (--oe->forward->inputs_open == 0)
				err = task_end(oe->forward, e, stop);
			continue;
		}
		for (uint32_t j = 0; j < oe->nchans && !err; j++)
			err = chan_put(oe->chans[j], SHMRUN_FRAME_END, &pc);
	}
	return err;
}

/* Read up to READ_BUDGET frames from one input channel of @t. Return: frames read. */
static uint32_t read_channel(struct shmrun_task *t, struct chan_in *in)
{
	const struct shmrun_frame *f;
	uint32_t n = 0;
	int err;

	while (n < READ_BUDGET && !t->w->failed && !task_parked(t)) {
		err = shmrun_ring_peek(&in->ring, &f);
		if (err == -EAGAIN)
			break;
		if (err) {
			shmrun_task_error(t, "corrupt frame on an input ring (%s)", strerror(-err));
			break;
		}
		n++;
		if (f->kind == SHMRUN_FRAME_DATA) {
			struct shmrun_record rec;
			uint64_t hash;

			if (chan_decode_record(f, &rec, &hash)) {
				shmrun_task_error(t, "corrupt record frame from task %u", f->src_task);
				break;
			}
			deliver(t, &rec, hash, true);
		} else if (f->kind == SHMRUN_FRAME_END) {
			uint64_t e = 0;
			uint32_t stop = 0;

			if (f->len >= 12) {
				memcpy(&e, f->payload, 8);
				memcpy(&stop, f->payload + 8, 4);
			}
			in->ended = true;
			shmrun_ring_release(&in->ring, f);
			if (--t->inputs_open == 0)
				task_end(t, e, stop);
			break;
		} else if (f->kind == SHMRUN_FRAME_BARRIER) {
			uint64_t e = 0;

			if (f->len >= 8)
				memcpy(&e, f->payload, 8);
			shmrun_ring_release(&in->ring, f);
			if (e > t->barrier_epoch &&
			    e > atomic_load_explicit(&t->w->ctl->aborted_epoch, memory_order_acquire)) {
				in->held = e; /* hold this channel until every input has e */
				deliver_barrier(t, e, false);
			}
			break;
		}
		shmrun_ring_release(&in->ring, f);
	}
	return n;
}

/*
 * State file, logical content (ckpt_io.h frames it in checksummed blocks):
 *
 *     "SHMRSTAT" u32 version=1 u32 value_bytes u64 epoch u32 instance u32 width
 *     u32 vnodes u32 nsections
 *     nsections x { u32 vnode, u32 0, u64 nkeys, nkeys x { u32 key_len, key, value } }
 *     u64 n_pw, n_pw x { u32 len, bytes }
 *
 * Sections are whole vnodes, so a rescale can move them without parsing keys.
 * epoch is that of the snapshot, or 0 in the file --rescale writes for a stage
 * new to the checkpoint: its tasks start as on a first start
 * (shmrun_task_restoring() false), every other task restores its position.
 */

struct kv_writer {
	struct shmrun_ckpt_buf *buf;
	uint32_t value_bytes;
	int err;
};

static int put_entry(void *arg, const void *key, uint32_t key_len, void *value)
{
	struct kv_writer *kw = arg;

	kw->err = shmrun_ckpt_buf_append(kw->buf, &key_len, 4);
	if (!kw->err)
		kw->err = shmrun_ckpt_buf_append(kw->buf, key, key_len);
	if (!kw->err)
		kw->err = shmrun_ckpt_buf_append(kw->buf, value, kw->value_bytes);
	return kw->err;
}

static int encode_state(struct shmrun_task *t, uint64_t e, struct shmrun_ckpt_buf *buf,
			uint64_t *kv_bytes)
{
	struct kv_writer kw = {.buf = buf, .value_bytes = t->kv.value_bytes};
	uint32_t nsec = 0;
	uint64_t npw = t->pw_n;
	size_t before;
	int err;

	for (uint32_t v = 0; v < t->vnodes; v++)
		nsec += shmrun_kv_vnode_keys(&t->kv, v) > 0;
	err = shmrun_state_put_header(buf, t->kv.value_bytes, e, t->instance, t->width, t->vnodes,
				      nsec);
	before = shmrun_ckpt_buf_len(buf);
	for (uint32_t v = 0; v < t->vnodes && !err; v++) {
		uint64_t n = shmrun_kv_vnode_keys(&t->kv, v);
		uint32_t sec[2] = {v, 0};

		if (!n)
			continue;
		err = shmrun_ckpt_buf_append(buf, sec, sizeof(sec));
		if (!err)
			err = shmrun_ckpt_buf_append(buf, &n, 8);
		if (!err)
			err = shmrun_kv_foreach_in(&t->kv, v, put_entry, &kw) ? kw.err : 0;
	}
	*kv_bytes = shmrun_ckpt_buf_len(buf) - before;
	if (!err)
		err = shmrun_ckpt_buf_append(buf, &npw, 8);
	if (!err && t->pw_len)
		err = shmrun_ckpt_buf_append(buf, t->pw, t->pw_len);
	return err;
}

/*
 * Test-only: SHMRUN_TEST_SLOW_SNAPSHOT=e:ms makes the writers of epoch e wait
 * ms before they create its directory and again after their file is written:
 * a late writer of an aborted epoch, still busy when the job ends.
 */
static void test_slow_snapshot(uint64_t e)
{
	const char *se = getenv("SHMRUN_TEST_SLOW_SNAPSHOT");

	if (se && strchr(se, ':') && strtoull(se, NULL, 10) == e)
		usleep((useconds_t)(strtoul(strchr(se, ':') + 1, NULL, 10) * 1000));
}

/*
 * The snapshot child: write @t's state file of epoch @e into its checkpoint
 * directory with io_uring, fsync it and the task's registered fds, and record
 * the result in the task's slot. Runs in a forked child of the worker, on a
 * copy-on-write image of the state as of the barrier.
 */
static int write_state_file(struct shmrun_worker *w, struct shmrun_task *t, uint64_t e)
{
	const struct shmrun_job *job = w->plan->job;
	struct shmrun_task_slot *slot = &w->slots[t->id];
	struct shmrun_ckpt_writer wr;
	struct shmrun_ckpt_buf buf;
	char path[PATH_MAX], name[160], why[200];
	uint64_t size = 0, sum = 0, kv_bytes = 0;
	int dirfd = -1, err;

	shmrun_ckpt_buf_init(&buf);
	shmrun_ckpt_path(job->checkpoint_dir, e, path, sizeof(path));
	shmrun_ckpt_file_name(w->plan, t->id, name, sizeof(name));
	/* an epoch aborted before its barrier reached this task: write nothing
	 * (the coordinator has removed, or will remove, its directory) */
	if (e <= atomic_load_explicit(&w->ctl->aborted_epoch, memory_order_seq_cst))
		return 0;
	test_slow_snapshot(e);
	err = shmrun_ckpt_mkdir(job->checkpoint_dir);
	if (err && err != -EEXIST)
		goto out;
	err = shmrun_ckpt_mkdir(path); /* 0700: state may hold secrets */
	if (err && err != -EEXIST)
		goto out;
	/* never through a symlink: a ckpt-N the runtime did not make is not
	 * written into (ELOOP fails the epoch) */
	dirfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dirfd < 0) {
		err = -errno;
		goto out;
	}
	err = encode_state(t, e, &buf, &kv_bytes);
	if (!err)
		err = shmrun_ckpt_buf_seal(&buf);
	if (err)
		goto out;
	for (uint32_t i = 0; i < t->nsync && !err; i++)
		if (fsync(t->sync_fds[i]) < 0)
			err = -errno;
	if (err)
		goto out;
	{
		/* Test-only: SHMRUN_TEST_FAIL_EPOCH=e makes every write of epoch e
		 * fail with EIO (the fault switch of ckpt_io.h, armed here so it
		 * hits one epoch, not every snapshot child). */
		const char *fe = getenv("SHMRUN_TEST_FAIL_EPOCH");
		const char *ke = getenv("SHMRUN_TEST_KILL_SNAPSHOT_EPOCH");

		/* Test-only: the writer of epoch e dies without reporting. */
		if (ke && strtoull(ke, NULL, 10) == e)
			raise(SIGKILL);
		if (fe && strtoull(fe, NULL, 10) == e) {
			setenv("SHMRUN_FAULT", "write:EIO:1", 1);
			shmrun_ckpt_fault_reload();
		}
	}
	err = shmrun_ckpt_writer_init(&wr, 32, why, sizeof(why));
	if (err)
		goto out;
	unlinkat(dirfd, name, 0); /* a retry of an aborted epoch */
	err = shmrun_ckpt_write_file(&wr, dirfd, name, &buf, &size, &sum);
	if (!err)
		err = shmrun_ckpt_fsync_dir(dirfd);
	shmrun_ckpt_writer_close(&wr);
	test_slow_snapshot(e);
out:
	/*
	 * A late writer of an aborted epoch removes what it wrote, and the
	 * directory once it is empty. seq_cst: pairs with the seq_cst store of
	 * aborted_epoch in abort_epoch() (checkpoint.c). Either this load sees
	 * the abort, or it comes before that store, and then so did this file's
	 * creation: the coordinator's removal, after its store, finds the file.
	 */
	if (e <= atomic_load_explicit(&w->ctl->aborted_epoch, memory_order_seq_cst)) {
		if (dirfd >= 0)
			unlinkat(dirfd, name, 0);
		rmdir(path); /* fails while another late writer's file is there */
	}
	if (dirfd >= 0)
		close(dirfd);
	shmrun_ckpt_buf_free(&buf);
	if (err) {
		atomic_store_explicit(&slot->error, err, memory_order_relaxed);
		/* release: the error is visible with failed_epoch. */
		atomic_store_explicit(&slot->failed_epoch, e, memory_order_release);
		return err;
	}
	slot->size = size;
	slot->xxh64 = sum;
	slot->kv_bytes = kv_bytes;
	slot->pw_bytes = t->pw_len;
	/* release: pairs with the acquire load of done_epoch in shmrun_coordinate();
	 * size and checksum above are visible with it. */
	atomic_store_explicit(&slot->done_epoch, e, memory_order_release);
	return 0;
}

static void track_child(struct shmrun_worker *w, pid_t pid, uint32_t task, uint64_t epoch)
{
	if (w->nchildren == w->children_cap) {
		uint32_t cap = w->children_cap ? w->children_cap * 2 : 16;
		struct snap_child *n = realloc(w->children, cap * sizeof(*n));

		if (!n)
			return; /* untracked: its death is caught by checkpoint_timeout */
		w->children = n;
		w->children_cap = cap;
	}
	w->children[w->nchildren++] = (struct snap_child){pid, task, epoch};
}

static void record_stall(struct shmrun_worker *w, int64_t ns)
{
	if (!w->stalls) {
		w->stalls = calloc(1024, sizeof(*w->stalls));
		if (!w->stalls)
			return;
	}
	w->stalls[w->nstalls++ % 1024] = ns;
}

static void task_unhold(struct shmrun_task *t)
{
	for (uint32_t i = 0; i < t->nins; i++)
		t->ins[i]->held = 0;
	if (t->fwd_held)
		t->w->fwd_holds--;
	t->fwd_held = false;
	t->align_epoch = 0;
	t->aligned = 0;
}

static int deliver_barrier(struct shmrun_task *t, uint64_t e, bool forward);

/*
 * Snapshot @t for epoch @e. The stall — the time @t processes nothing because
 * of the checkpoint — is the operator's snapshot() plus one fork(); the state
 * file is written by the child from its copy-on-write image while the worker
 * goes on.
 */
static int task_snapshot(struct shmrun_task *t, uint64_t e)
{
	struct shmrun_worker *w = t->w;
	int64_t t0 = now_ns();
	pid_t pid, worker_pid;
	int err = 0;

	t->pw_len = 0;
	t->pw_n = 0;
	t->nsync = 0;
	t->in_snapshot = true;
	if (t->op->snapshot)
		err = t->op->snapshot(t, t->state, e);
	t->in_snapshot = false;
	if (err) {
		if (!w->failed)
			shmrun_task_error(t, "snapshot of epoch %" PRIu64 " failed: %s", e,
					  strerror(-err));
		note_fail_errno(w, err);
		return err;
	}
	worker_pid = getpid();
	pid = fork();
	if (pid == 0) {
		/* die with the worker — and if it died before prctl() took
		 * effect, write nothing: a run that restarted must never see a
		 * late file from the one that crashed */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != worker_pid)
			_exit(1);
		_exit(write_state_file(w, t, e) ? 1 : 0);
	}
	if (pid < 0) {
		atomic_store_explicit(&w->slots[t->id].error, -errno, memory_order_relaxed);
		atomic_store_explicit(&w->slots[t->id].failed_epoch, e, memory_order_release);
	} else {
		atomic_fetch_add_explicit(&w->ctl->writers, 1, memory_order_relaxed);
		track_child(w, pid, t->id, e);
	}
	record_stall(w, now_ns() - t0);
	t->barrier_epoch = e;
	return 0;
}

/* @t is aligned on barrier(@e): snapshot it and send the barrier on. */
static int task_checkpoint(struct shmrun_task *t, uint64_t e)
{
	struct pieces pc = {.p = {&e}, .n = {8}, .total = 8};
	int err = task_snapshot(t, e);

	task_unhold(t);
	for (uint32_t o = 0; o < t->nouts && !err; o++) {
		struct out_edge *oe = &t->outs[o];

		if (oe->kind == SHMRUN_EDGE_FORWARD) {
			err = deliver_barrier(oe->forward, e, true);
			continue;
		}
		for (uint32_t j = 0; j < oe->nchans && !err; j++)
			err = chan_put(oe->chans[j], SHMRUN_FRAME_BARRIER, &pc);
	}
	return err;
}

/* Inputs of @t that still deliver barriers: open ring channels and forward inputs. */
static uint32_t barrier_inputs(const struct shmrun_task *t)
{
	uint32_t n = t->fwd_inputs;

	for (uint32_t i = 0; i < t->nins; i++)
		n += !t->ins[i]->ended;
	return n;
}

/*
 * Barrier(@e) arrived at @t on one input (a ring channel, already marked held
 * by the caller, or a forward input). Aligned on every input -> checkpoint.
 */
static int deliver_barrier(struct shmrun_task *t, uint64_t e, bool forward)
{
	struct shmrun_worker *w = t->w;

	if (e <= t->barrier_epoch ||
	    e <= atomic_load_explicit(&w->ctl->aborted_epoch, memory_order_acquire))
		return 0; /* stale: an aborted epoch's barrier */
	if (t->align_epoch != e) {
		/* a newer epoch: whatever was aligned before was aborted */
		uint64_t keep = forward ? 0 : e;

		for (uint32_t i = 0; i < t->nins; i++)
			if (t->ins[i]->held != keep)
				t->ins[i]->held = 0;
		if (t->fwd_held)
			w->fwd_holds--;
		t->fwd_held = false;
		t->align_epoch = e;
		t->aligned = 0;
		for (uint32_t i = 0; i < t->nins; i++)
			t->aligned += t->ins[i]->held == e;
		if (!forward)
			t->aligned = t->aligned ? t->aligned - 1 : 0; /* counted below */
	}
	if (forward) {
		t->fwd_held = true;
		w->fwd_holds++;
	}
	if (++t->aligned < barrier_inputs(t))
		return 0;
	return task_checkpoint(t, e);
}

/* Drop an alignment whose epoch was aborted. */
static void drop_aborted(struct shmrun_task *t)
{
	if (t->align_epoch &&
	    t->align_epoch <= atomic_load_explicit(&t->w->ctl->aborted_epoch, memory_order_acquire))
		task_unhold(t);
}

/* A source: inject the barrier of a newly triggered epoch, end after the final one. */
static int source_barrier(struct shmrun_task *t)
{
	struct shmrun_control *ctl = t->w->ctl;
	/* acquire: pairs with the release store of trigger_epoch in
	 * shmrun_coordinate(); final_epoch is visible with it. */
	uint64_t e = atomic_load_explicit(&ctl->trigger_epoch, memory_order_acquire);
	int err;

	if (e <= t->barrier_epoch)
		return 0;
	if (e == atomic_load_explicit(&ctl->final_epoch, memory_order_acquire))
		err = task_end(t, e, atomic_load_explicit(&ctl->final_is_stop, memory_order_acquire));
	else
		err = task_checkpoint(t, e);
	return err ? err : 1;
}

/* Sinks: commit every epoch up to the newest complete one. */
static uint32_t commit_epochs(struct shmrun_worker *w)
{
	/* acquire: pairs with the release store of complete_epoch by the
	 * MANIFEST writer; the checkpoint is durable. */
	uint64_t done = atomic_load_explicit(&w->ctl->complete_epoch, memory_order_acquire);

	if (done <= w->committed_epoch)
		return 0;
	w->committed_epoch = done;
	for (uint32_t x = 0; x < w->ntasks; x++) {
		struct shmrun_task *t = &w->tasks[x];

		int err = t->op->commit && t->opened ? t->op->commit(t, t->state, done) : 0;

		if (err && !w->failed)
			shmrun_task_error(t, "commit of epoch %" PRIu64 " failed", done);
		if (err)
			note_fail_errno(w, err);
	}
	return 1;
}

/*
 * Reap finished snapshot and MANIFEST children. A snapshot child reports
 * through its task's slot; one that died without reporting (killed, out of
 * memory) fails its epoch here, at once, instead of at checkpoint_timeout.
 */
static void reap_children(struct shmrun_worker *w)
{
	int status;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		if (pid == w->co.manifest_pid) {
			w->co.manifest_exited = true; /* the coordinator judges it */
			continue;
		}
		for (uint32_t i = 0; i < w->nchildren; i++) {
			struct snap_child c = w->children[i];
			struct shmrun_task_slot *slot;

			if (c.pid != pid)
				continue;
			w->children[i] = w->children[--w->nchildren];
			atomic_fetch_sub_explicit(&w->ctl->writers, 1, memory_order_relaxed);
			slot = &w->slots[c.task];
			if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
				break;
			if (atomic_load_explicit(&slot->done_epoch, memory_order_acquire) == c.epoch ||
			    atomic_load_explicit(&slot->failed_epoch, memory_order_acquire) == c.epoch)
				break;
			shmrun_log(SHMRUN_LOG_WARN,
				   "the snapshot writer of task %u for epoch %" PRIu64 " died (%s %d)",
				   c.task, c.epoch, WIFSIGNALED(status) ? "signal" : "exit status",
				   WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
			atomic_store_explicit(&slot->error, -ECHILD, memory_order_relaxed);
			/* release: pairs with the coordinator's acquire of failed_epoch */
			atomic_store_explicit(&slot->failed_epoch, c.epoch, memory_order_release);
			break;
		}
	}
}

/* Restore @t's key-bound state and stash its per-worker entries. */
/* Restore @t from the restored checkpoint @dirfd (at @path) whose MANIFEST is @m. */
static int restore_task(struct shmrun_task *t, const struct shmrun_manifest *m, int dirfd,
			const char *path)
{
	struct shmrun_worker *w = t->w;
	char name[160], why[256];
	const struct shmrun_manifest_file *f = NULL;
	struct shmrun_state_view view = {0};
	unsigned char *data = NULL;
	size_t len;
	int err;

	shmrun_ckpt_file_name(w->plan, t->id, name, sizeof(name));
	for (uint32_t i = 0; i < m->nfiles; i++)
		if (strcmp(m->files[i].name, name) == 0)
			f = &m->files[i];
	if (!f) {
		shmrun_task_error(t, "restore from %s: MANIFEST lists no %s", path, name);
		return -EBADMSG;
	}
	err = shmrun_ckpt_read_file(dirfd, name, f->size, f->xxh64, (void **)&data, &len, why,
				    sizeof(why));
	if (err) {
		shmrun_task_error(t, "restore of %s/%s: %s", path, name, why);
		return err;
	}
	err = shmrun_state_parse(data, len, &view);
	if (err)
		goto bad;
	for (uint32_t s = 0; s < view.nsections; s++) {
		const struct shmrun_state_section *sec = &view.sections[s];
		const unsigned char *p = sec->bytes + 16;

		for (uint64_t k = 0; k < sec->keys; k++) {
			uint32_t kl;
			void *v;
			int e2;

			memcpy(&kl, p, 4);
			v = shmrun_kv_get(&t->kv, sec->vnode, XXH3_64bits(p + 4, kl), p + 4, kl,
					  view.value_bytes, true, &e2);
			if (!v) {
				err = e2 ? e2 : -ENOMEM;
				goto bad;
			}
			memcpy(v, p + 4 + kl, view.value_bytes);
			p += 4 + kl + view.value_bytes;
		}
	}
	t->restore_pw = malloc(view.pw_len + 1);
	if (!t->restore_pw) {
		err = -ENOMEM;
		goto bad;
	}
	memcpy(t->restore_pw, view.pw, view.pw_len);
	t->restore_pw_len = view.pw_len;
	/* epoch 0: a stage new to this checkpoint (written by --rescale), which
	 * starts as on a first start; any other state file restores the
	 * instance's position, even with no entry at all (it had finished) */
	t->restoring = view.epoch != 0;
	t->barrier_epoch = w->ctl->restored_epoch;
	shmrun_state_view_free(&view);
	free(data);
	return 0;
bad:
	shmrun_task_error(t, "restore of %s/%s: %s", path, name,
			  err == -EBADMSG ? "state file content is malformed" : strerror(-err));
	shmrun_state_view_free(&view);
	free(data);
	return err;
}

/* Restore every task of this worker: the MANIFEST is read once. */
static int restore_tasks(struct shmrun_worker *w)
{
	const char *dir = w->plan->job->checkpoint_dir;
	char path[PATH_MAX], why[256];
	struct shmrun_manifest m;
	int dirfd, err;

	shmrun_ckpt_path(dir, w->ctl->restored_epoch, path, sizeof(path));
	err = shmrun_ckpt_read_manifest(dir, w->ctl->restored_epoch, &m, why, sizeof(why));
	if (err) {
		snprintf(w->stats->error, sizeof(w->stats->error), "restore from %.200s: %.200s", path,
			 why);
		w->failed = true;
		return err;
	}
	dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	err = dirfd < 0 ? -errno : 0;
	for (uint32_t x = 0; x < w->ntasks && !err; x++)
		err = restore_task(&w->tasks[x], &m, dirfd, path);
	if (dirfd >= 0)
		close(dirfd);
	shmrun_manifest_free(&m);
	return err;
}

/* Hand the restored per-worker entries to the operator, after open(). */
static int restore_entries(struct shmrun_task *t)
{
	unsigned char *p = t->restore_pw, *end = p + t->restore_pw_len;
	int err = 0;

	while (p && end - p >= 4 && !err) {
		uint32_t len;

		memcpy(&len, p, 4);
		if ((size_t)(end - p) < 4 + (size_t)len) {
			shmrun_task_error(t, "restored per-worker state is truncated");
			return -EBADMSG;
		}
		if (t->op->restore)
			err = t->op->restore(t, t->state, p + 4, len);
		p += 4 + len;
	}
	free(t->restore_pw);
	t->restore_pw = NULL;
	return err;
}

/* ---- setup ----------------------------------------------------------------- */

/* The index in @outs/@ins arrays of the handle on segment ring @c, or -1. */
static struct chan_out *find_out(struct shmrun_worker *w, uint32_t c)
{
	void *mem = shmrun_segment_ring(w->seg, c, NULL);

	for (uint32_t y = 0; y < w->nouts; y++)
		if ((void *)w->outs[y].ring.sh == mem)
			return &w->outs[y];
	return NULL;
}

static struct chan_in *find_in(struct shmrun_worker *w, uint32_t c)
{
	void *mem = shmrun_segment_ring(w->seg, c, NULL);

	for (uint32_t y = 0; y < w->nins; y++)
		if ((void *)w->ins[y].ring.sh == mem)
			return &w->ins[y];
	return NULL;
}

static int wire_task(struct shmrun_worker *w, struct shmrun_task *t, const uint32_t *task_slot)
{
	const struct shmrun_plan *p = w->plan;
	const struct shmrun_job *job = p->job;
	uint32_t stage = p->tasks[t->id].stage, nin = 0;

	for (uint32_t e = 0; e < job->nedges; e++) {
		const struct shmrun_edge *ed = &job->edges[e];

		if (ed->from == stage)
			t->nouts++;
		if (ed->to == stage && ed->kind != SHMRUN_EDGE_FORWARD)
			nin += job->stages[ed->from].width;
	}
	t->outs = calloc(t->nouts + 1, sizeof(*t->outs));
	t->ins = calloc(nin + 1, sizeof(*t->ins));
	if (!t->outs || !t->ins)
		return -ENOMEM;
	t->nouts = 0;
	for (uint32_t e = 0; e < job->nedges; e++) {
		const struct shmrun_edge *ed = &job->edges[e];
		const struct shmrun_stage *to = &job->stages[ed->to];
		struct out_edge *oe;

		if (ed->to == stage && ed->kind == SHMRUN_EDGE_FORWARD) {
			t->inputs_open++;
			t->fwd_inputs++;
		}
		else if (ed->to == stage)
			for (uint32_t i = 0; i < job->stages[ed->from].width; i++) {
				t->ins[t->nins++] =
					find_in(w, shmrun_plan_channel_of(p, e, i, t->instance));
				t->inputs_open++;
			}
		if (ed->from != stage)
			continue;
		oe = &t->outs[t->nouts++];
		oe->kind = ed->kind;
		if (ed->kind == SHMRUN_EDGE_FORWARD) {
			oe->forward = &w->tasks[task_slot[p->stage_task0[ed->to] + t->instance]];
			continue;
		}
		oe->nchans = to->width;
		oe->chans = calloc(to->width, sizeof(*oe->chans));
		if (!oe->chans)
			return -ENOMEM;
		for (uint32_t j = 0; j < to->width; j++)
			oe->chans[j] = find_out(w, shmrun_plan_channel_of(p, e, t->instance, j));
		oe->max_payload = shmrun_ring_max_payload(&oe->chans[0]->ring);
		if (ed->kind == SHMRUN_EDGE_SHUFFLE) {
			oe->instance_of_vnode = malloc(job->vnodes * sizeof(uint32_t));
			if (!oe->instance_of_vnode)
				return -ENOMEM;
			for (uint32_t v = 0; v < job->vnodes; v++)
				oe->instance_of_vnode[v] =
					shmrun_placement_instance_of_vnode(v, to->width, job->vnodes);
		}
	}
	return 0;
}

static int setup(struct shmrun_worker *w)
{
	const struct shmrun_plan *p = w->plan;
	const struct shmrun_job *job = p->job;
	uint32_t *task_slot = NULL;
	int err = -ENOMEM;

	w->outs = calloc(p->nchannels + 1, sizeof(*w->outs));
	w->ins = calloc(p->nchannels + 1, sizeof(*w->ins));
	w->tasks = calloc(p->ntasks + 1, sizeof(*w->tasks));
	task_slot = malloc((p->ntasks + 1) * sizeof(*task_slot));
	if (!w->outs || !w->ins || !task_slot || !w->tasks)
		goto out;
	err = 0; /* a worker may have no task and no ring at all: it idles */

	/* This worker's tasks in topological order of their stages: the loop
	 * walks them in reverse, downstream first, so rings drain before
	 * sources fill them further. */
	for (uint32_t x = 0; x < job->nstages; x++) {
		uint32_t s = job->topo[x];

		for (uint32_t i = 0; i < job->stages[s].width; i++) {
			uint32_t id = p->stage_task0[s] + i;
			const struct shmrun_plan_task *pt = &p->tasks[id];
			struct shmrun_task *t;

			task_slot[id] = UINT32_MAX;
			if (pt->worker != w->index)
				continue;
			task_slot[id] = w->ntasks;
			t = &w->tasks[w->ntasks++];
			t->id = id;
			t->stage = &job->stages[s];
			t->op = t->stage->op;
			t->instance = pt->instance;
			t->width = t->stage->width;
			t->vnodes = job->vnodes;
			t->vnode_lo = pt->vnode_lo;
			t->vnode_hi = pt->vnode_hi;
			t->w = w;
			/* looked up once: source_budget() runs every loop turn */
			t->rate = t->op->pacing_param
					  ? shmrun_task_param_u64(t, t->op->pacing_param, 0)
					  : 0;
			t->rate_slot = &w->slots[p->stage_task0[s]];
			if (shmrun_kv_init(&t->kv, job->vnodes))
				goto out;
		}
	}
	/* Each ring this worker touches, attached on the side it plays. */
	for (uint32_t c = 0; c < p->nchannels; c++) {
		const struct shmrun_plan_channel *ch = &p->channels[c];
		size_t len;
		void *mem = shmrun_segment_ring(w->seg, c, &len);

		if (p->tasks[ch->src_task].worker == w->index) {
			struct chan_out *o = &w->outs[w->nouts++];

			err = shmrun_ring_attach(&o->ring, mem, len, SHMRUN_RING_PRODUCER);
			if (err)
				goto out;
			o->src_task = ch->src_task;
			o->dst_task = ch->dst_task;
			o->backlogged = &w->backlogged;
			shmrun_ring_set_wake_bell(
				&o->ring, &w->all_stats[p->tasks[ch->dst_task].worker].bell);
		}
		if (p->tasks[ch->dst_task].worker == w->index) {
			struct chan_in *in = &w->ins[w->nins++];

			err = shmrun_ring_attach(&in->ring, mem, len, SHMRUN_RING_CONSUMER);
			if (err)
				goto out;
			shmrun_ring_set_wake_bell(
				&in->ring, &w->all_stats[p->tasks[ch->src_task].worker].bell);
		}
	}
	for (uint32_t x = 0; x < w->ntasks; x++) {
		err = wire_task(w, &w->tasks[x], task_slot);
		if (err)
			goto out;
	}
	if (w->ctl->restored_epoch)
		err = restore_tasks(w);
out:
	free(task_slot);
	return err;
}

static void teardown(struct shmrun_worker *w)
{
	for (uint32_t x = 0; x < w->ntasks; x++) {
		struct shmrun_task *t = &w->tasks[x];

		if (t->opened && t->op->close)
			t->op->close(t, t->state);
		for (uint32_t o = 0; o < t->nouts && t->outs; o++) {
			free(t->outs[o].chans);
			free(t->outs[o].instance_of_vnode);
		}
		free(t->outs);
		free(t->ins);
		free(t->pw);
		free(t->sync_fds);
		free(t->restore_pw);
		shmrun_kv_free(&t->kv);
	}
	for (uint32_t c = 0; c < w->nouts; c++) {
		shmrun_ring_detach(&w->outs[c].ring);
		free(w->outs[c].ovf);
	}
	for (uint32_t c = 0; c < w->nins; c++)
		shmrun_ring_detach(&w->ins[c].ring);
	free(w->tasks);
	free(w->outs);
	free(w->ins);
	free(w->stalls);
	free(w->children);
	free(w->co.pw_history);
	free(w->co.beats);
}

/* ---- the loop --------------------------------------------------------------- */

static uint32_t step(struct shmrun_worker *w)
{
	uint32_t progress = 0;

	for (uint32_t c = 0; c < w->nouts; c++)
		if (chan_backlogged(&w->outs[c]))
			progress += chan_drain(&w->outs[c]);
	for (uint32_t x = w->ntasks; x-- > 0 && !w->failed;) {
		struct shmrun_task *t = &w->tasks[x];

		if (t->align_epoch && w->checkpointing)
			drop_aborted(t);
		if (t->ended || task_parked(t))
			continue;
		if (t->op->flags & SHMRUN_OP_SOURCE) {
			uint64_t before = t->records_in;
			int r, budget;

			if (w->checkpointing) {
				r = source_barrier(t);
				progress += r > 0;
				if (t->ended || t->exhausted || r < 0)
					continue;
			}
			/* no clock read for an unpaced source: this runs every turn */
			budget = t->rate ? source_budget(t, now_ns()) : (int)PRODUCE_BUDGET;
			if (budget == 0)
				continue; /* paced: not yet */
			r = t->op->produce(t, t->state, (uint32_t)budget);
			rate_return(t, (uint64_t)budget, t->records_in - before);
			progress += (uint32_t)(t->records_in - before) + (r <= 0);
			if (r < 0) {
				if (!w->failed)
					shmrun_task_error(t, "produce failed: %s", strerror(-r));
				note_fail_errno(w, r);
			} else if (r == 0 && w->checkpointing) {
				/* wait for the final epoch, which ends it */
				t->exhausted = true;
				atomic_store_explicit(&w->slots[t->id].exhausted, 1,
						      memory_order_release);
			} else if (r == 0) {
				task_end(t, 0, false);
			}
			continue;
		}
		{
			uint32_t got = 0;

			for (uint32_t i = 0; i < t->nins && !t->ended; i++)
				if (!t->ins[i]->ended && !t->ins[i]->held)
					got += read_channel(t, t->ins[i]);
			progress += got;
			if (!got && t->nins && t->op->flush)
				flush_task(t, 0); /* its input drained */
		}
	}
	for (uint32_t c = 0; c < w->nouts; c++)
		shmrun_ring_flush(&w->outs[c].ring);
	if (w->checkpointing) {
		progress += commit_epochs(w);
		if (w->index == 0)
			progress += shmrun_coordinate(&w->co, w->plan, w->ctl, now_ns());
	}
	return progress;
}

static bool all_done(const struct shmrun_worker *w)
{
	for (uint32_t x = 0; x < w->ntasks; x++)
		if (!w->tasks[x].ended)
			return false;
	for (uint32_t c = 0; c < w->nouts; c++)
		if (chan_backlogged(&w->outs[c]) || shmrun_ring_pending(&w->outs[c].ring))
			return false;
	if (w->checkpointing) {
		/* acquire: pairs with the coordinator's release stores. */
		uint64_t fin = atomic_load_explicit(&w->ctl->final_epoch, memory_order_acquire);

		if (!fin || w->committed_epoch < fin)
			return false;
		if (w->index == 0 && w->co.manifest_pid)
			return false;
	}
	return true;
}

/* Whether anything would progress now: the re-check before the worker sleeps. */
static bool worker_ready(void *arg)
{
	struct shmrun_worker *w = arg;

	for (uint32_t x = 0; x < w->ntasks; x++) {
		struct shmrun_task *t = &w->tasks[x];

		if (t->ended || task_parked(t))
			continue;
		for (uint32_t i = 0; i < t->nins; i++)
			if (!t->ins[i]->ended && !t->ins[i]->held &&
			    shmrun_ring_readable(&t->ins[i]->ring))
				return true;
	}
	for (uint32_t c = 0; c < w->nouts; c++) {
		struct chan_out *o = &w->outs[c];
		uint32_t len;

		if (!chan_backlogged(o))
			continue;
		memcpy(&len, o->ovf + o->ovf_off, 4);
		if (shmrun_ring_writable(&o->ring, len))
			return true;
	}
	return *w->stop != 0;
}

/*
 * How long the worker may sleep as far as its sources go, at most @max_ns: a
 * rate-limited source until its stage's next token is due (at least
 * RATE_MIN_SLEEP_NS, so a high rate is served in batches, not a wake-up per
 * record); an unlimited one that is neither parked (its rings' bells wake
 * the worker) nor exhausted only briefly.
 */
#define RATE_MIN_SLEEP_NS 50000
#define SOURCE_POLL_NS 100000
static int64_t sources_sleep_ns(const struct shmrun_worker *w, int64_t max_ns)
{
	int64_t now = now_ns();

	for (uint32_t x = 0; x < w->ntasks; x++) {
		const struct shmrun_task *t = &w->tasks[x];
		int64_t ns;

		if (!(t->op->flags & SHMRUN_OP_SOURCE) || t->ended || t->exhausted ||
		    task_parked(t))
			continue;
		ns = t->rate ? rate_wait_ns(t, now) : SOURCE_POLL_NS;
		if (ns < RATE_MIN_SLEEP_NS)
			ns = RATE_MIN_SLEEP_NS;
		if (ns < max_ns)
			max_ns = ns;
	}
	return max_ns;
}

/*
 * Nothing progressed: spin (spin, or hybrid for its first SHMRUN_RING_SPIN_NS),
 * then sleep on this worker's bell, which every producer into and consumer of
 * its rings rings after publishing, until the next token of a rate-limited
 * source is due (sources_sleep_ns()); otherwise up to 10 ms between checks.
 */
static void idle_wait(struct shmrun_worker *w, int64_t *idle_since)
{
	enum shmrun_idle idle = w->plan->job->idle;

	if (idle == SHMRUN_IDLE_SPIN) {
		cpu_relax();
		return;
	}
	if (!*idle_since)
		*idle_since = now_ns();
	if (idle == SHMRUN_IDLE_HYBRID && now_ns() - *idle_since < SHMRUN_RING_SPIN_NS) {
		cpu_relax();
		return;
	}
	/* Checkpoint progress (snapshot children, MANIFEST, commits) rings no
	 * bell: with checkpoints on, look again every millisecond. A worker
	 * the placement gave no task only waits for the job's end (and is not
	 * the coordinator): every 100 ms, so that many more workers than CPUs
	 * (workers = 4096 on 2 CPUs) do not flood the CPUs with wakeups. */
	int64_t nap = w->checkpointing ? 1000000 : 10000000;

	if (w->ntasks == 0 && w->index != 0)
		nap = 100000000;
	shmrun_bell_sleep(&w->stats->bell, worker_ready, w, sources_sleep_ns(w, nap));
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

static void publish_stats(struct shmrun_worker *w)
{
	struct shmrun_worker_stats *stats = w->stats;
	uint64_t n = w->nstalls < 1024 ? w->nstalls : 1024;

	for (uint32_t x = 0; x < w->ntasks; x++) {
		struct shmrun_task *t = &w->tasks[x];

		atomic_fetch_add_explicit(&stats->records_in, t->records_in, memory_order_relaxed);
		atomic_fetch_add_explicit(&stats->records_out, t->records_out, memory_order_relaxed);
		atomic_fetch_add_explicit(&stats->keys, t->kv.keys, memory_order_relaxed);
		atomic_fetch_add_explicit(&stats->state_bytes, t->kv.bytes, memory_order_relaxed);
		atomic_fetch_add_explicit(&stats->key_bytes, t->kv.key_bytes, memory_order_relaxed);
	}
	if (n) {
		qsort(w->stalls, n, sizeof(*w->stalls), cmp_i64);
		atomic_store_explicit(&stats->stall_p50_ns, (uint64_t)w->stalls[n / 2],
				      memory_order_relaxed);
		atomic_store_explicit(&stats->stall_p99_ns, (uint64_t)w->stalls[(n * 99) / 100],
				      memory_order_relaxed);
		atomic_store_explicit(&stats->stall_max_ns, (uint64_t)w->stalls[n - 1],
				      memory_order_relaxed);
		atomic_store_explicit(&stats->snapshots, w->nstalls, memory_order_relaxed);
	}
}

int shmrun_worker_run(const struct shmrun_plan *plan, const struct shmrun_segment *seg,
		      uint32_t index, struct shmrun_control *ctl, const volatile int *stop)
{
	struct shmrun_worker_stats *all = shmrun_control_stats(ctl);
	struct shmrun_worker w = {
		.plan = plan,
		.seg = seg,
		.index = index,
		.ctl = ctl,
		.stats = &all[index],
		.all_stats = all,
		.slots = shmrun_control_slots(ctl),
		.checkpointing = plan->job->checkpoint_dir != NULL,
		.committed_epoch = ctl->restored_epoch,
		.stop = stop,
	};
	int64_t idle_since = 0;
	uint32_t turns = 0;
	uint64_t beats = 0;
	int err;

	atomic_store_explicit(&w.stats->pid, (int32_t)getpid(), memory_order_relaxed);
	err = shmrun_state_arena_init();
	if (!err)
		err = setup(&w);
	if (err) {
		if (!w.failed)
			snprintf(w.stats->error, sizeof(w.stats->error), "worker setup failed: %s",
				 strerror(-err));
		shmrun_log(SHMRUN_LOG_ERROR, "%s", w.stats->error);
		teardown(&w);
		return 1;
	}
	for (uint32_t x = 0; x < w.ntasks && !w.failed; x++) {
		struct shmrun_task *t = &w.tasks[x];

		err = t->op->open ? t->op->open(t, &t->state) : 0;
		if (err) {
			if (!w.failed)
				shmrun_task_error(t, "open failed: %s", strerror(-err));
			note_fail_errno(&w, err);
			break;
		}
		t->opened = true;
		err = restore_entries(t);
		if (err && !w.failed)
			shmrun_task_error(t, "restore of per-worker state failed");
		if (err)
			note_fail_errno(&w, err);
	}
	flush_setup(&w);
	w.co.next_ns = now_ns() + (int64_t)plan->job->checkpoint_interval_ns;
	if (ctl->restored_finished) {
		/* Restored from the end-of-input checkpoint of a finished run: the
		 * restore above completed any interrupted sink commit; there is
		 * nothing left to process (end_of_input must not run twice). */
		for (uint32_t x = 0; x < w.ntasks; x++)
			w.tasks[x].ended = true;
		goto done;
	}
	while (!w.failed && !*stop) {
		/* relaxed: a liveness hint for worker 0's timeout message */
		atomic_store_explicit(&w.stats->heartbeat, ++beats, memory_order_relaxed);
		if (atomic_load_explicit(&ctl->failed, memory_order_acquire)) {
			snprintf(w.stats->error, sizeof(w.stats->error), "%s%.400s",
				 ctl->failed_why[0] ? "checkpoint failed: " : "the final checkpoint failed",
				 ctl->failed_why);
			w.failed = true;
			break;
		}
		if (w.nchildren && (++turns & 63) == 0)
			reap_children(&w);
		if (step(&w)) {
			idle_since = 0;
			flush_tasks(&w, true);
			continue;
		}
		flush_tasks(&w, false); /* nothing to do: every input drained */
		if (all_done(&w))
			break;
		reap_children(&w);
		idle_wait(&w, &idle_since);
	}
	if (*stop && !w.failed)
		flush_tasks(&w, false); /* a stop without final checkpoint: whole lines out */
done:
	/* Snapshot children still writing (late writers of an aborted epoch)
	 * are waited for, up to 10 s: each removes what it wrote once it sees
	 * the abort, which it could not do if this worker's exit killed it
	 * (PR_SET_PDEATHSIG) mid-way. When the job fails on a checkpoint, the
	 * other workers' writers too (ctl->writers): the launcher kills every
	 * worker once one has exited. What a killed one leaves is removed at
	 * the next start (shmrun_ckpt_remove_incomplete()). */
	reap_children(&w);
	for (int64_t until = now_ns() + 10000000000LL;
	     (w.nchildren ||
	      (atomic_load_explicit(&ctl->failed, memory_order_acquire) &&
	       atomic_load_explicit(&ctl->writers, memory_order_relaxed))) &&
	     now_ns() < until;) {
		usleep(1000);
		reap_children(&w);
	}
	publish_stats(&w);
	err = w.failed ? 1 : *stop ? 3 : 0;
	teardown(&w);
	return err;
}
