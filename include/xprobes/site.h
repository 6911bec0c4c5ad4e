/* SPDX-License-Identifier: MIT */
/* xprobes/site.h -- static probe sites.
 *
 *   XPROBES_SITE(name, (types), (args));
 *   XPROBES_SITE_P(provider, name, (types), (args));
 *   if (XPROBES_SITE_ENABLED(name)) { ...expensive preparation... }
 *
 * Header-only, like <sys/sdt.h>: a binary with sites needs nothing from
 * libxprobes to run.  A detached site is one relaxed 32-bit load, a test and
 * a not-taken branch; its arguments are not evaluated.
 *
 * Each site leaves three things in the object file:
 *   - a record (struct xprobes_site) naming it, its provider and its types,
 *     and holding the handler list the agent publishes;
 *   - an allocated, retained ELF note in .note.xprobes that points at the
 *     record, so the agent finds every site of every loaded object through
 *     dl_iterate_phdr's PT_NOTE segments, without reading files;
 *   - a standard SystemTap SDT probe (1-byte nop + .note.stapsdt) whose
 *     semaphore is the low half of the site's gate, so bpftrace, bcc, perf
 *     and gdb see the same site and arm it through the kernel's ref_ctr.
 *
 * The gate is per (provider, name) and per object, so all sites with one
 * name share it, as DTrace semaphores do.  Its low 16 bits are the SDT
 * semaphore (the kernel's), its high 16 bits count XProbes attachments.
 */
#ifndef XPROBES_SITE_H
#define XPROBES_SITE_H

#include <stdint.h>

#include "version.h" /* beside this file: generated dtrace headers include site.h by path */

#define XPROBES_MAX_ARGS 12

#ifdef __cplusplus
/* C++ has no anonymous structs, and sites only read the whole word. */
struct xprobes_gate {
	uint32_t word;
};
#else
/* __extension__: anonymous members are C11 (and GNU C); the prefix keeps
 * -std=c99/gnu99 -pedantic quiet about them, here and in every definition
 * of a gate (xprobes-dtrace -G). */
__extension__ struct xprobes_gate {
	union {
		struct {
			unsigned short sdt_semaphore; /* bumped by the kernel */
			unsigned short attached;      /* bumped by the agent */
		};
		uint32_t word; /* what a site tests */
	};
};
#endif

struct xprobes_site;

/* One handler of an attached site, in load order. */
struct xprobes_handler {
	void (*fn)(void); /* cast back to void (*)(types) by the site */
	const void *owner; /* the agent's attachment, for bookkeeping */
};

struct xprobes_handler_list;

/* Read-side state of one thread, one per object with sites (thread-local,
 * initial-exec: one %fs-relative access).  `gp` is written by the agent
 * only: 0 until it knows the reader, then the number (odd) of the latest
 * grace period.  `seq` is 0 outside a site's handlers; entering copies `gp`
 * into it and leaving stores 0 again.  The thread never stores a value it
 * loaded from `seq`, so consecutive hits do not form a chain through memory
 * (store-to-load forwarding), and a grace period numbered G knows a reader
 * showing G entered after it began.  It waits for every reader showing
 * another non-zero value to change (see lib/quiesce.c). */
struct xprobes_reader {
	unsigned long seq;
	unsigned long gp;
};

/* What the agent lends to attached sites. */
struct xprobes_runtime {
	/* First attached hit of a thread in an object: make the reader known
	 * to the agent (one compare-and-swap, no lock). */
	void (*register_reader)(struct xprobes_reader *reader, struct xprobes_site *site);
};

/* Immutable once published; the agent publishes NULL rather than an
 * empty list, so a site may call handlers[0] without testing count.
 * (__extension__: a flexible array member is C99, for -std=gnu89 -pedantic.) */
__extension__ struct xprobes_handler_list {
	unsigned count;
#ifdef __cplusplus /* no flexible array members in C++: same layout */
	struct xprobes_handler first; /* and count - 1 more */
#define __XP_HANDLERS(l) (&(l)->first)
#else
	struct xprobes_handler handlers[];
#define __XP_HANDLERS(l) ((l)->handlers)
#endif
};

