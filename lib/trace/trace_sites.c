/* SPDX-License-Identifier: MIT */
/* Finding the tracer's patch sites: every loaded object that was linked
 * with libxprobes_trace.a carries an "xprobes" note of type XP_NOTE_TRACE
 * locating its table of function entries (lib/static/trace_note.c).  Like
 * sites.c, it is found through dl_iterate_phdr without reading files, and
 * nothing in it is trusted: every entry must be five bytes inside an
 * executable segment of the same object holding a NOP5 or a call to that
 * object's trampoline, or it is never patched.
 *
 * An object built with plain -fpatchable-function-entry=5 (what `uftrace
 * -P` traces) has the table but no note: it is found by its section
 * header, __patchable_function_entries, read from the object's file
 * (trace_plain.c) once the file's build id is the mapping's.  clang's
 * entries are one 5-byte NOP and are traced like ours; gcc's are five
 * 1-byte NOPs, which only our constructor may join (before any thread can
 * be between two of them): those are counted, and start says what the
 * object lacks.
 *
 * A refresh rebuilds every object's list (an object seen while another
 * thread's dlopen() has not yet run its constructors shows gcc's 90 x5 and
 * is looked at again next time), keeping what trace_patch.c knows of the
 * objects still loaded: which sites are calls, and the trampoline.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../probes/probes.h"
#include "trace.h"

struct xp_trace_object **xp_trace_objects;
size_t xp_trace_nobjects;
size_t xp_trace_nunpatchable;
size_t xp_trace_ngcc_plain;
size_t xp_trace_nbreak, xp_trace_nscar;
char xp_trace_gcc_plain_path[256];
/* The loader's load and unload counts at the last refresh. */
static unsigned long long seen_adds = ~0ull, seen_subs = ~0ull;

/* Ours, around the shared part: what identifies the mapping. */
struct tobj {
	struct xp_trace_object pub;
	char *dlname;                 /* as dl_iterate_phdr says: "" for the program */
	uintptr_t table;              /* the entries table's runtime address */
	struct tobj *prev;            /* the same mapping at the last refresh */
};

struct scan {
	struct tobj **objs;
	size_t nobjs;
	size_t unpatchable;
	size_t gcc_plain;             /* of those, gcc's 90 x5 in objects with no note */
	size_t nbreak, nscar;         /* of those, another tool's (xp_trace_nbreak) */
	char gcc_plain_path[256];     /* the first such object */
	int failed;
};

static struct tobj *tobj_of(struct xp_trace_object *o)
{
	return (struct tobj *)((char *)o - offsetof(struct tobj, pub));
}

/* [addr, addr + len) inside one PT_LOAD of the object, executable if asked. */
static int inside(const struct dl_phdr_info *info, uintptr_t addr, size_t len, int exec)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || (exec && !(ph->p_flags & PF_X)))
			continue;
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		uintptr_t hi = lo + ph->p_memsz;
		if (addr >= lo && addr <= hi && len <= hi - addr)
			return 1;
	}
	return 0;
}

int xp_trace_site_is_nop(const uint8_t *b)
{
	/* nopl disp8(%rax,%rax,1): clang writes disp8 8; or the constructor's
	 * for gcc's five 1-byte NOPs. */
	return memcmp(b, XP_TRACE_NOP5, 4) == 0 || memcmp(b, XP_TRACE_NOP5_GCC, 5) == 0;
}

static int is_call_to(const uint8_t *b, uintptr_t site, const void *target)
{
	int32_t rel;
	if (b[0] != XP_TRACE_CALL || !target)
		return 0;
	memcpy(&rel, b + 1, 4);
	return site + XP_TRACE_SITE_LEN + (uintptr_t)(intptr_t)rel == (uintptr_t)target;
}

