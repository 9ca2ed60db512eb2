/*
 * tests/unit/check_fingerprint.c: the topology fingerprint (runtime/fingerprint.c).
 *
 * The fingerprint guards every restore (docs/design.md §6, issue 5): state written
 * by one topology must not be loaded into another. So it must change with
 * everything state depends on, and must not change with anything else.
 *
 *   changes    a table of one-edit variants of a base topology: a stage name,
 *              an operator, state-relevant keys (count's emit, sequence's keys,
 *              file_source's path, lookup's table and miss), a width, an edge
 *              kind, the vnode count, the worker count. Each alters the
 *              fingerprint, and no two variants share one. A per-worker rule
 *              is isolated by swapping in a copy of an operator that differs
 *              only in pw_rule, and each op's rule is seen in the text.
 *   same       what must not matter: solo runs under every member-related
 *              setting (no [job], workers = 1, cpus = one CPU or another);
 *              the same topology written differently (key order, blanks,
 *              comments, defaults written out, a relative path vs the same
 *              absolute one, an implicit vs explicit forward edge); a tuning
 *              key (rate); with two workers, the keys that change speed, not
 *              state (cpus, idle, ring_bytes, checkpoint settings); the job
 *              directory moved elsewhere. 4096 workers: the members line
 *              whole, and two member sets differing in their last member
 *              give two fingerprints (it was cut at 1023 bytes).
 *   diff       shmrun_fingerprint_diff()'s messages, compared whole: width,
 *              members, vnodes, new and removed stages, operator, key, edge,
 *              several differences at once, in its order.
 *
 * Conf files are written into a fresh mkdtemp() directory per TCase, created
 * and removed by an unchecked fixture (in the parent process, so it is
 * removed even when a test fails in its forked child). Nothing runs: these
 * are loads only, so the files a topology names (inputs, tables) need not
 * exist.
 */
#include <check.h>
#include <ftw.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "internal.h"
#include "shmrun/job.h"
#include "text.h"

#include "common/tmpdir.h"

static void suite_tmpdir_create(void)
{
	tmpdir_create("shmrun-check-fp");
}

/* All messages, one per line, for assertion output. */
static const char *dump(const struct shmrun_job_errors *e)
{
	static char buf[4096];
	size_t off = 0;

	buf[0] = '\0';
	for (uint32_t i = 0; i < e->n && off < sizeof(buf); i++)
		off += (size_t)snprintf(buf + off, sizeof(buf) - off, "  %s\n", e->msgs[i]);
	return buf;
}

/* Write @text to tmpdir/@name (creating its directories) and load it. */
static void load(const char *name, const char *text, struct shmrun_job *job)
{
	char path[PATH_MAX], dir[PATH_MAX], *slash;
	struct shmrun_job_errors errs;
	FILE *f;
	int r;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	strcpy(dir, path);
	for (slash = strchr(dir + strlen(tmpdir) + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		mkdir(dir, 0700);
		*slash = '/';
	}
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fputs(text, f) >= 0, 1);
	ck_assert_int_eq(fclose(f), 0);
	r = shmrun_job_load(path, job, &errs);
	ck_assert_msg(r == 0, "load %s: %d\n%s\n%s", path, r, dump(&errs), text);
	shmrun_job_errors_free(&errs);
}

/* The canonical text of a topology (caller frees); its fingerprint in @fp. */
static char *text_of(const char *conf, uint64_t *fp)
{
	struct shmrun_job job;
	char *text = NULL;
	size_t len = 0;

	load("job.conf", conf, &job);
	ck_assert_int_eq(shmrun_fingerprint_text(&job, &text, &len), 0);
	ck_assert_ptr_nonnull(text);
	ck_assert_uint_eq(strlen(text), len);
	if (fp) {
		*fp = shmrun_fingerprint(&job);
		ck_assert_uint_ne(*fp, 0);
	}
	shmrun_job_free(&job);
	return text;
}

static uint64_t fp_of(const char *conf)
{
	uint64_t fp;

	free(text_of(conf, &fp));
	return fp;
}

/* @conf with @from (which must occur exactly once) replaced by @to. */
static char *edit(const char *conf, const char *from, const char *to)
{
	const char *at = strstr(conf, from);
	size_t n = strlen(conf) - strlen(from) + strlen(to) + 1;
	char *out = malloc(n);

	ck_assert_msg(at != NULL, "'%s' not in the base topology", from);
	ck_assert_msg(strstr(at + 1, from) == NULL, "'%s' twice in the base topology", from);
	ck_assert_ptr_nonnull(out);
	snprintf(out, n, "%.*s%s%s", (int)(at - conf), conf, to, at + strlen(from));
	return out;
}

