/*
 * runtime/launcher.c: segment creation, fork, pinning, supervision, signals,
 * restarts.
 *
 * What it is for. The launcher is an init system for one job (docs/design.md §1):
 * it creates the run's segment, forks one worker per member, pins each to its
 * CPU, and then only supervises. It runs no task and holds no state of the
 * job; every worker computes its own part from the plan it inherited.
 * shmrun_run() is the whole of it: checks, locks, then run_once() per start
 * of the job, in a loop that decides between done, stopped, restarted and
 * failed. shmrun_check_restore() is the read-only half of the restore step,
 * for `shmrun check`.
 *
 *     shmrun_run: plan, prepare, preflight, job name (jobsock.h), lock, mkdir checkpoint_dir
 *       └─ loop: run_once ─ select_restore (STREAM_RESET_STATE, newest
 *                │          checkpoint that verifies, fingerprint)
 *                │          segment, fork + pin workers, supervise
 *                └─ DONE/STOPPED/SIGNALED: exit │ FAILED: backoff, again
 *
 * Lifecycle and the promises it keeps:
 *   - Nothing starts before everything that can be checked has been: the conf
 *     (shmrun_job_load), the plan, each stage's prepare() (inputs exist), the
 *     preflight of every path, and the run's locks on checkpoint_dir and the
 *     outputs (shmrun_lock_job), taken before anything reads, moves or creates
 *     a checkpoint: a second live run is refused having touched nothing.
 *   - The segment is an anonymous memfd: it cannot be reused by a later run and
 *     it disappears with the last process mapping it, whatever kills them.
 *     Each start has its own segment and control area, so no frame or flag
 *     of a failed start reaches the next one.
 *   - Workers die with their launcher: PR_SET_PDEATHSIG(SIGKILL), armed before
 *     the worker checks its parent is still the launcher (closing the race of
 *     a launcher that died between fork and prctl).
 *   - End of input on every worker -> exit 0 and a summary. A worker that dies
 *     or fails, or exits from inside an operator callback (exit() in a
 *     plugin, whatever the status) -> the others are killed, the cause (worker, CPU, tasks, signal
 *     or exit status, the worker's own error) is logged; with checkpoint_dir
 *     the whole job restarts from the newest complete checkpoint, after a
 *     backoff doubling from 0.1 s to 3.2 s, at most restart_attempts times;
 *     else exit 1. A failure a restart would only repeat is not restarted
 *     (incurable(): EACCES, EPERM, EROFS, EMSGSIZE, EFBIG, SIGXFSZ, SIGXCPU,
 *     ENOSPC or EDQUOT on the final epoch), nor is a worker killed by SIGPIPE
 *     (`shmrun job | head`: stop like any filter).
 *   - A checkpoint of another topology is refused before the start, exit 2,
 *     naming every difference (fingerprint.c) and both ways out
 *     (STREAM_RESET_STATE=1, --rescale). STREAM_RESET_STATE=1 moves the
 *     checkpoints aside, never deletes them, once per invocation: a restart
 *     after a crash restores what this run checkpointed. New epochs number
 *     past every ckpt-* directory there (epoch_floor), damaged ones included,
 *     so no epoch writes into a directory it did not create.
 *   - A stop signal (SIGTERM, SIGINT, SIGHUP) is one request, whoever gets
 *     it: the launcher alone (kill PID), one worker (kill WORKER_PID), or the
 *     whole process group (Ctrl-C in a terminal, systemd's
 *     KillMode=control-group, kill -- -PGID). With checkpoints it is "stop
 *     with checkpoint": the next epoch is the final one, then exit 0; if it
 *     is not complete within checkpoint_timeout plus STOP_GRACE_NS, the
 *     launcher stops without it. Without checkpoints, SIGTERM to every worker
 *     (each stops at its next loop turn), SIGKILL after a grace period, and
 *     the launcher dies by the same signal (shmrun_die_by_signal()) so a shell
 *     running it stops too. A second signal from outside during a stop with
 *     checkpoint stops at once. A stop during a restart's backoff ends the run
 *     at the last complete checkpoint, exit 0, and so does a stop whose final
 *     epoch a curable worker death cut short (start_result()): which of the
 *     two came first must not change the outcome.
 *   - A worker stopped by SIGSTOP or a debugger for WATCH_STOPPED_NS is named
 *     in a warning (watch_workers(), report.c): nothing else would name worker 0, or a
 *     worker of a job without checkpoints.
 *   - Multi-host ([job] hosts = H > 1, docs/multihost.md): one launcher per
 *     host, started by mpirun, builds the same plan over H·w global workers
 *     and forks only its own, g in [h·w, (h+1)·w), pinned by local index;
 *     then (signals blocked) it starts the gateway thread, the only caller of
 *     MPI, for the rings with one end here (start_gateway()), polls it every
 *     tick, and finishes it after the final epoch. No restart here: no
 *     process may fork after MPI_Init, so a local worker's death (or a
 *     peer's abort, silence or an MPI error) stops this host's workers, has
 *     the gateway tell the peers, and exits 75 for the outer loop (`shmrun
 *     supervise -- mpirun ...`) to rerun the job from the last checkpoint.
 *     Arrays indexed by worker (pids, the control area, the watchdogs) span
 *     all H·w workers; those of other hosts stay empty. The job's socket is
 *     NAME.hH and the locks are this host's (preflight.c).
 *
 * Signals are blocked in the launcher and taken synchronously with
 * sigtimedwait(), so there is no handler and no race with waitpid().
 *
 * Workers never act on a stop signal from outside themselves: their handler
 * passes it to the launcher with sigqueue() and a marker value
 * (STOP_FORWARDED), and goes on. Only the launcher stops a worker: it sets
 * stop_now in the control area, then sends SIGTERM, and a worker's handler
 * stops on any stop signal once stop_now is set (by setting worker_stop, a
 * volatile sig_atomic_t the worker loop reads; the handler does nothing
 * else that is not async-signal-safe). Standard signals are not queued: the
 * group's copy still pending in a worker merges with the launcher's SIGTERM
 * and carries the outside sender's si_pid, so the sender alone cannot tell;
 * the flag, set before the kill, can. A sender check remains for the
 * launcher's SIGTERM. A worker still alive after STOP_GRACE_NS is SIGKILLed
 * and named in a warning. So a group signal cannot race the launcher: a
 * worker that gets its copy first does not exit (which would read as a crash
 * and restart the job), and its forwarded copy is recognised as part of the
 * same request, not as a second one.
 *
 * Rejected:
 *   - workers ignoring stop signals, as they once ignored SIGINT: a SIGTERM
 *     to one worker would then be lost; workers stopping on their own: that
 *     is the race above;
 *   - a signal handler in the launcher: it would race waitpid() and the
 *     supervision loop; sigtimedwait() makes signals and child exits one
 *     ordered stream of events;
 *   - restarting only the worker that died: its peers' rings hold records
 *     sent to and from the dead worker's old state, and an aligned checkpoint
 *     is a consistent cut of the whole job only (docs/design.md §6), so the
 *     whole job restarts from it;
 *   - a named segment under /dev/shm: a run killed with SIGKILL would leave
 *     it behind, and a later run could attach to it;
 *   - running worker 0's tasks in the launcher: a crash of a task would take
 *     the supervisor with it, and nothing would restart the job.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <numa.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "callback.h"
#include "control.h"
#include "gateway.h"
#include "metrics.h"
#include "multihost.h"
#include "ckpt/ckpt_io.h"
#include "ckpt/fault.h"
#include "ckpt/manifest.h"
#include "ckpt/recovery.h"
#include "ckpt/hosts.h"
#include "jobsock.h"
#include "plan.h"
#include "preflight.h"
#include "prom.h"
#include "proctitle.h"
#include "report.h"
#include "summary.h"
#include "util.h"
#include "worker.h"

#define STOP_GRACE_NS 5000000000ll
/* sigqueue() value of a stop signal a worker passes on to the launcher */
#define STOP_FORWARDED 0x73746f70
/* A stop signal this soon after the first is another copy of the same
 * request, not a second one: a group signal's copy to the launcher, queued
 * by the same kill() that reached a worker, or a sender that signals the
 * launcher and then its group (GNU timeout) follows within microseconds; a
 * second request (a second Ctrl-C, a second group SIGTERM) comes later than
 * this and stops at once. */
#define SAME_STOP_NS 50000000ll

static volatile sig_atomic_t worker_stop; /* set by on_stop_signal() */
static pid_t launcher_pid; /* in a worker and its children: the launcher */
static struct shmrun_control *worker_ctl; /* in a worker: its stop_now */

