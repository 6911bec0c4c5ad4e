/* SPDX-License-Identifier: MIT */
/* bpf_floor -- load bench/bpf_floor.bpf.o (programs that do nothing, on
 * mclat's hooks), attach every program, print "armed", and stay attached
 * until SIGINT or SIGTERM.  The syscalls:* programs need tracefs mounted
 * (bench/mclat_bench.py mounts it for the run).
 *
 *   bpf_floor OBJECT */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <bpf/libbpf.h>

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: bpf_floor OBJECT\n");
		return 2;
	}
	sigset_t stop;
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	sigprocmask(SIG_BLOCK, &stop, NULL);
	struct bpf_object *obj = bpf_object__open_file(argv[1], NULL);
	if (!obj) {
		fprintf(stderr, "bpf_floor: cannot open %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	if (bpf_object__load(obj)) {
		fprintf(stderr, "bpf_floor: cannot load %s: %s\n", argv[1], strerror(errno));
		bpf_object__close(obj);
		return 1;
	}
	struct bpf_program *p;
	struct bpf_link *links[32];
	int attached = 0, rc = 0;
	bpf_object__for_each_program(p, obj) {
		if (attached == 32 || !(links[attached] = bpf_program__attach(p))) {
			fprintf(stderr, "bpf_floor: cannot attach %s: %s\n", bpf_program__name(p),
				attached == 32 ? "too many programs" : strerror(errno));
			rc = 1;
			goto out;
		}
		attached++;
	}
	printf("armed: %d programs\n", attached);
	fflush(stdout);
	int sig;
	sigwait(&stop, &sig); /* blocked since the start: none can be missed */
out:
	while (attached > 0)
		bpf_link__destroy(links[--attached]);
	bpf_object__close(obj);
	return rc;
}
