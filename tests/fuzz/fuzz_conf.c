/*
 * tests/fuzz/fuzz_conf.c: the topology.conf loader over arbitrary bytes.
 *
 * The input is the text of a topology.conf, loaded from memory by
 * shmrun_job_load_mem() (runtime/conf.c: the same passes as shmrun_job_load(),
 * with the built-in operators' parameter tables exactly as the shmrun binary
 * has them: they are static data, runtime/plugin.c). Relative paths resolve
 * against a fixed, empty-of-surprises directory (/nonexistent-shmrun-fuzz).
 *
 * A job that loads is then planned and printed as `shmrun plan` does
 * (shmrun_plan_build(), the text and JSON forms, to /dev/null) and
 * fingerprinted as a checkpoint would be (shmrun_fingerprint()).
 *
 * What must hold: no crash, leak or UB; a load either succeeds with a job
 * whose every stage has an operator, a width and a place in the topological
 * order, or fails with at least one message (a failing load without a word
 * is a bug: `shmrun check` would say nothing), each "name:line: ..." or
 * "name: ..." and free of control bytes.
 *
 * Not fuzzed: [job] plugins (it dlopen()s the files it names: fuzz input must
 * not choose code to load into the fuzzer); an input that names the key is
 * skipped.
 */
#include <errno.h>
#include <string.h>

#include "conf_internal.h"
#include "fuzz.h"
#include "plan.h"

#define NAME "fuzz.conf"

static void check_messages(char **msgs, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		FUZZ_CHECK(msgs[i] != NULL);
		FUZZ_CHECK(strncmp(msgs[i], NAME ":", strlen(NAME ":")) == 0);
		for (const char *p = msgs[i]; *p; p++)
			FUZZ_CHECK((unsigned char)*p >= 0x20 && *p != 0x7f); /* msg_vadd() */
	}
}

/* What `shmrun plan` does with a job that loaded, output to /dev/null. */
static void plan(const struct shmrun_job *job)
{
	static FILE *null;
	struct shmrun_plan *p;

	if (!null)
		null = fopen("/dev/null", "we");
	FUZZ_CHECK(null != NULL);
	(void)shmrun_fingerprint(job);
	if (shmrun_plan_build(job, &p) == 0) {
		FUZZ_CHECK(p->ntasks >= job->nstages);
		shmrun_plan_print(p, null);
		shmrun_plan_print_json(p, null);
		shmrun_plan_free(p);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct shmrun_job job;
	struct shmrun_job_errors errs;
	int err;

	if (memmem(data, size, "plugins", 7))
		return -1; /* never dlopen() what the input names; not added to the corpus */
	err = shmrun_job_load_mem(NAME, "/nonexistent-shmrun-fuzz", data, size, &job, &errs);
	if (err == 0) {
		FUZZ_CHECK(errs.n == 0);
		FUZZ_CHECK(job.nstages > 0);
		for (uint32_t i = 0; i < job.nstages; i++) {
			bool seen = false;

			FUZZ_CHECK(job.stages[i].op != NULL);
			FUZZ_CHECK(job.stages[i].name != NULL);
			FUZZ_CHECK(job.stages[i].width >= 1);
			for (uint32_t k = 0; k < job.nstages; k++)
				seen |= job.topo[k] == i;
			FUZZ_CHECK(seen);
		}
		for (uint32_t e = 0; e < job.nedges; e++)
			FUZZ_CHECK(job.edges[e].from < job.nstages && job.edges[e].to < job.nstages);
		check_messages(job.warnings, job.nwarnings);
		plan(&job);
		shmrun_job_free(&job);
	} else {
		FUZZ_CHECK(err < 0);
		FUZZ_CHECK(errs.n > 0 || err == -ENOMEM);
		if (getenv("FUZZ_VERBOSE")) /* why an input of the corpus does not load */
			for (uint32_t i = 0; i < errs.n; i++)
				fprintf(stderr, "%s\n", errs.msgs[i]);
		check_messages(errs.msgs, errs.n);
		shmrun_job_errors_free(&errs);
	}
	return 0;
}
