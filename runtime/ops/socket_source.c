/*
 * runtime/ops/socket_source.c: records from TCP connections or UDP datagrams.
 *
 * What it is for: a job that takes its input from the network, e.g. a log
 * shipper sending lines to `listen = 9000`, or a server the job connects to
 * (`connect = host:9000`) that streams records until it closes.
 *
 * Modes (exactly one of the keys):
 *   listen = [ADDR:]PORT   bind in open() (in the worker: `shmrun check` and
 *                          prepare() only check the syntax, never bind) and
 *                          accept any number of connections, at most
 *                          max_connections at a time; never ends by itself
 *                          (a stop ends it). A bare PORT is 127.0.0.1.
 *   connect = HOST:PORT    one connection per instance, made in open()
 *                          without blocking (finished in produce()); ends
 *                          when the server closes it.
 * protocol = udp (listen only) reads datagrams from one socket.
 *
 * Framing: `line` (a record per '\n'-terminated line, the '\n' removed; key
 * empty, value the line, as file_source and stdin_source emit) or `length`
 * (a 4-byte big-endian length, then that many bytes: the value). Over TCP
 * the bytes of a connection are a stream cut by framer.c; a connection's
 * final line without '\n' is a record when it closes; a length frame cut
 * short by a close is dropped with a warning. Over UDP a datagram is cut on
 * its own: with `line` into its lines (a final part without '\n' is a line,
 * a trailing '\n' adds no empty record), with `length` into its frames (a
 * datagram whose frames do not add up exactly is dropped from the first bad
 * frame on, with a warning); no record spans datagrams.
 *
 * Limits: a record longer than max_record (default: the largest record a
 * ring of the job holds, ring_bytes/2 - 32) closes the connection that sent
 * it, with a warning naming the peer (the job goes on); over UDP the
 * datagram is dropped and counted as bad. A connection beyond
 * max_connections is accepted and closed at once (so the sender sees it
 * closed rather than hanging in the backlog), with one warning per burst:
 * the next warning comes only after a connection ended.
 *
 * Never blocks: sockets are non-blocking; one epoll_wait() with a zero
 * timeout per produce() finds the listening socket and the connections with
 * bytes; the worker calls produce() again about 100 µs later when it found
 * nothing. At most `budget` records go out per call (UDP: a datagram is
 * taken whole, the budget is checked between datagrams); records already
 * buffered when the budget ran out are taken first at the next call.
 * Backpressure is TCP's own: while the task is parked behind a full ring the
 * worker does not call produce(), the socket is not read, its receive buffer
 * fills and the sender's send() blocks. Memory stays bounded: per connection
 * one buffer of at most max_record + 4 bytes (starting at 64 KiB).
 *
 * Width: with listen, every instance binds the same address with
 * SO_REUSEPORT and the kernel spreads connections (UDP: datagrams by source
 * address and port) over them; `listen = 0` (a port the kernel chooses) needs
 * width 1, since each instance would get another port. With connect, every
 * instance makes its own connection.
 *
 * Not replayable (SHMRUN_OP_UNREPLAYABLE): what was read from a socket
 * cannot be read again, so it snapshots nothing, and a job with
 * checkpoint_dir needs allow_data_loss_on_crash = true (docs/checkpoints.md).
 *
 * Rejected: a thread per connection or blocking reads (the worker runs every
 * task on one thread and must never block); leaving connections past
 * max_connections in the listen backlog (senders would hang with no sign
 * why); io_uring for receiving (the rest of the data path is polled, and
 * epoll with a zero timeout costs one syscall per call).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "framer.h"
#include "netaddr.h"
#include "ops.h"

#define RECS_PER_EMIT 256u
#define CONN_BUF      (64u << 10) /* a connection's first buffer */
#define DGRAM_MAX     65536u	  /* larger than any UDP payload (65507) */
#define EVENTS	      64

struct conn {
	int fd;
	struct framer fr;
	bool buffered; /* may hold whole records not yet taken (the budget ran out) */
	char peer[INET6_ADDRSTRLEN + 8];
};

