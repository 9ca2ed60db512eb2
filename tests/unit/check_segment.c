/*
 * tests/unit/check_segment.c: the shared-memory segment of shm/segment.c.
 *
 * Covers memsize, init and attach round trips (several rings of different
 * capacities, labels, fingerprint, creator pid, rings usable and independent),
 * init argument errors, attach validation of every header field, of the ring
 * table (count, offset, every entry's offset, size and capacity) and of each
 * ring's own header, the ready word, and the memfd path of
 * shmrun_segment_create(): mode 0600, close-on-exec, shared with a forked child,
 * closed and unmapped by shmrun_segment_close(), nothing created in /dev/shm.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "layout.h"
#include "shmrun/ring.h"
#include "shmrun/segment.h"

#define PAGE SHMRUN_SEGMENT_RING_ALIGN

static const struct shmrun_segment_ring_spec specs3[] = {
    {.capacity = 4096, .producer = 1, .consumer = 2},
    {.capacity = 65536, .producer = 7, .consumer = 0xfffffffeu},
    {.capacity = 8192, .producer = 0, .consumer = 3},
};
#define FP 0x0123456789abcdefull

static uint64_t align_page(uint64_t x)
{
	return (x + PAGE - 1) / PAGE * PAGE;
}

/* memsize as the layout defines it: header + table, then page-aligned rings. */
static uint64_t expected_memsize(const struct shmrun_segment_ring_spec *rings, uint32_t n)
{
	uint64_t off = align_page(128 + 32ull * n);

	for (uint32_t i = 0; i < n; i++)
		off = align_page(off + sizeof(struct shmrun_ring_shared) + rings[i].capacity);
	return off;
}

/* An anonymous mapping with a PROT_NONE guard page after @len bytes. */
struct region {
	unsigned char *base;
	size_t len;
};

