/*
 * json_samples.c - CPU samples in Chrome trace JSON: the top-level
 * "stackFrames" (one entry per call site: name, category = module,
 * parent) and "samples" (pid, tid, ts in us like the events, sf = the
 * leaf's site, weight 1), as chrome://tracing reads them.  loom adds each
 * frame's own fields ("loom_function", "loom_module", "loom_offset") so its
 * reader gets back exactly the stacks it wrote; a file from another tool,
 * without them, gives frames named by "name" alone.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_tree.h>

#include "export/export.h"
#include "export/outfile.h"
#include "trace/samples.h"

static void jstr_c(loom__out *o, const char *s) { loom__json_str(o, s, strlen(s)); }

static void out_u64(loom__out *o, uint64_t v) {
  char *d = loom__out_reserve(o, 24);
  o->len += loom__fmt_u64(d, v);
}

static void write_frames(const loom__samples *s, loom__out *o) {
  loom__out_lit(o, "\"stackFrames\":{");
  char label[600];
  for (size_t i = 0; i < s->nsites; i++) {
    const loom__ssite *site = &s->sites[i];
    const loom__sframe *f = &s->frames[site->frame];
    if (i) loom__out_lit(o, ",");
    loom__out_lit(o, "\n\"");
    out_u64(o, i + 1);
    loom__out_lit(o, "\":{\"name\":");
    jstr_c(o, loom__samples_frame_label(s, site->frame, label, sizeof label));
    const char *mod = loom__strtab_get(&s->strs, f->module);
    const char *slash = strrchr(mod, '/');
    loom__out_lit(o, ",\"category\":");
    jstr_c(o, f->module ? (slash ? slash + 1 : mod) : "[unknown]");
    if (site->parent) {
      loom__out_lit(o, ",\"parent\":\"");
      out_u64(o, site->parent);
      loom__out_lit(o, "\"");
    }
    loom__out_lit(o, ",\"loom_function\":");
    jstr_c(o, loom__strtab_get(&s->strs, f->name));
    loom__out_lit(o, ",\"loom_module\":");
    jstr_c(o, mod);
    char hex[24]; /* a string: offsets past 2^53 (kernel addresses) stay exact */
    snprintf(hex, sizeof hex, "0x%llx", (unsigned long long)f->offset);
    loom__out_lit(o, ",\"loom_offset\":");
    jstr_c(o, hex);
    loom__out_lit(o, "}");
  }
  loom__out_lit(o, "},\n\"samples\":[");
}

static void write_sample(loom__out *o, int first, int64_t pid, int64_t tid, int64_t ts,
                         uint32_t site) {
  if (!first) loom__out_lit(o, ",");
  loom__out_lit(o, "\n{\"pid\":");
  char *d = loom__out_reserve(o, 24);
  o->len += loom__fmt_i64(d, pid);
  loom__out_lit(o, ",\"tid\":");
  d = loom__out_reserve(o, 24);
  o->len += loom__fmt_i64(d, tid);
  loom__out_lit(o, ",\"ts\":");
  d = loom__out_reserve(o, 32);
  o->len += loom__fmt_us(d, ts);
  loom__out_lit(o, ",\"name\":\"cpu-clock\",\"weight\":1");
  if (site) {
    loom__out_lit(o, ",\"sf\":\"");
    out_u64(o, site);
    loom__out_lit(o, "\"");
  }
  loom__out_lit(o, "}");
}

int loom__json_samples_write(const loom_trace *t, loom__out *o, int64_t base) {
  loom__samples s;
  loom__samples_init(&s);
  if (loom__samples_build(t, &s)) {
    loom__samples_free(&s);
    return -1;
  }
  if (!s.nsamples) {
    loom__samples_free(&s);
    return 0;
  }
  write_frames(&s, o);
  for (size_t i = 0; i < s.nsamples; i++) {
    const loom__ev *e = &t->ev[s.samples[i].ev];
    const loom__track *tr = &t->tracks[e->track];
    write_sample(o, i == 0, tr->pid, tr->tid, e->ts - base, s.samples[i].site);
  }
  loom__out_lit(o, "],\n");
  loom__samples_free(&s);
  return 0;
}

/* ---- the same while streaming (loom merge): samples gathered as they pass,
 * their stacks parsed once per distinct text, written at the end. */
typedef struct jsmp {
  int64_t ts, pid, tid;
  uint32_t site;
} jsmp;

struct loom__jsamples {
  loom__samples s;
  loom__map site_of_text; /* the stack's trace string id -> site */
  jsmp *v;
  size_t n, cap;
};

