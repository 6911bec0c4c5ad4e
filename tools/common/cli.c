/* SPDX-License-Identifier: MIT */
/* Stopping on signals and reading -p, for mctop, mcsnoop and mclat. */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

volatile sig_atomic_t cli_stop;

static void on_signal(int sig)
{
	cli_stop = sig;
}

void cli_stop_on(int sig, ...)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	va_list ap;
	va_start(ap, sig);
	for (; sig; sig = va_arg(ap, int))
		sigaction(sig, &sa, NULL);
	va_end(ap);
}

int cli_parse_pid(const char *s, pid_t *pid)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v <= 0 || v > 0x7fffffff)
		return -1;
	*pid = (pid_t)v;
	return 0;
}

static const char *stdout_prog = "xprobes";

int cli_reader_gone(void)
{
	/* Asked of the descriptor rather than of errno, which a later call
	 * may have overwritten: a pipe whose reader closed polls as POLLERR,
	 * a socket or terminal that hung up as POLLHUP. */
	struct pollfd p = { .fd = STDOUT_FILENO, .events = 0 };
	return poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP));
}

static void check_stdout(void)
{
	/* An earlier failed flush leaves only the error flag; a pending one
	 * surfaces at close. */
	int earlier = ferror(stdout);
	int gone = cli_reader_gone(); /* asked while the descriptor is open */
	errno = 0;
	int bad = fclose(stdout) != 0 || earlier;
	/* A reader that went away (mcsnoop | head) is an end, not a failure:
	 * quiet, and the status the tool chose (0, as cat's under a shell
	 * that ignores SIGPIPE). */
	if (bad && (errno == EPIPE || cli_stop == SIGPIPE || gone))
		return;
	if (bad) {
		fprintf(stderr, "%s: writing the output failed: %s\n", stdout_prog,
			errno ? strerror(errno) : "a write was refused (a full disk, a closed pipe?)");
		_exit(1);
	}
}

void cli_std_streams(const char *prog)
{
	for (int fd = 0; fd <= 2; fd++)
		if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
			int n = open("/dev/null", fd ? O_WRONLY : O_RDONLY);
			if (n >= 0 && n != fd) /* cannot be: fd was the lowest free */
				close(n);
		}
	stdout_prog = prog;
	atexit(check_stdout);
	/* A closed stdout shows as EPIPE from the write, not as a death by
	 * SIGPIPE, so the tool ends through its normal path: the module it
	 * loaded for this session let go, status 0, nothing said.  (A program
	 * the tool starts gets SIGPIPE back before exec.) */
	signal(SIGPIPE, SIG_IGN);
}

const char *cli_negative_number(int argc, char **argv, int optind)
{
	/* getopt leaves optind on an argument it is still inside, past it
	 * once it is done with it: look at both. */
	for (int i = optind; i >= optind - 1 && i >= 1; i--) {
		if (i >= argc || argv[i][0] != '-' || !argv[i][1])
			continue;
		char *end;
		errno = 0;
		(void)strtod(argv[i], &end);
		if (!*end && end != argv[i])
			return argv[i];
	}
	return NULL;
}
