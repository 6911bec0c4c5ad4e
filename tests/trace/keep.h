/* SPDX-License-Identifier: MIT */
/* For traced test programs: keep a function whole, called and named as
 * written (no inlining, no clones, no interprocedural shortcuts), so that
 * a trace of it is exactly the call tree of its source. */
#ifndef XP_TESTS_TRACE_KEEP_H
#define XP_TESTS_TRACE_KEEP_H

#ifdef __clang__
#define KEEP __attribute__((noinline, optnone))
#else
#define KEEP __attribute__((noipa))
#endif

#endif
