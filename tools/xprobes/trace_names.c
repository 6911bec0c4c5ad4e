/* SPDX-License-Identifier: MIT */
/* Names of traced functions and probe sites, for printing.  Every answer is
 * cached by address (a trace names the same few functions millions of
 * times), and every file's symbol table is read once. */
#define _GNU_SOURCE
#include "xprobes.h"

#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <xprobes/site.h>

struct sym {
	uint64_t value, size;
	const char *name;
	int rank; /* among symbols of one value, the lowest is shown */
};

/* One file's functions, sorted by value. */
struct symtab {
	char *path;           /* as the maps show it, for messages */
	dev_t dev;            /* the file: what the kernel mapped */
	ino_t ino;
	struct sym *syms;
	size_t n;
	char *strings; /* every name, back to back */
	uint64_t first_vaddr; /* of its first PT_LOAD, page-aligned: maps gives its base */
};

struct object {
	uint64_t base;
	struct symtab *tab;
};

struct mapping {
	uint64_t start, end;
	dev_t dev;
	ino_t ino;
	char *path;
};

struct cached {
	uint64_t addr; /* 0: free slot */
	const char *name;
	unsigned kind; /* 0 function, 1 site */
};

struct trace_names {
	pid_t pid;
	const struct session *s; /* its memory: the site records */
	struct symtab **tabs;
	size_t ntabs;
	struct object *objs;
	size_t nobjs;
	struct mapping *maps;
	size_t nmaps;
	int maps_read;
	struct cached *cache; /* open addressing, a power of two */
	size_t ncache, cache_cap;
	char **owned;         /* names made here (0x..., sym+0x..., sites) */
	size_t nowned;
	int refused;          /* a file was not read: open_mapped, or over a limit */
	size_t total_syms, total_bytes; /* kept, all files: see load_symtab */
	char **labels;        /* kept requests' names (trace_labels.c), cleaned */
	size_t nlabels;
};

/* All files' symbols kept together at most (each file's own limits are
 * trace_bounds.c's): a target mapping many large files costs no more. */
#define TOTAL_SYMS (1u << 23)
#define TOTAL_BYTES (512u << 20)

static void clean(char *s)
{
	for (; *s; s++)
		if (*s < 0x20 || *s > 0x7e)
			*s = '?';
}

/* ---- symbol tables --------------------------------------------------- */

static int cmp_sym(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;
	if (x->value != y->value)
		return x->value < y->value ? -1 : 1;
	return x->rank - y->rank;
}

/* Functions of one symbol table section, appended to v (names copied,
 * TRACE_ELF_MAX_NAMES bytes of them at most: -1 past that). */
static int read_section(Elf *e, Elf_Scn *scn, const GElf_Shdr *sh, int from_dynsym,
			struct sym **v, size_t *n, size_t *cap, char **pool, size_t *plen,
			size_t *pcap)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	size_t count = sh->sh_entsize ? sh->sh_size / sh->sh_entsize : 0;
	for (size_t i = 0; d && i < count; i++) {
		GElf_Sym s;
		if (!gelf_getsym(d, (int)i, &s) || s.st_shndx == SHN_UNDEF || !s.st_value)
			continue;
		int type = GELF_ST_TYPE(s.st_info);
		if (type != STT_FUNC && type != STT_GNU_IFUNC)
			continue;
		const char *name = elf_strptr(e, sh->sh_link, s.st_name);
		if (!name || !*name)
			continue;
		size_t len = strlen(name) + 1;
		if (*plen + len > TRACE_ELF_MAX_NAMES)
			return -1;
		if (*n == *cap) {
			size_t ncap = *cap ? 2 * *cap : 1024;
			struct sym *grown = realloc(*v, ncap * sizeof(*grown));
			if (!grown)
				return 0;
			*v = grown;
			*cap = ncap;
		}
		if (*plen + len > *pcap) {
			size_t ncap = 2 * (*plen + len) + 4096;
			char *grown = realloc(*pool, ncap);
			if (!grown)
				return 0;
			*pool = grown;
			*pcap = ncap;
		}
		memcpy(*pool + *plen, name, len);
		int bind = GELF_ST_BIND(s.st_info);
		/* Globals before weak before locals, .symtab before .dynsym. */
		int rank = (bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 2 : 4) + from_dynsym;
		/* Offsets now, pointers once the pool stops moving. */
		(*v)[(*n)++] = (struct sym){ s.st_value, s.st_size, (const char *)(uintptr_t)*plen, rank };
		*plen += len;
	}
	return 0;
}

