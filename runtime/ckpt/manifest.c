/*
 * runtime/ckpt/manifest.c: checkpoint directories on disk — the MANIFEST
 * (text, write, parse, verify), restore selection, retirement of a
 * checkpoint, removal of incomplete epochs, the topology check and the
 * `shmrun ckpt list|verify` printing.
 *
 * Invariant: the rename of MANIFEST into place commits a checkpoint, and a
 * checkpoint is retired MANIFEST first (shmrun_ckpt_remove()), so a reader
 * sees either a whole checkpoint or an incomplete directory. Only files the
 * runtime makes are ever removed, never through a symlink.
 *
 * MANIFEST is text, one item per line, closed by a checksum line:
 *
 *     shmrun-manifest 1
 *     epoch 7
 *     time 1764453000123456789
 *     fingerprint 0000000000000000
 *     job wordcount
 *     vnodes 256
 *     workers 2
 *     stage count count 4 none
 *     file count.0.state 123456 89abcdef01234567 120000 0
 *     end 0123456789abcdef          (XXH64 of every byte above this line)
 *
 * Rejected: a binary MANIFEST — it is small, read by people (`shmrun ckpt
 * list`, a damaged run's post-mortem) and closed by a checksum line anyway;
 * a MANIFEST per state file — one rename must commit the whole epoch.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "ckpt_io.h"
#include "hosts.h"
#include "manifest.h"
#include "shmrun/runtime.h"
#include "text.h"
#include "util.h"

#define MANIFEST "MANIFEST"
#define MANIFEST_TMP "MANIFEST.tmp"
#define MANIFEST_VERSION 1

/* ---- names ------------------------------------------------------------------- */

void shmrun_ckpt_path(const char *dir, uint64_t epoch, char *buf, size_t len)
{
	snprintf(buf, len, "%s/ckpt-%" PRIu64, dir, epoch);
}

void shmrun_ckpt_file_name(const struct shmrun_plan *plan, uint32_t task, char *buf, size_t len)
{
	const struct shmrun_plan_task *t = &plan->tasks[task];

	snprintf(buf, len, "%s.%u.state", plan->job->stages[t->stage].name, t->instance);
}

static int rule_of(const char *s)
{
	for (int r = SHMRUN_PW_NONE; r <= SHMRUN_PW_UNION; r++)
		if (strcmp(s, shmrun_pw_rule_name(r)) == 0)
			return r;
	return SHMRUN_PW_NONE;
}

/* ---- MANIFEST ------------------------------------------------------------------ */

