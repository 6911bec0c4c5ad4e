/* The agent's socket: which directory, made safely, or an abstract name;
 * what it is bound to, and whether its file is still there. */
#ifndef XP_SOCKDIR_H
#define XP_SOCKDIR_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>

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
