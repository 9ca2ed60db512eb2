/*
 * tests/unit/check_ckpt_io.c: checkpoint state files (runtime/ckpt_io.h) —
 * the block layout the encoder builds, round trips through the io_uring
 * writer and the pwrite/fsync fallback, every fault of the SHMRUN_FAULT
 * switch plus a real kernel error (RLIMIT_FSIZE), the fallback when
 * io_uring_setup fails (a seccomp filter makes it fail), and the reader's
 * refusal of every kind of damage with the offset named.
 *
 * io_uring-mode tests print a note and return early when io_uring cannot be
 * set up on the machine. Every test checks that it leaks no descriptor.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include "ckpt/ckpt_io.h"
#include "ckpt/fault.h"

#define BLOCK SHMRUN_CKPT_BLOCK
#define HDR   SHMRUN_CKPT_HEADER

/* Every test's directory lives under tmpdir, made and removed by main() in the
 * runner process: it goes even when a failing test skips its teardown. */
#include "common/tmpdir.h"

static char dir[sizeof(tmpdir) + 16];
static int dfd = -1;
static int fds_at_start;

enum mode { URING, FALLBACK };

static const char *mode_name(enum mode m)
{
	return m == URING ? "io_uring" : "fallback";
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the directory stream's own descriptor */
}

static void setup(void)
{
	snprintf(dir, sizeof(dir), "%s/t.XXXXXX", tmpdir);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(dfd, 0);
	unsetenv("SHMRUN_FAULT");
	unsetenv("SHMRUN_NO_IO_URING");
	shmrun_ckpt_fault_reload();
	fds_at_start = count_fds();
}

static void teardown(void)
{
	char cmd[300];

	ck_assert_int_eq(count_fds(), fds_at_start);
	close(dfd);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
	unsetenv("SHMRUN_FAULT");
	unsetenv("SHMRUN_NO_IO_URING");
}

/* Deterministic bytes (xorshift64*). */
static void fill(unsigned char *p, size_t n, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;

	for (size_t i = 0; i < n; i++) {
		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
		p[i] = (unsigned char)((x * 0x2545f4914f6cdd1dull) >> 56);
	}
}

static unsigned char *random_bytes(size_t n, uint64_t seed)
{
	unsigned char *p = malloc(n ? n : 1);

	ck_assert_ptr_nonnull(p);
	fill(p, n, seed);
	return p;
}

static uint64_t file_size_for(size_t n)
{
	return n + (uint64_t)((n + BLOCK - 1) / BLOCK) * HDR;
}

/* Remove every file of the test directory: each writer_for() starts empty. */
static void clean_dir(void)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fdopendir(fd);
	struct dirent *e;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			ck_assert_int_eq(unlinkat(dfd, e->d_name, 0), 0);
	closedir(d);
}

/*
 * A writer in @m mode with @fault as SHMRUN_FAULT, in an empty directory. Returns false (after a
 * printed note) when io_uring is wanted but unavailable: the test then skips.
 */
static bool writer_for(struct shmrun_ckpt_writer *w, enum mode m, unsigned depth, const char *fault)
{
	char why[256];

	clean_dir();
	if (m == FALLBACK)
		setenv("SHMRUN_NO_IO_URING", "1", 1);
	else
		unsetenv("SHMRUN_NO_IO_URING");
	if (fault)
		setenv("SHMRUN_FAULT", fault, 1);
	else
		unsetenv("SHMRUN_FAULT");
	shmrun_ckpt_fault_reload();
	ck_assert_int_eq(shmrun_ckpt_writer_init(w, depth, why, sizeof(why)), 0);
	if (m == URING && !shmrun_ckpt_writer_uses_uring(w)) {
		printf("note: io_uring unavailable (%s): io_uring-mode test skipped\n", why);
		shmrun_ckpt_writer_close(w);
		return false;
	}
	if (m == FALLBACK) {
		ck_assert(!shmrun_ckpt_writer_uses_uring(w));
		ck_assert_ptr_nonnull(strstr(why, "SHMRUN_NO_IO_URING=1"));
	} else {
		ck_assert_str_eq(why, "");
	}
	return true;
}

/* Append @data in pieces of varying size (1 .. @piece bytes; 0 = all at once). */
static void encode(struct shmrun_ckpt_buf *buf, const unsigned char *data, size_t n, size_t piece)
{
	uint64_t x = 12345;
	size_t off = 0;

	shmrun_ckpt_buf_init(buf);
	while (off < n) {
		size_t k = n - off;

		if (piece) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			k = 1 + (size_t)(x >> 33) % piece;
			if (k > n - off)
				k = n - off;
		}
		ck_assert_int_eq(shmrun_ckpt_buf_append(buf, data + off, k), 0);
		off += k;
	}
	ck_assert_int_eq(shmrun_ckpt_buf_seal(buf), 0);
	ck_assert_uint_eq(shmrun_ckpt_buf_len(buf), n);
}

/* The whole file @name, read back independently of the reader under test. */
static unsigned char *slurp(const char *name, size_t *len)
{
	struct stat st;
	unsigned char *p;
	int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	p = malloc(st.st_size ? (size_t)st.st_size : 1);
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(pread(fd, p, (size_t)st.st_size, 0), st.st_size);
	close(fd);
	*len = (size_t)st.st_size;
	return p;
}

