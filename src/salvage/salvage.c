/*
 * salvage.c - rebuilds the trace of a process that died without writing it
 * (SIGKILL, the OOM killer, a failed save) from its shared-memory arena
 * (record/arena.h), in `loom record` after the process ended, or in `loom
 * salvage` from the arenas a failed run kept.
 *
 * The file is mapped privately, so pointers can be rewritten to this
 * process's addresses in place without touching it.  Each thread buffer of
 * the recording session is followed chunk by chunk up to its published
 * position: a record half-written at death lies beyond it and is not read.
 * Names that were interned come from the arena's copies; names that were
 * pointers (string literals) are read from the ELF file that was mapped at
 * that address; one that cannot be read becomes a placeholder, counted in a
 * warning.  The trace is then built by the same code as a live one
 * (collect.c); ranges open at death end at the last record, flagged.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"
#include "record/arena.h"
#include "record/record.h"
#include "salvage/salvage.h"
#include "salvage/salvage_bk.h"

typedef struct salv {
  unsigned char *base;
  size_t size;
  loom__ahdr *h;
  uint32_t nseg;
  const char **strs; /* interned id -> string */
  size_t nstrs;
  const loom__amaps **maps; /* snapshots, newest first */
  size_t nmaps;
  loom__tbuf **threads;
  size_t nthreads, cap_threads;
  char *names; /* placeholder and literal strings, kept until the end */
  size_t nnames, cap_names;
  uint64_t unresolved, torn, cut;
  uint64_t last_ts;
  int have_ts;
  loom__salvage_bk bk; /* backends' records, metadata, thread names (salvage_bk.c) */
  char fail[256];
} salv;

/* The salvager's address of writer address p (NULL: not in the arena).
 * need: bytes that must lie within the same segment. */
static void *tr(const salv *v, uint64_t p, uint64_t need) {
  for (uint32_t i = 0; i < v->nseg; i++) {
    const loom__aseg *g = &v->h->seg[i];
    if (p >= g->addr && p - g->addr <= g->size && need <= g->size - (p - g->addr))
      return v->base + g->off + (p - g->addr);
  }
  return NULL;
}

static void *tr_ctx(const void *ctx, uint64_t p, uint64_t need) { return tr(ctx, p, need); }

static int add_thread(salv *v, loom__tbuf *t) {
  return LOOM__PUSH(v->threads, v->nthreads, v->cap_threads, t);
}

/* Rewrites t's chunk list to this process's addresses, cut after the chunk
 * holding the published position (chunks linked after it hold no published
 * record).  0, or -1 when the list is damaged (the thread is left out). */
static int fix_thread(salv *v, loom__tbuf *t) {
  uint64_t pos = (uint64_t)(uintptr_t)atomic_load_explicit(&t->pos, memory_order_relaxed);
  uint64_t c = (uint64_t)(uintptr_t)t->head;
  t->head = t->tail = t->pending = t->before = NULL;
  t->icache = NULL;
  t->next = NULL;
  t->name[sizeof t->name - 1] = 0;
  if (!pos) {
    atomic_store(&t->pos, NULL);
    return 0;
  }
  loom__chunk *prev = NULL;
  int cut = 0;
  for (size_t guard = 0; c && guard < (1u << 24); guard++) {
    loom__chunk *k = tr(v, c, sizeof *k);
    if (!k || k->cap > v->size / sizeof(loom__hrec) ||
        !tr(v, c, sizeof *k + k->cap * sizeof(loom__hrec))) {
      /* a chunk outside the arena (it could not grow): the full chunks
       * before it hold only published records */
      v->cut++;
      cut = 1;
      break;
    }
    uint64_t next = (uint64_t)(uintptr_t)k->next;
    k->next = NULL;
    if (prev) prev->next = k;
    else t->head = k;
    prev = k;
    uint64_t first = c + sizeof *k, end = first + k->cap * sizeof(loom__hrec);
    /* pos is one past the last record written, never a chunk's first slot */
    if (pos > first && pos <= end && (pos - first) % sizeof(loom__hrec) == 0) {
      atomic_store(&t->pos, (loom__hrec *)(void *)((unsigned char *)k + (pos - c)));
      t->tail = k;
      return 0;
    }
    c = next;
  }
  /* the position is in none of its chunks: damaged, unless the thread was
   * staged and died between moving it and linking the chunk it moved to
   * (hostrec.c, stage_flip: the tail still holds those records) */
  if (!prev || (!cut && !t->staged)) return -1;
  /* the position lies beyond the chunks found: keep them whole */
  atomic_store(&t->pos, (loom__hrec *)(prev->recs + prev->cap));
  t->tail = prev;
  return 0;
}

