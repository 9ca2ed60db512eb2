/*
 * runtime/ckpt/hosts.c: checkpoints across hosts — the two layouts of
 * checkpoint_dir, the state files one host checks, the MANIFEST bytes of
 * rank 0's COMMIT and their installation on every other host, retention, and
 * the epoch the hosts agree to restore (ckpt/hosts.h says who calls what).
 *
 * With H hosts the protocol of coordinator.c runs unchanged on rank 0: its
 * worker 0 triggers, every host's snapshot writers write their tasks' state
 * files (io_uring, ckpt_io.c) and report size and XXH64 in their task slot,
 * the gateways mirror those slots into rank 0's control area, and rank 0's
 * MANIFEST child writes the MANIFEST from the slots alone — never from the
 * files, which with checkpoint_layout = per_host are on other machines. The
 * COMMIT that the gateway then sends every host carries the MANIFEST's bytes
 * (shmrun_ckpt_manifest_bytes()); a per_host host installs them
 * (shmrun_ckpt_install_manifest(): temp file, fsync, rename, directory fsync)
 * before it publishes complete_epoch to its own sinks.
 *
 *     checkpoint_layout = shared              checkpoint_layout = per_host
 *     one directory (NFS, CephFS, ...)         checkpoint_dir = /var/ck/{host}
 *       ckpt-7/ a.0.state  (host 0)              host 0: /var/ck/0/ckpt-7/ a.0.state MANIFEST
 *               a.1.state  (host 1)              host 1: /var/ck/1/ckpt-7/ a.1.state MANIFEST
 *               MANIFEST   (rank 0 only)                  (the same MANIFEST bytes)
 *
 * Invariants: a host verifies, and counts toward retention, only the state
 * files of its own tasks (struct shmrun_ckpt_scope) — in a shared directory
 * the others are there, but a host must not depend on another's writes
 * being visible yet; the MANIFEST is always checked whole. A MANIFEST is
 * installed only after it parses, names the epoch of the COMMIT and carries
 * the job's fingerprint, and the installation is atomic (rename).
 *
 * Rejected: every host writing its own MANIFEST of its own files (a
 * checkpoint would then be committed host by host, and a crash between two
 * hosts' renames would leave hosts disagreeing on which epoch is complete
 * with no single commit point to settle it); rank 0 reading the other hosts'
 * state files to write the MANIFEST (per_host: it cannot; shared: it would
 * wait on the filesystem's cache coherence instead of the acknowledgements
 * that already carry size and digest).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_io.h"
#include "hosts.h"
#include "manifest.h"
#include "shmrun/runtime.h"

#define MANIFEST     "MANIFEST"
#define MANIFEST_TMP "MANIFEST.tmp"

/* ---- the layout ----------------------------------------------------------------- */

int shmrun_ckpt_dir_expand(const char *tmpl, uint32_t host, char *out, size_t len)
{
	size_t off = 0;

	for (const char *p = tmpl; *p;) {
		const char *at = strstr(p, "{host}");
		size_t n = at ? (size_t)(at - p) : strlen(p);
		int w;

		if (off + n >= len)
			goto too_long;
		memcpy(out + off, p, n);
		off += n;
		p += n;
		if (!at)
			break;
		w = snprintf(out + off, len - off, "%" PRIu32, host);
		if (w < 0 || (size_t)w >= len - off)
			goto too_long;
		off += (size_t)w;
		p += 6;
	}
	if (off >= len)
		goto too_long;
	out[off] = '\0';
	return 0;
too_long:
	if (len)
		out[0] = '\0';
	return -ENAMETOOLONG;
}

int shmrun_ckpt_set_host(struct shmrun_job *job, uint32_t host)
{
	size_t len;
	char *dir;
	int err;

	if (!job->checkpoint_dir_template) {
		job->host = host;
		return 0;
	}
	len = strlen(job->checkpoint_dir_template) + SHMRUN_CKPT_HOST_DIGITS + 1;
	dir = malloc(len);
	if (!dir)
		return -ENOMEM;
	err = shmrun_ckpt_dir_expand(job->checkpoint_dir_template, host, dir, len);
	if (!err && strlen(dir) > SHMRUN_CKPT_DIR_MAX)
		err = -ENAMETOOLONG;
	if (err) {
		free(dir);
		return err;
	}
	free(job->checkpoint_dir);
	job->checkpoint_dir = dir;
	job->host = host;
	return 0;
}

