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
	shmrun_log(SHMRUN_LOG_ERROR, "stage '%s' [%u]: %s", t->stage->name, t->instance, msg);
	free(msg);
}

/* Log @fmt at @level tagged with the stage and instance, never cut at the end. */
static void task_vlog(struct shmrun_task *t, enum shmrun_log_level level, const char *fmt,
		      va_list ap)
{
	char *msg = NULL;

	if (vasprintf(&msg, fmt, ap) < 0)
		return;
	if (t->w && t->w->quiet && t->w->plan->job->conf_path) /* prepare, in the launcher */
		shmrun_log(level, "%s:%d: stage '%s' [%u]: %s", t->w->plan->job->conf_path,
			   shmrun_prepare_line(t->stage), t->stage->name, t->instance, msg);
	else
		shmrun_log(level, "stage '%s' [%u]: %s", t->stage->name, t->instance, msg);
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
		quiet_error_line = p && p->line > 0 ? p->line : 0;
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

void *shmrun_keyed_state(struct shmrun_task *t, const void *key, uint32_t key_len,
			 uint32_t value_bytes, bool create)
{
	uint64_t h;
	int err;

	if (!task_known_hash(t, key, key_len, &h))
		h = XXH3_64bits(key, key_len);
	void *v = shmrun_kv_get(&t->kv, shmrun_placement_vnode_of_hash(h, t->vnodes), h, key,
				key_len, value_bytes, create, &err);

	if (!v && err == -ENOMEM)
		shmrun_task_error(
		    t, "out of memory for key-bound state (%" PRIu64 " key%s, %" PRIu64 " bytes)",
		    t->kv.keys, t->kv.keys == 1 ? "" : "s", t->kv.bytes);
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
