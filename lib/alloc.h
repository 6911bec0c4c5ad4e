/* The agent's allocations and fallible system calls, with fault injection.
 *
 * Every allocation the agent makes goes through these, and every system
 * call whose failure it handles asks xp_fault() first, so a test can make
 * the Nth of them fail (SQLite's way) and check that the operation left
 * the process as it was.  Off (the default), a fault point costs one
 * predictable branch on a cold path; sites never come here.
 */
#ifndef XP_ALLOC_H
#define XP_ALLOC_H

#include <stddef.h>

/* -1: off.  Otherwise the number of fault points still to pass; the one
 * that finds it at 0 fails (and it goes back to -1). */
extern long xp_fault_countdown;
/* How many fault points were passed since the counter was last reset. */
extern unsigned long xp_fault_points;

int xp_fault_hit(void);

/* 1 when this fault point must fail (errno is set to ENOMEM/EIO by the
 * caller as fits). */
static inline int xp_fault(void)
{
	return xp_fault_hit();
}

void *xp_malloc(size_t n);
void *xp_calloc(size_t n, size_t size);
void *xp_realloc(void *p, size_t n);
char *xp_strdup(const char *s);
char *xp_strndup(const char *s, size_t n);

#endif
