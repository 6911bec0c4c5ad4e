/* SPDX-License-Identifier: MIT */
/* The frame as text: -C blocks for logs and --json lines (also what the
 * UI's W key writes).
 *
 * Keys are their key text everywhere (tools/common/keytext.c): UTF-8 as
 * it is, other bytes and controls \xHH, a backslash \\; the JSON says
 * with "key_escaped" when that text must be reversed to get the bytes. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "core.h"

static const char *const cmd_names[MC_NCMD] = {
	[MC_GET_HIT] = "get_hits", [MC_GET_MISS] = "get_misses", [MC_SET] = "sets",
	[MC_ADD] = "adds", [MC_REPLACE] = "replaces", [MC_APPEND] = "appends",
	[MC_PREPEND] = "prepends", [MC_CAS] = "cas", [MC_TOUCH] = "touches",
	[MC_INCR] = "incrs", [MC_DECR] = "decrs", [MC_DELETE] = "deletes",
};

/* A double as JSON: finite, short; null for "none". */
static void json_num(double v, int none, FILE *out)
{
	if (none || v != v)
		fputs("null", out);
	else
		fprintf(out, "%.3f", v);
}

static double now_s(void)
{
	struct timeval tv;
	gettimeofday(&tv, NULL);
	return (double)tv.tv_sec + tv.tv_usec / 1e6;
}

static size_t shown(const struct mctop_frame *f, size_t rows)
{
	return rows && rows < f->nkeys ? rows : f->nkeys;
}

int mctop_print_json(const struct mctop_frame *f, size_t rows, FILE *out)
{
	fprintf(out, "{\"time_s\":%.3f,\"pid\":%d,\"target\":", now_s(), (int)f->pid);
	keytext_json(out, f->target);
	fputs(",\"uptime_s\":", out);
	json_num(f->uptime_s, f->uptime_s < 0, out);
	fprintf(out, ",\"span_s\":%.9f,\"total\":%llu,\"cmds_per_s\":%.3f,\"tracked\":%llu,"
		     "\"omitted\":%llu,\"bound\":%llu,\"budget_bytes\":%zu,\"used_bytes\":%zu,"
		     "\"lat_every\":",
		f->span_s, (unsigned long long)f->total, f->cmds_per_s,
		(unsigned long long)f->tracked,
		(unsigned long long)mctop_omitted(f, mctop_members(f, shown(f, rows))),
		(unsigned long long)f->bound, f->budget, f->used);
	/* No latency at all (the watch stream): null, not a sampling rate. */
	if (f->no_lat)
		fputs("null", out);
	else
		fprintf(out, "%llu", (unsigned long long)f->lat_every); /* a count */
	fprintf(out, ",\"source\":\"%s\",\"lost\":%llu,\"keys\":[",
		f->source ? f->source : "probes", (unsigned long long)f->lost);
	for (size_t i = 0; i < shown(f, rows); i++) {
		const struct mctop_key *k = &f->keys[i];
		fputs(i ? ",{\"key\":" : "{\"key\":", out);
		keytext_json(out, k->key);
		fprintf(out, ",\"key_escaped\":%s,\"calls\":%llu,\"err\":%llu,\"size_bytes\":%lld,"
			     "\"reqs_per_s\":%.3f,\"bw_kbit_per_s\":%.3f,\"total_bytes\":%llu,\"lat_us\":",
			k->key_escaped ? "true" : "false", (unsigned long long)k->calls,
			(unsigned long long)k->err, (long long)k->objsize, k->reqs, k->bw_kbps,
			(unsigned long long)k->bytes);
		json_num(k->lat_us, k->lat_us < 0, out);
		fprintf(out, ",\"first_ns\":%llu,\"clients\":%llu", (unsigned long long)k->first_ns,
			(unsigned long long)k->clients);
		for (int c = 0; c < MC_NCMD; c++)
			fprintf(out, ",\"%s\":%llu", cmd_names[c], (unsigned long long)k->ncmd[c]);
		if (f->no_lat) { /* no latency measured: no histogram either */
			fputs(",\"lat_hist_ns\":null}", out);
			continue;
		}
		fputs(",\"lat_hist_ns\":[", out);
		for (int h = 0; h < MCTOP_HIST; h++)
			fprintf(out, "%s%llu", h ? "," : "", (unsigned long long)k->hist[h]);
		fputs("]}", out);
	}
	fputs("]}\n", out);
	return fflush(out) == 0 && !ferror(out) ? 0 : -1;
}

