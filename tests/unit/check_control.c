/*
 * tests/unit/check_control.c: the control area as a format (runtime/control.h,
 * docs/shm-layout.md "Control area") — the layout create() writes, offsets and
 * sizes for no tasks, one worker and many of both, every block on a 64-byte
 * boundary, the check every worker makes refusing each damaged layout word,
 * and counts too large to lay out refused without an overflowed size.
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "control.h"

/* sizeof(struct shmrun_control) = 4752, rounded up to 64. */
#define HEAD 4800u
#define STATS 640u
#define SLOT 128u

static void assert_layout(struct shmrun_control *c, uint32_t workers, uint32_t tasks)
{
	uint64_t want = HEAD + (uint64_t)workers * STATS + (uint64_t)(tasks ? tasks : 1) * SLOT;
	struct shmrun_worker_stats *stats = shmrun_control_stats(c);
	struct shmrun_task_slot *slots = shmrun_control_slots(c);
	char why[200] = "";

	ck_assert_uint_eq(c->magic, SHMRUN_CONTROL_MAGIC);
	ck_assert_uint_eq(c->version, SHMRUN_CONTROL_LAYOUT_VERSION);
	ck_assert_uint_eq(c->header_bytes, 4752);
	ck_assert_uint_eq(c->stats_bytes, STATS);
	ck_assert_uint_eq(c->slot_bytes, SLOT);
	ck_assert_uint_eq(c->cacheline, 64);
	ck_assert_uint_eq(c->go, 0);
	ck_assert_uint_eq(c->workers, workers);
	ck_assert_uint_eq(c->tasks, tasks);
	ck_assert_uint_eq(c->stats_off, HEAD);
	ck_assert_uint_eq(c->slots_off, HEAD + (uint64_t)workers * STATS);
	ck_assert_uint_eq(c->bytes, want);
	ck_assert_uint_eq(shmrun_control_memsize(workers, tasks), want);
	ck_assert_int_eq(shmrun_control_check(c, workers, tasks, why, sizeof(why)), 0);
	ck_assert_str_eq(why, "");

	/* every block on its own cache line, the last one ending at bytes */
	ck_assert_uint_eq((uintptr_t)c % 64, 0);
	for (uint32_t w = 0; w < workers; w++)
		ck_assert_uint_eq((uintptr_t)&stats[w] % 64, 0);
	for (uint32_t k = 0; k < (tasks ? tasks : 1); k++) {
		ck_assert_uint_eq((uintptr_t)&slots[k] % 64, 0);
		ck_assert_uint_eq((uintptr_t)&slots[k].rate_start_ns % 64, 0);
	}
	ck_assert_uint_eq((uintptr_t)&slots[tasks ? tasks : 1] - (uintptr_t)c, want);
	ck_assert_ptr_eq((void *)&stats[workers], (void *)slots);
}

START_TEST(test_create_destroy)
{
	struct shmrun_control *c = shmrun_control_create(2, 5);
	struct shmrun_task_slot *slots;
	struct shmrun_worker_stats *stats;

	ck_assert_ptr_nonnull(c);
	assert_layout(c, 2, 5);
	/* everything past the layout words starts at 0 */
	ck_assert_uint_eq(atomic_load(&c->trigger_epoch), 0);
	ck_assert_uint_eq(atomic_load(&c->complete_epoch), 0);
	ck_assert_uint_eq(atomic_load(&c->aborted_epoch), 0);
	ck_assert_uint_eq(atomic_load(&c->final_epoch), 0);
	ck_assert_uint_eq(atomic_load(&c->failed), 0);
	ck_assert_uint_eq(atomic_load(&c->writers), 0);
	ck_assert_uint_eq(c->restored_epoch, 0);
	ck_assert_uint_eq(c->epoch_floor, 0);
	ck_assert_str_eq(c->failed_why, "");
	stats = shmrun_control_stats(c);
	slots = shmrun_control_slots(c);
	for (uint32_t w = 0; w < 2; w++) {
		ck_assert_uint_eq(atomic_load(&stats[w].heartbeat), 0);
		ck_assert_int_eq(atomic_load(&stats[w].pid), 0);
		ck_assert_str_eq(stats[w].error, "");
	}
	for (uint32_t k = 0; k < 5; k++) {
		ck_assert_uint_eq(atomic_load(&slots[k].done_epoch), 0);
		ck_assert_uint_eq(atomic_load(&slots[k].failed_epoch), 0);
		ck_assert_uint_eq(slots[k].size, 0);
	}
	/* the last byte of the mapping is writable */
	((unsigned char *)c)[c->bytes - 1] = 1;
	shmrun_control_destroy(c);
	shmrun_control_destroy(NULL);
}
END_TEST

