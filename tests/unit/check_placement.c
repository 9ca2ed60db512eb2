/*
 * tests/unit/check_placement.c: runtime/placement.c, stated as properties.
 *
 * docs/design.md §3 names the properties placement must have; each
 * TCase checks one of them exhaustively over every stage width n <= 64 and
 * every worker count w <= 64 (and member sets given in shuffled orders):
 *
 *   owner_of      the formula floor(i*w/n), 64-bit products, clamping
 *   contiguity    each worker's instances form one block, in worker order
 *   balance       each worker gets floor(n/w) or ceil(n/w) instances
 *   assign        dense task ids stage by stage; determinism; forward pairs
 *                 of equal-width stages co-located; solo = all on worker 0
 *   members       sort + de-duplicate; order independence; self index;
 *                 fingerprint clause (empty when solo)
 *   vnodes        vnode_range partitions [0, V) into contiguous, balanced
 *                 ranges; instance_of_vnode is its exact inverse for all
 *                 V <= 256 and n <= V, n > V, and large V; a worker's vnodes
 *                 are contiguous
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shmrun/placement.h"

#define MAXN 64u
#define MAXW 64u

/*
 * Check's ck_assert_*() records a mark for every assertion that passes (a
 * write to the parent process in fork mode), so millions of them take
 * minutes. The exhaustive loops test with CHECK(), which calls into Check only
 * when the condition fails.
 */
#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond))                                                                       \
			ck_abort_msg(__VA_ARGS__);                                                 \
	} while (0)

