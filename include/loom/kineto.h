/*
 * kineto.h - the Kineto bridge (libloom-kineto.so): loom as a child profiler
 * of Kineto, the library under PyTorch's torch.profiler.  Once registered,
 * every trace Kineto records that asks for device activity (kernels, copies,
 * fills) also records a loom session over every loom backend that can give
 * some of it (built in or a plug-in, OpenCL, Level Zero, Vulkan, CUDA, MPI,
 * a vendor's), and its device work appears in Kineto's trace linked to the
 * ops that launched it.  See docs/kineto.md.
 *
 * Plain C: callable from C, from a PyTorch device extension's init, or not at
 * all (loading libloom-kineto.so with LD_PRELOAD, or `import loom.kineto`,
 * registers it).
 */
#ifndef LOOM_KINETO_H
#define LOOM_KINETO_H

#include "loom.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(LOOM_BUILDING_KINETO_BRIDGE)
#define LOOM_KINETO_EXTERN __attribute__((visibility("default")))
#else
#define LOOM_KINETO_EXTERN
#endif

/* Registers loom's child profiler with Kineto (libkineto::api()
 * .registerProfilerFactory).  Callable before or after Kineto is
 * initialised, and while a trace is being prepared (it then serves the
 * next trace); from any thread.  The first call decides: later calls do
 * nothing and return its result.  Returns 0, or a negative loom_status:
 * -LOOM_ENOTFOUND when libloom cannot be loaded (said once on stderr;
 * Kineto goes on without loom). */
LOOM_KINETO_EXTERN int loom_kineto_register(void);

#ifdef __cplusplus
}
#endif
#endif /* LOOM_KINETO_H */
