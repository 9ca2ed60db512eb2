/*
 * runtime/conf_internal.h: what the passes of the topology loader share.
 *
 * What it is for. Loading topology.conf (conf.c's essay has the pipeline) is
 * split by pass: conf_ini.c reads lines into sections, conf_value.c turns a
 * key's text into a typed value, conf_job.c loads [job] and the stages,
 * conf_graph.c builds and checks the graph, and conf.c runs them in order and
 * collects the messages. They all work on one struct loader, declared here with
 * the limits they check against and the functions one pass lends another. It is
 * a private header: included by runtime/conf*.c and by plugin.c (which checks
 * a plugin's key defaults with param_value_problem()); the public
 * interface stays include/shmrun/job.h.
 *
 * Invariants.
 *   - A struct loader lives on shmrun_job_load()'s stack for one load; what it
 *     allocates (sections, messages, refused lines, the per-stage arrays) is
 *     freed by loader_free() (conf.c), never by a pass. What a pass puts into
 *     ld->job belongs to the job (shmrun_job_free()).
 *   - Functions that check report through errorf()/warnf() and carry on; the
 *     only failure the passes return is -ENOMEM (or ld->nomem set), so one run
 *     lists every error of the file.
 *   - Line numbers are those read_line() counted: the line of the offending key,
 *     or of the section header when the section is the problem.
 *
 * Rejected designs.
 *   - One header per pass: the passes share one loader and a handful of helpers
 *     each way (messages, find_kv(), check_value()); four headers would each
 *     repeat the loader and include one another.
 *   - Renaming the shared helpers conf_*(): they kept their names when they
 *     moved out of conf.c so the move stays a move (git follows it, and no
 *     message or call changed). They are not static, but the library is static
 *     and no other file defines them; a clash would fail at link time.
 */
#ifndef SHMRUN_RUNTIME_CONF_INTERNAL_H
#define SHMRUN_RUNTIME_CONF_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "internal.h"
#include "shmrun/job.h"
#include "shmrun/ring.h"

#define MAX_CPU	     4095u /* highest CPU number a cpus list may name */
#define CPU_WORDS    ((MAX_CPU + 1) / 64)
#define MAX_WORKERS  4096u
#define MAX_VNODES   65536u
#define MAX_NAME_LEN 64u  /* stage and job names */
/*
 * Longest duration a key accepts: 365 days in ns. Durations are added to a
 * CLOCK_MONOTONIC reading in signed 64-bit ns (now + interval, started +
 * timeout); this bound keeps that sum ~290 years below INT64_MAX.
 */
#define MAX_DURATION_NS (365ull * 86400 * 1000000000)
#define CUR_NONE     (-1) /* no section header seen yet */
#define CUR_SKIP     (-2) /* inside a duplicate section: its keys are not read */
#define CONT_NONE	(-1) /* no key for a continuation line to extend */
#define CONT_IGNORE	(-2) /* the key was rejected: drop its continuation lines */
/* The largest topology, from a file or standard input. */
#define CONF_MAX_BYTES (16u << 20)

/* One `key = value` line. */
struct kv {
	char *key;
	char *value;
	int line;
	int cont_line; /* the first continuation line that extended it, or 0 */
};

/* A key line refused as too long: its error waits until the key's type is known. */
struct refused {
	int sec;	/* index into loader.sec */
	char key[64];
	int line;
	bool reported;
};

/* One [section] and its keys, in file order. */
struct section {
	char *name;
	int line;
	struct kv *kv;
	uint32_t nkv, cap;
};

/* Messages with the line they are about, for sorting. */
struct msgs {
	char **text;
	int *line;
	uint32_t n, cap;
};

struct loader {
	const char *path; /* as given: the prefix of every message */
	FILE *f;
	char *buf; /* read_line()'s buffer */
	size_t bufcap;
	uint64_t bytes; /* read so far: at most CONF_MAX_BYTES */
	bool too_big;	/* more than that: reported, nothing else is */
	int lineno;
	int read_err; /* errno of a failed read, 0 if none */

	struct section *sec;
	uint32_t nsec, capsec;
	int cur; /* index into sec of the current line's section, or CUR_* */
	/* What an indented continuation line extends: CONT_NONE (nothing: an
	 * error), CONT_IGNORE (a key that was rejected: its continuation lines
	 * add nothing), or the index into sec[cur].kv of the last key stored. */
	int cont;

	struct msgs errs, warns;
	bool nomem;
	struct refused *refused; /* over-long key lines */
	uint32_t nrefused;

	struct shmrun_job *job;
	int job_sec;		    /* index of [job] in sec, or -1 */
	struct section **stage_sec; /* the section of each stage */
	const struct kv **input;    /* each stage's `input` key, or NULL */
	bool vnodes_ok;		    /* job->vnodes was given correctly or defaulted */
	bool ops_ok;		    /* every stage names a known operator */
	int plugins_failed_line;    /* line of [job] plugins if one of them was refused, else 0 */
	bool *width_ok;		    /* per stage */
	bool edges_missing;	    /* an `input` entry was wrong: the edge set is incomplete */
	uint64_t online[CPU_WORDS], allowed[CPU_WORDS];

