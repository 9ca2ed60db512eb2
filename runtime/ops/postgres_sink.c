/*
 * runtime/ops/postgres_sink.c: postgres_sink, records into a PostgreSQL table
 * with libpq, exactly-once with checkpoints.
 *
 * Rows. `columns = COLUMN=SOURCE ...` maps each record to one row: SOURCE is
 * `key`, `value` (text), `event_time` (timestamptz from the record's ns
 * since the epoch; NULL for a record without one, event_time_ns 0) or `fN`
 * (the Nth TAB-separated field of the value, 1-based; NULL when the value has
 * fewer fields). Each record is formatted at process() into a line of COPY's
 * text format (backslash, TAB, newline and CR escaped), so a write is one
 * COPY of bytes already in hand, the fastest way into PostgreSQL.
 *
 * `mode = append` (default) COPYs the rows into the table. `mode = upsert`
 * COPYs them into a temporary table and then runs
 *
 *     INSERT INTO t (cols) SELECT DISTINCT ON (keycols) cols FROM tmp
 *       ORDER BY keycols, seq DESC
 *       ON CONFLICT (keycols) DO UPDATE SET other = EXCLUDED.other, ...
 *
 * where keycols are the columns mapped from `key`: the newest row of a key in
 * the epoch wins (ON CONFLICT cannot touch a row twice in one statement). It
 * needs a unique index (or primary key) on exactly keycols: prepare() checks.
 * Measured against the alternative, a multi-row INSERT .. ON CONFLICT of
 * 1000 rows per statement (PostgreSQL 15, fsync off, 200k rows that all
 * conflict, one transaction): about 100k rows/s for this path, 90k for the
 * INSERTs; and a multi-row INSERT refuses a key twice in one statement,
 * which count's `emit = update` sends all the time (the sink would have to
 * dedupe first). Rejected: deduping by key in the sink's memory (less to
 * send and to checkpoint under emit = update; a later change, measured).
 *
 * Exactly-once, with checkpoint_dir (two-phase commit, docs/design.md §6, as
 * file_sink; the progress table idea is Flink's JDBC XA sink and Kafka
 * Connect's offset-in-the-same-transaction pattern):
 *
 *   - the rows of epoch e (records between barrier e-1 and barrier e) are held
 *     in memory; at snapshot(e) they become a pending epoch, and every pending
 *     epoch is added to the checkpoint as one per-worker entry
 *     [u64 epoch][u32 instance that staged it][u32 0][COPY bytes], again at
 *     each snapshot until it is committed, so a crash between the MANIFEST
 *     and the database commit loses nothing;
 *   - commit(E) writes each pending epoch e <= E in ONE transaction:
 *
 *         BEGIN
 *         INSERT INTO progress (job, sink, target, instance, epoch) ... ON CONFLICT DO NOTHING
 *           -> no row inserted: the epoch is in the table already: ROLLBACK, skip
 *         COPY rows (append) | COPY into the temp table + INSERT .. ON CONFLICT (upsert)
 *         COMMIT
 *
 *     so the table never holds an epoch twice nor half of one. The progress
 *     row is inserted first: its primary key lock also orders a writer that
 *     a crashed run left behind on the server against this one;
 *   - restore() gets the pending epochs of the restored checkpoint r: they
 *     are <= r, whose MANIFEST is durable, so they are written at once
 *     (skipped if already there: logged once per restore). The progress row
 *     names the instance that staged the epoch, so a rescale (pw_rule SPLIT:
 *     each entry owned by one new instance) stays exactly-once;
 *   - a progress row is (job name, stage, target table as the server names
 *     it, schema-qualified, instance, epoch): two jobs of the same name (the
 *     default name is the conf file's: job.conf -> "job") into different
 *     tables do not touch each other's rows;
 *   - a fresh start (the stage restores nothing) begins epochs at 1 again:
 *     instance 0's open() deletes this job's and stage's progress rows before
 *     it can snapshot epoch 1, so before any instance can commit anything
 *     (a commit needs every task's snapshot of the epoch). The table's rows
 *     of the earlier run stay: a fresh start appends again (docs);
 *   - restoring a checkpoint r older than what was committed (a newer one
 *     was damaged, or moved away by hand) cannot take rows out of an append
 *     table: instance 0 warns, naming the epochs, and deletes their progress
 *     rows (in open(), before any commit after r), so the replayed input is
 *     written again rather than skipped: a replayed epoch's number may come
 *     again (a checkpoint directory moved away no longer raises the epoch
 *     floor) for other records than before, and skipping it would lose them.
 *     Append then holds those epochs' rows twice (at-least-once, warned);
 *     upsert converges to the right values.
 *
 * Without checkpoint_dir there is no exactly-once: rows are written in one
 * transaction per flush (at most every flush_interval, when input drained)
 * and at end of input. A crash loses the rows not yet written, and a
 * connection lost during COMMIT may write a batch twice (at-least-once for
 * what was written; best effort).
 *
 * Connections. prepare() runs in the launcher before the workers fork: it
 * connects once (no retry: a wrong password, a missing table or column is an
 * error before anything starts, exit 2, at the line of the key), checks the
 * table, every mapped column, the INSERT privilege and (upsert) the unique
 * index, creates the progress table, and disconnects: a libpq connection is
 * never carried across fork(). `shmrun check` connects only with --connect,
 * and then creates nothing. Each instance connects itself, lazily (instance
 * 0 in open() at a fresh start). A failed connect or a connection lost
 * mid-transaction is retried with exponential backoff (100 ms doubling up to
 * 5 s) for up to retry_max; the transaction never committed, so the epoch is
 * written again whole. After retry_max the task fails with a message naming
 * host, port, database and user (never the password) and the job restarts
 * per restart_attempts. An SQL error is not retried: the task fails with the
 * server's message. When the server refuses the rows themselves (SQLSTATE
 * class 22, data exception: a value the column type refuses; class 23,
 * integrity constraint: NOT NULL, a unique index in append mode) the error
 * is -EILSEQ, a malformed record, which the launcher does not restart: the
 * restart would meet the same rows again (as extract's on_bad_record = fail).
 *
 * commit() runs on the worker's thread: the worker processes nothing while a
 * transaction runs (as file_sink's copy). Rejected: a writer thread (libpq is
 * fine with it, but the worker's stall accounting and the failure path would
 * have to learn about it; measure first); one transaction per checkpoint for
 * all instances (needs a coordinator and XA-like prepared transactions).
 */
#include <errno.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops.h"

#define SRC_KEY (-1)
#define SRC_VALUE (-2)
#define SRC_TIME (-3)
#define ENTRY_HDR 16u                  /* [u64 epoch][u32 instance][u32 0] */
#define NOCKPT_FLUSH_BYTES (8u << 20)  /* without checkpoints: write past this */
#define BACKOFF_MIN_NS 100000000ll
#define BACKOFF_MAX_NS 5000000000ll

struct col {
	char *name; /* as written (a column name, case as in the catalog) */
	int src;    /* SRC_*, or field number >= 1 */
};

