/*
 * session.h - one Kineto trace seen from loom: the child profiler session
 * (libkineto::IActivityProfilerSession) the bridge gives Kineto for each
 * trace it prepares.  It owns one loom session over the selected backends,
 * started and stopped with the trace, and hands the processed loom trace
 * to Kineto's logger in processTrace (translate.cpp).
 */
#ifndef LOOM_KINETO_SESSION_H
#define LOOM_KINETO_SESSION_H

#include <IActivityProfiler.h>
#include <libkineto.h>

#include <atomic>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "libloom.h"
#include "mapping.h"

namespace loom_kineto {

/* Names of the placeholders the session records in loom: a framework op
 * around each of Kineto's correlation ids (so loom's processing gives the
 * device work launched inside it that id), and a user range around each of
 * Kineto's user correlation ids (so loom projects it onto the queues that
 * ran its work, as gpu_user_annotation).  Kineto has the client's real ops
 * and ranges: the placeholders are never logged. */
constexpr const char *kOpName = "kineto.correlation";
constexpr const char *kUserPrefix = "kineto.user#";

class Session : public libkineto::IActivityProfilerSession {
 public:
  /* s: the configured loom session (owned), or nullptr for a session that
   * only carries errors (loom could not record this trace). */
  Session(const Loom *L, Request req, loom_session *s, std::vector<std::string> errors,
          std::unordered_map<std::string, std::string> meta);
  ~Session() override;

  void start() override;
  void stop() override;
  std::vector<std::string> errors() override;
  void processTrace(libkineto::ActivityLogger &logger) override;
  void processTrace(libkineto::ActivityLogger &logger,
                    libkineto::getLinkedActivityCallback linked, int64_t start,
                    int64_t end) override;
  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override;
  std::vector<libkineto::ResourceInfo> getResourceInfos() override;
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override;
  void pushCorrelationId(uint64_t id) override;
  void popCorrelationId() override;
  void pushUserCorrelationId(uint64_t id) override;
  void popUserCorrelationId() override;
  std::unordered_map<std::string, std::string> getMetadata() override;

  /* For bench_kineto: the activities the last processTrace logged, and
   * loom's trace (after stop, until getTraceBuffer). */
  size_t logged() const { return logged_; }
  const loom_trace *trace() const { return t_; }

 private:
  void translate(libkineto::ActivityLogger &logger,
                 const libkineto::getLinkedActivityCallback &linked);
  void collect_warnings();
  void save_copy();
  std::vector<libkineto::DeviceInfo> device_rows() const;

  const Loom *L_;
  Request req_;
  loom_session *s_;
  loom_trace *t_ = nullptr;
  std::vector<std::string> errors_;
  std::unordered_map<std::string, std::string> meta_;
  std::unique_ptr<libkineto::CpuTraceBuffer> buf_;
  std::vector<char> track_used_; /* per loom track: some event of it was logged */
  loom_string_id op_name_ = 0;
  std::atomic<bool> live_{false}; /* recording: pushes reach loom */
  size_t logged_ = 0;
};

/* The session for a trace asking for types, or nullptr when loom has
 * nothing to give for them (no warning then). */
std::unique_ptr<libkineto::IActivityProfilerSession>
make_session(const std::set<libkineto::ActivityType> &types);

} // namespace loom_kineto

#endif
