/* SPDX-License-Identifier: MIT */
/* The attach policy (lib/control/peer.c) on real processes: a target child and a
 * client child with the credentials of each case, connected through a
 * listening socket; the target judges its client and reports back over a
 * socketpair.  Needs root to hand out credentials; skipped otherwise. */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "unit.h"
#include "control/control.h"

#define NOBODY 65534
#define OTHER 1000
#define BIT(c) (UINT64_C(1) << (c))

enum dump { DUMP_AS_KERNEL_LEFT_IT, DUMP_ON, DUMP_OFF };
enum after { STAY, SETEUID_ROOT, OWN_USERNS, PLAIN_USERNS };

/* Credentials one side takes on (as root) before the case runs. */
struct side {
	uid_t uid[3]; /* real, effective, saved */
	gid_t gid[3];
	int limit_caps; /* if set, permitted = caps, effective = caps - ineffective */
	uint64_t caps, ineffective;
	enum dump dump;
	int fork_after; /* target: judge from a child forked after the change */
	int own_pidns;  /* target: judge from a child in a pid namespace of its
			 * own, where the client has no pid (SO_PEERCRED pid 0) */
	int userns_first; /* client: connect from a user namespace of its own */
	enum after after; /* client: what it does after connecting */
};

#define IDS(u) { (u), (u), (u) }
static const struct side ROOT = { .uid = IDS(0), .gid = IDS(0) };
static const struct side PLAIN_NOBODY = { .uid = IDS(NOBODY), .gid = IDS(NOBODY), .dump = DUMP_ON };

struct outcome {
	int rc;
	pid_t target;
	char why[400];
};

static void set_caps(uint64_t prm, uint64_t eff)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2] = {
		{ .permitted = (uint32_t)prm, .effective = (uint32_t)eff },
		{ .permitted = (uint32_t)(prm >> 32), .effective = (uint32_t)(eff >> 32) },
	};
	if (syscall(SYS_capget, &h, NULL) != 0 || syscall(SYS_capset, &h, d) != 0)
		_exit(90);
}

static void become(const struct side *s)
{
	alarm(60); /* a safety bound: a hung case fails instead of wedging the run */
	if (setgroups(0, NULL) != 0)
		_exit(91);
	if (s->limit_caps && prctl(PR_SET_KEEPCAPS, 1) != 0)
		_exit(92);
	if (setresgid(s->gid[0], s->gid[1], s->gid[2]) != 0 ||
	    setresuid(s->uid[0], s->uid[1], s->uid[2]) != 0)
		_exit(93);
	if (s->limit_caps)
		set_caps(s->caps, s->caps & ~s->ineffective);
	if (s->dump != DUMP_AS_KERNEL_LEFT_IT && prctl(PR_SET_DUMPABLE, s->dump == DUMP_ON) != 0)
		_exit(94);
}

/* Into a user namespace of its own, mapping only our uid and gid (as an
 * unprivileged `unshare -r` does), or none at all. */
static void own_userns(int map)
{
	char line[64];
	uid_t uid = geteuid();
	gid_t gid = getegid();
	if (unshare(CLONE_NEWUSER) != 0)
		_exit(95);
	if (!map)
		return;
	static const char *const files[] = { "/proc/self/setgroups", "/proc/self/uid_map",
					     "/proc/self/gid_map" };
	for (int i = 0; i < 3; i++) {
		FILE *f = fopen(files[i], "w");
		if (i == 0)
			snprintf(line, sizeof(line), "deny");
		else
			snprintf(line, sizeof(line), "0 %u 1", i == 1 ? (unsigned)uid : (unsigned)gid);
		if (!f || fputs(line, f) < 0 || fclose(f) != 0)
			_exit(96);
	}
}

