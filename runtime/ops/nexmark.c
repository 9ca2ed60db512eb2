/*
 * runtime/ops/nexmark.c: the NEXMark event generator, a source.
 *
 * NEXMark (Tucker et al., "NEXMark – A Benchmark for Queries over Data
 * Streams", 2002; the generator as Apache Beam's NexmarkGenerator and
 * Flink's nexmark port have it) models an online auction: people register,
 * open auctions and bid. Event n (0 <= n < count) is, by n mod 50:
 *
 *     0        a person    (1 in 50)
 *     1..3     an auction  (3 in 50)
 *     4..49    a bid       (46 in 50)
 *
 * Ids follow from n alone, as in Beam: person n / 50 has id 1000 + n / 50,
 * and auction 3 * (n / 50) + (n mod 50 - 1) has id 1000 + that; so the
 * newest person and auction at any event are known without state. A bid goes
 * to a hot auction (the newest one rounded down to even: hot_auction_ratio 2)
 * with probability 1/2, else to one of the last 100 auctions (plus a lead of
 * 10 not yet opened); its bidder is a hot bidder (the newest person rounded
 * down to a multiple of 4, + 1: hot_bidder_ratio 4) with probability 3/4,
 * else one of the last 1000 people (plus a lead of 10). An auction's seller
 * is hot likewise (probability 3/4), its category one of 5 (10..14), its
 * expiry within twice the time 100 auctions take to be generated. Prices
 * are 100 x 10^(6u) cents, u uniform in [0, 1).
 *
 * Determinism: every random draw of event n comes from a generator seeded
 * with (seed, n) alone (Beam seeds java.util.Random with the event number
 * likewise), so event n is the same whatever instance makes it, whenever,
 * at any width. The draws are splitmix64 (Steele et al. 2014), not Java's
 * LCG: the structure and ratios are Beam's, the exact names and prices are
 * not.
 *
 * Event time: first_event_time + n x (1 s / event_rate), in ns, the
 * division truncated (Beam's timestampUsForEvent at its constant
 * firstEventRate); past INT64_MAX - 1 it stays there. event_rate defaults to
 * 10 000 (Beam's default); set it equal to `rate` for event time that runs
 * at the speed of the pacing. Rejected: event_rate defaulting to `rate`
 * (Beam ties them): `rate` is a tuning key, left out of the fingerprint and
 * changeable on a resume, and the events would then depend on it.
 *
 * Record: key by `key` (join: bid -> auction, auction -> id, person -> id;
 * person: bid -> bidder, auction -> seller, person -> id; none: empty), value
 * one line of tab-separated fields, the kind first and the event number n
 * second (not in NEXMark's schema; it lets a query or a test tell events
 * apart), times in ms since the epoch:
 *
 *     person  n id name email credit_card city state date_time
 *     auction n id item_name initial_bid reserve date_time expires seller category
 *     bid     n auction bidder price channel date_time
 *
 * `events = person | auction | bid` emits only that kind (the others are
 * still numbered, so ids and times do not change): the source of a query
 * that reads one kind, as Flink's nexmark views bid/auction/person do.
 *
 * Width, restore, rescale: the numbers [0, count) are dealt in pieces by
 * ranges.c (as sequence's): each n is made by exactly one instance, and the
 * per-worker state is the ranges still to make (rule split), so a restore
 * after kill -9 or a --rescale makes every event exactly once.
 *
 * Rejected: Beam's optional padding fields (`extra`, description, url): bytes
 * that no query reads; Java's Random bit for bit (its LCG and nextDouble
 * would be code for nothing but equal names; the queries' shape does not
 * depend on them).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "ops.h"
#include "ranges.h"

/* Beam's NexmarkConfiguration defaults. */
#define PERSON_PROPORTION      1
#define AUCTION_PROPORTION     3
#define BID_PROPORTION	       46
#define TOTAL_PROPORTION       (PERSON_PROPORTION + AUCTION_PROPORTION + BID_PROPORTION)
#define FIRST_PERSON_ID	       1000
#define FIRST_AUCTION_ID       1000
#define FIRST_CATEGORY_ID      10
#define NUM_CATEGORIES	       5
#define HOT_AUCTION_RATIO      2
#define HOT_BIDDER_RATIO       4
#define HOT_SELLER_RATIO       4
#define NUM_ACTIVE_PEOPLE      1000
#define PERSON_ID_LEAD	       10
#define NUM_IN_FLIGHT_AUCTIONS 100
#define AUCTION_ID_LEAD	       10

