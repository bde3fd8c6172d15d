/*
 * test_plugin_host.c - the versioned host table as a backend sees it:
 * LOOM_HOST_HAS answers from the table's size stamp (a table of the size an
 * older core built lacks the slots appended after it), and the recorder_now
 * service reads the clock of loom's own host records, so a backend's host
 * record stamped with it lands in the trace in order with the application's
 * annotations; the memory service (ABI 1.6) puts a backend's allocation in
 * the same order, and a backend built against ABI 1.5 still has its memory
 * records (through emit) kept.  The call service (ABI 1.7) gives the trace
 * the same event, flow and external id as emit for the same call, falls
 * back to emit for what a host record cannot hold and when the session does
 * not record the host.  Run twice by ctest: as the machine chooses, and with
 * LOOM_NO_TSC=1 (argument "notsc"), where the domain must be CLOCK_MONOTONIC.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "loom/loom.h"
#include "loom/plugin.h"

static int want_no_tsc;

static void test_has_follows_the_size_stamp(void **state) {
  (void)state;
  const loom_host *h = loom_host_get(LOOM_ABI_MAJOR);
  assert_non_null(h);
  assert_true(LOOM_HOST_HAS(h, meta_set));
  assert_true(LOOM_HOST_HAS(h, recorder_now));
  /* The table an ABI 1.3 core hands out ends with meta_set. */
  loom_host old = *h;
  old.struct_size = (uint32_t)(offsetof(loom_host, meta_set) + sizeof old.meta_set);
  old.abi_minor = 3;
  assert_true(LOOM_HOST_HAS(&old, meta_set));
  assert_false(LOOM_HOST_HAS(&old, recorder_now));
  /* An ABI 1.0 core's ends with state: none of the appended slots. */
  old.struct_size = (uint32_t)(offsetof(loom_host, state) + sizeof old.state);
  assert_false(LOOM_HOST_HAS(&old, clock_set_rate));
  assert_false(LOOM_HOST_HAS(&old, meta_set));
  /* An ABI 1.5 core's ends with recorder_now: no memory service. */
  assert_true(LOOM_HOST_HAS(h, memory));
  old.struct_size = (uint32_t)(offsetof(loom_host, recorder_now) + sizeof old.recorder_now);
  assert_true(LOOM_HOST_HAS(&old, recorder_now));
  assert_false(LOOM_HOST_HAS(&old, memory));
  /* One byte short of a slot is not enough. */
  old.struct_size = (uint32_t)(offsetof(loom_host, recorder_now) + sizeof old.recorder_now - 1);
  assert_false(LOOM_HOST_HAS(&old, recorder_now));
}

/* A host-only backend that stamps its records with recorder_now. */
static struct {
  const loom_host *host;
  loom_backend *self;
  loom_clock clk;
  loom_clock_domain domain;
} g;

static loom_status rn_configure(loom_backend *b, uint32_t kinds) {
  (void)kinds;
  g.self = b;
  g.host->recorder_now(&g.domain);
  return g.host->clock_declare(b, g.domain, "recorder", &g.clk);
}
static loom_status rn_start(loom_backend *b) { return g.self = b, LOOM_OK; }
static loom_status rn_stop(loom_backend *b) { return (void)b, LOOM_OK; }

static const loom_backend_ops rn_ops = {
    .struct_size = sizeof(loom_backend_ops),
    .abi_major = LOOM_ABI_MAJOR,
    .abi_minor = LOOM_ABI_MINOR,
    .name = "recnow",
    .device_type = "recnow",
    .configure = rn_configure,
    .start = rn_start,
    .stop = rn_stop,
};

static void emit_at(const char *name, uint64_t ts) {
  loom_record r = {.struct_size = sizeof r, .kind = LOOM_KIND_INSTANT, .clock = g.clk,
                   .device = LOOM_DEVICE_HOST, .tid = 0, .start = ts, .end = ts,
                   .name = g.host->intern(g.self, name, SIZE_MAX)};
  assert_int_equal(g.host->emit(g.self, &r), LOOM_OK);
}

static int64_t start_of(const loom_trace *t, const char *name) {
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    assert_int_equal(loom_trace_event(t, i, &v), LOOM_OK);
    if (!strcmp(v.name, name)) return v.start_ns;
  }
  fail_msg("no event named %s in the trace", name);
  return 0;
}

