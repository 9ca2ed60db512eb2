/*
 * tests/mpi/gateway_pair.c: the multi-host gateway (runtime/gateway.c) between
 * two MPI ranks on one machine, without workers or a segment: each rank lays
 * out its rings and a control area in private memory, threads of its own play
 * the producing and consuming workers, and the gateways carry the frames.
 * Run by ctest under `mpirun -np 2` (tests/mpi/tests.cmake); this program
 * never calls MPI itself (the gateway thread is the only MPI caller).
 *
 *   gateway_pair stream   frames both ways on three channels, one of them a
 *                         4 KiB ring (credits, skip markers, a consumer that
 *                         naps): order, content, counts and kinds exact; the
 *                         control area mirrored (epochs and failed_why 0 -> 1,
 *                         a task slot and a stop request 1 -> 0); poll stays
 *                         0 throughout (a frame that did not fit its ring
 *                         would be a credit overrun, -EPROTO); finish 0.
 *   gateway_pair timeout  rank 1's gateway goes silent after 300 ms
 *                         (SHMRUN_TEST_GATEWAY_MUTE): rank 0's poll returns
 *                         -EPIPE naming host 1 within host_timeout (1 s) plus
 *                         slack; both ranks exit 75, as a launcher does.
 *   gateway_pair eos      rank 0 finishes at once (its "workers" are done),
 *                         rank 1 goes on as if its workers still ran: rank
 *                         1's poll returns -EPIPE ("host 0 ended its
 *                         stream, but this host's workers still run") after
 *                         host_timeout (1 s) instead of waiting forever;
 *                         rank 1 exits 75.
 *
 * Prints "PASS <what>" lines that tests/mpi/run.sh checks; exit 0 on success.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "control.h"
#include "gateway.h"
#include "plan.h"
#include "shmrun/ring.h"

/* frames per channel before its END (so NFRAMES(c) + 1 in all): fewer on the
 * 4 KiB ring, which a round trip of credits paces */
#define NFRAMES(c)    (chans[c].cap == 4096 ? 3000u : 20000u)
#define BARRIER_EVERY 997u

static int rank = -1;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "rank %d: %s:%d: FAIL %s: ", rank, __FILE__, __LINE__,     \
				#cond);                                                            \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * The fake plan: 2 hosts x 1 worker; task t runs on worker (host) t % 2.
 * Channels (the same table on both ranks):
 *   0: task 0 -> task 1, 64 KiB ring   (host 0 -> host 1)
 *   1: task 1 -> task 0, 64 KiB ring   (host 1 -> host 0)
 *   2: task 2 -> task 3, 4 KiB ring    (host 0 -> host 1; credits)
 */
#define NCHAN 3
static const struct {
	uint32_t src, dst;
	uint64_t cap;
} chans[NCHAN] = {{0, 1, 65536}, {1, 0, 65536}, {2, 3, 4096}};

struct side {
	uint32_t channel;
	void *mem;
	size_t len;
	struct shmrun_bell bell; /* the "worker" thread sleeps here */
	struct shmrun_ring r;
	pthread_t th;
	uint64_t frames, bytes; /* consumer: received */
	uint64_t alone;		/* consumer: frames behind a skip published alone */
	bool slow;		/* consumer naps now and then */
	uint32_t want;		/* producer: payload bytes it waits room for */
};

/*
 * Payload bytes of frame @i of channel @c (at most @max, the ring's largest).
 * On the 4 KiB ring a period of 17 frames puts the largest frame (2056 ring
 * bytes) at offset capacity / 2: largest, 248 bytes, then 15 of 256 bytes.
 * Its skip marker is then published alone (ring.h), which the gateway must
 * reproduce on the other host before the frame fits there.
 */
static uint32_t payload_len(uint32_t c, uint32_t i, uint32_t max)
{
	uint32_t n = 12 + (i * 7919u) % 9000u;

	if (chans[c].cap == 4096)
		n = i % 17 == 0 ? max : i % 17 == 1 ? 248 - 24 : 256 - 24;
	return n < max ? n : max;
}

