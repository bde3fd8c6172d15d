/*
 * kcache.c - the kernel's text symbols kept between recordings.
 *
 * Reading /proc/kallsyms costs ~50 ms of kernel time on a 2-vCPU VM (the
 * kernel formats 120,000 lines), paid by every recording with a kernel
 * frame: a quarter of what sampling cost a 0.2 s program.  The symbols
 * read are kept in $XDG_CACHE_HOME/loom (else ~/.cache/loom), one file per
 * user id, and used again while the key they were read under holds: the
 * boot (/proc/sys/kernel/random/boot_id: the kernel's addresses are
 * randomized per boot) and the text of /proc/modules (modules loaded or
 * unloaded move or add symbols).  What the key does not see: BPF programs
 * and ftrace trampolines loaded since ("[bpf]" symbols), whose frames are
 * then named after the symbol below them.  The file is the reader's own
 * (0600, in a 0700 folder), and is used only when it is a regular file of
 * this user that nobody else may write, whole, with its names in bounds
 * and its addresses in order; else it is read from the kernel again and
 * the file replaced (through a temporary name).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "perf.h"

typedef struct kc_head {
  char magic[8];
  char boot[40];    /* boot_id, NUL-padded */
  uint64_t modules; /* FNV-1a of /proc/modules */
  uint64_t n, len;  /* symbols, bytes of names */
} kc_head;

static const char MAGIC[8] = "loomks1";

static uint64_t fnv(uint64_t h, const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
  return h;
}

/* The key of the kernel's symbols now; -1 when it cannot be known. */
static int key_now(kc_head *h) {
  memset(h, 0, sizeof *h);
  memcpy(h->magic, MAGIC, sizeof MAGIC);
  int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
  ssize_t r = fd >= 0 ? read(fd, h->boot, sizeof h->boot - 1) : -1;
  if (fd >= 0) close(fd);
  if (r < 16) return -1;
  fd = open("/proc/modules", O_RDONLY | O_CLOEXEC);
  uint64_t m = 0xcbf29ce484222325ull;
  char buf[16384];
  while (fd >= 0 && (r = read(fd, buf, sizeof buf)) > 0) m = fnv(m, buf, (size_t)r);
  if (fd >= 0) close(fd); /* no /proc/modules (no modules): the hash of nothing */
  h->modules = m;
  return 0;
}

/* The cache file's path, its folder made (0700) when missing; -1 when
 * there is no home to put it in. */
static int cache_path(char *out, size_t n) {
  const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  char dir[4096];
  int k = x && *x == '/' ? snprintf(dir, sizeof dir, "%s", x)
          : home && *home == '/' ? snprintf(dir, sizeof dir, "%s/.cache", home) : -1;
  if (k < 0 || (size_t)k >= sizeof dir - 8) return -1;
  mkdir(dir, 0700);
  strcat(dir, "/loom");
  mkdir(dir, 0700);
  k = snprintf(out, n, "%s/kallsyms-%lu", dir, (unsigned long)geteuid());
  return k > 0 && (size_t)k < n ? 0 : -1;
}

static int read_all(int fd, void *p, size_t n) {
  for (size_t got = 0; got < n;) {
    ssize_t r = read(fd, (char *)p + got, n - got);
    if (r <= 0) return -1;
    got += (size_t)r;
  }
  return 0;
}

/* The symbols of a file whose key is want's and that is whole and sane,
 * else NULL. */
static pf_ksyms *cache_load(const char *path, const kc_head *want) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  struct stat st;
  kc_head h;
  pf_ksyms *k = NULL;
  if (fd < 0) return NULL;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
      (st.st_mode & 022) || read_all(fd, &h, sizeof h) != 0 ||
      memcmp(h.magic, want->magic, sizeof h.magic) || memcmp(h.boot, want->boot, sizeof h.boot) ||
      h.modules != want->modules || h.n == 0 || h.n > ((uint64_t)1 << 26) ||
      h.len > ((uint64_t)1 << 30) ||
      (uint64_t)st.st_size != sizeof h + h.n * sizeof(pf_ksym) + h.len)
    goto out;
  k = pf_ksyms_alloc((size_t)h.n, (size_t)h.len);
  if (!k || read_all(fd, k->v, (size_t)h.n * sizeof *k->v) != 0 ||
      read_all(fd, k->names, (size_t)h.len) != 0 || !pf_ksyms_sane(k)) {
    pf_ksyms_free(k);
    k = NULL;
  }
out:
  close(fd);
  return k;
}

static void cache_store(const char *path, kc_head *h, const pf_ksyms *k) {
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.XXXXXX", path);
  int fd = mkstemp(tmp); /* 0600 */
  if (fd < 0) return;
  h->n = k->n, h->len = k->len;
  int ok = write(fd, h, sizeof *h) == (ssize_t)sizeof *h &&
           write(fd, k->v, k->n * sizeof *k->v) == (ssize_t)(k->n * sizeof *k->v) &&
           write(fd, k->names, k->len) == (ssize_t)k->len;
  if (close(fd) != 0 || !ok || rename(tmp, path) != 0) unlink(tmp);
}

pf_ksyms *pf_ksyms_get(void) {
  kc_head want;
  char path[4096];
  int cacheable = key_now(&want) == 0 && cache_path(path, sizeof path) == 0;
  pf_ksyms *k = cacheable ? cache_load(path, &want) : NULL;
  if (k) {
    k->from_cache = 1;
    return k;
  }
  k = pf_ksyms_read();
  if (k && k->n && cacheable) cache_store(path, &want, k);
  return k;
}
