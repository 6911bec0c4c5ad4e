/* SPDX-License-Identifier: MIT */
/* Built by tests/trace/test_trace_patch_build.py in many ways (compiler,
 * -O level, PIE or not, --gc-sections, LTO), with the xprobes-trace flags
 * and linked with the agent's objects: finds its own patch sites and those
 * of a traced library it dlopen()s, switches them all on and off, and says
 * what it saw.  argv: LIBRARY LIB_SITES LIB_UNPATCHABLE (what the library
 * must show: its 2 functions as sites, or as gcc NOPs left unpatchable). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>

#include "trace/trace.h"

#include <xprobes/trace.h>

__attribute__((noinline)) int check_twice(int x)
{
	return 2 * x;
}

__attribute__((noinline)) int check_thrice(int x)
{
	return 3 * x;
}

XPROBES_NOTRACE __attribute__((noinline)) int check_untraced(int x)
{
	return x + 1;
}

static int failed;
#define CHECK(cond)                                                        \
	do {                                                               \
		if (!(cond)) {                                             \
			printf("FAILED line %d: %s\n", __LINE__, #cond);   \
			failed = 1;                                        \
		}                                                          \
	} while (0)

static const struct xp_trace_object *object_at(uintptr_t base)
{
	for (size_t i = 0; i < xp_trace_nobjects; i++)
		if (xp_trace_objects[i]->base == base)
			return xp_trace_objects[i];
	return NULL;
}

static int is_site(const struct xp_trace_object *o, uintptr_t a)
{
	for (size_t i = 0; o && i < o->nsites; i++)
		if (o->sites[i] == a)
			return 1;
	return 0;
}

static int results(int (*sq)(int))
{
	return check_twice(5) + check_thrice(5) + check_untraced(5) + sq(5);
}

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	void *h = dlopen(argv[1], RTLD_NOW);
	struct link_map *lm = NULL;
	if (!h || dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0) {
		printf("dlopen: %s\n", dlerror());
		return 1;
	}
	int (*sq)(int);
	*(void **)&sq = dlsym(h, "tracee_square");
	int expect = results(sq);

	CHECK(xp_trace_objects_refresh() == 0);
	const struct xp_trace_object *lib = object_at(lm->l_addr);
	const struct xp_trace_object *prog = NULL;
	for (size_t i = 0; i < xp_trace_nobjects; i++)
		if (is_site(xp_trace_objects[i], (uintptr_t)check_twice))
			prog = xp_trace_objects[i];
	CHECK(prog != NULL);
	CHECK(is_site(prog, (uintptr_t)check_thrice));
	CHECK(!is_site(prog, (uintptr_t)check_untraced));
	CHECK(lib != NULL);
	CHECK(lib && lib->nsites == strtoul(argv[2], NULL, 10));
	CHECK(xp_trace_nunpatchable == strtoul(argv[3], NULL, 10));
	if (lib && lib->nsites)
		CHECK(is_site(lib, (uintptr_t)sq));

	CHECK(xp_trace_patch_on(NULL, 0) == 0);
	CHECK(((const unsigned char *)(uintptr_t)check_twice)[0] == XP_TRACE_CALL);
	CHECK(results(sq) == expect);
	CHECK(xp_trace_patch_off() == 0);
	CHECK(xp_trace_site_is_nop((const unsigned char *)(uintptr_t)check_twice));
	CHECK(results(sq) == expect);
	printf("%s prog=%zu lib=%zu unpatchable=%zu\n", failed ? "FAILED" : "ok",
	       prog ? prog->nsites : 0, lib ? lib->nsites : 0, xp_trace_nunpatchable);
	return failed;
}
