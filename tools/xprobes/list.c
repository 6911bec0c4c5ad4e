/* SPDX-License-Identifier: MIT */
/* xprobes list: XProbes sites and SDT probes in files or in a process,
 * like tplist or `bpftrace -l`.
 *
 *   xprobes list [-v] FILE...    executables and shared libraries
 *   xprobes list [-v] -p PID     every object mapped in a process
 *
 * Files are read with libelf and never run or attached to.  Two kinds of
 * note are listed:
 *   - "xprobes" notes (type 1, in .note.xprobes): a 32-bit offset from the
 *     note's descriptor to the site's struct xprobes_site record, whose
 *     provider, name and types are read from the file;
 *   - "stapsdt" notes (type 3, in .note.stapsdt): SystemTap SDT probes,
 *     which every XProbes site also carries; those without a matching
 *     site (other tools' builds) are listed as SDT only.
 * Nothing in a file is trusted: every offset and pointer is checked
 * against the section it must lie in, and a corrupt file gives an error
 * and a non-zero exit status, never a crash.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <limits.h>
#include <libelf.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xprobes/site.h>

#include "../../lib/base/base.h"
#include "xprobes.h"

#define XP_NOTE_TYPE 1       /* "xprobes" note: where a site record is */
#define SDT_NOTE_TYPE 3      /* NT_STAPSDT */
#define MAX_STRING 4096      /* longer names are corruption, not names */
#define MAX_COMPLAINTS 5     /* per file; a bit-flipped file says enough */

/* Records are read from 64-bit files with this build's layout of struct
 * xprobes_site (x86-64 and aarch64 agree).  Every ABI version so far
 * starts with the fields read here. */
#define REC_SIZE sizeof(struct xprobes_site)
#define REC_PROVIDER offsetof(struct xprobes_site, provider)
#define REC_NAME offsetof(struct xprobes_site, name)
#define REC_TYPES offsetof(struct xprobes_site, types)
_Static_assert(sizeof(void *) == 8, "xprobes list reads LP64 site records");

/* ---- what one object holds ------------------------------------------- */

struct sdt_loc {
	uint64_t pc, semaphore;
	char *args;
};

struct entry {
	char *provider; /* "" for sites made with XPROBES_SITE */
	char *name;
	char *types;    /* canonical; NULL for an SDT-only probe */
	char *sdtprov;  /* the provider the SDT notes use */
	unsigned nsites;
	struct sdt_loc *locs;
	size_t nlocs;
};

struct reloc {
	uint64_t offset, value;
};

struct object {
	const char *label; /* path shown to the user */
	int fd;            /* open while libelf reads from it */
	Elf *elf;
	GElf_Ehdr eh;
	int cls;           /* ELFCLASS32 or ELFCLASS64 */
	struct reloc *rel; /* dynamic relocations: pointer values of PIC data */
	size_t nrel;
	uint64_t *recs;    /* record addresses seen (one record, many notes) */
	size_t nrecs;
	struct entry *ents;
	size_t nents;
	int complaints;
	int xp_notes;      /* xprobes notes seen */
	int has_base;      /* .stapsdt.base found: SDT pcs get adjusted */
	uint64_t base_addr;
};

static void *grow(void *p, size_t n, size_t size)
{
	void *q = realloc(p, (n ? n : 1) * size);
	if (!q) {
		fprintf(stderr, "xprobes list: out of memory\n");
		exit(1);
	}
	return q;
}

static char *dupn(const char *s, size_t n)
{
	char *d = grow(NULL, n + 1, 1);
	memcpy(d, s, n);
	d[n] = '\0';
	return d;
}

/* A problem with the file: reported, remembered for the exit status. */
__attribute__((format(printf, 2, 3)))
static void complain(struct object *o, const char *fmt, ...)
{
	if (o->complaints++ >= MAX_COMPLAINTS) {
		if (o->complaints == MAX_COMPLAINTS + 2)
			fprintf(stderr, "xprobes list: %s: more problems not shown\n",
				o->label);
		return;
	}
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "xprobes list: %s: ", o->label);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* ---- reading the file's memory image ------------------------------------ */

/* len bytes at virtual address addr, from the allocated section holding
 * them, or NULL.  *avail: bytes from addr to the end of that section. */
