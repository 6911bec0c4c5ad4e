/* Switching patch sites between the 5-byte NOP and `call trampoline` while
 * other threads run through them: Linux's text_poke_bp, from user space.
 *
 *   1. int3 (cc) on the first byte of every site      sync
 *   2. the four other bytes of every site              sync
 *   3. the new first byte of every site                sync
 *
 * "sync" is membarrier(PRIVATE_EXPEDITED_SYNC_CORE): every thread of the
 * process has executed a serializing instruction before it returns, so
 * none can still run an instruction decoded from the bytes as they were.
 * Between 1 and 3 a thread can only see the old instruction or cc (step 1
 * synced), never a mix of old and new bytes: at cc it takes SIGTRAP and
 * our handler moves it to the end of the site, skipping the call or the
 * NOP, which is always correct (tracing only observes).  Three syncs per
 * switch however many sites.
 *
 * The plain PRIVATE_EXPEDITED command is not enough on x86-64: it
 * interrupts the threads that are running (and the return from the
 * interrupt serializes), but a thread asleep in a system call comes back
 * through SYSRET, which does not; so without SYNC_CORE we refuse.
 *
 * Bytes are written through /proc/self/mem, so no page is ever writable:
 * the kernel writes through its own mapping (copy-on-write for a file's
 * private text, as a debugger's breakpoints are).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "alloc.h"
#include "trace.h"

const char *xp_trace_patch_error = "";
unsigned long xp_trace_syncs;

/* Until trace_hook.S brings the real one: a hook that records nothing.
 * `ret` is all it takes: the stack holds the return into the function. */
__asm__(".pushsection .text\n"
	".weak xp_trace_entry_hook\n"
	".type xp_trace_entry_hook, @function\n"
	"xp_trace_entry_hook:\n"
	"ret\n"
	".size xp_trace_entry_hook, . - xp_trace_entry_hook\n"
	".popsection\n");
void (*xp_trace_hook_target)(void) = xp_trace_entry_hook;

/* ---- writing text ---- */

static int mem_fd = -1;
static pid_t mem_pid, sync_pid;

/* /proc/self/mem names the process that opened it: a forked child must
 * open its own, or it would write into its parent. */
static int mem_open(void)
{
	if (mem_fd >= 0 && mem_pid == getpid())
		return 0;
	if (mem_fd >= 0)
		close(mem_fd);
	mem_fd = xp_fault() ? (errno = EACCES, -1) : open("/proc/self/mem", O_RDWR | O_CLOEXEC);
	if (mem_fd < 0) {
		xp_trace_patch_error = "cannot open /proc/self/mem for writing";
		return -errno;
	}
	mem_pid = getpid();
	return 0;
}

static int poke_raw(uintptr_t addr, const uint8_t *buf, size_t len)
{
	ssize_t n = pwrite(mem_fd, buf, len, (off_t)addr);
	return n == (ssize_t)len ? 0 : n < 0 ? -errno : -EIO;
}

/* The writes that move forward; putting bytes back never asks for a fault. */
static int poke(uintptr_t addr, const uint8_t *buf, size_t len)
{
	if (xp_fault()) {
		xp_trace_patch_error = "writing through /proc/self/mem failed";
		return -EIO;
	}
	int err = poke_raw(addr, buf, len);
	if (err)
		xp_trace_patch_error = "writing through /proc/self/mem failed";
	return err;
}

/* Registered once per process (again after fork: the child is another mm). */
static int sync_init(void)
{
	if (sync_pid == getpid())
		return 0;
	long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
	if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE) ||
	    syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0) != 0) {
		xp_trace_patch_error = "membarrier(PRIVATE_EXPEDITED_SYNC_CORE) is not available "
				       "(kernel 4.16 or later, not filtered by seccomp): sites cannot "
				       "be switched safely while threads run";
		return -ENOSYS;
	}
	sync_pid = getpid();
	return 0;
}

static void sync_cores(void)
{
	/* Cannot fail once registered. */
	syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0);
	xp_trace_syncs++;
}

/* ---- the int3 handler ---- */

/* Every known site, sorted, for the handler: replaced whole, freed only
 * once no handler runs (trap_busy counts those inside). */
struct trap_sites {
	size_t n;
	uintptr_t a[];
};
static _Atomic(struct trap_sites *) trap_sites;
static atomic_int trap_busy;
static struct sigaction trap_prev;