/* The diff message between two topologies (caller frees). */
static char *diff_of(const char *old_conf, const char *new_conf)
{
	char *a = text_of(old_conf, NULL), *b = text_of(new_conf, NULL), *msg = NULL;

	ck_assert_int_eq(shmrun_fingerprint_diff(a, b, &msg), 0);
	ck_assert_ptr_nonnull(msg);
	free(a);
	free(b);
	return msg;
}

/* The CPUs this process may run on. */
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

/*
 * Two sources, a shuffle into count, a union-state lookup, two sinks. Every
 * state-relevant key that the tests edit is written here exactly once.
 */
#define BASE                                                                                       \
	"[job]\n"                                                                                  \
	"workers = 2\n"                                                                            \
	"vnodes = 256\n"                                                                           \
	"[read]\n"                                                                                 \
	"op = file_source\n"                                                                       \
	"path = in.txt\n"                                                                          \
	"[gen]\n"                                                                                  \
	"op = sequence\n"                                                                          \
	"count = 1000\n"                                                                           \
	"keys = 10\n"                                                                              \
	"[words]\n"                                                                                \
	"op = tokenize\n"                                                                          \
	"input = read\n"                                                                           \
	"[count]\n"                                                                                \
	"op = count\n"                                                                             \
	"input = words by key, gen by key\n"                                                       \
	"width = 4\n"                                                                              \
	"[look]\n"                                                                                 \
	"op = lookup\n"                                                                            \
	"input = count\n"                                                                          \
	"table = table.tsv\n"                                                                      \
	"[out]\n"                                                                                  \
	"op = file_sink\n"                                                                         \
	"input = look\n"                                                                           \
	"path = out.tsv\n"                                                                         \
	"[discard]\n"                                                                              \
	"op = null_sink\n"                                                                         \
	"input = look\n"

/* ---- changes ------------------------------------------------------------- */

/* clang-format off */
static const struct {
	const char *what, *from, *to;
} changes[] = {
	{"a stage name", "[discard]\n", "[trash]\n"},
	{"an operator", "op = null_sink\n", "op = stdout_sink\n"},
	{"count's emit", "op = count\n", "op = count\nemit = update\n"},
	{"sequence's keys", "keys = 10\n", "keys = 11\n"},
	{"sequence's count", "count = 1000\n", "count = 1001\n"},
	{"file_source's path", "path = in.txt\n", "path = in2.txt\n"},
	{"file_sink's path", "path = out.tsv\n", "path = sub/out.tsv\n"},
	{"lookup's table", "table = table.tsv\n", "table = other.tsv\n"},
	{"lookup's miss", "op = lookup\n", "op = lookup\nmiss = drop\n"},
	{"a width", "width = 4\n", "width = 2\n"},
	{"another width", "input = read\n", "input = read\nwidth = 2\n"},
	{"an edge kind (by key -> rebalance)", "gen by key", "gen rebalance"},
	{"an edge kind (by key -> broadcast)", "words by key", "words broadcast"},
	{"the vnode count", "vnodes = 256\n", "vnodes = 128\n"},
	{"the worker count", "workers = 2\n", "workers = 3\n"},
	{"a solo run", "workers = 2\n", "workers = 1\n"},
	{"the host count", "workers = 2\n", "workers = 2\nhosts = 2\n"},
	/* the same 2 members as the base, on 2 hosts: still another member set */
	{"the members spread over hosts", "workers = 2\n", "workers = 1\nhosts = 2\n"},
};
/* clang-format on */

#define NCHANGES (sizeof(changes) / sizeof(changes[0]))

START_TEST(test_each_change_alters)
{
	uint64_t base = fp_of(BASE), fp[NCHANGES];

	for (size_t i = 0; i < NCHANGES; i++) {
		char *conf = edit(BASE, changes[i].from, changes[i].to);

		fp[i] = fp_of(conf);
		free(conf);
		ck_assert_msg(fp[i] != base, "%s: fingerprint unchanged", changes[i].what);
		for (size_t j = 0; j < i; j++)
			ck_assert_msg(fp[i] != fp[j], "%s and %s: the same fingerprint",
				      changes[i].what, changes[j].what);
	}
	/* and loading the base again gives the base: the fingerprint is a function */
	ck_assert_uint_eq(fp_of(BASE), base);
}
END_TEST

