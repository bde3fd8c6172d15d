/*
 * trigger.c - the window controller (trigger.h): which part of a session's
 * run is recorded, and where each part goes.
 *
 * A session in window mode (any of the options below) records nothing at
 * start: the controller begins a window (session.c starts the host records
 * and every backend) and ends it (stops and flushes them, builds the
 * window's trace, configures the backends again) when its condition is met:
 *   - a step window: steps start_step .. start_step+steps-1 (loom_step, or
 *     loom_step_mark from a framework's numbered steps);
 *   - a time window: after delay, for duration;
 *   - a schedule with torch.profiler.schedule's semantics: skip_first steps,
 *     then cycles of wait (nothing), warmup (recorded, discarded) and active
 *     (recorded, written) steps, repeat cycles (0: until the program ends);
 *   - a request from outside (loom__trigger_request: `loom trigger PID`).
 * Steps reach the controller while a session in window mode runs (the step
 * hook it sets in hostrec, read by loom_step and loom_step_mark only), and the
 * instrumentation calls never see it: recording is on (rec_on) only inside
 * a window.  Time conditions are served by one thread, started the
 * first time a window needs it.
 *
 * Beginning and ending a window run outside the controller's lock with
 * `busy` set (a window's end flushes the backends and writes a file); a step
 * that arrives meanwhile is not acted on, and the schedule, a function of
 * the step number, resumes at the next one.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"
#include "window/trigger.h"
#include "window/window.h"

enum { P_IDLE, P_ARMED, P_WARMUP, P_ON };
enum { A_NONE, A_WARMUP, A_RECORD };

typedef struct tcfg {
  int64_t start_step, steps, delay_ns, duration_ns;
  int64_t wait, warmup, active, repeat, skip_first;
  int sched, window;
  int serve;            /* on_demand=on: the session serves loom trigger */
  char *output;
} tcfg;

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;    /* timer thread; busy cleared */
  loom_session *s;      /* the started session in window mode */
  loom_session *owner;  /* the session cfg belongs to (created) */
  tcfg cfg;
  int phase, busy, sched;
  /* the one-shot window armed or recording */
  int64_t begin_at, end_at;   /* monotonic ns; 0: none */
  int64_t start_step, steps, first_step, duration_ns;
  int need_step;              /* begins at a step, once begin_at passed */
  int64_t cycle;              /* the schedule cycle being recorded */
  int64_t end_cycle;          /* the cycle a plan's end writes */
  char out[4096];             /* this window's pattern ("" the session's) */
  int multi;                  /* the session may write several windows */
  uint32_t kinds;             /* the one-shot window keeps these (0: all) */
  int serving;                /* this session started the control socket */
  char what[192];             /* the window, for the busy message */
  unsigned seq;
  int64_t next_step;          /* the next step to begin (loom trigger's Kineto rules) */
  int thread_on;
  loom_window_fn fn;
  void *ud;
  loom__window_written_fn written; /* told of a window written here */
} T = {.mu = PTHREAD_MUTEX_INITIALIZER};
static pthread_once_t cv_once = PTHREAD_ONCE_INIT;

static void init_cv(void) {
  pthread_condattr_t a;
  pthread_condattr_init(&a);
  pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  pthread_cond_init(&T.cv, &a);
  pthread_condattr_destroy(&a);
}

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- options --------------------------------------------------------------- */
static loom_status opt_steps(loom_session *s, const char *key, int64_t *v, int64_t dflt,
                             int *seen) {
  const char *x = loom__opts_get(&s->opts, key);
  *v = dflt;
  if (!x || !*x) return LOOM_OK;
  char *end;
  errno = 0;
  long long n = strtoll(x, &end, 10);
  if (end == x || *end || n < 0 || errno)
    return loom__fail(LOOM_EINVAL, "option %s='%s': expected a number of steps (0 or more)",
                      key, x);
  *v = n;
  *seen = 1;
  return LOOM_OK;
}

