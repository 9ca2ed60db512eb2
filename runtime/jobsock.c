/*
 * runtime/jobsock.c: the job's Unix socket (jobsock.h is the contract): the
 * launcher's end (open, serve from the supervision tick, close) and the
 * client's (`shmrun ps`, `stop`, `top`).
 *
 * What it is for. A process outside a running job finds it by name and gets
 * from it, over one connection, either a read-only descriptor of its metrics
 * block (SCM_RIGHTS) or a stop. The launcher never blocks on a client: the
 * listening socket and every accepted one are non-blocking, a client's
 * request line is collected across ticks in a slot of js->clients, and a
 * client that sends nothing is dropped after JOBSOCK_REQUEST_MS.
 *
 *     DIR/                 0700, ours ($XDG_RUNTIME_DIR/shmrun, ...)
 *       JOB.lock           0600, flock(LOCK_EX) by the launcher, "PID\n"
 *       JOB.sock           0600, listening
 *
 * Invariants:
 *   - JOB.sock exists only while JOB.lock is held by the process that made
 *     it, or after that process was killed (stale): whoever takes the lock
 *     owns the name, and removes a JOB.sock it finds before binding its own.
 *   - The lock held is the file the name JOB.lock names: a launcher that
 *     locked a file another launcher unlinked meanwhile (it was ending)
 *     drops it and tries again, so two launchers never hold "the" lock.
 *   - The launcher removes JOB.sock and then JOB.lock, then drops the lock:
 *     a new launcher of the same name finds either a held lock or none.
 *   - The descriptor handed out is opened O_RDONLY: a client can map it
 *     PROT_READ only, and cannot resize it (the memfd is sealed).
 *   - A peer of another uid than ours (or root) is refused (SO_PEERCRED),
 *     beyond the directory's 0700.
 *
 * Rejected: see jobsock.h; also a thread in the launcher serving the socket
 * (the supervision tick is frequent enough for a request a second, and a
 * thread would share the launcher's signal mask and fork() with it).
 */
#include "jobsock.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "multihost.h"
#include "shmrun/runtime.h"
#include "util.h"

static_assert(JOBSOCK_MAX_HOSTS == SHMRUN_MAX_HOSTS, "a host index fits a job socket's name");

/* The open jobsock of this process (jobsock_forget()). */
static struct jobsock *current;

static void say(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!why || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
}

bool jobsock_name_ok(const char *job)
{
	size_t n = job ? strlen(job) : 0;

	return n >= 1 && n <= JOBSOCK_NAME_MAX && !strchr(job, '/') && strcmp(job, ".") != 0 &&
	       strcmp(job, "..") != 0;
}

/*
 * Whether @path is a directory of ours (not a symbolic link to one), mode
 * 0700. @fix: make the mode 0700 if it is ours with another. Return: 0;
 * -ENOENT; -ENOTDIR; -EPERM (another uid), with a reason.
 */
static int check_dir(const char *path, bool fix, char *why, size_t len)
{
	struct stat st;

	if (lstat(path, &st) < 0) {
		int err = -errno;

		say(why, len, "%s: %s", path, strerror(errno));
		return err;
	}
	if (!S_ISDIR(st.st_mode)) {
		say(why, len, "%s is not a directory%s; remove it or set XDG_RUNTIME_DIR", path,
		    S_ISLNK(st.st_mode) ? " (a symbolic link)" : "");
		return -ENOTDIR;
	}
	if (st.st_uid != geteuid()) {
		say(why, len,
		    "%s belongs to uid %u, not to us (uid %u): another user could read the "
		    "jobs' counters; remove it or set XDG_RUNTIME_DIR",
		    path, (unsigned)st.st_uid, (unsigned)geteuid());
		return -EPERM;
	}
	if ((st.st_mode & 07777) != 0700 && fix && chmod(path, 0700) < 0) {
		int err = -errno;

		say(why, len, "%s: cannot make it mode 0700: %s", path, strerror(errno));
		return err;
	}
	return 0;
}

/* Whether @path is a directory owned by us (the /run/user/UID test). */
static bool our_dir(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid();
}

