#ifndef XP_TRACE_RUN_H
#define XP_TRACE_RUN_H

/* `xprobes trace [options] -- PROG ARGS...`: argv[0] is "trace".  Returns
 * the program's exit status (128 + signal when killed), or the tool's
 * (1, 2 for usage) when the program succeeded and tracing did not. */
int trace_run_main(int argc, char **argv, int timeout_ms);

#endif
