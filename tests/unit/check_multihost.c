/*
 * tests/unit/check_multihost.c: runtime/multihost.c — which host of a
 * multi-host run this process is, from the MPI launcher's environment, and
 * the refusals before a run (docs/multihost.md).
 *
 *   env     shmrun_mpi_env(): each launcher's pair of variables, their order,
 *           PMI_RANK as PMIX_RANK's fallback, and every malformed value;
 *           a pair is trusted only with its launcher's marks (mpirun's PMIx
 *           server, PMI_FD, srun's step and PMI rank), else listed as ignored
 *   check   shmrun_hosts_check(): hosts = 1 and H against the environment,
 *           the host it finds (and keeps for shmrun_host_self()), the
 *           messages, and where hosts came from (shmrun_hosts_where())
 *
 * Each test runs in its own forked child (Check's default), so the
 * variables it sets do not leak into the next.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "multihost.h"
#include "shmrun/job.h"

static const char *const vars[] = {
    "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMI_SIZE", "PMIX_RANK", "PMI_RANK",
    "SLURM_NTASKS",	    "SLURM_PROCID",	    "PMIX_NAMESPACE",	    "PMIX_SERVER_URI41",
    "PMI_FD",		    "SLURM_STEP_ID"};

/* What mpirun (Open MPI 4.1) sets besides OMPI_COMM_WORLD_*: its PMIx server. */
static void mpirun_marks(void)
{
	setenv("PMIX_NAMESPACE", "1882980353", 1);
	setenv("PMIX_SERVER_URI41", "1882980352.0;tcp4://127.0.0.1:47773", 1);
}

static void clear_env(void)
{
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
}

START_TEST(env_pairs)
{
	struct shmrun_mpi_env e;
	char why[256];

	clear_env();
	ck_assert_int_eq(shmrun_mpi_env(&e, why, sizeof(why)), 0);
	ck_assert_str_eq(e.ignored, "");

	setenv("SLURM_NTASKS", "4", 1);
	setenv("SLURM_PROCID", "3", 1);
	setenv("SLURM_STEP_ID", "0", 1);
	setenv("PMI_RANK", "3", 1);
	ck_assert_int_eq(shmrun_mpi_env(&e, why, sizeof(why)), 1);
	ck_assert_uint_eq(e.size, 4);
	ck_assert_uint_eq(e.rank, 3);
	ck_assert_str_eq(e.size_var, "SLURM_NTASKS");
	ck_assert_str_eq(e.rank_var, "SLURM_PROCID");

	/* PMI before Slurm; PMI_RANK when PMIX_RANK is not set */
	setenv("PMI_SIZE", "3", 1);
	setenv("PMI_RANK", "1", 1);
	setenv("PMI_FD", "5", 1);
	ck_assert_int_eq(shmrun_mpi_env(&e, why, sizeof(why)), 1);
	ck_assert_uint_eq(e.size, 3);
	ck_assert_uint_eq(e.rank, 1);
	ck_assert_str_eq(e.rank_var, "PMI_RANK");
	setenv("PMIX_RANK", "2", 1);
	ck_assert_int_eq(shmrun_mpi_env(&e, why, sizeof(why)), 1);
	ck_assert_uint_eq(e.rank, 2);
	ck_assert_str_eq(e.rank_var, "PMIX_RANK");

	/* Open MPI's first */
	setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
	setenv("OMPI_COMM_WORLD_RANK", "0", 1);
	mpirun_marks();
	ck_assert_int_eq(shmrun_mpi_env(&e, why, sizeof(why)), 1);
	ck_assert_uint_eq(e.size, 2);
	ck_assert_uint_eq(e.rank, 0);
	ck_assert_str_eq(e.size_var, "OMPI_COMM_WORLD_SIZE");
}
END_TEST

/*
 * Variables without their launcher's marks (a plain shmrun in an sbatch
 * script, a copy exported from an earlier mpirun): 0, listed in e.ignored,
 * never an error even when malformed.
 */