/* Room for one record's key (20 digits) and value (the longest, a person,
 * is under 160 bytes: the names and strings below are bounded). */
#define KEY_BYTES   24
#define VALUE_BYTES 232

enum kind { K_ALL, K_PERSON, K_AUCTION, K_BID };
enum keying { KEY_JOIN, KEY_PERSON, KEY_NONE };

struct nexmark {
	struct shmrun_range_source src; /* first: its callbacks take the state */
	uint64_t seed;
	int64_t t0, delay; /* event time of event 0, and between events; ns */
	enum kind only;	   /* K_ALL: every kind */
	enum keying keying;
};

/* ---- the generator -------------------------------------------------------- */

/* Uniform in [0, n), n >= 1 (Lemire's multiply-shift; bias below 2^-40 here). */
static uint64_t rnd(uint64_t *x, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)shmrun_splitmix64(x) * n) >> 64);
}

/* Uniform in [0, 1). */
static double rnd_unit(uint64_t *x)
{
	return (double)(shmrun_splitmix64(x) >> 11) * 0x1p-53;
}

/* The base-0 id of the newest person at event @n (Beam's lastBase0PersonId). */
static uint64_t last_person(uint64_t n)
{
	uint64_t epoch = n / TOTAL_PROPORTION, off = n % TOTAL_PROPORTION;

	if (off >= PERSON_PROPORTION)
		off = PERSON_PROPORTION - 1;
	return epoch * PERSON_PROPORTION + off;
}

/* The base-0 id of the newest auction at event @n (lastBase0AuctionId); -1 if none. */
static int64_t last_auction(uint64_t n)
{
	int64_t epoch = (int64_t)(n / TOTAL_PROPORTION), off = (int64_t)(n % TOTAL_PROPORTION);

	if (off < PERSON_PROPORTION) {
		epoch--;
		off = AUCTION_PROPORTION - 1;
	} else if (off >= PERSON_PROPORTION + AUCTION_PROPORTION) {
		off = AUCTION_PROPORTION - 1;
	} else {
		off -= PERSON_PROPORTION;
	}
	return epoch * AUCTION_PROPORTION + off;
}

/* A person among the active ones, or a little ahead (nextBase0PersonId). */
static uint64_t next_person(uint64_t n, uint64_t *x)
{
	uint64_t people = last_person(n) + 1;
	uint64_t active = people < NUM_ACTIVE_PEOPLE ? people : NUM_ACTIVE_PEOPLE;

	return people - active + rnd(x, active + PERSON_ID_LEAD);
}

/* An auction in flight, or a little ahead (nextBase0AuctionId). */
static uint64_t next_auction(uint64_t n, uint64_t *x)
{
	int64_t hi = last_auction(n), lo = hi - NUM_IN_FLIGHT_AUCTIONS;

	if (hi < 0)
		hi = 0;
	if (lo < 0)
		lo = 0;
	return (uint64_t)lo + rnd(x, (uint64_t)(hi - lo) + 1 + AUCTION_ID_LEAD);
}

/* A price in cents: 100 x 10^(6u), u in [0, 1) (nextPrice). */
static uint64_t next_price(uint64_t *x)
{
	return (uint64_t)llround(pow(10.0, rnd_unit(x) * 6.0) * 100.0);
}

static const char *const first_names[] = {"Peter", "Paul",  "Luke",  "John",   "Saul",	"Vicky",
					  "Kate",  "Julie", "Sarah", "Deiter", "Walter"};
static const char *const last_names[] = {"Shultz", "Abrams", "Spencer", "White", "Bartels",
					 "Walton", "Smith",  "Jones",	"Noris"};
static const char *const cities[] = {"Phoenix",	 "Los Angeles", "San Francisco", "Boise",
				     "Portland", "Bend",	"Redmond",	 "Seattle",
				     "Kent",	 "Cheyenne"};
