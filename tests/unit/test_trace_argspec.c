/* SPDX-License-Identifier: MIT */
/* Argument specs (tools/xprobes/trace_argspec.c) and values
 * (trace_argfmt.c): uftrace's syntax and merge, the agent's items, info's
 * text, the ring payload checked and laid out as uftrace lays it out, the
 * text uftrace replay shows, and the records put back together from
 * whatever a target wrote. */
#include "unit.h"

#include "../../tools/xprobes/trace_bounds.c"
#include "../../tools/xprobes/trace_argspec.c"
#include "../../tools/xprobes/trace_argfmt.c"

static char why[TRACE_WHY_SIZE];

static void test_items(void **state)
{
	(void)state;
	struct argspecs a = { 0 };
	assert_int_equal(argspec_option(&a, "f@arg1/i8,fparg2/32,arg3/s,arg4/c,arg5/p,arg6/u16,"
					"retval/f", why, sizeof(why)), 0);
	const struct ta_item *it = a.rule[0].item;
	assert_int_equal(a.rule[0].n, 7);
	assert_true(it[0].kind == TA_ARG && it[0].fmt == TA_SINT && it[0].size == 1 && it[0].idx == 1);
	assert_true(it[1].kind == TA_FPARG && it[1].fmt == TA_FLOAT && it[1].size == 4 && it[1].idx == 2);
	assert_true(it[2].fmt == TA_STR && it[3].fmt == TA_CHAR && it[3].size == 1);
	assert_true(it[4].fmt == TA_PTR && it[4].size == 8 && it[5].fmt == TA_UINT && it[5].size == 2);
	assert_true(it[6].kind == TA_RETVAL && it[6].fmt == TA_FLOAT && it[6].size == 8);
	argspecs_free(&a);
}

static void test_bad_specs(void **state)
{
	(void)state;
	static const char *const bad_ones[] = {
		"f@arg0", "f@arg17", "f@arg1/q", "f@fparg9", "f@fparg0", "f@arg1/s32", "f@arg1/c8",
		"f@arg1/f", "f@arg1/e", "f@arg1/e:", "f@arg1/S", "f@arg1/t8:pt", "f@arg1%stack+11", "f@arg1%stack+0",
		"f@arg1%rax", "f@fparg1%rdi", "f@arg1%xmm0", "f", "f@", "@arg1",
		"f@retval/i12", "f@fparg1/80", "f@arg1,arg2,arg3,arg4,arg5,arg6,arg7,arg8,arg9",
		"f@arg1/i128", "f@arg", "f@arg1x", "f@ret", "[f@arg1",
	};
	for (size_t i = 0; i < sizeof(bad_ones) / sizeof(bad_ones[0]); i++) {
		struct argspecs a = { 0 };
		why[0] = '\0';
		if (argspec_option(&a, bad_ones[i], why, sizeof(why)) != -1)
			fail_msg("'%s' was taken", bad_ones[i]);
		assert_true(why[0] != '\0');
		assert_int_equal(a.nrules, 0);
		argspecs_free(&a);
	}
}

/* -a's items: an enum (a machine word, named), a register location (what
 * the agent reads), and, reading uftrace's recordings only, a struct. */
