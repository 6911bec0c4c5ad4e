/* SPDX-License-Identifier: MIT */
/* Patching the tracer's sites in a live process (lib/trace/trace_sites.c,
 * lib/trace/trace_patch.c).  This file is itself built with the xprobes-trace
 * flags (lib/trace.mk), so its own functions are the patch sites, and it
 * dlopen()s a traced library (tests/trace/libtracee.c).  The hook the
 * trampolines jump to is a counter of ours: the tests see calls happen. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "unit.h"
#include "base/base.h"
#include "trace/trace.h"
#include "trace/trace_text.h"

#include <xprobes/trace.h>

/* The hook: counts, and returns into the function (stack: its return
 * address).  Touches no register but the flags, as a hook must. */
void test_hook(void);
unsigned long test_hook_calls;
__asm__(".text\n"
	"test_hook:\n"
	"lock incq test_hook_calls(%rip)\n"
	"ret\n");

extern const uintptr_t __start___patchable_function_entries[]
	__attribute__((visibility("hidden")));
extern const uintptr_t __stop___patchable_function_entries[]
	__attribute__((visibility("hidden")));

/* Functions with known results, called by the tests and their threads. */
__attribute__((noinline)) long fib(int n)
{
	return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

__attribute__((noinline)) double scale(double x, int k)
{
	return x * k + 0.5;
}

XPROBES_NOTRACE __attribute__((noinline)) long untraced(long x)
{
	return x * 3;
}

static int (*lib_sum_squares)(int);
static int (*lib_square)(int);
static int (*lib_untraced)(int);

/* One round of every function: a fixed value whatever is patched. */
static long round_value(void)
{
	return fib(15) + (long)scale(2.0, 3) + untraced(5) + lib_sum_squares(10) + lib_untraced(1);
}
#define ROUND_VALUE (610 + 6 + 15 + 285 + 8)

static const struct xp_trace_object *object_with(uintptr_t addr)
{
	for (size_t i = 0; i < xp_trace_nobjects; i++) {
		const struct xp_trace_object *o = xp_trace_objects[i];
		for (size_t j = 0; j < o->nsites; j++)
			if (o->sites[j] == addr)
				return o;
	}
	return NULL;
}

static int is_call_to_tramp(uintptr_t site)
{
	const struct xp_trace_object *o = object_with(site);
	const uint8_t *b = (const uint8_t *)site;
	int32_t rel;
	memcpy(&rel, b + 1, 4);
	return o && b[0] == XP_TRACE_CALL && site + 5 + (uintptr_t)(intptr_t)rel == (uintptr_t)o->trampoline;
}

static size_t all_sites(uint8_t (**bytes)[5])
{
	size_t n = 0;
	for (size_t i = 0; i < xp_trace_nobjects; i++)
		n += xp_trace_objects[i]->nsites;
	*bytes = calloc(n ? n : 1, 5);
	size_t k = 0;
	for (size_t i = 0; i < xp_trace_nobjects; i++)
		for (size_t j = 0; j < xp_trace_objects[i]->nsites; j++)
			memcpy((*bytes)[k++], (const void *)xp_trace_objects[i]->sites[j], 5);
	return n;
}

static int group_setup(void **state)
{
	(void)state;
	char path[4096];
	const char *b = getenv("XPROBES_TEST_BUILD");
	snprintf(path, sizeof(path), "%s/tests/trace/libtracee-%s.so", b ? b : "build",
		 getenv("TRACE_LIB_CC") ? getenv("TRACE_LIB_CC") : "gcc");
	void *h = dlopen(path, RTLD_NOW);
	if (!h) {
		fprintf(stderr, "%s\n", dlerror());
		return -1;
	}
	*(void **)&lib_sum_squares = dlsym(h, "tracee_sum_squares");
	*(void **)&lib_square = dlsym(h, "tracee_square");
	*(void **)&lib_untraced = dlsym(h, "tracee_untraced");
	xp_trace_hook_target = test_hook;
	return lib_sum_squares && lib_square && lib_untraced ? 0 : -1;
}

/* gcc's 90 x5 became one NOP before main, 66 66 66 66 90, a NOP from
 * every byte on (a uprobe resumes one byte on); clang's NOP was left
 * alone. */
static void test_normalized(void **state)
{
	(void)state;
	size_t n = __stop___patchable_function_entries - __start___patchable_function_entries;
	assert_true(n >= 4);
	int found_fib = 0;
	for (size_t i = 0; i < n; i++) {
		const uint8_t *b = (const uint8_t *)__start___patchable_function_entries[i];
		assert_true(xp_trace_site_is_nop(b));
		assert_int_not_equal(b[0], 0x90);
		found_fib |= __start___patchable_function_entries[i] == (uintptr_t)fib;
	}
	assert_true(found_fib);
	const char *lib_cc = getenv("TRACE_LIB_CC");
	assert_memory_equal((const void *)(uintptr_t)lib_square,
			    lib_cc && !strcmp(lib_cc, "clang") ? "\x0f\x1f\x44\x00\x08" :
			    "\x66\x66\x66\x66\x90", 5);
#ifndef __clang__
	assert_memory_equal((const void *)(uintptr_t)fib, "\x66\x66\x66\x66\x90", 5);
#endif
}

/* Every function, of the program and of the dlopen()ed library, is a site
 * at its own address; the opted-out ones are not. */
static void test_discovery(void **state)
{
	(void)state;
	assert_int_equal(xp_trace_objects_refresh(), 0);
	assert_int_equal(xp_trace_nunpatchable, 0);
	const struct xp_trace_object *prog = object_with((uintptr_t)fib);
	const struct xp_trace_object *lib = object_with((uintptr_t)lib_square);
	assert_non_null(prog);
	assert_non_null(lib);
	assert_ptr_not_equal(prog, lib);
	assert_ptr_equal(object_with((uintptr_t)scale), prog);
	assert_ptr_equal(object_with((uintptr_t)lib_sum_squares), lib);
	assert_null(object_with((uintptr_t)untraced));
	assert_null(object_with((uintptr_t)lib_untraced));
	/* The program's sites are its table, sorted, none lost. */
	size_t n = __stop___patchable_function_entries - __start___patchable_function_entries;
	assert_int_equal(prog->nsites, n);
	for (size_t i = 1; i < prog->nsites; i++)
		assert_true(prog->sites[i - 1] < prog->sites[i]);
	assert_non_null(strstr(prog->path, "test_trace_patch"));
	assert_non_null(strstr(lib->path, "libtracee"));
	/* Refreshing again changes nothing. */
	assert_int_equal(xp_trace_objects_refresh(), 0);
	assert_int_equal(object_with((uintptr_t)fib)->nsites, n);
}

/* On: the sites are calls and the hook runs; off: NOPs again, no hook;
 * the results never change. */
static void test_on_off(void **state)
{
	(void)state;
	assert_int_equal(xp_trace_objects_refresh(), 0);
	assert_int_equal(round_value(), ROUND_VALUE);
	uint8_t fib_nop[5], lib_nop[5];
	memcpy(fib_nop, (const void *)(uintptr_t)fib, 5);
	memcpy(lib_nop, (const void *)(uintptr_t)lib_square, 5);
	unsigned long swaps = xp_trace_swaps;
	assert_int_equal(xp_trace_patch_on(NULL, 0), 0);
	/* One swap a run of pages: at least one per object, not one a site. */
	unsigned long on_swaps = xp_trace_swaps - swaps;
	assert_true(on_swaps >= 2);
	assert_true(on_swaps < xp_trace_objects[0]->nsites + xp_trace_objects[1]->nsites);
	assert_true(is_call_to_tramp((uintptr_t)fib));
	assert_true(is_call_to_tramp((uintptr_t)lib_square));
	unsigned long before = test_hook_calls;
	assert_int_equal(round_value(), ROUND_VALUE);
	/* At least sum_squares and its 10 calls of square (noinline, in
	 * another object: calls, whatever the optimizer did to fib). */
	assert_true(test_hook_calls - before >= 11);
	before = test_hook_calls;
	for (int i = 0; i < 100; i++)
		assert_int_equal(lib_square(i), i * i);
	assert_int_equal(test_hook_calls - before, 100);

	swaps = xp_trace_swaps;
	assert_int_equal(xp_trace_patch_off(), 0);
	assert_int_equal(xp_trace_swaps - swaps, on_swaps);
	/* Each site has its own NOP back, the one it had. */
	assert_memory_equal((const void *)(uintptr_t)fib, fib_nop, 5);
	assert_memory_equal((const void *)(uintptr_t)lib_square, lib_nop, 5);
	before = test_hook_calls;
	assert_int_equal(round_value(), ROUND_VALUE);
	for (int i = 0; i < 100; i++)
		assert_int_equal(lib_square(i), i * i);
	assert_int_equal(test_hook_calls, before);
	/* Nothing left to switch: no swap at all. */
	swaps = xp_trace_swaps;
	assert_int_equal(xp_trace_patch_off(), 0);
	assert_int_equal(xp_trace_swaps, swaps);
}

/* Only the sites asked for; an address that is no site is refused. */
static void test_select(void **state)
{
	(void)state;
	assert_int_equal(xp_trace_objects_refresh(), 0);
	uintptr_t want[] = { (uintptr_t)lib_square, (uintptr_t)scale };
	assert_int_equal(xp_trace_patch_on(want, 2), 0);
	assert_true(is_call_to_tramp((uintptr_t)scale));
	assert_true(is_call_to_tramp((uintptr_t)lib_square));
	assert_true(xp_trace_site_is_nop((const uint8_t *)(uintptr_t)fib));
	uintptr_t bad = (uintptr_t)fib + 1;
	assert_int_equal(xp_trace_patch_on(&bad, 1), -EINVAL);
	assert_true(xp_trace_site_is_nop((const uint8_t *)(uintptr_t)fib));
	assert_int_equal(xp_trace_patch_off(), 0);
	assert_true(xp_trace_site_is_nop((const uint8_t *)(uintptr_t)scale));
}

/* Threads calling the functions flat out while the sites flip. */
static volatile int stop_threads;
static void *caller(void *arg)
{
	long *bad = arg;
	while (!stop_threads)
		if (round_value() != ROUND_VALUE)
			(*bad)++;
	return NULL;
}

static void test_flip_under_load(void **state)
{
	(void)state;
	assert_int_equal(xp_trace_objects_refresh(), 0);
	pthread_t t[2];
	long bad[2] = { 0, 0 };
	stop_threads = 0;
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&t[i], NULL, caller, &bad[i]), 0);
	unsigned long before = test_hook_calls;
	for (int i = 0; i < 1000; i++) {
		if (xp_trace_patch_on(NULL, 0) != 0)
			fail_msg("%d: %s", i, xp_trace_patch_error);
		assert_int_equal(xp_trace_patch_off(), 0);
	}
	stop_threads = 1;
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	assert_int_equal(bad[0] + bad[1], 0);
	assert_true(test_hook_calls > before); /* the threads did go through the calls */
	assert_true(xp_trace_site_is_nop((const uint8_t *)(uintptr_t)fib));
}