static const char *const states[] = {"AZ", "CA", "ID", "OR", "WA", "WY"};
static const char *const channels[] = {"Google", "Facebook", "Baidu", "Apple"};
#define PICK(x, a) ((a)[rnd(x, sizeof(a) / sizeof((a)[0]))])

/* ---- formatting ---------------------------------------------------------- */

struct out {
	char *p;
};

static void put_s(struct out *o, const char *s)
{
	size_t n = strlen(s);

	memcpy(o->p, s, n);
	o->p += n;
}

static void put_c(struct out *o, char c)
{
	*o->p++ = c;
}

static void put_u(struct out *o, uint64_t v)
{
	o->p += shmrun_fmt_u64(o->p, v);
}

/* @len random lower-case letters (nextString). */
static void put_word(struct out *o, uint64_t *x, uint32_t len)
{
	for (uint32_t i = 0; i < len; i++)
		*o->p++ = (char)('a' + rnd(x, 26));
}

/* ns since the epoch to ms, for the text (event times are >= 1 ms). */
static uint64_t ms(int64_t ns)
{
	return (uint64_t)(ns / 1000000);
}

/* Event @n's event time, ns: t0 + n x delay, saturated at INT64_MAX - 1. */
static int64_t event_time(const struct nexmark *s, uint64_t n)
{
	int64_t d, t;

	if (n > (uint64_t)INT64_MAX || __builtin_mul_overflow((int64_t)n, s->delay, &d) ||
	    __builtin_add_overflow(s->t0, d, &t) || t == INT64_MAX)
		return INT64_MAX - 1;
	return t;
}

/* The kind of event @n. */
static enum kind kind_of(uint64_t n)
{
	uint64_t off = n % TOTAL_PROPORTION;

	return off < PERSON_PROPORTION			      ? K_PERSON
	       : off < PERSON_PROPORTION + AUCTION_PROPORTION ? K_AUCTION
							      : K_BID;
}

/*
 * Event @n into @rec (key at @key, value at @value); @t its event time, ns.
 * Every field is drawn in a fixed order from the generator of (seed, n).
 */
