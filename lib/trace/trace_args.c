/* SPDX-License-Identifier: MIT */
/* Arguments and return values of chosen functions (`trace args`, the
 * tool's -A/-R/-a): which words to copy, and copying them.
 *
 * The tool turns uftrace's spec syntax into a few item bytes per function
 * (its patch site's address, or a library call's GOT slot) and sends them
 * before a start; the calling threads look a function up here only when
 * some spec exists (xp_trace_args_on), so a program traced without -A
 * pays one predictable branch a call.
 *
 * The table is static and never freed: a thread that returns through the
 * exit trampoline after a stop, or after the next `trace args`, may still
 * read it.  What it reads then is at worst another function's items, and
 * every item is safe to act on whatever its bytes (a string is read with
 * process_vm_readv, which answers EFAULT instead of faulting): a record of
 * the wrong shape, never a crash.  So the table is only written while
 * tracing is off, and readers take no lock.
 *
 * Where the words are (x86-64 System V): at a traced function's entry the
 * hook (trace_hook.S) or the library-call stub (trace_plt.c) has pushed
 * rdi rsi rdx rcx r8 r9 on the stack, one after the other, so rdi's copy
 * at regs[0] and the next ones below it; the function's stack arguments
 * start just above its return address.  The vector registers are
 * untouched from the call to here (every C file on this path is built
 * with general registers only), so the floating-point arguments are read
 * from xmm0-xmm7 themselves.  At the exit the trampoline has saved rax and
 * xmm0 below the returning stack pointer. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "trace.h"
#include "trace_nosse.h"


/* Item bytes: kind in the high 3 bits, index (0-based) in the low 5. */
enum { K_INT = 1, K_FP, K_STR, K_RET, K_RETFP, K_RETSTR };
#define ITEM(k, i) ((uint8_t)((k) << 5 | (i)))
#define ITEM_KIND(b) ((b) >> 5)
#define ITEM_INDEX(b) ((b)&31u)

#define TABLE_BITS 17 /* twice the most functions: probes stay short */
#define TABLE_SIZE (1u << TABLE_BITS)
static struct xp_trace_argspec table[TABLE_SIZE];
static size_t nfuncs;
static int consumed; /* a start used them: the next `trace args` begins anew */
static char options[XP_TRACE_ARG_OPTIONS_MAX + 1]; /* the tool's text, "" when none */
uint8_t xp_trace_args_on;
static pid_t self_pid;
/* A function's first slot: a multiplicative hash (a macro: it serves both
 * sides of XP_TRACE_NOSSE_BEGIN). */
#define slot_of(func) ((size_t)(((uint64_t)(func)*UINT64_C(0x9e3779b97f4a7c15)) >> (64 - TABLE_BITS)))

/* ---- The control thread: `trace args` (tracing off) ---- */

void xp_trace_args_clear(void)
{
	__atomic_store_n(&xp_trace_args_on, 0, __ATOMIC_RELAXED);
	consumed = 0;
	options[0] = 0;
	if (nfuncs == 0)
		return;
	memset(table, 0, sizeof(table));
	nfuncs = 0;
}

/* Specs given before a start are that start's: on at the start, off at
 * its stop (a later start without `trace args` records no arguments). */
void xp_trace_args_arm(void)
{
	self_pid = getpid();
	__atomic_store_n(&xp_trace_args_on, nfuncs > 0, __ATOMIC_RELAXED);
	consumed = 1;
}

void xp_trace_args_disarm(void)
{
	__atomic_store_n(&xp_trace_args_on, 0, __ATOMIC_RELAXED);
}

