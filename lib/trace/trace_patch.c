/* Switching patch sites between the 5-byte NOP and `call trampoline` while
 * other threads run through them, without ever needing a trap delivered.
 *
 * The bytes of the text are never changed in place.  For each run of
 * pages holding sites to switch:
 *
 *   1. map the same file at the same offset again, elsewhere (MAP_PRIVATE,
 *      the text's own protection), and write into that copy, through
 *      /proc/self/mem, the text's current bytes with the sites switched;
 *   2. mremap(MREMAP_FIXED) the copy over the text's pages.
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
 * place).  A site that straddles two pages is switched in one mremap of
 * both.  The old page's bytes are never written, so no core can see a
 * mix of old and new bytes of one instruction.
 *
 * The copy is a private mapping of the same file and offset, so the
 * kernel still knows the text as that file's: /proc/PID/maps, perf and
 * gdb name it as before, and uprobes (bpftrace's USDT probes) find it by
 * inode and offset; a uprobe's int3 already in the text is copied with
 * the rest.  No page is ever writable: /proc/self/mem writes through the
 * kernel's own mapping, as a debugger's breakpoints are.
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

const char *xp_trace_patch_error = "";
unsigned long xp_trace_swaps;


/* Messages that name a file or a mapping. */
static char error_buf[PATH_MAX + 160];

/* ---- writing into the copies ---- */

static int mem_fd = -1;
static pid_t mem_pid;

/* /proc/self/mem names the process that opened it: a forked child must
 * open its own, or it would write into its parent. */
static int mem_open(void)
{
	if (mem_fd >= 0 && mem_pid == getpid())
		return 0;
	if (mem_fd >= 0)
		close(mem_fd);
	mem_fd = xp_fault() ? (errno = EACCES, -1) : open("/proc/self/mem", O_RDWR | O_CLOEXEC);
	if (mem_fd < 0) {
		xp_trace_patch_error = "cannot open /proc/self/mem for writing";
		return -errno;
	}
	mem_pid = getpid();
	return 0;
}

static int poke(uintptr_t addr, const void *buf, size_t len)
{
	ssize_t n = xp_fault() ? (errno = EIO, -1) : pwrite(mem_fd, buf, len, (off_t)addr);
	if (n == (ssize_t)len)
		return 0;
	xp_trace_patch_error = "writing through /proc/self/mem failed";
	return n < 0 ? -errno : -EIO;
}

/* ---- the text's mappings ---- */

struct mapping {
	uintptr_t start, end;
	unsigned long long off, ino;
	unsigned maj, min;
	char perms[5];
	char path[PATH_MAX];
};

/* The line of /proc/self/maps that holds addr; read afresh each time, as
 * every swap splits the text's mapping. */
static int mapping_at(uintptr_t addr, struct mapping *m)
{
	FILE *f = xp_fault() ? NULL : fopen("/proc/self/maps", "re");
	if (!f) {
		xp_trace_patch_error = "cannot read /proc/self/maps";
		return -EIO;
	}
	char line[PATH_MAX + 128];
	int found = 0;
	while (!found && fgets(line, sizeof(line), f)) {
		int at = 0;
		if (sscanf(line, "%lx-%lx %4s %llx %x:%x %llu %n", &m->start, &m->end, m->perms,
			   &m->off, &m->maj, &m->min, &m->ino, &at) < 7 ||
		    addr < m->start || addr >= m->end)
			continue;
		snprintf(m->path, sizeof(m->path), "%s", line + at);
		m->path[strcspn(m->path, "\n")] = '\0';
		found = 1;
	}
	fclose(f);
	if (!found) {
		xp_trace_patch_error = "a patch site is in no mapping";
		return -EFAULT;
	}
	return 0;
}

/* The file behind m, checked to be the one the kernel mapped: the mapping
 * itself where the kernel lets us open it (map_files needs privilege),
 * else its path, refused unless device and inode are the mapping's. */