static void test_auto_items(void **state)
{
	(void)state;
	struct argspecs a = { 0 };
	struct ta_spec s = { 0 };
	char buf[128];
	assert_int_equal(argspec_enum(&a, "enum color {BLUE=-3,RED=0,GREEN=5}"), 0);
	assert_int_equal(argspec_parse_auto(&a, "arg1/e:color,fparg1/32,arg2%RDX", 0, &s, why,
					    sizeof(why)), 0);
	struct ta_spec st = { 0 };
	char words[64];
	assert_int_equal(argspec_parse_auto(&a, "arg7%stack+2,fparg8/64%stack+1", 0, &st, why,
					    sizeof(why)), 0);
	ta_items_text(&st, words, sizeof(words));
	assert_string_equal(words, "i8,i7"); /* the words above the return address */
	assert_int_equal(argspec_parse_auto(&a, "retval/e:color", 1, &s, why, sizeof(why)), 0);
	assert_int_equal(s.nargs, 3);
	assert_true(s.arg[0].fmt == TA_ENUM && s.arg[0].size == 8 && s.has_ret);
	assert_int_equal(s.arg[2].reg, 3); /* rdx: the agent's i3 */
	assert_int_equal(ta_items_text(&s, buf, sizeof(buf)), (int)strlen("i1,f1,i3,r"));
	assert_string_equal(buf, "i1,f1,i3,r");
	/* A struct by value is uftrace's alone. */
	assert_int_equal(argspec_parse_auto(&a, "arg1/t8:pt", 0, &s, why, sizeof(why)), -1);
	a.lenient = 1;
	assert_int_equal(argspec_parse_auto(&a, "arg1/t8:pt%RSI,arg2%stack+1", 0, &s, why,
					    sizeof(why)), 0);
	assert_true(s.arg[0].fmt == TA_STRUCT && s.arg[0].size == 8);
	assert_string_equal(s.arg[0].name, "pt");
	/* Shown by name; a value the enum has no name for, as a number. */
	struct ta_spec e = { 0 };
	assert_int_equal(argspec_parse_auto(&a, "arg1/e:color,arg2/e:color", 0, &e, why,
					    sizeof(why)), 0);
	uint8_t p[16] = { 0 };
	uint32_t v1 = (uint32_t)-3, v2 = 7;
	memcpy(p, &v1, 4);
	memcpy(p + 8, &v2, 4);
	assert_string_equal(ta_format(&e, 0, p, 16, buf, sizeof(buf)), "BLUE, 7");
	argspecs_free(&a);
}

/* -A's arguments replace -a's whole, -R's return value -a's (uftrace). */
static void test_merge_auto(void **state)
{
	(void)state;
	struct argspecs a = { 0 };
	struct ta_spec autos = { 0 }, user = { 0 }, m;
	assert_int_equal(argspec_parse_auto(&a, "arg1,arg2/s", 0, &autos, why, sizeof(why)), 0);
	assert_int_equal(argspec_parse_auto(&a, "retval", 1, &autos, why, sizeof(why)), 0);
	assert_int_equal(argspec_parse_auto(&a, "arg3/x", 0, &user, why, sizeof(why)), 0);
	argspec_merge_auto(&m, &autos, &user);
	assert_int_equal(m.nargs, 1);
	assert_true(m.arg[0].idx == 3 && m.has_ret && m.ret.fmt == TA_AUTO);
	user = (struct ta_spec){ 0 };
	assert_int_equal(argspec_parse_auto(&a, "retval/x", 1, &user, why, sizeof(why)), 0);
	argspec_merge_auto(&m, &autos, &user);
	assert_true(m.nargs == 2 && m.ret.fmt == TA_HEX);
	argspec_merge_auto(&m, &autos, NULL);
	assert_true(m.nargs == 2 && m.has_ret);
	argspecs_free(&a);
}