static void test_recorder_now_is_the_recorders_clock(void **state) {
  (void)state;
  g.host = loom_host_get(LOOM_ABI_MAJOR);
  assert_int_equal(g.host->backend_register(&rn_ops, "test"), LOOM_OK);
  loom_session_config cfg = {.struct_size = sizeof cfg, .devices = "cpu,recnow"};
  loom_session *s;
  assert_int_equal(loom_session_create(&cfg, &s), LOOM_OK);
  assert_int_equal(loom_session_start(s), LOOM_OK);
  if (want_no_tsc) assert_int_equal(g.domain, LOOM_CLOCK_MONOTONIC);
  else assert_true(g.domain == LOOM_CLOCK_TSC || g.domain == LOOM_CLOCK_MONOTONIC);
  loom_clock_domain d = LOOM_CLOCK_DEVICE;
  uint64_t before = g.host->recorder_now(&d);
  assert_int_equal(d, g.domain);
  loom_instant("annotation");
  uint64_t after = g.host->recorder_now(NULL);
  assert_true(after >= before);
  emit_at("before", before);
  emit_at("after", after);
  /* an allocation between the two stamps, through the memory service */
  loom_memory_event m = {.struct_size = sizeof m, .flags = LOOM_RECORD_F_ALLOC,
                         .kind = LOOM_MEMORY_DEVICE, .clock = g.clk, .device = LOOM_DEVICE_HOST,
                         .name = g.host->intern(g.self, "rnAlloc", SIZE_MAX),
                         .ts = g.host->recorder_now(NULL), .addr = 0x77, .bytes = 4096};
  uint64_t at = m.ts;
  assert_true(at >= before);
  m.ts = before + (after - before) / 2;
  assert_int_equal(g.host->memory(g.self, &m), LOOM_OK);
  loom_trace *t;
  assert_int_equal(loom_session_stop(s, &t), LOOM_OK);
  loom_session_destroy(s);
  /* The application's instant lies between the backend's two stamps: the
   * same clock, converted the same way (another domain would be off by the
   * clocks' offset, seconds or more; a TSC read taken as ns, by far more). */
  int64_t b = start_of(t, "before"), a = start_of(t, "annotation"), e = start_of(t, "after");
  int64_t m_ns = start_of(t, "rnAlloc");
  assert_true(b <= a);
  assert_true(a <= e);
  assert_true(b <= m_ns && m_ns <= e);
  assert_true(e - b < 1000000000); /* and the stamps are times, not ticks of another rate */
  assert_int_equal(loom_trace_warning_count(t), 0);
  loom_trace_free(t);
}

/* A backend built against ABI 1.5 (its table says so; it knows no memory
 * service): its memory records through emit are kept. */
static loom_status old_configure(loom_backend *b, uint32_t kinds) {
  (void)kinds;
  g.self = b;
  return g.host->clock_declare(b, LOOM_CLOCK_MONOTONIC, "mono", &g.clk);
}

static const loom_backend_ops old_ops = {
    .struct_size = sizeof(loom_backend_ops),
    .abi_major = LOOM_ABI_MAJOR,
    .abi_minor = 5,
    .name = "abi15",
    .device_type = "abi15",
    .configure = old_configure,
    .start = rn_start,
    .stop = rn_stop,
};

static void test_abi15_memory_through_emit(void **state) {
  (void)state;
  g.host = loom_host_get(LOOM_ABI_MAJOR);
  assert_int_equal(g.host->backend_register(&old_ops, "test"), LOOM_OK);
  loom_session_config cfg = {.struct_size = sizeof cfg, .devices = "cpu,abi15"};
  loom_session *s;
  assert_int_equal(loom_session_create(&cfg, &s), LOOM_OK);
  assert_int_equal(loom_session_start(s), LOOM_OK);
  for (uint64_t i = 0; i < 3; i++) {
    loom_arg a[2] = {{.key = "addr", .type = LOOM_ARG_UINT, .v.u = 0x100 + i},
                     {.key = "bytes", .type = LOOM_ARG_UINT, .v.u = 64}};
    uint64_t ts = g.host->clock_now(LOOM_CLOCK_MONOTONIC);
    loom_record r = {.struct_size = sizeof r, .kind = LOOM_KIND_MEMORY,
                     .flags = LOOM_RECORD_F_ALLOC, .clock = g.clk, .device = LOOM_DEVICE_HOST,
                     .start = ts, .end = ts, .name = g.host->intern(g.self, "oldAlloc", SIZE_MAX),
                     .nargs = 2, .args = a};
    assert_int_equal(g.host->emit(g.self, &r), LOOM_OK);
  }
  loom_trace *t;
  assert_int_equal(loom_session_stop(s, &t), LOOM_OK);
  loom_session_destroy(s);
  size_t n = 0;
  for (size_t i = 0; i < loom_trace_event_count(t); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    assert_int_equal(loom_trace_event(t, i, &v), LOOM_OK);
    n += v.kind == LOOM_KIND_MEMORY && !strcmp(v.name, "oldAlloc");
  }
  assert_int_equal(n, 3);
  assert_int_equal(loom_trace_warning_count(t), 0);
  loom_trace_free(t);
}

