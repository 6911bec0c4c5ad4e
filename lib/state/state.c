/* SPDX-License-Identifier: MIT */
/* The agent's state: one definition, which every layer above reaches
 * through state.h. */
#include "state.h"

struct xp_state xp_agent = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.pending = { NULL, 0, 0, 64 * 1024, 0 },
};
