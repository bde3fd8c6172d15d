/*
 * options.c - session options: "key=value" pairs given to
 * loom_session_create, with the environment (LOOM_<KEY>) as fallback.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "util/util.h"

void loom__opts_free(loom__opts *o) {
  for (size_t i = 0; i < o->n; i++) {
    free(o->keys[i]);
    free(o->vals[i]);
  }
  free(o->keys);
  free(o->vals);
  memset(o, 0, sizeof *o);
}

static void trim(const char **b, const char **e) {
  while (*b < *e && isspace((unsigned char)**b)) (*b)++;
  while (*e > *b && isspace((unsigned char)(*e)[-1])) (*e)--;
}

loom_status loom__opts_parse(loom__opts *o, const char *s) {
  memset(o, 0, sizeof *o);
  if (!s) return LOOM_OK;
  const char *p = s;
  while (*p) {
    const char *end = p + strcspn(p, ",;");
    const char *kb = p, *ke = end;
    trim(&kb, &ke);
    if (kb != ke) {
      const char *eq = memchr(kb, '=', (size_t)(ke - kb));
      if (!eq || eq == kb) {
        loom__opts_free(o);
        return loom__fail(LOOM_EINVAL,
                          "bad option '%.*s' at offset %zu in \"%s\": expected key=value",
                          (int)(ke - kb), kb, (size_t)(kb - s), s);
      }
      const char *vb = eq + 1, *ve = ke, *k2 = eq;
      trim(&kb, &k2);
      trim(&vb, &ve);
      size_t cap_k = o->cap, cap_v = o->cap;
      char *k = loom__strndup(kb, (size_t)(k2 - kb));
      char *v = loom__strndup(vb, (size_t)(ve - vb));
      if (!k || !v ||
          loom__grow((void **)&o->keys, &cap_k, o->n + 1, sizeof *o->keys) ||
          loom__grow((void **)&o->vals, &cap_v, o->n + 1, sizeof *o->vals)) {
        free(k);
        free(v);
        loom__opts_free(o);
        return loom__fail(LOOM_ENOMEM, "out of memory parsing options");
      }
      o->cap = cap_k;
      o->keys[o->n] = k;
      o->vals[o->n++] = v;
    }
    p = *end ? end + 1 : end;
  }
  return LOOM_OK;
}

/* The session options the core reads (session.c, ring.c, trigger.c,
 * salvage.c, fork.c); "meta.K" and a backend's "<name>.K" have a dot. */
static const char *const core_keys[] = {
    "buffer_size", "memory_cap", "backend_memory_cap", "test_clock_shift", "mode", "ring_size",
    "slow_step", "slow_step_warmup", "slow_range", "dump_cooldown", "start_step", "steps",
    "delay", "duration", "wait", "warmup", "active", "repeat", "skip_first", "windows",
    "on_demand", "output", "process_name"};

loom_status loom__opts_check(const loom__opts *o, loom__backend_opt_fn backend_known) {
  for (size_t i = 0; i < o->n; i++) {
    const char *k = o->keys[i];
    if (strchr(k, '.')) {
      if (k[0] == '.' || k[strlen(k) - 1] == '.')
        return loom__fail(LOOM_EINVAL, "bad option name '%s': expected NAME or BACKEND.NAME", k);
      char known[512];
      if (strncmp(k, "meta.", 5) && !backend_known(k, known, sizeof known))
        return loom__fail(LOOM_EINVAL, "unknown option '%s': backend %.*s reads %s", k,
                          (int)(strchr(k, '.') - k), k, known);
      continue; /* meta.K, or a backend's option: read by that backend */
    }
    size_t j = 0, nk = sizeof core_keys / sizeof core_keys[0];
    while (j < nk && strcmp(core_keys[j], k)) j++;
    if (j == nk) {
      char known[512];
      size_t l = 0;
      for (j = 0; j < nk && l < sizeof known; j++)
        l += (size_t)snprintf(known + l, sizeof known - l, "%s%s", j ? ", " : "", core_keys[j]);
      return loom__fail(LOOM_EINVAL, "unknown session option '%s' (loom's are: %s; meta.KEY adds "
                        "trace metadata; a backend's options take its name first, e.g. "
                        "perf.frequency)", k, known);
    }
  }
  return LOOM_OK;
}

const char *loom__opts_get(const loom__opts *o, const char *key) {
  if (!key) return NULL;
  for (size_t i = o ? o->n : 0; i-- > 0;)
    if (!strcmp(o->keys[i], key)) return o->vals[i];
  char env[128] = "LOOM_";
  size_t j = 5;
  for (const char *k = key; *k && j + 1 < sizeof env; k++)
    env[j++] = (*k == '.' || *k == '-') ? '_' : (char)toupper((unsigned char)*k);
  env[j] = 0;
  return getenv(env);
}

int loom__parse_size(const char *s, uint64_t *out) {
  /* digits first: strtoull would take "-1" as 2^64 - 1 and skip blanks */
  if (!s || !isdigit((unsigned char)*s)) return -1;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno) return -1; /* past 64 bits */
  uint64_t mul = 1;
  switch (tolower((unsigned char)*end)) {
  case 0: break;
  case 'k': mul = 1ull << 10; end++; break;
  case 'm': mul = 1ull << 20; end++; break;
  case 'g': mul = 1ull << 30; end++; break;
  default: return -1;
  }
  if (*end == 'b' || *end == 'B') end++;
  if (*end) return -1;
  if (v > UINT64_MAX / mul) return -1;
  *out = v * mul;
  return 0;
}
