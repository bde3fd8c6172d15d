/*
 * samples.c - CPU samples as frames and call sites (samples.h).  Stacks
 * are parsed once per distinct stack text: identical stacks share one
 * interned string in the trace, so a program sampled a million times in a
 * few hundred places parses a few hundred stacks.
 */
#include "trace/samples.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void loom__samples_init(loom__samples *s) {
  memset(s, 0, sizeof *s);
  loom__strtab_init(&s->strs);
}

void loom__samples_free(loom__samples *s) {
  loom__strtab_free(&s->strs);
  free(s->frames);
  free(s->sites);
  free(s->samples);
  loom__map_free(&s->frame_of);
  loom__map_free(&s->site_of);
  memset(s, 0, sizeof *s);
}

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return 0;
  size_t c = *cap ? *cap * 2 : 256;
  while (c < need) c *= 2;
  void *q = realloc(*p, c * elem);
  if (!q) return -1;
  *p = q;
  *cap = c;
  return 0;
}

long loom__samples_frame(loom__samples *s, const char *name, const char *module, uint64_t offset) {
  /* the key: name, module and offset whole, however long (C++ names are) */
  if (!name) name = "";
  if (!module) module = "";
  size_t need = strlen(name) + strlen(module) + 24;
  char small[1024], *key = need <= sizeof small ? small : malloc(need);
  if (!key) return -1;
  int n = snprintf(key, need, "%s\t%s\t%llx", name, module, (unsigned long long)offset);
  uint32_t kid = n < 0 ? 0 : loom__strtab_intern(&s->strs, key, (size_t)n);
  if (key != small) free(key);
  if (!kid) return -1;
  uint64_t *known = loom__map_get(&s->frame_of, kid);
  if (known) return (long)(*known - 1);
  if (grow((void **)&s->frames, &s->cap_frames, s->nframes + 1, sizeof *s->frames)) return -1;
  loom__sframe f = {name && *name ? loom__strtab_intern(&s->strs, name, strlen(name)) : 0,
                    module && *module ? loom__strtab_intern(&s->strs, module, strlen(module)) : 0,
                    offset};
  s->frames[s->nframes] = f;
  if (loom__map_put(&s->frame_of, kid, s->nframes + 1)) return -1;
  return (long)s->nframes++;
}

uint32_t loom__samples_site(loom__samples *s, uint32_t parent, uint32_t frame) {
  uint64_t key = (uint64_t)parent << 32 | frame;
  uint64_t *known = loom__map_get(&s->site_of, key);
  if (known) return (uint32_t)*known;
  if (s->nsites >= UINT32_MAX - 1 ||
      grow((void **)&s->sites, &s->cap_sites, s->nsites + 1, sizeof *s->sites))
    return 0;
  uint32_t depth = parent ? s->sites[parent - 1].depth + 1 : 1;
  s->sites[s->nsites] = (loom__ssite){frame, parent, depth};
  if (loom__map_put(&s->site_of, key, s->nsites + 1)) return 0;
  return (uint32_t)++s->nsites;
}

/* Parses one stack text (leaf first) into its leaf site (index + 1). */
static uint32_t parse_stack(loom__samples *s, const char *p, size_t n, int *oom) {
  /* frames are added root first, so walk the lines from the end */
  uint32_t site = 0;
  size_t end = n;
  while (end > 0) {
    size_t beg = end;
    while (beg > 0 && p[beg - 1] != '\n') beg--;
    const char *line = p + beg, *t1 = memchr(line, '\t', end - beg);
    const char *t2 = t1 ? memchr(t1 + 1, '\t', (size_t)(p + end - t1 - 1)) : NULL;
    /* name and module copied whole (a line of any length) */
    size_t len = end - beg;
    char small[2048], *name = len + 2 <= sizeof small ? small : malloc(len + 2), *mod;
    if (!name) {
      *oom = 1;
      return 0;
    }
    uint64_t off = 0;
    if (t1 && t2) {
      size_t nl = (size_t)(t1 - line), ml = (size_t)(t2 - t1 - 1);
      memcpy(name, line, nl), name[nl] = 0;
      mod = name + nl + 1;
      memcpy(mod, t1 + 1, ml), mod[ml] = 0;
      off = strtoull(t2 + 1, NULL, 16);
    } else { /* not loom's layout: the whole line is the function */
      memcpy(name, line, len), name[len] = 0;
      mod = name + len;
    }
    long f = loom__samples_frame(s, name, mod, off);
    if (name != small) free(name);
    uint32_t next = f < 0 ? 0 : loom__samples_site(s, site, (uint32_t)f);
    if (!next) {
      *oom = 1;
      return 0;
    }
    site = next;
    end = beg ? beg - 1 : 0;
  }
  return site;
}