/* splitmix64: a small seeded PRNG for shuffles. */
static uint64_t rnd(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void shuffle(uint32_t *a, uint32_t n, uint64_t *state)
{
	for (uint32_t i = n; i > 1; i--) {
		uint32_t j = (uint32_t)(rnd(state) % i), t = a[i - 1];

		a[i - 1] = a[j];
		a[j] = t;
	}
}

/* ---- owner_of ---------------------------------------------------------- */

START_TEST(test_owner_formula)
{
	for (uint32_t n = 1; n <= MAXN; n++)
		for (uint32_t w = 1; w <= MAXW; w++)
			for (uint32_t i = 0; i < n; i++) {
				uint32_t o = shmrun_placement_owner_of(i, n, w);

				CHECK(o == i * w / n && o < w, "n=%u w=%u i=%u: owner %u", n, w, i,
				      o);
				/* deterministic: the same inputs, the same answer */
				CHECK(o == shmrun_placement_owner_of(i, n, w), "n=%u w=%u i=%u", n,
				      w, i);
			}
}
END_TEST

START_TEST(test_owner_clamping)
{
	/* n, w clamped to >= 1 */
	ck_assert_uint_eq(shmrun_placement_owner_of(0, 0, 5), 0);
	ck_assert_uint_eq(shmrun_placement_owner_of(3, 0, 5), 0);
	ck_assert_uint_eq(shmrun_placement_owner_of(0, 4, 0), 0);
	ck_assert_uint_eq(shmrun_placement_owner_of(3, 4, 0), 0);
	ck_assert_uint_eq(shmrun_placement_owner_of(7, 0, 0), 0);
	/* i >= n is the last instance */
	for (uint32_t n = 1; n <= MAXN; n++)
		for (uint32_t w = 1; w <= MAXW; w++) {
			uint32_t last = shmrun_placement_owner_of(n - 1, n, w);

			CHECK(shmrun_placement_owner_of(n, n, w) == last &&
				  shmrun_placement_owner_of(n + 17, n, w) == last &&
				  shmrun_placement_owner_of(UINT32_MAX, n, w) == last,
			      "n=%u w=%u: i >= n is not the last instance", n, w);
		}
	/* 64-bit products: i*w overflows 32 bits here */
	ck_assert_uint_eq(shmrun_placement_owner_of(3000000000u, 4000000000u, 4000000000u),
			  3000000000u);
	ck_assert_uint_eq(shmrun_placement_owner_of(UINT32_MAX - 1, UINT32_MAX, UINT32_MAX),
			  UINT32_MAX - 1);
	ck_assert_uint_eq(shmrun_placement_owner_of(UINT32_MAX - 1, UINT32_MAX, 2), 1);
	ck_assert_uint_eq(shmrun_placement_owner_of(UINT32_MAX / 2, UINT32_MAX, 2), 0);
}
END_TEST

/* Each worker's instances are one block [first, last], blocks in worker order. */
START_TEST(test_owner_contiguity)
{
	for (uint32_t n = 1; n <= MAXN; n++)
		for (uint32_t w = 1; w <= MAXW; w++) {
			uint32_t prev = 0;

			for (uint32_t i = 0; i < n; i++) {
				uint32_t o = shmrun_placement_owner_of(i, n, w);

				/* monotone: a worker's instances are never interleaved */
				CHECK(o >= prev, "n=%u w=%u i=%u: owner %u after %u", n, w, i, o,
				      prev);
				prev = o;
			}
			CHECK(shmrun_placement_owner_of(0, n, w) == 0, "n=%u w=%u", n, w);
			/* and the last instance is on the last worker that gets one */
			CHECK(prev == (uint32_t)((uint64_t)(n - 1) * w / n), "n=%u w=%u", n, w);
		}
}
END_TEST

START_TEST(test_owner_balance)
{
	for (uint32_t n = 1; n <= MAXN; n++)
		for (uint32_t w = 1; w <= MAXW; w++) {
			uint32_t count[MAXW] = {0}, total = 0;

			for (uint32_t i = 0; i < n; i++)
				count[shmrun_placement_owner_of(i, n, w)]++;
			for (uint32_t k = 0; k < w; k++) {
				CHECK(count[k] == n / w || count[k] == (n + w - 1) / w,
				      "n=%u w=%u: worker %u has %u instances", n, w, k, count[k]);
				/* with at least as many instances as workers, nobody idles */
				CHECK(n < w || count[k] >= 1, "n=%u w=%u: worker %u idle", n, w, k);
				total += count[k];
			}
			CHECK(total == n, "n=%u w=%u: %u instances placed", n, w, total);
		}
}
END_TEST

/* ---- assign -------------------------------------------------------------- */

START_TEST(test_assign_dense_ids)
{
	const uint32_t widths[] = {3, 1, 4, 1, 5};
	uint32_t out[14], again[14], t = 0;

	for (uint32_t w = 0; w <= 8; w++) {
		ck_assert_uint_eq(shmrun_placement_assign(widths, 5, w, out), 14);
		ck_assert_uint_eq(shmrun_placement_assign(widths, 5, w, again), 14);
		ck_assert_mem_eq(out, again, sizeof(out));
		t = 0;
		for (uint32_t s = 0; s < 5; s++)
			for (uint32_t i = 0; i < widths[s]; i++, t++)
				CHECK(out[t] == shmrun_placement_owner_of(i, widths[s], w),
				      "w=%u task %u", w, t);
	}
	ck_assert_uint_eq(shmrun_placement_assign(widths, 0, 4, out), 0);
}
END_TEST

/* A forward edge between equal-width stages: instance i of both on one worker. */
START_TEST(test_assign_forward_colocated)
{
	uint32_t widths[3], out[3 * MAXN + 7];

	for (uint32_t n = 1; n <= MAXN; n++)
		for (uint32_t w = 1; w <= MAXW; w++) {
			widths[0] = n; /* a */
			widths[1] = 7; /* an unrelated stage in between */
			widths[2] = n; /* b, input = a */
			CHECK(shmrun_placement_assign(widths, 3, w, out) == 2 * n + 7, "n=%u", n);
			for (uint32_t i = 0; i < n; i++)
				CHECK(out[i] == out[n + 7 + i],
				      "n=%u w=%u: a[%u] on %u, b[%u] on %u", n, w, i, out[i], i,
				      out[n + 7 + i]);
		}
}
END_TEST

START_TEST(test_assign_solo)
{
	uint32_t widths[4], out[4 * MAXN], tasks;

	for (uint32_t n = 1; n <= MAXN; n++) {
		widths[0] = n;
		widths[1] = 1;
		widths[2] = MAXN;
		widths[3] = (n * 7) % MAXN + 1;
		tasks = shmrun_placement_assign(widths, 4, 1, out);

		for (uint32_t t = 0; t < tasks; t++)
			CHECK(out[t] == 0, "n=%u: task %u on worker %u", n, t, out[t]);
		/* w = 0 is clamped to a solo run */
		tasks = shmrun_placement_assign(widths, 4, 0, out);
		for (uint32_t t = 0; t < tasks; t++)
			CHECK(out[t] == 0, "n=%u: task %u on worker %u", n, t, out[t]);
	}
}
END_TEST

/* ---- members ------------------------------------------------------------- */

START_TEST(test_members_sort_dedup)
{
	const uint32_t ids[] = {9, 3, 3, 7, 0, 9, 1};
	const uint32_t want[] = {0, 1, 3, 7, 9};
	struct shmrun_members m;

	ck_assert_int_eq(shmrun_members_init(&m, ids, 7, 7), 0);
	ck_assert_uint_eq(m.n, 5);
	ck_assert_mem_eq(m.ids, want, sizeof(want));
	ck_assert_uint_eq(m.self, 3);
	ck_assert_uint_eq(m.ids[m.self], 7);
	shmrun_members_free(&m);
	ck_assert_ptr_null(m.ids);
	ck_assert_uint_eq(m.n, 0);

	/* the launcher is no member */
	ck_assert_int_eq(shmrun_members_init(&m, ids, 7, UINT32_MAX), 0);
	ck_assert_uint_eq(m.self, UINT32_MAX);
	ck_assert_uint_eq(m.n, 5);
	shmrun_members_free(&m);

	/* errors leave @m zeroed */
	ck_assert_int_eq(shmrun_members_init(&m, ids, 0, 3), -EINVAL);
	ck_assert_ptr_null(m.ids);
	ck_assert_int_eq(shmrun_members_init(&m, ids, 7, 4), -EINVAL);
	ck_assert_ptr_null(m.ids);
	ck_assert_uint_eq(m.n, 0);
}
END_TEST

/*
 * The member set and the resulting map (task -> worker id) do not depend on
 * the order in which the workers were listed or started, nor on duplicates.
 */
START_TEST(test_members_order_independent)
{
	const uint32_t widths[] = {5, 5, 13, 1, 64};
	uint32_t tasks = 5 + 5 + 13 + 1 + 64;
	uint64_t seed = 42;

	for (uint32_t w = 1; w <= MAXW; w++) {
		uint32_t ids[2 * MAXW], n = 0, ref_map[88], map[88];
		struct shmrun_members ref, m;

		/* w distinct ids, some listed twice */
		for (uint32_t k = 0; k < w; k++) {
			ids[n++] = 1000 + 17 * k;
			if (k % 3 == 0)
				ids[n++] = 1000 + 17 * k;
		}
		shuffle(ids, n, &seed);
		ck_assert_int_eq(shmrun_members_init(&ref, ids, n, ids[0]), 0);
		ck_assert_uint_eq(ref.n, w);
		for (uint32_t k = 1; k < ref.n; k++)
			ck_assert_uint_lt(ref.ids[k - 1], ref.ids[k]);
		ck_assert_uint_eq(shmrun_placement_assign(widths, 5, ref.n, ref_map), tasks);
		for (uint32_t t = 0; t < tasks; t++)
			ref_map[t] = ref.ids[ref_map[t]];

		for (int round = 0; round < 8; round++) {
			uint32_t self;

			shuffle(ids, n, &seed);
			self = ids[rnd(&seed) % n];
			ck_assert_int_eq(shmrun_members_init(&m, ids, n, self), 0);
			ck_assert_uint_eq(m.n, ref.n);
			ck_assert_mem_eq(m.ids, ref.ids, ref.n * sizeof(*ref.ids));
			ck_assert_uint_eq(m.ids[m.self], self);
			shmrun_placement_assign(widths, 5, m.n, map);
			for (uint32_t t = 0; t < tasks; t++)
				CHECK(m.ids[map[t]] == ref_map[t], "w=%u round %d: task %u", w,
				      round, t);
			shmrun_members_free(&m);
		}
		shmrun_members_free(&ref);
	}
}
END_TEST

START_TEST(test_members_fingerprint_clause)
{
	const uint32_t solo[] = {7, 7};
	const uint32_t ids[] = {12, 3, 40};
	struct shmrun_members m;
	char buf[64], small[8];

	/* solo: empty, whatever the id */
	ck_assert_int_eq(shmrun_members_init(&m, solo, 2, 7), 0);
	memset(buf, 'x', sizeof(buf));
	ck_assert_int_eq(shmrun_members_fingerprint_clause(&m, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "");
	shmrun_members_free(&m);

	ck_assert_int_eq(shmrun_members_init(&m, ids, 3, 40), 0);
	ck_assert_int_eq(shmrun_members_fingerprint_clause(&m, buf, sizeof(buf)), 17);
	ck_assert_str_eq(buf, "members=3:3,12,40");
	/* like snprintf: truncated, NUL-terminated, returns the length it needs */
	ck_assert_int_eq(shmrun_members_fingerprint_clause(&m, small, sizeof(small)), 17);
	ck_assert_str_eq(small, "members");
	ck_assert_int_eq(shmrun_members_fingerprint_clause(&m, NULL, 0), 17);
	shmrun_members_free(&m);
}
END_TEST

/* ---- vnodes -------------------------------------------------------------- */

/* vnode_range partitions [0, V) in order; instance_of_vnode inverts it. */
static void check_vnodes(uint32_t n, uint32_t V)
{
	uint32_t prev_hi = 0;

	for (uint32_t i = 0; i < n; i++) {
		uint32_t lo, hi;

		shmrun_placement_vnode_range(i, n, V, &lo, &hi);
		CHECK(lo == prev_hi, "V=%u n=%u i=%u: lo %u after hi %u", V, n, i, lo, prev_hi);
		CHECK(lo <= hi && lo == (uint32_t)((uint64_t)i * V / n), "V=%u n=%u i=%u: [%u, %u)",
		      V, n, i, lo, hi);
		if (n <= V)
			/* balanced, never empty */
			CHECK(hi - lo == V / n || hi - lo == (V + n - 1) / n,
			      "V=%u n=%u i=%u: %u vnodes", V, n, i, hi - lo);
		else
			CHECK(hi - lo <= 1, "V=%u n=%u i=%u: %u vnodes", V, n, i, hi - lo);
		for (uint32_t v = lo; v < hi; v++)
			CHECK(shmrun_placement_instance_of_vnode(v, n, V) == i,
			      "V=%u n=%u: vnode %u -> %u, in range of %u", V, n, v,
			      shmrun_placement_instance_of_vnode(v, n, V), i);
		prev_hi = hi;
	}
	CHECK(prev_hi == V, "V=%u n=%u: ranges end at %u", V, n, prev_hi);
}

START_TEST(test_vnodes_small_all)
{
	/* every V <= 256 and every n <= V */
	for (uint32_t V = 1; V <= 256; V++)
		for (uint32_t n = 1; n <= V; n++)
			check_vnodes(n, V);
}
END_TEST

START_TEST(test_vnodes_more_instances_than_vnodes)
{
	for (uint32_t V = 1; V <= MAXN; V++)
		for (uint32_t n = V + 1; n <= 2 * MAXN; n++)
			check_vnodes(n, V);
}
END_TEST

START_TEST(test_vnodes_large)
{
	const uint32_t Vs[] = {1000, 1024, 4096, 65521, 65536, 100003};
	const uint32_t ns[] = {1, 2, 3, 7, 10, 63, 64, 255, 256, 1000};

	for (size_t a = 0; a < sizeof(Vs) / sizeof(Vs[0]); a++) {
		for (size_t b = 0; b < sizeof(ns) / sizeof(ns[0]); b++)
			check_vnodes(ns[b], Vs[a]);
		check_vnodes(Vs[a] - 1, Vs[a]);
		check_vnodes(Vs[a], Vs[a]);
	}
	/* 64-bit products at the top of the range */
	ck_assert_uint_eq(
	    shmrun_placement_instance_of_vnode(UINT32_MAX - 1, UINT32_MAX, UINT32_MAX),
	    UINT32_MAX - 1);
	ck_assert_uint_eq(shmrun_placement_instance_of_vnode(UINT32_MAX - 1, 2, UINT32_MAX), 1);
	ck_assert_uint_eq(shmrun_placement_instance_of_vnode(0, UINT32_MAX, UINT32_MAX), 0);
}
END_TEST

START_TEST(test_vnodes_clamping)
{
	uint32_t lo, hi, lo2, hi2;

	/* n = 0 is one instance owning everything */
	shmrun_placement_vnode_range(0, 0, 256, &lo, &hi);
	ck_assert_uint_eq(lo, 0);
	ck_assert_uint_eq(hi, 256);
	ck_assert_uint_eq(shmrun_placement_instance_of_vnode(200, 0, 256), 0);
	/* i >= n is the last instance */
	shmrun_placement_vnode_range(3, 4, 256, &lo, &hi);
	shmrun_placement_vnode_range(9, 4, 256, &lo2, &hi2);
	ck_assert_uint_eq(lo, lo2);
	ck_assert_uint_eq(hi, hi2);
	ck_assert_uint_eq(hi, 256);
	/* vnode >= V is the last vnode */
	ck_assert_uint_eq(shmrun_placement_instance_of_vnode(256, 4, 256), 3);
	ck_assert_uint_eq(shmrun_placement_instance_of_vnode(UINT32_MAX, 4, 256), 3);
	/* V = 0 is clamped to 1: the one vnode belongs to the last instance */
	shmrun_placement_vnode_range(0, 1, 0, &lo, &hi);
	ck_assert_uint_eq(lo, 0);
	ck_assert_uint_eq(hi, 1);
	shmrun_placement_vnode_range(4, 5, 0, &lo, &hi);
	ck_assert_uint_eq(lo, 0);
	ck_assert_uint_eq(hi, 1);
	ck_assert_uint_eq(shmrun_placement_instance_of_vnode(0, 5, 0), 4);
}
END_TEST

/* The vnodes of a worker (all its instances' ranges) are one contiguous span. */
START_TEST(test_vnodes_worker_contiguous)
{
	const uint32_t V = 256;

	for (uint32_t n = 1; n <= MAXN; n++)
		for (uint32_t w = 1; w <= MAXW; w++) {
			uint32_t expect_lo = 0;

			for (uint32_t k = 0; k < w; k++) {
				uint32_t lo = UINT32_MAX, hi = 0, total = 0;

				for (uint32_t i = 0; i < n; i++) {
					uint32_t a, b;

					if (shmrun_placement_owner_of(i, n, w) != k)
						continue;
					shmrun_placement_vnode_range(i, n, V, &a, &b);
					lo = a < lo ? a : lo;
					hi = b > hi ? b : hi;
					total += b - a;
				}
				if (lo == UINT32_MAX)
					continue; /* a worker without instances of this stage */
				CHECK(lo == expect_lo && hi - lo == total, /* no hole */
				      "n=%u w=%u: worker %u owns [%u, %u) with %u vnodes", n, w, k,
				      lo, hi, total);
				expect_lo = hi;
			}
			CHECK(expect_lo == V, "n=%u w=%u: vnodes end at %u", n, w, expect_lo);
		}
}
END_TEST

static Suite *placement_suite(void)
{
	Suite *s = suite_create("placement");
	TCase *tc;

	tc = tcase_create("owner_of");
	tcase_add_test(tc, test_owner_formula);
	tcase_add_test(tc, test_owner_clamping);
	suite_add_tcase(s, tc);

	tc = tcase_create("contiguity");
	tcase_add_test(tc, test_owner_contiguity);
	suite_add_tcase(s, tc);

	tc = tcase_create("balance");
	tcase_add_test(tc, test_owner_balance);
	suite_add_tcase(s, tc);

	tc = tcase_create("assign");
	tcase_add_test(tc, test_assign_dense_ids);
	tcase_add_test(tc, test_assign_forward_colocated);
	tcase_add_test(tc, test_assign_solo);
	suite_add_tcase(s, tc);

	tc = tcase_create("members");
	tcase_add_test(tc, test_members_sort_dedup);
	tcase_add_test(tc, test_members_order_independent);
	tcase_add_test(tc, test_members_fingerprint_clause);
	suite_add_tcase(s, tc);

	tc = tcase_create("vnodes");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_vnodes_small_all);
	tcase_add_test(tc, test_vnodes_more_instances_than_vnodes);
	tcase_add_test(tc, test_vnodes_large);
	tcase_add_test(tc, test_vnodes_clamping);
	tcase_add_test(tc, test_vnodes_worker_contiguous);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(placement_suite());
	int failed;

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
