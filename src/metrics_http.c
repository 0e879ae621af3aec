/* The metrics endpoint: libmicrohttpd serving `GET /metrics` from the
 * mount's counters (design in include/clairfs/metrics_http.h).  The socket is
 * ours until the server starts, the server's afterwards (MHD closes a listen
 * socket it was given when it stops). */
#include "clairfs/metrics_http.h"

#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clairfs/metrics.h"

#define PROMETHEUS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct cfs_metrics_http {
    int fd; /* -1 once the server owns it */
    uint16_t port;
    struct MHD_Daemon *daemon;
    struct cfs_metrics *metrics;
};

/* "9400+{rank}" with rank 3: 9403.  Every term is a decimal or {rank}. */
static int parse_port(const char *s, int rank, uint16_t *port)
{
    uint64_t sum = 0;
    bool term = false;
    while (*s) {
        if (strncmp(s, "{rank}", 6) == 0) {
            sum += (uint64_t)(rank < 0 ? 0 : rank);
            s += 6;
        } else if (*s >= '0' && *s <= '9') {
            uint64_t v = 0;
            while (*s >= '0' && *s <= '9' && v <= 65535)
                v = v * 10 + (uint64_t)(*s++ - '0');
            sum += v;
        } else {
            return -EINVAL;
        }
        term = true;
        if (sum > 65535)
            return -EINVAL;
        if (*s == '+') {
            s++;
            term = false;
        } else if (*s) {
            return -EINVAL;
        }
    }
    if (!term)
        return -EINVAL;
    *port = (uint16_t)sum;
    return 0;
}

int cfs_metrics_http_parse(const char *spec, int rank, char *host, size_t hostlen,
                           uint16_t *port, char *err, size_t errlen)
{
    const char *colon = spec ? strrchr(spec, ':') : NULL;
    const char *h = spec, *hend = colon;
    if (!colon || colon == spec)
        goto bad;
    if (*h == '[') { /* [::1]:9400 */
        if (hend[-1] != ']')
            goto bad;
        h++;
        hend--;
    }
    size_t n = (size_t)(hend - h);
    if (n == 0 || n >= hostlen || (memchr(h, ':', n) && spec[0] != '['))
        goto bad;
    memcpy(host, h, n);
    host[n] = '\0';
    if (parse_port(colon + 1, rank, port) < 0)
        goto bad;
    return 0;
bad:
    snprintf(err, errlen,
             "metrics_listen=%s: expected HOST:PORT (e.g. 127.0.0.1:9400 or "
             "127.0.0.1:9400+{rank})",
             spec ? spec : "");
    return -EINVAL;
}

static int listen_on(const char *host, uint16_t port, const char *spec, int *out, char *err,
                     size_t errlen)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    char service[8];
    bool any = strcmp(host, "*") == 0;
    if (any)
        hints.ai_flags |= AI_PASSIVE;
    snprintf(service, sizeof(service), "%u", port);
    int gai = getaddrinfo(any ? NULL : host, service, &hints, &res);
    if (gai != 0) {
        snprintf(err, errlen, "metrics_listen=%s: %s", spec, gai_strerror(gai));
        return -EADDRNOTAVAIL;
    }
    int fd = socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, res->ai_protocol);
    int rc = 0;
    if (fd < 0) {
        rc = -errno;
        goto out;
    }
    int one = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, 64) < 0) {
        rc = -errno;
        close(fd);
        goto out;
    }
    *out = fd;
out:
    if (rc < 0)
        snprintf(err, errlen, "metrics_listen=%s: %s", spec, strerror(-rc));
    freeaddrinfo(res);
    return rc;
}

int cfs_metrics_http_bind(const char *spec, int rank, struct cfs_metrics_http **out, char *err,
                          size_t errlen)
{
    char host[256];
    uint16_t port;
    *out = NULL;
    int rc = cfs_metrics_http_parse(spec, rank, host, sizeof(host), &port, err, errlen);
    if (rc < 0)
        return rc;
    struct cfs_metrics_http *h = calloc(1, sizeof(*h));
    if (!h) {
        snprintf(err, errlen, "metrics_listen: out of memory");
        return -ENOMEM;
    }
    rc = listen_on(host, port, spec, &h->fd, err, errlen);
    if (rc < 0) {
        free(h);
        return rc;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    h->port = port;
    if (getsockname(h->fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET)
            h->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        else if (ss.ss_family == AF_INET6)
            h->port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    }
    *out = h;
    return 0;
}

uint16_t cfs_metrics_http_port(const struct cfs_metrics_http *h)
{
    return h ? h->port : 0;
}

static enum MHD_Result respond(struct MHD_Connection *conn, unsigned status, char *body,
                               size_t len, enum MHD_ResponseMemoryMode mode, const char *type)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
    if (!r) {
        if (mode == MHD_RESPMEM_MUST_FREE)
            free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    enum MHD_Result ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **req_state)
{
    struct cfs_metrics_http *h = cls;
    (void)version;
    (void)upload;
    (void)req_state;
    if (*upload_size) /* a body we do not want: drop it */
        *upload_size = 0;
    static char not_allowed[] = "only GET\n", not_found[] = "not found: try /metrics\n";
    static char index_page[] = "clairfs metrics: /metrics\n";
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return respond(conn, MHD_HTTP_METHOD_NOT_ALLOWED, not_allowed, sizeof(not_allowed) - 1,
                       MHD_RESPMEM_PERSISTENT, "text/plain");
    if (strcmp(url, "/") == 0)
        return respond(conn, MHD_HTTP_OK, index_page, sizeof(index_page) - 1,
                       MHD_RESPMEM_PERSISTENT, "text/plain");
    if (strcmp(url, "/metrics") != 0)
        return respond(conn, MHD_HTTP_NOT_FOUND, not_found, sizeof(not_found) - 1,
                       MHD_RESPMEM_PERSISTENT, "text/plain");
    struct cfs_metrics_snapshot snap;
    char *text = NULL;
    size_t len = 0;
    cfs_metrics_snapshot(h->metrics, &snap);
    if (cfs_metrics_render_prometheus(&snap, &text, &len) < 0)
        return MHD_NO;
    return respond(conn, MHD_HTTP_OK, text, len, MHD_RESPMEM_MUST_FREE, PROMETHEUS_CONTENT_TYPE);
}

int cfs_metrics_http_start(struct cfs_metrics_http *h, struct cfs_metrics *m, char *err,
                           size_t errlen)
{
    h->metrics = m;
    /* Its own thread, blocking in epoll/poll: no cost while nobody scrapes.
     * A few connections at a time are plenty for a scraper or two. */
    h->daemon = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ITC,
                                 0, NULL, NULL, handle, h, MHD_OPTION_LISTEN_SOCKET, h->fd,
                                 MHD_OPTION_CONNECTION_LIMIT, (unsigned)16,
                                 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10, MHD_OPTION_END);
    if (!h->daemon) {
        snprintf(err, errlen, "metrics_listen: the HTTP server did not start");
        return -EIO;
    }
    h->fd = -1;
    return 0;
}

void cfs_metrics_http_destroy(struct cfs_metrics_http *h)
{
    if (!h)
        return;
    if (h->daemon)
        MHD_stop_daemon(h->daemon);
    if (h->fd >= 0)
        close(h->fd);
    free(h);
}
