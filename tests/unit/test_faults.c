/* SPDX-License-Identifier: MIT */
/* Fault injection, SQLite's way: for each operation that changes the
 * agent's state, fail its 1st, 2nd, ... Nth fault point (an allocation or
 * a system call, lib/base/base.h) in turn until the operation passes.  After
 * each failed run the process must be exactly as it was before (same
 * modules, attachments, published lists and gates), the failure must be
 * reported, and the sites must call exactly the handlers the state says.
 * Run under ASan+UBSan by `make sanitize`, which also catches leaks and
 * use-after-free on every failure path.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "unit.h"
#include "control/control.h"
#include "trace/trace.h"
#include "base/base.h"

#include <xprobes/probe.h>
#include <xprobes/site.h>

static int calls_a, calls_b;

static __attribute__((noinline)) void fire(long v)
{
	XPROBES_SITE(fault_site, (long), (v));
}

static __attribute__((noinline)) void fire_other(long v)
{
	XPROBES_SITE(fault_other, (long), (v));
}

static void handler_a(long v)
{
	(void)v;
	calls_a++;
}

static void handler_b(long v)
{
	(void)v;
	calls_b++;
}

static void command_b(const char *args, xprobes_out_fn out)
{
	(void)args;
	out("b says hello\n");
}

static const struct xprobes_probe_desc probes_a[] = {
	XPROBES_PROBE("fault_*", handler_a, (long)),
};
static const struct xprobes_module_desc mod_a = {
	XPROBES_MODULE_ABI, sizeof(struct xprobes_module_desc), 0, NULL, 1, probes_a
};
static const struct xprobes_probe_desc probes_b[] = {
	XPROBES_PROBE("fault_site", handler_b, (long)),
	XPROBES_PROBE("dl_tick", handler_b, (long)),
};
static const struct xprobes_module_desc mod_b = {
	XPROBES_MODULE_ABI, sizeof(struct xprobes_module_desc), 0, command_b, 2, probes_b
};

static unsigned long total_points;

/* The whole observable state, as text. */
static char *snapshot(void)
{
	struct textbuf tb;
	tb_init(&tb, 1 << 20);
	for (size_t i = 0; i < xp_agent.nmodules; i++) {
		struct xp_module *m = xp_agent.modules[i];
		tb_printf(&tb, "module %s en=%d unl=%d att=%zu\n", m->path, m->enabled, m->unloading,
			  m->nattached);
	}
	for (size_t i = 0; i < xp_agent.nobjects; i++) {
		struct xp_object *o = xp_agent.objects[i];
		tb_printf(&tb, "object %s\n", o->path);
		for (size_t j = 0; j < o->nsites; j++) {
			struct xp_site *s = o->sites[j];
			/* Only the agent's own copies: a library being forgotten
			 * may be unmapped already. */
			tb_printf(&tb, " site %s gate=%d trace=%p atts=", s->fullname, s->counted_in_gate,
				  (void *)s->trace_fn);
			for (size_t k = 0; k < s->natts; k++)
				tb_printf(&tb, "%s/%s ", s->atts[k]->mod->name,
					  s->atts[k]->probe->handler_name);
			struct xprobes_handler_list *l = s->published;
			tb_printf(&tb, " list=");
			for (unsigned k = 0; l && k < l->count; k++)
				tb_printf(&tb, "%p ", (void *)l->handlers[k].fn);
			tb_puts(&tb, "\n");
		}
	}
	return tb.data ? tb.data : strdup("");
}

