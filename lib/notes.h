/* Walking the "xprobes" ELF notes of a loaded object's PT_NOTE segment.
 *
 * The memory comes from objects we did not build: the walker trusts no
 * size it reads and never touches a byte outside [p, p + len). */
#ifndef XP_NOTES_H
#define XP_NOTES_H

#include <stddef.h>
#include <stdint.h>

/* Called with the address of each well-formed xprobes note's 4-byte
 * descriptor (owner "xprobes", type 1) and the site record it points at
 * (desc + the signed 32-bit offset it holds; not checked here). */
typedef void (*xp_note_fn)(const void *desc, uintptr_t record, void *arg);

/* Walk the notes in [p, p + len); stops at the first malformed header.
 * Returns how many xprobes notes were found. */
size_t xp_notes_walk(const void *p, size_t len, xp_note_fn fn, void *arg);

#endif
