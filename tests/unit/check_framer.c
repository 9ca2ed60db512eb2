/*
 * tests/unit/check_framer.c: a byte stream cut into records
 * (runtime/ops/framer.c), as stdin_source and socket_source use it.
 *
 * TCases:
 *  - lines: lines fed one byte at a time and in one piece give the same
 *    records; an empty line is a record; the final line without '\n' comes
 *    from framer_rest(), and nothing when the stream ends with '\n'.
 *  - length: frames (one of length 0) fed one byte at a time; a frame cut
 *    short at the end is -EPROTO with the bytes left.
 *  - limits: a line of exactly max bytes passes and one of max + 1 is
 *    -EMSGSIZE, also before its '\n' arrives (the buffer never holds more
 *    than max + 4 bytes); a length prefix above max is -EMSGSIZE at once.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ops/framer.h"

/* Feed @n bytes of @p into @f @step at a time, taking records into @out
 * ("rec|rec|..."), asking for records after every piece (also the last).
 * Return: the last framer_next() result that was not 1. */
static int feed(struct framer *f, const char *p, size_t n, size_t step, char *out)
{
	size_t off = 0;

	out[0] = 0;
	for (;;) {
		const void *v;
		uint32_t len;
		unsigned char *at;
		long room;
		size_t k;
		int r = framer_next(f, &v, &len);

		if (r == 1) {
			strncat(out, v, len);
			strcat(out, "|");
			continue;
		}
		if (r < 0 || off == n)
			return r;
		room = framer_room(f, &at);
		ck_assert_int_gt(room, 0);
		k = n - off < step ? n - off : step;
		k = k < (size_t)room ? k : (size_t)room;
		memcpy(at, p + off, k);
		framer_fill(f, k);
		off += k;
	}
}

START_TEST(test_lines)
{
	static const char in[] = "one\n\nthree four\nlast";
	char out[256];
	const void *v;
	uint32_t len;

	for (size_t step = 1; step <= sizeof(in); step++) {
		struct framer f;

		ck_assert_int_eq(framer_init(&f, FRAMER_LINE, 100, 16), 0);
		ck_assert_int_eq(feed(&f, in, strlen(in), step, out), 0);
		ck_assert_str_eq(out, "one||three four|");
		ck_assert_int_eq(framer_rest(&f, &v, &len), 1);
		ck_assert_uint_eq(len, 4);
		ck_assert_int_eq(memcmp(v, "last", 4), 0);
		ck_assert_int_eq(framer_rest(&f, &v, &len), 0);
		framer_free(&f);
	}
	{
		struct framer f;

		ck_assert_int_eq(framer_init(&f, FRAMER_LINE, 100, 16), 0);
		ck_assert_int_eq(feed(&f, "a\nb\n", 4, 4, out), 0);
		ck_assert_str_eq(out, "a|b|");
		ck_assert_int_eq(framer_rest(&f, &v, &len), 0);
		framer_free(&f);
	}
}
END_TEST

START_TEST(test_length)
{
	static const char in[] = "\0\0\0\3abc\0\0\0\0\0\0\0\2xy";
	const size_t n = sizeof(in) - 1;
	char out[256];
	const void *v;
	uint32_t len;

	for (size_t step = 1; step <= n; step++) {
		struct framer f;

		ck_assert_int_eq(framer_init(&f, FRAMER_LENGTH, 100, 16), 0);
		ck_assert_int_eq(feed(&f, in, n, step, out), 0);
		ck_assert_str_eq(out, "abc||xy|");
		ck_assert_int_eq(framer_rest(&f, &v, &len), 0);
		framer_free(&f);
	}
	{
		struct framer f;

		ck_assert_int_eq(framer_init(&f, FRAMER_LENGTH, 100, 16), 0);
		ck_assert_int_eq(feed(&f, "\0\0\0\5ab", 6, 6, out), 0);
		ck_assert_str_eq(out, "");
		ck_assert_int_eq(framer_rest(&f, &v, &len), -EPROTO);
		ck_assert_uint_eq(len, 6);
		framer_free(&f);
	}
}
END_TEST

START_TEST(test_limits)
{
	char line[40], out[256];
	struct framer f;

	memset(line, 'x', sizeof(line));
	/* exactly max (32) bytes and its '\n': a record */
	line[32] = '\n';
	ck_assert_int_eq(framer_init(&f, FRAMER_LINE, 32, 8), 0);
	ck_assert_int_eq(feed(&f, line, 33, 5, out), 0);
	ck_assert_uint_eq(strlen(out), 33);
	ck_assert_uint_le(f.cap, 36);
	framer_free(&f);
	/* max + 1 bytes: refused, before or with its '\n' */
	line[32] = 'x';
	line[33] = '\n';
	ck_assert_int_eq(framer_init(&f, FRAMER_LINE, 32, 8), 0);
	ck_assert_int_eq(feed(&f, line, 33, 5, out), -EMSGSIZE);
	ck_assert_uint_le(f.cap, 36);
	framer_free(&f);
	ck_assert_int_eq(framer_init(&f, FRAMER_LINE, 32, 8), 0);
	ck_assert_int_eq(feed(&f, line, 34, 34, out), -EMSGSIZE);
	framer_free(&f);
	/* a length prefix above max: refused at once */
	ck_assert_int_eq(framer_init(&f, FRAMER_LENGTH, 32, 8), 0);
	ck_assert_int_eq(feed(&f, "\0\0\0\41", 4, 4, out), -EMSGSIZE);
	framer_free(&f);
	ck_assert_int_eq(framer_init(&f, FRAMER_LENGTH, 32, 8), 0);
	ck_assert_int_eq(feed(&f, "\0\0\0\40", 4, 4, out), 0);
	framer_free(&f);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("framer");
	TCase *tc = tcase_create("framer");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_lines);
	tcase_add_test(tc, test_length);
	tcase_add_test(tc, test_limits);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
