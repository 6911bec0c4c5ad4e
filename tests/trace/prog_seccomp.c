/* SPDX-License-Identifier: MIT */
/* A traced program under a seccomp filter, for test_trace_seccomp.py.
 * argv[1] says which filter, installed before it prints "ready PID":
 *
 *   kill       every thread (TSYNC): mremap kills the process
 *   errno      every thread (TSYNC): mremap fails with EPERM
 *   kill-main  the main thread only (no TSYNC): mremap kills the process
 *   wx         every thread (TSYNC): mprotect adding PROT_EXEC fails with
 *              EPERM (systemd's MemoryDenyWriteExecute=)
 *   allow      every thread (TSYNC): everything allowed, but a filter
 *
 * Then it is prog_plain.c: "run" calls traced functions and answers
 * "sum 320"; "quit" (or end of input) ends it with status 0. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

/* prog_plain.c's functions and loop, as plain_main(). */
#define main plain_main
#include "prog_plain.c"
#undef main

static int install(const char *how)
{
	int wx = strcmp(how, "wx") == 0;
	unsigned action = strcmp(how, "errno") == 0 || wx ? SECCOMP_RET_ERRNO | EPERM
			: strcmp(how, "allow") == 0 ? SECCOMP_RET_ALLOW : SECCOMP_RET_KILL_PROCESS;
	/* The call, when its third argument has a bit of mask (mremap's new
	 * length always has one; mprotect's protection PROT_EXEC). */
	unsigned nr = wx ? SYS_mprotect : SYS_mremap, mask = wx ? PROT_EXEC : ~0u;
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 5),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
		BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, mask, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, action),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };
	unsigned flags = strcmp(how, "kill-main") == 0 ? 0 : SECCOMP_FILTER_FLAG_TSYNC;
	return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
			       syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog) == 0
		       ? 0
		       : -1;
}

int main(int argc, char **argv)
{
	if (argc != 2 || install(argv[1]) != 0) {
		perror("prog_seccomp: cannot install the filter");
		return 1;
	}
	return plain_main();
}
