/* SPDX-License-Identifier: MIT */
/* Agent injection, Frida style: ptrace only to bootstrap.
 *
 * We seize one thread of the target, stop it, and borrow it for one
 * mmap() of two regions into which we copy inject_code.S.  The thread
 * then runs that code on its own: it starts a small thread (region B)
 * whose only job is dlopen(agent), unmaps region A and resumes exactly
 * where it was stopped, through a signal frame we wrote on its stack
 * (rt_sigreturn restores every register, the FPU state and the signal
 * mask; its blocking system call is issued again).  From the moment the
 * thread runs our code it needs nothing from us: killing xprobes, even
 * with SIGKILL, leaves the target working.  Before that, the stop signals
 * are blocked, and every failure unmaps what was mapped.  The loader
 * thread keeps region B until we have read its verdict, then unmaps it:
 * nothing of ours stays in the target.
 *
 * Which thread: pthread_create() allocates (the new thread's TLS vector),
 * so a thread stopped inside malloc() holding its arena lock would wait
 * for itself for ever.  We borrow only a thread that the kernel shows
 * blocked in a system call malloc never makes while holding a lock (it
 * makes mmap, munmap, mprotect, madvise, brk, and futex for lock waits),
 * and we check that it was still in that call when it stopped.  A target
 * whose threads are all computing or waiting on locks is retried for a
 * while, then refused with an explanation.
 *
 * Function addresses come from the target's own libc (read with libelf),
 * so a target whose libc differs from ours works too.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <elf.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/ucontext.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct mapping {
	uintptr_t start, end, offset;
	char perms[5];
	char path[PATH_MAX];
};

/* Lowest mapping of a file whose name contains `needle`; 0 if found. */
static int find_mapping(pid_t pid, const char *needle, struct mapping *out)
{
	char path[64], line[PATH_MAX + 128];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	int found = -1;
	while (fgets(line, sizeof(line), f)) {
		struct mapping m = { 0 };
		unsigned long s, e, off;
		int n = 0;
		if (sscanf(line, "%lx-%lx %4s %lx %*s %*s %n", &s, &e, m.perms, &off, &n) < 4 || !n)
			continue;
		char *file = line + n;
		file[strcspn(file, "\n")] = '\0';
		const char *base = strrchr(file, '/');
		if (!base || !strstr(base + 1, needle))
			continue;
		if (found == 0 && s >= out->start)
			continue;
		m.start = s;
		m.end = e;
		m.offset = off;
		snprintf(m.path, sizeof(m.path), "%s", file);
		*out = m;
		found = 0;
	}
	fclose(f);
	return found;
}

/* libelf on a file of the target, read through its root (right even
 * across mount namespaces).  NULL if unreadable; close with elf_close. */
static Elf *elf_open(pid_t pid, const char *file, int *fd)
{
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "/proc/%d/root%s", (int)pid, file);
	*fd = open(path, O_RDONLY | O_CLOEXEC);
	if (*fd < 0)
		return NULL;
	elf_version(EV_CURRENT);
	Elf *elf = elf_begin(*fd, ELF_C_READ, NULL);
	if (!elf)
		close(*fd);
	return elf;
}

static void elf_close(Elf *elf, int fd)
{
	elf_end(elf);
	close(fd);
}