struct sock_src {
	bool listen, udp, connecting, ended;
	enum framer_mode mode;
	int lfd; /* listening TCP socket or the UDP socket, -1 if none */
	int epfd;
	struct conn **conns;
	uint32_t nconns, cap, max_conns;
	uint32_t max_record;
	bool refusing;	  /* warned about max_connections in this burst */
	uint64_t dropped; /* UDP: datagrams (parts) dropped, for the first warning only */
	unsigned char *dgram;
	struct shmrun_record recs[RECS_PER_EMIT]; /* queued, pointing into a buffer */
	uint32_t nrecs;
	char where[NETADDR_HOST_MAX + 16];
};

static const char *proto_name(const struct sock_src *s)
{
	return s->udp ? "udp" : "tcp";
}

static const char *framing_name(const struct sock_src *s)
{
	return s->mode == FRAMER_LINE ? "line" : "length";
}

/* "ADDR:PORT" (IPv6 in brackets) of @sa into @buf. */
static void format_addr(const struct sockaddr *sa, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)sa;

		inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
		port = ntohs(a->sin_port);
		snprintf(buf, len, "%s:%u", host, port);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const void *)sa;

		inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
		port = ntohs(a->sin6_port);
		snprintf(buf, len, "[%s]:%u", host, port);
	} else {
		snprintf(buf, len, "(unknown address family %d)", sa->sa_family);
	}
}

static int flush_recs(struct shmrun_task *task, struct sock_src *s)
{
	uint32_t n = s->nrecs;

	if (!n)
		return 0;
	s->nrecs = 0;
	shmrun_task_count(task, SHMRUN_COUNT_RECORDS_IN, n);
	return shmrun_emit_batch(task, s->recs, n);
}

static int queue_rec(struct shmrun_task *task, struct sock_src *s, const void *v, uint32_t len)
{
	s->recs[s->nrecs++] = (struct shmrun_record){.value = v, .value_len = len};
	return s->nrecs == RECS_PER_EMIT ? flush_recs(task, s) : 0;
}

/*
 * The sockets (and epoll fds) of this process's socket_source tasks, closed
 * in every child forked afterwards: the worker forks a child per checkpoint
 * to write its state (ckpt/snapshot.c), and a child holding copies would
 * keep open a connection the source closed, and keep the port bound for a
 * moment after the worker died, refusing its restart (EADDRINUSE). prom.c
 * does the same for the launcher's metrics endpoint. One worker runs one
 * thread: no lock.
 */
static int *held;
static uint32_t nheld, held_cap;

static void close_in_child(void)
{
	for (uint32_t i = 0; i < nheld; i++)
		close(held[i]);
	nheld = 0;
}

/* Track @fd (a new socket, or -1): closed in children. Out of memory: it is not. */
static int hold_fd(int fd)
{
	static bool registered;

	if (fd < 0)
		return fd;
	if (!registered && pthread_atfork(NULL, NULL, close_in_child) == 0)
		registered = true;
	if (shmrun_grow_u32(&held, &held_cap, (size_t)nheld + 1, sizeof(*held), 16) == 0)
		held[nheld++] = fd;
	return fd;
}

/* Close @fd and stop tracking it. */
static void release_fd(int fd)
{
	for (uint32_t i = 0; i < nheld; i++)
		if (held[i] == fd) {
			held[i] = held[--nheld];
			break;
		}
	close(fd);
}

/* ---- prepare: the keys, without the network ---------------------------------- */