static void assert_has(const char *text, const char *needle)
{
	ck_assert_msg(strstr(text, needle) != NULL, "no '%s' in:\n%s", needle, text);
}

static const char *rule_word(enum shmrun_pw_rule r)
{
	return r == SHMRUN_PW_SPLIT ? "split" : r == SHMRUN_PW_UNION ? "union" : "none";
}

/*
 * Each stage line carries its operator's declared rule (whatever each
 * operator declares; two ops with different rules are pinned below).
 */
START_TEST(test_rule_in_text)
{
	/* clang-format off */
	static const char *const stages[][2] = {
		{"read", "file_source"}, {"gen", "sequence"}, {"words", "tokenize"},
		{"count", "count"},      {"look", "lookup"},  {"out", "file_sink"},
		{"discard", "null_sink"},
	};
	/* clang-format on */
	char *text = text_of(BASE, NULL), line[200];

	for (size_t i = 0; i < sizeof(stages) / sizeof(stages[0]); i++) {
		const struct shmrun_operator *op = shmrun_operator_find(stages[i][1]);

		ck_assert_ptr_nonnull(op);
		snprintf(line, sizeof(line), "\nstage %s op=%s width=%s rule=%s\n", stages[i][0],
			 stages[i][1], strcmp(stages[i][0], "count") ? "1" : "4",
			 rule_word(op->pw_rule));
		assert_has(text, line);
	}
	/* two operators with different rules: their stage lines say so */
	ck_assert_int_eq(shmrun_operator_find("lookup")->pw_rule, SHMRUN_PW_UNION);
	ck_assert_int_eq(shmrun_operator_find("sequence")->pw_rule, SHMRUN_PW_SPLIT);
	assert_has(text, "\nstage look op=lookup width=1 rule=union\n");
	assert_has(text, "\nstage gen op=sequence width=1 rule=split\n");
	assert_has(text, "\nmembers members=2:0,1\n");
	free(text);
}
END_TEST

/*
 * Only the declared rule differs: the same stage, once with lookup as it is
 * (union) and once with a copy of it declaring split, then none.
 */
START_TEST(test_rule_alone_alters)
{
	struct shmrun_job job;
	struct shmrun_operator split_copy, none_copy;
	const struct shmrun_operator *orig;
	uint64_t fp_union, fp_split, fp_none;
	uint32_t look = UINT32_MAX;
	char *text = NULL;
	size_t len;

	load("job.conf", BASE, &job);
	for (uint32_t s = 0; s < job.nstages; s++)
		if (strcmp(job.stages[s].name, "look") == 0)
			look = s;
	ck_assert_uint_ne(look, UINT32_MAX);
	orig = job.stages[look].op;
	split_copy = *orig;
	split_copy.pw_rule = SHMRUN_PW_SPLIT;
	none_copy = *orig;
	none_copy.pw_rule = SHMRUN_PW_NONE;

	fp_union = shmrun_fingerprint(&job);
	job.stages[look].op = &split_copy;
	fp_split = shmrun_fingerprint(&job);
	ck_assert_int_eq(shmrun_fingerprint_text(&job, &text, &len), 0);
	assert_has(text, "\nstage look op=lookup width=1 rule=split\n");
	free(text);
	job.stages[look].op = &none_copy;
	fp_none = shmrun_fingerprint(&job);
	job.stages[look].op = orig;

	ck_assert_uint_ne(fp_union, fp_split);
	ck_assert_uint_ne(fp_union, fp_none);
	ck_assert_uint_ne(fp_split, fp_none);
	ck_assert_uint_eq(shmrun_fingerprint(&job), fp_union);
	shmrun_job_free(&job);
}
END_TEST

/* ---- same ------------------------------------------------------------------ */

#define SOLO_STAGES                                                                                \
	"[gen]\n"                                                                                  \
	"op = sequence\n"                                                                          \
	"count = 100\n"                                                                            \
	"[count]\n"                                                                                \
	"op = count\n"                                                                             \
	"input = gen by key\n"                                                                     \
	"width = 2\n"                                                                              \
	"[out]\n"                                                                                  \
	"op = null_sink\n"                                                                         \
	"input = count\n"

