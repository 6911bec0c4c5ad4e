/* SPDX-License-Identifier: MIT */
/* xprobes/probe.h -- probe modules.
 *
 *   static void on_release(const struct conn *c) { ... }
 *   static void command(const char *args, int (*out)(const char *msg)) { ... }
 *   XPROBES_MODULE(command, 0,
 *       XPROBES_PROBE("*_conn_release", on_release, (const struct conn *)));
 *
 * Build with `cc -shared -fPIC probe.c -o probe.so`; load with
 * `xprobes PID load ./probe.so`.  A handler whose type differs from its
 * declared types does not compile.  At attach the declared types are
 * compared with each matching site's; a mismatch refuses that probe.
 */
#ifndef XPROBES_PROBE_H
#define XPROBES_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include <xprobes/site.h>

/* Module flags. */
#define XPROBES_MODULE_DISABLED 0x1u /* load attached but disabled */

/* out() appends one chunk of text to the command's reply; it returns 0, or
 * -1 once the reply is full (1 MiB), after which output is dropped. */
typedef int (*xprobes_out_fn)(const char *msg);
typedef void (*xprobes_command_fn)(const char *args, xprobes_out_fn out);

struct xprobes_probe_desc {
	const char *glob;    /* fnmatch(3) pattern on name or provider:name */
	void (*handler)(void);
	const char *types;   /* "(const struct conn *)" as written */
	const char *handler_name;
	unsigned type_check; /* compile-time check, see XPROBES_PROBE */
};

struct xprobes_module_desc {
	uint16_t abi;  /* XPROBES_MODULE_ABI */
	uint16_t size; /* sizeof(struct xprobes_module_desc) */
	uint32_t flags;
	xprobes_command_fn command;
	unsigned nprobes;
	const struct xprobes_probe_desc *probes;
};

/* The symbol the agent looks up in a loaded module. */
#define XPROBES_MODULE_SYMBOL "xprobes_module"

#ifdef __cplusplus
/* C++: the static_cast compiles only if fn has exactly the declared type. */
#define XPROBES_PROBE(glob, fn, types)                                        \
	{ glob, (void (*)(void))(fn), #types, #fn,                            \
	  sizeof(static_cast<__XP_FNPTR(types)>(fn)) }
#define __XP_MODULE_LINKAGE extern "C"
#else
#define XPROBES_PROBE(glob, fn, types)                                        \
	{ glob, (void (*)(void))(fn), #types, #fn,                            \
	  __XP_PROBE_CHECK(__builtin_types_compatible_p(__typeof__(fn) *,      \
							__XP_FNPTR(types)),   \
			   "XPROBES_PROBE: handler " #fn                      \
			   " does not have type void " #fn #types) }
/* 1, or a compile error.  __extension__: _Static_assert before C11.  Where
 * it is a macro (glibc, strict pre-C11 modes: see __XP_STATIC_ASSERT in
 * site.h), an array whose size is negative when the types differ. */
#ifdef _Static_assert
#define __XP_PROBE_CHECK(cond, msg)                                           \
	sizeof(struct {                                                       \
		char __xprobes_probe_handler_type_differs_from_its_types      \
			[(cond) ? 1 : -1];                                    \
	})
#else
#define __XP_PROBE_CHECK(cond, msg)                                           \
	__extension__ sizeof(struct { _Static_assert(cond, msg); char c; })
#endif
#define __XP_MODULE_LINKAGE
#endif

#define XPROBES_MODULE(command_fn, module_flags, ...)                         \
	static const struct xprobes_probe_desc __xp_module_probes[] = {        \
		__VA_ARGS__ };                                                \
	__XP_MODULE_LINKAGE __attribute__((visibility("default"), used))      \
	const struct xprobes_module_desc xprobes_module = {                   \
		XPROBES_MODULE_ABI, sizeof(struct xprobes_module_desc),      \
		(module_flags), (command_fn),                                 \
		sizeof(__xp_module_probes) / sizeof(__xp_module_probes[0]),   \
		__xp_module_probes }

/* ---- Request-scoped recording ------------------------------------------
 *
 * While the function-graph tracer runs with `trace start --requests`, a
 * thread records its calls only between xprobes_trace_request_begin()
 * and xprobes_trace_request_end(), called on that thread (typically from
 * the handlers of a request's start and end sites); the end keeps what
 * was recorded (keep non-zero: it reaches the reader as one call named
 * label, at most XPROBES_TRACE_LABEL_MAX bytes, e.g. "get foo 5.1ms") or
 * drops it.  Cheap when the tracer is off or runs without --requests:
 * then begin returns -1 and end 0.
 *
 *   begin: 0, or -1 (not recording: no tracer, no room: counted lost).
 *   end: 1 if the request was kept, else 0.  A begin while a request is
 *   open drops the open one; so does a stop, start or clear of the
 *   tracer, or a module unloaded, before the end.
 *
 * The agent writes xprobes_trace_api when it loads the module (a weak
 * definition here, so that every file of a module may include this). */
#define XPROBES_TRACE_API_ABI 1
#define XPROBES_TRACE_API_SYMBOL "xprobes_trace_api"
#define XPROBES_TRACE_LABEL_MAX 49

struct xprobes_trace_api {
	uint16_t abi;  /* XPROBES_TRACE_API_ABI */
	uint16_t size; /* sizeof(struct xprobes_trace_api) */
	int (*request_begin)(void);
	int (*request_end)(int keep, const char *label);
};

#ifdef __cplusplus
extern "C" {
#endif
__attribute__((weak, visibility("default"))) const struct xprobes_trace_api *xprobes_trace_api;
#ifdef __cplusplus
}
#endif

static inline int xprobes_trace_request_begin(void)
{
	const struct xprobes_trace_api *a = xprobes_trace_api;
	return a && a->abi == XPROBES_TRACE_API_ABI ? a->request_begin() : -1;
}

static inline int xprobes_trace_request_end(int keep, const char *label)
{
	const struct xprobes_trace_api *a = xprobes_trace_api;
	return a && a->abi == XPROBES_TRACE_API_ABI ? a->request_end(keep, label) : 0;
}

#endif /* XPROBES_PROBE_H */
