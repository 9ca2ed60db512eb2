/*
 * runtime/ckpt/rescale.c: authorised re-assignment of state to a changed topology.
 *
 * `shmrun --rescale topology.conf` restores the newest checkpoint of
 * checkpoint_dir into a topology it was not written by — a new width, a new
 * worker count, a new or removed stage — when every piece of state has a
 * provably right new owner, and refuses otherwise (docs/design.md §6):
 *
 *   - key-bound state moves whole vnode by whole vnode to the instance whose
 *     new vnode_ranges hold it; every key keeps its value, every pending
 *     timer (timer.h) moves with its key's vnode. A change of the vnode count
 *     is refused (a key's vnode would change). A new instance's watermark is
 *     the minimum over the stage's old instances (its own, if the width
 *     stays): a timer still pending was after its old owner's watermark, so
 *     after the minimum, and fires once, later.
 *   - old state files of format version 1 are re-written as version 2.
 *   - per-worker state is recomposed by the rule its operator declared:
 *     split pools every old instance's entries in (old instance, position)
 *     order and deals entry k to new instance k mod width — each entry owned
 *     exactly once; union gives every new instance every distinct entry. A
 *     stage whose width changes and that holds per-worker state without a
 *     declared rule is refused, naming it. A stage whose width is unchanged
 *     keeps each instance's entries as they were.
 *   - stages match by name; a new stage starts empty; a stage that
 *     disappeared refuses the rescale unless --drop-state=STAGE names it.
 *   - a union pool larger than union_state_limit is refused (every new
 *     instance would load it).
 *
 * The result is written as a new, ordinary checkpoint (epoch past every one
 * in the directory) carrying the new topology's fingerprint, so the restore
 * that follows is the normal one and a crash half-way leaves at most an
 * incomplete directory that restore skips. `shmrun plan --rescale-from` runs
 * the same computation and prints it instead of writing.
 *
 * Invariants: every piece of old state has exactly one new owner (union
 * aside, which gives every owner a copy); the old checkpoint is only read,
 * never changed; state files are decoded and re-encoded only through
 * state_file.h (sections are copied whole, per-worker entries one by one),
 * so the rescale knows the layout of no byte.
 *
 * Rejected: rescaling in place (a crash half-way would leave neither the old
 * checkpoint nor the new one); rehashing keys into a new vnode count (every
 * key of every stage would be read, and a key's vnode — which sinks and
 * lookups may rely on — would change: the vnode count is fixed instead);
 * guessing a rule for per-worker state an operator did not declare (an entry
 * such as a read position dealt to the wrong instance loses or duplicates
 * input, so the rescale refuses and names the stage).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "ckpt_io.h"
#include "manifest.h"
#include "state_file.h"
#include "shmrun/placement.h"
#include "recovery.h"
#include "util.h"

/* One old state file, loaded and indexed. */
struct old_file {
	const struct shmrun_manifest_file *mf;
	void *data;
	size_t len;
	struct shmrun_state_view view;
};

/* One per-worker entry of the pool. */
struct entry {
	const unsigned char *p; /* the entry's bytes (after its u32 length) */
	uint32_t len;
};

struct rescale {
	const struct shmrun_job *job;
	const char *dir;
	struct shmrun_manifest m;
	uint64_t epoch; /* restored from */
	struct old_file *files;
	uint32_t nfiles;
	char why[PATH_MAX + 1024];
};

static const struct shmrun_manifest_stage *old_stage(const struct rescale *rs, const char *name)
{
	for (uint32_t s = 0; s < rs->m.nstages; s++)
		if (strcmp(rs->m.stages[s].name, name) == 0)
			return &rs->m.stages[s];
	return NULL;
}

static bool dropped(const char *const *drop, uint32_t ndrop, const char *name)
{
	for (uint32_t i = 0; i < ndrop; i++)
		if (strcmp(drop[i], name) == 0)
			return true;
	return false;
}

static void free_rescale(struct rescale *rs)
{
	for (uint32_t i = 0; i < rs->nfiles; i++) {
		shmrun_state_view_free(&rs->files[i].view);
		free(rs->files[i].data);
	}
	free(rs->files);
	shmrun_manifest_free(&rs->m);
}