/* The MANIFEST text of epoch @e of @job with these files. */
static int manifest_text(const struct shmrun_job *job, uint64_t e, bool finished,
			 const struct shmrun_manifest_file *files, uint32_t nfiles,
			 struct shmrun_text *t)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	shmrun_text_printf(t, "shmrun-manifest %d\nepoch %" PRIu64 "\ntime %" PRId64 "\n",
			   MANIFEST_VERSION, e, (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec);
	shmrun_text_printf(t, "fingerprint %016" PRIx64 "\njob %s\nvnodes %u\nworkers %u\n",
			   shmrun_fingerprint(job), job->name, job->vnodes, job->workers);
	if (finished)
		shmrun_text_printf(t, "finished 1\n");
	{
		char *topo, *save = NULL;
		size_t tlen;

		if (shmrun_fingerprint_text(job, &topo, &tlen))
			return -ENOMEM;
		for (char *l = strtok_r(topo, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
			shmrun_text_printf(t, "topo %s\n", l);
		free(topo);
	}
	for (uint32_t s = 0; s < job->nstages; s++)
		shmrun_text_printf(t, "stage %s %s %u %s\n", job->stages[s].name,
				   job->stages[s].op->name, job->stages[s].width,
				   shmrun_pw_rule_name(job->stages[s].op->pw_rule));
	for (uint32_t k = 0; k < nfiles; k++)
		shmrun_text_printf(t, "file %s %" PRIu64 " %016" PRIx64 " %" PRIu64 " %" PRIu64 "\n",
				   files[k].name, files[k].size, files[k].xxh64, files[k].kv_bytes,
				   files[k].pw_bytes);
	if (!t->err) /* the closing checksum covers every line above */
		shmrun_text_printf(t, "end %016" PRIx64 "\n", (uint64_t)XXH64(t->p, t->len, 0));
	return t->err;
}

int shmrun_ckpt_write_manifest(const struct shmrun_job *job, uint64_t e, bool finished,
			       const struct shmrun_manifest_file *files, uint32_t nfiles)
{
	struct shmrun_ckpt_writer wr;
	struct shmrun_text t = {0};
	char path[PATH_MAX], why[256];
	int dirfd = -1, err;

	shmrun_ckpt_path(job->checkpoint_dir, e, path, sizeof(path));
	err = manifest_text(job, e, finished, files, nfiles, &t);
	if (err)
		goto out;
	err = shmrun_ckpt_writer_init(&wr, 8, why, sizeof(why));
	if (err)
		goto out;
	dirfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dirfd < 0) {
		err = -errno;
		goto out_writer;
	}
	unlinkat(dirfd, MANIFEST_TMP, 0);
	err = shmrun_ckpt_write_bytes(&wr, dirfd, MANIFEST_TMP, t.p, t.len, SHMRUN_CKPT_TRUNC);
	if (!err && renameat(dirfd, MANIFEST_TMP, dirfd, MANIFEST) < 0)
		err = -errno;
	if (!err)
		err = shmrun_ckpt_fsync_dir(dirfd);
out_writer:
	shmrun_ckpt_writer_close(&wr);
out:
	if (dirfd >= 0)
		close(dirfd);
	free(t.p);
	if (err)
		shmrun_log(SHMRUN_LOG_ERROR, "epoch %" PRIu64 ": writing %s/" MANIFEST ": %s", e,
			   path, strerror(-err));
	return err;
}

static int read_manifest_at(int dirfd, uint64_t epoch, struct shmrun_manifest *m, char *why,
			    size_t whylen);

/*
 * Whether @name is a file the runtime writes into a ckpt-N directory:
 * MANIFEST, MANIFEST.tmp, or a state file "<stage>.<instance>.state".
 */
static bool ckpt_name_is_ours(const char *name)
{
	size_t n = strlen(name);
	const char *end, *q;

	if (!strcmp(name, MANIFEST) || !strcmp(name, MANIFEST_TMP))
		return true;
	if (n < 9 || strcmp(name + n - 6, ".state"))
		return false;
	end = name + n - 6;
	for (q = end; q > name && q[-1] >= '0' && q[-1] <= '9'; q--)
		;
	return q < end && q > name + 1 && q[-1] == '.';
}

/*
 * Retire checkpoint_dir/ckpt-<epoch>: remove the files the runtime wrote
 * there and the directory, and nothing else. The directory is opened with
 * O_NOFOLLOW relative to checkpoint_dir and every entry is judged with
 * fstatat(AT_SYMLINK_NOFOLLOW) first: a ckpt-N that is a symlink (or not a
 * directory), or that holds anything but regular files of ours (state files,
 * MANIFEST, MANIFEST.tmp), is left untouched. MANIFEST goes first and the
 * directory is fsynced, so the checkpoint becomes incomplete atomically
 * before any state file it names disappears (a concurrent `ckpt verify` or
 * restore sees either a whole checkpoint or an incomplete directory).
 * Return: 0 (removed, or already gone); -ELOOP (a symlink or not a
 * directory); -EEXIST (holds something the runtime did not make; @why names
 * it); -ENOTEMPTY (a file appeared meanwhile: a late writer removes it); -errno.
 */
int shmrun_ckpt_remove(const char *dir, uint64_t epoch, char *why, size_t whylen)
{
	char name[40];
	int dfd, fd, err = 0;
	DIR *d;
	struct dirent *de;

	if (whylen)
		why[0] = '\0';
	snprintf(name, sizeof(name), "ckpt-%" PRIu64, epoch);
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return errno == ENOENT ? 0 : -errno;
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		err = errno == ENOENT ? 0 : errno == ELOOP || errno == ENOTDIR ? -ELOOP : -errno;
		if (err == -ELOOP)
			snprintf(why, whylen, "%s is a symbolic link or not a directory", name);
		close(dfd);
		return err;
	}
	d = fdopendir(dup(fd));
	if (!d) {
		err = -errno;
		goto out;
	}
	while ((de = readdir(d))) {
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT)
				continue;
			err = -errno;
			break;
		}
		if (!S_ISREG(st.st_mode) || !ckpt_name_is_ours(de->d_name)) {
			snprintf(why, whylen, "%s/%.200s was not made by shmrun", name, de->d_name);
			err = -EEXIST;
			break;
		}
	}
	if (!err) {
		/* the commit undone first: from here on it is an incomplete epoch */
		if (unlinkat(fd, MANIFEST, 0) == 0)
			shmrun_ckpt_fsync_dir(fd);
		rewinddir(d);
		while ((de = readdir(d)))
			if (ckpt_name_is_ours(de->d_name))
				unlinkat(fd, de->d_name, 0);
		if (unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
			err = -errno;
	}
	closedir(d);
out:
	close(fd);
	close(dfd);
	return err;
}

/*
 * Whether checkpoint_dir/ckpt-<epoch> looks restorable, cheaply: a real
 * directory (not a symlink) whose MANIFEST parses and whose every state file
 * exists as a regular file of the size MANIFEST gives (no checksums read).
 */
bool shmrun_ckpt_looks_good(const char *dir, uint64_t epoch)
{
	return shmrun_ckpt_looks_good_scoped(dir, epoch, NULL);
}

bool shmrun_ckpt_looks_good_scoped(const char *dir, uint64_t epoch,
				   const struct shmrun_ckpt_scope *s)
{
	struct shmrun_manifest m;
	char path[PATH_MAX], why[300];
	bool good, parsed;
	int fd;

	shmrun_ckpt_path(dir, epoch, path, sizeof(path));
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return false;
	good = parsed = read_manifest_at(fd, epoch, &m, why, sizeof(why)) == 0;
	for (uint32_t i = 0; good && i < m.nfiles; i++) {
		struct stat st;

		if (!shmrun_ckpt_scope_has(s, m.files[i].stage, m.files[i].instance))
			continue; /* another host's file: not looked at */
		good = fstatat(fd, m.files[i].name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		       S_ISREG(st.st_mode) && (uint64_t)st.st_size == m.files[i].size;
	}
	if (parsed)
		shmrun_manifest_free(&m);
	close(fd);
	return good;
}

/* ---- reading checkpoints ----------------------------------------------------------- */

void shmrun_manifest_free(struct shmrun_manifest *m)
{
	free(m->topology);
	free(m->stages);
	free(m->files);
	memset(m, 0, sizeof(*m));
}

static int cmp_desc(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? 1 : x > y ? -1 : 0;
}

int shmrun_ckpt_list(const char *dir, uint64_t **epochs)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	uint64_t *v = NULL;
	size_t cap = 0;
	int n = 0;

	*epochs = NULL;
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char *end;
		unsigned long long e;

		if (strncmp(de->d_name, "ckpt-", 5) != 0 || !de->d_name[5])
			continue;
		errno = 0;
		e = strtoull(de->d_name + 5, &end, 10);
		if (*end || errno || e == 0)
			continue;
		if (shmrun_grow(&v, &cap, (size_t)n + 1, sizeof(*v), 16)) {
			free(v);
			closedir(d);
			return -ENOMEM;
		}
		v[n++] = e;
	}
	closedir(d);
	if (n > 1)
		qsort(v, (size_t)n, sizeof(*v), cmp_desc);
	*epochs = v;
	return n;
}

