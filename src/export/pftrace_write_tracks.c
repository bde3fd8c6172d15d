/*
 * pftrace_write_tracks.c - the Perfetto writer's track descriptors (processes,
 * threads and queues, device pids, counter series, async ranges, tracks of
 * overlapping slices) and CPU samples (PerfSample packets over interned
 * frames and callstacks).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export/pftrace_write.h"

void loom__pfw_descriptor(writer *w, uint64_t uuid, uint64_t parent, const char *name,
                       const pb_buf *proc, const pb_buf *thread, int counter, const char *desc) {
  pb_buf *d = &w->tmp;
  d->n = 0;
  pb_uint(d, PF_TD_UUID, uuid);
  if (parent) pb_uint(d, PF_TD_PARENT_UUID, parent);
  if (name && *name && !thread && !proc) pb_str(d, PF_TD_NAME, name);
  if (desc) pb_str(d, PF_TD_DESCRIPTION, desc);
  if (proc) pb_msg(d, PF_TD_PROCESS, proc);
  if (thread) pb_msg(d, PF_TD_THREAD, thread);
  /* counter 2: CounterDescriptor.unit = UNIT_SIZE_BYTES */
  if (counter) pb_lenbytes(d, PF_TD_COUNTER, "\x18\x03", counter == 2 ? 2 : 0);
  pb_uint(&w->pkt, PF_PKT_SEQ_ID, 1);
  pb_msg(&w->pkt, PF_PKT_TRACK_DESCRIPTOR, d);
  loom__pfw_emit_packet(w, &w->pkt);
}

/* Whether a pid is a device's: the first track with that pid says; a pid
 * no track has is a device's when a device names it.  kind: pid -> 1 host,
 * 2 device (built once, so the lookups stay linear in the trace). */
static int pid_kinds(const loom_trace *t, loom__map *kind) {
  for (size_t i = 0; i < t->ntracks; i++)
    if (!loom__map_get(kind, (uint64_t)t->tracks[i].pid) &&
        loom__map_put(kind, (uint64_t)t->tracks[i].pid,
                      t->tracks[i].device != LOOM_DEVICE_HOST ? 2 : 1))
      return -1;
  for (size_t i = 0; i < t->ndevs; i++)
    if (!loom__map_get(kind, (uint64_t)t->devs[i].pid) &&
        loom__map_put(kind, (uint64_t)t->devs[i].pid, 2))
      return -1;
  return 0;
}

static int device_pid(const loom__map *kind, int64_t pid) {
  const uint64_t *k = loom__map_get(kind, (uint64_t)pid);
  return k && *k == 2;
}

/* A device pid that BASE + pid cannot hold (Kineto writes pid -1): */
static int odd_device_pid(const loom__map *kind, int64_t pid) {
  return (pid < 0 || pid > INT32_MAX - PF_DEVICE_PID_BASE) && device_pid(kind, pid);
}

/* The pid each process has in the file (pid -> file pid): a host pid as it
 * is; a device pid moved up by PF_DEVICE_PID_BASE, or, where that cannot
 * hold it, the next pid down from INT32_MAX in the order of the processes,
 * with the real one in its process descriptor's description ("loom: device
 * pid -1").  A pid of a track only gets the pid after the processes'. */
static int pf_pids(const loom_trace *t, const loom__map *kind, loom__map *out) {
  int64_t k = 0;
  for (size_t i = 0; i < t->nprocs; i++) {
    int64_t pid = t->procs[i].pid, v = pid;
    if (loom__map_get(out, (uint64_t)pid)) continue;
    if (odd_device_pid(kind, pid)) v = INT32_MAX - k++;
    else if (device_pid(kind, pid)) v = pid + PF_DEVICE_PID_BASE;
    if (loom__map_put(out, (uint64_t)pid, (uint64_t)v)) return -1;
  }
  for (size_t i = 0; i < t->ntracks; i++) {
    int64_t pid = t->tracks[i].pid, v = pid;
    if (loom__map_get(out, (uint64_t)pid)) continue;
    if (odd_device_pid(kind, pid)) v = INT32_MAX - k;
    else if (device_pid(kind, pid)) v = pid + PF_DEVICE_PID_BASE;
    if (loom__map_put(out, (uint64_t)pid, (uint64_t)v)) return -1;
  }
  return 0;
}