/* Load the newest checkpoint and every state file in it. */
static int load(struct rescale *rs)
{
	char at[PATH_MAX + 16];
	char path[PATH_MAX], why[300];
	struct stat st;
	int64_t e = shmrun_ckpt_select(rs->dir, &rs->m);
	int dirfd, err = 0;

	/* the job's own checkpoint_dir absent or empty: one message, whoever asks */
	bool own = rs->job->checkpoint_dir && strcmp(rs->dir, rs->job->checkpoint_dir) == 0;

	if (e == 0 && stat(rs->dir, &st) < 0 && !(own && errno == ENOENT)) {
		err = -errno; /* a mistyped directory: say so */
		snprintf(rs->why, sizeof(rs->why), "%s: %s", rs->dir, strerror(-err));
		return err;
	}
	if (e == 0 && !own && !S_ISDIR(st.st_mode)) {
		snprintf(rs->why, sizeof(rs->why), "%s: %s", rs->dir, strerror(ENOTDIR));
		return -ENOTDIR;
	}
	if (e == -ESTALE) {
		/* shmrun_ckpt_select() said why: one host's per_host directory */
		snprintf(rs->why, sizeof(rs->why),
			 "%s holds only one host's part of a checkpoint of several hosts (see "
			 "above): gather every host's state files into one directory first",
			 rs->dir);
		return -ESTALE;
	}
	if (e <= 0) {
		if (own)
			snprintf(rs->why, sizeof(rs->why),
				 "%s: checkpoint_dir %s holds %s; to start from empty state, "
				 "run without --rescale; to rescale, set checkpoint_dir to the "
				 "directory that holds the checkpoints",
				 shmrun_conf_at(at, sizeof(at), rs->job->conf_path, rs->job->checkpoint_dir_line), rs->dir,
				 e == 0 ? "no checkpoint to rescale"
					: "no checkpoint that verifies");
		else
			snprintf(rs->why, sizeof(rs->why),
				 e == 0 ? "%s holds no checkpoint to rescale"
					: "%s holds no checkpoint that verifies",
				 rs->dir);
		return e == 0 ? -ENOENT : -EBADMSG;
	}
	rs->epoch = (uint64_t)e;
	shmrun_ckpt_path(rs->dir, rs->epoch, path, sizeof(path));
	dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return -errno;
	rs->files = calloc(rs->m.nfiles + 1, sizeof(*rs->files));
	if (!rs->files) {
		close(dirfd);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < rs->m.nfiles && !err; i++) {
		struct old_file *f = &rs->files[rs->nfiles++];

		f->mf = &rs->m.files[i];
		err = shmrun_ckpt_read_file(dirfd, f->mf->name, f->mf->size, f->mf->xxh64, &f->data,
					    &f->len, why, sizeof(why));
		if (!err)
			err = shmrun_state_parse(f->data, f->len, &f->view);
		if (err == -EPROTO)
			snprintf(rs->why, sizeof(rs->why),
				 "%s/%s: state file format version %u is not one this shmrun "
				 "reads (1 to %u): a newer shmrun wrote it; rescale with that one",
				 path, f->mf->name, f->view.version, SHMRUN_STATE_VERSION);
		else if (err)
			snprintf(rs->why, sizeof(rs->why), "%s/%s: %s", path, f->mf->name,
				 err == -EBADMSG ? "malformed" : why);
	}
	close(dirfd);
	return err;
}

