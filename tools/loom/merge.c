/*
 * merge.c - `loom merge TRACE... -o OUT [--sort-memory MB] [--no-align]`:
 * one timeline from the traces of several processes or ranks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom/loom.h"

static int usage(void) {
  fprintf(stderr, "usage: loom merge TRACE... -o OUT [--sort-memory MB] [--no-align]\n"
                  "  OUT: .json, .json.gz or .pftrace; one process group per rank, clocks\n"
                  "  aligned from the traces' clock_sync points, messages as flows\n");
  return 2;
}

int cmd_merge(int argc, char **argv) {
  loom_merge_config cfg = {.struct_size = sizeof cfg};
  const char **in = calloc((size_t)argc, sizeof *in);
  if (!in) return 1;
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    int more = i + 1 < argc;
    if (!strcmp(a, "-o") && more) cfg.output = argv[++i];
    else if (!strcmp(a, "--sort-memory") && more) cfg.sort_memory = strtoull(argv[++i], NULL, 10) << 20;
    else if (!strcmp(a, "--no-align")) cfg.flags |= LOOM_MERGE_F_NO_ALIGN;
    else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "loom merge: unknown or incomplete option '%s'\n", a);
      free(in);
      return usage();
    } else in[cfg.ninputs++] = a;
  }
  if (!cfg.output || !cfg.ninputs) {
    if (!cfg.output) fprintf(stderr, "loom merge: no output given (-o OUT)\n");
    if (!cfg.ninputs) fprintf(stderr, "loom merge: no input traces given\n");
    free(in);
    return usage();
  }
  cfg.inputs = in;
  loom_merge_result r = {.struct_size = sizeof r};
  loom_status st = loom_merge(&cfg, &r);
  free(in);
  if (st != LOOM_OK) {
    fprintf(stderr, "loom merge: %s\n", loom_last_error());
    return 1;
  }
  printf("%s: %u processes, %llu events, %llu flows, %llu warnings\n", cfg.output, r.processes,
         (unsigned long long)r.events, (unsigned long long)r.flows, (unsigned long long)r.warnings);
  return 0;
}
