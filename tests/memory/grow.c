/*
 * grow.c - a program that grows until its address space runs out, for
 * test_memory_oom.c: it limits itself (RLIMIT_AS) to what it maps now plus
 * LIMIT_MB, then in an op "grow" allocates 1 MiB blocks (each touched and
 * told to loom_memory_alloc) until malloc fails, printing "allocated N"
 * after each one (stdout unbuffered); then abort(), as a C++ program does
 * when new throws and nobody catches it.  Every 8th block is freed again
 * (loom_memory_free), so the live set is not all it allocated; the first
 * block, allocated in an op "setup" before the loop, is the largest holder.
 * usage: grow LIMIT_MB
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "loom/loom.h"

#define MB (1u << 20)

static unsigned long mapped_bytes(void) {
  unsigned long pages = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f && fscanf(f, "%lu", &pages) != 1) pages = 0;
  if (f) fclose(f);
  return pages * (unsigned long)sysconf(_SC_PAGESIZE);
}

int main(int argc, char **argv) {
  unsigned long limit = (argc > 1 ? strtoul(argv[1], NULL, 10) : 256) * MB;
  setvbuf(stdout, NULL, _IONBF, 0);
  loom_op_begin("setup", 1);
  char *big = malloc(64 * MB);
  if (!big) return 2;
  memset(big, 1, 64 * MB);
  loom_memory_alloc((uintptr_t)big, 64 * MB, LOOM_MEMORY_HOST, -1, 0);
  loom_op_end();
  struct rlimit rl = {mapped_bytes() + limit, mapped_bytes() + limit};
  if (setrlimit(RLIMIT_AS, &rl) != 0) return 3;
  loom_op_begin("grow", 2);
  char *prev = NULL;
  for (unsigned long n = 1;; n++) {
    char *p = malloc(MB);
    if (!p) abort();
    memset(p, (int)n, MB);
    loom_memory_alloc((uintptr_t)p, MB, LOOM_MEMORY_HOST, -1, 0);
    printf("allocated %lu\n", n);
    if (n % 8 == 0) {
      loom_memory_free((uintptr_t)prev, 0, LOOM_MEMORY_HOST, -1, 0);
      free(prev);
      printf("freed %lu\n", n - 1);
    }
    prev = p;
  }
}
