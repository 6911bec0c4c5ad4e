/* SPDX-License-Identifier: MIT */
/* uftrace data directories (tools/trace_uftrace.c): synthetic events are
 * written and read back the same, names through the .sym files written
 * from this test's own ELF file; a lost record round-trips; a recording
 * that starts mid-call never goes below depth 0; an unwinding exit closes
 * the calls it skipped; a full disk is reported with the file's name; an
 * existing directory is refused or (a uftrace one, when told) replaced;
 * and the reader refuses malformed directories with a clear message.  The
 * tools' files are compiled in, as unit tests link only the agent's
 * objects. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../tools/xprobes/trace_bounds.c"
#include "../../tools/xprobes/trace_argspec.c"
#include "../../tools/xprobes/trace_argfmt.c"
#include "../../tools/xprobes/trace_format.c"
#include "../../tools/xprobes/trace_uftrace.c"
#include "../../tools/xprobes/trace_libcall.c"
#include "../../tools/xprobes/trace_labels.c"
#include "unit.h"

__attribute__((noinline, used)) void uft_test_outer(void)
{
	__asm__ volatile("");
}

__attribute__((noinline, used)) void uft_test_inner(void)
{
	__asm__ volatile("");
}

#define SITE_ADDR 0x9000u

static const char *site_cb(void *ctx, uint64_t addr)
{
	(void)ctx;
	return addr == SITE_ADDR ? "prov:hit" : NULL;
}

static int base_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	*(uint64_t *)data = info->dlpi_addr; /* the first is the executable */
	return 1;
}

static char exe[4096];

/* A fresh directory name under /tmp (not created). */
static char *tmpdir_name(void)
{
	char tmpl[] = "/tmp/uft-test-XXXXXX";
	char *d = mkdtemp(tmpl);
	assert_non_null(d);
	char *name;
	assert_true(asprintf(&name, "%s/rec", d) > 0);
	return name;
}

static void rm_rf(const char *dir)
{
	char *cmd;
	assert_true(asprintf(&cmd, "rm -rf '%s'", dir) > 0);
	assert_int_equal(system(cmd), 0);
	free(cmd);
}

static struct uft_session session(const struct uft_object *objs, size_t n)
{
	return (struct uft_session){ .pid = 4242, .exe = exe, .cmdline = "test --x",
				     .mono_ns = 1000, .real_ns = 1700000000000000000ull,
				     .maps = NULL, .objects = objs, .nobjects = n,
				     .site_name = site_cb };
}

/* The 16-byte records of DIR/TID.dat. */
static size_t raw_records(const char *dir, int tid, uint64_t (*out)[2], size_t max)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/%d.dat", dir, tid);
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	size_t n = fread(out, 16, max, f);
	fclose(f);
	return n;
}

#define E(ns, a) { (ns), (a), XP_TRACE_ENTRY }
#define X(ns, a) { (ns), (a), XP_TRACE_EXIT }
#define S(ns, a) { (ns), (a), XP_TRACE_SITE }
#define L(ns, n) { (ns), (n), XP_TRACE_LOST }
#define N(a) (sizeof(a) / sizeof((a)[0]))

