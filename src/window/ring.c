/*
 * ring.c - flight-recorder mode (session option mode=ring, `loom record
 * --ring SIZE`): the session keeps only the most recent records, within a
 * budget, and a dump writes the window the rings hold while recording goes
 * on; the slow-step trigger dumps the ring when a step takes k times the
 * running median.
 *
 * The rings themselves live where the records are written: hostrec.c (each
 * thread recycles its own oldest chunk, no lock on the hot path) and host.c
 * (a backend's records, under the lock its emit takes anyway, drop their
 * oldest quarter when the backend's ring is full).  This file holds the
 * options, the serialization of dumps with the session's stop (mu), and the
 * step watch (step_mu).  Dumps triggered by a slow step are built and written by a
 * thread of their own, so the program's thread only pays for noticing.
 */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "record/record.h"
#include "window/trigger.h"
#include "window/window.h"

/* mu: held through a dump and while the session's stop takes live away, so
 * a dump never runs into a collection or a freed session. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static loom_session *live;

/* Dumps started and not yet done: the session's end waits for them, so a
 * slow step noticed just before the program stops is still written. */
static pthread_mutex_t pend_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pend_cv = PTHREAD_COND_INITIALIZER;
static int pending;

/* What the recorder tells ring mode (record.h): steps and watched ranges. */
static void slow_step_check(uint64_t no, uint64_t ts);
static void slow_range_check(const char *name, uint64_t begin, uint64_t end);
static const loom__ring_hooks ring_hooks = {slow_step_check, slow_range_check};

static void pending_add(int d) {
  pthread_mutex_lock(&pend_mu);
  pending += d;
  if (!pending) pthread_cond_broadcast(&pend_cv);
  pthread_mutex_unlock(&pend_mu);
}

/* The child of a fork has none of the parent's dump threads. */
void loom__ring_forked(void) { pending = 0; }

/* The step watch, under its own lock: a step never waits for a dump. */
static pthread_mutex_t step_mu = PTHREAD_MUTEX_INITIALIZER;
static loom_session *watched;
#define WIN 64
static struct {
  double k;            /* slow_step: 0 = off */
  uint64_t warmup;     /* steps measured before it arms */
  int64_t cooldown_ns; /* dump_cooldown */
  int64_t last_ts;     /* the previous step's start (epoch ns) */
  uint64_t last_no;
  int have_last;
  int64_t dur[WIN];    /* the last WIN step durations */
  uint64_t ndur;
  int64_t last_dump;   /* epoch ns of the last slow-step or range dump; 0 none */
  char *range;         /* slow_range: the watched range's name (NULL: none) */
  int64_t range_ns;    /* and its threshold */
} w;

static const char *opt(loom_session *s, const char *key) { return loom__opts_get(&s->opts, key); }

static loom_status bad(const char *key, const char *v, const char *want) {
  return loom__fail(LOOM_EINVAL, "option %s='%s': expected %s", key, v, want);
}

static int parse_double(const char *v, double *out) {
  char *e;
  *out = strtod(v, &e);
  return e == v || *e || !isfinite(*out); /* "nan" and "inf" are not values here */
}

/* slow_range=NAME:MS (the last ':' separates them). */
static loom_status slow_range(const char *v) {
  const char *colon = strrchr(v, ':');
  double ms;
  if (!colon || colon == v || parse_double(colon + 1, &ms) || !(ms > 0) || ms > 1e12)
    return bad("slow_range", v, "NAME:MS, a range name and a duration in ms above 0 (a "
                                "range of that name lasting longer dumps the ring)");
  if (!(w.range = loom__strdup(v))) return loom__fail(LOOM_ENOMEM, "out of memory");
  w.range[colon - v] = 0;
  w.range_ns = (int64_t)(ms * 1e6);
  return LOOM_OK;
}

