/*
 * read_json.c - loads Chrome trace JSON (loom's own and Kineto's, plain or
 * gzip) into the trace model with a streaming parser (yajl): the file is
 * never held in memory whole, only the model being built.
 *
 * Handled: complete (X), begin/end (B/E, matched per track), instants (i/I),
 * counters (C; loom's memory counters, derived, skipped), Kineto's [memory]
 * instants (memory events: memory_read.c), async ranges (b/e, matched by
 * category and id), flows (s/f/t,
 * bound to the enclosing slice, else an instant at their time, or the next
 * slice when "bp" is not "e"),
 * metadata (M: process and thread names, labels, sort indices), string
 * pids/tids (Kineto's "Spans"), and the top-level keys loom and Kineto write
 * (baseTimeNanoseconds, deviceProperties, loom_warnings, loom_dropped,
 * traceName, other string metadata; any other top-level value, such as
 * Kineto's distributedInfo, is kept as its JSON text).  Times keep their
 * nanoseconds: numbers are parsed from their text, not through doubles.
 * Nested argument values (arrays, objects), booleans and nulls are kept as
 * JSON text marked as such (loom__targ.json), so writers emit them as JSON.
 *
 * This file: the input (mapped or gzip, on one thread or two) and the model
 * finished after parsing; yajl's callbacks (and the parsing of numbers and
 * times) are in read_json_cb.c, strings, bad values and events in
 * read_json_events.c, their shared state in read_json.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <yajl/yajl_parse.h>
#include <zlib.h>

#include "base/base.h"
#include "export/input.h"
#include "json_tape.h"
#include "export/read_json.h"
#include "trace/trace.h"
#include "util/util.h"

/* ---- after parsing ------------------------------------------------------ */
static int cmp_ev_track(const void *pa, const void *pb) {
  const loom__ev *a = pa, *b = pb;
  if (a->track != b->track) return a->track < b->track ? -1 : 1;
  if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
  if (a->dur != b->dur) return a->dur > b->dur ? -1 : 1;
  return a->args_off < b->args_off ? -1 : a->args_off > b->args_off;
}

/* The slice a flow end binds to: the innermost slice on its track that
 * encloses ts, else an instant of the track at ts (trace_processor's
 * slice of no duration: loom writes a flow to one there), or
 * (bind_enclosing == 0) the first slice starting at or after ts. */
static long bind_flow(const loom_trace *t, const pending_flow *f) {
  size_t lo = 0, hi = t->nev;
  while (lo < hi) { /* first event of the track with ts > f->ts */
    size_t mid = (lo + hi) / 2;
    const loom__ev *e = &t->ev[mid];
    if (e->track < f->track || (e->track == f->track && e->ts <= f->ts)) lo = mid + 1;
    else hi = mid;
  }
  if (!f->bind_enclosing)
    return lo < t->nev && t->ev[lo].track == f->track && t->ev[lo].ph == LOOM__PH_COMPLETE
               ? (long)lo
               : -1;
  long instant = -1;
  for (size_t i = lo; i-- > 0;) {
    const loom__ev *e = &t->ev[i];
    if (e->track != f->track) break;
    if (e->ph == LOOM__PH_COMPLETE && e->ts <= f->ts && f->ts <= e->ts + e->dur) return (long)i;
    if (e->ph == LOOM__PH_INSTANT && e->ts == f->ts && instant < 0) instant = (long)i;
    if (f->ts - e->ts > (int64_t)3600e9) break; /* no slice lasts that long */
  }
  return instant;
}

static int cmp_flow(const void *pa, const void *pb) {
  const pending_flow *a = pa, *b = pb;
  if (a->id != b->id) return a->id < b->id ? -1 : 1;
  if (a->ph != b->ph) return a->ph == 's' ? -1 : b->ph == 's' ? 1 : 0;
  return a->ts < b->ts ? -1 : a->ts > b->ts;
}

