/*
 * read_json_cb.c - the JSON reader's yajl callbacks: numbers and times
 * parsed from their text, keys recognised once,
 * values routed to the event being parsed, the top-level keys loom and
 * Kineto write, containers entered and left.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_tree.h>

#include "export/read_json.h"

/* ---- numbers and times -------------------------------------------------- */
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

/* A decimal integer text ("-"? digits, "-" alone reading as 0) into *out,
 * in one pass: returns 0 when it fits an int64, 1 when it fits only a
 * uint64 (*u), -1 when it is past 64 bits, -2 when it is no such text (a
 * fraction, an exponent, anything else).  The first 18 digits cannot
 * overflow, so only later ones are checked. */
static int int_text(const char *s, size_t n, int64_t *out, uint64_t *u) {
  size_t neg = n && s[0] == '-';
  uint64_t v = 0;
  int over = 0;
  if (!n) return -2;
  for (size_t i = neg; i < n; i++) {
    unsigned d = (unsigned)(unsigned char)s[i] - '0';
    if (d > 9) return -2;
    if (i - neg < 18) v = v * 10 + d;
    else if (over || v > (UINT64_MAX - d) / 10) over = 1;
    else v = v * 10 + d;
  }
  if (over) return -1;
  *u = v;
  if (!neg && v > (uint64_t)INT64_MAX) return 1;
  if (neg && v > (uint64_t)INT64_MAX + 1) return -1;
  *out = !neg ? (int64_t)v : v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
  return 0;
}

static void time_value(reader *r, const char *what, const char *s, size_t n, int64_t *out) {
  int kind = parse_milli(s, n, out);
  if (kind) loom__rj_bad(r, kind, what, s, n);
}