static uint32_t le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const unsigned char *p)
{
	return le32(p) | (uint64_t)le32(p + 4) << 32;
}

/*
 * Check the file @name holds @data (@n bytes) in the documented format, that
 * @size and @sum are its size and XXH64, and that the reader returns @data.
 */
static void check_file(const char *name, const unsigned char *data, size_t n, uint64_t size,
		       uint64_t sum)
{
	size_t flen, off = 0, pos = 0, b = 0, len;
	unsigned char *f = slurp(name, &flen);
	void *back;
	char why[256];

	ck_assert_uint_eq(flen, file_size_for(n));
	ck_assert_uint_eq(size, flen);
	ck_assert_uint_eq(sum, XXH64(f, flen, 0));
	while (off < flen) {
		uint32_t plen = le32(f + off + 4);

		ck_assert_uint_eq(le32(f + off), 0x4b424853u);
		ck_assert_int_eq(memcmp(f + off, "SHBK", 4), 0);
		/* Every block but the last is full; none is empty. */
		ck_assert_uint_eq(plen, n - pos < BLOCK ? n - pos : BLOCK);
		ck_assert_uint_eq(le64(f + off + 8), XXH64(f + off + HDR, plen, 0));
		ck_assert_int_eq(memcmp(f + off + HDR, data + pos, plen), 0);
		off += HDR + plen;
		pos += plen;
		b++;
	}
	ck_assert_uint_eq(pos, n);
	ck_assert_uint_eq(b, (n + BLOCK - 1) / BLOCK);
	free(f);

	ck_assert_int_eq(shmrun_ckpt_read_file(dfd, name, size, sum, &back, &len, why, sizeof(why)),
			 0);
	ck_assert_str_eq(why, "");
	ck_assert_ptr_nonnull(back);
	ck_assert_uint_eq(len, n);
	ck_assert_int_eq(memcmp(back, data, n), 0);
	free(back);
}

/* Encode and write @data as @name with @w, then check the file. */
static void write_and_check(struct shmrun_ckpt_writer *w, const char *name,
			    const unsigned char *data, size_t n, size_t piece)
{
	struct shmrun_ckpt_buf buf;
	uint64_t size = 0, sum = 0;

	encode(&buf, data, n, piece);
	ck_assert_int_eq(shmrun_ckpt_write_file(w, dfd, name, &buf, &size, &sum), 0);
	ck_assert_uint_eq(size, shmrun_ckpt_buf_file_size(&buf));
	shmrun_ckpt_buf_free(&buf);
	check_file(name, data, n, size, sum);
}

static bool file_exists(const char *name)
{
	struct stat st;

	return fstatat(dfd, name, &st, 0) == 0;
}

static void expect_why(const char *why, const char *part)
{
	ck_assert_msg(strstr(why, part), "why \"%s\" lacks \"%s\"", why, part);
}

/* ---- encoder ------------------------------------------------------------------ */

START_TEST(blocks_are_full_but_the_last)
{
	size_t n = 2 * BLOCK + 1000;
	unsigned char *data = random_bytes(n, 1);
	const struct iovec *iov;
	struct shmrun_ckpt_buf buf;
	size_t nb;

	shmrun_ckpt_buf_init(&buf);
	ck_assert_int_eq(shmrun_ckpt_buf_iov(&buf, &iov, &nb), -EINVAL); /* not sealed */
	ck_assert_int_eq(shmrun_ckpt_buf_append(&buf, data, n), 0);
	ck_assert_uint_eq(shmrun_ckpt_buf_file_size(&buf), n + 3 * HDR);
	ck_assert_int_eq(shmrun_ckpt_buf_seal(&buf), 0);
	ck_assert_int_eq(shmrun_ckpt_buf_seal(&buf), 0); /* twice is harmless */
	ck_assert_int_eq(shmrun_ckpt_buf_iov(&buf, &iov, &nb), 0);
	ck_assert_uint_eq(nb, 3);
	for (size_t i = 0; i < nb; i++) {
		const unsigned char *h = iov[i].iov_base;
		size_t plen = i < 2 ? BLOCK : 1000;

		ck_assert_uint_eq(iov[i].iov_len, HDR + plen);
		ck_assert_uint_eq(le32(h), SHMRUN_CKPT_MAGIC);
		ck_assert_uint_eq(le32(h + 4), plen);
		ck_assert_uint_eq(le64(h + 8), XXH64(data + i * BLOCK, plen, 0));
		ck_assert_int_eq(memcmp(h + HDR, data + i * BLOCK, plen), 0);
	}
	/* Sealed: read-only. */
	ck_assert_int_eq(shmrun_ckpt_buf_append(&buf, data, 1), -EINVAL);
	ck_assert_int_eq(shmrun_ckpt_buf_append(&buf, data, 0), -EINVAL);
	ck_assert_uint_eq(shmrun_ckpt_buf_len(&buf), n);
	shmrun_ckpt_buf_free(&buf);
	free(data);
}
END_TEST

