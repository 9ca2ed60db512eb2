/*
 * runtime/jobs_cmd.c: `shmrun ps` and `shmrun stop JOB` — managing this
 * user's running jobs through their sockets (jobsock.h), with what their
 * metrics blocks (metrics.h) say.
 *
 *     shmrun ps [--json]                 one line (object) per running job
 *     shmrun stop [--timeout SECONDS] JOB  stop one, wait for its launcher
 *
 * ps asks each job listed by jobsock_list() for its metrics block and prints
 * from it: the launcher's pid, workers, uptime (since the launcher made the
 * block), state, restarts, and the newest complete checkpoint's epoch and
 * age. A job that ended between the listing and the question is left out; a
 * job running without counters (SHMRUN_COUNTERS=off) shows its name and pid
 * only.
 *
 * stop takes the job's metrics descriptor first, then a pidfd of the
 * launcher (pidfd_open(): it is not our child, so waitpid() cannot wait for
 * it), then sends the stop, and polls the pidfd. The launcher's last act
 * before it exits is to store state and exit_status in the block, which our
 * mapping keeps readable after the job is gone: that is the job's result.
 * The launcher bounds its own stop (a final checkpoint within
 * checkpoint_timeout plus 5 s, else it stops without; without checkpoints,
 * SIGKILL 5 s after SIGTERM), so stop waits for it without a timeout unless
 * --timeout is given.
 *
 * Multi-host jobs ([job] hosts > 1): each host's launcher serves NAME.hK
 * (jobsock.h). ps lists a job's hosts here together by host index, with a
 * HOST column (K/H, from the block) when one is listed, and a host's own
 * worker count. `stop NAME`, when no job is named NAME, stops this machine's
 * hosts of job NAME (stop_hosts()): one stop request, to the lowest host,
 * since any host's stop stops the whole job and a second request during the
 * stop would stop at once without the final checkpoint; then it waits for
 * each of them.
 *
 * Exit status: ps 0 (also with no job; 1 if the directory cannot be read);
 * stop 0 if the job exited 0 (stopped at its final checkpoint), 1 if it
 * failed or ended another way, is not running, or --timeout passed; 2 bad
 * usage.
 *
 * Rejected: ps reading /proc for processes named shmrun (it would list
 * other users' jobs and jobs that serve no socket, and could not say a job's
 * name or state); the launcher answering "ok stopped at epoch N" once done
 * (a reply after the stop would keep the socket, and the client, until the
 * launcher's very end, and a killed launcher would answer nothing).
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "jobsock.h"
#include "metrics.h"
#include "util.h"

/* A usage error of `shmrun CMD`: one line, then where help is. Return: 2. */
static int usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage(const char *fmt, ...)
{
	va_list ap;

	fputs("shmrun: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry 'shmrun --help' for more information.\n", stderr);
	return 2;
}

static const char *state_name(uint32_t state)
{
	static const char *const names[] = {
	    [SHMRUN_JOB_STARTING] = "starting", [SHMRUN_JOB_RUNNING] = "running",
	    [SHMRUN_JOB_STOPPING] = "stopping", [SHMRUN_JOB_RESTARTING] = "restarting",
	    [SHMRUN_JOB_DONE] = "done",		[SHMRUN_JOB_FAILED] = "failed",
	};

	return state < sizeof(names) / sizeof(names[0]) && names[state] ? names[state] : "unknown";
}

/* A duration for a person: 0.4s, 42s, 5m03s, 2h05m, 3d04h. */
static void fmt_age(char *buf, size_t len, double s)
{
	uint64_t t = s > 0 ? (uint64_t)s : 0;

	if (s < 10)
		snprintf(buf, len, "%.1fs", s < 0 ? 0.0 : s);
	else if (t < 60)
		snprintf(buf, len, "%" PRIu64 "s", t);
	else if (t < 3600)
		snprintf(buf, len, "%" PRIu64 "m%02" PRIu64 "s", t / 60, t % 60);
	else if (t < 86400)
		snprintf(buf, len, "%" PRIu64 "h%02" PRIu64 "m", t / 3600, t / 60 % 60);
	else
		snprintf(buf, len, "%" PRIu64 "d%02" PRIu64 "h", t / 86400, t / 3600 % 24);
}

/* What ps knows of one job. */
struct job_row {
	const char *name;
	pid_t pid;
	bool counters; /* the rest is known */
	uint32_t workers, state;
	uint32_t host, hosts; /* multi-host: this launcher's host, the job's count; 0 and 1 */
	uint64_t restarts, ckpt_epoch;
	double uptime_s, ckpt_age_s; /* ckpt_age_s < 0: no checkpoint yet */
	const char *conf;
	char conf_buf[SHMRUN_METRICS_PATH_BYTES];
};

