/*
 * tests/unit/check_top.c: the pure helpers `shmrun top` formats its numbers
 * with (runtime/top.h), against hand-computed strings and values.
 *
 *   fmt    top_fmt_bytes(), top_fmt_count(), top_fmt_duration(): unit steps,
 *          rounding at the unit boundaries, zero, NaN and negatives, a short
 *          buffer
 *   bar    top_fmt_bar(): empty, full, rounding, "some" never looks empty
 *          and "almost full" never looks full, clamping, NaN, widths
 *   math   top_rate(), top_ring_fill(), top_share(): no interval, counter
 *          resets, positions seen out of order, clamping
 *
 * tests/integration/top.sh runs the command against real jobs.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "top.h"

static char buf[64];

START_TEST(fmt_bytes)
{
	ck_assert_str_eq(top_fmt_bytes(buf, sizeof(buf), 0), "0 B");
	ck_assert_str_eq(top_fmt_bytes(buf, sizeof(buf), 999), "999 B");
	ck_assert_str_eq(top_fmt_bytes(buf, sizeof(buf), 1023), "1023 B");
	ck_assert_str_eq(top_fmt_bytes(buf, sizeof(buf), 1024), "1.00 KiB");
	ck_assert_str_eq(top_fmt_bytes(buf, sizeof(buf), 1536), "1.50 KiB");
	ck_assert_str_eq(top_fmt_bytes(buf, sizeof(buf), 12.3 * 1024 * 1024), "12.3 MiB");
	ck_assert_str_eq(top_fmt_bytes(buf, sizeof(buf), 512.0 * 1024 * 1024 * 1024), "512 GiB");
	ck_assert_str_eq(top_fmt_bytes(buf, sizeof(buf), 1.5 * 1024 * 1024 * 1024 * 1024),
			 "1.50 TiB");
	/* a byte rate is not a whole number: three significant digits */
	ck_assert_str_eq(top_fmt_bytes(buf, sizeof(buf), 2.5), "2.50 B");
	ck_assert_str_eq(top_fmt_bytes(buf, sizeof(buf), -5), "0 B");
	ck_assert_str_eq(top_fmt_bytes(buf, sizeof(buf), NAN), "-");
	/* a short buffer is cut, still terminated */
	ck_assert_str_eq(top_fmt_bytes(buf, 4, 1536), "1.5");
}
END_TEST

START_TEST(fmt_count)
{
	ck_assert_str_eq(top_fmt_count(buf, sizeof(buf), 0), "0");
	ck_assert_str_eq(top_fmt_count(buf, sizeof(buf), 999), "999");
	ck_assert_str_eq(top_fmt_count(buf, sizeof(buf), 1000), "1.00k");
	ck_assert_str_eq(top_fmt_count(buf, sizeof(buf), 12345), "12.3k");
	ck_assert_str_eq(top_fmt_count(buf, sizeof(buf), 999499), "999k");
	/* 999.5k rounds to 1000k: shown as 1.00M instead */
	ck_assert_str_eq(top_fmt_count(buf, sizeof(buf), 999500), "1.00M");
	ck_assert_str_eq(top_fmt_count(buf, sizeof(buf), 512e9), "512G");
	ck_assert_str_eq(top_fmt_count(buf, sizeof(buf), 4.2e12), "4.20T");
	/* rates below 1000 that are not whole */
	ck_assert_str_eq(top_fmt_count(buf, sizeof(buf), 0.5), "0.50");
	ck_assert_str_eq(top_fmt_count(buf, sizeof(buf), 42.25), "42.2");
	ck_assert_str_eq(top_fmt_count(buf, sizeof(buf), 999.7), "1.00k");
	ck_assert_str_eq(top_fmt_count(buf, sizeof(buf), NAN), "-");
	ck_assert_str_eq(top_fmt_count(buf, sizeof(buf), -3), "0");
}
END_TEST

START_TEST(fmt_duration)
{
	ck_assert_str_eq(top_fmt_duration(buf, sizeof(buf), 0), "0s");
	ck_assert_str_eq(top_fmt_duration(buf, sizeof(buf), 999), "999ns");
	ck_assert_str_eq(top_fmt_duration(buf, sizeof(buf), 850000), "850us");
	ck_assert_str_eq(top_fmt_duration(buf, sizeof(buf), 12000000), "12ms");
	/* 999.6 ms would print as "1000ms": it is 1.0s */
	ck_assert_str_eq(top_fmt_duration(buf, sizeof(buf), 999600000), "1.0s");
	ck_assert_str_eq(top_fmt_duration(buf, sizeof(buf), 4300000000), "4.3s");
	ck_assert_str_eq(top_fmt_duration(buf, sizeof(buf), 245000000000), "4m05s");
	ck_assert_str_eq(
	    top_fmt_duration(buf, sizeof(buf), (2 * 3600 + 3 * 60 + 59) * 1000000000ll), "2h03m");
	ck_assert_str_eq(
	    top_fmt_duration(buf, sizeof(buf), (3 * 86400 + 4 * 3600 + 5) * 1000000000ll), "3d04h");
	ck_assert_str_eq(top_fmt_duration(buf, sizeof(buf), -1), "-");
}
END_TEST

