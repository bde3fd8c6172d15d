/*
 * test_torch_memory.c - PyTorch's allocations through the adapter: an
 * unmodified /usr/bin/python3 training a small model under
 * torch.profiler(profile_memory=True) (tests/integrations/torch_memory.py),
 * recorded by `loom record` in the same run.  Inside the script's
 * "workload" region loom's trace holds exactly the allocations and frees
 * PyTorch's profiler saw (counts and bytes); per op name, the bytes its ops
 * allocated minus freed themselves (loom: the op innermost on the thread)
 * equal the profiler's own attribution in its event tree; the net bytes of
 * the region equal the sum of the profiler's self_cpu_memory_usage (which
 * per op is found by whole-microsecond intervals and moves from run to run
 * at op edges: printed beside loom's, not compared).  The profiler's counts
 * equal loom's: it still sees every report loom takes.  With
 * `--option pytorch.memory=0` the trace holds no allocation.
 *
 * A device allocator's reports (tests/memory/torch_report.cpp, for cuda:1
 * in a CPU build) become pool memory on device 1 with the pool's reserved
 * bytes.
 *
 * The trace is read back from its file and memory events are found by their
 * alloc/free marks and the model's "bytes" argument, whatever the writer
 * calls them.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

typedef struct op_bytes {
  char name[128];
  uint64_t ext;
  int64_t bytes;
} op_bytes;

static int64_t bytes_of(const loom_trace *t, size_t i) {
  loom_arg a[24];
  size_t n = loom_trace_event_args(t, i, a, 24);
  for (size_t k = 0; k < n && k < 24; k++)
    if (!strcmp(a[k].key, "bytes")) return a[k].type == LOOM_ARG_INT ? a[k].v.i : (int64_t)a[k].v.u;
  return -1;
}

static int cmp_name(const void *a, const void *b) {
  return strcmp(((const op_bytes *)a)->name, ((const op_bytes *)b)->name);
}

/* "N1=B1;N2=B2" of the trace's ops inside the workload: net bytes per op
 * name, names with 0 left out, sorted; counts into allocs, frees, bytes,
 * and the region's net bytes into net. */
static void loom_side(const loom_trace *t, char *out, size_t cap, long *allocs, long *frees,
                      long long *nbytes, long long *net) {
  int64_t ws = 0, we = 0;
  size_t nev = loom_trace_event_count(t), nops = 0;
  op_bytes *ops = calloc(nev, sizeof *ops);
  assert_non_null(ops);
  for (size_t i = 0; i < nev; i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    if (!strcmp(v.name, "workload") && v.kind == LOOM_KIND_USER_RANGE)
      ws = v.start_ns, we = v.start_ns + v.dur_ns;
  }
  assert_true(we > ws);
  for (size_t i = 0; i < nev; i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    if (v.kind == LOOM_KIND_CPU_OP && v.start_ns >= ws && v.start_ns <= we) {
      snprintf(ops[nops].name, sizeof ops[nops].name, "%s", v.name);
      ops[nops++].ext = v.external_id;
    }
  }
  *allocs = *frees = 0;
  *nbytes = *net = 0;
  for (size_t i = 0; i < nev; i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    if (!(v.roles & (LOOM_RECORD_F_ALLOC | LOOM_RECORD_F_FREE)) || v.start_ns < ws ||
        v.start_ns > we)
      continue;
    int64_t b = bytes_of(t, i);
    assert_true(b > 0); /* PyTorch gives the size of what it frees */
    int is_free = (v.roles & LOOM_RECORD_F_FREE) != 0;
    *net += is_free ? -b : b;
    if (is_free) ++*frees;
    else ++*allocs, *nbytes += b;
    for (size_t k = 0; k < nops && v.external_id; k++)
      if (ops[k].ext == v.external_id) {
        ops[k].bytes += is_free ? -b : b;
        break;
      }
  }
  /* per name */
  qsort(ops, nops, sizeof *ops, cmp_name);
  size_t len = 0;
  out[0] = 0;
  for (size_t i = 0; i < nops;) {
    int64_t sum = 0;
    size_t j = i;
    for (; j < nops && !strcmp(ops[j].name, ops[i].name); j++) sum += ops[j].bytes;
    if (sum)
      len += (size_t)snprintf(out + len, len < cap ? cap - len : 0, "%s%s=%lld", len ? ";" : "",
                              ops[i].name, (long long)sum);
    i = j;
  }
  free(ops);
}

static void line_after(const char *out, const char *prefix, char *buf, size_t n) {
  const char *p = strstr(out, prefix);
  assert_non_null(p);
  p += strlen(prefix);
  size_t len = strcspn(p, "\n");
  assert_true(len < n);
  memcpy(buf, p, len);
  buf[len] = 0;
}

