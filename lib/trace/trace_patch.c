/* SPDX-License-Identifier: MIT */
/* Switching patch sites between the 5-byte NOP and `call trampoline` while
 * other threads run through them, without ever needing a trap delivered.
 *
 * The bytes of the text are never changed in place.  For each text
 * segment holding sites to switch (trace_maps.c: the touching r-xp
 * mappings of one file at contiguous offsets):
 *
 *   1. map the same file at the same offset again, elsewhere (MAP_PRIVATE),
 *      and make that copy hold the text's current bytes with the sites
 *      switched (trace_copy.c: only the pages that differ are written);
 *   2. mremap(MREMAP_FIXED) the copy over the whole segment.
 *
 * mremap replaces the pages under the mmap lock: the old pages' entries
 * are cleared and every CPU's TLB flushed before the new ones go in, so a
 * thread fetching from those pages meanwhile takes a page fault, waits
 * for the lock, and restarts the instruction from the new page.  A thread
 * executes either the old page or the new one, each consistent, and a
 * site is one instruction, so it runs either the old instruction or the
 * new, whatever it does with its signal mask: there is no int3, so no
 * SIGTRAP that a blocked mask could turn into the process's death (the
 * kernel kills a thread that traps with the signal blocked; Linux's own
 * text_poke_bp needs an int3 only because the kernel writes its text in
 * place).  The old pages' bytes are never written, so no core can see a
 * mix of old and new bytes of one instruction.
 *
 * Whole segments, not pages: one copy and one mremap a segment whatever
 * the number of sites (20,000 functions one a page were 20,000 swaps and
 * as many new mappings, 6 s to start), and the segment ends as one
 * mapping however it was split before, so start and stop leave the
 * process with the mappings it had.  A stop whose pages end equal to the
 * file's writes none of them: the text holds the file's pages again.
 *
 * The copy is a private mapping of the same file and offset, so the
 * kernel still knows the text as that file's: /proc/PID/maps, perf and
 * gdb name it as before, and uprobes (bpftrace's USDT probes) find it by
 * inode and offset; a uprobe's int3 already in the text is copied with
 * the rest.  The text itself is never writable.
 *
 * A start keeps a spare of each segment it switches (trace_copy.c), so
 * that a stop can make its copy when the file was deleted or replaced (a
 * package upgrade) and cannot be opened again.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "trace.h"
#include "trace_text.h"

unsigned long xp_trace_swaps;


/* Messages that name a file or a mapping. */
static char error_buf[PATH_MAX + 160];

/* A switch keeps this many mappings below vm.max_map_count beyond its
 * copies: mremap refuses to move when the process is within 3 of it, and
 * the program's other threads map too. */
#define MAP_MARGIN 8

struct change {
	uintptr_t site;
	uint8_t old[XP_TRACE_SITE_LEN], new[XP_TRACE_SITE_LEN];
	uint8_t *on, to;             /* the object's state byte, and its new value */
	size_t object;               /* in xp_trace_objects */
};

/* One text segment holding changes, swapped whole: the copies are made
 * before any segment is swapped, so a failure at a swap can be undone
 * without allocating anything (a switch of one segment needs no undo
 * copy: nothing is swapped after it; nor does a segment from its spare,
 * which is never undone). */
struct run {
	struct xp_seg seg;
	size_t first, n;             /* its changes, c[first, first + n) */
	struct xp_copy_change *cc;   /* the same, as trace_copy.c takes them */
	void *fresh;                 /* the text with the changes */
	void *undo;                  /* the text as it is */
	void *spare;                 /* fresh is this segment's spare */
	void *new_spare;             /* made by this start, kept if it succeeds */
};

static int cmp_change(const void *a, const void *b)
{
	uintptr_t x = ((const struct change *)a)->site, y = ((const struct change *)b)->site;
	return x < y ? -1 : x > y;
}

