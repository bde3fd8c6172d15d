/*
 * cmd.c - command recording.  While a session records, each command buffer
 * begun gets a recording (vk_rec): the list of the dispatches, copies,
 * fills, barriers, labels and secondary command buffers it holds, and two
 * timestamp writes of the layer's own queries around each.  The queries
 * come in chunks of the layer's pools; they are reset from the host (when
 * handed out, and before each submission of the recording), so the only
 * commands the layer adds to the program's command buffers are timestamp
 * writes, which change no state the program can see.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "vk.h"

/* ---- query chunks (d->mu held) ------------------------------------------ */
int vk_chunk_get(vk_dev *d, uint32_t *out) {
  if (!d->nfree) {
    VkQueryPoolCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                .queryType = VK_QUERY_TYPE_TIMESTAMP, .queryCount = VK_POOL};
    VkQueryPool pool;
    uint32_t per = VK_POOL / VK_CHUNK;
    VkQueryPool *pools = realloc(d->pools, (d->npools + 1) * sizeof *pools);
    if (!pools) return -1;
    d->pools = pools;
    if (d->cap_free < d->nfree + per) {
      uint32_t *fc = realloc(d->free_chunks, (d->nfree + per) * sizeof *fc);
      if (!fc) return -1;
      d->free_chunks = fc, d->cap_free = d->nfree + per;
    }
    if (d->f.CreateQueryPool(d->dev, &ci, NULL, &pool) != VK_SUCCESS) return -1;
    d->ResetQueryPool(d->dev, pool, 0, VK_POOL);
    for (uint32_t i = per; i-- > 0;) d->free_chunks[d->nfree++] = d->npools * per + i;
    d->pools[d->npools++] = pool;
  }
  *out = d->free_chunks[--d->nfree];
  return 0;
}

void vk_chunk_put(vk_dev *d, uint32_t chunk) {
  if (d->nfree == d->cap_free) {
    uint32_t *fc = realloc(d->free_chunks, (d->cap_free * 2 + 16) * sizeof *fc);
    if (!fc) return; /* leaked, not reused */
    d->free_chunks = fc, d->cap_free = d->cap_free * 2 + 16;
  }
  d->free_chunks[d->nfree++] = chunk;
}

/* ---- recordings ------------------------------------------------------------- */
void vk_rec_release(vk_rec *r) {
  if (!r || atomic_fetch_sub(&r->refs, 1) != 1) return;
  for (size_t i = 0; i < r->n; i++)
    if (r->cmds[i].what == VK_CMD_EXEC) vk_rec_release(r->cmds[i].sec);
  pthread_mutex_lock(&r->d->mu);
  for (uint32_t i = 0; i < r->nchunks; i++) vk_chunk_put(r->d, r->chunks[i]);
  pthread_mutex_unlock(&r->d->mu);
  free(r->cmds);
  free(r->chunks);
  free(r);
}

void vk_cb_drop_recording(vk_cb *c) {
  vk_rec *r = c->rec;
  c->rec = NULL;
  vk_rec_release(r);
}

vk_cb *vk_cb_recording(VkCommandBuffer cb) {
  if (!atomic_load_explicit(&vk_recording, memory_order_relaxed)) return NULL;
  vk_cb *c = vk_cb_of(cb);
  return c && c->rec && !c->rec->broken ? c : NULL;
}

/* Writes the next query of the recording; its number, UINT32_MAX when none. */
static uint32_t stamp(vk_cb *c, VkPipelineStageFlagBits stage) {
  vk_rec *r = c->rec;
  vk_dev *d = c->d;
  uint32_t n = r->used;
  if (n % VK_CHUNK == 0) {
    uint32_t chunk;
    if (r->nchunks == r->cap_chunks) {
      uint32_t cap = r->cap_chunks ? r->cap_chunks * 2 : 4;
      uint32_t *v = realloc(r->chunks, cap * sizeof *v);
      if (!v) { r->broken = 1; return UINT32_MAX; }
      r->chunks = v, r->cap_chunks = cap;
    }
    pthread_mutex_lock(&d->mu);
    int rc = vk_chunk_get(d, &chunk);
    pthread_mutex_unlock(&d->mu);
    if (rc) { r->broken = 1; return UINT32_MAX; }
    r->chunks[r->nchunks++] = chunk;
  }
  uint32_t chunk = r->chunks[n / VK_CHUNK];
  d->f.CmdWriteTimestamp(c->cb, stage, VK_CHUNK_POOL(d, chunk),
                         VK_CHUNK_FIRST(chunk) + n % VK_CHUNK);
  r->used++;
  return n;
}

