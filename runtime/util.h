/*
 * runtime/util.h: small idioms the runtime's files share, written once
 * (private; never installed). A growable array, mkdir -p, the monotonic
 * clock in nanoseconds and a read loop that survives short reads and EINTR.
 *
 * Who may include it: every file of shmrun_rt, the built-in operators in ops/
 * (through ops/ops.h) and the unit tests. Not shm/: shmrun_shm never includes
 * anything from runtime/, so shm/ring.c keeps its own static now_ns() (five
 * lines; putting a clock in shm/include/shmrun would make it public API, and
 * shm/ has no private header the runtime may include). Not tools/bench:
 * shmrun-bench links shmrun_shm only and uses public headers, so it keeps
 * bench_now_ns() and its own buffers.
 *
 * Designs rejected:
 *  - a type-generic growth macro (as in stb_ds or the kernel's krealloc_array
 *    wrappers): it hides the assignment of the pointer and evaluates its
 *    arguments twice; one function taking the address of the pointer keeps
 *    every call site one line and type-checked enough (the element size is
 *    sizeof(*p) at the call).
 *  - one mkdir -p per mode: the three copies differed only in mode 0700
 *    whatever the umask (checkpoint directories) or 0777 under the umask
 *    (output directories), and in whether the last name is a file.
 *  - the "ckpt-<epoch> directories in epoch order" listing: it already has one
 *    owner, shmrun_ckpt_list() in ckpt/manifest.c, and every caller uses it.
 */
#ifndef SHMRUN_RT_UTIL_H
#define SHMRUN_RT_UTIL_H

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

/*
 * shmrun_grow() - make the array *@pptr hold at least @need elements.
 * @pptr: address of the array pointer (e.g. &s->ranges, a struct range **);
 *        *@pptr may be NULL with *@cap 0. It is a void * so that any object
 *        pointer's address can be passed; the pointer is read and written
 *        with memcpy, not through a void ** (no aliasing cast).
 * @cap:  the array's capacity in elements, updated on success.
 * @need: elements wanted (not bytes). Nothing happens if @need <= *@cap.
 * @elem: bytes per element, sizeof(**pptr); must be > 0.
 * @min:  the first capacity when *@cap is 0 (elements); 0 means 1.
 *
 * The new capacity doubles from *@cap (or @min when *@cap is 0) until it is
 * at least @need; if doubling would overflow size_t or the byte count, it is
 * @need exactly. Elements past the old capacity are uninitialised (realloc).
 *
 * Return: 0 with *@pptr and *@cap updated; -ENOMEM if realloc failed or
 * @need * @elem does not fit in size_t (then nothing is allocated); -EINVAL
 * if @elem is 0. On any failure *@pptr and *@cap are unchanged: the old
 * array and its contents stay valid and owned by the caller.
 * Ownership: the array stays the caller's (free() it).
 */
int shmrun_grow(void *pptr, size_t *cap, size_t need, size_t elem, size_t min);

/*
 * shmrun_grow_u32() - shmrun_grow() for an array whose capacity is a
 * uint32_t (most of the runtime's counts are). Same parameters and returns;
 * additionally -ENOMEM if @need > UINT32_MAX. A capacity that doubled past
 * UINT32_MAX is stored as UINT32_MAX (still >= @need).
 */
static inline int shmrun_grow_u32(void *pptr, uint32_t *cap, size_t need, size_t elem, size_t min)
{
	size_t c = *cap;
	int err;

	if (need > UINT32_MAX)
		return -ENOMEM;
	err = shmrun_grow(pptr, &c, need, elem, min);
	if (!err)
		*cap = c > UINT32_MAX ? UINT32_MAX : (uint32_t)c;
	return err;
}

/* shmrun_mkdir_p() flags. */
#define SHMRUN_MKDIR_PARENT 1u /* @path names a file: make only the directories above it */
#define SHMRUN_MKDIR_EXACT  2u /* chmod each directory made to @mode: the umask does not apply */

/*
 * shmrun_mkdir_p() - mkdir -p: create each missing directory of @path, from
 * the first name down, with @mode.
 * @path:  a path below PATH_MAX bytes, absolute or relative.
 * @mode:  mode of each directory made (0700 for checkpoint directories, which
 *         may hold secrets; 0777 for outputs, under the umask).
 * @flags: SHMRUN_MKDIR_PARENT, SHMRUN_MKDIR_EXACT (with 0700 this is what
 *         shmrun_ckpt_mkdir() does for one directory), or 0.
 *
 * A name that already exists is passed over whatever it is (its mode is left
 * alone, and a file where a directory should be is not detected here: the
 * next mkdir(2) below it fails with ENOTDIR, or the caller checks the last).
 * Return: 0; -ENAMETOOLONG if @path is PATH_MAX bytes or longer; another
 * -errno of mkdir(2) or chmod(2) (-EACCES, -EROFS, -ENOTDIR, -ENOENT for an
 * empty @path, ...), from the first directory that failed. Directories made
 * before a failure stay.
 */
int shmrun_mkdir_p(const char *path, mode_t mode, unsigned flags);

