/* SPDX-License-Identifier: MIT */
/* A kept request (trace start --requests) as the readers show it: one
 * call named by its label ("get user:42 3.127ms"), entered at the
 * request's begin and left at its end, with the request's calls nested
 * under it.  In the ring the request is framed by label records (lib/
 * trace/trace.h): a header with the text's length at the begin's time,
 * the text 7 bytes a record, then the request's records and an end
 * record at the end's time.  The uftrace writer (trace_uftrace.c) makes
 * the call a symbol of its own; the live views (trace cat, trace stat)
 * get it from trace_labels_apply (trace_read.c).  Both read the label
 * with the functions here. */
#define _GNU_SOURCE
#include "xprobes.h"

#include <string.h>

#include "../common/keytext_rule.h"

void trace_label_clean(char *s)
{
	size_t n = strlen(s);
	for (size_t i = 0; i < n;) {
		uint32_t cp;
		int len = keytext_rule_utf8((const unsigned char *)s + i, n - i, &cp);
		if (len > 0 && cp >= 0x20 && !(cp >= 0x7f && cp <= 0x9f)) {
			i += (size_t)len;
			continue;
		}
		s[i++] = '?'; /* a control or a byte outside UTF-8: the target's */
	}
}

void trace_label_start(struct trace_label *l, uint64_t addr, uint64_t ns)
{
	uint64_t v = addr & ((UINT64_C(1) << 56) - 1);
	l->len = v < XP_TRACE_LABEL_MAX ? (size_t)v : XP_TRACE_LABEL_MAX;
	l->have = 0;
	l->ns = ns;
	l->open = 1;
}

int trace_label_text(struct trace_label *l, uint64_t addr)
{
	uint64_t v = addr & ((UINT64_C(1) << 56) - 1);
	if (!l->open || !l->len)
		return 0; /* no header before it, or whole already: padding */
	for (int j = 0; j < 7 && l->have < l->len; j++)
		l->text[l->have++] = (char)(v >> (8 * j));
	if (l->have < l->len)
		return 0;
	l->text[l->len] = '\0';
	l->len = 0;
	trace_label_clean(l->text);
	if (!l->text[0])
		strcpy(l->text, "?");
	return 1;
}
