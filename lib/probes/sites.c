/* SPDX-License-Identifier: MIT */
/* Finding sites: every object the dynamic loader has mapped is walked with
 * dl_iterate_phdr; each site left an allocated "xprobes" note (in a PT_NOTE
 * segment) holding the offset of its record.  No file is read, so a
 * replaced or deleted binary still works, and libraries loaded with dlopen
 * after the agent started are found at the next rescan.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <elf.h>
#include <fnmatch.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "probes.h"


/* What one dl_iterate_phdr pass saw of one object. */
struct seen_site {
	struct xprobes_site *rec;
	char *provider, *name, *types;
	const struct xprobes_handler_list *handlers; /* rec->handlers, when seen */
};
struct seen_object {
	char *dlname;
	uintptr_t base, lo, hi;
	struct seen_site *sites;
	size_t nsites;
	int known; /* matches an object we already have */
	/* Records of another ABI: skipped, and said once per object. */
	unsigned foreign, foreign_abi, foreign_size;
};
struct scan {
	struct seen_object *objs;
	size_t nobjs;
	unsigned long long adds, subs;
	int failed;
};

static unsigned long long last_adds = ~0ull, last_subs = ~0ull;

/* Is [addr, addr+len) inside a loaded segment of this object (writable when
 * asked)?  Records come from notes we did not write ourselves: trust
 * nothing. */
static const ElfW(Phdr) *segment_of(const struct dl_phdr_info *info,
				    uintptr_t addr, size_t len, int writable)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		if (writable && !(ph->p_flags & PF_W))
			continue;
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		uintptr_t hi = lo + ph->p_memsz;
		if (addr >= lo && len <= hi - addr && addr + len <= hi)
			return ph;
	}
	return NULL;
}

/* A copy of a NUL-terminated string that must lie inside the object. */
static char *copy_string(const struct dl_phdr_info *info, const char *s)
{
	const ElfW(Phdr) *ph = segment_of(info, (uintptr_t)s, 1, 0);
	if (!ph)
		return NULL;
	uintptr_t end = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
	size_t max = end - (uintptr_t)s;
	size_t n = strnlen(s, max < 4096 ? max : 4096);
	if (n == max || n == 4096)
		return NULL;
	return xp_strndup(s, n);
}

static void add_site(struct scan *sc, struct seen_object *o,
		     const struct dl_phdr_info *info, struct xprobes_site *rec)
{
	for (size_t i = 0; i < o->nsites; i++)
		if (o->sites[i].rec == rec)
			return; /* one record, several notes (inlining) */
	/* The version and size first: they say how much of it we may read. */
	if (!segment_of(info, (uintptr_t)rec, 4, 1))
		return;
	if (rec->abi != XPROBES_SITE_ABI || rec->size < sizeof(*rec)) {
		o->foreign++;
		o->foreign_abi = rec->abi;
		o->foreign_size = rec->size;
		return;
	}
	if (!segment_of(info, (uintptr_t)rec, sizeof(*rec), 1) || rec->nargs > XPROBES_MAX_ARGS)
		return;
	if (!segment_of(info, (uintptr_t)rec->gate, sizeof(*rec->gate), 1))
		return;
	char *prov = copy_string(info, rec->provider);
	char *name = copy_string(info, rec->name);
	char *types = copy_string(info, rec->types);
	void *grown = xp_realloc(o->sites, (o->nsites + 1) * sizeof(*o->sites));
	if (!prov || !name || !types || !grown) {
		free(prov);
		free(name);
		free(types);
		if (grown)
			o->sites = grown;
		sc->failed = 1;
		return;
	}
	o->sites = grown;
	/* Read while dl_iterate_phdr holds the loader's lock: the object
	 * cannot be unmapped under us. */
	o->sites[o->nsites++] = (struct seen_site){
		rec, prov, name, types, __atomic_load_n(&rec->handlers, __ATOMIC_ACQUIRE)
	};
}

struct note_ctx {
	struct scan *sc;
	struct seen_object *o;
	const struct dl_phdr_info *info;
};

static void on_note(const void *desc, uintptr_t record, void *arg)
{
	struct note_ctx *c = arg;
	(void)desc;
	add_site(c->sc, c->o, c->info, (struct xprobes_site *)record);
}

static void scan_notes(struct scan *sc, struct seen_object *o,
		       const struct dl_phdr_info *info, const ElfW(Phdr) *ph)
{
	struct note_ctx c = { sc, o, info };
	xp_notes_walk((const void *)(info->dlpi_addr + ph->p_vaddr), ph->p_memsz, on_note, &c);
}

static int scan_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct scan *sc = arg;

	if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
		sc->adds = info->dlpi_adds;
		sc->subs = info->dlpi_subs;
	}
	void *grown = xp_realloc(sc->objs, (sc->nobjs + 1) * sizeof(*sc->objs));
	if (!grown) {
		sc->failed = 1;
		return 1;
	}
	sc->objs = grown;
	struct seen_object *o = &sc->objs[sc->nobjs];
	memset(o, 0, sizeof(*o));
	o->dlname = xp_strdup(info->dlpi_name ? info->dlpi_name : "");
	o->base = info->dlpi_addr;
	if (!o->dlname) {
		sc->failed = 1;
		return 1;
	}
	sc->nobjs++;
	o->lo = UINTPTR_MAX;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_NOTE)
			scan_notes(sc, o, info, ph);
		if (ph->p_type == PT_LOAD) {
			uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
			if (lo < o->lo)
				o->lo = lo;
			if (lo + ph->p_memsz > o->hi)
				o->hi = lo + ph->p_memsz;
		}
	}
	return 0;
}

