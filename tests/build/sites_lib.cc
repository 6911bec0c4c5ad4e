/* SPDX-License-Identifier: MIT */
// The library half of the C++ build matrix: a site in an inline function
// of a shared object, the case C++ cannot name with an "i" asm operand.
#include <xprobes/site.h>

inline void lib_site(int i)
{
	XPROBES_SITE(build_lib, (int), (i));
}

extern "C" void lib_fire(int n)
{
	for (int i = 0; i < n; i++)
		lib_site(i);
}
