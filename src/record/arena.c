/*
 * arena.c - the shared-memory arena of a process under `loom record` (see
 * arena.h for the layout).
 *
 * Only slow paths come here: a thread's first buffer, a new chunk, a new
 * interned string, a mapping snapshot.  One mutex guards the allocator.
 * A segment is a mapping of a new part of the file (the file grows with
 * ftruncate: a hole); each block is reserved (posix_fallocate) when it is
 * allocated, before anything touches it, so a full disk or tmpfs is a failed
 * allocation (records counted as dropped), never a SIGBUS in the program,
 * and the file holds only what was allocated (on tmpfs, where loom record
 * puts it, that is memory: a whole segment reserved ahead would be memory
 * taken ahead, and the time to zero it spent at once).  Freed blocks are
 * kept on a free list and reused by a later allocation of the same kind
 * that fits.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arena.h"
#include "record.h"
#include "util/util.h"

#define SEG_MIN (4u << 20)
#define SEG_MAX (1ull << 30)

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int on;
static loom__fd afd = {-1, 0, 0}; /* the file (util/fd.c: checked before each use) */
static _Atomic int fd_lost; /* the program closed or reused it: arena off */
static loom__ahdr *hdr;
static unsigned char *cur;  /* current segment */
static uint64_t cur_used, cur_size, file_size;
static uint64_t plain_size; /* bytes of the segments of small blocks */
static uint32_t cur_seg;     /* cur's index in hdr->seg */
static uint64_t maps_seq;

static loom__aobj *free_list; /* linked through the first word of the body */
static loom__aobj *sole_free; /* freed blocks of loom__arena_alloc_room */
static unsigned char sole[LOOM__ARENA_MAXSEG]; /* segment i holds one such block */
static int sole_index(const loom__aobj *o);
static void sole_shrink(loom__aobj *o, uint32_t i);
static inline loom__aobj **next_free(loom__aobj *o) { return (loom__aobj **)(void *)(o + 1); }

int loom__arena_on(void) { return atomic_load_explicit(&on, memory_order_acquire); }

static inline uint64_t round16(uint64_t n) { return (n + 15) & ~(uint64_t)15; }

/* The arena's descriptor is still its file (mu held).  When the program
 * closed it, or closed it and opened a file of its own that got its number,
 * the arena takes no new block from then on (records go on in the process's
 * memory, kept in its trace, not rebuildable after a death; the session
 * warns: loom__arena_fd_lost) and the number is never used again. */
static int fd_still_ours(void) {
  if (afd.fd < 0) return 0;
  if (loom__fd_ok(&afd)) return 1;
  afd.fd = -1;
  atomic_store(&fd_lost, 1);
  if (hdr) atomic_fetch_add(&hdr->failed, 1); /* a rebuild says records may be missing */
  atomic_store_explicit(&on, 0, memory_order_release);
  return 0;
}

/* Only a loss that cost something is said: while the arena needs no new
 * block, a closed descriptor loses nothing (the mappings stay, and what is
 * in them survives a kill); many programs close every descriptor in a child
 * just before exec. */
int loom__arena_fd_lost(void) { return atomic_load(&fd_lost); }

/* Maps size more bytes of the file as a new segment (mu held): its index,
 * or -1. */
static int map_segment(uint64_t size) {
  uint32_t n = atomic_load_explicit(&hdr->nseg, memory_order_relaxed);
  if (n >= LOOM__ARENA_MAXSEG || !fd_still_ours()) return -1;
  /* a hole: the blocks are reserved as they are allocated (reserve) */
  if (ftruncate(afd.fd, (off_t)(file_size + size)) != 0) return -1;
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, afd.fd, (off_t)file_size);
  if (p == MAP_FAILED) return -1;
  hdr->seg[n] = (loom__aseg){(uint64_t)(uintptr_t)p, file_size, size};
  atomic_store_explicit(&hdr->nseg, n + 1, memory_order_release);
  file_size += size;
  return (int)n;
}

