/*
 * fuzz_kineto_cfg.c - Kineto's on-demand configuration keys
 * (src/ctl/kineto_cfg.c).  A request that parses asks for exactly one
 * kind of window (steps or a positive duration), with a start step of -1 or
 * more and a NUL-terminated file name; resolving its start step against any
 * next step gives a step at or after it, on the round-up multiple; a
 * failure names the line or key.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <loom/loom.h>

#include "base/base.h"
#include "fuzz.h"
#include "kineto_cfg.h"

static void count_warn(const char *msg, void *ud) {
  FUZZ_CHECK(msg && *msg, "an empty warning");
  ++*(int *)ud;
}

static void check_start(const loom__ondemand *r, int64_t next) {
  int64_t s = loom__ondemand_start(r, next);
  if (r->start_step < 0) {
    FUZZ_CHECK(s == -1, "no start step asked, resolved to %lld", (long long)s);
    return;
  }
  FUZZ_CHECK(s >= 0, "start step %lld resolved to %lld (next %lld)", (long long)r->start_step,
             (long long)s, (long long)next);
  if (s != r->start_step) {
    FUZZ_CHECK(s >= next, "resolved to %lld, before the next step %lld", (long long)s,
               (long long)next);
    if (r->roundup > 0) FUZZ_CHECK(s % r->roundup == 0, "%lld not a multiple of %lld",
                                   (long long)s, (long long)r->roundup);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *s = loom_fuzz_str(data, size);
  loom__ondemand r;
  loom__ondemand_init(&r);
  char err[512] = "";
  int nwarn = 0;
  if (loom__kineto_parse(s, &r, count_warn, &nwarn, err, sizeof err) != 0) {
    FUZZ_CHECK(err[0], "a bad request without a message");
    free(s);
    return 0;
  }
  FUZZ_CHECK((r.steps > 0) != (r.duration_ns > 0), "steps %lld and duration %lld ns",
             (long long)r.steps, (long long)r.duration_ns);
  FUZZ_CHECK(r.start_step >= -1 && r.warmup >= 0 && r.roundup >= 0, "start %lld warmup %lld "
             "roundup %lld", (long long)r.start_step, (long long)r.warmup, (long long)r.roundup);
  FUZZ_CHECK(memchr(r.out, 0, sizeof r.out), "the file name is not terminated");
  const int64_t next[] = {0, 1, 7, 1000003, INT32_MAX, (int64_t)1 << 40};
  for (size_t i = 0; i < sizeof next / sizeof next[0]; i++) check_start(&r, next[i]);
  char kinds[256];
  loom__kinds_format(r.kinds, kinds, sizeof kinds);
  FUZZ_CHECK(!r.kinds == !kinds[0], "kinds %#x formatted as '%s'", r.kinds, kinds);
  free(s);
  return 0;
}
