/*
 * docs/examples/nexmark/plugin.c: the nexmark-queries plugin: the operators
 * the NEXMark queries in this directory need beyond shmrun's built-ins
 * (README.md lists which query uses which), and what they share.
 *
 * Build: with the project (build/docs/examples/nexmark/nexmark_queries.so,
 * beside copies of the queries' confs), or against an installed shmrun with
 * this directory's Makefile.
 */
#include <errno.h>
#include <stdio.h>

#include "nexmark.h"

int nx_bad_record(struct shmrun_task *task, const struct shmrun_record *rec, const char *want)
{
	char shown[80 * 4 + 1], *p = shown;
	uint32_t n = rec->value_len < 80 ? rec->value_len : 80;
	const unsigned char *v = rec->value;

	for (uint32_t i = 0; i < n; i++) {
		if (v[i] == '\t')
			p += sprintf(p, "\\t");
		else if (v[i] < 0x20 || v[i] >= 0x7f || v[i] == '\\')
			p += sprintf(p, "\\x%02x", v[i]);
		else
			*p++ = (char)v[i];
	}
	*p = '\0';
	shmrun_task_error(task,
			  "a record that is not %s of the nexmark source: '%s'%s (feed this stage "
			  "from a nexmark stage with the right `events`)",
			  want, shown, rec->value_len > n ? "..." : "");
	return -EILSEQ; /* the same input again: no restart cures it */
}

SHMRUN_PLUGIN("nexmark-queries", "1.0.0", &nx_currency_op, &nx_filter_op,
	      &nx_local_items_op, &nx_new_users_op,
	      &nx_closing_price_op, &nx_average_op, &nx_top_bids_partial_op, &nx_top_bids_op,
	      &nx_window_key_op, &nx_top_op);