struct xprobes_site {
	uint16_t abi;         /* XPROBES_SITE_ABI */
	uint16_t size;        /* sizeof(struct xprobes_site) */
	uint16_t nargs;
	uint16_t flags;
	const char *provider; /* "" for XPROBES_SITE */
	const char *name;
	const char *types;    /* the parenthesised type list, as written */
	struct xprobes_gate *gate;
	/* Written only by the agent. */
	const struct xprobes_runtime *runtime;
	struct xprobes_handler_list *handlers;
};

/* One reader per thread and per object: weak and hidden, so every
 * translation unit may define it and the link keeps one per object. */
__attribute__((weak, visibility("hidden"), tls_model("initial-exec")))
__thread struct xprobes_reader __xprobes_reader;

/* ---- C and C++ (internal) --------------------------------------------- */

/* The header serves C from -std=gnu89 on (gnu89, gnu99, c99, c11, gnu11;
 * also with -pedantic from C99 on: variadic macros are C99) and C++11
 * (g++, clang++): sites in C++ code, and the headers xprobes-dtrace
 * generates for C++ projects.  What is newer than the language mode
 * (_Static_assert, _Generic, anonymous members) carries __extension__,
 * which gcc and clang accept in every C mode and which silences -pedantic
 * for the construct it prefixes; every block declares before it states
 * (-Wdeclaration-after-statement), and no for loop declares.
 *
 * __XP_STATIC_ASSERT(cond, tag, message);  tag names the failure where
 * _Static_assert is unusable: glibc's <sys/cdefs.h> (through <stdint.h>)
 * turns it into a macro in strict pre-C11 modes (-std=c99), expanding to
 * an extern declaration that drops the message and fits in no struct.
 * There the check is a typedef of an array whose size is negative when
 * cond is false, named by tag ("size of array '__xprobes_...' is
 * negative"). */
#ifdef __cplusplus
#define __XP_STATIC_ASSERT(cond, tag, msg) static_assert(cond, msg)
#elif defined(_Static_assert)
#define __XP_STATIC_ASSERT(cond, tag, msg)                                    \
	typedef char tag[(cond) ? 1 : -1] __attribute__((unused))
#else
#define __XP_STATIC_ASSERT(cond, tag, msg) __extension__ _Static_assert(cond, msg)
#endif

/* The gate: in C a block-scope extern declaration and a relaxed atomic
 * load.  In C++ a block-scope extern inside a namespace names a namespace
 * member (a mangled symbol), and g++ ignores asm labels on such
 * declarations in templates, so the site names the plain symbol in asm
 * instead: the load is one volatile asm mov, the same instruction. */
#ifdef __cplusplus
#define __XP_DECLARE_GATE(gatevar)
#define __XP_GATE_LOAD(gatevar)                                               \
	__extension__({                                                       \
		uint32_t __xp_w;                                              \
		__asm__ __volatile__(".hidden " __XP_STR(gatevar) "\n"        \
				     "movl " __XP_STR(gatevar) "(%%rip), %0"  \
				     : "=r"(__xp_w));                          \
		__xp_w;                                                       \
	})
#define __XP_GATE_REF(gatevar) __XP_STR(gatevar)
#define __XP_GATE_IN(gatevar) [__xp_none] "i"(0) /* the operands that follow start with a comma */
#else
/* Every site re-declares its gate at block scope; with several sites of
 * one name in a file, -Wredundant-decls (memcached builds with it and
 * -Werror) would object to a declaration that is there on purpose. */
#define __XP_DECLARE_GATE(gatevar)                                            \
	_Pragma("GCC diagnostic push")                                        \
	_Pragma("GCC diagnostic ignored \"-Wredundant-decls\"")               \
	extern struct xprobes_gate gatevar __attribute__((visibility("hidden"))); \
	_Pragma("GCC diagnostic pop")
#define __XP_GATE_LOAD(gatevar) __atomic_load_n(&gatevar.word, __ATOMIC_RELAXED)
#define __XP_GATE_REF(gatevar) "%c[__xp_gate]"
#define __XP_GATE_IN(gatevar) [__xp_gate] "i"(&gatevar)
#endif

/* Where the site's record lives.  In C it is a static local: internal
 * linkage, so the note can refer to it with an "i" operand.  In C++ a
 * static local of an inline function or template is a vague-linkage
 * global, which PIC code (shared libraries, LTO) cannot name in an "i"
 * operand; there the site's asm emits the record itself, in a writable
 * section of the function's COMDAT group (so one copy survives with the
 * code it describes), and hands its address back with a lea that runs only
 * when the gate is open. */
