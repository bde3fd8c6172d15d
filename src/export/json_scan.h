/*
 * json_scan.h - a JSON tokenizer for well-formed traces that gives the same
 * callbacks yajl gives, 2.5 times as fast (docs/formats.md).  It takes
 * only what it is sure yajl reads the same way: plain strings (escapes and
 * UTF-8 checked as yajl checks them), numbers, literals and the structure.
 * At anything else (a syntax error, a comment, an odd escape, a control
 * character, the end of the input) it stops at that token's first byte and
 * hands over a yajl handle put in the same state, with callbacks that reach
 * the caller's, so that errors, messages and byte offsets are yajl's own.
 * Input comes in chunks; a token cut by a chunk's end is kept and finished
 * with the next chunk.
 */
#ifndef LOOM_JSON_SCAN_H
#define LOOM_JSON_SCAN_H

#include <stddef.h>
#include <stdint.h>
#include <yajl/yajl_parse.h>

#include "json_tape.h"

typedef struct loom__jscan loom__jscan;

enum {
  LOOM__JSCAN_MORE,    /* every byte taken: give the next chunk */
  LOOM__JSCAN_HANDOFF, /* the rest is yajl's: loom__jscan_handoff */
  LOOM__JSCAN_STOP,    /* a callback said stop */
  LOOM__JSCAN_NOMEM
};

/* A scanner that calls cb with ctx.  NULL when out of memory. */
loom__jscan *loom__jscan_new(const yajl_callbacks *cb, void *ctx);
void loom__jscan_free(loom__jscan *s);

/* Scans the next n bytes of the input.  On LOOM__JSCAN_HANDOFF, *at is the
 * count of data's bytes taken; the rest of the input is then data + *at on,
 * after the kept bytes loom__jscan_handoff gives. */
int loom__jscan_feed(loom__jscan *s, const unsigned char *data, size_t n, size_t *at);

/* At the end of the input: 1 when the document was complete and nothing is
 * left (then nothing is handed over), 0 when yajl must see the end. */
int loom__jscan_done(const loom__jscan *s);

/* The yajl handle that goes on from where the scanner stopped (NULL when out
 * of memory): it was given the scanner's state and calls the caller's
 * callbacks from here on.  *kept, *nkept: bytes of a token the scanner had
 * begun in earlier chunks, to give yajl before the rest of the input (valid
 * until loom__jscan_free). */
yajl_handle loom__jscan_handoff(loom__jscan *s, const unsigned char **kept, size_t *nkept);

/* Reads src to its end with the scanner, and yajl from where it stops,
 * calling cb (numbers as text: yajl_number) with ctx on this thread.
 * *strings: the count of strings and keys cb has seen, given to src->next.
 * *res: LOOM__JTAPE_OK (truncated set when the input ended inside the
 * document), _SYNTAX with yajl's message and byte offset, _READ, or
 * _CANCELLED when a callback said stop or memory ran out. */
void loom__jscan_run(const loom__jsrc *src, const yajl_callbacks *cb, void *ctx,
                     const uint64_t *strings, loom__jtape_result *res);

#endif
