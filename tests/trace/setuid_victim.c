/* SPDX-License-Identifier: MIT */
/* A set-user-ID-root program for the tracer's trust tests: built without
 * PIE, so its variables are at addresses a hostile process can know in
 * advance, and one of them is laid out as a trace ring's header would be,
 * with records after it.  A process of another user that lists that
 * address as its ring and then execs this program must not get root's
 * tool to write into it.  It prints "victim ADDR" and waits to be killed;
 * the test reads the header's tail from its memory. */
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#define CAP 64
#define HEAD 8

struct ring {
	uint32_t magic, version;
	int32_t tid;
	uint32_t flags;
	uint64_t cap, head, lost, tail;
	char comm[16];
	uint64_t rec[2 * CAP];
};

/* The values the tracer checks (lib/trace/trace.h): magic "XPTR", version 2. */
struct ring victim_ring = { 0x58505452, 2, 7, 0, CAP, HEAD, 0, 0, "victim", { 0 } };

int main(void)
{
	for (int i = 0; i < HEAD; i++) { /* entries and exits, as a thread writes them */
		victim_ring.rec[2 * i] = (uint64_t)(1000 + i) << 2 | (uint64_t)(i & 1);
		victim_ring.rec[2 * i + 1] = 0x401000;
	}
	printf("victim %p euid %d\n", (void *)&victim_ring, (int)geteuid());
	fflush(stdout);
	for (;;)
		pause();
}
