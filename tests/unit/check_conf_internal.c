/*
 * tests/unit/check_conf_internal.c: the topology loader's shared helpers,
 * through its private header runtime/conf_internal.h.
 *
 *   cpulist      parse_cpulist() -> fmt_cpulist() and cpulist_array(): the
 *                canonical text and sorted array of a list, round trips, the
 *                first CPU named twice, damaged lists, the empty map ("none",
 *                no entries)
 *   suggest      edit_distance(), nearest() and join_words(): transpositions
 *                and case, the typo limit, no candidates, truncation
 *   check_value  one key's text against its table entry: the value kept, and
 *                the message of a wrong one (the bound in the unit the user
 *                wrote, the nearest choice); param_value_problem(), the same
 *                judgement without a loader, and every built-in default
 *
 * check_conf.c tests the same code through shmrun_job_load(); this file pins
 * the pieces the passes lend each other, so a change to one of them fails
 * here, next to its cause; and shmrun_job_load_mem(), the load from memory
 * the fuzz harness uses. Nothing forks, and nothing but the loader's CPU
 * probe (/sys) and an empty text's /dev/null touches the file system.
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "conf_internal.h"

/* A loader just complete enough for check_value(): messages and conf_dir. */
struct fixture {
	struct loader ld;
	struct shmrun_job job;
};

static void fixture_init(struct fixture *f)
{
	memset(f, 0, sizeof(*f));
	f->ld.path = "t.conf";
	f->ld.job = &f->job;
	f->ld.job_sec = -1;
	f->job.conf_dir = (char *)"/etc/shmrun";
}

static void fixture_free(struct fixture *f)
{
	for (uint32_t i = 0; i < f->ld.errs.n; i++)
		free(f->ld.errs.text[i]);
	free(f->ld.errs.text);
	free(f->ld.errs.line);
	f->ld.errs = (struct msgs){0};
}

/* ---- cpulist ------------------------------------------------------------- */

START_TEST(cpulist_round_trip)
{
	static const struct {
		const char *in, *out;
	} c[] = {
	    {"0", "0"},	      {"0-3,8", "0-3,8"}, {"3,1-2", "1-3"}, {"5,4,6,10", "4-6,10"},
	    {"4095", "4095"}, {"0-1,2-3", "0-3"}, {"7-7", "7"},
	};
	uint64_t map[CPU_WORDS], again[CPU_WORDS];
	char buf[128], buf2[128];
	int32_t dup;

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		ck_assert_int_eq(parse_cpulist(c[i].in, map, &dup), 0);
		ck_assert_int_eq(dup, -1);
		ck_assert_str_eq(fmt_cpulist(map, buf, sizeof(buf)), c[i].out);
		/* the canonical text reads back to the same set */
		ck_assert_int_eq(parse_cpulist(buf, again, &dup), 0);
		ck_assert_mem_eq(map, again, sizeof(map));
		ck_assert_str_eq(fmt_cpulist(again, buf2, sizeof(buf2)), buf);
	}
}
END_TEST

START_TEST(cpulist_array_sorted)
{
	uint64_t map[CPU_WORDS];
	int32_t *cpus = NULL, dup;
	uint32_t n = 99;

	ck_assert_int_eq(parse_cpulist("9,2-3,0", map, &dup), 0);
	ck_assert_int_eq(cpulist_array(map, &cpus, &n), 0);
	ck_assert_uint_eq(n, 4);
	ck_assert_int_eq(cpus[0], 0);
	ck_assert_int_eq(cpus[1], 2);
	ck_assert_int_eq(cpus[2], 3);
	ck_assert_int_eq(cpus[3], 9);
	free(cpus);
}
END_TEST

START_TEST(cpulist_duplicate)
{
	uint64_t map[CPU_WORDS];
	char buf[64];
	int32_t dup;

	ck_assert_int_eq(parse_cpulist("1-4,6,3,6", map, &dup), 0);
	ck_assert_int_eq(dup, 3); /* the first CPU named twice */
	ck_assert_str_eq(fmt_cpulist(map, buf, sizeof(buf)), "1-4,6");
}
END_TEST

