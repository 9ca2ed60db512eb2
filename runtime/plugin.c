/*
 * runtime/plugin.c: loading operator plugins, and the registry of every
 * operator a job may name (the built-ins of runtime/ops/ and those plugins
 * brought).
 *
 * What it does. A plugin is a shared object that exports one struct
 * shmrun_plugin under the name SHMRUN_PLUGIN_SYMBOL (shmrun/operator.h):
 * the operator ABI version it was compiled against, its name and version,
 * and a NULL-terminated table of operators. shmrun_plugin_load() dlopen()s
 * it, checks everything the runtime will later trust (the ABI version, each
 * operator's size, name, callbacks and key table), copies every operator
 * into a struct of this runtime's size (fields a smaller, older struct does
 * not have read as absent), and adds the copies to the registry. A plugin is
 * all or nothing: one refusal and none of its operators is registered.
 *
 * Invariants.
 *   - Operator names are unique across built-ins and plugins; a second
 *     definition is refused naming both origins.
 *   - A plugin is never unloaded: its code runs in every worker, which the
 *     launcher forks after loading, and restarts fork again from it.
 *   - The same file (device and inode) loaded twice, through `--plugin` and
 *     `[job] plugins` or two paths to it, is loaded once; a copy of it at
 *     another path is another plugin, whose operators clash by name.
 *   - shmrun_operators() is built-ins first, then plugins in load order,
 *     NULL-terminated; shmrun_operator_plugin() tells them apart.
 *
 * Rejected designs.
 *   - RTLD_GLOBAL: one plugin's symbols would resolve another's; plugins
 *     share nothing but the runtime's API.
 *   - Trusting the table and checking lazily where the worker calls it: a
 *     NULL process() would be a SIGSEGV in a worker after the job started,
 *     where `shmrun check` can name the plugin and what to fix.
 *   - An array of structs in the descriptor: its stride is the plugin's
 *     sizeof, so a newer or older struct could not be walked; pointers to
 *     structs that each carry .size can (as perf_event_attr's size field).
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "conf_internal.h"
#include "internal.h"
#include "ops/ops.h"

/* The operator flags this runtime knows (operator.h). */
#define KNOWN_FLAGS \
	(SHMRUN_OP_SOURCE | SHMRUN_OP_SINK | SHMRUN_OP_UNREPLAYABLE | SHMRUN_OP_KEYED)

/* The built-ins, in the order `shmrun ops` and docs/operators.md list them. */
static const struct shmrun_operator *const builtins[] = {
	&shmrun_op_file_source,   &shmrun_op_stdin_source, &shmrun_op_socket_source,
	&shmrun_op_sequence,      &shmrun_op_nexmark,
	&shmrun_op_tokenize,      &shmrun_op_extract,     &shmrun_op_count,
	&shmrun_op_window,        &shmrun_op_interval_join, &shmrun_op_window_join,
	&shmrun_op_lookup,        &shmrun_op_file_sink,   &shmrun_op_stdout_sink,
	&shmrun_op_null_sink,     &shmrun_op_latency_sink, &shmrun_op_postgres_sink, NULL,
};
#define NBUILTINS (sizeof(builtins) / sizeof(builtins[0]) - 1)

/* The size of struct shmrun_operator in ABI 1.0: everything up to and
 * including state_version. A plugin's .size below it is refused. */
#define ABI_1_0_SIZE (offsetof(struct shmrun_operator, state_version) + sizeof(const char *))

struct loaded {
	struct shmrun_plugin_info info; /* path (owned), name and version (the plugin's) */
	dev_t dev;
	ino_t ino;
	struct shmrun_operator *ops; /* copies, this runtime's size */
	uint32_t nops;
};

static struct loaded *plugins;
static uint32_t nplugins;
/* builtins, then every plugin's ops, then NULL; NULL until a plugin loads */
static const struct shmrun_operator **all;

const char *shmrun_plugin_path_at(uint32_t i)
{
	return i < nplugins ? plugins[i].info.path : NULL;
}

const struct shmrun_operator *const *shmrun_operators(void)
{
	return all ? (const struct shmrun_operator *const *)all : builtins;
}

const struct shmrun_operator *shmrun_operator_find(const char *name)
{
	for (const struct shmrun_operator *const *op = shmrun_operators(); *op; op++)
		if (strcmp((*op)->name, name) == 0)
			return *op;
	return NULL;
}

const char *shmrun_operator_nearest(const char *name)
{
	const struct shmrun_operator *const *all_ops = shmrun_operators();
	const char *names[128];
	uint32_t n = 0;

	for (; n < 128 && all_ops[n]; n++)
		names[n] = all_ops[n]->name;
	return nearest(name, names, n);
}

