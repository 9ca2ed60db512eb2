/*
 * runtime/ops/ranges.c: pieces of a numbered range dealt to a source's
 * instances and kept as per-worker state (ranges.h says the rules).
 *
 * Rejected: each generating source keeping its own copy (sequence had it
 * first; nexmark needs exactly the same exactly-once behaviour across
 * restore and --rescale, and two copies would drift).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "ranges.h"
#include "util.h"

static int add_range(struct shmrun_ranges *rs, uint64_t next, uint64_t end)
{
	if (shmrun_grow_u32(&rs->r, &rs->cap, (size_t)rs->n + 1, sizeof(*rs->r), 16))
		return -ENOMEM;
	rs->r[rs->n++] = (struct shmrun_range){next, end};
	return 0;
}

int shmrun_ranges_deal(struct shmrun_ranges *rs, struct shmrun_task *task, uint64_t count,
		       uint64_t piece)
{
	uint32_t width = shmrun_task_width(task);

	if (shmrun_task_restoring(task))
		return 0; /* the ranges are the restored entries, if any */
	for (uint64_t k = shmrun_task_instance(task); k * piece < count; k += width) {
		uint64_t end = (k + 1) * piece < count ? (k + 1) * piece : count;

		if (add_range(rs, k * piece, end))
			return -ENOMEM;
	}
	return 0;
}

static int range_cmp(const void *a, const void *b)
{
	const struct shmrun_range *x = a, *y = b;

	return x->next < y->next ? -1 : x->next > y->next;
}

struct shmrun_range *shmrun_ranges_current(struct shmrun_ranges *rs)
{
	/*
	 * Restored entries come in the order a rescale dealt them (pooled by
	 * old instance, then dealt k mod width): a later piece may precede an
	 * earlier one. The numbers are produced in increasing order all the
	 * same, so event times stay in order and watermark_delay = 0s stays
	 * exact after a --rescale (nexmark, sequence's event_time = sequence).
	 */
	if (rs->unsorted) {
		qsort(rs->r + rs->cur, rs->n - rs->cur, sizeof(*rs->r), range_cmp);
		rs->unsorted = false;
	}
	while (rs->cur < rs->n && rs->r[rs->cur].next >= rs->r[rs->cur].end)
		rs->cur++;
	return rs->cur < rs->n ? &rs->r[rs->cur] : NULL;
}

int shmrun_ranges_snapshot(struct shmrun_ranges *rs, struct shmrun_task *task)
{
	for (uint32_t i = rs->cur; i < rs->n; i++) {
		int err;

		if (rs->r[i].next >= rs->r[i].end)
			continue;
		err = shmrun_pw_add(task, &rs->r[i], sizeof(rs->r[i]));
		if (err)
			return err;
	}
	return 0;
}

int shmrun_ranges_restore(struct shmrun_ranges *rs, struct shmrun_task *task, const void *entry,
			  uint32_t len)
{
	struct shmrun_range r;

	if (len != sizeof(r)) {
		shmrun_task_error(task, "restored range is malformed (%u bytes)", len);
		return -EBADMSG;
	}
	memcpy(&r, entry, sizeof(r));
	rs->unsorted = true;
	return add_range(rs, r.next, r.end);
}

void shmrun_ranges_free(struct shmrun_ranges *rs)
{
	free(rs->r);
	rs->r = NULL;
	rs->n = rs->cap = rs->cur = 0;
}

int shmrun_range_source_reserve(struct shmrun_range_source *src, struct shmrun_task *task,
				uint32_t n)
{
	if ((n > src->recs_cap || n > src->text_cap) &&
	    (shmrun_grow_u32(&src->recs, &src->recs_cap, n, sizeof(*src->recs), 64) ||
	     shmrun_grow_u32(&src->text, &src->text_cap, n, src->slot, 64))) {
		shmrun_task_error(task, "out of memory for a batch of %u records", n);
		return -ENOMEM;
	}
	return 0;
}

int shmrun_range_source_emit(struct shmrun_range_source *src, struct shmrun_task *task,
			     uint32_t n)
{
	if (!n)
		return 0;
	shmrun_task_count(task, SHMRUN_COUNT_RECORDS_IN, n);
	return shmrun_emit_batch(task, src->recs, n);
}

int shmrun_range_source_snapshot(struct shmrun_task *task, void *state, uint64_t epoch)
{
	struct shmrun_range_source *src = state;

	(void)epoch;
	return shmrun_ranges_snapshot(&src->ranges, task);
}

int shmrun_range_source_restore(struct shmrun_task *task, void *state, const void *entry,
				uint32_t len)
{
	struct shmrun_range_source *src = state;

	return shmrun_ranges_restore(&src->ranges, task, entry, len);
}

void shmrun_range_source_close(struct shmrun_task *task, void *state)
{
	struct shmrun_range_source *src = state;

	(void)task;
	if (src) {
		shmrun_ranges_free(&src->ranges);
		free(src->recs);
		free(src->text);
	}
	free(state);
}

int shmrun_ranges_check_times(struct shmrun_task *task, const char *what, int64_t t0_ns,
			      int64_t step_ns, uint64_t count)
{
	int64_t d, t;

	if (count && count - 1 <= (uint64_t)INT64_MAX &&
	    !__builtin_mul_overflow((int64_t)(count - 1), step_ns, &d) &&
	    !__builtin_add_overflow(t0_ns, d, &t) && t < INT64_MAX)
		return 0;
	shmrun_task_error(task,
			  "%s, the last record's event time, is past the last one shmrun holds "
			  "(2^63 - 1 ns since the epoch, 2262-04-11): lower count or the step, or "
			  "start earlier",
			  what);
	return -ERANGE;
}
