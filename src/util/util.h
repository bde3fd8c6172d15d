/*
 * util.h - small containers shared by every layer of the core: a growable
 * array, a string table with stable pointers, and a u64 -> u64 hash map.
 * None of them locks; callers serialise access.
 */
#ifndef LOOM_UTIL_H
#define LOOM_UTIL_H

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#define LOOM__UNUSED(x) ((void)(x))
#define LOOM__LIKELY(x) __builtin_expect(!!(x), 1)
#define LOOM__UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Grows *base (element size esz) so that it holds at least need elements;
 * *cap is updated.  Returns 0, or -1 on allocation failure (unchanged). */
int loom__grow(void **base, size_t *cap, size_t need, size_t esz);

/* Appends one element to a vector declared as T *p; size_t n, cap. */
#define LOOM__PUSH(p, n, cap, val)                                         \
  (((n) < (cap) || loom__grow((void **)&(p), &(cap), (n) + 1,            \
                              sizeof(*(p))) == 0)                        \
       ? ((p)[(n)++] = (val), 0)                                         \
       : -1)

/* loom__grow for arrays that may grow large (util.c: from 1 MiB on in a
 * mapping of their own).  Allocate with loom__array_alloc (or start from
 * NULL with a capacity of 0) and free with loom__array_free, both given
 * the capacity the array has. */
int loom__grow_big(void **base, size_t *cap, size_t need, size_t esz);
void *loom__array_alloc(size_t cap, size_t esz);
void loom__array_free(void *p, size_t cap, size_t esz);
#define LOOM__PUSH_BIG(p, n, cap, val)                                     \
  (((n) < (cap) || loom__grow_big((void **)&(p), &(cap), (n) + 1,        \
                                  sizeof(*(p))) == 0)                    \
       ? ((p)[(n)++] = (val), 0)                                         \
       : -1)

/* A large block of n bytes, mapped on its own (p NULL) or p's of old bytes
 * grown or shrunk, its contents kept; NULL without memory (p stays valid).
 * Freed with loom__big_free and the size it has (util.c). */
void *loom__big_resize(void *p, size_t old, size_t n);
void loom__big_free(void *p, size_t n);

/* memcpy for memory the thread has not touched: dst not yet written
 * (to_cold) or src not yet read (from_cold) by this process.  The kernel
 * copies (util.c), so the thread takes no page fault per page.  For blocks
 * of many pages; a small copy costs a system call more than memcpy. */
void loom__copy_to_cold(void *dst, const void *src, size_t n);
void loom__copy_from_cold(void *dst, const void *src, size_t n);

/* A descriptor loom keeps open in a recorded program (fd.c): at a high
 * number, close-on-exec, and checked to be the same file before each use. */
typedef struct loom__fd {
  int fd; /* -1: none, or no longer loom's */
  uint64_t dev, ino;
} loom__fd;
/* Takes fd (moved up; the old number closed).  0, or -1 (fd closed). */
int loom__fd_keep(loom__fd *k, int fd);
/* 1 when k->fd is still the file it was kept as (async-signal-safe). */
int loom__fd_ok(const loom__fd *k);
/* Closes k->fd only if it is still loom's; k->fd becomes -1 either way. */
void loom__fd_close(loom__fd *k);

/* Starts fn(arg) on a thread with every signal blocked (thread.c): detached
 * when th is NULL, else joinable with its id in *th.  0, or -1 (none started). */
int loom__thread_start(pthread_t *th, void *(*fn)(void *), void *arg);

/* Decodes %XX in place, as the option syntax escapes ',' ';' '%' and control
 * characters; a '%' not followed by two hex digits stays as it is. */
void loom__percent_decode(char *s);

char *loom__strdup(const char *s);
char *loom__strndup(const char *s, size_t n);
/* Formats into a new heap string; NULL on failure. */
char *loom__vasprintf(const char *fmt, va_list ap);
char *loom__asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

