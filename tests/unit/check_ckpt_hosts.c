/*
 * tests/unit/check_ckpt_hosts.c: checkpoints across hosts through
 * runtime/ckpt/hosts.h, without MPI: two "hosts" are two jobs loaded from
 * one topology with checkpoint_layout = per_host and checkpoint_dir =
 * ck/{host} and hosts = 2 of 1 worker each, one set to host 0 and one to
 * host 1 (shmrun_ckpt_set_host()), and their plan (the same on every host):
 * gen[0] and out[0] on host 0, out[1] on host 1.
 *
 * Behaviours: {host} expansion and the conf errors around
 * checkpoint_layout; which state files a host checks; the MANIFEST bytes
 * rank 0 sends (and refuses to send: missing, truncated, of another epoch
 * or fingerprint); their installation on host 1 (and every refusal: bad
 * bytes, wrong epoch, wrong fingerprint, an unwritable or symlinked
 * directory, the shared layout), with nothing written on a refusal;
 * retention by one host's files, keeping two; the epoch a host would restore,
 * the agreement, and restoring the agreed epoch instead, completing one
 * whose COMMIT never arrived with rank 0's MANIFEST.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/ckpt_io.h"
#include "ckpt/hosts.h"
#include "ckpt/manifest.h"
#include "ckpt/recovery.h"
#include "common/tmpdir.h"
#include "control.h"
#include "internal.h"
#include "plan.h"
#include "shmrun/job.h"
#include "shmrun/runtime.h"

static char trial[PATH_MAX];
static int trial_n;

/* A fresh directory for one test; @conf written there as t.conf. Return: its path. */
static const char *write_conf(const char *conf, char *path, size_t len)
{
	FILE *f;

	snprintf(trial, sizeof(trial), "%s/t%d-%d", tmpdir, (int)getpid(), trial_n++);
	ck_assert_int_eq(mkdir(trial, 0700), 0);
	snprintf(path, len, "%s/t.conf", trial);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(conf, f);
	ck_assert_int_eq(fclose(f), 0);
	return path;
}

static const char *const topo_tail = "vnodes = 64\n"
				     "[gen]\nop = sequence\ncount = 10\n"
				     "[out]\nop = null_sink\ninput = gen\nwidth = 2\n";

/* The two hosts' views of one per_host job, and its plan (2 workers = 2 hosts x 1). */
struct hosts {
	struct shmrun_job job[2];
	struct shmrun_plan *plan;
	struct shmrun_ckpt_scope scope[2];
	char dir[2][PATH_MAX];
};

static void load_hosts(struct hosts *h, const char *extra)
{
	char conf[1024], path[PATH_MAX + 16];
	struct shmrun_job_errors errs = {0};

	snprintf(conf, sizeof(conf),
		 "[job]\nhosts = 2\nworkers = 1\ncheckpoint_dir = ck/{host}\n"
		 "checkpoint_layout = per_host\n%s%s",
		 extra ? extra : "", topo_tail);
	write_conf(conf, path, sizeof(path));
	snprintf(path + strlen(trial), sizeof(path) - strlen(trial), "/ck");
	ck_assert_int_eq(mkdir(path, 0700), 0); /* the hosts' directories are made on first use */
	snprintf(path + strlen(trial), sizeof(path) - strlen(trial), "/t.conf");
	for (uint32_t k = 0; k < 2; k++) {
		ck_assert_msg(shmrun_job_load(path, &h->job[k], &errs) == 0, "load: %s",
			      errs.n ? errs.msgs[0] : "-");
		ck_assert_int_eq(shmrun_ckpt_set_host(&h->job[k], k), 0);
		snprintf(h->dir[k], sizeof(h->dir[k]), "%s/ck/%u", trial, k);
		ck_assert_str_eq(h->job[k].checkpoint_dir, h->dir[k]);
	}
	ck_assert_int_eq(shmrun_plan_build(&h->job[0], &h->plan), 0);
	ck_assert_uint_eq(h->plan->workers, 2);
	ck_assert_uint_eq(h->plan->hosts, 2);
	for (uint32_t k = 0; k < 2; k++) {
		struct shmrun_plan p = *h->plan;

		p.job = &h->job[k]; /* the same plan, as host k builds it */
		shmrun_ckpt_scope_of(&p, 2, &h->scope[k]);
		ck_assert_ptr_eq(h->scope[k].plan, &p);
		h->scope[k].plan = h->plan; /* same tasks, outliving p */
		ck_assert_uint_eq(h->scope[k].host, k);
		ck_assert_uint_eq(h->scope[k].workers_per_host, 1);
	}
}

static void free_hosts(struct hosts *h)
{
	shmrun_plan_free(h->plan);
	shmrun_job_free(&h->job[0]);
	shmrun_job_free(&h->job[1]);
}

static const char *const names[] = {"gen.0.state", "out.0.state", "out.1.state"};
static const uint32_t host_of_file[] = {0, 0, 1};

/* A real state file @name of epoch @e in @dir/ckpt-<e>; its size and XXH64 into @f. */
static void write_state(const char *dir, uint64_t e, const char *name,
			struct shmrun_manifest_file *f)
{
	struct shmrun_ckpt_writer wr;
	struct shmrun_ckpt_buf buf;
	char path[PATH_MAX], text[80], why[200];
	int dirfd;

	shmrun_ckpt_mkdir(dir);
	shmrun_ckpt_path(dir, e, path, sizeof(path));
	shmrun_ckpt_mkdir(path);
	dirfd = open(path, O_RDONLY | O_DIRECTORY);
	ck_assert_int_ge(dirfd, 0);
	ck_assert_int_eq(shmrun_ckpt_writer_init(&wr, 4, why, sizeof(why)), 0);
	snprintf(text, sizeof(text), "state of %s in epoch %llu", name, (unsigned long long)e);
	shmrun_ckpt_buf_init(&buf);
	ck_assert_int_eq(shmrun_ckpt_buf_append(&buf, text, strlen(text)), 0);
	ck_assert_int_eq(shmrun_ckpt_buf_seal(&buf), 0);
	memset(f, 0, sizeof(*f));
	snprintf(f->name, sizeof(f->name), "%s", name);
	ck_assert_int_eq(shmrun_ckpt_write_file(&wr, dirfd, name, &buf, &f->size, &f->xxh64), 0);
	shmrun_ckpt_buf_free(&buf);
	shmrun_ckpt_writer_close(&wr);
	close(dirfd);
}

