/* SPDX-License-Identifier: MIT */
// The C++ twin of sites_prog.c: the same sites, written where C++ code
// puts them.  Member functions defined in a class and templates have vague
// linkage (one COMDAT copy per program), which is what the header has to
// get right in C++ (see __XP_REC_DECL in site.h).  Commands on stdin as in
// sites_prog.c.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

#include <xprobes/site.h>

struct item {
	const char *key;
	int size;
};

#ifdef WITH_LIB
extern "C" void lib_fire(int n); // sites_lib.cc
#endif

namespace shop {

class Counter {
public:
	__attribute__((noinline)) void fire(const item *it, int i)
	{
		XPROBES_SITE(build_item, (const struct item *, int), (it, i));
		tick(i);
	}

private:
	template <typename T> static void tick(T v)
	{
		XPROBES_SITE_P(buildprov, tick__one, (long), (static_cast<long>(v) * 3));
	}
};

} // namespace shop

int main()
{
	char line[64];
	item it = { "key", 42 };
	shop::Counter counter;

	std::printf("ready %d\n", static_cast<int>(getpid()));
	std::fflush(stdout);
	while (std::fgets(line, sizeof(line), stdin)) {
		if (std::strncmp(line, "hit ", 4) == 0) {
			int n = std::atoi(line + 4);
			for (int i = 0; i < n; i++)
				counter.fire(&it, i);
#ifdef WITH_LIB
			lib_fire(n);
#endif
			std::printf("done\n");
			std::fflush(stdout);
		} else if (std::strncmp(line, "quit", 4) == 0) {
			break;
		}
	}
	return 0;
}
