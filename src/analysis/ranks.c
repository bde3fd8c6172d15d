/*
 * ranks.c - what the cross-rank figures keep from each input, and which
 * rank each event belongs to (ranks.h).  The matching and the wait states
 * are in waits.c.
 */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "export/export.h"
#include "ranks.h"

const char *const loom__wait_name[LOOM__W_COUNT_] = {
    "late_sender", "late_receiver", "wait_nxn", "wait_barrier", "late_broadcast", "early_reduce"};

enum { K_COMM, K_SEQ, K_ROOT, K_DST, K_SRC, K_TAG, K_RTAG, K_REQ, K_WAIT, K_UNCLOSED, K_COUNT_ };
static const char *const key_str[K_COUNT_] = {
    "comm", "seq", "root", "dst", "src", "tag", "recv_tag", "request", "wait_start_ns", "unclosed"};

loom__ranks *loom__ranks_new(void) {
  loom__ranks *k = calloc(1, sizeof *k);
  if (!k) return NULL;
  loom__strtab_init(&k->strs);
  k->pace_step = -1;
  k->pace_rank = -1;
  k->wait_threshold_ns = LOOM__WAIT_THRESHOLD_NS;
  return k;
}

void loom__ranks_free(loom__ranks *k) {
  if (!k) return;
  loom__strtab_free(&k->strs);
  loom__map_free(&k->name_marks);
  loom__map_free(&k->waits_for);
  free(k->ev);
  free(k->rank_id);
  free(k->step_no);
  free(k->step_ns);
  free(k->wait_ns);
  free(k->state_ns);
  free(k->step_state_ns);
  free(k->comm_ns);
  free(k->caused_ns);
  free(k->root_ns);
  free(k->noise_ns);
  free(k->waits);
  free(k->sites);
  free(k);
}

static void lookup_keys(loom__ranks *k, const loom_trace *t) {
  if (t->strs.n == k->kstrs) return;
  k->kstrs = t->strs.n;
  for (int i = 0; i < K_COUNT_; i++)
    if (!k->k[i]) k->k[i] = loom__strtab_find(&t->strs, key_str[i], strlen(key_str[i]));
}

static int64_t arg_int(const loom__ranks *k, int key, const loom__targ *args, uint16_t n) {
  for (uint16_t i = 0; k->k[key] && i < n; i++)
    if (args[i].key == k->k[key]) {
      if (args[i].type == LOOM_ARG_DOUBLE) return (int64_t)args[i].v.d;
      if (args[i].type == LOOM_ARG_STRING) return LOOM__RK_NONE;
      return args[i].v.i;
    }
  return LOOM__RK_NONE;
}

/* "ProfilerStep#12" -> 12, else -1. */
static int64_t step_number(const char *s) {
  if (strncmp(s, "ProfilerStep#", 13) || s[13] < '0' || s[13] > '9') return -1;
  return strtoll(s + 13, NULL, 10);
}

static int push(loom__ranks *k, const loom__rkev *v) {
  if (LOOM__PUSH(k->ev, k->nev, k->cap_ev, *v)) {
    k->oom = 1;
    return -1;
  }
  return 0;
}

/* ---- what an event is for ------------------------------------------------
 * The marks a backend gave the record (LOOM_RECORD_F_*: send, recv, post,
 * wait, the collective patterns), with the arguments they promise.  A trace
 * written before the marks existed has none (or only "comm"): its names are
 * looked up in the role descriptions the backends list
 * (backends/x/report-names.def, LOOM_REPORT_ROLES), once per name. */
#define LOOM_REPORT_NAME(k, str)
#define LOOM_REPORT_ROLES(str, marks) {str, marks},
static const struct { const char *name; unsigned marks; } role_names[] = {
#include "report_names.h"
#include "util/util.h"
    {NULL, 0}};
#undef LOOM_REPORT_ROLES
#undef LOOM_REPORT_NAME

#define MSG_MARKS                                                                                  \
  (LOOM__ROLE_ALL & ~(unsigned)(LOOM_RECORD_F_LAUNCH | LOOM_RECORD_F_MEMORY | LOOM_RECORD_F_COMM | \
                                LOOM_RECORD_F_ALLOC | LOOM_RECORD_F_FREE))

