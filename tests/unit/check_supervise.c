/*
 * tests/unit/check_supervise.c: the rule `shmrun supervise` reruns a COMMAND
 * by (runtime/supervise.h, shmrun_supervise_verdict()), against wait statuses
 * built with W_EXITCODE/W_STOPCODE and what Open MPI 4.1.4's mpirun was
 * measured to exit with (docs/multihost.md "Failures").
 *
 *   exit     0 done; 75 restart; 1, 2, 3, 126, 127, 128, 255 final
 *   mpirun   128+S: a rank killed by S (137 SIGKILL, 139 SIGSEGV) restarts,
 *            130/143/129 (a stop signal), 141 (SIGPIPE), 153 (SIGXFSZ) do not
 *   signal   killed by S: the same rule as 128+S
 *   why      the phrase names the status and the signal; a short buffer is
 *            cut, still terminated
 *
 * tests/integration/supervise.sh runs the command itself.
 */
#include <check.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include "supervise.h"

static char why[160];

static enum shmrun_supervise_verdict exit_v(int code)
{
	return shmrun_supervise_verdict(W_EXITCODE(code, 0), why, sizeof(why));
}

static enum shmrun_supervise_verdict sig_v(int sig)
{
	return shmrun_supervise_verdict(W_EXITCODE(0, sig), why, sizeof(why));
}

START_TEST(exit_codes)
{
	ck_assert_int_eq(exit_v(0), SHMRUN_SV_DONE);
	ck_assert_str_eq(why, "exited with status 0");
	ck_assert_int_eq(exit_v(75), SHMRUN_SV_RESTART);
	ck_assert_str_eq(why, "exited with status 75 (restartable)");
	static const int final[] = {1, 2, 3, 74, 76, 126, 127, 128, 193, 255};

	for (size_t i = 0; i < sizeof(final) / sizeof(final[0]); i++) {
		ck_assert_int_eq(exit_v(final[i]), SHMRUN_SV_FINAL);
		ck_assert_ptr_nonnull(strstr(why, "exited with status"));
	}
	ck_assert_int_eq(exit_v(3), SHMRUN_SV_FINAL);
	ck_assert_str_eq(why, "exited with status 3");
}
END_TEST

START_TEST(mpirun_codes)
{
	ck_assert_int_eq(exit_v(137), SHMRUN_SV_RESTART);
	ck_assert_str_eq(why, "exited with status 137: a process was killed by SIGKILL");
	ck_assert_int_eq(exit_v(139), SHMRUN_SV_RESTART);
	ck_assert_int_eq(exit_v(128 + SIGBUS), SHMRUN_SV_RESTART);
	ck_assert_int_eq(exit_v(128 + SIGABRT), SHMRUN_SV_RESTART);
	ck_assert_int_eq(exit_v(128 + 64), SHMRUN_SV_RESTART); /* SIGRTMAX: no name */
	ck_assert_str_eq(why, "exited with status 192: a process was killed by signal 64");
	ck_assert_int_eq(exit_v(130), SHMRUN_SV_FINAL);
	ck_assert_str_eq(why, "exited with status 130: a process was killed by SIGINT (not "
			      "restarted after it)");
	ck_assert_int_eq(exit_v(128 + SIGTERM), SHMRUN_SV_FINAL);
	ck_assert_int_eq(exit_v(128 + SIGHUP), SHMRUN_SV_FINAL);
	ck_assert_int_eq(exit_v(128 + SIGPIPE), SHMRUN_SV_FINAL);
	ck_assert_int_eq(exit_v(128 + SIGXFSZ), SHMRUN_SV_FINAL);
	ck_assert_int_eq(exit_v(128 + SIGXCPU), SHMRUN_SV_FINAL);
}
END_TEST

START_TEST(killed)
{
	ck_assert_int_eq(sig_v(SIGKILL), SHMRUN_SV_RESTART);
	ck_assert_str_eq(why, "was killed by SIGKILL");
	ck_assert_int_eq(sig_v(SIGSEGV), SHMRUN_SV_RESTART);
	ck_assert_int_eq(sig_v(SIGTERM), SHMRUN_SV_FINAL);
	ck_assert_str_eq(why, "was killed by SIGTERM (not restarted after it)");
	ck_assert_int_eq(sig_v(SIGINT), SHMRUN_SV_FINAL);
	ck_assert_int_eq(sig_v(SIGHUP), SHMRUN_SV_FINAL);
	ck_assert_int_eq(sig_v(SIGPIPE), SHMRUN_SV_FINAL);
	ck_assert_int_eq(sig_v(SIGXFSZ), SHMRUN_SV_FINAL);
	/* stopped is no end: never a rerun */
	ck_assert_int_eq(shmrun_supervise_verdict(W_STOPCODE(SIGSTOP), why, sizeof(why)),
			 SHMRUN_SV_FINAL);
}
END_TEST

START_TEST(short_buffer)
{
	char small[8];

	ck_assert_int_eq(shmrun_supervise_verdict(W_EXITCODE(75, 0), small, sizeof(small)),
			 SHMRUN_SV_RESTART);
	ck_assert_str_eq(small, "exited ");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("supervise");
	TCase *tc = tcase_create("verdict");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, exit_codes);
	tcase_add_test(tc, mpirun_codes);
	tcase_add_test(tc, killed);
	tcase_add_test(tc, short_buffer);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
