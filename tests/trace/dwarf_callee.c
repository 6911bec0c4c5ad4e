/* SPDX-License-Identifier: MIT */
/* A shared library for tests/trace/test_trace_dwarf.py: its .dbg offsets
 * are from the library's own start, its enum is its own. */
enum lk { LK_A = 10, LK_B, LK_C = 20 };
struct s3 { double a; float b; int c; };

__attribute__((noinline)) int lib_fn(const char *s, enum lk k) { return s[0] + (int)k; }
__attribute__((noinline)) double lib_mix(int a, double b, struct s3 s, int c, float d)
{ return a + b + s.a + c + d; }
int lib_entry(void)
{
	struct s3 s = {1.5, 2.5f, 3};
	return lib_fn("x", LK_B) + (int)lib_mix(1, 2.0, s, 4, 5.0f);
}