START_TEST(cpulist_damaged)
{
	static const struct {
		const char *s;
		int r;
	} c[] = {
	    {"", -EINVAL},	 {",", -EINVAL},
	    {"1,", -EINVAL},	 {"1,,2", -EINVAL},
	    {"1-", -EINVAL},	 {"-1", -EINVAL},
	    {"3-1", -EINVAL},	 {"1 ,2", -EINVAL},
	    {" 1", -EINVAL},	 {"0x1", -EINVAL},
	    {"1-2-3", -EINVAL},	 {"4096", -ERANGE},
	    {"0-4096", -ERANGE}, {"99999999999999999999", -ERANGE},
	};
	uint64_t map[CPU_WORDS];
	int32_t dup;

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		ck_assert_msg(parse_cpulist(c[i].s, map, &dup) == c[i].r, "'%s'", c[i].s);
}
END_TEST

START_TEST(cpulist_empty_map)
{
	uint64_t map[CPU_WORDS] = {0};
	int32_t *cpus = NULL;
	uint32_t n = 99;
	char buf[16];

	ck_assert_str_eq(fmt_cpulist(map, buf, sizeof(buf)), "none");
	ck_assert_int_eq(cpulist_array(map, &cpus, &n), 0);
	ck_assert_uint_eq(n, 0);
	ck_assert_ptr_nonnull(cpus); /* an empty array, still one to free */
	free(cpus);
	ck_assert(!bit_test(map, 0));
	bit_set(map, 64);
	ck_assert(bit_test(map, 64));
	ck_assert(!bit_test(map, 63));
	ck_assert(!bit_test(map, MAX_CPU + 1)); /* past the map: never set */
}
END_TEST

/* ---- suggest ------------------------------------------------------------- */

START_TEST(suggest_distance)
{
	ck_assert_uint_eq(edit_distance("", ""), 0);
	ck_assert_uint_eq(edit_distance("", "abc"), 3);
	ck_assert_uint_eq(edit_distance("vnodes", "vnodes"), 0);
	ck_assert_uint_eq(edit_distance("vnodes", "VNodes"), 0); /* case-folded */
	ck_assert_uint_eq(edit_distance("vnodes", "vndoes"), 1); /* a transposition */
	ck_assert_uint_eq(edit_distance("width", "widht"), 1);
	ck_assert_uint_eq(edit_distance("input", "inptu"), 1);
	ck_assert_uint_eq(edit_distance("count", "mount"), 1);
	ck_assert_uint_eq(edit_distance("kitten", "sitting"), 3);
	{
		char longw[66];

		memset(longw, 'a', 65);
		longw[65] = '\0';
		ck_assert_uint_eq(edit_distance(longw, "a"), UINT32_MAX);
	}
}
END_TEST

START_TEST(suggest_nearest)
{
	static const char *const keys[] = {"workers", "vnodes", "ring_bytes", "idle"};

	ck_assert_str_eq(nearest("wrokers", keys, 4), "workers");
	ck_assert_str_eq(nearest("vnode", keys, 4), "vnodes");
	ck_assert_str_eq(nearest("idel", keys, 4), "idle");
	/* short words allow one edit, longer ones two or three */
	ck_assert_ptr_null(nearest("id", keys, 4));
	ck_assert_ptr_null(nearest("checkpoint_dir", keys, 4));
	ck_assert_ptr_null(nearest("workers", keys, 0)); /* no candidates */
}
END_TEST

START_TEST(suggest_join)
{
	static const char *const w[] = {"spin", "sleep", "hybrid"};
	char buf[64], small[12];

	ck_assert_str_eq(join_words(buf, sizeof(buf), w, 3), "spin, sleep, hybrid");
	ck_assert_str_eq(join_words(buf, sizeof(buf), w, 1), "spin");
	ck_assert_str_eq(join_words(buf, sizeof(buf), w, 0), "");
	/* cut short, with "..." in the last bytes */
	ck_assert_str_eq(join_words(small, sizeof(small), w, 3), "spin, sl...");
}
END_TEST

/* ---- check_value --------------------------------------------------------- */

START_TEST(value_kept)
{
	const struct shmrun_param_def size = {
	    .key = "ring_bytes", .type = SHMRUN_PARAM_SIZE, .min = 4096, .max = 1ull << 30};
	const struct shmrun_param_def path = {.key = "path", .type = SHMRUN_PARAM_PATH};
	const struct shmrun_param_def flag = {.key = "on", .type = SHMRUN_PARAM_BOOL};
	struct fixture f;
	char *text;
	uint64_t v;

	fixture_init(&f);
	ck_assert_int_eq(check_value(&f.ld, "[job]", &size, "64K", 3, &text, &v), 0);
	ck_assert_str_eq(text, "64K");
	ck_assert_uint_eq(v, 65536);
	free(text);
	ck_assert_int_eq(check_value(&f.ld, "[job]", &path, "./in/a.txt", 4, &text, &v), 0);
	ck_assert_str_eq(text, "/etc/shmrun/in/a.txt"); /* against conf_dir */
	free(text);
	ck_assert_int_eq(check_value(&f.ld, "[job]", &flag, "Yes", 5, &text, &v), 0);
	ck_assert_uint_eq(v, 1);
	free(text);
	ck_assert_uint_eq(f.ld.errs.n, 0);
	fixture_free(&f);
}
END_TEST

