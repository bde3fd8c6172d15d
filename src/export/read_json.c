/*
 * read_json.c - loads Chrome trace JSON (loom's own and Kineto's, plain or
 * gzip) into the trace model with a streaming parser (yajl): the file is
 * never held in memory whole, only the model being built.
 *
 * Handled: complete (X), begin/end (B/E, matched per track), instants (i/I),
 * counters (C), async ranges (b/e, matched by category and id), flows (s/f/t,
 * bound to the enclosing slice, or the next one when "bp" is not "e"),
 * metadata (M: process and thread names, labels, sort indices), string
 * pids/tids (Kineto's "Spans"), and the top-level keys loom and Kineto write
 * (baseTimeNanoseconds, deviceProperties, loom_warnings, loom_dropped,
 * traceName, other string metadata; any other top-level value, such as
 * Kineto's distributedInfo, is kept as its JSON text).  Times keep their
 * nanoseconds: numbers are parsed from their text, not through doubles.
 * Nested argument values (arrays, objects), booleans and nulls are kept as
 * JSON text marked as such (loom__targ.json), so writers emit them as JSON.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <yajl/yajl_parse.h>
#include <yajl/yajl_tree.h>
#include <zlib.h>

#include "core/core.h"
#include "export/input.h"
#include "json_tape.h"
#include "trace/trace.h"

typedef struct pending_flow {
  uint64_t id;
  int64_t ts;
  uint32_t track;
  char ph;
  int bind_enclosing;
} pending_flow;

typedef struct open_b {
  uint32_t track;
  size_t ev; /* event index of the open B */
} open_b;

typedef struct async_open {
  uint64_t id;
  uint32_t cat;
  size_t ev;   /* SIZE_MAX once closed (removed at the next compaction) */
  size_t prev; /* 1 + index of the previous open range with the same key, 0: none */
} async_open;

/* The event object being parsed. */
typedef struct cur_ev {
  char ph;
  uint32_t name, cat;
  int64_t pid, tid;
  int has_pid, has_tid;
  int64_t ts, dur;
  int has_ts, has_dur;
  uint64_t id;
  int bp_e, global;
  uint64_t correlation, external_id;
  unsigned roles;       /* from "loom_role": LOOM_RECORD_F_* */
  loom__targ args[64];
  size_t nargs;
} cur_ev;

enum { AT_TOP, AT_EVENTS, AT_EVENT, AT_ARGS, AT_DEVPROPS, AT_DEVICE, AT_WARNINGS, AT_SKIP };

typedef struct reader {
  loom_trace *t;
  loom__kind_cache kinds; /* category id -> kind */
  const char *path;
  int depth;
  int where;          /* AT_* of the current container */
  int skip_depth;     /* depth at which skipping began */
  int skip_ret;       /* where to return after the skipped value */
  int top_is_array;
  int saw_events;     /* a "traceEvents" list (or a top-level list of events) */
  int not_event;      /* the top-level list holds a list: no event list */
  char key[256];      /* last map key */
  char top_key[256];  /* key of the current top-level value */
  cur_ev ev;
  /* JSON text of a nested argument value being captured */
  char *cap;
  size_t ncap, capcap;
  int cap_depth, cap_first;
  int cap_top;        /* the value captured is a top-level key's */
  int val_json;       /* the value given to on_value is JSON text */
  loom__dev dev;
  int64_t base;
  int64_t window_end_ts;
  open_b *bs;
  size_t nbs, cap_bs;
  async_open *as;
  size_t nas, cap_as, nas_dead;
  loom__map as_key;    /* async_key(id, cat) -> 1 + index of the latest open range */
  pending_flow *flows;
  size_t nflows, cap_flows;
  loom__map pid_dev;   /* pids that are devices -> 1 + device index */
  loom__map str_ids;   /* string pid/tid -> synthetic id */
  loom__map str_tids;  /* synthetic tid -> its string (id): the thread's name */
  uint64_t next_str_id;
  const loom__sink *sink; /* streaming: events go here in batches */
  const loom__flow_sink *fsink; /* streaming: flow ends (may be NULL) */
  int kcode;              /* K_* of the current key inside an event */
  uint32_t key_id;        /* interned current key inside args */
  struct { uint32_t id; uint32_t len; } kcache[256]; /* arg keys, names */
  uint32_t ext_key, corr_key;
  uint32_t role_key, dir_key; /* "loom_role", "direction": read even when streaming */
  uint32_t stack_key;         /* "stack": a CPU sample's stack, read even when streaming */
  int role_unknown;           /* a loom_role word loom does not know was read */
  size_t flush_at;        /* streaming: flush when this many events are held */
  uint64_t nstrings;      /* strings and keys parsed so far */
  int oom;
  char err[256];
} reader;

/* A time text as a count of 1/1000 of its unit (us -> ns), without going
 * through a double for plain decimals.  Returns 0, or the LOOM__BAD_* kind
 * when the text is not a time loom can keep as written; *out then holds how
 * it is kept (docs/formats.md): clamped to +-LOOM__TIME_LIMIT, 0 for NaN and
 * for text that is no number. */
static int parse_milli(const char *s, size_t n, int64_t *out) {
  int neg = 0, big = 0, fd = 0;
  size_t i = 0;
  if (i < n && (s[i] == '-' || s[i] == '+')) neg = s[i++] == '-';
  size_t first = i;
  int64_t whole = 0, frac = 0;
  for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
    if (whole > LOOM__TIME_LIMIT / 1000) big = 1;
    else whole = whole * 10 + (s[i] - '0');
  }
  if (whole > LOOM__TIME_LIMIT / 1000) big = 1; /* then whole * 1000 cannot overflow */
  size_t digits = i - first;
  if (i < n && s[i] == '.') {
    for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++, digits++)
      if (fd < 3) frac = frac * 10 + (s[i] - '0'), fd++;
  }
  *out = 0;
  if (i < n || !digits) { /* an exponent (rare), or not a plain decimal: through a double */
    char buf[64], *end;
    size_t k = n < sizeof buf - 1 ? n : sizeof buf - 1;
    memcpy(buf, s, k);
    buf[k] = 0;
    double v = strtod(buf, &end);
    if (end == buf || *end || k < n) return LOOM__BAD_NOT_NUMBER;
    if (v != v) return LOOM__BAD_NONFINITE;
    v *= 1000.0;
    if (v > (double)LOOM__TIME_LIMIT || v < -(double)LOOM__TIME_LIMIT) {
      *out = v > 0 ? LOOM__TIME_LIMIT : -LOOM__TIME_LIMIT;
      return v - v != 0 ? LOOM__BAD_NONFINITE : LOOM__BAD_TIME_RANGE; /* inf - inf is NaN */
    }
    *out = (int64_t)(v + (v >= 0 ? 0.5 : -0.5));
    return 0;
  }
  while (fd < 3) frac *= 10, fd++;
  int64_t v = big ? 0 : whole * 1000 + frac;
  if (big || v > LOOM__TIME_LIMIT) {
    *out = neg ? -LOOM__TIME_LIMIT : LOOM__TIME_LIMIT;
    return LOOM__BAD_TIME_RANGE;
  }
  *out = neg ? -v : v;
  return 0;
}