START_TEST(pieces_encode_like_one_append)
{
	size_t n = 3 * BLOCK + 77;
	unsigned char *data = random_bytes(n, 2);
	struct shmrun_ckpt_buf one, many;
	const struct iovec *a, *b;
	size_t na, nb;

	encode(&one, data, n, 0);
	encode(&many, data, n, 70000); /* pieces straddle block boundaries */
	ck_assert_int_eq(shmrun_ckpt_buf_iov(&one, &a, &na), 0);
	ck_assert_int_eq(shmrun_ckpt_buf_iov(&many, &b, &nb), 0);
	ck_assert_uint_eq(na, 4);
	ck_assert_uint_eq(nb, na);
	for (size_t i = 0; i < na; i++) {
		ck_assert_uint_eq(a[i].iov_len, b[i].iov_len);
		ck_assert_int_eq(memcmp(a[i].iov_base, b[i].iov_base, a[i].iov_len), 0);
	}
	shmrun_ckpt_buf_free(&one);
	shmrun_ckpt_buf_free(&many);
	free(data);
}
END_TEST

START_TEST(empty_stream_has_no_blocks)
{
	struct shmrun_ckpt_buf buf;
	const struct iovec *iov = (const void *)1;
	size_t nb = 99;

	shmrun_ckpt_buf_init(&buf);
	ck_assert_int_eq(shmrun_ckpt_buf_append(&buf, NULL, 0), 0);
	ck_assert_int_eq(shmrun_ckpt_buf_seal(&buf), 0);
	ck_assert_int_eq(shmrun_ckpt_buf_iov(&buf, &iov, &nb), 0);
	ck_assert_uint_eq(nb, 0);
	ck_assert_ptr_null(iov);
	ck_assert_uint_eq(shmrun_ckpt_buf_file_size(&buf), 0);
	shmrun_ckpt_buf_free(&buf);
}
END_TEST

START_TEST(reset_reuses_blocks)
{
	size_t n = BLOCK + 5;
	unsigned char *data = random_bytes(n, 3);
	struct shmrun_ckpt_buf buf;
	const struct iovec *iov;
	void *first;
	size_t nb;

	encode(&buf, data, n, 0);
	first = buf.iov[0].iov_base;
	shmrun_ckpt_buf_reset(&buf);
	ck_assert_uint_eq(shmrun_ckpt_buf_len(&buf), 0);
	ck_assert_uint_eq(buf.nalloc, 2); /* kept */
	fill(data, n, 4);
	ck_assert_int_eq(shmrun_ckpt_buf_append(&buf, data, 10), 0);
	ck_assert_int_eq(shmrun_ckpt_buf_seal(&buf), 0);
	ck_assert_int_eq(shmrun_ckpt_buf_iov(&buf, &iov, &nb), 0);
	ck_assert_uint_eq(nb, 1);
	ck_assert_ptr_eq(iov[0].iov_base, first);
	ck_assert_uint_eq(iov[0].iov_len, HDR + 10);
	ck_assert_uint_eq(le64((const unsigned char *)first + 8), XXH64(data, 10, 0));
	shmrun_ckpt_buf_free(&buf);
	free(data);
}
END_TEST

/* ---- round trips ---------------------------------------------------------------- */

static void round_trips(enum mode m, unsigned depth)
{
	static const size_t sizes[] = {0,	  1,	     13,	 BLOCK - 1, BLOCK,
				       BLOCK + 1, 2 * BLOCK, 5767168 + 7}; /* last: 5.5 MiB + 7 */
	struct shmrun_ckpt_writer w;
	unsigned long writes, fsyncs;
	size_t blocks = 0;

	if (!writer_for(&w, m, depth, NULL))
		return;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		unsigned char *data = random_bytes(sizes[i], 100 + i);
		char name[64];

		snprintf(name, sizeof(name), "t%zu.state", i);
		write_and_check(&w, name, data, sizes[i], i % 2 ? 70000 : 0);
		blocks += (sizes[i] + BLOCK - 1) / BLOCK;
		free(data);
	}
	/* One submission per block, one fsync per file: nothing retried. */
	shmrun_ckpt_fault_counts(&writes, &fsyncs);
	ck_assert_uint_eq(writes, blocks);
	ck_assert_uint_eq(fsyncs, sizeof(sizes) / sizeof(sizes[0]));
	/* O_EXCL: an existing file is never overwritten. */
	{
		struct shmrun_ckpt_buf buf;

		encode(&buf, (const unsigned char *)"x", 1, 0);
		ck_assert_int_eq(shmrun_ckpt_write_file(&w, dfd, "t1.state", &buf, NULL, NULL),
				 -EEXIST);
		shmrun_ckpt_buf_reset(&buf);
		ck_assert_int_eq(shmrun_ckpt_write_file(&w, dfd, "u.state", &buf, NULL, NULL),
				 -EINVAL); /* unsealed */
		shmrun_ckpt_buf_free(&buf);
	}
	shmrun_ckpt_writer_close(&w);
}

START_TEST(round_trip_uring)
{
	round_trips(URING, 0);
}
END_TEST

START_TEST(round_trip_uring_depth_1)
{
	round_trips(URING, 1);
}
END_TEST

START_TEST(round_trip_fallback)
{
	round_trips(FALLBACK, 0);
}
END_TEST

/* ---- fallback ----------------------------------------------------------------- */

