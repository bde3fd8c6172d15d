/*
 * test_host_services.c - the host services of ABI 1.1 a backend calls:
 * device clocks declared each way (rate, sync points, auto sync), metadata,
 * counters, and backend_memory_cap, over all backends and for each.  Runs
 * with LOOM_PLUGINS naming libloom-sim.so.
 */
#include "session.h"

/* ---- host services of ABI 1.1: clocks, metadata, counters, the cap ------ */
/* A backend "svc" (device type "svc") whose clocks are each described in
 * one way; every record it emits is planned by the test. */
static struct {
  const loom_host *h;
  loom_backend *b;
  loom_clock us, drift, onept, none, badrate, host, extra[20];
  uint32_t dev, q;
  atomic_int reads, extra_reads;
  int64_t base; /* realtime of the us clock's point */
} sv;

/* A clock 1000 ppm fast with its own origin, read by the core itself. */
static uint64_t drift_of(uint64_t raw) { return 5000000000ull + raw + raw / 1000; }
static uint64_t drift_read(loom_backend *b, void *ctx) {
  (void)b;
  assert_ptr_equal(ctx, &sv);
  atomic_fetch_add(&sv.reads, 1);
  return drift_of(sv.h->clock_now(LOOM_CLOCK_MONOTONIC_RAW));
}

/* 20 more clocks the core syncs itself (more than it once handled: 16) */
static uint64_t extra_read(loom_backend *b, void *ctx) {
  (void)b, (void)ctx;
  atomic_fetch_add(&sv.extra_reads, 1);
  return sv.h->clock_now(LOOM_CLOCK_MONOTONIC_RAW) + 7000;
}

static loom_status sv_configure(loom_backend *b, uint32_t kinds) {
  (void)kinds;
  sv.b = b;
  const loom_host *h = sv.h;
  loom_device_info d = {.struct_size = sizeof d, .name = "Svc", .vendor = "tests", .type = "gpu"};
  if (h->clock_declare(b, LOOM_CLOCK_DEVICE, "us clock", &sv.us) ||
      h->clock_declare(b, LOOM_CLOCK_DEVICE, "drifting", &sv.drift) ||
      h->clock_declare(b, LOOM_CLOCK_DEVICE, "one point", &sv.onept) ||
      h->clock_declare(b, LOOM_CLOCK_DEVICE, "no point", &sv.none) ||
      h->clock_declare(b, LOOM_CLOCK_DEVICE, "bad rate", &sv.badrate) ||
      h->clock_declare(b, LOOM_CLOCK_REALTIME, "host", &sv.host) ||
      h->device_add(b, &d, &sv.dev) || h->resource_add(b, sv.dev, "q", 1, &sv.q))
    return LOOM_EBACKEND;
  assert_int_equal(h->clock_set_rate(b, sv.us, 0), LOOM_EINVAL);
  assert_int_equal(h->clock_set_rate(b, sv.host, 1.0), LOOM_EINVAL); /* not a device clock */
  assert_int_equal(h->clock_set_rate(b, sv.us, 1000.0), LOOM_OK);
  assert_int_equal(h->clock_set_rate(b, sv.badrate, 1.0), LOOM_OK);
  assert_int_equal(h->clock_auto_sync(b, sv.drift, drift_read, &sv, LOOM_CLOCK_MONOTONIC_RAW), LOOM_OK);
  for (int i = 0; i < 20; i++) {
    char name[32];
    snprintf(name, sizeof name, "extra %d", i);
    assert_int_equal(h->clock_declare(b, LOOM_CLOCK_DEVICE, name, &sv.extra[i]), LOOM_OK);
    assert_int_equal(h->clock_set_rate(b, sv.extra[i], 1.0), LOOM_OK);
    assert_int_equal(h->clock_auto_sync(b, sv.extra[i], extra_read, NULL, LOOM_CLOCK_MONOTONIC_RAW), LOOM_OK);
  }
  assert_int_equal(h->clock_sync(b, sv.onept, 0, LOOM_CLOCK_REALTIME, 0), LOOM_OK);
  /* bad rate: the points say 2 ns per tick */
  assert_int_equal(h->clock_sync(b, sv.badrate, 0, LOOM_CLOCK_REALTIME, 0), LOOM_OK);
  assert_int_equal(h->clock_sync(b, sv.badrate, 1000, LOOM_CLOCK_REALTIME, 2000), LOOM_OK);
  assert_int_equal(h->meta_set(b, "svc.firmware", "1.0"), LOOM_OK);
  assert_int_equal(h->meta_set(b, "svc.firmware", "2.5"), LOOM_OK); /* last wins */
  return LOOM_OK;
}
static loom_status sv_start(loom_backend *b) {
  /* us clock: device 1000 us = now in real time (inside the session), one
   * point and the rate */
  sv.base = (int64_t)sv.h->clock_now(LOOM_CLOCK_REALTIME);
  assert_int_equal(sv.h->clock_sync(b, sv.us, 1000, LOOM_CLOCK_REALTIME, (uint64_t)sv.base), LOOM_OK);
  return LOOM_OK;
}
static loom_status sv_stop(loom_backend *b) { (void)b; return LOOM_OK; }

