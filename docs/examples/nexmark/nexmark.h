/*
 * docs/examples/nexmark/nexmark.h: what the operators of the nexmark-queries
 * plugin share: cutting a `nexmark` source record's value into its fields.
 *
 * The value is one line of tab-separated fields, the kind first and the
 * event number second (docs/topology.md, "nexmark"), times in ms since the
 * epoch, prices in cents:
 *
 *     person  n id name email credit_card city state date_time
 *     auction n id item_name initial_bid reserve date_time expires seller category
 *     bid     n auction bidder price channel date_time
 *
 * The NX_* field numbers below index nx_fields.f[]. The operators read
 * fields in place (no copy) and parse the numbers they need with nx_u64().
 */
#ifndef NEXMARK_QUERIES_H
#define NEXMARK_QUERIES_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <shmrun/operator.h>

enum nx_kind { NX_OTHER, NX_PERSON, NX_AUCTION, NX_BID };

enum {
	NX_N = 1, /* every kind: the event number */

	NX_PERSON_ID = 2,
	NX_PERSON_NAME = 3,
	NX_PERSON_EMAIL = 4,
	NX_PERSON_CARD = 5,
	NX_PERSON_CITY = 6,
	NX_PERSON_STATE = 7,
	NX_PERSON_TIME = 8,

	NX_AUCTION_ID = 2,
	NX_AUCTION_ITEM = 3,
	NX_AUCTION_INITIAL_BID = 4,
	NX_AUCTION_RESERVE = 5,
	NX_AUCTION_TIME = 6,
	NX_AUCTION_EXPIRES = 7,
	NX_AUCTION_SELLER = 8,
	NX_AUCTION_CATEGORY = 9,

	NX_BID_AUCTION = 2,
	NX_BID_BIDDER = 3,
	NX_BID_PRICE = 4,
	NX_BID_CHANNEL = 5,
	NX_BID_TIME = 6,

	NX_MAX_FIELDS = 10,
};

/* A value cut at its TABs: field i is f[i], len[i] bytes. */
struct nx_fields {
	enum nx_kind kind;
	unsigned n; /* fields found (at most NX_MAX_FIELDS; more is an error) */
	const char *f[NX_MAX_FIELDS];
	uint32_t len[NX_MAX_FIELDS];
};

/* The number of fields each kind has. */
static inline unsigned nx_fields_of(enum nx_kind k)
{
	return k == NX_PERSON ? 9 : k == NX_AUCTION ? 10 : k == NX_BID ? 7 : 0;
}

/*
 * nx_split() - cut @v (@len bytes) at its TABs into *@out and tell its kind.
 * Return: true when the value has a known kind and exactly that kind's
 * number of fields; false otherwise (out->kind NX_OTHER).
 */
static inline bool nx_split(const void *v, uint32_t len, struct nx_fields *out)
{
	const char *p = v, *end = p + len;
	unsigned n = 0;

	out->kind = NX_OTHER;
	for (;;) {
		const char *t = memchr(p, '\t', (size_t)(end - p));

		if (n == NX_MAX_FIELDS)
			return false;
		out->f[n] = p;
		out->len[n] = (uint32_t)((t ? t : end) - p);
		n++;
		if (!t)
			break;
		p = t + 1;
	}
	out->n = n;
	for (unsigned i = n; i < NX_MAX_FIELDS; i++) { /* defined, for the compiler's sake */
		out->f[i] = end;
		out->len[i] = 0;
	}
	if (out->len[0] == 3 && !memcmp(out->f[0], "bid", 3))
		out->kind = NX_BID;
	else if (out->len[0] == 7 && !memcmp(out->f[0], "auction", 7))
		out->kind = NX_AUCTION;
	else if (out->len[0] == 6 && !memcmp(out->f[0], "person", 6))
		out->kind = NX_PERSON;
	if (n != nx_fields_of(out->kind))
		out->kind = NX_OTHER;
	return out->kind != NX_OTHER;
}