START_TEST(test_solo_ignores_members)
{
	int32_t cpus[CPU_SETSIZE];
	uint32_t ncpus = allowed_cpus(cpus, CPU_SETSIZE);
	uint64_t fp_none, fp;
	char conf[2048], *text;

	text = text_of(SOLO_STAGES, &fp_none);
	ck_assert_ptr_null(strstr(text, "members"));
	free(text);

	ck_assert_uint_eq(fp_of("[job]\nworkers = 1\n" SOLO_STAGES), fp_none);
	/* one pinned worker on the first allowed CPU, on the last, on each */
	for (uint32_t i = 0; i < ncpus; i++) {
		snprintf(conf, sizeof(conf), "[job]\ncpus = %d\n" SOLO_STAGES, cpus[i]);
		text = text_of(conf, &fp);
		ck_assert_ptr_null(strstr(text, "members"));
		free(text);
		ck_assert_msg(fp == fp_none, "cpus = %d: another fingerprint", cpus[i]);
	}
	/* and a member-related key that is not about members at all */
	ck_assert_uint_eq(fp_of("[job]\nworkers = 1\nidle = spin\nring_bytes = 64K\n"
				"checkpoint_dir = ck\ncheckpoint_interval = 2s\n" SOLO_STAGES),
			  fp_none);
	/* while two workers are not a solo run */
	ck_assert_uint_ne(fp_of("[job]\nworkers = 2\n" SOLO_STAGES), fp_none);
}
END_TEST

/*
 * Multi-host: the members line holds every host's workers and " hosts=H";
 * hosts = 1 written out, and the gateway's tuning keys, change nothing.
 */
START_TEST(test_hosts_in_members)
{
	char *text, *c;
	uint64_t base = fp_of(BASE);

	c = edit(BASE, "workers = 2\n", "workers = 2\nhosts = 2\n");
	text = text_of(c, NULL);
	assert_has(text, "\nmembers members=4:0,1,2,3 hosts=2\n");
	free(text);
	free(c);
	c = edit(BASE, "workers = 2\n",
		 "workers = 2\nhosts = 1\nhost_flush = 7ms\nhost_timeout = 60s\n");
	ck_assert_uint_eq(fp_of(c), base);
	text = text_of(c, NULL);
	assert_has(text, "\nmembers members=2:0,1\n");
	ck_assert_ptr_null(strstr(text, "hosts="));
	free(text);
	free(c);
	/* one worker on each of two hosts is not a solo run */
	ck_assert_uint_ne(fp_of("[job]\nhosts = 2\n" SOLO_STAGES), fp_of(SOLO_STAGES));
}
END_TEST

/*
 * Regression: the members clause went through a 1024-byte buffer, so every
 * member set past ~280 workers was cut at the same byte and two sets that
 * differed after it shared a fingerprint. 4096 workers: the line is whole,
 * and two sets of 4096 that differ in their last member differ.
 */
START_TEST(test_many_members_whole)
{
	struct shmrun_text want = {0};
	struct shmrun_job job;
	uint32_t *a = malloc(4096 * sizeof(*a)), *b = malloc(4096 * sizeof(*b));
	char *text, *ta, *tb, *msg;
	size_t la, lb;

	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(b);
	shmrun_text_printf(&want, "\nmembers members=4096:");
	for (uint32_t w = 0; w < 4096; w++)
		shmrun_text_printf(&want, w ? ",%u" : "%u", w);
	shmrun_text_printf(&want, "\n");
	ck_assert_int_eq(want.err, 0);
	ck_assert_uint_gt(want.len, 19000); /* far past 1024 */
	text = text_of("[job]\nworkers = 4096\n" SOLO_STAGES, NULL);
	ck_assert_msg(strstr(text, want.p),
		      "the members line of 4096 workers is not whole: %zu "
		      "bytes of text",
		      strlen(text));
	free(text);
	/* on 2 hosts of 2048: the same 4096 ids, whole, then the host count */
	text = text_of("[job]\nworkers = 2048\nhosts = 2\n" SOLO_STAGES, NULL);
	want.p[want.len - 1] = 0;
	ck_assert_msg(strstr(text, want.p),
		      "the members line of 2 x 2048 workers is not whole: "
		      "%zu bytes of text",
		      strlen(text));
	ck_assert_ptr_nonnull(strstr(text, ",4094,4095 hosts=2\n"));
	free(text);
	free(want.p);

	/* two member sets alike but for the last member */
	for (uint32_t w = 0; w < 4096; w++)
		a[w] = b[w] = w;
	b[4095] = 9999;
	load("job.conf", "[job]\nworkers = 4096\n" SOLO_STAGES, &job);
	ck_assert_int_eq(shmrun_fingerprint_text_members(&job, a, 4096, &ta, &la), 0);
	ck_assert_int_eq(shmrun_fingerprint_text_members(&job, b, 4096, &tb, &lb), 0);
	ck_assert_ptr_nonnull(strstr(ta, ",4094,4095\n"));
	ck_assert_ptr_nonnull(strstr(tb, ",4094,9999\n"));
	ck_assert_uint_ne(XXH64(ta, la, 0), XXH64(tb, lb, 0));
	ck_assert_int_eq(shmrun_fingerprint_diff(ta, tb, &msg), 0);
	ck_assert_str_eq(msg, "members: another set of 4096 workers");
	free(msg);
	/* the job's own member set is a's */
	ck_assert_uint_eq(shmrun_fingerprint(&job), XXH64(ta, la, 0));
	free(ta);
	free(tb);
	shmrun_job_free(&job);
	free(a);
	free(b);
}
END_TEST

