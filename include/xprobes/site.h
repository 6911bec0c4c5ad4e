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

#define XPROBES_ABI_VERSION 4
#define XPROBES_MAX_ARGS 12

struct xprobes_gate {
	union {
		struct {
			unsigned short sdt_semaphore; /* bumped by the kernel */
			unsigned short attached;      /* bumped by the agent */
		};
		uint32_t word; /* what a site tests */
	};
};

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
 * empty list, so a site may call handlers[0] without testing count. */
struct xprobes_handler_list {
	unsigned count;
	struct xprobes_handler handlers[];
};

struct xprobes_site {
	uint32_t abi;         /* XPROBES_ABI_VERSION */
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

/* ---- argument-list plumbing (internal) -------------------------------- */

#define __XP_UNPAREN(...) __VA_ARGS__
#define __XP_CAT(a, b) __XP_CAT_(a, b)
#define __XP_CAT_(a, b) a##b
#define __XP_STR(x) __XP_STR_(x)
#define __XP_STR_(x) #x

/* Number of elements of a parenthesised list; () counts 0. */
#define __XP_NARGS(list) __XP_NARGS_X list
/* Counts to 16 so that 13..16 arguments reach the "more than 12" assert. */
#define __XP_NARGS_X(...) \
	__XP_NARGS_N(_, ##__VA_ARGS__, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, \
		     4, 3, 2, 1, 0)
#define __XP_NARGS_N(_, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, \
		     a13, a14, a15, a16, n, ...) n

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

/* Every site re-declares its gate at block scope; with several sites of
 * one name in a file, -Wredundant-decls (memcached builds with it and
 * -Werror) would object to a declaration that is there on purpose. */
