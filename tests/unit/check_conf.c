/*
 * tests/unit/check_conf.c: topology.conf -> struct shmrun_job (runtime/conf.c).
 *
 *   parse      the strict number, size, duration and CPU-list parsers
 *   good       valid files load to the expected values: defaults (line 0),
 *              units, relative paths resolved against the conf's directory,
 *              edge kinds, the topological order, CPU lists, round-robin CPUs
 *              with a warning, tolerated syntax (BOM, CRLF, indentation,
 *              comments)
 *   set        --set overrides (shmrun_job_load_set): replaced and added keys,
 *              a created [job], relative paths against the current directory,
 *              messages naming the override instead of file:line
 *   bad        a table of broken files: each must fail with -EINVAL and a
 *              message that starts with exactly "<path>:<line>: " and says
 *              what is wrong; plus over-long lines, NUL bytes, offline CPUs,
 *              I/O errors, and all errors of one file reported at once,
 *              sorted by line
 *
 * Files are written into a fresh mkdtemp() directory per TCase, created and
 * removed by an unchecked fixture (in the parent process, so it is removed
 * even when a test fails in its forked child).
 */
#include <check.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "shmrun/job.h"
#include "shmrun/runtime.h"

#include "common/tmpdir.h"

static void suite_tmpdir_create(void)
{
	tmpdir_create("shmrun-check-conf");
}

/* tmpdir/@name into @path; subdirectories are created. */
static void put_file(const char *name, const char *text, size_t len, char *path)
{
	char dir[PATH_MAX], *slash;
	FILE *f;

	snprintf(path, PATH_MAX, "%s/%s", tmpdir, name);
	strcpy(dir, path);
	slash = strrchr(dir, '/');
	*slash = '\0';
	mkdir(dir, 0700);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(text, 1, len, f), len);
	ck_assert_int_eq(fclose(f), 0);
}

static void put_conf(const char *name, const char *text, char *path)
{
	put_file(name, text, strlen(text), path);
}

/* All messages, one per line, for assertion output. */
static const char *dump(const struct shmrun_job_errors *e)
{
	static char buf[8192];
	size_t off = 0;

	buf[0] = '\0';
	for (uint32_t i = 0; i < e->n && off < sizeof(buf); i++)
		off += (size_t)snprintf(buf + off, sizeof(buf) - off, "  %s\n", e->msgs[i]);
	return buf;
}

/* Load a file that must be valid. */
static void load_ok(const char *path, struct shmrun_job *job)
{
	struct shmrun_job_errors errs;
	int r = shmrun_job_load(path, job, &errs);

	ck_assert_msg(r == 0, "load %s: %d\n%s", path, r, dump(&errs));
	ck_assert_uint_eq(errs.n, 0);
	shmrun_job_errors_free(&errs);
}

/* The CPUs this process may run on (what the loader pins `workers = N` to). */
static uint32_t allowed_cpus(int32_t *out, uint32_t max)
{
	cpu_set_t set;
	uint32_t n = 0;

	ck_assert_int_eq(sched_getaffinity(0, sizeof(set), &set), 0);
	for (int c = 0; c < CPU_SETSIZE && n < max; c++)
		if (CPU_ISSET(c, &set))
			out[n++] = c;
	ck_assert_uint_ge(n, 1);
	return n;
}

/* ---- parse -------------------------------------------------------------- */

struct num_case {
	const char *s;
	int r;
	uint64_t v;
};

START_TEST(test_parse_size)
{
	/* clang-format off */
	static const struct num_case c[] = {
		{"0", 0, 0},
		{"64", 0, 64},
		{"4K", 0, 4096},
		{"1M", 0, 1ull << 20},
		{"2G", 0, 2ull << 30},
		{"16384G", 0, 1ull << 44},
		{"18446744073709551615", 0, UINT64_MAX},
		{"18446744073709551616", -ERANGE, 0},
		{"17179869184G", -ERANGE, 0},
		{"99999999999999999999K", -ERANGE, 0},
		{"99999999999999999999X", -EINVAL, 0},
		{"", -EINVAL, 0},
		{"K", -EINVAL, 0},
		{"4k", -EINVAL, 0},
		{"4KB", -EINVAL, 0},
		{"4T", 0, 4ull << 40},
		{"1T", 0, 1ull << 40},
		{"16777216T", -ERANGE, 0},
		{"4P", -EINVAL, 0},
		{"4t", -EINVAL, 0},
		{" 4K", -EINVAL, 0},
		{"4K ", -EINVAL, 0},
		{"4 K", -EINVAL, 0},
		{"-1", -EINVAL, 0},
		{"+1", -EINVAL, 0},
		{"1.5M", -EINVAL, 0},
		{"0x10", -EINVAL, 0},
	};
	/* clang-format on */

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		uint64_t v = 12345;

		ck_assert_msg(shmrun_parse_size(c[i].s, &v) == c[i].r, "'%s'", c[i].s);
		if (c[i].r == 0)
			ck_assert_msg(v == c[i].v, "'%s' -> %llu", c[i].s, (unsigned long long)v);
	}
}
END_TEST

START_TEST(test_parse_duration)
{
	/* clang-format off */
	static const struct num_case c[] = {
		{"500ms", 0, 500000000ull},
		{"2s", 0, 2000000000ull},
		{"0s", 0, 0},
		{"0ms", 0, 0},
		{"18446744073s", 0, 18446744073000000000ull},
		{"18446744074s", -ERANGE, 0},
		{"18446744073709551616ms", -ERANGE, 0},
		{"5", -EINVAL, 0},
		{"5m", -EINVAL, 0},
		{"5min", -EINVAL, 0},
		{"5us", -EINVAL, 0},
		{"5S", -EINVAL, 0},
		{"5MS", -EINVAL, 0},
		{"5 ms", -EINVAL, 0},
		{"1.5s", -EINVAL, 0},
		{"-1s", -EINVAL, 0},
		{"ms", -EINVAL, 0},
		{"", -EINVAL, 0},
	};
	/* clang-format on */

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		uint64_t v = 12345;

		ck_assert_msg(shmrun_parse_duration(c[i].s, &v) == c[i].r, "'%s'", c[i].s);
		if (c[i].r == 0)
			ck_assert_msg(v == c[i].v, "'%s' -> %llu", c[i].s, (unsigned long long)v);
	}
}
END_TEST

START_TEST(test_parse_count)
{
	/* clang-format off */
	static const struct num_case c[] = {
		{"0", 0, 0},
		{"7", 0, 7},
		{"007", 0, 7},
		{"18446744073709551615", 0, UINT64_MAX},
		{"18446744073709551616", -ERANGE, 0},
		{"3x", -EINVAL, 0},
		{"-1", -EINVAL, 0},
		{"+5", -EINVAL, 0},
		{" 5", -EINVAL, 0},
		{"5 ", -EINVAL, 0},
		{"", -EINVAL, 0},
		{"1e3", -EINVAL, 0},
		{"0x1", -EINVAL, 0},
		{"4K", -EINVAL, 0},
	};
	/* clang-format on */

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		uint64_t v = 12345;

		ck_assert_msg(shmrun_parse_count(c[i].s, &v) == c[i].r, "'%s'", c[i].s);
		if (c[i].r == 0)
			ck_assert_msg(v == c[i].v, "'%s' -> %llu", c[i].s, (unsigned long long)v);
	}
}
END_TEST

START_TEST(test_parse_cpus)
{
	/* clang-format off */
	static const struct {
		const char *s;
		int r;
		uint32_t n;
		int32_t cpus[8];
	} c[] = {
		{"0", 0, 1, {0}},
		{"0-3,8", 0, 5, {0, 1, 2, 3, 8}},
		{"8,0-3", 0, 5, {0, 1, 2, 3, 8}},
		{"1,1", 0, 1, {1}},
		{"0-3,2-5", 0, 6, {0, 1, 2, 3, 4, 5}},
		{"5-5", 0, 1, {5}},
		{"4095", 0, 1, {4095}},
		{"4096", -ERANGE, 0, {0}},
		{"0-4096", -ERANGE, 0, {0}},
		{"99999999999999999999", -ERANGE, 0, {0}},
		{"3-1", -EINVAL, 0, {0}},
		{"", -EINVAL, 0, {0}},
		{",", -EINVAL, 0, {0}},
		{"0,", -EINVAL, 0, {0}},
		{",0", -EINVAL, 0, {0}},
		{"0-", -EINVAL, 0, {0}},
		{"-1", -EINVAL, 0, {0}},
		{"a", -EINVAL, 0, {0}},
		{"0 ,1", -EINVAL, 0, {0}},
		{"0-3-5", -EINVAL, 0, {0}},
	};
	/* clang-format on */

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		int32_t *cpus = NULL;
		uint32_t n = 0;
		int r = shmrun_parse_cpus(c[i].s, &cpus, &n);

		ck_assert_msg(r == c[i].r, "'%s': %d", c[i].s, r);
		if (r)
			continue;
		ck_assert_uint_eq(n, c[i].n);
		ck_assert_mem_eq(cpus, c[i].cpus, n * sizeof(*cpus));
		free(cpus);
	}
}
END_TEST

/* ---- good files ---------------------------------------------------------- */

#define MINIMAL                                                                                    \
	"[s]\n"                                                                                    \
	"op = sequence\n"                                                                          \
	"count = 10\n"                                                                             \
	"[o]\n"                                                                                    \
	"op = null_sink\n"                                                                         \
	"input = s\n"