int jobsock_dir_from(const char *xdg, const char *run_user, const char *tmp, bool create, char *buf,
		     size_t len, char *why, size_t why_len)
{
	char base[PATH_MAX];
	int n;

	if (xdg && xdg[0] == '/' && our_dir(xdg))
		n = snprintf(buf, len, "%s/shmrun", xdg);
	else if (snprintf(base, sizeof(base), "%s/%u", run_user, (unsigned)geteuid()) <
		     (int)sizeof(base) &&
		 our_dir(base))
		n = snprintf(buf, len, "%s/shmrun", base);
	else
		n = snprintf(buf, len, "%s/shmrun-%u", tmp, (unsigned)geteuid());
	if (n < 0 || (size_t)n >= len) {
		say(why, why_len, "the jobs' directory is too long (%d bytes)", n);
		return -ENAMETOOLONG;
	}
	if (create && mkdir(buf, 0700) < 0 && errno != EEXIST) {
		int err = -errno;

		say(why, why_len, "cannot make the jobs' directory %s: %s", buf, strerror(errno));
		return err;
	}
	/* made or found: ours, and (the launcher's) 0700 whatever the umask */
	return check_dir(buf, create, why, why_len);
}

int jobsock_dir(char *buf, size_t len, char *why, size_t why_len)
{
	return jobsock_dir_from(getenv("XDG_RUNTIME_DIR"), "/run/user", "/tmp", true, buf, len, why,
				why_len);
}

/* The jobs' directory for a client, which makes none: -ENOENT, no job runs. */
static int client_dir(char *buf, size_t len, char *why, size_t why_len)
{
	return jobsock_dir_from(getenv("XDG_RUNTIME_DIR"), "/run/user", "/tmp", false, buf, len,
				why, why_len);
}

/*
 * The sun_path of @name in the directory @dir (descriptor @dir_fd): DIR/NAME
 * when it fits, else /proc/self/fd/DIR_FD/NAME. Return: its length.
 */
static socklen_t sock_addr(struct sockaddr_un *sa, const char *dir, int dir_fd, const char *name)
{
	int n;

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	n = snprintf(sa->sun_path, sizeof(sa->sun_path), "%s/%s.sock", dir, name);
	if (n < 0 || (size_t)n >= sizeof(sa->sun_path))
		n = snprintf(sa->sun_path, sizeof(sa->sun_path), "/proc/self/fd/%d/%s.sock", dir_fd,
			     name);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)n + 1);
}

/* The pid written in the lock file @fd, or 0. */
static pid_t lock_file_pid(int fd)
{
	char b[24];
	ssize_t got = pread(fd, b, sizeof(b) - 1, 0);
	long p;

	if (got <= 0)
		return 0;
	b[got] = 0;
	p = strtol(b, NULL, 10);
	return p > 0 ? (pid_t)p : 0;
}

/*
 * Whether the lock file @name.lock in @dir_fd is held (a job runs): a shared
 * flock() probe, dropped at once. @pid: its holder's pid from the file (0 if
 * not written yet). Return: 1 held, 0 free or missing, negative errno.
 */
