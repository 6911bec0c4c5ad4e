/* SPDX-License-Identifier: MIT */
/* Linked into every traced object (libxprobes_trace.a, pulled in by
 * -Wl,-u,__xprobes_trace_anchor): tells the agent where the object's patch
 * sites are, and makes each of them one 5-byte instruction.  See the
 * top of lib/trace/trace.h for the scheme.
 *
 * This file runs inside user objects before anything else of theirs: it
 * uses nothing of the agent, only libc, and is itself never instrumented
 * (lib/trace.mk compiles it without -fpatchable-function-entry).
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "../trace/trace.h" /* struct xp_follow_msg: a layout, no code */

/* The linker defines these for the compiler's table of patch sites: one
 * 8-byte runtime address per instrumented function. */
extern const uintptr_t __start___patchable_function_entries[]
	__attribute__((visibility("hidden")));
extern const uintptr_t __stop___patchable_function_entries[]
	__attribute__((visibility("hidden")));

/* The note: owner "xprobes", type XP_NOTE_TRACE (2), descriptor two
 * self-relative offsets, each from its own field, to the table's start
 * and end.  Allocated (a PT_NOTE segment, read in memory through
 * dl_iterate_phdr) and retained (--gc-sections keeps it); self-relative,
 * so it needs no dynamic relocation and stays read-only.
 *
 * Then an empty piece of the table itself, so that it exists, and with it
 * the two symbols, in an object where nothing was compiled with the flag.
 * Like the compiler's pieces it is SHF_LINK_ORDER ("o"), here to the note
 * (ld refuses to mix ordered and unordered pieces under --gc-sections,
 * and a weak undefined __start_ cannot be reached PC-relative in PIE). */
__asm__(".pushsection .note.xprobes,\"aR\",\"note\"\n"
	".balign 4\n"
	"__xprobes_trace_note:\n"
	".4byte 8, 8, 2\n"
	".asciz \"xprobes\"\n"
	".4byte __start___patchable_function_entries - .\n"
	".4byte __stop___patchable_function_entries - .\n"
	".popsection\n"
	".pushsection __patchable_function_entries,\"awo\",@progbits,__xprobes_trace_note\n"
	".balign 8\n" /* entries are 8-byte addresses: so is an empty table */
	".popsection\n");

/* What -Wl,-u names, so that the linker takes this file from the archive
 * although nothing refers to it. */
__attribute__((visibility("hidden"), used)) const char __xprobes_trace_anchor = 1;

static const unsigned char nop1x5[5] = { 0x90, 0x90, 0x90, 0x90, 0x90 };
/* One instruction, so that a page swap switches it atomically, and one
 * whose every suffix is a NOP too: a uprobe (bpftrace) decodes the file's
 * first 0x90, emulates it and resumes one byte on, and from there it
 * meets 66 66 66 90, a NOP ending where the site ends. */
static const unsigned char nop5[5] = { 0x66, 0x66, 0x66, 0x66, 0x90 };

/* Write len bytes at addr: through /proc/self/mem, which writes read-only
 * text without making it writable; else by making its pages writable for
 * the moment (executable too: this very code may live on them).  0 if
 * written. */
static int put(int *fd, unsigned char *addr, const unsigned char *buf, size_t len)
{
	if (*fd == -2)
		*fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
	if (*fd >= 0 && pwrite(*fd, buf, len, (off_t)(uintptr_t)addr) == (ssize_t)len)
		return 0;
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = (uintptr_t)addr & ~(page - 1);
	size_t span = (uintptr_t)addr + len - lo;
	if (mprotect((void *)lo, span, PROT_READ | PROT_WRITE | PROT_EXEC) != 0)
		return -1;
	memcpy(addr, buf, len);
	/* If this fails the page stays writable, which it never may: there
	 * is nothing else to try, and it does not fail on a range that the
	 * call above just changed. */
	mprotect((void *)lo, span, PROT_READ | PROT_EXEC);
	return 0;
}

/* `xprobes trace [options] -- PROG`: the tool runs PROG with one end of a
 * socket pair whose number is in XPROBES_TRACE_FD.  The executable (only:
 * libraries share the variable) says "ready" once its sites are NOPs and
 * waits for a line, while the tool starts tracing through the agent,
 * which serves from its own thread meanwhile; at exit it says "exit" and
 * waits again while the tool stops tracing and reads the buffers of the
 * still living process.  End of file means the tool went away: carry on
 * untraced. */
static int hold_fd = -1;
static pid_t hold_pid;

extern const ElfW(Ehdr) __ehdr_start __attribute__((visibility("hidden")));

static int in_executable(void)
{
	return (uintptr_t)&__ehdr_start + __ehdr_start.e_phoff == getauxval(AT_PHDR);
}

/* A system call made here, not through libc: the tracer shows the
 * program's library calls, and these are not the program's. */
