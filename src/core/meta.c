/*
 * meta.c - trace metadata as key/value strings, last value of a key wins:
 * the list type a session keeps (backends' meta_set, join notes) and the
 * process's own list, set with loom_meta_set() and written into every trace
 * collected afterwards ("rank", "world_size" and "distributed_backend" make
 * the trace's distributedInfo).  Not a hot-path call: it takes a lock.
 */
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "record/arena.h"

int loom__kvs_set(loom__kvs *m, const char *key, const char *value) {
  size_t i = 0;
  while (i < m->n && strcmp(m->keys[i], key)) i++;
  char *v = value ? loom__strdup(value) : NULL;
  if (value && !v) return -1;
  if (i < m->n) { /* replace, or remove (NULL) */
    free(m->vals[i]);
    if (v) {
      m->vals[i] = v;
      return 0;
    }
    free(m->keys[i]);
    m->n--;
    memmove(m->keys + i, m->keys + i + 1, (m->n - i) * sizeof *m->keys);
    memmove(m->vals + i, m->vals + i + 1, (m->n - i) * sizeof *m->vals);
    return 0;
  }
  if (!v) return 0;
  if (m->n == m->cap) {
    size_t cap = m->cap ? 2 * m->cap : 8;
    char **k2 = realloc(m->keys, cap * sizeof *k2);
    if (k2) m->keys = k2;
    char **v2 = k2 ? realloc(m->vals, cap * sizeof *v2) : NULL;
    if (!v2) {
      free(v);
      return -1;
    }
    m->vals = v2, m->cap = cap;
  }
  char *k = loom__strdup(key);
  if (!k) {
    free(v);
    return -1;
  }
  m->keys[m->n] = k;
  m->vals[m->n++] = v;
  return 0;
}

int loom__kvs_to_trace(const loom__kvs *m, loom_trace *t) {
  for (size_t i = 0; i < m->n; i++)
    if (loom__trace_add_meta(t, m->keys[i], m->vals[i])) return -1;
  return 0;
}

void loom__kvs_free(loom__kvs *m) {
  for (size_t i = 0; i < m->n; i++) free(m->keys[i]), free(m->vals[i]);
  free(m->keys);
  free(m->vals);
  memset(m, 0, sizeof *m);
}

static pthread_mutex_t meta_mu = PTHREAD_MUTEX_INITIALIZER;
static loom__kvs process_meta;

/* Under loom record every key also has a loom__akv in the arena, so that a
 * salvage restores it: key -> its arena copy, in the arena of process
 * arena_pid (meta_mu held for all of these). */
static struct akey { char *key; void *obj; } *akeys;
static size_t nakeys, cap_akeys;
static int32_t arena_pid;

static void key_to_arena(const char *key, const char *value) {
  size_t i = 0;
  while (i < nakeys && strcmp(akeys[i].key, key)) i++;
  if (i == nakeys) {
    struct akey k = {loom__strdup(key), NULL};
    if (!k.key || LOOM__PUSH(akeys, nakeys, cap_akeys, k)) {
      free(k.key);
      return; /* out of memory: the salvage misses this key */
    }
  }
  void *obj = loom__arena_kv(LOOM__AKV_META, 0, key, value); /* NULL value: removed */
  loom__bkarena_forget(akeys[i].obj);
  akeys[i].obj = obj;
}

void loom__meta_arena_mirror(void) {
  loom__thread_names_mirror();
  int32_t pid = loom__arena_pid();
  pthread_mutex_lock(&meta_mu);
  if (pid && pid != arena_pid) { /* this process's first arena, or a child's own */
    for (size_t i = 0; i < nakeys; i++) free(akeys[i].key);
    nakeys = 0; /* a parent's copies are the parent's */
    arena_pid = pid;
    for (size_t i = 0; i < process_meta.n; i++)
      key_to_arena(process_meta.keys[i], process_meta.vals[i]);
  }
  pthread_mutex_unlock(&meta_mu);
}

LOOM_EXTERN loom_status loom_meta_set(const char *key, const char *value) {
  if (!key || !*key) return loom__fail(LOOM_EINVAL, "loom_meta_set: empty key");
  pthread_mutex_lock(&meta_mu);
  int rc = loom__kvs_set(&process_meta, key, value);
  if (rc == 0 && arena_pid && arena_pid == loom__arena_pid()) key_to_arena(key, value);
  pthread_mutex_unlock(&meta_mu);
  return rc ? loom__fail(LOOM_ENOMEM, "out of memory") : LOOM_OK;
}

/* The process's value of key (loom_meta_set) copied into buf; 0, or -1 when
 * it has none (or it does not fit). */
int loom__process_meta_get(const char *key, char *buf, size_t n) {
  int rc = -1;
  pthread_mutex_lock(&meta_mu);
  for (size_t i = 0; i < process_meta.n; i++)
    if (!strcmp(process_meta.keys[i], key) && strlen(process_meta.vals[i]) < n) {
      strcpy(buf, process_meta.vals[i]);
      rc = 0;
    }
  pthread_mutex_unlock(&meta_mu);
  return rc;
}

/* Writes the process metadata into t, last: a key already in t takes the
 * process's value (the program knows best). */
int loom__meta_apply(loom_trace *t) {
  pthread_mutex_lock(&meta_mu);
  int rc = loom__kvs_to_trace(&process_meta, t);
  pthread_mutex_unlock(&meta_mu);
  return rc;
}
