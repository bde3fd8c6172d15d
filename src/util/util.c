/*
 * util.c - implementation of the containers in util.h, and the small string
 * helpers every layer shares (copies, formatting, percent-decoding).
 */
#define _GNU_SOURCE /* mremap */
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

/* The capacity an array of cap grows to for need elements (doubling from
 * 16); 0 when it would not fit in memory. */
static size_t grown_cap(size_t cap, size_t need, size_t esz) {
  size_t ncap = cap ? cap : 16;
  while (ncap < need) {
    if (ncap > SIZE_MAX / 2 / esz) return 0;
    ncap *= 2;
  }
  return ncap;
}

int loom__grow(void **base, size_t *cap, size_t need, size_t esz) {
  if (need <= *cap) return 0;
  size_t ncap = grown_cap(*cap, need, esz);
  if (!ncap) return -1;
  void *p = realloc(*base, ncap * esz);
  if (!p) return -1;
  *base = p;
  *cap = ncap;
  return 0;
}

/* Large blocks filled once, as the report's sort buffers: mapped on their
 * own and grown with mremap (a realloc below glibc's mmap threshold copies
 * into fresh pages, a fault per 4 KiB page again), in huge pages where the
 * system gives them on request (transparent_hugepage "madvise"): on a
 * virtual machine with shadow page tables each fault costs microseconds. */
static void huge_hint(void *p, size_t n) {
#ifdef MADV_HUGEPAGE
  /* the whole mapping: advice on a part splits it, and mremap fails on a
   * range over several mappings */
  (void)madvise(p, n, MADV_HUGEPAGE);
#else
  (void)p;
  (void)n;
#endif
}

void *loom__big_resize(void *p, size_t old, size_t n) {
  void *q = p ? mremap(p, old, n, MREMAP_MAYMOVE)
              : mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (q == MAP_FAILED) return NULL;
  huge_hint(q, n);
  return q;
}

void loom__big_free(void *p, size_t n) {
  if (p) munmap(p, n);
}

/* Copies through the kernel: process_vm_writev / readv to the process
 * itself (always permitted to itself).  The kernel touches the pages
 * through its own mapping of memory, so a page the thread never touched
 * costs no fault in the thread; on this project's VMs a first write to a
 * page costs ~12 us and a first read ~6 us against ~1 us this way
 * (bench/bench_pages).  memcpy where the call is refused (a seccomp
 * filter, an old kernel): remembered, never tried again. */
static int kcopy_off;

static void kcopy(void *dst, const void *src, size_t n, int to_dst) {
  size_t done = 0;
  int saved = errno; /* the program's: the recording calls leave it */
  if (!__atomic_load_n(&kcopy_off, __ATOMIC_RELAXED)) {
    pid_t me = getpid();
    while (done < n) {
      struct iovec l = {(char *)(to_dst ? src : dst) + done, n - done};
      struct iovec r = {(char *)(to_dst ? dst : src) + done, n - done};
      ssize_t k = to_dst ? process_vm_writev(me, &l, 1, &r, 1, 0)
                         : process_vm_readv(me, &l, 1, &r, 1, 0);
      if (k <= 0) {
        if (k < 0 && (errno == EPERM || errno == ENOSYS || errno == EACCES))
          __atomic_store_n(&kcopy_off, 1, __ATOMIC_RELAXED);
        break;
      }
      done += (size_t)k;
    }
  }
  if (done < n) memcpy((char *)dst + done, (const char *)src + done, n - done);
  errno = saved;
}

void loom__copy_to_cold(void *dst, const void *src, size_t n) { kcopy(dst, src, n, 1); }
void loom__copy_from_cold(void *dst, const void *src, size_t n) { kcopy(dst, src, n, 0); }

/* Arrays that may grow large: below BIG_ARRAY bytes on the heap, from there
 * on in a mapping of their own (loom__big_resize: grown by mremap, in huge
 * pages where the system gives them).  A trace's events and arguments
 * (1.9M events of a 12-second PyTorch run: ~170 MB) filled the heap's
 * fresh pages one fault each, and every doubling copied into fresh pages
 * again; programs that raise glibc's mmap threshold (training jobs do)
 * keep such blocks in the heap.  Which way a block went follows from its
 * capacity alone, so loom__array_free needs nothing more. */
enum { BIG_ARRAY = 1u << 20 };

void *loom__array_alloc(size_t cap, size_t esz) {
  if (esz && cap > SIZE_MAX / esz) return NULL;
  size_t n = cap * esz;
  return n >= BIG_ARRAY ? loom__big_resize(NULL, 0, n) : malloc(n ? n : 1);
}

void loom__array_free(void *p, size_t cap, size_t esz) {
  if (cap * esz >= BIG_ARRAY) loom__big_free(p, cap * esz);
  else free(p);
}

