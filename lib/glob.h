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
#include <string.h>

/* Is NAME (LEN bytes) a POSIX character class?  fnmatch would take an
 * unknown one ("[[:alpah:]]") as a set that matches nothing. */
static inline int xp_glob_class(const char *name, size_t len)
{
	static const char *const classes[] = { "alnum", "alpha", "blank", "cntrl",
					       "digit", "graph", "lower", "print",
					       "punct", "space", "upper", "xdigit" };
	for (size_t i = 0; i < sizeof(classes) / sizeof(classes[0]); i++)
		if (strlen(classes[i]) == len && memcmp(classes[i], name, len) == 0)
			return 1;
	return 0;
}

/* The ']' closing the bracket set opened by the '[' at P, or NULL when
 * none closes it (fnmatch then takes that '[' as an ordinary character).
 * Inside a set, [:class:], [.coll.] and [=equiv=] are read whole, a class
 * name as the letters glibc reads; *BAD_CLASS is set when one names no
 * POSIX class. */
static inline const char *xp_glob_set_end(const char *p, int *bad_class)
{
	const char *q = p + 1;
	if (*q == '!' || *q == '^')
		q++;
	if (*q == ']') /* first in the set: an ordinary ']' */
		q++;
	while (*q && *q != ']') {
		if (q[0] == '[' && (q[1] == ':' || q[1] == '.' || q[1] == '=')) {
			char close = q[1];
			const char *c = q + 2;
			if (close == ':')
				while ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z'))
					c++;
			else
				while (*c && !(c[0] == close && c[1] == ']'))
					c++;
			if (!(c[0] == close && c[1] == ']')) {
				q++; /* not closed: an ordinary '[' */
				continue;
			}
			if (close == ':' && !xp_glob_class(q + 2, (size_t)(c - q - 2)))
				*bad_class = 1;
			q = c + 2;
		} else if (q[0] == '\\' && q[1]) {
			q += 2;
		} else {
			q++;
		}
	}
	return *q ? q : NULL;
}

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
		int bad_class = 0;
		const char *end = xp_glob_set_end(p, &bad_class);
		if (!end)
			return "a '[' is not closed by ']'";
		if (bad_class)
			return "a \"[:name:]\" class is not one of alnum, alpha, blank, "
			       "cntrl, digit, graph, lower, print, punct, space, upper, xdigit";
		p = end;
	}
	return NULL;
}

/* The first ':' of PAT outside a bracket set ("obj:site" patterns: a
 * class such as [[:alpha:]] is not a separator), or NULL. */
static inline char *xp_glob_colon(char *pat)
{
	for (char *p = pat; *p; p++) {
		int bad_class = 0;
		const char *end;
		if (*p == '\\' && p[1])
			p++;
		else if (*p == '[' && (end = xp_glob_set_end(p, &bad_class)))
			p = pat + (end - pat); /* past the set; an unclosed '[' is ordinary */
		else if (*p == ':')
			return p;
	}
	return NULL;
}

#endif /* XP_GLOB_H */