/* Group sorted changes by segment; r has room for n runs. */
static int make_runs(const struct xp_maps *maps, const struct change *c, size_t n, struct run *r,
		     size_t *nr)
{
	*nr = 0;
	for (size_t i = 0; i < n; i++) {
		struct run *last = *nr ? &r[*nr - 1] : NULL;
		if (!last || c[i].site >= last->seg.end) {
			last = &r[(*nr)++];
			*last = (struct run){ .first = i };
			int err = xp_maps_segment(maps, c[i].site, &last->seg);
			if (err)
				return err;
		}
		if (c[i].site + XP_TRACE_SITE_LEN > last->seg.end) {
			snprintf(error_buf, sizeof(error_buf),
				 "the patch site at 0x%lx straddles the end of its text mapping",
				 (unsigned long)c[i].site);
			xp_trace_patch_error = error_buf;
			return -EINVAL;
		}
		last->n++;
	}
	return 0;
}

/* Refused before anything changes when the copies (and a spare and a
 * trampoline each, for a start) would take the process past the kernel's
 * limit on mappings, where a swap or its undo could fail halfway. */
static int room_for(const struct xp_maps *maps, const struct run *r, size_t nr, int on,
		    size_t tramps)
{
	size_t need = tramps + nr + (nr > 1 ? nr : 0);
	for (size_t i = 0; on && i < nr; i++)
		need += !xp_spare_find(&r[i].seg);
	long limit = xp_maps_limit();
	if ((long)(maps->n + need + MAP_MARGIN) <= limit)
		return 0;
	snprintf(error_buf, sizeof(error_buf),
		 "switching needs %zu more mappings and the process has %zu of vm.max_map_count "
		 "%ld: refused, nothing changed",
		 need + MAP_MARGIN, maps->n, limit);
	xp_trace_patch_error = error_buf;
	return -ENOSPC;
}

static int swap_in(const struct run *r, void *copy)
{
	size_t len = r->seg.end - r->seg.start;
	void *p = mremap(copy, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)r->seg.start);
	return p == (void *)r->seg.start ? 0 : -errno;
}

/* The copies of run x.  Its file is opened for the while, checked; a stop
 * whose file is gone (deleted, or a new one renamed over it: an upgrade)
 * makes its copy from the segment's spare.  An undo copy is made when
 * another run may fail after this one's swap (undo), of file-backed runs
 * only: a run from a spare is never undone (see switch_sites). */
static int prepare_run(struct xp_writer *w, struct run *x, int on, int undo)
{
	struct xp_brief_fd f;
	int err = xp_copy_open(&x->seg, &f);
	void *spare = xp_spare_find(&x->seg);
	if (err && (on || !spare))
		return err;
	int file = !err;
	x->fresh = xp_copy_make(w, &x->seg, file ? &f : NULL, file ? NULL : spare, x->cc, x->n);
	x->spare = x->fresh && !file ? spare : NULL;
	err = x->fresh ? 0 : -ENOMEM;
	if (!err && file && undo && !(x->undo = xp_copy_make(w, &x->seg, &f, NULL, NULL, 0)))
		err = -ENOMEM;
	if (!err && on && !spare && !(x->new_spare = xp_spare_new(&x->seg, &f)))
		err = -ENOMEM;
	if (file)
		xp_brief_close(&f);
	return err;
}

static void release_run(struct run *x)
{
	size_t len = x->seg.end - x->seg.start;
	if (x->fresh && x->spare)
		xp_spare_put_back(x->fresh, len);
	else if (x->fresh)
		munmap(x->fresh, len);
	if (x->undo)
		munmap(x->undo, len);
	if (x->new_spare)
		munmap(x->new_spare, len);
}

/* Every run's copies made, then every run swapped in, those from spares
 * last.  On a failure, the runs already swapped get their undo copies
 * back, so every site ends as it began, but for a stop's runs from
 * spares: their file is gone, and undoing them would leave nothing to
 * stop them with, so they stay stopped (their state bytes say so).  An
 * undo that fails too (the kernel out of mappings) leaves its sites
 * switched, and their state bytes say so. */
