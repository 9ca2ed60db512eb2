/*
 * tests/fuzz/fuzz.h: what every harness of tests/fuzz/ shares: libFuzzer's
 * entry point, and FUZZ_CHECK(), the harness's own assertion (an invariant
 * of the code under test that does not hold is a finding like a crash:
 * abort(), which libFuzzer reports with the input).
 */
#ifndef SHMRUN_TESTS_FUZZ_H
#define SHMRUN_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond)                                                                   \
	do {                                                                               \
		if (!(cond)) {                                                             \
			fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__,  \
				#cond);                                                    \
			abort();                                                           \
		}                                                                          \
	} while (0)

#endif /* SHMRUN_TESTS_FUZZ_H */