	/* --set SECTION.KEY=VALUE overrides (conf_ini.c apply_overrides()): the
	 * key of override k is stored with line OVR_LINE(k), a negative number,
	 * so that a message about it reads "--set SPEC: ..." and a relative
	 * path in it resolves against @cwd, not the conf file's directory. */
	const char *const *sets;
	uint32_t nsets;
	char *cwd;
};

/* The line number stored for the key of override @k (0-based), and back. */
#define OVR_LINE(k)   (-(int)(k) - 1)
#define OVR_INDEX(l)  ((uint32_t)(-(l) - 1))

/* ------------------------------------------------------------------------ */
/* conf.c: loading from memory */

/*
 * shmrun_job_load_mem() - shmrun_job_load() of the @len bytes at @text, named
 * @name in messages, relative paths resolving against @dir. For the fuzz
 * harness (tests/fuzz/fuzz_conf.c) and tests; not in the public API (job.h).
 * Return and ownership: as shmrun_job_load(); -EFBIG above CONF_MAX_BYTES;
 * -errno of fmemopen().
 */
int shmrun_job_load_mem(const char *name, const char *dir, const void *text, size_t len,
			struct shmrun_job *job, struct shmrun_job_errors *errs);

/* ------------------------------------------------------------------------ */
/* conf.c: messages and suggestions */

/*
 * Record an error (errorf) or a warning (warnf) about line @line of the file
 * (0: the file as a whole), as "path:line: text". Control bytes in the text
 * become '?'. Out of memory sets ld->nomem; the message is lost.
 */
void __attribute__((format(printf, 3, 4)))
errorf(struct loader *ld, int line, const char *fmt, ...);
void __attribute__((format(printf, 3, 4))) warnf(struct loader *ld, int line, const char *fmt, ...);

/* Optimal string alignment distance of @a and @b, ASCII case-folded;
 * UINT32_MAX if either is longer than 64 bytes. */
unsigned edit_distance(const char *a, const char *b);

/* The entry of @cands (@n of them) nearest to @word if near enough to be a
 * typo of it, else NULL. The result points into @cands. */
const char *nearest(const char *word, const char *const *cands, uint32_t n);

/* "a, b, c" of the @n words @w into @buf of @len bytes (cut with "..." if it
 * does not fit). Return: @buf. */
const char *join_words(char *buf, size_t len, const char *const *w, uint32_t n);

/* The keys of NULL-terminated table @t (NULL: none) stored into @out from index
 * @n on, up to @max entries in all. Return: the new count. The keys are not
 * copied. */
uint32_t table_keys(const struct shmrun_param_def *t, const char **out, uint32_t n, uint32_t max);

/* ------------------------------------------------------------------------ */
/* conf_ini.c: pass 1, lines -> sections */

/* Whether @c may appear in a stage or job name (NAME_CHARS). */
bool is_name_char(char c);

/* inih's reader (ini_reader): one physical line of ld->f (@stream) into @str of
 * @num bytes, checked, de-indented, or an empty line in place of one that is
 * reported or continues a value. Return: @str; NULL at the end, on a read error
 * (ld->read_err) or past CONF_MAX_BYTES (ld->too_big). */
char *read_line(char *str, int num, void *stream);

/* inih's handler: stores @name = @value in the current section of @user (a
 * struct loader). Return: 1; 0 out of memory (ld->nomem). */
int on_key(void *user, const char *section, const char *name, const char *value);

/*
 * Apply ld->sets to the sections read from the file, as if each were a line
 * `KEY = VALUE` of [SECTION]: the file's value of that key is replaced (or the
 * key added); [job] is created if the file has none; any other section must
 * exist (reported otherwise). KEY is what follows the last '.' before the
 * first '=' (section names may contain dots). Return: 0 or -ENOMEM.
 */
int apply_overrides(struct loader *ld);

/* The key @key of section @s, or NULL. Points into @s. */
const struct kv *find_kv(const struct section *s, const char *key);

/* The over-long line refused for key @key of section @s, or NULL. */
struct refused *find_refused(struct loader *ld, const struct section *s, const char *key);

/* Whether key @d takes a list (continuation lines allowed). */
bool is_list_key(const struct shmrun_param_def *d);

/* Report refused line @r (once) as a key of type @d (NULL: no table knows the
 * key) in @what ("[job]", "stage 'x'"). */
void report_refused(struct loader *ld, struct refused *r, const struct shmrun_param_def *d,
		    const char *what);

/* "[job]" or "stage 'NAME'" for section @s, into @buf of @len bytes. Return: @buf. */
const char *section_what(const struct loader *ld, const struct section *s, char *buf, size_t len);

/* ------------------------------------------------------------------------ */
/* conf_value.c: typed values */