/*
 * nx_u64() - field @i of @fs as an unsigned decimal into *@v.
 * Return: false when it is empty, has a byte other than a digit, or
 * exceeds 2^64 - 1.
 */
static inline bool nx_u64(const struct nx_fields *fs, unsigned i, uint64_t *v)
{
	const char *p = fs->f[i];
	uint64_t x = 0;

	if (!fs->len[i] || fs->len[i] > 20)
		return false;
	for (uint32_t k = 0; k < fs->len[i]; k++) {
		unsigned d = (unsigned)(p[k] - '0');

		if (d > 9 || x > (UINT64_MAX - d) / 10)
			return false;
		x = x * 10 + d;
	}
	*v = x;
	return true;
}

/* Decimal @v at @p; return the end (at most 20 bytes written). */
static inline char *nx_put_u64(char *p, uint64_t v)
{
	char d[20];
	int n = 0;

	do
		d[n++] = (char)('0' + v % 10);
	while (v /= 10);
	while (n)
		*p++ = d[--n];
	return p;
}

/*
 * nx_bad_record() - fail the task over a record that is not the NEXMark
 * event @want (a word: "a bid"), showing its first bytes. Return: -EILSEQ
 * (the launcher does not restart the job for it: the same input again).
 */
int nx_bad_record(struct shmrun_task *task, const struct shmrun_record *rec, const char *want);

/*
 * nx_fail_record() - fail the task over @rec, which is not @what (a phrase:
 * "an output of nexmark_top_bids_partial"), showing its first 80 bytes (TAB
 * as \t, other control bytes as \xHH); @fix says what to do.
 * Return: -EILSEQ (not retried by the launcher: the same input again).
 */
int nx_fail_record(struct shmrun_task *task, const struct shmrun_record *rec, const char *what,
		   const char *fix);

/*
 * nx_check_by_key() - whether @rec reached the instance owning its key's
 * vnode, as a `by key` input delivers it (@lo..@hi: the instance's vnodes,
 * shmrun_task_vnode_range()); a record of another instance's key would be
 * aggregated apart from its key's other records and lost by a rescale.
 * Return: 0, or -EILSEQ after failing the task, saying what to write (@fix).
 */
int nx_check_by_key(struct shmrun_task *task, const struct shmrun_record *rec, uint32_t lo,
		    uint32_t hi, const char *fix);

/* NX_MAP_VALUE_MAX: the bytes a map function may write for one record. */
#define NX_MAP_VALUE_MAX 256

/*
 * nx_map_batch() - the process_batch() of a one-to-one operator: @fn turns
 * each of @recs (@n) into one record at *@out, its bytes written at @buf
 * (NX_MAP_VALUE_MAX bytes, valid until the records are emitted), or fails
 * (its error returned at once); the records go out with shmrun_emit_batch()
 * 64 at a time. Return: 0, or the first error.
 */
typedef int (*nx_map_fn)(struct shmrun_task *task, const struct shmrun_record *rec, char *buf,
			 struct shmrun_record *out);
int nx_map_batch(struct shmrun_task *task, const struct shmrun_record *recs, uint32_t n,
		 nx_map_fn fn);

/* The operators, one file per group of queries (plugin.c lists them). */
extern const struct shmrun_operator nx_currency_op;			    /* q1: select.c */
extern const struct shmrun_operator nx_filter_op;			    /* q2: select.c */
extern const struct shmrun_operator nx_local_items_op, nx_new_users_op;	    /* q3, q8: join.c */
extern const struct shmrun_operator nx_closing_price_op, nx_average_op;	    /* q4: agg.c */
extern const struct shmrun_operator nx_top_bids_partial_op, nx_top_bids_op; /* q7: agg.c */
extern const struct shmrun_operator nx_window_key_op, nx_top_op;	    /* q5: top.c */

#endif
