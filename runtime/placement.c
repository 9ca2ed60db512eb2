/*
 * runtime/placement.c: which worker runs which task, and which instance owns
 * which vnode. Pure arithmetic: no I/O, no global state, no clock.
 *
 * What it is for. There is no control plane (docs/design.md §1): the launcher and
 * every worker compute the same task -> worker map on their own, from the
 * stage widths and the sorted member set. Nobody is told its placement, so
 * nothing can disagree about it, and a restart with the same topology and the
 * same members reproduces the same map.
 *
 * The two maps, for an n-wide stage over w workers and V vnodes:
 *
 *     owner_of(i, n, w)  = floor(i*w/n)                 instance -> worker
 *     vnode_range(i, n)  = [floor(i*V/n), floor((i+1)*V/n))   instance -> vnodes
 *
 *     n = 5, w = 2:   instance  0  1  2 | 3  4
 *                     worker    0  0  0 | 1  1
 *
 * Both cut [0, n) (resp. [0, V)) into contiguous blocks the same way, so a
 * worker owns a contiguous span of a stage's vnodes, adjacent instances tend to
 * share a worker, and two stages of equal width place instance i on the same
 * worker: a forward edge i -> i never leaves its process (docs/design.md §3).
 *
 * Invariants (tests/unit/check_placement.c states them as properties over all
 * n, w <= 64):
 *   - owner_of is monotone in i, hits every worker when n >= w, and gives each
 *     worker floor(n/w) or ceil(n/w) instances.
 *   - The products are computed in 64 bits: i*w and i*V never overflow for
 *     32-bit operands.
 *   - instance_of_vnode(v) is the unique i with v in vnode_range(i), for every
 *     V and n, including n > V where some ranges are empty: it is
 *     ceil((v+1)*n/V) - 1, derived from the two inequalities of the range.
 *   - Arguments are clamped, never trusted: n, w, V >= 1; i >= n means the last
 *     instance; v >= V means the last vnode.
 *
 * The member set is sorted and de-duplicated so that the order in which
 * workers were listed or started cannot change the map; a worker's index in
 * the sorted set is the worker number owner_of() speaks of. A solo run (one
 * member) places every task on worker 0 and contributes an empty fingerprint
 * clause, so its checkpoints never depend on membership.
 *
 * Rejected designs.
 *   - Round-robin (i mod w): balanced too, but it scatters adjacent instances
 *     and vnode spans over all workers, so every shuffle edge crosses rings.
 *   - Consistent hashing of task ids: moves fewer tasks when w changes, but is
 *     neither contiguous nor exactly balanced; rescale here is restart-based and
 *     re-deals whole vnodes anyway (docs/design.md §6).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shmrun/placement.h"

static uint32_t clamp_at_least_1(uint32_t x)
{
	return x ? x : 1;
}

uint32_t shmrun_placement_owner_of(uint32_t i, uint32_t n, uint32_t w)
{
	n = clamp_at_least_1(n);
	w = clamp_at_least_1(w);
	if (i >= n)
		i = n - 1;
	return (uint32_t)((uint64_t)i * w / n);
}

void shmrun_placement_vnode_range(uint32_t i, uint32_t n, uint32_t vnodes, uint32_t *lo,
				  uint32_t *hi)
{
	n = clamp_at_least_1(n);
	vnodes = clamp_at_least_1(vnodes);
	if (i >= n)
		i = n - 1;
	*lo = (uint32_t)((uint64_t)i * vnodes / n);
	*hi = (uint32_t)(((uint64_t)i + 1) * vnodes / n);
}

uint32_t shmrun_placement_instance_of_vnode(uint32_t vnode, uint32_t n, uint32_t vnodes)
{
	uint64_t i;

	n = clamp_at_least_1(n);
	vnodes = clamp_at_least_1(vnodes);
	if (vnode >= vnodes)
		vnode = vnodes - 1;
	/*
	 * floor(i*V/n) <= v      <=>  i < (v+1)*n/V
	 * v < floor((i+1)*V/n)   <=>  i >= (v+1)*n/V - 1
	 * so i = ceil((v+1)*n/V) - 1 = floor(((v+1)*n - 1) / V).
	 */
	i = (((uint64_t)vnode + 1) * n - 1) / vnodes;
	return i < n ? (uint32_t)i : n - 1;
}

uint32_t shmrun_placement_assign(const uint32_t *widths, uint32_t nstages, uint32_t workers,
				 uint32_t *out)
{
	uint32_t task = 0;

	for (uint32_t s = 0; s < nstages; s++)
		for (uint32_t i = 0; i < widths[s]; i++)
			out[task++] = shmrun_placement_owner_of(i, widths[s], workers);
	return task;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

int shmrun_members_init(struct shmrun_members *m, const uint32_t *ids, uint32_t n, uint32_t self_id)
{
	uint32_t *sorted;
	uint32_t k = 0;

	memset(m, 0, sizeof(*m));
	if (n == 0 || !ids)
		return -EINVAL;
	sorted = malloc((size_t)n * sizeof(*sorted));
	if (!sorted)
		return -ENOMEM;
	memcpy(sorted, ids, (size_t)n * sizeof(*sorted));
	qsort(sorted, n, sizeof(*sorted), cmp_u32);
	for (uint32_t j = 0; j < n; j++)
		if (k == 0 || sorted[j] != sorted[k - 1])
			sorted[k++] = sorted[j];

	m->self = UINT32_MAX;
	for (uint32_t j = 0; j < k; j++)
		if (sorted[j] == self_id)
			m->self = j;
	if (m->self == UINT32_MAX && self_id != UINT32_MAX) {
		free(sorted);
		memset(m, 0, sizeof(*m));
		return -EINVAL;
	}
	m->ids = sorted;
	m->n = k;
	return 0;
}

void shmrun_members_free(struct shmrun_members *m)
{
	free(m->ids);
	memset(m, 0, sizeof(*m));
}

int shmrun_members_fingerprint_clause(const struct shmrun_members *m, char *buf, uint32_t len)
{
	size_t need = 0;
	int r;

	if (buf && len)
		buf[0] = '\0';
	if (m->n <= 1)
		return 0;

	/* snprintf into the remaining room; keep counting when it runs out. */
	r = snprintf(buf, len, "members=%u:", m->n);
	if (r < 0)
		return -EINVAL;
	need = (size_t)r;
	for (uint32_t j = 0; j < m->n; j++) {
		size_t room = need < len ? len - need : 0;

		r = snprintf(room ? buf + need : NULL, room, j ? ",%u" : "%u", m->ids[j]);
		if (r < 0)
			return -EINVAL;
		need += (size_t)r;
	}
	return (int)need;
}
