/*
 * submit.c - submissions.  Each VkSubmitInfo the program submits while a
 * session records runs between two command buffers of the layer's own: a
 * head writing a timestamp at the top of the pipe and a tail writing one at
 * the bottom (one pair per slot of the queue, recorded once).  The queries
 * of every recording in it are reset from the host first, so a command
 * buffer submitted again gets times of its own.
 *
 * Nothing waits: the times are read (vkGetQueryPoolResults without WAIT) at
 * the program's next submit, fence wait, queue or device idle, at device
 * destruction and at the session's flush; a submission whose tail is not
 * there yet stays pending.  Read ones become device records on the queue's
 * track, all with the correlation id of their vkQueueSubmit call.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vk.h"

/* ---- brackets ------------------------------------------------------------ */
static int record_one(vk_dev *d, VkCommandBuffer cb, VkPipelineStageFlagBits stage, VkQueryPool p,
                      uint32_t query) {
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  if (d->set_loader_data && d->set_loader_data(d->dev, cb) != VK_SUCCESS) return -1;
  if (d->f.BeginCommandBuffer(cb, &bi) != VK_SUCCESS) return -1;
  d->f.CmdWriteTimestamp(cb, stage, p, query);
  return d->f.EndCommandBuffer(cb) == VK_SUCCESS ? 0 : -1;
}

/* Sets up q's brackets once (d->mu held); 0 when it has them. */
static int brackets(vk_queue *q) {
  vk_dev *d = q->d;
  if (q->ready) return q->ready > 0 ? 0 : -1;
  q->ready = -1;
  if (q->family >= 16 || !d->valid_bits[q->family] || !d->ResetQueryPool) return -1;
  VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                .queueFamilyIndex = q->family};
  VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                              .queryType = VK_QUERY_TYPE_TIMESTAMP, .queryCount = 2 * VK_SLOTS};
  if (d->f.CreateCommandPool(d->dev, &pi, NULL, &q->pool) != VK_SUCCESS) return -1;
  if (d->f.CreateQueryPool(d->dev, &qi, NULL, &q->qpool) != VK_SUCCESS) return -1;
  d->ResetQueryPool(d->dev, q->qpool, 0, 2 * VK_SLOTS);
  VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                    .commandPool = q->pool,
                                    .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                    .commandBufferCount = VK_SLOTS};
  if (d->f.AllocateCommandBuffers(d->dev, &ai, q->head) != VK_SUCCESS ||
      d->f.AllocateCommandBuffers(d->dev, &ai, q->tail) != VK_SUCCESS)
    return -1;
  for (uint32_t i = 0; i < VK_SLOTS; i++)
    if (record_one(d, q->head[i], VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, q->qpool, 2 * i) ||
        record_one(d, q->tail[i], VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, q->qpool, 2 * i + 1))
      return -1;
  q->ready = 1;
  return 0;
}

void vk_queue_free(vk_queue *q) {
  vk_dev *d = q->d;
  if (q->pool) d->f.DestroyCommandPool(d->dev, q->pool, NULL);
  if (q->qpool) d->f.DestroyQueryPool(d->dev, q->qpool, NULL);
  free(q);
}

static int take_slot(vk_queue *q) {
  for (uint32_t k = 0; k < VK_SLOTS; k++) {
    uint32_t i = (q->next_slot + k) % VK_SLOTS;
    if (q->busy[i]) continue;
    q->busy[i] = 1;
    q->next_slot = i + 1;
    q->d->ResetQueryPool(q->d->dev, q->qpool, 2 * i, 2);
    return (int)i;
  }
  return -1;
}

/* Host reset of a recording's queries and those of its secondaries. */
static void reset_rec(vk_dev *d, vk_rec *r) {
  for (uint32_t i = 0; i < r->nchunks; i++)
    d->ResetQueryPool(d->dev, VK_CHUNK_POOL(d, r->chunks[i]), VK_CHUNK_FIRST(r->chunks[i]),
                      VK_CHUNK);
  for (size_t i = 0; i < r->n; i++)
    if (r->cmds[i].what == VK_CMD_EXEC) reset_rec(d, r->cmds[i].sec);
}

static size_t count_work(const vk_rec *r) {
  size_t n = 0;
  for (size_t i = 0; i < r->n; i++)
    n += r->cmds[i].what == VK_CMD_WORK   ? 1
         : r->cmds[i].what == VK_CMD_EXEC ? count_work(r->cmds[i].sec)
                                          : 0;
  return n;
}

