/* memcached's watch lines parsed (tools/common/mcwatch.c), on the exact
 * formats of memcached 1.6.18's logger.c: URI-encoded keys decoded to
 * their bytes, microseconds that are not zero-padded, the skipped= line,
 * error lines.  The tool's files are compiled in here, as unit tests link
 * only the agent's objects. */
#include <string.h>

#include "../../tools/common/mcwatch.c"
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
	/* A broken escape is not an event. */
	assert_int_equal(mcwatch_parse("ts=1.1 gid=1 type=item_get key=%G0 status=found "
				       "clsid=0 cfd=9 size=0", &e, &skipped), 0);
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
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
