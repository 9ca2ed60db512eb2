/*
 * runtime/multihost.c: this process's host in a multi-host run, from the MPI
 * launcher's environment, before MPI_Init (runtime/multihost.h).
 *
 * Why the environment. The launcher forks its workers before the gateway
 * thread calls MPI_Init_thread (a process must not fork after MPI_Init), and
 * which workers it forks depends on its host index: global worker g = h·w + i
 * for i < w (docs/multihost.md). mpirun and srun export the world size and
 * the rank of every process they start, so the index is known without MPI;
 * the gateway compares it with MPI_Comm_rank once MPI is up.
 *
 * Refusals, all before anything is created (exit 2 in the CLI):
 *   - hosts > 1 in a build without MPI;
 *   - hosts > 1 not started by an MPI launcher, or by one with another
 *     process count: each launcher would run only its share of the workers
 *     and wait for hosts that never come;
 *   - hosts = 1 (given, not taken from the environment) under an MPI launcher
 *     with several processes: every process would run the whole job.
 *
 * Rejected: MPI_Init first, then fork (not allowed by Open MPI: the children
 * share its network state); MPI_Comm_spawn of the workers (needs MPI in every
 * worker, and a dynamic-process runtime Debian's Open MPI sets up poorly).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "multihost.h"

extern char **environ;

/*
 * The variables of each launcher: world size, then rank (two candidates),
 * and what shows that the launcher really started this process (started()).
 */
enum started_by { BY_MPIRUN, BY_PMI, BY_SRUN };
static const struct {
	const char *size, *rank, *rank2;
	enum started_by by;
} env_pairs[] = {
    {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", NULL, BY_MPIRUN},
    {"PMI_SIZE", "PMIX_RANK", "PMI_RANK", BY_PMI},
    {"SLURM_NTASKS", "SLURM_PROCID", NULL, BY_SRUN},
};

/* Is a PMIx server serving this process: PMIX_NAMESPACE and a PMIX_SERVER_URI*
 * (Open MPI 4's mpirun, srun --mpi=pmix)? */
static bool pmix_server(void)
{
	if (!getenv("PMIX_NAMESPACE"))
		return false;
	for (char **v = environ; v && *v; v++)
		if (!strncmp(*v, "PMIX_SERVER_URI", 15))
			return true;
	return false;
}

/*
 * Did the launcher of pair @by start this process, or are its variables a
 * stale copy (a plain shmrun in an sbatch script sees SLURM_NTASKS and
 * SLURM_PROCID; an exported OMPI_COMM_WORLD_SIZE outlives its mpirun)?
 * mpirun (Open MPI 4.1) sets OMPI_COMM_WORLD_* with its PMIx server's
 * PMIX_NAMESPACE and PMIX_SERVER_URI*; PMI launchers (hydra, srun --mpi=pmi2)
 * pass PMI_FD, PMIx ones the server variables; srun sets SLURM_STEP_ID for its
 * step, and with an MPI plugin PMIX_RANK or PMI_RANK (sbatch's batch script
 * has neither PMI variable). docs/multihost.md states the rule.
 */
static bool started(enum started_by by)
{
	switch (by) {
	case BY_MPIRUN:
		return pmix_server();
	case BY_PMI:
		return getenv("PMI_FD") || pmix_server();
	case BY_SRUN:
		return getenv("SLURM_STEP_ID") && (getenv("PMIX_RANK") || getenv("PMI_RANK"));
	}
	return false;
}

/* Append "NAME=value" of @name (when set) to @e's list of ignored variables. */
static void note_ignored(struct shmrun_mpi_env *e, const char *name)
{
	const char *v = getenv(name);
	size_t n = strlen(e->ignored);

	if (!v || n + 1 >= sizeof(e->ignored))
		return;
	snprintf(e->ignored + n, sizeof(e->ignored) - n, "%s%s=%.20s", n ? ", " : "", name, v);
}

/* @s as a decimal count (digits only, no sign or blank) into @out; false if not one. */
static bool parse_count(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	if (!s || !*s)
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || v > 100000000)
			return false;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	return true;
}

