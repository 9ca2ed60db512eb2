/*
 * runtime/worker.c: the single-threaded loop of one worker process, and the
 * operator API's task functions.
 *
 * What it is for. A worker runs every task the plan placed on it, on one
 * thread, with no locks: forward edges are direct calls (operator chaining),
 * every other edge is a channel, one SPSC ring per (sender, receiver) pair.
 *
 * The loop:
 *
 *     for (;;) {
 *         drain overflows into their rings            (frames that found a ring full)
 *         for each task, downstream first:
 *             source: produce() a budget of records    unless parked
 *             others: read a budget of frames from each open input ring, unless parked
 *         publish every ring with pending commits      (one release store per ring)
 *         all tasks ended and nothing pending -> exit
 *         no progress -> idle (spin, then back off)
 *     }
 *
 * Never blocking on a full ring (DESIGN.md §5). Two workers that each block
 * writing into the other's full ring while neither drains its own inbound ring
 * deadlock. So emit never waits: a frame that does not fit is appended to that
 * channel's overflow buffer and the task that produced it is *parked*: it gets
 * no more input until every channel downstream of it (through forward edges
 * too) has drained. The overflow of a parked task is bounded by what one input
 * record (or one produce() budget) expands to. The worker meanwhile keeps
 * reading other rings and running other tasks; the graph is acyclic, so the
 * most downstream tasks can always progress, and so, in turn, can everyone.
 *
 * Record encoding in a DATA frame's payload (host byte order, the same host):
 *
 *     [u32 key_len][u32 value_len][u64 key hash][i64 event_time_ns]?[key][value]
 *
 * The event time is present only when non-zero (frame flag REC_TIMED). The key
 * hash (XXH3-64 of the key, which picked the vnode and so the receiver) travels
 * along so the receiver's key-bound state does not hash the key again.
 *
 * A record larger than the ring's largest frame is rejected with an error
 * naming the stage and the size (no fragmentation: docs/topology.md says how
 * to raise ring_bytes).
 *
 * End of input: a task whose inputs have all ended calls end_of_input(), then
 * sends an END frame on each of its output channels and ends its forward
 * successors in turn. A consumer counts END frames, one per input channel.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "shmrun/placement.h"
#include "worker.h"

#define REC_HDR 16u    /* record header bytes before the optional time */
#define REC_TIMED 0x1u /* frame flag: an 8-byte event time follows the header */
#define PRODUCE_BUDGET 256u
#define READ_BUDGET 256u

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- operator API: task accessors ---------------------------------------- */

const char *shmrun_task_stage(const struct shmrun_task *t)
{
	return t->stage->name;
}

uint32_t shmrun_task_instance(const struct shmrun_task *t)
{
	return t->instance;
}

uint32_t shmrun_task_width(const struct shmrun_task *t)
{
	return t->width;
}

uint32_t shmrun_task_vnodes(const struct shmrun_task *t)
{
	return t->vnodes;
}

void shmrun_task_vnode_range(const struct shmrun_task *t, uint32_t *lo, uint32_t *hi)
{
	*lo = t->vnode_lo;
	*hi = t->vnode_hi;
}

uint32_t shmrun_task_vnode_of(const struct shmrun_task *t, const void *key, uint32_t len)
{
	return shmrun_placement_vnode_of_hash(XXH3_64bits(key, len), t->vnodes);
}

static const struct shmrun_param *find_param(const struct shmrun_task *t, const char *key)
{
	for (uint32_t i = 0; i < t->stage->nparams; i++)
		if (strcmp(t->stage->params[i].def->key, key) == 0)
			return &t->stage->params[i];
	return NULL;
}

const char *shmrun_task_param(const struct shmrun_task *t, const char *key)
{
	const struct shmrun_param *p = find_param(t, key);

	return p ? p->value : NULL;
}

uint64_t shmrun_task_param_u64(const struct shmrun_task *t, const char *key, uint64_t def)
{
	const struct shmrun_param *p = find_param(t, key);

	return p && p->value ? p->u64 : def;
}

