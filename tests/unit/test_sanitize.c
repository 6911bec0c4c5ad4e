/* SPDX-License-Identifier: MIT */
/* The tool's reply sanitiser (tools/common/sanitize.c): what a terminal would
 * obey goes, whole; text around it stays.  The tool's file is compiled in
 * here, as unit tests link only the agent's objects. */
#include <string.h>

#include "../../tools/common/sanitize.c"
#include "unit.h"

static void check(const char *in, const char *want)
{
	char buf[256];
	strcpy(buf, in);
	assert_string_equal(sanitize_text(buf), want);
}

static void test_escape_sequences_go_whole(void **state)
{
	(void)state;
	check("a\x1b[2Jb\x1b[1;31mc\x1b[?25ld", "abcd");  /* CSI */
	check("a\x1b]0;title\x07" "b", "ab");             /* OSC ... BEL */
	check("a\x1b]8;;http://x\x1b\\b", "ab");          /* OSC ... ST */
	check("a\x1bP1$r\x1b\\b\x1b_apc\x1b\\c", "abc");  /* DCS, APC */
	check("a\x1b" "cb\x1b(0c\x1b" "7d", "abcd");      /* ESC c, ESC ( 0, ESC 7 */
	check("q\x1b\x1b[0mz", "qz");                     /* ESC ESC */
}

static void test_cut_short_sequences(void **state)
{
	(void)state;
	check("ab\x1b", "ab");
	check("ab\x1b[12", "ab");
	/* An unterminated string ends at a control character, which is then
	 * judged alone: a newline keeps the next line. */
	check("x\x1b]0;no end\nnext", "x\nnext");
}

static void test_control_characters(void **state)
{
	(void)state;
	check("a\x07" "b\x08" "c\rd\x7f" "e\x01" "f", "abcdef");
	check("keep\ttabs\nand newlines\n", "keep\ttabs\nand newlines\n");
}

static void test_c1_and_utf8(void **state)
{
	(void)state;
	check("caf\xc3\xa9 \xf0\x9f\x98\x80", "caf\xc3\xa9 \xf0\x9f\x98\x80"); /* kept */
	check("a\xc2\x9b" "31mb", "a31mb");  /* U+009B (CSI) in UTF-8 */
	check("a\x9b" "31mb", "a31mb");      /* 0x9b alone: CSI to 8-bit terminals */
	check("fichier \xe9t\xe9", "fichier \xe9t\xe9"); /* Latin-1 stays */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_escape_sequences_go_whole),
		cmocka_unit_test(test_cut_short_sequences),
		cmocka_unit_test(test_control_characters),
		cmocka_unit_test(test_c1_and_utf8),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
