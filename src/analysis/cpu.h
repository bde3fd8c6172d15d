/*
 * cpu.h - CPU samples and OS counters in `loom report` (docs/report.md,
 * "CPU samples").
 *
 * While the trace streams in, each sample (LOOM_KIND_SAMPLE) keeps 16 bytes:
 * its time, thread and leaf call site (stacks are parsed once per distinct
 * text, trace/samples.h), and each thread keeps the largest value of each OS
 * counter.  In the pass over the sorted slices, each framework op, user
 * range and step adds the samples of its thread that fall inside it to its
 * name's (or step's) slot: a count per (slot, call site).  At the end these
 * become, per slot, the functions with their self samples (leaf frame) and
 * total samples (anywhere in the stack, once per stack), and the overall
 * stacks merged by function become the flame graph.  A trace without
 * samples costs nothing.
 */
#ifndef LOOM_ANALYSIS_CPU_H
#define LOOM_ANALYSIS_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "trace/samples.h"
#include "trace/trace.h"
#include "util/util.h"

/* Slot groups: LOOM__G_OP and LOOM__G_RANGE by name, steps by index. */
#define LOOM__CPU_ALL 254
#define LOOM__CPU_STEP 255
/* OS counters kept per thread (the args of counter records). */
#define LOOM__CPU_NCTR 3
extern const char *const loom__cpu_ctr_keys[LOOM__CPU_NCTR];

typedef struct loom__csmp { int64_t ts; uint32_t track, site; } loom__csmp;
typedef struct loom__cfn { uint32_t label, module; } loom__cfn; /* ids in s.strs */
typedef struct loom__cslot {
  uint32_t group, key;  /* key: a name's string id, or a step's index */
  uint64_t n;           /* samples inside (each once) */
  size_t e0, ne;        /* its functions: ent[e0 .. e0+ne), by total */
  uint32_t last_track;  /* track + 1 of the samples counted last */
  size_t last_hi;       /* and where they ended (index in smp) */
} loom__cslot;
typedef struct loom__centry { uint32_t slot, fn; uint64_t self, total; } loom__centry;
typedef struct loom__chit { uint32_t slot, site; uint64_t n; } loom__chit;
/* A flame graph node (stacks merged by function), in depth-first order. */
typedef struct loom__cflame { uint32_t fn, depth; uint64_t x, n; } loom__cflame;
typedef struct loom__cctr {
  uint32_t track;
  uint64_t v[LOOM__CPU_NCTR];
  uint8_t seen[LOOM__CPU_NCTR];
} loom__cctr;

typedef struct loom__rcpu {
  loom__samples s;
  loom__map stack_of;        /* s.strs id of a stack text -> leaf site */
  loom__csmp *smp;           /* sorted by track, then time (after _sorted) */
  size_t nsmp, cap_smp;
  uint64_t nempty;           /* samples with no stack */
  uint32_t *frame_fn;        /* frame index -> fn */
  size_t nframe_fn;
  loom__cfn *fns;
  size_t nfns, cap_fns;
  loom__map fn_of;           /* label << 32 | module -> fn + 1 */
  loom__cslot *slots;        /* [0]: every sample */
  size_t nslots, cap_slots;
  loom__map slot_of;         /* group << 32 | key -> slot + 1 */
  loom__chit *hits;
  size_t nhits, cap_hits;
  loom__map hit_of;          /* slot << 32 | site -> hit + 1 */
  loom__centry *ent;
  size_t nent, cap_ent;
  loom__cflame *flame;
  size_t nflame, cap_flame;
  loom__cctr *ctr;           /* threads with OS counters, in order of appearance */
  size_t nctr, cap_ctr;
  loom__map ctr_of;          /* track -> ctr + 1 */
} loom__rcpu;

void loom__cpu_init(loom__rcpu *c);
void loom__cpu_free(loom__rcpu *c);
/* A streamed event: samples and OS counters are kept, others ignored.
 * 0, or -1 when out of memory. */
int loom__cpu_event(loom__rcpu *c, const loom_trace *t, const loom__ev *e, const loom__targ *args);
/* After the stream, before any slice: orders the samples. */
int loom__cpu_sorted(loom__rcpu *c);
/* A slice [ts, ts + dur) on track: its samples count for slot (group, key),
 * each sample once per slot even where slices of one name nest. */
int loom__cpu_slice(loom__rcpu *c, uint32_t group, uint32_t key, uint32_t track, int64_t ts,
                    int64_t dur);
/* After the pass: functions per slot and the flame graph. */
int loom__cpu_finish(loom__rcpu *c);
/* The flame graph (flame[]) from the stacks of slot 0 (cpu_flame.c). */
int loom__cpu_flame(loom__rcpu *c);
/* The slot of (group, key), or NULL when no sample fell inside. */
const loom__cslot *loom__cpu_slot(const loom__rcpu *c, uint32_t group, uint32_t key);

#endif
