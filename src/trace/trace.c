/*
 * trace.c - building, summarising and releasing the trace model.
 */
#include "trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "util/util.h"

loom_trace *loom__trace_new(void) {
  loom_trace *t = calloc(1, sizeof *t);
  if (t) loom__strtab_init(&t->strs);
  return t;
}

void loom_trace_free(loom_trace *t) {
  if (!t) return;
  loom__strtab_free(&t->strs);
  loom__array_free(t->ev, t->cap_ev, sizeof *t->ev);
  loom__array_free(t->args, t->cap_args, sizeof *t->args);
  free(t->flows);
  free(t->procs);
  free(t->tracks);
  free(t->devs);
  free(t->meta);
  free(t->warnings);
  free(t->top);
  free(t);
}

void loom__trace_span(loom_trace *t) {
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (size_t i = 0; i < t->nev; i++) {
    if (t->ev[i].ts < lo) lo = t->ev[i].ts;
    if (t->ev[i].ts + t->ev[i].dur > hi) hi = t->ev[i].ts + t->ev[i].dur;
  }
  t->start_ns = t->nev ? lo : 0;
  t->end_ns = t->nev ? hi : 0;
}

loom__proc *loom__trace_proc(loom_trace *t, int64_t pid) {
  for (size_t i = 0; i < t->nprocs; i++)
    if (t->procs[i].pid == pid) return &t->procs[i];
  loom__proc p = {pid, 0, 0, (int32_t)t->nprocs};
  if (LOOM__PUSH(t->procs, t->nprocs, t->cap_procs, p) != 0) return NULL;
  return &t->procs[t->nprocs - 1];
}

int loom__trace_add_proc(loom_trace *t, int64_t pid, const char *name,
                         const char *labels, int32_t sort) {
  for (size_t i = 0; i < t->nprocs; i++)
    if (t->procs[i].pid == pid) return 0;
  loom__proc p = {pid, loom__trace_str(t, name), loom__trace_str(t, labels),
                  sort};
  return LOOM__PUSH(t->procs, t->nprocs, t->cap_procs, p);
}

long loom__trace_find_track(loom_trace *t, int64_t pid, int64_t tid) {
  /* Records come in runs on one track: try the last hit first. */
  if (t->last_track < t->ntracks && t->tracks[t->last_track].pid == pid &&
      t->tracks[t->last_track].tid == tid)
    return t->last_track;
  for (size_t i = t->ntracks; i-- > 0;) {
    if (t->tracks[i].pid == pid && t->tracks[i].tid == tid) {
      t->last_track = (uint32_t)i;
      return (long)i;
    }
  }
  return -1;
}

int loom__trace_track(loom_trace *t, int64_t pid, int64_t tid,
                      const char *name, uint32_t device, uint32_t *out) {
  long i = loom__trace_find_track(t, pid, tid);
  if (i >= 0) {
    if (name && !t->tracks[i].name) t->tracks[i].name = loom__trace_str(t, name);
    *out = (uint32_t)i;
    return 0;
  }
  loom__track k = {pid, tid, loom__trace_str(t, name), device,
                   (int32_t)t->ntracks};
  if (LOOM__PUSH(t->tracks, t->ntracks, t->cap_tracks, k) != 0) return -1;
  *out = (uint32_t)(t->ntracks - 1);
  return 0;
}

/* In place, cycle by cycle (a bit per event says it is done): a second
 * array of events would be fresh memory, a page fault per page, the
 * largest allocation of a session's stop. */
int loom__trace_permute(loom_trace *t, const uint32_t *order) {
  size_t n = t->nev;
  uint64_t *done = calloc(n / 64 + 1, sizeof *done);
  uint32_t *inv = t->nflows ? malloc((n + 1) * sizeof *inv) : NULL;
  if (!done || (t->nflows && !inv)) {
    free(done);
    free(inv);
    return -1;
  }
  for (size_t i = 0; inv && i < n; i++) inv[order[i]] = (uint32_t)i;
  for (size_t i = 0; i < n; i++) {
    if (order[i] == i || (done[i / 64] >> (i % 64) & 1)) continue;
    loom__ev first = t->ev[i];
    for (size_t j = i;;) { /* new event j is old event order[j] */
      size_t k = order[j];
      done[j / 64] |= 1ull << (j % 64);
      if (k == i) {
        t->ev[j] = first;
        break;
      }
      t->ev[j] = t->ev[k];
      j = k;
    }
  }
  for (size_t i = 0; i < t->nflows; i++)
    t->flows[i].from = inv[t->flows[i].from], t->flows[i].to = inv[t->flows[i].to];
  free(inv);
  free(done);
  return 0;
}