/* Address of a dynamic symbol of the libc mapped in pid. */
static uintptr_t remote_symbol(pid_t pid, const struct mapping *libc, const char *name)
{
	int fd;
	Elf *elf = elf_open(pid, libc->path, &fd);
	if (!elf)
		return 0;
	uintptr_t addr = 0;
	Elf_Scn *scn = NULL;
	while (!addr && (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		size_t n = d ? sh.sh_size / sh.sh_entsize : 0;
		for (size_t i = 0; i < n; i++) {
			GElf_Sym sym;
			if (!gelf_getsym(d, (int)i, &sym) || sym.st_shndx == SHN_UNDEF ||
			    GELF_ST_TYPE(sym.st_info) != STT_FUNC)
				continue;
			const char *s = elf_strptr(elf, sh.sh_link, sym.st_name);
			/* Default version only: "dlopen" not "dlopen@GLIBC_2.2.5". */
			if (s && strcmp(s, name) == 0) {
				addr = libc->start - libc->offset + sym.st_value;
				break;
			}
		}
	}
	elf_close(elf, fd);
	return addr;
}

/* glibc's __restore_rt, `mov $SYS_rt_sigreturn,%rax; syscall`: where
 * every signal handler returns to.  It is not exported, so we look for
 * its bytes in libc's executable segment.  The injected code returns
 * through it (see write_resume_frame). */
static uintptr_t find_restore_rt(pid_t pid, const struct mapping *libc)
{
	static const unsigned char code[] = { 0x48, 0xc7, 0xc0, SYS_rt_sigreturn, 0, 0, 0, 0x0f, 0x05 };
	int fd;
	Elf *elf = elf_open(pid, libc->path, &fd);
	if (!elf)
		return 0;
	size_t size = 0, n = 0;
	const char *raw = elf_rawfile(elf, &size);
	uintptr_t addr = 0;
	if (raw && elf_getphdrnum(elf, &n) == 0) {
		for (size_t i = 0; i < n && !addr; i++) {
			GElf_Phdr ph;
			if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_X) ||
			    ph.p_offset >= size)
				continue;
			size_t len = ph.p_filesz < size - ph.p_offset ? ph.p_filesz : size - ph.p_offset;
			const char *hit = memmem(raw + ph.p_offset, len, code, sizeof(code));
			if (hit)
				addr = libc->start - libc->offset + ph.p_vaddr +
				       (uintptr_t)(hit - (raw + ph.p_offset));
		}
	}
	elf_close(elf, fd);
	return addr;
}

static int wait_stop(pid_t pid, int *sig)
{
	int status;
	for (;;) {
		if (waitpid(pid, &status, __WALL) < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (WIFEXITED(status) || WIFSIGNALED(status))
			return -1;
		if (WIFSTOPPED(status)) {
			*sig = WSTOPSIG(status);
			return status >> 16; /* PTRACE_EVENT_* */
		}
	}
}

struct target {
	pid_t pid;
	struct user_regs_struct saved;
	uint64_t sigmask;   /* its signal mask when we stopped it */
	int pending_signal; /* arrived while we borrowed the thread */
};

/* Read or write the target's memory through /proc/PID/mem (allowed while
 * we are its tracer; works on read-only text too). */
static int proc_mem(pid_t pid, uintptr_t addr, void *buf, size_t len, int write)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	int fd = open(path, (write ? O_RDWR : O_RDONLY) | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = write ? pwrite(fd, buf, len, (off_t)addr) : pread(fd, buf, len, (off_t)addr);
	close(fd);
	return n == (ssize_t)len ? 0 : -1;
}

static int write_mem(pid_t pid, uintptr_t addr, const void *buf, size_t len)
{
	return proc_mem(pid, addr, (void *)buf, len, 1);
}

static int read_mem(pid_t pid, uintptr_t addr, void *buf, size_t len)
{
	return proc_mem(pid, addr, buf, len, 0);
}

/* Test hooks, so that tests can fail each step, or SIGKILL the tool at a
 * chosen moment.  XPROBES_INJECT_TEST_FAIL=STEP makes STEP fail;
 * XPROBES_INJECT_TEST_PAUSE=POINT prints "NAME: test pause at POINT"
 * on stderr and waits for a signal that kills us. */
static int test_fail(const char *step)
{
	const char *v = getenv("XPROBES_INJECT_TEST_FAIL");
	return v && strcmp(v, step) == 0;
}

static void test_pause(const char *point)
{
	const char *v = getenv("XPROBES_INJECT_TEST_PAUSE");
	if (!v || strcmp(v, point) != 0)
		return;
	tool_err("test pause at %s\n", point);
	fflush(stderr);
	for (;;)
		pause();
}

/* The signals that would kill or stop us while we hold a thread of the
 * target (the terminal's ^C, ^Z and ^\, a hangup, kill, a closed pipe). */
static void block_stop_signals(sigset_t *old)
{
	sigset_t set;
	sigemptyset(&set);
	int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP, SIGPIPE };
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaddset(&set, sigs[i]);
	sigprocmask(SIG_BLOCK, &set, old);
}

/* The thread's FPU/SSE/AVX state as rt_sigreturn wants it: the XSAVE
 * image with both magic words, or else the legacy FXSAVE image. */
