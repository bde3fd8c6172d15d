/*
 * session.c - the session state machine: create (select, probe and configure
 * backends) -> start -> stop (stop, flush, collect, process) -> destroy.
 *
 * Only one session exists at a time.  A device type nobody can serve, a probe,
 * configure or start that fails: each is a warning on stderr and in the
 * trace, and the session records everything else.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core.h"
#include "record/arena.h"
#include "record/record.h"

static atomic_int session_active;

/* The recording session, for backends registered while it records (they
 * join it at once).  live_mu is held through a late join, and stop takes it
 * to clear live first, so a join is either complete or never begins. */
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static loom_session *live;
/* Set in the thread running a late join: a backend its operations register
 * in turn waits for the next session (live_mu is held). */
static __thread int joining;

int loom__session_meta_set(loom_session *s, const char *key, const char *value) {
  pthread_mutex_lock(&s->mu);
  int rc = loom__kvs_set(&s->meta, key, value);
  pthread_mutex_unlock(&s->mu);
  return rc;
}

void loom__session_warn(struct loom_session *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  loom__msgs_vadd(&s->warn, SIZE_MAX, LOOM_SEV_WARNING, fmt, ap);
  va_end(ap);
}

void loom__session_vreport(struct loom_session *s, loom_severity sev,
                           const char *fmt, va_list ap) {
  loom__msgs_vadd(&s->warn, SIZE_MAX, sev, fmt, ap);
}

size_t loom_session_warning_count(const loom_session *s) {
  if (!s) return 0;
  pthread_mutex_lock((pthread_mutex_t *)&s->warn.mu);
  size_t n = s->warn.n;
  pthread_mutex_unlock((pthread_mutex_t *)&s->warn.mu);
  return n;
}

const char *loom_session_warning(const loom_session *s, size_t i) {
  if (!s) return NULL;
  pthread_mutex_lock((pthread_mutex_t *)&s->warn.mu);
  const char *w = i < s->warn.n ? s->warn.v[i] : NULL;
  pthread_mutex_unlock((pthread_mutex_t *)&s->warn.mu);
  return w;
}

static void set_state(loom_backend *b, loom_backend_state st, const char *why) {
  pthread_mutex_lock(&b->mu);
  b->st = st;
  snprintf(b->reason, sizeof b->reason, "%s", why ? why : "");
  pthread_mutex_unlock(&b->mu);
}

/* Attaches per-session data to b. */
static int join(loom_session *s, loom_backend *b) {
  loom__bsess *bs = calloc(1, sizeof *bs);
  if (!bs) return -1;
  bs->s = s;
  bs->kinds = s->kinds;
  bs->src = (uint16_t)(s->nbk + 1);
  if (LOOM__PUSH(s->bk, s->nbk, s->cap_bk, b) != 0) {
    free(bs);
    return -1;
  }
  pthread_mutex_lock(&b->mu);
  b->bs = bs;
  atomic_store(&b->rec_clock, 0); /* clocks are the session's */
  atomic_store(&b->mem_src, s->host && bs->src <= LOOM__BMEM_SRC_MAX ? bs->src : 0);
  atomic_store(&b->call_kinds, bs->kinds & (LOOM_KIND_BIT(LOOM_KIND_RUNTIME) |
                                            LOOM_KIND_BIT(LOOM_KIND_DRIVER) |
                                            LOOM_KIND_BIT(LOOM_KIND_SYNC)));
  pthread_mutex_unlock(&b->mu);
  return 0;
}

/* Detaches and frees b's per-session data (after destroy). */
static void leave(loom_backend *b) {
  pthread_mutex_lock(&b->mu);
  loom__bsess *bs = b->bs;
  b->bs = NULL;
  atomic_store(&b->mem_src, 0);
  atomic_store(&b->call_kinds, 0);
  pthread_mutex_unlock(&b->mu);
  loom__bsess_free(bs);
}

