/*
 * test_plugin_host.c - the versioned host table as a backend sees it:
 * LOOM_HOST_HAS answers from the table's size stamp (a table of the size an
 * older core built lacks the slots appended after it), and the recorder_now
 * service reads the clock of loom's own host records, so a backend's host
 * record stamped with it lands in the trace in order with the application's
 * annotations; the memory service (ABI 1.6) puts a backend's allocation in
 * the same order, and a backend built against ABI 1.5 still has its memory
 * records (through emit) kept.  Run twice by ctest: as the machine chooses, and with
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

int main(int argc, char **argv) {
  want_no_tsc = argc > 1 && !strcmp(argv[1], "notsc");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_has_follows_the_size_stamp),
      cmocka_unit_test(test_recorder_now_is_the_recorders_clock),
      cmocka_unit_test(test_abi15_memory_through_emit),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