/* Adds a segment of at least need bytes for small blocks (mu held).  0, or -1. */
static int add_segment(uint64_t need) {
  /* a quarter of what the segments of small blocks span: the address space
   * mapped ahead of use stays within 25% (and 64 segments still reach
   * terabytes) */
  uint64_t size = plain_size / 4;
  if (size < SEG_MIN) size = SEG_MIN;
  if (size > SEG_MAX) size = SEG_MAX;
  if (size < need) size = round16(need + 4096);
  size = (size + 4095) & ~(uint64_t)4095;
  int i = map_segment(size);
  if (i < 0) return -1;
  plain_size += size;
  cur_seg = (uint32_t)i;
  cur = (unsigned char *)(uintptr_t)hdr->seg[i].addr;
  cur_used = 0;
  cur_size = size;
  return 0;
}

/* Reserves the file's blocks [off, off + size): the pages are then there to
 * be written (0, or -1 when the filesystem is full). */
static int reserve_at(uint64_t off, uint64_t size) {
  return fd_still_ours() && posix_fallocate(afd.fd, (off_t)off, (off_t)size) == 0 ? 0 : -1;
}

/* The same under [o, o + size) in the current segment. */
static int reserve(const loom__aobj *o, uint64_t size) {
  return reserve_at(hdr->seg[cur_seg].off + (uint64_t)((const unsigned char *)o - cur), size);
}

static loom__aobj *from_free_list(uint32_t kind, uint64_t size) {
  for (loom__aobj **pp = &free_list; *pp; pp = next_free(*pp)) {
    loom__aobj *o = *pp;
    /* same kind, and no more than twice the size: a small request does not
     * pin a large block */
    if (o->kind == kind && o->size >= size && o->size <= 2 * size) {
      *pp = *next_free(o);
      return o;
    }
  }
  return NULL;
}

/* A chunk's pages are made present at once (one call, here in the slow
 * path) rather than one fault per page under the records: a fault on a
 * shared file page costs more than on anonymous memory.  Where the kernel
 * cannot (before Linux 5.14) they fault in as they are written. */
static void prefault(void *p, uint64_t size) {
#ifdef MADV_POPULATE_WRITE
  uintptr_t a = (uintptr_t)p & ~(uintptr_t)4095, e = (uintptr_t)p + size;
  (void)madvise((void *)a, e - a, MADV_POPULATE_WRITE);
#else
  (void)p, (void)size;
#endif
}

/* cold: neither zeroed nor made present (loom__arena_alloc_cold) */
static void *alloc_obj(uint32_t kind, size_t bytes, int cold) {
  if (!loom__arena_on()) return NULL;
  uint64_t size = round16(sizeof(loom__aobj) + bytes);
  pthread_mutex_lock(&mu);
  loom__aobj *o = from_free_list(kind, size);
  if (o) {
    atomic_store_explicit(&o->state, LOOM__AS_NEW, memory_order_relaxed);
    /* a cold block's pages may never have been touched here (the kernel
     * wrote them): zeroing would fault each one in */
    if (!cold) memset(o + 1, 0, o->size - sizeof *o);
  } else {
    /* the rest of the segment stays zero (a hole reads as zeros): the
     * reader stops there */
    if ((cur_size - cur_used < size + sizeof(loom__aobj) &&
         add_segment(size + sizeof(loom__aobj))) ||
        reserve((loom__aobj *)(cur + cur_used), size)) {
      atomic_fetch_add(&hdr->failed, 1); /* the salvager says what it means */
      pthread_mutex_unlock(&mu);
      return NULL;
    }
    o = (loom__aobj *)(cur + cur_used);
    o->kind = kind;
    o->size = size;
    cur_used += size;
  }
  /* chunks and buffers are valid as soon as they exist (their contents are
   * published by the owner's position); a string only once written */
  if (kind != LOOM__AO_STR && kind != LOOM__AO_MAPS)
    atomic_store_explicit(&o->state, LOOM__AS_LIVE, memory_order_release);
  pthread_mutex_unlock(&mu);
  if (!cold && kind == LOOM__AO_CHUNK) prefault(o, o->size);
  return o + 1;
}

void *loom__arena_alloc(uint32_t kind, size_t bytes) {
  return alloc_obj(kind, bytes, 0);
}

