/*
 * json_scan_int.h - the tokenizer's state, shared by the scanner
 * (json_scan.c) and its hand-over to yajl (json_scan_yajl.c).
 */
#ifndef LOOM_JSON_SCAN_INT_H
#define LOOM_JSON_SCAN_INT_H

#include "json_scan.h"

/* What the next token may be. */
enum { S_VALUE, S_DONE, S_MAP_FIRST, S_MAP_COLON, S_MAP_VALUE, S_MAP_NEXT, S_MAP_KEY,
       S_ARR_FIRST, S_ARR_VALUE, S_ARR_NEXT };

/* yajl's callbacks for the caller's, silent while priming. */
typedef struct loom__jrelay {
  const yajl_callbacks *cb;
  void *ctx;
  int priming;
} loom__jrelay;

struct loom__jscan {
  const yajl_callbacks *cb;
  void *ctx;
  int state;
  unsigned char *stack; /* per open container, outermost first: 1 map, 0 array */
  size_t depth, cap_stack;
  unsigned char *kept;  /* a token begun in an earlier chunk, from its first byte */
  size_t nkept, cap_kept;
  unsigned char *dec;   /* a string with its escapes decoded */
  size_t cap_dec;
  yajl_handle y;
  loom__jrelay r;
};

#endif
