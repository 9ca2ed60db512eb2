/*
 * tests/unit/check_rescale.c: shmrun_rescale() (runtime/ckpt/rescale.c) on
 * fabricated checkpoints.
 *
 * Each trial writes a topology.conf into a fresh directory, loads it, and
 * fabricates checkpoint ckpt-1 for it by hand: one state file per task in the
 * layout of ckpt/state_file.c (shmrun_state_encode(), SHMRUN_STATE_*), built
 * with the shmrun_ckpt_buf_* encoder, written with the ckpt_io writer, and
 * committed with shmrun_ckpt_write_manifest(). It then loads the changed
 * topology, rescales, and reads every new state file back through the
 * MANIFEST, the verifying reader and shmrun_state_parse().
 *
 *   split      a `sequence` stage (rule split) with random per-worker entries
 *              (0..40 per instance, 1..64 bytes, unique), OLD -> NEW widths
 *              drawn from 1..8 over many trials: every old entry lands in
 *              exactly one new instance, pool entry k (old instance order,
 *              then position) in instance k mod NEW, in pool order; an
 *              unchanged width keeps each instance's entries as they were.
 *   keyed      a `count` stage (key-bound sections, value_bytes 8), widths
 *              4 -> 2 -> 5 (the second rescale starts from the first one's
 *              output): every (vnode, key, value) ends in exactly one new
 *              instance, the one whose vnode range holds the vnode, and so
 *              does every key's timer (state file version 2); each new
 *              instance's watermark is the old instances' minimum.
 *   refusals   a vnode count change is refused (-EPERM) and writes nothing;
 *              so is a checkpoint with a state file of an unknown format
 *              version (-EPROTO: a newer shmrun wrote it).
 *   plan       with @plan_out nothing is written, and every new instance has
 *              its line, with the per-worker entry counts split would deal.
 *   epochs     the same topology moves nothing (new epoch 0); a new
 *              checkpoint's epoch passes every ckpt-<e> directory present.
 *
 * The PRNG seed comes from SHMRUN_TEST_SEED if set, else from the clock; every
 * failure message starts with it (and the trial), so a failure can be replayed.
 *
 * Directories: an unchecked fixture creates one mkdtemp() root per TCase in
 * the parent process and removes it afterwards (so even a failing test's files
 * go); each trial works in its own subdirectory and removes it when it ends.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckpt/ckpt_io.h"
#include "ckpt/hosts.h"
#include "ckpt/manifest.h"
#include "ckpt/state_file.h"
#include "shmrun/job.h"
#include "shmrun/placement.h"
#include "shmrun/runtime.h"

#define MAX_PW_LEN     64u  /* per-worker entry length: 1..MAX_PW_LEN */
#define MAX_PW_PER     40u  /* per-worker entries per old instance: 0..MAX_PW_PER */
#define MAX_WIDTH      8u
#define SPLIT_TRIALS   64
#define VALUE_BYTES    8u   /* count's value: a u64 */

static char trial[PATH_MAX]; /* the current trial's directory, under root */
static char ctx[160];        /* "seed=... trial=..." for every failure message */
static uint64_t seed, rng;

/* Fail with the context (seed, trial) in front of a printf-style message. */
#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		if (!(cond)) {                                               \
			char msg_[8192];                                     \
			snprintf(msg_, sizeof(msg_), __VA_ARGS__);           \
			ck_abort_msg("[%s] %s (failed: %s)", ctx, msg_, #cond); \
		}                                                            \
	} while (0)

/* ---- PRNG (splitmix64) --------------------------------------------------------- */

