/*
 * tests/unit/check_state_file.c: the state file's logical content through
 * runtime/ckpt/state_file.h, the one owner of its layout.
 *
 * Round trips: key-bound state in a shmrun_kv and per-worker entries encoded
 * with shmrun_state_encode() parse back (shmrun_state_parse()) to the same
 * header, the same keys with their values vnode by vnode, and the same
 * entries; a file re-encoded from a parsed one (the rescale's path:
 * put_header, put_section, put_pw_count/put_pw_entry or put_pw) parses to the
 * same content. Zero cases: no keys, no per-worker entries, a task whose
 * vnode range holds no vnode. Version 2: timers in their vnode's section,
 * the watermark and the namespaced flag round trip; a vnode with timers and
 * no key has a section; a version 1 file (no timers, no watermark) is still
 * read, and its sections re-encoded as version 2. Damaged input — truncated
 * anywhere, a bad magic, a section count, key count or timer count that
 * lies, a timer of no known domain, trailing bytes, a vnode out of range —
 * is -EBADMSG, an unknown version -EPROTO with the version, never a crash or
 * a read past the end (each test runs in its own process; ASan builds run it
 * too).
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <xxhash.h>

#include "ckpt/ckpt_io.h"
#include "ckpt/state_file.h"
#include "state.h"
#include "timer.h"

#if defined(__SANITIZE_ADDRESS__) /* gcc */
#define UNDER_ASAN 1
#elif defined(__has_feature) /* clang */
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

#define VNODES 16u
#define VBYTES 8u

/* The logical content of a sealed buffer: its blocks' payloads, concatenated (malloc'd). */
static unsigned char *content(struct shmrun_ckpt_buf *buf, size_t *len)
{
	const struct iovec *iov;
	size_t n, off = 0;
	unsigned char *out;

	ck_assert_int_eq(shmrun_ckpt_buf_seal(buf), 0);
	ck_assert_int_eq(shmrun_ckpt_buf_iov(buf, &iov, &n), 0);
	out = malloc(shmrun_ckpt_buf_len(buf) + 1);
	ck_assert_ptr_nonnull(out);
	for (size_t i = 0; i < n; i++) {
		memcpy(out + off, (unsigned char *)iov[i].iov_base + SHMRUN_CKPT_HEADER,
		       iov[i].iov_len - SHMRUN_CKPT_HEADER);
		off += iov[i].iov_len - SHMRUN_CKPT_HEADER;
	}
	ck_assert_uint_eq(off, shmrun_ckpt_buf_len(buf));
	*len = off;
	return out;
}

static void put_key(struct shmrun_kv *kv, uint32_t vnode, const char *key, uint64_t value)
{
	int err = 0;
	void *v = shmrun_kv_get(kv, vnode, XXH3_64bits(key, strlen(key)), key,
				(uint32_t)strlen(key), VBYTES, true, &err);

	ck_assert_ptr_nonnull(v);
	memcpy(v, &value, VBYTES);
}

/* Two per-worker entries, "alpha" and "" (an empty entry), as [u32 len][bytes]. */
static size_t two_entries(unsigned char *pw)
{
	uint32_t l = 5, z = 0;

	memcpy(pw, &l, 4);
	memcpy(pw + 4, "alpha", 5);
	memcpy(pw + 9, &z, 4);
	return 13;
}

/* Encode @kv (may hold nothing), timers @tm (may be NULL) and @pw into a fresh
 * buffer, watermark @wm; its content in *@len bytes. */
static unsigned char *encode_tm(struct shmrun_kv *kv, struct shmrun_timers *tm, int64_t wm,
				uint64_t epoch, const unsigned char *pw, size_t pw_len, uint64_t npw,
				size_t *len, uint64_t *kv_bytes)
{
	struct shmrun_state_src src = {.kv = kv,
				       .timers = tm,
				       .epoch = epoch,
				       .instance = 2,
				       .width = 3,
				       .vnodes = VNODES,
				       .wm = wm,
				       .pw = pw,
				       .pw_len = pw_len,
				       .npw = npw};
	struct shmrun_ckpt_buf buf;
	unsigned char *data;

	shmrun_ckpt_buf_init(&buf);
	ck_assert_int_eq(shmrun_state_encode(&buf, &src, kv_bytes), 0);
	data = content(&buf, len);
	shmrun_ckpt_buf_free(&buf);
	return data;
}

