/*
 * tools/bench/bench_wordcount.c: the `wordcount` subcommand, and the helpers
 * both job benchmarks (wordcount, checkpoint) use to run the shmrun CLI.
 *
 * What it measures. Word count over ~200 MB of real text, end to end, as a
 * user runs it: the wall-clock time of a whole `shmrun topology.conf` run,
 * from fork/exec of the CLI (found next to shmrun-bench via /proc/self/exe)
 * to its exit — start-up, reading, tokenizing, shuffling, counting, the final
 * emit and the output file included. Throughput is input bytes per second
 * (MB = 10^6 bytes). Topologies:
 *
 *     read (file_source) -> words (tokenize, forward) -> count (by key, emit = final)
 *         -> out (file_sink, width 1)
 *
 *     workers=1: widths 1/1/1/1
 *     workers=2: widths 2/2/C/1, C = 2 and C = 4 both measured, the faster reported
 *
 * with piece_bytes = 4M so the two readers get equal shares of one input file
 * whatever its size (with the default 32M, the three pieces of a 100 MB file are
 * dealt two to one reader and one to the other).
 *
 * The reference, measured in the same run and interleaved with the shmrun runs
 * (each repetition runs all of them, so they see the same noise), is the best
 * single-threaded word count written here: mmap the file, find the words 64
 * bytes at a time (SSE2 classification into a bit mask, runs found with
 * count-trailing-zeros), tokens exactly as shmrun's tokenize (maximal
 * [A-Za-z0-9]+ runs lower-cased; every other byte, >= 0x80 included,
 * separates), words of up to 16 bytes held inline as two integers, one
 * open-addressing table (details above wc_word[] below). Its time runs from
 * open() to the finished table. Each figure is the best of --reps repetitions.
 *
 * Every shmrun run's output is checked against the reference table: every
 * word once, every count equal, as many words as the reference — two
 * tokenizers written independently that must agree. The per-key state figure
 * is parsed from the workers=1 run's closing launcher line ("key-bound state N
 * bytes (X per key beyond the key)").
 *
 * --hog CPU adds, to every repetition, the three shmrun runs again with a
 * CPU hog beside them: a child process spinning at full speed, pinned to CPU
 * (as `taskset -c CPU sh -c 'while :; do :; done'`), started before those
 * runs and killed after them — so the quiet runs and the reference stay
 * quiet — and killed on every way out: an error, SIGINT/SIGTERM/SIGHUP (the
 * flag of bench_catch_signals() ends the repetitions, the exit path kills
 * it), and the bench's own death (PR_SET_PDEATHSIG). The job pins worker k to
 * the k-th CPU of its affinity mask, so a hog on the second CPU shares a core
 * with worker 1 of the workers=2 runs. The hogged runs are reported beside
 * the same repetitions' quiet reference, and workers=2 against workers=1 with
 * the hog (issue 10: workers = 2 no slower than workers = 1).
 *
 * Input: every *.py under /usr/lib/python3.11 (a sorted directory walk, no
 * symbolic links followed) and every file in /usr/share/common-licenses,
 * concatenated and repeated until the size is reached, cut at a line end;
 * synthetic Zipf-like words if neither is present. It is written into a
 * temporary directory (removed at the end unless --keep DIR) and stays in the
 * page cache, so every run reads from memory.
 *
 * The second half of the file holds the job helpers declared in bench.h:
 * starting the CLI with its stderr in a log file, waiting for it on a pidfd
 * (optionally serving another fd meanwhile), stopping it on a signal or a
 * deadline, and always reaping it.
 *
 * Rejected: timing inside the job (its own "done in" line) — it leaves out
 * start-up and exit, which a user pays; a reference built on the runtime's
 * own state store — the point is to compare with code that has no runtime.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <glob.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "bench.h"

#define WC_DEFAULT_MB	 200
#define WC_QUICK_MB	 2
#define WC_RUN_TIMEOUT_S 600.0
#define WC_PY_DIR	 "/usr/lib/python3.11"
#define WC_LICENSES	 "/usr/share/common-licenses/*"

/* Targets from issue 10 item 8 (state: issue 3). */
#define TARGET_W1	   0.75
#define TARGET_W2	   1.3
#define TARGET_W2_VS_W1	   1.6
#define TARGET_STATE_BYTES 48.0
/* Issue 10 item 8: with a CPU hog on a worker's CPU, workers=2 >= workers=1. */
#define TARGET_HOG_W2_VS_W1 1.0

