/* SPDX-License-Identifier: MIT */
/* mctop's full-screen table: a top-like ncurses view of the
 * frames sample.c makes, with its keys (sort orders, selection, paging,
 * the histogram and inspect panels, W to write JSON, Z to reset, Q to
 * quit).
 *
 * The loop waits for keys with a timeout that ends at the next sample, so
 * keys act at once and refreshes stay on time.  Every exit (Q, the count
 * reached, SIGINT/SIGTERM/SIGHUP/SIGQUIT, a failed sample) leaves through
 * the one path that calls endwin(): the signal handlers only set a flag.  While
 * the screen is ours, whatever the other pieces write to a terminal's
 * stderr is kept in a temporary file and printed after endwin(), so a
 * message (the target exited...) is neither lost nor painted over the
 * table. */
#include <curses.h>
#include <errno.h>
#include <inttypes.h>
#include <langinfo.h>
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/common.h"
#include "mctop.h"

#define HEAD_ROWS 3      /* two header lines and the column names */
#define FOOT_ROWS 2      /* status line and key help */
#define KEYCOL_MIN 13      /* strlen("MEMCACHED KEY") */
#define LINE_MAX_W 2048  /* widest line we format; wider terminals are padded */
#define WAIT_SLICE_MS 250 /* longest getch wait: a signal's flag is seen within it */
#define DEFAULT_OUTPUT "mctop.json"

enum panel { PANEL_NONE, PANEL_HIST, PANEL_INSPECT };

struct ui {
	struct mctop *m;
	const struct mctop_opts *o;
	struct mctop_frame f;
	long frames;                   /* samples taken */
	enum mctop_sort sort;
	int ascending;
	size_t sel;                    /* row of the selection in f.keys */
	char sel_key[MCTOP_KEY_ESCAPED]; /* what it was, to follow it across refreshes */
	size_t first;                  /* the first row on the screen */
	int moved;                     /* the user moved off the top (j, d, G...) */
	int ascii;                     /* the terminal's locale is not UTF-8 */
	enum panel panel;
	char msg[256];                 /* status message until the next key */
	struct timespec sampled;       /* CLOCK_MONOTONIC at the last sample */
};

/* The numeric columns, right-aligned after the key. */
static const struct column {
	const char *name;
	int width;
} columns[] = {
	{ "CALLS", 8 }, { "ERR", 6 }, { "OBJSIZE", 8 }, { "REQ/S", 8 },
	{ "BW(kbps)", 9 }, { "TOTAL", 8 }, { "LAT(us)", 8 },
};
#define NCOLUMNS (sizeof columns / sizeof columns[0])

static volatile sig_atomic_t ui_signal;

static void on_signal(int sig)
{
	ui_signal = sig;
}

static double now_s(struct timespec *ts)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	if (ts)
		*ts = t;
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* ---- Formatting ---- */

/* V in at most W characters: as it is when it fits, else scaled by 1000s
 * (k, M, G, T, P, E) below 1000, with one decimal if there is room. */
static const char *human(char *out, size_t n, double v, int w, int decimals)
{
	static const char suffix[] = " kMGTPE";
	snprintf(out, n, "%.*f", decimals, v);
	if ((int)strlen(out) <= w)
		return out;
	int i = 0;
	while (i < 6 && v >= 999.95) {
		v /= 1000;
		i++;
	}
	snprintf(out, n, "%.1f%c", v, suffix[i]);
	if ((int)strlen(out) > w)
		snprintf(out, n, "%.0f%c", v, suffix[i]);
	return out;
}

/* Rates keep a decimal while they are small enough for it to matter. */
static const char *rate(char *out, size_t n, double v, int w)
{
	return human(out, n, v, w, v < 100 ? 1 : 0);
}

/* A latency in ns as "512ns", "1.0us", "32ms", "2.1s". */
static const char *duration_ns(char *out, size_t n, double ns)
{
	if (ns < 1e3)
		snprintf(out, n, "%.0fns", ns);
	else if (ns < 1e6)
		snprintf(out, n, "%.*fus", ns < 1e4 ? 1 : 0, ns / 1e3);
	else if (ns < 1e9)
		snprintf(out, n, "%.*fms", ns < 1e7 ? 1 : 0, ns / 1e6);
	else
		snprintf(out, n, "%.1fs", ns / 1e9);
	return out;
}

