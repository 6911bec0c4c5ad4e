/* glob.h -- is a shell glob well formed?
 *
 * fnmatch(3) takes an unclosed '[' or a trailing '\' as ordinary
 * characters, so a typo such as "conn_[" quietly matches nothing and
 * looks like "no such site".  The agent's commands, module loading and
 * the CLI's trace -F/-N ask this first and name the mistake instead.
 * Header-only: the CLI uses it too. */
#ifndef XP_GLOB_H
#define XP_GLOB_H

#include <stddef.h>

/* NULL if GLOB is well formed, else what is wrong with it. */
static inline const char *xp_glob_error(const char *glob)
{
	if (!glob)
		return "it is missing";
	for (const char *p = glob; *p; p++) {
		if (*p == '\\') {
			if (!*++p)
				return "it ends with a lone '\\'";
			continue;
		}
		if (*p != '[')
			continue;
		const char *q = p + 1;
		if (*q == '!' || *q == '^')
			q++;
		if (*q == ']') /* first in the set: an ordinary ']' */
			q++;
		while (*q && *q != ']') {
			if (q[0] == '[' && (q[1] == ':' || q[1] == '.' || q[1] == '=')) {
				char close = q[1]; /* [:class:], [.coll.], [=equiv=] */
				const char *c = q + 2;
				while (*c && !(c[0] == close && c[1] == ']'))
					c++;
				if (!*c)
					return "a \"[:\" class is not closed";
				q = c + 2;
			} else if (q[0] == '\\' && q[1]) {
				q += 2;
			} else {
				q++;
			}
		}
		if (!*q)
			return "a '[' is not closed by ']'";
		p = q;
	}
	return NULL;
}

#endif /* XP_GLOB_H */
