/* SPDX-License-Identifier: MIT */
/* Bounds on what one target makes the tool do (xprobes.h, "trace_bounds.c").
 *
 * The target is anyone's process and the tool may be root's, so nothing it
 * sends or maps may decide how much memory or time the tool spends:
 *   - the ELF files it maps are read for symbols through libelf's
 *     ELF_C_READ_MMAP (pages are touched only as they are read, never a
 *     section copied whole up front), after their header, section table,
 *     symbol table and string table are held to the file's size and to
 *     limits above what real objects have; a file over them is skipped
 *     with a message naming it, its functions shown as addresses (and one
 *     the target shrinks while it is read too: trace_elf_guard);
 *   - addresses the recorder meets (rings, probe sites) are found through
 *     an index (u64map), never by scanning everything met so far. */
#define _GNU_SOURCE
#include "xprobes.h"

#include <elf.h>
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- an index of 64-bit keys ------------------------------------------- */

static size_t slot_of(const struct u64map *m, uint64_t key)
{
	size_t mask = m->cap - 1, i = (size_t)((key * 0x9e3779b97f4a7c15ull) >> 17) & mask;
	while (m->val[i] && m->key[i] != key)
		i = (i + 1) & mask;
	return i;
}

int u64map_get(const struct u64map *m, uint64_t key, uint32_t *val)
{
	if (!m->cap)
		return -1;
	size_t i = slot_of(m, key);
	if (!m->val[i])
		return -1;
	*val = m->val[i] - 1;
	return 0;
}

int u64map_put(struct u64map *m, uint64_t key, uint32_t val)
{
	if (val == UINT32_MAX)
		return -1;
	if (2 * (m->n + 1) > m->cap) {
		struct u64map old = *m;
		size_t cap = m->cap ? 2 * m->cap : 256;
		m->key = calloc(cap, sizeof(*m->key));
		m->val = calloc(cap, sizeof(*m->val));
		if (!m->key || !m->val) {
			free(m->key);
			free(m->val);
			*m = old;
			return -1;
		}
		m->cap = cap;
		m->n = 0;
		for (size_t i = 0; i < old.cap; i++)
			if (old.val[i]) {
				size_t j = slot_of(m, old.key[i]);
				m->key[j] = old.key[i];
				m->val[j] = old.val[i];
				m->n++;
			}
		free(old.key);
		free(old.val);
	}
	size_t i = slot_of(m, key);
	m->n += !m->val[i];
	m->key[i] = key;
	m->val[i] = val + 1;
	return 0;
}

void u64map_free(struct u64map *m)
{
	free(m->key);
	free(m->val);
	*m = (struct u64map){ 0 };
}

/* ---- ELF files, bounded ------------------------------------------------ */

static int too_big(char *why, size_t whysz, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int too_big(char *why, size_t whysz, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, whysz, fmt, ap);
	va_end(ap);
	return -1;
}

static uint64_t get_u(const unsigned char *p, size_t len, int big_endian)
{
	uint64_t v = 0;
	for (size_t i = 0; i < len; i++)
		v |= (uint64_t)p[big_endian ? len - 1 - i : i] << (8 * i);
	return v;
}

/* The header's own word on the section table, before libelf sees it:
 * libelf allocates a descriptor per section at elf_begin. */
static int check_header(int fd, uint64_t size, char *why, size_t whysz)
{
	unsigned char h[64];
	if (pread(fd, h, sizeof(h), 0) != (ssize_t)sizeof(h) || memcmp(h, ELFMAG, SELFMAG))
		return 1;
	int c64 = h[EI_CLASS] == ELFCLASS64, be = h[EI_DATA] == ELFDATA2MSB;
	if (!c64 && h[EI_CLASS] != ELFCLASS32)
		return 1;
	uint64_t shoff = c64 ? get_u(h + 40, 8, be) : get_u(h + 32, 4, be);
	uint64_t shentsize = get_u(h + (c64 ? 58 : 46), 2, be);
	uint64_t shnum = get_u(h + (c64 ? 60 : 48), 2, be);
	uint64_t phoff = c64 ? get_u(h + 32, 8, be) : get_u(h + 28, 4, be);
	uint64_t phentsize = get_u(h + (c64 ? 54 : 42), 2, be);
	uint64_t phnum = get_u(h + (c64 ? 56 : 44), 2, be);
	if (phnum == PN_XNUM)
		return too_big(why, whysz, "it claims 65535 or more program headers");
	if (phnum && (phoff >= size || phnum * phentsize > size - phoff))
		return too_big(why, whysz, "its program headers lie outside the file");
	if (!shoff)
		return 0;
	if (shoff >= size || shentsize < (c64 ? sizeof(Elf64_Shdr) : sizeof(Elf32_Shdr)))
		return too_big(why, whysz, "its section table lies outside the file");
	if (!shnum) { /* extended numbering: section 0's sh_size holds the count */
		unsigned char s0[8];
		size_t at = c64 ? 32 : 20, len = c64 ? 8 : 4;
		if (shoff > size - at - len || pread(fd, s0, len, (off_t)(shoff + at)) != (ssize_t)len)
			return too_big(why, whysz, "its section table lies outside the file");
		shnum = get_u(s0, len, be);
	}
	if (shnum > TRACE_ELF_MAX_SECTIONS)
		return too_big(why, whysz, "%" PRIu64 " sections, more than the %u read", shnum,
			       TRACE_ELF_MAX_SECTIONS);
	if (shnum * shentsize > size - shoff)
		return too_big(why, whysz, "its section table lies outside the file");
	return 0;
}

