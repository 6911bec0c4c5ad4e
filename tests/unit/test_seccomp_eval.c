/* SPDX-License-Identifier: MIT */
/* Running seccomp filters outside the kernel (tools/common/seccomp.c), as
 * trace start does before it changes anything: filters of the shapes
 * programs install (an allow list with a default kill, an argument check
 * as systemd's MemoryDenyWriteExecute= makes, a jump tree, arithmetic),
 * several filters and the kernel's order of severity, and instructions
 * the kernel would never accept, which must refuse rather than allow.
 * The tool's files are compiled in here, as unit tests link only the
 * agent's objects. */
#include "../../tools/common/seccomp.c" /* first: its _GNU_SOURCE */
#include "../../tools/common/proc_status.c"

#include <errno.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "unit.h"

#define LEN(a) (sizeof(a) / sizeof((a)[0]))
#define ARCH_OK BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)), \
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, OUR_AUDIT_ARCH, 1, 0), \
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS)
#define LOAD_NR BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr))
#define ARG_LO(n) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[n]))

static const struct syscall_use mremap_use = { "mremap", SYS_mremap, { 0 }, 0 };
static const struct syscall_use read_use = { "read", SYS_read, { 3 }, 0 };
static const struct syscall_use rx_use = { "mprotect(RX)", SYS_mprotect,
					   { 0x1000, 0x1000, PROT_READ | PROT_EXEC }, 0 };
static const struct syscall_use rw_use = { "mprotect(RW)", SYS_mprotect,
					   { 0x1000, 0x1000, PROT_READ | PROT_WRITE }, 0 };

/* The answer of the filters f[0..n) to u. */
static uint32_t answer(struct sock_filter **f, const size_t *len, size_t n,
		       const struct syscall_use *u)
{
	struct filters fs = { .n = n };
	for (size_t i = 0; i < n; i++) {
		fs.insns[i] = f[i];
		fs.len[i] = len[i];
	}
	return verdict(&fs, u);
}

static uint32_t one(struct sock_filter *f, size_t len, const struct syscall_use *u)
{
	return answer(&f, &len, 1, u);
}

static void test_allow_list_with_default_kill(void **state)
{
	(void)state;
	struct sock_filter f[] = {
		ARCH_OK,
		LOAD_NR,
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_read, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_write, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	assert_int_equal(one(f, LEN(f), &read_use), SECCOMP_RET_ALLOW);
	assert_int_equal(one(f, LEN(f), &mremap_use), SECCOMP_RET_KILL_PROCESS);
}

/* MemoryDenyWriteExecute=: mprotect adding PROT_EXEC fails with EPERM. */
static void test_argument_check(void **state)
{
	(void)state;
	struct sock_filter f[] = {
		ARCH_OK,
		LOAD_NR,
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mprotect, 0, 3),
		ARG_LO(2),
		BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, PROT_EXEC, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	assert_int_equal(one(f, LEN(f), &rx_use), SECCOMP_RET_ERRNO | EPERM);
	assert_int_equal(one(f, LEN(f), &rw_use), SECCOMP_RET_ALLOW);
	assert_int_equal(one(f, LEN(f), &read_use), SECCOMP_RET_ALLOW);
}

/* libseccomp's shape: a tree of JGE/JGT on the number, through the
 * scratch memory and X, with arithmetic on the way. */
static void test_jump_tree_scratch_and_alu(void **state)
{
	(void)state;
	struct sock_filter f[] = {
		ARCH_OK,
		LOAD_NR,
		BPF_STMT(BPF_ST, 3),                                /* mem[3] = nr */
		BPF_STMT(BPF_LDX | BPF_MEM, 3),                     /* X = nr */
		BPF_STMT(BPF_MISC | BPF_TXA, 0),                    /* A = X */
		BPF_STMT(BPF_ALU | BPF_ADD | BPF_K, 1000),          /* A = nr + 1000 */
		BPF_STMT(BPF_ALU | BPF_SUB | BPF_K, 1000),          /* A = nr */
		BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, SYS_mremap, 0, 2),
		BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, SYS_mremap, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),        /* nr == mremap */
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	assert_int_equal(one(f, LEN(f), &mremap_use), SECCOMP_RET_TRAP);
	assert_int_equal(one(f, LEN(f), &read_use), SECCOMP_RET_ALLOW);
}

