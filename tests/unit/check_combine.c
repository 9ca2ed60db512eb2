/*
 * tests/unit/check_combine.c: the sending side of a combiner
 * (runtime/combine.h), with a counting combiner like count's.
 *
 * Covers: every record folded into its key's partial and each key flushed
 * once with its XXH3-64 hash and the largest event time; keys that share
 * their first or last 8 bytes, prefixes of one another, the empty key, and
 * lengths around the word boundaries (3, 4, 7, 8, 9, 15, 16, 17, 64); a full
 * table and the fold limit reported as -ENOSPC with nothing lost; a flush
 * that stops at the first error still empties the table; init's refusals;
 * a key ending at a page boundary read without overrunning it.
 */
#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "combine.h"

static void add_count(void *partial, const struct shmrun_record *rec)
{
	(void)rec;
	++*(uint64_t *)partial;
}

static int merge_unused(struct shmrun_task *t, void *s, const struct shmrun_record *r)
{
	(void)t;
	(void)s;
	(void)r;
	return 0;
}

static const struct shmrun_combiner counting = {
	.partial_bytes = 8, .add = add_count, .merge = merge_unused};

/* What a flush handed out: up to 20000 (key, count, time, hash). */
struct out {
	uint32_t n;
	char keys[20000][72];
	uint32_t lens[20000];
	uint64_t counts[20000];
	int64_t times[20000];
	uint64_t hashes[20000];
	int fail_at; /* return -EIO at this call (1-based), 0: never */
	uint32_t calls;
};

static int put(void *arg, const struct shmrun_record *p, uint64_t hash)
{
	struct out *o = arg;

	o->calls++;
	if (o->fail_at && o->calls == (uint32_t)o->fail_at)
		return -EIO;
	ck_assert_uint_lt(o->n, 20000);
	ck_assert_uint_le(p->key_len, 64);
	ck_assert_uint_eq(p->value_len, 8);
	memcpy(o->keys[o->n], p->key, p->key_len);
	o->lens[o->n] = p->key_len;
	memcpy(&o->counts[o->n], p->value, 8);
	o->times[o->n] = p->event_time_ns;
	o->hashes[o->n] = hash;
	ck_assert_uint_eq(hash, XXH3_64bits(p->key, p->key_len));
	o->n++;
	return 0;
}

static int find(const struct out *o, const void *key, uint32_t len)
{
	for (uint32_t i = 0; i < o->n; i++)
		if (o->lens[i] == len && memcmp(o->keys[i], key, len) == 0)
			return (int)i;
	return -1;
}

static void add(struct combiner *cb, const void *key, uint32_t len, int64_t t)
{
	struct shmrun_record r = {.key = key, .key_len = len, .event_time_ns = t};

	ck_assert_int_eq(comb_add(cb, &r), 0);
}

START_TEST(folds_and_flushes_each_key_once)
{
	static struct out o;
	struct combiner cb;
	/* keys that differ only inside, or share first/last 8 bytes, or are prefixes */
	const char *keys[] = {"",
			      "a",
			      "ab",
			      "abc",
			      "abcd",
			      "abcdefg",
			      "abcdefgh",
			      "abcdefghi",
			      "abcdefgXhi",
			      "abcdefghijklmno",
			      "abcdefghijklmnop",
			      "abcdefghijklmnopq",
			      "abcdefghXjklmnopq",
			      "abcdefghYjklmnopq",
			      "0123456789012345678901234567890123456789012345678901234567890123",
			      "0123456789012345678901234567890123X56789012345678901234567890123",
			      "aXc",
			      "abXd"};
	uint32_t nk = sizeof(keys) / sizeof(keys[0]);

	memset(&o, 0, sizeof(o));
	ck_assert_int_eq(comb_init(&cb, &counting), 0);
	ck_assert(!comb_pending(&cb));
	for (uint32_t rep = 0; rep < 5; rep++)
		for (uint32_t k = 0; k < nk; k++)
			for (uint32_t j = 0; j <= k; j++)
				add(&cb, keys[k], (uint32_t)strlen(keys[k]), (int64_t)(rep * 100 + j));
	ck_assert(comb_pending(&cb));
	ck_assert_int_eq(comb_flush(&cb, put, &o), 0);
	ck_assert(!comb_pending(&cb));
	ck_assert_uint_eq(o.n, nk);
	for (uint32_t k = 0; k < nk; k++) {
		int i = find(&o, keys[k], (uint32_t)strlen(keys[k]));

		ck_assert_int_ge(i, 0);
		ck_assert_uint_eq(o.counts[i], 5 * (k + 1));
		ck_assert_int_eq(o.times[i], 400 + k); /* the largest folded */
	}
	/* in insertion order */
	for (uint32_t k = 0; k < nk; k++)
		ck_assert_uint_eq(o.lens[k], strlen(keys[k]));
	/* empty after the flush: the next round starts at zero */
	memset(&o, 0, sizeof(o));
	add(&cb, "abc", 3, 0);
	ck_assert_int_eq(comb_flush(&cb, put, &o), 0);
	ck_assert_uint_eq(o.n, 1);
	ck_assert_uint_eq(o.counts[0], 1);
	ck_assert_int_eq(comb_flush(&cb, put, &o), 0); /* nothing: no call */
	ck_assert_uint_eq(o.calls, 1);
	comb_free(&cb);
	comb_free(&cb); /* twice is safe */
}
END_TEST