static const char wc_usage_text[] =
    "Usage: shmrun-bench wordcount [--mb N] [--reps N] [--keep DIR] [--quick] [--hog CPU] [-v]\n"
    "\n"
    "Times whole `shmrun topology.conf` word-count runs (workers=1, and workers=2\n"
    "with count width 2 and 4) over a text input built from the Python standard\n"
    "library and /usr/share/common-licenses, against a single-threaded C word count\n"
    "measured in the same run, and checks every shmrun output against it.\n"
    "\n"
    "  --mb N       input size in MB (10^6 bytes; default 200)\n"
    "  --reps N     repetitions, the best is reported (default 3)\n"
    "  --keep DIR   build input, topologies, outputs and logs in DIR and keep them\n"
    "  --quick      2 MB, one repetition: a correctness smoke test (ctest)\n"
    "  --hog CPU    also run the three topologies with a busy-loop process pinned\n"
    "               to CPU (started before, killed after those runs, each\n"
    "               repetition); workers are pinned to the 1st, 2nd... CPU this\n"
    "               process may use, so the 2nd one hogs worker 1 of workers=2\n"
    "  -v           print every run as a '#' line\n"
    "\n"
    "Output:\n"
    "  wordcount workers=1 mb_s=F ratio_vs_single=F\n"
    "  wordcount workers=2 mb_s=F ratio_vs_single=F\n"
    "  single mb_s=F\n"
    "  state bytes_per_key_beyond_key=F\n"
    "  wordcount workers=2 ratio_vs_workers1=F\n"
    "  wordcount workers=1 counters_off_mb_s=F ratio_counters_vs_off=F\n"
    "  wordcount workers=2 width=2 counters_off_mb_s=F ratio_counters_vs_off=F\n"
    "  (the same runs with SHMRUN_COUNTERS=off: the live counters' cost is\n"
    "  1 - ratio_counters_vs_off; within noise is about 0.98 to 1.02)\n"
    "With --hog, also (the reference is the quiet one of the same repetitions):\n"
    "  wordcount hog_cpu=C workers=1 mb_s=F ratio_vs_single=F\n"
    "  wordcount hog_cpu=C workers=2 mb_s=F ratio_vs_single=F ratio_vs_workers1=F\n"
    "Exit status: 0 ok (targets are reported, not enforced), 1 a run failed or an\n"
    "output differs from the reference, 2 usage error.\n";

/* ======================================================================== */
/* The reference: a single-threaded word count.                             */
/* ======================================================================== */

/*
 * Words are found 64 bytes at a time: classify64() gives a bit per byte, set
 * for [A-Za-z0-9] (SSE2 on x86-64: two range compares on 16 bytes, four
 * times; a table elsewhere), and the words are the runs of set bits, found
 * with count-trailing-zeros — no per-byte branch. Lower-casing a word byte is
 * c | 0x20: it maps A-Z to a-z and leaves a-z and 0-9 (0x30-0x39) as they are.
 *
 * A word of up to 16 bytes is its own key: lower-cased, zero-padded into two
 * 64-bit words k0, k1 stored in the slot and compared as integers, hashed by
 * a multiply-xorshift of (k0, k1, len) — one 16-byte load, one mask, no loop
 * over its bytes. A longer word is lower-cased into a buffer and kept in a key
 * arena; its slot holds XXH3-64 of it (k0) and its offset (k1). One table,
 * open addressing, linear probing, load <= 1/2.
 */

/* wc_word[c]: c is [A-Za-z0-9] (the scalar classify64() and the checks). */
static bool wc_word[256];