int shmrun_manifest_parse(char *text, size_t len, struct shmrun_manifest *m, char *why,
			  size_t whylen)
{
	char *end_line = NULL, *save = NULL;
	uint64_t sum;

	memset(m, 0, sizeof(*m));
	/* the checksum line closes the file */
	for (char *p = text + len; p > text; p--)
		if (p[-1] == '\n' && strncmp(p, "end ", 4) == 0) {
			end_line = p;
			break;
		}
	if (!end_line || sscanf(end_line, "end %" SCNx64, &sum) != 1) {
		snprintf(why, whylen, "MANIFEST has no end line (truncated?)");
		return -EBADMSG;
	}
	if (XXH64(text, (size_t)(end_line - text), 0) != sum) {
		snprintf(why, whylen, "MANIFEST checksum mismatch");
		return -EBADMSG;
	}
	*end_line = 0;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char a[160];
		unsigned w;
		int r = 0;

		if (sscanf(line, "shmrun-manifest %u", &m->version) == 1)
			continue;
		if (strncmp(line, "topo ", 5) == 0) {
			size_t have = m->topology ? strlen(m->topology) : 0, add = strlen(line + 5);
			char *nt = realloc(m->topology, have + add + 2);

			if (!nt)
				return -ENOMEM;
			memcpy(nt + have, line + 5, add);
			nt[have + add] = '\n';
			nt[have + add + 1] = 0;
			m->topology = nt;
			continue;
		}
		if (strcmp(line, "finished 1") == 0) {
			m->finished = true;
			continue;
		}
		if (sscanf(line, "epoch %" SCNu64, &m->epoch) == 1 ||
		    sscanf(line, "time %" SCNd64, &m->time_ns) == 1 ||
		    sscanf(line, "fingerprint %" SCNx64, &m->fingerprint) == 1 ||
		    sscanf(line, "job %71s", m->job) == 1 || sscanf(line, "vnodes %u", &m->vnodes) == 1 ||
		    sscanf(line, "workers %u", &m->workers) == 1)
			continue;
		if (strncmp(line, "stage ", 6) == 0) {
			struct shmrun_manifest_stage st = {0}, *ns;
			char rule[16];

			r = sscanf(line, "stage %71s %39s %u %15s", st.name, st.op, &st.width, rule);
			if (r != 4)
				goto bad;
			st.rule = rule_of(rule);
			ns = realloc(m->stages, (m->nstages + 1) * sizeof(*ns));
			if (!ns)
				return -ENOMEM;
			m->stages = ns;
			m->stages[m->nstages++] = st;
			continue;
		}
		if (strncmp(line, "file ", 5) == 0) {
			struct shmrun_manifest_file f = {0}, *nf;
			char *dot;

			r = sscanf(line, "file %159s %" SCNu64 " %" SCNx64 " %" SCNu64 " %" SCNu64,
				   f.name, &f.size, &f.xxh64, &f.kv_bytes, &f.pw_bytes);
			if (r != 5 || strchr(f.name, '/'))
				goto bad;
			snprintf(a, sizeof(a), "%s", f.name);
			dot = strrchr(a, '.'); /* ".state" */
			if (dot)
				*dot = 0;
			dot = strrchr(a, '.');
			if (!dot || sscanf(dot + 1, "%u", &w) != 1)
				goto bad;
			*dot = 0;
			if (strlen(a) >= sizeof(f.stage))
				goto bad;
			memcpy(f.stage, a, strlen(a) + 1);
			f.instance = w;
			nf = realloc(m->files, (m->nfiles + 1) * sizeof(*nf));
			if (!nf)
				return -ENOMEM;
			m->files = nf;
			m->files[m->nfiles++] = f;
			continue;
		}
bad:
		snprintf(why, whylen, "MANIFEST line '%.60s' is not understood", line);
		return -EBADMSG;
	}
	if (m->version != MANIFEST_VERSION || !m->epoch) {
		snprintf(why, whylen, "MANIFEST version %u or epoch missing", m->version);
		return -EBADMSG;
	}
	return 0;
}

/* Read and parse the MANIFEST of an open checkpoint directory. */
static int read_manifest_at(int dirfd, uint64_t epoch, struct shmrun_manifest *m, char *why,
			    size_t whylen)
{
	char *text = NULL;
	struct stat st;
	int fd, err;

	memset(m, 0, sizeof(*m));
	fd = openat(dirfd, MANIFEST, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		snprintf(why, whylen, err == -ENOENT ? "no MANIFEST" : "MANIFEST: %s",
			 strerror(errno));
		return err;
	}
	if (fstat(fd, &st) < 0 || st.st_size > (64 << 20) ||
	    !(text = malloc((size_t)st.st_size + 1)) ||
	    pread(fd, text, (size_t)st.st_size, 0) != st.st_size) {
		snprintf(why, whylen, "MANIFEST cannot be read");
		free(text);
		close(fd);
		return -EIO;
	}
	close(fd);
	text[st.st_size] = 0;
	err = shmrun_manifest_parse(text, (size_t)st.st_size, m, why, whylen);
	free(text);
	if (!err && m->epoch != epoch) {
		snprintf(why, whylen, "MANIFEST says epoch %" PRIu64, m->epoch);
		err = -EBADMSG;
	}
	if (err)
		shmrun_manifest_free(m);
	return err;
}

static int open_ckpt_dir(const char *dir, uint64_t epoch, char *why, size_t whylen)
{
	char path[PATH_MAX];
	int dirfd;

	shmrun_ckpt_path(dir, epoch, path, sizeof(path));
	dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0) {
		snprintf(why, whylen, "%s", strerror(errno));
		return -errno;
	}
	return dirfd;
}