static int lock_held(int dir_fd, const char *lock_name, pid_t *pid)
{
	int fd = openat(dir_fd, lock_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	int held = 0;

	if (pid)
		*pid = 0;
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (flock(fd, LOCK_SH | LOCK_NB) < 0) {
		held = errno == EWOULDBLOCK ? 1 : -errno;
		/* written just after the holder took the lock: a moment's wait */
		for (int i = 0; held == 1 && pid && i < 50 && !(*pid = lock_file_pid(fd)); i++)
			usleep(1000);
	} else {
		flock(fd, LOCK_UN);
	}
	close(fd);
	return held;
}

/* Close a client slot. */
static void drop_client(struct jobsock_client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->got = 0;
}

static void close_fds(struct jobsock *js)
{
	for (int i = 0; i < JOBSOCK_CLIENTS; i++)
		drop_client(&js->clients[i]);
	if (js->listen_fd >= 0)
		close(js->listen_fd);
	if (js->metrics_ro >= 0)
		close(js->metrics_ro);
	if (js->lock_fd >= 0)
		close(js->lock_fd);
	if (js->dir_fd >= 0)
		close(js->dir_fd);
	js->listen_fd = js->metrics_ro = js->lock_fd = js->dir_fd = -1;
}

/*
 * Take @js->name's lock: JOB.lock opened (made 0600) and flocked, and still
 * the file of that name. Return: 0; -EEXIST with the holder's pid in @pid.
 */
static int take_lock(struct jobsock *js, const char *lock_name, pid_t *pid)
{
	int64_t give_up = shmrun_now_ns() + (int64_t)JOBSOCK_PROBE_RETRY_MS * 1000000;

	for (;;) {
		struct stat a, b;
		int fd =
		    openat(js->dir_fd, lock_name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);

		if (fd < 0)
			return -errno;
		if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			int err = errno;

			if (err != EWOULDBLOCK) {
				close(fd);
				return -err;
			}
			if (shmrun_now_ns() < give_up) { /* perhaps a client's probe */
				close(fd);
				usleep(10000);
				continue;
			}
			for (int i = 0; i < 50 && !(*pid = lock_file_pid(fd)); i++)
				usleep(1000);
			close(fd);
			return -EEXIST;
		}
		/* the file JOB.lock names now, not one its last holder unlinked */
		if (fstat(fd, &a) == 0 &&
		    fstatat(js->dir_fd, lock_name, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
		    a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
			js->lock_fd = fd;
			return 0;
		}
		close(fd);
	}
}

int jobsock_open(struct jobsock *js, const char *job, int metrics_fd, char *why, size_t why_len)
{
	char lock_name[JOBSOCK_NAME_MAX + 8], sock_name[JOBSOCK_NAME_MAX + 8], pidline[24];
	struct sockaddr_un sa;
	socklen_t salen;
	pid_t holder = 0;
	int err, n;

	memset(js, 0, sizeof(*js));
	js->listen_fd = js->lock_fd = js->dir_fd = js->metrics_ro = -1;
	for (int i = 0; i < JOBSOCK_CLIENTS; i++)
		js->clients[i].fd = -1;
	if (!jobsock_name_ok(job)) {
		say(why, why_len,
		    "job name '%s' cannot name its socket file: 1 to %d bytes, no '/', not '.' "
		    "or '..'",
		    job ? job : "", JOBSOCK_NAME_MAX);
		return -EINVAL;
	}
	snprintf(js->name, sizeof(js->name), "%s", job);
	snprintf(lock_name, sizeof(lock_name), "%s.lock", job);
	snprintf(sock_name, sizeof(sock_name), "%s.sock", job);
	err = jobsock_dir(js->dir, sizeof(js->dir), why, why_len);
	if (err)
		return err;
	js->dir_fd = open(js->dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (js->dir_fd < 0) {
		err = -errno;
		say(why, why_len, "%s: %s", js->dir, strerror(errno));
		goto err_close;
	}
	err = take_lock(js, lock_name, &holder);
	if (err == -EEXIST) {
		char pid[24] = "unknown";

		if (holder > 0)
			snprintf(pid, sizeof(pid), "%d", (int)holder);
		say(why, why_len,
		    "job %s is already running (pid %s); stop it (shmrun stop %s) or give this "
		    "one another [job] name",
		    job, pid, job);
		goto err_close;
	}
	if (err) {
		say(why, why_len, "%s/%s: cannot lock: %s", js->dir, lock_name, strerror(-err));
		goto err_close;
	}
	/* 0600 whatever the umask; then the holder's pid, for a refused job's message */
	n = snprintf(pidline, sizeof(pidline), "%d\n", (int)getpid());
	if (fchmod(js->lock_fd, 0600) < 0 || ftruncate(js->lock_fd, 0) < 0 ||
	    pwrite(js->lock_fd, pidline, (size_t)n, 0) != n) {
		err = -errno;
		say(why, why_len, "%s/%s: %s", js->dir, lock_name, strerror(errno));
		goto err_unlock;
	}
	/* ours now: a JOB.sock here was left by a launcher that is gone */
	if (unlinkat(js->dir_fd, sock_name, 0) == 0)
		shmrun_log(SHMRUN_LOG_INFO,
			   "job %s: replaced the socket %s/%s left by a launcher that is gone", job,
			   js->dir, sock_name);
	js->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (js->listen_fd < 0) {
		err = -errno;
		say(why, why_len, "socket: %s", strerror(errno));
		goto err_unlock;
	}
	salen = sock_addr(&sa, js->dir, js->dir_fd, job);
	if (bind(js->listen_fd, (struct sockaddr *)&sa, salen) < 0) {
		err = -errno;
		say(why, why_len, "%s/%s: bind: %s", js->dir, sock_name, strerror(errno));
		goto err_unlock;
	}
	/* before listen(): nobody connects while the umask's mode is on it */
	if (fchmodat(js->dir_fd, sock_name, 0600, 0) < 0 || listen(js->listen_fd, 16) < 0) {
		err = -errno;
		say(why, why_len, "%s/%s: %s", js->dir, sock_name, strerror(errno));
		goto err_unlink;
	}
	js->open = true;
	err = jobsock_set_metrics(js, metrics_fd);
	if (err) {
		js->open = false;
		say(why, why_len, "a read-only descriptor of the metrics block: %s",
		    strerror(-err));
		goto err_unlink;
	}
	current = js;
	return 0;

err_unlink:
	unlinkat(js->dir_fd, sock_name, 0);
err_unlock:
	unlinkat(js->dir_fd, lock_name, 0);
err_close:
	close_fds(js);
	return err;
}

int jobsock_set_metrics(struct jobsock *js, int metrics_fd)
{
	char self[64];

	if (!js->open)
		return 0;
	if (js->metrics_ro >= 0)
		close(js->metrics_ro);
	js->metrics_ro = -1;
	if (metrics_fd < 0)
		return 0;
	/* a new open file description, read-only: mmap(PROT_WRITE) of it fails */
	snprintf(self, sizeof(self), "/proc/self/fd/%d", metrics_fd);
	js->metrics_ro = open(self, O_RDONLY | O_CLOEXEC);
	return js->metrics_ro < 0 ? -errno : 0;
}

/* Send @line, with @fd as SCM_RIGHTS if >= 0; never blocks (the reply is short). */
static void reply(int sock, const char *line, int fd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = (void *)line, .iov_len = strlen(line)};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};

	if (fd >= 0) {
		struct cmsghdr *c;

		memset(&u, 0, sizeof(u));
		msg.msg_control = u.buf;
		msg.msg_controllen = sizeof(u.buf);
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	(void)sendmsg(sock, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* Answer the request line in @c. Return: true for "stop". */
static bool answer(struct jobsock *js, struct jobsock_client *c)
{
	bool stop = false;

	c->buf[strcspn(c->buf, "\r\n")] = 0;
	if (strcmp(c->buf, "metrics") == 0) {
		if (js->metrics_ro >= 0)
			reply(c->fd, "ok\n", js->metrics_ro);
		else
			reply(c->fd,
			      "error: this job runs without counters (SHMRUN_COUNTERS=off)\n", -1);
	} else if (strcmp(c->buf, "stop") == 0) {
		reply(c->fd, "ok stopping\n", -1);
		shmrun_log(SHMRUN_LOG_INFO, "job %s: a stop was requested over its socket",
			   js->name);
		stop = true;
	} else {
		reply(c->fd, "error: unknown request (metrics, stop)\n", -1);
	}
	drop_client(c);
	return stop;
}

/* Read what client @c sent; answer a whole line. Return: true for "stop". */
static bool poll_client(struct jobsock *js, struct jobsock_client *c, int64_t now)
{
	for (;;) {
		ssize_t got =
		    recv(c->fd, c->buf + c->got, sizeof(c->buf) - 1 - c->got, MSG_DONTWAIT);

		if (got > 0) {
			c->got += (uint32_t)got;
			c->buf[c->got] = 0;
			if (memchr(c->buf, '\n', c->got))
				return answer(js, c);
			if (c->got == sizeof(c->buf) - 1) {
				reply(c->fd, "error: request too long\n", -1);
				drop_client(c);
				return false;
			}
			continue;
		}
		if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (now > c->deadline)
				drop_client(c);
			return false;
		}
		if (got < 0 && errno == EINTR)
			continue;
		drop_client(c); /* closed (a probe) or reset */
		return false;
	}
}

bool jobsock_serve(struct jobsock *js)
{
	int64_t now = shmrun_now_ns();
	bool stop = false;

	if (!js || !js->open)
		return false;
	for (;;) {
		struct ucred cred;
		socklen_t len = sizeof(cred);
		int fd = accept4(js->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		int slot = -1;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			break; /* EAGAIN: nobody else waits; EMFILE and the like: next tick */
		}
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 ||
		    (cred.uid != geteuid() && cred.uid != 0)) {
			reply(fd, "error: not your job\n", -1);
			close(fd);
			continue;
		}
		for (int i = 0; i < JOBSOCK_CLIENTS && slot < 0; i++)
			if (js->clients[i].fd < 0)
				slot = i;
		if (slot < 0) {
			reply(fd, "error: busy, try again\n", -1);
			close(fd);
			continue;
		}
		js->clients[slot].fd = fd;
		js->clients[slot].got = 0;
		js->clients[slot].deadline = now + (int64_t)JOBSOCK_REQUEST_MS * 1000000;
	}
	for (int i = 0; i < JOBSOCK_CLIENTS; i++)
		if (js->clients[i].fd >= 0 && poll_client(js, &js->clients[i], now))
			stop = true;
	return stop;
}

void jobsock_close(struct jobsock *js)
{
	char name[JOBSOCK_NAME_MAX + 8];

	if (!js || !js->open)
		return;
	snprintf(name, sizeof(name), "%s.sock", js->name);
	unlinkat(js->dir_fd, name, 0);
	snprintf(name, sizeof(name), "%s.lock", js->name);
	unlinkat(js->dir_fd, name, 0); /* then the lock goes with its descriptor */
	close_fds(js);
	js->open = false;
	if (current == js)
		current = NULL;
}

void jobsock_forget(void)
{
	if (!current)
		return;
	close_fds(current);
	current->open = false;
	current = NULL;
}

/* --- the client's side --- */

/* The names of running jobs, for a message: "a, b" or "none". */
static void running_list(char *buf, size_t len)
{
	char **names;
	int n = jobsock_list(&names);

	snprintf(buf, len, "none");
	for (int i = 0; i < n; i++)
		snprintf(buf + (i ? strlen(buf) : 0), len - (i ? strlen(buf) : 0), "%s%s",
			 i ? ", " : "", names[i]);
	if (n > 0)
		jobsock_list_free(names, n);
}

/*
 * Connect to job @job. Return: the socket (blocking, with
 * JOBSOCK_REPLY_MS timeouts); -ENOENT, -ECONNREFUSED, ... with a reason.
 */
static int connect_job(const char *job, char *why, size_t len)
{
	char dir[PATH_MAX], running[512];
	struct sockaddr_un sa;
	struct timeval tv = {JOBSOCK_REPLY_MS / 1000, (JOBSOCK_REPLY_MS % 1000) * 1000};
	int dir_fd, fd, err;

	if (!jobsock_name_ok(job)) {
		say(why, len, "'%s' is not a job name", job ? job : "");
		return -EINVAL;
	}
	err = client_dir(dir, sizeof(dir), why, len);
	if (err == -ENOENT)
		goto not_running;
	if (err)
		return err;
	dir_fd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dir_fd < 0) {
		err = -errno;
		say(why, len, "%s: %s", dir, strerror(errno));
		return err;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		err = -errno;
		close(dir_fd);
		say(why, len, "socket: %s", strerror(errno));
		return err;
	}
	if (connect(fd, (struct sockaddr *)&sa, sock_addr(&sa, dir, dir_fd, job)) < 0) {
		err = -errno;
		close(fd);
		close(dir_fd);
		if (err == -ENOENT)
			goto not_running;
		if (err == -ECONNREFUSED) {
			say(why, len,
			    "job %s is not running: %s/%s.sock was left by a launcher that was "
			    "killed (the next run of %s replaces it)",
			    job, dir, job, job);
			return err;
		}
		say(why, len, "job %s: connect to %s/%s.sock: %s", job, dir, job, strerror(-err));
		return err;
	}
	close(dir_fd);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	return fd;

not_running:
	running_list(running, sizeof(running));
	say(why, len, "no job named %s is running (running: %s)", job, running);
	return -ENOENT;
}

