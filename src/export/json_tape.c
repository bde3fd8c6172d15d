/*
 * json_tape.c - the tokenizer on its own thread, its tokens replayed on the
 * caller's (json_tape.h).  The tape is a queue of at most NBLOCKS filled blocks
 * (each BLOCK bytes, or one token's size when a token is bigger); the parser
 * waits while the queue is full, so memory stays bounded whatever the input.
 * Record: one type byte; numbers, strings and keys then a 4-byte length and
 * the text; booleans are their own types.
 */
#include "json_tape.h"
#include "json_scan.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BLOCK = 1 << 18, NBLOCKS = 8 };
enum { T_NULL, T_FALSE, T_TRUE, T_NUMBER, T_STRING, T_KEY, T_MAP, T_END_MAP, T_ARRAY, T_END_ARRAY };

typedef struct block {
  unsigned char *p;
  size_t n, cap;
} block;

typedef struct tape {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  block q[NBLOCKS];     /* filled blocks, oldest at head */
  size_t head, count;
  block free_[NBLOCKS + 1]; /* blocks the reader is done with */
  size_t nfree;
  int done, cancel;
  /* the parser thread's own */
  block cur;
  uint64_t strings;
  const loom__jsrc *src;
  loom__jtape_result res;
} tape;

/* ---- the parser thread ---------------------------------------------------- */
/* Hands cur to the reader (waiting while the queue is full) and takes an
 * empty block that holds at least need bytes.  0, or -1 (cancelled, no
 * memory). */
static int publish(tape *t, size_t need) {
  pthread_mutex_lock(&t->mu);
  while (t->count == NBLOCKS && !t->cancel) pthread_cond_wait(&t->cv, &t->mu);
  int cancel = t->cancel;
  if (!cancel && t->cur.n) {
    t->q[(t->head + t->count) % NBLOCKS] = t->cur;
    t->count++;
    t->cur = (block){0};
    pthread_cond_broadcast(&t->cv);
  }
  if (!t->cur.p && t->nfree) t->cur = t->free_[--t->nfree];
  pthread_mutex_unlock(&t->mu);
  if (cancel) return -1;
  t->cur.n = 0;
  if (t->cur.cap < need) {
    size_t cap = need > BLOCK ? need : BLOCK;
    unsigned char *p = realloc(t->cur.p, cap);
    if (!p) return -1;
    t->cur.p = p;
    t->cur.cap = cap;
  }
  return 0;
}

static int put(tape *t, int type, const void *text, size_t n, int has_text) {
  size_t need = 1 + (has_text ? 4 + n : 0);
  if (has_text && n > UINT32_MAX) return 0;
  if (t->cur.n + need > t->cur.cap && publish(t, need) != 0) return 0;
  unsigned char *p = t->cur.p + t->cur.n;
  *p++ = (unsigned char)type;
  if (has_text) {
    uint32_t len = (uint32_t)n;
    memcpy(p, &len, 4);
    if (n) memcpy(p + 4, text, n);
  }
  t->cur.n += need;
  return 1;
}

static int w_null(void *c) { return put(c, T_NULL, NULL, 0, 0); }
static int w_bool(void *c, int b) { return put(c, b ? T_TRUE : T_FALSE, NULL, 0, 0); }
static int w_number(void *c, const char *s, size_t n) { return put(c, T_NUMBER, s, n, 1); }
static int w_string(void *c, const unsigned char *s, size_t n) {
  ((tape *)c)->strings++;
  return put(c, T_STRING, s, n, 1);
}
static int w_key(void *c, const unsigned char *s, size_t n) {
  ((tape *)c)->strings++;
  return put(c, T_KEY, s, n, 1);
}
static int w_map(void *c) { return put(c, T_MAP, NULL, 0, 0); }
static int w_end_map(void *c) { return put(c, T_END_MAP, NULL, 0, 0); }
static int w_array(void *c) { return put(c, T_ARRAY, NULL, 0, 0); }
static int w_end_array(void *c) { return put(c, T_END_ARRAY, NULL, 0, 0); }

static const yajl_callbacks writer_cb = {w_null, w_bool, NULL, NULL, w_number, w_string,
                                         w_map, w_key, w_end_map, w_array, w_end_array};

