/*
 * adapter.c - libloom-pytorch.so, preloaded by `loom record`.  It does not
 * link libtorch: it waits until the program has libtorch_cpu in the process
 * and then loads loom-pytorch-shim.so (the C++ part, built against the
 * installed libtorch-dev) from its own folder, which registers a global
 * RecordFunction callback.  A process that never loads libtorch only pays one
 * dlopen(RTLD_NOLOAD) check per dlopen() it makes.
 *
 * Detection: at load time (a C++ program linked against libtorch) and after
 * every dlopen() the program makes (Python importing torch): this library
 * interposes dlopen().  glibc takes the search path of a bare name from the
 * caller (the return address), which is now this library: so a bare name is
 * looked up here the way glibc would for the real caller (its DT_RPATH, then
 * LD_LIBRARY_PATH, then its DT_RUNPATH, $ORIGIN expanded) before the plain
 * call, and a program that finds its libraries through its own RUNPATH
 * works unchanged.
 *
 * It is also a plug-in for `loom record` only: its table says "preload me,
 * do not load me through LOOM_PLUGINS" (ops.enable), so loom record needs no
 * knowledge of PyTorch.  The backend itself is inert: the shim's framework
 * ops reach loom through loom.h.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loom/plugin.h"

#define EXPORT __attribute__((visibility("default")))

static void *(*real_dlopen)(const char *, int);
static atomic_int attached; /* 0 no, 1 yes (or given up) */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static __thread int depth; /* dlopen() calls in progress on this thread */

/* Is libtorch_cpu mapped?  (dl_iterate_phdr, not dlopen(RTLD_NOLOAD): that
 * would run the initialisers of a library an outer dlopen() is still
 * initialising.) */
static int has_torch(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size, (void)data;
  const char *slash = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
  const char *base = slash ? slash + 1 : info->dlpi_name;
  return base && !strncmp(base, "libtorch_cpu.so", 15);
}

static void try_attach(void) {
  if (atomic_load_explicit(&attached, memory_order_acquire)) return;
  if (!dl_iterate_phdr(has_torch, NULL)) return;
  pthread_mutex_lock(&mu);
  if (!atomic_load(&attached)) {
    atomic_store(&attached, 1);
    /* only where loom records: the shim calls loom.h */
    if (dlsym(RTLD_DEFAULT, "loom_op_begin")) {
      Dl_info di;
      char path[PATH_MAX];
      if (dladdr((void *)try_attach, &di) && di.dli_fname) {
        snprintf(path, sizeof path, "%s", di.dli_fname);
        char *slash = strrchr(path, '/');
        if (slash) slash[1] = 0;
        else path[0] = 0;
        strncat(path, "loom-pytorch-shim.so", sizeof path - strlen(path) - 1);
        void *shim = real_dlopen(path, RTLD_NOW | RTLD_LOCAL);
        int (*init)(void) =
            shim ? (int (*)(void))(uintptr_t)dlsym(shim, "loom_pytorch_shim_init") : NULL;
        if (!init || init() != 0)
          fprintf(stderr, "loom: PyTorch adapter not attached: %s\n",
                  shim ? "init failed" : dlerror());
      }
    }
  }
  pthread_mutex_unlock(&mu);
}

/* Tries dir/file for each dir of a ':'-separated list ($ORIGIN = origin). */
static void *open_in(const char *list, const char *origin, const char *file, int mode) {
  char path[PATH_MAX];
  for (const char *p = list; p && *p;) {
    const char *end = strchr(p, ':');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    size_t k = 0;
    for (size_t i = 0; i < n && k < sizeof path - 1;) {
      size_t o = !strncmp(p + i, "$ORIGIN", 7) ? 7 : !strncmp(p + i, "${ORIGIN}", 9) ? 9 : 0;
      if (o && i + o <= n) {
        k += (size_t)snprintf(path + k, sizeof path - k, "%s", origin);
        i += o;
      } else {
        path[k++] = p[i++];
      }
    }
    if (k && k + strlen(file) + 2 < sizeof path) {
      snprintf(path + k, sizeof path - k, "/%s", file);
      if (access(path, F_OK) == 0) {
        void *h = real_dlopen(path, mode);
        if (h) return h;
      }
    }
    p = end ? end + 1 : NULL;
  }
  return NULL;
}