/* Encode @kv (may hold nothing) and @pw into a fresh buffer; its content in *@len bytes. */
static unsigned char *encode(struct shmrun_kv *kv, uint64_t epoch, const unsigned char *pw,
			     size_t pw_len, uint64_t npw, size_t *len, uint64_t *kv_bytes)
{
	return encode_tm(kv, NULL, INT64_MIN, epoch, pw, pw_len, npw, len, kv_bytes);
}

/* The value of @key in the parsed view, or UINT64_MAX if it is not there. */
static uint64_t find(const struct shmrun_state_view *v, uint32_t vnode, const char *key)
{
	for (uint32_t s = 0; s < v->nsections; s++) {
		struct shmrun_state_cursor c;
		const void *k, *val;
		uint32_t kl;
		uint64_t out;

		if (v->sections[s].vnode != vnode)
			continue;
		shmrun_state_keys_begin(v, &v->sections[s], &c);
		while (shmrun_state_keys_next(&c, &k, &kl, &val))
			if (kl == strlen(key) && memcmp(k, key, kl) == 0) {
				memcpy(&out, val, 8);
				return out;
			}
	}
	return UINT64_MAX;
}

/* ---- round trips ---------------------------------------------------------------- */

START_TEST(keys_and_entries_round_trip)
{
	struct shmrun_kv kv;
	struct shmrun_state_view v;
	unsigned char pw[32], *data;
	size_t pw_len = two_entries(pw), len;
	uint64_t kv_bytes = 0, keys = 0;
	const unsigned char *p, *end;
	const void *entry;
	uint32_t elen;

	ck_assert_int_eq(shmrun_kv_init(&kv, VNODES), 0);
	put_key(&kv, 3, "apple", 1);
	put_key(&kv, 3, "pear", 2);
	put_key(&kv, 9, "", 3); /* an empty key */
	put_key(&kv, 15, "plum", UINT64_MAX - 1);
	data = encode(&kv, 7, pw, pw_len, 2, &len, &kv_bytes);
	ck_assert_int_eq(shmrun_state_parse(data, len, &v), 0);
	ck_assert_uint_eq(v.value_bytes, VBYTES);
	ck_assert_uint_eq(v.epoch, 7);
	ck_assert_uint_eq(v.instance, 2);
	ck_assert_uint_eq(v.width, 3);
	ck_assert_uint_eq(v.vnodes, VNODES);
	ck_assert_uint_eq(v.nsections, 3); /* only vnodes that hold keys */
	ck_assert_uint_eq(v.sections[0].vnode, 3);
	ck_assert_uint_eq(v.sections[0].keys, 2);
	ck_assert_uint_eq(v.sections[1].vnode, 9);
	ck_assert_uint_eq(v.sections[2].vnode, 15);
	for (uint32_t s = 0; s < v.nsections; s++)
		keys += v.sections[s].keys;
	ck_assert_uint_eq(keys, 4);
	ck_assert_uint_eq(find(&v, 3, "apple"), 1);
	ck_assert_uint_eq(find(&v, 3, "pear"), 2);
	ck_assert_uint_eq(find(&v, 9, ""), 3);
	ck_assert_uint_eq(find(&v, 15, "plum"), UINT64_MAX - 1);
	ck_assert_uint_eq(find(&v, 9, "apple"), UINT64_MAX);
	/* the key-bound bytes are the sections: 3 x (16 + 8 timer count) + 4 x (4 + value) + keys */
	ck_assert_uint_eq(kv_bytes, 3 * 24 + 4 * (4 + VBYTES) + 5 + 4 + 0 + 4);
	ck_assert_uint_eq(v.version, SHMRUN_STATE_VERSION);
	ck_assert_int_eq(v.wm, INT64_MIN);
	ck_assert_uint_eq(v.flags, 0);
	ck_assert_uint_eq(v.npw, 2);
	ck_assert_uint_eq(v.pw_len, pw_len);
	p = v.pw;
	end = v.pw + v.pw_len;
	ck_assert_int_eq(shmrun_state_pw_next(&p, end, &entry, &elen), 1);
	ck_assert_uint_eq(elen, 5);
	ck_assert_int_eq(memcmp(entry, "alpha", 5), 0);
	ck_assert_int_eq(shmrun_state_pw_next(&p, end, &entry, &elen), 1);
	ck_assert_uint_eq(elen, 0);
	ck_assert_int_eq(shmrun_state_pw_next(&p, end, &entry, &elen), 0);
	shmrun_state_view_free(&v);
	ck_assert_ptr_null(v.sections);
	free(data);
	shmrun_kv_free(&kv);
}
END_TEST