/*
 * Epoch @e across both hosts: each host writes its tasks' state files into
 * its own directory; rank 0 writes the MANIFEST from the reports (sizes and
 * digests) into host 0's directory only; @commit: host 1 installs rank 0's
 * bytes as the COMMIT would.
 */
static void epoch(struct hosts *h, uint64_t e, bool commit)
{
	struct shmrun_manifest_file files[3];
	char why[400], *bytes;
	size_t len;

	for (int i = 0; i < 3; i++)
		write_state(h->dir[host_of_file[i]], e, names[i], &files[i]);
	ck_assert_int_eq(shmrun_ckpt_write_manifest(&h->job[0], e, false, files, 3), 0);
	if (!commit)
		return;
	ck_assert_int_eq(shmrun_ckpt_manifest_bytes(h->dir[0], e, shmrun_fingerprint(&h->job[0]),
						    &bytes, &len, why, sizeof(why)),
			 0);
	ck_assert_msg(shmrun_ckpt_install_manifest(&h->job[1], e, bytes, len, why, sizeof(why)) ==
			  0,
		      "install: %s", why);
	free(bytes);
}

static const char *in_ckpt(const char *dir, uint64_t e, const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s/ckpt-%llu/%s", dir, (unsigned long long)e, name);
	return buf;
}

static bool exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *p;
	long n;

	ck_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	p = malloc((size_t)n + 1);
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq(fread(p, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	p[n] = '\0';
	*len = (size_t)n;
	return p;
}

static void flip_byte(const char *path, off_t at)
{
	int fd = open(path, O_RDWR);
	unsigned char c;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &c, 1, at), 1);
	c ^= 0x01;
	ck_assert_int_eq(pwrite(fd, &c, 1, at), 1);
	close(fd);
}

/* ---- the layout ----------------------------------------------------------------- */

