/*
 * tests/unit/check_state.c: runtime/state.c, key-bound state, through state.h.
 *
 * One TCase per behaviour:
 *
 *   empty       a new store: no keys, no bytes; lookups, per-vnode counts and
 *               both foreach walks see nothing; a vnode out of range is refused
 *   roundtrip   insert then look up: the value starts zeroed, keeps the bytes
 *               written into it, stays at one address, is 8-byte aligned;
 *               keys that share a hash or a prefix stay apart; a key of
 *               length 0 is a key; the value size is fixed by the first insert
 *   counts      many keys over many vnodes (every table grows several times):
 *               per-vnode counts, keys, key_bytes, every value found again,
 *               every address stable across growth
 *   foreach     vnode by vnode, each entry exactly once with its own key and
 *               value; the first non-zero return stops the walk and is returned;
 *               foreach_in walks one vnode only
 *   one vnode   a range of one vnode holds everything
 *   bytes       the accounting: entries by their 8-aligned size, slot arrays
 *               when a table grows, a key too large for a chunk by itself
 *   layout      keys compared as words (state.h): every length 0..40, prefixes,
 *               keys differing only in the first or last byte or in a byte a
 *               zero padding would hide, all under one hash so that only the
 *               compare tells them apart; mixed lengths over growth with
 *               stable addresses and zero-filled values (reused memory too);
 *               keys ending at an unmapped page or starting after one (no
 *               over-read); the empty key's bytes; a 0-byte value size stays
 *               fixed (regression)
 *   delete      shmrun_kv_delete(): a deleted key is gone, every other key
 *               keeps its value and address (backward shifting over long probe
 *               runs in one small table, random order); -ENOENT twice; counts
 *               and bytes go down; a re-inserted key starts zeroed; a long
 *               run that creates and deletes keys (small, class-sized and
 *               large ones) stays flat in reserved memory and bytes
 *   arena       the same round trip with the worker's own allocator
 *   nomem       (not under sanitizers) -ENOMEM under an address-space limit,
 *               and the store stays usable
 *
 * Keys are hashed as the worker hashes them (XXH3-64) and put in the vnode the
 * placement gives that hash: state.c rehashes a key with XXH3-64 when its
 * table grows.
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#include <xxhash.h>

#include "common/address_space.h"
#include "shmrun/placement.h"
#include "state.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif

/* Check records a mark per passing ck_assert (a write to the parent in fork
 * mode); the loops over many keys call into Check only on failure. */
#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond))                                                                       \
			ck_abort_msg(__VA_ARGS__);                                                 \
	} while (0)

/* Look up (or with @create, insert) @key as the worker does. */
static void *get(struct shmrun_kv *kv, const void *key, uint32_t len, uint32_t value_bytes,
		 bool create, int *err)
{
	uint64_t h = XXH3_64bits(key, len);

	return shmrun_kv_get(kv, shmrun_placement_vnode_of_hash(h, kv->vnodes), h, key, len,
			     value_bytes, create, err);
}

static uint32_t vnode_of(const struct shmrun_kv *kv, const void *key, uint32_t len)
{
	return shmrun_placement_vnode_of_hash(XXH3_64bits(key, len), kv->vnodes);
}

static int count_entry(void *arg, const void *key, uint32_t key_len, void *value)
{
	(*(uint64_t *)arg)++;
	return 0;
}

/* ---- empty ---- */

START_TEST(test_empty)
{
	struct shmrun_kv kv;
	uint64_t n = 0;
	int err = 1;

	ck_assert_int_eq(shmrun_kv_init(&kv, 16), 0);
	ck_assert_uint_eq(kv.vnodes, 16);
	ck_assert_uint_eq(kv.keys, 0);
	ck_assert_uint_eq(kv.bytes, 0);
	ck_assert_uint_eq(kv.key_bytes, 0);
	ck_assert_uint_eq(kv.value_bytes, 0);
	for (uint32_t v = 0; v < 16; v++)
		ck_assert_uint_eq(shmrun_kv_vnode_keys(&kv, v), 0);
	ck_assert_uint_eq(shmrun_kv_vnode_keys(&kv, 16), 0);
	ck_assert_uint_eq(shmrun_kv_vnode_keys(&kv, UINT32_MAX), 0);
	ck_assert_int_eq(shmrun_kv_foreach(&kv, count_entry, &n), 0);
	ck_assert_int_eq(shmrun_kv_foreach_in(&kv, 3, count_entry, &n), 0);
	ck_assert_int_eq(shmrun_kv_foreach_in(&kv, 16, count_entry, &n), 0);
	ck_assert_uint_eq(n, 0);

	/* No value size yet: a lookup that names one does not match it. */
	ck_assert_ptr_null(get(&kv, "a", 1, 8, false, &err));
	ck_assert_int_eq(err, -EINVAL);
	/* A lookup of size 0 finds nothing and creates nothing. */
	ck_assert_ptr_null(get(&kv, "a", 1, 0, false, &err));
	ck_assert_int_eq(err, 0);
	ck_assert_uint_eq(kv.keys, 0);
	ck_assert_uint_eq(kv.bytes, 0);

	/* A vnode out of range is refused, with or without create. */
	ck_assert_ptr_null(shmrun_kv_get(&kv, 16, 1, "a", 1, 8, true, &err));
	ck_assert_int_eq(err, -EINVAL);
	ck_assert_ptr_null(shmrun_kv_get(&kv, UINT32_MAX, 1, "a", 1, 8, false, &err));
	ck_assert_int_eq(err, -EINVAL);
	ck_assert_uint_eq(kv.keys, 0);
	ck_assert_uint_eq(kv.bytes, 0);

	shmrun_kv_free(&kv);
	ck_assert_ptr_null(kv.tables);
	ck_assert_uint_eq(kv.keys, 0);
	shmrun_kv_free(&kv); /* a freed store frees again as nothing */
}
END_TEST