/* A decimal integer text ("-"? digits) into *out; returns 0 when it fits
 * an int64, 1 when it fits only a uint64 (*u), -1 when it is past 64
 * bits. */
static int parse_int(const char *s, size_t n, int64_t *out, uint64_t *u) {
  int neg = n && s[0] == '-';
  uint64_t v = 0;
  for (size_t i = (size_t)neg; i < n; i++) {
    unsigned d = (unsigned)(s[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return -1;
    v = v * 10 + d;
  }
  *u = v;
  if (!neg && v > (uint64_t)INT64_MAX) return 1;
  if (neg && v > (uint64_t)INT64_MAX + 1) return -1;
  *out = !neg ? (int64_t)v : v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
  return 0;
}

static int is_int_text(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (i == 0 && s[i] == '-'))) return 0;
  return n > 0;
}

static uint32_t str_n(reader *r, const unsigned char *s, size_t n) {
  uint32_t id = loom__strtab_intern(&r->t->strs, (const char *)s, n);
  if (!id && n) r->oom = 1;
  return id;
}

static uint64_t str_pid(reader *r, const unsigned char *s, size_t n, int tid) {
  uint64_t h = (loom__hash_bytes(s, n) ^ (uint64_t)tid) | 1;
  uint64_t *v = loom__map_get(&r->str_ids, h);
  if (v) return *v;
  uint64_t id = 1000000000ull + r->next_str_id++;
  loom__map_put(&r->str_ids, h, id);
  /* A string pid names its process after itself (Kineto's "Spans"), a
   * string tid its thread (named when the track is made: track_of). */
  uint32_t name = str_n(r, s, n);
  if (tid) {
    if (loom__map_put(&r->str_tids, id, name)) r->oom = 1;
    return id;
  }
  loom__proc *p = loom__trace_proc(r->t, (int64_t)id);
  if (p && !p->name) p->name = name;
  return id;
}

/* ---- bad values (docs/formats.md): counted, named, kept as they can be --- */
static void bad(reader *r, int kind, const char *what, const char *text, size_t n) {
  int in_event = r->where == AT_EVENT || r->where == AT_ARGS;
  loom__trace_bad(r->t, kind, what, text, n,
                  in_event && r->ev.name ? loom__trace_cstr(r->t, r->ev.name) : NULL);
}

static void time_value(reader *r, const char *what, const char *s, size_t n, int64_t *out) {
  int kind = parse_milli(s, n, out);
  if (kind) bad(r, kind, what, s, n);
}

/* baseTimeNanoseconds: a count of ns, kept within the limit. */
static void base_value(reader *r, const char *s, size_t n) {
  int64_t v = 0;
  uint64_t u;
  int kind = 0;
  if (is_int_text(s, n)) {
    if (parse_int(s, n, &v, &u) || v > LOOM__TIME_LIMIT || v < -LOOM__TIME_LIMIT) kind = LOOM__BAD_TIME_RANGE;
  } else { /* a fraction or an exponent */
    char buf[64];
    size_t k = n < sizeof buf - 1 ? n : sizeof buf - 1;
    memcpy(buf, s, k);
    buf[k] = 0;
    double d = strtod(buf, NULL);
    if (d != d) kind = LOOM__BAD_NONFINITE;
    else if (d - d != 0) kind = LOOM__BAD_NONFINITE, v = d > 0 ? LOOM__TIME_LIMIT : -LOOM__TIME_LIMIT;
    else if (d > (double)LOOM__TIME_LIMIT || d < -(double)LOOM__TIME_LIMIT) kind = LOOM__BAD_TIME_RANGE;
    else v = (int64_t)(d + (d >= 0 ? 0.5 : -0.5));
  }
  if (kind == LOOM__BAD_TIME_RANGE) v = s[0] == '-' ? -LOOM__TIME_LIMIT : LOOM__TIME_LIMIT;
  r->base = v;
  if (kind) bad(r, kind, "baseTimeNanoseconds", s, n);
}

/* ---- capturing nested argument values as JSON text ---------------------- */
static void cap_raw(reader *r, const char *s, size_t n) {
  if (loom__grow((void **)&r->cap, &r->capcap, r->ncap + n + 1, 1) != 0) {
    r->oom = 1;
    return;
  }
  memcpy(r->cap + r->ncap, s, n);
  r->ncap += n;
}

static void cap_sep(reader *r) {
  if (!r->cap_first) cap_raw(r, ",", 1);
  r->cap_first = 0;
}

static int capturing(const reader *r) { return r->cap_depth > 0; }

static void cap_str(reader *r, const unsigned char *s, size_t n) {
  cap_raw(r, "\"", 1);
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '"' || s[i] == '\\') cap_raw(r, "\\", 1);
    if (s[i] < 0x20) {
      char e[8];
      snprintf(e, sizeof e, "\\u%04x", s[i]);
      cap_raw(r, e, 6);
    } else {
      cap_raw(r, (const char *)s + i, 1);
    }
  }
  cap_raw(r, "\"", 1);
}

/* ---- events --------------------------------------------------------------- */
static void add_arg(reader *r, loom__targ a) {
  if (r->ev.nargs < sizeof r->ev.args / sizeof r->ev.args[0]) r->ev.args[r->ev.nargs++] = a;
}

