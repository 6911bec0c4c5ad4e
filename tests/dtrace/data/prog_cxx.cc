/* SPDX-License-Identifier: MIT */
// The C++ side of an --enable-dtrace project: the generated header as the
// stub's users have it (no sed rewrite, so D's char * stays char *), used
// from a class template and a namespace.  Commands on stdin, as prog.c:
//   tick N   -> XPDTEST_TICK N times, then "tick N done"
//   all      -> the other probes once each, then "all done"
//   enabled  -> "enabled tick=T lib=0"
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

struct xpd_thing {
	int x;
};

#include "xpdtest.raw.h"

namespace app {

template <typename Int> class Ticker {
public:
	explicit Ticker(xpd_thing *thing) : thing_(thing) {}

	void tick(Int i) const
	{
		const char *label = "label"; // const where the .d says const char *
		XPDTEST_TICK(i, label, static_cast<uint64_t>(i) << 33, thing_);
	}

private:
	xpd_thing *thing_;
};

} // namespace app

static void all(xpd_thing *thing)
{
	const char *cs = "const";
	XPDTEST_NOARGS();
	XPDTEST_STR_ARG(cs);
	// D says char *; C++ code passes a const char *, as it does with the stub.
	XPDTEST_ANON(1, cs, 2ULL, thing);
	XPDTEST_MANY(-1, 2, -3, 4, -5, 6, -7, 8, reinterpret_cast<uintptr_t>(thing), "lit", cs, 12L);
	XPDTEST_NEG_VALUE(-1, -2, -3);
}

int main()
{
	static xpd_thing thing = { 42 };
	app::Ticker<long> ticker(&thing);
	char line[64];

	std::printf("ready %d\n", static_cast<int>(getpid()));
	std::fflush(stdout);
	while (std::fgets(line, sizeof(line), stdin)) {
		if (std::strncmp(line, "tick ", 5) == 0) {
			int n = std::atoi(line + 5);
			for (int i = 1; i <= n; i++)
				ticker.tick(i);
			std::printf("tick %d done\n", n);
		} else if (std::strncmp(line, "all", 3) == 0) {
			all(&thing);
			std::printf("all done\n");
		} else if (std::strncmp(line, "enabled", 7) == 0) {
			std::printf("enabled tick=%d lib=0\n", XPDTEST_TICK_ENABLED() ? 1 : 0);
		} else {
			std::printf("unknown\n");
		}
		std::fflush(stdout);
	}
	return 0;
}
