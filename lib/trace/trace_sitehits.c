/* SPDX-License-Identifier: MIT */
/* XProbes site hits in the function graph: while tracing, every
 * site the agent knows gets one more handler, first in its list, which
 * records the hit (a SITE record whose address is the site's record; the
 * tool prints it as a provider:name comment where it happened).
 *
 * A handler is called with the site's own arguments, so it cannot tell
 * which site called it: each site gets a thunk of its own,
 *
 *   movabs $record, %rdi ; movabs $xp_trace_site_hit, %rax ; jmp *%rax
 *
 * (rdi and rax are the caller's to lose in any call).  Thunks are written
 * into fresh pages, made read-only and executable, and never changed or
 * freed: a thread can still be inside one after its list was retired, and
 * the next start reuses it.  The lists change through the ordinary plan
 * (lib/probes/publish.c), all or nothing. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../probes/probes.h"
#include "trace.h"

#define THUNK_SIZE 32

static void write_thunk(unsigned char *p, const void *rec)
{
	uint64_t arg = (uintptr_t)rec, fn = (uintptr_t)xp_trace_site_hit;
	p[0] = 0x48, p[1] = 0xbf; /* movabs imm64, %rdi */
	memcpy(p + 2, &arg, 8);
	p[10] = 0x48, p[11] = 0xb8; /* movabs imm64, %rax */
	memcpy(p + 12, &fn, 8);
	p[20] = 0xff, p[21] = 0xe0; /* jmp *%rax */
	memset(p + 22, 0xcc, THUNK_SIZE - 22);
}

/* Thunks for every site without one.  0, or a negative errno (none made). */
static int make_thunks(void)
{
	size_t need = 0;
	for (size_t i = 0; i < xp_agent.nobjects; i++)
		for (size_t j = 0; j < xp_agent.objects[i]->nsites; j++)
			need += !xp_agent.objects[i]->sites[j]->trace_thunk;
	if (!need)
		return 0;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t len = (need * THUNK_SIZE + page - 1) / page * page;
	unsigned char *mem = xp_fault() ? MAP_FAILED :
		mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		return -ENOMEM;
	unsigned char *p = mem;
	for (size_t i = 0; i < xp_agent.nobjects; i++)
		for (size_t j = 0; j < xp_agent.objects[i]->nsites; j++)
			if (!xp_agent.objects[i]->sites[j]->trace_thunk) {
				write_thunk(p, xp_agent.objects[i]->sites[j]->rec);
				p += THUNK_SIZE;
			}
	if (xp_fault() || mprotect(mem, len, PROT_READ | PROT_EXEC) != 0) {
		int rc = -errno;
		munmap(mem, len);
		return rc ? rc : -ENOMEM;
	}
	p = mem;
	for (size_t i = 0; i < xp_agent.nobjects; i++)
		for (size_t j = 0; j < xp_agent.objects[i]->nsites; j++)
			if (!xp_agent.objects[i]->sites[j]->trace_thunk) {
				xp_agent.objects[i]->sites[j]->trace_thunk = p;
				p += THUNK_SIZE;
			}
	return 0;
}

int xp_trace_site_hits(int on)
{
	if (on) {
		int rc = make_thunks();
		if (rc)
			return rc;
	}
	struct xp_plan plan = { 0 };
	for (size_t i = 0; i < xp_agent.nobjects; i++) {
		for (size_t j = 0; j < xp_agent.objects[i]->nsites; j++) {
			struct xp_site *s = xp_agent.objects[i]->sites[j];
			void (*want)(void) = on ? (void (*)(void))s->trace_thunk : NULL;
			if (s->trace_fn == want)
				continue;
			/* The list is built from trace_fn as it is while planning. */
			void (*was)(void) = s->trace_fn;
			s->trace_fn = want;
			int rc = xp_plan_site(&plan, s, NULL, 0);
			s->trace_fn = was;
			if (rc) {
				xp_plan_abort(&plan);
				return rc;
			}
		}
	}
	xp_plan_commit(&plan);
	for (size_t i = 0; i < xp_agent.nobjects; i++)
		for (size_t j = 0; j < xp_agent.objects[i]->nsites; j++) {
			struct xp_site *s = xp_agent.objects[i]->sites[j];
			s->trace_fn = on ? (void (*)(void))s->trace_thunk : NULL;
		}
	return 0;
}
