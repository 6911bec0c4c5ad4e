/* SPDX-License-Identifier: MIT */
#include "base.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* Punctuation around which spaces carry no meaning in a C type. */
static int is_tight(char c)
{
	return c == '*' || c == '(' || c == ')' || c == ',' || c == '[' ||
	       c == ']' || c == '\0';
}

int sig_canonical(const char *types, char *out, size_t outsz)
{
	const char *s = types, *e = types + strlen(types);
	size_t n = 0;
	int rc = 0;

	if (outsz == 0)
		return -1;
	while (s < e && isspace((unsigned char)*s))
		s++;
	while (e > s && isspace((unsigned char)e[-1]))
		e--;
	if (s < e && *s == '(' && e[-1] == ')') {
		s++;
		e--;
	}

	char prev = '\0'; /* last character written, '\0' at the start */
	for (const char *p = s; p < e; p++) {
		if (isspace((unsigned char)*p)) {
			while (p + 1 < e && isspace((unsigned char)p[1]))
				p++;
			char next = p + 1 < e ? p[1] : '\0';
			/* A space survives only between two words. */
			if (prev == '\0' || is_tight(prev) || is_tight(next))
				continue;
			if (n + 1 < outsz)
				out[n++] = ' ';
			else
				rc = -1;
			prev = ' ';
			continue;
		}
		if (n + 1 < outsz)
			out[n++] = *p;
		else
			rc = -1;
		/* Lists read "int, char*": one space after each comma. */
		if (*p == ',') {
			if (n + 1 < outsz)
				out[n++] = ' ';
			else
				rc = -1;
		}
		prev = *p;
	}
	out[n] = '\0';
	if (strcmp(out, "void") == 0)
		out[0] = '\0';
	return rc;
}

char *sig_canonical_dup(const char *types)
{
	/* Canonical text is never longer than the input plus one space per
	 * comma. */
	size_t len = strlen(types), commas = 0;
	for (const char *p = types; *p; p++)
		commas += *p == ',';
	size_t sz = len + commas + 1;
	char *out = malloc(sz);
	if (out && sig_canonical(types, out, sz) != 0) {
		free(out); /* cannot happen: sz is an upper bound */
		out = NULL;
	}
	return out;
}

int sig_equal(const char *a, const char *b)
{
	char *ca = sig_canonical_dup(a), *cb = sig_canonical_dup(b);
	int same = ca && cb && strcmp(ca, cb) == 0;
	free(ca);
	free(cb);
	return same;
}
