/*
 * fuzz_merge.c - merge inputs (src/merge): the parts of the input between
 * LOOM_FUZZ_SEP lines are traces, one per rank, merged with loom_merge (the
 * input's length picks the output format and whether clocks are aligned).
 * A merge that fails names why and writes nothing; one that succeeds
 * writes a trace that loads with the events it counted.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <loom/loom.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *part[4];
  size_t len[4];
  size_t k = loom_fuzz_split(data, size, part, len, 4);
  char names[4][512];
  const char *in[4];
  for (size_t i = 0; i < k; i++) {
    char nm[32];
    snprintf(nm, sizeof nm, "in%zu.json", i);
    const char *p = loom_fuzz_file(nm, part[i], len[i]);
    if (!p) return 0;
    snprintf(names[i], sizeof names[i], "%s", p);
    in[i] = names[i];
  }
  char out[512];
  snprintf(out, sizeof out, "%s", loom_fuzz_path(size % 3 == 2 ? "out.pftrace" : "out.json"));
  unlink(out);
  loom_merge_config cfg = {.struct_size = sizeof cfg, .ninputs = (uint32_t)k, .inputs = in,
                           .output = out, .sort_memory = 1 << 20, /* the least: 256 MiB is slow under ASan */
                           .flags = size % 5 == 4 ? LOOM_MERGE_F_NO_ALIGN : 0};
  loom_merge_result res = {.struct_size = sizeof res};
  loom_status st = loom_merge(&cfg, &res);
  if (st != LOOM_OK) {
    FUZZ_CHECK(*loom_last_error(), "failed merge (%d) without a message", (int)st);
    FUZZ_CHECK(access(out, F_OK) != 0, "a failed merge left %s", out);
    return 0;
  }
  loom_trace *t = NULL;
  FUZZ_CHECK(loom_trace_load(out, &t) == LOOM_OK, "the merged trace does not load");
  FUZZ_CHECK(loom_trace_event_count(t) == res.events, "merge wrote %llu events, %zu load",
             (unsigned long long)res.events, loom_trace_event_count(t));
  loom_trace_free(t);
  return 0;
}