static void test_round_trip(void **state)
{
	(void)state;
	uint64_t base = 0, outer = (uint64_t)(uintptr_t)&uft_test_outer,
		 inner = (uint64_t)(uintptr_t)&uft_test_inner;
	dl_iterate_phdr(base_cb, &base);
	struct uft_object obj = { .path = exe, .base = base, .file = "/proc/self/exe" };
	struct uft_session s = session(&obj, 1);
	char *dir = tmpdir_name();
	struct uft_writer *w = uft_open(dir, &s);
	assert_non_null(w);
	const struct tf_event a1[] = { E(2000, outer), E(2100, inner), S(2150, SITE_ADDR) };
	const struct tf_event a2[] = { X(2200, inner), L(2300, 17), E(2400, inner), X(2500, inner),
				       X(2600, outer) };
	const struct tf_event b1[] = { E(3000, inner), X(3100, inner) };
	assert_int_equal(uft_thread(w, 100, "main-thread"), 0);
	assert_int_equal(uft_thread(w, 101, "worker"), 0);
	assert_int_equal(uft_append(w, 100, a1, N(a1)), 0); /* depth carried across calls */
	assert_int_equal(uft_append(w, 101, b1, N(b1)), 0);
	assert_int_equal(uft_append(w, 100, a2, N(a2)), 0);
	assert_int_equal(uft_thread(w, 101, "renamed"), 0);
	assert_int_equal(uft_skipped(w), 0);
	/* Readable while the stream goes on (a tool that dies leaves a recording). */
	struct uft_recording early;
	assert_int_equal(uft_load(dir, &early), 0);
	assert_int_equal(early.nthreads, 2);
	assert_int_equal(early.threads[0].n, N(a1) + N(a2));
	uft_free(&early);
	assert_int_equal(uft_close(w), 0);

	/* Depths as uftrace pairs them: inner at 1, its exits too. */
	uint64_t raw[16][2];
	assert_int_equal(raw_records(dir, 100, raw, 16), 8);
	static const unsigned depth[] = { 0, 1, 0, 1, 1, 1, 1, 0 };
	static const unsigned type[] = { 0, 0, 3, 1, 2, 0, 1, 1 };
	for (size_t i = 0; i < 8; i++) {
		assert_int_equal((raw[i][1] >> 6) & 0x3ff, depth[i]);
		assert_int_equal(raw[i][1] & 3, type[i]);
		assert_int_equal((raw[i][1] >> 3) & 7, 5);
	}

	struct uft_recording r;
	assert_int_equal(uft_load(dir, &r), 0);
	assert_int_equal(r.pid, 4242);
	assert_int_equal(r.nthreads, 2);
	assert_int_equal(r.threads[0].tid, 100);
	assert_int_equal(r.threads[1].tid, 101);
	assert_string_equal(r.thread_names[0], "main-thread");
	assert_string_equal(r.thread_names[1], "renamed");
	assert_string_equal(r.exename, exe);
	assert_int_equal(r.threads[0].n, N(a1) + N(a2));
	assert_int_equal(r.threads[1].n, N(b1));
	for (size_t i = 0; i < r.threads[0].n; i++) {
		const struct tf_event *want = i < N(a1) ? &a1[i] : &a2[i - N(a1)];
		const struct tf_event *got = &r.threads[0].ev[i];
		assert_int_equal(got->ns, want->ns);
		assert_int_equal(got->kind, want->kind);
		if (want->kind == XP_TRACE_SITE)
			assert_string_equal(r.names.site(r.names.ctx, got->addr), "prov:hit");
		else
			assert_int_equal(got->addr, want->addr);
	}
	for (size_t i = 0; i < N(b1); i++) {
		assert_int_equal(r.threads[1].ev[i].ns, b1[i].ns);
		assert_int_equal(r.threads[1].ev[i].addr, b1[i].addr);
		assert_int_equal(r.threads[1].ev[i].kind, b1[i].kind);
	}
	assert_string_equal(r.names.func(r.names.ctx, outer), "uft_test_outer");
	assert_string_equal(r.names.func(r.names.ctx, inner), "uft_test_inner");
	assert_string_equal(r.names.func(r.names.ctx, 0x10), "0x10");

	/* The views print it. */
	char *text = NULL;
	size_t len = 0;
	FILE *o = open_memstream(&text, &len);
	struct tf_trace t = { r.threads, r.nthreads, r.pid, r.origin_ns, r.names, r.args };
	struct tf_filter f = { .min_ns = 0 };
	assert_int_equal(tf_graph(o, &t, &f), 0);
	fclose(o);
	assert_non_null(strstr(text, "uft_test_outer() {"));
	assert_non_null(strstr(text, "/* prov:hit */"));
	assert_non_null(strstr(text, "/* 17 records lost */"));
	free(text);
	uft_free(&r);

	/* info: uftrace's header, then both threads and the command line. */
	char path[4200], buf[4096];
	snprintf(path, sizeof(path), "%s/info", dir);
	FILE *fi = fopen(path, "rb");
	assert_non_null(fi);
	size_t got = fread(buf, 1, sizeof(buf) - 1, fi);
	fclose(fi);
	buf[got] = '\0';
	assert_memory_equal(buf, "Ftrace!\0\4\0\0\0\50\0\1\2", 16);
	assert_non_null(memmem(buf, got, "taskinfo:tids=100,101\n", 22));
	assert_non_null(memmem(buf, got, "cmdline:test --x\n", 17));
	rm_rf(dir);
	free(dir);
}

