/*
 * runtime/ops/netaddr.h: the address of socket_source's `listen =` and
 * `connect =` keys, split into host and port before getaddrinfo(3) sees it.
 *
 * Forms: "PORT" (listen only: the host is 127.0.0.1, loopback), "HOST:PORT"
 * (a name, an IPv4 address), "[IPV6]:PORT" (brackets required around an IPv6
 * address, as in a URL: "::1:9000" is ambiguous). PORT is decimal, 0..65535;
 * 0 (listen only) lets the kernel choose. The split is pure text: no name is
 * looked up, so `shmrun check` validates the syntax without the network and
 * without binding anything. Kept apart from socket_source.c so that the unit
 * test (tests/unit/check_netaddr.c) needs no socket.
 */
#ifndef SHMRUN_OPS_NETADDR_H
#define SHMRUN_OPS_NETADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NETADDR_HOST_MAX 256 /* bytes of a host, with its NUL */

/*
 * shmrun_netaddr_split() - @text into @host (NUL-terminated, brackets
 * removed; "127.0.0.1" for a bare port when @listen) and @port.
 * @listen: a bare PORT and port 0 are allowed (connect needs HOST:PORT and a
 *          port 1..65535).
 * @why:    on failure, the reason, to follow "listen = 'TEXT' ", @why_len
 *          bytes (e.g. "has port 70000, outside 0..65535").
 * Return: 0; -EINVAL (not an address of these forms); -ERANGE (the port is
 * outside 0..65535, or 0 for connect).
 */
int shmrun_netaddr_split(const char *text, bool listen, char host[NETADDR_HOST_MAX], uint16_t *port,
			 char *why, size_t why_len);

#endif /* SHMRUN_OPS_NETADDR_H */