START_TEST(test_defaults)
{
	struct shmrun_job job;
	char path[PATH_MAX];
	const struct shmrun_operator *seq = shmrun_operator_find("sequence");
	const struct shmrun_stage *s;
	int32_t cpus[CPU_SETSIZE];

	allowed_cpus(cpus, CPU_SETSIZE);
	put_conf("minimal.conf", MINIMAL, path);
	load_ok(path, &job);

	ck_assert_str_eq(job.conf_path, path);
	ck_assert_str_eq(job.conf_dir, tmpdir);
	ck_assert_str_eq(job.name, "minimal");
	ck_assert_uint_eq(job.workers, 1);
	ck_assert(!job.cpus_listed);
	ck_assert_int_eq(job.cpus[0], cpus[0]);
	ck_assert_uint_eq(job.vnodes, 256);
	ck_assert_uint_eq(job.ring_bytes, 1u << 20);
	ck_assert_int_eq(job.idle, SHMRUN_IDLE_HYBRID);
	ck_assert_ptr_null(job.checkpoint_dir);
	ck_assert_uint_eq(job.checkpoint_interval_ns, 500000000ull);
	ck_assert_uint_eq(job.checkpoint_timeout_ns, 60000000000ull);
	ck_assert_uint_eq(job.checkpoint_retain, 2);
	ck_assert_uint_eq(job.restart_attempts, 10);
	ck_assert_uint_eq(job.idle_timeout_ns, 0); /* off */
	ck_assert_uint_eq(job.nwarnings, 0);

	ck_assert_uint_eq(job.nstages, 2);
	s = &job.stages[0];
	ck_assert_str_eq(s->name, "s");
	ck_assert_int_eq(s->line, 1);
	ck_assert_ptr_eq(s->op, seq);
	ck_assert_uint_eq(s->width, 1);
	/* one param per declared key, in declaration order (5 since issue 10
	 * item 8 added event_time, 7 since issue 12 added event_time_start
	 * and event_time_step) */
	ck_assert_uint_eq(s->nparams, 7);
	for (uint32_t i = 0; i < s->nparams; i++)
		ck_assert_ptr_eq(s->params[i].def, &seq->params[i]);
	ck_assert_str_eq(s->params[0].def->key, "count");
	ck_assert_str_eq(s->params[0].value, "10");
	ck_assert_uint_eq(s->params[0].u64, 10);
	ck_assert_int_eq(s->params[0].line, 3);
	/* defaults: value as written in the table, line 0 */
	ck_assert_str_eq(s->params[1].def->key, "keys");
	ck_assert_str_eq(s->params[1].value, "1");
	ck_assert_uint_eq(s->params[1].u64, 1);
	ck_assert_int_eq(s->params[1].line, 0);
	ck_assert_str_eq(s->params[2].value, "1048576");
	ck_assert_uint_eq(s->params[2].u64, 1048576);
	/* absent without default */
	ck_assert_str_eq(s->params[3].def->key, "rate");
	ck_assert_ptr_null(s->params[3].value);
	ck_assert_int_eq(s->params[3].line, 0);
	ck_assert_str_eq(s->params[4].def->key, "event_time");
	ck_assert_str_eq(s->params[4].value, "none");
	ck_assert_int_eq(s->params[4].line, 0);
	ck_assert_str_eq(s->params[5].def->key, "event_time_start");
	ck_assert_uint_eq(s->params[5].u64, 1000); /* ms */
	ck_assert_str_eq(s->params[6].def->key, "event_time_step");
	ck_assert_uint_eq(s->params[6].u64, 1000000); /* ns */
	/* no watermarks unless watermark_delay is set; the interval's default */
	ck_assert(!s->watermarks);
	ck_assert_uint_eq(s->watermark_delay_ns, 0);
	ck_assert_uint_eq(s->watermark_interval_ns, 200000000ull);
	ck_assert_int_eq(s->watermark_line, 0);

	ck_assert_str_eq(job.stages[1].name, "o");
	ck_assert_int_eq(job.stages[1].line, 4);
	ck_assert_uint_eq(job.stages[1].nparams, 0);

	ck_assert_uint_eq(job.nedges, 1);
	ck_assert_uint_eq(job.edges[0].from, 0);
	ck_assert_uint_eq(job.edges[0].to, 1);
	ck_assert_int_eq(job.edges[0].kind, SHMRUN_EDGE_FORWARD);
	ck_assert_int_eq(job.edges[0].line, 6);
	ck_assert_uint_eq(job.topo[0], 0);
	ck_assert_uint_eq(job.topo[1], 1);

	shmrun_job_free(&job);
	ck_assert_ptr_null(job.stages);
	ck_assert_uint_eq(job.nstages, 0);
}
END_TEST

START_TEST(test_units_and_values)
{
	struct shmrun_job job;
	char path[PATH_MAX];
	const struct shmrun_stage *st;

	put_conf("units.conf",
		 "[job]\n"
		 "name = my-job.v2\n"
		 "vnodes = 1024\n"
		 "ring_bytes = 64K\n"
		 "idle = spin\n"
		 "checkpoint_dir = ck\n"
		 "checkpoint_interval = 2s\n"
		 "checkpoint_timeout = 250ms\n"
		 "checkpoint_retain = 5\n"
		 "restart_attempts = 0\n"
		 "[r]\n"
		 "op = file_source\n"
		 "path = in.txt\n"
		 "piece_bytes = 4K\n"
		 "rate = 1000\n"
		 "width = 1024\n"
		 "[t]\n"
		 "op = tokenize\n"
		 "input = r rebalance\n"
		 "lowercase = off\n"
		 "[c]\n"
		 "op = count\n"
		 "input = t by key\n"
		 "emit = update\n"
		 "[o]\n"
		 "op = file_sink\n"
		 "input = c\n"
		 "path = /abs/out.tsv\n",
		 path);
	load_ok(path, &job);
	ck_assert_str_eq(job.name, "my-job.v2");
	ck_assert_uint_eq(job.vnodes, 1024);
	ck_assert_uint_eq(job.ring_bytes, 65536);
	ck_assert_int_eq(job.idle, SHMRUN_IDLE_SPIN);
	ck_assert_ptr_nonnull(job.checkpoint_dir);
	ck_assert_uint_eq(job.checkpoint_interval_ns, 2000000000ull);
	ck_assert_uint_eq(job.checkpoint_timeout_ns, 250000000ull);
	ck_assert_uint_eq(job.checkpoint_retain, 5);
	ck_assert_uint_eq(job.restart_attempts, 0);

	st = &job.stages[0];
	ck_assert_uint_eq(st->width, 1024);
	ck_assert_str_eq(st->params[2].def->key, "piece_bytes");
	ck_assert_str_eq(st->params[2].value, "4K");
	ck_assert_uint_eq(st->params[2].u64, 4096);
	ck_assert_int_eq(st->params[2].line, 14);
	ck_assert_str_eq(st->params[3].def->key, "rate");
	ck_assert_uint_eq(st->params[3].u64, 1000);
	ck_assert_ptr_null(st->params[1].value); /* match: absent */

	st = &job.stages[1];
	ck_assert_str_eq(st->params[0].value, "off");
	ck_assert_uint_eq(st->params[0].u64, 0);
	st = &job.stages[2];
	ck_assert_str_eq(st->params[0].value, "update");
	ck_assert_uint_eq(st->params[0].u64, 1); /* ENUM: index of the choice */
	st = &job.stages[3];
	ck_assert_str_eq(st->params[0].value, "/abs/out.tsv");
	shmrun_job_free(&job);

	/* the other idle words, and booleans in every spelling */
	put_conf("idle.conf",
		 "[job]\n"
		 "idle = sleep\n"
		 "[s]\n"
		 "op = sequence\n"
		 "count = 1\n"
		 "[t]\n"
		 "op = tokenize\n"
		 "input = s\n"
		 "lowercase = YES\n"
		 "[o]\n"
		 "op = null_sink\n"
		 "input = t\n",
		 path);
	load_ok(path, &job);
	ck_assert_int_eq(job.idle, SHMRUN_IDLE_SLEEP);
	ck_assert_uint_eq(job.stages[1].params[0].u64, 1);
	shmrun_job_free(&job);
}
END_TEST

START_TEST(test_relative_paths)
{
	struct shmrun_job job;
	char path[PATH_MAX], want[3 * PATH_MAX];
	const char *text = "[job]\n"
			   "checkpoint_dir = ./state/ck\n"
			   "[r]\n"
			   "op = file_source\n"
			   "path = data/*.txt /abs/x ./more\n"
			   "[o]\n"
			   "op = file_sink\n"
			   "input = r\n"
			   "path = out/result.tsv\n";

	put_conf("sub/paths.conf", text, path);
	for (int pass = 0; pass < 2; pass++) {
		/* pass 1: the same file named relative to the working directory */
		if (pass == 1) {
			ck_assert_int_eq(chdir(tmpdir), 0);
			load_ok("sub/paths.conf", &job);
			ck_assert_str_eq(job.conf_path, "sub/paths.conf");
		} else {
			load_ok(path, &job);
		}
		snprintf(want, sizeof(want), "%s/sub", tmpdir);
		ck_assert_str_eq(job.conf_dir, want);
		ck_assert_str_eq(job.name, "paths");
		snprintf(want, sizeof(want), "%s/sub/state/ck", tmpdir);
		ck_assert_str_eq(job.checkpoint_dir, want);
		snprintf(want, sizeof(want), "%s/sub/data/*.txt\n/abs/x\n%s/sub/more", tmpdir,
			 tmpdir);
		ck_assert_str_eq(job.stages[0].params[0].value, want);
		snprintf(want, sizeof(want), "%s/sub/out/result.tsv", tmpdir);
		ck_assert_str_eq(job.stages[1].params[0].value, want);
		shmrun_job_free(&job);
	}
}
END_TEST

START_TEST(test_edge_kinds)
{
	/* clang-format off */
	static const struct {
		uint32_t from, to;
		enum shmrun_edge_kind kind;
		int line;
	} want[] = {
		{0, 1, SHMRUN_EDGE_FORWARD, 7},   /* a -> b: equal widths */
		{1, 2, SHMRUN_EDGE_SHUFFLE, 11},  /* b by key */
		{2, 3, SHMRUN_EDGE_REBALANCE, 15}, /* c (3) -> d (2): unequal */
		{0, 4, SHMRUN_EDGE_REBALANCE, 19}, /* explicit rebalance, equal widths */
		{3, 4, SHMRUN_EDGE_FORWARD, 19},   /* explicit forward, equal widths */
		{4, 5, SHMRUN_EDGE_BROADCAST, 23},
		{5, 6, SHMRUN_EDGE_REBALANCE, 27},
		{2, 6, SHMRUN_EDGE_SHUFFLE, 27},
	};
	/* clang-format on */
	struct shmrun_job job;
	char path[PATH_MAX];

	/* clang-format off */
	put_conf("edges.conf",
		 "[a]\n"             /* 1 */
		 "op = sequence\n"
		 "count = 100\n"
		 "width = 2\n"
		 "[b]\n"             /* 5 */
		 "op = tokenize\n"
		 "input = a\n"       /* 7 */
		 "width = 2\n"
		 "[c]\n"             /* 9 */
		 "op = count\n"
		 "input = b by key\n" /* 11 */
		 "width = 3\n"
		 "[d]\n"             /* 13 */
		 "op = tokenize\n"
		 "input = c\n"       /* 15 */
		 "width = 2\n"
		 "[e]\n"             /* 17 */
		 "op = tokenize\n"
		 "input = a rebalance ,  d   forward\n" /* 19 */
		 "width = 2\n"
		 "[f]\n"             /* 21 */
		 "op = tokenize\n"
		 "input = e broadcast\n" /* 23 */
		 "width = 4\n"
		 "[o]\n"             /* 25 */
		 "op = null_sink\n"
		 "input = f, c by key\n", /* 27 */
		 path);
	/* clang-format on */
	load_ok(path, &job);
	ck_assert_uint_eq(job.nedges, sizeof(want) / sizeof(want[0]));
	for (uint32_t i = 0; i < job.nedges; i++) {
		ck_assert_uint_eq(job.edges[i].from, want[i].from);
		ck_assert_uint_eq(job.edges[i].to, want[i].to);
		ck_assert_int_eq(job.edges[i].kind, want[i].kind);
		ck_assert_int_eq(job.edges[i].line, want[i].line);
	}
	shmrun_job_free(&job);
}
END_TEST

START_TEST(test_topo_order)
{
	const uint32_t want[] = {3, 2, 1, 4, 0};
	struct shmrun_job job;
	char path[PATH_MAX];
	uint32_t pos[5];

	/* sink first in the file, two sources */
	put_conf("topo.conf",
		 "[out]\n"
		 "op = stdout_sink\n"
		 "input = count, seq\n"
		 "[count]\n"
		 "op = count\n"
		 "input = words by key\n"
		 "[words]\n"
		 "op = tokenize\n"
		 "input = read\n"
		 "[read]\n"
		 "op = file_source\n"
		 "path = x\n"
		 "[seq]\n"
		 "op = sequence\n"
		 "count = 3\n",
		 path);
	load_ok(path, &job);
	ck_assert_uint_eq(job.nstages, 5);
	ck_assert_mem_eq(job.topo, want, sizeof(want));
	for (uint32_t i = 0; i < 5; i++)
		pos[job.topo[i]] = i;
	for (uint32_t e = 0; e < job.nedges; e++)
		ck_assert_uint_lt(pos[job.edges[e].from], pos[job.edges[e].to]);
	shmrun_job_free(&job);
}
END_TEST

