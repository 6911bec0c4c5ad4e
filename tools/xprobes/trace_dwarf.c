/* SPDX-License-Identifier: MIT */
/* uftrace's --auto-args from an object's DWARF, read with libdw.
 *
 * What uftrace 0.13 does for `record -a`, and so what this file does (the
 * test compares, function by function, with uftrace's own .dbg files):
 *
 * Functions.  Every DW_TAG_subprogram of every compile unit that has a
 * DW_AT_low_pc and is no declaration (inlined-only functions have none),
 * named by DW_AT_linkage_name or DW_AT_name (through DW_AT_abstract_origin:
 * gcc -O2's out-of-line copies), kept only when the symbol table has a
 * function of that name at that address: clones (foo.isra.0) carry no name
 * and are left out.  Walking stops at the first unit that is no compile
 * unit (as uftrace's does; with XP_DWARF_SEPARATE, for Debian's dwz-made
 * debug files, it goes past partial units).
 *
 * Return value: "retval" plus the type's format when the DIE itself has a
 * DW_AT_type (an -O2 out-of-line copy has none: no retspec); void: none.
 * Arguments: each DW_TAG_formal_parameter ("..." is none), its type
 * through DW_AT_abstract_origin when it has none of its own, numbered
 * arg1.. for integers and fparg1.. for floating point:
 *   char                       /c  (signed char and unsigned char: none)
 *   pointer to char (const)    /s  (a string; char ** and unsigned char *: /p)
 *   other pointers, references,
 *   function pointers          /p
 *   float, double, long double fparg/32, /64, /80 (return: /f32 /f64 /f80)
 *   enum                       /e:NAME (an anonymous one: _<cu file>_<offset>,
 *                              non-identifier characters as '_')
 *   struct, union by value     /tSIZE:NAME (size in bytes; NAME cut at
 *                              the first of "< ({[")
 *   std::string by value       /S
 *   other integers, _Bool      nothing: uftrace's default (a machine word)
 * Typedefs, const and volatile are looked through.  Location: a parameter
 * whose DW_AT_location is a register (DW_OP_reg*: the
 * expression's first operation, of a location list's first entry) gets
 * "%rdi".."%r9", "%xmm0".."%xmm7"; one at a non-negative DW_OP_fbreg
 * offset N "%stack+(N/8 rounded up + 1)".
 * Once a struct or union is passed by value (or returned: it is classified
 * first) the following arguments without such a location get their
 * register named ("%RSI", "%XMM1", a struct spread over two "%XMM1+RSI")
 * following the x86-64 ABI's classification as uftrace approximates it
 * (members in order, even a union's; a struct over 16 bytes or with a
 * struct member goes to the stack; a struct returned in memory takes
 * %rdi).
 *
 * Enums: "enum NAME {A=1,B,C=5}": values ascending, "=V" only where a
 * value is not the previous plus one; types in descending name order, the
 * first definition of a name kept.
 *
 * The .dbg file (DIR/<object basename>.dbg):
 *   # path name: /abs/path/of/object
 *   # build-id: <hex>                     (when the object has one)
 *   E: enum NAME {...}                    (every enum the specs name)
 *   F: <offset hex> <name>                (each function, address order)
 *   L: <line> <file>                      (its declaration; file relative to
 *                                          the compile dir most units use)
 *   A: @<argspec>                         (when it has arguments)
 *   R: @<retspec>                         (when it returns something)
 * uftrace's replay/report/tui read the A:, R: and E: lines of every
 * object's .dbg when the info file's argument section (feature bit
 * ARGUMENT) says "auto-args:1": that section is "argspec:lines=N" (N: the
 * lines after it, 4 for -a alone), then
 * "argspec:"/"retspec:" for -A/-R, "argauto:", "retauto:", "enumauto:"
 * (uftrace's built-in table of libc functions, written as uftrace writes
 * it), then "auto-args:1".  L: lines serve --srcline.
 *
 * Hostile files: libdw and libelf read from a copy in memory
 * (ELF_C_READ), every libdw result is checked, type chains are followed
 * at most TYPE_HOPS steps (a cycle is an unknown type), and the counts
 * and text kept are bounded (trace_dwarf.h), past which reading fails
 * with a message. */
#define _GNU_SOURCE
#include "trace_dwarf.h"

#include <ctype.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define TYPE_HOPS 64            /* DW_AT_type links followed for one type */
#define MEMBERS_MAX 4096        /* children of a struct looked at */
#define TEXT_MAX (256u << 20)   /* bytes of names and specs kept */
#define ARG_BUF 512             /* one argument's spec */
#define STRUCT_SPEC_MAX 255     /* uftrace cuts "argN/tS:NAME" there */
#define NAME_MAX_LEN 512        /* a longer type name is left out */

/* x86-64 as uftrace describes it. */
#define INT_REGS 6
#define FP_REGS 8
static const char *const argspec_int_reg[INT_REGS] = {"RDI", "RSI", "RDX", "RCX", "R8", "R9"};
static const char *const argspec_fp_reg[FP_REGS] = {"XMM0", "XMM1", "XMM2", "XMM3",
						    "XMM4", "XMM5", "XMM6", "XMM7"};

/* A DWARF register operation (DW_OP_regN's opcode) as uftrace names it. */
static const char *dwarf_reg_name(unsigned op)
{
	switch (op) {
	case DW_OP_reg1: return "rdx";
	case DW_OP_reg2: return "rcx";
	case DW_OP_reg4: return "rsi";
	case DW_OP_reg5: return "rdi";
	case DW_OP_reg8: return "r8";
	case DW_OP_reg9: return "r9";
	default: break;
	}
	if (op >= DW_OP_reg17 && op <= DW_OP_reg24) {
		static const char *const x[] = {"xmm0", "xmm1", "xmm2", "xmm3",
						"xmm4", "xmm5", "xmm6", "xmm7"};
		return x[op - DW_OP_reg17];
	}
	return NULL;
}

enum fmt { F_AUTO, F_CHAR, F_STR, F_STDSTR, F_FLOAT, F_PTR, F_ENUM, F_STRUCT };
enum pclass { PC_NONE = 0, PC_MEM = 'm', PC_INT = 'i', PC_FP = 'f', PC_PTR = 'p' };
enum { SPEC_NONE, SPEC_SET, SPEC_BROKEN };

struct sym {
	uint64_t off, size;
	char *name;
};

struct symres {
	char *file; /* NULL: no location, not listed */
	long line;
	int arg_state, ret_state;
	char *arg, *ret; /* with uftrace's leading '@' */
};

struct enumval {
	char *name;
	long val;
	size_t seq;
};

struct edef {
	char *name;
	struct enumval *v;
	size_t n;
	char *text; /* "enum NAME {...}" */
};

struct cdir {
	char *name;
	long used, locs;
};

struct xp_dwarf {
	int etype;
	uint64_t base;
	char build_id[129];
	struct sym *syms;
	struct symres *res;
	size_t nsyms;
	struct edef *enums;
	size_t nenums, capenums;
	char **ehash; /* enum names: an open-addressing set */
	size_t ehcap;
	struct cdir *cdirs;
	size_t ncdirs, capcdirs;
	long nlocs_used;
	char *base_dir;
	size_t text; /* bytes kept */
	struct xp_dwarf_func *funcs;
	size_t nfuncs;
	Dwarf_Files *files; /* the current unit's */
	char err[256];
	bool failed;
	bool all_units; /* past a partial unit (dwz), where uftrace stops */
	bool recordable; /* XP_DWARF_RECORDABLE */
};

