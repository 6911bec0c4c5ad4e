/* SPDX-License-Identifier: MIT */
/* `xprobes list` alone, for building under AddressSanitizer and UBSan:
 * the corruption test runs it on damaged files, where a stray read that
 * does not crash the normal build still fails here. */
#include "xprobes.h" /* list_main (tools/xprobes/list.c) */

int main(int argc, char **argv)
{
	argv[0] = "list";
	return list_main(argc, argv);
}