START_TEST(test_cpus_listed)
{
	struct shmrun_job job;
	char path[PATH_MAX], text[512];
	int32_t cpus[CPU_SETSIZE];
	uint32_t n = allowed_cpus(cpus, CPU_SETSIZE);

	snprintf(text, sizeof(text), "[job]\ncpus = %d\n" MINIMAL, cpus[0]);
	put_conf("cpus1.conf", text, path);
	load_ok(path, &job);
	ck_assert(job.cpus_listed);
	ck_assert_uint_eq(job.workers, 1);
	ck_assert_int_eq(job.cpus[0], cpus[0]);
	shmrun_job_free(&job);

	if (n >= 2) {
		snprintf(text, sizeof(text), "[job]\ncpus = %d,%d\n" MINIMAL, cpus[1], cpus[0]);
		put_conf("cpus2.conf", text, path);
		load_ok(path, &job);
		ck_assert(job.cpus_listed);
		ck_assert_uint_eq(job.workers, 2);
		ck_assert_int_eq(job.cpus[0], cpus[0]);
		ck_assert_int_eq(job.cpus[1], cpus[1]);
		shmrun_job_free(&job);
	}
}
END_TEST

/* More workers than CPUs: allowed, CPUs dealt round-robin, one warning. */
START_TEST(test_workers_round_robin)
{
	struct shmrun_job job;
	char path[PATH_MAX], text[512], prefix[PATH_MAX + 16];
	int32_t cpus[CPU_SETSIZE];
	uint32_t n = allowed_cpus(cpus, CPU_SETSIZE);

	if (n + 1 > 4096)
		return;
	snprintf(text, sizeof(text), "[job]\nworkers = %u\n" MINIMAL, n + 1);
	put_conf("rr.conf", text, path);
	load_ok(path, &job);
	ck_assert_uint_eq(job.workers, n + 1);
	ck_assert(!job.cpus_listed);
	for (uint32_t k = 0; k < job.workers; k++)
		ck_assert_int_eq(job.cpus[k], cpus[k % n]);
	ck_assert_uint_eq(job.nwarnings, 1);
	snprintf(prefix, sizeof(prefix), "%s:2: ", path);
	ck_assert_msg(strncmp(job.warnings[0], prefix, strlen(prefix)) == 0, "%s", job.warnings[0]);
	ck_assert_ptr_nonnull(strstr(job.warnings[0], "round-robin"));
	shmrun_job_free(&job);

	/* as many workers as CPUs: no warning */
	snprintf(text, sizeof(text), "[job]\nworkers = %u\n" MINIMAL, n);
	put_conf("rr2.conf", text, path);
	load_ok(path, &job);
	ck_assert_uint_eq(job.nwarnings, 0);
	for (uint32_t k = 0; k < job.workers; k++)
		ck_assert_int_eq(job.cpus[k], cpus[k]);
	shmrun_job_free(&job);
}
END_TEST

START_TEST(test_checkpoint_keys_without_dir_warn)
{
	struct shmrun_job job;
	char path[PATH_MAX], prefix[PATH_MAX + 16];

	put_conf("ckw.conf", "[job]\ncheckpoint_interval = 1s\n" MINIMAL, path);
	load_ok(path, &job);
	ck_assert_uint_eq(job.checkpoint_interval_ns, 1000000000ull);
	ck_assert_uint_eq(job.nwarnings, 1);
	snprintf(prefix, sizeof(prefix), "%s:2: ", path);
	ck_assert_msg(strncmp(job.warnings[0], prefix, strlen(prefix)) == 0, "%s", job.warnings[0]);
	ck_assert_ptr_nonnull(strstr(job.warnings[0], "without checkpoint_dir"));
	shmrun_job_free(&job);
}
END_TEST

/* BOM, CRLF, indentation, comments, ':' separators, spaces around '='. */
START_TEST(test_syntax_tolerated)
{
	struct shmrun_job job;
	char path[PATH_MAX];

	put_conf("syntax.conf",
		 "\xEF\xBB\xBF# a comment\r\n"
		 "; another\r\n"
		 "\r\n"
		 "[job]   ; trailing comment\r\n"
		 "   workers=1\r\n"
		 "\tvnodes   =   64   ; inline comment\r\n"
		 "[ s ]\r\n"
		 "  op: sequence\r\n"
		 "  count = 10\r\n"
		 "[o]\r\n"
		 "op = null_sink\r\n"
		 "    input = s\r\n",
		 path);
	load_ok(path, &job);
	ck_assert_uint_eq(job.vnodes, 64);
	ck_assert_str_eq(job.stages[0].name, "s");
	ck_assert_int_eq(job.stages[0].line, 7);
	ck_assert_uint_eq(job.stages[0].params[0].u64, 10);
	ck_assert_int_eq(job.stages[0].params[0].line, 9);
	ck_assert_int_eq(job.edges[0].line, 12);
	shmrun_job_free(&job);
}
END_TEST

/* [job] hosts: the default (1, or the MPI world size of the environment),
 * a given value with its line, host_flush and host_timeout. */
START_TEST(test_hosts)
{
	struct shmrun_job job;
	struct shmrun_job_errors errs;
	char path[PATH_MAX];
	int r;

	unsetenv("OMPI_COMM_WORLD_SIZE");
	unsetenv("PMI_SIZE");
	unsetenv("SLURM_NTASKS");
	put_conf("hosts1.conf", MINIMAL, path);
	load_ok(path, &job);
	ck_assert_uint_eq(job.hosts, 1);
	ck_assert_int_eq(job.hosts_line, 0);
	ck_assert(!job.hosts_set);
	ck_assert_ptr_null(job.hosts_env);
	ck_assert_uint_eq(job.host_flush_ns, 1000000ull);
	ck_assert_uint_eq(job.host_timeout_ns, 10000000000ull);
	shmrun_job_free(&job);

	/* the variables without mpirun's PMIx server (a stale copy): one host */
	setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
	setenv("OMPI_COMM_WORLD_RANK", "2", 1);
	load_ok(path, &job);
	ck_assert_uint_eq(job.hosts, 1);
	ck_assert_ptr_null(job.hosts_env);
	shmrun_job_free(&job);

	/* under mpirun -np 3: the world size, and where it came from */
	setenv("PMIX_NAMESPACE", "1882980353", 1);
	setenv("PMIX_SERVER_URI41", "1882980352.0;tcp4://127.0.0.1:47773", 1);
	load_ok(path, &job);
	ck_assert_uint_eq(job.hosts, 3);
	ck_assert_str_eq(job.hosts_env, "OMPI_COMM_WORLD_SIZE");
	ck_assert(!job.hosts_set);
	shmrun_job_free(&job);

	/* given: wins over the environment */
	put_conf("hosts2.conf",
		 "[job]\nworkers = 2\nhosts = 4\nhost_flush = 5ms\nhost_timeout = 30s\n" MINIMAL,
		 path);
	load_ok(path, &job);
	ck_assert_uint_eq(job.hosts, 4);
	ck_assert_uint_eq(job.workers, 2);
	ck_assert_int_eq(job.hosts_line, 3);
	ck_assert(job.hosts_set);
	ck_assert_ptr_null(job.hosts_env);
	ck_assert_uint_eq(job.host_flush_ns, 5000000ull);
	ck_assert_uint_eq(job.host_timeout_ns, 30000000000ull);
	shmrun_job_free(&job);

	/* a malformed environment with hosts not given: an error naming the variable */
	setenv("OMPI_COMM_WORLD_SIZE", "many", 1);
	put_conf("hosts3.conf", MINIMAL, path);
	r = shmrun_job_load(path, &job, &errs);
	ck_assert_int_eq(r, -EINVAL);
	ck_assert_uint_eq(errs.n, 1);
	ck_assert_msg(strstr(errs.msgs[0], "OMPI_COMM_WORLD_SIZE = 'many' in the environment is "
					   "not a process count 1..1024; set hosts = N in [job]"),
		      "%s", dump(&errs));
	shmrun_job_errors_free(&errs);
	unsetenv("OMPI_COMM_WORLD_SIZE");
	unsetenv("OMPI_COMM_WORLD_RANK");
	unsetenv("PMIX_NAMESPACE");
	unsetenv("PMIX_SERVER_URI41");

	/* hosts > 1 with a socket_source that connects: accepted */
	put_conf("hosts4.conf",
		 "[job]\nhosts = 2\n[s]\nop = socket_source\nconnect = 127.0.0.1:9\n[o]\n"
		 "op = null_sink\ninput = s\n",
		 path);
	load_ok(path, &job);
	ck_assert_uint_eq(job.hosts, 2);
	shmrun_job_free(&job);
}
END_TEST

/* ---- bad files ----------------------------------------------------------- */

/* A valid graph appended after the lines under test. */
#define TAIL MINIMAL

struct bad_case {
	const char *text;
	int line;	    /* of the expected message */
	const char *phrase; /* in the expected message */
};

