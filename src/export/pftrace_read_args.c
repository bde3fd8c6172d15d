/*
 * pftrace_read_args.c - debug annotation values of other producers that are
 * not one scalar: dictionaries and arrays (dict_entries, array_values), the
 * older NestedValue, legacy JSON text and pointers.  loom keeps them as an
 * argument holding JSON text (as it keeps a JSON trace's nested values), a
 * pointer as its "0x..." text (as trace_processor shows it).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "export/pftrace_read.h"

enum { MAX_DEPTH = 64 }; /* deeper values are written as null, and counted */

static void raw(pf_reader *r, const char *s, size_t n) {
  char *d = loom__out_reserve(&r->jtext, n);
  if (r->jtext.failed && r->jtext.len + n > r->jtext.cap) return; /* out of memory: said after */
  memcpy(d, s, n);
  r->jtext.len += n;
}

static void text(pf_reader *r, const char *s) { raw(r, s, strlen(s)); }

static void u64(pf_reader *r, uint64_t v) {
  char b[24];
  raw(r, b, loom__fmt_u64(b, v));
}

static void i64(pf_reader *r, int64_t v) {
  char b[24];
  raw(r, b, loom__fmt_i64(b, v));
}

/* A pointer as trace_processor shows it: "0x..." (quoted: within JSON). */
static void pointer(pf_reader *r, uint64_t v, int quoted) {
  char b[24];
  int n = snprintf(b, sizeof b, quoted ? "\"0x%" PRIx64 "\"" : "0x%" PRIx64, v);
  raw(r, b, (size_t)n);
}

static void dbl(pf_reader *r, uint64_t bits) {
  double d;
  memcpy(&d, &bits, sizeof d);
  char b[40];
  if (isfinite(d)) raw(r, b, (size_t)snprintf(b, sizeof b, "%.17g", d));
  else text(r, "null"); /* JSON has no infinity or NaN */
}

static void str(pf_reader *r, const uint8_t *p, size_t n) {
  loom__json_str(&r->jtext, (const char *)p, n);
}

static void id_str(pf_reader *r, uint32_t id) {
  const char *s = id ? loom__trace_cstr(r->t, id) : "";
  loom__json_str(&r->jtext, s, strlen(s));
}

static void value(pf_reader *r, pb_span msg, int depth);

/* The older NestedValue: a dict (keys and values side by side), an array
 * or one leaf. */
static void nested(pf_reader *r, pb_span msg, int depth) {
  pb_span c = msg, sub;
  uint32_t f;
  int w;
  uint64_t v, type = 0;
  while (rd_field(&c, &f, &w, &v, &sub))
    if (f == PF_NV_TYPE && w == PB_VARINT) type = v;
  if (depth >= MAX_DEPTH) {
    r->odd_value = 1;
    text(r, "null");
    return;
  }
  if (type == 1 || type == 2) {
    text(r, type == 1 ? "{" : "[");
    pb_span keys = msg, vals = msg, k = {0}, e = {0};
    int first = 1;
    for (;;) {
      uint32_t fk = 0, fv = 0;
      int wk = 0, wv = 0;
      uint64_t x;
      if (type == 1) { /* the next key, then the next value */
        while (rd_field(&keys, &fk, &wk, &x, &k) && !(fk == PF_NV_DICT_KEYS && wk == PB_LEN)) {}
        if (fk != PF_NV_DICT_KEYS || wk != PB_LEN) break;
      }
      uint32_t want = type == 1 ? PF_NV_DICT_VALUES : PF_NV_ARRAY_VALUES;
      while (rd_field(&vals, &fv, &wv, &x, &e) && !(fv == want && wv == PB_LEN)) {}
      int have = fv == want && wv == PB_LEN;
      if (!have && type == 2) break;
      if (!first) text(r, ",");
      first = 0;
      if (type == 1) str(r, k.p, (size_t)(k.end - k.p)), text(r, ":");
      if (have) nested(r, e, depth + 1);
      else text(r, "null");
      if (!have) break;
    }
    text(r, type == 1 ? "}" : "]");
    return;
  }
  c = msg;
  int any = 0;
  while (rd_field(&c, &f, &w, &v, &sub)) {
    if (f == PF_NV_INT && w == PB_VARINT) i64(r, (int64_t)v), any = 1;
    else if (f == PF_NV_DOUBLE && w == PB_I64) dbl(r, v), any = 1;
    else if (f == PF_NV_BOOL && w == PB_VARINT) text(r, v ? "true" : "false"), any = 1;
    else if (f == PF_NV_STRING && w == PB_LEN) str(r, sub.p, (size_t)(sub.end - sub.p)), any = 1;
    if (any) return;
  }
  text(r, "null");
}

static void value(pf_reader *r, pb_span msg, int depth);

/* A dict entry's name, as a JSON string. */
static void entry_name(pf_reader *r, pb_span entry) {
  pb_span n;
  uint32_t f, key = 0;
  int w;
  uint64_t v;
  while (rd_field(&entry, &f, &w, &v, &n)) {
    if (f == PF_DA_NAME && w == PB_LEN)
      key = loom__strtab_intern(&r->t->strs, (const char *)n.p, (size_t)(n.end - n.p));
    else if (f == PF_DA_NAME_IID && w == PB_VARINT) key = iid_get(r, IID_ARGN, v);
  }
  id_str(r, key);
}

