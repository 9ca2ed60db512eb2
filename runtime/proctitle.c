/*
 * runtime/proctitle.c: a worker's process title (proctitle.h).
 *
 * What it is for. Workers are forks of the launcher: without a title of
 * their own, `ps` shows N+1 identical `shmrun job.conf` lines, and nothing
 * tells worker 1 from the launcher. Each worker sets
 *
 *     comm (PR_SET_NAME)   "shmrun w1 wordco"   top, pgrep, /proc/PID/comm
 *     cmdline              "shmrun: wordcount worker 1 cpu 1"   ps, ps -f, htop
 *
 * The comm keeps "shmrun" first (pgrep shmrun still finds workers) and the
 * worker's index before the job's name, since 15 bytes cut the rest.
 *
 * The command line is the classic setproctitle() trick (BSD's, PostgreSQL's
 * ps_status.c): the kernel shows /proc/PID/cmdline from the process's
 * argument area [arg_start, arg_end), which lies in writable stack memory;
 * writing the title over it, padded with NULs, is what `ps` then prints.
 * Invariants: the area is written only when argv[0] is arg_start (the real
 * argument vector: an embedding program's array may be read-only string
 * literals), never past arg_end, and only after every argv[i] was moved to
 * a heap copy, so no pointer into the old strings is left to read the title.
 * A fork writes its own copy of the stack: the launcher's title is unchanged.
 *
 * Rejected: using the environment's area after the arguments too (as
 * PostgreSQL does, for room): pointers earlier getenv() calls returned
 * (libraries' too) would then read the title; prctl(PR_SET_MM_ARG_START):
 * needs CAP_SYS_RESOURCE.
 */
#include "proctitle.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

static char *area; /* the argument area, or NULL */
static size_t area_len;
static char **copies; /* the heap copies of argv's strings (reachable: no leak report) */

/* arg_start and arg_end of this process (fields 48 and 49 of /proc/self/stat). */
static int arg_bounds(unsigned long *start, unsigned long *end)
{
	char buf[2048], *p;
	size_t n;
	int field = 2;
	FILE *f = fopen("/proc/self/stat", "re");

	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')'); /* comm may hold spaces and parentheses */
	if (!p)
		return -1;
	p++;
	while (*p && field < 47) { /* p at the space before field 48 */
		p = strchr(p + 1, ' ');
		if (!p)
			return -1;
		field++;
	}
	return sscanf(p, " %lu %lu", start, end) == 2 ? 0 : -1;
}

void shmrun_proctitle_init(int argc, char **argv)
{
	unsigned long start, end;

	if (argc < 1 || !argv[0] || arg_bounds(&start, &end) || (unsigned long)argv[0] != start ||
	    end <= start)
		return;
	copies = calloc((size_t)argc, sizeof(*copies));
	if (!copies)
		return;
	for (int i = 0; i < argc; i++) {
		copies[i] = strdup(argv[i] ? argv[i] : "");
		if (!copies[i])
			return; /* no title: the strings in the area stay in use */
	}
	for (int i = 0; i < argc; i++)
		argv[i] = copies[i];
	area = (char *)start;
	area_len = end - start;
}

void shmrun_proctitle_set(const char *comm, const char *fmt, ...)
{
	va_list ap;

	prctl(PR_SET_NAME, comm, 0, 0, 0);
	if (!area || area_len < 2)
		return;
	memset(area, 0, area_len);
	va_start(ap, fmt);
	vsnprintf(area, area_len, fmt, ap); /* the last byte stays NUL */
	va_end(ap);
}
