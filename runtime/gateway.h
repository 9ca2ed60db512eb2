/*
 * runtime/gateway.h: the multi-host gateway (private to runtime/), one per
 * host: a thread of the launcher, the only caller of MPI, that carries the
 * rings crossing hosts over one ordered MPI stream per host pair
 * (docs/multihost.md; design: issue 16's design note).
 *
 * Used by launcher.c when [job] hosts > 1: it forks its local workers, blocks
 * signals, then starts the gateway; polls it every supervision tick; aborts it
 * when a local worker dies; finishes it after the final epoch.
 */
#ifndef SHMRUN_RT_GATEWAY_H
#define SHMRUN_RT_GATEWAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct shmrun_bell;
struct shmrun_control;
struct shmrun_plan;

struct shmrun_gateway;

struct shmrun_gateway_ring {      /* one ring with exactly one remote end */
	uint32_t channel;         /* plan channel index (same on every host) */
	uint32_t peer_host;       /* the host of the remote end */
	bool outbound;            /* local producer → gateway; else gateway → local consumer */
	void *mem; size_t len;    /* the ring in this host's segment */
	struct shmrun_bell *bell; /* outbound: the producing worker's bell; inbound: the consumer's */
};

struct shmrun_gateway_conf {
	uint32_t host, hosts;
	const struct shmrun_plan *plan;   /* tasks' workers → host = worker / workers_per_host */
	uint32_t workers_per_host;
	struct shmrun_control *ctl;       /* this host's control area */
	const struct shmrun_gateway_ring *rings; uint32_t nrings;
	int64_t flush_ns, timeout_ns;     /* [job] host_flush, host_timeout */
};

/*
 * shmrun_gateway_start() - start the gateway thread (MPI_Init_thread inside
 * it). Call after the local workers are forked and signals are blocked.
 * Return: 0 or -errno; -ENOTSUP without MPI (built with SHMRUN_MPI=OFF or no
 * MPI found).
 */
int  shmrun_gateway_start(struct shmrun_gateway **out, const struct shmrun_gateway_conf *c);

/*
 * shmrun_gateway_poll() - the launcher's supervision tick.
 * Return: 0 running, -EPIPE a peer aborted/vanished/timed out (@why, @len
 * bytes, says which host and what), -EIO an MPI error.
 */
int  shmrun_gateway_poll(struct shmrun_gateway *g, char *why, size_t len);

/*
 * shmrun_gateway_abort() - a local worker died (@why says which): tell every
 * peer, they stop and exit 75 too.
 */
void shmrun_gateway_abort(struct shmrun_gateway *g, const char *why);

/*
 * shmrun_gateway_finish() - local workers have all exited after the final
 * epoch: drain, end-of-stream to every peer, wait for theirs, MPI_Finalize,
 * join. Frees @g. Return: 0 or -errno.
 */
int  shmrun_gateway_finish(struct shmrun_gateway *g);

#endif /* SHMRUN_RT_GATEWAY_H */
