/*
 * register.cpp - loom's child profiler (libkineto::IActivityProfiler) and
 * its registration with Kineto: loom_kineto_register (loom/kineto.h), run
 * by the library's constructor too, so loading it (LD_PRELOAD, `import
 * loom.kineto`, a link) is enough.  configure() is called by Kineto for
 * every trace it prepares; make_session (session.cpp) decides whether loom
 * records it.
 */
#include <loom/kineto.h>

#include <cstdio>
#include <mutex>

#include "session.h"

namespace loom_kineto {
namespace {

class Profiler : public libkineto::IActivityProfiler {
 public:
  const std::string &name() const override { return name_; }

  const std::set<libkineto::ActivityType> &availableActivities() const override {
    static const std::set<libkineto::ActivityType> all = [] {
      std::set<libkineto::ActivityType> s;
      for (auto t : libkineto::activityTypes())
        if (request_of({t}).session_kinds) s.insert(t);
      return s;
    }();
    return all;
  }

  std::unique_ptr<libkineto::IActivityProfilerSession>
  configure(const std::set<libkineto::ActivityType> &types, const libkineto::Config &) override {
    return make_session(types);
  }

  std::unique_ptr<libkineto::IActivityProfilerSession>
  configure(int64_t, int64_t, const std::set<libkineto::ActivityType> &types,
            const libkineto::Config &) override {
    return make_session(types);
  }

 private:
  std::string name_ = "loom";
};

std::mutex reg_mu;
bool reg_done;
int reg_status;

} // namespace
} // namespace loom_kineto

extern "C" int loom_kineto_register(void) {
  using namespace loom_kineto;
  std::lock_guard<std::mutex> lock(reg_mu);
  if (reg_done) return reg_status;
  reg_done = true;
  std::string why;
  if (!loom(&why)) {
    std::fprintf(stderr, "loom-kineto: %s: Kineto traces will not have loom's devices\n",
                 why.c_str());
    reg_status = -LOOM_ENOTFOUND;
    return reg_status;
  }
  libkineto::api().registerProfilerFactory([]() -> std::unique_ptr<libkineto::IActivityProfiler> {
    return std::make_unique<Profiler>();
  });
  reg_status = 0;
  return 0;
}

__attribute__((constructor)) static void loom_kineto_load(void) { loom_kineto_register(); }
