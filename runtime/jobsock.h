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
 * A job's name is a file name here: [job] name allows letters, digits, '_',
 * '-' and '.' (at most 64), and jobsock_open() refuses anything else (a '/',
 * "." or "..", too long). A directory so long that DIR/JOB.sock does not fit
 * sun_path (108 bytes) is reached through /proc/self/fd/N/JOB.sock, N an
 * O_PATH descriptor of it (as systemd's connect_unix_path() does), so no
 * runtime directory is too long.
 *
 * Rejected: a named file in /dev/shm for the counters (a killed job leaves it
 * behind, and its mode is the only access check); the socket's own existence
 * as the uniqueness test (a killed launcher leaves it: connect() would have
 * to tell a stale socket from a slow one); reading /proc/locks to tell a held
 * lock (on overlayfs and in other mount namespaces its device and inode are
 * not those stat() sees): a client probes the lock with a shared flock() it
 * drops at once, and the launcher retries a refused lock for
 * JOBSOCK_PROBE_RETRY_MS so that a probe never refuses it.
 */
#ifndef SHMRUN_RT_JOBSOCK_H
#define SHMRUN_RT_JOBSOCK_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Longest job name: [job] name (MAX_NAME_LEN in conf_internal.h, 64) and,
 * with hosts > 1, the launcher's ".hH" suffix (at most ".h1023"). */
#define JOBSOCK_NAME_MAX 72
/* Clients served at once; a further one is told "error: busy". */
#define JOBSOCK_CLIENTS 8
/* A client that has not sent its request line within this is dropped, ms. */
#define JOBSOCK_REQUEST_MS 5000
/* How long a client waits for the launcher's answer, ms: the launcher serves
 * its socket once per supervision tick (<= 100 ms), but not while it starts
 * workers or sleeps a restart's backoff (<= 3.2 s). */
#define JOBSOCK_REPLY_MS 10000
/* How long the launcher retries a lock a client's probe holds, ms. */
#define JOBSOCK_PROBE_RETRY_MS 200

/* One client of the launcher, waiting for its request line. */
struct jobsock_client {
	int fd;		  /* -1: a free slot */
	uint32_t got;	  /* bytes of @buf received */
	int64_t deadline; /* CLOCK_MONOTONIC ns: dropped after it */
	char buf[32];
};

/*
 * The launcher's end. Zero-initialised it is closed (@open false): jobsock_close()
 * and jobsock_serve() do nothing then.
 */
struct jobsock {
	bool open;	/* jobsock_open() succeeded, jobsock_close() not yet */
	int listen_fd;	/* JOB.sock, non-blocking */
	int lock_fd;	/* JOB.lock, flocked (LOCK_EX) */
	int dir_fd;	/* the directory, O_PATH: every name is reached through it */
	int metrics_ro; /* a read-only descriptor of the metrics block; -1 none */
	char name[JOBSOCK_NAME_MAX + 1];
	char dir[PATH_MAX]; /* for messages */
	struct jobsock_client clients[JOBSOCK_CLIENTS];
};

/*
 * jobsock_dir() - the directory jobs' sockets live in, made (0700) if
 * missing, into @buf (@len bytes): $XDG_RUNTIME_DIR/shmrun when that
 * variable names an absolute path of a directory, else /run/user/UID/shmrun
 * when /run/user/UID is a directory of ours, else /tmp/shmrun-UID.
 * Return: 0; a negative errno, with a one-line reason in @why (@why_len
 * bytes), if the choice is not usable: -EPERM not ours (another user made
 * it: it could read our counters), -ENOTDIR not a directory (or a symbolic
 * link), -ENAMETOOLONG, or what mkdir() failed with.
 */
int jobsock_dir(char *buf, size_t len, char *why, size_t why_len);

/*
 * jobsock_dir_from() - jobsock_dir() with its three roots given, for tests:
 * @xdg the value of $XDG_RUNTIME_DIR (NULL: unset), @run_user the directory
 * holding one directory per uid ("/run/user"), @tmp the shared temporary
 * directory ("/tmp"). @create false: make nothing, -ENOENT if the chosen
 * directory does not exist (no job runs). Return: as jobsock_dir().
 */
int jobsock_dir_from(const char *xdg, const char *run_user, const char *tmp, bool create, char *buf,
		     size_t len, char *why, size_t why_len);

/*
 * jobsock_name_ok() - whether @job can name the job's files: 1 to
 * JOBSOCK_NAME_MAX bytes, no '/', not "." or "..". Every [job] name is.
 */
bool jobsock_name_ok(const char *job);

/*
 * jobsock_open() - the launcher takes the name @job: locks JOB.lock, writes
 * its pid there, replaces a stale JOB.sock and listens (non-blocking, 0600
 * whatever the umask). Every descriptor is close-on-exec; a forked worker
 * drops them with jobsock_forget().
 * @metrics_fd: the metrics memfd, or -1 (SHMRUN_COUNTERS=off: "metrics" is
 * answered with an error); not owned: a read-only descriptor of it is
 * opened here (/proc/self/fd/N, O_RDONLY) and handed out.
 * Return: 0; -EEXIST when a live job holds the name, with "job NAME is
 * already running (pid N); ..." in @why; -EINVAL a name jobsock_name_ok()
 * refuses; another negative errno with a reason (the directory, socket(),
 * bind(), the lock file).
 */
int jobsock_open(struct jobsock *js, const char *job, int metrics_fd, char *why, size_t why_len);

/*
 * jobsock_set_metrics() - hand out read-only descriptors of the metrics memfd
 * @metrics_fd (not owned; -1: none) from now on, when jobsock_open() was
 * given -1 because the block did not exist yet (the launcher takes the name
 * before it makes the block). Return: 0; a negative errno of open() (the
 * job is served without counters).
 */
int jobsock_set_metrics(struct jobsock *js, int metrics_fd);

/*
 * jobsock_serve() - accept every client waiting now and answer each whose
 * request line has come, without blocking (the launcher's supervision tick).
 * Return: true if one asked to stop the job (the caller serves it as a stop
 * signal), else false.
 */
bool jobsock_serve(struct jobsock *js);

/* jobsock_close() - stop serving, remove JOB.sock and JOB.lock, release. */
void jobsock_close(struct jobsock *js);

/*
 * jobsock_forget() - in a child forked by the launcher (a worker): close this
 * process's copies of the open jobsock's descriptors, removing nothing, so
 * the lock dies with the launcher alone.
 */
void jobsock_forget(void);

/*
 * jobsock_metrics_fd() - the client's side: connect to job @job and get a
 * read-only descriptor of its metrics block. @job NULL: the only running job
 * of this user (an error naming them when there are several).
 * Return: the descriptor (the caller closes it); a negative errno with a
 * reason in @why: -ENOENT no such job running (the reason lists those that
 * are), -ECONNREFUSED a stale socket (its launcher was killed), -EINVAL
 * several jobs run and @job is NULL, or a bad name, -EPROTO an unexpected
 * answer (-ENODATA: the job runs without counters), -ETIMEDOUT no answer
 * within JOBSOCK_REPLY_MS.
 */
int jobsock_metrics_fd(const char *job, char *why, size_t why_len);

/*
 * jobsock_request_stop() - ask job @job to stop (a final checkpoint with
 * checkpoint_dir). @pidfd: if not NULL, receives a pidfd of the launcher
 * (pidfd_open()), opened before the request is sent, so that waiting on it
 * cannot wait on another process that reused the pid; the caller closes it.
 * Return: the launcher's pid (> 0, from SO_PEERCRED) to wait for; a negative
 * errno with a reason in @why, as jobsock_metrics_fd().
 */
pid_t jobsock_request_stop(const char *job, int *pidfd, char *why, size_t why_len);

/*
 * jobsock_list() - the names of this user's running jobs (whose locks are
 * held), sorted, into a malloc'd array of malloc'd strings in *@names
 * (free with jobsock_list_free()).
 * Return: how many (>= 0); a negative errno.
 */
int jobsock_list(char ***names);

/* jobsock_list_free() - free @n names of jobsock_list() or jobsock_list_hosts(). */
void jobsock_list_free(char **names, int n);

/*
 * Multi-host jobs ([job] hosts > 1, docs/multihost.md): host K's launcher
 * serves the name NAME.hK, K the host index in decimal (launcher.c), so the
 * hosts of one job that run on this machine (one on a cluster, several when
 * "hosts" share a box) are NAME.h0, NAME.h1, ... The functions below let
 * `shmrun stop NAME`, `ps` and `top NAME` find and group them. A one-host job
 * may itself be named like that ("a.h1"); a running job named exactly NAME
 * is NAME itself, and callers that can read the metrics block check its
 * hosts and host fields.
 */

/* Hosts of a multi-host job, at most (SHMRUN_MAX_HOSTS, multihost.h). */
#define JOBSOCK_MAX_HOSTS 1024

/*
 * jobsock_host_of() - the host index K when @name is "@job.hK" (K in
 * decimal, no leading zero, < JOBSOCK_MAX_HOSTS), else -1 (also for NULL or
 * an empty @job).
 */
int jobsock_host_of(const char *name, const char *job);

/*
 * jobsock_base_len() - how many bytes of @name name the job: its length
 * less a ".hK" host suffix (as jobsock_host_of() reads it), else its whole
 * length. "wc.h1" -> 2, "wc" -> 2, "wc.h01" -> 6.
 */
size_t jobsock_base_len(const char *name);

/*
 * jobsock_name_cmp() - the order `shmrun ps` lists names in: by job
 * (jobsock_base_len() bytes), then a job itself before its hosts, and its
 * hosts by index as numbers (wc.h2 before wc.h10). A total order, for qsort.
 * Return: < 0, 0, > 0 as strcmp().
 */
int jobsock_name_cmp(const char *a, const char *b);

/*
 * jobsock_list_hosts() - this machine's hosts of the multi-host job @job:
 * the running jobs named "@job.hK", ordered by K, into a malloc'd array of
 * malloc'd strings in *@names (free with jobsock_list_free(); NULL when
 * none).
 * Return: how many (>= 0); a negative errno of jobsock_list().
 */
int jobsock_list_hosts(const char *job, char ***names);

/*
 * jobsock_pid() - the pid of job @job's launcher, from its lock file.
 * Return: the pid; -ENOENT if the job is not running.
 */
pid_t jobsock_pid(const char *job);

/* The commands (jobs_cmd.c): argv[0] is the command's name. Return: the exit status. */
int shmrun_jobs_ps(int argc, char **argv);   /* shmrun ps [--json] */
int shmrun_jobs_stop(int argc, char **argv); /* shmrun stop [--timeout S] JOB */

#endif /* SHMRUN_RT_JOBSOCK_H */