/* ---- reading and emitting -------------------------------------------------- */
typedef struct times { uint64_t **v; size_t n, cap; int ok; } times;

/* Reads r's timestamps (and its secondaries', depth first). */
static void read_rec(vk_dev *d, const vk_rec *r, times *t) {
  if (!t->ok) return;
  uint64_t *v = r->used ? malloc(r->used * sizeof *v) : NULL;
  if (t->n == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 8;
    uint64_t **nv = realloc(t->v, cap * sizeof *nv);
    if (!nv) { free(v); t->ok = 0; return; }
    t->v = nv, t->cap = cap;
  }
  t->v[t->n++] = v;
  if (r->used && !v) { t->ok = 0; return; }
  for (uint32_t i = 0; i < r->nchunks && t->ok; i++) {
    uint32_t cnt = r->used - i * VK_CHUNK < VK_CHUNK ? r->used - i * VK_CHUNK : VK_CHUNK;
    VkResult rc = d->f.GetQueryPoolResults(d->dev, VK_CHUNK_POOL(d, r->chunks[i]),
                                           VK_CHUNK_FIRST(r->chunks[i]), cnt, cnt * sizeof *v,
                                           v + i * VK_CHUNK, sizeof *v, VK_QUERY_RESULT_64_BIT);
    if (rc != VK_SUCCESS) t->ok = 0;
  }
  for (size_t i = 0; i < r->n && t->ok; i++)
    if (r->cmds[i].what == VK_CMD_EXEC) read_rec(d, r->cmds[i].sec, t);
}

static void emit_dev(const vk_sub *s, uint16_t kind, uint32_t name, uint64_t t0, uint64_t t1,
                     uint64_t corr, const char *cat, const loom_arg *args, uint32_t nargs) {
  vk_dev *d = s->q->d;
  loom_record r = {.struct_size = sizeof r, .kind = kind, .clock = d->clk, .device = d->device,
                   .resource = s->q->resource, .start = t0, .end = t1 < t0 ? t0 : t1, .name = name,
                   .correlation = corr, .category = cat, .nargs = nargs, .args = args};
  vk_host->emit(vk_self, &r);
}

static void emit_cmd(const vk_sub *s, const vk_cmd *m, uint64_t t0, uint64_t t1) {
  loom_arg a[4];
  uint32_t n = 0;
  char g[64];
  if (m->what == VK_CMD_LABEL) {
    emit_dev(s, LOOM_KIND_USER_RANGE, m->name, t0, t1, 0, NULL, NULL, 0);
    return;
  }
  if (m->kind == LOOM_KIND_KERNEL) {
    if (m->indirect) snprintf(g, sizeof g, "indirect");
    else snprintf(g, sizeof g, "[%u, %u, %u]", m->g[0], m->g[1], m->g[2]);
    a[n++] = (loom_arg){.key = "groups", .type = LOOM_ARG_STRING, .v.s = g};
  } else if (m->kind == LOOM_KIND_SYNC) {
    a[n++] = (loom_arg){.key = "memory barriers", .type = LOOM_ARG_UINT, .v.u = m->g[0]};
    a[n++] = (loom_arg){.key = "buffer barriers", .type = LOOM_ARG_UINT, .v.u = m->g[1]};
    a[n++] = (loom_arg){.key = "image barriers", .type = LOOM_ARG_UINT, .v.u = m->g[2]};
  } else {
    if (m->bytes != VK_BYTES_UNKNOWN)
      a[n++] = (loom_arg){.key = "bytes", .type = LOOM_ARG_UINT, .v.u = m->bytes};
    a[n++] = (loom_arg){.key = "direction", .type = LOOM_ARG_STRING, .v.s = m->dir};
    if (m->texels) a[n++] = (loom_arg){.key = "texels", .type = LOOM_ARG_UINT, .v.u = m->texels};
  }
  emit_dev(s, m->kind, m->name, t0, t1, s->corr, NULL, a, n);
}

/* Emits r's commands from the times read (t->v[*k] onwards). */
static void emit_rec(const vk_sub *s, const vk_rec *r, const times *t, size_t *k, uint64_t mask) {
  const uint64_t *v = t->v[(*k)++];
  for (size_t i = 0; i < r->n; i++) {
    const vk_cmd *m = &r->cmds[i];
    if (m->what == VK_CMD_EXEC) emit_rec(s, m->sec, t, k, mask);
    else if (m->q0 != UINT32_MAX && m->q1 != UINT32_MAX)
      emit_cmd(s, m, v[m->q0] & mask, v[m->q1] & mask);
  }
}

