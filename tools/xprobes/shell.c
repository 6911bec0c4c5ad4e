/* SPDX-License-Identifier: MIT */
/* The xprobes shell: client-side handling of a command line, and the
 * interactive loop (libedit: editing, history, completion). */
#define _GNU_SOURCE
#include "xprobes.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <editline/readline.h>

static struct session *completion_session;

static const char *command_names[] = {
	"help", "version", "socket", "objects", "sites", "load", "modules", "probes",
	"enable", "disable", "unload", "command", "trace", "quit", NULL,
};

/* Commands whose first argument names a module.  `load` takes a path the
 * agent resolves in its own working directory, and the agent knows loaded
 * modules by absolute path (or basename): a path is made absolute here,
 * where the user meant it. */
static const char *module_commands[] = { "load", "unload", "enable", "disable", "command", NULL };

static char *rewrite_module_path(const char *line, int *bad)
{
	const char *p = line;
	*bad = 0;
	while (isspace((unsigned char)*p))
		p++;
	size_t cmdlen = strcspn(p, " \t");
	int is_load = cmdlen == 4 && strncmp(p, "load", 4) == 0;
	int known = 0;
	for (const char **c = module_commands; *c; c++)
		known |= strlen(*c) == cmdlen && strncmp(p, *c, cmdlen) == 0;
	if (!known || !isspace((unsigned char)p[cmdlen]))
		return NULL;
	const char *cmd = p;
	p += cmdlen;
	while (isspace((unsigned char)*p))
		p++;
	/* load --session PATH: the flag stays, the path is made absolute. */
	const char *flag = "";
	if (is_load && strncmp(p, "--session", 9) == 0 &&
	    (!p[9] || isspace((unsigned char)p[9]))) {
		flag = "--session ";
		p += 9;
		while (isspace((unsigned char)*p))
			p++;
	}
	char path[PATH_MAX];
	size_t n = strcspn(p, " \t");
	if (n == 0 || n >= sizeof(path))
		return NULL;
	memcpy(path, p, n);
	path[n] = '\0';
	if (!is_load && !strchr(path, '/'))
		return NULL; /* a basename (or glob): the agent matches it */
	char *abs = realpath(path, NULL);
	if (!abs) {
		if (!is_load)
			return NULL; /* let the agent say "unknown module" */
		fprintf(stderr, "xprobes: load: module not found: %s\n", path);
		*bad = 1;
		return NULL;
	}
	char *out;
	if (asprintf(&out, "%.*s %s%s%s", (int)cmdlen, cmd, flag, abs, p + n) < 0)
		out = NULL;
	free(abs);
	return out;
}

/* An empty answer to a listing says nothing at all: name what is not
 * there, on stderr (stdout stays the listing, empty, for a script). */
static void say_none(const struct session *s, const char *line)
{
	static const struct {
		const char *cmd, *none, *match; /* "no NONE in" / "no MATCH match" */
	} lists[] = {
		{ "sites", "sites", "sites" },
		{ "objects", "objects with sites", "objects with sites" },
		{ "modules", "modules loaded", "loaded modules" },
		{ "probes", "probes in loaded modules", "probes of loaded modules" },
	};
	size_t n = strcspn(line, " \t");
	const char *arg = line + n + strspn(line + n, " \t");
	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
		if (strlen(lists[i].cmd) != n || strncmp(line, lists[i].cmd, n) != 0)
			continue;
		if (*arg)
			fprintf(stderr, "xprobes: no %s match '%s' in process %d\n", lists[i].match,
				arg, (int)s->pid);
		else
			fprintf(stderr, "xprobes: no %s in process %d\n", lists[i].none,
				(int)s->pid);
	}
}