START_TEST(bad_fault_spec_is_refused)
{
	static const char *const bad[] = {"write:EIO", "write:EWHAT:1", "short:0",
					  "short:x",   "nonsense:1",	"write:EIO:1,"};
	struct shmrun_ckpt_writer w;
	char why[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setenv("SHMRUN_FAULT", bad[i], 1);
		shmrun_ckpt_fault_reload();
		ck_assert_int_eq(shmrun_ckpt_writer_init(&w, 4, why, sizeof(why)), -EINVAL);
		expect_why(why, "SHMRUN_FAULT=");
		expect_why(why, bad[i]);
	}
	setenv("SHMRUN_FAULT", "write:EIO:3,short:1,fsync:ENOSPC:2,eintr:4,eagain:5", 1);
	shmrun_ckpt_fault_reload();
	ck_assert_int_eq(shmrun_ckpt_writer_init(&w, 4, why, sizeof(why)), 0);
	shmrun_ckpt_writer_close(&w);
	ck_assert_int_eq(shmrun_ckpt_writer_init(&w, SHMRUN_CKPT_DEPTH_MAX + 1, why, sizeof(why)),
			 -EINVAL);
}
END_TEST

/* Make io_uring_setup(2) fail with @err in this process (seccomp filter). */
static bool deny_io_uring_setup(int err)
{
	struct sock_filter f[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (unsigned)err),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};

	return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
	       prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

START_TEST(setup_failure_falls_back)
{
	static const struct {
		int err;
		const char *hint;
	} cases[] = {
	    {ENOSYS, "io_uring_setup failed with ENOSYS: a kernel built without io_uring"},
	    {EPERM, "io_uring_setup failed with EPERM"},
	    {ENOMEM, "io_uring_setup failed with ENOMEM"}, /* + RLIMIT_MEMLOCK when limited */
	};
	unsigned char *data = random_bytes(BLOCK + 3, 5);

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int status;
		pid_t pid = fork();

		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			struct shmrun_ckpt_writer w;
			char why[256], name[32];

			if (!deny_io_uring_setup(cases[i].err))
				_exit(77);
			ck_assert_int_eq(shmrun_ckpt_writer_init(&w, 8, why, sizeof(why)), 0);
			ck_assert(!shmrun_ckpt_writer_uses_uring(&w));
			expect_why(why, cases[i].hint);
			expect_why(why, "io_uring is unavailable: ");
			expect_why(why, "; checkpoints use pwrite+fsync");
			ck_assert_ptr_null(strchr(why, '\n')); /* one line */
			snprintf(name, sizeof(name), "f%zu.state", i);
			write_and_check(&w, name, data, BLOCK + 3, 0);
			shmrun_ckpt_writer_close(&w);
			_exit(0);
		}
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
			printf("note: seccomp filters unavailable: fallback test skipped\n");
			break;
		}
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			      "child for errno %d failed (status 0x%x)", cases[i].err, status);
	}
	free(data);
}
END_TEST

/*
 * Every cause shmrun_ckpt_uring_why() tells apart, with what to do: the
 * sysctl cases cannot be set up here (only root on the host can write
 * kernel.io_uring_disabled, and it would change every process), nor ENOMEM
 * from RLIMIT_MEMLOCK (root's rings are not counted; memlock.sh makes it
 * as nobody).
 */
