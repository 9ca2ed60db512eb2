/*
 * runtime/ckpt/state_file.c: the state file's logical content in both
 * directions (the layout is drawn in state_file.h). Encoding appends to a
 * shmrun_ckpt_buf, which ckpt_io.c frames in checksummed blocks; decoding
 * checks every length once (shmrun_state_parse()) so that the iterators need
 * not.
 *
 * Invariant: what shmrun_state_encode() writes, shmrun_state_parse() accepts,
 * and a section copied whole by shmrun_state_put_section() stays valid in a
 * file of the same value size.
 *
 * Timers (timer.h) are written in their vnode's section after its keys, so
 * whatever moves a vnode moves its timers; the watermark and the key kind
 * (plain or namespaced) are in the header.
 *
 * Rejected: decoding keys straight into a shmrun_kv here — restore and
 * rescale want different things from a section (insert vs move whole), so
 * decoding hands out pointers and the caller decides.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_io.h"
#include "state.h"
#include "state_file.h"
#include "timer.h"

/* ---- the header ---------------------------------------------------------------- */

int shmrun_state_put_header(struct shmrun_ckpt_buf *buf, const struct shmrun_state_head *h)
{
	unsigned char head[SHMRUN_STATE_HEAD - 8] = {0};
	uint32_t version = SHMRUN_STATE_VERSION;
	int err;

	memcpy(head, &version, 4);
	memcpy(head + 4, &h->value_bytes, 4);
	memcpy(head + 8, &h->epoch, 8);
	memcpy(head + 16, &h->instance, 4);
	memcpy(head + 20, &h->width, 4);
	memcpy(head + 24, &h->vnodes, 4);
	memcpy(head + 28, &h->nsections, 4);
	memcpy(head + 32, &h->wm, 8);
	memcpy(head + 40, &h->flags, 4);
	err = shmrun_ckpt_buf_append(buf, SHMRUN_STATE_MAGIC, 8);
	return err ? err : shmrun_ckpt_buf_append(buf, head, sizeof(head));
}

/* ---- parsing ------------------------------------------------------------------- */

void shmrun_state_view_free(struct shmrun_state_view *v)
{
	free(v->sections);
	memset(v, 0, sizeof(*v));
}

/* Check a section's timers at *@p (version 2) and move *@p past them. Return: 0 or -EBADMSG. */
static int parse_timers(const unsigned char **p, const unsigned char *end,
			struct shmrun_state_section *sec)
{
	const unsigned char *q = *p;

	if (end - q < 8)
		return -EBADMSG;
	memcpy(&sec->timers, q, 8);
	q += 8;
	sec->timer0 = q;
	for (uint64_t k = 0; k < sec->timers; k++) {
		uint32_t kl, domain;

		if (end - q < SHMRUN_STATE_TIMER_HEAD)
			return -EBADMSG;
		memcpy(&kl, q, 4);
		memcpy(&domain, q + 4, 4);
		if (domain > 1 || (size_t)(end - q) < SHMRUN_STATE_TIMER_HEAD + (size_t)kl)
			return -EBADMSG;
		q += SHMRUN_STATE_TIMER_HEAD + (size_t)kl;
	}
	*p = q;
	return 0;
}

