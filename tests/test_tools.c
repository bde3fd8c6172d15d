/*
 * test_tools.c - the private table of loom's own programs (loom/tools.h)
 * through libloom's one exported way to it, loom_tools_get: served to a
 * caller of the same major whose table is not larger than the library's;
 * refused, with a message naming both versions and what to do, to a
 * caller of another major or one that needs slots this library lacks.
 * Every slot of the served table is set.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "loom/tools.h"

/* The refusal names the library's table version and size, the caller's,
 * and what to do; nothing is served. */
static void assert_refused(uint16_t major, uint16_t minor, size_t size) {
  const loom_tools *t = loom_tools_get(major, minor, size);
  assert_null(t);
  const char *msg = loom_last_error();
  char lib[64], caller[64];
  snprintf(lib, sizeof lib, "tools table %d.%d, %zu bytes", LOOM_TOOLS_ABI_MAJOR,
           LOOM_TOOLS_ABI_MINOR, sizeof(loom_tools));
  snprintf(caller, sizeof caller, "tools table %u.%u (%zu bytes)", (unsigned)major,
           (unsigned)minor, size);
  assert_non_null(strstr(msg, lib));
  assert_non_null(strstr(msg, caller));
  assert_non_null(strstr(msg, loom_version_string()));
  assert_non_null(strstr(msg, "from the same build"));
}

static void test_served(void **state) {
  (void)state;
  const loom_tools *t = LOOM_TOOLS_GET();
  assert_non_null(t);
  assert_int_equal(t->struct_size, sizeof(loom_tools));
  assert_int_equal(t->abi_major, LOOM_TOOLS_ABI_MAJOR);
  assert_int_equal(t->abi_minor, LOOM_TOOLS_ABI_MINOR);
  assert_true(t->backend_ops_min_size > 0);
  /* every slot after the header is a function, and every one is set */
  const size_t first = offsetof(loom_tools, arena_begin);
  for (size_t off = first; off < sizeof *t; off += sizeof(void (*)(void))) {
    void (*fn)(void);
    memcpy(&fn, (const char *)t + off, sizeof fn);
    assert_non_null(fn);
  }
  /* an older caller of the same major (a smaller table) is served too */
  assert_ptr_equal(loom_tools_get(LOOM_TOOLS_ABI_MAJOR, 0, first), t);
}

static void test_major_refused(void **state) {
  (void)state;
  assert_refused(LOOM_TOOLS_ABI_MAJOR + 1, 0, sizeof(loom_tools));
  assert_refused(LOOM_TOOLS_ABI_MAJOR - 1, 7, 64);
}

static void test_size_refused(void **state) {
  (void)state;
  assert_refused(LOOM_TOOLS_ABI_MAJOR, LOOM_TOOLS_ABI_MINOR + 1, sizeof(loom_tools) + 8);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_served),
                                     cmocka_unit_test(test_major_refused),
                                     cmocka_unit_test(test_size_refused)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