/* Appends a command timed from now; its index, or SIZE_MAX. */
static size_t cmd_begin(vk_cb *c, uint8_t what, uint16_t kind, uint32_t name) {
  vk_rec *r = c->rec;
  if (r->n == r->cap) {
    size_t cap = r->cap ? r->cap * 2 : 16;
    vk_cmd *v = realloc(r->cmds, cap * sizeof *v);
    if (!v) { r->broken = 1; return SIZE_MAX; }
    r->cmds = v, r->cap = cap;
  }
  vk_cmd *m = &r->cmds[r->n];
  memset(m, 0, sizeof *m);
  m->what = what, m->kind = kind, m->name = name, m->q1 = UINT32_MAX;
  m->q0 = what == VK_CMD_EXEC ? UINT32_MAX : stamp(c, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT);
  if (r->broken) return SIZE_MAX;
  return r->n++;
}

void vk_cmd_end(vk_cb *c, size_t i) {
  if (i != SIZE_MAX && !c->rec->broken)
    c->rec->cmds[i].q1 = stamp(c, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT);
}

/* ---- command buffers ---------------------------------------------------------- */
static VkResult VKAPI_CALL L_AllocateCommandBuffers(VkDevice dev,
                                                    const VkCommandBufferAllocateInfo *ai,
                                                    VkCommandBuffer *out) {
  vk_dev *d = vk_dev_of(dev);
  VkResult rc = d->f.AllocateCommandBuffers(dev, ai, out);
  if (rc == VK_SUCCESS)
    for (uint32_t i = 0; i < ai->commandBufferCount; i++)
      vk_cb_track(out[i], ai->commandPool, d, ai->level == VK_COMMAND_BUFFER_LEVEL_SECONDARY);
  return rc;
}

static void VKAPI_CALL L_FreeCommandBuffers(VkDevice dev, VkCommandPool pool, uint32_t n,
                                            const VkCommandBuffer *cbs) {
  vk_dev *d = vk_dev_of(dev);
  for (uint32_t i = 0; i < n; i++)
    if (cbs[i]) vk_cb_forget(cbs[i]);
  d->f.FreeCommandBuffers(dev, pool, n, cbs);
}

static VkResult VKAPI_CALL L_ResetCommandPool(VkDevice dev, VkCommandPool pool,
                                              VkCommandPoolResetFlags fl) {
  vk_dev *d = vk_dev_of(dev);
  vk_cb_each(d, pool, vk_cb_drop_recording);
  return d->f.ResetCommandPool(dev, pool, fl);
}

static void VKAPI_CALL L_DestroyCommandPool(VkDevice dev, VkCommandPool pool,
                                            const VkAllocationCallbacks *a) {
  vk_dev *d = vk_dev_of(dev);
  if (pool) vk_cmd_pool_gone(d, pool);
  d->f.DestroyCommandPool(dev, pool, a);
}

static VkResult VKAPI_CALL L_ResetCommandBuffer(VkCommandBuffer cb, VkCommandBufferResetFlags fl) {
  vk_cb *c = vk_cb_of(cb);
  if (c) vk_cb_drop_recording(c);
  return vk_dev_of(cb)->f.ResetCommandBuffer(cb, fl);
}

static VkResult VKAPI_CALL L_BeginCommandBuffer(VkCommandBuffer cb,
                                                const VkCommandBufferBeginInfo *bi) {
  vk_dev *d = vk_dev_of(cb);
  VkResult rc = d->f.BeginCommandBuffer(cb, bi);
  vk_cb *c = rc == VK_SUCCESS ? vk_cb_of(cb) : NULL;
  if (!c) return rc;
  vk_cb_drop_recording(c); /* an implicit reset */
  c->pipe_name = 0;
  if (!atomic_load_explicit(&vk_recording, memory_order_relaxed) || !d->ResetQueryPool) return rc;
  vk_rec *r = calloc(1, sizeof *r);
  if (!r) return rc;
  atomic_init(&r->refs, 1);
  r->d = d;
  c->rec = r;
  return rc;
}