static int sock_prepare(struct shmrun_task *task)
{
	const char *listen_at = shmrun_task_param(task, "listen");
	const char *connect_to = shmrun_task_param(task, "connect");
	const char *proto = shmrun_task_param(task, "protocol");
	const char *key = listen_at ? "listen" : "connect";
	char host[NETADDR_HOST_MAX], why[300];
	uint64_t max_record, limit = shmrun_task_max_record(task);
	uint16_t port;

	if (!!listen_at == !!connect_to) {
		shmrun_task_error_at(
		    task, listen_at ? "connect" : NULL,
		    "socket_source needs exactly one of listen = [ADDR:]PORT (accept "
		    "connections) and connect = HOST:PORT (connect to a server)%s",
		    listen_at ? "; remove one of them" : "");
		return -EINVAL;
	}
	if (shmrun_netaddr_split(listen_at ? listen_at : connect_to, listen_at != NULL, host, &port,
				 why, sizeof(why))) {
		shmrun_task_error_at(task, key, "%s = '%s' %s", key,
				     listen_at ? listen_at : connect_to, why);
		return -EINVAL;
	}
	if (proto && strcmp(proto, "udp") == 0 && connect_to) {
		shmrun_task_error_at(task, "protocol",
				     "protocol = udp works with listen only: a UDP socket receives "
				     "datagrams sent to it, there is no connection to make; use "
				     "listen = [ADDR:]PORT");
		return -EINVAL;
	}
	if (listen_at && port == 0 && shmrun_task_width(task) > 1) {
		shmrun_task_error_at(
		    task, "listen",
		    "listen = '%s' lets the kernel choose the port, and each of the "
		    "%u instances would get another one; give a port, or width = 1",
		    listen_at, shmrun_task_width(task));
		return -EINVAL;
	}
	max_record = shmrun_task_param_u64(task, "max_record", limit);
	if (max_record > limit) {
		shmrun_task_error_at(
		    task, "max_record",
		    "max_record = %llu bytes is more than the largest record a ring "
		    "of this job holds (%llu, ring_bytes/2 - 32); raise ring_bytes in "
		    "[job] or lower max_record",
		    (unsigned long long)max_record, (unsigned long long)limit);
		return -EINVAL;
	}
	return 0;
}

/* ---- open: bind or connect -------------------------------------------------- */

static int watch(struct sock_src *s, int fd, void *ptr)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = ptr};

	return epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

static int open_listen(struct shmrun_task *task, struct sock_src *s, const char *text,
		       const struct addrinfo *ai)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int one = 1, err = 0;

	for (; ai; ai = ai->ai_next) {
		s->lfd =
		    hold_fd(socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
				   ai->ai_protocol));
		if (s->lfd < 0) {
			err = -errno;
			continue;
		}
		if (!s->udp)
			setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (shmrun_task_width(task) > 1 &&
		    setsockopt(s->lfd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0) {
			err = -errno;
		} else if (bind(s->lfd, ai->ai_addr, ai->ai_addrlen) == 0 &&
			   (s->udp || listen(s->lfd, SOMAXCONN) == 0)) {
			err = 0;
			break;
		} else {
			err = -errno;
		}
		release_fd(s->lfd);
		s->lfd = -1;
	}
	if (s->lfd < 0) {
		shmrun_task_error(
		    task, "cannot listen on %s (%s): %s%s", text, proto_name(s), strerror(-err),
		    err == -EADDRINUSE
			? "; another program (or another job) uses that port: choose "
			  "another one, or stop it"
		    : err == -EADDRNOTAVAIL ? "; the address is not one of this machine's"
					    : "");
		return err ? err : -EINVAL;
	}
	if (getsockname(s->lfd, (struct sockaddr *)&ss, &len) == 0)
		format_addr((struct sockaddr *)&ss, s->where, sizeof(s->where));
	err = watch(s, s->lfd, s);
	if (err) {
		shmrun_task_error(task, "epoll: %s", strerror(-err));
		return err;
	}
	shmrun_task_log(task, "listening on %s (%s, %s)", s->where, proto_name(s), framing_name(s));
	return 0;
}