/* uftrace's merge: in place for the same argument, new ones at the end. */
static void test_merge(void **state)
{
	(void)state;
	struct argspecs a = { 0 };
	struct ta_spec s;
	assert_int_equal(argspec_option(&a, "f*@arg1,arg2", why, sizeof(why)), 0);
	assert_int_equal(argspec_option(&a, "foo@arg1/x,fparg1,arg2/s", why, sizeof(why)), 0);
	assert_int_equal(argspec_option(&a, "foo@retval/u32", why, sizeof(why)), 0);
	assert_int_equal(argspec_option(&a, "bar@retval", why, sizeof(why)), 0);
	assert_int_equal(argspec_match(&a, "foo", &s, why, sizeof(why)), 1);
	assert_int_equal(s.nargs, 3);
	assert_true(s.arg[0].idx == 1 && s.arg[0].fmt == TA_HEX);
	assert_true(s.arg[1].idx == 2 && s.arg[1].fmt == TA_STR);
	assert_true(s.arg[2].kind == TA_FPARG);
	assert_true(s.has_ret && s.ret.fmt == TA_UINT && s.ret.size == 4);
	char items[64];
	assert_int_equal(ta_items_text(&s, items, sizeof(items)), 10);
	assert_string_equal(items, "i1,s2,f1,r");
	assert_int_equal(argspec_match(&a, "fx", &s, why, sizeof(why)), 1);
	assert_int_equal(ta_items_text(&s, items, sizeof(items)), 5);
	assert_string_equal(items, "i1,i2");
	assert_int_equal(argspec_match(&a, "baz", &s, why, sizeof(why)), 0);
	assert_true(a.rule[0].matched && a.rule[1].matched && !a.rule[3].matched);

	/* Over 8 items for one function, from two rules: said. */
	assert_int_equal(argspec_option(&a, "many@arg1,arg2,arg3,arg4,arg5,arg6,arg7,arg8", why,
					sizeof(why)), 0);
	assert_int_equal(argspec_option(&a, "many@retval", why, sizeof(why)), 0);
	assert_int_equal(argspec_match(&a, "many", &s, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "many: more than 8"));

	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	argspec_info(&a, 0, f);
	fputc('|', f);
	argspec_info(&a, 1, f);
	fclose(f);
	assert_string_equal(text, "f*@arg1,arg2;foo@arg1/x64,fparg1,arg2/s;"
				  "many@arg1,arg2,arg3,arg4,arg5,arg6,arg7,arg8|"
				  "foo@retval/u32;bar@retval;many@retval");
	free(text);

	/* Bound by address; a rebind replaces. */
	assert_null(argspec_find(&a, 0x1000));
	assert_int_equal(argspec_match(&a, "foo", &s, why, sizeof(why)), 1);
	assert_int_equal(argspec_bind(&a, 0x1000, &s), 0);
	assert_int_equal(argspec_find(&a, 0x1000)->nargs, 3);
	argspecs_free(&a);
}

static void test_regex_patterns(void **state)
{
	(void)state;
	struct argspecs a = { .regex = 1 };
	struct ta_spec s;
	assert_int_equal(argspec_option(&a, "m.ny@arg8", why, sizeof(why)), 0);
	assert_int_equal(argspec_option(&a, "str@arg1/s", why, sizeof(why)), 0);
	assert_int_equal(argspec_match(&a, "xmanyx", &s, why, sizeof(why)), 1); /* unanchored */
	assert_int_equal(argspec_match(&a, "strlen", &s, why, sizeof(why)), 0); /* a plain name */
	assert_int_equal(argspec_match(&a, "str", &s, why, sizeof(why)), 1);
	assert_int_equal(argspec_option(&a, "(@arg1", why, sizeof(why)), -1);
	argspecs_free(&a);
}

/* A payload's bytes, as the agent writes them. */
struct pay {
	uint8_t b[TA_PAYLOAD_MAX];
	size_t n;
};

static void p_u64(struct pay *p, uint64_t v)
{
	memcpy(p->b + p->n, &v, 8);
	p->n += 8;
}

static void p_str(struct pay *p, int status, const char *s, size_t len)
{
	p->b[p->n++] = (uint8_t)status;
	if (status <= 1) {
		p->b[p->n++] = (uint8_t)len;
		memcpy(p->b + p->n, s, len);
		p->n += len;
	}
}

static struct ta_spec spec_of(const char *text)
{
	struct argspecs a = { 0 };
	struct ta_spec s;
	assert_int_equal(argspec_option(&a, text, why, sizeof(why)), 0);
	assert_int_equal(argspec_match(&a, "f", &s, why, sizeof(why)), 1);
	argspecs_free(&a);
	return s;
}

