/* SPDX-License-Identifier: MIT */
/* Messages from the shared code name the program that prints them: mctop
 * saying "xprobes: no such process" sent users looking for an xprobes they
 * never ran.  glibc keeps the name each program was started as, so no main
 * has to hand it down. */
#define _GNU_SOURCE
#include "common.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *tool_name(void)
{
	return program_invocation_short_name;
}

void tool_err(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "%s: ", tool_name());
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

void tool_perror(const char *what)
{
	int e = errno;
	tool_err("%s: %s\n", what, strerror(e));
}