/* The switch installs no signal handler: the program's SIGTRAP handler
 * stays where it put it and gets its own traps. */
static volatile sig_atomic_t prog_traps;
static void prog_handler(int sig, siginfo_t *si, void *ctx)
{
	(void)sig;
	(void)si;
	(void)ctx;
	prog_traps++;
}

static void test_signals_untouched(void **state)
{
	(void)state;
	struct sigaction sa, saved, now;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = prog_handler;
	sa.sa_flags = SA_SIGINFO;
	assert_int_equal(sigaction(SIGTRAP, &sa, &saved), 0);
	assert_int_equal(xp_trace_objects_refresh(), 0);
	assert_int_equal(xp_trace_patch_on(NULL, 0), 0);
	assert_int_equal(sigaction(SIGTRAP, NULL, &now), 0);
	assert_ptr_equal(now.sa_sigaction, prog_handler);
	prog_traps = 0;
	__asm__ volatile("int3"); /* the program's own */
	assert_int_equal(prog_traps, 1);
	assert_int_equal(xp_trace_patch_off(), 0);
	assert_int_equal(sigaction(SIGTRAP, &saved, NULL), 0);
	assert_int_equal(round_value(), ROUND_VALUE);
}

/* The text stays the file's in the kernel's eyes (maps, perf, gdb, and
 * uprobes, which find text by inode and offset). */