bool shmrun_task_param_bool(const struct shmrun_task *t, const char *key, bool def)
{
	const struct shmrun_param *p = find_param(t, key);

	return p && p->value ? p->u64 != 0 : def;
}

static void task_verror(struct shmrun_task *t, const char *fmt, va_list ap)
{
	char msg[400];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (t->w) {
		if (!t->w->failed && t->w->stats)
			snprintf(t->w->stats->error, sizeof(t->w->stats->error), "stage '%s' [%u]: %s",
				 t->stage->name, t->instance, msg);
		t->w->failed = true;
	}
	shmrun_log(SHMRUN_LOG_ERROR, "stage '%s' [%u]: %s", t->stage->name, t->instance, msg);
}

void shmrun_task_error(struct shmrun_task *t, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	task_verror(t, fmt, ap);
	va_end(ap);
}

void shmrun_task_log(struct shmrun_task *t, const char *fmt, ...)
{
	char msg[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	shmrun_log(SHMRUN_LOG_INFO, "stage '%s' [%u]: %s", t->stage->name, t->instance, msg);
}

void shmrun_task_count(struct shmrun_task *t, enum shmrun_counter counter, uint64_t n)
{
	if (counter == SHMRUN_COUNT_RECORDS_IN)
		t->records_in += n;
	else if (counter == SHMRUN_COUNT_RECORDS_OUT)
		t->records_out += n;
}

void *shmrun_keyed_state(struct shmrun_task *t, const void *key, uint32_t key_len,
			 uint32_t value_bytes, bool create)
{
	uint64_t h = key == t->cur_key && key_len == t->cur_key_len ? t->cur_hash
								     : XXH3_64bits(key, key_len);
	int err;
	void *v = shmrun_kv_get(&t->kv, shmrun_placement_vnode_of_hash(h, t->vnodes), h, key, key_len, value_bytes,
				create, &err);

	if (!v && err == -ENOMEM)
		shmrun_task_error(t, "out of memory for key-bound state (%" PRIu64 " keys, %" PRIu64
				     " bytes)", t->kv.keys, t->kv.bytes);
	else if (!v && err)
		shmrun_task_error(t, "key-bound state used with %u-byte values after %u-byte ones",
				  value_bytes, t->kv.value_bytes);
	return v;
}

int shmrun_keyed_state_foreach(struct shmrun_task *t,
			       int (*fn)(void *arg, const void *key, uint32_t key_len,
					 void *value),
			       void *arg)
{
	return shmrun_kv_foreach(&t->kv, fn, arg);
}

uint64_t shmrun_keyed_state_keys(const struct shmrun_task *t)
{
	return t->kv.keys;
}

/* ---- channels ------------------------------------------------------------ */

/* A frame's payload in up to four pieces (record header, time, key, value). */
struct pieces {
	const void *p[4];
	uint32_t n[4];
	uint32_t total;
	uint16_t flags; /* frame flags */
};

static void copy_pieces(unsigned char *dst, const struct pieces *pc)
{
	for (int i = 0; i < 4; i++)
		if (pc->n[i]) {
			memcpy(dst, pc->p[i], pc->n[i]);
			dst += pc->n[i];
		}
}

static bool chan_backlogged(const struct chan_out *c)
{
	return c->ovf_off < c->ovf_len;
}

static int ovf_append(struct chan_out *c, uint16_t kind, const struct pieces *pc)
{
	size_t need = 8 + (((size_t)pc->total + 7) & ~(size_t)7);

	if (c->ovf_off == c->ovf_len)
		c->ovf_off = c->ovf_len = 0;
	if (c->ovf_len + need > c->ovf_cap && c->ovf_off > 0) {
		memmove(c->ovf, c->ovf + c->ovf_off, c->ovf_len - c->ovf_off);
		c->ovf_len -= c->ovf_off;
		c->ovf_off = 0;
	}
	if (c->ovf_len + need > c->ovf_cap) {
		size_t cap = c->ovf_cap ? c->ovf_cap : 65536;
		unsigned char *n;

		while (c->ovf_len + need > cap)
			cap *= 2;
		n = realloc(c->ovf, cap);
		if (!n)
			return -ENOMEM;
		c->ovf = n;
		c->ovf_cap = cap;
	}
	if (c->ovf_off == c->ovf_len)
		c->w->backlogged++; /* this channel becomes backlogged */
	memcpy(c->ovf + c->ovf_len, &pc->total, 4);
	memcpy(c->ovf + c->ovf_len + 4, &kind, 2);
	memcpy(c->ovf + c->ovf_len + 6, &pc->flags, 2);
	copy_pieces(c->ovf + c->ovf_len + 8, pc);
	c->ovf_len += need;
	return 0;
}

/* Write one frame, or queue it behind a full ring (never waits). */
static int chan_put(struct chan_out *c, uint16_t kind, const struct pieces *pc)
{
	struct shmrun_frame *f;
	int err;

	if (!chan_backlogged(c)) {
		err = shmrun_ring_reserve(&c->ring, pc->total, &f);
		if (err == 0) {
			f->kind = kind;
			f->flags = pc->flags;
			f->src_task = c->src_task;
			f->dst_task = c->dst_task;
			copy_pieces(f->payload, pc);
			return shmrun_ring_commit(&c->ring, f);
		}
		if (err != -EAGAIN)
			return err;
	}
	return ovf_append(c, kind, pc);
}

/* Move queued frames into the ring while they fit. Return: frames moved. */
static uint32_t chan_drain(struct chan_out *c)
{
	uint32_t moved = 0;

	while (chan_backlogged(c)) {
		unsigned char *p = c->ovf + c->ovf_off;
		struct shmrun_frame *f;
		uint32_t len;
		uint16_t kind, flags;

		memcpy(&len, p, 4);
		memcpy(&kind, p + 4, 2);
		memcpy(&flags, p + 6, 2);
		if (shmrun_ring_reserve(&c->ring, len, &f) != 0)
			break;
		f->kind = kind;
		f->flags = flags;
		f->src_task = c->src_task;
		f->dst_task = c->dst_task;
		memcpy(f->payload, p + 8, len);
		shmrun_ring_commit(&c->ring, f);
		c->ovf_off += 8 + (((size_t)len + 7) & ~(size_t)7);
		moved++;
	}
	if (moved && !chan_backlogged(c))
		c->w->backlogged--;
	return moved;
}

/* Whether @t (or a forward successor) has output queued behind a full ring. */
static bool task_parked_slow(const struct shmrun_task *t)
{
	for (uint32_t o = 0; o < t->nouts; o++) {
		const struct out_edge *e = &t->outs[o];

		if (e->kind == SHMRUN_EDGE_FORWARD) {
			if (task_parked_slow(e->forward))
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
	return t->w->backlogged && task_parked_slow(t);
}

/* ---- emit and delivery ----------------------------------------------------- */

/* Hand @rec to @t. @hash is the key's hash when @hashed (it came off a ring). */
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
	return err;
}

int shmrun_emit(struct shmrun_task *t, const struct shmrun_record *rec)
{
	unsigned char hdr[REC_HDR];
	bool timed = rec->event_time_ns != 0;
	uint64_t total = (uint64_t)REC_HDR + (timed ? 8 : 0) + rec->key_len + rec->value_len;
	struct pieces pc = {
		.p = {hdr, &rec->event_time_ns, rec->key, rec->value},
		.n = {REC_HDR, timed ? 8 : 0, rec->key_len, rec->value_len},
		.total = total > UINT32_MAX ? UINT32_MAX : (uint32_t)total,
		.flags = timed ? REC_TIMED : 0,
	};
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
			shmrun_task_error(t,
					  "record of %" PRIu64 " bytes (key %u + value %u + %" PRIu64
					  " of framing) does not fit a ring of ring_bytes=%" PRIu64
					  " (largest record: %u bytes); raise ring_bytes in [job]",
					  total, rec->key_len, rec->value_len,
					  total - rec->key_len - rec->value_len,
					  e->chans[0]->ring.capacity, e->max_payload);
			return -EMSGSIZE;
		}
		if (!hashed) {
			hash = XXH3_64bits(rec->key, rec->key_len);
			memcpy(hdr, &rec->key_len, 4);
			memcpy(hdr + 4, &rec->value_len, 4);
			memcpy(hdr + 8, &hash, 8);
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
			err = chan_put(e->chans[j], SHMRUN_FRAME_DATA, &pc);
		if (err)
			shmrun_task_error(t, "cannot queue output behind a full ring: %s",
					  strerror(-err));
	}
	return err;
}

/* End of input for @t: final emits, END on every channel, then forward successors. */
static int task_end(struct shmrun_task *t)
{
	struct pieces none = {.total = 0};
	int err = 0;

	if (t->op->end_of_input)
		err = t->op->end_of_input(t, t->state);
	if (err) {
		if (!t->w->failed)
			shmrun_task_error(t, "end of input failed: %s", strerror(-err));
		return err;
	}
	t->ended = true;
	for (uint32_t o = 0; o < t->nouts && !err; o++) {
		struct out_edge *e = &t->outs[o];

		if (e->kind == SHMRUN_EDGE_FORWARD) {
			if (--e->forward->inputs_open == 0)
				err = task_end(e->forward);
			continue;
		}
		for (uint32_t j = 0; j < e->nchans && !err; j++)
			err = chan_put(e->chans[j], SHMRUN_FRAME_END, &none);
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
			struct shmrun_record rec = {.event_time_ns = 0};
			uint32_t kl, vl, hl = REC_HDR;
			uint64_t hash;

			memcpy(&kl, f->payload, 4);
			memcpy(&vl, f->payload + 4, 4);
			memcpy(&hash, f->payload + 8, 8);
			if (f->flags & REC_TIMED) {
				memcpy(&rec.event_time_ns, f->payload + REC_HDR, 8);
				hl += 8;
			}
			if ((uint64_t)hl + kl + vl != f->len) {
				shmrun_task_error(t, "corrupt record frame from task %u", f->src_task);
				break;
			}
			rec.key = f->payload + hl;
			rec.key_len = kl;
			rec.value = f->payload + hl + kl;
			rec.value_len = vl;
			deliver(t, &rec, hash, true);
		} else if (f->kind == SHMRUN_FRAME_END) {
			in->ended = true;
			shmrun_ring_release(&in->ring, f);
			if (--t->inputs_open == 0)
				task_end(t);
			break;
		}
		shmrun_ring_release(&in->ring, f);
	}
	return n;
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

		if (ed->to == stage && ed->kind == SHMRUN_EDGE_FORWARD)
			t->inputs_open++;
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
			o->w = w;
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
	err = 0;
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

		if (t->ended || task_parked(t))
			continue;
		if (t->op->flags & SHMRUN_OP_SOURCE) {
			uint64_t before = t->records_in;
			int r = t->op->produce(t, t->state, PRODUCE_BUDGET);

			progress += (uint32_t)(t->records_in - before) + (r <= 0);
			if (r < 0 && !w->failed)
				shmrun_task_error(t, "produce failed: %s", strerror(-r));
			else if (r == 0)
				task_end(t);
			continue;
		}
		for (uint32_t i = 0; i < t->nins && !t->ended; i++)
			if (!t->ins[i]->ended)
				progress += read_channel(t, t->ins[i]);
	}
	for (uint32_t c = 0; c < w->nouts; c++)
		shmrun_ring_flush(&w->outs[c].ring);
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
			if (!t->ins[i]->ended && shmrun_ring_readable(&t->ins[i]->ring))
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