/*
 * Send @req on @fd and read the one-line answer into @line (@len bytes),
 * with a descriptor sent along in *@fd_out (-1 if none; may be NULL: one is
 * closed). Return: 0; -ETIMEDOUT, -ECONNRESET (the launcher went away).
 */
static int request(int fd, const char *req, char *line, size_t len, int *fd_out)
{
	size_t got = 0;

	if (fd_out)
		*fd_out = -1;
	if (send(fd, req, strlen(req), MSG_NOSIGNAL) != (ssize_t)strlen(req))
		return errno == EAGAIN ? -ETIMEDOUT : -ECONNRESET;
	while (got < len - 1) {
		union {
			char buf[CMSG_SPACE(sizeof(int) * 4)];
			struct cmsghdr align;
		} u;
		struct iovec iov = {.iov_base = line + got, .iov_len = len - 1 - got};
		struct msghdr msg = {.msg_iov = &iov,
				     .msg_iovlen = 1,
				     .msg_control = u.buf,
				     .msg_controllen = sizeof(u.buf)};
		ssize_t n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
				int rfd;

				memcpy(&rfd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
				if (fd_out && *fd_out < 0)
					*fd_out = rfd;
				else
					close(rfd);
			}
		}
		if (n == 0)
			break;
		got += (size_t)n;
		line[got] = 0;
		if (memchr(line, '\n', got))
			break;
	}
	line[got] = 0;
	if (!memchr(line, '\n', got)) {
		if (fd_out && *fd_out >= 0)
			close(*fd_out);
		if (fd_out)
			*fd_out = -1;
		return -ECONNRESET;
	}
	line[strcspn(line, "\n")] = 0;
	return 0;
}

