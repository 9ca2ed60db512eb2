/*
 * tests/unit/check_plan.c: the plan a job is run from — task numbering and
 * placement, one channel per (sender, receiver) pair of every non-forward edge,
 * local vs crossing channels, the ring table, and the NUMA node each ring is
 * bound to (through the function that picks it, with a fake CPU -> node map).
 */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plan.h"
#include "shmrun/job.h"
#include "shmrun/placement.h"

/* Every test's directory lives under tmpdir, made and removed by main() in the
 * runner process: it goes even when a failing test skips its teardown. */
#include "common/tmpdir.h"

static char dir[sizeof(tmpdir) + 16];

static void load(const char *text, struct shmrun_job *job)
{
	char path[PATH_MAX];
	struct shmrun_job_errors errs = {0};
	FILE *f;
	int err;

	snprintf(path, sizeof(path), "%s/t.conf", dir);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	err = shmrun_job_load(path, job, &errs);
	if (err)
		for (uint32_t i = 0; i < errs.n; i++)
			fprintf(stderr, "%s\n", errs.msgs[i]);
	ck_assert_int_eq(err, 0);
	shmrun_job_errors_free(&errs);
}

static void setup(void)
{
	snprintf(dir, sizeof(dir), "%s/t.XXXXXX", tmpdir);
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static const char *wordcount = "[job]\n"
			       "cpus = 0\n"
			       "vnodes = 256\n"
			       "[read]\nop = sequence\ncount = 10\nwidth = 2\n"
			       "[words]\nop = tokenize\ninput = read\nwidth = 2\n"
			       "[count]\nop = count\ninput = words by key\nwidth = 4\n"
			       "[out]\nop = null_sink\ninput = count\nwidth = 1\n";

static int fake_node(int cpu)
{
	return 10 + cpu * 3;
}

START_TEST(tasks_channels_and_rings)
{
	struct shmrun_job job;
	struct shmrun_plan *plan;
	char text[1024];

	/* workers = 2 runs round-robin over the CPUs this process may use. */
	snprintf(text, sizeof(text), "[job]\nworkers = 2\n%s", strstr(wordcount, "vnodes"));
	load(text, &job);
	ck_assert_int_eq(shmrun_plan_build(&job, &plan), 0);

	/* Tasks: dense, stage by stage in file order. */
	ck_assert_uint_eq(plan->ntasks, 2 + 2 + 4 + 1);
	ck_assert_uint_eq(plan->stage_task0[0], 0);
	ck_assert_uint_eq(plan->stage_task0[1], 2);
	ck_assert_uint_eq(plan->stage_task0[2], 4);
	ck_assert_uint_eq(plan->stage_task0[3], 8);
	for (uint32_t t = 0; t < plan->ntasks; t++) {
		const struct shmrun_plan_task *pt = &plan->tasks[t];
		uint32_t w = job.stages[pt->stage].width, lo, hi;

		ck_assert_uint_eq(pt->worker, shmrun_placement_owner_of(pt->instance, w, 2));
		shmrun_placement_vnode_range(pt->instance, w, 256, &lo, &hi);
		ck_assert_uint_eq(pt->vnode_lo, lo);
		ck_assert_uint_eq(pt->vnode_hi, hi);
	}
	/* Forward read -> words: no channel, and each pair on one worker. */
	for (uint32_t i = 0; i < 2; i++)
		ck_assert_uint_eq(plan->tasks[0 + i].worker, plan->tasks[2 + i].worker);
	/* Channels: words -> count 2 x 4, count -> out 4 x 1. */
	ck_assert_uint_eq(plan->nchannels, 8 + 4);
	for (uint32_t e = 0; e < job.nedges; e++) {
		const struct shmrun_edge *ed = &job.edges[e];

		if (ed->kind == SHMRUN_EDGE_FORWARD) {
			ck_assert_uint_eq(plan->edge_chan0[e], UINT32_MAX);
			continue;
		}
		for (uint32_t i = 0; i < job.stages[ed->from].width; i++)
			for (uint32_t j = 0; j < job.stages[ed->to].width; j++) {
				uint32_t c = shmrun_plan_channel_of(plan, e, i, j);
				const struct shmrun_plan_channel *ch = &plan->channels[c];

				ck_assert_uint_lt(c, plan->nchannels);
				ck_assert_uint_eq(ch->edge, e);
				ck_assert_uint_eq(ch->src_task, plan->stage_task0[ed->from] + i);
				ck_assert_uint_eq(ch->dst_task, plan->stage_task0[ed->to] + j);
				ck_assert(ch->local == (plan->tasks[ch->src_task].worker ==
							plan->tasks[ch->dst_task].worker));
				ck_assert_uint_eq(plan->rings[c].capacity, job.ring_bytes);
				ck_assert_uint_eq(plan->rings[c].producer,
						  plan->tasks[ch->src_task].worker);
				ck_assert_uint_eq(plan->rings[c].consumer,
						  plan->tasks[ch->dst_task].worker);
				/* NUMA: the consumer worker's CPU decides the node. */
				ck_assert_int_eq(shmrun_plan_ring_node(plan, c, fake_node),
						 fake_node(job.cpus[plan->tasks[ch->dst_task].worker]));
			}
	}
	ck_assert_int_eq(shmrun_plan_ring_node(plan, plan->nchannels, fake_node), -1);
	ck_assert_uint_eq(plan->segment_bytes, shmrun_segment_memsize(plan->rings, 12));
	shmrun_plan_free(plan);
	shmrun_job_free(&job);
}
END_TEST

START_TEST(width_one_edges_are_forward)
{
	struct shmrun_job job;
	struct shmrun_plan *plan;

	load("[a]\nop = sequence\ncount = 5\n[b]\nop = count\ninput = a by key\n"
	     "[c]\nop = null_sink\ninput = b broadcast\n",
	     &job);
	ck_assert_int_eq(shmrun_plan_build(&job, &plan), 0);
	ck_assert_uint_eq(plan->nchannels, 0);
	for (uint32_t e = 0; e < job.nedges; e++)
		ck_assert_int_eq(job.edges[e].kind, SHMRUN_EDGE_FORWARD);
	shmrun_plan_free(plan);
	shmrun_job_free(&job);
}
END_TEST

START_TEST(plan_prints_every_task_and_edge)
{
	struct shmrun_job job;
	struct shmrun_plan *plan;
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	load(wordcount, &job);
	ck_assert_int_eq(shmrun_plan_build(&job, &plan), 0);
	shmrun_plan_print(plan, out);
	fclose(out);
	ck_assert_ptr_nonnull(strstr(buf, "9 tasks"));
	ck_assert_ptr_nonnull(strstr(buf, "read -> words: forward, local"));
	ck_assert_ptr_nonnull(strstr(buf, "words -> count: shuffle by key, 8 channels"));
	ck_assert_ptr_nonnull(strstr(buf, "count -> out: rebalance, 4 channels"));
	ck_assert_ptr_nonnull(strstr(buf, "words[1] -> count[3]: ring"));
	ck_assert_ptr_nonnull(strstr(buf, "[192, 256)")); /* count[3]'s vnodes */
	free(buf);
	shmrun_plan_free(plan);
	shmrun_job_free(&job);
}
END_TEST

/*
 * hosts = 2, workers = 2: four members, global worker g = h * 2 + i on host
 * g / 2 pinned to the local index's CPU; the text has a host column and
 * marks each channel between hosts; the JSON says the same.
 */
START_TEST(plan_over_hosts)
{
	struct shmrun_job job;
	struct shmrun_plan *plan;
	char *buf = NULL;
	size_t len = 0;
	FILE *out;
	uint32_t cross = 0;

	load("[job]\nworkers = 2\nhosts = 2\n"
	     "[read]\nop = sequence\ncount = 10\nwidth = 2\n"
	     "[count]\nop = count\ninput = read by key\nwidth = 4\n"
	     "[out]\nop = null_sink\ninput = count\nwidth = 4\n",
	     &job);
	ck_assert_int_eq(shmrun_plan_build(&job, &plan), 0);
	ck_assert_uint_eq(plan->hosts, 2);
	ck_assert_uint_eq(plan->workers_per_host, 2);
	ck_assert_uint_eq(plan->workers, 4);
	/* read[1] -> worker floor(1*4/2) = 2 (host 1, local 0); count[3] -> worker 3 */
	ck_assert_uint_eq(plan->tasks[1].worker, 2);
	ck_assert_uint_eq(shmrun_plan_host_of(plan, plan->tasks[1].worker), 1);
	ck_assert_uint_eq(plan->tasks[2 + 3].worker, 3);
	ck_assert_uint_eq(shmrun_plan_host_of(plan, 3), 1);
	ck_assert_int_eq(shmrun_plan_cpu_of(plan, 3), job.cpus[1]);
	ck_assert_int_eq(shmrun_plan_cpu_of(plan, 2), job.cpus[0]);
	/* read[i] (worker 2i) -> count[j] (worker j): crosses hosts iff i != j / 2 */
	for (uint32_t i = 0; i < 2; i++)
		for (uint32_t j = 0; j < 4; j++) {
			uint32_t c = shmrun_plan_channel_of(plan, 0, i, j);

			ck_assert_uint_eq(shmrun_plan_channel_crosses_hosts(plan, c), i != j / 2);
			cross += shmrun_plan_channel_crosses_hosts(plan, c);
		}
	ck_assert_uint_eq(cross, 4);
	out = open_memstream(&buf, &len);
	shmrun_plan_print(plan, out);
	fclose(out);
	ck_assert_ptr_nonnull(
	    strstr(buf, "job t: 4 workers on 2 hosts (2 per host), 3 stages, 10 tasks"));
	ck_assert_ptr_nonnull(
	    strstr(buf, "task   stage            instance worker host cpu  vnodes\n"));
	ck_assert_ptr_nonnull(strstr(buf, "\n1      read             1        2      1    "));
	ck_assert_ptr_nonnull(
	    strstr(buf, "read -> count: shuffle by key, 8 channels (4 cross hosts)"));
	ck_assert_ptr_nonnull(strstr(
	    buf, "read[0] -> count[3]: ring 3, crosses hosts (worker 0 -> 3, host 0 -> 1)\n"));
	ck_assert_ptr_nonnull(strstr(
	    buf, "read[0] -> count[1]: ring 1, crosses workers (worker 0 -> 1, host 0 -> 0)\n"));
	ck_assert_ptr_nonnull(
	    strstr(buf, "read[1] -> count[2]: ring 6, local (worker 2 -> 2, host 1 -> 1)\n"));
	ck_assert_ptr_nonnull(strstr(buf, "(6 cross workers, 4 cross hosts)"));
	free(buf);
	buf = NULL;
	out = open_memstream(&buf, &len);
	ck_assert_int_eq(shmrun_plan_print_json(plan, out), 0);
	fclose(out);
	ck_assert_ptr_nonnull(strstr(buf, "\"hosts\": 2,"));
	ck_assert_ptr_nonnull(strstr(buf, "\"rings_crossing_hosts\": 4"));
	free(buf);
	shmrun_plan_free(plan);
	shmrun_job_free(&job);

	/* one host: the text is what it was, no host column, no host marks */
	load(wordcount, &job);
	ck_assert_int_eq(shmrun_plan_build(&job, &plan), 0);
	ck_assert_uint_eq(plan->hosts, 1);
	buf = NULL;
	out = open_memstream(&buf, &len);
	shmrun_plan_print(plan, out);
	fclose(out);
	ck_assert_ptr_null(strstr(buf, "host"));
	free(buf);
	shmrun_plan_free(plan);
	shmrun_job_free(&job);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("plan");
	TCase *tc = tcase_create("plan");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, tasks_channels_and_rings);
	tcase_add_test(tc, width_one_edges_are_forward);
	tcase_add_test(tc, plan_prints_every_task_and_edge);
	tcase_add_test(tc, plan_over_hosts);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	tmpdir_create("shmrun-check-plan");
	srunner_run_all(sr, CK_NORMAL);
	tmpdir_remove();
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
