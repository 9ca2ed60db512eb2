/*
 * dpkg.c: an out-of-tree shmrun plugin — operator dpkg_parse, which turns the
 * lines of dpkg's log (/var/log/dpkg.log) into records.
 *
 * Build it against an installed shmrun (see README.md and the Makefile):
 *
 *     cc -shared -fPIC -o dpkg.so dpkg.c $(pkg-config --cflags --libs shmrun)
 *
 * dpkg appends one line per event (dpkg(1), FILES), fields separated by one
 * blank:
 *
 *     2024-05-01 12:34:56 startup archives unpack
 *     2024-05-01 12:34:56 install foo:amd64 <none> 1.2-3
 *     2024-05-01 12:34:56 status half-installed foo:amd64 1.2-3
 *     2024-05-01 12:34:56 conffile /etc/foo.conf keep
 *
 * What becomes a record (with `key = package`, the default):
 *
 *   DATE TIME ACTION PKG OLD NEW    (ACTION one of install upgrade configure
 *                                    trigproc disappear remove purge)
 *                                   -> key PKG, value ACTION
 *   DATE TIME status STATE PKG VER  -> key PKG, value "status STATE"
 *   DATE TIME startup TYPE COMMAND  -> nothing (skipped: no package)
 *   DATE TIME conffile FILE ...     -> nothing (skipped: a file, not a package)
 *   anything else                   -> nothing; counted as malformed
 *
 * `key = action` swaps key and value (key ACTION or "status STATE", value
 * PKG), so a count stage by key counts per action. The event time is the
 * line's timestamp, which dpkg writes in local time: mktime(3) with the
 * worker's TZ, in ns since the epoch; in the hour a DST change repeats, the
 * same text is two instants and mktime picks one.
 *
 * Strict format, so that an independent oracle (tests/integration/
 * plugin_example.sh, in awk) can say exactly which lines count: date
 * YYYY-MM-DD (month 01-12, day 01-31), time HH:MM:SS (hour 00-23, minute
 * 00-59, second 00-60), single blanks between fields, no empty field, no
 * control byte (< 0x20 or 0x7f) anywhere in the line, and exactly the number
 * of fields above (conffile: at least two, as a file name may hold blanks).
 * A malformed line is skipped and counted; the first MAX_SHOWN of each
 * instance are shown with shmrun_task_warn(), and end_of_input() warns with
 * the count. The counters are the instance's and are not checkpointed: after
 * a restore they cover the lines read since.
 *
 * The operator keeps no state (no key-bound state, no per-worker state): a
 * restore re-reads from the source's saved positions, and dpkg_parse turns the
 * same lines into the same records. It declares .state_version "1" so that a
 * new release of this plugin can resume from the last one's checkpoints; bump
 * it if what a line becomes ever changes, since a count downstream would mix
 * records of both meanings.
 *
 * Both process() and process_batch() are given: the batch form parses a whole
 * batch and sends what it produced with one shmrun_emit_batch(), keys and
 * values pointing into the input lines (borrowed for the call, and the
 * runtime copies them before shmrun_emit_batch() returns). Rejected: copying
 * each field into a buffer of our own — nothing outlives the call.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <shmrun/operator.h>

#define MAX_FIELDS 6  /* fields kept: as many as any line we emit has */
#define MAX_SHOWN  5  /* malformed lines shown per instance */
#define BATCH_OUT  64 /* records gathered per shmrun_emit_batch() */

/* The words in the third field; bit i of an action mask is actions[i]. */
static const char *const actions[] = {"install",   "upgrade", "configure", "trigproc",
				      "disappear", "remove",  "purge",	   "status"};
#define NACTIONS      (sizeof(actions) / sizeof(actions[0]))
#define ACTION_STATUS (NACTIONS - 1)
#define ALL_ACTIONS   ((1u << NACTIONS) - 1)

struct dpkg_state {
	bool key_action;    /* key = action: key and value swapped */
	uint32_t mask;	    /* actions kept (the `actions` key) */
	uint64_t lines;	    /* lines seen */
	uint64_t records;   /* records emitted */
	uint64_t skipped;   /* startup and conffile lines, and actions filtered out */
	uint64_t malformed; /* lines not in the format above */
	char stamp[19];	    /* the last timestamp converted, "YYYY-MM-DD HH:MM:SS" */
	int64_t stamp_ns;   /* ... and its value */
	bool stamp_valid;
};

struct span {
	const char *p;
	uint32_t len;
};

/* The action word @w (@len bytes) as an index into actions[], or -1. */
static int action_index(const char *w, size_t len)
{
	for (unsigned i = 0; i < NACTIONS; i++)
		if (strlen(actions[i]) == len && memcmp(actions[i], w, len) == 0)
			return (int)i;
	return -1;
}

