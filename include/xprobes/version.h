/* SPDX-License-Identifier: MIT */
/* xprobes/version.h -- the release, and the two ABI versions.
 *
 * The release string is defined here only: the Makefile, the agent and the
 * tools all read it from this header. */
#ifndef XPROBES_VERSION_H
#define XPROBES_VERSION_H

#define XPROBES_VERSION "0.2.0"
/* The release's year: the man pages' date (scripts/man-version.sh writes
 * both into their .TH lines; tests/build/test_man_pages.py checks them). */
#define XPROBES_YEAR "2026"

/* Layout of struct xprobes_site (<xprobes/site.h>): the records compiled
 * into programs.  Up to 4 the record began with a 32-bit version; from 5 on
 * with a 16-bit version and the record's 16-bit size, so a record of
 * version 4 reads as version 4, size 0. */
#define XPROBES_SITE_ABI 5

/* Layout of struct xprobes_module_desc (<xprobes/probe.h>), the same way. */
#define XPROBES_MODULE_ABI 5

/* The name sites used before the two were separate. */
#define XPROBES_ABI_VERSION XPROBES_SITE_ABI

#endif
