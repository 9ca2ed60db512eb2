/*
 * tests/unit/check_extract.c: the extract operator's rules (runtime/ops/
 * extract.c, event_time.c; issue 12 item 1), as plain functions.
 *
 * zone_matches_glibc: local -> UTC through the zone table agrees with
 * glibc's own conversion (localtime_r with TZ set in this process, the
 * oracle) for every quarter hour from 1995 to 2035 in zones with summer
 * time, half-hour offsets and the southern hemisphere: every instant's local
 * time maps back to it, or, in a repeated hour, to the first occurrence.
 * zone_gap_and_overlap: the documented choices on the days summer time starts
 * and ends in Europe/Berlin (its later loads come from the process's cache of
 * sampled zones, so the cached copy is checked too).
 * zone_unknown: the error names the file looked for and where zones live.
 * epoch_formats, strptime_formats: values, fractions, %z, %f, text left over.
 * bad_formats: the conversions refused, with their reasons.
 * fields / separator / regex_groups: what key, value and time select, and
 * which lines are bad.
 * bad_confs: a regex PCRE2 refuses (its message and offset), unknown group
 * names and numbers, missing time_format, conflicting keys; each names the key.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops/event_time.h"
#include "ops/extract.h"

/* The oracle: the UTC offset of @t in zone @name, from glibc with TZ set
 * (set once: a change of TZ makes glibc read the zone file again). */
static long glibc_offset(const char *name, time_t t)
{
	struct tm tm;

	if (!getenv("TZ") || strcmp(getenv("TZ"), name) != 0) {
		setenv("TZ", name, 1);
		tzset();
	}
	ck_assert_ptr_nonnull(localtime_r(&t, &tm));
	return tm.tm_gmtoff;
}

START_TEST(zone_matches_glibc)
{
	static const char *const zones[] = {"Europe/Berlin", "America/New_York",
					    "Australia/Lord_Howe", "Asia/Kolkata",
					    "America/Sao_Paulo"};
	const char *name = zones[_i];
	struct shmrun_tz tz;
	char why[512];
	uint64_t checked = 0, repeated = 0;

	ck_assert_int_eq(shmrun_tz_load(&tz, name, why, sizeof(why)), 0);
	ck_assert_ptr_null(getenv("TZ")); /* put back as it was: unset */
	/* 1995-01-01 .. 2035-01-01, every 15 minutes */
	for (time_t u = 788918400; u < 2051222400; u += 900) {
		long off = glibc_offset(name, u);
		int64_t local = (int64_t)u + off, got;

		got = shmrun_tz_utc(&tz, local); /* does not read TZ */
		if (got != (int64_t)u) {
			/* only in a repeated hour: the first occurrence, earlier */
			ck_assert_msg(got < (int64_t)u &&
					  got + glibc_offset(name, (time_t)got) == local,
				      "%s: local %lld: got %lld, want %lld", name, (long long)local,
				      (long long)got, (long long)u);
			repeated++;
		}
		checked++;
	}
	unsetenv("TZ");
	ck_assert_uint_gt(checked, 1400000);
	if (strcmp(name, "Asia/Kolkata") == 0)
		ck_assert_uint_eq(repeated, 0); /* no summer time since 1945 */
	else
		ck_assert_uint_gt(repeated, 0);
	shmrun_tz_free(&tz);
}
END_TEST

static int64_t parse_in(const char *fmt, const char *zone, const char *text, int *err)
{
	struct shmrun_timefmt f;
	struct shmrun_tz tz;
	char why[512];
	int64_t ns = -1;

	ck_assert_int_eq(shmrun_timefmt_compile(&f, fmt, why, sizeof(why)), 0);
	ck_assert_int_eq(shmrun_tz_load(&tz, zone, why, sizeof(why)), 0);
	*err = shmrun_timefmt_parse(&f, &tz, text, strlen(text), &ns);
	shmrun_timefmt_free(&f);
	shmrun_tz_free(&tz);
	return ns;
}

#define S 1000000000ll