static bool is_stop_signal(int sig)
{
	return sig == SIGTERM || sig == SIGINT || sig == SIGHUP;
}

/* A stop signal in a worker (or a snapshot/MANIFEST child of one). From the
 * launcher: stop now. From anyone else: pass it to the launcher, which
 * stops the whole job (async-signal-safe: sigqueue and an int store). */
static void on_stop_signal(int sig, siginfo_t *info, void *uc)
{
	int saved = errno;

	(void)uc;
	if ((worker_ctl && atomic_load_explicit(&worker_ctl->stop_now, memory_order_acquire)) ||
	    (info->si_code == SI_USER && info->si_pid == launcher_pid))
		worker_stop = 1;
	else
		sigqueue(launcher_pid, sig, (union sigval){.sival_int = STOP_FORWARDED});
	errno = saved;
}

/* SIGUSR2 wakes a worker from a sleep and does nothing else (tests use it to
 * interrupt every system call of a worker and its snapshot children). */
static void on_wake(int sig)
{
	(void)sig;
}

/* Bind each ring's memory to its consumer's NUMA node (a no-op on one node). */
static void bind_rings(const struct shmrun_plan *plan, const struct shmrun_segment *seg)
{
	if (numa_available() < 0 || numa_max_node() < 1)
		return;
	for (uint32_t c = 0; c < plan->nchannels; c++) {
		size_t len;
		void *mem = shmrun_segment_ring(seg, c, &len);
		int node = shmrun_plan_ring_node(plan, c, numa_node_of_cpu);

		if (node >= 0)
			numa_tonode_memory(mem, len, node);
	}
}

/*
 * A worker that runs no stdin_source task of a job that has one points its
 * fd 0 at /dev/null: the worker running the stage is then the only process
 * of the job that could read standard input (the launcher reads nothing from
 * it and keeps it for restarts).
 */
static void release_stdin(const struct shmrun_plan *plan, uint32_t index)
{
	bool reads = false, mine = false;
	int fd;

	for (uint32_t t = 0; t < plan->ntasks; t++) {
		if (strcmp(plan->job->stages[plan->tasks[t].stage].op->name, "stdin_source") != 0)
			continue;
		reads = true;
		mine |= plan->tasks[t].worker == index;
	}
	if (!reads || mine)
		return;
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fd >= 0 && fd != STDIN_FILENO) {
		dup2(fd, STDIN_FILENO);
		close(fd);
	}
}

static void worker_main(const struct shmrun_plan *plan, const struct shmrun_segment *seg,
			uint32_t index, struct shmrun_control *ctl, pid_t launcher,
			const sigset_t *oldmask)
{
	const struct shmrun_job *job = plan->job;
	struct sigaction sa;
	cpu_set_t set;
	int status;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != launcher)
		_exit(1);
	shmrun_log_set_worker(index);
	shmrun_locks_forget(); /* the launcher holds them; a stray child must not */
	release_stdin(plan, index);
	jobsock_forget();      /* the job's socket and name lock, likewise */
	{
		char comm[96]; /* PR_SET_NAME keeps 15 bytes */

		snprintf(comm, sizeof(comm), "shmrun w%u %s", index, job->name);
		shmrun_proctitle_set(comm, "shmrun: %s worker %u cpu %d", job->name, index,
				     shmrun_plan_cpu_of(plan, index));
	}
	launcher_pid = launcher;
	worker_ctl = ctl;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_stop_signal; /* no SA_RESTART: wakes a sleeping worker */
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sa.sa_flags = 0;
	sa.sa_handler = on_wake; /* no SA_RESTART: interrupts, on purpose */
	sigaction(SIGUSR2, &sa, NULL);
	sigprocmask(SIG_SETMASK, oldmask, NULL);

	/* global worker @index is local worker index % workers of its host:
	 * pinned to that local index's CPU (shmrun_plan_cpu_of()) */
	CPU_ZERO(&set);
	CPU_SET(shmrun_plan_cpu_of(plan, index), &set);
	if (sched_setaffinity(0, sizeof(set), &set) < 0)
		shmrun_log(SHMRUN_LOG_WARN, "cannot pin to CPU %d: %s; running unpinned",
			   shmrun_plan_cpu_of(plan, index), strerror(errno));
	shmrun_log(SHMRUN_LOG_DEBUG, "started on CPU %d", shmrun_plan_cpu_of(plan, index));
	if (plan->hosts > 1) {
		/* several hosts: nothing is restored, read or written before the
		 * hosts agree on the job and on the epoch to restore (the gateway
		 * sets go after its start exchange, and may change restored_epoch
		 * before it); the launcher kills us if they do not agree */
		uint32_t go;

		while (!(go = atomic_load_explicit(&ctl->go, memory_order_acquire))) {
			struct timespec ts = {0, 1000000};

			if (getppid() != launcher)
				_exit(1);
			nanosleep(&ts, NULL);
		}
		if (go == SHMRUN_GO_NOTHING)
			_exit(0);
	}
	status = shmrun_worker_run(plan, seg, index, ctl, &worker_stop);
	fflush(NULL);
	_exit(status);
}

static void kill_all(const pid_t *pids, uint32_t n, int sig)
{
	for (uint32_t w = 0; w < n; w++)
		if (pids[w] > 0)
			kill(pids[w], sig);
}

/*
 * Reap every worker, SIGKILLing whoever outlives @deadline. With @plan (a
 * stop: the workers were asked to end), each worker killed that way is named
 * in a warning, since output it held unwritten is lost; without, the workers
 * are being killed anyway (a failure) and nothing is said.
 */
static void reap_all(const struct shmrun_plan *plan, pid_t *pids, uint32_t n, int64_t deadline)
{
	for (;;) {
		uint32_t alive = 0;

		for (uint32_t w = 0; w < n; w++) {
			if (pids[w] <= 0)
				continue;
			if (waitpid(pids[w], NULL, WNOHANG) == pids[w])
				pids[w] = 0;
			else
				alive++;
		}
		if (!alive)
			return;
		if (shmrun_now_ns() > deadline) {
			for (uint32_t w = 0; w < n && plan; w++) {
				char tasks[256];

				if (pids[w] <= 0)
					continue;
				describe_tasks(plan, w, tasks, sizeof(tasks));
				shmrun_log(
				    SHMRUN_LOG_WARN,
				    "worker %u (pid %d, CPU %d, tasks %s) did not stop within "
				    "%.0f s of SIGTERM: killed with SIGKILL; output it held "
				    "unwritten is lost",
				    w, (int)pids[w], shmrun_plan_cpu_of(plan, w), tasks,
				    (double)STOP_GRACE_NS / 1e9);
			}
			kill_all(pids, n, SIGKILL);
			deadline = INT64_MAX;
		}
		usleep(2000);
	}
}

/* Stop every worker: stop_now first, then SIGTERM (see on_stop_signal()). */
static void stop_all(struct shmrun_control *ctl, const pid_t *pids, uint32_t n)
{
	atomic_store_explicit(&ctl->stop_now, 1, memory_order_release);
	kill_all(pids, n, SIGTERM);
}

/*
 * Whether a worker killed by @sig would be killed again by a restart, which
 * re-does the same work under the same limits: SIGXFSZ (a file reached
 * RLIMIT_FSIZE), SIGXCPU (RLIMIT_CPU). A crash (SIGSEGV, SIGBUS, SIGABRT) or
 * SIGKILL (the OOM killer, an operator) may be transient: those restart.
 */
static bool signal_is_incurable(int sig)
{
	return sig == SIGXFSZ || sig == SIGXCPU;
}

/*
 * Whether an operator's failure with @err (positive) repeats on a restart:
 * the permanent errnos (shmrun_errno_is_permanent()), a record bigger than
 * any ring (EMSGSIZE: the same input makes the same record), a file past
 * RLIMIT_FSIZE or the file system's largest size (EFBIG), an input record
 * an operator refuses as malformed (EILSEQ: extract's on_bad_record = fail;
 * the same input holds the same record).
 */
static bool errno_is_incurable(int err)
{
	return shmrun_errno_is_permanent(err) || err == EMSGSIZE || err == EFBIG ||
	       err == EILSEQ;
}

/* How one start of the job ended. */
enum run_end {
	RUN_DONE,     /* every worker reached end of input */
	RUN_STOPPED,  /* graceful stop: final checkpoint taken */
	RUN_SIGNALED, /* stopped by a signal without checkpoints */
	RUN_FAILED,   /* a worker died or failed: restartable */
	RUN_NOSTART,  /* could not start (segment, restore selection) */
};