static int64_t pf_pid(const loom__map *pids, int64_t pid) {
  const uint64_t *v = loom__map_get(pids, (uint64_t)pid);
  return v ? (int64_t)*v : pid;
}

void loom__pfw_describe_tracks(writer *w) {
  const loom_trace *t = w->t;
  pb_buf a = {0};
  uint64_t *proc_uuid = calloc(t->nprocs + 1, sizeof *proc_uuid);
  loom__map kind = {0}, pids = {0};
  if (!proc_uuid || pid_kinds(t, &kind) || pf_pids(t, &kind, &pids)) {
    w->oom = 1;
    goto out;
  }
  for (size_t i = 0; i < t->nprocs; i++) {
    const loom__proc *p = &t->procs[i];
    a.n = 0;
    pb_sint(&a, PF_PD_PID, pf_pid(&pids, p->pid));
    if (p->name) pb_str(&a, PF_PD_NAME, loom__trace_cstr(t, p->name));
    if (p->labels) pb_str(&a, PF_PD_LABELS, loom__trace_cstr(t, p->labels));
    proc_uuid[i] = w->next_uuid++;
    if (!loom__map_get(&w->proc_uuids, (uint64_t)p->pid) &&
        loom__map_put(&w->proc_uuids, (uint64_t)p->pid, proc_uuid[i]))
      w->oom = 1;
    char desc[48];
    snprintf(desc, sizeof desc, "loom: device pid %lld", (long long)p->pid);
    loom__pfw_descriptor(w, proc_uuid[i], 0, NULL, &a, NULL, 0,
                         odd_device_pid(&kind, p->pid) ? desc : NULL);
  }
  for (size_t i = 0; i < t->ntracks; i++) {
    const loom__track *k = &t->tracks[i];
    a.n = 0;
    pb_sint(&a, PF_THD_PID, pf_pid(&pids, k->pid));
    pb_sint(&a, PF_THD_TID, k->tid);
    if (k->name) pb_str(&a, PF_THD_NAME, loom__trace_cstr(t, k->name));
    w->track_uuid[i] = w->next_uuid++;
    loom__pfw_descriptor(w, w->track_uuid[i], 0, NULL, NULL, &a, 0, NULL);
  }
out:
  loom__map_free(&kind);
  loom__map_free(&pids);
  free(a.p);
  free(proc_uuid);
}

/* The uuid of the counter series (track, name, key), described on first use. */
uint64_t loom__pfw_counter_track(writer *w, const loom__ev *e, uint32_t key) {
  uint64_t h = loom__hash_u64(((uint64_t)e->track << 40) ^ ((uint64_t)e->name << 20) ^ key) | 1;
  uint64_t *u = loom__map_get(&w->counter_tracks, h);
  if (u) return *u;
  uint64_t uuid = w->next_uuid++;
  if (loom__map_put(&w->counter_tracks, h, uuid)) w->oom = 1;
  const char *name = loom__trace_cstr(w->t, e->name);
  const char *k = loom__trace_cstr(w->t, key);
  loom__pfw_descriptor(w, uuid, w->track_uuid[e->track], name, NULL, NULL, 1,
             strcmp(name, k) ? k : NULL);
  return uuid;
}

