/*
 * map.c - a small open-addressing hash table from Vulkan handles (non-zero
 * 64-bit values) to pointers, with linear probing and backward-shift
 * deletion (no tombstones).  Not thread-safe: callers hold their lock.
 */
#include <stdlib.h>

#include "vk.h"

static size_t slot_of(uint64_t k, size_t cap) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  return (size_t)(k & (cap - 1));
}

void *vk_map_get(const vk_map *m, uint64_t key) {
  if (!m->cap || !key) return NULL;
  for (size_t i = slot_of(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
    if (m->keys[i] == key) return m->vals[i];
    if (!m->keys[i]) return NULL;
  }
}

static int grow(vk_map *m) {
  size_t cap = m->cap ? m->cap * 2 : 64;
  uint64_t *k = calloc(cap, sizeof *k);
  void **v = calloc(cap, sizeof *v);
  if (!k || !v) { free(k); free(v); return -1; }
  for (size_t i = 0; i < m->cap; i++) {
    if (!m->keys[i]) continue;
    size_t j = slot_of(m->keys[i], cap);
    while (k[j]) j = (j + 1) & (cap - 1);
    k[j] = m->keys[i];
    v[j] = m->vals[i];
  }
  free(m->keys);
  free(m->vals);
  m->keys = k, m->vals = v, m->cap = cap;
  return 0;
}

int vk_map_put(vk_map *m, uint64_t key, void *val) {
  if (!key) return -1;
  if ((m->n + 1) * 2 > m->cap && grow(m) != 0) return -1;
  size_t i = slot_of(key, m->cap);
  while (m->keys[i] && m->keys[i] != key) i = (i + 1) & (m->cap - 1);
  if (!m->keys[i]) m->n++;
  m->keys[i] = key;
  m->vals[i] = val;
  return 0;
}

void *vk_map_del(vk_map *m, uint64_t key) {
  if (!m->cap || !key) return NULL;
  size_t i = slot_of(key, m->cap);
  while (m->keys[i] && m->keys[i] != key) i = (i + 1) & (m->cap - 1);
  if (!m->keys[i]) return NULL;
  void *old = m->vals[i];
  m->n--;
  /* shift later members of the run back into the hole */
  for (size_t j = (i + 1) & (m->cap - 1); m->keys[j]; j = (j + 1) & (m->cap - 1)) {
    size_t home = slot_of(m->keys[j], m->cap);
    int stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
    if (stays) continue;
    m->keys[i] = m->keys[j];
    m->vals[i] = m->vals[j];
    i = j;
  }
  m->keys[i] = 0;
  m->vals[i] = NULL;
  return old;
}

void vk_map_free(vk_map *m) {
  free(m->keys);
  free(m->vals);
  m->keys = NULL, m->vals = NULL, m->cap = m->n = 0;
}