/* Set or test CPU @b of a CPU_WORDS bitmap; bit_test() is false past MAX_CPU. */
void bit_set(uint64_t *map, uint32_t b);
bool bit_test(const uint64_t *map, uint32_t b);

/* "0-3,8" into bitmap @map (CPU_WORDS words); @dup receives the first CPU named
 * twice, or -1. Return: 0; -EINVAL (syntax, reversed range); -ERANGE (a CPU
 * above MAX_CPU). */
int parse_cpulist(const char *s, uint64_t *map, int32_t *dup);

/* The CPUs set in @map as a sorted array *@cpus (malloc'd, the caller frees it)
 * of *@n entries. Return: 0 or -ENOMEM. */
int cpulist_array(const uint64_t *map, int32_t **cpus, uint32_t *n);

/* "0-1,4" (or "none") for bitmap @map, into @buf of @len bytes. Return: @buf. */
const char *fmt_cpulist(const uint64_t *map, char *buf, size_t len);

/*
 * Check @value of key @d in @what ("[job]", "stage 'x'"), written at @line.
 * On success *@text is the value to store (malloc'd, the caller frees it;
 * paths resolved against the conf file's directory) and *@u64 its number.
 * Return: 0; 1 if wrong (reported); -ENOMEM.
 */
int check_value(struct loader *ld, const char *what, const struct shmrun_param_def *d,
		const char *value, int line, char **text, uint64_t *u64);

/*
 * Whether @value is a valid value of key @d, judged as check_value() judges a
 * value written in a conf file (type, choices, range) but without a loader:
 * for values no conf file holds, such as a plugin key table's defaults
 * (runtime/plugin.c). PATH, PATHS and STRING values are not checked beyond
 * being non-empty. On a problem, @why (@len bytes) says what is wrong ("not a
 * valid count; expected ...", "out of range; expected 1 to 100").
 * Return: 0; -EINVAL (not of its type, not a choice, empty); -ERANGE.
 */
int param_value_problem(const struct shmrun_param_def *d, const char *value, char *why,
			size_t len);

/*
 * Whether key @d, given as @kv in section @what ("[job]", "stage 'x'"), was
 * extended by an indented continuation line though it takes one value (not a
 * list key): then that is reported at the continuation's line, naming the key
 * and its line, and the caller must not use the value. Every single-value key
 * goes through this, also those read outside load_params() (op, width).
 * Return: true if refused (reported), false if the value may be checked.
 */
bool refuse_continuation(struct loader *ld, const struct shmrun_param_def *d, const struct kv *kv,
			 const char *what);

/*
 * Fill @out (one per entry of table @defs, same order) from section @s named
 * @what, of operator @opname (NULL for [job]): given keys are checked, absent
 * ones take their default (line 0), absent required ones are errors at the
 * section header. The values in @out are malloc'd. Return: 0 or -ENOMEM.
 */
int load_params(struct loader *ld, const struct section *s, const char *what, const char *opname,
		const struct shmrun_param_def *defs, struct shmrun_param *out);

/* Report every key of @s (named @what) that is in none of the tables @t1, @t2
 * (either may be NULL). */
void check_unknown_keys(struct loader *ld, const struct section *s, const char *what,
			const struct shmrun_param_def *t1, const struct shmrun_param_def *t2);

/* Free the values of the @n params of @p, then @p (NULL allowed). */
void params_free(struct shmrun_param *p, uint32_t n);

/* ------------------------------------------------------------------------ */
/* conf_job.c: pass 2, [job] and stages */

/* ld->online and ld->allowed: the CPUs that are online, and those this process
 * may run on (its affinity mask). Cannot fail: falls back to CPUs 0..N-1. */
void probe_cpus(struct loader *ld);

/* [job] (or the defaults if there is none) into ld->job. Return: 0 (errors are
 * reported) or -ENOMEM. */
int load_job(struct loader *ld);

/* Stage @idx (section ld->stage_sec[@idx]) into ld->job->stages[@idx]: name,
 * operator, width, params; sets ld->input[@idx], ld->width_ok[@idx] and clears
 * ld->ops_ok on a missing or unknown op. Return: 0 (errors are reported) or
 * -ENOMEM. */
int load_stage(struct loader *ld, uint32_t idx);

/* After every stage: sources that cannot be replayed (SHMRUN_OP_UNREPLAYABLE)
 * against checkpoint_dir and [job] allow_data_loss_on_crash; stdin_source at
 * width 1, once, and not with a topology read from standard input. Errors
 * are reported at the stage's op (or width) line. */
void check_sources(struct loader *ld);

/* ------------------------------------------------------------------------ */
/* conf_graph.c: pass 3, the graph */

/* The `input` keys into ld->job's edges, checked (cycles, sources, sinks,
 * reachability); if no error at all was reported, job->topo too. Return: 0
 * (errors are reported) or -ENOMEM. */
int load_graph(struct loader *ld);

#endif
