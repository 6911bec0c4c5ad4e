/* SPDX-License-Identifier: MIT */
/* The agent's leaf below everything: libc's own dlopen(), and keeping a
 * loaded object mapped while the agent writes into it.  Calls nothing of
 * the agent's. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stddef.h>

#include "base.h"

void *(*xp_libc_dlopen(void))(const char *, int)
{
	static void *(*real)(const char *, int);
	void *(*fn)(const char *, int) = __atomic_load_n(&real, __ATOMIC_RELAXED);

	if (!fn) {
		/* The next definition after the agent's: libc's (libdl's before
		 * 2.34).  Racing threads find the same one. */
		*(void **)&fn = dlsym(RTLD_NEXT, "dlopen");
		__atomic_store_n(&real, fn, __ATOMIC_RELAXED);
	}
	return fn;
}

void *xp_real_dlopen(const char *file, int mode)
{
	void *(*fn)(const char *, int) = xp_libc_dlopen();
	return fn ? fn(file, mode) : NULL; /* no libc dlopen: cannot happen */
}

/* The main program cannot be unloaded: pinning it is a no-op. */
static int main_program_token;

void *xp_dl_pin(const char *dlname, uintptr_t base)
{
	if (!*dlname)
		return &main_program_token;
	void *h = xp_real_dlopen(dlname, RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		return NULL;
	struct link_map *lm = NULL;
	if (dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || !lm || lm->l_addr != base) {
		dlclose(h);
		return NULL; /* same name, another mapping: ours is gone */
	}
	return h;
}

void xp_dl_unpin(void *token)
{
	if (token && token != &main_program_token)
		dlclose(token);
}