enum { XSTATE_MAX = 16384 };
static int read_fpstate(pid_t tid, unsigned char *buf, size_t *len)
{
	struct iovec iov = { buf, XSTATE_MAX - 4 };
	const struct _fpx_sw_bytes *sw = (const void *)(buf + 464);
	if (ptrace(PTRACE_GETREGSET, tid, NT_X86_XSTATE, &iov) == 0 && iov.iov_len >= 576 &&
	    sw->magic1 == FP_XSTATE_MAGIC1 && sw->xstate_size <= iov.iov_len) {
		uint32_t magic2 = FP_XSTATE_MAGIC2;
		memcpy(buf + sw->xstate_size, &magic2, sizeof(magic2));
		*len = sw->xstate_size + sizeof(magic2);
		return 0;
	}
	if (ptrace(PTRACE_GETFPREGS, tid, 0, buf) != 0)
		return -1;
	memset(buf + 464, 0, 48); /* no magic: the kernel restores FXSAVE only */
	*len = 512;
	return 0;
}

/* The registers the interrupted thread must resume with when nobody
 * restarts its system call for it.  Stopped inside a blocking call, it
 * shows rax = -ERESTART* and orig_rax = the call; on a plain detach the
 * kernel would set rax = orig_rax and back rip over the 2-byte `syscall`.
 * rt_sigreturn clears orig_rax (no kernel restart), so the frame does it.
 * -ERESTART_RESTARTBLOCK (relative sleeps, polls, futex waits with a
 * timeout) would restart through restart_syscall, whose saved state
 * rt_sigreturn also clears: the original call is issued again instead
 * (an absolute timeout is kept; a relative one starts over). */
static void resume_state(const struct user_regs_struct *saved, struct user_regs_struct *r)
{
	*r = *saved;
	long ret = (long)saved->rax;
	if (ret == -512 /* ERESTARTSYS */ || ret == -513 /* ERESTARTNOINTR */ ||
	    ret == -514 /* ERESTARTNOHAND */ || ret == -516 /* ERESTART_RESTARTBLOCK */) {
		r->rax = saved->orig_rax;
		r->rip -= 2;
	}
}

/* Write, below the thread's red zone, a signal frame that resumes it as
 * if we had never touched it: [F] a return slot holding __restore_rt,
 * F+8 the ucontext, above it the FPU state.  F is 8 mod 16, a function's
 * entry alignment, so a function entered with %rsp = F returns into
 * __restore_rt and rt_sigreturn finds the frame.  Returns F, or 0. */
static uintptr_t write_resume_frame(struct target *t, uintptr_t restore_rt)
{
	static unsigned char fp[XSTATE_MAX];
	size_t fplen;
	if (read_fpstate(t->pid, fp, &fplen) != 0)
		return 0;
	uintptr_t fpaddr = (t->saved.rsp - 128 - 256 - fplen) & ~(uintptr_t)63;
	uintptr_t frame = ((fpaddr - sizeof(ucontext_t) - 8) & ~(uintptr_t)15) - 8;

	struct user_regs_struct r;
	resume_state(&t->saved, &r);
	ucontext_t uc;
	memset(&uc, 0, sizeof(uc));
	/* An invalid ss_flags makes rt_sigreturn's sigaltstack() fail, which
	 * it ignores: the thread's alternate stack stays as it is. */
	uc.uc_stack.ss_flags = 0x40000000;
	greg_t *g = uc.uc_mcontext.gregs;
	g[REG_R8] = (greg_t)r.r8, g[REG_R9] = (greg_t)r.r9, g[REG_R10] = (greg_t)r.r10;
	g[REG_R11] = (greg_t)r.r11, g[REG_R12] = (greg_t)r.r12, g[REG_R13] = (greg_t)r.r13;
	g[REG_R14] = (greg_t)r.r14, g[REG_R15] = (greg_t)r.r15, g[REG_RDI] = (greg_t)r.rdi;
	g[REG_RSI] = (greg_t)r.rsi, g[REG_RBP] = (greg_t)r.rbp, g[REG_RBX] = (greg_t)r.rbx;
	g[REG_RDX] = (greg_t)r.rdx, g[REG_RAX] = (greg_t)r.rax, g[REG_RCX] = (greg_t)r.rcx;
	g[REG_RSP] = (greg_t)r.rsp, g[REG_RIP] = (greg_t)r.rip, g[REG_EFL] = (greg_t)r.eflags;
	/* cs, gs, fs, ss as 16-bit fields */
	g[REG_CSGSFS] = (greg_t)((r.cs & 0xffff) | (r.ss & 0xffff) << 48);
	uc.uc_mcontext.fpregs = (fpregset_t)fpaddr;
	memcpy(&uc.uc_sigmask, &t->sigmask, sizeof(t->sigmask));
	uint64_t ret_slot = restore_rt;
	if (write_mem(t->pid, fpaddr, fp, fplen) != 0 ||
	    write_mem(t->pid, frame + 8, &uc, sizeof(uc)) != 0 ||
	    write_mem(t->pid, frame, &ret_slot, sizeof(ret_slot)) != 0)
		return 0;
	return frame;
}

