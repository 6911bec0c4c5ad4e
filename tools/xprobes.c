/* xprobes: attach to a running process's agent and talk to it.
 *
 *   xprobes PID                    interactive shell
 *   xprobes PID CMD [ARGS...]      one command
 *   xprobes PID -c CMD -c CMD      several commands
 *   ... | xprobes PID              commands from a pipe
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../lib/agent.h"
#include "list.h"
#include "session.h"
#include "shell.h"

static void usage(FILE *to)
{
	fputs("usage: xprobes PID                 interactive shell\n"
	      "       xprobes list [-v] FILE... | -p PID   list sites without attaching\n"
	      "       xprobes PID CMD [ARGS...]   run one command\n"
	      "       xprobes PID -c CMD [-c CMD...]\n"
	      "       xprobes PID < commands      run commands from a pipe\n"
	      "       xprobes --version | --help\n"
	      "Commands: help, objects, sites, load, modules, probes, enable,\n"
	      "disable, unload, command, version, quit.  See xprobes(1).\n",
	      to);
}

static int parse_pid(const char *s, pid_t *pid)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || end == s || v <= 0 || v > 0x7fffffff)
		return -1;
	*pid = (pid_t)v;
	return 0;
}

/* Run lines one by one; the status is 1 if any failed. */
static int run_lines(struct session *s, char **lines, int n)
{
	int status = 0;
	for (int i = 0; i < n; i++) {
		int rc = shell_run_line(s, lines[i]);
		if (rc == 2)
			break;
		if (rc < 0)
			return 1;
		if (rc == 1)
			status = 1;
	}
	return status;
}

static int run_stream(struct session *s, FILE *in)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int status = 0;

	while ((n = getline(&line, &cap, in)) >= 0) {
		if (n && line[n - 1] == '\n')
			line[n - 1] = '\0';
		int rc = shell_run_line(s, line);
		if (rc == 2)
			break;
		if (rc < 0) {
			status = 1;
			break;
		}
		if (rc == 1)
			status = 1;
	}
	free(line);
	return status;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("xprobes %s\n", XP_VERSION);
		return 0;
	}
	if (!strcmp(argv[1], "list"))
		return list_main(argc - 1, argv + 1);
	pid_t pid;
	if (parse_pid(argv[1], &pid)) {
		fprintf(stderr, "xprobes: not a process id: '%s'\n", argv[1]);
		usage(stderr);
		return 2;
	}

	/* -c CMD ... or one command made of the remaining words. */
	char **lines = calloc((size_t)argc, sizeof(*lines));
	int nlines = 0;
	if (!lines)
		return 1;
	if (argc > 2 && !strcmp(argv[2], "-c")) {
		for (int i = 2; i < argc; i++) {
			if (strcmp(argv[i], "-c") || i + 1 == argc) {
				fprintf(stderr, "xprobes: expected -c CMD, got '%s'\n", argv[i]);
				return 2;
			}
			lines[nlines++] = argv[++i];
		}
	} else if (argc > 2) {
		size_t len = 1;
		for (int i = 2; i < argc; i++)
			len += strlen(argv[i]) + 1;
		char *one = calloc(len, 1);
		if (!one)
			return 1;
		for (int i = 2; i < argc; i++) {
			if (i > 2)
				strcat(one, " ");
			strcat(one, argv[i]);
		}
		lines[nlines++] = one;
	}

	int interactive = nlines == 0 && isatty(STDIN_FILENO);
	if (interactive) {
		printf("Connecting... ");
		fflush(stdout);
	}
	struct session s;
	if (session_open(&s, pid) != 0) {
		if (interactive)
			printf("failed\n");
		return 1;
	}
	if (interactive)
		printf("done\n");

	int status;
	if (nlines)
		status = run_lines(&s, lines, nlines);
	else if (interactive)
		status = shell_interactive(&s);
	else
		status = run_stream(&s, stdin);
	session_close(&s);
	return status;
}
