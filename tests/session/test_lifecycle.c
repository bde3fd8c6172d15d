/*
 * test_session.c - sessions over several backends: missing devices, failing
 * backends, two backends on one timeline with flows, device clock
 * conversion, external ids, range projection, and the written trace checked
 * by trace_processor.  Runs with LOOM_PLUGINS naming libloom-sim.so.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "simrt.h"

static uint64_t (*sim_launch)(int, const char *, uint64_t, uint32_t, uint32_t);
static uint64_t (*sim_memcpy)(int, enum simrt_copy, size_t);

static void load_sim(void) {
  void *h = dlopen(SIM_PLUGIN, RTLD_NOW | RTLD_NOLOAD);
  assert_non_null(h); /* LOOM_PLUGINS loaded it */
  sim_launch = (uint64_t(*)(int, const char *, uint64_t, uint32_t, uint32_t))dlsym(h, "simrt_launch");
  sim_memcpy = (uint64_t(*)(int, enum simrt_copy, size_t))dlsym(h, "simrt_memcpy");
  assert_non_null(sim_launch);
}

static size_t count(const loom_trace *t, const char *cat, const char *name) {
  size_t n = 0;
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    if ((!cat || !strcmp(v.category, cat)) && (!name || !strcmp(v.name, name))) n++;
  }
  return n;
}

/* The k-th event (in trace order) with this category and name. */
static loom_event_view find(const loom_trace *t, const char *cat, const char *name, int k) {
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    loom_trace_event(t, i, &v);
    if ((!cat || !strcmp(v.category, cat)) && (!name || !strcmp(v.name, name)) && k-- == 0)
      return v;
  }
  fail_msg("no event %s/%s", cat ? cat : "*", name ? name : "*");
  loom_event_view none = {0};
  return none;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static void test_version_and_errors(void **state) {
  (void)state;
  assert_int_equal(loom_version(), LOOM_VERSION_HEX);
  assert_string_equal(loom_version_string(), "0.1.0");
  for (int st = LOOM_OK; st <= LOOM_EFORMAT; st++)
    assert_string_not_equal(loom_strerror((loom_status)st), "unknown status");
  assert_string_equal(loom_strerror((loom_status)999), "unknown status");
  assert_string_equal(loom_kind_name(LOOM_KIND_KERNEL), "kernel");
  assert_null(loom_kind_name(LOOM_KIND_COUNT_));
}

static void test_bad_options(void **state) {
  (void)state;
  loom_session *s = NULL;
  loom_session_config cfg = {.struct_size = sizeof cfg, .options = "buffer_size=lots"};
  assert_int_equal(loom_session_create(&cfg, &s), LOOM_EINVAL);
  assert_null(s);
  assert_non_null(strstr(loom_last_error(), "buffer_size"));
  cfg.options = "memory_cap=1m, justakey";
  assert_int_equal(loom_session_create(&cfg, &s), LOOM_EINVAL);
  assert_non_null(strstr(loom_last_error(), "justakey"));
  /* A failed create leaves nothing behind: the next one works. */
  cfg.options = "memory_cap=1m; sim.skew_ppm = 3";
  assert_int_equal(loom_session_create(&cfg, &s), LOOM_OK);
  loom_session_destroy(s);
}

static void test_one_session_at_a_time(void **state) {
  (void)state;
  loom_session *a = NULL, *b = NULL;
  loom_session_config cfg = {.struct_size = sizeof cfg};
  assert_int_equal(loom_session_create(&cfg, &a), LOOM_OK);
  assert_int_equal(loom_session_create(&cfg, &b), LOOM_EBUSY);
  assert_int_equal(loom_session_stop(a, NULL), LOOM_ESTATE); /* not started */
  assert_int_equal(loom_session_start(a), LOOM_OK);
  assert_int_equal(loom_session_start(a), LOOM_ESTATE);
  loom_session_destroy(a); /* destroying a recording session stops it */
  assert_int_equal(loom_session_create(&cfg, &b), LOOM_OK);
  loom_session_destroy(b);
}

static void test_missing_device_warns(void **state) {
  (void)state;
  loom_session *s = ts_start("cpu, cuda", NULL);
  /* Said at stop: a backend for it may still register while recording. */
  assert_int_equal(loom_session_warning_count(s), 0);
  loom_range_push("still recorded");
  loom_range_pop();
  loom_trace *t = ts_finish(s);
  assert_int_equal(count(t, "user_annotation", "still recorded"), 1);
  assert_true(ts_warned(t, "device 'cuda' requested", "no backend"));
  assert_true(ts_saved_contains(t, "\"loom_warnings\":[\"device 'cuda' requested"));
  loom_trace_free(t);
}