static uint32_t track_of(reader *r, int64_t pid, int64_t tid) {
  uint32_t k;
  uint64_t *dv = loom__map_get(&r->pid_dev, (uint64_t)pid + 1);
  uint32_t dev = dv ? (uint32_t)(*dv - 1) : LOOM_DEVICE_HOST;
  if (loom__trace_track(r->t, pid, tid, NULL, dev, &k) != 0) {
    r->oom = 1;
    return 0;
  }
  uint64_t *sname = tid >= 1000000000 ? loom__map_get(&r->str_tids, (uint64_t)tid) : NULL;
  if (sname && !r->t->tracks[k].name) r->t->tracks[k].name = (uint32_t)*sname;
  if (!loom__trace_proc(r->t, pid)) r->oom = 1;
  return k;
}

static void mark_device(reader *r, int64_t pid) {
  if (loom__map_get(&r->pid_dev, (uint64_t)pid + 1)) return;
  if (loom__map_put(&r->pid_dev, (uint64_t)pid + 1, loom__device_of_pid(pid) + 1ull)) r->oom = 1;
  for (size_t i = 0; i < r->t->ntracks; i++)
    if (r->t->tracks[i].pid == pid) r->t->tracks[i].device = loom__device_of_pid(pid);
}

static int push_event(reader *r, const loom__ev *e) {
  if (loom__trace_add_ev(r->t, e) != 0) return -1;
  for (size_t i = 0; i < r->ev.nargs; i++)
    if (loom__trace_add_arg(r->t, &r->ev.args[i]) != 0) return -1;
  return 0;
}

static void metadata_event(reader *r) {
  cur_ev *c = &r->ev;
  const char *what = loom__trace_cstr(r->t, c->name);
  loom__targ *v = c->nargs ? &c->args[0] : NULL;
  if (!v) return;
  if (!strcmp(what, "process_name") || !strcmp(what, "process_labels") ||
      !strcmp(what, "process_sort_index")) {
    loom__proc *p = loom__trace_proc(r->t, c->pid);
    if (!p) return;
    if (what[8] == 'n' && v->type == LOOM_ARG_STRING) p->name = v->v.s;
    else if (what[8] == 'l' && v->type == LOOM_ARG_STRING) p->labels = v->v.s;
    else if (what[8] == 's' && v->type == LOOM_ARG_INT) p->sort = (int32_t)v->v.i;
  } else if (!strcmp(what, "thread_name") || !strcmp(what, "thread_sort_index")) {
    uint32_t k = track_of(r, c->pid, c->tid);
    if (what[7] == 'n' && v->type == LOOM_ARG_STRING) r->t->tracks[k].name = v->v.s;
    else if (v->type == LOOM_ARG_INT) r->t->tracks[k].sort = (int32_t)v->v.i;
  }
}

/* ---- async ranges: b/e matched by (id, category), the latest open first,
 * through a map to per-key chains, so that many open ranges cost linear
 * time whatever order they close in. */
static uint64_t async_key(uint64_t id, uint32_t cat) {
  return loom__hash_u64(id ^ ((uint64_t)cat << 32 | cat));
}

static void async_begin(reader *r, uint64_t id, uint32_t cat, size_t ev) {
  uint64_t key = async_key(id, cat), *head = loom__map_get(&r->as_key, key);
  async_open o = {id, cat, ev, head ? *head : 0};
  if (LOOM__PUSH(r->as, r->nas, r->cap_as, o) || loom__map_put(&r->as_key, key, r->nas)) r->oom = 1;
}

/* The latest open range of (id, cat), unlinked from its chain; NULL when
 * there is none. */
static async_open *async_end(reader *r, uint64_t id, uint32_t cat) {
  uint64_t key = async_key(id, cat), *head = loom__map_get(&r->as_key, key);
  size_t *link = NULL; /* the prev field that points at the one looked at */
  for (size_t at = head ? *head : 0; at;) {
    async_open *o = &r->as[at - 1];
    if (o->id == id && o->cat == cat) {
      if (link) *link = o->prev;
      else if (o->prev) *head = o->prev;
      else loom__map_del(&r->as_key, key);
      return o;
    }
    link = &o->prev;
    at = o->prev;
  }
  return NULL;
}

/* Drops the closed ranges and rebuilds the chains (when they are more
 * than half: amortised constant time per range). */
static void async_compact(reader *r) {
  size_t k = 0;
  loom__map_free(&r->as_key);
  for (size_t i = 0; i < r->nas; i++) {
    if (r->as[i].ev == SIZE_MAX) continue;
    async_open o = r->as[i];
    uint64_t key = async_key(o.id, o.cat), *head = loom__map_get(&r->as_key, key);
    o.prev = head ? *head : 0;
    r->as[k++] = o;
    if (loom__map_put(&r->as_key, key, k)) r->oom = 1;
  }
  r->nas = k;
  r->nas_dead = 0;
}

/* Streaming: hands the closed events to the sink; at the end (all) also
 * the ones never closed. */
static int flush(reader *r, int all) {
  size_t n = 0, **keep = NULL;
  if (all) {
    loom__trace_close_open(r->t);
  } else if (r->nbs + r->nas) {
    keep = malloc((r->nbs + r->nas) * sizeof *keep);
    if (!keep) return -1;
    for (size_t i = 0; i < r->nbs; i++) keep[n++] = &r->bs[i].ev;
    for (size_t i = 0; i < r->nas; i++)
      if (r->as[i].ev != SIZE_MAX) keep[n++] = &r->as[i].ev;
  }
  int rc = loom__trace_stream_flush(r->t, r->sink, keep, n);
  free(keep);
  /* The open events stay; the next flush waits for at least as many new
   * ones, so unclosed ranges cost linear time, not a flush per event. */
  r->flush_at = 2 * r->t->nev + LOOM__STREAM_BATCH;
  return rc;
}

/* A negative duration (an X's "dur", an E or e before its start): kept as
 * 0, counted. */
static int64_t negative_dur(reader *r, int64_t dur) {
  char text[40];
  int n = snprintf(text, sizeof text, "%lld ns", (long long)dur);
  bad(r, LOOM__BAD_NEG_DUR, "dur", text, (size_t)n);
  return 0;
}

