/* SPDX-License-Identifier: MIT */
/* An injection target under seccomp: "filter" installs a filter that
 * allows every system call (enough for /proc/PID/status to say
 * "Seccomp: 2"), "strict" enters strict mode (read, write, _exit and
 * sigreturn only).  Prints "ready PID", then answers each line read with
 * "hit N", with raw read() and write() (stdio could make other calls). */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static void say(const char *s)
{
	if (write(1, s, strlen(s)) < 0)
		syscall(SYS_exit, 1);
}

int main(int argc, char **argv)
{
	struct sock_filter allow[] = { BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW) };
	struct sock_fprog prog = { .len = 1, .filter = allow };
	char buf[64];
	long hits = 0;
	int strict = argc > 1 && strcmp(argv[1], "strict") == 0;

	snprintf(buf, sizeof(buf), "ready %d\n", (int)getpid());
	if (strict ? prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT) != 0
		   : prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
			     prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
		return 1;
	say(buf);
	while (read(0, buf, sizeof(buf)) > 0) {
		snprintf(buf, sizeof(buf), "hit %ld\n", ++hits);
		say(buf);
	}
	syscall(SYS_exit, 0); /* strict mode allows exit, not exit_group */
}