/* The rescale's path: a file rebuilt from a parsed one, section by section. */
START_TEST(reencoded_file_parses_the_same)
{
	struct shmrun_kv kv;
	struct shmrun_state_view v, w2, w3;
	struct shmrun_ckpt_buf buf;
	unsigned char pw[32], *data, *again, *third;
	size_t pw_len = two_entries(pw), len, len2, len3;
	uint64_t kv_bytes;
	const unsigned char *p;
	const void *entry;
	uint32_t elen;

	ck_assert_int_eq(shmrun_kv_init(&kv, VNODES), 0);
	put_key(&kv, 1, "one", 11);
	put_key(&kv, 12, "twelve", 12);
	data = encode(&kv, 4, pw, pw_len, 2, &len, &kv_bytes);
	ck_assert_int_eq(shmrun_state_parse(data, len, &v), 0);

	/* whole per-worker part at once (width unchanged) */
	shmrun_ckpt_buf_init(&buf);
	ck_assert_int_eq(shmrun_state_put_header(&buf, &(struct shmrun_state_head){
							   .value_bytes = v.value_bytes,
							   .epoch = v.epoch,
							   .instance = v.instance,
							   .width = v.width,
							   .vnodes = v.vnodes,
							   .nsections = v.nsections,
							   .wm = v.wm,
							   .flags = v.flags}),
			 0);
	for (uint32_t s = 0; s < v.nsections; s++)
		ck_assert_int_eq(shmrun_state_put_section(&buf, &v, &v.sections[s]), 0);
	ck_assert_int_eq(shmrun_state_put_pw(&buf, v.npw, v.pw, v.pw_len), 0);
	again = content(&buf, &len2);
	shmrun_ckpt_buf_free(&buf);
	ck_assert_uint_eq(len2, len);
	ck_assert_int_eq(memcmp(again, data, len), 0);
	ck_assert_int_eq(shmrun_state_parse(again, len2, &w2), 0);
	ck_assert_uint_eq(find(&w2, 12, "twelve"), 12);

	/* entry by entry (a split deal), only vnode 12, epoch 0 (a new stage) */
	shmrun_ckpt_buf_init(&buf);
	ck_assert_int_eq(shmrun_state_put_header(&buf, &(struct shmrun_state_head){
							   .value_bytes = VBYTES,
							   .width = 1,
							   .vnodes = VNODES,
							   .nsections = 1}),
			 0);
	ck_assert_int_eq(shmrun_state_put_section(&buf, &v, &v.sections[1]), 0);
	ck_assert_int_eq(shmrun_state_put_pw_count(&buf, 1), 0);
	ck_assert_int_eq(shmrun_state_put_pw_entry(&buf, "beta", 4), 0);
	third = content(&buf, &len3);
	shmrun_ckpt_buf_free(&buf);
	ck_assert_int_eq(shmrun_state_parse(third, len3, &w3), 0);
	ck_assert_uint_eq(w3.epoch, 0);
	ck_assert_uint_eq(w3.nsections, 1);
	ck_assert_uint_eq(find(&w3, 12, "twelve"), 12);
	ck_assert_uint_eq(find(&w3, 1, "one"), UINT64_MAX);
	ck_assert_uint_eq(w3.npw, 1);
	p = w3.pw;
	ck_assert_int_eq(shmrun_state_pw_next(&p, w3.pw + w3.pw_len, &entry, &elen), 1);
	ck_assert_uint_eq(elen, 4);
	ck_assert_int_eq(memcmp(entry, "beta", 4), 0);

	shmrun_state_view_free(&v);
	shmrun_state_view_free(&w2);
	shmrun_state_view_free(&w3);
	free(data);
	free(again);
	free(third);
	shmrun_kv_free(&kv);
}
END_TEST

