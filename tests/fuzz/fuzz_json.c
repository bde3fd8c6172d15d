/*
 * fuzz_json.c - the JSON reader whole: loom_trace_load on any bytes.  A
 * trace that loads has readable events and survives saving as JSON and as
 * pftrace with the same counts.
 */
#include <loom/loom.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *p = loom_fuzz_file("in.json", data, size);
  if (!p) return 0;
  loom_trace *t = NULL;
  loom_status st = loom_trace_load(p, &t);
  if (st != LOOM_OK) {
    FUZZ_CHECK(!t && *loom_last_error(), "failed load (%d) without a message or with a trace",
               (int)st);
    return 0;
  }
  loom_fuzz_check_events(t);
  loom_fuzz_round_trip(t);
  loom_trace_free(t);
  return 0;
}
