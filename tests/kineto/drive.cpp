/*
 * drive.cpp - a stand-in for PyTorch's profiler: drives the real libkineto
 * the way torch.profiler does (libkineto_init, initProfilerIfRegistered,
 * prepareTrace with torch's activity sets, startTrace, CPU ops with their
 * correlation ids pushed around each and handed over with
 * transferCpuTrace, stopTrace, save), with device work from an ordinary
 * runtime inside the ops.  It knows nothing of loom but the bridge's file
 * name and loom_kineto_register: libloom is not linked.  tests/kineto/
 * check.py runs it and checks what Kineto saved.
 *
 * usage: kineto_drive OUT.json [--bridge PATH] [--register before|after|prepared|python|none]
 *                     [--work opencl|vulkan|fakert|none|A,B] [--types cpu|device] [--ops N]
 *                     [--traces K]
 *   --register  when the bridge is dlopen()ed: before libkineto_init, after
 *               Kineto's init, or while the first trace is prepared; python:
 *               `import loom.kineto` after Kineto's init; none: not at all
 *               (LD_PRELOAD does it)
 *   --traces K  K traces in a row: OUT.json, then OUT-2.json ...
 * Exit status 0 when every trace was saved.
 */
#include <ActivityType.h>
#include <libkineto.h>

#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>

#include "work.h"

using libkineto::ActivityType;

namespace {

/* torch/csrc/profiler/kineto_shim.cpp: activities=[CPU] and the
 * PrivateUse1 device's set. */
const std::set<ActivityType> kCpuTypes = {
    ActivityType::CPU_OP,          ActivityType::CPU_INSTANT_EVENT,
    ActivityType::USER_ANNOTATION, ActivityType::EXTERNAL_CORRELATION,
    ActivityType::XPU_RUNTIME,     ActivityType::CUDA_RUNTIME,
    ActivityType::CUDA_DRIVER,     ActivityType::PYTHON_FUNCTION,
    ActivityType::PRIVATEUSE1_RUNTIME, ActivityType::PRIVATEUSE1_DRIVER};
const std::set<ActivityType> kPrivateUse1Types = {
    ActivityType::GPU_MEMCPY,          ActivityType::GPU_MEMSET,
    ActivityType::GPU_USER_ANNOTATION, ActivityType::CONCURRENT_KERNEL,
    ActivityType::PRIVATEUSE1_RUNTIME, ActivityType::PRIVATEUSE1_DRIVER};

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Opts {
  const char *out = nullptr, *bridge = nullptr, *reg = "before", *work = "none",
             *types = "device";
  int ops = 4, traces = 1;
};

void load_bridge(const Opts &o) {
  if (!o.bridge) return;
  void *h = dlopen(o.bridge, RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    std::fprintf(stderr, "kineto_drive: %s\n", dlerror());
    std::exit(2);
  }
  auto reg = reinterpret_cast<int (*)()>(dlsym(h, "loom_kineto_register"));
  int st = reg ? reg() : -1;
  std::printf("kineto_drive: loom_kineto_register() = %d\n", st);
}

/* --register python: `import loom.kineto` in an embedded interpreter
 * (KINETO_DRIVE_LIBPYTHON names libpython; PYTHONPATH finds loom). */
void load_python() {
  const char *lib = std::getenv("KINETO_DRIVE_LIBPYTHON");
  void *h = lib ? dlopen(lib, RTLD_NOW | RTLD_GLOBAL) : nullptr;
  auto init = reinterpret_cast<void (*)()>(h ? dlsym(h, "Py_Initialize") : nullptr);
  auto run = reinterpret_cast<int (*)(const char *)>(h ? dlsym(h, "PyRun_SimpleString") : nullptr);
  if (!init || !run) {
    std::fprintf(stderr, "kineto_drive: no libpython (%s)\n", lib ? dlerror() : "KINETO_DRIVE_LIBPYTHON unset");
    std::exit(2);
  }
  init();
  if (run("import loom.kineto\nprint('kineto_drive: loom.kineto.status =', loom.kineto.status, flush=True)"))
    std::exit(2);
}

std::string out_name(const Opts &o, int k) {
  std::string s = o.out;
  if (k == 0) return s;
  size_t dot = s.rfind(".json");
  return s.substr(0, dot) + "-" + std::to_string(k + 1) + ".json";
}

/* One trace: a user annotation "step" around ops "op#i", each running
 * one piece of device work. */
bool one_trace(const Opts &o, Work &w, int k) {
  auto &prof = libkineto::api().activityProfiler();
  std::set<ActivityType> types = kCpuTypes;
  if (!std::strcmp(o.types, "device")) types.insert(kPrivateUse1Types.begin(), kPrivateUse1Types.end());
  prof.prepareTrace(types);
  if (k == 0 && !std::strcmp(o.reg, "prepared")) load_bridge(o);
  prof.startTrace();
  auto buf = std::make_unique<libkineto::CpuTraceBuffer>();
  buf->span = libkineto::TraceSpan(now_ns(), 0, "kineto_drive");
  buf->gpuOpCount = -1;
  int32_t pid = getpid(), tid = static_cast<int32_t>(syscall(SYS_gettid));
  auto add = [&](ActivityType t, const std::string &name, int32_t id, int64_t s, int64_t e) {
    buf->emplace_activity(buf->span, t, name);
    auto &a = *buf->activities.back();
    a.startTime = s, a.endTime = e, a.id = id, a.device = pid, a.resource = tid, a.threadId = tid;
  };
  int32_t step_id = 1000 * (k + 1);
  int64_t step_start = now_ns();
  prof.pushCorrelationId(step_id);
  prof.pushUserCorrelationId(step_id);
  for (int i = 0; i < o.ops; i++) {
    int32_t id = step_id + 1 + i;
    int64_t s = now_ns();
    prof.pushCorrelationId(id);
    w.op(i);
    prof.popCorrelationId();
    add(ActivityType::CPU_OP, "op#" + std::to_string(i), id, s, now_ns());
  }
  w.sync();
  prof.popUserCorrelationId();
  prof.popCorrelationId();
  add(ActivityType::USER_ANNOTATION, "step", step_id, step_start, now_ns());
  buf->span.endTime = now_ns();
  prof.transferCpuTrace(std::move(buf));
  auto trace = prof.stopTrace();
  if (!trace) return false;
  trace->save(out_name(o, k));
  return true;
}

} // namespace

