/* SPDX-License-Identifier: MIT */
/* What another tool did to the tracer's sites: the bytes of an entry
 * classified, and the sites the tracer switched on checked against the
 * text as it is now (`trace status`).
 *
 * A uprobe (bpftrace, perf probe) writes an int3 on the first byte of a
 * function, decodes the instruction from the file (not from the process),
 * emulates or steps it, and resumes after the file's instruction.  Linux
 * 6.18 also turns a uprobe on a 5-byte NOP into a call to its own
 * trampoline once hit, and on removal writes the file's five bytes back.
 * So, with the tracer:
 *   - clang's entry switched to our call, under a uprobe: the kernel runs
 *     the file's NOP instead of our call (the calls go unrecorded while
 *     the probe is there), and the probe's removal puts the file's NOP
 *     back: the site is no longer traced though the tracer switched it;
 *   - gcc's entry switched to our call, under a uprobe: the kernel runs
 *     the file's 1-byte 0x90 and resumes inside our call: the process
 *     dies at its next call there.  Nothing here can prevent that; this
 *     file makes it visible, and docs/guide.md says not to do it.
 * The tracer never switches an entry that carries another tool's bytes
 * (trace_sites.c does not take it), and says how many it left.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "trace.h"

/* The sites switched on since the last successful stop, sorted. */
static uintptr_t *switched;
static size_t nswitched;

static int cmp_addr(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
	return x < y ? -1 : x > y;
}

void xp_trace_verify_remember(void)
{
	size_t n = nswitched;
	for (size_t i = 0; i < xp_trace_nobjects; i++)
		for (size_t j = 0; j < xp_trace_objects[i]->nsites; j++)
			n += xp_trace_objects[i]->on[j];
	uintptr_t *all = xp_realloc(switched, (n ? n : 1) * sizeof(*all));
	if (!all)
		return; /* the old list stands: status checks fewer sites */
	switched = all;
	for (size_t i = 0; i < xp_trace_nobjects; i++)
		for (size_t j = 0; j < xp_trace_objects[i]->nsites; j++)
			if (xp_trace_objects[i]->on[j])
				switched[nswitched++] = xp_trace_objects[i]->sites[j];
	qsort(switched, nswitched, sizeof(*switched), cmp_addr);
	size_t kept = 0;
	for (size_t i = 0; i < nswitched; i++)
		if (!kept || switched[i] != switched[kept - 1])
			switched[kept++] = switched[i];
	nswitched = kept;
}

void xp_trace_verify_forget(void)
{
	free(switched);
	switched = NULL;
	nswitched = 0;
}

/* The state of a known site: its object's own view after the refresh. */
static int known_state(uintptr_t a, int *state)
{
	for (size_t i = 0; i < xp_trace_nobjects; i++) {
		const struct xp_trace_object *o = xp_trace_objects[i];
		uintptr_t *p = bsearch(&a, o->sites, o->nsites, sizeof(uintptr_t), cmp_addr);
		if (p) {
			*state = o->on[p - o->sites] ? XP_SITE_CALL : XP_SITE_NOP;
			return 1;
		}
	}
	return 0;
}

size_t xp_trace_verify(struct textbuf *out)
{
	size_t count[XP_SITE_OTHER + 1] = { 0 };
	uintptr_t first[XP_SITE_OTHER + 1] = { 0 };
	for (size_t i = 0; i < nswitched; i++) {
		uintptr_t a = switched[i];
		int state;
		if (!known_state(a, &state)) {
			/* Not taken by the refresh: read it, if it is still in a
			 * loaded object (else it was unloaded, and is no site). */
			Dl_info info;
			uint8_t b[XP_TRACE_SITE_LEN];
			struct iovec local = { b, sizeof(b) }, remote = { (void *)a, sizeof(b) };
			if (!dladdr((void *)a, &info) ||
			    process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != sizeof(b))
				continue;
			state = xp_trace_site_state(b, a, NULL);
		}
		if (state == XP_SITE_CALL)
			continue;
		if (!count[state]++)
			first[state] = a;
	}
	static const char *const why[XP_SITE_OTHER + 1] = {
		[XP_SITE_NOP] = "the NOP is back (a uprobe's removal puts the file's bytes back)",
		[XP_SITE_BREAK] = "another tool's int3 or call is on it (a uprobe: bpftrace, "
				  "perf probe): clang's entry then runs the file's NOP instead "
				  "of the tracer's call, gcc's resumes inside the call and crashes",
		[XP_SITE_SCAR] = "gcc's entry after a uprobe's removal",
		[XP_SITE_OTHER] = "bytes that are neither the tracer's call nor a NOP",
	};
	size_t bad = 0;
	for (int s = XP_SITE_NOP; s <= XP_SITE_OTHER; s++) {
		if (!count[s] || s == XP_SITE_CALL)
			continue;
		bad += count[s];
		tb_printf(out, "not traced: %zu function%s switched on, the first at 0x%lx: %s\n",
			  count[s], count[s] == 1 ? "" : "s", (unsigned long)first[s], why[s]);
	}
	if (bad)
		tb_puts(out, "(trace stop then trace start switches again those that can be)\n");
	return bad;
}
