/*
 * loader.c - finds the CUDA driver and libcupti at run time.  Nothing here
 * runs until a session asks for device type "cuda": the plug-in links
 * neither library, so loading it is cheap on a machine without a GPU.
 *
 * Order: libcuda.so.1 must load and cuInit(0) must succeed (the stub library
 * shipped with the toolkit answers CUDA_ERROR_STUB_LIBRARY, a machine
 * without a device CUDA_ERROR_NO_DEVICE), then libcupti is opened: first by
 * its plain name (the loader's search path), then by the versioned name,
 * then by the path CMake found at build time (LOOM_CUPTI_LIBRARY).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "cupti_loom.h"

cupti_api cupti;
atomic_int cupti_loaded;

typedef int (*cu_init_fn)(unsigned);

enum { CU_STUB_LIBRARY = 34, CU_NO_DEVICE = 100 };

static int check_driver(char *why, size_t n) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(why, n, "no CUDA driver (libcuda.so.1 not found)");
    return -1;
  }
  cu_init_fn init = (cu_init_fn)(uintptr_t)dlsym(h, "cuInit");
  if (!init) {
    snprintf(why, n, "the CUDA driver has no cuInit");
    return -1;
  }
  int rc = init(0);
  if (rc == CU_STUB_LIBRARY)
    snprintf(why, n, "the CUDA driver is the stub library (CUDA_ERROR_STUB_LIBRARY)");
  else if (rc == CU_NO_DEVICE)
    snprintf(why, n, "no CUDA device (CUDA_ERROR_NO_DEVICE)");
  else if (rc != 0)
    snprintf(why, n, "cuInit failed: %d", rc);
  return rc ? -1 : 0;
}

static void *open_cupti(char *why, size_t n) {
  static const char *const names[] = {"libcupti.so", "libcupti.so.13",
#ifdef LOOM_CUPTI_LIBRARY
                                      LOOM_CUPTI_LIBRARY,
#endif
                                      NULL};
  const char *err = "";
  for (size_t i = 0; names[i]; i++) {
    void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (h) return h;
    err = dlerror();
  }
  snprintf(why, n, "libcupti not found (%s)", err ? err : "dlopen failed");
  return NULL;
}

#define RESOLVE(field, sym)                                               \
  do {                                                                    \
    *(void **)(&api.field) = dlsym(h, sym);                               \
    if (!api.field) {                                                     \
      snprintf(why, n, "libcupti lacks %s", sym);                         \
      return -1;                                                          \
    }                                                                     \
  } while (0)

static int resolve(void *h, char *why, size_t n) {
  cupti_api api;
  memset(&api, 0, sizeof api);
  RESOLVE(GetVersion, "cuptiGetVersion");
  RESOLVE(GetResultString, "cuptiGetResultString");
  RESOLVE(ActivityEnable, "cuptiActivityEnable");
  RESOLVE(ActivityDisable, "cuptiActivityDisable");
  RESOLVE(ActivityRegisterCallbacks, "cuptiActivityRegisterCallbacks");
  RESOLVE(ActivityGetNextRecord, "cuptiActivityGetNextRecord");
  RESOLVE(ActivityGetNumDroppedRecords, "cuptiActivityGetNumDroppedRecords");
  RESOLVE(ActivityFlushAll, "cuptiActivityFlushAll");
  RESOLVE(ActivityPushExternalCorrelationId, "cuptiActivityPushExternalCorrelationId");
  RESOLVE(ActivityPopExternalCorrelationId, "cuptiActivityPopExternalCorrelationId");
  RESOLVE(GetCallbackName, "cuptiGetCallbackName");
  RESOLVE(SetThreadIdType, "cuptiSetThreadIdType");
  /* Records are decoded with this build's struct layouts: an older libcupti
   * would hand out older record versions. */
  uint32_t v = 0;
  if (api.GetVersion(&v) != CUPTI_SUCCESS || v < CUPTI_API_VERSION) {
    snprintf(why, n, "libcupti API version %u is older than the headers loom was built "
             "with (%u)", v, (unsigned)CUPTI_API_VERSION);
    return -1;
  }
  cupti = api;
  return 0;
}

int cupti_load(char *why, size_t n) {
  if (atomic_load(&cupti_loaded)) return 0;
  if (check_driver(why, n) != 0) return -1;
  void *h = open_cupti(why, n);
  if (!h || resolve(h, why, n) != 0) return -1; /* h stays open: harmless */
  atomic_store(&cupti_loaded, 1);
  return 0;
}

const char *cupti_error(CUptiResult r) {
  const char *s = NULL;
  if (atomic_load(&cupti_loaded) && cupti.GetResultString(r, &s) == CUPTI_SUCCESS && s) return s;
  return "CUPTI error";
}