/* A recording that starts inside calls: an exit without its entry is
 * written as a call of no time with the xprobes:entry_not_recorded event
 * inside, at depth 0, never below, and read back as the exit alone; an
 * exit that unwinds inner calls closes each at its time, at its depth. */
static void test_mid_call_start_and_unwinding(void **state)
{
	(void)state;
	struct uft_session s = session(NULL, 0);
	s.mono_ns = 5000; /* later than the events: task.txt moves back */
	char *dir = tmpdir_name();
	struct uft_writer *w = uft_open(dir, &s);
	assert_non_null(w);
	const struct tf_event ev[] = {
		X(100, 0xa), /* entry before the recording */
		E(200, 0xb), X(300, 0xb),
		X(400, 0xc), /* and its caller's */
		E(500, 0xd), E(600, 0xe), E(700, 0xf),
		X(800, 0xd), /* longjmp out of f and e */
	};
	assert_int_equal(uft_append(w, 7, ev, N(ev)), 0);
	assert_int_equal(uft_skipped(w), 0);
	assert_int_equal(uft_close(w), 0);
	uint64_t raw[16][2];
	assert_int_equal(raw_records(dir, 7, raw, 16), 14);
	enum { MARK = 1000000 }; /* the first user event: xprobes:entry_not_recorded */
	static const struct { uint64_t ns, addr; unsigned type, depth; } want[] = {
		{ 100, 0xa, 0, 0 }, { 100, MARK, 3, 0 }, { 100, 0xa, 1, 0 },
		{ 200, 0xb, 0, 0 }, { 300, 0xb, 1, 0 },
		{ 400, 0xc, 0, 0 }, { 400, MARK, 3, 0 }, { 400, 0xc, 1, 0 },
		{ 500, 0xd, 0, 0 }, { 600, 0xe, 0, 1 },
		{ 700, 0xf, 0, 2 }, { 800, 0xf, 1, 2 }, { 800, 0xe, 1, 1 }, { 800, 0xd, 1, 0 },
	};
	for (size_t i = 0; i < 14; i++) {
		assert_int_equal(raw[i][0], want[i].ns);
		assert_int_equal(raw[i][1] >> 16, want[i].addr);
		assert_int_equal(raw[i][1] & 3, want[i].type);
		assert_int_equal((raw[i][1] >> 6) & 0x3ff, want[i].depth);
	}
	char path[4200], buf[512];
	snprintf(path, sizeof(path), "%s/task.txt", dir);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	assert_non_null(fgets(buf, sizeof(buf), f));
	assert_non_null(strstr(buf, "SESS timestamp=0.000000100 pid=4242"));
	assert_non_null(fgets(buf, sizeof(buf), f));
	assert_string_equal(buf, "TASK timestamp=0.000000100 tid=7 pid=4242\n");
	fclose(f);
	/* An unnamed thread reads back with the executable's name. */
	struct uft_recording r;
	assert_int_equal(uft_load(dir, &r), 0);
	assert_int_equal(r.nthreads, 1);
	assert_string_equal(r.thread_names[0], base_name(exe));
	assert_int_equal(r.threads[0].n, 10); /* each marked call back to its exit */
	assert_int_equal(r.threads[0].ev[0].kind, XP_TRACE_EXIT);
	assert_int_equal(r.threads[0].ev[0].addr, 0xa);
	assert_int_equal(r.threads[0].ev[3].kind, XP_TRACE_EXIT);
	assert_int_equal(r.threads[0].ev[3].addr, 0xc);
	uft_free(&r);
	rm_rf(dir);
	free(dir);
}

/* A call the agent marks left (longjmp): an exit record all the same,
 * after the xprobes:exit_not_recorded event, read back with the mark; and
 * uftrace's own shape, no exit for the calls left: found gone by the
 * depth of the next record. */
