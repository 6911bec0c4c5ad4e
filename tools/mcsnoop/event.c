/* SPDX-License-Identifier: MIT */
/* The module's `read` reply, one line at a time: parsed, filtered, and
 * printed as text or JSON. */
#define _GNU_SOURCE
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mcsnoop.h"

/* The module's command names, in the order of the -c mask bits. */
static const char *const cmd_names[] = {
	"get", "set", "add", "replace", "append", "prepend", "cas",
	"touch", "incr", "decr", "delete",
};
#define NCMD (sizeof(cmd_names) / sizeof(cmd_names[0]))

static int cmd_index(const char *name, size_t len)
{
	for (unsigned i = 0; i < NCMD; i++)
		if (strlen(cmd_names[i]) == len && strncmp(cmd_names[i], name, len) == 0)
			return (int)i;
	return -1;
}

int snoop_parse_event(const char *line, struct snoop_event *e)
{
	int n = -1;
	if (sscanf(line, "%llu %d %d %11s %11s %ld %lld %u %n", (unsigned long long *)&e->time_ns,
		   &e->tid, &e->conn, e->cmd, e->result, &e->size, &e->lat_ns, &e->keylen, &n) != 8 ||
	    n < 0)
		return -1;
	if (cmd_index(e->cmd, strlen(e->cmd)) < 0 || strspn(e->result, "abcdefghijklmnopqrstuvwxyz_") != strlen(e->result))
		return -1;
	/* "%u %n" skipped the space before the key (and nothing else: the
	 * key holds no white space). */
	size_t len = strlen(line + n);
	if (len >= sizeof(e->key) || e->keylen > SNOOP_KEY_MAX)
		return -1;
	/* The module's escaping (for its space-separated lines) becomes the
	 * key text every tool shows. */
	e->key_escaped = keytext_from_module(line + n, e->key, sizeof(e->key), 0);
	return 0;
}

int snoop_parse_end(const char *line, unsigned long long *dropped, int *more)
{
	unsigned long events;
	return sscanf(line, "end events=%lu dropped=%llu more=%d", &events, dropped, more) == 3
		       ? 0 : -1;
}

int snoop_cmd_mask(const char *list, unsigned *mask)
{
	*mask = 0;
	for (const char *p = list;;) {
		size_t len = strcspn(p, ",");
		int i = cmd_index(p, len);
		if (i < 0) {
			fprintf(stderr, "mcsnoop: -c: unknown command '%.*s' (known: get, set, add, "
					"replace, append, prepend, cas, touch, incr, decr, delete)\n",
				(int)len, p);
			return -1;
		}
		*mask |= 1u << i;
		if (!p[len])
			return 0;
		p += len + 1;
	}
}

int snoop_match(const struct snoop_filter *f, const struct snoop_event *e)
{
	if (f->cmd_mask) {
		int i = cmd_index(e->cmd, strlen(e->cmd));
		if (i < 0 || !(f->cmd_mask & (1u << i)))
			return 0;
	}
	/* On the key text, as shown.  FNM_NOESCAPE: a backslash in the glob
	 * is the one of an escaped byte (-k 'a\x01*'); [*] matches a literal
	 * star. */
	return !f->key_glob || fnmatch(f->key_glob, e->key, FNM_NOESCAPE) == 0;
}

void snoop_print_header(FILE *out)
{
	fprintf(out, "%-15s %7s %5s %-7s %-24s %7s %-10s %9s\n", "TIME", "THREAD", "CONN", "CMD",
		"KEY", "SIZE", "RESULT", "LAT(us)");
}

/* The event's wall-clock time, as seconds and nanoseconds. */
static struct timespec wall(const struct snoop_event *e, int64_t wall_offset_ns)
{
	int64_t ns = (int64_t)e->time_ns + wall_offset_ns;
	return (struct timespec){ .tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000 };
}

void snoop_print_text(const struct snoop_event *e, int64_t wall_offset_ns, FILE *out)
{
	struct timespec t = wall(e, wall_offset_ns);
	struct tm tm;
	char when[16], size[24], lat[32], key[2 * SNOOP_KEY_ESCAPED];
	localtime_r(&t.tv_sec, &tm);
	strftime(when, sizeof(when), "%H:%M:%S", &tm);
	if (e->size < 0)
		strcpy(size, "-");
	else
		snprintf(size, sizeof(size), "%ld", e->size);
	if (e->lat_ns < 0)
		strcpy(lat, "-");
	else
		snprintf(lat, sizeof(lat), "%.1f", (double)e->lat_ns / 1000.0);
	char tid[16] = "-";
	if (e->tid >= 0)
		snprintf(tid, sizeof(tid), "%d", e->tid);
	/* At least 24 terminal columns: a wide or combining character counts
	 * as it shows, and a longer key pushes the rest out, whole. */
	int w = keytext_width(e->key);
	fprintf(out, "%s.%06ld %7s %5d %-7s %s %7s %-10s %9s\n", when, t.tv_nsec / 1000, tid,
		e->conn, e->cmd, keytext_pad(key, sizeof(key), e->key, w > 24 ? w : 24), size,
		e->result, lat);
}

void snoop_print_json(const struct snoop_event *e, int64_t wall_offset_ns, FILE *out)
{
	struct timespec t = wall(e, wall_offset_ns);
	fprintf(out, "{\"time_ns\":%llu,\"time_s\":%lld.%06ld,\"thread\":",
		(unsigned long long)e->time_ns, (long long)t.tv_sec, t.tv_nsec / 1000);
	if (e->tid < 0) /* the watch stream does not say */
		fputs("null", out);
	else
		fprintf(out, "%d", e->tid);
	fprintf(out, ",\"conn\":%d,\"cmd\":", e->conn);
	keytext_json(out, e->cmd);
	fputs(",\"key\":", out);
	keytext_json(out, e->key);
	fprintf(out, ",\"key_escaped\":%s,\"key_bytes\":%u,\"size_bytes\":",
		e->key_escaped ? "true" : "false", e->keylen);
	if (e->size < 0)
		fputs("null", out);
	else
		fprintf(out, "%ld", e->size);
	fprintf(out, ",\"result\":\"%s\",\"lat_ns\":", e->result);
	if (e->lat_ns < 0)
		fputs("null", out);
	else
		fprintf(out, "%lld", e->lat_ns);
	fputs("}\n", out);
}
