/*
 * error.c - status strings, per-thread error details, logging and the list of
 * warnings raised outside a session (kept for the next session's trace).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/base.h"
#include "util/util.h"

static __thread char last_error[512];

const char *loom_strerror(loom_status st) {
  switch (st) {
  case LOOM_OK: return "success";
  case LOOM_EINVAL: return "invalid argument";
  case LOOM_ENOMEM: return "out of memory";
  case LOOM_ESTATE: return "call not valid in the current state";
  case LOOM_EABI: return "ABI version mismatch";
  case LOOM_ENOTFOUND: return "not found";
  case LOOM_EIO: return "input/output error";
  case LOOM_EBACKEND: return "backend failure";
  case LOOM_EUNSUPPORTED: return "not supported";
  case LOOM_EBUSY: return "another session is recording";
  case LOOM_EFORMAT: return "malformed input";
  }
  return "unknown status";
}

const char *loom_last_error(void) { return last_error; }

void loom__clear_error(void) { last_error[0] = 0; }

loom_status loom__fail(loom_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  return st;
}

static int log_threshold(void) {
  static int level = -1;
  int l = __atomic_load_n(&level, __ATOMIC_RELAXED);
  if (l >= 0) return l;
  const char *e = getenv("LOOM_LOG");
  l = LOOM_SEV_WARNING;
  if (e) {
    if (!strcasecmp(e, "debug")) l = LOOM_SEV_DEBUG;
    else if (!strcasecmp(e, "info")) l = LOOM_SEV_INFO;
    else if (!strcasecmp(e, "error")) l = LOOM_SEV_ERROR;
    else if (!strcasecmp(e, "quiet")) l = LOOM_SEV_ERROR + 1;
  }
  __atomic_store_n(&level, l, __ATOMIC_RELAXED);
  return l;
}

void loom__vlog(loom_severity sev, const char *fmt, va_list ap) {
  if ((int)sev < log_threshold()) return;
  static const char *names[] = {"debug", "info", "warning", "error"};
  char buf[1024];
  vsnprintf(buf, sizeof buf, fmt, ap);
  /* One write per line so lines of concurrent threads do not interleave. */
  fprintf(stderr, "loom: %s: %s\n", names[sev <= LOOM_SEV_ERROR ? sev : 3], buf);
}

void loom__log(loom_severity sev, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  loom__vlog(sev, fmt, ap);
  va_end(ap);
}

void loom__msgs_vadd(loom__msgs *m, size_t max, loom_severity sev,
                     const char *fmt, va_list ap) {
  char *msg = loom__vasprintf(fmt, ap);
  if (!msg) return;
  loom__log(sev, "%s", msg);
  pthread_mutex_lock(&m->mu);
  if (m->n >= max || LOOM__PUSH(m->v, m->n, m->cap, msg) != 0) free(msg);
  pthread_mutex_unlock(&m->mu);
}

void loom__msgs_free(loom__msgs *m) {
  for (size_t i = 0; i < m->n; i++) free(m->v[i]);
  free(m->v);
  m->v = NULL;
  m->n = m->cap = 0;
}

static loom__msgs pending = {.mu = PTHREAD_MUTEX_INITIALIZER};

void loom__warn_pending(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  loom__msgs_vadd(&pending, 1024, LOOM_SEV_WARNING, fmt, ap);
  va_end(ap);
}

char **loom__take_pending(size_t *n) {
  pthread_mutex_lock(&pending.mu);
  char **p = pending.v;
  *n = pending.n;
  pending.v = NULL;
  pending.n = pending.cap = 0;
  pthread_mutex_unlock(&pending.mu);
  return p;
}
