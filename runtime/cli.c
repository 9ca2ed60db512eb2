/*
 * runtime/cli.c: the shmrun command, as the function shmrun_main() (declared
 * in shmrun/runtime.h), so that a program can embed the command line and the
 * shmrun executable (tools/shmrun.c) is one call. It lives in the runtime
 * library, not in tools/, because it uses runtime/internal.h (rescale,
 * restore check, ckpt list/verify), which libshmrun.so does not export: the
 * shared library exports the public API only.
 *
 *     shmrun [options] topology.conf         run the job
 *     shmrun plan [options] topology.conf    print where every task runs
 *     shmrun check [options] topology.conf   validate only
 *
 * topology.conf may be `-`: the topology is read from standard input, and its
 * relative paths resolve against the current directory.
 *
 * A usage error prints one line saying what is wrong and "Try 'shmrun
 * --help'", never the whole help, and exits 2; a mistyped command is named
 * with the nearest command (edit distance).
 *
 * Exit status: 0 success (also a stop that completed its final checkpoint);
 * 1 the job failed (a worker died or an operator failed); 2 bad usage or a
 * bad topology (nothing was started). Stopped by signal N without a final
 * checkpoint, it dies by signal N (a shell reports 128+N).
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h" /* runtime/: rescale, restore check, ckpt list/verify */
#include "jobsock.h"  /* shmrun ps, shmrun stop (jobs_cmd.c) */
#include "multihost.h" /* shmrun_hosts_check() */
#include "preflight.h" /* shmrun_lock_job_undo() */
#include "proctitle.h"
#include "shmrun/job.h"
#include "shmrun/runtime.h"
#include "summary.h"
#include "supervise.h"
#include "top.h"

#define SHMRUN_MAX_SETS 256 /* --set options of one command */

#ifndef SHMRUN_VERSION /* runtime/CMakeLists.txt sets it from project(VERSION) */
#define SHMRUN_VERSION "0.1.0"
#endif