/* Fill @row for job @name. Return: 0; -ENOENT it ended meanwhile. */
static int read_row(const char *name, struct job_row *row)
{
	const struct shmrun_metrics *m;
	char why[512];
	int64_t now;
	int fd;

	memset(row, 0, sizeof(*row));
	row->name = name;
	row->ckpt_age_s = -1;
	row->hosts = 1;
	fd = jobsock_metrics_fd(name, why, sizeof(why));
	if (fd == -ENODATA) { /* SHMRUN_COUNTERS=off: name and pid only */
		row->pid = jobsock_pid(name);
		return row->pid > 0 ? 0 : -ENOENT;
	}
	if (fd < 0)
		return -ENOENT;
	m = shmrun_metrics_map(fd, why, sizeof(why));
	close(fd);
	if (!m) {
		fprintf(stderr, "shmrun ps: job %s: %s\n", name, why);
		row->pid = jobsock_pid(name);
		return row->pid > 0 ? 0 : -ENOENT;
	}
	/* now, not before the request: a checkpoint may complete while the
	 * launcher answers, and its age is never negative */
	now = shmrun_wall_ns();
	row->counters = true;
	row->pid = m->launcher_pid;
	row->workers = m->workers;
	row->hosts = m->hosts > 1 ? m->hosts : 1;
	row->host = m->hosts > 1 ? m->host : 0;
	if (row->hosts > 1 && m->workers_per_host)
		row->workers = m->workers_per_host; /* the block spans every host's */
	row->state = SHMRUN_METRIC(m->state);
	row->restarts = SHMRUN_METRIC(m->restarts);
	row->uptime_s = (double)(now - m->started_wall_ns) / 1e9;
	row->ckpt_epoch = SHMRUN_METRIC(m->ckpt_epoch);
	if (row->ckpt_epoch)
		row->ckpt_age_s = fmax(0, (double)(now - SHMRUN_METRIC(m->ckpt_wall_ns)) / 1e9);
	snprintf(row->conf_buf, sizeof(row->conf_buf), "%.*s", (int)sizeof(m->conf_path) - 1,
		 m->conf_path);
	row->conf = row->conf_buf;
	shmrun_metrics_unmap(m);
	return 0;
}

static json_t *row_json(const struct job_row *r)
{
	json_t *o = json_object();

	json_object_set_new(o, "job", json_string(r->name));
	json_object_set_new(o, "pid", json_integer(r->pid));
	if (!r->counters) {
		json_object_set_new(o, "counters", json_false());
		return o;
	}
	json_object_set_new(o, "counters", json_true());
	json_object_set_new(o, "conf", json_string(r->conf));
	json_object_set_new(o, "workers", json_integer(r->workers));
	json_object_set_new(o, "host", json_integer(r->host));
	json_object_set_new(o, "hosts", json_integer(r->hosts));
	json_object_set_new(o, "state", json_string(state_name(r->state)));
	json_object_set_new(o, "uptime_seconds", json_real(round(r->uptime_s * 1000) / 1000));
	json_object_set_new(o, "restarts", json_integer((json_int_t)r->restarts));
	if (r->ckpt_epoch) {
		json_t *c = json_object();

		json_object_set_new(c, "epoch", json_integer((json_int_t)r->ckpt_epoch));
		json_object_set_new(c, "age_seconds",
				    json_real(round(r->ckpt_age_s * 1000) / 1000));
		json_object_set_new(o, "last_checkpoint", c);
	} else {
		json_object_set_new(o, "last_checkpoint", json_null());
	}
	return o;
}

static int by_job_then_host(const void *a, const void *b)
{
	return jobsock_name_cmp(*(char *const *)a, *(char *const *)b);
}

