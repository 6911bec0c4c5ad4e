/* SPDX-License-Identifier: MIT */
#include "common.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int exe_dir(char *out, size_t outsz)
{
	if (outsz < 2)
		return -1;
	ssize_t n = readlink("/proc/self/exe", out, outsz - 1);
	if (n <= 0)
		return -1;
	out[n] = '\0';
	char *slash = strrchr(out, '/');
	if (!slash)
		return -1;
	*slash = '\0';
	return 0;
}

char *exe_dir_find(const char *const *formats, size_t n)
{
	char dir[PATH_MAX];
	if (exe_dir(dir, sizeof(dir)) != 0)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		char p[PATH_MAX + 64];
		snprintf(p, sizeof(p), formats[i], dir);
		char *real = realpath(p, NULL);
		if (real)
			return real;
	}
	return NULL;
}