struct run {
	const struct shmrun_job *job;
	const struct shmrun_plan *plan;
	struct shmrun_control *ctl;
	sigset_t set, oldmask;
	int signal;        /* the signal that stopped the run (or is stopping it) */
	int64_t stop_ns;   /* when the stop was requested */
	char cause[1024];  /* why it failed: text, tasks (< 256) and a worker error (< 432, whole) */
	uint64_t epoch;    /* restored (start) / stopped at (end) */
	bool reset_done;   /* STREAM_RESET_STATE=1 applied */
	int fatal_signal;  /* a worker was killed by a signal a restart cannot cure */
	bool refused;      /* the restore selection refused the checkpoint (-ESTALE) */
	bool hosts_refused; /* hosts > 1: the hosts' start exchange refused (gateway.h) */
	int64_t start_ns;  /* when shmrun_run() began: the summary's elapsed time */
	/* one start's own: set by start_workers(), released by finish_start() */
	struct shmrun_segment seg;
	pid_t *pids;       /* per worker: its pid, 0 once reaped */
	uint32_t running;  /* workers not reaped yet */
	struct watch wt;
	struct cb_watch cw; /* operator_timeout (callback.c) */
	bool stopping;     /* a stop request is being served */
	bool stop_cmd;     /* the request being served came from `shmrun stop`, not a signal */
	uint32_t starts;   /* starts so far (the metrics block counts restarts) */
	struct shmrun_metrics *metrics; /* the live counters, for the whole invocation */
	int metrics_fd;    /* its memfd (jobsock.c hands out read-only copies) */
	struct shmrun_prom *prom; /* [job] metrics: the Prometheus endpoint, or NULL */
	enum run_end end;  /* how the last start ended (the summary file) */
	struct jobsock js; /* the job's socket: `shmrun ps`, `stop`, `top` */
	bool stop_asked;   /* a client asked a stop that supervise() has not served yet */
	/*
	 * Multi-host ([job] hosts > 1, docs/multihost.md): this launcher is host
	 * `host` and runs the plan's global workers [lo, lo + nlocal); the
	 * arrays indexed by worker (pids, the control area's blocks, the
	 * watchdogs') span all plan->workers, those of other hosts staying 0.
	 * One host: host 0, lo 0, nlocal = plan->workers, no gateway.
	 */
	bool multi; /* hosts > 1 */
	uint32_t host, lo, nlocal;
	struct shmrun_gateway *gw;	      /* started after the fork, or NULL */
	struct shmrun_gateway_ring *gw_rings; /* its rings (kept until it ended) */
};

/*
 * Start phase, hosts > 1: the gateway, once this host's workers are forked
 * (no fork may follow MPI_Init, which its thread calls) and with the stop
 * signals blocked (block_signals(): the thread inherits the mask). Its rings
 * are those with exactly one end on this host: outbound when the producer
 * is here (the gateway consumes it, so the producer's peer-liveness check
 * watches this launcher), inbound when the consumer is (the gateway
 * produces into it). The workers attach to every ring as with one host.
 * Return: RUN_DONE, or RUN_NOSTART (the workers killed) if it cannot start.
 */
static enum run_end start_gateway(struct run *r)
{
	const struct shmrun_plan *plan = r->plan;
	struct shmrun_worker_stats *stats = shmrun_control_stats(r->ctl);
	struct shmrun_gateway_conf gc = {
	    .host = r->host,
	    .hosts = plan->hosts,
	    .plan = plan,
	    .workers_per_host = plan->workers_per_host,
	    .ctl = r->ctl,
	    .flush_ns = (int64_t)r->job->host_flush_ns,
	    .timeout_ns = (int64_t)r->job->host_timeout_ns,
	};
	uint32_t n = 0;
	int err;

	r->gw_rings = calloc(plan->nchannels ? plan->nchannels : 1, sizeof(*r->gw_rings));
	if (!r->gw_rings) {
		err = -ENOMEM;
		goto err_kill;
	}
	for (uint32_t c = 0; c < plan->nchannels; c++) {
		uint32_t src = plan->tasks[plan->channels[c].src_task].worker;
		uint32_t dst = plan->tasks[plan->channels[c].dst_task].worker;
		uint32_t hs = shmrun_plan_host_of(plan, src), hd = shmrun_plan_host_of(plan, dst);
		struct shmrun_gateway_ring *g = &r->gw_rings[n];

		if (hs == hd || (hs != r->host && hd != r->host))
			continue; /* within a host (this one or another): no gateway */
		g->channel = c;
		g->outbound = hs == r->host;
		g->peer_host = g->outbound ? hd : hs;
		g->mem = shmrun_segment_ring(&r->seg, c, &g->len);
		/* the local end's bell: the gateway rings it when it freed room
		 * (outbound) or published frames (inbound) */
		g->bell = &stats[g->outbound ? src : dst].bell;
		n++;
	}
	gc.rings = r->gw_rings;
	gc.nrings = n;
	err = shmrun_gateway_start(&r->gw, &gc);
	if (err) {
		r->gw = NULL;
		/* the hosts run different jobs, or cannot agree on the epoch to
		 * restore: refused before any worker touched anything (exit 2) */
		r->hosts_refused = err == -EXDEV || err == -ENOENT;
		goto err_kill;
	}
	/* the gateway's start exchange may have changed the epoch to restore */
	if (r->epoch != r->ctl->restored_epoch) {
		r->epoch = r->ctl->restored_epoch;
		if (r->metrics)
			atomic_store_explicit(&r->metrics->restored_epoch, r->epoch,
					      memory_order_relaxed);
	}
	shmrun_log(SHMRUN_LOG_INFO, "gateway of host %u: %u ring%s to or from other hosts",
		   r->host, n, n == 1 ? "" : "s");
	return RUN_DONE;

err_kill:
	if (r->hosts_refused) {
		/* the gateway said why (another job, worker count or world size,
		 * no common epoch): no errno text of the code that carries it */
		shmrun_log(SHMRUN_LOG_ERROR, "job %s: the hosts did not agree to start (see above); "
					     "stopping",
			   r->job->name);
		snprintf(r->cause, sizeof(r->cause), "the hosts did not agree to start");
	} else {
		shmrun_log(SHMRUN_LOG_ERROR,
			   "job %s: cannot start the gateway to the other hosts: %s%s; stopping",
			   r->job->name, strerror(-err),
			   err == -ENOTSUP ? " (this build has no multi-host gateway)" : "");
		snprintf(r->cause, sizeof(r->cause),
			 "the gateway to the other hosts did not start: %s", strerror(-err));
	}
	kill_all(r->pids, plan->workers, SIGKILL);
	reap_all(NULL, r->pids, plan->workers, 0);
	r->running = 0;
	free(r->gw_rings);
	r->gw_rings = NULL;
	return RUN_NOSTART;
}

/*
 * Start phase: the control area, the restore selection, the segment, then
 * one forked worker per member of this host, pinned (worker_main()), and
 * with hosts > 1 the gateway (start_gateway()). Return: RUN_DONE
 * once every worker runs, else RUN_NOSTART, or RUN_FAILED (a fork failed).
 */
static enum run_end start_workers(struct run *r)
{
	const struct shmrun_job *job = r->job;
	const struct shmrun_plan *plan = r->plan;
	pid_t self = getpid();
	int err;

	r->seg = (struct shmrun_segment){.fd = -1};
	r->running = 0;
	r->wt = (struct watch){0};
	r->stopping = false;
	r->ctl = shmrun_control_create(plan->workers, plan->ntasks);
	r->pids = calloc(plan->workers, sizeof(*r->pids));
	if (!r->ctl || !r->pids) {
		shmrun_log(SHMRUN_LOG_ERROR, "out of memory starting workers");
		return RUN_NOSTART;
	}
	if (r->multi) {
		/* this host's tasks' state files decide (a per_host directory
		 * holds no other): ckpt/hosts.h */
		struct shmrun_ckpt_scope scope;

		shmrun_ckpt_scope_of(plan, plan->hosts, &scope);
		err = shmrun_ckpt_choose_scoped(r->job, &scope, r->ctl, &r->reset_done, &r->epoch);
	} else {
		err = shmrun_ckpt_choose(r->job, r->ctl, &r->reset_done, &r->epoch);
	}
	if (err) {
		r->refused = err == -ESTALE;
		return RUN_NOSTART;
	}