static void usage(FILE *out)
{
	fprintf(out,
		"usage: shmrun [options] topology.conf\n"
		"       shmrun plan [--json | --rescale-from CKPT_DIR] [options] topology.conf\n"
		"       shmrun check [--rescale] [--connect] [options] topology.conf\n"
		"       shmrun ckpt list [--json] DIR | shmrun ckpt verify [--json] DIR\n"
		"       shmrun ops [--plugin PATH]... [--markdown] [NAME]\n"
		"       shmrun top [--json] [--interval SECONDS] [JOB]\n"
		"       shmrun ps [--json] | shmrun stop [--timeout SECONDS] JOB\n"
		"       shmrun stress [options] topology.conf   (shmrun stress --help)\n"
		"       shmrun supervise [--restarts N] [--backoff DUR] -- COMMAND [ARG]...\n"
		"\n"
		"Runs a stream-processing job on this host: worker processes ([job] workers,\n"
		"default 1; or one per CPU listed in cpus), each pinned to a CPU, connected\n"
		"by shared-memory rings. topology.conf '-' reads the topology from standard\n"
		"input (relative paths in it resolve against the current directory).\n"
		"\n"
		"commands:\n"
		"  (none)   run the job described by topology.conf\n"
		"  plan     print the placement: every task's worker, CPU and vnode range,\n"
		"           and every edge as local or ring\n"
		"  check    validate topology.conf and exit\n"
		"  ckpt list DIR    the checkpoints in checkpoint_dir DIR: epoch, time,\n"
		"                   size, status and state size per stage\n"
		"  ckpt verify DIR  verify every checkpoint and say which one a restore would\n"
		"                   use; exit 0 if one would and none is damaged\n"
		"  ops [NAME]       the operators a stage may name (built-in and from\n"
		"                   plugins); with NAME its keys, types, defaults, ranges\n"
		"                   and per-worker state rule (--markdown: as docs/operators.md)\n"
		"  top [JOB]        a running job live: rates, backpressure, ring fill,\n"
		"                   placement, checkpoints (--json: one snapshot)\n"
		"  ps               this user's running jobs: name, pid, workers, uptime,\n"
		"                   state, last checkpoint (--json: a JSON array)\n"
		"  stop JOB         stop a running job (a final checkpoint with checkpoint_dir)\n"
		"                   and wait for it to exit; exit 0 if it exited 0\n"
		"  stress           run the job with injected faults (kill, stop, term,\n"
		"                   rescale) and check every output against a fault-free\n"
		"                   run; exit 0 if all matched (docs/stress.md)\n"
		"  supervise -- COMMAND\n"
		"                   run COMMAND (mpirun ... shmrun topology.conf: a\n"
		"                   multi-host job) again while it ends with status 75\n"
		"                   or a crash, up to --restarts times (docs/multihost.md)\n"
		"\n"
		"options:\n"
		"  --log-level LEVEL  error, warn, info (default) or debug\n"
		"  --log-format=FMT   text (default) or json: one JSON object per log line\n"
		"                     (time, level, job, worker, stage, instance, msg)\n"
		"  --no-progress      no progress line (shown on a terminal for file sources:\n"
		"                     bytes read of total, rate, ETA)\n"
		"  --rescale          restore the newest checkpoint into a changed topology\n"
		"                     (new widths, worker count, new stages): key-bound state\n"
		"                     moves whole vnodes to their new owners, per-worker state\n"
		"                     is re-dealt by each operator's rule; see docs/state.md\n"
		"                     (with check: plan the rescale, write nothing)\n"
		"  --drop-state=STAGE with --rescale (or plan --rescale-from): a removed stage\n"
		"                     whose state may be dropped\n"
		"  --rescale-from DIR with plan: print what a rescale from DIR would move\n"
		"  --connect          with check: also connect to the servers a sink writes\n"
		"                     into (postgres_sink: login, table, columns); creates\n"
		"                     nothing\n"
		"  --json             with plan, ckpt list and ckpt verify: one JSON document\n"
		"                     of what the text shows (fields: docs/shmrun.1.md)\n"
		"  --set SECTION.KEY=VALUE\n"
		"                     override a key of topology.conf as if written in\n"
		"                     [SECTION], replacing the file's value; job.KEY works\n"
		"                     without a [job] section; a relative path in VALUE\n"
		"                     resolves against the current directory; repeatable\n"
		"  --plugin PATH      load an operator plugin (a shared object) before the\n"
		"                     topology, as [job] plugins does; repeatable\n"
		"  --summary FILE     at exit, write a JSON summary of the run to FILE: how it\n"
		"                     ended, counters per stage, checkpoints, restarts, times\n"
		"                     (docs/observability.md)\n"
		"  -h, --help         this text\n"
		"  -V, --version      print the version\n"
		"\n"
		"exit status: 0 done, or stopped after a final checkpoint; 1 the job failed;\n"
		"2 bad usage or topology (nothing started). Stopped by signal N without\n"
		"checkpoint_dir, it dies by signal N (a shell shows status 128+N).\n"
		"See docs/topology.md for the topology.conf reference.\n");
}

static const char *const commands[] = {"run", "plan", "check", "ckpt",	 "ops",
				       "top", "ps",   "stop",  "stress", "supervise"};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

/*
 * Stop signals are blocked from the first instruction of shmrun_main() so
 * that one arriving while a run loads its conf, checks and locks (before the
 * launcher takes signals) stays pending and is served as a stop request once
 * the run loop starts, not as a kill. Commands that start no job (check, plan, ckpt,
 * usage errors, --help) unblock them at once: a pending signal then acts by
 * default. A signal during exec, before main(), still kills the process.
 */
static void stop_signals(int how)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigprocmask(how, &set, NULL);
}

