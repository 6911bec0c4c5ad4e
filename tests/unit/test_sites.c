/* SPDX-License-Identifier: MIT */
/* Sites and the agent's core in one process: discovery through the
 * .note.xprobes notes, argument evaluation, typed dispatch, gates,
 * signature checks, load order, enable/disable and unload. */
#include <errno.h>
#include <string.h>

#include "unit.h"
#include "control/control.h"
#include "base/base.h"

#include <xprobes/probe.h>
#include <xprobes/site.h>

static int evaluated;
static int count_eval(void)
{
	return ++evaluated;
}

static __attribute__((noinline)) void fire_two(long a)
{
	XPROBES_SITE(unit_two, (long, int), (a, count_eval()));
}

static __attribute__((noinline)) void fire_zero(void)
{
	XPROBES_SITE_P(unitprov, zero, (), ());
}

static __attribute__((noinline)) void fire_twelve(void)
{
	XPROBES_SITE(unit_twelve,
		     (char, signed char, unsigned char, short, unsigned short, int,
		      unsigned, long, unsigned long long, const char *, double, void *),
		     ('a', -2, 250, -300, 60000, -70000, 4000000000u, -5000000000l,
		      18000000000000000000ull, "twelve", 2.5, (void *)&evaluated));
}

static int enabled_now(void)
{
	return XPROBES_SITE_ENABLED(unit_two);
}

/* Handlers, and what they saw. */
static int calls_a, calls_b, calls_zero, calls_twelve, order_ok;
static long sum_a;
static int last_called; /* 'a' or 'b' */

static void handler_a(long a, int b)
{
	calls_a++;
	sum_a += a + b;
	last_called = 'a';
}

static void handler_b(long a, int b)
{
	(void)a;
	(void)b;
	calls_b++;
	/* Load order: a's handler ran just before, on the same hit. */
	if (last_called == 'a')
		order_ok++;
	last_called = 'b';
}

static void handler_zero(void)
{
	calls_zero++;
}

static void handler_twelve(char c, signed char sc, unsigned char uc, short s,
			   unsigned short us, int i, unsigned u, long l,
			   unsigned long long ull, const char *str, double d, void *p)
{
	if (c == 'a' && sc == -2 && uc == 250 && s == -300 && us == 60000 &&
	    i == -70000 && u == 4000000000u && l == -5000000000l &&
	    ull == 18000000000000000000ull && strcmp(str, "twelve") == 0 &&
	    d == 2.5 && p == &evaluated)
		calls_twelve++;
}

static void wrong_types(int a, int b)
{
	(void)a;
	(void)b;
	fail_msg("a refused handler ran");
}

static const struct xprobes_probe_desc probes_a[] = {
	XPROBES_PROBE("unit_two", handler_a, (long, int)),
	XPROBES_PROBE("unitprov:*", handler_zero, ()),
	XPROBES_PROBE("unit_twelve", handler_twelve,
		      (char, signed char, unsigned char, short, unsigned short, int,
		       unsigned, long, unsigned long long, const char *, double, void *)),
};
static const struct xprobes_module_desc mod_a = { XPROBES_MODULE_ABI, sizeof(struct xprobes_module_desc), 0, NULL, 3, probes_a };

static const struct xprobes_probe_desc probes_b[] = {
	XPROBES_PROBE("unit_t?o", handler_b, ( long ,int )),
	XPROBES_PROBE("unit_two", wrong_types, (int, int)),
};
static const struct xprobes_module_desc mod_b = { XPROBES_MODULE_ABI, sizeof(struct xprobes_module_desc), 0, NULL, 2, probes_b };
/* Its one probe refused: never loaded. */
static const struct xprobes_probe_desc probes_c[] = {
	XPROBES_PROBE("unit_two", wrong_types, (int, int)),
};
static const struct xprobes_module_desc mod_c = { XPROBES_MODULE_ABI, sizeof(struct xprobes_module_desc), 0, NULL, 1, probes_c };

static struct xp_site *find_site(const char *fullname)
{
	for (size_t i = 0; i < xp_agent.nobjects; i++)
		for (size_t j = 0; j < xp_agent.objects[i]->nsites; j++)
			if (strcmp(xp_agent.objects[i]->sites[j]->fullname, fullname) == 0)
				return xp_agent.objects[i]->sites[j];
	return NULL;
}

static void test_discovery(void **state)
{
	(void)state;
	xp_rescan(NULL);
	struct xp_site *two = find_site("unit_two");
	assert_non_null(two);
	assert_string_equal(two->types, "long, int");
	assert_int_equal(two->rec->nargs, 2);
	struct xp_site *zero = find_site("unitprov:zero");
	assert_non_null(zero);
	assert_string_equal(zero->provider, "unitprov");
	assert_string_equal(zero->types, "");
	assert_non_null(find_site("unit_twelve"));
}

static void test_detached_site_evaluates_nothing(void **state)
{
	(void)state;
	evaluated = 0;
	for (int i = 0; i < 100; i++)
		fire_two(i);
	assert_int_equal(evaluated, 0);
	assert_false(enabled_now());
}

