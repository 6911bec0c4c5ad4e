/* The control protocol between the xprobes tool and the in-process agent.
 *
 * Over a UNIX stream socket, each message is a frame: a 4-byte little-endian
 * length, then that many bytes.  A request is one command line (no NUL).  A
 * reply's first byte is a status (XP_OK or XP_ERR), the rest is text.
 * Requests are at most XP_MAX_REQUEST bytes, replies XP_MAX_REPLY.
 */
#ifndef XP_WIRE_H
#define XP_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define XP_MAX_REQUEST (64u * 1024)
#define XP_MAX_REPLY (4u * 1024 * 1024)

enum { XP_OK = 0, XP_ERR = 1 };

/* Socket path of process pid owned by uid: /tmp/.xprobes-UID/PID.sock
 * (XPROBES_RUNDIR overrides /tmp).  Returns 0, or -1 if it does not fit. */
int xp_socket_path(char *out, size_t outsz, uid_t uid, pid_t pid);
int xp_socket_dir(char *out, size_t outsz, uid_t uid);
/* The same under rundir instead ("" or NULL: XPROBES_RUNDIR, else /tmp):
 * the tool looks where the target's agent did. */
int xp_socket_dir_under(char *out, size_t outsz, const char *rundir, uid_t uid);

/* Write one frame; returns 0 or -1 (errno set).  Never raises SIGPIPE. */
int xp_send_frame(int fd, const void *buf, size_t len);

/* Read one frame into a malloc'd buffer (NUL-terminated for convenience).
 * Returns 0; -1 on I/O error or EOF (errno 0 for a clean EOF); -2 when the
 * announced length exceeds max (nothing more is read). */
int xp_recv_frame(int fd, char **buf, size_t *len, size_t max);
/* The same, failing with ETIMEDOUT unless the whole frame arrives within
 * timeout_ms (-1: no limit). */
int xp_recv_frame_within(int fd, char **buf, size_t *len, size_t max, int timeout_ms);

/* Incremental parsing, for a reader that gathers bytes without blocking.
 * Returns 0 when buf starts with a whole frame (*payload, *plen: its body
 * inside buf; *consumed: header + body), 1 when more bytes are needed, or
 * -EMSGSIZE when the announced length exceeds max. */
int xp_frame_parse(const char *buf, size_t len, size_t max, const char **payload,
		   size_t *plen, size_t *consumed);

#endif