/* clang-format off */
static const struct bad_case bad[] = {
	/* [job] values */
	{"[job]\nworkers = 3x\n" TAIL, 2, "workers = '3x' in [job] is not a valid count"},
	{"[job]\nworkers = -1\n" TAIL, 2, "is not a valid count; expected an unsigned decimal"},
	{"[job]\nworkers = 0\n" TAIL, 2,
	 "workers = '0' in [job] is out of range; expected 1 to 4096"},
	{"[job]\nworkers = 99999999999999999999999\n" TAIL, 2, "is too large"},
	{"[job]\nworkers =\n" TAIL, 2, "workers in [job] has an empty value"},
	{"[job]\nvnodes = 0\n" TAIL, 2, "vnodes = '0' in [job] is out of range"},
	{"[job]\nvnodes = 65537\n" TAIL, 2, "expected 1 to 65536"},
	{"[job]\nring_bytes = 12K\n" TAIL, 2, "ring_bytes = '12K' in [job] is not a power of two"},
	{"[job]\nring_bytes = 2K\n" TAIL, 2, "out of range; expected 4K to 1G"},
	{"[job]\nring_bytes = 2G\n" TAIL, 2, "out of range; expected 4K to 1G"},
	{"[job]\nring_bytes = 1MB\n" TAIL, 2, "'1MB' in [job] is not a valid size"},
	{"[job]\nring_bytes = 1m\n" TAIL, 2, "is not a valid size; expected bytes"},
	{"[job]\nidle = spinn\n" TAIL, 2,
	 "is not one of: spin, sleep, hybrid; did you mean 'spin'?"},
	{"[job]\ncheckpoint_dir = ck\ncheckpoint_interval = 500\n" TAIL, 3,
	 "is not a valid duration; expected an unsigned integer followed by ms or s"},
	{"[job]\ncheckpoint_dir = ck\ncheckpoint_interval = 0ms\n" TAIL, 3,
	 "checkpoint_interval = '0ms' in [job] is out of range; expected 1ms to 31536000s"},
	{"[job]\ncheckpoint_dir = ck\ncheckpoint_timeout = 1.5s\n" TAIL, 3,
	 "is not a valid duration"},
	{"[job]\ncheckpoint_dir = ck\ncheckpoint_retain = 0\n" TAIL, 3,
	 "checkpoint_retain = '0' in [job] is out of range"},
	{"[job]\nrestart_attempts = -1\n" TAIL, 2, "is not a valid count"},
	{"[job]\nworkers = 2\ncpus = 0\n" TAIL, 3, "both 'workers' (line 2) and 'cpus' (line 3)"},
	{"[job]\ncpus = 3-1\n" TAIL, 2, "is not a valid CPU list"},
	{"[job]\ncpus = 0,0\n" TAIL, 2, "lists CPU 0 twice"},
	{"[job]\ncpus = 9999\n" TAIL, 2, "names a CPU above 4095"},
	{"[job]\nname = my job\n" TAIL, 2, "name = 'my job' in [job] must be"},
	/* [job] keys and sections */
	{"[job]\nwokers = 2\n" TAIL, 2, "unknown key 'wokers' in [job]; did you mean 'workers'?"},
	{"[job]\nzzzzzz = 1\n" TAIL, 2,
	 "unknown key 'zzzzzz' in [job]; accepted keys: name, workers"},
	{"workers = 2\n[job]\n" TAIL, 1, "key 'workers' before any section"},
	{"[job]\nvnodes = 8\nvnodes = 16\n" TAIL, 3,
	 "duplicate key 'vnodes' in [job] (first at line 2)"},
	{"[job]\n[job]\n" TAIL, 2, "duplicate section [job] (first at line 1)"},
	{"[jbo]\nworkers = 2\n" TAIL, 1, "stage [jbo] has no 'op' key; did you mean [job]?"},
	/* syntax */
	{"[job]\nworkers\n" TAIL, 2, "expected 'key = value', '[section]' or a comment"},
	{"[job\n" TAIL, 1, "section header has no closing ']'"},
	{"[job] x\n" TAIL, 1, "unexpected text 'x' after the section header"},
	{"[a b]\n" TAIL, 1, "section name 'a b' must be 1 to 64 letters"},
	{"[]\n" TAIL, 1, "empty section name"},
	{"[job]\n= 3\n" TAIL, 2, "missing key before '='"},
	/* stages */
	{"[s]\ncount = 1\n[o]\nop = null_sink\ninput = s\n", 1,
	 "stage 's' is missing required key 'op'"},
	{"[s]\nop = sequense\ncount = 1\n[o]\nop = null_sink\ninput = s\n", 2,
	 "unknown operator 'sequense' in stage 's'; did you mean 'sequence'?"},
	{"[s]\nop = frobnicate\n[o]\nop = null_sink\ninput = s\n", 2,
	 "unknown operator 'frobnicate' in stage 's'; known operators: file_source, stdin_source, socket_source, sequence"},
	/* sources that cannot be replayed (issue 15 §2) */
	{"[job]\ncheckpoint_dir = /tmp/ck\n[s]\nop = stdin_source\n[o]\nop = null_sink\ninput = s\n", 4,
	 "stage 's': op = stdin_source cannot be replayed after a restore, yet [job] sets "
	 "checkpoint_dir"},
	{"[job]\ncheckpoint_dir = /tmp/ck\nallow_data_loss_on_crash = no\n[s]\nop = stdin_source\n"
	 "[o]\nop = null_sink\ninput = s\n", 5, "or set allow_data_loss_on_crash = true in [job]"},
	{"[s]\nop = stdin_source\nwidth = 3\n[o]\nop = null_sink\ninput = s\n", 3,
	 "width = 3 of stage 's': stdin_source reads the job's one standard input"},
	/* [job] hosts (docs/multihost.md) */
	{"[job]\nhosts = 0\n" TAIL, 2, "hosts = '0' in [job] is out of range; expected 1 to 1024"},
	{"[job]\nhosts = 1025\n" TAIL, 2, "hosts = '1025' in [job] is out of range; expected 1 to 1024"},
	{"[job]\nhosts = 2x\n" TAIL, 2, "hosts = '2x' in [job] is not a valid count"},
	{"[job]\nworkers = 100\nhosts = 1024\n" TAIL, 3,
	 "hosts = 1024 x workers = 100 is 102400 workers in all, more than the 65536 a job may have"},
	{"[job]\nhost_flush = 0ms\n" TAIL, 2, "host_flush = '0ms' in [job] is out of range"},
	{"[job]\nhost_timeout = 500ms\n" TAIL, 2, "host_timeout = '500ms' in [job] is out of range"},
	{"[job]\nhosts = 2\n[s]\nop = stdin_source\n[o]\nop = null_sink\ninput = s\n", 4,
	 "stage 's': op = stdin_source cannot run with hosts = 2 (", },
	{"[job]\nhosts = 2\n[s]\nop = socket_source\nlisten = 9000\n[o]\nop = null_sink\n"
	 "input = s\n", 5,
	 "stage 's': socket_source with listen = 9000 cannot run with hosts = 2 ("},
	{"[a]\nop = stdin_source\n[b]\nop = stdin_source\n[o]\nop = null_sink\ninput = a, b\n", 4,
	 "stage 'b' is a second stdin_source (stage 'a' at line 1 is the first)"},
	{"[s]\nop = sequence\ncount = 1\nwidth = 0\n[o]\nop = null_sink\ninput = s\n", 4,
	 "width = '0' in stage 's' is out of range; expected 1 to 65536"},
	{"[s]\nop = sequence\ncount = 1\nwidth = 2x\n[o]\nop = null_sink\ninput = s\n", 4,
	 "width = '2x' in stage 's' is not a valid count"},
	{"[s]\nop = sequence\ncount = 1\nwidth = 300\n[o]\nop = null_sink\ninput = s\n", 4,
	 "width = 300 of stage 's' exceeds vnodes = 256"},
	{"[job]\nvnodes = 4\n[s]\nop = sequence\ncount = 1\nwidth = 5\n[o]\nop = null_sink\n"
	 "input = s\n",
	 6, "exceeds vnodes = 4"},
	{"[s]\nop = sequence\ncount = 1\nwidht = 2\n[o]\nop = null_sink\ninput = s\n", 4,
	 "unknown key 'widht' in stage 's'; did you mean 'width'?"},
	{"[s]\nop = sequence\ncount = 1\nkey = 3\n[o]\nop = null_sink\ninput = s\n", 4,
	 "unknown key 'key' in stage 's'; did you mean 'keys'?"},
	{"[s]\nop = sequence\ncount = 1\n[o]\nop = null_sink\ninput = s\npath = x\n", 7,
	 "unknown key 'path' in stage 'o'; accepted keys: op, width, input"},
	{"[s]\nop = sequence\ncount = 1\ncount = 2\n[o]\nop = null_sink\ninput = s\n", 4,
	 "duplicate key 'count' in stage 's' (first at line 3)"},
	{TAIL "[s]\nop = sequence\n", 7, "duplicate section [s] (first at line 1)"},
	{"[s]\nop = sequence\n[o]\nop = null_sink\ninput = s\n", 1,
	 "stage 's' (op sequence) is missing required key 'count'"},
	{"[s]\nop = sequence\ncount = 1\n[o]\nop = file_sink\ninput = s\n", 4,
	 "stage 'o' (op file_sink) is missing required key 'path'"},
	/* operator params */
	{"[s]\nop = sequence\ncount = 0\n[o]\nop = null_sink\ninput = s\n", 3,
	 "count = '0' in stage 's' is out of range; expected 1 to"},
	{"[s]\nop = sequence\ncount = 1.5\n[o]\nop = null_sink\ninput = s\n", 3,
	 "count = '1.5' in stage 's' is not a valid count"},
	{"[s]\nop = sequence\ncount = 1\nrate = 0\n[o]\nop = null_sink\ninput = s\n", 4,
	 "rate = '0' in stage 's' is out of range"},
	{"[s]\nop = file_source\npath = x\npiece_bytes = 32X\n[o]\nop = null_sink\ninput = s\n", 4,
	 "piece_bytes = '32X' in stage 's' is not a valid size"},
	{"[s]\nop = sequence\ncount = 1\n[t]\nop = tokenize\ninput = s\nlowercase = maybe\n"
	 "[o]\nop = null_sink\ninput = t\n",
	 7, "lowercase = 'maybe' in stage 't' is not a valid boolean"},
	{"[s]\nop = sequence\ncount = 1\n[c]\nop = count\ninput = s\nemit = finale\n"
	 "[o]\nop = null_sink\ninput = c\n",
	 7, "emit = 'finale' in stage 'c' is not one of: final, update; did you mean 'final'?"},
	/* graph */
	{"[s]\nop = sequence\ncount = 1\n[o]\nop = null_sink\ninput = ss\n", 6,
	 "unknown stage 'ss' in input of stage 'o'; did you mean 's'?"},
	{"[s]\nop = sequence\ncount = 1\n[o]\nop = null_sink\ninput = s by kye\n", 6,
	 "input 's by kye' of stage 'o' is not valid"},
	{"[s]\nop = sequence\ncount = 1\n[o]\nop = null_sink\ninput = s,,s\n", 6,
	 "input of stage 'o' has an empty entry"},
	{"[s]\nop = sequence\ncount = 1\n[o]\nop = null_sink\ninput =\n", 6,
	 "input in stage 'o' has an empty value"},
	{"[s]\nop = sequence\ncount = 1\n[o]\nop = null_sink\ninput = s, s by key\n", 6,
	 "stage 's' is named twice in the input of stage 'o'"},
	{"[s]\nop = sequence\ncount = 1\ninput = o\n[o]\nop = null_sink\ninput = s\n", 4,
	 "stage 's' (op sequence) is a source and takes no input"},
	{"[s]\nop = sequence\ncount = 1\n[t]\nop = tokenize\n[o]\nop = null_sink\ninput = s\n", 4,
	 "stage 't' (op tokenize) has no 'input'"},
	{"[s]\nop = sequence\ncount = 1\n[a]\nop = tokenize\ninput = s, b\n[b]\nop = tokenize\n"
	 "input = a\n[o]\nop = null_sink\ninput = b\n",
	 6, "input of stage 'a' closes a cycle: a -> b -> a"},
	{"[s]\nop = sequence\ncount = 1\n[a]\nop = tokenize\ninput = s, a\n[o]\nop = null_sink\n"
	 "input = a\n",
	 6, "closes a cycle: a -> a"},
	{"[s]\nop = sequence\ncount = 1\n[t]\nop = tokenize\ninput = s\n", 4,
	 "no sink stage: the job's records go nowhere"},
	{"[s]\nop = sequence\ncount = 1\n[t]\nop = tokenize\ninput = s\n[o]\nop = null_sink\n"
	 "input = s\n",
	 4, "stage 't' (op tokenize) feeds no stage"},
	{"[s]\nop = sequence\ncount = 1\n[o]\nop = null_sink\ninput = s\n[p]\nop = null_sink\n"
	 "input = o\n",
	 9, "stage 'p' reads from 'o', a sink (op null_sink) that emits nothing"},
	{"[s]\nop = sequence\ncount = 1\nwidth = 2\n[t]\nop = tokenize\ninput = s forward\n"
	 "width = 3\n[o]\nop = null_sink\ninput = t\n",
	 7, "a forward edge needs equal widths, but 's' has width 2 and 't' width 3"},
	{"[a]\nop = tokenize\ninput = b\n[b]\nop = tokenize\ninput = a\n[o]\nop = null_sink\n"
	 "input = b\n",
	 1, "no source stage"},
	{"[s]\nop = sequence\ncount = 1\n[o]\nop = null_sink\ninput = s\n[x]\nop = tokenize\n"
	 "[y]\nop = tokenize\ninput = x\n[p]\nop = null_sink\ninput = y\n",
	 9, "stage 'y' has no path from a source"},
	{"[job]\nworkers = 1\n", 1, "no stages: a job needs at least a source stage and a sink"},
	{"", 1, "no stages"},
};
/* clang-format on */