static void end_event(reader *r) {
  cur_ev *c = &r->ev;
  if (!c->ph) return;
  if (c->ph == 'M') {
    metadata_event(r);
    return;
  }
  const char *cat = loom__trace_cstr(r->t, c->cat);
  loom_kind kind = loom__kind_of_cat_id(&r->kinds, r->t, c->cat);
  if (c->ph == 'C') kind = LOOM_KIND_COUNTER;
  if (c->ph == 'i' || c->ph == 'I') {
    if (c->global && !strcmp(loom__trace_cstr(r->t, c->name), "Record Window End")) {
      r->t->window_end = 1; /* the writers put it back, at the window's end */
      r->window_end_ts = c->ts;
      return;
    }
    if (kind == LOOM_KIND_MARKER && strcmp(cat, "marker")) kind = LOOM_KIND_INSTANT;
  }
  kind = loom__kind_of_marks(kind, c->roles, 0);
  if (loom__kind_on_device(kind) || !strcmp(cat, "gpu_user_annotation")) mark_device(r, c->pid);
  uint32_t track = track_of(r, c->pid, c->tid);
  if (c->ph == 'X' && c->has_dur && c->dur < 0) c->dur = negative_dur(r, c->dur);
  loom__ev e = {.ts = c->ts, .dur = c->has_dur ? c->dur : 0, .correlation = c->correlation,
                .external_id = c->external_id, .name = c->name, .cat = c->cat,
                .track = track, .kind = (uint8_t)kind, .ph = LOOM__PH_COMPLETE,
                .flags = (uint16_t)(c->roles << LOOM__EV_ROLE_SHIFT)};
  switch (c->ph) {
  case 'X':
    break;
  case 'B': {
    e.flags |= LOOM__EV_OPEN;
    open_b o = {track, r->t->nev};
    if (LOOM__PUSH(r->bs, r->nbs, r->cap_bs, o)) r->oom = 1;
    break;
  }
  case 'E':
    for (size_t i = r->nbs; i-- > 0;) {
      if (r->bs[i].track != track) continue;
      loom__ev *b = &r->t->ev[r->bs[i].ev];
      b->dur = c->ts - b->ts;
      if (b->dur < 0) b->dur = negative_dur(r, b->dur);
      b->flags &= (uint16_t)~LOOM__EV_OPEN;
      memmove(&r->bs[i], &r->bs[i + 1], (r->nbs - i - 1) * sizeof *r->bs);
      r->nbs--;
      /* arguments of E are merged into B's only when B had none */
      return;
    }
    return; /* E without B: dropped, as trace_processor does */
  case 'i':
  case 'I':
    e.ph = LOOM__PH_INSTANT;
    e.dur = 0;
    break;
  case 'C':
    e.ph = LOOM__PH_COUNTER;
    e.dur = 0;
    break;
  case 'b':
  case 'e': {
    if (c->ph == 'e') {
      async_open *o = async_end(r, c->id, c->cat);
      if (o) {
        loom__ev *b = &r->t->ev[o->ev];
        b->dur = c->ts - b->ts;
        if (b->dur < 0) b->dur = negative_dur(r, b->dur);
        b->flags &= (uint16_t)~LOOM__EV_OPEN;
        o->ev = SIZE_MAX;
        if (++r->nas_dead > 4096 && 2 * r->nas_dead > r->nas) async_compact(r);
      }
      return;
    }
    e.ph = LOOM__PH_ASYNC;
    e.flags |= LOOM__EV_OPEN;
    e.correlation = c->id;
    async_begin(r, c->id, c->cat, r->t->nev);
    break;
  }
  case 's':
  case 'f':
  case 't': {
    if (r->sink) { /* streaming: to the flow sink when there is one */
      if (r->fsink && r->fsink->flow(r->fsink->ctx, r->t, c->id, c->ts, track, c->ph,
                                     c->ph == 's' || c->bp_e, c->name, c->cat))
        r->oom = 1;
      return;
    }
    pending_flow f = {c->id, c->ts, track, c->ph, c->ph == 's' || c->bp_e};
    if (LOOM__PUSH(r->flows, r->nflows, r->cap_flows, f)) r->oom = 1;
    return;
  }
  default:
    return; /* unknown phases are skipped, like trace_processor does */
  }
  if (push_event(r, &e) != 0) r->oom = 1;
  if (r->sink && r->t->nev >= r->flush_at && flush(r, 0) != 0) r->oom = 1;
}

/* ---- yajl callbacks ----------------------------------------------------- */
/* Keys of an event object, recognised once per key instead of by a chain of
 * strcmp() per value. */
enum { K_OTHER, K_PH, K_NAME, K_CAT, K_PID, K_TID, K_TS, K_DUR, K_ID, K_BP, K_S, K_ARGS };

static int key_code(const unsigned char *s, size_t n) {
  switch (n) {
  case 1: return s[0] == 's' ? K_S : K_OTHER;
  case 2:
    if (s[0] == 'p' && s[1] == 'h') return K_PH;
    if (s[0] == 't' && s[1] == 's') return K_TS;
    if (s[0] == 'i' && s[1] == 'd') return K_ID;
    if (s[0] == 'b' && s[1] == 'p') return K_BP;
    return K_OTHER;
  case 3:
    if (!memcmp(s, "cat", 3)) return K_CAT;
    if (!memcmp(s, "pid", 3)) return K_PID;
    if (!memcmp(s, "tid", 3)) return K_TID;
    if (!memcmp(s, "dur", 3)) return K_DUR;
    return K_OTHER;
  case 4:
    if (!memcmp(s, "name", 4)) return K_NAME;
    if (!memcmp(s, "args", 4)) return K_ARGS;
    return K_OTHER;
  default: return K_OTHER;
  }
}

/* Interns through a small direct-mapped cache: events repeat the same keys,
 * names and categories, and a hit costs a cheap hash (length and a few
 * bytes) and one memcmp. */
static uint32_t cache_intern(reader *r, const unsigned char *s, size_t n, unsigned slot) {
  uint32_t id = r->kcache[slot].id;
  if (id && r->kcache[slot].len == n && !memcmp(loom__trace_cstr(r->t, id), s, n)) return id;
  id = str_n(r, s, n);
  r->kcache[slot].id = id;
  r->kcache[slot].len = (uint32_t)n;
  return id;
}

