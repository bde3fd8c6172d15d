/*
 * interpose.c - the allocation functions of libloom-heap.so, which `loom
 * record --memory host` puts in the program's LD_PRELOAD so that they come
 * before the C library's.  Each one forwards to the next definition in the
 * process (dlsym(RTLD_NEXT): the C library's, or another allocator the
 * program links), so the program's behaviour is unchanged: the same
 * allocator, the same results, errno as it left it.  While no session
 * records the heap, a call costs one load and one branch before the
 * forward; while one records, the allocation or free is also noted
 * (backend.c).
 *
 * dlsym may allocate (its error buffer) before the next malloc is known:
 * those first allocations come from a static buffer, never freed, never
 * given to the next allocator.  A free is recorded before the memory goes
 * back, so another thread's allocation of the same address is always
 * later; realloc's free of the old block is timed before the call.
 */
#include "heap.h" /* first: _GNU_SOURCE */

#include <dlfcn.h>
#include <errno.h>
#include <string.h>

atomic_int heap_mode;

typedef struct next_fns {
  void *(*malloc)(size_t);
  void *(*calloc)(size_t, size_t);
  void *(*realloc)(void *, size_t);
  void (*free)(void *);
  int (*posix_memalign)(void **, size_t, size_t);
  void *(*aligned_alloc)(size_t, size_t);
  void *(*memalign)(size_t, size_t);
  void *(*valloc)(size_t);
  void *(*pvalloc)(size_t);
} next_fns;
static next_fns next;

/* ---- the first allocations, while the next definitions are looked up --- */
static _Alignas(64) char boot[1 << 16];
static atomic_size_t boot_used;

static int is_boot(const void *p) {
  return (const char *)p >= boot && (const char *)p < boot + sizeof boot;
}

/* n bytes aligned to align (a power of two, at least 16), the size kept in
 * the 16 bytes before them (realloc reads it); NULL when the buffer is out. */
static void *boot_alloc(size_t n, size_t align) {
  if (align < 16) align = 16;
  size_t old = atomic_load(&boot_used), at;
  do {
    at = (old + 16 + align - 1) & ~(align - 1);
    if (n > sizeof boot || at + n > sizeof boot) {
      errno = ENOMEM;
      return NULL;
    }
  } while (!atomic_compare_exchange_weak(&boot_used, &old, at + n));
  memcpy(boot + at - sizeof n, &n, sizeof n);
  return boot + at;
}

static size_t boot_size(const void *p) {
  size_t n;
  memcpy(&n, (const char *)p - sizeof n, sizeof n);
  return n;
}

/* ---- finding the next definitions --------------------------------------- */
static __thread int resolving __attribute__((tls_model("initial-exec")));

/* 1 once the next definitions are known; 0 while this thread looks them up
 * (its allocations then come from the static buffer). */
static int resolve(void) {
  if (atomic_load_explicit(&heap_mode, memory_order_acquire) != HEAP_UNRESOLVED) return 1;
  if (resolving) return 0;
  resolving = 1;
  next_fns n;
#define FIND(f) *(void **)&n.f = dlsym(RTLD_NEXT, #f);
  FIND(malloc) FIND(calloc) FIND(realloc) FIND(free) FIND(posix_memalign)
  FIND(aligned_alloc) FIND(memalign) FIND(valloc) FIND(pvalloc)
#undef FIND
  resolving = 0;
  if (!n.malloc || !n.calloc || !n.realloc || !n.free) return 0; /* no allocator at all */
  next = n;
  int expect = HEAP_UNRESOLVED;
  atomic_compare_exchange_strong_explicit(&heap_mode, &expect, HEAP_OFF, memory_order_release,
                                          memory_order_relaxed);
  return 1;
}

__attribute__((constructor(101))) static void heap_resolve_early(void) { resolve(); }

void heap_set_recording(int on) {
  if (!resolve()) return;
  atomic_store_explicit(&heap_mode, on ? HEAP_ON : HEAP_OFF, memory_order_release);
}

#define OFF() \
  __builtin_expect(atomic_load_explicit(&heap_mode, memory_order_acquire) == HEAP_OFF, 1)
#define ON() (atomic_load_explicit(&heap_mode, memory_order_relaxed) == HEAP_ON)
#define RA __builtin_return_address(0)

/* Notes a result: errno as the allocator left it. */
static void *noted(int call, void *p, size_t n, const void *ra) {
  int e = errno;
  if (p) heap_note(1, call, p, n, 0, ra);
  errno = e;
  return p;
}

/* ---- the functions ------------------------------------------------------- */
static __attribute__((noinline)) void *slow_malloc(size_t n, const void *ra) {
  if (!resolve()) return boot_alloc(n, 16);
  void *p = next.malloc(n);
  return ON() ? noted(HC_MALLOC, p, n, ra) : p;
}
static void *heap_malloc(size_t n) {
  if (OFF()) return next.malloc(n);
  return slow_malloc(n, RA);
}

static __attribute__((noinline)) void *slow_calloc(size_t k, size_t n, const void *ra) {
  size_t bytes;
  if (!resolve()) {
    if (__builtin_mul_overflow(k, n, &bytes)) return errno = ENOMEM, NULL;
    return boot_alloc(bytes, 16); /* static: already zero */
  }
  void *p = next.calloc(k, n);
  return ON() && p ? noted(HC_CALLOC, p, k * n, ra) : p;
}
static void *heap_calloc(size_t k, size_t n) {
  if (OFF()) return next.calloc(k, n);
  return slow_calloc(k, n, RA);
}

