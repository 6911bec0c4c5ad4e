/* SPDX-License-Identifier: MIT */
/* SDT probes made with <sys/sdt.h> (as other tools' builds do), next to
 * one plain XProbes site: `xprobes list` marks the former SDT only. */
#include <sys/sdt.h>

#include <xprobes/site.h>

int main(int argc, char **argv)
{
	DTRACE_PROBE2(legacy, ping, argc, argv);
	STAP_PROBE(legacy, bare);
	XPROBES_SITE(plain_tick, (long), (argc));
	return 0;
}