/* ---- zero cases ----------------------------------------------------------------- */

START_TEST(no_keys_no_entries)
{
	struct shmrun_kv kv;
	struct shmrun_state_view v;
	unsigned char *data;
	size_t len;
	uint64_t kv_bytes = 99;
	const unsigned char *p;
	const void *entry;
	uint32_t elen;

	ck_assert_int_eq(shmrun_kv_init(&kv, VNODES), 0);
	data = encode(&kv, 1, NULL, 0, 0, &len, &kv_bytes);
	ck_assert_uint_eq(len, SHMRUN_STATE_HEAD + 8); /* header and a zero entry count */
	ck_assert_uint_eq(kv_bytes, 0);
	ck_assert_int_eq(shmrun_state_parse(data, len, &v), 0);
	ck_assert_uint_eq(v.nsections, 0);
	ck_assert_uint_eq(v.npw, 0);
	ck_assert_uint_eq(v.pw_len, 0);
	p = v.pw;
	ck_assert_int_eq(shmrun_state_pw_next(&p, v.pw + v.pw_len, &entry, &elen), 0);
	shmrun_state_view_free(&v);
	free(data);
	shmrun_kv_free(&kv);
}
END_TEST

/* Entries but no keys, and keys but an empty per-worker list. */
START_TEST(one_part_empty)
{
	struct shmrun_kv kv;
	struct shmrun_state_view v;
	unsigned char pw[32], *data;
	size_t pw_len = two_entries(pw), len;
	uint64_t kv_bytes;

	ck_assert_int_eq(shmrun_kv_init(&kv, VNODES), 0);
	data = encode(&kv, 2, pw, pw_len, 2, &len, &kv_bytes);
	ck_assert_int_eq(shmrun_state_parse(data, len, &v), 0);
	ck_assert_uint_eq(v.nsections, 0);
	ck_assert_uint_eq(v.npw, 2);
	shmrun_state_view_free(&v);
	free(data);

	put_key(&kv, 0, "k", 5);
	data = encode(&kv, 2, NULL, 0, 0, &len, &kv_bytes);
	ck_assert_int_eq(shmrun_state_parse(data, len, &v), 0);
	ck_assert_uint_eq(v.nsections, 1);
	ck_assert_uint_eq(v.npw, 0);
	ck_assert_uint_eq(find(&v, 0, "k"), 5);
	shmrun_state_view_free(&v);
	free(data);
	shmrun_kv_free(&kv);
}
END_TEST

/* A task whose vnode range is empty (width > vnodes): a header saying 0 vnodes. */
START_TEST(task_with_no_vnodes)
{
	struct shmrun_ckpt_buf buf;
	struct shmrun_state_view v;
	unsigned char *data;
	size_t len;

	shmrun_ckpt_buf_init(&buf);
	ck_assert_int_eq(shmrun_state_put_header(&buf, &(struct shmrun_state_head){
							   .epoch = 3, .instance = 5, .width = 8}),
			 0);
	ck_assert_int_eq(shmrun_state_put_pw_count(&buf, 0), 0);
	data = content(&buf, &len);
	shmrun_ckpt_buf_free(&buf);
	ck_assert_int_eq(shmrun_state_parse(data, len, &v), 0);
	ck_assert_uint_eq(v.vnodes, 0);
	ck_assert_uint_eq(v.nsections, 0);
	ck_assert_uint_eq(v.instance, 5);
	ck_assert_uint_eq(v.width, 8);
	shmrun_state_view_free(&v);
	free(data);
}
END_TEST

/* ---- version 2: timers, watermark, namespaced keys; version 1 ------------------ */

struct seen_timer {
	uint32_t vnode, domain;
	char key[16];
	int64_t time;
};