/* ---- roundtrip ---- */

START_TEST(test_roundtrip)
{
	struct shmrun_kv kv;
	uint64_t *a, *b, *again, *empty;
	unsigned char zero[8] = {0};
	int err = 1;

	ck_assert_int_eq(shmrun_kv_init(&kv, 256), 0);
	a = get(&kv, "apple", 5, 8, true, &err);
	ck_assert_ptr_nonnull(a);
	ck_assert_int_eq(err, 0);
	ck_assert_uint_eq((uintptr_t)a % 8, 0);
	ck_assert_mem_eq(a, zero, 8); /* created zeroed */
	ck_assert_uint_eq(kv.value_bytes, 8);
	*a = 0x1122334455667788ull;

	/* Found again, same address, same bytes; a lookup creates nothing. */
	again = get(&kv, "apple", 5, 8, false, &err);
	ck_assert_ptr_eq(again, a);
	ck_assert_int_eq(err, 0);
	ck_assert_uint_eq(*again, 0x1122334455667788ull);
	ck_assert_ptr_eq(get(&kv, "apple", 5, 8, true, &err), a);
	ck_assert_uint_eq(kv.keys, 1);
	ck_assert_uint_eq(kv.key_bytes, 5);
	ck_assert_uint_eq(shmrun_kv_vnode_keys(&kv, vnode_of(&kv, "apple", 5)), 1);

	/* A prefix, an extension and a different key are other keys. */
	ck_assert_ptr_null(get(&kv, "appl", 4, 8, false, &err));
	ck_assert_int_eq(err, 0);
	ck_assert_ptr_null(get(&kv, "apples", 6, 8, false, &err));
	b = get(&kv, "apples", 6, 8, true, &err);
	ck_assert_ptr_nonnull(b);
	ck_assert_ptr_ne(b, a);
	ck_assert_uint_eq(*b, 0);
	*b = 42;
	ck_assert_uint_eq(*a, 0x1122334455667788ull);
	ck_assert_uint_eq(kv.keys, 2);
	ck_assert_uint_eq(kv.key_bytes, 11);

	/* A key of length 0 is a key like any other. */
	empty = get(&kv, "", 0, 8, true, &err);
	ck_assert_ptr_nonnull(empty);
	ck_assert_int_eq(err, 0);
	*empty = 7;
	ck_assert_ptr_eq(get(&kv, "", 0, 8, false, &err), empty);
	ck_assert_uint_eq(kv.keys, 3);
	ck_assert_uint_eq(kv.key_bytes, 11);

	/* The value size is fixed by the first insert. */
	ck_assert_ptr_null(get(&kv, "apple", 5, 16, false, &err));
	ck_assert_int_eq(err, -EINVAL);
	ck_assert_ptr_null(get(&kv, "pear", 4, 4, true, &err));
	ck_assert_int_eq(err, -EINVAL);
	ck_assert_uint_eq(kv.keys, 3);
	ck_assert_uint_eq(kv.value_bytes, 8);
	ck_assert_uint_eq(*(uint64_t *)get(&kv, "apple", 5, 8, false, &err), 0x1122334455667788ull);
	shmrun_kv_free(&kv);
}
END_TEST

/* Keys with one hash (so one tag and one probe sequence) are told apart by their bytes. */
START_TEST(test_same_hash)
{
	static const char *const keys[] = {"k0", "k1", "key-two", "k3", "", "k5-longer"};
	const uint32_t n = sizeof(keys) / sizeof(keys[0]);
	struct shmrun_kv kv;
	uint32_t *v[6];
	int err;

	ck_assert_int_eq(shmrun_kv_init(&kv, 4), 0);
	for (uint32_t i = 0; i < n; i++) {
		v[i] = shmrun_kv_get(&kv, 2, 0xabcdef, keys[i], (uint32_t)strlen(keys[i]), 4, true,
				     &err);
		ck_assert_ptr_nonnull(v[i]);
		*v[i] = 100 + i;
	}
	ck_assert_uint_eq(kv.keys, n);
	ck_assert_uint_eq(shmrun_kv_vnode_keys(&kv, 2), n);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t *p = shmrun_kv_get(&kv, 2, 0xabcdef, keys[i], (uint32_t)strlen(keys[i]), 4,
					    false, &err);

		ck_assert_ptr_eq(p, v[i]);
		ck_assert_uint_eq(*p, 100 + i);
	}
	ck_assert_ptr_null(shmrun_kv_get(&kv, 2, 0xabcdef, "k4", 2, 4, false, &err));
	ck_assert_int_eq(err, 0);
	shmrun_kv_free(&kv);
}
END_TEST

/* ---- counts: many keys, every table growing ---- */

#define MANY 100000u

static uint32_t key_text(char *buf, uint32_t i)
{
	return (uint32_t)snprintf(buf, 32, "key-%u", i);
}

