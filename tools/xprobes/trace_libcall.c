/* SPDX-License-Identifier: MIT */
/* Names of library calls.  The agent (lib/trace/trace_plt.c) records a
 * call a traced object makes through a GOT slot with the slot's address;
 * the slot is named by the symbol of its relocation in the object's file:
 * the PLT's JUMP_SLOT relocations, and -fno-plt's GLOB_DAT relocations of
 * functions defined elsewhere (the slots the agent hooks).  Read from the
 * file with libelf, like the functions' names. */
#define _GNU_SOURCE
#include "xprobes.h"

#include <elf.h>
#include <gelf.h>
#include <libelf.h>

void trace_libcall_slots(struct Elf *e, void (*add)(void *ctx, uint64_t vaddr, const char *name),
			 void *ctx)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	while ((scn = elf_nextscn(e, scn))) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA || !sh.sh_entsize)
			continue;
		Elf_Scn *symscn = elf_getscn(e, sh.sh_link);
		GElf_Shdr symsh;
		if (!symscn || !gelf_getshdr(symscn, &symsh) || symsh.sh_type != SHT_DYNSYM)
			continue;
		Elf_Data *rd = elf_getdata(scn, NULL), *sd = elf_getdata(symscn, NULL);
		size_t count = sh.sh_size / sh.sh_entsize;
		for (size_t i = 0; rd && sd && i < count; i++) {
			GElf_Rela r;
			GElf_Sym s;
			if (!gelf_getrela(rd, (int)i, &r) ||
			    !gelf_getsym(sd, (int)GELF_R_SYM(r.r_info), &s))
				continue;
			unsigned type = (unsigned)GELF_R_TYPE(r.r_info), st = GELF_ST_TYPE(s.st_info);
			if (type != R_X86_64_JUMP_SLOT &&
			    (type != R_X86_64_GLOB_DAT || s.st_shndx != SHN_UNDEF ||
			     (st != STT_FUNC && st != STT_GNU_IFUNC)))
				continue;
			const char *name = elf_strptr(e, symsh.sh_link, s.st_name);
			if (name && *name)
				add(ctx, r.r_offset, name);
		}
	}
}