/* A library call's GOT slot, named as its function (trace_libcall.c). */
struct slot_adder {
	struct sym **v;
	size_t *n, *cap;
	char **pool;
	size_t *plen, *pcap;
};

static void add_slot(void *ctx, uint64_t vaddr, const char *name)
{
	struct slot_adder *a = ctx;
	size_t len = strlen(name) + 1;
	/* Relocations are the target's file's word too: held to the names'
	 * limits (trace_bounds.c). */
	if (*a->n >= TRACE_ELF_MAX_SYMS || *a->plen + len > TRACE_ELF_MAX_NAMES)
		return;
	if (*a->n == *a->cap) {
		size_t ncap = *a->cap ? 2 * *a->cap : 1024;
		struct sym *grown = realloc(*a->v, ncap * sizeof(*grown));
		if (!grown)
			return;
		*a->v = grown;
		*a->cap = ncap;
	}
	if (*a->plen + len > *a->pcap) {
		size_t ncap = 2 * (*a->plen + len) + 4096;
		char *grown = realloc(*a->pool, ncap);
		if (!grown)
			return;
		*a->pool = grown;
		*a->pcap = ncap;
	}
	memcpy(*a->pool + *a->plen, name, len);
	(*a->v)[(*a->n)++] = (struct sym){ vaddr, 8, (const char *)(uintptr_t)*a->plen, 6 };
	*a->plen += len;
}

/* What read_symbols takes of the mapped file, under trace_elf_guard (a
 * file the target shrinks while it is read ends this, not the tool). */
struct scan {
	struct symtab *t;
	const struct trace_elf *te;
	char why[160];
	int bad;
	size_t cap, plen, pcap;
};

static int scan_file(void *arg)
{
	struct scan *c = arg;
	Elf *e = c->te->elf;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	while (!c->bad && (scn = elf_nextscn(e, scn))) {
		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM))
			continue;
		if (trace_elf_symtab_ok(c->te, &sh, c->why, sizeof(c->why)) != 0) {
			c->bad = 1;
		} else if (read_section(e, scn, &sh, sh.sh_type == SHT_DYNSYM, &c->t->syms, &c->t->n,
					&c->cap, &c->t->strings, &c->plen, &c->pcap) != 0) {
			c->bad = 1;
			snprintf(c->why, sizeof(c->why), "more than %u bytes of names",
				 TRACE_ELF_MAX_NAMES);
		}
	}
	if (!c->bad) {
		struct slot_adder a = { &c->t->syms, &c->t->n, &c->cap, &c->t->strings, &c->plen,
					&c->pcap };
		trace_libcall_slots(e, add_slot, &a);
	}
	size_t nph = 0;
	GElf_Phdr ph;
	if (elf_getphdrnum(e, &nph) == 0)
		for (size_t i = 0; i < nph; i++)
			if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD) {
				c->t->first_vaddr = ph.p_vaddr & ~(uint64_t)0xfff;
				break;
			}
	return 0;
}

/* The functions of the ELF file open at fd (none if it is not one, or if
 * it is over trace_bounds.c's limits or shrinks while read: then said,
 * naming it, and *refused set); the bytes of their names. */