static VkResult VKAPI_CALL L_EndCommandBuffer(VkCommandBuffer cb) {
  vk_cb *c = vk_cb_recording(cb);
  /* labels still open close with the command buffer */
  while (c && c->rec->nopen && !c->rec->broken) vk_cmd_end(c, c->rec->open[--c->rec->nopen]);
  return vk_dev_of(cb)->f.EndCommandBuffer(cb);
}

/* ---- commands ---------------------------------------------------------------- */
static void VKAPI_CALL L_CmdBindPipeline(VkCommandBuffer cb, VkPipelineBindPoint bp, VkPipeline p) {
  vk_dev *d = vk_dev_of(cb);
  d->f.CmdBindPipeline(cb, bp, p);
  vk_cb *c = bp == VK_PIPELINE_BIND_POINT_COMPUTE ? vk_cb_recording(cb) : NULL;
  if (!c) return;
  pthread_mutex_lock(&d->mu);
  c->pipe_name = (uint32_t)(uintptr_t)vk_map_get(&d->pipelines, VK_KEY(p));
  pthread_mutex_unlock(&d->mu);
}

static void dispatch(vk_cb *c, uint32_t x, uint32_t y, uint32_t z, int indirect,
                     void (*call)(vk_cb *, void *), void *ctx) {
  size_t i = cmd_begin(c, VK_CMD_WORK, LOOM_KIND_KERNEL,
                       c->pipe_name ? c->pipe_name : VK_NAME("dispatch"));
  if (i != SIZE_MAX) {
    vk_cmd *m = &c->rec->cmds[i];
    m->g[0] = x, m->g[1] = y, m->g[2] = z, m->indirect = indirect;
    c->rec->roles |= LOOM_RECORD_F_LAUNCH;
  }
  call(c, ctx);
  vk_cmd_end(c, i);
}

typedef struct dctx { uint32_t b[3], n[3]; VkBuffer buf; VkDeviceSize off; } dctx;
static void call_dispatch(vk_cb *c, void *p) {
  dctx *x = p;
  c->d->f.CmdDispatch(c->cb, x->n[0], x->n[1], x->n[2]);
}
static void call_dispatch_base(vk_cb *c, void *p) {
  dctx *x = p;
  c->d->f.CmdDispatchBase(c->cb, x->b[0], x->b[1], x->b[2], x->n[0], x->n[1], x->n[2]);
}
static void call_dispatch_indirect(vk_cb *c, void *p) {
  dctx *x = p;
  c->d->f.CmdDispatchIndirect(c->cb, x->buf, x->off);
}

static void VKAPI_CALL L_CmdDispatch(VkCommandBuffer cb, uint32_t x, uint32_t y, uint32_t z) {
  vk_cb *c = vk_cb_recording(cb);
  if (!c) { vk_dev_of(cb)->f.CmdDispatch(cb, x, y, z); return; }
  dctx a = {.n = {x, y, z}};
  dispatch(c, x, y, z, 0, call_dispatch, &a);
}

static void VKAPI_CALL L_CmdDispatchBase(VkCommandBuffer cb, uint32_t bx, uint32_t by, uint32_t bz,
                                         uint32_t x, uint32_t y, uint32_t z) {
  vk_cb *c = vk_cb_recording(cb);
  if (!c) { vk_dev_of(cb)->f.CmdDispatchBase(cb, bx, by, bz, x, y, z); return; }
  dctx a = {.b = {bx, by, bz}, .n = {x, y, z}};
  dispatch(c, x, y, z, 0, call_dispatch_base, &a);
}

static void VKAPI_CALL L_CmdDispatchIndirect(VkCommandBuffer cb, VkBuffer buf, VkDeviceSize off) {
  vk_cb *c = vk_cb_recording(cb);
  if (!c) { vk_dev_of(cb)->f.CmdDispatchIndirect(cb, buf, off); return; }
  dctx a = {.buf = buf, .off = off};
  dispatch(c, 0, 0, 0, 1, call_dispatch_indirect, &a);
}