START_TEST(bar_cells)
{
	ck_assert_str_eq(top_fmt_bar(buf, sizeof(buf), 0, 8), "[        ]");
	ck_assert_str_eq(top_fmt_bar(buf, sizeof(buf), 1, 8), "[########]");
	ck_assert_str_eq(top_fmt_bar(buf, sizeof(buf), 0.375, 8), "[###     ]");
	ck_assert_str_eq(top_fmt_bar(buf, sizeof(buf), 0.5, 10), "[#####     ]");
	/* rounds to the nearest cell: 0.44 x 10 = 4.4 -> 4, 0.46 x 10 -> 5 */
	ck_assert_str_eq(top_fmt_bar(buf, sizeof(buf), 0.44, 10), "[####      ]");
	ck_assert_str_eq(top_fmt_bar(buf, sizeof(buf), 0.46, 10), "[#####     ]");
}
END_TEST

START_TEST(bar_edges)
{
	/* a little is never drawn as nothing, almost all never as all */
	ck_assert_str_eq(top_fmt_bar(buf, sizeof(buf), 0.001, 10), "[#         ]");
	ck_assert_str_eq(top_fmt_bar(buf, sizeof(buf), 0.999, 10), "[######### ]");
	/* clamped */
	ck_assert_str_eq(top_fmt_bar(buf, sizeof(buf), -0.5, 4), "[    ]");
	ck_assert_str_eq(top_fmt_bar(buf, sizeof(buf), 7, 4), "[####]");
	/* no data */
	ck_assert_str_eq(top_fmt_bar(buf, sizeof(buf), NAN, 4), "[----]");
	/* width 1 and below */
	ck_assert_str_eq(top_fmt_bar(buf, sizeof(buf), 0.5, 1), "[#]");
	ck_assert_str_eq(top_fmt_bar(buf, sizeof(buf), 0, 0), "[ ]");
	/* a short buffer */
	ck_assert_str_eq(top_fmt_bar(buf, 4, 1, 10), "[##");
}
END_TEST

START_TEST(math_rate)
{
	ck_assert(isnan(top_rate(0, 100, 0)));
	ck_assert_double_eq_tol(top_rate(100, 1100, 500000000), 2000, 1e-9);
	ck_assert_double_eq_tol(top_rate(7, 7, 1000000000), 0, 1e-12);
	/* a reset between the samples is no negative rate */
	ck_assert_double_eq_tol(top_rate(1000, 10, 1000000000), 0, 1e-12);
	ck_assert_double_eq_tol(top_rate(0, UINT64_C(1) << 40, 1000000000),
				(double)(UINT64_C(1) << 40), 1);
}
END_TEST

START_TEST(math_fill)
{
	ck_assert(isnan(top_ring_fill(10, 0, 0)));
	ck_assert_double_eq_tol(top_ring_fill(0, 0, 4096), 0, 1e-12);
	ck_assert_double_eq_tol(top_ring_fill(5000, 3976, 4096), 0.25, 1e-12);
	ck_assert_double_eq_tol(top_ring_fill(8192, 4096, 4096), 1, 1e-12);
	/* head seen ahead of tail (loaded later), or tail a lap ahead of a stale head */
	ck_assert_double_eq_tol(top_ring_fill(100, 200, 4096), 0, 1e-12);
	ck_assert_double_eq_tol(top_ring_fill(100000, 0, 4096), 1, 1e-12);
}
END_TEST

START_TEST(math_share)
{
	ck_assert(isnan(top_share(0, 0)));
	ck_assert_double_eq_tol(top_share(1, 4), 0.25, 1e-12);
	ck_assert_double_eq_tol(top_share(0, 4), 0, 1e-12);
	ck_assert_double_eq_tol(top_share(9, 4), 1, 1e-12);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("top");
	TCase *fmt = tcase_create("fmt"), *bar = tcase_create("bar"), *math = tcase_create("math");
	SRunner *sr;
	int failed;

	tcase_add_test(fmt, fmt_bytes);
	tcase_add_test(fmt, fmt_count);
	tcase_add_test(fmt, fmt_duration);
	suite_add_tcase(s, fmt);
	tcase_add_test(bar, bar_cells);
	tcase_add_test(bar, bar_edges);
	suite_add_tcase(s, bar);
	tcase_add_test(math, math_rate);
	tcase_add_test(math, math_fill);
	tcase_add_test(math, math_share);
	suite_add_tcase(s, math);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