static int open_mapped_file(const struct mapping *m)
{
	char link[64];
	snprintf(link, sizeof(link), "/proc/self/map_files/%lx-%lx", m->start, m->end);
	int fd = open(link, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && m->path[0] == '/')
		fd = open(m->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	struct stat st;
	if (fd >= 0 && !xp_fault() && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && major(st.st_dev) == m->maj &&
	    minor(st.st_dev) == m->min && st.st_ino == m->ino)
		return fd;
	if (fd >= 0)
		close(fd);
	snprintf(error_buf, sizeof(error_buf),
		 "cannot open the file mapped as %.*s again to copy its text (replaced or "
		 "deleted since it was loaded, or not readable)",
		 PATH_MAX, m->path[0] ? m->path : "(no name)");
	xp_trace_patch_error = error_buf;
	return -ENOENT;
}

/* [start, start + len) must be one file's private executable text, at
 * contiguous offsets (earlier swaps may have split it into several
 * mappings); *first is the mapping at start. */
static int text_range(uintptr_t start, size_t len, struct mapping *first)
{
	int err = mapping_at(start, first);
	if (err)
		return err;
	struct mapping m = *first;
	for (;;) {
		if (strcmp(m.perms, first->perms) != 0 || m.perms[2] != 'x' || m.perms[3] != 'p' ||
		    m.ino != first->ino || m.maj != first->maj || m.min != first->min ||
		    m.off - first->off != m.start - first->start) {
			snprintf(error_buf, sizeof(error_buf),
				 "the text at 0x%lx is not one file's private executable mapping "
				 "(%s %.*s)", (unsigned long)m.start, m.perms, PATH_MAX, m.path);
			xp_trace_patch_error = error_buf;
			return -EINVAL;
		}
		if (m.end >= start + len)
			return 0;
		if ((err = mapping_at(m.end, &m)))
			return err;
	}
}

/* ---- switching ---- */

struct change {
	uintptr_t site;
	uint8_t old[XP_TRACE_SITE_LEN], new[XP_TRACE_SITE_LEN];
	uint8_t *on, to;             /* the object's state byte, and its new value */
};

/* Pages swapped as one: those of one site, and of any site straddling
 * into the next page.  Both copies are made before any page is swapped,
 * so a failure at a swap can be undone without allocating anything. */
struct run {
	uintptr_t start;
	size_t len;
	size_t first, n;             /* its changes, c[first, first + n) */
	void *fresh;                 /* the text with the changes */
	void *undo;                  /* the text as it is */
};

static int cmp_change(const void *a, const void *b)
{
	uintptr_t x = ((const struct change *)a)->site, y = ((const struct change *)b)->site;
	return x < y ? -1 : x > y;
}

/* Group sorted changes into runs of pages; r has room for n runs. */
static size_t make_runs(const struct change *c, size_t n, struct run *r)
{
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	size_t nr = 0;
	for (size_t i = 0; i < n; i++) {
		uintptr_t lo = c[i].site & ~(pg - 1);
		uintptr_t hi = (c[i].site + XP_TRACE_SITE_LEN - 1 + pg) & ~(pg - 1);
		struct run *last = nr ? &r[nr - 1] : NULL;
		if (last && lo < last->start + last->len) {
			last->len = hi - last->start;
			last->n++;
			continue;
		}
		r[nr++] = (struct run){ .start = lo, .len = hi - lo, .first = i, .n = 1 };
	}
	return nr;
}

/* A private mapping of the text's file at the text's offset, holding the
 * text's bytes as they are now, and the changes' new bytes if asked. */
static void *copy_text(const struct run *r, const struct mapping *m, int fd,
		       const struct change *c, int with_changes)
{
	int prot = PROT_READ | PROT_EXEC;
	void *p = xp_fault() ? MAP_FAILED
			     : mmap(NULL, r->len, prot, MAP_PRIVATE, fd,
				    (off_t)(m->off + (r->start - m->start)));
	if (p == MAP_FAILED) {
		xp_trace_patch_error = "cannot map the text's file again to copy it";
		return NULL;
	}
	uintptr_t at = (uintptr_t)p;
	int err = poke(at, (const void *)r->start, r->len);
	for (size_t i = r->first; !err && with_changes && i < r->first + r->n; i++)
		err = poke(at + (c[i].site - r->start), c[i].new, XP_TRACE_SITE_LEN);
	if (err) {
		munmap(p, r->len);
		return NULL;
	}
	return p;
}

static int prepare_run(struct run *r, const struct change *c)
{
	struct mapping m;
	int err = text_range(r->start, r->len, &m);
	if (err)
		return err;
	int fd = open_mapped_file(&m);
	if (fd < 0)
		return fd;
	r->fresh = copy_text(r, &m, fd, c, 1);
	r->undo = r->fresh ? copy_text(r, &m, fd, c, 0) : NULL;
	close(fd);
	return r->undo ? 0 : -ENOMEM;
}

static int swap_in(const struct run *r, void *copy)
{
	void *p = mremap(copy, r->len, r->len, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)r->start);
	return p == (void *)r->start ? 0 : -errno;
}

/* Every run's copies made, then every run swapped in.  On a failure, the
 * runs already swapped get their undo copies back, so every site ends as
 * it began; an undo that fails too (the kernel out of mappings) leaves
 * its sites switched, and their state bytes say so. */