START_TEST(zone_gap_and_overlap)
{
	int err;

	/* winter: +01:00 */
	ck_assert_int_eq(
	    parse_in("%Y-%m-%d %H:%M:%S", "Europe/Berlin", "2024-01-31 12:34:56", &err),
	    1706700896 * S);
	ck_assert_int_eq(err, 0);
	/* skipped hour: read with +01:00, the offset before the change */
	ck_assert_int_eq(
	    parse_in("%Y-%m-%d %H:%M:%S", "Europe/Berlin", "2024-03-31 02:30:00", &err),
	    1711848600 * S);
	/* repeated hour: the first occurrence, +02:00 */
	ck_assert_int_eq(
	    parse_in("%Y-%m-%d %H:%M:%S", "Europe/Berlin", "2024-10-27 02:30:00", &err),
	    1729989000 * S);
	/* the same text in UTC */
	ck_assert_int_eq(parse_in("%Y-%m-%d %H:%M:%S", "UTC", "2024-10-27 02:30:00", &err),
			 (1729989000 + 7200) * S);
}
END_TEST

START_TEST(zone_unknown)
{
	struct shmrun_tz tz;
	char why[512];

	ck_assert_int_eq(shmrun_tz_load(&tz, "Europe/Berln", why, sizeof(why)), -ENOENT);
	ck_assert_ptr_nonnull(strstr(why, "/usr/share/zoneinfo/Europe/Berln"));
	ck_assert_ptr_nonnull(strstr(why, "zones are the files under /usr/share/zoneinfo"));
	ck_assert_int_eq(shmrun_tz_load(&tz, "../../etc/passwd", why, sizeof(why)), -EINVAL);
	ck_assert_int_eq(shmrun_tz_load(&tz, "/etc/passwd", why, sizeof(why)), -EINVAL);
	/* a directory is not a zone */
	ck_assert_int_eq(shmrun_tz_load(&tz, "Europe", why, sizeof(why)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "not a TZif file"));
}
END_TEST

START_TEST(epoch_formats)
{
	int err;

	ck_assert_int_eq(parse_in("epoch_s", "UTC", "1706704496", &err), 1706704496 * S);
	ck_assert_int_eq(err, 0);
	ck_assert_int_eq(parse_in("epoch_s", "UTC", "1706704496.25", &err),
			 1706704496 * S + 250000000);
	ck_assert_int_eq(parse_in("epoch_s", "UTC", "-1.5", &err), -1500000000);
	ck_assert_int_eq(parse_in("epoch_ms", "UTC", "1706704496250", &err),
			 1706704496 * S + 250000000);
	ck_assert_int_eq(parse_in("epoch_ms", "UTC", "1.000001", &err), 1000001);
	/* the zone does not apply to epoch times */
	ck_assert_int_eq(parse_in("epoch_s", "Europe/Berlin", "60", &err), 60 * S);
	parse_in("epoch_s", "UTC", "12a", &err);
	ck_assert_int_eq(err, -EINVAL);
	parse_in("epoch_s", "UTC", "", &err);
	ck_assert_int_eq(err, -EINVAL);
	parse_in("epoch_s", "UTC", "1.", &err);
	ck_assert_int_eq(err, -EINVAL);
	parse_in("epoch_s", "UTC", "99999999999999999999", &err);
	ck_assert_int_eq(err, -EINVAL);
	/* the largest epoch second whose ns fit an int64, and the next one */
	ck_assert_int_eq(parse_in("epoch_s", "UTC", "9223372035.999999999", &err),
			 9223372035 * S + 999999999);
	ck_assert_int_eq(err, 0);
	parse_in("epoch_s", "UTC", "9223372036", &err);
	ck_assert_int_eq(err, -EINVAL);
}
END_TEST