void loom__bsess_free(loom__bsess *bs) {
  if (!bs) return;
  loom__bkarena_close(bs); /* its copies in the arena */
  for (size_t i = 0; i < bs->nclocks; i++) {
    free(bs->clocks[i].name);
    free(bs->clocks[i].sync);
  }
  free(bs->clocks);
  free(bs->recs);
  free(bs->args);
  loom__bmem_free(bs);
  free(bs->devbits);
  for (size_t i = 0; i < sizeof bs->lost_by / sizeof bs->lost_by[0]; i++)
    free(bs->lost_by[i].reason);
  free(bs);
}

/* Removes b from the session (failed probe, configure or start); destroy
 * is called unless the probe failed.  Its devices leave the trace. */
static void remove_backend(loom_session *s, size_t i, int destroy) {
  loom_backend *b = s->bk[i];
  if (destroy && b->ops.destroy) b->ops.destroy(b);
  leave(b);
  pthread_mutex_lock(&s->mu);
  for (size_t d = 0; d < s->ndevs; d++)
    if (s->devs[d].b == b) s->devs[d].b = NULL;
  pthread_mutex_unlock(&s->mu);
  memmove(&s->bk[i], &s->bk[i + 1], (s->nbk - i - 1) * sizeof *s->bk);
  s->nbk--;
}

static void drop_backend(loom_session *s, size_t i) { remove_backend(s, i, 1); }

/* Tells the host recorder which backends keep their own external ids. */
static void set_hooks(loom_session *s) {
  const loom__ext_hook *hooks[LOOM__MAX_HOOKS];
  size_t nh = 0;
  for (size_t i = 0; i < s->nbk && nh < LOOM__MAX_HOOKS; i++)
    if (s->bk[i]->hook.push) hooks[nh++] = &s->bk[i]->hook;
  loom__hostrec_set_hooks(hooks, nh);
}

/* Probes b (already joined, so it sees the session's options and its
 * reports reach this session). */
static int probe(loom_session *s, loom_backend *b, const char *dev) {
  if (b->st == LOOM_BACKEND_AVAILABLE) return 1;
  char why[256] = "";
  loom_status st = b->ops.probe ? b->ops.probe(b, why, sizeof why) : LOOM_OK;
  why[sizeof why - 1] = 0;
  if (st == LOOM_OK) {
    set_state(b, LOOM_BACKEND_AVAILABLE, "");
    return 1;
  }
  if (!why[0]) snprintf(why, sizeof why, "probe failed: %s", loom_strerror(st));
  set_state(b, LOOM_BACKEND_UNAVAILABLE, why);
  loom__session_warn(s, "device '%s': backend '%s' is unavailable: %s", dev,
                     b->ops.name, why);
  return 0;
}

static int in_session(const loom_session *s, const loom_backend *b) {
  for (size_t i = 0; i < s->nbk; i++)
    if (s->bk[i] == b) return 1;
  return 0;
}

/* Selects the backends for one requested device type. */
static loom_status select_device(loom_session *s, const char *dev,
                                 loom_backend **all, size_t nall) {
  int is_all = !strcmp(dev, "all"), found = 0, usable = 0;
  /* (each backend that fails says why; a summary line helps only when
   * several backends serve the type) */
  if (!strcmp(dev, "cpu")) {
    s->host = 1;
    found = 1;
    usable = 1;
  }
  for (size_t i = 0; i < nall; i++) {
    loom_backend *b = all[i];
    if (!is_all && strcasecmp(b->ops.device_type, dev)) continue;
    found++;
    if (in_session(s, b)) {
      usable = 1;
      continue;
    }
    if (join(s, b) != 0) return loom__fail(LOOM_ENOMEM, "out of memory");
    if (!probe(s, b, is_all ? b->ops.device_type : dev)) {
      remove_backend(s, s->nbk - 1, 0);
      continue;
    }
    loom_status st = b->ops.configure ? b->ops.configure(b, s->kinds) : LOOM_OK;
    if (st != LOOM_OK) {
      loom__session_warn(s, "device '%s': backend '%s' failed to configure: %s",
                         dev, b->ops.name, loom_strerror(st));
      set_state(b, LOOM_BACKEND_UNAVAILABLE, "configure failed");
      drop_backend(s, s->nbk - 1);
      continue;
    }
    usable = 1;
  }
  if (is_all) {
    s->host = 1;
    s->want_all = 1;
  } else if (strcmp(dev, "cpu")) {
    /* A type nobody serves now may still be registered while the session
     * records; stop says so if none ever was. */
    char *w = loom__strdup(dev);
    size_t n = s->nwant;
    if (!w || LOOM__PUSH(s->want, s->nwant, s->cap_want, w) != 0) {
      free(w);
      return loom__fail(LOOM_ENOMEM, "out of memory");
    }
    if (LOOM__PUSH(s->want_found, n, s->cap_found, found) != 0) {
      free(s->want[--s->nwant]);
      return loom__fail(LOOM_ENOMEM, "out of memory");
    }
  }
  if (found && !usable && found > 1)
    loom__session_warn(s, "device '%s' is not recorded: none of its %d backends works", dev, found);
  return LOOM_OK;
}

