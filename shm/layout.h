/*
 * shm/layout.h: the byte layouts that live in shared memory. Private to shm/
 * (and to the tests that corrupt them on purpose); docs/shm-layout.md is the
 * reference. Every struct here holds fixed-width integers and offsets, never
 * pointers or bool, and says who writes each field and how it is synchronised.
 */
#ifndef SHMRUN_SHM_LAYOUT_H
#define SHMRUN_SHM_LAYOUT_H

#include <assert.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>

#include "shmrun/ring.h"
#include "shmrun/segment.h"

/* "SHMRUNRG" as a little-endian 64-bit word. */
#define SHMRUN_RING_MAGIC 0x47524e55524d4853ull
#define SHMRUN_RING_LAYOUT_VERSION 2u

/*
 * Version 2: the consumer polls each frame's commit word (SHMRUN_FRAME_COMMIT
 * bytes in front of struct shmrun_frame) instead of the shared tail; a skip
 * marker is a commit word with SHMRUN_RING_COMMIT_SKIP (ring.h, ring.c).
 */

/* Version 1's skip kind. No frame carries it any more; tests assert callers
 * never see it. */
#define SHMRUN_FRAME_SKIP 0x7fffu

/*
 * Ring header: four cache lines, then the data area.
 *
 * line 0  immutable after shmrun_ring_init(): read by both, written by the creator
 * line 1  producer-owned: tail, producer pid
 * line 2  consumer-owned: head, consumer pid
 * line 3  doorbells (struct shmrun_bell): written only by a side about to sleep
 *         and by the side waking it
 */
struct shmrun_ring_shared {
	/* line 0: written once by init, before the segment's ready word */
	alignas(SHMRUN_CACHELINE) uint64_t magic;
	uint32_t version;
	uint32_t header_bytes; /* sizeof(struct shmrun_ring_shared) */
	uint64_t capacity;     /* data bytes, power of two */

	/* line 1: written by the producer only; tail is read by attach and
	 * diagnostics, never by the consumer's path (it polls commit words) */
	alignas(SHMRUN_CACHELINE) _Atomic uint64_t tail; /* end of published frames */
	_Atomic int32_t producer_pid;                     /* 0 until a producer attaches */

	/* line 2: written by the consumer only */
	alignas(SHMRUN_CACHELINE) _Atomic uint64_t head; /* end of released bytes */
	_Atomic int32_t consumer_pid;                     /* 0 until a consumer attaches */

	/* line 3: the futex doorbells (see ring.c, "Sleeping") */
	alignas(SHMRUN_CACHELINE) struct shmrun_bell data_bell; /* consumer sleeps for data */
	struct shmrun_bell room_bell;                            /* producer sleeps for room */
};

static_assert(sizeof(struct shmrun_ring_shared) == 4 * SHMRUN_CACHELINE, "ring header layout");
static_assert(offsetof(struct shmrun_ring_shared, tail) == 1 * SHMRUN_CACHELINE, "tail line");
static_assert(offsetof(struct shmrun_ring_shared, head) == 2 * SHMRUN_CACHELINE, "head line");
static_assert(offsetof(struct shmrun_ring_shared, data_bell) == 3 * SHMRUN_CACHELINE,
	      "doorbell line");
static_assert(sizeof(struct shmrun_frame) == SHMRUN_FRAME_HEADER, "frame header layout");
static_assert(SHMRUN_FRAME_COMMIT == sizeof(uint64_t), "commit word layout");
static_assert(sizeof(struct shmrun_bell) == 8, "bell layout");
static_assert(sizeof(_Atomic uint64_t) == 8 && sizeof(_Atomic uint32_t) == 4,
	      "lock-free atomics of plain size");

/* One entry of the segment's ring table. Written by init only. */
struct shmrun_segment_ring_entry {
	uint64_t offset;   /* from the segment base, SHMRUN_SEGMENT_RING_ALIGN aligned */
	uint64_t bytes;    /* shmrun_ring_memsize(capacity) */
	uint64_t capacity; /* data bytes */
	uint32_t producer; /* label */
	uint32_t consumer; /* label */
};
static_assert(sizeof(struct shmrun_segment_ring_entry) == 32, "ring table entry layout");

/*
 * Segment header, at offset 0. Everything but fingerprint and ready is written
 * once by init; ready is stored last with release (pairs with the acquire in
 * shmrun_segment_attach()).
 */
struct shmrun_segment_header {
	uint64_t magic;   /* SHMRUN_SEGMENT_MAGIC */
	uint32_t version; /* SHMRUN_SEGMENT_LAYOUT_VERSION */
	/* layout descriptor: the sizes this build was compiled with */
	uint32_t header_bytes;     /* sizeof(struct shmrun_segment_header) */
	uint32_t cacheline;        /* SHMRUN_CACHELINE */
	uint32_t ring_entry_bytes; /* sizeof(struct shmrun_segment_ring_entry) */
	uint32_t ring_header_bytes; /* sizeof(struct shmrun_ring_shared) */
	uint32_t frame_header_bytes; /* SHMRUN_FRAME_HEADER */
	uint64_t segment_bytes;    /* total laid-out size */
	int32_t creator_pid;       /* pid of the process that ran init */
	uint32_t ring_count;       /* entries in the ring table */
	uint64_t ring_table_off;   /* from the base */
	_Atomic uint64_t fingerprint; /* the run's fingerprint (opaque to shm/) */
	_Atomic uint32_t ready;       /* 1 once init is complete; stored last, release */
	uint32_t reserved;
};
static_assert(sizeof(struct shmrun_segment_header) == 72, "segment header layout");

#endif /* SHMRUN_SHM_LAYOUT_H */