#ifdef __cplusplus
#define __XP_REC_DECL(gatevar, prov, name, types) struct xprobes_site *__xp_recp;
#define __XP_REC (__xp_recp)
#define __XP_REC_REF "995f"
#define __XP_REC_OUT [__xp_recp] "=r"(__xp_recp)
#define __XP_REC_IN
#define __XP_REC_ASM(gatevar, prov, name, types)                              \
	"lea 995f(%%rip), %[__xp_recp]\n"                                     \
	".pushsection .data.rel.xprobes,\"awR?\",@progbits\n"                \
	".balign 8\n"                                                        \
	"995: .2byte " __XP_STR(XPROBES_SITE_ABI) ", 56\n" /* abi, size */     \
	".2byte " __XP_STR(__XP_NARGS(types)) ", 0\n"                         \
	".8byte 996f, 997f, 998f, " __XP_STR(gatevar) ", 0, 0\n"               \
	"996: .asciz \"" prov "\"\n"                                         \
	"997: .asciz \"" name "\"\n"                                         \
	"998: .asciz \"" #types "\"\n"                                       \
	".popsection\n"
#else
#define __XP_REC_DECL(gatevar, prov, name, types)                             \
	static struct xprobes_site __xp_rec __attribute__((used)) = {         \
		XPROBES_SITE_ABI, sizeof(struct xprobes_site),               \
		__XP_NARGS(types), 0, prov, name,                            \
		#types, &gatevar, 0, 0 };
#define __XP_REC (&__xp_rec)
#define __XP_REC_REF "%c[__xp_rec]"
#define __XP_REC_OUT
#define __XP_REC_IN , [__xp_rec] "i"(&__xp_rec)
#define __XP_REC_ASM(gatevar, prov, name, types) ""
#endif

/* ---- argument-list plumbing (internal) -------------------------------- */

#define __XP_UNPAREN(...) __VA_ARGS__
#define __XP_CAT(a, b) __XP_CAT_(a, b)
#define __XP_CAT_(a, b) a##b
#define __XP_STR(x) __XP_STR_(x)
#define __XP_STR_(x) #x

/* Number of elements of a parenthesised list; () counts 0.  Standard C99
 * and C++11 preprocessing only (no ", ##__VA_ARGS__", which keeps its comma
 * in strict modes and which clang -pedantic reports): an empty list is told
 * apart by whether `__XP_EMPTY_MARK <first element> ()` becomes a comma. */
#define __XP_NARGS(list) __XP_CAT(__XP_NARGS_IF_EMPTY_, __XP_IS_EMPTY(list))(list)
#define __XP_NARGS_IF_EMPTY_1(list) 0
#define __XP_NARGS_IF_EMPTY_0(list) __XP_COUNT_I(__XP_UNPAREN list)
#define __XP_COUNT_I(...) __XP_NARGS_N(_, __VA_ARGS__, 16, 15, 14, 13, 12, 11, 10, \
				       9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
/* Counts to 16 so that 13..16 arguments reach the "more than 12" assert. */
#define __XP_NARGS_N(_, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, \
		     a13, a14, a15, a16, n, ...) n
#define __XP_IS_EMPTY(list)                                                   \
	__XP_CAT(__XP_IS_EMPTY_,                                              \
		 __XP_CAT(__XP_HAS_COMMA(__XP_EXPAND(__XP_EMPTY_MARK __XP_FIRST(list) ())), \
			  __XP_HAS_COMMA(__XP_EXPAND(__XP_EMPTY_MARK __XP_FIRST(list)))))
/* An element starting with a parenthesis, ((long)i * 3), also makes the
 * mark a comma, but without the () as well: empty is "10" only. */
#define __XP_IS_EMPTY_10 1
#define __XP_IS_EMPTY_00 0
#define __XP_IS_EMPTY_01 0
#define __XP_IS_EMPTY_11 0
#define __XP_EMPTY_MARK(...) ,
#define __XP_EXPAND(x) x
#define __XP_FIRST(list) __XP_FIRST_I(__XP_UNPAREN list, ~)
#define __XP_FIRST_I(...) __XP_FIRST_(__VA_ARGS__)
#define __XP_FIRST_(a, ...) a
#define __XP_HAS_COMMA(...) __XP_HAS_COMMA_(__VA_ARGS__, 1, 0, ~)
#define __XP_HAS_COMMA_(a, b, n, ...) n