/* Run fn(a0, a1...) on the borrowed thread with %rsp = frame, up to the
 * exit of the system call `nr` it makes; *ret is that call's result.
 * Left alone after that (even if we die), fn returns into __restore_rt
 * and the thread resumes where it was. */
static int run_to_syscall_exit(struct target *t, uintptr_t frame, uintptr_t fn, long nr,
			       const uintptr_t args[6], uintptr_t *ret)
{
	struct user_regs_struct r = t->saved;
	r.rip = fn;
	r.rsp = frame;
	r.rdi = args[0], r.rsi = args[1], r.rdx = args[2];
	r.rcx = args[3], r.r8 = args[4], r.r9 = args[5];
	r.rax = 0;
	r.orig_rax = (unsigned long long)-1; /* no syscall restart on resume */
	if (ptrace(PTRACE_SETREGS, t->pid, 0, &r) != 0)
		return -1;
	int in_call = 0, sig = 0;
	for (;;) {
		if (ptrace(PTRACE_SYSCALL, t->pid, 0, 0) != 0)
			return -1;
		int ev = wait_stop(t->pid, &sig);
		if (ev < 0)
			return -1;
		if (ev != 0)
			continue; /* group-stop or event stop: keep going */
		if (sig == (SIGTRAP | 0x80)) {
			if (ptrace(PTRACE_GETREGS, t->pid, 0, &r) != 0)
				return -1;
			if (!in_call) {
				if ((long)r.orig_rax != nr)
					return -1; /* not the libc we think */
				in_call = 1;
				continue;
			}
			*ret = r.rax;
			return 0;
		}
		if (!t->pending_signal && sig != SIGSTOP && sig != SIGTRAP)
			t->pending_signal = sig;
	}
}

/* The injected code (inject_code.S): its bytes, and its slots as offsets. */
extern const char inject_code_start[], inject_code_end[], inject_borrowed[], inject_loader[],
	inject_slot_pthread_create[], inject_slot_restore_rt[], inject_slot_munmap[],
	inject_slot_loader_entry[], inject_slot_loader_region[], inject_slot_region_len[],
	inject_slot_dlopen[], inject_slot_dlerror[], inject_slot_snprintf[],
	inject_slot_pthread_self[], inject_slot_pthread_detach[], inject_slot_loader_mask[],
	inject_slot_fail_create[], inject_handle[], inject_error[], inject_done[], inject_ack[],
	inject_msg[], inject_path[];
#define CODE_OFF(sym) ((uintptr_t)((sym) - inject_code_start))
enum { MSG_LEN = 1024 };

static size_t region_len(void)
{
	return ((size_t)(inject_code_end - inject_code_start) + 4095) & ~(size_t)4095;
}

/* Addresses in the target's libc that the injected code calls. */
struct libc_fns {
	uintptr_t mmap, munmap, pthread_create, dlopen, dlerror, snprintf, self, detach;
	uintptr_t restore_rt; /* glibc's rt_sigreturn trampoline */
};

static void put_slot(unsigned char *code, const char *slot, uint64_t v)
{
	memcpy(code + CODE_OFF(slot), &v, sizeof(v));
}

/* The blob for a mapping at `map` (regions A then B), ready to copy. */
static void build_code(unsigned char *code, uintptr_t map, const struct libc_fns *f,
		       uint64_t mask, const char *agent_path)
{
	uintptr_t b = map + region_len();
	memset(code, 0, 2 * region_len());
	memcpy(code, inject_code_start, (size_t)(inject_code_end - inject_code_start));
	put_slot(code, inject_slot_pthread_create, f->pthread_create);
	put_slot(code, inject_slot_restore_rt, f->restore_rt);
	put_slot(code, inject_slot_munmap, f->munmap);
	put_slot(code, inject_slot_loader_entry, b + CODE_OFF(inject_loader));
	put_slot(code, inject_slot_loader_region, b);
	put_slot(code, inject_slot_region_len, region_len());
	put_slot(code, inject_slot_dlopen, f->dlopen);
	put_slot(code, inject_slot_dlerror, f->dlerror);
	put_slot(code, inject_slot_snprintf, f->snprintf);
	put_slot(code, inject_slot_pthread_self, f->self);
	put_slot(code, inject_slot_pthread_detach, f->detach);
	put_slot(code, inject_slot_loader_mask, mask);
	put_slot(code, inject_slot_fail_create, test_fail("create"));
	strcpy((char *)code + CODE_OFF(inject_path), agent_path);
	memcpy(code + region_len(), code, region_len());
}