void *loom__arena_alloc_cold(uint32_t kind, size_t bytes) { return alloc_obj(kind, bytes, 1); }

static void publish(void *p) {
  loom__aobj *o = (loom__aobj *)p - 1;
  atomic_store_explicit(&o->state, LOOM__AS_LIVE, memory_order_release);
}

int loom__arena_owns(const void *p) {
  if (!hdr) return 0;
  uintptr_t a = (uintptr_t)p;
  uint32_t n = atomic_load_explicit(&hdr->nseg, memory_order_acquire);
  for (uint32_t i = 0; i < n; i++)
    if (a >= hdr->seg[i].addr && a < hdr->seg[i].addr + hdr->seg[i].size) return 1;
  return 0;
}

void loom__arena_free(void *p) {
  if (!p) return;
  loom__aobj *o = (loom__aobj *)p - 1;
  pthread_mutex_lock(&mu);
  atomic_store_explicit(&o->state, LOOM__AS_FREE, memory_order_release);
  int i = sole_index(o);
  if (i >= 0) {
    sole_shrink(o, (uint32_t)i);
    *next_free(o) = sole_free;
    sole_free = o;
  } else {
    *next_free(o) = free_list;
    free_list = o;
  }
  pthread_mutex_unlock(&mu);
}

/* ---- blocks that grow in place ------------------------------------------------ */
/* A block from loom__arena_alloc_room has a segment of its own: room bytes
 * of address space and of the file (a hole), of which it holds the first
 * part; it grows by reserving more of the hole, in place, so that a
 * growing array is not copied (heap arrays grow by realloc, which moves
 * pages without copying them).  A freed one gives its pages back (a hole
 * punched past its first page) and is reused by the next such request. */
static int sole_index(const loom__aobj *o) {
  uint32_t n = atomic_load_explicit(&hdr->nseg, memory_order_relaxed);
  for (uint32_t i = 0; i < n; i++)
    if (sole[i] && hdr->seg[i].addr == (uint64_t)(uintptr_t)o) return (int)i;
  return -1;
}

/* A freed block's pages past the first go back to the filesystem. */
static void sole_shrink(loom__aobj *o, uint32_t i) {
#ifdef FALLOC_FL_PUNCH_HOLE
  if (o->size > 4096 && fd_still_ours() &&
      fallocate(afd.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)(hdr->seg[i].off + 4096),
                (off_t)(o->size - 4096)) == 0)
    o->size = 4096;
#else
  (void)o, (void)i;
#endif
}

/* Grows o (in segment i) to size bytes, header included (mu held). */
static int sole_grow(loom__aobj *o, uint32_t i, uint64_t size) {
  if (size <= o->size) return 0;
  if (size > hdr->seg[i].size || reserve_at(hdr->seg[i].off + o->size, size - o->size)) return -1;
  o->size = size; /* a reader (after a death) reads the records past it only once published */
  return 0;
}

void *loom__arena_alloc_room(uint32_t kind, size_t bytes, size_t room) {
  if (!loom__arena_on()) return NULL;
  uint64_t size = round16(sizeof(loom__aobj) + bytes);
  uint64_t span = ((room > bytes ? room : bytes) + sizeof(loom__aobj) + 4095) & ~(uint64_t)4095;
  pthread_mutex_lock(&mu);
  loom__aobj *o = NULL;
  for (loom__aobj **pp = &sole_free; *pp; pp = next_free(*pp)) {
    int i = sole_index(*pp);
    if ((*pp)->kind == kind && i >= 0 && size <= hdr->seg[i].size) {
      o = *pp;
      *pp = *next_free(o);
      memset(o + 1, 0, o->size - sizeof *o); /* past it, the punched hole reads zeros */
      if (sole_grow(o, (uint32_t)i, size)) {
        *next_free(o) = sole_free; /* the filesystem is full */
        sole_free = o;
        o = NULL;
      }
      break;
    }
  }
  /* a few segments are left for small blocks */
  int i = -1;
  if (!o && atomic_load_explicit(&hdr->nseg, memory_order_relaxed) + 8 < LOOM__ARENA_MAXSEG &&
      (i = map_segment(span)) >= 0) {
    if (reserve_at(hdr->seg[i].off, size) == 0) {
      o = (loom__aobj *)(uintptr_t)hdr->seg[i].addr;
      o->kind = kind;
      o->size = size;
      sole[i] = 1;
    }
    /* else: the segment stays, empty (a hole), and the block comes from below */
  }
  if (o) atomic_store_explicit(&o->state, LOOM__AS_LIVE, memory_order_release);
  pthread_mutex_unlock(&mu);
  return o ? o + 1 : loom__arena_alloc(kind, bytes);
}