START_TEST(strptime_formats)
{
	int err;

	ck_assert_int_eq(
	    parse_in("%Y-%m-%dT%H:%M:%S.%fZ", "UTC", "2024-01-31T11:34:56.123456Z", &err),
	    1706700896 * S + 123456000);
	ck_assert_int_eq(err, 0);
	ck_assert_int_eq(parse_in("%Y-%m-%dT%H:%M:%S.%f", "UTC", "2024-01-31T11:34:56.5", &err),
			 1706700896 * S + 500000000);
	/* %z: the text's own offset wins over the zone */
	ck_assert_int_eq(
	    parse_in("%Y-%m-%d %H:%M:%S %z", "America/New_York", "2024-01-31 12:34:56 +0100", &err),
	    1706700896 * S);
	ck_assert_int_eq(err, 0);
	/* %b, %e and a format without seconds */
	ck_assert_int_eq(parse_in("%e %b %Y %H:%M", "UTC", "31 Jan 2024 11:34", &err),
			 (1706700896 - 56) * S);
	/* no year: 1970 */
	ck_assert_int_eq(parse_in("%H:%M:%S", "UTC", "01:00:01", &err), 3601 * S);
	/* text left over, a field out of range, a text too long */
	parse_in("%Y-%m-%d", "UTC", "2024-01-31 junk", &err);
	ck_assert_int_eq(err, -EINVAL);
	parse_in("%Y-%m-%d", "UTC", "2024-13-31", &err);
	ck_assert_int_eq(err, -EINVAL);
	parse_in("%Y-%m-%dT%H:%M:%S.%f", "UTC", "2024-01-31T11:34:56.", &err);
	ck_assert_int_eq(err, -EINVAL);
	/* a day the month does not have (glibc's strptime takes %d up to 31 in
	 * every month, and 2025-02-31 became 2025-03-03); leap days */
	parse_in("%Y-%m-%d", "UTC", "2025-02-31", &err);
	ck_assert_int_eq(err, -EINVAL);
	parse_in("%Y-%m-%d", "UTC", "2025-02-29", &err);
	ck_assert_int_eq(err, -EINVAL);
	parse_in("%Y-%m-%d", "UTC", "2025-04-31", &err);
	ck_assert_int_eq(err, -EINVAL);
	parse_in("%Y-%m-%d", "UTC", "1900-02-29", &err);
	ck_assert_int_eq(err, -EINVAL);
	ck_assert_int_eq(parse_in("%Y-%m-%d", "UTC", "2024-02-29", &err), 1709164800 * S);
	ck_assert_int_eq(err, 0);
	ck_assert_int_eq(parse_in("%Y-%m-%d", "UTC", "2000-02-29", &err), 951782400 * S);
	ck_assert_int_eq(err, 0);
	ck_assert_int_eq(parse_in("%Y-%m-%d", "UTC", "2025-12-31", &err), 1767139200 * S);
	ck_assert_int_eq(err, 0);
	/* a day of the year stays allowed */
	ck_assert_int_eq(parse_in("%Y %j", "UTC", "2024 366", &err), 1735603200 * S);
	ck_assert_int_eq(err, 0);
	ck_assert_int_eq(parse_in("%Y %j", "UTC", "2023 365", &err), 1703980800 * S);
	ck_assert_int_eq(err, 0);
	/* ... but not past the year's last (2023 366 became 2025-02-01), nor
	 * against the month and day given with it (2024 060 Jan became
	 * 2024-01-29); a second of 61 (glibc takes up to 61) is no time; 60, a
	 * leap second, is read as POSIX time does: the next minute's :00 */
	parse_in("%Y %j", "UTC", "2023 366", &err);
	ck_assert_int_eq(err, -EINVAL);
	parse_in("%Y %j %b", "UTC", "2024 060 Jan", &err);
	ck_assert_int_eq(err, -EINVAL);
	ck_assert_int_eq(parse_in("%Y %j %b", "UTC", "2024 060 Feb", &err), 1709164800 * S);
	ck_assert_int_eq(err, 0);
	parse_in("%Y-%m-%d %H:%M:%S", "UTC", "2024-01-01 23:59:61", &err);
	ck_assert_int_eq(err, -EINVAL);
	ck_assert_int_eq(parse_in("%Y-%m-%d %H:%M:%S", "UTC", "2024-01-01 23:59:60", &err),
			 1704153600 * S);
	ck_assert_int_eq(err, 0);
	{
		char longtext[400];

		memset(longtext, '1', sizeof(longtext) - 1);
		longtext[sizeof(longtext) - 1] = 0;
		parse_in("%Y", "UTC", longtext, &err);
		ck_assert_int_eq(err, -EINVAL);
	}
}
END_TEST

