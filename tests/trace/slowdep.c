/* SPDX-License-Identifier: MIT */
/* A library whose constructor waits, for tests/trace/test_trace_late.py:
 * a traced library that needs it (libtracee_dep-gcc.so) is mapped, its
 * gcc entries still five 1-byte NOPs, while this constructor runs.  It
 * waits while the file named by XP_SLOW_FILE exists (see hold.h). */
#include "../fixtures/hold.h"

__attribute__((constructor)) static void wait_while_flagged(void)
{
	fx_hold_while_flagged("XP_SLOW_FILE");
}

int slowdep_ready(void)
{
	return 1;
}