int shell_run_line(struct session *s, const char *line)
{
	const char *p = line;
	while (isspace((unsigned char)*p))
		p++;
	if (!*p || *p == '#')
		return 0;
	if (strncmp(p, "quit", 4) == 0 && (!p[4] || isspace((unsigned char)p[4])))
		return 2;
	if (strncmp(p, "exit", 4) == 0 && (!p[4] || isspace((unsigned char)p[4])))
		return 2;

	int traced = trace_command(s, p); /* trace start, cat, stat: the tool's own */
	if (traced != -2)
		return traced;

	int bad;
	char *rewritten = rewrite_module_path(p, &bad);
	if (bad)
		return 1;
	char *text = NULL;
	int rc = session_call(s, rewritten ? rewritten : p, &text);
	free(rewritten);
	if (text && *text) {
		FILE *to = rc == 0 ? stdout : stderr;
		fputs(sanitize_text(text), to);
		fflush(to);
	} else if (rc == 0) {
		say_none(s, p);
	}
	free(text);
	/* The reader went away (xprobes PID sites | head): the session ends
	 * as at quit, quietly and with the status so far, as cat's would. */
	if (ferror(stdout) && cli_reader_gone())
		return 2;
	return rc;
}

int shell_account(int rc, int *status)
{
	if (rc == 2)
		return 0;
	if (rc != 0)
		*status = 1;
	return rc >= 0;
}

/* ---- completion -------------------------------------------------------- */

static char **candidates;
static size_t ncandidates;

static void set_candidates_from_agent(const char *what)
{
	for (size_t i = 0; i < ncandidates; i++)
		free(candidates[i]);
	free(candidates);
	candidates = NULL;
	ncandidates = 0;

	char req[64], *text = NULL;
	snprintf(req, sizeof(req), "complete %s", what);
	if (session_call(completion_session, req, &text) != 0 || !text) {
		free(text);
		return;
	}
	sanitize_text(text); /* completions are shown too */
	for (char *save, *tok = strtok_r(text, "\n", &save); tok;
	     tok = strtok_r(NULL, "\n", &save)) {
		char **grown = realloc(candidates, (ncandidates + 1) * sizeof(*grown));
		if (!grown)
			break;
		candidates = grown;
		candidates[ncandidates++] = strdup(tok);
	}
	free(text);
}

static char *generate_from(const char **names, size_t n, const char *text, int state)
{
	static size_t i;
	if (!state)
		i = 0;
	size_t len = strlen(text);
	while (i < n) {
		const char *c = names[i++];
		if (c && strncmp(c, text, len) == 0)
			return strdup(c);
	}
	return NULL;
}

static char *command_generator(const char *text, int state)
{
	size_t n = sizeof(command_names) / sizeof(command_names[0]) - 1;
	return generate_from(command_names, n, text, state);
}

static char *candidate_generator(const char *text, int state)
{
	return generate_from((const char **)candidates, ncandidates, text, state);
}

static char *load_flag_generator(const char *text, int state)
{
	static const char *flags[] = { "--session" };
	return generate_from(flags, 1, text, state);
}

/* A file name, as libedit would complete it, except that a directory
 * ends in '/' with the cursor right after it, so the next Tab goes on
 * into it (libedit's readline emulation puts a space after anything). */
static char **complete_path(const char *text)
{
	char **m = rl_completion_matches(text, rl_filename_completion_function);
	/* One match: m[0] alone, or m[0] the common part and m[1] the match. */
	if (!m || (m[1] && (m[2] || strcmp(m[0], m[1]) != 0)))
		return m;
	struct stat st;
	size_t len = strlen(m[0]);
	if (len && m[0][len - 1] != '/' && stat(m[0], &st) == 0 && S_ISDIR(st.st_mode)) {
		for (int i = 0; i < 2 && m[i]; i++) {
			char *with = NULL;
			if (asprintf(&with, "%s/", m[i]) < 0)
				return m;
			free(m[i]);
			m[i] = with;
		}
	}
	if (m[0][strlen(m[0]) - 1] == '/')
		rl_completion_append_character = '\0';
	return m;
}

static char **complete(const char *text, int start, int end)
{
	(void)end;
	char first[32] = "";
	const char *line = rl_line_buffer;
	rl_completion_append_character = ' '; /* complete_path() may take it away */
	while (isspace((unsigned char)*line))
		line++;
	sscanf(line, "%31s", first);

	if (start == (int)(line - rl_line_buffer) || !*first)
		return rl_completion_matches(text, command_generator);
	if (!strcmp(first, "enable") || !strcmp(first, "disable") ||
	    !strcmp(first, "unload") || !strcmp(first, "command") ||
	    !strcmp(first, "modules") || !strcmp(first, "probes")) {
		set_candidates_from_agent("modules");
		return rl_completion_matches(text, candidate_generator);
	}
	if (!strcmp(first, "sites")) {
		set_candidates_from_agent("sites");
		/* OBJGLOB:SITE: complete the site after the first colon. */
		const char *colon = strchr(text, ':');
		for (size_t i = 0; colon && i < ncandidates; i++) {
			char *with;
			if (asprintf(&with, "%.*s%s", (int)(colon - text + 1), text, candidates[i]) < 0)
				break;
			free(candidates[i]);
			candidates[i] = with;
		}
		return rl_completion_matches(text, candidate_generator);
	}
	if (!strcmp(first, "load")) {
		if (text[0] == '-')
			return rl_completion_matches(text, load_flag_generator);
		return complete_path(text);
	}
	return NULL; /* libedit's default: file names */
}

