/*
 * runtime/task.c: the operator API's task functions (shmrun/operator.h) on
 * struct shmrun_task (task.h).
 *
 * What it is for. Everything an operator may ask of the task it runs as,
 * outside the data path (shmrun_emit() lives with the loop, worker.c):
 * where it is (stage, instance, vnodes), its topology.conf keys, how to fail
 * or log, counters, key-bound state, and the calls snapshot() may make.
 *
 * Invariants:
 * - the first failure wins: task_verror() writes stats->error only while the
 *   worker has not failed, note_fail_errno() keeps the first errno (relaxed
 *   compare-and-swap: only the worker itself and, after its exit, the
 *   launcher read it);
 * - shmrun_task_error() never cuts the end of a message (it says what to do):
 *   the shared-memory summary loses its middle (shmrun_fit_middle()), the log
 *   line is whole;
 * - key-bound state reuses the key hash that came with a record from a ring
 *   (cur_key/cur_hash, set by the loop around process()) instead of hashing
 *   the key again;
 * - a task's keys are made one way, set by its first insert (kv.mode):
 *   shmrun_keyed_state() uses the key bytes, shmrun_keyed_state_ns() the key
 *   bytes followed by the namespace (8 bytes, little-endian), in the vnode of
 *   the key bytes alone; mixing them would let a plain key and a pair share
 *   bytes, so the second kind is refused with a message;
 * - shmrun_pw_add() and shmrun_task_sync_fd() work only inside snapshot()
 *   (in_snapshot), else -EINVAL.
 *
 * Designs rejected: parameters parsed at every call (conf.c parses and checks
 * them once, at load; these read the parsed values); a second process-wide
 * error channel for operators (they report through their task, which knows
 * the stage and instance a person needs in the message).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "ckpt/state_file.h"
#include "shmrun/placement.h"
#include "task.h"
#include "ops/ops.h" /* shmrun_task_error_at() */
#include "util.h"
#include "worker.h"

/* ---- operator API: task accessors ---------------------------------------- */

const char *shmrun_task_stage(const struct shmrun_task *t)
{
	return t->stage->name;
}