static const char *uptime(char *out, size_t n, double s)
{
	unsigned long t = s > 0 ? (unsigned long)s : 0;
	if (t >= 86400)
		snprintf(out, n, "%lud %02lu:%02lu:%02lu", t / 86400, t / 3600 % 24, t / 60 % 60, t % 60);
	else
		snprintf(out, n, "%02lu:%02lu:%02lu", t / 3600, t / 60 % 60, t % 60);
	return out;
}

/* KEY in at most W terminal columns (a wide character takes two, a
 * combining one none; never cut inside a character or an escape); a cut
 * key ends in '~' so it is not mistaken for a shorter one. */
static const char *fit_key(char *out, size_t n, const char *key, int w)
{
	if (w < 1)
		w = 1;
	size_t len = keytext_fit(key, w, NULL);
	if (key[len])
		len = keytext_fit(key, w - 1, NULL);
	snprintf(out, n, "%.*s%s", (int)len, key, key[len] ? "~" : "");
	return out;
}

/* The direction in words, so the label says what the rows show. */
static const char *direction(enum mctop_sort by, int ascending)
{
	if (by == SORT_NEWEST)
		return ascending ? "oldest first" : "newest first";
	return ascending ? "ascending, lowest first" : "descending, highest first";
}

/* ---- Rows, selection, pages ---- */

/* Rows the table holds: the frame's keys, at most -r of them. */
static size_t nrows(const struct ui *u)
{
	size_t n = u->f.nkeys;
	if (u->o->rows > 0 && (size_t)u->o->rows < n)
		n = (size_t)u->o->rows;
	return n;
}

static size_t page_rows(void)
{
	int r = LINES - HEAD_ROWS - FOOT_ROWS;
	return r > 0 ? (size_t)r : 1;
}

static const struct mctop_key *selected(const struct ui *u)
{
	return u->sel < nrows(u) ? &u->f.keys[u->sel] : NULL;
}

/* The selection on row (clamped), the page the one that holds it. */
static void select_row(struct ui *u, long row)
{
	size_t n = nrows(u), per = page_rows();
	if (row < 0 || n == 0)
		row = 0;
	else if ((size_t)row >= n)
		row = (long)n - 1;
	u->sel = (size_t)row;
	if (u->sel < u->first || u->sel >= u->first + per)
		u->first = u->sel / per * per;
	if (n)
		snprintf(u->sel_key, sizeof u->sel_key, "%s", u->f.keys[u->sel].key);
	else
		u->sel_key[0] = '\0';
}

/* The user's own move: from now on the view keeps its place. */
static void move_to(struct ui *u, long row)
{
	u->moved = row > 0;
	select_row(u, row);
}

/* A terminal that is not UTF-8 gets every non-ASCII byte as \xHH: the
 * same rule, only more of it escaped. */
static void to_ascii(struct mctop_frame *f)
{
	for (size_t i = 0; i < f->nkeys; i++) {
		unsigned char raw[MCTOP_KEY_ESCAPED];
		ssize_t n = keytext_to_bytes(f->keys[i].key, raw, sizeof raw);
		if (n >= 0) /* W writes these: the flag must say so */
			f->keys[i].key_escaped = keytext_from_bytes(raw, (size_t)n, f->keys[i].key,
								    sizeof f->keys[i].key, KEYTEXT_ASCII);
	}
}

/* After a new sample: sort it.  The view keeps its place: until the
 * user moves, the top row stays selected whatever key it now holds (a
 * column that changes every second, LAT, would otherwise drag the page
 * after one key); once moved, the page stays where it is and the
 * selection follows its key while that key is on the page, else keeps
 * its row. */
