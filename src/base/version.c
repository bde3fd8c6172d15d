/*
 * version.c - the run-time version.
 */
#include "loom/loom.h"

#define STR2(x) #x
#define STR(x) STR2(x)

unsigned loom_version(void) { return LOOM_VERSION_HEX; }

const char *loom_version_string(void) {
  return STR(LOOM_VERSION_MAJOR) "." STR(LOOM_VERSION_MINOR) "." STR(LOOM_VERSION_PATCH);
}