/* Emits s when its times are there; 1 when done with it. d->mu held. */
static int try_emit(vk_dev *d, vk_sub *s) {
  uint64_t br[2] = {0, 0};
  vk_queue *q = s->q;
  if (s->slot >= 0 &&
      d->f.GetQueryPoolResults(d->dev, q->qpool, 2 * (uint32_t)s->slot, 2, sizeof br, br,
                               sizeof br[0], VK_QUERY_RESULT_64_BIT) != VK_SUCCESS)
    return 0;
  times t = {.ok = 1};
  for (uint32_t i = 0; i < s->nrecs; i++) read_rec(d, s->recs[i], &t);
  int live = s->gen == atomic_load(&vk_gen) && d->gen == s->gen && atomic_load(&vk_live);
  if (!t.ok && s->slot < 0) { /* no tail to say it ended: look again later */
    for (size_t i = 0; i < t.n; i++) free(t.v[i]);
    free(t.v);
    return 0;
  }
  uint32_t bits = q->family < 16 ? d->valid_bits[q->family] : 64;
  uint64_t mask = bits >= 64 ? UINT64_MAX : ((uint64_t)1 << bits) - 1;
  if (live && t.ok) {
    size_t k = 0;
    for (uint32_t i = 0; i < s->nrecs; i++) {
      if (s->recs[i]->epoch != s->epochs[i]) {
        vk_lost(count_work(s->recs[i]),
                "a command buffer submitted again before its times were read");
        continue;
      }
      emit_rec(s, s->recs[i], &t, &k, mask);
    }
  } else if (live) {
    size_t n = 0;
    for (uint32_t i = 0; i < s->nrecs; i++) n += count_work(s->recs[i]);
    vk_lost(n, "the device gave no times for a submitted command buffer");
  }
  if (live && s->slot >= 0) {
    loom_arg a = {.key = "command buffers", .type = LOOM_ARG_UINT, .v.u = s->ncbs};
    emit_dev(s, LOOM_KIND_USER_RANGE, VK_NAME("submit"), br[0] & mask, br[1] & mask, s->corr,
             NULL, &a, 1);
  }
  for (size_t i = 0; i < t.n; i++) free(t.v[i]);
  free(t.v);
  return 1;
}

static void sub_free(vk_sub *s) {
  for (uint32_t i = 0; i < s->nrecs; i++) {
    atomic_fetch_sub(&s->recs[i]->unread, 1);
    vk_rec_release(s->recs[i]);
  }
  free(s);
}

/* Unlinks the submissions pick() chooses (d->mu held) into a list. */
static vk_sub *unlink_where(vk_dev *d, int (*pick)(vk_dev *, vk_sub *)) {
  vk_sub *done = NULL, **tail = &done, *prev = NULL;
  for (vk_sub *s = d->pending, *next; s; s = next) {
    next = s->next;
    if (!pick(d, s)) { prev = s; continue; }
    if (prev) prev->next = next;
    else d->pending = next;
    if (d->pending_tail == s) d->pending_tail = prev;
    if (s->slot >= 0) s->q->busy[s->slot] = 0;
    s->next = NULL;
    *tail = s, tail = &s->next;
  }
  return done;
}

static void free_list(vk_sub *s) {
  for (vk_sub *next; s; s = next) next = s->next, sub_free(s);
}

void vk_harvest(vk_dev *d, uint64_t wait_ns) {
  uint64_t deadline = vk_now() + wait_ns;
  for (;;) {
    pthread_mutex_lock(&d->mu);
    vk_sub *done = unlink_where(d, try_emit);
    int left = d->pending != NULL;
    pthread_mutex_unlock(&d->mu);
    free_list(done);
    if (!left || !wait_ns || vk_now() > deadline) return;
    struct timespec ms = {0, 200000};
    nanosleep(&ms, NULL);
  }
}

static int pick_all(vk_dev *d, vk_sub *s) {
  (void)d;
  if (s->gen == atomic_load(&vk_gen)) {
    size_t n = s->slot >= 0;
    for (uint32_t i = 0; i < s->nrecs; i++) n += count_work(s->recs[i]);
    s->nlost = n;
  }
  return 1;
}

