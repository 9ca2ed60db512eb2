/*
 * runtime/prom.c: the Prometheus endpoint (prom.h): `[job] metrics = ADDRESS`
 * serves GET /metrics in the text exposition format 0.0.4 from the launcher,
 * read from the metrics block (metrics.h).
 *
 * How it runs. libmicrohttpd (MHD) in "external select" mode: no thread of
 * its own. The launcher's supervision loop (launcher.c serve_outside(), at
 * most 100 ms apart) calls shmrun_prom_serve(), which runs MHD's rounds
 * without blocking; while a client is mid-request it waits up to 1 ms per
 * round for it, at most ROUNDS rounds, so a scrape is usually answered in the
 * tick its connection arrives and never waits more than a tick or two
 * (Prometheus' default scrape timeout is 10 s). The page is built anew per
 * scrape from relaxed loads of the block: each number is one writer's,
 * possibly a little stale, never torn.
 *
 *     curl ─ connect ─┐   tick: sigtimedwait ≤ 100 ms
 *                     └─> serve_outside ─ shmrun_prom_serve ─ MHD_run ×≤ ROUNDS
 *                                           └ answer: shmrun_prom_render(block)
 *
 * Invariants.
 *   - The launcher forks workers (at every restart too), so no thread: fork()
 *     in a threaded process copies locks held by other threads.
 *   - No worker holds a socket of the endpoint: a pthread_atfork() child
 *     handler closes the listening socket and every connection in each child
 *     forked while the endpoint is up. Else a worker would keep the port bound
 *     after its launcher died, and a client's connection open after MHD closed
 *     it.
 *   - The listening socket is bound before anything of the run is created
 *     (launcher.c): a port in use is refused with nothing started.
 *   - Every label value is escaped (\\, \", \n) as the format requires, though
 *     job and stage names allow none of those characters today.
 *
 * Rejected:
 *   - MHD's internal polling thread (MHD_USE_INTERNAL_POLLING_THREAD): the
 *     fork problem above;
 *   - a child process serving HTTP: it would need the block mapped (it could)
 *     but would be one more process to supervise, restart and kill, for a page
 *     that costs microseconds to build;
 *   - hand-written HTTP on a socket: request parsing, keep-alive, slow
 *     clients and HEAD are what a well-kept library is for.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>

#include "metrics.h"
#include "prom.h"

#define ROUNDS	       16 /* MHD rounds per serve call at most */
#define CONN_LIMIT     16 /* concurrent clients */
#define CONN_TIMEOUT_S 10 /* an idle client is dropped after it */
#define CONTENT_TYPE   "text/plain; version=0.0.4; charset=utf-8"

struct shmrun_prom {
	struct MHD_Daemon *mhd;
	int fd;				/* the listening socket (MHD closes it) */
	const struct shmrun_metrics *m; /* NULL: shmrun_up only */
	char job[SHMRUN_METRICS_NAME_BYTES];
};

/* The endpoint whose sockets a forked child closes (one per process). */
static struct shmrun_prom *live;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void close_in_child(void)
{
	fd_set rs, ws, es;
	MHD_socket max = 0;

	if (!live)
		return;
	FD_ZERO(&rs);
	FD_ZERO(&ws);
	FD_ZERO(&es);
	if (live->mhd && MHD_get_fdset(live->mhd, &rs, &ws, &es, &max) == MHD_YES)
		for (int fd = 0; fd <= max; fd++)
			if (FD_ISSET(fd, &rs) || FD_ISSET(fd, &ws) || FD_ISSET(fd, &es))
				close(fd);
	if (live->fd >= 0)
		close(live->fd); /* EBADF if closed above: harmless */
	live = NULL;		 /* the child's copy only; nothing else of MHD is touched */
}

static void register_atfork(void)
{
	pthread_atfork(NULL, NULL, close_in_child);
}

/* ------------------------------------------------------------------------ */
/* The address */