START_TEST(test_zero_tasks)
{
	struct shmrun_control *c = shmrun_control_create(1, 0);

	/* no tasks still lays out one slot (the rate words of nothing) */
	ck_assert_ptr_nonnull(c);
	assert_layout(c, 1, 0);
	ck_assert_uint_eq(c->bytes, HEAD + STATS + SLOT);
	shmrun_control_destroy(c);
}
END_TEST

START_TEST(test_one_worker)
{
	struct shmrun_control *c = shmrun_control_create(1, 1);

	ck_assert_ptr_nonnull(c);
	assert_layout(c, 1, 1);
	ck_assert_uint_eq(c->slots_off, HEAD + STATS);
	ck_assert_uint_eq(c->bytes, HEAD + STATS + SLOT);
	shmrun_control_destroy(c);
}
END_TEST

START_TEST(test_many)
{
	static const uint32_t counts[][2] = {{64, 1000}, {256, 100000}, {3, 7}, {1000, 1}};

	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		struct shmrun_control *c = shmrun_control_create(counts[i][0], counts[i][1]);

		ck_assert_ptr_nonnull(c);
		assert_layout(c, counts[i][0], counts[i][1]);
		shmrun_control_destroy(c);
	}
}
END_TEST

/* A forked child shares the area: its release store is seen by the parent. */
START_TEST(test_shared_with_child)
{
	struct shmrun_control *c = shmrun_control_create(2, 3);
	int status;
	pid_t pid;

	ck_assert_ptr_nonnull(c);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char why[200];

		if (shmrun_control_check(c, 2, 3, why, sizeof(why)) != 0)
			_exit(2);
		shmrun_control_slots(c)[2].size = 4242;
		atomic_store_explicit(&shmrun_control_slots(c)[2].done_epoch, 9,
				      memory_order_release);
		atomic_store_explicit(&shmrun_control_stats(c)[1].pid, (int32_t)getpid(),
				      memory_order_relaxed);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_uint_eq(
		atomic_load_explicit(&shmrun_control_slots(c)[2].done_epoch, memory_order_acquire),
		9);
	ck_assert_uint_eq(shmrun_control_slots(c)[2].size, 4242);
	ck_assert_int_eq(atomic_load_explicit(&shmrun_control_stats(c)[1].pid,
					      memory_order_relaxed),
			 pid);
	shmrun_control_destroy(c);
}
END_TEST

/* Each layout word damaged in turn: check() refuses it, naming the word. */
static const struct damage {
	const char *name;
	size_t off, width;
} damages[] = {
	{"magic", offsetof(struct shmrun_control, magic), 8},
	{"layout version", offsetof(struct shmrun_control, version), 4},
	{"header_bytes", offsetof(struct shmrun_control, header_bytes), 4},
	{"stats_bytes", offsetof(struct shmrun_control, stats_bytes), 4},
	{"slot_bytes", offsetof(struct shmrun_control, slot_bytes), 4},
	{"workers", offsetof(struct shmrun_control, workers), 4},
	{"tasks", offsetof(struct shmrun_control, tasks), 4},
	{"stats_off", offsetof(struct shmrun_control, stats_off), 8},
	{"slots_off", offsetof(struct shmrun_control, slots_off), 8},
	{"bytes", offsetof(struct shmrun_control, bytes), 8},
	{"cacheline", offsetof(struct shmrun_control, cacheline), 4},
};
#define N_DAMAGES ((int)(sizeof(damages) / sizeof(damages[0])))