/* The state letter of a process or thread ('?' if it is gone). */
static char process_state(pid_t pid)
{
	struct proc_status ps;
	return proc_status_read(pid, &ps) == 0 ? ps.state : '?';
}

/* A thread of pid that has not exited: the main thread may have called
 * pthread_exit() while the others run on, and an exited thread's /proc
 * entries show no memory map, root or executable. */
static pid_t live_thread(pid_t pid)
{
	char path[64];
	if (process_state(pid) != 'Z')
		return pid;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	struct dirent *e;
	pid_t live = pid;
	while (d && (e = readdir(d))) {
		pid_t tid = (pid_t)atoi(e->d_name);
		if (tid > 0 && process_state(tid) != 'Z') {
			live = tid;
			break;
		}
	}
	if (d)
		closedir(d);
	return live;
}

static int is_static_executable(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	elf_version(EV_CURRENT);
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	size_t n = 0;
	int has_interp = 0;
	if (elf && elf_getphdrnum(elf, &n) == 0) {
		for (size_t i = 0; i < n; i++) {
			GElf_Phdr ph;
			if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_INTERP)
				has_interp = 1;
		}
	}
	int is_static = elf && n > 0 && !has_interp;
	if (elf)
		elf_end(elf);
	close(fd);
	return is_static;
}

/* Is this address inside ld.so's code? */
static int rip_in_loader(pid_t pid, uintptr_t rip)
{
	char path[64], line[PATH_MAX + 128];
	int in_loader = 0;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long s, e;
		if (sscanf(line, "%lx-%lx", &s, &e) == 2 && rip >= s && rip < e &&
		    strstr(line, "/ld-linux"))
			in_loader = 1;
	}
	if (f)
		fclose(f);
	return in_loader;
}

/* Defined below: borrow_thread reports refusals with it. */
static void explain_ptrace_error(pid_t pid, int err);

/* Blocking system calls in which a thread holds no malloc or loader lock
 * of glibc's: waits for I/O, time, children or signals, and condition
 * variable waits (FUTEX_WAIT_BITSET; lock waits use FUTEX_WAIT). */
static int safe_syscall(long nr, unsigned long futex_op)
{
	switch (nr) {
	case 0 /* read */: case 19 /* readv */: case 17 /* pread64 */:
	case 7 /* poll */: case 271 /* ppoll */: case 23 /* select */: case 270 /* pselect6 */:
	case 232 /* epoll_wait */: case 281 /* epoll_pwait */: case 441 /* epoll_pwait2 */:
	case 43 /* accept */: case 288 /* accept4 */: case 45 /* recvfrom */: case 47 /* recvmsg */:
	case 299 /* recvmmsg */: case 35 /* nanosleep */: case 230 /* clock_nanosleep */:
	case 61 /* wait4 */: case 247 /* waitid */: case 34 /* pause */:
	case 130 /* rt_sigsuspend */: case 128 /* rt_sigtimedwait */:
		return 1;
	case 202 /* futex */:
		return (futex_op & 0x7f) == 9; /* FUTEX_WAIT_BITSET, any flags */
	default:
		return 0;
	}
}

/* What /proc/PID/task/TID/syscall says: 1 if blocked in a safe call. */
static int thread_waits_safely(pid_t pid, pid_t tid)
{
	char path[96], buf[256];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", (int)pid, (int)tid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	long nr = -1;
	unsigned long a0 = 0, a1 = 0;
	int ok = fgets(buf, sizeof(buf), f) && sscanf(buf, "%ld %lx %lx", &nr, &a0, &a1) >= 1;
	fclose(f);
	return ok && safe_syscall(nr, a1);
}

/* After PTRACE_INTERRUPT: was the thread stopped inside that safe call
 * (about to restart it), rather than back in user space? */
static int stopped_in_safe_syscall(const struct user_regs_struct *r)
{
	long ret = (long)r->rax;
	int interrupted = ret == -EINTR || ret == -512 /* ERESTARTSYS */ ||
			  ret == -513 /* ERESTARTNOINTR */ || ret == -514 /* ERESTARTNOHAND */ ||
			  ret == -516 /* ERESTART_RESTARTBLOCK */;
	return interrupted && safe_syscall((long)r->orig_rax, r->rsi);
}

