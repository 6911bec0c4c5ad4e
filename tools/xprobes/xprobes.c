/* SPDX-License-Identifier: MIT */
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

#include <xprobes/version.h>

#include "xprobes.h"

static void usage(FILE *to)
{
	fputs("usage: xprobes [--inject [--force] [--ignore-seccomp]] [--agent PATH] [--timeout SECS]\n"
	      "               PID [CMD...]\n"
	      "       xprobes PID                 interactive shell\n"
	      "       xprobes list [-v] FILE... | -p PID   list sites without attaching\n"
	      "       xprobes trace [trace start options] [-o DIR | --format VIEW [-o FILE]] -- PROG [ARGS...]\n"
	      "       xprobes trace cat|stat -d DIR [options]\n"
	      "       xprobes PID CMD [ARGS...]   run one command\n"
	      "       xprobes PID -c CMD [-c CMD...]\n"
	      "       xprobes PID < commands      run commands from a pipe\n"
	      "       xprobes --version | --help\n"
	      "Options: --inject loads an agent into a process that has none\n"
	      "(ptrace bootstrap), if it has probe sites (--force: even if not);\n"
	      "--ignore-seccomp injects even into a process\n"
	      "under seccomp; --agent PATH names the libxprobes.so to load;\n"
	      "--timeout SECS bounds the wait for each reply (default 30, 0: none).\n"
	      "Commands: help, objects, sites, load, modules, probes, enable,\n"
	      "disable, unload, command, trace, version, quit.  See xprobes(1).\n",
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
	for (int i = 0; i < n && shell_account(shell_run_line(s, lines[i]), &status); i++)
		;
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
		fflush(stdout); /* a program driving the session sees each reply at once */
		if (!shell_account(rc, &status))
			break;
	}
	free(line);
	return status;
}

/* Whether the commands look at sites (or may: a shell, a stream), so an
 * agent injected into a process without any would only say "no sites". */
static int wants_sites(char **lines, int n)
{
	static const char *const uses[] = { "sites", "objects", "load", "probes", NULL };
	if (n == 0)
		return 1;
	for (int i = 0; i < n; i++) {
		const char *p = lines[i] + strspn(lines[i], " \t");
		size_t len = strcspn(p, " \t");
		for (const char *const *u = uses; *u; u++)
			if (strlen(*u) == len && !strncmp(p, *u, len))
				return 1;
	}
	return 0;
}

/* Before injecting into a process, whether it has anything to attach to:
 * its objects' notes, read from the files as `xprobes list -p` does.  1
 * if it has none (after saying so unless interactive), else 0. */
static int no_sites(pid_t pid, int interactive)
{
	long n = list_process_probes(pid);
	if (n != 0)
		return 0; /* some, or unreadable: inject_agent says what is wrong */
	if (!interactive)
		fprintf(stderr, "xprobes: process %d has no probe sites (no xprobes or stapsdt "
				"notes in the objects it maps): not injecting an agent that would "
				"find nothing; --force injects anyway (for trace, or a library it "
				"will load)\n", (int)pid);
	return 1;
}