START_TEST(test_check_refuses)
{
	const struct damage *d = &damages[_i];
	struct shmrun_control *c = shmrun_control_create(3, 4);
	unsigned char *word;
	char why[200] = "", want[64];

	ck_assert_ptr_nonnull(c);
	word = (unsigned char *)c + d->off;
	word[0] ^= 0x01; /* one bit: off by one, still plausible */
	ck_assert_int_eq(shmrun_control_check(c, 3, 4, why, sizeof(why)), -EPROTO);
	snprintf(want, sizeof(want), "control area: %s is ", d->name);
	ck_assert_msg(strncmp(why, want, strlen(want)) == 0, "%s: got \"%s\"", d->name, why);
	/* NULL why: the same answer, nothing written */
	ck_assert_int_eq(shmrun_control_check(c, 3, 4, NULL, 0), -EPROTO);
	word[0] ^= 0x01;
	ck_assert_int_eq(shmrun_control_check(c, 3, 4, why, sizeof(why)), 0);
	/* the other end of the word too */
	word[d->width - 1] ^= 0x80;
	ck_assert_int_eq(shmrun_control_check(c, 3, 4, why, sizeof(why)), -EPROTO);
	word[d->width - 1] ^= 0x80; /* destroy() unmaps bytes */
	shmrun_control_destroy(c);
}
END_TEST

START_TEST(test_check_args)
{
	struct shmrun_control *c = shmrun_control_create(3, 4);
	char why[200];

	ck_assert_ptr_nonnull(c);
	ck_assert_int_eq(shmrun_control_check(NULL, 3, 4, why, sizeof(why)), -EINVAL);
	ck_assert_int_eq(shmrun_control_check(NULL, 3, 4, NULL, 0), -EINVAL);
	/* an area laid out for another job */
	ck_assert_int_eq(shmrun_control_check(c, 2, 4, why, sizeof(why)), -EPROTO);
	ck_assert_str_eq(why, "control area: workers is 3, this build expects 2 (a mapping of "
			      "another layout or another run)");
	ck_assert_int_eq(shmrun_control_check(c, 3, 5, why, sizeof(why)), -EPROTO);
	ck_assert_ptr_nonnull(strstr(why, "tasks is 4"));
	/* a short why is cut, never overrun */
	why[5] = 'x';
	ck_assert_int_eq(shmrun_control_check(c, 3, 5, why, 5), -EPROTO);
	ck_assert_uint_eq(strlen(why), 4);
	ck_assert_int_eq(why[5], 'x');
	/* an all-zero mapping (nothing laid out) */
	memset(c, 0, 64);
	ck_assert_int_eq(shmrun_control_check(c, 3, 4, why, sizeof(why)), -EPROTO);
	ck_assert_ptr_nonnull(strstr(why, "magic is 0"));
	c->bytes = shmrun_control_memsize(3, 4); /* for destroy */
	shmrun_control_destroy(c);
}
END_TEST