static void *parser_main(void *arg) {
  tape *t = arg;
  loom__jscan_run(t->src, &writer_cb, t, &t->strings, &t->res);
  if (t->cur.n && publish(t, 0) != 0 && !t->res.status) t->res.status = LOOM__JTAPE_CANCELLED;
  pthread_mutex_lock(&t->mu);
  t->done = 1;
  pthread_cond_broadcast(&t->cv);
  pthread_mutex_unlock(&t->mu);
  return NULL;
}

/* ---- the caller's thread ------------------------------------------------ */
static uint32_t len_at(const unsigned char *p) {
  uint32_t n;
  memcpy(&n, p, 4);
  return n;
}

/* Calls cb for every record of b.  0, or -1 when a callback said stop. */
static int replay(const block *b, const yajl_callbacks *cb, void *ctx) {
  for (size_t at = 0; at < b->n;) {
    int type = b->p[at++], ok = 1;
    const unsigned char *s = b->p + at + 4;
    uint32_t n = type == T_NUMBER || type == T_STRING || type == T_KEY ? len_at(b->p + at) : 0;
    switch (type) {
    case T_NULL: ok = cb->yajl_null(ctx); break;
    case T_FALSE: ok = cb->yajl_boolean(ctx, 0); break;
    case T_TRUE: ok = cb->yajl_boolean(ctx, 1); break;
    case T_NUMBER: ok = cb->yajl_number(ctx, (const char *)s, n); break;
    case T_STRING: ok = cb->yajl_string(ctx, s, n); break;
    case T_KEY: ok = cb->yajl_map_key(ctx, s, n); break;
    case T_MAP: ok = cb->yajl_start_map(ctx); break;
    case T_END_MAP: ok = cb->yajl_end_map(ctx); break;
    case T_ARRAY: ok = cb->yajl_start_array(ctx); break;
    default: ok = cb->yajl_end_array(ctx); break;
    }
    if (type == T_NUMBER || type == T_STRING || type == T_KEY) at += 4 + (size_t)n;
    if (!ok) return -1;
  }
  return 0;
}

/* The next filled block, or 0 when the parser is done and none is left. */
static int take(tape *t, block *b) {
  pthread_mutex_lock(&t->mu);
  while (!t->count && !t->done) pthread_cond_wait(&t->cv, &t->mu);
  int got = t->count > 0;
  if (got) {
    *b = t->q[t->head];
    t->head = (t->head + 1) % NBLOCKS;
    t->count--;
    pthread_cond_broadcast(&t->cv);
  }
  pthread_mutex_unlock(&t->mu);
  return got;
}

static void give_back(tape *t, block b, int cancel) {
  pthread_mutex_lock(&t->mu);
  if (t->nfree < NBLOCKS + 1) t->free_[t->nfree++] = b;
  else free(b.p);
  if (cancel) t->cancel = 1;
  pthread_cond_broadcast(&t->cv);
  pthread_mutex_unlock(&t->mu);
}

int loom__jtape_run(const loom__jsrc *src, const yajl_callbacks *cb, void *ctx,
                    loom__jtape_result *res) {
  tape *t = calloc(1, sizeof *t);
  if (!t) return -1;
  t->src = src;
  pthread_mutex_init(&t->mu, NULL);
  pthread_cond_init(&t->cv, NULL);
  pthread_t th;
  if (pthread_create(&th, NULL, parser_main, t) != 0) {
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    free(t);
    return -1;
  }
  int cancelled = 0;
  block b;
  while (!cancelled && take(t, &b)) {
    cancelled = replay(&b, cb, ctx) != 0;
    give_back(t, b, cancelled);
  }
  pthread_join(th, NULL);
  *res = t->res;
  if (cancelled) res->status = LOOM__JTAPE_CANCELLED;
  for (size_t i = 0; i < t->count; i++) free(t->q[(t->head + i) % NBLOCKS].p);
  for (size_t i = 0; i < t->nfree; i++) free(t->free_[i].p);
  free(t->cur.p);
  pthread_mutex_destroy(&t->mu);
  pthread_cond_destroy(&t->cv);
  free(t);
  return 0;
}