static int parse_port(const char *s, uint16_t *port, char *why, size_t why_len)
{
	const char *digits = s;
	unsigned long v;

	if (!*s || strspn(s, "0123456789") != strlen(s)) {
		snprintf(why, why_len,
			 "is not an address; expected PORT, HOST:PORT or [IPV6]:PORT with a "
			 "numeric host, e.g. 127.0.0.1:9464 (a port alone binds loopback)");
		return -EINVAL;
	}
	while (digits[0] == '0' && digits[1])
		digits++;
	/* a number of any length is a port out of range, not "not an address" */
	v = strlen(digits) > 5 ? 65536 : strtoul(digits, NULL, 10);
	if (v < 1 || v > 65535) {
		snprintf(why, why_len, "names port %.40s%s, out of range; a port is 1 to 65535",
			 digits, strlen(digits) > 40 ? "..." : "");
		return -ERANGE;
	}
	*port = (uint16_t)v;
	return 0;
}

int shmrun_prom_parse(const char *text, struct sockaddr_storage *ss, socklen_t *len, char *why,
		      size_t why_len)
{
	struct sockaddr_storage tmp;
	char host[64] = "";
	const char *port = text, *colon;
	uint16_t p;
	int r;

	if (!ss)
		ss = &tmp;
	memset(ss, 0, sizeof(*ss));
	if (text[0] == '[') {
		const char *close = strchr(text, ']');

		if (!close || close[1] != ':' || (size_t)(close - text - 1) >= sizeof(host)) {
			snprintf(why, why_len,
				 "is not an address; an IPv6 address is written [ADDRESS]:PORT, "
				 "e.g. [::1]:9464");
			return -EINVAL;
		}
		memcpy(host, text + 1, (size_t)(close - text - 1));
		port = close + 2;
		r = parse_port(port, &p, why, why_len);
		if (r)
			return r;
		{
			struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;

			if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1) {
				snprintf(why, why_len,
					 "is not an address: '%s' is not a numeric IPv6 address",
					 host);
				return -EINVAL;
			}
			a->sin6_family = AF_INET6;
			a->sin6_port = htons(p);
			if (len)
				*len = sizeof(*a);
		}
		return 0;
	}
	colon = strrchr(text, ':');
	if (colon) {
		if ((size_t)(colon - text) >= sizeof(host) ||
		    memchr(text, ':', (size_t)(colon - text))) {
			snprintf(why, why_len,
				 "is not an address; expected PORT, HOST:PORT or [IPV6]:PORT, e.g. "
				 "127.0.0.1:9464 (an IPv6 address goes in brackets)");
			return -EINVAL;
		}
		memcpy(host, text, (size_t)(colon - text));
		port = colon + 1;
	}
	r = parse_port(port, &p, why, why_len);
	if (r)
		return r;
	{
		struct sockaddr_in *a = (struct sockaddr_in *)ss;

		a->sin_family = AF_INET;
		a->sin_port = htons(p);
		if (!host[0] || strcmp(host, "localhost") == 0)
			a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		else if (inet_pton(AF_INET, host, &a->sin_addr) != 1) {
			snprintf(why, why_len,
				 "is not an address: '%s' is not a numeric IPv4 address (names are "
				 "not looked up; localhost is 127.0.0.1)",
				 host);
			return -EINVAL;
		}
		if (len)
			*len = sizeof(*a);
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* The page */

/* A label value, escaped as the text format requires. */
static void put_label(FILE *out, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\')
			fputs("\\\\", out);
		else if (*s == '"')
			fputs("\\\"", out);
		else if (*s == '\n')
			fputs("\\n", out);
		else
			fputc(*s, out);
	}
}

/* Nanoseconds as exact decimal seconds: 1500000000 -> "1.500000000". */
static void put_seconds(FILE *out, int64_t ns)
{
	uint64_t a = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;

	fprintf(out, "%s%" PRIu64 ".%09" PRIu64, ns < 0 ? "-" : "", a / 1000000000u,
		a % 1000000000u);
}