int loom__grow_big(void **base, size_t *cap, size_t need, size_t esz) {
  if (need <= *cap) return 0;
  size_t ncap = grown_cap(*cap, need, esz);
  if (!ncap) return -1;
  size_t old = *cap * esz, n = ncap * esz;
  void *p;
  if (n < BIG_ARRAY) {
    p = realloc(*base, n);
  } else if (old >= BIG_ARRAY) {
    p = loom__big_resize(*base, old, n);
  } else if ((p = loom__big_resize(NULL, 0, n))) { /* from the heap into a mapping */
    if (old) memcpy(p, *base, old);
    free(*base);
  }
  if (!p) return -1;
  *base = p;
  *cap = ncap;
  return 0;
}

char *loom__strndup(const char *s, size_t n) {
  char *d = malloc(n + 1);
  if (!d) return NULL;
  memcpy(d, s, n);
  d[n] = 0;
  return d;
}

char *loom__strdup(const char *s) { return s ? loom__strndup(s, strlen(s)) : NULL; }

static int hexval(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void loom__percent_decode(char *s) {
  char *w = s;
  for (const char *r = s; *r; r++) {
    int hi, lo;
    if (r[0] == '%' && (hi = hexval((unsigned char)r[1])) >= 0 &&
        (lo = hexval((unsigned char)r[2])) >= 0) {
      *w++ = (char)(hi * 16 + lo);
      r += 2;
    } else {
      *w++ = *r;
    }
  }
  *w = 0;
}

char *loom__vasprintf(const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) return NULL;
  char *s = malloc((size_t)n + 1);
  if (s) vsnprintf(s, (size_t)n + 1, fmt, ap);
  return s;
}

char *loom__asprintf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = loom__vasprintf(fmt, ap);
  va_end(ap);
  return s;
}

uint64_t loom__hash_bytes(const void *p, size_t n) {
  /* FNV-1a, finished with a mixer so low bits are usable as a slot index. */
  const unsigned char *s = p;
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ULL;
  return loom__hash_u64(h);
}

/* ---- string table ------------------------------------------------------- */
#define ARENA_BLOCK (64 * 1024)

struct block { struct block *next; };

void loom__strtab_init(loom__strtab *t) { memset(t, 0, sizeof *t); }

void loom__strtab_free(loom__strtab *t) {
  struct block *b = t->blocks;
  while (b) {
    struct block *nx = b->next;
    free(b);
    b = nx;
  }
  free(t->strs);
  free(t->lens);
  free(t->slots);
  memset(t, 0, sizeof *t);
}

static char *arena_copy(loom__strtab *t, const char *s, size_t len) {
  size_t need = len + 1;
  if (need > t->arena_left) {
    size_t bsz = need > ARENA_BLOCK / 4 ? need : ARENA_BLOCK;
    struct block *b = malloc(sizeof(struct block) + bsz);
    if (!b) return NULL;
    b->next = t->blocks;
    t->blocks = b;
    t->arena = (char *)(b + 1);
    t->arena_left = bsz;
    if (bsz == need) t->arena_left = need; /* dedicated block */
  }
  char *d = t->arena;
  memcpy(d, s, len);
  d[len] = 0;
  t->arena += need;
  t->arena_left -= need;
  return d;
}

static int rehash(loom__strtab *t, size_t nslots) {
  uint32_t *slots = calloc(nslots, sizeof *slots);
  if (!slots) return -1;
  for (size_t id = 1; id < t->n; id++) {
    size_t i = loom__hash_bytes(t->strs[id], t->lens[id]) & (nslots - 1);
    while (slots[i]) i = (i + 1) & (nslots - 1);
    slots[i] = (uint32_t)id;
  }
  free(t->slots);
  t->slots = slots;
  t->nslots = nslots;
  return 0;
}

uint32_t loom__strtab_find(const loom__strtab *t, const char *s, size_t len) {
  if (!t->nslots) return 0;
  size_t i = loom__hash_bytes(s, len) & (t->nslots - 1);
  for (;;) {
    uint32_t id = t->slots[i];
    if (!id) return 0;
    if (t->lens[id] == len && memcmp(t->strs[id], s, len) == 0) return id;
    i = (i + 1) & (t->nslots - 1);
  }
}

uint32_t loom__strtab_intern(loom__strtab *t, const char *s, size_t len) {
  if (len > UINT32_MAX - 1) return 0;
  uint32_t id = loom__strtab_find(t, s, len);
  if (id) return id;
  if (t->n == 0) t->n = 1; /* slot 0 is "no string" */
  if ((t->n + 1) * 2 > t->nslots &&
      rehash(t, t->nslots ? t->nslots * 2 : 64) != 0)
    return t->oom = 1, 0;
  size_t cap_s = t->cap, cap_l = t->cap;
  if (loom__grow((void **)&t->strs, &cap_s, t->n + 1, sizeof *t->strs) != 0 ||
      loom__grow((void **)&t->lens, &cap_l, t->n + 1, sizeof *t->lens) != 0)
    return t->oom = 1, 0;
  t->cap = cap_s < cap_l ? cap_s : cap_l;
  char *d = arena_copy(t, s, len);
  if (!d) return t->oom = 1, 0;
  id = (uint32_t)t->n++;
  t->strs[id] = d;
  t->lens[id] = (uint32_t)len;
  size_t i = loom__hash_bytes(s, len) & (t->nslots - 1);
  while (t->slots[i]) i = (i + 1) & (t->nslots - 1);
  t->slots[i] = id;
  return id;
}