/* What another tool may leave at an entry: see trace_verify.c. */
int xp_trace_site_state(const uint8_t *b, uintptr_t site, const void *tramp)
{
	static const uint8_t scar[XP_TRACE_SITE_LEN] = { 0x90, 0x66, 0x66, 0x66, 0x90 };
	if (xp_trace_site_is_nop(b))
		return XP_SITE_NOP;
	if (b[0] == XP_TRACE_CALL) /* ours, or an optimised uprobe's */
		return is_call_to(b, site, tramp) ? XP_SITE_CALL : XP_SITE_BREAK;
	if (b[0] == 0xcc)
		return XP_SITE_BREAK;
	if (memcmp(b, scar, sizeof(scar)) == 0)
		return XP_SITE_SCAR;
	return XP_SITE_OTHER;
}

static struct tobj *previous(const char *dlname, uintptr_t base, uintptr_t table)
{
	for (size_t i = 0; i < xp_trace_nobjects; i++) {
		struct tobj *t = tobj_of(xp_trace_objects[i]);
		if (t->pub.base == base && t->table == table && strcmp(t->dlname, dlname) == 0)
			return t;
	}
	return NULL;
}

static int cmp_addr(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
	return x < y ? -1 : x > y;
}

/* The NOP the site, a call now, had at the last refresh (no last
 * refresh: the constructor's, a NOP from every byte). */
static uint8_t old_nop(const struct tobj *prev, uintptr_t site)
{
	if (!prev)
		return XP_TRACE_NOP_GCC;
	const uintptr_t *p = bsearch(&site, prev->pub.sites, prev->pub.nsites, sizeof(uintptr_t),
				     cmp_addr);
	return p ? prev->pub.nop[p - prev->pub.sites] : XP_TRACE_NOP_GCC;
}

static void tobj_free(struct tobj *t)
{
	if (!t)
		return;
	free(t->pub.sites);
	free(t->pub.on);
	free(t->pub.nop);
	free((char *)t->pub.path);
	free(t->dlname);
	free(t);
}

/* The file the process maps at addr, by /proc/self/maps (which names it
 * by its absolute path whatever the path it was opened by), or NULL. */
static char *mapped_file(uintptr_t addr)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[4096 + 128], *found = NULL;
	while (f && !found && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		int at = 0;
		if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &lo, &hi, &at) < 2 || !at)
			continue;
		if (addr < lo || addr >= hi || line[at] != '/')
			continue;
		line[strcspn(line, "\n")] = '\0';
		found = xp_strdup(line + at);
	}
	if (f)
		fclose(f);
	return found;
}

/* The name `trace objects` shows: the program's own through the kernel's
 * link, which names the file even when argv[0] does not; a library
 * dlopen()ed by a relative path ("./lib.so": the loader keeps the name
 * as given, relative to a directory the process may have left since) by
 * the file mapped at its first loadable segment. */
