/*
 * runtime/gateway.c: the gateway thread of a multi-host job (gateway.h; issue
 * 16; /work/notes/multihost-design.md is the design every part follows).
 *
 * What it is for. A channel whose producer task is on host A and consumer on
 * host B is one ring on each host: on A the OUTBOUND ring (the worker
 * produces, A's gateway consumes), on B the INBOUND ring (B's gateway
 * produces, the worker consumes). The gateway moves frames (kind, flags,
 * source and destination task, payload) unchanged from A's ring into an MPI
 * message and from the message into B's ring, and mirrors the control-area
 * words the checkpoint protocol needs between host 0 and the others. It is
 * the only thread of the process that calls MPI (MPI_THREAD_FUNNELED: it
 * calls MPI_Init_thread and MPI_Finalize itself).
 *
 * The stream. One ordered stream per host pair: every message from rank a to
 * rank b has tag GW_TAG on MPI_COMM_WORLD, so MPI's non-overtaking rule keeps
 * them in order; each carries a sequence number the receiver checks.
 *
 *     message  [u32 magic][u32 bytes][u64 seq][u32 credits_returned][u32 nentries]
 *              then nentries entries, each 8-byte aligned:
 *     entry    [u32 channel][u16 kind][u16 flags][u32 len][u32 src_task]
 *              [u32 dst_task][u32 0][payload, padded to 8]
 *
 * A data entry is one frame of the channel's ring; a control entry has channel
 * UINT32_MAX and a GW_CTL_* kind. Data entries come first, then the control
 * entries, which are written when the message goes out (so they carry the
 * newest values). The design note's entry header has no task ids; they are
 * carried so that the frame arrives exactly as it was written, without the
 * gateway having to look the channel up in the plan.
 *
 * Flow control, two levels.
 *   1. Channel credits (Flink's credit-based flow control). B's inbound ring
 *      has the capacity of A's outbound ring and receives exactly its frames,
 *      in order, from the same start index; so a frame lies at the same
 *      index in both (skip markers included: placement depends only on the
 *      index and the size). B reports each inbound ring's consumer position
 *      (shmrun_ring_consumed()) in CREDIT entries; A takes a frame out of its
 *      ring only when credit + capacity >= the index after the frame — when
 *      the frame is sure to fit into B's ring. So B never waits and never
 *      queues (a frame that does not fit is a protocol error, GW_EPROTO),
 *      and a slow consumer on B holds back its producer on A through A's
 *      ring filling up, exactly as within one host.
 *   2. Message slots. Each gateway pre-posts GW_SLOTS persistent receives per
 *      peer (MPI_Recv_init + MPI_Start), each of the peer's message size, and
 *      a sender has at most GW_SLOTS messages a peer has not yet handed back:
 *      the receiver reposts a slot after reading its message and returns it
 *      in the credits_returned of its next message. So nothing ever lands in
 *      MPI's unbounded unexpected-message queue. A message with frames needs
 *      two free slots; the last one is only for a message that returns slots
 *      (credits_returned > 0), and a gateway owing GW_SLOTS / 2 slots sends
 *      them back at once, even with nothing else to say. Hence no deadlock:
 *      when a side has no slot left, the other owes it every slot and has at
 *      least one to return them with (a message in the last slot carries a
 *      return, which gives its receiver a slot).
 *
 * Flushing (Flink). A peer's open message goes out when its frames fill it,
 * when it has been open host_flush, or at once when it holds a barrier or an
 * END frame (alignment downstream must not wait for a timer), or when a
 * control word changed. Every peer gets a message at least every
 * GW_HEARTBEAT_NS (empty if need be); a peer silent for host_timeout is taken
 * for hung (MPI does not notice a hung peer): poll returns -EPIPE naming it and
 * every other peer is sent ABORT.
 *
 * Control mirroring. Host 0's control area is the coordinator's (its worker 0
 * runs shmrun_coordinate()):
 *   - host h -> host 0: each task slot of a task on host h (done_epoch,
 *     failed_epoch, error, exhausted and the file's size, xxh64, kv_bytes,
 *     pw_bytes), written into host 0's slot of that task, fields before the
 *     epochs (release), as shmrun_slot_report() orders them; a stop request
 *     (stop_requested set on host h);
 *   - host 0 -> every host: trigger, complete, aborted and final epochs,
 *     final_is_stop, stop_requested, failed (+failed_errno, failed_why);
 *     epochs only ever move forward and flags are only ever set, in the
 *     order the coordinator stores them (final_is_stop before final_epoch
 *     before trigger_epoch; failed_why before failed). Not stop_now: it is
 *     between one launcher and its own workers (launcher.c, stop_all()), set
 *     just before that launcher signals them; each host's launcher stops its
 *     own workers when the job ends or fails.
 *   - checkpoint_layout = per_host: host 0 sends each peer a COMMIT with the
 *     MANIFEST bytes of a newly complete epoch (shmrun_ckpt_manifest_bytes())
 *     ahead of the complete_epoch that publishes it, and mirrors
 *     complete_epoch no further than the COMMITs sent; host h installs the
 *     MANIFEST in its own checkpoint_dir (shmrun_ckpt_install_manifest():
 *     temp file, fsync, rename, directory fsync) and retires old ones before
 *     it publishes the epoch, so its sinks commit only on a durable MANIFEST.
 *
 * Start. Before the loop, the hosts agree on the job and on the epoch to
 * restore with a few collectives ("the start exchange" below, agree()); the
 * workers of every host wait for it (ctl->go). A peer that ended its stream
 * (EOS) while this host is not finishing is given host_timeout, then the job
 * is aborted: this host's workers would wait for it forever.
 *
 * Idle. The loop polls every outbound ring and MPI_Testsome()s all its
 * requests; when a turn moved nothing it sleeps, from GW_MIN_SLEEP_NS doubling
 * to GW_MAX_SLEEP_NS (1 ms), so that two "hosts" on a 2-core box leave the
 * CPUs to their workers; a turn that moved anything resets it.
 *
 * Bells. Writing into an inbound ring is published with shmrun_ring_flush(),
 * which rings the consuming worker's bell (the wake bell set at attach);
 * taking frames out of an outbound ring ends with shmrun_ring_consumer_flush(),
 * which rings the producing worker's bell, so a worker asleep with a
 * backlogged channel wakes when room appears.
 *
 * Invariants.
 *   - For every outbound ring: index after every frame taken <= credit + capacity.
 *   - Per peer: messages sent - slots returned by the peer <= GW_SLOTS.
 *   - Messages of one peer are read in posting order of the receives (MPI
 *     matches posted receives in order), which is the peer's send order;
 *     seq checks it.
 *   - Only the gateway thread calls MPI; the launcher's thread talks to it
 *     through g->lock (requests, failure text) and atomics (state).
 *
 * Rejected designs.
 *   - A socket layer of our own: the issue asks for a kept transport (MPI).
 *   - MPI calls from the workers (each worker an MPI rank): forking after
 *     MPI_Init is not allowed, workers would need MPI_THREAD_MULTIPLE-like
 *     coordination, and H·w ranks would mean (H·w)^2 connections. Thrill's
 *     one thread per host is the model.
 *   - Blocking sends (MPI_Send) and MPI_Probe-driven receives: a slow peer
 *     would stall every other stream of the host; unexpected messages grow
 *     without bound.
 *   - A per-channel MPI tag: MPI does not order across tags, and a barrier
 *     must not overtake the frames before it on the same channel nor be
 *     reordered against other control words; one stream keeps it simple.
 *   - Queueing frames on B when its ring is full: unbounded memory on B, and
 *     backpressure lost; credits reserve the room before the frame leaves A.
 *   - Trying to survive a dead host (ULFM is not in Debian's Open MPI): like
 *     Timely, any failure restarts the whole job from its last checkpoint
 *     (`shmrun supervise`); the gateway only makes sure everyone notices.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ckpt/hosts.h"
#include "ckpt/manifest.h" /* shmrun_ckpt_remove() */
#include "control.h"
#include "gateway.h"
#include "internal.h"
#include "plan.h"
#include "util.h"

#ifndef SHMRUN_HAVE_MPI

int shmrun_gateway_start(struct shmrun_gateway **out, const struct shmrun_gateway_conf *c)
{
	(void)c;
	*out = NULL;
	return -ENOTSUP;
}

int shmrun_gateway_poll(struct shmrun_gateway *g, char *why, size_t len)
{
	(void)g;
	if (why && len)
		snprintf(why, len, "shmrun was built without MPI");
	return -ENOTSUP;
}

void shmrun_gateway_abort(struct shmrun_gateway *g, const char *why)
{
	(void)g;
	(void)why;
}

int shmrun_gateway_finish(struct shmrun_gateway *g)
{
	(void)g;
	return -ENOTSUP;
}

#else /* SHMRUN_HAVE_MPI */

#include <mpi.h>

#define GW_TAG		16	     /* the one tag of every message */
#define GW_MAGIC	0x31574753u  /* "SGW1" little-endian */
#define GW_SLOTS	8u	     /* K: pre-posted receives per peer */
#define GW_MSG_BYTES	(256u << 10) /* a message, at least (larger for larger frames) */
#define GW_CTL_BYTES	(16u << 10)  /* of which kept for control entries */
#define GW_HEARTBEAT_NS 100000000    /* a message to every peer at least this often */
#define GW_MIN_SLEEP_NS 20000	     /* idle back-off: first sleep */
#define GW_MAX_SLEEP_NS 1000000	     /* idle back-off: longest sleep (1 ms) */
#define GW_CTL_CHANNEL	UINT32_MAX   /* channel of a control entry */
#define GW_KIND_SKIP	0	     /* data entry: a skip marker (payload: u64 index after it) */

/* Control entry kinds (entry.kind when channel == GW_CTL_CHANNEL). */
enum {
	GW_CTL_HELLO = 1,  /* [u32 hosts][u32 rings][u64 table hash] */
	GW_CTL_CREDIT = 2, /* n x [u32 channel][u32 0][u64 consumer position] */
	GW_CTL_SLOT = 3,   /* struct gw_slot_wire */
	GW_CTL_EPOCHS = 4, /* struct gw_epochs_wire, then failed_why (why_len bytes) */
	GW_CTL_STOP = 5,   /* a stop request (to host 0) */
	GW_CTL_ABORT = 6,  /* why (text) */
	GW_CTL_EOS = 7,	   /* end of stream: nothing follows */
	GW_CTL_COMMIT = 8, /* [u64 epoch][MANIFEST bytes]: per_host layout, before EPOCHS */
};