static void wc_init_tables(void)
{
	for (int c = 0; c < 256; c++)
		wc_word[c] =
		    (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

#if defined(__SSE2__)
static inline uint64_t classify16(const unsigned char *p)
{
	__m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
	/* unsigned c - '0' < 10, as a signed compare after moving 0 to -128 */
	__m128i d = _mm_cmplt_epi8(_mm_add_epi8(v, _mm_set1_epi8((char)(0x80 - '0'))),
				   _mm_set1_epi8((char)(-128 + 10)));
	__m128i l = _mm_or_si128(v, _mm_set1_epi8(0x20));
	__m128i a = _mm_cmplt_epi8(_mm_add_epi8(l, _mm_set1_epi8((char)(0x80 - 'a'))),
				   _mm_set1_epi8((char)(-128 + 26)));

	return (uint32_t)_mm_movemask_epi8(_mm_or_si128(d, a));
}

static inline uint64_t classify64(const unsigned char *p)
{
	return classify16(p) | classify16(p + 16) << 16 | classify16(p + 32) << 32 |
	       classify16(p + 48) << 48;
}
#else
static inline uint64_t classify64(const unsigned char *p)
{
	uint64_t m = 0;

	for (unsigned i = 0; i < 64; i++)
		m |= (uint64_t)wc_word[p[i]] << i;
	return m;
}
#endif

struct wc_slot {
	uint64_t k0, k1; /* len <= 16: the word, zero-padded; else XXH3-64, arena offset */
	uint64_t count;
	uint32_t len;  /* 0 = empty slot (a word is never empty) */
	uint32_t seen; /* verification generation that saw this word */
};

struct wc_table {
	struct wc_slot *slots;
	uint64_t mask;	     /* capacity - 1, capacity a power of two */
	uint64_t used;	     /* distinct words */
	uint64_t total;	     /* words */
	unsigned char *keys; /* words longer than 16 bytes */
	size_t keys_len, keys_cap;
	unsigned char *word; /* lower-casing buffer for long words */
	size_t word_cap;
	uint32_t gen;
};

static inline uint64_t wc_hash_short(uint64_t k0, uint64_t k1, uint64_t len)
{
	uint64_t h = (k0 * 0x9e3779b97f4a7c15ull) ^ (k1 * 0xc2b2ae3d27d4eb4full + len);

	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	return h ^ (h >> 32);
}

static inline uint64_t wc_slot_hash(const struct wc_slot *s)
{
	return s->len <= 16 ? wc_hash_short(s->k0, s->k1, s->len) : s->k0;
}

static int wc_table_init(struct wc_table *t, uint64_t cap)
{
	memset(t, 0, sizeof(*t));
	t->slots = calloc(cap, sizeof(*t->slots));
	if (!t->slots)
		return -ENOMEM;
	t->mask = cap - 1;
	return 0;
}

static void wc_table_free(struct wc_table *t)
{
	free(t->slots);
	free(t->keys);
	free(t->word);
	memset(t, 0, sizeof(*t));
}

static int wc_table_grow(struct wc_table *t)
{
	uint64_t ncap = (t->mask + 1) * 2;
	struct wc_slot *ns = calloc(ncap, sizeof(*ns));

	if (!ns)
		return -ENOMEM;
	for (uint64_t i = 0; i <= t->mask; i++) {
		struct wc_slot *s = &t->slots[i];
		uint64_t j;

		if (!s->len)
			continue;
		for (j = wc_slot_hash(s) & (ncap - 1); ns[j].len; j = (j + 1) & (ncap - 1))
			;
		ns[j] = *s;
	}
	free(t->slots);
	t->slots = ns;
	t->mask = ncap - 1;
	return 0;
}

/* The empty slot for hash @h, after growing if one more word passes load 1/2. */
static struct wc_slot *wc_new_slot(struct wc_table *t, uint64_t h)
{
	uint64_t i;

	if ((t->used + 1) * 2 > t->mask + 1 && wc_table_grow(t))
		return NULL;
	for (i = h & t->mask; t->slots[i].len; i = (i + 1) & t->mask)
		;
	t->used++;
	return &t->slots[i];
}

/* Find (or, with @add, count one more of) the short word (k0, k1, len). */
static inline struct wc_slot *wc_short(struct wc_table *t, uint64_t k0, uint64_t k1, uint32_t len,
				       bool add)
{
	uint64_t h = wc_hash_short(k0, k1, len);
	struct wc_slot *s;

	for (uint64_t i = h & t->mask;; i = (i + 1) & t->mask) {
		s = &t->slots[i];
		if (!s->len)
			break;
		if (s->k0 == k0 && s->k1 == k1 && s->len == len) {
			if (add) {
				s->count++;
				t->total++;
			}
			return s;
		}
	}
	if (!add)
		return NULL;
	s = wc_new_slot(t, h);
	if (s) {
		*s = (struct wc_slot){.k0 = k0, .k1 = k1, .count = 1, .len = len};
		t->total++;
	}
	return s;
}

/* Find (or, with @add, count one more of) the lower-cased long word @w. */
static struct wc_slot *wc_long(struct wc_table *t, const unsigned char *w, uint32_t len, bool add)
{
	uint64_t h = XXH3_64bits(w, len);
	struct wc_slot *s;

	for (uint64_t i = h & t->mask;; i = (i + 1) & t->mask) {
		s = &t->slots[i];
		if (!s->len)
			break;
		if (s->len == len && s->k0 == h && !memcmp(t->keys + s->k1, w, len)) {
			if (add) {
				s->count++;
				t->total++;
			}
			return s;
		}
	}
	if (!add)
		return NULL;
	if (t->keys_len + len > t->keys_cap) {
		size_t ncap = t->keys_cap ? t->keys_cap * 2 : 1u << 20;
		unsigned char *nk;

		while (ncap < t->keys_len + len)
			ncap *= 2;
		nk = realloc(t->keys, ncap);
		if (!nk)
			return NULL;
		t->keys = nk;
		t->keys_cap = ncap;
	}
	s = wc_new_slot(t, h);
	if (!s)
		return NULL;
	memcpy(t->keys + t->keys_len, w, len);
	*s = (struct wc_slot){.k0 = h, .k1 = t->keys_len, .count = 1, .len = len};
	t->keys_len += len;
	t->total++;
	return s;
}

/* Bytes 0..n-1 of a zero-padded 16-byte word: mask[n]. */
static unsigned char wc_mask[17][16];

/* Count the word [s, s + n) of a buffer that ends at @end. Return: 0 or -ENOMEM. */
static inline int wc_word_add(struct wc_table *t, const unsigned char *s, size_t n,
			      const unsigned char *end)
{
	if (n <= 16) {
		uint64_t k[2];

#if defined(__SSE2__)
		__m128i v;

		if (end - s >= 16) {
			v = _mm_loadu_si128((const __m128i *)(const void *)s);
		} else {
			unsigned char b[16] = {0};

			memcpy(b, s, n);
			v = _mm_loadu_si128((const __m128i *)(const void *)b);
		}
		v = _mm_and_si128(_mm_or_si128(v, _mm_set1_epi8(0x20)),
				  _mm_loadu_si128((const __m128i *)(const void *)wc_mask[n]));
		_mm_storeu_si128((__m128i *)(void *)k, v);
#else
		unsigned char b[16] = {0};

		(void)end;
		for (size_t i = 0; i < n; i++)
			b[i] = s[i] | 0x20;
		memcpy(k, b, 16);
#endif
		return wc_short(t, k[0], k[1], (uint32_t)n, true) ? 0 : -ENOMEM;
	}
	if (n > UINT32_MAX)
		return -E2BIG;
	if (n > t->word_cap) {
		unsigned char *nw = realloc(t->word, n);

		if (!nw)
			return -ENOMEM;
		t->word = nw;
		t->word_cap = n;
	}
	for (size_t i = 0; i < n; i++)
		t->word[i] = s[i] | 0x20;
	return wc_long(t, t->word, (uint32_t)n, true) ? 0 : -ENOMEM;
}

/* Count the words of [p, end) into @t. Return: 0 or -errno. */
static int wc_count_bytes(struct wc_table *t, const unsigned char *p, const unsigned char *end)
{
	const unsigned char *start = NULL;
	unsigned char tail[64];
	int err = 0;

	for (; p < end && !err; p += 64) {
		uint64_t m;
		unsigned k = 0;

		if (end - p >= 64) {
			m = classify64(p);
		} else {
			/* the last bytes, zero-padded: NUL separates */
			memset(tail, 0, sizeof(tail));
			memcpy(tail, p, (size_t)(end - p));
			m = classify64(tail);
		}
		/* @start is set while inside a word, across blocks */
		for (;;) {
			uint64_t w;

			if (!start) {
				w = k < 64 ? m >> k : 0;
				if (!w)
					break;
				k += (unsigned)__builtin_ctzll(w);
				start = p + k;
			}
			w = k < 64 ? ~m >> k : 0;
			if (!w)
				break; /* the word goes on in the next block */
			k += (unsigned)__builtin_ctzll(w);
			err = wc_word_add(t, start, (size_t)(p + k - start), end);
			start = NULL;
			if (err)
				break;
		}
	}
	if (start && !err)
		err = wc_word_add(t, start, (size_t)(end - start), end);
	return err;
}

/* Count @path's words into a fresh @t; @ns is the time, open() to the table. */
static int wc_single(const char *path, struct wc_table *t, int64_t *ns)
{
	int64_t t0 = bench_now_ns();
	struct stat st;
	void *map = NULL;
	int fd, err = 0;

	if (wc_table_init(t, 1u << 16))
		return -ENOMEM;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		err = -errno;
		goto out;
	}
	if (st.st_size) {
		map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
		if (map == MAP_FAILED) {
			map = NULL;
			err = -errno;
			goto out;
		}
		err = wc_count_bytes(t, map, (const unsigned char *)map + st.st_size);
		munmap(map, (size_t)st.st_size);
	}
out:
	if (fd >= 0)
		close(fd);
	*ns = bench_now_ns() - t0;
	if (err) {
		fprintf(stderr, "shmrun-bench: wordcount reference over %s: %s\n", path,
			strerror(-err));
		wc_table_free(t);
	}
	return err;
}

/* The slot of an output word (as shmrun wrote it), or NULL. */
static struct wc_slot *wc_find(struct wc_table *t, const char *w, size_t len)
{
	if (!len || len > UINT32_MAX)
		return NULL;
	for (size_t i = 0; i < len; i++)
		if (!wc_word[(unsigned char)w[i]] || (w[i] >= 'A' && w[i] <= 'Z'))
			return NULL; /* not a lower-cased word: not one of ours */
	if (len <= 16) {
		unsigned char b[16] = {0};
		uint64_t k[2];

		memcpy(b, w, len);
		memcpy(k, b, 16);
		return wc_short(t, k[0], k[1], (uint32_t)len, false);
	}
	return wc_long(t, (const unsigned char *)w, (uint32_t)len, false);
}

/*
 * Check a file_sink output ("word<TAB>count" lines) against @ref: every word
 * once, with the reference's count, and every reference word present.
 * Return: 0, or -1 after printing the first difference.
 */
static int wc_verify(struct wc_table *ref, const char *out_path, const char *what)
{
	char *text = NULL, *p, *end;
	size_t len = 0;
	uint64_t lines = 0, total = 0;
	int rc = -1;

	if (bench_read_text(out_path, &text, &len))
		return -1;
	ref->gen++;
	for (p = text, end = text + len; p < end;) {
		char *nl = memchr(p, '\n', (size_t)(end - p)), *tab, *num_end;
		struct wc_slot *s;
		unsigned long long n;

		if (!nl) {
			fprintf(stderr, "shmrun-bench: %s: %s: last line has no newline\n", what,
				out_path);
			goto out;
		}
		*nl = '\0';
		tab = memrchr(p, '\t', (size_t)(nl - p));
		if (!tab || tab == p) {
			fprintf(stderr,
				"shmrun-bench: %s: %s: line %" PRIu64
				" is not word<TAB>count: '%s'\n",
				what, out_path, lines + 1, p);
			goto out;
		}
		errno = 0;
		n = strtoull(tab + 1, &num_end, 10);
		if (errno || num_end != nl || num_end == tab + 1) {
			fprintf(stderr, "shmrun-bench: %s: %s: line %" PRIu64 ": bad count '%s'\n",
				what, out_path, lines + 1, tab + 1);
			goto out;
		}
		s = wc_find(ref, p, (size_t)(tab - p));
		if (!s || s->seen == ref->gen || s->count != n) {
			*tab = '\0';
			if (!s)
				fprintf(stderr,
					"shmrun-bench: %s: word '%s' (count %llu) is not in the "
					"reference\n",
					what, p, n);
			else if (s->seen == ref->gen)
				fprintf(stderr, "shmrun-bench: %s: word '%s' appears twice\n", what,
					p);
			else
				fprintf(
				    stderr,
				    "shmrun-bench: %s: word '%s': count %llu, reference %" PRIu64
				    "\n",
				    what, p, n, s->count);
			goto out;
		}
		s->seen = ref->gen;
		lines++;
		total += n;
		p = nl + 1;
	}
	if (lines != ref->used || total != ref->total) {
		fprintf(stderr,
			"shmrun-bench: %s: %" PRIu64 " words (%" PRIu64
			" distinct), reference %" PRIu64 " (%" PRIu64 " distinct)\n",
			what, total, lines, ref->total, ref->used);
		goto out;
	}
	rc = 0;
out:
	free(text);
	return rc;
}

/* ======================================================================== */
/* The input.                                                               */
/* ======================================================================== */

struct corpus {
	char *p;
	size_t len, cap;
	uint32_t files;
};

static int corpus_append(struct corpus *c, const void *p, size_t n)
{
	if (c->len + n + 1 > c->cap) {
		size_t ncap = c->cap ? c->cap * 2 : 16u << 20;
		char *np;

		while (ncap < c->len + n + 1)
			ncap *= 2;
		np = realloc(c->p, ncap);
		if (!np)
			return -ENOMEM;
		c->p = np;
		c->cap = ncap;
	}
	memcpy(c->p + c->len, p, n);
	c->len += n;
	return 0;
}

/* Append one file's bytes, with a '\n' if it lacks a final one. Unreadable: skipped. */
static int corpus_add_file(struct corpus *c, const char *path)
{
	char buf[1 << 16];
	size_t before = c->len;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC), err = 0;

	if (fd < 0)
		return 0;
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		err = corpus_append(c, buf, (size_t)n);
		if (err)
			break;
	}
	close(fd);
	if (!err && c->len > before && c->p[c->len - 1] != '\n')
		err = corpus_append(c, "\n", 1);
	if (!err && c->len > before)
		c->files++;
	return err;
}

