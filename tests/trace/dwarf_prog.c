/* SPDX-License-Identifier: MIT */
/* Functions of every kind of argument and return value uftrace's
 * --auto-args formats from DWARF, called once each: built with -pg -g,
 * tests/trace/test_trace_dwarf.py compares what tools/xprobes/trace_dwarf.c
 * makes of this file with what `uftrace record -a` writes for it. */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))

/* Every result and every void call leaves a trace here, so that -O2
 * keeps the calls. */
volatile long sink;

enum color { RED, GREEN = 5, BLUE = -3 };
typedef enum { MODE_A = 1, MODE_B = 2, MODE_C = 4 } mode_t_;
enum big { BIG_LO = 1, BIG_HI = 0x7fffffff, BIG_SAME = 1 };
enum flags { FL_NONE, FL_ONE, FL_TWO, FL_FOUR = 4, FL_FIVE };
enum unused_enum { NEVER_NAMED };
enum widev { W_NEG = -5, W_DUP = -5, W_BIG = 0x100000000L, W_NEXT, W_INTMAX = 0x7fffffffL,
	     W_AFTER = 0x80000000L };
struct pt { int x, y; };
struct big4 { long a, b, c, d; };
struct fp2 { float a, b; };
struct dbl2 { double a, b; };
struct mixfi { float f; int i; };
struct mixdl { double d; long l; };
struct chars3 { char c[3]; };
struct nest { struct pt p; };
struct withptr { char *s; int n; };
struct ld { int a; long double b; };
struct empty { };
typedef struct { short s; char c; } anon_t;
union num { int i; float f; };
union wide { long l; double d; };
typedef unsigned int myuint;
typedef const char *cstr;

NOINLINE int f_ints(int a, unsigned b, char c, unsigned char d, short e, unsigned short g)
{ return a + (int)b + c + d + e + g; }
NOINLINE long f_longs(long a, unsigned long b, long long c, unsigned long long d, size_t e, bool f)
{ return a + (long)b + c + (long)d + (long)e + f; }
NOINLINE void f_ptrs(void *p, int *ip, char *s, const char *cs, struct pt *sp, void (*fp)(void))
{ sink += (long)p + (long)ip + (long)s + (long)cs + (long)sp + (long)fp; }
NOINLINE int f_structs(struct pt p, struct big4 b) { return p.x + (int)b.a; }
NOINLINE enum color f_enums(enum color c, mode_t_ m, enum big g, enum flags f)
{ return (enum color)(c + m + (int)g + f); }
NOINLINE double f_fps(float a, double b, long double c) { return a + b + (double)c; }
NOINLINE int f_varargs(const char *fmt, ...)
{ va_list ap; va_start(ap, fmt); int x = va_arg(ap, int); va_end(ap); return x + (int)strlen(fmt); }
NOINLINE int f_many(int a, int b, int c, int d, int e, int f, int g, int h, double x, int i)
{ return a + b + c + d + e + f + g + h + i + (int)x; }
NOINLINE int f_manyfp(double a, double b, double c, double d, double e, double f, double g,
		      double h, double i, int n)
{ return (int)(a + b + c + d + e + f + g + h + i) + n; }
NOINLINE char *f_str(char *s) { return s; }
NOINLINE cstr f_cstr(cstr s, const char **pp) { (void)pp; return s; }
NOINLINE myuint f_typedef(myuint u, const int ci, volatile long vl) { return u + (myuint)ci + (myuint)vl; }
NOINLINE union num f_union(union num u, union wide w, unsigned char *up)
{ (void)up; u.i += (int)w.l; return u; }
NOINLINE float f_float(float f) { return f * 2; }
NOINLINE long double f_ldouble(long double f) { return f / 2; }
NOINLINE bool f_bool(bool b) { return !b; }
NOINLINE char f_char(char c, signed char sc) { return (char)(c + sc); }
NOINLINE struct pt f_retpt(int x) { struct pt p = {x, x}; return p; }
NOINLINE struct big4 f_retbig(int x) { struct big4 p = {x, x, x, x}; return p; }
NOINLINE struct dbl2 f_retdbl2(double a) { struct dbl2 r = {a, a}; return r; }
NOINLINE struct fp2 f_retfp2(float a) { struct fp2 r = {a, a}; return r; }
NOINLINE int *f_retptr(int *p) { return p; }
NOINLINE void f_void(void) { sink++; }
NOINLINE int f_array(int a[], int n) { return a[0] + n; }
NOINLINE int f_smallstructs(struct fp2 a, struct dbl2 b, struct mixfi c, struct mixdl d, int tail)
{ return (int)(a.a + b.a + c.f + d.d) + tail; }
NOINLINE int f_morestructs(struct chars3 a, struct nest b, struct withptr c, struct ld d, int tail)
{ return a.c[0] + b.p.x + c.n + d.a + tail; }
NOINLINE int f_anon(anon_t a, struct empty e, int tail) { (void)e; return a.s + a.c + tail; }
NOINLINE int f_regsout(int a, int b, int c, int d, int e, struct pt p, int tail)
{ return a + b + c + d + e + p.x + tail; }
NOINLINE enum flags *f_enumptr(enum flags *f, enum color c) { (void)c; return f; }
NOINLINE long f_wide(enum widev w, unsigned char *bytes) { return (long)w + bytes[0]; }
NOINLINE __int128 f_int128(__int128 x) { return x + 1; }
NOINLINE void f_funcptr(int (*cb)(int), struct pt *(*g)(void)) { sink += (long)cb + (long)g; }
static NOINLINE int f_static(int x) { return x * 2; }
static inline int f_inlined(int x) { return x + 1; }
NOINLINE int f_callsinline(int x) { return f_inlined(x) + f_static(x); }
NOINLINE uint8_t f_fixed(int8_t a, uint16_t b, int32_t c, uint64_t d) { return (uint8_t)(a + b + c + (int)d); }

