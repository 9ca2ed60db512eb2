/*
 * runtime/gateway.c: the multi-host gateway (runtime/gateway.h).
 *
 * A stub until the MPI transport lands: every entry point reports -ENOTSUP,
 * so a launcher with [job] hosts > 1 stops with a clear message instead of
 * running without its remote channels. The transport (MPI body under
 * SHMRUN_HAVE_MPI) replaces this file.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "gateway.h"

int shmrun_gateway_start(struct shmrun_gateway **out, const struct shmrun_gateway_conf *c)
{
	(void)c;
	*out = NULL;
	return -ENOTSUP;
}

int shmrun_gateway_poll(struct shmrun_gateway *g, char *why, size_t len)
{
	(void)g;
	if (len)
		snprintf(why, len, "the multi-host gateway is not built");
	return -ENOTSUP;
}

void shmrun_gateway_abort(struct shmrun_gateway *g, const char *why)
{
	(void)g;
	(void)why;
}

int shmrun_gateway_finish(struct shmrun_gateway *g)
{
	(void)g;
	return -ENOTSUP;
}