loom__jsamples *loom__jsamples_new(void) {
  loom__jsamples *c = calloc(1, sizeof *c);
  if (c) loom__samples_init(&c->s);
  return c;
}

void loom__jsamples_free(loom__jsamples *c) {
  if (!c) return;
  loom__samples_free(&c->s);
  loom__map_free(&c->site_of_text);
  free(c->v);
  free(c);
}

int loom__jsamples_add(loom__jsamples *c, const loom_trace *t, const loom__ev *e,
                       const loom__targ *args) {
  uint32_t sid = 0, site = 0;
  for (uint16_t k = 0; k < e->nargs; k++)
    if (args[k].type == LOOM_ARG_STRING && !strcmp(loom__trace_cstr(t, args[k].key), "stack"))
      sid = args[k].v.s;
  if (sid) {
    uint64_t *known = loom__map_get(&c->site_of_text, sid);
    if (known) site = (uint32_t)*known;
    else {
      long leaf =
          loom__samples_parse(&c->s, loom__trace_cstr(t, sid), loom__strtab_len(&t->strs, sid));
      if (leaf < 0 || loom__map_put(&c->site_of_text, sid, (uint64_t)leaf)) return -1;
      site = (uint32_t)leaf;
    }
  }
  const loom__track *tr = &t->tracks[e->track];
  jsmp one = {e->ts, tr->pid, tr->tid, site};
  return LOOM__PUSH(c->v, c->n, c->cap, one) ? -1 : 0;
}

void loom__jsamples_write(const loom__jsamples *c, loom__out *o, int64_t base) {
  if (!c || !c->n) return;
  write_frames(&c->s, o);
  for (size_t i = 0; i < c->n; i++)
    write_sample(o, i == 0, c->v[i].pid, c->v[i].tid, c->v[i].ts - base, c->v[i].site);
  loom__out_lit(o, "],\n");
}

static const char *str_of(yajl_val v, const char *key) {
  const char *path[] = {key, NULL};
  yajl_val x = yajl_tree_get(v, path, yajl_t_string);
  return x ? YAJL_GET_STRING(x) : NULL;
}

static int num_of(yajl_val v, const char *key, double *out) {
  const char *path[] = {key, NULL};
  yajl_val x = yajl_tree_get(v, path, yajl_t_any);
  if (x && YAJL_IS_NUMBER(x)) {
    *out = YAJL_GET_DOUBLE(x);
    return 0;
  }
  const char *sv = x && YAJL_IS_STRING(x) ? YAJL_GET_STRING(x) : NULL;
  if (sv) {
    char *end;
    *out = strtod(sv, &end);
    return end == sv ? -1 : 0;
  }
  return -1;
}

/* stackFrames, looked up by key: every key's id (in s->strs) -> its index
 * + 1 (the first of a repeated key, as yajl_tree_get finds it); site: the
 * key's site once made (index + 1), or VISITING while its parents are. */
typedef struct frame_index {
  yajl_val frames;
  loom__map at, site;
  size_t dangling, loops; /* parents (or sample frames) not in stackFrames; chains that loop */
  char dangling_key[72],
      loop_key[72]; /* the first of each (a sample's key may be a local buffer) */
} frame_index;
#define VISITING UINT64_MAX

static int index_frames(loom__samples *s, frame_index *fx) {
  if (!fx->frames) return 0;
  for (size_t i = 0; i < YAJL_GET_OBJECT(fx->frames)->len; i++) {
    const char *k = YAJL_GET_OBJECT(fx->frames)->keys[i];
    uint32_t kid = loom__strtab_intern(&s->strs, k, strlen(k));
    int added = 0;
    uint64_t *slot = kid ? loom__map_slot(&fx->at, kid, &added) : NULL;
    if (!slot) return -1;
    if (added) *slot = i + 1;
  }
  return 0;
}

/* The key's entry, NULL when stackFrames has none. */
static yajl_val frame_of(loom__samples *s, const frame_index *fx, const char *key, uint32_t *kid) {
  *kid = fx->frames ? loom__strtab_find(&s->strs, key, strlen(key)) : 0;
  uint64_t *i = *kid ? loom__map_get(&fx->at, *kid) : NULL;
  yajl_val f = i ? YAJL_GET_OBJECT(fx->frames)->values[*i - 1] : NULL;
  return f && YAJL_IS_OBJECT(f) ? f : NULL;
}

/* An entry's parent key (a string, or a number as its text in buf). */
static const char *parent_key(yajl_val f, char *buf, size_t cap) {
  const char *pk = str_of(f, "parent");
  double pn;
  if (!pk && num_of(f, "parent", &pn) == 0 && pn >= 0 && pn < 1e15) {
    snprintf(buf, cap, "%.0f", pn);
    pk = buf;
  }
  return pk;
}