static void test_unwound_calls(void **state)
{
	(void)state;
	struct uft_session s = session(NULL, 0);
	char *dir = tmpdir_name();
	struct uft_writer *w = uft_open(dir, &s);
	assert_non_null(w);
	const struct tf_event ev[] = {
		E(100, 0xa), E(200, 0xb), E(300, 0xc),
		X(400, 0xc | XP_TRACE_UNWOUND), X(400, 0xb | XP_TRACE_UNWOUND),
		E(500, 0xd), X(600, 0xd), X(700, 0xa),
	};
	assert_int_equal(uft_append(w, 7, ev, N(ev)), 0);
	assert_int_equal(uft_close(w), 0);
	uint64_t raw[16][2];
	assert_int_equal(raw_records(dir, 7, raw, 16), 10);
	static const struct { uint64_t ns, addr; unsigned type, depth; } want[] = {
		{ 100, 0xa, 0, 0 }, { 200, 0xb, 0, 1 }, { 300, 0xc, 0, 2 },
		{ 400, 1000000, 3, 0 }, { 400, 0xc, 1, 2 }, { 400, 1000000, 3, 0 }, { 400, 0xb, 1, 1 },
		{ 500, 0xd, 0, 1 }, { 600, 0xd, 1, 1 }, { 700, 0xa, 1, 0 },
	};
	for (size_t i = 0; i < 10; i++) {
		assert_int_equal(raw[i][0], want[i].ns);
		assert_int_equal(raw[i][1] >> 16, want[i].addr);
		assert_int_equal(raw[i][1] & 3, want[i].type);
		assert_int_equal((raw[i][1] >> 6) & 0x3ff, want[i].depth);
	}
	struct uft_recording r;
	assert_int_equal(uft_load(dir, &r), 0);
	assert_int_equal(r.threads[0].n, N(ev));
	for (size_t i = 0; i < N(ev); i++) {
		assert_int_equal(r.threads[0].ev[i].kind, ev[i].kind);
		assert_int_equal(r.threads[0].ev[i].addr, ev[i].addr);
	}
	uft_free(&r);
	rm_rf(dir);
	/* uftrace's shape: c and b have no exits; d's entry at depth 1. */
	w = uft_open(dir, &s);
	assert_non_null(w);
	assert_int_equal(uft_thread(w, 7, NULL), 0);
	assert_int_equal(uft_close(w), 0);
	static const struct { uint64_t ns, addr; unsigned type, depth; } theirs[] = {
		{ 100, 0xa, 0, 0 }, { 200, 0xb, 0, 1 }, { 300, 0xc, 0, 2 },
		{ 500, 0xd, 0, 1 }, { 600, 0xd, 1, 1 }, { 700, 0xa, 1, 0 },
	};
	char path[4200];
	snprintf(path, sizeof(path), "%s/7.dat", dir);
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	for (size_t i = 0; i < N(theirs); i++) {
		uint64_t rec[2] = { theirs[i].ns, theirs[i].type | 5u << 3 |
						  (uint64_t)theirs[i].depth << 6 | theirs[i].addr << 16 };
		assert_int_equal(fwrite(rec, 16, 1, f), 1);
	}
	fclose(f);
	assert_int_equal(uft_load(dir, &r), 0);
	assert_int_equal(r.threads[0].n, N(ev));
	for (size_t i = 0; i < N(ev); i++) {
		assert_int_equal(r.threads[0].ev[i].kind, ev[i].kind);
		assert_int_equal(r.threads[0].ev[i].addr, ev[i].addr);
	}
	assert_int_equal(r.threads[0].ev[3].ns, 500); /* found gone at d's entry */
	uft_free(&r);
	rm_rf(dir);
	free(dir);
}