static loom_status sv_emit(loom_clock clk, uint16_t kind, const char *name, uint64_t t0,
                           uint64_t t1, const loom_arg *args, uint32_t nargs) {
  loom_record r = {.struct_size = sizeof r, .kind = kind, .clock = clk, .device = sv.dev,
                   .resource = sv.q, .start = t0, .end = t1,
                   .name = sv.h->intern(sv.b, name, SIZE_MAX), .nargs = nargs, .args = args};
  return sv.h->emit(sv.b, &r);
}

static const loom_backend_ops sv_ops = {
    .struct_size = sizeof(loom_backend_ops), .abi_major = LOOM_ABI_MAJOR,
    .abi_minor = LOOM_ABI_MINOR, .name = "svc", .device_type = "svc",
    .kinds = LOOM_KINDS_ALL, .configure = sv_configure, .start = sv_start, .stop = sv_stop};

static const loom_event_view *find_ev(const loom_trace *t, const char *name, loom_event_view *v) {
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    v->struct_size = sizeof *v;
    loom_trace_event(t, i, v);
    if (!strcmp(v->name, name)) return v;
  }
  return NULL;
}

static uint64_t raw_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
static int64_t real_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static void test_clock_services(void **state) {
  (void)state;
  sv.h = loom_host_get(LOOM_ABI_MAJOR);
  assert_int_equal(sv.h->backend_register(&sv_ops, "tests"), LOOM_OK);
  atomic_store(&sv.reads, 0);
  loom_session *s = ts_start("cpu,svc", NULL);
  /* each sync point is the narrowest bracket of 7 reads */
  assert_int_equal(atomic_load(&sv.reads), 7); /* at start */
  /* us clock: 1500 us is 500 us after the point */
  int64_t base = sv.base;
  assert_int_equal(sv_emit(sv.us, LOOM_KIND_KERNEL, "k_us", 1500, 1502, NULL, 0), LOOM_OK);
  assert_int_equal(sv.h->clock_to_epoch_ns(sv.b, sv.us, 1500), base + 500000);
  /* drifting clock: a kernel at a moment we know in real time */
  struct timespec nap = {0, 20000000};
  nanosleep(&nap, NULL);
  int64_t r0 = real_ns();
  uint64_t raw = raw_ns();
  int64_t r1 = real_ns();
  int64_t when = r0 + (r1 - r0) / 2;
  assert_int_equal(sv_emit(sv.drift, LOOM_KIND_KERNEL, "k_drift", drift_of(raw),
                           drift_of(raw) + 1001000, NULL, 0), LOOM_OK);
  nanosleep(&nap, NULL);
  assert_int_equal(sv_emit(sv.onept, LOOM_KIND_KERNEL, "k_one", 10, 20, NULL, 0), LOOM_OK);
  assert_int_equal(sv_emit(sv.none, LOOM_KIND_KERNEL, "k_none", 10, 20, NULL, 0), LOOM_OK);
  loom_arg w = {.key = "watts", .type = LOOM_ARG_DOUBLE, .v.d = 0};
  loom_arg sm = {.key = "active", .type = LOOM_ARG_DOUBLE, .v.d = 0};
  for (int i = 0; i < 3; i++) {
    uint64_t now = (uint64_t)real_ns();
    w.v.d = 100 + i;
    sm.v.d = i;
    assert_int_equal(sv_emit(sv.host, LOOM_KIND_COUNTER, "power", now, now, &w, 1), LOOM_OK);
    assert_int_equal(sv_emit(sv.host, LOOM_KIND_COUNTER, "sm", now, now, &sm, 1), LOOM_OK);
  }
  loom_trace *t = ts_finish(s);
  assert_int_equal(atomic_load(&sv.reads), 3 * 7); /* start, stop, before flush */
  assert_int_equal(atomic_load(&sv.extra_reads), 20 * 3 * 7); /* every clock, each time */
  loom_event_view v;
  assert_non_null(find_ev(t, "k_us", &v));
  assert_true(llabs(v.start_ns - (base + 500000)) <= 1000);
  assert_int_equal(v.dur_ns, 2000); /* 2 us at 1000 ns per tick */
  assert_non_null(find_ev(t, "k_drift", &v));
  assert_true(llabs(v.start_ns - when) <= 20000); /* within 20 us after 40 ms of drift (40 us) */
  assert_true(llabs(v.dur_ns - 1000000) <= 1000); /* 1000 ppm fast, taken out */
  assert_true(ts_warned(t, "backend 'svc'", "device clock 'one point' has one sync point and no rate"));
  assert_true(ts_warned(t, "backend 'svc'", "device clock 'no point' has no sync point"));
  assert_true(ts_warned(t, "backend 'svc'", "device clock 'bad rate': declared rate 1 ns per tick disagrees"));
  assert_false(ts_warned(t, "'us clock'", NULL));
  assert_false(ts_warned(t, "'drifting'", NULL));
  assert_false(ts_warned(t, "'extra ", NULL));
  assert_true(ts_saved_contains(t, "\"svc.firmware\":\"2.5\""));
  assert_false(ts_saved_contains(t, "\"1.0\""));
  /* a counter's series are its arguments only: no device/stream series */
  size_t counters = 0;
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    v.struct_size = sizeof v;
    loom_trace_event(t, i, &v);
    counters += v.kind == LOOM_KIND_COUNTER;
  }
  assert_int_equal(counters, 6);
  if (getenv("LOOM_TP_DIR")) {
    char path[256];
    const char *sfx[] = {".json", ".pftrace"};
    for (int f = 0; f < 2; f++) {
      tmp_path(path, sizeof path, sfx[f]);
      assert_int_equal(loom_trace_save(t, path), LOOM_OK);
      const char *q[] = {
          "select count(*) from counter",
          "select count(*) from counter_track where name = 'power'",
          "select count(*) from counter_track where name = 'sm'",
          "select count(*) from counter_track where name like '%device%' or name like '%stream%'",
      };
      long long r[4];
      tp_ints(path, q, r, 4);
      assert_int_equal(r[0], 6);
      assert_int_equal(r[3], 0);
      if (f == 1) { /* .pftrace: each track named by its counter */
        assert_int_equal(r[1], 1);
        assert_int_equal(r[2], 1);
      }
      unlink(path);
    }
  }
  loom_trace_free(t);
}

