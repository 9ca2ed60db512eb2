/*
 * shmrun/segment.h: the one shared-memory segment of a run.
 *
 * The launcher creates the segment before it forks the workers; the workers
 * inherit the mapping and attach to it. The segment holds a header (magic,
 * layout version, layout descriptor, creator pid, fingerprint slot, ready word),
 * a table of ring entries, and the rings themselves, each on its own cache line
 * boundary (page boundary, so a ring can be bound to its consumer's NUMA node):
 *
 *     +----------------------+ 0
 *     | segment header       |  struct shmrun_segment_header (docs/shm-layout.md)
 *     +----------------------+ header.ring_table_off
 *     | ring table           |  ring_count x struct shmrun_segment_ring_entry
 *     +----------------------+ page aligned
 *     | ring 0 | ring 1 | …  |  each shmrun_ring_memsize(capacity) bytes, page aligned
 *     +----------------------+ header.segment_bytes
 *
 * The header's ready word is stored last, with release; attach reads it with
 * acquire, so everything init wrote is visible to whoever sees ready.
 *
 * The segment never picks where the memory comes from beyond the default
 * shmrun_segment_create() (an anonymous memfd, mode 0600, that can never be
 * reused or left behind: it disappears with the last process that maps it).
 * shmrun_segment_init() lays it out in any memory a caller provides.
 */
#ifndef SHMRUN_SEGMENT_H
#define SHMRUN_SEGMENT_H

#include <stddef.h>
#include <stdint.h>

#include "shmrun/ring.h"

#ifdef __cplusplus
extern "C" {
#endif

/** "SHMRUNSG" as a little-endian 64-bit word. */
#define SHMRUN_SEGMENT_MAGIC 0x47534e55524d4853ull
/** Bumped whenever any shared layout (segment, ring table, ring, frame) changes. */
#define SHMRUN_SEGMENT_LAYOUT_VERSION 1u
/** Most rings one segment may hold. */
#define SHMRUN_SEGMENT_MAX_RINGS 65536u
/** Rings start on this boundary, bytes. */
#define SHMRUN_SEGMENT_RING_ALIGN 4096u

/** What a creator asks for, one entry per ring. */
struct shmrun_segment_ring_spec {
	uint64_t capacity; /**< data bytes, a valid ring capacity */
	uint32_t producer; /**< opaque label, e.g. the producing worker; stored, not interpreted */
	uint32_t consumer; /**< opaque label, e.g. the consuming worker */
};

/** A process's view of an attached segment. Private memory. */
struct shmrun_segment {
	void *base;     /**< first byte of the mapping */
	size_t len;     /**< bytes mapped */
	int fd;         /**< memfd from shmrun_segment_create(), -1 otherwise */
	int owns_mapping; /**< 1 if close() must unmap base (create), 0 if borrowed */
	uint32_t rings; /**< ring count, from the header */
	struct shmrun_segment_header *hdr;
	const struct shmrun_segment_ring_entry *table;
};

/**
 * shmrun_segment_memsize() - bytes a segment with these rings needs.
 * @rings: @n ring specs (may be NULL when @n is 0).
 * @n:     ring count, at most SHMRUN_SEGMENT_MAX_RINGS.
 *
 * Return: total bytes (a multiple of SHMRUN_SEGMENT_RING_ALIGN), or 0 if @n is too
 * large or a capacity is invalid.
 */
size_t shmrun_segment_memsize(const struct shmrun_segment_ring_spec *rings, uint32_t n);

/**
 * shmrun_segment_init() - lay out a segment in caller-provided memory and
 * publish it (ready word last, with release).
 * @mem:         at least shmrun_segment_memsize() bytes, page aligned, zero-filled
 *               or not; the caller keeps ownership.
 * @len:         bytes at @mem.
 * @rings, @n:   as for shmrun_segment_memsize().
 * @fingerprint: the run's fingerprint (opaque to shm/), stored in the header.
 *
 * Return: 0; -EINVAL for a bad spec or misaligned @mem; -ENOSPC if @len is too
 * small.
 */
int shmrun_segment_init(void *mem, size_t len, const struct shmrun_segment_ring_spec *rings,
			uint32_t n, uint64_t fingerprint);

/**
 * shmrun_segment_create() - create a fresh anonymous segment and lay it out.
 * @seg:        filled on success; release with shmrun_segment_close().
 * @rings, @n, @fingerprint: as for shmrun_segment_init().
 *
 * The memory is a new memfd (MFD_CLOEXEC, mode 0600), mapped MAP_SHARED: a
 * child forked afterwards shares it. Nothing is ever reused and nothing named
 * is left behind; the memory is freed when the last mapping goes.
 *
 * Return: 0; -EINVAL for a bad spec; -EMFILE/-ENFILE/-ENOMEM (memfd or mmap
 * failed); -ENOSPC if the size could not be reserved (ftruncate).
 */
int shmrun_segment_create(struct shmrun_segment *seg, const struct shmrun_segment_ring_spec *rings,
			  uint32_t n, uint64_t fingerprint);

/**
 * shmrun_segment_attach() - validate a mapped segment and fill @seg.
 * @seg:  filled on success; it borrows @base (shmrun_segment_close() will not
 *        unmap memory it did not map).
 * @base: the mapping.
 * @len:  bytes mapped.
 *
 * Validates the magic, layout version, layout descriptor (header size, ring
 * table entry size, ring header size, frame header size, cache line), that
 * segment_bytes fits @len, that the table and every ring lie inside the mapping,
 * aligned and not overlapping, and that each ring's own header matches its entry.
 *
 * Return: 0; -EAGAIN if the ready word is not set (init has not finished);
 * -EPROTO for a wrong magic, version or descriptor; -EINVAL for offsets or
 * sizes outside the mapping or misaligned.
 */
int shmrun_segment_attach(struct shmrun_segment *seg, void *base, size_t len);

/**
 * shmrun_segment_ring() - the memory of ring @i.
 * @seg: an attached or created segment.
 * @i:   ring index, below seg->rings.
 * @len: if not NULL, set to the ring's memory size in bytes.
 *
 * Return: the ring memory to pass to shmrun_ring_attach(), or NULL if @i is out
 * of range.
 */
void *shmrun_segment_ring(const struct shmrun_segment *seg, uint32_t i, size_t *len);

/**
 * shmrun_segment_ring_labels() - the producer and consumer labels of ring @i.
 * Return: 0; -EINVAL if @i is out of range.
 */
int shmrun_segment_ring_labels(const struct shmrun_segment *seg, uint32_t i, uint32_t *producer,
			       uint32_t *consumer);

/** shmrun_segment_fingerprint() - the fingerprint stored at init. */
uint64_t shmrun_segment_fingerprint(const struct shmrun_segment *seg);

/** shmrun_segment_creator() - pid of the process that laid the segment out. */
int32_t shmrun_segment_creator(const struct shmrun_segment *seg);

/**
 * shmrun_segment_close() - unmap (if this handle mapped it) and close the memfd.
 * Safe on a zeroed or already closed handle.
 */
void shmrun_segment_close(struct shmrun_segment *seg);

#ifdef __cplusplus
}
#endif
#endif /* SHMRUN_SEGMENT_H */