void shmrun_ckpt_scope_of(const struct shmrun_plan *plan, uint32_t hosts,
			  struct shmrun_ckpt_scope *s)
{
	*s = (struct shmrun_ckpt_scope){0};
	if (!plan || hosts <= 1 || plan->workers < hosts || plan->workers % hosts)
		return;
	s->plan = plan;
	s->host = plan->job->host;
	s->workers_per_host = plan->workers / hosts;
}

bool shmrun_ckpt_scope_has(const struct shmrun_ckpt_scope *s, const char *stage, uint32_t instance)
{
	const struct shmrun_plan *plan = s ? s->plan : NULL;
	const struct shmrun_job *job;

	if (!plan || !s->workers_per_host)
		return true;
	job = plan->job;
	for (uint32_t st = 0; st < job->nstages; st++) {
		if (strcmp(job->stages[st].name, stage) != 0)
			continue;
		if (instance >= job->stages[st].width)
			return true; /* not this topology's: checked, never skipped */
		return plan->tasks[plan->stage_task0[st] + instance].worker / s->workers_per_host ==
		       s->host;
	}
	return true;
}

/* ---- the MANIFEST between hosts ------------------------------------------------------ */

/*
 * Whether @len bytes at @bytes are a MANIFEST of epoch @e with @fingerprint:
 * parsed from a copy (the parser writes into its text). Return: 0; -EBADMSG
 * (why: what is wrong); -ESTALE (another fingerprint); -ENOMEM.
 */
static int check_bytes(const void *bytes, size_t len, uint64_t e, uint64_t fingerprint, char *why,
		       size_t whylen)
{
	struct shmrun_manifest m;
	char *text;
	int err;

	if (len == 0 || memchr(bytes, '\0', len)) {
		snprintf(why, whylen, len ? "MANIFEST holds a NUL byte" : "MANIFEST is empty");
		return -EBADMSG;
	}
	text = malloc(len + 1);
	if (!text)
		return -ENOMEM;
	memcpy(text, bytes, len);
	text[len] = '\0';
	err = shmrun_manifest_parse(text, len, &m, why, whylen);
	free(text);
	if (!err && m.epoch != e) {
		snprintf(why, whylen, "MANIFEST is of epoch %" PRIu64 ", not %" PRIu64, m.epoch, e);
		err = -EBADMSG;
	} else if (!err && m.fingerprint != fingerprint) {
		snprintf(why, whylen,
			 "MANIFEST has fingerprint %016" PRIx64 ", this topology %016" PRIx64
			 " (another topology wrote it)",
			 m.fingerprint, fingerprint);
		err = -ESTALE;
	}
	shmrun_manifest_free(&m);
	return err;
}

int shmrun_ckpt_manifest_bytes(const char *dir, uint64_t e, uint64_t fingerprint, char **bytes,
			       size_t *len, char *why, size_t whylen)
{
	char path[PATH_MAX], reason[300];
	struct stat st;
	char *buf = NULL;
	size_t got = 0;
	int fd, err = 0;

	*bytes = NULL;
	*len = 0;
	shmrun_ckpt_path(dir, e, path, sizeof(path) - sizeof("/" MANIFEST));
	strcat(path, "/" MANIFEST);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		err = -errno;
		snprintf(why, whylen, "%s: %s", path, strerror(-err));
		return err;
	}
	if (fstat(fd, &st) < 0) {
		err = -errno;
		snprintf(why, whylen, "%s: %s", path, strerror(-err));
		goto out;
	}
	if ((uint64_t)st.st_size > SHMRUN_CKPT_MANIFEST_MAX) {
		snprintf(why, whylen, "%s: %lld bytes, more than the %u a MANIFEST may have", path,
			 (long long)st.st_size, SHMRUN_CKPT_MANIFEST_MAX);
		err = -EFBIG;
		goto out;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		err = -ENOMEM;
		snprintf(why, whylen, "%s: %s", path, strerror(ENOMEM));
		goto out;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = pread(fd, buf + got, (size_t)st.st_size - got, (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			err =
			    n < 0 ? -errno : -EBADMSG; /* shrank under us: not a MANIFEST to send */
			snprintf(why, whylen, "%s: %s", path,
				 n < 0 ? strerror(errno) : "shorter than its size");
			goto out;
		}
		got += (size_t)n;
	}
	buf[got] = '\0';
	err = check_bytes(buf, got, e, fingerprint, reason, sizeof(reason));
	if (err) {
		snprintf(why, whylen, "%s: %s", path, reason);
		goto out;
	}
	*bytes = buf;
	*len = got;
	buf = NULL;
out:
	free(buf);
	close(fd);
	return err;
}