static void keep_str(salv *v, const loom__astr *a, uint64_t room) {
  if (sizeof *a + (uint64_t)a->len + 1 > room || !a->id || a->s[a->len]) return;
  if (a->id >= v->nstrs) {
    size_t cap = v->nstrs;
    if (loom__grow((void **)&v->strs, &cap, (size_t)a->id + 1, sizeof *v->strs)) return;
    memset(v->strs + v->nstrs, 0, (cap - v->nstrs) * sizeof *v->strs);
    v->nstrs = cap;
  }
  v->strs[a->id] = a->s;
}

static void keep_maps(salv *v, const loom__amaps *m, uint64_t room) {
  if (sizeof *m + (uint64_t)m->n * sizeof(loom__amap) + m->paths_len > room) return;
  const char *paths = (const char *)(m->m + m->n);
  if (m->paths_len && paths[m->paths_len - 1]) return;
  size_t cap = v->nmaps;
  if (loom__grow((void **)&v->maps, &cap, v->nmaps + 1, sizeof *v->maps)) return;
  size_t i = v->nmaps++;
  while (i && v->maps[i - 1]->seq < m->seq) { /* newest first */
    v->maps[i] = v->maps[i - 1];
    i--;
  }
  v->maps[i] = m;
}

/* The newest snapshot of the process's mappings that loom record took from
 * outside (<pid>.maps beside <pid>.arena, the text of /proc/PID/maps: a
 * library loaded while recording, tools/loom/mapsnap.c), kept as the newest
 * of the snapshots; the caller frees it.  NULL when there is none. */
static loom__amaps *maps_from_outside(salv *v, const char *arena) {
  char path[4096];
  size_t l = strlen(arena);
  if (l < 6 || strcmp(arena + l - 6, ".arena") || l + 1 > sizeof path) return NULL;
  snprintf(path, sizeof path, "%.*s.maps", (int)(l - 6), arena);
  FILE *f = fopen(path, "re");
  if (!f) return NULL;
  loom__amaps *m = loom__maps_parse(f);
  fclose(f);
  if (m) {
    m->seq = UINT64_MAX; /* after every snapshot the process took */
    keep_maps(v, m, loom__maps_size(m));
  }
  return m;
}

/* Walks every segment's objects. */
static void walk(salv *v) {
  uint32_t epoch = atomic_load(&v->h->epoch);
  for (uint32_t i = 0; i < v->nseg; i++) {
    const loom__aseg *g = &v->h->seg[i];
    uint64_t at = i == 0 ? v->h->hdr_size : 0;
    while (at + sizeof(loom__aobj) <= g->size) {
      loom__aobj *o = (loom__aobj *)(void *)(v->base + g->off + at);
      if (!o->size) break; /* the end of what was allocated */
      if (o->size % 16 || o->size > g->size - at) {
        v->torn++;
        break;
      }
      void *body = o + 1;
      uint64_t room = o->size - sizeof *o;
      if (atomic_load(&o->state) == LOOM__AS_LIVE) {
        if (o->kind == LOOM__AO_TBUF && room >= sizeof(loom__tbuf)) {
          loom__tbuf *t = body;
          if (t->epoch != epoch) {
            /* a buffer of an earlier session, or of none */
          } else if (fix_thread(v, t) != 0) {
            v->torn++; /* its chunk list is damaged: said in a warning */
          } else if (add_thread(v, t) != 0) {
            v->torn++;
            return;
          }
        } else if (o->kind == LOOM__AO_STR && room >= sizeof(loom__astr)) {
          keep_str(v, body, room);
        } else if (o->kind == LOOM__AO_MAPS && room >= sizeof(loom__amaps)) {
          keep_maps(v, body, room);
        } else {
          loom__salvage_bk_take(&v->bk, o->kind, body, room);
        }
      }
      at += o->size;
    }
  }
}