START_TEST(uring_why_names_the_cause)
{
	static const struct {
		int err, sysctl;
		unsigned long long memlock;
		const char *cause;
	} cases[] = {
	    {-EPERM, 0, RLIM_INFINITY, "failed with EPERM: a seccomp filter (Docker's default"},
	    {-EPERM, -1, RLIM_INFINITY, "allow io_uring_setup/enter/register"},
	    {-EACCES, 0, RLIM_INFINITY, "failed with EACCES: a seccomp filter"},
	    {-EPERM, 1, RLIM_INFINITY, "kernel.io_uring_disabled=1 allows it only to the group"},
	    {-EPERM, 2, RLIM_INFINITY,
	     "kernel.io_uring_disabled=2 disables it; set the sysctl to 0"},
	    {0, 2, RLIM_INFINITY, "kernel.io_uring_disabled=2 disables it for every process"},
	    {-ENOSYS, 0, RLIM_INFINITY,
	     "failed with ENOSYS: a kernel built without io_uring, or a seccomp"},
	    {-ENOMEM, 0, 64 * 1024, "failed with ENOMEM: RLIMIT_MEMLOCK is 64 KiB, too low"},
	    {-ENOMEM, 0, 0, "RLIMIT_MEMLOCK is 0 KiB"},
	    {-ENOMEM, 0, RLIM_INFINITY, "failed with ENOMEM: Cannot allocate memory;"},
	    {-EMFILE, 0, RLIM_INFINITY, "failed with error: Too many open files;"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char why[512], small[40];

		shmrun_ckpt_uring_why(cases[i].err, cases[i].sysctl, cases[i].memlock, why,
				      sizeof(why));
		ck_assert_msg(!strncmp(why, "io_uring is unavailable: ", 25), "case %zu: %s", i,
			      why);
		ck_assert_msg(strstr(why, cases[i].cause), "case %zu: '%s' lacks '%s'", i, why,
			      cases[i].cause);
		ck_assert_msg(strstr(why, "; checkpoints use pwrite+fsync"), "case %zu: %s", i,
			      why);
		ck_assert_ptr_null(strchr(why, '\n'));
		ck_assert_int_lt(strlen(why), 255); /* fits the callers' 256-byte buffers */
		/* a short buffer truncates, terminated */
		shmrun_ckpt_uring_why(cases[i].err, cases[i].sysctl, cases[i].memlock, small,
				      sizeof(small));
		ck_assert_uint_eq(strlen(small), sizeof(small) - 1);
	}
	/* the memlock hint only for ENOMEM; the sysctl only when it is set */
	{
		char why[512];

		shmrun_ckpt_uring_why(-EPERM, 0, 0, why, sizeof(why));
		ck_assert_ptr_null(strstr(why, "RLIMIT_MEMLOCK"));
		ck_assert_ptr_null(strstr(why, "io_uring_disabled"));
	}
}
END_TEST

/* ---- faults ------------------------------------------------------------------- */

/* A 5.5 MiB stream (6 blocks) written under @fault: returns write_file's result. */
static int write_under(struct shmrun_ckpt_writer *w, const char *name, const unsigned char *data,
		       size_t n)
{
	struct shmrun_ckpt_buf buf;
	uint64_t size = 0, sum = 0;
	int err;

	encode(&buf, data, n, 0);
	err = shmrun_ckpt_write_file(w, dfd, name, &buf, &size, &sum);
	shmrun_ckpt_buf_free(&buf);
	if (!err)
		check_file(name, data, n, size, sum);
	return err;
}

#define FAULT_BYTES (5767168 + 7) /* 6 blocks */

/*
 * Write under an error fault: the call fails with @want, the partial file can
 * be removed, and the same writer then writes a correct file (nothing of the
 * failed call is left in flight).
 */
static void error_fault(enum mode m, unsigned depth, const char *fault, int want,
			unsigned long max_writes)
{
	struct shmrun_ckpt_writer w;
	unsigned char *data = random_bytes(FAULT_BYTES, 6);
	unsigned long writes;

	if (!writer_for(&w, m, depth, fault))
		goto out;
	ck_assert_int_eq(write_under(&w, "bad.state", data, FAULT_BYTES), want);
	shmrun_ckpt_fault_counts(&writes, NULL);
	ck_assert_msg(writes <= max_writes, "%s %s: %lu writes submitted, at most %lu expected",
		      mode_name(m), fault, writes, max_writes);
	ck_assert(file_exists("bad.state"));
	ck_assert_int_eq(unlinkat(dfd, "bad.state", 0), 0);
	ck_assert_int_eq(write_under(&w, "good.state", data, FAULT_BYTES), 0);
	shmrun_ckpt_writer_close(&w);
out:
	free(data);
}

START_TEST(write_eio_aborts)
{
	/* Depth 2: after the 3rd submission fails nothing new is submitted. */
	error_fault(URING, 2, "write:EIO:3", -EIO, 4);
	error_fault(URING, 16, "write:EIO:3", -EIO, 6);
	error_fault(FALLBACK, 0, "write:EIO:3", -EIO, 3);
}
END_TEST

START_TEST(write_enospc_aborts)
{
	error_fault(URING, 4, "write:ENOSPC:1", -ENOSPC, 4);
	error_fault(FALLBACK, 0, "write:ENOSPC:1", -ENOSPC, 1);
}
END_TEST

START_TEST(fsync_eio_aborts)
{
	/* Every write completed: the file is whole, yet the call must fail. */
	error_fault(URING, 4, "fsync:EIO:1", -EIO, 6);
	error_fault(FALLBACK, 0, "fsync:EIO:1", -EIO, 6);
}
END_TEST

/* Write under a retry fault: the file is correct and @extra writes were resubmitted. */
static void retry_fault(enum mode m, unsigned depth, const char *fault, unsigned long extra)
{
	struct shmrun_ckpt_writer w;
	unsigned char *data = random_bytes(FAULT_BYTES, 7);
	unsigned long writes;

	if (!writer_for(&w, m, depth, fault))
		goto out;
	ck_assert_int_eq(write_under(&w, "s.state", data, FAULT_BYTES), 0);
	shmrun_ckpt_fault_counts(&writes, NULL);
	ck_assert_uint_eq(writes, 6 + extra);
	shmrun_ckpt_writer_close(&w);
out:
	free(data);
}

START_TEST(short_write_is_resubmitted)
{
	retry_fault(URING, 4, "short:1", 1);
	retry_fault(URING, 4, "short:1,short:7", 2); /* the resubmission itself short */
	retry_fault(FALLBACK, 0, "short:1", 1);
	retry_fault(FALLBACK, 0, "short:6,short:7", 2);
}
END_TEST

START_TEST(eintr_and_eagain_are_retried)
{
	retry_fault(URING, 4, "eintr:2", 1);
	retry_fault(URING, 4, "eintr:2,eagain:3,eintr:7", 3);
	retry_fault(FALLBACK, 0, "eintr:2", 1);
	retry_fault(FALLBACK, 0, "eagain:1,eagain:2", 2);
}
END_TEST

/*
 * Regression: under a signal storm io_uring completed writes with -ECANCELED
 * (io-wq could not start a worker) and the checkpoint failed. A request that
 * never ran is retried, for writes and for the fsync alike.
 */
START_TEST(ecanceled_is_retried)
{
	for (enum mode m = URING; m <= FALLBACK; m++) {
		struct shmrun_ckpt_writer w;
		unsigned char *data = random_bytes(FAULT_BYTES, 11);
		unsigned long writes, fsyncs;

		if (writer_for(&w, m, 4, "write:ECANCELED:2,fsync:ECANCELED:1")) {
			ck_assert_int_eq(write_under(&w, "c.state", data, FAULT_BYTES), 0);
			shmrun_ckpt_fault_counts(&writes, &fsyncs);
			ck_assert_uint_eq(writes, 7);
			ck_assert_uint_eq(fsyncs, 2);
			shmrun_ckpt_writer_close(&w);
		}
		free(data);
	}
}
END_TEST

/* A real error from the kernel, not the switch: RLIMIT_FSIZE makes writes past it fail -EFBIG. */
static void real_efbig(enum mode m)
{
	struct shmrun_ckpt_writer w;
	unsigned char *data = random_bytes(FAULT_BYTES, 8);
	struct rlimit old, lim;

	if (!writer_for(&w, m, 4, NULL))
		goto out;
	ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
	lim = old;
	lim.rlim_cur = 2 * BLOCK + 100;
	signal(SIGXFSZ, SIG_IGN);
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
	ck_assert_int_eq(write_under(&w, "big.state", data, FAULT_BYTES), -EFBIG);
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
	ck_assert_int_eq(unlinkat(dfd, "big.state", 0), 0);
	ck_assert_int_eq(write_under(&w, "big.state", data, FAULT_BYTES), 0);
	shmrun_ckpt_writer_close(&w);
out:
	free(data);
}

START_TEST(real_efbig_aborts)
{
	real_efbig(URING);
	real_efbig(FALLBACK);
}
END_TEST

static void on_signal(int sig)
{
	(void)sig;
}

/*
 * Signals without SA_RESTART every few microseconds interrupt every wait of
 * the writer (io_uring_enter, pwrite, fsync): the files still come out whole.
 */
static void signal_storm(enum mode m)
{
	struct sigaction sa = {.sa_handler = on_signal}; /* no SA_RESTART */
	struct shmrun_ckpt_writer w;
	unsigned char *data = random_bytes(FAULT_BYTES, 10);
	pid_t parent = getpid(), pid, r;
	int status;

	if (!writer_for(&w, m, 4, NULL))
		goto out;
	ck_assert_int_eq(sigaction(SIGUSR1, &sa, NULL), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive a failed test */
		if (getppid() != parent)
			_exit(0);
		for (;;) {
			kill(parent, SIGUSR1);
			usleep(20);
		}
	}
	for (int i = 0; i < 10; i++) {
		char name[32];

		snprintf(name, sizeof(name), "storm%d.state", i);
		ck_assert_int_eq(write_under(&w, name, data, FAULT_BYTES), 0);
	}
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	/* a SIGUSR1 sent before the kill may still interrupt the wait (no
	 * SA_RESTART): wait again, as the writer does */
	while ((r = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
		;
	ck_assert_int_eq(r, pid);
	signal(SIGUSR1, SIG_DFL);
	shmrun_ckpt_writer_close(&w);
out:
	free(data);
}

START_TEST(signal_storm_still_writes)
{
	signal_storm(URING);
	signal_storm(FALLBACK);
}
END_TEST

/* ---- small files ---------------------------------------------------------------- */

static void bytes_files(enum mode m)
{
	static const char text[] = "version 1\nepoch 7\n";
	struct shmrun_ckpt_writer w;
	unsigned long fsyncs;
	size_t len;
	unsigned char *back;

	if (!writer_for(&w, m, 2, NULL))
		return;
	ck_assert_int_eq(shmrun_ckpt_write_bytes(&w, dfd, "M.tmp", "old", 3, 0), 0);
	ck_assert_int_eq(shmrun_ckpt_write_bytes(&w, dfd, "M.tmp", text, sizeof(text) - 1, 0),
			 -EEXIST);
	ck_assert_int_eq(shmrun_ckpt_write_bytes(&w, dfd, "M.tmp", text, sizeof(text) - 1, 0x8),
			 -EINVAL);
	ck_assert_int_eq(
	    shmrun_ckpt_write_bytes(&w, dfd, "M.tmp", text, sizeof(text) - 1, SHMRUN_CKPT_TRUNC),
	    0);
	ck_assert_int_eq(renameat(dfd, "M.tmp", dfd, "MANIFEST"), 0);
	ck_assert_int_eq(shmrun_ckpt_fsync_dir(dfd), 0);
	back = slurp("MANIFEST", &len);
	ck_assert_uint_eq(len, sizeof(text) - 1);
	ck_assert_int_eq(memcmp(back, text, len), 0);
	free(back);
	ck_assert_int_eq(shmrun_ckpt_write_bytes(&w, dfd, "empty", NULL, 0, 0), 0);
	back = slurp("empty", &len);
	ck_assert_uint_eq(len, 0);
	free(back);
	shmrun_ckpt_fault_counts(NULL, &fsyncs);
	ck_assert_uint_eq(fsyncs, 4); /* three files and the directory */
	ck_assert_int_eq(shmrun_ckpt_fsync_dir(-1), -EBADF);
	shmrun_ckpt_writer_close(&w);

	/* Faults reach small files and the directory fsync too. */
	if (!writer_for(&w, m, 2, "write:EIO:1,fsync:EIO:2"))
		return;
	ck_assert_int_eq(shmrun_ckpt_write_bytes(&w, dfd, "a", text, 5, 0), -EIO);
	ck_assert_int_eq(shmrun_ckpt_write_bytes(&w, dfd, "b", text, 5, 0), 0); /* fsync 1 */
	ck_assert_int_eq(shmrun_ckpt_fsync_dir(dfd), -EIO);			/* fsync 2 */
	ck_assert_int_eq(shmrun_ckpt_fsync_dir(dfd), 0);
	shmrun_ckpt_writer_close(&w);
}

START_TEST(small_files_and_directory_fsync)
{
	bytes_files(URING);
	bytes_files(FALLBACK);
}
END_TEST

/* ---- reader --------------------------------------------------------------------- */

#define DAMAGE_BYTES (3 * BLOCK + BLOCK / 2)	   /* 4 blocks, the last half full */
#define OFF(b)	     ((size_t)(b) * (HDR + BLOCK)) /* file offset of block b's header */

static uint64_t good_size, good_sum;

/* A fresh damage.state of DAMAGE_BYTES, its size and XXH64 in good_size/good_sum. */
static void make_damage_file(void)
{
	struct shmrun_ckpt_writer w;
	struct shmrun_ckpt_buf buf;
	unsigned char *data = random_bytes(DAMAGE_BYTES, 9);

	ck_assert(writer_for(&w, FALLBACK, 0, NULL));
	encode(&buf, data, DAMAGE_BYTES, 0);
	ck_assert_int_eq(
	    shmrun_ckpt_write_file(&w, dfd, "damage.state", &buf, &good_size, &good_sum), 0);
	shmrun_ckpt_buf_free(&buf);
	shmrun_ckpt_writer_close(&w);
	free(data);
	ck_assert_uint_eq(good_size, OFF(3) + HDR + BLOCK / 2);
}

/* Flip one bit of the byte at @off. */
static void flip(size_t off, unsigned char bit)
{
	int fd = openat(dfd, "damage.state", O_RDWR | O_CLOEXEC);
	unsigned char c;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &c, 1, (off_t)off), 1);
	c ^= bit;
	ck_assert_int_eq(pwrite(fd, &c, 1, (off_t)off), 1);
	close(fd);
}

static void cut(size_t len)
{
	int fd = openat(dfd, "damage.state", O_RDWR | O_CLOEXEC);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)len), 0);
	close(fd);
}

