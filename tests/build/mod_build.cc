/* SPDX-License-Identifier: MIT */
// The C++ twin of mod_build.c: a probe module written in C++ (handlers in
// an unnamed namespace, std::atomic counters), counting the build-matrix
// program's sites.  `command mod_build_cxx.so` prints the same line.
#include <atomic>
#include <cstdio>

#include <xprobes/probe.h>

struct item {
	const char *key;
	int size;
};

namespace {

std::atomic<long> items(0), ticks(0), libs(0), sizes(0);

void on_item(const item *it, int)
{
	items++;
	sizes += it->size;
}

void on_tick(long)
{
	ticks++;
}

void on_lib(int)
{
	libs++;
}

void command(const char *, int (*out)(const char *))
{
	char buf[128];
	std::snprintf(buf, sizeof(buf), "item=%ld tick=%ld lib=%ld sum=%ld\n", items.load(),
		      ticks.load(), libs.load(), sizes.load());
	out(buf);
}

} // namespace

XPROBES_MODULE(command, 0,
	XPROBES_PROBE("build_item", on_item, (const struct item *, int)),
	XPROBES_PROBE("buildprov:tick__*", on_tick, (long)),
	XPROBES_PROBE("build_lib", on_lib, (int)));