static loom_status opt_secs(loom_session *s, const char *key, int64_t *v, int *seen) {
  const char *x = loom__opts_get(&s->opts, key);
  *v = 0;
  if (!x || !*x) return LOOM_OK;
  char *end;
  double d = strtod(x, &end);
  if (end == x || *end || !(d >= 0) || d > 1e9)
    return loom__fail(LOOM_EINVAL, "option %s='%s': expected a number of seconds (0 or more)",
                      key, x);
  *v = (int64_t)(d * 1e9);
  *seen = 1;
  return LOOM_OK;
}

static loom_status read_cfg(loom_session *s, tcfg *c) {
  int step = 0, time = 0, sch = 0, dur = 0, n_steps = 0, rep = 0;
  loom_status st = opt_steps(s, "start_step", &c->start_step, -1, &step);
  if (!st) st = opt_steps(s, "steps", &c->steps, 0, &n_steps);
  if (!st) st = opt_secs(s, "delay", &c->delay_ns, &time);
  if (!st) st = opt_secs(s, "duration", &c->duration_ns, &dur);
  if (!st) st = opt_steps(s, "wait", &c->wait, 0, &sch);
  if (!st) st = opt_steps(s, "warmup", &c->warmup, 0, &sch);
  if (!st) st = opt_steps(s, "active", &c->active, 0, &sch);
  if (!st) st = opt_steps(s, "repeat", &c->repeat, 0, &rep);
  if (!st) st = opt_steps(s, "skip_first", &c->skip_first, 0, &sch);
  if (st) return st;
  if ((sch || rep) && !c->active)
    return loom__fail(LOOM_EINVAL, "options wait, warmup, repeat and skip_first make a "
                      "schedule: it needs active=N (N > 0 steps recorded per cycle)");
  if (sch || rep) {
    if (step || n_steps || time || dur)
      return loom__fail(LOOM_EINVAL, "a schedule (wait/warmup/active/repeat) cannot be "
                        "combined with start_step, steps, delay or duration");
    c->sched = 1;
  }
  if (n_steps && !c->steps)
    return loom__fail(LOOM_EINVAL, "option steps=0: a window needs at least one step");
  if (dur && !c->duration_ns)
    return loom__fail(LOOM_EINVAL, "option duration=0: a window needs a positive duration");
  if (step && !n_steps && !dur)
    return loom__fail(LOOM_EINVAL, "option start_step=%lld needs steps=K (or duration) to "
                      "say where the window ends", (long long)c->start_step);
  if (n_steps && time && !step)
    c->start_step = -1; /* after the delay, from the next step on */
  c->window = c->sched || step || n_steps || time || dur;
  return LOOM_OK;
}

/* An on/off option; *v 0 when absent. */
static int on_off(loom_session *s, const char *key, int *v) {
  const char *w = loom__opts_get(&s->opts, key);
  *v = w && (!strcmp(w, "on") || !strcmp(w, "1"));
  if (w && *w && !*v && strcmp(w, "off") && strcmp(w, "0")) {
    loom__fail(LOOM_EINVAL, "option %s='%s': expected on or off", key, w);
    return -1;
  }
  return 0;
}

loom_status loom__trigger_configure(loom_session *s) {
  pthread_once(&cv_once, init_cv);
  tcfg c = {0};
  loom_status st = read_cfg(s, &c);
  if (st) return st;
  int on_demand, serve;
  if (on_off(s, "windows", &on_demand) || on_off(s, "on_demand", &serve))
    return LOOM_EINVAL;
  if (s->ring && c.window)
    return loom__fail(LOOM_EINVAL, "option mode=ring (loom record --ring) keeps the most recent "
                      "records itself and cannot be combined with recording windows (start_step, "
                      "steps, delay, duration, wait/warmup/active); a trigger (on_demand=on, "
                      "loom trigger) dumps the ring");
  c.serve = serve;
  const char *o = loom__opts_get(&s->opts, "output");
  if (o && *o && !(c.output = loom__strdup(o))) return loom__fail(LOOM_ENOMEM, "out of memory");
  if (c.output) loom__percent_decode(c.output);
  /* on demand: record nothing until asked, except in ring mode, where a
   * trigger dumps what the ring holds */
  s->windows = c.window || ((on_demand || serve) && !s->ring);
  pthread_mutex_lock(&T.mu);
  free(T.cfg.output);
  T.cfg = c;
  T.owner = s;
  pthread_mutex_unlock(&T.mu);
  return LOOM_OK;
}

