#ifndef XP_LIST_H
#define XP_LIST_H

/* `xprobes list ...`: argv[0] is "list".  Returns the exit status. */
int list_main(int argc, char **argv);

#endif
