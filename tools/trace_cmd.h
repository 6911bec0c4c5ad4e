/* The tool's `trace` commands (issue 11): start (with -F/-N resolved to
 * patch sites here, by name), cat and stat (the buffers read and printed
 * here); the others go to the agent as typed. */
#ifndef XP_TRACE_CMD_H
#define XP_TRACE_CMD_H

#include <stdint.h>
#include <stdio.h>

#include "session.h"
#include "trace_format.h"

/* A line of the shell or a one-shot command: -2 when it is not one of the
 * tool's own trace commands (then the shell sends it to the agent as it
 * is), else what shell_run_line returns (0 ok, 1 failed, -1 lost). */
int trace_command(struct session *s, const char *line);

enum trace_view { TRACE_GRAPH, TRACE_CHROME, TRACE_FOLDED };

/* Options of `trace start` and `xprobes trace`. */
struct trace_opts {
	char **include, **exclude; /* -F, -N globs */
	size_t ninclude, nexclude;
	char agent_args[512];      /* -D, -T, -b as the agent takes them */
	uint64_t min_ns;           /* -t */
	int have_min;
	/* `xprobes trace` only: how to print. */
	const char *out;
	enum trace_view view;
};

/* Parse words[0..n) (words[0] names the command, for messages); "+" stops
 * at the first operand, the program of `xprobes trace`.  Returns the index
 * of the first operand, or -1 after a message. */
int trace_parse_start(int n, char **words, int run_form, struct trace_opts *o);
void trace_opts_free(struct trace_opts *o);

/* Select the sites -F/-N name (all when none is given) and start.  Prints
 * the agent's answer (to say when it succeeded, else to stderr); 0, 1 or
 * -1 as trace_command. */
int trace_start(struct session *s, const struct trace_opts *o, FILE *say);

/* Read everything recorded and print it in view v to out. */
int trace_print(struct session *s, FILE *out, enum trace_view v, const struct tf_filter *f);

#endif
