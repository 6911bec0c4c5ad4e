/* SPDX-License-Identifier: MIT */
/* Calls tests/trace/dwarf_callee.c's library, for uftrace to record it. */
int lib_entry(void);

int main(void)
{
	return lib_entry() > 0 ? 0 : 1;
}
