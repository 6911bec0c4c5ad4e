/* Type-list canonicalisation: "( const struct conn * )" and
 * "(const struct conn*)" are the same signature. */
#ifndef XP_SIGNATURE_H
#define XP_SIGNATURE_H

#include <stddef.h>

/* Writes the canonical form of a parenthesised type list, without the outer
 * parentheses ("const struct conn*"; "" for "()" and "(void)").  Returns
 * 0, or -1 if out is too small (out is then truncated). */
int sig_canonical(const char *types, char *out, size_t outsz);

/* The canonical form in a malloc'd string of the length it needs, or NULL
 * when out of memory. */
char *sig_canonical_dup(const char *types);

/* 1 when two parenthesised type lists are the same signature. */
int sig_equal(const char *a, const char *b);

#endif
