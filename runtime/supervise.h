/*
 * runtime/supervise.h: `shmrun supervise` (supervise.c), the outer restart
 * loop of a multi-host job (docs/multihost.md "Failures"; private to
 * runtime/). The command is shmrun_supervise_main(); the status rule it
 * restarts by is shmrun_supervise_verdict(), declared here so that
 * tests/unit/check_supervise.c can pin it.
 */
#ifndef SHMRUN_RT_SUPERVISE_H
#define SHMRUN_RT_SUPERVISE_H

#include <stdbool.h>
#include <stddef.h>

/* The exit status the launcher of a multi-host job ends with when a restart
 * from the last complete checkpoint may cure what happened (a worker or a
 * peer host died or hung): EX_TEMPFAIL of <sysexits.h>. */
#define SHMRUN_EXIT_RESTARTABLE 75

/* Defaults of --restarts and --backoff (docs/shmrun.1.md "shmrun supervise"). */
#define SHMRUN_SUPERVISE_RESTARTS	10	       /* as [job] restart_attempts */
#define SHMRUN_SUPERVISE_BACKOFF_NS	1000000000ull  /* 1 s, doubling per restart */
#define SHMRUN_SUPERVISE_BACKOFF_CAP_NS 60000000000ull /* at most 60 s (or --backoff) */

/* What a COMMAND's end calls for (shmrun_supervise_verdict()). */
enum shmrun_supervise_verdict {
	SHMRUN_SV_DONE,	   /* exit 0 */
	SHMRUN_SV_RESTART, /* rerun it (a restart may cure it) */
	SHMRUN_SV_FINAL,   /* a failure a rerun would repeat, or a stop: pass it on */
};

/*
 * shmrun_supervise_verdict() - whether a COMMAND that ended with wait status
 * @wstatus (waitpid(2)'s) is rerun, when `shmrun supervise` itself was not
 * signalled (a signal to supervise is never followed by a rerun).
 * @wstatus: the wait status of a process that exited or was killed.
 * @why: receives a short phrase saying how it ended and why that verdict
 *       ("exited with status 75 (restartable)", "was killed by SIGKILL",
 *       "exited with status 137: a process was killed by SIGKILL"); at most
 *       @len - 1 bytes, NUL-terminated (cut short if @len is too small).
 * @len: the size of @why in bytes (>= 1).
 *
 * The rule: exit 0 is done. Exit 75 (SHMRUN_EXIT_RESTARTABLE: the launcher of a
 * multi-host job saw a worker or a peer host die or hang) restarts. Death by
 * a signal S restarts, and so does exit status 128+S for S in 1..64, which is
 * how Open MPI 4.1's mpirun (and a shell) reports a process killed by S (a
 * rank kill -9'd: mpirun exits 137) — except when a restart would only
 * repeat it or the signal was a request: SIGXFSZ and SIGXCPU (a resource limit,
 * as the launcher's own restart rule), SIGINT, SIGTERM and SIGHUP (a stop
 * asked by someone: shmrun dies by the stop signal it served without a
 * final checkpoint), and SIGPIPE (the reader of the output went away). Every
 * other status (1 a failed job, 2 a refused start, mpirun's 1 after it was
 * itself signalled, 126/127 a command that cannot run) is final.
 * Return: the verdict.
 */
enum shmrun_supervise_verdict shmrun_supervise_verdict(int wstatus, char *why, size_t len);

/*
 * shmrun_supervise_main() - `shmrun supervise [--restarts N] [--backoff DUR]
 * [--] COMMAND [ARG]...` (docs/shmrun.1.md).
 * @argc, @argv: the arguments after "shmrun"; @argv[0] is "supervise".
 * Call from the main thread of a process that runs nothing else: it blocks
 * SIGINT, SIGTERM, SIGHUP and SIGCHLD, forks and waits for its own children.
 * Return: the exit status: COMMAND's when it ended for good (also after
 * --restarts reruns, with a message; 128+S when it was killed by signal S);
 * 2 bad usage; 126 or 127 when COMMAND cannot be executed (not found, not
 * executable), 1 when no process can be forked. When supervise was stopped
 * by a signal and COMMAND then died by a signal, or when the signal came
 * between two runs, it does not return: the process dies by that signal
 * (shmrun_die_by_signal()).
 */
int shmrun_supervise_main(int argc, char **argv);

#endif /* SHMRUN_RT_SUPERVISE_H */