START_TEST(test_bad_config)
{
	const struct bad_case *b = &bad[_i];
	struct shmrun_job job;
	struct shmrun_job_errors errs;
	char name[32], path[PATH_MAX], prefix[PATH_MAX + 16];
	bool found = false;
	int r;

	snprintf(name, sizeof(name), "bad%03d.conf", _i);
	put_conf(name, b->text, path);
	r = shmrun_job_load(path, &job, &errs);
	ck_assert_msg(r == -EINVAL, "case %d: load returned %d\n%s", _i, r, dump(&errs));
	ck_assert_uint_ge(errs.n, 1);
	snprintf(prefix, sizeof(prefix), "%s:%d: ", path, b->line);
	for (uint32_t i = 0; i < errs.n && !found; i++)
		found = strncmp(errs.msgs[i], prefix, strlen(prefix)) == 0 &&
			strstr(errs.msgs[i] + strlen(prefix), b->phrase);
	ck_assert_msg(found, "case %d: want \"%s... %s...\"; got:\n%s", _i, prefix, b->phrase,
		      dump(&errs));
	/* every message names file:line */
	for (uint32_t i = 0; i < errs.n; i++) {
		const char *p = errs.msgs[i] + strlen(path);

		ck_assert_msg(strncmp(errs.msgs[i], path, strlen(path)) == 0 && p[0] == ':' &&
				  atoi(p + 1) > 0,
			      "case %d: no file:line in '%s'", _i, errs.msgs[i]);
	}
	/* a failed load leaves nothing to free */
	ck_assert_ptr_null(job.stages);
	ck_assert_ptr_null(job.name);
	ck_assert_ptr_null(job.cpus);
	shmrun_job_errors_free(&errs);
	ck_assert_ptr_null(errs.msgs);
}
END_TEST

/* Expect exactly one message with @prefix-relative @line containing @phrase. */
static void expect_error(const char *path, int r, const struct shmrun_job_errors *errs, int line,
			 const char *phrase)
{
	char prefix[PATH_MAX + 16];
	bool found = false;

	ck_assert_msg(r == -EINVAL, "load returned %d\n%s", r, dump(errs));
	snprintf(prefix, sizeof(prefix), "%s:%d: ", path, line);
	for (uint32_t i = 0; i < errs->n && !found; i++)
		found = strncmp(errs->msgs[i], prefix, strlen(prefix)) == 0 &&
			strstr(errs->msgs[i], phrase);
	ck_assert_msg(found, "want \"%s... %s...\"; got:\n%s", prefix, phrase, dump(errs));
}

START_TEST(test_line_too_long)
{
	struct shmrun_job job;
	struct shmrun_job_errors errs;
	char path[PATH_MAX], text[1024];
	int r;

	snprintf(text, sizeof(text), "[job]\nname = %0300d\n" TAIL, 7);
	put_conf("long.conf", text, path);
	r = shmrun_job_load(path, &job, &errs);
	expect_error(path, r, &errs, 2,
		     "line of key 'name' in [job] is longer than 197 characters");
	expect_error(path, r, &errs, 2, "'name' takes one value, so shorten it");
	/* the lines after it are still read with the right numbers */
	ck_assert_uint_eq(errs.n, 1);
	shmrun_job_errors_free(&errs);
}
END_TEST

START_TEST(test_nul_byte)
{
	static const char text[] = "[job]\nname = a\0b\n" TAIL;
	struct shmrun_job job;
	struct shmrun_job_errors errs;
	char path[PATH_MAX];
	int r;

	put_file("nul.conf", text, sizeof(text) - 1, path);
	r = shmrun_job_load(path, &job, &errs);
	expect_error(path, r, &errs, 2, "NUL byte");
	ck_assert_uint_eq(errs.n, 1);
	shmrun_job_errors_free(&errs);
}
END_TEST

/* A CPU number that exists in no machine this runs on, and one above the limit. */
START_TEST(test_cpus_not_online)
{
	struct shmrun_job job;
	struct shmrun_job_errors errs;
	char path[PATH_MAX], text[512], phrase[64];
	long conf = sysconf(_SC_NPROCESSORS_CONF), onln = sysconf(_SC_NPROCESSORS_ONLN);
	long cpu = (conf > onln ? conf : onln) + 1;
	int r;

	if (cpu > 4095)
		return;
	snprintf(text, sizeof(text), "[job]\ncpus = %ld\n" TAIL, cpu);
	put_conf("offline.conf", text, path);
	r = shmrun_job_load(path, &job, &errs);
	snprintf(phrase, sizeof(phrase), "CPU %ld is not online", cpu);
	expect_error(path, r, &errs, 2, phrase);
	shmrun_job_errors_free(&errs);

	put_conf("cpu9999.conf", "[job]\ncpus = 9999\n" TAIL, path);
	r = shmrun_job_load(path, &job, &errs);
	expect_error(path, r, &errs, 2, "CPU above 4095");
	shmrun_job_errors_free(&errs);
}
END_TEST

/* One run reports every error of the file, sorted by line. */
START_TEST(test_all_errors_collected)
{
	/* clang-format off */
	static const struct {
		int line;
		const char *phrase;
	} want[] = {
		{2, "workers = '0'"},
		{3, "unknown key 'vnode'"},
		{6, "count = '-5'"},
		{8, "unknown operator 'tokenise'"},
		{10, "unknown stage 'wrods'"},
		{14, "unknown key 'widht'"},
	};
	/* clang-format on */
	struct shmrun_job job;
	struct shmrun_job_errors errs;
	char path[PATH_MAX], prefix[PATH_MAX + 16];
	int r;

	put_conf("many.conf",
		 "[job]\n"
		 "workers = 0\n"
		 "vnode = 8\n"
		 "[s]\n"
		 "op = sequence\n"
		 "count = -5\n"
		 "[words]\n"
		 "op = tokenise\n"
		 "[c]\n"
		 "input = wrods by key\n"
		 "op = count\n"
		 "[o]\n"
		 "op = null_sink\n"
		 "widht = 1\n"
		 "input = c\n",
		 path);
	r = shmrun_job_load(path, &job, &errs);
	ck_assert_int_eq(r, -EINVAL);
	ck_assert_msg(errs.n == sizeof(want) / sizeof(want[0]), "%s", dump(&errs));
	for (uint32_t i = 0; i < errs.n; i++) {
		snprintf(prefix, sizeof(prefix), "%s:%d: ", path, want[i].line);
		ck_assert_msg(strncmp(errs.msgs[i], prefix, strlen(prefix)) == 0 &&
				  strstr(errs.msgs[i], want[i].phrase),
			      "message %u: want %s %s; got:\n%s", i, prefix, want[i].phrase,
			      dump(&errs));
	}
	shmrun_job_errors_free(&errs);
}
END_TEST

/*
 * An output path whose last component is empty, "." or ".." names a
 * directory: refused at its line with a file to name instead; a name that
 * merely holds dots is a file, and an input may name a directory.
 */
START_TEST(test_output_names_directory)
{
	static const char *const dirs[][2] = {
	    {"o2/", "o2/out.tsv"}, {"o.tsv/.", "o.tsv/./out.tsv"}, {"sub/..", "sub/../out.tsv"},
	    {".", "./out.tsv"},	   {"..", "../out.tsv"},	   {"/", "/out.tsv"},
	    {"./", "./out.tsv"},   {"a//", "a//out.tsv"},
	};
	static const char *const files[] = {"..x", "x.", ".hidden", "sub/./o", "../o.tsv", "a/.b"};
	struct shmrun_job job;
	struct shmrun_job_errors errs;
	char path[PATH_MAX], text[256], want[128];
	int r;

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(text, sizeof(text),
			 "[r]\nop = file_source\npath = in/\n[o]\nop = file_sink\ninput = r\n"
			 "path = %s\n",
			 dirs[i][0]);
		put_conf("outdir.conf", text, path);
		r = shmrun_job_load(path, &job, &errs);
		snprintf(want, sizeof(want),
			 "stage 'o' path = '%s' names a directory; name a file (e.g. %s)",
			 dirs[i][0], dirs[i][1]);
		expect_error(path, r, &errs, 7, want);
		ck_assert_uint_eq(errs.n, 1);
		ck_assert_ptr_null(job.stages);
		shmrun_job_errors_free(&errs);
	}
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(text, sizeof(text),
			 "[r]\nop = file_source\npath = in/\n[o]\nop = file_sink\ninput = r\n"
			 "path = %s\n",
			 files[i]);
		put_conf("outfile.conf", text, path);
		load_ok(path, &job);
		ck_assert_uint_eq(job.nstages, 2);
		shmrun_job_free(&job);
	}
}
END_TEST

START_TEST(test_io_errors)
{
	struct shmrun_job job;
	struct shmrun_job_errors errs;
	char path[PATH_MAX], want[PATH_MAX + 64];
	int r;

	snprintf(path, sizeof(path), "%s/missing.conf", tmpdir);
	r = shmrun_job_load(path, &job, &errs);
	ck_assert_int_eq(r, -ENOENT);
	ck_assert_uint_eq(errs.n, 1);
	snprintf(want, sizeof(want), "%s: cannot open: No such file or directory", path);
	ck_assert_str_eq(errs.msgs[0], want);
	ck_assert_ptr_null(job.stages);
	shmrun_job_errors_free(&errs);

	/* a directory is refused before it is opened */
	r = shmrun_job_load(tmpdir, &job, &errs);
	ck_assert_int_eq(r, -EISDIR);
	ck_assert_uint_eq(errs.n, 1);
	ck_assert_msg(strncmp(errs.msgs[0], tmpdir, strlen(tmpdir)) == 0 &&
			  strstr(errs.msgs[0], "is not a regular file (a directory)"),
		      "%s", errs.msgs[0]);
	shmrun_job_errors_free(&errs);
}
END_TEST

/* ---- continuation lines -------------------------------------------------- */

/* Issue 8 item 13: a 5000-character path list split over indented lines. */
START_TEST(test_continuation_long_path_list)
{
	struct shmrun_job job;
	char path[PATH_MAX], *text = malloc(16384), *want = malloc(65536);
	size_t off = 0, woff = 0, total = 0;
	const char *v;

	ck_assert_ptr_nonnull(text);
	ck_assert_ptr_nonnull(want);
	off += (size_t)sprintf(text + off, "[job]\n[read]\nop = file_source\npath = in/f0000.txt");
	woff += (size_t)sprintf(want + woff, "%s/in/f0000.txt", tmpdir);
	total += strlen("in/f0000.txt");
	for (int i = 1; total < 5000; i++) {
		/* several per line, tabs and blanks, a comment line and an inline
		 * comment in between */
		off += (size_t)sprintf(text + off, "%s", i % 8 == 1 ? "\n    " : " ");
		if (i == 18)
			off += (size_t)sprintf(text + off, "\n; a comment between\n\t");
		off += (size_t)sprintf(text + off, "in/f%04d.txt", i);
		if (i == 30)
			off += (size_t)sprintf(text + off, " ; inline comment\n  ");
		woff += (size_t)sprintf(want + woff, "\n%s/in/f%04d.txt", tmpdir, i);
		total += 1 + strlen("in/f0000.txt");
	}
	sprintf(text + off, "\n  width = 1\n[out]\nop = null_sink\ninput = read\n");
	put_conf("cont.conf", text, path);
	load_ok(path, &job);
	v = job.stages[0].params[0].value; /* path */
	ck_assert_str_eq(job.stages[0].params[0].def->key, "path");
	ck_assert_int_eq(job.stages[0].params[0].line, 4);
	ck_assert_msg(strcmp(v, want) == 0, "path list differs:\n%.300s\nwant\n%.300s", v, want);
	ck_assert_uint_eq(job.stages[0].width, 1);
	ck_assert_int_eq(job.edges[0].line, job.stages[1].line + 2);
	shmrun_job_free(&job);
	free(text);
	free(want);
}
END_TEST