START_TEST(timers_watermark_and_flags_round_trip)
{
	struct shmrun_kv kv;
	struct shmrun_timers tm = {0};
	struct shmrun_state_view v;
	struct seen_timer seen[8];
	unsigned char *data;
	size_t len, n = 0;
	uint64_t kv_bytes;

	ck_assert_int_eq(shmrun_kv_init(&kv, VNODES), 0);
	put_key(&kv, 3, "apple", 1);
	kv.mode = SHMRUN_KV_MODE_NS; /* as task.c sets it: the flag follows */
	/* vnode 3: a key and two timers; vnode 7: a timer only; vnode 9: nothing */
	ck_assert_int_eq(shmrun_timers_add(&tm, VNODES, 3, 1, SHMRUN_TIME_EVENT, "apple", 5, 100), 1);
	ck_assert_int_eq(
	    shmrun_timers_add(&tm, VNODES, 3, 1, SHMRUN_TIME_PROCESSING, "apple", 5, -5), 1);
	ck_assert_int_eq(shmrun_timers_add(&tm, VNODES, 7, 2, SHMRUN_TIME_EVENT, "kiwi", 4, 42), 1);
	data = encode_tm(&kv, &tm, 12345, 9, NULL, 0, 0, &len, &kv_bytes);
	ck_assert_int_eq(shmrun_state_parse(data, len, &v), 0);
	ck_assert_uint_eq(v.version, 2);
	ck_assert_int_eq(v.wm, 12345);
	ck_assert_uint_eq(v.flags, SHMRUN_STATE_NAMESPACED);
	ck_assert_uint_eq(v.nsections, 2);
	ck_assert_uint_eq(v.sections[0].vnode, 3);
	ck_assert_uint_eq(v.sections[0].keys, 1);
	ck_assert_uint_eq(v.sections[0].timers, 2);
	ck_assert_uint_eq(v.sections[1].vnode, 7);
	ck_assert_uint_eq(v.sections[1].keys, 0);
	ck_assert_uint_eq(v.sections[1].timers, 1);
	ck_assert_uint_eq(find(&v, 3, "apple"), 1);
	/* sections: 2 x 24; the key 4 + 5 + 8; timers 3 x 16 + 5 + 5 + 4 */
	ck_assert_uint_eq(kv_bytes, 2 * 24 + 17 + 3 * 16 + 14);
	for (uint32_t s = 0; s < v.nsections; s++) {
		struct shmrun_state_timer_cursor c;
		const void *key;
		uint32_t kl, d;
		int64_t t;

		shmrun_state_timers_begin(&v.sections[s], &c);
		while (shmrun_state_timers_next(&c, &d, &key, &kl, &t)) {
			ck_assert_uint_lt(n, 8);
			ck_assert_uint_lt(kl, 16);
			seen[n] = (struct seen_timer){.vnode = v.sections[s].vnode, .domain = d,
						      .time = t};
			memcpy(seen[n].key, key, kl);
			seen[n].key[kl] = 0;
			n++;
		}
	}
	ck_assert_uint_eq(n, 3);
	for (size_t i = 0; i < n; i++) {
		if (seen[i].vnode == 7) {
			ck_assert_str_eq(seen[i].key, "kiwi");
			ck_assert_uint_eq(seen[i].domain, SHMRUN_TIME_EVENT);
			ck_assert_int_eq(seen[i].time, 42);
		} else {
			ck_assert_str_eq(seen[i].key, "apple");
			ck_assert_int_eq(seen[i].time,
					 seen[i].domain == SHMRUN_TIME_EVENT ? 100 : -5);
		}
	}
	shmrun_state_view_free(&v);
	free(data);
	shmrun_kv_free(&kv);
	shmrun_timers_free(&tm);
}
END_TEST

/* A version 1 file (before timers): read with no timers and no watermark; a
 * section copied into a new file becomes version 2 (the rescale's upgrade). */
