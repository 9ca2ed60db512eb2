/*
 * tests/fuzz/replay_main.c: main() for a fuzz harness built without libFuzzer
 * (gcc, or any build without -DSHMRUN_FUZZ=ON): runs LLVMFuzzerTestOneInput()
 * once on each file named on the command line, as `harness FILE...` does with
 * libFuzzer linked. The corpus replay tests (fuzz_<t>_corpus) use it, so every
 * build replays the checked-in corpus, and the ASan build (.ci/run) under
 * ASan + UBSan.
 *
 * Rejected: linking libFuzzer's own main everywhere (clang only; gcc has no
 * libFuzzer).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	unsigned char *buf = NULL;
	size_t len = 0, cap = 0, got;

	if (!f) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	do {
		if (len == cap) {
			unsigned char *nb = realloc(buf, cap ? cap * 2 : 4096);

			if (!nb) {
				free(buf);
				fclose(f);
				fprintf(stderr, "%s: out of memory\n", path);
				return -1;
			}
			buf = nb;
			cap = cap ? cap * 2 : 4096;
		}
		got = fread(buf + len, 1, cap - len, f);
		len += got;
	} while (got > 0);
	if (ferror(f)) {
		fprintf(stderr, "%s: read error\n", path);
		free(buf);
		fclose(f);
		return -1;
	}
	fclose(f);
	/* an exact-size copy, so that a read past the input is a read past an allocation */
	{
		unsigned char *in = malloc(len ? len : 1);

		if (!in) {
			free(buf);
			return -1;
		}
		memcpy(in, buf, len);
		free(buf);
		LLVMFuzzerTestOneInput(in, len);
		free(in);
	}
	return 0;
}

int main(int argc, char **argv)
{
	int bad = 0;

	for (int i = 1; i < argc; i++)
		bad |= run_file(argv[i]) != 0;
	printf("%s: %d input%s run\n", argv[0], argc - 1, argc == 2 ? "" : "s");
	return bad;
}