static size_t read_symbols(struct symtab *t, int fd, int *refused)
{
	struct trace_elf te;
	struct scan c = { .t = t, .te = &te };
	c.bad = trace_elf_begin(fd, &te, c.why, sizeof(c.why)) < 0;
	if (te.elf && !c.bad && trace_elf_guard(scan_file, &c) == TRACE_ELF_SHRANK) {
		snprintf(c.why, sizeof(c.why), "the file shrank while it was read");
		c.bad = 1;
	}
	size_t plen = c.plen;
	trace_elf_end(&te);
	if (c.bad) { /* none of its names rather than some */
		char shown[PATH_MAX];
		snprintf(shown, sizeof(shown), "%s", t->path);
		fprintf(stderr, "xprobes: trace: not reading the symbols of %s: %s; its functions "
				"show as addresses\n", sanitize_text(shown), c.why);
		*refused = 1;
		free(t->syms);
		free(t->strings);
		t->syms = NULL;
		t->strings = NULL;
		t->n = 0;
		plen = 0;
	}
	for (size_t i = 0; i < t->n; i++)
		t->syms[i].name = t->strings + (uintptr_t)t->syms[i].name;
	if (t->n)
		qsort(t->syms, t->n, sizeof(*t->syms), cmp_sym);
	if (t->strings)
		for (char *p = t->strings; p < t->strings + plen; p += strlen(p) + 1)
			clean(p);
	return plen;
}

/* What a file that is not the mapped one is, for the message. */
static const char *file_kind(const struct stat *st)
{
	return S_ISFIFO(st->st_mode) ? "a FIFO" : S_ISLNK(st->st_mode) ? "a symbolic link"
	       : S_ISDIR(st->st_mode) ? "a directory" : S_ISSOCK(st->st_mode) ? "a socket"
	       : S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode) ? "a device" : "another file";
}

/* A descriptor of name (O_PATH: opening it runs nothing of the file's,
 * neither a FIFO's wait for a writer nor a device's open), checked to be a
 * regular file and, unless m is NULL, the very file of mapping m.  -1:
 * nothing there; -2: something else is, and *st says what. */
static int open_path_checked(const char *name, int flags, const struct mapping *m,
			     struct stat *st)
{
	int fd = open(name, O_PATH | O_CLOEXEC | flags);
	if (fd < 0)
		return -1;
	if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode) ||
	    (m && (st->st_dev != m->dev || st->st_ino != m->ino))) {
		close(fd);
		return -2;
	}
	return fd;
}

/* The file of mapping m, open for reading, or -1.  The name is the
 * target's word: the maps show a path, but the target may have put a FIFO
 * there (open() would block for ever), or a symlink to a file it may not
 * read (root's tool would parse /etc/shadow for it), both under the
 * "PATH (deleted)" the kernel shows for a file it removed.  So first
 * /proc/PID/map_files/START-END, the file the kernel mapped (it takes
 * CAP_SYS_ADMIN: root); else the path as the target sees it (its root),
 * without following a last symlink, and only if it is the file with the
 * mapping's device and inode.  Either way only a regular file is read,
 * reopened through /proc/self/fd once checked.  Anything else at the
 * path is reported (once a file: its table is kept, empty) and marks n
 * refused. */
static int open_mapped(struct trace_names *n, const struct mapping *m)
{
	char name[PATH_MAX + 64], root[64];
	struct stat st;
	snprintf(name, sizeof(name), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)n->pid,
		 m->start, m->end);
	/* The kernel's own link: whatever it leads to is mapped (the target
	 * may have remapped the range since, but only with a file it could
	 * open itself).  Not a regular file: a device, with no symbols. */
	int fd = open_path_checked(name, 0, NULL, &st);
	if (fd == -2)
		return -1;
	if (fd == -1) {
		snprintf(root, sizeof(root), "/proc/%d/root", (int)n->pid);
		snprintf(name, sizeof(name), "%s%s", access(root, X_OK) == 0 ? root : "", m->path);
		fd = open_path_checked(name, O_NOFOLLOW, m, &st);
	}
	if (fd == -2) {
		char shown[PATH_MAX];
		snprintf(shown, sizeof(shown), "%s", m->path);
		fprintf(stderr, "xprobes: trace: refusing to read %s for names: it is %s, not the "
				"file process %d maps there\n", sanitize_text(shown), file_kind(&st),
			(int)n->pid);
		n->refused = 1;
	}
	if (fd < 0)
		return -1;
	char self[64];
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	int rfd = open(self, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	close(fd);
	return rfd;
}

