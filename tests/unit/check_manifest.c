/*
 * tests/unit/check_manifest.c: checkpoint directories through
 * runtime/ckpt/manifest.h — the MANIFEST written and read back, its
 * checksum, verification of the files it names, restore selection,
 * listing, removal of incomplete epochs and the topology check.
 *
 * Round trip: shmrun_ckpt_write_manifest() then shmrun_ckpt_read_manifest()
 * gives back every field. Damaged input: a flipped byte or a cut MANIFEST is
 * -EBADMSG naming the checksum or the missing end line; none is -ENOENT; a
 * MANIFEST in the wrong directory is -EBADMSG. Selection skips a damaged
 * newer checkpoint and an incomplete one, and reports -EBADMSG when nothing
 * verifies. Listing is newest first and ignores names that are not
 * ckpt-<epoch>. Removal of incomplete epochs removes only directories
 * without MANIFEST, and leaves one holding a file the runtime did not make.
 * Every test works in its own directory under the suite's temporary one.
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
#include "ckpt/manifest.h"
#include "common/tmpdir.h"
#include "shmrun/job.h"

static char trial[PATH_MAX];
static char ckdir[PATH_MAX + 8];
static int trial_n;

/* A fresh directory for one test, and the job gen -> out with checkpoint_dir = ckpt. */
static void load_job(struct shmrun_job *job, uint32_t out_width)
{
	char path[PATH_MAX + 32];
	struct shmrun_job_errors errs = {0};
	FILE *f;

	snprintf(trial, sizeof(trial), "%s/t%d-%d", tmpdir, (int)getpid(), trial_n++);
	ck_assert_int_eq(mkdir(trial, 0700), 0);
	snprintf(path, sizeof(path), "%s/wordy.conf", trial);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f,
		"[job]\nworkers = 1\ncheckpoint_dir = ckpt\nvnodes = 64\n"
		"[gen]\nop = sequence\ncount = 10\n"
		"[out]\nop = null_sink\ninput = gen\nwidth = %u\n",
		out_width);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_msg(shmrun_job_load(path, job, &errs) == 0, "load: %s",
		      errs.n ? errs.msgs[0] : "-");
	shmrun_job_errors_free(&errs);
	snprintf(ckdir, sizeof(ckdir), "%s/ckpt", trial);
	ck_assert_str_eq(job->checkpoint_dir, ckdir);
}

static const char *const names[] = {"gen.0.state", "out.0.state"};

/*
 * Checkpoint @e of @job: two real state files (block format, @e in their
 * bytes) and a MANIFEST naming them. @finished as the end-of-input epoch.
 */
static void make_ckpt(const struct shmrun_job *job, uint64_t e, bool finished)
{
	struct shmrun_manifest_file files[2];
	struct shmrun_ckpt_writer wr;
	char path[PATH_MAX + 40], why[200];
	int dirfd;

	shmrun_ckpt_mkdir(job->checkpoint_dir);
	shmrun_ckpt_path(job->checkpoint_dir, e, path, sizeof(path));
	ck_assert_int_eq(shmrun_ckpt_mkdir(path), 0);
	dirfd = open(path, O_RDONLY | O_DIRECTORY);
	ck_assert_int_ge(dirfd, 0);
	ck_assert_int_eq(shmrun_ckpt_writer_init(&wr, 4, why, sizeof(why)), 0);
	memset(files, 0, sizeof(files));
	for (int i = 0; i < 2; i++) {
		struct shmrun_ckpt_buf buf;
		char text[64];

		snprintf(text, sizeof(text), "state of %s in epoch %llu", names[i],
			 (unsigned long long)e);
		shmrun_ckpt_buf_init(&buf);
		ck_assert_int_eq(shmrun_ckpt_buf_append(&buf, text, strlen(text)), 0);
		ck_assert_int_eq(shmrun_ckpt_buf_seal(&buf), 0);
		snprintf(files[i].name, sizeof(files[i].name), "%s", names[i]);
		ck_assert_int_eq(shmrun_ckpt_write_file(&wr, dirfd, names[i], &buf, &files[i].size,
							&files[i].xxh64),
				 0);
		files[i].kv_bytes = 10 * (uint64_t)i;
		files[i].pw_bytes = 3 + (uint64_t)i;
		shmrun_ckpt_buf_free(&buf);
	}
	shmrun_ckpt_writer_close(&wr);
	close(dirfd);
	ck_assert_int_eq(shmrun_ckpt_write_manifest(job, e, finished, files, 2), 0);
}

