/* SPDX-License-Identifier: MIT */
/* The entries table of an object built with plain
 * -fpatchable-function-entry=5, without libxprobes_trace.a (trace.h):
 * such an object has no note of ours, only a section,
 * __patchable_function_entries, which no program header locates.  So its
 * section headers are read from the file, and used only when the file is
 * the one mapped: its GNU build id must be the build id the mapping
 * carries in memory.  Without a build id on both sides nothing is used (a
 * file replaced since the load would send us patching bytes that are not
 * function entries).
 *
 * Runs inside dl_iterate_phdr (the object stays loaded): open and pread
 * only, every size bounded. */
#define _GNU_SOURCE
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trace.h"

#define MAX_SECTIONS 4096
#define MAX_SHSTRTAB (256u << 10)
#define MAX_NOTES 4096u
#define BUILD_ID_MAX 64u
#define TABLE_NAME "__patchable_function_entries"

struct build_id {
	uint8_t *id;
	size_t len;
};

static int build_id_note(uint32_t type, const char *name, uint32_t namesz, const void *desc,
			 uint32_t descsz, void *arg)
{
	struct build_id *b = arg;
	if (type != NT_GNU_BUILD_ID || namesz != 4 || memcmp(name, "GNU", 4) != 0 || descsz == 0 ||
	    descsz > BUILD_ID_MAX)
		return 0;
	memcpy(b->id, desc, descsz);
	b->len = descsz;
	return 1;
}

/* The first GNU build id note in [p, p + len): its length, 0 if none. */
static size_t build_id_in(const uint8_t *p, size_t len, uint8_t id[BUILD_ID_MAX])
{
	struct build_id b = { id, 0 };
	xp_note_each(p, len, build_id_note, &b);
	return b.len;
}

static size_t mapped_build_id(const struct dl_phdr_info *info, uint8_t id[BUILD_ID_MAX])
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		size_t n;
		if (ph->p_type == PT_NOTE &&
		    (n = build_id_in((const uint8_t *)(info->dlpi_addr + ph->p_vaddr), ph->p_memsz,
				     id)))
			return n;
	}
	return 0;
}

static int read_at(int fd, void *buf, size_t len, uint64_t off)
{
	return pread(fd, buf, len, (off_t)off) == (ssize_t)len ? 0 : -1;
}

int xp_trace_plain_tables(const struct dl_phdr_info *info, const char *dlname, uintptr_t *start,
			  uintptr_t *stop)
{
	uint8_t want[BUILD_ID_MAX], have[BUILD_ID_MAX];
	size_t idlen = mapped_build_id(info, want);
	if (!idlen || (*dlname && dlname[0] != '/'))
		return 0; /* no id to check the file by, or no file (the vDSO) */
	int fd = open(*dlname ? dlname : "/proc/self/exe", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	int n = 0, id_ok = 0;
	Elf64_Ehdr eh;
	Elf64_Shdr *sh = NULL;
	char *names = NULL;
	if (read_at(fd, &eh, sizeof(eh), 0) || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_shentsize != sizeof(Elf64_Shdr) ||
	    eh.e_shnum == 0 || eh.e_shnum > MAX_SECTIONS || eh.e_shstrndx >= eh.e_shnum)
		goto out;
	sh = xp_malloc(eh.e_shnum * sizeof(*sh));
	if (!sh || read_at(fd, sh, eh.e_shnum * sizeof(*sh), eh.e_shoff))
		goto out;
	const Elf64_Shdr *strs = &sh[eh.e_shstrndx];
	if (strs->sh_size == 0 || strs->sh_size > MAX_SHSTRTAB ||
	    !(names = xp_malloc(strs->sh_size + 1)) ||
	    read_at(fd, names, strs->sh_size, strs->sh_offset))
		goto out;
	names[strs->sh_size] = '\0';
	for (unsigned i = 0; i < eh.e_shnum && !id_ok; i++) {
		uint8_t notes[MAX_NOTES];
		if (sh[i].sh_type != SHT_NOTE || sh[i].sh_size > MAX_NOTES ||
		    read_at(fd, notes, sh[i].sh_size, sh[i].sh_offset))
			continue;
		id_ok = build_id_in(notes, sh[i].sh_size, have) == idlen &&
			memcmp(have, want, idlen) == 0;
	}
	for (unsigned i = 0; i < eh.e_shnum && id_ok && n < XP_TRACE_MAX_PLAIN; i++) {
		if (sh[i].sh_name >= strs->sh_size || strcmp(names + sh[i].sh_name, TABLE_NAME) ||
		    !(sh[i].sh_flags & SHF_ALLOC) || sh[i].sh_type == SHT_NOBITS)
			continue;
		/* The loader relocated it in memory: read it there. */
		start[n] = info->dlpi_addr + sh[i].sh_addr;
		stop[n] = start[n] + sh[i].sh_size;
		n += stop[n] >= start[n];
	}
out:
	free(names);
	free(sh);
	close(fd);
	return n;
}
