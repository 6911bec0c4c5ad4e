/* SPDX-License-Identifier: MIT */
/* The code `xprobes --inject` copies into the target (see inject.c).
 *
 * One blob, position independent, copied twice into one fresh mapping:
 * region A runs on the borrowed thread (inject_borrowed), region B on a
 * new thread of the target's own (inject_loader).  Each thread unmaps its
 * own region as it leaves, by jumping to munmap() with a return address
 * outside the region, so neither waits for the other and nothing stays.
 * The tool only patches the slots below (inject_slot_*) and fills the
 * path; it reads the verdict from region B.
 *
 * Kill safety: the borrowed thread enters with %rsp just above a signal
 * frame F that the tool wrote on its stack (below the red zone): [F] is
 * the return slot, F+8 a ucontext holding the thread's interrupted state
 * (already adjusted to re-run its system call).  inject_borrowed ends by
 * storing the address of libc's __restore_rt in [F] and tail-calling
 * munmap(A): munmap returns into __restore_rt, whose rt_sigreturn puts
 * every register, the FPU state and the signal mask back.  Nothing here
 * needs the tool to be alive.
 */
#include <sys/syscall.h>

#define SIG_SETMASK 2
#define RTLD_NOW 2
#define MSG_LEN 1024
#define PATH_LEN 4096
#define EAGAIN 11
/* How long the loader keeps region B for the tool to read the verdict:
 * ACK_NAPS naps of 10 ms (the tool normally answers within 1 ms). */
#define ACK_NAPS 500

	.section .rodata.xprobes_inject, "a"
	.balign 16
	.globl inject_code_start, inject_code_end, inject_borrowed, inject_loader
	.hidden inject_code_start, inject_code_end, inject_borrowed, inject_loader

inject_code_start:

/* Borrowed thread.  In: %rsp = F+8 (16-byte aligned).  Never returns. */
inject_borrowed:
	sub	$16, %rsp			/* aligned for the calls; F+8.. untouched */
	/* No handler of the target's may run on this borrowed stack */
	mov	$SYS_rt_sigprocmask, %eax
	mov	$SIG_SETMASK, %edi
	lea	all_signals(%rip), %rsi
	xor	%edx, %edx
	mov	$8, %r10d
	syscall
	mov	$EAGAIN, %eax
	cmpl	$0, inject_slot_fail_create(%rip)	/* test hook */
	jne	1f
	lea	thread_id(%rip), %rdi
	xor	%esi, %esi
	mov	inject_slot_loader_entry(%rip), %rdx
	xor	%ecx, %ecx
	call	*inject_slot_pthread_create(%rip)
1:	test	%eax, %eax
	jz	2f
	/* No loader thread: its region goes now (the tool sees it vanish
	 * without a verdict and reports the failure). */
	mov	inject_slot_loader_region(%rip), %rdi
	mov	inject_slot_region_len(%rip), %rsi
	call	*inject_slot_munmap(%rip)
2:	add	$8, %rsp			/* %rsp = F */
	mov	inject_slot_restore_rt(%rip), %rax
	mov	%rax, (%rsp)
	lea	inject_code_start(%rip), %rdi
	mov	inject_slot_region_len(%rip), %rsi
	jmp	*inject_slot_munmap(%rip)	/* -> __restore_rt -> rt_sigreturn */

/* Loader thread: start routine of pthread_create().  Returns into libc's
 * thread start through munmap(), with this region gone. */
inject_loader:
	push	%rbx				/* callee-saved; aligns %rsp */
	mov	$SYS_rt_sigprocmask, %eax	/* the borrowed thread's mask */
	mov	$SIG_SETMASK, %edi
	lea	inject_slot_loader_mask(%rip), %rsi
	xor	%edx, %edx
	mov	$8, %r10d
	syscall
	lea	inject_path(%rip), %rdi
	mov	$RTLD_NOW, %esi
	call	*inject_slot_dlopen(%rip)
	mov	%rax, inject_handle(%rip)
	test	%rax, %rax
	jnz	1f
	call	*inject_slot_dlerror(%rip)
	mov	%rax, inject_error(%rip)
	test	%rax, %rax
	jz	1f
	/* dlerror's text dies with this thread: copy it into the region */
	lea	inject_msg(%rip), %rdi
	mov	$MSG_LEN, %esi
	lea	format(%rip), %rdx
	mov	%rax, %rcx
	xor	%eax, %eax
	call	*inject_slot_snprintf(%rip)
1:	call	*inject_slot_pthread_self(%rip)
	mov	%rax, %rdi
	call	*inject_slot_pthread_detach(%rip)
	movl	$1, inject_done(%rip)
	/* Keep the verdict until the tool has read it, or for a bounded
	 * time if the tool is gone. */
	mov	$ACK_NAPS, %ebx
2:	cmpl	$0, inject_ack(%rip)
	jne	3f
	mov	$SYS_nanosleep, %eax
	lea	nap(%rip), %rdi
	xor	%esi, %esi
	syscall
	dec	%ebx
	jnz	2b
3:	pop	%rbx
	lea	inject_code_start(%rip), %rdi
	mov	inject_slot_region_len(%rip), %rsi
	jmp	*inject_slot_munmap(%rip)

/* Slots the tool patches (addresses in the target) */
	.balign 8
#define SLOT(name) .globl name; .hidden name; name: .quad 0
SLOT(inject_slot_pthread_create)
SLOT(inject_slot_restore_rt)
SLOT(inject_slot_munmap)
SLOT(inject_slot_loader_entry)
SLOT(inject_slot_loader_region)
SLOT(inject_slot_region_len)
SLOT(inject_slot_dlopen)
SLOT(inject_slot_dlerror)
SLOT(inject_slot_snprintf)
SLOT(inject_slot_pthread_self)
SLOT(inject_slot_pthread_detach)
SLOT(inject_slot_loader_mask)
SLOT(inject_slot_fail_create)
/* Results, read by the tool in region B */
SLOT(inject_handle)
SLOT(inject_error)
SLOT(inject_done)	/* 32-bit flag: the loader has finished */
SLOT(inject_ack)	/* 32-bit flag: the tool has read the verdict */
all_signals:
	.quad	-1
thread_id:
	.quad	0
nap:
	.quad	0, 10000000
format:
	.asciz	"%s"
	.globl inject_msg, inject_path
	.hidden inject_msg, inject_path
inject_msg:
	.space	MSG_LEN
inject_path:
	.space	PATH_LEN
inject_code_end:

	.section .note.GNU-stack, "", @progbits