int shmrun_ckpt_install_manifest(const struct shmrun_job *job, uint64_t e, const void *bytes,
				 size_t len, char *why, size_t whylen)
{
	struct shmrun_ckpt_writer wr;
	char path[PATH_MAX], reason[300];
	bool created = false;
	int dirfd = -1, err;

	reason[0] = '\0';
	if (!job->checkpoint_dir || !job->checkpoint_per_host || !e || !bytes) {
		/* shared: rank 0's MANIFEST is already in the one directory, and a
		 * second writer of MANIFEST.tmp there would race with rank 0's */
		snprintf(why, whylen, "installing a MANIFEST: %s",
			 !job->checkpoint_dir	     ? "the job has no checkpoint_dir"
			 : !job->checkpoint_per_host ? "checkpoint_layout is shared: only rank 0 "
						       "writes the MANIFEST"
			 : !e			     ? "epoch 0 is no epoch"
						     : "no bytes");
		return -EINVAL;
	}
	shmrun_ckpt_path(job->checkpoint_dir, e, path, sizeof(path));
	if (len > SHMRUN_CKPT_MANIFEST_MAX) {
		snprintf(why, whylen,
			 "%s/" MANIFEST ": %zu bytes received, more than the %u a "
			 "MANIFEST may have",
			 path, len, SHMRUN_CKPT_MANIFEST_MAX);
		return -EFBIG;
	}
	err = check_bytes(bytes, len, e, shmrun_fingerprint(job), reason, sizeof(reason));
	if (err) {
		snprintf(why, whylen, "%s/" MANIFEST ": the one received is refused: %s", path,
			 reason);
		return err;
	}
	/* a host with no task has written no state file, so no directory */
	err = shmrun_ckpt_mkdir(job->checkpoint_dir);
	if (err && err != -EEXIST) {
		snprintf(why, whylen, "%s: cannot create it: %s", job->checkpoint_dir,
			 strerror(-err));
		return err;
	}
	err = shmrun_ckpt_mkdir(path);
	created = err == 0;
	if (err && err != -EEXIST) {
		snprintf(why, whylen, "%s: cannot create it: %s", path, strerror(-err));
		return err;
	}
	dirfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dirfd < 0) {
		err = errno == ELOOP || errno == ENOTDIR ? -ELOOP : -errno;
		snprintf(why, whylen, "%s: %s", path,
			 err == -ELOOP ? "a symbolic link or not a directory" : strerror(-err));
		return err;
	}
	err = shmrun_ckpt_writer_init(&wr, 4, NULL, 0);
	if (err) {
		snprintf(why, whylen, "%s/" MANIFEST_TMP ": %s", path, strerror(-err));
		goto out;
	}
	unlinkat(dirfd, MANIFEST_TMP, 0);
	err = shmrun_ckpt_write_bytes(&wr, dirfd, MANIFEST_TMP, bytes, len, SHMRUN_CKPT_TRUNC);
	shmrun_ckpt_writer_close(&wr);
	if (err) {
		snprintf(why, whylen, "writing %s/" MANIFEST_TMP ": %s", path, strerror(-err));
		unlinkat(dirfd, MANIFEST_TMP, 0);
		goto out;
	}
	if (renameat(dirfd, MANIFEST_TMP, dirfd, MANIFEST) < 0) {
		err = -errno;
		snprintf(why, whylen, "renaming %s/" MANIFEST_TMP " to " MANIFEST ": %s", path,
			 strerror(-err));
		unlinkat(dirfd, MANIFEST_TMP, 0);
		goto out;
	}
	err = shmrun_ckpt_fsync_dir(dirfd);
	if (err) {
		snprintf(why, whylen, "fsync of %s: %s", path, strerror(-err));
		goto out;
	}
	if (created) { /* the new ckpt-<e> entry itself must survive a crash */
		int pfd = open(job->checkpoint_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		err = pfd < 0 ? -errno : shmrun_ckpt_fsync_dir(pfd);
		if (pfd >= 0)
			close(pfd);
		if (err)
			snprintf(why, whylen, "fsync of %s: %s", job->checkpoint_dir,
				 strerror(-err));
	}
out:
	close(dirfd);
	return err;
}

