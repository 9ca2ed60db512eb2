/*
 * runtime/state.h: key-bound state, one hash table per vnode (private to
 * runtime/; state.c has the layout and the designs rejected). A task owns one
 * struct shmrun_kv; the operator API reaches it through shmrun_keyed_state()
 * (task.c), checkpoints walk it vnode by vnode (ckpt/state_file.c).
 *
 * Invariants: the vnode of a key is shmrun_placement_vnode_of_hash() of its
 * XXH3-64 hash, and every caller passes that same hash (tables rehash with it
 * when they grow) — a composite key (key bytes || namespace, a timer's key ||
 * time || domain) is hashed whole for its slot while its vnode is that of the
 * key bytes alone, so the caller passes the vnode and the slot hash
 * separately; a task's value size is fixed by its first insert (a size of 0
 * included); values never move: a value's address is stable until
 * shmrun_kv_delete() of its key or shmrun_kv_free(), and a deleted entry's
 * memory is reused by a later insert of the same size class. The lookup,
 * shmrun_kv_get(), is inline here so that the per-record call in
 * shmrun_keyed_state() makes no call for a hit; it reads only the key's own
 * bytes.
 */
#ifndef SHMRUN_RT_STATE_H
#define SHMRUN_RT_STATE_H

#include <stdbool.h>
#include <stdint.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "state.h compares keys as little-endian 64-bit words"
#endif

/*
 * One vnode's table (layout and invariants: state.c). Defined here only so the
 * lookup below can be inlined into its callers; nothing outside state.c and
 * this header reads or writes it.
 */
struct shmrun_kv_table {
	uint64_t *slots; /* cap entries: 0 = empty, else (tag16 << 48) | entry address */
	uint64_t mask;	 /* cap - 1, cap a power of two >= 16 */
	uint64_t used;	 /* keys in this table */
}; /* the slot of a hash: (hash * SHMRUN_KV_PHI64) >> clz(mask), then linear probing */

/* Size classes of freed entries (state.c): keys of up to 8 * this many bytes. */
#define SHMRUN_KV_FREE_CLASSES 64

/* How a task's keys are made (task.c): set by the first insert, kept in the
 * state file (ckpt/state_file.h), so that the two APIs are never mixed. */
enum shmrun_kv_mode {
	SHMRUN_KV_MODE_NONE = 0,  /* no key inserted yet */
	SHMRUN_KV_MODE_PLAIN = 1, /* shmrun_keyed_state(): the key bytes */
	SHMRUN_KV_MODE_NS = 2,	  /* shmrun_keyed_state_ns(): key bytes || u64 ns (LE) */
};

/* All key-bound state of one task: a table per vnode, created on first use. */
struct shmrun_kv {
	uint32_t vnodes;		 /* V */
	uint32_t value_bytes;		 /* fixed per task; 0 until first use */
	struct shmrun_kv_table **tables; /* V entries, NULL until used */
	uint64_t keys;			 /* distinct keys in all tables */
	uint64_t bytes;			 /* bytes in use: tables, slots, live entries (keys included) */
	uint64_t key_bytes;		 /* sum of the keys' lengths */
	uint64_t peak;			 /* largest bytes so far (the run summary's peak: shows
					    whether deletes keep state bounded) */
	uint64_t reserved;		 /* bytes of entry memory taken from the allocator
					    (chunks and large entries): live + free + unused bump */
	struct kv_chunk *chunks;	 /* bump-allocation chunks for entries */
	struct kv_big *bigs;		 /* entries too large for a size class, one allocation each */
	unsigned char *bump, *bump_end;
	uint32_t key_off; /* entry offset of the key: 8 + value_bytes rounded up to 8 */
	uint32_t mode;	  /* enum shmrun_kv_mode, kept by task.c */
	/* freed entries by key span (8 * (class + 1) bytes), linked through their
	 * first word; reused before the bump pointer moves */
	unsigned char *free_list[SHMRUN_KV_FREE_CLASSES];
};

/*
 * shmrun_state_arena_init() - give this process's key-bound state its own
 * jemalloc arena (built with jemalloc), so a worker's state never shares
 * allocator locks or pages with anything else; without jemalloc, malloc is
 * used and nothing happens. Call once per worker process, before any
 * shmrun_kv_init(). Return: 0, or -ENOMEM if the arena cannot be created.
 */
int shmrun_state_arena_init(void);

/*
 * shmrun_kv_init() - an empty store of @vnodes vnodes (the job's vnode count,
 * >= 1) in @kv; tables are created on first use. Return: 0 or -ENOMEM.
 */
int shmrun_kv_init(struct shmrun_kv *kv, uint32_t vnodes);

/*
 * shmrun_kv_free() - free every table, entry and chunk of @kv and zero it;
 * values returned by shmrun_kv_get() are invalid afterwards. Safe on a
 * zeroed or already freed @kv.
 */
void shmrun_kv_free(struct shmrun_kv *kv);

