/*
 * test_libfind.c - backends' default checks find a runtime library without
 * loading it (backends/common/libfind.h): the same answer as the dynamic
 * loader's for libraries this machine has and lacks, through the loader's
 * cache, LD_LIBRARY_PATH and paths, and no library loaded by asking.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "libfind.h"

/* What dlopen says of name (the loader's own answer). */
static int loader_finds(const char *name) {
  void *h = dlopen(name, RTLD_LAZY | RTLD_LOCAL);
  if (h) dlclose(h);
  return h != NULL;
}

static void test_same_answer_as_the_loader(void **state) {
  (void)state;
  const char *names[] = {"libc.so.6", "libz.so.1", "libyajl.so.2", "libm.so.6",
                         "libmpi.so.40", "libcuda.so.1", "libze_intel_gpu.so.1",
                         "libOpenCL.so.1", "libloom-no-such-runtime.so.3"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    int want = loader_finds(names[i]);
    if (loom_lib_installed(names[i]) != want)
      fail_msg("%s: loom_lib_installed says %d, dlopen %d", names[i], !want, want);
  }
  assert_int_equal(loom_lib_installed("libc.so.6"), 1); /* this machine has it */
  assert_int_equal(loom_lib_installed("libloom-no-such-runtime.so.3"), 0);
}

static void test_cache_is_read(void **state) {
  (void)state;
  if (access("/etc/ld.so.cache", R_OK) != 0 || !loom_lib_cache_abi()) skip();
  /* glibc 2.32 and later (Debian 12's 2.36) write only this format */
  assert_int_equal(loom_lib_in_cache("libc.so.6"), 1);
  assert_int_equal(loom_lib_in_cache("libloom-no-such-runtime.so.3"), 0);
}

/* A folder of LD_LIBRARY_PATH, and a path with a slash. */
static void test_library_path_and_paths(void **state) {
  (void)state;
  char dir[] = "/tmp/loom-libfind-XXXXXX", lib[128];
  assert_non_null(mkdtemp(dir));
  snprintf(lib, sizeof lib, "%s/libloomfake.so.9", dir);
  FILE *f = fopen(lib, "w");
  assert_non_null(f);
  fclose(f);
  assert_int_equal(loom_lib_installed("libloomfake.so.9"), 0);
  char lp[256];
  snprintf(lp, sizeof lp, "/nonexistent:%s", dir);
  setenv("LD_LIBRARY_PATH", lp, 1);
  assert_int_equal(loom_lib_installed("libloomfake.so.9"), 1);
  unsetenv("LD_LIBRARY_PATH");
  assert_int_equal(loom_lib_installed(lib), 1);
  unlink(lib);
  assert_int_equal(loom_lib_installed(lib), 0);
  rmdir(dir);
}

/* Asking loads nothing: a library found stays out of the process.  (Run
 * first: the other tests' dlopen leaves some loaded.) */
static void test_nothing_loaded(void **state) {
  (void)state;
  const char *names[] = {"libmpi.so.40", "libOpenCL.so.1", "libvulkan.so.1", "libbz2.so.1.0"};
  int asked = 0;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    if (dlopen(names[i], RTLD_LAZY | RTLD_NOLOAD)) continue; /* linked in already */
    if (!loom_lib_installed(names[i])) continue;
    asked++;
    if (dlopen(names[i], RTLD_LAZY | RTLD_NOLOAD)) fail_msg("asking loaded %s", names[i]);
  }
  if (!asked) skip(); /* none of them installed here */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_nothing_loaded),
      cmocka_unit_test(test_same_answer_as_the_loader),
      cmocka_unit_test(test_cache_is_read),
      cmocka_unit_test(test_library_path_and_paths),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
