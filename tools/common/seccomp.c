/* SPDX-License-Identifier: MIT */
/* What a process's seccomp filters answer to given system calls, found
 * without making them there.
 *
 * A filter runs only when its thread makes a system call, and may kill the
 * process for it: the only test that cannot kill is to read the filters and
 * run them here.  The kernel gives a thread's filters to a tracer that has
 * CAP_SYS_ADMIN (PTRACE_SECCOMP_GET_FILTER, on a thread in a ptrace stop):
 * each filtered thread is seized, interrupted for the time it takes to copy
 * them, and let go, as a debugger would.  The filters are classic BPF over
 * struct seccomp_data; the kernel runs every filter of the thread and takes
 * the most severe answer, and so does seccomp_run below. */
#define _GNU_SOURCE
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

#if defined(__x86_64__)
#define OUR_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define OUR_AUDIT_ARCH AUDIT_ARCH_AARCH64
#else
#error "seccomp.c: which AUDIT_ARCH is this?"
#endif

#define MAX_INSNS 4096 /* BPF_MAXINSNS: the kernel takes no longer filter */

/* The action of a filter's result, as the kernel ranks them: lower is
 * more severe (SECCOMP_RET_KILL_PROCESS, 0x80000000, is the lowest). */
static int32_t action_rank(uint32_t ret)
{
	return (int32_t)(ret & SECCOMP_RET_ACTION_FULL);
}

/* Classic BPF as seccomp accepts it (the kernel's seccomp_check_filter
 * allows these instructions only); anything else answers "kill", which
 * refuses rather than guesses.  Jumps go forward only: it ends. */
static uint32_t run_filter(const struct sock_filter *f, size_t n, const struct seccomp_data *d)
{
	uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = { 0 };
	for (size_t pc = 0; pc < n; pc++) {
		const struct sock_filter *i = &f[pc];
		uint32_t src = BPF_SRC(i->code) == BPF_X ? x : i->k;
		switch (i->code) {
		case BPF_LD | BPF_W | BPF_ABS:
			if (i->k % 4 || i->k + 4 > sizeof(*d))
				return SECCOMP_RET_KILL_PROCESS;
			memcpy(&a, (const char *)d + i->k, 4);
			continue;
		case BPF_LD | BPF_W | BPF_LEN:
			a = sizeof(*d);
			continue;
		case BPF_LDX | BPF_W | BPF_LEN:
			x = sizeof(*d);
			continue;
		case BPF_LD | BPF_IMM:
			a = i->k;
			continue;
		case BPF_LDX | BPF_IMM:
			x = i->k;
			continue;
		case BPF_MISC | BPF_TAX:
			x = a;
			continue;
		case BPF_MISC | BPF_TXA:
			a = x;
			continue;
		case BPF_LD | BPF_MEM:
		case BPF_LDX | BPF_MEM:
		case BPF_ST:
		case BPF_STX:
			if (i->k >= BPF_MEMWORDS)
				return SECCOMP_RET_KILL_PROCESS;
			if (i->code == (BPF_LD | BPF_MEM))
				a = mem[i->k];
			else if (i->code == (BPF_LDX | BPF_MEM))
				x = mem[i->k];
			else
				mem[i->k] = i->code == BPF_ST ? a : x;
			continue;
		case BPF_RET | BPF_K:
			return i->k;
		case BPF_RET | BPF_A:
			return a;
		case BPF_JMP | BPF_JA:
			pc += i->k;
			continue;
		}
		if (BPF_CLASS(i->code) == BPF_JMP) {
			int taken;
			switch (BPF_OP(i->code)) {
			case BPF_JEQ: taken = a == src; break;
			case BPF_JGT: taken = a > src; break;
			case BPF_JGE: taken = a >= src; break;
			case BPF_JSET: taken = (a & src) != 0; break;
			default: return SECCOMP_RET_KILL_PROCESS;
			}
			pc += taken ? i->jt : i->jf;
			continue;
		}
		if (BPF_CLASS(i->code) != BPF_ALU)
			return SECCOMP_RET_KILL_PROCESS;
		switch (BPF_OP(i->code)) {
		case BPF_ADD: a += src; break;
		case BPF_SUB: a -= src; break;
		case BPF_MUL: a *= src; break;
		case BPF_DIV:
			if (!src)
				return SECCOMP_RET_KILL_PROCESS; /* the kernel's filter ends: 0 */
			a /= src;
			break;
		case BPF_AND: a &= src; break;
		case BPF_OR: a |= src; break;
		case BPF_XOR: a ^= src; break;
		case BPF_LSH: a = src < 32 ? a << src : 0; break;
		case BPF_RSH: a = src < 32 ? a >> src : 0; break;
		case BPF_NEG: a = -a; break;
		default: return SECCOMP_RET_KILL_PROCESS;
		}
	}
	return SECCOMP_RET_KILL_PROCESS; /* fell off the end: the kernel refuses such a filter */
}

struct filters {
	struct sock_filter *insns[128];
	size_t len[128];
	size_t n;
};

static void filters_free(struct filters *fs)
{
	for (size_t i = 0; i < fs->n; i++)
		free(fs->insns[i]);
	fs->n = 0;
}

