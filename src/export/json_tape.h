/*
 * json_tape.h - JSON tokenized on a thread of its own.  The parser thread
 * runs loom's tokenizer (json_scan.h: yajl from where it stops, at anything
 * unusual) over the input and writes each token (with a copy of its text)
 * on a "tape" of bounded blocks; the caller's thread reads the tape back and
 * calls the same yajl callbacks the reader would have been given by yajl
 * on one thread.  Tokenizing and building the model then run on two cores.
 * Errors come out as they would from yajl on one thread: every token before
 * the error reaches the callbacks, then yajl's error, with its byte offset.
 */
#ifndef LOOM_JSON_TAPE_H
#define LOOM_JSON_TAPE_H

#include <stddef.h>
#include <stdint.h>
#include <yajl/yajl_parse.h>

/* Where the parser thread gets its input: fills buf (at most cap bytes, or
 * sets *data to its own bytes) and returns the count, 0 at the end, -1 on
 * a read error.  Called on the parser thread only. */
typedef struct loom__jsrc {
  long (*next)(void *ctx, const unsigned char **data, uint64_t strings_seen);
  void *ctx;
} loom__jsrc;

enum {
  LOOM__JTAPE_OK,
  LOOM__JTAPE_SYNTAX,    /* yajl's error: msg */
  LOOM__JTAPE_READ,      /* the source said -1 */
  LOOM__JTAPE_CANCELLED  /* a callback said stop, or no memory for the tape */
};

typedef struct loom__jtape_result {
  int status;           /* LOOM__JTAPE_* */
  uint64_t offset;      /* bytes of input read before the end or the error */
  char msg[256];        /* yajl's message (LOOM__JTAPE_SYNTAX) */
  int truncated;        /* the input ended inside the document */
} loom__jtape_result;

/* Parses src on a new thread and replays the tokens into cb/ctx on this
 * one.  Returns -1 when no thread or memory could be had before anything
 * was parsed (the caller then parses in one thread), else 0 with *res set. */
int loom__jtape_run(const loom__jsrc *src, const yajl_callbacks *cb, void *ctx,
                    loom__jtape_result *res);

/* read_json.c: inputs at least this big (bytes on disk) go through the
 * tape; SIZE_MAX: none (tests compare both ways). */
extern size_t loom__json_tape_min;

#endif