START_TEST(env_stale)
{
	struct shmrun_mpi_env e;
	char why[256];

	clear_env();
	setenv("SLURM_NTASKS", "4", 1);
	setenv("SLURM_PROCID", "0", 1);
	ck_assert_int_eq(shmrun_mpi_env(&e, why, sizeof(why)), 0);
	ck_assert_str_eq(e.ignored, "SLURM_NTASKS=4, SLURM_PROCID=0");
	/* srun's step, but no MPI plugin's rank */
	setenv("SLURM_STEP_ID", "0", 1);
	ck_assert_int_eq(shmrun_mpi_env(&e, why, sizeof(why)), 0);
	/* PMIX_RANK alone is not PMI_FD nor a PMIx server: PMI_SIZE stays ignored */
	setenv("PMI_SIZE", "two", 1);
	setenv("PMIX_RANK", "0", 1);
	ck_assert_int_eq(shmrun_mpi_env(&e, why, sizeof(why)), 1);
	ck_assert_str_eq(e.size_var, "SLURM_NTASKS");
	ck_assert_str_eq(e.ignored, "PMI_SIZE=two, PMIX_RANK=0");
	clear_env();
	setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
	ck_assert_int_eq(shmrun_mpi_env(&e, why, sizeof(why)), 0);
	ck_assert_str_eq(e.ignored, "OMPI_COMM_WORLD_SIZE=2");
	/* a namespace without a server URI is not mpirun's */
	setenv("PMIX_NAMESPACE", "9", 1);
	ck_assert_int_eq(shmrun_mpi_env(&e, why, sizeof(why)), 0);
	setenv("PMIX_SERVER_URI2", "9.0;tcp4://127.0.0.1:1", 1);
	ck_assert_int_eq(shmrun_mpi_env(&e, why, sizeof(why)), -EINVAL); /* no rank */
	setenv("OMPI_COMM_WORLD_RANK", "1", 1);
	ck_assert_int_eq(shmrun_mpi_env(&e, why, sizeof(why)), 1);
	ck_assert_uint_eq(e.rank, 1);
	unsetenv("PMIX_SERVER_URI2");
}
END_TEST

/* A malformed size or rank: -EINVAL naming the variable and its value. */
START_TEST(env_malformed)
{
	static const struct {
		const char *size, *rank, *want;
	} c[] = {
	    {"0", "0",
	     "OMPI_COMM_WORLD_SIZE = '0' in the environment is not a process count 1..1024"},
	    {"1025", "0",
	     "OMPI_COMM_WORLD_SIZE = '1025' in the environment is not a process count"},
	    {"2x", "0", "OMPI_COMM_WORLD_SIZE = '2x' in the environment is not a process count"},
	    {"-2", "0", "OMPI_COMM_WORLD_SIZE = '-2' in the environment is not a process count"},
	    {"", "0", "OMPI_COMM_WORLD_SIZE = '' in the environment is not a process count"},
	    {"99999999999999999999", "0", "is not a process count"},
	    {"2", NULL,
	     "OMPI_COMM_WORLD_SIZE = 2 in the environment, but OMPI_COMM_WORLD_RANK is "
	     "not set, not a rank below 2"},
	    {"2", "2", "but OMPI_COMM_WORLD_RANK is '2', not a rank below 2"},
	    {"2", " 1", "but OMPI_COMM_WORLD_RANK is ' 1', not a rank below 2"},
	};
	struct shmrun_mpi_env e;
	char why[256];

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		clear_env();
		mpirun_marks();
		setenv("OMPI_COMM_WORLD_SIZE", c[i].size, 1);
		if (c[i].rank)
			setenv("OMPI_COMM_WORLD_RANK", c[i].rank, 1);
		why[0] = 0;
		ck_assert_int_eq(shmrun_mpi_env(&e, why, sizeof(why)), -EINVAL);
		ck_assert_msg(strstr(why, c[i].want), "case %zu: %s", i, why);
	}
}
END_TEST

/* A job as the loader leaves it for these functions. */
static struct shmrun_job job_of(uint32_t hosts, int line, bool set, const char *env)
{
	return (struct shmrun_job){.conf_path = (char *)"t.conf",
				   .hosts = hosts,
				   .hosts_line = line,
				   .hosts_set = set,
				   .hosts_env = env};
}