/* The reader refuses damage.state with -EBADMSG and a why holding each of @parts. */
static void expect_refused(uint64_t size, uint64_t sum, const char *p1, const char *p2)
{
	void *data = (void *)1;
	size_t len = 99;
	char why[256];

	ck_assert_int_eq(
	    shmrun_ckpt_read_file(dfd, "damage.state", size, sum, &data, &len, why, sizeof(why)),
	    -EBADMSG);
	ck_assert_ptr_null(data);
	ck_assert_uint_eq(len, 0);
	expect_why(why, p1);
	if (p2)
		expect_why(why, p2);
}

START_TEST(reader_refuses_truncation)
{
	char a[128], b[128];

	/* Inside block 2's payload. */
	make_damage_file();
	cut(OFF(2) + HDR + 100);
	snprintf(a, sizeof(a), "truncated block 2 at offset %zu", OFF(2));
	snprintf(b, sizeof(b), "(size %zu != %llu in MANIFEST)", OFF(2) + HDR + 100,
		 (unsigned long long)good_size);
	expect_refused(good_size, good_sum, a, b);

	/* Inside block 3's header. */
	make_damage_file();
	cut(OFF(3) + 7);
	snprintf(a, sizeof(a), "truncated block header at offset %zu: 7 of 16 bytes", OFF(3));
	expect_refused(good_size, good_sum, a, "!= ");

	/* Exactly at a block boundary: every block left verifies; only the size tells. */
	make_damage_file();
	cut(OFF(3));
	snprintf(a, sizeof(a), "size %zu != %llu in MANIFEST", OFF(3),
		 (unsigned long long)good_size);
	snprintf(b, sizeof(b), "ends at offset %zu, after 3 whole blocks", OFF(3));
	expect_refused(good_size, good_sum, a, b);

	/* Empty. */
	cut(0);
	expect_refused(good_size, good_sum, "size 0 != ", NULL);
}
END_TEST

