/* SPDX-License-Identifier: MIT */
/* The control endpoint: the socket the tool talks to (sockdir.c), who may
 * attach (peer.c), the control thread's loop (control.c), the commands it
 * runs (commands.c), and the rescan after which sites of new objects get
 * their probes and functions their tracing (rescan.c).
 */
#ifndef XP_CONTROL_H
#define XP_CONTROL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#include "../probes/probes.h"
#include "../trace/trace.h"


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

/* ---- peer.c ---- */

/* Who may attach: the agent's answer to "could this client ptrace me?".
 *
 * Loading a module into a process is at least as strong as ptrace, so a
 * client may attach exactly when the kernel's ptrace_may_access() would
 * let it PTRACE_ATTACH (PTRACE_MODE_ATTACH_REALCREDS: kernel/ptrace.c
 * __ptrace_may_access, then security/commoncap.c cap_ptrace_access_check):
 *
 *  - a client with CAP_SYS_PTRACE in its effective set may attach;
 *  - otherwise its real uid must equal our real, effective and saved uid,
 *    and its real gid our real, effective and saved gid;
 *  - and we must be dumpable (PR_GET_DUMPABLE == 1): a process that
 *    changed credentials (setuid() from root, then perhaps fork(), as
 *    `memcached -u nobody -d` does) keeps secrets of its former self;
 *  - and our permitted capabilities must be a subset of the client's.
 *
 * Decisions this file makes on purpose:
 *  - User namespaces: capabilities mean something only in their own
 *    namespace, and the kernel's subset rule applies only within one.  A
 *    client in another user namespace is refused outright, even one in an
 *    ancestor namespace that the kernel would let ptrace us: we cannot see
 *    enough from here to be sure.  When we may not read the client's
 *    /proc/PID/ns/user (it is more privileged than us), its namespace counts
 *    as ours only if its uid_map and gid_map read exactly as our own do.
 *  - Yama is not applied.  ptrace_scope 1 allows only a tracer that is an
 *    ancestor of its target, and xprobes is never the parent of a process
 *    it attaches to, so applying it would refuse everyone but root; scopes
 *    2 and 3 restrict the ptrace() system call, which this is not.  Other
 *    LSMs (SELinux, AppArmor) are not consulted either.
 *  - The client is the process that connected (SO_PEERCRED, pinned by
 *    SO_PEERPIDFD, or pidfd_open() where that is missing), judged by its
 *    current credentials in /proc/PID/status.  It must still be alive
 *    when they have been read (its pid cannot have been reused meanwhile),
 *    its effective ids must still be those it connected with, and it must
 *    be dumpable: a client that connected, passed the socket on and then
 *    exec'd a set-id or file-capability program (which makes it
 *    non-dumpable) does not lend that program's privileges to the socket.
 *  - Anything we cannot read counts as a refusal.
 *
 * A client in a pid namespace that is not ours nor below ours (SO_PEERCRED
 * pid 0: an ancestor's, the host seen from a container, or a sibling's)
 * has no /proc entry here.  Its user namespace is read from its pidfd
 * (SO_PEERPIDFD, then PIDFD_GET_USER_NAMESPACE: Linux 6.11) and must be
 * ours, as above; then it is judged on SO_PEERCRED alone: root may attach;
 * anyone else under the id and dumpable rules, and only to a process that
 * holds no capabilities.  Where the kernel cannot name the client's user
 * namespace, only uid 0 is let in, and only when ours is the initial
 * namespace: there uid 0 is the real root, owner of root's files, which a
 * namespace of its own would not confine anyway.  Everyone else is refused
 * (a same-uid client in a sibling user namespace, which ptrace refuses,
 * cannot be told from one in ours).
 */

/* 0 if the client at the other end of the connected UNIX socket fd may
 * attach to this process.  Otherwise a negative errno (-EPERM: refused by
 * the rules above; others: the client could not be checked) and one line
 * (no newline) in why naming the reason, e.g. "uid 65534 may not attach
 * to process 123: it changed credentials and is not dumpable (ptrace
 * would refuse); use root".  Does not block; allocates nothing. */
int xp_peer_may_attach(int fd, char *why, size_t whysz);

/* Credentials as the rules above compare them. */
struct xp_creds {
	uid_t uid[3]; /* real, effective, saved */
	gid_t gid[3];
	uint64_t cap_prm, cap_eff;
};

/* This process's credentials, as the rules compare them: 0 or -errno. */
int xp_peer_self(struct xp_creds *c);

/* The rules alone: may peer attach to target (process target_pid, whose
 * dumpable flag is target_dumpable), both in the same user namespace?
 * Returns 0 or -EPERM with the reason in why. */
int xp_peer_judge(const struct xp_creds *peer, const struct xp_creds *target,
		  int target_dumpable, pid_t target_pid, char *why, size_t whysz);

/* ---- sockdir.c ---- */

/* The agent's socket: which directory, made safely, or an abstract name;
 * what it is bound to, and whether its file is still there. */

#include "../base/base.h"

/* The path the agent must bind for getpid(), in a directory only our
 * euid can enter: RUNDIR/.xprobes-EUID (RUNDIR: $XPROBES_RUNDIR, else
 * /tmp), or, if someone else holds that name, a fresh one made by
 * mkdtemp(): RUNDIR/.xprobes-EUID.XXXXXX (the tool finds it through the
 * kernel).  Removes stale sockets from it (those nobody listens on).  The
 * name is PID.sock, or PID.TOKEN.sock while a live agent of another pid
 * namespace holds that.  Returns 0 or a negative errno. */
int xp_sockdir_prepare(char *sock_path, size_t sz);

/* 1 if our socket may be a file in our euid's directory: that uid could
 * attach to us (with our gid, without capabilities), so whoever may
 * remove the file may attach anyway.  0 after a change of credentials
 * (not dumpable, mixed ids) or with capabilities, unless euid is root. */
int xp_sockdir_file_is_safe(void);

/* Where the socket goes when a file would not be safe: a name for the
 * abstract namespace (no leading NUL here), ".xprobes-EUID/PID.TOKEN.sock",
 * TOKEN random so that nobody can bind it first.  0 or -ENAMETOOLONG. */
int xp_sockdir_abstract(char *name, size_t sz);

/* At exit or on giving up: remove the socket at sock_path, and its
 * directory too if it was a private fallback one. */
void xp_sockdir_cleanup(const char *sock_path);

/* The listener was bound at sa (a path, or an abstract name): remember
 * it, and the file's identity, for what follows.  Only the control
 * thread calls these, and the `socket` command, which it runs. */
void xp_sockdir_bound(const struct sockaddr_un *sa);
/* 1 while there is a file to watch: bound by us, and we could look at it. */
int xp_sockdir_watched(void);
/* Does the path still name the file we bound?  Gone (ENOENT, ENOTDIR) or
 * another file: 0.  What we cannot look at (a directory we may no longer
 * search after dropping privileges: only root could have touched it), or
 * nothing to watch: 1. */
int xp_sockdir_intact(void);
/* The listener is being made again: its file went (file_gone: no longer
 * watched until bound again), or the program took its descriptor. */
void xp_sockdir_remade(int file_gone);
/* The `socket` command's reply: where we listen, how often made again. */
void xp_sockdir_describe(struct textbuf *out);
/* In a fork()ed child: nothing bound, nothing made again yet. */
void xp_sockdir_forget(void);
/* At exit or on giving up: remove the file we bound, if this process
 * bound it and the path still names it (another agent may have taken the
 * name since). */
void xp_sockdir_unbind(void);

#endif