int loom__trace_add_ev(loom_trace *t, const loom__ev *ev) {
  loom__ev e = *ev;
  e.args_off = (uint32_t)t->nargs;
  e.nargs = 0;
  return LOOM__PUSH_BIG(t->ev, t->nev, t->cap_ev, e);
}

void loom__trace_arg_past_limit(loom_trace *t, uint32_t key, uint32_t name) {
  const char *k = loom__trace_cstr(t, key);
  loom__trace_bad(t, LOOM__BAD_MANY_ARGS, "argument", k, strlen(k),
                  name ? loom__trace_cstr(t, name) : NULL);
}

int loom__trace_add_arg(loom_trace *t, const loom__targ *a) {
  if (!t->nev) return -1;
  if (t->ev[t->nev - 1].nargs == UINT16_MAX) {
    loom__trace_arg_past_limit(t, a->key, t->ev[t->nev - 1].name);
    return 0;
  }
  if (LOOM__PUSH_BIG(t->args, t->nargs, t->cap_args, *a) != 0) return -1;
  t->ev[t->nev - 1].nargs++;
  return 0;
}

int loom__trace_add_arg_to(loom_trace *t, size_t ev, const loom__targ *a) {
  if (ev + 1 == t->nev) return loom__trace_add_arg(t, a);
  loom__ev *e = &t->ev[ev];
  if (e->nargs == UINT16_MAX) {
    loom__trace_arg_past_limit(t, a->key, e->name);
    return 0;
  }
  size_t off = t->nargs, n = e->nargs;
  for (size_t i = 0; i < n; i++) {
    loom__targ x = t->args[t->ev[ev].args_off + i]; /* by value: the push may move the array */
    if (LOOM__PUSH_BIG(t->args, t->nargs, t->cap_args, x) != 0) return -1;
  }
  if (LOOM__PUSH_BIG(t->args, t->nargs, t->cap_args, *a) != 0) return -1;
  t->ev[ev].args_off = (uint32_t)off;
  t->ev[ev].nargs = (uint16_t)(n + 1);
  return 0;
}

int loom__trace_add_arg_int(loom_trace *t, const char *key, int64_t v) {
  loom__targ a = {.key = loom__trace_str(t, key), .type = LOOM_ARG_INT};
  a.v.i = v;
  return loom__trace_add_arg(t, &a);
}

int loom__trace_add_arg_str(loom_trace *t, const char *key, const char *v) {
  loom__targ a = {.key = loom__trace_str(t, key), .type = LOOM_ARG_STRING};
  a.v.s = loom__trace_str(t, v);
  return loom__trace_add_arg(t, &a);
}

/* A key is written once: a later value replaces an earlier one (a session
 * option, a backend and the program may all name the rank). */
int loom__trace_add_top(loom_trace *t, uint32_t key, uint32_t json) {
  for (size_t i = 0; i < t->ntop; i++)
    if (t->top[i].key == key) {
      t->top[i].value = json;
      return 0;
    }
  loom__kv kv = {key, json};
  return LOOM__PUSH(t->top, t->ntop, t->cap_top, kv);
}

const char *loom__trace_top(const loom_trace *t, const char *key) {
  for (size_t i = 0; i < t->ntop; i++)
    if (!strcmp(loom__trace_cstr(t, t->top[i].key), key))
      return loom__trace_cstr(t, t->top[i].value);
  return NULL;
}

int loom__trace_add_meta(loom_trace *t, const char *key, const char *value) {
  loom__kv kv = {loom__trace_str(t, key), loom__trace_str(t, value)};
  for (size_t i = 0; i < t->nmeta; i++)
    if (t->meta[i].key == kv.key) {
      t->meta[i].value = kv.value;
      return 0;
    }
  return LOOM__PUSH(t->meta, t->nmeta, t->cap_meta, kv);
}

int loom__trace_add_warning(loom_trace *t, const char *msg) {
  uint32_t id = loom__trace_str(t, msg);
  return LOOM__PUSH(t->warnings, t->nwarnings, t->cap_warnings, id);
}