static struct conn *add_conn(struct shmrun_task *task, struct sock_src *s, int fd,
			     const struct sockaddr *peer)
{
	struct conn *c = calloc(1, sizeof(*c));

	if (!c ||
	    shmrun_grow_u32(&s->conns, &s->cap, (size_t)s->nconns + 1, sizeof(*s->conns), 8) ||
	    framer_init(&c->fr, s->mode, s->max_record, CONN_BUF)) {
		if (c)
			framer_free(&c->fr);
		free(c);
		shmrun_task_error(task, "out of memory for a connection");
		return NULL;
	}
	c->fd = fd;
	format_addr(peer, c->peer, sizeof(c->peer));
	if (watch(s, fd, c)) {
		shmrun_task_error(task, "epoll: %s", strerror(errno));
		framer_free(&c->fr);
		free(c);
		return NULL;
	}
	s->conns[s->nconns++] = c;
	return c;
}

static int open_connect(struct shmrun_task *task, struct sock_src *s, const char *text,
			const struct addrinfo *ai)
{
	int fd = hold_fd(
	    socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));

	if (fd < 0) {
		shmrun_task_error(task, "connect = %s: socket: %s", text, strerror(errno));
		return -errno;
	}
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS) {
		int err = errno;

		release_fd(fd);
		shmrun_task_error(task, "cannot connect to %s: %s", text, strerror(err));
		return -err;
	}
	format_addr(ai->ai_addr, s->where, sizeof(s->where));
	s->connecting = true;
	if (!add_conn(task, s, fd, ai->ai_addr)) {
		release_fd(fd);
		return -ENOMEM;
	}
	return 0;
}

static int sock_open(struct shmrun_task *task, void **state)
{
	struct sock_src *s = calloc(1, sizeof(*s));
	const char *listen_at = shmrun_task_param(task, "listen");
	const char *text = listen_at ? listen_at : shmrun_task_param(task, "connect");
	const char *proto = shmrun_task_param(task, "protocol");
	const char *framing = shmrun_task_param(task, "framing");
	struct addrinfo hints = {0}, *ai = NULL;
	char host[NETADDR_HOST_MAX], why[300], port_text[8];
	uint16_t port;
	int err;

	if (!s)
		return -ENOMEM;
	*state = s;
	s->lfd = -1;
	s->epfd = -1;
	s->listen = listen_at != NULL;
	s->udp = proto && strcmp(proto, "udp") == 0;
	s->mode = framing && strcmp(framing, "length") == 0 ? FRAMER_LENGTH : FRAMER_LINE;
	s->max_conns = (uint32_t)shmrun_task_param_u64(task, "max_connections", 64);
	s->max_record =
	    (uint32_t)shmrun_task_param_u64(task, "max_record", shmrun_task_max_record(task));
	if (!text || shmrun_netaddr_split(text, s->listen, host, &port, why, sizeof(why))) {
		shmrun_task_error(task, "%s = '%s' %s", s->listen ? "listen" : "connect",
				  text ? text : "", text ? why : "is missing");
		return -EINVAL;
	}
	s->epfd = hold_fd(epoll_create1(EPOLL_CLOEXEC));
	if (s->epfd < 0) {
		shmrun_task_error(task, "epoll_create1: %s", strerror(errno));
		return -errno;
	}
	snprintf(port_text, sizeof(port_text), "%u", port);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = s->udp ? SOCK_DGRAM : SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV | (s->listen ? AI_PASSIVE : 0);
	err = getaddrinfo(host, port_text, &hints, &ai);
	if (err) {
		shmrun_task_error(task, "%s = %s: cannot resolve '%s': %s",
				  s->listen ? "listen" : "connect", text, host,
				  err == EAI_SYSTEM ? strerror(errno) : gai_strerror(err));
		return -EHOSTUNREACH;
	}
	if (s->udp) {
		s->dgram = malloc(DGRAM_MAX);
		if (!s->dgram) {
			freeaddrinfo(ai);
			return -ENOMEM;
		}
	}
	err = s->listen ? open_listen(task, s, text, ai) : open_connect(task, s, text, ai);
	freeaddrinfo(ai);
	return err;
}

/* ---- produce ---------------------------------------------------------------- */