static void family(FILE *out, const char *name, const char *type, const char *help)
{
	fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* "name{job="J"" — the caller adds further labels, then "} value\n". */
static void sample_start(FILE *out, const char *name, const char *job)
{
	fprintf(out, "%s{job=\"", name);
	put_label(out, job);
	fputc('"', out);
}

static void task_labels(FILE *out, const struct shmrun_metrics *m,
			const struct shmrun_metrics_task *t)
{
	const struct shmrun_metrics_stage *s = shmrun_metrics_stage(m, t->stage);

	fputs(",stage=\"", out);
	put_label(out, s->name);
	fprintf(out, "\",instance=\"%" PRIu32 "\"}", t->instance);
}

enum unit { U_COUNT, U_NS };

/* clang-format off */
/* The per-task numbers, in the order of the page. */
static const struct task_metric {
	const char *name, *type, *help;
	size_t off; /* of an _Atomic uint64_t in struct shmrun_metrics_task */
	enum unit unit;
} task_metrics[] = {
#define TM(n, ty, f, u, h) {n, ty, h, offsetof(struct shmrun_metrics_task, f), u}
	TM("shmrun_records_in_total", "counter", records_in, U_COUNT,
	   "Records the task received (a source: read or made), since the launcher started."),
	TM("shmrun_records_out_total", "counter", records_out, U_COUNT,
	   "Records the task emitted (a sink: wrote), since the launcher started."),
	TM("shmrun_bytes_in_total", "counter", bytes_in, U_COUNT,
	   "Key and value bytes the task received (a file source: bytes read)."),
	TM("shmrun_bytes_out_total", "counter", bytes_out, U_COUNT,
	   "Key and value bytes the task emitted."),
	TM("shmrun_busy_seconds_total", "counter", busy_ns, U_NS,
	   "Time spent in the task's callbacks and deliveries."),
	TM("shmrun_idle_seconds_total", "counter", idle_ns, U_NS,
	   "Time the task's worker spent elsewhere or asleep, not backpressured."),
	TM("shmrun_backpressure_seconds_total", "counter", backpressure_ns, U_NS,
	   "Time the task was parked because an output ring was full."),
	TM("shmrun_records_bad_total", "counter", records_bad, U_COUNT,
	   "Records the task dropped as malformed."),
	TM("shmrun_records_late_total", "counter", records_late, U_COUNT,
	   "Records the task dropped as late (behind the watermark past allowed_lateness)."),
	TM("shmrun_state_bytes", "gauge", state_bytes, U_COUNT,
	   "Bytes of the task's key-bound state now."),
	TM("shmrun_keys", "gauge", keys, U_COUNT, "Distinct keys in the task's key-bound state now."),
#undef TM
};
/* clang-format on */

static void render_tasks(const struct shmrun_metrics *m, const char *job, FILE *out)
{
	for (size_t k = 0; k < sizeof(task_metrics) / sizeof(task_metrics[0]); k++) {
		const struct task_metric *tm = &task_metrics[k];

		family(out, tm->name, tm->type, tm->help);
		for (uint32_t i = 0; i < m->tasks; i++) {
			const struct shmrun_metrics_task *t = shmrun_metrics_task(m, i);
			const _Atomic uint64_t *f =
			    (const _Atomic uint64_t *)((const char *)t + tm->off);
			uint64_t v = atomic_load_explicit(f, memory_order_relaxed);

			if (!shmrun_metrics_here(m, t->worker))
				continue; /* another host's: its own endpoint serves it */

			sample_start(out, tm->name, job);
			task_labels(out, m, t);
			fputc(' ', out);
			if (tm->unit == U_NS)
				put_seconds(out, (int64_t)v);
			else
				fprintf(out, "%" PRIu64, v);
			fputc('\n', out);
		}
	}
	family(out, "shmrun_watermark_seconds", "gauge",
	       "The task's watermark, seconds since the Unix epoch (+Inf: end of input; absent: "
	       "none yet).");
	for (uint32_t i = 0; i < m->tasks; i++) {
		const struct shmrun_metrics_task *t = shmrun_metrics_task(m, i);
		int64_t wm = SHMRUN_METRIC(t->watermark);

		if (wm == INT64_MIN || !shmrun_metrics_here(m, t->worker))
			continue;
		sample_start(out, "shmrun_watermark_seconds", job);
		task_labels(out, m, t);
		fputc(' ', out);
		if (wm == INT64_MAX)
			fputs("+Inf", out);
		else
			put_seconds(out, wm);
		fputc('\n', out);
	}
}

static void chan_labels(FILE *out, const struct shmrun_metrics *m,
			const struct shmrun_metrics_chan *c)
{
	const struct shmrun_metrics_task *src = shmrun_metrics_task(m, c->src_task);
	const struct shmrun_metrics_task *dst = shmrun_metrics_task(m, c->dst_task);

	fputs(",from_stage=\"", out);
	put_label(out, shmrun_metrics_stage(m, src->stage)->name);
	fprintf(out, "\",from_instance=\"%" PRIu32 "\",to_stage=\"", src->instance);
	put_label(out, shmrun_metrics_stage(m, dst->stage)->name);
	fprintf(out, "\",to_instance=\"%" PRIu32 "\"}", dst->instance);
}

/* Whether channel @c has an end on this host (shmrun_metrics_here()). */
static bool chan_here(const struct shmrun_metrics *m, const struct shmrun_metrics_chan *c)
{
	return shmrun_metrics_here(m, shmrun_metrics_task(m, c->src_task)->worker) ||
	       shmrun_metrics_here(m, shmrun_metrics_task(m, c->dst_task)->worker);
}

static void render_chans(const struct shmrun_metrics *m, const char *job, FILE *out)
{
	family(out, "shmrun_ring_fill_bytes", "gauge",
	       "Bytes published into the ring channel and not yet released by its consumer.");
	for (uint32_t i = 0; i < m->chans; i++) {
		const struct shmrun_metrics_chan *c = shmrun_metrics_chan(m, i);
		/* head first: a tail loaded after it is not behind it (both only
		 * grow within a start); clamped all the same */
		uint64_t head = SHMRUN_METRIC(c->head), tail = SHMRUN_METRIC(c->tail);
		uint64_t fill = tail > head ? tail - head : 0;

		if (!chan_here(m, c))
			continue;
		sample_start(out, "shmrun_ring_fill_bytes", job);
		chan_labels(out, m, c);
		fprintf(out, " %" PRIu64 "\n", fill > c->capacity ? c->capacity : fill);
	}
	family(out, "shmrun_ring_capacity_bytes", "gauge", "Data bytes of the ring channel.");
	for (uint32_t i = 0; i < m->chans; i++) {
		const struct shmrun_metrics_chan *c = shmrun_metrics_chan(m, i);

		if (!chan_here(m, c))
			continue;
		sample_start(out, "shmrun_ring_capacity_bytes", job);
		chan_labels(out, m, c);
		fprintf(out, " %" PRIu64 "\n", c->capacity);
	}
}

static void render_workers(const struct shmrun_metrics *m, const char *job, FILE *out)
{
	family(out, "shmrun_worker_sleep_seconds_total", "counter",
	       "Time the worker slept in its idle phase.");
	for (uint32_t i = 0; i < m->workers; i++) {
		const struct shmrun_metrics_worker *w = shmrun_metrics_worker(m, i);

		if (!shmrun_metrics_here(m, i))
			continue;
		sample_start(out, "shmrun_worker_sleep_seconds_total", job);
		fprintf(out, ",worker=\"%" PRIu32 "\",cpu=\"%" PRId32 "\"} ", i, w->cpu);
		put_seconds(out, (int64_t)SHMRUN_METRIC(w->sleep_ns));
		fputc('\n', out);
	}
}

/* One job-level sample: "name{job="J"} value". */
static void job_u64(FILE *out, const char *job, const char *name, const char *type,
		    const char *help, uint64_t v)
{
	family(out, name, type, help);
	sample_start(out, name, job);
	fprintf(out, "} %" PRIu64 "\n", v);
}

static void job_seconds(FILE *out, const char *job, const char *name, const char *help, int64_t ns)
{
	family(out, name, "gauge", help);
	if (!ns)
		return; /* none yet */
	sample_start(out, name, job);
	fputs("} ", out);
	put_seconds(out, ns);
	fputc('\n', out);
}

static void render_job(const struct shmrun_metrics *m, const char *job, FILE *out)
{
	static const char *const states[] = {"starting",   "running", "stopping",
					     "restarting", "done",    "failed"};
	uint32_t state = SHMRUN_METRIC(m->state);

	family(out, "shmrun_state", "gauge",
	       "1 for the state the job is in (starting, running, stopping, restarting, done, "
	       "failed), 0 for the others.");
	for (uint32_t s = 0; s < sizeof(states) / sizeof(states[0]); s++) {
		sample_start(out, "shmrun_state", job);
		fprintf(out, ",state=\"%s\"} %d\n", states[s], s == state);
	}
	job_u64(out, job, "shmrun_restarts_total", "counter",
		"Starts of the job after the first (restarts from a checkpoint after a failure).",
		SHMRUN_METRIC(m->restarts));
	job_u64(out, job, "shmrun_restored_epoch", "gauge",
		"The checkpoint epoch the current start restored, 0 for none.",
		SHMRUN_METRIC(m->restored_epoch));
	job_u64(out, job, "shmrun_checkpoints_total", "counter", "Checkpoints completed.",
		SHMRUN_METRIC(m->ckpt_completed));
	job_u64(out, job, "shmrun_checkpoints_aborted_total", "counter",
		"Checkpoints given up (timed out or failed).", SHMRUN_METRIC(m->ckpt_aborted));
	job_u64(out, job, "shmrun_checkpoint_epoch", "gauge",
		"The newest complete checkpoint's epoch, 0 for none.",
		SHMRUN_METRIC(m->ckpt_epoch));
	family(out, "shmrun_checkpoint_duration_seconds", "gauge",
	       "The newest checkpoint's duration, from its trigger to its durable MANIFEST.");
	sample_start(out, "shmrun_checkpoint_duration_seconds", job);
	fputs("} ", out);
	put_seconds(out, (int64_t)SHMRUN_METRIC(m->ckpt_duration_ns));
	fputc('\n', out);
	job_u64(out, job, "shmrun_checkpoint_size_bytes", "gauge",
		"Bytes of the newest checkpoint's state files.", SHMRUN_METRIC(m->ckpt_bytes));
	job_seconds(out, job, "shmrun_last_checkpoint_timestamp_seconds",
		    "When the newest checkpoint completed, seconds since the Unix epoch (absent: "
		    "none yet).",
		    SHMRUN_METRIC(m->ckpt_wall_ns));
	job_seconds(out, job, "shmrun_start_time_seconds",
		    "When the launcher started, seconds since the Unix epoch.", m->started_wall_ns);
}

int shmrun_prom_render(const struct shmrun_metrics *m, const char *job_name, FILE *out)
{
	family(out, "shmrun_up", "gauge", "1 while the job's launcher answers.");
	sample_start(out, "shmrun_up", job_name);
	fputs("} 1\n", out);
	if (m) {
		render_job(m, job_name, out);
		render_tasks(m, job_name, out);
		render_chans(m, job_name, out);
		render_workers(m, job_name, out);
	}
	return ferror(out) ? -EIO : 0;
}

/* ------------------------------------------------------------------------ */
/* HTTP */

static enum MHD_Result answer_text(struct MHD_Connection *conn, unsigned code, const char *text)
{
	struct MHD_Response *resp =
	    MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
	enum MHD_Result ret;

	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
	if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	ret = MHD_queue_response(conn, code, resp);
	MHD_destroy_response(resp);
	return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **req)
{
	struct shmrun_prom *p = cls;
	static int first; /* its address marks a request seen once */
	struct MHD_Response *resp;
	enum MHD_Result ret;
	char *page = NULL;
	size_t len = 0;
	FILE *out;

	(void)version;
	(void)upload;
	if (!*req) {
		*req = &first; /* headers only so far: answer on the next call */
		return MHD_YES;
	}
	if (*upload_size) {
		*upload_size = 0; /* a body is not read */
		return MHD_YES;
	}
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return answer_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED,
				   "method not allowed: GET /metrics\n");
	if (strcmp(url, "/metrics") != 0)
		return answer_text(conn, MHD_HTTP_NOT_FOUND,
				   "not found: the metrics are at /metrics\n");
	out = open_memstream(&page, &len);
	if (!out)
		return answer_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
	if (shmrun_prom_render(p->m, p->job, out) || fclose(out)) {
		free(page);
		return answer_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
	}
	resp = MHD_create_response_from_buffer(len, page, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(page);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, CONTENT_TYPE);
	ret = MHD_queue_response(conn, MHD_HTTP_OK, resp);
	MHD_destroy_response(resp);
	return ret;
}

