/*
 * json_scan_yajl.c - where the tokenizer (json_scan.c) stops, yajl goes on.
 * A fresh yajl handle reads a prefix that puts its parser in the scanner's
 * state (each outer container open and waiting for its value, the innermost
 * waiting for what the scanner waits for), its callbacks silenced; then it
 * is given the rest of the input from the token the scanner left, calling
 * the caller's callbacks.  loom__jscan_run drives both over a source.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_scan_int.h"

static int r_null(void *c) {
  loom__jrelay *r = c;
  return r->priming || !r->cb->yajl_null ? 1 : r->cb->yajl_null(r->ctx);
}
static int r_bool(void *c, int b) {
  loom__jrelay *r = c;
  return r->priming || !r->cb->yajl_boolean ? 1 : r->cb->yajl_boolean(r->ctx, b);
}
static int r_number(void *c, const char *t, size_t n) {
  loom__jrelay *r = c;
  return r->priming || !r->cb->yajl_number ? 1 : r->cb->yajl_number(r->ctx, t, n);
}
static int r_string(void *c, const unsigned char *t, size_t n) {
  loom__jrelay *r = c;
  return r->priming || !r->cb->yajl_string ? 1 : r->cb->yajl_string(r->ctx, t, n);
}
static int r_key(void *c, const unsigned char *t, size_t n) {
  loom__jrelay *r = c;
  return r->priming || !r->cb->yajl_map_key ? 1 : r->cb->yajl_map_key(r->ctx, t, n);
}
static int r_map(void *c) {
  loom__jrelay *r = c;
  return r->priming || !r->cb->yajl_start_map ? 1 : r->cb->yajl_start_map(r->ctx);
}
static int r_end_map(void *c) {
  loom__jrelay *r = c;
  return r->priming || !r->cb->yajl_end_map ? 1 : r->cb->yajl_end_map(r->ctx);
}
static int r_array(void *c) {
  loom__jrelay *r = c;
  return r->priming || !r->cb->yajl_start_array ? 1 : r->cb->yajl_start_array(r->ctx);
}
static int r_end_array(void *c) {
  loom__jrelay *r = c;
  return r->priming || !r->cb->yajl_end_array ? 1 : r->cb->yajl_end_array(r->ctx);
}

static const yajl_callbacks relay_cb = {r_null, r_bool, NULL, NULL, r_number, r_string,
                                        r_map, r_key, r_end_map, r_array, r_end_array};

/* The text that brings a fresh yajl to the scanner's state: each outer
 * container open and waiting for its value, the innermost where the
 * scanner is. */
static char *prefix(const loom__jscan *s, size_t *n) {
  static const char *const inner[] = {
      [S_VALUE] = "", [S_DONE] = "null", [S_MAP_FIRST] = "{", [S_MAP_COLON] = "{\"\"",
      [S_MAP_VALUE] = "{\"\":", [S_MAP_NEXT] = "{\"\":null", [S_MAP_KEY] = "{\"\":null,",
      [S_ARR_FIRST] = "[", [S_ARR_VALUE] = "[null,", [S_ARR_NEXT] = "[null"};
  char *t = malloc(4 * s->depth + 16);
  if (!t) return NULL;
  size_t at = 0;
  for (size_t i = 0; i + 1 < s->depth; i++) {
    memcpy(t + at, s->stack[i] ? "{\"\":" : "[", s->stack[i] ? 4 : 1);
    at += s->stack[i] ? 4 : 1;
  }
  size_t k = strlen(inner[s->state]);
  memcpy(t + at, inner[s->state], k);
  *n = at + k;
  return t;
}

yajl_handle loom__jscan_handoff(loom__jscan *s, const unsigned char **kept, size_t *nkept) {
  *kept = s->kept, *nkept = s->nkept;
  if (s->y) return s->y;
  size_t n;
  char *t = prefix(s, &n);
  s->r = (loom__jrelay){s->cb, s->ctx, 1};
  s->y = t ? yajl_alloc(&relay_cb, NULL, &s->r) : NULL;
  if (s->y) {
    yajl_config(s->y, yajl_allow_multiple_values, 0);
    if (n && yajl_parse(s->y, (const unsigned char *)t, n) != yajl_status_ok) {
      yajl_free(s->y); /* cannot be: the prefix is valid JSON so far */
      s->y = NULL;
    }
  }
  free(t);
  s->r.priming = 0;
  return s->y;
}


/* ---- the run ------------------------------------------------------------ */
/* Gives n bytes to yajl; base: the input's offset of d.  0, or -1 with the
 * result set. */
static int feed_yajl(yajl_handle y, const unsigned char *d, size_t n, uint64_t base,
                     loom__jtape_result *res) {
  yajl_status st = n ? yajl_parse(y, d, n) : yajl_status_ok;
  if (st == yajl_status_ok) return 0;
  if (st == yajl_status_client_canceled) {
    res->status = LOOM__JTAPE_CANCELLED;
    return -1;
  }
  res->status = LOOM__JTAPE_SYNTAX;
  res->offset = base + yajl_get_bytes_consumed(y);
  unsigned char *msg = yajl_get_error(y, 0, d, n);
  snprintf(res->msg, sizeof res->msg, "%s", msg ? (const char *)msg : "parse error");
  yajl_free_error(y, msg);
  return -1;
}

/* The hand-over: yajl is given the token the scanner kept, then d from at
 * on (res->offset: the input's offset of d).  The handle, or NULL when it
 * failed (res set). */
static yajl_handle hand_over(loom__jscan *s, const unsigned char *d, size_t n, size_t at,
                             loom__jtape_result *res) {
  const unsigned char *kept;
  size_t nkept;
  yajl_handle y = loom__jscan_handoff(s, &kept, &nkept);
  uint64_t base = res->offset + at;
  if (!y) res->status = LOOM__JTAPE_CANCELLED;
  else if (feed_yajl(y, kept, nkept, base - nkept, res) || feed_yajl(y, d + at, n - at, base, res))
    y = NULL;
  return y;
}

static void run_on(loom__jscan *s, const loom__jsrc *src, const uint64_t *strings,
                   loom__jtape_result *res) {
  yajl_handle y = NULL;
  for (;;) {
    const unsigned char *d = NULL;
    long n = src->next(src->ctx, &d, *strings);
    if (n < 0) {
      res->status = LOOM__JTAPE_READ;
      return;
    }
    if (n == 0) {
      if (!y && !loom__jscan_done(s) && !(y = hand_over(s, d, 0, 0, res))) return;
      if (y && yajl_complete_parse(y) != yajl_status_ok) res->truncated = 1;
      return;
    }
    size_t at = 0;
    int r = y ? LOOM__JSCAN_HANDOFF : loom__jscan_feed(s, d, (size_t)n, &at);
    if (r == LOOM__JSCAN_STOP || r == LOOM__JSCAN_NOMEM) {
      res->status = LOOM__JTAPE_CANCELLED;
      return;
    }
    if (r == LOOM__JSCAN_HANDOFF && !y) {
      if (!(y = hand_over(s, d, (size_t)n, at, res))) return;
    } else if (y && feed_yajl(y, d, (size_t)n, res->offset, res)) {
      return;
    }
    res->offset += (uint64_t)n;
  }
}

void loom__jscan_run(const loom__jsrc *src, const yajl_callbacks *cb, void *ctx,
                     const uint64_t *strings, loom__jtape_result *res) {
  memset(res, 0, sizeof *res);
  loom__jscan *s = loom__jscan_new(cb, ctx);
  if (s) run_on(s, src, strings, res);
  else res->status = LOOM__JTAPE_CANCELLED;
  loom__jscan_free(s);
}
