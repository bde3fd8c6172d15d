/*
 * test_pfsize.c - the .pftrace writer at the smallest exact encoding of its
 * events (bench/pf_bound.c, docs/formats.md "Size"): on a Kineto-like trace
 * (per op a cpu_op with its External id, its launch call and the kernel with
 * correlation, device and stream, a flow from the call to the kernel) every
 * class's packets take exactly the bound's bytes (a slice of whole
 * microseconds one packet, a legacy complete event), and the file reads back
 * with every event, argument and flow; the strings loom adds to an event
 * (which arguments are JSON) are interned as values, so a kernel with a
 * JSON argument costs the same bytes each time.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../bench/pf_bound.h"
#include "export/export.h"
#include "testutil.h"
#include "trace/trace.h"

static int cmp_cstr(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static loom_trace *new_trace(uint32_t *host, uint32_t q[2]) {
  loom_trace *t = loom__trace_new();
  assert_non_null(t);
  t->start_ns = 1764000000000000000ll;
  loom__trace_add_proc(t, 4242, "python", "CPU", 0);
  loom__trace_add_proc(t, 0, "gpu 0", "Test GPU", 1);
  loom__trace_track(t, 4242, 4242, "thread 4242", LOOM_DEVICE_HOST, host);
  loom__trace_track(t, 0, 7, "stream 7", 0, &q[0]);
  loom__trace_track(t, 0, 8, "stream 8", 0, &q[1]);
  return t;
}

/* n ops as bench_writers makes them (ids from first: their varint sizes);
 * with us, every slice lasts whole microseconds (one packet each). */
static loom_trace *kineto_like(size_t n, uint64_t first, int us) {
  static const char *ops[] = {"aten::mm", "aten::add", "aten::relu", "aten::view"};
  uint32_t host, q[2];
  loom_trace *t = new_trace(&host, q);
  int64_t ts = t->start_ns;
  const int64_t d[4] = {us ? 3000 : 2500, us ? 1000 : 500, us ? 1000 : 1200, us ? 2000 : 1800};
  for (uint64_t c = first; c < first + n; c++, ts += us ? 4000 : 3000) {
    char kn[64];
    snprintf(kn, sizeof kn, "kernel_%s", ops[c % 4] + 6);
    loom__ev op = {.ts = ts, .dur = d[0], .external_id = c, .name = loom__trace_str(t, ops[c % 4]),
                   .cat = loom__trace_str(t, "cpu_op"), .track = host,
                   .kind = LOOM_KIND_CPU_OP, .ph = LOOM__PH_COMPLETE};
    loom__ev rt = {.ts = ts + d[1], .dur = d[2], .correlation = c, .external_id = c,
                   .name = loom__trace_str(t, "cudaLaunchKernel"),
                   .cat = loom__trace_str(t, "cuda_runtime"), .track = host,
                   .kind = LOOM_KIND_RUNTIME, .ph = LOOM__PH_COMPLETE};
    loom__ev kr = {.ts = ts + d[0], .dur = d[3], .correlation = c, .external_id = c,
                   .name = loom__trace_str(t, kn), .cat = loom__trace_str(t, "kernel"),
                   .track = q[c % 2], .kind = LOOM_KIND_KERNEL, .ph = LOOM__PH_COMPLETE};
    loom__trace_add_ev(t, &op);
    loom__trace_add_ev(t, &rt);
    loom__trace_add_ev(t, &kr);
    loom__trace_add_arg_int(t, "device", 0);
    loom__trace_add_arg_int(t, "stream", 7 + (int64_t)(c % 2));
    loom__flow f = {(uint32_t)(t->nev - 2), (uint32_t)(t->nev - 1), c};
    assert_int_equal(LOOM__PUSH(t->flows, t->nflows, t->cap_flows, f), 0);
  }
  t->end_ns = ts;
  return t;
}

/* Each event of t as a line (thread, times, name, ids, arguments, the ids
 * of its flows), sorted: the reader gives them in the file's order. */
static char *event_lines(const loom_trace *t) {
  char **l = calloc(t->nev + 1, sizeof *l), *all = NULL;
  size_t n = 0;
  for (size_t i = 0; i < t->nev; i++) {
    const loom__ev *e = &t->ev[i];
    char args[256] = "", fl[64] = "";
    for (uint16_t k = 0, at = 0; k < e->nargs; k++) {
      const loom__targ *a = &t->args[e->args_off + k];
      at += (uint16_t)snprintf(args + at, sizeof args - at, " %s=%lld",
                               loom__trace_cstr(t, a->key), (long long)a->v.i);
    }
    for (size_t f = 0; f < t->nflows; f++)
      if (t->flows[f].from == i || t->flows[f].to == i)
        snprintf(fl, sizeof fl, " flow %s %llu", t->flows[f].from == i ? "out" : "in",
                 (unsigned long long)t->flows[f].id);
    assert_true(asprintf(&l[i], "%lld %lld %lld %s %s ext=%llu corr=%llu%s%s\n",
                         (long long)t->tracks[e->track].tid, (long long)e->ts, (long long)e->dur,
                         loom__trace_cstr(t, e->cat), loom__trace_cstr(t, e->name),
                         (unsigned long long)e->external_id, (unsigned long long)e->correlation,
                         args, fl) > 0);
  }
  qsort(l, t->nev, sizeof *l, cmp_cstr);
  FILE *m = open_memstream(&all, &n);
  for (size_t i = 0; i < t->nev; i++) fputs(l[i], m), free(l[i]);
  fclose(m);
  free(l);
  return all;
}

