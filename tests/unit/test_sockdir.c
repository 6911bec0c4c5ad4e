/* SPDX-License-Identifier: MIT */
/* The agent's socket directory (lib/control/sockdir.c): the usual one when it is
 * ours alone, a private fallback when someone else took the name first.
 * Each test gets its own run directory (XPROBES_RUNDIR), world-writable
 * and sticky like /tmp.  Another user's squat needs root, to be the other
 * user: a forked child takes uid 65534 for the victim. */
#define _GNU_SOURCE
#include <errno.h>
#include <ftw.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "control/control.h"
#include "unit.h"

#define NOBODY 65534

static char rundir[64];

static int setup(void **state)
{
	(void)state;
	snprintf(rundir, sizeof(rundir), "/tmp/xp-sockdir-XXXXXX");
	if (!mkdtemp(rundir) || chmod(rundir, 01777) != 0)
		return -1;
	return setenv("XPROBES_RUNDIR", rundir, 1);
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)st, (void)flag, (void)f;
	return remove(path);
}

static int teardown(void **state)
{
	(void)state;
	return nftw(rundir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* RUNDIR/NAME for uid, e.g. usual(buf, uid, "") is RUNDIR/.xprobes-UID. */
static char *usual(char *buf, size_t sz, unsigned uid, const char *suffix)
{
	snprintf(buf, sz, "%s/.xprobes-%u%s", rundir, uid, suffix);
	return buf;
}

/* The directory part of a socket path. */
static char *dir_of(char *path)
{
	*strrchr(path, '/') = '\0';
	return path;
}

static void assert_private(const char *dir, uid_t uid)
{
	struct stat st;
	assert_int_equal(lstat(dir, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_uid, uid);
	assert_int_equal(st.st_mode & 07777, 0700);
}

/* A fallback for uid: RUNDIR/.xprobes-UID.XXXXXX/PID.sock. */
static void assert_fallback(const char *path, unsigned uid, pid_t pid)
{
	char want[128], tail[32];
	usual(want, sizeof(want), uid, ".");
	snprintf(tail, sizeof(tail), "/%d.sock", (int)pid);
	assert_int_equal(strncmp(path, want, strlen(want)), 0);
	assert_int_equal(strlen(path), strlen(want) + 6 + strlen(tail));
	assert_string_equal(path + strlen(want) + 6, tail);
}

static void test_usual_directory(void **state)
{
	(void)state;
	char path[108], want[128], tail[32];
	assert_int_equal(xp_sockdir_prepare(path, sizeof(path)), 0);
	snprintf(tail, sizeof(tail), "/%d.sock", (int)getpid());
	assert_string_equal(path, strcat(usual(want, sizeof(want), geteuid(), ""), tail));
	assert_private(dir_of(path), geteuid());
}

/* Someone's file, symlink or open directory under our name: not used,
 * not touched, and a private directory of our own instead. */
static void squatted_by(int (*squat)(const char *name))
{
	char path[108], name[128];
	struct stat before, after;
	usual(name, sizeof(name), geteuid(), "");
	assert_int_equal(squat(name), 0);
	assert_int_equal(lstat(name, &before), 0);
	assert_int_equal(xp_sockdir_prepare(path, sizeof(path)), 0);
	assert_fallback(path, geteuid(), getpid());
	assert_private(dir_of(path), geteuid());
	assert_int_equal(lstat(name, &after), 0);
	assert_int_equal(after.st_ino, before.st_ino);
	assert_int_equal(after.st_mode, before.st_mode);
}

static int squat_file(const char *name)
{
	FILE *f = fopen(name, "w");
	return f ? fclose(f) : -1;
}

static int squat_symlink(const char *name)
{
	return symlink(rundir, name);
}

static int squat_open_dir(const char *name)
{
	return mkdir(name, 0700) || chmod(name, 0777);
}

static void test_squatted_by_file(void **state)
{
	(void)state;
	squatted_by(squat_file);
}

static void test_squatted_by_symlink(void **state)
{
	(void)state;
	squatted_by(squat_symlink);
}

static void test_squatted_by_open_directory(void **state)
{
	(void)state;
	squatted_by(squat_open_dir);
}

/* Root makes /tmp/.xprobes-65534 first (as any other user could); an
 * agent of uid 65534 still gets a directory of its own. */
static void test_squatted_by_another_user(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip();
	char name[128];
	usual(name, sizeof(name), NOBODY, "");
	assert_int_equal(mkdir(name, 0755), 0);
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	pid_t child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		char path[108] = "";
		int rc = -1;
		if (setgroups(0, NULL) == 0 && setgid(NOBODY) == 0 && setuid(NOBODY) == 0)
			rc = xp_sockdir_prepare(path, sizeof(path));
		dprintf(fds[1], "%d %s", rc, path);
		_exit(0);
	}
	close(fds[1]);
	char got[160] = "";
	assert_true(read(fds[0], got, sizeof(got) - 1) > 0);
	close(fds[0]);
	int status;
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_int_equal(strncmp(got, "0 ", 2), 0);
	assert_fallback(got + 2, NOBODY, child);
	assert_private(dir_of(got + 2), NOBODY);
	struct stat st;
	assert_int_equal(lstat(name, &st), 0);
	assert_int_equal(st.st_uid, 0); /* the squatter's, untouched */
}

/* A listener made again (the application closed it) stays in the same
 * fallback directory; the socket and the directory go at cleanup. */
static void test_fallback_reused_then_removed(void **state)
{
	(void)state;
	char a[108], b[108], name[128];
	assert_int_equal(squat_file(usual(name, sizeof(name), geteuid(), "")), 0);
	assert_int_equal(xp_sockdir_prepare(a, sizeof(a)), 0);
	assert_int_equal(xp_sockdir_prepare(b, sizeof(b)), 0);
	assert_string_equal(a, b);
	assert_int_equal(squat_file(a), 0); /* stands for the bound socket */
	xp_sockdir_cleanup(a);
	assert_int_equal(access(a, F_OK), -1);
	assert_int_equal(access(dir_of(a), F_OK), -1);
	assert_int_equal(errno, ENOENT);
}

/* A fallback directory of a killed agent (its socket stale) is removed
 * by the next one that falls back; one with no socket yet (another agent
 * between mkdtemp and bind) is left alone. */
static void test_stale_fallbacks_swept(void **state)
{
	(void)state;
	pid_t dead = fork();
	assert_true(dead >= 0);
	if (dead == 0)
		_exit(0);
	assert_int_equal(waitpid(dead, NULL, 0), dead);

	char name[128], stale[128], busy[128], sock[160], path[108];
	assert_int_equal(squat_file(usual(name, sizeof(name), geteuid(), "")), 0);
	usual(stale, sizeof(stale), geteuid(), ".dead01");
	usual(busy, sizeof(busy), geteuid(), ".busy01");
	assert_int_equal(mkdir(stale, 0700), 0);
	assert_int_equal(mkdir(busy, 0700), 0);
	snprintf(sock, sizeof(sock), "%s/%d.sock", stale, (int)dead);
	assert_int_equal(squat_file(sock), 0);
	/* Another process of ours already fell back here: start afresh. */
	pid_t child = fork();
	assert_true(child >= 0);
	if (child == 0)
		_exit(xp_sockdir_prepare(path, sizeof(path)) == 0 ? 0 : 1);
	int status;
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_int_equal(status, 0);
	assert_int_equal(access(stale, F_OK), -1);
	assert_int_equal(access(busy, F_OK), 0);
}

/* A socket bound at path: listening (returns its descriptor), or left
 * behind by a process that is gone (returns -1, the file stays). */
static int socket_at(const char *path, int listening)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	if (listening) {
		assert_int_equal(listen(fd, 1), 0);
		return fd;
	}
	close(fd);
	return -1;
}

/* A pid nobody has in our namespace (an exited child's). */
static pid_t dead_pid(void)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(0);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	return pid;
}

