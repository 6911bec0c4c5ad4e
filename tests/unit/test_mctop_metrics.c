/* mctop's --metrics exporter (tools/mctop/metrics.c) on its own: the
 * exposition of a made-up frame in both formats, and the HTTP server on
 * a real loopback socket.  The source is included so that the test links
 * without the rest of mctop and can reach the listening socket (port 0). */
#include "../../tools/mctop/metrics.c"

#include <netinet/in.h>
#include <stdio.h>
#include <sys/time.h>

#include "unit.h"

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* Five keys, not in calls order, with names that need escaping. */
static struct mctop_key keys[5];
static struct mctop_frame frame(void)
{
	static const char *names[] = {"k300", "quo\"te", "new\nline\x80", "back\\x01", "k100"};
	static const uint64_t calls[] = {300, 500, 400, 600, 100};
	memset(keys, 0, sizeof(keys));
	for (int i = 0; i < 5; i++) {
		strcpy(keys[i].key, names[i]);
		keys[i].calls = calls[i];
		keys[i].err = 1;
		keys[i].objsize = i == 1 ? -1 : 10;
		keys[i].lat_us = 25;
		keys[i].bw_kbps = 8;
	}
	return (struct mctop_frame){.pid = 42, .target = "memcached -p 1", .total = 2000,
				    .tracked = 5, .omitted = 7, .bound = 50, .keys = keys,
				    .nkeys = 5, .budget = 1 << 20, .used = 4096};
}

static void test_exposition_of_the_top_rows(void **state)
{
	(void)state;
	struct mctop_frame f = frame();
	struct snap *s = snap_new(&f, 3);
	assert_non_null(s);
	const char *prom = s->text[FMT_PROM], *om = s->text[FMT_OM];

	/* Only the three busiest, escaped, busiest first; no rank label. */
	assert_int_equal(count(prom, "mctop_key_calls_total{"), 3);
	assert_non_null(strstr(prom, "mctop_key_calls_total{key=\"back\\\\x01\"} 600\n"
				     "mctop_key_calls_total{key=\"quo\\\"te\"} 500\n"
				     "mctop_key_calls_total{key=\"new\\nline\\\\x80\"} 400\n"));
	assert_null(strstr(prom, "k300"));
	assert_null(strstr(prom, "rank"));
	/* A key without a value size has no size sample. */
	assert_int_equal(count(prom, "mctop_key_object_size_bytes{"), 2);
	assert_non_null(strstr(prom, "mctop_key_bandwidth_bytes_per_second{key=\"back\\\\x01\"} 1000\n"));
	assert_non_null(strstr(prom, "mctop_key_latency_mean_seconds{key=\"back\\\\x01\"} 2.5e-05\n"));
	/* The keys left out: in the omitted count, and the busiest of them
	 * (300) raises the bound above the module's 50. */
	assert_non_null(strstr(prom, "\nmctop_keys_omitted 9\n"));
	assert_non_null(strstr(prom, "\nmctop_error_bound 300\n"));
	assert_non_null(strstr(prom, "\nmctop_target_up 1\n"));

	/* Prometheus 0.0.4 names counters' families by their samples and has
	 * no info type; OpenMetrics does the opposite and ends with # EOF. */
	assert_non_null(strstr(prom, "# TYPE mctop_commands_total counter\nmctop_commands_total 2000\n"));
	assert_non_null(strstr(prom, "# TYPE mctop_target_info gauge\n"));
	assert_null(strstr(prom, "# EOF"));
	assert_non_null(strstr(om, "# TYPE mctop_commands counter\nmctop_commands_total 2000\n"));
	assert_non_null(strstr(om, "# TYPE mctop_target info\n"
				   "mctop_target_info{pid=\"42\",target=\"memcached -p 1\"} 1\n"));
	assert_int_equal(count(om, "# EOF\n"), 1);
	assert_string_equal(om + s->len[FMT_OM] - 6, "# EOF\n");
	/* One sample per line: the newline inside a key was escaped. */
	assert_null(strstr(prom, "\nline"));
	snap_free(s);
}

static void test_before_the_first_frame(void **state)
{
	(void)state;
	struct snap *s = snap_new(NULL, 20);
	assert_non_null(s);
	assert_non_null(strstr(s->text[FMT_PROM], "\nmctop_target_up 0\n"));
	assert_null(strstr(s->text[FMT_PROM], "mctop_key_calls"));
	snap_free(s);
}

static int port_of(struct mctop_metrics *mm)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	assert_int_equal(getsockname(mm->lfd, (struct sockaddr *)&sin, &len), 0);
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
	struct mctop_metrics *mm = mctop_metrics_start("127.0.0.1:0", 3);
	assert_non_null(mm);
	int port = port_of(mm);
	char *a = http(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
	assert_non_null(strstr(a, "\nmctop_target_up 0\n"));
	free(a);

	struct mctop_frame f = frame();
	mctop_metrics_update(mm, &f);
	a = http(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
	assert_non_null(strstr(a, "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
	assert_non_null(strstr(a, "\nmctop_target_up 1\n"));
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
	assert_null(strstr(a, "mctop_"));
	assert_starts(a, "HTTP/1.1 200 ");
	mctop_metrics_stop(mm);
}

/* Scrapers that connect and send nothing, more of them than there are
 * slots, do not keep the next scrape from being answered. */
static void test_idle_clients_do_not_block(void **state)
{
	(void)state;
	struct mctop_metrics *mm = mctop_metrics_start("127.0.0.1:0", 3);
	assert_non_null(mm);
	int port = port_of(mm), idle[MM_SLOTS + 4];
	for (int i = 0; i < MM_SLOTS + 4; i++)
		idle[i] = dial(port);
	assert_starts(http(port, "GET /metrics HTTP/1.1\r\n\r\n"), "HTTP/1.1 200 ");
	/* The newest idle one still holds its slot (the oldest made room). */
	char c;
	assert_int_equal(recv(idle[MM_SLOTS + 3], &c, 1, MSG_DONTWAIT), -1);
	assert_int_equal(errno, EAGAIN);
	for (int i = 0; i < MM_SLOTS + 4; i++)
		close(idle[i]);
	mctop_metrics_stop(mm);
}

static void test_bad_addresses(void **state)
{
	(void)state;
	static const char *bad[] = {"", "9150", "127.0.0.1", "::1:9150", "[::1]9150", "[::1",
				    "127.0.0.1:65536", "127.0.0.1:x", "no.such.host.invalid:1",
				    "127.0.0.1:-1"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (mctop_metrics_start(bad[i], 3))
			fail_msg("'%s' accepted", bad[i]);
	/* A port another socket listens on. */
	struct mctop_metrics *mm = mctop_metrics_start("127.0.0.1:0", 3);
	assert_non_null(mm);
	char spec[32];
	snprintf(spec, sizeof(spec), "127.0.0.1:%d", port_of(mm));
	assert_null(mctop_metrics_start(spec, 3));
	mctop_metrics_stop(mm);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exposition_of_the_top_rows),
		cmocka_unit_test(test_before_the_first_frame),
		cmocka_unit_test(test_http),
		cmocka_unit_test(test_idle_clients_do_not_block),
		cmocka_unit_test(test_bad_addresses),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