static void test_depth_beyond_the_field(void **state)
{
	(void)state;
	struct uft_session s = session(NULL, 0);
	char *dir = tmpdir_name();
	struct uft_writer *w = uft_open(dir, &s);
	assert_non_null(w);
	enum { DEEP = 1100 };
	struct tf_event *ev = calloc(2 * DEEP, sizeof(*ev));
	for (size_t i = 0; i < DEEP; i++) {
		ev[i] = (struct tf_event){ 10 + i, 0x100 + i, XP_TRACE_ENTRY };
		ev[2 * DEEP - 1 - i] = (struct tf_event){ 10 + 2 * DEEP - i, 0x100 + i, XP_TRACE_EXIT };
	}
	assert_int_equal(uft_append(w, 9, ev, 2 * DEEP), 0);
	uint64_t deep, limited;
	uft_bounded(w, &deep, &limited);
	assert_int_equal(uft_skipped(w), 0);
	assert_int_equal(deep, 2 * (DEEP - UFT_MAX_DEPTH));
	assert_int_equal(limited, 0);
	assert_int_equal(uft_close(w), 0);
	uint64_t (*raw)[2] = calloc(2 * DEEP, 16);
	/* The calls uftrace can show, and one LOST record for the rest. */
	assert_int_equal(raw_records(dir, 9, raw, 2 * DEEP), 2 * UFT_MAX_DEPTH + 1);
	assert_int_equal((raw[UFT_MAX_DEPTH - 1][1] >> 6) & 0x3ff, UFT_MAX_DEPTH - 1);
	assert_int_equal(raw[UFT_MAX_DEPTH][1] & 3, 2);
	assert_int_equal(raw[UFT_MAX_DEPTH][1] >> 16, 2 * (DEEP - UFT_MAX_DEPTH));
	assert_int_equal(raw[UFT_MAX_DEPTH + 1][1] & 3, 1); /* the deepest kept exit */
	free(raw);
	free(ev);
	rm_rf(dir);
	free(dir);
}

/* Entries without end, then exits that match nothing: the stack stays at
 * what uftrace can show, the rest is counted and marked lost at the end,
 * and an unmatched exit is left out. */
static void test_endless_entries(void **state)
{
	(void)state;
	struct uft_session s = session(NULL, 0);
	char *dir = tmpdir_name();
	struct uft_writer *w = uft_open(dir, &s);
	assert_non_null(w);
	enum { N = 100000 };
	struct tf_event *ev = calloc(N, sizeof(*ev));
	for (size_t i = 0; i < N; i++)
		ev[i] = (struct tf_event){ 10 + i, 0x100, XP_TRACE_ENTRY };
	for (int pass = 0; pass < 3; pass++)
		assert_int_equal(uft_append(w, 9, ev, N), 0);
	uint64_t deep, limited;
	uft_bounded(w, &deep, &limited);
	assert_int_equal(deep, 3 * N - UFT_MAX_DEPTH);
	struct tf_event odd = { 10 + N, 0x999, XP_TRACE_EXIT };
	assert_int_equal(uft_append(w, 9, &odd, 1), 0);
	uft_bounded(w, &deep, &limited);
	assert_int_equal(deep, 3 * N - UFT_MAX_DEPTH + 1); /* it closed one beyond */
	assert_int_equal(uft_close(w), 0);
	uint64_t (*raw)[2] = calloc(UFT_MAX_DEPTH + 2, 16);
	assert_int_equal(raw_records(dir, 9, raw, UFT_MAX_DEPTH + 2), UFT_MAX_DEPTH + 1);
	assert_int_equal(raw[UFT_MAX_DEPTH][1] & 3, 2);
	assert_int_equal(raw[UFT_MAX_DEPTH][1] >> 16, 3 * N - UFT_MAX_DEPTH + 1);
	free(raw);
	free(ev);
	rm_rf(dir);
	free(dir);
}

/* A mapped file the target shrinks while the tool reads it: SIGBUS,
 * caught by trace_elf_guard, not the end of the tool. */
static int touch(void *ctx)
{
	return ((volatile const char *)ctx)[4096] + 7;
}

