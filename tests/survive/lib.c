/* lib.c - a library die.c loads while recording (dlopen): its names are
 * string literals in a file mapped after the session started. */
#include "loom/loom.h"

void die_lib_ranges(int n) {
  for (int i = 0; i < n; i++) {
    loom_range_push("from a library");
    loom_range_pop();
  }
}
