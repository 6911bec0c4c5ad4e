/* SPDX-License-Identifier: MIT */
/* How a recording client gets the rings' records: copied out of the
 * target through /proc/PID/mem (what trace_stream.c does: bound to one
 * process image), with process_vm_readv (bound to a pid only), or read
 * from memory mapped into both processes (uftrace's and LTTng's way).
 *
 *   bench/drain_copy [MIB] [ROUNDS]
 *
 * A child maps MIB MiB (default 64) from a memfd, fills it, and waits.
 * The parent drains it ROUNDS times (default 9) in 32K-record chunks (512
 * KiB, what trace_stream.c copies at a time) into a resident buffer:
 *   proc_mem   pread of each chunk from the child's /proc/PID/mem
 *   vm_readv   process_vm_readv of each chunk from the child's mapping
 *   shared     memcpy of each chunk from the same memfd mapped here
 * and prints the median ns per 16-byte record and GB/s of each, rounds
 * interleaved.  Run by `make bench-trace`; docs/design.md quotes it. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (32768 * 16)

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 64;
	int rounds = argc > 2 ? atoi(argv[2]) : 9;
	if (mib < 1 || mib > 4096 || rounds < 1 || rounds > 1000) {
		fprintf(stderr, "usage: drain_copy [MIB 1..4096] [ROUNDS 1..1000]\n");
		return 2;
	}
	size_t len = mib << 20;
	int fd = memfd_create("drain_copy", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)len) != 0) {
		perror("drain_copy: memfd");
		return 1;
	}
	int ready[2];
	if (pipe(ready) != 0)
		return 1;
	char *theirs = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (theirs == MAP_FAILED)
		return 1;
	pid_t pid = fork();
	if (pid == 0) { /* the target: fills its rings, then waits */
		memset(theirs, 0x5a, len);
		char c = 1;
		if (write(ready[1], &c, 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	char c;
	if (read(ready[0], &c, 1) != 1)
		return 1;
	char *mine = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	char *copy = malloc(CHUNK);
	if (mine == MAP_FAILED || !copy)
		return 1;
	memset(copy, 0, CHUNK);
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	int memfd = open(path, O_RDONLY | O_CLOEXEC);
	if (memfd < 0) {
		perror("drain_copy: /proc/PID/mem");
		kill(pid, SIGKILL);
		return 1;
	}
	double pm[1000], vm[1000], sh[1000];
	for (int r = 0; r < rounds; r++) {
		double t = now();
		for (size_t off = 0; off < len; off += CHUNK) {
			if (pread(memfd, copy, CHUNK, (off_t)(uintptr_t)(theirs + off)) != CHUNK) {
				perror("drain_copy: pread /proc/PID/mem");
				kill(pid, SIGKILL);
				return 1;
			}
		}
		pm[r] = now() - t;
		t = now();
		for (size_t off = 0; off < len; off += CHUNK) {
			struct iovec l = { copy, CHUNK }, rm = { theirs + off, CHUNK };
			if (process_vm_readv(pid, &l, 1, &rm, 1, 0) != CHUNK) {
				perror("drain_copy: process_vm_readv");
				kill(pid, SIGKILL);
				return 1;
			}
		}
		vm[r] = now() - t;
		t = now();
		for (size_t off = 0; off < len; off += CHUNK) {
			memcpy(copy, mine + off, CHUNK);
			__asm__ volatile("" : : "r"(copy) : "memory");
		}
		sh[r] = now() - t;
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	qsort(pm, (size_t)rounds, sizeof(double), cmp);
	qsort(vm, (size_t)rounds, sizeof(double), cmp);
	qsort(sh, (size_t)rounds, sizeof(double), cmp);
	double recs = len / 16.0, p = pm[rounds / 2], v = vm[rounds / 2], s = sh[rounds / 2];
	printf("drain_copy: %zu MiB in 512 KiB chunks, median of %d rounds\n", mib, rounds);
	printf("  proc_mem  %6.2f ns/record  %6.2f GB/s\n", p / recs * 1e9, len / p / 1e9);
	printf("  vm_readv  %6.2f ns/record  %6.2f GB/s\n", v / recs * 1e9, len / v / 1e9);
	printf("  shared    %6.2f ns/record  %6.2f GB/s\n", s / recs * 1e9, len / s / 1e9);
	return 0;
}
