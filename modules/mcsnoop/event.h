/* SPDX-License-Identifier: MIT */
/* mcsnoop's event record: one memcached command, as the probe
 * module writes it into a thread's ring (modules/mcsnoop/ring.h) and
 * prints it for `read`.  Fixed size, so a ring is a plain array. */
#ifndef MCSNOOP_EVENT_H
#define MCSNOOP_EVENT_H

#include <stdint.h>

#define MCSNOOP_KEY_MAX 250 /* memcached's KEY_MAX_LENGTH */

/* The command__* site that fired. */
enum mcsnoop_cmd {
	MCS_GET, MCS_SET, MCS_ADD, MCS_REPLACE, MCS_APPEND, MCS_PREPEND, MCS_CAS,
	MCS_TOUCH, MCS_INCR, MCS_DECR, MCS_DELETE, MCS_NCMD
};

/* What the site's size says happened (memcached passes -1 on a miss or a
 * failed store; incr, decr and delete fire on hits only; cas always
 * passes the item's size, so its outcome is not known). */
enum mcsnoop_result { MCS_HIT, MCS_MISS, MCS_STORED, MCS_NOT_STORED, MCS_UNKNOWN, MCS_NRESULT };

static const char *const mcsnoop_cmd_names[MCS_NCMD] = {
	"get", "set", "add", "replace", "append", "prepend", "cas",
	"touch", "incr", "decr", "delete",
};

static const char *const mcsnoop_result_names[MCS_NRESULT] = {
	"hit", "miss", "stored", "not_stored", "unknown",
};

struct mcsnoop_event {
	uint64_t time_ns;   /* CLOCK_MONOTONIC when the command__* site fired */
	int64_t latency_ns; /* process__command__start of its batch to _end; -1 unknown */
	int32_t tid;        /* kernel thread id of the memcached worker */
	int32_t connid;     /* memcached's connection id: the client socket's fd */
	int32_t size;       /* value bytes (without "\r\n"), -1 none */
	uint8_t cmd;        /* enum mcsnoop_cmd */
	uint8_t result;     /* enum mcsnoop_result */
	uint16_t keylen;    /* bytes of key used, at most MCSNOOP_KEY_MAX */
	char key[MCSNOOP_KEY_MAX];
};

#endif
