/* SPDX-License-Identifier: MIT */
/* The copies trace_patch.c swaps over a text segment, and the spares that
 * let a stop make its copy when the file is gone.
 *
 * A copy is a private mapping of the segment's file at the segment's
 * offset, so the kernel still knows the text as that file's (maps, perf,
 * gdb, uprobes).  It is mapped writable and filled with memcpy, page by
 * page, only where a page differs from what the mapping holds (the
 * file's bytes, for a new one), then made executable: a page whose
 * bytes end equal to the file's is never written, so after a stop the
 * text holds no anonymous copy of it.  Where a W^X policy (SELinux
 * execmod, PaX) refuses to make a written private file mapping
 * executable, the copy is mapped executable at once and written through
 * /proc/self/mem, opened for that one operation.
 *
 * No descriptor outlives an operation: the file and /proc/self/mem are
 * opened when a switch begins, checked (device, inode) before each use,
 * and closed when it ends.  A program that closes descriptors it does not
 * know and reuses the numbers, or a child forked later, finds nothing of
 * ours. */
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

int xp_trace_patch_via_mem;

static char error_buf[PATH_MAX + 160];

/* ---- writing ---- */

static int use_mem(struct xp_writer *w)
{
	if (w->mem)
		return 0;
	if (xp_fault() || xp_brief_open(&w->fd, "/proc/self/mem", O_RDWR) != 0) {
		xp_trace_patch_error = "cannot open /proc/self/mem for writing";
		return -EACCES;
	}
	w->mem = 1;
	return 0;
}

int xp_writer_init(struct xp_writer *w)
{
	*w = (struct xp_writer){ .fd = { .fd = -1 }, .pg = (size_t)sysconf(_SC_PAGESIZE) };
	w->page = xp_malloc(w->pg);
	if (!w->page) {
		xp_trace_patch_error = "out of memory";
		return -ENOMEM;
	}
	return xp_trace_patch_via_mem == 1 ? use_mem(w) : 0;
}

void xp_writer_done(struct xp_writer *w)
{
	xp_brief_close(&w->fd);
	free(w->page);
	w->page = NULL;
}

static int put(struct xp_writer *w, uint8_t *dst, const uint8_t *src, size_t len)
{
	if (!w->mem) {
		memcpy(dst, src, len);
		return 0;
	}
	ssize_t n = xp_fault() || !xp_brief_ours(&w->fd) ? (errno = EIO, -1)
							: pwrite(w->fd.fd, src, len, (off_t)(uintptr_t)dst);
	if (n == (ssize_t)len)
		return 0;
	xp_trace_patch_error = "writing through /proc/self/mem failed";
	return n < 0 ? -errno : -EIO;
}

/* Page by page over the segment: what the copy must hold (the text's
 * page, with the changes' new bytes over it), written where it differs
 * (check == 0), or compared (check: -EAGAIN at the first difference).
 * A NOP going in keeps the NOP the copy holds, if it holds one: clang's
 * file has nopl 8(%rax,%rax,1), and the page then stays the file's. */
static int walk(struct xp_writer *w, uint8_t *copy, const struct xp_seg *s,
		const struct xp_copy_change *c, size_t n, int check)
{
	size_t k = 0;
	for (uintptr_t p = s->start; p < s->end; p += w->pg) {
		const uint8_t *want = (const uint8_t *)p;
		while (k < n && c[k].site + XP_TRACE_SITE_LEN <= p)
			k++;
		if (k < n && c[k].site < p + w->pg) {
			memcpy(w->page, want, w->pg);
			for (size_t j = k; j < n && c[j].site < p + w->pg; j++) {
				const uint8_t *in = copy + (c[j].site - s->start);
				const uint8_t *bytes = xp_trace_site_is_nop(c[j].new) &&
							       xp_trace_site_is_nop(in) ? in : c[j].new;
				for (size_t b = 0; b < XP_TRACE_SITE_LEN; b++)
					if (c[j].site + b >= p && c[j].site + b < p + w->pg)
						w->page[c[j].site + b - p] = bytes[b];
			}
			want = w->page;
		}
		uint8_t *dst = copy + (p - s->start);
		if (memcmp(dst, want, w->pg) == 0)
			continue;
		if (check)
			return -EAGAIN;
		int err = put(w, dst, want, w->pg);
		if (err)
			return err;
	}
	return 0;
}

int xp_copy_check(struct xp_writer *w, const struct xp_seg *s, const void *copy,
		  const struct xp_copy_change *c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (memcmp((const void *)c[i].site, c[i].old, XP_TRACE_SITE_LEN) != 0)
			return -EAGAIN;
	return walk(w, (uint8_t *)(uintptr_t)copy, s, c, n, 1);
}

/* ---- the segment's file ---- */

static int is_the_file(const struct xp_brief_fd *f, const struct xp_seg *s)
{
	return f->reg && f->dev == makedev(s->maj, s->min) && f->ino == s->ino && xp_brief_ours(f);
}

/* The mapping itself where the kernel lets us open it (map_files needs
 * privilege), else its path, refused unless device and inode are the
 * mapping's (a file renamed over it, or deleted). */