struct gw_msg_hdr {
	uint32_t magic, bytes;
	uint64_t seq;
	uint32_t credits_returned, nentries;
};

struct gw_entry {
	uint32_t channel;
	uint16_t kind, flags;
	uint32_t len, src_task, dst_task, reserved;
};

struct gw_slot_wire {
	uint32_t task, exhausted;
	uint64_t done_epoch, failed_epoch;
	int32_t error;
	uint32_t reserved;
	uint64_t size, xxh64, kv_bytes, pw_bytes;
};

struct gw_epochs_wire {
	uint64_t trigger, complete, aborted, final;
	uint32_t final_is_stop, stop_requested, failed, reserved; /* reserved: 0 */
	int32_t failed_errno;
	uint32_t why_len;
};

_Static_assert(sizeof(struct gw_msg_hdr) == 24, "message header");
_Static_assert(sizeof(struct gw_entry) == 24, "entry header");
_Static_assert(sizeof(struct gw_slot_wire) == 64, "slot entry");
_Static_assert(sizeof(struct gw_epochs_wire) == 56, "epochs entry");

#define PAD8(x) (((x) + 7u) & ~(uint64_t)7u)

/* One ring with a remote end, as the gateway holds it. */
struct gw_ring {
	uint32_t channel, peer;
	bool outbound;
	struct shmrun_ring r; /* consumer handle (outbound) or producer handle (inbound) */
	uint64_t cap;
	uint64_t credit;   /* outbound: the peer's consumer position of its copy */
	uint64_t last_end; /* outbound: index after the last frame taken */
	bool skip_sent;	   /* outbound: the skip before the peeked frame went out */
	uint64_t reported; /* inbound: the consumer position last sent */
	bool touched;	   /* inbound: frames written since the last flush */
};

/* What was last sent of a control area's words (the change detector). */
struct gw_epochs_sent {
	struct gw_epochs_wire w;
	bool valid;
};

struct gw_peer {
	uint32_t host;
	uint32_t msg_max; /* bytes of a message buffer, both ways */
	/* receiving */
	unsigned char *rbuf;  /* GW_SLOTS x msg_max */
	MPI_Request *rreq;    /* GW_SLOTS persistent receives (in g->reqs) */
	bool rdone[GW_SLOTS]; /* completed, not read yet */
	int rcount[GW_SLOTS]; /* bytes received */
	uint32_t rnext;	      /* the receive the next message lands in */
	uint64_t rseq;	      /* its expected seq */
	uint32_t owed;	      /* slots reposted, not yet returned */
	/* sending */
	unsigned char *sbuf; /* (GW_SLOTS + 1) x msg_max */
	MPI_Request *sreq;   /* GW_SLOTS + 1 sends (in g->reqs), MPI_REQUEST_NULL when free */
	int open;	     /* buffer with frames being gathered, -1 if none */
	uint32_t open_off;   /* bytes used in it (header included) */
	uint32_t open_n;     /* entries in it */
	int64_t open_since;
	bool urgent;	/* it holds a barrier or END frame */
	bool full;	/* a frame did not fit in it */
	bool blocked;	/* a ring waits for credits: more frames cannot come */
	uint32_t slots; /* messages the peer can still take */
	uint64_t sseq;
	int64_t last_send, last_recv;
	int64_t credit_since; /* a credit changed but was not sent yet, since */
	bool hello_sent, got_hello;
	bool stop_sent; /* to host 0: a stop request went out */
	bool abort_sent, eos_sent, got_eos;
	bool silent; /* timed out */
	int64_t eos_at; /* when its EOS came (this host may still be running) */
	bool eos_late;	/* its EOS came host_timeout ago and this host still runs */
	struct gw_epochs_sent epochs;
	uint64_t committed; /* per_host: the newest epoch whose MANIFEST it was sent */
};

struct gw_slot_sent {
	uint64_t done_epoch, failed_epoch;
	int32_t error;
	uint32_t exhausted;
};

struct shmrun_gateway {
	struct shmrun_gateway_conf conf;
	struct gw_ring *rings;
	uint32_t nrings;
	uint32_t *by_channel;		/* channel -> index in rings, UINT32_MAX if none */
	uint32_t nchannels;		/* entries of by_channel */
	struct gw_peer *peers;		/* indexed by host; peers[conf.host] unused */
	struct gw_slot_sent *slot_sent; /* per task (hosts other than 0) */
	bool *slot_dirty;		/* per task: changed since last sent */
	uint32_t rr;			/* pump's round-robin start */
	MPI_Request *reqs; /* all requests, per peer: GW_SLOTS receives, GW_SLOTS + 1 sends */
	int *idx;
	MPI_Status *st;
	int nreqs;
	/* checkpoint_layout = per_host, host 0: the MANIFEST of the newest
	 * complete epoch, read once for every peer's COMMIT */
	bool per_host;
	uint64_t installed; /* per_host, other hosts: the newest MANIFEST installed */
	uint64_t manifest_epoch;
	char *manifest;
	size_t manifest_len;
	pthread_t thread;
	bool mpi_init;
	bool mpi_fin_ok;
	bool broken;	 /* an MPI call failed: MPI is not called again */
	int64_t mute_at; /* TEST-ONLY: send nothing from then on (0: never) */
	int64_t mute_ms; /* TEST-ONLY: mute_at is that long after the start barrier */

	pthread_mutex_t lock; /* guards what follows and the request flags */
	pthread_cond_t cond;
	bool started; /* the thread finished MPI_Init_thread (start_err) */
	int start_err;
	bool abort_req, finish_req;
	bool abort_done; /* the ABORT messages are sent (or gave up) */
	char abort_why[600];
	char why[512];	   /* the failure, once state != 0 */
	_Atomic int state; /* 0, or the -errno poll returns */
	int result;	   /* the thread's exit status (finish) */
};

/* ---- failure ------------------------------------------------------------ */

static void fail(struct shmrun_gateway *g, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Record the first failure: poll returns @err with the text from then on. */
static void fail(struct shmrun_gateway *g, int err, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&g->lock);
	if (!atomic_load_explicit(&g->state, memory_order_relaxed)) {
		va_start(ap, fmt);
		vsnprintf(g->why, sizeof(g->why), fmt, ap);
		va_end(ap);
		/* release: pairs with the acquire in shmrun_gateway_poll(), which
		 * then reads why (under the lock anyway). */
		atomic_store_explicit(&g->state, err, memory_order_release);
	}
	pthread_mutex_unlock(&g->lock);
}

static bool failed(struct shmrun_gateway *g)
{
	return atomic_load_explicit(&g->state, memory_order_relaxed) != 0;
}

static void mpi_fail(struct shmrun_gateway *g, const char *what, int rc)
{
	char s[MPI_MAX_ERROR_STRING];
	int n = 0;

	if (MPI_Error_string(rc, s, &n) != MPI_SUCCESS)
		snprintf(s, sizeof(s), "error %d", rc);
	g->broken = true;
	fail(g, -EIO, "%s: %s", what, s);
}

/* ---- the channel table ---------------------------------------------------- */

