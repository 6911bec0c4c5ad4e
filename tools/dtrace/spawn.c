/* SPDX-License-Identifier: MIT */
/* Running the C preprocessor and compiler. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dtrace.h"

void argv_push(char ***argv, size_t *n, const char *word)
{
	*argv = xrealloc(*argv, (*n + 2) * sizeof(**argv));
	(*argv)[(*n)++] = word ? xstrdup(word) : NULL;
	(*argv)[*n] = NULL;
}

/* Words separated by blanks; like the stub, no shell quoting beyond
 * single and double quotes around a word. */
void argv_push_split(char ***argv, size_t *n, const char *words)
{
	const char *s = words;
	while (*s) {
		while (*s == ' ' || *s == '\t' || *s == '\n')
			s++;
		if (!*s)
			break;
		struct strbuf w = { 0 };
		char quote = 0;
		for (; *s && (quote || (*s != ' ' && *s != '\t' && *s != '\n')); s++) {
			if (!quote && (*s == '"' || *s == '\''))
				quote = *s;
			else if (quote && *s == quote)
				quote = 0;
			else
				sb_putn(&w, s, 1);
		}
		argv_push(argv, n, w.s ? w.s : "");
		sb_free(&w);
	}
}

void argv_free(char **argv, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(argv[i]);
	free(argv);
}

int run_child(char *const argv[], const char *in, size_t inlen,
	      struct strbuf *out)
{
	int inpipe[2] = { -1, -1 }, outpipe[2] = { -1, -1 };

	if ((in && pipe2(inpipe, O_CLOEXEC)) || (out && pipe2(outpipe, O_CLOEXEC))) {
		fprintf(stderr, "%s: pipe: %s\n", xpd_prog, strerror(errno));
		return -1;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "%s: fork: %s\n", xpd_prog, strerror(errno));
		return -1;
	}
	if (pid == 0) {
		if (in)
			dup2(inpipe[0], STDIN_FILENO);
		if (out)
			dup2(outpipe[1], STDOUT_FILENO);
		execvp(argv[0], argv);
		fprintf(stderr, "%s: cannot run %s: %s\n", xpd_prog, argv[0],
			strerror(errno));
		_exit(127);
	}
	if (in) {
		close(inpipe[0]);
		size_t done = 0;
		while (done < inlen) {
			ssize_t w = write(inpipe[1], in + done, inlen - done);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				break; /* the child stopped reading; its status says why */
			done += (size_t)w;
		}
		close(inpipe[1]);
	}
	if (out) {
		close(outpipe[1]);
		char buf[65536];
		for (;;) {
			ssize_t r = read(outpipe[0], buf, sizeof(buf));
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				break;
			sb_putn(out, buf, (size_t)r);
		}
		close(outpipe[0]);
	}
	int status;
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			fprintf(stderr, "%s: waitpid: %s\n", xpd_prog, strerror(errno));
			return -1;
		}
	}
	if (WIFSIGNALED(status)) {
		fprintf(stderr, "%s: %s died from signal %d\n", xpd_prog, argv[0],
			WTERMSIG(status));
		return -1;
	}
	return WEXITSTATUS(status);
}