static int finish(reader *r) {
  loom_trace *t = r->t;
  if (r->sink) {
    t->base_ns = r->base;
    if (loom__rj_flush(r, 1) != 0) return -1;
    t->start_ns = t->end_ns = 0;
    if (t->window_end) t->end_ns = r->window_end_ts + r->base;
    return 0;
  }
  loom__trace_close_open(t);
  for (size_t i = 0; i < t->nev; i++) t->ev[i].ts += r->base;
  for (size_t i = 0; i < r->nflows; i++) r->flows[i].ts += r->base;
  if (t->nev) qsort(t->ev, t->nev, sizeof *t->ev, cmp_ev_track);
  if (r->nflows) qsort(r->flows, r->nflows, sizeof *r->flows, cmp_flow);
  loom__trace_span(t);
  if (!t->nev) t->start_ns = t->end_ns = r->base;
  if (t->window_end) t->end_ns = r->window_end_ts + r->base;
  /* Flows: each 's' with the 'f' (or 't') that follow it with the same id. */
  for (size_t i = 0; i < r->nflows;) {
    size_t j = i;
    while (j < r->nflows && r->flows[j].id == r->flows[i].id) j++;
    long from = -1;
    for (size_t k = i; k < j; k++) {
      long at = bind_flow(t, &r->flows[k]);
      if (r->flows[k].ph == 's') {
        from = at;
      } else if (from >= 0 && at >= 0) {
        loom__flow f = {(uint32_t)from, (uint32_t)at, t->nflows + 1};
        if (LOOM__PUSH(t->flows, t->nflows, t->cap_flows, f)) return -1;
        if (r->flows[k].ph == 't') from = at;
      }
    }
    i = j;
  }
  return 0;
}

static void reader_free(reader *r) {
  free(r->key_heap);
  free(r->top_heap);
  free(r->ev_args);
  free(r->cap);
  free(r->bs);
  free(r->as);
  loom__map_free(&r->as_key);
  free(r->flows);
  loom__map_free(&r->pid_dev);
  loom__map_free(&r->str_ids);
  loom__map_free(&r->str_tids);
}

/* ---- the input ------------------------------------------------------------
 * An uncompressed file is mapped and parsed in place (input.h).  yajl scans a
 * token that spans chunks again from its start at each chunk: a chunk that
 * ended no string (one huge name) doubles the next, so a string of any
 * length costs linear time (for compressed input, the buffer it is read
 * into doubles). */
enum { CHUNK = 1 << 20 };

typedef struct jinput {
  gzFile f;
  const unsigned char *map;
  unsigned char *buf;
  size_t map_len, chunk, gzcap;
  uint64_t offset, dropped, strings_seen;
  uint64_t file_size;
  int failed; /* gzread failed */
} jinput;

static int input_open(jinput *in, const char *path) {
  memset(in, 0, sizeof *in);
  in->f = gzopen(path, "rb");
  if (!in->f) return -1;
  gzbuffer(in->f, 1 << 18);
  in->chunk = CHUNK / 2;
  in->gzcap = CHUNK;
  in->strings_seen = 1;
  in->map = loom__input_map(in->f, path, &in->map_len, &in->file_size);
  if (!in->map) in->buf = malloc(CHUNK);
  return in->map || in->buf ? 0 : -2;
}

static void input_close(jinput *in) {
  if (in->map) munmap((void *)in->map, in->map_len);
  else free(in->buf);
  gzclose(in->f);
}

/* The next bytes to parse (loom__jsrc.next): their count, 0 at the end,
 * -1 for corrupt compressed data.  strings: strings and keys parsed so far. */
