/* SPDX-License-Identifier: MIT */
/* memcached's watch lines parsed (tools/common/mcwatch_line.c), on the
 * exact formats of memcached 1.6.18's logger.c: URI-encoded keys decoded
 * to their bytes, microseconds that are not zero-padded, the skipped=
 * line, error lines; fields no memcached writes refused; and the reader
 * (mcwatch.c) over a socket pair: a line too long dropped whole, stamps
 * moved to CLOCK_MONOTONIC within their bounds.  The tool's files are
 * compiled in here, as unit tests link only the agent's objects. */
#include <string.h>
#include <sys/socket.h>

#include "../../tools/common/mcwatch.c"
#include "../../tools/common/mcwatch_line.c"
#include "../../tools/common/procnet.c"
#include "../../tools/common/sanitize.c"
#include "unit.h"

static void test_item_get_and_store(void **state)
{
	(void)state;
	struct mcwatch_event e;
	unsigned long long skipped = 0;
	assert_int_equal(mcwatch_parse("ts=1795752743.5 gid=7 type=item_get key=key%3A1 "
				       "status=found clsid=1 cfd=17 size=100", &e, &skipped), 1);
	assert_false(e.store);
	assert_string_equal(e.cmd, "get");
	assert_string_equal(e.status, "found");
	assert_int_equal(e.keylen, 5);
	assert_memory_equal(e.key, "key:1", 5);
	assert_int_equal(e.cfd, 17);
	assert_int_equal(e.size, 100);
	assert_int_equal(e.ts_sec, 1795752743);
	assert_int_equal(e.ts_usec, 5); /* "%d" microseconds: .5 is 5 us, not half a second */

	assert_int_equal(mcwatch_parse("ts=1.123456 gid=8 type=item_store key=a status=not_stored "
				       "cmd=add ttl=0 clsid=1 cfd=3 size=0", &e, &skipped), 1);
	assert_true(e.store);
	assert_string_equal(e.cmd, "add");
	assert_string_equal(e.status, "not_stored");
}

static void test_binary_keys_come_back_exact(void **state)
{
	(void)state;
	struct mcwatch_event e;
	unsigned long long skipped = 0;
	assert_int_equal(mcwatch_parse("ts=1.1 gid=1 type=item_get key=%00%FFa%25%20b "
				       "status=not_found clsid=0 cfd=9 size=0", &e, &skipped), 1);
	assert_int_equal(e.keylen, 6);
	assert_memory_equal(e.key, "\x00\xff" "a% b", 6);
	char out[64];
	mcwatch_escape(e.key, e.keylen, out, sizeof(out));
	assert_string_equal(out, "\\x00\\xffa%\\x20b"); /* as the probe modules escape */
	/* A broken escape is not an event: memcached does not write it. */
	assert_int_equal(mcwatch_parse("ts=1.1 gid=1 type=item_get key=%G0 status=found "
				       "clsid=0 cfd=9 size=0", &e, &skipped), 3);
	assert_int_equal(mcwatch_parse("ts=1.1 gid=1 type=item_get key=a%4 status=found "
				       "clsid=0 cfd=9 size=0", &e, &skipped), 3);
}