static void arrange(struct ui *u)
{
	if (u->ascii)
		to_ascii(&u->f);
	mctop_sort(&u->f, u->sort, u->ascending);
	size_t n = nrows(u), per = page_rows();
	if (!u->moved) {
		u->first = 0;
		select_row(u, 0);
		return;
	}
	if (u->first >= n)
		u->first = n ? (n - 1) / per * per : 0;
	for (size_t i = u->first; u->sel_key[0] && i < n && i < u->first + per; i++)
		if (strcmp(u->f.keys[i].key, u->sel_key) == 0) {
			u->sel = i;
			return;
		}
	select_row(u, u->sel < u->first ? (long)u->first : (long)u->sel);
}

/* A new order starts at its first row: that is what the user asked to see. */
static void resort(struct ui *u, enum mctop_sort by, int ascending)
{
	u->sort = by;
	u->ascending = ascending;
	mctop_sort(&u->f, by, ascending);
	u->first = 0;
	move_to(u, 0);
}

/* ---- Drawing ---- */

static void put_line(int y, const char *s, attr_t attr)
{
	if (y < 0 || y >= LINES)
		return;
	attrset(attr);
	/* Cut by terminal columns, not bytes: a line holds keys in UTF-8. */
	int w;
	mvaddnstr(y, 0, s, (int)keytext_fit(s, COLS, &w));
	if (attr & A_REVERSE) /* a bar across the whole width */
		for (int x = w; x < COLS; x++)
			mvaddch(y, x, ' ');
	attrset(A_NORMAL);
}

/* The sorted column's name is underlined; SORT_NEWEST has no column. */
static int sort_column(enum mctop_sort by)
{
	switch (by) {
	case SORT_CALLS: return 0;
	case SORT_SIZE: return 2;
	case SORT_REQS: return 3;
	case SORT_BW: return 4;
	case SORT_LAT: return 6;
	default: return -1;
	}
}

/* The numeric columns shown, a bit each: at a narrow width the ones on
 * the right go first, but never the sorted one (the order must stay
 * visible); what is left goes to the key. */
static unsigned visible_columns(const struct ui *u)
{
	int room = COLS - 2 - KEYCOL_MIN, sc = sort_column(u->sort);
	unsigned mask = 0;
	if (sc >= 0) {
		mask |= 1u << sc;
		room -= columns[sc].width + 1;
	}
	for (size_t i = 0; i < NCOLUMNS; i++)
		if (!(mask & (1u << i)) && columns[i].width + 1 <= room) {
			mask |= 1u << i;
			room -= columns[i].width + 1;
		}
	return mask;
}

/* As wide as the longest key shown (at least 24) in terminal columns, as
 * the terminal allows. */
static int key_width(const struct ui *u)
{
	int fixed = 2; /* the selection mark and its space */
	unsigned vis = visible_columns(u);
	for (size_t i = 0; i < NCOLUMNS; i++)
		if (vis & (1u << i))
			fixed += columns[i].width + 1;
	int longest = 24;
	for (size_t i = 0; i < nrows(u); i++) {
		int len = keytext_width(u->f.keys[i].key);
		if (len > longest)
			longest = len;
	}
	int w = COLS - fixed;
	if (w > longest)
		w = longest;
	if (w > LINE_MAX_W / 8)
		w = LINE_MAX_W / 8;
	return w < KEYCOL_MIN ? KEYCOL_MIN : w;
}

static void draw_header(const struct ui *u)
{
	const struct mctop_frame *f = &u->f;
	char line[LINE_MAX_W], up[32], clock[16], a[16], b[16];
	time_t t = time(NULL);
	struct tm tm;
	strftime(clock, sizeof clock, "%H:%M:%S", localtime_r(&t, &tm));
	char span[32];
	if (u->o->cumulative)
		snprintf(span, sizeof span, "since attach");
	else
		snprintf(span, sizeof span, "over %.3gs", f->span_s);
	snprintf(line, sizeof line, "mctop - %s (pid %d)  up %s  rates %s  %s  source: %s", f->target,
	         (int)f->pid, uptime(up, sizeof up, f->uptime_s), span, clock,
	         f->source ? f->source : "probes");
	put_line(0, line, A_BOLD);
	snprintf(line, sizeof line,
	         "cmds/s %s  total %s  keys tracked %" PRIu64 "  omitted %" PRIu64
	         "  error bound %" PRIu64 "  memory %.1f/%.1f MiB  LAT of 1/%" PRIu64,
	         rate(a, sizeof a, f->cmds_per_s, 8), human(b, sizeof b, (double)f->total, 9, 0),
	         f->tracked, mctop_omitted(f, mctop_members(f, nrows(u))), f->bound, f->used / 1048576.0, f->budget / 1048576.0,
	         f->lat_every);
	if (f->no_lat) /* the watch stream: no LAT, but lines it lost */
		snprintf(strstr(line, "  LAT of"), sizeof line - (size_t)(strstr(line, "  LAT of") - line),
		         "  no LAT  lost %" PRIu64, f->lost);
	put_line(1, line, A_NORMAL);
}

