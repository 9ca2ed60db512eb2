/*
 * tests/common/tmpdir.h: a private temporary directory for a Check suite.
 *
 * tmpdir_create(prefix) makes /tmp/<prefix>-XXXXXX (its realpath in tmpdir);
 * tmpdir_remove() removes it and everything below. Call them from an
 * unchecked fixture or from main() — both run in the runner process, so the
 * directory goes even when a failing test's forked child skips its teardown.
 * Header-only (static functions): each test binary has its own copy.
 */
#ifndef SHMRUN_TESTS_TMPDIR_H
#define SHMRUN_TESTS_TMPDIR_H

#include <check.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char tmpdir[200]; /* realpath of the directory, "" when there is none */

/* Plain checks, not ck_assert: main() calls this outside any test. */
static inline void tmpdir_create(const char *prefix)
{
	char tmpl[128], *real = NULL;

	snprintf(tmpl, sizeof(tmpl), "/tmp/%s-XXXXXX", prefix);
	if (!mkdtemp(tmpl) || !(real = realpath(tmpl, NULL)) || strlen(real) >= sizeof(tmpdir)) {
		fprintf(stderr, "cannot create a temporary directory %s\n", tmpl);
		exit(1);
	}
	strcpy(tmpdir, real);
	free(real);
}

static inline int tmpdir_rm_entry(const char *path, const struct stat *st, int flag,
				  struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* Remove @path and everything below it (no symlinks followed). */
static inline void tmpdir_rm_tree(const char *path)
{
	nftw(path, tmpdir_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static inline void tmpdir_remove(void)
{
	if (tmpdir[0])
		tmpdir_rm_tree(tmpdir);
	tmpdir[0] = '\0';
}

#endif /* SHMRUN_TESTS_TMPDIR_H */