static void drop_conn(struct shmrun_task *task, struct sock_src *s, struct conn *c)
{
	flush_recs(task, s); /* queued records may point into its buffer */
	for (uint32_t i = 0; i < s->nconns; i++)
		if (s->conns[i] == c) {
			s->conns[i] = s->conns[--s->nconns];
			break;
		}
	epoll_ctl(s->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	release_fd(c->fd);
	framer_free(&c->fr);
	free(c);
	s->refusing = false; /* a place is free: the next refusal is a new burst */
	if (!s->listen)
		s->ended = true;
}

/* Connection @c closed (@err: 0, or the errno that ended it): its last record. */
static int conn_ended(struct shmrun_task *task, struct sock_src *s, struct conn *c, int err)
{
	const void *v;
	uint32_t len;
	int r = framer_rest(&c->fr, &v, &len), e = 0;

	if (err)
		shmrun_task_warn(task, "connection %s %s: %s", s->listen ? "from" : "to", c->peer,
				 strerror(err));
	if (r == 1)
		e = queue_rec(task, s, v, len);
	else if (r == -EPROTO)
		shmrun_task_warn(task,
				 "connection %s %s closed in the middle of a frame: its last %u "
				 "bytes were dropped",
				 s->listen ? "from" : "to", c->peer, len);
	if (e)
		return e;
	drop_conn(task, s, c);
	return 0;
}

/* Take records of @c and read it until it has nothing or *@budget is 0. */
static int drain_conn(struct shmrun_task *task, struct sock_src *s, struct conn *c,
		      uint32_t *budget)
{
	for (;;) {
		const void *v;
		uint32_t len;
		unsigned char *at;
		long room;
		ssize_t n;
		int r = 0, err;

		while (*budget > 0 && (r = framer_next(&c->fr, &v, &len)) == 1) {
			(*budget)--;
			err = queue_rec(task, s, v, len);
			if (err)
				return err;
		}
		if (*budget == 0) {
			c->buffered = true;
			return 0;
		}
		c->buffered = false;
		if (r == -EMSGSIZE) {
			shmrun_task_warn(task,
					 "connection %s %s sent a record longer than max_record = "
					 "%u bytes: connection closed (the job goes on)",
					 s->listen ? "from" : "to", c->peer, s->max_record);
			shmrun_task_count(task, SHMRUN_COUNT_RECORDS_BAD, 1);
			drop_conn(task, s, c);
			return 0;
		}
		err = flush_recs(task, s); /* framer_room() may move what they point into */
		if (err)
			return err;
		room = framer_room(&c->fr, &at);
		if (room < 0)
			return (int)room;
		n = recv(c->fd, at, (size_t)room, MSG_DONTWAIT);
		if (n > 0) {
			framer_fill(&c->fr, (size_t)n);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		return conn_ended(task, s, c, n == 0 ? 0 : errno);
	}
}

static void accept_all(struct shmrun_task *task, struct sock_src *s)
{
	for (;;) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		int fd = hold_fd(
		    accept4(s->lfd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC));
		char peer[INET6_ADDRSTRLEN + 8];

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK && !s->refusing) {
				shmrun_task_warn(task, "accepting a connection on %s: %s", s->where,
						 strerror(errno));
				s->refusing = true;
			}
			return;
		}
		if (s->nconns >= s->max_conns) {
			format_addr((struct sockaddr *)&ss, peer, sizeof(peer));
			release_fd(fd);
			if (!s->refusing)
				shmrun_task_warn(
				    task,
				    "max_connections = %u reached on %s: the connection "
				    "from %s was closed at once, and so is every new one "
				    "until one of the %u ends (warned once per burst)",
				    s->max_conns, s->where, peer, s->nconns);
			s->refusing = true;
			continue;
		}
		if (!add_conn(task, s, fd, (struct sockaddr *)&ss))
			release_fd(fd);
	}
}

