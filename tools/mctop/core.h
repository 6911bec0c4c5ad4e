/* SPDX-License-Identifier: MIT */
/* mctop's insides, shared by attach.c, sample.c, raw.c, prefix.c and
 * main.c; the front ends see only mctop.h. */
#ifndef MCTOP_CORE_H
#define MCTOP_CORE_H

#include <regex.h>

#include "../common/common.h"
#include "mctop.h"

/* ---- raw.c: one "top N raw" answer, as the module wrote it ---- */

struct mctop_raw_key {
	char key[MCTOP_KEY_ESCAPED]; /* still escaped */
	uint64_t calls, err;
	int64_t objsize;
	uint64_t bytes, lat_sum_ns, lat_n, first_ns, clients;
	uint64_t ncmd[MC_NCMD];
	uint64_t hist[MCTOP_HIST];
};

struct mctop_raw {
	uint64_t now_ns, total, tracked, untracked, threads, counters, bytes, budget, bound;
	uint64_t lat_every; /* 1 when the module does not say (an older one); 0: no latency */
	uint64_t lost;      /* commands the source lost (memcached's skipped watch lines) */
	struct mctop_raw_key *keys; /* in the module's order */
	size_t nkeys;
	struct mctop_raw_key **by_name; /* the same keys sorted by key, for lookups */
};

/* Parse text into *r (which it overwrites).  0, or -1 with the reason,
 * one sentence, in why. */
int mctop_raw_parse(const char *text, struct mctop_raw *r, char *why, size_t whysz);
void mctop_raw_free(struct mctop_raw *r);
/* The key line for key in r, or NULL. */
const struct mctop_raw_key *mctop_raw_find(const struct mctop_raw *r, const char *key);

/* The names -c takes and the module's by= understands, in enum mctop_cmd
 * order of bits: "get" covers MC_GET_HIT and MC_GET_MISS.  Parses a
 * comma list into a mask; 0, or -1 naming the bad word in why. */
int mctop_cmd_mask(const char *list, unsigned *mask, char *why, size_t whysz);
/* The by= argument for mask ("by=get,set"), or "" for 0. */
void mctop_cmd_by(unsigned mask, char *out, size_t outsz);

/* ---- prefix.c: --prefix ---- */

struct mctop_prefix {
	const char *pat;
	int is_regex; /* PAT holds '(': POSIX ERE, the first capture names the group */
	regex_t re;
};

/* Compile pat; 0, or -1 with the reason in why. */
int mctop_prefix_init(struct mctop_prefix *p, const char *pat, char *why, size_t whysz);
void mctop_prefix_free(struct mctop_prefix *p);
/* The group of an escaped key into out; 0, or -1 if it belongs to none
 * (it is then shown as itself). */
int mctop_prefix_group(const struct mctop_prefix *p, const char *key, char *out, size_t outsz);
/* Merge f's keys into their groups, in place. */
int mctop_prefix_apply(const struct mctop_prefix *p, struct mctop_frame *f);

/* ---- attach.c and sample.c: the session ---- */

struct mctop {
	struct session s;
	struct mctop_opts o;
	char module[4096];   /* the loaded module's path: commands name it so */
	int unload_at_close; /* loaded by us with a plain load (an old agent) */
	int reloading;       /* loading it again after it went (attach.c) */
	char target[64];
	unsigned long long boot_ticks; /* target's start time, clock ticks after boot */
	int have_prefix;
	struct mctop_prefix prefix;
	struct mctop_watch *watch; /* no probe sites: memcached's watch stream instead */
	struct mctop_raw base; /* the look at attach: --cumulative's reference */
	struct mctop_raw prev; /* the previous look: the interval's reference */
	/* Called with every frame mctop_sample makes (sorted by calls). */
	void (*on_frame)(void *arg, const struct mctop_frame *f);
	void *on_frame_arg;
};

/* attach.c: find memcached, connect, load the module; NULL after a
 * message.  mctop_open (sample.c) then takes the first look, the one the
 * rates start from: attach.c never calls up into sample.c. */
struct mctop *mctop_attach(const struct mctop_opts *o);
/* One module command; the reply text (malloc'd) or NULL after a message. */
char *mctop_call(struct mctop *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* sample.c: take a look into *r. 0, or -1 after a message. */
int mctop_look(struct mctop *m, struct mctop_raw *r);

/* ---- watch.c: the fallback on a memcached without probe sites ---- */

struct mctop_watch;
/* Connect to pid's memcached (port 0: the one it listens on), start its
 * watch stream and a thread counting it within budget bytes (0: the
 * default).  NULL after a message. */
struct mctop_watch *mctop_watch_start(pid_t pid, unsigned port, size_t budget);
/* Stop the thread and close the stream (memcached stops logging for us). */
void mctop_watch_stop(struct mctop_watch *mw);
/* The busiest rows keys (by mask's commands, 0: all) as a look: 0, or -1
 * after a message (the stream ended). */
int mctop_watch_look(struct mctop_watch *mw, size_t rows, unsigned mask, struct mctop_raw *r);
void mctop_watch_reset(struct mctop_watch *mw);

/* ---- procinfo.c: header facts about the target ---- */

/* "memcached :11211" (comm and first listening TCP port); always fills. */
void mctop_target_name(pid_t pid, char *out, size_t outsz);
/* Start time in clock ticks after boot; 0 if unknown. */
unsigned long long mctop_start_ticks(pid_t pid);
/* Seconds since a start time from mctop_start_ticks; -1 if unknown. */
double mctop_uptime(unsigned long long start_ticks);

/* ---- print.c helpers used elsewhere ---- */

/* Unescape a module key (\xNN) into bytes; the length. */
size_t mctop_unescape(const char *in, unsigned char *out, size_t outsz);

#endif