int loom__arena_grow(void *p, size_t bytes) {
  if (!p || !loom__arena_on()) return -1;
  loom__aobj *o = (loom__aobj *)p - 1;
  pthread_mutex_lock(&mu);
  int i = sole_index(o);
  int rc = i >= 0 ? sole_grow(o, (uint32_t)i, round16(sizeof *o + bytes)) : -1;
  pthread_mutex_unlock(&mu);
  return rc;
}

void loom__arena_str(uint32_t id, const char *s, size_t len) {
  if (!loom__arena_on() || len > UINT32_MAX - 1) return;
  loom__astr *a = loom__arena_alloc(LOOM__AO_STR, sizeof *a + len + 1);
  if (!a) return; /* the salvager names what it cannot find */
  a->id = id;
  a->len = (uint32_t)len;
  memcpy(a->s, s, len);
  publish(a);
}

/* ---- mapping snapshots ----------------------------------------------------- */
loom__amaps *loom__maps_parse(FILE *f) {
  loom__amap *m = NULL;
  char *paths = NULL;
  size_t n = 0, cap = 0, plen = 0, pcap = 0;
  char line[4096 + 256];
  while (fgets(line, sizeof line, f)) {
    unsigned long long s, e, off;
    char perms[8];
    int pos = 0;
    if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %n", &s, &e, perms, &off, &pos) < 4 || !pos)
      continue;
    char *path = line + pos;
    path[strcspn(path, "\n")] = 0;
    if (path[0] != '/' || perms[0] != 'r') continue; /* only readable files */
    size_t l = strlen(path) + 1;
    if ((n == cap && loom__grow((void **)&m, &cap, n + 1, sizeof *m)) ||
        loom__grow((void **)&paths, &pcap, plen + l, 1))
      break;
    m[n++] = (loom__amap){s, e, off, (uint32_t)plen, 0};
    memcpy(paths + plen, path, l);
    plen += l;
  }
  loom__amaps *a = n ? malloc(sizeof *a + n * sizeof *m + plen) : NULL;
  if (a) {
    a->seq = 0;
    a->n = (uint32_t)n;
    a->paths_len = (uint32_t)plen;
    memcpy(a->m, m, n * sizeof *m);
    memcpy((char *)(a->m + n), paths, plen);
  }
  free(m);
  free(paths);
  return a;
}

size_t loom__maps_size(const loom__amaps *a) {
  return sizeof *a + a->n * sizeof *a->m + a->paths_len;
}

void loom__arena_maps(void) {
  if (!loom__arena_on()) return;
  FILE *f = fopen("/proc/self/maps", "re");
  if (!f) return;
  loom__amaps *m = loom__maps_parse(f);
  fclose(f);
  loom__amaps *a = m ? loom__arena_alloc(LOOM__AO_MAPS, loom__maps_size(m)) : NULL;
  if (a) {
    memcpy(a, m, loom__maps_size(m));
    pthread_mutex_lock(&mu);
    a->seq = ++maps_seq;
    pthread_mutex_unlock(&mu);
    publish(a);
  }
  free(m);
}

/* ---- session ----------------------------------------------------------------- */
void loom__arena_epoch(uint32_t epoch) {
  if (hdr) atomic_store_explicit(&hdr->epoch, epoch, memory_order_release);
}