int shmrun_ckpt_read_manifest(const char *dir, uint64_t epoch, struct shmrun_manifest *m,
			      char *why, size_t whylen)
{
	int dirfd = open_ckpt_dir(dir, epoch, why, whylen), err;

	if (dirfd < 0)
		return dirfd;
	err = read_manifest_at(dirfd, epoch, m, why, whylen);
	close(dirfd);
	return err;
}

int shmrun_ckpt_verify(const char *dir, uint64_t epoch, struct shmrun_manifest *out, char *why,
		       size_t whylen)
{
	return shmrun_ckpt_verify_scoped(dir, epoch, NULL, out, why, whylen);
}

/*
 * Check every state file @m names that scope @s has (in @dirfd): size and
 * checksum. A missing file is damage, or, with @missing, counted there and
 * skipped (a host's per_host directory: check_here()); @bytes (may be NULL)
 * gets the sizes of the files checked. Return: 0; -EBADMSG with @why naming
 * the file.
 */
static int verify_files(int dirfd, const struct shmrun_manifest *m,
			const struct shmrun_ckpt_scope *s, uint32_t *missing, uint64_t *bytes,
			char *why, size_t whylen)
{
	for (uint32_t i = 0; i < m->nfiles; i++) {
		void *data = NULL;
		size_t len;
		char fwhy[200];
		int err;

		if (!shmrun_ckpt_scope_has(s, m->files[i].stage, m->files[i].instance))
			continue; /* another host's file: that host verifies it */
		err = shmrun_ckpt_read_file(dirfd, m->files[i].name, m->files[i].size,
					    m->files[i].xxh64, &data, &len, fwhy, sizeof(fwhy));
		free(data);
		if (err == -ENOENT && missing) {
			(*missing)++;
			continue;
		}
		if (err == -ENOENT) {
			snprintf(why, whylen, "%s named in MANIFEST is missing", m->files[i].name);
			return -EBADMSG;
		}
		if (err) {
			snprintf(why, whylen, "%s: %s", m->files[i].name, fwhy);
			return -EBADMSG;
		}
		if (bytes)
			*bytes += m->files[i].size;
	}
	return 0;
}

int shmrun_ckpt_verify_scoped(const char *dir, uint64_t epoch, const struct shmrun_ckpt_scope *s,
			      struct shmrun_manifest *out, char *why, size_t whylen)
{
	struct shmrun_manifest m;
	int dirfd = open_ckpt_dir(dir, epoch, why, whylen), err;

	if (dirfd < 0)
		return dirfd;
	err = read_manifest_at(dirfd, epoch, &m, why, whylen);
	if (!err)
		err = verify_files(dirfd, &m, s, NULL, NULL, why, whylen);
	if (!err && out)
		*out = m;
	else
		shmrun_manifest_free(&m);
	close(dirfd);
	return err;
}

int64_t shmrun_ckpt_select(const char *dir, struct shmrun_manifest *m)
{
	return shmrun_ckpt_select_scoped(dir, NULL, m);
}

static uint32_t partial_hosts(const char *dir, uint64_t epoch);

int64_t shmrun_ckpt_select_scoped(const char *dir, const struct shmrun_ckpt_scope *s,
				  struct shmrun_manifest *m)
{
	uint64_t *epochs;
	int n = shmrun_ckpt_list(dir, &epochs), committed = 0;
	int64_t chosen = -EBADMSG;
	uint32_t hosts = s && s->plan && s->workers_per_host ? s->plan->workers / s->workers_per_host
							     : 1;
	uint32_t other_hosts = 0; /* a checkpoint of that many hosts, partly here */
	uint64_t other_epoch = 0;

	if (n == -ENOENT || n == 0) {
		free(epochs);
		return 0;
	}
	if (n < 0) {
		shmrun_log(SHMRUN_LOG_ERROR, "checkpoint_dir %s cannot be read: %s", dir,
			   strerror(-n));
		return n;
	}
	for (int i = 0; i < n; i++) {
		char why[300];
		int err = shmrun_ckpt_verify_scoped(dir, epochs[i], s, m, why, sizeof(why));

		if (!err) {
			chosen = (int64_t)epochs[i];
			break;
		}
		/* Without a MANIFEST nothing was ever committed (the rename is the
		 * commit): an incomplete epoch, not a checkpoint. The launcher
		 * removes those after the selection (shmrun_ckpt_remove_incomplete()
		 * names them), so they are not reported one by one here. */
		committed += err != -ENOENT;
		if (err == -EBADMSG && !other_hosts) { /* damaged, or another host's files */
			uint32_t h = partial_hosts(dir, epochs[i]);

			if (h > 1 && h != hosts) {
				other_hosts = h;
				other_epoch = epochs[i];
			}
		}
		shmrun_log(err == -ENOENT ? SHMRUN_LOG_DEBUG : SHMRUN_LOG_WARN,
			   "checkpoint %s/ckpt-%" PRIu64 " skipped: %s", dir, epochs[i], why);
	}
	if (chosen < 0 && other_hosts) {
		/* not damage: one host's directory of a per_host checkpoint */
		shmrun_log(SHMRUN_LOG_ERROR,
			   "%s/ckpt-%" PRIu64 " is a checkpoint of %u hosts with only some of its "
			   "state files here (checkpoint_layout = per_host: each host's directory "
			   "holds its own), and this run has %u host%s: it cannot restore it. Run "
			   "the job on %u hosts again, or gather the newest ckpt-<epoch> of every "
			   "host into one directory and --rescale there with checkpoint_layout = "
			   "shared (docs/checkpoints.md, \"Rescaling across hosts\"); nothing was "
			   "restored",
			   dir, other_epoch, other_hosts, hosts, hosts == 1 ? "" : "s", other_hosts);
		free(epochs);
		return -ESTALE;
	}
	if (chosen < 0 && committed == 0)
		chosen = 0; /* only incomplete epochs: start from empty state */
	else if (chosen < 0)
		shmrun_log(SHMRUN_LOG_ERROR,
			   "%s holds %d checkpoint%s but none verifies (see above); nothing was "
			   "restored. Move the directory aside, or start from empty state with "
			   "STREAM_RESET_STATE=1 (which moves them aside for you)",
			   dir, committed, committed == 1 ? "" : "s");
	free(epochs);
	return chosen;
}

