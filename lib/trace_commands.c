/* The agent's `trace` command (issue 11): start, stop, status, clear, and
 * the buffer directory the tool reads. */
#include "trace.h"

#include "agent.h"
#include "wire.h"

int xp_trace_command(char *args, struct textbuf *out)
{
	(void)args;
	tb_puts(out, "trace: not built yet\n");
	return XP_ERR;
}