/* Seize and stop a thread of pid that is safe to borrow (see the top of
 * this file); its registers in t->saved.  Returns 0, or -1 with a message
 * printed.  Tries the main thread first, every thread in turn, and again
 * for a few seconds while they are all busy. */
static int borrow_thread(pid_t pid, struct target *t)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	int nthreads = 0;
	for (int attempt = 0; attempt < 300; attempt++) {
		DIR *d = opendir(path);
		if (!d) {
			tool_err("process %d went away\n", (int)pid);
			return -1;
		}
		pid_t tids[256];
		int n = 0;
		tids[n++] = pid;
		struct dirent *e;
		while ((e = readdir(d)) && n < 256) {
			pid_t tid = (pid_t)atoi(e->d_name);
			if (tid > 0 && tid != pid)
				tids[n++] = tid;
		}
		closedir(d);
		nthreads = n;
		for (int i = 0; i < n; i++) {
			if (!thread_waits_safely(pid, tids[i]))
				continue;
			/* TRACESYSGOOD: syscall stops are SIGTRAP|0x80 */
			if (ptrace(PTRACE_SEIZE, tids[i], 0, PTRACE_O_TRACESYSGOOD) != 0) {
				if (errno == ESRCH)
					continue; /* it exited meanwhile */
				explain_ptrace_error(pid, errno);
				return -1;
			}
			int sig = 0;
			if (ptrace(PTRACE_INTERRUPT, tids[i], 0, 0) != 0 || wait_stop(tids[i], &sig) < 0 ||
			    ptrace(PTRACE_GETREGS, tids[i], 0, &t->saved) != 0 ||
			    ptrace(PTRACE_GETSIGMASK, tids[i], sizeof(t->sigmask), &t->sigmask) != 0) {
				ptrace(PTRACE_DETACH, tids[i], 0, 0);
				continue;
			}
			if (stopped_in_safe_syscall(&t->saved) && !rip_in_loader(tids[i], t->saved.rip)) {
				t->pid = tids[i];
				return 0;
			}
			/* It left the call before the stop: let it go unharmed. */
			ptrace(PTRACE_DETACH, tids[i], 0, sig == SIGSTOP || sig == SIGTRAP ? 0 : sig);
		}
		struct timespec ts = { 0, 10 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	tool_err(
		"cannot inject into process %d: none of its %d thread%s is waiting in a\n"
		"  system call where it is safe to borrow (all are computing or waiting on locks,\n"
		"  and borrowing one inside malloc() could deadlock the process); try again later,\n"
		"  or start the program with LD_PRELOAD=libxprobes.so\n",
		(int)pid, nthreads, nthreads == 1 ? "" : "s");
	return -1;
}

/* The pid tracing pid (a debugger, strace), or 0. */
static pid_t tracer_of(pid_t pid)
{
	struct proc_status ps;
	return proc_status_read(pid, &ps) == 0 ? ps.tracer : 0;
}

static void explain_ptrace_error(pid_t pid, int err)
{
	int tracer = tracer_of(pid);
	tool_err("cannot inject: ptrace(%d) refused: %s\n", (int)pid, strerror(err));
	if (tracer)
		fprintf(stderr, "  process %d is already traced by process %d (a debugger or tracer)\n",
			(int)pid, tracer);
	else if (err == EPERM)
		fprintf(stderr, "  check kernel.yama.ptrace_scope and that you own the process\n");
	fprintf(stderr, "  alternative: start the program with LD_PRELOAD=libxprobes.so\n");
}

/* The page(s) we mapped in the target are gone again (both regions). */
static void wait_unmapped(pid_t live, uintptr_t map)
{
	for (int i = 0; i < 5000; i++) {
		char c;
		if (read_mem(live, map, &c, 1) != 0 && read_mem(live, map + region_len(), &c, 1) != 0)
			return;
		struct timespec ts = { 0, 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
}

/* Borrow a thread, map regions A and B, copy the code and send the
 * thread into region A.  Returns the mapping, or 0 with a message.  The
 * thread is detached on return, either on its way through the code or
 * resumed as it was, and every failure path unmaps what it mapped. */
static uintptr_t start_injection(pid_t pid, const struct libc_fns *f, const char *agent_path)
{
	static unsigned char code[2 * 8192];
	if (2 * region_len() > sizeof(code))
		abort(); /* inject_code.S outgrew this buffer */
	struct target t = { .pid = 0 };
	sigset_t old;
	block_stop_signals(&old);
	if (borrow_thread(pid, &t) != 0) {
		sigprocmask(SIG_SETMASK, &old, NULL);
		return 0;
	}
	test_pause("borrowed");
	size_t len = 2 * region_len();
	uintptr_t map = 0;
	uintptr_t frame = test_fail("frame") ? 0 : write_resume_frame(&t, f->restore_rt);
	/* A zero length makes mmap fail for real (the "mmap" test hook). */
	uintptr_t args[6] = { 0, test_fail("mmap") ? 0 : len, PROT_READ | PROT_WRITE | PROT_EXEC,
			      MAP_PRIVATE | MAP_ANONYMOUS, (uintptr_t)-1, 0 };
	uintptr_t got = 0;
	if (!frame) {
		tool_err("cannot inject: cannot write to the stack of thread %d\n",
			(int)t.pid);
	} else if (run_to_syscall_exit(&t, frame, f->mmap, SYS_mmap, args, &got) != 0 ||
		   got >= (uintptr_t)-4095) {
		tool_err("cannot inject: mmap in process %d failed\n", (int)pid);
	} else {
		build_code(code, got, f, t.sigmask, agent_path);
		uint64_t entry = got + CODE_OFF(inject_borrowed);
		if (test_fail("write") || write_mem(t.pid, got, code, len) != 0 ||
		    write_mem(t.pid, frame, &entry, sizeof(entry)) != 0) {
			tool_err("cannot inject: cannot write to the memory of process %d\n",
				(int)pid);
			/* Take the mapping back: munmap, which returns through
			 * the frame like mmap would have. */
			uintptr_t unmap[6] = { got, len, 0, 0, 0, 0 };
			uintptr_t ignored;
			run_to_syscall_exit(&t, frame, f->munmap, SYS_munmap, unmap, &ignored);
		} else {
			map = got;
			test_pause("running");
		}
	}
	/* From here the thread needs nobody: it runs the code (or returns
	 * from mmap or munmap) into __restore_rt.  If the frame was never
	 * written, it never left its system call, which the kernel restarts. */
	ptrace(PTRACE_DETACH, t.pid, 0, t.pending_signal);
	sigprocmask(SIG_SETMASK, &old, NULL);
	test_pause("detached");
	return map;
}

/* Wait for the loader thread's verdict in region B, tell it we read it,
 * and wait for both regions to go.  0 if the agent is loaded. */
static int await_verdict(pid_t pid, pid_t live, uintptr_t map)
{
	uintptr_t b = map + region_len();
	uint32_t ack = 1;
	for (int i = 0; i < 20000 && !test_fail("verdict"); i++) {
		uint32_t done = 0;
		if (read_mem(live, b + CODE_OFF(inject_done), &done, sizeof(done)) != 0) {
			/* Region B goes before a verdict only if pthread_create failed. */
			if (kill(pid, 0) != 0)
				tool_err("process %d went away during injection\n", (int)pid);
			else
				tool_err("cannot inject: could not start a thread in "
						"process %d\n", (int)pid);
			wait_unmapped(live, map);
			return -1;
		}
		if (!done) {
			struct timespec ts = { 0, 1000 * 1000 };
			nanosleep(&ts, NULL);
			continue;
		}
		uint64_t handle = 0, err = 0;
		char msg[MSG_LEN] = "";
		read_mem(live, b + CODE_OFF(inject_handle), &handle, sizeof(handle));
		read_mem(live, b + CODE_OFF(inject_error), &err, sizeof(err));
		if (!handle && err)
			read_mem(live, b + CODE_OFF(inject_msg), msg, sizeof(msg));
		write_mem(live, b + CODE_OFF(inject_ack), &ack, sizeof(ack));
		wait_unmapped(live, map);
		if (handle)
			return 0;
		msg[sizeof(msg) - 1] = '\0';
		tool_err("the agent did not load in process %d: %s\n", (int)pid,
			msg[0] ? msg : "unknown error");
		return -1;
	}
	/* The loader unmaps its region on its own once it has an answer. */
	write_mem(live, b + CODE_OFF(inject_ack), &ack, sizeof(ack));
	wait_unmapped(live, map);
	tool_err("the agent has not finished loading in process %d after 20 s\n",
		(int)pid);
	return -1;
}

/* Refuse a process under seccomp unless told otherwise: the injected code
 * makes system calls (mmap, clone, munmap, rt_sigprocmask, nanosleep...)
 * the program itself may never make, and a filter may kill it for one. */
static int seccomp_refuses(pid_t pid, pid_t live, unsigned flags)
{
	struct proc_status ps;
	if (proc_status_read(live, &ps) != 0 || ps.seccomp <= 0)
		return 0;
	if (flags & INJECT_IGNORE_SECCOMP) {
		tool_err("warning: process %d runs under seccomp (mode %d); injecting "
				"anyway (--ignore-seccomp)\n", (int)pid, ps.seccomp);
		return 0;
	}
	if (ps.seccomp == 1)
		tool_err("cannot inject into process %d: it runs in seccomp strict mode "
				"(Seccomp: 1),\n  which kills it on any system call but read, write, "
				"_exit and sigreturn\n", (int)pid);
	else
		tool_err("cannot inject into process %d: it runs under %d seccomp "
				"filter%s (Seccomp: 2);\n  the injected code calls mmap, clone, munmap "
				"and others, and a filter that does not\n  allow one could kill the "
				"process\n", (int)pid, ps.seccomp_filters,
			ps.seccomp_filters == 1 ? "" : "s");
	fprintf(stderr, "  --ignore-seccomp injects anyway if you know the filter allows them; or "
			"start the\n  program with LD_PRELOAD=libxprobes.so\n");
	return 1;
}

int inject_agent(pid_t pid, const char *agent_path, unsigned flags)
{
	struct mapping libc;

	if (strlen(agent_path) >= (size_t)(inject_code_end - inject_path)) {
		tool_err("agent path too long: %s\n", agent_path);
		return -1;
	}
	pid_t live = live_thread(pid); /* for /proc lookups */
	if (tracer_of(live)) {
		explain_ptrace_error(pid, EPERM); /* what PTRACE_SEIZE would say */
		return -1;
	}
	const char *stopped = proc_stopped_by(process_state(live));
	if (stopped) {
		tool_err("cannot inject into process %d: it is stopped (%s); continue it "
				"first (kill -CONT %d)\n", (int)pid, stopped, (int)pid);
		return -1;
	}
	if (seccomp_refuses(pid, live, flags))
		return -1;
	char maps[64];
	snprintf(maps, sizeof(maps), "/proc/%d/maps", (int)live);
	if (access(maps, R_OK) != 0) {
		tool_err("cannot inject into process %d: cannot read %s: %s%s\n", (int)pid,
			maps, strerror(errno),
			errno == EACCES ? "\n  (the process is not dumpable: it changed credentials or called "
					  "prctl(PR_SET_DUMPABLE, 0); only root may inject)" : "");
		return -1;
	}
	if (find_mapping(live, "libc.so", &libc) != 0) {
		if (is_static_executable(live))
			tool_err("cannot inject into process %d: it is statically linked "
					"(no dynamic loader to load an agent with)\n", (int)pid);
		else
			tool_err("cannot inject into process %d yet: it is still in its "
					"dynamic loader (libc not mapped); try again in a moment\n", (int)pid);
		return -1;
	}
	struct libc_fns f = {
		.mmap = remote_symbol(live, &libc, "mmap"),
		.munmap = remote_symbol(live, &libc, "munmap"),
		.pthread_create = remote_symbol(live, &libc, "pthread_create"),
		.dlopen = remote_symbol(live, &libc, "dlopen"),
		.dlerror = remote_symbol(live, &libc, "dlerror"),
		.snprintf = remote_symbol(live, &libc, "snprintf"),
		.self = remote_symbol(live, &libc, "pthread_self"),
		.detach = remote_symbol(live, &libc, "pthread_detach"),
		.restore_rt = find_restore_rt(live, &libc),
	};
	if (!f.mmap || !f.munmap || !f.pthread_create || !f.dlopen || !f.dlerror || !f.snprintf ||
	    !f.self || !f.detach || !f.restore_rt) {
		tool_err("cannot inject into process %d: its libc (%s) does not export "
				"dlopen/pthread_create or lacks glibc's signal return (glibc >= 2.34 "
				"needed)\n", (int)pid, libc.path);
		return -1;
	}
	uintptr_t map = start_injection(pid, &f, agent_path);
	return map ? await_verdict(pid, live, map) : -1;
}

char *inject_default_agent(void)
{
	static const char *const candidates[] = { "%s/libxprobes.so.0", "%s/../lib/libxprobes.so.0",
						  "%s/../lib/x86_64-linux-gnu/libxprobes.so.0" };
	return exe_dir_find(candidates, sizeof(candidates) / sizeof(candidates[0]));
}