/* A usage error: one line, then where help is. Return: 2. */
static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
	va_list ap;

	stop_signals(SIG_UNBLOCK); /* nothing will run: a pending stop acts now */
	fputs("shmrun: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry 'shmrun --help' for more information.\n", stderr);
	return 2;
}

/*
 * Edit distance of @a and @b (short words), capped at 99: insertions,
 * deletions, substitutions and swaps of two neighbours each count one (the
 * optimal string alignment distance), so "tpo" is one edit from "top".
 */
static unsigned distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned d[32][32];

	if (la >= 31 || lb >= 31)
		return 99;
	for (size_t i = 0; i <= la; i++)
		d[i][0] = (unsigned)i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = (unsigned)j;
	for (size_t i = 1; i <= la; i++) {
		for (size_t j = 1; j <= lb; j++) {
			unsigned best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);

			if (d[i - 1][j] + 1 < best)
				best = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < best)
				best = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    d[i - 2][j - 2] + 1 < best)
				best = d[i - 2][j - 2] + 1;
			d[i][j] = best;
		}
	}
	return d[la][lb];
}

/* The word of @words nearest to @w, if it is a plausible typo of it; else NULL. */
static const char *nearest(const char *w, const char *const *words, size_t n)
{
	const char *best = NULL;
	unsigned bd = 3;

	for (size_t i = 0; i < n; i++) {
		unsigned d = distance(w, words[i]);

		if (d < bd || (d == bd && !best && d <= 2)) {
			bd = d;
			best = words[i];
		}
	}
	return bd <= 2 ? best : NULL;
}

/* "unknown command 'chekc'; did you mean 'check'?" Return: 2. */
static int unknown_command(const char *what, const char *w, const char *const *words, size_t n)
{
	const char *near = nearest(w, words, n);

	if (near && strcmp(near, w) == 0) /* shmrun --log-level debug ckpt list DIR */
		return usage_error("'%s' must be the first argument: shmrun %s ...", w, w);
	if (near)
		return usage_error("unknown %s '%s'; did you mean '%s'?", what, w, near);
	{
		char list[256] = "";

		for (size_t i = 0; i < n; i++)
			snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
				 i ? ", " : "", words[i]);
		return usage_error("unknown %s '%s' (%s: %s)", what, w,
				   n > 2 ? "commands" : "one of", list);
	}
}

/*
 * Whether @arg, given where topology.conf goes, is rather a mistyped command:
 * no such file, no '.' or '/', and (@near: when it is the only argument)
 * close to a command name.
 */
static bool looks_like_command(const char *arg, bool near)
{
	return strcmp(arg, "-") != 0 && !strchr(arg, '.') && !strchr(arg, '/') &&
	       access(arg, F_OK) != 0 && (!near || nearest(arg, commands, NCOMMANDS));
}

static int load(const char *path, const char *const *sets, uint32_t nsets, struct shmrun_job *job)
{
	struct shmrun_job_errors errs = {0};
	int err = shmrun_job_load_set(path, sets, nsets, job, &errs);

	if (err) {
		for (uint32_t i = 0; i < errs.n && i < 50; i++)
			fprintf(stderr, "%s\n", errs.msgs[i]);
		if (errs.n > 50)
			fprintf(stderr, "... and %u more error%s\n", errs.n - 50,
				errs.n - 50 == 1 ? "" : "s");
		if (errs.n == 0)
			fprintf(stderr, "%s: %s\n", path, strerror(-err));
		fprintf(stderr, "shmrun: %u error%s in %s; nothing was started\n",
			errs.n ? errs.n : 1, errs.n == 1 ? "" : "s",
			strcmp(path, "-") == 0 ? SHMRUN_STDIN_NAME : path);
		shmrun_job_errors_free(&errs);
		return 2;
	}
	return 0;
}

