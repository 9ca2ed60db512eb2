/*
 * shm/segment.c: the one shared-memory segment of a run.
 *
 * What it is for. The launcher lays out, in one mapping, every ring the job's
 * plan needs, then forks the workers, which inherit the mapping. One segment
 * per run: a restart creates a new one, never reusing the old (a crashed
 * worker may have left a ring half-written).
 *
 * Layout (offsets from the base; docs/shm-layout.md has the byte tables):
 *
 *     0                 struct shmrun_segment_header   (72 bytes)
 *     128               ring table: ring_count x 32-byte entries
 *     page aligned      ring 0 (4 cache lines of header + capacity bytes)
 *     page aligned      ring 1 ...
 *     segment_bytes     end
 *
 * Invariants.
 *   - Everything but the ready word and the rings' indices is written once,
 *     by init, before ready is stored (release). Attach loads ready with
 *     acquire and validates every field before trusting any offset.
 *   - Rings start on page boundaries so the runtime can bind each one to its
 *     consumer's NUMA node with mbind() without touching a neighbour.
 *   - Shared structs hold offsets, never pointers: the mapping may sit at a
 *     different address in each process (it does not under fork, but a later
 *     attach-by-fd would).
 *
 * Rejected designs.
 *   - shm_open() with a name: a crashed launcher leaves the name behind in
 *     /dev/shm and a later run could attach to stale rings. An anonymous memfd
 *     has no name to leak and is freed with its last mapping.
 *   - One mapping per ring: thousands of rings would mean thousands of fds and
 *     VMAs per worker.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "layout.h"

#define TABLE_OFF 128u
static_assert(sizeof(struct shmrun_segment_header) <= TABLE_OFF, "header fits before the table");

static uint64_t align_up(uint64_t x, uint64_t a)
{
	return (x + a - 1) & ~(a - 1);
}

static uint64_t rings_start(uint32_t n)
{
	return align_up(TABLE_OFF + (uint64_t)n * sizeof(struct shmrun_segment_ring_entry),
			SHMRUN_SEGMENT_RING_ALIGN);
}

size_t shmrun_segment_memsize(const struct shmrun_segment_ring_spec *rings, uint32_t n)
{
	uint64_t off = rings_start(n);

	if (n > SHMRUN_SEGMENT_MAX_RINGS || (n && !rings))
		return 0;
	for (uint32_t i = 0; i < n; i++) {
		size_t bytes = shmrun_ring_memsize(rings[i].capacity);

		if (!bytes)
			return 0;
		off = align_up(off + bytes, SHMRUN_SEGMENT_RING_ALIGN);
	}
	return off;
}

int shmrun_segment_init(void *mem, size_t len, const struct shmrun_segment_ring_spec *rings,
			uint32_t n, uint64_t fingerprint)
{
	struct shmrun_segment_header *hdr = mem;
	struct shmrun_segment_ring_entry *table;
	size_t total = shmrun_segment_memsize(rings, n);
	uint64_t off;
	int err;

	if (!total || ((uintptr_t)mem % SHMRUN_SEGMENT_RING_ALIGN) != 0)
		return -EINVAL;
	if (len < total)
		return -ENOSPC;
	memset(mem, 0, rings_start(n));
	table = (struct shmrun_segment_ring_entry *)((unsigned char *)mem + TABLE_OFF);
	off = rings_start(n);
	for (uint32_t i = 0; i < n; i++) {
		table[i].offset = off;
		table[i].bytes = shmrun_ring_memsize(rings[i].capacity);
		table[i].capacity = rings[i].capacity;
		table[i].producer = rings[i].producer;
		table[i].consumer = rings[i].consumer;
		err = shmrun_ring_init((unsigned char *)mem + off, table[i].bytes, rings[i].capacity);
		if (err)
			return err;
		off = align_up(off + table[i].bytes, SHMRUN_SEGMENT_RING_ALIGN);
	}
	hdr->magic = SHMRUN_SEGMENT_MAGIC;
	hdr->version = SHMRUN_SEGMENT_LAYOUT_VERSION;
	hdr->header_bytes = sizeof(*hdr);
	hdr->cacheline = SHMRUN_CACHELINE;
	hdr->ring_entry_bytes = sizeof(struct shmrun_segment_ring_entry);
	hdr->ring_header_bytes = sizeof(struct shmrun_ring_shared);
	hdr->frame_header_bytes = SHMRUN_FRAME_HEADER;
	hdr->segment_bytes = total;
	hdr->creator_pid = (int32_t)getpid();
	hdr->ring_count = n;
	hdr->ring_table_off = TABLE_OFF;
	atomic_store_explicit(&hdr->fingerprint, fingerprint, memory_order_relaxed);
	/* release: pairs with the acquire load of ready in shmrun_segment_attach();
	 * publishes every byte init wrote above, the rings included. */
	atomic_store_explicit(&hdr->ready, 1, memory_order_release);
	return 0;
}

