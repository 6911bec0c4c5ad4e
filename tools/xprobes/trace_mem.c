/* SPDX-License-Identifier: MIT */
/* Reading the target's memory and writing a drained ring's tail, through
 * the session's /proc/PID/mem (tools/common/session_mem.c): bound to the
 * process image the session checked, so an exec ends every transfer.
 * Below both of its users: the buffers (trace_read.c) and the site
 * records the names come from (trace_names.c). */
#define _GNU_SOURCE
#include "xprobes.h"

#include <errno.h>
#include <string.h>

int trace_vm_read(const struct session *s, uint64_t addr, void *buf, size_t len)
{
	return session_mem_read(s, addr, buf, len);
}

int trace_vm_write(const struct session *s, uint64_t addr, const void *buf, size_t len)
{
	return session_mem_write(s, addr, buf, len);
}

int trace_vm_read_str(const struct session *s, uint64_t addr, char *buf, size_t size)
{
	/* Byte by byte would be slow; a page at a time could cross into an
	 * unmapped one, so shrink to the page's end first. */
	size_t got = 0;
	while (got + 1 < size) {
		size_t chunk = 4096 - (size_t)((addr + got) & 4095);
		if (chunk > size - 1 - got)
			chunk = size - 1 - got;
		if (trace_vm_read(s, addr + got, buf + got, chunk) != 0)
			return -1;
		void *nul = memchr(buf + got, '\0', chunk);
		if (nul)
			return 0;
		got += chunk;
	}
	buf[got] = '\0';
	return 0;
}
