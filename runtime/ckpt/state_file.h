/*
 * runtime/ckpt/state_file.h: the state file's logical content, in both
 * directions — the only code that knows its layout (ckpt_io.h frames it in
 * checksummed blocks; docs/checkpoints.md "State file format"). The snapshot
 * writer encodes with it (shmrun_state_encode()), restore and rescale decode
 * with it (shmrun_state_parse() and the iterators), rescale re-encodes with it.
 *
 * Layout (integers in host byte order, the same host), version 2:
 *
 *     "SHMRSTAT" u32 version=2 u32 value_bytes u64 epoch u32 instance u32 width
 *     u32 vnodes u32 nsections i64 watermark u32 flags u32 0
 *     nsections x { u32 vnode, u32 0, u64 nkeys, nkeys x { u32 key_len, key, value },
 *                   u64 ntimers, ntimers x { u32 key_len, u32 domain, i64 time, key } }
 *     u64 n_pw, n_pw x { u32 len, bytes }
 *
 * Sections are whole vnodes — keys and timers (timer.h) — so a rescale can
 * move them without parsing keys; a vnode has a section if it holds a key or
 * a timer. epoch is that of the snapshot, or 0 in the file --rescale writes
 * for a stage new to the checkpoint: its tasks start as on a first start
 * (shmrun_task_restoring() false), every other task restores its position.
 * watermark is the task's (t->wm) at the snapshot; a rescale writes the
 * minimum over the stage's old instances when the width changes. flags:
 * SHMRUN_STATE_NAMESPACED when the keys are (key || ns) pairs
 * (shmrun_keyed_state_ns()).
 *
 * Version 1 (before timers, ABI 1.0) had the 40-byte header without
 * watermark and flags, and sections without the timer count: it is still
 * read (no timers, watermark SHMRUN_WATERMARK_MIN), and a rescale re-writes
 * its sections as version 2. Any other version is refused with -EPROTO.
 *
 * Invariants: a parsed view points into the caller's buffer and is valid as
 * long as it is; shmrun_state_parse() accepts only a file whose every length
 * lies inside it and that ends exactly after its last per-worker entry, so the
 * iterators below never read past it. A per-worker entry is the same
 * [u32 len][bytes] in memory (the snapshot's buffer) and on disk.
 *
 * Rejected: a self-describing format (a schema per stage) — a state file is
 * read only by the same binary's restore or rescale, and the MANIFEST's
 * fingerprint pins the topology; per-key records with their own headers —
 * sections of whole vnodes are moved by a rescale without parsing keys.
 */
#ifndef SHMRUN_RT_CKPT_STATE_FILE_H
#define SHMRUN_RT_CKPT_STATE_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct shmrun_ckpt_buf;
struct shmrun_kv;
struct shmrun_timers;

/*
 * A parsed state file (the layout is above): pointers into @data.
 * Sections are whole vnodes, copied as they are when a rescale moves them.
 */
struct shmrun_state_section {
	uint32_t vnode;
	uint64_t keys;
	uint64_t timers;	     /* 0 in a version 1 file */
	const unsigned char *bytes;  /* the whole section: header + entries (+ timers) */
	size_t len;
	const unsigned char *timer0; /* the first timer entry (version 2) */
};

struct shmrun_state_view {
	uint32_t version; /* set also when parsing fails with -EPROTO */
	uint32_t value_bytes, instance, width, vnodes, flags;
	uint64_t epoch;
	int64_t wm; /* the task's watermark; SHMRUN_WATERMARK_MIN in a version 1 file */
	struct shmrun_state_section *sections; /* malloc'd */
	uint32_t nsections;
	const unsigned char *pw;  /* [u32 len][bytes]... */
	size_t pw_len;
	uint64_t npw;
};

#define SHMRUN_STATE_MAGIC "SHMRSTAT"
#define SHMRUN_STATE_VERSION 2u	 /* written; 1 and 2 are read */
#define SHMRUN_STATE_HEAD 56u	 /* magic + version .. nsections + watermark + flags + 0 */
#define SHMRUN_STATE_HEAD_V1 40u /* version 1: no watermark, no flags */
#define SHMRUN_STATE_NAMESPACED 0x1u /* flags: keys are key || u64 ns */
#define SHMRUN_STATE_TIMER_HEAD 16u  /* a timer entry before its key: len, domain, time */

/* What a state file's header says beyond its sections (shmrun_state_put_header()). */
struct shmrun_state_head {
	uint32_t value_bytes;
	uint64_t epoch;
	uint32_t instance, width, vnodes, nsections;
	int64_t wm;
	uint32_t flags;
};

/*
 * shmrun_state_put_header() - append a state file's header (SHMRUN_STATE_HEAD
 * bytes, version SHMRUN_STATE_VERSION) from @h; h->nsections vnode sections
 * and the per-worker entries follow.
 * Return: 0 or the buffer's -errno.
 */
int shmrun_state_put_header(struct shmrun_ckpt_buf *buf, const struct shmrun_state_head *h);

/*
 * shmrun_state_parse() - check and index a state file's logical content
 * (@len bytes at @data; @v points into it, so @data must outlive @v).
 * Every length is checked to lie inside @data and the file must end right
 * after its last per-worker entry. On failure @v owns nothing (no free needed).
 * Return: 0; -EPROTO for a version other than 1 and 2 (v->version holds it:
 * a newer shmrun wrote the file); -EBADMSG if malformed (bad magic, more
 * sections than vnodes, a vnode out of range, a timer of no known domain, a
 * count that lies, trailing bytes); -ENOMEM.
 */
int shmrun_state_parse(const unsigned char *data, size_t len, struct shmrun_state_view *v);