static void draw_columns(const struct ui *u)
{
	int kw = key_width(u), x = 2 + kw;
	unsigned vis = visible_columns(u);
	char line[LINE_MAX_W];
	int len = snprintf(line, sizeof line, "  %-*s", kw, "MEMCACHED KEY");
	for (size_t i = 0; i < NCOLUMNS; i++)
		if (vis & (1u << i))
			len += snprintf(line + len, sizeof line - len, " %*s", columns[i].width,
					columns[i].name);
	put_line(2, line, A_REVERSE);
	int sc = sort_column(u->sort);
	for (int i = 0; i < sc; i++)
		if (vis & (1u << i))
			x += columns[i].width + 1;
	if (sc >= 0 && x + 1 < COLS) {
		attrset(A_REVERSE | A_BOLD | A_UNDERLINE);
		mvaddnstr(2, x + 1, line + x + 1, columns[sc].width);
		attrset(A_NORMAL);
	}
}

static void draw_row(int y, const struct mctop_key *k, int kw, unsigned vis, int mark)
{
	char line[2 * LINE_MAX_W], key[LINE_MAX_W];
	char v[NCOLUMNS][16];
	human(v[0], sizeof v[0], (double)k->calls, columns[0].width, 0);
	human(v[1], sizeof v[1], (double)k->err, columns[1].width, 0);
	if (k->objsize < 0)
		snprintf(v[2], sizeof v[2], "-");
	else
		human(v[2], sizeof v[2], (double)k->objsize, columns[2].width, 0);
	rate(v[3], sizeof v[3], k->reqs, columns[3].width);
	rate(v[4], sizeof v[4], k->bw_kbps, columns[4].width);
	human(v[5], sizeof v[5], (double)k->bytes, columns[5].width, 0);
	if (k->lat_us < 0)
		snprintf(v[6], sizeof v[6], "-");
	else
		rate(v[6], sizeof v[6], k->lat_us, columns[6].width);
	/* The key padded by terminal columns, so the numbers line up. */
	int len = snprintf(line, sizeof line, "%c %s", mark ? '>' : ' ',
	                   keytext_pad(key, sizeof key, k->key, kw));
	for (size_t i = 0; i < NCOLUMNS; i++)
		if (vis & (1u << i))
			len += snprintf(line + len, sizeof line - len, " %*s", columns[i].width, v[i]);
	put_line(y, line, mark ? A_REVERSE : A_NORMAL);
}

static void draw_table(const struct ui *u)
{
	size_t n = nrows(u), per = page_rows(), first = u->first;
	int kw = key_width(u);
	unsigned vis = visible_columns(u);
	if (n == 0) {
		put_line(HEAD_ROWS, "  (no keys yet)", A_DIM);
		return;
	}
	for (size_t i = first; i < n && i < first + per; i++)
		draw_row(HEAD_ROWS + (int)(i - first), &u->f.keys[i], kw, vis, i == u->sel);
}

