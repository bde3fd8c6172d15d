/*
 * backend.c - the loom side of libloom-perf.so (device type "perf"): CPU
 * samples with call stacks and OS counters per thread, from Linux
 * perf_event_open.  While recording, the kernel samples, the reader
 * thread (events.c) copies, and a worker (samples.c, live.c) unwinds and
 * names what was copied as it goes (unwind.c); at flush, after the program's work is recorded, the
 * samples it did not reach are unwound too, and all are emitted as
 * LOOM_KIND_SAMPLE records on their threads, in CLOCK_MONOTONIC (the
 * events' use_clockid), and the counters as counter records.
 *
 * Options (session options or LOOM_PERF_*): perf.frequency (Hz, default
 * 1000), perf.stack (bytes of user stack copied per sample for DWARF
 * unwinding, default 16384, 0 = frame-pointer chains only), perf.counters
 * (default 1), perf.memory (bytes of samples kept, default 512m), perf.live
 * (default 1: the worker unwinds as it goes).
 */
#define _GNU_SOURCE
#define LOOM_PLUGIN_WANT_ATTACH
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "perf.h"

#define EXPORT __attribute__((visibility("default")))

static const loom_host *pf_host;

typedef struct pf_state {
  pf_config cfg;
  loom_clock clk;
  pf_events *ev;
  pf_live *live; /* perf.live: unwinding while recording (live.c, samples.c) */
  pid_t owner;    /* whose ev and live: a forked child drops the parent's, never frees
                     them (their threads are not in the child) */
  int user_only, paranoid;
} pf_state;

static pf_state *st(loom_backend *b) { return pf_host->state(b); }

/* ---- options ---------------------------------------------------------------- */
static int parse_u64(const char *s, uint64_t *out, uint64_t unit_k) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *s == '-') return -1;
  uint64_t mul = 1;
  if (unit_k && (*end == 'k' || *end == 'K')) mul = 1024, end++;
  else if (unit_k && (*end == 'm' || *end == 'M')) mul = 1024 * 1024, end++;
  else if (unit_k && (*end == 'g' || *end == 'G')) mul = 1024ull * 1024 * 1024, end++;
  if (*end || v > UINT64_MAX / mul) return -1;
  *out = v * mul;
  return 0;
}

static loom_status read_options(loom_backend *b, pf_config *c) {
  *c = (pf_config){.period_ns = 1000000, .stack_bytes = 16384, .counters = 1,
                   .memory_cap = 512ull << 20, .live = 1};
  const char *v;
  uint64_t x;
  if ((v = pf_host->config_get(b, "perf.frequency"))) {
    if (parse_u64(v, &x, 0) || x < 1 || x > 100000) {
      pf_host->report(b, LOOM_SEV_ERROR,
                      "perf.frequency=%s: expected samples per second, 1 to 100000", v);
      return LOOM_EINVAL;
    }
    c->period_ns = 1000000000ull / x;
  }
  if ((v = pf_host->config_get(b, "perf.stack"))) {
    if (parse_u64(v, &x, 1) || x > 65528 || x % 8) {
      pf_host->report(b, LOOM_SEV_ERROR, "perf.stack=%s: expected bytes of user stack per sample, "
                                      "a multiple of 8 up to 65528 (0: frame pointers only)", v);
      return LOOM_EINVAL;
    }
    c->stack_bytes = (uint32_t)x;
  }
  if ((v = pf_host->config_get(b, "perf.counters"))) {
    if (strcmp(v, "0") && strcmp(v, "1")) {
      pf_host->report(b, LOOM_SEV_ERROR, "perf.counters=%s: expected 0 or 1", v);
      return LOOM_EINVAL;
    }
    c->counters = *v == '1';
  }
  if ((v = pf_host->config_get(b, "perf.live"))) {
    if (strcmp(v, "0") && strcmp(v, "1")) {
      pf_host->report(b, LOOM_SEV_ERROR, "perf.live=%s: expected 0 or 1", v);
      return LOOM_EINVAL;
    }
    c->live = *v == '1';
  }
  if ((v = pf_host->config_get(b, "perf.memory"))) {
    if (parse_u64(v, &x, 1) || x < 4096) {
      pf_host->report(b, LOOM_SEV_ERROR, "perf.memory=%s: expected a size (k/m/g), at least 4k", v);
      return LOOM_EINVAL;
    }
    c->memory_cap = x;
  }
  return LOOM_OK;
}