struct path_list {
	char **v;
	size_t n, cap;
};

static struct path_list *walk_paths; /* nftw has no user pointer */

static int walk_py(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	size_t len = strlen(path);

	(void)st;
	(void)ftw;
	if (type != FTW_F || len < 3 || strcmp(path + len - 3, ".py"))
		return 0;
	if (walk_paths->n == walk_paths->cap) {
		size_t ncap = walk_paths->cap ? walk_paths->cap * 2 : 1024;
		char **nv = realloc(walk_paths->v, ncap * sizeof(*nv));

		if (!nv)
			return -1;
		walk_paths->v = nv;
		walk_paths->cap = ncap;
	}
	walk_paths->v[walk_paths->n] = strdup(path);
	if (!walk_paths->v[walk_paths->n])
		return -1;
	walk_paths->n++;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The real text: sorted *.py of the Python library, then the licences. */
static int corpus_load_real(struct corpus *c)
{
	struct path_list pl = {0};
	glob_t g;
	int err = 0;

	walk_paths = &pl;
	if (nftw(WC_PY_DIR, walk_py, 32, FTW_PHYS) < 0 && errno == ENOMEM)
		err = -ENOMEM;
	walk_paths = NULL;
	if (pl.n)
		qsort(pl.v, pl.n, sizeof(*pl.v), cmp_str);
	for (size_t i = 0; i < pl.n && !err; i++)
		err = corpus_add_file(c, pl.v[i]);
	for (size_t i = 0; i < pl.n; i++)
		free(pl.v[i]);
	free(pl.v);
	if (!err && glob(WC_LICENSES, 0, NULL, &g) == 0) {
		for (size_t i = 0; i < g.gl_pathc && !err; i++) {
			struct stat st;

			if (stat(g.gl_pathv[i], &st) == 0 && S_ISREG(st.st_mode))
				err = corpus_add_file(c, g.gl_pathv[i]);
		}
		globfree(&g);
	}
	return err;
}

/* Synthetic text: words from a 50000-word vocabulary, Zipf-like, 12 per line. */
static int corpus_make_synthetic(struct corpus *c, size_t bytes)
{
	uint64_t x = 0x9e3779b97f4a7c15ull;
	char line[256];

	while (c->len < bytes) {
		size_t n = 0;

		for (int w = 0; w < 12; w++) {
			uint64_t r, id, len;

			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			r = x % 50000;
			id = r * r / 50000; /* skewed to small ids */
			len = 2 + id % 9;
			for (uint64_t k = 0; k < len; k++)
				line[n++] = (char)('a' + (id * 7 + k * 13 + id / 26) % 26);
			line[n++] = (char)(w == 11 ? '\n' : ' ');
		}
		if (corpus_append(c, line, n))
			return -ENOMEM;
	}
	return 0;
}

/*
 * Write @path: the corpus repeated until @target bytes, the last copy cut just
 * after a '\n'. @size is the bytes written; @desc says what the text is.
 */
static int wc_make_input(const char *path, uint64_t target, uint64_t *size, char *desc,
			 size_t desc_len)
{
	struct corpus c = {0};
	uint64_t done = 0;
	int fd, err;

	err = corpus_load_real(&c);
	if (!err && c.len) {
		snprintf(desc, desc_len,
			 "%u files (" WC_PY_DIR "/**/*.py and /usr/share/common-licenses/*, "
			 "%zu bytes) repeated %.1f times",
			 c.files, c.len, (double)target / (double)c.len);
	} else if (!err) {
		err = corpus_make_synthetic(&c, 16u << 20);
		snprintf(desc, desc_len,
			 "synthetic words (neither " WC_PY_DIR " nor " WC_LICENSES " found)");
	}
	if (err) {
		fprintf(stderr, "shmrun-bench: building the input text: %s\n", strerror(-err));
		free(c.p);
		return err;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		err = -errno;
		fprintf(stderr, "shmrun-bench: cannot create %s: %s\n", path, strerror(errno));
		free(c.p);
		return err;
	}
	while (!err && done < target) {
		size_t n = c.len;

		if (target - done < n) {
			const char *nl;

			n = (size_t)(target - done);
			nl = memchr(c.p + n - 1, '\n', c.len - (n - 1));
			n = nl ? (size_t)(nl - c.p) + 1 : c.len;
		}
		err = bench_write_all(fd, c.p, n);
		done += n;
	}
	if (close(fd) && !err)
		err = -errno;
	free(c.p);
	if (err) {
		fprintf(stderr, "shmrun-bench: writing %s: %s\n", path, strerror(-err));
		return err;
	}
	*size = done;
	return 0;
}

/* ======================================================================== */
/* The subcommand.                                                          */
/* ======================================================================== */

struct wc_config {
	const char *name; /* file stem and label */
	unsigned workers;
	unsigned widths[4];   /* read, words, count, out */
	double best_s;	      /* best wall-clock time */
	double bytes_per_key; /* from the launcher's log, -1 if not found */
	bool counters_off;    /* run with SHMRUN_COUNTERS=off: no live counters */
};

static int wc_write_conf(const char *dir, const struct wc_config *c)
{
	char path[PATH_MAX], text[1024];

	snprintf(text, sizeof(text),
		 "; written by shmrun-bench wordcount\n"
		 "[job]\nname = bench-wc-%s\nworkers = %u\n\n"
		 "[read]\nop = file_source\npath = input.txt\npiece_bytes = 4M\nwidth = %u\n\n"
		 "[words]\nop = tokenize\ninput = read\nwidth = %u\n\n"
		 "[count]\nop = count\ninput = words by key\nemit = final\nwidth = %u\n\n"
		 "[out]\nop = file_sink\ninput = count\npath = out-%s.tsv\nwidth = %u\n",
		 c->name, c->workers, c->widths[0], c->widths[1], c->widths[2], c->name,
		 c->widths[3]);
	if (bench_pathf(path, sizeof(path), "%s/%s.conf", dir, c->name))
		return -1;
	return bench_write_text(path, text);
}

/* "... (X per key beyond the key)" in a launcher log; -1 if absent. */
static double parse_bytes_per_key(const char *log_path)
{
	char *text = NULL, *p;
	size_t len;
	double x = -1;

	if (bench_read_text(log_path, &text, &len))
		return -1;
	p = strstr(text, " per key beyond the key)");
	if (p) {
		while (p > text && p[-1] != '(')
			p--;
		if (sscanf(p, "%lf", &x) != 1)
			x = -1;
	}
	free(text);
	return x;
}

/* One timed run of @c; verified against @ref. Return: 0 or -1. */
static int wc_run_one(const char *shmrun, const char *dir, struct wc_config *c,
		      struct wc_table *ref, double *secs)
{
	char conf[PATH_MAX], log[PATH_MAX], out[PATH_MAX], what[64];
	char *argv[] = {(char *)shmrun, "--log-level", "info", conf, NULL};
	struct bench_job job;

	if (bench_pathf(conf, sizeof(conf), "%s/%s.conf", dir, c->name) ||
	    bench_pathf(log, sizeof(log), "%s/%s.log", dir, c->name) ||
	    bench_pathf(out, sizeof(out), "%s/out-%s.tsv", dir, c->name))
		return -1;
	snprintf(what, sizeof(what), "shmrun %s", c->name);
	if (c->counters_off)
		setenv("SHMRUN_COUNTERS", "off", 1); /* the child inherits it */
	if (bench_job_start(&job, shmrun, argv, log)) {
		unsetenv("SHMRUN_COUNTERS");
		return -1;
	}
	unsetenv("SHMRUN_COUNTERS");
	if (bench_job_wait(&job, WC_RUN_TIMEOUT_S, -1, NULL, NULL, log))
		return -1;
	*secs = (double)(job.end_ns - job.start_ns) / 1e9;
	if (wc_verify(ref, out, what))
		return -1;
	c->bytes_per_key = parse_bytes_per_key(log);
	return 0;
}

/* ---- the CPU hog (--hog) ------------------------------------------------ */

/*
 * A child spinning on @cpu until killed; its pid into *@pid. It dies with
 * this process (PR_SET_PDEATHSIG) and takes the default action for every
 * signal. Return: 0, or -1 after printing why.
 */
static int hog_start(int cpu, pid_t *pid)
{
	pid_t parent = getpid(), p;

	fflush(NULL);
	p = fork();
	if (p < 0) {
		fprintf(stderr, "shmrun-bench: cannot fork the CPU hog: %s\n", strerror(errno));
		return -1;
	}
	if (p == 0) {
		volatile uint64_t spins = 0;
		cpu_set_t set;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set) < 0)
			_exit(1);
		for (;;)
			spins = spins + 1;
	}
	*pid = p;
	return 0;
}

