/* SPDX-License-Identifier: MIT */
/* Control-protocol framing, over a real socketpair. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "unit.h"
#include "base/base.h"

static int sv[2];

static int setup(void **state)
{
	(void)state;
	return socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
}

static int teardown(void **state)
{
	(void)state;
	close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
	return 0;
}

static void test_round_trip(void **state)
{
	(void)state;
	char *buf;
	size_t len;
	assert_int_equal(xp_send_frame(sv[0], "sites *:foo", 11), 0);
	assert_int_equal(xp_send_frame(sv[0], "", 0), 0);
	assert_int_equal(xp_recv_frame(sv[1], &buf, &len, 100), 0);
	assert_int_equal(len, 11);
	assert_string_equal(buf, "sites *:foo");
	free(buf);
	assert_int_equal(xp_recv_frame(sv[1], &buf, &len, 100), 0);
	assert_int_equal(len, 0);
	assert_string_equal(buf, "");
	free(buf);
}

static void test_oversized_frame_is_refused_unread(void **state)
{
	(void)state;
	unsigned char hdr[4] = { 0xff, 0xff, 0xff, 0x7f };
	char *buf;
	size_t len;
	assert_int_equal(write(sv[0], hdr, 4), 4);
	assert_int_equal(xp_recv_frame(sv[1], &buf, &len, XP_MAX_REQUEST), -2);
	assert_null(buf);
}

static void test_clean_eof(void **state)
{
	(void)state;
	char *buf;
	size_t len;
	close(sv[0]);
	sv[0] = -1;
	assert_int_equal(xp_recv_frame(sv[1], &buf, &len, 100), -1);
	assert_int_equal(errno, 0);
	sv[0] = dup(sv[1]); /* keep teardown simple */
}

static void test_truncated_frame(void **state)
{
	(void)state;
	unsigned char partial[6] = { 10, 0, 0, 0, 'a', 'b' };
	char *buf;
	size_t len;
	assert_int_equal(write(sv[0], partial, sizeof(partial)), (ssize_t)sizeof(partial));
	close(sv[0]);
	sv[0] = dup(sv[1]);
	assert_int_equal(xp_recv_frame(sv[1], &buf, &len, 100), -1);
	assert_null(buf);
}

static void test_send_to_closed_peer_does_not_raise_sigpipe(void **state)
{
	(void)state;
	close(sv[1]);
	sv[1] = -1;
	/* Would kill the process with SIGPIPE without MSG_NOSIGNAL. */
	assert_int_equal(xp_send_frame(sv[0], "hello", 5), -1);
	assert_int_equal(errno, EPIPE);
}

static void test_socket_path(void **state)
{
	(void)state;
	char p[108];
	unsetenv("XPROBES_RUNDIR");
	assert_int_equal(xp_socket_path(p, sizeof(p), 1000, 42), 0);
	assert_string_equal(p, "/tmp/.xprobes-1000/42.sock");
	setenv("XPROBES_RUNDIR", "/run/x", 1);
	assert_int_equal(xp_socket_path(p, sizeof(p), 0, 7), 0);
	assert_string_equal(p, "/run/x/.xprobes-0/7.sock");
	char small[10];
	assert_int_equal(xp_socket_path(small, sizeof(small), 0, 7), -1);
	unsetenv("XPROBES_RUNDIR");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_oversized_frame_is_refused_unread, setup, teardown),
		cmocka_unit_test_setup_teardown(test_clean_eof, setup, teardown),
		cmocka_unit_test_setup_teardown(test_truncated_frame, setup, teardown),
		cmocka_unit_test_setup_teardown(test_send_to_closed_peer_does_not_raise_sigpipe, setup, teardown),
		cmocka_unit_test(test_socket_path),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