static int is_site(const struct trap_sites *t, uintptr_t pc)
{
	size_t lo = 0, hi = t ? t->n : 0;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (t->a[mid] == pc)
			return 1;
		if (t->a[mid] < pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

/* An int3 at a site's first byte is ours (debuggers' breakpoints reach
 * their debugger, not us): it was written at step 1, perhaps already
 * replaced.  Anything else goes to whoever had SIGTRAP before. */
static void on_trap(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	if (si->si_code == SI_KERNEL) {
		uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
		atomic_fetch_add(&trap_busy, 1);
		int ours = is_site(atomic_load(&trap_sites), pc - 1);
		atomic_fetch_sub(&trap_busy, 1);
		if (ours) {
			uc->uc_mcontext.gregs[REG_RIP] = (greg_t)(pc - 1 + XP_TRACE_SITE_LEN);
			return;
		}
	}
	if (trap_prev.sa_flags & SA_SIGINFO) {
		trap_prev.sa_sigaction(sig, si, ctx);
	} else if (trap_prev.sa_handler == SIG_DFL) {
		/* What would have happened without us: delivered when we return. */
		signal(sig, SIG_DFL);
		raise(sig);
	} else if (trap_prev.sa_handler != SIG_IGN) {
		trap_prev.sa_handler(sig);
	}
}

/* Before any int3 is written, and again each time: if the program put its
 * own handler in since, ours goes back in front of it. */
static int trap_install(void)
{
	struct sigaction cur, sa;
	if (sigaction(SIGTRAP, NULL, &cur) != 0)
		return -errno;
	if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_trap)
		return 0;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_trap;
	/* SA_NODEFER: SIGTRAP stays unblocked while it runs, or a thread caught
	 * in it would look like one that blocks SIGTRAP (above). */
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	trap_prev = cur;
	if (xp_fault() || sigaction(SIGTRAP, &sa, NULL) != 0) {
		xp_trace_patch_error = "cannot install the SIGTRAP handler";
		return -EINVAL;
	}
	return 0;
}

/* A thread that blocks SIGTRAP and meets an int3 is not spared: the
 * kernel resets SIGTRAP to its default and the process dies.  So no
 * switch while a thread of the program blocks it (racy: a thread may block
 * it afterwards, but it catches the usual worker started with a full
 * mask).  The agent's own threads ("xprobes-*") block everything but run
 * no traced code. */
static char blocked_msg[160];

/* 1 if the thread blocks SIGTRAP now (its name in name). */
static int blocks_sigtrap(const char *tid, char name[64])
{
	char path[64], line[256];
	unsigned long long blk = 0;
	snprintf(path, sizeof(path), "/proc/self/task/%.20s/status", tid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0; /* the thread has ended */
	name[0] = '\0';
	while (fgets(line, sizeof(line), f)) {
		sscanf(line, "Name:\t%63[^\n]", name);
		sscanf(line, "SigBlk:\t%llx", &blk);
	}
	fclose(f);
	return (blk & (1ull << (SIGTRAP - 1))) && strncmp(name, "xprobes-", 8) != 0;
}

static int sigtrap_blocked_somewhere(void)
{
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return 0; /* no /proc: /proc/self/mem failed already */
	struct dirent *e;
	int found = 0;
	while (!found && (e = readdir(d))) {
		char name[64];
		/* The patching thread itself runs agent code (an application
		 * thread inside dlopen(), say): it meets no site meanwhile. */
		if (e->d_name[0] == '.' || atol(e->d_name) == (long)gettid())
			continue;
		/* Blocked for a moment is common (a thread being created
		 * starts with a full mask until glibc restores it; a signal
		 * handler runs with its mask): look again before refusing. */
		found = 1;
		for (int tries = 0; found && tries < 1000; tries++) {
			found = blocks_sigtrap(e->d_name, name);
			if (found)
				sched_yield();
		}
		if (found)
			snprintf(blocked_msg, sizeof(blocked_msg),
				 "thread %.12s (%.15s) blocks SIGTRAP: it would be killed if it met a "
				 "site while it is switched",
				 e->d_name, name);
	}
	closedir(d);
	return found;
}

static int cmp_addr(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
	return x < y ? -1 : x > y;
}

/* The handler's list: every site of every object now known.  Sites of
 * objects gone since are dropped: nothing can run there any more. */
static int trap_sites_publish(void)
{
	size_t n = 0;
	for (size_t i = 0; i < xp_trace_nobjects; i++)
		n += xp_trace_objects[i]->nsites;
	struct trap_sites *t = xp_malloc(sizeof(*t) + (n ? n : 1) * sizeof(uintptr_t));
	if (!t) {
		xp_trace_patch_error = "out of memory";
		return -ENOMEM;
	}
	t->n = 0;
	for (size_t i = 0; i < xp_trace_nobjects; i++)
		for (size_t j = 0; j < xp_trace_objects[i]->nsites; j++)
			t->a[t->n++] = xp_trace_objects[i]->sites[j];
	qsort(t->a, t->n, sizeof(uintptr_t), cmp_addr);
	struct trap_sites *old = atomic_exchange(&trap_sites, t);
	while (atomic_load(&trap_busy))
		sched_yield(); /* a handler is a few loads long */
	free(old);
	return 0;
}

/* ---- trampolines ---- */

static uintptr_t page_size(void)
{
	return (uintptr_t)sysconf(_SC_PAGESIZE);
}

/* Can `call rel32` at every site in [lo, hi) reach t? */
static int reaches(uintptr_t t, uintptr_t lo, uintptr_t hi)
{
	intptr_t far_back = (intptr_t)(t - (lo + XP_TRACE_SITE_LEN));
	intptr_t far_fwd = (intptr_t)(t - hi);
	return far_back <= INT32_MAX && far_fwd >= INT32_MIN && far_back >= INT32_MIN &&
	       far_fwd <= INT32_MAX;
}

/* A page near [lo, hi): MAP_FIXED_NOREPLACE at addresses moving away from
 * the object on both sides, a page at a time close by, then a MiB. */
static void *tramp_map(uintptr_t lo, uintptr_t hi)
{
	uintptr_t pg = page_size();
	uintptr_t below = lo & ~(pg - 1), above = (hi + pg - 1) & ~(pg - 1);
	for (uintptr_t step = 1; step < 2200; step++) {
		uintptr_t dist = step <= 64 ? step * pg : (step - 64) << 20;
		uintptr_t cand[2] = { below - dist, above + dist - pg };
		int any = 0;
		for (int k = 0; k < 2; k++) {
			if (cand[k] < 0x10000 || !reaches(cand[k], lo, hi) ||
			    !reaches(cand[k] + pg, lo, hi))
				continue;
			any = 1;
			void *p = mmap((void *)cand[k], pg, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
			if (p == MAP_FAILED)
				continue;
			/* A kernel before 4.17 takes the flag as a hint only. */
			if (reaches((uintptr_t)p, lo, hi) && reaches((uintptr_t)p + pg, lo, hi))
				return p;
			munmap(p, pg);
		}
		if (!any && dist > (1ul << 31))
			break;
	}
	return NULL;
}

/* jmp *0(%rip); .quad hook: any hook address, so one page serves. */
static void *tramp_new(const struct xp_trace_object *o)
{
	uint8_t *p = xp_fault() ? NULL : tramp_map(o->sites[0], o->sites[o->nsites - 1] + XP_TRACE_SITE_LEN);
	if (!p) {
		xp_trace_patch_error = "no free page within 2 GiB of the object for its trampoline";
		return NULL;
	}
	uintptr_t pg = page_size();
	memset(p, 0xcc, pg);
	static const uint8_t jmp[6] = { 0xff, 0x25, 0, 0, 0, 0 };
	memcpy(p, jmp, sizeof(jmp));
	uintptr_t hook = (uintptr_t)xp_trace_hook_target;
	memcpy(p + sizeof(jmp), &hook, sizeof(hook));
	if (mprotect(p, pg, PROT_READ | PROT_EXEC) != 0) {
		munmap(p, pg);
		xp_trace_patch_error = "cannot make the trampoline page executable";
		return NULL;
	}
	return p;
}

void xp_trace_tramp_free(void *tramp)
{
	munmap(tramp, page_size());
}

/* ---- switching ---- */

struct change {
	uintptr_t site;
	uint8_t old[XP_TRACE_SITE_LEN], new[XP_TRACE_SITE_LEN];
	uint8_t *on, to;             /* the object's state byte, and its new value */
};

static const uint8_t int3 = 0xcc;

/* The three steps over every change; on a failed write, back through the
 * steps already made, so each site ends as it began. */
static int switch_sites(struct change *c, size_t n)
{
	size_t i, j;
	int err;

	for (i = 0; i < n; i++)
		if ((err = poke(c[i].site, &int3, 1)))
			goto undo_int3;
	sync_cores();
	for (i = 0; i < n; i++)
		if ((err = poke(c[i].site + 1, c[i].new + 1, XP_TRACE_SITE_LEN - 1)))
			goto undo_tails;
	sync_cores();
	for (i = 0; i < n; i++)
		if ((err = poke(c[i].site, c[i].new, 1)))
			goto undo_heads;
	sync_cores();
	for (i = 0; i < n; i++)
		*c[i].on = c[i].to;
	return 0;

	/* A site left with cc (a write back failing too) stays safe: the
	 * handler keeps skipping it. */
undo_heads: /* [0, i) complete, [i, n) cc + new tail */
	for (j = 0; j < i; j++)
		poke_raw(c[j].site, &int3, 1);
	sync_cores();
	i = n;
undo_tails: /* [0, i) cc + new tail, the others cc + old tail */
	for (j = 0; j < i; j++)
		poke_raw(c[j].site + 1, c[j].old + 1, XP_TRACE_SITE_LEN - 1);
	sync_cores();
	i = n;
undo_int3: /* [0, i) cc + old tail */
	for (j = 0; j < i; j++)
		poke_raw(c[j].site, c[j].old, 1);
	sync_cores();
	return err;
}

static int prepare(void)
{
	int err;
	if ((err = sync_init()) || (err = mem_open()) || (err = trap_install()) ||
	    (err = trap_sites_publish()))
		return err;
	if (sigtrap_blocked_somewhere()) {
		xp_trace_patch_error = blocked_msg;
		return -EBUSY;
	}
	return 0;
}

static void call_bytes(uint8_t *b, uintptr_t site, const void *tramp)
{
	int32_t rel = (int32_t)((intptr_t)tramp - (intptr_t)(site + XP_TRACE_SITE_LEN));
	b[0] = XP_TRACE_CALL;
	memcpy(b + 1, &rel, 4);
}

static int wanted(uintptr_t site, const uintptr_t *sorted, size_t n)
{
	return n == 0 || bsearch(&site, sorted, n, sizeof(uintptr_t), cmp_addr) != NULL;
}

static int known_site(uintptr_t a)
{
	for (size_t i = 0; i < xp_trace_nobjects; i++) {
		const struct xp_trace_object *o = xp_trace_objects[i];
		if (bsearch(&a, o->sites, o->nsites, sizeof(uintptr_t), cmp_addr))
			return 1;
	}
	return 0;
}

/* Both directions: on != 0 turns the wanted sites (all if naddrs == 0)
 * that are NOPs into calls, on == 0 every call back into the NOP. */
static int patch(int on, const uintptr_t *addrs, size_t naddrs)
{
	int err = 0;
	xp_trace_patch_error = "";
	uintptr_t *sorted = xp_malloc((naddrs ? naddrs : 1) * sizeof(uintptr_t));
	void **pins = xp_calloc(xp_trace_nobjects ? xp_trace_nobjects : 1, sizeof(void *));
	size_t total = 0;
	for (size_t i = 0; i < xp_trace_nobjects; i++)
		total += xp_trace_objects[i]->nsites;
	struct change *c = xp_malloc((total ? total : 1) * sizeof(*c));
	size_t n = 0;
	if (!sorted || !pins || !c) {
		xp_trace_patch_error = "out of memory";
		err = -ENOMEM;
		goto out;
	}
	if (naddrs)
		memcpy(sorted, addrs, naddrs * sizeof(uintptr_t));
	qsort(sorted, naddrs, sizeof(uintptr_t), cmp_addr);
	for (size_t i = 0; i < naddrs; i++)
		if (!known_site(sorted[i])) {
			xp_trace_patch_error = "not a patch site of a loaded object";
			err = -EINVAL;
			goto out;
		}

	for (size_t i = 0; i < xp_trace_nobjects; i++) {
		struct xp_trace_object *o = xp_trace_objects[i];
		size_t mine = 0;
		for (size_t j = 0; j < o->nsites; j++)
			mine += o->on[j] != on && (!on || wanted(o->sites[j], sorted, naddrs));
		if (!mine)
			continue;
		/* Unloaded since the refresh: nothing of it to switch. */
		if (!(pins[i] = xp_trace_object_pin(o)))
			continue;
		if (on && !o->trampoline && !(o->trampoline = tramp_new(o))) {
			err = -ENOMEM;
			goto out;
		}
		for (size_t j = 0; j < o->nsites; j++) {
			if (o->on[j] == on || (on && !wanted(o->sites[j], sorted, naddrs)))
				continue;
			struct change *ch = &c[n];
			ch->site = o->sites[j];
			memcpy(ch->old, (const void *)ch->site, XP_TRACE_SITE_LEN);
			/* The bytes must still be what we think they are; a
			 * mapping replaced since the refresh is left alone. */
			uint8_t expect[XP_TRACE_SITE_LEN];
			call_bytes(expect, ch->site, o->trampoline);
			if (on ? !xp_trace_site_is_nop(ch->old) : memcmp(ch->old, expect, XP_TRACE_SITE_LEN) != 0)
				continue;
			if (on)
				memcpy(ch->new, expect, XP_TRACE_SITE_LEN);
			else
				memcpy(ch->new, XP_TRACE_NOP5, XP_TRACE_SITE_LEN);
			ch->on = &o->on[j];
			ch->to = (uint8_t)on;
			n++;
		}
	}
	/* Nothing to switch needs nothing: not even a thread's mask matters. */
	if (n && !(err = prepare()))
		err = switch_sites(c, n);
out:
	for (size_t i = 0; pins && i < xp_trace_nobjects; i++)
		xp_trace_object_unpin(pins[i]);
	free(c);
	free(pins);
	free(sorted);
	return err;
}

int xp_trace_patch_on(const uintptr_t *addrs, size_t naddrs)
{
	return patch(1, addrs, naddrs);
}

int xp_trace_patch_off(void)
{
	return patch(0, NULL, 0);
}