/* @job's checkpoint_dir/ckpt-<e>/@name into @buf. */
static const char *in_ckpt(uint64_t e, const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s/ckpt-%llu/%s", ckdir, (unsigned long long)e, name);
	return buf;
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

static bool exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

/* ---- round trip ----------------------------------------------------------------- */

START_TEST(write_then_read_gives_every_field)
{
	struct shmrun_job job;
	struct shmrun_manifest m;
	char why[300];

	load_job(&job, 1);
	make_ckpt(&job, 3, true);
	ck_assert_int_eq(shmrun_ckpt_read_manifest(ckdir, 3, &m, why, sizeof(why)), 0);
	ck_assert_uint_eq(m.version, 1);
	ck_assert_uint_eq(m.epoch, 3);
	ck_assert_int_gt(m.time_ns, 0);
	ck_assert_uint_eq(m.fingerprint, shmrun_fingerprint(&job));
	ck_assert_str_eq(m.job, job.name);
	ck_assert_uint_eq(m.vnodes, 64);
	ck_assert_uint_eq(m.workers, 1);
	ck_assert_uint_eq(m.nstages, 2);
	ck_assert_str_eq(m.stages[0].name, "gen");
	ck_assert_str_eq(m.stages[0].op, "sequence");
	ck_assert_uint_eq(m.stages[0].width, 1);
	ck_assert_str_eq(m.stages[1].name, "out");
	ck_assert_uint_eq(m.nfiles, 2);
	for (uint32_t i = 0; i < 2; i++) {
		ck_assert_str_eq(m.files[i].name, names[i]);
		ck_assert_uint_eq(m.files[i].instance, 0);
		ck_assert_uint_gt(m.files[i].size, 0);
		ck_assert_uint_eq(m.files[i].kv_bytes, 10 * i);
		ck_assert_uint_eq(m.files[i].pw_bytes, 3 + i);
	}
	ck_assert_str_eq(m.files[0].stage, "gen");
	ck_assert_str_eq(m.files[1].stage, "out");
	ck_assert_ptr_nonnull(m.topology);
	ck_assert(m.finished);
	shmrun_manifest_free(&m);
	ck_assert_ptr_null(m.files);
	/* and the files it names verify */
	ck_assert_int_eq(shmrun_ckpt_verify(ckdir, 3, NULL, why, sizeof(why)), 0);
	ck_assert(shmrun_ckpt_looks_good(ckdir, 3));
	shmrun_job_free(&job);
}
END_TEST

START_TEST(not_finished_and_no_files)
{
	struct shmrun_job job;
	struct shmrun_manifest m;
	char why[300];

	load_job(&job, 1);
	make_ckpt(&job, 4, false);
	ck_assert_int_eq(shmrun_ckpt_read_manifest(ckdir, 4, &m, why, sizeof(why)), 0);
	ck_assert(!m.finished);
	shmrun_manifest_free(&m);
	/* a MANIFEST with no file at all (zero tasks) reads back as such */
	{
		char path[PATH_MAX + 40];

		shmrun_ckpt_path(ckdir, 5, path, sizeof(path));
		ck_assert_int_eq(shmrun_ckpt_mkdir(path), 0);
		ck_assert_int_eq(shmrun_ckpt_write_manifest(&job, 5, false, NULL, 0), 0);
		ck_assert_int_eq(shmrun_ckpt_verify(ckdir, 5, &m, why, sizeof(why)), 0);
		ck_assert_uint_eq(m.nfiles, 0);
		shmrun_manifest_free(&m);
	}
	shmrun_job_free(&job);
}
END_TEST

START_TEST(topology_check)
{
	struct shmrun_job job, wider;
	struct shmrun_manifest m;
	char why[600];

	load_job(&job, 1);
	make_ckpt(&job, 1, false);
	ck_assert_int_eq(shmrun_ckpt_read_manifest(ckdir, 1, &m, why, sizeof(why)), 0);
	ck_assert_int_eq(shmrun_ckpt_check_topology(&m, &job, why, sizeof(why)), 0);
	load_job(&wider, 2);
	why[0] = '\0';
	ck_assert_int_eq(shmrun_ckpt_check_topology(&m, &wider, why, sizeof(why)), -ESTALE);
	ck_assert_msg(strstr(why, "out") != NULL, "the difference names the stage: %s", why);
	shmrun_manifest_free(&m);
	shmrun_job_free(&job);
	shmrun_job_free(&wider);
}
END_TEST

/* ---- damaged MANIFEST ------------------------------------------------------------ */

START_TEST(damaged_manifest_is_refused)
{
	struct shmrun_job job;
	struct shmrun_manifest m;
	char why[300], path[PATH_MAX + 64];
	struct stat st;

	load_job(&job, 1);
	make_ckpt(&job, 2, false);
	in_ckpt(2, "MANIFEST", path, sizeof(path));
	flip_byte(path, 20);
	ck_assert_int_eq(shmrun_ckpt_read_manifest(ckdir, 2, &m, why, sizeof(why)), -EBADMSG);
	ck_assert_msg(strstr(why, "checksum") != NULL, "%s", why);
	ck_assert_int_eq(shmrun_ckpt_verify(ckdir, 2, NULL, why, sizeof(why)), -EBADMSG);
	flip_byte(path, 20); /* repaired */
	ck_assert_int_eq(shmrun_ckpt_read_manifest(ckdir, 2, &m, why, sizeof(why)), 0);
	shmrun_manifest_free(&m);
	/* cut before its end line */
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(truncate(path, st.st_size - 20), 0);
	ck_assert_int_eq(shmrun_ckpt_read_manifest(ckdir, 2, &m, why, sizeof(why)), -EBADMSG);
	ck_assert_msg(strstr(why, "end line") != NULL, "%s", why);
	/* an empty one */
	ck_assert_int_eq(truncate(path, 0), 0);
	ck_assert_int_eq(shmrun_ckpt_read_manifest(ckdir, 2, &m, why, sizeof(why)), -EBADMSG);
	/* none: an incomplete epoch */
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(shmrun_ckpt_read_manifest(ckdir, 2, &m, why, sizeof(why)), -ENOENT);
	ck_assert_int_eq(shmrun_ckpt_verify(ckdir, 2, NULL, why, sizeof(why)), -ENOENT);
	ck_assert(!shmrun_ckpt_looks_good(ckdir, 2));
	shmrun_job_free(&job);
}
END_TEST

START_TEST(manifest_in_the_wrong_directory)
{
	struct shmrun_job job;
	struct shmrun_manifest m;
	char why[300], from[PATH_MAX + 40], to[PATH_MAX + 40];

	load_job(&job, 1);
	make_ckpt(&job, 6, false);
	shmrun_ckpt_path(ckdir, 6, from, sizeof(from));
	shmrun_ckpt_path(ckdir, 8, to, sizeof(to));
	ck_assert_int_eq(rename(from, to), 0);
	ck_assert_int_eq(shmrun_ckpt_read_manifest(ckdir, 8, &m, why, sizeof(why)), -EBADMSG);
	ck_assert_msg(strstr(why, "epoch 6") != NULL, "%s", why);
	shmrun_job_free(&job);
}
END_TEST

START_TEST(damaged_or_missing_state_file_fails_verify)
{
	struct shmrun_job job;
	char why[300], path[PATH_MAX + 64];

	load_job(&job, 1);
	make_ckpt(&job, 1, false);
	make_ckpt(&job, 2, false);
	flip_byte(in_ckpt(1, "out.0.state", path, sizeof(path)), 20);
	ck_assert_int_eq(shmrun_ckpt_verify(ckdir, 1, NULL, why, sizeof(why)), -EBADMSG);
	ck_assert_msg(strstr(why, "out.0.state") != NULL, "%s", why);
	ck_assert(shmrun_ckpt_looks_good(ckdir, 1)); /* sizes only: it looks good */
	ck_assert_int_eq(unlink(in_ckpt(2, "gen.0.state", path, sizeof(path))), 0);
	ck_assert_int_eq(shmrun_ckpt_verify(ckdir, 2, NULL, why, sizeof(why)), -EBADMSG);
	ck_assert_msg(strstr(why, "missing") != NULL, "%s", why);
	ck_assert(!shmrun_ckpt_looks_good(ckdir, 2));
	shmrun_job_free(&job);
}
END_TEST

/* ---- selection and listing ------------------------------------------------------- */

START_TEST(select_skips_damaged_and_incomplete_newer_ones)
{
	struct shmrun_job job;
	struct shmrun_manifest m;
	char path[PATH_MAX + 64];

	load_job(&job, 1);
	/* nothing there yet: no directory, then an empty one */
	ck_assert_int_eq(shmrun_ckpt_select(ckdir, &m), 0);
	ck_assert_int_eq(shmrun_ckpt_mkdir(ckdir), 0);
	ck_assert_int_eq(shmrun_ckpt_select(ckdir, &m), 0);
	make_ckpt(&job, 2, false);
	make_ckpt(&job, 5, false);
	make_ckpt(&job, 7, false);
	flip_byte(in_ckpt(5, "gen.0.state", path, sizeof(path)), 20);		 /* damaged */
	ck_assert_int_eq(unlink(in_ckpt(7, "MANIFEST", path, sizeof(path))), 0); /* incomplete */
	ck_assert_int_eq(shmrun_ckpt_select(ckdir, &m), 2);
	ck_assert_uint_eq(m.epoch, 2);
	ck_assert_uint_eq(m.nfiles, 2);
	shmrun_manifest_free(&m);
	/* the good one damaged too: nothing verifies */
	flip_byte(in_ckpt(2, "MANIFEST", path, sizeof(path)), 3);
	ck_assert_int_eq(shmrun_ckpt_select(ckdir, &m), -EBADMSG);
	shmrun_job_free(&job);
}
END_TEST

START_TEST(select_with_only_incomplete_epochs_starts_empty)
{
	struct shmrun_job job;
	struct shmrun_manifest m;
	char path[PATH_MAX + 64];

	load_job(&job, 1);
	make_ckpt(&job, 3, false);
	ck_assert_int_eq(unlink(in_ckpt(3, "MANIFEST", path, sizeof(path))), 0);
	ck_assert_int_eq(shmrun_ckpt_select(ckdir, &m), 0);
	shmrun_job_free(&job);
}
END_TEST

START_TEST(list_is_newest_first_and_only_epochs)
{
	static const char *const dirs[] = {"ckpt-1", "ckpt-10", "ckpt-2",  "ckpt-0",
					   "ckpt-",  "ckpt-x",	"ckpt-3a", "other"};
	uint64_t *epochs;
	char path[PATH_MAX + 64];
	int n;

	snprintf(trial, sizeof(trial), "%s/list-%d", tmpdir, (int)getpid());
	ck_assert_int_eq(shmrun_ckpt_list(trial, &epochs), -ENOENT);
	ck_assert_ptr_null(epochs);
	ck_assert_int_eq(mkdir(trial, 0700), 0);
	ck_assert_int_eq(shmrun_ckpt_list(trial, &epochs), 0);
	free(epochs);
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", trial, dirs[i]);
		ck_assert_int_eq(mkdir(path, 0700), 0);
	}
	n = shmrun_ckpt_list(trial, &epochs);
	ck_assert_int_eq(n, 3);
	ck_assert_uint_eq(epochs[0], 10);
	ck_assert_uint_eq(epochs[1], 2);
	ck_assert_uint_eq(epochs[2], 1);
	free(epochs);
}
END_TEST