int shmrun_state_parse(const unsigned char *data, size_t len, struct shmrun_state_view *v)
{
	const unsigned char *p = data, *end = data + len;
	uint32_t nsec;
	size_t head;

	memset(v, 0, sizeof(*v));
	if (len < 12 || memcmp(p, SHMRUN_STATE_MAGIC, 8) != 0)
		return -EBADMSG;
	memcpy(&v->version, p + 8, 4);
	if (v->version != 1 && v->version != 2)
		return -EPROTO;
	head = v->version == 1 ? SHMRUN_STATE_HEAD_V1 : SHMRUN_STATE_HEAD;
	if (len < head + 8)
		return -EBADMSG;
	memcpy(&v->value_bytes, p + 12, 4);
	memcpy(&v->epoch, p + 16, 8);
	memcpy(&v->instance, p + 24, 4);
	memcpy(&v->width, p + 28, 4);
	memcpy(&v->vnodes, p + 32, 4);
	memcpy(&nsec, p + 36, 4);
	v->wm = INT64_MIN; /* SHMRUN_WATERMARK_MIN */
	if (v->version >= 2) {
		memcpy(&v->wm, p + 40, 8);
		memcpy(&v->flags, p + 48, 4);
	}
	/* A count is believed only as far as the bytes can hold it: each section
	 * takes at least its 16-byte header (and a version 2 one its timer count),
	 * so a header that claims 2^32 - 1 sections in a short file is refused
	 * here, before the index is allocated for them (found by fuzzing,
	 * tests/fuzz/: a 296-byte file asked calloc() for 154 GiB). */
	if (nsec > v->vnodes || nsec > (len - head - 8) / (v->version >= 2 ? 24 : 16))
		return -EBADMSG;
	p += head;
	v->sections = calloc((size_t)nsec + 1, sizeof(*v->sections));
	if (!v->sections)
		return -ENOMEM;
	for (uint32_t s = 0; s < nsec; s++) {
		struct shmrun_state_section *sec = &v->sections[s];
		const unsigned char *start = p;

		if (end - p < 16)
			goto bad;
		memcpy(&sec->vnode, p, 4);
		memcpy(&sec->keys, p + 8, 8);
		p += 16;
		if (sec->vnode >= v->vnodes)
			goto bad;
		for (uint64_t k = 0; k < sec->keys; k++) {
			uint32_t kl;

			if (end - p < 4)
				goto bad;
			memcpy(&kl, p, 4);
			if ((size_t)(end - p) < 4 + (size_t)kl + v->value_bytes)
				goto bad;
			p += 4 + (size_t)kl + v->value_bytes;
		}
		if (v->version >= 2 && parse_timers(&p, end, sec))
			goto bad;
		sec->bytes = start;
		sec->len = (size_t)(p - start);
		v->nsections++;
	}
	if (end - p < 8)
		goto bad;
	memcpy(&v->npw, p, 8);
	p += 8;
	v->pw = p;
	v->pw_len = (size_t)(end - p);
	for (uint64_t i = 0; i < v->npw; i++) {
		uint32_t l;

		if (end - p < 4)
			goto bad;
		memcpy(&l, p, 4);
		if ((size_t)(end - p) < 4 + (size_t)l)
			goto bad;
		p += 4 + l;
	}
	if (p != end)
		goto bad;
	return 0;
bad:
	shmrun_state_view_free(v);
	return -EBADMSG;
}

/* ---- encoding ------------------------------------------------------------------ */

struct kv_writer {
	struct shmrun_ckpt_buf *buf;
	uint32_t value_bytes;
	int err;
};

static int put_entry(void *arg, const void *key, uint32_t key_len, void *value)
{
	struct kv_writer *kw = arg;

	kw->err = shmrun_ckpt_buf_append(kw->buf, &key_len, 4);
	if (!kw->err)
		kw->err = shmrun_ckpt_buf_append(kw->buf, key, key_len);
	if (!kw->err)
		kw->err = shmrun_ckpt_buf_append(kw->buf, value, kw->value_bytes);
	return kw->err;
}

static int put_timer(void *arg, enum shmrun_time_domain domain, const void *key, uint32_t key_len,
		     int64_t time_ns)
{
	struct kv_writer *kw = arg;
	unsigned char head[SHMRUN_STATE_TIMER_HEAD];
	uint32_t d = (uint32_t)domain;

	memcpy(head, &key_len, 4);
	memcpy(head + 4, &d, 4);
	memcpy(head + 8, &time_ns, 8);
	kw->err = shmrun_ckpt_buf_append(kw->buf, head, sizeof(head));
	if (!kw->err)
		kw->err = shmrun_ckpt_buf_append(kw->buf, key, key_len);
	return kw->err;
}

