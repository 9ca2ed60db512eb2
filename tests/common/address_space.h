/*
 * tests/common/address_space.h: make the next allocations fail, for tests of
 * -ENOMEM paths. limit_address_space(extra) limits RLIMIT_AS to what the
 * process maps now plus @extra bytes, so a later mmap/malloc past that fails
 * as when memory runs out. Use only in a forked Check test (CK_FORK=yes: the
 * limit dies with the test's process) and not under a sanitizer, whose shadow
 * memory needs far more address space (the callers skip it when SANITIZED).
 * Header-only (a static inline function: no warning where unused).
 */
#ifndef SHMRUN_TESTS_ADDRESS_SPACE_H
#define SHMRUN_TESTS_ADDRESS_SPACE_H

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

static inline void limit_address_space(uint64_t extra)
{
	unsigned long pages = 0;
	struct rlimit lim;
	FILE *f = fopen("/proc/self/statm", "r");

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fscanf(f, "%lu", &pages), 1);
	fclose(f);
	lim.rlim_cur = lim.rlim_max = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + extra;
	ck_assert_int_eq(setrlimit(RLIMIT_AS, &lim), 0);
}

#endif /* SHMRUN_TESTS_ADDRESS_SPACE_H */