/* baseTimeNanoseconds: a count of ns, kept within the limit. */
static void base_value(reader *r, const char *s, size_t n) {
  int64_t v = 0;
  uint64_t u;
  int kind = 0;
  int fits = int_text(s, n, &v, &u);
  if (fits != -2) {
    if (fits || v > LOOM__TIME_LIMIT || v < -LOOM__TIME_LIMIT) kind = LOOM__BAD_TIME_RANGE;
  } else { /* a fraction or an exponent */
    char buf[64];
    size_t k = n < sizeof buf - 1 ? n : sizeof buf - 1;
    memcpy(buf, s, k);
    buf[k] = 0;
    double d = strtod(buf, NULL);
    if (d != d) kind = LOOM__BAD_NONFINITE;
    else if (d - d != 0)
      kind = LOOM__BAD_NONFINITE, v = d > 0 ? LOOM__TIME_LIMIT : -LOOM__TIME_LIMIT;
    else if (d > (double)LOOM__TIME_LIMIT || d < -(double)LOOM__TIME_LIMIT)
      kind = LOOM__BAD_TIME_RANGE;
    else v = (int64_t)(d + (d >= 0 ? 0.5 : -0.5));
  }
  if (kind == LOOM__BAD_TIME_RANGE) v = s[0] == '-' ? -LOOM__TIME_LIMIT : LOOM__TIME_LIMIT;
  r->base = v;
  if (kind) loom__rj_bad(r, kind, "baseTimeNanoseconds", s, n);
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
  id = loom__rj_str_n(r, s, n);
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

int loom__rj_set_key(reader *r, int top, const char *s, size_t n) {
  char **dst = top ? &r->top_key : &r->key, *in = top ? r->top_in : r->key_in;
  char **heap = top ? &r->top_heap : &r->key_heap;
  size_t *cap = top ? &r->top_cap : &r->key_cap;
  if (n < sizeof r->key_in) {
    *dst = in;
  } else if (n >= *cap && loom__grow((void **)heap, cap, n + 1, 1)) {
    *dst = in;
    in[0] = 0;
    r->oom = 1;
    return -1;
  } else {
    *dst = *heap;
  }
  memcpy(*dst, s, n);
  (*dst)[n] = 0;
  return 0;
}

/* distributedInfo {"backend", "rank", "world_size"} -> the schema's keys. */
static void dist_info(reader *r, int type, int64_t i, uint32_t s) {
  const char *key = !strcmp(r->key, "backend") ? "distributed_backend" : r->key;
  if (strcmp(key, "distributed_backend") && strcmp(key, "rank") && strcmp(key, "world_size"))
    return;
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
  char *saved = strdup(r->key);
  if (!saved) r->oom = 1;
  for (size_t i = 0; saved && i < v->u.object.len; i++) {
    yajl_val x = v->u.object.values[i];
    if (loom__rj_set_key(r, 0, v->u.object.keys[i], strlen(v->u.object.keys[i]))) break;
    if (YAJL_IS_STRING(x))
      dist_info(r, LOOM_ARG_STRING, 0, loom__trace_str(r->t, YAJL_GET_STRING(x)));
    else if (YAJL_IS_INTEGER(x)) dist_info(r, LOOM_ARG_INT, YAJL_GET_INTEGER(x), 0);
  }
  if (saved) loom__rj_set_key(r, 0, saved, strlen(saved));
  free(saved);
  yajl_tree_free(v);
}

/* A field of the event being read. */
static void event_field(reader *r, loom_arg_type type, int64_t i, uint32_t s, const char *num,
                        size_t nlen) {
  cur_ev *c = &r->ev;
  switch (r->kcode) {
  case K_PH: if (type == LOOM_ARG_STRING) c->ph = loom__trace_cstr(r->t, s)[0]; break;
  case K_NAME: c->name = s; break;
  case K_CAT: c->cat = s; break;
  case K_PID: c->pid = i, c->has_pid = 1; break;
  case K_TID: c->tid = i, c->has_tid = 1; break;
  case K_TS: if (num) time_value(r, "ts", num, nlen, &c->ts), c->has_ts = 1; break;
  case K_DUR: if (num) time_value(r, "dur", num, nlen, &c->dur), c->has_dur = 1; break;
  case K_ID:
    c->id = type == LOOM_ARG_STRING ? strtoull(loom__trace_cstr(r->t, s), NULL, 0) : (uint64_t)i;
    break;
  case K_BP: c->bp_e = type == LOOM_ARG_STRING && !strcmp(loom__trace_cstr(r->t, s), "e"); break;
  case K_S: c->global = type == LOOM_ARG_STRING && !strcmp(loom__trace_cstr(r->t, s), "g"); break;
  default: break;
  }
}

/* A property of the device being read: its own fields, else an argument. */
static void device_field(reader *r, const loom__targ *a, int64_t i) {
  const char *k = a->json ? "" : r->key;
  int str = a->type == LOOM_ARG_STRING;
  if (!strcmp(k, "id") && a->type == LOOM_ARG_INT) r->dev.pid = i;
  else if (!strcmp(k, "name") && str) r->dev.name = a->v.s;
  else if (!strcmp(k, "vendor") && str) r->dev.vendor = a->v.s;
  else if (!strcmp(k, "type") && str) r->dev.type = a->v.s;
  else if (!strcmp(k, "deviceType") && str) r->dev.device_type = a->v.s;
  else if (!strcmp(k, "backend") && str) r->dev.backend = a->v.s;
  else if (LOOM__PUSH_BIG(r->t->args, r->t->nargs, r->t->cap_args, *a)) r->oom = 1;
  else r->dev.nargs++;
}

/* A "loom_kind" value: 1 when it names a kind (the event's, then), else 0
 * (kept as an argument, said once). */
static int kind_arg(reader *r, uint32_t s) {
  int k = loom__kind_parse(loom__trace_cstr(r->t, s), loom__strtab_len(&r->t->strs, s));
  if (k < 0) r->kind_unknown = 1;
  else r->ev.kind = k + 1;
  return k >= 0;
}

/* An argument of the event (or a property of a device) being read. */
static void arg_value(reader *r, loom_arg_type type, int64_t i, double d, uint32_t s) {
  cur_ev *c = &r->ev;
  loom__targ a = {.key = r->where == AT_ARGS ? r->key_id : loom__trace_str(r->t, r->key),
                  .type = (uint8_t)type, .json = (uint8_t)r->val_json};
  if (type == LOOM_ARG_INT) a.v.i = i;
  else if (type == LOOM_ARG_UINT) a.v.u = (uint64_t)i;
  else if (type == LOOM_ARG_DOUBLE) a.v.d = d;
  else a.v.s = s;
  if (r->where == AT_DEVICE) device_field(r, &a, i);
  else if (a.key == r->ext_key && type == LOOM_ARG_INT) c->external_id = (uint64_t)i;
  else if (a.key == r->corr_key && type == LOOM_ARG_INT) c->correlation = (uint64_t)i;
  else if (a.key == r->role_key && type == LOOM_ARG_STRING && !a.json)
    c->roles |= loom__role_parse(loom__trace_cstr(r->t, s), loom__strtab_len(&r->t->strs, s),
                                 &r->role_unknown);
  else if (a.key == r->kind_key && type == LOOM_ARG_STRING && !a.json && kind_arg(r, s)) {
  } else loom__rj_add_arg(r, a);
}

/* A value at the top level of the file. */
static void top_value(reader *r, loom_arg_type type, int64_t i, uint32_t s, const char *num,
                      size_t nlen) {
  if (!strcmp(r->key, "baseTimeNanoseconds") && num) {
    base_value(r, num, nlen);
  } else if (!strcmp(r->key, "loom_dropped") && type == LOOM_ARG_INT) {
    r->t->dropped = (uint64_t)i;
  } else if (!strcmp(r->key, "traceName") && type == LOOM_ARG_STRING) {
    r->t->trace_name = s;
  } else if (type == LOOM_ARG_STRING && !r->val_json) {
    set_meta(r, r->key, s);
  } else if (!loom_owned_top(r->key)) { /* numbers, booleans, null: as written */
    uint32_t v = r->val_json ? s : loom__rj_str_n(r, (const unsigned char *)num, nlen);
    if (loom__trace_add_top(r->t, loom__trace_str(r->t, r->key), v)) r->oom = 1;
  }
}

static int on_value(reader *r, loom_arg_type type, int64_t i, double d, uint32_t s,
                    const char *num, size_t nlen) {
  if (r->where == AT_EVENT) event_field(r, type, i, s, num, nlen);
  else if (r->where == AT_ARGS || r->where == AT_DEVICE) arg_value(r, type, i, d, s);
  else if (r->where == AT_WARNINGS && type == LOOM_ARG_STRING) {
    if (LOOM__PUSH(r->t->warnings, r->t->nwarnings, r->t->cap_warnings, s)) r->oom = 1;
  } else if (r->where == AT_TOP) top_value(r, type, i, s, num, nlen);
  return 1;
}

/* A literal (true, false, null) outside a captured value: an argument or a
 * top-level value keeps it as JSON text; elsewhere a boolean counts as 0/1. */
static int json_literal(reader *r, const char *lit, int64_t as_int) {
  if (loom__rj_capturing(r)) {
    loom__rj_cap_sep(r);
    loom__rj_cap_raw(r, lit, strlen(lit));
    return 1;
  }
  if (r->where == AT_ARGS || r->where == AT_DEVICE || r->where == AT_TOP) {
    if (r->lean && r->where == AT_ARGS && r->ev.ph && r->ev.ph != 'M') /* streaming: as before */
      return as_int < 0 ? 1 : on_value(r, LOOM_ARG_INT, as_int, 0, 0, NULL, 0);
    r->val_json = 1;
    int rc = on_value(r, LOOM_ARG_STRING, 0, 0,
                      loom__rj_str_n(r, (const unsigned char *)lit, strlen(lit)), NULL, 0);
    r->val_json = 0;
    return rc;
  }
  return as_int < 0 ? 1 : on_value(r, LOOM_ARG_INT, as_int, 0, 0, NULL, 0);
}

static int cb_null(void *ctx) { return json_literal(ctx, "null", -1); }

static int cb_bool(void *ctx, int b) { return json_literal(ctx, b ? "true" : "false", b); }

/* The name of what a number is the value of, for a bad value's example. */
static const char *value_key(const reader *r) {
  static const char *const fields[] = {"event field", "ph",  "name", "cat", "pid", "tid",
                                       "ts",          "dur", "id",   "bp",  "s",   "args"};
  if (r->where == AT_EVENT) return fields[r->kcode];
  if (r->where == AT_ARGS) return loom__trace_cstr(r->t, r->key_id);
  return r->key;
}

/* A number that does not fit what loom keeps (an integer past 64 bits,
 * infinity): counted and kept as its text. */
static int number_as_text(reader *r, int kind, const char *s, size_t n) {
  loom__rj_bad(r, kind, value_key(r), s, n);
  if (r->where == AT_EVENT) { /* pid/tid: a named process or thread, like a string one */
    const unsigned char *u = (const unsigned char *)s;
    if (r->kcode == K_PID || r->kcode == K_TID)
      return on_value(r, LOOM_ARG_INT, (int64_t)loom__rj_str_pid(r, u, n, r->kcode == K_TID), 0, 0,
                      NULL, 0);
    if (r->kcode == K_ID)
      return on_value(r, LOOM_ARG_INT, (int64_t)(loom__hash_bytes(u, n) | 1), 0, 0, NULL, 0);
    return 1;
  }
  if (r->lean && r->where == AT_ARGS && r->ev.ph && r->ev.ph != 'M') return 1; /* as string args */
  return on_value(r, LOOM_ARG_STRING, 0, 0, loom__rj_str_n(r, (const unsigned char *)s, n), NULL,
                  0);
}

static int cb_number(void *ctx, const char *s, size_t n) {
  reader *r = ctx;
  if (loom__rj_capturing(r)) { loom__rj_cap_sep(r); loom__rj_cap_raw(r, s, n); return 1; }
  if (r->where == AT_EVENT && (r->kcode == K_TS || r->kcode == K_DUR)) /* parsed from the text */
    return on_value(r, LOOM_ARG_INT, 0, 0, 0, s, n);
  int64_t v = 0;
  uint64_t u = 0;
  int fits = int_text(s, n, &v, &u);
  if (fits == -1) return number_as_text(r, LOOM__BAD_INT64, s, n);
  if (fits == 1) return on_value(r, LOOM_ARG_UINT, (int64_t)u, 0, 0, s, n);
  if (fits == 0) return on_value(r, LOOM_ARG_INT, v, 0, 0, s, n);
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
  if (loom__rj_capturing(r)) { loom__rj_cap_sep(r); loom__rj_cap_str(r, s, n); return 1; }
  if (r->where == AT_EVENT && (r->kcode == K_PID || r->kcode == K_TID)) {
    int64_t id = 0;
    uint64_t u;
    if (int_text((const char *)s, n, &id, &u))
      id = (int64_t)loom__rj_str_pid(
          r, s, n, r->kcode == K_TID); /* a name, or digits past int64: a named process */
    return on_value(r, LOOM_ARG_INT, id, 0, 0, NULL, 0);
  }
  if (r->where == AT_EVENT && (r->kcode == K_TS || r->kcode == K_DUR))
    return on_value(r, LOOM_ARG_INT, 0, 0, 0, (const char *)s, n);
  /* Streaming keeps memory flat: string arguments of events are not
   * interned (they can be unique per event); metadata's are, and so are the
   * report's reserved ones, whose values are a handful of words. */
  if (r->where == AT_ARGS && (r->key_id == r->role_key || r->key_id == r->kind_key ||
                               r->key_id == r->dir_key ||
                               r->key_id == r->mem.k_call || r->key_id == r->mem.k_kind ||
                               r->key_id == r->mem.k_cat))
    return on_value(r, LOOM_ARG_STRING, 0, 0, cached_str(r, s, n), NULL, 0);
  /* a sample's stack: the CPU analysis needs it, and stacks repeat */
  if (r->where == AT_ARGS && r->key_id == r->stack_key)
    return on_value(r, LOOM_ARG_STRING, 0, 0, loom__rj_str_n(r, s, n), NULL, 0);
  if (r->lean && r->where == AT_ARGS && r->ev.ph && r->ev.ph != 'M') return 1;
  if (r->where == AT_EVENT && (r->kcode == K_NAME || r->kcode == K_CAT || r->kcode == K_PH))
    return on_value(r, LOOM_ARG_STRING, 0, 0, cached_str(r, s, n), NULL, 0);
  return on_value(r, LOOM_ARG_STRING, 0, 0, loom__rj_str_n(r, s, n), NULL, 0);
}

static int cb_map_key(void *ctx, const unsigned char *s, size_t n) {
  reader *r = ctx;
  r->nstrings++;
  if (loom__rj_capturing(r)) {
    loom__rj_cap_sep(r);
    loom__rj_cap_str(r, s, n);
    loom__rj_cap_raw(r, ":", 1);
    r->cap_first = 1;
    return 1;
  }
  if (r->where == AT_EVENT) { /* the hot paths: no copy */
    r->kcode = key_code(s, n);
    return 1;
  }
  if (r->where == AT_ARGS) {
    r->key_id = arg_key(r, s, n);
    return !r->oom;
  }
  if (loom__rj_set_key(r, 0, (const char *)s, n)) return 0;
  if (r->depth == 1 && !r->top_is_array && loom__rj_set_key(r, 1, (const char *)s, n)) return 0;
  return 1;
}

static void start_capture(reader *r, int is_map, int top) {
  r->ncap = 0;
  r->cap_first = 1;
  loom__rj_cap_raw(r, is_map ? "{" : "[", 1);
  r->cap_depth = 1;
  r->cap_top = top;
}

/* The end of a captured value: an argument (JSON text) or a top-level key. */
static void end_capture(reader *r) {
  uint32_t s = loom__rj_str_n(r, (const unsigned char *)r->cap, r->ncap);
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
  if (loom__rj_capturing(r)) {
    loom__rj_cap_sep(r);
    loom__rj_cap_raw(r, is_map ? "{" : "[", 1);
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
  } else if (r->where == AT_ARGS && r->lean) {
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
  if (loom__rj_capturing(r)) {
    loom__rj_cap_raw(r, is_map ? "}" : "]", 1);
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
    loom__rj_end_event(r);
    r->where = AT_EVENTS;
    break;
  case AT_DEVICE:
    if (LOOM__PUSH(r->t->devs, r->t->ndevs, r->t->cap_devs, r->dev)) r->oom = 1;
    loom__rj_mark_device(r, r->dev.pid);
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
loom_status loom__rj_not_a_trace(const reader *r, const char *path) {
  if (r->not_event)
    return loom__fail(LOOM_EFORMAT, "%s: not a trace: the top-level list holds lists, not event "
                      "objects (a memory timeline?)", path);
  if (!r->saw_events)
    return loom__fail(LOOM_EFORMAT, "%s: not a trace: the JSON object has no \"traceEvents\" list "
                      "(an execution trace or another tool's file?)", path);
  return LOOM_OK;
}

const yajl_callbacks loom__rj_callbacks = {
    cb_null, cb_bool, NULL, NULL, cb_number, cb_string,
    cb_start_map, cb_map_key, cb_end_map, cb_start_array, cb_end_array};
