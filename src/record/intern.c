/*
 * intern.c - the process-wide string interner used by loom_string_id_of and
 * by backends (host->intern).  Ids are small integers; strings are never
 * freed, so an id stays valid across sessions.
 */
#include <pthread.h>
#include <string.h>

#include "arena.h"
#include "record.h"
#include "util/util.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static loom__strtab tab;

uint32_t loom__intern(const char *s, size_t len) {
  if (!s) return 0;
  if (len == SIZE_MAX) len = strlen(s);
  pthread_mutex_lock(&mu);
  size_t before = tab.n;
  uint32_t id = loom__strtab_intern(&tab, s, len);
  if (tab.n != before) loom__arena_str(id, s, len); /* new: a killed process keeps it */
  pthread_mutex_unlock(&mu);
  return id;
}

const char *loom__intern_get(uint32_t id) {
  pthread_mutex_lock(&mu);
  const char *s = loom__strtab_get(&tab, id);
  pthread_mutex_unlock(&mu);
  return s;
}

void loom__intern_mirror(void) {
  pthread_mutex_lock(&mu);
  for (size_t id = 1; id < tab.n; id++)
    loom__arena_str((uint32_t)id, loom__strtab_get(&tab, (uint32_t)id),
                    loom__strtab_len(&tab, (uint32_t)id));
  pthread_mutex_unlock(&mu);
}

loom_string_id loom_string_id_of(const char *s) { return loom__intern(s, SIZE_MAX); }
