/*
 * pager.c - host record chunks made present ahead of use, off the recording
 * threads (docs/survival.md, "Pages").
 *
 * A record written to a page of the shared-memory arena that the process
 * never touched pays for the page: a fault, and on a virtual machine with
 * shadow page tables a second trap at the first user access even after
 * MADV_POPULATE_WRITE (measured: ~12 us per 4 KiB page, ~100 ns per 32-byte
 * record, more than the record itself).  So under `loom record` a thread of
 * loom's (the pager) takes the next chunks from the arena before anyone
 * asks, populates them and reads one byte per page, which makes them present
 * for every thread of the process; a recording thread that needs a chunk
 * takes a ready one (loom__pager_take) and pays nothing per page (while the
 * pager is behind, it takes a quarter of a chunk of its own: hostrec.c).
 *
 * The pager is a thread in the program, so it starts only where one more
 * thread cannot change what the program does: in a process that already
 * runs threads of its own besides the calling one (a device runtime's, a
 * framework's pool; /proc/self/stat's count), never in a single-threaded
 * program (one that calls unshare(CLONE_NEWUSER) needs to stay so): there
 * the threads are staged instead (hostrec.c, stage_flip).  It
 * stops after a second in which no chunk was taken, and a forked child has
 * none.  Its chunks are arena objects not linked to any thread: the salvager
 * (which walks the threads' lists) never reads them.  They are handed over
 * under a lock, never touched by the pager again.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "arena.h"
#include "record.h"
#include "util/util.h"

enum { READY_MAX = 4, CHECK_EVERY = 8, IDLE_S = 1 };

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static void *ready[READY_MAX];
static int nready;
static size_t ready_bytes; /* the size of the chunks asked for */
static int running;        /* the thread exists */
static int taken;          /* a chunk was asked for since the pager last slept */
static unsigned asks;      /* takes since the thread count was last read */
static unsigned gen;       /* bumped when ready chunks are dropped */

/* Threads of the process, from /proc/self/stat (field 20); 0 if unknown. */
static long threads_now(void) {
  FILE *f = fopen("/proc/self/stat", "re");
  if (!f) return 0;
  char buf[1024];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char *p = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
  long v = 0;
  /* after ") ": state ppid pgrp session tty tpgid flags minflt cminflt
   * majflt cmajflt utime stime cutime cstime priority nice num_threads */
  if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %ld",
                   &v) != 1)
    return 0;
  return v;
}

/* Every page of [p, p + bytes) written once (a byte rewritten with its
 * value: the chunk is the pager's alone until handed over).  The arena made
 * them present when it handed out the chunk (MADV_POPULATE_WRITE, arena.c);
 * a first write from user space is still needed for the other threads'
 * first write to cost nothing (populating alone leaves it to trap; a read
 * maps the page read-only). */
static void make_present(void *p, size_t bytes) {
  for (uintptr_t q = (uintptr_t)p, e = q + bytes; q < e; q = (q | 4095) + 1) {
    volatile unsigned char *b = (volatile unsigned char *)q;
    *b = *b;
  }
}

/* The thread: keeps READY_MAX chunks of the asked size ready; returns after
 * IDLE_S seconds in which nobody took one. */
static void *pager_main(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "loom-pager");
  pthread_mutex_lock(&mu);
  for (;;) {
    if (nready == READY_MAX || !loom__arena_on()) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_sec += IDLE_S;
      taken = 0;
      if (pthread_cond_timedwait(&cv, &mu, &ts) == ETIMEDOUT && !taken) break;
      continue;
    }
    size_t bytes = ready_bytes;
    unsigned g = gen;
    pthread_mutex_unlock(&mu);
    void *c = loom__arena_alloc(LOOM__AO_CHUNK, bytes);
    if (c) make_present(c, bytes);
    pthread_mutex_lock(&mu);
    if (!c) break; /* the arena is full: the threads find out themselves */
    if (g != gen || bytes != ready_bytes || nready == READY_MAX) {
      pthread_mutex_unlock(&mu);
      loom__arena_free(c);
      pthread_mutex_lock(&mu);
      continue;
    }
    ready[nready++] = c;
  }
  running = 0;
  pthread_mutex_unlock(&mu);
  return NULL;
}

/* Whether the pager may run (mu held): the arena is on and the process has
 * other threads; the count is read on every CHECK_EVERY-th ask only. */
static int may_start(void) {
  if (!loom__arena_on() || asks++ % CHECK_EVERY) return 0;
  return threads_now() > 1;
}

void *loom__pager_take(size_t bytes, int *behind) {
  void *c = NULL, *drop[READY_MAX];
  int ndrop = 0;
  pthread_mutex_lock(&mu);
  if (bytes != ready_bytes) { /* a new chunk size: the ready ones are stale */
    while (nready) drop[ndrop++] = ready[--nready];
    ready_bytes = bytes;
    gen++;
  }
  if (nready) c = ready[--nready];
  taken = 1;
  if (running) pthread_cond_signal(&cv);
  else if (may_start() && loom__thread_start(NULL, pager_main, NULL) == 0)
    running = 1;
  *behind = !c && running;
  pthread_mutex_unlock(&mu);
  for (int i = 0; i < ndrop; i++) loom__arena_free(drop[i]);
  return c;
}

int loom__pager_would_run(void) {
  pthread_mutex_lock(&mu);
  int r = running;
  pthread_mutex_unlock(&mu);
  return r || (loom__arena_on() && threads_now() > 1);
}

/* A forked child has no pager, and the ready chunks are the parent's. */
void loom__pager_forked(void) {
  pthread_mutex_init(&mu, NULL);
  pthread_cond_init(&cv, NULL);
  nready = 0;
  running = 0;
  taken = 0;
  gen++;
}