/* Element i (1-based) of a parenthesised list. */
#define __XP_AT(i, list) __XP_AT_(i, __XP_UNPAREN list, ~, ~, ~, ~, ~, ~, ~, ~, ~, ~, ~, ~)
#define __XP_AT_(i, ...) __XP_CAT(__XP_AT_, i)(__VA_ARGS__)
#define __XP_AT_1(a, ...) a
#define __XP_AT_2(a, b, ...) b
#define __XP_AT_3(a, b, c, ...) c
#define __XP_AT_4(a, b, c, d, ...) d
#define __XP_AT_5(a, b, c, d, e, ...) e
#define __XP_AT_6(a, b, c, d, e, f, ...) f
#define __XP_AT_7(a, b, c, d, e, f, g, ...) g
#define __XP_AT_8(a, b, c, d, e, f, g, h, ...) h
#define __XP_AT_9(a, b, c, d, e, f, g, h, i, ...) i
#define __XP_AT_10(a, b, c, d, e, f, g, h, i, j, ...) j
#define __XP_AT_11(a, b, c, d, e, f, g, h, i, j, k, ...) k
#define __XP_AT_12(a, b, c, d, e, f, g, h, i, j, k, l, ...) l

/* The handler pointer type of a type list: void (*)(void) for (). */
#define __XP_FNPTR(types) __XP_CAT(__XP_FNPTR_, __XP_NONZERO(__XP_NARGS(types)))(types)
#define __XP_FNPTR_0(types) void (*)(void)
#define __XP_FNPTR_1(types) void (*) types
#define __XP_NONZERO(n) __XP_CAT(__XP_NZ_, n)
#define __XP_NZ_0 0
#define __XP_NZ_1 1
#define __XP_NZ_2 1
#define __XP_NZ_3 1
#define __XP_NZ_4 1
#define __XP_NZ_5 1
#define __XP_NZ_6 1
#define __XP_NZ_7 1
#define __XP_NZ_8 1
#define __XP_NZ_9 1
#define __XP_NZ_10 1
#define __XP_NZ_11 1
#define __XP_NZ_12 1
#define __XP_NZ_13 1
#define __XP_NZ_14 1
#define __XP_NZ_15 1
#define __XP_NZ_16 1

/* Apply M(i, types, args) for i = 1..n. */
#define __XP_EACH(n, M, t, a) __XP_CAT(__XP_EACH_, n)(M, t, a)
#define __XP_EACH_0(M, t, a)
#define __XP_EACH_1(M, t, a) M(1, t, a)
#define __XP_EACH_2(M, t, a) __XP_EACH_1(M, t, a) M(2, t, a)
#define __XP_EACH_3(M, t, a) __XP_EACH_2(M, t, a) M(3, t, a)
#define __XP_EACH_4(M, t, a) __XP_EACH_3(M, t, a) M(4, t, a)
#define __XP_EACH_5(M, t, a) __XP_EACH_4(M, t, a) M(5, t, a)
#define __XP_EACH_6(M, t, a) __XP_EACH_5(M, t, a) M(6, t, a)
#define __XP_EACH_7(M, t, a) __XP_EACH_6(M, t, a) M(7, t, a)
#define __XP_EACH_8(M, t, a) __XP_EACH_7(M, t, a) M(8, t, a)
#define __XP_EACH_9(M, t, a) __XP_EACH_8(M, t, a) M(9, t, a)
#define __XP_EACH_10(M, t, a) __XP_EACH_9(M, t, a) M(10, t, a)
#define __XP_EACH_11(M, t, a) __XP_EACH_10(M, t, a) M(11, t, a)
#define __XP_EACH_12(M, t, a) __XP_EACH_11(M, t, a) M(12, t, a)

/* The local copies: each argument is evaluated once, converted to its
 * declared type, and only inside the taken branch. */
#define __XP_LOCAL(i, t, a)                                                   \
	__typeof__(__XP_AT(i, t)) __xp_a##i = (__XP_AT(i, a));               \
	__XP_LOCAL_CHECK(i)