/* A string kept in v->names; returns its offset + 1 (0: out of memory). */
static size_t keep_name(salv *v, const char *s, size_t n) {
  if (loom__grow((void **)&v->names, &v->cap_names, v->nnames + n + 1, 1)) return 0;
  size_t at = v->nnames;
  memcpy(v->names + at, s, n);
  v->names[at + n] = 0;
  v->nnames += n + 1;
  return at + 1;
}

/* The string literal at writer address p, read from the file mapped there. */
static int read_literal(const salv *v, uint64_t p, char *out, size_t n) {
  for (size_t i = 0; i < v->nmaps; i++) {
    const loom__amaps *m = v->maps[i];
    const char *paths = (const char *)(m->m + m->n);
    for (uint32_t k = 0; k < m->n; k++) {
      if (p < m->m[k].start || p >= m->m[k].end || m->m[k].path >= m->paths_len) continue;
      int fd = open(paths + m->m[k].path, O_RDONLY | O_CLOEXEC);
      if (fd < 0) return -1;
      uint64_t room = m->m[k].end - p;
      size_t want = room < n - 1 ? (size_t)room : n - 1;
      ssize_t got = pread(fd, out, want, (off_t)(p - m->m[k].start + m->m[k].off));
      close(fd);
      if (got <= 0) return -1;
      out[got] = 0;
      return memchr(out, 0, (size_t)got) || (size_t)got == want ? 0 : -1;
    }
  }
  return -1;
}

/* Names are resolved once per distinct value (collect.c caches them), so
 * the strings returned here may live in v->names, which may move: the
 * caller copies them at once into the trace. */
static const char *salv_name(void *ud, uint64_t name, uint16_t flags) {
  salv *v = ud;
  char buf[1024];
  if (flags & LOOM__HR_F_ID) {
    if (name < v->nstrs && v->strs[name]) return v->strs[name];
    snprintf(buf, sizeof buf, "<string %llu: not in loom's shared memory>",
             (unsigned long long)name);
    v->unresolved++;
  } else if (read_literal(v, name, buf, sizeof buf) != 0) {
    snprintf(buf, sizeof buf, "<name at 0x%llx: not readable after the process died>",
             (unsigned long long)name);
    v->unresolved++;
  }
  size_t at = keep_name(v, buf, strlen(buf));
  return at ? v->names + at - 1 : "";
}

/* The last record's timestamp over every thread. */
static void last_ts(salv *v) {
  for (size_t i = 0; i < v->nthreads; i++) {
    loom__tbuf *t = v->threads[i];
    loom__hrec *stop = atomic_load(&t->pos);
    for (loom__chunk *c = t->head; c; c = c->next) {
      loom__hrec *end = (stop >= c->recs && stop <= c->recs + c->cap) ? stop : c->recs + c->cap;
      for (loom__hrec *r = c->recs; r < end; r++) {
        if (r->type == LOOM__HR_RAW) { /* its ts holds bytes; the rest follows */
          r += loom__raw_slots(r->spare);
          continue;
        }
        uint64_t ts = r->type == LOOM__HR_BCALL && r->a > r->ts ? r->a : r->ts; /* its end */
        if (r->type && (!v->have_ts || ts > v->last_ts)) v->last_ts = ts, v->have_ts = 1;
      }
    }
  }
}