/* One item word ("i3", "f1", "s2", "r", "rf", "rs") into *b. */
static int parse_item(const char *w, size_t len, uint8_t *b)
{
	if (len == 1 && w[0] == 'r') {
		*b = ITEM(K_RET, 0);
		return 0;
	}
	if (len == 2 && w[0] == 'r' && (w[1] == 'f' || w[1] == 's')) {
		*b = ITEM(w[1] == 'f' ? K_RETFP : K_RETSTR, 0);
		return 0;
	}
	if (len < 2 || len > 3 || !strchr("ifs", w[0]))
		return -1;
	unsigned n = 0;
	for (size_t i = 1; i < len; i++) {
		if (w[i] < '0' || w[i] > '9')
			return -1;
		n = n * 10 + (unsigned)(w[i] - '0');
	}
	/* Stack words past the 16th argument are not read: above the
	 * outermost frame of a thread they may not be mapped. */
	if (n < 1 || n > 16 || (w[0] == 'f' && n > 8))
		return -1;
	*b = ITEM(w[0] == 'i' ? K_INT : w[0] == 'f' ? K_FP : K_STR, n - 1);
	return 0;
}

int xp_trace_args_parse(const char *items, uint8_t out[XP_TRACE_ARG_ITEMS])
{
	memset(out, 0, XP_TRACE_ARG_ITEMS);
	size_t n = 0;
	for (const char *p = items;;) {
		size_t len = strcspn(p, ",");
		if (n == XP_TRACE_ARG_ITEMS || parse_item(p, len, &out[n]) < 0)
			return -1;
		n++;
		if (!p[len])
			return 0;
		p += len + 1;
	}
}

int xp_trace_args_set(uintptr_t func, const uint8_t items[XP_TRACE_ARG_ITEMS])
{
	if (func == 0)
		return -EINVAL;
	if (consumed)
		xp_trace_args_clear();
	size_t i = slot_of(func);
	while (table[i].func && table[i].func != func)
		i = (i + 1) & (TABLE_SIZE - 1);
	if (!table[i].func) {
		if (nfuncs == XP_TRACE_ARG_MAX_FUNCS)
			return -ENOSPC;
		nfuncs++;
	}
	memcpy(table[i].item, items, XP_TRACE_ARG_ITEMS);
	table[i].ret_recs = (uint8_t)xp_trace_args_ret_recs(&table[i]);
	__atomic_store_n(&table[i].func, func, __ATOMIC_RELEASE);
	return 0;
}

/* Never read by the agent: kept for the tool, which parses it again. */
int xp_trace_args_set_options(const char *text)
{
	size_t len = strlen(text);
	if (len > XP_TRACE_ARG_OPTIONS_MAX)
		return -E2BIG;
	if (consumed)
		xp_trace_args_clear();
	memcpy(options, text, len + 1);
	return 0;
}

const char *xp_trace_args_options(void)
{
	return options;
}

size_t xp_trace_args_count(void)
{
	return nfuncs;
}

void xp_trace_args_after_fork(void)
{
	self_pid = getpid();
}

/* ---- The calling threads ----
 * Only what follows runs between a traced function's instructions: the
 * control thread's code above may use libc freely (memset, strchr, and
 * _FORTIFY_SOURCE's inline versions of them, which need SSE). */

XP_TRACE_NOSSE_BEGIN


const struct xp_trace_argspec *xp_trace_args_find(uintptr_t func)
{
	for (size_t i = slot_of(func);; i = (i + 1) & (TABLE_SIZE - 1)) {
		const struct xp_trace_argspec *s = &table[i];
		uintptr_t f = __atomic_load_n(&s->func, __ATOMIC_RELAXED);
		if (f == func)
			return s;
		if (f == 0)
			return NULL;
	}
}


static int is_ret(uint8_t b)
{
	return ITEM_KIND(b) >= K_RET;
}

unsigned xp_trace_args_ret_recs(const struct xp_trace_argspec *s)
{
	size_t max = 0;
	for (int k = 0; k < XP_TRACE_ARG_ITEMS && s->item[k]; k++)
		if (is_ret(s->item[k]))
			max += ITEM_KIND(s->item[k]) == K_RETSTR ? 2 + XP_TRACE_ARG_STR_MAX : 8;
	return max ? 1 + (unsigned)((max + XP_TRACE_ARG_DATA_BYTES - 1) / XP_TRACE_ARG_DATA_BYTES) : 0;
}