/* Whether a source task still has records to produce (it may be rate-limited). */
static bool sources_active(const struct shmrun_worker *w)
{
	for (uint32_t x = 0; x < w->ntasks; x++)
		if ((w->tasks[x].op->flags & SHMRUN_OP_SOURCE) && !w->tasks[x].ended)
			return true;
	return false;
}

/*
 * Nothing progressed: spin (spin, or hybrid for its first SHMRUN_RING_SPIN_NS),
 * then sleep on this worker's bell, which every producer into and consumer of
 * its rings rings after publishing. A worker with an active source (perhaps
 * rate-limited) sleeps at most 100 us; otherwise up to 10 ms between checks.
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
	shmrun_bell_sleep(&w->stats->bell, worker_ready, w,
			  sources_active(w) ? 100000 : 10000000);
}

int shmrun_worker_run(const struct shmrun_plan *plan, const struct shmrun_segment *seg,
		      uint32_t index, struct shmrun_worker_stats *all_stats,
		      const volatile int *stop)
{
	struct shmrun_worker_stats *stats = &all_stats[index];
	struct shmrun_worker w = {
		.plan = plan,
		.seg = seg,
		.index = index,
		.stats = stats,
		.all_stats = all_stats,
		.stop = stop,
	};
	int64_t idle_since = 0;
	int err;

	err = shmrun_state_arena_init();
	if (!err)
		err = setup(&w);
	if (err) {
		snprintf(stats->error, sizeof(stats->error), "worker setup failed: %s",
			 strerror(-err));
		shmrun_log(SHMRUN_LOG_ERROR, "%s", stats->error);
		teardown(&w);
		return 1;
	}
	for (uint32_t x = 0; x < w.ntasks && !w.failed; x++) {
		struct shmrun_task *t = &w.tasks[x];

		err = t->op->open ? t->op->open(t, &t->state) : 0;
		if (err) {
			if (!w.failed)
				shmrun_task_error(t, "open failed: %s", strerror(-err));
			break;
		}
		t->opened = true;
	}
	while (!w.failed && !*stop) {
		if (step(&w)) {
			idle_since = 0;
			continue;
		}
		if (all_done(&w))
			break;
		idle_wait(&w, &idle_since);
	}
	for (uint32_t x = 0; x < w.ntasks; x++) {
		atomic_fetch_add_explicit(&stats->records_in, w.tasks[x].records_in,
					  memory_order_relaxed);
		atomic_fetch_add_explicit(&stats->records_out, w.tasks[x].records_out,
					  memory_order_relaxed);
		atomic_fetch_add_explicit(&stats->keys, w.tasks[x].kv.keys, memory_order_relaxed);
		atomic_fetch_add_explicit(&stats->state_bytes, w.tasks[x].kv.bytes,
					  memory_order_relaxed);
		atomic_fetch_add_explicit(&stats->key_bytes, w.tasks[x].kv.key_bytes,
					  memory_order_relaxed);
	}
	err = w.failed ? 1 : *stop ? 3 : 0;
	teardown(&w);
	return err;
}

/* ---- prepare (launcher side) ---------------------------------------------- */

int shmrun_task_prepare_stage(const struct shmrun_plan *plan, uint32_t stage, char *msg,
			      size_t msglen)
{
	const struct shmrun_job *job = plan->job;
	struct shmrun_worker_stats stats;
	struct shmrun_worker w = {.plan = plan, .stats = &stats};
	struct shmrun_task t = {
		.id = plan->stage_task0[stage],
		.stage = &job->stages[stage],
		.op = job->stages[stage].op,
		.width = job->stages[stage].width,
		.vnodes = job->vnodes,
		.w = &w,
	};
	int err;

	memset(&stats, 0, sizeof(stats));
	if (!t.op->prepare)
		return 0;
	err = t.op->prepare(&t);
	if (err)
		snprintf(msg, msglen, "%s", stats.error);
	return err;
}