/*
 * shmrun_kv_get_miss() - the rest of shmrun_kv_get() after the inline probe did
 * not find @key in an existing table of the right value size: refusals, a
 * table's first use, and inserts. Same parameters and return as
 * shmrun_kv_get(); call shmrun_kv_get(), not this.
 */
void *shmrun_kv_get_miss(struct shmrun_kv *kv, uint32_t vnode, uint64_t hash, const void *key,
			 uint32_t key_len, uint32_t value_bytes, bool create, int *err);

/* ---- the inline lookup ----------------------------------------------------- */

/* A 64-bit or 32-bit load from any address (unaligned, may alias anything):
 * one instruction at every optimisation level, never a call to memcpy. */
typedef uint64_t __attribute__((aligned(1), may_alias)) shmrun_kv_u64u;
typedef uint32_t __attribute__((aligned(1), may_alias)) shmrun_kv_u32u;
/* An 8-aligned 64-bit load of an entry's bytes (written bytewise by state.c). */
typedef uint64_t __attribute__((may_alias)) shmrun_kv_u64a;

#define SHMRUN_KV_PHI64	    0x9e3779b97f4a7c15ull /* 2^64 / golden ratio (Fibonacci hashing) */
#define SHMRUN_KV_TAG_SHIFT 48
#define SHMRUN_KV_ADDR_MASK ((1ull << SHMRUN_KV_TAG_SHIFT) - 1)

/* Eight zero bytes (state.c): what shmrun_kv_key_word() reads instead of a key
 * shorter than 4 bytes, so that no branch is needed to avoid reading past it. */
extern const unsigned char shmrun_kv_zeros[8];

/* The 4 bytes at @p, any alignment, as a little-endian number. */
static inline uint64_t shmrun_kv_load32(const unsigned char *p)
{
	return *(const shmrun_kv_u32u *)p;
}

/*
 * shmrun_kv_key_word() - bytes [0, @n) of @p, @n <= 8, as a little-endian word
 * whose bytes from @n up are zero: a short key as state.c stores it. Reads
 * only bytes of [p, p + n) — keys are borrowed, and the byte after one may be
 * the end of a mapping — with the input readers of XXH3: two overlapping
 * 4-byte loads for n = 4..8, three byte loads (0, n/2, n-1) for n = 1..3.
 * Both are computed and one is selected by a mask, not a branch: a word's
 * length is random from one record to the next, and a branch on it was
 * mispredicted about every other lookup (state.c has the measurements).
 */
static inline uint64_t shmrun_kv_key_word(const unsigned char *p, uint32_t n)
{
	uint64_t m, w4, w1;
	const unsigned char *q;
	uint32_t o;

	if (__builtin_expect(n == 0, 0))
		return 0;
	m = -(uint64_t)(n >= 4); /* all ones for n >= 4 */
	q = (const unsigned char *)(((uintptr_t)p & m) | ((uintptr_t)shmrun_kv_zeros & ~m));
	o = (n - 4) & (uint32_t)m; /* n - 4, or 0 */
	/* the overlap of the two loads holds the same bytes in both */
	w4 = shmrun_kv_load32(q) | shmrun_kv_load32(q + o) << (o * 8);
	w1 = (uint64_t)p[0] | (uint64_t)p[n >> 1] << ((n >> 1) * 8) |
	     (uint64_t)p[n - 1] << ((n - 1) * 8);
	return (w4 & m) | (w1 & ~m);
}

/*
 * shmrun_kv_key_tail() - bytes [@n - 8, @n) of @p (n >= 8) shifted so that
 * byte @from (n - 8 <= from < n) is the low byte and the bytes from n - from
 * up are zero: the stored word of a key that starts at @from. One load, inside
 * [p, p + n).
 */
static inline uint64_t shmrun_kv_key_tail(const unsigned char *p, uint32_t n, uint32_t from)
{
	return *(const shmrun_kv_u64u *)(p + n - 8) >> ((8 - (n - from)) * 8);
}

/* The stored key @s (8-aligned, zero-padded to 8) equals @p's @n bytes, n >= 8:
 * word by word, the last word read as shmrun_kv_key_tail(). */
static inline bool shmrun_kv_key_long_eq(const unsigned char *s, const unsigned char *p, uint32_t n)
{
	uint32_t i = 0;

	for (; i + 8 <= n; i += 8)
		if (*(const shmrun_kv_u64a *)(s + i) != *(const shmrun_kv_u64u *)(p + i))
			return false;
	return i == n || *(const shmrun_kv_u64a *)(s + i) == shmrun_kv_key_tail(p, n, i);
}