START_TEST(bad_formats)
{
	static const struct {
		const char *fmt, *why;
	} cases[] = {
	    {"%Y-%m-%d %s", "use time_format = epoch_s"},
	    {"%Y %Z", "use time_zone"},
	    {"%c", "locale's layout"},
	    {"%G-%V", "week-based"},
	    {"%Y-%Q", "%Q at offset 3 is not supported"},
	    {"%Y %", "lone %"},
	    {"%S.%f.%f", "%f twice"},
	    {"date: %%", "reads no date or time"},
	    {"", "reads no date or time"},
	};

	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct shmrun_timefmt f;
		char why[512] = "";

		ck_assert_int_eq(shmrun_timefmt_compile(&f, cases[i].fmt, why, sizeof(why)),
				 -EINVAL);
		ck_assert_msg(strstr(why, cases[i].why), "'%s': %s", cases[i].fmt, why);
	}
}
END_TEST

static char last_why[256]; /* the reason cut() got for its last bad line */

/* Compile @c (must succeed) and cut @line; key, value in @k, @v. Return: its error. */
static int cut(const struct shmrun_extract_conf *c, const char *line, char *k, char *v, int64_t *t)
{
	struct shmrun_extract x;
	struct shmrun_record in = {.key = "K",
				   .key_len = 1,
				   .value = line,
				   .value_len = (uint32_t)strlen(line),
				   .event_time_ns = 42};
	struct shmrun_record out;
	const char *bad = NULL, *why = NULL;
	char msg[1024];
	int err;

	err = shmrun_extract_compile(&x, c, &bad, msg, sizeof(msg));
	ck_assert_msg(err == 0, "%s: %s", bad, msg);
	err = shmrun_extract_line(&x, &in, &out, &why);
	if (!err) {
		snprintf(k, 128, "%.*s", (int)out.key_len, (const char *)out.key);
		snprintf(v, 128, "%.*s", (int)out.value_len, (const char *)out.value);
		*t = out.event_time_ns;
	} else {
		ck_assert_ptr_nonnull(why);
		snprintf(last_why, sizeof(last_why), "%s", why);
	}
	shmrun_extract_free(&x);
	return err;
}

START_TEST(fields)
{
	struct shmrun_extract_conf c = {.key = "3",
					.value = "4-",
					.time = "1-2",
					.time_format = "%Y-%m-%d %H:%M:%S",
					.time_zone = "Europe/Berlin"};
	char k[128], v[128];
	int64_t t;

	ck_assert_int_eq(cut(&c, "2024-01-31 12:34:56 status installed libc6:amd64 2.36", k, v, &t),
			 0);
	ck_assert_str_eq(k, "status");
	ck_assert_str_eq(v, "installed libc6:amd64 2.36");
	ck_assert_int_eq(t, 1706700896 * S);
	/* leading and repeated blanks, TABs */
	ck_assert_int_eq(cut(&c, " \t2024-01-31  12:34:56\tx  y", k, v, &t), 0);
	ck_assert_str_eq(k, "x");
	ck_assert_str_eq(v, "y");
	/* too few fields, no fields */
	ck_assert_int_eq(cut(&c, "2024-01-31 12:34:56 x", k, v, &t), -EILSEQ);
	ck_assert_int_eq(cut(&c, "", k, v, &t), -EILSEQ);
	ck_assert_int_eq(cut(&c, "   ", k, v, &t), -EILSEQ);
	/* a time that does not parse */
	ck_assert_int_eq(cut(&c, "2024-01-31 12:34:xx a b", k, v, &t), -EILSEQ);
	/* 0: the whole line; unset: the input's key and time */
	c = (struct shmrun_extract_conf){.value = "0"};
	ck_assert_int_eq(cut(&c, " a b ", k, v, &t), 0);
	ck_assert_str_eq(v, " a b ");
	ck_assert_str_eq(k, "K");
	ck_assert_int_eq(t, 42);
	/* N-: to the end of the last field, trailing blanks left out */
	c = (struct shmrun_extract_conf){.key = "2-", .value = "1"};
	ck_assert_int_eq(cut(&c, "a b\tc  \t", k, v, &t), 0);
	ck_assert_str_eq(k, "b\tc");
	ck_assert_str_eq(v, "a");
	ck_assert_int_eq(cut(&c, "a   ", k, v, &t), -EILSEQ);
	c = (struct shmrun_extract_conf){.key = "2-3"};
	ck_assert_int_eq(cut(&c, "a b  c d", k, v, &t), 0);
	ck_assert_str_eq(k, "b  c");
	ck_assert_str_eq(v, "a b  c d");
}
END_TEST

