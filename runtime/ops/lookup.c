/*
 * runtime/ops/lookup.c: enrich records from a small reference table.
 *
 * `table` names a file of `key<TAB>value` lines. A record whose key is in the
 * table is emitted with value = its value, TAB, the table's value (key and
 * event time unchanged); a record whose key is not is passed through unchanged
 * (`miss = pass`, the default) or dropped (`miss = drop`). This is the
 * reference-copy case of per-worker state (docs/state.md): every instance holds the whole table, so
 * the edge in front may be anything (forward, rebalance, by key).
 *
 * The file: every line is key<TAB>value, split at the first TAB (the value may
 * hold further TABs; key and value may be empty; bytes are taken as they are,
 * so a CRLF file has '\r' at the end of each value). A final line without
 * '\n' is still a line. A line without a TAB (an empty line too) and a key
 * that appears twice are errors naming file:line, and so is a file without
 * any line (a lookup that can never hit is a mistake) — in prepare(), so
 * `shmrun` refuses to start (exit 2), and again in open().
 * The table must be a regular file of at most 1 GiB (TABLE_MAX_BYTES) whose
 * size is its content's: a FIFO, device, socket, a file on a pseudo file
 * system (/proc, /sys) or a larger file is refused in prepare() too.
 *
 * State: per-worker, rule union — every instance holds every row, and a
 * rescale gives every new instance every entry. snapshot() records one entry
 * per row, [u32 key_len][key][value] (native byte order, as every state file).
 * The table is read from the file only on a first start (restored epoch 0).
 * On a restore it is rebuilt from the restored entries and the file is NOT
 * read: the file may have changed since the checkpoint, and the records
 * already enriched before it were enriched with the checkpoint's table, so
 * the rest of the input must be too (exactly-once means "as if no restart").
 * To load a changed table, start the job fresh (STREAM_RESET_STATE=1 or a new
 * checkpoint_dir). Union hands a new instance the rows of every old instance
 * (--rescale sends each distinct entry once; should a row arrive twice, the
 * key keeps the value it has — every copy was read from one file).
 *
 * A restore that hands an instance no row at all means the checkpoint holds
 * no table for this stage: the stage is new to it (`shmrun --rescale` starts
 * a new stage empty). Since a table is never empty, that is unambiguous, and
 * the instance then reads the file, as on a first start. restore() has no
 * "done" call, so this is settled before the first record or barrier
 * (settle()). The operator API cannot tell prepare() whether the run will
 * restore, so prepare() checks the file on every start: a restart needs the
 * file to exist and parse even though it is not read.
 *
 *     bytes  [k0 v0][k1 v1]...      on a first start the file itself, each
 *                                   key moved one byte right over its TAB so
 *                                   key and value touch; on a restore the
 *                                   rows appended one after another
 *     rows   {off, key_len, value_len} per row, in file order (row i = line i+1)
 *     slots  {xxh3(key), row + 1}, open addressing with linear probing,
 *            a power of two, at most half full; 0 = empty
 *
 * A hit costs one XXH3 of the key, a probe (usually one slot, whose stored
 * hash filters other keys before any memcmp) and a copy of the output value
 * into a reusable buffer. Rejected: a sorted array with binary search (log n
 * cache misses per record, and a sort at load); the runtime's key-bound state
 * (the table is not partitioned by key: every instance needs every row, and a
 * rescale must copy it, not re-deal it).
 *
 * Sizing: the table lives in every instance and in every checkpoint once per
 * instance, and snapshot() copies it at each barrier — keep it small (the
 * per-worker state warning fires at per_worker_state_warn). A table that grows
 * with the data belongs in key-bound state (docs/state.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "input_check.h"
#include "ops.h"

/* The largest table file: every instance and every checkpoint holds all of it. */
#define TABLE_MAX_BYTES (1ull << 30)

struct row {
	size_t off; /* of the key in bytes; the value follows it */
	uint32_t key_len, value_len;
};

struct slot {
	uint64_t hash; /* XXH3-64 of the key */
	uint32_t row;  /* row index + 1; 0: empty */
};

struct table {
	unsigned char *bytes; /* key and value bytes of every row */
	size_t len, cap;
	struct row *rows;
	uint32_t n, cap_rows;
	struct slot *slots;
	uint32_t mask; /* slots - 1; 0 before the first insert */
};

struct lookup {
	struct table t;
	bool settled;	    /* the table is final: loaded, or restored with rows */
	bool drop;	    /* miss = drop */
	unsigned char *out; /* the output value being built */
	size_t out_cap;
};

static void table_free(struct table *t)
{
	free(t->bytes);
	free(t->rows);
	free(t->slots);
	memset(t, 0, sizeof(*t));
}

static const unsigned char *row_key(const struct table *t, const struct row *r)
{
	return t->bytes + r->off;
}