/* The last time any backend's record reached, on the session's timeline,
 * or `floor` when none is later: the rebuilt trace ends there, so that
 * device work after the process's last host record (or in a process that
 * made none) is kept, not cut as outside the window. */
static int64_t backends_end(loom_session *s, int64_t floor) {
  int64_t end = floor;
  for (size_t i = 0; i < s->nbk; i++) {
    loom__bsess *bs = s->bk[i]->bs;
    for (size_t k = 0; bs && k < bs->nrecs; k++) {
      const loom__drec *d = &bs->recs[k];
      if (!d->clock || d->clock > bs->nclocks) continue;
      int64_t te = loom__clock_convert(&s->tl, &bs->clocks[d->clock - 1],
                                       d->end > d->start ? d->end : d->start);
      if (te > end) end = te;
    }
  }
  return end;
}

static int open_arena(salv *v, const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || (size_t)st.st_size < LOOM__ARENA_HDR) {
    snprintf(v->fail, sizeof v->fail, "%s is missing or too short", path);
    if (fd >= 0) close(fd);
    return -1;
  }
  v->size = (size_t)st.st_size;
  void *p = mmap(NULL, v->size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    snprintf(v->fail, sizeof v->fail, "cannot map %s", path);
    return -1;
  }
  v->base = p;
  v->h = p;
  if (v->h->magic != LOOM__ARENA_MAGIC || v->h->version != LOOM__ARENA_VERSION ||
      v->h->hdr_size < sizeof *v->h || v->h->hdr_size > LOOM__ARENA_HDR) {
    snprintf(v->fail, sizeof v->fail, "%s is not a loom arena of this version", path);
    return -1;
  }
  v->nseg = atomic_load(&v->h->nseg);
  if (v->nseg > LOOM__ARENA_MAXSEG) v->nseg = 0;
  for (uint32_t i = 0; i < v->nseg; i++) /* a segment the file does not hold ends the table */
    if (v->h->seg[i].off > v->size || v->h->seg[i].size > v->size - v->h->seg[i].off) v->nseg = i;
  v->h->name[sizeof v->h->name - 1] = v->h->comm[sizeof v->h->comm - 1] = 0;
  v->h->out[sizeof v->h->out - 1] = v->h->opts[sizeof v->h->opts - 1] = 0;
  return 0;
}

static int session_opts(loom__opts *o, const loom__ahdr *h) {
  size_t len = h->opts_len < sizeof h->opts ? h->opts_len : 0;
  for (size_t at = 0; at < len;) {
    const char *k = h->opts + at, *val = k + strlen(k) + 1;
    if ((size_t)(val - h->opts) >= len) break;
    size_t ck = o->cap, cv = o->cap;
    if (loom__grow((void **)&o->keys, &ck, o->n + 1, sizeof *o->keys) ||
        loom__grow((void **)&o->vals, &cv, o->n + 1, sizeof *o->vals))
      return -1;
    o->cap = ck < cv ? ck : cv;
    if (!(o->keys[o->n] = loom__strdup(k))) return -1;
    if (!(o->vals[o->n] = loom__strdup(val))) {
      free(o->keys[o->n]);
      return -1;
    }
    o->n++;
    at = (size_t)(val - h->opts) + strlen(val) + 1;
  }
  return 0;
}

static void count(const loom_trace *t, loom__salvage_result *r) {
  for (size_t i = 0; i < t->nev; i++) {
    const loom__ev *e = &t->ev[i];
    if (e->kind == LOOM_KIND_USER_RANGE && e->ph != LOOM__PH_INSTANT) r->ranges++;
    if (e->kind == LOOM_KIND_CPU_OP) r->ops++;
    if (e->flags & LOOM__EV_UNCLOSED) r->unclosed++;
  }
}

