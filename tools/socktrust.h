/* Whether a socket the tool found really is its target's agent.  The
 * directories live in /tmp, where anyone may create a name first, so
 * neither a path nor whatever answers on it is taken on trust. */
#ifndef XP_SOCKTRUST_H
#define XP_SOCKTRUST_H

#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

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

/* After connecting fd: is the peer process pid (a tgid, as this tool's pid
 * namespace numbers it, which is how SO_PEERCRED reports it)?  0 if so;
 * else -1 with the reason in why. */
int socktrust_peer_is(int fd, pid_t pid, char *why, size_t whysz);

/* 1 if dir exists but is not private to uid (not a directory, a symlink,
 * someone else's, or open to group or others), with its lstat in *st:
 * what an agent refuses as its socket directory. */
int socktrust_squatted(const char *dir, uid_t uid, struct stat *st);

#endif
