/*
 * fuzz_jscan.c - loom's JSON tokenizer (json_scan.h) against yajl on any
 * bytes: the same tokens with the same text, in the same order, and the same
 * outcome (complete, truncated, or yajl's error message at the same byte
 * offset).  The input is given whole, then in small chunks (a size picked
 * from the input, so that tokens are cut everywhere), yajl reading the same
 * chunks; a third run has a callback say stop after some token, and both must
 * stop there; a fourth (inputs past 4 KiB) has chunks of 4-12 KiB.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export/json_scan.h"
#include "fuzz.h"

typedef struct rec {
  unsigned char *p;
  size_t n, cap;
  size_t tokens, stop_at; /* a callback says stop at token stop_at (0: never) */
  uint64_t strings;
} rec;

static int add(rec *r, char type, const void *text, size_t n) {
  if (r->n + n + 16 > r->cap) {
    size_t cap = (r->n + n + 16) * 2;
    unsigned char *p = realloc(r->p, cap);
    FUZZ_CHECK(p != NULL, "out of memory");
    r->p = p, r->cap = cap;
  }
  r->p[r->n++] = (unsigned char)type;
  memcpy(r->p + r->n, &n, sizeof n);
  r->n += sizeof n;
  if (n) memcpy(r->p + r->n, text, n);
  r->n += n;
  return ++r->tokens != r->stop_at;
}

static int c_null(void *c) { return add(c, 'n', NULL, 0); }
static int c_bool(void *c, int b) { return add(c, b ? 't' : 'f', NULL, 0); }
static int c_number(void *c, const char *s, size_t n) { return add(c, '#', s, n); }
static int c_string(void *c, const unsigned char *s, size_t n) {
  ((rec *)c)->strings++;
  return add(c, 's', s, n);
}
static int c_key(void *c, const unsigned char *s, size_t n) {
  ((rec *)c)->strings++;
  return add(c, 'k', s, n);
}
static int c_map(void *c) { return add(c, '{', NULL, 0); }
static int c_end_map(void *c) { return add(c, '}', NULL, 0); }
static int c_array(void *c) { return add(c, '[', NULL, 0); }
static int c_end_array(void *c) { return add(c, ']', NULL, 0); }
static const yajl_callbacks rec_cb = {c_null, c_bool, NULL, NULL, c_number, c_string,
                                      c_map, c_key, c_end_map, c_array, c_end_array};

typedef struct chunks {
  const uint8_t *d;
  size_t size, at, step;
} chunks;

static long next_chunk(void *ctx, const unsigned char **data, uint64_t strings) {
  chunks *c = ctx;
  (void)strings;
  size_t n = c->size - c->at < c->step ? c->size - c->at : c->step;
  *data = c->d + c->at;
  c->at += n;
  return (long)n;
}

/* yajl alone over the same chunks, as the reader on one thread runs it. */
static void by_yajl(const uint8_t *d, size_t size, size_t step, rec *r, loom__jtape_result *res) {
  memset(res, 0, sizeof *res);
  yajl_handle y = yajl_alloc(&rec_cb, NULL, r);
  FUZZ_CHECK(y != NULL, "yajl_alloc");
  yajl_config(y, yajl_allow_multiple_values, 0);
  for (size_t at = 0; at < size; at += step) {
    size_t n = size - at < step ? size - at : step;
    yajl_status st = yajl_parse(y, d + at, n);
    if (st == yajl_status_client_canceled) {
      res->status = LOOM__JTAPE_CANCELLED;
      break;
    }
    if (st != yajl_status_ok) {
      res->status = LOOM__JTAPE_SYNTAX;
      res->offset = at + yajl_get_bytes_consumed(y);
      unsigned char *msg = yajl_get_error(y, 0, d + at, n);
      snprintf(res->msg, sizeof res->msg, "%s", (const char *)msg);
      yajl_free_error(y, msg);
      break;
    }
    res->offset = at + n;
  }
  if (!res->status && yajl_complete_parse(y) != yajl_status_ok) res->truncated = 1;
  yajl_free(y);
}

static void compare(const uint8_t *d, size_t size, size_t step, size_t stop_at) {
  rec a = {.stop_at = stop_at}, b = {.stop_at = stop_at};
  loom__jtape_result ra, rb;
  by_yajl(d, size, step, &a, &ra);
  chunks c = {d, size, 0, step};
  loom__jsrc src = {next_chunk, &c};
  loom__jscan_run(&src, &rec_cb, &b, &b.strings, &rb);
  FUZZ_CHECK(ra.status == rb.status, "step %zu: status yajl %d, scanner %d", step, ra.status, rb.status);
  FUZZ_CHECK(ra.status != LOOM__JTAPE_SYNTAX || (ra.offset == rb.offset && !strcmp(ra.msg, rb.msg)),
             "step %zu: yajl \"%s\" at %llu, scanner \"%s\" at %llu", step, ra.msg,
             (unsigned long long)ra.offset, rb.msg, (unsigned long long)rb.offset);
  FUZZ_CHECK(ra.status || ra.truncated == rb.truncated, "step %zu: truncated: yajl %d, scanner %d", step,
             ra.truncated, rb.truncated);
  FUZZ_CHECK(a.tokens == b.tokens && a.n == b.n && (!a.n || !memcmp(a.p, b.p, a.n)),
             "step %zu: yajl %zu tokens, scanner %zu", step, a.tokens, b.tokens);
  free(a.p);
  free(b.p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < size && i < 64; i++) h = (h ^ data[i]) * 1099511628211ull;
  size_t whole = size ? size : 1, small = 1 + (size_t)(h >> 33) % 17, big = 4097 + (size_t)(h >> 13) % 8192;
  compare(data, size, whole, 0);
  compare(data, size, small, 0);
  compare(data, size, small, 1 + (size_t)(h >> 7) % 64);
  /* chunks past the 4096 bytes a kept token is first given more of, so
   * that a token cut by a chunk takes several tries to finish */
  if (size > big) compare(data, size, big, 0);
  return 0;
}