/* Rows of one epoch: ENTRY_HDR bytes of header, then COPY text lines. */
struct rows {
	unsigned char *buf;
	size_t len, cap;
	uint64_t n; /* rows */
};

struct pgsink {
	PGconn *conn;
	const char *conninfo, *table, *progress;
	char *job, *sink;
	char *table_q; /* table as resolved by the server (open()), owned */
	struct col *cols;
	uint32_t ncols;
	bool upsert, exactly_once, temp_made, skip_logged;
	bool rows_refused; /* the last SQL error was about the rows (SQLSTATE 22, 23) */
	int64_t retry_max_ns, flush_every_ns, last_write_ns;
	uint64_t connect_timeout_s;
	char *copy_sql;   /* COPY t (cols) FROM STDIN, or into the temp table */
	char *upsert_sql; /* the INSERT .. ON CONFLICT from the temp table */
	struct rows open; /* the epoch being filled (header reserved) */
	struct rows *pending;
	uint32_t npending, cap;
	char appname[64];
};

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static void sleep_ns(int64_t ns)
{
	struct timespec ts = {.tv_sec = ns / 1000000000ll, .tv_nsec = ns % 1000000000ll};

	nanosleep(&ts, NULL);
}

/* ---- configuration ------------------------------------------------------- */

static void free_cols(struct col *cols, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		free(cols[i].name);
	free(cols);
}

/*
 * Parse `columns`: blank-separated COLUMN=SOURCE. Return: 0, or -EINVAL after
 * an error at the key's line; -ENOMEM.
 */
static int parse_columns(struct shmrun_task *task, struct col **out, uint32_t *nout)
{
	const char *p = shmrun_task_param(task, "columns");
	struct col *cols = NULL;
	uint32_t n = 0, cap = 0;

	while (p && *p) {
		const char *w, *eq;
		size_t len;
		char *end;
		int src;

		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			break;
		w = p;
		while (*p && *p != ' ' && *p != '\t')
			p++;
		len = (size_t)(p - w);
		eq = memchr(w, '=', len);
		if (!eq || eq == w || eq == w + len - 1)
			goto bad;
		if ((size_t)(w + len - eq - 1) == 3 && strncmp(eq + 1, "key", 3) == 0)
			src = SRC_KEY;
		else if ((size_t)(w + len - eq - 1) == 5 && strncmp(eq + 1, "value", 5) == 0)
			src = SRC_VALUE;
		else if ((size_t)(w + len - eq - 1) == 10 && strncmp(eq + 1, "event_time", 10) == 0)
			src = SRC_TIME;
		else if (eq[1] == 'f' && eq[2] >= '1' && eq[2] <= '9') {
			unsigned long f = strtoul(eq + 2, &end, 10);

			if (end != w + len || f > 65535)
				goto bad;
			src = (int)f;
		} else
			goto bad;
		for (uint32_t i = 0; i < n; i++)
			if (strlen(cols[i].name) == (size_t)(eq - w) &&
			    strncmp(cols[i].name, w, (size_t)(eq - w)) == 0) {
				shmrun_task_error_at(task, "columns",
						     "columns: column %.*s is mapped twice",
						     (int)(eq - w), w);
				free_cols(cols, n);
				return -EINVAL;
			}
		if (shmrun_grow_u32(&cols, &cap, (size_t)n + 1, sizeof(*cols), 8) ||
		    !(cols[n].name = strndup(w, (size_t)(eq - w)))) {
			free_cols(cols, n);
			return -ENOMEM;
		}
		cols[n++].src = src;
		continue;
bad:
		shmrun_task_error_at(task, "columns",
				     "columns: '%.*s' is not COLUMN=SOURCE with SOURCE one of key, "
				     "value, event_time, f1, f2, ... (the Nth TAB-separated field "
				     "of the value), e.g. columns = word=key n=f1",
				     (int)len, w);
		free_cols(cols, n);
		return -EINVAL;
	}
	if (!n) {
		shmrun_task_error_at(task, "columns", "columns: no COLUMN=SOURCE pair");
		return -EINVAL;
	}
	*out = cols;
	*nout = n;
	return 0;
}

static bool has_key_col(const struct col *cols, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (cols[i].src == SRC_KEY)
			return true;
	return false;
}

/* ---- connecting ---------------------------------------------------------- */

/* "host H port P database D user U" of @conn, never the password. */
static void describe(PGconn *conn, char *buf, size_t len)
{
	const char *h = conn ? PQhost(conn) : NULL, *p = conn ? PQport(conn) : NULL;
	const char *d = conn ? PQdb(conn) : NULL, *u = conn ? PQuser(conn) : NULL;

	snprintf(buf, len, "host %s port %s database %s user %s", h && *h ? h : "(default)",
		 p && *p ? p : "(default)", d && *d ? d : "(default)", u && *u ? u : "(default)");
}

/* libpq's message without its trailing newline(s), in @buf. */
static const char *pq_msg(PGconn *conn, char *buf, size_t len)
{
	size_t n;

	snprintf(buf, len, "%s", conn ? PQerrorMessage(conn) : "out of memory");
	n = strlen(buf);
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = 0;
	for (char *c = buf; *c; c++)
		if (*c == '\n')
			*c = ' ';
	return buf;
}

static void quiet_notice(void *arg, const char *msg)
{
	(void)arg;
	(void)msg;
}

/* One connection attempt. Return: the connection (status OK) or NULL, the
 * reason in @why. */
static PGconn *connect_once(struct pgsink *s, char *why, size_t len)
{
	char timeout[24];
	/* TCP keepalives and a user timeout, so that a server or network that
	 * goes away without closing the connection is noticed (libpq's
	 * defaults: the system's two hours of keepalive idle, retransmissions
	 * for about 15 minutes). Before dbname: what conninfo says wins.
	 * Ignored on a unix socket. */
	const char *keys[] = {"keepalives",	    "keepalives_idle", "keepalives_interval",
			      "keepalives_count", "tcp_user_timeout", "connect_timeout",
			      "dbname",		    "fallback_application_name", NULL};
	const char *vals[] = {"1", "30", "10", "3", "60000", timeout, s->conninfo, s->appname, NULL};
	PGconn *c;

	snprintf(timeout, sizeof(timeout), "%" PRIu64, s->connect_timeout_s);
	c = PQconnectdbParams(keys, vals, 1);
	if (c && PQstatus(c) == CONNECTION_OK) {
		/* no NOTICE lines on stderr ("relation ... already exists, skipping") */
		PQsetNoticeProcessor(c, quiet_notice, NULL);
		return c;
	}
	{
		char where[512], msg[1024];

		describe(c, where, sizeof(where));
		snprintf(why, len, "cannot connect to PostgreSQL (%s): %s", where,
			 pq_msg(c, msg, sizeof(msg)));
	}
	PQfinish(c);
	return NULL;
}

/*
 * A live connection in s->conn: connect, retrying with backoff for up to
 * retry_max. Return: 0, or -EHOSTUNREACH after an error naming the server.
 */
