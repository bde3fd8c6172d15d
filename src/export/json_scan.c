/*
 * json_scan.c - the tape's tokenizer (json_scan.h).  A state machine: what
 * may come next (a key, a colon, a value, a comma or a close), one label of
 * run() each, and a stack of the open containers.  Strings and digits are
 * scanned eight bytes at a time (for a string, the bytes that need a look:
 * '"', '\\', controls and non-ASCII).  What it leaves to yajl it never calls
 * back for: the token is given whole to yajl (json_scan_yajl.c).
 */
#include "json_scan_int.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

/* What scanning a token found. */
enum { T_OK, T_NEED, T_YAJL, T_STOP, T_NOMEM };

/* Bytes a string scan passes over: printable ASCII but '"' and '\\'. */
static int plain(unsigned c) { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\'; }

static const unsigned char *plain_run(const unsigned char *p, const unsigned char *end) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
  while (end - p >= 8) {
    uint64_t x, q, b;
    memcpy(&x, p, 8);
    q = x ^ (ones * '"');
    b = x ^ (ones * '\\');
    /* a zero byte of q or b, a byte of x below 0x20, a byte with its top
     * bit: the lowest flagged byte is always a true one */
    uint64_t m = (((q - ones) & ~q) | ((b - ones) & ~b) | ((x - ones * 0x20) & ~x) | x) & high;
    if (m) return p + (__builtin_ctzll(m) >> 3);
    p += 8;
  }
#endif
  while (p < end && plain(*p)) p++;
  return p;
}

static int hexval(unsigned c) {
  if (c >= '0' && c <= '9') return (int)(c - '0');
  if (c >= 'a' && c <= 'f') return (int)(c - 'a' + 10);
  if (c >= 'A' && c <= 'F') return (int)(c - 'A' + 10);
  return -1;
}

/* The 4 hex digits at p (n of them there): the code unit, -1 when they are
 * cut by the end, -2 when one is no hex digit. */
static long hex4(const unsigned char *p, size_t n) {
  long v = 0;
  for (size_t i = 0; i < 4; i++) {
    if (i >= n) return -1;
    int h = hexval(p[i]);
    if (h < 0) return -2;
    v = v * 16 + h;
  }
  return v;
}

/* An escape at q ('\\'): its length, or -T_NEED / -T_YAJL.  A high
 * surrogate counts only with the low one after it: yajl reads other pairs
 * its own way. */
static long escape_len(const unsigned char *q, const unsigned char *end) {
  if (end - q < 2) return -T_NEED;
  if (q[1] && strchr("\"\\/bfnrt", q[1])) return 2;
  if (q[1] != 'u') return -T_YAJL;
  long hi = hex4(q + 2, (size_t)(end - q - 2));
  if (hi < 0) return hi == -1 ? -T_NEED : -T_YAJL;
  if ((hi & 0xFC00) != 0xD800) return 6;
  if (end - q < 8) return -T_NEED;
  if (q[6] != '\\' || q[7] != 'u') return -T_YAJL;
  long lo = hex4(q + 8, (size_t)(end - q - 8));
  if (lo == -1) return -T_NEED;
  return lo >= 0xDC00 && lo <= 0xDFFF ? 12 : -T_YAJL;
}

/* A UTF-8 sequence at q checked as yajl checks it (the lead byte's form and
 * its continuation bytes): its length, or -T_NEED / -T_YAJL. */
static long utf8_len(const unsigned char *q, const unsigned char *end) {
  unsigned c = q[0];
  long n = (c >> 5) == 6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (!n) return -T_YAJL;
  for (long i = 1; i < n; i++) {
    if (q + i >= end) return -T_NEED;
    if ((q[i] >> 6) != 2) return -T_YAJL;
  }
  return n;
}