START_TEST(check_hosts)
{
	struct shmrun_job one = job_of(1, 0, false, NULL), two = job_of(2, 3, true, NULL);
	struct shmrun_job one_set = job_of(1, 0, true, NULL);
	char why[512], where[64];
	uint32_t host = 7;

	clear_env();
	ck_assert_int_eq(shmrun_hosts_check(&one, &host, why, sizeof(why)), 0);
	ck_assert_uint_eq(host, 0);
	ck_assert_str_eq(shmrun_hosts_where(&one, where, sizeof(where)), "the default");
	ck_assert_str_eq(shmrun_hosts_where(&two, where, sizeof(where)), "t.conf:3");
	ck_assert_str_eq(shmrun_hosts_where(&one_set, where, sizeof(where)), "--set");
#ifdef SHMRUN_HAVE_MPI
	ck_assert_int_eq(shmrun_hosts_check(&two, &host, why, sizeof(why)), -EINVAL);
	ck_assert_str_eq(why, "hosts = 2 (t.conf:3) needs 2 MPI processes: mpirun -np 2 shmrun "
			      "t.conf (docs/multihost.md)");
	/* stale variables, no launcher: refused, naming them */
	setenv("SLURM_NTASKS", "2", 1);
	setenv("SLURM_PROCID", "0", 1);
	ck_assert_int_eq(shmrun_hosts_check(&two, &host, why, sizeof(why)), -EINVAL);
	ck_assert_str_eq(why, "hosts = 2 (t.conf:3) needs 2 MPI processes: mpirun -np 2 shmrun "
			      "t.conf (docs/multihost.md); ignored SLURM_NTASKS=2, SLURM_PROCID=0: "
			      "no mpirun or srun started this process");
	/* and a 1-host job runs */
	ck_assert_int_eq(shmrun_hosts_check(&one_set, &host, why, sizeof(why)), 0);
	unsetenv("SLURM_NTASKS");
	unsetenv("SLURM_PROCID");
	mpirun_marks();
	setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
	setenv("OMPI_COMM_WORLD_RANK", "1", 1);
	ck_assert_int_eq(shmrun_hosts_check(&two, &host, why, sizeof(why)), 0);
	ck_assert_uint_eq(host, 1);
	ck_assert_uint_eq(shmrun_host_self(), 1);
	/* a 1-host job under 2 processes: each would run all of it */
	ck_assert_int_eq(shmrun_hosts_check(&one_set, &host, why, sizeof(why)), -EINVAL);
	ck_assert_uint_eq(shmrun_host_self(), 0);
	ck_assert_msg(strstr(why, "hosts = 1 (--set), but this is one of 2 MPI processes "
				  "(OMPI_COMM_WORLD_SIZE = 2): each would run the whole job"),
		      "%s", why);
	setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
	ck_assert_int_eq(shmrun_hosts_check(&two, &host, why, sizeof(why)), -EINVAL);
	ck_assert_msg(strstr(why, "hosts = 2 (t.conf:3), but this is one of 3 MPI processes "
				  "(OMPI_COMM_WORLD_SIZE = 3): start it with mpirun -np 2, or set "
				  "hosts = 3"),
		      "%s", why);
	/* hosts taken from the environment agrees with it */
	{
		struct shmrun_job env3 = job_of(3, 0, false, "OMPI_COMM_WORLD_SIZE");

		ck_assert_int_eq(shmrun_hosts_check(&env3, &host, why, sizeof(why)), 0);
		ck_assert_uint_eq(host, 1);
		ck_assert_str_eq(shmrun_hosts_where(&env3, where, sizeof(where)),
				 "the environment (OMPI_COMM_WORLD_SIZE)");
	}
	/* under one process, hosts = 1 is fine */
	setenv("OMPI_COMM_WORLD_SIZE", "1", 1);
	setenv("OMPI_COMM_WORLD_RANK", "0", 1);
	ck_assert_int_eq(shmrun_hosts_check(&one_set, &host, why, sizeof(why)), 0);
#else
	ck_assert_int_eq(shmrun_hosts_check(&two, &host, why, sizeof(why)), -ENOTSUP);
	ck_assert_msg(strstr(why, "hosts = 2 (t.conf:3), but this shmrun was built without MPI"),
		      "%s", why);
#endif
}
END_TEST

int main(void)
{
	Suite *s = suite_create("multihost");
	TCase *tc = tcase_create("env");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, env_pairs);
	tcase_add_test(tc, env_malformed);
	tcase_add_test(tc, env_stale);
	suite_add_tcase(s, tc);
	tc = tcase_create("check");
	tcase_add_test(tc, check_hosts);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