START_TEST(value_wrong)
{
	const struct shmrun_param_def dur = {.key = "checkpoint_interval",
					     .type = SHMRUN_PARAM_DURATION,
					     .min = 1000000,
					     .max = MAX_DURATION_NS};
	const struct shmrun_param_def idle = {
	    .key = "idle", .type = SHMRUN_PARAM_ENUM, .choices = "spin sleep hybrid"};
	const struct shmrun_param_def count = {.key = "workers", .type = SHMRUN_PARAM_COUNT};
	struct fixture f;
	char *text = (char *)"x";
	uint64_t v = 7;

	fixture_init(&f);
	ck_assert_int_eq(check_value(&f.ld, "[job]", &dur, "40000000s", 6, &text, &v), 1);
	ck_assert_ptr_null(text);
	ck_assert_uint_eq(v, 0);
	ck_assert_int_eq(check_value(&f.ld, "[job]", &idle, "hybird", 7, &text, &v), 1);
	ck_assert_int_eq(check_value(&f.ld, "[job]", &count, "", 8, &text, &v), 1);
	ck_assert_int_eq(check_value(&f.ld, "[job]", &count, "-1", 9, &text, &v), 1);
	ck_assert_uint_eq(f.ld.errs.n, 4);
	ck_assert_str_eq(f.ld.errs.text[0],
			 "t.conf:6: checkpoint_interval = '40000000s' in [job] is out of range; "
			 "expected 1ms to 31536000s");
	ck_assert_str_eq(f.ld.errs.text[1],
			 "t.conf:7: idle = 'hybird' in [job] is not one of: spin, sleep, hybrid; "
			 "did you mean 'hybrid'?");
	ck_assert_str_eq(f.ld.errs.text[2], "t.conf:8: workers in [job] has an empty value; "
					    "expected an unsigned decimal integer, e.g. 4");
	ck_assert_str_eq(f.ld.errs.text[3],
			 "t.conf:9: workers = '-1' in [job] is not a valid count; expected an "
			 "unsigned decimal integer, e.g. 4");
	ck_assert_int_eq(f.ld.errs.line[3], 9);
	fixture_free(&f);
}
END_TEST

/*
 * param_value_problem(): a value judged without a loader, as a plugin's
 * defaults are (runtime/plugin.c), with the reason; and every built-in
 * operator's and stage key's default passes it.
 */
START_TEST(value_problem)
{
	const struct shmrun_param_def n = {.key = "n", .type = SHMRUN_PARAM_COUNT, .min = 1,
					   .max = 100};
	const struct shmrun_param_def e = {.key = "m", .type = SHMRUN_PARAM_ENUM,
					   .choices = "plain fancy"};
	const struct shmrun_param_def d = {.key = "t", .type = SHMRUN_PARAM_DURATION};
	const struct shmrun_param_def r = {.key = "r", .type = SHMRUN_PARAM_RATE};
	char why[200];
	uint32_t defaults = 0;

	ck_assert_int_eq(param_value_problem(&n, "7", why, sizeof(why)), 0);
	ck_assert_int_eq(param_value_problem(&n, "abc", why, sizeof(why)), -EINVAL);
	ck_assert_str_eq(why, "not a valid count; expected an unsigned decimal integer, e.g. 4");
	ck_assert_int_eq(param_value_problem(&n, "0", why, sizeof(why)), -ERANGE);
	ck_assert_str_eq(why, "out of range; expected 1 to 100");
	ck_assert_int_eq(param_value_problem(&n, "101", why, sizeof(why)), -ERANGE);
	ck_assert_int_eq(param_value_problem(&n, "", why, sizeof(why)), -EINVAL);
	ck_assert_int_eq(param_value_problem(&e, "fancy", why, sizeof(why)), 0);
	ck_assert_int_eq(param_value_problem(&e, "fanc", why, sizeof(why)), -EINVAL);
	ck_assert_str_eq(why, "not one of its choices (plain fancy)");
	ck_assert_int_eq(param_value_problem(&d, "500ms", why, sizeof(why)), 0);
	ck_assert_int_eq(param_value_problem(&d, "500", why, sizeof(why)), -EINVAL);
	ck_assert_int_eq(param_value_problem(&r, "0", why, sizeof(why)), -ERANGE);
	for (const struct shmrun_operator *const *op = shmrun_operators(); *op; op++)
		for (const struct shmrun_param_def *p = (*op)->params; p && p->key; p++) {
			if (!p->def)
				continue;
			ck_assert_msg(param_value_problem(p, p->def, why, sizeof(why)) == 0,
				      "%s: default %s = '%s' is %s", (*op)->name, p->key, p->def,
				      why);
			defaults++;
		}
	for (const struct shmrun_param_def *p = shmrun_stage_keys(); p->key; p++)
		if (p->def)
			ck_assert_msg(param_value_problem(p, p->def, why, sizeof(why)) == 0,
				      "stage key %s = '%s' is %s", p->key, p->def, why);
	ck_assert_uint_ge(defaults, 10); /* the built-ins have defaults to check */
}
END_TEST