static void region_map(struct region *g, size_t len)
{
	void *p =
	    mmap(NULL, len + PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ck_assert_ptr_ne(p, MAP_FAILED);
	ck_assert_int_eq(mprotect((unsigned char *)p + len, PAGE, PROT_NONE), 0);
	g->base = p;
	g->len = len;
}

static void region_unmap(struct region *g)
{
	ck_assert_int_eq(munmap(g->base, g->len + PAGE), 0);
}

static struct shmrun_segment_header *hdr_of(struct region *g)
{
	return (struct shmrun_segment_header *)g->base;
}

static struct shmrun_segment_ring_entry *table_of(struct region *g)
{
	return (struct shmrun_segment_ring_entry *)(g->base + hdr_of(g)->ring_table_off);
}

/* A laid-out 3-ring segment, exactly as big as it needs to be. */
static void region_init3(struct region *g)
{
	size_t len = shmrun_segment_memsize(specs3, 3);

	ck_assert_uint_ne(len, 0);
	region_map(g, len);
	ck_assert_int_eq(shmrun_segment_init(g->base, g->len, specs3, 3, FP), 0);
}

/* ---- memsize ----------------------------------------------------------- */

START_TEST(test_memsize)
{
	struct shmrun_segment_ring_spec many[300],
	    bad[2] = {{.capacity = 4096}, {.capacity = 5000}};

	ck_assert_uint_eq(shmrun_segment_memsize(NULL, 0), PAGE);
	ck_assert_uint_eq(shmrun_segment_memsize(specs3, 3), expected_memsize(specs3, 3));
	/* 4096 + 256 rounds up to two pages, 65536 + 256 to 17, 8192 + 256 to 3. */
	ck_assert_uint_eq(shmrun_segment_memsize(specs3, 3), PAGE * (1 + 2 + 17 + 3));
	for (unsigned i = 0; i < 300; i++)
		many[i] = (struct shmrun_segment_ring_spec){.capacity = 4096u << (i % 4)};
	/* 300 entries: the table spans three pages. */
	ck_assert_uint_eq(shmrun_segment_memsize(many, 300), expected_memsize(many, 300));
	ck_assert_uint_eq(shmrun_segment_memsize(bad, 1), 3 * PAGE);
	ck_assert_uint_eq(shmrun_segment_memsize(bad, 2), 0);
	ck_assert_uint_eq(shmrun_segment_memsize(NULL, 1), 0);
	ck_assert_uint_eq(shmrun_segment_memsize(specs3, SHMRUN_SEGMENT_MAX_RINGS + 1), 0);
	ck_assert_uint_eq(shmrun_segment_memsize(specs3, UINT32_MAX), 0);
}
END_TEST

/* ---- init / attach round trip -------------------------------------------- */

/* Check every ring of @seg against @specs: placement, labels, usability. */
static void check_rings(const struct shmrun_segment *seg,
			const struct shmrun_segment_ring_spec *specs, uint32_t n)
{
	uint64_t end_prev = 128 + 32ull * n;
	uint32_t prod, cons;
	size_t len;

	ck_assert_uint_eq(seg->rings, n);
	for (uint32_t i = 0; i < n; i++) {
		unsigned char *mem = shmrun_segment_ring(seg, i, &len);
		uint64_t off = (uint64_t)(mem - (unsigned char *)seg->base);

		ck_assert_ptr_nonnull(mem);
		ck_assert_uint_eq(len, shmrun_ring_memsize(specs[i].capacity));
		ck_assert_uint_eq(off % PAGE, 0);
		ck_assert_uint_ge(off, end_prev);
		ck_assert_uint_le(off + len, seg->len);
		end_prev = off + len;
		ck_assert_int_eq(shmrun_segment_ring_labels(seg, i, &prod, &cons), 0);
		ck_assert_uint_eq(prod, specs[i].producer);
		ck_assert_uint_eq(cons, specs[i].consumer);
		ck_assert_int_eq(shmrun_segment_ring_labels(seg, i, NULL, NULL), 0);
		ck_assert_ptr_eq(shmrun_segment_ring(seg, i, NULL), mem);
	}
	ck_assert_ptr_null(shmrun_segment_ring(seg, n, &len));
	ck_assert_ptr_null(shmrun_segment_ring(seg, UINT32_MAX, NULL));
	ck_assert_int_eq(shmrun_segment_ring_labels(seg, n, &prod, &cons), -EINVAL);

	/* Every ring works, and they are independent: write a distinct frame
	 * into each, then read each back. */
	for (uint32_t i = 0; i < n; i++) {
		struct shmrun_ring p;
		unsigned char *mem = shmrun_segment_ring(seg, i, &len);
		uint32_t word = 0xa0000000u + i;

		ck_assert_int_eq(shmrun_ring_attach(&p, mem, len, SHMRUN_RING_PRODUCER), 0);
		ck_assert_uint_eq(shmrun_ring_max_payload(&p), specs[i].capacity / 2 - 16);
		ck_assert_int_eq(shmrun_ring_write(&p, SHMRUN_FRAME_DATA, i, i + 1, &word, 4), 0);
		shmrun_ring_detach(&p);
	}
	for (uint32_t i = 0; i < n; i++) {
		const struct shmrun_frame *f;
		struct shmrun_ring c;
		unsigned char *mem = shmrun_segment_ring(seg, i, &len);
		uint32_t word;

		ck_assert_int_eq(shmrun_ring_attach(&c, mem, len, SHMRUN_RING_CONSUMER), 0);
		ck_assert_int_eq(shmrun_ring_peek(&c, &f), 0);
		ck_assert_uint_eq(f->src_task, i);
		ck_assert_uint_eq(f->dst_task, i + 1);
		ck_assert_uint_eq(f->len, 4);
		memcpy(&word, f->payload, 4);
		ck_assert_uint_eq(word, 0xa0000000u + i);
		shmrun_ring_release(&c, f);
		ck_assert_int_eq(shmrun_ring_peek(&c, &f), -EAGAIN);
		shmrun_ring_detach(&c);
	}
}

START_TEST(test_round_trip)
{
	struct shmrun_segment seg;
	struct region g;

	region_init3(&g);
	ck_assert_int_eq(shmrun_segment_attach(&seg, g.base, g.len), 0);
	ck_assert_ptr_eq(seg.base, g.base);
	ck_assert_uint_eq(seg.len, g.len);
	ck_assert_int_eq(seg.fd, -1);
	ck_assert_int_eq(seg.owns_mapping, 0);
	ck_assert_uint_eq(shmrun_segment_fingerprint(&seg), FP);
	ck_assert_int_eq(shmrun_segment_creator(&seg), getpid());
	ck_assert_uint_eq(hdr_of(&g)->segment_bytes, g.len);
	ck_assert_uint_eq(atomic_load(&hdr_of(&g)->ready), 1);
	check_rings(&seg, specs3, 3);
	/* close on a borrowed mapping leaves the memory alone */
	shmrun_segment_close(&seg);
	ck_assert_int_eq(seg.fd, -1);
	ck_assert_ptr_null(seg.base);
	ck_assert_uint_eq(hdr_of(&g)->magic, SHMRUN_SEGMENT_MAGIC);
	shmrun_segment_close(&seg);
	/* attach again: still valid after use */
	ck_assert_int_eq(shmrun_segment_attach(&seg, g.base, g.len), 0);
	/* a larger mapping than the segment is fine */
	ck_assert_int_eq(shmrun_segment_attach(&seg, g.base, g.len + PAGE - 1), 0);
	region_unmap(&g);
}
END_TEST

START_TEST(test_round_trip_many)
{
	/* 300 rings of four capacities: the ring table spans several pages. */
	struct shmrun_segment_ring_spec specs[300];
	struct shmrun_segment seg;
	struct region g;
	size_t len;

	for (uint32_t i = 0; i < 300; i++)
		specs[i] = (struct shmrun_segment_ring_spec){4096u << (i % 4), i, 1000 + i};
	len = shmrun_segment_memsize(specs, 300);
	ck_assert_uint_eq(len, expected_memsize(specs, 300));
	region_map(&g, len);
	/* init does not need zeroed memory */
	memset(g.base, 0xa5, len);
	ck_assert_int_eq(shmrun_segment_init(g.base, len, specs, 300, 0), 0);
	ck_assert_int_eq(shmrun_segment_attach(&seg, g.base, len), 0);
	ck_assert_uint_eq(shmrun_segment_fingerprint(&seg), 0);
	ck_assert_uint_eq(hdr_of(&g)->reserved, 0);
	check_rings(&seg, specs, 300);
	region_unmap(&g);
}
END_TEST

START_TEST(test_round_trip_empty)
{
	struct shmrun_segment seg;
	struct region g;

	region_map(&g, PAGE);
	ck_assert_int_eq(shmrun_segment_init(g.base, PAGE, NULL, 0, 42), 0);
	ck_assert_int_eq(shmrun_segment_attach(&seg, g.base, PAGE), 0);
	ck_assert_uint_eq(seg.rings, 0);
	ck_assert_uint_eq(shmrun_segment_fingerprint(&seg), 42);
	ck_assert_ptr_null(shmrun_segment_ring(&seg, 0, NULL));
	region_unmap(&g);
}
END_TEST

START_TEST(test_init_errors)
{
	struct shmrun_segment_ring_spec bad = {.capacity = 3000};
	size_t len = shmrun_segment_memsize(specs3, 3);
	struct region g;

	region_map(&g, len + PAGE);
	ck_assert_int_eq(shmrun_segment_init(g.base + 64, len, specs3, 3, FP), -EINVAL);
	ck_assert_int_eq(shmrun_segment_init(g.base + 2048, len, specs3, 3, FP), -EINVAL);
	ck_assert_int_eq(shmrun_segment_init(g.base, len, &bad, 1, FP), -EINVAL);
	ck_assert_int_eq(shmrun_segment_init(g.base, len, NULL, 3, FP), -EINVAL);
	ck_assert_int_eq(shmrun_segment_init(g.base, len, specs3, SHMRUN_SEGMENT_MAX_RINGS + 1, FP),
			 -EINVAL);
	ck_assert_int_eq(shmrun_segment_init(g.base, len - 1, specs3, 3, FP), -ENOSPC);
	ck_assert_int_eq(shmrun_segment_init(g.base, PAGE, specs3, 3, FP), -ENOSPC);
	/* nothing was published by the failures */
	ck_assert_uint_eq(atomic_load(&hdr_of(&g)->ready), 0);
	ck_assert_int_eq(shmrun_segment_init(g.base, len + PAGE, specs3, 3, FP), 0);
	ck_assert_uint_eq(hdr_of(&g)->segment_bytes, len);
	region_unmap(&g);
}
END_TEST

/* ---- attach validation ---------------------------------------------------- */

struct corrupt {
	const char *what;
	void (*fn)(struct region *g);
	int want;
};

static struct shmrun_ring_shared *ring_sh(struct region *g, unsigned i)
{
	return (struct shmrun_ring_shared *)(g->base + table_of(g)[i].offset);
}

static void c_none(struct region *g)
{
	(void)g;
}

static void c_magic(struct region *g)
{
	hdr_of(g)->magic ^= 1ull << 40;
}

static void c_magic_ring(struct region *g)
{
	hdr_of(g)->magic = SHMRUN_RING_MAGIC;
}

static void c_version(struct region *g)
{
	hdr_of(g)->version = SHMRUN_SEGMENT_LAYOUT_VERSION + 1;
}

static void c_version0(struct region *g)
{
	hdr_of(g)->version = 0;
}

static void c_header_bytes(struct region *g)
{
	hdr_of(g)->header_bytes = sizeof(struct shmrun_segment_header) + 8;
}

static void c_cacheline(struct region *g)
{
	hdr_of(g)->cacheline = 128;
}

static void c_ring_entry_bytes(struct region *g)
{
	hdr_of(g)->ring_entry_bytes = 40;
}

static void c_ring_header_bytes(struct region *g)
{
	hdr_of(g)->ring_header_bytes = 3 * SHMRUN_CACHELINE;
}

static void c_frame_header_bytes(struct region *g)
{
	hdr_of(g)->frame_header_bytes = 8;
}

static void c_segment_bytes(struct region *g)
{
	hdr_of(g)->segment_bytes = g->len + PAGE;
}

static void c_segment_bytes_plus1(struct region *g)
{
	hdr_of(g)->segment_bytes = g->len + 1;
}

static void c_segment_bytes_tiny(struct region *g)
{
	hdr_of(g)->segment_bytes = 64;
}

static void c_table_off_past_end(struct region *g)
{
	hdr_of(g)->ring_table_off = g->len + 128;
}

static void c_table_off_huge(struct region *g)
{
	hdr_of(g)->ring_table_off = UINT64_MAX - 7;
}

static void c_table_off_in_header(struct region *g)
{
	hdr_of(g)->ring_table_off = 64;
}

static void c_table_off_misaligned(struct region *g)
{
	hdr_of(g)->ring_table_off = 132;
}

static void c_table_runs_past_end(struct region *g)
{
	/* 3 entries starting 64 bytes before the end */
	hdr_of(g)->ring_table_off = g->len - 64;
}

static void c_ring_count_max(struct region *g)
{
	hdr_of(g)->ring_count = SHMRUN_SEGMENT_MAX_RINGS + 1;
}

static void c_ring_count_huge(struct region *g)
{
	hdr_of(g)->ring_count = UINT32_MAX;
}

static void c_ring_count_table_too_big(struct region *g)
{
	/* fits the limit, but the table would run past the segment */
	hdr_of(g)->ring_count = (uint32_t)(g->len / 32);
}

static void c_ring_count_plus1(struct region *g)
{
	/* the next (zeroed) entry puts a ring at offset 0, over the header */
	hdr_of(g)->ring_count = 4;
}

static void c_entry_offset_past_end(struct region *g)
{
	table_of(g)[2].offset = g->len;
}

static void c_entry_offset_far(struct region *g)
{
	table_of(g)[2].offset = g->len + 16 * PAGE;
}

static void c_entry_offset_huge(struct region *g)
{
	table_of(g)[1].offset = UINT64_MAX & ~(uint64_t)(PAGE - 1);
}

static void c_entry_offset_misaligned(struct region *g)
{
	table_of(g)[1].offset += SHMRUN_CACHELINE;
}

static void c_entry_offset_misaligned8(struct region *g)
{
	table_of(g)[0].offset += 8;
}

static void c_entry_overlaps_previous(struct region *g)
{
	/* ring 1 moved one page down, into ring 0 (which is 4352 bytes) */
	table_of(g)[1].offset = table_of(g)[0].offset + PAGE;
}

static void c_entry_overlaps_table(struct region *g)
{
	table_of(g)[0].offset = 0;
}

static void c_entries_swapped(struct region *g)
{
	/* each ring in bounds, but out of order: ring 1 before ring 0 */
	struct shmrun_segment_ring_entry e = table_of(g)[0];

	table_of(g)[0] = table_of(g)[1];
	table_of(g)[1] = e;
}

static void c_entry_same_as_previous(struct region *g)
{
	table_of(g)[2] = table_of(g)[1];
}

static void c_entry_end_past_segment(struct region *g)
{
	/* last ring moved up a page: it ends past segment_bytes */
	table_of(g)[2].offset += PAGE;
}

static void c_entry_bytes_plus(struct region *g)
{
	table_of(g)[1].bytes += PAGE;
}

static void c_entry_bytes_minus(struct region *g)
{
	table_of(g)[0].bytes -= 8;
}

static void c_entry_bytes_zero(struct region *g)
{
	table_of(g)[0].bytes = 0;
}

static void c_entry_capacity_invalid(struct region *g)
{
	table_of(g)[0].capacity = 5000;
}

static void c_entry_capacity_mismatch(struct region *g)
{
	/* entry and bytes agree with each other, not with the ring's header */
	table_of(g)[2].capacity = 4096;
	table_of(g)[2].bytes = shmrun_ring_memsize(4096);
}

/*
 * Regression: an entry with an invalid capacity and bytes = 0 passed the size
 * check (shmrun_ring_memsize() of an invalid capacity is also 0), so attach read
 * a ring header at offset = segment_bytes, past the end of the mapping.
 */
static void c_entry_zero_size_at_end(struct region *g)
{
	table_of(g)[2].offset = g->len;
	table_of(g)[2].bytes = 0;
	table_of(g)[2].capacity = 0;
}

static void c_entry_zero_size_inside(struct region *g)
{
	table_of(g)[2].bytes = 0;
	table_of(g)[2].capacity = 0;
}

static void c_ring_magic(struct region *g)
{
	ring_sh(g, 1)->magic = 0;
}

static void c_ring_magic_segment(struct region *g)
{
	ring_sh(g, 2)->magic = SHMRUN_SEGMENT_MAGIC;
}

static void c_ring_version(struct region *g)
{
	ring_sh(g, 0)->version = SHMRUN_RING_LAYOUT_VERSION + 1;
}

static void c_ring_header_size(struct region *g)
{
	ring_sh(g, 2)->header_bytes = 128;
}

static void c_ring_capacity(struct region *g)
{
	ring_sh(g, 1)->capacity = 32768;
}

static void c_not_ready(struct region *g)
{
	atomic_store(&hdr_of(g)->ready, 0);
}

static const struct corrupt corrupts[] = {
    {"intact", c_none, 0},
    {"magic", c_magic, -EPROTO},
    {"ring magic as segment magic", c_magic_ring, -EPROTO},
    {"version+1", c_version, -EPROTO},
    {"version 0", c_version0, -EPROTO},
    {"header_bytes", c_header_bytes, -EPROTO},
    {"cacheline", c_cacheline, -EPROTO},
    {"ring_entry_bytes", c_ring_entry_bytes, -EPROTO},
    {"ring_header_bytes", c_ring_header_bytes, -EPROTO},
    {"frame_header_bytes", c_frame_header_bytes, -EPROTO},
    {"segment_bytes > len", c_segment_bytes, -EINVAL},
    {"segment_bytes = len + 1", c_segment_bytes_plus1, -EINVAL},
    {"segment_bytes smaller than the header", c_segment_bytes_tiny, -EINVAL},
    {"ring_table_off past the end", c_table_off_past_end, -EINVAL},
    {"ring_table_off huge", c_table_off_huge, -EINVAL},
    {"ring_table_off inside the header", c_table_off_in_header, -EINVAL},
    {"ring_table_off misaligned", c_table_off_misaligned, -EINVAL},
    {"ring table runs past the end", c_table_runs_past_end, -EINVAL},
    {"ring_count > max", c_ring_count_max, -EINVAL},
    {"ring_count UINT32_MAX", c_ring_count_huge, -EINVAL},
    {"ring_count: table too big", c_ring_count_table_too_big, -EINVAL},
    {"ring_count + 1", c_ring_count_plus1, -EINVAL},
    {"entry offset = segment_bytes", c_entry_offset_past_end, -EINVAL},
    {"entry offset far outside", c_entry_offset_far, -EINVAL},
    {"entry offset near 2^64", c_entry_offset_huge, -EINVAL},
    {"entry offset misaligned (64)", c_entry_offset_misaligned, -EINVAL},
    {"entry offset misaligned (8)", c_entry_offset_misaligned8, -EINVAL},
    {"entry overlaps previous ring", c_entry_overlaps_previous, -EINVAL},
    {"entry overlaps the header and table", c_entry_overlaps_table, -EINVAL},
    {"entries out of order", c_entries_swapped, -EINVAL},
    {"entry duplicates previous", c_entry_same_as_previous, -EINVAL},
    {"entry ends past segment_bytes", c_entry_end_past_segment, -EINVAL},
    {"entry bytes too large", c_entry_bytes_plus, -EINVAL},
    {"entry bytes too small", c_entry_bytes_minus, -EINVAL},
    {"entry bytes zero", c_entry_bytes_zero, -EINVAL},
    {"entry capacity invalid", c_entry_capacity_invalid, -EINVAL},
    {"entry capacity != ring capacity", c_entry_capacity_mismatch, -EINVAL},
    {"entry of size 0 at the end of the mapping", c_entry_zero_size_at_end, -EINVAL},
    {"entry of size 0 inside", c_entry_zero_size_inside, -EINVAL},
    {"ring header magic", c_ring_magic, -EPROTO},
    {"ring header magic = segment magic", c_ring_magic_segment, -EPROTO},
    {"ring header version", c_ring_version, -EPROTO},
    {"ring header size", c_ring_header_size, -EPROTO},
    {"ring header capacity != entry", c_ring_capacity, -EINVAL},
    {"ready == 0", c_not_ready, -EAGAIN},
};
#define N_CORRUPTS (sizeof(corrupts) / sizeof(corrupts[0]))

START_TEST(test_attach_validation)
{
	const struct corrupt *c = &corrupts[_i];
	struct shmrun_segment seg;
	struct region g;
	int err;

	region_init3(&g);
	c->fn(&g);
	memset(&seg, 0x5a, sizeof(seg));
	err = shmrun_segment_attach(&seg, g.base, g.len);
	ck_assert_msg(err == c->want, "%s: attach returned %d, want %d", c->what, err, c->want);
	if (err) {
		/* a failed attach leaves a closed handle */
		ck_assert_ptr_null(seg.hdr);
		ck_assert_uint_eq(seg.rings, 0);
		ck_assert_int_eq(seg.fd, -1);
		shmrun_segment_close(&seg);
	}
	region_unmap(&g);
}
END_TEST

START_TEST(test_attach_args)
{
	struct shmrun_segment seg;
	struct region g;

	region_init3(&g);
	ck_assert_int_eq(shmrun_segment_attach(&seg, NULL, g.len), -EINVAL);
	ck_assert_int_eq(shmrun_segment_attach(&seg, g.base + 64, g.len - 64), -EINVAL);
	ck_assert_int_eq(
	    shmrun_segment_attach(&seg, g.base, sizeof(struct shmrun_segment_header) - 1), -EINVAL);
	ck_assert_int_eq(shmrun_segment_attach(&seg, g.base, 0), -EINVAL);
	/* a mapping shorter than segment_bytes */
	ck_assert_int_eq(shmrun_segment_attach(&seg, g.base, g.len - 1), -EINVAL);
	ck_assert_int_eq(shmrun_segment_attach(&seg, g.base, PAGE), -EINVAL);
	ck_assert_int_eq(shmrun_segment_attach(&seg, g.base, g.len), 0);
	region_unmap(&g);
}
END_TEST

/* ---- the memfd path ----------------------------------------------------------- */

/* Count /proc/self/fd entries whose link target contains @what. */
static int count_fds(const char *what)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	char target[256];
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d))) {
		ssize_t len;

		if (e->d_name[0] == '.')
			continue;
		len = readlinkat(dirfd(d), e->d_name, target, sizeof(target) - 1);
		if (len < 0)
			continue;
		target[len] = '\0';
		if (strstr(target, what))
			n++;
	}
	closedir(d);
	return n;
}

