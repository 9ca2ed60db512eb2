/*
 * runtime/ops/ranges.h: a source's share of a numbered range [0, count),
 * cut into pieces dealt to the stage's instances, as per-worker state
 * (pw_rule SHMRUN_PW_SPLIT). Shared by sequence.c and nexmark.c; the idea
 * is file_source's: piece k of `piece` numbers goes to instance k mod width,
 * so every number is produced by exactly one instance at any width, and the
 * union of all instances' output does not depend on the width.
 *
 * Per-worker state: one entry per range still to generate, [u64 next][u64
 * end], the current one first. On a restore (shmrun_task_restoring()) no
 * range is dealt: the restored entries are all there is to do, and an
 * instance given none has finished. A rescale pools and deals the entries
 * (SPLIT), each owned by one new instance: no number twice, none lost.
 */
#ifndef SHMRUN_OPS_RANGES_H
#define SHMRUN_OPS_RANGES_H

#include <stdbool.h>
#include <stdint.h>

#include "shmrun/operator.h"

struct shmrun_range {
	uint64_t next, end; /* numbers next..end-1 remain */
};

struct shmrun_ranges {
	struct shmrun_range *r; /* this instance's, in order of next */
	uint32_t n, cap, cur;	/* r[cur] is the current one */
	bool unsorted;		/* restored entries, sorted before the first use */
};

/*
 * shmrun_ranges_deal() - open(): this instance's pieces of [0, @count), in
 * pieces of @piece numbers (>= 1), piece k to instance k mod width. Deals
 * nothing when the task is restoring (restore() brings the ranges).
 * Bounds: (count / piece + width + 1) * piece must fit in 64 bits.
 * Return: 0, or -ENOMEM.
 */
int shmrun_ranges_deal(struct shmrun_ranges *rs, struct shmrun_task *task, uint64_t count,
		       uint64_t piece);

/*
 * shmrun_ranges_current() - the range to produce from next (next < end),
 * skipping finished ones; NULL when every range is done.
 */
struct shmrun_range *shmrun_ranges_current(struct shmrun_ranges *rs);

/* shmrun_ranges_snapshot() - snapshot(): one entry per unfinished range.
 * Return: 0, or shmrun_pw_add()'s error. */
int shmrun_ranges_snapshot(struct shmrun_ranges *rs, struct shmrun_task *task);

/* shmrun_ranges_restore() - restore(): append one restored entry.
 * Return: 0, -EBADMSG (malformed entry, after shmrun_task_error()), -ENOMEM. */
int shmrun_ranges_restore(struct shmrun_ranges *rs, struct shmrun_task *task, const void *entry,
			  uint32_t len);

/* shmrun_ranges_free() - close(): release the ranges (@rs itself is the caller's). */
void shmrun_ranges_free(struct shmrun_ranges *rs);

/*
 * shmrun_ranges_check_times() - prepare(): refuse a range whose last event
 * time does not fit: number @count - 1 at @t0_ns + (@count - 1) x @step_ns
 * must stay below INT64_MAX ns (2262-04-11), or the times would saturate
 * and every later record share one. @what names the keys for the message
 * ("event_time_start + (count - 1) x event_time_step").
 * Return: 0, or -ERANGE after shmrun_task_error().
 */
int shmrun_ranges_check_times(struct shmrun_task *task, const char *what, int64_t t0_ns,
			      int64_t step_ns, uint64_t count);

/*
 * struct shmrun_range_source - what sequence and nexmark share: the ranges
 * and produce()'s batch, record i's key and value bytes in slot i of @text
 * (@slot bytes each). It is the FIRST member of such an operator's state, so
 * that shmrun_range_source_snapshot/restore/close serve as its callbacks.
 */
struct shmrun_range_source {
	struct shmrun_ranges ranges;
	struct shmrun_record *recs;
	char *text;
	uint32_t recs_cap, text_cap; /* grown together; a failed second grow leaves one larger */
	uint32_t slot;               /* bytes of text per record (set at open()) */
};

/* shmrun_range_source_reserve() - room for a batch of @n records.
 * Return: 0, or -ENOMEM (after shmrun_task_error()). */
int shmrun_range_source_reserve(struct shmrun_range_source *src, struct shmrun_task *task,
				uint32_t n);

/* shmrun_range_source_text() - record @i's slot of key and value bytes. */
static inline char *shmrun_range_source_text(const struct shmrun_range_source *src, uint32_t i)
{
	return src->text + (size_t)i * src->slot;
}

/* shmrun_range_source_emit() - count the batch's @n records in and emit them.
 * Return: 0, or shmrun_emit_batch()'s error. */
int shmrun_range_source_emit(struct shmrun_range_source *src, struct shmrun_task *task,
			     uint32_t n);

/* The operator callbacks of a state whose first member is a struct
 * shmrun_range_source: snapshot() and restore() of its ranges, close() of the
 * whole state (the ranges, the batch, then the state itself). */
int shmrun_range_source_snapshot(struct shmrun_task *task, void *state, uint64_t epoch);
int shmrun_range_source_restore(struct shmrun_task *task, void *state, const void *entry,
				uint32_t len);
void shmrun_range_source_close(struct shmrun_task *task, void *state);

#endif /* SHMRUN_OPS_RANGES_H */