static void same_events(const loom_trace *a, const loom_trace *b) {
  assert_int_equal(a->nev, b->nev);
  assert_int_equal(a->nflows, b->nflows);
  char *x = event_lines(a), *y = event_lines(b);
  assert_string_equal(x, y);
  free(x);
  free(y);
}

/* Ids of one, two and three bytes, slices of ns and of whole us: each
 * class exactly at the bound. */
static void test_kineto_like_at_the_bound(void **state) {
  (void)state;
  const uint64_t firsts[] = {1, 200, 20000, 1, 20000};
  for (int k = 0; k < 5; k++) {
    loom_trace *t = kineto_like(100, firsts[k], k >= 3);
    char pf[512];
    tmp_path(pf, sizeof pf, ".pftrace");
    assert_int_equal(loom_trace_save(t, pf), LOOM_OK);
    pfb_sizes s;
    assert_int_equal(pfb_bound(t, &s), 0);
    assert_int_equal(pfb_attribute(pf, &s), 0);
    assert_int_equal(s.whole_us, k >= 3 ? 300 : 0);
    for (int c = PFB_OP; c <= PFB_KERNEL; c++) {
      assert_int_equal(s.events[c], 100);
      if (s.loom[c] != s.bound[c])
        fail_msg("ids from %llu, %s: %llu bytes, the bound %llu", (unsigned long long)firsts[k],
                 pfb_class_name(c), (unsigned long long)s.loom[c],
                 (unsigned long long)s.bound[c]);
    }
    assert_int_equal(s.loom[PFB_OTHER], 0);
    loom_trace *back = NULL;
    assert_int_equal(loom__read_pftrace(pf, NULL, NULL, &back), LOOM_OK);
    same_events(t, back);
    loom_trace_free(back);
    loom_trace_free(t);
    unlink(pf);
  }
}

/* n kernels on one queue, each with a JSON argument (as Kineto's grid). */
static off_t json_kernels_size(size_t n, loom_trace **out) {
  uint32_t host, q[2];
  loom_trace *t = new_trace(&host, q);
  for (size_t i = 0; i < n; i++) {
    loom__ev e = {.ts = t->start_ns + (int64_t)i * 1000, .dur = 500,
                  .name = loom__trace_str(t, "k"), .cat = loom__trace_str(t, "kernel"),
                  .track = q[0], .kind = LOOM_KIND_KERNEL, .ph = LOOM__PH_COMPLETE};
    loom__trace_add_ev(t, &e);
    for (int k = 0; k < 2; k++) {
      loom__targ a = {.key = loom__trace_str(t, k ? "block" : "grid"), .type = LOOM_ARG_STRING,
                      .json = 1, .v.s = loom__trace_str(t, k ? "[128, 1, 1]" : "[1, 1, 1]")};
      loom__trace_add_arg(t, &a);
    }
  }
  t->end_ns = t->start_ns + (int64_t)n * 1000;
  char pf[512];
  tmp_path(pf, sizeof pf, ".pftrace");
  assert_int_equal(loom_trace_save(t, pf), LOOM_OK);
  struct stat st;
  assert_int_equal(stat(pf, &st), 0);
  if (out) assert_int_equal(loom__read_pftrace(pf, NULL, NULL, out), LOOM_OK);
  loom_trace_free(t);
  unlink(pf);
  return st.st_size;
}

/* A kernel with two JSON arguments after the first: its begin (packet 2,
 * time delta 2, sequence id 2, TrackEvent 2, type 2, name 2, category 2)
 * 14 bytes, each argument 7 (annotation 2, name iid 2, value iid 3: its tag
 * takes two), "loom_json" ("0,1", interned) 7, and its end 10: 45 bytes
 * (in place, "0,1" took 9: 47). */
static void test_json_marks_interned(void **state) {
  (void)state;
  loom_trace *back = NULL;
  off_t small = json_kernels_size(100, NULL), big = json_kernels_size(300, &back);
  assert_int_equal(big - small, 200 * 45);
  assert_int_equal(back->nev, 300);
  for (size_t i = 0; i < back->nev; i++) {
    assert_int_equal(back->ev[i].nargs, 2);
    const loom__targ *a = &back->args[back->ev[i].args_off];
    assert_int_equal(a[0].json, 1);
    assert_int_equal(a[1].json, 1);
    assert_string_equal(loom__trace_cstr(back, a[0].v.s), "[1, 1, 1]");
    assert_string_equal(loom__trace_cstr(back, a[1].v.s), "[128, 1, 1]");
  }
  loom_trace_free(back);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_kineto_like_at_the_bound),
      cmocka_unit_test(test_json_marks_interned),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