/*
 * Parse the `actions` key: blank-separated words of actions[]. Return: the
 * mask (ALL_ACTIONS when @s is NULL), or 0 after shmrun_task_error() named
 * the word that is not an action.
 */
static uint32_t parse_actions(struct shmrun_task *task, const char *s)
{
	uint32_t mask = 0;

	if (!s)
		return ALL_ACTIONS;
	while (*s) {
		size_t len;
		int i;

		s += strspn(s, " \t\n");
		len = strcspn(s, " \t\n");
		if (!len)
			break;
		i = action_index(s, len);
		if (i < 0) {
			shmrun_task_error(task,
					  "actions: '%.*s' is not a dpkg.log action; use words of: "
					  "install upgrade configure trigproc disappear remove "
					  "purge status",
					  (int)len, s);
			return 0;
		}
		mask |= 1u << i;
		s += len;
	}
	if (!mask)
		shmrun_task_error(task, "actions: no action named; leave the key out for all");
	return mask;
}

/* @n decimal digits at @p, within [lo, hi], into *@v. */
static bool digits(const char *p, int n, int lo, int hi, int *v)
{
	int x = 0;

	for (int i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return false;
		x = x * 10 + (p[i] - '0');
	}
	*v = x;
	return x >= lo && x <= hi;
}

/* "YYYY-MM-DD HH:MM:SS" (19 bytes at @p), local time, into ns since the epoch. */
static bool stamp_ns(struct dpkg_state *st, const char *p, int64_t *ns)
{
	struct tm tm;
	int y, mo, d, h, mi, s;
	time_t t;

	if (st->stamp_valid && memcmp(st->stamp, p, sizeof(st->stamp)) == 0) {
		*ns = st->stamp_ns; /* dpkg writes many lines per second */
		return true;
	}
	if (!digits(p, 4, 0, 9999, &y) || p[4] != '-' || !digits(p + 5, 2, 1, 12, &mo) ||
	    p[7] != '-' || !digits(p + 8, 2, 1, 31, &d) || p[10] != ' ' ||
	    !digits(p + 11, 2, 0, 23, &h) || p[13] != ':' || !digits(p + 14, 2, 0, 59, &mi) ||
	    p[16] != ':' || !digits(p + 17, 2, 0, 60, &s))
		return false;
	memset(&tm, 0, sizeof(tm));
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = s;
	tm.tm_isdst = -1; /* local time as dpkg wrote it: let the zone say whether DST */
	t = mktime(&tm);
	if (t == (time_t)-1)
		return false;
	memcpy(st->stamp, p, sizeof(st->stamp));
	st->stamp_ns = (int64_t)t * 1000000000;
	st->stamp_valid = true;
	*ns = st->stamp_ns;
	return true;
}

/*
 * Split @line into fields at single blanks; the first MAX_FIELDS go to @f.
 * Return: the number of fields, or -1 for an empty field or a control byte.
 */
static int split(const char *line, uint32_t len, struct span *f)
{
	uint32_t start = 0;
	int n = 0;

	for (uint32_t i = 0; i <= len; i++) {
		unsigned char c = i < len ? (unsigned char)line[i] : ' ';

		if (c < 0x20 || c == 0x7f)
			return -1;
		if (c != ' ')
			continue;
		if (i == start)
			return -1; /* empty field: two blanks, or a blank at either end */
		if (n < MAX_FIELDS) {
			f[n].p = line + start;
			f[n].len = i - start;
		}
		n++;
		start = i + 1;
	}
	return n;
}

static void malformed(struct shmrun_task *task, struct dpkg_state *st,
		      const struct shmrun_record *rec)
{
	if (++st->malformed <= MAX_SHOWN)
		shmrun_task_warn(task, "not a dpkg.log line, skipped: '%.*s'%s",
				 (int)(rec->value_len > 120 ? 120 : rec->value_len),
				 (const char *)rec->value, rec->value_len > 120 ? "..." : "");
}

/*
 * One line into *@out. Return: 1 if it makes a record, 0 if not (skipped or
 * malformed, counted). @out points into @rec's bytes.
 */
static int parse(struct shmrun_task *task, struct dpkg_state *st, const struct shmrun_record *rec,
		 struct shmrun_record *out)
{
	struct span f[MAX_FIELDS], pkg, what;
	int n, a;

