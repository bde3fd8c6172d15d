/*
 * outfile.h - buffered, atomic output files for the trace writers.
 *
 * Data goes to a temporary file next to the destination (same folder, so the
 * final rename is atomic) and is renamed over the destination only when every
 * write and the close succeeded.  On any failure the temporary file is
 * removed and the destination is untouched.
 */
#ifndef LOOM_OUTFILE_H
#define LOOM_OUTFILE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "loom/loom.h"

typedef struct loom__out {
  char *buf;
  size_t len, cap;
  int fd;
  int failed;          /* errno of the first failure, 0 if none */
  char *path, *tmp;
  void *z;             /* z_stream when compressing */
  unsigned char *zbuf;
  uint64_t bytes;      /* bytes written to the file so far */
} loom__out;

/* Opens a temporary file for path; gzip (level 0-9, -1 = none) compresses
 * the stream as it is written.  LOOM_EIO (with loom_last_error) when the
 * folder is not writable. */
loom_status loom__out_open(loom__out *o, const char *path, int gzip);
/* A memory-only buffer (fd < 0): data accumulates in buf, never flushed
 * to a file; used to build escaped-string tables. */
int loom__out_mem_init(loom__out *o);
/* Flushes the buffer to the file (called when it fills). */
void loom__out_flush(loom__out *o);
/* Finishes: flush, close, rename.  On failure removes the temporary file
 * and returns LOOM_EIO with the reason. */
loom_status loom__out_commit(loom__out *o);
/* Abandons the output (removes the temporary file). */
void loom__out_abort(loom__out *o);

/* Slow path of loom__out_reserve: flushes (file) or grows (memory). */
void loom__out_make_room(loom__out *o, size_t n);

/* Makes room for n more bytes (n <= 4096 for files) and returns where to
 * write them. */
static inline char *loom__out_reserve(loom__out *o, size_t n) {
  if (o->len + n > o->cap) loom__out_make_room(o, n);
  return o->buf + o->len;
}
static inline void loom__out_mem(loom__out *o, const void *p, size_t n) {
  if (n > 4096 && o->fd != -2) {
    loom__out_flush(o);
    while (n > 0) { /* large blocks go through in pieces */
      size_t k = n < o->cap ? n : o->cap;
      memcpy(o->buf + o->len, p, k);
      o->len += k;
      loom__out_flush(o);
      p = (const char *)p + k;
      n -= k;
    }
    return;
  }
  memcpy(loom__out_reserve(o, n), p, n);
  o->len += n;
}
#define loom__out_lit(o, s) loom__out_mem((o), (s), sizeof(s) - 1)

/* "00" "01" ... "99": two digits per division. */
extern const char loom__digits2[200];

/* Writes v in decimal; returns the number of bytes (at most 20). */
static inline size_t loom__fmt_u64(char *dst, uint64_t v) {
  char tmp[24], *p = tmp + sizeof tmp;
  while (v >= 100) {
    unsigned r = (unsigned)(v % 100);
    v /= 100;
    p -= 2;
    memcpy(p, loom__digits2 + 2 * r, 2);
  }
  if (v >= 10) {
    p -= 2;
    memcpy(p, loom__digits2 + 2 * v, 2);
  } else {
    *--p = (char)('0' + v);
  }
  size_t n = (size_t)(tmp + sizeof tmp - p);
  memcpy(dst, p, n);
  return n;
}
static inline size_t loom__fmt_i64(char *dst, int64_t v) {
  if (v < 0) {
    dst[0] = '-';
    return 1 + loom__fmt_u64(dst + 1, (uint64_t)0 - (uint64_t)v);
  }
  return loom__fmt_u64(dst, (uint64_t)v);
}
/* ns as microseconds with exactly three decimals ("12.345"). */
static inline size_t loom__fmt_us(char *dst, int64_t ns) {
  size_t n = 0;
  uint64_t a = (uint64_t)ns;
  if (ns < 0) {
    dst[n++] = '-';
    a = (uint64_t)0 - a;
  }
  n += loom__fmt_u64(dst + n, a / 1000);
  uint32_t f = (uint32_t)(a % 1000);
  dst[n++] = '.';
  dst[n++] = (char)('0' + f / 100);
  memcpy(dst + n, loom__digits2 + 2 * (f % 100), 2);
  return n + 2;
}

/* Appends s as a JSON string literal (with quotes): quotes, backslashes and
 * control characters escaped, invalid UTF-8 bytes replaced by U+FFFD. */
void loom__json_str(loom__out *o, const char *s, size_t len);

#endif
