/*
 * runtime/state.h: key-bound state, one hash table per vnode (private to
 * runtime/; state.c has the layout and the designs rejected). A task owns one
 * struct shmrun_kv; the operator API reaches it through shmrun_keyed_state()
 * (task.c), checkpoints walk it vnode by vnode (ckpt/state_file.c).
 *
 * Invariants: the vnode of a key is shmrun_placement_vnode_of_hash() of its
 * XXH3-64 hash, and every caller passes that same hash (tables rehash with it
 * when they grow); a task's value size is fixed by its first insert; values
 * never move and are never freed one by one until shmrun_kv_free().
 */
#ifndef SHMRUN_RT_STATE_H
#define SHMRUN_RT_STATE_H

#include <stdbool.h>
#include <stdint.h>

struct shmrun_kv_table; /* one vnode's table */

/* All key-bound state of one task: a table per vnode, created on first use. */
struct shmrun_kv {
	uint32_t vnodes;                  /* V */
	uint32_t value_bytes;             /* fixed per task; 0 until first use */
	struct shmrun_kv_table **tables;  /* V entries, NULL until used */
	uint64_t keys;                    /* distinct keys in all tables */
	uint64_t bytes;                   /* bytes in use: tables, slots, entries (keys included) */
	uint64_t key_bytes;               /* sum of the keys' lengths */
	struct kv_chunk *chunks;          /* bump-allocation chunks for entries */
	unsigned char *bump, *bump_end;
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
 * shmrun_kv_get() - the value of @key in vnode @vnode (hash @hash), or NULL.
 * With @create, a missing key is inserted with @value_bytes zero bytes.
 * Return: pointer to the value (8-byte aligned, stable until the kv is freed),
 * NULL if absent (or out of memory when creating: *err = -ENOMEM), or NULL with
 * *err = -EINVAL if @value_bytes differs from the task's first use.
 */
void *shmrun_kv_get(struct shmrun_kv *kv, uint32_t vnode, uint64_t hash, const void *key,
		    uint32_t key_len, uint32_t value_bytes, bool create, int *err);

/*
 * shmrun_kv_foreach() - call @fn(@arg, key, key_len, value) for every entry,
 * vnode by vnode (within a vnode in table order). @fn must not insert.
 * Return: 0 after the last entry, or the first non-zero @fn returned (the walk
 * stops there).
 */
int shmrun_kv_foreach(struct shmrun_kv *kv,
		      int (*fn)(void *arg, const void *key, uint32_t key_len, void *value),
		      void *arg);

/* shmrun_kv_vnode_keys() - keys in vnode @vnode (0 for a vnode never used or out of range). */
uint64_t shmrun_kv_vnode_keys(const struct shmrun_kv *kv, uint32_t vnode);

/* shmrun_kv_foreach_in() - as shmrun_kv_foreach(), for vnode @vnode only (0 at once
 * for a vnode never used or out of range). */
int shmrun_kv_foreach_in(struct shmrun_kv *kv, uint32_t vnode,
			 int (*fn)(void *arg, const void *key, uint32_t key_len, void *value),
			 void *arg);

#endif /* SHMRUN_RT_STATE_H */