static uint64_t rnd(void)
{
	uint64_t z = (rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint32_t rnd_below(uint32_t n)
{
	return (uint32_t)(rnd() % n);
}

static void seed_rng(const char *test)
{
	const char *env = getenv("SHMRUN_TEST_SEED");
	struct timespec ts;

	if (env && *env) {
		seed = strtoull(env, NULL, 0);
	} else {
		clock_gettime(CLOCK_REALTIME, &ts);
		seed = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
		seed ^= (uint64_t)getpid() << 32;
	}
	rng = seed;
	snprintf(ctx, sizeof(ctx), "%s seed=%" PRIu64 " (SHMRUN_TEST_SEED)", test, seed);
}

/* ---- directories --------------------------------------------------------------- */

#include "common/tmpdir.h"

static void root_create(void)
{
	tmpdir_create("shmrun-check-rescale");
}

static void trial_begin(void)
{
	snprintf(trial, sizeof(trial), "%s/trial-XXXXXX", tmpdir);
	CHECK(mkdtemp(trial) != NULL, "mkdtemp %s: %s", trial, strerror(errno));
}

static void trial_end(void)
{
	tmpdir_rm_tree(trial);
	trial[0] = '\0';
}

/* Whether @dir/ckpt-<epoch> exists. */
static bool ckpt_dir_exists(const char *dir, uint64_t epoch)
{
	char path[PATH_MAX];
	struct stat st;

	shmrun_ckpt_path(dir, epoch, path, sizeof(path));
	return stat(path, &st) == 0;
}

/* The ckpt-<e> directories of @dir must be exactly epoch 1 (nothing written). */
static void assert_only_epoch_1(const char *dir)
{
	uint64_t *epochs = NULL;
	int n = shmrun_ckpt_list(dir, &epochs);

	CHECK(n == 1, "%s holds %d checkpoint directories, expected only ckpt-1", dir, n);
	CHECK(epochs[0] == 1, "%s holds ckpt-%" PRIu64 ", expected ckpt-1", dir, epochs[0]);
	free(epochs);
}

/* ---- topologies ---------------------------------------------------------------- */

/* Write @text as trial/topology.conf and load it into @job. */
static void load_conf(const char *text, struct shmrun_job *job)
{
	char path[PATH_MAX + 32];
	struct shmrun_job_errors errs = {0};
	FILE *f;
	int r;

	snprintf(path, sizeof(path), "%s/topology.conf", trial);
	f = fopen(path, "w");
	CHECK(f != NULL, "fopen %s: %s", path, strerror(errno));
	CHECK(fputs(text, f) >= 0, "write %s", path);
	CHECK(fclose(f) == 0, "close %s", path);
	r = shmrun_job_load(path, job, &errs);
	CHECK(r == 0, "load %s: %d, first error: %s\n%s", path, r, errs.n ? errs.msgs[0] : "-",
	      text);
	shmrun_job_errors_free(&errs);
	CHECK(job->checkpoint_dir != NULL, "no checkpoint_dir in\n%s", text);
}

/* gen (sequence, rule split) -> out (null_sink). */
static void load_split_job(uint32_t gen_width, uint32_t out_width, const char *extra_job,
			   struct shmrun_job *job)
{
	char text[512];

	snprintf(text, sizeof(text),
		 "[job]\nworkers = 1\ncheckpoint_dir = ckpt\n%s"
		 "[gen]\nop = sequence\ncount = 1000\nwidth = %u\n"
		 "[out]\nop = null_sink\ninput = gen\nwidth = %u\n",
		 extra_job, gen_width, out_width);
	load_conf(text, job);
}

/* gen (sequence) -> cnt (count, by key) -> out (null_sink); @members: [job] lines. */
static void load_count_job_on(const char *members, uint32_t cnt_width, uint32_t vnodes,
			      struct shmrun_job *job)
{
	char text[512];

	snprintf(text, sizeof(text),
		 "[job]\n%scheckpoint_dir = ckpt\nvnodes = %u\ncheckpoint_timeout = 300ms\n"
		 "[gen]\nop = sequence\ncount = 1000\nwidth = 1\n"
		 "[cnt]\nop = count\ninput = gen by key\nwidth = %u\n"
		 "[out]\nop = null_sink\ninput = cnt\nwidth = 1\n",
		 members, vnodes, cnt_width);
	load_conf(text, job);
}

static void load_count_job(uint32_t cnt_width, uint32_t vnodes, struct shmrun_job *job)
{
	load_count_job_on("workers = 1\n", cnt_width, vnodes, job);
}

/* ---- fabricated state files ----------------------------------------------------- */

struct pw_entry {
	uint32_t len;
	unsigned char b[MAX_PW_LEN];
	uint32_t old_inst, old_pos; /* where it was written (not encoded) */
};

struct kv {
	uint32_t vnode, len;
	char key[40];
	uint64_t value;
	uint32_t seen;	/* verification: times found in the new checkpoint */
	uint32_t tseen; /* verification: the instance its timer was found in */
};

/* One task's state: key-bound entries grouped by ascending vnode, then per-worker. */
struct fake_state {
	const char *stage;
	uint32_t instance, width, value_bytes;
	const struct kv *kvs;
	uint32_t nkv;
	const struct pw_entry *pw;
	uint32_t npw;
	int64_t wm;	  /* the task's watermark */
	uint32_t version; /* the state file version written; 0: SHMRUN_STATE_VERSION */
};

static void append(struct shmrun_ckpt_buf *buf, const void *p, size_t n)
{
	int err = shmrun_ckpt_buf_append(buf, p, n);

	CHECK(err == 0, "shmrun_ckpt_buf_append(%zu bytes): %d", n, err);
}

/* The logical content of @s's state file, as worker.c's encode_state() lays it out. */
static void encode(const struct fake_state *s, uint32_t vnodes, uint64_t epoch,
		   struct shmrun_ckpt_buf *buf, uint64_t *kv_bytes, uint64_t *pw_bytes)
{
	uint32_t head[6] = {s->version ? s->version : SHMRUN_STATE_VERSION, s->value_bytes, 0, 0,
			    s->instance, s->width};
	uint32_t v2[2] = {vnodes, 0}, flags[2] = {0, 0};
	uint64_t npw = s->npw, before;

	memcpy(&head[2], &epoch, 8);
	for (uint32_t i = 0; i < s->nkv; i++)
		v2[1] += i == 0 || s->kvs[i].vnode != s->kvs[i - 1].vnode;
	append(buf, SHMRUN_STATE_MAGIC, 8);
	append(buf, head, sizeof(head));
	append(buf, v2, sizeof(v2));
	append(buf, &s->wm, 8);
	append(buf, flags, sizeof(flags));
	CHECK(shmrun_ckpt_buf_len(buf) == SHMRUN_STATE_HEAD, "header is %" PRIu64 " bytes",
	      shmrun_ckpt_buf_len(buf));
	before = shmrun_ckpt_buf_len(buf);
	for (uint32_t i = 0; i < s->nkv;) {
		uint32_t sec[2] = {s->kvs[i].vnode, 0}, j = i;
		uint64_t n;

		while (j < s->nkv && s->kvs[j].vnode == s->kvs[i].vnode)
			j++;
		n = j - i;
		append(buf, sec, sizeof(sec));
		append(buf, &n, 8);
		for (uint32_t k = i; k < j; k++) {
			append(buf, &s->kvs[k].len, 4);
			append(buf, s->kvs[k].key, s->kvs[k].len);
			append(buf, &s->kvs[k].value, s->value_bytes);
		}
		/* version 2: the vnode's timers, one event-time timer per key at its value */
		append(buf, &n, 8);
		for (; i < j; i++) {
			uint32_t domain = 0;
			int64_t time = (int64_t)s->kvs[i].value;

			append(buf, &s->kvs[i].len, 4);
			append(buf, &domain, 4);
			append(buf, &time, 8);
			append(buf, s->kvs[i].key, s->kvs[i].len);
		}
	}
	*kv_bytes = shmrun_ckpt_buf_len(buf) - before;
	append(buf, &npw, 8);
	*pw_bytes = 0;
	for (uint32_t i = 0; i < s->npw; i++) {
		append(buf, &s->pw[i].len, 4);
		append(buf, s->pw[i].b, s->pw[i].len);
		*pw_bytes += 4 + (uint64_t)s->pw[i].len;
	}
}

/*
 * Fabricate checkpoint @epoch of @job: one state file per @states, then the
 * MANIFEST. The MANIFEST lists the files in a random order: the pool order is
 * (old instance, position), whatever order the files are listed in.
 */
static void write_ckpt(const struct shmrun_job *job, uint64_t epoch,
		       const struct fake_state *states, uint32_t n)
{
	struct shmrun_manifest_file *files = calloc(n + 1, sizeof(*files));
	uint32_t *order = calloc(n + 1, sizeof(*order));
	struct shmrun_ckpt_writer wr;
	char path[PATH_MAX], why[256];
	int dirfd, err;

	CHECK(files != NULL && order != NULL, "calloc");
	for (uint32_t i = 0; i < n; i++)
		order[i] = i;
	for (uint32_t i = n; i > 1; i--) {
		uint32_t j = rnd_below(i), t = order[i - 1];

		order[i - 1] = order[j];
		order[j] = t;
	}
	CHECK(mkdir(job->checkpoint_dir, 0777) == 0 || errno == EEXIST, "mkdir %s: %s",
	      job->checkpoint_dir, strerror(errno));
	shmrun_ckpt_path(job->checkpoint_dir, epoch, path, sizeof(path));
	CHECK(mkdir(path, 0777) == 0, "mkdir %s: %s", path, strerror(errno));
	dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK(dirfd >= 0, "open %s: %s", path, strerror(errno));
	err = shmrun_ckpt_writer_init(&wr, 0, why, sizeof(why));
	CHECK(err == 0, "shmrun_ckpt_writer_init: %d %s", err, why);
	for (uint32_t i = 0; i < n; i++) {
		const struct fake_state *s = &states[order[i]];
		struct shmrun_manifest_file *f = &files[i];
		struct shmrun_ckpt_buf buf;

		shmrun_ckpt_buf_init(&buf);
		encode(s, job->vnodes, epoch, &buf, &f->kv_bytes, &f->pw_bytes);
		CHECK(shmrun_ckpt_buf_seal(&buf) == 0, "seal");
		snprintf(f->name, sizeof(f->name), "%s.%u.state", s->stage, s->instance);
		snprintf(f->stage, sizeof(f->stage), "%s", s->stage);
		f->instance = s->instance;
		err = shmrun_ckpt_write_file(&wr, dirfd, f->name, &buf, &f->size, &f->xxh64);
		CHECK(err == 0, "write %s/%s: %d", path, f->name, err);
		shmrun_ckpt_buf_free(&buf);
	}
	shmrun_ckpt_writer_close(&wr);
	close(dirfd);
	err = shmrun_ckpt_write_manifest(job, epoch, false, files, n);
	CHECK(err == 0, "shmrun_ckpt_write_manifest(%s, %" PRIu64 "): %d", path, epoch, err);
	free(order);
	free(files);
}

/* ---- reading a checkpoint back ---------------------------------------------------- */

struct ckpt_read {
	struct shmrun_manifest m;
	void **data;                    /* per MANIFEST file */
	struct shmrun_state_view *views; /* per MANIFEST file */
};

static void read_ckpt(const char *dir, uint64_t epoch, struct ckpt_read *r)
{
	char path[PATH_MAX], why[300];
	int dirfd, err;

	memset(r, 0, sizeof(*r));
	err = shmrun_ckpt_read_manifest(dir, epoch, &r->m, why, sizeof(why));
	CHECK(err == 0, "MANIFEST of %s/ckpt-%" PRIu64 ": %d %s", dir, epoch, err, why);
	CHECK(r->m.epoch == epoch, "MANIFEST epoch %" PRIu64 ", expected %" PRIu64, r->m.epoch,
	      epoch);
	r->data = calloc(r->m.nfiles + 1, sizeof(*r->data));
	r->views = calloc(r->m.nfiles + 1, sizeof(*r->views));
	CHECK(r->data && r->views, "calloc");
	shmrun_ckpt_path(dir, epoch, path, sizeof(path));
	dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK(dirfd >= 0, "open %s: %s", path, strerror(errno));
	for (uint32_t i = 0; i < r->m.nfiles; i++) {
		const struct shmrun_manifest_file *f = &r->m.files[i];
		size_t len = 0;

		err = shmrun_ckpt_read_file(dirfd, f->name, f->size, f->xxh64, &r->data[i], &len,
					    why, sizeof(why));
		CHECK(err == 0, "read %s/%s: %d %s", path, f->name, err, why);
		err = shmrun_state_parse(r->data[i], len, &r->views[i]);
		CHECK(err == 0, "parse %s/%s: %d", path, f->name, err);
	}
	close(dirfd);
}

static void free_ckpt(struct ckpt_read *r)
{
	for (uint32_t i = 0; i < r->m.nfiles; i++) {
		if (r->views)
			shmrun_state_view_free(&r->views[i]);
		if (r->data)
			free(r->data[i]);
	}
	free(r->views);
	free(r->data);
	shmrun_manifest_free(&r->m);
}

/* The one state file of @stage's instance @inst; its MANIFEST entry in *@mf. */
static const struct shmrun_state_view *find_view(const struct ckpt_read *r, const char *stage,
						 uint32_t inst,
						 const struct shmrun_manifest_file **mf)
{
	const struct shmrun_state_view *v = NULL;
	uint32_t found = 0;

	for (uint32_t i = 0; i < r->m.nfiles; i++)
		if (strcmp(r->m.files[i].stage, stage) == 0 && r->m.files[i].instance == inst) {
			found++;
			v = &r->views[i];
			if (mf)
				*mf = &r->m.files[i];
		}
	CHECK(found == 1, "ckpt-%" PRIu64 " lists %u state files for %s[%u], expected 1",
	      r->m.epoch, found, stage, inst);
	return v;
}

static uint32_t stage_width_in(const struct shmrun_manifest *m, const char *stage)
{
	for (uint32_t s = 0; s < m->nstages; s++)
		if (strcmp(m->stages[s].name, stage) == 0)
			return m->stages[s].width;
	CHECK(false, "ckpt-%" PRIu64 " MANIFEST has no stage %s", m->epoch, stage);
	return 0;
}

/* The header of a rewritten state file. */
static void check_head(const struct shmrun_state_view *v, const char *stage, uint32_t inst,
		       uint32_t width, uint32_t vnodes, uint64_t epoch)
{
	CHECK(v->instance == inst, "%s[%u]: header instance %u", stage, inst, v->instance);
	CHECK(v->width == width, "%s[%u]: header width %u, expected %u", stage, inst, v->width,
	      width);
	CHECK(v->vnodes == vnodes, "%s[%u]: header vnodes %u, expected %u", stage, inst,
	      v->vnodes, vnodes);
	CHECK(v->epoch == epoch, "%s[%u]: header epoch %" PRIu64 ", expected %" PRIu64, stage,
	      inst, v->epoch, epoch);
}

/* ---- split ------------------------------------------------------------------------ */

/* Random unique per-worker entries: @counts[i] for old instance i, in pool order. */
static struct pw_entry *make_pool(uint32_t old_w, uint32_t *counts, uint32_t *npool)
{
	struct pw_entry *pool = calloc(old_w * MAX_PW_PER + 1, sizeof(*pool));
	uint32_t n = 0;

	CHECK(pool != NULL, "calloc");
	for (uint32_t i = 0; i < old_w; i++) {
		counts[i] = rnd_below(MAX_PW_PER + 1);
		for (uint32_t p = 0; p < counts[i]; p++) {
			struct pw_entry *e = &pool[n];
			bool dup;

			do {
				e->len = 1 + rnd_below(MAX_PW_LEN);
				for (uint32_t b = 0; b < e->len; b++)
					e->b[b] = (unsigned char)rnd();
				/* (instance, position) in front makes entries of 3+ bytes unique */
				if (e->len >= 3) {
					e->b[0] = (unsigned char)i;
					e->b[1] = (unsigned char)p;
					e->b[2] = 0xa5;
				}
				dup = false;
				for (uint32_t k = 0; k < n && !dup; k++)
					dup = pool[k].len == e->len &&
					      memcmp(pool[k].b, e->b, e->len) == 0;
			} while (dup);
			e->old_inst = i;
			e->old_pos = p;
			n++;
		}
	}
	*npool = n;
	return pool;
}

/* The pool index of the entry @len bytes at @p, or UINT32_MAX. */
static uint32_t pool_index(const struct pw_entry *pool, uint32_t npool, const unsigned char *p,
			   uint32_t len)
{
	for (uint32_t k = 0; k < npool; k++)
		if (pool[k].len == len && memcmp(pool[k].b, p, len) == 0)
			return k;
	return UINT32_MAX;
}

/*
 * One split trial: gen at @old_w with random per-worker entries rescaled to
 * @new_w. With equal widths, out's width changes instead (1 -> 2) so the
 * topology differs, and every gen instance must keep exactly its own entries.
 */
static void split_trial(uint32_t old_w, uint32_t new_w)
{
	struct shmrun_job job_old, job_new;
	struct fake_state st[MAX_WIDTH + 1];
	uint32_t counts[MAX_WIDTH], npool, *where, out_w = old_w == new_w ? 2 : 1;
	struct pw_entry *pool;
	struct ckpt_read r;
	uint64_t e = 0;
	char why[300];
	int rc;

	trial_begin();
	load_split_job(old_w, 1, "", &job_old);
	pool = make_pool(old_w, counts, &npool);
	for (uint32_t i = 0, off = 0; i < old_w; off += counts[i], i++)
		st[i] = (struct fake_state){.stage = "gen", .instance = i, .width = old_w,
					    .pw = pool + off, .npw = counts[i]};
	st[old_w] = (struct fake_state){.stage = "out", .instance = 0, .width = 1};
	write_ckpt(&job_old, 1, st, old_w + 1);

	load_split_job(new_w, out_w, "", &job_new);
	rc = shmrun_rescale(&job_new, job_new.checkpoint_dir, NULL, 0, NULL, &e);
	CHECK(rc == 0, "shmrun_rescale gen %u -> %u: %d (%s)", old_w, new_w, rc, strerror(-rc));
	CHECK(e == 2, "new epoch %" PRIu64 ", expected 2 (past ckpt-1)", e);
	rc = shmrun_ckpt_verify(job_new.checkpoint_dir, 1, NULL, why, sizeof(why));
	CHECK(rc == 0, "old ckpt-1 no longer verifies: %d %s", rc, why);
	read_ckpt(job_new.checkpoint_dir, e, &r);
	CHECK(r.m.fingerprint == shmrun_fingerprint(&job_new),
	      "ckpt-2 fingerprint %016" PRIx64 " is not the new topology's %016" PRIx64,
	      r.m.fingerprint, shmrun_fingerprint(&job_new));
	CHECK(r.m.nfiles == new_w + out_w, "ckpt-2 lists %u files, expected %u", r.m.nfiles,
	      new_w + out_w);
	CHECK(stage_width_in(&r.m, "gen") == new_w, "ckpt-2 gen width %u, expected %u",
	      stage_width_in(&r.m, "gen"), new_w);

	where = malloc((npool + 1) * sizeof(*where));
	CHECK(where != NULL, "malloc");
	for (uint32_t k = 0; k < npool; k++)
		where[k] = UINT32_MAX;
	for (uint32_t j = 0; j < new_w; j++) {
		const struct shmrun_manifest_file *mf;
		const struct shmrun_state_view *v = find_view(&r, "gen", j, &mf);
		const unsigned char *p = v->pw;
		uint32_t last = UINT32_MAX;

		check_head(v, "gen", j, new_w, job_new.vnodes, e);
		CHECK(v->nsections == 0, "gen[%u]: %u key-bound sections out of nowhere", j,
		      v->nsections);
		CHECK(mf->pw_bytes == v->pw_len,
		      "gen[%u]: MANIFEST pw_bytes %" PRIu64 ", the file holds %zu", j, mf->pw_bytes,
		      v->pw_len);
		for (uint64_t q = 0; q < v->npw; q++) {
			uint32_t len, k, want;

			memcpy(&len, p, 4);
			k = pool_index(pool, npool, p + 4, len);
			CHECK(k != UINT32_MAX,
			      "gen %u -> %u: new gen[%u] entry %" PRIu64 " (%u bytes) is no old entry",
			      old_w, new_w, j, q, len);
			CHECK(where[k] == UINT32_MAX,
			      "gen %u -> %u: pool entry %u (old gen[%u] position %u) is in new "
			      "gen[%u] and again in gen[%u]",
			      old_w, new_w, k, pool[k].old_inst, pool[k].old_pos, where[k], j);
			where[k] = j;
			want = old_w == new_w ? pool[k].old_inst : k % new_w;
			CHECK(want == j,
			      "gen %u -> %u: pool entry %u (old gen[%u] position %u): expected in "
			      "new gen[%u]%s, got gen[%u]",
			      old_w, new_w, k, pool[k].old_inst, pool[k].old_pos, want,
			      old_w == new_w ? " (width unchanged)" : " (k mod NEW)", j);
			CHECK(last == UINT32_MAX || k > last,
			      "gen %u -> %u: new gen[%u] holds pool entry %u after entry %u: not in "
			      "pool order",
			      old_w, new_w, j, k, last);
			last = k;
			p += 4 + len;
		}
	}
	for (uint32_t k = 0; k < npool; k++)
		CHECK(where[k] != UINT32_MAX,
		      "gen %u -> %u: pool entry %u (old gen[%u] position %u, %u bytes) is in no "
		      "new instance (expected gen[%u])",
		      old_w, new_w, k, pool[k].old_inst, pool[k].old_pos, pool[k].len,
		      old_w == new_w ? pool[k].old_inst : k % new_w);
	for (uint32_t j = 0; j < out_w; j++) {
		const struct shmrun_state_view *v = find_view(&r, "out", j, NULL);

		check_head(v, "out", j, out_w, job_new.vnodes, e);
		CHECK(v->npw == 0 && v->nsections == 0, "out[%u]: state out of nowhere", j);
	}
	free(where);
	free_ckpt(&r);
	free(pool);
	shmrun_job_free(&job_old);
	shmrun_job_free(&job_new);
	trial_end();
}

START_TEST(split_random_widths)
{
	seed_rng("split_random_widths");
	for (int t = 0; t < SPLIT_TRIALS; t++) {
		uint32_t old_w = 1 + rnd_below(MAX_WIDTH), new_w = 1 + rnd_below(MAX_WIDTH);

		snprintf(ctx, sizeof(ctx), "split_random_widths seed=%" PRIu64 " trial=%d OLD=%u NEW=%u",
			 seed, t, old_w, new_w);
		split_trial(old_w, new_w);
	}
}
END_TEST

START_TEST(split_every_width_pair)
{
	seed_rng("split_every_width_pair");
	for (uint32_t o = 1; o <= MAX_WIDTH; o++)
		for (uint32_t n = 1; n <= MAX_WIDTH; n++) {
			snprintf(ctx, sizeof(ctx),
				 "split_every_width_pair seed=%" PRIu64 " OLD=%u NEW=%u", seed, o, n);
			split_trial(o, n);
		}
}
END_TEST

START_TEST(same_width_keeps_own_entries)
{
	seed_rng("same_width_keeps_own_entries");
	for (uint32_t w = 1; w <= MAX_WIDTH; w++)
		for (int rep = 0; rep < 3; rep++) {
			snprintf(ctx, sizeof(ctx),
				 "same_width_keeps_own_entries seed=%" PRIu64 " width=%u rep=%d",
				 seed, w, rep);
			split_trial(w, w);
		}
}
END_TEST

/* ---- key-bound ----------------------------------------------------------------------- */

/* Random sections for the 4 old instances of cnt, each in its instance's vnode range. */
static struct kv *make_keys(uint32_t vnodes, uint32_t old_w, uint32_t *counts, uint32_t *nkv)
{
	struct kv *kvs = calloc((size_t)vnodes * 4 + 1, sizeof(*kvs));
	uint32_t n = 0;

	CHECK(kvs != NULL, "calloc");
	for (uint32_t i = 0; i < old_w; i++) {
		uint32_t lo, hi, start = n;

		shmrun_placement_vnode_range(i, old_w, vnodes, &lo, &hi);
		for (uint32_t v = lo; v < hi; v++) {
			uint32_t keys;

			if (v != lo && rnd_below(3) != 0) /* a third of the vnodes, and the first */
				continue;
			keys = 1 + rnd_below(4);
			for (uint32_t k = 0; k < keys; k++) {
				struct kv *e = &kvs[n++];

				e->vnode = v;
				e->len = (uint32_t)snprintf(e->key, sizeof(e->key), "v%u.k%u.%x", v,
							    k, (unsigned)rnd_below(1u << 20));
				e->value = rnd();
			}
		}
		counts[i] = n - start;
	}
	*nkv = n;
	return kvs;
}

/*
 * Every (vnode, key, value) of @kvs in exactly one cnt instance of ckpt-@e, the
 * owner. @own_wm: each instance keeps its own watermark (ckpt-1, or a rescale
 * that kept the width), else the old instances' minimum.
 */
static void check_keyed_wm(const char *dir, uint64_t e, uint32_t width, uint32_t vnodes,
			   struct kv *kvs, uint32_t nkv, bool own_wm);

static void check_keyed(const char *dir, uint64_t e, uint32_t width, uint32_t vnodes,
			struct kv *kvs, uint32_t nkv)
{
	check_keyed_wm(dir, e, width, vnodes, kvs, nkv, e == 1);
}

static void check_keyed_wm(const char *dir, uint64_t e, uint32_t width, uint32_t vnodes,
			   struct kv *kvs, uint32_t nkv, bool own_wm)
{
	struct ckpt_read r;

	for (uint32_t i = 0; i < nkv; i++)
		kvs[i].seen = kvs[i].tseen = UINT32_MAX;
	read_ckpt(dir, e, &r);
	CHECK(stage_width_in(&r.m, "cnt") == width, "ckpt-%" PRIu64 " cnt width %u, expected %u",
	      e, stage_width_in(&r.m, "cnt"), width);
	for (uint32_t j = 0; j < width; j++) {
		const struct shmrun_manifest_file *mf;
		const struct shmrun_state_view *v = find_view(&r, "cnt", j, &mf);
		uint64_t kv_bytes = 0;
		uint32_t lo, hi;

		shmrun_placement_vnode_range(j, width, vnodes, &lo, &hi);
		check_head(v, "cnt", j, width, vnodes, e);
		/* the watermark: the old instances' minimum (4000 - 100 * 3) after a width change */
		CHECK(v->wm == (own_wm ? 4000 - 100 * (int64_t)j : 3700),
		      "cnt[%u]: watermark %" PRId64 ", expected %" PRId64, j, v->wm,
		      own_wm ? 4000 - 100 * (int64_t)j : (int64_t)3700);
		CHECK(v->npw == 0, "cnt[%u]: %" PRIu64 " per-worker entries out of nowhere", j,
		      v->npw);
		CHECK(v->nsections == 0 || v->value_bytes == VALUE_BYTES,
		      "cnt[%u]: value_bytes %u, expected %u", j, v->value_bytes, VALUE_BYTES);
		for (uint32_t s = 0; s < v->nsections; s++) {
			const struct shmrun_state_section *sec = &v->sections[s];
			const unsigned char *p = sec->bytes + 16;

			kv_bytes += sec->len;
			CHECK(sec->vnode >= lo && sec->vnode < hi,
			      "vnode %u is in new cnt[%u] of %u, whose range is [%u, %u); expected "
			      "in cnt[%u]",
			      sec->vnode, j, width, lo, hi,
			      shmrun_placement_instance_of_vnode(sec->vnode, width, vnodes));
			for (uint64_t k = 0; k < sec->keys; k++) {
				uint32_t len, found = UINT32_MAX;
				uint64_t value;

				memcpy(&len, p, 4);
				memcpy(&value, p + 4 + len, 8);
				for (uint32_t i = 0; i < nkv && found == UINT32_MAX; i++)
					if (kvs[i].vnode == sec->vnode && kvs[i].len == len &&
					    memcmp(kvs[i].key, p + 4, len) == 0)
						found = i;
				CHECK(found != UINT32_MAX,
				      "cnt[%u] vnode %u: key '%.*s' was in no old section", j,
				      sec->vnode, (int)len, (const char *)p + 4);
				CHECK(kvs[found].value == value,
				      "cnt[%u] vnode %u key '%s': value %" PRIu64 ", expected %" PRIu64,
				      j, sec->vnode, kvs[found].key, value, kvs[found].value);
				CHECK(kvs[found].seen == UINT32_MAX,
				      "vnode %u key '%s' is in cnt[%u] and again in cnt[%u]",
				      sec->vnode, kvs[found].key, kvs[found].seen, j);
				kvs[found].seen = j;
				p += 4 + len + VALUE_BYTES;
			}
			/* the vnode's timers came with it: each key's one, at its value */
			CHECK(sec->timers == sec->keys, "cnt[%u] vnode %u: %" PRIu64 " timers for %" PRIu64
			      " keys", j, sec->vnode, sec->timers, sec->keys);
			p += 8;
			for (uint64_t k = 0; k < sec->timers; k++) {
				uint32_t len, domain, found = UINT32_MAX;
				int64_t time;

				memcpy(&len, p, 4);
				memcpy(&domain, p + 4, 4);
				memcpy(&time, p + 8, 8);
				for (uint32_t i = 0; i < nkv && found == UINT32_MAX; i++)
					if (kvs[i].vnode == sec->vnode && kvs[i].len == len &&
					    memcmp(kvs[i].key, p + 16, len) == 0)
						found = i;
				CHECK(found != UINT32_MAX && domain == 0 &&
					  time == (int64_t)kvs[found].value &&
					  kvs[found].tseen == UINT32_MAX,
				      "cnt[%u] vnode %u: timer '%.*s' at %" PRId64
				      " (domain %u) unknown, wrong or twice",
				      j, sec->vnode, (int)len, (const char *)p + 16, time, domain);
				kvs[found].tseen = j;
				p += 16 + len;
			}
			CHECK(p == sec->bytes + sec->len, "cnt[%u] vnode %u: section length %zu", j,
			      sec->vnode, sec->len);
		}
		CHECK(mf->kv_bytes == kv_bytes,
		      "cnt[%u]: MANIFEST kv_bytes %" PRIu64 ", the file holds %" PRIu64, j,
		      mf->kv_bytes, kv_bytes);
	}
	for (uint32_t i = 0; i < nkv; i++)
		CHECK(kvs[i].seen != UINT32_MAX,
		      "vnode %u key '%s' is in no new instance (expected cnt[%u] of %u)",
		      kvs[i].vnode, kvs[i].key,
		      shmrun_placement_instance_of_vnode(kvs[i].vnode, width, vnodes), width);
	/* gen and out keep their (empty) state */
	CHECK(find_view(&r, "gen", 0, NULL)->npw == 0, "gen[0]: per-worker entries out of nowhere");
	CHECK(find_view(&r, "out", 0, NULL)->nsections == 0, "out[0]: sections out of nowhere");
	free_ckpt(&r);
}

static void keyed_trial(uint32_t vnodes)
{
	static const uint32_t steps[] = {2, 5};
	struct shmrun_job job;
	struct fake_state st[6];
	uint32_t counts[4], nkv;
	struct kv *kvs;
	uint64_t prev = 1;

	trial_begin();
	load_count_job(4, vnodes, &job);
	kvs = make_keys(vnodes, 4, counts, &nkv);
	st[0] = (struct fake_state){.stage = "gen", .instance = 0, .width = 1};
	for (uint32_t i = 0, off = 0; i < 4; off += counts[i], i++)
		st[1 + i] = (struct fake_state){.stage = "cnt", .instance = i, .width = 4,
						.value_bytes = VALUE_BYTES, .kvs = kvs + off,
						.nkv = counts[i], .wm = 4000 - 100 * (int64_t)i};
	st[5] = (struct fake_state){.stage = "out", .instance = 0, .width = 1};
	write_ckpt(&job, 1, st, 6);
	/* the fabrication itself: every key in its old owner's range */
	check_keyed(job.checkpoint_dir, 1, 4, vnodes, kvs, nkv);
	shmrun_job_free(&job);
	for (uint32_t s = 0; s < 2; s++) {
		uint64_t e = 0;
		int rc;

		load_count_job(steps[s], vnodes, &job);
		rc = shmrun_rescale(&job, job.checkpoint_dir, NULL, 0, NULL, &e);
		CHECK(rc == 0, "shmrun_rescale cnt -> %u (vnodes %u): %d (%s)", steps[s], vnodes, rc,
		      strerror(-rc));
		CHECK(e == prev + 1, "new epoch %" PRIu64 ", expected %" PRIu64, e, prev + 1);
		check_keyed(job.checkpoint_dir, e, steps[s], vnodes, kvs, nkv);
		prev = e;
		shmrun_job_free(&job);
	}
	free(kvs);
	trial_end();
}

START_TEST(keyed_vnodes_move_whole)
{
	static const uint32_t vnodes[] = {256, 7, 64};

	seed_rng("keyed_vnodes_move_whole");
	for (uint32_t i = 0; i < sizeof(vnodes) / sizeof(vnodes[0]); i++)
		for (int rep = 0; rep < 4; rep++) {
			snprintf(ctx, sizeof(ctx),
				 "keyed_vnodes_move_whole seed=%" PRIu64 " vnodes=%u rep=%d 4->2->5",
				 seed, vnodes[i], rep);
			keyed_trial(vnodes[i]);
		}
}
END_TEST

/* ---- refusals, plan, epochs ----------------------------------------------------------- */

/* gen at @w with random entries (plus an empty out) as ckpt-1; the pool in *@pool. */
static void split_ckpt(uint32_t w, struct pw_entry **pool, uint32_t *npool)
{
	struct shmrun_job job;
	struct fake_state st[MAX_WIDTH + 1];
	uint32_t counts[MAX_WIDTH];

	load_split_job(w, 1, "", &job);
	*pool = make_pool(w, counts, npool);
	for (uint32_t i = 0, off = 0; i < w; off += counts[i], i++)
		st[i] = (struct fake_state){.stage = "gen", .instance = i, .width = w,
					    .pw = *pool + off, .npw = counts[i]};
	st[w] = (struct fake_state){.stage = "out", .instance = 0, .width = 1};
	write_ckpt(&job, 1, st, w + 1);
	shmrun_job_free(&job);
}

/* A state file of a version this shmrun does not know: refused, nothing written. */
START_TEST(unknown_state_version_refused)
{
	struct shmrun_job job;
	struct fake_state st[6];
	uint32_t counts[4], nkv;
	struct kv *kvs;
	uint64_t e = 0;
	int rc;

	seed_rng("unknown_state_version_refused");
	snprintf(ctx, sizeof(ctx), "unknown_state_version_refused seed=%" PRIu64, seed);
	trial_begin();
	load_count_job(4, 64, &job);
	kvs = make_keys(64, 4, counts, &nkv);
	st[0] = (struct fake_state){.stage = "gen", .instance = 0, .width = 1};
	for (uint32_t i = 0, off = 0; i < 4; off += counts[i], i++)
		st[1 + i] = (struct fake_state){.stage = "cnt", .instance = i, .width = 4,
						.value_bytes = VALUE_BYTES, .kvs = kvs + off,
						.nkv = counts[i],
						.version = i == 2 ? SHMRUN_STATE_VERSION + 1 : 0};
	st[5] = (struct fake_state){.stage = "out", .instance = 0, .width = 1};
	write_ckpt(&job, 1, st, 6);
	shmrun_job_free(&job);
	load_count_job(2, 64, &job);
	rc = shmrun_rescale(&job, job.checkpoint_dir, NULL, 0, NULL, &e);
	CHECK(rc == -EPROTO, "rescale of a version %u state file returned %d, expected -EPROTO",
	      SHMRUN_STATE_VERSION + 1, rc);
	CHECK(e == 0, "refused rescale reported new epoch %" PRIu64, e);
	assert_only_epoch_1(job.checkpoint_dir);
	shmrun_job_free(&job);
	free(kvs);
	trial_end();
}
END_TEST

START_TEST(vnode_count_change_refused)
{
	static const struct {
		uint32_t old_w, new_w;
		const char *vnodes;
	} cases[] = {
		{2, 3, "vnodes = 128\n"},
		{3, 3, "vnodes = 128\n"},
		{4, 2, "vnodes = 512\n"},
	};

	seed_rng("vnode_count_change_refused");
	for (uint32_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct shmrun_job job;
		struct pw_entry *pool;
		uint32_t npool;
		uint64_t e = 0;
		int rc;

		snprintf(ctx, sizeof(ctx), "vnode_count_change_refused seed=%" PRIu64 " case %u", seed,
			 c);
		trial_begin();
		split_ckpt(cases[c].old_w, &pool, &npool);
		load_split_job(cases[c].new_w, 1, cases[c].vnodes, &job);
		rc = shmrun_rescale(&job, job.checkpoint_dir, NULL, 0, NULL, &e);
		CHECK(rc == -EPERM, "vnodes 256 -> %u, gen %u -> %u: rescale returned %d, expected "
				    "-EPERM",
		      job.vnodes, cases[c].old_w, cases[c].new_w, rc);
		CHECK(e == 0, "refused rescale reported new epoch %" PRIu64, e);
		assert_only_epoch_1(job.checkpoint_dir);
		/* the plan refuses the same way, and says nothing of moves */
		{
			char *text = NULL;
			size_t len = 0;
			FILE *f = open_memstream(&text, &len);

			CHECK(f != NULL, "open_memstream");
			rc = shmrun_rescale(&job, job.checkpoint_dir, NULL, 0, f, NULL);
			fclose(f);
			CHECK(rc == -EPERM, "plan: %d, expected -EPERM", rc);
			CHECK(strstr(text, "gen[") == NULL, "a refused plan prints moves:\n%s", text);
			free(text);
		}
		assert_only_epoch_1(job.checkpoint_dir);
		free(pool);
		shmrun_job_free(&job);
		trial_end();
	}
}
END_TEST

START_TEST(plan_writes_nothing)
{
	seed_rng("plan_writes_nothing");
	for (int t = 0; t < 16; t++) {
		uint32_t old_w = 1 + rnd_below(MAX_WIDTH), new_w = 1 + rnd_below(MAX_WIDTH);
		uint32_t out_w = old_w == new_w ? 2 : 1, npool, nlines = 0;
		struct shmrun_job job;
		struct pw_entry *pool;
		char *text = NULL, path[PATH_MAX];
		size_t len = 0;
		FILE *f;
		int rc, nfiles = 0;
		struct stat sb;

		snprintf(ctx, sizeof(ctx), "plan_writes_nothing seed=%" PRIu64 " trial=%d OLD=%u NEW=%u",
			 seed, t, old_w, new_w);
		trial_begin();
		split_ckpt(old_w, &pool, &npool);
		load_split_job(new_w, out_w, "", &job);
		f = open_memstream(&text, &len);
		CHECK(f != NULL, "open_memstream");
		rc = shmrun_rescale(&job, job.checkpoint_dir, NULL, 0, f, NULL);
		CHECK(fclose(f) == 0, "fclose");
		CHECK(rc == 0, "plan gen %u -> %u: %d\n%s", old_w, new_w, rc, text);
		assert_only_epoch_1(job.checkpoint_dir);
		shmrun_ckpt_path(job.checkpoint_dir, 1, path, sizeof(path));
		for (uint32_t i = 0; i < old_w; i++) {
			char file[PATH_MAX + 40];

			snprintf(file, sizeof(file), "%s/gen.%u.state", path, i);
			nfiles += stat(file, &sb) == 0;
		}
		CHECK(nfiles == (int)old_w, "ckpt-1 lost state files");
		for (uint32_t j = 0; j < new_w; j++) {
			char want[64];
			const char *line;
			uint32_t lo, hi, entries = 0, got = 0;

			shmrun_placement_vnode_range(j, new_w, job.vnodes, &lo, &hi);
			snprintf(want, sizeof(want), "    gen[%u]: vnodes [%u, %u): ", j, lo, hi);
			line = strstr(text, want);
			CHECK(line != NULL, "no line '%s' in the plan:\n%s", want, text);
			nlines++;
			line = strchr(line, ';');
			CHECK(line && sscanf(line, "; %u per-worker entries", &got) == 1,
			      "gen[%u]: no per-worker entry count in the plan:\n%s", j, text);
			for (uint32_t k = 0; k < npool; k++)
				entries += old_w == new_w ? pool[k].old_inst == j : k % new_w == j;
			CHECK(got == entries, "plan: gen[%u] gets %u per-worker entries, expected %u", j,
			      got, entries);
		}
		{
			char want[32];

			snprintf(want, sizeof(want), "    gen[%u]:", new_w);
			CHECK(strstr(text, want) == NULL, "the plan names gen[%u] of %u:\n%s", new_w,
			      new_w, text);
		}
		for (uint32_t j = 0; j < out_w; j++) {
			char want[32];

			snprintf(want, sizeof(want), "    out[%u]: vnodes [", j);
			CHECK(strstr(text, want) != NULL, "no line for out[%u] in the plan:\n%s", j, text);
		}
		CHECK(nlines == new_w, "plan lines");
		free(text);
		free(pool);
		shmrun_job_free(&job);
		trial_end();
	}
}
END_TEST

START_TEST(same_topology_moves_nothing)
{
	struct shmrun_job job;
	struct pw_entry *pool;
	uint32_t npool;
	uint64_t e = 99;
	int rc;

	seed_rng("same_topology_moves_nothing");
	trial_begin();
	split_ckpt(3, &pool, &npool);
	load_split_job(3, 1, "", &job);
	rc = shmrun_rescale(&job, job.checkpoint_dir, NULL, 0, NULL, &e);
	CHECK(rc == 0, "rescale to the same topology: %d", rc);
	CHECK(e == 0, "rescale to the same topology: new epoch %" PRIu64 ", expected 0", e);
	assert_only_epoch_1(job.checkpoint_dir);
	free(pool);
	shmrun_job_free(&job);
	trial_end();
}
END_TEST

START_TEST(new_epoch_passes_every_directory)
{
	struct shmrun_job job;
	struct pw_entry *pool;
	uint32_t npool;
	uint64_t e = 0;
	char path[PATH_MAX];
	int rc;

	seed_rng("new_epoch_passes_every_directory");
	trial_begin();
	split_ckpt(2, &pool, &npool);
	load_split_job(5, 1, "", &job);
	/* an incomplete, newer checkpoint (no MANIFEST): skipped, but its epoch is taken */
	shmrun_ckpt_path(job.checkpoint_dir, 7, path, sizeof(path));
	CHECK(mkdir(path, 0777) == 0, "mkdir %s", path);
	rc = shmrun_rescale(&job, job.checkpoint_dir, NULL, 0, NULL, &e);
	CHECK(rc == 0, "rescale: %d", rc);
	CHECK(e == 8, "new epoch %" PRIu64 ", expected 8 (past ckpt-7)", e);
	CHECK(ckpt_dir_exists(job.checkpoint_dir, 8), "no ckpt-8 directory");
	free(pool);
	shmrun_job_free(&job);
	trial_end();
}
END_TEST

/*
 * Hosts sharing checkpoint_dir (hosts > 1, checkpoint_layout = shared; every
 * host runs `shmrun --rescale`): host 0 alone writes; another host writes
 * nothing, waits for host 0's checkpoint (up to checkpoint_timeout, 300ms
 * here) and then takes it.
 */
START_TEST(shared_dir_only_host_0_writes)
{
	struct shmrun_job job0, job1;
	struct pw_entry *pool;
	uint32_t npool;
	uint64_t e = 99, *epochs;
	int64_t t0;
	int rc;

	seed_rng("shared_dir_only_host_0_writes");
	trial_begin();
	split_ckpt(3, &pool, &npool);
	load_split_job(2, 1, "checkpoint_timeout = 300ms\n", &job1);
	CHECK(shmrun_ckpt_set_host(&job1, 1) == 0, "set host 1");
	/* host 0 has not rescaled: host 1 gives up after checkpoint_timeout, writing nothing */
	t0 = (int64_t)time(NULL);
	rc = shmrun_rescale(&job1, job1.checkpoint_dir, NULL, 0, NULL, &e);
	CHECK(rc == -ETIMEDOUT, "host 1 alone: %d, expected -ETIMEDOUT", rc);
	CHECK((int64_t)time(NULL) - t0 < 30, "host 1 waited far past checkpoint_timeout");
	assert_only_epoch_1(job1.checkpoint_dir);
	/* a dry run (check --rescale, plan --rescale-from) still plans on host 1 */
	CHECK(shmrun_rescale_dry_run(&job1, NULL, 0) == 0, "dry run on host 1");
	assert_only_epoch_1(job1.checkpoint_dir);
	/* host 0 writes ckpt-2; host 1 then takes it at once and writes nothing */
	load_split_job(2, 1, "checkpoint_timeout = 300ms\n", &job0);
	rc = shmrun_rescale(&job0, job0.checkpoint_dir, NULL, 0, NULL, &e);
	CHECK(rc == 0 && e == 2, "host 0: %d, new epoch %" PRIu64 ", expected 0 and 2", rc, e);
	e = 0;
	rc = shmrun_rescale(&job1, job1.checkpoint_dir, NULL, 0, NULL, &e);
	CHECK(rc == 0 && e == 2, "host 1 after host 0: %d, epoch %" PRIu64 ", expected 0 and 2",
	      rc, e);
	CHECK(shmrun_ckpt_list(job1.checkpoint_dir, &epochs) == 2 && epochs[0] == 2,
	      "checkpoints after both hosts rescaled: expected ckpt-2 and ckpt-1");
	free(epochs);
	free(pool);
	shmrun_job_free(&job0);
	shmrun_job_free(&job1);
	trial_end();
}
END_TEST

/*
 * Hosts, shared layout: 1 host of 2 workers -> 2 hosts of 1 worker -> 2 hosts
 * with cnt at width 2 -> back to 1 host at width 4, each through the rescale
 * `shmrun --rescale` runs (host 0 writing into the shared checkpoint_dir).
 * The host count is in the fingerprint, so even the first step (same
 * widths) is a new checkpoint; every key stays with its vnode's owner, and
 * with 2 hosts each host's own state files of it verify (the restore's check).
 */
START_TEST(hosts_1_to_2_and_back_shared)
{
	static const char *const members[] = {"workers = 2\n", "hosts = 2\nworkers = 1\n",
					      "hosts = 2\nworkers = 1\n", "workers = 2\n"};
	static const uint32_t widths[] = {4, 4, 2, 4};
	const uint32_t vnodes = 64;
	struct shmrun_job job;
	struct fake_state st[6];
	uint32_t counts[4], nkv;
	uint64_t prev_fp = 0;
	struct kv *kvs;

	seed_rng("hosts_1_to_2_and_back_shared");
	trial_begin();
	load_count_job_on(members[0], widths[0], vnodes, &job);
	kvs = make_keys(vnodes, 4, counts, &nkv);
	st[0] = (struct fake_state){.stage = "gen", .instance = 0, .width = 1};
	for (uint32_t i = 0, off = 0; i < 4; off += counts[i], i++)
		st[1 + i] = (struct fake_state){.stage = "cnt", .instance = i, .width = 4,
						.value_bytes = VALUE_BYTES, .kvs = kvs + off,
						.nkv = counts[i], .wm = 4000 - 100 * (int64_t)i};
	st[5] = (struct fake_state){.stage = "out", .instance = 0, .width = 1};
	write_ckpt(&job, 1, st, 6);
	prev_fp = shmrun_fingerprint(&job);
	shmrun_job_free(&job);
	for (uint32_t s = 1; s < 4; s++) {
		uint64_t e = 0;
		int rc;

		load_count_job_on(members[s], widths[s], vnodes, &job);
		CHECK(shmrun_fingerprint(&job) != prev_fp, "step %u: the fingerprint did not change",
		      s);
		prev_fp = shmrun_fingerprint(&job);
		rc = shmrun_rescale(&job, job.checkpoint_dir, NULL, 0, NULL, &e);
		CHECK(rc == 0 && e == 1 + s, "step %u (%s): %d, new epoch %" PRIu64, s, members[s], rc,
		      e);
		/* step 1 keeps the width: each instance keeps its own watermark */
		check_keyed_wm(job.checkpoint_dir, e, widths[s], vnodes, kvs, nkv, s == 1);
		if (job.hosts > 1) {
			struct shmrun_plan *plan;
			struct shmrun_ckpt_scope scope;
			char why[300];

			CHECK(shmrun_plan_build(&job, &plan) == 0, "plan of step %u", s);
			for (uint32_t h = 0; h < 2; h++) {
				struct shmrun_plan p = *plan;
				uint32_t own = 0;

				CHECK(shmrun_ckpt_set_host(&job, h) == 0, "host %u", h);
				p.job = &job;
				shmrun_ckpt_scope_of(&p, job.hosts, &scope);
				for (uint32_t i = 0; i < widths[s]; i++)
					own += shmrun_ckpt_scope_has(&scope, "cnt", i);
				CHECK(own == widths[s] / 2, "host %u holds %u of %u cnt instances", h,
				      own, widths[s]);
				CHECK(shmrun_ckpt_verify_scoped(job.checkpoint_dir, e, &scope, NULL, why,
								sizeof(why)) == 0,
				      "host %u's files of ckpt-%" PRIu64 ": %s", h, e, why);
			}
			shmrun_plan_free(plan);
		}
		shmrun_job_free(&job);
	}
	free(kvs);
	trial_end();
}
END_TEST

static Suite *rescale_suite(void)
{
	Suite *s = suite_create("rescale");
	TCase *split = tcase_create("split");
	TCase *keyed = tcase_create("keyed");
	TCase *other = tcase_create("refusals_plan_epochs");

	tcase_add_unchecked_fixture(split, root_create, tmpdir_remove);
	tcase_add_unchecked_fixture(keyed, root_create, tmpdir_remove);
	tcase_add_unchecked_fixture(other, root_create, tmpdir_remove);
	tcase_set_timeout(split, 100);
	tcase_set_timeout(keyed, 100);
	tcase_set_timeout(other, 100);
	tcase_add_test(split, split_random_widths);
	tcase_add_test(split, split_every_width_pair);
	tcase_add_test(split, same_width_keeps_own_entries);
	tcase_add_test(keyed, keyed_vnodes_move_whole);
	tcase_add_test(other, vnode_count_change_refused);
	tcase_add_test(other, unknown_state_version_refused);
	tcase_add_test(other, plan_writes_nothing);
	tcase_add_test(other, same_topology_moves_nothing);
	tcase_add_test(other, new_epoch_passes_every_directory);
	tcase_add_test(other, shared_dir_only_host_0_writes);
	tcase_add_test(keyed, hosts_1_to_2_and_back_shared);
	suite_add_tcase(s, split);
	suite_add_tcase(s, keyed);
	suite_add_tcase(s, other);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(rescale_suite());
	int failed;

	shmrun_log_set_level(SHMRUN_LOG_WARN);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
