/*
 * bench_kineto.cpp - the Kineto bridge's cost per device record: a loom
 * session made by the bridge (bridges/kineto, the session Kineto gets for
 * a trace of torch.profiler's PrivateUse1 activity set) records N kernel
 * launches of the simulated device (examples/plugin-sim: a runtime call
 * and a kernel each, linked by a flow, inside an op whose correlation id
 * was pushed as Kineto pushes it); then, each in a forked child of the
 * same stopped session so that each starts from the same memory:
 *   processTrace  the bridge turning loom's records into Kineto's
 *                 activities, to a logger that does nothing (what Kineto's
 *                 writer costs after that is Kineto's);
 *   save          loom_trace_save of the same trace to JSON (the baseline:
 *                 loom writing its own file from the same records).
 * Per device record (each launch's kernel; its runtime call and op come
 * with it) and per item each handles: wall time, and peak memory above the
 * start (VmHWM - VmRSS at the child's start).  Never a test.
 *
 *   bench_kineto [N=200000] [REPEAT=3]
 */
#include <output_base.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "session.h"

extern "C" uint64_t simrt_launch(int q, const char *kernel, uint64_t dur_ns, uint32_t grid,
                                 uint32_t block);

namespace {

using libkineto::ActivityType;

struct NullLogger : libkineto::ActivityLogger {
  size_t n = 0;
  void handleDeviceInfo(const libkineto::DeviceInfo &, int64_t) override {}
  void handleResourceInfo(const libkineto::ResourceInfo &, int64_t) override {}
  void handleOverheadInfo(const OverheadInfo &, int64_t) override {}
  void handleTraceSpan(const libkineto::TraceSpan &) override {}
  void handleActivity(const libkineto::ITraceActivity &) override { n++; }
  void handleGenericActivity(const libkineto::GenericTraceActivity &) override { n++; }
  void handleTraceStart(const std::unordered_map<std::string, std::string> &,
                        const std::string &) override {}
  void finalizeMemoryTrace(const std::string &, const libkineto::Config &) override {}
  void finalizeTrace(const libkineto::Config &, std::unique_ptr<libkineto::ActivityBuffers>,
                     int64_t) override {}
};

long status_kb(const char *key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (!line.compare(0, std::strlen(key), key)) return std::atol(line.c_str() + std::strlen(key));
  return 0;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/* Runs fn in a child; prints its time and peak memory per device record
 * and per item it handled (activities logged, records written). */
template <typename F> void measure(const char *what, size_t records, F fn) {
  int fd[2];
  if (pipe(fd)) return;
  pid_t pid = fork();
  if (pid == 0) {
    long rss0 = status_kb("VmRSS:");
    double t0 = now_s();
    size_t n = fn();
    double dt = now_s() - t0;
    long peak = status_kb("VmHWM:") - rss0;
    char buf[256];
    int len = std::snprintf(buf, sizeof buf,
                            "%-12s %8.1f ns and %7.1f bytes peak per device record "
                            "(%zu items: %.1f ns, %.1f bytes each)\n",
                            what, dt * 1e9 / records, peak * 1024.0 / records, n, dt * 1e9 / n,
                            peak * 1024.0 / n);
    (void)!write(fd[1], buf, len);
    _exit(0);
  }
  close(fd[1]);
  char buf[256];
  ssize_t len = read(fd[0], buf, sizeof buf - 1);
  close(fd[0]);
  waitpid(pid, nullptr, 0);
  if (len > 0) std::fwrite(buf, 1, len, stdout);
}

} // namespace

int main(int argc, char **argv) {
  size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 200000;
  int repeat = argc > 2 ? std::atoi(argv[2]) : 3;
  setenv("LOOM_PLUGINS", SIM_PLUGIN, 0);
  setenv("LOOM_SIM_MAX_PENDING", "100000000", 0);
  setenv("LOOM_DEVICES", "sim", 0);
  std::set<ActivityType> types = {ActivityType::CPU_OP, ActivityType::GPU_MEMCPY,
                                  ActivityType::GPU_MEMSET, ActivityType::CONCURRENT_KERNEL,
                                  ActivityType::GPU_USER_ANNOTATION,
                                  ActivityType::PRIVATEUSE1_RUNTIME, ActivityType::PRIVATEUSE1_DRIVER};
  auto s = loom_kineto::make_session(types);
  auto *session = dynamic_cast<loom_kineto::Session *>(s.get());
  if (!session) return std::fprintf(stderr, "bench_kineto: no loom session (sim plug-in?)\n"), 1;
  session->start();
  for (size_t i = 0; i < n; i++) {
    session->pushCorrelationId(i + 1);
    simrt_launch(0, "bench_kernel", 1000, 1, 64);
    session->popCorrelationId();
  }
  session->stop();
  for (const auto &e : session->errors()) std::fprintf(stderr, "bench_kineto: %s\n", e.c_str());
  const loom_trace *t = session->trace();
  loom_trace_summary sum{};
  sum.struct_size = sizeof sum;
  loom_trace_summarize(t, &sum);
  size_t records = loom_trace_event_count(t);
  std::printf("bench_kineto: %zu launches -> %zu loom records (%llu flows; the ops are the "
              "bridge's correlation placeholders) in one session\n", n, records,
              static_cast<unsigned long long>(sum.flows));
  for (int r = 0; r < repeat; r++) {
    measure("processTrace", n, [&] {
      NullLogger logger;
      session->processTrace(logger, [](int32_t) { return nullptr; }, 0, 0);
      return logger.n;
    });
    measure("save .json", n, [&] {
      loom_trace_save(t, "/tmp/bench_kineto.json");
      return records;
    });
  }
  unlink("/tmp/bench_kineto.json");
  return 0;
}
