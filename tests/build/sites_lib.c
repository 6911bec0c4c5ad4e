/* SPDX-License-Identifier: MIT */
/* The library half of the build matrix: a site in a shared object. */
#include <xprobes/site.h>

void lib_fire(int n);

void lib_fire(int n)
{
	for (int i = 0; i < n; i++)
		XPROBES_SITE(build_lib, (int), (i));
}