static unsigned listed_marks(const char *n) {
  for (size_t i = 0; role_names[i].name; i++) {
    const char *t = role_names[i].name;
    size_t len = strlen(t);
    if (len && t[len - 1] == '*' ? !strncmp(n, t, len - 1) : !strcmp(n, t))
      return role_names[i].marks;
  }
  return 0;
}

unsigned loom__ranks_marks(loom__ranks *k, const loom_trace *t, const loom__ev *e) {
  unsigned m = LOOM__EV_ROLE_OF(e);
  if ((m & MSG_MARKS) || (m & (LOOM_RECORD_F_LAUNCH | LOOM_RECORD_F_MEMORY))) return m;
  if (k->last_name != e->name + 1) { /* names come in runs: one lookup per run */
    uint64_t *c = loom__map_get(&k->name_marks, (uint64_t)e->name + 1);
    unsigned l = c ? (unsigned)(*c - 1) : listed_marks(loom__trace_cstr(t, e->name));
    if (!c && loom__map_put(&k->name_marks, (uint64_t)e->name + 1, (uint64_t)l + 1)) k->oom = 1;
    k->last_name = e->name + 1;
    k->last_marks = l;
  }
  return m | k->last_marks;
}

/* The wait state of a collective: its marked pattern, else (unmarked
 * collectives of other tools) its name compared without case, underscores
 * and a "lib:" prefix ("all_reduce", "gloo:allreduce"); nonblocking ones
 * wait in their completion call and have none: -1. */
static int pattern_of(unsigned m, const char *name) {
  if (m & LOOM_RECORD_F_BARRIER) return LOOM__W_BARRIER;
  if (m & LOOM_RECORD_F_NXN) return LOOM__W_NXN;
  if (m & LOOM_RECORD_F_ONE_TO_ALL) return LOOM__W_LATE_BCAST;
  if (m & LOOM_RECORD_F_ALL_TO_ONE) return LOOM__W_EARLY_REDUCE;
  const char *c = strrchr(name, ':');
  if (c) name = c + 1;
  char n[40];
  size_t j = 0;
  for (; *name && j + 1 < sizeof n; name++)
    if (*name != '_') n[j++] = (char)(*name >= 'A' && *name <= 'Z' ? *name + 32 : *name);
  n[j] = 0;
  static const char *const nxn[] = {"allreduce", "allgather", "allgatherv",    "alltoall",
                                    "alltoallv", "alltoallw", "reducescatter", "reducescatterblock",
                                    "scan",      "exscan"};
  static const char *const bcast[] = {"bcast", "broadcast", "scatter", "scatterv"};
  static const char *const reduce[] = {"reduce", "gather", "gatherv"};
  if (!strcmp(n, "barrier")) return LOOM__W_BARRIER;
  for (size_t i = 0; i < sizeof nxn / sizeof *nxn; i++)
    if (!strcmp(n, nxn[i])) return LOOM__W_NXN;
  for (size_t i = 0; i < sizeof bcast / sizeof *bcast; i++)
    if (!strcmp(n, bcast[i])) return LOOM__W_LATE_BCAST;
  for (size_t i = 0; i < sizeof reduce / sizeof *reduce; i++)
    if (!strcmp(n, reduce[i])) return LOOM__W_EARLY_REDUCE;
  return -1;
}

/* A communication call: its time, and what it says of collectives, sends
 * and receives (v holds the call; m its marks; src, dst and rtag its
 * arguments). */