static long sys3(long nr, long a, long b, long c)
{
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "0"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
	return r;
}

/* sendto(fd, buf, len, MSG_NOSIGNAL, NULL, 0), made here as sys3 is. */
static long sys_send(int fd, const void *buf, size_t len)
{
	long r;
	register long flags __asm__("r10") = MSG_NOSIGNAL;
	register long addr __asm__("r8") = 0;
	register long alen __asm__("r9") = 0;
	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "0"((long)SYS_sendto), "D"((long)fd), "S"(buf), "d"(len), "r"(flags), "r"(addr),
			   "r"(alen)
			 : "rcx", "r11", "memory");
	return r;
}

/* Say what (len bytes), then wait for a line or end of file. */
static void hold(const char *what, size_t len)
{
	char c;
	long r;
	/* send, not write: a tool gone (killed, or done with the program)
	 * must not kill the program with SIGPIPE. */
	if (sys_send(hold_fd, what, len) < 0)
		return;
	while ((r = sys3(SYS_read, hold_fd, (long)&c, 1)) > 0 || r == -EINTR)
		if (r > 0 && c == '\n')
			return;
	sys3(SYS_close, hold_fd, 0, 0);
	hold_fd = -1;
}

/* An executable a followed program exec'd (XPROBES_TRACE_FOLLOW names the
 * recorder's socket; see lib/trace/trace_follow.c): say EXEC there and
 * wait for any reply, or end of file, while the recorder starts tracing
 * this image.  The variable stays, for the programs this one runs. */
static void hold_for_follower(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct xp_follow_msg m = { .tag = { 'E', 'X', 'E', 'C' }, .ppid = (int32_t)getppid() };
	char c;
	if (strlen(path) >= sizeof(sa.sun_path))
		return;
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	/* The reply comes once tracing is on here, library calls hooked
	 * included: from then on, system calls made as hold's are. */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    send(fd, &m, sizeof(m), MSG_NOSIGNAL) == (ssize_t)sizeof(m))
		while (sys3(SYS_read, fd, (long)&c, 1) == -EINTR)
			;
	sys3(SYS_close, fd, 0, 0);
}

static void hold_at_start(void)
{
	const char *v = getenv("XPROBES_TRACE_FD");
	const char *follow = getenv("XPROBES_TRACE_FOLLOW");
	char *end;
	if (!in_executable())
		return;
	if ((!v || !*v) && follow && *follow) {
		hold_for_follower(follow);
		return;
	}
	if (!v || !*v)
		return;
	long fd = strtol(v, &end, 10);
	unsetenv("XPROBES_TRACE_FD"); /* not for the program's children */
	if (*end || fd < 0 || fd > 1 << 20 || fcntl((int)fd, F_SETFD, FD_CLOEXEC) != 0)
		return;
	hold_fd = (int)fd;
	hold_pid = getpid();
	hold("ready\n", 6);
}

/* Priority 101, the first user priority: before every other constructor
 * of this object, so before any of its code can run.  The executable's
 * run before main; a library's while the loader holds its lock, so no
 * other thread can be inside the object yet. */
__attribute__((constructor(101))) static void
xprobes_trace_normalize(void)
{
	/* Pages at a time: sites in one page are rewritten with one write.
	 * Nothing else runs in the object yet, so rewriting the bytes between
	 * the sites with their own values is harmless. */
	unsigned char buf[4096];
	unsigned char *lo = NULL;
	size_t used = 0;
	int fd = -2;

	for (const uintptr_t *e = __start___patchable_function_entries;; e++) {
		unsigned char *site = e < __stop___patchable_function_entries ? (unsigned char *)*e : NULL;
		if (site && memcmp(site, nop1x5, 5) != 0)
			continue; /* clang's single NOP already, or not ours */
		if (lo && (!site || site < lo || site + 5 > lo + sizeof(buf))) {
			/* On failure those functions stay as they are: they run,
			 * and the agent refuses to patch them. */
			put(&fd, lo, buf, used);
			lo = NULL;
		}
		if (!site)
			break;
		if (!lo) {
			lo = site;
			used = 0;
		}
		size_t end = (size_t)(site - lo) + 5;
		if (end > used) {
			memcpy(buf + used, lo + used, end - used);
			used = end;
		}
		memcpy(buf + (site - lo), nop5, 5);
	}
	if (fd >= 0)
		close(fd);
	hold_at_start();
}

/* The last destructor of the object: after main, exit()'s atexit handlers
 * and the other destructors. */
__attribute__((destructor(101))) static void xprobes_trace_exit(void)
{
	if (hold_fd < 0 || (pid_t)sys3(SYS_getpid, 0, 0, 0) != hold_pid)
		return; /* not run by `xprobes trace`, or a fork()ed child */
	hold("exit\n", 5);
	if (hold_fd >= 0)
		sys3(SYS_close, hold_fd, 0, 0);
}