/* Every filter runs; the most severe answer wins, whatever the order. */
static void test_most_severe_of_several(void **state)
{
	(void)state;
	struct sock_filter allow[] = { BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW) };
	struct sock_filter log[] = { BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_LOG) };
	struct sock_filter err[] = { BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EACCES) };
	struct sock_filter trap[] = { BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP) };
	struct sock_filter kill[] = { BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS) };
	struct sock_filter *a[] = { allow, log, err }, *b[] = { err, trap, allow },
			   *c[] = { log, kill, trap }, *d[] = { log, allow };
	size_t ones[] = { 1, 1, 1 };
	assert_int_equal(answer(a, ones, 3, &read_use), SECCOMP_RET_ERRNO | EACCES);
	assert_int_equal(answer(b, ones, 3, &read_use), SECCOMP_RET_TRAP);
	assert_int_equal(answer(c, ones, 3, &read_use), SECCOMP_RET_KILL_PROCESS);
	assert_int_equal(answer(d, ones, 2, &read_use), SECCOMP_RET_LOG);
	assert_true(allowed(SECCOMP_RET_LOG, &read_use));
	assert_false(allowed(SECCOMP_RET_ERRNO | EACCES, &read_use));
	assert_false(allowed(SECCOMP_RET_USER_NOTIF, &read_use));
}

/* A best-effort call: an error will do, a kill or a trap will not. */
static void test_may_fail(void **state)
{
	(void)state;
	struct syscall_use u = { "madvise", SYS_madvise, { 0 }, 1 };
	assert_true(allowed(SECCOMP_RET_ERRNO | EINVAL, &u));
	assert_true(allowed(SECCOMP_RET_TRACE, &u));
	assert_false(allowed(SECCOMP_RET_TRAP, &u));
	assert_false(allowed(SECCOMP_RET_KILL_THREAD, &u));
}

/* What the kernel would refuse to load answers "kill": refused, never
 * taken for allowed. */
static void test_nonsense_refuses(void **state)
{
	(void)state;
	struct sock_filter beyond[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, sizeof(struct seccomp_data)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_filter unaligned[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 2),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_filter byte_load[] = {
		BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_filter no_return[] = { LOAD_NR };
	struct sock_filter div_zero[] = {
		LOAD_NR,
		BPF_STMT(BPF_ALU | BPF_DIV | BPF_X, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_filter bad_mem[] = {
		BPF_STMT(BPF_ST, BPF_MEMWORDS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	assert_int_equal(one(beyond, LEN(beyond), &read_use), SECCOMP_RET_KILL_PROCESS);
	assert_int_equal(one(unaligned, LEN(unaligned), &read_use), SECCOMP_RET_KILL_PROCESS);
	assert_int_equal(one(byte_load, LEN(byte_load), &read_use), SECCOMP_RET_KILL_PROCESS);
	assert_int_equal(one(no_return, LEN(no_return), &read_use), SECCOMP_RET_KILL_PROCESS);
	assert_int_equal(one(div_zero, LEN(div_zero), &read_use), SECCOMP_RET_KILL_PROCESS);
	assert_int_equal(one(bad_mem, LEN(bad_mem), &read_use), SECCOMP_RET_KILL_PROCESS);
}

static void test_describe(void **state)
{
	(void)state;
	char buf[200];
	seccomp_describe(SECCOMP_RET_KILL_PROCESS, "mremap", buf, sizeof(buf));
	assert_string_equal(buf, "kills the process on mremap");
	seccomp_describe(SECCOMP_RET_ERRNO | EPERM, "mremap", buf, sizeof(buf));
	assert_string_equal(buf, "makes mremap fail with EPERM (errno 1)");
	seccomp_describe(SECCOMP_RET_KILL_THREAD, "mmap", buf, sizeof(buf));
	assert_string_equal(buf, "kills the calling thread on mmap");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_allow_list_with_default_kill),
		cmocka_unit_test(test_argument_check),
		cmocka_unit_test(test_jump_tree_scratch_and_alu),
		cmocka_unit_test(test_most_severe_of_several),
		cmocka_unit_test(test_may_fail),
		cmocka_unit_test(test_nonsense_refuses),
		cmocka_unit_test(test_describe),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