static char *display_path(const char *dlname)
{
	if (*dlname)
		return xp_strdup(dlname);
	char buf[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
	if (n <= 0)
		return xp_strdup("(main program)");
	buf[n] = '\0';
	return xp_strdup(buf);
}

static void free_seen(struct scan *sc)
{
	for (size_t i = 0; i < sc->nobjs; i++) {
		struct seen_object *o = &sc->objs[i];
		for (size_t j = 0; j < o->nsites; j++) {
			free(o->sites[j].provider);
			free(o->sites[j].name);
			free(o->sites[j].types);
		}
		free(o->sites);
		free(o->dlname);
	}
	free(sc->objs);
}

static void site_free(struct xp_site *s)
{
	free(s->provider);
	free(s->name);
	free(s->types);
	free(s->fullname);
	free(s->atts);
	free(s);
}

static void object_free(struct xp_object *obj)
{
	/* Its threads' readers lived in its TLS: forget them too. */
	xp_readers_forget_object(obj->lo, obj->hi);
	for (size_t i = 0; i < obj->nsites; i++) {
		xp_site_forget(obj->sites[i]);
		site_free(obj->sites[i]);
	}
	free(obj->sites);
	free(obj->path);
	free(obj->dlname);
	free(obj);
}

static struct xp_site *site_new(struct xp_object *obj, struct seen_site *ss)
{
	struct xp_site *s = xp_calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->rec = ss->rec;
	s->obj = obj;
	s->types = sig_canonical_dup(ss->types);
	size_t n = strlen(ss->provider) + strlen(ss->name) + 2;
	s->fullname = xp_malloc(n);
	if (!s->types || !s->fullname || xp_fault()) {
		free(s->types);
		free(s->fullname);
		free(s);
		return NULL;
	}
	s->provider = ss->provider;
	s->name = ss->name;
	ss->provider = ss->name = NULL;
	if (*s->provider)
		snprintf(s->fullname, n, "%s:%s", s->provider, s->name);
	else
		snprintf(s->fullname, n, "%s", s->name);
	return s;
}


/* Same name, same address, but not the mapping we knew: it was dlclose()d
 * and dlopen()ed again between two rescans, perhaps from a file replaced
 * meanwhile.  It is the same only if it has exactly our sites, each record
 * at the same address naming the same site, and every list we published
 * is still there (a fresh mapping's records hold none).  Anything else is
 * a new object: writing through our old record pointers would scribble on
 * whatever the new library keeps there. */
static int reloaded(const struct xp_object *obj, const struct seen_object *so)
{
	if (obj->nsites != so->nsites)
		return 1;
	for (size_t i = 0; i < obj->nsites; i++) {
		const struct xp_site *s = obj->sites[i];
		const struct seen_site *ss = NULL;
		for (size_t j = 0; j < so->nsites && !ss; j++)
			if (so->sites[j].rec == s->rec)
				ss = &so->sites[j];
		if (!ss || strcmp(ss->provider, s->provider) != 0 || strcmp(ss->name, s->name) != 0)
			return 1;
		char *types = sig_canonical_dup(ss->types);
		int same = types && strcmp(types, s->types) == 0;
		free(types);
		if (!same || ss->handlers != s->published)
			return 1;
	}
	return 0;
}

/* Make our object for so, with all its sites; all or nothing. */
static struct xp_object *object_new(struct seen_object *so)
{
	struct xp_object *obj = xp_calloc(1, sizeof(*obj));
	if (!obj)
		return NULL;
	obj->dlname = xp_strdup(so->dlname);
	obj->path = display_path(so->dlname);
	obj->base = so->base;
	obj->lo = so->lo;
	obj->hi = so->hi;
	obj->sites = xp_calloc(so->nsites ? so->nsites : 1, sizeof(*obj->sites));
	int ok = obj->dlname && obj->path && obj->sites;
	for (size_t j = 0; ok && j < so->nsites; j++) {
		struct xp_site *s = site_new(obj, &so->sites[j]);
		if (s)
			obj->sites[obj->nsites++] = s;
		ok = s != NULL;
	}
	if (!ok) {
		for (size_t j = 0; j < obj->nsites; j++)
			site_free(obj->sites[j]);
		free(obj->dlname);
		free(obj->path);
		free(obj->sites);
		free(obj);
		return NULL;
	}
	return obj;
}

/* The loader's load and unload counters, from the first object only. */
static int read_counters(struct dl_phdr_info *info, size_t size, void *arg)
{
	unsigned long long *c = arg;

	if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
		c[0] = info->dlpi_adds;
		c[1] = info->dlpi_subs;
	}
	return 1;
}