static loom_status configure(loom_session *s) {
  const char *v = opt(s, "mode");
  if (v && strcmp(v, "ring") && strcmp(v, "normal"))
    return bad("mode", v, "'ring' (flight recorder) or 'normal'");
  s->ring = v && !strcmp(v, "ring");
  const char *slow = opt(s, "slow_step");
  static const char *const ring_only[] = {"ring_size", "slow_step", "slow_step_warmup",
                                          "dump_cooldown", "slow_range"};
  for (size_t i = 0; !s->ring && i < sizeof ring_only / sizeof *ring_only; i++)
    if ((v = opt(s, ring_only[i])))
      return loom__fail(LOOM_EINVAL, "option %s='%s' needs mode=ring (loom record --ring SIZE)",
                        ring_only[i], v);
  free(w.range);
  memset(&w, 0, sizeof w);
  if (!s->ring) return LOOM_OK;
  /* The budget: ring_size, else memory_cap given explicitly (not a default
   * cap), else 64 MiB. */
  s->ring_bytes = opt(s, "memory_cap") && s->cap_bytes ? s->cap_bytes : 64ull << 20;
  if ((v = opt(s, "ring_size")) && (loom__parse_size(v, &s->ring_bytes) || s->ring_bytes < 2048))
    return bad("ring_size", v, "a size of at least 2k (suffix k, m or g allowed)");
  s->ring_bk_bytes = opt(s, "backend_memory_cap") ? s->bk_cap : s->ring_bytes;
  if (!opt(s, "buffer_size")) { /* chunks small enough for a ring of 16 */
    uint64_t c = s->ring_bytes / 16;
    s->chunk_bytes = c < 1024 ? 1024 : c > 256 * 1024 ? 256 * 1024 : c;
  }
  w.warmup = 10;
  w.cooldown_ns = 60ll * 1000000000ll;
  if (slow && (parse_double(slow, &w.k) || !(w.k > 1)))
    return bad("slow_step", slow, "a factor above 1 (a step that many times slower than "
                                  "the running median dumps the ring)");
  if ((v = opt(s, "slow_step_warmup"))) {
    double d;
    if (parse_double(v, &d) || !(d >= 1 && d <= 1e9) || d != (double)(uint64_t)d)
      return bad("slow_step_warmup", v, "a whole number of steps of at least 1");
    w.warmup = (uint64_t)d;
  }
  if ((v = opt(s, "dump_cooldown"))) {
    double d;
    if (parse_double(v, &d) || !(d >= 0 && d <= 1e9))
      return bad("dump_cooldown", v, "seconds (0 or more) between two slow-step dumps");
    w.cooldown_ns = (int64_t)(d * 1e9);
  }
  if ((v = opt(s, "slow_range"))) return slow_range(v);
  return LOOM_OK;
}

loom_status loom__ring_configure(loom_session *s) {
  pthread_mutex_lock(&step_mu); /* the step watch's settings */
  loom_status st = configure(s);
  pthread_mutex_unlock(&step_mu);
  return st;
}

void loom__ring_begin(loom_session *s) {
  loom__hostrec_set_ring(s->ring ? &ring_hooks : NULL);
  pthread_mutex_lock(&step_mu);
  loom__hostrec_watch_range(s->ring ? w.range : NULL);
  pthread_mutex_unlock(&step_mu);
  pthread_mutex_lock(&mu);
  live = s->ring ? s : NULL;
  pthread_mutex_unlock(&mu);
  pthread_mutex_lock(&step_mu);
  watched = s->ring ? s : NULL;
  pthread_mutex_unlock(&step_mu);
}

void loom__ring_end(loom_session *s) {
  (void)s;
  pthread_mutex_lock(&step_mu);
  watched = NULL;
  pthread_mutex_unlock(&step_mu);
  pthread_mutex_lock(&pend_mu); /* no dump starts now: wait for those started */
  while (pending) pthread_cond_wait(&pend_cv, &pend_mu);
  pthread_mutex_unlock(&pend_mu);
  pthread_mutex_lock(&mu); /* waits for a dump under way */
  live = NULL;
  pthread_mutex_unlock(&mu);
}

int loom__ring_active(void) {
  pthread_mutex_lock(&mu);
  int on = live != NULL;
  pthread_mutex_unlock(&mu);
  return on;
}

loom_trace *loom__ring_dump(const char *reason) {
  loom_trace *t = NULL;
  pthread_mutex_lock(&mu);
  if (!live) loom__fail(LOOM_ESTATE, "no session records in ring mode (mode=ring)");
  else if (loom__session_collect_dump(live, reason, &t) != LOOM_OK) t = NULL;
  pthread_mutex_unlock(&mu);
  return t;
}

LOOM_EXTERN loom_status loom_session_dump(loom_session *s, const char *reason, loom_trace **out) {
  loom__clear_error();
  if (out) *out = NULL;
  if (!s || !out) return loom__fail(LOOM_EINVAL, "loom_session_dump: NULL session or out");
  if (s->state != LOOM__S_RECORDING)
    return loom__fail(LOOM_ESTATE, "loom_session_dump: the session is not recording");
  if (!s->ring)
    return loom__fail(LOOM_ESTATE, "loom_session_dump: the session does not record in ring "
                      "mode (option mode=ring)");
  *out = loom__ring_dump(reason ? reason : "loom_session_dump");
  return *out ? LOOM_OK : LOOM_ENOMEM;
}