static void test_failing_backends(void **state) {
  (void)state;
  assert_int_equal(fake_register(0, "fakeA", "fakea", 0), LOOM_OK);
  assert_int_equal(fake_register(1, "failp", "failp", FAKE_FAIL_PROBE), LOOM_OK);
  assert_int_equal(fake_register(2, "failc", "failc", FAKE_FAIL_CONFIGURE), LOOM_OK);
  assert_int_equal(fake_register(3, "fails", "fails", FAKE_FAIL_START), LOOM_OK);
  /* Registering the same table again is harmless. */
  assert_int_equal(loom_host_get(LOOM_ABI_MAJOR)->backend_register(fake_ops(0), NULL), LOOM_OK);
  loom_session *s = ts_start("cpu,fakea,failp,failc,fails", NULL);
  fake_launch(0, 0, "kernelA", 5000);
  fake_launch(3, 0, "never", 5000);
  loom_trace *t = ts_finish(s);
  assert_int_equal(count(t, "kernel", "kernelA"), 1);
  assert_int_equal(count(t, "kernel", "never"), 0);
  assert_true(ts_warned(t, "device 'failp'", "no fake device 1 here"));
  assert_true(ts_warned(t, "backend 'failc' error", "fake configure failure"));
  assert_true(ts_warned(t, "device 'failc'", "failed to configure"));
  assert_true(ts_warned(t, "backend 'fails' error", "fake start failure"));
  assert_true(ts_warned(t, "device 'fails'", "failed to start"));
  fake_calls c = fake_get_calls(3);
  assert_int_equal(c.start, 1);
  assert_int_equal(c.stop, 0); /* never started, never stopped */
  assert_int_equal(c.destroy, 1);
  loom_trace_free(t);
}

typedef struct seen { int sim, failp; char reason[256]; } seen;
static void visit(const loom_backend_info *b, void *user) {
  seen *s = user;
  if (!strcmp(b->name, "sim") && strstr(b->origin, "libloom-sim.so")) s->sim = 1;
  if (!strcmp(b->name, "failp") && b->state == LOOM_BACKEND_UNAVAILABLE) {
    s->failp = 1;
    snprintf(s->reason, sizeof s->reason, "%s", b->reason);
  }
}

/* A backend's losses by reason: the first four named with their counts,
 * any more counted with the fourth, which then says so (the total right,
 * no count put under a reason that is not its own). */
static void test_lost_reasons(void **state) {
  (void)state;
  loom_session *s = ts_start("cpu,fakea", NULL);
  static const char *why[] = {"ring full", "driver dropped", "clock lost", "late", "other one", "third"};
  for (int i = 0; i < 6; i++) fake_lost(0, (uint64_t)i + 1, why[i]);
  fake_lost(0, 10, "ring full");
  loom_trace *t = ts_finish(s);
  assert_true(ts_warned(t, "backend 'fakeA' lost 31 records",
                        "(11: ring full; 2: driver dropped; 3: clock lost; 15: late and other reasons)"));
  loom_trace_free(t);
}

static void test_backend_list(void **state) {
  (void)state;
  seen s = {0};
  assert_true(loom_backends_list(visit, &s) >= 5);
  assert_true(s.sim);
  assert_true(s.failp);
  assert_string_equal(s.reason, "no fake device 1 here");
}

/* Session options reach the backend from probe on; a backend that fails
 * leaves a warning, and its device leaves the trace. */
static void test_plugin_failures_by_option(void **state) {
  (void)state;
  loom_session *s = ts_start("cpu,sim", "sim.fail=probe");
  loom_trace *t = ts_finish(s);
  assert_true(ts_warned(t, "device 'sim': backend 'sim' is unavailable", "sim.fail=probe"));
  loom_trace_free(t);
  s = ts_start("cpu,sim", "sim.fail=start");
  loom_instant("rest of the trace");
  t = ts_finish(s);
  assert_true(ts_warned(t, "backend 'sim' error", "device busy (sim.fail=start)"));
  assert_true(ts_warned(t, "device 'sim': backend 'sim' failed to start", NULL));
  loom_trace_summary sum = {.struct_size = sizeof sum};
  loom_trace_summarize(t, &sum);
  assert_int_equal(sum.devices, 0);
  assert_int_equal(count(t, "cpu_instant_event", "rest of the trace"), 1);
  loom_trace_free(t);
}

/* Two backends (sim with a skewed device clock, fake on CLOCK_REALTIME) in
 * one session, with framework ops and ranges around the launches. */