static void draw_footer(const struct ui *u)
{
	/* The keys' help, the widest form that fits: Q quit always shows. */
	static const char *const help[] = {
		("C calls S size R req/s B bw N newest L lat  T flip  j/k u/d g/G move"
		 "  H histogram  I inspect  W write  Z reset  Q quit"),
		"C S R B N L sort  T flip  j/k u/d g/G move  H hist  I inspect  W write  Z reset  Q quit",
		"C S R B N L sort  T flip  H hist  I inspect  W write  Z reset  Q quit",
		"H hist  W write  Q quit",
		"Q quit",
	};
	size_t n = nrows(u), per = page_rows();
	size_t pages = n ? (n + per - 1) / per : 1;
	const struct mctop_key *k = selected(u);
	char line[LINE_MAX_W];
	snprintf(line, sizeof line, "sort %s %s | page %zu/%zu | selected: %s",
	         mctop_sort_name(u->sort), direction(u->sort, u->ascending), u->first / per + 1,
	         pages, k ? k->key : "-");
	put_line(LINES - 2, line, A_REVERSE);
	/* A message (W's, Z's) takes the help's line until the next key: the
	 * whole width, so that a long path is not cut by the status. */
	if (u->msg[0]) {
		put_line(LINES - 1, u->msg, A_BOLD);
		return;
	}
	size_t i = 0;
	while (i + 1 < sizeof help / sizeof help[0] && (int)strlen(help[i]) > COLS)
		i++;
	put_line(LINES - 1, help[i], A_NORMAL);
}

/* A boxed window centred on the screen, at most H x W; NULL when the
 * terminal is too small for any. */
static WINDOW *panel_window(int h, int w)
{
	if (h > LINES)
		h = LINES;
	if (w > COLS)
		w = COLS;
	if (h < 3 || w < 10)
		return NULL;
	WINDOW *win = newwin(h, w, (LINES - h) / 2, (COLS - w) / 2);
	if (!win)
		return NULL;
	werase(win);
	box(win, 0, 0);
	return win;
}

static void panel_title(WINDOW *win, const char *what, const char *key)
{
	char t[LINE_MAX_W], kb[LINE_MAX_W / 2 + 1];
	int room = getmaxx(win) - 6 - (int)strlen(what);
	snprintf(t, sizeof t, " %s %s ", what, fit_key(kb, sizeof kb, key, room));
	wattron(win, A_BOLD);
	mvwaddnstr(win, 0, 2, t, getmaxx(win) - 4);
	wattroff(win, A_BOLD);
}

/* H: the selected key's log2 latency buckets, from the lowest to the
 * highest that counted anything, with bars scaled to the fullest. */
static void draw_hist(const struct ui *u, const struct mctop_key *k)
{
	int lo = -1, hi = -1;
	uint64_t most = 0;
	for (int i = 0; i < MCTOP_HIST; i++)
		if (k->hist[i]) {
			if (lo < 0)
				lo = i;
			hi = i;
			if (k->hist[i] > most)
				most = k->hist[i];
		}
	/* No bucket: one line saying why, between the title and the foot. */
	int rows = lo < 0 ? 1 : hi - lo + 1;
	WINDOW *win = panel_window(rows + 2, 72);
	if (!win)
		return;
	panel_title(win, "latency histogram of", k->key);
	int w = getmaxx(win), bar = w - 36;
	if (lo < 0)
		mvwaddnstr(win, 1, 2,
		           u->f.no_lat ? "no latency: memcached's watch stream has none"
		                       : "no latency measured in this span",
		           w - 4);
	for (int i = lo; lo >= 0 && i <= hi && 1 + i - lo < getmaxy(win) - 1; i++) {
		char a[16], b[16], c[16], line[LINE_MAX_W];
		int len = (int)(bar > 0 ? k->hist[i] * (uint64_t)bar / most : 0);
		if (k->hist[i] && len == 0)
			len = 1;
		snprintf(line, sizeof line, "%7s - %-7s %9s |%.*s", duration_ns(a, sizeof a, (double)(1ull << i)),
		         duration_ns(b, sizeof b, (double)(1ull << (i + 1))),
		         human(c, sizeof c, (double)k->hist[i], 9, 0), len > 0 ? len : 0,
		         "##################################################################"
		         "##################################################################");
		mvwaddnstr(win, 1 + i - lo, 2, line, w - 4);
	}
	char foot[64];
	snprintf(foot, sizeof foot, " log2 ns buckets, %s; any key closes ",
	         u->o->cumulative ? "since attach" : "this interval");
	mvwaddnstr(win, getmaxy(win) - 1, 2, foot, w - 4);
	wnoutrefresh(win);
	delwin(win);
}