/* UDP: datagram @d of @n bytes from @peer into records; *@taken counts them. */
static int take_datagram(struct shmrun_task *task, struct sock_src *s, const unsigned char *d,
			 size_t n, const char *peer, uint32_t *taken)
{
	size_t off = 0;
	const char *bad = NULL;
	int err;

	while (off < n && !bad) {
		size_t len;
		const void *v;

		if (s->mode == FRAMER_LINE) {
			const unsigned char *nl = memchr(d + off, '\n', n - off);

			len = nl ? (size_t)(nl - (d + off)) : n - off;
			v = d + off;
			off += len + (nl != NULL);
		} else if (n - off < 4) {
			bad = "a frame's length prefix is cut short";
			break;
		} else {
			len = (size_t)d[off] << 24 | (size_t)d[off + 1] << 16 |
			      (size_t)d[off + 2] << 8 | d[off + 3];
			if (len > n - off - 4) {
				bad = "a frame is longer than the rest of the datagram";
				break;
			}
			v = d + off + 4;
			off += 4 + len;
		}
		if (len > s->max_record) {
			bad = "a record is longer than max_record";
			break;
		}
		(*taken)++;
		err = queue_rec(task, s, v, (uint32_t)len);
		if (err)
			return err;
	}
	if (bad) {
		shmrun_task_count(task, SHMRUN_COUNT_RECORDS_BAD, 1);
		if (s->dropped++ == 0)
			shmrun_task_warn(task,
					 "datagram of %zu bytes from %s: %s (max_record = %u); the "
					 "rest of it was dropped (counted as bad records; further "
					 "ones are not logged)",
					 n, peer, bad, s->max_record);
	}
	return 0;
}

static int read_datagrams(struct shmrun_task *task, struct sock_src *s, uint32_t *budget)
{
	while (*budget > 0) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		char peer[INET6_ADDRSTRLEN + 8] = "";
		uint32_t taken = 0;
		ssize_t n;
		int err = flush_recs(task, s); /* the next datagram overwrites the buffer */

		if (err)
			return err;
		n = recvfrom(s->lfd, s->dgram, DGRAM_MAX, MSG_DONTWAIT, (struct sockaddr *)&ss,
			     &len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n < 0) {
			shmrun_task_warn(task, "receiving on %s: %s", s->where, strerror(errno));
			return 0;
		}
		format_addr((struct sockaddr *)&ss, peer, sizeof(peer));
		err = take_datagram(task, s, s->dgram, (size_t)n, peer, &taken);
		if (err)
			return err;
		/* a datagram is taken whole: the budget is checked between datagrams */
		*budget = taken >= *budget ? 0 : *budget - taken;
	}
	return 0;
}