	err = shmrun_segment_create(&r->seg, plan->rings, plan->nchannels, shmrun_fingerprint(job));
	if (err) {
		shmrun_log(SHMRUN_LOG_ERROR, "cannot create the shared-memory segment (%" PRIu64
					     " bytes): %s",
			   plan->segment_bytes, strerror(-err));
		return RUN_NOSTART;
	}
	bind_rings(plan, &r->seg);
	if (r->metrics)
		shmrun_metrics_new_start(r->metrics, r->epoch, r->starts > 0);
	r->starts++;
	fflush(NULL);
	for (uint32_t w = r->lo; w < r->lo + r->nlocal; w++) { /* this host's workers */
		pid_t pid = fork();

		if (pid == 0)
			worker_main(plan, &r->seg, w, r->ctl, self, &r->oldmask);
		if (pid < 0) {
			shmrun_log(SHMRUN_LOG_ERROR, "fork of worker %u failed: %s", w,
				   strerror(errno));
			kill_all(r->pids, plan->workers, SIGKILL);
			reap_all(NULL, r->pids, plan->workers, 0);
			snprintf(r->cause, sizeof(r->cause), "fork failed");
			return RUN_FAILED;
		}
		r->pids[w] = pid;
		r->running++;
		if (r->metrics)
			atomic_store_explicit(&shmrun_metrics_worker(r->metrics, w)->pid, pid,
					      memory_order_relaxed);
	}
	if (r->multi) {
		shmrun_log(SHMRUN_LOG_INFO,
			   "job %s: %u worker%s on host %u of %u (workers %u to %u of %u), %u "
			   "task%s, %u ring%s",
			   job->name, r->nlocal, r->nlocal == 1 ? "" : "s", r->host, plan->hosts,
			   r->lo, r->lo + r->nlocal - 1, plan->workers, plan->ntasks,
			   plan->ntasks == 1 ? "" : "s", plan->nchannels,
			   plan->nchannels == 1 ? "" : "s");
		return start_gateway(r);
	}
	shmrun_log(SHMRUN_LOG_INFO, "job %s: %u worker%s, %u task%s, %u ring%s", job->name,
		   job->workers, job->workers == 1 ? "" : "s", plan->ntasks,
		   plan->ntasks == 1 ? "" : "s", plan->nchannels, plan->nchannels == 1 ? "" : "s");
	return RUN_DONE;
}

/*
 * Supervise phase, the final epoch's deadline: a stop with checkpoint not
 * done within checkpoint_timeout plus STOP_GRACE_NS stops every worker
 * without it. Return: true if it did (the start ends RUN_SIGNALED).
 */
static bool final_epoch_overdue(struct run *r)
{
	const struct shmrun_job *job = r->job;

	if (r->stopping && job->checkpoint_dir &&
	    shmrun_now_ns() - r->stop_ns > (int64_t)job->checkpoint_timeout_ns + STOP_GRACE_NS) {
		/* worker 0 judges the final epoch by checkpoint_timeout;
		 * when it cannot (stopped, stuck), the launcher does */
		uint64_t e = shmrun_ckpt_newest_complete(job->checkpoint_dir, NULL);

		shmrun_log(SHMRUN_LOG_ERROR,
			   "the final checkpoint did not complete within checkpoint_timeout "
			   "(%.1f s) and %.0f s more: stopping without it; a rerun resumes "
			   "from epoch %" PRIu64,
			   (double)job->checkpoint_timeout_ns / 1e9,
			   (double)STOP_GRACE_NS / 1e9, e);
		stop_all(r->ctl, r->pids, r->plan->workers);
		reap_all(r->plan, r->pids, r->plan->workers, shmrun_now_ns() + STOP_GRACE_NS);
		return true;
	}
	return false;
}

/*
 * Supervise phase, stop signal @sig (@forwarded: passed on by a worker): a copy is ignored; with
 * checkpoints the next epoch is the final one; else, or asked again, every worker stops now.
 * Return: true if the start ended (RUN_SIGNALED).
 */
static bool serve_stop(struct run *r, int sig, bool forwarded)
{
	const struct shmrun_job *job = r->job;

	if (is_stop_signal(sig) && r->stopping &&
	    (forwarded || shmrun_now_ns() - r->stop_ns < SAME_STOP_NS)) {
		/* another copy of the request being served: a group signal
		 * reaches every worker and the launcher, and some senders
		 * signal both the launcher and its group (GNU timeout) */
		shmrun_log(SHMRUN_LOG_DEBUG, "%s (%s): already stopping", strsignal(sig),
			   forwarded ? "passed on by a worker" : "the group's copy");
		return false;
	}
	bool first = is_stop_signal(sig) && !r->stopping;

	if (first) {
		r->stopping = true;
		if (r->metrics)
			atomic_store_explicit(&r->metrics->state, SHMRUN_JOB_STOPPING,
					      memory_order_relaxed);
		r->signal = sig;
		r->stop_ns = shmrun_now_ns();
		if (forwarded) {
			/* a group signal's own copy to the launcher is pending
			 * by now (the same kill() queued it before the worker
			 * could pass its copy on): take it as part of this
			 * request whatever delays the launcher */
			struct timespec zero = {0, 0};
			sigset_t one;
			siginfo_t copy;

			sigemptyset(&one);
			sigaddset(&one, sig);
			if (sigtimedwait(&one, &copy, &zero) == sig)
				shmrun_log(SHMRUN_LOG_DEBUG, "%s: the group's copy",
					   strsignal(sig));
		}
	}
	if (first && job->checkpoint_dir &&
	    atomic_load_explicit(&r->ctl->stop_requested, memory_order_acquire)) {
		/* several hosts: another host's stop, mirrored, is already
		 * under way; this one is the same request (a scheduler or
		 * systemd signals every host at once), not a second one */
		shmrun_log(SHMRUN_LOG_WARN,
			   "%s%s: a stop at a final checkpoint is already under way (asked on "
			   "another host); %s again to stop at once",
			   r->stop_cmd ? "shmrun stop" : strsignal(sig),
			   forwarded ? " (received by a worker)" : "",
			   r->stop_cmd ? "shmrun stop" : "send it");
		return false;
	}
	if (is_stop_signal(sig) && job->checkpoint_dir &&
	    !atomic_load_explicit(&r->ctl->stop_requested, memory_order_relaxed)) {
		/* stop with checkpoint: the next epoch is the final one */
		shmrun_log(SHMRUN_LOG_WARN,
			   "%s%s: taking a final checkpoint, then stopping (%s again to stop at once)",
			   r->stop_cmd ? "shmrun stop" : strsignal(sig),
			   forwarded ? " (received by a worker)" : "",
			   r->stop_cmd ? "shmrun stop" : "send it");
		atomic_store_explicit(&r->ctl->stop_requested, 1, memory_order_release);
		return false;
	}
	shmrun_log(SHMRUN_LOG_WARN, "%s: stopping %u worker%s",
		   r->stop_cmd ? "shmrun stop" : strsignal(sig), r->running,
		   r->running == 1 ? "" : "s");
	stop_all(r->ctl, r->pids, r->plan->workers);
	reap_all(r->plan, r->pids, r->plan->workers, shmrun_now_ns() + STOP_GRACE_NS);
	r->signal = sig;
	return true;
}

/*
 * Supervise phase, why worker @w (tasks @tasks) ended with @status other
 * than exit 0 (or with exit 0 from inside an operator callback), into r->cause (and r->fatal_signal when a restart cannot
 * cure it).
 */