uint64_t loom__pfw_async_track(writer *w, const loom__ev *e) {
  uint64_t h = loom__hash_u64(((uint64_t)e->track << 44) ^ e->correlation) | 1;
  uint64_t *u = loom__map_get(&w->async_tracks, h);
  if (u) return *u;
  uint64_t uuid = w->next_uuid++;
  if (loom__map_put(&w->async_tracks, h, uuid)) w->oom = 1;
  char desc[48];
  snprintf(desc, sizeof desc, "async %llu", (unsigned long long)e->correlation);
  loom__pfw_descriptor(w, uuid, w->track_uuid[e->track], loom__trace_cstr(w->t, e->name), NULL,
                       NULL, 0, desc);
  return uuid;
}

/* A slice that overlaps its parent without nesting goes on a child track of
 * its thread, "overlapping slices" (k > 1: "overlapping slices k"), one per
 * level of such overlap, described on first use; readers put its slices
 * back on the thread. */
uint64_t loom__pfw_lane_track(writer *w, uint32_t track, uint16_t num) {
  uint64_t uuid = w->next_uuid++;
  char name[48];
  if (num > 1) snprintf(name, sizeof name, "overlapping slices %u", (unsigned)num);
  else snprintf(name, sizeof name, "overlapping slices");
  loom__pfw_descriptor(w, uuid, w->track_uuid[track], name, NULL, NULL, 0, PF_LANE_DESC);
  return uuid;
}

/* ---- CPU samples -------------------------------------------------------- */
int loom__pfw_samples_prepare(writer *w) {
  if (loom__samples_build(w->t, &w->smp)) return -1;
  if (!w->smp.nsamples) return 0;
  for (size_t i = 0; i < w->smp.nsamples; i++)
    if (w->smp.samples[i].site &&
        loom__map_put(&w->site_of_ev, w->smp.samples[i].ev + 1, w->smp.samples[i].site))
      return -1;
  w->seen_str = calloc(w->smp.strs.n + 1, 1);
  w->seen_frame = calloc(w->smp.nframes + 1, 1);
  w->seen_site = calloc(w->smp.nsites + 1, 1);
  return w->seen_str && w->seen_frame && w->seen_site ? 0 : -1;
}

void loom__pfw_samples_free(writer *w) {
  loom__samples_free(&w->smp);
  loom__map_free(&w->site_of_ev);
  free(w->seen_str);
  free(w->seen_frame);
  free(w->seen_site);
}

/* The leaf site of a sample that a PerfSample holds exactly, else 0 (it
 * is written as an instant with its "stack" annotation): a host thread
 * with pid and tid Perfetto can hold, its stack the only argument, and
 * the name and category a reader gives a sample of that stack. */
uint32_t loom__pfw_perf_sample_site(writer *w, const loom__ev *e, uint32_t ev) {
  const loom_trace *t = w->t;
  uint64_t *site = loom__map_get(&w->site_of_ev, (uint64_t)ev + 1);
  const loom__track *k = &t->tracks[e->track];
  if (!site || e->nargs != 1 || k->device != LOOM_DEVICE_HOST || k->pid <= 0 ||
      k->pid >= PF_DEVICE_PID_BASE || k->tid <= 0 || k->tid > UINT32_MAX ||
      strcmp(loom__trace_cstr(t, e->cat), "cpu_sample"))
    return 0;
  char label[600];
  const char *name =
      loom__samples_frame_label(&w->smp, w->smp.sites[*site - 1].frame, label, sizeof label);
  return strcmp(name, loom__trace_cstr(t, e->name)) ? 0 : (uint32_t)*site;
}

static void intern_sample_str(writer *w, uint32_t field, uint32_t id) {
  if (!id || w->seen_str[id] & (field == PF_ID_FUNCTION_NAMES ? 1 : 2)) return;
  w->seen_str[id] |= field == PF_ID_FUNCTION_NAMES ? 1 : 2;
  pb_buf *m = &w->tmp;
  m->n = 0;
  pb_uint(m, 1, id);
  pb_str(m, 2, loom__strtab_get(&w->smp.strs, id));
  pb_msg(&w->interned, field, m);
  if (field != PF_ID_MAPPING_PATHS) return;
  m->n = 0; /* the module's mapping: its path alone (no addresses are kept) */
  pb_uint(m, PF_MAP_IID, id);
  pb_uint(m, PF_MAP_PATH_STRING_IDS, id);
  pb_msg(&w->interned, PF_ID_MAPPINGS, m);
}

