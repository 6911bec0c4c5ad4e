/* Reading the target's memory with process_vm_readv (the tool may ptrace
 * the target: the attach rule), and writing a drained ring's tail.  Below both of its users: the buffers
 * (trace_read.c) and the site records the names come from (trace_names.c). */
#define _GNU_SOURCE
#include "xprobes.h"

#include <errno.h>
#include <string.h>
#include <sys/uio.h>

int trace_vm_read(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	char *p = buf;
	while (len) {
		struct iovec local = { p, len }, remote = { (void *)(uintptr_t)addr, len };
		ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
		if (n <= 0) {
			if (n == 0)
				errno = EFAULT;
			return -1;
		}
		p += n;
		addr += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

int trace_vm_write(pid_t pid, uint64_t addr, const void *buf, size_t len)
{
	struct iovec local = { (void *)buf, len }, remote = { (void *)(uintptr_t)addr, len };
	ssize_t n = process_vm_writev(pid, &local, 1, &remote, 1, 0);
	if (n == (ssize_t)len)
		return 0;
	if (n >= 0)
		errno = EFAULT;
	return -1;
}

int trace_vm_read_str(pid_t pid, uint64_t addr, char *buf, size_t size)
{
	/* Byte by byte would be slow; a page at a time could cross into an
	 * unmapped one, so shrink to the page's end first. */
	size_t got = 0;
	while (got + 1 < size) {
		size_t chunk = 4096 - (size_t)((addr + got) & 4095);
		if (chunk > size - 1 - got)
			chunk = size - 1 - got;
		if (trace_vm_read(pid, addr + got, buf + got, chunk) != 0)
			return -1;
		void *nul = memchr(buf + got, '\0', chunk);
		if (nul)
			return 0;
		got += chunk;
	}
	buf[got] = '\0';
	return 0;
}