START_TEST(test_continuation_errors)
{
	struct shmrun_job job;
	struct shmrun_job_errors errs;
	char path[PATH_MAX];
	int r;

	/* an indented non-key line after a section header or a blank line */
	put_conf("c1.conf",
		 "[job]\n  workers = 1\n\n  stray words\n[s]\n  op = sequence\n"
		 "  count = 10\n[o]\n    more\nop = null_sink\ninput = s\n",
		 path);
	r = shmrun_job_load(path, &job, &errs);
	expect_error(path, r, &errs, 4, "indented line 'stray words' continues no key");
	expect_error(path, r, &errs, 9, "indented line 'more' continues no key");
	ck_assert_uint_eq(errs.n, 2);
	shmrun_job_errors_free(&errs);

	/* a single-value key takes no continuation line: an error at that line */
	put_conf("c2.conf", "[job]\nworkers = 1\n  2\n" MINIMAL, path);
	r = shmrun_job_load(path, &job, &errs);
	expect_error(path, r, &errs, 3,
		     "indented line continues key 'workers' in [job] (line 2), which takes one "
		     "value, not a list");
	ck_assert_uint_eq(errs.n, 1);
	shmrun_job_errors_free(&errs);

	/* ... paths included: no output or checkpoint_dir with a blank in it */
	put_conf("c2b.conf",
		 "[job]\ncheckpoint_dir = ck\n  more\n[s]\nop = file_source\npath = a.txt\n"
		 "  b.txt\n[o]\nop = file_sink\ninput = s\npath = o\n  7.tsv\n",
		 path);
	r = shmrun_job_load(path, &job, &errs);
	expect_error(path, r, &errs, 3, "continues key 'checkpoint_dir' in [job] (line 2)");
	expect_error(path, r, &errs, 3, "the value would become 'ck more'");
	expect_error(path, r, &errs, 12, "continues key 'path' in stage 'o' (line 11)");
	ck_assert_uint_eq(errs.n, 2); /* file_source's path is a list: fine */
	shmrun_job_errors_free(&errs);

	/* list keys: file_source's path and input continue */
	put_conf("c2c.conf",
		 "[s]\nop = sequence\ncount = 3\n[t]\nop = sequence\ncount = 3\n"
		 "[o]\nop = null_sink\ninput = s,\n  t\n",
		 path);
	load_ok(path, &job);
	shmrun_job_free(&job);

	/* an over-long line says to use continuation lines */
	{
		char text[1024];

		snprintf(text, sizeof(text),
			 "[job]\n[s]\nop = file_source\npath = %0300d\n"
			 "  more.txt\n[o]\nop = null_sink\ninput = s\n",
			 7);
		put_conf("c3.conf", text, path);
		r = shmrun_job_load(path, &job, &errs);
		expect_error(path, r, &errs, 4,
			     "line of key 'path' in stage 's' is longer than 197 characters, the "
			     "INI parser's limit; split its list over indented continuation lines");
		/* no follow-on "missing required key 'path'": its line was refused */
		ck_assert_uint_eq(errs.n, 1);
		shmrun_job_errors_free(&errs);

		/* a single-path key: the advice is to shorten it, not to continue it */
		snprintf(text, sizeof(text),
			 "[s]\nop = sequence\ncount = 3\n[o]\nop = file_sink\ninput = s\n"
			 "path = %0300d\n",
			 7);
		put_conf("c4.conf", text, path);
		r = shmrun_job_load(path, &job, &errs);
		expect_error(path, r, &errs, 7,
			     "'path' takes one value, so shorten it (e.g. a path relative to "
			     "the conf file's directory)");
		ck_assert_uint_eq(errs.n, 1);
		shmrun_job_errors_free(&errs);

		/* op and input refused: no "missing op" or "has no input" */
		snprintf(text, sizeof(text),
			 "[s]\nop = sequence\ncount = 3\n[o]\nop = %0300d\ninput = %0300d\n", 7,
			 7);
		put_conf("c5.conf", text, path);
		r = shmrun_job_load(path, &job, &errs);
		expect_error(path, r, &errs, 5, "line of key 'op' in stage 'o' is longer than");
		expect_error(path, r, &errs, 6, "split its list over indented continuation lines");
		ck_assert_uint_eq(errs.n, 2);
		shmrun_job_errors_free(&errs);
	}
}
END_TEST

/*
 * B6: the 197-character limit is for key lines and section headers only, and
 * is judged after the inline comment is dropped; an over-long header is one
 * error, its keys are skipped.
 */
START_TEST(test_long_comments_and_headers)
{
	struct shmrun_job job;
	struct shmrun_job_errors errs;
	char path[PATH_MAX], text[4096], x[301];
	int r;

	memset(x, 'x', 300);
	x[300] = '\0';
	/* comment lines of any length, indented or not, also between continuation
	 * lines; an inline comment after a short value */
	snprintf(text, sizeof(text),
		 "; %s\n# %s\n[job]  ; %s\nworkers = 1 ; %s\n[s]\nop = file_source\n"
		 "path = a.txt\n  ; %s\n  b.txt ; %s\n[g]\nop = sequence\ncount = 1 ; %s\n"
		 "[o]\nop = null_sink ; %s\ninput = g, s\n",
		 x, x, x, x, x, x, x, x);
	put_conf("longcomment.conf", text, path);
	load_ok(path, &job);
	ck_assert_uint_eq(job.workers, 1);
	ck_assert_uint_eq(job.nstages, 3);
	ck_assert_str_eq(job.stages[1].op->name, "sequence");
	ck_assert_uint_eq(job.stages[1].params[0].u64, 1); /* count, not "1 ; xxx" */
	ck_assert_str_eq(job.stages[2].op->name, "null_sink");
	shmrun_job_free(&job);

	/* the value itself over the limit: still refused, even with a comment after it */
	snprintf(text, sizeof(text),
		 "[g]\nop = sequence\ncount = 1%0200d ; %s\n"
		 "[o]\nop = null_sink\ninput = g\n",
		 0, x);
	put_conf("longvalue.conf", text, path);
	r = shmrun_job_load(path, &job, &errs);
	expect_error(path, r, &errs, 3, "'count' takes one value, so shorten it");
	ck_assert_uint_eq(errs.n, 1);
	shmrun_job_errors_free(&errs);

	/* ';' without a blank before it is not a comment: the line is too long */
	snprintf(text, sizeof(text),
		 "[g]\nop = sequence\ncount = 1;%s\n"
		 "[o]\nop = null_sink\ninput = g\n",
		 x);
	put_conf("nocomment.conf", text, path);
	r = shmrun_job_load(path, &job, &errs);
	expect_error(path, r, &errs, 3, "line of key 'count' in stage 'g' is longer than 197");
	ck_assert_uint_eq(errs.n, 1);
	shmrun_job_errors_free(&errs);

	/* an over-long header first: one error, none for its keys (short or long) */
	snprintf(text, sizeof(text), "[%s]\nop = sequence\ncount = 1\nwidth = 1 %s\n  2\n" MINIMAL,
		 x, x);
	put_conf("longheader.conf", text, path);
	r = shmrun_job_load(path, &job, &errs);
	expect_error(path, r, &errs, 1,
		     "section header is longer than 197 characters, the INI parser's limit; a "
		     "section name is 1 to 64 letters");
	ck_assert_uint_eq(errs.n, 1);
	shmrun_job_errors_free(&errs);

	/* ... after another section: its keys do not land in that one (no duplicates) */
	snprintf(text, sizeof(text), MINIMAL "[%s]\nop = sequence\ncount = 1\n", x);
	put_conf("longheader2.conf", text, path);
	r = shmrun_job_load(path, &job, &errs);
	expect_error(path, r, &errs, 7, "section header is longer than 197 characters");
	ck_assert_uint_eq(errs.n, 1);
	shmrun_job_errors_free(&errs);

	/* a header made short by dropping its inline comment is fine */
	snprintf(text, sizeof(text),
		 "[job] ; %s\n[g] ; %s\nop = sequence\ncount = 2\n"
		 "[o]\nop = null_sink\ninput = g\n",
		 x, x);
	put_conf("headercomment.conf", text, path);
	load_ok(path, &job);
	ck_assert_uint_eq(job.nstages, 2);
	ck_assert_str_eq(job.stages[0].name, "g");
	shmrun_job_free(&job);
}
END_TEST

/*
 * B7: op and width, read before the operator is known, refuse a continuation
 * line like every other single-value key: at its line, naming the key and the
 * key's line; no "unknown operator" or "not a valid count" follows.
 */
START_TEST(test_continuation_op_width)
{
	struct shmrun_job job;
	struct shmrun_job_errors errs;
	char path[PATH_MAX];
	int r;

	put_conf("cw.conf",
		 "[src]\nop = sequence\ncount = 3\nwidth = 1\n  2\n"
		 "[o]\nop = null_sink\ninput = src\n",
		 path);
	r = shmrun_job_load(path, &job, &errs);
	expect_error(path, r, &errs, 5,
		     "indented line continues key 'width' in stage 'src' (line 4), which takes "
		     "one value, not a list: the value would become '1 2'");
	ck_assert_uint_eq(errs.n, 1);
	shmrun_job_errors_free(&errs);

	put_conf("co.conf",
		 "[src]\nop = sequence\n  x\ncount = 3\n"
		 "[o]\nop = null_sink\ninput = src\n",
		 path);
	r = shmrun_job_load(path, &job, &errs);
	expect_error(path, r, &errs, 3,
		     "indented line continues key 'op' in stage 'src' (line 2), which takes "
		     "one value, not a list: the value would become 'sequence x'");
	ck_assert_uint_eq(errs.n, 1);
	shmrun_job_errors_free(&errs);

	/* both in one stage, and a comment line between key and continuation */
	put_conf("cow.conf",
		 "[g]\nop = sequence\ncount = 3\n[o]\nop = null_sink\n"
		 "  ; note\n  y\nwidth = 2\n\t3\ninput = g\n",
		 path);
	r = shmrun_job_load(path, &job, &errs);
	expect_error(path, r, &errs, 7, "continues key 'op' in stage 'o' (line 5)");
	expect_error(path, r, &errs, 9, "continues key 'width' in stage 'o' (line 8)");
	ck_assert_uint_eq(errs.n, 2);
	shmrun_job_errors_free(&errs);
}
END_TEST

/* Every checkpoint key, restart_attempts included, warns without checkpoint_dir. */
START_TEST(test_checkpoint_keys_without_dir)
{
	struct shmrun_job job;
	char path[PATH_MAX];
	bool seen = false;

	put_conf("ra.conf", "[job]\nrestart_attempts = 3\n" MINIMAL, path);
	load_ok(path, &job);
	for (uint32_t i = 0; i < job.nwarnings; i++)
		seen |= strstr(job.warnings[i], ":2: restart_attempts has no effect without "
						"checkpoint_dir") != NULL;
	ck_assert_msg(seen, "no warning for restart_attempts without checkpoint_dir");
	shmrun_job_free(&job);
}
END_TEST

/* Sizes take a T suffix, as docs/topology.md writes the ranges (1–1T). */
START_TEST(test_size_terabytes)
{
	struct shmrun_job job;
	struct shmrun_job_errors errs;
	char path[PATH_MAX];
	int r;

	put_conf("t1.conf", "[job]\nunion_state_limit = 1T\nper_worker_state_warn = 1T\n" MINIMAL,
		 path);
	load_ok(path, &job);
	ck_assert_uint_eq(job.union_state_limit, 1ull << 40);
	ck_assert_uint_eq(job.per_worker_state_warn, 1ull << 40);
	shmrun_job_free(&job);
	put_conf("t2.conf", "[job]\nunion_state_limit = 2T\n" MINIMAL, path);
	r = shmrun_job_load(path, &job, &errs);
	expect_error(path, r, &errs, 2, "expected 1 to 1T");
	shmrun_job_errors_free(&errs);
}
END_TEST

/* A long message loses its middle, never its end (what to do). */
START_TEST(test_fit_middle)
{
	char src[1200], dst[432];

	memset(src, 'x', sizeof(src));
	memcpy(src, "worker 1: ", 10);
	strcpy(src + sizeof(src) - 40, "; free space, then run the job again");
	shmrun_fit_middle(dst, sizeof(dst), src);
	ck_assert_uint_eq(strlen(dst), sizeof(dst) - 1);
	ck_assert_msg(strncmp(dst, "worker 1: ", 10) == 0, "%s", dst);
	ck_assert_ptr_nonnull(strstr(dst, " … "));
	ck_assert_msg(strcmp(dst + strlen(dst) - 36, "; free space, then run the job again") == 0,
		      "%s", dst);
	shmrun_fit_middle(dst, sizeof(dst), "short");
	ck_assert_str_eq(dst, "short");
}
END_TEST

