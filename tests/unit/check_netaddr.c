/*
 * tests/unit/check_netaddr.c: socket_source's address parser
 * (runtime/ops/netaddr.c, shmrun_netaddr_split()).
 *
 * TCases:
 *  - good: every accepted form gives the host and port written (a bare port
 *    is 127.0.0.1 for listen; brackets are removed from an IPv6 address;
 *    port 0 and 65535 for listen; a host name is kept for getaddrinfo).
 *  - bad: each refusal has its errno and a reason naming what is wrong
 *    (port 70000 and a 30-digit port are -ERANGE, not wrapped; port 0 for
 *    connect; a bare port for connect; an unbracketed IPv6 address; an empty
 *    host; a missing ']'; blanks; a host longer than the limit; a sign).
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ops/netaddr.h"

struct good {
	const char *text;
	bool listen;
	const char *host;
	uint16_t port;
};

static const struct good goods[] = {
    {"9000", true, "127.0.0.1", 9000},
    {"0", true, "127.0.0.1", 0},
    {"65535", true, "127.0.0.1", 65535},
    {"0.0.0.0:9000", true, "0.0.0.0", 9000},
    {"[::1]:9000", true, "::1", 9000},
    {"[::]:0", true, "::", 0},
    {"localhost:80", false, "localhost", 80},
    {"10.1.2.3:1", false, "10.1.2.3", 1},
    {"[fe80::1%lo]:9000", false, "fe80::1%lo", 9000},
    {"example.org:00443", false, "example.org", 443},
};

START_TEST(test_good)
{
	const struct good *g = &goods[_i];
	char host[NETADDR_HOST_MAX] = "unset", why[200] = "";
	uint16_t port = 12345;
	int r = shmrun_netaddr_split(g->text, g->listen, host, &port, why, sizeof(why));

	ck_assert_msg(r == 0, "'%s': %d %s", g->text, r, why);
	ck_assert_str_eq(host, g->host);
	ck_assert_uint_eq(port, g->port);
}
END_TEST

struct bad {
	const char *text;
	bool listen;
	int err;
	const char *why; /* a part of the reason */
};

static const struct bad bads[] = {
    {"70000", true, -ERANGE, "has port 70000, outside 0..65535"},
    {"127.0.0.1:65536", false, -ERANGE, "outside 1..65535"},
    {"1:100000000000000000000000000000", false, -ERANGE, "outside 1..65535"},
    {"h:0", false, -ERANGE, "has port 0"},
    {"9000", false, -EINVAL, "has no host"},
    {"::1:9000", true, -EINVAL, "goes in brackets"},
    {":9000", true, -EINVAL, "empty host"},
    {"[::1:9000", true, -EINVAL, "[ADDRESS]:PORT"},
    {"[::1]9000", true, -EINVAL, "[ADDRESS]:PORT"},
    {"[]:9000", true, -EINVAL, "[ADDRESS]:PORT"},
    {"host: 9000", false, -EINVAL, "blank"},
    {"host:", false, -EINVAL, "not a decimal number"},
    {"host:+80", false, -EINVAL, "'+80', which is not a decimal number"},
    {"abc", true, -EINVAL, "'abc', which is not a decimal number"},
    {"", true, -EINVAL, "not a decimal number"},
};

START_TEST(test_bad)
{
	const struct bad *b = &bads[_i];
	char host[NETADDR_HOST_MAX], why[200] = "";
	uint16_t port = 0;
	int r = shmrun_netaddr_split(b->text, b->listen, host, &port, why, sizeof(why));

	ck_assert_msg(r == b->err, "'%s': got %d, want %d (%s)", b->text, r, b->err, why);
	ck_assert_msg(strstr(why, b->why), "'%s': reason '%s' lacks '%s'", b->text, why, b->why);
}
END_TEST

START_TEST(test_long_host)
{
	char text[NETADDR_HOST_MAX + 16], host[NETADDR_HOST_MAX], why[200] = "";
	uint16_t port;

	memset(text, 'a', NETADDR_HOST_MAX);
	strcpy(text + NETADDR_HOST_MAX, ":80");
	ck_assert_int_eq(shmrun_netaddr_split(text, false, host, &port, why, sizeof(why)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "longer than 255 bytes"));
	/* one byte shorter fits */
	strcpy(text + NETADDR_HOST_MAX - 1, ":80");
	ck_assert_int_eq(shmrun_netaddr_split(text, false, host, &port, why, sizeof(why)), 0);
	ck_assert_uint_eq(strlen(host), NETADDR_HOST_MAX - 1);
	ck_assert_uint_eq(port, 80);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("netaddr");
	TCase *tc = tcase_create("good");
	SRunner *sr;
	int failed;

	tcase_add_loop_test(tc, test_good, 0, sizeof(goods) / sizeof(goods[0]));
	suite_add_tcase(s, tc);
	tc = tcase_create("bad");
	tcase_add_loop_test(tc, test_bad, 0, sizeof(bads) / sizeof(bads[0]));
	tcase_add_test(tc, test_long_host);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