START_TEST(test_many_keys)
{
	const uint32_t V = 256;
	struct shmrun_kv kv;
	uint64_t *per = calloc(V, sizeof(*per)), key_bytes = 0, sum = 0;
	uint64_t **addr = calloc(MANY, sizeof(*addr));
	char buf[32];
	int err;

	ck_assert_ptr_nonnull(per);
	ck_assert_ptr_nonnull(addr);
	ck_assert_int_eq(shmrun_kv_init(&kv, V), 0);
	for (uint32_t i = 0; i < MANY; i++) {
		uint32_t len = key_text(buf, i);

		addr[i] = get(&kv, buf, len, 8, true, &err);
		CHECK(addr[i] && err == 0, "insert %s: %d", buf, err);
		CHECK(*addr[i] == 0, "%s: not zeroed", buf);
		*addr[i] = (uint64_t)i * 3 + 1;
		per[vnode_of(&kv, buf, len)]++;
		key_bytes += len;
	}
	ck_assert_uint_eq(kv.keys, MANY);
	ck_assert_uint_eq(kv.key_bytes, key_bytes);
	for (uint32_t v = 0; v < V; v++) {
		CHECK(shmrun_kv_vnode_keys(&kv, v) == per[v], "vnode %u: %llu keys, expected %llu",
		      v, (unsigned long long)shmrun_kv_vnode_keys(&kv, v),
		      (unsigned long long)per[v]);
		sum += per[v];
	}
	ck_assert_uint_eq(sum, MANY);
	/* ~390 keys a vnode: each table grew from 16 slots to 1024 and kept every entry. */
	for (uint32_t i = 0; i < MANY; i++) {
		uint32_t len = key_text(buf, i);
		uint64_t *p = get(&kv, buf, len, 8, false, &err);

		CHECK(p == addr[i], "%s moved or lost", buf);
		CHECK(*p == (uint64_t)i * 3 + 1, "%s: value %llu", buf, (unsigned long long)*p);
	}
	for (uint32_t i = MANY; i < MANY + 1000; i++) {
		uint32_t len = key_text(buf, i);

		CHECK(get(&kv, buf, len, 8, false, &err) == NULL && err == 0, "%s found", buf);
	}
	ck_assert_uint_eq(kv.keys, MANY);
	shmrun_kv_free(&kv);
	free(addr);
	free(per);
}
END_TEST

/* ---- foreach ---- */

struct walk {
	const struct shmrun_kv *kv;
	uint32_t last_vnode; /* vnode of the previous entry */
	uint64_t n;
	unsigned char *seen; /* per key index */
	uint64_t stop_at;    /* return 7 from the stop_at-th call; 0: never */
};

static int walk_entry(void *arg, const void *key, uint32_t key_len, void *value)
{
	struct walk *w = arg;
	uint32_t v = vnode_of(w->kv, key, key_len);
	uint64_t i = *(uint64_t *)value;
	char buf[32];

	CHECK(v >= w->last_vnode, "vnode %u after vnode %u", v, w->last_vnode);
	w->last_vnode = v;
	CHECK(i < 5000 && !w->seen[i], "entry %llu seen twice or unknown", (unsigned long long)i);
	CHECK(key_len == key_text(buf, (uint32_t)i) && memcmp(key, buf, key_len) == 0,
	      "entry %llu has key %.*s", (unsigned long long)i, (int)key_len, (const char *)key);
	w->seen[i] = 1;
	w->n++;
	return w->stop_at && w->n == w->stop_at ? 7 : 0;
}

START_TEST(test_foreach)
{
	const uint32_t V = 64, N = 5000;
	struct shmrun_kv kv;
	unsigned char seen[5000] = {0};
	struct walk w = {.kv = &kv, .seen = seen};
	uint64_t in_vnode = 0, total = 0;
	char buf[32];
	int err;

	ck_assert_int_eq(shmrun_kv_init(&kv, V), 0);
	for (uint32_t i = 0; i < N; i++) {
		uint32_t len = key_text(buf, i);
		uint64_t *p = get(&kv, buf, len, 8, true, &err);

		CHECK(p, "insert %s", buf);
		*p = i; /* the value names the key */
	}
	ck_assert_int_eq(shmrun_kv_foreach(&kv, walk_entry, &w), 0);
	ck_assert_uint_eq(w.n, N);
	for (uint32_t i = 0; i < N; i++)
		CHECK(seen[i], "key-%u not walked", i);

	/* The first non-zero return stops the walk and is what foreach returns. */
	memset(seen, 0, sizeof(seen));
	w = (struct walk){.kv = &kv, .seen = seen, .stop_at = 100};
	ck_assert_int_eq(shmrun_kv_foreach(&kv, walk_entry, &w), 7);
	ck_assert_uint_eq(w.n, 100);

	/* foreach_in walks exactly one vnode's keys; the vnodes add up to all. */
	for (uint32_t v = 0; v < V; v++) {
		memset(seen, 0, sizeof(seen));
		w = (struct walk){.kv = &kv, .seen = seen, .last_vnode = v};
		ck_assert_int_eq(shmrun_kv_foreach_in(&kv, v, walk_entry, &w), 0);
		ck_assert_uint_eq(w.n, shmrun_kv_vnode_keys(&kv, v));
		for (uint32_t i = 0; i < N; i++)
			CHECK(!seen[i] || vnode_of(&kv, buf, key_text(buf, i)) == v,
			      "key-%u walked in vnode %u", i, v);
		in_vnode = 0;
		ck_assert_int_eq(shmrun_kv_foreach_in(&kv, v, count_entry, &in_vnode), 0);
		ck_assert_uint_eq(in_vnode, w.n);
		total += w.n;
	}
	ck_assert_uint_eq(total, N);
	/* one vnode's walk stops early as well */
	for (uint32_t v = 0; v < V; v++) {
		if (shmrun_kv_vnode_keys(&kv, v) < 2)
			continue;
		memset(seen, 0, sizeof(seen));
		w = (struct walk){.kv = &kv, .seen = seen, .last_vnode = v, .stop_at = 1};
		ck_assert_int_eq(shmrun_kv_foreach_in(&kv, v, walk_entry, &w), 7);
		ck_assert_uint_eq(w.n, 1);
		break;
	}
	shmrun_kv_free(&kv);
}
END_TEST

/* ---- a range of one vnode ---- */