static int comm_call(loom__ranks *k, loom__rkev *v, unsigned m, const char *name, int kind,
                     const loom__targ *args, uint16_t n) {
  int64_t src = arg_int(k, K_SRC, args, n), dst = arg_int(k, K_DST, args, n);
  int64_t rtag = arg_int(k, K_RTAG, args, n);
  v->type = LOOM__RK_OTHER; /* every call: its time counts as communication */
  if (push(k, v)) return -1;
  int pat = (m & LOOM__ROLE_PATTERNS) || kind == LOOM_KIND_COLLECTIVE ? pattern_of(m, name) : -1;
  if (pat >= 0 && v->a_seq != LOOM__RK_NONE && v->a_comm != LOOM__RK_NONE) {
    v->type = LOOM__RK_COLL;
    v->pattern = (uint8_t)pat;
    if (push(k, v)) return -1;
  }
  if ((m & LOOM_RECORD_F_SEND) && dst != LOOM__RK_NONE) {
    v->type = LOOM__RK_SEND;
    v->a_peer = dst;
    v->a_tag = arg_int(k, K_TAG, args, n);
    if (push(k, v)) return -1;
  }
  /* A receive completes where the call names what arrived ("recv_tag"). */
  if ((m & LOOM_RECORD_F_RECV) && src != LOOM__RK_NONE && rtag != LOOM__RK_NONE) {
    v->type = LOOM__RK_RECV;
    v->a_peer = src;
    v->a_tag = rtag;
    if (push(k, v)) return -1;
  } else if ((m & LOOM_RECORD_F_POST) && v->a_req != LOOM__RK_NONE) {
    v->type = LOOM__RK_IRECV;
    if (push(k, v)) return -1;
  }
  return 0;
}

/* A step range (v.step its number): kept unless the end of the recording
 * closed it (loom's "unclosed" mark: the last loom_step's, up to the
 * program's exit), which is not an iteration. */
static int step_range(loom__ranks *k, loom__rkev *v, const loom__ev *e, const loom__targ *args) {
  int64_t open = arg_int(k, K_UNCLOSED, args, e->nargs);
  if ((e->flags & LOOM__EV_UNCLOSED) || (open != LOOM__RK_NONE && open)) return 0;
  v->type = LOOM__RK_STEP;
  return push(k, v);
}

int loom__ranks_event(loom__ranks *k, const loom_trace *t, const loom__ev *e,
                      const loom__targ *args) {
  if (e->ph != LOOM__PH_COMPLETE && e->ph != LOOM__PH_INSTANT) return 0;
  /* Steps and communication calls are host side; device queues belong to
   * devices, not to ranks (a trace's device pids would look like ranks). */
  if (e->track >= t->ntracks || t->tracks[e->track].device != LOOM_DEVICE_HOST) return 0;
  lookup_keys(k, t);
  const char *name = loom__trace_cstr(t, e->name);
  loom__rkev v;
  memset(&v, 0, sizeof v);
  v.ts = e->ts;
  v.end = e->ts + (e->dur > 0 ? e->dur : 0);
  v.pid = t->tracks[e->track].pid;
  v.step = -1;
  if (e->ph == LOOM__PH_COMPLETE &&
      (e->kind == LOOM_KIND_USER_RANGE || e->kind == LOOM_KIND_CPU_OP) &&
      (v.step = (int32_t)step_number(name)) >= 0)
    return step_range(k, &v, e, args);
  v.step = -1;
  unsigned m = loom__ranks_marks(k, t, e);
  if (e->kind != LOOM_KIND_COLLECTIVE && !(m & (MSG_MARKS | LOOM_RECORD_F_COMM))) return 0;
  v.name = loom__strtab_intern(&k->strs, name, strlen(name));
  if (!v.name) return k->oom = 1, -1;
  uint16_t n = e->nargs;
  v.a_comm = arg_int(k, K_COMM, args, n);
  v.a_seq = arg_int(k, K_SEQ, args, n);
  v.a_root = arg_int(k, K_ROOT, args, n);
  v.a_req = arg_int(k, K_REQ, args, n);
  v.a_wait = arg_int(k, K_WAIT, args, n);
  v.blocking = (m & LOOM_RECORD_F_WAIT) != 0;
  if (e->ph == LOOM__PH_INSTANT) { /* a receive a wait call completed, at its end */
    int64_t src = arg_int(k, K_SRC, args, n), rtag = arg_int(k, K_RTAG, args, n);
    if (!(m & LOOM_RECORD_F_RECV) || src == LOOM__RK_NONE || rtag == LOOM__RK_NONE) return 0;
    v.type = LOOM__RK_DONE;
    v.a_peer = src;
    v.a_tag = rtag;
    return push(k, &v);
  }
  return comm_call(k, &v, m, name, e->kind, args, n);
}