int loom__salvage_peek(const char *path, int *pid, char *comm, size_t ncomm, char *out,
                       size_t nout, int *pending) {
  salv v = {0};
  int rc = open_arena(&v, path);
  if (rc == 0) {
    *pid = v.h->pid;
    snprintf(comm, ncomm, "%s", v.h->comm);
    snprintf(out, nout, "%s", v.h->out);
    *pending = atomic_load(&v.h->recording) != 0;
  }
  if (v.base) munmap(v.base, v.size);
  return rc;
}

/* The trace's first warning: how the process ended and that it was rebuilt. */
static void say_death(loom_session *s, const char *death) {
  const char *how = "rebuilt it from the records in its shared memory (ranges open at death end "
                    "at the last record, flagged unclosed; device work still in the runtime's "
                    "buffers is lost)";
  if (death && !strncmp(death, "could not write its trace", 25))
    loom__session_warn(s, "the process %s; loom rebuilt its trace from the records in its shared "
                       "memory (device work the runtime had not handed to loom by the end is "
                       "lost)", death);
  else
    loom__session_warn(s, "the process %s before it could write its trace; loom %s",
                       death && *death ? death : "died", how);
}

/* The session the dead process's records are collected with: its timeline,
 * sizes, name and options, its backends as they were (salvage_bk.c).  0, or
 * -1 out of memory (*out, when not NULL, is the caller's to free). */
static int rebuild_session(salv *v, loom_session **out) {
  loom_session *s = loom__session_stopped(v->h->name, v->h->tl, v->h->chunk_bytes,
                                          v->h->cap_bytes);
  *out = s;
  if (!s || session_opts(&s->opts, v->h)) return -1;
  const char *mode = loom__opts_get(&s->opts, "mode");
  s->ring = mode && !strcmp(mode, "ring"); /* the trace says what its ring overwrote */
  /* the backends, their devices and the process's metadata, as they were */
  return loom__salvage_bk_build(&v->bk, s, tr_ctx, v, v->strs, v->nstrs) ? -1 : 0;
}

/* The trace's end: the last host record's time (not before the start), or
 * a backend's later record. */
static int64_t trace_end(const salv *v, loom_session *s, loom_clock_domain dom) {
  int64_t start = loom__timeline_convert(&s->tl, LOOM_CLOCK_REALTIME,
                                         (uint64_t)s->tl.start[LOOM_CLOCK_REALTIME].real);
  int64_t end = v->have_ts ? loom__timeline_convert(&s->tl, dom, v->last_ts) : start;
  if (end < start) end = start;
  return backends_end(s, end);
}

/* A warning of the rebuilt trace, also on stderr.  0, or -1 out of memory. */
static int warn(loom_trace *t, const char *w) {
  loom__log(LOOM_SEV_WARNING, "%s", w);
  return loom__trace_add_warning(t, w);
}

/* Warnings of what the rebuilt trace lacks: records backends held in the
 * process's memory at death, records lost when the arena could not grow,
 * names and raw arguments that could not be read.  0, or -1. */
static int loss_warnings(salv *v, loom_trace *t, uint64_t raw_unformatted,
                         loom__salvage_result *res) {
  char w[512];
  uint32_t nbk = atomic_load(&v->h->nbk);
  for (uint32_t i = 0; i < nbk && i < LOOM__ARENA_MAXBK; i++) {
    uint64_t held = atomic_load(&v->h->bk[i].held);
    if (!held) continue;
    v->h->bk[i].name[sizeof v->h->bk[i].name - 1] = 0;
    snprintf(w, sizeof w, "backend '%s' lost %llu records (%llu: they were in the process's "
             "memory when it died; device work still in the runtime's buffers is lost too "
             "and not counted)", v->h->bk[i].name, (unsigned long long)held,
             (unsigned long long)held);
    t->dropped += held;
    res->bk_lost += held;
    if (warn(t, w)) return -1;
  }
  uint64_t failed = atomic_load(&v->h->failed);
  if (failed || v->cut) {
    snprintf(w, sizeof w, "loom's shared memory could not grow %llu times (disk full, or the "
             "address space exhausted): records then kept in the process's own memory are lost "
             "(%llu threads cut short)", (unsigned long long)failed, (unsigned long long)v->cut);
    if (warn(t, w)) return -1;
  }
  if (v->unresolved || raw_unformatted || v->torn) {
    snprintf(w, sizeof w, "after the process died: %llu record names could not be read "
             "(shown as placeholders), %llu raw op arguments could not be formatted, %llu "
             "damaged arena blocks or thread buffers were skipped",
             (unsigned long long)v->unresolved, (unsigned long long)raw_unformatted,
             (unsigned long long)v->torn);
    if (warn(t, w)) return -1;
  }
  return 0;
}

