/* SPDX-License-Identifier: MIT */
/* libFuzzer harness for the PT_NOTE walker (lib/base/notes.c).
 *
 * The input is the bytes of one PT_NOTE segment.  libFuzzer hands us an
 * exact-sized heap copy, so ASan reports any read past its end; the
 * callback checks that every descriptor it is given lies inside it, whole,
 * at a 4-byte step from the start (notes are 4-aligned), and that the
 * record address is the descriptor plus the offset it holds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

struct walk {
	const char *start;
	size_t len;
	size_t calls;
	const char *last; /* notes come in order: each after the one before */
};

static void on_note(const void *desc, uintptr_t record, void *arg)
{
	struct walk *w = arg;
	const char *d = desc;

	if (d < w->start || (size_t)(d - w->start) > w->len ||
	    w->len - (size_t)(d - w->start) < 4)
		abort(); /* descriptor not inside the segment */
	if ((size_t)(d - w->start) % 4 != 0)
		abort();
	if (w->last && d <= w->last)
		abort();
	int32_t off;
	memcpy(&off, d, 4);
	if (record != (uintptr_t)d + (uintptr_t)(intptr_t)off)
		abort();
	w->last = d;
	w->calls++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct walk w = { (const char *)data, size, 0, NULL };

	size_t found = xp_notes_walk(data, size, on_note, &w);
	if (found != w.calls)
		abort();
	/* Without a callback the walk finds the same notes. */
	if (xp_notes_walk(data, size, NULL, NULL) != found)
		abort();
	return 0;
}