void vk_pending_drop(vk_dev *d, const char *why) {
  pthread_mutex_lock(&d->mu);
  vk_sub *all = unlink_where(d, pick_all);
  pthread_mutex_unlock(&d->mu);
  size_t lost = 0;
  for (vk_sub *s = all; s; s = s->next) lost += s->nlost;
  if (lost) vk_lost(lost, why);
  free_list(all);
}

/* ---- vkQueueSubmit and vkQueueSubmit2 ------------------------------------------ */
/* The submission of one batch of n command buffers (d->mu held); fills out
 * with the layer's head and tail around the program's. */
static vk_sub *batch(vk_queue *q, uint32_t n, const VkCommandBuffer *in, VkCommandBuffer *out,
                     uint32_t *nout, uint64_t corr, uint16_t *roles) {
  vk_dev *d = q->d;
  vk_sub *s = calloc(1, sizeof *s + n * (sizeof(vk_rec *) + sizeof(uint32_t)));
  if (!s) return NULL;
  s->recs = (vk_rec **)(s + 1);
  s->epochs = (uint32_t *)(s->recs + n);
  s->q = q, s->corr = corr, s->gen = atomic_load(&vk_gen), s->ncbs = n;
  s->slot = take_slot(q);
  uint32_t k = 0;
  if (s->slot >= 0) out[k++] = q->head[s->slot];
  for (uint32_t i = 0; i < n; i++) {
    out[k++] = in[i];
    vk_cb *c = vk_cb_of(in[i]);
    vk_rec *r = c ? c->rec : NULL;
    if (!r) continue; /* recorded before the session: only the bracket */
    if (r->broken) {
      vk_lost(1, "a command buffer the layer could not time (out of memory or queries)");
      continue;
    }
    reset_rec(d, r);
    atomic_fetch_add(&r->refs, 1);
    atomic_fetch_add(&r->unread, 1);
    s->epochs[s->nrecs] = ++r->epoch;
    s->recs[s->nrecs++] = r;
    *roles |= r->roles;
  }
  if (s->slot >= 0) out[k++] = q->tail[s->slot];
  else vk_lost(1, "a submission with no free bracket (too many in flight)");
  *nout = k;
  return s;
}

/* One vkQueueSubmit(2) call in the making: the program's batches as plain
 * lists of command buffers (cnt[i] each, one after the other in in[]), and
 * what goes down instead (out[off[i]], k[i] each). */
typedef struct plan {
  vk_queue *q;
  uint32_t n;
  uint32_t *cnt, *off, *k;
  VkCommandBuffer *in, *out;
  vk_sub **subs;
  uint64_t corr, t0;
  uint16_t roles;
  int ok;
} plan;

static int plan_init(plan *p, vk_queue *q, uint32_t n, size_t total) {
  memset(p, 0, sizeof *p);
  p->q = q, p->n = n, p->t0 = vk_stamp(), p->corr = vk_next_corr();
  p->cnt = calloc(3 * (size_t)n + 1, sizeof *p->cnt);
  p->in = malloc((total + 1) * sizeof *p->in);
  p->out = malloc((total + 2 * (size_t)n + 1) * sizeof *p->out);
  p->subs = calloc(n + 1, sizeof *p->subs);
  if (!p->cnt || !p->in || !p->out || !p->subs) return -1;
  p->off = p->cnt + n, p->k = p->off + n;
  return 0;
}

static void plan_make(plan *p) {
  vk_dev *d = p->q->d;
  vk_harvest(d, 0);
  pthread_mutex_lock(&d->mu);
  p->ok = vk_session_queue(p->q) == 0 && brackets(p->q) == 0;
  for (uint32_t i = 0, in = 0, at = 0; p->ok && i < p->n; i++) {
    p->off[i] = at;
    p->subs[i] = batch(p->q, p->cnt[i], p->in + in, p->out + at, &p->k[i], p->corr, &p->roles);
    if (!p->subs[i]) p->ok = 0;
    in += p->cnt[i], at += p->k[i];
  }
  pthread_mutex_unlock(&d->mu);
}

