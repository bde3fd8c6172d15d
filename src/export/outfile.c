/*
 * outfile.c - implementation of the atomic buffered output (outfile.h) and
 * the JSON string escaper shared by the writers.
 */
#define _GNU_SOURCE
#include "outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base/base.h"
#include "util/util.h"

#define OUT_BUF (1u << 20)

const char loom__digits2[200] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

#define ZBUF (1u << 18)

int loom__out_mem_init(loom__out *o) {
  memset(o, 0, sizeof *o);
  o->fd = -2;
  o->cap = 1 << 16;
  o->buf = malloc(o->cap);
  return o->buf ? 0 : -1;
}

/* The process's umask, read without changing it (umask() would, for a
 * moment, for every thread); 022 when /proc cannot say. */
static mode_t read_umask(void) {
  FILE *f = fopen("/proc/self/status", "re");
  char line[256];
  unsigned m = 022;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "Umask: %o", &m) == 1) break;
  if (f) fclose(f);
  return (mode_t)m;
}

/* The mode of the file at path once written: what the umask allows a new
 * file (0666 & ~umask), and never more than the file it replaces had
 * (traces hold command lines and names from the environment). */
static mode_t out_mode(const char *path) {
  mode_t m = 0666 & ~read_umask();
  struct stat st;
  if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) m &= st.st_mode;
  return m & 0777;
}