void loom__arena_session(const void *tl, size_t tl_size, int domain, const char *name,
                         const char *const *keys, const char *const *vals, size_t nopts,
                         uint64_t chunk_bytes, uint64_t cap_bytes) {
  if (!loom__arena_on() || tl_size > sizeof hdr->tl) return;
  memcpy(hdr->tl, tl, tl_size);
  hdr->tl_size = (uint32_t)tl_size;
  hdr->domain = domain;
  hdr->chunk_bytes = chunk_bytes;
  hdr->cap_bytes = cap_bytes;
  snprintf(hdr->name, sizeof hdr->name, "%s", name ? name : "loom");
  prctl(PR_GET_NAME, hdr->comm, 0, 0, 0);
  size_t len = 0;
  for (size_t i = 0; i < nopts; i++) {
    size_t kl = strlen(keys[i]) + 1, vl = strlen(vals[i]) + 1;
    if (len + kl + vl + 1 > sizeof hdr->opts) break; /* the rest is not kept */
    memcpy(hdr->opts + len, keys[i], kl);
    memcpy(hdr->opts + len + kl, vals[i], vl);
    len += kl + vl;
  }
  hdr->opts[len] = 0;
  hdr->opts_len = (uint32_t)len;
  for (uint32_t i = 0; i < LOOM__ARENA_MAXBK; i++) atomic_store(&hdr->bk[i].held, 0);
  atomic_store(&hdr->nbk, 0);
  atomic_store_explicit(&hdr->recording, 1, memory_order_release);
}

void loom__arena_bk_held(int *slot, const char *name, uint64_t n) {
  if (!loom__arena_on()) return;
  if (!*slot) {
    pthread_mutex_lock(&mu);
    uint32_t k = atomic_load(&hdr->nbk);
    for (uint32_t i = 0; i < k && !*slot; i++)
      if (!strncmp(hdr->bk[i].name, name, sizeof hdr->bk[i].name - 1)) *slot = (int)i + 1;
    if (!*slot && k < LOOM__ARENA_MAXBK) {
      snprintf(hdr->bk[k].name, sizeof hdr->bk[k].name, "%s", name);
      atomic_store_explicit(&hdr->nbk, k + 1, memory_order_release);
      *slot = (int)k + 1;
    }
    pthread_mutex_unlock(&mu);
    if (!*slot) *slot = -1; /* more backends than slots: not counted */
  }
  if (*slot > 0) atomic_fetch_add_explicit(&hdr->bk[*slot - 1].held, n, memory_order_relaxed);
}

/* ---- open, close, fork ---------------------------------------------------- */
/* The preload's (tools/loom/preload.c): path is LOOM_RECORD_DIR/<pid>.arena,
 * out the trace the process would write.  0, or -1 (recording goes on in
 * malloc'ed memory; the caller says so). */
int loom__arena_begin(const char *path, const char *out) {
  pthread_mutex_lock(&mu);
  if (hdr) {
    pthread_mutex_unlock(&mu);
    return 0;
  }
  int rc = -1, fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  fd = fd >= 0 && loom__fd_keep(&afd, fd) == 0 ? afd.fd : -1;
  atomic_store(&fd_lost, 0);
  /* the first segment a hole too; only the header reserved now */
  if (fd >= 0 && ftruncate(fd, SEG_MIN) == 0 && posix_fallocate(fd, 0, LOOM__ARENA_HDR) == 0) {
    void *p = mmap(NULL, SEG_MIN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) {
      hdr = p;
      hdr->version = LOOM__ARENA_VERSION;
      hdr->hdr_size = LOOM__ARENA_HDR;
      hdr->pid = (int32_t)getpid();
      hdr->seg[0] = (loom__aseg){(uint64_t)(uintptr_t)p, 0, SEG_MIN};
      atomic_store_explicit(&hdr->nseg, 1, memory_order_release);
      snprintf(hdr->out, sizeof hdr->out, "%s", out ? out : "");
      cur = p;
      cur_used = LOOM__ARENA_HDR;
      cur_size = file_size = plain_size = SEG_MIN;
      cur_seg = 0;
      /* last: a reader takes the file only once the header is whole */
      atomic_store_explicit((_Atomic uint64_t *)&hdr->magic, LOOM__ARENA_MAGIC,
                            memory_order_release);
      rc = 0;
    }
  }
  if (rc != 0 && fd >= 0) {
    loom__fd_close(&afd);
    unlink(path);
  }
  static int handler;
  /* a child forked without exec that does not record (--follow exec, or
   * none) must not write here either (an interned string would) */
  if (rc == 0 && !handler++) pthread_atfork(NULL, NULL, loom__arena_forked);
  pthread_mutex_unlock(&mu);
  if (rc == 0) {
    atomic_store_explicit(&on, 1, memory_order_release);
    loom__intern_mirror(); /* the strings interned before */
    loom__arena_maps();
  }
  return rc;
}

