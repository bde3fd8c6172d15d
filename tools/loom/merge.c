/*
 * merge.c - `loom merge TRACE... -o OUT [--sort-memory SIZE] [--no-align]`:
 * one timeline from the traces of several processes or ranks, merged in
 * memory bounded by the sort budget (docs/multirank.md).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom/loom.h"
#include "spec.h"

/* The synopsis (spec.c) on stderr; 2, the status of a wrong command line. */
static int usage(void) {
  cli_usage(stderr, cli_command("merge"));
  return 2;
}

/* SIZE: a number with k, m or g (a plain number is MiB); 0 when bad. */
static uint64_t parse_size(const char *s) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *s == '-') return 0;
  int shift = 20;
  if (*end == 'k' || *end == 'K') shift = 10, end++;
  else if (*end == 'm' || *end == 'M') shift = 20, end++;
  else if (*end == 'g' || *end == 'G') shift = 30, end++;
  if (*end == 'b' || *end == 'B') end++;
  if (*end || v > (UINT64_MAX >> shift)) return 0;
  return (uint64_t)v << shift;
}

int cmd_merge(int argc, char **argv) {
  loom_merge_config cfg = {.struct_size = sizeof cfg};
  const char **in = calloc((size_t)argc, sizeof *in);
  if (!in) return 1;
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    int more = i + 1 < argc;
    if (!strcmp(a, "-o") && more) cfg.output = argv[++i];
    else if (!strcmp(a, "--sort-memory") && more) {
      cfg.sort_memory = parse_size(argv[++i]);
      if (cfg.sort_memory < (1u << 20)) {
        fprintf(stderr,
                "loom merge: --sort-memory '%s' is not a size of at least 1m (e.g. 64m, 2g)\n",
                argv[i]);
        free(in);
        return 2;
      }
    }
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
    const char *e = loom_last_error(); /* most messages name the command already */
    fprintf(stderr, "%s%s\n", strncmp(e, "loom merge:", 11) ? "loom merge: " : "", e);
    return 1;
  }
  printf("%s: %u processes, %llu events, %llu flows, %llu warnings (sorted in %llu runs, %llu "
         "spilled, within %llu MiB)\n", cfg.output, r.processes, (unsigned long long)r.events,
         (unsigned long long)r.flows, (unsigned long long)r.warnings,
         (unsigned long long)r.sort_runs,
         (unsigned long long)r.sort_spilled, (unsigned long long)(r.sort_memory >> 20));
  return 0;
}