START_TEST(test_one_vnode)
{
	struct shmrun_kv kv;
	uint64_t n = 0;
	char buf[32];
	int err;

	ck_assert_int_eq(shmrun_kv_init(&kv, 1), 0);
	for (uint32_t i = 0; i < 1000; i++) {
		uint32_t len = key_text(buf, i);

		ck_assert_uint_eq(vnode_of(&kv, buf, len), 0);
		CHECK(get(&kv, buf, len, 16, true, &err), "insert %s", buf);
	}
	ck_assert_uint_eq(shmrun_kv_vnode_keys(&kv, 0), 1000);
	ck_assert_uint_eq(shmrun_kv_vnode_keys(&kv, 1), 0);
	ck_assert_int_eq(shmrun_kv_foreach(&kv, count_entry, &n), 0);
	ck_assert_uint_eq(n, 1000);
	n = 0;
	ck_assert_int_eq(shmrun_kv_foreach_in(&kv, 1, count_entry, &n), 0);
	ck_assert_uint_eq(n, 0);
	ck_assert_ptr_null(shmrun_kv_get(&kv, 1, 0, "x", 1, 16, true, &err));
	ck_assert_int_eq(err, -EINVAL);
	shmrun_kv_free(&kv);
}
END_TEST

/* ---- bytes ---- */

/* Bytes of one entry: 8 of header, the value and the key, rounded up to 8. */
static uint64_t entry_bytes(uint32_t value_bytes, uint32_t key_len)
{
	return (8 + ((value_bytes + 7u) & ~7u) + key_len + 7u) & ~7ull;
}

START_TEST(test_bytes)
{
	struct shmrun_kv kv;
	uint64_t before, first;
	unsigned char *big, *v;
	char buf[32];
	int err;

	ck_assert_int_eq(shmrun_kv_init(&kv, 1), 0);
	/* The first key of a vnode: its table, 16 slots, its entry. */
	ck_assert_ptr_nonnull(get(&kv, "a", 1, 12, true, &err));
	first = kv.bytes;
	ck_assert_uint_ge(first, 16 * 8 + entry_bytes(12, 1));
	ck_assert_uint_le(first, 16 * 8 + entry_bytes(12, 1) + 64);
	/* Up to 12 keys (load factor 3/4) only their entries. */
	for (uint32_t i = 1; i < 12; i++) {
		uint32_t len = (uint32_t)snprintf(buf, sizeof(buf), "%0*u", (int)i, i);

		before = kv.bytes;
		v = get(&kv, buf, len, 12, true, &err);
		ck_assert_ptr_nonnull(v);
		ck_assert_uint_eq((uintptr_t)v % 8, 0);
		ck_assert_uint_eq(kv.bytes - before, entry_bytes(12, len));
	}
	/* A lookup costs nothing. */
	before = kv.bytes;
	ck_assert_ptr_nonnull(get(&kv, "a", 1, 12, false, &err));
	ck_assert_uint_eq(kv.bytes, before);
	/* The 13th key doubles the slots: 16 more of 8 bytes, and its entry. */
	ck_assert_ptr_nonnull(get(&kv, "thirteen", 8, 12, true, &err));
	ck_assert_uint_eq(kv.bytes - before, 16 * 8 + entry_bytes(12, 8));
	ck_assert_uint_eq(kv.keys, 13);

	/* A key too large for a 1 MiB chunk's quarter gets an allocation of its own. */
	big = malloc(300u << 10);
	ck_assert_ptr_nonnull(big);
	for (uint32_t i = 0; i < (300u << 10); i++)
		big[i] = (unsigned char)(i * 7);
	before = kv.bytes;
	v = get(&kv, big, 300u << 10, 12, true, &err);
	ck_assert_ptr_nonnull(v);
	ck_assert_uint_eq(kv.bytes - before, entry_bytes(12, 300u << 10));
	/* "a", the keys of length 1..11, "thirteen", the large one */
	ck_assert_uint_eq(kv.key_bytes, 1 + 66 + 8 + (300u << 10));
	memcpy(v, "twelve bytes", 12);
	ck_assert_ptr_eq(get(&kv, big, 300u << 10, 12, false, &err), v);
	big[1000] ^= 1; /* one byte differs: another key */
	ck_assert_ptr_null(get(&kv, big, 300u << 10, 12, false, &err));
	big[1000] ^= 1;
	/* small keys after it still come from the chunk, and every key is intact */
	before = kv.bytes;
	ck_assert_ptr_nonnull(get(&kv, "after", 5, 12, true, &err));
	ck_assert_uint_eq(kv.bytes - before, entry_bytes(12, 5));
	ck_assert_mem_eq(get(&kv, big, 300u << 10, 12, false, &err), "twelve bytes", 12);
	ck_assert_ptr_nonnull(get(&kv, "thirteen", 8, 12, false, &err));
	ck_assert_uint_eq(kv.keys, 15);
	free(big);
	shmrun_kv_free(&kv);
	ck_assert_uint_eq(kv.bytes, 0);
}
END_TEST

/* A value size of 0: keys only (a set), every value pointer still distinct. */
START_TEST(test_value_size_zero)
{
	struct shmrun_kv kv;
	void *a, *b;
	int err;

	ck_assert_int_eq(shmrun_kv_init(&kv, 8), 0);
	a = get(&kv, "a", 1, 0, true, &err);
	b = get(&kv, "b", 1, 0, true, &err);
	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(b);
	ck_assert_ptr_ne(a, b);
	ck_assert_ptr_eq(get(&kv, "a", 1, 0, false, &err), a);
	ck_assert_ptr_null(get(&kv, "c", 1, 0, false, &err));
	ck_assert_int_eq(err, 0);
	ck_assert_uint_eq(kv.keys, 2);
	shmrun_kv_free(&kv);
}
END_TEST

/* ---- layout: keys compared as words ---- */

/* Byte i of test key number @id, @len bytes long: varied, never all zero. */
static void fill_key(unsigned char *k, uint32_t len, uint32_t id)
{
	for (uint32_t i = 0; i < len; i++)
		k[i] = (unsigned char)(0x41 + (i * 7 + id * 13) % 57);
}