/* ---- operations ------------------------------------------------------------- */
static loom_status pf_probe(loom_backend *b, char *why, size_t n) {
  (void)b;
  struct perf_event_attr a;
  memset(&a, 0, sizeof a);
  a.size = sizeof a;
  a.type = PERF_TYPE_SOFTWARE;
  a.config = PERF_COUNT_SW_CPU_CLOCK;
  a.disabled = 1;
  a.exclude_kernel = 1;
  a.exclude_hv = 1;
  long fd = syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd >= 0) {
    close((int)fd);
    return LOOM_OK;
  }
  int e = errno;
  FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "r");
  int par = 99;
  if (f) {
    if (fscanf(f, "%d", &par) != 1) par = 99;
    fclose(f);
  }
  if (e == ENOSYS)
    snprintf(why, n, "perf_event_open is not available (kernel without CONFIG_PERF_EVENTS, or "
                     "a seccomp filter blocks it)");
  else if (e == EACCES || e == EPERM)
    snprintf(why, n, "perf_event_open refused (%s): kernel.perf_event_paranoid is %d; "
                     "`sysctl kernel.perf_event_paranoid=2` (or lower) allows sampling one's "
                     "own user space, or give the program CAP_PERFMON", strerror(e), par);
  else
    snprintf(why, n, "perf_event_open(cpu-clock) failed: %s", strerror(e));
  return LOOM_EUNSUPPORTED;
}

static loom_status pf_configure(loom_backend *b, uint32_t kinds) {
  (void)kinds;
  pf_state *s = st(b);
  loom_status rc = read_options(b, &s->cfg);
  if (rc != LOOM_OK) return rc;
  return pf_host->clock_declare(b, LOOM_CLOCK_MONOTONIC, "perf_event (CLOCK_MONOTONIC)", &s->clk);
}

static loom_status pf_start(loom_backend *b) {
  pf_state *s = st(b);
  char why[512];
  if (s->owner == getpid()) { /* a session before this one: stopped and flushed */
    pf_events_free(s->ev);
    pf_live_free(s->live);
  }
  s->ev = NULL;
  s->live = s->cfg.live ? pf_live_new() : NULL;
  s->owner = getpid();
  s->cfg.unwind = s->live ? pf_live_unwind : NULL;
  s->cfg.unwind_ud = s->live;
  if (pf_events_start(&s->ev, &s->cfg, &s->user_only, &s->paranoid, why, sizeof why)) {
    pf_host->report(b, LOOM_SEV_WARNING, "perf: no CPU samples: %s", why);
    return LOOM_EUNSUPPORTED;
  }
  if (s->user_only)
    pf_host->report(b, LOOM_SEV_WARNING,
                 "perf: kernel.perf_event_paranoid is %d, so only user space is sampled (no "
                 "kernel frames, samples in system calls and context-switch counts are lost); "
                 "`sysctl kernel.perf_event_paranoid=1` or CAP_PERFMON lifts this",
                 s->paranoid);
  return LOOM_OK;
}

static loom_status pf_stop(loom_backend *b) {
  pf_events_stop(st(b)->ev);
  return LOOM_OK;
}

/* The leaf's name: the function, else "module+0xoff" (basename). */
static loom_string_id leaf_name(loom_backend *b, const char *stack) {
  const char *tab = strchr(stack, '\t');
  if (!tab) return pf_host->intern(b, "[unknown]", SIZE_MAX);
  if (tab > stack) return pf_host->intern(b, stack, (size_t)(tab - stack));
  const char *mod = tab + 1, *tab2 = strchr(mod, '\t');
  const char *nl = strchr(mod, '\n');
  if (!tab2 || (nl && nl < tab2)) return pf_host->intern(b, "[unknown]", SIZE_MAX);
  const char *base = mod;
  for (const char *p = mod; p < tab2; p++)
    if (*p == '/') base = p + 1;
  char buf[512];
  size_t off_len = nl ? (size_t)(nl - tab2 - 1) : strlen(tab2 + 1);
  int n = snprintf(buf, sizeof buf, "%.*s+%.*s", (int)(tab2 - base), base, (int)off_len, tab2 + 1);
  return pf_host->intern(b, buf, n > 0 && (size_t)n < sizeof buf ? (size_t)n : SIZE_MAX);
}

/* Emits every sample but the backend's own threads', unwinding those the
 * worker did not reach; returns how many it emitted (*live: of those the
 * worker had unwound) and counts the rest lost when memory runs out. */