static int ensure_conn(struct shmrun_task *task, struct pgsink *s)
{
	int64_t start = now_ns(), delay = BACKOFF_MIN_NS;
	char why[1600];
	bool warned = false;

	if (s->conn && PQstatus(s->conn) == CONNECTION_OK)
		return 0;
	PQfinish(s->conn);
	s->conn = NULL;
	s->temp_made = false;
	for (;;) {
		s->conn = connect_once(s, why, sizeof(why));
		if (s->conn) {
			if (warned)
				shmrun_task_log(task, "connected to PostgreSQL again");
			return 0;
		}
		if (now_ns() - start + delay > s->retry_max_ns) {
			shmrun_task_error(task, "%s; gave up after retry_max = %.1fs (the job restarts "
						"per restart_attempts)",
					  why, (double)s->retry_max_ns / 1e9);
			return -EHOSTUNREACH;
		}
		if (!warned)
			shmrun_task_warn(task, "%s; retrying for up to %.1fs", why,
					 (double)s->retry_max_ns / 1e9);
		warned = true;
		sleep_ns(delay);
		delay = delay * 2 > BACKOFF_MAX_NS ? BACKOFF_MAX_NS : delay * 2;
	}
}

/* ---- writing ------------------------------------------------------------- */

enum wr { WR_OK, WR_SKIPPED, WR_LOST, WR_FAILED };

/* @r failed: the connection is gone (retry) or the server refused (fail). */
static enum wr failed(struct shmrun_task *task, struct pgsink *s, PGresult *r, const char *what)
{
	const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
	char msg[1024];

	if (PQstatus(s->conn) != CONNECTION_OK || !state ||
	    strncmp(state, "08", 2) == 0 || /* connection exception */
	    strcmp(state, "40001") == 0 || strcmp(state, "40P01") == 0 || /* serialization, deadlock */
	    strcmp(state, "57P01") == 0 || strcmp(state, "57P02") == 0 || /* admin/crash shutdown */
	    strcmp(state, "57P03") == 0) {
		PQclear(r);
		return WR_LOST;
	}
	/* classes 22 (data exception) and 23 (integrity constraint): the rows
	 * themselves are refused, and a restart would meet them again */
	s->rows_refused = strncmp(state, "22", 2) == 0 || strncmp(state, "23", 2) == 0;
	shmrun_task_error(task, "%s into %s failed: %s (SQLSTATE %s)%s", what, s->table,
			  pq_msg(s->conn, msg, sizeof(msg)), state,
			  s->rows_refused ? "; the server refuses these rows, so a restart would "
					    "fail again: fix the table's column types or constraints, "
					    "or the columns mapping"
					  : "");
	PQclear(r);
	return WR_FAILED;
}

static enum wr exec_ok(struct shmrun_task *task, struct pgsink *s, const char *sql,
		       const char *what)
{
	PGresult *r = PQexec(s->conn, sql);

	if (r && (PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK)) {
		PQclear(r);
		return WR_OK;
	}
	return failed(task, s, r, what);
}

static enum wr copy_rows(struct shmrun_task *task, struct pgsink *s, const unsigned char *p,
			 size_t n)
{
	PGresult *r = PQexec(s->conn, s->copy_sql);

	if (!r || PQresultStatus(r) != PGRES_COPY_IN)
		return failed(task, s, r, "COPY");
	PQclear(r);
	while (n > 0) {
		int k = n > (1u << 20) ? 1 << 20 : (int)n;

		if (PQputCopyData(s->conn, (const char *)p, k) != 1)
			return failed(task, s, NULL, "COPY");
		p += k;
		n -= (size_t)k;
	}
	if (PQputCopyEnd(s->conn, NULL) != 1)
		return failed(task, s, NULL, "COPY");
	r = PQgetResult(s->conn);
	if (!r || PQresultStatus(r) != PGRES_COMMAND_OK) {
		enum wr w = failed(task, s, r, "COPY");

		while ((r = PQgetResult(s->conn)))
			PQclear(r);
		return w;
	}
	PQclear(r);
	while ((r = PQgetResult(s->conn)))
		PQclear(r);
	return WR_OK;
}

/* The rows of @p (@n bytes of COPY text), inside a transaction. */
static enum wr put_rows(struct shmrun_task *task, struct pgsink *s, const unsigned char *p, size_t n)
{
	enum wr w;

	if (!s->upsert)
		return copy_rows(task, s, p, n);
	if (!s->temp_made) {
		/* per connection; ON COMMIT DELETE ROWS empties it after each epoch */
		char *sql = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&sql, &len);

		if (!f)
			return WR_FAILED;
		fputs("CREATE TEMP TABLE IF NOT EXISTS shmrun_upsert ON COMMIT DELETE ROWS AS SELECT ",
		      f);
		for (uint32_t i = 0; i < s->ncols; i++) {
			char *q = PQescapeIdentifier(s->conn, s->cols[i].name, strlen(s->cols[i].name));

			fprintf(f, "%s%s", i ? ", " : "", q ? q : "");
			PQfreemem(q);
		}
		fprintf(f, " FROM %s WITH NO DATA; ALTER TABLE shmrun_upsert ADD COLUMN IF NOT "
			   "EXISTS shmrun_seq bigserial",
			s->table);
		fclose(f);
		w = exec_ok(task, s, sql, "creating the temporary table for upsert");
		free(sql);
		if (w != WR_OK)
			return w;
		s->temp_made = true;
	}
	w = copy_rows(task, s, p, n);
	if (w != WR_OK)
		return w;
	return exec_ok(task, s, s->upsert_sql, "INSERT ... ON CONFLICT");
}

/* Inside an open transaction: the rows, then COMMIT; a failed write rolls
 * the transaction back while the connection still stands (a lost one rolled
 * it back itself). Return: as put_rows(), then COMMIT's outcome. */
static enum wr put_and_commit(struct shmrun_task *task, struct pgsink *s, const unsigned char *p,
			      size_t n)
{
	enum wr w = put_rows(task, s, p, n);

	if (w != WR_OK) {
		if (w == WR_FAILED && PQstatus(s->conn) == CONNECTION_OK)
			PQclear(PQexec(s->conn, "ROLLBACK"));
		return w;
	}
	return exec_ok(task, s, "COMMIT", "COMMIT");
}

/*
 * One attempt at epoch @e of @instance (@p: @n bytes of rows), in one
 * transaction with its progress row. Return: WR_OK, WR_SKIPPED (already
 * there), WR_LOST (rolled back: try again), WR_FAILED (error recorded).
 */