/* shmrun_state_view_free() - free @v's section index and zero it (the data stays the caller's). */
void shmrun_state_view_free(struct shmrun_state_view *v);

/* What a task's state file holds (shmrun_state_encode()). */
struct shmrun_state_src {
	struct shmrun_kv *kv;	      /* key-bound state */
	struct shmrun_timers *timers; /* its timers (may be NULL: none) */
	uint64_t epoch;
	uint32_t instance, width, vnodes;
	int64_t wm;	   /* the task's watermark */
	const void *pw;	   /* per-worker entries, [u32 len][bytes]... (NULL when pw_len is 0) */
	size_t pw_len;
	uint64_t npw;
};

/*
 * shmrun_state_encode() - append a whole state file's logical content to @buf:
 * the header, one section per vnode of @src->kv or @src->timers that holds a
 * key or a timer (each key with its value of kv->value_bytes, then the
 * vnode's timers), then the per-worker entries. The flags say
 * SHMRUN_STATE_NAMESPACED when kv->mode is SHMRUN_KV_MODE_NS.
 * @kv_bytes receives the bytes of the key-bound sections (timers included).
 * Return: 0 or the buffer's -errno (-ENOMEM).
 */
int shmrun_state_encode(struct shmrun_ckpt_buf *buf, const struct shmrun_state_src *src,
			uint64_t *kv_bytes);

/*
 * shmrun_state_put_section() - append a parsed section @sec of @v (another
 * state file with the same value size) as version 2: a rescale moves whole
 * vnodes. A version 1 section gets its timer count (0).
 * Return: 0 or the buffer's -errno.
 */
int shmrun_state_put_section(struct shmrun_ckpt_buf *buf, const struct shmrun_state_view *v,
			     const struct shmrun_state_section *sec);

/* shmrun_state_section_size() - bytes shmrun_state_put_section() writes for @sec of @v. */
static inline size_t shmrun_state_section_size(const struct shmrun_state_view *v,
					       const struct shmrun_state_section *sec)
{
	return sec->len + (v->version == 1 ? 8 : 0);
}

/*
 * shmrun_state_put_pw_count() - append the count of per-worker entries that
 * follow (after the last section). Return: 0 or the buffer's -errno.
 */
int shmrun_state_put_pw_count(struct shmrun_ckpt_buf *buf, uint64_t npw);

/*
 * shmrun_state_put_pw_entry() - append one per-worker entry of @len bytes.
 * Return: 0 or the buffer's -errno.
 */
int shmrun_state_put_pw_entry(struct shmrun_ckpt_buf *buf, const void *entry, uint32_t len);

/* shmrun_state_pw_entry_size() - bytes a per-worker entry of @len bytes takes in the file. */
static inline uint64_t shmrun_state_pw_entry_size(uint32_t len)
{
	return 4 + (uint64_t)len;
}

/*
 * shmrun_state_pw_encode() - encode one per-worker entry of @len bytes at
 * @dst, which has room for shmrun_state_pw_entry_size(@len) bytes: the form
 * a task collects its snapshot's entries in (shmrun_pw_add()) and that
 * shmrun_state_put_pw() then copies into the file as they are.
 */
static inline void shmrun_state_pw_encode(unsigned char *dst, const void *entry, uint32_t len)
{
	memcpy(dst, &len, 4);
	if (len)
		memcpy(dst + 4, entry, len);
}

/*
 * shmrun_state_put_pw() - append @npw per-worker entries already encoded in
 * @pw (@pw_len bytes, e.g. a parsed view's pw), count first.
 * Return: 0 or the buffer's -errno.
 */
int shmrun_state_put_pw(struct shmrun_ckpt_buf *buf, uint64_t npw, const void *pw, size_t pw_len);

/* A position in a parsed section's keys (shmrun_state_keys_next()). */
struct shmrun_state_cursor {
	const unsigned char *p;
	uint64_t left; /* keys not yet returned */
	uint32_t value_bytes;
};

/* shmrun_state_keys_begin() - a cursor on the first key of section @sec of @v. */
void shmrun_state_keys_begin(const struct shmrun_state_view *v,
			     const struct shmrun_state_section *sec, struct shmrun_state_cursor *c);

/*
 * shmrun_state_keys_next() - the next key of a section (@key, @key_len bytes)
 * and its value (@value, value_bytes bytes), pointers into the parsed file.
 * Return: true, or false after the last one.
 */
bool shmrun_state_keys_next(struct shmrun_state_cursor *c, const void **key, uint32_t *key_len,
			    const void **value);

/* A position in a parsed section's timers (shmrun_state_timers_next()). */
struct shmrun_state_timer_cursor {
	const unsigned char *p;
	uint64_t left;
};

/* shmrun_state_timers_begin() - a cursor on the first timer of section @sec. */
void shmrun_state_timers_begin(const struct shmrun_state_section *sec,
			       struct shmrun_state_timer_cursor *c);

/*
 * shmrun_state_timers_next() - the next timer of a section: its domain
 * (enum shmrun_time_domain), key (@key, @key_len bytes, pointing into the
 * parsed file) and time (ns). Return: true, or false after the last one.
 */
bool shmrun_state_timers_next(struct shmrun_state_timer_cursor *c, uint32_t *domain,
			      const void **key, uint32_t *key_len, int64_t *time_ns);

/*
 * shmrun_state_pw_next() - the per-worker entry at *@p in [*@p, @end) (@entry,
 * @len bytes), and *@p moved past it. Fewer than 4 bytes left is the end.
 * Return: 1 (an entry), 0 (the end), -EBADMSG (the entry runs past @end).
 */
int shmrun_state_pw_next(const unsigned char **p, const unsigned char *end, const void **entry,
			 uint32_t *len);

#endif /* SHMRUN_RT_CKPT_STATE_FILE_H */