/* A thread's filters while it is in a ptrace stop; 0, or an errno. */
static int copy_filters(pid_t tid, struct filters *fs)
{
	for (unsigned long k = 0;; k++) {
		long n = ptrace(PTRACE_SECCOMP_GET_FILTER, tid, (void *)k, NULL);
		if (n < 0 && errno == ENOENT && k > 0)
			return 0; /* past the oldest */
		if (n < 0)
			return errno;
		if (n == 0 || n > MAX_INSNS || fs->n == sizeof(fs->insns) / sizeof(fs->insns[0]))
			return E2BIG;
		struct sock_filter *f = calloc((size_t)n, sizeof(*f));
		if (!f)
			return ENOMEM;
		fs->insns[fs->n] = f;
		fs->len[fs->n++] = (size_t)n;
		if (ptrace(PTRACE_SECCOMP_GET_FILTER, tid, (void *)k, f) != n)
			return errno ? errno : EAGAIN;
	}
}

/* Seize tid, stop it, copy its filters, let it go.  0 or an errno. */
static int read_filters(pid_t tid, struct filters *fs)
{
	if (ptrace(PTRACE_SEIZE, tid, 0, 0) != 0)
		return errno;
	int err = 0, status, sig = 0;
	if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) != 0)
		err = errno;
	while (!err && waitpid(tid, &status, __WALL) < 0)
		if (errno != EINTR)
			err = errno;
	if (!err && !WIFSTOPPED(status))
		err = ESRCH; /* it ended meanwhile */
	/* A signal that arrived first stopped it instead (still a ptrace
	 * stop): it is delivered on the way out. */
	if (!err && (status >> 16) == 0 && WSTOPSIG(status) != SIGTRAP)
		sig = WSTOPSIG(status);
	if (!err)
		err = copy_filters(tid, fs);
	ptrace(PTRACE_DETACH, tid, 0, sig);
	return err;
}

/* The answer of a thread's filters to u. */
static uint32_t verdict(const struct filters *fs, const struct syscall_use *u)
{
	struct seccomp_data d = { .nr = (int)u->nr, .arch = OUR_AUDIT_ARCH };
	memcpy(d.args, u->args, sizeof(d.args));
	uint32_t ret = SECCOMP_RET_ALLOW;
	for (size_t i = 0; i < fs->n; i++) {
		uint32_t cur = run_filter(fs->insns[i], fs->len[i], &d);
		if (action_rank(cur) < action_rank(ret))
			ret = cur;
	}
	return ret;
}

static int allowed(uint32_t ret, const struct syscall_use *u)
{
	uint32_t act = ret & SECCOMP_RET_ACTION_FULL;
	if (u->may_fail) /* an error, a supervisor's or a tracer's answer will do */
		return act != SECCOMP_RET_KILL_PROCESS && act != SECCOMP_RET_KILL_THREAD &&
		       act != SECCOMP_RET_TRAP;
	return act == SECCOMP_RET_ALLOW || act == SECCOMP_RET_LOG;
}

int seccomp_verdict(pid_t pid, const struct syscall_use *uses, size_t nuses,
		    struct seccomp_answer *ans)
{
	char path[64];
	memset(ans, 0, sizeof(*ans));
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	if (!d) {
		ans->err = errno;
		return -1;
	}
	int rc = 0;
	struct dirent *e;
	while (rc == 0 && (e = readdir(d))) {
		pid_t tid = atoi(e->d_name);
		struct proc_status ps;
		if (tid <= 0 || proc_status_read(tid, &ps) != 0 || ps.seccomp <= 0)
			continue; /* gone, or free of seccomp */
		ans->tid = tid;
		ans->mode = ps.seccomp;
		ans->filters = ps.seccomp_filters;
		if (ps.seccomp == 1) { /* strict: read, write, exit and sigreturn only */
			ans->ret = SECCOMP_RET_KILL_PROCESS;
			rc = 1;
			break;
		}
		struct filters fs = { .n = 0 };
		int err = read_filters(tid, &fs);
		if (err == ESRCH) {
			filters_free(&fs);
			continue; /* ended while we looked */
		}
		if (err) {
			ans->err = err;
			rc = -1;
		}
		for (size_t i = 0; rc == 0 && i < nuses; i++) {
			uint32_t ret = verdict(&fs, &uses[i]);
			if (!allowed(ret, &uses[i])) {
				ans->use = &uses[i];
				ans->ret = ret;
				rc = 1;
			}
		}
		filters_free(&fs);
	}
	closedir(d);
	if (rc == 0)
		ans->tid = 0;
	return rc;
}

void seccomp_describe(uint32_t ret, const char *call, char *buf, size_t bufsz)
{
	uint32_t data = ret & SECCOMP_RET_DATA;
	const char *name = strerrorname_np((int)data);
	switch (ret & SECCOMP_RET_ACTION_FULL) {
	case SECCOMP_RET_KILL_PROCESS:
		snprintf(buf, bufsz, "kills the process on %s", call);
		break;
	case SECCOMP_RET_KILL_THREAD:
		snprintf(buf, bufsz, "kills the calling thread on %s", call);
		break;
	case SECCOMP_RET_TRAP:
		snprintf(buf, bufsz, "sends SIGSYS on %s (which kills the process unless it "
				     "catches it)", call);
		break;
	case SECCOMP_RET_ERRNO:
		snprintf(buf, bufsz, "makes %s fail with %s (errno %u)", call,
			 name ? name : "an error", data);
		break;
	case SECCOMP_RET_USER_NOTIF:
		snprintf(buf, bufsz, "leaves %s to a supervisor process", call);
		break;
	case SECCOMP_RET_TRACE:
		snprintf(buf, bufsz, "leaves %s to a tracer (it fails without one)", call);
		break;
	default:
		snprintf(buf, bufsz, "refuses %s", call);
	}
}