static enum wr try_epoch(struct shmrun_task *task, struct pgsink *s, uint64_t e,
			 uint32_t instance, const unsigned char *p, size_t n)
{
	char es[24], is[16], *sql = NULL;
	const char *params[5] = {s->job, s->sink, s->table, is, es};
	PGresult *r;
	enum wr w;

	snprintf(es, sizeof(es), "%" PRIu64, e);
	snprintf(is, sizeof(is), "%u", instance);
	w = exec_ok(task, s, "BEGIN", "BEGIN");
	if (w != WR_OK)
		return w;
	if (asprintf(&sql,
		     "INSERT INTO %s (job, sink, target, instance, epoch) VALUES ($1, $2, $3, $4, "
		     "$5) ON CONFLICT DO NOTHING",
		     s->progress) < 0)
		return WR_FAILED;
	r = PQexecParams(s->conn, sql, 5, NULL, params, NULL, NULL, 0);
	free(sql);
	if (!r || PQresultStatus(r) != PGRES_COMMAND_OK)
		return failed(task, s, r, "INSERT of the progress row");
	if (strcmp(PQcmdTuples(r), "0") == 0) {
		PQclear(r);
		w = exec_ok(task, s, "ROLLBACK", "ROLLBACK");
		return w == WR_OK ? WR_SKIPPED : w;
	}
	PQclear(r);
	return put_and_commit(task, s, p, n);
}

/* A batch without checkpoints: one transaction, no progress row. */
static enum wr try_plain(struct shmrun_task *task, struct pgsink *s, const unsigned char *p,
			 size_t n)
{
	enum wr w = exec_ok(task, s, "BEGIN", "BEGIN");

	return w == WR_OK ? put_and_commit(task, s, p, n) : w;
}

/*
 * Write rows @rw: with @e != 0 as epoch @e staged by @instance, exactly once;
 * else as a plain batch. Reconnects and writes again after a lost connection.
 * Return: 0, or a negative errno after shmrun_task_error().
 */
static int write_rows(struct shmrun_task *task, struct pgsink *s, uint64_t e, uint32_t instance,
		      const struct rows *rw)
{
	int64_t start = now_ns();

	for (;;) {
		enum wr w;
		int err = ensure_conn(task, s);

		if (err)
			return err;
		w = e ? try_epoch(task, s, e, instance, rw->buf + ENTRY_HDR, rw->len - ENTRY_HDR)
		      : try_plain(task, s, rw->buf + ENTRY_HDR, rw->len - ENTRY_HDR);
		if (w == WR_OK) {
			shmrun_task_count(task, SHMRUN_COUNT_RECORDS_OUT, rw->n);
			return 0;
		}
		if (w == WR_SKIPPED) {
			if (!s->skip_logged)
				shmrun_task_log(task, "epoch %" PRIu64 " of instance %u is in %s "
						      "already (committed before the restart): "
						      "skipped; later ones are skipped silently",
						e, instance, s->table);
			s->skip_logged = true;
			return 0;
		}
		if (w == WR_FAILED) /* EILSEQ: a malformed record, the launcher does not restart */
			return s->rows_refused ? -EILSEQ : -EIO;
		{
			char where[512], msg[1024];

			describe(s->conn, where, sizeof(where));
			shmrun_task_warn(task, "connection to PostgreSQL (%s) lost while writing %s "
					       "%" PRIu64 ": %s; rolled back, writing it again",
					 where, e ? "epoch" : "a batch at", e,
					 pq_msg(s->conn, msg, sizeof(msg)));
		}
		PQfinish(s->conn);
		s->conn = NULL;
		if (now_ns() - start > s->retry_max_ns) {
			shmrun_task_error(task, "PostgreSQL kept failing for retry_max = %.1fs "
						"while writing into %s",
					  (double)s->retry_max_ns / 1e9, s->table);
			return -EHOSTUNREACH;
		}
		sleep_ns(BACKOFF_MIN_NS);
	}
}

/* ---- rows ---------------------------------------------------------------- */

static int rows_reserve(struct rows *rw, size_t more)
{
	if (rw->len + more <= rw->cap)
		return 0;
	size_t cap = rw->cap ? rw->cap : 4096;

	while (cap < rw->len + more)
		cap *= 2;
	unsigned char *b = realloc(rw->buf, cap);

	if (!b)
		return -ENOMEM;
	rw->buf = b;
	rw->cap = cap;
	return 0;
}

static void rows_reset(struct rows *rw)
{
	rw->len = ENTRY_HDR;
	rw->n = 0;
}

/* Append @n bytes of @p escaped for COPY's text format. Reserved by caller. */
static unsigned char *put_escaped(unsigned char *o, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = p[i];

		if (c == '\\' || c == '\t' || c == '\n' || c == '\r') {
			*o++ = '\\';
			*o++ = c == '\\' ? '\\' : c == '\t' ? 't' : c == '\n' ? 'n' : 'r';
		} else {
			*o++ = c;
		}
	}
	return o;
}

/* Field @f (1-based) of @v, TAB-separated. Return: false if absent. */
static bool field(const unsigned char *v, size_t n, int f, const unsigned char **out,
		  size_t *len)
{
	size_t i = 0;

	for (int k = 1; k < f; k++) {
		const unsigned char *t = memchr(v + i, '\t', n - i);

		if (!t)
			return false;
		i = (size_t)(t - v) + 1;
	}
	{
		const unsigned char *t = memchr(v + i, '\t', n - i);

		*out = v + i;
		*len = t ? (size_t)(t - (v + i)) : n - i;
	}
	return true;
}

static int add_row(struct pgsink *s, const struct shmrun_record *rec)
{
	/* worst case: every byte escaped, a timestamp per column, separators */
	size_t need = 2 * ((size_t)rec->key_len + rec->value_len) * s->ncols + 48u * s->ncols + 2;
	unsigned char *o;

	if (rows_reserve(&s->open, need))
		return -ENOMEM;
	o = s->open.buf + s->open.len;
	for (uint32_t i = 0; i < s->ncols; i++) {
		int src = s->cols[i].src;

		if (i)
			*o++ = '\t';
		if (src == SRC_KEY) {
			o = put_escaped(o, rec->key, rec->key_len);
		} else if (src == SRC_VALUE) {
			o = put_escaped(o, rec->value, rec->value_len);
		} else if (src == SRC_TIME) {
			int64_t t = rec->event_time_ns, sec, us;
			struct tm tm;
			time_t tt;

			if (t == 0) {
				*o++ = '\\';
				*o++ = 'N';
				continue;
			}
			sec = t / 1000000000ll;
			us = (t % 1000000000ll) / 1000;
			if (us < 0) {
				us += 1000000;
				sec--;
			}
			tt = (time_t)sec;
			gmtime_r(&tt, &tm);
			o += snprintf((char *)o, 48, "%04d-%02d-%02d %02d:%02d:%02d.%06d+00",
				      tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
				      tm.tm_min, tm.tm_sec, (int)us);
		} else {
			const unsigned char *f;
			size_t len;

			if (rec->value_len && field(rec->value, rec->value_len, src, &f, &len)) {
				o = put_escaped(o, f, len);
			} else {
				*o++ = '\\';
				*o++ = 'N';
			}
		}
	}
	*o++ = '\n';
	s->open.len = (size_t)(o - s->open.buf);
	s->open.n++;
	return 0;
}

/* ---- SQL text ------------------------------------------------------------ */