static const unsigned char *bytes_at(struct object *o, uint64_t addr,
				     size_t len, size_t *avail)
{
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(o->elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_ALLOC) ||
		    sh.sh_type == SHT_NOBITS || sh.sh_type == SHT_NULL)
			continue;
		if (addr < sh.sh_addr || addr - sh.sh_addr >= sh.sh_size)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		if (!d || !d->d_buf)
			return NULL;
		uint64_t off = addr - sh.sh_addr;
		if (off > d->d_size || len > d->d_size - off)
			return NULL;
		if (avail)
			*avail = d->d_size - off;
		return (const unsigned char *)d->d_buf + off;
	}
	return NULL;
}

static uint64_t get_uint(const struct object *o, const unsigned char *p, size_t n)
{
	uint64_t v = 0;
	if (o->eh.e_ident[EI_DATA] == ELFDATA2MSB)
		for (size_t i = 0; i < n; i++)
			v = v << 8 | p[i];
	else
		for (size_t i = n; i-- > 0;)
			v = v << 8 | p[i];
	return v;
}

static int cmp_reloc(const void *a, const void *b)
{
	const struct reloc *x = a, *y = b;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Pointers stored in a shared library's or PIE's data are 0 in the file
 * (or hold the addend): the value comes from a dynamic relocation. */
static int relative_type(const struct object *o, unsigned type)
{
	switch (o->eh.e_machine) {
	case EM_X86_64: return type == 8;    /* R_X86_64_RELATIVE */
	case EM_AARCH64: return type == 1027; /* R_AARCH64_RELATIVE */
	case EM_386: return type == 8;       /* R_386_RELATIVE */
	default: return 0;
	}
}

static int absolute_type(const struct object *o, unsigned type)
{
	switch (o->eh.e_machine) {
	case EM_X86_64: return type == 1;    /* R_X86_64_64 */
	case EM_AARCH64: return type == 257; /* R_AARCH64_ABS64 */
	default: return 0;
	}
}

static void load_relocs(struct object *o)
{
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(o->elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_ALLOC) ||
		    (sh.sh_type != SHT_RELA && sh.sh_type != SHT_REL))
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		if (!d)
			continue;
		Elf_Data *syms = NULL;
		Elf_Scn *symscn = elf_getscn(o->elf, sh.sh_link);
		GElf_Shdr symsh;
		if (symscn && gelf_getshdr(symscn, &symsh) && symsh.sh_type == SHT_DYNSYM)
			syms = elf_getdata(symscn, NULL);
		size_t entsize = gelf_fsize(o->elf, sh.sh_type == SHT_RELA ? ELF_T_RELA : ELF_T_REL,
					    1, EV_CURRENT);
		if (!entsize)
			continue;
		size_t n = d->d_size / entsize;
		for (size_t i = 0; i < n; i++) {
			GElf_Rela r;
			if (sh.sh_type == SHT_RELA) {
				if (!gelf_getrela(d, (int)i, &r))
					break;
			} else {
				GElf_Rel rl;
				if (!gelf_getrel(d, (int)i, &rl))
					break;
				/* REL keeps the addend in the slot itself. */
				r.r_offset = rl.r_offset;
				r.r_info = rl.r_info;
				size_t asz = o->cls == ELFCLASS64 ? 8 : 4;
				const unsigned char *slot = bytes_at(o, rl.r_offset, asz, NULL);
				r.r_addend = slot ? (int64_t)get_uint(o, slot, asz) : 0;
			}
			unsigned type = o->cls == ELFCLASS64 ? GELF_R_TYPE(r.r_info)
							      : ELF32_R_TYPE(r.r_info);
			size_t symi = o->cls == ELFCLASS64 ? GELF_R_SYM(r.r_info)
							   : ELF32_R_SYM(r.r_info);
			uint64_t value;
			if (relative_type(o, type)) {
				value = (uint64_t)r.r_addend;
			} else if (absolute_type(o, type) && syms) {
				GElf_Sym s;
				if (!gelf_getsym(syms, (int)symi, &s) || s.st_shndx == SHN_UNDEF)
					continue;
				value = s.st_value + (uint64_t)r.r_addend;
			} else {
				continue;
			}
			o->rel = grow(o->rel, o->nrel + 1, sizeof(*o->rel));
			o->rel[o->nrel++] = (struct reloc){ r.r_offset, value };
		}
	}
	if (o->nrel)
		qsort(o->rel, o->nrel, sizeof(*o->rel), cmp_reloc);
}