static long input_next(void *ctx, const unsigned char **data, uint64_t strings) {
  jinput *in = ctx;
  long n;
  if (in->map) {
    in->chunk = strings != in->strings_seen ? CHUNK
                : in->chunk < (1u << 30)    ? 2 * in->chunk
                                            : in->chunk;
    in->strings_seen = strings;
    size_t left = in->map_len - (size_t)in->offset;
    n = (long)(left < in->chunk ? left : in->chunk);
    *data = in->map + in->offset;
    loom__input_drop(in->map, &in->dropped, in->offset);
  } else {
    size_t want = strings != in->strings_seen ? in->gzcap
                  : in->gzcap < (1u << 30)    ? 2 * in->gzcap
                                              : in->gzcap;
    in->strings_seen = strings;
    if (want > in->gzcap) {
      unsigned char *nb = realloc(in->buf, want);
      if (nb) in->buf = nb, in->gzcap = want;
    }
    n = gzread(in->f, in->buf, (unsigned)in->gzcap);
    *data = in->buf;
    if (n < 0) in->failed = 1;
  }
  if (n > 0) in->offset += (uint64_t)n;
  return n < 0 ? -1 : n;
}

/* Inputs at least this big (bytes on disk) are parsed on a thread of their
 * own (json_tape.h); SIZE_MAX: never.  Tests set it. */
size_t loom__json_tape_min = 1 << 20;

static loom_status truncated(const reader *r, const jinput *in, const char *path) {
  return loom__fail(LOOM_EFORMAT, "%s: truncated JSON: the file ends at byte offset %llu inside %s",
                    path, (unsigned long long)in->offset,
                    r->depth > 1 ? "the event list" : "the top-level object");
}

/* Parses the whole input into r in this thread.  The yajl error (or 0). */
static loom_status parse_here(reader *r, jinput *in, const char *path) {
  yajl_handle y = yajl_alloc(&loom__rj_callbacks, NULL, r);
  if (!y) return loom__fail(LOOM_ENOMEM, "out of memory reading %s", path);
  yajl_config(y, yajl_allow_multiple_values, 0);
  loom_status st = LOOM_OK;
  long n;
  const unsigned char *d;
  while ((n = input_next(in, &d, r->nstrings)) > 0) {
    if (yajl_parse(y, d, (size_t)n) != yajl_status_ok) {
      size_t at = yajl_get_bytes_consumed(y);
      unsigned char *msg = yajl_get_error(y, 0, d, (size_t)n);
      st = loom__fail(r->oom ? LOOM_ENOMEM : LOOM_EFORMAT, "%s: %s at byte offset %llu", path,
                      r->oom ? "out of memory" : (const char *)msg,
                      (unsigned long long)(in->offset - (uint64_t)n + at));
      yajl_free_error(y, msg);
      break;
    }
  }
  if (st == LOOM_OK && n == 0 && yajl_complete_parse(y) != yajl_status_ok)
    st = truncated(r, in, path);
  yajl_free(y);
  return st;
}

/* The same on two threads; -1 when no thread could be had (then nothing
 * was parsed). */
static int parse_threaded(reader *r, jinput *in, const char *path, loom_status *st) {
  loom__jsrc src = {input_next, in};
  loom__jtape_result res;
  if (loom__jtape_run(&src, &loom__rj_callbacks, r, &res) != 0) return -1;
  *st = LOOM_OK;
  if (res.status == LOOM__JTAPE_CANCELLED || (res.status && r->oom))
    *st = loom__fail(LOOM_ENOMEM, "%s: out of memory at byte offset %llu", path,
                     (unsigned long long)res.offset);
  else if (res.status == LOOM__JTAPE_SYNTAX)
    *st = loom__fail(LOOM_EFORMAT, "%s: %s at byte offset %llu", path, res.msg,
                     (unsigned long long)res.offset);
  else if (res.status == LOOM__JTAPE_OK && res.truncated)
    *st = truncated(r, in, path);
  return 0;
}