static struct symtab *load_symtab(struct trace_names *n, const struct mapping *m)
{
	struct symtab *t = calloc(1, sizeof(*t));
	if (!t || !(t->path = strdup(m->path))) {
		free(t);
		return NULL;
	}
	t->dev = m->dev;
	t->ino = m->ino;
	int fd = open_mapped(n, m);
	size_t bytes = 0;
	if (fd >= 0) {
		bytes = read_symbols(t, fd, &n->refused);
		close(fd);
	}
	if (t->n > TOTAL_SYMS - n->total_syms || bytes > TOTAL_BYTES - n->total_bytes) {
		char shown[PATH_MAX];
		snprintf(shown, sizeof(shown), "%s", m->path);
		fprintf(stderr, "xprobes: trace: not keeping the symbols of %s: the files read "
				"before hold %zu of the %u kept in all; its functions show as "
				"addresses\n", sanitize_text(shown), n->total_syms, TOTAL_SYMS);
		n->refused = 1;
		free(t->syms);
		free(t->strings);
		t->syms = NULL;
		t->strings = NULL;
		t->n = 0;
		bytes = 0;
	}
	n->total_syms += t->n;
	n->total_bytes += bytes;
	return t;
}

/* The symbols of the file mapping m maps, read once a file. */
static struct symtab *symtab_for(struct trace_names *n, const struct mapping *m)
{
	for (size_t i = 0; i < n->ntabs; i++)
		if (n->tabs[i]->dev == m->dev && n->tabs[i]->ino == m->ino)
			return n->tabs[i];
	struct symtab *t = load_symtab(n, m);
	struct symtab **grown = t ? realloc(n->tabs, (n->ntabs + 1) * sizeof(*grown)) : NULL;
	if (!grown) {
		free(t);
		return NULL;
	}
	n->tabs = grown;
	return n->tabs[n->ntabs++] = t;
}

/* The symbol at value v exactly, or (inexact) the one whose extent holds it. */
static const struct sym *lookup(const struct symtab *t, uint64_t v, int exact)
{
	size_t lo = 0, hi = t->n;
	while (lo < hi) { /* first symbol with value > v */
		size_t mid = lo + (hi - lo) / 2;
		if (t->syms[mid].value <= v)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	const struct sym *s = &t->syms[lo - 1];
	while (s > t->syms && s[-1].value == s->value)
		s--; /* the best ranked of that value */
	if (s->value == v)
		return s;
	return !exact && v - s->value < s->size ? s : NULL;
}

/* ---- the cache ------------------------------------------------------- */

static struct cached *slot(struct trace_names *n, uint64_t addr, unsigned kind)
{
	size_t mask = n->cache_cap - 1;
	size_t i = (size_t)((addr * 0x9e3779b97f4a7c15ull) >> 20) & mask;
	while (n->cache[i].addr && !(n->cache[i].addr == addr && n->cache[i].kind == kind))
		i = (i + 1) & mask;
	return &n->cache[i];
}

static const char *remember(struct trace_names *n, uint64_t addr, unsigned kind, const char *name)
{
	if (!addr)
		return name;
	if (2 * (n->ncache + 1) > n->cache_cap) {
		struct trace_names old = *n;
		n->cache_cap = n->cache_cap ? 2 * n->cache_cap : 1024;
		n->cache = calloc(n->cache_cap, sizeof(*n->cache));
		if (!n->cache) {
			*n = old;
			return name;
		}
		for (size_t i = 0; i < old.cache_cap; i++)
			if (old.cache[i].addr)
				*slot(n, old.cache[i].addr, old.cache[i].kind) = old.cache[i];
		free(old.cache);
	}
	*slot(n, addr, kind) = (struct cached){ addr, name, kind };
	n->ncache++;
	return name;
}

static const char *cached(struct trace_names *n, uint64_t addr, unsigned kind)
{
	return n->cache_cap ? slot(n, addr, kind)->name : NULL;
}

static const char *own(struct trace_names *n, char *s)
{
	char **grown = s ? realloc(n->owned, (n->nowned + 1) * sizeof(*grown)) : NULL;
	if (!grown) {
		free(s);
		return "?";
	}
	n->owned = grown;
	clean(s);
	return n->owned[n->nowned++] = s;
}

/* ---- /proc/PID/maps, for addresses outside the listed objects -------- */

static void read_maps(struct trace_names *n)
{
	char path[64], *line = NULL;
	size_t cap = 0;
	n->maps_read = 1;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)n->pid);
	FILE *f = fopen(path, "re");
	while (f && getline(&line, &cap, f) > 0) {
		unsigned long long start, end, ino;
		unsigned major, minor;
		int off = 0;
		if (sscanf(line, "%llx-%llx %*s %*s %x:%x %llu %n", &start, &end, &major, &minor, &ino,
			   &off) < 5 || !off)
			continue;
		char *file = line + off;
		file[strcspn(file, "\n")] = '\0';
		if (*file != '/')
			continue;
		struct mapping *grown = realloc(n->maps, (n->nmaps + 1) * sizeof(*grown));
		if (!grown)
			break;
		n->maps = grown;
		n->maps[n->nmaps] = (struct mapping){ start, end, makedev(major, minor), (ino_t)ino,
						      strdup(file) };
		if (n->maps[n->nmaps].path)
			n->nmaps++;
	}
	free(line);
	if (f)
		fclose(f);
}