static int read_pointer(struct object *o, uint64_t addr, uint64_t *out)
{
	struct reloc key = { addr, 0 };
	const struct reloc *r = o->nrel ? bsearch(&key, o->rel, o->nrel, sizeof(*o->rel),
						  cmp_reloc) : NULL;
	if (r) {
		*out = r->value;
		return 0;
	}
	size_t asz = o->cls == ELFCLASS64 ? 8 : 4;
	const unsigned char *p = bytes_at(o, addr, asz, NULL);
	if (!p)
		return -1;
	*out = get_uint(o, p, asz);
	return 0;
}

/* A NUL-terminated string at addr, wholly inside one section. */
static char *read_string(struct object *o, uint64_t addr)
{
	size_t avail;
	const unsigned char *p = bytes_at(o, addr, 1, &avail);
	if (!p)
		return NULL;
	size_t max = avail < MAX_STRING ? avail : MAX_STRING;
	size_t n = strnlen((const char *)p, max);
	if (n == max)
		return NULL;
	return dupn((const char *)p, n);
}

/* ---- entries ---------------------------------------------------------- */

static struct entry *find_entry(struct object *o, const char *sdtprov,
				const char *name, const char *types)
{
	for (size_t i = 0; i < o->nents; i++) {
		struct entry *en = &o->ents[i];
		if (strcmp(en->sdtprov, sdtprov) || strcmp(en->name, name))
			continue;
		if (types == NULL || (en->types && !strcmp(en->types, types)))
			return en;
	}
	return NULL;
}

static struct entry *add_entry(struct object *o, const char *provider,
			       const char *sdtprov, const char *name,
			       const char *types)
{
	o->ents = grow(o->ents, o->nents + 1, sizeof(*o->ents));
	struct entry *en = &o->ents[o->nents++];
	memset(en, 0, sizeof(*en));
	en->provider = dupn(provider, strlen(provider));
	en->sdtprov = dupn(sdtprov, strlen(sdtprov));
	en->name = dupn(name, strlen(name));
	en->types = types ? dupn(types, strlen(types)) : NULL;
	return en;
}

/* ---- notes ------------------------------------------------------------- */

static void xprobes_note(struct object *o, uint64_t desc_addr,
			 const unsigned char *desc, size_t descsz)
{
	o->xp_notes++;
	if (descsz != 4) {
		complain(o, "xprobes note with a %zu-byte descriptor (expected 4)", descsz);
		return;
	}
	if (o->cls != ELFCLASS64) {
		if (o->xp_notes == 1)
			complain(o, "XProbes sites in 32-bit objects are not supported");
		return;
	}
	int32_t off = (int32_t)(uint32_t)get_uint(o, desc, 4);
	uint64_t rec = desc_addr + (uint64_t)(int64_t)off;
	for (size_t i = 0; i < o->nrecs; i++)
		if (o->recs[i] == rec)
			return; /* a site duplicated by the compiler: one record */
	o->recs = grow(o->recs, o->nrecs + 1, sizeof(*o->recs));
	o->recs[o->nrecs++] = rec;

	const unsigned char *r = bytes_at(o, rec, REC_SIZE, NULL);
	if (!r) {
		complain(o, "site record at 0x%" PRIx64 " is not inside the file", rec);
		return;
	}
	/* Up to ABI 4 a 32-bit version; from 5 a 16-bit version and size. */
	uint32_t abi = (uint32_t)get_uint(o, r, 4);
	if (abi > 4)
		abi = (uint32_t)get_uint(o, r, 2);
	unsigned nargs = (unsigned)get_uint(o, r + 4, 2);
	if (abi < 1 || abi > XPROBES_SITE_ABI) {
		complain(o, "site record at 0x%" PRIx64 " has XProbes site ABI version %u "
			    "(this xprobes reads 1 to %u)", rec, abi, XPROBES_SITE_ABI);
		return;
	}
	if (nargs > XPROBES_MAX_ARGS) {
		complain(o, "site record at 0x%" PRIx64 " claims %u arguments", rec, nargs);
		return;
	}
	uint64_t pprov, pname, ptypes;
	char *prov = NULL, *name = NULL, *types = NULL;
	if (read_pointer(o, rec + REC_PROVIDER, &pprov) ||
	    read_pointer(o, rec + REC_NAME, &pname) ||
	    read_pointer(o, rec + REC_TYPES, &ptypes) || !(prov = read_string(o, pprov)) ||
	    !(name = read_string(o, pname)) || !(types = read_string(o, ptypes))) {
		complain(o, "site record at 0x%" PRIx64 " has a bad provider, name or types string",
			 rec);
		free(prov);
		free(name);
		free(types);
		return;
	}
	/* The agent's spelling (lib/base/signature.c), so both tools print alike. */
	char *canon = grow(NULL, 2 * strlen(types) + 1, 1);
	sig_canonical(types, canon, 2 * strlen(types) + 1);
	/* XPROBES_SITE sites (no provider) use "xprobes" in their SDT notes. */
	const char *sdtprov = *prov ? prov : "xprobes";
	struct entry *en = find_entry(o, sdtprov, name, canon);
	if (!en)
		en = add_entry(o, prov, sdtprov, name, canon);
	en->nsites++;
	free(prov);
	free(name);
	free(types);
	free(canon);
}