static void test_fields_no_memcached_writes(void **state)
{
	(void)state;
	struct mcwatch_event e;
	unsigned long long skipped = 0;
	static const char *const bad[] = {
		"ts=1.1 gid=1 type=item_get key=a status=found clsid=0 cfd=-3 size=0",
		"ts=1.1 gid=1 type=item_get key=a status=found clsid=0 cfd=9 size=-9",
		"ts=1.1 gid=1 type=item_get key=a status=found cfd=9 size=99999999999999999999",
		"ts=99999999999.1 gid=1 type=item_get key=a status=found clsid=0 cfd=9 size=0",
		"ts=1.1000000 gid=1 type=item_get key=a status=found clsid=0 cfd=9 size=0",
		"ts=1 gid=1 type=item_get key=a status=found clsid=0 cfd=9 size=0",
		"ts=1.1 gid=1 type=item_get key=a clsid=0 cfd=9 size=0",
		"ts=1.1 gid=1 type=item_store key=a status=stored cmd= ttl=0 cfd=9 size=0",
		"ts=1.1 gid=1 type=item_store key=a status=stored cmd=waytoolongcmd cfd=9 size=0",
		"skipped=-1",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(mcwatch_parse(bad[i], &e, &skipped), 3);
	/* A key of 251 bytes is longer than any memcached takes. */
	char line[1024] = "ts=1.1 gid=1 type=item_get key=";
	memset(line + strlen(line), 'k', 251);
	strcat(line, " status=found clsid=0 cfd=9 size=0");
	assert_int_equal(mcwatch_parse(line, &e, &skipped), 3);
	/* The stream's cmd is kept as bytes (the tools show it as key text);
	 * an older memcached's line without cfd is still an event. */
	assert_int_equal(mcwatch_parse("ts=1.1 gid=1 type=item_store key=a status=stored "
				       "cmd=\x1b[2J size=1", &e, &skipped), 1);
	assert_string_equal(e.cmd, "\x1b[2J");
	assert_int_equal(e.cfd, -1);
}

/* mcwatch_next over one end of a socket pair holding text, then closed:
 * the events, up to the close. */
static size_t read_all(const char *text, struct mcwatch *w, struct mcwatch_event *out, size_t max)
{
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	assert_int_equal(mcwatch_init(w, "test"), 0);
	w->fd = sv[0];
	assert_int_equal(write(sv[1], text, strlen(text)), (ssize_t)strlen(text));
	close(sv[1]);
	size_t n = 0;
	int rc;
	while ((rc = mcwatch_next(w, &out[n], 0, "test")) >= 0)
		if (rc == 1 && n < max)
			n++;
	mcwatch_flush(w);
	while (mcwatch_next(w, &out[n], 0, "test") == 1 && n < max)
		n++;
	return n;
}

static void test_a_line_too_long_is_dropped_whole(void **state)
{
	(void)state;
	static char text[3 * MCWATCH_LINE_MAX];
	struct mcwatch w;
	struct mcwatch_event e[4];
	/* Its tail alone would parse as an event: it must not be shown. */
	strcpy(text, "ts=1.1 gid=1 type=item_get key=");
	memset(text + strlen(text), 'x', MCWATCH_LINE_MAX);
	strcat(text, " ts=1.1 gid=2 type=item_store key=tail status=stored cmd=set cfd=1 size=1\n"
		     "ts=1.1 gid=3 type=item_store key=ok status=stored cmd=set cfd=2 size=1\n");
	size_t n = read_all(text, &w, e, 4);
	assert_int_equal(n, 1);
	assert_memory_equal(e[0].key, "ok", 2);
	assert_int_equal(w.malformed, 1);
	mcwatch_close(&w);
}

static void test_stamps_on_the_monotonic_clock_within_bounds(void **state)
{
	(void)state;
	struct mcwatch w;
	struct mcwatch_event e[4];
	char text[512];
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	unsigned long long before = mono_ns();
	/* Now by the wall clock, and a time long before the watch began. */
	snprintf(text, sizeof(text),
		 "ts=%lld.%ld gid=1 type=item_store key=a status=stored cmd=set cfd=1 size=1\n"
		 "ts=1.1 gid=2 type=item_store key=b status=stored cmd=set cfd=2 size=1\n",
		 (long long)now.tv_sec, now.tv_nsec / 1000);
	size_t n = read_all(text, &w, e, 4);
	unsigned long long after = mono_ns();
	assert_int_equal(n, 2);
	assert_true(e[0].time_ns >= before - 1000000 && e[0].time_ns <= after);
	assert_true(e[1].time_ns >= w.opened_ns && e[1].time_ns <= after);
	mcwatch_close(&w);
}

static void test_skipped_errors_and_other_lines(void **state)
{
	(void)state;
	struct mcwatch_event e;
	unsigned long long skipped = 0;
	assert_int_equal(mcwatch_parse("skipped=42", &e, &skipped), 2);
	assert_int_equal(skipped, 42);
	assert_int_equal(mcwatch_parse("CLIENT_ERROR watch commands not allowed", &e, &skipped), -1);
	assert_int_equal(mcwatch_parse("WATCHER_TOO_MANY log watcher limit reached", &e, &skipped),
			 -1);
	assert_int_equal(mcwatch_parse("ts=1.1 gid=2 type=evicted key=a fetched=no", &e, &skipped),
			 0);
	assert_int_equal(mcwatch_parse("garbage", &e, &skipped), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_item_get_and_store),
		cmocka_unit_test(test_binary_keys_come_back_exact),
		cmocka_unit_test(test_skipped_errors_and_other_lines),
		cmocka_unit_test(test_fields_no_memcached_writes),
		cmocka_unit_test(test_a_line_too_long_is_dropped_whole),
		cmocka_unit_test(test_stamps_on_the_monotonic_clock_within_bounds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