/* A backend with one device and queue whose launches go through host->call
 * (ABI 1.7) or emit, to compare what the trace makes of each. */
static struct {
  loom_backend *self;
  loom_clock host_clk, dev_clk;
  uint32_t dev, q;
} hc;

static loom_status hc_configure(loom_backend *b, uint32_t kinds) {
  (void)kinds;
  hc.self = b;
  loom_clock_domain d;
  g.host->recorder_now(&d);
  loom_device_info info = {.struct_size = sizeof info, .name = "hc0", .type = "accelerator"};
  if (g.host->clock_declare(b, d, "host", &hc.host_clk) ||
      g.host->clock_declare(b, LOOM_CLOCK_MONOTONIC, "device", &hc.dev_clk) ||
      g.host->device_add(b, &info, &hc.dev) || g.host->resource_add(b, hc.dev, "q", 1, &hc.q))
    return LOOM_EINVAL;
  return LOOM_OK;
}

static const loom_backend_ops hc_ops = {
    .struct_size = sizeof(loom_backend_ops),
    .abi_major = LOOM_ABI_MAJOR,
    .abi_minor = LOOM_ABI_MINOR,
    .name = "hcall",
    .device_type = "hcall",
    .configure = hc_configure,
    .start = rn_start,
    .stop = rn_stop,
};

/* A call named `name` that launches kernel `corr` (through call or emit),
 * inside op `op` (external id ext), and the kernel itself. */
static void launch(int via_call, const char *op, uint64_t ext, const char *name, uint64_t corr) {
  loom_op_begin(op, ext);
  uint64_t t0 = g.host->recorder_now(NULL);
  loom_record r = {.struct_size = sizeof r, .kind = LOOM_KIND_RUNTIME,
                   .flags = LOOM_RECORD_F_LAUNCH, .clock = hc.host_clk,
                   .device = LOOM_DEVICE_HOST, .start = t0, .end = t0 + 1000,
                   .name = g.host->intern(hc.self, name, SIZE_MAX), .correlation = corr};
  assert_int_equal((via_call ? g.host->call : g.host->emit)(hc.self, &r), LOOM_OK);
  loom_op_end();
  uint64_t d0 = g.host->clock_now(LOOM_CLOCK_MONOTONIC);
  loom_record k = {.struct_size = sizeof k, .kind = LOOM_KIND_KERNEL, .clock = hc.dev_clk,
                   .device = hc.dev, .resource = hc.q, .start = d0, .end = d0 + 500,
                   .name = g.host->intern(hc.self, "hcKernel", SIZE_MAX), .correlation = corr};
  assert_int_equal(g.host->emit(hc.self, &k), LOOM_OK);
}

static const loom_event_view *find_ev(loom_event_view *all, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(all[i].name, name)) return &all[i];
  fail_msg("no event named %s in the trace", name);
  return NULL;
}

/* One session with the host (cpu) or without: the events and flows of a
 * launch through call and one through emit, and a sync and a call with an
 * argument (emit's way) through call. */