START_TEST(test_absurd_counts)
{
	/* the largest counts are laid out exactly, in 64 bits */
	ck_assert_uint_eq(shmrun_control_memsize(SHMRUN_CONTROL_MAX_WORKERS, SHMRUN_CONTROL_MAX_TASKS),
			  HEAD + (uint64_t)SHMRUN_CONTROL_MAX_WORKERS * STATS +
				  (uint64_t)SHMRUN_CONTROL_MAX_TASKS * SLOT);
	/* one past either maximum, or near UINT32_MAX: 0, and create() refuses
	 * without mapping an overflowed (small) size */
	ck_assert_uint_eq(shmrun_control_memsize(SHMRUN_CONTROL_MAX_WORKERS + 1, 1), 0);
	ck_assert_uint_eq(shmrun_control_memsize(1, SHMRUN_CONTROL_MAX_TASKS + 1), 0);
	ck_assert_uint_eq(shmrun_control_memsize(1, UINT32_MAX), 0);
	ck_assert_uint_eq(shmrun_control_memsize(UINT32_MAX, 1), 0);
	ck_assert_uint_eq(shmrun_control_memsize(UINT32_MAX, UINT32_MAX), 0);
	ck_assert_ptr_null(shmrun_control_create(1, UINT32_MAX));
	ck_assert_ptr_null(shmrun_control_create(1, UINT32_MAX - 1));
	ck_assert_ptr_null(shmrun_control_create(UINT32_MAX, 1));
	ck_assert_ptr_null(shmrun_control_create(SHMRUN_CONTROL_MAX_WORKERS + 1, 0));
}
END_TEST

/* ---- slot reports (shmrun_slot_report) --------------------------------------- */

static const struct shmrun_slot_file FILE_A = {
    .size = 100, .xxh64 = 0xaaaa, .kv_bytes = 60, .pw_bytes = 40};
static const struct shmrun_slot_file FILE_B = {
    .size = 200, .xxh64 = 0xbbbb, .kv_bytes = 150, .pw_bytes = 50};

static void assert_slot(const struct shmrun_task_slot *s, uint64_t done,
			const struct shmrun_slot_file *f)
{
	ck_assert_uint_eq(atomic_load(&s->done_epoch), done);
	ck_assert_uint_eq(s->size, f->size);
	ck_assert_uint_eq(s->xxh64, f->xxh64);
	ck_assert_uint_eq(s->kv_bytes, f->kv_bytes);
	ck_assert_uint_eq(s->pw_bytes, f->pw_bytes);
	ck_assert_int_eq(atomic_load(&s->reporter), 0);
}

START_TEST(test_report_stores)
{
	struct shmrun_control *c = shmrun_control_create(1, 2);
	struct shmrun_task_slot *s = &shmrun_control_slots(c)[1];

	ck_assert_int_eq(shmrun_slot_report(c, s, 1, 0, &FILE_A), 1);
	assert_slot(s, 1, &FILE_A);
	ck_assert_int_eq(shmrun_slot_report(c, s, 2, 0, &FILE_B), 1);
	assert_slot(s, 2, &FILE_B);
	/* a failure: error and failed_epoch, the done fields untouched */
	ck_assert_int_eq(shmrun_slot_report(c, s, 3, -EIO, NULL), 1);
	ck_assert_uint_eq(atomic_load(&s->failed_epoch), 3);
	ck_assert_int_eq(atomic_load(&s->error), -EIO);
	assert_slot(s, 2, &FILE_B);
	/* the other slot is untouched */
	ck_assert_uint_eq(atomic_load(&shmrun_control_slots(c)[0].done_epoch), 0);
	shmrun_control_destroy(c);
}
END_TEST

/* The regression: the late writer of aborted epoch 4, finishing after epoch
 * 5's writer of the same task reported, used to set done_epoch back to 4 and
 * overwrite size and checksum with its own. */
START_TEST(test_report_late_aborted_writer)
{
	struct shmrun_control *c = shmrun_control_create(1, 1);
	struct shmrun_task_slot *s = shmrun_control_slots(c);

	atomic_store(&c->aborted_epoch, 4);
	ck_assert_int_eq(shmrun_slot_report(c, s, 5, 0, &FILE_B), 1);
	ck_assert_int_eq(shmrun_slot_report(c, s, 4, 0, &FILE_A), 0);
	assert_slot(s, 5, &FILE_B);
	ck_assert_int_eq(shmrun_slot_report(c, s, 4, -EIO, NULL), 0);
	ck_assert_uint_eq(atomic_load(&s->failed_epoch), 0);
	ck_assert_int_eq(atomic_load(&s->error), 0);
	/* aborted, and nothing newer reported yet: still dropped */
	atomic_store(&c->aborted_epoch, 6);
	ck_assert_int_eq(shmrun_slot_report(c, s, 6, 0, &FILE_A), 0);
	assert_slot(s, 5, &FILE_B);
	shmrun_control_destroy(c);
}
END_TEST

