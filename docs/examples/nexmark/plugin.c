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

int nx_fail_record(struct shmrun_task *task, const struct shmrun_record *rec, const char *what,
		   const char *fix)
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
	shmrun_task_error(task, "a record that is not %s: '%s'%s (%s)", what, shown,
			  rec->value_len > n ? "..." : "", fix);
	return -EILSEQ; /* the same input again: no restart cures it */
}

int nx_bad_record(struct shmrun_task *task, const struct shmrun_record *rec, const char *want)
{
	char what[128];

	snprintf(what, sizeof(what), "%s of the nexmark source", want);
	return nx_fail_record(task, rec, what,
			      "feed this stage from a nexmark stage with the right `events`");
}

int nx_check_by_key(struct shmrun_task *task, const struct shmrun_record *rec, uint32_t lo,
		    uint32_t hi, const char *fix)
{
	uint32_t v;

	if (lo == 0 && hi == shmrun_task_vnodes(task))
		return 0; /* every key is this instance's */
	v = shmrun_task_vnode_of(task, rec->key, rec->key_len);
	if (v >= lo && v < hi)
		return 0;
	shmrun_task_error(task,
			  "a record of key '%.*s' (vnode %u) reached an instance owning vnodes "
			  "[%u, %u): its input is not `by key` (%s)",
			  (int)(rec->key_len < 40 ? rec->key_len : 40), (const char *)rec->key, v,
			  lo, hi, fix);
	return -EILSEQ; /* the same input again: no restart cures it */
}

int nx_map_batch(struct shmrun_task *task, const struct shmrun_record *recs, uint32_t n,
		 nx_map_fn fn)
{
	enum { BATCH = 64 };
	static __thread char buf[BATCH][NX_MAP_VALUE_MAX];
	struct shmrun_record out[BATCH];
	uint32_t k = 0;
	int err;

	for (uint32_t i = 0; i < n; i++) {
		err = fn(task, &recs[i], buf[k], &out[k]);
		if (err)
			return err;
		if (++k == BATCH) {
			err = shmrun_emit_batch(task, out, k);
			if (err)
				return err;
			k = 0;
		}
	}
	return k ? shmrun_emit_batch(task, out, k) : 0;
}

SHMRUN_PLUGIN("nexmark-queries", "1.0.0", &nx_currency_op, &nx_filter_op, &nx_local_items_op,
	      &nx_new_users_op, &nx_closing_price_op, &nx_average_op, &nx_top_bids_partial_op,
	      &nx_top_bids_op, &nx_window_key_op, &nx_top_op);