static void sdt_note(struct object *o, const unsigned char *desc, size_t descsz)
{
	size_t asz = o->cls == ELFCLASS64 ? 8 : 4;
	if (descsz < 3 * asz + 2) {
		complain(o, "SDT note too short (%zu bytes)", descsz);
		return;
	}
	uint64_t pc = get_uint(o, desc, asz);
	uint64_t base = get_uint(o, desc + asz, asz);
	uint64_t sem = get_uint(o, desc + 2 * asz, asz);
	const char *s = (const char *)desc + 3 * asz, *end = (const char *)desc + descsz;
	const char *strs[3] = { "", "", "" };
	for (int i = 0; i < 3 && s < end; i++) {
		const char *nul = memchr(s, '\0', (size_t)(end - s));
		if (!nul) {
			complain(o, "SDT note with an unterminated string");
			return;
		}
		strs[i] = s;
		s = nul + 1;
	}
	if (!*strs[0] || !*strs[1]) {
		complain(o, "SDT note without a provider or name");
		return;
	}
	/* Prelink may have moved the text: pcs are relative to
	 * _.stapsdt.base as recorded in the note. */
	if (o->has_base)
		pc += o->base_addr - base;

	/* An XProbes site of that name, whatever its types, else SDT only. */
	struct entry *en = find_entry(o, strs[0], strs[1], NULL);
	if (!en)
		en = add_entry(o, strs[0], strs[0], strs[1], NULL);
	en->locs = grow(en->locs, en->nlocs + 1, sizeof(*en->locs));
	en->locs[en->nlocs++] = (struct sdt_loc){ pc, sem, dupn(strs[2], strlen(strs[2])) };
}

static void scan_notes(struct object *o, Elf_Scn *scn, const GElf_Shdr *sh)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	if (!d || (!d->d_buf && d->d_size)) {
		complain(o, "unreadable note section: %s", elf_errmsg(-1));
		return;
	}
	size_t off = 0;
	while (off < d->d_size) {
		GElf_Nhdr nh;
		size_t name_off, desc_off;
		size_t next = gelf_getnote(d, off, &nh, &name_off, &desc_off);
		if (next == 0 || next <= off) {
			complain(o, "corrupt note at offset %zu of a note section", off);
			return;
		}
		const char *owner = (const char *)d->d_buf + name_off;
		const unsigned char *desc = (const unsigned char *)d->d_buf + desc_off;
		if (nh.n_namesz == 8 && !memcmp(owner, "xprobes", 8) &&
		    nh.n_type == XP_NOTE_TYPE) {
			if (!(sh->sh_flags & SHF_ALLOC))
				complain(o, "xprobes note in a section that is not loaded");
			else
				xprobes_note(o, sh->sh_addr + desc_off, desc, nh.n_descsz);
		} else if (nh.n_namesz == 8 && !memcmp(owner, "stapsdt", 8) &&
			   nh.n_type == SDT_NOTE_TYPE) {
			sdt_note(o, desc, nh.n_descsz);
		}
		off = next;
	}
}

