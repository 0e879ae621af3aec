/* The mount's metrics over HTTP, for a Prometheus server to scrape
 * (`-o metrics_listen=ADDR:PORT`): `GET /metrics` answers the same text as
 * `.clairfs/metrics` (every family with HELP and TYPE, exposition format
 * 0.0.4).  The server is libmicrohttpd's, with its own polling thread.
 *
 * Two steps, because the daemon forks after the mount is live and threads do
 * not survive a fork: cfs_metrics_http_bind() parses the address and binds
 * the listening socket before anything is mounted (a port in use is a
 * one-line error and nothing is mounted), cfs_metrics_http_start() starts the
 * server thread on that socket in the process that serves the mount. */
#ifndef CLAIRFS_METRICS_HTTP_H
#define CLAIRFS_METRICS_HTTP_H

#include <stddef.h>
#include <stdint.h>

struct cfs_metrics;
struct cfs_metrics_http;

/* Where to listen: spec is HOST:PORT where HOST is an IPv4 address, a
 * bracketed IPv6 address ([::1]), a host name, or `*` (every interface), and
 * PORT is a sum of decimal terms in which `{rank}` stands for rank (so that
 * several nodes on one host get their own port: `127.0.0.1:9400+{rank}`).
 * Fills *host (static storage of the caller, hostlen bytes) and *port.
 * Returns 0 or -EINVAL with a message in err. */
int cfs_metrics_http_parse(const char *spec, int rank, char *host, size_t hostlen,
                           uint16_t *port, char *err, size_t errlen);

/* Parse spec and bind + listen on it (SO_REUSEADDR, close-on-exec).
 * Returns 0, or -errno (-EADDRINUSE, -EADDRNOTAVAIL, -EINVAL, ...) with a
 * message in err naming the address. */
int cfs_metrics_http_bind(const char *spec, int rank, struct cfs_metrics_http **out, char *err,
                          size_t errlen);

/* The port actually bound (useful with port 0: the kernel's choice). */
uint16_t cfs_metrics_http_port(const struct cfs_metrics_http *h);

/* Serve m from a thread of the server's own.  m must outlive the server.
 * Returns 0 or -errno with a message. */
int cfs_metrics_http_start(struct cfs_metrics_http *h, struct cfs_metrics *m, char *err,
                           size_t errlen);

/* Stops the server (if started), closes the socket, frees h (NULL: no-op). */
void cfs_metrics_http_destroy(struct cfs_metrics_http *h);

#endif