/* Whether checkpoint_dir/ckpt-<epoch> has a MANIFEST (was committed). */
static bool has_manifest(const char *dir, uint64_t epoch)
{
	char path[PATH_MAX + 20];
	struct stat st;

	shmrun_ckpt_path(dir, epoch, path, sizeof(path) - 20);
	strcat(path, "/" MANIFEST);
	return lstat(path, &st) == 0 || errno != ENOENT;
}

int shmrun_ckpt_remove_incomplete(const char *dir)
{
	return shmrun_ckpt_remove_incomplete_below(dir, UINT64_MAX);
}

int shmrun_ckpt_remove_incomplete_below(const char *dir, uint64_t bound)
{
	/* a launcher reports each directory it must leave alone once, not at
	 * every restart */
	static uint64_t *told;
	static size_t ntold;
	uint64_t *epochs;
	int n = shmrun_ckpt_list(dir, &epochs), removed = 0;
	char names[200];
	size_t off = 0;

	if (n <= 0) {
		free(epochs);
		return n == -ENOENT ? 0 : n;
	}
	names[0] = '\0';
	for (int i = n - 1; i >= 0; i--) { /* oldest first, as the names read */
		char why[300];
		bool seen = false;
		int err;

		if (epochs[i] >= bound || has_manifest(dir, epochs[i]))
			continue;
		err = shmrun_ckpt_remove(dir, epochs[i], why, sizeof(why));
		if (err == -EEXIST || err == -ELOOP) {
			uint64_t *nt;

			for (size_t k = 0; k < ntold; k++)
				seen |= told[k] == epochs[i];
			if (seen)
				continue;
			shmrun_log(SHMRUN_LOG_WARN,
				   "%s/ckpt-%" PRIu64 " has no MANIFEST but is left alone: %s. "
				   "shmrun removes only files it made, never through a symlink; "
				   "new epochs number past it. Move it out of checkpoint_dir",
				   dir, epochs[i], why);
			nt = realloc(told, (ntold + 1) * sizeof(*told));
			if (nt) {
				told = nt;
				told[ntold++] = epochs[i];
			}
			continue;
		}
		if (err)
			continue;
		if (removed < 6 && off < sizeof(names))
			off += (size_t)snprintf(names + off, sizeof(names) - off, "%sckpt-%" PRIu64,
						removed ? ", " : "", epochs[i]);
		removed++;
	}
	free(epochs);
	if (removed)
		shmrun_log(SHMRUN_LOG_INFO,
			   "removed %d incomplete checkpoint director%s of %s (no MANIFEST: "
			   "aborted or interrupted epochs, never committed): %s%s",
			   removed, removed == 1 ? "y" : "ies", dir, names,
			   removed > 6 ? ", ..." : "");
	return removed;
}

int shmrun_ckpt_check_topology(const struct shmrun_manifest *m, const struct shmrun_job *job,
			       char *why, size_t whylen)
{
	char *now = NULL, *diff = NULL;
	size_t len;

	if (m->fingerprint == shmrun_fingerprint(job))
		return 0;
	if (shmrun_fingerprint_text(job, &now, &len) == 0 && m->topology &&
	    shmrun_fingerprint_diff(m->topology, now, &diff) == 0)
		snprintf(why, whylen, "%s", diff);
	else
		snprintf(why, whylen, "fingerprint %016" PRIx64 " → %016" PRIx64, m->fingerprint,
			 shmrun_fingerprint(job));
	free(now);
	free(diff);
	return -ESTALE;
}

/* ---- the ckpt CLI -------------------------------------------------------------- */

/*
 * After a failed check of ckpt-<epoch> (@err): whether it was retired
 * meanwhile rather than damaged or incomplete — the directory is gone, or it
 * had a MANIFEST (@err is not -ENOENT) that is gone now. Retention removes
 * MANIFEST first (shmrun_ckpt_remove()), so a checkpoint being retired reads as
 * one whose files vanish under a MANIFEST that then vanishes too.
 */
static bool ckpt_retired(const char *dir, uint64_t epoch, int err)
{
	char path[PATH_MAX + 20];
	struct stat st;

	shmrun_ckpt_path(dir, epoch, path, sizeof(path) - 20);
	if (lstat(path, &st) < 0 && errno == ENOENT)
		return true;
	strcat(path, "/" MANIFEST);
	return err != -ENOENT && lstat(path, &st) < 0 && errno == ENOENT;
}

/*
 * Whether @dir/.lock is held (flock) by a live run, read from /proc/locks so
 * that the check itself takes no lock (a run starting meanwhile must not be
 * refused because of it). Return: the holder's pid, or 0.
 */
static long ckpt_lock_holder(const char *dir)
{
	char path[PATH_MAX + 8], line[256];
	struct stat st;
	long pid = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/.lock", dir);
	if (lstat(path, &st) < 0 || !(f = fopen("/proc/locks", "re")))
		return 0;
	while (!pid && fgets(line, sizeof(line), f)) {
		unsigned maj, min;
		unsigned long long ino;
		long p;
		char kind[16];

		if (sscanf(line, "%*[^:]: %15s %*s %*s %ld %x:%x:%llu", kind, &p, &maj, &min,
			   &ino) == 5 &&
		    !strcmp(kind, "FLOCK") && ino == (unsigned long long)st.st_ino &&
		    maj == major(st.st_dev) && min == minor(st.st_dev))
			pid = p;
	}
	fclose(f);
	return pid;
}

/*
 * What `shmrun ckpt list|verify` reports, collected once (collect()) and then
 * printed as text (print_text()) or JSON (print_json()): the two printers
 * read only this, so they cannot disagree.
 */
