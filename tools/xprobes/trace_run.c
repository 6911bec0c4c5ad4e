/* SPDX-License-Identifier: MIT */
/* xprobes trace [start options] [-o FILE] [--format F] -- PROG ARGS...:
 * run PROG, trace it from before main to its exit, print the trace.
 *
 * The program holds twice on a socket pair whose end it inherits, named
 * by XPROBES_TRACE_FD (the instrumented executable's own code does this,
 * lib/static/trace_note.c; see docs/design.md):
 *   - once its constructors have made every patch site a NOP, before the
 *     rest of its constructors and main, it writes "ready\n" and waits
 *     for a line: meanwhile the agent's thread serves this tool, which
 *     starts tracing through the usual commands (-F/-N included);
 *   - in its last destructor, after main and the atexit handlers, it
 *     writes "exit\n" and waits again, so the tool reads the buffers from
 *     a live process.
 * End of file instead of either line means the program went without the
 * handshake (not built for tracing, or killed, or _exit): then there is
 * nothing to print.  The trace is printed after the program has exited,
 * so it comes after whatever the program's stdio flushes at exit. */
#define _GNU_SOURCE
#include "xprobes.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

static void usage(FILE *to)
{
	fputs("usage: xprobes trace [-F glob]... [-N glob]... [-D depth] [-t min_us] [-T tid]...\n"
	      "                     [-b KiB] [-A glob@spec]... [-R glob@retval]... [-a] [--overwrite]\n"
	      "                     [--no-libcall] [-o DIR] -- PROG [ARGS...]\n"
	      "       xprobes trace [start options] [--format graph|chrome|folded [-o FILE]] -- PROG\n"
	      "-o DIR records into DIR as it runs (read it with trace cat -d DIR, or uftrace)\n",
	      to);
}

/* One line from the program (without its newline), "" at end of file. */
static void read_line(int fd, char *buf, size_t size)
{
	size_t n = 0;
	char c;
	while (n + 1 < size) {
		ssize_t r = read(fd, &c, 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || c == '\n')
			break;
		buf[n++] = c;
	}
	buf[n] = '\0';
}

/* A program already gone makes this fail: waitpid tells the rest. */
static void say_go(int fd)
{
	(void)!send(fd, "go\n", 3, MSG_NOSIGNAL);
}

/* A wait status as a shell gives it: the exit status, or 128 + the
 * signal that killed it. */
static int shell_status(int st)
{
	return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1;
}

/* The program's status as a shell gives it. */
static int wait_status(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return 1;
	return shell_status(st);
}