long loom__samples_parse(loom__samples *s, const char *text, size_t n) {
  int oom = 0;
  uint32_t site = parse_stack(s, text, n, &oom);
  return oom ? -1 : (long)site;
}

const char *loom__sample_stack(const loom_trace *t, const loom__ev *e, size_t *len) {
  for (uint16_t i = 0; i < e->nargs; i++) {
    const loom__targ *a = &t->args[e->args_off + i];
    if (a->type == LOOM_ARG_STRING && !strcmp(loom__trace_cstr(t, a->key), "stack")) {
      *len = loom__strtab_len(&t->strs, a->v.s);
      return loom__trace_cstr(t, a->v.s);
    }
  }
  return NULL;
}

int loom__samples_build(const loom_trace *t, loom__samples *s) {
  loom__map by_text = {0}; /* trace string id of a stack -> its leaf site + 1 */
  int oom = 0;
  for (size_t i = 0; i < t->nev && !oom; i++) {
    const loom__ev *e = &t->ev[i];
    if (e->kind != LOOM_KIND_SAMPLE) continue;
    uint32_t sid = 0, site = 0;
    for (uint16_t k = 0; k < e->nargs; k++) {
      const loom__targ *a = &t->args[e->args_off + k];
      if (a->type == LOOM_ARG_STRING && !strcmp(loom__trace_cstr(t, a->key), "stack")) sid = a->v.s;
    }
    if (sid) {
      uint64_t *known = loom__map_get(&by_text, sid);
      if (known) site = (uint32_t)*known;
      else {
        site = parse_stack(s, loom__trace_cstr(t, sid), loom__strtab_len(&t->strs, sid), &oom);
        if (!oom && loom__map_put(&by_text, sid, site)) oom = 1;
      }
    }
    if (oom || grow((void **)&s->samples, &s->cap_samples, s->nsamples + 1, sizeof *s->samples)) {
      oom = 1;
      break;
    }
    s->samples[s->nsamples++] = (loom__sample){i, site};
  }
  loom__map_free(&by_text);
  return oom ? -1 : 0;
}

long loom__samples_text(const loom__samples *s, uint32_t site, char **buf, size_t *cap) {
  size_t len = 0;
  for (uint32_t at = site; at; at = s->sites[at - 1].parent) {
    const loom__sframe *f = &s->frames[s->sites[at - 1].frame];
    const char *name = loom__strtab_get(&s->strs, f->name);
    const char *mod = loom__strtab_get(&s->strs, f->module);
    size_t need = len + strlen(name) + strlen(mod) + 24;
    if (need > *cap) {
      size_t c = *cap ? *cap * 2 : 1024;
      while (c < need) c *= 2;
      char *p = realloc(*buf, c);
      if (!p) return -1;
      *buf = p;
      *cap = c;
    }
    int n = snprintf(*buf + len, *cap - len, "%s%s\t%s\t0x%llx", len ? "\n" : "", name, mod,
                     (unsigned long long)f->offset);
    if (n < 0) return -1;
    len += (size_t)n;
  }
  if (!*buf) {
    *buf = malloc(1);
    if (!*buf) return -1;
    *cap = 1;
  }
  (*buf)[len] = 0;
  return (long)len;
}

const char *loom__samples_frame_label(const loom__samples *s, uint32_t frame, char *buf, size_t n) {
  const loom__sframe *f = &s->frames[frame];
  if (f->name) return loom__strtab_get(&s->strs, f->name);
  const char *mod = f->module ? loom__strtab_get(&s->strs, f->module) : "[unknown]";
  const char *slash = strrchr(mod, '/');
  snprintf(buf, n, "%s+0x%llx", slash ? slash + 1 : mod, (unsigned long long)f->offset);
  return buf;
}