int shmrun_jobs_ps(int argc, char **argv)
{
	bool json = false, hosts = false;
	struct job_row *rows;
	char **names;
	json_t *arr = NULL;
	int n, nrows = 0;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			json = true;
		else
			return usage("ps takes --json only, not '%s'", argv[i]);
	}
	n = jobsock_list(&names);
	if (n < 0) {
		fprintf(stderr, "shmrun ps: cannot list the running jobs: %s\n", strerror(-n));
		return 1;
	}
	/* a multi-host job's hosts here (NAME.h0, NAME.h1, ...) together, by index */
	if (n > 1)
		qsort(names, (size_t)n, sizeof(*names), by_job_then_host);
	rows = calloc(n ? (size_t)n : 1, sizeof(*rows));
	if (!rows) {
		jobsock_list_free(names, n);
		fprintf(stderr, "shmrun ps: out of memory\n");
		return 1;
	}
	for (int i = 0; i < n; i++) {
		if (read_row(names[i], &rows[nrows]))
			continue; /* ended since it was listed */
		hosts |= rows[nrows].hosts > 1;
		nrows++;
	}
	if (json)
		arr = json_array();
	else
		printf("%-20s %8s %7s %9s %-10s %8s %10s %9s%s\n", "JOB", "PID", "WORKERS",
		       "UPTIME", "STATE", "RESTARTS", "CKPT_EPOCH", "CKPT_AGE",
		       hosts ? "    HOST" : "");
	for (int i = 0; i < nrows; i++) {
		const struct job_row *r = &rows[i];
		char up[32], age[32], host[32] = "";

		if (json) {
			json_array_append_new(arr, row_json(r));
			continue;
		}
		/* HOST, when a multi-host job is listed: which host of how many */
		if (hosts && r->hosts > 1) {
			char of[24];

			snprintf(of, sizeof(of), "%u/%u", r->host, r->hosts);
			snprintf(host, sizeof(host), " %7s", of);
		} else if (hosts) {
			snprintf(host, sizeof(host), " %7s", "-");
		}
		if (!r->counters) {
			printf("%-20s %8d %7s %9s %-10s %8s %10s %9s%s\n", r->name, (int)r->pid,
			       "-", "-", "-", "-", "-", "-", host);
			continue;
		}
		fmt_age(up, sizeof(up), r->uptime_s);
		if (r->ckpt_epoch)
			fmt_age(age, sizeof(age), r->ckpt_age_s);
		else
			snprintf(age, sizeof(age), "-");
		printf("%-20s %8d %7u %9s %-10s %8" PRIu64 " ", r->name, (int)r->pid, r->workers,
		       up, state_name(r->state), r->restarts);
		if (r->ckpt_epoch)
			printf("%10" PRIu64 " %9s%s\n", r->ckpt_epoch, age, host);
		else
			printf("%10s %9s%s\n", "-", "-", host);
	}
	if (json) {
		char *out = json_dumps(arr, JSON_INDENT(2) | JSON_REAL_PRECISION(10));

		if (out)
			printf("%s\n", out);
		free(out);
		json_decref(arr);
	}
	free(rows);
	jobsock_list_free(names, n);
	return 0;
}

/* --timeout SECONDS: a positive number. Return: 0, or -1. */
static int parse_timeout(const char *s, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !(v > 0) || v > 1e9)
		return -1;
	*out = v;
	return 0;
}

/* How the job ended, from its metrics block (NULL: no counters). Return: the exit status. */
static int report_end(const char *job, const struct shmrun_metrics *m, pid_t pid)
{
	uint32_t state;
	int status;

	if (!m) {
		printf("job %s ended (its exit status is unknown: it runs without counters, "
		       "SHMRUN_COUNTERS=off)\n",
		       job);
		return 1;
	}
	state = SHMRUN_METRIC(m->state);
	status = SHMRUN_METRIC(m->exit_status);
	if (state != SHMRUN_JOB_DONE && state != SHMRUN_JOB_FAILED) {
		printf("job %s ended without saying how: its launcher (pid %d) was killed while "
		       "%s\n",
		       job, (int)pid, state_name(state));
		return 1;
	}
	if (status == 0 && m->checkpoint_interval_ns) {
		uint64_t epoch = SHMRUN_METRIC(m->ckpt_epoch);

		if (epoch)
			printf("job %s stopped at epoch %" PRIu64 "\n", job, epoch);
		else
			printf("job %s stopped\n", job);
		return 0;
	}
	if (status == 0) {
		printf("job %s ended\n", job);
		return 0;
	}
	if (status > 128)
		printf("job %s ended by %s without a final checkpoint%s (exit status %d)\n", job,
		       strsignal(status - 128),
		       m->checkpoint_interval_ns ? "" : " (it has no checkpoint_dir)", status);
	else
		printf("job %s failed (exit status %d)\n", job, status);
	return 1;
}

/* One host of a multi-host job that `stop NAME` waits for. */
struct host_stop {
	const char *name;		/* NAME.hK */
	const struct shmrun_metrics *m; /* its block, mapped before the stop; NULL: none */
	pid_t pid;			/* its launcher */
	int pidfd;			/* -1: not waited for (ended before, or not NAME's) */
	bool exited;
};