/* ---- printing ---------------------------------------------------------- */

/* Strings from a file may hold anything; the terminal gets printable text. */
static void put_clean(const char *s)
{
	for (; *s; s++)
		putchar(isprint((unsigned char)*s) ? *s : '?');
}

/* One SDT argument spec, "-4@%edx" -> "int32 in edx". */
static void put_sdt_arg(const char *spec, size_t len)
{
	const char *at = memchr(spec, '@', len);
	const char *op = spec;
	size_t oplen = len;
	if (at) {
		char sz[16];
		size_t n = (size_t)(at - spec);
		if (n >= sizeof(sz))
			n = sizeof(sz) - 1;
		memcpy(sz, spec, n);
		sz[n] = '\0';
		char *endp;
		long v = strtol(sz, &endp, 10);
		int is_signed = v < 0;
		long bytes = is_signed ? -v : v;
		if (*endp || n == 0 || (bytes != 1 && bytes != 2 && bytes != 4 && bytes != 8)) {
			printf("size ");
			put_clean(sz);
		} else {
			printf("%s%ld", is_signed ? "int" : "uint", bytes * 8);
		}
		op = at + 1;
		oplen = len - n - 1;
	} else {
		printf("long"); /* version 1 notes: no sizes */
	}
	char buf[128];
	if (oplen >= sizeof(buf))
		oplen = sizeof(buf) - 1;
	memcpy(buf, op, oplen);
	buf[oplen] = '\0';
	if (buf[0] == '%') {
		printf(" in ");
		put_clean(buf + 1);
	} else if (buf[0] == '$') {
		printf(" = ");
		put_clean(buf + 1);
	} else {
		printf(" at ");
		put_clean(buf);
	}
}

static void put_sdt_args(const char *args)
{
	const char *s = args;
	int first = 1;
	while (*s) {
		while (*s == ' ')
			s++;
		if (!*s)
			break;
		const char *e = s;
		while (*e && *e != ' ')
			e++;
		if (!first)
			printf(", ");
		put_sdt_arg(s, (size_t)(e - s));
		first = 0;
		s = e;
	}
	if (first)
		printf("no arguments");
}

static void print_object(const struct object *o, int verbose)
{
	put_clean(o->label);
	printf(":\n");
	if (o->nents == 0)
		printf("  (no probes)\n");
	for (size_t i = 0; i < o->nents; i++) {
		const struct entry *en = &o->ents[i];
		printf("  ");
		if (*en->provider) {
			put_clean(en->provider);
			putchar(':');
		}
		put_clean(en->name);
		/* As the agent's `sites` prints it: one line per probe. */
		if (en->types) {
			putchar('(');
			put_clean(en->types);
			putchar(')');
			if (en->nsites > 1)
				printf(" [%u locations]", en->nsites);
		} else {
			printf(" (SDT only)");
		}
		putchar('\n');
		if (!verbose)
			continue;
		for (size_t j = 0; j < en->nlocs; j++) {
			const struct sdt_loc *l = &en->locs[j];
			printf("    sdt 0x%" PRIx64 ": ", l->pc);
			put_sdt_args(l->args);
			if (l->semaphore)
				printf("; semaphore 0x%" PRIx64, l->semaphore);
			putchar('\n');
		}
	}
}

static void free_object(struct object *o)
{
	for (size_t i = 0; i < o->nents; i++) {
		struct entry *en = &o->ents[i];
		for (size_t j = 0; j < en->nlocs; j++)
			free(en->locs[j].args);
		free(en->locs);
		free(en->provider);
		free(en->sdtprov);
		free(en->name);
		free(en->types);
	}
	free(o->ents);
	free(o->recs);
	free(o->rel);
	if (o->elf)
		elf_end(o->elf);
	if (o->fd >= 0)
		close(o->fd);
}

/* ---- one file ------------------------------------------------------------ */

/* Does [off, off + n * size) fit in a file of `filesize` bytes? */
static int fits(uint64_t off, uint64_t n, uint64_t size, uint64_t filesize)
{
	if (size && n > UINT64_MAX / size)
		return 0;
	return off <= filesize && n * size <= filesize - off;
}