static unsigned quick_hash(const unsigned char *s, size_t n) {
  uint32_t h = (uint32_t)n * 2654435761u;
  if (n) h ^= s[0] * 31u ^ s[n / 2] * 131u ^ s[n - 1] * 1031u ^ s[n / 3] * 7u;
  return (h ^ (h >> 13)) * 2246822519u >> 24;
}

static uint32_t arg_key(reader *r, const unsigned char *s, size_t n) {
  return cache_intern(r, s, n, quick_hash(s, n) & 127);
}

static uint32_t cached_str(reader *r, const unsigned char *s, size_t n) {
  return cache_intern(r, s, n, 128 + (quick_hash(s, n) & 127));
}

/* Sets a metadata key, replacing an earlier value: Kineto's distributedInfo
 * and loom's own "rank"/"world_size" keys describe the same thing, and a
 * trace loom wrote carries both. */
static void set_meta(reader *r, const char *key, uint32_t value) {
  uint32_t k = loom__trace_str(r->t, key);
  for (size_t i = 0; i < r->t->nmeta; i++)
    if (r->t->meta[i].key == k) {
      r->t->meta[i].value = value;
      return;
    }
  loom__kv kv = {k, value};
  if (LOOM__PUSH(r->t->meta, r->t->nmeta, r->t->cap_meta, kv)) r->oom = 1;
}

/* distributedInfo {"backend", "rank", "world_size"} -> the schema's keys. */
static void dist_info(reader *r, int type, int64_t i, uint32_t s) {
  const char *key = !strcmp(r->key, "backend") ? "distributed_backend" : r->key;
  if (strcmp(key, "distributed_backend") && strcmp(key, "rank") && strcmp(key, "world_size")) return;
  if (type == LOOM_ARG_STRING) {
    set_meta(r, key, s);
  } else if (type == LOOM_ARG_INT) {
    char b[32];
    snprintf(b, sizeof b, "%lld", (long long)i);
    set_meta(r, key, loom__trace_str(r->t, b));
  }
}

/* Top-level keys loom writes itself (chrome_json.c): not kept as others'. */
static int loom_owned_top(const char *key) {
  static const char *const own[] = {"schemaVersion", "displayTimeUnit", "baseTimeNanoseconds",
                                    "traceEvents", "traceName", "deviceProperties",
                                    "loom_dropped", "loom_warnings"};
  for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
    if (!strcmp(key, own[i])) return 1;
  return 0;
}

/* Kineto's distributedInfo (kept whole as a top-level value) also gives
 * the rank metadata: its scalar members through dist_info. */
static void dist_info_json(reader *r, const char *text, size_t n) {
  char *z = malloc(n + 1);
  if (!z) { r->oom = 1; return; }
  memcpy(z, text, n);
  z[n] = 0;
  yajl_val v = yajl_tree_parse(z, NULL, 0);
  free(z);
  if (!YAJL_IS_OBJECT(v)) { yajl_tree_free(v); return; }
  char saved[sizeof r->key];
  memcpy(saved, r->key, sizeof saved);
  for (size_t i = 0; i < v->u.object.len; i++) {
    yajl_val x = v->u.object.values[i];
    snprintf(r->key, sizeof r->key, "%s", v->u.object.keys[i]);
    if (YAJL_IS_STRING(x)) dist_info(r, LOOM_ARG_STRING, 0, loom__trace_str(r->t, YAJL_GET_STRING(x)));
    else if (YAJL_IS_INTEGER(x)) dist_info(r, LOOM_ARG_INT, YAJL_GET_INTEGER(x), 0);
  }
  memcpy(r->key, saved, sizeof saved);
  yajl_tree_free(v);
}

static int on_value(reader *r, loom_arg_type type, int64_t i, double d, uint32_t s,
                    const char *num, size_t nlen) {
  cur_ev *c = &r->ev;
  if (r->where == AT_EVENT) {
    switch (r->kcode) {
    case K_PH: if (type == LOOM_ARG_STRING) c->ph = loom__trace_cstr(r->t, s)[0]; break;
    case K_NAME: c->name = s; break;
    case K_CAT: c->cat = s; break;
    case K_PID: c->pid = i, c->has_pid = 1; break;
    case K_TID: c->tid = i, c->has_tid = 1; break;
    case K_TS: if (num) time_value(r, "ts", num, nlen, &c->ts), c->has_ts = 1; break;
    case K_DUR: if (num) time_value(r, "dur", num, nlen, &c->dur), c->has_dur = 1; break;
    case K_ID: c->id = type == LOOM_ARG_STRING ? strtoull(loom__trace_cstr(r->t, s), NULL, 0) : (uint64_t)i; break;
    case K_BP: c->bp_e = type == LOOM_ARG_STRING && !strcmp(loom__trace_cstr(r->t, s), "e"); break;
    case K_S: c->global = type == LOOM_ARG_STRING && !strcmp(loom__trace_cstr(r->t, s), "g"); break;
    default: break;
    }
    return 1;
  }
  if (r->where == AT_ARGS || r->where == AT_DEVICE) {
    loom__targ a = {.key = r->where == AT_ARGS ? r->key_id : loom__trace_str(r->t, r->key),
                    .type = (uint8_t)type, .json = (uint8_t)r->val_json};
    if (type == LOOM_ARG_INT) a.v.i = i;
    else if (type == LOOM_ARG_UINT) a.v.u = (uint64_t)i;
    else if (type == LOOM_ARG_DOUBLE) a.v.d = d;
    else a.v.s = s;
    if (r->where == AT_DEVICE) {
      const char *k = a.json ? "" : r->key;
      if (!strcmp(k, "id") && type == LOOM_ARG_INT) r->dev.pid = i;
      else if (!strcmp(k, "name") && type == LOOM_ARG_STRING) r->dev.name = s;
      else if (!strcmp(k, "vendor") && type == LOOM_ARG_STRING) r->dev.vendor = s;
      else if (!strcmp(k, "type") && type == LOOM_ARG_STRING) r->dev.type = s;
      else if (!strcmp(k, "deviceType") && type == LOOM_ARG_STRING) r->dev.device_type = s;
      else if (!strcmp(k, "backend") && type == LOOM_ARG_STRING) r->dev.backend = s;
      else if (LOOM__PUSH(r->t->args, r->t->nargs, r->t->cap_args, a)) r->oom = 1;
      else r->dev.nargs++;
      return 1;
    }
    if (a.key == r->ext_key && type == LOOM_ARG_INT) c->external_id = (uint64_t)i;
    else if (a.key == r->corr_key && type == LOOM_ARG_INT) c->correlation = (uint64_t)i;
    else if (a.key == r->role_key && type == LOOM_ARG_STRING && !a.json)
      c->roles |= loom__role_parse(loom__trace_cstr(r->t, s), loom__strtab_len(&r->t->strs, s),
                                   &r->role_unknown);
    else add_arg(r, a);
    return 1;
  }
  if (r->where == AT_WARNINGS && type == LOOM_ARG_STRING) {
    if (LOOM__PUSH(r->t->warnings, r->t->nwarnings, r->t->cap_warnings, s)) r->oom = 1;
    return 1;
  }
  if (r->where == AT_TOP) {
    if (!strcmp(r->key, "baseTimeNanoseconds") && num) {
      base_value(r, num, nlen);
    } else if (!strcmp(r->key, "loom_dropped") && type == LOOM_ARG_INT) {
      r->t->dropped = (uint64_t)i;
    } else if (!strcmp(r->key, "traceName") && type == LOOM_ARG_STRING) {
      r->t->trace_name = s;
    } else if (type == LOOM_ARG_STRING && !r->val_json) {
      set_meta(r, r->key, s);
    } else if (!loom_owned_top(r->key)) { /* numbers, booleans, null: as written */
      uint32_t v = r->val_json ? s : str_n(r, (const unsigned char *)num, nlen);
      if (loom__trace_add_top(r->t, loom__trace_str(r->t, r->key), v)) r->oom = 1;
    }
  }
  return 1;
}