const struct shmrun_plugin_info *shmrun_operator_plugin(const struct shmrun_operator *op)
{
	for (uint32_t p = 0; p < nplugins; p++)
		if (op >= plugins[p].ops && op < plugins[p].ops + plugins[p].nops)
			return &plugins[p].info;
	return NULL;
}

/* Where operator @name is defined already, as a message fragment, or NULL. */
static const char *origin_of(const char *name, char *buf, size_t len)
{
	const struct shmrun_operator *op = shmrun_operator_find(name);
	const struct shmrun_plugin_info *pi;

	if (!op)
		return NULL;
	pi = shmrun_operator_plugin(op);
	if (!pi)
		return "the built-in operators";
	snprintf(buf, len, "plugin %s (%s %s)", pi->path, pi->name, pi->version);
	return buf;
}

static int __attribute__((format(printf, 2, 3))) refuse(char **err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(err, fmt, ap) < 0)
		*err = NULL;
	va_end(ap);
	return *err ? -EINVAL : -ENOMEM;
}

/* Whether @key names an entry of @params of @type. */
static bool has_param(const struct shmrun_param_def *params, const char *key,
		      enum shmrun_param_type type)
{
	for (const struct shmrun_param_def *d = params; d && d->key; d++)
		if (strcmp(d->key, key) == 0)
			return d->type == type;
	return false;
}

/* The checks of one key table; a message into @err. */
static int check_params(const char *path, const struct shmrun_operator *op, char **err)
{
	const struct shmrun_param_def *stage = shmrun_stage_keys();
	char why[200];

	for (const struct shmrun_param_def *d = op->params; d && d->key; d++) {
		if (!*d->key)
			return refuse(err, "plugin %s: operator '%s' declares a key with an empty name",
				      path, op->name);
		if ((unsigned)d->type > SHMRUN_PARAM_DURATION)
			return refuse(err, "plugin %s: operator '%s', key '%s': unknown type %u",
				      path, op->name, d->key, (unsigned)d->type);
		if (d->type == SHMRUN_PARAM_ENUM && (!d->choices || !*d->choices))
			return refuse(err,
				      "plugin %s: operator '%s', key '%s' is an ENUM without choices; "
				      "set .choices to the space-separated words",
				      path, op->name, d->key);
		if ((unsigned)d->io > SHMRUN_PARAM_OUTPUT ||
		    (d->io == SHMRUN_PARAM_OUTPUT && d->type != SHMRUN_PARAM_PATH) ||
		    (d->io && d->type != SHMRUN_PARAM_PATH && d->type != SHMRUN_PARAM_PATHS))
			return refuse(err,
				      "plugin %s: operator '%s', key '%s': .io is for PATH keys "
				      "(OUTPUT) and PATH/PATHS keys (INPUT) only",
				      path, op->name, d->key);
		if (d->def && param_value_problem(d, d->def, why, sizeof(why)))
			return refuse(err,
				      "plugin %s: operator '%s', key '%s': its default '%s' is %s; "
				      "fix .def in the operator's key table (every stage that "
				      "leaves the key out would get it)",
				      path, op->name, d->key, d->def, why);
		if (d->reserved[0] || d->reserved[1])
			return refuse(err,
				      "plugin %s: operator '%s', key '%s': .reserved must be zero",
				      path, op->name, d->key);
		for (const struct shmrun_param_def *s = stage; s->key; s++)
			if (strcmp(s->key, d->key) == 0)
				return refuse(err,
					      "plugin %s: operator '%s' declares key '%s', which every "
					      "stage has already; rename it",
					      path, op->name, d->key);
		for (const struct shmrun_param_def *e = op->params; e != d; e++)
			if (strcmp(e->key, d->key) == 0)
				return refuse(err,
					      "plugin %s: operator '%s' declares key '%s' twice",
					      path, op->name, d->key);
	}
	if (op->pacing_param && !has_param(op->params, op->pacing_param, SHMRUN_PARAM_RATE))
		return refuse(err,
			      "plugin %s: operator '%s': .pacing_param '%s' is not one of its RATE keys",
			      path, op->name, op->pacing_param);
	if (op->flush_param && !has_param(op->params, op->flush_param, SHMRUN_PARAM_DURATION))
		return refuse(err,
			      "plugin %s: operator '%s': .flush_param '%s' is not one of its DURATION "
			      "keys",
			      path, op->name, op->flush_param);
	return 0;
}