/* After the parse: the checks and the finishing touches. */
static loom_status parsed(reader *r, const jinput *in, const char *path, loom_status st) {
  if (st == LOOM_OK && in->failed) {
    int zerr;
    const char *m = gzerror(in->f, &zerr);
    st = loom__fail(LOOM_EFORMAT, "%s: corrupt compressed data near byte offset %llu "
                    "of the uncompressed stream: %s", path, (unsigned long long)in->offset, m);
  }
  if (st == LOOM_OK && in->offset == 0) st = loom__fail(LOOM_EFORMAT, "%s: empty file", path);
  if (st == LOOM_OK && r->depth != 0)
    st = loom__fail(LOOM_EFORMAT, "%s: truncated JSON at byte offset %llu", path,
                    (unsigned long long)in->offset);
  if (st == LOOM_OK) st = loom__rj_not_a_trace(r, path);
  if (st == LOOM_OK && r->role_unknown && loom__role_warning(r->t, path))
    st = loom__fail(LOOM_ENOMEM, "out of memory reading %s", path);
  if (st == LOOM_OK && r->kind_unknown && loom__kind_warning(r->t, path))
    st = loom__fail(LOOM_ENOMEM, "out of memory reading %s", path);
  /* "samples" + "stackFrames" (json_samples.c) before the bad values are
   * said: a sample's time is clamped as an event's is */
  if (st == LOOM_OK && !r->oom && loom__json_samples_read(r->t))
    st = loom__fail(LOOM_ENOMEM, "out of memory reading %s", path);
  if (st == LOOM_OK && loom__trace_bad_warnings(r->t, path))
    st = loom__fail(LOOM_ENOMEM, "out of memory reading %s", path);
  if (st == LOOM_OK && (r->oom || finish(r) != 0))
    st = loom__fail(LOOM_ENOMEM, "out of memory reading %s", path);
  return st;
}

static void reader_keys(reader *r) {
  r->key = r->key_in;
  r->top_key = r->top_in;
  r->ext_key = loom__trace_str(r->t, "External id");
  r->corr_key = loom__trace_str(r->t, "correlation");
  r->role_key = loom__trace_str(r->t, "loom_role");
  r->kind_key = loom__trace_str(r->t, "loom_kind");
  r->dir_key = loom__trace_str(r->t, "direction");
  r->stack_key = loom__trace_str(r->t, "stack");
  if (loom__memread_init(&r->mem, r->t)) r->oom = 1;
}

loom_status loom__read_json(const char *path, const loom__sink *sink, const loom__flow_sink *flows,
                            loom_trace **out) {
  *out = NULL;
  jinput in;
  int rc = input_open(&in, path);
  if (rc == -1) return loom__fail(LOOM_EIO, "cannot open %s: %s", path, strerror(errno));
  reader r;
  memset(&r, 0, sizeof r);
  r.t = loom__trace_new();
  r.path = path;
  r.sink = sink;
  r.lean = sink && !sink->all_args;
  r.fsink = flows;
  r.flush_at = LOOM__STREAM_BATCH;
  if (rc || !r.t) {
    input_close(&in);
    loom_trace_free(r.t);
    return loom__fail(LOOM_ENOMEM, "out of memory reading %s", path);
  }
  reader_keys(&r);
  loom_status st;
  if (in.file_size < loom__json_tape_min || parse_threaded(&r, &in, path, &st) != 0)
    st = parse_here(&r, &in, path);
  st = parsed(&r, &in, path, st);
  input_close(&in);
  reader_free(&r);
  if (st != LOOM_OK) {
    loom_trace_free(r.t);
    return st;
  }
  *out = r.t;
  return LOOM_OK;
}

int loom__read_json_header(loom_trace *t, const char *path, const char *text, size_t n) {
  reader r;
  memset(&r, 0, sizeof r);
  r.t = t;
  r.path = path;
  reader_keys(&r);
  yajl_handle y = yajl_alloc(&loom__rj_callbacks, NULL, &r);
  int rc = 0;
  if (y && (yajl_parse(y, (const unsigned char *)text, n) != yajl_status_ok ||
            yajl_complete_parse(y) != yajl_status_ok || r.depth != 0)) {
    if (!r.oom) loom__fail(LOOM_EFORMAT, "%s: its trace header (loom_header) is not JSON", path);
    rc = -1;
  }
  if (!y || r.oom) rc = -2;
  if (y) yajl_free(y);
  reader_free(&r);
  return rc;
}
