/*
 * calls.c - the Level Zero backend's tracing callbacks: a prologue and an
 * epilogue around each traced call, the call's record, a signal event put
 * in where the application gave none, the command remembered on its list.
 */
#include "backend.h"

/* ---- tracing callbacks ------------------------------------------------------ */
typedef struct call {
  uint64_t t0, corr;
  ze_event_handle_t mine;
} call;
static __thread call cur;

static uint32_t api_name(const char *s) {
  return ze_host->intern(ze_self, s, SIZE_MAX);
}

/* roles: LOOM_RECORD_F_* (what the call enqueues, for loom report). */
static void emit_call_as(const char *api, int kind, uint64_t corr, uint16_t roles) {
  if (!atomic_load(&recording)) return;
  loom_record r = {.struct_size = sizeof r,
                   .kind = (uint16_t)kind,
                   .flags = roles,
                   .clock = host_clk,
                   .device = LOOM_DEVICE_HOST,
                   .tid = ze_host->thread_id(),
                   .start = cur.t0,
                   .end = raw_now(),
                   .name = api_name(api),
                   .correlation = corr};
  ze_host->emit(ze_self, &r);
}

static void emit_call(const char *api, int kind, uint64_t corr) {
  emit_call_as(api, kind, corr, 0);
}

static const char *mem_kind(ze_context_handle_t ctx, const void *p) {
  ze_memory_allocation_properties_t pr = {.stype = ZE_STRUCTURE_TYPE_MEMORY_ALLOCATION_PROPERTIES};
  ze_device_handle_t d = NULL;
  busy++;
  ze_result_t r = ze.zeMemGetAllocProperties(ctx, p, &pr, &d);
  busy--;
  if (r != ZE_RESULT_SUCCESS) return "H";
  return pr.type == ZE_MEMORY_TYPE_DEVICE ? "D" : pr.type == ZE_MEMORY_TYPE_SHARED ? "S" : "H";
}

/* Prologue of a command append: a correlation, and an event when none. */
static void cmd_prologue(ze_command_list_handle_t l, ze_event_handle_t *sig) {
  cur.t0 = raw_now();
  cur.corr = 0;
  cur.mine = NULL;
  if (!atomic_load(&recording)) return;
  cur.corr = atomic_fetch_add(&next_corr, 1) + 1;
  if (!*sig) {
    pthread_mutex_lock(&mu);
    obj *o = find_obj(l);
    ze_event_handle_t e = o ? own_event(o->ctx) : NULL;
    pthread_mutex_unlock(&mu);
    if (e) *sig = cur.mine = e;
  }
}

/* Epilogue: the call's record, and the command remembered. */
static void cmd_epilogue(const char *api, ze_result_t res, ze_command_list_handle_t l, cmd *c,
                         ze_event_handle_t ev) {
  if (!cur.corr) return;
  uint16_t roles = c->kind == LOOM_KIND_KERNEL ? LOOM_RECORD_F_LAUNCH
                   : c->kind == LOOM_KIND_MEMCPY || c->kind == LOOM_KIND_MEMSET
                       ? LOOM_RECORD_F_MEMORY
                       : 0;
  emit_call_as(api, LOOM_KIND_RUNTIME, res == ZE_RESULT_SUCCESS ? cur.corr : 0, roles);
  pthread_mutex_lock(&mu);
  obj *o = find_obj(l);
  if (res != ZE_RESULT_SUCCESS || !o || !ev) {
    if (cur.mine) release_own(cur.mine);
    if (res == ZE_RESULT_SUCCESS)
      ze_host->count_lost(ze_self, 1, "a command on a list created before loom traced");
    pthread_mutex_unlock(&mu);
    return;
  }
  c->corr = cur.corr;
  c->ev = ev;
  c->mine = cur.mine != NULL;
  c->gen = atomic_load(&gen);
  c->ctx = o->ctx;
  if (o->type == OBJ_IMM && o->n >= 64) harvest(o, 0);
  if (push_cmd(o, c) != 0) ze_host->count_lost(ze_self, 1, "out of memory");
  pthread_mutex_unlock(&mu);
}

#define PRO(n, p)                                                                                  \
  void ZE_APICALL pro_##n(ze_##p##_params_t *params, ze_result_t r, void *u, void **iu)
#define EPI(n, p)                                                                                  \
  void ZE_APICALL epi_##n(ze_##p##_params_t *params, ze_result_t r, void *u, void **iu)
#define UNUSED (void)params, (void)r, (void)u, (void)iu