/* Keys of every length 0..40 that are prefixes of one another, then one that
 * differs from each only in its last byte, then only in its first: every one a
 * key of its own, at an address of its own, zero-filled, found again. */
START_TEST(test_lengths_and_prefixes)
{
	enum { MAXLEN = 40 };
	unsigned char base[MAXLEN], k[MAXLEN];
	uint64_t *plain[MAXLEN + 1], *last[MAXLEN + 1], *first[MAXLEN + 1];
	struct shmrun_kv kv;
	int err;

	fill_key(base, MAXLEN, 1);
	ck_assert_int_eq(shmrun_kv_init(&kv, 16), 0);
	for (uint32_t len = 0; len <= MAXLEN; len++) {
		plain[len] = get(&kv, base, len, 8, true, &err);
		ck_assert_ptr_nonnull(plain[len]);
		ck_assert_uint_eq(*plain[len], 0);
		*plain[len] = 1000 + len;
	}
	for (uint32_t len = 1; len <= MAXLEN; len++) {
		memcpy(k, base, len);
		k[len - 1] ^= 0x20; /* only the last byte differs */
		ck_assert_ptr_null(get(&kv, k, len, 8, false, &err));
		ck_assert_int_eq(err, 0);
		last[len] = get(&kv, k, len, 8, true, &err);
		ck_assert_ptr_nonnull(last[len]);
		ck_assert_uint_eq(*last[len], 0);
		*last[len] = 2000 + len;
		memcpy(k, base, len);
		k[0] ^= 0x01; /* only the first byte differs */
		first[len] = get(&kv, k, len, 8, true, &err);
		ck_assert_ptr_nonnull(first[len]);
		ck_assert_uint_eq(*first[len], 0);
		*first[len] = 3000 + len;
	}
	ck_assert_uint_eq(kv.keys, 1 + 3 * MAXLEN);
	for (uint32_t len = 0; len <= MAXLEN; len++) {
		ck_assert_ptr_eq(get(&kv, base, len, 8, false, &err), plain[len]);
		ck_assert_uint_eq(*plain[len], 1000 + len);
		if (!len)
			continue;
		memcpy(k, base, len);
		k[len - 1] ^= 0x20;
		ck_assert_ptr_eq(get(&kv, k, len, 8, false, &err), last[len]);
		ck_assert_uint_eq(*last[len], 2000 + len);
		memcpy(k, base, len);
		k[0] ^= 0x01;
		ck_assert_ptr_eq(get(&kv, k, len, 8, false, &err), first[len]);
		ck_assert_uint_eq(*first[len], 3000 + len);
	}
	/* one byte longer than every stored key of a length: not there */
	memcpy(k, base, MAXLEN);
	k[MAXLEN - 1] ^= 0x55;
	ck_assert_ptr_null(get(&kv, k, MAXLEN, 8, false, &err));
	shmrun_kv_free(&kv);
}
END_TEST

/*
 * One hash for every key, so every slot has the same tag and the word compare
 * alone tells the keys apart: at the lengths around the word boundaries
 * (0, 1, 3, 4, 7, 8, 9, 15, 16, 17, 24, 25), keys that are prefixes of one
 * another, then keys of one length that differ only in their last byte, or
 * only in a byte that a zero-padded copy would hide (a 0 byte at the end).
 * At most 12 keys a store (its table does not grow: growth rehashes with
 * XXH3-64, which a made-up hash would not match).
 */
START_TEST(test_same_hash_lengths)
{
	static const uint32_t lens[] = {0, 1, 3, 4, 7, 8, 9, 15, 16, 17, 24, 25};
	const uint32_t n = sizeof(lens) / sizeof(lens[0]);
	unsigned char base[32], k[32];
	struct shmrun_kv kv;
	uint32_t *v[12];
	int err;

	fill_key(base, sizeof(base), 2);
	ck_assert_int_eq(shmrun_kv_init(&kv, 1), 0);
	for (uint32_t i = 0; i < n; i++) {
		v[i] = shmrun_kv_get(&kv, 0, 0x5eed, base, lens[i], 4, true, &err);
		ck_assert_ptr_nonnull(v[i]);
		ck_assert_uint_eq(*v[i], 0);
		*v[i] = 100 + i;
	}
	for (uint32_t i = 0; i < n; i++) {
		ck_assert_ptr_eq(shmrun_kv_get(&kv, 0, 0x5eed, base, lens[i], 4, false, &err),
				 v[i]);
		ck_assert_uint_eq(*v[i], 100 + i);
	}
	ck_assert_uint_eq(kv.keys, n);
	shmrun_kv_free(&kv);

	for (uint32_t i = 1; i < n; i++) {
		uint32_t len = lens[i];
		uint32_t *a, *b, *c;

		ck_assert_int_eq(shmrun_kv_init(&kv, 1), 0);
		memcpy(k, base, len);
		a = shmrun_kv_get(&kv, 0, 0x5eed, k, len, 4, true, &err);
		k[len - 1] ^= 0x80;
		ck_assert_ptr_null(shmrun_kv_get(&kv, 0, 0x5eed, k, len, 4, false, &err));
		b = shmrun_kv_get(&kv, 0, 0x5eed, k, len, 4, true, &err);
		k[len - 1] = 0; /* as the zero padding of a shorter key */
		ck_assert_ptr_null(shmrun_kv_get(&kv, 0, 0x5eed, k, len, 4, false, &err));
		c = shmrun_kv_get(&kv, 0, 0x5eed, k, len, 4, true, &err);
		/* the key one byte shorter, whose padded words equal c's */
		ck_assert_ptr_null(shmrun_kv_get(&kv, 0, 0x5eed, k, len - 1, 4, false, &err));
		ck_assert_ptr_nonnull(a);
		ck_assert_ptr_nonnull(b);
		ck_assert_ptr_nonnull(c);
		ck_assert_ptr_ne(a, b);
		ck_assert_ptr_ne(b, c);
		ck_assert_ptr_ne(a, c);
		ck_assert_uint_eq(kv.keys, 3);
		memcpy(k, base, len);
		ck_assert_ptr_eq(shmrun_kv_get(&kv, 0, 0x5eed, k, len, 4, false, &err), a);
		shmrun_kv_free(&kv);
	}
}
END_TEST