static uint64_t emit_stacks(loom_backend *b, pf_state *s, pf_unwinder *u, uint64_t *live) {
  size_t n = pf_events_nsamples(s->ev);
  char *buf = NULL;
  size_t cap = 0, len = 0;
  uint64_t kept = 0;
  size_t i = 0;
  *live = 0;
  for (; i < n; i++) {
    const pf_sample *smp = pf_events_sample(s->ev, i);
    if (pf_events_own(s->ev, smp->tid)) continue;
    const uint64_t *pcs = smp->pcs;
    size_t npcs = smp->unwound ? smp->npcs : pf_unwind_pcs(u, smp, &pcs);
    if (pf_stack_text(u, pcs, npcs, &buf, &cap, &len) < 0) break;
    if (!len) continue;
    loom_arg arg = {.key = "stack", .type = LOOM_ARG_STRING, .v.s = buf};
    loom_record r = {.struct_size = sizeof r, .kind = LOOM_KIND_SAMPLE, .clock = s->clk,
                     .device = LOOM_DEVICE_HOST, .tid = smp->tid, .start = smp->time,
                     .end = smp->time, .name = leaf_name(b, buf), .nargs = 1, .args = &arg};
    if (pf_host->emit(b, &r) == LOOM_ENOMEM) break;
    kept++;
    *live += smp->unwound != 0;
  }
  free(buf);
  size_t rest = 0; /* not emitted: out of memory unwinding or recording them */
  for (; i < n; i++) rest += !pf_events_own(s->ev, pf_events_sample(s->ev, i)->tid);
  if (rest) pf_host->count_lost(b, rest, "CPU samples: out of memory unwinding or recording them");
  return kept;
}

/* The sampling's figures as trace metadata (perf.*), and a warning when
 * stacks were cut. */
static void sample_meta(loom_backend *b, pf_state *s, pf_unwinder *u, uint64_t kept,
                        uint64_t live) {
  unsigned max_frames;
  uint64_t cut = pf_unwinder_cut(u, &max_frames);
  if (cut)
    pf_host->report(b, LOOM_SEV_WARNING, "perf: %llu samples' stacks reached %u frames: their "
                 "outermost frames are left out", (unsigned long long)cut, max_frames);
  uint64_t distinct, sym_ns, unw_ns, dw, fp;
  pf_unwinder_stats(u, &distinct, &sym_ns, &unw_ns, &dw, &fp);
  char v[64];
#define META(k, val)                                                                               \
  snprintf(v, sizeof v, "%llu", (unsigned long long)(val));                                       \
  pf_host->meta_set(b, k, v)
  META("perf.samples", kept);
  META("perf.frequency_hz", 1000000000ull / s->cfg.period_ns);
  META("perf.stack_bytes", s->cfg.stack_bytes);
  META("perf.user_only", s->user_only);
  META("perf.unwound_dwarf", dw);
  META("perf.unwound_frame_pointers", fp);
  META("perf.stacks_cut", cut);
  META("perf.distinct_frames", distinct);
  META("perf.symbolize_ns", sym_ns);
  META("perf.unwind_ns", unw_ns);
  META("perf.threads_at_start", pf_events_threads(s->ev));
  META("perf.live", s->cfg.live);
  META("perf.unwound_while_recording", live);
  pf_host->meta_set(b, "perf.kernel_symbols", pf_unwinder_ksyms(u));
  uint64_t indexed, by_dwfl;
  int64_t mismatched;
  pf_unwinder_names(u, &indexed, &by_dwfl, &mismatched);
  META("perf.names_indexed", indexed);
  META("perf.names_dwfl", by_dwfl);
  if (mismatched >= 0) {
    META("perf.names_mismatched", mismatched);
  }
#undef META
}

static int emit_samples(loom_backend *b, pf_state *s) {
  char why[256] = "";
  pf_live *l = s->live ? s->live : pf_live_new(); /* perf.live=0: an unwinder made now */
  s->live = NULL;
  pf_unwinder *u = l ? pf_live_unwinder(l, s->ev, why, sizeof why) : NULL;
  if (!l) snprintf(why, sizeof why, "out of memory");
  int rc = 0;
  if (!u) {
    pf_host->report(b, LOOM_SEV_WARNING, "perf: samples not unwound: %s", why);
    rc = -1;
  } else {
    if (*why) pf_host->report(b, LOOM_SEV_WARNING, "perf: %s (frame-pointer chains used)", why);
    uint64_t live, kept = emit_stacks(b, s, u, &live);
    sample_meta(b, s, u, kept, live);
  }
  pf_live_free(l); /* its unwinder with it */
  return rc;
}

/* One counter record per thread whenever one of its counts moved, at most
 * one a millisecond: cumulative counts since start. */
typedef struct thr_ctr {
  uint32_t tid;
  uint64_t n[PF_NCTR];
  uint64_t last_emit;
  int dirty;
} thr_ctr;

static void emit_counter(loom_backend *b, pf_state *s, const thr_ctr *c, uint64_t time) {
  static const char *keys[PF_NCTR] = {"context_switches", "page_faults", "cpu_migrations"};
  loom_arg args[PF_NCTR];
  for (int k = 0; k < PF_NCTR; k++)
    args[k] = (loom_arg){.key = keys[k], .type = LOOM_ARG_UINT, .v.u = c->n[k]};
  char name[64];
  snprintf(name, sizeof name, "os counters tid %u", c->tid);
  loom_record r = {.struct_size = sizeof r, .kind = LOOM_KIND_COUNTER, .clock = s->clk,
                   .device = LOOM_DEVICE_HOST, .tid = c->tid, .start = time, .end = time,
                   .name = pf_host->intern(b, name, SIZE_MAX), .nargs = PF_NCTR, .args = args};
  pf_host->emit(b, &r);
}