static void note_exit_cause(struct run *r, uint32_t w, int status, const char *tasks)
{
	struct shmrun_worker_stats *stats = shmrun_control_stats(r->ctl);

	if (WIFSIGNALED(status) && signal_is_incurable(WTERMSIG(status))) {
		char outs[512];

		describe_outputs(r->plan, w, outs, sizeof(outs));
		r->fatal_signal = WTERMSIG(status);
		if (WTERMSIG(status) == SIGXFSZ)
			snprintf(r->cause, sizeof(r->cause),
				 "worker %u (CPU %d, tasks %s) was killed by SIGXFSZ: a "
				 "file it wrote%s%.400s%s reached the file size limit "
				 "(RLIMIT_FSIZE, `ulimit -f`); raise or remove the limit",
				 w, shmrun_plan_cpu_of(r->plan, w), tasks, outs[0] ? " (" : "",
				 outs, outs[0] ? ")" : "");
		else
			snprintf(r->cause, sizeof(r->cause),
				 "worker %u (CPU %d, tasks %s) was killed by SIGXCPU: it "
				 "used up the CPU time limit (RLIMIT_CPU, `ulimit -t`); "
				 "raise or remove the limit",
				 w, shmrun_plan_cpu_of(r->plan, w), tasks);
	} else if (WIFSIGNALED(status)) {
		/* the callback it died in, if any: its words are final after waitpid */
		uint64_t where = atomic_load_explicit(&stats[w].cb_where, memory_order_relaxed);
		char in[PATH_MAX + 512];

		shmrun_cb_describe(r->plan, where, in, sizeof(in));
		snprintf(r->cause, sizeof(r->cause),
			 "worker %u (CPU %d, tasks %s) was killed by signal %d (%s, %s)%s%.600s", w,
			 shmrun_plan_cpu_of(r->plan, w), tasks, WTERMSIG(status),
			 shmrun_signal_name(WTERMSIG(status)), strsignal(WTERMSIG(status)),
			 in[0] ? " while in " : "", in);
	}
	else if (WEXITSTATUS(status) == 3)
		snprintf(r->cause, sizeof(r->cause),
			 "worker %u (CPU %d, tasks %s) was stopped by a SIGTERM sent to "
			 "it (not to the launcher)",
			 w, shmrun_plan_cpu_of(r->plan, w), tasks);
	else {
		/* exit() called by operator code: the worker's own exits are
		 * outside every callback (cb_where 0) */
		uint64_t where = atomic_load_explicit(&stats[w].cb_where, memory_order_relaxed);
		char in[PATH_MAX + 512];

		if (shmrun_cb_describe(r->plan, where, in, sizeof(in)))
			snprintf(r->cause, sizeof(r->cause),
				 "worker %u (CPU %d, tasks %s) exited with exit status %d while "
				 "in %.560s: an operator must not call exit(); it returns a "
				 "negative errno after shmrun_task_error()",
				 w, shmrun_plan_cpu_of(r->plan, w), tasks, WEXITSTATUS(status), in);
		else
			snprintf(r->cause, sizeof(r->cause),
				 "worker %u (CPU %d, tasks %s) failed with exit status %d%s%s", w,
				 shmrun_plan_cpu_of(r->plan, w), tasks, WEXITSTATUS(status),
				 stats[w].error[0] ? ": " : "", stats[w].error);
	}
}

/*
 * Whether worker @w ended well: exit status 0 outside every operator
 * callback. Exit 0 from inside one is operator code calling exit(): the
 * worker's tasks never finished (a sink's output may be short), so it is a
 * failure like a crash, never a job done.
 */
static bool exited_well(struct run *r, uint32_t w, int status)
{
	struct shmrun_worker_stats *stats = shmrun_control_stats(r->ctl);

	return WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
	       !atomic_load_explicit(&stats[w].cb_where, memory_order_relaxed);
}

/*
 * Supervise phase, child exits: reap the workers that ended. One that ended
 * otherwise than with exit 0 ends the start: the others are killed. Return:
 * RUN_DONE (go on), RUN_SIGNALED (SIGPIPE: stop like a filter) or RUN_FAILED.
 */
static enum run_end reap_exits(struct run *r)
{
	for (uint32_t w = 0; w < r->plan->workers; w++) {
		int status;
		char tasks[256];

		if (r->pids[w] <= 0 || waitpid(r->pids[w], &status, WNOHANG) != r->pids[w])
			continue;
		shmrun_cb_watch_ended(&r->cw, r->plan, r->ctl, w, r->pids[w], shmrun_now_ns());
		r->pids[w] = 0;
		if (r->metrics) /* top and ps show `-` for a worker that exited */
			atomic_store_explicit(&shmrun_metrics_worker(r->metrics, w)->pid, 0,
					      memory_order_relaxed);
		r->running--;
		if (exited_well(r, w, status))
			continue;
		describe_tasks(r->plan, w, tasks, sizeof(tasks));
		if (WIFSIGNALED(status) && WTERMSIG(status) == SIGPIPE) {
			/* a stdout_sink's reader went away (shmrun job | head):
			 * stop like any Unix filter, without restarts */
			shmrun_log(SHMRUN_LOG_WARN,
				   "worker %u: its output pipe was closed (SIGPIPE); "
				   "stopping the job",
				   w);
			kill_all(r->pids, r->plan->workers, SIGKILL);
			reap_all(NULL, r->pids, r->plan->workers, 0);
			r->running = 0;
			r->signal = SIGPIPE;
			return RUN_SIGNALED;
		}
		note_exit_cause(r, w, status, tasks);
		shmrun_log(SHMRUN_LOG_ERROR, "%s", r->cause);
		kill_all(r->pids, r->plan->workers, SIGKILL);
		reap_all(NULL, r->pids, r->plan->workers, 0);
		r->running = 0;
		return RUN_FAILED;
	}
	return RUN_DONE;
}

/*
 * Serve what outside the job asks of it, once per supervision tick (at most
 * 100 ms apart), never blocking: the job's socket (jobsock.h: `shmrun top`,
 * `ps`, `stop`), the Prometheus endpoint, the progress line. Return: true if
 * a client asked the job to stop (served as a stop signal).
 */
/*
 * Hosts other than 0 run no coordinator, so nothing writes their metrics'
 * checkpoint line (metrics.h): mirror it from complete_epoch, which the
 * gateway copies from host 0 into this host's control area, so that `ps`
 * (CKPT_EPOCH, CKPT_AGE), top and Prometheus of host h show host 0's
 * checkpoints. The duration is host 0's to know: left 0 (top shows `-`);
 * the size is this host's tasks' state files.
 */
static void mirror_ckpt_metrics(struct run *r)
{
	struct shmrun_metrics *m = r->metrics;
	struct shmrun_task_slot *slots;
	uint64_t e, bytes = 0;

	if (r->host == 0 || !m || !r->ctl)
		return;
	e = atomic_load_explicit(&r->ctl->complete_epoch, memory_order_acquire);
	if (e <= atomic_load_explicit(&m->ckpt_epoch, memory_order_relaxed))
		return;
	slots = shmrun_control_slots(r->ctl);
	for (uint32_t k = 0; k < r->plan->ntasks; k++)
		if (r->plan->tasks[k].worker / r->plan->workers_per_host == r->host)
			bytes += slots[k].size;
	atomic_store_explicit(&m->ckpt_epoch, e, memory_order_relaxed);
	atomic_fetch_add_explicit(&m->ckpt_completed, 1, memory_order_relaxed);
	atomic_store_explicit(&m->ckpt_bytes, bytes, memory_order_relaxed);
	atomic_store_explicit(&m->ckpt_wall_ns, shmrun_wall_ns(), memory_order_relaxed);
}

static bool serve_outside(struct run *r)
{
	mirror_ckpt_metrics(r);
	shmrun_prom_serve(r->prom);
	shmrun_progress_tick(r->metrics); /* progress.c: at most 4 draws a second */
	/* kept until supervise() serves it: a tick that took SIGCHLD does not */
	r->stop_asked |= jobsock_serve(&r->js);
	return r->stop_asked;
}

/*
 * Supervise phase, hosts > 1: the gateway's report, once per tick. A peer
 * that aborted, vanished or went silent for host_timeout, or an MPI error,
 * ends this start: this host's workers are killed (the job cannot go on
 * without the other host's tasks) and the cause kept. Return: true if so.
 */
static bool gateway_lost(struct run *r)
{
	char why[768];
	int err = shmrun_gateway_poll(r->gw, why, sizeof(why));

	if (!err)
		return false;
	snprintf(r->cause, sizeof(r->cause), "%s%s",
		 err == -EIO ? "MPI failed in the gateway: " : "", why);
	shmrun_log(SHMRUN_LOG_ERROR, "%s; stopping this host's %u worker%s", r->cause, r->running,
		   r->running == 1 ? "" : "s");
	kill_all(r->pids, r->plan->workers, SIGKILL);
	reap_all(NULL, r->pids, r->plan->workers, 0);
	r->running = 0;
	return true;
}

/*
 * Supervise phase: until every worker has ended, take signals (sigtimedwait():
 * one ordered stream with child exits), watch for stopped workers and the
 * final epoch's deadline, reap exits. Return: RUN_DONE, RUN_SIGNALED, RUN_FAILED.
 */
static enum run_end supervise(struct run *r)
{
	const struct shmrun_job *job = r->job;
	enum run_end end = RUN_DONE;

	/* 100 ms, or operator_timeout/4 when that is shorter */
	int64_t tick_ns = shmrun_cb_watch_tick_ns(job->operator_timeout_ns, 100000000);