static uint64_t xmm_low(unsigned i)
{
	uint64_t v = 0;
	switch (i) {
	case 0: __asm__ volatile("movq %%xmm0, %0" : "=r"(v)); break;
	case 1: __asm__ volatile("movq %%xmm1, %0" : "=r"(v)); break;
	case 2: __asm__ volatile("movq %%xmm2, %0" : "=r"(v)); break;
	case 3: __asm__ volatile("movq %%xmm3, %0" : "=r"(v)); break;
	case 4: __asm__ volatile("movq %%xmm4, %0" : "=r"(v)); break;
	case 5: __asm__ volatile("movq %%xmm5, %0" : "=r"(v)); break;
	case 6: __asm__ volatile("movq %%xmm6, %0" : "=r"(v)); break;
	case 7: __asm__ volatile("movq %%xmm7, %0" : "=r"(v)); break;
	}
	return v;
}

/* Up to XP_TRACE_ARG_STR_MAX + 1 bytes at p, without ever faulting: one
 * iovec a page, since the kernel never splits one. */
static ssize_t read_self(uintptr_t p, char *dst, size_t len)
{
	struct iovec local = { dst, len }, remote[2];
	uintptr_t page_end = (p | 4095) + 1;
	size_t first = page_end - p < len ? page_end - p : len;
	remote[0] = (struct iovec){ (void *)p, first };
	remote[1] = (struct iovec){ (void *)page_end, len - first };
	return syscall(SYS_process_vm_readv, self_pid, &local, 1UL, remote,
		       first < len ? 2UL : 1UL, 0UL);
}

/* One unaligned store, and rep movsb: a libc copy may use the vector
 * registers. */
struct __attribute__((packed, may_alias)) unaligned_word {
	uint64_t v;
};

static size_t put_word(uint8_t *out, uint64_t v)
{
	((struct unaligned_word *)out)->v = v;
	return 8;
}

static void copy_bytes(uint8_t *dst, const char *src, size_t n)
{
	__asm__ volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
}

static size_t put_string(uint8_t *out, uintptr_t p)
{
	if (p == 0) {
		out[0] = XP_TRACE_ARG_STR_NULL;
		return 1;
	}
	char s[XP_TRACE_ARG_STR_MAX + 1];
	ssize_t got = read_self(p, s, sizeof(s));
	if (got <= 0) {
		out[0] = XP_TRACE_ARG_STR_BAD;
		return 1 + put_word(out + 1, p);
	}
	size_t n = 0;
	while (n < (size_t)got && n < XP_TRACE_ARG_STR_MAX && s[n])
		n++;
	/* No NUL among the bytes read: cut, or the rest is unreadable. */
	out[0] = n < (size_t)got && s[n] == 0 ? XP_TRACE_ARG_STR_OK : XP_TRACE_ARG_STR_CUT;
	out[1] = (uint8_t)n;
	copy_bytes(out + 2, s, n);
	return 2 + n;
}

size_t xp_trace_args_capture(const struct xp_trace_argspec *s, int ret, const uintptr_t *regs,
			     const uintptr_t *stack, uint8_t *out)
{
	size_t n = 0;
	for (int k = 0; k < XP_TRACE_ARG_ITEMS && s->item[k]; k++) {
		uint8_t b = s->item[k];
		if (is_ret(b) != !!ret)
			continue;
		unsigned i = ITEM_INDEX(b);
		switch (ITEM_KIND(b)) {
		case K_INT:
		case K_STR: {
			uintptr_t v = i < 6 ? *(regs - i) : stack[i - 6];
			n += ITEM_KIND(b) == K_INT ? put_word(out + n, v) : put_string(out + n, v);
			break;
		}
		case K_FP:
			n += put_word(out + n, xmm_low(i));
			break;
		case K_RET:
			n += put_word(out + n, regs[0]);
			break;
		case K_RETSTR:
			n += put_string(out + n, regs[0]);
			break;
		case K_RETFP:
			n += put_word(out + n, stack[0]);
			break;
		}
	}
	return n;
}

XP_TRACE_NOSSE_END