/* connect mode: whether the connection is made. Return: 1 made, 0 not yet, -errno. */
static int connected(struct shmrun_task *task, struct sock_src *s)
{
	struct pollfd pfd = {.fd = s->conns[0]->fd, .events = POLLOUT};
	int soerr = 0;
	socklen_t len = sizeof(soerr);

	if (poll(&pfd, 1, 0) <= 0)
		return 0;
	if (getsockopt(pfd.fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
		soerr = errno;
	if (soerr) {
		shmrun_task_error(task, "cannot connect to %s: %s", s->where, strerror(soerr));
		return -soerr;
	}
	s->connecting = false;
	shmrun_task_log(task, "connected to %s (tcp, %s)", s->where, framing_name(s));
	return 1;
}

static int sock_produce(struct shmrun_task *task, void *state, uint32_t budget)
{
	struct sock_src *s = state;
	struct epoll_event ev[EVENTS];
	int n, err = 0;

	if (s->connecting) {
		err = connected(task, s);
		if (err <= 0)
			return err < 0 ? err : 1;
	}
	/* first what the last call left buffered when its budget ran out */
	for (uint32_t i = 0; i < s->nconns && budget > 0 && !err; i++)
		if (s->conns[i]->buffered)
			err = drain_conn(task, s, s->conns[i], &budget);
	if (budget > 0 && !err) {
		n = epoll_wait(s->epfd, ev, EVENTS, 0);
		for (int i = 0; i < n && budget > 0 && !err; i++) {
			if (ev[i].data.ptr != s)
				err = drain_conn(task, s, ev[i].data.ptr, &budget);
			else if (s->udp)
				err = read_datagrams(task, s, &budget);
			else
				accept_all(task, s);
		}
	}
	if (!err)
		err = flush_recs(task, s);
	if (err)
		return err;
	return s->ended ? 0 : 1;
}

static void sock_close(struct shmrun_task *task, void *state)
{
	struct sock_src *s = state;
	uint64_t unread = 0;
	uint32_t lossy = 0;

	if (!s)
		return;
	/* What the peers sent that nobody will read: a socket cannot be
	 * replayed, so a stop drops it (docs/checkpoints.md). Said, not silent. */
	for (uint32_t i = 0; i < s->nconns; i++) {
		int n = 0;

		if (ioctl(s->conns[i]->fd, FIONREAD, &n) == 0 && n > 0) {
			unread += (uint64_t)n;
			lossy++;
		}
	}
	if (lossy)
		shmrun_task_warn(task,
				 "closing %u connection%s with %" PRIu64 " byte%s not yet read: "
				 "they are lost (a socket cannot be replayed; the sender sees "
				 "the connection reset)",
				 lossy, lossy == 1 ? "" : "s", unread, unread == 1 ? "" : "s");
	for (uint32_t i = 0; i < s->nconns; i++) {
		release_fd(s->conns[i]->fd);
		framer_free(&s->conns[i]->fr);
		free(s->conns[i]);
	}
	free(s->conns);
	if (s->lfd >= 0)
		release_fd(s->lfd);
	if (s->epfd >= 0)
		release_fd(s->epfd);
	free(s->dgram);
	free(s);
}

/* clang-format off */
static const struct shmrun_param_def params[] = {
	{.key = "listen", .type = SHMRUN_PARAM_STRING,
	 .doc = "accept connections (or datagrams) at [ADDR:]PORT; PORT alone is 127.0.0.1; [IPV6]:PORT; 0: a port the kernel chooses (logged)",
	 .tuning = true /* where, not what: the source keeps no state, a resume may move */},
	{.key = "connect", .type = SHMRUN_PARAM_STRING,
	 .doc = "connect to HOST:PORT (or [IPV6]:PORT); ends when the server closes the connection",
	 .tuning = true},
	{.key = "protocol", .type = SHMRUN_PARAM_ENUM, .def = "tcp", .choices = "tcp udp",
	 .doc = "tcp, or udp (with listen only)"},
	{.key = "framing", .type = SHMRUN_PARAM_ENUM, .def = "line", .choices = "line length",
	 .doc = "line: a record per line without \\n; length: a 4-byte big-endian length, then the bytes"},
	{.key = "max_connections", .type = SHMRUN_PARAM_COUNT, .def = "64", .min = 1, .max = 65536,
	 .doc = "connections open at once per instance (listen, tcp); more are closed at once", .tuning = true},
	{.key = "max_record", .type = SHMRUN_PARAM_SIZE, .min = 1, .max = 1ull << 30,
	 .doc = "longest record (default: the largest a ring holds, ring_bytes/2 - 32); a longer one closes its connection", .tuning = true},
	{.key = "rate", .type = SHMRUN_PARAM_RATE, .min = 1, .max = 1000000000000ull,
	 .doc = "records per second for the whole stage (default: unlimited)", .tuning = true},
	{0},
};
/* clang-format on */

const struct shmrun_operator shmrun_op_socket_source = {
    .size = sizeof(struct shmrun_operator),
    .name = "socket_source",
    .summary = "records from TCP connections or UDP datagrams: listen = [ADDR:]PORT or "
	       "connect = HOST:PORT, framing line or length; cannot be replayed",
    .flags = SHMRUN_OP_SOURCE | SHMRUN_OP_UNREPLAYABLE,
    .params = params,
    .pacing_param = "rate",
    .prepare = sock_prepare,
    .open = sock_open,
    .produce = sock_produce,
    .close = sock_close,
};