/* Every refusal, in one message. Return: 0 if the rescale is allowed. */
static int check(struct rescale *rs, const char *const *drop, uint32_t ndrop)
{
	char at[PATH_MAX + 16];
	const struct shmrun_job *job = rs->job;
	char *text = NULL; /* the new topology's canonical encoding */
	size_t n = 0, text_len;

	rs->why[0] = 0;
#define REFUSE(...)                                                                          \
	do {                                                                                 \
		if (n < sizeof(rs->why))                                                     \
			n += (size_t)snprintf(rs->why + n, sizeof(rs->why) - n, "%s",        \
					      n ? "; " : "");                                \
		if (n < sizeof(rs->why))                                                     \
			n += (size_t)snprintf(rs->why + n, sizeof(rs->why) - n, __VA_ARGS__); \
	} while (0)
	if (rs->m.topology && shmrun_fingerprint_text(job, &text, &text_len))
		text = NULL;
	if (rs->m.topology && !text)
		REFUSE("%s: out of memory encoding the topology", job->conf_path);
	if (rs->m.vnodes != job->vnodes)
		REFUSE("%s: vnodes: %u → %u (a key's vnode would change; a vnode count change "
		       "cannot be rescaled): set vnodes = %u in [job] again",
		       job->conf_path, rs->m.vnodes, job->vnodes, rs->m.vnodes);
	for (uint32_t s = 0; s < rs->m.nstages; s++) {
		const struct shmrun_manifest_stage *os = &rs->m.stages[s];
		bool found = false;

		for (uint32_t t = 0; t < job->nstages; t++)
			found |= strcmp(job->stages[t].name, os->name) == 0;
		if (!found && !dropped(drop, ndrop, os->name))
			REFUSE("%s: stage %s: removed; its state would be lost — pass "
			       "--drop-state=%s to drop it",
			       job->conf_path, os->name, os->name);
	}
	for (uint32_t t = 0; t < job->nstages; t++) {
		const struct shmrun_stage *st = &job->stages[t];
		const struct shmrun_manifest_stage *os = old_stage(rs, st->name);
		uint64_t pw = 0;

		if (!os)
			continue; /* new: starts empty */
		if (strcmp(os->op, st->op->name) != 0) {
			REFUSE("%s: stage %s: op %s → %s (state cannot move between "
			       "operators): set op = %s again, or rename the stage (a new stage "
			       "starts empty) and pass --drop-state=%s",
			       shmrun_conf_at(at, sizeof(at), job->conf_path, st->line), st->name, os->op, st->op->name, os->op,
			       st->name);
			continue;
		}
		if (rs->m.topology) {
			/* a plugin's operator: the same state format (its version, or
			 * its state_version); a moved plugin file is no refusal here */
			char was[200], is[200];

			if (shmrun_fingerprint_plugin_state(rs->m.topology, st->name, was,
							    sizeof(was)) +
				    shmrun_stage_plugin_state(st, is, sizeof(is)) &&
			    strcmp(was, is) != 0)
				REFUSE("%s: stage %s: plugin %s → %s (its state format may have "
				       "changed, and state cannot move between formats): restore with "
				       "the old plugin, or rename the stage and pass --drop-state=%s",
				       shmrun_conf_at(at, sizeof(at), job->conf_path, st->line), st->name, was[0] ? was : "(built-in)",
				       is[0] ? is : "(built-in)", st->name);
		}
		if (rs->m.topology && text) {
			/* a setting that shapes state (a window's size, a join's
			 * bounds, count's emit) read differently by the restored
			 * state would give wrong output: a rescale moves state, it
			 * does not convert it */
			char *changed = NULL;

			if (shmrun_fingerprint_param_diff(rs->m.topology, text, st->name,
							  &changed) == -ENOMEM)
				REFUSE("%s: out of memory comparing the settings of stage %s",
				       job->conf_path, st->name);
			else if (changed)
				REFUSE("%s: %s (a rescale moves state but does not convert it to "
				       "other settings): set them back, or rename the stage (a new "
				       "stage starts empty) and pass --drop-state=%s",
				       shmrun_conf_at(at, sizeof(at), job->conf_path, st->line), changed, st->name);
			free(changed);
		}
		for (uint32_t i = 0; i < rs->nfiles; i++)
			if (strcmp(rs->files[i].mf->stage, st->name) == 0)
				pw += rs->files[i].view.npw;
		if (os->width != st->width && pw && st->op->pw_rule == SHMRUN_PW_NONE) {
			/* name the output files that hold it: file_sink's path,
			 * extract's rejects, window's late (a file per instance) */
			char outs[256] = "";
			size_t used = 0;

			for (uint32_t i = 0; i < st->nparams && used < sizeof(outs); i++)
				if (st->params[i].value &&
				    st->params[i].def->io == SHMRUN_PARAM_OUTPUT) {
					int k = snprintf(outs + used, sizeof(outs) - used, "%s%s",
							 used ? ", " : "", st->params[i].def->key);

					used += k > 0 ? (size_t)k : 0;
				}
			if (used)
				REFUSE("%s: stage %s: its per-worker state is how much of "
				       "each instance's output file (%s: one file per instance) "
				       "is committed, which no rule can re-deal to another "
				       "number of files, so its width cannot change (%u → %u): "
				       "set width = %u again",
				       shmrun_conf_at(at, sizeof(at), job->conf_path, st->line), st->name, outs, os->width,
				       st->width, os->width);
			else
				REFUSE("%s: stage %s: its operator %s declares no per-worker "
				       "state rule (split or union), so its width cannot change "
				       "(%u → %u): set width = %u again",
				       shmrun_conf_at(at, sizeof(at), job->conf_path, st->line), st->name, st->op->name,
				       os->width, st->width, os->width);
		}
	}
#undef REFUSE
	free(text);
	return rs->why[0] ? -EPERM : 0;
}

