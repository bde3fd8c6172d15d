/*
 * fuzz_pftrace.c - the Perfetto protobuf reader: any bytes as a .pftrace
 * (loom_trace_load picks the reader by content; a first byte other than
 * 0x0a is made 0x0a so that every input reaches the protobuf reader).  What
 * loads has readable events and survives saving again.
 */
#include <stdlib.h>
#include <string.h>

#include <loom/loom.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!size) return 0;
  uint8_t *d = malloc(size);
  memcpy(d, data, size);
  d[0] = 0x0a;
  const char *p = loom_fuzz_file("in.pftrace", d, size);
  free(d);
  if (!p) return 0;
  loom_trace *t = NULL;
  loom_status st = loom_trace_load(p, &t);
  if (st != LOOM_OK) {
    FUZZ_CHECK(!t && *loom_last_error(), "failed load (%d) without a message", (int)st);
    return 0;
  }
  loom_fuzz_check_events(t);
  loom_fuzz_round_trip(t);
  loom_trace_free(t);
  return 0;
}
