/* SPDX-License-Identifier: MIT */
// C++ for tests/trace/test_trace_dwarf.py: `this`, references, a
// std::string by value (uftrace's "/S"), an enum class, a namespace,
// a class with a destructor, a template.
#include <string>

enum class Shade { Light = 1, Dark };
struct Box {
	int w;
	virtual ~Box() { }
	__attribute__((noinline)) int area(int h) const { return w * h; }
};
namespace geo {
__attribute__((noinline)) int measure(int a, const char *unit, Shade s) { return a + unit[0] + (int)s; }
}
template <typename T> __attribute__((noinline)) T twice(T x) { return x + x; }
__attribute__((noinline)) int name_len(std::string s, Box &b) { return (int)s.size() + b.w; }
__attribute__((noinline)) std::string greet(const std::string &who) { return "hi " + who; }

int main()
{
	Box b;
	b.w = 2;
	int r = geo::measure(1, "cm", Shade::Dark) + name_len("box", b) + b.area(3);
	r += twice(4) + (int)twice(1.5) + (int)greet("you").size();
	return r > 0 ? 0 : 1;
}