/* The pool of per-worker entries of @stage: old instance order, then position. */
static int pool_of(struct rescale *rs, const char *stage, uint32_t old_width, bool distinct,
		   struct entry **out, uint32_t *nout, uint64_t *bytes)
{
	struct entry *v = NULL;
	uint32_t n = 0, cap = 0;

	*bytes = 0;
	for (uint32_t inst = 0; inst < old_width; inst++)
		for (uint32_t i = 0; i < rs->nfiles; i++) {
			const struct old_file *f = &rs->files[i];
			const unsigned char *p = f->view.pw, *end = p + f->view.pw_len;
			const void *ep;

			if (strcmp(f->mf->stage, stage) || f->mf->instance != inst)
				continue;
			for (uint64_t k = 0; k < f->view.npw; k++) {
				uint32_t len;
				bool dup = false;

				/* shmrun_state_parse() checked every entry: never short here */
				if (shmrun_state_pw_next(&p, end, &ep, &len) <= 0)
					break;
				for (uint32_t j = 0; distinct && j < n && !dup; j++)
					dup = v[j].len == len && memcmp(v[j].p, ep, len) == 0;
				if (!dup) {
					if (shmrun_grow_u32(&v, &cap, (size_t)n + 1, sizeof(*v),
							    64)) {
						free(v);
						return -ENOMEM;
					}
					v[n++] = (struct entry){ep, len};
					*bytes += shmrun_state_pw_entry_size(len);
				}
			}
		}
	*out = v;
	*nout = n;
	return 0;
}

struct task_out {
	uint64_t kv_bytes, vnodes_moved, pw_bytes;
	uint32_t pw_entries;
};