int vk_mem_on_host(vk_dev *d, VkDeviceMemory mem) {
  loom_spin_lock(&d->mem_lk);
  vk_mem *m = vk_map_get(&d->memory, VK_KEY(mem));
  int host = m && (m->mapped || ((m->flags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) &&
                                 !(m->flags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)));
  loom_spin_unlock(&d->mem_lk);
  return host;
}

int vk_buf_on_host(vk_dev *d, VkBuffer b) {
  pthread_mutex_lock(&d->mu);
  vk_buf *vb = vk_map_get(&d->buffers, VK_KEY(b));
  VkDeviceMemory mem = vb ? vb->mem : VK_NULL_HANDLE;
  pthread_mutex_unlock(&d->mu);
  return mem && vk_mem_on_host(d, mem);
}

const char *vk_direction(int src_host, int dst_host) {
  static const char *const names[4] = {"DtoD", "DtoH", "HtoD", "HtoH"};
  return names[(src_host ? 2 : 0) + (dst_host ? 1 : 0)];
}

static const char *direction(vk_dev *d, VkBuffer src, VkBuffer dst) {
  return vk_direction(vk_buf_on_host(d, src), vk_buf_on_host(d, dst));
}

size_t vk_mem_begin(vk_cb *c, uint16_t kind, uint32_t name, uint64_t bytes, const char *dir) {
  size_t i = cmd_begin(c, VK_CMD_WORK, kind, name);
  if (i == SIZE_MAX) return i;
  c->rec->cmds[i].bytes = bytes;
  c->rec->cmds[i].dir = dir;
  c->rec->roles |= LOOM_RECORD_F_MEMORY;
  return i;
}

static void VKAPI_CALL L_CmdCopyBuffer(VkCommandBuffer cb, VkBuffer src, VkBuffer dst, uint32_t n,
                                       const VkBufferCopy *r) {
  vk_cb *c = vk_cb_recording(cb);
  if (!c) { vk_dev_of(cb)->f.CmdCopyBuffer(cb, src, dst, n, r); return; }
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < n; i++) bytes += r[i].size;
  size_t i = vk_mem_begin(c, LOOM_KIND_MEMCPY, VK_NAME("vkCmdCopyBuffer"), bytes,
                          direction(c->d, src, dst));
  c->d->f.CmdCopyBuffer(cb, src, dst, n, r);
  vk_cmd_end(c, i);
}

static void VKAPI_CALL L_CmdFillBuffer(VkCommandBuffer cb, VkBuffer dst, VkDeviceSize off,
                                       VkDeviceSize size, uint32_t value) {
  vk_cb *c = vk_cb_recording(cb);
  if (!c) { vk_dev_of(cb)->f.CmdFillBuffer(cb, dst, off, size, value); return; }
  uint64_t bytes = size;
  if (size == VK_WHOLE_SIZE) {
    pthread_mutex_lock(&c->d->mu);
    vk_buf *b = vk_map_get(&c->d->buffers, VK_KEY(dst));
    bytes = b && b->size > off ? (b->size - off) & ~(uint64_t)3 : 0;
    pthread_mutex_unlock(&c->d->mu);
  }
  size_t i = vk_mem_begin(c, LOOM_KIND_MEMSET, VK_NAME("vkCmdFillBuffer"), bytes,
                       vk_buf_on_host(c->d, dst) ? "HtoH" : "DtoD");
  c->d->f.CmdFillBuffer(cb, dst, off, size, value);
  vk_cmd_end(c, i);
}

static void VKAPI_CALL L_CmdUpdateBuffer(VkCommandBuffer cb, VkBuffer dst, VkDeviceSize off,
                                         VkDeviceSize size, const void *data) {
  vk_cb *c = vk_cb_recording(cb);
  if (!c) { vk_dev_of(cb)->f.CmdUpdateBuffer(cb, dst, off, size, data); return; }
  size_t i = vk_mem_begin(c, LOOM_KIND_MEMCPY, VK_NAME("vkCmdUpdateBuffer"), size,
                       vk_buf_on_host(c->d, dst) ? "HtoH" : "HtoD");
  c->d->f.CmdUpdateBuffer(cb, dst, off, size, data);
  vk_cmd_end(c, i);
}