START_TEST(host_is_expanded_everywhere_and_refused_when_too_long)
{
	char out[64];

	ck_assert_int_eq(shmrun_ckpt_dir_expand("/ck/{host}/x{host}", 12, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "/ck/12/x12");
	ck_assert_int_eq(shmrun_ckpt_dir_expand("/ck/plain", 3, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "/ck/plain");
	ck_assert_int_eq(shmrun_ckpt_dir_expand("{host}", 4294967295u, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "4294967295");
	ck_assert_int_eq(shmrun_ckpt_dir_expand("/ck/{host}", 12345, out, 8), -ENAMETOOLONG);
	ck_assert_str_eq(out, "");
	ck_assert_int_eq(shmrun_ckpt_dir_expand("/ck/{host}", 1, out, 6), 0);
	ck_assert_str_eq(out, "/ck/1");
	ck_assert_int_eq(shmrun_ckpt_dir_expand("/ck/{host}", 10, out, 6), -ENAMETOOLONG);
}
END_TEST

START_TEST(layout_keys_load_and_host_sets_the_directory)
{
	struct shmrun_job job;
	struct shmrun_job_errors errs = {0};
	char path[PATH_MAX + 16], want[PATH_MAX + 32], conf[512];

	/* default: shared, no template */
	snprintf(conf, sizeof(conf), "[job]\nworkers = 1\ncheckpoint_dir = ck\n%s", topo_tail);
	ck_assert_int_eq(shmrun_job_load(write_conf(conf, path, sizeof(path)), &job, &errs), 0);
	ck_assert(!job.checkpoint_per_host);
	ck_assert_ptr_null(job.checkpoint_dir_template);
	ck_assert_uint_eq(job.host, 0);
	ck_assert_int_eq(shmrun_ckpt_set_host(&job, 5), 0); /* no {host}: same directory */
	snprintf(want, sizeof(want), "%s/ck", trial);
	ck_assert_str_eq(job.checkpoint_dir, want);
	ck_assert_uint_eq(job.host, 5);
	shmrun_job_free(&job);

	/* per_host with {host}: host 0 at load, then the host set */
	snprintf(
	    conf, sizeof(conf),
	    "[job]\nworkers = 1\ncheckpoint_dir = ck/h{host}\ncheckpoint_layout = per_host\n%s",
	    topo_tail);
	ck_assert_int_eq(shmrun_job_load(write_conf(conf, path, sizeof(path)), &job, &errs), 0);
	ck_assert(job.checkpoint_per_host);
	snprintf(want, sizeof(want), "%s/ck/h0", trial);
	ck_assert_str_eq(job.checkpoint_dir, want);
	snprintf(want, sizeof(want), "%s/ck/h{host}", trial);
	ck_assert_str_eq(job.checkpoint_dir_template, want);
	ck_assert_int_eq(shmrun_ckpt_set_host(&job, 17), 0);
	snprintf(want, sizeof(want), "%s/ck/h17", trial);
	ck_assert_str_eq(job.checkpoint_dir, want);
	ck_assert_uint_eq(job.host, 17);
	shmrun_job_free(&job);
}
END_TEST

/* The load of @conf fails with an error containing @line_prefix and @text. */
static void refused(const char *conf, const char *line, const char *text)
{
	struct shmrun_job job;
	struct shmrun_job_errors errs = {0};
	char path[PATH_MAX + 16], want[PATH_MAX + 40];
	bool found = false;

	ck_assert_int_eq(shmrun_job_load(write_conf(conf, path, sizeof(path)), &job, &errs),
			 -EINVAL);
	snprintf(want, sizeof(want), "%s:%s:", path, line);
	for (uint32_t i = 0; i < errs.n; i++)
		found |= strstr(errs.msgs[i], want) && strstr(errs.msgs[i], text);
	ck_assert_msg(found, "no error '%s ... %s' in %u: %s", want, text, errs.n,
		      errs.n ? errs.msgs[0] : "-");
	shmrun_job_errors_free(&errs);
}

START_TEST(layout_errors_name_the_line)
{
	char conf[512];

	snprintf(conf, sizeof(conf),
		 "[job]\nworkers = 1\ncheckpoint_dir = ck\ncheckpoint_layout = per-host\n%s",
		 topo_tail);
	refused(conf, "4", "per_host");
	snprintf(conf, sizeof(conf), "[job]\nworkers = 1\ncheckpoint_dir = ck/{host}\n%s",
		 topo_tail);
	refused(conf, "3", "only checkpoint_layout = per_host");
	snprintf(conf, sizeof(conf),
		 "[job]\nworkers = 1\ncheckpoint_layout = shared\ncheckpoint_dir = ck/{host}\n%s",
		 topo_tail);
	refused(conf, "4", "{host}");
}
END_TEST

START_TEST(layout_without_checkpoint_dir_warns)
{
	struct shmrun_job job;
	struct shmrun_job_errors errs = {0};
	char path[PATH_MAX + 16], conf[512];
	bool warned = false;

	snprintf(conf, sizeof(conf), "[job]\nworkers = 1\ncheckpoint_layout = per_host\n%s",
		 topo_tail);
	ck_assert_int_eq(shmrun_job_load(write_conf(conf, path, sizeof(path)), &job, &errs), 0);
	for (uint32_t i = 0; i < job.nwarnings; i++)
		warned |= strstr(job.warnings[i], "checkpoint_layout has no effect") != NULL;
	ck_assert(warned);
	shmrun_job_free(&job);
}
END_TEST

START_TEST(host_index_comes_from_the_mpi_environment)
{
	struct shmrun_job job;
	struct shmrun_job_errors errs = {0};
	char path[PATH_MAX + 16], want[PATH_MAX + 32], conf[512];
	bool warned = false;

	/* mpirun -np 2: rank 1 sees its own directory from the load on */
	setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
	setenv("OMPI_COMM_WORLD_RANK", "1", 1);
	/* mpirun (Open MPI 4.1) also sets its PMIx server: multihost.c trusts the pair only then */
	setenv("PMIX_NAMESPACE", "1882980353", 1);
	setenv("PMIX_SERVER_URI41", "1882980352.0;tcp4://127.0.0.1:47773", 1);
	snprintf(conf, sizeof(conf),
		 "[job]\nworkers = 1\ncheckpoint_dir = ck/{host}\ncheckpoint_layout = per_host\n%s",
		 topo_tail);
	ck_assert_int_eq(shmrun_job_load(write_conf(conf, path, sizeof(path)), &job, &errs), 0);
	ck_assert_uint_eq(job.hosts, 2);
	ck_assert_uint_eq(job.host, 1);
	snprintf(want, sizeof(want), "%s/ck/1", trial);
	ck_assert_str_eq(job.checkpoint_dir, want);
	shmrun_job_free(&job);
	/* shared: the same directory, but the host index is known (rescale, locks) */
	snprintf(conf, sizeof(conf), "[job]\nworkers = 1\ncheckpoint_dir = ck\n%s", topo_tail);
	ck_assert_int_eq(shmrun_job_load(write_conf(conf, path, sizeof(path)), &job, &errs), 0);
	ck_assert_uint_eq(job.host, 1);
	snprintf(want, sizeof(want), "%s/ck", trial);
	ck_assert_str_eq(job.checkpoint_dir, want);
	shmrun_job_free(&job);
	unsetenv("OMPI_COMM_WORLD_SIZE");
	unsetenv("PMIX_NAMESPACE");
	unsetenv("PMIX_SERVER_URI41");
	unsetenv("OMPI_COMM_WORLD_RANK");

	/* one host: per_host has no effect, and says so */
	snprintf(conf, sizeof(conf),
		 "[job]\nhosts = 1\ncheckpoint_dir = ck/{host}\ncheckpoint_layout = per_host\n%s",
		 topo_tail);
	ck_assert_int_eq(shmrun_job_load(write_conf(conf, path, sizeof(path)), &job, &errs), 0);
	ck_assert_uint_eq(job.host, 0);
	snprintf(want, sizeof(want), "%s/ck/0", trial);
	ck_assert_str_eq(job.checkpoint_dir, want);
	for (uint32_t i = 0; i < job.nwarnings; i++)
		warned |= strstr(job.warnings[i], ":4: checkpoint_layout = per_host has no effect "
						  "with one host") != NULL;
	ck_assert(warned);
	shmrun_job_free(&job);
}
END_TEST

START_TEST(scope_names_the_tasks_of_each_host)
{
	struct hosts h;

	load_hosts(&h, NULL);
	ck_assert(shmrun_ckpt_scope_has(&h.scope[0], "gen", 0));
	ck_assert(shmrun_ckpt_scope_has(&h.scope[0], "out", 0));
	ck_assert(!shmrun_ckpt_scope_has(&h.scope[0], "out", 1));
	ck_assert(!shmrun_ckpt_scope_has(&h.scope[1], "gen", 0));
	ck_assert(!shmrun_ckpt_scope_has(&h.scope[1], "out", 0));
	ck_assert(shmrun_ckpt_scope_has(&h.scope[1], "out", 1));
	/* not this topology's, one host, no scope: checked */
	ck_assert(shmrun_ckpt_scope_has(&h.scope[1], "gone", 0));
	ck_assert(shmrun_ckpt_scope_has(&h.scope[1], "out", 2));
	ck_assert(shmrun_ckpt_scope_has(NULL, "out", 0));
	{
		struct shmrun_ckpt_scope one;
		shmrun_ckpt_scope_of(h.plan, 1, &one);
		ck_assert_ptr_null(one.plan);
		ck_assert(shmrun_ckpt_scope_has(&one, "out", 1));
		shmrun_ckpt_scope_of(h.plan, 3, &one); /* 3 does not divide 2 workers */
		ck_assert_ptr_null(one.plan);
		shmrun_ckpt_scope_of(NULL, 2, &one);
		ck_assert_ptr_null(one.plan);
	}
	free_hosts(&h);
}
END_TEST

/* ---- the MANIFEST between hosts -------------------------------------------------- */

START_TEST(manifest_bytes_are_rank_0s_file_checked)
{
	struct hosts h;
	char path[PATH_MAX + 40], why[PATH_MAX + 300], *bytes, *file;
	size_t len, flen;
	uint64_t fp;

	load_hosts(&h, NULL);
	fp = shmrun_fingerprint(&h.job[0]);
	epoch(&h, 1, false);
	ck_assert_int_eq(
	    shmrun_ckpt_manifest_bytes(h.dir[0], 1, fp, &bytes, &len, why, sizeof(why)), 0);
	file = slurp(in_ckpt(h.dir[0], 1, "MANIFEST", path, sizeof(path)), &flen);
	ck_assert_uint_eq(len, flen);
	ck_assert_int_eq(memcmp(bytes, file, len), 0);
	ck_assert_int_eq(bytes[len], '\0');
	free(bytes);
	free(file);

	/* not complete there: -ENOENT naming the path */
	ck_assert_int_eq(
	    shmrun_ckpt_manifest_bytes(h.dir[0], 2, fp, &bytes, &len, why, sizeof(why)), -ENOENT);
	ck_assert_ptr_null(bytes);
	ck_assert_ptr_nonnull(strstr(why, "ckpt-2/MANIFEST"));
	/* another fingerprint: -ESTALE */
	ck_assert_int_eq(
	    shmrun_ckpt_manifest_bytes(h.dir[0], 1, fp ^ 1, &bytes, &len, why, sizeof(why)),
	    -ESTALE);
	ck_assert_ptr_nonnull(strstr(why, "fingerprint"));
	/* a MANIFEST of epoch 1 in ckpt-2: -EBADMSG naming both epochs */
	epoch(&h, 2, false);
	ck_assert_int_eq(rename(in_ckpt(h.dir[0], 1, "MANIFEST", path, sizeof(path)),
				in_ckpt(h.dir[0], 2, "MANIFEST", why, sizeof(why))),
			 0);
	ck_assert_int_eq(
	    shmrun_ckpt_manifest_bytes(h.dir[0], 2, fp, &bytes, &len, why, sizeof(why)), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(why, "epoch 1, not 2"));
	/* truncated: no end line */
	epoch(&h, 3, false);
	ck_assert_int_eq(truncate(in_ckpt(h.dir[0], 3, "MANIFEST", path, sizeof(path)), 40), 0);
	ck_assert_int_eq(
	    shmrun_ckpt_manifest_bytes(h.dir[0], 3, fp, &bytes, &len, why, sizeof(why)), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(why, "truncated"));
	ck_assert_ptr_null(bytes);
	free_hosts(&h);
}
END_TEST

START_TEST(install_writes_the_same_bytes_atomically)
{
	struct hosts h;
	char path[PATH_MAX + 40], why[PATH_MAX + 300], *bytes, *got;
	size_t len, glen;

	load_hosts(&h, NULL);
	epoch(&h, 1, false);
	ck_assert_int_eq(shmrun_ckpt_manifest_bytes(h.dir[0], 1, shmrun_fingerprint(&h.job[0]),
						    &bytes, &len, why, sizeof(why)),
			 0);
	ck_assert(!exists(in_ckpt(h.dir[1], 1, "MANIFEST", path, sizeof(path))));
	ck_assert_int_eq(shmrun_ckpt_install_manifest(&h.job[1], 1, bytes, len, why, sizeof(why)),
			 0);
	got = slurp(in_ckpt(h.dir[1], 1, "MANIFEST", path, sizeof(path)), &glen);
	ck_assert_uint_eq(glen, len);
	ck_assert_int_eq(memcmp(got, bytes, len), 0);
	free(got);
	ck_assert(!exists(in_ckpt(h.dir[1], 1, "MANIFEST.tmp", path, sizeof(path))));
	/* twice: harmless */
	ck_assert_int_eq(shmrun_ckpt_install_manifest(&h.job[1], 1, bytes, len, why, sizeof(why)),
			 0);
	/* host 1's checkpoint verifies by its own file, not host 0's */
	ck_assert_int_eq(
	    shmrun_ckpt_verify_scoped(h.dir[1], 1, &h.scope[1], NULL, why, sizeof(why)), 0);
	ck_assert_int_eq(shmrun_ckpt_verify(h.dir[1], 1, NULL, why, sizeof(why)), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(why, "gen.0.state named in MANIFEST is missing"));
	free(bytes);
	free_hosts(&h);
}
END_TEST

START_TEST(install_creates_the_directory_of_a_host_without_tasks)
{
	struct hosts h;
	char path[PATH_MAX + 40], why[PATH_MAX + 300], *bytes;
	size_t len;

	struct shmrun_manifest_file files[3];

	load_hosts(&h, NULL);
	/* rank 0's MANIFEST names a file of host 1 that host 1 wrote into another
	 * directory: host 1 never wrote into its own checkpoint_dir */
	write_state(h.dir[0], 1, names[0], &files[0]);
	write_state(h.dir[0], 1, names[1], &files[1]);
	snprintf(path, sizeof(path), "%s/elsewhere", trial);
	write_state(path, 1, names[2], &files[2]);
	ck_assert_int_eq(shmrun_ckpt_write_manifest(&h.job[0], 1, false, files, 3), 0);
	ck_assert_int_eq(shmrun_ckpt_manifest_bytes(h.dir[0], 1, shmrun_fingerprint(&h.job[0]),
						    &bytes, &len, why, sizeof(why)),
			 0);
	ck_assert(!exists(h.dir[1]));
	ck_assert_int_eq(shmrun_ckpt_install_manifest(&h.job[1], 1, bytes, len, why, sizeof(why)),
			 0);
	ck_assert(exists(in_ckpt(h.dir[1], 1, "MANIFEST", path, sizeof(path))));
	free(bytes);
	free_hosts(&h);
}
END_TEST

/* A refused install returns @err, names @text and ckpt-<e>, and writes nothing. */
static void install_refused(struct hosts *h, uint64_t e, const void *bytes, size_t len, int err,
			    const char *text)
{
	char why[PATH_MAX + 300], path[PATH_MAX + 40];

	why[0] = '\0';
	ck_assert_msg(
	    shmrun_ckpt_install_manifest(&h->job[1], e, bytes, len, why, sizeof(why)) == err,
	    "install of epoch %llu, %zu bytes: not %d (%s)", (unsigned long long)e, len, err, why);
	ck_assert_msg(strstr(why, text), "why: %s", why);
	if (e)
		ck_assert(!exists(in_ckpt(h->dir[1], e, "MANIFEST", path, sizeof(path))));
}

START_TEST(install_refuses_bad_bytes_and_writes_nothing)
{
	struct hosts h, other;
	char why[PATH_MAX + 300], *bytes, *bad, *obytes;
	size_t len, olen;

	load_hosts(&h, NULL);
	epoch(&h, 1, false);
	ck_assert_int_eq(shmrun_ckpt_manifest_bytes(h.dir[0], 1, shmrun_fingerprint(&h.job[0]),
						    &bytes, &len, why, sizeof(why)),
			 0);
	/* truncated (a COMMIT cut short) */
	install_refused(&h, 1, bytes, len / 2, -EBADMSG, "no end line");
	install_refused(&h, 1, bytes, len - 5, -EBADMSG, "ckpt-1/MANIFEST");
	install_refused(&h, 1, bytes, len - 5, -EBADMSG, "checksum mismatch");
	/* one flipped byte */
	bad = malloc(len);
	memcpy(bad, bytes, len);
	bad[20] ^= 1;
	install_refused(&h, 1, bad, len, -EBADMSG, "checksum mismatch");
	/* a NUL inside, empty */
	memcpy(bad, bytes, len);
	bad[5] = '\0';
	install_refused(&h, 1, bad, len, -EBADMSG, "NUL");
	install_refused(&h, 1, bytes, 0, -EBADMSG, "empty");
	free(bad);
	/* the COMMIT of epoch 2 carrying epoch 1's MANIFEST */
	install_refused(&h, 2, bytes, len, -EBADMSG, "epoch 1, not 2");
	{
		char path[PATH_MAX + 40];

		/* nothing created for the refused epoch */
		snprintf(path, sizeof(path), "%s/ckpt-2", h.dir[1]);
		ck_assert(!exists(path));
	}
	/* another topology's MANIFEST (width 3): -ESTALE */
	{
		char conf[1024], path[PATH_MAX + 16];
		struct shmrun_job_errors errs = {0};
		struct shmrun_manifest_file files[1] = {{.name = "gen.0.state"}};

		snprintf(conf, sizeof(conf),
			 "[job]\nhosts = 2\nworkers = 1\ncheckpoint_dir = ck/{host}\n"
			 "checkpoint_layout = per_host\nvnodes = 64\n[gen]\nop = sequence\n"
			 "count = 10\n[out]\nop = null_sink\ninput = gen\nwidth = 3\n");
		write_conf(conf, path, sizeof(path));
		ck_assert_int_eq(shmrun_job_load(path, &other.job[0], &errs), 0);
		snprintf(path, sizeof(path), "%s/ck", trial);
		ck_assert_int_eq(mkdir(path, 0700), 0);
		write_state(other.job[0].checkpoint_dir, 1, "gen.0.state", &files[0]);
		ck_assert_int_eq(shmrun_ckpt_write_manifest(&other.job[0], 1, false, files, 1), 0);
		ck_assert_int_eq(shmrun_ckpt_manifest_bytes(other.job[0].checkpoint_dir, 1,
							    shmrun_fingerprint(&other.job[0]),
							    &obytes, &olen, why, sizeof(why)),
				 0);
		install_refused(&h, 1, obytes, olen, -ESTALE, "fingerprint");
		free(obytes);
		shmrun_job_free(&other.job[0]);
	}
	/* no bytes, epoch 0, too large */
	install_refused(&h, 1, NULL, 0, -EINVAL, "no bytes");
	install_refused(&h, 0, bytes, len, -EINVAL, "epoch 0");
	install_refused(&h, 1, bytes, (size_t)SHMRUN_CKPT_MANIFEST_MAX + 1, -EFBIG, "ckpt-1");
	free(bytes);
	free_hosts(&h);
}
END_TEST

START_TEST(install_into_an_unwritable_directory_names_the_path)
{
	struct hosts h;
	char why[PATH_MAX + 300], path[2 * PATH_MAX + 100], target[PATH_MAX + 40], *bytes;
	size_t len;
	FILE *f;

	load_hosts(&h, NULL);
	epoch(&h, 1, false);
	epoch(&h, 2, false);
	ck_assert_int_eq(shmrun_ckpt_manifest_bytes(h.dir[0], 1, shmrun_fingerprint(&h.job[0]),
						    &bytes, &len, why, sizeof(why)),
			 0);
	/* ckpt-1 a symlink: -ELOOP, nothing written through it */
	snprintf(path, sizeof(path), "%s/ckpt-1", h.dir[1]);
	snprintf(target, sizeof(target), "%s/elsewhere", trial);
	ck_assert_int_eq(rename(path, target), 0);
	ck_assert_int_eq(symlink(target, path), 0);
	install_refused(&h, 1, bytes, len, -ELOOP, path);
	snprintf(path, sizeof(path), "%s/MANIFEST", target);
	ck_assert(!exists(path));
	free(bytes);

	/* checkpoint_dir under a regular file: cannot be created, -ENOTDIR naming it */
	ck_assert_int_eq(shmrun_ckpt_manifest_bytes(h.dir[0], 2, shmrun_fingerprint(&h.job[0]),
						    &bytes, &len, why, sizeof(why)),
			 0);
	snprintf(path, sizeof(path), "%s/file", trial);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fclose(f);
	free(h.job[1].checkpoint_dir);
	snprintf(target, sizeof(target), "%s/file/ck", trial);
	h.job[1].checkpoint_dir = strdup(target);
	ck_assert_int_eq(shmrun_ckpt_install_manifest(&h.job[1], 2, bytes, len, why, sizeof(why)),
			 -ENOTDIR);
	ck_assert_ptr_nonnull(strstr(why, target));
	/* a directory without write permission (not for root, which writes anyway) */
	if (geteuid() != 0) {
		free(h.job[1].checkpoint_dir);
		h.job[1].checkpoint_dir = strdup(h.dir[1]);
		ck_assert_int_eq(chmod(h.dir[1], 0500), 0);
		ck_assert_int_eq(
		    shmrun_ckpt_install_manifest(&h.job[1], 2, bytes, len, why, sizeof(why)),
		    -EACCES);
		ck_assert_ptr_nonnull(strstr(why, h.dir[1]));
		chmod(h.dir[1], 0700);
	}
	free(bytes);
	free_hosts(&h);
}
END_TEST

START_TEST(install_is_refused_with_the_shared_layout)
{
	struct hosts h;
	char why[PATH_MAX + 300], *bytes;
	size_t len;

	load_hosts(&h, NULL);
	epoch(&h, 1, false);
	ck_assert_int_eq(shmrun_ckpt_manifest_bytes(h.dir[0], 1, shmrun_fingerprint(&h.job[0]),
						    &bytes, &len, why, sizeof(why)),
			 0);
	h.job[1].checkpoint_per_host = false;
	install_refused(&h, 1, bytes, len, -EINVAL, "shared");
	free(bytes);
	free_hosts(&h);
}
END_TEST

START_TEST(commit_received_installs_per_host_and_nothing_shared)
{
	struct hosts h;
	char path[PATH_MAX + 40], why[PATH_MAX + 300], *bytes;
	size_t len;

	load_hosts(&h, NULL);
	for (uint64_t e = 1; e <= 3; e++) {
		epoch(&h, e, false);
		ck_assert_int_eq(shmrun_ckpt_manifest_bytes(h.dir[0], e,
							    shmrun_fingerprint(&h.job[0]), &bytes,
							    &len, why, sizeof(why)),
				 0);
		ck_assert_int_eq(shmrun_ckpt_commit_received(&h.job[1], &h.scope[1], e, bytes, len,
							     why, sizeof(why)),
				 0);
		free(bytes);
		ck_assert(exists(in_ckpt(h.dir[1], e, "MANIFEST", path, sizeof(path))));
	}
	/* retention ran: two kept */
	snprintf(path, sizeof(path), "%s/ckpt-1", h.dir[1]);
	ck_assert(!exists(path));
	ck_assert(exists(in_ckpt(h.dir[1], 2, "MANIFEST", path, sizeof(path))));
	/* a refused COMMIT is reported, nothing written */
	epoch(&h, 4, false);
	ck_assert_int_eq(shmrun_ckpt_manifest_bytes(h.dir[0], 4, shmrun_fingerprint(&h.job[0]),
						    &bytes, &len, why, sizeof(why)),
			 0);
	ck_assert_int_eq(shmrun_ckpt_commit_received(&h.job[1], &h.scope[1], 4, bytes, len / 2, why,
						     sizeof(why)),
			 -EBADMSG);
	ck_assert(!exists(in_ckpt(h.dir[1], 4, "MANIFEST", path, sizeof(path))));
	ck_assert(exists(in_ckpt(h.dir[1], 2, "MANIFEST", path, sizeof(path))));
	/* shared: nothing to write, not even with the bytes */
	h.job[1].checkpoint_per_host = false;
	ck_assert_int_eq(
	    shmrun_ckpt_commit_received(&h.job[1], &h.scope[1], 4, bytes, len, why, sizeof(why)),
	    0);
	ck_assert_int_eq(
	    shmrun_ckpt_commit_received(&h.job[1], &h.scope[1], 4, NULL, 0, why, sizeof(why)), 0);
	ck_assert(!exists(in_ckpt(h.dir[1], 4, "MANIFEST", path, sizeof(path))));
	free(bytes);
	free_hosts(&h);
}
END_TEST

START_TEST(rescale_of_a_per_host_directory_is_refused)
{
	struct hosts h;
	uint64_t e = 99;

	load_hosts(&h, NULL);
	epoch(&h, 1, true);
	for (uint32_t k = 0; k < 2; k++) {
		ck_assert_int_eq(shmrun_rescale(&h.job[k], h.job[k].checkpoint_dir, NULL, 0, NULL,
						&e),
				 -EPERM);
		ck_assert_int_eq(shmrun_rescale_dry_run(&h.job[k], NULL, 0), -EPERM);
	}
	ck_assert_uint_eq(e, 99);
	{
		uint64_t *epochs;

		ck_assert_int_eq(shmrun_ckpt_list(h.dir[0], &epochs), 1); /* nothing written */
		free(epochs);
	}
	free_hosts(&h);
}
END_TEST

/* ---- retention ----------------------------------------------------------------------- */

START_TEST(retention_counts_only_this_hosts_files_and_keeps_two)
{
	struct hosts h;
	char path[PATH_MAX + 40];
	uint64_t *epochs;

	load_hosts(&h, "checkpoint_retain = 1\n");
	for (uint64_t e = 1; e <= 4; e++)
		epoch(&h, e, true);
	/* host 1's directory lacks host 0's files: one-host rules see no
	 * restorable checkpoint there and would never retire anything */
	ck_assert(!shmrun_ckpt_looks_good(h.dir[1], 4));
	ck_assert(shmrun_ckpt_looks_good_scoped(h.dir[1], 4, &h.scope[1]));
	ck_assert(!shmrun_ckpt_looks_good_scoped(h.dir[1], 4, &h.scope[0]));
	/* checkpoint_retain = 1, but with several hosts two are kept */
	ck_assert_int_eq(shmrun_ckpt_retain(&h.job[1], &h.scope[1], 4), 2);
	ck_assert_int_eq(shmrun_ckpt_list(h.dir[1], &epochs), 2);
	ck_assert_uint_eq(epochs[0], 4);
	ck_assert_uint_eq(epochs[1], 3);
	free(epochs);
	/* host 0: a cut file of its own does not count, so 3 and 2 are kept
	 * (and 4, newer than the oldest kept); only 1 goes */
	ck_assert_int_eq(truncate(in_ckpt(h.dir[0], 4, "out.0.state", path, sizeof(path)), 10), 0);
	ck_assert(!shmrun_ckpt_looks_good_scoped(h.dir[0], 4, &h.scope[0]));
	ck_assert_int_eq(shmrun_ckpt_retain(&h.job[0], &h.scope[0], 4), 1);
	ck_assert(exists(in_ckpt(h.dir[0], 4, "MANIFEST", path, sizeof(path))));
	ck_assert(exists(in_ckpt(h.dir[0], 2, "MANIFEST", path, sizeof(path))));
	snprintf(path, sizeof(path), "%s/ckpt-1", h.dir[0]);
	ck_assert(!exists(path));
	/* the one-host rule (no scope) in a per_host directory: nothing looks
	 * restorable (host 1's file is missing everywhere), nothing is retired */
	ck_assert_int_eq(shmrun_ckpt_retain(&h.job[0], NULL, 4), 0);
	ck_assert(exists(in_ckpt(h.dir[0], 2, "MANIFEST", path, sizeof(path))));
	free_hosts(&h);
}
END_TEST

/* ---- the epoch to restore ------------------------------------------------------------- */

START_TEST(each_host_chooses_by_its_own_files)
{
	struct hosts h;
	struct shmrun_control *ctl;
	char path[PATH_MAX + 40];
	bool reset_done = false;
	uint64_t e = 0;

	load_hosts(&h, NULL);
	epoch(&h, 1, false); /* host 1 never got the COMMIT of 1: incomplete there */
	epoch(&h, 2, true);
	epoch(&h, 3, true);
	epoch(&h, 4, false); /* ... nor that of 4 */
	ck_assert_int_eq(shmrun_ckpt_host_epoch(h.dir[0], &h.scope[0]), 4);
	ck_assert_int_eq(shmrun_ckpt_host_epoch(h.dir[1], &h.scope[1]), 3);
	/* one-host rules find nothing that verifies in a per_host directory:
	 * refused as a checkpoint of 2 hosts partly here (-ESTALE: exit 2),
	 * not as damage */
	ck_assert_int_eq(shmrun_ckpt_host_epoch(h.dir[1], NULL), -ESTALE);
	/* host 1's own file of 3 damaged: it would restore 2 */
	flip_byte(in_ckpt(h.dir[1], 3, "out.1.state", path, sizeof(path)), 20);
	ck_assert_int_eq(shmrun_ckpt_host_epoch(h.dir[1], &h.scope[1]), 2);
	/* host 0's files are not host 1's concern */
	flip_byte(in_ckpt(h.dir[1], 3, "out.1.state", path, sizeof(path)), 20);
	flip_byte(in_ckpt(h.dir[0], 3, "gen.0.state", path, sizeof(path)), 20);
	ck_assert_int_eq(shmrun_ckpt_host_epoch(h.dir[1], &h.scope[1]), 3);

	/* `shmrun check` judges a host's directory as its run would */
	ck_assert_int_eq(shmrun_check_restore(&h.job[1], false, NULL, 0), 0);
	ck_assert_int_eq(shmrun_check_restore(&h.job[0], false, NULL, 0), 0);
	/* the launcher's choice: removes incomplete epochs below it only */
	ctl = shmrun_control_create(2, h.plan->ntasks);
	ck_assert_ptr_nonnull(ctl);
	ck_assert_int_eq(shmrun_ckpt_choose_scoped(&h.job[1], &h.scope[1], ctl, &reset_done, &e),
			 0);
	ck_assert_uint_eq(e, 3);
	ck_assert_uint_eq(ctl->restored_epoch, 3);
	ck_assert_uint_eq(ctl->epoch_floor, 4);
	snprintf(path, sizeof(path), "%s/ckpt-1", h.dir[1]);
	ck_assert(!exists(path));
	ck_assert(exists(in_ckpt(h.dir[1], 4, "out.1.state", path, sizeof(path))));
	shmrun_control_destroy(ctl);
	free_hosts(&h);
}
END_TEST

/* STREAM_RESET_STATE=1 with one shared directory: host 0 alone moves it aside. */
START_TEST(reset_of_a_shared_directory_is_host_0s)
{
	struct hosts h;
	struct shmrun_control *ctl;
	char path[PATH_MAX + 40];
	bool reset_done = false;
	uint64_t e = 0, *epochs;

	load_hosts(&h, NULL);
	epoch(&h, 1, true);
	epoch(&h, 2, true);
	for (uint32_t k = 0; k < 2; k++) { /* both hosts' views of one shared directory */
		h.job[k].checkpoint_per_host = false;
		free(h.job[k].checkpoint_dir);
		h.job[k].checkpoint_dir = strdup(h.dir[0]);
	}
	setenv("STREAM_RESET_STATE", "1", 1);
	ctl = shmrun_control_create(2, h.plan->ntasks);
	ck_assert_ptr_nonnull(ctl);
	ck_assert_int_eq(shmrun_ckpt_choose_scoped(&h.job[1], &h.scope[1], ctl, &reset_done, &e), 0);
	ck_assert(reset_done);
	ck_assert_uint_eq(ctl->restored_epoch, 0);
	ck_assert(exists(in_ckpt(h.dir[0], 2, "MANIFEST", path, sizeof(path)))); /* untouched */
	reset_done = false;
	ck_assert_int_eq(shmrun_ckpt_choose_scoped(&h.job[0], &h.scope[0], ctl, &reset_done, &e), 0);
	ck_assert(reset_done);
	ck_assert_uint_eq(ctl->restored_epoch, 0);
	ck_assert_int_eq(shmrun_ckpt_list(h.dir[0], &epochs), 0); /* moved aside */
	free(epochs);
	unsetenv("STREAM_RESET_STATE");
	shmrun_control_destroy(ctl);
	free_hosts(&h);
}
END_TEST

START_TEST(agreement_is_rank_0s_epoch)
{
	char why[400];
	uint64_t same[] = {5, 5}, behind[] = {5, 4, 5}, ahead[] = {4, 5}, fresh[] = {0, 0},
		 lost0[] = {0, 0, 3}, new1[] = {3, 0};

	ck_assert_int_eq(shmrun_ckpt_agree(same, 2, why, sizeof(why)), 5);
	ck_assert_int_eq(shmrun_ckpt_agree(behind, 3, why, sizeof(why)), 5);
	ck_assert_int_eq(shmrun_ckpt_agree(ahead, 2, why, sizeof(why)), 4);
	ck_assert_int_eq(shmrun_ckpt_agree(fresh, 2, why, sizeof(why)), 0);
	ck_assert_int_eq(shmrun_ckpt_agree(new1, 2, why, sizeof(why)), 3);
	ck_assert_int_eq(shmrun_ckpt_agree(lost0, 3, why, sizeof(why)), -ENOENT);
	ck_assert_ptr_nonnull(strstr(why, "host 2 has epoch 3"));
	ck_assert_int_eq(shmrun_ckpt_agree(NULL, 2, why, sizeof(why)), -EINVAL);
	ck_assert_int_eq(shmrun_ckpt_agree(same, 0, why, sizeof(why)), -EINVAL);
}
END_TEST

START_TEST(restore_instead_completes_or_steps_back)
{
	struct hosts h;
	struct shmrun_control *ctl;
	char path[PATH_MAX + 40], why[PATH_MAX + 600], *bytes;
	bool reset_done = false;
	uint64_t e = 0;
	size_t len;

	load_hosts(&h, NULL);
	epoch(&h, 1, true);
	epoch(&h, 2, true);
	epoch(&h, 3, false); /* rank 0 committed 3, host 1 crashed before the COMMIT */
	ctl = shmrun_control_create(2, h.plan->ntasks);
	ck_assert_ptr_nonnull(ctl);
	ck_assert_int_eq(shmrun_ckpt_choose_scoped(&h.job[1], &h.scope[1], ctl, &reset_done, &e),
			 0);
	ck_assert_uint_eq(e, 2);
	ck_assert(exists(in_ckpt(h.dir[1], 3, "out.1.state", path, sizeof(path)))); /* kept */

	/* without rank 0's MANIFEST, 3 cannot be restored here */
	ck_assert_int_eq(
	    shmrun_ckpt_restore_instead(&h.job[1], &h.scope[1], ctl, 3, NULL, 0, why, sizeof(why)),
	    -ENOENT);
	ck_assert_ptr_nonnull(strstr(why, "ckpt-3"));
	ck_assert_uint_eq(ctl->restored_epoch, 2);

	/* with it, but host 1's own file of 3 damaged: refused, MANIFEST removed again */
	ck_assert_int_eq(shmrun_ckpt_manifest_bytes(h.dir[0], 3, shmrun_fingerprint(&h.job[0]),
						    &bytes, &len, why, sizeof(why)),
			 0);
	flip_byte(in_ckpt(h.dir[1], 3, "out.1.state", path, sizeof(path)), 20);
	ck_assert_int_eq(shmrun_ckpt_restore_instead(&h.job[1], &h.scope[1], ctl, 3, bytes, len,
						     why, sizeof(why)),
			 -EBADMSG);
	ck_assert_ptr_nonnull(strstr(why, "out.1.state"));
	ck_assert(!exists(in_ckpt(h.dir[1], 3, "MANIFEST", path, sizeof(path))));
	ck_assert_uint_eq(ctl->restored_epoch, 2);

	/* intact: installed, restored */
	flip_byte(in_ckpt(h.dir[1], 3, "out.1.state", path, sizeof(path)), 20);
	ck_assert_int_eq(shmrun_ckpt_restore_instead(&h.job[1], &h.scope[1], ctl, 3, bytes, len,
						     why, sizeof(why)),
			 0);
	ck_assert_uint_eq(ctl->restored_epoch, 3);
	ck_assert(exists(in_ckpt(h.dir[1], 3, "MANIFEST", path, sizeof(path))));
	ck_assert_int_eq(shmrun_ckpt_host_epoch(h.dir[1], &h.scope[1]), 3);

	/* a host ahead steps back to a smaller epoch it still has */
	ck_assert_int_eq(
	    shmrun_ckpt_restore_instead(&h.job[0], &h.scope[0], ctl, 2, NULL, 0, why, sizeof(why)),
	    0);
	ck_assert_uint_eq(ctl->restored_epoch, 2);
	/* a fresh start */
	ck_assert_int_eq(
	    shmrun_ckpt_restore_instead(&h.job[0], &h.scope[0], ctl, 0, NULL, 0, why, sizeof(why)),
	    0);
	ck_assert_uint_eq(ctl->restored_epoch, 0);
	free(bytes);
	shmrun_control_destroy(ctl);
	free_hosts(&h);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ckpt_hosts");
	TCase *lay = tcase_create("layout");
	TCase *man = tcase_create("manifest_between_hosts");
	TCase *ret = tcase_create("retention");
	TCase *rec = tcase_create("recovery");
	TCase *all[] = {lay, man, ret, rec};
	SRunner *sr;
	int failed;

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		tcase_set_timeout(all[i], 60);
		suite_add_tcase(s, all[i]);
	}
	tcase_add_test(lay, host_is_expanded_everywhere_and_refused_when_too_long);
	tcase_add_test(lay, layout_keys_load_and_host_sets_the_directory);
	tcase_add_test(lay, layout_errors_name_the_line);
	tcase_add_test(lay, layout_without_checkpoint_dir_warns);
	tcase_add_test(lay, host_index_comes_from_the_mpi_environment);
	tcase_add_test(lay, scope_names_the_tasks_of_each_host);
	tcase_add_test(man, manifest_bytes_are_rank_0s_file_checked);
	tcase_add_test(man, install_writes_the_same_bytes_atomically);
	tcase_add_test(man, install_creates_the_directory_of_a_host_without_tasks);
	tcase_add_test(man, install_refuses_bad_bytes_and_writes_nothing);
	tcase_add_test(man, install_into_an_unwritable_directory_names_the_path);
	tcase_add_test(man, install_is_refused_with_the_shared_layout);
	tcase_add_test(man, commit_received_installs_per_host_and_nothing_shared);
	tcase_add_test(man, rescale_of_a_per_host_directory_is_refused);
	tcase_add_test(ret, retention_counts_only_this_hosts_files_and_keeps_two);
	tcase_add_test(rec, each_host_chooses_by_its_own_files);
	tcase_add_test(rec, reset_of_a_shared_directory_is_host_0s);
	tcase_add_test(rec, agreement_is_rank_0s_epoch);
	tcase_add_test(rec, restore_instead_completes_or_steps_back);
	sr = srunner_create(s);
	tmpdir_create("shmrun-check-ckpt-hosts");
	srunner_run_all(sr, CK_NORMAL);
	tmpdir_remove();
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