/* A dict's entries or an array's values, as a JSON object or array. */
static void container(pf_reader *r, pb_span msg, int dict, int depth) {
  pb_span sub;
  uint32_t f;
  int w;
  uint64_t v;
  text(r, dict ? "{" : "[");
  int first = 1;
  for (pb_span c = msg; rd_field(&c, &f, &w, &v, &sub);) {
    if (w != PB_LEN || f != (dict ? PF_DA_DICT_ENTRIES : PF_DA_ARRAY_VALUES)) continue;
    if (!first) text(r, ",");
    first = 0;
    if (dict) {
      entry_name(r, sub);
      text(r, ":");
    }
    value(r, sub, depth + 1);
  }
  text(r, dict ? "}" : "]");
}

/* The first scalar (or nested value, or legacy JSON) of msg; 0 when it
 * holds none. */
static int scalar(pf_reader *r, pb_span msg, int depth) {
  pb_span sub;
  uint32_t f;
  int w;
  uint64_t v;
  for (pb_span c = msg; rd_field(&c, &f, &w, &v, &sub);) {
    switch (f) {
    case PF_DA_BOOL: if (w == PB_VARINT) return text(r, v ? "true" : "false"), 1; break;
    case PF_DA_UINT: if (w == PB_VARINT) return u64(r, v), 1; break;
    case PF_DA_INT: if (w == PB_VARINT) return i64(r, (int64_t)v), 1; break;
    case PF_DA_DOUBLE: if (w == PB_I64) return dbl(r, v), 1; break;
    case PF_DA_STRING: if (w == PB_LEN) return str(r, sub.p, (size_t)(sub.end - sub.p)), 1; break;
    case PF_DA_STRING_VALUE_IID:
      if (w == PB_VARINT) return id_str(r, iid_get(r, IID_STRV, v)), 1;
      break;
    case PF_DA_POINTER: if (w == PB_VARINT) return pointer(r, v, 1), 1; break;
    case PF_DA_NESTED: if (w == PB_LEN) return nested(r, sub, depth + 1), 1; break;
    case PF_DA_LEGACY_JSON:
      if (w == PB_LEN) return raw(r, (const char *)sub.p, (size_t)(sub.end - sub.p)), 1;
      break;
    default: break;
    }
  }
  return 0;
}

/* The value of one DebugAnnotation (a dict entry's or an array element's
 * too) as JSON. */
static void value(pf_reader *r, pb_span msg, int depth) {
  if (depth >= MAX_DEPTH) {
    r->odd_value = 1;
    text(r, "null");
    return;
  }
  pb_span c = msg, sub;
  uint32_t f;
  int w;
  uint64_t v;
  int dict = 0, array = 0;
  while (rd_field(&c, &f, &w, &v, &sub)) {
    dict |= f == PF_DA_DICT_ENTRIES && w == PB_LEN;
    array |= f == PF_DA_ARRAY_VALUES && w == PB_LEN;
  }
  if (dict || array) {
    container(r, msg, dict, depth);
    return;
  }
  if (scalar(r, msg, depth)) return;
  r->odd_value = 1;
  text(r, "null");
}

int loom__pfr_value_text(pf_reader *r, pb_span msg, uint32_t *id, int *json) {
  pb_span c = msg, sub;
  uint32_t f;
  int w;
  uint64_t v;
  int kind = 0; /* 1 JSON, 2 pointer, 3 legacy JSON */
  while (rd_field(&c, &f, &w, &v, &sub)) {
    if (w == PB_LEN && (f == PF_DA_DICT_ENTRIES || f == PF_DA_ARRAY_VALUES || f == PF_DA_NESTED))
      kind = 1;
    else if (w == PB_VARINT && f == PF_DA_POINTER) kind = 2;
    else if (w == PB_LEN && f == PF_DA_LEGACY_JSON) kind = 3;
    else if (f == PF_DA_BOOL || f == PF_DA_UINT || f == PF_DA_INT || f == PF_DA_DOUBLE ||
             f == PF_DA_STRING || f == PF_DA_STRING_VALUE_IID)
      return 0;
  }
  if (!kind) return -1;
  if (!r->jtext.buf && loom__out_mem_init(&r->jtext)) {
    r->oom = 1;
    return -1;
  }
  r->jtext.len = 0;
  if (kind == 3) { /* kept as written: JSON when it is */
    for (c = msg; rd_field(&c, &f, &w, &v, &sub);)
      if (f == PF_DA_LEGACY_JSON && w == PB_LEN)
        raw(r, (const char *)sub.p, (size_t)(sub.end - sub.p));
  } else if (kind == 2) { /* its text, a string */
    for (c = msg; rd_field(&c, &f, &w, &v, &sub);)
      if (f == PF_DA_POINTER && w == PB_VARINT) pointer(r, v, 0);
  } else {
    value(r, msg, 0);
  }
  if (r->jtext.failed) {
    r->oom = 1;
    return -1;
  }
  *id = loom__strtab_intern(&r->t->strs, r->jtext.buf, r->jtext.len);
  if (!*id && r->jtext.len) r->oom = 1;
  *json = kind != 2 ? 2 : 0; /* 2: check it is JSON (legacy text may not be) */
  return 1;
}