static const char *const bad_names[LOOM__BAD_COUNT_][2] = {
    {"integers past 64 bits", "kept as their decimal text (a string)"},
    {"infinite or NaN numbers",
     "times kept at the nearest limit (NaN: 0), arguments as their text"},
    {"negative durations", "kept with duration 0"},
    {"times that overflow 64-bit nanoseconds", "clamped to +-3e18 ns"},
    {"times that are not numbers", "kept as 0"},
    {"arguments past 65535 on one event", "left out"},
    {"events of a phase loom does not read", "left out, as trace_processor leaves them"},
    {"ends that close nothing (E with no B open on its thread, e with no b of its id)",
     "left out, as trace_processor leaves them"},
    {"debug annotation values of no type loom reads (or nested deeper than 64)", "kept as null"},
    {"stack frames missing or in a loop (a sample's sf or a parent stackFrames lacks, a parent "
     "chain "
     "that comes back)",
     "the stack ends there (a sample whose own frame is missing: [unknown])"}};

const char *loom__bad_name(int kind) {
  return kind >= 0 && kind < LOOM__BAD_COUNT_ ? bad_names[kind][0] : "";
}
const char *loom__bad_kept(int kind) {
  return kind >= 0 && kind < LOOM__BAD_COUNT_ ? bad_names[kind][1] : "";
}

void loom__trace_bad(loom_trace *t, int kind, const char *what, const char *text, size_t n,
                     const char *event) {
  if (kind < 0 || kind >= LOOM__BAD_COUNT_) return;
  if (t->bad.count[kind]++) return;
  char ex[256];
  int k = n > 64 ? 64 : (int)n;
  snprintf(ex, sizeof ex, "%s = %.*s%s%s%.64s%s", what, k, text, n > 64 ? "..." : "",
           event && *event ? " (event \"" : "", event ? event : "", event && *event ? "\")" : "");
  t->bad.example[kind] = loom__trace_str(t, ex);
}

int loom__trace_bad_warnings(loom_trace *t, const char *path) {
  for (int k = 0; k < LOOM__BAD_COUNT_; k++) {
    if (!t->bad.count[k]) continue;
    char msg[512];
    snprintf(msg, sizeof msg, "%s: %llu %s (first: %s): %s", path,
             (unsigned long long)t->bad.count[k], loom__bad_name(k),
             loom__trace_cstr(t, t->bad.example[k]), loom__bad_kept(k));
    if (loom__trace_add_warning(t, msg)) return -1;
  }
  return 0;
}

loom_status loom_trace_summarize(const loom_trace *t, loom_trace_summary *sum) {
  if (!t || !sum || sum->struct_size < sizeof(size_t))
    return loom__fail(LOOM_EINVAL, "loom_trace_summarize: NULL trace or summary");
  loom_trace_summary s;
  memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  s.events = t->nev;
  s.flows = t->nflows;
  s.devices = t->ndevs;
  s.dropped = t->dropped;
  s.warnings = t->nwarnings;
  s.start_ns = t->start_ns;
  s.end_ns = t->end_ns;
  size_t n = sum->struct_size < sizeof s ? sum->struct_size : sizeof s;
  memcpy(sum, &s, n);
  sum->struct_size = n;
  return LOOM_OK;
}

loom_kind loom__kind_of_category(const char *cat) {
  static const struct { const char *cat; loom_kind kind; } exact[] = {
      {"kernel", LOOM_KIND_KERNEL}, {"gpu_memcpy", LOOM_KIND_MEMCPY},
      {"gpu_memset", LOOM_KIND_MEMSET}, {"user_annotation", LOOM_KIND_USER_RANGE},
      {"gpu_user_annotation", LOOM_KIND_USER_RANGE}, {"cpu_op", LOOM_KIND_CPU_OP},
      {"python_function", LOOM_KIND_CPU_OP}, {"cpu_instant_event", LOOM_KIND_INSTANT},
      {"counter", LOOM_KIND_COUNTER}, {"collective_comm", LOOM_KIND_COLLECTIVE},
      {"overhead", LOOM_KIND_OVERHEAD}, {"Trace", LOOM_KIND_MARKER},
      {"cpu_sample", LOOM_KIND_SAMPLE}, {"memory", LOOM_KIND_MEMORY}};
  if (!cat) return LOOM_KIND_MARKER;
  for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
    if (!strcmp(cat, exact[i].cat)) return exact[i].kind;
  size_t n = strlen(cat);
  if (n > 8 && !strcmp(cat + n - 8, "_runtime")) return LOOM_KIND_RUNTIME;
  if (n > 7 && !strcmp(cat + n - 7, "_driver")) return LOOM_KIND_DRIVER;
  if (n > 5 && !strcmp(cat + n - 5, "_sync")) return LOOM_KIND_SYNC;
  return LOOM_KIND_MARKER;
}

