/*
 * align.c - clock relation of a merge input to the reference input, from
 * the "clock_sync" markers the traces carry (docs/multirank.md).
 *
 * Each point says: at local time t, add offset to get the reference's time.
 * Two or more points give a line through the first and the last (the init
 * and finalize measurements), so a drifting clock is corrected over the
 * whole run; one point gives a constant.  Without points, processes on the
 * reference's host share its CLOCK_REALTIME and need nothing; others cannot
 * be related and are merged unaligned, which the output says.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "merge/merge.h"
#include "util/util.h"

const char *loom__meta_get(const loom_trace *t, const char *key) {
  for (size_t i = 0; i < t->nmeta; i++)
    if (!strcmp(loom__trace_cstr(t, t->meta[i].key), key))
      return loom__trace_cstr(t, t->meta[i].value);
  return NULL;
}

const loom__targ *loom__arg_of(const loom__ev *e, const loom__targ *args, uint32_t key) {
  if (!key) return NULL;
  for (uint16_t i = 0; i < e->nargs; i++)
    if (args[i].key == key) return &args[i];
  return NULL;
}

int loom__merge_align(loom__minput *in, const loom__minput *ref, loom_trace *out) {
  int64_t t_first = 0, o_first = 0, t_last = 0, o_last = 0, rtt_max = 0;
  int n = 0;
  for (size_t i = 0; i < in->npts; i++) {
    const loom__cpoint *p = &in->pts[i];
    if (!n || p->ts < t_first) t_first = p->ts, o_first = p->off;
    if (!n || p->ts >= t_last) t_last = p->ts, o_last = p->off;
    if (p->rtt > rtt_max) rtt_max = p->rtt;
    n++;
  }
  in->npoints = n;
  in->aligned = 1;
  in->t0 = t_first;
  in->off0 = o_first;
  in->slope =
      n >= 2 && t_last > t_first ? (double)(o_last - o_first) / (double)(t_last - t_first) : 0;
  in->err_ns = rtt_max / 2;
  const char *h = loom__meta_get(in->t, "hostname"), *rh = loom__meta_get(ref->t, "hostname");
  int same_host = h && rh && !strcmp(h, rh);
  /* One host shares one CLOCK_REALTIME: offsets measured there that lie
   * within their own error bound are measurement noise, and applying them
   * could put a receive before its send.  A larger one (a host whose clock
   * really differs, or the test-only shift) is applied. */
  if (n && same_host && llabs(o_first) <= in->err_ns + 1000 && llabs(o_last) <= in->err_ns + 1000)
    in->off0 = 0, in->slope = 0;
  if (n || in == ref) return 0;
  if (same_host) return 0;
  in->aligned = 0;
  char msg[1200];
  snprintf(msg, sizeof msg, "%s: no clock relation to rank %ld (no clock_sync points and %s): "
           "merged unaligned", in->path, ref->rank < 0 ? 0 : ref->rank,
           h && rh ? "another host" : "hostname unknown");
  loom__log(LOOM_SEV_WARNING, "%s", msg);
  return loom__trace_add_warning(out, msg);
}