/* I: everything the module knows of the selected key, exact numbers. */
static void draw_inspect(const struct ui *u, const struct mctop_key *k)
{
	static const struct {
		const char *name;
		enum mctop_cmd cmd;
	} cmds[] = {
		{ "get hits", MC_GET_HIT }, { "get misses", MC_GET_MISS }, { "sets", MC_SET },
		{ "adds", MC_ADD }, { "replaces", MC_REPLACE }, { "appends", MC_APPEND },
		{ "prepends", MC_PREPEND }, { "cas", MC_CAS }, { "deletes", MC_DELETE },
		{ "incrs", MC_INCR }, { "decrs", MC_DECR }, { "touches", MC_TOUCH },
	};
	/* The whole key text over as many lines as it takes (up to 3), cut
	 * by terminal columns, then the calls line, the commands two a line
	 * and three more. */
	int width = COLS < 64 ? COLS : 64, w = width - 4;
	int kcols = keytext_width(k->key);
	int klines = w > 0 ? (kcols + w - 1) / w : 1;
	klines = klines < 1 ? 1 : klines > 3 ? 3 : klines;
	int n = (int)(sizeof cmds / sizeof cmds[0]);
	WINDOW *win = panel_window(2 + klines + 1 + 1 + n / 2 + 1 + 3, width);
	if (!win)
		return;
	panel_title(win, "inspect", k->key);
	int y = 1;
	char line[LINE_MAX_W], a[32], b[32];
	for (const char *s = k->key; y <= klines && *s;) {
		size_t part = keytext_fit(s, w, NULL);
		if (part == 0) /* a character wider than the panel */
			break;
		mvwaddnstr(win, y++, 2, s, (int)part);
		s += part;
	}
	y = 1 + klines;
	y++;
	snprintf(line, sizeof line, "calls %" PRIu64 "   error bound %" PRIu64 " (true >= %" PRIu64 ")",
	         k->calls, k->err, k->calls > k->err ? k->calls - k->err : 0);
	mvwaddnstr(win, y++, 2, line, w);
	for (int i = 0; i + 1 < n; i += 2) {
		snprintf(line, sizeof line, "%-11s %12" PRIu64 "    %-11s %12" PRIu64, cmds[i].name,
		         k->ncmd[cmds[i].cmd], cmds[i + 1].name, k->ncmd[cmds[i + 1].cmd]);
		mvwaddnstr(win, y++, 2, line, w);
	}
	y++;
	if (k->objsize < 0)
		snprintf(a, sizeof a, "none seen");
	else
		snprintf(a, sizeof a, "%" PRId64 " bytes", k->objsize);
	snprintf(line, sizeof line, "objsize %s   total %" PRIu64 " bytes", a, k->bytes);
	mvwaddnstr(win, y++, 2, line, w);
	double age = (u->sampled.tv_sec * 1e9 + u->sampled.tv_nsec - (double)k->first_ns) / 1e9;
	snprintf(line, sizeof line, "clients ~%" PRIu64 "   first seen %s ago", k->clients,
	         uptime(a, sizeof a, age));
	mvwaddnstr(win, y++, 2, line, w);
	if (k->lat_us < 0)
		snprintf(b, sizeof b, "-");
	else
		snprintf(b, sizeof b, "%.1f", k->lat_us);
	snprintf(line, sizeof line, "req/s %.1f   bw %.1f kbps   latency %s us", k->reqs, k->bw_kbps, b);
	mvwaddnstr(win, y++, 2, line, w);
	mvwaddnstr(win, getmaxy(win) - 1, 2, " counts since first seen; any key closes ", w);
	wnoutrefresh(win);
	delwin(win);
}

