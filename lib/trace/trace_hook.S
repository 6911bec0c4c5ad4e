/* SPDX-License-Identifier: MIT */
/* The function-graph tracer's entry hook and exit trampoline.
 *
 * Both run between a traced function's instructions, so they preserve
 * every register the function (or its caller) may still need, and call C
 * code (trace_record.c) that is compiled without SSE/x87 so that the
 * vector registers need no saving on entry.
 */

/* No executable stack for the library. */
	.section .note.GNU-stack, "", @progbits

	.text

/* Reached from a patch site: `call rel32` to the object's trampoline, which
 * jumps here.  So [rsp] = site + 5 (back into the traced function) and
 * [rsp + 8] = the traced function's return address into its caller, and
 * rsp is 16-byte aligned (a function is entered with rsp = 8 mod 16, then
 * the site's call pushed 8 more).
 *
 * Saved: the six integer argument registers, rax (the number of vector
 * registers a variadic call passes) and r10/r11 (the static chain of
 * nested functions; scratch that some hand-written callers rely on). */
	.globl	xp_trace_entry_hook
	.hidden	xp_trace_entry_hook
	.type	xp_trace_entry_hook, @function
	.p2align 4
xp_trace_entry_hook:
	.cfi_startproc
	/* --requests and no request open on this thread: nothing to record,
	 * so return before saving anything (trace_record.c says the same in
	 * C for the calls that reach it).  rax is borrowed for the TLS
	 * offset (initial-exec: a GOT slot the loader filled), put back by
	 * a pop, which leaves the flags of the compare. */
	cmpb	$0, xp_trace_requests_only(%rip)
	jne	.Lrequests
.Lsave:
	pushq	%rdi
	.cfi_adjust_cfa_offset 8
	pushq	%rsi
	.cfi_adjust_cfa_offset 8
	pushq	%rdx
	.cfi_adjust_cfa_offset 8
	pushq	%rcx
	.cfi_adjust_cfa_offset 8
	pushq	%r8
	.cfi_adjust_cfa_offset 8
	pushq	%r9
	.cfi_adjust_cfa_offset 8
	pushq	%rax
	.cfi_adjust_cfa_offset 8
	pushq	%r10
	.cfi_adjust_cfa_offset 8
	pushq	%r11
	.cfi_adjust_cfa_offset 8
	subq	$8, %rsp		/* 9 pushes + 8: 80, aligned again */
	.cfi_adjust_cfa_offset 8
	movq	80(%rsp), %rdi		/* site + 5 */
	leaq	88(%rsp), %rsi		/* the slot holding the caller's return */
	call	xp_trace_enter
	addq	$8, %rsp
	.cfi_adjust_cfa_offset -8
	popq	%r11
	.cfi_adjust_cfa_offset -8
	popq	%r10
	.cfi_adjust_cfa_offset -8
	popq	%rax
	.cfi_adjust_cfa_offset -8
	popq	%r9
	.cfi_adjust_cfa_offset -8
	popq	%r8
	.cfi_adjust_cfa_offset -8
	popq	%rcx
	.cfi_adjust_cfa_offset -8
	popq	%rdx
	.cfi_adjust_cfa_offset -8
	popq	%rsi
	.cfi_adjust_cfa_offset -8
	popq	%rdi
	.cfi_adjust_cfa_offset -8
	ret
.Lrequests:
	pushq	%rax
	.cfi_adjust_cfa_offset 8
	movq	xp_trace_request_open@gottpoff(%rip), %rax
	cmpb	$0, %fs:(%rax)
	popq	%rax
	.cfi_adjust_cfa_offset -8
	jne	.Lsave
	ret
	.cfi_endproc
	.size	xp_trace_entry_hook, . - xp_trace_entry_hook

/* Reached by a traced function's `ret`, its return address having been
 * replaced by this one: rsp = the slot + 8, exactly as the caller expects
 * after the call.  Saves the return registers (rax rdx xmm0 xmm1; st0/st1
 * are untouched since the C code never uses x87), asks xp_trace_exit for
 * the real return address and jumps there through r11, which is scratch
 * at a return.  A jump, not a push + ret: the CPU's return stack still
 * pairs the caller's own ret with its call.
 *
 * Unwinding: the real return address is in the thread's shadow stack,
 * which DWARF cannot reach, so the return address is declared undefined
 * (a backtrace ends here instead of wandering).  The one-byte NOP before
 * the label puts an unwinder's `return address - 1` lookup, for a frame
 * that returns here, inside this FDE as well. */
	.globl	xp_trace_exit_tramp
	.hidden	xp_trace_exit_tramp
	.type	xp_trace_exit_tramp, @function
	.p2align 4
	.cfi_startproc
	.cfi_def_cfa_offset 0
	.cfi_undefined rip
	nop
xp_trace_exit_tramp:
	pushq	%rax
	.cfi_adjust_cfa_offset 8
	pushq	%rdx
	.cfi_adjust_cfa_offset 8
	subq	$32, %rsp
	.cfi_adjust_cfa_offset 32
	movups	%xmm0, (%rsp)		/* legacy SSE: ymm/zmm upper halves kept */
	movups	%xmm1, 16(%rsp)
	leaq	48(%rsp), %rdi		/* rsp as the function's ret left it */
	call	xp_trace_exit
	movq	%rax, %r11
	movups	(%rsp), %xmm0
	movups	16(%rsp), %xmm1
	addq	$32, %rsp
	.cfi_adjust_cfa_offset -32
	popq	%rdx
	.cfi_adjust_cfa_offset -8
	popq	%rax
	.cfi_adjust_cfa_offset -8
	jmp	*%r11
	.cfi_endproc
	.size	xp_trace_exit_tramp, . - xp_trace_exit_tramp