uint64_t loom__hash_bytes(const void *p, size_t n);
static inline uint64_t loom__hash_u64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

/* Hash of n bytes for the hot path and the caches that key on it, 8 bytes
 * per step (loom__hash_bytes's FNV-1a costs a multiply per byte); the last
 * word overlaps the one before instead of a loop over the tail. */
static inline uint64_t loom__hash_words(const void *p, size_t n) {
  const unsigned char *s = (const unsigned char *)p;
  uint64_t h = 0x9E3779B97F4A7C15ull ^ n, w = 0;
  if (n < 8) {
    for (size_t i = 0; i < n; i++) w = w << 8 | s[i];
    return loom__hash_u64(h ^ w);
  }
  const unsigned char *last = s + n - 8;
  for (; s < last; s += 8) {
    __builtin_memcpy(&w, s, 8);
    h = (h ^ w) * 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  __builtin_memcpy(&w, last, 8);
  return loom__hash_u64(h ^ w);
}

/* ---- string table: id 0 is "no string"; ids are dense from 1 ------------ */
typedef struct loom__strtab {
  char **strs;      /* id -> string (index 0 unused) */
  uint32_t *lens;
  size_t n, cap;    /* n counts slot 0 */
  uint32_t *slots;  /* open addressing: id or 0 */
  size_t nslots;
  char *arena;      /* current arena block */
  size_t arena_left;
  void *blocks;     /* list of arena blocks */
  int oom;          /* an intern failed for want of memory (its id 0 stands in) */
} loom__strtab;

void loom__strtab_init(loom__strtab *t);
void loom__strtab_free(loom__strtab *t);
/* Returns the id of s[0..len), adding it; 0 on allocation failure. */
uint32_t loom__strtab_intern(loom__strtab *t, const char *s, size_t len);
/* Returns the id of s if present, else 0. */
uint32_t loom__strtab_find(const loom__strtab *t, const char *s, size_t len);
static inline const char *loom__strtab_get(const loom__strtab *t, uint32_t id) {
  return (id && id < t->n) ? t->strs[id] : "";
}
static inline size_t loom__strtab_len(const loom__strtab *t, uint32_t id) {
  return (id && id < t->n) ? t->lens[id] : 0;
}

/* ---- u64 -> u64 map ---------------------------------------------------------
 * Key 0 marks an empty slot in keys[]; a value for key 0 is kept apart
 * (zero_val), so get/put/del work for every key, but code that walks keys[]
 * does not see key 0 (n does not count it). */
typedef struct loom__map {
  uint64_t *keys;
  uint64_t *vals;
  size_t n, cap; /* cap is a power of two or 0 */
  int has_zero;
  uint64_t zero_val;
  /* Set before first use for keys that come in runs of consecutive values
   * (correlation ids): eight consecutive keys share a home line, so a run
   * of them touches one cache line of keys[] and one of vals[] instead of
   * eight (their blocks are still placed by the hash). */
  int runs;
} loom__map;

void loom__map_free(loom__map *m);
/* Empties m for reuse, keeping its slots (and runs) unless it holds far
 * fewer keys than it has room for (then its memory is freed). */
void loom__map_clear(loom__map *m);
/* Sets key -> val.  Returns 0, -1 on allocation failure. */
int loom__map_put(loom__map *m, uint64_t key, uint64_t val);
/* Returns a pointer to the value of key or NULL. */
uint64_t *loom__map_get(const loom__map *m, uint64_t key);
/* The value of key, added with value 0 when missing (then *added is 1):
 * one probe where a get and a put take two.  NULL on allocation failure.
 * The pointer is valid until the next put, slot or del. */
uint64_t *loom__map_slot(loom__map *m, uint64_t key, int *added);
/* Removes key; returns 1 when it was there, else 0.  Pointers from
 * loom__map_get are invalid afterwards. */
int loom__map_del(loom__map *m, uint64_t key);

#endif