START_TEST(test_written_differently)
{
	char other[4096], *a, *b;
	uint64_t fp_a, fp_b;

	/* key order, blanks, comments, defaults written out, an absolute path
	 * for a relative one (and ./ for none), an explicit forward edge, a
	 * tuning key */
	snprintf(other, sizeof(other),
		 "; the same job\n"
		 "# written by another hand\n"
		 "[ job ]\n"
		 "vnodes=256\n"
		 "   workers   =   2   ; two\n"
		 "\n"
		 "[read]\n"
		 "piece_bytes = 32M\n"
		 "path = %s/in.txt\n"
		 "op = file_source\n"
		 "width = 1\n"
		 "rate = 5000\n"
		 "[gen]\n"
		 "keys: 10\n"
		 "piece_records = 1048576\n"
		 "count = 1000\n"
		 "op = sequence\n"
		 "rate = 100\n"
		 "\n"
		 "\t[words]\n"
		 "\tinput = read forward\n"
		 "\top = tokenize\n"
		 "\tlowercase = true\n"
		 "[count]\n"
		 "width = 4\n"
		 "emit = final\n"
		 "input = words by key,gen by key\n"
		 "op = count\n"
		 "[look]\n"
		 "miss = pass ; the default\n"
		 "table = ./table.tsv\n"
		 "input = count\n"
		 "op = lookup\n"
		 "[out]\n"
		 "path = %s/out.tsv\n"
		 "input = look\n"
		 "op = file_sink\n"
		 "[discard]\n"
		 "input = look\n"
		 "op = null_sink\n",
		 tmpdir, tmpdir);
	a = text_of(BASE, &fp_a);
	b = text_of(other, &fp_b);
	ck_assert_str_eq(b, a);
	ck_assert_uint_eq(fp_b, fp_a);
	free(a);
	free(b);
}
END_TEST

/*
 * With several workers: which CPUs, idle strategy, ring size and checkpoint
 * settings change speed, not state; only the worker count is in the clause.
 */
START_TEST(test_speed_keys_ignored)
{
	int32_t cpus[CPU_SETSIZE];
	uint32_t ncpus = allowed_cpus(cpus, CPU_SETSIZE);
	uint64_t fp = fp_of(BASE);
	char *c = edit(BASE, "workers = 2\n",
		       "workers = 2\nidle = spin\nring_bytes = 64K\ncheckpoint_dir = ck\n"
		       "checkpoint_interval = 2s\ncheckpoint_retain = 5\nrestart_attempts = 0\n");
	char listed[64];

	ck_assert_uint_eq(fp_of(c), fp);
	free(c);
	if (ncpus >= 2) { /* the first two allowed CPUs, then the last two */
		snprintf(listed, sizeof(listed), "cpus = %d,%d\n", cpus[0], cpus[1]);
		c = edit(BASE, "workers = 2\n", listed);
		ck_assert_uint_eq(fp_of(c), fp);
		free(c);
		snprintf(listed, sizeof(listed), "cpus = %d,%d\n", cpus[ncpus - 2],
			 cpus[ncpus - 1]);
		c = edit(BASE, "workers = 2\n", listed);
		ck_assert_uint_eq(fp_of(c), fp);
		free(c);
	}
}
END_TEST

