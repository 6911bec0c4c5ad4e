# SPDX-License-Identifier: MIT
"""The generated header and the -G object in the language modes projects
build in, with their strict warnings and -Werror, like the systemtap stub's
header: gnu89 (with -Wdeclaration-after-statement; variadic macros rule out
-pedantic there), c99 and gnu99 with -pedantic (memcached: gnu99).  gnu11
and c11 are what the rest of tests/dtrace builds with.  The -G object is
compiled by xprobes-dtrace with the same $CC and $CFLAGS, as an autoconf
build passes them.  Each program runs with the agent, and a module counts
its hits with their arguments converted to the .d types."""
import pytest

from .dx import LIBDIR, STRICT, dtrace, have, ok, run, xprobes

MODES = {
    "gnu89": ["-std=gnu89", "-Wdeclaration-after-statement"],
    "c99-pedantic": ["-std=c99"],
    "gnu99-pedantic": ["-std=gnu99"],
}
CASES = [("gcc", "gnu89"), ("gcc", "c99-pedantic"), ("gcc", "gnu99-pedantic"),
         ("clang", "gnu89"), ("clang", "c99-pedantic")]

# The protocol of data/prog.c (tick N, all, enabled), in C that gnu89
# accepts: no declaration in a for or after a statement, no // comments.
PROG = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct xpd_thing {
	int x;
};

#include "xpdtest.h"

static struct xpd_thing thing = { 42 };

static void tick(long i)
{
	if (i % 2)
		XPDTEST_TICK(i, "label", (uint64_t)i << 33, &thing);
	else
		XPDTEST_TICK((char)i, "label", (uint64_t)i << 33, (void *)&thing);
}

static void all(void)
{
	char buf[8] = "buf";
	const char *cs = "const";
	XPDTEST_NOARGS();
	XPDTEST_VOIDARGS();
	XPDTEST_STR_ARG(cs);
	XPDTEST_ANON(1, buf, 2, &thing);
	XPDTEST_MANY(-1, 2, -3, 4, -5, 6, -7, 8, (uintptr_t)&thing, buf, cs, 12L);
	XPDTEST_NEG_VALUE(-1, -2, -3);
	XPDTEST_LIB_CALL(1);
}

int main(void)
{
	char line[128];
	long i, n;

	printf("ready %ld\n", (long)getpid());
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = '\0';
		if (sscanf(line, "tick %ld", &n) == 1) {
			for (i = 1; i <= n; i++)
				tick(i);
			printf("tick %ld done\n", n);
		} else if (!strcmp(line, "all")) {
			all();
			printf("all done\n");
		} else if (!strcmp(line, "enabled")) {
			printf("enabled tick=%d lib=%d\n", XPDTEST_TICK_ENABLED() ? 1 : 0,
			       XPDTEST_LIB_CALL_ENABLED() ? 1 : 0);
		} else {
			printf("unknown command\n");
		}
		fflush(stdout);
	}
	return 0;
}
"""


def flags(mode):
    strict = [f for f in STRICT if f != "-pedantic" or mode != "gnu89"]
    return MODES[mode] + strict


@pytest.mark.parametrize("cc,mode", CASES, ids=[f"{c}-{m}" for c, m in CASES])
def test_header_and_gates_in_language_mode(built, progs, tmp_path, cc, mode):
    if not have(cc):
        pytest.skip(cc + " is not installed")
    cflags = flags(mode)
    # The -G object, compiled by xprobes-dtrace with the project's compiler
    # and flags: it defines the gates (struct xprobes_gate, anonymous
    # members) in the same mode.
    ok(dtrace("-G", "-s", built.d_file, "-o", "gates.o", cwd=tmp_path,
              extra_env={"CC": cc, "CFLAGS": " ".join(cflags)}))
    (tmp_path / "prog.c").write_text(PROG)
    # built.dir holds the -h header, rewritten by memcached's sed and tr.
    run([cc, *cflags, "-I", built.dir, "-o", "prog", "prog.c", "gates.o", "-L", LIBDIR,
         f"-Wl,-rpath,{LIBDIR}", "-Wl,--no-as-needed", "-lxprobes"], cwd=tmp_path)

    p = progs(str(tmp_path / "prog"))
    sites = ok(xprobes(p.pid, "sites"))
    assert "xpdtest:tick(int, const char*, uint64_t, void*)" in sites
    assert "xpdtest:noargs()" in sites
    assert "xpdtest:many(int8_t, uint8_t, int16_t, uint16_t, int32_t, uint32_t, " \
           "int64_t, uint64_t, uintptr_t, char*, const void*, long)" in sites
    assert p.enabled() == {"tick": False, "lib": False}
    out = ok(xprobes(p.pid, "load", built.module))
    assert "refused" not in out, out
    assert p.enabled() == {"tick": True, "lib": True}
    assert p.ask("tick 20") == "tick 20 done"
    assert p.ask("all") == "all done"
    # Every tick seen with its arguments as the .d declares them (the
    # module counts any that are not as bad); lib__call fired once.
    assert ok(xprobes(p.pid, "command", "mod_xpd.so", "count")).strip() == "count 20 1 0"
    ok(xprobes(p.pid, "unload", "mod_xpd.so"))
    assert p.enabled() == {"tick": False, "lib": False}