START_TEST(separator)
{
	struct shmrun_extract_conf c = {.separator = ",", .key = "2", .value = "4"};
	char k[128], v[128];
	int64_t t;

	ck_assert_int_eq(cut(&c, "a,,c,", k, v, &t), 0); /* empty fields count */
	ck_assert_str_eq(k, "");
	ck_assert_str_eq(v, "");
	ck_assert_int_eq(cut(&c, "a,,c", k, v, &t), -EILSEQ);
	c = (struct shmrun_extract_conf){.separator = "\\t", .key = "1", .value = "2-"};
	ck_assert_int_eq(cut(&c, "x y\tz\tw", k, v, &t), 0);
	ck_assert_str_eq(k, "x y");
	ck_assert_str_eq(v, "z\tw");
	c = (struct shmrun_extract_conf){
	    .separator = "::", .key = "2", .time = "3", .time_format = "epoch_ms"};
	ck_assert_int_eq(cut(&c, "a::b::1500", k, v, &t), 0);
	ck_assert_str_eq(k, "b");
	ck_assert_int_eq(t, 1500000000);
}
END_TEST

START_TEST(regex_groups)
{
	struct shmrun_extract_conf c = {
	    .regex = "^(?<time>\\S+ \\S+) (?<action>\\S+) (?:(?<=status )\\S+ )?(?<package>\\S+)",
	    .key = "action",
	    .value = "package",
	    .time = "time",
	    .time_format = "%Y-%m-%d %H:%M:%S"};
	char k[128], v[128];
	int64_t t;

	ck_assert_int_eq(cut(&c, "2024-01-31 11:34:56 status installed libc6:amd64 2.36", k, v, &t),
			 0);
	ck_assert_str_eq(k, "status");
	ck_assert_str_eq(v, "libc6:amd64");
	ck_assert_int_eq(t, 1706700896 * S);
	ck_assert_int_eq(cut(&c, "2024-01-31 11:34:56 configure libc6:amd64 2.36 <none>", k, v, &t),
			 0);
	ck_assert_str_eq(k, "configure");
	ck_assert_str_eq(v, "libc6:amd64");
	ck_assert_int_eq(cut(&c, "2024-01-31 11:34:56 status", k, v, &t), -EILSEQ);
	/* numbered groups; a group that took no part: empty key; as time: bad */
	c = (struct shmrun_extract_conf){.regex = "^(a)?(b+)(c)?", .key = "1", .value = "2"};
	ck_assert_int_eq(cut(&c, "bbx", k, v, &t), 0);
	ck_assert_str_eq(k, "");
	ck_assert_str_eq(v, "bb");
	c = (struct shmrun_extract_conf){
	    .regex = "^(a)?(b+)(\\d+)?", .key = "0", .time = "3", .time_format = "epoch_s"};
	ck_assert_int_eq(cut(&c, "bb7", k, v, &t), 0);
	ck_assert_str_eq(k, "bb7");
	ck_assert_int_eq(t, 7 * S);
	ck_assert_int_eq(cut(&c, "bb", k, v, &t), -EILSEQ);
	/* invalid UTF-8 under (*UTF): bad, with PCRE2's reason */
	c = (struct shmrun_extract_conf){.regex = "(*UTF)^(.)", .key = "1"};
	ck_assert_int_eq(cut(&c, "\xc3\xa9t\xc3\xa9", k, v, &t), 0);
	ck_assert_str_eq(k, "\xc3\xa9");
	ck_assert_int_eq(cut(&c, "\xff\xfe", k, v, &t), -EILSEQ);
	ck_assert_str_eq(last_why, "the regex failed on this line: "
				   "UTF-8 error: illegal byte (0xfe or 0xff)");
}
END_TEST