unsigned loom__cat_class(const char *cat) {
  unsigned cls = (unsigned)loom__kind_of_category(cat);
  return cat && !strcmp(cat, "marker") ? cls | LOOM__CAT_MARKER : cls;
}

loom_kind loom__kind_derive(unsigned cls, int ph, unsigned roles) {
  loom_kind kind = (loom_kind)(cls & LOOM__CAT_KIND);
  if (ph == LOOM__PH_COUNTER) return LOOM_KIND_COUNTER;
  if (roles & (LOOM_RECORD_F_ALLOC | LOOM_RECORD_F_FREE))
    return LOOM_KIND_MEMORY; /* the marks only memory events carry */
  int instant = ph == LOOM__PH_INSTANT;
  if (instant && kind == LOOM_KIND_MARKER && !(cls & LOOM__CAT_MARKER)) return LOOM_KIND_INSTANT;
  return loom__kind_of_marks(kind, roles, instant);
}

unsigned loom__cat_class_slow(loom__cat_bytes *c, const loom_trace *t, uint32_t cat) {
  unsigned cls = loom__cat_class(loom__trace_cstr(t, cat));
  if (cat >= c->n) { /* the ids met so far, with room for those interned later */
    size_t n = (size_t)cat + 1 > 2 * c->n ? (size_t)cat + 1 : 2 * c->n;
    if (n < t->strs.n) n = t->strs.n;
    uint8_t *b = realloc(c->b, n);
    if (!b) return cls;
    memset(b + c->n, 0, n - c->n);
    c->b = b;
    c->n = n;
  }
  c->b[cat] = (uint8_t)(cls | 0x80u);
  return cls;
}

int loom__kind_parse(const char *s, size_t n) {
  for (int k = 0; k < LOOM_KIND_COUNT_; k++) {
    const char *name = loom_kind_name((loom_kind)k);
    if (strlen(name) == n && !memcmp(name, s, n)) return k;
  }
  return -1;
}

int loom__kind_warning(loom_trace *t, const char *path) {
  char msg[512];
  snprintf(msg, sizeof msg, "%s: \"loom_kind\" values this loom does not know (a newer "
           "loom's?): those events have the kind their category gives and keep the value "
           "as an argument", path);
  return loom__trace_add_warning(t, msg);
}

loom_kind loom__kind_of_marks(loom_kind kind, unsigned roles, int instant) {
  if (kind != LOOM_KIND_MARKER || !(roles & LOOM__ROLE_ALL)) return kind;
  if (instant) return LOOM_KIND_INSTANT;
  return roles & LOOM__ROLE_PATTERNS ? LOOM_KIND_COLLECTIVE : LOOM_KIND_RUNTIME;
}

/* Bit i of the marks is role_words[i]. */
static const char *const role_words[LOOM__ROLE_BITS] = {
    "launch", "memory", "comm", "send", "recv", "post", "wait", "barrier", "nxn", "one_to_all",
    "all_to_one", "alloc", "free"};

size_t loom__role_format(unsigned roles, char *buf) {
  size_t n = 0;
  for (unsigned i = 0; i < LOOM__ROLE_BITS; i++) {
    if (!(roles & (1u << i))) continue;
    if (n) buf[n++] = ',';
    size_t k = strlen(role_words[i]);
    memcpy(buf + n, role_words[i], k);
    n += k;
  }
  buf[n] = 0;
  return n;
}

unsigned loom__role_parse(const char *s, size_t n, int *unknown) {
  unsigned roles = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && s[j] != ',') j++;
    unsigned bit = 0;
    for (unsigned w = 0; w < LOOM__ROLE_BITS; w++)
      if (j - i == strlen(role_words[w]) && !memcmp(s + i, role_words[w], j - i)) bit = 1u << w;
    if (!bit) *unknown = 1;
    roles |= bit;
    i = j + 1;
  }
  return roles;
}

int loom__role_warning(loom_trace *t, const char *path) {
  char msg[512];
  snprintf(msg, sizeof msg, "%s: \"loom_role\" values with words this loom does not know "
           "(a newer loom's?): those words were ignored", path);
  return loom__trace_add_warning(t, msg);
}

size_t loom_trace_event_count(const loom_trace *t) { return t ? t->nev : 0; }

