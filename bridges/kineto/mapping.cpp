/*
 * mapping.cpp - Kineto activity types <-> loom record kinds (mapping.h).
 * Runtime, driver and sync calls take the Kineto type of their runtime's
 * family from their loom category: "cuda_*" -> CUDA_*, "xpu_*" -> XPU_*,
 * every other runtime (OpenCL, Vulkan, Level Zero under another name, a
 * vendor's plug-in) -> PRIVATEUSE1_*, the types PyTorch gives out-of-tree
 * devices.  Only device work (kernels, copies, fills, collectives) starts a
 * loom session: torch.profiler asks for every runtime's calls even with
 * activities=[CPU], and such a trace must not start one.
 */
#include "mapping.h"

#include <cstring>

namespace loom_kineto {
namespace {

constexpr uint32_t bit(loom_kind k) { return LOOM_KIND_BIT(k); }

struct Row {
  ActivityType type;
  loom_kind kind;
};

/* Kineto type -> the loom kind whose events it logs (docs/kineto.md). */
constexpr Row kRows[] = {
    {ActivityType::CPU_OP, LOOM_KIND_CPU_OP},
    {ActivityType::USER_ANNOTATION, LOOM_KIND_USER_RANGE},
    {ActivityType::GPU_USER_ANNOTATION, LOOM_KIND_USER_RANGE},
    {ActivityType::GPU_MEMCPY, LOOM_KIND_MEMCPY},
    {ActivityType::GPU_MEMSET, LOOM_KIND_MEMSET},
    {ActivityType::CONCURRENT_KERNEL, LOOM_KIND_KERNEL},
    {ActivityType::CUDA_RUNTIME, LOOM_KIND_RUNTIME},
    {ActivityType::CUDA_DRIVER, LOOM_KIND_DRIVER},
    {ActivityType::CPU_INSTANT_EVENT, LOOM_KIND_INSTANT},
    {ActivityType::OVERHEAD, LOOM_KIND_OVERHEAD},
    {ActivityType::CUDA_SYNC, LOOM_KIND_SYNC},
    {ActivityType::XPU_RUNTIME, LOOM_KIND_RUNTIME},
    {ActivityType::XPU_DRIVER, LOOM_KIND_DRIVER},
    {ActivityType::COLLECTIVE_COMM, LOOM_KIND_COLLECTIVE},
    {ActivityType::PRIVATEUSE1_RUNTIME, LOOM_KIND_RUNTIME},
    {ActivityType::PRIVATEUSE1_RUNTIME, LOOM_KIND_SYNC},
    {ActivityType::PRIVATEUSE1_DRIVER, LOOM_KIND_DRIVER},
    {ActivityType::XPU_SYNC, LOOM_KIND_SYNC},
    {ActivityType::HARDWARE_COUNTERS, LOOM_KIND_COUNTER},
};

constexpr uint32_t kDeviceWork = bit(LOOM_KIND_KERNEL) | bit(LOOM_KIND_MEMCPY) |
                                 bit(LOOM_KIND_MEMSET) | bit(LOOM_KIND_COLLECTIVE);
/* Recorded in every session whatever was asked: the framework ops carry
 * the correlation ids, runtime calls take them to the device work they
 * launch, user ranges are what gpu_user_annotation projects. */
constexpr uint32_t kAlways = bit(LOOM_KIND_CPU_OP) | bit(LOOM_KIND_RUNTIME) |
                             bit(LOOM_KIND_DRIVER) | bit(LOOM_KIND_USER_RANGE);

bool starts_with(const char *s, const char *prefix) {
  return s && !std::strncmp(s, prefix, std::strlen(prefix));
}

ActivityType family(const loom_event_view &e, ActivityType cuda, ActivityType xpu,
                    ActivityType other) {
  if (starts_with(e.category, "cuda_")) return cuda;
  if (starts_with(e.category, "xpu_")) return xpu;
  return other;
}

} // namespace

Request request_of(const std::set<ActivityType> &types) {
  Request r;
  r.types = types;
  if (r.types.empty())
    for (ActivityType t : libkineto::defaultActivityTypes()) r.types.insert(t);
  for (const Row &row : kRows)
    if (r.types.count(row.type)) r.session_kinds |= bit(row.kind);
  r.device_kinds = r.session_kinds & kDeviceWork;
  if (r.device_kinds) r.session_kinds |= kAlways;
  return r;
}

bool backend_wanted(const Request &req, const char *device_type, uint32_t kinds) {
  if (!device_type || !std::strcmp(device_type, "cpu")) return false;
  return (kinds & req.device_kinds) != 0;
}

ActivityType type_of(const loom_event_view &e) {
  switch (e.kind) {
  case LOOM_KIND_KERNEL: return ActivityType::CONCURRENT_KERNEL;
  case LOOM_KIND_MEMCPY: return ActivityType::GPU_MEMCPY;
  case LOOM_KIND_MEMSET: return ActivityType::GPU_MEMSET;
  case LOOM_KIND_RUNTIME:
    return family(e, ActivityType::CUDA_RUNTIME, ActivityType::XPU_RUNTIME,
                  ActivityType::PRIVATEUSE1_RUNTIME);
  case LOOM_KIND_DRIVER:
    return family(e, ActivityType::CUDA_DRIVER, ActivityType::XPU_DRIVER,
                  ActivityType::PRIVATEUSE1_DRIVER);
  case LOOM_KIND_SYNC:
    return family(e, ActivityType::CUDA_SYNC, ActivityType::XPU_SYNC,
                  ActivityType::PRIVATEUSE1_RUNTIME);
  case LOOM_KIND_USER_RANGE:
    /* projected by loom, or a backend's own range on a queue (Vulkan's submissions) */
    return e.projected || e.device != UINT32_MAX ? ActivityType::GPU_USER_ANNOTATION
                                                 : ActivityType::USER_ANNOTATION;
  case LOOM_KIND_CPU_OP: return ActivityType::CPU_OP;
  case LOOM_KIND_INSTANT: return ActivityType::CPU_INSTANT_EVENT;
  case LOOM_KIND_COUNTER: return ActivityType::HARDWARE_COUNTERS;
  case LOOM_KIND_COLLECTIVE: return ActivityType::COLLECTIVE_COMM;
  case LOOM_KIND_OVERHEAD: return ActivityType::OVERHEAD;
  default: return ActivityType::ENUM_COUNT;
  }
}

bool is_device_work(ActivityType t) {
  return t == ActivityType::CONCURRENT_KERNEL || t == ActivityType::GPU_MEMCPY ||
         t == ActivityType::GPU_MEMSET;
}

} // namespace loom_kineto