/* A bare name, searched as glibc would for the caller at `from`. */
static void *open_as_caller(const char *file, int mode, const void *from) {
  Dl_info info;
  struct link_map *lm = NULL;
  if (!file || strchr(file, '/') || !dladdr1(from, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm)
    return NULL;
  const char *strtab = NULL;
  ElfW(Xword) rpath = 0, runpath = 0;
  int has_rpath = 0, has_runpath = 0;
  for (const ElfW(Dyn) *d = lm->l_ld; d && d->d_tag != DT_NULL; d++) {
    if (d->d_tag == DT_STRTAB) strtab = (const char *)d->d_un.d_ptr;
    else if (d->d_tag == DT_RPATH) rpath = d->d_un.d_val, has_rpath = 1;
    else if (d->d_tag == DT_RUNPATH) runpath = d->d_un.d_val, has_runpath = 1;
  }
  if (!strtab || !(has_rpath || has_runpath)) return NULL;
  char origin[PATH_MAX] = "";
  const char *self = lm->l_name && *lm->l_name ? lm->l_name : NULL;
  if (self) snprintf(origin, sizeof origin, "%s", self);
  else if (readlink("/proc/self/exe", origin, sizeof origin - 1) < 0) origin[0] = 0;
  char *slash = strrchr(origin, '/');
  if (slash) *slash = 0;
  if (has_runpath) { /* RUNPATH: LD_LIBRARY_PATH first, and RPATH is ignored */
    void *h = open_in(getenv("LD_LIBRARY_PATH"), origin, file, mode);
    return h ? h : open_in(strtab + runpath, origin, file, mode);
  }
  return open_in(strtab + rpath, origin, file, mode);
}

EXPORT void *dlopen(const char *file, int mode) {
  if (!real_dlopen)
    real_dlopen = (void *(*)(const char *, int))(uintptr_t)dlsym(RTLD_NEXT, "dlopen");
  depth++;
  void *h = open_as_caller(file, mode, __builtin_return_address(0));
  if (!h) h = real_dlopen(file, mode);
  depth--;
  /* only once the outermost dlopen() returned: everything is initialised;
   * not on dlopen(NULL), which loads nothing (libGLdispatch, a dependency
   * of libtorch_cpu, calls it from its constructor while the libraries of
   * a program linked against libtorch are still being initialised: the
   * shim's libraries would start in the middle of that) */
  if (h && file && !depth && !(mode & RTLD_NOLOAD) &&
      !atomic_load_explicit(&attached, memory_order_relaxed))
    try_attach();
  return h;
}

__attribute__((constructor)) static void adapter_init(void) {
  if (!real_dlopen)
    real_dlopen = (void *(*)(const char *, int))(uintptr_t)dlsym(RTLD_NEXT, "dlopen");
  try_attach();
}

/* ---- the plug-in side, for loom record ------------------------------------ */
static loom_status inert(loom_backend *b) {
  (void)b;
  return LOOM_OK;
}
static const loom_backend_enable torch_enable = {
    .struct_size = sizeof(loom_backend_enable),
    /* interposes dlopen(): only a preloaded library sees every call */
    .flags = LOOM_ENABLE_F_DEFAULT | LOOM_ENABLE_F_PRELOAD_SELF | LOOM_ENABLE_F_NO_PLUGIN_LOAD,
};
static const loom_option_desc pytorch_options[] = {
    {"pytorch.shapes", "0: no input shapes and types (as record_shapes=False) (default 1)"},
    {"pytorch.memory", "0: no allocations from PyTorch's allocators (as profile_memory=False; "
                       "PyTorch keeps its CPU blocks' sizes while they are reported) (default 1)"},
    {NULL, NULL}};
static const loom_backend_ops torch_ops = {
    .struct_size = sizeof(loom_backend_ops),
    .options = pytorch_options,
    .abi_major = LOOM_ABI_MAJOR,
    .abi_minor = LOOM_ABI_MINOR,
    .name = "pytorch",
    .device_type = "cpu",
    .kinds = LOOM_KIND_BIT(LOOM_KIND_CPU_OP),
    .start = inert,
    .stop = inert,
    .flush = inert,
    .enable = &torch_enable,
};

EXPORT loom_status loom_plugin_entry(const loom_host *h) {
  if (h->abi_major != LOOM_ABI_MAJOR) return LOOM_EABI;
  return h->backend_register(&torch_ops, NULL);
}
