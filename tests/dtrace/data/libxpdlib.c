/* SPDX-License-Identifier: MIT */
/* A shared library instrumented through the same provider file: it links
 * its own -G object, so its gates are its own (hidden), as with any
 * DTrace-instrumented library. */
#include <stdint.h>

struct xpd_thing;

#include "xpdtest.h"

void xpd_lib_call(int n);
int xpd_lib_enabled(void);

void xpd_lib_call(int n)
{
	for (int i = 1; i <= n; i++)
		XPDTEST_LIB_CALL(i);
}

int xpd_lib_enabled(void)
{
	return XPDTEST_LIB_CALL_ENABLED() ? 1 : 0;
}
