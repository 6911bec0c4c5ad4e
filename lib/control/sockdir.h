/* The agent's socket directory: which one, and made safely. */
#ifndef XP_SOCKDIR_H
#define XP_SOCKDIR_H

#include <stddef.h>

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

#endif