static void client(const struct sockaddr_un *sa, socklen_t salen, const struct side *s)
{
	become(s);
	if (s->userns_first)
		own_userns(1);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (const struct sockaddr *)sa, salen) != 0)
		_exit(97);
	if (s->after == SETEUID_ROOT && seteuid(0) != 0)
		_exit(98);
	if (s->after == OWN_USERNS || s->after == PLAIN_USERNS)
		own_userns(s->after == OWN_USERNS);
	/* Changed as it wanted: the target may judge.  Then stay alive until
	 * the target has, so the client is there to be looked at. */
	char c = 'x';
	if (write(fd, &c, 1) != 1)
		_exit(99);
	while (read(fd, &c, 1) > 0)
		continue;
	_exit(0);
}

static void target(int listener, int result, const struct side *s)
{
	struct outcome o = { .rc = -12345 };
	if (s->own_pidns && unshare(CLONE_NEWPID) != 0) /* before giving up root */
		_exit(89);
	become(s);
	if (s->fork_after || s->own_pidns) {
		pid_t pid = fork();
		if (pid != 0)
			_exit(pid < 0 || waitpid(pid, NULL, 0) != pid);
	}
	char c;
	int fd = accept(listener, NULL, NULL);
	if (fd >= 0 && read(fd, &c, 1) == 1) {
		o.rc = xp_peer_may_attach(fd, o.why, sizeof(o.why));
		o.target = getpid();
	}
	_exit(write(result, &o, sizeof(o)) != sizeof(o));
}

/* Run one case: may a client with credentials c attach to a target with t? */
static struct outcome judge(const struct side *t, const struct side *c)
{
	static int n;
	struct outcome o;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	/* An abstract name: no directory permissions get in the way. */
	int len = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "xprobes-test-peer-%d-%d",
			   (int)getpid(), n++);
	socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)len);
	int sv[2];
	int listener = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_true(listener >= 0);
	assert_int_equal(bind(listener, (struct sockaddr *)&sa, salen), 0);
	assert_int_equal(listen(listener, 1), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);

	pid_t tp = fork();
	if (tp == 0) {
		close(sv[0]);
		target(listener, sv[1], t);
	}
	pid_t cp = fork();
	if (cp == 0) {
		/* Only the target may hold these, so its end is the end. */
		close(sv[0]);
		close(sv[1]);
		close(listener);
		client(&sa, salen, c);
	}
	close(sv[1]);
	close(listener);
	ssize_t got = read(sv[0], &o, sizeof(o));
	close(sv[0]);
	int ts, cs;
	assert_int_equal(waitpid(tp, &ts, 0), tp);
	if (got != sizeof(o))
		kill(cp, SIGKILL); /* the target failed: nobody will release the client */
	assert_int_equal(waitpid(cp, &cs, 0), cp);
	if (got != sizeof(o))
		fail_msg("no outcome: target status %#x, client status %#x", ts, cs);
	assert_int_equal(ts, 0);
	assert_int_equal(cs, 0);
	return o;
}

static void expect_allowed(const struct side *t, const struct side *c)
{
	struct outcome o = judge(t, c);
	if (o.rc != 0)
		fail_msg("refused (%d): %s", o.rc, o.why);
}

/* Refused with exactly this reason (exact; %d in want is the target's
 * pid), or with a reason that says this (!exact). */
static void check_refused(const struct side *t, const struct side *c, const char *want, int exact)
{
	struct outcome o = judge(t, c);
	char text[400];
	snprintf(text, sizeof(text), want, (int)o.target);
	if (o.rc != -EPERM || (exact ? strcmp(o.why, text) != 0 : !strstr(o.why, want)))
		fail_msg("got %d '%s'\n wanted -EPERM and '%s'", o.rc, o.why, text);
}

static void expect_refused(const struct side *t, const struct side *c, const char *want)
{
	check_refused(t, c, want, 1);
}

static void expect_refused_saying(const struct side *t, const struct side *c, const char *part)
{
	check_refused(t, c, part, 0);
}

/* Only root can hand out the credentials under test. */
#define NEED_ROOT()               \
	do {                      \
		(void)state;      \
		if (geteuid() != 0) \
			skip();   \
	} while (0)

static void test_own_process_may_attach(void **state)
{
	(void)state;
	int sv[2];
	char why[200];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(xp_peer_may_attach(sv[0], why, sizeof(why)), 0);
	close(sv[0]);
	close(sv[1]);
}