/* rate is a tuning key: it changes speed, not state. */
START_TEST(test_tuning_key_ignored)
{
	char *with = edit(BASE, "count = 1000\n", "count = 1000\nrate = 250\n");
	char *faster = edit(BASE, "count = 1000\n", "count = 1000\nrate = 999999\n");
	uint64_t fp = fp_of(BASE);
	char *text = text_of(with, NULL);

	ck_assert_uint_eq(fp_of(with), fp);
	ck_assert_uint_eq(fp_of(faster), fp);
	ck_assert_ptr_null(strstr(text, "rate"));
	free(text);
	free(with);
	free(faster);
}
END_TEST

static uint64_t job_hash_of(const char *conf)
{
	struct shmrun_job job;
	uint64_t h;

	load("job.conf", conf, &job);
	h = shmrun_job_hash(&job);
	ck_assert_uint_ne(h, 0);
	shmrun_job_free(&job);
	return h;
}

/*
 * The whole-job hash the hosts of a multi-host job compare (gateway.c, the
 * start exchange): every key the fingerprint leaves out on purpose (speed
 * keys, tuning keys, [job] keys) changes it, but cpus and host_timeout
 * (each host's own).
 */
START_TEST(test_job_hash_whole)
{
	static const char *const jchanges[][2] = {
	    {"workers = 2\n", "workers = 3\n"},
	    {"workers = 2\n", "workers = 2\nidle = spin\n"},
	    {"workers = 2\n", "workers = 2\nring_bytes = 64K\n"},
	    {"workers = 2\n", "workers = 2\ncheckpoint_dir = ck\n"},
	    {"workers = 2\n", "workers = 2\ncheckpoint_retain = 5\n"},
	    {"workers = 2\n", "workers = 2\nrestart_attempts = 0\n"},
	    {"workers = 2\n", "workers = 2\nhost_flush = 3ms\n"},
	    {"count = 1000\n", "count = 1000\nrate = 250\n"},
	};
	uint64_t fp = fp_of(BASE), h = job_hash_of(BASE);

	ck_assert_uint_eq(job_hash_of(BASE), h); /* stable */
	for (size_t i = 0; i < sizeof(jchanges) / sizeof(jchanges[0]); i++) {
		char *c = edit(BASE, jchanges[i][0], jchanges[i][1]);

		ck_assert_msg(job_hash_of(c) != h, "'%s' -> '%s' left the job hash", jchanges[i][0],
			      jchanges[i][1]);
		if (i > 0) /* workers is in the fingerprint's members line anyway */
			ck_assert_uint_eq(fp_of(c), fp);
		free(c);
	}
	{
		int32_t cpus[CPU_SETSIZE];
		uint32_t ncpus = allowed_cpus(cpus, CPU_SETSIZE);
		char listed[64];
		char *c;

		if (ncpus >= 2) { /* cpus = two CPUs is workers = 2 elsewhere */
			snprintf(listed, sizeof(listed), "cpus = %d,%d\n", cpus[0], cpus[1]);
			c = edit(BASE, "workers = 2\n", listed);
			ck_assert_uint_eq(job_hash_of(c), h);
			free(c);
		}
	}
	{
		char *c = edit(BASE, "workers = 2\n", "workers = 2\nhost_timeout = 3s\n");

		ck_assert_uint_eq(job_hash_of(c), h);
		free(c);
	}
}
END_TEST

/* Paths inside the conf's directory are encoded relative to it. */
START_TEST(test_job_dir_moved)
{
	struct shmrun_job a, b;

	load("one/job.conf", BASE, &a);
	load("two/deeper/job.conf", BASE, &b);
	ck_assert_str_ne(a.conf_dir, b.conf_dir);
	ck_assert_uint_eq(shmrun_fingerprint(&a), shmrun_fingerprint(&b));
	shmrun_job_free(&a);
	shmrun_job_free(&b);
}
END_TEST

/* ---- diff ------------------------------------------------------------------ */

static void assert_diff(const char *old_conf, const char *new_conf, const char *want)
{
	char *msg = diff_of(old_conf, new_conf);

	ck_assert_str_eq(msg, want);
	free(msg);
}

