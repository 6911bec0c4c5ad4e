/* SPDX-License-Identifier: MIT */
/* A small multi-threaded line server, instrumented with XProbes sites.
 *
 *   ./server [-p PORT] [-t THREADS]
 *
 * Text protocol, one request per line: "GET key", "SET key value",
 * "PING".  A line starting with the byte 0x80 is taken as "binary"
 * (the connection's protocol is remembered), only to give the example
 * module something to tell apart.  Each worker thread serves one
 * connection at a time.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <xprobes/site.h>

#include "server.h"

static int listen_fd;

static void handle_request(struct conn *c, const char *line, size_t len)
{
	char reply[64];

	c->requests++;
	XPROBES_SITE(example_request, (const struct conn *, const char *, size_t),
		     (c, line, len));
	if (len >= 4 && memcmp(line, "PING", 4) == 0)
		snprintf(reply, sizeof(reply), "PONG\n");
	else if (len >= 4 && memcmp(line, "GET ", 4) == 0)
		snprintf(reply, sizeof(reply), "NOT_FOUND\n");
	else if (len >= 4 && memcmp(line, "SET ", 4) == 0)
		snprintf(reply, sizeof(reply), "STORED\n");
	else
		snprintf(reply, sizeof(reply), "ERROR\n");
	if (write(c->fd, reply, strlen(reply)) < 0)
		return;
}

static void serve(struct conn *c)
{
	char buf[4096];
	size_t have = 0;

	for (;;) {
		ssize_t n = read(c->fd, buf + have, sizeof(buf) - have);
		if (n <= 0)
			break;
		c->bytes_in += (uint64_t)n;
		if (have == 0 && (unsigned char)buf[0] == 0x80)
			c->proto = PROTO_BINARY;
		have += (size_t)n;
		char *start = buf, *nl;
		while ((nl = memchr(start, '\n', have - (size_t)(start - buf)))) {
			handle_request(c, start, (size_t)(nl - start));
			start = nl + 1;
		}
		have -= (size_t)(start - buf);
		memmove(buf, start, have);
		if (have == sizeof(buf))
			have = 0; /* overlong line: drop it */
	}
}

static void *worker(void *arg)
{
	(void)arg;
	for (;;) {
		struct sockaddr_in peer;
		socklen_t plen = sizeof(peer);
		int fd = accept(listen_fd, (struct sockaddr *)&peer, &plen);
		if (fd < 0) {
			if (errno == EINTR)
				continue;
			return NULL;
		}
		struct conn c = { .fd = fd, .proto = PROTO_ASCII };
		inet_ntop(AF_INET, &peer.sin_addr, c.peer, sizeof(c.peer));
		serve(&c);
		XPROBES_SITE(example_conn_release, (const struct conn *), (&c));
		close(fd);
	}
}

int main(int argc, char **argv)
{
	int port = 11311, threads = 4, opt;

	while ((opt = getopt(argc, argv, "p:t:")) != -1) {
		if (opt == 'p')
			port = atoi(optarg);
		else if (opt == 't')
			threads = atoi(optarg);
		else {
			fprintf(stderr, "usage: %s [-p PORT] [-t THREADS]\n", argv[0]);
			return 2;
		}
	}
	signal(SIGPIPE, SIG_IGN);
	listen_fd = socket(AF_INET, SOCK_STREAM, 0);
	int one = 1;
	setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (bind(listen_fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(listen_fd, 128)) {
		fprintf(stderr, "server: cannot listen on 127.0.0.1:%d: %s\n", port, strerror(errno));
		return 1;
	}
	printf("listening on 127.0.0.1:%d with %d threads (pid %d)\n", port, threads, (int)getpid());
	fflush(stdout);
	pthread_t *t = calloc((size_t)threads, sizeof(*t));
	for (int i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	return 0;
}