START_TEST(full_table_and_fold_limit)
{
	static struct out o;
	struct combiner cb;
	char key[32];
	uint32_t k;
	struct shmrun_record r = {.key = key};

	memset(&o, 0, sizeof(o));
	ck_assert_int_eq(comb_init(&cb, &counting), 0);
	for (k = 0; k < COMB_MAX_ENTRIES; k++) {
		r.key_len = (uint32_t)snprintf(key, sizeof(key), "key%u", k);
		ck_assert_int_eq(comb_add(&cb, &r), 0);
	}
	r.key_len = (uint32_t)snprintf(key, sizeof(key), "key%u", k);
	ck_assert_int_eq(comb_add(&cb, &r), -ENOSPC); /* a new key: full */
	r.key_len = (uint32_t)snprintf(key, sizeof(key), "key%u", 7u);
	ck_assert_int_eq(comb_add(&cb, &r), 0); /* a known one still folds */
	ck_assert_int_eq(comb_flush(&cb, put, &o), 0);
	ck_assert_uint_eq(o.n, COMB_MAX_ENTRIES);
	ck_assert_uint_eq(o.counts[7], 2);
	ck_assert_uint_eq(o.counts[8], 1);
	/* the fold limit: one key, COMB_MAX_FOLDS records, then -ENOSPC */
	memset(&o, 0, sizeof(o));
	for (k = 0; k < COMB_MAX_FOLDS; k++)
		add(&cb, "x", 1, 0);
	r.key = "x";
	r.key_len = 1;
	ck_assert_int_eq(comb_add(&cb, &r), -ENOSPC);
	ck_assert_int_eq(comb_flush(&cb, put, &o), 0);
	ck_assert_uint_eq(o.n, 1);
	ck_assert_uint_eq(o.counts[0], COMB_MAX_FOLDS);
	ck_assert_int_eq(comb_add(&cb, &r), 0);
	comb_free(&cb);
}
END_TEST

START_TEST(flush_error_empties_table)
{
	static struct out o;
	struct combiner cb;

	memset(&o, 0, sizeof(o));
	o.fail_at = 2;
	ck_assert_int_eq(comb_init(&cb, &counting), 0);
	add(&cb, "a", 1, 0);
	add(&cb, "b", 1, 0);
	add(&cb, "c", 1, 0);
	ck_assert_int_eq(comb_flush(&cb, put, &o), -EIO);
	ck_assert_uint_eq(o.calls, 2); /* stopped at the error */
	ck_assert(!comb_pending(&cb));
	add(&cb, "b", 1, 0); /* no stale slot: b is new again */
	memset(&o, 0, sizeof(o));
	ck_assert_int_eq(comb_flush(&cb, put, &o), 0);
	ck_assert_uint_eq(o.n, 1);
	ck_assert_uint_eq(o.counts[0], 1);
	comb_free(&cb);
}
END_TEST

START_TEST(init_refusals)
{
	struct combiner cb;
	struct shmrun_combiner bad = counting;

	ck_assert_int_eq(comb_init(&cb, NULL), -EINVAL);
	bad.partial_bytes = 0;
	ck_assert_int_eq(comb_init(&cb, &bad), -EINVAL);
	bad.partial_bytes = COMB_MAX_PARTIAL + 1;
	ck_assert_int_eq(comb_init(&cb, &bad), -EINVAL);
	bad = counting;
	bad.add = NULL;
	ck_assert_int_eq(comb_init(&cb, &bad), -EINVAL);
	bad = counting;
	bad.merge = NULL;
	ck_assert_int_eq(comb_init(&cb, &bad), -EINVAL);
	bad = counting;
	bad.partial_bytes = COMB_MAX_PARTIAL;
	ck_assert_int_eq(comb_init(&cb, &bad), 0);
	comb_free(&cb);
}
END_TEST

/* Keys of every length up to 17 ending on the last byte before an unmapped page. */
START_TEST(no_read_past_the_key)
{
	static struct out o;
	long pg = sysconf(_SC_PAGESIZE);
	unsigned char *m = mmap(NULL, (size_t)pg * 2, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct combiner cb;

	ck_assert_ptr_ne(m, MAP_FAILED);
	ck_assert_int_eq(mprotect(m + pg, (size_t)pg, PROT_NONE), 0);
	memset(m, 'q', (size_t)pg);
	memset(&o, 0, sizeof(o));
	ck_assert_int_eq(comb_init(&cb, &counting), 0);
	for (uint32_t len = 0; len <= 17; len++)
		add(&cb, m + pg - len, len, 0);
	ck_assert_int_eq(comb_flush(&cb, put, &o), 0);
	ck_assert_uint_eq(o.n, 18); /* "", "q", "qq", ... all distinct */
	comb_free(&cb);
	munmap(m, (size_t)pg * 2);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("combine");
	TCase *tc = tcase_create("combine");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, folds_and_flushes_each_key_once);
	tcase_add_test(tc, full_table_and_fold_limit);
	tcase_add_test(tc, flush_error_empties_table);
	tcase_add_test(tc, init_refusals);
	tcase_add_test(tc, no_read_past_the_key);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