static char *display_path(const struct dl_phdr_info *info, const char *dlname)
{
	if (*dlname == '/')
		return xp_strdup(dlname);
	if (*dlname) {
		char *abs = NULL;
		for (int i = 0; i < info->dlpi_phnum && !abs; i++)
			if (info->dlpi_phdr[i].p_type == PT_LOAD)
				abs = mapped_file(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
		return abs ? abs : xp_strdup(dlname);
	}
	char *exe = realpath("/proc/self/exe", NULL);
	char *copy = xp_strdup(exe ? exe : "(main program)");
	free(exe);
	return copy;
}

static const uint8_t gcc_nops[XP_TRACE_SITE_LEN] = { 0x90, 0x90, 0x90, 0x90, 0x90 };

/* An entries table [start, stop), read while dl_iterate_phdr holds the
 * loader's lock (the object cannot go away meanwhile).  plain: found by
 * its section, no note (and so no constructor of ours). */
static void add_table(struct scan *sc, const struct dl_phdr_info *info, uintptr_t start,
		      uintptr_t stop, int plain)
{
	if (stop < start || (start | stop) % 8 != 0 || !inside(info, start, stop - start, 0))
		return;
	const char *dlname = info->dlpi_name ? info->dlpi_name : "";
	for (size_t i = 0; i < sc->nobjs; i++)
		if (sc->objs[i]->table == start && sc->objs[i]->pub.base == info->dlpi_addr)
			return; /* the same table twice (two copies of the note) */

	size_t n = (stop - start) / 8;
	struct tobj *t = xp_calloc(1, sizeof(*t));
	void *grown = t ? xp_realloc(sc->objs, (sc->nobjs + 1) * sizeof(*sc->objs)) : NULL;
	if (grown)
		sc->objs = grown;
	if (!grown || !(t->dlname = xp_strdup(dlname)) || !(t->pub.path = display_path(info, dlname)) ||
	    !(t->pub.sites = xp_malloc((n ? n : 1) * sizeof(uintptr_t))) ||
	    !(t->pub.on = xp_calloc(n ? n : 1, 1)) || !(t->pub.nop = xp_calloc(n ? n : 1, 1))) {
		tobj_free(t);
		sc->failed = 1;
		return;
	}
	t->pub.base = info->dlpi_addr;
	t->table = start;
	t->prev = previous(dlname, info->dlpi_addr, start);
	sc->objs[sc->nobjs++] = t;

	const uintptr_t *e = (const uintptr_t *)start;
	void *tramp = t->prev ? t->prev->pub.trampoline : NULL;
	for (size_t i = 0; i < n; i++) {
		uintptr_t site = e[i];
		const uint8_t *b = (const uint8_t *)site;
		if (!inside(info, site, XP_TRACE_SITE_LEN, 1) ||
		    !(xp_trace_site_is_nop(b) || is_call_to(b, site, tramp))) {
			sc->unpatchable++; /* gcc's 90 x5 left as it was, or not ours */
			if (inside(info, site, XP_TRACE_SITE_LEN, 1)) {
				int st = xp_trace_site_state(b, site, tramp);
				sc->nbreak += st == XP_SITE_BREAK;
				sc->nscar += st == XP_SITE_SCAR;
			}
			if (plain && inside(info, site, XP_TRACE_SITE_LEN, 1) &&
			    memcmp(b, gcc_nops, sizeof(gcc_nops)) == 0 && !sc->gcc_plain++)
				snprintf(sc->gcc_plain_path, sizeof(sc->gcc_plain_path), "%s",
					 t->pub.path);
			continue;
		}
		t->pub.sites[t->pub.nsites++] = site;
	}
	qsort(t->pub.sites, t->pub.nsites, sizeof(uintptr_t), cmp_addr);
	size_t kept = 0;
	for (size_t i = 0; i < t->pub.nsites; i++)
		if (kept == 0 || t->pub.sites[i] != t->pub.sites[kept - 1])
			t->pub.sites[kept++] = t->pub.sites[i];
	t->pub.nsites = kept;
	/* The state is what the bytes say: a call to our trampoline is on.
	 * The NOP to go back to: the one the site has, or had when it was
	 * switched (unknown: the constructor's, a NOP from every byte). */
	for (size_t i = 0; i < kept; i++) {
		const uint8_t *b = (const uint8_t *)t->pub.sites[i];
		t->pub.on[i] = is_call_to(b, t->pub.sites[i], tramp);
		t->pub.nop[i] = t->pub.on[i] ? old_nop(t->prev, t->pub.sites[i])
			      : memcmp(b, XP_TRACE_NOP5_GCC, XP_TRACE_SITE_LEN) == 0 ? XP_TRACE_NOP_GCC
			      : b[4];
	}
}

void xp_trace_site_nop(const struct xp_trace_object *o, size_t j, uint8_t *b)
{
	memcpy(b, o->nop[j] == XP_TRACE_NOP_GCC ? XP_TRACE_NOP5_GCC : XP_TRACE_NOP5,
	       XP_TRACE_SITE_LEN);
	if (o->nop[j] != XP_TRACE_NOP_GCC)
		b[4] = o->nop[j];
}

/* One XP_TRACE note's table. */
static void add_object(struct scan *sc, const struct dl_phdr_info *info, const uint8_t *desc)
{
	int32_t off[2];
	memcpy(off, desc, sizeof(off));
	uintptr_t start = (uintptr_t)desc + (uintptr_t)(intptr_t)off[0];
	uintptr_t stop = (uintptr_t)desc + 4 + (uintptr_t)(intptr_t)off[1];
	add_table(sc, info, start, stop, 0);
}

static void add_plain(struct scan *sc, const struct dl_phdr_info *info)
{
	uintptr_t table[2][XP_TRACE_MAX_PLAIN];
	const char *dlname = info->dlpi_name ? info->dlpi_name : "";
	int n = xp_trace_plain_tables(info, dlname, table[0], table[1]);
	for (int i = 0; i < n; i++)
		add_table(sc, info, table[0][i], table[1][i], 1);
}

struct note_scan {
	struct scan *sc;
	const struct dl_phdr_info *info;
};

static int trace_note(uint32_t type, const char *name, uint32_t namesz, const void *desc,
		      uint32_t descsz, void *arg)
{
	struct note_scan *ns = arg;
	if (type == XP_NOTE_TRACE && namesz == 8 && descsz == 8 && memcmp(name, "xprobes", 8) == 0)
		add_object(ns->sc, ns->info, desc);
	return ns->sc->failed;
}

static int scan_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct scan *sc = arg;
	struct note_scan ns = { sc, info };
	size_t before = sc->nobjs;
	(void)size;
	for (int i = 0; i < info->dlpi_phnum && !sc->failed; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_NOTE)
			xp_note_each((const void *)(info->dlpi_addr + ph->p_vaddr), ph->p_memsz,
				     trace_note, &ns);
	}
	if (sc->nobjs == before && !sc->failed)
		add_plain(sc, info);
	return sc->failed;
}