/* The row holding @key (hash @h), or NULL. */
static const struct row *table_find(const struct table *t, const void *key, uint32_t len,
				    uint64_t h)
{
	if (!t->slots)
		return NULL;
	for (uint32_t i = (uint32_t)h & t->mask;; i = (i + 1) & t->mask) {
		const struct slot *sl = &t->slots[i];
		const struct row *r;

		if (!sl->row)
			return NULL;
		r = &t->rows[sl->row - 1];
		if (sl->hash == h && r->key_len == len &&
		    (len == 0 || memcmp(row_key(t, r), key, len) == 0))
			return r;
	}
}

static void slot_put(struct slot *slots, uint32_t mask, uint64_t h, uint32_t row)
{
	uint32_t i = (uint32_t)h & mask;

	while (slots[i].row)
		i = (i + 1) & mask;
	slots[i] = (struct slot){h, row};
}

/* Double the slot array (or make the first one), re-inserting every row. */
static int table_grow_slots(struct table *t)
{
	uint32_t nslots = t->slots ? (t->mask + 1) * 2 : 64;
	struct slot *s;

	if (nslots == 0) /* 2^32 slots: beyond any table a row index can count */
		return -E2BIG;
	s = calloc(nslots, sizeof(*s));
	if (!s)
		return -ENOMEM;
	for (uint32_t i = 0; t->slots && i <= t->mask; i++)
		if (t->slots[i].row)
			slot_put(s, nslots - 1, t->slots[i].hash, t->slots[i].row);
	free(t->slots);
	t->slots = s;
	t->mask = nslots - 1;
	return 0;
}

/*
 * Index a new row whose bytes are already at bytes[off]; the key must not be
 * in the table (table_find() first). Return: 0; -ENOMEM; -E2BIG.
 */
static int table_index(struct table *t, size_t off, uint32_t key_len, uint32_t value_len,
		       uint64_t h)
{
	int err;

	if (t->n == t->cap_rows) {
		if (t->cap_rows >= 1u << 31) /* doubling would pass UINT32_MAX */
			return -E2BIG;
		if (shmrun_grow_u32(&t->rows, &t->cap_rows, (size_t)t->n + 1, sizeof(*t->rows), 64))
			return -ENOMEM;
	}
	if (!t->slots || (uint64_t)(t->n + 1) * 2 > (uint64_t)t->mask + 1) {
		err = table_grow_slots(t);
		if (err)
			return err;
	}
	t->rows[t->n] = (struct row){off, key_len, value_len};
	t->n++;
	slot_put(t->slots, t->mask, h, t->n);
	return 0;
}

/* Read all of @fd into t->bytes. Return: 0, -errno, or -EFBIG past TABLE_MAX_BYTES. */
static int read_all(int fd, struct table *t)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if ((uint64_t)st.st_size > TABLE_MAX_BYTES)
		return -EFBIG;
	t->cap = st.st_size > 0 ? (size_t)st.st_size + 1 : 4096;
	t->bytes = malloc(t->cap);
	if (!t->bytes)
		return -ENOMEM;
	for (;;) {
		ssize_t n;

		if (t->len == t->cap) { /* the file grew while being read */
			if (t->cap > TABLE_MAX_BYTES)
				return -EFBIG;
			if (shmrun_grow(&t->bytes, &t->cap, t->cap + 1, 1, 4096))
				return -ENOMEM;
		}
		n = shmrun_read_all(fd, t->bytes + t->len, t->cap - t->len);
		if (n < 0)
			return (int)n;
		t->len += (size_t)n;
		if (t->len < t->cap) /* short: the end of the file */
			return 0;
	}
}

/*
 * Refuse a table that is not a regular file (a FIFO would block, /dev/zero
 * never end) or whose size is not its content's (/proc, /sys).
 * Return: 0, or -EINVAL after a message.
 */
static int check_table_file(struct shmrun_task *task, const char *path, int fd)
{
	const char *pseudo = shmrun_pseudo_fs(fd);
	struct stat st;

	if (fstat(fd, &st) < 0) {
		shmrun_task_error(task, "table %s: %s", path, strerror(errno));
		return -errno;
	}
	if (!S_ISREG(st.st_mode)) {
		shmrun_task_error(task,
				  "table %s is not a regular file (%s): a lookup table is read "
				  "whole before anything starts; copy the data into a file first",
				  path, shmrun_file_kind(st.st_mode));
		return -EINVAL;
	}
	if (pseudo || shmrun_size_overstated(fd, st.st_size)) {
		shmrun_task_error(task,
				  "table %s is %s%s%s: its reported size is not its content's; "
				  "copy it into a regular file first",
				  path, pseudo ? "on a pseudo file system (" : "shorter than it says",
				  pseudo ? pseudo : "", pseudo ? ")" : "");
		return -EINVAL;
	}
	return 0;
}

