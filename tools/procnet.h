/* What /proc says about a process's TCP sockets. */
#ifndef XP_PROCNET_H
#define XP_PROCNET_H

#include <sys/types.h>

/* The lowest TCP port pid listens on, IPv4 or IPv6 (a socket in state
 * LISTEN that is one of pid's own descriptors, not merely one of its
 * network namespace's); 0 if none. */
unsigned procnet_listen_port(pid_t pid);

#endif