static void test_text_still_names_its_file(void **state)
{
	(void)state;
	assert_int_equal(xp_trace_objects_refresh(), 0);
	assert_int_equal(xp_trace_patch_on(NULL, 0), 0);
	assert_true(is_call_to_tramp((uintptr_t)fib));
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	assert_true(n > 0);
	self[n] = '\0';
	FILE *f = fopen("/proc/self/maps", "r");
	assert_non_null(f);
	char line[8192];
	int named = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && (uintptr_t)fib >= lo &&
		    (uintptr_t)fib < hi)
			named = strstr(line, self) != NULL && strstr(line, "r-xp") != NULL;
	}
	fclose(f);
	assert_true(named);
	assert_int_equal(xp_trace_patch_off(), 0);
}

/* A forked child switching its sites writes its own text, not its
 * parent's (/proc/self/mem opened before the fork names the parent). */
static void test_fork_child_patches_itself(void **state)
{
	(void)state;
	assert_int_equal(xp_trace_objects_refresh(), 0);
	uintptr_t want = (uintptr_t)scale;
	assert_int_equal(xp_trace_patch_on(&want, 1), 0); /* opens it here */
	assert_int_equal(xp_trace_patch_off(), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int ok = xp_trace_patch_on(NULL, 0) == 0 && is_call_to_tramp((uintptr_t)fib) &&
			 round_value() == ROUND_VALUE && xp_trace_patch_off() == 0;
		_exit(ok ? 0 : 1);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	/* The parent's sites never moved. */
	assert_true(xp_trace_site_is_nop((const uint8_t *)(uintptr_t)fib));
	assert_true(xp_trace_site_is_nop((const uint8_t *)(uintptr_t)scale));
}

/* A library unloaded goes from the list with its trampoline; loaded
 * again, it is found and switched like a new one. */
static void test_dlclose_and_reload(void **state)
{
	(void)state;
	char path[4096];
	const char *b = getenv("XPROBES_TEST_BUILD");
	const char *loaded = getenv("TRACE_LIB_CC") ? getenv("TRACE_LIB_CC") : "gcc";
	snprintf(path, sizeof(path), "%s/tests/trace/libtracee-%s.so", b ? b : "build",
		 strcmp(loaded, "gcc") == 0 ? "clang" : "gcc"); /* the one not loaded yet */
	for (int round = 0; round < 2; round++) {
		void *h = dlopen(path, RTLD_NOW);
		assert_non_null(h);
		int (*sq)(int);
		*(void **)&sq = dlsym(h, "tracee_square");
		assert_non_null(sq);
		assert_int_equal(xp_trace_objects_refresh(), 0);
		size_t with = xp_trace_nobjects;
		assert_non_null(object_with((uintptr_t)sq));
		assert_int_equal(xp_trace_patch_on(NULL, 0), 0);
		assert_true(is_call_to_tramp((uintptr_t)sq));
		assert_int_equal(sq(9), 81);
		assert_int_equal(xp_trace_patch_off(), 0);
		assert_int_equal(dlclose(h), 0);
		assert_int_equal(xp_trace_objects_refresh(), 0);
		assert_int_equal(xp_trace_nobjects, with - 1);
	}
}

/* A thread that blocks every signal around traced calls, as
 * many programs do around a critical section, and a signal handler
 * installed with a full mask that calls traced code: neither may die
 * while the sites flip under it, since no trap is ever needed. */
static volatile int masked_stop;
static void masked_handler(int sig)
{
	(void)sig;
	if (round_value() != ROUND_VALUE)
		abort();
}

static void *masked_caller(void *arg)
{
	long *rounds = arg;
	sigset_t all, old;
	sigfillset(&all);
	while (!masked_stop) {
		pthread_sigmask(SIG_BLOCK, &all, &old);
		for (int i = 0; i < 20; i++)
			if (round_value() != ROUND_VALUE)
				abort();
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		(*rounds)++;
	}
	return NULL;
}

static void test_flip_while_signals_blocked(void **state)
{
	(void)state;
	assert_int_equal(xp_trace_objects_refresh(), 0);
	struct sigaction sa, saved;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = masked_handler;
	sigfillset(&sa.sa_mask); /* SIGTRAP blocked while it runs */
	assert_int_equal(sigaction(SIGUSR1, &sa, &saved), 0);
	pthread_t t;
	long rounds = 0;
	masked_stop = 0;
	assert_int_equal(pthread_create(&t, NULL, masked_caller, &rounds), 0);
	unsigned long before = test_hook_calls;
	for (int i = 0; i < 500; i++) {
		if (xp_trace_patch_on(NULL, 0) != 0)
			fail_msg("%d: %s", i, xp_trace_patch_error);
		pthread_kill(t, SIGUSR1);
		raise(SIGUSR1);
		assert_int_equal(xp_trace_patch_off(), 0);
	}
	masked_stop = 1;
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(sigaction(SIGUSR1, &saved, NULL), 0);
	assert_true(rounds > 0);
	assert_true(test_hook_calls > before);
}

static int same_bytes(uint8_t (*a)[5], size_t n)
{
	uint8_t (*b)[5];
	size_t m = all_sites(&b);
	int same = m == n && memcmp(a, b, n * 5) == 0;
	free(b);
	return same;
}

/* Every site as in a, but loose's, which may also be NOPs. */
static int same_but(uint8_t (*a)[5], size_t n, const struct xp_trace_object *loose)
{
	size_t k = 0;
	for (size_t i = 0; i < xp_trace_nobjects; i++)
		for (size_t j = 0; j < xp_trace_objects[i]->nsites; j++, k++) {
			const uint8_t *b = (const uint8_t *)xp_trace_objects[i]->sites[j];
			if (k >= n || (memcmp(a[k], b, 5) != 0 &&
				       (xp_trace_objects[i] != loose || !xp_trace_site_is_nop(b))))
				return 0;
		}
	return k == n;
}

/* Every fault point of one switch (dir: on or off) in turn: a failed
 * switch leaves every site exactly as it was (but loose's, when a stop
 * could switch them only from their spare), and the program computes the
 * same. */
static void fault_loop_but(int dir, const struct xp_trace_object *loose)
{
	uint8_t (*before)[5];
	size_t n = all_sites(&before);
	int done = 0, failures = 0;
	for (long k = 0; !done && k < 100000; k++) {
		xp_fault_countdown = k;
		int rc = dir ? xp_trace_patch_on(NULL, 0) : xp_trace_patch_off();
		int fired = xp_fault_countdown < 0;
		xp_fault_countdown = -1;
		if (rc == 0) {
			assert_false(fired);
			done = 1;
			break;
		}
		assert_true(fired);
		assert_true(rc < 0);
		assert_true(loose ? same_but(before, n, loose) : same_bytes(before, n));
		assert_int_equal(round_value(), ROUND_VALUE);
		failures++;
	}
	assert_true(done);
	assert_true(failures > 3); /* failed writes at each step were seen */
	free(before);
}

static void fault_loop(int dir)
{
	fault_loop_but(dir, NULL);
}

static void test_faults(void **state)
{
	(void)state;
	assert_int_equal(xp_trace_objects_refresh(), 0);
	for (int dir = 1; dir >= 0; dir--) {
		fault_loop(dir);
		assert_true(dir ? is_call_to_tramp((uintptr_t)fib)
				: xp_trace_site_is_nop((const uint8_t *)(uintptr_t)fib));
	}
	assert_int_equal(round_value(), ROUND_VALUE);
}

/* Under a W^X policy that refuses to make written pages executable, the
 * copies are written through /proc/self/mem instead (forced here): the
 * same switches, the same faults handled. */
static void test_via_proc_mem(void **state)
{
	(void)state;
	for (int how = 1; how <= 2; how++) { /* from the start; after a refusal */
		xp_trace_patch_via_mem = how;
		assert_int_equal(xp_trace_objects_refresh(), 0);
		assert_int_equal(xp_trace_patch_on(NULL, 0), 0);
		assert_true(is_call_to_tramp((uintptr_t)fib));
		assert_int_equal(round_value(), ROUND_VALUE);
		assert_int_equal(xp_trace_patch_off(), 0);
		assert_true(xp_trace_site_is_nop((const uint8_t *)(uintptr_t)fib));
		fault_loop(1);
		fault_loop(0);
	}
	xp_trace_patch_via_mem = 0;
	assert_int_equal(round_value(), ROUND_VALUE);
}

/* The lines of /proc/self/maps, and how many. */
static char *maps_text(size_t *lines)
{
	FILE *f = fopen("/proc/self/maps", "r");
	assert_non_null(f);
	size_t cap = 1 << 16, n = 0;
	char *t = malloc(cap);
	size_t got;
	while ((got = fread(t + n, 1, cap - n - 1, f)) > 0)
		if ((n += got) + 1 >= cap)
			t = realloc(t, cap *= 2);
	fclose(f);
	t[n] = '\0';
	*lines = 0;
	for (size_t i = 0; i < n; i++)
		*lines += t[i] == '\n';
	return t;
}

/* The mappings of this program's own file but its spare (---p), joined. */
static char *own_lines(void)
{
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	assert_true(n > 0);
	self[n] = '\0';
	size_t lines;
	char *t = maps_text(&lines), *out = calloc(1, strlen(t) + 1);
	for (char *l = strtok(t, "\n"); l; l = strtok(NULL, "\n"))
		if (strstr(l, self) && strlen(strstr(l, self)) == strlen(self) && !strstr(l, " ---p "))
			strcat(strcat(out, l), "\n");
	free(t);
	return out;
}

/* Mappings of files (the allocator's anonymous ones, ASan's among them,
 * come and go with the tests' own allocations). */
static size_t file_maps(void)
{
	size_t lines, n = 0;
	char *t = maps_text(&lines);
	for (char *l = strtok(t, "\n"); l; l = strtok(NULL, "\n")) {
		unsigned long long ino = 0;
		n += sscanf(l, "%*s %*s %*s %*s %llu", &ino) == 1 && ino != 0;
	}
	free(t);
	return n;
}

/* One copy and one mremap a text segment: the program's own mappings are
 * the same lines (addresses, offsets, permissions) before, while traced
 * and after, and cycles leave nothing behind. */
static void test_mappings_kept(void **state)
{
	(void)state;
	assert_int_equal(xp_trace_objects_refresh(), 0);
	assert_int_equal(xp_trace_patch_on(NULL, 0), 0); /* trampolines made */
	assert_int_equal(xp_trace_patch_off(), 0);
	size_t before = file_maps();
	char *own = own_lines();
	for (int i = 0; i < 20; i++) {
		assert_int_equal(xp_trace_patch_on(NULL, 0), 0);
		char *now = own_lines();
		assert_string_equal(now, own);
		free(now);
		assert_int_equal(file_maps(), before + xp_spares_count()); /* a spare each */
		assert_int_equal(xp_spares_count(), xp_trace_nobjects);
		assert_int_equal(xp_trace_patch_off(), 0);
		now = own_lines();
		assert_string_equal(now, own);
		free(now);
		assert_int_equal(file_maps(), before);
		assert_int_equal(xp_spares_count(), 0);
	}
	free(own);
}

/* A switch that would take the process past vm.max_map_count is refused
 * before anything changes (a test limit: the real one is global). */
static void test_map_limit(void **state)
{
	(void)state;
	assert_int_equal(xp_trace_objects_refresh(), 0);
	uint8_t (*before)[5];
	size_t n = all_sites(&before), lines;
	free(maps_text(&lines));
	unsigned long swaps = xp_trace_swaps;
	xp_trace_map_limit = (long)lines + 6;
	assert_int_equal(xp_trace_patch_on(NULL, 0), -ENOSPC);
	assert_non_null(strstr(xp_trace_patch_error, "vm.max_map_count"));
	assert_true(same_bytes(before, n));
	assert_int_equal(xp_trace_swaps, swaps);
	xp_trace_map_limit = (long)lines + 64;
	assert_int_equal(xp_trace_patch_on(NULL, 0), 0);
	xp_trace_map_limit = 0;
	assert_int_equal(xp_trace_patch_off(), 0);
	assert_true(same_bytes(before, n));
	free(before);
}

/* Descriptors of this process that name a /proc/PID/mem file. */
static int mem_fds(void)
{
	int found = 0;
	char link[64], to[4096];
	for (int fd = 0; fd < 1024; fd++) {
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		ssize_t n = readlink(link, to, sizeof(to) - 1);
		if (n <= 0)
			continue;
		to[n] = '\0';
		found += strncmp(to, "/proc/", 6) == 0 && strcmp(to + strlen(to) - 4, "/mem") == 0;
	}
	return found;
}

/* Between switches the agent holds no descriptor: none a program could
 * close and reuse, none a child inherits.  A descriptor the program put
 * where the old /proc/self/mem one was is neither written nor closed. */
static void test_no_descriptor_kept(void **state)
{
	(void)state;
	assert_int_equal(xp_trace_objects_refresh(), 0);
	int probe = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_true(probe >= 0);
	close(probe); /* the lowest free number */
	for (int via_mem = 0; via_mem < 2; via_mem++) {
		xp_trace_patch_via_mem = via_mem;
		assert_int_equal(xp_trace_patch_on(NULL, 0), 0);
		assert_int_equal(mem_fds(), 0);
		int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		assert_int_equal(fd, probe); /* nothing of ours left at that number */
		close(fd);
		assert_int_equal(xp_trace_patch_off(), 0);
		assert_int_equal(mem_fds(), 0);
	}
	xp_trace_patch_via_mem = 0;
	/* The program's own file at the lowest number, through a switch. */
	char path[] = "/tmp/xp-trace-log-XXXXXX";
	int log = mkstemp(path);
	assert_true(log >= 0);
	assert_int_equal(write(log, "log\n", 4), 4);
	assert_int_equal(xp_trace_patch_on(NULL, 0), 0);
	assert_int_equal(xp_trace_patch_off(), 0);
	struct stat st;
	assert_int_equal(fstat(log, &st), 0); /* still open, still ours */
	assert_int_equal(st.st_size, 4);
	close(log);
	unlink(path);
}

/* Effective CAP_SYS_ADMIN and CAP_CHECKPOINT_RESTORE of this thread on or
 * off: without them /proc/self/map_files cannot be opened, as for any
 * program not run by root. */
static void map_files_caps(int on)
{
	struct { uint32_t version; int pid; } hdr = { 0x20080522, 0 }; /* v3 */
	struct { uint32_t effective, permitted, inheritable; } data[2];
	if (syscall(SYS_capget, &hdr, data) != 0)
		return;
	uint32_t admin = 1u << 21, restore = 1u << (40 - 32);
	if (on) {
		data[0].effective |= data[0].permitted & admin;
		data[1].effective |= data[1].permitted & restore;
	} else {
		data[0].effective &= ~admin;
		data[1].effective &= ~restore;
	}
	assert_int_equal(syscall(SYS_capset, &hdr, data), 0);
}

static void copy_file(const char *from, const char *to)
{
	FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
	assert_non_null(a);
	assert_non_null(b);
	char buf[65536];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), a)) > 0)
		assert_int_equal(fwrite(buf, 1, n, b), n);
	fclose(a);
	assert_int_equal(fclose(b), 0);
}