/* Count /proc/self/maps lines that contain @what. */
static int count_maps(const char *what)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int n = 0;

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, what))
			n++;
	fclose(f);
	return n;
}

/* Entries of /dev/shm (0 if it does not exist). */
static int count_dev_shm(void)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

START_TEST(test_create_memfd)
{
	int shm_before = count_dev_shm(), fds_before = count_fds("memfd:shmrun");
	struct shmrun_segment seg;
	char path[64], target[256];
	struct stat st;
	ssize_t n;
	int fd;

	ck_assert_int_eq(shmrun_segment_create(&seg, specs3, 3, FP), 0);
	fd = seg.fd;
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(seg.owns_mapping, 1);
	ck_assert_uint_eq(seg.len, shmrun_segment_memsize(specs3, 3));
	ck_assert_uint_eq((uintptr_t)seg.base % PAGE, 0);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, target, sizeof(target) - 1);
	ck_assert_int_gt(n, 0);
	target[n] = '\0';
	ck_assert_msg(strncmp(target, "/memfd:shmrun", 13) == 0, "fd %d is %s", fd, target);
	ck_assert_int_eq(count_fds("memfd:shmrun"), fds_before + 1);
	ck_assert_int_ge(count_maps("memfd:shmrun"), 1);
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	ck_assert_uint_eq((uint64_t)st.st_size, seg.len);
	ck_assert_int_eq(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	/* nothing named was created */
	ck_assert_int_eq(count_dev_shm(), shm_before);

	ck_assert_uint_eq(shmrun_segment_fingerprint(&seg), FP);
	ck_assert_int_eq(shmrun_segment_creator(&seg), getpid());
	check_rings(&seg, specs3, 3);

	shmrun_segment_close(&seg);
	ck_assert_int_eq(seg.fd, -1);
	ck_assert_ptr_null(seg.base);
	ck_assert_int_eq(fcntl(fd, F_GETFD), -1);
	ck_assert_int_eq(errno, EBADF);
	ck_assert_int_eq(count_fds("memfd:shmrun"), fds_before);
	ck_assert_int_eq(count_maps("memfd:shmrun"), 0);
	ck_assert_int_eq(count_dev_shm(), shm_before);
	shmrun_segment_close(&seg); /* twice is safe */
}
END_TEST

