/* SPDX-License-Identifier: MIT */
/* Per-thread state in a probe module without TLS or locks: a fixed array
 * of owner words, one per slot, each claimed by one thread on its first
 * hit (compare-and-swap from 0 to its thread_self()) and found again by
 * loads of owner words that never change afterwards, so they stay shared
 * in every core's cache.  A thread id reused after its thread exited
 * takes over that slot, which keeps one writer per slot.
 *
 * (Module-local _Thread_local would cost a __tls_get_addr call per hit in
 * a dlopen()ed module, and its storage outlives a dlclose() badly.) */
#ifndef XP_THREAD_SLOT_H
#define XP_THREAD_SLOT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

/* The calling thread's identity, unique among live threads.  On x86-64
 * the thread pointer, which the ABI keeps at %fs:0 and which glibc's and
 * musl's pthread_self() return: one load, where pthread_self() is a call
 * through the module's PLT and GOT into a page of libc, three more pages
 * a handler touches (docs/design.md, "Pages a request touches"). */
static inline uintptr_t thread_self(void)
{
#if defined(__x86_64__)
	uintptr_t tp;
	__asm__("mov %%fs:0, %0" : "=r"(tp));
	return tp;
#else
	return (uintptr_t)pthread_self();
#endif
}

/* The slot thread SELF tries first: most threads own it. */
static inline unsigned thread_slot_home(uintptr_t self, unsigned n)
{
	return (unsigned)((self >> 12) ^ (self >> 21)) % n;
}

/* The calling thread's slot among owners[0..n), or -1 when all n are
 * taken by other threads.  *claimed (if not NULL) is set to 1 when this
 * call took it, for state the new owner must set up. */
static inline int thread_slot(atomic_uintptr_t *owners, unsigned n, int *claimed)
{
	uintptr_t self = thread_self();
	unsigned start = thread_slot_home(self, n);
	if (claimed)
		*claimed = 0;
	for (unsigned k = 0; k < n; k++) {
		unsigned i = (start + k) % n;
		uintptr_t owner = atomic_load_explicit(&owners[i], memory_order_acquire);
		if (owner == 0 && atomic_compare_exchange_strong(&owners[i], &owner, self)) {
			if (claimed)
				*claimed = 1;
			return (int)i;
		}
		if (owner == self)
			return (int)i;
	}
	return -1;
}

#endif
