/* SPDX-License-Identifier: MIT */
/* Sizes on the command line, read and written in the user's units: a
 * --budget of 1M that is refused is answered in M ("4M to 1048576M"), not
 * in a byte count the user has to convert back. */
#include "common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

static int suffix_shift(char c)
{
	switch (c) {
	case 'k': case 'K': return 10;
	case 'm': case 'M': return 20;
	case 'g': case 'G': return 30;
	case 't': case 'T': return 40;
	default: return 0;
	}
}

int cli_parse_size(const char *s, unsigned long long *v, unsigned *shift)
{
	char *end;
	if (*s < '0' || *s > '9')
		return -1; /* strtoull would take " 8", "+8" and "-8" */
	errno = 0;
	unsigned long long x = strtoull(s, &end, 10);
	int sh = suffix_shift(*end);
	if (sh)
		end++;
	if (*end == 'i' && sh) /* also "MiB": powers of 1024 either way */
		end++;
	if ((*end == 'b' || *end == 'B') && (sh || end[1] == '\0'))
		end++;
	if (errno || *end || x == 0 || x > (~0ull >> sh))
		return -1;
	*v = x << sh;
	if (shift)
		*shift = (unsigned)sh;
	return 0;
}

void cli_format_size(unsigned long long bytes, unsigned shift, int round_up, char *out,
		     size_t outsz)
{
	static const char units[] = { [10] = 'K', [20] = 'M', [30] = 'G', [40] = 'T' };
	if (shift == 0 || shift > 40 || !units[shift]) {
		snprintf(out, outsz, "%llu", bytes);
		return;
	}
	unsigned long long unit = 1ull << shift;
	unsigned long long n = bytes / unit + (round_up && bytes % unit);
	snprintf(out, outsz, "%llu%c", n, units[shift]);
}
