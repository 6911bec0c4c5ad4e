/* SPDX-License-Identifier: MIT */
/* Trampolines: one page per instrumented object, within rel32 reach of
 * every patch site of it, holding `jmp *0(%rip); .quad hook`, so that a
 * site's 5-byte `call rel32` reaches the hook wherever the agent was
 * loaded.  Below both the sites' bookkeeping (trace_sites.c frees an
 * object's page when it goes) and the switching (trace_patch.c makes one
 * on an object's first switch). */
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "trace.h"

/* Until trace_hook.S brings the real one: a hook that records nothing.
 * `ret` is all it takes: the stack holds the return into the function. */
__asm__(".pushsection .text\n"
	".weak xp_trace_entry_hook\n"
	".type xp_trace_entry_hook, @function\n"
	"xp_trace_entry_hook:\n"
	"ret\n"
	".size xp_trace_entry_hook, . - xp_trace_entry_hook\n"
	".popsection\n");
void (*xp_trace_hook_target)(void) = xp_trace_entry_hook;

static uintptr_t page_size(void)
{
	return (uintptr_t)sysconf(_SC_PAGESIZE);
}

/* Can `call rel32` at every site in [lo, hi) reach t? */
static int reaches(uintptr_t t, uintptr_t lo, uintptr_t hi)
{
	intptr_t far_back = (intptr_t)(t - (lo + XP_TRACE_SITE_LEN));
	intptr_t far_fwd = (intptr_t)(t - hi);
	return far_back <= INT32_MAX && far_fwd >= INT32_MIN && far_back >= INT32_MIN &&
	       far_fwd <= INT32_MAX;
}

/* A page near [lo, hi): MAP_FIXED_NOREPLACE at addresses moving away from
 * the object on both sides, a page at a time close by, then a MiB. */
static void *tramp_map(uintptr_t lo, uintptr_t hi)
{
	uintptr_t pg = page_size();
	uintptr_t below = lo & ~(pg - 1), above = (hi + pg - 1) & ~(pg - 1);
	for (uintptr_t step = 1; step < 2200; step++) {
		uintptr_t dist = step <= 64 ? step * pg : (step - 64) << 20;
		uintptr_t cand[2] = { below - dist, above + dist - pg };
		int any = 0;
		for (int k = 0; k < 2; k++) {
			if (cand[k] < 0x10000 || !reaches(cand[k], lo, hi) ||
			    !reaches(cand[k] + pg, lo, hi))
				continue;
			any = 1;
			void *p = mmap((void *)cand[k], pg, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
			if (p == MAP_FAILED)
				continue;
			/* A kernel before 4.17 takes the flag as a hint only. */
			if (reaches((uintptr_t)p, lo, hi) && reaches((uintptr_t)p + pg, lo, hi))
				return p;
			munmap(p, pg);
		}
		if (!any && dist > (1ul << 31))
			break;
	}
	return NULL;
}

/* jmp *0(%rip); .quad hook: any hook address, so one page serves. */
void *xp_trace_tramp_new(const struct xp_trace_object *o)
{
	uint8_t *p = xp_fault() ? NULL : tramp_map(o->sites[0], o->sites[o->nsites - 1] + XP_TRACE_SITE_LEN);
	if (!p)
		return NULL;
	uintptr_t pg = page_size();
	memset(p, 0xcc, pg);
	static const uint8_t jmp[6] = { 0xff, 0x25, 0, 0, 0, 0 };
	memcpy(p, jmp, sizeof(jmp));
	uintptr_t hook = (uintptr_t)xp_trace_hook_target;
	memcpy(p + sizeof(jmp), &hook, sizeof(hook));
	if (mprotect(p, pg, PROT_READ | PROT_EXEC) != 0) {
		munmap(p, pg);
		return NULL;
	}
	return p;
}

void xp_trace_tramp_free(void *tramp)
{
	munmap(tramp, page_size());
}