/*
 * shmrun_splitmix64() - the next draw of the splitmix64 generator whose state
 * is *@x (Steele, Lea, Flood 2014, "Fast splittable pseudorandom number
 * generators"): advances *@x by the golden-ratio increment and mixes it. The
 * same seed gives the same sequence on every host; not for cryptography.
 * Used by the NEXMark generator (ops/nexmark.c) and stress's schedules.
 */
static inline uint64_t shmrun_splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/*
 * shmrun_wall_ns() - CLOCK_REALTIME in nanoseconds since the Unix epoch
 * (processing time, and the times the metrics block and logs show).
 */
static inline int64_t shmrun_wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * shmrun_now_ns() - CLOCK_MONOTONIC in nanoseconds, as a signed 64-bit count
 * (differences and deadlines are computed in int64_t; it overflows after 292
 * years of uptime). Inline: the worker loop reads it on every turn.
 */
static inline int64_t shmrun_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * shmrun_read_all() - read(2) @fd from its current offset into @buf until
 * @len bytes are read or the end of the file, retrying after EINTR and short
 * reads.
 * @fd:  a readable descriptor (blocking; a non-blocking one with no data gives
 *       -EAGAIN).
 * @buf: @len bytes, the caller's.
 * Return: bytes read, < @len only at the end of the file (0 at the end, or
 * for @len 0); -errno of read(2) (-EIO, -EISDIR, -EAGAIN, ...) — bytes read
 * before the error are in @buf but not counted.
 */
ssize_t shmrun_read_all(int fd, void *buf, size_t len);

/*
 * shmrun_cpu_relax() - one pause in a spin-wait loop (x86's PAUSE: spares the
 * sibling hyperthread and the memory pipeline); nothing on other targets.
 */
static inline void shmrun_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* A brace pattern expands into at most this many alternatives. */
#define SHMRUN_BRACE_MAX 4096

/*
 * shmrun_brace_expand() - call @emit(@arg, alternative) for every alternative
 * of the brace pattern @pat, in order, nested braces too, as glob(3) with
 * GLOB_BRACE reads it: "d/{a,b{1,2}}.txt" gives d/a.txt, d/b1.txt, d/b2.txt;
 * a '{' without its '}' is literal, a backslash escapes the next character
 * (kept in the alternative). A pattern without braces is its own single
 * alternative. Each alternative may still hold *, ? and [..]. @count (in/out)
 * counts the alternatives emitted, across calls if the caller wishes; the
 * string passed to @emit lives only for the call.
 * Return: 0; -E2BIG once *@count would pass SHMRUN_BRACE_MAX; -ENOMEM; or
 * the first non-zero value @emit returned (expansion stops there).
 */
int shmrun_brace_expand(const char *pat, int (*emit)(void *arg, const char *alt), void *arg,
			uint32_t *count);

/*
 * shmrun_fmt_u64() - @v in decimal at @out (at most 20 bytes, no NUL), as "%" PRIu64 writes it,
 * without snprintf's cost (it was two thirds of a record's): the length
 * first, then two digits at a time from the end (sequence.c, nexmark.c).
 * Return: bytes.
 */
static inline uint32_t shmrun_fmt_u64(char *out, uint64_t v)
{
	static const char pairs[201] = "00010203040506070809101112131415161718192021222324"
				       "25262728293031323334353637383940414243444546474849"
				       "50515253545556575859606162636465666768697071727374"
				       "75767778798081828384858687888990919293949596979899";
	static const uint64_t p10[20] = {
		1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull, 10000000ull,
		100000000ull, 1000000000ull, 10000000000ull, 100000000000ull, 1000000000000ull,
		10000000000000ull, 100000000000000ull, 1000000000000000ull, 10000000000000000ull,
		100000000000000000ull, 1000000000000000000ull, 10000000000000000000ull};
	uint32_t n = 1;

	while (n < 20 && v >= p10[n])
		n++;
	for (uint32_t i = n;;) {
		if (v >= 10) {
			uint32_t d = (uint32_t)(v % 100) * 2;

			out[--i] = pairs[d + 1];
			out[--i] = pairs[d];
			v /= 100;
			if (v == 0 && i == 0)
				break;
		} else {
			out[--i] = (char)('0' + v);
			break;
		}
	}
	return n;
}

/**
 * shmrun_conf_at() - where a message about a topology file points: "PATH:LINE",
 * or "PATH" alone when @line is 0 (a key not in the file: a default, --set,
 * the environment, or the job as a whole). Never "PATH:0".
 * @buf, @len: receives the text (cut short to @len - 1 bytes).
 * @path: the topology file's path; @line: 1-based line, or 0 for none.
 * Return: @buf.
 */
const char *shmrun_conf_at(char *buf, size_t len, const char *path, int line);

/** shmrun_conf_at() into a buffer that lives until the end of the enclosing
 *  block: for the arguments of one log call. */
#define SHMRUN_CONF_AT(path, line)                                                           \
	shmrun_conf_at((char[PATH_MAX + 16]){0}, PATH_MAX + 16, (path), (line))

#endif /* SHMRUN_RT_UTIL_H */
