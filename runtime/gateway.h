/*
 * runtime/gateway.h: the gateway between hosts of a multi-host job (private
 * to runtime/; issue 16, /work/notes/multihost-design.md; gateway.c tells how).
 *
 * One launcher per host (rank h of `mpirun -np H shmrun topology.conf`) owns
 * one gateway: a thread that is the only caller of MPI in the process
 * (MPI_Init_thread inside it, MPI_Finalize at the end). It carries every ring
 * of the plan that has exactly one end on this host:
 *   - an OUTBOUND ring (local producer task, remote consumer): the gateway is
 *     its consumer; it takes frames out and sends them to the peer host;
 *   - an INBOUND ring (remote producer, local consumer task): the gateway is
 *     its producer; it writes the frames the peer sent, unchanged.
 * Workers do not know: they attach to their rings as within one host. The
 * gateway also mirrors the checkpoint words of the control area between
 * host 0 (whose coordinator is authoritative) and the other hosts.
 *
 * With checkpoint_layout = per_host, host 0's gateway also sends each
 * other host rank 0's MANIFEST of every complete epoch (a COMMIT), which that
 * host installs in its own checkpoint_dir before it publishes the epoch.
 * TEST-ONLY (built with SHMRUN_FAULT_INJECTION): SHMRUN_TEST_GATEWAY_MUTE=ms
 * makes a gateway send nothing from that long after its start on, as a hung
 * host would (tests/mpi/gateway_pair.c).
 *
 * Thread safety: shmrun_gateway_start(), _poll(), _abort() and _finish() are
 * called by one thread (the launcher's); the gateway thread they talk to
 * touches the rings and the control area, nothing else of the launcher's.
 * Sources of the idea: Thrill (one MPI thread per host, bounded in-flight
 * sends), Flink's network stack (credit-based flow control per channel,
 * buffers flushed when full, on a timeout or at once for a barrier), Timely
 * (one ordered stream per process pair; restart everything on a failure).
 */
#ifndef SHMRUN_RT_GATEWAY_H
#define SHMRUN_RT_GATEWAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shmrun/ring.h"

struct shmrun_plan;
struct shmrun_control;
struct shmrun_gateway;

/* One ring with exactly one remote end. */
struct shmrun_gateway_ring {
	uint32_t channel;	  /* plan channel index (the same on every host) */
	uint32_t peer_host;	  /* the host of the remote end */
	bool outbound;		  /* local producer -> gateway; else gateway -> local consumer */
	void *mem;		  /* the ring in this host's segment (shmrun_ring_init()ed) */
	size_t len;		  /* bytes at mem */
	struct shmrun_bell *bell; /* outbound: the producing worker's bell (rung when the
				     gateway frees room); inbound: the consuming worker's
				     (rung when the gateway publishes frames); NULL: none */
};

struct shmrun_gateway_conf {
	uint32_t host, hosts;		/* this host's index (MPI rank) and the host count */
	const struct shmrun_plan *plan; /* tasks' workers -> host = worker / workers_per_host;
					   only ntasks and tasks[].worker are read */
	uint32_t workers_per_host;	/* w: global worker g is on host g / w */
	struct shmrun_control *ctl;	/* this host's control area */
	const struct shmrun_gateway_ring *rings; /* copied by shmrun_gateway_start() */
	uint32_t nrings;
	int64_t flush_ns;   /* [job] host_flush: a buffer goes out after being
			       open this long, ns (> 0) */
	int64_t timeout_ns; /* [job] host_timeout: a peer silent this long is
			       taken for hung, ns (> 100 ms) */
};