static pid_t spawn(char **argv, int *sock)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
		perror("xprobes trace: socketpair");
		return -1;
	}
	int one = 1; /* who says "ready": the program, or a process it made */
	setsockopt(sv[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));
	pid_t pid = fork();
	if (pid < 0) {
		perror("xprobes trace: fork");
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (pid == 0) {
		char num[16];
		snprintf(num, sizeof(num), "%d", sv[1]);
		if (fcntl(sv[1], F_SETFD, 0) != 0 || setenv("XPROBES_TRACE_FD", num, 1) != 0)
			_exit(127);
		signal(SIGPIPE, SIG_DFL); /* xprobes ignores it; the program gets a shell's */
		execvp(argv[0], argv);
		fprintf(stderr, "xprobes trace: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(sv[1]);
	*sock = sv[0];
	return pid;
}

/* How long a program sent SIGINT or SIGTERM with the tool may take to
 * end before the tool leaves it running: long enough to die of the
 * signal, short enough that no supervisor waits on the tool. */
#define GRACE_MS 2000

struct run_end {
	pid_t pid;
	int reaped, status; /* a wait status */
};

/* Reap pid with its rusage, waiting at most ms (-1: as long as it takes).
 * 1 when reaped. */
static int reap(pid_t pid, int ms, int *status, struct rusage *ru)
{
	int pfd = ms < 0 ? -1 : (int)syscall(SYS_pidfd_open, pid, 0);
	if (pfd >= 0) {
		struct pollfd p = { .fd = pfd, .events = POLLIN };
		while (poll(&p, 1, ms) < 0 && errno == EINTR)
			;
		close(pfd);
	}
	pid_t got;
	while ((got = wait4(pid, status, ms < 0 ? 0 : WNOHANG, ru)) < 0 && errno == EINTR)
		;
	return got == pid;
}

/* The recording is drained (trace_run_ctl's finish).  The program ended
 * it ("exit"): let it go and reap it.  A signal to the tool ended it:
 * pass the signal on unless the terminal sent it to the program too,
 * let go of the program (end of file: it runs on untraced), and reap it
 * if it ends within GRACE_MS.  Otherwise (another client stopped
 * tracing, a failure) it runs on, and is waited for after. */
static int run_finish(struct trace_run_ctl *run, int *status, struct rusage *ru)
{
	struct run_end *e = run->ctx;
	/* Following, it may have been let go at its end already (or it
	 * exec'd, or went) while its children were still recorded: ended by
	 * now, it is reaped as it is; else it runs an image it exec'd, which
	 * a signal reaches as below, or which is waited for after, once the
	 * programs waiting on the follower are let go. */
	if (run->let_go) {
		e->reaped = reap(e->pid, 0, status, ru);
	} else if (run->exited) {
		say_go(run->sock);
		e->reaped = reap(e->pid, -1, status, ru);
	}
	if (run->stop_signal && !e->reaped && (run->let_go || !run->exited)) {
		if (!run->stop_by_terminal)
			kill(e->pid, run->stop_signal);
		close(run->sock);
		run->sock = -1;
		e->reaped = reap(e->pid, GRACE_MS, status, ru);
	}
	if (e->reaped)
		e->status = *status;
	return e->reaped;
}

/* -o DIR: drained into DIR while it runs, until it exits or the tool gets
 * SIGINT or SIGTERM (run_finish says what then becomes of the program).
 * A recording that fails before the program was let go ends it: it is
 * held before main, and would otherwise run untraced unasked. */
static int run_recorded(struct trace_opts *o, const char *prog, pid_t pid, pid_t root, int sock,
			struct session *s)
{
	const char *dir = o->out; /* an argument: outlives o */
	struct run_end e = { pid, 0, 0 };
	struct trace_run_ctl run = { .sock = sock, .finish = run_finish, .ctx = &e };
	int rc = 1;
	if (session_open(s, root, 0) == 0) {
		rc = trace_record_dir(s, o, o->out, &run);
		session_close(s);
	}
	/* Reaped by now if it ended; if not, programs it exec'd that wait
	 * on the follower go on untraced before it is waited for. */
	trace_follow_free(o->follow);
	o->follow = NULL;
	trace_opts_free(o);
	if (!run.started) {
		kill(pid, SIGKILL);
		close(sock);
		wait_status(pid);
		return rc ? rc : 1;
	}
	if (!e.reaped && run.stop_signal) {
		if (run.sock >= 0)
			close(run.sock);
		fprintf(stderr, "xprobes trace: %s (pid %d) %s SIG%s and has not ended; it runs "
				"on, untraced\n", prog, (int)pid,
			run.stop_by_terminal ? "got" : "was sent", sigabbrev_np(run.stop_signal));
		return 128 + run.stop_signal;
	}
	if (!e.reaped) { /* it runs on untraced: its exit still holds for a go */
		char line[64];
		if (!run.let_go) { /* else it was told already, or will not ask */
			read_line(sock, line, sizeof(line));
			say_go(sock);
		}
		close(sock);
		while (waitpid(pid, &e.status, 0) < 0)
			if (errno != EINTR)
				return 1;
	} else if (run.sock >= 0) {
		close(run.sock);
	}
	if (WIFSIGNALED(e.status))
		fprintf(stderr, "xprobes trace: %s ended by signal %d (SIG%s); the recording in %s "
				"keeps what it did until then\n", prog, WTERMSIG(e.status),
			sigabbrev_np(WTERMSIG(e.status)), dir);
	int st = shell_status(e.status);
	return st ? st : rc;
}

int trace_run_main(int argc, char **argv, int timeout_ms)
{
	struct trace_opts o;
	if (argc > 1 && (!strcmp(argv[1], "cat") || !strcmp(argv[1], "stat")))
		return trace_offline_main(argc - 1, argv + 1);
	argv[0] = "xprobes trace";
	int first = trace_parse_start(argc, argv, TRACE_FORM_RUN, &o);
	if (first < 0 || first >= argc) {
		if (first >= 0) {
			fprintf(stderr, "xprobes trace: no program to run\n");
			usage(stderr);
		}
		trace_opts_free(&o);
		return 2;
	}
	/* -o DIR records there (uftrace's format, drained while it runs);
	 * with --format, -o names the file the trace is printed to. */
	int record = o.out && !o.view_given;
	if (record && strstr(o.agent_args, "--overwrite")) {
		fprintf(stderr, "xprobes trace: --overwrite does not go with -o DIR (a flight "
				"recorder is read with trace cat)\n");
		trace_opts_free(&o);
		return 2;
	}
	FILE *out = stdout;
	if (o.out && !record && !(out = fopen(o.out, "w"))) {
		fprintf(stderr, "xprobes trace: cannot write %s: %s\n", o.out, strerror(errno));
		trace_opts_free(&o);
		return 2;
	}
	/* Before the program runs: a directory the recorder cannot take
	 * must not leave it waiting, nor run it untraced. */
	if (record && uft_dir_usable(o.out) != 0) {
		fprintf(stderr, "xprobes trace: %s\n", uft_error(NULL));
		trace_opts_free(&o);
		return 1;
	}
	int sock = -1;
	/* Recording: the program's children and the programs it execs too. */
	if (record && (o.follow = trace_follow_new()))
		setenv("XPROBES_TRACE_FOLLOW", trace_follow_path(o.follow), 1);
	pid_t pid = spawn(argv + first, &sock);
	if (pid < 0) {
		trace_follow_free(o.follow);
		trace_opts_free(&o);
		return 1;
	}

	char line[64];
	int rc = 1;
	struct session s = { .fd = -1, .timeout_ms = timeout_ms };
	pid_t root = trace_follow_read_line(sock, line, sizeof(line));
	if (root <= 0)
		root = pid;
	if (strcmp(line, "ready") != 0) {
		trace_follow_free(o.follow);
		o.follow = NULL;
		close(sock);
		int st = wait_status(pid);
		if (st != 127) /* 127: it could not even start, and said so */
			fprintf(stderr, "xprobes trace: %s did not offer to be traced: is it built "
					"with the flags of pkg-config xprobes-trace\n  and linked with "
					"-lxprobes (and not run with XPROBES_AGENT=off)?\n  (A program "
					"built with -fpatchable-function-entry=5 alone, by clang, can be "
					"traced once running: xprobes --inject PID trace start.)\n",
				argv[first]);
		return st ? st : 1;
	}
	if (record)
		return run_recorded(&o, argv[first], pid, root, sock, &s);
	if (session_open(&s, root, 0) == 0) {
		rc = trace_start(&s, &o, stderr); /* stdout is the program's */
		session_close(&s);
	}
	if (rc != 0) { /* the program runs on untraced: end of file releases both holds */
		close(sock);
		wait_status(pid);
		trace_opts_free(&o);
		return 1;
	}
	say_go(sock);

	/* A new connection at the end: the agent may drop idle clients. */
	char *text = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&text, &len);
	read_line(sock, line, sizeof(line));
	if (strcmp(line, "exit") != 0) {
		fprintf(stderr, "xprobes trace: %s ended without exit() (killed, or _exit): its trace "
				"went with it\n", argv[first]);
	} else if (mem && session_open(&s, root, 0) == 0) {
		char *reply = NULL;
		if (session_call(&s, "trace stop", &reply) >= 0) {
			struct tf_filter f = { .min_ns = o.min_ns };
			rc = trace_print(&s, mem, o.view, &f, o.args);
		}
		free(reply);
		session_close(&s);
	}
	say_go(sock);
	close(sock);
	int st = wait_status(pid);
	if (mem && fclose(mem) == 0 && rc == 0 && text &&
	    (fwrite(text, 1, len, out) != len || fflush(out) != 0) && errno != EPIPE) {
		/* A reader gone (| head) is an end, not a failure: quiet. */
		fprintf(stderr, "xprobes trace: writing the trace: %s\n", strerror(errno));
		rc = 1;
	}
	free(text);
	if (out != stdout && fclose(out) != 0)
		rc = 1;
	trace_opts_free(&o);
	return st ? st : rc;
}
