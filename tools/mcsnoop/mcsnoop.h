/* SPDX-License-Identifier: MIT */
/* mcsnoop: one line per memcached command.
 *
 *   main.c     options (getopt_long), signals, the polling loop
 *   attach.c   loads modules/mcsnoop.so and unloads it again (finding
 *              memcached and its agent: tools/common/attach.c)
 *   event.c    the module's `read` reply parsed, filtered and printed
 *   watch.c    a memcached without probe sites: its own watch stream
 *
 * The module's format is documented at the top of modules/mcsnoop.c.
 */
#ifndef MCSNOOP_H
#define MCSNOOP_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "../common/common.h"

#define SNOOP_KEY_MAX 250
#define SNOOP_KEY_ESCAPED (4 * SNOOP_KEY_MAX + 1)

/* One event line of `read`. */
struct snoop_event {
	uint64_t time_ns;         /* the target's CLOCK_MONOTONIC */
	int tid, conn;            /* tid -1: unknown (the watch stream) */
	char cmd[48], result[12]; /* cmd: a key text (the watch stream's) */
	long size;                /* -1: none */
	long long lat_ns;         /* -1: unknown */
	unsigned keylen;
	char key[SNOOP_KEY_ESCAPED]; /* the key text (tools/common/keytext.c) */
	int key_escaped;             /* the text is not the key's bytes */
};

/* 0 and *e filled, or -1 if line is not an event line. */
int snoop_parse_event(const char *line, struct snoop_event *e);
/* The closing "end ..." line: 0 with its counts, or -1. */
int snoop_parse_end(const char *line, unsigned long long *dropped, int *more);

struct snoop_filter {
	unsigned cmd_mask;    /* bits by snoop_cmd_index; 0: every command */
	const char *key_glob; /* fnmatch(3) on the key text; NULL: all */
};

/* "get,set,...": 0 and *mask, or -1 naming the unknown word on stderr. */
int snoop_cmd_mask(const char *list, unsigned *mask);
int snoop_match(const struct snoop_filter *f, const struct snoop_event *e);

void snoop_print_header(FILE *out);
/* wall_offset_ns: CLOCK_REALTIME - CLOCK_MONOTONIC, to show wall time. */
void snoop_print_text(const struct snoop_event *e, int64_t wall_offset_ns, FILE *out);
void snoop_print_json(const struct snoop_event *e, int64_t wall_offset_ns, FILE *out);

/* ---- attach.c ---- */

/* The module to load: path if given, else modules/mcsnoop.so next to
 * this program; malloc'd, or NULL after a message. */
char *snoop_module_path(const char *path);
/* Load it for this session.  *ours: 1 if we loaded it (unload it at the
 * end), 0 if it was loaded already (leave it).  0, or -1 after a message. */
int snoop_load(struct session *s, const char *path, int *ours);
void snoop_unload(struct session *s, const char *path);
/* The name the agent knows the module by: path's base name. */
const char *snoop_module_name(const char *path);

/* ---- watch.c: a memcached without probe sites ---- */

struct snoop_watch_opts {
	unsigned port; /* memcached's TCP port, 0: the one it listens on */
	const struct snoop_filter *filter;
	int json;
	double duration; /* 0: until interrupted */
	long count;      /* 0: no limit */
};

/* Print memcached's watch stream as events until a signal, -d or -n:
 * the exit status. */
int snoop_watch(pid_t pid, const struct snoop_watch_opts *o);

#endif