int shmrun_segment_create(struct shmrun_segment *seg, const struct shmrun_segment_ring_spec *rings,
			  uint32_t n, uint64_t fingerprint)
{
	size_t total = shmrun_segment_memsize(rings, n);
	void *base;
	int fd, err;

	memset(seg, 0, sizeof(*seg));
	seg->fd = -1;
	if (!total)
		return -EINVAL;
	fd = memfd_create("shmrun", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fchmod(fd, 0600) < 0) {
		err = -errno;
		goto err_close;
	}
	if (ftruncate(fd, (off_t)total) < 0) {
		err = errno == EFBIG || errno == EINVAL ? -ENOSPC : -errno;
		goto err_close;
	}
	base = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		err = -errno;
		goto err_close;
	}
	err = shmrun_segment_init(base, total, rings, n, fingerprint);
	if (err)
		goto err_unmap;
	err = shmrun_segment_attach(seg, base, total);
	if (err)
		goto err_unmap;
	seg->fd = fd;
	seg->len = total;
	seg->owns_mapping = 1;
	return 0;

err_unmap:
	munmap(base, total);
err_close:
	close(fd);
	memset(seg, 0, sizeof(*seg));
	seg->fd = -1;
	return err;
}

int shmrun_segment_attach(struct shmrun_segment *seg, void *base, size_t len)
{
	struct shmrun_segment_header *hdr = base;
	const struct shmrun_segment_ring_entry *table;
	uint64_t end_prev;

	memset(seg, 0, sizeof(*seg));
	seg->fd = -1;
	if (!base || ((uintptr_t)base % SHMRUN_SEGMENT_RING_ALIGN) != 0 || len < sizeof(*hdr))
		return -EINVAL;
	/* acquire: pairs with the release store of ready in shmrun_segment_init(). */
	if (!atomic_load_explicit(&hdr->ready, memory_order_acquire))
		return -EAGAIN;
	if (hdr->magic != SHMRUN_SEGMENT_MAGIC || hdr->version != SHMRUN_SEGMENT_LAYOUT_VERSION)
		return -EPROTO;
	if (hdr->header_bytes != sizeof(*hdr) || hdr->cacheline != SHMRUN_CACHELINE ||
	    hdr->ring_entry_bytes != sizeof(struct shmrun_segment_ring_entry) ||
	    hdr->ring_header_bytes != sizeof(struct shmrun_ring_shared) ||
	    hdr->frame_header_bytes != SHMRUN_FRAME_HEADER)
		return -EPROTO;
	if (hdr->segment_bytes > len || hdr->ring_count > SHMRUN_SEGMENT_MAX_RINGS ||
	    hdr->ring_table_off < sizeof(*hdr) ||
	    hdr->ring_table_off % sizeof(uint64_t) != 0 ||
	    hdr->ring_table_off > hdr->segment_bytes ||
	    (uint64_t)hdr->ring_count * sizeof(*table) > hdr->segment_bytes - hdr->ring_table_off)
		return -EINVAL;
	table = (const struct shmrun_segment_ring_entry *)((unsigned char *)base +
							    hdr->ring_table_off);
	end_prev = hdr->ring_table_off + (uint64_t)hdr->ring_count * sizeof(*table);
	for (uint32_t i = 0; i < hdr->ring_count; i++) {
		const struct shmrun_segment_ring_entry *e = &table[i];
		const struct shmrun_ring_shared *sh;

		/* bytes == 0 is an invalid capacity (memsize() of one is 0 too);
		 * without it a ring header could be read past the mapping. */
		if (e->offset % SHMRUN_SEGMENT_RING_ALIGN != 0 || e->offset < end_prev ||
		    e->offset > hdr->segment_bytes || e->bytes == 0 ||
		    e->bytes != shmrun_ring_memsize(e->capacity) ||
		    e->bytes > hdr->segment_bytes - e->offset)
			return -EINVAL;
		sh = (const struct shmrun_ring_shared *)((unsigned char *)base + e->offset);
		if (sh->magic != SHMRUN_RING_MAGIC || sh->version != SHMRUN_RING_LAYOUT_VERSION ||
		    sh->header_bytes != sizeof(*sh))
			return -EPROTO;
		if (sh->capacity != e->capacity)
			return -EINVAL;
		end_prev = e->offset + e->bytes;
	}
	seg->base = base;
	seg->len = len;
	seg->rings = hdr->ring_count;
	seg->hdr = hdr;
	seg->table = table;
	return 0;
}

void *shmrun_segment_ring(const struct shmrun_segment *seg, uint32_t i, size_t *len)
{
	if (!seg->hdr || i >= seg->rings)
		return NULL;
	if (len)
		*len = seg->table[i].bytes;
	return (unsigned char *)seg->base + seg->table[i].offset;
}

int shmrun_segment_ring_labels(const struct shmrun_segment *seg, uint32_t i, uint32_t *producer,
			       uint32_t *consumer)
{
	if (!seg->hdr || i >= seg->rings)
		return -EINVAL;
	if (producer)
		*producer = seg->table[i].producer;
	if (consumer)
		*consumer = seg->table[i].consumer;
	return 0;
}

uint64_t shmrun_segment_fingerprint(const struct shmrun_segment *seg)
{
	return atomic_load_explicit(&seg->hdr->fingerprint, memory_order_relaxed);
}

int32_t shmrun_segment_creator(const struct shmrun_segment *seg)
{
	return seg->hdr->creator_pid;
}

void shmrun_segment_close(struct shmrun_segment *seg)
{
	if (seg->owns_mapping) {
		munmap(seg->base, seg->len);
		close(seg->fd);
	}
	memset(seg, 0, sizeof(*seg));
	seg->fd = -1;
}