START_TEST(version_1_is_read_and_upgraded)
{
	unsigned char v1[256], *data;
	uint32_t head[8] = {1, VBYTES, 0, 0, 1, 2, VNODES, 1}, sec[2] = {4, 0}, kl = 3;
	uint64_t epoch = 9, nkeys = 1, value = 77, npw = 0;
	struct shmrun_state_view v, w2;
	struct shmrun_ckpt_buf buf;
	size_t n = 0, len;

	memcpy(&head[2], &epoch, 8);
	memcpy(v1, SHMRUN_STATE_MAGIC, 8);
	n = 8;
	memcpy(v1 + n, head, sizeof(head));
	n += sizeof(head);
	ck_assert_uint_eq(n, SHMRUN_STATE_HEAD_V1);
	memcpy(v1 + n, sec, 8);
	memcpy(v1 + n + 8, &nkeys, 8);
	memcpy(v1 + n + 16, &kl, 4);
	memcpy(v1 + n + 20, "fig", 3);
	memcpy(v1 + n + 23, &value, 8);
	n += 31;
	memcpy(v1 + n, &npw, 8);
	n += 8;
	ck_assert_int_eq(shmrun_state_parse(v1, n, &v), 0);
	ck_assert_uint_eq(v.version, 1);
	ck_assert_uint_eq(v.epoch, 9);
	ck_assert_int_eq(v.wm, INT64_MIN);
	ck_assert_uint_eq(v.flags, 0);
	ck_assert_uint_eq(v.nsections, 1);
	ck_assert_uint_eq(v.sections[0].timers, 0);
	ck_assert_uint_eq(find(&v, 4, "fig"), 77);
	ck_assert_uint_eq(shmrun_state_section_size(&v, &v.sections[0]), 31 + 8);

	shmrun_ckpt_buf_init(&buf);
	ck_assert_int_eq(shmrun_state_put_header(&buf, &(struct shmrun_state_head){
							   .value_bytes = VBYTES, .epoch = 9,
							   .width = 1, .vnodes = VNODES,
							   .nsections = 1, .wm = v.wm}),
			 0);
	ck_assert_int_eq(shmrun_state_put_section(&buf, &v, &v.sections[0]), 0);
	ck_assert_int_eq(shmrun_state_put_pw_count(&buf, 0), 0);
	data = content(&buf, &len);
	shmrun_ckpt_buf_free(&buf);
	ck_assert_uint_eq(len, SHMRUN_STATE_HEAD + 31 + 8 + 8);
	ck_assert_int_eq(shmrun_state_parse(data, len, &w2), 0);
	ck_assert_uint_eq(w2.version, 2);
	ck_assert_uint_eq(w2.sections[0].timers, 0);
	ck_assert_uint_eq(find(&w2, 4, "fig"), 77);
	shmrun_state_view_free(&w2);
	shmrun_state_view_free(&v);
	free(data);
}
END_TEST

/* ---- damaged input -------------------------------------------------------------- */

/* A small valid file: 2 sections, 2 entries. */
static unsigned char *valid(size_t *len)
{
	struct shmrun_kv kv;
	unsigned char pw[32], *data;
	size_t pw_len = two_entries(pw);
	uint64_t kv_bytes;

	struct shmrun_timers tm = {0};

	ck_assert_int_eq(shmrun_kv_init(&kv, VNODES), 0);
	put_key(&kv, 2, "a", 1);
	put_key(&kv, 5, "bb", 2);
	/* one timer in vnode 5, after its key: truncations cut it too */
	ck_assert_int_eq(shmrun_timers_add(&tm, VNODES, 5, 0, SHMRUN_TIME_EVENT, "bb", 2, 77), 1);
	data = encode_tm(&kv, &tm, 5, 6, pw, pw_len, 2, len, &kv_bytes);
	shmrun_kv_free(&kv);
	shmrun_timers_free(&tm);
	return data;
}

static void expect_bad(const unsigned char *data, size_t len, const char *what)
{
	struct shmrun_state_view v;
	int err = shmrun_state_parse(data, len, &v);

	ck_assert_msg(err == -EBADMSG, "%s: %d, not -EBADMSG", what, err);
	ck_assert_ptr_null(v.sections);
}

START_TEST(every_truncation_is_refused)
{
	size_t len;
	unsigned char *data = valid(&len);

	for (size_t cut = 0; cut < len; cut++) {
		unsigned char *copy = malloc(cut + 1); /* exact size: ASan sees an overread */

		memcpy(copy, data, cut);
		expect_bad(copy, cut, "truncated");
		free(copy);
	}
	free(data);
}
END_TEST

