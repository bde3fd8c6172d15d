/*
 * hostrec_names.c - thread names given with loom_thread_name: kept by OS
 * thread id, and under `loom record` each mirrored in the shared-memory
 * arena so that a salvaged trace names its threads too.
 */
#include <pthread.h>
#include <stdint.h>

#include "arena.h"
#include "hostrec_int.h"
#include "util/util.h"

static pthread_mutex_t names_mu = PTHREAD_MUTEX_INITIALIZER;
static loom__map names; /* OS thread id -> interned name */
/* Under loom record each name also has a loom__akv in the arena (for a
 * salvage): thread id -> its address, in the arena of process names_pid. */
static loom__map names_arena;
static int32_t names_pid;

/* Writes tid's name (id; 0: removed) to the arena (names_mu held). */
static void name_to_arena(uint64_t tid, uint32_t id) {
  const char *s = id ? loom__intern_get(id) : NULL;
  void *obj = loom__arena_kv(LOOM__AKV_THREAD, tid, "", s);
  uint64_t *old = loom__map_get(&names_arena, tid);
  if (old && *old && loom__arena_owns((void *)(uintptr_t)*old))
    loom__arena_free((void *)(uintptr_t)*old);
  (void)loom__map_put(&names_arena, tid, (uint64_t)(uintptr_t)obj);
}

void loom__thread_names_mirror(void) {
  int32_t pid = loom__arena_pid();
  pthread_mutex_lock(&names_mu);
  if (pid && pid != names_pid) { /* a new arena (this process's first, or a child's) */
    loom__map_free(&names_arena);
    names_pid = pid;
    for (size_t i = 0; i < names.cap; i++)
      if (names.keys[i] && names.vals[i]) name_to_arena(names.keys[i], (uint32_t)names.vals[i]);
  }
  pthread_mutex_unlock(&names_mu);
}

void loom_thread_name(uint64_t tid, const char *name) {
  if (!tid) tid = loom__tid();
  uint32_t id = name && *name ? loom__intern(name, SIZE_MAX) : 0;
  pthread_mutex_lock(&names_mu);
  /* 0: removed (out of memory: the old name or none stays) */
  if (id || loom__map_get(&names, tid)) {
    (void)loom__map_put(&names, tid, id);
    if (names_pid && names_pid == loom__arena_pid()) name_to_arena(tid, id);
  }
  pthread_mutex_unlock(&names_mu);
}

uint32_t loom__thread_name(uint64_t tid) {
  pthread_mutex_lock(&names_mu);
  uint64_t *v = loom__map_get(&names, tid);
  uint32_t id = v ? (uint32_t)*v : 0;
  pthread_mutex_unlock(&names_mu);
  return id;
}

void loom__thread_names_forked(void) { pthread_mutex_init(&names_mu, NULL); }
