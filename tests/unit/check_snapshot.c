/*
 * tests/unit/check_snapshot.c: how a worker judges its snapshot writers when
 * it reaps them (runtime/ckpt/snapshot.h, shmrun_snapshot_reaped()).
 *
 * A writer reports in its task's slot (shmrun_slot_report()); one that exits
 * without a report died, and fails its epoch at once (-ECHILD). But a report
 * can also be dropped as stale — its epoch was aborted, or the slot already
 * holds a newer epoch — and such a writer did not die: it must not be logged
 * as dead nor fail anything. (Regression: after the stale-report fix, every
 * writer of an epoch aborted by a disk error was logged "died (exit status 1)".)
 * Also: restoring the per-worker entries of a task that restored nothing.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "ckpt/snapshot.h"
#include "control.h"
#include "task.h"
#include "worker.h"

#define EXITED(code) ((code) << 8)  /* a wait status: exited with @code */
#define SIGNALED(sig) (sig)         /* a wait status: killed by @sig */

struct fixture {
	struct shmrun_worker w;
	struct shmrun_control *ctl;
};

/* A worker with one snapshot writer @pid of task 0 for epoch @e in flight. */
static void fixture_init(struct fixture *f, int pid, uint64_t e)
{
	memset(f, 0, sizeof(*f));
	f->ctl = shmrun_control_create(1, 2);
	ck_assert_ptr_nonnull(f->ctl);
	f->w.ctl = f->ctl;
	f->w.slots = shmrun_control_slots(f->ctl);
	f->w.children = calloc(4, sizeof(*f->w.children));
	ck_assert_ptr_nonnull(f->w.children);
	f->w.children_cap = 4;
	f->w.children[0] = (struct snap_child){.pid = pid, .task = 0, .epoch = e};
	f->w.nchildren = 1;
	atomic_store(&f->ctl->writers, 1);
}

static void fixture_free(struct fixture *f)
{
	free(f->w.children);
	shmrun_control_destroy(f->ctl);
}

static void assert_forgotten(struct fixture *f)
{
	ck_assert_uint_eq(f->w.nchildren, 0);
	ck_assert_uint_eq(atomic_load(&f->ctl->writers), 0);
}

START_TEST(test_exit_0_reported)
{
	struct fixture f;

	fixture_init(&f, 100, 3);
	atomic_store(&f.w.slots[0].done_epoch, 3);
	shmrun_snapshot_reaped(&f.w, 100, EXITED(0));
	assert_forgotten(&f);
	ck_assert_uint_eq(atomic_load(&f.w.slots[0].failed_epoch), 0);
	fixture_free(&f);
}
END_TEST

START_TEST(test_exit_1_reported_failure)
{
	struct fixture f;

	fixture_init(&f, 100, 3);
	atomic_store(&f.w.slots[0].error, -EIO);
	atomic_store(&f.w.slots[0].failed_epoch, 3);
	shmrun_snapshot_reaped(&f.w, 100, EXITED(1));
	assert_forgotten(&f);
	ck_assert_int_eq(atomic_load(&f.w.slots[0].error), -EIO); /* its own cause kept */
	fixture_free(&f);
}
END_TEST

/* Exited without any report, epoch live: it died; the epoch fails at once. */
START_TEST(test_exit_1_unreported_dies)
{
	struct fixture f;

	fixture_init(&f, 100, 3);
	shmrun_snapshot_reaped(&f.w, 100, EXITED(1));
	assert_forgotten(&f);
	ck_assert_uint_eq(atomic_load(&f.w.slots[0].failed_epoch), 3);
	ck_assert_int_eq(atomic_load(&f.w.slots[0].error), -ECHILD);
	fixture_free(&f);
}
END_TEST

/* The regression: its failure report was dropped because epoch 3 was
 * aborted; it exited 1 and did not die. */
START_TEST(test_exit_1_stale_aborted)
{
	struct fixture f;

	fixture_init(&f, 100, 3);
	atomic_store(&f.ctl->aborted_epoch, 3);
	shmrun_snapshot_reaped(&f.w, 100, EXITED(1));
	assert_forgotten(&f);
	ck_assert_uint_eq(atomic_load(&f.w.slots[0].failed_epoch), 0);
	ck_assert_int_eq(atomic_load(&f.w.slots[0].error), 0);
	fixture_free(&f);
}
END_TEST

/* Dropped because the slot holds a newer epoch: not dead, the slot untouched. */
START_TEST(test_exit_1_stale_newer)
{
	struct fixture f;

	fixture_init(&f, 100, 3);
	atomic_store(&f.w.slots[0].done_epoch, 4);
	shmrun_snapshot_reaped(&f.w, 100, EXITED(1));
	assert_forgotten(&f);
	ck_assert_uint_eq(atomic_load(&f.w.slots[0].failed_epoch), 0);
	ck_assert_uint_eq(atomic_load(&f.w.slots[0].done_epoch), 4);
	fixture_free(&f);
}
END_TEST

/* Killed by a signal: dead, whatever the epoch; as before, it is reported. */
START_TEST(test_signaled_dies)
{
	struct fixture f;

	fixture_init(&f, 100, 3);
	shmrun_snapshot_reaped(&f.w, 100, SIGNALED(9));
	assert_forgotten(&f);
	ck_assert_uint_eq(atomic_load(&f.w.slots[0].failed_epoch), 3);
	ck_assert_int_eq(atomic_load(&f.w.slots[0].error), -ECHILD);
	fixture_free(&f);
}
END_TEST

/* Another pid (not one of this worker's writers): nothing changes. */
START_TEST(test_other_pid_ignored)
{
	struct fixture f;

	fixture_init(&f, 100, 3);
	shmrun_snapshot_reaped(&f.w, 101, EXITED(1));
	ck_assert_uint_eq(f.w.nchildren, 1);
	ck_assert_uint_eq(atomic_load(&f.ctl->writers), 1);
	ck_assert_uint_eq(atomic_load(&f.w.slots[0].failed_epoch), 0);
	fixture_free(&f);
}
END_TEST

/*
 * A task with nothing restored (a first start: restore_pw NULL, length 0)
 * hands no entry to its operator and succeeds. Regression: the end pointer
 * was computed as NULL + 0, undefined behaviour that clang's UBSan reported
 * on every run of the fuzz build (tests/fuzz/README.md).
 */
START_TEST(test_restore_entries_none)
{
	struct shmrun_task t;
	static const struct shmrun_operator no_restore = {.name = "none"};

	memset(&t, 0, sizeof(t));
	t.op = &no_restore;
	ck_assert_int_eq(shmrun_snapshot_restore_entries(&t), 0);
	ck_assert_ptr_null(t.restore_pw);
}
END_TEST

static Suite *snapshot_suite(void)
{
	Suite *s = suite_create("snapshot");
	TCase *tc = tcase_create("reaped");

	tcase_add_test(tc, test_exit_0_reported);
	tcase_add_test(tc, test_exit_1_reported_failure);
	tcase_add_test(tc, test_exit_1_unreported_dies);
	tcase_add_test(tc, test_exit_1_stale_aborted);
	tcase_add_test(tc, test_exit_1_stale_newer);
	tcase_add_test(tc, test_signaled_dies);
	tcase_add_test(tc, test_other_pid_ignored);
	suite_add_tcase(s, tc);
	tc = tcase_create("restore");
	tcase_add_test(tc, test_restore_entries_none);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(snapshot_suite());
	int failed;

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