static void test_shrunk_mapping(void **state)
{
	(void)state;
	char path[] = "/tmp/xp-shrink.XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	unlink(path);
	assert_int_equal(ftruncate(fd, 8192), 0);
	char *map = mmap(NULL, 8192, PROT_READ, MAP_SHARED, fd, 0);
	assert_true(map != MAP_FAILED);
	assert_int_equal(trace_elf_guard(touch, map), 7);
	assert_int_equal(ftruncate(fd, 0), 0);
	assert_int_equal(trace_elf_guard(touch, map), TRACE_ELF_SHRANK);
	assert_int_equal(trace_elf_guard(touch, map), TRACE_ELF_SHRANK); /* and again */
	munmap(map, 8192);
	close(fd);
}

static void test_existing_directory(void **state)
{
	(void)state;
	struct uft_session s = session(NULL, 0);
	char *dir = tmpdir_name(), path[4200];
	assert_int_equal(mkdir(dir, 0755), 0);
	struct uft_writer *w = uft_open(dir, &s); /* empty: taken */
	assert_non_null(w);
	assert_int_equal(uft_close(w), 0);
	assert_null(uft_open(dir, &s)); /* now it holds a recording */
	assert_int_equal(errno, EEXIST);
	assert_non_null(strstr(uft_error(NULL), "exists and is not empty"));
	s.overwrite = 1;
	assert_non_null(w = uft_open(dir, &s));
	assert_int_equal(uft_close(w), 0);
	/* Something else is never emptied. */
	snprintf(path, sizeof(path), "%s/info", dir);
	assert_int_equal(unlink(path), 0);
	assert_null(uft_open(dir, &s));
	assert_non_null(strstr(uft_error(NULL), "no uftrace data directory"));
	rm_rf(dir);
	free(dir);
}

/* Fill w's directory until a write fails: it must say which file and why. */
static void fill_until_full(struct uft_writer *w, const char *dir)
{
	enum { BATCH = 4096 };
	struct tf_event *ev = calloc(BATCH, sizeof(*ev));
	for (size_t i = 0; i < BATCH; i++)
		ev[i] = (struct tf_event){ 10 + i, 0x1000, i % 2 ? XP_TRACE_EXIT : XP_TRACE_ENTRY };
	int rc = 0;
	for (int i = 0; i < 64 && !rc; i++)
		rc = uft_append(w, 55, ev, BATCH);
	free(ev);
	assert_int_equal(rc, -1);
	assert_int_equal(errno, ENOSPC);
	char want[4400];
	snprintf(want, sizeof(want), "writing %s/55.dat: No space left on device", dir);
	assert_string_equal(uft_error(w), want);
	/* Sticky, and close reports it too. */
	assert_int_equal(uft_thread(w, 56, NULL), -1);
	assert_int_equal(errno, ENOSPC);
	assert_int_equal(uft_close(w), -1);
	assert_string_equal(uft_error(NULL), want);
}

static void test_full_disk(void **state)
{
	(void)state;
	struct uft_session s = session(NULL, 0);
	char tmpl[] = "/tmp/uft-full-XXXXXX";
	char *mnt = mkdtemp(tmpl);
	assert_non_null(mnt);
	/* A 64 KiB tmpfs in a mount namespace of our own (root), else the
	 * write path on /dev/full. */
	if (unshare(CLONE_NEWNS) == 0 && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
	    mount("uft-test", mnt, "tmpfs", 0, "size=64k") == 0) {
		char dir[4200];
		snprintf(dir, sizeof(dir), "%s/rec", mnt);
		struct uft_writer *w = uft_open(dir, &s);
		assert_non_null(w);
		fill_until_full(w, dir);
		assert_int_equal(umount(mnt), 0);
	} else {
		print_message("no tmpfs (%s): /dev/full instead\n", strerror(errno));
		char *dir = tmpdir_name();
		struct uft_writer *w = uft_open(dir, &s);
		assert_non_null(w);
		int fd = open("/dev/full", O_WRONLY);
		assert_true(fd >= 0);
		assert_int_equal(put(w, fd, "55.dat", "0123456789abcdef", 16), -1);
		close(fd);
		assert_int_equal(errno, ENOSPC);
		char want[4400];
		snprintf(want, sizeof(want), "writing %s/55.dat: No space left on device", dir);
		assert_string_equal(uft_error(w), want);
		assert_int_equal(uft_close(w), -1);
		rm_rf(dir);
		free(dir);
	}
	rmdir(mnt);
}

