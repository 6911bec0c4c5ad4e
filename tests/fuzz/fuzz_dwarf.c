/* SPDX-License-Identifier: MIT */
/* libFuzzer harness for the DWARF reader (tools/xprobes/trace_dwarf.c):
 * the input is an ELF file, as the object a traced process maps (anyone's
 * file, read by root's tool).  Its seeds are -g builds of
 * tests/trace/dwarf_prog.c (tests/fuzz.mk), so mutations reach libdw's
 * units, types and locations and our walk over them.
 *
 * Either the reader refuses with a message, or what it gives holds: every
 * function has a name and specs that fit one uftrace .dbg line each, within
 * the bounds; every enum text is "enum NAME {...}"; the .dbg text writes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../tools/xprobes/trace_dwarf.h"

static void fail(const char *why)
{
	fprintf(stderr, "fuzz_dwarf: %s\n", why);
	abort();
}

static void one_line(const char *s, size_t max)
{
	if (!s)
		fail("a NULL text");
	size_t n = strlen(s);
	if (n > max || strchr(s, '\n'))
		fail("a text that is no single bounded line");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[512];
	err[0] = '\0';
	struct xp_dwarf *d = xp_dwarf_open_mem(data, size, err, sizeof(err));
	if (!d) {
		if (!err[0] || !memchr(err, '\0', sizeof(err)))
			fail("a refusal without a message");
		return 0;
	}
	size_t n = xp_dwarf_nfuncs(d);
	if (n > XP_DWARF_MAX_FUNCS || xp_dwarf_nenums(d) > XP_DWARF_MAX_ENUMS)
		fail("over a bound");
	uint64_t prev = 0;
	for (size_t i = 0; i < n; i++) {
		const struct xp_dwarf_func *f = xp_dwarf_func(d, i);
		one_line(f->name, 4096);
		one_line(f->argspec, XP_DWARF_MAX_SPEC);
		one_line(f->retspec, XP_DWARF_MAX_SPEC);
		one_line(f->file, 4096);
		if (!f->name[0] || (i && f->offset < prev))
			fail("a nameless function, or out of order");
		if (f->argspec[0] && strncmp(f->argspec, "arg", 3) && strncmp(f->argspec, "fparg", 5))
			fail("an argspec that is no argument");
		if (f->retspec[0] && strncmp(f->retspec, "retval", 6))
			fail("a retspec that is no return value");
		prev = f->offset;
	}
	if (xp_dwarf_func(d, n))
		fail("a function past the end");
	for (size_t i = 0; i < xp_dwarf_nenums(d); i++) {
		const char *e = xp_dwarf_enum(d, i);
		one_line(e, SIZE_MAX);
		if (strncmp(e, "enum ", 5) || e[strlen(e) - 1] != '}')
			fail("an enum text out of form");
	}
	one_line(xp_dwarf_build_id(d), 128);
	FILE *out = fopen("/dev/null", "w");
	if (!out || xp_dwarf_print_dbg(d, "/fuzz/object", out))
		fail("the .dbg text did not write");
	fclose(out);
	xp_dwarf_close(d);
	return 0;
}