START_TEST(bad_magic_and_version)
{
	size_t len;
	unsigned char *data = valid(&len);
	uint32_t version = SHMRUN_STATE_VERSION + 1;

	struct shmrun_state_view v;

	data[0] ^= 0x20;
	expect_bad(data, len, "bad magic");
	data[0] ^= 0x20;
	/* a version this shmrun does not know: -EPROTO, saying which */
	memcpy(data + 8, &version, 4);
	ck_assert_int_eq(shmrun_state_parse(data, len, &v), -EPROTO);
	ck_assert_uint_eq(v.version, SHMRUN_STATE_VERSION + 1);
	ck_assert_ptr_null(v.sections);
	version = 0;
	memcpy(data + 8, &version, 4);
	ck_assert_int_eq(shmrun_state_parse(data, len, &v), -EPROTO);
	ck_assert_uint_eq(v.version, 0);
	/* version 1 read as such: its 40-byte header is not this file's */
	version = 1;
	memcpy(data + 8, &version, 4);
	expect_bad(data, len, "a version 2 file read as version 1");
	free(data);
}
END_TEST

START_TEST(counts_that_lie)
{
	size_t len;
	unsigned char *data = valid(&len), *longer;
	uint32_t nsec, vnode = VNODES;
	uint64_t keys, npw;

	/* the header's section count: one more than there is, one fewer, past vnodes */
	memcpy(&nsec, data + 36, 4);
	ck_assert_uint_eq(nsec, 2);
	nsec = 3;
	memcpy(data + 36, &nsec, 4);
	expect_bad(data, len, "one section more");
	nsec = 1;
	memcpy(data + 36, &nsec, 4);
	expect_bad(data, len, "one section fewer");
	nsec = VNODES + 1;
	memcpy(data + 36, &nsec, 4);
	expect_bad(data, len, "more sections than vnodes");
	nsec = 2;
	memcpy(data + 36, &nsec, 4);
	/* the first section's key count, and its vnode out of range */
	memcpy(&keys, data + SHMRUN_STATE_HEAD + 8, 8);
	ck_assert_uint_eq(keys, 1);
	keys = 1000;
	memcpy(data + SHMRUN_STATE_HEAD + 8, &keys, 8);
	expect_bad(data, len, "key count");
	keys = 1;
	memcpy(data + SHMRUN_STATE_HEAD + 8, &keys, 8);
	memcpy(data + SHMRUN_STATE_HEAD, &vnode, 4);
	expect_bad(data, len, "vnode out of range");
	vnode = 2;
	memcpy(data + SHMRUN_STATE_HEAD, &vnode, 4);
	/* the per-worker entry count: 13 entry bytes and the u64 count before them */
	memcpy(&npw, data + len - 13 - 8, 8);
	ck_assert_uint_eq(npw, 2);
	npw = 3;
	memcpy(data + len - 13 - 8, &npw, 8);
	expect_bad(data, len, "one entry more");
	npw = 1;
	memcpy(data + len - 13 - 8, &npw, 8);
	expect_bad(data, len, "one entry fewer (trailing bytes)");
	npw = 2;
	memcpy(data + len - 13 - 8, &npw, 8);
	{
		struct shmrun_state_view v;

		ck_assert_int_eq(shmrun_state_parse(data, len, &v), 0); /* restored: valid again */
		shmrun_state_view_free(&v);
	}
	/* a trailing byte */
	longer = malloc(len + 1);
	memcpy(longer, data, len);
	longer[len] = 0;
	expect_bad(longer, len + 1, "trailing byte");
	free(longer);
	free(data);
}
END_TEST

/* A timer count that lies, and a timer of a domain that does not exist. */
START_TEST(timers_that_lie)
{
	size_t len;
	unsigned char *data = valid(&len);
	/* vnode 2: 16 + (4 + 1 + 8) + 8; vnode 5: 16 + (4 + 2 + 8), then its timer count */
	size_t count_at = SHMRUN_STATE_HEAD + 37 + 16 + 14, domain_at = count_at + 8 + 4;
	uint64_t n;
	uint32_t domain;

	memcpy(&n, data + count_at, 8);
	ck_assert_uint_eq(n, 1);
	memcpy(&domain, data + domain_at, 4);
	ck_assert_uint_eq(domain, SHMRUN_TIME_EVENT);
	n = 2;
	memcpy(data + count_at, &n, 8);
	expect_bad(data, len, "one timer more");
	n = 0;
	memcpy(data + count_at, &n, 8);
	expect_bad(data, len, "one timer fewer (trailing bytes)");
	n = 1;
	memcpy(data + count_at, &n, 8);
	domain = 2;
	memcpy(data + domain_at, &domain, 4);
	expect_bad(data, len, "a timer of domain 2");
	free(data);
}
END_TEST

