#include "signature.h"

#include <ctype.h>
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

int sig_equal(const char *a, const char *b)
{
	char ca[1024], cb[1024];

	if (sig_canonical(a, ca, sizeof(ca)) || sig_canonical(b, cb, sizeof(cb)))
		return 0;
	return strcmp(ca, cb) == 0;
}