/* ---- output names ---------------------------------------------------------- */
static const char *ext_at(const char *p) {
  static const char *const exts[] = {".json.gz", ".pftrace.gz", ".pftrace", ".json", NULL};
  size_t n = strlen(p);
  for (int i = 0; exts[i]; i++) {
    size_t k = strlen(exts[i]);
    if (n > k && !strcmp(p + n - k, exts[i])) return p + n - k;
  }
  const char *dot = strrchr(p, '.'), *slash = strrchr(p, '/');
  return dot && (!slash || dot > slash + 1) ? dot : p + n;
}

/* The rank for {rank}: the process's "rank" metadata (loom_meta_set; loom
 * record's preload sets it from the launcher's environment), else RANK
 * (torchrun and most launchers), else 0. */
static const char *rank_str(char *buf, size_t n) {
  if (loom__process_meta_get("rank", buf, n) == 0 && *buf) return buf;
  const char *v = getenv("RANK");
  return v && *v ? v : "0";
}

int loom__window_path(char *buf, size_t n, const char *pattern, unsigned seq, int multi) {
  char seqs[16], rankbuf[32];
  snprintf(seqs, sizeof seqs, "%u", seq);
  int has_seq = strstr(pattern, "{seq}") != NULL;
  const char *ext = ext_at(pattern);
  size_t k = 0;
  for (const char *p = pattern;; p++) {
    if (multi && !has_seq && p == ext) {
      k += (size_t)snprintf(buf + k, k < n ? n - k : 0, "-%s", seqs);
      has_seq = 1;
    }
    if (!*p) break;
    const char *rep = NULL;
    char pid[24];
    size_t skip = 0;
    if (!strncmp(p, "{pid}", 5))
      snprintf(pid, sizeof pid, "%d", (int)getpid()), rep = pid, skip = 5;
    else if (!strncmp(p, "{rank}", 6)) rep = rank_str(rankbuf, sizeof rankbuf), skip = 6;
    else if (!strncmp(p, "{seq}", 5)) rep = seqs, skip = 5;
    else if (!strncmp(p, "{program}", 9)) rep = program_invocation_short_name, skip = 9;
    if (rep) {
      k += (size_t)snprintf(buf + k, k < n ? n - k : 0, "%s", rep);
      p += skip - 1;
    } else {
      if (k + 1 < n) buf[k] = *p;
      k++;
    }
  }
  if (k >= n) return -1;
  buf[k] = 0;
  return 0;
}

/* ---- windows --------------------------------------------------------------- */
static void *timer_main(void *arg);
static void label(loom_trace *t, const char *what, unsigned seq);

static void need_thread(void) {
  if (T.thread_on) return;
  if (loom__thread_start(NULL, timer_main, NULL) == 0) T.thread_on = 1;
}

/* Writes a finished window (mu not held). */
static void deliver(loom_session *s, loom_trace *t, const char *pattern, unsigned seq, int multi) {
  char path[4096];
  const char *pat = pattern[0] ? pattern : T.cfg.output ? T.cfg.output : "loom-{program}.json";
  if (loom__window_path(path, sizeof path, pat, seq, multi) != 0) {
    loom__session_warn(s, "window %u: output name from '%s' is too long; not written", seq, pat);
    loom_trace_free(t);
    return;
  }
  if (T.fn) {
    T.fn(t, path, seq, T.ud);
  } else if (loom_trace_save(t, path) != LOOM_OK) {
    loom__log(LOOM_SEV_ERROR, "window %u: %s", seq, loom_last_error());
    if (T.written) T.written(path, 0, loom_last_error()); /* a client waiting hears it */
  } else if (T.written) {
    T.written(path, 1, NULL);
  }
  loom_trace_free(t);
}

/* end: 0 none, 1 keep, 2 discard; begin: the phase to enter, or P_IDLE. */
typedef struct step_plan {
  int end, begin, close_step;
} step_plan;