static volatile sig_atomic_t interrupted;

static void on_interrupt(int sig)
{
	(void)sig;
	interrupted = 1;
}

/* What readline() reads a key with: a read() that a Ctrl-C ends, as end
 * of file (libedit's own read would try once more, with the terminal
 * already put back in cooked mode by its signal handler). */
static int read_byte(FILE *in)
{
	/* SIGINT is let in only inside ppoll(), atomically: one that came
	 * before the wait (while libedit drew the prompt) is seen here, not
	 * lost ahead of a read() that would then block. */
	sigset_t intr, old;
	sigemptyset(&intr);
	sigaddset(&intr, SIGINT);
	sigprocmask(SIG_BLOCK, &intr, &old);
	int c = EOF;
	while (!interrupted) {
		struct pollfd p = { .fd = fileno(in), .events = POLLIN };
		if (ppoll(&p, 1, NULL, &old) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		unsigned char b;
		ssize_t n = read(p.fd, &b, 1);
		if (n == 1)
			c = b;
		if (n == 1 || n == 0 || errno != EINTR)
			break;
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	return c;
}

/* libedit takes the key as one character: a UTF-8 sequence is decoded
 * here (a malformed one gives its first byte, as libedit would drop it). */
static int read_key(FILE *in)
{
	int c = read_byte(in);
	int more = c >= 0xf0 && c < 0xf5 ? 3 : c >= 0xe0 ? 2 : c >= 0xc2 ? 1 : 0;
	if (c == EOF || c < 0x80 || !more)
		return c;
	int cp = c & (0x3f >> more);
	while (more--) {
		int b = read_byte(in);
		if (b == EOF)
			return EOF;
		if ((b & 0xc0) != 0x80)
			return c;
		cp = cp << 6 | (b & 0x3f);
	}
	return cp;
}

/* One line from the user.  Ctrl-C while editing throws the line away and
 * asks again, as bash and gdb do, instead of ending the session: SIGINT
 * is caught (without SA_RESTART) only while readline() waits, so the read
 * fails with EINTR and readline() gives up on the line.  Ctrl-D on an
 * empty line is the end (NULL).  While a command runs, SIGINT ends
 * xprobes as before (a stuck agent is not waited for). */
static char *read_line(const char *prompt)
{
	struct sigaction sa, old;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_interrupt;
	sigemptyset(&sa.sa_mask);
	for (;;) {
		interrupted = 0;
		sigaction(SIGINT, &sa, &old);
		char *line = readline(prompt);
		sigaction(SIGINT, &old, NULL);
		if (line || !interrupted)
			return line;
		putchar('\n'); /* the prompt again on a line of its own */
		fflush(stdout);
	}
}

int shell_interactive(struct session *s)
{
	char hist[PATH_MAX] = "";
	const char *home = getenv("HOME");
	int status = 0;

	completion_session = s;
	rl_readline_name = "xprobes";
	rl_attempted_completion_function = complete;
	/* Before anything initialises libedit (read_history() does): it
	 * takes the function only then. */
	rl_getc_function = read_key;
	using_history();
	if (home && snprintf(hist, sizeof(hist), "%s/.xprobes_history", home) < (int)sizeof(hist))
		read_history(hist);

	for (;;) {
		char *line = read_line("xprobes> ");
		if (!line) {
			putchar('\n');
			break;
		}
		if (*line)
			add_history(line);
		int rc = shell_run_line(s, line);
		free(line);
		if (!shell_account(rc, &status))
			break;
	}
	if (*hist)
		write_history(hist);
	return status;
}