/*
 * Load the table file named by `table` into @t (empty on entry).
 * Return: 0, or -errno after shmrun_task_error() named file:line.
 */
static int table_load(struct shmrun_task *task, struct table *t)
{
	const char *path = shmrun_task_param(task, "table");
	size_t pos = 0;
	uint32_t line = 0;
	int fd, err;

	/* O_NONBLOCK: opening a FIFO must not wait for a writer */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) {
		err = -errno;
		shmrun_task_error(task, "table %s: %s", path, strerror(-err));
		return err;
	}
	err = check_table_file(task, path, fd);
	if (err) {
		close(fd);
		return err;
	}
	err = read_all(fd, t);
	close(fd);
	if (err == -EFBIG) {
		shmrun_task_error(task,
				  "table %s is larger than %llu MiB, the limit of a lookup table "
				  "(every instance and every checkpoint holds all of it); keep a "
				  "table that grows with the data in key-bound state (docs/state.md)",
				  path, (unsigned long long)(TABLE_MAX_BYTES >> 20));
		return err;
	}
	if (err) {
		shmrun_task_error(task, "reading table %s: %s", path, strerror(-err));
		return err;
	}
	if (t->len == 0) {
		shmrun_task_error(task,
				  "table %s is empty; a lookup table needs at least one "
				  "key<TAB>value line",
				  path);
		return -EINVAL;
	}
	while (pos < t->len) {
		const unsigned char *p = t->bytes + pos, *nl, *tab;
		size_t n;
		uint64_t h;
		const struct row *dup;

		nl = memchr(p, '\n', t->len - pos);
		n = nl ? (size_t)(nl - p) : t->len - pos;
		line++;
		tab = memchr(p, '\t', n);
		if (!tab) {
			shmrun_task_error(task,
					  "%s:%u: no TAB in this line; every line of a lookup "
					  "table is key<TAB>value",
					  path, line);
			return -EINVAL;
		}
		if (n - 1 > UINT32_MAX || line == UINT32_MAX) {
			shmrun_task_error(task, "%s:%u: line or table too long", path, line);
			return -E2BIG;
		}
		h = XXH3_64bits(p, (size_t)(tab - p));
		dup = table_find(t, p, (uint32_t)(tab - p), h);
		if (dup) {
			/* rows are in file order, one per line: row i is line i + 1 */
			shmrun_task_error(task,
					  "%s:%u: key '%.*s' is already on line %u; a key may "
					  "appear once",
					  path, line, (int)(tab - p < 64 ? tab - p : 64),
					  (const char *)p, (uint32_t)(dup - t->rows) + 1);
			return -EINVAL;
		}
		err = table_index(t, pos, (uint32_t)(tab - p),
				  (uint32_t)(n - (size_t)(tab - p) - 1), h);
		if (err) {
			shmrun_task_error(task, "loading table %s: %s", path, strerror(-err));
			return err;
		}
		/* the TAB sits between key and value: drop it by moving the key up */
		memmove(t->bytes + pos + 1, p, (size_t)(tab - p));
		t->rows[t->n - 1].off = pos + 1;
		pos += n + (nl ? 1 : 0);
	}
	return 0;
}

/* Check the table file before anything starts: a bad line stops the job (exit 2). */
static int lookup_prepare(struct shmrun_task *task)
{
	struct table t = {0};
	int err = table_load(task, &t);

	table_free(&t);
	return err;
}

static int lookup_open(struct shmrun_task *task, void **state)
{
	struct lookup *s = calloc(1, sizeof(*s));
	const char *miss = shmrun_task_param(task, "miss");
	int err;

	if (!s)
		return -ENOMEM;
	*state = s;
	s->drop = miss && strcmp(miss, "drop") == 0;
	if (shmrun_task_restored_epoch(task) > 0)
		return 0; /* the table comes from restore(); see settle() */
	err = table_load(task, &s->t);
	s->settled = true;
	if (!err && shmrun_task_instance(task) == 0)
		shmrun_task_log(task, "table %s: %u row%s, %zu bytes",
				shmrun_task_param(task, "table"), s->t.n, s->t.n == 1 ? "" : "s",
				s->t.len);
	return err;
}

/*
 * After a restore, before the first record or barrier: no restored row means
 * the checkpoint holds no table for this stage (a stage new to it), so read
 * the file as a first start would.
 */
static int settle(struct shmrun_task *task, struct lookup *s)
{
	int err = 0;

	s->settled = true;
	if (s->t.n == 0) {
		err = table_load(task, &s->t);
		if (!err && shmrun_task_instance(task) == 0)
			shmrun_task_log(task,
					"the checkpoint holds no table for this stage (new to "
					"it): table %s: %u row%s, %zu bytes",
					shmrun_task_param(task, "table"), s->t.n,
					s->t.n == 1 ? "" : "s", s->t.len);
	}
	return err;
}

