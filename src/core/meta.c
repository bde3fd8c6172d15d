/*
 * meta.c - process metadata: key/value strings the program (or an adapter
 * running inside it) sets with loom_meta_set(), written into every trace
 * collected afterwards ("rank", "world_size" and "distributed_backend" make
 * the trace's distributedInfo).  Not a hot-path call: it takes a lock.
 */
#include <stdlib.h>
#include <string.h>

#include "core.h"

static pthread_mutex_t meta_mu = PTHREAD_MUTEX_INITIALIZER;
static char **keys, **vals;
static size_t nmeta, cap_meta;

LOOM_EXTERN loom_status loom_meta_set(const char *key, const char *value) {
  if (!key || !*key) return loom__fail(LOOM_EINVAL, "loom_meta_set: empty key");
  char *v = value ? loom__strdup(value) : NULL;
  if (value && !v) return loom__fail(LOOM_ENOMEM, "out of memory");
  pthread_mutex_lock(&meta_mu);
  size_t i = 0;
  while (i < nmeta && strcmp(keys[i], key)) i++;
  loom_status st = LOOM_OK;
  if (i < nmeta) {
    free(vals[i]);
    vals[i] = v;
  } else if (v) {
    if (nmeta == cap_meta) {
      size_t cap = cap_meta ? 2 * cap_meta : 8;
      char **k2 = realloc(keys, cap * sizeof *k2), **v2 = k2 ? realloc(vals, cap * sizeof *v2) : NULL;
      if (k2) keys = k2;
      if (v2) vals = v2, cap_meta = cap;
    }
    char *k = nmeta < cap_meta ? loom__strdup(key) : NULL;
    if (k) {
      keys[nmeta] = k;
      vals[nmeta++] = v;
    } else {
      free(v);
      st = loom__fail(LOOM_ENOMEM, "out of memory");
    }
  }
  pthread_mutex_unlock(&meta_mu);
  return st;
}

/* Writes the process metadata into t, last: a key already in t takes the
 * process's value (the program knows best). */
int loom__meta_apply(loom_trace *t) {
  int rc = 0;
  pthread_mutex_lock(&meta_mu);
  for (size_t i = 0; i < nmeta && rc == 0; i++) {
    if (!vals[i]) continue; /* removed */
    rc = loom__trace_add_meta(t, keys[i], vals[i]);
  }
  pthread_mutex_unlock(&meta_mu);
  return rc;
}
