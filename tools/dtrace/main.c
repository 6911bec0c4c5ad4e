/* SPDX-License-Identifier: MIT */
/* xprobes-dtrace: a drop-in for systemtap's `dtrace` stub.
 *
 *   xprobes-dtrace -h -s prov.d [-o prov.h]          header of sites
 *   xprobes-dtrace -G -s prov.d [-o prov.o] [objs]   object with the gates
 *
 * Same options as the stub, so `./configure --enable-dtrace
 * DTRACE=xprobes-dtrace` is the only change a project needs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xprobes/version.h>
#include "dtrace.h"

static void usage(FILE *to)
{
	fprintf(to, "usage: %s [--help] [--version] [-h | -G] [-C [-I<path>] [-D<def>]]\n"
		    "       -s FILE.d [-o OUTPUT] [object files...]\n",
		xpd_prog);
}

static void help(void)
{
	usage(stdout);
	fputs("\n"
	      "Turns a DTrace provider file into XProbes sites that also carry\n"
	      "SystemTap SDT notes, with the command line of systemtap's dtrace.\n"
	      "\n"
	      "  -h         write a header defining PROVIDER_PROBE(...) and\n"
	      "             PROVIDER_PROBE_ENABLED() for each probe\n"
	      "  -G         write an object defining the probes' gates (semaphores);\n"
	      "             link it into every program or library using the header;\n"
	      "             with -h too, only the header is written (as the stub does)\n"
	      "  -s FILE    the provider file (.d)\n"
	      "  -o OUTPUT  output file; default: FILE's base name with .h or .o,\n"
	      "             in the current directory\n"
	      "  -C         run the C preprocessor over FILE first ($CPP, cpp or $CC -E),\n"
	      "             with the -I, -D and -U options given\n"
	      "  -32 -64 -fpic -fPIC -x ARG -k   accepted and ignored\n"
	      "\n"
	      "-G compiles with $CC (default cc) and $CFLAGS.  See xprobes-dtrace(1).\n",
	      stdout);
}

static int bad_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "%s: ", xpd_prog);
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	usage(stderr);
	return 2; /* a usage error, as the other tools' (autoconf only asks for 0) */
}

static int read_file(const char *path, struct strbuf *sb)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "%s: cannot open %s: %s\n", xpd_prog, path, strerror(errno));
		return -1;
	}
	char buf[65536];
	for (;;) {
		ssize_t r = read(fd, buf, sizeof(buf));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			fprintf(stderr, "%s: cannot read %s: %s\n", xpd_prog, path,
				strerror(errno));
			close(fd);
			return -1;
		}
		if (r == 0)
			break;
		sb_putn(sb, buf, (size_t)r);
	}
	close(fd);
	if (!sb->s)
		sb_puts(sb, "");
	return 0;
}

static int on_path(const char *prog)
{
	const char *path = getenv("PATH");
	if (!path)
		path = "/usr/bin:/bin";
	while (*path) {
		const char *colon = strchrnul(path, ':');
		struct strbuf f = { 0 };
		sb_putn(&f, path, (size_t)(colon - path));
		sb_printf(&f, "/%s", prog);
		int ok = access(f.s, X_OK) == 0;
		sb_free(&f);
		if (ok)
			return 1;
		path = *colon ? colon + 1 : colon;
	}
	return 0;
}

static const char *env_or(const char *name, const char *dflt)
{
	const char *v = getenv(name);
	return v && *v ? v : dflt;
}

/* The provider file through the C preprocessor (-C). */
static int preprocess(const char *src, char **cppargs, size_t ncppargs,
		      struct strbuf *out)
{
	char **argv = NULL;
	size_t n = 0;

	if (getenv("CPP") && *getenv("CPP")) {
		argv_push_split(&argv, &n, getenv("CPP"));
	} else if (on_path("cpp")) {
		argv_push(&argv, &n, "cpp");
	} else {
		argv_push_split(&argv, &n, env_or("CC", "cc"));
		argv_push(&argv, &n, "-E");
	}
	/* A .d file is D, not C, to gcc's driver. */
	argv_push(&argv, &n, "-x");
	argv_push(&argv, &n, "c");
	for (size_t i = 0; i < ncppargs; i++)
		argv_push(&argv, &n, cppargs[i]);
	argv_push(&argv, &n, src);
	int rc = run_child(argv, NULL, 0, out);
	if (rc > 0)
		fprintf(stderr, "%s: %s failed on %s (exit status %d)\n", xpd_prog,
			argv[0], src, rc);
	argv_free(argv, n);
	return rc == 0 ? 0 : -1;
}

/* cc [CFLAGS] [-D/-I/-U] -fPIC -c -o TARGET -x c - < source */
static int compile(const struct strbuf *c, const char *target, char **cppargs,
		   size_t ncppargs)
{
	char **argv = NULL;
	size_t n = 0;

	argv_push_split(&argv, &n, env_or("CC", "cc"));
	argv_push(&argv, &n, "-g");
	argv_push_split(&argv, &n, env_or("CFLAGS", ""));
	for (size_t i = 0; i < ncppargs; i++)
		argv_push(&argv, &n, cppargs[i]);
	/* Reading stdin keeps temporary names out of the object: the same
	 * .d gives the same object (reproducible builds). */
	const char *tail[] = { "-fPIC", "-c", "-o", target, "-x", "c", "-" };
	for (size_t i = 0; i < sizeof(tail) / sizeof(tail[0]); i++)
		argv_push(&argv, &n, tail[i]);
	int rc = run_child(argv, c->s, c->len, NULL);
	if (rc > 0)
		fprintf(stderr, "%s: %s failed compiling the gates (exit status %d)\n",
			xpd_prog, argv[0], rc);
	argv_free(argv, n);
	return rc == 0 ? 0 : -1;
}