START_TEST(reader_refuses_flipped_payload_byte)
{
	char a[128];

	make_damage_file();
	flip(OFF(2) + HDR + 12345, 0x10);
	snprintf(a, sizeof(a), "block 2 at offset %zu: checksum mismatch", OFF(2));
	expect_refused(good_size, good_sum, a, NULL);

	make_damage_file();
	flip(good_size - 1, 0x01); /* the very last byte */
	snprintf(a, sizeof(a), "block 3 at offset %zu: checksum mismatch", OFF(3));
	expect_refused(good_size, good_sum, a, NULL);
}
END_TEST

START_TEST(reader_refuses_flipped_header_byte)
{
	char a[128];

	/* Magic. */
	make_damage_file();
	flip(OFF(1) + 2, 0x04);
	snprintf(a, sizeof(a), "block 1 at offset %zu: bad magic", OFF(1));
	expect_refused(good_size, good_sum, a, NULL);

	/* Stored checksum. */
	make_damage_file();
	flip(OFF(3) + 15, 0x80);
	snprintf(a, sizeof(a), "block 3 at offset %zu: checksum mismatch", OFF(3));
	expect_refused(good_size, good_sum, a, NULL);

	/* Length beyond the block limit. */
	make_damage_file();
	flip(OFF(0) + 6, 0x20);
	snprintf(a, sizeof(a), "block 0 at offset 0: payload length %u > %u", BLOCK + (0x20u << 16),
		 BLOCK);
	expect_refused(good_size, good_sum, a, NULL);

	/* Length zeroed (0x100000 -> 0): block 2's checksum no longer matches. */
	make_damage_file();
	flip(OFF(2) + 6, 0x10);
	snprintf(a, sizeof(a), "block 2 at offset %zu: checksum mismatch", OFF(2));
	expect_refused(good_size, good_sum, a, NULL);

	/* The last block's length grown past the end (0x80000 -> 0xc0000). */
	make_damage_file();
	flip(OFF(3) + 6, 0x04);
	snprintf(a, sizeof(a), "truncated block 3 at offset %zu: needs %u payload bytes", OFF(3),
		 0xc0000u);
	expect_refused(good_size, good_sum, a, NULL);

	/* The last block's length shortened (0x80000 -> 0): the bytes after it are no header. */
	make_damage_file();
	flip(OFF(3) + 6, 0x08);
	snprintf(a, sizeof(a), "block 3 at offset %zu: checksum mismatch", OFF(3));
	expect_refused(good_size, good_sum, a, NULL);
}
END_TEST