int xp_trace_objects_stale(void)
{
	unsigned long long c[2];
	xp_loader_counts(c);
	return c[0] != seen_adds || c[1] != seen_subs;
}

int xp_trace_objects_refresh(void)
{
	struct scan sc = { 0 };
	unsigned long long counts[2];

	xp_loader_counts(counts); /* before the scan: a load during it shows next time */
	dl_iterate_phdr(scan_object, &sc);
	struct xp_trace_object **list =
		sc.failed ? NULL : xp_calloc(sc.nobjs ? sc.nobjs : 1, sizeof(*list));
	if (!list) {
		for (size_t i = 0; i < sc.nobjs; i++)
			tobj_free(sc.objs[i]);
		free(sc.objs);
		return -ENOMEM; /* the old list stands */
	}
	/* Commit: trampolines move to the new lists; what is no longer loaded
	 * (or is another mapping now) goes, trampoline and all. */
	for (size_t i = 0; i < sc.nobjs; i++) {
		struct tobj *t = sc.objs[i];
		if (t->prev) {
			t->pub.trampoline = t->prev->pub.trampoline;
			t->prev->pub.trampoline = NULL;
			t->prev = NULL;
		}
		list[i] = &t->pub;
	}
	for (size_t i = 0; i < xp_trace_nobjects; i++) {
		struct tobj *t = tobj_of(xp_trace_objects[i]);
		if (t->pub.trampoline)
			xp_trace_tramp_free(t->pub.trampoline);
		tobj_free(t);
	}
	free(xp_trace_objects);
	free(sc.objs);
	xp_trace_objects = list;
	xp_trace_nobjects = sc.nobjs;
	xp_trace_nunpatchable = sc.unpatchable;
	xp_trace_ngcc_plain = sc.gcc_plain;
	xp_trace_nbreak = sc.nbreak;
	xp_trace_nscar = sc.nscar;
	memcpy(xp_trace_gcc_plain_path, sc.gcc_plain_path, sizeof(sc.gcc_plain_path));
	seen_adds = counts[0];
	seen_subs = counts[1];
	return 0;
}

/* Keep the object mapped while its text is written. */
void *xp_trace_object_pin(const struct xp_trace_object *o)
{
	return xp_dl_pin(tobj_of((struct xp_trace_object *)o)->dlname, o->base);
}

void xp_trace_object_unpin(void *token)
{
	xp_dl_unpin(token);
}