/* Build new task @inst of stage @st: its state file's content into @buf. */
static int build_task(struct rescale *rs, const struct shmrun_stage *st, uint32_t inst,
		      uint64_t epoch, struct shmrun_ckpt_buf *buf, struct task_out *o)
{
	const struct shmrun_manifest_stage *os = old_stage(rs, st->name);
	uint32_t lo, hi, old_width = os ? os->width : 0;
	struct shmrun_state_head h = {.instance = inst, .width = st->width,
				      .vnodes = rs->job->vnodes, .wm = INT64_MIN};
	struct entry *pool = NULL;
	uint32_t npool = 0;
	uint64_t npw = 0, pool_bytes;
	bool wm_set = false;
	int err = 0;

	memset(o, 0, sizeof(*o));
	shmrun_placement_vnode_range(inst, st->width, rs->job->vnodes, &lo, &hi);
	/* key-bound: every old section of this stage whose vnode is in [lo, hi) */
	for (uint32_t i = 0; os && i < rs->nfiles; i++) {
		const struct old_file *f = &rs->files[i];

		if (strcmp(f->mf->stage, st->name))
			continue;
		for (uint32_t s = 0; s < f->view.nsections; s++) {
			/* the value size of a file with keys (one of timers only says 0) */
			if (f->view.sections[s].keys)
				h.value_bytes = f->view.value_bytes;
			h.nsections += f->view.sections[s].vnode >= lo && f->view.sections[s].vnode < hi;
		}
		h.flags |= f->view.flags & SHMRUN_STATE_NAMESPACED;
		/* the watermark: the instance's own while the width stays, else the
		 * minimum over the old instances — no timer still pending in any
		 * moved vnode is at or before it, so none fires twice */
		if (old_width == st->width ? f->mf->instance == inst : !wm_set || f->view.wm < h.wm) {
			h.wm = f->view.wm;
			wm_set = true;
		}
	}
	/* epoch 0 marks a stage new to the checkpoint: its tasks start as on a
	 * first start (shmrun_task_restoring() is false); every other task
	 * restores its position from its entries, even from none */
	h.epoch = os ? epoch : 0;
	err = shmrun_state_put_header(buf, &h);
	for (uint32_t i = 0; os && i < rs->nfiles && !err; i++) {
		const struct old_file *f = &rs->files[i];

		if (strcmp(f->mf->stage, st->name))
			continue;
		for (uint32_t s = 0; s < f->view.nsections && !err; s++) {
			const struct shmrun_state_section *sec = &f->view.sections[s];

			if (sec->vnode < lo || sec->vnode >= hi)
				continue;
			err = shmrun_state_put_section(buf, &f->view, sec);
			o->kv_bytes += shmrun_state_section_size(&f->view, sec);
			/* a vnode whose instance stays the same stays with its task */
			o->vnodes_moved += f->mf->instance != inst;
		}
	}
	if (err)
		return err;
	/* per-worker */
	if (os && old_width == st->width) {
		for (uint32_t i = 0; i < rs->nfiles && !err; i++) {
			const struct old_file *f = &rs->files[i];

			if (strcmp(f->mf->stage, st->name) || f->mf->instance != inst)
				continue;
			npw = f->view.npw;
			err = shmrun_state_put_pw(buf, npw, f->view.pw, f->view.pw_len);
			o->pw_entries = (uint32_t)npw;
			o->pw_bytes = f->view.pw_len;
			free(pool);
			return err;
		}
	} else if (os) {
		bool uni = st->op->pw_rule == SHMRUN_PW_UNION;

		err = pool_of(rs, st->name, old_width, uni, &pool, &npool, &pool_bytes);
		for (uint32_t k = 0; k < npool && !err; k++)
			npw += uni || k % st->width == inst;
	}
	if (!err)
		err = shmrun_state_put_pw_count(buf, npw);
	for (uint32_t k = 0; k < npool && !err; k++) {
		if (st->op->pw_rule != SHMRUN_PW_UNION && k % st->width != inst)
			continue;
		err = shmrun_state_put_pw_entry(buf, pool[k].p, pool[k].len);
		o->pw_bytes += shmrun_state_pw_entry_size(pool[k].len);
		o->pw_entries++;
	}
	free(pool);
	return err;
}

/* Union pools over the limit: refused. */
static int check_union(struct rescale *rs, FILE *out)
{
	char at[PATH_MAX + 16];
	const struct shmrun_job *job = rs->job;

	for (uint32_t t = 0; t < job->nstages; t++) {
		const struct shmrun_stage *st = &job->stages[t];
		const struct shmrun_manifest_stage *os = old_stage(rs, st->name);
		struct entry *pool;
		uint32_t n;
		uint64_t bytes;

		if (!os || st->op->pw_rule != SHMRUN_PW_UNION || os->width == st->width)
			continue;
		if (pool_of(rs, st->name, os->width, true, &pool, &n, &bytes))
			return -ENOMEM;
		free(pool);
		if (out)
			fprintf(out,
				"  %s: union of %u entr%s, %" PRIu64 " bytes, to each of %u "
				"instance%s: fan-out %" PRIu64 " bytes\n",
				st->name, n, n == 1 ? "y" : "ies", bytes, st->width,
				st->width == 1 ? "" : "s", bytes * st->width);
		if (bytes > job->union_state_limit) {
			snprintf(rs->why, sizeof(rs->why),
				 "%s: stage %s: its union per-worker state pools %" PRIu64
				 " bytes, more than union_state_limit = %" PRIu64
				 " bytes; every new instance would load it all: raise "
				 "union_state_limit in [job], or keep width = %u",
				 shmrun_conf_at(at, sizeof(at), job->conf_path, st->line), st->name, bytes, job->union_state_limit,
				 os->width);
			return -EFBIG;
		}
	}
	return 0;
}

/*
 * Several hosts sharing checkpoint_dir (checkpoint_layout = shared): rank 0
 * alone writes the rescaled checkpoint — two writers would race for the same
 * new epoch — and host job->host waits, up to checkpoint_timeout, until the
 * newest complete checkpoint of @dir carries this topology's fingerprint
 * (rank 0's result, or one that fitted already). Return: 0 (*@new_epoch: that
 * epoch); -ETIMEDOUT (logged).
 */