/*
 * shmrun_kv_get() - the value of @key (@key_len bytes, borrowed; only its own
 * bytes are read) in vnode @vnode, whose hash is @hash, or NULL. With @create,
 * a missing key is inserted (its bytes copied) with @value_bytes zero bytes.
 * @hash must be the XXH3-64 hash of the key (tables rehash with it when they
 * grow) and @vnode shmrun_placement_vnode_of_hash() of it.
 *
 * Return: pointer to the value (8-byte aligned, at one address until
 * shmrun_kv_free(): growth moves slots, never entries), NULL with *err = 0 if
 * absent and !@create, NULL with *err = -ENOMEM when creating runs out of
 * memory, or NULL with *err = -EINVAL if @value_bytes differs from the task's
 * first use or @vnode >= the store's vnodes.
 *
 * The hit path is inline and calls nothing. A key of up to 16 bytes is read
 * once, before the probe, into two words k0, k1 as state.c stores it
 * (zero-padded); a slot whose 16-bit tag differs is passed over without
 * touching its entry; a tag match compares the entry's [key_len][0] word with
 * @key_len, then two stored words with k0, k1 — for a key of up to 8 bytes the
 * first stored word twice, so the entry is never read past its key. A longer
 * key is compared word by word.
 */
static inline void *shmrun_kv_get(struct shmrun_kv *kv, uint32_t vnode, uint64_t hash,
				  const void *key, uint32_t key_len, uint32_t value_bytes,
				  bool create, int *err)
{
	const unsigned char *k = key;
	uint64_t tag = (hash & 0xffff) << SHMRUN_KV_TAG_SHIFT, i, k0, k1, second;
	struct shmrun_kv_table *t;

	if (__builtin_expect(value_bytes != kv->value_bytes || vnode >= kv->vnodes ||
				 !(t = kv->tables[vnode]),
			     0))
		return shmrun_kv_get_miss(kv, vnode, hash, key, key_len, value_bytes, create, err);
	if (__builtin_expect(key_len <= 8, 1)) {
		k0 = k1 = shmrun_kv_key_word(k, key_len);
		second = 0;
	} else if (key_len <= 16) {
		k0 = *(const shmrun_kv_u64u *)k;
		k1 = shmrun_kv_key_tail(k, key_len, 8);
		second = 8;
	} else {
		k0 = k1 = second = 0; /* compared word by word on a match */
	}
	for (i = (hash * SHMRUN_KV_PHI64) >> __builtin_clzll(t->mask);; i = (i + 1) & t->mask) {
		uint64_t s = t->slots[i];
		const unsigned char *e, *ek;

		if (!s)
			break;
		if ((s & ~SHMRUN_KV_ADDR_MASK) != tag)
			continue;
		e = (const unsigned char *)(uintptr_t)(s & SHMRUN_KV_ADDR_MASK);
		ek = e + kv->key_off;
		if (*(const shmrun_kv_u64a *)e != key_len)
			continue;
		if (key_len <= 16 ? *(const shmrun_kv_u64a *)ek == k0 &&
					*(const shmrun_kv_u64a *)(ek + second) == k1
				  : shmrun_kv_key_long_eq(ek, k, key_len)) {
			*err = 0;
			return (void *)(uintptr_t)(e + 8);
		}
	}
	if (!create) {
		*err = 0;
		return NULL;
	}
	return shmrun_kv_get_miss(kv, vnode, hash, key, key_len, value_bytes, create, err);
}

/*
 * shmrun_kv_foreach() - call @fn(@arg, key, key_len, value) for every entry,
 * vnode by vnode (within a vnode in table order). @fn must not insert.
 * Return: 0 after the last entry, or the first non-zero @fn returned (the walk
 * stops there).
 */
int shmrun_kv_foreach(struct shmrun_kv *kv,
		      int (*fn)(void *arg, const void *key, uint32_t key_len, void *value),
		      void *arg);

/*
 * shmrun_kv_delete() - remove @key (@key_len bytes, slot hash @hash) from
 * vnode @vnode: its slot is emptied by backward shifting (no tombstones, so
 * lookups stay as short as before the insert), its entry goes to its size
 * class's free list (or back to the allocator, for a large one). Pointers to
 * its value are invalid afterwards; every other value stays where it is.
 * Must not be called inside shmrun_kv_foreach()/shmrun_kv_foreach_in().
 * Return: 0; -ENOENT if absent (or @vnode out of range).
 */
int shmrun_kv_delete(struct shmrun_kv *kv, uint32_t vnode, uint64_t hash, const void *key,
		     uint32_t key_len);

/*
 * shmrun_kv_entry_key() - the stored key of the value @value (a pointer
 * shmrun_kv_get() returned for @kv) and its length in *@key_len.
 */
static inline const unsigned char *shmrun_kv_entry_key(const struct shmrun_kv *kv,
							const void *value, uint32_t *key_len)
{
	const unsigned char *e = (const unsigned char *)value - 8;

	*key_len = *(const uint32_t *)(const void *)e;
	return e + kv->key_off;
}

/* shmrun_kv_vnode_keys() - keys in vnode @vnode (0 for a vnode never used or out of range). */
uint64_t shmrun_kv_vnode_keys(const struct shmrun_kv *kv, uint32_t vnode);

/* shmrun_kv_foreach_in() - as shmrun_kv_foreach(), for vnode @vnode only (0 at once
 * for a vnode never used or out of range). */
int shmrun_kv_foreach_in(struct shmrun_kv *kv, uint32_t vnode,
			 int (*fn)(void *arg, const void *key, uint32_t key_len, void *value),
			 void *arg);

#endif /* SHMRUN_RT_STATE_H */
