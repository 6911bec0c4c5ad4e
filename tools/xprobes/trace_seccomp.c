/* SPDX-License-Identifier: MIT */
/* Before a trace starts: would a seccomp filter of the target refuse the
 * system calls tracing makes there?  A filter that kills on mremap would
 * kill the process at the first switch; one that answers an error would
 * leave the start half done.  So the filters are run here, on the calls
 * as the agent makes them (tools/common/seccomp.c), before anything in
 * the target changes, and the start is refused with the reason.
 *
 * The calls: the agent finds its objects and their text in /proc/self
 * (openat, read, pread64, newfstatat, readlink, getdents64, close), maps a
 * copy of the text's file (mmap PROT_READ|PROT_EXEC), writes it through
 * /proc/self/mem (openat O_RDWR, pwrite64) and swaps it over the text
 * (mremap MREMAP_MAYMOVE|MREMAP_FIXED, munmap); trampolines and the site
 * hits' code are anonymous pages made executable (mmap
 * MAP_FIXED_NOREPLACE, mprotect PROT_READ|PROT_EXEC).  The recorder maps
 * each thread's state and buffer (mmap MAP_NORESERVE), faults them in
 * (madvise MADV_HUGEPAGE, MADV_POPULATE_WRITE), names them (gettid,
 * prctl PR_GET_NAME) and looks for ended threads (tgkill with signal 0);
 * a string argument (-A .../s) is read with process_vm_readv on the
 * process itself, whose error only shows the string as unreadable.
 * Every filtered thread is asked about all of them: the agent's thread
 * switches, but so does a thread that dlopen()s while everything is traced,
 * and any thread may run a traced function. */
#define _GNU_SOURCE
#include "xprobes.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

int trace_ignore_seccomp;

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define PG 4096ull
#define AT 0x7f0000000000ull /* an address: the filters see numbers */
#define NO_FD 0xffffffffffffffffull

/* A call that must go through; one whose error the agent shrugs off. */
#define MUST(name, nr, ...) { name, nr, { __VA_ARGS__ }, 0 }
#define MAY_FAIL(name, nr, ...) { name, nr, { __VA_ARGS__ }, 1 }