#define __XP_LOCAL_CHECK(i)                                                   \
	__XP_STATIC_ASSERT(sizeof(__xp_a##i) <= 8,                            \
		       __xprobes_site_argument_##i##_is_wider_than_8_bytes,    \
		       "xprobes site argument " #i " is wider than 8 bytes: "  \
		       "pass a pointer (SDT specs and registers hold 8)");

/* Sites from xprobes-dtrace headers convert the same way in C.  In C++
 * they cast: the systemtap stub they replace took any argument, and C++
 * projects routinely pass a const char * where the .d file says char *,
 * which C++ refuses to convert implicitly.  A cast still refuses a struct,
 * and a pointer where an int is declared. */
#ifdef __cplusplus
#define __XP_LOCAL_DTRACE(i, t, a)                                            \
	__typeof__(__XP_AT(i, t)) __xp_a##i =                                 \
		(__typeof__(__XP_AT(i, t)))(__XP_AT(i, a));                   \
	__XP_LOCAL_CHECK(i)
#else
#define __XP_LOCAL_DTRACE __XP_LOCAL
#endif

/* Call arguments: __xp_a1, __xp_a2, ... */
#define __XP_CALL_0
#define __XP_CALL_1 __xp_a1
#define __XP_CALL_2 __XP_CALL_1, __xp_a2
#define __XP_CALL_3 __XP_CALL_2, __xp_a3
#define __XP_CALL_4 __XP_CALL_3, __xp_a4
#define __XP_CALL_5 __XP_CALL_4, __xp_a5
#define __XP_CALL_6 __XP_CALL_5, __xp_a6
#define __XP_CALL_7 __XP_CALL_6, __xp_a7
#define __XP_CALL_8 __XP_CALL_7, __xp_a8
#define __XP_CALL_9 __XP_CALL_8, __xp_a9
#define __XP_CALL_10 __XP_CALL_9, __xp_a10
#define __XP_CALL_11 __XP_CALL_10, __xp_a11
#define __XP_CALL_12 __XP_CALL_11, __xp_a12

/* Volatile copies for the several-handler path: __xp_s1, __xp_s2, ... */
#define __XP_SAVE(i, t, a) __typeof__(__xp_a##i) volatile __xp_s##i = __xp_a##i;
#define __XP_SAVED_0
#define __XP_SAVED_1 __xp_s1
#define __XP_SAVED_2 __XP_SAVED_1, __xp_s2
#define __XP_SAVED_3 __XP_SAVED_2, __xp_s3
#define __XP_SAVED_4 __XP_SAVED_3, __xp_s4
#define __XP_SAVED_5 __XP_SAVED_4, __xp_s5
#define __XP_SAVED_6 __XP_SAVED_5, __xp_s6
#define __XP_SAVED_7 __XP_SAVED_6, __xp_s7
#define __XP_SAVED_8 __XP_SAVED_7, __xp_s8
#define __XP_SAVED_9 __XP_SAVED_8, __xp_s9
#define __XP_SAVED_10 __XP_SAVED_9, __xp_s10
#define __XP_SAVED_11 __XP_SAVED_10, __xp_s11
#define __XP_SAVED_12 __XP_SAVED_11, __xp_s12

/* ---- SystemTap SDT note (format: see docs/design.md) ------------------- */

/* SDT argument size: negative for signed integers. */
#ifdef __cplusplus
extern "C++" {
template <typename T> struct __xp_sdt_signed { static const bool value = false; };
template <typename T> struct __xp_sdt_signed<const T> : __xp_sdt_signed<T> {};
template <typename T> struct __xp_sdt_signed<volatile T> : __xp_sdt_signed<T> {};
template <typename T> struct __xp_sdt_signed<const volatile T> : __xp_sdt_signed<T> {};
template <> struct __xp_sdt_signed<signed char> { static const bool value = true; };
template <> struct __xp_sdt_signed<short> { static const bool value = true; };
template <> struct __xp_sdt_signed<int> { static const bool value = true; };
template <> struct __xp_sdt_signed<long> { static const bool value = true; };
template <> struct __xp_sdt_signed<long long> { static const bool value = true; };
template <> struct __xp_sdt_signed<char> { static const bool value = (char)-1 < 0; };
}
#define __XP_SDT_SIGNED(x) (__xp_sdt_signed<__typeof__(x)>::value)
#else
#define __XP_SDT_SIGNED(x) \
	(__extension__ _Generic((x), signed char: 1, short: 1, int: 1, long: 1, \
				long long: 1, char: ((char)-1 < 0), default: 0))
#endif
#define __XP_SDT_SIZE(x) \
	(__XP_SDT_SIGNED(x) ? -(int)sizeof(x) : (int)sizeof(x))

#define __XP_SDT_FMT_0 ""
#define __XP_SDT_FMT_1 "%c[__xp_s1]@%[__xp_v1]"
#define __XP_SDT_FMT_2 __XP_SDT_FMT_1 " %c[__xp_s2]@%[__xp_v2]"
#define __XP_SDT_FMT_3 __XP_SDT_FMT_2 " %c[__xp_s3]@%[__xp_v3]"
#define __XP_SDT_FMT_4 __XP_SDT_FMT_3 " %c[__xp_s4]@%[__xp_v4]"
#define __XP_SDT_FMT_5 __XP_SDT_FMT_4 " %c[__xp_s5]@%[__xp_v5]"
#define __XP_SDT_FMT_6 __XP_SDT_FMT_5 " %c[__xp_s6]@%[__xp_v6]"
#define __XP_SDT_FMT_7 __XP_SDT_FMT_6 " %c[__xp_s7]@%[__xp_v7]"
#define __XP_SDT_FMT_8 __XP_SDT_FMT_7 " %c[__xp_s8]@%[__xp_v8]"
#define __XP_SDT_FMT_9 __XP_SDT_FMT_8 " %c[__xp_s9]@%[__xp_v9]"
#define __XP_SDT_FMT_10 __XP_SDT_FMT_9 " %c[__xp_s10]@%[__xp_v10]"
#define __XP_SDT_FMT_11 __XP_SDT_FMT_10 " %c[__xp_s11]@%[__xp_v11]"
#define __XP_SDT_FMT_12 __XP_SDT_FMT_11 " %c[__xp_s12]@%[__xp_v12]"

#define __XP_SDT_OPERAND(i, t, a) \
	, [__xp_s##i] "n"(__XP_SDT_SIZE(__xp_a##i)), [__xp_v##i] "nor"(__xp_a##i)

/* The gate symbol shared by all sites of one (provider, name) in an object:
 * defined weak and hidden from inside the first site's asm. */
#define __XP_GATE_SYM(prov, name) __xprobes_gate__##prov##__##name

#define __XP_GATE_DEFINE(sym)                                             \
	".ifndef " sym "\n"                                               \
	".pushsection .probes,\"aw\",@progbits\n"                         \
	".weak " sym "\n"                                                 \
	".hidden " sym "\n"                                               \
	".balign 4\n"                                                     \
	".type " sym ", @object\n"                                       \
	".size " sym ", 4\n"                                              \
	sym ": .zero 4\n"                                                 \
	".popsection\n"                                                   \
	".endif\n"

#define __XP_SDT_ASM(gateref, sdtprov, namestr, fmt)                      \
	"990: nop\n"                                                      \
	".pushsection .note.stapsdt,\"?\",\"note\"\n"                     \
	".balign 4\n"                                                     \
	".4byte 992f-991f, 994f-993f, 3\n"                                \
	"991: .asciz \"stapsdt\"\n"                                       \
	"992: .balign 4\n"                                                \
	"993: .8byte 990b\n"                                              \
	".8byte _.stapsdt.base\n"                                         \
	".8byte " gateref "\n"                                            \
	".asciz \"" sdtprov "\"\n"                                        \
	".asciz \"" namestr "\"\n"                                        \
	".asciz \"" fmt "\"\n"                                            \
	"994: .balign 4\n"                                                \
	".popsection\n"                                                   \
	".ifndef _.stapsdt.base\n"                                        \
	".pushsection .stapsdt.base,\"aG\",\"progbits\",.stapsdt.base,comdat\n" \
	".weak _.stapsdt.base\n"                                          \
	".hidden _.stapsdt.base\n"                                        \
	"_.stapsdt.base: .space 1\n"                                      \
	".size _.stapsdt.base, 1\n"                                       \
	".popsection\n"                                                   \
	".endif\n"                                                        \
	/* Our own note: where the record is.  Allocated, so it lands in a  \
	 * PT_NOTE segment; retained, so --gc-sections keeps it. */          \
	".pushsection .note.xprobes,\"aR?\",\"note\"\n"                    \
	".balign 4\n"                                                     \
	".4byte 8, 4, 1\n"                                                \
	".asciz \"xprobes\"\n"                                            \
	".4byte " __XP_REC_REF " - .\n"                                    \
	".popsection\n"

/* The site proper.  gatedef: asm defining the gate, or "" when another
 * object defines it (xprobes-dtrace -G); gatevar: the gate's identifier;
 * prov/name: strings; sdtprov: the SDT provider (never empty). */
#define __XP_SITE(gatedef, gatevar, prov, sdtprov, name, types, args)            \
	__XP_SITE_WITH(__XP_LOCAL, gatedef, gatevar, prov, sdtprov, name, types, args)
#define __XP_SITE_DTRACE(gatedef, gatevar, prov, sdtprov, name, types, args)     \
	__XP_SITE_WITH(__XP_LOCAL_DTRACE, gatedef, gatevar, prov, sdtprov, name, \
		       types, args)
/* local: how an argument becomes its local copy (__XP_LOCAL...). */
#define __XP_SITE_WITH(local, gatedef, gatevar, prov, sdtprov, name, types, args) \
	do {                                                                      \
		__XP_DECLARE_GATE(gatevar)                                        \
		__XP_STATIC_ASSERT(__XP_NARGS(types) == __XP_NARGS(args),             \
			       __xprobes_site_types_and_args_differ_in_length,    \
			       "xprobes site " name ": " __XP_STR(types)           \
			       " and " __XP_STR(args) " differ in length");        \
		__XP_STATIC_ASSERT(__XP_NARGS(types) <= XPROBES_MAX_ARGS,             \
			       __xprobes_site_has_more_than_12_arguments,         \
			       "xprobes site " name ": more than 12 arguments");  \
		__XP_REC_DECL(gatevar, prov, name, types)                          \
		uint32_t __xp_word = __XP_GATE_LOAD(gatevar);                     \
		if (__builtin_expect(__xp_word != 0, 0)) {                        \
			__XP_EACH(__XP_NARGS(types), local, types, args)          \
			__asm__ __volatile__(                                     \
				gatedef                                           \
				__XP_SDT_ASM(__XP_GATE_REF(gatevar), sdtprov, name, \
					     __XP_CAT(__XP_SDT_FMT_, __XP_NARGS(types))) \
				__XP_REC_ASM(gatevar, prov, name, types)          \
				: __XP_REC_OUT                                    \
				: __XP_GATE_IN(gatevar) __XP_REC_IN               \
				   __XP_EACH(__XP_NARGS(types), __XP_SDT_OPERAND, \
					     types, args));                       \
			if (__xp_word >> 16) /* gate.attached: XProbes is on */  \
				__XP_DISPATCH(types);                             \
		}                                                                 \
	} while (0)

/* Run the handlers inside a read-side section.  Nested sections (a handler
 * hitting a site of the same object) find seq non-zero and leave it alone.
 *
 * Nothing of ours stays in a register across a handler call: the one-handler
 * call consumes the arguments, and what is needed after a call (the outer
 * flag; the list and arguments when several handlers share the site) lives
 * in volatile stack slots.  A value held across a call needs a callee-saved
 * register, and the function holding the site would save and restore it in
 * its prologue and epilogue on every call, attached or not: in memcached
 * that was 8 pushes and pops per conn_set_state(), +3.5% instructions per
 * request with every site detached (bench/memcached_instr.py). */
#define __XP_DISPATCH(types)                                                      \
	do {                                                                      \
		struct xprobes_reader *__xp_r = &__xprobes_reader;                \
		/* The reader to leave after the calls, or 0 when nested. */     \
		struct xprobes_reader *volatile __xp_leave = 0;                   \
		const struct xprobes_handler_list *__xp_l = 0;                    \
		int __xp_ready = 1;                                               \
		if (__builtin_expect(__xp_r->seq == 0, 1)) {                      \
			unsigned long __xp_gp =                                   \
				__atomic_load_n(&__xp_r->gp, __ATOMIC_ACQUIRE);   \
			if (__builtin_expect(__xp_gp != 0, 1)) {                  \
				__atomic_store_n(&__xp_r->seq, __xp_gp, __ATOMIC_RELAXED); \
				__atomic_signal_fence(__ATOMIC_SEQ_CST);          \
				__xp_leave = __xp_r;                              \
			} else {                                                  \
				__xp_ready = 0; /* first hit in this thread */    \
			}                                                         \
		}                                                                 \
		if (__builtin_expect(__xp_ready, 1))                              \
			__xp_l = __atomic_load_n(&__XP_REC->handlers, __ATOMIC_ACQUIRE); \
		/* A published list is immutable and never empty. */             \
		if (__builtin_expect(__xp_l != 0 && __xp_l->count == 1, 1)) {     \
			((__XP_FNPTR(types))__XP_HANDLERS(__xp_l)[0].fn)(              \
				__XP_CAT(__XP_CALL_, __XP_NARGS(types)));          \
		} else if (__xp_l != 0 || !__xp_ready) {                          \
			__XP_SLOW_PATH(types);                                    \
		}                                                                 \
		{                                                                 \
			struct xprobes_reader *__xp_left = __xp_leave;            \
			if (__xp_left)                                            \
				__atomic_store_n(&__xp_left->seq, 0, __ATOMIC_RELEASE); \
		}                                                                 \
	} while (0)

/* Several handlers, or a thread's first hit (register the reader first):
 * arguments, list and index in volatile slots, so they are not held in
 * registers across the calls. */
#define __XP_SLOW_PATH(types)                                                     \
	do {                                                                      \
		__XP_EACH(__XP_NARGS(types), __XP_SAVE, types, types)            \
		if (!__xp_ready) {                                                \
			struct xprobes_reader *volatile __xp_rv = __xp_r;         \
			const struct xprobes_runtime *__xp_rt =                   \
				__atomic_load_n(&__XP_REC->runtime, __ATOMIC_ACQUIRE); \
			if (__xp_rt)                                              \
				__xp_rt->register_reader(__xp_rv, __XP_REC);       \
			{ /* a block: declarations before statements (C90) */    \
				struct xprobes_reader *__xp_r2 = __xp_rv;         \
				unsigned long __xp_gp = __atomic_load_n(&__xp_r2->gp, \
									__ATOMIC_ACQUIRE); \
				if (__xp_gp == 0)                                 \
					break; /* not waited for: run no handler */ \
				__atomic_store_n(&__xp_r2->seq, __xp_gp, __ATOMIC_RELAXED); \
				__atomic_signal_fence(__ATOMIC_SEQ_CST);          \
				__xp_leave = __xp_r2;                             \
				__xp_l = __atomic_load_n(&__XP_REC->handlers,     \
							 __ATOMIC_ACQUIRE);       \
				if (__xp_l == 0)                                  \
					break;                                    \
			}                                                         \
		}                                                                 \
		{                                                                 \
			const struct xprobes_handler_list *volatile __xp_lv = __xp_l; \
			/* No declaration in a for (C90), and no ++ or used       \
			 * assignment of a volatile (deprecated in C++20). */    \
			unsigned volatile __xp_i = 0;                             \
			while (__xp_i < __xp_lv->count) {                         \
				((__XP_FNPTR(types))__XP_HANDLERS(__xp_lv)[__xp_i].fn)( \
					__XP_CAT(__XP_SAVED_, __XP_NARGS(types))); \
				__xp_i = __xp_i + 1;                              \
			}                                                         \
		}                                                                 \
	} while (0)

/* ---- public macros ---------------------------------------------------- */

#define XPROBES_SITE(name, types, args)                                       \
	__XP_SITE(__XP_GATE_DEFINE(__XP_STR(__XP_GATE_SYM(, name))),            \
		  __XP_GATE_SYM(, name), "",                                      \
		  "xprobes", #name, types, args)

#define XPROBES_SITE_P(provider, name, types, args)                           \
	__XP_SITE(__XP_GATE_DEFINE(__XP_STR(__XP_GATE_SYM(provider, name))),     \
		  __XP_GATE_SYM(provider, name), #provider, #provider, #name,    \
		  types, args)

/* True while anything (XProbes or a uprobe-based tracer) is attached to a
 * site of this name in this object.  Needs such a site in the object. */
#define XPROBES_SITE_ENABLED(name) __XP_ENABLED(__XP_GATE_SYM(, name))
#define XPROBES_SITE_ENABLED_P(provider, name) \
	__XP_ENABLED(__XP_GATE_SYM(provider, name))
#define __XP_ENABLED(gatevar)                                                 \
	__extension__({                                                       \
		__XP_DECLARE_GATE(gatevar)                                    \
		__builtin_expect(__XP_GATE_LOAD(gatevar) != 0, 0);            \
	})

#endif /* XPROBES_SITE_H */
