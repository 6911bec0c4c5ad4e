/* SPDX-License-Identifier: MIT */
/* A traced library that calls libc (test_trace_libcall.py): loaded by
 * prog_libcall while tracing is on, its library calls are traced from its
 * load on. */
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) int callee_len(const char *s)
{
	char *copy = strdup(s);
	int n = copy ? (int)strlen(copy) : -1;
	free(copy);
	return n;
}