/*
 * shmrun_job_load_mem() (the fuzz harness's entry point, tests/fuzz/
 * fuzz_conf.c): the same load as from a file, messages named by @name,
 * relative paths against @dir, an empty text, and nothing kept on failure.
 */
START_TEST(load_mem)
{
	static const char good[] = "[job]\nworkers = 1\n[src]\nop = sequence\ncount = 5\n"
				   "[out]\nop = file_sink\ninput = src\npath = o.tsv\n";
	static const char bad[] = "[job]\nworkers = 0\n";
	struct shmrun_job job;
	struct shmrun_job_errors errs;
	bool found = false;

	ck_assert_int_eq(shmrun_job_load_mem("mem.conf", "/base", good, strlen(good), &job, &errs),
			 0);
	ck_assert_uint_eq(job.nstages, 2);
	ck_assert_str_eq(job.conf_path, "mem.conf");
	ck_assert_str_eq(job.conf_dir, "/base");
	for (uint32_t i = 0; i < job.stages[1].nparams; i++)
		if (strcmp(job.stages[1].params[i].def->key, "path") == 0) {
			ck_assert_str_eq(job.stages[1].params[i].value, "/base/o.tsv");
			found = true;
		}
	ck_assert(found);
	shmrun_job_free(&job);

	ck_assert_int_eq(shmrun_job_load_mem("mem.conf", "/base", bad, strlen(bad), &job, &errs),
			 -EINVAL);
	ck_assert_uint_eq(errs.n, 2); /* sorted by line: no stage (line 1), workers */
	ck_assert_int_eq(strncmp(errs.msgs[0], "mem.conf:1: no stages", 21), 0);
	ck_assert_str_eq(errs.msgs[1], "mem.conf:2: workers = '0' in [job] is out of range; "
				       "expected 1 to 4096");
	ck_assert_ptr_null(job.stages);
	shmrun_job_errors_free(&errs);

	ck_assert_int_eq(shmrun_job_load_mem("empty.conf", "/", "", 0, &job, &errs), -EINVAL);
	ck_assert_uint_eq(errs.n, 1); /* as `shmrun check` says of an empty file */
	ck_assert_int_eq(strncmp(errs.msgs[0], "empty.conf:1: no stages", 23), 0);
	shmrun_job_errors_free(&errs);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("conf_internal");
	TCase *cpu = tcase_create("cpulist"), *sug = tcase_create("suggest"),
	      *val = tcase_create("check_value");
	SRunner *sr;
	int failed;

	tcase_add_test(cpu, cpulist_round_trip);
	tcase_add_test(cpu, cpulist_array_sorted);
	tcase_add_test(cpu, cpulist_duplicate);
	tcase_add_test(cpu, cpulist_damaged);
	tcase_add_test(cpu, cpulist_empty_map);
	suite_add_tcase(s, cpu);
	tcase_add_test(sug, suggest_distance);
	tcase_add_test(sug, suggest_nearest);
	tcase_add_test(sug, suggest_join);
	suite_add_tcase(s, sug);
	tcase_add_test(val, value_kept);
	tcase_add_test(val, value_wrong);
	tcase_add_test(val, value_problem);
	tcase_add_test(val, load_mem);
	suite_add_tcase(s, val);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