START_TEST(reader_refuses_wrong_expectations)
{
	char a[128], b[128];
	void *data;
	size_t len;
	char why[128];

	make_damage_file();
	/* Larger than the MANIFEST says: refused without reading. */
	snprintf(a, sizeof(a), "size %llu != %llu in MANIFEST", (unsigned long long)good_size,
		 (unsigned long long)good_size - 1);
	expect_refused(good_size - 1, good_sum, a, NULL);
	/* Smaller than the MANIFEST says. */
	snprintf(a, sizeof(a), "size %llu != %llu in MANIFEST", (unsigned long long)good_size,
		 (unsigned long long)good_size + 16);
	snprintf(b, sizeof(b), "ends at offset %llu, after 4 whole blocks",
		 (unsigned long long)good_size);
	expect_refused(good_size + 16, good_sum, a, b);
	/* Another checksum: every block verifies, the file is not the one named. */
	snprintf(a, sizeof(a), "xxh64 0x%016llx != 0x%016llx in MANIFEST",
		 (unsigned long long)good_sum, (unsigned long long)(good_sum ^ 1));
	expect_refused(good_size, good_sum ^ 1, a, NULL);
	/* The good file still reads. */
	ck_assert_int_eq(shmrun_ckpt_read_file(dfd, "damage.state", good_size, good_sum, &data,
					       &len, why, sizeof(why)),
			 0);
	ck_assert_uint_eq(len, DAMAGE_BYTES);
	free(data);
	/* Missing file. */
	ck_assert_int_eq(
	    shmrun_ckpt_read_file(dfd, "nope.state", 0, 0, &data, &len, why, sizeof(why)), -ENOENT);
	ck_assert_ptr_null(data);
	expect_why(why, "nope.state");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ckpt_io");
	TCase *enc = tcase_create("encoder");
	TCase *rt = tcase_create("round_trip");
	TCase *fb = tcase_create("fallback");
	TCase *flt = tcase_create("faults");
	TCase *sm = tcase_create("small_files");
	TCase *rd = tcase_create("reader");
	TCase *all[] = {enc, rt, fb, flt, sm, rd};
	SRunner *sr;
	int failed;

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		tcase_add_checked_fixture(all[i], setup, teardown);
		tcase_set_timeout(all[i], 60);
		suite_add_tcase(s, all[i]);
	}
	tcase_add_test(enc, blocks_are_full_but_the_last);
	tcase_add_test(enc, pieces_encode_like_one_append);
	tcase_add_test(enc, empty_stream_has_no_blocks);
	tcase_add_test(enc, reset_reuses_blocks);
	/* these inject faults or count operations through the fault switch:
	 * registered only in a build that has it (ckpt/fault.h) */
	if (shmrun_fault_injection()) {
		tcase_add_test(rt, round_trip_uring);
		tcase_add_test(rt, round_trip_uring_depth_1);
		tcase_add_test(rt, round_trip_fallback);
		tcase_add_test(fb, bad_fault_spec_is_refused);
		tcase_add_test(flt, write_eio_aborts);
		tcase_add_test(flt, write_enospc_aborts);
		tcase_add_test(flt, fsync_eio_aborts);
		tcase_add_test(flt, short_write_is_resubmitted);
		tcase_add_test(flt, eintr_and_eagain_are_retried);
		tcase_add_test(flt, ecanceled_is_retried);
		tcase_add_test(sm, small_files_and_directory_fsync);
	}
	tcase_add_test(fb, setup_failure_falls_back);
	tcase_add_test(fb, uring_why_names_the_cause);
	tcase_add_test(flt, real_efbig_aborts);
	tcase_add_test(flt, signal_storm_still_writes);
	tcase_add_test(rd, reader_refuses_truncation);
	tcase_add_test(rd, reader_refuses_flipped_payload_byte);
	tcase_add_test(rd, reader_refuses_flipped_header_byte);
	tcase_add_test(rd, reader_refuses_wrong_expectations);
	sr = srunner_create(s);
	tmpdir_create("shmrun-check-ckpt-io");
	srunner_run_all(sr, CK_NORMAL);
	tmpdir_remove();
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
