/* SPDX-License-Identifier: MIT */
/* Drives tools/xprobes/trace_dwarf.c for tests/trace/test_trace_dwarf.py:
 *   dwarf_specs [--separate|--recordable] FILE
 *                               one line a function: NAME OFFSET ARGSPEC RETSPEC
 *                               ("-" for none), then "enum TEXT" lines;
 *                               --separate: DWARF from a separate debug file;
 *                               --recordable: XP_DWARF_RECORDABLE's specs
 *   dwarf_specs --dbg FILE DIR PATH_NAME
 *                               write DIR/<basename PATH_NAME>.dbg
 * Errors: "dwarf_specs: why" on stderr, exit 1. */
#include <stdio.h>
#include <string.h>

#include "../../tools/xprobes/trace_dwarf.h"

static int print_func(void *arg, const struct xp_dwarf_func *f)
{
	(void)arg;
	printf("%s %llx %s %s\n", f->name, (unsigned long long)f->offset,
	       *f->argspec ? f->argspec : "-", *f->retspec ? f->retspec : "-");
	return 0;
}

int main(int argc, char **argv)
{
	char err[512];
	if (argc == 5 && !strcmp(argv[1], "--dbg")) {
		struct xp_dwarf *d = xp_dwarf_open(argv[2], 0, err, sizeof(err));
		if (!d || xp_dwarf_write_dbg(d, argv[3], argv[4], err, sizeof(err))) {
			fprintf(stderr, "dwarf_specs: %s\n", err);
			xp_dwarf_close(d);
			return 1;
		}
		xp_dwarf_close(d);
		return 0;
	}
	int flags = 0;
	if (argc == 3 && (!strcmp(argv[1], "--separate") || !strcmp(argv[1], "--recordable"))) {
		flags = !strcmp(argv[1], "--separate") ? XP_DWARF_SEPARATE : XP_DWARF_RECORDABLE;
		argv++;
		argc--;
	}
	if (argc != 2) {
		fprintf(stderr, "usage: dwarf_specs [--separate|--recordable] FILE | --dbg FILE DIR PATH_NAME\n");
		return 2;
	}
	if (!flags && xp_dwarf_specs(argv[1], print_func, NULL, err, sizeof(err))) {
		fprintf(stderr, "dwarf_specs: %s\n", err);
		return 1;
	}
	struct xp_dwarf *d = xp_dwarf_open(argv[1], flags, err, sizeof(err));
	if (!d) {
		fprintf(stderr, "dwarf_specs: %s\n", err);
		return 1;
	}
	for (size_t i = 0; flags && i < xp_dwarf_nfuncs(d); i++)
		print_func(NULL, xp_dwarf_func(d, i));
	for (size_t i = 0; i < xp_dwarf_nenums(d); i++)
		printf("%s\n", xp_dwarf_enum(d, i));
	xp_dwarf_close(d);
	return 0;
}