static uint64_t mix64(uint64_t x)
{
	/* splitmix64's finaliser: a cheap, good 64-bit mix */
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/*
 * The table of rings between this host and @peer, independent of order, as
 * the sender of a HELLO sees it; the receiver computes it with @flip (its
 * outbound rings are the sender's inbound ones). *@count: the rings.
 */
static uint64_t table_hash(const struct shmrun_gateway *g, uint32_t peer, bool flip,
			   uint32_t *count)
{
	uint64_t h = 0;

	*count = 0;
	for (uint32_t i = 0; i < g->nrings; i++) {
		const struct gw_ring *r = &g->rings[i];

		if (r->peer != peer)
			continue;
		(*count)++;
		h += mix64(((uint64_t)r->channel << 32) ^ (r->cap << 1) ^
			   (uint64_t)(r->outbound != flip));
	}
	return h;
}

/* ---- sending ------------------------------------------------------------ */

static unsigned char *sbuf(struct gw_peer *p, int i)
{
	return p->sbuf + (size_t)i * p->msg_max;
}

static int free_send_buffer(struct gw_peer *p)
{
	for (int i = 0; i < (int)GW_SLOTS + 1; i++)
		if (i != p->open && p->sreq[i] == MPI_REQUEST_NULL)
			return i;
	return -1;
}

/* Open a message buffer for frames to @p. Return: false if none is free. */
static bool open_message(struct gw_peer *p, int64_t now)
{
	if (p->open >= 0)
		return true;
	p->open = free_send_buffer(p);
	if (p->open < 0)
		return false;
	p->open_off = sizeof(struct gw_msg_hdr);
	p->open_n = 0;
	p->open_since = now;
	p->urgent = p->full = false;
	return true;
}

/* Append a control entry's header at @off of @buf (bounded by @max);
 * return the payload pointer, or NULL if @len payload bytes do not fit. */
static unsigned char *put_ctl(unsigned char *buf, uint32_t *off, uint32_t max, uint16_t kind,
			      uint32_t len, uint32_t *n)
{
	struct gw_entry e = {.channel = GW_CTL_CHANNEL, .kind = kind, .len = len};
	unsigned char *pl;

	if ((uint64_t)*off + sizeof(e) + PAD8(len) > max)
		return NULL;
	memcpy(buf + *off, &e, sizeof(e));
	pl = buf + *off + sizeof(e);
	memset(pl + len, 0, PAD8(len) - len);
	*off += (uint32_t)(sizeof(e) + PAD8(len));
	(*n)++;
	return pl;
}

/* This host's control words to mirror to the other hosts (host 0). */
static void read_epochs(const struct shmrun_control *ctl, struct gw_epochs_wire *w)
{
	memset(w, 0, sizeof(*w));
	/* acquire: pairs with the coordinator's release stores; failed_why and
	 * failed_errno are stored before failed, final_is_stop before
	 * final_epoch. Loaded in the reverse order of the stores. */
	w->failed = atomic_load_explicit(&ctl->failed, memory_order_acquire);
	w->trigger = atomic_load_explicit(&ctl->trigger_epoch, memory_order_acquire);
	w->final = atomic_load_explicit(&ctl->final_epoch, memory_order_acquire);
	w->final_is_stop = atomic_load_explicit(&ctl->final_is_stop, memory_order_relaxed);
	w->complete = atomic_load_explicit(&ctl->complete_epoch, memory_order_acquire);
	w->aborted = atomic_load_explicit(&ctl->aborted_epoch, memory_order_acquire);
	w->stop_requested = atomic_load_explicit(&ctl->stop_requested, memory_order_acquire);
	if (w->failed) {
		w->failed_errno = atomic_load_explicit(&ctl->failed_errno, memory_order_relaxed);
		w->why_len = (uint32_t)strnlen(ctl->failed_why, sizeof(ctl->failed_why) - 1);
	}
}

static bool epochs_differ(const struct gw_epochs_wire *a, const struct gw_epochs_wire *b)
{
	return memcmp(a, b, sizeof(*a)) != 0;
}

/* Read task @t's slot into @w; false if a report landed meanwhile (retry later). */
static bool read_slot(struct shmrun_control *ctl, uint32_t t, struct gw_slot_wire *w)
{
	struct shmrun_task_slot *s = &shmrun_control_slots(ctl)[t];
	uint64_t done;

	memset(w, 0, sizeof(*w));
	w->task = t;
	/* acquire: pairs with the release store of done_epoch (failed_epoch) in
	 * shmrun_slot_report(): the fields stored before it are visible. */
	w->done_epoch = atomic_load_explicit(&s->done_epoch, memory_order_acquire);
	w->failed_epoch = atomic_load_explicit(&s->failed_epoch, memory_order_acquire);
	w->error = atomic_load_explicit(&s->error, memory_order_relaxed);
	w->exhausted = atomic_load_explicit(&s->exhausted, memory_order_acquire);
	w->size = s->size;
	w->xxh64 = s->xxh64;
	w->kv_bytes = s->kv_bytes;
	w->pw_bytes = s->pw_bytes;
	/* acquire fence: the field reads above happen before this re-check (a
	 * seqlock's read side); a report in between shows as a new done_epoch. */
	atomic_thread_fence(memory_order_acquire);
	done = atomic_load_explicit(&s->done_epoch, memory_order_relaxed);
	return done == w->done_epoch;
}

static bool task_local(const struct shmrun_gateway *g, uint32_t t)
{
	return g->conf.plan->tasks[t].worker / g->conf.workers_per_host == g->conf.host;
}

/* Scan this host's task slots (hosts other than 0): mark those that changed. */
static bool scan_slots(struct shmrun_gateway *g)
{
	const struct shmrun_plan *plan = g->conf.plan;
	bool any = false;

	if (g->conf.host == 0 || !plan)
		return false;
	for (uint32_t t = 0; t < plan->ntasks; t++) {
		struct shmrun_task_slot *s = &shmrun_control_slots(g->conf.ctl)[t];
		struct gw_slot_sent *o = &g->slot_sent[t];

		if (!task_local(g, t))
			continue;
		if (atomic_load_explicit(&s->done_epoch, memory_order_relaxed) != o->done_epoch ||
		    atomic_load_explicit(&s->failed_epoch, memory_order_relaxed) !=
			o->failed_epoch ||
		    atomic_load_explicit(&s->error, memory_order_relaxed) != o->error ||
		    atomic_load_explicit(&s->exhausted, memory_order_relaxed) != o->exhausted)
			g->slot_dirty[t] = true;
		any |= g->slot_dirty[t];
	}
	return any;
}

/*
 * The epochs host 0 mirrors to @p. With checkpoint_layout = per_host the
 * complete epoch goes no further than the MANIFEST @p was sent (a COMMIT):
 * @p installs it before it publishes the epoch (ckpt/hosts.h).
 */
static void epochs_for(struct shmrun_gateway *g, const struct gw_peer *p, struct gw_epochs_wire *w)
{
	read_epochs(g->conf.ctl, w);
	if (g->per_host && w->complete > p->committed)
		w->complete = p->committed;
}

/*
 * Host 0, per_host: the MANIFEST of complete epoch @e for the COMMITs
 * (cached). Return: 0, or -errno (recorded as the gateway's failure).
 */
static int load_manifest(struct shmrun_gateway *g, uint64_t e)
{
	const struct shmrun_job *job = g->conf.plan->job;
	char why[PATH_MAX + 256];
	char *bytes = NULL;
	size_t len = 0;
	int err;

	if (g->manifest_epoch == e)
		return 0;
	err = shmrun_ckpt_manifest_bytes(job->checkpoint_dir, e, shmrun_fingerprint(job), &bytes,
					 &len, why, sizeof(why));
	if (err) {
		fail(g, err, "host 0: the MANIFEST of epoch %" PRIu64 " for the other hosts: %s", e,
		     why);
		return err;
	}
	free(g->manifest);
	g->manifest = bytes;
	g->manifest_len = len;
	g->manifest_epoch = e;
	return 0;
}

/* Whether @p has control words waiting that must go out now. */
static bool control_pending(struct shmrun_gateway *g, struct gw_peer *p, bool slots_changed,
			    bool aborting, bool finishing)
{
	if (!p->hello_sent)
		return true;
	if (aborting && !p->abort_sent)
		return true;
	if (g->conf.host == 0) {
		struct gw_epochs_wire w;

		if (g->per_host &&
		    atomic_load_explicit(&g->conf.ctl->complete_epoch, memory_order_acquire) >
			    p->committed)
			return true;
		epochs_for(g, p, &w);
		if (!p->epochs.valid || epochs_differ(&w, &p->epochs.w))
			return true;
	} else if (p->host == 0) {
		if (slots_changed)
			return true;
		if (!p->stop_sent &&
		    atomic_load_explicit(&g->conf.ctl->stop_requested, memory_order_relaxed))
			return true;
	}
	return finishing && !p->eos_sent;
}

/*
 * Write the control entries for @p into @buf from *@off (at most @max bytes);
 * @eos: end the stream with this message. Entries that do not fit stay
 * pending for the next message.
 */
static void write_control(struct shmrun_gateway *g, struct gw_peer *p, unsigned char *buf,
			  uint32_t *off, uint32_t max, uint32_t *n, bool aborting, bool eos)
{
	unsigned char *pl;

	if (p->eos_sent)
		return; /* after the EOS a message only returns slots */
	if (!p->hello_sent) {
		uint32_t count;
		uint64_t h = table_hash(g, p->host, false, &count);

		pl = put_ctl(buf, off, max, GW_CTL_HELLO, 16, n);
		if (pl) {
			memcpy(pl, &g->conf.hosts, 4);
			memcpy(pl + 4, &count, 4);
			memcpy(pl + 8, &h, 8);
			p->hello_sent = true;
		}
	}
	if (aborting && !p->abort_sent) {
		uint32_t len = (uint32_t)strlen(g->abort_why);

		pl = put_ctl(buf, off, max, GW_CTL_ABORT, len, n);
		if (pl) {
			memcpy(pl, g->abort_why, len);
			p->abort_sent = true;
		}
	}
	/* credits: every inbound ring from @p whose consumer moved */
	for (uint32_t i = 0; i < g->nrings; i++) {
		struct gw_ring *r = &g->rings[i];
		uint64_t pos;

		if (r->outbound || r->peer != p->host)
			continue;
		pos = shmrun_ring_consumed(&r->r);
		if (pos == r->reported)
			continue;
		pl = put_ctl(buf, off, max, GW_CTL_CREDIT, 16, n);
		if (!pl)
			break;
		memcpy(pl, &r->channel, 4);
		memset(pl + 4, 0, 4);
		memcpy(pl + 8, &pos, 8);
		r->reported = pos;
	}
	p->credit_since = 0;
	if (g->conf.host == 0) {
		struct gw_epochs_wire w;
		uint64_t e = atomic_load_explicit(&g->conf.ctl->complete_epoch, memory_order_acquire);

		/* per_host: the COMMIT (rank 0's MANIFEST) before the epoch */
		if (g->per_host && e > p->committed && !failed(g) && load_manifest(g, e) == 0) {
			pl = put_ctl(buf, off, max, GW_CTL_COMMIT, (uint32_t)(8 + g->manifest_len), n);
			if (pl) {
				memcpy(pl, &e, 8);
				memcpy(pl + 8, g->manifest, g->manifest_len);
				p->committed = e;
			} else if (g->manifest_len + 8 + sizeof(struct gw_entry) +
					   sizeof(struct gw_msg_hdr) >
				   p->msg_max) {
				fail(g, -EFBIG,
				     "host 0: the MANIFEST of epoch %" PRIu64 " (%zu bytes) is larger "
				     "than a message to host %u (%u bytes): use checkpoint_layout = "
				     "shared",
				     e, g->manifest_len, p->host, p->msg_max);
			}
		}
		epochs_for(g, p, &w);
		if (!p->epochs.valid || epochs_differ(&w, &p->epochs.w)) {
			pl = put_ctl(buf, off, max, GW_CTL_EPOCHS, sizeof(w) + w.why_len, n);
			if (pl) {
				memcpy(pl, &w, sizeof(w));
				memcpy(pl + sizeof(w), g->conf.ctl->failed_why, w.why_len);
				p->epochs.w = w;
				p->epochs.valid = true;
			}
		}
	} else if (p->host == 0) {
		const struct shmrun_plan *plan = g->conf.plan;

		for (uint32_t t = 0; plan && t < plan->ntasks; t++) {
			struct gw_slot_wire w;

			if (!g->slot_dirty[t])
				continue;
			if (!read_slot(g->conf.ctl, t, &w))
				continue; /* a report is landing: next message */
			pl = put_ctl(buf, off, max, GW_CTL_SLOT, sizeof(w), n);
			if (!pl)
				break;
			memcpy(pl, &w, sizeof(w));
			g->slot_sent[t] = (struct gw_slot_sent){w.done_epoch, w.failed_epoch,
								w.error, w.exhausted};
			g->slot_dirty[t] = false;
		}
		if (!p->stop_sent &&
		    atomic_load_explicit(&g->conf.ctl->stop_requested, memory_order_relaxed) &&
		    put_ctl(buf, off, max, GW_CTL_STOP, 0, n))
			p->stop_sent = true;
	}
	if (eos && !p->eos_sent && put_ctl(buf, off, max, GW_CTL_EOS, 0, n))
		p->eos_sent = true;
}

/*
 * Send buffer @i to @p: header, the frames already in it, control entries.
 * Return: 0 or -1 (MPI error, recorded).
 */
static int send_buffer(struct shmrun_gateway *g, struct gw_peer *p, int i, uint32_t off, uint32_t n,
		       bool aborting, bool eos)
{
	unsigned char *buf = sbuf(p, i);
	struct gw_msg_hdr h;
	int rc;

	write_control(g, p, buf, &off, p->msg_max, &n, aborting, eos);
	h.magic = GW_MAGIC;
	h.bytes = off;
	h.seq = p->sseq++;
	h.credits_returned = p->owed;
	h.nentries = n;
	memcpy(buf, &h, sizeof(h));
	rc = MPI_Isend(buf, (int)off, MPI_BYTE, (int)p->host, GW_TAG, MPI_COMM_WORLD, &p->sreq[i]);
	if (rc != MPI_SUCCESS) {
		mpi_fail(g, "MPI_Isend", rc);
		return -1;
	}
	p->owed = 0;
	p->slots--;
	p->last_send = shmrun_now_ns();
	return 0;
}

/* A message may go to @p: two free slots, or the last one for returning slots. */
static bool may_send(const struct gw_peer *p, bool frames)
{
	return p->slots >= 2 || (!frames && p->slots == 1 && p->owed > 0);
}

/*
 * Decide whether @p gets a message now, and send it. @aborting: ABORT goes
 * out; @eos: the stream may end (finishing, the rings drained as far as
 * credits allow). Return: whether a message went out.
 */
static bool maybe_send(struct shmrun_gateway *g, struct gw_peer *p, int64_t now, bool slots_changed,
		       bool aborting, bool eos)
{
	bool frames, want_frames, ctl;
	int i;

	if (p->silent || (g->mute_at && now >= g->mute_at))
		return false;
	if (p->eos_sent) {
		/* the stream ended: only return slots, until the peer's ends too
		 * (it may still need them to send its last frames and EOS) */
		if (p->got_eos || p->owed < GW_SLOTS / 2 || !may_send(p, false))
			return false;
		i = free_send_buffer(p);
		return i >= 0 &&
		       send_buffer(g, p, i, sizeof(struct gw_msg_hdr), 0, aborting, false) == 0;
	}
	if (p->got_eos && p->open >= 0) {
		/* the peer's workers are gone: frames for them are moot */
		p->open = -1;
	}
	frames = p->open >= 0 && p->open_n > 0;
	/* a ring blocked on credits: waiting for more frames is pointless */
	want_frames = frames && (p->urgent || p->full || p->blocked || eos || aborting ||
				 now - p->open_since >= g->conf.flush_ns);
	ctl = control_pending(g, p, slots_changed, aborting, eos) || p->owed >= GW_SLOTS / 2 ||
	      now - p->last_send >= GW_HEARTBEAT_NS ||
	      (p->credit_since && now - p->credit_since >= g->conf.flush_ns);
	if (want_frames && may_send(p, true)) {
		i = p->open;
		p->open = -1;
		p->blocked = false;
		return send_buffer(g, p, i, p->open_off, p->open_n, aborting, eos) == 0;
	}
	if (!ctl || !may_send(p, false))
		return false;
	/* control only; frames still open wait for a second slot, and the EOS
	 * for them */
	i = free_send_buffer(p);
	if (i < 0)
		return false;
	return send_buffer(g, p, i, sizeof(struct gw_msg_hdr), 0, aborting, eos && !frames) == 0;
}

/* ---- outbound rings ------------------------------------------------------- */

/*
 * Take frames out of every outbound ring while they fit in the peer's ring
 * (credits) and in the peer's open message. *@left: whether a ring still
 * holds a frame for a peer whose stream has not ended. Return: frames moved.
 */
static uint32_t pump(struct shmrun_gateway *g, int64_t now, bool *left)
{
	uint32_t moved = 0;

	for (uint32_t k = 0; k < g->nrings; k++) {
		struct gw_ring *r = &g->rings[(g->rr + k) % g->nrings];
		struct gw_peer *p = &g->peers[r->peer];
		uint32_t here = 0;
		bool pending = false;

		if (!r->outbound || p->silent || p->eos_sent || p->got_eos)
			continue;
		for (;;) {
			const struct shmrun_frame *f;
			struct gw_entry e;
			uint64_t pos, after, ebytes;
			int err = shmrun_ring_peek(&r->r, &f);

			if (err == -EAGAIN)
				break;
			pending = true;
			if (err) {
				fail(g, -EPROTO,
				     "channel %" PRIu32
				     ": corrupt frame in the ring to host %" PRIu32 " (%s)",
				     r->channel, r->peer, strerror(-err));
				return moved;
			}
			pos = shmrun_ring_position(&r->r);
			after = pos + shmrun_ring_frame_bytes_(f->len);
			if (pos != r->last_end && !r->skip_sent) {
				/* the frame lies behind a skip marker: the peer
				 * publishes its own first (shmrun_ring_skip()), since
				 * its reserve would not always put the same one
				 * there (a skip published alone; ring.h) */
				if (pos - r->credit > r->cap) {
					p->blocked = true;
					break;
				}
				if (!open_message(p, now))
					break;
				if (p->open_off + sizeof(e) + 8 > p->msg_max - GW_CTL_BYTES) {
					p->full = true;
					break;
				}
				e = (struct gw_entry){
				    .channel = r->channel, .kind = GW_KIND_SKIP, .len = 8};
				memcpy(sbuf(p, p->open) + p->open_off, &e, sizeof(e));
				memcpy(sbuf(p, p->open) + p->open_off + sizeof(e), &pos, 8);
				p->open_off += sizeof(e) + 8;
				p->open_n++;
				r->skip_sent = true;
			}
			/* credit: the frame fits in the peer's ring (same indices there) */
			if (after - r->credit > r->cap) {
				p->blocked = true;
				break;
			}
			ebytes = sizeof(e) + PAD8(f->len);
			if (!open_message(p, now))
				break;
			if (p->open_off + ebytes > p->msg_max - GW_CTL_BYTES) {
				p->full = true;
				break;
			}
			e.channel = r->channel;
			e.kind = f->kind;
			e.flags = f->flags;
			e.len = f->len;
			e.src_task = f->src_task;
			e.dst_task = f->dst_task;
			e.reserved = 0;
			memcpy(sbuf(p, p->open) + p->open_off, &e, sizeof(e));
			memcpy(sbuf(p, p->open) + p->open_off + sizeof(e), f->payload, f->len);
			memset(sbuf(p, p->open) + p->open_off + sizeof(e) + f->len, 0,
			       PAD8(f->len) - f->len);
			p->open_off += (uint32_t)ebytes;
			p->open_n++;
			if (f->kind == SHMRUN_FRAME_BARRIER || f->kind == SHMRUN_FRAME_END)
				p->urgent = true;
			shmrun_ring_release(&r->r, f);
			r->last_end = after;
			r->skip_sent = false;
			pending = false;
			here++;
		}
		*left |= pending;
		if (here)
			/* the producing worker may sleep with a backlog: ring its bell */
			shmrun_ring_consumer_flush(&r->r);
		moved += here;
	}
	g->rr++;
	return moved;
}

/* ---- receiving ------------------------------------------------------------ */

static uint32_t ring_of(const struct shmrun_gateway *g, uint32_t channel)
{
	return channel < g->nchannels ? g->by_channel[channel] : UINT32_MAX;
}

static void store_max64(_Atomic uint64_t *w, uint64_t v)
{
	/* release: pairs with the acquire loads of the epoch words by workers
	 * (sources, sinks, the coordinator) on this host. Only this thread
	 * writes them on a host other than 0, and only ever forward. */
	if (v > atomic_load_explicit(w, memory_order_relaxed))
		atomic_store_explicit(w, v, memory_order_release);
}

static void store_flag(_Atomic uint32_t *w, uint32_t v)
{
	/* release: pairs with the acquire loads of the flags by workers and the
	 * launcher on this host. */
	if (v && !atomic_load_explicit(w, memory_order_relaxed))
		atomic_store_explicit(w, v, memory_order_release);
}

static int apply_epochs(struct shmrun_gateway *g, const unsigned char *pl, uint32_t len)
{
	struct shmrun_control *ctl = g->conf.ctl;
	struct gw_epochs_wire w;

	if (len < sizeof(w))
		return -EPROTO;
	memcpy(&w, pl, sizeof(w));
	if (w.why_len > len - sizeof(w) || w.why_len >= sizeof(ctl->failed_why))
		return -EPROTO;
	/* the coordinator's order: aborted (seq_cst), complete, final_is_stop
	 * before final_epoch before trigger_epoch; failed_why before failed */
	if (w.aborted > atomic_load_explicit(&ctl->aborted_epoch, memory_order_relaxed)) {
		atomic_store_explicit(&ctl->aborted_epoch, w.aborted, memory_order_seq_cst);
		if (g->per_host) {
			/* as host 0's coordinator does in its own directory
			 * (abort_epoch()): what this host's writers made of the
			 * aborted epoch goes now, not at the next start (a disk
			 * full piled them up); late writers remove their own.
			 * An aborted epoch is never committed: no MANIFEST */
			char why[300];

			(void)shmrun_ckpt_remove(g->conf.plan->job->checkpoint_dir, w.aborted, why,
						 sizeof(why));
		}
	}
	/* per_host: never past the MANIFEST installed here (a COMMIT comes
	 * before the EPOCHS that publishes its epoch; a failed one stops it) */
	if (g->per_host && w.complete > g->installed)
		w.complete = g->installed;
	store_max64(&ctl->complete_epoch, w.complete);
	if (w.final_is_stop)
		atomic_store_explicit(&ctl->final_is_stop, 1, memory_order_relaxed);
	store_max64(&ctl->final_epoch, w.final);
	store_max64(&ctl->trigger_epoch, w.trigger);
	store_flag(&ctl->stop_requested, w.stop_requested);
	if (w.failed && !atomic_load_explicit(&ctl->failed, memory_order_relaxed)) {
		memcpy(ctl->failed_why, pl + sizeof(w), w.why_len);
		ctl->failed_why[w.why_len] = '\0';
		atomic_store_explicit(&ctl->failed_errno, w.failed_errno, memory_order_relaxed);
		store_flag(&ctl->failed, 1);
	}
	return 0;
}

static int apply_slot(struct shmrun_gateway *g, uint32_t from, const unsigned char *pl,
		      uint32_t len)
{
	struct gw_slot_wire w;
	struct shmrun_task_slot *s;
	const struct shmrun_plan *plan = g->conf.plan;

	if (len != sizeof(w) || !plan)
		return -EPROTO;
	memcpy(&w, pl, sizeof(w));
	if (w.task >= plan->ntasks || plan->tasks[w.task].worker / g->conf.workers_per_host != from)
		return -EPROTO;
	s = &shmrun_control_slots(g->conf.ctl)[w.task];
	/* The fields of done_epoch first, then the epochs (release), as
	 * shmrun_slot_report() stores them: the coordinator's acquire load of
	 * done_epoch then reads this epoch's size and checksum. No local writer
	 * reports into this slot: its task runs on host @from. */
	s->size = w.size;
	s->xxh64 = w.xxh64;
	s->kv_bytes = w.kv_bytes;
	s->pw_bytes = w.pw_bytes;
	atomic_store_explicit(&s->error, w.error, memory_order_relaxed);
	/* release: pairs with the coordinator's acquire loads of the slot */
	atomic_store_explicit(&s->exhausted, w.exhausted, memory_order_release);
	store_max64(&s->failed_epoch, w.failed_epoch);
	store_max64(&s->done_epoch, w.done_epoch);
	return 0;
}

/* Read one message of @p; return 0 or -errno (recorded by the caller). */
static int read_message(struct shmrun_gateway *g, struct gw_peer *p, const unsigned char *buf,
			int count, char *why, size_t wlen)
{
	struct gw_msg_hdr h;
	uint32_t off = sizeof(h);

	if (count < (int)sizeof(h)) {
		snprintf(why, wlen, "a message of %d bytes", count);
		return -EPROTO;
	}
	memcpy(&h, buf, sizeof(h));
	if (h.magic != GW_MAGIC || h.bytes != (uint32_t)count || h.seq != p->rseq ||
	    h.credits_returned > GW_SLOTS - p->slots) {
		snprintf(why, wlen,
			 "a message that is not shmrun's or out of order (magic %#x, %u of %d "
			 "bytes, seq %" PRIu64 " expected %" PRIu64 ", %u slots returned)",
			 h.magic, h.bytes, count, h.seq, p->rseq, h.credits_returned);
		return -EPROTO;
	}
	p->rseq++;
	p->slots += h.credits_returned;
	for (uint32_t k = 0; k < h.nentries; k++) {
		struct gw_entry e;
		const unsigned char *pl;

		if ((uint64_t)off + sizeof(e) > h.bytes)
			goto short_msg;
		memcpy(&e, buf + off, sizeof(e));
		pl = buf + off + sizeof(e);
		if ((uint64_t)off + sizeof(e) + PAD8(e.len) > h.bytes)
			goto short_msg;
		off += (uint32_t)(sizeof(e) + PAD8(e.len));
		if (e.channel != GW_CTL_CHANNEL) {
			uint32_t ri = ring_of(g, e.channel);
			struct gw_ring *r = ri == UINT32_MAX ? NULL : &g->rings[ri];
			struct shmrun_frame *f;
			int err;

			if (!r || r->outbound || r->peer != p->host) {
				snprintf(why, wlen,
					 "a frame of channel %u, which does not come from it",
					 e.channel);
				return -EPROTO;
			}
			if (p->got_eos)
				continue;
			if (e.kind == GW_KIND_SKIP) {
				uint64_t at;

				if (e.len != 8)
					goto short_msg;
				memcpy(&at, pl, 8);
				err = shmrun_ring_skip(&r->r);
				if (err || shmrun_ring_position(&r->r) != at) {
					snprintf(
					    why, wlen,
					    "a skip marker for channel %u that does not fit its "
					    "ring or lands at another index (%s): credit overrun",
					    e.channel, err ? strerror(-err) : "index");
					return -EPROTO;
				}
				continue;
			}
			err = shmrun_ring_reserve(&r->r, e.len, &f);
			if (err) {
				/* credits promised room: the two rings disagree */
				snprintf(why, wlen,
					 "a frame of %u bytes for channel %u that does not fit its "
					 "ring (%s): credit overrun",
					 e.len, e.channel, strerror(-err));
				return -EPROTO;
			}
			f->kind = e.kind;
			f->flags = e.flags;
			f->src_task = e.src_task;
			f->dst_task = e.dst_task;
			memcpy(f->payload, pl, e.len);
			shmrun_ring_commit(&r->r, f);
			r->touched = true;
			continue;
		}
		switch (e.kind) {
		case GW_CTL_HELLO: {
			uint32_t hosts, theirs, mine;
			uint64_t hh, hash = table_hash(g, p->host, true, &mine);

			if (e.len != 16)
				goto short_msg;
			memcpy(&hosts, pl, 4);
			memcpy(&theirs, pl + 4, 4);
			memcpy(&hh, pl + 8, 8);
			if (hosts != g->conf.hosts || theirs != mine || hh != hash) {
				snprintf(
				    why, wlen,
				    "another channel table (%u hosts, %u channels with host %u; "
				    "here %u hosts, %u channels): not the same topology or build",
				    hosts, theirs, g->conf.host, g->conf.hosts, mine);
				return -EPROTO;
			}
			p->got_hello = true;
			break;
		}
		case GW_CTL_CREDIT: {
			uint32_t ch;
			uint64_t pos;
			uint32_t ri;

			if (e.len != 16)
				goto short_msg;
			memcpy(&ch, pl, 4);
			memcpy(&pos, pl + 8, 8);
			ri = ring_of(g, ch);
			if (ri == UINT32_MAX || !g->rings[ri].outbound ||
			    g->rings[ri].peer != p->host) {
				snprintf(why, wlen,
					 "credits for channel %u, which does not go to it", ch);
				return -EPROTO;
			}
			if (pos - g->rings[ri].credit < (1ull << 63))
				g->rings[ri].credit = pos;
			break;
		}
		case GW_CTL_SLOT:
			if (g->conf.host != 0 || apply_slot(g, p->host, pl, e.len)) {
				snprintf(why, wlen, "a bad task slot report");
				return -EPROTO;
			}
			break;
		case GW_CTL_EPOCHS:
			if (p->host != 0 || apply_epochs(g, pl, e.len)) {
				snprintf(why, wlen, "bad epochs");
				return -EPROTO;
			}
			break;
		case GW_CTL_STOP:
			if (g->conf.host != 0) {
				snprintf(why, wlen, "a stop request, but this is not host 0");
				return -EPROTO;
			}
			/* release: pairs with the coordinator's acquire load of
			 * stop_requested, as the launcher's own store does */
			store_flag(&g->conf.ctl->stop_requested, 1);
			break;
		case GW_CTL_ABORT: {
			char text[600];
			uint32_t n = e.len < sizeof(text) - 1 ? e.len : (uint32_t)sizeof(text) - 1;

			memcpy(text, pl, n);
			text[n] = '\0';
			fail(g, -EPIPE, "host %u aborted the job: %s", p->host, text);
			break;
		}
		case GW_CTL_EOS:
			p->got_eos = true;
			p->eos_at = shmrun_now_ns();
			break;
		case GW_CTL_COMMIT: {
			uint64_t ep;
			char text[PATH_MAX + 256];
			const struct shmrun_job *job = g->conf.plan ? g->conf.plan->job : NULL;
			struct shmrun_ckpt_scope scope;
			int err;

			if (e.len < 8 || p->host != 0 || !g->per_host || !job) {
				snprintf(why, wlen, "a COMMIT this host does not expect");
				return -EPROTO;
			}
			memcpy(&ep, pl, 8);
			/* this host's checkpoint_dir gets rank 0's MANIFEST (temp
			 * file, fsync, rename, directory fsync) and retention before
			 * the epoch is published here: the sinks of this host commit
			 * on it (ckpt/hosts.h) */
			shmrun_ckpt_scope_of(g->conf.plan, g->conf.hosts, &scope);
			err = shmrun_ckpt_commit_received(job, &scope, ep, pl + 8, e.len - 8, text,
							  sizeof(text));
			if (err) {
				fail(g, -EIO, "host %u: installing epoch %" PRIu64 "'s MANIFEST: %s",
				     g->conf.host, ep, text);
				break;
			}
			if (ep > g->installed)
				g->installed = ep;
			break;
		}
		default:
			snprintf(why, wlen, "a control entry of unknown kind %u", e.kind);
			return -EPROTO;
		}
	}
	return 0;
short_msg:
	snprintf(why, wlen, "a message whose entries run past its %u bytes", h.bytes);
	return -EPROTO;
}

/*
 * MPI_Testsome over every request; read the messages that arrived, in order
 * per peer, repost their receives. Return: messages read, or -1 on failure.
 */
static int progress(struct shmrun_gateway *g, int64_t now)
{
	int out = 0, rc, read = 0;
	uint32_t per = 2 * GW_SLOTS + 1;

	rc = MPI_Testsome(g->nreqs, g->reqs, &out, g->idx, g->st);
	if (rc != MPI_SUCCESS) {
		mpi_fail(g, "MPI_Testsome", rc);
		return -1;
	}
	if (out == MPI_UNDEFINED)
		out = 0;
	for (int k = 0; k < out; k++) {
		uint32_t host = (uint32_t)g->idx[k] / per, i = (uint32_t)g->idx[k] % per;
		struct gw_peer *p = &g->peers[host];

		if (i < GW_SLOTS) {
			int count = 0;

			MPI_Get_count(&g->st[k], MPI_BYTE, &count);
			p->rdone[i] = true;
			p->rcount[i] = count;
		}
		/* a completed send: its request is MPI_REQUEST_NULL again */
	}
	for (uint32_t h = 0; h < g->conf.hosts; h++) {
		struct gw_peer *p = &g->peers[h];

		if (h == g->conf.host || p->silent)
			continue; /* a peer given up is not read any more */
		while (p->rdone[p->rnext]) {
			unsigned char *buf = p->rbuf + (size_t)p->rnext * p->msg_max;
			char why[256];
			int err;

			err = read_message(g, p, buf, p->rcount[p->rnext], why, sizeof(why));
			if (err) {
				/* nothing more is read from it */
				p->silent = true;
				fail(g, err, "host %u sent %s", h, why);
				return -1;
			}
			p->rdone[p->rnext] = false;
			p->last_recv = now;
			/* reposted even after its EOS: the slots it gets back must
			 * have receives behind them */
			rc = MPI_Start(&p->rreq[p->rnext]);
			if (rc != MPI_SUCCESS) {
				mpi_fail(g, "MPI_Start", rc);
				return -1;
			}
			p->owed++;
			p->rnext = (p->rnext + 1) % GW_SLOTS;
			read++;
		}
	}
	for (uint32_t i = 0; i < g->nrings; i++)
		if (g->rings[i].touched) {
			/* publish and ring the consuming worker's bell */
			shmrun_ring_flush(&g->rings[i].r);
			g->rings[i].touched = false;
		}
	return read;
}

/* ---- the thread ------------------------------------------------------------ */

static int mpi_init(struct shmrun_gateway *g, char *why, size_t len)
{
	int provided = 0, size = 0, rank = 0, rc, flag = 0;

	MPI_Initialized(&flag);
	if (flag) {
		snprintf(why, len, "MPI was initialised before the gateway started");
		return -EINVAL;
	}
	rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
	if (rc != MPI_SUCCESS) {
		snprintf(why, len, "MPI_Init_thread failed (error %d)", rc);
		return -EIO;
	}
	g->mpi_init = true;
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	if ((uint32_t)size != g->conf.hosts || (uint32_t)rank != g->conf.host) {
		snprintf(why, len,
			 "hosts = %u, this is host %u, but the MPI job has %d processes and this "
			 "is rank %d: start one process per host (mpirun -np %u ...)",
			 g->conf.hosts, g->conf.host, size, rank, g->conf.hosts);
		return -EINVAL;
	}
	return 0;
}

static int post_receives(struct shmrun_gateway *g)
{
	uint32_t per = 2 * GW_SLOTS + 1;
	int rc;

	g->nreqs = (int)(per * g->conf.hosts);
	g->reqs = malloc(sizeof(*g->reqs) * (size_t)g->nreqs);
	g->idx = malloc(sizeof(*g->idx) * (size_t)g->nreqs);
	g->st = malloc(sizeof(*g->st) * (size_t)g->nreqs);
	if (!g->reqs || !g->idx || !g->st)
		return -ENOMEM;
	for (int i = 0; i < g->nreqs; i++)
		g->reqs[i] = MPI_REQUEST_NULL;
	for (uint32_t h = 0; h < g->conf.hosts; h++) {
		struct gw_peer *p = &g->peers[h];

		if (h == g->conf.host)
			continue;
		p->rreq = &g->reqs[h * per];
		p->sreq = &g->reqs[h * per + GW_SLOTS];
		for (uint32_t i = 0; i < GW_SLOTS; i++) {
			rc = MPI_Recv_init(p->rbuf + (size_t)i * p->msg_max, (int)p->msg_max,
					   MPI_BYTE, (int)h, GW_TAG, MPI_COMM_WORLD,
					   &g->reqs[h * per + i]);
			if (rc != MPI_SUCCESS) {
				mpi_fail(g, "MPI_Recv_init", rc);
				return -EIO;
			}
			rc = MPI_Start(&g->reqs[h * per + i]);
			if (rc != MPI_SUCCESS) {
				mpi_fail(g, "MPI_Start", rc);
				return -EIO;
			}
		}
	}
	return 0;
}

static void release_requests(struct shmrun_gateway *g)
{
	uint32_t per = 2 * GW_SLOTS + 1;

	for (uint32_t h = 0; h < g->conf.hosts && g->reqs; h++) {
		if (h == g->conf.host)
			continue;
		for (uint32_t i = 0; i < per; i++) {
			MPI_Request *r = &g->reqs[h * per + i];

			if (*r == MPI_REQUEST_NULL)
				continue;
			if (i < GW_SLOTS) {
				int done = 0;

				/* an active persistent receive: cancel, complete, free */
				MPI_Test(r, &done, MPI_STATUS_IGNORE);
				if (!done) {
					MPI_Cancel(r);
					MPI_Wait(r, MPI_STATUS_IGNORE);
				}
				MPI_Request_free(r);
			} else {
				MPI_Wait(r, MPI_STATUS_IGNORE);
			}
		}
	}
}

static bool all_sends_done(const struct gw_peer *p)
{
	for (uint32_t i = 0; i <= GW_SLOTS; i++)
		if (p->sreq[i] != MPI_REQUEST_NULL)
			return false;
	return true;
}

static void sleep_ns(int64_t ns)
{
	struct timespec ts = {.tv_sec = 0, .tv_nsec = ns};

	nanosleep(&ts, NULL);
}

/* ---- the start exchange (HELLO of the job and of the epoch) ---------------
 *
 * Right after MPI_Init and the barrier, before any frame moves and before any
 * worker of any host restores, reads or writes (they wait for ctl->go), the
 * hosts agree, with two collectives on MPI_COMM_WORLD (a context of their
 * own: they never match the stream's receives):
 *   1. every host sends rank 0 a gw_hello_wire: the hash of its whole
 *      effective job (shmrun_job_hash(): every section and key after --set),
 *      its worker count, and its restore choice (ctl->restored_epoch,
 *      restored_finished, epoch_floor, from shmrun_ckpt_choose_scoped());
 *   2. rank 0 answers every host with a gw_verdict_wire: the first host whose
 *      job or worker count differs from rank 0's (then nobody starts: exit 2,
 *      nothing touched), else the agreed epoch E (shmrun_ckpt_agree(): rank
 *      0's choice, its MANIFEST being the commit point) and, per_host, rank
 *      0's MANIFEST bytes of E (a third collective), so that a host that
 *      missed the COMMIT of E completes it (shmrun_ckpt_restore_instead()).
 * Since the workers have not restored yet, a host whose choice differs simply
 * restores E instead: no rerun is needed. If E's checkpoint ends a finished
 * run and a host cannot restore it, its workers exit 0 at once
 * (SHMRUN_GO_NOTHING): rank 0 said there is nothing to do, and that host's
 * outputs stay as they are. Rank 0's coordinator numbers past the largest
 * epoch_floor of all hosts.
 */
struct gw_hello_wire {
	uint64_t job_hash;
	uint32_t workers; /* this host's workers */
	uint32_t finished;
	uint64_t choice, floor;
};

enum { GW_AGREE_OK = 0, GW_AGREE_DIFFER = 1, GW_AGREE_REFUSE = 2 };

struct gw_verdict_wire {
	int32_t verdict;
	uint32_t finished; /* rank 0's checkpoint E ends a finished run */
	uint64_t epoch, floor, manifest_len;
	char why[400];
};

static int agree(struct shmrun_gateway *g, char *why, size_t wlen)
{
	const struct shmrun_plan *plan = g->conf.plan;
	const struct shmrun_job *job = plan ? plan->job : NULL;
	struct shmrun_control *ctl = g->conf.ctl;
	uint32_t H = g->conf.hosts, me = g->conf.host;
	struct gw_hello_wire mine = {
	    .job_hash = job ? shmrun_job_hash(job) : 0,
	    .workers = g->conf.workers_per_host,
	    .finished = ctl->restored_finished,
	    .choice = ctl->restored_epoch,
	    .floor = ctl->epoch_floor,
	};
	struct gw_hello_wire *all = NULL;
	struct gw_verdict_wire v = {0};
	char *manifest = NULL;
	int rc, err = 0;

	if (me == 0) {
		all = calloc(H, sizeof(*all));
		if (!all) {
			snprintf(why, wlen, "out of memory");
			return -ENOMEM;
		}
	}
	rc = MPI_Gather(&mine, (int)sizeof(mine), MPI_BYTE, all, (int)sizeof(mine), MPI_BYTE, 0,
			MPI_COMM_WORLD);
	if (rc != MPI_SUCCESS) {
		free(all);
		mpi_fail(g, "MPI_Gather", rc);
		snprintf(why, wlen, "%s", g->why);
		return -EIO;
	}
	if (me == 0) {
		uint64_t *choice = calloc(H, sizeof(*choice));

		for (uint32_t h = 1; h < H && v.verdict == GW_AGREE_OK; h++) {
			if (all[h].workers != mine.workers) {
				v.verdict = GW_AGREE_DIFFER;
				snprintf(v.why, sizeof(v.why),
					 "host %u has %u workers, host 0 %u: every host must have "
					 "the same; set [job] workers; nothing was started",
					 h, all[h].workers, mine.workers);
			} else if (all[h].job_hash != mine.job_hash) {
				v.verdict = GW_AGREE_DIFFER;
				snprintf(v.why, sizeof(v.why),
					 "host %u runs another job than host 0 (a section, key or "
					 "value differs, --set included): every host must run the "
					 "same topology with the same --set options; nothing was "
					 "started",
					 h);
			}
		}
		if (v.verdict == GW_AGREE_OK && !choice) {
			v.verdict = GW_AGREE_REFUSE;
			snprintf(v.why, sizeof(v.why), "host 0: out of memory");
		}
		if (v.verdict == GW_AGREE_OK) {
			char awhy[300] = "";
			int64_t e;

			for (uint32_t h = 0; h < H; h++) {
				choice[h] = all[h].choice;
				if (all[h].floor > v.floor)
					v.floor = all[h].floor;
			}
			e = shmrun_ckpt_agree(choice, H, awhy, sizeof(awhy));
			if (e < 0) {
				v.verdict = GW_AGREE_REFUSE;
				snprintf(v.why, sizeof(v.why), "%s", awhy);
			} else {
				v.epoch = (uint64_t)e;
				v.finished = mine.finished;
				for (uint32_t h = 1; h < H; h++)
					if (all[h].choice != v.epoch)
						shmrun_log(SHMRUN_LOG_WARN,
							   "host %u had chosen epoch %" PRIu64
							   ", rank 0 epoch %" PRIu64
							   ": host %u restores epoch %" PRIu64
							   " instead (rank 0's MANIFEST is the "
							   "commit point)",
							   h, all[h].choice, v.epoch, h, v.epoch);
			}
		}
		if (v.verdict == GW_AGREE_OK && g->per_host && v.epoch > 0) {
			size_t len = 0;
			char mwhy[300] = "";
			int e2 = shmrun_ckpt_manifest_bytes(job->checkpoint_dir, v.epoch,
							    shmrun_fingerprint(job), &manifest,
							    &len, mwhy, sizeof(mwhy));

			if (e2) {
				v.verdict = GW_AGREE_REFUSE;
				snprintf(v.why, sizeof(v.why), "host 0: %s", mwhy);
			} else {
				v.manifest_len = len;
			}
		}
		free(choice);
		free(all);
	}
	rc = MPI_Bcast(&v, (int)sizeof(v), MPI_BYTE, 0, MPI_COMM_WORLD);
	if (rc == MPI_SUCCESS && v.verdict == GW_AGREE_OK && v.manifest_len) {
		if (v.manifest_len > SHMRUN_CKPT_MANIFEST_MAX) {
			free(manifest);
			snprintf(why, wlen, "a MANIFEST of %" PRIu64 " bytes", v.manifest_len);
			return -EPROTO; /* rank 0 checked it: cannot happen */
		}
		if (me != 0)
			manifest = malloc(v.manifest_len + 1);
		if (!manifest)
			err = -ENOMEM; /* joins with 0 bytes: MPI reports a truncation */
		rc = MPI_Bcast(manifest ? manifest : (char *)&v, manifest ? (int)v.manifest_len : 0,
			       MPI_BYTE, 0, MPI_COMM_WORLD);
	}
	if (rc != MPI_SUCCESS) {
		free(manifest);
		mpi_fail(g, "MPI_Bcast", rc);
		snprintf(why, wlen, "%s", g->why);
		return -EIO;
	}
	if (v.verdict != GW_AGREE_OK) {
		free(manifest);
		v.why[sizeof(v.why) - 1] = '\0';
		snprintf(why, wlen, "%s", v.why);
		return v.verdict == GW_AGREE_DIFFER ? -EXDEV : -ENOENT;
	}
	if (err) {
		snprintf(why, wlen, "out of memory receiving rank 0's MANIFEST");
		return err;
	}
	uint32_t go = SHMRUN_GO_RUN;
	int ok, all_ok;

	if (me == 0) {
		ctl->epoch_floor = v.floor;
	} else if (v.epoch != mine.choice) {
		struct shmrun_ckpt_scope scope;
		char rwhy[480];

		shmrun_ckpt_scope_of(plan, H, &scope);
		shmrun_log(SHMRUN_LOG_WARN,
			   "host %u had chosen epoch %" PRIu64 ", rank 0 epoch %" PRIu64
			   ": host %u restores epoch %" PRIu64 " instead",
			   me, mine.choice, v.epoch, me, v.epoch);
		err = shmrun_ckpt_restore_instead(job, &scope, ctl, v.epoch,
						  g->per_host ? manifest : NULL,
						  g->per_host ? (size_t)v.manifest_len : 0, rwhy,
						  sizeof(rwhy));
		if (err && v.finished) {
			/* rank 0's checkpoint ends a finished run: there is nothing
			 * to do on any host, and this one keeps its outputs as
			 * they are */
			shmrun_log(SHMRUN_LOG_INFO,
				   "rank 0's checkpoint of epoch %" PRIu64 " is the last of a finished "
				   "run: nothing to do on host %u either (STREAM_RESET_STATE=1 runs "
				   "the job again from the start)",
				   v.epoch, me);
			err = 0;
			go = SHMRUN_GO_NOTHING;
		} else if (err) {
			snprintf(why, wlen, "%s", rwhy);
		}
	}
	free(manifest);
	/*
	 * Every host says whether it can start before any does: a host that
	 * cannot restore the agreed epoch (a damaged state file of its own)
	 * returning alone went into MPI_Finalize while the others ran, and
	 * hung there until host_timeout ended the job with 75, which
	 * supervise reruns to the same end. Now every host refuses.
	 */
	ok = err ? 0 : 1;
	rc = MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
	if (rc != MPI_SUCCESS) {
		mpi_fail(g, "MPI_Allreduce", rc);
		snprintf(why, wlen, "%s", g->why);
		return -EIO;
	}
	if (err)
		return err;
	if (!all_ok) {
		snprintf(why, wlen,
			 "another host cannot restore epoch %" PRIu64 " (see its log); nothing was "
			 "started",
			 v.epoch);
		return -ENOENT;
	}
	atomic_store_explicit(&ctl->go, go, memory_order_release);
	return 0;
}

/*
 * The start failed (@why says how): say so, and leave nothing of MPI behind.
 * Once MPI_Init_thread succeeded, MPI_Finalize is what stops a singleton's
 * orted and removes the session directory /tmp/ompi.HOST.UID/jf.N (without
 * it both outlived the run); the receives are released first. MPI_Finalize
 * does not wait for the other ranks here: none of them was ever sent to.
 */
static void start_failed(struct shmrun_gateway *g, const char *why)
{
	shmrun_log(SHMRUN_LOG_ERROR, "gateway of host %u: %s", g->conf.host,
		   why[0] ? why : "the start failed");
	if (!g->mpi_init)
		return;
	release_requests(g);
	MPI_Finalize();
	g->mpi_init = false;
}

static void *gateway_main(void *arg)
{
	struct shmrun_gateway *g = arg;
	char why[512] = "";
	int err = mpi_init(g, why, sizeof(why));
	int64_t now, nap = 0, abort_at = 0, last_move = 0, turn = 0, stalled;
	bool aborting = false, finishing = false, drained = false;

	if (!err) {
		err = post_receives(g);
		if (!err) {
			/* every rank has posted its receives before anyone sends */
			int rc = MPI_Barrier(MPI_COMM_WORLD);

			if (rc != MPI_SUCCESS) {
				mpi_fail(g, "MPI_Barrier", rc);
				err = -EIO;
			}
		}
		if (!err)
			err = agree(g, why, sizeof(why)); /* the workers wait for it */
		if (err && !why[0])
			snprintf(why, sizeof(why), "%s", g->why);
	}
	if (err)
		start_failed(g, why);
	pthread_mutex_lock(&g->lock);
	g->start_err = err;
	if (err)
		snprintf(g->why, sizeof(g->why), "%s", why);
	g->started = true;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
	if (err) {
		g->result = err;
		return NULL;
	}
	now = shmrun_now_ns();
	if (g->mute_ms > 0)
		g->mute_at = now + g->mute_ms * 1000000;
	for (uint32_t h = 0; h < g->conf.hosts; h++) {
		g->peers[h].last_recv = now;
		g->peers[h].last_send = 0;
	}

	for (;;) {
		uint32_t moved = 0;
		int read;
		bool sent = false, slots_changed, done;

		now = shmrun_now_ns();
		/*
		 * This thread did not run for a while (the process was stopped,
		 * kill -STOP, or starved of CPU): the peers could not be read
		 * meanwhile, so that time does not count as their silence. Longer
		 * than host_timeout, the peers have given this host up: say so,
		 * rather than blame them for the silence.
		 */
		stalled = turn ? now - turn : 0;
		turn = now;
		if (stalled > GW_HEARTBEAT_NS) {
			for (uint32_t h = 0; h < g->conf.hosts; h++)
				g->peers[h].last_recv += stalled;
			if (stalled > g->conf.timeout_ns && !failed(g))
				fail(g, -EPIPE,
				     "this host was stopped or starved for %.1f s (longer than "
				     "host_timeout, %.1f s): its gateway did not run, so the other "
				     "hosts heard nothing from it",
				     (double)stalled / 1e9, (double)g->conf.timeout_ns / 1e9);
		}
		pthread_mutex_lock(&g->lock);
		if (g->abort_req && !aborting) {
			aborting = true;
			abort_at = now;
		}
		if (g->finish_req && !finishing) {
			finishing = true;
		}
		pthread_mutex_unlock(&g->lock);
		/* a failure noticed here stops the job everywhere */
		if (failed(g) && !aborting) {
			pthread_mutex_lock(&g->lock);
			snprintf(g->abort_why, sizeof(g->abort_why), "host %u: %s", g->conf.host,
				 g->why);
			pthread_mutex_unlock(&g->lock);
			aborting = true;
			abort_at = now;
		}

		if (g->broken) {
			/* MPI failed: never call it again; the launcher finishes */
			pthread_mutex_lock(&g->lock);
			g->abort_done = true;
			pthread_cond_broadcast(&g->cond);
			pthread_mutex_unlock(&g->lock);
			if (finishing)
				break;
			sleep_ns(GW_MAX_SLEEP_NS);
			continue;
		}
		if (!aborting) {
			bool left = false;

			moved = pump(g, now, &left);
			if (moved || !last_move)
				last_move = now;
			/* finishing: the EOS follows every frame the rings hold, as
			 * long as the peers take them (their consumers may be gone
			 * already: then one second without progress ends it) */
			if (finishing && !left && !moved)
				drained = true;
			if (finishing && now - last_move > 1000000000)
				drained = true;
		}
		read = progress(g, now);
		if (read < 0 && !aborting)
			continue; /* failed: abort the others next turn */
		slots_changed = scan_slots(g);
		for (uint32_t h = 0; h < g->conf.hosts; h++) {
			struct gw_peer *p = &g->peers[h];

			if (h == g->conf.host)
				continue;
			if (!p->silent && !p->got_eos && now - p->last_recv > g->conf.timeout_ns) {
				p->silent = true;
				fail(g, -EPIPE,
				     "host %u sent nothing for %.1f s (host_timeout): hung or "
				     "unreachable",
				     h, (double)(now - p->last_recv) / 1e9);
			}
			if (p->got_eos && !finishing && !aborting && !p->eos_late &&
			    now - p->eos_at > g->conf.timeout_ns) {
				/* the peer's workers are done and it ended its stream,
				 * yet ours still run: they would wait for it forever */
				p->eos_late = true;
				fail(g, -EPIPE,
				     "host %u ended its stream, but this host's workers still run "
				     "after %.1f s (host_timeout): the hosts do not end together",
				     h, (double)(now - p->eos_at) / 1e9);
			}
			if (!p->credit_since) {
				for (uint32_t i = 0; i < g->nrings; i++) {
					struct gw_ring *r = &g->rings[i];
					uint64_t pos;

					if (r->outbound || r->peer != h)
						continue;
					pos = shmrun_ring_consumed(&r->r);
					if (pos != r->reported) {
						p->credit_since = now;
						/* a consumer freed a quarter of its ring: at once
						 */
						if (pos - r->reported >= r->cap / 4)
							p->credit_since = now - g->conf.flush_ns;
						break;
					}
				}
			}
			sent |= maybe_send(g, p, now, slots_changed, aborting,
					   finishing && (drained || aborting));
		}

		if (aborting) {
			bool all = true;

			for (uint32_t h = 0; h < g->conf.hosts; h++)
				if (h != g->conf.host && !g->peers[h].silent &&
				    (!g->peers[h].abort_sent || !all_sends_done(&g->peers[h])))
					all = false;
			if (all || now - abort_at > 1000000000) {
				pthread_mutex_lock(&g->lock);
				g->abort_done = true;
				pthread_cond_broadcast(&g->cond);
				pthread_mutex_unlock(&g->lock);
			}
		}
		if (finishing) {
			done = true;
			for (uint32_t h = 0; h < g->conf.hosts; h++) {
				struct gw_peer *p = &g->peers[h];

				if (h == g->conf.host || p->silent)
					continue;
				if (!p->eos_sent || !p->got_eos || !all_sends_done(p))
					done = false;
			}
			if (done)
				break;
		}
		if (moved || read > 0 || sent) {
			nap = 0;
		} else {
			nap = nap ? nap * 2 : GW_MIN_SLEEP_NS;
			if (nap > GW_MAX_SLEEP_NS)
				nap = GW_MAX_SLEEP_NS;
			sleep_ns(nap);
		}
	}

	{
		bool silent = false;

		for (uint32_t h = 0; h < g->conf.hosts; h++)
			silent |= h != g->conf.host && g->peers[h].silent;
		/* a silent peer would make MPI_Finalize wait for it forever */
		if (!silent && !g->broken) {
			release_requests(g);
			MPI_Finalize();
			g->mpi_fin_ok = true;
		}
	}
	g->result = atomic_load_explicit(&g->state, memory_order_acquire);
	return NULL;
}

/* ---- the launcher's side -------------------------------------------------- */

static void gateway_free(struct shmrun_gateway *g)
{
	if (!g)
		return;
	for (uint32_t i = 0; g->rings && i < g->nrings; i++)
		if (g->rings[i].r.sh)
			shmrun_ring_detach(&g->rings[i].r);
	for (uint32_t h = 0; g->peers && h < g->conf.hosts; h++) {
		free(g->peers[h].rbuf);
		free(g->peers[h].sbuf);
	}
	free(g->peers);
	free(g->rings);
	free(g->by_channel);
	free(g->slot_sent);
	free(g->slot_dirty);
	free(g->manifest);
	free(g->reqs);
	free(g->idx);
	free(g->st);
	pthread_mutex_destroy(&g->lock);
	pthread_cond_destroy(&g->cond);
	free(g);
}

static int setup_rings(struct shmrun_gateway *g, const struct shmrun_gateway_conf *c)
{
	uint32_t maxch = 0;

	g->rings = calloc(c->nrings + 1, sizeof(*g->rings));
	if (!g->rings)
		return -ENOMEM;
	for (uint32_t i = 0; i < c->nrings; i++) {
		const struct shmrun_gateway_ring *cr = &c->rings[i];
		struct gw_ring *r = &g->rings[i];
		int err;

		if (cr->peer_host >= c->hosts || cr->peer_host == c->host)
			return -EINVAL;
		err =
		    shmrun_ring_attach(&r->r, cr->mem, cr->len,
				       cr->outbound ? SHMRUN_RING_CONSUMER : SHMRUN_RING_PRODUCER);
		if (err)
			return -EINVAL;
		g->nrings = i + 1;
		r->channel = cr->channel;
		r->peer = cr->peer_host;
		r->outbound = cr->outbound;
		r->cap = shmrun_ring_capacity(&r->r);
		/* both copies start at the same index: the consumed position of
		 * the remote copy is this ring's start until reported */
		r->credit = shmrun_ring_consumed(&r->r);
		r->reported = shmrun_ring_consumed(&r->r);
		r->last_end = shmrun_ring_consumed(&r->r);
		shmrun_ring_set_wake_bell(&r->r, cr->bell);
		if (!cr->outbound)
			/* publication is the gateway's business (after each message) */
			shmrun_ring_set_batch(&r->r, r->cap / 2);
		if (cr->channel + 1 > maxch)
			maxch = cr->channel + 1;
	}
	g->nchannels = maxch;
	g->by_channel = malloc(sizeof(*g->by_channel) * (maxch + 1));
	if (!g->by_channel)
		return -ENOMEM;
	for (uint32_t i = 0; i < maxch; i++)
		g->by_channel[i] = UINT32_MAX;
	for (uint32_t i = 0; i < g->nrings; i++) {
		if (g->by_channel[g->rings[i].channel] != UINT32_MAX)
			return -EINVAL; /* one ring per channel */
		g->by_channel[g->rings[i].channel] = i;
	}
	return 0;
}

static int setup_peers(struct shmrun_gateway *g)
{
	g->peers = calloc(g->conf.hosts, sizeof(*g->peers));
	if (!g->peers)
		return -ENOMEM;
	for (uint32_t h = 0; h < g->conf.hosts; h++) {
		struct gw_peer *p = &g->peers[h];
		uint64_t max = GW_MSG_BYTES;

		p->host = h;
		p->open = -1;
		p->slots = GW_SLOTS;
		if (h == g->conf.host)
			continue;
		/* the largest frame of any ring with this peer must fit a message
		 * with room for the control entries; both ends compute the same */
		for (uint32_t i = 0; i < g->nrings; i++) {
			struct gw_ring *r = &g->rings[i];
			uint64_t need = sizeof(struct gw_msg_hdr) + sizeof(struct gw_entry) +
					PAD8(shmrun_ring_max_payload(&r->r)) + GW_CTL_BYTES;

			if (r->peer == h && need > max)
				max = (need + 4095) & ~(uint64_t)4095;
		}
		if (max > INT32_MAX)
			return -EINVAL;
		p->msg_max = (uint32_t)max;
		p->rbuf = malloc((size_t)GW_SLOTS * max);
		p->sbuf = malloc((size_t)(GW_SLOTS + 1) * max);
		if (!p->rbuf || !p->sbuf)
			return -ENOMEM;
	}
	return 0;
}

int shmrun_gateway_start(struct shmrun_gateway **out, const struct shmrun_gateway_conf *c)
{
	struct shmrun_gateway *g;
	int err;

	*out = NULL;
	if (c->hosts < 2 || c->host >= c->hosts || !c->ctl || c->flush_ns <= 0 ||
	    c->timeout_ns <= GW_HEARTBEAT_NS || c->workers_per_host == 0 ||
	    (c->nrings && !c->rings))
		return -EINVAL;
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->conf = *c;
	g->conf.rings = NULL;
	g->per_host = c->plan && c->plan->job && c->plan->job->checkpoint_dir &&
		      c->plan->job->checkpoint_per_host;
#ifdef SHMRUN_FAULT_INJECTION
	{
		/* TEST-ONLY (tests/mpi): SHMRUN_TEST_GATEWAY_MUTE=<ms>: this
		 * gateway goes silent that long after its start, as a hung host
		 * would, so its peers' host_timeout can be tested */
		const char *m = getenv("SHMRUN_TEST_GATEWAY_MUTE");

		if (m && *m)
			g->mute_ms = strtoll(m, NULL, 10);
	}
#endif
	pthread_mutex_init(&g->lock, NULL);
	pthread_cond_init(&g->cond, NULL);
	err = setup_rings(g, c);
	if (!err)
		err = setup_peers(g);
	if (!err && c->plan) {
		g->slot_sent = calloc(c->plan->ntasks + 1, sizeof(*g->slot_sent));
		g->slot_dirty = calloc(c->plan->ntasks + 1, sizeof(*g->slot_dirty));
		if (!g->slot_sent || !g->slot_dirty)
			err = -ENOMEM;
		/* everything local is reported once at the start */
		for (uint32_t t = 0; !err && t < c->plan->ntasks; t++)
			g->slot_dirty[t] = c->host != 0 && task_local(g, t);
	}
	if (err)
		goto err_free;
	err = -pthread_create(&g->thread, NULL, gateway_main, g);
	if (err)
		goto err_free;
	pthread_mutex_lock(&g->lock);
	while (!g->started)
		pthread_cond_wait(&g->cond, &g->lock);
	err = g->start_err;
	pthread_mutex_unlock(&g->lock);
	if (err) {
		pthread_join(g->thread, NULL); /* start_failed() logged why */
		goto err_free;
	}
	*out = g;
	return 0;
err_free:
	gateway_free(g);
	return err;
}

int shmrun_gateway_poll(struct shmrun_gateway *g, char *why, size_t len)
{
	/* acquire: pairs with the release in fail(); why is complete */
	int st = atomic_load_explicit(&g->state, memory_order_acquire);

	if (st && why && len) {
		pthread_mutex_lock(&g->lock);
		snprintf(why, len, "%s", g->why);
		pthread_mutex_unlock(&g->lock);
	}
	return st;
}

void shmrun_gateway_abort(struct shmrun_gateway *g, const char *why)
{
	struct timespec dl;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 2;
	pthread_mutex_lock(&g->lock);
	if (!g->abort_req) {
		snprintf(g->abort_why, sizeof(g->abort_why), "host %u: %s", g->conf.host,
			 why ? why : "aborted");
		g->abort_req = true;
	}
	while (!g->abort_done)
		if (pthread_cond_timedwait(&g->cond, &g->lock, &dl) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&g->lock);
}

int shmrun_gateway_finish(struct shmrun_gateway *g)
{
	int err;

	if (!g)
		return -EINVAL;
	pthread_mutex_lock(&g->lock);
	g->finish_req = true;
	pthread_mutex_unlock(&g->lock);
	pthread_join(g->thread, NULL);
	err = g->result;
	if (!err && !g->mpi_fin_ok)
		err = -EPIPE;
	gateway_free(g);
	return err;
}

#endif /* SHMRUN_HAVE_MPI */