/*
 * shmrun_gateway_start() - start the gateway thread of this host.
 * @out: receives the gateway (owned by the caller until shmrun_gateway_finish()).
 * @c:   the configuration; copied (rings included), except @c->plan and
 *       @c->ctl, which must outlive the gateway, and the rings' memory.
 *
 * Attaches to every ring (consumer of an outbound ring, producer of an
 * inbound one: the workers' liveness checks then watch this process), starts
 * the thread and waits until it has called MPI_Init_thread and checked that
 * the MPI world has @c->hosts ranks and this is rank @c->host. The thread
 * then pre-posts its receives, waits for every rank to have done so (a
 * barrier: nothing ever lands in MPI's unexpected queue) and exchanges a
 * HELLO with every peer, which compares the channel tables. Before it
 * returns, the hosts agree (gateway.c "the start exchange"): rank 0 compares
 * every host's whole effective job (shmrun_job_hash()) and worker count with
 * its own, and picks the epoch every host restores (shmrun_ckpt_agree()); a
 * host whose choice differs restores that epoch instead
 * (shmrun_ckpt_restore_instead(), with rank 0's MANIFEST bytes per_host),
 * and on success @c->ctl->go is set (the workers of a multi-host job wait
 * for it before they restore or touch anything). Call it after
 * block_signals(): the thread inherits the blocked set.
 *
 * Return: 0; -EXDEV when the hosts run different jobs or worker counts (the
 * failure names the first host that differs from host 0: logged; nothing
 * may start: exit 2); -ENOENT when rank 0 has no checkpoint but another host
 * has one (shmrun_ckpt_agree(): refused, exit 2); the errors of
 * shmrun_ckpt_restore_instead() when this host cannot restore the agreed
 * epoch; -ENOTSUP in a build without MPI (SHMRUN_MPI=OFF or no MPI found);
 * -EINVAL for a bad configuration (host >= hosts, hosts < 2, a ring whose peer
 * is this host or out of range, a ring attach that fails, flush_ns <= 0) or an
 * MPI world of another size or rank; -ENOMEM; -EIO if MPI_Init_thread failed.
 * Nothing is left running on failure (MPI may be initialised, though: MPI
 * cannot be initialised twice, so a failed start ends the process's MPI use).
 */
int shmrun_gateway_start(struct shmrun_gateway **out, const struct shmrun_gateway_conf *c);

/*
 * shmrun_gateway_poll() - the launcher's supervision tick (non-blocking).
 * @g:   the gateway.
 * @why: receives a one-line reason when the return is not 0 ("host 1 stopped
 *       sending for 10.0 s (host_timeout)", "host 1 aborted: worker 3 died
 *       (signal 9)", "MPI_Testsome: ..."); may be NULL; @len: its size.
 *
 * Return: 0 while running; -EPIPE when a peer aborted the job or sent
 * nothing for host_timeout (why names the host); -EPROTO when a peer sent
 * something this build does not read (another version, another channel
 * table, a frame its credits did not cover); -EIO on an MPI error. Once not
 * 0, it stays so, and the gateway has sent ABORT to every other peer: the
 * launcher stops its workers, calls shmrun_gateway_finish() and exits 75
 * (restartable). A peer that ended its stream (its workers finished) is not
 * a failure.
 */
int shmrun_gateway_poll(struct shmrun_gateway *g, char *why, size_t len);

/*
 * shmrun_gateway_abort() - a local worker died (or the host must stop for
 * another reason): send ABORT with @why to every peer, whose poll then
 * returns -EPIPE naming this host. Blocks until the messages are sent (at
 * most about two seconds). Later outbound frames are no longer carried. Call
 * shmrun_gateway_finish() afterwards.
 */
void shmrun_gateway_abort(struct shmrun_gateway *g, const char *why);

/*
 * shmrun_gateway_finish() - the local workers have all exited (after the
 * final epoch, or stopped after a failure): send every frame the outbound
 * rings still hold while the peers take them (one second without progress
 * ends that: the peer's consumers are gone), then END-OF-STREAM to every
 * peer, wait for theirs (a peer silent for host_timeout is given up), then
 * MPI_Finalize, join the thread and free @g. Blocks.
 *
 * Return: 0 when every peer ended its stream and MPI was finalised; -EPIPE
 * when a peer had aborted or timed out (MPI_Finalize is then skipped when a
 * peer is silent, since it would wait for that peer forever: the process
 * should exit, which makes mpirun end the job); -EIO on an MPI error.
 */
int shmrun_gateway_finish(struct shmrun_gateway *g);

#endif /* SHMRUN_RT_GATEWAY_H */