/* A message for a failed request(). */
static void request_failed(const char *job, int err, char *why, size_t len)
{
	if (err == -ETIMEDOUT)
		say(why, len, "job %s did not answer within %d s", job, JOBSOCK_REPLY_MS / 1000);
	else
		say(why, len, "job %s ended before it answered", job);
}

int jobsock_metrics_fd(const char *job, char *why, size_t why_len)
{
	char line[128], only[JOBSOCK_NAME_MAX + 1];
	int fd, mfd, err;

	if (!job) {
		char **names;
		int n = jobsock_list(&names);

		if (n < 0) {
			say(why, why_len, "cannot list the running jobs: %s", strerror(-n));
			return n;
		}
		if (n == 0) {
			say(why, why_len, "no job is running");
			return -ENOENT;
		}
		if (n > 1) {
			char list[512];

			running_list(list, sizeof(list));
			jobsock_list_free(names, n);
			say(why, why_len, "%d jobs are running (%s): name one", n, list);
			return -EINVAL;
		}
		snprintf(only, sizeof(only), "%s", names[0]);
		jobsock_list_free(names, n);
		job = only;
	}
	fd = connect_job(job, why, why_len);
	if (fd < 0)
		return fd;
	err = request(fd, "metrics\n", line, sizeof(line), &mfd);
	close(fd);
	if (err) {
		request_failed(job, err, why, why_len);
		return err;
	}
	if (strcmp(line, "ok") != 0 || mfd < 0) {
		if (mfd >= 0)
			close(mfd);
		say(why, why_len, "job %s: %s", job, line);
		return strstr(line, "without counters") ? -ENODATA : -EPROTO;
	}
	return mfd;
}