/* Whether block @m is of host of a multi-host job @job (a one-host job may be named "a.h1"). */
static bool block_of_host(const struct shmrun_metrics *m, const char *job)
{
	size_t n = strnlen(m->job, sizeof(m->job));

	return m->hosts > 1 && n == strlen(job) && memcmp(m->job, job, n) == 0;
}

/*
 * Take host @h->name's block and a pidfd of its launcher, before any stop is
 * sent. Return: 0; -1 it is not waited for (ended meanwhile, or not a host
 * of @job).
 */
static int host_attach(struct host_stop *h, const char *job)
{
	char why[1024];
	int fd = jobsock_metrics_fd(h->name, why, sizeof(why));

	h->pidfd = -1;
	if (fd >= 0) {
		h->m = shmrun_metrics_map(fd, why, sizeof(why));
		close(fd);
		if (!h->m)
			fprintf(stderr, "shmrun stop: job %s: %s; stopping it anyway\n", h->name,
				why);
	}
	if (h->m && !block_of_host(h->m, job)) {
		shmrun_metrics_unmap(h->m);
		h->m = NULL;
		return -1;
	}
	h->pid = h->m ? h->m->launcher_pid : jobsock_pid(h->name);
	if (h->pid <= 0)
		return -1;
	h->pidfd = (int)syscall(SYS_pidfd_open, h->pid, 0);
	/* still the launcher holding the name: not a pid reused since */
	if (h->pidfd >= 0 && jobsock_pid(h->name) == h->pid)
		return 0;
	if (h->pidfd >= 0)
		close(h->pidfd);
	h->pidfd = -1;
	return -1;
}

/*
 * `shmrun stop NAME` of a multi-host job: this machine's hosts of it, @names
 * (@n, NAME.h0 first). The stop goes to one of them, the lowest: any host's
 * launcher stops the whole job (its gateway passes the request to host 0,
 * which takes the final checkpoint for all) — a second stop sent to another
 * host while the job stops would be a second request, which stops at once
 * without the final checkpoint. Then stop waits for every host's launcher
 * here. Return: the exit status, 0 if every one stopped with status 0.
 */
static int stop_hosts(const char *job, char **names, int n, double timeout)
{
	struct host_stop *h = calloc((size_t)n, sizeof(*h));
	struct pollfd *pfd = calloc((size_t)n, sizeof(*pfd));
	int64_t deadline = timeout > 0 ? shmrun_now_ns() + (int64_t)(timeout * 1e9) : 0;
	int rc = 0, asked = -1, waiting = 0;
	char why[1024];

	if (!h || !pfd) {
		free(h);
		free(pfd);
		fprintf(stderr, "shmrun stop: out of memory\n");
		return 1;
	}
	for (int i = 0; i < n; i++) {
		h[i].name = names[i];
		waiting += host_attach(&h[i], job) == 0;
	}
	for (int i = 0; i < n && asked < 0; i++) {
		int pidfd;

		if (h[i].pidfd < 0)
			continue;
		if (jobsock_request_stop(h[i].name, &pidfd, why, sizeof(why)) < 0) {
			fprintf(stderr, "shmrun stop: %s\n", why);
			continue;
		}
		close(pidfd); /* the same launcher: h[i].pidfd is waited for */
		asked = i;
	}
	if (asked < 0) {
		if (!waiting)
			fprintf(stderr,
				"shmrun stop: job %s: none of its hosts here is running "
				"any more\n",
				job);
		rc = 1;
		goto out;
	}
	printf("job %s: stopping it through %s; waiting for its hosts here:", job, h[asked].name);
	for (int i = 0, k = 0; i < n; i++)
		if (h[i].pidfd >= 0)
			printf("%s %s", k++ ? "," : "", h[i].name);
	putchar('\n');
	fflush(stdout);
	while (waiting) {
		int k = 0, r, ms = -1;

		for (int i = 0; i < n; i++)
			if (h[i].pidfd >= 0 && !h[i].exited)
				pfd[k++] = (struct pollfd){.fd = h[i].pidfd, .events = POLLIN};
		if (deadline) {
			int64_t left = deadline - shmrun_now_ns();

			ms = left > 0 ? (int)fmin((double)left / 1e6 + 1, INT32_MAX) : 0;
		}
		r = poll(pfd, (nfds_t)k, ms);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break; /* the timeout */
		for (int i = 0, j = 0; i < n; i++) {
			if (h[i].pidfd < 0 || h[i].exited)
				continue;
			if (pfd[j++].revents) {
				h[i].exited = true;
				waiting--;
			}
		}
	}
	for (int i = 0; i < n; i++) {
		if (h[i].pidfd < 0)
			continue;
		if (!h[i].exited) {
			fprintf(
			    stderr,
			    "shmrun stop: job %s (pid %d) has not exited within %g s; it goes on "
			    "stopping: wait for it, or end it at once without a final "
			    "checkpoint (kill -KILL %d)\n",
			    h[i].name, (int)h[i].pid, timeout, (int)h[i].pid);
			rc = 1;
			continue;
		}
		if (report_end(h[i].name, h[i].m, h[i].pid))
			rc = 1;
	}
out:
	for (int i = 0; i < n; i++) {
		if (h[i].pidfd >= 0)
			close(h[i].pidfd);
		shmrun_metrics_unmap(h[i].m);
	}
	free(h);
	free(pfd);
	return rc;
}