static loom_status parse_devices(loom_session *s, const char *list) {
  size_t nall;
  loom_backend **all = loom__registry_snapshot(&nall);
  if (!all) return loom__fail(LOOM_ENOMEM, "out of memory");
  const char *p = (list && *list) ? list : "cpu";
  loom_status st = LOOM_OK;
  while (*p && st == LOOM_OK) {
    size_t len = strcspn(p, ",");
    char dev[64];
    size_t j = 0;
    for (size_t i = 0; i < len; i++)
      if (!isspace((unsigned char)p[i]) && j + 1 < sizeof dev)
        dev[j++] = (char)tolower((unsigned char)p[i]);
    dev[j] = 0;
    if (len >= sizeof dev) {
      st = loom__fail(LOOM_EINVAL, "device type '%.*s' is too long", (int)len, p);
    } else if (j) {
      st = select_device(s, dev, all, nall);
    }
    p += len;
    if (*p) p++;
  }
  free(all);
  return st;
}

static loom_status read_sizes(loom_session *s) {
  const char *v;
  s->chunk_bytes = 256 * 1024;
  if ((v = loom__opts_get(&s->opts, "buffer_size")) &&
      (loom__parse_size(v, &s->chunk_bytes) || s->chunk_bytes < 1024))
    return loom__fail(LOOM_EINVAL, "option buffer_size='%s': expected a size of "
                      "at least 1024 bytes (suffix k, m or g allowed)", v);
  /* Bounded by default (docs/survival.md): a long job cannot take the host's
   * memory; 0 asks for no bound. */
  s->cap_bytes = LOOM__DEFAULT_MEMORY_CAP;
  if ((v = loom__opts_get(&s->opts, "memory_cap")) && loom__parse_size(v, &s->cap_bytes))
    return loom__fail(LOOM_EINVAL, "option memory_cap='%s': expected a size "
                      "(suffix k, m or g allowed; 0 for no bound)", v);
  if ((v = loom__opts_get(&s->opts, "test_clock_shift")) && *v &&
      loom__timeline_set_shift(&s->tl, v))
    return loom__fail(LOOM_EINVAL, "option test_clock_shift='%s': expected OFFSET_NS or "
                      "OFFSET_NS:PPM (integer ns, optional drift in parts per million)", v);
  s->bk_cap = LOOM__DEFAULT_BACKEND_MEMORY_CAP;
  if ((v = loom__opts_get(&s->opts, "backend_memory_cap")) &&
      (loom__parse_size(v, &s->bk_cap) || s->bk_cap == 0))
    return loom__fail(LOOM_EINVAL, "option backend_memory_cap='%s': expected a "
                      "size above 0 (suffix k, m or g allowed)", v);
  return LOOM_OK;
}