#define __XP_DECLARE_GATE(gatevar)                                            \
	_Pragma("GCC diagnostic push")                                        \
	_Pragma("GCC diagnostic ignored \"-Wredundant-decls\"")               \
	extern struct xprobes_gate gatevar __attribute__((visibility("hidden"))); \
	_Pragma("GCC diagnostic pop")

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
	_Static_assert(sizeof(__xp_a##i) <= 8,                                \
		       "xprobes site argument " #i " is wider than 8 bytes: "  \
		       "pass a pointer (SDT specs and registers hold 8)");

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

/* ---- SystemTap SDT note (format: see docs/design.md) ------------------- */

/* SDT argument size: negative for signed integers. */
#define __XP_SDT_SIGNED(x) \
	_Generic((x), signed char: 1, short: 1, int: 1, long: 1, long long: 1, \
		 char: ((char)-1 < 0), default: 0)
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

#define __XP_SDT_ASM(sdtprov, namestr, fmt)                               \
	"990: nop\n"                                                      \
	".pushsection .note.stapsdt,\"?\",\"note\"\n"                     \
	".balign 4\n"                                                     \
	".4byte 992f-991f, 994f-993f, 3\n"                                \
	"991: .asciz \"stapsdt\"\n"                                       \
	"992: .balign 4\n"                                                \
	"993: .8byte 990b\n"                                              \
	".8byte _.stapsdt.base\n"                                         \
	".8byte %c[__xp_gate]\n"                                          \
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
	".pushsection .note.xprobes,\"aR\",\"note\"\n"                    \
	".balign 4\n"                                                     \
	".4byte 8, 4, 1\n"                                                \
	".asciz \"xprobes\"\n"                                            \
	".4byte %c[__xp_rec] - .\n"                                       \
	".popsection\n"

/* The site proper.  gatedef: asm defining the gate, or "" when another
 * object defines it (xprobes-dtrace -G); gatevar: the gate's identifier;
 * prov/name: strings; sdtprov: the SDT provider (never empty). */
#define __XP_SITE(gatedef, gatevar, prov, sdtprov, name, types, args)            \
	do {                                                                      \
		__XP_DECLARE_GATE(gatevar)                                        \
		_Static_assert(__XP_NARGS(types) == __XP_NARGS(args),             \
			       "xprobes site " name ": " __XP_STR(types)           \
			       " and " __XP_STR(args) " differ in length");        \
		_Static_assert(__XP_NARGS(types) <= XPROBES_MAX_ARGS,             \
			       "xprobes site " name ": more than 12 arguments");  \
		static struct xprobes_site __xp_rec __attribute__((used)) = {     \
			XPROBES_ABI_VERSION, __XP_NARGS(types), 0, prov, name,   \
			#types, &gatevar, 0, 0 };                                 \
		uint32_t __xp_word = __atomic_load_n(&gatevar.word, __ATOMIC_RELAXED); \
		if (__builtin_expect(__xp_word != 0, 0)) {                        \
			__XP_EACH(__XP_NARGS(types), __XP_LOCAL, types, args)     \
			__asm__ __volatile__(                                     \
				gatedef                                           \
				__XP_SDT_ASM(sdtprov, name,                       \
					     __XP_CAT(__XP_SDT_FMT_, __XP_NARGS(types))) \
				:: [__xp_gate] "i"(&gatevar),                     \
				   [__xp_rec] "i"(&__xp_rec)                      \
				   __XP_EACH(__XP_NARGS(types), __XP_SDT_OPERAND, \
					     types, args));                       \
			if (__xp_word >> 16) /* gate.attached: XProbes is on */  \
				__XP_DISPATCH(types);                             \
		}                                                                 \
	} while (0)

/* Run the handlers inside a read-side section.  Nested sections (a handler
 * hitting a site of the same object) find seq non-zero and leave it alone. */
#define __XP_DISPATCH(types)                                                      \
	do {                                                                      \
		struct xprobes_reader *__xp_r = &__xprobes_reader;                \
		int __xp_outer = __xp_r->seq == 0;                                \
		if (__builtin_expect(__xp_outer, 1)) {                            \
			unsigned long __xp_gp =                                   \
				__atomic_load_n(&__xp_r->gp, __ATOMIC_ACQUIRE);   \
			if (__builtin_expect(__xp_gp == 0, 0)) {                  \
				const struct xprobes_runtime *__xp_rt =           \
					__atomic_load_n(&__xp_rec.runtime,        \
							__ATOMIC_ACQUIRE);        \
				if (__xp_rt)                                      \
					__xp_rt->register_reader(__xp_r, &__xp_rec); \
				__xp_gp = __atomic_load_n(&__xp_r->gp,            \
							  __ATOMIC_ACQUIRE);      \
				if (__xp_gp == 0)                                 \
					break; /* not waited for: run no handler */ \
			}                                                         \
			__atomic_store_n(&__xp_r->seq, __xp_gp, __ATOMIC_RELAXED); \
			__atomic_signal_fence(__ATOMIC_SEQ_CST);                  \
		}                                                                 \
		const struct xprobes_handler_list *__xp_l =                       \
			__atomic_load_n(&__xp_rec.handlers, __ATOMIC_ACQUIRE);    \
		if (__builtin_expect(__xp_l != 0, 1)) {                           \
			/* A published list is immutable and never empty: read \
			 * its length before the first call (no reload after    \
			 * it) and keep the common one-handler case loop-free. */ \
			unsigned __xp_n = __xp_l->count;                          \
			((__XP_FNPTR(types))__xp_l->handlers[0].fn)(              \
				__XP_CAT(__XP_CALL_, __XP_NARGS(types)));          \
			if (__builtin_expect(__xp_n > 1, 0))                      \
				for (unsigned __xp_i = 1; __xp_i < __xp_n; __xp_i++) \
					((__XP_FNPTR(types))                      \
					 __xp_l->handlers[__xp_i].fn)(            \
						__XP_CAT(__XP_CALL_,              \
							 __XP_NARGS(types)));     \
		}                                                                 \
		if (__xp_outer)                                                   \
			__atomic_store_n(&__xp_r->seq, 0, __ATOMIC_RELEASE);      \
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
		__builtin_expect(__atomic_load_n(&gatevar.word,               \
						 __ATOMIC_RELAXED) != 0, 0);  \
	})

#endif /* XPROBES_SITE_H */
