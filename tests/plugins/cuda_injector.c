/*
 * cuda_injector.c - plays the CUDA driver's part for CUDA_INJECTION64_PATH
 * (tests/test_cupti.c): loads the CUPTI plug-in (argv[1]) while loom is not
 * in the process, so that its constructor finds no loom and stays inert;
 * then loads libloom (argv[2]) and calls the plug-in's InitializeInjection
 * as cuInit does.  Exit status 0 when it returned 1 and loom lists the
 * backend "cupti" from the plug-in's file afterwards (and not before); 1
 * with the reason on stderr otherwise.  Not linked with libloom; run it
 * without LOOM_PLUGINS and LOOM_PLUGIN_PATH.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "loom/loom.h"

static int listed; /* 1: listed, 2: and from the plug-in's file */
static void visit(const loom_backend_info *b, void *user) {
  (void)user;
  if (!strcmp(b->name, "cupti")) listed = b->origin && strstr(b->origin, "libloom-cupti") ? 2 : 1;
}

int main(int argc, char **argv) {
  if (argc != 3) return fprintf(stderr, "usage: cuda_injector PLUGIN LIBLOOM\n"), 2;
  void *plugin = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!plugin) return fprintf(stderr, "%s\n", dlerror()), 1;
  void *loom = dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL);
  if (!loom) return fprintf(stderr, "%s\n", dlerror()), 1;
  size_t (*list)(loom_backend_visit_fn, void *) =
      (size_t(*)(loom_backend_visit_fn, void *))(uintptr_t)dlsym(loom, "loom_backends_list");
  int (*inject)(void) = (int (*)(void))(uintptr_t)dlsym(plugin, "InitializeInjection");
  if (!list || !inject) return fprintf(stderr, "symbols missing\n"), 1;
  list(visit, NULL);
  if (listed) return fprintf(stderr, "cupti registered before InitializeInjection\n"), 1;
  if (inject() != 1) return fprintf(stderr, "InitializeInjection did not return 1\n"), 1;
  list(visit, NULL);
  if (listed != 2) {
    fprintf(stderr, "after InitializeInjection loom %s\n",
            listed ? "lists cupti from another file" : "does not list cupti");
    return 1;
  }
  return 0;
}
