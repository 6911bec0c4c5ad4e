/* SPDX-License-Identifier: MIT */
// A traced C++ program for tests/trace/test_trace_record.py: exceptions
// thrown through traced frames (with destructors that call traced code on
// the way) and caught in a traced frame, and rethrown.  Built by the test
// itself with g++ and clang++.  It prints "ready PID", "fn NAME 0xADDR"
// lines and "fns end"; then "throw" answers "throw 14" and "rethrow"
// answers "rethrow 21" when the exceptions went where they should.
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <unistd.h>

#include "keep.h"

static volatile int sink;

extern "C" {
KEEP int cx_leaf(int x)
{
	return x + 1;
}

KEEP void cx_unwound(void)
{
	sink += cx_leaf(1);
}
}

struct Guard {
	~Guard() { cx_unwound(); }
};

extern "C" {
KEEP void cx_throw(int n)
{
	Guard g;
	if (n == 0)
		throw std::runtime_error("down here");
	cx_throw(n - 1);
	sink++;
}

KEEP int cx_catch(void)
{
	try {
		cx_throw(3);
	} catch (const std::exception &) {
		return cx_leaf(10);
	}
	return 0;
}

KEEP int cx_top(void)
{
	return cx_catch() + cx_leaf(2); /* 11 + 3 */
}

KEEP void cx_rethrow(void)
{
	try {
		cx_throw(1);
	} catch (...) {
		throw;
	}
}

KEEP int cx_outer(void)
{
	try {
		cx_rethrow();
	} catch (const std::runtime_error &) {
		return cx_leaf(20);
	}
	return 0;
}
}

#define FN(f) std::printf("fn %s %p\n", #f, (void *)f)

int main()
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	std::printf("ready %d\n", getpid());
	FN(cx_leaf), FN(cx_unwound), FN(cx_throw), FN(cx_catch), FN(cx_top);
	FN(cx_rethrow), FN(cx_outer);
	std::printf("fns end\n");
	char line[64];
	while (std::fgets(line, sizeof(line), stdin)) {
		if (!std::strcmp(line, "throw\n"))
			std::printf("throw %d\n", cx_top());
		else if (!std::strcmp(line, "rethrow\n"))
			std::printf("rethrow %d\n", cx_outer());
		else
			break;
	}
	return 0;
}
