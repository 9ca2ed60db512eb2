/*
 * runtime/prom.h: the Prometheus endpoint of a running job, `[job] metrics =
 * ADDRESS` (private to runtime/; prom.c; docs/observability.md "Prometheus"
 * lists the metrics).
 *
 * The launcher serves GET /metrics in the Prometheus text exposition format
 * (version 0.0.4) with libmicrohttpd, from the metrics block (metrics.h), in
 * its own single thread: MHD runs in "external select" mode and the
 * supervision loop calls shmrun_prom_serve() once per tick. The idea and the
 * names follow Prometheus' own conventions ("Writing exporters": base units,
 * _total for counters, _seconds, _bytes).
 */
#ifndef SHMRUN_RT_PROM_H
#define SHMRUN_RT_PROM_H

#include <stdio.h>
#include <sys/socket.h>

struct shmrun_metrics;
struct shmrun_prom;

/*
 * shmrun_prom_parse() - the listening address of a `metrics =` value @text:
 * "PORT" or ":PORT" (127.0.0.1, loopback), "IPV4:PORT", "[IPV6]:PORT" or
 * "localhost:PORT", numeric hosts only (no name lookup at parse time).
 * @ss, @len: receive the socket address (may be NULL: only check).
 * @why:      on failure, a reason that fits after "metrics = 'TEXT' in [job]
 *            " ("is not ..."; "port 0 is out of range ..."), @why_len bytes.
 * Return: 0; -EINVAL (not an address) or -ERANGE (port outside 1..65535).
 */
int shmrun_prom_parse(const char *text, struct sockaddr_storage *ss, socklen_t *len, char *why,
		      size_t why_len);

/*
 * shmrun_prom_start() - listen on @addr (a value shmrun_prom_parse()
 * accepts) and start an MHD daemon without threads on it. Nothing is served
 * until shmrun_prom_serve() is called; until shmrun_prom_attach() the page
 * holds shmrun_up only.
 * @job_name: the job label of every sample (copied).
 * @why:      on failure, a one-line reason naming the address and what to do.
 * Return: the endpoint (free with shmrun_prom_stop()); NULL on failure, errno
 * set (EADDRINUSE, EACCES, EINVAL, ENOMEM, or what socket() failed with).
 * Its sockets are closed in every child forked afterwards (pthread_atfork):
 * a worker never holds the port or a client's connection open.
 */
struct shmrun_prom *shmrun_prom_start(const char *addr, const char *job_name, char *why,
				      size_t why_len);

/* shmrun_prom_attach() - serve the counters of @m (not owned; NULL: none). */
void shmrun_prom_attach(struct shmrun_prom *p, const struct shmrun_metrics *m);

/*
 * shmrun_prom_serve() - do what MHD has to do now (accept, read requests,
 * answer them, write answers), never blocking; @p may be NULL (no endpoint).
 * A few rounds while a client is being served, so a scrape usually completes
 * within one call.
 */
void shmrun_prom_serve(struct shmrun_prom *p);

/* shmrun_prom_stop() - stop serving, close every socket, free @p (or NULL). */
void shmrun_prom_stop(struct shmrun_prom *p);

/*
 * shmrun_prom_render() - write the page of @m (NULL: shmrun_up only) for job
 * @job_name to @out in the text exposition format 0.0.4: for each metric a
 * HELP and a TYPE line, then its samples with labels escaped (\\, \", \n).
 * Return: 0, or -EIO if writing @out failed.
 */
int shmrun_prom_render(const struct shmrun_metrics *m, const char *job_name, FILE *out);

#endif /* SHMRUN_RT_PROM_H */