/* COPY and upsert statements for @s (needs a connection for quoting). */
static int build_sql(struct pgsink *s, PGconn *conn)
{
	char *cols = NULL, *keys = NULL, *set = NULL;
	size_t a, b, c;
	FILE *fc = open_memstream(&cols, &a), *fk = open_memstream(&keys, &b),
	     *fs = open_memstream(&set, &c);
	int err = 0;

	if (!fc || !fk || !fs) {
		if (fc)
			fclose(fc);
		if (fk)
			fclose(fk);
		if (fs)
			fclose(fs);
		free(cols), free(keys), free(set);
		return -ENOMEM;
	}
	for (uint32_t i = 0, nk = 0, ns = 0; i < s->ncols; i++) {
		char *q = PQescapeIdentifier(conn, s->cols[i].name, strlen(s->cols[i].name));

		if (!q) {
			err = -ENOMEM;
			continue;
		}
		fprintf(fc, "%s%s", i ? ", " : "", q);
		if (s->cols[i].src == SRC_KEY)
			fprintf(fk, "%s%s", nk++ ? ", " : "", q);
		else
			fprintf(fs, "%s%s = EXCLUDED.%s", ns++ ? ", " : "", q, q);
		PQfreemem(q);
	}
	fclose(fc);
	fclose(fk);
	fclose(fs);
	if (!err && s->upsert) {
		if (asprintf(&s->copy_sql, "COPY shmrun_upsert (%s) FROM STDIN", cols) < 0 ||
		    asprintf(&s->upsert_sql,
			     "INSERT INTO %s (%s) SELECT DISTINCT ON (%s) %s FROM shmrun_upsert "
			     "ORDER BY %s, shmrun_seq DESC ON CONFLICT (%s) DO %s%s",
			     s->table, cols, keys, cols, keys, keys, *set ? "UPDATE SET " : "NOTHING",
			     set) < 0)
			err = -ENOMEM;
	} else if (!err) {
		if (asprintf(&s->copy_sql, "COPY %s (%s) FROM STDIN", s->table, cols) < 0)
			err = -ENOMEM;
	}
	free(cols);
	free(keys);
	free(set);
	return err;
}

/* ---- prepare: in the launcher, before the workers fork ------------------- */

/* One query with text parameters; the result if it returned rows, else
 * NULL with the server's message in @msg. */
static PGresult *query(PGconn *c, const char *sql, int n, const char *const *params, char *msg,
		       size_t len)
{
	PGresult *r = PQexecParams(c, sql, n, NULL, params, NULL, NULL, 0);

	if (r && (PQresultStatus(r) == PGRES_TUPLES_OK || PQresultStatus(r) == PGRES_COMMAND_OK))
		return r;
	pq_msg(c, msg, len);
	PQclear(r);
	return NULL;
}

/* Whether @name is a valid (possibly qualified) SQL name: parse_ident(). */
static int check_name(struct shmrun_task *task, PGconn *c, const char *key, const char *name)
{
	const char *p[1] = {name};
	char msg[1024];
	PGresult *r = query(c, "SELECT parse_ident($1)", 1, p, msg, sizeof(msg));

	if (!r) {
		shmrun_task_error_at(task, key, "%s = %s: not a table name: %s", key, name, msg);
		return -EINVAL;
	}
	PQclear(r);
	return 0;
}

static int check_table(struct shmrun_task *task, struct pgsink *s, PGconn *c, const char *where)
{
	const char *p[2] = {s->table, NULL};
	char msg[1024];
	PGresult *r;
	int err = check_name(task, c, "table", s->table);

	if (err)
		return err;
	r = query(c, "SELECT to_regclass($1) IS NOT NULL, has_table_privilege(to_regclass($1), 'INSERT')"
		     " FROM (SELECT 1) x WHERE to_regclass($1) IS NOT NULL "
		     "UNION ALL SELECT false, false WHERE to_regclass($1) IS NULL",
		  1, p, msg, sizeof(msg));
	if (!r) {
		shmrun_task_error_at(task, "table", "table = %s: %s", s->table, msg);
		return -EINVAL;
	}
	if (PQntuples(r) != 1 || strcmp(PQgetvalue(r, 0, 0), "t") != 0) {
		shmrun_task_error_at(task, "table",
				     "table = %s: no such table in PostgreSQL (%s); create it, or "
				     "name it with its schema (schema.table)",
				     s->table, where);
		PQclear(r);
		return -ENOENT;
	}
	if (strcmp(PQgetvalue(r, 0, 1), "t") != 0) {
		shmrun_task_error_at(task, "table",
				     "table = %s: the user may not INSERT into it (%s); GRANT INSERT",
				     s->table, where);
		PQclear(r);
		return -EACCES;
	}
	PQclear(r);
	for (uint32_t i = 0; i < s->ncols; i++) {
		p[1] = s->cols[i].name;
		r = query(c, "SELECT count(*) FILTER (WHERE attname = $2), string_agg(attname, ' ' "
			     "ORDER BY attnum) FROM pg_attribute WHERE attrelid = to_regclass($1) "
			     "AND attnum > 0 AND NOT attisdropped",
			  2, p, msg, sizeof(msg));
		if (!r) {
			shmrun_task_error_at(task, "columns", "columns: %s", msg);
			return -EINVAL;
		}
		if (strcmp(PQgetvalue(r, 0, 0), "1") != 0) {
			shmrun_task_error_at(task, "columns",
					     "columns: table %s has no column %s (it has: %s)",
					     s->table, s->cols[i].name, PQgetvalue(r, 0, 1));
			PQclear(r);
			return -ENOENT;
		}
		PQclear(r);
	}
	if (s->upsert) {
		/* a unique index (no predicate, no expression) whose key columns
		 * are exactly the columns mapped from key */
		char *arr = NULL;
		size_t len;
		FILE *f = open_memstream(&arr, &len);

		if (!f)
			return -ENOMEM;
		fputc('{', f);
		for (uint32_t i = 0, k = 0; i < s->ncols; i++)
			if (s->cols[i].src == SRC_KEY) {
				fputs(k++ ? ",\"" : "\"", f);
				for (const char *q = s->cols[i].name; *q; q++) {
					if (*q == '"' || *q == '\\')
						fputc('\\', f);
					fputc(*q, f);
				}
				fputc('"', f);
			}
		fputc('}', f);
		fclose(f);
		p[1] = arr;
		r = query(c, "SELECT count(*) FROM pg_index i WHERE i.indrelid = to_regclass($1) "
			     "AND i.indisunique AND i.indpred IS NULL AND i.indexprs IS NULL AND "
			     "(SELECT array_agg(a.attname::text ORDER BY a.attname::text) FROM "
			     "pg_attribute a WHERE a.attrelid = i.indrelid AND a.attnum = ANY "
			     "((i.indkey::int2[])[0:i.indnkeyatts - 1])) = (SELECT array_agg(x "
			     "ORDER BY x) FROM unnest($2::text[]) x)",
			  2, p, msg, sizeof(msg));
		free(arr);
		if (!r) {
			shmrun_task_error_at(task, "mode", "mode = upsert: %s", msg);
			return -EINVAL;
		}
		if (strcmp(PQgetvalue(r, 0, 0), "0") == 0) {
			shmrun_task_error_at(task, "mode",
					     "mode = upsert needs a unique index (or primary key) on "
					     "exactly the columns mapped from key in table %s, for "
					     "ON CONFLICT; e.g. CREATE UNIQUE INDEX ON %s (...)",
					     s->table, s->table);
			PQclear(r);
			return -EINVAL;
		}
		PQclear(r);
	}
	return 0;
}