/* The site of one entry under parent (0 when out of memory). */
static uint32_t make_site(loom__samples *s, yajl_val f, uint32_t parent) {
  const char *fn = str_of(f, "loom_function"), *mod = str_of(f, "loom_module");
  uint64_t off = 0;
  const char *offs = str_of(f, "loom_offset");
  if (!fn) { /* another tool's frame: its name is all there is */
    fn = str_of(f, "name");
    mod = str_of(f, "category");
  } else if (offs) {
    off = strtoull(offs, NULL, 16);
  }
  long fr = loom__samples_frame(s, fn, mod, off);
  return fr < 0 ? 0 : loom__samples_site(s, parent, (uint32_t)fr);
}

static void dangling(frame_index *fx, const char *key) {
  if (!fx->dangling++) snprintf(fx->dangling_key, sizeof fx->dangling_key, "%s", key);
}

/* The site of stackFrames entry key (index + 1), made with its parents
 * first, however deep (a walk up, then the sites made down); 0 when there
 * is no such entry.  A parent that is missing or that loops back ends the
 * stack there, counted.  *oom set when memory ran out. */
static uint32_t site_of(loom__samples *s, frame_index *fx, const char *key, int *oom) {
  uint32_t kid, *chain = NULL;
  size_t n = 0, cap = 0;
  uint32_t parent = 0;
  yajl_val f = key ? frame_of(s, fx, key, &kid) : NULL;
  if (key && !f) dangling(fx, key);
  while (f) {
    int added = 0;
    uint64_t *st = loom__map_slot(&fx->site, kid, &added);
    if (!st || LOOM__PUSH(chain, n, cap, kid)) {
      *oom = 1;
      break;
    }
    if (!added) { /* made before, or a loop back into this walk */
      n--;
      if (*st == VISITING && !fx->loops++)
        snprintf(fx->loop_key, sizeof fx->loop_key, "%s", loom__strtab_get(&s->strs, kid));
      if (*st != VISITING) parent = (uint32_t)*st;
      break;
    }
    *st = VISITING;
    char buf[32];
    const char *pk = parent_key(f, buf, sizeof buf);
    if (!pk) break;
    uint32_t pid;
    if (!(f = frame_of(s, fx, pk, &pid))) dangling(fx, loom__strtab_get(&s->strs, kid));
    kid = pid;
  }
  while (n) { /* from the outermost entry of the walk down to key's */
    uint32_t id = chain[--n];
    uint64_t *i = loom__map_get(&fx->at, id);
    uint32_t site = *oom ? 0 : make_site(s, YAJL_GET_OBJECT(fx->frames)->values[*i - 1], parent);
    if (!site) *oom = 1;
    if (loom__map_put(&fx->site, id, site ? site : VISITING)) *oom = 1;
    parent = site;
  }
  free(chain);
  return parent;
}

static void drop_top(loom_trace *t, const char *key) {
  for (size_t i = 0; i < t->ntop; i++)
    if (!strcmp(loom__trace_cstr(t, t->top[i].key), key)) {
      memmove(&t->top[i], &t->top[i + 1], (t->ntop - i - 1) * sizeof *t->top);
      t->ntop--;
      return;
    }
}

/* The frames stackFrames lacks or that loop, counted as bad values. */
static void frames_bad(loom_trace *t, const frame_index *fx) {
  size_t n[2] = {fx->dangling, fx->loops};
  const char *what[2] = {"missing frame", "frame in a loop"},
             *key[2] = {fx->dangling_key, fx->loop_key};
  for (int i = 0; i < 2; i++) {
    if (!n[i]) continue;
    loom__trace_bad(t, LOOM__BAD_FRAME, what[i], key[i], strlen(key[i]), NULL);
    t->bad.count[LOOM__BAD_FRAME] += n[i] - 1;
  }
}

/* A sample's time in us (clamped, counted, as an event's would be), pid and
 * tid; 0, or -1 when it has none that can be read. */
static int sample_place(loom_trace *t, yajl_val smp, double *ts, double *pid, double *tid) {
  const double lim = (double)LOOM__TIME_LIMIT / 1000.0; /* us, where events are clamped too */
  *pid = *tid = *ts = 0;
  if (!YAJL_IS_OBJECT(smp) || num_of(smp, "ts", ts) || *ts != *ts) return -1;
  if (*ts > lim || *ts < -lim) { /* as an event's time: clamped there, counted */
    char text[40];
    int k = snprintf(text, sizeof text, "%.17g us", *ts);
    loom__trace_bad(t, LOOM__BAD_TIME_RANGE, "ts", text, (size_t)k, "cpu-clock sample");
    *ts = *ts > 0 ? lim : -lim;
  }
  num_of(smp, "pid", pid);
  num_of(smp, "tid", tid);
  return *pid > -1e15 && *pid < 1e15 && *tid > -1e15 && *tid < 1e15 ? 0 : -1;
}

