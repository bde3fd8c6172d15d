/*
 * kallsyms.c - the kernel's text symbols, for naming kernel frames: read
 * once from /proc/kallsyms (some 120,000 lines, 5 MB), sorted by address.
 * The kernel takes ~25 ms to write the file; the parsing here adds little
 * to that (no scanf, no allocation per symbol: names go into one buffer).
 * Where kallsyms hides the addresses (kernel.kptr_restrict, or no
 * privilege: every address 0) there are none, and frames keep their
 * address.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perf.h"

static int ksym_cmp(const void *a, const void *b) {
  uint64_t x = ((const pf_ksym *)a)->addr, y = ((const pf_ksym *)b)->addr;
  return x < y ? -1 : x > y;
}

/* One line "ADDR TYPE NAME[\t[module]]": a text symbol (t or T) with an
 * address is kept.  0, or -1 out of memory. */
static int line(pf_ksyms *k, const char *s, const char *end) {
  uint64_t a = 0;
  const char *p = s;
  for (; p < end; p++) {
    int d = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;
    if (d < 0) break;
    a = a << 4 | (uint64_t)d;
  }
  if (!a || end - p < 4 || p[0] != ' ' || (p[1] != 't' && p[1] != 'T') || p[2] != ' ') return 0;
  const char *name = p + 3, *ne = name;
  while (ne < end && *ne != ' ' && *ne != '\t') ne++;
  size_t nl = (size_t)(ne - name);
  if (!nl || pf_grow((void **)&k->v, &k->cap, k->n + 1, sizeof *k->v) ||
      pf_grow((void **)&k->names, &k->names_cap, k->len + nl + 1, 1))
    return nl ? -1 : 0;
  k->v[k->n++] = (pf_ksym){a, k->len};
  memcpy(k->names + k->len, name, nl);
  k->names[k->len + nl] = 0;
  k->len += nl + 1;
  return 0;
}

pf_ksyms *pf_ksyms_read(void) {
  pf_ksyms *k = calloc(1, sizeof *k);
  int fd = k ? open("/proc/kallsyms", O_RDONLY | O_CLOEXEC) : -1;
  if (fd < 0) return k;
  char buf[1 << 16];
  size_t have = 0;
  for (;;) {
    ssize_t r = read(fd, buf + have, sizeof buf - have);
    if (r <= 0) break;
    have += (size_t)r;
    char *s = buf, *nl;
    while ((nl = memchr(s, '\n', have - (size_t)(s - buf)))) {
      if (line(k, s, nl) < 0) goto done;
      s = nl + 1;
    }
    have -= (size_t)(s - buf);
    memmove(buf, s, have);
    if (have == sizeof buf) have = 0; /* a line longer than the buffer: dropped */
  }
done:
  close(fd);
  size_t i = 1;
  while (i < k->n && k->v[i - 1].addr <= k->v[i].addr) i++;
  if (i < k->n) qsort(k->v, k->n, sizeof *k->v, ksym_cmp); /* the kernel's own are in order */
  return k;
}

pf_ksyms *pf_ksyms_alloc(size_t n, size_t len) {
  pf_ksyms *k = calloc(1, sizeof *k);
  if (!k) return NULL;
  k->v = malloc((n ? n : 1) * sizeof *k->v);
  k->names = malloc(len ? len : 1);
  if (!k->v || !k->names) {
    pf_ksyms_free(k);
    return NULL;
  }
  k->n = k->cap = n;
  k->len = k->names_cap = len;
  return k;
}

int pf_ksyms_sane(const pf_ksyms *k) {
  if (!k->len || k->names[k->len - 1]) return 0;
  for (size_t i = 0; i < k->n; i++)
    if (k->v[i].name >= k->len || (i && k->v[i - 1].addr > k->v[i].addr)) return 0;
  return 1;
}

const char *pf_ksyms_name(const pf_ksyms *k, uint64_t pc) {
  size_t lo = 0, hi = k ? k->n : 0;
  while (lo < hi) { /* the last symbol at or below pc */
    size_t mid = lo + (hi - lo) / 2;
    if (k->v[mid].addr <= pc) lo = mid + 1;
    else hi = mid;
  }
  return lo ? k->names + k->v[lo - 1].name : NULL;
}

void pf_ksyms_free(pf_ksyms *k) {
  if (!k) return;
  free(k->v);
  free(k->names);
  free(k);
}