static char *progress_ddl(const struct pgsink *s)
{
	char *sql = NULL;

	if (asprintf(&sql,
		     "CREATE TABLE IF NOT EXISTS %s (job text NOT NULL, sink text NOT NULL, "
		     "target text NOT NULL, instance integer NOT NULL, epoch bigint NOT NULL, "
		     "committed_at timestamptz NOT NULL DEFAULT now(), "
		     "PRIMARY KEY (job, sink, target, instance, epoch))",
		     s->progress) < 0)
		return NULL;
	return sql;
}

static void pg_free(struct pgsink *s);
static int pg_config(struct shmrun_task *task, struct pgsink *s);

/* An existing progress table has the columns this sink writes (absent: fine
 * in `check --connect`, which creates nothing; a run created it). */
static int check_progress(struct shmrun_task *task, struct pgsink *s, PGconn *c, const char *where)
{
	const char *p[1] = {s->progress};
	char *sql = NULL, msg[1024];
	PGresult *r = query(c, "SELECT to_regclass($1) IS NOT NULL", 1, p, msg, sizeof(msg));
	bool exists = r && strcmp(PQgetvalue(r, 0, 0), "t") == 0;

	PQclear(r);
	if (!exists)
		return 0;
	if (asprintf(&sql, "SELECT job, sink, target, instance, epoch FROM %s WHERE false",
		     s->progress) < 0)
		return -ENOMEM;
	r = query(c, sql, 0, NULL, msg, sizeof(msg));
	free(sql);
	if (!r) {
		shmrun_task_error_at(task, "progress_table",
				     "progress_table = %s exists (%s) but is not a progress table "
				     "of postgres_sink (columns job, sink, target, instance, epoch): "
				     "%s; name another one",
				     s->progress, where, msg);
		return -EINVAL;
	}
	PQclear(r);
	return 0;
}

/* Whether a query of one boolean answered true (false also on an error). */
static bool query_true(PGconn *c, const char *sql, const char *arg)
{
	const char *p[1] = {arg};
	char msg[256];
	PGresult *r = query(c, sql, 1, p, msg, sizeof(msg));
	bool yes = r && PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "t") == 0;

	PQclear(r);
	return yes;
}

/*
 * The progress table exists, or is made: CREATE only when it is missing, so
 * a user without CREATE on the schema runs against a table its owner made
 * (with the DDL the message gives), and `check --connect`, which creates
 * nothing, says whether a run could. CREATE TABLE IF NOT EXISTS is not safe
 * against itself: two jobs starting at once both see no table and one fails
 * on the catalog's unique index (pg_type_typname_nsp_index); a session
 * advisory lock on the table's name orders them (the session ends in
 * pg_prepare()). Return: 0, or -EINVAL after an error at progress_table.
 */
static int ensure_progress(struct shmrun_task *task, struct pgsink *s, PGconn *c,
			   const char *where)
{
	char *sql = progress_ddl(s), msg[1024];
	const char *name[1] = {s->progress};
	PGresult *lk, *r;
	int err = 0;

	if (!sql)
		return -ENOMEM;
	if (query_true(c, "SELECT to_regclass($1) IS NOT NULL", s->progress))
		goto out;
	if (!query_true(c,
			"SELECT has_schema_privilege(coalesce((parse_ident($1))"
			"[array_length(parse_ident($1), 1) - 1], current_schema()), 'CREATE')",
			s->progress)) {
		shmrun_task_error_at(task, "progress_table",
				     "progress_table = %s does not exist and this user may not "
				     "create it (%s: no CREATE on its schema); have its owner run "
				     "%s, and GRANT SELECT, INSERT, DELETE ON %s to this user",
				     s->progress, where, sql, s->progress);
		err = -EINVAL;
		goto out;
	}
	if (!shmrun_task_may_create(task))
		goto out; /* check --connect: it could, and creates nothing */
	lk = query(c, "SELECT pg_advisory_lock(hashtext($1))", 1, name, msg, sizeof(msg));
	r = lk ? query(c, sql, 0, NULL, msg, sizeof(msg)) : NULL;
	PQclear(lk);
	if (!r) {
		shmrun_task_error_at(task, "progress_table",
				     "progress_table = %s: cannot create it (%s): %s; have its "
				     "owner run %s",
				     s->progress, where, msg, sql);
		err = -EINVAL;
	}
	PQclear(r);
out:
	free(sql);
	return err;
}

/*
 * What a run does to the progress table it may do: SELECT (a restore looks
 * for committed epochs), INSERT (a commit), DELETE (a fresh start, an older
 * checkpoint restored). A missing right failed the run after its start, and
 * restarts could not cure it. A table check --connect did not find (it
 * creates nothing) is not looked at. Return: 0, or -EINVAL after an error.
 */
static int check_progress_rights(struct shmrun_task *task, struct pgsink *s, PGconn *c,
				 const char *where)
{
	static const char *const rights[] = {"SELECT", "INSERT", "DELETE"};

	if (!query_true(c, "SELECT to_regclass($1) IS NOT NULL", s->progress))
		return 0;
	for (size_t i = 0; i < sizeof(rights) / sizeof(rights[0]); i++) {
		char sql[96];

		snprintf(sql, sizeof(sql), "SELECT has_table_privilege($1, '%s')", rights[i]);
		if (!query_true(c, sql, s->progress)) {
			shmrun_task_error_at(task, "progress_table",
					     "progress_table = %s (%s): this user has no %s right "
					     "on it; have its owner GRANT SELECT, INSERT, DELETE ON "
					     "%s to it",
					     s->progress, where, rights[i], s->progress);
			return -EINVAL;
		}
	}
	return 0;
}

static int pg_prepare(struct shmrun_task *task)
{
	struct pgsink s = {0};
	char why[1600], where[512];
	PGconn *c;
	int err = pg_config(task, &s);

	if (err || !shmrun_task_may_connect(task)) {
		pg_free(&s);
		return err;
	}
	c = connect_once(&s, why, sizeof(why));
	if (!c) {
		shmrun_task_error_at(task, "conninfo", "%s", why);
		pg_free(&s);
		return -EHOSTUNREACH;
	}
	describe(c, where, sizeof(where));
	err = check_table(task, &s, c, where);
	if (!err && s.exactly_once)
		err = check_name(task, c, "progress_table", s.progress);
	if (!err && s.exactly_once)
		err = ensure_progress(task, &s, c, where);
	if (!err && s.exactly_once)
		err = check_progress(task, &s, c, where);
	if (!err && s.exactly_once)
		err = check_progress_rights(task, &s, c, where);
	PQfinish(c); /* never across fork() */
	pg_free(&s);
	return err;
}

/* ---- the operator -------------------------------------------------------- */