/* Payload of frame @i of channel @c: [u64 i][u32 c][filler]. */

static void fill(unsigned char *p, uint32_t c, uint32_t i, uint32_t len)
{
	uint64_t v = i;

	memcpy(p, &v, 8);
	memcpy(p + 8, &c, 4);
	for (uint32_t k = 12; k < len; k++)
		p[k] = (unsigned char)(i * 31 + k + c);
}

static bool writable(void *arg)
{
	struct side *s = arg;

	return shmrun_ring_writable(&s->r, s->want);
}

static bool readable(void *arg)
{
	struct side *s = arg;

	return shmrun_ring_readable(&s->r);
}

/* The producing "worker" of an outbound ring. */
static void *producer(void *arg)
{
	struct side *s = arg;
	uint32_t c = s->channel, max = shmrun_ring_max_payload(&s->r);
	unsigned char buf[16384];

	for (uint32_t i = 0; i <= NFRAMES(c); i++) {
		uint16_t kind = i == NFRAMES(c)				   ? SHMRUN_FRAME_END
				: (i % BARRIER_EVERY == BARRIER_EVERY - 1) ? SHMRUN_FRAME_BARRIER
									   : SHMRUN_FRAME_DATA;
		uint32_t len = kind == SHMRUN_FRAME_DATA ? payload_len(c, i, max) : 12;
		int err;

		fill(buf, c, i, len);
		s->want = len;
		for (;;) {
			err = shmrun_ring_write(&s->r, kind, chans[c].src, chans[c].dst, buf, len);
			if (err != -EAGAIN)
				break;
			shmrun_ring_flush(&s->r);
			/* the gateway rings this bell when it frees room */
			shmrun_bell_sleep(&s->bell, writable, s, 200000000);
		}
		CHECK(err == 0, "channel %u frame %u: write %d", c, i, err);
		if (kind != SHMRUN_FRAME_DATA)
			shmrun_ring_flush(&s->r);
	}
	shmrun_ring_flush(&s->r);
	return NULL;
}

/* The consuming "worker" of an inbound ring: checks order, content, kinds. */
static void *consumer(void *arg)
{
	struct side *s = arg;
	uint32_t c = s->channel;
	unsigned char want[16384];
	uint32_t max = shmrun_ring_max_payload(&s->r);
	uint64_t last_end = shmrun_ring_position(&s->r);

	for (uint32_t i = 0;;) {
		const struct shmrun_frame *f;
		int err = shmrun_ring_peek(&s->r, &f);
		uint16_t kind;
		uint32_t len;

		if (err == -EAGAIN) {
			/* the gateway rings this bell when it publishes */
			shmrun_bell_sleep(&s->bell, readable, s, 200000000);
			continue;
		}
		CHECK(err == 0, "channel %u: peek %d", c, err);
		{
			uint64_t pos = shmrun_ring_position(&s->r);
			uint64_t cap = shmrun_ring_capacity(&s->r);

			if (pos - last_end + shmrun_ring_frame_bytes_(f->len) > cap)
				s->alone++;
			last_end = pos + shmrun_ring_frame_bytes_(f->len);
		}
		kind = i == NFRAMES(c)				  ? SHMRUN_FRAME_END
		       : (i % BARRIER_EVERY == BARRIER_EVERY - 1) ? SHMRUN_FRAME_BARRIER
								  : SHMRUN_FRAME_DATA;
		len = kind == SHMRUN_FRAME_DATA ? payload_len(c, i, max) : 12;
		CHECK(f->kind == kind, "channel %u frame %u: kind %u, want %u", c, i, f->kind,
		      kind);
		CHECK(f->len == len, "channel %u frame %u: len %u, want %u", c, i, f->len, len);
		CHECK(f->src_task == chans[c].src && f->dst_task == chans[c].dst,
		      "channel %u frame %u: tasks %u -> %u", c, i, f->src_task, f->dst_task);
		fill(want, c, i, len);
		CHECK(memcmp(f->payload, want, len) == 0, "channel %u frame %u: payload differs", c,
		      i);
		s->bytes += f->len;
		shmrun_ring_release(&s->r, f);
		s->frames++;
		if (kind == SHMRUN_FRAME_END)
			break;
		i++;
		if (s->slow && i % 512 == 0) {
			/* let the ring fill up: the sender must wait for credits */
			struct timespec ts = {0, 5000000};

			shmrun_ring_consumer_flush(&s->r);
			nanosleep(&ts, NULL);
		}
	}
	shmrun_ring_consumer_flush(&s->r);
	return NULL;
}

