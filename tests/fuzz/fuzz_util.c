/*
 * fuzz_util.c - helpers of the fuzz targets (fuzz.h).  One temporary
 * folder per process, under $TMPDIR (or /dev/shm, /tmp), removed at exit.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <loom/loom.h>

#include "trace/trace.h"

#include "fuzz.h"

static char dir[256];

_Noreturn void loom_fuzz_fail(const char *file, int line, const char *cond, const char *fmt,
                              ...) {
  va_list ap;
  fprintf(stderr, "%s:%d: fuzz check failed: %s: ", file, line, cond);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, " (loom_last_error: %s)\n", loom_last_error());
  abort();
}

static void cleanup(void) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  char p[512];
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') {
      snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
      unlink(p);
    }
  closedir(d);
  rmdir(dir);
}

const char *loom_fuzz_path(const char *name) {
  static char p[512];
  if (!dir[0]) {
    const char *t = getenv("TMPDIR");
    if (!t || !*t) t = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(dir, sizeof dir, "%s/loom-fuzz-XXXXXX", t);
    if (!mkdtemp(dir)) {
      perror("loom fuzz: mkdtemp");
      abort();
    }
    atexit(cleanup);
  }
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return p;
}

const char *loom_fuzz_file(const char *name, const void *data, size_t size) {
  const char *p = loom_fuzz_path(name);
  FILE *f = fopen(p, "wb");
  if (!f) return NULL;
  size_t w = size ? fwrite(data, 1, size, f) : 0;
  if (fclose(f) != 0 || w != size) return NULL;
  return p;
}

char *loom_fuzz_str(const uint8_t *data, size_t size) {
  char *s = malloc(size + 1);
  if (!s) abort();
  if (size) memcpy(s, data, size);
  s[size] = 0;
  return s;
}

long loom_fuzz_count(const char *path) {
  loom_trace *t = NULL;
  if (loom_trace_load(path, &t) != LOOM_OK) return -1;
  long n = (long)loom_trace_event_count(t);
  loom_trace_free(t);
  return n;
}

/* Events as a pftrace holds them, counted the same way on both sides: a
 * counter event of numbers only is one value per series (Perfetto's
 * counters are numbers, one track a series; the reader joins the series of
 * one time back into one event); a counter with a string series or no
 * value, whose series repeat a key, or that the reader would join to the
 * one before is one marked instant (fuzz_merge checks exact event counts). */
static size_t pftrace_events(const loom_trace *t) {
  size_t n = 0;
  for (size_t i = 0; i < t->nev; i++) {
    const loom__ev *e = &t->ev[i];
    size_t num = 0;
    for (unsigned k = 0; e->ph == LOOM__PH_COUNTER && k < e->nargs; k++)
      num += t->args[e->args_off + k].type != LOOM_ARG_STRING;
    n += e->ph == LOOM__PH_COUNTER && e->nargs && num == e->nargs ? num : 1;
  }
  return n;
}

static void reload(const loom_trace *t, const char *name) {
  char path[512];
  int pf = strstr(name, ".pftrace") != NULL;
  snprintf(path, sizeof path, "%s", loom_fuzz_path(name));
  FUZZ_CHECK(loom_trace_save(t, path) == LOOM_OK, "saving a trace that loaded as %s", name);
  loom_trace *u = NULL;
  FUZZ_CHECK(loom_trace_load(path, &u) == LOOM_OK, "loading what loom saved as %s", name);
  size_t a = pf ? pftrace_events(t) : loom_trace_event_count(t);
  size_t b = pf ? pftrace_events(u) : loom_trace_event_count(u);
  FUZZ_CHECK(a == b, "%zu events loaded, %zu after saving as %s and loading again", a, b, name);
  a = loom_trace_flow_count(t), b = loom_trace_flow_count(u);
  FUZZ_CHECK(a == b, "%zu flows loaded, %zu after saving as %s and loading again", a, b, name);
  loom_trace_free(u);
  unlink(path);
}

/* every event, flow and warning readable */
void loom_fuzz_check_events(const void *trace) {
  const loom_trace *t = trace;
  size_t n = loom_trace_event_count(t);
  for (size_t i = 0; i < n; i++) {
    loom_event_view v = {.struct_size = sizeof v};
    FUZZ_CHECK(loom_trace_event(t, i, &v) == LOOM_OK, "event %zu of %zu", i, n);
    FUZZ_CHECK(v.name && v.category, "event %zu has no name or category", i);
    (void)strlen(v.name), (void)strlen(v.category);
  }
  for (size_t i = 0; i < loom_trace_flow_count(t); i++) {
    size_t a, b;
    FUZZ_CHECK(loom_trace_flow(t, i, &a, &b) == LOOM_OK && a < n && b < n,
               "flow %zu links events %zu and %zu of %zu", i, a, b, n);
  }
  for (size_t i = 0; i < loom_trace_warning_count(t); i++)
    FUZZ_CHECK(loom_trace_warning(t, i), "warning %zu is NULL", i);
}

void loom_fuzz_round_trip(const void *trace) {
  const loom_trace *t = trace;
  reload(t, "again.json");
  reload(t, "again.pftrace");
}

size_t loom_fuzz_split(const uint8_t *data, size_t size, const uint8_t **part, size_t *len,
                       size_t max) {
  const size_t sl = sizeof LOOM_FUZZ_SEP - 1;
  size_t k = 0;
  while (k + 1 < max) {
    const uint8_t *s = size >= sl ? memmem(data, size, LOOM_FUZZ_SEP, sl) : NULL;
    if (!s) break;
    part[k] = data, len[k++] = (size_t)(s - data);
    size -= (size_t)(s - data) + sl, data = s + sl;
  }
  part[k] = data, len[k++] = size;
  return k;
}

char *loom_fuzz_read(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, len = 0, k;
  char *b = malloc(cap + 1);
  while (b && (k = fread(b + len, 1, cap - len, f)) > 0)
    if ((len += k) == cap) b = realloc(b, (cap *= 2) + 1);
  fclose(f);
  if (!b) abort();
  b[len] = 0;
  *n = len;
  return b;
}
