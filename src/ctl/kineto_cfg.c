/*
 * kineto_cfg.c - Kineto's on-demand configuration keys read into a loom
 * trigger request (see kineto_cfg.h for the keys and their meaning).
 *
 * Kineto's own parser throws on a bad value and quietly ignores keys it
 * does not know; here a bad value is an error that names the key and the
 * value, and every key loom does not act on is a warning that names it, so
 * nothing a dynolog-style request asked for is dropped without a word.
 */
#include "kineto_cfg.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom/loom.h"

/* Kineto's activity types (libkineto/include/ActivityType.h, every name its
 * toActivityType accepts, in its order) and the loom record kinds that hold
 * the same work; 0: loom records no such thing. */
static const struct {
  const char *name;
  unsigned kinds;
} activity_types[] = {
    {"cpu_op", LOOM_KIND_BIT(LOOM_KIND_CPU_OP)},
    {"user_annotation", LOOM_KIND_BIT(LOOM_KIND_USER_RANGE)},
    {"gpu_user_annotation", LOOM_KIND_BIT(LOOM_KIND_USER_RANGE)},
    {"gpu_memcpy", LOOM_KIND_BIT(LOOM_KIND_MEMCPY)},
    {"gpu_memset", LOOM_KIND_BIT(LOOM_KIND_MEMSET)},
    {"kernel", LOOM_KIND_BIT(LOOM_KIND_KERNEL)},
    {"external_correlation", 0}, /* loom links them always: nothing to select */
    {"cuda_runtime", LOOM_KIND_BIT(LOOM_KIND_RUNTIME)},
    {"cuda_driver", LOOM_KIND_BIT(LOOM_KIND_DRIVER)},
    /* PyTorch writes its [memory] events (profile_memory) as cpu_instant_event */
    {"cpu_instant_event", LOOM_KIND_BIT(LOOM_KIND_INSTANT) | LOOM_KIND_BIT(LOOM_KIND_MEMORY)},
    {"python_function", 0},
    {"overhead", LOOM_KIND_BIT(LOOM_KIND_OVERHEAD)},
    {"mtia_runtime", LOOM_KIND_BIT(LOOM_KIND_RUNTIME)},
    {"mtia_ccp_events", 0},
    {"mtia_insight", 0},
    {"cuda_sync", LOOM_KIND_BIT(LOOM_KIND_SYNC)},
    {"cuda_event", LOOM_KIND_BIT(LOOM_KIND_SYNC)},
    {"mtia_counters", LOOM_KIND_BIT(LOOM_KIND_COUNTER)},
    {"glow_runtime", LOOM_KIND_BIT(LOOM_KIND_RUNTIME)},
    {"cuda_profiler_range", 0},
    {"hpu_op", LOOM_KIND_BIT(LOOM_KIND_CPU_OP)},
    {"xpu_runtime", LOOM_KIND_BIT(LOOM_KIND_RUNTIME)},
    {"xpu_driver", LOOM_KIND_BIT(LOOM_KIND_DRIVER)},
    {"collective_comm", LOOM_KIND_BIT(LOOM_KIND_COLLECTIVE)},
    {"privateuse1_runtime", LOOM_KIND_BIT(LOOM_KIND_RUNTIME)},
    {"privateuse1_driver", LOOM_KIND_BIT(LOOM_KIND_DRIVER)},
    {"xpu_scope_profiler", 0},
    {"xpu_sync", LOOM_KIND_BIT(LOOM_KIND_SYNC)},
    {"hardware_counters", LOOM_KIND_BIT(LOOM_KIND_COUNTER)},
};

/* Keys Kineto knows that ask for nothing a loom window does. */
static const char *const inert_keys[] = {
    "ACTIVITIES_ENABLED", "ACTIVITIES_WARMUP_PERIOD_SECS", "ACTIVITIES_MAX_GPU_BUFFER_SIZE_MB",
    "VERBOSE_LOG_LEVEL", "VERBOSE_LOG_MODULES", "ENABLE_IPC_FABRIC", "ENABLE_SIGUSR2",
    "REQUEST_TRACE_ID", "REQUEST_GROUP_TRACE_ID", "PROFILE_START_TIME", "REQUEST_TIMESTAMP",
    "CLIENT_INTERFACE_ENABLE_OP_INPUTS_COLLECTION", "PYTHON_STACK_TRACE",
    "PROFILE_REPORT_INPUT_SHAPES", "PROFILE_PROFILE_MEMORY", "PROFILE_WITH_STACK",
    "PROFILE_WITH_FLOPS", "PROFILE_WITH_MODULES"};