/* ---- removal of incomplete epochs ------------------------------------------------ */

START_TEST(remove_incomplete_removes_only_directories_without_manifest)
{
	struct shmrun_job job;
	char path[PATH_MAX + 64];
	FILE *f;

	load_job(&job, 1);
	ck_assert_int_eq(shmrun_ckpt_remove_incomplete(ckdir), 0); /* no directory yet */
	make_ckpt(&job, 1, false);				   /* committed */
	make_ckpt(&job, 2, false); /* incomplete: MANIFEST removed */
	make_ckpt(&job, 3, false); /* committed, MANIFEST damaged: not touched */
	make_ckpt(&job, 4, false); /* incomplete, but holds a file not ours: left alone */
	ck_assert_int_eq(unlink(in_ckpt(2, "MANIFEST", path, sizeof(path))), 0);
	flip_byte(in_ckpt(3, "MANIFEST", path, sizeof(path)), 3);
	ck_assert_int_eq(unlink(in_ckpt(4, "MANIFEST", path, sizeof(path))), 0);
	f = fopen(in_ckpt(4, "notes.txt", path, sizeof(path)), "w");
	ck_assert_ptr_nonnull(f);
	fclose(f);
	shmrun_ckpt_path(ckdir, 5, path, sizeof(path)); /* incomplete and empty */
	ck_assert_int_eq(shmrun_ckpt_mkdir(path), 0);

	ck_assert_int_eq(shmrun_ckpt_remove_incomplete(ckdir), 2);
	ck_assert(exists(in_ckpt(1, "MANIFEST", path, sizeof(path))));
	ck_assert(exists(in_ckpt(1, "gen.0.state", path, sizeof(path))));
	shmrun_ckpt_path(ckdir, 2, path, sizeof(path));
	ck_assert(!exists(path));
	ck_assert(exists(in_ckpt(3, "MANIFEST", path, sizeof(path))));
	ck_assert(exists(in_ckpt(3, "out.0.state", path, sizeof(path))));
	ck_assert(exists(in_ckpt(4, "notes.txt", path, sizeof(path))));
	ck_assert(exists(in_ckpt(4, "gen.0.state", path, sizeof(path))));
	shmrun_ckpt_path(ckdir, 5, path, sizeof(path));
	ck_assert(!exists(path));
	/* a second pass finds nothing more to remove */
	ck_assert_int_eq(shmrun_ckpt_remove_incomplete(ckdir), 0);
	shmrun_job_free(&job);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("manifest");
	TCase *rt = tcase_create("round_trip");
	TCase *bad = tcase_create("damaged");
	TCase *sel = tcase_create("select_and_list");
	TCase *rm = tcase_create("remove_incomplete");
	TCase *all[] = {rt, bad, sel, rm};
	SRunner *sr;
	int failed;

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		tcase_set_timeout(all[i], 60);
		suite_add_tcase(s, all[i]);
	}
	tcase_add_test(rt, write_then_read_gives_every_field);
	tcase_add_test(rt, not_finished_and_no_files);
	tcase_add_test(rt, topology_check);
	tcase_add_test(bad, damaged_manifest_is_refused);
	tcase_add_test(bad, manifest_in_the_wrong_directory);
	tcase_add_test(bad, damaged_or_missing_state_file_fails_verify);
	tcase_add_test(sel, select_skips_damaged_and_incomplete_newer_ones);
	tcase_add_test(sel, select_with_only_incomplete_epochs_starts_empty);
	tcase_add_test(sel, list_is_newest_first_and_only_epochs);
	tcase_add_test(rm, remove_incomplete_removes_only_directories_without_manifest);
	sr = srunner_create(s);
	tmpdir_create("shmrun-check-manifest");
	srunner_run_all(sr, CK_NORMAL);
	tmpdir_remove();
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
