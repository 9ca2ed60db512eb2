/*
 * shmrun/placement.h: deterministic placement of tasks on workers.
 *
 * Pure arithmetic, no I/O (docs/design.md §3). Every
 * worker computes the same task -> worker map from the topology and the sorted
 * member set, so no process is ever told its placement and there is no control
 * plane (seed D9). Contiguous blocks: instance i of n -> worker floor(i*w/n),
 * mirroring vnode_ranges, so a worker owns a contiguous span of a stage's
 * vnodes and a forward edge between equal-width stages stays in one process.
 */
#ifndef SHMRUN_PLACEMENT_H
#define SHMRUN_PLACEMENT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Exported by libshmrun.so.0, which is built with -fvisibility=hidden: see
 * runtime/libshmrun.map. Also keeps these default in a plugin built hidden. */
#pragma GCC visibility push(default)

/**
 * The sorted, de-duplicated set of a run's workers, plus this process's own
 * index. Worker ids are opaque (CPU numbers, or 0..n-1); a worker's index in
 * the sorted set is its WorkerId used by owner_of().
 */
struct shmrun_members {
	uint32_t *ids; /**< sorted ascending, unique; owned */
	uint32_t n;    /**< count, >= 1 */
	uint32_t self; /**< this process's index into ids */
};

/**
 * shmrun_members_init() - sort and de-duplicate @ids into @m.
 * @ids, @n: worker ids in any order, duplicates allowed; @n >= 1.
 * @self_id: this process's id (must be among @ids), or UINT32_MAX for the launcher,
 *           which then gets m->self = UINT32_MAX (no index).
 * Return: 0; -EINVAL if @n is 0 or @self_id is not a member; -ENOMEM. On error
 * @m is zeroed.
 */
int shmrun_members_init(struct shmrun_members *m, const uint32_t *ids, uint32_t n,
			uint32_t self_id);

/** shmrun_members_free() - release @m's list. */
void shmrun_members_free(struct shmrun_members *m);

/**
 * shmrun_members_fingerprint_clause() - the member set's contribution to the
 * checkpoint fingerprint, written into @buf (NUL-terminated, at most @len bytes):
 * empty for a solo run (so a solo run's fingerprint never depends on members),
 * "members=<n>:<id>,<id>,..." otherwise.
 * Return: bytes the clause needs, excluding the NUL (like snprintf).
 */
int shmrun_members_fingerprint_clause(const struct shmrun_members *m, char *buf, uint32_t len);

/**
 * shmrun_placement_owner_of() - the worker (index into the member set) of
 * instance @i of an @n-wide stage over @w workers: floor(i*w/n) in 64-bit
 * arithmetic. @w and @n are clamped to >= 1; @i >= @n is treated as n-1.
 */
uint32_t shmrun_placement_owner_of(uint32_t i, uint32_t n, uint32_t w);

/**
 * shmrun_placement_vnode_range() - the vnodes instance @i of @n owns out of
 * @vnodes: [floor(i*V/n), floor((i+1)*V/n)). Clamping as owner_of.
 */
void shmrun_placement_vnode_range(uint32_t i, uint32_t n, uint32_t vnodes, uint32_t *lo,
				  uint32_t *hi);

/**
 * shmrun_placement_instance_of_vnode() - the instance of an @n-wide stage
 * whose vnode range holds @vnode (the inverse of vnode_range).
 */
uint32_t shmrun_placement_instance_of_vnode(uint32_t vnode, uint32_t n, uint32_t vnodes);

/**
 * shmrun_placement_vnode_of_hash() - the vnode of a key whose XXH3-64 hash is
 * @hash, out of @vnodes: the high 32 bits of the hash scaled to [0, V)
 * (Lemire's multiply-shift range reduction: uniform like a modulo, without a
 * division on the per-record path).
 */
static inline uint32_t shmrun_placement_vnode_of_hash(uint64_t hash, uint32_t vnodes)
{
	return (uint32_t)(((hash >> 32) * (uint64_t)vnodes) >> 32);
}

/**
 * shmrun_placement_assign() - place a whole graph.
 * @widths:   @nstages stage widths; tasks are numbered densely stage by stage,
 *            in this order (stage 0's instances first).
 * @nstages:  stage count.
 * @workers:  member count w (>= 1; 0 is clamped to 1).
 * @out:      receives one worker index per task, sum(widths) entries.
 * Return: the task count.
 */
uint32_t shmrun_placement_assign(const uint32_t *widths, uint32_t nstages, uint32_t workers,
				 uint32_t *out);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif /* SHMRUN_PLACEMENT_H */