	r->wt.stopped_ns = calloc(r->plan->workers, sizeof(*r->wt.stopped_ns));
	r->wt.told = calloc(r->plan->workers, sizeof(*r->wt.told));
	if (job->operator_timeout_ns && shmrun_cb_watch_init(&r->cw, r->plan->workers))
		shmrun_log(SHMRUN_LOG_WARN, "out of memory: operator_timeout is not watched");
	while (r->running) {
		struct timespec tick = {tick_ns / 1000000000, tick_ns % 1000000000};
		siginfo_t info;
		int sig = sigtimedwait(&r->set, &info, &tick);
		bool forwarded = sig > 0 && info.si_code == SI_QUEUE &&
				 info.si_value.sival_int == STOP_FORWARDED;

		if (serve_outside(r) && (sig <= 0 || is_stop_signal(sig))) {
			/* `shmrun stop JOB`: a stop request, as from outside (with a stop
			 * signal taken in the same tick: the same request) */
			if (sig <= 0) {
				sig = SIGTERM;
				forwarded = false;
				r->stop_cmd = true;
			}
			r->stop_asked = false;
		}
		watch_workers(&r->wt, r->plan, r->pids, shmrun_now_ns());
		shmrun_cb_watch(&r->cw, r->plan, r->ctl, r->pids, shmrun_now_ns());
		if (final_epoch_overdue(r)) {
			end = RUN_SIGNALED;
			break;
		}
		if (is_stop_signal(sig)) {
			bool ended = serve_stop(r, sig, forwarded);

			r->stop_cmd = false;
			if (ended) {
				end = RUN_SIGNALED;
				break;
			}
			continue;
		}
		end = reap_exits(r);
		if (end == RUN_DONE && r->gw && gateway_lost(r))
			end = RUN_FAILED;
	}
	return end;
}

/*
 * End phase, hosts > 1: every local worker has ended. After the final epoch
 * (RUN_DONE) the gateway drains, exchanges end-of-stream with its peers and
 * finalizes MPI; otherwise it tells the peers to abort (they stop and exit
 * 75 as this host will), which also ends it. Return: @end, or RUN_FAILED if
 * the gateway could not end cleanly.
 */
static enum run_end finish_gateway(struct run *r, enum run_end end)
{
	int err;

	if (end != RUN_DONE) {
		shmrun_gateway_abort(r->gw, r->cause[0] ? r->cause : "stopped");
		(void)shmrun_gateway_finish(r->gw); /* joins and frees it; the peers know */
	} else if ((err = shmrun_gateway_finish(r->gw))) {
		r->gw = NULL;
		snprintf(r->cause, sizeof(r->cause),
			 "this host's workers ended, but its gateway did not end cleanly: %s",
			 strerror(-err));
		shmrun_log(SHMRUN_LOG_ERROR, "%s", r->cause);
		end = RUN_FAILED;
	}
	r->gw = NULL;
	free(r->gw_rings);
	r->gw_rings = NULL;
	return end;
}

/*
 * End phase: how the start ended (a stop served to its end is RUN_STOPPED at
 * the final epoch), then its pids, watchdog and segment are released.
 */
static enum run_end finish_start(struct run *r, enum run_end end)
{
	if (r->gw)
		end = finish_gateway(r, end);
	/* several hosts: a stop asked on another host ends this one too, by its
	 * final epoch (final_is_stop, mirrored from host 0 by the gateway) */
	if (end == RUN_DONE &&
	    (r->stopping ||
	     (r->multi && r->job->checkpoint_dir &&
	      atomic_load_explicit(&r->ctl->final_is_stop, memory_order_acquire)))) {
		end = RUN_STOPPED;
		r->epoch = atomic_load_explicit(&r->ctl->final_epoch, memory_order_acquire);
	}
	shmrun_progress_pause(); /* the report, or a restart's lines, follow */
	free(r->wt.stopped_ns);
	free(r->wt.told);
	shmrun_cb_watch_free(&r->cw);
	free(r->pids);
	shmrun_segment_close(&r->seg);
	return end;
}

/* One start of the job, phase by phase: start, supervise, end. */
static enum run_end run_once(struct run *r)
{
	enum run_end end = start_workers(r);

	if (end == RUN_DONE)
		end = supervise(r);
	return finish_start(r, end);
}

/* mkdir -p @path. Return: 0, or -1 with errno set. */
static int make_dirs(const char *path)
{
	struct stat st;
	/* 0700: checkpoints may hold secrets */
	int err = shmrun_mkdir_p(path, 0700, SHMRUN_MKDIR_EXACT);

	if (err) {
		errno = -err;
		return -1;
	}
	if (stat(path, &st) < 0)
		return -1;
	if (!S_ISDIR(st.st_mode)) {
		errno = ENOTDIR;
		return -1;
	}
	return 0;
}


/*
 * Whether the failure of this start cannot be cured by a restart: a
 * checkpoint write or an operator failed with EACCES, EPERM or EROFS, a
 * record bigger than any ring (EMSGSIZE), a file too big (EFBIG), a worker
 * was killed by SIGXFSZ or SIGXCPU (signal_is_incurable()), or the final
 * checkpoint ran out of space. Logged with the cause (which names the path)
 * when so.
 */
static bool incurable(const struct shmrun_job *job, const struct run *r)
{
	struct shmrun_worker_stats *stats = shmrun_control_stats(r->ctl);
	int err = atomic_load_explicit(&r->ctl->failed_errno, memory_order_relaxed);

	if (r->fatal_signal) {
		shmrun_log(SHMRUN_LOG_ERROR,
			   "job %s failed: %s; a restart cannot cure it, so it is not restarted: "
			   "fix the cause, then run it again%s",
			   job->name, r->cause,
			   job->checkpoint_dir ? " (it resumes from the last complete checkpoint)"
					       : "");
		return true;
	}
	for (uint32_t w = 0; w < r->plan->workers && !errno_is_incurable(err); w++) {
		int e = atomic_load_explicit(&stats[w].fail_errno, memory_order_relaxed);

		if (errno_is_incurable(e))
			err = e;
	}
	if (!errno_is_incurable(err) && !shmrun_errno_is_lasting(err))
		return false;
	shmrun_log(SHMRUN_LOG_ERROR,
		   "job %s failed: %s; a restart cannot cure %s, so it is not restarted: fix "
		   "the cause, then run it again%s",
		   job->name, r->ctl->failed_why[0] ? r->ctl->failed_why : r->cause,
		   err == EILSEQ ? "a malformed input record (it would meet it again)"
				 : strerror(err),
		   job->checkpoint_dir ? " (it resumes from the last complete checkpoint)" : "");
	return true;
}

/*
 * Sleep @ts unless SIGINT, SIGTERM or SIGHUP comes, serving the job's socket,
 * the Prometheus endpoint and the progress line every 100 ms meanwhile
 * (serve_outside()): `shmrun top`, `ps` and scrapes see the restart; a
 * `shmrun stop` then counts as SIGTERM. Return: that signal, or 0.
 */
static int backoff_wait(struct run *r, const struct timespec *ts)
{
	int64_t end = shmrun_now_ns() + (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;

	for (;;) {
		int64_t left = end - shmrun_now_ns();
		struct timespec t;
		siginfo_t info;
		int sig;

		if (left <= 0)
			return 0;
		if (left > 100000000)
			left = 100000000;
		t = (struct timespec){left / 1000000000, left % 1000000000};
		sig = sigtimedwait(&r->set, &info, &t);
		if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP)
			return sig;
		while (waitpid(-1, NULL, WNOHANG) > 0)
			; /* stray children of the previous start */
		if (serve_outside(r)) {
			r->stop_asked = false;
			return SIGTERM;
		}
	}
}

void shmrun_die_by_signal(int sig)
{
	struct sigaction sa;
	sigset_t set;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_IGN; /* discards other stop signals still pending */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sa.sa_handler = SIG_DFL;
	sigaction(sig, &sa, NULL);
	fflush(NULL);
	sigemptyset(&set);
	sigaddset(&set, sig);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	raise(sig);
	exit(128 + sig);
}

int shmrun_prepare(const struct shmrun_job *job, const struct shmrun_plan *plan)
{
	char msg[2 * PATH_MAX + 1024]; /* room for two paths: a message is never cut short */
	int failed = 0;

	for (uint32_t s = 0; s < job->nstages; s++) {
		int line;

		if (shmrun_task_prepare_stage(plan, s, msg, sizeof(msg), &line)) {
			char at[PATH_MAX + 16];

			shmrun_log(SHMRUN_LOG_ERROR, "%s: %s; nothing was started",
				   shmrun_conf_at(at, sizeof(at), job->conf_path, line), msg);
			failed = -EINVAL;
		}
	}
	return failed;
}