/* addr in a mapped file: "sym" or "sym+0xOFF" through that file's symbols,
 * its base being its lowest mapping less its first segment's address. */
static char *from_maps(struct trace_names *n, uint64_t addr)
{
	if (!n->maps_read)
		read_maps(n);
	for (size_t i = 0; i < n->nmaps; i++) {
		if (addr < n->maps[i].start || addr >= n->maps[i].end)
			continue;
		uint64_t low = n->maps[i].start;
		for (size_t j = 0; j < n->nmaps; j++)
			if (!strcmp(n->maps[j].path, n->maps[i].path) && n->maps[j].start < low)
				low = n->maps[j].start;
		struct symtab *t = symtab_for(n, &n->maps[i]);
		if (!t)
			return NULL;
		uint64_t v = addr - (low - t->first_vaddr);
		const struct sym *s = lookup(t, v, 0);
		char *out = NULL;
		if (s && s->value == v && asprintf(&out, "%s", s->name) < 0)
			out = NULL;
		else if (s && s->value != v && asprintf(&out, "%s+0x%" PRIx64, s->name, v - s->value) < 0)
			out = NULL;
		return out;
	}
	return NULL;
}

/* ---- the callbacks --------------------------------------------------- */

struct trace_names *trace_names_new(const struct session *s)
{
	struct trace_names *n = calloc(1, sizeof(*n));
	if (n) {
		n->pid = s->pid;
		n->s = s;
	}
	elf_version(EV_CURRENT);
	return n;
}

/* The agent's word for an object's path is taken only for a file the
 * process has mapped, and then the mapped file is read (open_mapped): the
 * tool, maybe root, reads no other file for it. */
static const struct mapping *mapped(struct trace_names *n, const char *path)
{
	for (int again = 0; again < 2; again++) {
		if (!n->maps_read)
			read_maps(n);
		for (size_t i = 0; i < n->nmaps; i++)
			if (!strcmp(n->maps[i].path, path))
				return &n->maps[i];
		/* Not there: loaded since the maps were read (a recording
		 * meets libraries dlopen()ed while it runs).  Read them again,
		 * once; the symbol tables keep their own copies. */
		for (size_t i = 0; i < n->nmaps; i++)
			free(n->maps[i].path);
		free(n->maps);
		n->maps = NULL;
		n->nmaps = 0;
		n->maps_read = 0;
	}
	return NULL;
}

int trace_names_open(struct trace_names *n, const char *path)
{
	const struct mapping *m = mapped(n, path);
	return m ? open_mapped(n, m) : -1;
}

