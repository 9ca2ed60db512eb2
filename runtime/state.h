/*
 * runtime/state.h: key-bound state, one hash table per vnode (private).
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

/* The allocator every worker's state uses: a jemalloc arena of its own when built with jemalloc. */
int shmrun_state_arena_init(void);

int shmrun_kv_init(struct shmrun_kv *kv, uint32_t vnodes);
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

/* shmrun_kv_foreach() - every entry, vnode by vnode; stops at the first non-zero return. */
int shmrun_kv_foreach(struct shmrun_kv *kv,
		      int (*fn)(void *arg, const void *key, uint32_t key_len, void *value),
		      void *arg);

/* shmrun_kv_vnode_keys() - keys in vnode @vnode. */
uint64_t shmrun_kv_vnode_keys(const struct shmrun_kv *kv, uint32_t vnode);

/* shmrun_kv_foreach_in() - as shmrun_kv_foreach(), for one vnode only. */
int shmrun_kv_foreach_in(struct shmrun_kv *kv, uint32_t vnode,
			 int (*fn)(void *arg, const void *key, uint32_t key_len, void *value),
			 void *arg);

#endif /* SHMRUN_RT_STATE_H */