/* Runs a plan with busy set (mu held on entry and on return). */
static void run_plan(step_plan p) {
  loom_session *s = T.s;
  if (!s || (!p.end && !p.begin)) return;
  T.busy = 1;
  char pattern[sizeof T.out];
  snprintf(pattern, sizeof pattern, "%s", T.out);
  int multi = T.multi;
  uint32_t kinds = T.sched ? 0 : T.kinds;
  unsigned seq = p.end == 1 ? ++T.seq : 0;
  char what[sizeof T.what + 48];
  if (T.sched) snprintf(what, sizeof what, "cycle %lld of %s", (long long)T.end_cycle + 1, T.what);
  else snprintf(what, sizeof what, "%s", T.what);
  pthread_mutex_unlock(&T.mu);
  if (p.end) {
    if (p.close_step) loom__hostrec_step_end();
    loom_trace *t = NULL;
    loom_status st = loom__session_window_end(s, p.end == 1, &t);
    if (st != LOOM_OK) loom__log(LOOM_SEV_ERROR, "window %u: %s", seq, loom_last_error());
    else if (t) {
      loom__window_keep_kinds(t, kinds, seq);
      label(t, what, seq);
      deliver(s, t, pattern, seq, multi);
    }
  }
  if (p.begin) loom__session_window_begin(s);
  pthread_mutex_lock(&T.mu);
  T.busy = 0;
  pthread_cond_broadcast(&T.cv);
}

/* torch.profiler.schedule's action for step n and the cycle it is in. */
static int sched_action(const tcfg *c, int64_t n, int64_t *cycle) {
  *cycle = -1;
  if (n < c->skip_first) return A_NONE;
  n -= c->skip_first;
  int64_t len = c->wait + c->warmup + c->active;
  if (c->repeat > 0 && n / len >= c->repeat) return A_NONE;
  *cycle = n / len;
  int64_t m = n % len;
  return m < c->wait ? A_NONE : m < c->wait + c->warmup ? A_WARMUP : A_RECORD;
}

static void describe(void);

static step_plan sched_step(int64_t n) {
  step_plan p = {0, 0, 0};
  int64_t cyc;
  int act = sched_action(&T.cfg, n, &cyc);
  T.end_cycle = T.cycle;
  if (T.phase == P_ON && (act != A_RECORD || cyc != T.cycle)) p.end = 1, p.close_step = 1;
  else if (T.phase == P_WARMUP && !(act == A_WARMUP && cyc == T.cycle)) p.end = 2;
  int from = p.end ? P_IDLE : T.phase;
  if (from == P_IDLE || from == P_ARMED) {
    if (act == A_WARMUP || act == A_RECORD) p.begin = act == A_WARMUP ? P_WARMUP : P_ON;
  } else if (from == P_WARMUP && act == A_RECORD) {
    p.end = 2; /* warmup's records are discarded: the active steps start clean */
    p.begin = P_ON;
  }
  if (p.begin) T.cycle = cyc;
  T.phase = p.begin ? p.begin : (p.end ? P_ARMED : T.phase);
  if (T.cfg.repeat > 0 && !p.begin && T.phase != P_ON && T.phase != P_WARMUP &&
      (n - T.cfg.skip_first) / (T.cfg.wait + T.cfg.warmup + T.cfg.active) >= T.cfg.repeat) {
    T.phase = P_IDLE; /* every cycle done (a request may arm a window again) */
  }
  return p;
}

static step_plan oneshot_step(int64_t n) {
  step_plan p = {0, 0, 0};
  if (T.phase == P_ARMED && T.need_step && !T.begin_at &&
      (T.start_step < 0 || n >= T.start_step)) {
    p.begin = P_ON;
    T.first_step = n;
  } else if (T.phase == P_ON && T.steps > 0 && n >= T.first_step + T.steps) {
    p.end = 1;
    p.close_step = 1;
  }
  return p;
}

/* After a one-shot window began: its end by time, and whether steps still
 * matter (mu held). */
static void began_oneshot(void) {
  if (T.duration_ns > 0) {
    T.end_at = mono_ns() + T.duration_ns;
    need_thread();
    pthread_cond_broadcast(&T.cv);
  }
}