loom_status loom__session_create(const loom_session_config *cfg, const loom__session_hooks *hooks,
                                 loom_session **out) {
  loom__clear_error();
  if (!out) return loom__fail(LOOM_EINVAL, "loom_session_create: out is NULL");
  *out = NULL;
  if (cfg && cfg->struct_size < offsetof(loom_session_config, options))
    return loom__fail(LOOM_EINVAL, "loom_session_create: struct_size %zu too small",
                      cfg->struct_size);
  loom__ensure_init();
  int expected = 0;
  if (!atomic_compare_exchange_strong(&session_active, &expected, 1))
    return loom__fail(LOOM_EBUSY, "another loom session exists; destroy it first");
  loom_session *s = calloc(1, sizeof *s);
  if (!s) {
    atomic_store(&session_active, 0);
    return loom__fail(LOOM_ENOMEM, "out of memory");
  }
  pthread_mutex_init(&s->mu, NULL);
  pthread_mutex_init(&s->warn.mu, NULL);
  s->hooks = hooks;
  size_t sz = cfg ? cfg->struct_size : 0;
  const char *opts = cfg && sz >= offsetof(loom_session_config, name) ? cfg->options : NULL;
  const char *name = cfg && sz >= sizeof *cfg ? cfg->name : NULL;
  s->kinds = cfg && cfg->kinds ? cfg->kinds & LOOM_KINDS_ALL : LOOM_KINDS_ALL;
  s->kinds |= LOOM_KIND_BIT(LOOM_KIND_MARKER);
  loom_status st = loom__opts_parse(&s->opts, opts);
  if (st == LOOM_OK) st = loom__opts_check(&s->opts, loom__backend_option_known);
  if (st == LOOM_OK) st = read_sizes(s);
  if (st == LOOM_OK) st = s->hooks->configure(s);
  if (st == LOOM_OK) {
    s->name = loom__strdup(name ? name : "loom");
    size_t np;
    char **pend = loom__take_pending(&np);
    for (size_t i = 0; i < np; i++)
      if (LOOM__PUSH(s->warn.v, s->warn.n, s->warn.cap, pend[i]) != 0) free(pend[i]);
    free(pend);
    st = parse_devices(s, cfg ? cfg->devices : NULL);
    s->warn_keep = s->warn.n;
  }
  if (st != LOOM_OK) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", loom_last_error());
    loom_session_destroy(s);
    return loom__fail(st, "%s", msg);
  }
  *out = s;
  return LOOM_OK;
}

/* Starts every backend of s; one that fails leaves the session. */
static void start_backends(loom_session *s) {
  for (size_t i = 0; i < s->nbk;) {
    loom_backend *b = s->bk[i];
    loom_status st = b->ops.start(b);
    if (st != LOOM_OK) {
      loom__session_warn(s, "device '%s': backend '%s' failed to start (%s); "
                         "recording goes on without it", b->ops.device_type,
                         b->ops.name, loom_strerror(st));
      set_state(b, LOOM_BACKEND_UNAVAILABLE, "start failed");
      drop_backend(s, i);
      continue;
    }
    pthread_mutex_lock(&b->mu);
    b->bs->started = 1;
    pthread_mutex_unlock(&b->mu);
    loom__clock_auto_sync_all(b);
    i++;
  }
  set_hooks(s);
  pthread_mutex_lock(&live_mu);
  live = s;
  pthread_mutex_unlock(&live_mu);
}

/* Host recording on (ring mode first: the recorder must know it before its
 * first chunk), and under loom record what a salvage of this process needs
 * (arena.c).  resume: a window of the session (step numbers go on). */
static void host_begin(loom_session *s, int resume) {
  s->hooks->recording(s, 1);
  uint64_t cap = s->ring ? s->ring_bytes : s->cap_bytes;
  if (s->host && resume) loom__hostrec_resume(s->chunk_bytes, cap);
  else if (s->host) loom__hostrec_start(s->chunk_bytes, cap);
  loom__arena_session(&s->tl, sizeof s->tl, loom__hostrec_domain(), s->name,
                      (const char *const *)s->opts.keys, (const char *const *)s->opts.vals,
                      s->opts.n, s->chunk_bytes, s->cap_bytes);
  loom__meta_arena_mirror(); /* loom_meta_set and loom_thread_name so far */
}

