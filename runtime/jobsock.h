/*
 * runtime/jobsock.h: the job's Unix socket — how a process outside a running
 * job attaches to it (private to runtime/; jobsock.c; docs/observability.md).
 *
 * What it is for. `shmrun top`, `shmrun ps` and `shmrun stop` reach a running
 * job through a Unix stream socket its launcher serves, named after the job,
 * in the user's runtime directory:
 *
 *     $XDG_RUNTIME_DIR/shmrun/JOB.sock        (else /run/user/UID/shmrun/,
 *     $XDG_RUNTIME_DIR/shmrun/JOB.lock         else /tmp/shmrun-UID/, 0700, ours)
 *
 * The socket is mode 0600. JOB.lock is held with flock() for the launcher's
 * life and holds its pid: a second job of the same name is refused naming
 * the first one's pid, and a socket left by a killed launcher (its lock is
 * free) is replaced. The launcher removes both at exit.
 *
 * The protocol: the client connects, sends one request line and reads one
 * reply line ("ok ..." or "error: ..."); the launcher serves it from its
 * supervision loop, never blocking.
 *
 *     metrics\n  ->  "ok\n" with a read-only descriptor of the metrics block
 *                    (metrics.h) as SCM_RIGHTS; the client maps it PROT_READ
 *     stop\n     ->  "ok stopping\n": the launcher serves it as a stop signal
 *                    (a final checkpoint with checkpoint_dir); the client
 *                    waits for the launcher's pid to exit
 *
 * The idea is Aeron's AeronStat and Flink's REST endpoint: a reader outside
 * the job, which costs the job nothing but the descriptor.
 *
 * Rejected: a named file in /dev/shm for the counters (a killed job leaves it
 * behind, and its mode is the only access check); the socket's own existence
 * as the uniqueness test (a killed launcher leaves it: connect() would have
 * to tell a stale socket from a slow one).
 */
#ifndef SHMRUN_RT_JOBSOCK_H
#define SHMRUN_RT_JOBSOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct shmrun_metrics;

/* The launcher's end. */
struct jobsock {
	int listen_fd; /* -1 when not serving */
	int lock_fd;   /* JOB.lock, flocked */
	int metrics_fd; /* the metrics memfd to hand out read-only copies of (not owned) */
	char path[108]; /* JOB.sock (sun_path) */
	char lock_path[4096];
};

/*
 * jobsock_dir() - the directory jobs' sockets live in, made (0700) if
 * missing, into @buf (@len bytes). Return: 0; a negative errno, with a
 * one-line reason in @why (@why_len bytes), if none is usable (not ours, not
 * 0700, too long for sun_path).
 */
int jobsock_dir(char *buf, size_t len, char *why, size_t why_len);

/*
 * jobsock_open() - the launcher takes the name @job: locks JOB.lock, writes
 * its pid there, replaces a stale JOB.sock and listens (non-blocking, 0600).
 * @metrics_fd: the metrics memfd (not owned; must outlive @js).
 * Return: 0; -EEXIST when a live job holds the name, with "job NAME is
 * already running (pid N); ..." in @why; another negative errno with a reason.
 */
int jobsock_open(struct jobsock *js, const char *job, int metrics_fd, char *why, size_t why_len);

/*
 * jobsock_serve() - answer every client waiting now, without blocking.
 * Return: true if one asked to stop the job (the caller serves it as a stop
 * signal), else false.
 */
bool jobsock_serve(struct jobsock *js);

/* jobsock_close() - stop serving, remove JOB.sock and JOB.lock, release. */
void jobsock_close(struct jobsock *js);

/*
 * jobsock_metrics_fd() - the client's side: connect to job @job and get a
 * read-only descriptor of its metrics block. @job NULL: the only running job
 * of this user (an error naming them when there are several).
 * Return: the descriptor (the caller closes it); a negative errno with a
 * reason in @why: -ENOENT no such job running, -ECONNREFUSED a stale socket.
 */
int jobsock_metrics_fd(const char *job, char *why, size_t why_len);

/*
 * jobsock_request_stop() - ask job @job to stop (a final checkpoint with
 * checkpoint_dir). Return: the launcher's pid (> 0) to wait for; a negative
 * errno with a reason in @why.
 */
pid_t jobsock_request_stop(const char *job, char *why, size_t why_len);

/*
 * jobsock_list() - the names of this user's running jobs (whose locks are
 * held), sorted, into a malloc'd array of malloc'd strings in *@names.
 * Return: how many (>= 0); a negative errno.
 */
int jobsock_list(char ***names);

#endif /* SHMRUN_RT_JOBSOCK_H */