static void ended_oneshot(void) {
  T.phase = P_IDLE;
  T.kinds = 0;
  T.begin_at = T.end_at = 0;
  T.what[0] = 0;
}

void loom__trigger_step(uint64_t step) {
  pthread_mutex_lock(&T.mu);
  T.next_step = (int64_t)step + 1;
  if (!T.s || T.busy || T.phase == P_IDLE) {
    pthread_mutex_unlock(&T.mu);
    return;
  }
  int64_t n = (int64_t)step;
  step_plan p = T.sched ? sched_step(n) : oneshot_step(n);
  if (!T.sched && p.begin) T.phase = P_ON;
  run_plan(p);
  if (!T.sched && p.begin) began_oneshot();
  if (!T.sched && p.end) ended_oneshot();
  pthread_mutex_unlock(&T.mu);
}

/* The timer thread: begins windows after their delay and ends them after
 * their duration.  Lives until the process ends (idle on the condition). */
static void *timer_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&T.mu);
  for (;;) {
    int64_t now = mono_ns();
    int64_t due = T.phase == P_ARMED && T.begin_at ? T.begin_at
                : T.phase == P_ON && T.end_at ? T.end_at : 0;
    if (!T.s || T.busy || !due) {
      pthread_cond_wait(&T.cv, &T.mu);
      continue;
    }
    if (now < due) {
      struct timespec ts = {(time_t)(due / 1000000000), (long)(due % 1000000000)};
      pthread_cond_timedwait(&T.cv, &T.mu, &ts);
      continue;
    }
    if (T.phase == P_ARMED) {
      T.begin_at = 0;
      if (T.need_step) continue; /* the first step after the delay begins it */
      T.phase = P_ON;
      run_plan((step_plan){0, P_ON, 0});
      began_oneshot();
    } else {
      T.end_at = 0;
      run_plan((step_plan){1, 0, 0});
      ended_oneshot();
    }
  }
  return NULL;
}

static void arm_oneshot(const loom__window_req *r, int multi) {
  T.sched = 0;
  T.multi = multi;
  snprintf(T.out, sizeof T.out, "%s", r->out ? r->out : "");
  T.start_step = r->start_step;
  T.steps = r->steps;
  T.duration_ns = r->duration_ns;
  T.kinds = r->kinds & LOOM_KINDS_ALL;
  T.need_step = r->start_step >= 0 || r->steps > 0;
  T.begin_at = r->delay_ns > 0 ? mono_ns() + r->delay_ns : 0;
  T.end_at = 0;
  T.phase = P_ARMED;
  describe();
  if (T.begin_at) {
    need_thread();
    pthread_cond_broadcast(&T.cv);
  }
  if (!T.need_step && !T.begin_at) { /* at once */
    T.phase = P_ON;
    run_plan((step_plan){0, P_ON, 0});
    began_oneshot();
  }
}

/* The window armed or recording, in words (for the busy message). */
static void describe(void) {
  char when[96] = "", len[64] = "";
  if (T.sched)
    snprintf(when, sizeof when, "schedule wait=%lld warmup=%lld active=%lld repeat=%lld",
             (long long)T.cfg.wait, (long long)T.cfg.warmup, (long long)T.cfg.active,
             (long long)T.cfg.repeat);
  else if (T.start_step >= 0)
    snprintf(when, sizeof when, "from step %lld", (long long)T.start_step);
  else if (T.need_step)
    snprintf(when, sizeof when, "from the next step");
  else
    snprintf(when, sizeof when, "%s", T.begin_at ? "after a delay" : "from its request");
  if (!T.sched && T.steps > 0) snprintf(len, sizeof len, ", %lld steps", (long long)T.steps);
  else if (!T.sched && T.duration_ns > 0)
    snprintf(len, sizeof len, ", %.3f s", (double)T.duration_ns * 1e-9);
  snprintf(T.what, sizeof T.what, "%s%s", when, len);
}

