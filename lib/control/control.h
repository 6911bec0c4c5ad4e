/* The control endpoint: the socket the tool talks to (sockdir.c), who may
 * attach (peer.c), the control thread's loop (control.c), the commands it
 * runs (commands.c), and the rescan after which sites of new objects get
 * their probes and functions their tracing (rescan.c).
 */
#ifndef XP_CONTROL_H
#define XP_CONTROL_H

#include "../probes/probes.h"
#include "../trace/trace.h"

#include "peer.h"
#include "sockdir.h"

/* rescan.c: rescan = refresh + attach what is new; reports into log. */
void xp_rescan(struct textbuf *log);

/* commands.c */
/* A command's status: XP_OK or XP_ERR (base.h), or XP_WAIT: it finishes
 * later (a grace period, a module command's thread). */
#define XP_WAIT 2
struct xp_wait;
/* Run one command line under xp_agent.lock; the reply goes to out, or *w is
 * set and XP_WAIT returned. */
int xp_command_start(const char *line, struct textbuf *out, struct xp_wait **w);
/* XP_WAIT while it still waits; else its status, the reply in out, w freed. */
int xp_command_poll(struct xp_wait *w, struct textbuf *out);
/* CLOCK_MONOTONIC ms after which the client is told what is awaited. */
long long xp_command_deadline(const struct xp_wait *w);
/* Stop waiting (deadline, or the client left): the operation goes on in
 * the background; out (if any) says what it waits for.  Frees w. */
int xp_command_abandon(struct xp_wait *w, struct textbuf *out);
/* Control session id ended: start unloading the modules it loaded with
 * `load --session` (finished in the background, as an abandoned unload).
 * A module whose unload could not start (out of memory) is owned by
 * XP_SESSION_ENDED, which the control thread ends again on every pass
 * until it goes: never left attached with nobody to read it. */
#define XP_SESSION_ENDED (~0ul)
void xp_session_end(unsigned long id);
/* Start queued module commands, free finished abandoned ones; 1 while any
 * exists. */
int xp_jobs_progress(void);
/* In a fork()ed child: the parent's command threads are gone. */
void xp_jobs_after_fork_child(void);
/* start + poll until done: for callers without a control loop. */
int xp_run_command(const char *line, struct textbuf *out);

/* control.c */
int xp_control_start(void);
/* Called on an application thread after its dlopen() succeeded: rescan
 * now if that cannot block, else leave it to the agent lock's holder. */
void xp_control_after_dlopen(void);
/* Unlock xp_agent.lock, then do any rescan a dlopen() left for its holder. */
void xp_control_unlock(void);

/* In a fork()ed child: drop the parent's sockets; restart: serve again
 * under the child's pid.  0, or -1 when the child got no agent (nothing
 * of it left behind). */
int xp_control_after_fork_child(int restart);
void xp_control_cleanup(void);

#endif