/* Headers and sections must lie inside the file: the usual corruption is
 * a truncated copy, and it deserves its own message. */
static int check_extent(struct object *o, uint64_t filesize, size_t shnum)
{
	size_t phnum = 0;
	if (elf_getphdrnum(o->elf, &phnum))
		phnum = 0;
	/* libelf drops a section header table that does not fit in the
	 * file (shnum 0): the header's own count tells. */
	uint64_t nsec = o->eh.e_shnum ? o->eh.e_shnum : shnum;
	if (o->eh.e_shoff && !nsec) {
		fprintf(stderr, "xprobes list: %s: corrupt: unreadable section headers\n",
			o->label);
		return -1;
	}
	if (nsec && !fits(o->eh.e_shoff, nsec, o->eh.e_shentsize, filesize)) {
		fprintf(stderr, "xprobes list: %s: truncated: section headers end past the "
				"end of the file (%" PRIu64 " bytes)\n", o->label, filesize);
		return -1;
	}
	if (phnum && !fits(o->eh.e_phoff, phnum, o->eh.e_phentsize, filesize)) {
		fprintf(stderr, "xprobes list: %s: truncated: program headers end past the "
				"end of the file (%" PRIu64 " bytes)\n", o->label, filesize);
		return -1;
	}
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(o->elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
			continue;
		if (!fits(sh.sh_offset, 1, sh.sh_size, filesize)) {
			fprintf(stderr, "xprobes list: %s: truncated or corrupt: section %zu "
					"ends past the end of the file (%" PRIu64 " bytes)\n",
				o->label, elf_ndxscn(scn), filesize);
			return -1;
		}
	}
	return 0;
}

enum { LIST_OK = 0, LIST_FAILED = 1, LIST_NOT_ELF = 2 };

static const char *file_kind(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFDIR: return "a directory";
	case S_IFIFO: return "a FIFO (named pipe)";
	case S_IFCHR: return "a character device";
	case S_IFBLK: return "a block device";
	case S_IFSOCK: return "a socket";
	default: return "not a regular file";
	}
}

/* Opens path for reading if it is a regular file.  O_NONBLOCK, so that
 * opening a FIFO with no writer returns at once instead of waiting for
 * one (forever), and the type is checked before anything is read.
 * Returns the descriptor; -1 after a message; -2 (message only if
 * `loud`) when it is not a regular file. */
static int open_regular(const char *path, const char *label, struct stat *st,
			int loud)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) {
		int err = errno;
		/* A socket cannot be opened at all: say what it is. */
		if (err == ENXIO && stat(path, st) == 0 && S_ISSOCK(st->st_mode)) {
			if (loud)
				fprintf(stderr, "xprobes list: %s: is a socket, not an "
						"executable or library\n", label);
			return -2;
		}
		fprintf(stderr, "xprobes list: %s: %s\n", label, strerror(err));
		return -1;
	}
	if (fstat(fd, st)) {
		fprintf(stderr, "xprobes list: %s: %s\n", label, strerror(errno));
		close(fd);
		return -1;
	}
	if (!S_ISREG(st->st_mode)) {
		if (loud)
			fprintf(stderr, "xprobes list: %s: is %s, not an executable or "
					"library\n", label, file_kind(st->st_mode));
		close(fd);
		return -2;
	}
	return fd;
}

/* Lists the file at path (shown as label).  With skip_empty, objects with
 * no probes print nothing (process listings). */