int loom__trigger_request(const loom__window_req *r) {
  loom__clear_error();
  if (!r || r->delay_ns < 0 || r->duration_ns < 0 || r->steps < 0 ||
      (r->duration_ns == 0 && r->steps == 0))
    return loom__fail(LOOM_EINVAL, "a window needs a duration (> 0) or a number of steps (> 0)");
  pthread_once(&cv_once, init_cv);
  pthread_mutex_lock(&T.mu);
  /* A window being written (its done function may have told a client it
   * is) is not in the way: wait for it (at most 10 s), as a request just
   * after it should succeed. */
  int64_t until = mono_ns() + 10000000000LL;
  while (T.busy && mono_ns() < until) {
    struct timespec ts = {(time_t)(until / 1000000000), (long)(until % 1000000000)};
    pthread_cond_timedwait(&T.cv, &T.mu, &ts);
  }
  loom_status st = LOOM_OK;
  if (!T.s) {
    st = loom__fail(LOOM_ESTATE, "this process has no session in window mode (loom record "
                    "records the whole run unless a window option or windows=on is given)");
  } else if (T.phase != P_IDLE || T.busy) {
    st = loom__fail(LOOM_EBUSY, "a window is already %s (%s); try again when it is written",
                    T.phase == P_ON || T.phase == P_WARMUP ? "recording" : "armed",
                    T.what[0] ? T.what : "ending");
  } else {
    arm_oneshot(r, r->out == NULL);
  }
  pthread_mutex_unlock(&T.mu);
  return st;
}

static void label(loom_trace *t, const char *what, unsigned seq) {
  char sq[16];
  snprintf(sq, sizeof sq, "%u", seq);
  /* which window of the run this is (not lost silently if it fails) */
  if (loom__trace_add_meta(t, "loom_window", what) ||
      loom__trace_add_meta(t, "loom_window_seq", sq))
    loom__log(LOOM_SEV_WARNING, "window %u: out of memory labelling its trace", seq);
}

void loom__trigger_write(loom_trace *t, const char *out, const char *what) {
  if (!t) return;
  pthread_once(&cv_once, init_cv);
  pthread_mutex_lock(&T.mu);
  unsigned seq = ++T.seq;
  loom_session *s = T.s ? T.s : T.owner;
  pthread_mutex_unlock(&T.mu);
  label(t, what ? what : "dump", seq);
  if (!s) { /* no session to name it after: the name as given, or the default */
    char path[4096];
    const char *pattern = out ? out : "loom-{program}-{seq}.json";
    if (loom__window_path(path, sizeof path, pattern, seq, 0) == 0 &&
        loom_trace_save(t, path) != LOOM_OK)
      loom__log(LOOM_SEV_ERROR, "window %u: %s", seq, loom_last_error());
    loom_trace_free(t);
    return;
  }
  deliver(s, t, out ? out : "", seq, out == NULL);
}

int loom__trigger_wanted(void) {
  pthread_mutex_lock(&T.mu);
  int windows = T.s != NULL;
  pthread_mutex_unlock(&T.mu);
  return windows || loom__ring_active();
}

/* on_demand=on: the session serves loom trigger while it records. */
int loom__trigger_serve(loom_session *s, int on) {
  pthread_mutex_lock(&T.mu);
  int start = on && T.owner == s && T.cfg.serve && !T.serving;
  int stop = !on && T.serving;
  if (start) T.serving = 1;
  if (stop) T.serving = 0;
  pthread_mutex_unlock(&T.mu);
  return start ? 1 : stop ? -1 : 0;
}

void loom__trigger_set_written(loom__window_written_fn fn) {
  pthread_mutex_lock(&T.mu);
  T.written = fn;
  pthread_mutex_unlock(&T.mu);
}

LOOM_EXTERN void loom_window_callback_set(loom_window_fn fn, void *ud) {
  pthread_mutex_lock(&T.mu);
  T.fn = fn;
  T.ud = ud;
  pthread_mutex_unlock(&T.mu);
}