static void make_event(const struct nexmark *s, uint64_t n, int64_t t, struct shmrun_record *rec,
		       char *key, char *value)
{
	uint64_t x = s->seed ^ (n * 0xd1b54a32d192ed03ull), id, keyv;
	struct out o = {value};
	enum kind k = kind_of(n);

	(void)shmrun_splitmix64(&x); /* decorrelate neighbouring n */
	if (k == K_PERSON) {
		id = FIRST_PERSON_ID + last_person(n);
		put_s(&o, "person\t");
		put_u(&o, n);
		put_c(&o, '\t');
		put_u(&o, id);
		put_c(&o, '\t');
		put_s(&o, PICK(&x, first_names));
		put_c(&o, ' ');
		put_s(&o, PICK(&x, last_names));
		put_c(&o, '\t');
		put_word(&o, &x, 7);
		put_c(&o, '@');
		put_word(&o, &x, 5);
		put_s(&o, ".com\t");
		for (int g = 0; g < 4; g++) {
			uint64_t d = rnd(&x, 10000);

			if (g)
				put_c(&o, ' ');
			for (uint64_t p = 1000; p; p /= 10)
				put_c(&o, (char)('0' + d / p % 10));
		}
		put_c(&o, '\t');
		put_s(&o, PICK(&x, cities));
		put_c(&o, '\t');
		put_s(&o, PICK(&x, states));
		put_c(&o, '\t');
		put_u(&o, ms(t));
		keyv = id;
	} else if (k == K_AUCTION) {
		uint64_t seller, initial, reserve, horizon, category;

		id = FIRST_AUCTION_ID + (uint64_t)last_auction(n);
		if (rnd(&x, HOT_SELLER_RATIO) > 0)
			seller = last_person(n) / HOT_SELLER_RATIO * HOT_SELLER_RATIO;
		else
			seller = next_person(n, &x);
		seller += FIRST_PERSON_ID;
		category = FIRST_CATEGORY_ID + rnd(&x, NUM_CATEGORIES);
		initial = next_price(&x);
		reserve = initial + next_price(&x);
		/* twice the time until NUM_IN_FLIGHT_AUCTIONS more auctions (nextAuctionLengthMs)
		 */
		horizon =
		    2 * (uint64_t)s->delay *
		    (NUM_IN_FLIGHT_AUCTIONS * TOTAL_PROPORTION / AUCTION_PROPORTION); /* < 2^42 */
		put_s(&o, "auction\t");
		put_u(&o, n);
		put_c(&o, '\t');
		put_u(&o, id);
		put_c(&o, '\t');
		put_word(&o, &x, 1 + (uint32_t)rnd(&x, 20));
		put_c(&o, '\t');
		put_u(&o, initial);
		put_c(&o, '\t');
		put_u(&o, reserve);
		put_c(&o, '\t');
		put_u(&o, ms(t));
		put_c(&o, '\t');
		put_u(&o, ms(t) + 1 + rnd(&x, horizon / 1000000 + 1));
		put_c(&o, '\t');
		put_u(&o, seller);
		put_c(&o, '\t');
		put_u(&o, category);
		keyv = s->keying == KEY_PERSON ? seller : id;
	} else {
		uint64_t auction, bidder;

		if (rnd(&x, HOT_AUCTION_RATIO) > 0)
			auction = (uint64_t)last_auction(n) / HOT_AUCTION_RATIO * HOT_AUCTION_RATIO;
		else
			auction = next_auction(n, &x);
		auction += FIRST_AUCTION_ID;
		if (rnd(&x, HOT_BIDDER_RATIO) > 0)
			bidder = last_person(n) / HOT_BIDDER_RATIO * HOT_BIDDER_RATIO + 1;
		else
			bidder = next_person(n, &x);
		bidder += FIRST_PERSON_ID;
		put_s(&o, "bid\t");
		put_u(&o, n);
		put_c(&o, '\t');
		put_u(&o, auction);
		put_c(&o, '\t');
		put_u(&o, bidder);
		put_c(&o, '\t');
		put_u(&o, next_price(&x));
		put_c(&o, '\t');
		put_s(&o, PICK(&x, channels));
		put_c(&o, '\t');
		put_u(&o, ms(t));
		keyv = s->keying == KEY_PERSON ? bidder : auction;
	}
	rec->key = key;
	rec->key_len = s->keying == KEY_NONE ? 0 : shmrun_fmt_u64(key, keyv);
	rec->value = value;
	rec->value_len = (uint32_t)(o.p - value);
	rec->event_time_ns = t;
}

/* ---- the operator -------------------------------------------------------- */

/* The time between events, ns: 1 s / event_rate, at least 1 ns. */
static int64_t nx_delay(struct shmrun_task *task)
{
	uint64_t erate = shmrun_task_param_u64(task, "event_rate", 10000);

	return erate <= 1000000000 ? (int64_t)(1000000000 / erate) : 1;
}

/* Check: the last event's time fits in ns. */
static int nx_prepare(struct shmrun_task *task)
{
	return shmrun_ranges_check_times(
	    task, "first_event_time + (count - 1) x (1 s / event_rate)",
	    (int64_t)shmrun_task_param_u64(task, "first_event_time", 0) * 1000000, nx_delay(task),
	    shmrun_task_param_u64(task, "count", 0));
}

static int nx_open(struct shmrun_task *task, void **state)
{
	struct nexmark *s = calloc(1, sizeof(*s));
	const char *v;

	if (!s)
		return -ENOMEM;
	*state = s;
	s->src.slot = KEY_BYTES + VALUE_BYTES;
	s->seed = shmrun_task_param_u64(task, "seed", 0);
	/* first_event_time <= 4e12 ms: below 2^63 ns; nx_prepare() refuses a count
	 * whose last event would not fit (event_time() saturates all the same) */
	s->t0 = (int64_t)shmrun_task_param_u64(task, "first_event_time", 0) * 1000000;
	s->delay = nx_delay(task); /* >= 1 ns apart */
	v = shmrun_task_param(task, "events");
	s->only = !v || !strcmp(v, "all") ? K_ALL
		  : !strcmp(v, "person")  ? K_PERSON
		  : !strcmp(v, "auction") ? K_AUCTION
					  : K_BID;
	v = shmrun_task_param(task, "key");
	s->keying = !v || !strcmp(v, "join") ? KEY_JOIN
		    : !strcmp(v, "person")   ? KEY_PERSON
					     : KEY_NONE;
	return shmrun_ranges_deal(&s->src.ranges, task, shmrun_task_param_u64(task, "count", 0),
				  shmrun_task_param_u64(task, "piece_events", 1u << 20));
}

