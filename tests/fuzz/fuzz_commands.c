/* SPDX-License-Identifier: MIT */
/* libFuzzer harness for the agent's command language (lib/control/commands.c and
 * what it drives: modules, sites, publishing), run in-process.
 *
 * Each input is a script: lines split on '\n' run in order on the same
 * state, so load/enable/disable/command/unload sequences get explored.
 * After each line the harness fires its sites, so a handler list left
 * pointing at a freed attachment or an unloaded module shows up under
 * ASan.  Every input starts from the same state (the in-process module
 * registered, nothing else loaded) and leaves nothing loaded behind, so a
 * crash reproduces from its input alone.
 *
 * `load` never dlopen()s what the input names: its argument is replaced
 * by one of the two fixture modules named by XPROBES_FUZZ_MOD_A and _B.
 * The agent's constructor has already run when LLVMFuzzerInitialize does,
 * so the make rule sets XPROBES_AGENT=off and the harness refuses to run
 * without it (a live agent would also serve commands on a socket). */
#include <ctype.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/control.h"
#include "base/base.h"

#include <xprobes/probe.h>
#include <xprobes/site.h>

#define MAX_LINES 32

static const char *mod_paths[2];
static struct textbuf out;
static long handled;

/* Sites: mod_count.so and mod_nocmd.so attach to "*_tick" (long), and are
 * refused on fuzzprov:int_tick; the in-process module below takes
 * fuzz_pair and is refused on fuzz_tick. */
static __attribute__((noinline)) void fire_tick(long i)
{
	XPROBES_SITE(fuzz_tick, (long), (i));
}

static __attribute__((noinline)) void fire_int_tick(int i)
{
	XPROBES_SITE_P(fuzzprov, int_tick, (int), (i));
}

static __attribute__((noinline)) void fire_pair(long i, const char *s)
{
	XPROBES_SITE(fuzz_pair, (long, const char *), (i, s));
}

static void on_pair(long i, const char *s)
{
	handled += i + (s && *s);
}

static void inproc_command(const char *args, xprobes_out_fn put)
{
	put("args: ");
	put(args);
	put("\n");
}

static const struct xprobes_probe_desc inproc_probes[] = {
	XPROBES_PROBE("fuzz_*", on_pair, (long, const char *)),
};
static const struct xprobes_module_desc inproc = {
	.abi = XPROBES_MODULE_ABI,
	.size = sizeof(struct xprobes_module_desc),
	.command = inproc_command,
	.nprobes = 1,
	.probes = inproc_probes,
};

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	const char *agent = getenv("XPROBES_AGENT");
	if (!agent || strcmp(agent, "off") != 0) {
		fprintf(stderr, "fuzz_commands: run with XPROBES_AGENT=off\n");
		exit(2);
	}
	mod_paths[0] = getenv("XPROBES_FUZZ_MOD_A");
	mod_paths[1] = getenv("XPROBES_FUZZ_MOD_B");
	for (int i = 0; i < 2; i++) {
		if (!mod_paths[i] || mod_paths[i][0] != '/') {
			fprintf(stderr, "fuzz_commands: XPROBES_FUZZ_MOD_A and _B must "
					"name probe modules by absolute path\n");
			exit(2);
		}
	}
	tb_init(&out, XP_MAX_REPLY);
	/* Any command rescans: the first input then finds the sites too. */
	xp_run_command("objects", &out);
	return 0;
}

/* If line is "load WORD REST", return "load MODULE REST" (malloc'd) with
 * MODULE one of ours; else NULL.  Words are split exactly as the agent's
 * next_word() splits them, so no other path can reach dlopen(). */
static char *rewrite_load(const char *line)
{
	const char *p = line;
	while (isspace((unsigned char)*p))
		p++;
	const char *w = p;
	while (*p && !isspace((unsigned char)*p))
		p++;
	if (p - w != 4 || memcmp(w, "load", 4) != 0)
		return NULL;
	while (isspace((unsigned char)*p))
		p++;
	if (!*p)
		return NULL; /* "load" alone: the usage error */
	const char *arg = p;
	while (*p && !isspace((unsigned char)*p))
		p++;
	const char *mod = mod_paths[(unsigned char)*arg & 1];
	size_t n = strlen("load ") + strlen(mod) + strlen(p) + 1;
	char *s = malloc(n);
	if (s)
		snprintf(s, n, "load %s%s", mod, p);
	return s;
}

static void run_line(const char *line)
{
	char *rewritten = rewrite_load(line);
	tb_reset(&out);
	int rc = xp_run_command(rewritten ? rewritten : line, &out);
	if (rc != XP_OK && rc != XP_ERR)
		abort();
	if (out.len > out.limit || (out.data && out.data[out.len] != '\0') ||
	    (out.data && strlen(out.data) != out.len))
		abort();
	free(rewritten);
	fire_tick(1);
	fire_int_tick(2);
	fire_pair(3, "x");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	tb_reset(&out);
	xp_module_register("/fuzz/inproc.so", NULL, &inproc, &out);

	/* Lines end at '\n'; a NUL ends a line early, as it would the agent's
	 * C string. */
	char *script = malloc(size + 1);
	if (!script)
		return 0;
	memcpy(script, data, size);
	script[size] = '\0';
	char *line = script;
	for (int i = 0; i < MAX_LINES && line < script + size; i++) {
		char *nl = memchr(line, '\n', (size_t)(script + size - line));
		if (nl)
			*nl = '\0';
		run_line(line);
		if (!nl)
			break;
		line = nl + 1;
	}
	free(script);

	/* Unload what is left the way a user would; nothing may remain. */
	while (xp_agent.nmodules) {
		char line[PATH_MAX + 16];
		snprintf(line, sizeof(line), "unload %s", xp_agent.modules[xp_agent.nmodules - 1]->path);
		tb_reset(&out);
		if (xp_run_command(line, &out) != XP_OK) {
			fprintf(stderr, "fuzz_commands: '%s' failed: %s\n", line, out.data);
			abort();
		}
	}
	tb_reset(&xp_agent.pending);
	return 0;
}
