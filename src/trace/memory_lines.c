/*
 * memory_lines.c - the lines `loom record`'s summary prints about a trace's
 * memory (loom__mem_lines, reached by the command through tools.h): where
 * each device's memory peaked and who held it then, so that a program the
 * OOM killer ended names its top holders without opening a report.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/memory.h"

const char *loom__mem_bytes_text(uint64_t b, char *buf, size_t n) {
  static const char *const unit[] = {"KiB", "MiB", "GiB", "TiB"};
  if (b < 1024) {
    snprintf(buf, n, "%" PRIu64 " B", b);
    return buf;
  }
  double v = (double)b / 1024;
  int u = 0;
  while (v >= 1024 && u < 3) v /= 1024, u++;
  snprintf(buf, n, "%.2f %s", v, unit[u]);
  return buf;
}

static _Thread_local const loom__mem *lines_mem;
static int cmp_peak(const void *pa, const void *pb) {
  const loom__mem_series *a = loom__mem_series_at(lines_mem, *(const size_t *)pa),
                         *b = loom__mem_series_at(lines_mem, *(const size_t *)pb);
  if (a->peak != b->peak) return a->peak > b->peak ? -1 : 1;
  return *(const size_t *)pa < *(const size_t *)pb ? -1 : 1;
}

/* One series' line into line[0..n). */
static void series_line(const loom_trace *t, const loom__mem_series *s, int64_t t0, char *line,
                        size_t n) {
  char dev[64], b[32];
  size_t l = (size_t)snprintf(line, n, "loom:   memory %s (%s): peak %s",
                              loom__mem_device_name(t, lines_mem, s, dev, sizeof dev),
                              loom__mem_kind_name(t, s->device, s->kind),
                              loom__mem_bytes_text(s->peak, b, sizeof b));
#define ADD(...) (l < n ? l += (size_t)snprintf(line + l, n - l, __VA_ARGS__) : 0)
  if (s->peak) ADD(" at %.3f ms", (double)(s->peak_ts - t0) / 1e6);
  if (s->peak && s->peak_op) ADD(" in %s", loom__trace_cstr(t, s->peak_op));
  if (s->peak && s->peak_step) ADD(" (%s)", loom__trace_cstr(t, s->peak_step));
  for (size_t i = 0; i < s->nat_peak && i < 3; i++)
    ADD("%s%s %s", i ? ", " : "; held at the peak by ",
        s->at_peak[i].op ? loom__trace_cstr(t, s->at_peak[i].op) : "(no op)",
        loom__mem_bytes_text(s->at_peak[i].bytes, b, sizeof b));
  if (s->nleaks)
    ADD("; %zu still allocated at the end (%s)", s->nleaks,
        loom__mem_bytes_text(s->leak_bytes, b, sizeof b));
  if (s->nunknown)
    ADD("; %" PRIu64 " free%s of unknown addresses", s->nunknown, s->nunknown == 1 ? "" : "s");
  ADD("\n");
#undef ADD
  if (l >= n && n > 1) { /* cut: still one line */
    line[n - 2] = '\n';
    line[n - 1] = 0;
  }
}

int loom__mem_lines(const loom_trace *t, char *out, size_t n) {
  if (n) out[0] = 0;
  if (!loom__mem_events(t)) return 0;
  loom__mem *m = NULL;
  if (loom__mem_walk(t, 0, NULL, NULL, &m)) return -1;
  size_t ns = loom__mem_count(m), *order = malloc((ns + 1) * sizeof *order), l = 0;
  if (!order) {
    loom__mem_free(m);
    return -1;
  }
  for (size_t i = 0; i < ns; i++) order[i] = i;
  lines_mem = m;
  if (ns > 1) qsort(order, ns, sizeof *order, cmp_peak);
  int64_t t0, t1;
  size_t nb;
  loom__mem_span(m, &t0, &t1, &nb);
  for (size_t i = 0; i < ns && i < 8; i++) {
    char line[1024];
    series_line(t, loom__mem_series_at(m, order[i]), t0, line, sizeof line);
    size_t k = strlen(line);
    if (l + k + 1 > n) break;
    memcpy(out + l, line, k + 1);
    l += k;
  }
  free(order);
  loom__mem_free(m);
  return 0;
}