loom_status loom_session_start(loom_session *s) {
  loom__clear_error();
  if (!s) return loom__fail(LOOM_EINVAL, "loom_session_start: NULL session");
  if (s->state != LOOM__S_CREATED)
    return loom__fail(LOOM_ESTATE, "loom_session_start: session already started");
  s->state = LOOM__S_RECORDING;
  /* A window or a ring dump starts from what was live (memledger.c). */
  if (s->host && (s->windows || s->ring)) loom__memledger_start();
  if (s->windows) { /* nothing records until a window begins (trigger.c) */
    loom__hostrec_reset_steps();
    s->hooks->windows_start(s);
    s->hooks->serve(s, 1);
    return LOOM_OK;
  }
  loom__timeline_begin(&s->tl);
  host_begin(s, 0);
  start_backends(s);
  s->hooks->serve(s, 1); /* on_demand=on: loom trigger's socket */
  return LOOM_OK;
}

loom_status loom__session_window_begin(loom_session *s) {
  loom__timeline_begin(&s->tl);
  host_begin(s, 1);
  start_backends(s);
  return LOOM_OK;
}

/* Is type among the device types s asked for? */
static int wants(loom_session *s, const char *type, size_t *idx) {
  for (size_t i = 0; i < s->nwant; i++)
    if (!strcasecmp(s->want[i], type)) {
      *idx = i;
      return 1;
    }
  *idx = SIZE_MAX;
  return s->want_all;
}

static long index_of(const loom_session *s, const loom_backend *b) {
  for (size_t i = 0; i < s->nbk; i++)
    if (s->bk[i] == b) return (long)i;
  return -1;
}

/* Probes, configures and starts b in the recording session s (live_mu
 * held), as create and start would have; failures are warnings. */
static void late_join(loom_session *s, loom_backend *b, size_t want) {
  const char *type = b->ops.device_type;
  if (want != SIZE_MAX) s->want_found[want] = 1;
  if (join(s, b) != 0) {
    loom__session_warn(s, "backend '%s' registered while recording could not "
                       "join the session: out of memory", b->ops.name);
    return;
  }
  if (!probe(s, b, type)) {
    remove_backend(s, (size_t)index_of(s, b), 0);
    return;
  }
  loom_status st = b->ops.configure ? b->ops.configure(b, s->kinds) : LOOM_OK;
  if (st == LOOM_OK) st = b->ops.start(b);
  if (st != LOOM_OK) {
    loom__session_warn(s, "device '%s': backend '%s' registered while recording "
                       "failed to configure or start (%s); recording goes on "
                       "without it", type, b->ops.name, loom_strerror(st));
    set_state(b, LOOM_BACKEND_UNAVAILABLE, "late join failed");
    drop_backend(s, (size_t)index_of(s, b));
    return;
  }
  pthread_mutex_lock(&b->mu);
  b->bs->started = 1;
  pthread_mutex_unlock(&b->mu);
  loom__clock_auto_sync_all(b);
  set_hooks(s);
  /* When it joined, in the trace: records before that moment were not seen. */
  int64_t now = (int64_t)loom__clock_now(LOOM_CLOCK_REALTIME);
  int64_t since = now - s->tl.start[LOOM_CLOCK_REALTIME].real;
  char key[160], msg[256];
  snprintf(key, sizeof key, "backend_joined.%s", b->ops.name);
  snprintf(msg, sizeof msg, "backend '%s' joined the session at %.6f s after its "
           "start (epoch %lld ns)", b->ops.name, (double)since * 1e-9, (long long)now);
  loom__session_meta_set(s, key, msg);
  loom__log(LOOM_SEV_INFO, "%s", msg);
}

void loom__session_offer(loom_backend *b) {
  if (joining) {
    loom__log(LOOM_SEV_INFO, "backend '%s' was registered during another backend's "
              "late join; it joins the next session", b->ops.name);
    return;
  }
  pthread_mutex_lock(&live_mu);
  loom_session *s = live;
  size_t want;
  if (s && wants(s, b->ops.device_type, &want) && index_of(s, b) < 0) {
    joining = 1;
    late_join(s, b, want);
    joining = 0;
  }
  pthread_mutex_unlock(&live_mu);
}

