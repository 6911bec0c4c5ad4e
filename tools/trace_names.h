/* Names for a trace's addresses, resolved only when printing: functions by
 * the symbol tables (libelf) of the target's objects, probe sites by their
 * struct xprobes_site records read from the target's memory. */
#ifndef XP_TRACE_NAMES_H
#define XP_TRACE_NAMES_H

#include <stdint.h>
#include <sys/types.h>

struct trace_names;

struct trace_names *trace_names_new(pid_t pid);
void trace_names_free(struct trace_names *n);

/* An instrumented object as `trace objects` lists it: a function at
 * runtime address a is the symbol whose value + base == a.  -1 (and
 * ignored) for a path the process has not mapped. */
int trace_names_add_object(struct trace_names *n, uint64_t base, const char *path);

/* Whether a file was refused (see trace_names.c's open_mapped): it was
 * reported, its addresses named as numbers, and the command fails. */
int trace_names_refused(const struct trace_names *n);

/* Callbacks for struct tf_names (ctx: the struct trace_names).  A function
 * outside the listed objects is named through /proc/PID/maps; failing all,
 * 0xADDR.  The strings live as long as n and hold printable ASCII only (a
 * crafted symbol cannot drive the terminal). */
const char *trace_names_func(void *ctx, uint64_t addr);
const char *trace_names_site(void *ctx, uint64_t addr);

#endif