/* A run of @job refused by shmrun_hosts_check() (multihost.h): the message, 2; else 0. */
static int hosts_refused(const struct shmrun_job *job)
{
	char why[1024];
	uint32_t host;

	if (!shmrun_hosts_check(job, &host, why, sizeof(why)))
		return 0;
	fprintf(stderr, "shmrun: %s; nothing was started\n", why);
	return 2;
}

int shmrun_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"log-level", required_argument, NULL, 'l'},
		{"rescale", no_argument, NULL, 'r'},
		{"drop-state", required_argument, NULL, 'd'},
		{"rescale-from", required_argument, NULL, 'f'},
		{"plugin", required_argument, NULL, 'p'},
		{"markdown", no_argument, NULL, 'm'},
		{"summary", required_argument, NULL, 'S'},
		{"json", no_argument, NULL, 'j'},
		{"log-format", required_argument, NULL, 'L'},
		{"no-progress", no_argument, NULL, 'P'},
		{"set", required_argument, NULL, 's'},
		{"connect", no_argument, NULL, 'C'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{0},
	};
	const char *cmd = "run", *rescale_from = NULL, *drop[64], *plugin[64], *summary = NULL;
	const char *sets[SHMRUN_MAX_SETS];
	uint32_t ndrop = 0, nplugin = 0, nsets = 0;
	bool rescale = false, markdown = false, json = false, progress = true, connect = false;
	int info = 0; /* -h or -V: answered once every argument is read */
	struct shmrun_job job;
	int c, rc;

	stop_signals(SIG_BLOCK); /* first: see stop_signals() */
	shmrun_proctitle_init(argc, argv); /* before anything keeps a pointer into argv */
	argv[0] = (char *)"shmrun"; /* getopt_long's messages say "shmrun: ..." */
	if (argc > 1 && strcmp(argv[1], "ckpt") == 0) {
		static const char *const sub[] = {"list", "verify"};

		stop_signals(SIG_UNBLOCK);

		bool as_json = false;
		const char *dir = NULL;
		int ndirs = 0;

		/* --json before or after DIR; "--" ends the options */
		for (int i = 3, opts_end = 0; i < argc; i++) {
			if (!opts_end && strcmp(argv[i], "--json") == 0) {
				as_json = true;
			} else if (!opts_end && strcmp(argv[i], "--") == 0) {
				opts_end = 1;
			} else if (!opts_end && argv[i][0] == '-' && argv[i][1]) {
				return usage_error("ckpt %s: unknown option '%s' (only --json)",
						   argv[2], argv[i]);
			} else {
				dir = argv[i];
				ndirs++;
			}
		}
		if (ndirs == 1 && strlen(dir) > SHMRUN_CKPT_DIR_MAX)
			return usage_error("checkpoint directory too long (%zu bytes; at most %d): %s",
					   strlen(dir), SHMRUN_CKPT_DIR_MAX, dir);
		if (ndirs == 1 && strcmp(argv[2], "list") == 0)
			return shmrun_ckpt_print_list(dir, stdout, as_json);
		if (ndirs == 1 && strcmp(argv[2], "verify") == 0)
			return shmrun_ckpt_print_verify(dir, stdout, as_json);
		if (argc > 2 && strcmp(argv[2], "list") != 0 && strcmp(argv[2], "verify") != 0)
			return unknown_command("ckpt command", argv[2], sub, 2);
		return usage_error("ckpt takes a command and one directory: shmrun ckpt list "
				   "[--json] DIR | shmrun ckpt verify [--json] DIR");
	}
	if (argc > 1 && strcmp(argv[1], "stress") == 0) {
		argv[1] = (char *)"shmrun stress"; /* getopt_long's messages */
		return shmrun_stress_main(argc - 1, argv + 1); /* sets its own signals */
	}
	if (argc > 1 && strcmp(argv[1], "supervise") == 0) {
		argv[1] = (char *)"shmrun supervise"; /* getopt_long's messages */
		return shmrun_supervise_main(argc - 1, argv + 1); /* sets its own signals */
	}
	if (argc > 1 && strcmp(argv[1], "top") == 0) {
		stop_signals(SIG_UNBLOCK); /* top sets its own handlers */
		return shmrun_top_main(argc - 1, argv + 1);
	}
	if (argc > 1 && (strcmp(argv[1], "ps") == 0 || strcmp(argv[1], "stop") == 0)) {
		stop_signals(SIG_UNBLOCK); /* runs no job: Ctrl-C ends it */
		return strcmp(argv[1], "ps") == 0 ? shmrun_jobs_ps(argc - 1, argv + 1)
						  : shmrun_jobs_stop(argc - 1, argv + 1);
	}
	if (argc > 1 && (strcmp(argv[1], "plan") == 0 || strcmp(argv[1], "check") == 0 ||
			 strcmp(argv[1], "run") == 0 || strcmp(argv[1], "ops") == 0)) {
		cmd = argv[1];
		argv[1] = argv[0];
		argv++;
		argc--;
	}
	while ((c = getopt_long(argc, argv, "hV", opts, NULL)) != -1) {
		switch (c) {
		case 'l': {
			int level = shmrun_log_parse_level(optarg);

			if (level < 0)
				return usage_error("--log-level must be error, warn, info or debug, "
						   "not '%s'",
						   optarg);
			shmrun_log_set_level(level);
			break;
		}
		case 'r':
			rescale = true;
			break;
		case 'd':
			if (ndrop == sizeof(drop) / sizeof(drop[0]))
				return usage_error("too many --drop-state options (at most 64)");
			drop[ndrop++] = optarg;
			break;
		case 'f':
			if (strlen(optarg) > SHMRUN_CKPT_DIR_MAX)
				return usage_error("--rescale-from: directory too long (%zu bytes; "
						   "at most %d): %s",
						   strlen(optarg), SHMRUN_CKPT_DIR_MAX, optarg);
			rescale_from = optarg;
			break;
		case 'p':
			if (nplugin == sizeof(plugin) / sizeof(plugin[0]))
				return usage_error("too many --plugin options (at most 64; list "
						   "more in [job] plugins)");
			plugin[nplugin++] = optarg;
			break;
		case 'm':
			markdown = true;
			break;
		case 'C':
			connect = true;
			break;
		case 'S':
			summary = optarg;
			break;
		case 'j':
			json = true;
			break;
		case 'L': {
			int f = shmrun_log_parse_format(optarg);

			if (f < 0)
				return usage_error("--log-format must be text or json, not '%s'",
						   optarg);
			shmrun_log_set_format(f);
			break;
		}
		case 'P':
			progress = false;
			break;
		case 's':
			if (nsets == SHMRUN_MAX_SETS)
				return usage_error("too many --set options (at most %d)",
						   SHMRUN_MAX_SETS);
			sets[nsets++] = optarg;
			break;
		case 'h':
		case 'V':
			if (!info)
				info = c;
			break;
		default: /* getopt_long printed what is wrong */
			fputs("Try 'shmrun --help' for more information.\n", stderr);
			return 2;
		}
	}
	/* --help, --version: no other argument, wherever they stand */
	if (info && optind < argc)
		return usage_error("%s takes no arguments", info == 'h' ? "--help" : "--version");
	if (info) {
		stop_signals(SIG_UNBLOCK);
		if (info == 'h')
			usage(stdout);
		else
			printf("shmrun %s\n", SHMRUN_VERSION);
#ifdef SHMRUN_FAULT_INJECTION
		/* a test build (-DSHMRUN_FAULT_INJECTION=ON): the shell tests that
		 * need the fault switches look for this line (tests/integration/lib.sh) */
		if (info == 'V')
			printf("fault injection: on\n");
#endif
		/* multi-host runs (docs/multihost.md): whether this build has the
		 * MPI gateway; tests/integration/multihost_conf.sh reads it */
		if (info == 'V')
			printf("mpi: %s\n",
#ifdef SHMRUN_HAVE_MPI
			       "on"
#else
			       "off"
#endif
			);
		return 0;
	}
	/* the subcommand may also follow options: shmrun --log-level debug check
	 * x.conf, shmrun --plugin ./my.so ops [NAME] */
	if (argc - optind == 2 && strcmp(cmd, "run") == 0 &&
	    (strcmp(argv[optind], "plan") == 0 || strcmp(argv[optind], "check") == 0 ||
	     strcmp(argv[optind], "run") == 0))
		cmd = argv[optind++];
	else if (argc - optind >= 1 && strcmp(cmd, "run") == 0 &&
		 strcmp(argv[optind], "ops") == 0)
		cmd = argv[optind++];
	if (connect && strcmp(cmd, "check") != 0)
		return usage_error("--connect goes with `shmrun check` (a run always connects)");
	if (markdown && strcmp(cmd, "ops") != 0)
		return usage_error("--markdown goes with `shmrun ops`");
	if (json && strcmp(cmd, "plan") != 0)
		return usage_error("--json goes with `shmrun plan` (and `shmrun ckpt list|verify`)");
	if (json && rescale_from)
		return usage_error("plan --json does not print a rescale; leave out --rescale-from");
	if (strcmp(cmd, "ops") == 0 && nsets)
		return usage_error("--set goes with a command that loads a topology (run, check, plan)");
	if (strcmp(cmd, "ops") == 0 && (rescale || rescale_from || ndrop))
		return usage_error("`shmrun ops` takes --plugin and --markdown only");
	if (strcmp(cmd, "ops") == 0 && argc - optind > 1)
		return usage_error("`shmrun ops` takes at most one operator name, got %d arguments",
				   argc - optind);
	/* plugins first: the topology names their operators (and so may ops) */
	for (uint32_t i = 0; i < nplugin; i++) {
		char *err = NULL;
		int r = shmrun_plugin_load(plugin[i], &err);

		if (r) {
			stop_signals(SIG_UNBLOCK);
			fprintf(stderr, "shmrun: --plugin: %s\n", err ? err : strerror(-r));
			free(err);
			return 2;
		}
	}
	if (strcmp(cmd, "ops") == 0) {
		stop_signals(SIG_UNBLOCK);
		return shmrun_ops_print(stdout, optind < argc ? argv[optind] : NULL, markdown);
	}
	/* a first word that is no command, before a topology.conf: a mistyped command */
	if (strcmp(cmd, "run") == 0 && argc - optind >= 1 &&
	    looks_like_command(argv[optind], argc - optind == 1))
		return unknown_command("command", argv[optind], commands, NCOMMANDS);
	if (optind != argc - 1)
		return usage_error(optind == argc ? "missing topology.conf"
						  : "expected one topology.conf, got %d arguments",
				   argc - optind);
	if (rescale_from && strcmp(cmd, "plan") != 0)
		return usage_error("--rescale-from goes with `shmrun plan`");
	if (rescale && strcmp(cmd, "run") != 0 && strcmp(cmd, "check") != 0)
		return usage_error("--rescale goes with a run or check");
	if (ndrop && !rescale && !rescale_from)
		return usage_error("--drop-state needs --rescale (or plan --rescale-from)");
	if (summary && strcmp(cmd, "run") != 0)
		return usage_error("--summary goes with a run");
	if (summary) { /* refused before anything starts, as outputs are */
		char why[PATH_MAX + 256];

		if (shmrun_summary_check(summary, why, sizeof(why)))
			return usage_error("%s", why);
		shmrun_summary_set_path(summary);
	}
	if (strcmp(cmd, "run") != 0)
		stop_signals(SIG_UNBLOCK); /* check, plan: default behaviour */
	rc = load(argv[optind], sets, nsets, &job);
	if (rc)
		return rc;
	if (summary) {
		char why[3 * PATH_MAX];

		if (shmrun_summary_check_job(summary, &job, why, sizeof(why))) {
			shmrun_job_free(&job);
			return usage_error("%s", why);
		}
	}
	shmrun_log_set_job(job.name); /* every log line names it from here on */
	if (rescale && !job.checkpoint_dir) { /* the run and check alike */
		fprintf(stderr, "shmrun: --rescale needs checkpoint_dir in [job] of %s\n",
			argv[optind]);
		rc = 2;
	} else if (strcmp(cmd, "check") == 0) {
		struct shmrun_plan *plan;

		for (uint32_t i = 0; i < job.nwarnings; i++)
			fprintf(stderr, "warning: %s\n", job.warnings[i]);
		/* what a run checks before it starts: the plan fits, inputs exist;
		 * servers (postgres_sink) only with --connect, and nothing created */
		shmrun_prepare_set_mode(connect, false);
		rc = shmrun_plan_build(&job, &plan) ? 2 : 0;
		if (!rc) {
			rc = shmrun_prepare(&job, plan) || shmrun_preflight(&job) ? 2 : 0;
			shmrun_plan_free(plan);
		}
		/* and the restore: the checkpoint a run would restore fits */
		if (!rc && shmrun_check_restore(&job, rescale, drop, ndrop))
			rc = 2;
		if (!rc && job.hosts > 1)
			printf("%s: ok (%u stage%s, %u worker%s on each of %u hosts)\n",
			       job.conf_path, job.nstages, job.nstages == 1 ? "" : "s", job.workers,
			       job.workers == 1 ? "" : "s", job.hosts);
		else if (!rc)
			printf("%s: ok (%u stage%s, %u worker%s)\n", job.conf_path, job.nstages,
			       job.nstages == 1 ? "" : "s", job.workers, job.workers == 1 ? "" : "s");
	} else if (strcmp(cmd, "plan") == 0) {
		struct shmrun_plan *plan;

		rc = shmrun_plan_build(&job, &plan) ? 2 : 0;
		if (!rc && json) {
			rc = shmrun_plan_print_json(plan, stdout) ? 1 : 0;
			if (rc)
				fprintf(stderr, "shmrun: plan --json: cannot write the JSON\n");
			shmrun_plan_free(plan);
		} else if (!rc) {
			shmrun_plan_print(plan, stdout);
			shmrun_plan_free(plan);
		}
		/* a refused rescale is refused as a run and check refuse it: exit 2 */
		if (!rc && rescale_from) {
			fputc('\n', stdout);
			rc = shmrun_rescale(&job, rescale_from, drop, ndrop, stdout, NULL) ? 2 : 0;
		}
	} else if ((rc = hosts_refused(&job))) {
		/* hosts > 1 without its MPI processes, or hosts = 1 under several:
		 * refused before anything is created (shmrun_run() checks it too) */
	} else {
		/* a rescale rewrites checkpoint_dir: refuse what `check --rescale`
		 * refuses before creating anything, then exclude other runs */
		rc = rescale && (shmrun_preflight(&job) || shmrun_rescale_dry_run(&job, drop, ndrop) ||
				 shmrun_lock_job(&job))
			 ? 2
			 : 0;
		/* a refused or failed rescale started nothing: exit 2, as check --rescale */
		if (!rc && rescale &&
		    shmrun_rescale(&job, job.checkpoint_dir, drop, ndrop, NULL, NULL)) {
			shmrun_lock_job_undo(); /* nothing started: no empty output */
			rc = 2;
		}
		if (!rc) {
			/* before the workers are forked: they inherit whether a
			 * progress line may be on screen (log.c) */
			shmrun_progress_setup(&job, progress);
			rc = shmrun_run(&job);
		}
		shmrun_unlock_job();
		if (rc > 128) {
			shmrun_job_free(&job);
			shmrun_die_by_signal(rc - 128); /* like the signal's default action */
		}
	}
	shmrun_job_free(&job);
	return rc;
}
