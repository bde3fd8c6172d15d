/*
 * heapapp.c - a program that knows nothing of loom, for tests/test_heap.c:
 * allocations of sizes no C library or loader makes (the test finds them by
 * size), each freed but one (a leak), then THREADS threads that each
 * allocate and free SMALL bytes PER_THREAD times.  It prints whose malloc
 * it runs with ("heap: loom" when libloom-heap.so is preloaded, else "heap:
 * libc"), that a failed allocation still fails with ENOMEM, and a checksum
 * of what it wrote, so runs with and without loom can be compared.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 4
#define PER_THREAD 1000
#define SMALL 3331

static unsigned long sum;
/* Every block is seen here, so no compiler drops a malloc/free pair. */
static void *volatile seen;

static void touch(void *p, size_t n) {
  seen = p;
  memset(p, 7, n);
  sum += ((unsigned char *)seen)[n - 1];
}

static void *worker(void *arg) {
  unsigned long *s = arg;
  for (int i = 0; i < PER_THREAD; i++) {
    unsigned char *p = malloc(SMALL);
    seen = p;
    p[SMALL - 1] = (unsigned char)i;
    *s += p[SMALL - 1];
    free(p);
  }
  return NULL;
}

int main(void) {
  Dl_info info;
  void *m = dlsym(RTLD_DEFAULT, "malloc");
  printf("heap: %s\n", m && dladdr(m, &info) && info.dli_fname &&
                               strstr(info.dli_fname, "libloom-heap") ? "loom" : "libc");
  for (int i = 0; i < 5; i++) {
    void *p = malloc(100003);
    touch(p, 100003);
    free(p);
  }
  for (int i = 0; i < 2; i++) {
    void *p = calloc(7, 10007);
    seen = p;
    sum += ((unsigned char *)p)[70048];
    free(p);
  }
  char *r = malloc(20011);
  touch(r, 20011);
  r = realloc(r, 40013);
  touch(r, 40013);
  free(r);
  void *q = NULL;
  if (posix_memalign(&q, 64, 30011) == 0) touch(q, 30011), free(q);
  q = aligned_alloc(128, 12928);
  touch(q, 12928);
  free(q);
  q = memalign(256, 50021);
  touch(q, 50021);
  free(q);
  void *leak = malloc(70001);
  touch(leak, 70001);
  errno = 0;
  void *huge = malloc(SIZE_MAX / 2);
  printf("huge: %s\n", !huge && errno == ENOMEM ? "ENOMEM" : "unexpected");
  pthread_t t[THREADS];
  unsigned long s[THREADS] = {0};
  for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, worker, &s[i]);
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL), sum += s[i];
  printf("sum: %lu\n", sum);
  return 0;
}