static int nx_produce(struct shmrun_task *task, void *state, uint32_t budget)
{
	struct nexmark *s = state;
	uint32_t n = 0;
	bool more = true;
	int err;

	if (shmrun_range_source_reserve(&s->src, task, budget))
		return -ENOMEM;
	/* with `events` set, up to 50 numbers per record emitted: budget x 50 bounds a turn */
	for (uint64_t steps = (uint64_t)budget * TOTAL_PROPORTION; n < budget && steps; steps--) {
		struct shmrun_range *r = shmrun_ranges_current(&s->src.ranges);
		uint64_t e;
		char *text;

		if (!r) {
			more = false;
			break;
		}
		e = r->next++;
		if (s->only != K_ALL && kind_of(e) != s->only)
			continue;
		text = shmrun_range_source_text(&s->src, n);
		make_event(s, e, event_time(s, e), &s->src.recs[n], text, text + KEY_BYTES);
		n++;
	}
	if (more && !shmrun_ranges_current(&s->src.ranges))
		more = false;
	err = shmrun_range_source_emit(&s->src, task, n);
	return err ? err : more ? 1 : 0;
}

/* clang-format off */
static const struct shmrun_param_def params[] = {
	/* ranges.c computes (k + 1) * piece_events for k up to count / piece_events
	 * + width: these bounds (with width <= 65536) keep it below 2^64 */
	{.key = "count", .type = SHMRUN_PARAM_COUNT, .required = true, .min = 1,
	 .max = 1000000000000ull, .doc = "events in all (event numbers 0 .. count - 1)"},
	{.key = "seed", .type = SHMRUN_PARAM_COUNT, .def = "0", .max = 1000000000000000000ull,
	 .doc = "the generator's seed: the same seed, the same events"},
	{.key = "events", .type = SHMRUN_PARAM_ENUM, .def = "all", .choices = "all person auction bid",
	 .doc = "emit every event, or only those of one kind (the others still take their "
		"event numbers)"},
	{.key = "key", .type = SHMRUN_PARAM_ENUM, .def = "join", .choices = "join person none",
	 .doc = "the record key: join: bid -> auction, auction -> id, person -> id; person: "
		"bid -> bidder, auction -> seller, person -> id; none: empty"},
	{.key = "first_event_time", .type = SHMRUN_PARAM_COUNT, .def = "1000000000000", .min = 1,
	 .max = 4000000000000ull, .doc = "event time of event 0, ms since the epoch"},
	{.key = "event_rate", .type = SHMRUN_PARAM_COUNT, .def = "10000", .min = 1,
	 .max = 1000000000,
	 .doc = "events per second of event time: event n has first_event_time + n x (1 s / "
		"event_rate); independent of rate"},
	{.key = "piece_events", .type = SHMRUN_PARAM_COUNT, .def = "1048576", .min = 1,
	 .max = 1000000000000ull,
	 .doc = "the event numbers are cut into pieces of this many, dealt to the instances"},
	{.key = "rate", .type = SHMRUN_PARAM_RATE, .min = 1, .max = 1000000000000ull,
	 .doc = "records (events emitted) per second for the whole stage (default: unlimited)",
	 .tuning = true},
	{0},
};
/* clang-format on */

const struct shmrun_operator shmrun_op_nexmark = {
    .size = sizeof(struct shmrun_operator),
    .name = "nexmark",
    .summary = "generates the NEXMark auction events: person : auction : bid = 1 : 3 : 46",
    .flags = SHMRUN_OP_SOURCE,
    .params = params,
    .pacing_param = "rate",
    .prepare = nx_prepare,
    .open = nx_open,
    .produce = nx_produce,
    .close = shmrun_range_source_close,
    .pw_rule = SHMRUN_PW_SPLIT,
    .snapshot = shmrun_range_source_snapshot,
    .restore = shmrun_range_source_restore,
};