static void test_attach_dispatch_and_refusal(void **state)
{
	(void)state;
	struct textbuf out;
	tb_init(&out, 1 << 16);
	assert_int_equal(xp_module_register("/unit/a.so", NULL, &mod_a, &out), XP_OK);
	assert_non_null(strstr(out.data, "loaded a.so: 3 attachments"));
	assert_true(enabled_now());

	evaluated = 0;
	fire_two(40);
	assert_int_equal(calls_a, 1);
	assert_int_equal(sum_a, 41);     /* 40 + the first evaluation */
	assert_int_equal(evaluated, 1); /* each argument once */
	fire_zero();
	assert_int_equal(calls_zero, 1);
	fire_twelve();
	assert_int_equal(calls_twelve, 1);

	tb_reset(&out);
	/* A refusal fails the load; the matching probe stays attached. */
	assert_int_equal(xp_module_register("/unit/b.so", NULL, &mod_b, &out), XP_ERR);
	assert_non_null(strstr(out.data,
			       "refused: unit_two -> wrong_types on unit_two in "));
	assert_non_null(strstr(out.data, "site has (long, int), probe declares (int, int)"));
	assert_non_null(strstr(out.data, "1 attachment, some refused"));

	tb_reset(&out);
	/* Every probe refused: the module is not loaded at all. */
	assert_int_equal(xp_module_register("/unit/c.so", NULL, &mod_c, &out), -EINVAL);
	assert_non_null(strstr(out.data, "every probe attachment of c.so was refused (1); "
					 "it was not loaded"));
	assert_null(strstr(out.data, "loaded c.so"));
	tb_reset(&out);
	assert_null(xp_module_find("c.so", &out));

	fire_two(1);
	assert_int_equal(calls_a, 2);
	assert_int_equal(calls_b, 1);
	assert_int_equal(order_ok, 1);
	tb_free(&out);
}

static void test_disable_enable(void **state)
{
	(void)state;
	struct textbuf out;
	tb_init(&out, 1 << 16);
	struct xp_module *a = xp_module_find("a.so", &out);
	assert_non_null(a);
	assert_int_equal(xp_module_set_enabled(a, 0, NULL), 0);
	xp_synchronize();
	assert_int_equal(xp_module_set_enabled(a, 0, NULL), -EALREADY);
	int a0 = calls_a, b0 = calls_b;
	fire_two(1);
	assert_int_equal(calls_a, a0);
	assert_int_equal(calls_b, b0 + 1);
	assert_int_equal(xp_module_set_enabled(a, 1, NULL), 0);
	fire_two(1);
	assert_int_equal(calls_a, a0 + 1);
	/* Load order holds after re-enabling: a still runs before b. */
	assert_int_equal(order_ok, 2);
	tb_free(&out);
}

static void test_unload_closes_the_gate(void **state)
{
	(void)state;
	struct textbuf out;
	tb_init(&out, 1 << 16);
	xp_module_unload(xp_module_find("b.so", &out));
	assert_true(enabled_now());
	xp_module_unload(xp_module_find("a.so", &out));
	assert_false(enabled_now());
	assert_int_equal(xp_agent.nmodules, 0);
	struct xp_site *two = find_site("unit_two");
	assert_int_equal(two->rec->gate->attached, 0);
	assert_null(two->rec->handlers);
	int a0 = calls_a;
	evaluated = 0;
	fire_two(1);
	assert_int_equal(calls_a, a0);
	assert_int_equal(evaluated, 0);
	assert_null(xp_module_find("a.so", &out));
	assert_non_null(strstr(out.data, "unknown module 'a.so'"));
	tb_free(&out);
}

static void test_sdt_semaphore_opens_the_branch_only(void **state)
{
	(void)state;
	struct xp_site *two = find_site("unit_two");
	/* What the kernel does while a uprobe is attached (ref_ctr). */
	two->rec->gate->sdt_semaphore++;
	evaluated = 0;
	int a0 = calls_a;
	fire_two(1);
	assert_int_equal(evaluated, 1); /* the SDT operands need the values */
	assert_int_equal(calls_a, a0);  /* but no XProbes handler runs */
	assert_true(enabled_now());
	two->rec->gate->sdt_semaphore--;
	assert_false(enabled_now());
}

static void test_ambiguous_and_duplicate_names(void **state)
{
	(void)state;
	struct textbuf out;
	tb_init(&out, 1 << 16);
	assert_int_equal(xp_module_register("/x/m.so", NULL, &mod_a, &out), XP_OK);
	assert_int_equal(xp_module_register("/y/m.so", NULL, &mod_a, &out), XP_OK);
	tb_reset(&out);
	assert_null(xp_module_find("m.so", &out));
	assert_non_null(strstr(out.data, "ambiguous"));
	struct xp_module *x = xp_module_find("/x/m.so", &out);
	assert_non_null(x);
	xp_module_unload(x);
	xp_module_unload(xp_module_find("m.so", &out));
	assert_int_equal(xp_agent.nmodules, 0);
	tb_free(&out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_discovery),
		cmocka_unit_test(test_detached_site_evaluates_nothing),
		cmocka_unit_test(test_attach_dispatch_and_refusal),
		cmocka_unit_test(test_disable_enable),
		cmocka_unit_test(test_unload_closes_the_gate),
		cmocka_unit_test(test_sdt_semaphore_opens_the_branch_only),
		cmocka_unit_test(test_ambiguous_and_duplicate_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
