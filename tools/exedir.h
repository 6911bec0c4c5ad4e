/* Where the running tool lives, to find what was installed beside it. */
#ifndef XP_EXEDIR_H
#define XP_EXEDIR_H

#include <stddef.h>

/* The directory of /proc/self/exe into out; 0, or -1 if it cannot tell. */
int exe_dir(char *out, size_t outsz);

/* The first of the paths that exists, each a format with one %s for that
 * directory ("%s/../lib/libxprobes.so.0"), as a malloc'd real path; NULL
 * if none does. */
char *exe_dir_find(const char *const *formats, size_t n);

#endif