static void fail(struct xp_dwarf *d, const char *fmt, ...)
{
	if (d->failed)
		return;
	d->failed = true;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(d->err, sizeof(d->err), fmt, ap);
	va_end(ap);
}

static char *keep(struct xp_dwarf *d, const char *s)
{
	size_t n = strlen(s) + 1;
	if (d->text + n > TEXT_MAX) {
		fail(d, "more than %u MiB of names and specs", TEXT_MAX >> 20);
		return NULL;
	}
	char *p = malloc(n);
	if (!p) {
		fail(d, "out of memory");
		return NULL;
	}
	d->text += n;
	return memcpy(p, s, n);
}

/* A name uftrace's text formats can carry: printable ASCII, no blank,
 * no separator of the .dbg lines or specs (a hostile file's names are
 * left out rather than let through). */
static bool plain_name(const char *s)
{
	if (!s || !*s || strlen(s) > 4096)
		return false;
	for (; *s; s++)
		if (*s <= ' ' || *s >= 0x7f || strchr(",;@{}=%", *s))
			return false;
	return true;
}

static bool plain_path(const char *s)
{
	if (!s || !*s || strlen(s) > 4096)
		return false;
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return false;
	return true;
}

/* ---- the symbol table ---- */

static int sym_cmp(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;
	if (x->off != y->off)
		return x->off < y->off ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* Function symbols of section scn (.symtab or .dynsym), as uftrace keeps
 * them: defined, of non-zero size, at their offset from the load base. */
static int read_syms(struct xp_dwarf *d, Elf *e, Elf_Scn *scn)
{
	GElf_Shdr sh;
	if (!gelf_getshdr(scn, &sh) || !sh.sh_entsize || sh.sh_type == SHT_NOBITS)
		return 0;
	Elf_Data *data = elf_getdata(scn, NULL);
	if (!data)
		return 0;
	size_t n = sh.sh_size / sh.sh_entsize;
	if (n > XP_DWARF_MAX_SYMS) {
		fail(d, "more than %u symbols", XP_DWARF_MAX_SYMS);
		return -1;
	}
	struct sym *s = calloc(n ? n : 1, sizeof(*s));
	if (!s) {
		fail(d, "out of memory");
		return -1;
	}
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		GElf_Sym st;
		if (!gelf_getsym(data, (int)i, &st))
			break;
		int type = GELF_ST_TYPE(st.st_info);
		if (type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_NOTYPE)
			continue;
		if (st.st_shndx == SHN_UNDEF || st.st_shndx >= SHN_LORESERVE || !st.st_size)
			continue;
		const char *name = elf_strptr(e, sh.sh_link, st.st_name);
		if (!plain_name(name))
			continue;
		if (d->etype == ET_EXEC && st.st_value < d->base)
			continue;
		s[k].off = st.st_value - (d->etype == ET_EXEC ? d->base : 0);
		s[k].size = st.st_size;
		if (!(s[k].name = keep(d, name)))
			break;
		k++;
	}
	d->syms = s;
	d->nsyms = k;
	if (d->failed)
		return -1;
	qsort(s, k, sizeof(*s), sym_cmp);
	d->res = calloc(k ? k : 1, sizeof(*d->res));
	if (!d->res) {
		fail(d, "out of memory");
		return -1;
	}
	return 0;
}

static Elf_Scn *find_scn(Elf *e, unsigned type)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	while ((scn = elf_nextscn(e, scn)))
		if (gelf_getshdr(scn, &sh) && sh.sh_type == type)
			return scn;
	return NULL;
}

/* The symbol uftrace finds for a DWARF function at off: the one whose
 * range holds off + 1, and whose name is name (aliases: any of them). */
static ssize_t find_sym(const struct xp_dwarf *d, uint64_t off, const char *name)
{
	uint64_t key = off + 1;
	size_t lo = 0, hi = d->nsyms;
	while (lo < hi) { /* first symbol past key */
		size_t mid = lo + (hi - lo) / 2;
		if (d->syms[mid].off <= key)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; i-- > 0;) {
		const struct sym *s = &d->syms[i];
		if (s->off != d->syms[lo - 1].off)
			break;
		if (key < s->off + s->size && !strcmp(s->name, name))
			return (ssize_t)i;
	}
	return -1;
}

/* ---- ELF facts ---- */

static void read_build_id(struct xp_dwarf *d, Elf *e)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	while ((scn = elf_nextscn(e, scn))) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		Elf_Data *data = elf_getdata(scn, NULL);
		if (!data)
			continue;
		size_t off = 0, noff, doff;
		GElf_Nhdr nh;
		while ((off = gelf_getnote(data, off, &nh, &noff, &doff)) > 0) {
			if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != 4 ||
			    memcmp((char *)data->d_buf + noff, "GNU", 4) || !nh.n_descsz ||
			    nh.n_descsz > 64)
				continue;
			const unsigned char *p = (const unsigned char *)data->d_buf + doff;
			for (size_t i = 0; i < nh.n_descsz; i++)
				snprintf(d->build_id + 2 * i, 3, "%02x", p[i]);
			return;
		}
	}
}

/* A non-PIE executable's symbols are kept at their offset from the
 * start of its first mapping, as uftrace's are. */
static void read_base(struct xp_dwarf *d, Elf *e)
{
	GElf_Ehdr eh;
	size_t n;
	if (!gelf_getehdr(e, &eh))
		return;
	d->etype = eh.e_type;
	if (eh.e_type != ET_EXEC || elf_getphdrnum(e, &n))
		return;
	uint64_t lo = UINT64_MAX;
	for (size_t i = 0; i < n && i < 65536; i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD && ph.p_vaddr < lo)
			lo = ph.p_vaddr;
	}
	d->base = lo == UINT64_MAX ? 0 : lo & ~(uint64_t)4095;
}

/* ---- enums ---- */

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static bool enum_known(const struct xp_dwarf *d, const char *name)
{
	if (!d->ehcap)
		return false;
	for (size_t i = hash_str(name) & (d->ehcap - 1);; i = (i + 1) & (d->ehcap - 1)) {
		if (!d->ehash[i])
			return false;
		if (!strcmp(d->ehash[i], name))
			return true;
	}
}

static int enum_remember(struct xp_dwarf *d, char *name)
{
	if ((d->nenums + 1) * 2 > d->ehcap) {
		size_t cap = d->ehcap ? d->ehcap * 2 : 64;
		char **h = calloc(cap, sizeof(*h));
		if (!h)
			return -1;
		for (size_t j = 0; j < d->ehcap; j++) {
			if (!d->ehash[j])
				continue;
			size_t i = hash_str(d->ehash[j]) & (cap - 1);
			while (h[i])
				i = (i + 1) & (cap - 1);
			h[i] = d->ehash[j];
		}
		free(d->ehash);
		d->ehash = h;
		d->ehcap = cap;
	}
	size_t i = hash_str(name) & (d->ehcap - 1);
	while (d->ehash[i])
		i = (i + 1) & (d->ehcap - 1);
	d->ehash[i] = name;
	return 0;
}