/* Plain calls: just their records. */
#define PLAIN(n, p)                                                           \
  PRO(n, p) { UNUSED; if (!busy) cur.t0 = raw_now(); }                       \
  EPI(n, p) { UNUSED; if (!busy) emit_call("ze" #n, LOOM_KIND_RUNTIME, 0); }
PLAIN(ModuleCreate, module_create)
PLAIN(ModuleDestroy, module_destroy)
PLAIN(KernelSetArgumentValue, kernel_set_argument_value)
PLAIN(CommandListClose, command_list_close)
PLAIN(EventCreate, event_create)
PLAIN(ContextCreate, context_create)
PLAIN(KernelDestroy, kernel_destroy)

/* Calls before which completed commands must be read (they reset or free
 * what the timestamps live in). */
#define HARVEST_FIRST(n, p)                                                    \
  PRO(n, p) {                                                                  \
    UNUSED;                                                                    \
    if (busy) return;                                                          \
    cur.t0 = raw_now();                                                        \
    pthread_mutex_lock(&mu);                                                   \
    harvest_all(0);                                                            \
    pthread_mutex_unlock(&mu);                                                 \
    cur.t0 = raw_now();                                                        \
  }                                                                            \
  EPI(n, p) { UNUSED; if (!busy) emit_call("ze" #n, LOOM_KIND_RUNTIME, 0); }
HARVEST_FIRST(EventDestroy, event_destroy)
HARVEST_FIRST(EventHostReset, event_host_reset)
HARVEST_FIRST(EventPoolDestroy, event_pool_destroy)
PRO(CommandQueueDestroy, command_queue_destroy) {
  UNUSED;
  if (busy) return;
  pthread_mutex_lock(&mu);
  harvest_all(0);
  pthread_mutex_unlock(&mu);
  cur.t0 = raw_now();
}
EPI(CommandQueueDestroy, command_queue_destroy) {
  UNUSED;
  if (busy) return;
  emit_call("zeCommandQueueDestroy", LOOM_KIND_RUNTIME, 0);
  if (r != ZE_RESULT_SUCCESS) return;
  pthread_mutex_lock(&mu);
  obj *o = find_obj(*params->phCommandQueue);
  if (o) { /* commands it still held never complete now */
    free(o->c);
    *o = objs[--nobjs];
  }
  pthread_mutex_unlock(&mu);
}

/* Host synchronisation: a SYNC record, then completed commands are read. */
#define SYNC(n, p)                                                             \
  PRO(n, p) { UNUSED; if (!busy) cur.t0 = raw_now(); }                        \
  EPI(n, p) {                                                                  \
    UNUSED;                                                                    \
    if (busy) return;                                                          \
    emit_call("ze" #n, LOOM_KIND_SYNC, 0);                                     \
    pthread_mutex_lock(&mu);                                                   \
    harvest_all(0);                                                            \
    pthread_mutex_unlock(&mu);                                                 \
  }
SYNC(CommandQueueSynchronize, command_queue_synchronize)
SYNC(EventHostSynchronize, event_host_synchronize)

PRO(ContextDestroy, context_destroy) {
  UNUSED;
  if (busy) return;
  pthread_mutex_lock(&mu);
  harvest_all(0);
  for (size_t i = 0; i < npools;) {
    if (pools[i]->ctx == *params->phContext) {
      busy++;
      for (uint32_t k = 0; k < POOL_EVENTS; k++)
        if (pools[i]->ev[k]) ze.zeEventDestroy(pools[i]->ev[k]);
      ze.zeEventPoolDestroy(pools[i]->pool);
      busy--;
      free(pools[i]);
      pools[i] = pools[--npools];
    } else {
      i++;
    }
  }
  pthread_mutex_unlock(&mu);
  cur.t0 = raw_now();
}
EPI(ContextDestroy, context_destroy) {
  UNUSED;
  if (!busy) emit_call("zeContextDestroy", LOOM_KIND_RUNTIME, 0);
}

/* Creation of a queue or list: the object remembered, and the call's record. */
#define CREATED(n, p, handle, type)                                            \
  PRO(n, p) { UNUSED; if (!busy) cur.t0 = raw_now(); }                        \
  EPI(n, p) {                                                                 \
    UNUSED;                                                                   \
    if (busy) return;                                                         \
    if (r == ZE_RESULT_SUCCESS) {                                             \
      pthread_mutex_lock(&mu);                                                \
      add_obj(**params->handle, type, *params->phDevice, *params->phContext); \
      pthread_mutex_unlock(&mu);                                              \
    }                                                                         \
    emit_call("ze" #n, LOOM_KIND_RUNTIME, 0);                                 \
  }
CREATED(CommandQueueCreate, command_queue_create, pphCommandQueue, OBJ_QUEUE)
CREATED(CommandListCreate, command_list_create, pphCommandList, OBJ_LIST)
CREATED(CommandListCreateImmediate, command_list_create_immediate, pphCommandList, OBJ_IMM)
#undef CREATED

/* Reset / destroy of a list: read what completed, give back its events. */
static void list_forget(ze_command_list_handle_t l, int destroy) {
  pthread_mutex_lock(&mu);
  harvest_all(0);
  obj *o = find_obj(l);
  if (o) {
    if (o->type == OBJ_LIST) {
      /* pending copies of its commands on queues go too */
      for (size_t i = 0; i < nobjs; i++) {
        obj *q = &objs[i];
        if (q->type != OBJ_QUEUE) continue;
        for (size_t k = 0; k < q->n;) {
          int ours = 0;
          for (size_t j = 0; j < o->n; j++) ours |= q->c[k].ev == o->c[j].ev && o->c[j].mine;
          if (ours) q->c[k] = q->c[--q->n];
          else k++;
        }
      }
    }
    for (size_t j = 0; j < o->n; j++)
      if (o->c[j].mine) release_own(o->c[j].ev);
    o->n = 0;
    if (destroy) {
      free(o->c);
      *o = objs[--nobjs];
    }
  }
  pthread_mutex_unlock(&mu);
}
PRO(CommandListReset, command_list_reset) {
  UNUSED;
  if (busy) return;
  list_forget(*params->phCommandList, 0);
  cur.t0 = raw_now();
}
EPI(CommandListReset, command_list_reset) {
  UNUSED;
  if (!busy) emit_call("zeCommandListReset", LOOM_KIND_RUNTIME, 0);
}
PRO(CommandListDestroy, command_list_destroy) {
  UNUSED;
  if (busy) return;
  list_forget(*params->phCommandList, 1);
  cur.t0 = raw_now();
}
EPI(CommandListDestroy, command_list_destroy) {
  UNUSED;
  if (!busy) emit_call("zeCommandListDestroy", LOOM_KIND_RUNTIME, 0);
}

PRO(CommandQueueExecuteCommandLists, command_queue_execute_command_lists) {
  UNUSED;
  if (busy) return;
  cur.t0 = raw_now();
  pthread_mutex_lock(&mu);
  harvest_all(0); /* a list that runs again re-signals its events */
  pthread_mutex_unlock(&mu);
}
EPI(CommandQueueExecuteCommandLists, command_queue_execute_command_lists) {
  UNUSED;
  if (busy) return;
  emit_call("zeCommandQueueExecuteCommandLists", LOOM_KIND_RUNTIME, 0);
  if (r != ZE_RESULT_SUCCESS) return;
  pthread_mutex_lock(&mu);
  obj *q = find_obj(*params->phCommandQueue);
  size_t lost = 0;
  for (uint32_t i = 0; i < *params->pnumCommandLists; i++) {
    obj *l = find_obj((*params->pphCommandLists)[i]);
    if (!l || !q) continue;
    for (size_t k = 0; k < l->n; k++)
      if (push_cmd(q, &l->c[k]) != 0) lost++;
    q = find_obj(*params->phCommandQueue); /* objs may not move here, but be safe */
  }
  pthread_mutex_unlock(&mu);
  if (lost) ze_host->count_lost(ze_self, lost, "out of memory");
}

PRO(EventPoolCreate, event_pool_create) {
  UNUSED;
  if (busy) return;
  cur.t0 = raw_now();
  /* Timestamps on every pool, so commands signalling the program's own
   * events can be timed.  The program's descriptor is not written to. */
  static __thread ze_event_pool_desc_t copy;
  const ze_event_pool_desc_t *d = *params->pdesc;
  if (d && !(d->flags & ZE_EVENT_POOL_FLAG_KERNEL_TIMESTAMP)) {
    copy = *d;
    copy.flags |= ZE_EVENT_POOL_FLAG_KERNEL_TIMESTAMP;
    *params->pdesc = &copy;
  }
}
EPI(EventPoolCreate, event_pool_create) {
  UNUSED;
  if (!busy) emit_call("zeEventPoolCreate", LOOM_KIND_RUNTIME, 0);
}

PRO(KernelCreate, kernel_create) { UNUSED; if (!busy) cur.t0 = raw_now(); }
EPI(KernelCreate, kernel_create) {
  UNUSED;
  if (busy) return;
  if (r == ZE_RESULT_SUCCESS && *params->pdesc && (*params->pdesc)->pKernelName) {
    pthread_mutex_lock(&mu);
    kinfo *k = find_kernel(**params->pphKernel);
    if (k) {
      k->name = api_name((*params->pdesc)->pKernelName);
      k->gs[0] = k->gs[1] = k->gs[2] = 1;
    }
    pthread_mutex_unlock(&mu);
  }
  emit_call("zeKernelCreate", LOOM_KIND_RUNTIME, 0);
}
PRO(KernelSetGroupSize, kernel_set_group_size) { UNUSED; if (!busy) cur.t0 = raw_now(); }
EPI(KernelSetGroupSize, kernel_set_group_size) {
  UNUSED;
  if (busy) return;
  if (r == ZE_RESULT_SUCCESS) {
    pthread_mutex_lock(&mu);
    kinfo *k = find_kernel(*params->phKernel);
    if (k) {
      k->gs[0] = *params->pgroupSizeX, k->gs[1] = *params->pgroupSizeY;
      k->gs[2] = *params->pgroupSizeZ;
    }
    pthread_mutex_unlock(&mu);
  }
  emit_call("zeKernelSetGroupSize", LOOM_KIND_RUNTIME, 0);
}

PRO(CommandListAppendLaunchKernel, command_list_append_launch_kernel) {
  UNUSED;
  if (!busy) cmd_prologue(*params->phCommandList, params->phSignalEvent);
}
EPI(CommandListAppendLaunchKernel, command_list_append_launch_kernel) {
  UNUSED;
  if (busy || !cur.corr) return;
  cmd c = {.kind = LOOM_KIND_KERNEL};
  pthread_mutex_lock(&mu);
  kinfo *k = find_kernel(*params->phKernel);
  if (k && !k->name) {
    /* the whole name: its size first (a buffer too small gets it cut) */
    char *nm = NULL;
    size_t len = 0;
    busy++;
    if (ze.zeKernelGetName(*params->phKernel, &len, NULL) == ZE_RESULT_SUCCESS && len &&
        len < (1u << 20) && (nm = calloc(1, len + 1)) &&
        ze.zeKernelGetName(*params->phKernel, &len, nm) != ZE_RESULT_SUCCESS)
      nm[0] = 0;
    busy--;
    k->name = api_name(nm && nm[0] ? nm : "kernel");
    free(nm);
  }
  c.name = k ? k->name : api_name("kernel");
  if (k) memcpy(c.gs, k->gs, sizeof c.gs);
  pthread_mutex_unlock(&mu);
  const ze_group_count_t *g = *params->ppLaunchFuncArgs;
  if (g) c.gc[0] = g->groupCountX, c.gc[1] = g->groupCountY, c.gc[2] = g->groupCountZ;
  cmd_epilogue("zeCommandListAppendLaunchKernel", r, *params->phCommandList, &c,
               *params->phSignalEvent);
}
PRO(CommandListAppendMemoryCopy, command_list_append_memory_copy) {
  UNUSED;
  if (!busy) cmd_prologue(*params->phCommandList, params->phSignalEvent);
}
EPI(CommandListAppendMemoryCopy, command_list_append_memory_copy) {
  UNUSED;
  if (busy || !cur.corr) return;
  cmd c = {.kind = LOOM_KIND_MEMCPY, .bytes = *params->psize};
  pthread_mutex_lock(&mu);
  obj *o = find_obj(*params->phCommandList);
  ze_context_handle_t ctx = o ? o->ctx : NULL;
  pthread_mutex_unlock(&mu);
  static const char *dirs[3][3] = {
      {"HtoH", "HtoD", "HtoS"}, {"DtoH", "DtoD", "DtoS"}, {"StoH", "StoD", "StoS"}};
  const char *s = mem_kind(ctx, *params->psrcptr), *d = mem_kind(ctx, *params->pdstptr);
  int si = *s == 'H' ? 0 : *s == 'D' ? 1 : 2, di = *d == 'H' ? 0 : *d == 'D' ? 1 : 2;
  c.dir = dirs[si][di];
  char nm[32];
  snprintf(nm, sizeof nm, "Memcpy %s", c.dir);
  c.name = api_name(nm);
  cmd_epilogue("zeCommandListAppendMemoryCopy", r, *params->phCommandList, &c,
               *params->phSignalEvent);
}
PRO(CommandListAppendMemoryFill, command_list_append_memory_fill) {
  UNUSED;
  if (!busy) cmd_prologue(*params->phCommandList, params->phSignalEvent);
}
EPI(CommandListAppendMemoryFill, command_list_append_memory_fill) {
  UNUSED;
  if (busy || !cur.corr) return;
  cmd c = {.kind = LOOM_KIND_MEMSET, .bytes = *params->psize, .name = api_name("Memset")};
  cmd_epilogue("zeCommandListAppendMemoryFill", r, *params->phCommandList, &c,
               *params->phSignalEvent);
}
PRO(CommandListAppendBarrier, command_list_append_barrier) {
  UNUSED;
  if (!busy) cmd_prologue(*params->phCommandList, params->phSignalEvent);
}
EPI(CommandListAppendBarrier, command_list_append_barrier) {
  UNUSED;
  if (busy || !cur.corr) return;
  cmd c = {.kind = LOOM_KIND_SYNC, .name = api_name("Barrier")};
  cmd_epilogue("zeCommandListAppendBarrier", r, *params->phCommandList, &c, *params->phSignalEvent);
}