/* ---- limits: every numeric key near its bounds --------------------------- */

/*
 * One numeric key, wherever it is declared: [job], the stage keys, or an
 * operator's table. For each, a conf file is built that is valid except for
 * the value under test, and the value is tried at and past its bounds.
 */
struct limit_key {
	const struct shmrun_param_def *d;
	const struct shmrun_operator *op; /* NULL: [job] or a stage key */
	bool job;			  /* a [job] key */
};

static bool is_numeric(const struct shmrun_param_def *d)
{
	return d->type == SHMRUN_PARAM_COUNT || d->type == SHMRUN_PARAM_SIZE ||
	       d->type == SHMRUN_PARAM_RATE || d->type == SHMRUN_PARAM_DURATION;
}

static uint32_t limit_keys(struct limit_key *out, uint32_t max)
{
	const struct shmrun_operator *const *ops = shmrun_operators();
	uint32_t n = 0;

	for (const struct shmrun_param_def *d = shmrun_job_keys(); d->key; d++)
		if (is_numeric(d) && n < max)
			out[n++] = (struct limit_key){.d = d, .job = true};
	for (const struct shmrun_param_def *d = shmrun_stage_keys(); d->key; d++)
		if (is_numeric(d) && n < max)
			out[n++] = (struct limit_key){.d = d};
	for (uint32_t o = 0; ops[o]; o++)
		for (const struct shmrun_param_def *d = ops[o]->params; d && d->key; d++)
			if (is_numeric(d) && n < max)
				out[n++] = (struct limit_key){.d = d, .op = ops[o]};
	return n;
}

/* The other required keys of @op, with a valid placeholder each, into @buf. */
static void required_keys(const struct shmrun_operator *op, const struct shmrun_param_def *skip,
			  char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (const struct shmrun_param_def *d = op->params; d && d->key; d++) {
		if (!d->required || d == skip)
			continue;
		if (d->type == SHMRUN_PARAM_DURATION)
			off += (size_t)snprintf(buf + off, len - off, "%s = 1s\n", d->key);
		else if (is_numeric(d))
			off += (size_t)snprintf(buf + off, len - off, "%s = %llu\n", d->key,
						(unsigned long long)(d->min ? d->min : 1));
		else if (d->type == SHMRUN_PARAM_ENUM) /* its first choice (window's kind) */
			off += (size_t)snprintf(buf + off, len - off, "%s = %.*s\n", d->key,
						(int)strcspn(d->choices, " "), d->choices);
		else
			off += (size_t)snprintf(buf + off, len - off, "%s = x\n", d->key);
	}
}

/* A conf setting key @k to @value into @text; the line of that key into *@line. */
static void limit_conf(const struct limit_key *k, const char *value, char *text, size_t len,
		       int *line)
{
	char req[512], kv[256];
	const struct shmrun_operator *op = k->op;

	snprintf(kv, sizeof(kv), "%s = %s\n", k->d->key, value);
	if (k->job) {
		snprintf(text, len, "[job]\n%s" MINIMAL, kv);
		*line = 2;
	} else if (!op) { /* width: vnodes at its maximum so width can reach its own */
		snprintf(text, len,
			 "[job]\nvnodes = 65536\n[gen]\nop = sequence\ncount = 1\n%s"
			 "[out]\nop = null_sink\ninput = gen\n",
			 kv);
		*line = 6;
	} else if (op->flags & SHMRUN_OP_SOURCE) {
		required_keys(op, k->d, req, sizeof(req));
		snprintf(text, len, "[job]\n[s]\nop = %s\n%s%s[out]\nop = null_sink\ninput = s\n",
			 op->name, req, kv);
	} else if (op->flags & SHMRUN_OP_SINK) {
		required_keys(op, k->d, req, sizeof(req));
		snprintf(text, len,
			 "[job]\n[gen]\nop = sequence\ncount = 1\n[s]\nop = %s\n"
			 "input = gen\n%s%s",
			 op->name, req, kv);
	} else {
		required_keys(op, k->d, req, sizeof(req));
		snprintf(text, len,
			 "[job]\n[gen]\nop = sequence\ncount = 1\n[s]\nop = %s\n"
			 "input = gen\n%s%s[out]\nop = null_sink\ninput = s\n",
			 op->name, req, kv);
	}
	if (k->job || !op)
		return;
	/* the key's line: its last occurrence (the placeholders come before it) */
	const char *at = NULL;

	for (const char *p = text; (p = strstr(p, kv)) != NULL; p++)
		at = p;
	*line = 1;
	for (const char *p = text; p < at; p++)
		*line += *p == '\n';
}

/* The value of key @k in a loaded @job. */
static uint64_t limit_value(const struct shmrun_job *job, const struct limit_key *k)
{
	const char *key = k->d->key;

	if (k->job) {
		if (!strcmp(key, "workers"))
			return job->workers;
		if (!strcmp(key, "vnodes"))
			return job->vnodes;
		if (!strcmp(key, "ring_bytes"))
			return job->ring_bytes;
		if (!strcmp(key, "checkpoint_interval"))
			return job->checkpoint_interval_ns;
		if (!strcmp(key, "checkpoint_timeout"))
			return job->checkpoint_timeout_ns;
		if (!strcmp(key, "checkpoint_retain"))
			return job->checkpoint_retain;
		if (!strcmp(key, "restart_attempts"))
			return job->restart_attempts;
		if (!strcmp(key, "union_state_limit"))
			return job->union_state_limit;
		if (!strcmp(key, "per_worker_state_warn"))
			return job->per_worker_state_warn;
		if (!strcmp(key, "operator_timeout"))
			return job->operator_timeout_ns;
		if (!strcmp(key, "idle_timeout"))
			return job->idle_timeout_ns;
		if (!strcmp(key, "hosts"))
			return job->hosts;
		if (!strcmp(key, "host_flush"))
			return job->host_flush_ns;
		if (!strcmp(key, "host_timeout"))
			return job->host_timeout_ns;
		ck_abort_msg("[job] key %s: add it to limit_value()", key);
	}
	for (uint32_t s = 0; s < job->nstages; s++) {
		const struct shmrun_stage *st = &job->stages[s];

		if (!k->op && !strcmp(st->name, "gen") && !strcmp(key, "watermark_delay"))
			return st->watermark_delay_ns;
		if (!k->op && !strcmp(st->name, "gen") && !strcmp(key, "watermark_interval"))
			return st->watermark_interval_ns;
		if (!k->op && !strcmp(st->name, "gen"))
			return st->width;
		if (k->op && !strcmp(st->name, "s"))
			for (uint32_t i = 0; i < st->nparams; i++)
				if (st->params[i].def == k->d)
					return st->params[i].u64;
	}
	ck_abort_msg("key %s not found in the loaded job", key);
	return 0;
}

/* Load @value for @k; must succeed with *@got, or fail at the key's line. */
static bool limit_try(const struct limit_key *k, const char *value, uint64_t *got, char *path,
		      struct shmrun_job_errors *errs, int *line)
{
	struct shmrun_job job;
	char text[2048];
	int r;

	limit_conf(k, value, text, sizeof(text), line);
	put_conf("limit.conf", text, path);
	r = shmrun_job_load(path, &job, errs);
	if (r == 0) {
		*got = limit_value(&job, k);
		shmrun_job_free(&job);
		return true;
	}
	return false;
}

static void limit_accept(const struct limit_key *k, const char *value, uint64_t want)
{
	struct shmrun_job_errors errs;
	char path[PATH_MAX];
	uint64_t got = 0;
	int line;

	ck_assert_msg(limit_try(k, value, &got, path, &errs, &line), "%s = %s refused:\n%s",
		      k->d->key, value, dump(&errs));
	ck_assert_msg(got == want, "%s = %s loaded as %llu, want %llu", k->d->key, value,
		      (unsigned long long)got, (unsigned long long)want);
}

/* Refused at the key's line with a message holding @phrase (and "KEY = 'VALUE'"). */
static void limit_reject(const struct limit_key *k, const char *value, const char *phrase)
{
	struct shmrun_job_errors errs;
	char path[PATH_MAX], head[256];
	uint64_t got;
	int line;

	ck_assert_msg(!limit_try(k, value, &got, path, &errs, &line), "%s = %s accepted as %llu",
		      k->d->key, value, (unsigned long long)got);
	snprintf(head, sizeof(head), "%s = '%s' in ", k->d->key, value);
	expect_error(path, -EINVAL, &errs, line, head);
	expect_error(path, -EINVAL, &errs, line, phrase);
	shmrun_job_errors_free(&errs);
}

START_TEST(test_numeric_limits)
{
	struct limit_key keys[64];
	uint32_t n = limit_keys(keys, 64);

	ck_assert_uint_ge(n, 12); /* 8 [job], width, 5 of the operators today */
	for (uint32_t i = 0; i < n; i++) {
		const struct shmrun_param_def *d = keys[i].d;
		bool dur = d->type == SHMRUN_PARAM_DURATION;
		/* durations are written in s when the bounds allow, else in ms */
		uint64_t u = !dur ? 1 : d->max % 1000000000ull == 0 ? 1000000000ull : 1000000ull;
		const char *unit = !dur ? "" : u == 1000000ull ? "ms" : "s";
		char v[64], range[96];
		uint64_t lo = d->min ? d->min : d->type == SHMRUN_PARAM_RATE;

		/* every numeric key is bounded, and its bound keeps the arithmetic
		 * done with it (now + duration in signed ns, size x 65536 rings,
		 * counts x widths, rate x ns) far from overflow */
		ck_assert_msg(d->max, "%s has no maximum", d->key);
		ck_assert_msg(d->max % u == 0, "%s: max not a whole %s", d->key, unit);
		if (dur)
			ck_assert_uint_le(d->max, 400ull * 86400 * 1000000000);
		if (d->type == SHMRUN_PARAM_SIZE)
			ck_assert_uint_le(d->max, 1ull << 47);
		if (d->type == SHMRUN_PARAM_COUNT)
			ck_assert_uint_le(d->max, 1000000000000000000ull);
		if (d->type == SHMRUN_PARAM_RATE)
			ck_assert_uint_le(d->max, 1000000000000ull);

		snprintf(range, sizeof(range), "%llu%s", (unsigned long long)(d->max / u), unit);
		/* the maximum is accepted, one more is not, with the range in the
		 * unit written */
		snprintf(v, sizeof(v), "%llu%s", (unsigned long long)(d->max / u), unit);
		limit_accept(&keys[i], v, d->max);
		snprintf(v, sizeof(v), "%llu%s", (unsigned long long)(d->max / u + 1), unit);
		limit_reject(&keys[i], v, range);
		/* the minimum is accepted (in whole units), one less is not */
		if (lo % u == 0) {
			snprintf(v, sizeof(v), "%llu%s", (unsigned long long)(lo / u), unit);
			limit_accept(&keys[i], v, lo);
		}
		if (lo >= u && lo % u == 0) {
			snprintf(v, sizeof(v), "%llu%s", (unsigned long long)(lo / u - 1), unit);
			limit_reject(&keys[i], v, "out of range; expected");
		}
		/* 0 is accepted only where the range starts at 0 */
		snprintf(v, sizeof(v), "0%s", unit);
		if (lo == 0)
			limit_accept(&keys[i], v, 0);
		else
			limit_reject(&keys[i], v, "out of range; expected");
		/* 2^63, 2^64 and 2^64+1 name the range too */
		snprintf(v, sizeof(v), "9223372036854775808%s", unit);
		limit_reject(&keys[i], v, range);
		snprintf(v, sizeof(v), "18446744073709551616%s", unit);
		limit_reject(&keys[i], v, range);
		snprintf(v, sizeof(v), "18446744073709551617%s", unit);
		limit_reject(&keys[i], v, range);
		snprintf(v, sizeof(v), "-1%s", unit);
		limit_reject(&keys[i], v, "is not a valid");
		/* a suffix that overflows 64 bits */
		if (d->type == SHMRUN_PARAM_SIZE) {
			limit_reject(&keys[i], "17179869184G", " to ");
			limit_reject(&keys[i], "16777216G", " to ");
		} else if (dur) {
			limit_reject(&keys[i], "18446744074s", " to ");
			limit_reject(&keys[i], "18446744073710ms", " to ");
		}
	}
}
END_TEST