static int switch_sites(struct change *c, struct run *r, size_t nr, int on)
{
	struct xp_writer w;
	size_t done = 0, i, *order = xp_calloc(nr, sizeof(*order));
	int err = order ? xp_writer_init(&w) : -ENOMEM;
	if (!order)
		xp_trace_patch_error = "out of memory";
	if (!err)
		err = xp_spare_reserve(nr);
	for (i = 0; !err && i < nr; i++)
		err = prepare_run(&w, &r[i], on, nr > 1);
	for (size_t pass = 0, k = 0; !err && pass < 2; pass++)
		for (i = 0; i < nr; i++)
			if (!r[i].spare == !pass)
				order[k++] = i;
	for (; !err && done < nr; done++) {
		struct run *x = &r[order[done]];
		/* The copy was taken from the text: if something wrote there
		 * since (a debugger's breakpoint), swapping would undo it. */
		if (xp_copy_check(&w, &x->seg, x->fresh, x->cc, x->n) != 0) {
			xp_trace_patch_error = "the text changed while it was being switched (a "
					       "debugger's breakpoint?): try again";
			err = -EAGAIN;
		} else if ((err = xp_fault() ? -ENOMEM : swap_in(x, x->fresh))) {
			snprintf(error_buf, sizeof(error_buf),
				 "cannot map the switched copy over the text at 0x%lx: mremap: %s",
				 (unsigned long)x->seg.start, strerror(-err));
			xp_trace_patch_error = error_buf;
		} else {
			if (x->spare)
				xp_spare_taken(x->spare);
			x->fresh = NULL;
			xp_trace_swaps++;
		}
		if (err)
			break;
	}
	for (size_t j = 0; j < done; j++) {
		struct run *x = &r[order[j]];
		int switched = 1;
		if (err && !x->spare && swap_in(x, x->undo) == 0)
			switched = 0, x->undo = NULL;
		for (size_t k = x->first; switched && k < x->first + x->n; k++)
			*c[k].on = c[k].to;
	}
	for (i = 0; i < nr; i++) {
		if (!err && r[i].new_spare) {
			xp_spare_keep(&r[i].seg, r[i].new_spare);
			r[i].new_spare = NULL;
		}
		release_run(&r[i]);
	}
	if (order)
		xp_writer_done(&w);
	free(order);
	return err;
}

static int cmp_addr(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
	return x < y ? -1 : x > y;
}

static void call_bytes(uint8_t *b, uintptr_t site, const void *tramp)
{
	int32_t rel = (int32_t)((intptr_t)tramp - (intptr_t)(site + XP_TRACE_SITE_LEN));
	b[0] = XP_TRACE_CALL;
	memcpy(b + 1, &rel, 4);
}

static int wanted(uintptr_t site, const uintptr_t *sorted, size_t n)
{
	return n == 0 || bsearch(&site, sorted, n, sizeof(uintptr_t), cmp_addr) != NULL;
}

static int known_site(uintptr_t a)
{
	for (size_t i = 0; i < xp_trace_nobjects; i++) {
		const struct xp_trace_object *o = xp_trace_objects[i];
		if (bsearch(&a, o->sites, o->nsites, sizeof(uintptr_t), cmp_addr))
			return 1;
	}
	return 0;
}

/* The sites to switch, in c (room for every site): on != 0 the wanted
 * NOPs, on == 0 every call to the object's trampoline; a site whose
 * bytes are neither (a mapping replaced since the refresh) is left alone.
 * Objects unloaded since the refresh are skipped (pins[i] NULL). */
static size_t collect(int on, const uintptr_t *sorted, size_t naddrs, void **pins,
		      struct change *c, size_t *tramps)
{
	size_t n = 0;
	*tramps = 0;
	for (size_t i = 0; i < xp_trace_nobjects; i++) {
		struct xp_trace_object *o = xp_trace_objects[i];
		size_t mine = 0;
		for (size_t j = 0; j < o->nsites; j++)
			mine += o->on[j] != on && (!on || wanted(o->sites[j], sorted, naddrs));
		if (!mine || !(pins[i] = xp_trace_object_pin(o)))
			continue;
		size_t before = n;
		for (size_t j = 0; j < o->nsites; j++) {
			if (o->on[j] == on || (on && !wanted(o->sites[j], sorted, naddrs)))
				continue;
			struct change *ch = &c[n];
			ch->site = o->sites[j];
			memcpy(ch->old, (const void *)ch->site, XP_TRACE_SITE_LEN);
			uint8_t expect[XP_TRACE_SITE_LEN];
			if (!on)
				call_bytes(expect, ch->site, o->trampoline);
			if (on ? !xp_trace_site_is_nop(ch->old)
			       : !o->trampoline || memcmp(ch->old, expect, XP_TRACE_SITE_LEN) != 0)
				continue;
			ch->on = &o->on[j];
			ch->to = (uint8_t)on;
			ch->object = i;
			n++;
		}
		*tramps += on && n > before && !o->trampoline;
	}
	return n;
}