/* Connect, injecting an agent first when asked (or when the user agrees). */
static int connect_or_inject(struct session *s, pid_t pid, int inject, const char *agent,
			     unsigned inject_flags, int interactive, int check_sites)
{
	int rc = session_open(s, pid, 1);
	if (rc != -2)
		return rc;
	int bare = (inject || interactive) && check_sites && no_sites(pid, interactive);
	if (bare && !interactive)
		return -1;
	if (!inject && interactive) {
		printf("no agent.\nProcess %d has no XProbes agent%s. Inject one now? [y/N] ",
		       (int)pid, bare ? " and no probe sites" : "");
		fflush(stdout);
		char answer[16] = "";
		if (fgets(answer, sizeof(answer), stdin) && (answer[0] == 'y' || answer[0] == 'Y'))
			inject = 1;
	}
	if (!inject) /* prints the explanation (or finds the agent after all) */
		return session_open(s, pid, 0) == 0 ? 0 : -1;
	char *path = agent ? realpath(agent, NULL) : inject_default_agent();
	if (!path) {
		fprintf(stderr, "xprobes: cannot find the agent library%s%s; use --agent PATH\n",
			agent ? " " : "", agent ? agent : " (libxprobes.so.0) next to xprobes");
		return -1;
	}
	rc = inject_agent(pid, path, inject_flags);
	free(path);
	if (rc != 0)
		return -1;
	rc = session_open(s, pid, 1);
	if (rc == -2)
		fprintf(stderr, "xprobes: the agent was loaded into process %d but did not start: "
				"XPROBES_AGENT=off in its environment, or a setuid process?\n", (int)pid);
	return rc == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
	int inject = 0, force = 0;
	unsigned inject_flags = 0;
	const char *agent = NULL;
	int argi = 1;
	struct session s = { .fd = -1, .timeout_ms = SESSION_DEFAULT_TIMEOUT_MS };
	cli_std_streams("xprobes");

	for (; argi < argc && argv[argi][0] == '-'; argi++) {
		const char *a = argv[argi];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--version")) {
			printf("xprobes %s\n", XPROBES_VERSION);
			return 0;
		} else if (!strcmp(a, "--inject")) {
			inject = 1;
		} else if (!strcmp(a, "--force")) {
			force = 1;
		} else if (!strcmp(a, "--ignore-seccomp")) {
			inject_flags |= INJECT_IGNORE_SECCOMP;
			trace_ignore_seccomp = 1;
		} else if (!strcmp(a, "--agent") && argi + 1 < argc) {
			agent = argv[++argi];
		} else if (!strncmp(a, "--agent=", 8)) {
			agent = a + 8;
		} else if (!strcmp(a, "--timeout") || !strncmp(a, "--timeout=", 10)) {
			const char *v = a[9] == '=' ? a + 10 : argi + 1 < argc ? argv[++argi] : "";
			char *end;
			long secs = strtol(v, &end, 10);
			if (!*v || *end || secs < 0 || secs > 86400) {
				fprintf(stderr, "xprobes: --timeout wants seconds (0 to 86400), got '%s'\n", v);
				return 2;
			}
			s.timeout_ms = secs ? (int)secs * 1000 : -1;
		} else {
			fprintf(stderr, "xprobes: unknown option '%s'\n", a);
			usage(stderr);
			return 2;
		}
	}
	if (argi == argc) {
		fprintf(stderr, "xprobes: no process id or subcommand given\n");
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[argi], "list"))
		return list_main(argc - argi, argv + argi);
	if (!strcmp(argv[argi], "trace"))
		return trace_run_main(argc - argi, argv + argi, s.timeout_ms);
	pid_t pid;
	if (parse_pid(argv[argi], &pid)) {
		fprintf(stderr, "xprobes: not a process id: '%s'\n", argv[argi]);
		usage(stderr);
		return 2;
	}
	argi++;

	/* -c CMD ... or one command made of the remaining words. */
	char **lines = calloc((size_t)argc, sizeof(*lines));
	char *one = NULL; /* the remaining words as one line */
	int nlines = 0;
	if (!lines)
		return 1;
	if (argi < argc && !strcmp(argv[argi], "-c")) {
		for (int i = argi; i < argc; i++) {
			if (strcmp(argv[i], "-c") || i + 1 == argc) {
				fprintf(stderr, "xprobes: expected -c CMD, got '%s'\n", argv[i]);
				free(lines);
				return 2;
			}
			lines[nlines++] = argv[++i];
		}
	} else if (argi < argc) {
		size_t len = 1;
		for (int i = argi; i < argc; i++) {
			/* The agent splits a line on spaces: an empty word would
			 * vanish, and the command mean something else. */
			if (argv[i][strspn(argv[i], " \t\n\v\f\r")] == '\0') {
				fprintf(stderr, "xprobes: argument %d is %s; commands are words "
						"separated by spaces, so it would be lost\n",
					i - argi + 1, argv[i][0] ? "only spaces" : "empty");
				free(lines);
				return 2;
			}
			len += strlen(argv[i]) + 1;
		}
		one = calloc(len, 1);
		if (!one) {
			free(lines);
			return 1;
		}
		for (int i = argi; i < argc; i++) {
			if (i > argi)
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
	if (connect_or_inject(&s, pid, inject, agent, inject_flags, interactive,
			      !force && wants_sites(lines, nlines)) != 0) {
		if (interactive)
			printf("failed\n");
		free(one);
		free(lines);
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
	free(one);
	free(lines);
	return status;
}
