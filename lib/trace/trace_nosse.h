/* SPDX-License-Identifier: MIT */
/* Code that runs between a traced function's instructions (the hooks'
 * C side) must leave the vector and x87 registers as it found them: they
 * may hold the function's floating-point arguments or return value, and
 * the hooks do not save them on entry.  Between XP_TRACE_NOSSE_BEGIN and
 * XP_TRACE_NOSSE_END the compiler uses general registers only (gcc's
 * pragma is -mgeneral-regs-only; clang 14 ignores that pragma, but
 * honours the attribute).  Such code must not call libc functions that
 * may use them either (memcpy, memset, strlen...): only system calls. */
#ifndef XP_TRACE_NOSSE_H
#define XP_TRACE_NOSSE_H

#ifdef __clang__
#define XP_TRACE_NOSSE_BEGIN \
	_Pragma("clang attribute push(__attribute__((target(\"no-sse,no-mmx\"))), apply_to = function)")
#define XP_TRACE_NOSSE_END _Pragma("clang attribute pop")
#else
#define XP_TRACE_NOSSE_BEGIN _Pragma("GCC push_options") _Pragma("GCC target(\"general-regs-only\")")
#define XP_TRACE_NOSSE_END _Pragma("GCC pop_options")
#endif

#endif
