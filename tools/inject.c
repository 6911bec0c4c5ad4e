/* Agent injection, Frida style: ptrace only to bootstrap.
 *
 * We seize one thread of the target, stop it, and borrow it for two
 * function calls: mmap() for one page, then pthread_create() of a small
 * thread whose only job is dlopen(agent) and detaching itself.  The
 * borrowed thread gets its registers back and goes on as if interrupted
 * by a signal (its blocking syscall is restarted); the rest of the process
 * never stops.  Loading happens on the fresh thread.
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
#include "inject.h"

#include "exedir.h"
#include "proc_status.h"

#include <dirent.h>
#include <dlfcn.h>
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
#include <sys/mman.h>
#include <sys/ptrace.h>
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

/* Address of a dynamic symbol of the libc mapped in pid. */
static uintptr_t remote_symbol(pid_t pid, const struct mapping *libc, const char *name)
{
	char path[PATH_MAX + 32];
	/* Through the target's root: right even across mount namespaces. */
	snprintf(path, sizeof(path), "/proc/%d/root%s", (int)pid, libc->path);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	uintptr_t addr = 0;
	elf_version(EV_CURRENT);
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	Elf_Scn *scn = NULL;
	while (elf && !addr && (scn = elf_nextscn(elf, scn))) {
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
	if (elf)
		elf_end(elf);
	close(fd);
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
	int pending_signal; /* arrived while we borrowed the thread */
};

/* Call fn(a0..a3) on the stopped thread; returns its rax, or -1 with a
 * message.  The call returns to address 0: the resulting SIGSEGV stop is
 * our "it returned" signal and is never delivered. */
static int remote_call(struct target *t, uintptr_t fn, uintptr_t a0, uintptr_t a1,
		       uintptr_t a2, uintptr_t a3, uintptr_t a4, uintptr_t a5,
		       uintptr_t *ret)
{
	struct user_regs_struct r = t->saved;
	r.rsp = ((r.rsp - 1024) & ~(uintptr_t)15) - 8; /* below the red zone */
	uintptr_t zero = 0;
	if (ptrace(PTRACE_POKEDATA, t->pid, r.rsp, zero) != 0)
		return -1;
	r.rip = fn;
	r.rdi = a0;
	r.rsi = a1;
	r.rdx = a2;
	r.rcx = a3;
	r.r8 = a4;
	r.r9 = a5;
	r.rax = 0;
	r.orig_rax = (unsigned long long)-1; /* no syscall restart on resume */
	if (ptrace(PTRACE_SETREGS, t->pid, 0, &r) != 0)
		return -1;
	int sig = 0;
	for (;;) {
		if (ptrace(PTRACE_CONT, t->pid, 0, 0) != 0)
			return -1;
		int ev = wait_stop(t->pid, &sig);
		if (ev < 0)
			return -1;
		if (ev != 0)
			continue; /* group-stop or event stop: keep going */
		if (sig == SIGSEGV) {
			if (ptrace(PTRACE_GETREGS, t->pid, 0, &r) != 0)
				return -1;
			if (r.rip == 0)
				break;
			return -1; /* a real crash inside the call */
		}
		if (!t->pending_signal && sig != SIGSTOP && sig != SIGTRAP)
			t->pending_signal = sig;
	}
	*ret = r.rax;
	return 0;
}

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

/* Page layout. */
enum { OFF_CODE = 0, OFF_HANDLE = 256, OFF_ERROR = 264, OFF_DONE = 272,
       OFF_TID = 280, OFF_FMT = 288, OFF_PATH = 512, OFF_MSG = 3072, MSG_LEN = 1024 };

static size_t emit_movabs(unsigned char *p, unsigned char reg_rex_op[2], uint64_t v)
{
	p[0] = reg_rex_op[0];
	p[1] = reg_rex_op[1];
	memcpy(p + 2, &v, 8);
	return 10;
}

/* The thread body, hand-assembled (x86-64):
 *     sub  $8,%rsp               ; 16-byte alignment for the calls
 *     mov  $RTLD_NOW,%esi        ; rdi = path (the thread argument)
 *     movabs $dlopen,%rax ; call *%rax
 *     movabs $handle,%rcx ; mov %rax,(%rcx)
 *     test %rax,%rax ; jnz 1f
 *     movabs $dlerror,%rax ; call *%rax
 *     movabs $error,%rcx ; mov %rax,(%rcx)
 *     mov %rax,%rcx ; movabs $msg,%rdi ; mov $MSG_LEN,%esi
 *     movabs $"%s",%rdx ; xor %eax,%eax ; movabs $snprintf,%r11 ; call *%r11
 *                                ; (dlerror's text dies with the thread)
 * 1:  movabs $pthread_self,%rax ; call *%rax ; mov %rax,%rdi
 *     movabs $pthread_detach,%rax ; call *%rax
 *     movabs $done,%rcx ; movl $1,(%rcx)
 *     movabs $handle,%rcx ; mov (%rcx),%rax ; test %rax,%rax ; jz 2f
 *     movabs $page,%rdi ; mov $4096,%esi ; movabs $munmap,%rax
 *     add $8,%rsp ; jmp *%rax     ; loaded: unmap this page and return
 *                                 ; from munmap straight to libc's
 *                                 ; thread start (leaves no RWX page)
 * 2:  xor %eax,%eax ; add $8,%rsp ; ret   ; failed: the tool reads the
 *                                         ; message from the page
 */
static size_t build_thread_code(unsigned char *c, uintptr_t page, uintptr_t f_dlopen,
				uintptr_t f_dlerror, uintptr_t f_snprintf, uintptr_t f_self,
				uintptr_t f_detach, uintptr_t f_munmap)
{
	unsigned char rax[2] = { 0x48, 0xb8 }, rcx[2] = { 0x48, 0xb9 };
	unsigned char rdi[2] = { 0x48, 0xbf }, rdx[2] = { 0x48, 0xba }, r11[2] = { 0x49, 0xbb };
	const unsigned char mov_rcx_rax[] = { 0x48, 0x89, 0xc1 };
	const unsigned char mov_esi_len[] = { 0xbe, MSG_LEN & 0xff, (MSG_LEN >> 8) & 0xff, 0, 0 };
	const unsigned char xor_eax[] = { 0x31, 0xc0 };
	const unsigned char call_r11[] = { 0x41, 0xff, 0xd3 };
	size_t n = 0;
	const unsigned char sub8[] = { 0x48, 0x83, 0xec, 0x08 };
	const unsigned char mov_esi[] = { 0xbe, RTLD_NOW, 0, 0, 0 };
	const unsigned char call_rax[] = { 0xff, 0xd0 };
	const unsigned char store_rax[] = { 0x48, 0x89, 0x01 };
	const unsigned char test_rax[] = { 0x48, 0x85, 0xc0 };
	const unsigned char mov_rdi_rax[] = { 0x48, 0x89, 0xc7 };
	const unsigned char movl_1[] = { 0xc7, 0x01, 1, 0, 0, 0 };
	const unsigned char epilogue[] = { 0x31, 0xc0, 0x48, 0x83, 0xc4, 0x08, 0xc3 };
#define PUT(x) (memcpy(c + n, x, sizeof(x)), n += sizeof(x))
	PUT(sub8);
	PUT(mov_esi);
	n += emit_movabs(c + n, rax, f_dlopen);
	PUT(call_rax);
	n += emit_movabs(c + n, rcx, page + OFF_HANDLE);
	PUT(store_rax);
	PUT(test_rax);
	size_t jnz_at = n;
	c[n++] = 0x75; /* jnz rel8, patched below */
	c[n++] = 0;
	n += emit_movabs(c + n, rax, f_dlerror);
	PUT(call_rax);
	n += emit_movabs(c + n, rcx, page + OFF_ERROR);
	PUT(store_rax);
	PUT(mov_rcx_rax);
	n += emit_movabs(c + n, rdi, page + OFF_MSG);
	PUT(mov_esi_len);
	n += emit_movabs(c + n, rdx, page + OFF_FMT);
	PUT(xor_eax);
	n += emit_movabs(c + n, r11, f_snprintf);
	PUT(call_r11);
	c[jnz_at + 1] = (unsigned char)(n - (jnz_at + 2));
	n += emit_movabs(c + n, rax, f_self);
	PUT(call_rax);
	PUT(mov_rdi_rax);
	n += emit_movabs(c + n, rax, f_detach);
	PUT(call_rax);
	n += emit_movabs(c + n, rcx, page + OFF_DONE);
	PUT(movl_1);
	const unsigned char load_rax[] = { 0x48, 0x8b, 0x01 };
	const unsigned char mov_esi_page[] = { 0xbe, 0x00, 0x10, 0x00, 0x00 };
	const unsigned char add8_jmp_rax[] = { 0x48, 0x83, 0xc4, 0x08, 0xff, 0xe0 };
	n += emit_movabs(c + n, rcx, page + OFF_HANDLE);
	PUT(load_rax);
	PUT(test_rax);
	size_t jz_at = n;
	c[n++] = 0x74; /* jz rel8, patched below */
	c[n++] = 0;
	n += emit_movabs(c + n, rdi, page);
	PUT(mov_esi_page);
	n += emit_movabs(c + n, rax, f_munmap);
	PUT(add8_jmp_rax);
	c[jz_at + 1] = (unsigned char)(n - (jz_at + 2));
	PUT(epilogue);
#undef PUT
	return n;
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
			fprintf(stderr, "xprobes: process %d went away\n", (int)pid);
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
			if (ptrace(PTRACE_SEIZE, tids[i], 0, 0) != 0) {
				if (errno == ESRCH)
					continue; /* it exited meanwhile */
				explain_ptrace_error(pid, errno);
				return -1;
			}
			int sig = 0;
			if (ptrace(PTRACE_INTERRUPT, tids[i], 0, 0) != 0 || wait_stop(tids[i], &sig) < 0 ||
			    ptrace(PTRACE_GETREGS, tids[i], 0, &t->saved) != 0) {
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
	fprintf(stderr,
		"xprobes: cannot inject into process %d: none of its %d thread%s is waiting in a\n"
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
	fprintf(stderr, "xprobes: cannot inject: ptrace(%d) refused: %s\n", (int)pid, strerror(err));
	if (tracer)
		fprintf(stderr, "  process %d is already traced by process %d (a debugger or tracer)\n",
			(int)pid, tracer);
	else if (err == EPERM)
		fprintf(stderr, "  check kernel.yama.ptrace_scope and that you own the process\n");
	fprintf(stderr, "  alternative: start the program with LD_PRELOAD=libxprobes.so\n");
}

int inject_agent(pid_t pid, const char *agent_path)
{
	struct target t = { .pid = 0 };
	struct mapping libc;

	if (strlen(agent_path) >= OFF_MSG - OFF_PATH) {
		fprintf(stderr, "xprobes: agent path too long: %s\n", agent_path);
		return -1;
	}
	pid_t live = live_thread(pid); /* for /proc lookups */
	if (tracer_of(live)) {
		explain_ptrace_error(pid, EPERM); /* what PTRACE_SEIZE would say */
		return -1;
	}
	const char *stopped = proc_stopped_by(process_state(live));
	if (stopped) {
		fprintf(stderr, "xprobes: cannot inject into process %d: it is stopped (%s); continue it "
				"first (kill -CONT %d)\n", (int)pid, stopped, (int)pid);
		return -1;
	}
	char maps[64];
	snprintf(maps, sizeof(maps), "/proc/%d/maps", (int)live);
	if (access(maps, R_OK) != 0) {
		fprintf(stderr, "xprobes: cannot inject into process %d: cannot read %s: %s%s\n", (int)pid,
			maps, strerror(errno),
			errno == EACCES ? "\n  (the process is not dumpable: it changed credentials or called "
					  "prctl(PR_SET_DUMPABLE, 0); only root may inject)" : "");
		return -1;
	}
	if (find_mapping(live, "libc.so", &libc) != 0) {
		if (is_static_executable(live))
			fprintf(stderr, "xprobes: cannot inject into process %d: it is statically linked "
					"(no dynamic loader to load an agent with)\n", (int)pid);
		else
			fprintf(stderr, "xprobes: cannot inject into process %d yet: it is still in its "
					"dynamic loader (libc not mapped); try again in a moment\n", (int)pid);
		return -1;
	}
	uintptr_t f_mmap = remote_symbol(live, &libc, "mmap");
	uintptr_t f_create = remote_symbol(live, &libc, "pthread_create");
	uintptr_t f_dlopen = remote_symbol(live, &libc, "dlopen");
	uintptr_t f_dlerror = remote_symbol(live, &libc, "dlerror");
	uintptr_t f_snprintf = remote_symbol(live, &libc, "snprintf");
	uintptr_t f_self = remote_symbol(live, &libc, "pthread_self");
	uintptr_t f_detach = remote_symbol(live, &libc, "pthread_detach");
	uintptr_t f_munmap = remote_symbol(live, &libc, "munmap");
	if (!f_mmap || !f_create || !f_dlopen || !f_dlerror || !f_snprintf || !f_self || !f_detach ||
	    !f_munmap) {
		fprintf(stderr, "xprobes: cannot inject into process %d: its libc (%s) does not export "
				"dlopen/pthread_create (glibc >= 2.34 needed)\n", (int)pid, libc.path);
		return -1;
	}

	if (borrow_thread(pid, &t) != 0)
		return -1;
	int rc = -1;

	uintptr_t page;
	if (remote_call(&t, f_mmap, 0, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
			MAP_PRIVATE | MAP_ANONYMOUS, (uintptr_t)-1, 0, &page) != 0 ||
	    page == (uintptr_t)MAP_FAILED) {
		fprintf(stderr, "xprobes: cannot inject: mmap in process %d failed\n", (int)pid);
		goto out;
	}
	unsigned char buf[4096] = { 0 };
	size_t code = build_thread_code(buf + OFF_CODE, page, f_dlopen, f_dlerror, f_snprintf,
					f_self, f_detach, f_munmap);
	if (code > OFF_HANDLE) /* the layout above has room for 256 bytes */
		abort();
	strcpy((char *)buf + OFF_FMT, "%s");
	strcpy((char *)buf + OFF_PATH, agent_path);
	uintptr_t created;
	if (write_mem(t.pid, page, buf, sizeof(buf)) != 0 ||
	    remote_call(&t, f_create, page + OFF_TID, 0, page + OFF_CODE, page + OFF_PATH, 0, 0,
			&created) != 0 || created != 0) {
		fprintf(stderr, "xprobes: cannot inject: could not start a thread in process %d\n",
			(int)pid);
		goto out;
	}
	rc = 0;
out:
	/* Give the thread its registers back (its system call restarts);
	 * deliver anything we held. */
	ptrace(PTRACE_SETREGS, t.pid, 0, &t.saved);
	ptrace(PTRACE_DETACH, t.pid, 0, t.pending_signal);
	if (rc != 0)
		return rc;

	/* The fresh thread runs on its own now: wait for its verdict (a
	 * bounded wait; the target owes us nothing). */
	int loaded = 0;
	for (int i = 0; i < 1000; i++) {
		uint32_t done = 0;
		uint64_t handle = 0, err = 0;
		if (read_mem(live, page + OFF_DONE, &done, sizeof(done)) != 0) {
			/* After a successful load the thread unmaps its page. */
			if (kill(pid, 0) == 0)
				return 0;
			fprintf(stderr, "xprobes: process %d went away during injection\n", (int)pid);
			return -1;
		}
		if (done && read_mem(live, page + OFF_HANDLE, &handle, 8) != 0)
			return 0; /* loaded, and unmapped already */
		/* Loaded: wait for the page to go too, so that the target is as
		 * it was, less our agent, when we return. */
		loaded = done && handle;
		if (done && !handle) {
			read_mem(live, page + OFF_ERROR, &err, 8);
			char msg[MSG_LEN] = "";
			if (err)
				read_mem(live, page + OFF_MSG, msg, sizeof(msg));
			msg[sizeof(msg) - 1] = '\0';
			if (!msg[0])
				strcpy(msg, "unknown error");
			fprintf(stderr, "xprobes: the agent did not load in process %d: %s\n", (int)pid, msg);
			return -1;
		}
		struct timespec ts = { 0, 10 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	if (loaded)
		return 0; /* its thread has not unmapped the page yet */
	fprintf(stderr, "xprobes: the agent has not finished loading in process %d after 10 s\n",
		(int)pid);
	return -1;
}

char *inject_default_agent(void)
{
	char exe[PATH_MAX];
	if (exe_dir(exe, sizeof(exe)) != 0)
		return NULL;
	const char *candidates[] = { "%s/libxprobes.so.0", "%s/../lib/libxprobes.so.0",
				     "%s/../lib/x86_64-linux-gnu/libxprobes.so.0" };
	for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
		char p[PATH_MAX + 64];
		snprintf(p, sizeof(p), candidates[i], exe);
		char *real = realpath(p, NULL);
		if (real)
			return real;
	}
	return NULL;
}
