/* SPDX-License-Identifier: MIT */
/* A traced shared library (built with the xprobes-trace flags, gcc and
 * clang), dlopen()ed by the tests: its functions must be found and
 * patched like the program's own. */
#include <xprobes/trace.h>

__attribute__((noinline)) int tracee_square(int x)
{
	return x * x;
}

__attribute__((noinline)) int tracee_sum_squares(int n)
{
	int s = 0;
	for (int i = 0; i < n; i++)
		s += tracee_square(i);
	return s;
}

/* Opted out: never a patch site. */
XPROBES_NOTRACE __attribute__((noinline)) int tracee_untraced(int x)
{
	return x + 7;
}