/* An agent of another pid namespace listens under a pid that means
 * nothing here: its socket stays.  One nobody listens on goes. */
static void test_only_sockets_nobody_listens_on_are_swept(void **state)
{
	(void)state;
	char dir[128], live[160], stale[160], path[108];
	usual(dir, sizeof(dir), geteuid(), "");
	assert_int_equal(mkdir(dir, 0700), 0);
	snprintf(live, sizeof(live), "%s/%d.sock", dir, (int)dead_pid());
	snprintf(stale, sizeof(stale), "%s/%d.sock", dir, (int)dead_pid());
	int fd = socket_at(live, 1);
	socket_at(stale, 0);
	assert_int_equal(xp_sockdir_prepare(path, sizeof(path)), 0);
	assert_int_equal(access(live, F_OK), 0);
	assert_int_equal(access(stale, F_OK), -1);
	close(fd);
}

/* Our own name, held by a live socket (an agent of another pid namespace
 * with our pid there): left alone, and a name of our own beside it.  Held
 * by a stale socket: ours again. */
static void test_our_name_taken_by_a_live_socket(void **state)
{
	(void)state;
	char dir[128], ours[160], path[108], token[17];
	usual(dir, sizeof(dir), geteuid(), "");
	assert_int_equal(mkdir(dir, 0700), 0);
	snprintf(ours, sizeof(ours), "%s/%d.sock", dir, (int)getpid());
	int fd = socket_at(ours, 1);
	assert_int_equal(xp_sockdir_prepare(path, sizeof(path)), 0);
	char want[160];
	snprintf(want, sizeof(want), "%s/%d.", dir, (int)getpid());
	assert_int_equal(strncmp(path, want, strlen(want)), 0);
	assert_int_equal(sscanf(path + strlen(want), "%16[0-9a-f]", token), 1);
	assert_int_equal(strlen(token), 16);
	assert_string_equal(path + strlen(want) + 16, ".sock");
	assert_int_equal(access(ours, F_OK), 0);
	close(fd);
	assert_int_equal(xp_sockdir_prepare(path, sizeof(path)), 0);
	assert_string_equal(path, ours);
	assert_int_equal(access(ours, F_OK), -1); /* the stale one went */
}