static int32_t rank_index(loom__ranks *k, int64_t id) {
  for (size_t i = 0; i < k->nranks; i++)
    if (k->rank_id[i] == id) return (int32_t)i;
  size_t cap = k->nranks;
  if (LOOM__PUSH(k->rank_id, k->nranks, cap, id)) return k->oom = 1, -1;
  return (int32_t)k->nranks - 1;
}

/* World rank of process pid: "rank R: ..." in its name, else -1. */
static int64_t rank_of_proc(const loom_trace *t, int64_t pid) {
  for (size_t i = 0; i < t->nprocs; i++) {
    if (t->procs[i].pid != pid) continue;
    const char *n = loom__trace_cstr(t, t->procs[i].name);
    if (!strncmp(n, "rank ", 5) && n[5] >= '0' && n[5] <= '9') return strtoll(n + 5, NULL, 10);
  }
  return -1;
}

int64_t loom__ranks_meta_rank(const loom_trace *t) {
  for (size_t i = 0; i < t->nmeta; i++)
    if (!strcmp(loom__trace_cstr(t, t->meta[i].key), "rank")) {
      const char *v = loom__trace_cstr(t, t->meta[i].value);
      if (*v >= '0' && *v <= '9') return strtoll(v, NULL, 10);
    }
  return -1;
}

/* A rank number nobody claimed (inputs that do not say theirs). */
static int64_t free_rank(const loom__ranks *k, int64_t from) {
  for (int64_t r = from;; r++) {
    size_t i = 0;
    while (i < k->nranks && k->rank_id[i] != r) i++;
    if (i == k->nranks) return r;
  }
}

int loom__ranks_end_input(loom__ranks *k, const loom_trace *meta) {
  int64_t whole = loom__ranks_meta_rank(meta); /* the input is one rank */
  if (whole < 0 && k->input > 0) whole = free_rank(k, k->input);
  loom__map seen = {0};         /* pid + 1 -> rank index + 1 (one rank per process) */
  for (size_t i = k->file0; i < k->nev && !k->oom; i++) {
    loom__rkev *v = &k->ev[i];
    v->ts += meta->base_ns;
    v->end += meta->base_ns;
    uint64_t *r = loom__map_get(&seen, (uint64_t)v->pid + 1);
    if (!r) {
      int64_t id = rank_of_proc(meta, v->pid);
      if (id < 0) id = whole >= 0 ? whole : free_rank(k, 0);
      int32_t x = rank_index(k, id);
      if (x < 0 || loom__map_put(&seen, (uint64_t)v->pid + 1, (uint64_t)x + 1)) k->oom = 1;
      r = loom__map_get(&seen, (uint64_t)v->pid + 1);
      if (!r) break;
    }
    v->rank = (int32_t)*r - 1;
  }
  loom__map_free(&seen);
  k->file0 = k->nev;
  k->input++;
  memset(k->k, 0, sizeof k->k);
  k->kstrs = 0;
  loom__map_free(&k->name_marks); /* string ids are the input's */
  memset(&k->name_marks, 0, sizeof k->name_marks);
  k->last_name = 0;
  return k->oom ? -1 : 0;
}

static int on_event(void *ctx, const loom_trace *t, const loom__ev *e, const loom__targ *args) {
  return loom__ranks_event(ctx, t, e, args);
}

loom_status loom__ranks_read(loom__ranks *k, const char *path) {
  loom__sink sink = {.event = on_event, .ctx = k};
  loom_trace *meta = NULL;
  loom_status st = loom__trace_stream(path, &sink, &meta);
  if (st == LOOM_OK && loom__ranks_end_input(k, meta))
    st = loom__fail(LOOM_ENOMEM, "out of memory reading %s", path);
  loom_trace_free(meta);
  return st;
}

/* ---- results ---------------------------------------------------------------- */
static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* Distinct step numbers, ascending, and each rank's step times (the longest
 * range when a rank has several of one number). */