void xp_loader_counts(unsigned long long counts[2])
{
	counts[0] = counts[1] = ~0ull - 1; /* no counters: never "unchanged" */
	dl_iterate_phdr(read_counters, counts);
}

int xp_objects_refresh(struct xp_object ***added, size_t *nadded, struct textbuf *log)
{
	struct scan sc = { 0 };
	unsigned long long counters[2];

	*added = NULL;
	*nadded = 0;
	/* Nothing loaded or unloaded since the last rescan (a dlopen() of a
	 * library already open, the 250 ms tick): no need to read any note. */
	xp_loader_counts(counters);
	if (counters[0] == last_adds && counters[1] == last_subs)
		return 0;
	dl_iterate_phdr(scan_object, &sc);
	if (sc.failed) {
		free_seen(&sc);
		if (log)
			tb_puts(log, "rescan: out of memory reading the loaded objects; tried again "
				     "at the next command\n");
		return -ENOMEM; /* counters not taken: the next rescan retries */
	}
	if (sc.adds == last_adds && sc.subs == last_subs) {
		free_seen(&sc);
		return 0;
	}

	/* Which of our objects are still there, as the same mapping. */
	for (size_t i = 0; i < xp_agent.nobjects; i++) {
		struct xp_object *o = xp_agent.objects[i];
		o->seen = 0;
		for (size_t j = 0; j < sc.nobjs && !o->seen; j++) {
			struct seen_object *so = &sc.objs[j];
			if (so->known || o->base != so->base || strcmp(o->dlname, so->dlname) != 0)
				continue;
			if (!reloaded(o, so))
				o->seen = so->known = 1;
		}
	}

	/* Objects that were unloaded (or reloaded) first: their memory is gone,
	 * and their readers must be forgotten before a new mapping at the same
	 * place can register its own (it cannot before we attach it).  Their
	 * handler lists are retired, freed after the next grace period, which
	 * the control thread runs. */
	size_t kept = 0;
	for (size_t i = 0; i < xp_agent.nobjects; i++) {
		if (xp_agent.objects[i]->seen)
			xp_agent.objects[kept++] = xp_agent.objects[i];
		else
			object_free(xp_agent.objects[i]);
	}
	xp_agent.nobjects = kept;

	/* New objects: made in full first, listed only if all of them fit. */
	size_t nnew = 0;
	for (size_t i = 0; i < sc.nobjs; i++) {
		struct seen_object *so = &sc.objs[i];
		if (!so->known && so->foreign && log)
			tb_printf(log,
				  "%s: %u site%s built for XProbes site ABI %u (record size %u) "
				  "ignored; this agent reads site ABI %u (size %zu): rebuild it "
				  "against this version's <xprobes/site.h>\n",
				  *so->dlname ? so->dlname : "main program", so->foreign,
				  so->foreign == 1 ? "" : "s", so->foreign_abi, so->foreign_size,
				  XPROBES_SITE_ABI, sizeof(struct xprobes_site));
		nnew += !so->known && so->nsites > 0; /* objects without sites are not remembered */
	}
	struct xp_object **made = xp_calloc(nnew ? nnew : 1, sizeof(*made));
	/* Never realloc to 0 bytes: glibc frees the block then. */
	void *grown = made ? xp_realloc(xp_agent.objects, (xp_agent.nobjects + nnew + 1) * sizeof(*xp_agent.objects))
			   : NULL;
	if (grown)
		xp_agent.objects = grown;
	size_t nmade = 0;
	int ok = grown != NULL;
	for (size_t i = 0; ok && i < sc.nobjs; i++) {
		struct seen_object *so = &sc.objs[i];
		if (so->known || so->nsites == 0)
			continue;
		made[nmade] = object_new(so);
		ok = made[nmade++] != NULL;
	}
	if (!ok) {
		for (size_t i = 0; i < nmade; i++)
			if (made[i])
				object_free(made[i]);
		free(made);
		free_seen(&sc);
		if (log)
			tb_puts(log, "rescan: out of memory adding newly loaded objects; tried again "
				     "at the next command\n");
		return -ENOMEM; /* counters not taken: retried */
	}
	for (size_t i = 0; i < nmade; i++)
		xp_agent.objects[xp_agent.nobjects++] = made[i];
	*added = made;
	*nadded = nmade;

	last_adds = sc.adds;
	last_subs = sc.subs;
	free_seen(&sc);
	return 0;
}

int xp_site_matches(const struct xp_site *s, const char *glob)
{
	return fnmatch(glob, s->fullname, 0) == 0 || fnmatch(glob, s->name, 0) == 0;
}

int xp_object_matches(const struct xp_object *o, const char *glob)
{
	const char *base = strrchr(o->path, '/');
	base = base ? base + 1 : o->path;
	return fnmatch(glob, o->path, 0) == 0 || fnmatch(glob, base, 0) == 0;
}

void xp_site_forget(struct xp_site *s)
{
	for (size_t i = 0; i < s->natts; i++) {
		s->atts[i]->mod->nattached--;
		free(s->atts[i]);
	}
	s->natts = 0;
	xp_site_unpublish_gone(s);
}