static const struct syscall_use uses[] = {
	MUST("openat(O_RDONLY)", SYS_openat, (uint64_t)AT_FDCWD, AT, O_RDONLY | O_CLOEXEC),
	MUST("openat(O_RDONLY|O_NONBLOCK)", SYS_openat, (uint64_t)AT_FDCWD, AT,
	     O_RDONLY | O_CLOEXEC | O_NONBLOCK),
	MUST("openat(O_DIRECTORY)", SYS_openat, (uint64_t)AT_FDCWD, AT,
	     O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_DIRECTORY),
	MUST("read", SYS_read, 3, AT, 1024),
	MUST("pread64", SYS_pread64, 3, AT, 64, 0),
	MUST("newfstatat", SYS_newfstatat, 3, AT, AT + PG, AT_EMPTY_PATH),
	MUST("readlink", SYS_readlink, AT, AT + PG, 1023),
	MUST("getdents64", SYS_getdents64, 3, AT, 32768),
	MUST("close", SYS_close, 3),
	MUST("openat(/proc/self/mem, O_RDWR)", SYS_openat, (uint64_t)AT_FDCWD, AT,
	     O_RDWR | O_CLOEXEC),
	MUST("pwrite64", SYS_pwrite64, 3, AT, PG, AT),
	MUST("mmap(PROT_READ|PROT_EXEC, MAP_PRIVATE) of a file", SYS_mmap, 0, PG,
	     PROT_READ | PROT_EXEC, MAP_PRIVATE, 4, 0),
	MUST("mremap(MREMAP_MAYMOVE|MREMAP_FIXED)", SYS_mremap, AT, PG, PG,
	     MREMAP_MAYMOVE | MREMAP_FIXED, AT + PG),
	MUST("munmap", SYS_munmap, AT, PG),
	MUST("mmap(MAP_FIXED_NOREPLACE)", SYS_mmap, AT, PG, PROT_READ | PROT_WRITE,
	     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, NO_FD, 0),
	MUST("mmap(MAP_ANONYMOUS)", SYS_mmap, 0, PG, PROT_READ | PROT_WRITE,
	     MAP_PRIVATE | MAP_ANONYMOUS, NO_FD, 0),
	MUST("mprotect(PROT_READ|PROT_EXEC)", SYS_mprotect, AT, PG, PROT_READ | PROT_EXEC),
	/* Library calls: a full-RELRO GOT page, writable for one write. */
	MUST("mprotect(PROT_READ|PROT_WRITE)", SYS_mprotect, AT, PG, PROT_READ | PROT_WRITE),
	MUST("mprotect(PROT_READ)", SYS_mprotect, AT, PG, PROT_READ),
	MUST("sched_yield", SYS_sched_yield, 0),
	MUST("mmap(MAP_NORESERVE)", SYS_mmap, 0, 256 * PG, PROT_READ | PROT_WRITE,
	     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, NO_FD, 0),
	MAY_FAIL("madvise(MADV_HUGEPAGE)", SYS_madvise, AT, 256 * PG, MADV_HUGEPAGE),
	MAY_FAIL("madvise(MADV_POPULATE_WRITE)", SYS_madvise, AT, 256 * PG, MADV_POPULATE_WRITE),
	MAY_FAIL("prctl(PR_GET_NAME)", SYS_prctl, PR_GET_NAME, AT),
	MAY_FAIL("process_vm_readv", SYS_process_vm_readv, 1, AT, 1, AT, 2, 0),
	MUST("gettid", SYS_gettid, 0),
	MUST("getpid", SYS_getpid, 0),
	MUST("tgkill(signal 0)", SYS_tgkill, 1, 1, 0),
	MUST("futex(FUTEX_WAIT_PRIVATE)", SYS_futex, AT, FUTEX_WAIT_PRIVATE, 2),
	MUST("futex(FUTEX_WAKE_PRIVATE)", SYS_futex, AT, FUTEX_WAKE_PRIVATE, 1),
};

int trace_seccomp_check(pid_t pid)
{
	if (trace_ignore_seccomp)
		return 0;
	struct seccomp_answer a;
	int rc = seccomp_verdict(pid, uses, sizeof(uses) / sizeof(uses[0]), &a);
	if (rc == 0)
		return 0;
	if (rc < 0 && !a.tid) {
		fprintf(stderr, "xprobes: trace start: cannot list the threads of process %d to "
				"check their seccomp filters: %s\n", (int)pid, strerror(a.err));
		return 1;
	}
	if (rc < 0) {
		fprintf(stderr,
			"xprobes: trace start: thread %d of process %d runs under %d seccomp "
			"filter%s, which cannot be read (%s; reading them takes CAP_SYS_ADMIN and "
			"no other tracer),\n  and a filter may kill the process for a system call "
			"tracing makes (mmap, mremap, pwrite64 into /proc/self/mem,\n  madvise...): "
			"nothing was changed.  xprobes --ignore-seccomp PID trace start starts anyway,\n"
			"  if you know the filters allow them\n",
			(int)a.tid, (int)pid, a.filters, a.filters == 1 ? "" : "s", strerror(a.err));
		return 1;
	}
	if (!a.use) {
		fprintf(stderr, "xprobes: trace start: thread %d of process %d runs in seccomp strict "
				"mode, where any system call but read, write, exit and sigreturn kills "
				"the process;\n  tracing needs mmap, mremap and more: nothing was "
				"changed\n", (int)a.tid, (int)pid);
		return 1;
	}
	char what[256];
	seccomp_describe(a.ret, a.use->name, what, sizeof(what));
	fprintf(stderr, "xprobes: trace start: refused: thread %d of process %d runs under a "
			"seccomp filter that %s,\n  a system call tracing makes: nothing was "
			"changed\n", (int)a.tid, (int)pid, what);
	return 1;
}
