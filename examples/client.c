/* SPDX-License-Identifier: MIT */
/* Traffic for the example server: C connections, N requests each.
 *
 *   ./client [-p PORT] [-c CONNS] [-n REQUESTS] [-b BINARY_CONNS]
 *
 * Waits for every reply, so when it exits the server has handled (and
 * its sites have seen) every request.  Prints what it sent.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int connect_to(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		perror("client: connect");
		exit(1);
	}
	return fd;
}

static void expect_reply(int fd)
{
	char c;
	do {
		if (read(fd, &c, 1) != 1) {
			fprintf(stderr, "client: server closed the connection\n");
			exit(1);
		}
	} while (c != '\n');
}

int main(int argc, char **argv)
{
	int port = 11311, conns = 4, reqs = 100, binary = 1, opt;
	long gets = 0, sets = 0;

	while ((opt = getopt(argc, argv, "p:c:n:b:")) != -1) {
		if (opt == 'p')
			port = atoi(optarg);
		else if (opt == 'c')
			conns = atoi(optarg);
		else if (opt == 'n')
			reqs = atoi(optarg);
		else if (opt == 'b')
			binary = atoi(optarg);
		else {
			fprintf(stderr, "usage: %s [-p PORT] [-c CONNS] [-n REQS] [-b BINARY_CONNS]\n", argv[0]);
			return 2;
		}
	}
	for (int c = 0; c < conns; c++) {
		int fd = connect_to(port);
		for (int i = 0; i < reqs; i++) {
			char line[64];
			int n;
			if (c < binary && i == 0)
				n = snprintf(line, sizeof(line), "\x80PING\n");
			else if (i % 4 == 0)
				n = snprintf(line, sizeof(line), "SET key:%d value\n", i % 7);
			else
				n = snprintf(line, sizeof(line), "GET key:%d\n", i % 7);
			if (line[0] == 'S')
				sets++;
			else if (line[0] == 'G')
				gets++;
			if (write(fd, line, (size_t)n) != n) {
				perror("client: write");
				return 1;
			}
			expect_reply(fd);
		}
		close(fd);
	}
	printf("sent %d connections, %ld GET, %ld SET\n", conns, gets, sets);
	return 0;
}