static __attribute__((noinline)) void slow_free(void *p, const void *ra) {
  if (!p || is_boot(p)) return;
  if (!resolve()) return; /* cannot happen: p came from an allocator that was found */
  if (!ON()) {
    next.free(p);
    return;
  }
  int e = errno;
  heap_note(0, HC_FREE, p, 0, 0, ra); /* before another thread can have p */
  next.free(p);
  errno = e;
}
static void heap_free(void *p) {
  if (OFF()) {
    next.free(p);
    return;
  }
  slow_free(p, RA);
}

/* realloc of the static buffer's memory: a fresh block, the bytes copied. */
static void *boot_realloc(void *p, size_t n, const void *ra) {
  void *q = slow_malloc(n, ra);
  if (q) memcpy(q, p, boot_size(p) < n ? boot_size(p) : n);
  return q;
}

static __attribute__((noinline)) void *slow_realloc(void *p, size_t n, const void *ra) {
  if (p && is_boot(p)) return boot_realloc(p, n, ra);
  if (!resolve()) return boot_alloc(n, 16); /* p is NULL: nothing allocated yet */
  if (!ON() || !p) {
    void *q = next.realloc(p, n);
    return p ? q : ON() ? noted(HC_REALLOC, q, n, ra) : q;
  }
  uint64_t t = heap_now();
  void *q = next.realloc(p, n);
  int e = errno;
  /* NULL: p is untouched (a failure), or was freed (a size of 0) */
  if (q || !n) heap_note(0, HC_REALLOC, p, 0, t, ra);
  if (q) heap_note(1, HC_REALLOC, q, n, 0, ra);
  errno = e;
  return q;
}
static void *heap_realloc(void *p, size_t n) {
  if (OFF()) return next.realloc(p, n);
  return slow_realloc(p, n, RA);
}

static __attribute__((noinline)) int slow_posix_memalign(void **out, size_t a, size_t n,
                                                         const void *ra) {
  if (!resolve()) {
    if (!a || (a & (a - 1)) || a % sizeof(void *)) return EINVAL;
    void *p = boot_alloc(n, a);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
  }
  if (!next.posix_memalign) return ENOMEM; /* the next allocator has none */
  int rc = next.posix_memalign(out, a, n);
  if (rc == 0 && ON()) noted(HC_POSIX_MEMALIGN, *out, n, ra);
  return rc;
}
static int heap_posix_memalign(void **out, size_t a, size_t n) {
  if (OFF() && next.posix_memalign) return next.posix_memalign(out, a, n);
  return slow_posix_memalign(out, a, n, RA);
}

/* aligned_alloc, memalign, valloc, pvalloc: one shape (ENOMEM when the
 * next allocator lacks the function). */
static __attribute__((noinline)) void *slow_aligned(int call, size_t a, size_t n,
                                                    const void *ra) {
  if (!resolve()) return boot_alloc(n, a && !(a & (a - 1)) ? a : 4096);
  void *p = NULL;
  if (call == HC_ALIGNED_ALLOC && next.aligned_alloc) p = next.aligned_alloc(a, n);
  else if (call == HC_MEMALIGN && next.memalign) p = next.memalign(a, n);
  else if (call == HC_VALLOC && next.valloc) p = next.valloc(n);
  else if (call == HC_PVALLOC && next.pvalloc) p = next.pvalloc(n);
  else return errno = ENOMEM, NULL;
  return ON() ? noted(call, p, n, ra) : p;
}
static void *heap_aligned_alloc(size_t a, size_t n) {
  if (OFF() && next.aligned_alloc) return next.aligned_alloc(a, n);
  return slow_aligned(HC_ALIGNED_ALLOC, a, n, RA);
}
static void *heap_memalign(size_t a, size_t n) {
  if (OFF() && next.memalign) return next.memalign(a, n);
  return slow_aligned(HC_MEMALIGN, a, n, RA);
}
static void *heap_valloc(size_t n) {
  if (OFF() && next.valloc) return next.valloc(n);
  return slow_aligned(HC_VALLOC, 0, n, RA);
}
static void *heap_pvalloc(size_t n) {
  if (OFF() && next.pvalloc) return next.pvalloc(n);
  return slow_aligned(HC_PVALLOC, 0, n, RA);
}

/* The exported names: aliases, so that heap_interposed can tell whether the
 * process's malloc is this one. */
#define ALIAS(name, impl) HEAP_EXPORT __typeof__(impl) name __attribute__((alias(#impl)));
ALIAS(malloc, heap_malloc)
ALIAS(calloc, heap_calloc)
ALIAS(realloc, heap_realloc)
ALIAS(free, heap_free)
ALIAS(posix_memalign, heap_posix_memalign)
ALIAS(aligned_alloc, heap_aligned_alloc)
ALIAS(memalign, heap_memalign)
ALIAS(valloc, heap_valloc)
ALIAS(pvalloc, heap_pvalloc)
#undef ALIAS

int heap_interposed(void) {
  return dlsym(RTLD_DEFAULT, "malloc") == (void *)heap_malloc &&
         dlsym(RTLD_DEFAULT, "free") == (void *)heap_free;
}