pid_t jobsock_request_stop(const char *job, int *pidfd, char *why, size_t why_len)
{
	struct ucred cred;
	socklen_t clen = sizeof(cred);
	char line[128];
	int fd, pfd = -1, err;

	if (pidfd)
		*pidfd = -1;
	fd = connect_job(job, why, why_len);
	if (fd < 0)
		return fd;
	/* the process that listens: the launcher (SO_PEERCRED of a connected socket) */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0 || cred.pid <= 0) {
		err = -errno;
		close(fd);
		say(why, why_len, "job %s: SO_PEERCRED: %s", job, strerror(errno));
		return err ? err : -EPROTO;
	}
	if (pidfd) {
		pfd = (int)syscall(SYS_pidfd_open, cred.pid, 0);
		if (pfd < 0) {
			err = -errno;
			close(fd);
			say(why, why_len, "job %s: pidfd_open(%d): %s", job, (int)cred.pid,
			    strerror(errno));
			return err;
		}
	}
	err = request(fd, "stop\n", line, sizeof(line), NULL);
	close(fd);
	if (!err && strncmp(line, "ok", 2) != 0) {
		say(why, why_len, "job %s: %s", job, line);
		err = -EPROTO;
	} else if (err) {
		request_failed(job, err, why, why_len);
	}
	if (err) {
		if (pfd >= 0)
			close(pfd);
		return err;
	}
	if (pidfd)
		*pidfd = pfd;
	return cred.pid;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int jobsock_list(char ***names)
{
	char dir[PATH_MAX];
	char **out = NULL;
	size_t cap = 0;
	int n = 0, err, dir_fd;
	struct dirent *e;
	DIR *d;

	*names = NULL;
	err = client_dir(dir, sizeof(dir), NULL, 0);
	if (err == -ENOENT)
		return 0;
	if (err)
		return err;
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	dir_fd = dirfd(d);
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);
		char *name;

		if (len <= 5 || strcmp(e->d_name + len - 5, ".lock") != 0 ||
		    len - 5 > JOBSOCK_NAME_MAX)
			continue;
		if (lock_held(dir_fd, e->d_name, NULL) != 1)
			continue;
		name = strndup(e->d_name, len - 5);
		if (!name || shmrun_grow(&out, &cap, (size_t)n + 1, sizeof(*out), 8)) {
			free(name);
			jobsock_list_free(out, n);
			closedir(d);
			return -ENOMEM;
		}
		out[n++] = name;
	}
	closedir(d);
	if (n)
		qsort(out, (size_t)n, sizeof(*out), by_name);
	*names = out;
	return n;
}