static loom_trace *two_backend_trace(void) {
  load_sim();
  loom_session *s = ts_start("cpu,sim,fakea", "sim.skew_ppm=500,sim.offset_ns=86400000000000");
  loom_range_push("outer");
  loom_op_begin("aten::mm", 77);
  sim_launch(0, "sim_gemm", 20000, 64, 128);
  fake_launch(0, 0, "fake_gemm", 20000);
  loom_op_end();
  loom_range_push("inner");
  sim_launch(0, "sim_relu", 5000, 64, 128);
  sim_launch(1, "sim_add", 5000, 64, 128);
  loom_range_pop();
  loom_range_pop();
  sleep_ms(40);
  sim_memcpy(1, SIMRT_D2H, 4096);
  loom_counter("loss", 0.5);
  loom_instant("checkpoint");
  sleep_ms(40);
  sim_launch(0, "sim_late", 1000, 1, 1);
  return ts_finish(s);
}

static void test_two_backends_flows(void **state) {
  (void)state;
  loom_trace *t = two_backend_trace();
  assert_int_equal(count(t, "kernel", NULL), 5);
  assert_int_equal(count(t, "gpu_memcpy", "Memcpy DtoH"), 1);
  assert_int_equal(count(t, "sim_runtime", NULL), 5);
  assert_int_equal(count(t, "fakea_runtime", "fakeLaunch"), 1);
  /* Every device op is linked to the call that launched it. */
  assert_int_equal(loom_trace_flow_count(t), 6);
  for (size_t i = 0; i < loom_trace_flow_count(t); i++) {
    loom_event_view a, b;
    ts_flow(t, i, &a, &b);
    assert_int_equal(a.kind, LOOM_KIND_RUNTIME);
    assert_int_equal(a.device, UINT32_MAX);
    assert_int_not_equal(b.device, UINT32_MAX);
    assert_true(a.correlation == b.correlation);
    /* Device work starts after its launch call began (one timeline). */
    assert_true(b.start_ns >= a.start_ns - 1000);
  }
  /* External id: the op around the launches, on calls and kernels alike. */
  assert_int_equal(find(t, "kernel", "sim_gemm", 0).external_id, 77);
  assert_int_equal(find(t, "kernel", "fake_gemm", 0).external_id, 77);
  assert_int_equal(find(t, "fakea_runtime", "fakeLaunch", 0).external_id, 77);
  assert_int_equal(find(t, "kernel", "sim_relu", 0).external_id, 0);
  fake_calls c = fake_get_calls(0);
  assert_true(c.push >= 1 && c.push == c.pop);
  loom_trace_free(t);
}

/* The sim device clock runs 500 ppm fast from an origin a day away; each
 * kernel on an idle queue starts at the device time matching the end of its
 * launch call, so after conversion it must land inside the call (1 us). */
static void test_device_clock_conversion(void **state) {
  (void)state;
  loom_trace *t = two_backend_trace();
  const char *names[] = {"sim_gemm", "sim_late"};
  for (int i = 0; i < 2; i++) {
    loom_event_view k = find(t, "kernel", names[i], 0);
    int64_t corr = (int64_t)k.correlation;
    loom_event_view call = {0};
    for (int j = 0; j < 5; j++) {
      call = find(t, "sim_runtime", NULL, j);
      if ((int64_t)call.correlation == corr) break;
    }
    assert_int_equal((int64_t)call.correlation, corr);
    assert_true(k.start_ns >= call.start_ns - 1000);
    assert_true(k.start_ns <= call.start_ns + call.dur_ns + 1000);
  }
  loom_trace_free(t);
}

static void test_projection(void **state) {
  (void)state;
  loom_trace *t = two_backend_trace();
  /* outer: on sim queue 0 (gemm, relu), sim queue 1 (add) and fake stream 7;
   * inner: on sim queue 0 (relu) and queue 1 (add). */
  assert_int_equal(count(t, "gpu_user_annotation", "outer"), 3);
  assert_int_equal(count(t, "gpu_user_annotation", "inner"), 2);
  loom_event_view gemm = find(t, "kernel", "sim_gemm", 0);
  loom_event_view relu = find(t, "kernel", "sim_relu", 0);
  int found = 0;
  for (int k = 0; k < 3; k++) {
    loom_event_view p = find(t, "gpu_user_annotation", "outer", k);
    assert_true(p.projected);
    if (p.pid == gemm.pid && p.tid == gemm.tid) {
      assert_true(p.start_ns == gemm.start_ns);
      assert_true(p.start_ns + p.dur_ns == relu.start_ns + relu.dur_ns);
      found = 1;
    }
  }
  assert_true(found);
  loom_trace_free(t);
}

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