/*
 * The job's socket (jobsock.h): the job's name taken before the run's locks
 * create anything, so that a second job of the same name is refused (exit 2)
 * having created nothing. A second run of the same job is refused as before,
 * naming the run that holds its checkpoint_dir or an output
 * (shmrun_lock_job_check()). A runtime directory that cannot be used only
 * loses `shmrun ps`, `stop` and `top` for this job. Return: 0, or -1
 * (logged): refused.
 */
static int open_jobsock(struct run *r)
{
	char why[PATH_MAX + 256], name[JOBSOCK_NAME_MAX + 1];
	int err;

	/* hosts > 1: NAME.hH, so that two "hosts" on one machine do not refuse
	 * each other; a second start of the job is still refused on each */
	if (r->multi)
		snprintf(name, sizeof(name), "%s.h%u", r->job->name, r->host);
	else
		snprintf(name, sizeof(name), "%s", r->job->name);
	err = jobsock_open(&r->js, name, -1, why, sizeof(why));

	if (err == -EEXIST && shmrun_lock_job_check(r->job))
		return -1; /* the refusal names the holder of checkpoint_dir or an output */
	if (err == -EEXIST || err == -EINVAL) {
		shmrun_log(SHMRUN_LOG_ERROR, "%s: %s; nothing was started", r->job->conf_path, why);
		return -1;
	}
	if (err)
		shmrun_log(SHMRUN_LOG_WARN,
			   "job %s: no socket to attach to (%s); shmrun ps, stop and top will not "
			   "see it",
			   r->job->name, why);
	return 0;
}

/*
 * Before the first start: each stage's prepare(), the preflight of every
 * path, the job's name (open_jobsock()), the Prometheus endpoint bound
 * ([job] metrics: r->prom), the run's locks, checkpoint_dir created, and a
 * warning when checkpoints cannot use io_uring. Return: 0, or -1 (logged):
 * nothing started.
 */
static int prepare_and_lock(struct run *r)
{
	const struct shmrun_job *job = r->job;

	if (shmrun_prepare(job, r->plan) || shmrun_preflight(job) || open_jobsock(r))
		return -1;
	for (uint32_t s = 0; s < job->nstages; s++)
		if (job->stages[s].op->flags & SHMRUN_OP_UNREPLAYABLE)
			shmrun_log(SHMRUN_LOG_WARN, "%s: %s cannot be replayed: %s (at-most-once)",
				   job->stages[s].name, job->stages[s].op->name,
				   job->checkpoint_dir
				       ? "records read since the last checkpoint are lost on a "
					 "crash"
				       : "records it read are lost on a crash, and without "
					 "checkpoint_dir there is no recovery at all");
	if (job->metrics) {
		/* before the locks, which create missing outputs (empty): a
		 * port in use refuses the run having created nothing */
		char why[512];

		r->prom = shmrun_prom_start(job->metrics, job->name, why, sizeof(why));
		if (!r->prom) {
			char at[PATH_MAX + 16];

			shmrun_log(SHMRUN_LOG_ERROR, "%s: %s; nothing was started",
				   shmrun_conf_at(at, sizeof(at), job->conf_path,
						  job->metrics_line),
				   why);
			return -1;
		}
	}
	/* before anything reads, moves or creates checkpoints or outputs (STREAM_RESET_STATE,
	 * the restore): a second live run is refused here, having touched nothing */
	if (shmrun_lock_job(job))
		return -1;
	if (job->checkpoint_dir && make_dirs(job->checkpoint_dir)) {
		shmrun_log(SHMRUN_LOG_ERROR,
			   "%s: checkpoint_dir %s cannot be created: %s; nothing was started",
			   job->conf_path, job->checkpoint_dir, strerror(errno));
		return -1;
	}
	if (job->checkpoint_dir) {
		/*
		 * One probe, one warning for the run: the workers' writers fall back
		 * the same way (their own io_uring_queue_init() fails alike: seccomp
		 * filters and rlimits are inherited) without a word. Depth 32, the
		 * largest the writers use (snapshot.c): a low RLIMIT_MEMLOCK that
		 * allows a smaller ring would not show here.
		 */
		struct shmrun_ckpt_writer w;
		char why[512] = "";

		if (shmrun_ckpt_writer_init(&w, 32, why, sizeof(why)) == 0) {
			if (why[0])
				shmrun_log(SHMRUN_LOG_WARN, "%s", why);
			shmrun_ckpt_writer_close(&w);
		}
	}
	return 0;
}

/*
 * Signals for the run: SIGCHLD and the stop signals blocked, taken by
 * sigtimedwait() (supervise(), restart_backoff()); r->oldmask, the workers'
 * mask, without them.
 */
static void block_signals(struct run *r)
{
	sigemptyset(&r->set);
	sigaddset(&r->set, SIGCHLD);
	sigaddset(&r->set, SIGINT);
	sigaddset(&r->set, SIGTERM);
	sigaddset(&r->set, SIGHUP); /* the terminal went away: stop like SIGTERM */
	sigprocmask(SIG_BLOCK, &r->set, &r->oldmask);
	/* shmrun's main() blocks stop signals from its start (a signal before
	 * this point is served as a stop below): workers must not inherit that,
	 * and the end of the run restores their default action */
	sigdelset(&r->oldmask, SIGCHLD);
	sigdelset(&r->oldmask, SIGINT);
	sigdelset(&r->oldmask, SIGTERM);
	sigdelset(&r->oldmask, SIGHUP);
}

/*
 * Whether a stop of the whole job was asked: by a signal or `shmrun stop`
 * this launcher serves, or, with several hosts, on another host (its
 * stop_requested, mirrored by the gateways). A failure after it, a final
 * checkpoint that could not be taken, ends the run as stopped at the last
 * complete checkpoint on every host: never exit 75, after which `shmrun
 * supervise` would start the job the user stopped again.
 */
static bool job_stop_asked(const struct run *r)
{
	return (r->signal && r->stopping) ||
	       (r->multi && atomic_load_explicit(&r->ctl->stop_requested, memory_order_acquire));
}

/*
 * Result of a start that ended with @end after @attempt restarts: done, stopped, signaled,
 * refused, or failed for good (stop requested, incurable, no attempts left).
 * Return: the exit status, or -1 to restart.
 */
static int start_result(struct run *r, enum run_end end, uint32_t attempt)
{
	const struct shmrun_job *job = r->job;

	if (end == RUN_DONE) {
		print_summary(r->plan, r->metrics, shmrun_control_stats(r->ctl),
			      shmrun_now_ns() - r->start_ns);
		print_stalls(r->plan, shmrun_control_stats(r->ctl));
		return 0;
	}
	if (end == RUN_STOPPED) {
		print_stalls(r->plan, shmrun_control_stats(r->ctl));
		shmrun_log(SHMRUN_LOG_INFO, "stopped at epoch %" PRIu64
					    "; run the same topology again to resume",
			   r->epoch);
		shmrun_log_plain("stopped at epoch %" PRIu64 "\n", r->epoch);
		return 0;
	}
	if (end == RUN_SIGNALED)
		return 128 + r->signal;
	if (end == RUN_NOSTART && r->refused) {
		/* a checkpoint of another topology: a refusal before the
		 * start, as `shmrun check` reports it (exit 2: systemd's
		 * RestartPreventExitStatus=2 does not loop on it) */
		shmrun_log(SHMRUN_LOG_ERROR, "%s: the checkpoint to restore does not fit "
					     "this topology (see above); nothing was started",
			   job->conf_path);
		return 2;
	}
	if (end == RUN_NOSTART && r->hosts_refused) {
		shmrun_log(SHMRUN_LOG_ERROR, "%s: the hosts did not agree (see above); nothing was "
					     "started",
			   job->conf_path);
		return 2;
	}
	if (end == RUN_NOSTART)
		return 1;
	/* RUN_FAILED */
	if (job_stop_asked(r) && job->checkpoint_dir && !r->fatal_signal && !incurable(job, r)) {
		/* a stop with checkpoint whose final epoch a worker's death
		 * (curable: it would have been restarted) cut short: nothing
		 * runs now, and the last complete checkpoint is where a rerun
		 * resumes, exactly as for a stop during the restart backoff
		 * that follows such a death. Which of the two came first (the
		 * stop signal, or the death, by a millisecond) must not change
		 * the outcome: exit 0, `stopped at epoch e`. */
		uint64_t e = shmrun_ckpt_newest_complete(job->checkpoint_dir, NULL);

		shmrun_log(SHMRUN_LOG_WARN,
			   "%s: the final checkpoint was not taken after: %s; stopping at the "
			   "last complete checkpoint",
			   r->signal ? strsignal(r->signal) : "a stop asked on another host",
			   r->cause);
		r->end = RUN_STOPPED;
		r->epoch = e; /* the summary file's "stopped at epoch" */
		shmrun_log_plain("stopped at epoch %" PRIu64 "\n", e);
		return 0;
	}
	if (r->signal) {
		/* a stop was requested: never restart; the final checkpoint
		 * was not taken, the last complete one is where a rerun
		 * resumes */
		shmrun_log(SHMRUN_LOG_ERROR,
			   "%s: stopping without a final checkpoint after: %s; a rerun "
			   "resumes from epoch %" PRIu64,
			   strsignal(r->signal), r->cause,
			   job->checkpoint_dir ? shmrun_ckpt_newest_complete(job->checkpoint_dir, NULL) : 0);
		return 128 + r->signal;
	}
	if (incurable(job, r))
		return 1;
	if (r->multi && job->checkpoint_dir) {
		/* no restart here: a restart forks, and no process may fork after
		 * MPI_Init; every host exits 75, and the outer loop (shmrun
		 * supervise -- mpirun ...) starts the job again, which restores
		 * from the last complete checkpoint */
		shmrun_log(SHMRUN_LOG_ERROR,
			   "job %s failed on host %u: %s; exit status 75: a multi-host job "
			   "restarts from outside (shmrun supervise -- mpirun ..., "
			   "docs/multihost.md), from its last complete checkpoint",
			   job->name, r->host, r->cause);
		return 75;
	}
	if (!job->checkpoint_dir || attempt >= job->restart_attempts) {
		shmrun_log(SHMRUN_LOG_ERROR, "job %s failed%s", job->name,
			   job->checkpoint_dir ? ": no restart attempts left"
					       : " (no checkpoint_dir: not restarted)");
		return 1;
	}
	return -1;
}