static void emit_counters(loom_backend *b, pf_state *s) {
  size_t n;
  const pf_tick *t = pf_events_ticks(s->ev, &n);
  thr_ctr *thr = NULL;
  size_t nthr = 0;
  uint64_t last = 0;
  for (size_t i = 0; i < n; i++) {
    if (pf_events_own(s->ev, t[i].tid)) continue;
    size_t j = 0;
    while (j < nthr && thr[j].tid != t[i].tid) j++;
    if (j == nthr) {
      thr_ctr *p = realloc(thr, (nthr + 1) * sizeof *thr);
      if (!p) break;
      thr = p;
      thr[nthr++] = (thr_ctr){.tid = t[i].tid};
      emit_counter(b, s, &thr[j], t[i].time); /* starts at 0 */
    }
    thr[j].n[t[i].which]++;
    thr[j].dirty = 1;
    if (t[i].time >= thr[j].last_emit + 1000000) {
      emit_counter(b, s, &thr[j], t[i].time);
      thr[j].last_emit = t[i].time;
      thr[j].dirty = 0;
    }
    if (t[i].time > last) last = t[i].time;
  }
  for (size_t j = 0; j < nthr; j++)
    if (thr[j].dirty) emit_counter(b, s, &thr[j], last);
  free(thr);
}

static loom_status pf_flush(loom_backend *b) {
  pf_state *s = st(b);
  if (!s->ev) return LOOM_OK;
  uint64_t capped, lost = pf_events_lost(s->ev, &capped);
  if (lost) pf_host->count_lost(b, lost, "perf ring buffer full (the reader fell behind)");
  if (capped) pf_host->count_lost(b, capped, "samples past perf.memory");
  uint64_t oom = pf_events_oom(s->ev);
  if (oom)
    pf_host->count_lost(b, oom,
                        "perf records (samples, counter ticks, mappings) not kept: out of memory");
  size_t opened, gone = pf_events_gone(s->ev, &opened);
  if (gone)
    pf_host->report(b, LOOM_SEV_WARNING,
                    "perf: the program closed %zu of the %zu perf_event descriptors loom opened "
                    "in it (as a program closing the descriptors it inherited does): those events "
                    "ended then, so samples and OS counts after that may be missing (an event "
                    "whose ring stayed mapped went on); loom left the numbers alone",
                    gone, opened);
  emit_samples(b, s);
  if (s->cfg.counters) emit_counters(b, s);
  return LOOM_OK;
}

static void pf_destroy(loom_backend *b) {
  pf_state *s = st(b);
  if (s->owner == getpid()) {
    pf_events_free(s->ev); /* its threads first: the worker may be using the unwinder */
    pf_live_free(s->live);
  }
  s->ev = NULL;
  s->live = NULL;
}

static const loom_option_desc perf_options[] = {
    {"perf.frequency", "samples per second per thread, 1 to 100000 (default 1000)"},
    {"perf.stack", "bytes of user stack copied per sample for DWARF unwinding; 0: frame pointers "
                   "(default 16384)"},
    {"perf.counters", "0: no OS counters (context switches, page faults, migrations) (default 1)"},
    {"perf.memory", "bytes of samples kept while recording, with k/m/g (default 512m)"},
    {"perf.live", "0: unwind and name the samples only after recording, none while the "
                  "program runs (default 1: a worker does it as it goes)"},
    {NULL, NULL}};
static const loom_backend_ops pf_ops = {
    .struct_size = sizeof(loom_backend_ops),
    .options = perf_options,
    .abi_major = LOOM_ABI_MAJOR,
    .abi_minor = LOOM_ABI_MINOR,
    .name = "perf",
    .device_type = "perf",
    .kinds = LOOM_KIND_BIT(LOOM_KIND_SAMPLE) | LOOM_KIND_BIT(LOOM_KIND_COUNTER),
    .state_size = sizeof(pf_state),
    .probe = pf_probe,
    .configure = pf_configure,
    .start = pf_start,
    .stop = pf_stop,
    .flush = pf_flush,
    .destroy = pf_destroy,
};

static loom_status pf_entry(const loom_host *h) {
  if (h->abi_major != LOOM_ABI_MAJOR) return LOOM_EABI;
  if (!LOOM_HOST_HAS(h, meta_set)) return LOOM_EABI;
  pf_host = h;
  return h->backend_register(&pf_ops, NULL);
}

EXPORT loom_status loom_plugin_entry(const loom_host *h) { return pf_entry(h); }

__attribute__((constructor)) static void pf_attach(void) { loom_plugin_attach(pf_entry); }