/* verbose < 0: count the probes into *found, print nothing. */
static int list_file(const char *path, const char *label, int verbose, int skip_empty,
		     size_t *found)
{
	struct object o;
	memset(&o, 0, sizeof(o));
	o.label = label;
	o.fd = -1;

	struct stat st;
	int fd = open_regular(path, label, &st, !skip_empty);
	if (fd == -2)
		return LIST_NOT_ELF; /* a device or the like mapped by a process */
	if (fd < 0)
		return LIST_FAILED;
	unsigned char magic[SELFMAG];
	if (pread(fd, magic, SELFMAG, 0) != SELFMAG || memcmp(magic, ELFMAG, SELFMAG)) {
		close(fd);
		if (!skip_empty)
			fprintf(stderr, "xprobes list: %s: not an ELF file\n", label);
		return LIST_NOT_ELF;
	}
	/* ELF_C_READ, not a mapping: libelf reads each section into its own
	 * buffer with pread, so a file truncated under us cannot fault, and
	 * a read past a section's end is caught by the sanitizers the
	 * corruption test runs this under. */
	o.fd = fd;
	o.elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!o.elf || elf_kind(o.elf) != ELF_K_ELF || !gelf_getehdr(o.elf, &o.eh)) {
		int err = elf_errno();
		fprintf(stderr, "xprobes list: %s: corrupt ELF file (%s)\n", label,
			err ? elf_errmsg(err) : "truncated or unknown ELF header");
		free_object(&o);
		return LIST_FAILED;
	}
	o.cls = gelf_getclass(o.elf);
	if (o.eh.e_type == ET_REL) {
		fprintf(stderr, "xprobes list: %s: relocatable object; list the linked "
				"program or library instead\n", label);
		free_object(&o);
		return LIST_FAILED;
	}
	size_t shnum, shstrndx;
	if (elf_getshdrnum(o.elf, &shnum) || elf_getshdrstrndx(o.elf, &shstrndx)) {
		fprintf(stderr, "xprobes list: %s: corrupt section headers (%s)\n", label,
			elf_errmsg(-1));
		free_object(&o);
		return LIST_FAILED;
	}
	if (check_extent(&o, (uint64_t)st.st_size, shnum)) {
		free_object(&o);
		return LIST_FAILED;
	}
	if (shnum == 0)
		complain(&o, "no section headers: cannot find its notes");

	load_relocs(&o);
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(o.elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh))
			continue;
		const char *name = elf_strptr(o.elf, shstrndx, sh.sh_name);
		if (name && !strcmp(name, ".stapsdt.base") && (sh.sh_flags & SHF_ALLOC)) {
			o.has_base = 1;
			o.base_addr = sh.sh_addr;
		}
	}
	scn = NULL;
	while ((scn = elf_nextscn(o.elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh)) {
			complain(&o, "corrupt section header (%s)", elf_errmsg(-1));
			continue;
		}
		if (sh.sh_type == SHT_NOTE)
			scan_notes(&o, scn, &sh);
	}

	*found += o.nents;
	if (verbose >= 0 && (o.nents || !skip_empty))
		print_object(&o, verbose);
	int rc = o.complaints ? LIST_FAILED : LIST_OK;
	free_object(&o);
	return rc;
}

/* ---- a process --------------------------------------------------------- */

struct mapped {
	unsigned long dev_major, dev_minor, inode;
	char *path;     /* as the process sees it */
	char *range;    /* "start-end" of one mapping, for map_files */
	int deleted;
};