static int step_table(loom__ranks *k) {
  size_t cap = 0;
  for (size_t i = 0; i < k->nev; i++) {
    if (k->ev[i].type != LOOM__RK_STEP) continue;
    int64_t no = k->ev[i].step;
    size_t j = 0;
    while (j < k->nsteps && k->step_no[j] != no) j++;
    if (j == k->nsteps && LOOM__PUSH(k->step_no, k->nsteps, cap, no)) return -1;
  }
  if (k->nsteps) qsort(k->step_no, k->nsteps, sizeof *k->step_no, cmp_i64);
  size_t cells = k->nranks * k->nsteps + 1;
  k->step_ns = malloc(cells * sizeof *k->step_ns);
  k->wait_ns = calloc(cells, sizeof *k->wait_ns);
  k->caused_ns = calloc(cells, sizeof *k->caused_ns);
  k->root_ns = calloc(cells, sizeof *k->root_ns);
  k->noise_ns = calloc(k->nranks + 1, sizeof *k->noise_ns);
  k->state_ns = calloc(k->nranks * LOOM__W_COUNT_ + 1, sizeof *k->state_ns);
  k->step_state_ns = calloc(k->nsteps * LOOM__W_COUNT_ + 1, sizeof *k->step_state_ns);
  k->comm_ns = calloc(k->nranks + 1, sizeof *k->comm_ns);
  if (!k->step_ns || !k->wait_ns || !k->caused_ns || !k->root_ns || !k->noise_ns || !k->state_ns ||
      !k->step_state_ns || !k->comm_ns)
    return -1;
  for (size_t i = 0; i < cells; i++) k->step_ns[i] = -1;
  for (size_t i = 0; i < k->nev; i++) {
    const loom__rkev *e = &k->ev[i];
    if (e->type != LOOM__RK_STEP) continue;
    size_t s = 0;
    while (k->step_no[s] != e->step) s++;
    int64_t *c = &k->step_ns[(size_t)e->rank * k->nsteps + s];
    if (e->end - e->ts > *c) *c = e->end - e->ts;
  }
  return 0;
}

/* The slowest step (its longest rank) and the rank at the root of the
 * most waiting. */
static void pace(loom__ranks *k) {
  int64_t best = -1, most = 0;
  for (size_t s = 0; s < k->nsteps; s++)
    for (size_t r = 0; r < k->nranks; r++)
      if (k->step_ns[r * k->nsteps + s] > best) {
        best = k->step_ns[r * k->nsteps + s];
        k->pace_step = (int64_t)s;
      }
  for (size_t r = 0; r < k->nranks; r++) {
    int64_t c = 0;
    for (size_t s = 0; s < k->nsteps; s++) c += k->root_ns[r * k->nsteps + s];
    if (c > most) {
      most = c;
      k->pace_rank = (int32_t)r;
    }
  }
}

int32_t loom__ranks_straggler(const loom__ranks *k, size_t step) {
  int32_t who = -1;
  int64_t most = 0;
  for (size_t r = 0; r < k->nranks; r++)
    if (k->root_ns[r * k->nsteps + step] > most) {
      most = k->root_ns[r * k->nsteps + step];
      who = (int32_t)r;
    }
  return who;
}

/* Rank indices in ascending world rank (inputs may come in any order). */
static int sort_ranks(loom__ranks *k) {
  if (!k->nranks) return 0;
  int64_t *ids = malloc((k->nranks + 1) * sizeof *ids);
  int32_t *to = malloc((k->nranks + 1) * sizeof *to);
  if (!ids || !to) {
    free(ids), free(to);
    return -1;
  }
  memcpy(ids, k->rank_id, k->nranks * sizeof *ids);
  qsort(ids, k->nranks, sizeof *ids, cmp_i64);
  for (size_t i = 0; i < k->nranks; i++)
    for (size_t j = 0; j < k->nranks; j++)
      if (ids[j] == k->rank_id[i]) to[i] = (int32_t)j;
  for (size_t i = 0; i < k->nev; i++) k->ev[i].rank = to[k->ev[i].rank];
  memcpy(k->rank_id, ids, k->nranks * sizeof *ids);
  free(ids), free(to);
  return 0;
}

int loom__ranks_finish(loom__ranks *k) {
  if (k->oom || sort_ranks(k) || step_table(k) || loom__ranks_waits(k) || k->oom) return -1;
  pace(k);
  return 0;
}