/* Kill and reap the hog *@pid, if any; *@pid becomes 0. */
static void hog_stop(pid_t *pid)
{
	if (*pid <= 0)
		return;
	kill(*pid, SIGKILL);
	while (waitpid(*pid, NULL, 0) < 0 && errno == EINTR)
		;
	*pid = 0;
}

/*
 * --hog's @arg: a CPU this process may run on, into *@cpu; its place in the
 * affinity mask (the job pins worker k to the k-th allowed CPU) into *@rank.
 * Return: 0, or -1 (not a number, or not allowed: the message in @why).
 */
static int hog_parse(const char *arg, int *cpu, int *rank, char *why, size_t len)
{
	unsigned long n;
	cpu_set_t set;
	char *end;

	errno = 0;
	n = strtoul(arg, &end, 10);
	if (*arg < '0' || *arg > '9' || *end || errno || n >= CPU_SETSIZE) {
		snprintf(why, len, "--hog '%s': need a CPU number below %d", arg, CPU_SETSIZE);
		return -1;
	}
	if (sched_getaffinity(0, sizeof(set), &set) < 0 || !CPU_ISSET((int)n, &set)) {
		snprintf(why, len, "--hog %s: not a CPU this process may run on (see taskset -p %d)",
			 arg, (int)getpid());
		return -1;
	}
	*cpu = (int)n;
	*rank = 0;
	for (int i = 0; i < (int)n; i++)
		*rank += CPU_ISSET(i, &set) ? 1 : 0;
	return 0;
}