int jobsock_host_of(const char *name, const char *job)
{
	size_t n = job ? strlen(job) : 0;
	const char *k;
	long host = 0;

	if (!name || !n || strncmp(name, job, n) != 0 || strncmp(name + n, ".h", 2) != 0)
		return -1;
	k = name + n + 2;
	if (!*k || (k[0] == '0' && k[1])) /* "NAME.h", "NAME.h01": not the launcher's */
		return -1;
	for (; *k; k++) {
		if (*k < '0' || *k > '9')
			return -1;
		host = host * 10 + (*k - '0');
		if (host >= JOBSOCK_MAX_HOSTS)
			return -1;
	}
	return (int)host;
}

size_t jobsock_base_len(const char *name)
{
	const char *h = name ? strrchr(name, '.') : NULL;
	char base[JOBSOCK_NAME_MAX + 1];
	size_t n;

	if (!name)
		return 0;
	if (!h || h == name || (n = (size_t)(h - name)) > JOBSOCK_NAME_MAX)
		return strlen(name);
	memcpy(base, name, n);
	base[n] = 0;
	return jobsock_host_of(name, base) >= 0 ? n : strlen(name);
}

int jobsock_name_cmp(const char *a, const char *b)
{
	size_t la = jobsock_base_len(a), lb = jobsock_base_len(b);
	int c = strncmp(a, b, la < lb ? la : lb);
	long ha, hb;

	if (c)
		return c;
	if (la != lb)
		return la < lb ? -1 : 1;
	/* the same job: itself (no suffix) first, then its hosts by index */
	ha = a[la] ? strtol(a + la + 2, NULL, 10) : -1;
	hb = b[lb] ? strtol(b + lb + 2, NULL, 10) : -1;
	return ha < hb ? -1 : ha > hb;
}

static int by_host(const void *a, const void *b)
{
	return jobsock_name_cmp(*(char *const *)a, *(char *const *)b);
}

int jobsock_list_hosts(const char *job, char ***names)
{
	char **all;
	int n = jobsock_list(&all), k = 0;

	*names = NULL;
	if (n <= 0)
		return n;
	for (int i = 0; i < n; i++) {
		if (jobsock_host_of(all[i], job) >= 0)
			all[k++] = all[i];
		else
			free(all[i]);
	}
	if (!k) {
		free(all);
		return 0;
	}
	qsort(all, (size_t)k, sizeof(*all), by_host);
	*names = all;
	return k;
}

void jobsock_list_free(char **names, int n)
{
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

pid_t jobsock_pid(const char *job)
{
	char dir[PATH_MAX], lock_name[JOBSOCK_NAME_MAX + 8];
	pid_t pid = 0;
	int dir_fd, held;

	if (!jobsock_name_ok(job) || client_dir(dir, sizeof(dir), NULL, 0))
		return -ENOENT;
	dir_fd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dir_fd < 0)
		return -ENOENT;
	snprintf(lock_name, sizeof(lock_name), "%s.lock", job);
	held = lock_held(dir_fd, lock_name, &pid);
	close(dir_fd);
	return held == 1 && pid > 0 ? pid : -ENOENT;
}