/* Published lists are exactly what the attachments and modules say. */
static void assert_consistent(void)
{
	for (size_t i = 0; i < xp_agent.nobjects; i++)
		for (size_t j = 0; j < xp_agent.objects[i]->nsites; j++) {
			struct xp_site *s = xp_agent.objects[i]->sites[j];
			struct xprobes_handler_list *l = s->published;
			/* This program's own records: what the sites really load. */
			if (!*xp_agent.objects[i]->dlname) {
				assert_ptr_equal(s->rec->handlers, l);
				assert_int_equal(s->rec->gate->attached != 0, s->counted_in_gate);
			}
			/* The tracer's site-hit handler, when it has one, first. */
			unsigned n = 0;
			if (s->trace_fn) {
				assert_non_null(l);
				assert_ptr_equal(l->handlers[0].fn, s->trace_fn);
				n++;
			}
			for (size_t k = 0; k < s->natts; k++) {
				if (!xp_module_runs(s->atts[k]->mod))
					continue;
				assert_non_null(l);
				assert_true(n < l->count);
				assert_ptr_equal(l->handlers[n].fn, s->atts[k]->probe->handler);
				n++;
			}
			assert_int_equal(l ? l->count : 0, n);
			assert_int_equal(s->counted_in_gate, n != 0);
		}
}

typedef int (*op_fn)(struct textbuf *out);

/* Run op with its 1st, 2nd, ... fault point failing until it passes. */
static int op_rescan_any(struct textbuf *out);
static void exercise_(const char *what, op_fn op, int settle)
{
	unsigned long points = 0;
	for (long n = 0;; n++) {
		/* Up to date first, so that a command's own rescan finds nothing
		 * new and the faults land in the command itself. */
		if (settle)
			xp_rescan(NULL);
		char *before = snapshot();
		struct textbuf out;
		tb_init(&out, 1 << 20);
		xp_fault_countdown = n;
		int rc = op(&out);
		int fired = xp_fault_countdown < 0; /* the Nth point was reached */
		xp_fault_countdown = -1;
		xp_synchronize();
		assert_consistent();
		if (!fired) {
			/* Passed with no injected failure: done. */
			assert_true(rc >= 0);
			free(before);
			tb_free(&out);
			break;
		}
		points++;
		if (getenv("FAULT_DEBUG"))
			printf("  %s #%ld: rc=%d %s", what, n, rc, out.data ? out.data : "\n");
		if (rc < 0) {
			char *after = snapshot();
			if (strcmp(before, after) != 0)
				fail_msg("%s, fault %ld: state changed by a failed operation\n"
					 "before:\n%s\nafter:\n%s\nreply: %s",
					 what, n, before, after, out.data ? out.data : "");
			/* The failure was reported, not swallowed. */
			if (!out.len)
				fail_msg("%s, fault %ld: failed without a word", what, n);
			free(after);
		}
		free(before);
		tb_free(&out);
		/* A fault on an optional path (a rescan inside a command) that
		 * the operation survived: it passed. */
		if (rc >= 0)
			break;
	}
	printf("%-28s %lu fault points\n", what, points);
	total_points += points;
}

/* Operations that are not themselves rescans start from an up-to-date
 * view of the loaded objects. */
static void exercise(const char *what, op_fn op)
{
	exercise_(what, op, op != op_rescan_any);
}

static struct xp_module *find(const char *name)
{
	struct textbuf tb;
	tb_init(&tb, 4096);
	struct xp_module *m = xp_module_find(name, &tb);
	tb_free(&tb);
	return m;
}

static int op_load_a(struct textbuf *out)
{
	return xp_module_register("/fault/a.so", NULL, &mod_a, out);
}

static int op_load_b(struct textbuf *out)
{
	return xp_module_register("/fault/b.so", NULL, &mod_b, out);
}

static int op_disable_a(struct textbuf *out)
{
	unsigned long ticket;
	int rc = xp_module_set_enabled(find("a.so"), 0, &ticket);
	if (rc)
		tb_printf(out, "disable: %s\n", strerror(-rc));
	return rc;
}

static int op_enable_a(struct textbuf *out)
{
	int rc = xp_module_set_enabled(find("a.so"), 1, NULL);
	if (rc)
		tb_printf(out, "enable: %s\n", strerror(-rc));
	return rc;
}

static int op_unload_a(struct textbuf *out)
{
	int rc = xp_module_unload(find("a.so"));
	if (rc)
		tb_printf(out, "unload: %s\n", strerror(-rc));
	return rc;
}

