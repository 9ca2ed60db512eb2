/*
 * tests/fuzz/fuzz_manifest.c: the MANIFEST parser (runtime/ckpt/manifest.c)
 * over arbitrary bytes, and the topology check that reads what it parsed.
 *
 * Each input is parsed twice by shmrun_manifest_parse():
 *   1. as it is: the checksum line must close it, so nearly every mutation
 *      stops at "checksum mismatch" or "no end line";
 *   2. with its checksum made right: the last "end ..." line (if any) is
 *      dropped and "end <XXH64 of the text>" appended, so the fuzzer reaches
 *      every line's parsing as a file damaged before it was summed would.
 * A MANIFEST that parses is then checked against a fixed topology (the word
 * count's shape) by shmrun_ckpt_check_topology(), which diffs the manifest's
 * `topo` lines against the job's when the fingerprints differ.
 *
 * What must hold: no crash, leak or UB; a refusal says why (non-empty @why);
 * what parses has version 1, an epoch, and files whose names carry no '/'
 * and end in ".<instance>.state" or at least ".<instance>".
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <string.h>
#include <xxhash.h>

#include "conf_internal.h"
#include "fuzz.h"
#include "manifest.h"

static const char topology[] = "[job]\nname = wordcount\nworkers = 2\nvnodes = 256\n"
			       "[read]\nop = sequence\ncount = 10\nwidth = 2\n"
			       "[words]\nop = tokenize\ninput = read\nwidth = 2\n"
			       "[count]\nop = count\ninput = words by key\nwidth = 4\n"
			       "[out]\nop = stdout_sink\ninput = count\n";

static struct shmrun_job *the_job(void)
{
	static struct shmrun_job job;
	static bool loaded;

	if (!loaded) {
		struct shmrun_job_errors errs;

		if (shmrun_job_load_mem("fuzz-topology.conf", "/", topology, strlen(topology), &job,
					&errs)) {
			for (uint32_t i = 0; i < errs.n; i++)
				fprintf(stderr, "%s\n", errs.msgs[i]);
			abort();
		}
		loaded = true;
	}
	return &job;
}

static void parse_one(char *text, size_t len)
{
	struct shmrun_manifest m;
	char why[256] = "";
	int err = shmrun_manifest_parse(text, len, &m, why, sizeof(why));

	if (err) {
		FUZZ_CHECK(err == -EBADMSG || err == -ENOMEM);
		FUZZ_CHECK(why[0] != 0);
	} else {
		FUZZ_CHECK(m.version == 1 && m.epoch != 0);
		for (uint32_t i = 0; i < m.nfiles; i++) {
			FUZZ_CHECK(!strchr(m.files[i].name, '/'));
			FUZZ_CHECK(strlen(m.files[i].stage) < sizeof(m.files[i].stage));
		}
		why[0] = 0;
		err = shmrun_ckpt_check_topology(&m, the_job(), why, sizeof(why));
		FUZZ_CHECK(err == 0 || (err == -ESTALE && why[0]));
	}
	shmrun_manifest_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 40);
	size_t body = size;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = 0;
	parse_one(text, size);

	/* 2: the same bytes, summed again */
	memcpy(text, data, size);
	for (size_t p = size; p > 0; p--)
		if (text[p - 1] == '\n' && size - p >= 4 && memcmp(text + p, "end ", 4) == 0) {
			body = p;
			break;
		}
	if (body == size && size && text[size - 1] != '\n')
		text[body++] = '\n';
	body += (size_t)snprintf(text + body, 40, "end %016" PRIx64 "\n",
				 (uint64_t)XXH64(text, body, 0));
	parse_one(text, body);
	free(text);
	return 0;
}