struct ckpt_entry {
	uint64_t epoch;
	int status;    /* 0 ok; -ENOENT incomplete; -ESTALE retired; else damaged */
	char why[300]; /* the reason when status != 0 */
	struct shmrun_manifest m; /* parsed when status == 0, else zeroed */
	uint64_t bytes;           /* the sum of its state files' sizes (those here) */
	uint32_t hosts;           /* > 1: a multi-host checkpoint with files elsewhere */
	uint32_t here;            /* then: how many of m.nfiles are here */
};

struct ckpt_report {
	const char *dir;
	int n;                    /* entries, newest first */
	struct ckpt_entry *e;
	int chosen;               /* the entry a restore would use, or -1 */
	int damaged, incomplete;  /* counts */
	long holder;              /* pid of a live run holding dir/.lock, or 0 (verify) */
};

/* The state of stage @s of @m: key-bound and per-worker bytes, the largest per-worker file. */
static void stage_sizes(const struct shmrun_manifest *m, uint32_t s, uint64_t *kv, uint64_t *pw,
			uint64_t *pw_max)
{
	*kv = *pw = *pw_max = 0;
	for (uint32_t i = 0; i < m->nfiles; i++)
		if (strcmp(m->files[i].stage, m->stages[s].name) == 0) {
			*kv += m->files[i].kv_bytes;
			*pw += m->files[i].pw_bytes;
			if (m->files[i].pw_bytes > *pw_max)
				*pw_max = m->files[i].pw_bytes;
		}
}

static const char *status_name(int status)
{
	return !status		    ? "ok"
	       : status == -ENOENT ? "incomplete"
	       : status == -ESTALE ? "retired"
				   : "damaged";
}

/* The host count of the members line of @topology ("members ... hosts=H"), 1 without one. */
static uint32_t topology_hosts(const char *topology)
{
	const char *p = topology ? strstr(topology, "members ") : NULL;
	const char *nl = p ? strchr(p, '\n') : NULL;
	const char *h = p ? strstr(p, " hosts=") : NULL;
	unsigned long v;

	if (!h || (nl && h > nl))
		return 1;
	v = strtoul(h + 7, NULL, 10);
	return v > 1 && v <= UINT32_MAX ? (uint32_t)v : 1;
}

/*
 * A checkpoint of H > 1 hosts whose MANIFEST verifies but some of whose state
 * files are not in @dir: with checkpoint_layout = per_host each host's
 * directory holds its own files only. Verify the files that are here (every
 * one must), into @ce (status 0, here < nfiles). Return: true if so; false
 * when it is not such a checkpoint, or a file here is damaged (ce->why then
 * names that file).
 */
static bool check_here(const char *dir, struct ckpt_entry *ce)
{
	char path[PATH_MAX], why[200];
	struct shmrun_manifest m;
	uint32_t missing = 0, hosts;
	uint64_t bytes = 0;
	int dirfd;
	bool ok;

	shmrun_ckpt_path(dir, ce->epoch, path, sizeof(path));
	dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return false;
	if (read_manifest_at(dirfd, ce->epoch, &m, why, sizeof(why))) {
		close(dirfd);
		return false;
	}
	hosts = topology_hosts(m.topology);
	/* a damaged file here: ce->why names it, not another host's file */
	ok = hosts > 1 && verify_files(dirfd, &m, NULL, &missing, &bytes, ce->why,
				       sizeof(ce->why)) == 0;
	close(dirfd);
	if (!ok || missing == 0 || missing == m.nfiles) {
		shmrun_manifest_free(&m);
		return false;
	}
	ce->status = 0;
	ce->why[0] = '\0';
	ce->m = m;
	ce->hosts = hosts;
	ce->here = m.nfiles - missing;
	ce->bytes = bytes;
	return true;
}

/* The host count of ckpt-@epoch of @dir if check_here() finds it a
 * checkpoint of several hosts with only some of its files here; else 0. */
static uint32_t partial_hosts(const char *dir, uint64_t epoch)
{
	struct ckpt_entry ce = {.epoch = epoch};
	uint32_t h = check_here(dir, &ce) ? ce.hosts : 0;

	shmrun_manifest_free(&ce.m);
	return h;
}

static void check_one(const char *dir, struct ckpt_entry *ce)
{
	ce->status = shmrun_ckpt_verify(dir, ce->epoch, &ce->m, ce->why, sizeof(ce->why));
	/* damaged, or a host's per_host directory (check_here() tells) */
	if (ce->status == -EBADMSG && check_here(dir, ce))
		return;
	if (ce->status && ckpt_retired(dir, ce->epoch, ce->status)) {
		/* retention retired it during the check (MANIFEST goes first):
		 * neither damaged nor incomplete, just no longer there */
		ce->status = -ESTALE;
		snprintf(ce->why, sizeof(ce->why),
			 "removed during the check (retired by checkpoint_retain)");
	}
	if (ce->status) {
		memset(&ce->m, 0, sizeof(ce->m));
		return;
	}
	for (uint32_t i = 0; i < ce->m.nfiles; i++)
		ce->bytes += ce->m.files[i].size;
}

static void report_free(struct ckpt_report *r)
{
	for (int i = 0; i < r->n; i++)
		shmrun_manifest_free(&r->e[i].m);
	free(r->e);
}

/* Verify every checkpoint of @dir into @r. Return: 0, or -errno (@dir unreadable, no memory). */
static int collect(const char *dir, bool verify, struct ckpt_report *r)
{
	uint64_t *epochs;
	int n = shmrun_ckpt_list(dir, &epochs);

	memset(r, 0, sizeof(*r));
	r->dir = dir;
	r->chosen = -1;
	if (n < 0)
		return n;
	r->e = calloc((size_t)n + 1, sizeof(*r->e));
	if (!r->e) {
		free(epochs);
		return -ENOMEM;
	}
	r->n = n;
	for (int i = 0; i < n; i++) {
		struct ckpt_entry *ce = &r->e[i];

		ce->epoch = epochs[i];
		check_one(dir, ce);
		if (!ce->status && r->chosen < 0)
			r->chosen = i;
		r->damaged += ce->status && ce->status != -ENOENT && ce->status != -ESTALE;
		r->incomplete += ce->status == -ENOENT;
	}
	free(epochs);
	if (verify)
		r->holder = ckpt_lock_holder(dir);
	return 0;
}

