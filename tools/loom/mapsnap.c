/*
 * mapsnap.c - loom record's snapshots of its processes' file mappings.
 *
 * A name a program hands loom as a pointer (a string literal) is read back
 * after a SIGKILL from the file mapped at that address (src/salvage/salvage.c),
 * so the salvager needs to know what was mapped where, also for a library
 * the program loaded while recording.  The process itself snapshots its
 * mappings when it starts; the ones after that are taken here, from
 * outside, so that no loom thread has to run inside the program for it
 * (tools/loom/preload.c says why).  Twice a second a thread of loom record
 * reads /proc/PID/maps of every process with an arena (<pid>.arena in the
 * arenas folder) and, when its readable file mappings changed, writes them
 * to <pid>.maps beside it (a temporary name, then renamed: the salvager
 * never reads half of one).  The thread waits on a condition variable, so
 * that stopping it when the program has ended costs no part of a wait.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mapsnap.h"
#include "util/util.h"

typedef struct seen {
  long pid;
  uint64_t hash; /* of the readable file mappings last written */
} seen;

static struct {
  char dir[4096];
  pthread_t th;
  pthread_mutex_t mu;
  pthread_cond_t cv; /* signalled by loom__mapsnap_stop; on CLOCK_MONOTONIC */
  int stop;          /* under mu */
  atomic_int running;
  seen *v;
  size_t n, cap;
} M;

/* The readable file mappings of pid, as /proc/PID/maps lists them, into a
 * heap buffer (*len bytes); NULL when the process is gone. */
static char *file_maps(long pid, size_t *len) {
  char path[64], line[4400];
  snprintf(path, sizeof path, "/proc/%ld/maps", pid);
  FILE *f = fopen(path, "re");
  if (!f) return NULL;
  char *buf = NULL;
  size_t n = 0, cap = 0;
  while (fgets(line, sizeof line, f)) {
    char perms[8] = "";
    int pos = 0;
    if (sscanf(line, "%*x-%*x %7s %*x %*s %*s %n", perms, &pos) < 1 || !pos) continue;
    if (line[pos] != '/' || perms[0] != 'r') continue; /* what the salvager reads */
    size_t l = strlen(line);
    if (n + l + 1 > cap) {
      size_t c = cap ? cap * 2 : 8192;
      while (c < n + l + 1) c *= 2;
      char *b = realloc(buf, c);
      if (!b) break;
      buf = b, cap = c;
    }
    memcpy(buf + n, line, l + 1);
    n += l;
  }
  fclose(f);
  *len = n;
  return buf;
}

static seen *find(long pid) {
  for (size_t i = 0; i < M.n; i++)
    if (M.v[i].pid == pid) return &M.v[i];
  if (M.n == M.cap) {
    size_t c = M.cap ? M.cap * 2 : 64;
    seen *v = realloc(M.v, c * sizeof *v);
    if (!v) return NULL;
    M.v = v, M.cap = c;
  }
  M.v[M.n] = (seen){pid, 0};
  return &M.v[M.n++];
}

static uint64_t fnv(const char *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 0x100000001b3ull;
  return h;
}

static void write_snapshot(long pid, const char *text, size_t len) {
  char path[4200], tmp[4300];
  snprintf(path, sizeof path, "%s/%ld.maps", M.dir, pid);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "we");
  if (!f) return;
  int ok = fwrite(text, 1, len, f) == len;
  if (fclose(f) == 0 && ok) rename(tmp, path);
  else unlink(tmp);
}

static void snap(long pid) {
  size_t len = 0;
  char *text = file_maps(pid, &len);
  seen *s = text ? find(pid) : NULL;
  uint64_t h = text ? fnv(text, len) : 0;
  if (s && s->hash != h) {
    write_snapshot(pid, text, len);
    s->hash = h;
  }
  free(text);
}

/* Every <pid>.arena in the folder whose process still runs. */
static void round_once(void) {
  DIR *d = opendir(M.dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    char *end;
    long pid = strtol(e->d_name, &end, 10);
    if (pid > 0 && !strcmp(end, ".arena")) snap(pid);
  }
  closedir(d);
}

static void *run(void *arg) {
  (void)arg;
  pthread_mutex_lock(&M.mu);
  while (!M.stop) {
    pthread_mutex_unlock(&M.mu);
    round_once();
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_nsec += 500 * 1000 * 1000;
    if (until.tv_nsec >= 1000000000) until.tv_sec++, until.tv_nsec -= 1000000000;
    pthread_mutex_lock(&M.mu);
    while (!M.stop) /* until stopped, or the half second is over */
      if (pthread_cond_timedwait(&M.cv, &M.mu, &until) != 0) break;
  }
  pthread_mutex_unlock(&M.mu);
  return NULL;
}

void loom__mapsnap_start(const char *arenas) {
  if (atomic_load(&M.running) || strlen(arenas) >= sizeof M.dir) return;
  snprintf(M.dir, sizeof M.dir, "%s", arenas);
  pthread_condattr_t ca;
  if (pthread_condattr_init(&ca) != 0) return;
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  int rc = pthread_cond_init(&M.cv, &ca);
  pthread_condattr_destroy(&ca);
  if (rc != 0) return;
  pthread_mutex_init(&M.mu, NULL);
  M.stop = 0;
  /* loom record's signals stay with its main thread */
  if (loom__thread_start(&M.th, run, NULL) == 0) atomic_store(&M.running, 1);
  else pthread_cond_destroy(&M.cv), pthread_mutex_destroy(&M.mu);
}

void loom__mapsnap_stop(void) {
  if (!atomic_exchange(&M.running, 0)) return;
  pthread_mutex_lock(&M.mu);
  M.stop = 1;
  pthread_cond_signal(&M.cv);
  pthread_mutex_unlock(&M.mu);
  pthread_join(M.th, NULL);
  pthread_cond_destroy(&M.cv);
  pthread_mutex_destroy(&M.mu);
  free(M.v);
  M.v = NULL;
  M.n = M.cap = 0;
}