/* "dir/prov.d" -> "prov" + suffix, in the current directory (the stub's
 * default when -o is absent). */
static char *default_output(const char *src, const char *suffix)
{
	const char *base = strrchr(src, '/');
	base = base ? base + 1 : src;
	const char *dot = strrchr(base, '.');
	size_t len = dot && dot != base ? (size_t)(dot - base) : strlen(base);
	struct strbuf sb = { 0 };
	sb_putn(&sb, base, len);
	sb_puts(&sb, suffix);
	return sb.s;
}

int main(int argc, char **argv)
{
	const char *src = NULL, *out = NULL;
	int header = 0, object = 0, use_cpp = 0;
	const char *suffix = NULL; /* of the last of -h and -G, as the stub */
	char **cppargs = NULL;
	size_t ncppargs = 0;

	/* A compiler that exits early must not kill us mid-write. */
	signal(SIGPIPE, SIG_IGN);

	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help")) {
			help();
			return 0;
		} else if (!strcmp(a, "--version")) {
			printf("xprobes-dtrace %s\n", XPROBES_VERSION);
			return 0;
		} else if (!strcmp(a, "-h")) {
			header = 1;
			suffix = ".h";
		} else if (!strcmp(a, "-G")) {
			object = 1;
			suffix = ".o";
		} else if (!strcmp(a, "-C")) {
			use_cpp = 1;
		} else if (!strncmp(a, "-o", 2) || !strncmp(a, "-s", 2)) {
			const char *v = a[2] ? a + 2 : argv[++i];
			if (!v)
				return bad_usage("option %s needs an argument", a);
			if (a[1] == 'o') {
				out = v;
			} else {
				if (src && strcmp(src, v))
					return bad_usage("only one provider file is supported (-s %s)", v);
				src = v;
			}
		} else if (a[0] == '-' && (a[1] == 'I' || a[1] == 'D' || a[1] == 'U')) {
			/* For the preprocessor, and for the compiler under -G. */
			struct strbuf w = { 0 };
			sb_puts(&w, a);
			if (!a[2]) {
				if (!argv[i + 1])
					return bad_usage("option %s needs an argument", a);
				sb_puts(&w, argv[++i]);
			}
			argv_push(&cppargs, &ncppargs, w.s);
			sb_free(&w);
		} else if (!strcmp(a, "-x")) {
			if (!argv[++i])
				return bad_usage("option %s needs an argument", a);
		} else if (!strncmp(a, "-x", 2) || !strcmp(a, "-32") ||
			   !strcmp(a, "-64") || !strcmp(a, "-fpic") ||
			   !strcmp(a, "-fPIC") || !strcmp(a, "-k") ||
			   !strcmp(a, "--no-pyparsing") || !strcmp(a, "--types")) {
			/* Options dtrace users pass; nothing to do here. */
		} else if (a[0] == '-' && a[1]) {
			return bad_usage("invalid option %s", a);
		}
		/* Anything else is an object file of the program: the stub
		 * accepts and ignores them, and so do we. */
	}
	if (!header && !object)
		return bad_usage("%s", "nothing to do: give -h (header) or -G (object)");
	if (!src)
		return bad_usage("%s", "no provider file: give -s FILE.d");

	struct strbuf text = { 0 };
	if (use_cpp ? preprocess(src, cppargs, ncppargs, &text) : read_file(src, &text))
		return 1;
	struct dt_file model;
	if (dt_parse(src, text.s, text.len, &model)) {
		dt_free(&model);
		sb_free(&text);
		return 1;
	}
	sb_free(&text);

	/* -h with -G: systemtap's stub writes the header only, and without
	 * -o names it after whichever option came last (-h -G: prov.o).
	 * Builds may rely on either, so do the same, but say so. */
	if (header && object)
		fprintf(stderr, "%s: warning: -h and -G together: writing only the header%s\n",
			xpd_prog, !out && !strcmp(suffix, ".o")
					  ? " (named .o, as systemtap's dtrace does)" : "");
	char *outpath = out ? xstrdup(out) : default_output(src, suffix);
	struct strbuf gen = { 0 };
	struct outfile of;
	int rc = 1;
	if (outfile_begin(&of, outpath) == 0) {
		int ok;
		if (header) {
			dt_emit_header(&gen, &model, src);
			ok = outfile_write(&of, gen.s, gen.len) == 0;
		} else {
			dt_emit_gates(&gen, &model, src);
			ok = compile(&gen, outfile_target(&of), cppargs, ncppargs) == 0;
		}
		if (ok)
			rc = outfile_commit(&of) ? 1 : 0;
		else
			outfile_abort(&of);
	}
	sb_free(&gen);
	free(outpath);
	dt_free(&model);
	argv_free(cppargs, ncppargs);
	return rc;
}