/* A library renamed over by a new copy while traced (a package upgrade):
 * stop makes its copies from the spare kept at start, whatever fails on
 * the way; a start after the upgrade is refused, saying why. */
static void test_stop_after_upgrade(void **state)
{
	(void)state;
	char dir[] = "/tmp/xp-upgrade-XXXXXX", lib[4096], next[4096], from[4096];
	assert_non_null(mkdtemp(dir));
	const char *b = getenv("XPROBES_TEST_BUILD");
	snprintf(from, sizeof(from), "%s/tests/trace/libtracee-clang.so", b ? b : "build");
	snprintf(lib, sizeof(lib), "%s/libupgraded.so", dir);
	snprintf(next, sizeof(next), "%s/libupgraded.so.new", dir);
	copy_file(from, lib);
	void *h = dlopen(lib, RTLD_NOW);
	assert_non_null(h);
	int (*sq)(int);
	*(void **)&sq = dlsym(h, "tracee_square");
	assert_non_null(sq);
	map_files_caps(0);
	assert_int_equal(xp_trace_objects_refresh(), 0);
	assert_int_equal(xp_trace_patch_on(NULL, 0), 0);
	assert_true(is_call_to_tramp((uintptr_t)sq));
	copy_file(from, next);
	assert_int_equal(rename(next, lib), 0);
	fault_loop_but(0, object_with((uintptr_t)sq));
	assert_true(xp_trace_site_is_nop((const uint8_t *)(uintptr_t)sq));
	assert_int_equal(sq(7), 49);
	assert_int_equal(round_value(), ROUND_VALUE);
	uintptr_t want = (uintptr_t)sq;
	assert_int_equal(xp_trace_patch_on(&want, 1), -ENOENT);
	assert_non_null(strstr(xp_trace_patch_error, "libupgraded.so"));
	assert_true(xp_trace_site_is_nop((const uint8_t *)(uintptr_t)sq));
	map_files_caps(1);
	assert_int_equal(dlclose(h), 0);
	assert_int_equal(xp_trace_objects_refresh(), 0);
	unlink(lib);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_normalized),
		cmocka_unit_test(test_discovery),
		cmocka_unit_test(test_on_off),
		cmocka_unit_test(test_select),
		cmocka_unit_test(test_flip_under_load),
		cmocka_unit_test(test_signals_untouched),
		cmocka_unit_test(test_text_still_names_its_file),
		cmocka_unit_test(test_fork_child_patches_itself),
		cmocka_unit_test(test_dlclose_and_reload),
		cmocka_unit_test(test_flip_while_signals_blocked),
		cmocka_unit_test(test_faults),
		cmocka_unit_test(test_via_proc_mem),
		cmocka_unit_test(test_mappings_kept),
		cmocka_unit_test(test_map_limit),
		cmocka_unit_test(test_no_descriptor_kept),
		cmocka_unit_test(test_stop_after_upgrade),
	};
	return cmocka_run_group_tests(tests, group_setup, NULL);
}