static int val_cmp(const void *a, const void *b)
{
	const struct enumval *x = a, *y = b;
	if (x->val != y->val)
		return x->val < y->val ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The enumerators of die: 0 and def filled, or -1 (none, or one uftrace's
 * text could not carry: the argument is then printed as an integer). */
static int read_enum(struct xp_dwarf *d, Dwarf_Die *die, struct edef *def)
{
	Dwarf_Die c;
	size_t n = 0, cap = 0;
	struct enumval *v = NULL;
	if (dwarf_child(die, &c) != 0)
		return -1;
	do {
		if (dwarf_tag(&c) != DW_TAG_enumerator)
			continue;
		const char *name = dwarf_diename(&c);
		if (!plain_name(name) || n >= XP_DWARF_MAX_ENUM_VALS)
			goto bad;
		Dwarf_Attribute a;
		Dwarf_Sword val = 0;
		if (dwarf_attr(&c, DW_AT_const_value, &a) && dwarf_formsdata(&a, &val) != 0)
			val = 0;
		if (n == cap) {
			cap = cap ? cap * 2 : 8;
			struct enumval *nv = realloc(v, cap * sizeof(*v));
			if (!nv)
				goto bad;
			v = nv;
		}
		if (!(v[n].name = keep(d, name)))
			goto bad;
		v[n].val = (long)val;
		v[n].seq = n;
		n++;
	} while (dwarf_siblingof(&c, &c) == 0);
	if (!n)
		goto bad;
	qsort(v, n, sizeof(*v), val_cmp);
	def->v = v;
	def->n = n;
	return 0;
bad:
	for (size_t i = 0; i < n; i++)
		free(v[i].name);
	free(v);
	return -1;
}

/* "enum NAME {A=1,B,C=5}": uftrace's way, which counts with an int. */
static char *enum_text(struct xp_dwarf *d, const struct edef *def)
{
	size_t len = strlen(def->name) + 16;
	for (size_t i = 0; i < def->n; i++)
		len += strlen(def->v[i].name) + 24;
	char *s = malloc(len), *p = s;
	if (!s)
		return NULL;
	p += sprintf(p, "enum %s {", def->name);
	int last = -1;
	for (size_t i = 0; i < def->n; i++) {
		last = (int)((unsigned)last + 1u);
		if (i)
			*p++ = ',';
		if (def->v[i].val == (long)last) {
			p += sprintf(p, "%s", def->v[i].name);
		} else {
			last = (int)(unsigned)(unsigned long)def->v[i].val;
			p += sprintf(p, "%s=%ld", def->v[i].name, def->v[i].val);
		}
	}
	strcpy(p, "}");
	char *k = keep(d, s);
	free(s);
	return k;
}

static int add_enum(struct xp_dwarf *d, Dwarf_Die *die, const char *name)
{
	if (enum_known(d, name)) {
		/* the first definition stands, but this one must have values */
		Dwarf_Die c;
		int seen = 0;
		if (dwarf_child(die, &c) != 0)
			return -1;
		do {
			if (dwarf_tag(&c) == DW_TAG_enumerator)
				return 0;
		} while (++seen < MEMBERS_MAX && dwarf_siblingof(&c, &c) == 0);
		return -1;
	}
	if (d->nenums >= XP_DWARF_MAX_ENUMS) {
		fail(d, "more than %u enum types", XP_DWARF_MAX_ENUMS);
		return -1;
	}
	struct edef def = {0};
	if (read_enum(d, die, &def))
		return -1;
	if (d->nenums == d->capenums) {
		size_t cap = d->capenums ? d->capenums * 2 : 16;
		struct edef *ne = realloc(d->enums, cap * sizeof(*ne));
		if (!ne) {
			for (size_t i = 0; i < def.n; i++)
				free(def.v[i].name);
			free(def.v);
			fail(d, "out of memory");
			return -1;
		}
		d->enums = ne;
		d->capenums = cap;
	}
	def.name = keep(d, name);
	def.text = def.name ? enum_text(d, &def) : NULL;
	if (!def.text || enum_remember(d, def.name)) {
		fail(d, "out of memory");
		for (size_t i = 0; i < def.n; i++)
			free(def.v[i].name);
		free(def.v);
		free(def.name);
		free(def.text);
		return -1;
	}
	d->enums[d->nenums++] = def;
	return 0;
}
/* An anonymous enum's name: _<basename of the unit's name>_<DIE offset in
 * the unit>, with "+-.()<> " made '_'. */
static void anon_enum_name(Dwarf_Die *die, char *buf, size_t len)
{
	Dwarf_Die cu;
	const char *cu_name = NULL;
	if (dwarf_diecu(die, &cu, NULL, NULL))
		cu_name = dwarf_diename(&cu);
	if (!cu_name)
		cu_name = "unnamed";
	const char *slash = strrchr(cu_name, '/');
	snprintf(buf, len, "_%s_%lx", slash ? slash + 1 : cu_name,
		 (unsigned long)dwarf_cuoffset(die));
	for (char *p = buf; (p = strpbrk(p, "+-.()<> ")); p++)
		*p = '_';
}

/* ---- types ---- */

/* One function's state, as uftrace's: the argument counters, the
 * registers used, and what the last struct by value took. */
struct fstate {
	int idx, fpidx;
	enum fmt last_fmt;
	int last_size;
	int reg_pos, fpreg_pos;
	bool has_retspec, struct_passed;
	char struct_regs[4];
	int struct_reg_cnt;
};

struct tinfo {
	enum fmt fmt;
	size_t size; /* bits */
	int pointer;
	char name[NAME_MAX_LEN]; /* a struct's (cut) or an enum's */
	bool has_name;
};

/* die's DW_AT_type as a DIE: 1, 0 (none), -1 (not a reference). */
static int type_of(Dwarf_Die *die, Dwarf_Die *out)
{
	Dwarf_Attribute a;
	if (!dwarf_hasattr(die, DW_AT_type))
		return 0;
	if (!dwarf_attr(die, DW_AT_type, &a))
		return -1;
	switch (dwarf_whatform(&a)) {
	case DW_FORM_ref1:
	case DW_FORM_ref2:
	case DW_FORM_ref4:
	case DW_FORM_ref8:
	case DW_FORM_ref_udata:
	case DW_FORM_ref_addr:
	case DW_FORM_ref_sig8:
		break;
	default:
		return -1;
	}
	return dwarf_formref_die(&a, out) ? 1 : -1;
}

static size_t type_bits(Dwarf_Die *die, size_t dflt)
{
	Dwarf_Word size;
	if (dwarf_aggregate_size(die, &size) >= 0)
		return size > (SIZE_MAX >> 4) ? 0 : size * 8;
	int b = dwarf_bytesize(die);
	return (b <= 0 ? dflt : (size_t)b) * 8;
}

static uint64_t round_up(uint64_t x, uint64_t a) /* uftrace's ROUND_UP (powers of 2) */
{
	return (x + a - 1) & ~(a - 1);
}

struct pdata {
	uint64_t pos;
	int reg_cnt;
	char regs[4];
	int prev;
};

static void pd_set(struct pdata *pd, int i, int cls)
{
	if (i >= 0 && i < 4)
		pd->regs[i] = (char)cls;
}

/* The ABI class of one member, as uftrace estimates it. */
static int member_class(Dwarf_Die *m, struct pdata *pd)
{
	Dwarf_Die t = *m;
	for (int hop = 0; hop < TYPE_HOPS; hop++) {
		Dwarf_Die next;
		int r = type_of(&t, &next);
		if (r <= 0)
			return PC_MEM;
		t = next;
		switch (dwarf_tag(&t)) {
		case DW_TAG_pointer_type:
		case DW_TAG_ptr_to_member_type:
		case DW_TAG_reference_type:
		case DW_TAG_rvalue_reference_type:
			if (pd->pos % 8)
				pd->reg_cnt++;
			pd->pos = round_up(pd->pos, 8);
			if (pd->reg_cnt >= 2)
				return PC_MEM;
			pd->pos += 8;
			pd_set(pd, pd->reg_cnt++, PC_INT);
			return PC_INT;
		case DW_TAG_structure_type:
		case DW_TAG_union_type:
		case DW_TAG_class_type:
			return PC_MEM;
		case DW_TAG_enumeration_type:
			return PC_INT;
		case DW_TAG_base_type: {
			const char *tn = dwarf_diename(&t);
			if (!tn)
				tn = "";
			uint64_t size = type_bits(&t, 4) / 8;
			if (!size)
				size = 1;
			if (pd->pos % size && (pd->pos % 8) + size >= 8) {
				pd->reg_cnt++;
				pd->prev = PC_NONE;
			}
			pd->pos = round_up(pd->pos, size);
			if (pd->reg_cnt >= 2)
				return PC_MEM;
			if (!strcmp(tn, "double")) {
				pd_set(pd, pd->reg_cnt++, PC_FP);
				pd->pos += 8;
				pd->prev = PC_NONE;
				return PC_FP;
			}
			if (!strcmp(tn, "float")) {
				if (pd->prev != PC_INT)
					pd->prev = PC_FP;
			} else {
				pd->prev = PC_INT;
			}
			int cls = pd->prev;
			pd_set(pd, pd->reg_cnt, cls);
			if ((pd->pos % 8) + size >= 8) {
				pd->reg_cnt++;
				pd->prev = PC_NONE;
			}
			pd->pos += size;
			return cls == PC_INT ? PC_INT : PC_FP;
		}
		default:
			break;
		}
	}
	return PC_MEM;
}

/* Where a struct or union passed by value goes: the registers it takes
 * (st->struct_regs), none when on the stack. */
static void place_struct(Dwarf_Die *die, struct fstate *st, struct tinfo *ti)
{
	struct pdata pd = {0};
	bool mem = false, ptr_only = false;
	st->struct_reg_cnt = 0;
	st->struct_passed = true;

	const char *sname = dwarf_diename(die);
	bool string = false; /* a std::string, by its member _M_dataplus */
	if (sname && *sname) {
		snprintf(ti->name, sizeof(ti->name), "%s", sname);
		char *p = strpbrk(ti->name + 1, "< ({[");
		if (p)
			*p = '\0';
		ti->has_name = plain_name(ti->name);
		string = ti->has_name && !strcmp(ti->name, "basic_string");
	}
	Dwarf_Die c;
	if (dwarf_child(die, &c) != 0)
		return;
	if (ti->size > 128 && !string)
		ptr_only = true; /* uftrace: only a destructor or virtual matters */
	int seen = 0;
	do {
		if (++seen > MEMBERS_MAX)
			break;
		switch (dwarf_tag(&c)) {
		case DW_TAG_member: {
			if (ptr_only)
				break;
			if (member_class(&c, &pd) == PC_MEM)
				mem = true;
			const char *n = string ? dwarf_diename(&c) : NULL;
			if (n && !strcmp(n, "_M_dataplus")) {
				ti->fmt = F_STDSTR;
				ti->size = 64;
				return;
			}
			break;
		}
		case DW_TAG_subprogram: {
			if (st->reg_pos >= INT_REGS)
				goto stack;
			const char *n = dwarf_diename(&c);
			if ((n && n[0] == '~') || dwarf_hasattr(die, DW_AT_virtuality)) {
				st->struct_regs[0] = PC_PTR;
				st->struct_reg_cnt = 1;
				return;
			}
			break;
		}
		default:
			break;
		}
	} while (dwarf_siblingof(&c, &c) == 0);

	if (ti->size > 128 || mem)
		goto stack;
	if (pd.pos % 8)
		pd.reg_cnt++;
	int ints = 0, fps = 0;
	for (int i = 0; i < pd.reg_cnt && i < 4; i++) {
		if (pd.regs[i] == PC_FP)
			fps++;
		else
			ints++;
	}
	if (pd.reg_cnt > 4 || st->reg_pos + ints > INT_REGS || st->fpreg_pos + fps > FP_REGS)
		goto stack;
	memcpy(st->struct_regs, pd.regs, sizeof(pd.regs));
	st->struct_reg_cnt = pd.reg_cnt;
	return;
stack:
	st->struct_reg_cnt = 0;
	/* x86-64: a struct returned in memory is written where %rdi points */
	if (st->has_retspec && st->reg_pos < INT_REGS)
		st->struct_regs[st->struct_reg_cnt++] = PC_PTR;
}

/* Whether die (a struct of at most one byte) has no member. */
static bool empty_aggregate(Dwarf_Die *die)
{
	Dwarf_Die cur = *die;
	if (type_bits(&cur, 8) > 8)
		return false;
	for (int round = 0; round < TYPE_HOPS; round++) {
		Dwarf_Die c, parent;
		bool inherited = false;
		if (dwarf_child(&cur, &c) != 0)
			return true;
		int seen = 0;
		do {
			if (++seen > MEMBERS_MAX)
				return false;
			switch (dwarf_tag(&c)) {
			case DW_TAG_member:
			case DW_TAG_subprogram:
				return false;
			case DW_TAG_inheritance:
				if (type_of(&c, &parent) == 1)
					inherited = true;
				break;
			default:
				break;
			}
		} while (dwarf_siblingof(&c, &c) == 0);
		if (!inherited)
			return true;
		cur = parent;
	}
	return false;
}

/* die's type as uftrace formats it: true, or false (unknown: the argument
 * is left out, a return value stays "retval"). */
static bool resolve_type(struct xp_dwarf *d, Dwarf_Die *die, struct fstate *st, struct tinfo *ti)
{
	Dwarf_Die t = *die;
	int hop;
	for (hop = 0; hop < TYPE_HOPS; hop++) {
		Dwarf_Die next;
		int r = type_of(&t, &next);
		if (r < 0)
			return false;
		if (r == 0)
			break;
		t = next;
		switch (dwarf_tag(&t)) {
		case DW_TAG_enumeration_type: {
			char name[NAME_MAX_LEN];
			const char *tn = dwarf_diename(&t);
			if (tn && (isalpha((unsigned char)*tn) || *tn == '_')) {
				if (!plain_name(tn) || strlen(tn) >= sizeof(name))
					return false;
				snprintf(name, sizeof(name), "%s", tn);
			} else {
				anon_enum_name(&t, name, sizeof(name));
				if (!plain_name(name))
					return false;
			}
			if (add_enum(d, &t, name))
				return false;
			ti->fmt = F_ENUM;
			snprintf(ti->name, sizeof(ti->name), "%s", name);
			ti->has_name = true;
			ti->size = type_bits(&t, 4);
			return true;
		}
		case DW_TAG_structure_type:
		case DW_TAG_union_type:
		case DW_TAG_class_type:
			if (ti->pointer)
				break;
			ti->fmt = F_STRUCT;
			ti->size = empty_aggregate(&t) ? 0 : type_bits(&t, 8);
			place_struct(&t, st, ti);
			return true;
		case DW_TAG_pointer_type:
		case DW_TAG_ptr_to_member_type:
		case DW_TAG_reference_type:
		case DW_TAG_rvalue_reference_type:
			ti->pointer++;
			break;
		case DW_TAG_subroutine_type:
			if (ti->pointer == 1) {
				ti->fmt = F_PTR;
				return true;
			}
			break;
		default: /* typedef, const, volatile, array... */
			break;
		}
	}
	if (hop == TYPE_HOPS)
		return false;
	const char *tn = dwarf_diename(&t);
	if (ti->pointer) {
		ti->size = 64;
		ti->fmt = ti->pointer == 1 && tn && !strcmp(tn, "char") ? F_STR : F_PTR;
		return true;
	}
	ti->size = type_bits(&t, 8);
	if (dwarf_tag(&t) != DW_TAG_base_type)
		return false;
	if (!tn)
		tn = "";
	if (!strcmp(tn, "char"))
		ti->fmt = F_CHAR;
	else if (!strcmp(tn, "float") || !strcmp(tn, "double"))
		ti->fmt = F_FLOAT;
	else if (!strcmp(tn, "long double")) {
		ti->fmt = F_FLOAT;
		ti->size = 80;
	}
	return true;
}

/* Appends die's type format to spec ("argN" or "@retval"), or for a
 * floating-point argument replaces it with "fpargN/BITS": true, or
 * false (unknown type). */
static bool add_type(struct xp_dwarf *d, char *spec, size_t len, Dwarf_Die *die, struct fstate *st)
{
	struct tinfo ti = {.fmt = F_AUTO};
	Dwarf_Die origin;
	if (!dwarf_hasattr(die, DW_AT_type)) {
		Dwarf_Attribute a;
		if (!dwarf_attr(die, DW_AT_abstract_origin, &a) || !dwarf_formref_die(&a, &origin))
			return false;
		die = &origin;
	}
	if (!resolve_type(d, die, st, &ti))
		return false;
	st->last_fmt = ti.fmt;
	st->last_size = (int)(ti.size / 8 > INT_MAX ? INT_MAX : ti.size / 8);
	size_t n = strlen(spec);
	switch (ti.fmt) {
	case F_CHAR:
		snprintf(spec + n, len - n, "/c");
		break;
	case F_STR:
		snprintf(spec + n, len - n, "/s");
		break;
	case F_STDSTR:
		snprintf(spec + n, len - n, "/S");
		break;
	case F_FLOAT:
		if (st->idx) {
			snprintf(spec, len, "fparg%d/%zu", ++st->fpidx, ti.size);
			st->idx--; /* integer arguments keep their numbers */
		} else {
			snprintf(spec + n, len - n, "/f%d", (int)ti.size);
		}
		break;
	case F_PTR:
		snprintf(spec + n, len - n, "/p");
		break;
	case F_ENUM:
		snprintf(spec + n, len - n, "/e:%s", ti.name);
		break;
	case F_STRUCT:
		if (st->idx)
			snprintf(spec, len, "arg%d/t%d", st->idx, st->last_size);
		else
			snprintf(spec + n, len - n, "/t%d", st->last_size);
		if (ti.has_name) {
			n = strlen(spec);
			snprintf(spec + n, len - n, ":%s", ti.name);
			if (strlen(spec) > STRUCT_SPEC_MAX)
				spec[STRUCT_SPEC_MAX] = '\0';
		}
		break;
	default:
		break;
	}
	return true;
}

/* ---- locations ---- */

enum { LOC_INDEX, LOC_REG, LOC_STACK };

static int arg_location(Dwarf_Die *die, unsigned *reg, int *stack)
{
	Dwarf_Attribute a;
	Dwarf_Op *ops;
	size_t n;
	int type = LOC_INDEX;
	if (!dwarf_attr(die, DW_AT_location, &a))
		return LOC_INDEX;
	if (dwarf_getlocation(&a, &ops, &n) != 0) {
		/* a location list: its first entry, where the function starts */
		Dwarf_Addr base, start, end;
		if (dwarf_getlocations(&a, 0, &base, &start, &end, &ops, &n) <= 0)
			return LOC_INDEX;
	}
	/* uftrace looks at the first operation only: a struct in two
	 * registers (reg, piece, reg, piece) is named by its first one */
	if (!n)
		return LOC_INDEX;
	uint8_t op = ops[0].atom;
	if (op == DW_OP_fbreg) {
		/* a negative offset is a local copy the prologue makes */
		int64_t off = (int64_t)ops[0].number;
		if ((int)off >= 0) {
			type = LOC_STACK;
			*stack = (int)(((unsigned)(int)off + 7u) / 8u) + 1;
		}
	} else if (op >= DW_OP_reg0 && op <= DW_OP_reg31) {
		type = LOC_REG;
		*reg = op;
	} else if (op == DW_OP_regx) {
		type = LOC_REG;
		*reg = ops[0].number > UINT_MAX ? UINT_MAX : (unsigned)ops[0].number;
	}
	return type;
}

static void add_location(char *spec, size_t len, Dwarf_Die *die, struct fstate *st)
{
	unsigned reg = 0;
	int stack = 0;
	int type = arg_location(die, &reg, &stack);
	size_t n = strlen(spec);

	/* after a struct by value, counting registers no longer finds the
	 * argument: name the one it is in */
	if (st->struct_passed && type == LOC_INDEX) {
		const char *r = NULL;
		switch (st->last_fmt) {
		case F_STRUCT:
			for (int i = 0; i < st->struct_reg_cnt && i < 4; i++) {
				int cls = st->struct_regs[i];
				if (cls == PC_INT || cls == PC_PTR)
					r = st->reg_pos < INT_REGS ? argspec_int_reg[st->reg_pos] : "(null)",
					st->reg_pos++;
				else
					r = st->fpreg_pos < FP_REGS ? argspec_fp_reg[st->fpreg_pos] : "(null)",
					st->fpreg_pos++;
				n = strlen(spec);
				snprintf(spec + n, len - n, "%s%s", i ? "+" : "%", r);
			}
			return;
		case F_FLOAT:
			if (st->fpreg_pos < FP_REGS)
				r = argspec_fp_reg[st->fpreg_pos++];
			break;
		default:
			if (st->reg_pos < INT_REGS)
				r = argspec_int_reg[st->reg_pos++];
			break;
		}
		if (r)
			snprintf(spec + n, len - n, "%%%s", r);
		return;
	}
	switch (type) {
	case LOC_REG: {
		const char *r = reg <= 0xff ? dwarf_reg_name(reg) : NULL;
		if (!r)
			break;
		snprintf(spec + n, len - n, "%%%s", r);
		if (st->last_fmt == F_FLOAT)
			st->fpreg_pos++;
		else
			st->reg_pos++;
		break;
	}
	case LOC_STACK:
		snprintf(spec + n, len - n, "%%stack+%d", stack);
		break;
	default:
		if (st->last_fmt == F_FLOAT)
			st->fpreg_pos++;
		else
			st->reg_pos++;
		break;
	}
}

/* ---- functions ---- */

/* "@retval..." for die, or NULL (void). */
static bool ret_spec(struct xp_dwarf *d, Dwarf_Die *die, struct fstate *st, char *out, size_t len)
{
	Dwarf_Die spec;
	st->has_retspec = true;
	if (!dwarf_hasattr(die, DW_AT_type)) {
		Dwarf_Attribute a;
		if (!dwarf_attr(die, DW_AT_specification, &a) || !dwarf_formref_die(&a, &spec))
			return false;
		die = &spec;
		if (!dwarf_hasattr(die, DW_AT_type))
			return false;
	}
	snprintf(out, len, "@retval");
	add_type(d, out, len, die, st);
	/* returned in memory: %rdi holds where, the arguments come after */
	if ((st->last_fmt == F_STRUCT && st->struct_reg_cnt == 1 &&
	     st->struct_regs[0] == PC_PTR) || st->last_fmt == F_STDSTR) {
		st->struct_passed = true;
		st->reg_pos = 1;
	}
	return true;
}

/* "@arg1,..." for die's parameters into out: their number, -1 when the
 * text is over XP_DWARF_MAX_SPEC. */
static int arg_specs(struct xp_dwarf *d, Dwarf_Die *die, struct fstate *st, char *out, size_t len)
{
	Dwarf_Die p;
	int count = 0;
	size_t used = 0;
	st->has_retspec = false;
	out[0] = '\0';
	if (dwarf_child(die, &p) != 0)
		return 0;
	do {
		char buf[ARG_BUF];
		if (dwarf_tag(&p) != DW_TAG_formal_parameter)
			continue;
		if (st->idx >= 1 << 20)
			return -1;
		snprintf(buf, sizeof(buf), "arg%d", ++st->idx);
		if (!add_type(d, buf, sizeof(buf), &p, st)) {
			st->idx--;
			continue;
		}
		add_location(buf, sizeof(buf), &p, st);
		size_t bl = strlen(buf);
		if (used + bl + 2 >= len)
			return -1;
		out[used++] = count ? ',' : '@';
		memcpy(out + used, buf, bl + 1);
		used += bl;
		count++;
	} while (dwarf_siblingof(&p, &p) == 0);
	return count;
}

/* Where uftrace says a function is declared: its DW_AT_decl_file and
 * line, or (an -O2 out-of-line copy has neither) the line table's row for
 * its first address. */
static bool source_location(struct xp_dwarf *d, Dwarf_Die *die, const struct sym *s,
			    const char **file, int *line)
{
	*file = NULL;
	*line = 0;
	if (dwarf_hasattr(die, DW_AT_decl_file)) {
		if (dwarf_decl_line(die, line) != 0)
			return false;
		*file = dwarf_decl_file(die);
		if (!*file && d->files) /* DWARF 5's file 0, which libdw refuses */
			*file = dwarf_filesrc(d->files, 0, NULL, NULL);
	} else {
		Dwarf_Die cu;
		if (!dwarf_diecu(die, &cu, NULL, NULL))
			return false;
		uint64_t a = s->off + (d->etype == ET_EXEC ? d->base : 0);
		uint64_t lim = a + s->size;
		Dwarf_Line *ln;
		int tries = 10;
		do {
			ln = dwarf_getsrc_die(&cu, a);
			a++;
		} while (!ln && --tries > 0 && a < lim);
		if (!ln)
			return false;
		*file = dwarf_linesrc(ln, NULL, NULL);
		dwarf_lineno(ln, line);
	}
	return *file != NULL;
}

static int func_cb(Dwarf_Die *die, void *arg)
{
	struct xp_dwarf *d = arg;
	Dwarf_Addr lowpc;
	if (d->failed)
		return DWARF_CB_ABORT;
	if (dwarf_tag(die) != DW_TAG_subprogram || dwarf_hasattr(die, DW_AT_declaration) ||
	    !dwarf_hasattr(die, DW_AT_low_pc) || dwarf_lowpc(die, &lowpc) != 0)
		return DWARF_CB_OK;
	const char *name = NULL;
	Dwarf_Attribute a;
	if (dwarf_attr_integrate(die, DW_AT_linkage_name, &a))
		name = dwarf_formstring(&a);
	if (!name)
		name = dwarf_diename(die);
	if (!name || (d->etype == ET_EXEC && lowpc < d->base))
		return DWARF_CB_OK;
	ssize_t si = find_sym(d, lowpc - (d->etype == ET_EXEC ? d->base : 0), name);
	if (si < 0)
		return DWARF_CB_OK;
	struct symres *r = &d->res[si];

	const char *file;
	int line;
	if (source_location(d, die, &d->syms[si], &file, &line)) {
		if (!plain_path(file))
			return DWARF_CB_OK;
		if (!r->file)
			d->nfuncs++;
		if (d->nfuncs > XP_DWARF_MAX_FUNCS) {
			fail(d, "more than %u functions", XP_DWARF_MAX_FUNCS);
			return DWARF_CB_ABORT;
		}
		free(r->file);
		if (!(r->file = keep(d, file)))
			return DWARF_CB_ABORT;
		r->line = line;
		d->nlocs_used++;
	}

	/* The return value first: it may take %rdi (a struct in memory). */
	struct fstate st = {0};
	char *spec = malloc(XP_DWARF_MAX_SPEC);
	if (!spec) {
		fail(d, "out of memory");
		return DWARF_CB_ABORT;
	}
	if (ret_spec(d, die, &st, spec, XP_DWARF_MAX_SPEC)) {
		if (r->ret_state == SPEC_NONE) {
			r->ret_state = SPEC_SET;
			r->ret = keep(d, spec);
		} else { /* two functions at one address: uftrace drops both */
			r->ret_state = SPEC_BROKEN;
		}
	}
	int n = arg_specs(d, die, &st, spec, XP_DWARF_MAX_SPEC);
	if (n < 0) {
		r->arg_state = SPEC_BROKEN;
	} else if (n > 0) {
		if (r->arg_state == SPEC_NONE) {
			r->arg_state = SPEC_SET;
			r->arg = keep(d, spec);
		} else {
			r->arg_state = SPEC_BROKEN;
		}
	}
	free(spec);
	return d->failed ? DWARF_CB_ABORT : DWARF_CB_OK;
}

/* Whether the agent records item (len bytes at s): see XP_DWARF_RECORDABLE. */
static bool item_recordable(const char *s, size_t len)
{
	char w[ARG_BUF];
	if (len >= sizeof(w))
		return false;
	memcpy(w, s, len);
	w[len] = '\0';
	bool fp = !strncmp(w, "fparg", 5);
	const char *p = w + (fp ? 5 : !strncmp(w, "arg", 3) ? 3 : 0);
	if (p != w) {
		long n = strtol(p, NULL, 10);
		if (n < 1 || n > (fp ? 8 : 16))
			return false;
	}
	const char *fmt = strchr(w, '/'), *loc = strchr(w, '%');
	if (fmt && (fmt[1] == 't' || fmt[1] == 'S' || !strncmp(fmt, "/80", 3) ||
		    !strncmp(fmt, "/f80", 4)))
		return false; /* struct, std::string, long double */
	if (!loc)
		return true;
	if (!strncmp(loc, "%stack+", 7)) { /* the Nth word above the return address: i(6+N) */
		long n = strtol(loc + 7, NULL, 10);
		return n >= 1 && n <= 10;
	}
	static const char *const regs[] = {"rdi", "rsi", "rdx", "rcx", "r8", "r9", "xmm0", "xmm1",
					   "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7"};
	for (size_t i = 0; i < sizeof(regs) / sizeof(regs[0]); i++)
		if (!strcasecmp(loc + 1, regs[i]) && (i >= INT_REGS) == fp)
			return true; /* a register at entry: where the agent reads it */
	return false;
}

/* Spec (with uftrace's '@') cut in place to the items the agent records,
 * at most max of them; "" when none is left. */
static void reduce_spec(char *spec, size_t max)
{
	char *out = spec + 1;
	size_t n = 0;
	for (const char *s = spec + 1; *s;) {
		size_t len = strcspn(s, ",");
		if (n < max && item_recordable(s, len)) {
			if (n++)
				*out++ = ',';
			memmove(out, s, len);
			out += len;
		}
		s += len + (s[len] != '\0');
	}
	*out = '\0';
}

/* The compile directory most functions' units share (uftrace's choice:
 * directories in order, one that starts with the previous one counted
 * with it; the most units, then the most functions). */
static int cdir_cmp(const void *a, const void *b)
{
	return strcmp(((const struct cdir *)a)->name, ((const struct cdir *)b)->name);
}

static void add_cdir(struct xp_dwarf *d, const char *name, long locs)
{
	for (size_t i = 0; i < d->ncdirs; i++)
		if (!strcmp(d->cdirs[i].name, name)) {
			d->cdirs[i].used++;
			d->cdirs[i].locs += locs;
			return;
		}
	if (d->ncdirs >= 4096)
		return; /* a bound: far more directories than a program has */
	if (d->ncdirs == d->capcdirs) {
		size_t cap = d->capcdirs ? d->capcdirs * 2 : 8;
		struct cdir *n = realloc(d->cdirs, cap * sizeof(*n));
		if (!n)
			return;
		d->cdirs = n;
		d->capcdirs = cap;
	}
	char *k = keep(d, name);
	if (!k)
		return;
	d->cdirs[d->ncdirs++] = (struct cdir){k, 1, locs};
}

static struct cdir *cdir_max(struct cdir *a, struct cdir *b)
{
	return a->used > b->used || (a->used == b->used && a->locs > b->locs) ? a : b;
}

static void pick_base_dir(struct xp_dwarf *d)
{
	if (!d->ncdirs)
		return;
	qsort(d->cdirs, d->ncdirs, sizeof(*d->cdirs), cdir_cmp);
	struct cdir *max = &d->cdirs[0], *prev = max;
	for (size_t i = 1; i < d->ncdirs; i++) {
		struct cdir *e = &d->cdirs[i];
		if (!strncmp(e->name, prev->name, strlen(prev->name))) {
			prev->used += e->used;
			prev->locs += e->locs;
		} else {
			max = cdir_max(prev, max);
			prev = e;
		}
	}
	d->base_dir = cdir_max(prev, max)->name;
}

static void walk(struct xp_dwarf *d, Dwarf *dw)
{
	Dwarf_Off off = 0, next;
	size_t hsize;
	while (!d->failed && dwarf_nextcu(dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
		Dwarf_Die cu;
		if (!dwarf_offdie(dw, off + hsize, &cu))
			break;
		if (dwarf_tag(&cu) != DW_TAG_compile_unit) {
			if (!d->all_units || next <= off)
				break;
			off = next;
			continue;
		}
		size_t nfiles;
		d->files = NULL;
		if (dwarf_getsrcfiles(&cu, &d->files, &nfiles) != 0)
			d->files = NULL;
		dwarf_getfuncs(&cu, func_cb, d, 0);
		Dwarf_Attribute a;
		if (dwarf_attr(&cu, DW_AT_comp_dir, &a)) {
			const char *dir = dwarf_formstring(&a);
			if (dir && plain_path(dir)) {
				add_cdir(d, dir, d->nlocs_used);
				d->nlocs_used = 0;
			}
		}
		if (next <= off)
			break;
		off = next;
	}
	d->files = NULL;
	int err = dwarf_errno();
	(void)err;
}

/* uftrace writes enum types in descending name order. */
static int edef_cmp(const void *a, const void *b)
{
	return -strcmp(((const struct edef *)a)->name, ((const struct edef *)b)->name);
}

static int finish(struct xp_dwarf *d)
{
	if (d->failed)
		return -1;
	pick_base_dir(d);
	if (d->nenums)
		qsort(d->enums, d->nenums, sizeof(*d->enums), edef_cmp);
	d->funcs = calloc(d->nfuncs ? d->nfuncs : 1, sizeof(*d->funcs));
	if (!d->funcs) {
		fail(d, "out of memory");
		return -1;
	}
	size_t k = 0, blen = d->base_dir ? strlen(d->base_dir) : 0;
	for (size_t i = 0; i < d->nsyms && k < d->nfuncs; i++) {
		struct symres *r = &d->res[i];
		if (!r->file)
			continue;
		struct xp_dwarf_func *f = &d->funcs[k++];
		f->name = d->syms[i].name;
		f->offset = d->syms[i].off;
		f->addr = f->offset + (d->etype == ET_EXEC ? d->base : 0);
		f->file = r->file;
		if (blen && !strncmp(r->file, d->base_dir, blen))
			f->file = r->file + blen + (r->file[blen] ? 1 : 0);
		f->line = r->line;
		if (d->recordable) {
			if (r->ret_state == SPEC_SET && r->ret)
				reduce_spec(r->ret, 1);
			if (r->arg_state == SPEC_SET && r->arg)
				reduce_spec(r->arg, 8 - (r->ret_state == SPEC_SET && r->ret && r->ret[1]));
		}
		f->argspec = r->arg_state == SPEC_SET && r->arg ? r->arg + 1 : "";
		f->retspec = r->ret_state == SPEC_SET && r->ret ? r->ret + 1 : "";
	}
	d->nfuncs = k;
	return 0;
}

/* ---- opening ---- */

static Elf *open_elf(const char *path, int *fd, char *err, size_t errlen)
{
	*fd = open(path, O_RDONLY | O_CLOEXEC);
	if (*fd < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	struct stat sb;
	if (fstat(*fd, &sb) || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size > XP_DWARF_MAX_FILE) {
		snprintf(err, errlen, "%s: not a regular file of at most %llu GiB", path,
			 XP_DWARF_MAX_FILE >> 30);
		close(*fd);
		*fd = -1;
		return NULL;
	}
	Elf *e = elf_begin(*fd, ELF_C_READ, NULL);
	if (!e || elf_kind(e) != ELF_K_ELF) {
		snprintf(err, errlen, "%s: not an ELF file", path);
		if (e)
			elf_end(e);
		close(*fd);
		*fd = -1;
		return NULL;
	}
	return e;
}

/* e's section called name, with contents, or NULL. */
static Elf_Scn *named_scn(Elf *e, const char *name)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	if (elf_getshdrstrndx(e, &shstrndx))
		return NULL;
	while ((scn = elf_nextscn(e, scn))) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
			continue;
		const char *n = elf_strptr(e, shstrndx, sh.sh_name);
		if (n && !strcmp(n, name))
			return scn;
	}
	return NULL;
}

static bool has_debug_info(Elf *e)
{
	return named_scn(e, ".debug_info") || named_scn(e, ".zdebug_info");
}

/* The file at p, if it is an ELF file with DWARF. */
static Elf *debug_file(const char *p, int *fd)
{
	char err[64];
	Elf *de = open_elf(p, fd, err, sizeof(err));
	if (de && has_debug_info(de))
		return de;
	if (de) {
		elf_end(de);
		close(*fd);
	}
	return NULL;
}

/* The separate debug file of e (at path): by build-id, then by
 * .gnu_debuglink beside it, in .debug/, and under /usr/lib/debug. */
static Elf *separate_debug(struct xp_dwarf *d, Elf *e, const char *path, int *fd)
{
	char p[PATH_MAX];
	Elf *de;
	if (strlen(d->build_id) > 2) {
		snprintf(p, sizeof(p), "/usr/lib/debug/.build-id/%.2s/%s.debug", d->build_id,
			 d->build_id + 2);
		if ((de = debug_file(p, fd)))
			return de;
	}
	Elf_Scn *scn = named_scn(e, ".gnu_debuglink");
	Elf_Data *data = scn ? elf_getdata(scn, NULL) : NULL;
	if (!data || data->d_size < 2 || !data->d_buf || !memchr(data->d_buf, '\0', data->d_size))
		return NULL;
	const char *link = data->d_buf;
	if (!*link || strchr(link, '/'))
		return NULL;
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	else
		snprintf(dir, sizeof(dir), ".");
	const char *fmts[] = {"%s/%s", "%s/.debug/%s", "/usr/lib/debug%s/%s"};
	for (size_t i = 0; i < 3; i++) {
		if ((size_t)snprintf(p, sizeof(p), fmts[i], dir, link) >= sizeof(p) || !strcmp(p, path))
			continue;
		if ((de = debug_file(p, fd)))
			return de;
	}
	return NULL;
}

static struct xp_dwarf *new_handle(char *err, size_t errlen)
{
	struct xp_dwarf *d = calloc(1, sizeof(*d));
	if (!d)
		snprintf(err, errlen, "out of memory");
	return d;
}

/* Reads e (the object) and de (where its DWARF is: e itself or its debug
 * file). */
static int read_object(struct xp_dwarf *d, Elf *e, Elf *de, const char *what, char *err,
		       size_t errlen)
{
	read_base(d, e);
	Elf_Scn *st = find_scn(e, SHT_SYMTAB);
	Elf *se = e;
	if (!st && de != e && (st = find_scn(de, SHT_SYMTAB)))
		se = de;
	if (!st)
		st = find_scn(e, SHT_DYNSYM);
	if (st && read_syms(d, se, st)) {
		snprintf(err, errlen, "%s: %s", what, d->err);
		return -1;
	}
	if (!d->res && !(d->res = calloc(1, sizeof(*d->res)))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	Dwarf *dw = dwarf_begin_elf(de, DWARF_C_READ, NULL);
	if (!dw) {
		snprintf(err, errlen, "%s: no debug information (%s)", what, dwarf_errmsg(-1));
		return -1;
	}
	walk(d, dw);
	dwarf_end(dw);
	if (finish(d)) {
		snprintf(err, errlen, "%s: %s", what, d->err);
		return -1;
	}
	return 0;
}

struct xp_dwarf *xp_dwarf_open(const char *path, int flags, char *err, size_t errlen)
{
	int fd, dfd = -1;
	elf_version(EV_CURRENT);
	struct xp_dwarf *d = new_handle(err, errlen);
	if (!d)
		return NULL;
	Elf *e = open_elf(path, &fd, err, errlen);
	if (!e) {
		free(d);
		return NULL;
	}
	read_build_id(d, e);
	Elf *de = e;
	d->all_units = flags & XP_DWARF_SEPARATE;
	d->recordable = flags & XP_DWARF_RECORDABLE;
	if (!has_debug_info(e)) {
		de = d->all_units ? separate_debug(d, e, path, &dfd) : NULL;
		if (!de) {
			snprintf(err, errlen, "%s: no debug information", path);
			goto bad;
		}
	}
	if (read_object(d, e, de, path, err, errlen))
		goto bad;
	if (de != e)
		elf_end(de);
	if (dfd >= 0)
		close(dfd);
	elf_end(e);
	close(fd);
	return d;
bad:
	if (de && de != e)
		elf_end(de);
	if (dfd >= 0)
		close(dfd);
	elf_end(e);
	close(fd);
	xp_dwarf_close(d);
	return NULL;
}

struct xp_dwarf *xp_dwarf_open_mem(const void *buf, size_t len, char *err, size_t errlen)
{
	elf_version(EV_CURRENT);
	struct xp_dwarf *d = new_handle(err, errlen);
	if (!d)
		return NULL;
	Elf *e = elf_memory((char *)buf, len);
	if (!e || elf_kind(e) != ELF_K_ELF) {
		snprintf(err, errlen, "not an ELF image");
		if (e)
			elf_end(e);
		free(d);
		return NULL;
	}
	read_build_id(d, e);
	int r = read_object(d, e, e, "image", err, errlen);
	elf_end(e);
	if (r) {
		xp_dwarf_close(d);
		return NULL;
	}
	return d;
}

void xp_dwarf_close(struct xp_dwarf *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->nsyms; i++) {
		free(d->syms[i].name);
		if (d->res) {
			free(d->res[i].file);
			free(d->res[i].arg);
			free(d->res[i].ret);
		}
	}
	for (size_t i = 0; i < d->nenums; i++) {
		for (size_t j = 0; j < d->enums[i].n; j++)
			free(d->enums[i].v[j].name);
		free(d->enums[i].v);
		free(d->enums[i].name);
		free(d->enums[i].text);
	}
	for (size_t i = 0; i < d->ncdirs; i++)
		free(d->cdirs[i].name);
	free(d->cdirs);
	free(d->enums);
	free(d->ehash);
	free(d->syms);
	free(d->res);
	free(d->funcs);
	free(d);
}

size_t xp_dwarf_nfuncs(const struct xp_dwarf *d)
{
	return d->nfuncs;
}

const struct xp_dwarf_func *xp_dwarf_func(const struct xp_dwarf *d, size_t i)
{
	return i < d->nfuncs ? &d->funcs[i] : NULL;
}

size_t xp_dwarf_nenums(const struct xp_dwarf *d)
{
	return d->nenums;
}

const char *xp_dwarf_enum(const struct xp_dwarf *d, size_t i)
{
	return i < d->nenums ? d->enums[i].text : NULL;
}

const char *xp_dwarf_build_id(const struct xp_dwarf *d)
{
	return d->build_id;
}

int xp_dwarf_specs(const char *path, int (*fn)(void *arg, const struct xp_dwarf_func *f),
		   void *arg, char *err, size_t errlen)
{
	struct xp_dwarf *d = xp_dwarf_open(path, 0, err, errlen);
	if (!d)
		return -1;
	int r = 0;
	for (size_t i = 0; i < d->nfuncs && !r; i++)
		r = fn(arg, &d->funcs[i]);
	xp_dwarf_close(d);
	return r;
}

/* An A: or R: line.  Recordable: without the items' locations ("%RDX"),
 * which say where the agent reads them, not how they read: uftrace's
 * replay takes register names only with an info's cpuinfo section. */
static void print_spec(FILE *fp, const char *key, const char *spec, bool recordable)
{
	fprintf(fp, "%s: @", key);
	for (const char *s = spec; *s;) {
		size_t len = strcspn(s, ",");
		size_t keep = recordable ? strcspn(s, "%,") : len;
		fprintf(fp, "%.*s%s", (int)keep, s, s[len] ? "," : "");
		s += len + (s[len] != '\0');
	}
	fputc('\n', fp);
}

int xp_dwarf_print_dbg(const struct xp_dwarf *d, const char *path_name, FILE *fp)
{
	fprintf(fp, "# path name: %s\n", path_name);
	if (d->build_id[0])
		fprintf(fp, "# build-id: %s\n", d->build_id);
	for (size_t i = 0; i < d->nenums; i++)
		fprintf(fp, "E: %s\n", d->enums[i].text);
	for (size_t i = 0; i < d->nfuncs; i++) {
		const struct xp_dwarf_func *f = &d->funcs[i];
		fprintf(fp, "F: %" PRIx64 " %s\n", f->offset, f->name);
		fprintf(fp, "L: %ld %s\n", f->line, f->file);
		if (*f->argspec)
			print_spec(fp, "A", f->argspec, d->recordable);
		if (*f->retspec)
			print_spec(fp, "R", f->retspec, d->recordable);
	}
	return ferror(fp) ? -1 : 0;
}

int xp_dwarf_write_dbg(const struct xp_dwarf *d, const char *dir, const char *path_name,
		       char *err, size_t errlen)
{
	const char *base = strrchr(path_name, '/');
	base = base ? base + 1 : path_name;
	char p[PATH_MAX];
	if (!*base || (size_t)snprintf(p, sizeof(p), "%s/%s.dbg", dir, base) >= sizeof(p)) {
		snprintf(err, errlen, "%s: no file name for its .dbg", path_name);
		return -1;
	}
	FILE *fp = fopen(p, "we");
	if (!fp) {
		snprintf(err, errlen, "%s: %s", p, strerror(errno));
		return -1;
	}
	int r = xp_dwarf_print_dbg(d, path_name, fp);
	if (fclose(fp) || r) {
		snprintf(err, errlen, "%s: write failed", p);
		return -1;
	}
	return 0;
}
