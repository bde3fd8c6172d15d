/*
 * workload.h - one round of every recording call loom.h offers, included by
 * test_active.c (compiled with loom.h's inline idle check) and by plain.c
 * (compiled with LOOM_NO_INLINE_CHECK, as a program built against a header
 * without the check calls libloom).  WORKLOAD names the function.  One
 * round records: 3 nested ranges (push, push_id, push_str), 1 async range,
 * 4 ops (op_begin, _id, _args, _raw), 1 instant, 1 counter, 2 memory events
 * (an allocation and its free); it returns the op id loom_op_current saw
 * inside the first op (0 when nothing records).  WORKLOAD_STEP names a
 * function that calls loom_step.
 */
#include <stdint.h>
#include <stdio.h>

#include "loom/loom.h"

static uint32_t WORKLOAD_FMT(const void *raw, uint32_t nraw, char *buf, size_t cap,
                             loom_arg *out, uint32_t max_out) {
  (void)raw, (void)nraw, (void)buf, (void)cap, (void)out, (void)max_out;
  return 0;
}

void WORKLOAD_STEP(void);
void WORKLOAD_STEP(void) { loom_step(); }

uint64_t WORKLOAD(loom_string_id id, unsigned round);
uint64_t WORKLOAD(loom_string_id id, unsigned round) {
  char tmp[32];
  snprintf(tmp, sizeof tmp, "str-%u", round % 2);
  loom_range_push("range");
  loom_range_push_id(id);
  loom_range_push_str(tmp);
  loom_range_pop();
  loom_range_pop();
  loom_range_pop();
  loom_range_begin(1000 + round, "async");
  loom_range_end(1000 + round);
  loom_op_begin("op", 7);
  uint64_t cur = loom_op_current();
  loom_op_end();
  loom_op_begin_id(id, 8);
  loom_op_end();
  loom_arg a = {.key = "seq", .type = LOOM_ARG_INT, .v.i = round};
  loom_op_begin_args("op_args", 9, &a, 1);
  loom_op_end();
  const uint32_t raw = round;
  loom_op_begin_raw("op_raw", 10, NULL, 0, &raw, sizeof raw, WORKLOAD_FMT);
  loom_op_end();
  loom_instant("instant");
  loom_counter("counter", round);
  loom_memory_alloc(0x10000 + round * 64, 64, LOOM_MEMORY_HOST, -1, 0);
  loom_memory_free(0x10000 + round * 64, 0, LOOM_MEMORY_HOST, -1, 0);
  return cur;
}
