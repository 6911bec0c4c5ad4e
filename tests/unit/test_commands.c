/* SPDX-License-Identifier: MIT */
/* The agent's command language, run in-process: replies and statuses. */
#include <stdio.h>
#include <string.h>

#include "unit.h"
#include "control/control.h"
#include "base/base.h"
#include "trace/trace.h"

#include <xprobes/site.h>

static __attribute__((noinline)) void fire(int x)
{
	XPROBES_SITE_P(cmdprov, req__start, (int, const char *), (x, "k"));
}

static struct textbuf out;

static int run(const char *line)
{
	tb_reset(&out);
	return xp_run_command(line, &out);
}

static void expect(const char *line, int status, const char *needle)
{
	int rc = run(line);
	if (rc != status || !out.data || !strstr(out.data, needle))
		fail_msg("'%s' -> %d '%s', wanted %d and '%s'", line, rc,
			 out.data ? out.data : "", status, needle);
}

static int setup(void **state)
{
	(void)state;
	tb_init(&out, XP_MAX_REPLY);
	fire(0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	tb_free(&out);
	return 0;
}

static void test_basic_commands(void **state)
{
	(void)state;
	expect("help", XP_OK, "unload MODULE");
	expect("version", XP_OK, "xprobes agent " XPROBES_VERSION);
	expect("   version   ", XP_OK, "site ABI " __XP_STR(XPROBES_SITE_ABI));
	expect("", XP_OK, "");
	expect("objects", XP_OK, "site");
	expect("sites", XP_OK, "  cmdprov:req__start(int, const char*)\n");
	expect("sites *:cmdprov:*", XP_OK, "cmdprov:req__start");
	/* No object is called "cmdprov": the whole pattern is a site glob. */
	expect("sites cmdprov:*", XP_OK, "cmdprov:req__start");
	expect("modules", XP_OK, "");
	assert_int_equal(out.len, 0);
	expect("complete sites", XP_OK, "cmdprov:req__start\n");
}

static void test_filters_exclude(void **state)
{
	(void)state;
	expect("sites nomatch*", XP_OK, "");
	assert_int_equal(out.len, 0);
	expect("sites nosuchobject:*", XP_OK, "");
	assert_int_equal(out.len, 0);
	expect("objects nosuchobject", XP_OK, "");
	assert_int_equal(out.len, 0);
}

static void test_errors(void **state)
{
	(void)state;
	expect("frobnicate", XP_ERR, "unknown command 'frobnicate' (try 'help')");
	expect("load", XP_ERR, "usage: load [--session] PATH");
	expect("load relative.so", XP_ERR, "module path must be absolute");
	expect("load /nonexistent/m.so", XP_ERR, "cannot load module /nonexistent/m.so: ");
	expect("load /nonexistent/m.so", XP_ERR, "No such file or directory");
	expect("enable", XP_ERR, "usage: enable MODULE");
	expect("disable ghost.so", XP_ERR, "unknown module 'ghost.so'");
	expect("unload ghost.so", XP_ERR, "unknown module 'ghost.so'");
	expect("command ghost.so hello", XP_ERR, "unknown module 'ghost.so'");
	expect("version extra", XP_ERR, "unexpected argument 'extra'");
	expect("sites a b", XP_ERR, "unexpected argument 'b'");
	expect("complete nonsense", XP_ERR, "usage: complete");
}

/* trace args --options: the tool's text kept whole (words joined by one
 * blank), bounded, shown by `trace args show`, forgotten by `none`. */
static void test_args_options(void **state)
{
	(void)state;
	static char line[XP_TRACE_ARG_OPTIONS_MAX + 64];
	expect("trace args show", XP_OK, "options: none\n");
	expect("trace args --options -A  f@arg1/x\t-R f@retval", XP_OK, "options: 23 bytes");
	expect("trace args show", XP_OK, "options: -A f@arg1/x -R f@retval\n");
	expect("trace args --options", XP_ERR, "usage: trace args --options TEXT");
	int n = snprintf(line, sizeof(line), "trace args --options -A ");
	memset(line + n, 'x', XP_TRACE_ARG_OPTIONS_MAX - 2);
	expect(line, XP_ERR, "more than 4096 bytes; nothing kept");
	expect("trace args show", XP_OK, "options: -A f@arg1/x -R f@retval\n");
	line[n + XP_TRACE_ARG_OPTIONS_MAX - 3] = 0; /* 4096 bytes: kept */
	expect(line, XP_OK, "options: 4096 bytes");
	expect("trace args show extra", XP_ERR, "'show' takes nothing more");
	expect("trace args none", XP_OK, "arguments: none");
	expect("trace args show", XP_OK, "options: none\n");
}

static void test_not_a_probe_module(void **state)
{
	(void)state;
	/* libcmocka is mapped already and has no xprobes_module symbol. */
	const char *lib = "/usr/lib/x86_64-linux-gnu/libcmocka.so.0";
	int rc = run("load /usr/lib/x86_64-linux-gnu/libcmocka.so.0");
	assert_int_equal(rc, XP_ERR);
	assert_non_null(strstr(out.data, lib));
	assert_non_null(strstr(out.data, "is not an XProbes probe module"));
	assert_non_null(strstr(out.data, "undefined symbol: xprobes_module"));
	expect("modules", XP_OK, "");
	assert_int_equal(out.len, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_basic_commands),
		cmocka_unit_test(test_filters_exclude),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_args_options),
		cmocka_unit_test(test_not_a_probe_module),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