/* Keys of lengths 0..40 over many growths: every address stable, every value
 * zero-filled on insert even where freed memory is reused. */
START_TEST(test_mixed_lengths_growth)
{
	enum { N = 20000 };
	uint64_t **addr = calloc(N, sizeof(*addr));
	unsigned char k[48];
	struct shmrun_kv kv;
	int err;

	ck_assert_ptr_nonnull(addr);
	for (int round = 0; round < 2; round++) { /* round 1 reuses round 0's freed memory */
		ck_assert_int_eq(shmrun_kv_init(&kv, 8), 0);
		for (uint32_t i = 0; i < N; i++) {
			uint32_t len = 4 + i % 37; /* 4..40: a 4-byte id, then filler */

			fill_key(k, len, i);
			memcpy(k, &i, 4);
			addr[i] = get(&kv, k, len, 24, true, &err);
			CHECK(addr[i] && (uintptr_t)addr[i] % 8 == 0, "insert %u", i);
			CHECK(addr[i][0] == 0 && addr[i][1] == 0 && addr[i][2] == 0,
			      "key %u: value not zero-filled", i);
			memset(addr[i], 0xff, 24);
			addr[i][0] = i;
		}
		ck_assert_uint_eq(kv.keys, N);
		for (uint32_t i = 0; i < N; i++) {
			uint32_t len = 4 + i % 37;
			uint64_t *p;

			fill_key(k, len, i);
			memcpy(k, &i, 4);
			p = get(&kv, k, len, 24, false, &err);
			CHECK(p == addr[i] && p[0] == i && p[2] == UINT64_MAX,
			      "key %u moved or lost", i);
		}
		shmrun_kv_free(&kv);
	}
	free(addr);
}
END_TEST

/*
 * Keys that end exactly at a page followed by an unmapped page, and keys that
 * start exactly after one: inserted, found, and compared against a stored key
 * of the same hash and length. The lookup reads only the key's own bytes, or
 * this faults (and ASan reports any read outside them).
 */