/* A file in the euid's directory only while that uid may attach to us:
 * after root's setuid(65534) the process is not dumpable, uid 65534 may
 * not attach, so it must not hold the file either. */
static void test_file_only_where_its_uid_may_attach(void **state)
{
	(void)state;
	assert_int_equal(xp_sockdir_file_is_safe(), 1);
	if (geteuid() != 0)
		skip();
	pid_t child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		if (setgroups(0, NULL) != 0 || setgid(NOBODY) != 0 || setuid(NOBODY) != 0)
			_exit(10);
		if (xp_sockdir_file_is_safe() != 0)
			_exit(11); /* not dumpable: abstract */
		if (prctl(PR_SET_DUMPABLE, 1) != 0 || xp_sockdir_file_is_safe() != 1)
			_exit(12); /* dumpable again: uid 65534 may attach */
		_exit(0);
	}
	int status;
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_int_equal(status, 0);
}

/* .xprobes-EUID/PID.TOKEN.sock, the token new each time. */
static void test_abstract_names(void **state)
{
	(void)state;
	char a[108], b[108], want[64], token[17];
	assert_int_equal(xp_sockdir_abstract(a, sizeof(a)), 0);
	assert_int_equal(xp_sockdir_abstract(b, sizeof(b)), 0);
	snprintf(want, sizeof(want), ".xprobes-%u/%d.", (unsigned)geteuid(), (int)getpid());
	assert_int_equal(strncmp(a, want, strlen(want)), 0);
	assert_int_equal(sscanf(a + strlen(want), "%16[0-9a-f]", token), 1);
	assert_string_equal(a + strlen(want) + 16, ".sock");
	assert_string_not_equal(a, b);
	assert_int_equal(xp_sockdir_abstract(a, 20), -ENAMETOOLONG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_usual_directory, setup, teardown),
		cmocka_unit_test_setup_teardown(test_squatted_by_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_squatted_by_symlink, setup, teardown),
		cmocka_unit_test_setup_teardown(test_squatted_by_open_directory, setup, teardown),
		cmocka_unit_test_setup_teardown(test_squatted_by_another_user, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fallback_reused_then_removed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stale_fallbacks_swept, setup, teardown),
		cmocka_unit_test_setup_teardown(test_only_sockets_nobody_listens_on_are_swept, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_our_name_taken_by_a_live_socket, setup, teardown),
		cmocka_unit_test(test_file_only_where_its_uid_may_attach),
		cmocka_unit_test(test_abstract_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