/* The name of a sample's event: its leaf frame's label ("[unknown]" when
 * its stack is empty); stack is the site's text, n bytes. */
static const char *sample_name(loom__samples *s, uint32_t site, const char *stack, long n,
                               char *label, size_t cap) {
  const char *tab = memchr(stack, '\t', (size_t)n);
  const char *name = tab && tab > stack ? NULL : "[unknown]";
  if (site && !name) {
    snprintf(label, cap, "%.*s", (int)(tab - stack), stack);
    name = label;
  } else if (site) {
    name = loom__samples_frame_label(s, s->sites[site - 1].frame, label, cap);
  }
  return name;
}

/* One sample as an instant with its stack; 0, 1 (left out: counted in
 * *bad) or -1 (out of memory). */
static int add_sample(loom_trace *t, loom__samples *s, frame_index *fx, yajl_val smp, char **buf,
                      size_t *cap) {
  double pid, tid, ts, sn;
  int oom = 0;
  if (sample_place(t, smp, &ts, &pid, &tid)) return 1;
  const char *sf = str_of(smp, "sf");
  char sbuf[32];
  if (!sf && num_of(smp, "sf", &sn) == 0 && sn >= 0 && sn < 1e15) {
    snprintf(sbuf, sizeof sbuf, "%.0f", sn);
    sf = sbuf;
  }
  uint32_t site = site_of(s, fx, sf, &oom);
  long n = loom__samples_text(s, site, buf, cap);
  uint32_t track;
  if (oom || n < 0 ||
      loom__trace_track(t, (int64_t)pid, (int64_t)tid, NULL, LOOM_DEVICE_HOST, &track))
    return -1;
  char label[600];
  const char *name = sample_name(s, site, *buf, n, label, sizeof label);
  int64_t ns = (int64_t)(ts * 1000.0 + (ts < 0 ? -0.5 : 0.5));
  loom__ev e = {.ts = ns, .name = loom__trace_str(t, name), .cat = loom__trace_str(t, "cpu_sample"),
                .track = track, .kind = LOOM_KIND_SAMPLE, .ph = LOOM__PH_INSTANT};
  return loom__trace_add_ev(t, &e) || loom__trace_add_arg_str(t, "stack", *buf) ? -1 : 0;
}

static int add_samples(loom_trace *t, loom__samples *s, yajl_val frames, yajl_val list) {
  frame_index fx = {.frames = frames};
  char *buf = NULL;
  size_t cap = 0;
  int rc = index_frames(s, &fx);
  loom__trace_str(t, "cpu_sample"); /* interned first, as the category of every sample */
  size_t bad = 0;
  for (size_t i = 0; rc == 0 && i < YAJL_GET_ARRAY(list)->len; i++) {
    int k = add_sample(t, s, &fx, YAJL_GET_ARRAY(list)->values[i], &buf, &cap);
    if (k < 0) rc = -1;
    else bad += (size_t)k;
  }
  free(buf);
  loom__map_free(&fx.at);
  loom__map_free(&fx.site);
  if (rc == 0) frames_bad(t, &fx);
  if (rc == 0 && bad) { /* never left out silently */
    char msg[200];
    snprintf(msg, sizeof msg, "%zu CPU samples left out: not an object, no time, or a pid or "
             "tid out of range", bad);
    rc = loom__trace_add_warning(t, msg);
  }
  return rc;
}

int loom__json_samples_read(loom_trace *t) {
  const char *sv = loom__trace_top(t, "samples");
  if (!sv) return 0;
  const char *fv = loom__trace_top(t, "stackFrames");
  yajl_val list = yajl_tree_parse(sv, NULL, 0);
  yajl_val frames = fv ? yajl_tree_parse(fv, NULL, 0) : NULL;
  int rc = 0;
  if (list && YAJL_IS_ARRAY(list) && (!frames || YAJL_IS_OBJECT(frames))) {
    loom__samples s;
    loom__samples_init(&s);
    rc = add_samples(t, &s, frames, list);
    loom__samples_free(&s);
    if (rc == 0) {
      drop_top(t, "samples");
      drop_top(t, "stackFrames");
    }
  }
  yajl_tree_free(list);
  yajl_tree_free(frames);
  return rc;
}