	st->lines++;
	n = split(rec->value, rec->value_len, f);
	if (n < 3 || f[0].len != 10 || f[1].len != 8 ||
	    !stamp_ns(st, f[0].p, &out->event_time_ns)) {
		malformed(task, st, rec);
		return 0;
	}
	if ((f[2].len == 7 && memcmp(f[2].p, "startup", 7) == 0 && n == 5) ||
	    (f[2].len == 8 && memcmp(f[2].p, "conffile", 8) == 0 && n >= 5)) {
		st->skipped++;
		return 0;
	}
	a = action_index(f[2].p, f[2].len);
	if (a < 0 || n != 6) {
		malformed(task, st, rec);
		return 0;
	}
	if (!(st->mask & (1u << a))) {
		st->skipped++;
		return 0;
	}
	if ((unsigned)a == ACTION_STATUS) {
		/* status STATE PKG VERSION: what = "status STATE", one span of the line */
		pkg = f[4];
		what.p = f[2].p;
		what.len = (uint32_t)(f[3].p + f[3].len - f[2].p);
	} else {
		/* ACTION PKG OLD NEW */
		pkg = f[3];
		what = f[2];
	}
	if (st->key_action) {
		out->key = what.p, out->key_len = what.len;
		out->value = pkg.p, out->value_len = pkg.len;
	} else {
		out->key = pkg.p, out->key_len = pkg.len;
		out->value = what.p, out->value_len = what.len;
	}
	st->records++;
	return 1;
}

static int dpkg_prepare(struct shmrun_task *task)
{
	/* here, in the launcher (and in `shmrun check`), a bad `actions` stops
	 * the job with the stage's file:line before anything starts */
	return parse_actions(task, shmrun_task_param(task, "actions")) ? 0 : -EINVAL;
}

static int dpkg_open(struct shmrun_task *task, void **state)
{
	struct dpkg_state *st = calloc(1, sizeof(*st));
	const char *key = shmrun_task_param(task, "key");

	if (!st) {
		shmrun_task_error(task, "out of memory");
		return -ENOMEM;
	}
	st->key_action = key && strcmp(key, "action") == 0;
	st->mask = parse_actions(task, shmrun_task_param(task, "actions"));
	if (!st->mask) {
		free(st);
		return -EINVAL;
	}
	*state = st;
	return 0;
}

static int dpkg_process(struct shmrun_task *task, void *state, const struct shmrun_record *rec)
{
	struct shmrun_record out;

	if (!parse(task, state, rec, &out))
		return 0;
	return shmrun_emit(task, &out);
}

static int dpkg_process_batch(struct shmrun_task *task, void *state,
			      const struct shmrun_record *recs, uint32_t n)
{
	struct shmrun_record out[BATCH_OUT];
	uint32_t k = 0;
	int err;

	for (uint32_t i = 0; i < n; i++) {
		k += (uint32_t)parse(task, state, &recs[i], &out[k]);
		if (k == BATCH_OUT) {
			err = shmrun_emit_batch(task, out, k);
			if (err)
				return err;
			k = 0;
		}
	}
	return k ? shmrun_emit_batch(task, out, k) : 0;
}

static int dpkg_end(struct shmrun_task *task, void *state)
{
	struct dpkg_state *st = state;

	shmrun_task_log(task,
			"%" PRIu64 " lines: %" PRIu64 " records, %" PRIu64 " skipped, %" PRIu64
			" malformed",
			st->lines, st->records, st->skipped, st->malformed);
	if (st->malformed)
		shmrun_task_warn(
		    task,
		    "%" PRIu64 " lines not in dpkg.log format were skipped (the first %" PRIu64
		    " are shown above)",
		    st->malformed, st->malformed < MAX_SHOWN ? st->malformed : MAX_SHOWN);
	return 0;
}

static void dpkg_close(struct shmrun_task *task, void *state)
{
	(void)task;
	free(state);
}

static const struct shmrun_param_def dpkg_params[] = {
    {.key = "key",
     .type = SHMRUN_PARAM_ENUM,
     .def = "package",
     .choices = "package action",
     .doc = "package: key = package, value = action; action: key = action, value = package"},
    {.key = "actions",
     .type = SHMRUN_PARAM_STRING,
     .doc = "keep only these actions (blank-separated: install upgrade configure trigproc "
	    "disappear remove purge status); default all"},
    {0},
};

static const struct shmrun_operator dpkg_parse = {
    .size = sizeof(struct shmrun_operator),
    .name = "dpkg_parse",
    .summary = "parses /var/log/dpkg.log lines: key = package, value = action, event time = "
	       "the line's timestamp",
    .params = dpkg_params,
    .prepare = dpkg_prepare,
    .open = dpkg_open,
    .process = dpkg_process,
    .process_batch = dpkg_process_batch,
    .end_of_input = dpkg_end,
    .close = dpkg_close,
    .state_version = "1",
};

SHMRUN_PLUGIN("dpkg", "1.0.0", &dpkg_parse);