/* The reproduction of the issue: 10^10 s was accepted and overflowed to a few ms. */
START_TEST(test_duration_overflow_refused)
{
	struct shmrun_job job;
	struct shmrun_job_errors errs;
	char path[PATH_MAX];
	int r;

	put_conf("d.conf",
		 "[job]\ncheckpoint_dir = ck\ncheckpoint_interval = 10000000000s\n"
		 "checkpoint_timeout = 10000000000000ms\n" MINIMAL,
		 path);
	r = shmrun_job_load(path, &job, &errs);
	expect_error(path, r, &errs, 3,
		     "checkpoint_interval = '10000000000s' in [job] is out of range; expected "
		     "1ms to 31536000s");
	expect_error(path, r, &errs, 4,
		     "checkpoint_timeout = '10000000000000ms' in [job] is out of range; expected "
		     "1ms to 31536000s (31536000000ms)");
	shmrun_job_errors_free(&errs);
}
END_TEST


/* ---- set: --set SECTION.KEY=VALUE overrides (shmrun_job_load_set) -------- */

/* The value of key @key of stage @st, or NULL. */
static const struct shmrun_param *stage_param(const struct shmrun_stage *st, const char *key)
{
	for (uint32_t i = 0; i < st->nparams; i++)
		if (strcmp(st->params[i].def->key, key) == 0)
			return &st->params[i];
	return NULL;
}

START_TEST(test_set_overrides)
{
	struct shmrun_job job;
	struct shmrun_job_errors errs;
	char path[PATH_MAX], want[2 * PATH_MAX], cwd[PATH_MAX];
	const char *text = "[gen]\n"
			   "op = sequence\n"
			   "count = 1000\n"
			   "[count.x]\n"
			   "op = count\n"
			   "input = gen by key\n"
			   "width = 2\n"
			   "[out]\n"
			   "op = file_sink\n"
			   "input = count.x\n"
			   "path = out/r.tsv\n";
	const char *sets[] = {"job.workers=3",	    "count.x.width=3", "gen.count=77",
			      "gen.keys=5",	    "out.path=rel/o.tsv", "job.checkpoint_dir=/ck",
			      "count.x.width=4"}; /* the later of two wins */
	const struct shmrun_param *p;
	int r;

	put_conf("set/a.conf", text, path);
	ck_assert_ptr_nonnull(getcwd(cwd, sizeof(cwd)));
	r = shmrun_job_load_set(path, sets, sizeof(sets) / sizeof(sets[0]), &job, &errs);
	ck_assert_msg(r == 0, "load: %d\n%s", r, dump(&errs));
	/* [job] did not exist in the file: created */
	ck_assert_uint_eq(job.workers, 3);
	ck_assert_str_eq(job.checkpoint_dir, "/ck");
	ck_assert_int_eq(job.checkpoint_dir_line, 0);
	ck_assert_str_eq(job.stages[1].name, "count.x");
	ck_assert_uint_eq(job.stages[1].width, 4);
	p = stage_param(&job.stages[0], "count");
	ck_assert_ptr_nonnull(p);
	ck_assert_str_eq(p->value, "77");
	ck_assert_uint_eq(p->u64, 77);
	ck_assert_int_eq(p->line, 0); /* not a line of the file */
	p = stage_param(&job.stages[0], "keys");
	ck_assert_uint_eq(p->u64, 5);
	/* a relative path of an override: against the current directory */
	p = stage_param(&job.stages[2], "path");
	snprintf(want, sizeof(want), "%s/rel/o.tsv", cwd);
	ck_assert_str_eq(p->value, want);
	shmrun_job_free(&job);

	/* no override: the file's values */
	r = shmrun_job_load_set(path, NULL, 0, &job, &errs);
	ck_assert_int_eq(r, 0);
	ck_assert_uint_eq(job.stages[1].width, 2);
	ck_assert_str_eq(stage_param(&job.stages[0], "count")->value, "1000");
	snprintf(want, sizeof(want), "%s/set/out/r.tsv", tmpdir);
	ck_assert_str_eq(stage_param(&job.stages[2], "path")->value, want);
	ck_assert_ptr_null(job.checkpoint_dir);
	shmrun_job_free(&job);
}
END_TEST

START_TEST(test_set_errors)
{
	struct shmrun_job job;
	struct shmrun_job_errors errs;
	char path[PATH_MAX];
	const char *text = "[job]\n"
			   "workers = 1\n"
			   "[gen]\n"
			   "op = sequence\n"
			   "count = 10\n"
			   "[out]\n"
			   "op = null_sink\n"
			   "input = gen\n"
			   "bogus = 1\n";
	const char *sets[] = {"gen.count=x", "nope.a=1", "noequals", ".a=1", "gen.=1",
			      "gen.cnt=3", "job.workers=0"};
	int r;

	put_conf("set/b.conf", text, path);
	r = shmrun_job_load_set(path, sets, sizeof(sets) / sizeof(sets[0]), &job, &errs);
	ck_assert_int_eq(r, -EINVAL);
	/* the file's own error first, by line; then the overrides in order */
	ck_assert_msg(errs.n == 8, "%u errors:\n%s", errs.n, dump(&errs));
	ck_assert_msg(strstr(errs.msgs[0], ":9: unknown key 'bogus'"), "%s", dump(&errs));
	ck_assert_msg(strncmp(errs.msgs[1], "--set gen.count=x: count = 'x' in stage 'gen' is "
					    "not a valid count",
			      60) == 0,
		      "%s", dump(&errs));
	ck_assert_msg(strncmp(errs.msgs[2], "--set nope.a=1: there is no section [nope]", 42) == 0,
		      "%s", dump(&errs));
	for (int i = 3; i < 6; i++)
		ck_assert_msg(strstr(errs.msgs[i], ": expected SECTION.KEY=VALUE"), "%s",
			      dump(&errs));
	ck_assert_msg(strncmp(errs.msgs[3], "--set noequals: ", 16) == 0, "%s", dump(&errs));
	ck_assert_msg(strncmp(errs.msgs[6], "--set gen.cnt=3: unknown key 'cnt' in stage 'gen'",
			      49) == 0,
		      "%s", dump(&errs));
	ck_assert_msg(strncmp(errs.msgs[7], "--set job.workers=0: workers = '0' in [job] is out "
					    "of range",
			      59) == 0,
		      "%s", dump(&errs));
	shmrun_job_errors_free(&errs);

	/* an over-long line of the file is an error, unless an override replaces it */
	{
		char text2[512], path2[PATH_MAX];
		const char *fix[] = {"gen.count=5"};

		snprintf(text2, sizeof(text2), "[gen]\nop = sequence\ncount = %0250d\n[out]\n"
					       "op = null_sink\ninput = gen\n", 7);
		put_conf("set/long.conf", text2, path2);
		r = shmrun_job_load_set(path2, NULL, 0, &job, &errs);
		ck_assert_int_eq(r, -EINVAL);
		ck_assert_msg(errs.n == 1 && strstr(errs.msgs[0], ":3: line of key 'count'"), "%s",
			      dump(&errs));
		shmrun_job_errors_free(&errs);
		r = shmrun_job_load_set(path2, fix, 1, &job, &errs);
		ck_assert_msg(r == 0, "%s", dump(&errs));
		ck_assert_str_eq(stage_param(&job.stages[0], "count")->value, "5");
		shmrun_job_free(&job);
	}

	/* an override can fix the file's error: the key it replaces is gone */
	{
		const char *fix[] = {"out.bogus=1"};

		r = shmrun_job_load_set(path, fix, 1, &job, &errs);
		ck_assert_int_eq(r, -EINVAL); /* still unknown, now named by the override */
		ck_assert_uint_eq(errs.n, 1);
		ck_assert_msg(strncmp(errs.msgs[0], "--set out.bogus=1: unknown key", 30) == 0,
			      "%s", dump(&errs));
		shmrun_job_errors_free(&errs);
	}
}
END_TEST

static Suite *conf_suite(void)
{
	Suite *s = suite_create("conf");
	TCase *tc;

	tc = tcase_create("parse");
	tcase_add_test(tc, test_parse_size);
	tcase_add_test(tc, test_parse_duration);
	tcase_add_test(tc, test_parse_count);
	tcase_add_test(tc, test_parse_cpus);
	suite_add_tcase(s, tc);

	tc = tcase_create("good");
	tcase_add_unchecked_fixture(tc, suite_tmpdir_create, tmpdir_remove);
	tcase_add_test(tc, test_defaults);
	tcase_add_test(tc, test_units_and_values);
	tcase_add_test(tc, test_relative_paths);
	tcase_add_test(tc, test_edge_kinds);
	tcase_add_test(tc, test_topo_order);
	tcase_add_test(tc, test_cpus_listed);
	tcase_add_test(tc, test_workers_round_robin);
	tcase_add_test(tc, test_checkpoint_keys_without_dir_warn);
	tcase_add_test(tc, test_syntax_tolerated);
	tcase_add_test(tc, test_hosts);
	suite_add_tcase(s, tc);

	tc = tcase_create("bad");
	tcase_add_unchecked_fixture(tc, suite_tmpdir_create, tmpdir_remove);
	tcase_add_loop_test(tc, test_bad_config, 0, (int)(sizeof(bad) / sizeof(bad[0])));
	tcase_add_test(tc, test_line_too_long);
	tcase_add_test(tc, test_nul_byte);
	tcase_add_test(tc, test_cpus_not_online);
	tcase_add_test(tc, test_all_errors_collected);
	tcase_add_test(tc, test_io_errors);
	tcase_add_test(tc, test_output_names_directory);
	suite_add_tcase(s, tc);

	tc = tcase_create("continuation");
	tcase_add_unchecked_fixture(tc, suite_tmpdir_create, tmpdir_remove);
	tcase_add_test(tc, test_continuation_long_path_list);
	tcase_add_test(tc, test_continuation_errors);
	tcase_add_test(tc, test_checkpoint_keys_without_dir);
	tcase_add_test(tc, test_long_comments_and_headers);
	tcase_add_test(tc, test_continuation_op_width);
	tcase_add_test(tc, test_size_terabytes);
	tcase_add_test(tc, test_fit_middle);
	suite_add_tcase(s, tc);

	tc = tcase_create("limits");
	tcase_add_unchecked_fixture(tc, suite_tmpdir_create, tmpdir_remove);
	tcase_add_test(tc, test_numeric_limits);
	tcase_add_test(tc, test_duration_overflow_refused);
	suite_add_tcase(s, tc);

	tc = tcase_create("set");
	tcase_add_unchecked_fixture(tc, suite_tmpdir_create, tmpdir_remove);
	tcase_add_test(tc, test_set_overrides);
	tcase_add_test(tc, test_set_errors);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(conf_suite());
	int failed;

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