START_TEST(test_diff_messages)
{
	char *c;

	c = edit(BASE, "width = 4\n", "width = 2\n");
	assert_diff(BASE, c, "stage count: width 4 → 2");
	free(c);

	c = edit(BASE, "workers = 2\n", "workers = 3\n");
	assert_diff(BASE, c, "members: 2 → 3 workers");
	free(c);

	c = edit(BASE, "workers = 2\n", "workers = 1\n");
	assert_diff(BASE, c, "members: 2 → 1 workers");
	free(c);

	c = edit(BASE, "workers = 2\n", "workers = 2\nhosts = 2\n");
	assert_diff(BASE, c, "members: 2 → 4 workers; hosts: 1 → 2");
	assert_diff(c, BASE, "members: 4 → 2 workers; hosts: 2 → 1");
	free(c);

	c = edit(BASE, "workers = 2\n", "workers = 1\nhosts = 2\n");
	assert_diff(BASE, c, "hosts: 1 → 2");
	free(c);

	c = edit(BASE, "vnodes = 256\n", "vnodes = 128\n");
	assert_diff(BASE, c, "vnodes: 256 → 128");
	free(c);

	c = edit(BASE, "op = null_sink\n", "op = stdout_sink\n");
	assert_diff(BASE, c, "stage discard: op null_sink → stdout_sink");
	free(c);

	c = edit(BASE, "op = count\n", "op = count\nemit = update\n");
	assert_diff(BASE, c, "stage count: emit: final → update");
	free(c);

	c = edit(BASE, "gen by key", "gen rebalance");
	assert_diff(BASE, c, "edge gen → count: shuffle → rebalance");
	free(c);
}
END_TEST

START_TEST(test_diff_new_and_removed_stage)
{
	char *with_filter = edit(BASE, "[out]\n",
				 "[filter]\n"
				 "op = null_sink\n"
				 "input = count\n"
				 "[out]\n");

	assert_diff(BASE, with_filter, "stage filter: new; edge count → filter: new");
	assert_diff(with_filter, BASE, "stage filter: removed; edge count → filter: removed");
	free(with_filter);

	/* renaming is removing one stage and adding another */
	{
		char *c = edit(BASE, "[discard]\n", "[x]\n");

		assert_diff(c, BASE,
			    "stage x: removed; stage discard: new; "
			    "edge look → x: removed; edge look → discard: new");
		free(c);
	}
}
END_TEST

/* Several differences: all named, in the function's order (vnodes, members, stages, keys). */
START_TEST(test_diff_several)
{
	char *a = edit(BASE, "width = 4\n", "width = 2\n"), *b, *c;

	b = edit(a, "workers = 2\n", "workers = 3\n");
	c = edit(b, "vnodes = 256\n", "vnodes = 128\n");
	free(a);
	free(b);
	a = edit(c, "keys = 10\n", "keys = 5\n");
	assert_diff(BASE, a,
		    "vnodes: 256 → 128; members: 2 → 3 workers; stage count: width 4 → 2; "
		    "stage gen: keys: 10 → 5");
	free(a);
	free(c);
}
END_TEST

/* A plugin's operator: its file and its state format (the plugin's version or
 * the operator's state_version), each named when it changes; paths with blanks. */
