/* Where a process's agent listens, as the kernel knows it. */
#ifndef XP_SOCKFIND_H
#define XP_SOCKFIND_H

#include <stddef.h>
#include <sys/types.h>

/* The path that pid's listening agent socket is bound to, as the target
 * sees it (its own mount namespace): the one listening UNIX socket among
 * its descriptors named NSPID.sock in a directory whose name starts with
 * ".xprobes-".  *dir_uid: the UID in that directory's name.  Returns 0;
 * -1 if pid's descriptors cannot be read (no ptrace rights: guess); -2 if
 * none of them is such a socket. */
int sockfind_listening(pid_t pid, pid_t nspid, char *out, size_t outsz, uid_t *dir_uid);

#endif