static void run_calls(const char *devices, int host) {
  loom_session_config cfg = {.struct_size = sizeof cfg, .devices = devices};
  loom_session *s;
  assert_int_equal(loom_session_create(&cfg, &s), LOOM_OK);
  assert_int_equal(loom_session_start(s), LOOM_OK);
  launch(1, "opCall", 501, "hcLaunch", 42);
  launch(0, "opEmit", 502, "hcLaunchEmit", 43);
  uint64_t t = g.host->recorder_now(NULL);
  loom_arg a = {.key = "bytes", .type = LOOM_ARG_UINT, .v.u = 8};
  loom_record r = {.struct_size = sizeof r, .kind = LOOM_KIND_SYNC, .clock = hc.host_clk,
                   .device = LOOM_DEVICE_HOST, .start = t, .end = t + 10,
                   .name = g.host->intern(hc.self, "hcSync", SIZE_MAX)};
  assert_int_equal(g.host->call(hc.self, &r), LOOM_OK);
  r.kind = LOOM_KIND_RUNTIME, r.name = g.host->intern(hc.self, "hcArgs", SIZE_MAX);
  r.nargs = 1, r.args = &a;
  assert_int_equal(g.host->call(hc.self, &r), LOOM_OK);
  loom_trace *tr;
  assert_int_equal(loom_session_stop(s, &tr), LOOM_OK);
  loom_session_destroy(s);
  size_t n = loom_trace_event_count(tr);
  loom_event_view *ev = calloc(n, sizeof *ev);
  for (size_t i = 0; i < n; i++) {
    ev[i].struct_size = sizeof ev[i];
    assert_int_equal(loom_trace_event(tr, i, &ev[i]), LOOM_OK);
  }
  const loom_event_view *c = find_ev(ev, n, "hcLaunch"), *e = find_ev(ev, n, "hcLaunchEmit");
  assert_string_equal(c->category, "hcall_runtime");
  assert_string_equal(c->category, e->category);
  assert_int_equal(c->kind, LOOM_KIND_RUNTIME);
  assert_int_equal(c->roles, e->roles);
  assert_int_equal(c->roles, LOOM_RECORD_F_LAUNCH);
  /* The same 1000 recorder ticks from different starts: each end is
   * rounded to a nanosecond on its own, so the spans agree within 1 ns. */
  assert_true(c->dur_ns > 0);
  assert_true(c->dur_ns + 1 >= e->dur_ns && e->dur_ns + 1 >= c->dur_ns);
  assert_int_equal(c->tid, e->tid);
  assert_int_equal(c->correlation, 42);
  assert_int_equal(c->external_id, host ? 501 : 0); /* no host: no ops */
  assert_int_equal(e->external_id, host ? 502 : 0);
  assert_string_equal(find_ev(ev, n, "hcSync")->category, "hcall_sync");
  assert_int_equal(find_ev(ev, n, "hcArgs")->kind, LOOM_KIND_RUNTIME);
  /* each launch -> its kernel */
  assert_int_equal(loom_trace_flow_count(tr), 2);
  for (size_t i = 0; i < 2; i++) {
    size_t from, to;
    assert_int_equal(loom_trace_flow(tr, i, &from, &to), LOOM_OK);
    assert_string_equal(ev[to].name, "hcKernel");
    assert_int_equal(ev[to].correlation, ev[from].correlation);
    assert_true(ev[from].correlation == 42 || ev[from].correlation == 43);
  }
  assert_int_equal(loom_trace_warning_count(tr), 0);
  free(ev);
  loom_trace_free(tr);
}

static void test_call_as_emit(void **state) {
  (void)state;
  g.host = loom_host_get(LOOM_ABI_MAJOR);
  assert_true(LOOM_HOST_HAS(g.host, call));
  assert_int_equal(g.host->backend_register(&hc_ops, "test"), LOOM_OK);
  run_calls("cpu,hcall", 1); /* host recorded: call's host records */
  run_calls("hcall", 0);     /* no host: call takes emit's way */
  /* With no room for a single emitted record, a call still goes in: it is a
   * host record, not the backend's. */
  loom_session_config cfg = {.struct_size = sizeof cfg, .devices = "cpu,hcall",
                             .options = "backend_memory_cap=1"};
  loom_session *s;
  assert_int_equal(loom_session_create(&cfg, &s), LOOM_OK);
  assert_int_equal(loom_session_start(s), LOOM_OK);
  uint64_t t = g.host->recorder_now(NULL);
  loom_record r = {.struct_size = sizeof r, .kind = LOOM_KIND_RUNTIME, .clock = hc.host_clk,
                   .device = LOOM_DEVICE_HOST, .start = t, .end = t + 10,
                   .name = g.host->intern(hc.self, "hcRoom", SIZE_MAX)};
  assert_int_equal(g.host->emit(hc.self, &r), LOOM_ENOMEM);
  assert_int_equal(g.host->call(hc.self, &r), LOOM_OK);
  loom_trace *tr;
  assert_int_equal(loom_session_stop(s, &tr), LOOM_OK);
  loom_session_destroy(s);
  size_t kept = 0;
  for (size_t i = 0; i < loom_trace_event_count(tr); i++) {
    loom_event_view v = {.struct_size = sizeof v};
    assert_int_equal(loom_trace_event(tr, i, &v), LOOM_OK);
    kept += !strcmp(v.name, "hcRoom");
  }
  assert_int_equal(kept, 1);
  loom_trace_free(tr);
}

int main(int argc, char **argv) {
  want_no_tsc = argc > 1 && !strcmp(argv[1], "notsc");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_has_follows_the_size_stamp),
      cmocka_unit_test(test_recorder_now_is_the_recorders_clock),
      cmocka_unit_test(test_abi15_memory_through_emit),
      cmocka_unit_test(test_call_as_emit),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
