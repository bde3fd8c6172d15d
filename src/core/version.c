/*
 * version.c - run-time version and kind names.
 */
#include "loom/loom.h"

#define STR2(x) #x
#define STR(x) STR2(x)

unsigned loom_version(void) { return LOOM_VERSION_HEX; }

const char *loom_version_string(void) {
  return STR(LOOM_VERSION_MAJOR) "." STR(LOOM_VERSION_MINOR) "." STR(LOOM_VERSION_PATCH);
}

const char *loom_kind_name(loom_kind k) {
  static const char *names[LOOM_KIND_COUNT_] = {
      "kernel", "memcpy", "memset", "runtime", "driver", "sync", "user_range",
      "cpu_op", "instant", "counter", "collective", "overhead", "marker", "sample"};
  return (unsigned)k < LOOM_KIND_COUNT_ ? names[k] : 0;
}
