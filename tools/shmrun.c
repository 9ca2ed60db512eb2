/*
 * tools/shmrun.c: the shmrun command.
 *
 *     shmrun [options] topology.conf         run the job
 *     shmrun plan [options] topology.conf    print where every task runs
 *     shmrun check [options] topology.conf   validate only
 *
 * Exit status: 0 success (also a stop that completed its final checkpoint);
 * 1 the job failed (a worker died or an operator failed); 2 bad usage or a
 * bad topology (nothing was started). Stopped by signal N without a final
 * checkpoint, it dies by signal N (a shell reports 128+N).
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shmrun/job.h"
#include "shmrun/runtime.h"

#ifndef SHMRUN_VERSION
#define SHMRUN_VERSION "0.1.0"
#endif

static void usage(FILE *out)
{
	fprintf(out,
		"usage: shmrun [options] topology.conf\n"
		"       shmrun plan [--rescale-from CKPT_DIR] [options] topology.conf\n"
		"       shmrun check [options] topology.conf\n"
		"       shmrun ckpt list DIR | shmrun ckpt verify DIR\n"
		"\n"
		"Runs a stream-processing job on this host: one worker process per CPU,\n"
		"pinned, connected by shared-memory rings.\n"
		"\n"
		"commands:\n"
		"  (none)   run the job described by topology.conf\n"
		"  plan     print the placement: every task's worker, CPU and vnode range,\n"
		"           and every edge as local or ring\n"
		"  check    validate topology.conf and exit\n"
		"  ckpt list DIR    the checkpoints in checkpoint_dir DIR: epoch, time,\n"
		"                   size, status and state size per stage\n"
		"  ckpt verify DIR  verify every checkpoint; exit 0 only if the newest does\n"
		"\n"
		"options:\n"
		"  --log-level LEVEL  error, warn, info (default) or debug\n"
		"  --rescale          restore the newest checkpoint into a changed topology\n"
		"                     (new widths, worker count, new stages): key-bound state\n"
		"                     moves whole vnodes to their new owners, per-worker state\n"
		"                     is re-dealt by each operator's rule; see docs/state.md\n"
		"  --drop-state=STAGE with --rescale: a removed stage whose state may be dropped\n"
		"  --rescale-from DIR with plan: print what a rescale from DIR would move\n"
		"  -h, --help         this text\n"
		"  -V, --version      print the version\n"
		"\n"
		"exit status: 0 done; 1 the job failed; 2 bad usage or topology (nothing\n"
		"started); 128+N stopped by signal N.\n"
		"See docs/topology.md for the topology.conf reference.\n");
}

static int load(const char *path, struct shmrun_job *job)
{
	struct shmrun_job_errors errs = {0};
	int err = shmrun_job_load(path, job, &errs);

	if (err) {
		for (uint32_t i = 0; i < errs.n && i < 50; i++)
			fprintf(stderr, "%s\n", errs.msgs[i]);
		if (errs.n > 50)
			fprintf(stderr, "... and %u more errors\n", errs.n - 50);
		if (errs.n == 0)
			fprintf(stderr, "%s: %s\n", path, strerror(-err));
		fprintf(stderr, "shmrun: %u error%s in %s; nothing was started\n",
			errs.n ? errs.n : 1, errs.n == 1 ? "" : "s", path);
		shmrun_job_errors_free(&errs);
		return 2;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"log-level", required_argument, NULL, 'l'},
		{"rescale", no_argument, NULL, 'r'},
		{"drop-state", required_argument, NULL, 'd'},
		{"rescale-from", required_argument, NULL, 'f'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{0},
	};
	const char *cmd = "run", *rescale_from = NULL, *drop[64];
	uint32_t ndrop = 0;
	bool rescale = false;
	struct shmrun_job job;
	int c, rc;

	if (argc > 1 && strcmp(argv[1], "ckpt") == 0) {
		if (argc == 4 && strcmp(argv[2], "list") == 0)
			return shmrun_ckpt_print_list(argv[3], stdout);
		if (argc == 4 && strcmp(argv[2], "verify") == 0)
			return shmrun_ckpt_print_verify(argv[3], stdout);
		fprintf(stderr, "usage: shmrun ckpt list DIR | shmrun ckpt verify DIR\n");
		return 2;
	}
	if (argc > 1 && (strcmp(argv[1], "plan") == 0 || strcmp(argv[1], "check") == 0 ||
			 strcmp(argv[1], "run") == 0)) {
		cmd = argv[1];
		argv[1] = argv[0];
		argv++;
		argc--;
	}
	while ((c = getopt_long(argc, argv, "hV", opts, NULL)) != -1) {
		switch (c) {
		case 'l': {
			int level = shmrun_log_parse_level(optarg);

			if (level < 0) {
				fprintf(stderr, "shmrun: --log-level must be error, warn, info or "
						"debug, not '%s'\n",
					optarg);
				return 2;
			}
			shmrun_log_set_level(level);
			break;
		}
		case 'r':
			rescale = true;
			break;
		case 'd':
			if (ndrop == sizeof(drop) / sizeof(drop[0])) {
				fprintf(stderr, "shmrun: too many --drop-state options\n");
				return 2;
			}
			drop[ndrop++] = optarg;
			break;
		case 'f':
			rescale_from = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			if (optind < argc) {
				fprintf(stderr, "shmrun: --version takes no arguments\n");
				return 2;
			}
			printf("shmrun %s\n", SHMRUN_VERSION);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	/* the subcommand may also follow options: shmrun --log-level debug check x.conf */
	if (argc - optind == 2 && strcmp(cmd, "run") == 0 &&
	    (strcmp(argv[optind], "plan") == 0 || strcmp(argv[optind], "check") == 0 ||
	     strcmp(argv[optind], "run") == 0))
		cmd = argv[optind++];
	if (optind != argc - 1) {
		fprintf(stderr, optind == argc ? "shmrun: missing topology.conf\n"
					       : "shmrun: expected one topology.conf, got %d arguments\n",
			argc - optind);
		usage(stderr);
		return 2;
	}
	if (rescale_from && strcmp(cmd, "plan") != 0) {
		fprintf(stderr, "shmrun: --rescale-from goes with `shmrun plan`\n");
		return 2;
	}
	if ((rescale || ndrop) && strcmp(cmd, "run") != 0) {
		fprintf(stderr, "shmrun: --rescale and --drop-state go with a run\n");
		return 2;
	}
	if (ndrop && !rescale) {
		fprintf(stderr, "shmrun: --drop-state needs --rescale\n");
		return 2;
	}
	rc = load(argv[optind], &job);
	if (rc)
		return rc;
	if (strcmp(cmd, "check") == 0) {
		struct shmrun_plan *plan;

		for (uint32_t i = 0; i < job.nwarnings; i++)
			fprintf(stderr, "warning: %s\n", job.warnings[i]);
		/* what a run checks before it starts: the plan fits, inputs exist */
		rc = shmrun_plan_build(&job, &plan) ? 2 : 0;
		if (!rc) {
			rc = shmrun_prepare(&job, plan) || shmrun_preflight(&job) ? 2 : 0;
			shmrun_plan_free(plan);
		}
		if (!rc)
			printf("%s: ok (%u stage%s, %u worker%s)\n", argv[optind], job.nstages,
			       job.nstages == 1 ? "" : "s", job.workers, job.workers == 1 ? "" : "s");
	} else if (strcmp(cmd, "plan") == 0) {
		struct shmrun_plan *plan;

		rc = shmrun_plan_build(&job, &plan) ? 2 : 0;
		if (!rc) {
			shmrun_plan_print(plan, stdout);
			shmrun_plan_free(plan);
		}
		if (!rc && rescale_from) {
			fputc('\n', stdout);
			rc = shmrun_rescale(&job, rescale_from, drop, ndrop, stdout, NULL) ? 1 : 0;
		}
	} else if (rescale && !job.checkpoint_dir) {
		fprintf(stderr, "shmrun: --rescale needs checkpoint_dir in [job] of %s\n",
			argv[optind]);
		rc = 2;
	} else {
		/* a rescale rewrites checkpoint_dir: exclude other runs first */
		rc = rescale && (shmrun_preflight(&job) || shmrun_lock_job(&job)) ? 2 : 0;
		if (!rc)
			rc = rescale ? (shmrun_rescale(&job, job.checkpoint_dir, drop, ndrop, NULL, NULL)
					? 1
					: 0)
			     : 0;
		if (!rc)
			rc = shmrun_run(&job);
		shmrun_unlock_job();
		if (rc > 128) {
			shmrun_job_free(&job);
			shmrun_die_by_signal(rc - 128); /* like the signal's default action */
		}
	}
	shmrun_job_free(&job);
	return rc;
}
