/* SPDX-License-Identifier: MIT */
/* xprobes/trace.h -- for programs built for the function-graph tracer
 * (`pkg-config --cflags --libs xprobes-trace`, see xprobes(1) TRACE).
 *
 *   XPROBES_NOTRACE static void hot_helper(void) { ... }
 *
 * marks a function that must never be traced: it gets no patch site at
 * all, so it costs nothing and `trace start` cannot patch it.  Use it for
 * code that runs where tracing cannot (signal handlers that must stay
 * async-signal-safe with no extra stack, code called before the
 * constructors, functions whose return address the program inspects).
 *
 * patchable_function_entry(0, 0) removes the site; no_instrument_function
 * also keeps -pg/-finstrument-functions builds from instrumenting it.
 * gcc (8+) and clang (10+) both know the two attributes, in C and C++.
 */
#ifndef XPROBES_TRACE_H
#define XPROBES_TRACE_H

#if defined(__has_attribute)
#if __has_attribute(patchable_function_entry)
#define XPROBES_NOTRACE __attribute__((no_instrument_function, patchable_function_entry(0, 0)))
#endif
#endif
#ifndef XPROBES_NOTRACE
#define XPROBES_NOTRACE __attribute__((no_instrument_function))
#endif

#endif /* XPROBES_TRACE_H */