static void test_uftrace_layout(void **state)
{
	(void)state;
	struct ta_spec s = spec_of("f@arg1/s,arg2/i8,arg3");
	struct pay p = { .n = 0 };
	p_str(&p, 0, "hello", 5);
	p_u64(&p, (uint64_t)-5);
	p_u64(&p, 7);
	uint8_t u[TA_UFT_MAX];
	/* 2 + 5 -> 8; i8 -> 4; d64 -> 8: 20, the block 24. */
	assert_int_equal(ta_to_uftrace(&s, 0, p.b, p.n, u), 24);
	assert_memory_equal(u, "\x05\x00hello\x00\xfb\xff\xff\xff\x07\0\0\0\0\0\0\0\0\0\0\0", 24);
	char text[256];
	assert_string_equal(ta_format(&s, 0, p.b, p.n, text, sizeof(text)), "\"hello\", -5, 7");
	/* And back, as a recording uftrace wrote is read. */
	uint8_t back[TA_PAYLOAD_MAX];
	size_t used;
	size_t n = ta_from_uftrace(&s, 0, u, 24, back, &used);
	assert_int_equal(used, 24);
	assert_string_equal(ta_format(&s, 0, back, n, text, sizeof(text)), "\"hello\", -5, 7");
	assert_int_equal(ta_from_uftrace(&s, 0, u, 12, back, &used), 0); /* cut */

	/* NULL, unreadable, and too long: as uftrace stores them. */
	struct ta_spec one = spec_of("f@arg1/s");
	static const struct {
		int status;
		const char *s;
		size_t len;
		const char *shown;
	} cases[] = {
		{ 2, "", 0, "\"NULL\"" },
		{ 1, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		  100, "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...\"" },
		{ 0, "tab\tnl\n\x01\xff", 9, "\"tab\tnl\\n\\x01\\xff\"" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pay q = { .n = 0 };
		p_str(&q, cases[i].status, cases[i].s, cases[i].len);
		assert_string_equal(ta_format(&one, 0, q.b, q.n, text, sizeof(text)), cases[i].shown);
	}
	struct pay q = { .n = 0 };
	p_str(&q, 3, NULL, 0);
	p_u64(&q, 0x8);
	assert_string_equal(ta_format(&one, 0, q.b, q.n, text, sizeof(text)), "\"<0x8>\"");
}

static void test_numbers(void **state)
{
	(void)state;
	static const struct {
		const char *spec;
		uint64_t raw;
		const char *shown;
	} cases[] = {
		{ "f@arg1/d32", 0xfffffffbu, "-5" },        /* a small negative int */
		{ "f@arg1", (uint64_t)-5, "-5" },
		{ "f@arg1", (uint64_t)-5000000000LL, "0xfffffffed5fa0e00" },
		{ "f@arg1", 100000, "100000" },
		{ "f@arg1", 100001, "0x186a1" },
		{ "f@arg1/d32", 200000, "0x30d40" },
		{ "f@arg1/u32", 4000000000u, "0xee6b2800" },
		{ "f@arg1/u8", 0x1c8, "200" },
		{ "f@arg1/i16", 0xfed4, "-300" },
		{ "f@arg1/x", 0, "0" },
		{ "f@arg1/x8", 0x1ff, "0xff" },
		{ "f@arg1/c", 'A', "'A'" },
		{ "f@arg1/c", '\n', "'\\n'" },
		{ "f@arg1/p", 0, "0" },
		{ "f@arg1/p", 0x1234, "0x1234" },
		{ "f@fparg1", 0x3ff8000000000000u, "1.500000" },
		{ "f@fparg1/32", 0x40100000u, "2.250000" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct ta_spec s = spec_of(cases[i].spec);
		struct pay p = { .n = 0 };
		char text[64];
		p_u64(&p, cases[i].raw);
		const char *got = ta_format(&s, 0, p.b, p.n, text, sizeof(text));
		if (!got || strcmp(got, cases[i].shown))
			fail_msg("%s of 0x%" PRIx64 ": '%s', not '%s'", cases[i].spec, cases[i].raw,
				 got ? got : "(null)", cases[i].shown);
	}
	struct ta_spec r = spec_of("f@retval/f");
	struct pay p = { .n = 0 };
	char text[64];
	p_u64(&p, 0x400b000000000000u);
	assert_string_equal(ta_format(&r, 1, p.b, p.n, text, sizeof(text)), "3.375000");
}

/* Whatever the target wrote: refused whole when it is not what the spec makes. */
static void test_hostile_payloads(void **state)
{
	(void)state;
	struct ta_spec s = spec_of("f@arg1/s,arg2");
	uint8_t u[TA_UFT_MAX];
	struct pay p = { .n = 0 };
	p_str(&p, 0, "abc", 3);
	p_u64(&p, 1);
	assert_int_not_equal(ta_to_uftrace(&s, 0, p.b, p.n, u), 0);
	assert_int_equal(ta_to_uftrace(&s, 0, p.b, p.n - 1, u), 0); /* short */
	assert_int_equal(ta_to_uftrace(&s, 0, p.b, p.n + 1, u), 0); /* a byte too many */
	p.b[0] = 4;                                                 /* no such status */
	assert_int_equal(ta_to_uftrace(&s, 0, p.b, p.n, u), 0);
	p.b[0] = 0;
	p.b[1] = 200;                                               /* longer than kept */
	assert_int_equal(ta_to_uftrace(&s, 0, p.b, p.n, u), 0);
	p.b[1] = 30;                                                /* past the payload */
	assert_int_equal(ta_to_uftrace(&s, 0, p.b, p.n, u), 0);
	assert_int_equal(ta_to_uftrace(&s, 1, p.b, p.n, u), 0);     /* no return value asked */
	/* uftrace's layout claiming a string past its end. */
	uint8_t bad[8] = { 0xff, 0xff, 'a' };
	size_t used;
	uint8_t back[TA_PAYLOAD_MAX];
	assert_int_equal(ta_from_uftrace(&s, 0, bad, sizeof(bad), back, &used), 0);
}

static void test_records(void **state)
{
	(void)state;
	uint8_t p[40], got[TA_PAYLOAD_MAX];
	for (size_t i = 0; i < sizeof(p); i++)
		p[i] = (uint8_t)(0xa0 + i);
	struct tf_event ev[8] = { { 5, 0x1000, XP_TRACE_ENTRY } };
	size_t n = 1 + ta_encode(p, sizeof(p), 5, ev + 1); /* a header and 3 data records */
	assert_int_equal(n, 5);
	ev[n++] = (struct tf_event){ 9, 0x1000, XP_TRACE_EXIT };
	size_t len;
	assert_int_equal(ta_collect(ev, n, 1, got, &len), 4);
	assert_int_equal(len, sizeof(p));
	assert_memory_equal(got, p, sizeof(p));
	assert_true(ta_is_header(&ev[1]) && ta_is_data(&ev[2]) && !ta_is_data(&ev[1]));
	assert_int_equal(ta_last_ns(ev, 5, 0), 5);
	assert_int_equal(ta_collect(ev, n, 0, got, &len), 0);     /* no header */
	assert_int_equal(ta_collect(ev, 4, 1, got, &len), 0);     /* cut at the end */
	struct tf_event gap[8];
	memcpy(gap, ev, sizeof(gap));
	gap[3] = (struct tf_event){ 7, 0x2000, XP_TRACE_ENTRY }; /* one missing */
	assert_int_equal(ta_collect(gap, n, 1, got, &len), 0);
	gap[1].addr = XP_TRACE_LABEL | XP_TRACE_LABEL_ARGS | 2000; /* too long */
	assert_int_equal(ta_collect(gap, n, 1, got, &len), 0);
	gap[1].addr = XP_TRACE_LABEL | XP_TRACE_LABEL_ARGS;        /* empty */
	assert_int_equal(ta_collect(gap, n, 1, got, &len), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_items),
		cmocka_unit_test(test_bad_specs),
		cmocka_unit_test(test_merge),
		cmocka_unit_test(test_auto_items),
		cmocka_unit_test(test_merge_auto),
		cmocka_unit_test(test_regex_patterns),
		cmocka_unit_test(test_uftrace_layout),
		cmocka_unit_test(test_numbers),
		cmocka_unit_test(test_hostile_payloads),
		cmocka_unit_test(test_records),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
