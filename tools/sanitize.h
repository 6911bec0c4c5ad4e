/* Replies are text from another process: before the tool prints one, it
 * takes out whatever a terminal would obey instead of show. */
#ifndef XP_SANITIZE_H
#define XP_SANITIZE_H

/* In place: drops control characters (below 0x20 except newline and tab,
 * DEL, and C1 controls, in UTF-8 or as single bytes) and whole escape
 * sequences (CSI, OSC and other strings, two- and three-byte ones).
 * Returns text. */
char *sanitize_text(char *text);

#endif
