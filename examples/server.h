/* SPDX-License-Identifier: MIT */
/* The example server's connection object: what its probe sites pass. */
#ifndef EXAMPLE_SERVER_H
#define EXAMPLE_SERVER_H

#include <stddef.h>
#include <stdint.h>

enum conn_proto { PROTO_ASCII, PROTO_BINARY };

struct conn {
	int fd;
	enum conn_proto proto;
	uint64_t requests;   /* served on this connection */
	uint64_t bytes_in;
	char peer[64];
};

#endif