static int pg_config(struct shmrun_task *task, struct pgsink *s)
{
	const char *mode = shmrun_task_param(task, "mode");
	int err;

	s->conninfo = shmrun_task_param(task, "conninfo");
	s->table = shmrun_task_param(task, "table");
	s->progress = shmrun_task_param(task, "progress_table");
	s->upsert = mode && strcmp(mode, "upsert") == 0;
	s->exactly_once = shmrun_task_checkpointing(task);
	s->retry_max_ns = (int64_t)shmrun_task_param_u64(task, "retry_max", 60000000000ull);
	s->flush_every_ns = (int64_t)shmrun_task_param_u64(task, "flush_interval", 1000000000ull);
	s->connect_timeout_s = shmrun_task_param_u64(task, "connect_timeout", 10000000000ull) /
			       1000000000ull;
	if (s->connect_timeout_s < 2)
		s->connect_timeout_s = 2; /* libpq's least */
	snprintf(s->appname, sizeof(s->appname), "shmrun %s/%s[%u]", shmrun_task_job_name(task),
		 shmrun_task_stage(task), shmrun_task_instance(task));
	err = parse_columns(task, &s->cols, &s->ncols);
	if (err)
		return err;
	if (s->upsert && !has_key_col(s->cols, s->ncols)) {
		shmrun_task_error_at(task, "mode",
				     "mode = upsert needs a column mapped from key in columns "
				     "(COLUMN=key): ON CONFLICT uses it");
		return -EINVAL;
	}
	return 0;
}

static void pg_free(struct pgsink *s)
{
	PQfinish(s->conn);
	free_cols(s->cols, s->ncols);
	free(s->job);
	free(s->sink);
	free(s->table_q);
	free(s->copy_sql);
	free(s->upsert_sql);
	free(s->open.buf);
	for (uint32_t i = 0; i < s->npending; i++)
		free(s->pending[i].buf);
	free(s->pending);
}

/*
 * Instance 0, before it can snapshot anything (so before any instance can
 * commit an epoch after the restored one): at a fresh start, forget this
 * job's and stage's progress rows (epochs restart at 1); at a restore of
 * epoch r, forget those after r (an older checkpoint is restored: their
 * epoch numbers may come again for other rows, which must be written, not
 * skipped) and warn that their rows stay in the table.
 */
static int fresh_or_older(struct shmrun_task *task, struct pgsink *s)
{
	char rs[24], *sql = NULL, msg[1024];
	const char *p[4] = {s->job, s->sink, s->table, rs};
	bool fresh = !shmrun_task_restoring(task);
	PGresult *r;
	int err = ensure_conn(task, s);

	if (err)
		return err;
	snprintf(rs, sizeof(rs), "%" PRIu64, fresh ? 0 : shmrun_task_restored_epoch(task));
	if (asprintf(&sql,
		     "WITH d AS (DELETE FROM %s WHERE job = $1 AND sink = $2 AND target = $3 AND "
		     "epoch > $4 RETURNING epoch) SELECT count(*), min(epoch), max(epoch) FROM d",
		     s->progress) < 0)
		return -ENOMEM;
	r = query(s->conn, sql, 4, p, msg, sizeof(msg));
	free(sql);
	if (!r) {
		shmrun_task_error(task, "cleaning progress_table %s failed: %s", s->progress, msg);
		return -EIO;
	}
	if (fresh && strcmp(PQgetvalue(r, 0, 0), "0") != 0)
		shmrun_task_log(task, "fresh start: forgot %s progress rows of an earlier run in %s "
				      "(the table's rows stay; this run appends again)",
				PQgetvalue(r, 0, 0), s->progress);
	if (!fresh && strcmp(PQgetvalue(r, 0, 0), "0") != 0)
		shmrun_task_warn(task, "epochs %s..%s were committed into %s after checkpoint %s, "
				       "which is restored (an older checkpoint: a newer one is "
				       "damaged or was moved away); their rows stay, and the input "
				       "replayed now is written again (append: those rows twice)",
				 PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 2), s->table, rs);
	PQclear(r);
	return 0;
}

static int pg_open(struct shmrun_task *task, void **state)
{
	struct pgsink *s = calloc(1, sizeof(*s));
	PGconn *c;
	int err;

	*state = s;
	if (!s)
		return -ENOMEM;
	err = pg_config(task, s);
	if (err)
		return err;
	s->job = strdup(shmrun_task_job_name(task));
	s->sink = strdup(shmrun_task_stage(task));
	if (!s->job || !s->sink || rows_reserve(&s->open, ENTRY_HDR))
		return -ENOMEM;
	rows_reset(&s->open);
	s->last_write_ns = now_ns();
	err = ensure_conn(task, s);
	if (err)
		return err;
	c = s->conn;
	/* the table as the server resolves it now, schema-qualified and quoted:
	 * the same table whatever the search_path of a later connection; libpq
	 * quotes the columns by the server's rules, so the SQL is built here */
	{
		const char *p[1] = {s->table};
		char msg[1024];
		PGresult *r = query(c, "SELECT format('%I.%I', n.nspname, k.relname) FROM pg_class k "
				       "JOIN pg_namespace n ON n.oid = k.relnamespace WHERE k.oid = "
				       "to_regclass($1)",
				    1, p, msg, sizeof(msg));

		if (!r || PQntuples(r) != 1) {
			shmrun_task_error(task, "table %s: %s", s->table,
					  r ? "no such table (dropped since the start?)" : msg);
			PQclear(r);
			return -ENOENT;
		}
		s->table_q = strdup(PQgetvalue(r, 0, 0));
		PQclear(r);
		if (!s->table_q)
			return -ENOMEM;
		s->table = s->table_q;
	}
	if (s->exactly_once && shmrun_task_instance(task) == 0) {
		err = fresh_or_older(task, s);
		if (err)
			return err;
	}
	return build_sql(s, c);
}

static int pg_process(struct shmrun_task *task, void *state, const struct shmrun_record *rec)
{
	struct pgsink *s = state;
	int err = add_row(s, rec);

	if (!err && !s->exactly_once && s->open.len > NOCKPT_FLUSH_BYTES) {
		err = write_rows(task, s, 0, 0, &s->open);
		rows_reset(&s->open);
		s->last_write_ns = now_ns();
	}
	return err;
}

static int pg_process_batch(struct shmrun_task *task, void *state, const struct shmrun_record *recs,
			    uint32_t n)
{
	int err = 0;

	for (uint32_t i = 0; i < n && !err; i++)
		err = pg_process(task, state, &recs[i]);
	return err;
}

/* Without checkpoints: write what is held, at most every flush_interval. */
static int pg_flush(struct shmrun_task *task, void *state)
{
	struct pgsink *s = state;
	int err;

	if (s->exactly_once || !s->open.n || now_ns() - s->last_write_ns < s->flush_every_ns)
		return 0;
	err = write_rows(task, s, 0, 0, &s->open);
	rows_reset(&s->open);
	s->last_write_ns = now_ns();
	return err;
}

static int pg_end(struct shmrun_task *task, void *state)
{
	struct pgsink *s = state;
	int err = 0;

	/* with checkpoints the final epoch's snapshot and commit write the rest */
	if (!s->exactly_once && s->open.n) {
		err = write_rows(task, s, 0, 0, &s->open);
		rows_reset(&s->open);
	}
	return err;
}