START_TEST(bad_confs)
{
	static const struct {
		struct shmrun_extract_conf c;
		const char *key, *why;
		int err;
	} cases[] = {
	    {{.regex = "^(?<t>\\S+", .key = "t"},
	     "regex",
	     "PCRE2 error at offset 9: missing closing parenthesis",
	     -EINVAL},
	    {{.regex = "a[", .key = "0"}, "regex", "PCRE2 error at offset 2:", -EINVAL},
	    {{.regex = "(?<a>x)", .key = "b"}, "key", "no group named 'b'", -EINVAL},
	    {{.regex = "(?<a>x)", .value = "2"}, "value", "has 1 capture group", -EINVAL},
	    {{.regex = "(?J)(?<a>x)|(?<a>y)", .key = "a"}, "key", "several groups", -EINVAL},
	    {{.key = "x"}, "key", "is not a field", -EINVAL},
	    {{.key = "3-1"}, "key", "is not a field", -EINVAL},
	    {{.key = "0-2"}, "key", "is not a field", -EINVAL},
	    {{.key = "1025"}, "key", "fields are at most 1024", -EINVAL},
	    {{.value = "0-"}, "value", "is not a field", -EINVAL},
	    {{.key = "1", .time_format = "epoch_s"}, "time_format", "time is not", -EINVAL},
	    {{.key = "1", .time_zone = "Europe/Berlin"}, "time_zone", "time is not", -EINVAL},
	    {{.time = "1"}, "time", "time needs time_format", -EINVAL},
	    {{.time = "1", .time_format = "%Y-%Q"}, "time_format", "%Q", -EINVAL},
	    {{.time = "1", .time_format = "epoch_s", .time_zone = "Mars/Olympus"},
	     "time_zone",
	     "zones are the files under",
	     -ENOENT},
	    {{.regex = "x", .separator = ",", .key = "0"},
	     "separator",
	     "give one of them",
	     -EINVAL},
	    {{.regex = "x"}, "op", "extract sets nothing", -EINVAL},
	};

	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct shmrun_extract x;
		const char *bad = NULL;
		char why[1024] = "";
		int err = shmrun_extract_compile(&x, &cases[i].c, &bad, why, sizeof(why));

		ck_assert_msg(err == cases[i].err, "case %u: %d %s", i, err, why);
		ck_assert_str_eq(bad, cases[i].key);
		ck_assert_msg(strstr(why, cases[i].why), "case %u: %s", i, why);
		shmrun_extract_free(&x);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("extract");
	TCase *tc = tcase_create("time");
	SRunner *sr;
	int failed;

	unsetenv("TZ");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, zone_matches_glibc, 0, 5);
	tcase_add_test(tc, zone_gap_and_overlap);
	tcase_add_test(tc, zone_unknown);
	tcase_add_test(tc, epoch_formats);
	tcase_add_test(tc, strptime_formats);
	tcase_add_test(tc, bad_formats);
	suite_add_tcase(s, tc);
	tc = tcase_create("lines");
	tcase_add_test(tc, fields);
	tcase_add_test(tc, separator);
	tcase_add_test(tc, regex_groups);
	tcase_add_test(tc, bad_confs);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