int shmrun_jobs_stop(int argc, char **argv)
{
	const struct shmrun_metrics *m = NULL;
	const char *job = NULL;
	double timeout = 0; /* 0: wait until it exits */
	char why[1024];
	struct pollfd pfd;
	int mfd, pidfd, rc;
	pid_t pid;

	for (int i = 1, opts = 1; i < argc; i++) {
		const char *v = NULL;

		if (opts && strcmp(argv[i], "--") == 0) {
			opts = 0; /* a job name may start with '-': stop -- -name */
			continue;
		}
		if (!opts && job) {
			return usage("stop takes one job name, got '%s' and '%s'", job, argv[i]);
		} else if (!opts) {
			job = argv[i];
		} else if (strcmp(argv[i], "--timeout") == 0) {
			if (i + 1 == argc)
				return usage("--timeout needs a number of seconds");
			v = argv[++i];
		} else if (strncmp(argv[i], "--timeout=", 10) == 0) {
			v = argv[i] + 10;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			return usage("stop takes --timeout SECONDS only, not '%s' (a job named"
				     " -NAME: shmrun stop -- -NAME)", argv[i]);
		} else if (job) {
			return usage("stop takes one job name, got '%s' and '%s'", job, argv[i]);
		} else {
			job = argv[i];
		}
		if (v && parse_timeout(v, &timeout))
			return usage("--timeout must be a positive number of seconds, not '%s'", v);
	}
	if (!job)
		return usage("stop needs the name of a job (shmrun ps lists them)");
	if (!jobsock_name_ok(job))
		return usage("'%s' is not a job name (shmrun ps lists them)", job);
	if (jobsock_pid(job) <= 0) {
		/* not a job of that name: a multi-host job's hosts here, NAME.hK? */
		char **hosts;
		int nh = jobsock_list_hosts(job, &hosts);

		if (nh > 0) {
			rc = stop_hosts(job, hosts, nh, timeout);
			jobsock_list_free(hosts, nh);
			return rc;
		}
	}
	/* the block first: it outlives the launcher in our mapping */
	mfd = jobsock_metrics_fd(job, why, sizeof(why));
	if (mfd < 0 && mfd != -ENODATA) {
		fprintf(stderr, "shmrun stop: %s\n", why);
		return 1;
	}
	if (mfd >= 0) {
		m = shmrun_metrics_map(mfd, why, sizeof(why));
		close(mfd);
		if (!m)
			fprintf(stderr, "shmrun stop: job %s: %s; stopping it anyway\n", job, why);
	}
	pid = jobsock_request_stop(job, &pidfd, why, sizeof(why));
	if (pid < 0) {
		fprintf(stderr, "shmrun stop: %s\n", why);
		shmrun_metrics_unmap(m);
		return 1;
	}
	pfd.fd = pidfd;
	pfd.events = POLLIN;
	for (;;) {
		int r = poll(&pfd, 1, timeout > 0 ? (int)fmin(timeout * 1000, INT32_MAX) : -1);

		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0) {
			fprintf(
			    stderr,
			    "shmrun stop: job %s (pid %d) has not exited within %g s; it goes on "
			    "stopping: wait for it, or end it at once without a final "
			    "checkpoint (kill -KILL %d)\n",
			    job, (int)pid, timeout, (int)pid);
			close(pidfd);
			shmrun_metrics_unmap(m);
			return 1;
		}
		break;
	}
	close(pidfd);
	rc = report_end(job, m, pid);
	shmrun_metrics_unmap(m);
	return rc;
}
