/*
 * tests/fuzz/fuzz_state_file.c: the state-file reader (runtime/ckpt/
 * state_file.c) over arbitrary bytes: the logical content of a state file,
 * after ckpt_io.c has checked and stripped its checksummed blocks (whose
 * XXH64 sums a fuzzer would only break; damaged blocks are check_ckpt_io's).
 *
 * Each input is read two ways:
 *   1. as the logical content: shmrun_state_parse() directly;
 *   2. as a whole state file on disk, blocks and all: each block's checksum
 *      is made right (where its header's length lies inside the input), the
 *      bytes are written to a memfd and read back by shmrun_ckpt_read_file()
 *      (ckpt_io.c: block magic, lengths, truncation, the file's size and
 *      XXH64 against the MANIFEST's, which are those of the bytes), and
 *      what it returns is parsed as in 1. The real state files of the
 *      corpus (keys3-*.state) come this way.
 * When shmrun_state_parse() accepts the content, every key,
 * timer and per-worker entry is walked with the iterators restore uses
 * (snapshot.c restore_task()), each pointer checked to lie inside the input,
 * and the file is re-encoded as a rescale would (shmrun_state_put_header(),
 * shmrun_state_put_section(), shmrun_state_put_pw()) and parsed again.
 *
 * What must hold: no crash, leak, UB or allocation out of proportion to the
 * input (libFuzzer's -rss_limit_mb / malloc limit); what parses has no more
 * sections than vnodes, every vnode below vnodes, every timer domain 0 or 1,
 * and re-encodes into a file that parses to the same counts.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>
#include <xxhash.h>

#include "ckpt_io.h"
#include "fuzz.h"
#include "state_file.h"

static const unsigned char *lo, *hi; /* the input, for inside() */

static bool inside(const void *p, size_t n)
{
	const unsigned char *c = p;

	return c >= lo && c <= hi && n <= (size_t)(hi - c);
}

static void walk(const struct shmrun_state_view *v)
{
	const unsigned char *p = v->pw, *end = v->pw + v->pw_len;
	uint64_t npw = 0;
	const void *entry;
	uint32_t len;
	int more;

	FUZZ_CHECK(v->nsections <= v->vnodes);
	for (uint32_t s = 0; s < v->nsections; s++) {
		const struct shmrun_state_section *sec = &v->sections[s];
		struct shmrun_state_timer_cursor tc;
		struct shmrun_state_cursor cur;
		const void *key, *value;
		uint32_t kl, domain;
		int64_t t;
		uint64_t n = 0;

		FUZZ_CHECK(sec->vnode < v->vnodes);
		FUZZ_CHECK(inside(sec->bytes, sec->len));
		shmrun_state_keys_begin(v, sec, &cur);
		while (shmrun_state_keys_next(&cur, &key, &kl, &value)) {
			FUZZ_CHECK(inside(key, kl));
			FUZZ_CHECK(inside(value, v->value_bytes));
			FUZZ_CHECK((const unsigned char *)value + v->value_bytes <= sec->bytes + sec->len);
			n++;
		}
		FUZZ_CHECK(n == sec->keys);
		n = 0;
		shmrun_state_timers_begin(sec, &tc);
		while (shmrun_state_timers_next(&tc, &domain, &key, &kl, &t)) {
			FUZZ_CHECK(domain <= 1);
			FUZZ_CHECK(inside(key, kl));
			n++;
		}
		FUZZ_CHECK(n == sec->timers);
	}
	while ((more = shmrun_state_pw_next(&p, end, &entry, &len)) == 1) {
		FUZZ_CHECK(inside(entry, len));
		npw++;
	}
	FUZZ_CHECK(more == 0 && npw == v->npw);
}