static void test_trace_in_trace_processor(void **state) {
  (void)state;
  tp_require();
  loom_trace *t = two_backend_trace();
  char path[256];
  tmp_path(path, sizeof path, ".json");
  assert_int_equal(loom_trace_save(t, path), LOOM_OK);
  const char *q[] = {
      "select count(*) from slice",
      "select count(*) from flow",
      "select count(*) from counter",
      "select count(*) from process where name is not null",
      "select count(*) from thread where name is not null",
      "select count(*) from slice where name = 'gpu_user_annotation' or category = 'gpu_user_annotation'",
      "select count(*) from stats where value > 0 and severity in ('error','data_loss')",
      "select count(*) from thread where name like 'queue %'",
  };
  long long r[8];
  tp_ints(path, q, r, 8);
  /* host: outer, inner, aten::mm, 6 runtime calls, instant = 10;
   * device: 5 kernels + 1 memcpy + 5 projections = 11; window end = 1. */
  assert_int_equal(r[0], 22);
  assert_int_equal(r[1], 6);
  assert_int_equal(r[2], 1);
  assert_int_equal(r[3], 3);  /* host process, sim 0, fakea 1 */
  assert_int_equal(r[4], 4);  /* main thread, queue 0, queue 1, stream 7 */
  assert_int_equal(r[5], 5);
  assert_int_equal(r[6], 0);
  assert_int_equal(r[7], 2);
  unlink(path);
  loom_trace_free(t);
}

enum { LAUNCHERS = 4, LAUNCHES = 2000 };
static atomic_int keep_going;

static void *launcher(void *arg) {
  int forever = arg != NULL;
  for (int i = 0; forever ? atomic_load(&keep_going) : i < LAUNCHES; i++)
    fake_launch(0, i % 2, "concurrent", 100);
  return NULL;
}

/* Backends emit from many threads at once: nothing is lost or mixed up. */
static void test_concurrent_emit(void **state) {
  (void)state;
  loom_session *s = ts_start("cpu,fakea", NULL);
  pthread_t th[LAUNCHERS];
  for (int i = 0; i < LAUNCHERS; i++) pthread_create(&th[i], NULL, launcher, NULL);
  for (int i = 0; i < LAUNCHERS; i++) pthread_join(th[i], NULL);
  loom_trace *t = ts_finish(s);
  assert_int_equal(count(t, "kernel", "concurrent"), LAUNCHERS * LAUNCHES);
  assert_int_equal(count(t, "fakea_runtime", NULL), LAUNCHERS * LAUNCHES);
  assert_int_equal(loom_trace_flow_count(t), LAUNCHERS * LAUNCHES);
  loom_trace_free(t);
}

/* Stopping while backends emit from other threads neither crashes nor
 * blocks; late records are refused. */
static void test_stop_while_emitting(void **state) {
  (void)state;
  loom_session *s = ts_start("cpu,fakea", NULL);
  atomic_store(&keep_going, 1);
  pthread_t th[LAUNCHERS];
  for (int i = 0; i < LAUNCHERS; i++) pthread_create(&th[i], NULL, launcher, (void *)1);
  sleep_ms(20);
  loom_trace *t = ts_finish(s);
  atomic_store(&keep_going, 0);
  for (int i = 0; i < LAUNCHERS; i++) pthread_join(th[i], NULL);
  assert_true(count(t, "kernel", "concurrent") > 0);
  assert_true(loom_trace_flow_count(t) <= count(t, "kernel", "concurrent"));
  loom_trace_free(t);
}

static void test_save_errors(void **state) {
  (void)state;
  loom_session *s = ts_start("cpu", NULL);
  loom_instant("x");
  loom_trace *t = ts_finish(s);
  assert_int_equal(loom_trace_save(t, "/nonexistent-dir/trace.json"), LOOM_EIO);
  assert_non_null(strstr(loom_last_error(), "/nonexistent-dir/trace.json"));
  assert_int_equal(loom_trace_save(t, "/tmp/trace.unknownext"), LOOM_EUNSUPPORTED);
  char path[256];
  tmp_path(path, sizeof path, ".json");
  assert_int_equal(loom_trace_save(t, path), LOOM_OK); /* still savable */
  unlink(path);
  loom_trace_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_version_and_errors),
      cmocka_unit_test(test_bad_options),
      cmocka_unit_test(test_one_session_at_a_time),
      cmocka_unit_test(test_missing_device_warns),
      cmocka_unit_test(test_failing_backends),
      cmocka_unit_test(test_backend_list),
      cmocka_unit_test(test_lost_reasons),
      cmocka_unit_test(test_plugin_failures_by_option),
      cmocka_unit_test(test_two_backends_flows),
      cmocka_unit_test(test_device_clock_conversion),
      cmocka_unit_test(test_projection),
      cmocka_unit_test(test_trace_in_trace_processor),
      cmocka_unit_test(test_concurrent_emit),
      cmocka_unit_test(test_stop_while_emitting),
      cmocka_unit_test(test_save_errors),
      cmocka_unit_test(test_clock_services),
      cmocka_unit_test(test_backend_memory_cap),
      cmocka_unit_test(test_backend_memory_cap_each),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