/* After the call went down with rc: the batches become pending. */
static void plan_done(plan *p, VkResult rc, uint32_t name) {
  vk_dev *d = p->q->d;
  pthread_mutex_lock(&d->mu);
  for (uint32_t i = 0; i < p->n; i++) {
    vk_sub *s = p->subs[i];
    if (!s) continue;
    if (rc != VK_SUCCESS || !p->ok) { /* the program sees its error; nothing ran */
      if (s->slot >= 0) p->q->busy[s->slot] = 0;
      continue;
    }
    if (d->pending_tail) d->pending_tail->next = s;
    else d->pending = s;
    d->pending_tail = s;
    p->subs[i] = NULL;
  }
  pthread_mutex_unlock(&d->mu);
  for (uint32_t i = 0; i < p->n; i++)
    if (p->subs[i]) sub_free(p->subs[i]);
  vk_call(name, p->t0, LOOM_KIND_RUNTIME, p->ok && rc == VK_SUCCESS ? p->corr : 0, p->roles);
}

static void plan_free(plan *p) {
  free(p->cnt), free(p->in), free(p->out), free(p->subs);
}

VkResult VKAPI_CALL vk_QueueSubmit(VkQueue queue, uint32_t n, const VkSubmitInfo *si,
                                   VkFence fence) {
  vk_queue *q =
      atomic_load_explicit(&vk_recording, memory_order_relaxed) ? vk_queue_of(queue) : NULL;
  if (!q) return vk_dev_of(queue)->f.QueueSubmit(queue, n, si, fence);
  size_t total = 0;
  for (uint32_t i = 0; i < n; i++) total += si[i].commandBufferCount;
  plan p;
  VkSubmitInfo *mine = malloc((n + 1) * sizeof *mine);
  if (plan_init(&p, q, n, total) == 0 && mine) {
    for (uint32_t i = 0, at = 0; i < n; i++) {
      p.cnt[i] = si[i].commandBufferCount;
      if (p.cnt[i]) memcpy(p.in + at, si[i].pCommandBuffers, p.cnt[i] * sizeof *p.in);
      at += p.cnt[i];
    }
    plan_make(&p);
    for (uint32_t i = 0; p.ok && i < n; i++) {
      mine[i] = si[i];
      mine[i].pCommandBuffers = p.out + p.off[i];
      mine[i].commandBufferCount = p.k[i];
    }
  }
  VkResult rc = q->d->f.QueueSubmit(queue, n, p.ok && mine ? mine : si, fence);
  if (p.subs) plan_done(&p, rc, VK_NAME("vkQueueSubmit"));
  plan_free(&p);
  free(mine);
  return rc;
}

VkResult VKAPI_CALL vk_QueueSubmit2(VkQueue queue, uint32_t n, const VkSubmitInfo2 *si,
                                    VkFence fence) {
  vk_queue *q =
      atomic_load_explicit(&vk_recording, memory_order_relaxed) ? vk_queue_of(queue) : NULL;
  if (!q) return vk_dev_of(queue)->f.QueueSubmit2(queue, n, si, fence);
  size_t total = 0;
  for (uint32_t i = 0; i < n; i++) total += si[i].commandBufferInfoCount;
  plan p;
  VkSubmitInfo2 *mine = malloc((n + 1) * sizeof *mine);
  VkCommandBufferSubmitInfo *infos = malloc((total + 2 * (size_t)n + 1) * sizeof *infos);
  if (plan_init(&p, q, n, total) == 0 && mine && infos) {
    for (uint32_t i = 0, at = 0; i < n; i++) {
      p.cnt[i] = si[i].commandBufferInfoCount;
      for (uint32_t j = 0; j < p.cnt[i]; j++)
        p.in[at++] = si[i].pCommandBufferInfos[j].commandBuffer;
    }
    plan_make(&p);
    for (uint32_t i = 0; p.ok && i < n; i++) {
      VkCommandBufferSubmitInfo *v = infos + p.off[i];
      int bracketed = p.k[i] > p.cnt[i];
      for (uint32_t j = 0; j < p.k[i]; j++) {
        int app = !bracketed || (j > 0 && j <= p.cnt[i]);
        v[j] = app ? si[i].pCommandBufferInfos[j - (uint32_t)bracketed]
                   : (VkCommandBufferSubmitInfo){.sType =
                                                     VK_STRUCTURE_TYPE_COMMAND_BUFFER_SUBMIT_INFO};
        v[j].commandBuffer = p.out[p.off[i] + j];
      }
      mine[i] = si[i];
      mine[i].pCommandBufferInfos = v;
      mine[i].commandBufferInfoCount = p.k[i];
    }
  }
  VkResult rc = q->d->f.QueueSubmit2(queue, n, p.ok && mine && infos ? mine : si, fence);
  if (p.subs) plan_done(&p, rc, VK_NAME("vkQueueSubmit2"));
  plan_free(&p);
  free(mine), free(infos);
  return rc;
}
