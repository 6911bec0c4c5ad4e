/* SPDX-License-Identifier: MIT */
/* The tools' --metrics exporter (tools/common/exporter.c) on its own:
 * the HTTP server on a real loopback socket, serving what a renderer of
 * the test's writes.  The sources are included so that the test links
 * without any tool and can reach the listening socket (port 0). */
#include "../../tools/common/exporter.c"
#include "../../tools/common/exposition.c"
#include "../../tools/common/keytext.c" /* labels are key texts */

#include <netinet/in.h>
#include <stdio.h>
#include <sys/time.h>

#include "unit.h"

static const int zero = 0, one = 1, broken = -1;

/* test_up, 0 or 1; broken: the renderer fails. */
static int render(FILE *f, enum expo_format fmt, const void *data)
{
	int up = *(const int *)data;
	if (up < 0)
		return -1;
	expo_single(f, fmt, "test_up", "gauge", "1 once published.", up);
	expo_end(f, fmt);
	return 0;
}

static struct exporter *start(const char *addr)
{
	static const struct exporter_conf conf = {
		.prog = "xptest", .about = "a test's numbers", .render = render };
	return exporter_start(addr, &conf, &zero);
}

static int port_of(struct exporter *ex)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	assert_int_equal(getsockname(ex->lfd, (struct sockaddr *)&sin, &len), 0);
	return ntohs(sin.sin_port);
}

static int dial(int port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	/* A safety net against a hang, not a timing assertion. */
	struct timeval tv = {.tv_sec = 30};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	return fd;
}

/* The whole answer to one request (the server closes after it). */
static char *http(int port, const char *request)
{
	int fd = dial(port);
	assert_int_equal(send(fd, request, strlen(request), MSG_NOSIGNAL), (ssize_t)strlen(request));
	size_t len = 0, cap = 65536;
	char *buf = malloc(cap + 1);
	ssize_t r;
	while ((r = recv(fd, buf + len, cap - len, 0)) > 0) {
		len += (size_t)r;
		if (len == cap)
			buf = realloc(buf, (cap *= 2) + 1);
	}
	assert_int_equal(r, 0); /* EOF, not a timeout */
	buf[len] = '\0';
	close(fd);
	return buf;
}

static void assert_starts(char *answer, const char *prefix)
{
	if (strncmp(answer, prefix, strlen(prefix)))
		fail_msg("expected %s..., got: %.200s", prefix, answer);
	free(answer);
}

static void test_http(void **state)
{
	(void)state;
	struct exporter *ex = start("127.0.0.1:0");
	assert_non_null(ex);
	int port = port_of(ex);
	char *a = http(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
	assert_non_null(strstr(a, "\ntest_up 0\n"));
	free(a);

	assert_int_equal(exporter_publish(ex, &one), 0);
	a = http(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
	assert_non_null(strstr(a, "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
	assert_non_null(strstr(a, "\ntest_up 1\n"));
	assert_null(strstr(a, "# EOF"));
	free(a);
	/* What Prometheus sends (lower case header names too). */
	a = http(port, "GET /metrics?x=1 HTTP/1.1\r\naccept: application/openmetrics-text;"
		       "version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1\r\n\r\n");
	assert_non_null(strstr(a, "Content-Type: application/openmetrics-text; version=1.0.0; "
				  "charset=utf-8\r\n"));
	assert_non_null(strstr(a, "Connection: close\r\n"));
	assert_int_equal(strcmp(a + strlen(a) - 6, "# EOF\n"), 0);
	free(a);

	assert_starts(http(port, "GET / HTTP/1.0\r\n\r\n"), "HTTP/1.1 200 OK\r\nContent-Type: text/html");
	assert_starts(http(port, "GET /other HTTP/1.1\r\n\r\n"), "HTTP/1.1 404 ");
	/* The body the server never reads does not reset the answer away. */
	assert_starts(http(port, "POST /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"),
		      "HTTP/1.1 405 ");
	assert_starts(http(port, "nonsense\r\n\r\n"), "HTTP/1.1 400 ");
	a = http(port, "HEAD /metrics HTTP/1.1\r\n\r\n");
	assert_null(strstr(a, "test_"));
	assert_starts(a, "HTTP/1.1 200 ");
	exporter_stop(ex);
}

/* Scrapers that connect and send nothing, more of them than there are
 * slots, do not keep the next scrape from being answered. */
static void test_idle_clients_do_not_block(void **state)
{
	(void)state;
	struct exporter *ex = start("127.0.0.1:0");
	assert_non_null(ex);
	int port = port_of(ex), idle[EX_SLOTS + 4];
	for (int i = 0; i < EX_SLOTS + 4; i++)
		idle[i] = dial(port);
	assert_starts(http(port, "GET /metrics HTTP/1.1\r\n\r\n"), "HTTP/1.1 200 ");
	/* The newest idle one still holds its slot (the oldest made room). */
	char c;
	assert_int_equal(recv(idle[EX_SLOTS + 3], &c, 1, MSG_DONTWAIT), -1);
	assert_int_equal(errno, EAGAIN);
	for (int i = 0; i < EX_SLOTS + 4; i++)
		close(idle[i]);
	exporter_stop(ex);
}

static void test_bad_addresses(void **state)
{
	(void)state;
	static const char *bad[] = {"", "9150", "127.0.0.1", "::1:9150", "[::1]9150", "[::1",
				    "127.0.0.1:65536", "127.0.0.1:x", "no.such.host.invalid:1",
				    "127.0.0.1:-1"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (start(bad[i]))
			fail_msg("'%s' accepted", bad[i]);
	/* A port another socket listens on. */
	struct exporter *ex = start("127.0.0.1:0");
	assert_non_null(ex);
	char spec[32];
	snprintf(spec, sizeof(spec), "127.0.0.1:%d", port_of(ex));
	assert_null(start(spec));
	exporter_stop(ex);
}

/* A renderer that fails publishes nothing: the previous body stays. */
static void test_failed_render_keeps_the_body(void **state)
{
	(void)state;
	struct exporter *ex = start("127.0.0.1:0");
	assert_non_null(ex);
	int port = port_of(ex);
	assert_int_equal(exporter_publish(ex, &one), 0);
	assert_int_equal(exporter_publish(ex, &broken), -1);
	char *a = http(port, "GET /metrics HTTP/1.1\r\n\r\n");
	assert_non_null(strstr(a, "\ntest_up 1\n"));
	free(a);
	/* The page at / says whose metrics these are. */
	a = http(port, "GET / HTTP/1.1\r\n\r\n");
	assert_non_null(strstr(a, "<h1>xptest</h1>\n<p>a test's numbers: <a href=\"/metrics\">"));
	free(a);
	exporter_stop(ex);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_http),
		cmocka_unit_test(test_idle_clients_do_not_block),
		cmocka_unit_test(test_bad_addresses),
		cmocka_unit_test(test_failed_render_keeps_the_body),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
