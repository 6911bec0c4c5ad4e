#include "exedir.h"

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