/* A literal (true, false, null) outside a captured value: an argument or a
 * top-level value keeps it as JSON text; elsewhere a boolean counts as 0/1. */
static int json_literal(reader *r, const char *lit, int64_t as_int) {
  if (capturing(r)) { cap_sep(r); cap_raw(r, lit, strlen(lit)); return 1; }
  if (r->where == AT_ARGS || r->where == AT_DEVICE || r->where == AT_TOP) {
    if (r->sink && r->where == AT_ARGS && r->ev.ph && r->ev.ph != 'M') /* streaming: as before */
      return as_int < 0 ? 1 : on_value(r, LOOM_ARG_INT, as_int, 0, 0, NULL, 0);
    r->val_json = 1;
    int rc = on_value(r, LOOM_ARG_STRING, 0, 0, str_n(r, (const unsigned char *)lit, strlen(lit)),
                      NULL, 0);
    r->val_json = 0;
    return rc;
  }
  return as_int < 0 ? 1 : on_value(r, LOOM_ARG_INT, as_int, 0, 0, NULL, 0);
}

static int cb_null(void *ctx) { return json_literal(ctx, "null", -1); }

static int cb_bool(void *ctx, int b) { return json_literal(ctx, b ? "true" : "false", b); }

/* The name of what a number is the value of, for a bad value's example. */
static const char *value_key(const reader *r) {
  static const char *const fields[] = {"event field", "ph", "name", "cat", "pid", "tid", "ts", "dur",
                                       "id", "bp", "s", "args"};
  if (r->where == AT_EVENT) return fields[r->kcode];
  if (r->where == AT_ARGS) return loom__trace_cstr(r->t, r->key_id);
  return r->key;
}

/* A number that does not fit what loom keeps (an integer past 64 bits,
 * infinity): counted and kept as its text. */
static int number_as_text(reader *r, int kind, const char *s, size_t n) {
  bad(r, kind, value_key(r), s, n);
  if (r->where == AT_EVENT) { /* pid/tid: a named process or thread, like a string one */
    const unsigned char *u = (const unsigned char *)s;
    if (r->kcode == K_PID || r->kcode == K_TID) return on_value(r, LOOM_ARG_INT, (int64_t)str_pid(r, u, n, r->kcode == K_TID), 0, 0, NULL, 0);
    if (r->kcode == K_ID) return on_value(r, LOOM_ARG_INT, (int64_t)(loom__hash_bytes(u, n) | 1), 0, 0, NULL, 0);
    return 1;
  }
  if (r->sink && r->where == AT_ARGS && r->ev.ph && r->ev.ph != 'M') return 1; /* as string args */
  return on_value(r, LOOM_ARG_STRING, 0, 0, str_n(r, (const unsigned char *)s, n), NULL, 0);
}

static int cb_number(void *ctx, const char *s, size_t n) {
  reader *r = ctx;
  if (capturing(r)) { cap_sep(r); cap_raw(r, s, n); return 1; }
  if (r->where == AT_EVENT && (r->kcode == K_TS || r->kcode == K_DUR)) /* parsed from the text */
    return on_value(r, LOOM_ARG_INT, 0, 0, 0, s, n);
  if (is_int_text(s, n)) {
    int64_t v = 0;
    uint64_t u = 0;
    int fits = parse_int(s, n, &v, &u);
    if (fits < 0) return number_as_text(r, LOOM__BAD_INT64, s, n);
    if (fits > 0) return on_value(r, LOOM_ARG_UINT, (int64_t)u, 0, 0, s, n);
    return on_value(r, LOOM_ARG_INT, v, 0, 0, s, n);
  }
  char buf[64];
  size_t k = n < sizeof buf - 1 ? n : sizeof buf - 1;
  memcpy(buf, s, k);
  buf[k] = 0;
  double d = strtod(buf, NULL);
  if (d != d || d - d != 0) return number_as_text(r, LOOM__BAD_NONFINITE, s, n);
  return on_value(r, LOOM_ARG_DOUBLE, 0, d, 0, s, n);
}