const char *shmrun_task_job_name(const struct shmrun_task *t)
{
	return t->w && t->w->plan && t->w->plan->job->name ? t->w->plan->job->name : "";
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

/* The stage's index in the job, or UINT32_MAX when the task has no job (a bare test task). */
static uint32_t stage_index_of(const struct shmrun_task *t, const struct shmrun_job **job)
{
	*job = t->w && t->w->plan ? t->w->plan->job : NULL;
	if (!*job || t->stage < (*job)->stages || t->stage >= (*job)->stages + (*job)->nstages)
		return UINT32_MAX;
	return (uint32_t)(t->stage - (*job)->stages);
}

uint32_t shmrun_task_inputs(const struct shmrun_task *t)
{
	const struct shmrun_job *job;
	uint32_t s = stage_index_of(t, &job), n = 0;

	for (uint32_t e = 0; s != UINT32_MAX && e < job->nedges; e++)
		n += job->edges[e].to == s;
	return n;
}

uint32_t shmrun_task_input(const struct shmrun_task *t)
{
	return t->cur_input;
}

bool shmrun_task_input_by_key(const struct shmrun_task *t, uint32_t i)
{
	const struct shmrun_job *job;
	uint32_t s = stage_index_of(t, &job), k = 0;

	for (uint32_t e = 0; s != UINT32_MAX && e < job->nedges; e++)
		if (job->edges[e].to == s && k++ == i)
			return job->edges[e].by_key;
	return false;
}

int shmrun_task_require_by_key(struct shmrun_task *t, const char *op)
{
	uint32_t n = shmrun_task_inputs(t);

	if (shmrun_task_width(t) <= 1)
		return 0;
	for (uint32_t i = 0; i < n; i++)
		if (!shmrun_task_input_by_key(t, i)) {
			shmrun_task_error_at(t, "input",
					     "%s keeps its state per key, and at width %u the records "
					     "of a key must all reach one instance: write `by key` "
					     "after %s input%s (input = STAGE by key), or set width = 1",
					     op, shmrun_task_width(t), n > 1 ? "every" : "its",
					     n > 1 ? "" : "");
			return -EINVAL;
		}
	return 0;
}

/* The line of the stage's `input =` key, 0 if none (its edges carry it). */
static int input_line(const struct shmrun_task *t)
{
	const struct shmrun_job *job;
	uint32_t s = stage_index_of(t, &job);

	for (uint32_t e = 0; s != UINT32_MAX && e < job->nedges; e++)
		if (job->edges[e].to == s)
			return job->edges[e].line;
	return 0;
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

/* Keep the first errno an operator failed with, for the launcher to judge
 * whether a restart can cure it (shmrun_errno_is_permanent()). */
void note_fail_errno(struct shmrun_worker *w, int err)
{
	int32_t none = 0;

	if (err < 0)
		atomic_compare_exchange_strong_explicit(&w->stats->fail_errno, &none, -err,
							memory_order_relaxed, memory_order_relaxed);
}

/* The whole first error of a quiet task (prepare, in the launcher): stats->error may cut it. */
static char *quiet_error;
/* the conf line of the key it is about (shmrun_task_error_at()), 0 if none */
static int quiet_error_line;

const char *shmrun_task_quiet_error(void)
{
	return quiet_error;
}

int shmrun_task_quiet_error_line(void)
{
	return quiet_error ? quiet_error_line : 0;
}

void shmrun_task_quiet_error_reset(void)
{
	free(quiet_error);
	quiet_error = NULL;
	quiet_error_line = 0;
}

static void task_verror(struct shmrun_task *t, const char *fmt, va_list ap)
{
	char *msg = NULL; /* whole: shmrun_log() cuts the middle of a very long line */

	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	if (!msg)
		msg = strdup(fmt);
	if (!msg)
		return;
	if (t->w) {
		/* the summary in shared memory may be cut short; the log line is whole */
		if (!t->w->failed && t->w->stats) {
			char *full = NULL;

			/* cut in the middle: the end says what to do */
			if (asprintf(&full, "stage '%s' [%u]: %s", t->stage->name, t->instance,
				     msg) >= 0) {
				shmrun_fit_middle(t->w->stats->error, sizeof(t->w->stats->error),
						  full);
				free(full);
			}
		}
		t->w->failed = true;
		if (t->w->quiet) {
			if (!quiet_error &&
			    asprintf(&quiet_error, "stage '%s' [%u]: %s", t->stage->name,
				     t->instance, msg) < 0)
				quiet_error = NULL;
			free(msg);
			return; /* the caller reports it (prepare) */
		}
	}
	shmrun_log_task(SHMRUN_LOG_ERROR, NULL, t->stage->name, t->instance, msg);
	free(msg);
}

/* Log @fmt at @level tagged with the stage and instance, never cut at the end. */
static void task_vlog(struct shmrun_task *t, enum shmrun_log_level level, const char *fmt,
		      va_list ap)
{
	char *msg = NULL;

	if (vasprintf(&msg, fmt, ap) < 0)
		return;
	if (t->w && t->w->quiet && t->w->plan->job->conf_path) { /* prepare, in the launcher */
		shmrun_log_task(level,
				SHMRUN_CONF_AT(t->w->plan->job->conf_path,
					       shmrun_prepare_line(t->stage)),
				t->stage->name, t->instance, msg);
	} else {
		shmrun_log_task(level, NULL, t->stage->name, t->instance, msg);
	}
	free(msg);
}

void shmrun_task_error(struct shmrun_task *t, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	task_verror(t, fmt, ap);
	va_end(ap);
}

void shmrun_task_error_at(struct shmrun_task *t, const char *key, const char *fmt, ...)
{
	const struct shmrun_param *p = key ? find_param(t, key) : NULL;
	va_list ap;

	if (t->w && t->w->quiet && !quiet_error)
		quiet_error_line = p && p->line > 0 ? p->line
				   : key && strcmp(key, "input") == 0 ? input_line(t) : 0;
	va_start(ap, fmt);
	task_verror(t, fmt, ap);
	va_end(ap);
}

void shmrun_task_log(struct shmrun_task *t, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	task_vlog(t, SHMRUN_LOG_INFO, fmt, ap);
	va_end(ap);
}

const char *shmrun_task_conf_dir(const struct shmrun_task *t)
{
	return t->w && t->w->plan && t->w->plan->job ? t->w->plan->job->conf_dir : NULL;
}

void shmrun_task_warn(struct shmrun_task *t, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	task_vlog(t, SHMRUN_LOG_WARN, fmt, ap);
	va_end(ap);
}

void shmrun_task_count(struct shmrun_task *t, enum shmrun_counter counter, uint64_t n)
{
	if (counter == SHMRUN_COUNT_RECORDS_IN)
		t->records_in += n;
	else if (counter == SHMRUN_COUNT_RECORDS_OUT)
		t->records_out += n;
	else if (counter == SHMRUN_COUNT_RECORDS_BAD)
		t->records_bad += n;
	else if (counter == SHMRUN_COUNT_LATE_RECORDS)
		t->records_late += n;
}

/*
 * The kind of key a call of kind @mode makes is the task's, or becomes it on
 * the first insert (@create). A lookup before any insert finds nothing (the
 * store's value size is not fixed yet, and state.c would call a size a
 * mismatch). Return: whether the call may go on (false: return NULL; the
 * task failed with a message if the kinds were mixed).
 */
static bool keyed_mode(struct shmrun_task *t, enum shmrun_kv_mode mode, bool create)
{
	static const char *const api[] = {"", "shmrun_keyed_state()", "shmrun_keyed_state_ns()"};

	if (t->kv.mode == mode)
		return true;
	if (t->kv.mode == SHMRUN_KV_MODE_NONE && t->kv.keys == 0) {
		if (create)
			t->kv.mode = mode;
		return create;
	}
	if (t->kv.mode == SHMRUN_KV_MODE_NONE)
		return true; /* keys restored from a file of no kind (cannot happen) */
	shmrun_task_error(t, "%s used after %s: an operator keeps its key-bound state with one "
			     "of them",
			  api[mode], api[t->kv.mode]);
	return false;
}

static void keyed_failed(struct shmrun_task *t, int err, uint32_t value_bytes)
{
	if (err == -ENOMEM)
		shmrun_task_error(
		    t, "out of memory for key-bound state (%" PRIu64 " key%s, %" PRIu64 " bytes)",
		    t->kv.keys, t->kv.keys == 1 ? "" : "s", t->kv.bytes);
	else if (err)
		shmrun_task_error(t, "key-bound state used with %u-byte values after %u-byte ones",
				  value_bytes, t->kv.value_bytes);
}

void *shmrun_keyed_state(struct shmrun_task *t, const void *key, uint32_t key_len,
			 uint32_t value_bytes, bool create)
{
	uint64_t h;
	int err;

	if (__builtin_expect(t->kv.mode != SHMRUN_KV_MODE_PLAIN, 0) &&
	    !keyed_mode(t, SHMRUN_KV_MODE_PLAIN, create))
		return NULL;
	if (!task_known_hash(t, key, key_len, &h))
		h = XXH3_64bits(key, key_len);
	void *v = shmrun_kv_get(&t->kv, shmrun_placement_vnode_of_hash(h, t->vnodes), h, key,
				key_len, value_bytes, create, &err);

	if (!v)
		keyed_failed(t, err, value_bytes);
	return v;
}

/*
 * The stored key of the pair (@key, @ns) in t->ns_key, its slot hash in *@h
 * and its vnode (that of @key) in *@vnode. Return: its length, or 0 (-ENOMEM).
 */
static uint32_t ns_key(struct shmrun_task *t, const void *key, uint32_t key_len, uint64_t ns,
		       uint64_t *h, uint32_t *vnode)
{
	uint32_t n = key_len + 8;
	uint64_t kh;

	if (n > t->ns_key_cap) {
		uint32_t cap = t->ns_key_cap ? t->ns_key_cap : 64;
		unsigned char *p;

		while (cap < n)
			cap = cap > UINT32_MAX / 2 ? UINT32_MAX : cap * 2;
		p = realloc(t->ns_key, cap);
		if (!p)
			return 0;
		t->ns_key = p;
		t->ns_key_cap = cap;
	}
	if (!task_known_hash(t, key, key_len, &kh))
		kh = XXH3_64bits(key, key_len);
	*vnode = shmrun_placement_vnode_of_hash(kh, t->vnodes);
	if (key_len)
		memcpy(t->ns_key, key, key_len);
	memcpy(t->ns_key + key_len, &ns, 8); /* little-endian: state.h insists */
	*h = XXH3_64bits(t->ns_key, n);
	return n;
}

void *shmrun_keyed_state_ns(struct shmrun_task *t, const void *key, uint32_t key_len, uint64_t ns,
			    uint32_t value_bytes, bool create)
{
	uint32_t n, vnode;
	uint64_t h;
	void *v;
	int err;

	if (key_len > UINT32_MAX - 8) {
		shmrun_task_error(t, "shmrun_keyed_state_ns(): a key of %u bytes is too long",
				  key_len);
		return NULL;
	}
	if (!keyed_mode(t, SHMRUN_KV_MODE_NS, create))
		return NULL;
	n = ns_key(t, key, key_len, ns, &h, &vnode);
	if (!n) {
		keyed_failed(t, -ENOMEM, value_bytes);
		return NULL;
	}
	v = shmrun_kv_get(&t->kv, vnode, h, t->ns_key, n, value_bytes, create, &err);
	if (!v)
		keyed_failed(t, err, value_bytes);
	return v;
}

int shmrun_keyed_state_delete(struct shmrun_task *t, const void *key, uint32_t key_len,
			      bool namespaced, uint64_t ns)
{
	uint32_t n, vnode;
	uint64_t h;

	if (t->kv.mode != (namespaced ? SHMRUN_KV_MODE_NS : SHMRUN_KV_MODE_PLAIN))
		return -ENOENT; /* nothing of that kind was ever inserted */
	if (!namespaced) {
		if (!task_known_hash(t, key, key_len, &h))
			h = XXH3_64bits(key, key_len);
		return shmrun_kv_delete(&t->kv, shmrun_placement_vnode_of_hash(h, t->vnodes), h,
					key, key_len);
	}
	if (key_len > UINT32_MAX - 8)
		return -ENOENT;
	n = ns_key(t, key, key_len, ns, &h, &vnode);
	if (!n)
		return -ENOMEM;
	return shmrun_kv_delete(&t->kv, vnode, h, t->ns_key, n);
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

/* ---- operator API: snapshot and restore ------------------------------------- */

int shmrun_pw_add(struct shmrun_task *t, const void *entry, uint32_t len)
{
	size_t need = (size_t)shmrun_state_pw_entry_size(len);
	int err;

	if (!t->in_snapshot)
		return -EINVAL;
	err = shmrun_grow(&t->pw, &t->pw_cap, t->pw_len + need, 1, 256);
	if (err)
		return err;
	shmrun_state_pw_encode(t->pw + t->pw_len, entry, len);
	t->pw_len += need;
	t->pw_n++;
	return 0;
}

int shmrun_task_sync_fd(struct shmrun_task *t, int fd)
{
	int err;

	if (!t->in_snapshot)
		return -EINVAL;
	err = shmrun_grow_u32(&t->sync_fds, &t->sync_cap, (size_t)t->nsync + 1,
			      sizeof(*t->sync_fds), 4);
	if (err)
		return err;
	t->sync_fds[t->nsync++] = fd;
	return 0;
}

uint32_t shmrun_task_max_record(const struct shmrun_task *t)
{
	/* the largest frame payload less the record header (worker.c's
	 * record_too_large() says the same rule: ring_bytes/2 - 32) */
	uint64_t rb = t->w && t->w->plan ? t->w->plan->job->ring_bytes : 1u << 20;

	return (uint32_t)(rb / 2 - 32);
}

bool shmrun_task_checkpointing(const struct shmrun_task *t)
{
	return t->w && t->w->checkpointing;
}

uint64_t shmrun_task_restored_epoch(const struct shmrun_task *t)
{
	return t->w && t->w->ctl ? t->w->ctl->restored_epoch : 0;
}

bool shmrun_task_restoring(const struct shmrun_task *t)
{
	return t->restoring;
}

bool shmrun_stage_combines(const struct shmrun_stage *st)
{
	const struct shmrun_combiner *cb = st->op ? st->op->combiner : NULL;
	struct shmrun_task t = {.stage = st, .op = st->op, .width = st->width};

	if (!cb || st->combine == 0)
		return false;
	return !cb->enabled || cb->enabled(&t);
}