/* Backend records past backend_memory_cap are refused and counted lost. */
static void test_backend_memory_cap(void **state) {
  (void)state;
  sv.h = loom_host_get(LOOM_ABI_MAJOR);
  assert_int_equal(sv.h->backend_register(&sv_ops, "tests"), LOOM_OK); /* no-op if there */
  loom_session_config bad = {.struct_size = sizeof bad, .devices = "cpu",
                             .options = "backend_memory_cap=lots"};
  loom_session *s = NULL;
  assert_int_equal(loom_session_create(&bad, &s), LOOM_EINVAL);
  assert_non_null(strstr(loom_last_error(), "backend_memory_cap='lots'"));
  s = ts_start("svc", "backend_memory_cap=4k");
  size_t kept = 0, lost = 0, emitted = 500;
  loom_arg a = {.key = "n", .type = LOOM_ARG_INT};
  for (size_t i = 0; i < emitted; i++) {
    uint64_t now = (uint64_t)real_ns();
    a.v.i = (int64_t)i;
    loom_status st = sv_emit(sv.host, LOOM_KIND_KERNEL, "capped", now, now + 10, &a, 1);
    if (st == LOOM_OK) kept++;
    else if (st == LOOM_ENOMEM) lost++;
  }
  assert_true(kept > 0 && lost > 0);
  loom_trace *t = ts_finish(s);
  assert_int_equal(count(t, "kernel", "capped"), kept);
  assert_int_equal(kept + lost, emitted);
  loom_trace_summary sum = {.struct_size = sizeof sum};
  assert_int_equal(loom_trace_summarize(t, &sum), LOOM_OK);
  assert_int_equal(sum.dropped, lost);
  char want[64];
  snprintf(want, sizeof want, "lost %zu records (%zu: backend memory cap", lost, lost);
  assert_true(ts_warned(t, "backend 'svc'", want));
  loom_trace_free(t);
}