static int cb_string(void *ctx, const unsigned char *s, size_t n) {
  reader *r = ctx;
  r->nstrings++;
  if (capturing(r)) { cap_sep(r); cap_str(r, s, n); return 1; }
  if (r->where == AT_EVENT && (r->kcode == K_PID || r->kcode == K_TID)) {
    int64_t id = 0;
    uint64_t u;
    if (!is_int_text((const char *)s, n) || parse_int((const char *)s, n, &id, &u))
      id = (int64_t)str_pid(r, s, n, r->kcode == K_TID); /* a name, or digits past int64: a named process */
    return on_value(r, LOOM_ARG_INT, id, 0, 0, NULL, 0);
  }
  if (r->where == AT_EVENT && (r->kcode == K_TS || r->kcode == K_DUR))
    return on_value(r, LOOM_ARG_INT, 0, 0, 0, (const char *)s, n);
  /* Streaming keeps memory flat: string arguments of events are not
   * interned (they can be unique per event); metadata's are, and so are the
   * report's reserved ones, whose values are a handful of words. */
  if (r->where == AT_ARGS && (r->key_id == r->role_key || r->key_id == r->dir_key))
    return on_value(r, LOOM_ARG_STRING, 0, 0, cached_str(r, s, n), NULL, 0);
  /* a sample's stack: the CPU analysis needs it, and stacks repeat */
  if (r->where == AT_ARGS && r->key_id == r->stack_key)
    return on_value(r, LOOM_ARG_STRING, 0, 0, str_n(r, s, n), NULL, 0);
  if (r->sink && r->where == AT_ARGS && r->ev.ph && r->ev.ph != 'M') return 1;
  if (r->where == AT_EVENT && (r->kcode == K_NAME || r->kcode == K_CAT || r->kcode == K_PH))
    return on_value(r, LOOM_ARG_STRING, 0, 0, cached_str(r, s, n), NULL, 0);
  return on_value(r, LOOM_ARG_STRING, 0, 0, str_n(r, s, n), NULL, 0);
}

static int cb_map_key(void *ctx, const unsigned char *s, size_t n) {
  reader *r = ctx;
  r->nstrings++;
  if (capturing(r)) { cap_sep(r); cap_str(r, s, n); cap_raw(r, ":", 1); r->cap_first = 1; return 1; }
  if (r->where == AT_EVENT) { /* the hot paths: no copy */
    r->kcode = key_code(s, n);
    return 1;
  }
  if (r->where == AT_ARGS) {
    r->key_id = arg_key(r, s, n);
    return !r->oom;
  }
  size_t k = n < sizeof r->key - 1 ? n : sizeof r->key - 1;
  memcpy(r->key, s, k);
  r->key[k] = 0;
  if (r->depth == 1 && !r->top_is_array) snprintf(r->top_key, sizeof r->top_key, "%s", r->key);
  return 1;
}

static void start_capture(reader *r, int is_map, int top) {
  r->ncap = 0;
  r->cap_first = 1;
  cap_raw(r, is_map ? "{" : "[", 1);
  r->cap_depth = 1;
  r->cap_top = top;
}

/* The end of a captured value: an argument (JSON text) or a top-level key. */
static void end_capture(reader *r) {
  uint32_t s = str_n(r, (const unsigned char *)r->cap, r->ncap);
  if (r->cap_top) {
    if (loom__trace_add_top(r->t, loom__trace_str(r->t, r->top_key), s)) r->oom = 1;
    if (!strcmp(r->top_key, "distributedInfo")) dist_info_json(r, r->cap, r->ncap);
    r->cap_top = 0;
    return;
  }
  r->val_json = 1;
  on_value(r, LOOM_ARG_STRING, 0, 0, s, NULL, 0);
  r->val_json = 0;
}

static void begin_container(reader *r, int is_map) {
  r->depth++;
  if (capturing(r)) {
    cap_sep(r);
    cap_raw(r, is_map ? "{" : "[", 1);
    r->cap_first = 1;
    r->cap_depth++;
    return;
  }
  if (r->where == AT_SKIP) return;
  if (r->depth == 1) {
    r->top_is_array = !is_map;
    r->saw_events = !is_map;
    r->where = is_map ? AT_TOP : AT_EVENTS;
  } else if (r->depth == 2 && r->top_is_array && !is_map) {
    r->not_event = 1; /* [[...], ...]: a list of lists is no event list */
    r->skip_ret = r->where, r->where = AT_SKIP, r->skip_depth = r->depth;
  } else if (r->where == AT_TOP && r->depth == 2) {
    if (!strcmp(r->top_key, "traceEvents") && !is_map) r->where = AT_EVENTS, r->saw_events = 1;
    else if (!strcmp(r->top_key, "deviceProperties") && !is_map) r->where = AT_DEVPROPS;
    else if (!strcmp(r->top_key, "loom_warnings") && !is_map) r->where = AT_WARNINGS;
    else if (loom_owned_top(r->top_key))
      r->skip_ret = r->where, r->where = AT_SKIP, r->skip_depth = r->depth;
    else start_capture(r, is_map, 1); /* kept as JSON text (distributedInfo too) */
  } else if (r->where == AT_EVENTS && is_map) {
    memset(&r->ev, 0, sizeof r->ev);
    r->where = AT_EVENT;
  } else if (r->where == AT_EVENT && is_map && r->kcode == K_ARGS) {
    r->where = AT_ARGS;
  } else if (r->where == AT_DEVPROPS && is_map) {
    memset(&r->dev, 0, sizeof r->dev);
    r->dev.args_off = (uint32_t)r->t->nargs;
    r->where = AT_DEVICE;
  } else if (r->where == AT_ARGS && r->sink) {
    /* Streaming keeps memory flat: nested values would be interned. */
    r->skip_ret = r->where;
    r->where = AT_SKIP;
    r->skip_depth = r->depth;
  } else if (r->where == AT_ARGS || r->where == AT_DEVICE) {
    start_capture(r, is_map, 0);
  } else {
    r->skip_ret = r->where;
    r->where = AT_SKIP;
    r->skip_depth = r->depth;
  }
}