/* verbose < 0: quiet, the probes counted into *found. */
static int list_process(const char *pidstr, int verbose, size_t *found)
{
	char *end;
	errno = 0;
	long pid = strtol(pidstr, &end, 10);
	if (errno || *end || end == pidstr || pid <= 0 || pid > 0x7fffffff) {
		fprintf(stderr, "xprobes list: not a process id: '%s'\n", pidstr);
		return 2;
	}
	char path[PATH_MAX + 64];
	snprintf(path, sizeof(path), "/proc/%ld/maps", pid);
	FILE *f = fopen(path, "re");
	if (!f) {
		if (errno == ENOENT)
			fprintf(stderr, "xprobes list: no such process: %ld\n", pid);
		else
			fprintf(stderr, "xprobes list: cannot read %s: %s\n", path,
				strerror(errno));
		return 1;
	}

	struct mapped *v = NULL;
	size_t n = 0;
	char *line = NULL;
	size_t cap = 0;
	while (getline(&line, &cap, f) > 0) {
		unsigned long start, stop, off, maj, min, ino;
		char perms[8];
		int pos = 0;
		if (sscanf(line, "%lx-%lx %7s %lx %lx:%lx %lu %n", &start, &stop, perms,
			   &off, &maj, &min, &ino, &pos) < 7 || ino == 0)
			continue;
		char *p = line + pos;
		p[strcspn(p, "\n")] = '\0';
		if (*p != '/')
			continue;
		int deleted = 0;
		size_t pl = strlen(p);
		if (pl > 10 && !strcmp(p + pl - 10, " (deleted)")) {
			p[pl - 10] = '\0';
			deleted = 1;
		}
		int seen = 0;
		for (size_t i = 0; i < n && !seen; i++)
			seen = v[i].inode == ino && v[i].dev_major == maj &&
			       v[i].dev_minor == min && !strcmp(v[i].path, p);
		if (seen)
			continue;
		char range[64];
		snprintf(range, sizeof(range), "%lx-%lx", start, stop);
		v = grow(v, n + 1, sizeof(*v));
		v[n++] = (struct mapped){ maj, min, ino, dupn(p, strlen(p)),
					  dupn(range, strlen(range)), deleted };
	}
	free(line);
	fclose(f);
	if (n == 0) {
		fprintf(stderr, "xprobes list: process %ld maps no files (a kernel thread, "
				"or it just exited)\n", pid);
		return 1;
	}

	int status = 0;
	for (size_t i = 0; i < n; i++) {
		/* map_files reaches the very file mapped, even if deleted or
		 * replaced since; the process's root view is the fallback. */
		char open_path[PATH_MAX + 64], label[PATH_MAX + 64];
		snprintf(open_path, sizeof(open_path), "/proc/%ld/map_files/%s", pid,
			 v[i].range);
		if (access(open_path, R_OK))
			snprintf(open_path, sizeof(open_path), "/proc/%ld/root%s", pid,
				 v[i].path);
		snprintf(label, sizeof(label), "%s%s", v[i].path,
			 v[i].deleted ? " (deleted)" : "");
		if (list_file(open_path, label, verbose, 1, found) == LIST_FAILED)
			status = 1;
	}
	/* Nothing printed is not an answer: say so, as ls of an empty
	 * directory would not, but `crontab -l` does (on stderr: stdout stays
	 * the listing, empty). */
	if (*found == 0 && verbose >= 0)
		fprintf(stderr, "xprobes list: no sites or SDT probes in process %ld's %zu "
				"mapped objects\n", pid, n);
	for (size_t i = 0; i < n; i++) {
		free(v[i].path);
		free(v[i].range);
	}
	free(v);
	return status;
}

/* ---- entry point -------------------------------------------------------- */

static void usage(FILE *to)
{
	fputs("usage: xprobes list [-v] FILE...\n"
	      "       xprobes list [-v] -p PID\n"
	      "Lists XProbes sites (provider:name(types)) and SDT probes in\n"
	      "executables and shared libraries, or in every object a process\n"
	      "has mapped, without running or attaching to anything.  -v also\n"
	      "shows each SDT location and its decoded argument specs.\n",
	      to);
}

int list_main(int argc, char **argv)
{
	int verbose = 0;
	const char *pid = NULL;
	int i;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
			verbose = 1;
		} else if (!strcmp(a, "-p")) {
			if (i + 1 == argc) {
				fprintf(stderr, "xprobes list: -p needs a process id\n");
				usage(stderr);
				return 2;
			}
			pid = argv[++i];
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--")) {
			i++;
			break;
		} else if (a[0] == '-' && a[1]) {
			fprintf(stderr, "xprobes list: unknown option '%s'\n", a);
			usage(stderr);
			return 2;
		} else {
			break;
		}
	}
	if ((pid && i < argc) || (!pid && i == argc)) {
		fprintf(stderr, "xprobes list: %s\n", pid ? "give files or -p PID, not both"
							 : "no file or -p PID given");
		usage(stderr);
		return 2;
	}
	if (elf_version(EV_CURRENT) == EV_NONE) {
		fprintf(stderr, "xprobes list: libelf is too old\n");
		return 1;
	}
	size_t found = 0;
	if (pid)
		return list_process(pid, verbose, &found);

	int status = 0;
	for (; i < argc; i++) {
		if (list_file(argv[i], argv[i], verbose, 0, &found) != LIST_OK)
			status = 1;
	}
	return status;
}

long list_process_probes(pid_t pid)
{
	char pidstr[16];
	size_t found = 0;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -1;
	snprintf(pidstr, sizeof(pidstr), "%d", (int)pid);
	return list_process(pidstr, -1, &found) == 0 || found ? (long)found : -1;
}
