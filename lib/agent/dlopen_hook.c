/* SPDX-License-Identifier: MIT */
/* Sites in a library the application dlopen()s by path are live before
 * dlopen() returns, so not even the first call into the library goes
 * unseen.
 *
 * The agent defines dlopen() itself.  Linked with -lxprobes or preloaded,
 * its definition comes before libc's in the global lookup scope, so the
 * application's calls land here.  For a file named by a path, the real
 * dlopen() runs, then a rescan on the calling thread finds the new
 * library's sites and attaches the loaded modules to them (and forgets
 * libraries dlclose()d since the last rescan, leaving the grace period
 * that frees their lists to the control thread).  It never waits: if the
 * agent is busy with a command, the control thread is woken to rescan
 * after it.
 *
 * Every other call jumps straight to libc's dlopen() with the caller's own
 * return address, because glibc resolves a bare name ("libfoo.so") through
 * the calling object's RUNPATH and expands $ORIGIN relative to it: called
 * from here, the search would be ours.  Those libraries, and every library
 * when the agent was injected into a running process (the application's
 * references to dlopen() are bound to libc's by then), are found by the
 * control thread's rescan instead: before every command, and every 250 ms
 * while modules are loaded.  The agent's own dlopen() calls go straight to
 * libc's.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

#include "../control/control.h"

/* The path taken for a file named by a path: open, then rescan. */
void *xp_dlopen_and_rescan(const char *file, int mode);
void *xp_dlopen_and_rescan(const char *file, int mode)
{
	void *h = xp_real_dlopen(file, mode);

	if (h)
		xp_control_after_dlopen();
	return h;
}

/* Where dlopen() goes: the rescanning path only where the caller cannot
 * matter (a '/' in the name, no '$' to expand). */
void *xp_dlopen_route(const char *file);
void *xp_dlopen_route(const char *file)
{
	if (file && strchr(file, '/') && !strchr(file, '$'))
		return (void *)xp_dlopen_and_rescan;
	return (void *)xp_libc_dlopen();
}

/* dlopen(file, mode): ask xp_dlopen_route, then jump (not call) there with
 * the arguments and the caller's return address untouched. */
__asm__(".text\n"
	/* One body, three versions of dlopen (see libxprobes.map). */
	".globl xp_dlopen_default, xp_dlopen_glibc_2_34, xp_dlopen_glibc_2_2_5\n"
	".type xp_dlopen_default, @function\n"
	".type xp_dlopen_glibc_2_34, @function\n"
	".type xp_dlopen_glibc_2_2_5, @function\n"
	".symver xp_dlopen_default, dlopen@@XPROBES_0.2\n"
	".symver xp_dlopen_glibc_2_34, dlopen@GLIBC_2.34\n"
	".symver xp_dlopen_glibc_2_2_5, dlopen@GLIBC_2.2.5\n"
	"xp_dlopen_default:\n"
	"xp_dlopen_glibc_2_34:\n"
	"xp_dlopen_glibc_2_2_5:\n"
	".cfi_startproc\n"
	"push %rdi\n"
	".cfi_adjust_cfa_offset 8\n"
	"push %rsi\n"
	".cfi_adjust_cfa_offset 8\n"
	"sub $8, %rsp\n" /* 16-byte alignment for the call */
	".cfi_adjust_cfa_offset 8\n"
	"call xp_dlopen_route@PLT\n"
	"add $8, %rsp\n"
	".cfi_adjust_cfa_offset -8\n"
	"pop %rsi\n"
	".cfi_adjust_cfa_offset -8\n"
	"pop %rdi\n"
	".cfi_adjust_cfa_offset -8\n"
	"jmp *%rax\n"
	".cfi_endproc\n"
	".size xp_dlopen_default, .-xp_dlopen_default\n"
	".size xp_dlopen_glibc_2_34, .-xp_dlopen_glibc_2_34\n"
	".size xp_dlopen_glibc_2_2_5, .-xp_dlopen_glibc_2_2_5\n");