typedef struct parse_ctx {
  loom__ondemand *r;
  loom__cfg_warn_fn warn;
  void *ud;
  char *err;
  size_t nerr;
  int has_duration, has_steps, has_start, has_roundup;
} parse_ctx;

static void warnf(parse_ctx *c, const char *fmt, ...) {
  if (!c->warn) return;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  c->warn(msg, c->ud);
}

static int fail(parse_ctx *c, const char *key, const char *val, const char *why) {
  snprintf(c->err, c->nerr, "%s=%s: %s", key, val, why);
  return -1;
}

void loom__ondemand_init(loom__ondemand *r) {
  memset(r, 0, sizeof *r);
  r->start_step = -1;
}

/* A whole number in [lo, INT32_MAX] (Kineto reads them as int32). */
static int whole(parse_ctx *c, const char *key, const char *val, long long lo, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(val, &end, 10);
  if (!*val || *end || errno) return fail(c, key, val, "not a whole number");
  if (v < lo || v > 2147483647LL) {
    char why[64];
    snprintf(why, sizeof why, "out of range (%lld to 2147483647)", lo);
    return fail(c, key, val, why);
  }
  *out = v;
  return 0;
}

static int activity_types_value(parse_ctx *c, const char *val) {
  unsigned kinds = 0;
  const char *p = val;
  while (*p) {
    size_t n = strcspn(p, ",");
    char word[64];
    while (n && isspace((unsigned char)*p)) p++, n--;
    size_t m = n;
    while (m && isspace((unsigned char)p[m - 1])) m--;
    if (m >= sizeof word) return fail(c, "ACTIVITY_TYPES", val, "an activity type is too long");
    for (size_t i = 0; i < m; i++) word[i] = (char)tolower((unsigned char)p[i]);
    word[m] = 0;
    if (m) {
      size_t k = 0, nt = sizeof activity_types / sizeof activity_types[0];
      while (k < nt && strcmp(activity_types[k].name, word)) k++;
      if (k == nt) {
        char why[128];
        snprintf(why, sizeof why, "'%s' is not a Kineto activity type", word);
        return fail(c, "ACTIVITY_TYPES", val, why);
      }
      if (!activity_types[k].kinds && strcmp(word, "external_correlation")) /* always linked */
        warnf(c, "ACTIVITY_TYPES: '%s' has no loom record kind (nothing recorded for it)", word);
      kinds |= activity_types[k].kinds;
    }
    p += n;
    if (*p == ',') p++;
  }
  c->r->kinds = kinds ? kinds : c->r->kinds;
  return 0;
}

static int one_key(parse_ctx *c, const char *key, const char *val) {
  loom__ondemand *r = c->r;
  int64_t v;
  if (!strcmp(key, "ACTIVITIES_DURATION_MSECS") || !strcmp(key, "ACTIVITIES_DURATION_SECS")) {
    if (whole(c, key, val, 1, &v)) return -1;
    r->duration_ns = v * (key[20] == 'M' ? 1000000LL : 1000000000LL);
    c->has_duration = 1;
  } else if (!strcmp(key, "ACTIVITIES_ITERATIONS")) {
    if (whole(c, key, val, 1, &v)) return -1;
    r->steps = v;
    c->has_steps = 1;
  } else if (!strcmp(key, "PROFILE_START_ITERATION")) {
    if (whole(c, key, val, -1, &v)) return -1;
    r->start_step = v;
    c->has_start = v >= 0;
  } else if (!strcmp(key, "PROFILE_START_ITERATION_ROUNDUP")) {
    if (whole(c, key, val, 0, &v)) return -1;
    if (!v)
      warnf(c, "PROFILE_START_ITERATION_ROUNDUP=0: no effect (Kineto's rule: it must be >= 1)");
    r->roundup = v;
    c->has_roundup = v > 0;
  } else if (!strcmp(key, "ACTIVITIES_WARMUP_ITERATIONS")) {
    if (whole(c, key, val, 0, &v)) return -1;
    r->warmup = v;
  } else if (!strcmp(key, "ACTIVITIES_LOG_FILE")) {
    if (!*val) return fail(c, key, val, "empty file name");
    if (strlen(val) >= sizeof r->out) return fail(c, key, "...", "file name too long");
    snprintf(r->out, sizeof r->out, "%s", val);
  } else if (!strcmp(key, "ACTIVITY_TYPES")) {
    return activity_types_value(c, val);
  } else {
    for (size_t i = 0; i < sizeof inert_keys / sizeof inert_keys[0]; i++)
      if (!strcmp(key, inert_keys[i])) {
        warnf(c, "%s: a Kineto key loom does not use (ignored)", key);
        return 0;
      }
    warnf(c, "%s: unknown key (ignored; loom reads ACTIVITIES_DURATION_MSECS, "
             "ACTIVITIES_ITERATIONS, PROFILE_START_ITERATION, PROFILE_START_ITERATION_ROUNDUP, "
             "ACTIVITIES_WARMUP_ITERATIONS, ACTIVITIES_LOG_FILE, ACTIVITY_TYPES)", key);
  }
  return 0;
}

