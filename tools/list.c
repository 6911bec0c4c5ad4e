/* xprobes list: sites and SDT probes in files or a process (issue 3). */
#include <stdio.h>

#include "list.h"

int list_main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "xprobes list: not implemented yet\n");
	return 1;
}