/* The process is about to exec (loom-preload): nothing more goes into the
 * arena, which the next program's replaces (after a failed exec the
 * process records on in its own memory). */
void loom__arena_off(void) {
  atomic_store_explicit(&on, 0, memory_order_release);
}

/* The session's trace was written: nothing to rebuild until the next
 * session starts (a process recording several windows calls it after each).
 * The file stays: the buffers in it are reused; loom record removes it with
 * its session folder. */
void loom__arena_end(void) {
  if (hdr) atomic_store_explicit(&hdr->recording, 0, memory_order_release);
}

/* A forked child shares the parent's mappings: its writes would land in the
 * parent's records.  Each segment is mapped again, privately, at the same
 * address (the child keeps reading what is there), and the child opens its
 * own arena when it records. */
void loom__arena_forked(void) {
  /* twice in a child that records (fork.c, then this file's own handler):
   * the second time the arena is already the child's own */
  if (!hdr || hdr->pid == (int32_t)getpid()) return;
  atomic_store(&on, 0);
  uint32_t n = atomic_load(&hdr->nseg);
  loom__aseg seg[LOOM__ARENA_MAXSEG];
  memcpy(seg, hdr->seg, n * sizeof *seg);
  int ours = loom__fd_ok(&afd);
  for (uint32_t i = 0; i < n; i++) {
    void *at = (void *)(uintptr_t)seg[i].addr;
    if (ours) {
      mmap(at, seg[i].size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, afd.fd,
           (off_t)seg[i].off);
      continue;
    }
    /* the program reused the descriptor: a private copy made by hand */
    void *c = mmap(NULL, seg[i].size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (c == MAP_FAILED) continue;
    memcpy(c, at, seg[i].size);
    if (mremap(c, seg[i].size, seg[i].size, MREMAP_MAYMOVE | MREMAP_FIXED, at) == MAP_FAILED)
      munmap(c, seg[i].size);
  }
  loom__fd_close(&afd);
  hdr = NULL;
  cur = NULL;
  cur_used = cur_size = file_size = plain_size = 0;
  cur_seg = 0;
  free_list = NULL;
  sole_free = NULL;
  memset(sole, 0, sizeof sole);
  maps_seq = 0;
  pthread_mutex_init(&mu, NULL);
}

/* ---- small objects of the core (core/bkarena.c, core/meta.c, hostrec.c) ---- */
static _Atomic uint64_t seq_next;

uint64_t loom__arena_seq(void) { return atomic_fetch_add(&seq_next, 1) + 1; }

int32_t loom__arena_pid(void) { return loom__arena_on() && hdr ? hdr->pid : 0; }

void *loom__arena_kv(uint32_t what, uint64_t tid, const char *key, const char *value) {
  size_t kl = strlen(key), vl = value ? strlen(value) : 0;
  if (kl > 1u << 20 || vl > 1u << 20) return NULL;
  loom__akv *a = loom__arena_alloc(LOOM__AO_KV, sizeof *a + kl + vl + 2);
  if (!a) return NULL;
  a->what = what;
  a->seq = loom__arena_seq();
  a->tid = tid;
  a->klen = (uint32_t)kl;
  a->vlen = value ? (uint32_t)vl : UINT32_MAX;
  memcpy(a->s, key, kl + 1);
  if (value) memcpy(a->s + kl + 1, value, vl + 1);
  atomic_store_explicit(&a->valid, 1, memory_order_release);
  return a;
}