static int lookup_process(struct shmrun_task *task, void *state, const struct shmrun_record *rec)
{
	struct lookup *s = state;
	const struct row *r = NULL;
	struct shmrun_record out;
	size_t need;
	int err;

	if (!s->settled && (err = settle(task, s)))
		return err;
	r = table_find(&s->t, rec->key, rec->key_len, XXH3_64bits(rec->key, rec->key_len));
	if (!r)
		return s->drop ? 0 : shmrun_emit(task, rec);
	need = (size_t)rec->value_len + 1 + r->value_len;
	if (need > UINT32_MAX) {
		shmrun_task_error(task,
				  "an enriched value of %zu bytes is longer than a record "
				  "can be",
				  need);
		return -EMSGSIZE;
	}
	if (shmrun_grow(&s->out, &s->out_cap, need, 1, 256))
		return -ENOMEM;
	if (rec->value_len)
		memcpy(s->out, rec->value, rec->value_len);
	s->out[rec->value_len] = '\t';
	memcpy(s->out + rec->value_len + 1, row_key(&s->t, r) + r->key_len, r->value_len);
	out = *rec;
	out.value = s->out;
	out.value_len = (uint32_t)need;
	return shmrun_emit(task, &out);
}

/* One entry per row: [u32 key_len][key][value]. */
static int lookup_snapshot(struct shmrun_task *task, void *state, uint64_t epoch)
{
	struct lookup *s = state;
	int err;

	(void)epoch;
	if (!s->settled && (err = settle(task, s)))
		return err;
	for (uint32_t i = 0; i < s->t.n; i++) {
		const struct row *r = &s->t.rows[i];
		size_t need = 4 + (size_t)r->key_len + r->value_len;

		if (need > UINT32_MAX) {
			shmrun_task_error(task, "table row %u is too long for a state entry", i);
			return -E2BIG;
		}
		if (shmrun_grow(&s->out, &s->out_cap, need, 1, 256))
			return -ENOMEM;
		memcpy(s->out, &r->key_len, 4);
		memcpy(s->out + 4, row_key(&s->t, r), need - 4);
		err = shmrun_pw_add(task, s->out, (uint32_t)need);
		if (err)
			return err;
	}
	return 0;
}

/* One restored row; a key already present (a union copy) keeps its value. */
static int lookup_restore(struct shmrun_task *task, void *state, const void *entry, uint32_t len)
{
	struct lookup *s = state;
	struct table *t = &s->t;
	const unsigned char *e = entry;
	uint32_t key_len;
	uint64_t h;
	int err;

	if (len >= 4)
		memcpy(&key_len, e, 4);
	if (len < 4 || key_len > len - 4) {
		shmrun_task_error(task, "restored table row is malformed (%u bytes)", len);
		return -EBADMSG;
	}
	h = XXH3_64bits(e + 4, key_len);
	if (table_find(t, e + 4, key_len, h))
		return 0;
	if (shmrun_grow(&t->bytes, &t->cap, t->len + len - 4, 1, 4096))
		return -ENOMEM;
	memcpy(t->bytes + t->len, e + 4, len - 4);
	err = table_index(t, t->len, key_len, len - 4 - key_len, h);
	if (err) {
		shmrun_task_error(task, "restoring the table: %s", strerror(-err));
		return err;
	}
	t->len += len - 4;
	return 0;
}

static void lookup_close(struct shmrun_task *task, void *state)
{
	struct lookup *s = state;

	(void)task;
	if (!s)
		return;
	table_free(&s->t);
	free(s->out);
	free(s);
}

/* clang-format off */
static const struct shmrun_param_def params[] = {
	{.key = "table", .type = SHMRUN_PARAM_PATH, .required = true,
	 .doc = "file of key<TAB>value lines, read on a first start only (a restore uses the "
		"checkpoint's copy)", .io = SHMRUN_PARAM_INPUT},
	{.key = "miss", .type = SHMRUN_PARAM_ENUM, .def = "pass", .choices = "pass drop",
	 .doc = "a record whose key is not in the table: pass it on unchanged, or drop it"},
	{0},
};

const struct shmrun_operator shmrun_op_lookup = {
	.size = sizeof(struct shmrun_operator),
	.name = "lookup",
	.summary = "appends TAB and the table's value to records whose key is in a key<TAB>value "
		   "file (per-worker state, rule union)",
	.params = params,
	.prepare = lookup_prepare,
	.open = lookup_open,
	.process = lookup_process,
	.close = lookup_close,
	.pw_rule = SHMRUN_PW_UNION,
	.snapshot = lookup_snapshot,
	.restore = lookup_restore,
};
/* clang-format on */
