/*
 * read_json_events.c - the JSON reader's strings and string ids, bad values,
 * nested values captured as JSON text, and events (one parsed event object
 * into the model: B/E and b/e matched, flows bound, streaming batches).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export/read_json.h"

uint32_t loom__rj_str_n(reader *r, const unsigned char *s, size_t n) {
  uint32_t id = loom__strtab_intern(&r->t->strs, (const char *)s, n);
  if (!id && n) r->oom = 1;
  return id;
}

uint64_t loom__rj_str_pid(reader *r, const unsigned char *s, size_t n, int tid) {
  uint64_t h = (loom__hash_bytes(s, n) ^ (uint64_t)tid) | 1;
  uint64_t *v = loom__map_get(&r->str_ids, h);
  if (v) return *v;
  uint64_t id = 1000000000ull + r->next_str_id++;
  loom__map_put(&r->str_ids, h, id);
  /* A string pid names its process after itself (Kineto's "Spans"), a
   * string tid its thread (named when the track is made: track_of). */
  uint32_t name = loom__rj_str_n(r, s, n);
  if (tid) {
    if (loom__map_put(&r->str_tids, id, name)) r->oom = 1;
    return id;
  }
  loom__proc *p = loom__trace_proc(r->t, (int64_t)id);
  if (p && !p->name) p->name = name;
  return id;
}

/* ---- bad values (docs/formats.md): counted, named, kept as they can be --- */
void loom__rj_bad(reader *r, int kind, const char *what, const char *text, size_t n) {
  int in_event = r->where == AT_EVENT || r->where == AT_ARGS;
  loom__trace_bad(r->t, kind, what, text, n,
                  in_event && r->ev.name ? loom__trace_cstr(r->t, r->ev.name) : NULL);
}

/* ---- capturing nested argument values as JSON text ---------------------- */
void loom__rj_cap_raw(reader *r, const char *s, size_t n) {
  if (loom__grow((void **)&r->cap, &r->capcap, r->ncap + n + 1, 1) != 0) {
    r->oom = 1;
    return;
  }
  memcpy(r->cap + r->ncap, s, n);
  r->ncap += n;
}

void loom__rj_cap_sep(reader *r) {
  if (!r->cap_first) loom__rj_cap_raw(r, ",", 1);
  r->cap_first = 0;
}


void loom__rj_cap_str(reader *r, const unsigned char *s, size_t n) {
  loom__rj_cap_raw(r, "\"", 1);
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '"' || s[i] == '\\') loom__rj_cap_raw(r, "\\", 1);
    if (s[i] < 0x20) {
      char e[8];
      snprintf(e, sizeof e, "\\u%04x", s[i]);
      loom__rj_cap_raw(r, e, 6);
    } else {
      loom__rj_cap_raw(r, (const char *)s + i, 1);
    }
  }
  loom__rj_cap_raw(r, "\"", 1);
}

/* ---- events --------------------------------------------------------------- */
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

void loom__rj_mark_device(reader *r, int64_t pid) {
  if (loom__map_get(&r->pid_dev, (uint64_t)pid + 1)) return;
  if (loom__map_put(&r->pid_dev, (uint64_t)pid + 1, loom__device_of_pid(pid) + 1ull)) r->oom = 1;
  for (size_t i = 0; i < r->t->ntracks; i++)
    if (r->t->tracks[i].pid == pid) r->t->tracks[i].device = loom__device_of_pid(pid);
}

static int push_event(reader *r, const loom__ev *e) {
  if (loom__trace_add_ev(r->t, e) != 0) return -1;
  for (size_t i = 0; i < r->ev.nargs; i++)
    if (loom__trace_add_arg(r->t, &r->ev_args[i]) != 0) return -1;
  return 0;
}