struct shmrun_prom *shmrun_prom_start(const char *addr, const char *job_name, char *why,
				      size_t why_len)
{
	struct sockaddr_storage ss;
	struct shmrun_prom *p;
	socklen_t len = 0;
	char bad[256];
	int one = 1, err;

	if (shmrun_prom_parse(addr, &ss, &len, bad, sizeof(bad))) {
		snprintf(why, why_len, "metrics = %s %s", addr, bad);
		errno = EINVAL;
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		snprintf(why, why_len, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	snprintf(p->job, sizeof(p->job), "%s", job_name);
	p->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (p->fd < 0) {
		err = errno;
		snprintf(why, why_len, "metrics = %s: cannot make a socket: %s", addr,
			 strerror(err));
		goto err_free;
	}
	/* a rerun binds at once though the last run's connections linger in
	 * TIME_WAIT; on Linux it never lets two sockets listen on one port */
	setsockopt(p->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(p->fd, (struct sockaddr *)&ss, len) < 0 || listen(p->fd, CONN_LIMIT) < 0) {
		err = errno;
		if (err == EADDRINUSE)
			snprintf(why, why_len,
				 "metrics = %s: the address is in use (another program, or another "
				 "job with the same metrics port, listens there); stop it, or "
				 "choose another port in [job] metrics",
				 addr);
		else if (err == EADDRNOTAVAIL)
			snprintf(why, why_len,
				 "metrics = %s: no interface of this host has that address; use "
				 "one it has (127.0.0.1 for loopback, 0.0.0.0 for all)",
				 addr);
		else if (err == EACCES)
			snprintf(why, why_len,
				 "metrics = %s: binding a port below 1024 needs privileges "
				 "(CAP_NET_BIND_SERVICE); choose a port from 1024 up, e.g. 9464",
				 addr);
		else
			snprintf(why, why_len, "metrics = %s: cannot listen: %s", addr,
				 strerror(err));
		goto err_close;
	}
	p->mhd = MHD_start_daemon(
	    ss.ss_family == AF_INET6 ? (unsigned)MHD_USE_IPv6 : 0u, 0, NULL, NULL, on_request, p,
	    MHD_OPTION_LISTEN_SOCKET, p->fd, MHD_OPTION_CONNECTION_LIMIT, (unsigned)CONN_LIMIT,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONN_TIMEOUT_S, MHD_OPTION_END);
	if (!p->mhd) {
		err = EINVAL;
		snprintf(why, why_len, "metrics = %s: libmicrohttpd refused to start on it", addr);
		goto err_close;
	}
	pthread_once(&atfork_once, register_atfork);
	live = p;
	return p;

err_close:
	close(p->fd);
err_free:
	free(p);
	errno = err;
	return NULL;
}

void shmrun_prom_attach(struct shmrun_prom *p, const struct shmrun_metrics *m)
{
	if (p)
		p->m = m;
}

/* Whether one of MHD's sockets is ready within 1 ms. */
static bool mhd_ready(struct shmrun_prom *p)
{
	struct timeval tv = {0, 1000};
	fd_set rs, ws, es;
	MHD_socket max = 0;

	FD_ZERO(&rs);
	FD_ZERO(&ws);
	FD_ZERO(&es);
	if (MHD_get_fdset(p->mhd, &rs, &ws, &es, &max) != MHD_YES)
		return false;
	return select(max + 1, &rs, &ws, &es, &tv) > 0;
}

void shmrun_prom_serve(struct shmrun_prom *p)
{
	if (!p)
		return;
	for (int i = 0; i < ROUNDS; i++) {
		const union MHD_DaemonInfo *info;

		MHD_run(p->mhd);
		info = MHD_get_daemon_info(p->mhd, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
		/* no client: nothing to wait for; one idle between scrapes
		 * (keep-alive): costs this tick 1 ms */
		if (!info || !info->num_connections || !mhd_ready(p))
			break;
	}
}

void shmrun_prom_stop(struct shmrun_prom *p)
{
	if (!p)
		return;
	if (live == p)
		live = NULL;
	MHD_stop_daemon(p->mhd); /* closes the listening socket and every connection */
	free(p);
}