static void VKAPI_CALL L_CmdPipelineBarrier(VkCommandBuffer cb, VkPipelineStageFlags s,
                                            VkPipelineStageFlags t, VkDependencyFlags fl,
                                            uint32_t nm, const VkMemoryBarrier *m, uint32_t nb,
                                            const VkBufferMemoryBarrier *b, uint32_t ni,
                                            const VkImageMemoryBarrier *im) {
  vk_cb *c = vk_cb_recording(cb);
  size_t i =
      c ? cmd_begin(c, VK_CMD_WORK, LOOM_KIND_SYNC, VK_NAME("vkCmdPipelineBarrier")) : SIZE_MAX;
  if (i != SIZE_MAX)
    c->rec->cmds[i].g[0] = nm, c->rec->cmds[i].g[1] = nb, c->rec->cmds[i].g[2] = ni;
  vk_dev_of(cb)->f.CmdPipelineBarrier(cb, s, t, fl, nm, m, nb, b, ni, im);
  if (c) vk_cmd_end(c, i);
}

static void VKAPI_CALL L_CmdExecuteCommands(VkCommandBuffer cb, uint32_t n,
                                            const VkCommandBuffer *sec) {
  vk_cb *c = vk_cb_recording(cb);
  for (uint32_t k = 0; c && k < n; k++) {
    vk_cb *s = vk_cb_of(sec[k]);
    if (!s || !s->rec) continue; /* recorded before the session: not timed */
    size_t i = cmd_begin(c, VK_CMD_EXEC, 0, 0);
    if (i == SIZE_MAX) break;
    atomic_fetch_add(&s->rec->refs, 1);
    c->rec->cmds[i].sec = s->rec;
    c->rec->roles |= s->rec->roles;
  }
  vk_dev_of(cb)->f.CmdExecuteCommands(cb, n, sec);
}

static void VKAPI_CALL L_CmdBeginDebugUtilsLabelEXT(VkCommandBuffer cb,
                                                    const VkDebugUtilsLabelEXT *l) {
  vk_cb *c = vk_cb_recording(cb);
  if (c && c->rec->nopen < sizeof c->rec->open / sizeof c->rec->open[0]) {
    size_t i = cmd_begin(c, VK_CMD_LABEL, LOOM_KIND_USER_RANGE,
                         vk_intern(l && l->pLabelName ? l->pLabelName : "label"));
    if (i != SIZE_MAX) c->rec->open[c->rec->nopen++] = (uint32_t)i;
  }
  vk_dev_of(cb)->f.CmdBeginDebugUtilsLabelEXT(cb, l);
}

static void VKAPI_CALL L_CmdEndDebugUtilsLabelEXT(VkCommandBuffer cb) {
  vk_dev_of(cb)->f.CmdEndDebugUtilsLabelEXT(cb);
  vk_cb *c = vk_cb_recording(cb);
  /* a label begun in another command buffer is not timed here */
  if (c && c->rec->nopen) vk_cmd_end(c, c->rec->open[--c->rec->nopen]);
}

PFN_vkVoidFunction vk_cmd_proc(const char *name) {
#define P(n) if (!strcmp(name, "vk" #n)) return (PFN_vkVoidFunction)L_##n;
  P(AllocateCommandBuffers) P(FreeCommandBuffers) P(ResetCommandPool) P(DestroyCommandPool)
  P(ResetCommandBuffer) P(BeginCommandBuffer) P(EndCommandBuffer) P(CmdBindPipeline)
  P(CmdDispatch) P(CmdDispatchBase) P(CmdDispatchIndirect) P(CmdCopyBuffer) P(CmdFillBuffer)
  P(CmdUpdateBuffer) P(CmdPipelineBarrier) P(CmdExecuteCommands) P(CmdBeginDebugUtilsLabelEXT)
  P(CmdEndDebugUtilsLabelEXT)
#undef P
  if (!strcmp(name, "vkCmdDispatchBaseKHR")) return (PFN_vkVoidFunction)L_CmdDispatchBase;
  return NULL;
}