START_TEST(test_create_errors)
{
	struct shmrun_segment_ring_spec bad = {.capacity = 100};
	int fds_before = count_fds("memfd:");
	struct shmrun_segment seg;

	memset(&seg, 0x5a, sizeof(seg));
	ck_assert_int_eq(shmrun_segment_create(&seg, &bad, 1, FP), -EINVAL);
	ck_assert_int_eq(seg.fd, -1);
	ck_assert_ptr_null(seg.base);
	ck_assert_int_eq(shmrun_segment_create(&seg, NULL, 2, FP), -EINVAL);
	ck_assert_int_eq(shmrun_segment_create(&seg, specs3, SHMRUN_SEGMENT_MAX_RINGS + 1, FP),
			 -EINVAL);
	ck_assert_int_eq(count_fds("memfd:"), fds_before);
	/* a zeroed handle closes safely */
	memset(&seg, 0, sizeof(seg));
	shmrun_segment_close(&seg);
}
END_TEST

START_TEST(test_create_shared_with_child)
{
	/* A child forked after create attaches to the inherited mapping, writes
	 * into ring 1 as producer; the parent reads what it wrote. */
	const struct shmrun_frame *f;
	struct shmrun_segment seg;
	struct shmrun_ring c;
	pid_t pid, parent = getpid();
	int status = -1;
	size_t len;
	void *mem;

	ck_assert_int_eq(shmrun_segment_create(&seg, specs3, 3, FP), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct shmrun_segment cs;
		struct shmrun_ring p;
		int rc = 0;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(90);
		alarm(10);
		if (shmrun_segment_attach(&cs, seg.base, seg.len))
			_exit(91);
		if (shmrun_segment_fingerprint(&cs) != FP || shmrun_segment_creator(&cs) != parent)
			_exit(92);
		mem = shmrun_segment_ring(&cs, 1, &len);
		if (!mem || shmrun_ring_attach(&p, mem, len, SHMRUN_RING_PRODUCER))
			_exit(93);
		if (shmrun_ring_write(&p, SHMRUN_FRAME_END, (uint32_t)getpid(), 77, "child", 5))
			rc = 94;
		shmrun_ring_detach(&p);
		_exit(rc);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	mem = shmrun_segment_ring(&seg, 1, &len);
	ck_assert_ptr_nonnull(mem);
	ck_assert_int_eq(atomic_load(&((struct shmrun_ring_shared *)mem)->producer_pid), pid);
	ck_assert_int_eq(shmrun_ring_attach(&c, mem, len, SHMRUN_RING_CONSUMER), 0);
	ck_assert_int_eq(shmrun_ring_peek(&c, &f), 0);
	ck_assert_uint_eq(f->kind, SHMRUN_FRAME_END);
	ck_assert_uint_eq(f->src_task, (uint32_t)pid);
	ck_assert_uint_eq(f->dst_task, 77);
	ck_assert_uint_eq(f->len, 5);
	ck_assert_mem_eq(f->payload, "child", 5);
	shmrun_ring_release(&c, f);
	/* the child exited: the producer side is dead and the ring is empty */
	ck_assert(!shmrun_ring_peer_alive(&c));
	shmrun_ring_detach(&c);
	shmrun_segment_close(&seg);
}
END_TEST

static Suite *segment_suite(void)
{
	Suite *s = suite_create("segment");
	TCase *tc;

	tc = tcase_create("layout");
	tcase_add_test(tc, test_memsize);
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_round_trip_many);
	tcase_add_test(tc, test_round_trip_empty);
	tcase_add_test(tc, test_init_errors);
	suite_add_tcase(s, tc);

	tc = tcase_create("attach_validation");
	tcase_add_loop_test(tc, test_attach_validation, 0, N_CORRUPTS);
	tcase_add_test(tc, test_attach_args);
	suite_add_tcase(s, tc);

	tc = tcase_create("memfd");
	tcase_set_timeout(tc, 20);
	tcase_add_test(tc, test_create_memfd);
	tcase_add_test(tc, test_create_errors);
	tcase_add_test(tc, test_create_shared_with_child);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(segment_suite());
	int failed;

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