/* Stops and flushes every backend; afterwards no record is accepted. */
static void stop_all(loom_session *s) {
  s->hooks->recording(s, 0); /* waits for a ring dump under way */
  pthread_mutex_lock(&live_mu); /* waits for a late join under way */
  live = NULL;
  pthread_mutex_unlock(&live_mu);
  loom__hostrec_set_hooks(NULL, 0);
  for (size_t i = 0; i < s->nwant; i++)
    if (!s->want_found[i])
      loom__session_warn(s, "device '%s' requested but no backend for it was "
                         "registered before or during the session; it is not "
                         "recorded (built-in backends are listed by 'loom "
                         "backends'; plug-ins load from LOOM_PLUGINS or "
                         "LOOM_PLUGIN_PATH)", s->want[i]);
  for (size_t i = 0; i < s->nbk; i++) {
    loom_backend *b = s->bk[i];
    loom__clock_auto_sync_all(b);
    loom_status st = b->ops.stop(b);
    if (st != LOOM_OK)
      loom__session_warn(s, "backend '%s' failed to stop: %s", b->ops.name,
                         loom_strerror(st));
  }
  if (s->host) loom__hostrec_stop();
  if (loom__arena_fd_lost() && !s->said_fd_lost) {
    s->said_fd_lost = 1;
    loom__session_warn(s, "the program closed loom's shared-memory file descriptor (or closed it "
                       "and opened a file of its own that got its number): loom stopped writing "
                       "through it; records from then on are in this trace but would not have "
                       "survived a kill of the process");
  }
  loom__timeline_end(&s->tl);
  for (size_t i = 0; i < s->nbk; i++) {
    loom_backend *b = s->bk[i];
    loom__clock_auto_sync_all(b);
    loom_status st = b->ops.flush ? b->ops.flush(b) : LOOM_OK;
    if (st != LOOM_OK)
      loom__session_warn(s, "backend '%s' failed to flush: %s; records it still "
                         "held are lost", b->ops.name, loom_strerror(st));
    pthread_mutex_lock(&b->mu);
    b->bs->closed = 1;
    atomic_store(&b->mem_src, 0); /* what comes now is counted lost (emit) */
    atomic_store(&b->call_kinds, 0);
    pthread_mutex_unlock(&b->mu);
  }
}

static void clear_devices(loom_session *s) {
  pthread_mutex_lock(&s->mu);
  for (size_t i = 0; i < s->ndevs; i++) {
    free(s->devs[i].name);
    free(s->devs[i].vendor);
    free(s->devs[i].type);
    free(s->devs[i].props);
    loom__bkarena_forget(s->devs[i].arena);
  }
  for (size_t i = 0; i < s->nres; i++) {
    free(s->res[i].name);
    loom__bkarena_forget(s->res[i].arena);
  }
  s->ndevs = s->nres = 0;
  pthread_mutex_unlock(&s->mu);
}

/* After a window: every backend ends its session (destroy) and is
 * configured again, so the next window starts as a new session does (its
 * devices, queues and clocks declared afresh); the window's own warnings
 * leave the session (they were in its trace). */
static void next_window(loom_session *s) {
  size_t n = s->nbk;
  for (size_t i = 0; i < n; i++) {
    loom_backend *b = s->bk[i];
    if (b->ops.destroy) b->ops.destroy(b);
    leave(b);
  }
  clear_devices(s);
  s->nbk = 0; /* join appends at an index no later than the one read */
  for (size_t i = 0; i < n; i++) {
    loom_backend *b = s->bk[i];
    if (join(s, b) != 0) {
      loom__session_warn(s, "backend '%s' left the session: out of memory", b->ops.name);
      continue;
    }
    loom_status st = b->ops.configure ? b->ops.configure(b, s->kinds) : LOOM_OK;
    if (st != LOOM_OK) {
      loom__session_warn(s, "backend '%s' failed to configure for the next window: %s; "
                         "it is not recorded any more", b->ops.name, loom_strerror(st));
      set_state(b, LOOM_BACKEND_UNAVAILABLE, "configure failed");
      drop_backend(s, s->nbk - 1);
    }
  }
  pthread_mutex_lock(&s->warn.mu);
  while (s->warn.n > s->warn_keep) free(s->warn.v[--s->warn.n]);
  pthread_mutex_unlock(&s->warn.mu);
}