static void end_container(reader *r, int is_map) {
  r->depth--;
  if (capturing(r)) {
    cap_raw(r, is_map ? "}" : "]", 1);
    r->cap_first = 0;
    if (--r->cap_depth == 0) {
      int saved = r->where;
      end_capture(r);
      r->where = saved;
    }
    return;
  }
  switch (r->where) {
  case AT_SKIP:
    if (r->depth < r->skip_depth) r->where = r->skip_ret;
    break;
  case AT_ARGS: r->where = AT_EVENT; break;
  case AT_EVENT:
    end_event(r);
    r->where = AT_EVENTS;
    break;
  case AT_DEVICE:
    if (LOOM__PUSH(r->t->devs, r->t->ndevs, r->t->cap_devs, r->dev)) r->oom = 1;
    mark_device(r, r->dev.pid);
    r->where = AT_DEVPROPS;
    break;
  case AT_EVENTS:
  case AT_DEVPROPS:
  case AT_WARNINGS:
    r->where = AT_TOP;
    break;
  default:
    break;
  }
}

static int cb_start_map(void *ctx) { begin_container(ctx, 1); return !((reader *)ctx)->oom; }
static int cb_end_map(void *ctx) { end_container(ctx, 1); return !((reader *)ctx)->oom; }
static int cb_start_array(void *ctx) { begin_container(ctx, 0); return !((reader *)ctx)->oom; }
static int cb_end_array(void *ctx) { end_container(ctx, 0); return !((reader *)ctx)->oom; }

/* JSON that is valid but holds no trace (a PyTorch execution trace, a
 * memory-timeline list, any other tool's file) is an error, not an empty
 * trace: an object needs a "traceEvents" list, a top-level list objects. */
static loom_status not_a_trace(const reader *r, const char *path) {
  if (r->not_event)
    return loom__fail(LOOM_EFORMAT, "%s: not a trace: the top-level list holds lists, not event "
                      "objects (a memory timeline?)", path);
  if (!r->saw_events)
    return loom__fail(LOOM_EFORMAT, "%s: not a trace: the JSON object has no \"traceEvents\" list "
                      "(an execution trace or another tool's file?)", path);
  return LOOM_OK;
}

static const yajl_callbacks callbacks = {
    cb_null, cb_bool, NULL, NULL, cb_number, cb_string,
    cb_start_map, cb_map_key, cb_end_map, cb_start_array, cb_end_array};

/* ---- after parsing ------------------------------------------------------ */
static int cmp_ev_track(const void *pa, const void *pb) {
  const loom__ev *a = pa, *b = pb;
  if (a->track != b->track) return a->track < b->track ? -1 : 1;
  if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
  if (a->dur != b->dur) return a->dur > b->dur ? -1 : 1;
  return a->args_off < b->args_off ? -1 : a->args_off > b->args_off;
}

/* The slice a flow end binds to: the innermost slice on its track that
 * encloses ts, or (bind_enclosing == 0) the first slice starting at or
 * after ts. */
static long bind_flow(const loom_trace *t, const pending_flow *f) {
  size_t lo = 0, hi = t->nev;
  while (lo < hi) { /* first event of the track with ts > f->ts */
    size_t mid = (lo + hi) / 2;
    const loom__ev *e = &t->ev[mid];
    if (e->track < f->track || (e->track == f->track && e->ts <= f->ts)) lo = mid + 1;
    else hi = mid;
  }
  if (!f->bind_enclosing)
    return lo < t->nev && t->ev[lo].track == f->track && t->ev[lo].ph == LOOM__PH_COMPLETE ? (long)lo : -1;
  for (size_t i = lo; i-- > 0;) {
    const loom__ev *e = &t->ev[i];
    if (e->track != f->track) break;
    if (e->ph == LOOM__PH_COMPLETE && e->ts <= f->ts && f->ts <= e->ts + e->dur) return (long)i;
    if (f->ts - e->ts > (int64_t)3600e9) break; /* no slice lasts that long */
  }
  return -1;
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
    if (flush(r, 1) != 0) return -1;
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
    in->chunk = strings != in->strings_seen ? CHUNK : in->chunk < (1u << 30) ? 2 * in->chunk : in->chunk;
    in->strings_seen = strings;
    size_t left = in->map_len - (size_t)in->offset;
    n = (long)(left < in->chunk ? left : in->chunk);
    *data = in->map + in->offset;
    loom__input_drop(in->map, &in->dropped, in->offset);
  } else {
    size_t want = strings != in->strings_seen ? in->gzcap : in->gzcap < (1u << 30) ? 2 * in->gzcap : in->gzcap;
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
  return loom__fail(LOOM_EFORMAT, "%s: truncated JSON: the file ends at byte offset %llu inside %s", path,
                    (unsigned long long)in->offset, r->depth > 1 ? "the event list" : "the top-level object");
}

/* Parses the whole input into r in this thread.  The yajl error (or 0). */
static loom_status parse_here(reader *r, jinput *in, const char *path) {
  yajl_handle y = yajl_alloc(&callbacks, NULL, r);
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
  if (st == LOOM_OK && n == 0 && yajl_complete_parse(y) != yajl_status_ok) st = truncated(r, in, path);
  yajl_free(y);
  return st;
}

/* The same on two threads; -1 when no thread could be had (then nothing
 * was parsed). */
static int parse_threaded(reader *r, jinput *in, const char *path, loom_status *st) {
  loom__jsrc src = {input_next, in};
  loom__jtape_result res;
  if (loom__jtape_run(&src, &callbacks, r, &res) != 0) return -1;
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
  if (st == LOOM_OK) st = not_a_trace(r, path);
  if (st == LOOM_OK && r->role_unknown && loom__role_warning(r->t, path))
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
  r->ext_key = loom__trace_str(r->t, "External id");
  r->corr_key = loom__trace_str(r->t, "correlation");
  r->role_key = loom__trace_str(r->t, "loom_role");
  r->dir_key = loom__trace_str(r->t, "direction");
  r->stack_key = loom__trace_str(r->t, "stack");
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
  yajl_handle y = yajl_alloc(&callbacks, NULL, &r);
  int rc = y ? 0 : -1;
  if (y && (yajl_parse(y, (const unsigned char *)text, n) != yajl_status_ok ||
            yajl_complete_parse(y) != yajl_status_ok || r.depth != 0)) {
    if (!r.oom) loom__fail(LOOM_EFORMAT, "%s: its trace header (loom_header) is not JSON", path);
    rc = -1;
  }
  if (r.oom) rc = -1;
  if (y) yajl_free(y);
  reader_free(&r);
  return rc;
}