int shmrun_ckpt_commit_received(const struct shmrun_job *job, const struct shmrun_ckpt_scope *s,
				uint64_t e, const void *bytes, size_t len, char *why, size_t whylen)
{
	int err;

	if (!job->checkpoint_dir || !job->checkpoint_per_host)
		return 0; /* shared: rank 0 wrote it, and retires old ones, in the one directory */
	err = shmrun_ckpt_install_manifest(job, e, bytes, len, why, whylen);
	if (err)
		return err;
	shmrun_ckpt_retain(job, s, e);
	return 0;
}

/* ---- retention ----------------------------------------------------------------------- */

int shmrun_ckpt_retain(const struct shmrun_job *job, const struct shmrun_ckpt_scope *s, uint64_t e)
{
	uint32_t keep = job->checkpoint_retain ? job->checkpoint_retain : 1;
	uint64_t *epochs = NULL, cutoff = 0;
	int n, retired = 0;

	if (!job->checkpoint_dir)
		return 0;
	/* with several hosts, one may have to restore the checkpoint before the
	 * newest (rank 0's newest damaged: shmrun_ckpt_agree()) */
	if (s && s->plan && keep < 2)
		keep = 2;
	n = shmrun_ckpt_list(job->checkpoint_dir, &epochs);
	/* Only checkpoints that look restorable count toward the number kept;
	 * every directory older than the oldest one kept is retired (a damaged
	 * one never takes a good one's place). What may not be removed (a
	 * symlink, files the runtime did not make) is left; it was reported at
	 * the start (shmrun_ckpt_remove_incomplete()). */
	for (int i = 0, kept = 0; i < n && !cutoff; i++)
		if (epochs[i] <= e &&
		    shmrun_ckpt_looks_good_scoped(job->checkpoint_dir, epochs[i], s) &&
		    (uint32_t)++kept == keep)
			cutoff = epochs[i];
	for (int i = 0; i < n && cutoff; i++) {
		char why[300];

		if (epochs[i] < cutoff &&
		    shmrun_ckpt_remove(job->checkpoint_dir, epochs[i], why, sizeof(why)) == 0)
			retired++;
	}
	free(epochs);
	return retired;
}

/* ---- the epoch to restore ------------------------------------------------------------- */

int64_t shmrun_ckpt_host_epoch(const char *dir, const struct shmrun_ckpt_scope *s)
{
	struct shmrun_manifest m = {0};
	int64_t e = shmrun_ckpt_select_scoped(dir, s, &m);

	if (e > 0)
		shmrun_manifest_free(&m);
	return e;
}

int64_t shmrun_ckpt_agree(const uint64_t *choice, uint32_t hosts, char *why, size_t whylen)
{
	if (!choice || !hosts) {
		snprintf(why, whylen, "no hosts to agree");
		return -EINVAL;
	}
	if (choice[0] == 0) {
		for (uint32_t h = 1; h < hosts; h++)
			if (choice[h]) {
				snprintf(why, whylen,
					 "host 0 has no complete checkpoint but host %" PRIu32
					 " has epoch %" PRIu64
					 ": host 0's checkpoint_dir was emptied or lost; starting "
					 "from empty state would drop host %" PRIu32 "'s state. "
					 "Restore host 0's checkpoints, or start every host from "
					 "empty state with STREAM_RESET_STATE=1",
					 h, choice[h], h);
				return -ENOENT;
			}
	}
	return (int64_t)choice[0];
}