int main(int argc, char **argv) {
  Opts o;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : "";
    if (a == "--bridge") o.bridge = v, i++;
    else if (a == "--register") o.reg = v, i++;
    else if (a == "--work") o.work = v, i++;
    else if (a == "--types") o.types = v, i++;
    else if (a == "--ops") o.ops = std::atoi(v), i++;
    else if (a == "--traces") o.traces = std::atoi(v), i++;
    else if (!o.out) o.out = argv[i];
    else return std::fprintf(stderr, "kineto_drive: unknown argument %s\n", argv[i]), 2;
  }
  if (!o.out) return std::fprintf(stderr, "usage: kineto_drive OUT.json [options]\n"), 2;
  if (!std::strcmp(o.reg, "before")) load_bridge(o);
  libkineto_init(/*cpuOnly=*/true, /*logOnError=*/true);
  libkineto::api().initProfilerIfRegistered();
  if (!std::strcmp(o.reg, "after")) load_bridge(o);
  if (!std::strcmp(o.reg, "python")) load_python();
  std::unique_ptr<Work> w = make_work(o.work); /* a runtime loaded after init */
  if (!w) return std::fprintf(stderr, "kineto_drive: no workload '%s'\n", o.work), 2;
  for (int k = 0; k < o.traces; k++)
    if (!one_trace(o, *w, k)) return std::fprintf(stderr, "kineto_drive: no trace\n"), 1;
  std::printf("kineto_drive: %d trace(s) saved\n", o.traces);
  return 0;
}