static double mb_s(uint64_t bytes, double secs)
{
	return secs > 0 ? (double)bytes / 1e6 / secs : 0;
}

int bench_wordcount_main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"mb", required_argument, NULL, 'm'},
	    {"reps", required_argument, NULL, 'r'},
	    {"keep", required_argument, NULL, 'k'},
	    {"quick", no_argument, NULL, 'q'},
	    {"hog", required_argument, NULL, 'g'},
	    {"verbose", no_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct wc_config cfg[3] = {
	    {.name = "w1", .workers = 1, .widths = {1, 1, 1, 1}},
	    {.name = "w2c2", .workers = 2, .widths = {2, 2, 2, 1}},
	    {.name = "w2c4", .workers = 2, .widths = {2, 2, 4, 1}},
	};
	char built[PATH_MAX], shmrun[PATH_MAX], dir[PATH_MAX], input[PATH_MAX], desc[256];
	const char *keep = NULL;
	uint64_t mb = 0, reps = 0, size = 0;
	double single_s = 0;
	bool quick = false, verbose = false, made_dir = false;
	struct wc_table ref = {0};
	struct wc_config hogged[3] = {cfg[0], cfg[1], cfg[2]};
	/* the same runs without live counters (metrics.h): what they cost */
	struct wc_config plain[2] = {cfg[0], cfg[1]};
	struct wc_config *w2, *h2;
	int hog_cpu = -1, hog_rank = 0;
	pid_t hog = 0;
	char why[160];
	int c, rc = BENCH_EXIT_FAIL;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":hv", opts, NULL)) != -1) {
		switch (c) {
		case 'm':
			if (bench_parse_count(optarg, 100000, &mb))
				return bench_usage_error("wordcount", 
				    "--mb '%s': need a size in MB from 1 to 100000", optarg);
			break;
		case 'r':
			if (bench_parse_count(optarg, 1000, &reps))
				return bench_usage_error("wordcount", "--reps '%s': need a count from 1 to 1000",
						      optarg);
			break;
		case 'k':
			keep = optarg;
			break;
		case 'q':
			quick = true;
			break;
		case 'g':
			if (hog_parse(optarg, &hog_cpu, &hog_rank, why, sizeof(why)))
				return bench_usage_error("wordcount", "%s", why);
			break;
		case 'v':
			verbose = true;
			break;
		case 'h':
			fputs(wc_usage_text, stdout);
			return 0;
		case ':':
			return bench_usage_error("wordcount", "option '%s' needs a value", argv[optind - 1]);
		default:
			return bench_usage_error("wordcount", "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return bench_usage_error("wordcount", "unexpected argument '%s'", argv[optind]);
	if (!mb)
		mb = quick ? WC_QUICK_MB : WC_DEFAULT_MB;
	if (!reps)
		reps = quick ? 1 : 3;

	if (bench_shmrun_path(built, sizeof(built)))
		return BENCH_EXIT_FAIL;
	bench_catch_signals();
	wc_init_tables();
	for (int n = 0; n <= 16; n++)
		for (int i = 0; i < 16; i++)
			wc_mask[n][i] = i < n ? 0xff : 0;
	if (bench_open_workdir(keep, "wc", dir, sizeof(dir), &made_dir))
		return BENCH_EXIT_FAIL;
	if (bench_pathf(input, sizeof(input), "%s/input.txt", dir) ||
	    bench_shmrun_copy(built, dir, shmrun, sizeof(shmrun)))
		goto out;

	bench_print_loadavg("at start");
	if (wc_make_input(input, mb * 1000000, &size, desc, sizeof(desc)))
		goto out;
	printf("# shmrun: %s (runs from a copy in %s)\n", built, dir);
	printf("# input: %s, %" PRIu64 " bytes: %s\n", input, size, desc);
	if (hog_cpu >= 0)
		printf("# hog: a busy loop pinned to CPU %d (the job's CPU #%d: %s)\n", hog_cpu,
		       hog_rank,
		       hog_rank == 0   ? "worker 0 of both topologies"
		       : hog_rank == 1 ? "worker 1 of workers=2"
				       : "no worker's");
	for (int i = 0; i < 3; i++)
		if (wc_write_conf(dir, &cfg[i]))
			goto out;

	/* Each repetition: the reference, then every topology; best of each. */
	for (uint64_t r = 0; r < reps; r++) {
		int64_t ns;

		if (bench_interrupted())
			goto out;
		wc_table_free(&ref);
		if (wc_single(input, &ref, &ns))
			goto out;
		if (!single_s || (double)ns / 1e9 < single_s)
			single_s = (double)ns / 1e9;
		if (verbose)
			printf("# rep %" PRIu64 " single: %.3f s, %.1f MB/s\n", r + 1,
			       (double)ns / 1e9, mb_s(size, (double)ns / 1e9));
		for (int i = 0; i < 3; i++) {
			double s;

			if (wc_run_one(shmrun, dir, &cfg[i], &ref, &s))
				goto out;
			if (!cfg[i].best_s || s < cfg[i].best_s)
				cfg[i].best_s = s;
			if (verbose)
				printf("# rep %" PRIu64 " %s: %.3f s, %.1f MB/s\n", r + 1,
				       cfg[i].name, s, mb_s(size, s));
		}
		for (int i = 0; i < 2; i++) {
			double s;

			plain[i].counters_off = true;
			if (bench_interrupted() || wc_run_one(shmrun, dir, &plain[i], &ref, &s))
				goto out;
			if (!plain[i].best_s || s < plain[i].best_s)
				plain[i].best_s = s;
			if (verbose)
				printf("# rep %" PRIu64 " %s without counters: %.3f s, %.1f MB/s\n",
				       r + 1, plain[i].name, s, mb_s(size, s));
		}
		if (hog_cpu >= 0 && hog_start(hog_cpu, &hog))
			goto out;
		for (int i = 0; hog && i < 3; i++) {
			double s;

			if (bench_interrupted() || wc_run_one(shmrun, dir, &hogged[i], &ref, &s))
				goto out;
			if (!hogged[i].best_s || s < hogged[i].best_s)
				hogged[i].best_s = s;
			if (verbose)
				printf("# rep %" PRIu64 " %s with the hog on CPU %d: %.3f s, %.1f MB/s\n",
				       r + 1, hogged[i].name, hog_cpu, s, mb_s(size, s));
		}
		hog_stop(&hog);
		fflush(stdout);
	}

	w2 = cfg[1].best_s <= cfg[2].best_s ? &cfg[1] : &cfg[2];
	printf("# reference: %" PRIu64 " words, %" PRIu64
	       " distinct; every shmrun output matched it (each word once, same count)\n",
	       ref.total, ref.used);
	printf("# best of %" PRIu64 " reps; shmrun time = whole run (fork/exec to exit), "
	       "reference = open() to finished table; MB = 10^6 bytes\n",
	       reps);
	printf("# workers=2: count width 2 %.1f MB/s, width 4 %.1f MB/s: reporting width %u "
	       "(faster)\n",
	       mb_s(size, cfg[1].best_s), mb_s(size, cfg[2].best_s), w2->widths[2]);
	printf("wordcount workers=1 mb_s=%.1f ratio_vs_single=%.3f\n", mb_s(size, cfg[0].best_s),
	       single_s / cfg[0].best_s);
	printf("wordcount workers=2 mb_s=%.1f ratio_vs_single=%.3f\n", mb_s(size, w2->best_s),
	       single_s / w2->best_s);
	printf("single mb_s=%.1f\n", mb_s(size, single_s));
	printf("state bytes_per_key_beyond_key=%.1f\n", cfg[0].bytes_per_key);
	printf("wordcount workers=2 ratio_vs_workers1=%.3f\n", cfg[0].best_s / w2->best_s);
	/* > 1: the run with counters was faster (noise); the cost is 1 - ratio */
	printf("wordcount workers=1 counters_off_mb_s=%.1f ratio_counters_vs_off=%.3f\n",
	       mb_s(size, plain[0].best_s), plain[0].best_s / cfg[0].best_s);
	printf("wordcount workers=2 width=2 counters_off_mb_s=%.1f ratio_counters_vs_off=%.3f\n",
	       mb_s(size, plain[1].best_s), plain[1].best_s / cfg[1].best_s);
	printf("# targets: workers=1 >= %.2fx single (%s), workers=2 >= %.1fx (%s), "
	       "workers=2 >= %.1fx workers=1 (%s), "
	       "state <= %.0f bytes/key beyond the key (%s)\n",
	       TARGET_W1, single_s / cfg[0].best_s >= TARGET_W1 ? "met" : "missed", TARGET_W2,
	       single_s / w2->best_s >= TARGET_W2 ? "met" : "missed", TARGET_W2_VS_W1,
	       cfg[0].best_s / w2->best_s >= TARGET_W2_VS_W1 ? "met" : "missed",
	       TARGET_STATE_BYTES,
	       cfg[0].bytes_per_key >= 0 && cfg[0].bytes_per_key <= TARGET_STATE_BYTES ? "met"
										       : "missed");
	if (cfg[0].bytes_per_key < 0)
		printf("# the launcher's log had no \"per key beyond the key\" line\n");
	if (hog_cpu >= 0) {
		h2 = hogged[1].best_s <= hogged[2].best_s ? &hogged[1] : &hogged[2];
		printf("# with the hog on CPU %d: workers=2 count width 2 %.1f MB/s, width 4 %.1f "
		       "MB/s: reporting width %u (faster)\n",
		       hog_cpu, mb_s(size, hogged[1].best_s), mb_s(size, hogged[2].best_s),
		       h2->widths[2]);
		printf("wordcount hog_cpu=%d workers=1 mb_s=%.1f ratio_vs_single=%.3f\n", hog_cpu,
		       mb_s(size, hogged[0].best_s), single_s / hogged[0].best_s);
		printf("wordcount hog_cpu=%d workers=2 mb_s=%.1f ratio_vs_single=%.3f "
		       "ratio_vs_workers1=%.3f\n",
		       hog_cpu, mb_s(size, h2->best_s), single_s / h2->best_s,
		       hogged[0].best_s / h2->best_s);
		printf("# target: with the hog, workers=2 >= %.1fx workers=1 (%s)\n",
		       TARGET_HOG_W2_VS_W1,
		       hogged[0].best_s / h2->best_s >= TARGET_HOG_W2_VS_W1 ? "met" : "missed");
	}
	bench_print_loadavg("at end");
	rc = 0;
out:
	hog_stop(&hog); /* an error or a signal between hog_start() and hog_stop() */
	wc_table_free(&ref);
	return bench_finish(rc, dir, made_dir, keep);
}
