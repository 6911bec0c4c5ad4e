/* SPDX-License-Identifier: MIT */
/* What the files of tools/common/ share with each other only: no tool
 * includes this (the tools' header is common.h).  How a session finds and
 * checks its agent's socket, and /proc/PID/status. */
#ifndef XP_COMMON_INTERNAL_H
#define XP_COMMON_INTERNAL_H

#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "common.h"

/* ---- proc_status.c ---- */

/* What /proc/PID/status says about a process (or thread), for the tool's
 * checks before attaching or injecting. */

struct proc_status {
	char state;      /* R, S, D, T (stopped), t (traced), Z... */
	pid_t tgid;      /* the process of a thread id */
	pid_t nspid;     /* the pid in its own namespace: its socket's name */
	uid_t uid[4];    /* real, effective, saved, filesystem */
	gid_t gid[4];    /* the same for groups */
	int threads;
	pid_t tracer;    /* TracerPid: a debugger or strace, or 0 */
	int seccomp;     /* 0 none, 1 strict, 2 filter (-1: not shown) */
	int seccomp_filters; /* how many filters are installed */
};

/* 0, or -1 if there is no such process (or thread). */
int proc_status_read(pid_t pid, struct proc_status *ps);

/* "by a signal" (T) or "by a debugger" (t) for a stopped state, else NULL. */
const char *proc_stopped_by(char state);

/* ---- sockfind.c ---- */

/* Where a process's agent listens, as the kernel knows it. */

/* The name that pid's listening agent socket is bound to: a path as the
 * target sees it (its own mount namespace), or "@NAME" for an abstract
 * name (lib/control/sockdir.c): the one listening UNIX socket among its
 * descriptors named NSPID.sock (or NSPID.TOKEN.sock) in a directory whose
 * name starts with ".xprobes-".  *dir_uid: the UID in that directory's
 * name.  Returns 0; -1 if pid's descriptors cannot be read (no ptrace
 * rights: guess); -2 if none of them is such a socket. */
int sockfind_listening(pid_t pid, pid_t nspid, char *out, size_t outsz, uid_t *dir_uid);

/* Without ptrace rights: an abstract name in pid's network namespace that
 * looks like its agent's ("@.xprobes-UID/NSPID.TOKEN.sock").  Anyone may
 * bind such a name, so it is only a lead (the listener's pid is checked
 * after connecting).  0; -1 if pid's socket table cannot be read; -2 if
 * there is none. */
int sockfind_abstract_by_name(pid_t pid, pid_t nspid, char *out, size_t outsz, uid_t *dir_uid);

/* ---- socktrust.c ---- */

/* Whether a socket the tool found really is its target's agent.  The
 * directories live in /tmp, where anyone may create a name first, so
 * neither a path nor whatever answers on it is taken on trust. */

/* The uids a socket directory may belong to: the target's four, root. */
struct sock_owners {
	uid_t uid[5];
};

/* Open the socket file at path with O_PATH, so that what is checked is
 * what gets connected to (through /proc/self/fd/N).  Refused: a symlink,
 * anything but a socket, a directory that is a symlink, belongs to none of
 * owners, or is writable by group or others.  Returns the descriptor, or
 * -1 with errno ENOENT (nothing there), EACCES (the directory cannot be
 * searched) or EPERM (refused: why holds the reason, one sentence). */
int socktrust_open(const char *path, const struct sock_owners *owners, char *why,
		   size_t whysz);

/* A socket made in pid's network namespace, where its abstract names and
 * its UNIX socket table live (setns there and back: root's way into a
 * container); in ours when pid shares it.  -1 with errno. */
int socktrust_socket_in_netns(pid_t pid, int domain, int type, int protocol);

/* Connect to the abstract name (without its leading NUL) in pid's network
 * namespace: no file, so nothing to check before connecting, and the
 * peer check below is what counts.  The descriptor, or -1 with errno. */
int socktrust_connect_abstract(pid_t pid, const char *name);

/* After connecting fd: is the peer process pid (a tgid, as this tool's pid
 * namespace numbers it, which is how SO_PEERCRED reports it)?  0 if so;
 * else -1 with the reason in why. */
int socktrust_peer_is(int fd, pid_t pid, char *why, size_t whysz);

/* 1 if dir exists but is not private to uid (not a directory, a symlink,
 * someone else's, or open to group or others), with its lstat in *st:
 * what an agent refuses as its socket directory. */
int socktrust_squatted(const char *dir, uid_t uid, struct stat *st);

#endif
