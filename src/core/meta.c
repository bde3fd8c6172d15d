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

LOOM_EXTERN loom_status loom_meta_set(const char *key, const char *value) {
  if (!key || !*key) return loom__fail(LOOM_EINVAL, "loom_meta_set: empty key");
  pthread_mutex_lock(&meta_mu);
  int rc = loom__kvs_set(&process_meta, key, value);
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