int shmrun_state_encode(struct shmrun_ckpt_buf *buf, const struct shmrun_state_src *src,
			uint64_t *kv_bytes)
{
	struct shmrun_kv *kv = src->kv;
	struct shmrun_timers *tm = src->timers;
	struct kv_writer kw = {.buf = buf, .value_bytes = kv->value_bytes};
	struct shmrun_state_head h = {
		.value_bytes = kv->value_bytes,
		.epoch = src->epoch,
		.instance = src->instance,
		.width = src->width,
		.vnodes = src->vnodes,
		.wm = src->wm,
		.flags = kv->mode == SHMRUN_KV_MODE_NS ? SHMRUN_STATE_NAMESPACED : 0,
	};
	size_t before;
	int err;

	for (uint32_t v = 0; v < src->vnodes; v++)
		h.nsections += shmrun_kv_vnode_keys(kv, v) > 0 ||
			       (tm && shmrun_timers_vnode_count(tm, v) > 0);
	err = shmrun_state_put_header(buf, &h);
	before = shmrun_ckpt_buf_len(buf);
	for (uint32_t v = 0; v < src->vnodes && !err; v++) {
		uint64_t n = shmrun_kv_vnode_keys(kv, v), nt = tm ? shmrun_timers_vnode_count(tm, v) : 0;
		uint32_t sec[2] = {v, 0};

		if (!n && !nt)
			continue;
		err = shmrun_ckpt_buf_append(buf, sec, sizeof(sec));
		if (!err)
			err = shmrun_ckpt_buf_append(buf, &n, 8);
		if (!err)
			err = shmrun_kv_foreach_in(kv, v, put_entry, &kw) ? kw.err : 0;
		if (!err)
			err = shmrun_ckpt_buf_append(buf, &nt, 8);
		if (!err && nt)
			err = shmrun_timers_foreach_in(tm, v, put_timer, &kw) ? kw.err : 0;
	}
	*kv_bytes = shmrun_ckpt_buf_len(buf) - before;
	if (!err)
		err = shmrun_ckpt_buf_append(buf, &src->npw, 8);
	if (!err && src->pw_len)
		err = shmrun_ckpt_buf_append(buf, src->pw, src->pw_len);
	return err;
}

int shmrun_state_put_section(struct shmrun_ckpt_buf *buf, const struct shmrun_state_view *v,
			     const struct shmrun_state_section *sec)
{
	static const uint64_t no_timers;
	int err = shmrun_ckpt_buf_append(buf, sec->bytes, sec->len);

	if (!err && v->version == 1)
		err = shmrun_ckpt_buf_append(buf, &no_timers, 8);
	return err;
}

int shmrun_state_put_pw_count(struct shmrun_ckpt_buf *buf, uint64_t npw)
{
	return shmrun_ckpt_buf_append(buf, &npw, 8);
}

int shmrun_state_put_pw_entry(struct shmrun_ckpt_buf *buf, const void *entry, uint32_t len)
{
	int err = shmrun_ckpt_buf_append(buf, &len, 4);

	return err ? err : shmrun_ckpt_buf_append(buf, entry, len);
}

int shmrun_state_put_pw(struct shmrun_ckpt_buf *buf, uint64_t npw, const void *pw, size_t pw_len)
{
	int err = shmrun_ckpt_buf_append(buf, &npw, 8);

	if (!err && pw_len)
		err = shmrun_ckpt_buf_append(buf, pw, pw_len);
	return err;
}

/* ---- iterating a parsed file ---------------------------------------------------- */

void shmrun_state_keys_begin(const struct shmrun_state_view *v,
			     const struct shmrun_state_section *sec, struct shmrun_state_cursor *c)
{
	c->p = sec->bytes + 16; /* u32 vnode, u32 0, u64 nkeys */
	c->left = sec->keys;
	c->value_bytes = v->value_bytes;
}

bool shmrun_state_keys_next(struct shmrun_state_cursor *c, const void **key, uint32_t *key_len,
			    const void **value)
{
	uint32_t kl;

	if (!c->left)
		return false;
	memcpy(&kl, c->p, 4);
	*key = c->p + 4;
	*key_len = kl;
	*value = c->p + 4 + kl;
	c->p += 4 + (size_t)kl + c->value_bytes;
	c->left--;
	return true;
}

void shmrun_state_timers_begin(const struct shmrun_state_section *sec,
			       struct shmrun_state_timer_cursor *c)
{
	c->p = sec->timer0;
	c->left = sec->timers;
}

bool shmrun_state_timers_next(struct shmrun_state_timer_cursor *c, uint32_t *domain,
			      const void **key, uint32_t *key_len, int64_t *time_ns)
{
	if (!c->left)
		return false;
	memcpy(key_len, c->p, 4);
	memcpy(domain, c->p + 4, 4);
	memcpy(time_ns, c->p + 8, 8);
	*key = c->p + SHMRUN_STATE_TIMER_HEAD;
	c->p += SHMRUN_STATE_TIMER_HEAD + (size_t)*key_len;
	c->left--;
	return true;
}

int shmrun_state_pw_next(const unsigned char **p, const unsigned char *end, const void **entry,
			 uint32_t *len)
{
	uint32_t l;

	if (end - *p < 4)
		return 0;
	memcpy(&l, *p, 4);
	if ((size_t)(end - *p) < 4 + (size_t)l)
		return -EBADMSG;
	*entry = *p + 4;
	*len = l;
	*p += 4 + (size_t)l;
	return 1;
}