int xp_copy_open(const struct xp_seg *s, struct xp_brief_fd *f)
{
	char link[64];
	snprintf(link, sizeof(link), "/proc/self/map_files/%lx-%lx", (unsigned long)s->start,
		 (unsigned long)s->first_end);
	/* Not a fault point: a stop recovers from it (the spare), and the
	 * tests make it fail for real (a file renamed over). */
	f->fd = -1;
	if (xp_brief_open(f, link, O_RDONLY) == 0 && !is_the_file(f, s))
		xp_brief_close(f);
	if (f->fd < 0 && s->path[0] == '/' &&
	    xp_brief_open(f, s->path, O_RDONLY | O_NONBLOCK) == 0 && !is_the_file(f, s))
		xp_brief_close(f);
	if (f->fd >= 0)
		return 0;
	snprintf(error_buf, sizeof(error_buf),
		 "cannot open the file mapped as %.*s again to copy its text (replaced or "
		 "deleted since it was loaded, or not readable)",
		 PATH_MAX, s->path[0] ? s->path : "(no name)");
	xp_trace_patch_error = error_buf;
	return -ENOENT;
}

/* ---- copies ---- */

/* The segment's file mapped again, the descriptor checked before and
 * after: a program's thread that closed it and opened its own file at
 * the same number in between would otherwise have its file mapped (and a
 * shorter one would fault on the copy's first read). */
static void *map_file(const struct xp_seg *s, const struct xp_brief_fd *f, int prot)
{
	size_t len = s->end - s->start;
	void *p = is_the_file(f, s) ? mmap(NULL, len, prot, MAP_PRIVATE, f->fd, (off_t)s->off)
				    : MAP_FAILED;
	if (p != MAP_FAILED && !is_the_file(f, s)) {
		munmap(p, len);
		p = MAP_FAILED;
	}
	return p;
}

static void *map_copy(const struct xp_seg *s, const struct xp_brief_fd *f, void *spare, int prot)
{
	size_t len = s->end - s->start;
	if (xp_fault())
		return MAP_FAILED;
	if (spare)
		return mprotect(spare, len, prot) == 0 ? spare : MAP_FAILED;
	return map_file(s, f, prot);
}

static void drop_copy(void *p, size_t len, void *spare)
{
	if (p == spare)
		mprotect(p, len, PROT_NONE);
	else
		munmap(p, len);
}

void *xp_copy_make(struct xp_writer *w, const struct xp_seg *s, const struct xp_brief_fd *f,
		   void *spare, const struct xp_copy_change *c, size_t n)
{
	size_t len = s->end - s->start;
	for (;;) {
		int prot = w->mem ? PROT_READ | PROT_EXEC : PROT_READ | PROT_WRITE;
		void *p = map_copy(s, f, spare, prot);
		if (p == MAP_FAILED) {
			xp_trace_patch_error = "cannot map the text's file again to copy it";
			return NULL;
		}
		int err = walk(w, p, s, c, n, 0);
		int refused = xp_trace_patch_via_mem == 2; /* tests: as a W^X policy would */
		if (!err && (w->mem || (!refused && mprotect(p, len, PROT_READ | PROT_EXEC) == 0)))
			return p;
		drop_copy(p, len, spare);
		/* Refused to make written pages executable (W^X): from now on
		 * write through /proc/self/mem into executable copies. */
		if (err || w->mem || use_mem(w) != 0)
			return NULL;
	}
}

/* ---- spares ---- */

struct spare {
	uintptr_t start, end;
	unsigned long long off, ino;
	unsigned maj, min;
	void *map;
};
static struct spare *spares;
static size_t nspares, spares_cap;

static int same_seg(const struct spare *x, const struct xp_seg *s)
{
	return x->start == s->start && x->end == s->end && x->off == s->off && x->ino == s->ino &&
	       x->maj == s->maj && x->min == s->min;
}

void *xp_spare_find(const struct xp_seg *s)
{
	for (size_t i = 0; i < nspares; i++)
		if (same_seg(&spares[i], s))
			return spares[i].map;
	return NULL;
}

void *xp_spare_new(const struct xp_seg *s, const struct xp_brief_fd *f)
{
	void *p = xp_fault() ? MAP_FAILED : map_file(s, f, PROT_NONE);
	if (p == MAP_FAILED) {
		xp_trace_patch_error = "cannot map a spare of the text's file";
		return NULL;
	}
	return p;
}

int xp_spare_reserve(size_t more)
{
	if (nspares + more <= spares_cap)
		return 0;
	size_t cap = nspares + more + 4;
	struct spare *p = xp_realloc(spares, cap * sizeof(*p));
	if (!p) {
		xp_trace_patch_error = "out of memory";
		return -ENOMEM;
	}
	spares = p;
	spares_cap = cap;
	return 0;
}

void xp_spare_keep(const struct xp_seg *s, void *map)
{
	if (nspares < spares_cap)
		spares[nspares++] = (struct spare){ .start = s->start, .end = s->end, .off = s->off,
						    .ino = s->ino, .maj = s->maj, .min = s->min,
						    .map = map };
	else
		munmap(map, s->end - s->start);
}

static void forget(size_t i, int unmap)
{
	if (unmap)
		munmap(spares[i].map, spares[i].end - spares[i].start);
	spares[i] = spares[--nspares];
}

void xp_spare_taken(void *map)
{
	for (size_t i = 0; i < nspares; i++)
		if (spares[i].map == map) {
			forget(i, 0);
			return;
		}
}

void xp_spare_put_back(void *map, size_t len)
{
	mprotect(map, len, PROT_NONE);
}

void xp_spares_prune(const struct xp_maps *maps, int all)
{
	const char *error = xp_trace_patch_error; /* a gone segment is no error */
	for (size_t i = nspares; i-- > 0;) {
		struct xp_seg s;
		int gone = all || xp_maps_segment(maps, spares[i].start, &s) != 0 ||
			   !same_seg(&spares[i], &s);
		if (gone)
			forget(i, 1);
	}
	xp_trace_patch_error = error;
}

size_t xp_spares_count(void)
{
	return nspares;
}