/* The hole this closes: root, then setuid(65534), then fork() (memcached
 * -u nobody -d).  The child is uid 65534 through and through, but not
 * dumpable, so uid 65534 may not ptrace it, and may not attach. */
static void test_setuid_then_fork_refuses_its_new_uid(void **state)
{
	NEED_ROOT();
	struct side t = { .uid = IDS(NOBODY), .gid = IDS(NOBODY), .fork_after = 1 };
	expect_refused(&t, &PLAIN_NOBODY,
		       "uid 65534 may not attach to process %d: it changed credentials and is not "
		       "dumpable (ptrace would refuse); use root");
	expect_allowed(&t, &ROOT);
}

static void test_same_user_dumpable_may_attach(void **state)
{
	NEED_ROOT();
	expect_allowed(&PLAIN_NOBODY, &PLAIN_NOBODY);
}

static void test_ids_must_all_match(void **state)
{
	NEED_ROOT();
	expect_refused(&ROOT, &PLAIN_NOBODY,
		       "uid 65534 may not attach to process %d: it runs as uid 0/0/0 gid 0/0/0 "
		       "(real/effective/saved), not all your uid 65534 and gid 65534 (ptrace would "
		       "refuse); use root");
	/* A saved uid it could switch back to, or any other gid, is enough. */
	struct side saved_uid = PLAIN_NOBODY, effective_gid = PLAIN_NOBODY;
	saved_uid.uid[2] = OTHER;
	effective_gid.gid[1] = OTHER;
	expect_refused_saying(&saved_uid, &PLAIN_NOBODY,
			      "it runs as uid 65534/65534/1000 gid 65534/65534/65534 (");
	expect_refused_saying(&effective_gid, &PLAIN_NOBODY,
			      "it runs as uid 65534/65534/65534 gid 65534/1000/65534 (");
}

static void test_target_capabilities_must_be_the_clients_too(void **state)
{
	NEED_ROOT();
	struct side t = PLAIN_NOBODY;
	t.limit_caps = 1;
	t.caps = BIT(CAP_NET_BIND_SERVICE);
	expect_refused(&t, &PLAIN_NOBODY,
		       "uid 65534 may not attach to process %d: it holds capabilities you lack "
		       "(permitted 0x400, yours 0) (ptrace would refuse); use root");
	struct side c = t; /* the same capability: a subset */
	expect_allowed(&t, &c);
}

static void test_cap_sys_ptrace_overrides(void **state)
{
	NEED_ROOT();
	struct side c = PLAIN_NOBODY;
	c.limit_caps = 1;
	c.caps = BIT(CAP_SYS_PTRACE);
	expect_allowed(&ROOT, &c);
	/* Permitted but not effective counts for nothing. */
	c.ineffective = BIT(CAP_SYS_PTRACE);
	expect_refused(&ROOT, &c,
		       "uid 65534 may not attach to process %d: it runs as uid 0/0/0 gid 0/0/0 "
		       "(real/effective/saved), not all your uid 65534 and gid 65534 (ptrace would "
		       "refuse); use root");
}

/* Connected as 65534, then took back root from its saved uid: the socket
 * does not get root's rights. */
static void test_client_that_changed_ids_after_connecting_is_refused(void **state)
{
	NEED_ROOT();
	struct side c = { .uid = { NOBODY, NOBODY, 0 }, .gid = IDS(NOBODY), .dump = DUMP_ON,
			  .after = SETEUID_ROOT };
	expect_refused_saying(&ROOT, &c,
			      "changed its effective ids since it connected (uid 65534 to 0");
}

static void test_client_that_is_not_dumpable_is_refused(void **state)
{
	NEED_ROOT();
	struct side c = PLAIN_NOBODY;
	c.dump = DUMP_OFF;
	expect_refused_saying(&PLAIN_NOBODY, &c,
			      "(uid 65534) is not dumpable: it changed credentials");
}

/* Capabilities in a namespace of the client's own count for nothing here,
 * whether we may read its namespace (root target) or must go by its id
 * maps (target of another uid). */