/* Seconds as "3d04h", "2h05m", "4m07s" or "12s". */
static void fmt_uptime(double s, char *out, size_t outsz)
{
	if (s < 0) {
		snprintf(out, outsz, "?");
		return;
	}
	unsigned long long t = (unsigned long long)s;
	if (t >= 86400)
		snprintf(out, outsz, "%llud%02lluh", t / 86400, t % 86400 / 3600);
	else if (t >= 3600)
		snprintf(out, outsz, "%lluh%02llum", t / 3600, t % 3600 / 60);
	else if (t >= 60)
		snprintf(out, outsz, "%llum%02llus", t / 60, t % 60);
	else
		snprintf(out, outsz, "%llus", t);
}

int mctop_print_block(const struct mctop_frame *f, size_t rows, FILE *out)
{
	char when[32], up[32];
	time_t t = time(NULL);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", localtime(&t));
	fmt_uptime(f->uptime_s, up, sizeof(up));
	fprintf(out, "%s  %s (pid %d)  up %s  cmds/s %.1f  total %llu  tracked %llu  "
		     "omitted %llu  bound %llu  ",
		when, f->target, (int)f->pid, up, f->cmds_per_s, (unsigned long long)f->total,
		(unsigned long long)f->tracked,
		(unsigned long long)mctop_omitted(f, mctop_members(f, shown(f, rows))),
		(unsigned long long)f->bound);
	if (f->no_lat)
		fputs("lat -", out);
	else
		fprintf(out, "lat 1/%llu", (unsigned long long)f->lat_every);
	fprintf(out, "  source: %s", f->source ? f->source : "probes");
	if (f->source && strcmp(f->source, "probes") != 0)
		fprintf(out, "  lost %llu", (unsigned long long)f->lost);
	fputc('\n', out);
	/* The key column fits the longest key shown (escaped binary keys run
	 * long), within reason: a longer one is printed whole, pushing its
	 * line out (a log keeps every key entire).  Widths are terminal
	 * columns (a CJK character takes two, a combining accent none) so the
	 * numbers stay in line. */
	int width = 30;
	for (size_t i = 0; i < shown(f, rows); i++) {
		int w = keytext_width(f->keys[i].key);
		if (w > width)
			width = w < 80 ? w : 80;
	}
	char key[2 * MCTOP_KEY_ESCAPED];
	fprintf(out, "%s %8s %9s %9s %10s %9s %9s %8s\n",
		keytext_pad(key, sizeof(key), "MEMCACHED KEY", width), "CALLS",
		"OBJSIZE", "REQ/S", "BW(kbps)", "TOTAL", "LAT(us)", "ERR");
	for (size_t i = 0; i < shown(f, rows); i++) {
		const struct mctop_key *k = &f->keys[i];
		char size[24] = "-", lat[24] = "-";
		if (k->objsize >= 0)
			snprintf(size, sizeof(size), "%lld", (long long)k->objsize);
		if (k->lat_us >= 0)
			snprintf(lat, sizeof(lat), "%.1f", k->lat_us);
		int kw = keytext_width(k->key);
		fprintf(out, "%s %8llu %9s %9.1f %10.1f %9llu %9s %8llu\n",
			keytext_pad(key, sizeof(key), k->key, kw > width ? kw : width),
			(unsigned long long)k->calls, size, k->reqs, k->bw_kbps,
			(unsigned long long)k->bytes, lat, (unsigned long long)k->err);
	}
	fputc('\n', out);
	return fflush(out) == 0 && !ferror(out) ? 0 : -1;
}