int main(int argc, char **argv)
{
	struct pt p = {1, 2};
	struct big4 b = {1, 2, 3, 4};
	struct fp2 f2 = {1.5f, 2.5f};
	struct dbl2 d2 = {3.5, 4.5};
	struct mixfi mfi = {1.25f, 7};
	struct mixdl mdl = {2.75, 9};
	struct chars3 c3 = {{'a', 'b', 'c'}};
	struct nest ne = {{5, 6}};
	struct withptr wp = {"wp", 3};
	struct ld ldv = {1, 2.0L};
	struct empty em;
	anon_t an = {3, 'z'};
	union num un = {.i = 1};
	union wide uw = {.l = 2};
	enum flags fl = FL_TWO;
	int i = 3, arr[2] = {1, 2};
	unsigned char uc = 0;
	const char *cp = "x";

	sink += (long)f_ints(-1, 2, 'c', 200, -5, 6);
	sink += (long)f_longs(-1, 2, -3, 4, 5, true);
	f_ptrs(&p, &i, "hello", "world", &p, f_void);
	sink += (long)f_structs(p, b);
	sink += (long)f_enums(GREEN, MODE_B, BIG_HI, FL_FIVE);
	sink += (long)f_enums(BLUE, (mode_t_)3, BIG_LO, (enum flags)7);
	sink += (long)f_fps(1.5f, 2.5, 3.5L);
	sink += (long)f_varargs("fmt", 3, 4);
	sink += (long)f_many(1, 2, 3, 4, 5, 6, 7, 8, 9.5, 10);
	sink += (long)f_manyfp(1, 2, 3, 4, 5, 6, 7, 8, 9, 10);
	sink += (long)f_str("s1");
	sink += (long)f_str(NULL);
	sink += (long)f_cstr("s2", &cp);
	sink += (long)f_typedef(1, 2, 3);
	sink += (long)f_union(un, uw, &uc).i;
	sink += (long)f_float(1.25f);
	sink += (long)f_ldouble(2.5L);
	sink += (long)f_bool(false);
	sink += (long)f_char('a', -2);
	sink += (long)f_retpt(3).x;
	sink += (long)f_retbig(4).d;
	sink += (long)f_retdbl2(1.5).b;
	sink += (long)f_retfp2(2.5f).b;
	sink += (long)f_retptr(&i);
	f_void();
	sink += (long)f_array(arr, 2);
	sink += (long)f_smallstructs(f2, d2, mfi, mdl, 11);
	sink += (long)f_morestructs(c3, ne, wp, ldv, 12);
	sink += (long)f_anon(an, em, 13);
	sink += (long)f_regsout(1, 2, 3, 4, 5, p, 14);
	sink += (long)f_enumptr(&fl, RED);
	sink += (long)f_wide(W_NEXT, &uc);
	sink += (long)f_int128(5);
	f_funcptr(f_static, NULL);
	sink += (long)f_callsinline(argc);
	sink += (long)f_fixed(-1, 2, 3, 4);
	(void)argv;
	return 0;
}
