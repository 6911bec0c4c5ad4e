#include "base.h"

#include <elf.h>
#include <string.h>

size_t xp_notes_walk(const void *start, size_t len, xp_note_fn fn, void *arg)
{
	const char *p = start;
	const char *end = p + len;
	size_t found = 0;

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
		if (nh.n_type == 1 && nh.n_namesz == 8 && nh.n_descsz == 4 &&
		    memcmp(name, "xprobes", 8) == 0) {
			int32_t off;
			memcpy(&off, desc, 4);
			found++;
			if (fn)
				fn(desc, (uintptr_t)desc + (uintptr_t)(intptr_t)off, arg);
		}
		p = desc + descsz;
	}
	return found;
}