static int add_pending(struct pgsink *s, struct rows *rw)
{
	if (shmrun_grow_u32(&s->pending, &s->cap, (size_t)s->npending + 1, sizeof(*s->pending), 8))
		return -ENOMEM;
	s->pending[s->npending++] = *rw;
	return 0;
}

/* Barrier(e): the open rows become pending epoch e; every pending epoch goes
 * into the checkpoint. */
static int pg_snapshot(struct shmrun_task *task, void *state, uint64_t epoch)
{
	struct pgsink *s = state;
	int err;

	if (!s->exactly_once)
		return 0;
	if (s->open.n) {
		uint32_t inst = shmrun_task_instance(task), zero = 0;

		if (s->open.len > UINT32_MAX) {
			shmrun_task_error(task, "epoch %" PRIu64 " holds %zu bytes of rows, more than "
						"a checkpoint entry takes (4 GiB); lower "
						"checkpoint_interval",
					  epoch, s->open.len);
			return -EFBIG;
		}
		memcpy(s->open.buf, &epoch, 8);
		memcpy(s->open.buf + 8, &inst, 4);
		memcpy(s->open.buf + 12, &zero, 4);
		err = add_pending(s, &s->open);
		if (err)
			return err;
		memset(&s->open, 0, sizeof(s->open));
		if (rows_reserve(&s->open, ENTRY_HDR))
			return -ENOMEM;
		rows_reset(&s->open);
	}
	for (uint32_t i = 0; i < s->npending; i++) {
		err = shmrun_pw_add(task, s->pending[i].buf, (uint32_t)s->pending[i].len);
		if (err)
			return err;
	}
	return 0;
}

static void drop_pending(struct pgsink *s, uint32_t k)
{
	for (uint32_t i = 0; i < k; i++)
		free(s->pending[i].buf);
	if (k) /* none pending: s->pending may be NULL, memmove()'s UB */
		memmove(s->pending, s->pending + k, (s->npending - k) * sizeof(*s->pending));
	s->npending -= k;
}

/* Epochs up to @epoch are durable: write each pending one, in order. */
static int pg_commit(struct shmrun_task *task, void *state, uint64_t epoch)
{
	struct pgsink *s = state;
	uint32_t k = 0;
	int err = 0;

	while (k < s->npending && !err) {
		uint64_t e;
		uint32_t inst;

		memcpy(&e, s->pending[k].buf, 8);
		memcpy(&inst, s->pending[k].buf + 8, 4);
		if (e > epoch)
			break;
		err = write_rows(task, s, e, inst, &s->pending[k]);
		if (!err)
			k++;
	}
	drop_pending(s, k);
	return err;
}

/* A pending epoch of the restored checkpoint: durable, so written now. */
static int pg_restore(struct shmrun_task *task, void *state, const void *entry, uint32_t len)
{
	struct pgsink *s = state;
	struct rows rw = {0};
	uint64_t e;
	uint32_t inst;
	int err;

	if (!s->exactly_once || len < ENTRY_HDR) {
		shmrun_task_error(task, "restored pending epoch is malformed (%u bytes)", len);
		return -EBADMSG;
	}
	memcpy(&e, entry, 8);
	memcpy(&inst, (const unsigned char *)entry + 8, 4);
	if (e == 0 || e > shmrun_task_restored_epoch(task)) {
		shmrun_task_error(task, "restored pending epoch %" PRIu64 " is not within the "
					"restored checkpoint %" PRIu64,
				  e, shmrun_task_restored_epoch(task));
		return -EBADMSG;
	}
	rw.buf = (unsigned char *)entry; /* borrowed for the write */
	rw.len = len;
	for (const unsigned char *p = rw.buf + ENTRY_HDR; p < rw.buf + len; p++)
		rw.n += *p == '\n';
	err = write_rows(task, s, e, inst, &rw);
	return err;
}

static void pg_close(struct shmrun_task *task, void *state)
{
	struct pgsink *s = state;

	(void)task;
	if (!s)
		return;
	pg_free(s);
	free(s);
}

static const struct shmrun_param_def pg_params[] = {
	/* tuning: left out of the fingerprint, so a moved server or a new
	 * password restores the checkpoint, and no password is written into
	 * the MANIFEST's topology description */
	{.key = "conninfo", .type = SHMRUN_PARAM_STRING, .required = true, .tuning = true,
	 .doc = "libpq connection string or URI (keep a password in ~/.pgpass or PGPASSWORD)"},
	{.key = "table", .type = SHMRUN_PARAM_STRING, .required = true,
	 .doc = "the table rows go into, may be schema-qualified"},
	{.key = "columns", .type = SHMRUN_PARAM_STRING, .required = true,
	 .doc = "blank-separated COLUMN=SOURCE, SOURCE: key, value, event_time, fN (Nth TAB "
		"field of the value)"},
	{.key = "mode", .type = SHMRUN_PARAM_ENUM, .def = "append", .choices = "append upsert",
	 .doc = "append: COPY every row; upsert: INSERT .. ON CONFLICT on the key columns"},
	{.key = "progress_table", .type = SHMRUN_PARAM_STRING, .def = "shmrun_progress",
	 .doc = "table of committed epochs (job, sink, target, instance, epoch), created if missing"},
	{.key = "retry_max", .type = SHMRUN_PARAM_DURATION, .def = "60s", .min = 0,
	 .max = 86400000000000ull, .tuning = true,
	 .doc = "how long a lost or refused connection is retried before the task fails"},
	{.key = "connect_timeout", .type = SHMRUN_PARAM_DURATION, .def = "10s",
	 .min = 1000000000ull, .max = 3600000000000ull, .tuning = true,
	 .doc = "one connection attempt's timeout (libpq connect_timeout, whole seconds, >= 2)"},
	{.key = "flush_interval", .type = SHMRUN_PARAM_DURATION, .def = "1s", .min = 1000000ull,
	 .max = 3600000000000ull, .tuning = true,
	 .doc = "without checkpoint_dir: rows are written at most this often"},
	{0},
};

const struct shmrun_operator shmrun_op_postgres_sink = {
	.size = sizeof(struct shmrun_operator),
	.name = "postgres_sink",
	.summary = "writes rows into a PostgreSQL table (COPY; exactly-once with checkpoints)",
	/* pending epochs are output in flight, sized by throughput: no size guard */
	.flags = SHMRUN_OP_SINK | SHMRUN_OP_PW_IN_FLIGHT,
	.params = pg_params,
	.prepare = pg_prepare,
	.open = pg_open,
	.process = pg_process,
	.process_batch = pg_process_batch,
	.end_of_input = pg_end,
	.close = pg_close,
	/* each pending epoch is owned by one instance, whichever */
	.pw_rule = SHMRUN_PW_SPLIT,
	.snapshot = pg_snapshot,
	.restore = pg_restore,
	.commit = pg_commit,
	.flush = pg_flush,
	.flush_param = "flush_interval",
};