/* Re-encode @v as a rescale does and parse the result again. */
static void reencode(const struct shmrun_state_view *v)
{
	struct shmrun_state_head h = {
		.value_bytes = v->value_bytes,
		.epoch = v->epoch,
		.instance = v->instance,
		.width = v->width,
		.vnodes = v->vnodes,
		.nsections = v->nsections,
		.wm = v->wm,
		.flags = v->flags,
	};
	struct shmrun_ckpt_buf buf;
	struct shmrun_state_view v2;
	const struct iovec *iov;
	unsigned char *flat = NULL;
	size_t nblocks, len = 0;
	int err;

	shmrun_ckpt_buf_init(&buf);
	err = shmrun_state_put_header(&buf, &h);
	for (uint32_t s = 0; s < v->nsections && !err; s++)
		err = shmrun_state_put_section(&buf, v, &v->sections[s]);
	if (!err)
		err = shmrun_state_put_pw(&buf, v->npw, v->pw, v->pw_len);
	if (!err)
		err = shmrun_ckpt_buf_seal(&buf);
	if (!err)
		err = shmrun_ckpt_buf_iov(&buf, &iov, &nblocks);
	if (!err) {
		flat = malloc(shmrun_ckpt_buf_len(&buf) + 1);
		for (size_t b = 0; flat && b < nblocks; b++) {
			memcpy(flat + len, (unsigned char *)iov[b].iov_base + SHMRUN_CKPT_HEADER,
			       iov[b].iov_len - SHMRUN_CKPT_HEADER);
			len += iov[b].iov_len - SHMRUN_CKPT_HEADER;
		}
	}
	if (flat) {
		FUZZ_CHECK(len == shmrun_ckpt_buf_len(&buf));
		err = shmrun_state_parse(flat, len, &v2);
		FUZZ_CHECK(err == 0 || err == -ENOMEM);
		if (!err) {
			FUZZ_CHECK(v2.version == 2 && v2.nsections == v->nsections &&
				   v2.npw == v->npw && v2.vnodes == v->vnodes &&
				   v2.value_bytes == v->value_bytes && v2.wm == v->wm);
			for (uint32_t s = 0; s < v->nsections; s++)
				FUZZ_CHECK(v2.sections[s].vnode == v->sections[s].vnode &&
					   v2.sections[s].keys == v->sections[s].keys &&
					   v2.sections[s].timers == v->sections[s].timers);
			shmrun_state_view_free(&v2);
		}
	}
	free(flat);
	shmrun_ckpt_buf_free(&buf);
}

/* 1: @size bytes at @data as a state file's logical content. */
static void logical(const uint8_t *data, size_t size)
{
	struct shmrun_state_view v;
	int err;

	lo = data;
	hi = data + size;
	err = shmrun_state_parse(data, size, &v);
	if (err) {
		FUZZ_CHECK(err == -EBADMSG || err == -EPROTO || err == -ENOMEM);
		FUZZ_CHECK(v.sections == NULL);
		return;
	}
	FUZZ_CHECK(v.version == 1 || v.version == 2);
	walk(&v);
	reencode(&v);
	shmrun_state_view_free(&v);
}

/* 2: the bytes as a file of checksummed blocks, sums made right, read back. */
static void framed(const uint8_t *data, size_t size)
{
	static int fd = -1;
	static char path[64];
	unsigned char *buf = malloc(size ? size : 1);
	void *content = NULL;
	size_t off = 0, len = 0;
	char why[256] = "";
	int err;

	FUZZ_CHECK(buf != NULL);
	if (fd < 0) {
		fd = memfd_create("fuzz_state_file", MFD_CLOEXEC);
		FUZZ_CHECK(fd >= 0);
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	}
	memcpy(buf, data, size);
	while (size - off >= SHMRUN_CKPT_HEADER) {
		uint32_t plen;
		uint64_t sum;

		memcpy(&plen, buf + off + 4, 4); /* little-endian, as x86-64 and ckpt_io.c */
		if (plen > size - off - SHMRUN_CKPT_HEADER)
			break;
		sum = XXH64(buf + off + SHMRUN_CKPT_HEADER, plen, 0);
		memcpy(buf + off + 8, &sum, 8);
		off += SHMRUN_CKPT_HEADER + plen;
	}
	FUZZ_CHECK(ftruncate(fd, 0) == 0);
	FUZZ_CHECK(pwrite(fd, buf, size, 0) == (ssize_t)size);
	err = shmrun_ckpt_read_file(AT_FDCWD, path, size, XXH64(buf, size, 0), &content, &len, why,
				    sizeof(why));
	if (getenv("FUZZ_VERBOSE")) /* how far the corpus's files get */
		fprintf(stderr, "framed, %zu bytes: %s\n", size, err ? why : "read");
	if (err) {
		FUZZ_CHECK(err == -EBADMSG || err == -ENOMEM);
		FUZZ_CHECK(content == NULL && why[0]);
	} else {
		FUZZ_CHECK(content != NULL && len <= size);
		logical(content, len);
	}
	free(content);
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	logical(data, size);
	framed(data, size);
	return 0;
}
