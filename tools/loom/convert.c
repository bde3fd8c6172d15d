/*
 * convert.c - `loom convert IN OUT`: a trace from any format loom reads to
 * any it writes, with the input's warnings printed and carried into OUT.
 */
#include <stdio.h>

#include "loom/loom.h"
#include "spec.h"

/* loom convert IN OUT: any format loom reads to any it writes. */
int cmd_convert(int argc, char **argv) {
  if (argc != 4) {
    cli_usage(stderr, cli_command("convert"));
    return 2;
  }
  loom_trace *t;
  if (loom_trace_load(argv[2], &t) != LOOM_OK) {
    fprintf(stderr, "loom: %s\n", loom_last_error());
    return 1;
  }
  /* What the input says about itself, the reader's bad values among it
   * (they travel into OUT as its warnings). */
  size_t nw = loom_trace_warning_count(t);
  for (size_t i = 0; i < nw && i < 20; i++)
    fprintf(stderr, "loom: warning: %s\n", loom_trace_warning(t, i));
  if (nw > 20) fprintf(stderr, "loom: ... and %zu more warnings (in %s)\n", nw - 20, argv[3]);
  loom_status st = loom_trace_save(t, argv[3]);
  if (st != LOOM_OK) {
    fprintf(stderr, "loom: %s\n", loom_last_error());
    loom_trace_free(t);
    return 1;
  }
  loom_trace_summary s = {.struct_size = sizeof s};
  loom_trace_summarize(t, &s);
  printf("%s -> %s: %llu events, %llu flows, %llu devices\n", argv[2], argv[3],
         (unsigned long long)s.events, (unsigned long long)s.flows, (unsigned long long)s.devices);
  loom_trace_free(t);
  return 0;
}
