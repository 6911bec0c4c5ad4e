/* SPDX-License-Identifier: MIT */
/* Argument and return value specs from an object's DWARF, as uftrace's
 * `record -a` (--auto-args) makes them: for every function the object's
 * debug information describes and its symbol table names, uftrace's spec
 * text ("arg1,arg2/s,fparg1/64", "retval/e:color") and the enum types the
 * specs name, and the DIR/<object>.dbg file uftrace's replay, report and
 * tui read them from.  See trace_dwarf.c for the choices and the format. */
#ifndef XP_TRACE_DWARF_H
#define XP_TRACE_DWARF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Bounds on one object: far above real programs (memcached has a few
 * hundred functions, a large C++ library a few hundred thousand symbols).
 * Past one, reading fails with a message naming it. */
#define XP_DWARF_MAX_SYMS (1u << 22)    /* function symbols */
#define XP_DWARF_MAX_FUNCS (1u << 20)   /* functions with debug information */
#define XP_DWARF_MAX_ENUMS (1u << 16)   /* enum types the specs name */
#define XP_DWARF_MAX_ENUM_VALS 65536u   /* enumerators of one enum type */
#define XP_DWARF_MAX_SPEC 4096u         /* bytes of one function's spec */
#define XP_DWARF_MAX_FILE (4ull << 30)  /* bytes of the object's file */

struct xp_dwarf_func {
	const char *name;    /* the symbol's name, as the symbol table has it
			      * (C++: mangled, where uftrace's .dbg has its
			      * own demangling; its replay finds specs by
			      * address and shows the same) */
	uint64_t addr;       /* its address in the file (st_value, DW_AT_low_pc) */
	uint64_t offset;     /* addr less a non-PIE executable's load base:
			      * uftrace's symbol offset (.sym, .dbg "F:") */
	const char *argspec; /* "arg1,arg2/s,fparg1/64" (uftrace -A syntax
			      * without "NAME@"), or "" */
	const char *retspec; /* "retval", "retval/f64", or "" (void) */
	const char *file;    /* source file, relative to the main compile dir */
	long line;           /* its line */
};

struct xp_dwarf;

/* Reading flags. */
#define XP_DWARF_SEPARATE 1 /* without DWARF in the file, look for it in
			     * /usr/lib/debug (build-id, .gnu_debuglink);
			     * uftrace 0.13 does not */
#define XP_DWARF_RECORDABLE 2 /* only what xprobes' agent records (at most
			       * 8 items: integers, pointers, strings, enums,
			       * 32/64-bit floats, argN <= 16, fpargN <= 8, in
			       * the argument registers, the first 10 stack
			       * words or argN's own place): struct by value,
			       * std::string, long double left out, in the specs and the
			       * .dbg alike (so uftrace decodes what was
			       * recorded).  The specs keep a register
			       * location ("arg3%RDX", where the agent reads
			       * it); the .dbg leaves locations out (uftrace's
			       * replay takes register names only with an
			       * info cpuinfo section) */

/* The specs of path's functions (ELF, executable or shared library, PIE or
 * not): a handle, or NULL with err saying why ("no debug information" when
 * the object has none).  A corrupt or hostile file gives an error, never
 * a crash; memory is bounded by the limits above. */
struct xp_dwarf *xp_dwarf_open(const char *path, int flags, char *err, size_t errlen);
/* The same from an ELF image in memory (the fuzz harness). */
struct xp_dwarf *xp_dwarf_open_mem(const void *buf, size_t len, char *err, size_t errlen);
void xp_dwarf_close(struct xp_dwarf *d);

/* The functions, in address order, as the .dbg file lists them. */
size_t xp_dwarf_nfuncs(const struct xp_dwarf *d);
const struct xp_dwarf_func *xp_dwarf_func(const struct xp_dwarf *d, size_t i);
/* The enum types the specs name ("e:NAME"), in uftrace's text form and
 * .dbg order: "enum color {BLUE=-3,RED=0,GREEN=5}". */
size_t xp_dwarf_nenums(const struct xp_dwarf *d);
const char *xp_dwarf_enum(const struct xp_dwarf *d, size_t i);
/* The object's GNU build-id in hex, or "". */
const char *xp_dwarf_build_id(const struct xp_dwarf *d);

/* fn(arg, f) for every function of path (stops at fn's non-zero value,
 * returned): 0, or -1 with err. */
int xp_dwarf_specs(const char *path, int (*fn)(void *arg, const struct xp_dwarf_func *f),
		   void *arg, char *err, size_t errlen);

/* The .dbg text uftrace writes for the object: "# path name: PATH" (the
 * object's path as the process maps it), build-id, E:, then F:/L:/A:/R:
 * lines, to fp: 0, or -1 (write error). */
int xp_dwarf_print_dbg(const struct xp_dwarf *d, const char *path_name, FILE *fp);
/* The same into DIR/<basename of path_name>.dbg: 0, or -1 with err. */
int xp_dwarf_write_dbg(const struct xp_dwarf *d, const char *dir, const char *path_name,
		       char *err, size_t errlen);

#endif
