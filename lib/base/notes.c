/* SPDX-License-Identifier: MIT */
#include "base.h"

#include <elf.h>
#include <string.h>

void xp_note_each(const void *start, size_t len, xp_note_each_fn fn, void *arg)
{
	const char *p = start;
	const char *end = p + len;

	while ((size_t)(end - p) >= sizeof(Elf64_Nhdr)) {
		Elf64_Nhdr nh;
		memcpy(&nh, p, sizeof(nh)); /* notes are 4-aligned, not always 8 */
		/* Sizes are 32-bit: rounding in 64 bits cannot overflow. */
		size_t namesz = ((size_t)nh.n_namesz + 3u) & ~(size_t)3u;
		size_t descsz = ((size_t)nh.n_descsz + 3u) & ~(size_t)3u;
		const char *name = p + sizeof(nh);
		if (namesz > (size_t)(end - name))
			break;
		const char *desc = name + namesz;
		if (descsz > (size_t)(end - desc))
			break;
		if (fn(nh.n_type, name, nh.n_namesz, desc, nh.n_descsz, arg))
			break;
		p = desc + descsz;
	}
}

struct walk {
	xp_note_fn fn;
	void *arg;
	size_t found;
};

static int site_note(uint32_t type, const char *name, uint32_t namesz, const void *desc,
		     uint32_t descsz, void *arg)
{
	struct walk *w = arg;
	if (type == 1 && namesz == 8 && descsz == 4 && memcmp(name, "xprobes", 8) == 0) {
		int32_t off;
		memcpy(&off, desc, 4);
		w->found++;
		if (w->fn)
			w->fn(desc, (uintptr_t)desc + (uintptr_t)(intptr_t)off, w->arg);
	}
	return 0;
}

size_t xp_notes_walk(const void *start, size_t len, xp_note_fn fn, void *arg)
{
	struct walk w = { fn, arg, 0 };
	xp_note_each(start, len, site_note, &w);
	return w.found;
}