/* A second backend with a host clock, for the per-backend cap. */
static struct { loom_backend *b; loom_clock clk; } sb;
static loom_status sb_configure(loom_backend *b, uint32_t kinds) {
  (void)kinds;
  sb.b = b;
  return sv.h->clock_declare(b, LOOM_CLOCK_REALTIME, "host", &sb.clk);
}
static loom_status sb_start(loom_backend *b) { (void)b; return LOOM_OK; }
static loom_status sb_stop(loom_backend *b) { (void)b; return LOOM_OK; }
static const loom_backend_ops sb_ops = {
    .struct_size = sizeof(loom_backend_ops), .abi_major = LOOM_ABI_MAJOR,
    .abi_minor = LOOM_ABI_MINOR, .name = "svb", .device_type = "svb",
    .kinds = LOOM_KINDS_ALL, .configure = sb_configure, .start = sb_start, .stop = sb_stop};

/* Emits until the first refusal; the count kept. */
static size_t fill(loom_backend *b, loom_clock clk, uint32_t device, uint32_t res, const char *name) {
  size_t kept = 0;
  loom_arg a = {.key = "n", .type = LOOM_ARG_INT};
  for (;;) {
    uint64_t now = (uint64_t)real_ns();
    a.v.i = (int64_t)kept;
    loom_record r = {.struct_size = sizeof r, .kind = LOOM_KIND_RUNTIME, .clock = clk,
                     .device = device, .resource = res, .start = now, .end = now + 10,
                     .name = sv.h->intern(b, name, SIZE_MAX), .nargs = 1, .args = &a};
    if (sv.h->emit(b, &r) != LOOM_OK) return kept;
    kept++;
  }
}

/* backend_memory_cap bounds each backend on its own: a second backend keeps
 * as many records as the first after the first is full. */
static void test_backend_memory_cap_each(void **state) {
  (void)state;
  sv.h = loom_host_get(LOOM_ABI_MAJOR);
  assert_int_equal(sv.h->backend_register(&sv_ops, "tests"), LOOM_OK); /* no-op if there */
  assert_int_equal(sv.h->backend_register(&sb_ops, "tests"), LOOM_OK);
  loom_session *s = ts_start("svc,svb", "backend_memory_cap=8k");
  size_t a = fill(sv.b, sv.host, LOOM_DEVICE_HOST, 0, "first");
  size_t b = fill(sb.b, sb.clk, LOOM_DEVICE_HOST, 0, "second");
  assert_true(a > 10);
  assert_int_equal(b, a);
  loom_trace *t = ts_finish(s);
  assert_int_equal(count(t, "svc_runtime", "first"), a);
  assert_int_equal(count(t, "svb_runtime", "second"), b);
  assert_true(ts_warned(t, "backend 'svc'", "lost 1 records (1: backend memory cap"));
  assert_true(ts_warned(t, "backend 'svb'", "lost 1 records (1: backend memory cap"));
  loom_trace_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_clock_services),
      cmocka_unit_test(test_backend_memory_cap),
      cmocka_unit_test(test_backend_memory_cap_each),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
