/*
 * pf_bound.h - the smallest exact encoding of a trace's events in Perfetto's
 * track-event format, per event class, computed from the protobuf encoding
 * (field tags, varint lengths), and the bytes of loom's .pftrace of the same
 * trace attributed to the same classes (bench_writers pftrace).
 */
#ifndef LOOM_BENCH_PF_BOUND_H
#define LOOM_BENCH_PF_BOUND_H

#include <stdint.h>

#include "trace/trace.h"

/* Event classes: a framework op, a runtime call, a device kernel, the rest. */
enum { PFB_OP, PFB_LAUNCH, PFB_KERNEL, PFB_OTHER, PFB_NCLASS };

typedef struct pfb_sizes {
  uint64_t events[PFB_NCLASS];
  uint64_t bound[PFB_NCLASS];     /* the smallest exact encoding's bytes */
  uint64_t bound_end[PFB_NCLASS]; /* of which the end packets */
  uint64_t bound_args[PFB_NCLASS];/* of which the debug annotations */
  uint64_t bound_flows[PFB_NCLASS];/* of which the flow ids */
  uint64_t bound_interned;        /* of which interning entries (in the classes too) */
  uint64_t whole_us;              /* slices of whole microseconds (see pf_bound.c) */
  uint64_t loom[PFB_NCLASS];      /* loom's file: the bytes of each class's packets */
  uint64_t loom_fixed;            /* loom's file: packets of no event (descriptors, clocks) */
  uint64_t loom_total;
  const char *cat[PFB_NCLASS];    /* each class's category in the trace (its first event's) */
} pfb_sizes;

const char *pfb_class_name(int cls);
/* The bound of every event of t into s (s zeroed first).  -1: out of memory. */
int pfb_bound(const loom_trace *t, pfb_sizes *s);
/* loom's .pftrace of t at path, each packet's bytes given to its event's
 * class (after pfb_bound, which names the classes' categories).  -1: the
 * file cannot be read or is not a .pftrace. */
int pfb_attribute(const char *path, pfb_sizes *s);

#endif
