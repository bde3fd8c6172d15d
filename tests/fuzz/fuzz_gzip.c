/*
 * fuzz_gzip.c - gzip input.  The input is a mode byte and a trace; the
 * target compresses the trace (level from the mode) and, as the mode says,
 * cuts the compressed file short or flips one of its bytes, then loads it.
 * Intact, it must load exactly as the plain file does (same status, same
 * counts); damaged, it loads or fails with a message, never crashes.
 */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <loom/loom.h>

#include "fuzz.h"

static size_t gzip(const uint8_t *in, size_t n, int level, uint8_t *out, size_t cap) {
  z_stream z;
  memset(&z, 0, sizeof z);
  if (deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) abort();
  z.next_in = (Bytef *)in;
  z.avail_in = (uInt)n;
  z.next_out = out;
  z.avail_out = (uInt)cap;
  int rc = deflate(&z, Z_FINISH);
  FUZZ_CHECK(rc == Z_STREAM_END, "deflate: %d", rc);
  size_t len = z.total_out;
  deflateEnd(&z);
  return len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  unsigned mode = data[0];
  data++, size--;
  size_t cap = compressBound((uLong)size) + 64;
  uint8_t *z = malloc(cap);
  size_t len = gzip(data, size, (int)(mode % 10), z, cap);
  int damaged = 0;
  if (mode & 0x80) { /* cut at (mode & 0x3f) / 64 of the length */
    len = len * ((mode >> 1) & 0x3f) / 64;
    damaged = 1;
  } else if ((mode & 0x40) && len) { /* flip one byte past the header */
    size_t at = 10 + (size_t)((mode >> 1) & 0x1f) * (len > 10 ? len - 10 : 0) / 32;
    if (at < len) z[at] ^= 0x5a, damaged = 1;
  }
  const char *p = loom_fuzz_file("in.json.gz", z, len);
  free(z);
  if (!p) return 0;
  loom_trace *t = NULL;
  loom_status st = loom_trace_load(p, &t);
  if (st != LOOM_OK) FUZZ_CHECK(!t && *loom_last_error(), "failed load without a message");
  if (st == LOOM_OK) loom_fuzz_check_events(t);
  if (!damaged) {
    const char *q = loom_fuzz_file("plain.json", data, size);
    loom_trace *u = NULL;
    loom_status su = q ? loom_trace_load(q, &u) : st;
    FUZZ_CHECK(su == st, "gzip-compressed: %d, plain: %d", (int)st, (int)su);
    if (u && t) {
      FUZZ_CHECK(loom_trace_event_count(t) == loom_trace_event_count(u),
                 "gzip-compressed: %zu events, plain: %zu", loom_trace_event_count(t),
                 loom_trace_event_count(u));
      FUZZ_CHECK(loom_trace_flow_count(t) == loom_trace_flow_count(u),
                 "gzip-compressed: %zu flows, plain: %zu", loom_trace_flow_count(t),
                 loom_trace_flow_count(u));
    }
    loom_trace_free(u);
  }
  loom_trace_free(t);
  return 0;
}