/* Everything the runtime trusts about one operator of plugin @path. */
static int check_operator(const char *path, const struct shmrun_operator *op, uint32_t idx,
			  char **err)
{
	char where[PATH_MAX + 200];
	const char *other;

	if (!op->name || !*op->name)
		return refuse(err,
			      "plugin %s: operator #%u of its table has no name; set .name (the "
			      "`op =` value of a stage)",
			      path, idx + 1);
	if (strlen(op->name) > 32)
		return refuse(err,
			      "plugin %s: operator name '%.40s...' is longer than 32 characters",
			      path, op->name);
	for (const char *c = op->name; *c; c++)
		if (!(*c == '_' || *c == '-' || (*c >= 'a' && *c <= 'z') ||
		      (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9')))
			return refuse(err,
				      "plugin %s: operator name '%s' has a character other than "
				      "letters, digits, '_' and '-'",
				      path, op->name);
	if (op->flags & ~KNOWN_FLAGS)
		return refuse(err, "plugin %s: operator '%s' has unknown flags 0x%x", path,
			      op->name, op->flags & ~KNOWN_FLAGS);
	if ((op->flags & SHMRUN_OP_SOURCE) && (op->flags & SHMRUN_OP_KEYED))
		return refuse(err,
			      "plugin %s: operator '%s' is flagged both SHMRUN_OP_SOURCE and "
			      "SHMRUN_OP_KEYED; a source has no input to partition by key",
			      path, op->name);
	if ((op->flags & SHMRUN_OP_UNREPLAYABLE) && !(op->flags & SHMRUN_OP_SOURCE))
		return refuse(err,
			      "plugin %s: operator '%s' is flagged SHMRUN_OP_UNREPLAYABLE without "
			      "SHMRUN_OP_SOURCE; only a source reads input that may not be "
			      "replayable",
			      path, op->name);
	if ((op->flags & SHMRUN_OP_SOURCE) && (op->flags & SHMRUN_OP_SINK))
		return refuse(err,
			      "plugin %s: operator '%s' is flagged both SHMRUN_OP_SOURCE and "
			      "SHMRUN_OP_SINK; a stage is one or the other",
			      path, op->name);
	if ((op->flags & SHMRUN_OP_SOURCE) && !op->produce)
		return refuse(err,
			      "plugin %s: operator '%s' is a source (SHMRUN_OP_SOURCE) without "
			      "produce(); set .produce",
			      path, op->name);
	if (!(op->flags & SHMRUN_OP_SOURCE) && !op->process)
		return refuse(err,
			      "plugin %s: operator '%s' has no process() (every operator that is "
			      "not a source needs one, also with process_batch()); set .process",
			      path, op->name);
	if ((unsigned)op->pw_rule > SHMRUN_PW_UNION)
		return refuse(err, "plugin %s: operator '%s': unknown pw_rule %u", path, op->name,
			      (unsigned)op->pw_rule);
	if (op->combiner &&
	    (op->combiner->partial_bytes < 1 || op->combiner->partial_bytes > 256 ||
	     !op->combiner->add || !op->combiner->merge))
		return refuse(err,
			      "plugin %s: operator '%s': its combiner needs partial_bytes 1..256, "
			      "add() and merge()",
			      path, op->name);
	other = origin_of(op->name, where, sizeof(where));
	if (other)
		return refuse(err,
			      "plugin %s: operator '%s' is already defined by %s; operator names "
			      "are global: rename one of them",
			      path, op->name, other);
	return check_params(path, op, err);
}

/* The checks of the descriptor @d of plugin @path; the operators copied into
 * @lp. */
static int check_plugin(const char *path, const struct shmrun_plugin *d, struct loaded *lp,
			char **err)
{
	uint32_t n = 0;
	int r;

	if (d->abi_major != SHMRUN_ABI_MAJOR || d->abi_minor > SHMRUN_ABI_MINOR)
		return refuse(err,
			      "plugin %s was built for operator ABI %u.%u; this shmrun has ABI "
			      "%u.%u and loads %u.0 to %u.%u: rebuild the plugin against this "
			      "shmrun's headers (pkg-config --cflags shmrun)%s",
			      path, d->abi_major, d->abi_minor, SHMRUN_ABI_MAJOR, SHMRUN_ABI_MINOR,
			      SHMRUN_ABI_MAJOR, SHMRUN_ABI_MAJOR, SHMRUN_ABI_MINOR,
			      d->abi_major == SHMRUN_ABI_MAJOR ? ", or upgrade shmrun" : "");
	if (!d->name || !*d->name || !d->version || !*d->version)
		return refuse(err,
			      "plugin %s: its struct shmrun_plugin has no %s; define it with "
			      "SHMRUN_PLUGIN(\"name\", \"version\", &operator, ...)",
			      path, !d->name || !*d->name ? "name" : "version");
	while (d->operators && d->operators[n])
		n++;
	if (!n)
		return refuse(err,
			      "plugin %s (%s %s) has no operators; list them in SHMRUN_PLUGIN(name, "
			      "version, &op1, &op2, ...)",
			      path, d->name, d->version);
	lp->ops = calloc(n, sizeof(*lp->ops));
	if (!lp->ops)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		const struct shmrun_operator *op = d->operators[i];

		if (op->size < ABI_1_0_SIZE || op->size > sizeof(struct shmrun_operator))
			return refuse(err,
				      "plugin %s: operator #%u (%s) has .size = %u; set .size = "
				      "sizeof(struct shmrun_operator) (%zu with these headers) and "
				      "rebuild",
				      /* .name is where ABI 1.0 put it, whatever .size says */
				      path, i + 1, op->name ? op->name : "without a name",
				      op->size, sizeof(struct shmrun_operator));
		memcpy(&lp->ops[i], op, op->size);
		lp->ops[i].size = sizeof(struct shmrun_operator);
		r = check_operator(path, &lp->ops[i], i, err);
		if (r)
			return r;
		for (uint32_t j = 0; j < i; j++)
			if (strcmp(lp->ops[j].name, lp->ops[i].name) == 0)
				return refuse(err, "plugin %s lists operator '%s' twice", path,
					      lp->ops[i].name);
	}
	lp->nops = n;
	return 0;
}

/* Rebuild all[] from the built-ins and every plugin's operators. */
static int rebuild_all(void)
{
	size_t n = NBUILTINS + 1, k = 0;
	const struct shmrun_operator **v;

	for (uint32_t p = 0; p < nplugins; p++)
		n += plugins[p].nops;
	v = malloc(n * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < NBUILTINS; i++)
		v[k++] = builtins[i];
	for (uint32_t p = 0; p < nplugins; p++)
		for (uint32_t i = 0; i < plugins[p].nops; i++)
			v[k++] = &plugins[p].ops[i];
	v[k] = NULL;
	free(all);
	all = v;
	return 0;
}

int shmrun_plugin_load(const char *path, char **err)
{
	struct loaded lp = {0}, *grown;
	const struct shmrun_plugin *d;
	char *canon = NULL;
	struct stat st;
	void *dl;
	int r;

	*err = NULL;
	if (stat(path, &st) != 0) {
		int e = errno;

		if (e == ENOENT || e == ENOTDIR)
			refuse(err,
			       "plugin %s does not exist; fix the path, or build the plugin "
			       "(cc -shared -fPIC ... $(pkg-config --cflags --libs shmrun); "
			       "shmrun-operator(3), \"Loading plugins\")",
			       path);
		else
			refuse(err,
			       "plugin %s cannot be read: %s; give this user access to it (and "
			       "to the directories above it) or fix the path",
			       path, strerror(e));
		return -e;
	}
	if (!S_ISREG(st.st_mode))
		return refuse(err, "plugin %s is not a regular file; name the plugin's .so file",
			      path);
	for (uint32_t p = 0; p < nplugins; p++)
		if (plugins[p].dev == st.st_dev && plugins[p].ino == st.st_ino)
			return 0; /* loaded already (the same file) */
	canon = realpath(path, NULL);
	if (!canon)
		return -errno;
	/* RTLD_NOW: an unresolved symbol is an error here, not a crash in a worker */
	dl = dlopen(canon, RTLD_NOW | RTLD_LOCAL);
	if (!dl) {
		const char *why = dlerror();

		r = refuse(err,
			   "plugin %s cannot be loaded: %s; build it as a shared object against "
			   "this shmrun (cc -shared -fPIC ... $(pkg-config --cflags --libs shmrun))",
			   path, why ? why : "dlopen failed");
		free(canon);
		return r;
	}
	d = dlsym(dl, SHMRUN_PLUGIN_SYMBOL);
	if (!d) {
		r = refuse(err,
			   "plugin %s does not export the symbol '%s'; define it with "
			   "SHMRUN_PLUGIN(\"name\", \"version\", &operator, ...) from "
			   "<shmrun/operator.h>",
			   path, SHMRUN_PLUGIN_SYMBOL);
		goto fail;
	}
	r = check_plugin(path, d, &lp, err);
	if (r)
		goto fail;
	grown = realloc(plugins, (nplugins + 1) * sizeof(*plugins));
	if (!grown) {
		r = -ENOMEM;
		goto fail;
	}
	plugins = grown;
	lp.info.path = canon;
	lp.info.name = d->name;
	lp.info.version = d->version;
	lp.dev = st.st_dev;
	lp.ino = st.st_ino;
	plugins[nplugins++] = lp;
	r = rebuild_all();
	if (r) {
		nplugins--; /* the registry is unchanged; the object stays mapped */
		free(lp.ops);
		free(canon);
	}
	return r;

fail:
	free(lp.ops);
	free(canon);
	dlclose(dl);
	return r;
}
