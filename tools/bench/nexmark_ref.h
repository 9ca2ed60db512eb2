/*
 * tools/bench/nexmark_ref.h: single-threaded reference implementations of
 * the NEXMark queries, over events from shmrun-bench's own generator.
 *
 * Two uses, one code:
 *   - `shmrun-bench nexmark --reference QUERY` prints a query's output over
 *     the events a `nexmark` source makes for a seed and count, as the lines
 *     file_sink writes (key TAB value NL): the tests compare a shmrun run of
 *     docs/examples/nexmark/QUERY.conf with it (sorted: a multiset);
 *   - the benchmark times it, as the strongest single-threaded program for
 *     the same job, against shmrun runs at workers 1 and 2.
 *
 * The generator (nexmark_ref.c) is written from the description in
 * runtime/ops/nexmark.c's header and docs/topology.md, not from its code
 * (tools use public headers only): event n of a seed, as a struct, without
 * formatting it; nx_ref_format() gives the text line the source would emit.
 * A reference query therefore does not parse text: it reads the struct,
 * as a hand-written C program for the query would, and formats only what it
 * outputs. What a shmrun topology spends on text (the source's formatting,
 * each operator's parsing) is part of what the ratio measures.
 *
 * The events are those of the nexmark source with its defaults but `count`
 * and `seed`: first_event_time 10^12 ms, event_rate 10 000/s (event n at
 * 10^12 + n / 10 ms), key = join.
 */
#ifndef SHMRUN_BENCH_NEXMARK_REF_H
#define SHMRUN_BENCH_NEXMARK_REF_H

#include <stddef.h>
#include <stdint.h>

enum nx_ref_kind { NX_PERSON, NX_AUCTION, NX_BID };

/* Event n, every field NEXMark defines (strings NUL-terminated). */
struct nx_ref_event {
	enum nx_ref_kind kind;
	uint64_t n;	  /* event number */
	uint64_t time_ms; /* date_time: ms since the epoch */
	/* person: id, name, email, credit_card, city, state */
	/* auction: id, item_name, initial_bid, reserve, expires, seller, category */
	/* bid: auction, bidder, price, channel */
	uint64_t id;
	uint64_t auction;
	uint64_t bidder;
	uint64_t price;	      /* cents */
	uint64_t initial_bid; /* cents */
	uint64_t reserve;     /* cents */
	uint64_t expires;     /* ms since the epoch */
	uint64_t seller;
	uint64_t category;
	char name[24];
	char email[24];
	char credit_card[24];
	char city[16];
	char state[4];
	char item_name[24];
	const char *channel;
};

/* Event @n of @seed into *@e. */
void nx_ref_make(uint64_t seed, uint64_t n, struct nx_ref_event *e);

/*
 * @e as the line file_sink writes for a nexmark record with key = join
 * (key TAB value NL), at @p, which has room for NX_REF_LINE_MAX bytes.
 * Return: the end of the line.
 */
#define NX_REF_LINE_MAX 256
char *nx_ref_format(const struct nx_ref_event *e, char *p);

/* Decimal @v at @p; return the end. */
char *nx_ref_u(char *p, uint64_t v);

/*
 * Where a reference query's output goes: one line (key TAB value, without
 * the NL) at a time. The printer writes it with an NL; the benchmark counts
 * and checksums it.
 */
typedef void (*nx_ref_emit_fn)(void *ctx, const char *line, size_t len);

/*
 * A query, as one single-threaded loop would run it: open() once, event()
 * for every event n = 0, 1, ... of the stream in order (all kinds: a query
 * skips those it does not read), end() once after the last, close() last.
 * open() returns NULL only when out of memory.
 */
struct nx_ref_query {
	const char *name;  /* "q0": docs/examples/nexmark/<name>.conf */
	const char *about; /* one line: what the query computes */
	void *(*open)(void);
	void (*event)(void *st, const struct nx_ref_event *e, nx_ref_emit_fn emit, void *ctx);
	void (*end)(void *st, nx_ref_emit_fn emit, void *ctx);
	void (*close)(void *st);
};

/* Every query with a reference, NULL-terminated, in name order. */
extern const struct nx_ref_query *const nx_ref_queries[];

/* The query named @name, or NULL. */
const struct nx_ref_query *nx_ref_query_find(const char *name);

/*
 * Run @q over events [0, @count) of @seed, emitting to @emit.
 * Return: 0, or -ENOMEM.
 */
int nx_ref_run(const struct nx_ref_query *q, uint64_t seed, uint64_t count, nx_ref_emit_fn emit,
	       void *ctx);

/* The queries, one file each (nexmark_ref_qN.c) or a few per file. */
extern const struct nx_ref_query nx_ref_q0, nx_ref_q1, nx_ref_q2, nx_ref_q5;
extern const struct nx_ref_query nx_ref_q3, nx_ref_q8; /* nexmark_ref_q3.c, nexmark_ref_q8.c */
extern const struct nx_ref_query nx_ref_q4; /* nexmark_ref_q4.c */
extern const struct nx_ref_query nx_ref_q7; /* nexmark_ref_q7.c */

#endif