loom_status loom_trace_event(const loom_trace *t, size_t i, loom_event_view *out) {
  if (!t || !out || i >= t->nev || out->struct_size < sizeof *out)
    return loom__fail(LOOM_EINVAL, "loom_trace_event: bad trace, index or view");
  const loom__ev *e = &t->ev[i];
  const loom__track *k = &t->tracks[e->track];
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  out->name = loom__trace_cstr(t, e->name);
  out->category = loom__trace_cstr(t, e->cat);
  out->kind = (loom_kind)e->kind;
  out->phase = (char)e->ph;
  out->start_ns = e->ts;
  out->dur_ns = e->dur;
  out->pid = k->pid;
  out->tid = k->tid;
  out->correlation = e->correlation;
  out->external_id = e->external_id;
  out->device = k->device;
  out->unclosed = (e->flags & LOOM__EV_UNCLOSED) != 0;
  out->projected = (e->flags & LOOM__EV_PROJECTED) != 0;
  out->roles = LOOM__EV_ROLE_OF(e);
  return LOOM_OK;
}

size_t loom_trace_flow_count(const loom_trace *t) { return t ? t->nflows : 0; }

loom_status loom_trace_flow(const loom_trace *t, size_t i, size_t *from, size_t *to) {
  if (!t || i >= t->nflows || !from || !to)
    return loom__fail(LOOM_EINVAL, "loom_trace_flow: bad trace or index");
  *from = t->flows[i].from;
  *to = t->flows[i].to;
  return LOOM_OK;
}

size_t loom_trace_warning_count(const loom_trace *t) { return t ? t->nwarnings : 0; }

const char *loom_trace_warning(const loom_trace *t, size_t i) {
  return t && i < t->nwarnings ? loom__trace_cstr(t, t->warnings[i]) : NULL;
}

static int cmp_keep(const void *pa, const void *pb) {
  size_t a = **(size_t *const *)pa, b = **(size_t *const *)pb;
  return a < b ? -1 : a > b;
}

void loom__trace_close_open(loom_trace *t) {
  for (size_t i = 0; i < t->nev; i++)
    if (t->ev[i].flags & LOOM__EV_OPEN)
      t->ev[i].flags = (uint16_t)((t->ev[i].flags & ~LOOM__EV_OPEN) | LOOM__EV_UNCLOSED);
}

int loom__ev_open_in_file(const loom_trace *t, const loom__ev *e, const loom__targ *args) {
  if (e->ph != LOOM__PH_COMPLETE || !(e->flags & LOOM__EV_UNCLOSED) || e->dur) return 0;
  for (uint32_t i = 0; i < e->nargs; i++)
    if (!strcmp(loom__trace_cstr(t, args[i].key), "unclosed")) return 0;
  return 1;
}

int loom__trace_stream_flush(loom_trace *t, const loom__sink *sink, size_t **keep, size_t nkeep) {
  if (nkeep > 1) qsort(keep, nkeep, sizeof *keep, cmp_keep);
  size_t nev = 0, nargs = 0, k = 0;
  for (size_t i = 0; i < t->nev; i++) {
    loom__ev *e = &t->ev[i];
    if (!(e->flags & LOOM__EV_OPEN)) {
      /* no arguments: no pointer into an args array that may be NULL */
      if (sink->event(sink->ctx, t, e, e->nargs ? &t->args[e->args_off] : NULL) != 0) return -1;
      continue;
    }
    /* Kept: move it and its arguments down (never overlapping forward). */
    if (e->nargs) memmove(&t->args[nargs], &t->args[e->args_off], e->nargs * sizeof *t->args);
    e->args_off = (uint32_t)nargs;
    nargs += e->nargs;
    t->ev[nev] = *e;
    while (k < nkeep && *keep[k] < i) k++; /* not flagged: a reader's bug */
    while (k < nkeep && *keep[k] == i) *keep[k++] = nev;
    nev++;
  }
  t->nev = nev;
  t->nargs = nargs;
  return 0;
}

size_t loom_trace_device_count(const loom_trace *t) { return t ? t->ndevs : 0; }

static const char *dev_str(const loom_trace *t, uint32_t id) {
  const char *s = id ? loom__trace_cstr(t, id) : NULL;
  return s ? s : "";
}

loom_status loom_trace_device(const loom_trace *t, size_t i, loom_device_view *out) {
  if (!t || !out || i >= t->ndevs || out->struct_size < sizeof *out)
    return loom__fail(LOOM_EINVAL, "loom_trace_device: bad trace, index or view");
  const loom__dev *d = &t->devs[i];
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  out->name = dev_str(t, d->name);
  out->vendor = dev_str(t, d->vendor);
  out->type = dev_str(t, d->type);
  out->device_type = dev_str(t, d->device_type);
  out->backend = dev_str(t, d->backend);
  out->pid = d->pid;
  return LOOM_OK;
}