static void write_file(const char *dir, const char *name, const void *data, size_t len)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	fclose(f);
}

static void write_str(const char *dir, const char *name, const char *text)
{
	write_file(dir, name, text, strlen(text));
}

/* The reader on directories it must refuse, each with its reason. */
static void test_reader_refuses_malformed(void **state)
{
	(void)state;
	struct uft_session s = session(NULL, 0);
	char *dir = tmpdir_name(), path[4200];
	struct uft_writer *w = uft_open(dir, &s);
	assert_non_null(w);
	const struct tf_event ev[] = { E(2000, 0x10), X(2100, 0x10) };
	assert_int_equal(uft_append(w, 3, ev, N(ev)), 0);
	assert_int_equal(uft_close(w), 0);
	struct uft_recording r;

	/* A torn last record (a crash mid-write) is left out. */
	snprintf(path, sizeof(path), "%s/3.dat", dir);
	FILE *f = fopen(path, "ab");
	fwrite("12345", 1, 5, f);
	fclose(f);
	assert_int_equal(uft_load(dir, &r), 0);
	assert_int_equal(r.threads[0].n, 2);
	uft_free(&r);

	/* A record without uftrace's magic. */
	uint64_t bad[2] = { 1, 0 };
	write_file(dir, "3.dat", bad, sizeof(bad));
	assert_int_equal(uft_load(dir, &r), -1);
	assert_non_null(strstr(r.err, "3.dat: record 0: bad magic"));
	/* One with arguments. */
	bad[1] = 0x2c; /* entry, more, magic 5 */
	write_file(dir, "3.dat", bad, sizeof(bad));
	assert_int_equal(uft_load(dir, &r), -1);
	assert_non_null(strstr(r.err, "arguments"));
	write_str(dir, "3.dat", "");

	/* A symbolic link is not followed. */
	snprintf(path, sizeof(path), "%s/task.txt", dir);
	assert_int_equal(rename(path, "/tmp/uft-task.txt"), 0);
	assert_int_equal(symlink("/tmp/uft-task.txt", path), 0);
	assert_int_equal(uft_load(dir, &r), -1);
	assert_non_null(strstr(r.err, "task.txt"));
	unlink(path);
	assert_int_equal(rename("/tmp/uft-task.txt", path), 0);

	/* A session without a sid, or a sid that is a path. */
	write_str(dir, "task.txt", "SESS timestamp=1.0 pid=1 sid=../../x exename=\"/a\"\n");
	assert_int_equal(uft_load(dir, &r), -1);
	assert_non_null(strstr(r.err, "without a valid sid"));
	write_str(dir, "task.txt", "TASK timestamp=1.0 tid=3 pid=1\n");
	assert_int_equal(uft_load(dir, &r), -1);
	assert_non_null(strstr(r.err, "no session"));

	/* Garbage symbols are skipped, not trusted. */
	write_str(dir, "task.txt", "SESS timestamp=1.0 pid=1 sid=ab exename=\"/x/prog\"\n"
				    "TASK timestamp=1.0 tid=3 pid=1\n");
	write_str(dir, "sid-ab.map", "0-100000 r-xp 0 0:0 0 /x/prog\n");
	write_str(dir, "prog.sym", "zz T bad\n10 T\n0000000000000010 T good\nbroken\n"
				    "0000000000000020 ? __func_end\n");
	assert_int_equal(uft_load(dir, &r), 0);
	assert_string_equal(r.names.func(r.names.ctx, 0x10), "good");
	assert_string_equal(r.names.func(r.names.ctx, 0x18), "good");
	assert_string_equal(r.names.func(r.names.ctx, 0x20), "0x20");
	uft_free(&r);

	/* Not uftrace's at all. */
	write_str(dir, "info", "hello");
	assert_int_equal(uft_load(dir, &r), -1);
	assert_non_null(strstr(r.err, "not a uftrace data directory"));
	rm_rf(dir);
	free(dir);
}

/* Arguments (-A/-R): a record whose function has a spec is written with
 * uftrace's data after it once its argument records are there, even when
 * they come in the next append; cut or stray argument records are left
 * out, the calls kept; and the reader turns the data back into the same
 * text. */
