/*
 * memory_summary_prog.c - a program for `loom record`'s summary of memory
 * (test cli_memory_summary): device 0 gets 1 MiB and 3 MiB in op
 * "train::alloc_weights", then 2 MiB in "train::step", which frees the
 * first block and an address never allocated.  Peak 6 MiB, reached in
 * train::step, held by train::alloc_weights (4 MiB) and train::step (2 MiB);
 * 2 blocks (5 MiB) still allocated at the end; 1 unknown free.
 */
#include <stdint.h>

#include "loom/loom.h"

int main(void) {
  loom_op_begin("train::alloc_weights", 1);
  loom_memory_alloc(0x1000, 1 << 20, LOOM_MEMORY_DEVICE, 0, 0);
  loom_memory_alloc(0x2000, 3 << 20, LOOM_MEMORY_DEVICE, 0, 0);
  loom_op_end();
  loom_op_begin("train::step", 2);
  loom_memory_alloc(0x3000, 2 << 20, LOOM_MEMORY_DEVICE, 0, 0);
  loom_memory_free(0x1000, 0, LOOM_MEMORY_DEVICE, 0, 0);
  loom_memory_free(0x9999, 0, LOOM_MEMORY_DEVICE, 0, 0);
  loom_op_end();
  return 0;
}