/* The index of site (one of o's: collect() found it there) in o->sites,
 * which is sorted. */
static size_t site_index(const struct xp_trace_object *o, uintptr_t site)
{
	size_t lo = 0, hi = o->nsites;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (o->sites[mid] <= site)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* Both directions: on != 0 turns the wanted sites (all if naddrs == 0)
 * that are NOPs into calls, on == 0 every call back into the NOP.  The
 * maps are read once; nothing changes before the map count is known to
 * allow the switch. */
static int patch(int on, const uintptr_t *addrs, size_t naddrs)
{
	int err = 0;
	xp_trace_patch_error = "";
	uintptr_t *sorted = xp_malloc((naddrs ? naddrs : 1) * sizeof(uintptr_t));
	void **pins = xp_calloc(xp_trace_nobjects ? xp_trace_nobjects : 1, sizeof(void *));
	size_t total = 0, n = 0, nr = 0, tramps;
	for (size_t i = 0; i < xp_trace_nobjects; i++)
		total += xp_trace_objects[i]->nsites;
	struct change *c = xp_malloc((total ? total : 1) * sizeof(*c));
	struct xp_copy_change *cc = xp_malloc((total ? total : 1) * sizeof(*cc));
	struct run *r = xp_calloc(total ? total : 1, sizeof(*r));
	struct xp_maps maps = { 0 };
	if (!sorted || !pins || !c || !cc || !r) {
		xp_trace_patch_error = "out of memory";
		err = -ENOMEM;
		goto out;
	}
	if (naddrs)
		memcpy(sorted, addrs, naddrs * sizeof(uintptr_t));
	qsort(sorted, naddrs, sizeof(uintptr_t), cmp_addr);
	for (size_t i = 0; i < naddrs; i++)
		if (!known_site(sorted[i])) {
			xp_trace_patch_error = "not a patch site of a loaded object";
			err = -EINVAL;
			goto out;
		}
	n = collect(on, sorted, naddrs, pins, c, &tramps);
	if (!n || (err = xp_maps_read(&maps)))
		goto out;
	xp_spares_prune(&maps, 0);
	qsort(c, n, sizeof(*c), cmp_change);
	if ((err = make_runs(&maps, c, n, r, &nr)) || (err = room_for(&maps, r, nr, on, tramps)))
		goto out;
	for (size_t i = 0; i < n; i++) {
		struct xp_trace_object *o = xp_trace_objects[c[i].object];
		if (on && !o->trampoline && !(o->trampoline = xp_trace_tramp_new(o))) {
			xp_trace_patch_error = "cannot map a trampoline page within 2 GiB of the object";
			err = -ENOMEM;
			goto out;
		}
		if (on)
			call_bytes(c[i].new, c[i].site, o->trampoline);
		else /* the NOP it had: gcc's joined one, or clang's own disp8 */
			xp_trace_site_nop(o, site_index(o, c[i].site), c[i].new);
		cc[i] = (struct xp_copy_change){ .site = c[i].site, .old = c[i].old, .new = c[i].new };
	}
	for (size_t i = 0; i < nr; i++)
		r[i].cc = &cc[r[i].first];
	err = switch_sites(c, r, nr, on);
out:
	/* Stopped everywhere: no spare is needed any more. */
	if (!err && !on)
		xp_spares_prune(&maps, 1);
	xp_maps_free(&maps);
	for (size_t i = 0; pins && i < xp_trace_nobjects; i++)
		xp_trace_object_unpin(pins[i]);
	free(r);
	free(cc);
	free(c);
	free(pins);
	free(sorted);
	return err;
}

int xp_trace_patch_on(const uintptr_t *addrs, size_t naddrs)
{
	return patch(1, addrs, naddrs);
}

int xp_trace_patch_off(void)
{
	return patch(0, NULL, 0);
}