/* Interns what the callstack of site needs that the file does not hold yet. */
static void intern_callstack(writer *w, uint32_t site) {
  if (w->seen_site[site]) return;
  w->seen_site[site] = 1;
  const loom__samples *s = &w->smp;
  pb_buf *cs = &w->names; /* the callstack: frames outermost first */
  cs->n = 0;
  pb_uint(cs, PF_CALLSTACK_IID, site);
  uint32_t depth = s->sites[site - 1].depth, *ids = malloc(depth * sizeof *ids);
  if (!ids) {
    w->oom = 1;
    return;
  }
  uint32_t n = 0;
  for (uint32_t at = site; at && n < depth; at = s->sites[at - 1].parent)
    ids[n++] = s->sites[at - 1].frame;
  while (n--) {
    uint32_t fi = ids[n];
    const loom__sframe *f = &s->frames[fi];
    if (!w->seen_frame[fi]) {
      w->seen_frame[fi] = 1;
      intern_sample_str(w, PF_ID_FUNCTION_NAMES, f->name);
      intern_sample_str(w, PF_ID_MAPPING_PATHS, f->module);
      pb_buf *m = &w->tmp;
      m->n = 0;
      pb_uint(m, PF_FRAME_IID, fi + 1);
      if (f->name) pb_uint(m, PF_FRAME_FUNCTION_NAME_ID, f->name);
      if (f->module) pb_uint(m, PF_FRAME_MAPPING_ID, f->module);
      if (f->module) pb_uint(m, PF_FRAME_REL_PC, f->offset);
      pb_msg(&w->interned, PF_ID_FRAMES, m);
    }
    pb_uint(cs, PF_CALLSTACK_FRAME_IDS, fi + 1);
  }
  free(ids);
  pb_msg(&w->interned, PF_ID_CALLSTACKS, cs);
}


void loom__pfw_write_perf_sample(writer *w, const loom__ev *e, uint32_t site) {
  const loom__track *k = &w->t->tracks[e->track];
  w->interned.n = 0;
  intern_callstack(w, site);
  pb_buf *ps = &w->te;
  ps->n = 0;
  pb_uint(ps, PF_PS_PID, (uint64_t)k->pid);
  pb_uint(ps, PF_PS_TID, (uint64_t)k->tid);
  pb_uint(ps, PF_PS_CALLSTACK_IID, site);
  loom__pfw_put(w, &w->lanes[0], e->ts, PF_PKT_PERF_SAMPLE, ps);
}

/* The counter track of a memory series (bytes in use, or reserved), under
 * its process (the device's, or the host's) when the trace has it,
 * described on first use and marked derived for readers (memory.h). */
uint64_t loom__pfw_mem_track(writer *w, uint32_t series, int reserved) {
  uint64_t key = (uint64_t)series * 2 + (uint64_t)reserved + 1;
  uint64_t *u = loom__map_get(&w->mem_tracks, key);
  if (u) return *u;
  uint64_t uuid = w->next_uuid++;
  if (loom__map_put(&w->mem_tracks, key, uuid)) w->oom = 1;
  const loom__memseries *s = &w->mem.acc.series[series];
  char name[128];
  snprintf(name, sizeof name, "%s %s", s->name, reserved ? "reserved" : "in use");
  const uint64_t *proc = loom__map_get(&w->proc_uuids, (uint64_t)s->pid);
  loom__pfw_descriptor(w, uuid, proc ? *proc : 0, name, NULL, NULL, 2, LOOM__MEM_COUNTER_DESC);
  return uuid;
}