/* Not aborted, but older than what the slot holds (done or failed): dropped. */
START_TEST(test_report_older_than_slot)
{
	struct shmrun_control *c = shmrun_control_create(1, 1);
	struct shmrun_task_slot *s = shmrun_control_slots(c);

	ck_assert_int_eq(shmrun_slot_report(c, s, 7, 0, &FILE_B), 1);
	ck_assert_int_eq(shmrun_slot_report(c, s, 7, 0, &FILE_A), 0);
	ck_assert_int_eq(shmrun_slot_report(c, s, 3, 0, &FILE_A), 0);
	assert_slot(s, 7, &FILE_B);
	ck_assert_int_eq(shmrun_slot_report(c, s, 9, -ENOSPC, NULL), 1);
	ck_assert_int_eq(shmrun_slot_report(c, s, 8, 0, &FILE_A), 0);
	assert_slot(s, 7, &FILE_B);
	ck_assert_uint_eq(atomic_load(&s->failed_epoch), 9);
	shmrun_control_destroy(c);
}
END_TEST

/* A reporter killed inside the lock: the next one takes it over. */
START_TEST(test_report_dead_holder)
{
	struct shmrun_control *c = shmrun_control_create(1, 1);
	struct shmrun_task_slot *s = shmrun_control_slots(c);
	pid_t pid = fork();
	int status;

	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(0);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	atomic_store(&s->reporter, (int32_t)pid); /* held by a process that is gone */
	ck_assert_int_eq(shmrun_slot_report(c, s, 1, 0, &FILE_A), 1);
	assert_slot(s, 1, &FILE_A);
	shmrun_control_destroy(c);
}
END_TEST

/* Two processes report epochs of one slot at once: the newest wins, with its
 * own fields, whatever the interleaving. */
START_TEST(test_report_concurrent)
{
	struct shmrun_control *c = shmrun_control_create(1, 1);
	struct shmrun_task_slot *s = shmrun_control_slots(c);

	for (uint64_t round = 0; round < 200; round++) {
		uint64_t e = 2 * round + 2;
		pid_t pid = fork();
		int status;

		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			shmrun_slot_report(c, s, e - 1, 0, &FILE_A); /* the late, older one */
			_exit(0);
		}
		shmrun_slot_report(c, s, e, 0, &FILE_B);
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		assert_slot(s, e, &FILE_B);
	}
	shmrun_control_destroy(c);
}
END_TEST

static Suite *control_suite(void)
{
	Suite *s = suite_create("control");
	TCase *tc;

	tc = tcase_create("layout");
	tcase_add_test(tc, test_create_destroy);
	tcase_add_test(tc, test_zero_tasks);
	tcase_add_test(tc, test_one_worker);
	tcase_add_test(tc, test_many);
	tcase_add_test(tc, test_shared_with_child);
	suite_add_tcase(s, tc);

	tc = tcase_create("check");
	tcase_add_loop_test(tc, test_check_refuses, 0, N_DAMAGES);
	tcase_add_test(tc, test_check_args);
	suite_add_tcase(s, tc);

	tc = tcase_create("limits");
	tcase_add_test(tc, test_absurd_counts);
	suite_add_tcase(s, tc);

	tc = tcase_create("slot reports");
	tcase_add_test(tc, test_report_stores);
	tcase_add_test(tc, test_report_late_aborted_writer);
	tcase_add_test(tc, test_report_older_than_slot);
	tcase_add_test(tc, test_report_dead_holder);
	tcase_add_test(tc, test_report_concurrent);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(control_suite());
	int failed;

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