static struct xp_site *find_site_or_null(const char *fullname)
{
	for (size_t i = 0; i < xp_agent.nobjects; i++)
		for (size_t j = 0; j < xp_agent.objects[i]->nsites; j++)
			if (strcmp(xp_agent.objects[i]->sites[j]->fullname, fullname) == 0)
				return xp_agent.objects[i]->sites[j];
	return NULL;
}

/* A rescan that could not take in the change said so and keeps the
 * process as it was; the next one does it.  Passes once the library's
 * site is known (present) or forgotten (absent), as expected. */
static int expect_dl_site;

static int op_rescan_any(struct textbuf *out)
{
	xp_rescan(out);
	return !find_site_or_null("dl_tick") == !expect_dl_site ? 0 : -ENOMEM;
}

static int command(const char *line, struct textbuf *out)
{
	return xp_run_command(line, out) == XP_OK ? 0 : -EIO;
}

static int op_cmd_disable_b(struct textbuf *out)
{
	return command("disable b.so", out);
}

static int op_cmd_enable_b(struct textbuf *out)
{
	return command("enable b.so", out);
}

static int op_cmd_command_b(struct textbuf *out)
{
	int rc = command("command b.so", out);
	return rc ? rc : strstr(out->data, "b says hello") ? 0 : -EIO;
}

static int op_cmd_sites(struct textbuf *out)
{
	return command("sites", out);
}

static int op_cmd_unload_b(struct textbuf *out)
{
	return command("unload b.so", out);
}

/* The tracer's site-hit handlers on every site, and off again
 * (lib/trace/trace_sitehits.c): all or nothing. */
static int op_site_hits(struct textbuf *out, int on)
{
	int rc = xp_trace_site_hits(on);
	if (rc)
		tb_printf(out, "site hits %s: %s\n", on ? "on" : "off", strerror(-rc));
	return rc;
}

static int op_site_hits_on(struct textbuf *out)
{
	return op_site_hits(out, 1);
}

static int op_site_hits_off(struct textbuf *out)
{
	return op_site_hits(out, 0);
}

static void test_every_fault_point(void **state)
{
	(void)state;
	xp_rescan(NULL);
	assert_non_null(find_site_or_null("fault_site"));

	exercise("load a", op_load_a);
	calls_a = 0;
	fire(1);
	fire_other(1);
	assert_int_equal(calls_a, 2);

	exercise("load b", op_load_b);
	exercise("disable a", op_disable_a);
	calls_a = calls_b = 0;
	fire(1);
	assert_int_equal(calls_a, 0);
	assert_int_equal(calls_b, 1);
	exercise("enable a", op_enable_a);

	/* With the tracer's handlers on the sites, the modules' still run,
	 * and a module change keeps the tracer's handler in the lists. */
	exercise("trace site hits on", op_site_hits_on);
	calls_a = calls_b = 0;
	fire(1);
	assert_int_equal(calls_a, 1);
	assert_int_equal(calls_b, 1);
	exercise("disable a (site hits on)", op_disable_a);
	exercise("enable a (site hits on)", op_enable_a);
	exercise("trace site hits off", op_site_hits_off);

	/* A library with sites appears: adding it is all or nothing. */
	char lib[512];
	const char *build = getenv("XPROBES_TEST_BUILD");
	snprintf(lib, sizeof(lib), "%s/tests/fixtures/libdlsite.so", build ? build : "build");
	void *h = dlopen(lib, RTLD_NOW);
	assert_non_null(h);
	expect_dl_site = 1;
	exercise("rescan (new library)", op_rescan_any);
	dlclose(h);
	assert_non_null(find_site_or_null("dl_tick"));
	expect_dl_site = 0;
	exercise("rescan (library gone)", op_rescan_any);

	exercise("command: disable", op_cmd_disable_b);
	exercise("command: enable", op_cmd_enable_b);
	exercise("command: module command", op_cmd_command_b);
	exercise("command: sites", op_cmd_sites);

	/* Unload: whatever fails, no handler of the module runs once unload
	 * has returned success, and while it fails, the module stays whole. */
	exercise("unload a", op_unload_a);
	calls_a = 0;
	fire(1);
	fire_other(1);
	assert_int_equal(calls_a, 0);
	exercise("command: unload", op_cmd_unload_b);
	calls_b = 0;
	fire(1);
	assert_int_equal(calls_b, 0);
	assert_int_equal(xp_agent.nmodules, 0);
	assert_false(XPROBES_SITE_ENABLED(fault_site));

	printf("fault injection: %lu fault points exercised, process consistent after each\n",
	       total_points);
	assert_true(total_points > 20);
}