START_TEST(test_diff_plugin)
{
	static const char head[] = "shmrun-topology 1\nvnodes 256\nstage p op=parse width=1 "
				   "rule=none\n";
	static const char tail[] = "stage q op=count width=1 rule=none\n";
	char a[512], b[512], buf[64], *msg;

	snprintf(a, sizeof(a), "%splugin p version=1.0.0 path=/x/my plug.so\n%s", head, tail);
	snprintf(b, sizeof(b), "%splugin p version=1.1.0 path=/x/my plug.so\n%s", head, tail);
	ck_assert_int_eq(shmrun_fingerprint_diff(a, b, &msg), 0);
	ck_assert_str_eq(msg, "stage p: plugin version=1.0.0 → version=1.1.0 (a plugin's version "
			      "or state_version changed: its state format may have; restore with "
			      "the old plugin, or STREAM_RESET_STATE=1 to start afresh)");
	free(msg);
	snprintf(b, sizeof(b), "%splugin p version=1.0.0 path=/y/p.so\n%s", head, tail);
	ck_assert_int_eq(shmrun_fingerprint_diff(a, b, &msg), 0);
	ck_assert_str_eq(msg, "stage p: plugin /x/my plug.so → /y/p.so");
	free(msg);

	ck_assert_int_eq(shmrun_fingerprint_plugin_state(a, "p", buf, sizeof(buf)), 1);
	ck_assert_str_eq(buf, "version=1.0.0");
	snprintf(b, sizeof(b), "%splugin p state=s2 path=/y/p.so\n%s", head, tail);
	ck_assert_int_eq(shmrun_fingerprint_plugin_state(b, "p", buf, sizeof(buf)), 1);
	ck_assert_str_eq(buf, "state=s2");
	ck_assert_int_eq(shmrun_fingerprint_plugin_state(b, "q", buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "");
	/* a stage whose name is a prefix of another's is not confused with it */
	ck_assert_int_eq(shmrun_fingerprint_plugin_state(b, "", buf, sizeof(buf)), 0);
}
END_TEST

/* Identical topologies: the fallback text, never an empty message. */
START_TEST(test_diff_none)
{
	assert_diff(BASE, BASE, "the topologies differ");
}
END_TEST

/*
 * The old topology of a diff comes from a MANIFEST on disk: lines without the
 * shape the runtime writes are reported as best they can be, never read past
 * their end. Regression (found by fuzzing, tests/fuzz/corpus/manifest/
 * crash-topo-vnodes-alone): "vnodes" alone was read 7 bytes on, "param s k"
 * without '=' passed strchr()'s NULL + 1 to printf, and "plugin s path=P"
 * (no version) made memcmp() compare SIZE_MAX bytes.
 */
START_TEST(test_diff_malformed_old)
{
	static const char st[] = "stage s op=count width=1 rule=none\n";
	char a[256], b[256], *msg;

	snprintf(a, sizeof(a), "shmrun-topology 1\nvnodes\n%s", st);
	snprintf(b, sizeof(b), "shmrun-topology 1\nvnodes 256\n%s", st);
	ck_assert_int_eq(shmrun_fingerprint_diff(a, b, &msg), 0);
	ck_assert_str_eq(msg, "vnodes:  → 256");
	free(msg);

	snprintf(a, sizeof(a), "shmrun-topology 1\n%sparam s emit=final\n", st);
	snprintf(b, sizeof(b), "shmrun-topology 1\n%sparam s emit\n", st);
	ck_assert_int_eq(shmrun_fingerprint_diff(a, b, &msg), 0);
	ck_assert_str_eq(msg, "stage s: emit: final → ");
	free(msg);

	snprintf(a, sizeof(a), "shmrun-topology 1\n%splugin s path=/x.so\n", st);
	snprintf(b, sizeof(b), "shmrun-topology 1\n%splugin s path=/y.so\n", st);
	ck_assert_int_eq(shmrun_fingerprint_diff(a, b, &msg), 0);
	ck_assert_str_eq(msg, "the topologies differ");
	free(msg);
}
END_TEST

static Suite *fingerprint_suite(void)
{
	Suite *s = suite_create("fingerprint");
	TCase *tc;

	tc = tcase_create("changes");
	tcase_add_unchecked_fixture(tc, suite_tmpdir_create, tmpdir_remove);
	tcase_add_test(tc, test_each_change_alters);
	tcase_add_test(tc, test_rule_in_text);
	tcase_add_test(tc, test_rule_alone_alters);
	suite_add_tcase(s, tc);

	tc = tcase_create("same");
	tcase_add_unchecked_fixture(tc, suite_tmpdir_create, tmpdir_remove);
	tcase_add_test(tc, test_solo_ignores_members);
	tcase_add_test(tc, test_hosts_in_members);
	tcase_add_test(tc, test_many_members_whole);
	tcase_add_test(tc, test_written_differently);
	tcase_add_test(tc, test_speed_keys_ignored);
	tcase_add_test(tc, test_tuning_key_ignored);
	tcase_add_test(tc, test_job_hash_whole);
	tcase_add_test(tc, test_job_dir_moved);
	suite_add_tcase(s, tc);

	tc = tcase_create("diff");
	tcase_add_unchecked_fixture(tc, suite_tmpdir_create, tmpdir_remove);
	tcase_add_test(tc, test_diff_messages);
	tcase_add_test(tc, test_diff_new_and_removed_stage);
	tcase_add_test(tc, test_diff_several);
	tcase_add_test(tc, test_diff_none);
	tcase_add_test(tc, test_diff_plugin);
	tcase_add_test(tc, test_diff_malformed_old);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(fingerprint_suite());
	int failed;

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