static void test_arguments(void **state)
{
	(void)state;
	uint64_t base = 0, outer = (uint64_t)(uintptr_t)&uft_test_outer,
		 inner = (uint64_t)(uintptr_t)&uft_test_inner;
	dl_iterate_phdr(base_cb, &base);
	struct uft_object obj = { .path = exe, .base = base, .file = "/proc/self/exe" };
	struct argspecs a = { 0 };
	struct ta_spec sp;
	char why[TRACE_WHY_SIZE];
	assert_int_equal(argspec_option(&a, "uft_test_inner@arg1/s,arg2/i32", why, sizeof(why)), 0);
	assert_int_equal(argspec_option(&a, "uft_test_out*@retval/x", why, sizeof(why)), 0);
	assert_int_equal(argspec_match(&a, "uft_test_inner", &sp, why, sizeof(why)), 1);
	assert_int_equal(argspec_bind(&a, inner, &sp), 0);
	assert_int_equal(argspec_match(&a, "uft_test_outer", &sp, why, sizeof(why)), 1);
	assert_int_equal(argspec_bind(&a, outer, &sp), 0);
	struct uft_session s = session(&obj, 1);
	s.args = &a;
	char *dir = tmpdir_name();
	struct uft_writer *w = uft_open(dir, &s);
	assert_non_null(w);

	uint8_t p[32] = { 0, 5, 'h', 'e', 'l', 'l', 'o' }; /* "hello", then -7 */
	uint64_t minus7 = (uint64_t)-7, ret = 0x2a;
	memcpy(p + 7, &minus7, 8);
	struct tf_event ev[32] = { E(2000, outer), E(2100, inner) };
	size_t n = 2 + ta_encode(p, 15, 2100, ev + 2); /* a header, 2 data records */
	/* The first append ends inside the payload. */
	assert_int_equal(uft_append(w, 100, ev, n - 1), 0);
	struct tf_event more[32] = { ev[n - 1], X(2200, inner), X(2300, outer) };
	size_t m = 3 + ta_encode((const uint8_t *)&ret, 8, 2300, more + 3);
	more[m++] = (struct tf_event)E(2400, inner);
	m += ta_encode(p, 15, 2400, more + m) - 1; /* its last data record missing */
	more[m++] = (struct tf_event)X(2500, inner);
	m += ta_encode(p, 15, 2500, more + m);     /* after an exit with no return value asked */
	more[m - 3] = more[m - 1];                 /* and a data record without its header */
	assert_int_equal(uft_append(w, 100, more, m - 2), 0);
	assert_int_equal(uft_close(w), 0);

	struct uft_recording r;
	assert_int_equal(uft_load(dir, &r), 0);
	assert_non_null(r.args);
	char *text = NULL;
	size_t len = 0;
	FILE *o = open_memstream(&text, &len);
	struct tf_trace t = { r.threads, r.nthreads, r.pid, r.origin_ns, r.names, r.args };
	struct tf_filter f = { .min_ns = 0 };
	assert_int_equal(tf_graph(o, &t, &f), 0);
	fclose(o);
	assert_non_null(strstr(text, "uft_test_outer() {"));
	assert_non_null(strstr(text, "uft_test_inner(\"hello\", -7);"));
	assert_non_null(strstr(text, "} = 0x2a; /* uft_test_outer */"));
	assert_non_null(strstr(text, "uft_test_inner();"));
	free(text);
	uft_free(&r);
	argspecs_free(&a);
	rm_rf(dir);
	free(dir);
}

int main(void)
{
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return 1;
	exe[n] = '\0';
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_mid_call_start_and_unwinding),
		cmocka_unit_test(test_unwound_calls),
		cmocka_unit_test(test_depth_beyond_the_field),
		cmocka_unit_test(test_endless_entries),
		cmocka_unit_test(test_shrunk_mapping),
		cmocka_unit_test(test_existing_directory),
		cmocka_unit_test(test_reader_refuses_malformed),
		cmocka_unit_test(test_full_disk),
		cmocka_unit_test(test_arguments),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
