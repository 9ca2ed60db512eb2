/*
 * runtime/multihost.h: which host of a multi-host run this process is, as
 * the environment of its MPI launcher says, before any MPI call (private to
 * runtime/; docs/multihost.md).
 *
 * A multi-host job ([job] hosts = H > 1) runs as H launchers started by
 * mpirun (or srun), one per host. Each must know its host index before it
 * forks its workers, and the workers must be forked before MPI_Init (forking
 * after it is not allowed): so the index comes from the variables the MPI
 * launcher exports, and the gateway checks them against MPI_Comm_size/rank
 * once MPI is up. With hosts = 1 nothing here calls or needs MPI.
 */
#ifndef SHMRUN_RT_MULTIHOST_H
#define SHMRUN_RT_MULTIHOST_H

#include <stddef.h>
#include <stdint.h>

#include "shmrun/job.h"

/** Largest [job] hosts. */
#define SHMRUN_MAX_HOSTS 1024u

/** The MPI world as the environment describes it. */
struct shmrun_mpi_env {
	uint32_t size;	      /**< processes in the MPI job, >= 1 */
	uint32_t rank;	      /**< this process's index, < size */
	const char *size_var; /**< the variables they came from (static strings) */
	const char *rank_var;
	/** launcher variables set but ignored, "NAME=value, …" ("" if none):
	 *  their launcher did not start this process (a stale copy) */
	char ignored[160];
};

/**
 * shmrun_mpi_env() - read the MPI world size and this process's rank from the
 * environment, in this order of pairs: OMPI_COMM_WORLD_SIZE/_RANK (Open MPI's
 * mpirun), PMI_SIZE with PMIX_RANK or PMI_RANK (PMI/PMIx launchers, MPICH's
 * hydra), SLURM_NTASKS/SLURM_PROCID (srun). The first pair whose size variable
 * is set, and whose launcher really started this process, decides: mpirun's
 * pair only with a PMIx server's PMIX_NAMESPACE and PMIX_SERVER_URI*, PMI_SIZE
 * only with PMI_FD or that server, Slurm's only with SLURM_STEP_ID and
 * PMIX_RANK or PMI_RANK (srun with an MPI plugin). The variables of a pair
 * without its launcher (a plain shmrun in an sbatch script, an exported
 * copy) are listed in @e->ignored and otherwise ignored.
 * @e: filled when the return is 1; @e->ignored always.
 * @why, @len: on -EINVAL, what is wrong (names the variable and its value).
 * Return: 1 under an MPI launcher; 0 when no launcher's size variable is set
 * (or only ignored ones); -EINVAL
 * when one is set but is not a count 1..SHMRUN_MAX_HOSTS, or the rank
 * variable is missing or not below the size.
 */
int shmrun_mpi_env(struct shmrun_mpi_env *e, char *why, size_t len);

/**
 * shmrun_hosts_check() - may this process run its part of @job? Called by a
 * run (and `shmrun stress` refuses hosts > 1 before it) before anything is
 * created.
 * @job:  a loaded job.
 * @host: receives this process's host index, 0..job->hosts-1 (0 when
 *        job->hosts is 1); also kept for shmrun_host_self().
 * @why, @len: on refusal, the message (what is wrong and what to run instead).
 * Return: 0; -ENOTSUP hosts > 1 in a build without MPI (SHMRUN_MPI=OFF or no
 * MPI found); -EINVAL hosts > 1 not started as that many MPI processes, hosts
 * = 1 started as one of several MPI processes, or the environment's MPI
 * variables are malformed.
 */
int shmrun_hosts_check(const struct shmrun_job *job, uint32_t *host, char *why, size_t len);

/**
 * shmrun_host_self() - this process's host index as the last successful
 * shmrun_hosts_check() found it (0 before any, and with hosts = 1): what the
 * launcher's locks, names and reports use. Inherited by forked workers.
 */
uint32_t shmrun_host_self(void);

/**
 * shmrun_hosts_where() - where @job's hosts value came from, for messages:
 * "PATH:LINE", "--set", "the environment (VAR)" or "the default".
 */
const char *shmrun_hosts_where(const struct shmrun_job *job, char *buf, size_t len);

#endif /* SHMRUN_RT_MULTIHOST_H */