static void draw(struct ui *u)
{
	erase();
	if (LINES < HEAD_ROWS + FOOT_ROWS + 1 || COLS < 20) {
		put_line(0, "mctop: terminal too small", A_BOLD);
	} else {
		draw_header(u);
		draw_columns(u);
		draw_table(u);
		draw_footer(u);
	}
	wnoutrefresh(stdscr);
	const struct mctop_key *k = selected(u);
	if (u->panel == PANEL_HIST && k)
		draw_hist(u, k);
	else if (u->panel == PANEL_INSPECT && k)
		draw_inspect(u, k);
	doupdate();
}

/* ---- Keys ---- */

/* W: the table as shown, as JSON, to -o (without it, mctop.json in the
 * current directory, and the message says so). */
static void write_json(struct ui *u)
{
	const char *path = u->o->output ? u->o->output : DEFAULT_OUTPUT;
	FILE *out = fopen(path, "w");
	int ok = out && mctop_print_json(&u->f, nrows(u), out) == 0;
	int err = errno;
	if (out && fclose(out) != 0 && ok) {
		ok = 0;
		err = errno;
	}
	if (ok)
		snprintf(u->msg, sizeof u->msg, "wrote %s (%zu keys)%s", path, nrows(u),
		         u->o->output ? "" : " in the current directory; -o FILE to choose");
	else
		snprintf(u->msg, sizeof u->msg, "cannot write %s: %s", path, strerror(err));
}

/* One key; 1 to quit, 2 to sample at once. */
static int on_key(struct ui *u, int ch)
{
	if (ch == KEY_RESIZE) { /* ncurses has resized stdscr: pages have a new size */
		u->first = 0;
		select_row(u, (long)u->sel);
		return 0;
	}
	u->msg[0] = '\0';
	if (u->panel != PANEL_NONE) { /* any key closes it; Q still quits */
		u->panel = PANEL_NONE;
		return ch == 'q' || ch == 'Q';
	}
	long per = (long)page_rows();
	switch (ch) {
	case 'q': case 'Q': return 1;
	case 'c': case 'C': resort(u, SORT_CALLS, 0); break;
	case 's': case 'S': resort(u, SORT_SIZE, 0); break;
	case 'r': case 'R': resort(u, SORT_REQS, 0); break;
	case 'b': case 'B': resort(u, SORT_BW, 0); break;
	case 'n': case 'N': resort(u, SORT_NEWEST, 0); break;
	case 'l': case 'L': resort(u, SORT_LAT, 0); break;
	case 't': case 'T': resort(u, u->sort, !u->ascending); break;
	case 'j': case KEY_DOWN: move_to(u, (long)u->sel + 1); break;
	case 'k': case KEY_UP: move_to(u, (long)u->sel - 1); break;
	case 'd': case KEY_NPAGE: case ' ': move_to(u, (long)u->sel + per); break;
	case 'u': case KEY_PPAGE: move_to(u, (long)u->sel - per); break;
	case 'g': case KEY_HOME: move_to(u, 0); break;
	case 'G': case KEY_END: move_to(u, (long)nrows(u) - 1); break;
	case 'h': case 'H': case 'i': case 'I':
		if (selected(u))
			u->panel = (ch == 'h' || ch == 'H') ? PANEL_HIST : PANEL_INSPECT;
		else
			snprintf(u->msg, sizeof u->msg, "no key selected");
		break;
	case 'w': case 'W': write_json(u); break;
	case 'z': case 'Z':
		if (mctop_reset(u->m) < 0)
			return -1;
		snprintf(u->msg, sizeof u->msg, "reset: counting from now");
		return 2;
	default:
		break;
	}
	return 0;
}

/* The loop: 0 when the user or the count ends it, -1 when sampling fails. */
static int run(struct ui *u)
{
	double interval = u->o->interval_s > 0 ? u->o->interval_s : 1;
	double next = now_s(NULL);
	for (;;) {
		if (ui_signal)
			return 0;
		double t = now_s(NULL);
		if (t >= next) {
			if (u->o->count > 0 && u->frames >= u->o->count)
				return 0;
			if (mctop_sample(u->m, &u->f) < 0)
				return -1;
			now_s(&u->sampled);
			u->frames++;
			arrange(u);
			/* On the interval's grid, unless we fell a whole one behind. */
			next += interval;
			if (next <= t)
				next = t + interval;
			draw(u);
		}
		double wait = (next - now_s(NULL)) * 1000;
		timeout(wait <= 0 ? 0 : wait > WAIT_SLICE_MS ? WAIT_SLICE_MS : (int)wait + 1);
		int ch = getch();
		if (ch == ERR)
			continue;
		int r = on_key(u, ch);
		if (r == 1 || r < 0)
			return r < 0 ? -1 : 0;
		if (r == 2)
			next = now_s(NULL);
		draw(u);
	}
}