static void metadata_event(reader *r) {
  cur_ev *c = &r->ev;
  const char *what = loom__trace_cstr(r->t, c->name);
  loom__targ *v = c->nargs ? &r->ev_args[0] : NULL;
  if (!v) return;
  if (!strcmp(what, "process_name") || !strcmp(what, "process_labels") ||
      !strcmp(what, "process_sort_index")) {
    loom__proc *p = loom__trace_proc(r->t, c->pid);
    if (!p) { /* out of memory */
      r->oom = 1;
      return;
    }
    if (what[8] == 'n' && v->type == LOOM_ARG_STRING) p->name = v->v.s;
    else if (what[8] == 'l' && v->type == LOOM_ARG_STRING) p->labels = v->v.s;
    else if (what[8] == 's' && v->type == LOOM_ARG_INT) p->sort = (int32_t)v->v.i;
  } else if (!strcmp(what, "thread_name") || !strcmp(what, "thread_sort_index")) {
    uint32_t k = track_of(r, c->pid, c->tid);
    if (r->oom) return; /* no track k */
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
int loom__rj_flush(reader *r, int all) {
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
  loom__rj_bad(r, LOOM__BAD_NEG_DUR, "dur", text, (size_t)n);
  return 0;
}

/* An event that cannot be read: left out, counted as a bad value (the
 * first of each kind named in the warning). */
static void skip(reader *r, int kind) {
  char text[80];
  int n = r->ev.ph ? snprintf(text, sizeof text, "%c on pid %lld tid %lld", r->ev.ph,
                              (long long)r->ev.pid, (long long)r->ev.tid)
                   : snprintf(text, sizeof text, "(none)");
  loom__rj_bad(r, kind, "ph", text, (size_t)n);
}

/* An E's arguments join its B's, as Chrome's viewer and trace_processor
 * show them: the B's move to the end of the arguments with the E's after
 * them, an E's value replacing a B's of the same name.  b is closed (never
 * moved by a streaming flush again). */
static void end_args(reader *r, loom__ev *b) {
  loom_trace *t = r->t;
  size_t off = t->nargs, nb = b->nargs, bev = (size_t)(b - t->ev);
  for (size_t i = 0; i < nb; i++) {
    loom__targ a = t->args[b->args_off + i]; /* by value: the push may move the array */
    for (size_t k = 0; k < r->ev.nargs; k++)
      if (r->ev_args[k].key == a.key) a = r->ev_args[k], r->ev_args[k].key = 0;
    if (LOOM__PUSH_BIG(t->args, t->nargs, t->cap_args, a)) { r->oom = 1; return; }
  }
  for (size_t k = 0; k < r->ev.nargs; k++)
    if (r->ev_args[k].key && LOOM__PUSH_BIG(t->args, t->nargs, t->cap_args, r->ev_args[k])) {
      r->oom = 1;
      return;
    }
  size_t n = t->nargs - off;
  if (n > UINT16_MAX) {
    loom__trace_arg_past_limit(t, t->args[off + UINT16_MAX].key, t->ev[bev].name);
    n = UINT16_MAX;
  }
  t->ev[bev].args_off = (uint32_t)off;
  t->ev[bev].nargs = (uint16_t)n;
}

/* An E: the innermost B open on its track ends. */
static void end_b(reader *r, uint32_t track) {
  cur_ev *c = &r->ev;
  for (size_t i = r->nbs; i-- > 0;) {
    if (r->bs[i].track != track) continue;
    loom__ev *b = &r->t->ev[r->bs[i].ev];
    b->dur = c->ts - b->ts;
    if (b->dur < 0) b->dur = negative_dur(r, b->dur);
    b->flags &= (uint16_t)~LOOM__EV_OPEN;
    memmove(&r->bs[i], &r->bs[i + 1], (r->nbs - i - 1) * sizeof *r->bs);
    r->nbs--;
    if (r->ev.nargs) end_args(r, b);
    return;
  }
  skip(r, LOOM__BAD_END); /* as trace_processor leaves it out */
}

/* An e: the async range open with its id and category ends. */
static void end_async(reader *r) {
  cur_ev *c = &r->ev;
  async_open *o = async_end(r, c->id, c->cat);
  if (!o) {
    skip(r, LOOM__BAD_END);
    return;
  }
  loom__ev *b = &r->t->ev[o->ev];
  b->dur = c->ts - b->ts;
  if (b->dur < 0) b->dur = negative_dur(r, b->dur);
  b->flags &= (uint16_t)~LOOM__EV_OPEN;
  o->ev = SIZE_MAX;
  if (++r->nas_dead > 4096 && 2 * r->nas_dead > r->nas) async_compact(r);
}

/* An s, f or t: to the flow sink when streaming (when there is one), else
 * kept until the end of the read links them. */
static void flow_end(reader *r, uint32_t track) {
  cur_ev *c = &r->ev;
  if (r->sink) {
    if (r->fsink && r->fsink->flow(r->fsink->ctx, r->t, c->id, c->ts, track, c->ph,
                                   c->ph == 's' || c->bp_e, c->name, c->cat))
      r->oom = 1;
    return;
  }
  pending_flow f = {c->id, c->ts, track, c->ph, c->ph == 's' || c->bp_e};
  if (LOOM__PUSH(r->flows, r->nflows, r->cap_flows, f)) r->oom = 1;
}

/* The event's kind: the one "loom_kind" names, else from its category,
 * phase and marks; -1 when the event is the global "Record Window End"
 * instant (it becomes the window's end). */
static int event_kind(reader *r) {
  cur_ev *c = &r->ev;
  const char *cat = loom__trace_cstr(r->t, c->cat);
  int instant = c->ph == 'i' || c->ph == 'I';
  if (instant && c->global && !strcmp(loom__trace_cstr(r->t, c->name), "Record Window End")) {
    r->t->window_end = 1; /* the writers put it back, at the window's end */
    r->window_end_ts = c->ts;
    return -1;
  }
  int ph = instant ? LOOM__PH_INSTANT : c->ph == 'C' ? LOOM__PH_COUNTER : LOOM__PH_COMPLETE;
  loom_kind kind = c->kind ? (loom_kind)(c->kind - 1)
                           : loom__kind_derive(loom__cat_class_of_id(&r->kinds, r->t, c->cat),
                                               ph, c->roles);
  if (loom__kind_on_device(kind) || !strcmp(cat, "gpu_user_annotation"))
    loom__rj_mark_device(r, c->pid);
  return (int)kind;
}

/* What the phase makes of e: 1 when e is then added, 0 when the phase
 * ended another event, was a flow end or is not read. */
static int by_phase(reader *r, loom__ev *e) {
  cur_ev *c = &r->ev;
  switch (c->ph) {
  case 'X': return 1;
  case 'B': {
    e->flags |= LOOM__EV_OPEN;
    open_b o = {e->track, r->t->nev};
    if (LOOM__PUSH(r->bs, r->nbs, r->cap_bs, o)) r->oom = 1;
    return 1;
  }
  case 'E': end_b(r, e->track); return 0;
  case 'i':
  case 'I': e->ph = LOOM__PH_INSTANT, e->dur = 0; return 1;
  case 'C': e->ph = LOOM__PH_COUNTER, e->dur = 0; return 1;
  case 'e': end_async(r); return 0;
  case 'b':
    e->ph = LOOM__PH_ASYNC;
    e->flags |= LOOM__EV_OPEN;
    e->correlation = c->id;
    async_begin(r, c->id, c->cat, r->t->nev);
    return 1;
  case 's':
  case 'f':
  case 't': flow_end(r, e->track); return 0;
  default: skip(r, LOOM__BAD_PHASE); return 0; /* as trace_processor leaves them out */
  }
}

void loom__rj_end_event(reader *r) {
  cur_ev *c = &r->ev;
  if (!c->ph) {
    skip(r, LOOM__BAD_PHASE);
    return;
  }
  if (c->ph == 'M') {
    metadata_event(r);
    return;
  }
  /* loom's counters derived from [memory] events name no thread; every
   * event of a track does, so a data counter of that category stays data */
  if (c->ph == 'C' && c->cat == r->mem.counter_cat && !c->has_tid) return;
  int kind = event_kind(r);
  if (kind < 0) return;
  uint32_t track = track_of(r, c->pid, c->tid);
  if (c->ph == 'X' && c->has_dur && c->dur < 0) c->dur = negative_dur(r, c->dur);
  loom__ev e = {.ts = c->ts, .dur = c->has_dur ? c->dur : 0, .correlation = c->correlation,
                .external_id = c->external_id, .name = c->name, .cat = c->cat,
                .track = track, .kind = (uint8_t)kind, .ph = LOOM__PH_COMPLETE,
                .flags = (uint16_t)(c->roles << LOOM__EV_ROLE_SHIFT)};
  if (!by_phase(r, &e)) return;
  if (e.ph == LOOM__PH_INSTANT && c->name == r->mem.name &&
      loom__memread_event(&r->mem, &e, &r->ev_args, &r->ev.nargs, &r->cap_ev_args))
    r->oom = 1;
  if (push_event(r, &e) != 0) r->oom = 1;
  if (r->sink && r->t->nev >= r->flush_at && loom__rj_flush(r, 0) != 0) r->oom = 1;
}