/* ---- session life ------------------------------------------------------------ */
void loom__trigger_session_start(loom_session *s) {
  pthread_mutex_lock(&T.mu);
  T.s = s;
  T.seq = 0;
  T.next_step = 0;
  T.phase = P_IDLE;
  T.what[0] = 0;
  /* Every step is counted while the session runs, so step numbers are the
   * program's whatever window comes (one lock per step, not on the
   * instrumentation calls' path). */
  loom__hostrec_watch_steps(loom__trigger_step);
  if (T.cfg.sched) {
    T.sched = 1;
    T.multi = T.cfg.repeat != 1;
    T.out[0] = 0;
    T.phase = P_ARMED;
    describe();
  } else if (T.cfg.window) {
    loom__window_req r = {.delay_ns = T.cfg.delay_ns, .duration_ns = T.cfg.duration_ns,
                          .start_step = T.cfg.start_step, .steps = T.cfg.steps};
    arm_oneshot(&r, 0);
  }
  pthread_mutex_unlock(&T.mu);
}

int loom__trigger_session_stop(loom_session *s) {
  pthread_mutex_lock(&T.mu);
  /* A window's beginning or end in progress is waited for, within bounds:
   * the thread doing it may be the one a fatal signal interrupted, whose
   * handler waits for this stop (the preload's watcher) to write the trace. */
  int64_t until = mono_ns() + 10 * 1000000000ll;
  while (T.busy && T.s == s && mono_ns() < until) {
    struct timespec ts = {(time_t)(until / 1000000000), (long)(until % 1000000000)};
    pthread_cond_timedwait(&T.cv, &T.mu, &ts);
  }
  if (T.busy && T.s == s) {
    loom__log(LOOM_SEV_WARNING, "a window was still being begun or written when the session "
              "stopped (10 s); it is left as it is");
    T.s = NULL;
    pthread_mutex_unlock(&T.mu);
    return -1;
  }
  if (T.s == s) {
    loom__hostrec_watch_steps(NULL);
    /* A window in progress is written (cut short by the end of the run);
     * warmup records are not. */
    T.end_cycle = T.cycle;
    if (T.phase == P_ON) run_plan((step_plan){1, 0, 0});
    else if (T.phase == P_WARMUP) run_plan((step_plan){2, 0, 0});
    T.phase = P_IDLE;
    T.sched = 0;
    T.kinds = 0;
    T.begin_at = T.end_at = 0;
    T.what[0] = 0;
    T.s = NULL;
  }
  pthread_mutex_unlock(&T.mu);
  return 0;
}

void loom__trigger_session_gone(loom_session *s) {
  pthread_mutex_lock(&T.mu);
  if (T.owner == s) {
    free(T.cfg.output);
    memset(&T.cfg, 0, sizeof T.cfg);
    T.owner = NULL;
  }
  pthread_mutex_unlock(&T.mu);
}

/* The parent's timer thread does not exist in the child, and its lock may
 * have been held at the fork. */
void loom__trigger_forked(void) {
  pthread_mutex_init(&T.mu, NULL);
  T.serving = 0;
  T.kinds = 0;
  init_cv();
  T.s = T.owner = NULL;
  T.cfg.output = NULL; /* the parent's copy; not freed (its lock state unknown) */
  memset(&T.cfg, 0, sizeof T.cfg);
  T.phase = P_IDLE;
  T.busy = T.sched = T.thread_on = 0;
  T.begin_at = T.end_at = 0;
  T.what[0] = 0;
}

/* ---- for the control socket (src/ctl/ctl.c) ---------------------------------- */
int64_t loom__trigger_next_step(void) {
  pthread_mutex_lock(&T.mu);
  int64_t n = T.next_step;
  pthread_mutex_unlock(&T.mu);
  return n;
}

int loom__trigger_state(char *desc, size_t n) {
  pthread_mutex_lock(&T.mu);
  int st = T.phase == P_IDLE ? (T.busy ? 2 : 0) : T.phase == P_ARMED ? 1 : 2;
  snprintf(desc, n, "%s", T.what[0] ? T.what : st ? "ending" : "-");
  if (!T.s) { /* recording, but not in window mode */
    st = 2;
    snprintf(desc, n, "the whole run (not in window mode; in ring mode a trigger dumps "
                      "the ring)");
  }
  pthread_mutex_unlock(&T.mu);
  return st;
}