static char *trim(char *s) {
  while (isspace((unsigned char)*s)) s++;
  size_t n = strlen(s);
  while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
  return s;
}

/* One line (already cut out, writable). */
static int one_line(parse_ctx *c, char *line, int no) {
  char *hash = strchr(line, '#');
  if (hash) *hash = 0;
  char *s = trim(line);
  if (!*s) return 0;
  char *eq = strchr(s, '=');
  if (!eq) {
    snprintf(c->err, c->nerr, "line %d '%.200s': not KEY=VALUE", no, s);
    return -1;
  }
  *eq = 0;
  char *key = trim(s), *val = trim(eq + 1);
  if (!*key) {
    snprintf(c->err, c->nerr, "line %d '=%.200s': no key", no, val);
    return -1;
  }
  return one_key(c, key, val);
}

/* Kineto's rules once every key is read. */
static void resolve(parse_ctx *c) {
  loom__ondemand *r = c->r;
  if (c->has_roundup && !c->has_start) r->start_step = 0, c->has_start = 1;
  if (c->has_steps) {
    if (c->has_duration)
      warnf(c, "ACTIVITIES_DURATION_MSECS: ignored, the step window "
               "(ACTIVITIES_ITERATIONS) comes first, as in Kineto");
    r->duration_ns = 0;
    if (!c->has_start) r->start_step = -1; /* the next step */
    return;
  }
  if (c->has_start || c->has_roundup)
    warnf(c, "PROFILE_START_ITERATION%s: no effect without ACTIVITIES_ITERATIONS "
             "(a time window, as in Kineto)", c->has_roundup ? "_ROUNDUP" : "");
  r->start_step = -1;
  r->roundup = 0;
  if (!c->has_duration && !r->duration_ns) {
    r->duration_ns = 500 * 1000000LL;
    r->defaulted = 1;
  }
}

int loom__kineto_parse(const char *text, loom__ondemand *r, loom__cfg_warn_fn warn, void *ud,
                       char *err, size_t nerr) {
  parse_ctx c = {r, warn, ud, err, nerr, 0, 0, 0, 0};
  c.has_steps = r->steps > 0;
  c.has_duration = r->duration_ns > 0;
  c.has_start = r->start_step >= 0;
  c.has_roundup = r->roundup > 0;
  size_t n = strlen(text);
  char *buf = malloc(n + 1);
  if (!buf) {
    snprintf(err, nerr, "out of memory");
    return -1;
  }
  int no = 1, rc = 0;
  const char *p = text;
  while (*p && !rc) {
    size_t len = 0;
    while (p[len] && p[len] != '\n' && !(p[len] == '\\' && p[len + 1] == 'n')) len++;
    memcpy(buf, p, len);
    buf[len] = 0;
    rc = one_line(&c, buf, no++);
    p += len;
    if (*p == '\n') p++;
    else if (*p == '\\') p += 2;
  }
  free(buf);
  if (!rc) resolve(&c);
  return rc;
}

int loom__kineto_load(const char *arg, loom__ondemand *r, loom__cfg_warn_fn warn, void *ud,
                      char *err, size_t nerr) {
  FILE *f = strchr(arg, '=') ? NULL : fopen(arg, "r");
  if (!f) {
    if (!strchr(arg, '=')) {
      snprintf(err, nerr, "%s: %s (give a file or KEY=VALUE text)", arg,
               strerror(errno));
      return -1;
    }
    return loom__kineto_parse(arg, r, warn, ud, err, nerr);
  }
  char text[65536];
  size_t n = fread(text, 1, sizeof text - 1, f);
  int big = !feof(f);
  fclose(f);
  if (big) {
    snprintf(err, nerr, "%s: larger than %zu bytes", arg, sizeof text - 1);
    return -1;
  }
  text[n] = 0;
  return loom__kineto_parse(text, r, warn, ud, err, nerr);
}

int64_t loom__ondemand_start(const loom__ondemand *r, int64_t next) {
  if (r->start_step < 0) return -1;
  if (next <= r->start_step - r->warmup) return r->start_step;
  int64_t s = next + r->warmup;
  if (r->roundup > 0 && s % r->roundup) s += r->roundup - s % r->roundup;
  return s;
}