int shmrun_mpi_env(struct shmrun_mpi_env *e, char *why, size_t len)
{
	e->ignored[0] = 0;
	for (size_t k = 0; k < sizeof(env_pairs) / sizeof(env_pairs[0]); k++) {
		const char *sv = getenv(env_pairs[k].size), *rname = env_pairs[k].rank;
		const char *rv = getenv(rname);
		uint64_t size, rank;

		if (!sv)
			continue;
		if (!started(env_pairs[k].by)) {
			note_ignored(e, env_pairs[k].size);
			note_ignored(e, env_pairs[k].rank);
			if (env_pairs[k].rank2)
				note_ignored(e, env_pairs[k].rank2);
			continue;
		}
		if (!rv && env_pairs[k].rank2) {
			rname = env_pairs[k].rank2;
			rv = getenv(rname);
		}
		if (!parse_count(sv, &size) || size < 1 || size > SHMRUN_MAX_HOSTS) {
			snprintf(why, len,
				 "%s = '%.40s' in the environment is not a process count 1..%u",
				 env_pairs[k].size, sv, SHMRUN_MAX_HOSTS);
			return -EINVAL;
		}
		if (!rv || !parse_count(rv, &rank) || rank >= size) {
			snprintf(why, len,
				 "%s = %s in the environment, but %s is %s%.40s%s, not a rank "
				 "below %u",
				 env_pairs[k].size, sv, rname, rv ? "'" : "", rv ? rv : "not set",
				 rv ? "'" : "", (unsigned)size);
			return -EINVAL;
		}
		e->size = (uint32_t)size;
		e->rank = (uint32_t)rank;
		e->size_var = env_pairs[k].size;
		e->rank_var = rname;
		return 1;
	}
	return 0;
}

/* This process's host, set by shmrun_hosts_check() (one launcher per process). */
static uint32_t self_host;

uint32_t shmrun_host_self(void)
{
	return self_host;
}

const char *shmrun_hosts_where(const struct shmrun_job *job, char *buf, size_t len)
{
	if (job->hosts_line > 0)
		snprintf(buf, len, "%s:%d", job->conf_path, job->hosts_line);
	else if (job->hosts_env)
		snprintf(buf, len, "the environment (%s)", job->hosts_env);
	else if (job->hosts_set)
		snprintf(buf, len, "--set");
	else
		snprintf(buf, len, "the default");
	return buf;
}

int shmrun_hosts_check(const struct shmrun_job *job, uint32_t *host, char *why, size_t len)
{
	struct shmrun_mpi_env e;
	char where[300];
	int r;

	*host = 0;
	self_host = 0;
	shmrun_hosts_where(job, where, sizeof(where));
#ifndef SHMRUN_HAVE_MPI
	if (job->hosts > 1) {
		snprintf(why, len,
			 "hosts = %u (%s), but this shmrun was built without MPI: install Open "
			 "MPI (apt-get install libopenmpi-dev) and rebuild with "
			 "-DSHMRUN_MPI=ON, or set hosts = 1 (docs/multihost.md)",
			 job->hosts, where);
		return -ENOTSUP;
	}
#endif
	r = shmrun_mpi_env(&e, why, len);
	if (r < 0)
		return r;
	if (job->hosts == 1) {
		if (r == 1 && e.size > 1) {
			snprintf(why, len,
				 "hosts = 1 (%s), but this is one of %u MPI processes (%s = %u): "
				 "each would run the whole job; set hosts = %u to spread the "
				 "job over them, or start one process (docs/multihost.md)",
				 where, e.size, e.size_var, e.size, e.size);
			return -EINVAL;
		}
		return 0;
	}
	if (r == 0) {
		snprintf(why, len,
			 "hosts = %u (%s) needs %u MPI processes: mpirun -np %u shmrun %s "
			 "(docs/multihost.md)%s%s%s",
			 job->hosts, where, job->hosts, job->hosts, job->conf_path,
			 e.ignored[0] ? "; ignored " : "", e.ignored,
			 e.ignored[0] ? ": no mpirun or srun started this process" : "");
		return -EINVAL;
	}
	if (e.size != job->hosts) {
		snprintf(why, len,
			 "hosts = %u (%s), but this is one of %u MPI processes (%s = %u): "
			 "start it with mpirun -np %u, or set hosts = %u (docs/multihost.md)",
			 job->hosts, where, e.size, e.size_var, e.size, job->hosts, e.size);
		return -EINVAL;
	}
	*host = e.rank;
	self_host = e.rank;
	return 0;
}
