/*
 * kinds.c - record kind names: one kind (loom_kind_name) and a LOOM_KIND_BIT
 * mask as a list ("kernel,memcpy"), as windows label their traces and
 * loom trigger shows a request.
 */
#include <stdio.h>

#include "base/base.h"
#include "loom/loom.h"

const char *loom_kind_name(loom_kind k) {
  static const char *names[LOOM_KIND_COUNT_] = {
      "kernel", "memcpy", "memset", "runtime", "driver", "sync", "user_range",
      "cpu_op", "instant", "counter", "collective", "overhead", "marker", "sample", "memory"};
  return (unsigned)k < LOOM_KIND_COUNT_ ? names[k] : 0;
}

void loom__kinds_format(unsigned kinds, char *buf, size_t n) {
  size_t l = 0;
  buf[0] = 0;
  for (int k = 0; k < LOOM_KIND_COUNT_ && l < n; k++)
    if (kinds & LOOM_KIND_BIT(k))
      l += (size_t)snprintf(buf + l, n - l, "%s%s", l ? "," : "", loom_kind_name((loom_kind)k));
}
