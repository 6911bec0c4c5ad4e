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
#ifndef XP_PEER_H
#define XP_PEER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

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

#endif
