/*
 * runtime/ops/netaddr.c: "[HOST:]PORT" and "[IPV6]:PORT" split (netaddr.h).
 *
 * Invariant: a host returned is non-empty, has no blank, and holds a ':'
 * only when it came in brackets (an IPv6 address); the port is what the text
 * says, checked against 0..65535 without overflow (every digit counted, a
 * 30-digit port is "outside", not wrapped).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "netaddr.h"

static int parse_port(const char *p, bool listen, uint16_t *port, char *why, size_t why_len)
{
	unsigned long v = 0;
	size_t n = strlen(p);

	if (n == 0 || strspn(p, "0123456789") != n) {
		snprintf(why, why_len, "has port '%s', which is not a decimal number", p);
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		v = v * 10 + (unsigned long)(p[i] - '0');
		if (v > 65535) {
			snprintf(why, why_len, "has port %s, outside %s..65535", p,
				 listen ? "0" : "1");
			return -ERANGE;
		}
	}
	if (v == 0 && !listen) {
		snprintf(why, why_len,
			 "has port 0: a connection needs the server's port, 1..65535");
		return -ERANGE;
	}
	*port = (uint16_t)v;
	return 0;
}

int shmrun_netaddr_split(const char *text, bool listen, char host[NETADDR_HOST_MAX], uint16_t *port,
			 char *why, size_t why_len)
{
	const char *colon, *hs = text, *he;

	host[0] = '\0';
	if (strpbrk(text, " \t")) {
		snprintf(why, why_len, "has a blank; expected %s",
			 listen ? "PORT, HOST:PORT or [IPV6]:PORT" : "HOST:PORT or [IPV6]:PORT");
		return -EINVAL;
	}
	if (text[0] == '[') {
		he = strchr(text, ']');
		if (!he || he[1] != ':' || he == text + 1) {
			snprintf(why, why_len,
				 "is not an address; an IPv6 address is written [ADDRESS]:PORT, "
				 "e.g. [::1]:9000");
			return -EINVAL;
		}
		hs = text + 1;
		colon = he + 1;
	} else {
		colon = strrchr(text, ':');
		if (colon && memchr(text, ':', (size_t)(colon - text))) {
			snprintf(why, why_len,
				 "is not an address: an IPv6 address goes in brackets, e.g. "
				 "[::1]:9000");
			return -EINVAL;
		}
		he = colon;
	}
	if (!colon) {
		if (!listen) {
			snprintf(why, why_len,
				 "has no host; expected HOST:PORT or [IPV6]:PORT, e.g. "
				 "127.0.0.1:9000");
			return -EINVAL;
		}
		snprintf(host, NETADDR_HOST_MAX, "127.0.0.1");
		return parse_port(text, listen, port, why, why_len);
	}
	if (he == hs) {
		snprintf(why, why_len, "has an empty host before ':'; write %s",
			 listen ? "PORT alone for loopback, or HOST:PORT" : "HOST:PORT");
		return -EINVAL;
	}
	if ((size_t)(he - hs) >= NETADDR_HOST_MAX) {
		snprintf(why, why_len, "has a host longer than %d bytes", NETADDR_HOST_MAX - 1);
		return -EINVAL;
	}
	memcpy(host, hs, (size_t)(he - hs));
	host[he - hs] = '\0';
	return parse_port(colon + 1, listen, port, why, why_len);
}