START_TEST(test_key_at_page_edge)
{
	long page = sysconf(_SC_PAGESIZE);
	unsigned char *map, *mid, other[48];
	struct shmrun_kv kv;
	int err;

	map = mmap(NULL, 3 * (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
		   0);
	ck_assert_ptr_ne(map, MAP_FAILED);
	mid = map + page;
	fill_key(mid, (uint32_t)page, 3);
	ck_assert_int_eq(mprotect(map, (size_t)page, PROT_NONE), 0);
	ck_assert_int_eq(mprotect(mid + page, (size_t)page, PROT_NONE), 0);

	for (uint32_t len = 0; len <= 40; len++) {
		const unsigned char *end = mid + page - len, *start = mid;
		uint64_t h = XXH3_64bits(end, len), *v;

		/* with its real hash, in a store of many vnodes */
		ck_assert_int_eq(shmrun_kv_init(&kv, 4), 0);
		ck_assert_ptr_null(get(&kv, end, len, 8, false, &err));
		v = get(&kv, end, len, 8, true, &err);
		ck_assert_ptr_nonnull(v);
		*v = len;
		ck_assert_ptr_eq(get(&kv, end, len, 8, false, &err), v);
		ck_assert_ptr_eq(get(&kv, start, len, 8, false, &err),
				 len && memcmp(start, end, len) ? NULL : v);
		shmrun_kv_free(&kv);

		/* beside another key of the same hash and length: the words are compared */
		ck_assert_int_eq(shmrun_kv_init(&kv, 1), 0);
		memcpy(other, end, len);
		if (len)
			other[len - 1] ^= 1;
		ck_assert_ptr_nonnull(shmrun_kv_get(&kv, 0, h, other, len, 8, true, &err));
		ck_assert_ptr_eq(shmrun_kv_get(&kv, 0, h, end, len, 8, false, &err),
				 len ? NULL : shmrun_kv_get(&kv, 0, h, other, len, 8, false, &err));
		ck_assert_ptr_eq(shmrun_kv_get(&kv, 0, h, start, len, 8, false, &err),
				 len ? NULL : shmrun_kv_get(&kv, 0, h, other, len, 8, false, &err));
		v = shmrun_kv_get(&kv, 0, h, end, len, 8, true, &err);
		ck_assert_ptr_nonnull(v);
		ck_assert_ptr_eq(shmrun_kv_get(&kv, 0, h, end, len, 8, false, &err), v);
		ck_assert_uint_eq(kv.keys, len ? 2 : 1);
		shmrun_kv_free(&kv);
	}
	ck_assert_int_eq(munmap(map, 3 * (size_t)page), 0);
}
END_TEST

/* Bytes of a key's entry in the new layout: the empty key keeps a zero word. */
START_TEST(test_bytes_empty_key)
{
	struct shmrun_kv kv;
	uint64_t before;
	int err;

	ck_assert_int_eq(shmrun_kv_init(&kv, 1), 0);
	ck_assert_ptr_nonnull(get(&kv, "a", 1, 8, true, &err));
	before = kv.bytes;
	ck_assert_ptr_nonnull(get(&kv, "", 0, 8, true, &err));
	ck_assert_uint_eq(kv.bytes - before, 8 + 8 + 8); /* header, value, one zero word */
	before = kv.bytes;
	ck_assert_ptr_nonnull(get(&kv, "12345678", 8, 8, true, &err));
	ck_assert_uint_eq(kv.bytes - before, 8 + 8 + 8);
	before = kv.bytes;
	ck_assert_ptr_nonnull(get(&kv, "123456789", 9, 8, true, &err));
	ck_assert_uint_eq(kv.bytes - before, 8 + 8 + 16);
	ck_assert_uint_eq(kv.key_bytes, 1 + 0 + 8 + 9);
	shmrun_kv_free(&kv);
}
END_TEST

/* Regression: a store first used with 0-byte values took a later non-zero size
 * as its first, and its entries were read with the key at the wrong offset. */
START_TEST(test_value_size_zero_then_more)
{
	struct shmrun_kv kv;
	uint64_t n = 0;
	int err;

	ck_assert_int_eq(shmrun_kv_init(&kv, 4), 0);
	ck_assert_ptr_nonnull(get(&kv, "set-member", 10, 0, true, &err));
	ck_assert_ptr_null(get(&kv, "counter", 7, 8, true, &err));
	ck_assert_int_eq(err, -EINVAL);
	ck_assert_uint_eq(kv.value_bytes, 0);
	ck_assert_uint_eq(kv.keys, 1);
	ck_assert_ptr_nonnull(get(&kv, "set-member", 10, 0, false, &err));
	ck_assert_int_eq(shmrun_kv_foreach(&kv, count_entry, &n), 0);
	ck_assert_uint_eq(n, 1);
	shmrun_kv_free(&kv);
}
END_TEST

/* ---- delete ---- */

static int del(struct shmrun_kv *kv, const void *key, uint32_t len)
{
	uint64_t h = XXH3_64bits(key, len);

	return shmrun_kv_delete(kv, shmrun_placement_vnode_of_hash(h, kv->vnodes), h, key, len);
}

static uint32_t key_of(char *buf, uint32_t i)
{
	return (uint32_t)snprintf(buf, 32, "key-%u", i);
}

START_TEST(test_delete)
{
	enum { N = 6000 };
	struct shmrun_kv kv;
	uint64_t **addr = calloc(N, sizeof(*addr)), bytes_full, n;
	uint32_t *order = malloc(N * sizeof(*order));
	bool *gone = calloc(N, sizeof(*gone));
	char k[32];
	int err;

	ck_assert_ptr_nonnull(addr);
	ck_assert_ptr_nonnull(order);
	ck_assert_ptr_nonnull(gone);
	/* one vnode: every key in one table, with long probe runs */
	ck_assert_int_eq(shmrun_kv_init(&kv, 1), 0);
	for (uint32_t i = 0; i < N; i++) {
		uint32_t len = key_of(k, i);

		addr[i] = get(&kv, k, len, 8, true, &err);
		CHECK(addr[i], "insert %u", i);
		*addr[i] = 1000u + i;
		order[i] = i;
	}
	bytes_full = kv.bytes;
	srandom(12);
	for (uint32_t i = N; i > 1; i--) {
		uint32_t j = (uint32_t)random() % i, t = order[i - 1];

		order[i - 1] = order[j];
		order[j] = t;
	}
	/* delete two thirds in random order; after every 97th, every key is checked */
	for (uint32_t d = 0; d < 2 * N / 3; d++) {
		uint32_t i = order[d], len = key_of(k, i);

		CHECK(del(&kv, k, len) == 0, "delete %u", i);
		CHECK(del(&kv, k, len) == -ENOENT, "second delete of %u", i);
		gone[i] = true;
		if (d % 97 && d != 2 * N / 3 - 1)
			continue;
		for (uint32_t x = 0; x < N; x++) {
			uint64_t *v;

			len = key_of(k, x);
			v = get(&kv, k, len, 8, false, &err);
			if (gone[x]) {
				CHECK(!v && err == 0, "deleted key %u found", x);
				continue;
			}
			CHECK(v == addr[x], "key %u moved or lost after %u deletes", x, d + 1);
			CHECK(*v == 1000u + x, "key %u: value %lu", x, (unsigned long)*v);
		}
	}
	ck_assert_uint_eq(kv.keys, N - 2 * N / 3);
	ck_assert_uint_eq(shmrun_kv_vnode_keys(&kv, 0), N - 2 * N / 3);
	n = 0;
	ck_assert_int_eq(shmrun_kv_foreach(&kv, count_entry, &n), 0);
	ck_assert_uint_eq(n, N - 2 * N / 3);
	ck_assert_uint_lt(kv.bytes, bytes_full);
	/* re-inserted: zeroed, in reused memory (nothing new reserved) */
	{
		uint64_t reserved = kv.reserved;

		for (uint32_t d = 0; d < 2 * N / 3; d++) {
			uint32_t i = order[d], len = key_of(k, i);
			uint64_t *v = get(&kv, k, len, 8, true, &err);

			CHECK(v && *v == 0, "re-inserted key %u not zeroed", i);
		}
		ck_assert_uint_eq(kv.reserved, reserved);
		ck_assert_uint_eq(kv.bytes, bytes_full);
	}
	ck_assert_int_eq(shmrun_kv_delete(&kv, 5, 0, "x", 1), -ENOENT); /* vnode out of range */
	shmrun_kv_free(&kv);
	free(addr);
	free(order);
	free(gone);
}
END_TEST

/* A long run that creates and deletes keys stays flat: a sliding window of
 * live keys of mixed lengths — short, class-sized and over 512 bytes. */
START_TEST(test_delete_reuses_memory)
{
	enum { LIVE = 1500, ROUNDS = 200000 };
	static char big[700];
	struct shmrun_kv kv;
	uint64_t reserved = 0, bytes = 0;
	char k[800];
	int err;

	memset(big, 'b', sizeof(big));
	ck_assert_int_eq(shmrun_kv_init(&kv, 64), 0);
	for (uint32_t i = 0; i < ROUNDS; i++) {
		uint32_t len = (uint32_t)snprintf(k, sizeof(k), "%u-%.*s", i, (int)(i % 7 == 0 ? 600 : i % 40), big);
		uint64_t *v = get(&kv, k, len, 8, true, &err);

		CHECK(v && *v == 0, "insert %u", i);
		*v = i;
		if (i >= LIVE) {
			uint32_t j = i - LIVE;

			len = (uint32_t)snprintf(k, sizeof(k), "%u-%.*s", j, (int)(j % 7 == 0 ? 600 : j % 40), big);
			CHECK(del(&kv, k, len) == 0, "delete %u", j);
		}
		if (i == 4 * LIVE) { /* warmed up: every size class seen */
			reserved = kv.reserved;
			bytes = kv.bytes;
		}
	}
	ck_assert_uint_eq(kv.keys, LIVE);
	ck_assert_uint_gt(reserved, 0);
	/* flat: within one chunk of the warmed-up figure, though 133 times as many keys passed */
	ck_assert_uint_le(kv.reserved, reserved + (1u << 20) + 64);
	ck_assert_uint_le(kv.bytes, bytes + bytes / 10);
	ck_assert_uint_ge(kv.bytes, bytes - bytes / 10);
	shmrun_kv_free(&kv);
	ck_assert_uint_eq(kv.reserved, 0);
}
END_TEST

/* ---- arena: the worker's own allocator ---- */

START_TEST(test_arena)
{
	struct shmrun_kv kv;
	char buf[32];
	int err;

	ck_assert_int_eq(shmrun_state_arena_init(), 0);
	ck_assert_int_eq(shmrun_kv_init(&kv, 32), 0);
	for (uint32_t i = 0; i < 2000; i++) {
		uint32_t len = key_text(buf, i);
		uint64_t *p = get(&kv, buf, len, 8, true, &err);

		CHECK(p, "insert %s", buf);
		*p = i;
	}
	for (uint32_t i = 0; i < 2000; i++) {
		uint32_t len = key_text(buf, i);
		uint64_t *p = get(&kv, buf, len, 8, false, &err);

		CHECK(p && *p == i, "key-%u lost", i);
	}
	ck_assert_uint_eq(kv.keys, 2000);
	shmrun_kv_free(&kv);
}
END_TEST

/* ---- nomem ---- */

#ifndef SANITIZED
START_TEST(test_nomem)
{
	struct shmrun_kv kv, huge;
	uint64_t keys, key_bytes;
	char key[8] = "k";
	const char *volatile kp = key; /* hidden from -Warray-bounds: len says 1 GiB */
	int err = 0;

	ck_assert_int_eq(shmrun_kv_init(&kv, 4), 0);
	ck_assert_ptr_nonnull(get(&kv, "a", 1, 8, true, &err));
	limit_address_space(64u << 20);

	/* V slots of 8 bytes each: 32 GiB does not fit. */
	ck_assert_int_eq(shmrun_kv_init(&huge, UINT32_MAX), -ENOMEM);

	/* An entry of 1 GiB does not fit; nothing is counted, the store goes on.
	 * (The key is not read: no tag matches, and the allocation fails first.) */
	keys = kv.keys;
	key_bytes = kv.key_bytes;
	ck_assert_ptr_null(shmrun_kv_get(&kv, 0, 5, kp, 1u << 30, 8, true, &err));
	ck_assert_int_eq(err, -ENOMEM);
	ck_assert_uint_eq(kv.keys, keys);
	ck_assert_uint_eq(kv.key_bytes, key_bytes);
	ck_assert_ptr_nonnull(get(&kv, "a", 1, 8, false, &err));
	ck_assert_ptr_nonnull(get(&kv, "b", 1, 8, true, &err));
	ck_assert_uint_eq(kv.keys, keys + 1);
	shmrun_kv_free(&kv);
}
END_TEST
#endif

static Suite *state_suite(void)
{
	Suite *s = suite_create("state");
	TCase *tc;

	tc = tcase_create("empty");
	tcase_add_test(tc, test_empty);
	suite_add_tcase(s, tc);
	tc = tcase_create("roundtrip");
	tcase_add_test(tc, test_roundtrip);
	tcase_add_test(tc, test_same_hash);
	tcase_add_test(tc, test_value_size_zero);
	suite_add_tcase(s, tc);
	tc = tcase_create("counts");
	tcase_add_test(tc, test_many_keys);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	tc = tcase_create("foreach");
	tcase_add_test(tc, test_foreach);
	suite_add_tcase(s, tc);
	tc = tcase_create("one vnode");
	tcase_add_test(tc, test_one_vnode);
	suite_add_tcase(s, tc);
	tc = tcase_create("bytes");
	tcase_add_test(tc, test_bytes);
	suite_add_tcase(s, tc);
	tc = tcase_create("layout");
	tcase_add_test(tc, test_lengths_and_prefixes);
	tcase_add_test(tc, test_same_hash_lengths);
	tcase_add_test(tc, test_mixed_lengths_growth);
	tcase_add_test(tc, test_key_at_page_edge);
	tcase_add_test(tc, test_bytes_empty_key);
	tcase_add_test(tc, test_value_size_zero_then_more);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	tc = tcase_create("delete");
	tcase_add_test(tc, test_delete);
	tcase_add_test(tc, test_delete_reuses_memory);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	tc = tcase_create("arena");
	tcase_add_test(tc, test_arena);
	suite_add_tcase(s, tc);
#ifndef SANITIZED
	tc = tcase_create("nomem");
	tcase_add_test(tc, test_nomem);
	suite_add_tcase(s, tc);
#endif
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(state_suite());
	int failed;

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