static void wait_until(struct shmrun_gateway *g, bool (*cond)(void *), void *arg, const char *what)
{
	int64_t end = now_ns() + 60000000000;
	char why[512];

	while (!cond(arg)) {
		int st = shmrun_gateway_poll(g, why, sizeof(why));

		CHECK(st == 0, "waiting for %s: gateway failed %d: %s", what, st, why);
		CHECK(now_ns() < end, "%s did not happen within 60 s", what);
		usleep(1000);
	}
}

static struct shmrun_control *ctl;

static bool epochs_mirrored(void *arg)
{
	(void)arg;
	return atomic_load(&ctl->trigger_epoch) == 5 && atomic_load(&ctl->complete_epoch) == 4 &&
	       atomic_load(&ctl->final_epoch) == 5 && atomic_load(&ctl->final_is_stop) == 1 &&
	       atomic_load(&ctl->failed) == 1;
}

static bool slot_mirrored(void *arg)
{
	struct shmrun_task_slot *s = &shmrun_control_slots(ctl)[1];

	(void)arg;
	return atomic_load(&s->done_epoch) == 3 && atomic_load(&s->exhausted) == 1 &&
	       atomic_load(&ctl->stop_requested) == 1;
}

static bool threads_done(void *arg)
{
	struct side *sides = arg;

	for (int i = 0; i < NCHAN; i++)
		if (sides[i].mem && chans[i].dst % 2 == (uint32_t)rank &&
		    sides[i].frames != NFRAMES(i) + 1)
			return false;
	return true;
}