loom_status loom__session_window_end(loom_session *s, int keep, loom_trace **out) {
  *out = NULL;
  stop_all(s);
  loom_status st = LOOM_OK;
  if (keep) st = loom__session_collect(s, out);
  else if (s->host) loom__hostrec_release();
  next_window(s);
  return st;
}

loom_status loom_session_stop(loom_session *s, loom_trace **out) {
  loom__clear_error();
  if (out) *out = NULL;
  if (!s) return loom__fail(LOOM_EINVAL, "loom_session_stop: NULL session");
  if (s->state != LOOM__S_RECORDING)
    return loom__fail(LOOM_ESTATE, "loom_session_stop: session is not recording");
  if (s->windows) { /* each window went to its file; one in progress ends now */
    s->abandoned = s->hooks->windows_stop(s) != 0;
    s->hooks->serve(s, 0);
    s->state = LOOM__S_STOPPED;
    if (!s->abandoned) loom__memledger_stop();
    return LOOM_OK;
  }
  s->hooks->serve(s, 0);
  stop_all(s);
  s->state = LOOM__S_STOPPED;
  loom_trace *t = NULL;
  loom_status st = loom__session_collect(s, &t);
  loom__memledger_stop();
  if (st == LOOM_OK && out) *out = t;
  else loom_trace_free(t);
  return st;
}

void loom_session_destroy(loom_session *s) {
  if (!s) return;
  if (s->state == LOOM__S_RECORDING && s->windows)
    s->abandoned = s->hooks->windows_stop(s) != 0;
  if (s->abandoned) { /* another thread is inside it (the process is ending) */
    s->hooks->windows_gone(s);
    atomic_store(&session_active, 0);
    return;
  }
  if (s->state == LOOM__S_RECORDING && !s->windows) {
    stop_all(s);
    if (s->host) loom__hostrec_release();
  }
  if (s->state == LOOM__S_RECORDING) loom__memledger_stop();
  s->hooks->windows_gone(s);
  while (s->nbk) drop_backend(s, s->nbk - 1);
  free(s->bk);
  loom__msgs_free(&s->warn);
  pthread_mutex_destroy(&s->warn.mu);
  clear_devices(s);
  free(s->devs);
  free(s->res);
  for (size_t i = 0; i < s->nwant; i++) free(s->want[i]);
  free(s->want);
  free(s->want_found);
  loom__kvs_free(&s->meta);
  loom__opts_free(&s->opts);
  free(s->name);
  pthread_mutex_destroy(&s->mu);
  free(s);
  atomic_store(&session_active, 0);
}

void loom__session_forked(void) { atomic_store(&session_active, 0); }

loom_session *loom__session_stopped(const char *name, const void *tl, uint64_t chunk_bytes,
                                    uint64_t cap_bytes) {
  loom_session *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  pthread_mutex_init(&s->mu, NULL);
  pthread_mutex_init(&s->warn.mu, NULL);
  s->kinds = LOOM_KINDS_ALL | LOOM_KIND_BIT(LOOM_KIND_MARKER);
  s->host = 1;
  s->chunk_bytes = chunk_bytes;
  s->cap_bytes = cap_bytes;
  memcpy(&s->tl, tl, sizeof s->tl);
  /* The same host's clocks, read now: the stop readings of the timeline. */
  loom__timeline_end(&s->tl);
  if (!(s->name = loom__strdup(name))) {
    free(s);
    return NULL;
  }
  return s;
}

void loom__session_free_stopped(loom_session *s) {
  loom__msgs_free(&s->warn);
  loom__opts_free(&s->opts);
  free(s->name);
  free(s);
}