/* ---- Entering and leaving the screen ---- */

/* SIGQUIT too: Ctrl-\ would otherwise leave the terminal raw. */
static const int caught[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
#define NCAUGHT (sizeof caught / sizeof caught[0])

struct restore {
	struct sigaction old[NCAUGHT];
	int saved_stderr;   /* the terminal, -1 when stderr was not captured */
	FILE *held;         /* what was written to stderr meanwhile */
	char *ctype;        /* LC_CTYPE before ours */
	int ascii;          /* ours is not UTF-8: keys are shown in ASCII */
};

/* Before initscr: our handlers go in first, so ncurses (which only takes
 * signals left at SIG_DFL) leaves SIGINT/SIGTERM to us and keeps SIGWINCH
 * (KEY_RESIZE) and SIGTSTP for itself.  No SA_RESTART: getch returns. */
static void enter(struct restore *r)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	ui_signal = 0;
	for (size_t i = 0; i < NCAUGHT; i++)
		sigaction(caught[i], &sa, &r->old[i]);
	/* Only the character type: LC_NUMERIC stays "C" for the JSON W writes. */
	const char *ct = setlocale(LC_CTYPE, NULL);
	r->ctype = ct ? strdup(ct) : NULL;
	setlocale(LC_CTYPE, "");
	r->ascii = strcmp(nl_langinfo(CODESET), "UTF-8") != 0;
	r->saved_stderr = -1;
	r->held = NULL;
	if (isatty(STDERR_FILENO) && (r->held = tmpfile())) {
		fflush(stderr);
		r->saved_stderr = dup(STDERR_FILENO);
		if (r->saved_stderr < 0 || dup2(fileno(r->held), STDERR_FILENO) < 0) {
			if (r->saved_stderr >= 0)
				close(r->saved_stderr);
			r->saved_stderr = -1;
			fclose(r->held);
			r->held = NULL;
		}
	}
}

/* After endwin: stderr back, what it held printed, handlers and locale back. */
static void leave(struct restore *r)
{
	if (r->saved_stderr >= 0) {
		fflush(stderr);
		dup2(r->saved_stderr, STDERR_FILENO);
		close(r->saved_stderr);
		char buf[4096];
		size_t n;
		rewind(r->held);
		while ((n = fread(buf, 1, sizeof buf, r->held)) > 0)
			fwrite(buf, 1, n, stderr);
		fclose(r->held);
	}
	for (size_t i = 0; i < NCAUGHT; i++)
		sigaction(caught[i], &r->old[i], NULL);
	if (r->ctype) {
		setlocale(LC_CTYPE, r->ctype);
		free(r->ctype);
	}
}

int mctop_ui(struct mctop *m, const struct mctop_opts *o)
{
	if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
		fprintf(stderr, "mctop: the full-screen table needs a terminal; use -C or --json\n");
		return 2;
	}
	struct ui u = { .m = m, .o = o, .sort = o->sort, .ascending = o->ascending };
	struct restore r;
	enter(&r);
	u.ascii = r.ascii;
	SCREEN *scr = newterm(NULL, stdout, stdin);
	if (!scr) {
		leave(&r);
		fprintf(stderr, "mctop: cannot use terminal '%s'\n", getenv("TERM") ? getenv("TERM") : "");
		return 1;
	}
	cbreak();
	noecho();
	nonl();
	keypad(stdscr, TRUE);
	curs_set(0);
	set_escdelay(25);
	int rc = run(&u);
	endwin();
	delscreen(scr);
	leave(&r);
	mctop_frame_free(&u.f);
	return rc < 0 ? 1 : 0;
}