int trace_names_add_object(struct trace_names *n, uint64_t base, const char *path)
{
	const struct mapping *m = mapped(n, path);
	struct symtab *t = m ? symtab_for(n, m) : NULL;
	struct object *grown = t ? realloc(n->objs, (n->nobjs + 1) * sizeof(*grown)) : NULL;
	if (!grown)
		return -1;
	n->objs = grown;
	n->objs[n->nobjs++] = (struct object){ base, t };
	return 0;
}

uint64_t trace_names_add_label(struct trace_names *n, const char *text)
{
	char *copy = strdup(text);
	char **grown = copy ? realloc(n->labels, (n->nlabels + 1) * sizeof(*grown)) : NULL;
	if (!grown) {
		free(copy);
		return 0;
	}
	n->labels = grown;
	n->labels[n->nlabels++] = copy;
	return TRACE_REQUEST_CALL | (uint64_t)(n->nlabels - 1);
}

const char *trace_names_func(void *ctx, uint64_t addr)
{
	struct trace_names *n = ctx;
	if (addr & TRACE_REQUEST_CALL) /* a kept request (trace_labels.c) */
		return (addr & ~TRACE_REQUEST_CALL) < n->nlabels ? n->labels[addr & ~TRACE_REQUEST_CALL]
								 : "?";
	const char *known = cached(n, addr, 0);
	if (known)
		return known;
	for (size_t i = 0; i < n->nobjs; i++) {
		const struct sym *s = lookup(n->objs[i].tab, addr - n->objs[i].base, 1);
		if (s)
			return remember(n, addr, 0, s->name);
	}
	char *name = from_maps(n, addr);
	if (!name && asprintf(&name, "0x%" PRIx64, addr) < 0)
		name = NULL;
	return remember(n, addr, 0, own(n, name));
}

const char *trace_names_sym(void *ctx, uint64_t addr)
{
	struct trace_names *n = ctx;
	for (size_t i = 0; i < n->nobjs; i++) {
		const struct sym *s = addr >= n->objs[i].base
					      ? lookup(n->objs[i].tab, addr - n->objs[i].base, 0) : NULL;
		if (s)
			return s->name;
	}
	return NULL;
}

/* A site's provider and name, as its record in the target points to them. */
const char *trace_names_site(void *ctx, uint64_t addr)
{
	struct trace_names *n = ctx;
	const char *known = cached(n, addr, 1);
	if (known)
		return known;
	struct xprobes_site rec;
	char prov[128] = "", name[128] = "";
	char *out = NULL;
	if (trace_vm_read(n->s, addr, &rec, sizeof(rec)) == 0 &&
	    rec.size >= offsetof(struct xprobes_site, name) + sizeof(rec.name) &&
	    trace_vm_read_str(n->s, (uintptr_t)rec.name, name, sizeof(name)) == 0) {
		if (trace_vm_read_str(n->s, (uintptr_t)rec.provider, prov, sizeof(prov)) != 0)
			prov[0] = '\0';
		if (asprintf(&out, "%s%s%s", prov, *prov ? ":" : "", name) < 0)
			out = NULL;
	} else if (asprintf(&out, "site 0x%" PRIx64, addr) < 0) {
		out = NULL;
	}
	return remember(n, addr, 1, own(n, out));
}

int trace_names_refused(const struct trace_names *n)
{
	return n && n->refused;
}

void trace_names_free(struct trace_names *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < n->ntabs; i++) {
		free(n->tabs[i]->path);
		free(n->tabs[i]->syms);
		free(n->tabs[i]->strings);
		free(n->tabs[i]);
	}
	for (size_t i = 0; i < n->nmaps; i++)
		free(n->maps[i].path);
	for (size_t i = 0; i < n->nowned; i++)
		free(n->owned[i]);
	for (size_t i = 0; i < n->nlabels; i++)
		free(n->labels[i]);
	free(n->labels);
	free(n->tabs);
	free(n->objs);
	free(n->maps);
	free(n->cache);
	free(n->owned);
	free(n);
}