/* The mapping is of a file the target may shrink at any time (its own,
 * or root's map_files link to it): a page past the new end raises
 * SIGBUS.  So every access to it runs under this guard, whose handler
 * jumps back out.  The tool reads files from one thread. */
static sigjmp_buf *bus_jump;

static void on_bus(int sig)
{
	if (bus_jump)
		siglongjmp(*bus_jump, 1);
	signal(sig, SIG_DFL);
	raise(sig);
}

int trace_elf_guard(int (*fn)(void *ctx), void *ctx)
{
	struct sigaction sa, old;
	sigjmp_buf here;
	volatile int rc = TRACE_ELF_SHRANK;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_bus;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, &old);
	if (!sigsetjmp(here, 1)) {
		bus_jump = &here;
		rc = fn(ctx);
	}
	bus_jump = NULL;
	sigaction(SIGBUS, &old, NULL);
	return rc;
}

static int begin_mapped(void *ctx)
{
	struct trace_elf *te = ctx;
	te->elf = elf_begin(te->fd, ELF_C_READ_MMAP, NULL);
	return te->elf && elf_kind(te->elf) == ELF_K_ELF ? 0 : -1;
}

int trace_elf_begin(int fd, struct trace_elf *te, char *why, size_t whysz)
{
	struct stat st;
	*te = (struct trace_elf){ 0 };
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
		return 1;
	te->size = (uint64_t)st.st_size;
	int rc = check_header(fd, te->size, why, whysz);
	if (rc)
		return rc;
	elf_version(EV_CURRENT);
	te->fd = fd;
	if ((rc = trace_elf_guard(begin_mapped, te)) != 0) {
		if (te->elf)
			elf_end(te->elf);
		te->elf = NULL;
		if (rc == TRACE_ELF_SHRANK)
			return too_big(why, whysz, "the file shrank while it was read");
		return 1;
	}
	return 0;
}

void trace_elf_end(struct trace_elf *te)
{
	if (te->elf)
		elf_end(te->elf);
	te->elf = NULL;
}

/* A section whose bytes are to be read: inside the file, at most max bytes. */
static int section_ok(const struct trace_elf *te, const GElf_Shdr *sh, uint64_t max,
		      const char *what, char *why, size_t whysz)
{
	if (sh->sh_offset > te->size || sh->sh_size > te->size - sh->sh_offset)
		return too_big(why, whysz, "its %s runs past the end of the file", what);
	if (sh->sh_size > max)
		return too_big(why, whysz, "its %s of %" PRIu64 " bytes is more than the %" PRIu64
			       " read", what, (uint64_t)sh->sh_size, max);
	return 0;
}

int trace_elf_symtab_ok(const struct trace_elf *te, const GElf_Shdr *sh, char *why, size_t whysz)
{
	size_t entsize = gelf_fsize(te->elf, ELF_T_SYM, 1, EV_CURRENT);
	GElf_Shdr str;
	Elf_Scn *link = elf_getscn(te->elf, sh->sh_link);
	if (!entsize || sh->sh_entsize != entsize)
		return too_big(why, whysz, "its symbol table has entries of %" PRIu64 " bytes",
			       (uint64_t)sh->sh_entsize);
	if (section_ok(te, sh, (uint64_t)TRACE_ELF_MAX_SYMS * entsize, "symbol table", why, whysz))
		return -1;
	if (!link || !gelf_getshdr(link, &str) || str.sh_type != SHT_STRTAB)
		return too_big(why, whysz, "its symbol table has no string table");
	return section_ok(te, &str, TRACE_ELF_MAX_STRTAB, "string table", why, whysz);
}

int trace_elf_note_ok(const struct trace_elf *te, const GElf_Shdr *sh)
{
	char why[8];
	return section_ok(te, sh, TRACE_ELF_MAX_NOTE, "note", why, sizeof(why)) == 0;
}