static int wait_for_rank0(const struct shmrun_job *job, const char *dir, uint64_t *new_epoch)
{
	int64_t deadline = shmrun_now_ns() + (int64_t)job->checkpoint_timeout_ns;
	uint64_t want = shmrun_fingerprint(job);
	bool told = false;

	for (;;) {
		struct shmrun_manifest m = {0};
		uint64_t e = shmrun_ckpt_newest_complete(dir, &m);
		bool fits = e && m.fingerprint == want;

		if (e)
			shmrun_manifest_free(&m);
		if (fits) {
			shmrun_log(SHMRUN_LOG_INFO,
				   "rescale: host %u restores %s/ckpt-%" PRIu64 ", rescaled by host 0",
				   job->host, dir, e);
			if (new_epoch)
				*new_epoch = e;
			return 0;
		}
		if (shmrun_now_ns() > deadline)
			break;
		if (!told)
			shmrun_log(SHMRUN_LOG_INFO,
				   "rescale: host %u leaves the rescale of the shared checkpoint_dir "
				   "%s to host 0 and waits for it (up to checkpoint_timeout)",
				   job->host, dir);
		told = true;
		usleep(100 * 1000);
	}
	shmrun_log(SHMRUN_LOG_ERROR,
		   "rescale: host %u waited %.1f s (checkpoint_timeout) for host 0 to write the "
		   "rescaled checkpoint into the shared checkpoint_dir %s, and it did not appear: "
		   "see host 0's log; nothing was started",
		   job->host, (double)job->checkpoint_timeout_ns / 1e9, dir);
	return -ETIMEDOUT;
}