/* shmrun_state_pw_next() on raw entries (restore's per-worker list): a cut entry. */
START_TEST(truncated_entry_list)
{
	unsigned char pw[32];
	size_t pw_len = two_entries(pw);
	const unsigned char *p = pw;
	const void *entry;
	uint32_t elen;

	ck_assert_int_eq(shmrun_state_pw_next(&p, pw + 6, &entry, &elen), -EBADMSG);
	p = pw;
	ck_assert_int_eq(shmrun_state_pw_next(&p, pw + pw_len - 2, &entry, &elen), 1);
	ck_assert_int_eq(shmrun_state_pw_next(&p, pw + pw_len - 2, &entry, &elen),
			 0); /* < 4 left */
}
END_TEST

/*
 * A section count the bytes cannot hold (found by fuzzing, tests/fuzz/
 * corpus/state_file/crash-section-count): refused before the section index is
 * allocated. 2^28 sections of a 100-byte file asked calloc() for 15 GiB
 * (-ENOMEM under a 1 GiB address-space limit, where -EBADMSG is right);
 * 2^32 - 1 sections made calloc(nsec + 1) wrap to calloc(0), which the
 * first section then overflowed (an ASan report).
 */
START_TEST(section_count_beyond_the_bytes)
{
	unsigned char data[SHMRUN_STATE_HEAD + 16 + 8 + 8] = "SHMRSTAT";
	uint32_t version = 2, value_bytes = 0, vnodes = UINT32_MAX, nsec = 1u << 28;
	struct shmrun_state_view v;

	memset(data + 8, 0, sizeof(data) - 8);
	memcpy(data + 8, &version, 4);
	memcpy(data + 12, &value_bytes, 4);
	memcpy(data + 32, &vnodes, 4);
	memcpy(data + 36, &nsec, 4);
#ifndef UNDER_ASAN
	{
		/* ASan reserves terabytes of shadow: no address-space limit under it */
		struct rlimit rl = {1ul << 30, 1ul << 30};

		ck_assert_int_eq(setrlimit(RLIMIT_AS, &rl), 0);
	}
#endif
	ck_assert_int_eq(shmrun_state_parse(data, sizeof(data), &v), -EBADMSG);
	ck_assert_ptr_null(v.sections);
	/* one section really there (vnode 0, no keys, no timers), 2^32 - 1 claimed */
	nsec = UINT32_MAX;
	memcpy(data + 36, &nsec, 4);
	ck_assert_int_eq(shmrun_state_parse(data, sizeof(data), &v), -EBADMSG);
	/* and the same file claiming its one section is valid */
	nsec = 1;
	memcpy(data + 36, &nsec, 4);
	ck_assert_int_eq(shmrun_state_parse(data, sizeof(data), &v), 0);
	ck_assert_uint_eq(v.nsections, 1);
	shmrun_state_view_free(&v);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("state_file");
	TCase *rt = tcase_create("round_trip");
	TCase *zero = tcase_create("zero_cases");
	TCase *bad = tcase_create("damaged");
	SRunner *sr;
	int failed;

	shmrun_state_arena_init();
	tcase_add_test(rt, keys_and_entries_round_trip);
	tcase_add_test(rt, reencoded_file_parses_the_same);
	tcase_add_test(rt, timers_watermark_and_flags_round_trip);
	tcase_add_test(rt, version_1_is_read_and_upgraded);
	tcase_add_test(zero, no_keys_no_entries);
	tcase_add_test(zero, one_part_empty);
	tcase_add_test(zero, task_with_no_vnodes);
	tcase_add_test(bad, every_truncation_is_refused);
	tcase_add_test(bad, bad_magic_and_version);
	tcase_add_test(bad, counts_that_lie);
	tcase_add_test(bad, timers_that_lie);
	tcase_add_test(bad, truncated_entry_list);
	tcase_add_test(bad, section_count_beyond_the_bytes);
	suite_add_tcase(s, rt);
	suite_add_tcase(s, zero);
	suite_add_tcase(s, bad);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