static size_t put_utf8(unsigned char *o, unsigned long cp) {
  if (cp < 0x80) return o[0] = (unsigned char)cp, 1;
  if (cp < 0x800) {
    o[0] = (unsigned char)(0xC0 | cp >> 6), o[1] = (unsigned char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = (unsigned char)(0xE0 | cp >> 12), o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[2] = (unsigned char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (unsigned char)(0xF0 | cp >> 18), o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
  o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F)), o[3] = (unsigned char)(0x80 | (cp & 0x3F));
  return 4;
}

/* The text of p..p+n (escapes already checked) decoded into s->dec. */
static long decode(loom__jscan *s, const unsigned char *p, size_t n) {
  if (n + 1 > s->cap_dec && loom__grow((void **)&s->dec, &s->cap_dec, n + 1, 1)) return -1;
  unsigned char *o = s->dec;
  for (size_t i = 0; i < n;) {
    if (p[i] != '\\') {
      *o++ = p[i++];
      continue;
    }
    unsigned c = p[i + 1];
    if (c != 'u') {
      *o++ = (unsigned char)(c == 'b' ? '\b' : c == 'f' ? '\f' : c == 'n' ? '\n' : c == 'r' ? '\r' :
                             c == 't' ? '\t' : c);
      i += 2;
      continue;
    }
    unsigned long cp = (unsigned long)hex4(p + i + 2, 4);
    i += 6;
    if ((cp & 0xFC00) == 0xD800) {
      cp = 0x10000 + ((cp - 0xD800) << 10) + ((unsigned long)hex4(p + i + 2, 4) - 0xDC00);
      i += 6;
    }
    o += put_utf8(o, cp);
  }
  return o - s->dec;
}

static int push(loom__jscan *s, unsigned char is_map) {
  if (s->depth == s->cap_stack && loom__grow((void **)&s->stack, &s->cap_stack, s->depth + 1, 1))
    return -1;
  s->stack[s->depth++] = is_map;
  return 0;
}

static int after_value(const loom__jscan *s) {
  return !s->depth ? S_DONE : s->stack[s->depth - 1] ? S_MAP_NEXT : S_ARR_NEXT;
}

static int is_ws(unsigned c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

/* A string's end from p (past its opening quote): T_OK with *q at its
 * closing quote and *esc set when it holds escapes. */
static inline int str_end(const unsigned char *p, const unsigned char *end, const unsigned char **q,
                          int *esc) {
  *esc = 0;
  for (;;) {
    p = plain_run(p, end);
    if (p == end) return T_NEED;
    if (*p == '"') break;
    long n = *p == '\\' ? escape_len(p, end) : *p < 0x20 ? -T_YAJL : utf8_len(p, end);
    if (n < 0) return (int)-n;
    *esc |= *p == '\\';
    p += n;
  }
  *q = p;
  return T_OK;
}

/* Calls back for the string p..q (a key when key). */
static int emit_str(loom__jscan *s, const unsigned char *p, const unsigned char *q, int esc,
                    int key) {
  long len = q - p;
  if (esc && (len = decode(s, p, (size_t)len)) < 0) return T_NOMEM;
  if (esc) p = s->dec;
  int ok = key ? s->cb->yajl_map_key(s->ctx, p, (size_t)len)
               : s->cb->yajl_string(s->ctx, p, (size_t)len);
  return ok ? T_OK : T_STOP;
}

static int digit(const unsigned char *q, const unsigned char *end) {
  return q < end && *q >= '0' && *q <= '9';
}

/* Past the decimal digits at q, eight bytes at a time. */
static const unsigned char *digits(const unsigned char *q, const unsigned char *end) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  const uint64_t ones = 0x0101010101010101ull, hi = 0xF0F0F0F0F0F0F0F0ull,
                 low7 = 0x7F7F7F7F7F7F7F7Full;
  while (end - q >= 8) {
    uint64_t x;
    memcpy(&x, q, 8);
    /* a digit's high nibble is 3, before and after adding 6 (a carry out of
     * a byte past 0xF9 only spoils the bytes after a non-digit) */
    uint64_t nd = ((x & hi) ^ (ones * 0x30)) | (((x + ones * 6) & hi) ^ (ones * 0x30));
    uint64_t m = (nd | ((nd & low7) + low7)) & ~low7; /* the top bit of each byte not 0 */
    if (m) return q + (__builtin_ctzll(m) >> 3);
    q += 8;
  }
#endif
  while (digit(q, end)) q++;
  return q;
}

/* A number's end from p ('-' or a digit): whole only once a byte after it
 * is seen. */
static int num_end(const unsigned char *p, const unsigned char *end, const unsigned char **q) {
  if (*p == '-') p++;
  if (p == end) return T_NEED;
  if (*p == '0') p++;
  else if (digit(p, end)) p = digits(p, end);
  else return T_YAJL;
  if (p < end && *p == '.') {
    if (++p == end) return T_NEED;
    if (!digit(p, end)) return T_YAJL;
    p = digits(p, end);
  }
  if (p < end && (*p == 'e' || *p == 'E')) {
    if (++p < end && (*p == '+' || *p == '-')) p++;
    if (p == end) return T_NEED;
    if (!digit(p, end)) return T_YAJL;
    p = digits(p, end);
  }
  if (p == end) return T_NEED;
  *q = p;
  return T_OK;
}

/* true, false or null at *pp: called back and passed. */
static int literal(loom__jscan *s, const unsigned char **pp, const unsigned char *end) {
  const char *w = **pp == 't' ? "true" : **pp == 'f' ? "false" : "null";
  size_t n = strlen(w), have = (size_t)(end - *pp);
  if (memcmp(*pp, w, have < n ? have : n)) return T_YAJL;
  if (have < n) return T_NEED;
  *pp += n;
  int ok = w[0] == 'n' ? s->cb->yajl_null(s->ctx) : s->cb->yajl_boolean(s->ctx, w[0] == 't');
  return ok ? T_OK : T_STOP;
}

/* A scalar value at *pp (its first byte not whitespace): called back and
 * passed, or T_NEED / T_YAJL with *pp unchanged. */
static inline int scalar(loom__jscan *s, const unsigned char **pp, const unsigned char *end) {
  const unsigned char *p = *pp, *q;
  int r, esc;
  if (*p == '"') {
    if ((r = str_end(p + 1, end, &q, &esc)) != T_OK) return r;
    *pp = q + 1;
    return emit_str(s, p + 1, q, esc, 0);
  }
  if (*p == 't' || *p == 'f' || *p == 'n') return literal(s, pp, end);
  if (*p != '-' && (*p < '0' || *p > '9')) return T_YAJL;
  if ((r = num_end(p, end, &q)) != T_OK) return r;
  *pp = q;
  return s->cb->yajl_number(s->ctx, (const char *)p, (size_t)(q - p)) ? T_OK : T_STOP;
}

static int open_container(loom__jscan *s, int is_map) {
  int ok = is_map ? s->cb->yajl_start_map(s->ctx) : s->cb->yajl_start_array(s->ctx);
  if (push(s, (unsigned char)is_map)) return T_NOMEM;
  return ok ? T_OK : T_STOP;
}

static int close_container(loom__jscan *s) {
  int ok = s->stack[--s->depth] ? s->cb->yajl_end_map(s->ctx) : s->cb->yajl_end_array(s->ctx);
  return ok ? T_OK : T_STOP;
}

/* Tokens from *pp to end, each called back, until one is cut by the end
 * (T_NEED), is yajl's (T_YAJL) or a callback says stop.  *pp is then the
 * first byte not taken (the token's, or the end) and s->state where the
 * scanner is.  One label per state, so that the code after each token
 * knows what comes next without a look at the state. */
static int run(loom__jscan *s, const unsigned char **pp, const unsigned char *end) {
  const unsigned char *p = *pp, *q;
  int st = s->state, r, esc;
#define WAIT(state)                                          \
  do {                                                       \
    while (p < end && *p <= ' ' && is_ws(*p)) p++;           \
    st = (state);                                            \
    if (p == end) LEAVE(T_NEED);                             \
  } while (0)
#define LEAVE(code) \
  do {              \
    r = (code);     \
    goto out;       \
  } while (0)
  switch (st) {
  case S_DONE: goto done;
  case S_MAP_FIRST: goto map_first;
  case S_MAP_COLON: goto colon;
  case S_MAP_VALUE: goto map_value;
  case S_MAP_NEXT: goto map_next;
  case S_MAP_KEY: goto map_key;
  case S_ARR_FIRST: goto arr_first;
  case S_ARR_VALUE: goto arr_value;
  case S_ARR_NEXT: goto arr_next;
  default: break;
  }
  WAIT(S_VALUE);
  goto value;
map_first:
  WAIT(S_MAP_FIRST);
  if (*p == '}') goto close;
  goto key;
map_key:
  WAIT(S_MAP_KEY);
key:
  if (*p != '"') LEAVE(T_YAJL);
  if ((r = str_end(p + 1, end, &q, &esc)) != T_OK) goto out;
  r = emit_str(s, p + 1, q, esc, 1);
  p = q + 1;
  st = S_MAP_COLON;
  if (r != T_OK) goto out;
colon:
  WAIT(S_MAP_COLON);
  if (*p != ':') LEAVE(T_YAJL);
  p++;
map_value:
  WAIT(S_MAP_VALUE);
  goto value;
arr_first:
  WAIT(S_ARR_FIRST);
  if (*p == ']') goto close;
  goto value;
arr_value:
  WAIT(S_ARR_VALUE);
value:
  if (*p == '{' || *p == '[') {
    int is_map = *p++ == '{';
    r = open_container(s, is_map);
    st = is_map ? S_MAP_FIRST : S_ARR_FIRST;
    if (r != T_OK) goto out;
    if (is_map) goto map_first;
    goto arr_first;
  }
  if ((r = scalar(s, &p, end)) != T_OK) {
    if (r == T_STOP || r == T_NOMEM) st = after_value(s);
    goto out;
  }
after:
  if (!s->depth) goto done;
  if (s->stack[s->depth - 1]) goto map_next;
arr_next:
  WAIT(S_ARR_NEXT);
  if (*p == ',') {
    p++;
    goto arr_value;
  }
  if (*p == ']') goto close;
  LEAVE(T_YAJL);
map_next:
  WAIT(S_MAP_NEXT);
  if (*p == ',') {
    p++;
    goto map_key;
  }
  if (*p == '}') goto close;
  LEAVE(T_YAJL);
close:
  r = close_container(s);
  p++;
  if (r == T_OK) goto after;
  st = after_value(s);
  goto out;
done:
  WAIT(S_DONE);
  LEAVE(T_YAJL);
out:
  s->state = st;
  *pp = p;
  return r;
#undef WAIT
#undef LEAVE
}

static int keep(loom__jscan *s, const unsigned char *p, size_t n) {
  if (!n) return 0;
  if (s->nkept + n > s->cap_kept && loom__grow((void **)&s->kept, &s->cap_kept, s->nkept + n, 1))
    return -1;
  memcpy(s->kept + s->nkept, p, n);
  s->nkept += n;
  return 0;
}

/* Finishes the kept token with the first bytes of data (as few as will do,
 * doubling the count) and scans on to the end of those: T_OK with *pp past
 * the bytes of data taken.  T_NEED: the token goes on past data, all of it
 * kept too.  T_YAJL with *pp unchanged: the kept token is yajl's. */
static int finish_kept(loom__jscan *s, const unsigned char **pp, const unsigned char *end) {
  size_t k = s->nkept, n = (size_t)(end - *pp), take = k > 4096 ? k : 4096;
  for (;;) {
    if (take > n) take = n;
    s->nkept = k;
    if (keep(s, *pp, take)) return T_NOMEM;
    const unsigned char *q = s->kept;
    int r = run(s, &q, s->kept + s->nkept);
    size_t used = (size_t)(q - s->kept);
    if (used < k) { /* nothing taken: the state is as it was */
      if (r == T_NEED && take < n) {
        take *= 2;
        continue;
      }
      if (r == T_YAJL) s->nkept = k;
      return r;
    }
    *pp += used - k;
    s->nkept = 0;
    return r == T_NEED ? T_OK : r;
  }
}

int loom__jscan_feed(loom__jscan *s, const unsigned char *data, size_t n, size_t *at) {
  const unsigned char *p = data, *end = data + n;
  int r = s->nkept ? finish_kept(s, &p, end) : T_OK;
  if (r == T_OK) r = run(s, &p, end);
  *at = (size_t)(p - data);
  if (r == T_NEED && s->nkept == 0 && keep(s, p, (size_t)(end - p))) r = T_NOMEM;
  if (r == T_NEED) *at = n;
  return r == T_NEED ? LOOM__JSCAN_MORE : r == T_YAJL ? LOOM__JSCAN_HANDOFF
         : r == T_STOP ? LOOM__JSCAN_STOP : LOOM__JSCAN_NOMEM;
}

int loom__jscan_done(const loom__jscan *s) { return s->state == S_DONE && !s->nkept; }

loom__jscan *loom__jscan_new(const yajl_callbacks *cb, void *ctx) {
  loom__jscan *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->cb = cb;
  s->ctx = ctx;
  return s;
}

void loom__jscan_free(loom__jscan *s) {
  if (!s) return;
  if (s->y) yajl_free(s->y);
  free(s->stack);
  free(s->kept);
  free(s->dec);
  free(s);
}
