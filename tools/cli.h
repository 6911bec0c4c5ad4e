/* What the memcached tools (mctop, mcsnoop, mclat) share on the command
 * line: stopping on signals, and the -p argument. */
#ifndef XP_CLI_H
#define XP_CLI_H

#include <signal.h>
#include <sys/types.h>

/* The signal that asked the tool to stop, 0 until one did. */
extern volatile sig_atomic_t cli_stop;

/* Stop on each of the signals listed (0 ends the list): they set cli_stop
 * and cut a sleep or a poll() short (the kernel never restarts those), so
 * the tool's loop sees it and lets its module go before exiting.  With
 * SA_RESTART: a write to stdout blocked on a full pipe when the signal
 * came finishes, where without it stdio took the EINTR for a failed
 * write and the tool ended with "writing the output failed" (mclat under
 * SIGINT, seen in CI). */
void cli_stop_on(int sig, ...);

/* A process id (1 to INT_MAX, decimal, nothing after it): 0, or -1. */
int cli_parse_pid(const char *s, pid_t *pid);

/* After getopt's '?': a negative number among the arguments ("-1",
 * "-0.5") reads as options.  The argument, if that is what happened (so a
 * tool can say "must be positive" instead of "unknown option '-1'"), else
 * NULL. */
const char *cli_negative_number(int argc, char **argv, int optind);

/* At the start of main: descriptors 0, 1 and 2 that are closed are
 * opened on /dev/null, so the agent's socket never gets one of their
 * numbers (and the tool's output or input with it); and at exit, output
 * that could not be written (a full disk, a closed pipe) is reported
 * under prog's name and the exit status becomes 1. */
void cli_std_streams(const char *prog);

#endif