static void test_ops_match_profiler(void **state) {
  (void)state;
  static char want[8192], got[8192];
  char trace[256], cmd[2048], *out = NULL;
  tmp_path(trace, sizeof trace, ".json");
  snprintf(cmd, sizeof cmd, "'%s' record -o '%s' -- '%s' '%s' 2>/dev/null", LOOM_BIN, trace,
           PYTHON, TORCH_MEMORY);
  assert_int_equal(ts_run(cmd, &out), 0);
  static char self[8192];
  char netbuf[64];
  line_after(out, "profiler memory ", want, sizeof want);
  line_after(out, "profiler self ", self, sizeof self);
  line_after(out, "profiler net ", netbuf, sizeof netbuf);
  long pa, pf;
  long long pb;
  char counts[128];
  line_after(out, "profiler allocs ", counts, sizeof counts);
  assert_int_equal(sscanf(counts, "%ld frees %ld bytes %lld", &pa, &pf, &pb), 3);
  free(out);
  loom_trace *t = ts_load(trace);
  long la, lf;
  long long lb, lnet;
  loom_side(t, got, sizeof got, &la, &lf, &lb, &lnet);
  loom_trace_free(t);
  print_message("profiler: %ld allocations, %ld frees, %lld bytes; loom: %ld, %ld, %lld\n", pa,
                pf, pb, la, lf, lb);
  assert_int_equal(la, pa);
  assert_int_equal(lf, pf);
  assert_int_equal(lb, pb);
  print_message("per op:\n  profiler tree %s\n  loom          %s\n  self_cpu_memory_usage %s\n",
                want, got, self);
  assert_string_equal(got, want);
  assert_int_equal(lnet, atoll(netbuf));
  unlink(trace);
}

static void test_memory_off(void **state) {
  (void)state;
  char trace[256], cmd[2048], *out = NULL;
  tmp_path(trace, sizeof trace, ".json");
  snprintf(cmd, sizeof cmd, "'%s' record --option pytorch.memory=0 -o '%s' -- '%s' '%s' 2>/dev/null",
           LOOM_BIN, trace, PYTHON, TORCH_MEMORY);
  assert_int_equal(ts_run(cmd, &out), 0);
  assert_non_null(strstr(out, "profiler allocs "));
  free(out);
  loom_trace *t = ts_load(trace);
  size_t mem = 0, ops = 0;
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    mem += (v.roles & (LOOM_RECORD_F_ALLOC | LOOM_RECORD_F_FREE)) != 0;
    ops += v.kind == LOOM_KIND_CPU_OP;
  }
  loom_trace_free(t);
  assert_int_equal(mem, 0);
  assert_true(ops > 100);
  unlink(trace);
}

static void test_device_allocator(void **state) {
  (void)state;
  char trace[256], cmd[2048], *out = NULL;
  tmp_path(trace, sizeof trace, ".json");
  snprintf(cmd, sizeof cmd, "'%s' record -o '%s' -- '%s' 2>/dev/null", LOOM_BIN, trace,
           TORCH_REPORT);
  assert_int_equal(ts_run(cmd, &out), 0);
  assert_non_null(strstr(out, "enabled 1")); /* the allocators report while loom records */
  free(out);
  loom_trace *t = ts_load(trace);
  int host = 0, pool = 0;
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    if (!(v.roles & (LOOM_RECORD_F_ALLOC | LOOM_RECORD_F_FREE))) continue;
    loom_arg a[16];
    size_t n = loom_trace_event_args(t, i, a, 16);
    int64_t dev = -1, bytes = -1, reserved = -1;
    const char *kind = "";
    for (size_t k = 0; k < n && k < 16; k++) {
      if (!strcmp(a[k].key, "device")) dev = a[k].v.i;
      if (!strcmp(a[k].key, "bytes")) bytes = a[k].v.i;
      if (!strcmp(a[k].key, "reserved")) reserved = a[k].v.i;
      if (!strcmp(a[k].key, "memory_kind") && a[k].type == LOOM_ARG_STRING) kind = a[k].v.s;
    }
    if (dev < 0) {
      assert_string_equal(kind, "host");
      assert_int_equal(bytes, 100);
      host++;
    } else {
      assert_int_equal(dev, 1);
      assert_string_equal(kind, "pool");
      assert_int_equal(bytes, 4096);
      assert_int_equal(reserved, 2 << 20);
      pool++;
    }
  }
  loom_trace_free(t);
  assert_int_equal(host, 2);
  assert_int_equal(pool, 2);
  unlink(trace);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ops_match_profiler),
      cmocka_unit_test(test_memory_off),
      cmocka_unit_test(test_device_allocator),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
