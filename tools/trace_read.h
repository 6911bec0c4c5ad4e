/* Copying a trace out of the target: the directories the agent prints
 * (`trace buffers`, `trace objects`) and the buffers themselves, read with
 * process_vm_readv (the tool may ptrace the target: the attach rule). */
#ifndef XP_TRACE_READ_H
#define XP_TRACE_READ_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "session.h"
#include "trace_format.h"
#include "trace_names.h"
#include "trace_parse.h"

/* len bytes of pid's memory at addr: 0, or -1 with errno. */
int trace_vm_read(pid_t pid, uint64_t addr, void *buf, size_t len);
/* len bytes into pid's memory at addr, in one piece (the tail of a ring
 * the tool drains): 0, or -1 with errno. */
int trace_vm_write(pid_t pid, uint64_t addr, const void *buf, size_t len);
/* Records [first, end) of the ring of cap records at addr, into rec. */
int trace_read_ring(pid_t pid, uint64_t addr, uint64_t cap, uint64_t first, uint64_t end,
		    struct xp_trace_rec *rec);
/* A NUL-terminated string of at most size - 1 bytes (cut there). */
int trace_vm_read_str(pid_t pid, uint64_t addr, char *buf, size_t size);

/* `trace objects`, checked (trace_parse.h): 0, or -1 with a message
 * printed. */
int trace_objects(struct session *s, struct trace_object **objs, size_t *n);

/* Everything recorded, decoded, with names for its objects. */
struct trace_data {
	struct tf_clock clock;
	struct tf_thread *threads;
	size_t nthreads;
	struct trace_names *names;
};

/* Read the buffers of every thread (or of tid alone): 0, or -1 with a
 * message printed. */
int trace_read(struct session *s, int tid, struct trace_data *d);
void trace_data_free(struct trace_data *d);

#endif
