/*
 * fuzz_json.c - the JSON reader whole: loom_trace_load on any bytes.  A
 * trace that loads has readable events and survives saving as JSON and as
 * pftrace with the same counts.  Each input is also read with yajl on a
 * thread of its own (json_tape.h, what big files get): the same status, the
 * same message and the same event count.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <loom/loom.h>

#include "export/json_tape.h"
#include "fuzz.h"

static void same_on_two_threads(const char *p, loom_status st, size_t events) {
  char err[512];
  snprintf(err, sizeof err, "%s", st == LOOM_OK ? "" : loom_last_error());
  size_t keep = loom__json_tape_min;
  loom__json_tape_min = 0;
  loom_trace *t = NULL;
  loom_status st2 = loom_trace_load(p, &t);
  loom__json_tape_min = keep;
  FUZZ_CHECK(st2 == st, "two threads: status %d, one thread %d", (int)st2, (int)st);
  FUZZ_CHECK(st != LOOM_OK || loom_trace_event_count(t) == events, "two threads: %zu events, one %zu",
             loom_trace_event_count(t), events);
  FUZZ_CHECK(st == LOOM_OK || !strcmp(err, loom_last_error()), "two threads: \"%s\", one \"%s\"",
             loom_last_error(), err);
  loom_trace_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *p = loom_fuzz_file("in.json", data, size);
  if (!p) return 0;
  loom_trace *t = NULL;
  loom_status st = loom_trace_load(p, &t);
  same_on_two_threads(p, st, t ? loom_trace_event_count(t) : 0);
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