/* Whether entry @i is named among the skipped (@want_incomplete: incomplete ones, else damaged). */
static bool named(const struct ckpt_report *r, int i, bool want_incomplete)
{
	int st = r->e[i].status;

	return st && st != -ESTALE && (st == -ENOENT) == want_incomplete;
}

/* "ckpt-3, ckpt-5" for the entries of [from, to) that named() picks, oldest first. */
static void name_epochs(char *buf, size_t len, const struct ckpt_report *r, int from, int to,
			bool want_incomplete)
{
	size_t off = 0;
	int k = 0;

	buf[0] = '\0';
	for (int i = to - 1; i >= from && off < len; i--) { /* oldest first */
		if (!named(r, i, want_incomplete))
			continue;
		if (k++ == 6) {
			snprintf(buf + off, len - off, ", ...");
			break;
		}
		off += (size_t)snprintf(buf + off, len - off, "%sckpt-%" PRIu64, off ? ", " : "",
					r->e[i].epoch);
	}
}

/* "2026-11-29T21:48:22Z" of @ns since the epoch into @buf. */
static void utc_time(int64_t ns, char *buf, size_t len)
{
	time_t secs = (time_t)(ns / 1000000000);
	struct tm tm;

	gmtime_r(&secs, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void print_entry(const struct ckpt_entry *ce, FILE *out)
{
	char when[40];

	if (ce->status) {
		fprintf(out, "ckpt-%-8" PRIu64 " %-20s %10s  %s: %s\n", ce->epoch, "-", "-",
			status_name(ce->status), ce->why);
		return;
	}
	utc_time(ce->m.time_ns, when, sizeof(when));
	fprintf(out, "ckpt-%-8" PRIu64 " %-20s %10" PRIu64 "  %s ", ce->epoch, when, ce->bytes,
		status_name(ce->status));
	for (uint32_t s = 0; s < ce->m.nstages; s++) {
		uint64_t kv, pw, pw_max;

		stage_sizes(&ce->m, s, &kv, &pw, &pw_max);
		fprintf(out, " %s(w%u): key-bound %" PRIu64 " B, per-worker %" PRIu64
			     " B (max %" PRIu64 " B/instance)%s",
			ce->m.stages[s].name, ce->m.stages[s].width, kv, pw, pw_max,
			s + 1 < ce->m.nstages ? ";" : "");
	}
	if (ce->hosts > 1)
		fprintf(out, "; %u of %u state files here (hosts = %u)", ce->here, ce->m.nfiles,
			ce->hosts);
	fputc('\n', out);
}

/* The exit status of verify. */
static int verify_status(const struct ckpt_report *r)
{
	return r->chosen >= 0 && !r->damaged ? 0 : 1;
}

/*
 * Every checkpoint, then (verify) what a restore would do — the newest one
 * that verifies, as shmrun_ckpt_select() picks it — and why newer ones would
 * be passed over.
 */
static void print_text(const struct ckpt_report *r, bool verify, FILE *out)
{
	const char *dir = r->dir;
	char names[160];

	if (r->n == 0)
		fprintf(out, "%s: no checkpoints\n", dir);
	else
		fprintf(out, "%-13s %-20s %10s  %s\n", "epoch", "time (UTC)", "bytes",
			"status and state per stage");
	for (int i = 0; i < r->n; i++)
		print_entry(&r->e[i], out);
	if (!verify)
		return;
	if (r->holder)
		fprintf(out,
			"%s: a live run (pid %ld) holds %s/.lock: checkpoints are being "
			"added and retired during the check; a newer incomplete one may be "
			"the epoch in flight\n",
			dir, r->holder, dir);
	if (r->n == 0)
		return;
	for (int i = 0; i < r->n; i++) {
		if (!r->e[i].hosts)
			continue;
		fprintf(out,
			"%s: a checkpoint of %u hosts with only some of its state files here: "
			"with checkpoint_layout = per_host each host's checkpoint_dir holds its "
			"own (verify the others there; a run of each host checks its own files); "
			"with one shared checkpoint_dir the others are lost\n",
			dir, r->e[i].hosts);
		break;
	}
	if (r->chosen >= 0) {
		fprintf(out, "%s: a restore would use ckpt-%" PRIu64 ", the newest that verifies\n",
			dir, r->e[r->chosen].epoch);
		name_epochs(names, sizeof(names), r, 0, r->chosen, true);
		if (*names)
			fprintf(out,
				"%s: newer %s incomplete (no MANIFEST: an aborted or interrupted "
				"epoch, never committed); a restore skips and removes it\n",
				dir, names);
		name_epochs(names, sizeof(names), r, 0, r->chosen, false);
		if (*names)
			fprintf(out, "%s: newer %s damaged; a restore skips it\n", dir, names);
	} else if (r->damaged) {
		fprintf(out,
			"%s: no checkpoint verifies; a restore would refuse to start (move the "
			"directory aside, or STREAM_RESET_STATE=1)\n",
			dir);
	} else {
		fprintf(out,
			"%s: no complete checkpoint (%d incomplete: no MANIFEST); a restore would "
			"start from empty state\n",
			dir, r->incomplete);
	}
	name_epochs(names, sizeof(names), r, r->chosen < 0 ? 0 : r->chosen + 1, r->n, false);
	if (r->chosen >= 0 && *names)
		fprintf(out, "%s: older %s damaged\n", dir, names);
	if (r->damaged)
		fprintf(out, "%s: %d damaged checkpoint%s: verify fails\n", dir, r->damaged,
			r->damaged == 1 ? "" : "s");
}

/* @obj.@key = @val, which it takes over (also on failure). Return: false if out of memory. */
static bool put(json_t *obj, const char *key, json_t *val)
{
	return val && json_object_set_new(obj, key, val) == 0;
}

static bool entry_json(const struct ckpt_entry *ce, json_t *o)
{
	char name[32], when[40];
	json_t *stages = NULL;

	snprintf(name, sizeof(name), "ckpt-%" PRIu64, ce->epoch);
	if (!put(o, "epoch", json_integer((json_int_t)ce->epoch)) ||
	    !put(o, "name", json_string(name)) ||
	    !put(o, "status", json_string(status_name(ce->status))) ||
	    !put(o, "reason", ce->status ? json_string(ce->why) : json_null()) ||
	    !put(o, "stages", stages = json_array()))
		return false;
	if (ce->status)
		return put(o, "time", json_null()) && put(o, "time_ns", json_null()) &&
		       put(o, "bytes", json_null()) && put(o, "finished", json_null()) &&
		       put(o, "files_here", json_null()) && put(o, "files", json_null());
	utc_time(ce->m.time_ns, when, sizeof(when));
	if (!put(o, "time", json_string(when)) ||
	    !put(o, "time_ns", json_integer((json_int_t)ce->m.time_ns)) ||
	    !put(o, "bytes", json_integer((json_int_t)ce->bytes)) ||
	    !put(o, "finished", json_boolean(ce->m.finished)) ||
	    !put(o, "files_here", json_integer(ce->hosts > 1 ? ce->here : ce->m.nfiles)) ||
	    !put(o, "files", json_integer(ce->m.nfiles)))
		return false;
	for (uint32_t s = 0; s < ce->m.nstages; s++) {
		uint64_t kv, pw, pw_max;
		json_t *so = json_object();

		stage_sizes(&ce->m, s, &kv, &pw, &pw_max);
		if (!so || json_array_append_new(stages, so) ||
		    !put(so, "name", json_string(ce->m.stages[s].name)) ||
		    !put(so, "width", json_integer(ce->m.stages[s].width)) ||
		    !put(so, "key_bound_bytes", json_integer((json_int_t)kv)) ||
		    !put(so, "per_worker_bytes", json_integer((json_int_t)pw)) ||
		    !put(so, "per_worker_max_bytes", json_integer((json_int_t)pw_max)))
			return false;
	}
	return true;
}

/* What a restore would do, as print_text() says it. */
static bool restore_json(const struct ckpt_report *r, json_t *o)
{
	json_t *skipped = NULL;

	if (!put(o, "action",
		 json_string(r->chosen >= 0 ? "use" : r->damaged ? "refuse" : "empty")) ||
	    !put(o, "epoch",
		 r->chosen >= 0 ? json_integer((json_int_t)r->e[r->chosen].epoch) : json_null()) ||
	    !put(o, "skipped_newer", skipped = json_array()))
		return false;
	for (int i = r->chosen - 1; i >= 0; i--) /* oldest first, as the text names them */
		if ((named(r, i, true) || named(r, i, false)) &&
		    json_array_append_new(skipped,
					  json_sprintf("ckpt-%" PRIu64, r->e[i].epoch)))
			return false;
	return true;
}

static int print_json(const struct ckpt_report *r, bool verify, FILE *out)
{
	json_t *root = json_object(), *list = NULL, *restore = NULL;
	int rc = -ENOMEM;

	if (!root || !put(root, "dir", json_string(r->dir)) ||
	    !put(root, "checkpoints", list = json_array()))
		goto out;
	for (int i = 0; i < r->n; i++) {
		json_t *o = json_object();

		if (!o || json_array_append_new(list, o) || !entry_json(&r->e[i], o))
			goto out;
	}
	if (verify &&
	    (!put(root, "restore", restore = json_object()) ||
	     !restore_json(r, restore) ||
	     !put(root, "live_run_pid", r->holder ? json_integer(r->holder) : json_null()) ||
	     !put(root, "damaged", json_integer(r->damaged)) ||
	     !put(root, "incomplete", json_integer(r->incomplete)) ||
	     !put(root, "ok", json_boolean(verify_status(r) == 0))))
		goto out;
	rc = json_dumpf(root, out, JSON_INDENT(2) | JSON_PRESERVE_ORDER) || fputc('\n', out) == EOF
		     ? -EIO
		     : 0;
out:
	json_decref(root);
	return rc;
}

/*
 * Exit status: list 0; verify 0 when a restore would use a checkpoint and no
 * committed checkpoint is damaged; an incomplete directory (no MANIFEST) is
 * not a failure, it never held a checkpoint. 1 when @dir cannot be read.
 */
static int print_all(const char *dir, FILE *out, bool verify, bool json)
{
	struct ckpt_report r;
	int err = collect(dir, verify, &r), rc;

	if (err == -ENOMEM) {
		fprintf(stderr, "shmrun: out of memory\n");
		return 1;
	}
	if (err) {
		fprintf(stderr, "shmrun: cannot read checkpoint directory %s: %s\n", dir,
			strerror(-err));
		return 1;
	}
	if (json) {
		err = print_json(&r, verify, out);
		if (err)
			fprintf(stderr, "shmrun: cannot write the JSON: %s\n", strerror(-err));
	} else {
		print_text(&r, verify, out);
	}
	rc = err ? 1 : verify ? verify_status(&r) : 0;
	report_free(&r);
	return rc;
}

int shmrun_ckpt_print_list(const char *dir, FILE *out, bool json)
{
	return print_all(dir, out, false, json);
}

int shmrun_ckpt_print_verify(const char *dir, FILE *out, bool json)
{
	return print_all(dir, out, true, json);
}