/* ---- the slow-step trigger ---------------------------------------------- */
/* The dump goes where windows go (trigger.c): the done function the
 * preload set, else a file named from the session's output pattern with
 * -<seq> before its extension. */
typedef struct dump_job {
  char reason[256];
} dump_job;

/* Handed over under mu, so that the session (its output pattern) cannot
 * end before the dump is written. */
static void *dump_thread(void *arg) {
  dump_job *j = arg;
  pthread_mutex_lock(&mu);
  loom_trace *t = NULL;
  if (live && loom__session_collect_dump(live, j->reason, &t) == LOOM_OK) {
    loom__log(LOOM_SEV_WARNING, "ring dump: %s", j->reason);
    loom__trigger_write(t, NULL, j->reason); /* takes t */
  } else if (live) {
    loom__log(LOOM_SEV_ERROR, "ring dump (%s) failed: %s", j->reason, loom_last_error());
  }
  pthread_mutex_unlock(&mu);
  free(j);
  pending_add(-1);
  return NULL;
}

static void start_dump(const char *reason) {
  dump_job *j = calloc(1, sizeof *j);
  if (!j) {
    loom__log(LOOM_SEV_ERROR, "ring dump (%s) not written: out of memory", reason);
    return;
  }
  snprintf(j->reason, sizeof j->reason, "%s", reason);
  pending_add(1);
  if (loom__thread_start(NULL, dump_thread, j) != 0) {
    loom__log(LOOM_SEV_ERROR, "ring dump (%s) not written: cannot start its thread", reason);
    free(j);
    pending_add(-1);
  }
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

static int64_t median(void) {
  size_t n = w.ndur < WIN ? (size_t)w.ndur : WIN;
  int64_t v[WIN];
  memcpy(v, w.dur, n * sizeof *v);
  qsort(v, n, sizeof *v, cmp_i64);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Step `no` begins at ts (host ticks): the step before it just ended.  Once
 * warmup steps were measured, one longer than k times the median of the
 * last WIN dumps the ring (with that step inside: its end is this step's
 * begin, already recorded), at most once per cooldown. */
static void slow_step_check(uint64_t no, uint64_t ts) {
  pthread_mutex_lock(&step_mu);
  if (!watched || !(w.k > 1)) {
    pthread_mutex_unlock(&step_mu);
    return;
  }
  int64_t now = loom__timeline_convert(&watched->tl, loom__hostrec_domain(), ts);
  if (w.have_last) {
    int64_t d = now - w.last_ts;
    if (w.ndur >= w.warmup) {
      int64_t m = median();
      if (m > 0 && (double)d > w.k * (double)m &&
          (!w.last_dump || now - w.last_dump >= w.cooldown_ns)) {
        char reason[256];
        snprintf(reason, sizeof reason, "slow step: ProfilerStep#%llu took %.3f ms, %.1f times "
                 "the median %.3f ms of the last %llu steps (slow_step=%g)",
                 (unsigned long long)w.last_no, (double)d * 1e-6, (double)d / (double)m,
                 (double)m * 1e-6, (unsigned long long)(w.ndur < WIN ? w.ndur : WIN), w.k);
        w.last_dump = now;
        start_dump(reason);
      }
    }
    w.dur[w.ndur % WIN] = d;
    w.ndur++;
  }
  w.last_ts = now;
  w.last_no = no;
  w.have_last = 1;
  pthread_mutex_unlock(&step_mu);
}

/* A watched range (slow_range) ended on some thread: one longer than the
 * threshold dumps the ring, within the same cooldown as slow steps. */
static void slow_range_check(const char *name, uint64_t begin, uint64_t end) {
  pthread_mutex_lock(&step_mu);
  if (watched && w.range) {
    loom_clock_domain d = loom__hostrec_domain();
    int64_t b = loom__timeline_convert(&watched->tl, d, begin);
    int64_t e = loom__timeline_convert(&watched->tl, d, end);
    if (e - b > w.range_ns && (!w.last_dump || e - w.last_dump >= w.cooldown_ns)) {
      char reason[256];
      snprintf(reason, sizeof reason, "slow range: '%s' took %.3f ms, over slow_range's %.3f ms",
               name ? name : "", (double)(e - b) * 1e-6, (double)w.range_ns * 1e-6);
      w.last_dump = e;
      start_dump(reason);
    }
  }
  pthread_mutex_unlock(&step_mu);
}