/*
 * Backoff before restart @attempt (from 1): 0.1 s doubling to 3.2 s, the
 * failed start's control area destroyed first. Return: true if a stop
 * signal came meanwhile (the run ends, exit 0), false to start again.
 */
static bool restart_backoff(struct run *r, uint32_t attempt)
{
	const struct shmrun_job *job = r->job;
	struct timespec backoff;

	{
		int64_t ns = 100000000ll << (attempt < 6 ? attempt - 1 : 5);

		backoff.tv_sec = ns / 1000000000;
		backoff.tv_nsec = ns % 1000000000;
		shmrun_log(SHMRUN_LOG_WARN,
			   "restart %u of %u in %.1f s after: %s", attempt,
			   job->restart_attempts, (double)ns / 1e9, r->cause);
	}
	shmrun_control_destroy(r->ctl);
	r->ctl = NULL;
	{
		int sig = backoff_wait(r, &backoff);

		if (sig) {
			/* nothing runs now: the last complete checkpoint is where a
			 * rerun resumes, as after a stop with checkpoint */
			uint64_t e = shmrun_ckpt_newest_complete(job->checkpoint_dir, NULL);

			shmrun_log(SHMRUN_LOG_WARN, "%s during restart backoff: stopping",
				   strsignal(sig));
			r->epoch = e; /* the summary file's "stopped at epoch" */
			shmrun_log_plain("stopped at epoch %" PRIu64 "\n", e);
			return true;
		}
	}
	return false;
}

/* The restart loop: start the job until a start ends the run. Return: the exit status. */
static int restart_loop(struct run *r)
{
	uint32_t attempt = 0;
	int rc;

	for (;;) {
		enum run_end end = run_once(r);

		r->end = end;
		rc = start_result(r, end, attempt);
		if (rc >= 0)
			break;
		attempt++;
		if (r->metrics)
			atomic_store_explicit(&r->metrics->state, SHMRUN_JOB_RESTARTING,
					      memory_order_relaxed);
		if (restart_backoff(r, attempt)) {
			r->end = RUN_STOPPED;
			rc = 0;
			break;
		}
	}
	return rc;
}

/*
 * After the last start: pending signals taken, the mask the run began with
 * restored except that the stop signals stay blocked, as shmrun's main()
 * blocked them. The run is over and its outcome decided: a stop signal that
 * comes now (a late copy passed on by a worker or a group's, or a new one
 * while the process exits, which under a leak checker takes long) must not
 * kill a job that ended with exit status 0. A run ended by a signal dies by it
 * through shmrun_die_by_signal(), which unblocks it.
 */
static void unblock_signals(struct run *r)
{
	struct timespec zero = {0, 0};
	sigset_t mask = r->oldmask;
	siginfo_t info;

	while (sigtimedwait(&r->set, &info, &zero) > 0)
		;
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_SETMASK, &mask, NULL);
	shmrun_fault_slow_exit();
}

/*
 * The summary file (--summary, summary.c) of a run that started and ended
 * with exit status @rc, every worker reaped: how it ended, from r->end.
 */
static void write_summary(const struct run *r, int rc)
{
	struct shmrun_summary_end end = {.exit_status = rc, .status = "done"};
	const char *path = shmrun_summary_path();

	if (!path)
		return;
	if (rc > 128) {
		end.status = "signaled";
		end.signal = rc - 128;
		end.cause = r->end == RUN_FAILED ? r->cause : NULL;
	} else if (rc) {
		end.status = "failed";
		end.cause = r->refused ? "the checkpoint to restore does not fit this topology"
			    : r->cause[0] ? r->cause
					  : "the job could not start (see the log)";
	} else if (r->end == RUN_STOPPED) {
		end.status = "stopped";
		end.epoch = r->epoch;
	}
	shmrun_summary_write(path, r->metrics, r->plan, &end, shmrun_now_ns() - r->start_ns);
}

int shmrun_run(const struct shmrun_job *job)
{
	struct shmrun_plan *plan = NULL;
	struct run r = {.job = job, .start_ns = shmrun_now_ns(), .metrics_fd = -1};
	const char *counters = getenv("SHMRUN_COUNTERS");
	int rc = 2;

	shmrun_log_set_job(job->name); /* also when embedded, without cli.c */
	for (uint32_t i = 0; i < job->nwarnings; i++)
		shmrun_log(SHMRUN_LOG_WARN, "%s", job->warnings[i]);
	if (shmrun_reset_checked() < 0)
		return 2;
	{
		char why[1024];
		uint32_t host;

		if (shmrun_hosts_check(job, &host, why, sizeof(why))) {
			shmrun_log(SHMRUN_LOG_ERROR, "%s; nothing was started", why);
			return 2;
		}
		r.host = host;
	}
	if (shmrun_plan_build(job, &plan))
		return 2;
	r.plan = plan;
	/* this host's workers: global g = host * workers + i (plan.h) */
	r.multi = plan->hosts > 1;
	r.lo = r.host * plan->workers_per_host;
	r.nlocal = r.multi ? plan->workers_per_host : plan->workers;
	if (prepare_and_lock(&r))
		goto out;
	if (!counters || strcmp(counters, "off") != 0) {
		r.metrics = shmrun_metrics_create(plan, &r.metrics_fd);
		if (!r.metrics) {
			shmrun_log(SHMRUN_LOG_ERROR, "cannot create the metrics block: %s",
				   strerror(errno));
			rc = 1;
			goto out;
		}
		shmrun_run_metrics = r.metrics;
		shmrun_prom_attach(r.prom, r.metrics);
	}
	if (jobsock_set_metrics(&r.js, r.metrics_fd))
		shmrun_log(SHMRUN_LOG_WARN, "job %s: its socket serves no counters: %s", job->name,
			   strerror(errno));
	block_signals(&r);
	rc = restart_loop(&r);
	if (r.metrics) {
		for (uint32_t w = 0; w < plan->workers; w++) /* every one reaped */
			atomic_store_explicit(&shmrun_metrics_worker(r.metrics, w)->pid, 0,
					      memory_order_relaxed);
		atomic_store_explicit(&r.metrics->exit_status, rc, memory_order_relaxed);
		atomic_store_explicit(&r.metrics->state, rc ? SHMRUN_JOB_FAILED : SHMRUN_JOB_DONE,
				      memory_order_relaxed);
	}
	write_summary(&r, rc);
	unblock_signals(&r);
out:
	if (rc && !r.starts)
		shmrun_lock_job_undo(); /* refused before any worker: no output left behind */
	shmrun_prom_stop(r.prom);
	jobsock_close(&r.js);
	shmrun_run_metrics = NULL;
	shmrun_metrics_destroy(r.metrics, r.metrics_fd);
	shmrun_control_destroy(r.ctl);
	shmrun_plan_free(plan);
	return rc;
}