int shmrun_rescale(const struct shmrun_job *job, const char *dir, const char *const *drop,
		   uint32_t ndrop, FILE *plan_out, uint64_t *new_epoch)
{
	struct rescale rs = {.job = job, .dir = dir};
	struct shmrun_manifest_file *files = NULL;
	struct shmrun_ckpt_writer wr;
	uint64_t *epochs = NULL, e = 0;
	char path[PATH_MAX], why[256];
	uint32_t nfiles = 0, ntasks = 0;
	int err, dirfd = -1, n;
	bool writing = plan_out == NULL;

	if (job->hosts > 1 && job->checkpoint_per_host && strcmp(dir, job->checkpoint_dir) == 0) {
		/* no host's directory holds the other hosts' state files */
		snprintf(rs.why, sizeof(rs.why),
			 "%s: checkpoint_layout = per_host: %s holds only host %u's state files, "
			 "and a rescale reads every task's; gather the newest ckpt-<epoch> of every "
			 "host into one directory and rescale there with checkpoint_layout = shared "
			 "(docs/checkpoints.md, \"Rescaling across hosts\")",
			 job->conf_path, dir, job->host);
		err = -EPERM;
		goto out;
	}
	if (writing && job->host != 0 && !job->checkpoint_per_host &&
	    strcmp(dir, job->checkpoint_dir) == 0)
		return wait_for_rank0(job, dir, new_epoch);
	err = load(&rs);
	if (err)
		goto out;
	for (uint32_t d = 0; d < ndrop; d++) {
		bool removed = old_stage(&rs, drop[d]) != NULL;

		for (uint32_t t = 0; t < job->nstages && removed; t++)
			removed = strcmp(job->stages[t].name, drop[d]) != 0;
		if (!removed) {
			snprintf(rs.why, sizeof(rs.why),
				 "--drop-state=%s names no stage that %s/ckpt-%" PRIu64
				 " has and this topology removed",
				 drop[d], dir, rs.epoch);
			err = -EINVAL;
			goto out;
		}
	}
	if (rs.m.fingerprint == shmrun_fingerprint(job)) {
		if (plan_out)
			fprintf(plan_out, "rescale from %s/ckpt-%" PRIu64 ": the topology is the "
					  "same; nothing moves\n",
				dir, rs.epoch);
		if (new_epoch)
			*new_epoch = 0;
		goto out;
	}
	err = check(&rs, drop, ndrop);
	if (err)
		goto out;
	if (plan_out)
		fprintf(plan_out, "rescale from %s/ckpt-%" PRIu64 " (%u stage%s, vnodes %u):\n",
			dir, rs.epoch, rs.m.nstages, rs.m.nstages == 1 ? "" : "s", rs.m.vnodes);
	err = check_union(&rs, plan_out);
	if (err)
		goto out;
	for (uint32_t t = 0; t < job->nstages; t++)
		ntasks += job->stages[t].width;
	files = calloc(ntasks + 1, sizeof(*files));
	if (!files) {
		err = -ENOMEM;
		goto out;
	}
	if (writing) {
		n = shmrun_ckpt_list(dir, &epochs);
		e = (n > 0 ? epochs[0] : rs.epoch) + 1;
		free(epochs);
		shmrun_ckpt_path(dir, e, path, sizeof(path));
		err = shmrun_ckpt_mkdir(path); /* 0700 whatever the umask */
		if (!err && (dirfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
			err = -errno;
		if (err) {
			snprintf(rs.why, sizeof(rs.why), "cannot create %s: %s", path,
				 strerror(-err));
			goto out;
		}
		err = shmrun_ckpt_writer_init(&wr, 16, why, sizeof(why));
		if (err)
			goto out;
	}
	for (uint32_t t = 0; t < job->nstages && !err; t++) {
		const struct shmrun_stage *st = &job->stages[t];
		const struct shmrun_manifest_stage *os = old_stage(&rs, st->name);

		if (plan_out)
			fprintf(plan_out, "  stage %s: %s\n", st->name,
				!os ? "new, starts empty"
				: os->width == st->width
					? "width unchanged, each instance keeps its state"
					: st->op->pw_rule == SHMRUN_PW_UNION ? "width changes (per-worker rule union)"
					: st->op->pw_rule == SHMRUN_PW_SPLIT ? "width changes (per-worker rule split)"
									     : "width changes (key-bound state only)");
		for (uint32_t i = 0; i < st->width && !err; i++) {
			struct shmrun_ckpt_buf buf;
			struct task_out o;
			struct shmrun_manifest_file *f = &files[nfiles++];
			uint32_t lo, hi;

			shmrun_ckpt_buf_init(&buf);
			err = build_task(&rs, st, i, e, &buf, &o);
			if (!err)
				err = shmrun_ckpt_buf_seal(&buf);
			snprintf(f->name, sizeof(f->name), "%s.%u.state", st->name, i);
			snprintf(f->stage, sizeof(f->stage), "%s", st->name);
			f->instance = i;
			f->kv_bytes = o.kv_bytes;
			f->pw_bytes = o.pw_bytes;
			if (!err && writing)
				err = shmrun_ckpt_write_file(&wr, dirfd, f->name, &buf, &f->size,
							     &f->xxh64);
			shmrun_ckpt_buf_free(&buf);
			shmrun_placement_vnode_range(i, st->width, job->vnodes, &lo, &hi);
			if (plan_out && !err)
				fprintf(plan_out,
					"    %s[%u]: vnodes [%u, %u): %" PRIu64
					" key-bound bytes, %" PRIu64
					" vnode%s moving in; %u per-worker entr%s (%" PRIu64
					" bytes)\n",
					st->name, i, lo, hi, o.kv_bytes, o.vnodes_moved,
					o.vnodes_moved == 1 ? "" : "s", o.pw_entries,
					o.pw_entries == 1 ? "y" : "ies", o.pw_bytes);
		}
	}
	for (uint32_t d = 0; d < ndrop && plan_out; d++)
		fprintf(plan_out, "  stage %s: dropped (--drop-state)\n", drop[d]);
	if (writing && !err)
		err = shmrun_ckpt_fsync_dir(dirfd);
	if (writing)
		shmrun_ckpt_writer_close(&wr);
	if (writing && !err)
		err = shmrun_ckpt_write_manifest(job, e, rs.m.finished, files, nfiles);
	if (writing && !err) {
		shmrun_log(SHMRUN_LOG_INFO,
			   "rescale: %s/ckpt-%" PRIu64 " re-assigned to this topology as %s/ckpt-%" PRIu64,
			   dir, rs.epoch, dir, e);
		if (new_epoch)
			*new_epoch = e;
	}
out:
	if (err && rs.why[0])
		shmrun_log(SHMRUN_LOG_ERROR, "rescale refused: %s; nothing was started", rs.why);
	else if (err)
		shmrun_log(SHMRUN_LOG_ERROR, "rescale of %s failed: %s; nothing was started", dir,
			   strerror(-err));
	if (dirfd >= 0)
		close(dirfd);
	free(files);
	free_rescale(&rs);
	return err;
}