int main(int argc, char **argv)
{
	const char *r = getenv("OMPI_COMM_WORLD_RANK"), *n = getenv("OMPI_COMM_WORLD_SIZE");
	bool timeout_mode = argc > 1 && strcmp(argv[1], "timeout") == 0;
	bool eos_mode = argc > 1 && strcmp(argv[1], "eos") == 0;
	struct shmrun_plan_task tasks[4];
	struct shmrun_plan plan = {.workers = 2, .ntasks = 4, .tasks = tasks};
	struct side sides[NCHAN];
	struct shmrun_gateway_ring grings[NCHAN];
	struct shmrun_gateway_conf conf;
	struct shmrun_gateway *g;
	uint32_t ng = 0;
	char why[512];
	int err;

	if (!r || !n) {
		fprintf(stderr, "run me under mpirun -np 2\n");
		return 77;
	}
	rank = atoi(r);
	CHECK(atoi(n) == 2, "world size %s", n);
	setvbuf(stdout, NULL, _IONBF, 0);
	for (uint32_t t = 0; t < 4; t++)
		tasks[t] = (struct shmrun_plan_task){.worker = t % 2};
	ctl = shmrun_control_create(2, 4);
	CHECK(ctl, "control area");
	memset(sides, 0, sizeof(sides));
	for (uint32_t c = 0; c < NCHAN; c++) {
		bool out = chans[c].src % 2 == (uint32_t)rank;
		struct side *s = &sides[c];

		s->channel = c;
		s->len = shmrun_ring_memsize(chans[c].cap);
		s->mem = aligned_alloc(64, s->len);
		CHECK(s->mem && shmrun_ring_init(s->mem, s->len, chans[c].cap) == 0, "ring %u", c);
		grings[ng++] = (struct shmrun_gateway_ring){
		    .channel = c,
		    .peer_host = 1 - (uint32_t)rank,
		    .outbound = out,
		    .mem = s->mem,
		    .len = s->len,
		    .bell = &s->bell,
		};
	}
	conf = (struct shmrun_gateway_conf){
	    .host = (uint32_t)rank,
	    .hosts = 2,
	    .plan = &plan,
	    .workers_per_host = 1,
	    .ctl = ctl,
	    .rings = grings,
	    .nrings = ng,
	    .flush_ns = 1000000,
	    .timeout_ns = timeout_mode || eos_mode ? 1000000000 : 10000000000,
	};
	if (timeout_mode && rank == 1)
		setenv("SHMRUN_TEST_GATEWAY_MUTE", "300", 1);

	/* a bad configuration is refused before MPI is touched */
	conf.host = 2;
	CHECK(shmrun_gateway_start(&g, &conf) == -EINVAL && !g, "host 2 of 2 accepted");
	conf.host = (uint32_t)rank;

	err = shmrun_gateway_start(&g, &conf);
	CHECK(err == 0, "start: %d", err);

	if (eos_mode) {
		int64_t t0 = now_ns(), t1;
		int st;

		if (rank == 0) {
			/* host 1 gives up on us, so this ends either way */
			err = shmrun_gateway_finish(g);
			CHECK(err == 0 || err == -EPIPE, "rank 0 finish: %d", err);
			printf("PASS eos rank 0: finished (%d)\n", err);
			shmrun_control_destroy(ctl);
			return 0;
		}
		do {
			usleep(2000);
			st = shmrun_gateway_poll(g, why, sizeof(why));
		} while (st == 0 && now_ns() - t0 < 20000000000);
		t1 = now_ns();
		CHECK(st == -EPIPE, "poll %d (%s)", st, why);
		CHECK(strstr(why, "host 0 ended its stream, but this host's workers still run") !=
			  NULL,
		      "why: %s", why);
		CHECK(t1 - t0 >= 900000000, "after %.2f s (< host_timeout)", (t1 - t0) / 1e9);
		printf("PASS eos rank 1: %s (%.2f s)\n", why, (t1 - t0) / 1e9);
		shmrun_gateway_abort(g, why);
		(void)shmrun_gateway_finish(g);
		shmrun_control_destroy(ctl);
		return 75;
	}
	if (timeout_mode) {
		int64_t t0 = now_ns(), t1;
		int st;

		do {
			usleep(2000);
			st = shmrun_gateway_poll(g, why, sizeof(why));
		} while (st == 0 && now_ns() - t0 < 10000000000);
		t1 = now_ns();
		CHECK(st == -EPIPE, "poll %d (%s)", st, why);
		if (rank == 0) {
			/* muted at 300 ms: detected within 1 s of silence + slack */
			CHECK(strstr(why, "host 1 sent nothing") != NULL, "why: %s", why);
			CHECK(t1 - t0 < 3000000000, "detected after %.2f s", (t1 - t0) / 1e9);
			/* not before host_timeout (its clock starts when the
			 * gateway is up, a moment before start() returns) */
			CHECK(t1 - t0 >= 900000000, "detected after %.2f s (< host_timeout)",
			      (t1 - t0) / 1e9);
			printf("PASS timeout rank 0: %s (%.2f s)\n", why, (t1 - t0) / 1e9);
		} else {
			/* host 0 stops sending to a silent host: host 1 times out too,
			 * or learns of the abort */
			CHECK(strstr(why, "host 0") != NULL, "why: %s", why);
			printf("PASS timeout rank 1: %s\n", why);
		}
		err = shmrun_gateway_finish(g);
		CHECK(err == -EPIPE, "finish after a timeout: %d", err);
		shmrun_control_destroy(ctl);
		for (uint32_t c = 0; c < NCHAN; c++)
			free(sides[c].mem);
		return 75; /* what a launcher does: restartable */
	}

	/* the "workers" attach after the gateway, as forked workers would race it */
	for (uint32_t c = 0; c < NCHAN; c++) {
		struct side *s = &sides[c];
		bool out = chans[c].src % 2 == (uint32_t)rank;

		CHECK(shmrun_ring_attach(&s->r, s->mem, s->len,
					 out ? SHMRUN_RING_PRODUCER : SHMRUN_RING_CONSUMER) == 0,
		      "attach %u", c);
		/* the gateway is the other side: the default bells would be the
		 * ring's own; the workers sleep on their own bell, which the
		 * gateway rings */
		shmrun_ring_set_wake_bell(&s->r, NULL);
		s->slow = c == 2;
		CHECK(pthread_create(&s->th, NULL, out ? producer : consumer, s) == 0, "thread");
	}

	/* control mirroring */
	if (rank == 0) {
		snprintf(ctl->failed_why, sizeof(ctl->failed_why), "epoch 5: test failure text");
		atomic_store(&ctl->failed_errno, EIO);
		atomic_store(&ctl->failed, 1);
		atomic_store(&ctl->complete_epoch, 4);
		atomic_store(&ctl->final_is_stop, 1);
		atomic_store(&ctl->final_epoch, 5);
		atomic_store(&ctl->trigger_epoch, 5);
		wait_until(g, slot_mirrored, NULL, "host 1's slot and stop request");
		{
			struct shmrun_task_slot *s = &shmrun_control_slots(ctl)[1];

			CHECK(s->size == 123 && s->xxh64 == 0xabcdef && s->kv_bytes == 100 &&
				  s->pw_bytes == 23,
			      "slot fields %" PRIu64 " %" PRIx64, s->size, s->xxh64);
			/* a task of host 0 is not overwritten by host 1 */
			CHECK(atomic_load(&shmrun_control_slots(ctl)[0].done_epoch) == 0,
			      "host 0's task slot written");
		}
		printf("PASS rank 0: slot and stop request mirrored from host 1\n");
	} else {
		struct shmrun_slot_file f = {
		    .size = 123, .xxh64 = 0xabcdef, .kv_bytes = 100, .pw_bytes = 23};

		atomic_store(&shmrun_control_slots(ctl)[1].exhausted, 1);
		CHECK(shmrun_slot_report(ctl, &shmrun_control_slots(ctl)[1], 3, 0, &f) == 1,
		      "report");
		atomic_store(&ctl->stop_requested, 1);
		wait_until(g, epochs_mirrored, NULL, "host 0's epochs");
		CHECK(strcmp(ctl->failed_why, "epoch 5: test failure text") == 0 &&
			  atomic_load(&ctl->failed_errno) == EIO,
		      "failed_why '%s'", ctl->failed_why);
		CHECK(atomic_load(&ctl->aborted_epoch) == 0, "aborted %" PRIu64,
		      atomic_load(&ctl->aborted_epoch));
		printf("PASS rank 1: epochs, final and failed mirrored from host 0\n");
	}

	wait_until(g, threads_done, sides, "every frame");
	for (uint32_t c = 0; c < NCHAN; c++)
		pthread_join(sides[c].th, NULL);
	for (uint32_t c = 0; c < NCHAN; c++) {
		struct side *s = &sides[c];

		if (chans[c].dst % 2 == (uint32_t)rank) {
			CHECK(s->frames == NFRAMES(c) + 1, "channel %u: %" PRIu64 " frames", c,
			      s->frames);
			/* the sequence of lengths fixes every position: on the 4 KiB
			 * ring some largest frames land at offset capacity / 2 */
			CHECK(chans[c].cap != 4096 || s->alone > 0, "channel %u: no skip alone", c);
			printf("PASS rank %d: channel %u: %" PRIu64 " frames, %" PRIu64
			       " payload bytes in order (%" PRIu64
			       " behind a skip published alone)\n",
			       rank, c, s->frames, s->bytes, s->alone);
		}
	}
	CHECK(shmrun_gateway_poll(g, why, sizeof(why)) == 0, "poll: %s", why);
	err = shmrun_gateway_finish(g);
	CHECK(err == 0, "finish %d", err);
	for (uint32_t c = 0; c < NCHAN; c++) {
		shmrun_ring_detach(&sides[c].r);
		free(sides[c].mem);
	}
	shmrun_control_destroy(ctl);
	printf("PASS rank %d: finished\n", rank);
	return 0;
}
