/* The metrics endpoint over a real loopback socket: the body of GET /metrics
 * is byte for byte the text of .clairfs/metrics, other paths and methods are
 * refused, a port in use is an error at bind time. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check_run.h"
#include "clairfs/metrics.h"
#include "clairfs/metrics_http.h"

/* One HTTP/1.0 exchange; returns the whole answer (headers and body). */
static char *http_request(uint16_t port, const char *request)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    size_t len = strlen(request);
    ck_assert_int_eq(write(fd, request, len), (ssize_t)len);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    ssize_t r;
    while ((r = read(fd, buf + n, cap - n)) > 0)
        n += (size_t)r;
    buf[n] = '\0';
    close(fd);
    return buf;
}

static const char *body_of(const char *answer)
{
    const char *b = strstr(answer, "\r\n\r\n");
    ck_assert_ptr_nonnull(b);
    return b + 4;
}

START_TEST(test_parse)
{
    char host[64], err[256];
    uint16_t port = 0;
    ck_assert_int_eq(cfs_metrics_http_parse("127.0.0.1:9400", 0, host, sizeof(host), &port, err,
                                            sizeof(err)),
                     0);
    ck_assert_str_eq(host, "127.0.0.1");
    ck_assert_uint_eq(port, 9400);
    ck_assert_int_eq(cfs_metrics_http_parse("localhost:9400+{rank}", 3, host, sizeof(host), &port,
                                            err, sizeof(err)),
                     0);
    ck_assert_str_eq(host, "localhost");
    ck_assert_uint_eq(port, 9403);
    ck_assert_int_eq(cfs_metrics_http_parse("[::1]:{rank}+80", 2, host, sizeof(host), &port, err,
                                            sizeof(err)),
                     0);
    ck_assert_str_eq(host, "::1");
    ck_assert_uint_eq(port, 82);
    ck_assert_int_eq(
        cfs_metrics_http_parse("*:9100", 0, host, sizeof(host), &port, err, sizeof(err)), 0);
    ck_assert_str_eq(host, "*");
    const char *bad[] = {"9400", ":9400", "host:", "host:abc", "host:70000", "host:9400+",
                         "::1:80", "host:65535+1", "[::1:80", NULL};
    for (int i = 0; bad[i]; i++) {
        err[0] = '\0';
        ck_assert_msg(cfs_metrics_http_parse(bad[i], 0, host, sizeof(host), &port, err,
                                             sizeof(err)) == -EINVAL,
                      "%s accepted", bad[i]);
        ck_assert_msg(strstr(err, "metrics_listen=") && !strchr(err, '\n'), "message: %s", err);
    }
}
END_TEST

START_TEST(test_serves_metrics_text)
{
    struct cfs_metrics m;
    cfs_metrics_init(&m);
    cfs_metrics_add(&m, CFS_M_READS_PFS, 42);
    cfs_metrics_set(&m, CFS_M_EPOCH, 3);
    char err[256];
    struct cfs_metrics_http *h = NULL;
    ck_assert_int_eq(cfs_metrics_http_bind("127.0.0.1:0", 0, &h, err, sizeof(err)), 0);
    uint16_t port = cfs_metrics_http_port(h);
    ck_assert_uint_ne(port, 0);
    ck_assert_int_eq(cfs_metrics_http_start(h, &m, err, sizeof(err)), 0);

    struct cfs_metrics_snapshot snap;
    char *want = NULL;
    size_t wantlen = 0;
    cfs_metrics_snapshot(&m, &snap);
    ck_assert_int_eq(cfs_metrics_render_prometheus(&snap, &want, &wantlen), 0);

    char *ans = http_request(port, "GET /metrics HTTP/1.0\r\n\r\n");
    ck_assert_msg(strncmp(ans, "HTTP/1.0 200", 12) == 0 || strncmp(ans, "HTTP/1.1 200", 12) == 0,
                  "%.40s", ans);
    ck_assert_ptr_nonnull(strstr(ans, "Content-Type: text/plain; version=0.0.4"));
    ck_assert_str_eq(body_of(ans), want);
    ck_assert_ptr_nonnull(strstr(want, "clairfs_reads_total{source=\"pfs\"} 42\n"));
    free(ans);

    /* The counters are read at each scrape, not at start. */
    cfs_metrics_add(&m, CFS_M_READS_PFS, 1);
    ans = http_request(port, "GET /metrics HTTP/1.0\r\n\r\n");
    ck_assert_ptr_nonnull(strstr(body_of(ans), "clairfs_reads_total{source=\"pfs\"} 43\n"));
    free(ans);

    ans = http_request(port, "GET /nothing HTTP/1.0\r\n\r\n");
    ck_assert_ptr_nonnull(strstr(ans, " 404 "));
    free(ans);
    ans = http_request(port, "POST /metrics HTTP/1.0\r\nContent-Length: 0\r\n\r\n");
    ck_assert_ptr_nonnull(strstr(ans, " 405 "));
    free(ans);
    free(want);
    cfs_metrics_http_destroy(h);
}
END_TEST

START_TEST(test_port_in_use)
{
    char err[256], spec[64];
    struct cfs_metrics_http *first = NULL, *second = NULL;
    ck_assert_int_eq(cfs_metrics_http_bind("127.0.0.1:0", 0, &first, err, sizeof(err)), 0);
    snprintf(spec, sizeof(spec), "127.0.0.1:%u", cfs_metrics_http_port(first));
    ck_assert_int_eq(cfs_metrics_http_bind(spec, 0, &second, err, sizeof(err)), -EADDRINUSE);
    ck_assert_ptr_null(second);
    ck_assert_msg(strstr(err, spec) && strstr(err, "in use"), "%s", err);
    cfs_metrics_http_destroy(first);
    /* Freed: the port can be bound again (the server closed it). */
    ck_assert_int_eq(cfs_metrics_http_bind(spec, 0, &second, err, sizeof(err)), 0);
    cfs_metrics_http_destroy(second);
}
END_TEST

START_TEST(test_unknown_host)
{
    char err[256];
    struct cfs_metrics_http *h = NULL;
    ck_assert_int_lt(cfs_metrics_http_bind("no-such-host.invalid:9400", 0, &h, err, sizeof(err)),
                     0);
    ck_assert_ptr_null(h);
    ck_assert_ptr_nonnull(strstr(err, "no-such-host.invalid"));
    cfs_metrics_http_destroy(NULL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("metrics_http");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_parse);
    tcase_add_test(tc, test_serves_metrics_text);
    tcase_add_test(tc, test_port_in_use);
    tcase_add_test(tc, test_unknown_host);
    suite_add_tcase(s, tc);
    return cfs_check_run(s);
}