/* ---- u64 map -------------------------------------------------------------- */
/* A map's arrays from this many slots (1 MiB each) are mappings of their
 * own (loom__big_resize, zero-filled): a resize fills them once. */
enum { MAP_BIG = 1 << 17 };

static uint64_t *map_array(size_t cap) {
  return cap >= MAP_BIG ? loom__big_resize(NULL, 0, cap * sizeof(uint64_t))
                        : calloc(cap, sizeof(uint64_t));
}

static void map_array_free(uint64_t *a, size_t cap) {
  if (cap >= MAP_BIG) loom__big_free(a, cap * sizeof *a);
  else free(a);
}

void loom__map_free(loom__map *m) {
  map_array_free(m->keys, m->cap);
  map_array_free(m->vals, m->cap);
  memset(m, 0, sizeof *m);
}

void loom__map_clear(loom__map *m) {
  if (m->cap > 64 && m->n * 8 < m->cap) { /* a large map once, a small one now */
    int runs = m->runs;
    loom__map_free(m);
    m->runs = runs;
    return;
  }
  if (m->cap) memset(m->keys, 0, m->cap * sizeof *m->keys);
  m->n = 0;
  m->has_zero = 0;
}

static inline size_t map_home(const loom__map *m, uint64_t key, size_t mask) {
  return (m->runs ? loom__hash_u64(key >> 3) << 3 | (key & 7) : loom__hash_u64(key)) & mask;
}

static int map_resize(loom__map *m, size_t ncap) {
  uint64_t *k = map_array(ncap), *v = map_array(ncap);
  if (!k || !v) {
    map_array_free(k, ncap);
    map_array_free(v, ncap);
    return -1;
  }
  for (size_t i = 0; i < m->cap; i++) {
    if (!m->keys[i]) continue;
    size_t j = map_home(m, m->keys[i], ncap - 1);
    while (k[j]) j = (j + 1) & (ncap - 1);
    k[j] = m->keys[i];
    v[j] = m->vals[i];
  }
  map_array_free(m->keys, m->cap);
  map_array_free(m->vals, m->cap);
  m->keys = k;
  m->vals = v;
  m->cap = ncap;
  return 0;
}

uint64_t *loom__map_slot(loom__map *m, uint64_t key, int *added) {
  *added = 0;
  if (!key) { /* 0 marks empty slots: kept apart */
    if (!m->has_zero) m->has_zero = 1, m->zero_val = 0, *added = 1;
    return &m->zero_val;
  }
  if ((m->n + 1) * 2 > m->cap && map_resize(m, m->cap ? m->cap * 2 : 64) != 0) return NULL;
  size_t j = map_home(m, key, m->cap - 1);
  while (m->keys[j] && m->keys[j] != key) j = (j + 1) & (m->cap - 1);
  if (!m->keys[j]) {
    m->keys[j] = key;
    m->vals[j] = 0;
    m->n++;
    *added = 1;
  }
  return &m->vals[j];
}

int loom__map_put(loom__map *m, uint64_t key, uint64_t val) {
  int added;
  uint64_t *v = loom__map_slot(m, key, &added);
  if (!v) return -1;
  *v = val;
  return 0;
}

uint64_t *loom__map_get(const loom__map *m, uint64_t key) {
  if (!key) return m->has_zero ? (uint64_t *)&m->zero_val : NULL;
  if (!m->cap) return NULL;
  size_t j = map_home(m, key, m->cap - 1);
  while (m->keys[j]) {
    if (m->keys[j] == key) return &m->vals[j];
    j = (j + 1) & (m->cap - 1);
  }
  return NULL;
}

int loom__map_del(loom__map *m, uint64_t key) {
  if (!key) {
    int had = m->has_zero;
    m->has_zero = 0;
    return had;
  }
  if (!m->cap) return 0;
  size_t mask = m->cap - 1, j = map_home(m, key, mask);
  while (m->keys[j] && m->keys[j] != key) j = (j + 1) & mask;
  if (!m->keys[j]) return 0;
  /* Backward shift: pull later members of the probe run into the hole
   * when their home slot is not between the hole and them. */
  for (size_t i = j, k = (j + 1) & mask;; k = (k + 1) & mask) {
    if (!m->keys[k]) {
      m->keys[i] = 0;
      break;
    }
    size_t home = map_home(m, m->keys[k], mask);
    if (i <= k ? (home <= i || home > k) : (home <= i && home > k)) {
      m->keys[i] = m->keys[k];
      m->vals[i] = m->vals[k];
      i = k;
    }
  }
  m->n--;
  return 1;
}