static void test_client_in_another_user_namespace_is_refused(void **state)
{
	NEED_ROOT();
	struct side c = ROOT;
	c.after = PLAIN_USERNS;
	expect_refused(&ROOT, &c,
		       "uid 0 may not attach to process %d: you are in another user namespace; "
		       "attach from the process's own namespace");
	struct side other = { .uid = IDS(OTHER), .gid = IDS(OTHER), .dump = DUMP_ON };
	c = PLAIN_NOBODY;
	c.after = OWN_USERNS;
	expect_refused(&other, &c,
		       "uid 65534 may not attach to process %d: you are in another user namespace; "
		       "attach from the process's own namespace");
}

/* Can this kernel name a process's user namespace from its pidfd (Linux
 * 6.11)?  Without that, a client with no pid here cannot be placed. */
static int kernel_names_userns(void)
{
	int pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
	int ns = pidfd < 0 ? -1 : ioctl(pidfd, _IO(0xFF, 9), 0); /* PIDFD_GET_USER_NAMESPACE */
	if (pidfd >= 0)
		close(pidfd);
	if (ns >= 0)
		close(ns);
	return ns >= 0;
}

/* A client with no pid in the target's pid namespace (SO_PEERCRED pid 0)
 * has no /proc entry there, but its user namespace counts all the same:
 * connecting from one of its own (as `unshare -U -r` makes one, mapping
 * its uid to root there), it is one that ptrace refuses, root or not.
 * From the target's own user namespace it is judged as before. */
static void test_pidless_client_in_another_user_namespace_is_refused(void **state)
{
	NEED_ROOT();
	struct side t = ROOT, c = ROOT, tn = PLAIN_NOBODY, cn = PLAIN_NOBODY;
	t.own_pidns = tn.own_pidns = 1;
	c.userns_first = cn.userns_first = 1;
	expect_allowed(&t, &ROOT);
	expect_allowed(&tn, &PLAIN_NOBODY);
	if (!kernel_names_userns()) {
		/* Only the real root is let in unplaced (see peer.h). */
		expect_allowed(&t, &c);
		expect_refused_saying(&tn, &cn, "this kernel cannot tell which user namespace");
		return;
	}
	expect_refused(&t, &c,
		       "uid 0 may not attach to process %d: you are in another user namespace; "
		       "attach from the process's own namespace");
	expect_refused(&tn, &cn,
		       "uid 65534 may not attach to process %d: you are in another user namespace; "
		       "attach from the process's own namespace");
}

static void test_judge_alone(void **state)
{
	(void)state;
	struct xp_creds t = { .uid = IDS(7), .gid = IDS(8), .cap_prm = BIT(CAP_KILL) };
	struct xp_creds p = { .uid = IDS(7), .gid = IDS(8), .cap_prm = BIT(CAP_KILL) | 1 };
	char why[300] = "";
	assert_int_equal(xp_peer_judge(&p, &t, 1, 42, why, sizeof(why)), 0);
	assert_int_equal(xp_peer_judge(&p, &t, 2, 42, why, sizeof(why)), -EPERM);
	assert_non_null(strstr(why, "process 42: it changed credentials and is not dumpable"));
	p.cap_eff = BIT(CAP_SYS_PTRACE);
	assert_int_equal(xp_peer_judge(&p, &t, 0, 42, why, sizeof(why)), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_own_process_may_attach),
		cmocka_unit_test(test_judge_alone),
		cmocka_unit_test(test_setuid_then_fork_refuses_its_new_uid),
		cmocka_unit_test(test_same_user_dumpable_may_attach),
		cmocka_unit_test(test_ids_must_all_match),
		cmocka_unit_test(test_target_capabilities_must_be_the_clients_too),
		cmocka_unit_test(test_cap_sys_ptrace_overrides),
		cmocka_unit_test(test_client_that_changed_ids_after_connecting_is_refused),
		cmocka_unit_test(test_client_that_is_not_dumpable_is_refused),
		cmocka_unit_test(test_client_in_another_user_namespace_is_refused),
		cmocka_unit_test(test_pidless_client_in_another_user_namespace_is_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