/* A session ends (its client went) while the unload of the module it
 * loaded with `load --session` cannot start, at each fault point in turn:
 * the module stays whole and attached, the failure is said once, and the
 * control thread's retry (xp_session_end(XP_SESSION_ENDED) on every pass)
 * unloads it.  Never a module left behind with nobody reading it. */
static void test_session_end_retried(void **state)
{
	(void)state;
	xp_rescan(NULL);
	unsigned long points = 0;
	for (long n = 0;; n++) {
		struct textbuf out;
		tb_init(&out, 4096);
		assert_int_equal(xp_module_register("/fault/a.so", NULL, &mod_a, &out), 0);
		tb_free(&out);
		struct xp_module *m = find("a.so");
		m->owner = 7;
		tb_reset(&xp_agent.pending);
		xp_fault_countdown = n;
		xp_session_end(7);
		int fired = xp_fault_countdown < 0;
		xp_fault_countdown = -1;
		if (fired) {
			points++;
			assert_false(m->unloading);
			assert_true(m->owner == XP_SESSION_ENDED);
			calls_a = 0;
			fire(1);
			assert_int_equal(calls_a, 1); /* whole and attached */
			assert_non_null(xp_agent.pending.data);
			assert_non_null(strstr(xp_agent.pending.data, "retried until it goes"));
			xp_session_end(XP_SESSION_ENDED); /* the control thread's next pass */
		}
		assert_true(m->unloading);
		assert_true(m->owner == 0);
		xp_synchronize();
		xp_modules_reap();
		assert_int_equal(xp_agent.nmodules, 0);
		assert_consistent();
		calls_a = 0;
		fire(1);
		assert_int_equal(calls_a, 0);
		if (!fired)
			break;
	}
	tb_reset(&xp_agent.pending);
	printf("%-28s %lu fault points\n", "session end", points);
	assert_true(points > 0);
}

/* fork(): the child makes its own agent (socket directory, socket,
 * thread).  With each of its fault points failing in turn, the child
 * lives on without an agent and leaves no socket behind. */
static void test_fork_restart(void **state)
{
	(void)state;
	char dir[] = "/tmp/xp-faults-XXXXXX";
	assert_non_null(mkdtemp(dir));
	setenv("XPROBES_RUNDIR", dir, 1);
	unsigned long points = 0;
	for (long n = 0;; n++) {
		int pipefd[2];
		assert_int_equal(pipe(pipefd), 0);
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			xp_fault_countdown = n;
			int rc = xp_control_after_fork_child(1);
			char verdict = rc == 0 ? 'S' : xp_fault_countdown < 0 ? 'F' : '?';
			if (write(pipefd[1], &verdict, 1) != 1)
				_exit(3);
			_exit(0);
		}
		close(pipefd[1]);
		char verdict = 0;
		assert_int_equal(read(pipefd[0], &verdict, 1), 1);
		close(pipefd[0]);
		int status;
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		char sock[256];
		snprintf(sock, sizeof(sock), "%s/.xprobes-%u/%d.sock", dir, (unsigned)geteuid(),
			 (int)pid);
		if (verdict == 'S') {
			unlink(sock);
			break;
		}
		assert_int_equal(verdict, 'F');
		if (access(sock, F_OK) == 0)
			fail_msg("fork restart, fault %ld: left %s behind", n, sock);
		points++;
	}
	printf("%-28s %lu fault points\n", "fork: the child's agent", points);
	total_points += points;
	unsetenv("XPROBES_RUNDIR");
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
	assert_true(points >= 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_fault_point),
		cmocka_unit_test(test_session_end_retried),
		cmocka_unit_test(test_fork_restart),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