static int switch_sites(struct change *c, size_t n)
{
	struct run *r = xp_calloc(n, sizeof(*r));
	if (!r) {
		xp_trace_patch_error = "out of memory";
		return -ENOMEM;
	}
	qsort(c, n, sizeof(*c), cmp_change);
	size_t nr = make_runs(c, n, r), done = 0, i;
	int err = mem_open();
	for (i = 0; !err && i < nr; i++)
		err = prepare_run(&r[i], c);
	for (; !err && done < nr; done++) {
		struct run *x = &r[done];
		/* The copy was taken from the text: if something wrote there
		 * since (a debugger's breakpoint), swapping would undo it. */
		if (memcmp((const void *)x->start, x->undo, x->len) != 0) {
			xp_trace_patch_error = "the text changed while it was being switched (a "
					       "debugger's breakpoint?): try again";
			err = -EAGAIN;
		} else if ((err = xp_fault() ? -ENOMEM : swap_in(x, x->fresh))) {
			snprintf(error_buf, sizeof(error_buf),
				 "cannot map the switched copy over the text at 0x%lx: mremap: %s",
				 (unsigned long)x->start, strerror(-err));
			xp_trace_patch_error = error_buf;
		} else {
			x->fresh = NULL;
			xp_trace_swaps++;
		}
		if (err)
			break;
	}
	for (i = 0; i < nr; i++) {
		int switched = i < done;
		if (switched && err && swap_in(&r[i], r[i].undo) == 0)
			switched = 0, r[i].undo = NULL;
		for (size_t k = r[i].first; switched && k < r[i].first + r[i].n; k++)
			*c[k].on = c[k].to;
		if (r[i].fresh)
			munmap(r[i].fresh, r[i].len);
		if (r[i].undo)
			munmap(r[i].undo, r[i].len);
	}
	free(r);
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

/* Both directions: on != 0 turns the wanted sites (all if naddrs == 0)
 * that are NOPs into calls, on == 0 every call back into the NOP. */
static int patch(int on, const uintptr_t *addrs, size_t naddrs)
{
	int err = 0;
	xp_trace_patch_error = "";
	uintptr_t *sorted = xp_malloc((naddrs ? naddrs : 1) * sizeof(uintptr_t));
	void **pins = xp_calloc(xp_trace_nobjects ? xp_trace_nobjects : 1, sizeof(void *));
	size_t total = 0;
	for (size_t i = 0; i < xp_trace_nobjects; i++)
		total += xp_trace_objects[i]->nsites;
	struct change *c = xp_malloc((total ? total : 1) * sizeof(*c));
	size_t n = 0;
	if (!sorted || !pins || !c) {
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

	for (size_t i = 0; i < xp_trace_nobjects; i++) {
		struct xp_trace_object *o = xp_trace_objects[i];
		size_t mine = 0;
		for (size_t j = 0; j < o->nsites; j++)
			mine += o->on[j] != on && (!on || wanted(o->sites[j], sorted, naddrs));
		if (!mine)
			continue;
		/* Unloaded since the refresh: nothing of it to switch. */
		if (!(pins[i] = xp_trace_object_pin(o)))
			continue;
		if (on && !o->trampoline && !(o->trampoline = xp_trace_tramp_new(o))) {
			xp_trace_patch_error = "cannot map a trampoline page within 2 GiB of the object";
			err = -ENOMEM;
			goto out;
		}
		for (size_t j = 0; j < o->nsites; j++) {
			if (o->on[j] == on || (on && !wanted(o->sites[j], sorted, naddrs)))
				continue;
			struct change *ch = &c[n];
			ch->site = o->sites[j];
			memcpy(ch->old, (const void *)ch->site, XP_TRACE_SITE_LEN);
			/* The bytes must still be what we think they are; a
			 * mapping replaced since the refresh is left alone. */
			uint8_t expect[XP_TRACE_SITE_LEN];
			call_bytes(expect, ch->site, o->trampoline);
			if (on ? !xp_trace_site_is_nop(ch->old) : memcmp(ch->old, expect, XP_TRACE_SITE_LEN) != 0)
				continue;
			if (on)
				memcpy(ch->new, expect, XP_TRACE_SITE_LEN);
			else
				xp_trace_site_nop(o, j, ch->new);
			ch->on = &o->on[j];
			ch->to = (uint8_t)on;
			n++;
		}
	}
	if (n)
		err = switch_sites(c, n);
out:
	for (size_t i = 0; pins && i < xp_trace_nobjects; i++)
		xp_trace_object_unpin(pins[i]);
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