loom_status loom__out_open(loom__out *o, const char *path, int gzip) {
  memset(o, 0, sizeof *o);
  o->fd = -1;
  if (!path || !*path) return loom__fail(LOOM_EINVAL, "no output path given");
  o->path = loom__strdup(path);
  o->tmp = loom__asprintf("%s.tmp.XXXXXX", path);
  o->buf = malloc(OUT_BUF);
  if (!o->path || !o->tmp || !o->buf) {
    loom__out_abort(o);
    return loom__fail(LOOM_ENOMEM, "out of memory opening %s", path);
  }
  o->cap = OUT_BUF;
  o->fd = mkostemp(o->tmp, O_CLOEXEC);
  if (o->fd < 0) {
    int e = errno;
    free(o->tmp);
    o->tmp = NULL;
    loom__out_abort(o);
    return loom__fail(LOOM_EIO, "cannot write %s: %s", path, strerror(e));
  }
  fchmod(o->fd, out_mode(path));
  if (gzip >= 0) {
    z_stream *z = calloc(1, sizeof *z);
    o->zbuf = malloc(ZBUF);
    /* windowBits 15 + 16: a gzip header, as gunzip and viewers expect. */
    if (!z || !o->zbuf ||
        deflateInit2(z, gzip, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
      free(z);
      loom__out_abort(o);
      return loom__fail(LOOM_ENOMEM, "cannot start gzip compression for %s", path);
    }
    o->z = z;
  }
  return LOOM_OK;
}

static void write_all(loom__out *o, const void *p, size_t n) {
  const char *c = p;
  size_t off = 0;
  while (off < n && !o->failed) {
    ssize_t w = write(o->fd, c + off, n - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      o->failed = w < 0 ? errno : ENOSPC;
      break;
    }
    off += (size_t)w;
  }
  o->bytes += off;
}

/* Compresses len bytes of buf (finishing the stream when fin). */
static void deflate_out(loom__out *o, int fin) {
  z_stream *z = o->z;
  z->next_in = (unsigned char *)o->buf;
  z->avail_in = (unsigned)o->len;
  int rc;
  do {
    z->next_out = o->zbuf;
    z->avail_out = ZBUF;
    rc = deflate(z, fin ? Z_FINISH : Z_NO_FLUSH);
    if (rc == Z_STREAM_ERROR) {
      o->failed = EIO;
      return;
    }
    write_all(o, o->zbuf, ZBUF - z->avail_out);
  } while (z->avail_out == 0 || (fin && rc != Z_STREAM_END && !o->failed));
}

void loom__out_make_room(loom__out *o, size_t n) {
  if (o->fd != -2) {
    loom__out_flush(o);
    return;
  }
  size_t cap = o->cap;
  if (loom__grow((void **)&o->buf, &cap, o->len + n, 1) == 0) {
    o->cap = cap;
  } else { /* out of memory: keep writing over the start, report failure */
    o->failed = ENOMEM;
    o->len = 0;
  }
}

void loom__out_flush(loom__out *o) {
  if (o->fd == -2) return; /* memory buffer: nothing to flush */
  if (o->z) deflate_out(o, 0);
  else write_all(o, o->buf, o->len);
  o->len = 0;
}

static void out_free(loom__out *o) {
  if (o->z) deflateEnd(o->z);
  free(o->z);
  free(o->zbuf);
  o->z = NULL;
  o->zbuf = NULL;
  free(o->buf);
  free(o->path);
  free(o->tmp);
  o->buf = o->path = o->tmp = NULL;
}

void loom__out_abort(loom__out *o) {
  if (o->fd >= 0) close(o->fd);
  o->fd = -1;
  if (o->tmp) unlink(o->tmp);
  out_free(o);
}

loom_status loom__out_commit(loom__out *o) {
  if (o->z) {
    deflate_out(o, 1);
    o->len = 0;
  } else {
    loom__out_flush(o);
  }
  if (!o->failed && close(o->fd) != 0) o->failed = errno;
  else if (o->failed) close(o->fd);
  o->fd = -1;
  if (!o->failed && rename(o->tmp, o->path) != 0) o->failed = errno;
  if (o->failed) {
    int e = o->failed;
    char *path = o->path;
    o->path = NULL;
    unlink(o->tmp);
    out_free(o);
    loom_status st = loom__fail(LOOM_EIO, "cannot write %s: %s (nothing was left behind)",
                                path, strerror(e));
    free(path);
    return st;
  }
  out_free(o);
  return LOOM_OK;
}

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
  unsigned c = s[0];
  size_t len;
  unsigned min;
  if (c < 0xC2) return 0;
  if (c < 0xE0) { len = 2; min = 0x80; }
  else if (c < 0xF0) { len = 3; min = 0x800; }
  else if (c < 0xF5) { len = 4; min = 0x10000; }
  else return 0;
  if (len > n) return 0;
  unsigned cp = c & (0x3F >> (len - 1));
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

void loom__json_str(loom__out *o, const char *str, size_t len) {
  static const char hex[] = "0123456789abcdef";
  const unsigned char *s = (const unsigned char *)str;
  loom__out_lit(o, "\"");
  size_t i = 0;
  while (i < len) {
    size_t run = i;
    while (run < len && s[run] >= 0x20 && s[run] < 0x80 && s[run] != '"' && s[run] != '\\')
      run++;
    if (run > i) loom__out_mem(o, s + i, run - i);
    i = run;
    if (i >= len) break;
    unsigned c = s[i];
    char *d = loom__out_reserve(o, 8);
    if (c == '"' || c == '\\') {
      d[0] = '\\';
      d[1] = (char)c;
      o->len += 2;
      i++;
    } else if (c < 0x20) {
      d[0] = '\\';
      switch (c) {
      case '\n': d[1] = 'n'; o->len += 2; break;
      case '\t': d[1] = 't'; o->len += 2; break;
      case '\r': d[1] = 'r'; o->len += 2; break;
      case '\b': d[1] = 'b'; o->len += 2; break;
      case '\f': d[1] = 'f'; o->len += 2; break;
      default:
        memcpy(d + 1, "u00", 3);
        d[4] = hex[c >> 4];
        d[5] = hex[c & 15];
        o->len += 6;
      }
      i++;
    } else {
      size_t k = utf8_seq(s + i, len - i);
      if (k) {
        memcpy(d, s + i, k);
        o->len += k;
        i += k;
      } else { /* U+FFFD written as UTF-8, as a reader decodes it */
        memcpy(d, "\xEF\xBF\xBD", 3);
        o->len += 3;
        i++;
      }
    }
  }
  loom__out_lit(o, "\"");
}