/* What the caller is told of the trace written. */
static void summarize(const loom_trace *t, const salv *v, loom__salvage_result *res) {
  loom_trace_summary sm = {.struct_size = sizeof sm};
  loom_trace_summarize(t, &sm);
  res->events = sm.events;
  res->flows = sm.flows;
  res->devices = sm.devices;
  res->dropped = sm.dropped;
  res->warnings = sm.warnings;
  res->unresolved = v->unresolved;
  res->threads = v->nthreads;
  count(t, res);
}

/* Releases what a salvage held. */
static void salv_free(salv *v, loom__amaps *outside) {
  free(v->strs);
  free(v->maps);
  free(outside);
  free(v->threads);
  free(v->names);
  if (v->base) munmap(v->base, v->size);
}

loom_status loom__salvage_to(const char *path, const loom__salvage_opts *o,
                             loom__salvage_result *res) {
  loom__ensure_init();
  memset(res, 0, sizeof *res);
  salv v = {0};
  loom_session *s = NULL;
  loom_trace *t = NULL;
  loom__amaps *outside = NULL;
  loom_status st = LOOM_ENOMEM;
  if (open_arena(&v, path) != 0) {
    st = loom__fail(LOOM_EINVAL, "cannot rebuild the trace: %s", v.fail);
    goto out;
  }
  if (!atomic_load(&v.h->recording) || v.h->tl_size != sizeof(loom__timeline)) {
    st = loom__fail(LOOM_EINVAL, "cannot rebuild the trace: the process had not started "
                    "recording (or had written its trace)");
    goto out;
  }
  walk(&v);
  outside = maps_from_outside(&v, path);
  last_ts(&v);
  if (rebuild_session(&v, &s)) goto fail;
  loom__rec_image img = {.pid = v.h->pid, .comm = v.h->comm, .dom = v.h->domain, .dead = 1,
                         .threads = v.threads, .nthreads = v.nthreads, .name = salv_name,
                         .ud = &v, .thread_name = loom__salvage_bk_thread_name, .tn_ud = &v.bk};
  img.end_ns = trace_end(&v, s, img.dom);
  say_death(s, o->death);
  /* the warnings collect adds come after; placeholders are counted last */
  st = loom__collect_image(s, &img, &t);
  if (st != LOOM_OK) goto out;
  if (loom__salvage_bk_report(&v.bk, t, o->quiet_unused ? (o->asked ? o->asked : "") : NULL,
                       res->bk_summary, sizeof res->bk_summary, &res->bk_lost, &res->bk_kept))
    goto fail;
  v.unresolved += v.bk.unresolved;
  v.torn += v.bk.torn;
  if (loss_warnings(&v, t, img.raw_unformatted, res)) goto fail;
  snprintf(res->out, sizeof res->out, "%s", o->out ? o->out : v.h->out);
  st = loom_trace_save(t, res->out);
  if (st == LOOM_OK) summarize(t, &v, res);
  goto out;
fail:
  st = loom__fail(LOOM_ENOMEM, "out of memory rebuilding the trace");
out:
  loom_trace_free(t);
  loom__salvage_bk_free(&v.bk, s);
  if (s) loom__session_free_stopped(s);
  salv_free(&v, outside);
  return st;
}
