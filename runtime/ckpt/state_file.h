/*
 * runtime/ckpt/state_file.h: the state file's logical content, in both
 * directions — the only code that knows its layout (ckpt_io.h frames it in
 * checksummed blocks; docs/checkpoints.md "State file format"). The snapshot
 * writer encodes with it (shmrun_state_encode()), restore and rescale decode
 * with it (shmrun_state_parse() and the iterators), rescale re-encodes with it.
 *
 * Layout (integers in host byte order, the same host):
 *
 *     "SHMRSTAT" u32 version=1 u32 value_bytes u64 epoch u32 instance u32 width
 *     u32 vnodes u32 nsections
 *     nsections x { u32 vnode, u32 0, u64 nkeys, nkeys x { u32 key_len, key, value } }
 *     u64 n_pw, n_pw x { u32 len, bytes }
 *
 * Sections are whole vnodes, so a rescale can move them without parsing keys.
 * epoch is that of the snapshot, or 0 in the file --rescale writes for a stage
 * new to the checkpoint: its tasks start as on a first start
 * (shmrun_task_restoring() false), every other task restores its position.
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

/*
 * A parsed state file (the layout is above): pointers into @data.
 * Sections are whole vnodes, copied as they are when a rescale moves them.
 */
struct shmrun_state_section {
	uint32_t vnode;
	uint64_t keys;
	const unsigned char *bytes; /* the whole section: header + entries */
	size_t len;
};

struct shmrun_state_view {
	uint32_t value_bytes, instance, width, vnodes;
	uint64_t epoch;
	struct shmrun_state_section *sections; /* malloc'd */
	uint32_t nsections;
	const unsigned char *pw;  /* [u32 len][bytes]... */
	size_t pw_len;
	uint64_t npw;
};

#define SHMRUN_STATE_MAGIC "SHMRSTAT"
#define SHMRUN_STATE_VERSION 1u
#define SHMRUN_STATE_HEAD 40u /* magic + 6 x u32/u64 fields + vnodes + nsections */

/*
 * shmrun_state_put_header() - append a state file's header (SHMRUN_STATE_HEAD
 * bytes); @nsections vnode sections and the per-worker entries follow.
 * Return: 0 or the buffer's -errno.
 */
int shmrun_state_put_header(struct shmrun_ckpt_buf *buf, uint32_t value_bytes, uint64_t epoch,
			    uint32_t instance, uint32_t width, uint32_t vnodes, uint32_t nsections);

/*
 * shmrun_state_parse() - check and index a state file's logical content
 * (@len bytes at @data; @v points into it, so @data must outlive @v).
 * Every length is checked to lie inside @data and the file must end right
 * after its last per-worker entry. On failure @v owns nothing (no free needed).
 * Return: 0; -EBADMSG if malformed (bad magic or version, more sections than
 * vnodes, a vnode out of range, a count that lies, trailing bytes); -ENOMEM.
 */
int shmrun_state_parse(const unsigned char *data, size_t len, struct shmrun_state_view *v);

/* shmrun_state_view_free() - free @v's section index and zero it (the data stays the caller's). */
void shmrun_state_view_free(struct shmrun_state_view *v);

/*
 * shmrun_state_encode() - append a whole state file's logical content to @buf:
 * the header, one section per vnode of @kv that holds keys (each key with its
 * value of kv->value_bytes), then @npw per-worker entries already encoded as
 * [u32 len][bytes] in @pw (@pw_len bytes; may be NULL when 0).
 * @kv_bytes receives the bytes of the key-bound sections.
 * Return: 0 or the buffer's -errno (-ENOMEM).
 */
int shmrun_state_encode(struct shmrun_ckpt_buf *buf, struct shmrun_kv *kv, uint64_t epoch,
			uint32_t instance, uint32_t width, uint32_t vnodes, const void *pw,
			size_t pw_len, uint64_t npw, uint64_t *kv_bytes);

/*
 * shmrun_state_put_section() - append a parsed section @sec (of another state
 * file with the same value size) as it is: a rescale moves whole vnodes.
 * Return: 0 or the buffer's -errno.
 */
int shmrun_state_put_section(struct shmrun_ckpt_buf *buf, const struct shmrun_state_section *sec);

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

/*
 * shmrun_state_pw_next() - the per-worker entry at *@p in [*@p, @end) (@entry,
 * @len bytes), and *@p moved past it. Fewer than 4 bytes left is the end.
 * Return: 1 (an entry), 0 (the end), -EBADMSG (the entry runs past @end).
 */
int shmrun_state_pw_next(const unsigned char **p, const unsigned char *end, const void **entry,
			 uint32_t *len);

#endif /* SHMRUN_RT_CKPT_STATE_FILE_H */
