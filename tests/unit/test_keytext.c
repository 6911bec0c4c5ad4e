/* SPDX-License-Identifier: MIT */
/* Key texts (tools/common/keytext.c): the one way every tool shows a key.
 * UTF-8 stays itself, the rest is \xHH, a backslash \\, and the text
 * reverses to the exact bytes; widths and cuts go by terminal columns.
 * The tool's file is compiled in here, as unit tests link only the
 * agent's objects. */
#include "../../tools/common/keytext.c" /* first: its _GNU_SOURCE */

#include <stdlib.h>
#include <string.h>

#include "unit.h"

/* key (len bytes) has text want, escaped says so, and it reverses. */
static void check(const char *key, size_t len, const char *want, int escaped)
{
	char text[1024];
	unsigned char back[256];
	assert_int_equal(keytext_from_bytes(key, len, text, sizeof(text), 0), escaped);
	assert_string_equal(text, want);
	assert_int_equal(keytext_to_bytes(text, back, sizeof(back)), (ssize_t)len);
	assert_memory_equal(back, key, len);
}

static void test_utf8_stays_itself(void **state)
{
	(void)state;
	check("shop:76:feature|\xc3\xa9", 18, "shop:76:feature|\xc3\xa9", 0);
	check("\xe5\x95\x86\xe5\x93\x81", 6, "\xe5\x95\x86\xe5\x93\x81", 0); /* CJK */
	check("cafe\xcc\x81", 6, "cafe\xcc\x81", 0);                         /* combining */
	check("\xf0\x9f\x94\x91k", 5, "\xf0\x9f\x94\x91k", 0);               /* U+1F511 */
}

static void test_the_rest_escaped_reversibly(void **state)
{
	(void)state;
	check("bad\xff", 4, "bad\\xff", 1);
	check("ctl\x01x\x7f", 6, "ctl\\x01x\\x7f", 1);            /* C0, DEL */
	check("c1\xc2\x9b", 4, "c1\\xc2\\x9b", 1);                /* C1 (CSI) in UTF-8 */
	check("back\\slash", 10, "back\\\\slash", 1);
	check("lit\\xff", 7, "lit\\\\xff", 1);                    /* not the byte 0xff */
	check("\xc0\xaf\xed\xa0\x80", 5, "\\xc0\\xaf\\xed\\xa0\\x80", 1); /* overlong, surrogate */
	check("cut\xe5\x95", 5, "cut\\xe5\\x95", 1);             /* a character cut short */
	check("nul\0z", 5, "nul\\x00z", 1);
	check("sp ace", 6, "sp\\x20ace", 1);                   /* one word in a table */
	check("", 0, "", 0);
}

static void test_ascii_terminal(void **state)
{
	(void)state;
	char text[64];
	assert_int_equal(keytext_from_bytes("caf\xc3\xa9", 5, text, sizeof(text), KEYTEXT_ASCII), 1);
	assert_string_equal(text, "caf\\xc3\\xa9");
}

static void test_from_the_modules_escaping(void **state)
{
	(void)state;
	char text[64];
	assert_int_equal(keytext_from_module("caf\\xc3\\xa9", text, sizeof(text), 0), 0);
	assert_string_equal(text, "caf\xc3\xa9");
	assert_int_equal(keytext_from_module("a\\x5cb\\x20c\\xff", text, sizeof(text), 0), 1);
	assert_string_equal(text, "a\\\\b\\x20c\\xff");
}

static void test_short_buffer_cuts_whole_units(void **state)
{
	(void)state;
	char text[8];
	keytext_from_bytes("ab\xff\xe5\x95\x86", 6, text, sizeof(text), 0);
	assert_string_equal(text, "ab\\xff"); /* the CJK character did not fit whole */
	assert_int_equal(keytext_to_bytes("a\\q", (unsigned char *)text, sizeof(text)), -1);
}

static void test_widths_and_cuts(void **state)
{
	(void)state;
	assert_int_equal(keytext_width("abc"), 3);
	assert_int_equal(keytext_width("\xe5\x95\x86\xe5\x93\x81"), 4); /* wide */
	assert_int_equal(keytext_width("cafe\xcc\x81"), 4);             /* combining: none */
	assert_int_equal(keytext_width("a\\xffb"), 6);
	int w;
	/* Never half a wide character, never an accent without its letter,
	 * never half an escape. */
	assert_int_equal(keytext_fit("\xe5\x95\x86\xe5\x93\x81", 3, &w), 3);
	assert_int_equal(w, 2);
	assert_int_equal(keytext_fit("cafe\xcc\x81z", 4, &w), 6);
	assert_int_equal(keytext_fit("cafe\xcc\x81z", 3, &w), 3);
	assert_int_equal(keytext_fit("a\\xffb", 4, &w), 1);
	char out[64];
	assert_string_equal(keytext_pad(out, sizeof(out), "\xe5\x95\x86x", 5), "\xe5\x95\x86x  ");
	assert_string_equal(keytext_pad(out, sizeof(out), "\xe5\x95\x86\xe5\x93\x81", 3),
			    "\xe5\x95\x86~");
	assert_string_equal(keytext_pad(out, sizeof(out), "\xe5\x95\x86\xe5\x93\x81z", 4),
			    "\xe5\x95\x86~ ");
}

static void test_json(void **state)
{
	(void)state;
	char *s;
	size_t n;
	FILE *f = open_memstream(&s, &n);
	keytext_json(f, "q\"\\\\caf\xc3\xa9");
	fclose(f);
	assert_string_equal(s, "\"q\\\"\\\\\\\\caf\xc3\xa9\"");
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_utf8_stays_itself),
		cmocka_unit_test(test_the_rest_escaped_reversibly),
		cmocka_unit_test(test_ascii_terminal),
		cmocka_unit_test(test_from_the_modules_escaping),
		cmocka_unit_test(test_short_buffer_cuts_whole_units),
		cmocka_unit_test(test_widths_and_cuts),
		cmocka_unit_test(test_json),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
