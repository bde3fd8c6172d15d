/*
 * record_opts.h - the command line of `loom record`: what each option sets.
 * Options that only become session options (triggers, windows, ...) are
 * appended to `options` as KEY=VALUE, so the preload and library users read
 * them the same way.
 */
#ifndef LOOM_RECORD_OPTS_H
#define LOOM_RECORD_OPTS_H
#include <stddef.h>

typedef struct record_opts {
  const char *out, *devices, *follow;
  char options[8192];   /* session options, "k=v,k=v" */
  const char *plugins[64];
  size_t nplugins;
  int prog;             /* argv index of the program */
  int memory_host;      /* --memory host: the host heap too (device type "heap") */
} record_opts;

/* Parses argv[2..]; 0, or 2 after a message (or the usage text). */
int record_opts_parse(record_opts *o, int argc, char **argv);
/* Checks the output before the program runs: a trace's known extension
 * (-o FILE, or a window pattern) and a folder where loom can create its
 * files (the name's length included).  0, or 2 after a message. */
int record_opts_check_out(const char *out, int to_dir);
#endif
