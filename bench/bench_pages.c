/*
 * bench_pages.c - the floor under every record loom writes to new memory:
 * what a page of fresh memory costs the thread that first writes it, for
 * the memory loom records into under `loom record` (a MAP_SHARED file in
 * tmpfs, the arena: docs/survival.md) against private anonymous memory
 * (malloc's), each taken page by page by faults and in batches made ready
 * with madvise(MADV_POPULATE_WRITE) (Linux 5.14), and filled by the kernel
 * from a warm 256 KiB buffer (process_vm_writev to the process itself, as a
 * staged thread's full chunk is copied: src/record/hostrec.c; the buffer's
 * writes included).  Divided by the bytes a command or an op writes
 * (docs/opencl.md, README), it says how much of an enqueue's cost is the
 * memory alone.
 *
 * Rounds interleave the ways (the order rotates); min and median ns per
 * page and per byte over the rounds, of the thread's CPU time.
 * usage: bench_pages [MIB [ROUNDS [SHM_DIR]]]  (default 64, 7, /dev/shm)
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

enum { PAGE = 4096, BATCH = 64, WAYS = 6, MAXR = 64 };
static const char *names[WAYS] = {"tmpfs file, faults", "tmpfs file, populated in 256 KiB",
                                  "anonymous, faults", "anonymous, populated in 256 KiB",
                                  "tmpfs file, kernel copy of 256 KiB",
                                  "anonymous, kernel copy of 256 KiB"};
static char warm[BATCH * PAGE];

/* ways 4 and 5: each 256 KiB written (64 bytes at a time) into the warm
 * buffer, then copied by the kernel into the mapping; 0, or -1 */
static int kernel_fill(char *p, size_t bytes) {
  for (size_t off = 0; off < bytes; off += sizeof warm) {
    for (size_t i = 0; i < sizeof warm; i += 64) memset(warm + i, (int)(off + i), 64);
    struct iovec l = {warm, sizeof warm}, r = {p + off, sizeof warm};
    if (process_vm_writev(getpid(), &l, 1, &r, 1, 0) != (ssize_t)sizeof warm) return -1;
  }
  return 0;
}

static double cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* ns per page of writing one byte to each page of a new mapping; -1 when
 * the way cannot run here. */
static double one(int way, size_t bytes, const char *dir) {
  int fd = -1;
  char path[4096];
  if (way < 2 || way == 4) {
    snprintf(path, sizeof path, "%s/loom-bench-pages-%d", dir, (int)getpid());
    fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)bytes) != 0) {
      perror(path);
      exit(1);
    }
    unlink(path);
  }
  char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, fd < 0 ? MAP_PRIVATE | MAP_ANONYMOUS : MAP_SHARED,
                 fd, 0);
  if (p == MAP_FAILED) {
    perror("mmap");
    exit(1);
  }
  int populate = way < 4 && (way & 1);
  double t0 = cpu_ns(), ok = 1;
  if (way >= 4) ok = kernel_fill(p, bytes) == 0;
  for (size_t off = 0; way < 4 && off < bytes; off += PAGE) {
    if (populate && off % ((size_t)BATCH * PAGE) == 0 &&
        madvise(p + off, (size_t)BATCH * PAGE, MADV_POPULATE_WRITE) != 0)
      ok = 0;
    p[off] = 1;
  }
  double t = cpu_ns() - t0;
  munmap(p, bytes);
  if (fd >= 0) close(fd);
  return ok ? t / (double)(bytes / PAGE) : -1;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  size_t mib = argc > 1 ? strtoull(argv[1], NULL, 10) : 64;
  int rounds = argc > 2 ? atoi(argv[2]) : 7;
  const char *dir = argc > 3 ? argv[3] : "/dev/shm";
  if (!mib) mib = 64;
  rounds = rounds < 1 ? 1 : rounds > MAXR ? MAXR : rounds;
  double r[WAYS][MAXR];
  for (int i = 0; i < rounds; i++)
    for (int k = 0; k < WAYS; k++) {
      int w = (k + i) % WAYS;
      r[w][i] = one(w, mib << 20, dir);
    }
  printf("bench_pages: %zu MiB per way, %d rounds, tmpfs folder %s; thread CPU per 4 KiB page "
         "(min / median), and per byte\n", mib, rounds, dir);
  for (int w = 0; w < WAYS; w++) {
    qsort(r[w], (size_t)rounds, sizeof r[w][0], cmp);
    if (r[w][0] < 0) {
      printf("  %-34s not available here (%s failed)\n", names[w],
             w < 4 ? "madvise MADV_POPULATE_WRITE" : "process_vm_writev");
      continue;
    }
    printf("  %-34s %6.0f / %6.0f ns per page, %.2f / %.2f ns per byte\n", names[w], r[w][0],
           r[w][rounds / 2], r[w][0] / PAGE, r[w][rounds / 2] / PAGE);
  }
  return 0;
}
