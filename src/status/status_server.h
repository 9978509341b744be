// quorate's HTTP status endpoints (docs/DESIGN.md §5) on --status-listen: /healthz, /readyz and Prometheus
// /metrics. Metrics is what the rest of quorate updates (from any thread); the server only reads
// it and asks the caller's checks, so it knows nothing of etcd or the supervisor. It answers a
// liveness probe whatever other clients do: a slow or silent connection is dropped after 2 s and
// never holds up another one.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/planner.h"
#include "quorate/status.h"

namespace quorate {

class Metrics {
 public:
  Metrics();
  void IncEtcdRestarts();
  void RecordDecision(Action action);
  void SetMembers(int members);
  void SetIsLearner(bool learner);
  void RecordError(const std::string& message,
                   std::chrono::system_clock::time_point at = std::chrono::system_clock::now());
  // The Prometheus text exposition format, version 0.0.4.
  std::string Render() const;
  // More families, rendered by their owner (the backup schedule) and appended to Render's.
  void AddSection(std::function<std::string()> render);

 private:
  mutable std::mutex mu_;
  long long etcd_restarts_ = 0;
  std::map<std::string, long long> decisions_;
  int members_ = 0;
  bool is_learner_ = false;
  std::optional<std::chrono::system_clock::time_point> last_error_at_;
  std::string last_error_;
  std::vector<std::function<std::string()>> sections_;
};

// A metric family's # HELP and # TYPE lines, appended to `out`, for the sections rendered elsewhere.
void AppendFamily(std::string& out, const char* name, const char* type, const char* help);

// The value of a Prometheus label, escaped as the text format wants: \\, \" and \n.
std::string EscapeLabelValue(const std::string& value);

struct StatusChecks {
  // Ok while the etcd process is alive; otherwise the message is /healthz's 503 reason.
  std::function<Status()> live;
  // Ok when etcd is healthy and this member is a voter; otherwise /readyz's 503 reason.
  std::function<Status()> ready;
  // Lines added to /readyz's body whatever its code (a certificate close to its expiry); may be unset.
  std::function<std::string()> ready_detail;
};

class StatusServer {
 public:
  // Binds `listen` ("ip:port", "[v6]:port"; port 0 picks a free one) and serves on a thread of its
  // own, one request per connection (HTTP/1.1 GET and HEAD, "Connection: close"). InvalidArgument naming --status-listen when the address is malformed; Unavailable naming
  // it when it cannot be bound. `metrics` must outlive the server.
  static Result<std::unique_ptr<StatusServer>> Start(const std::string& listen, Metrics& metrics,
                                                     StatusChecks checks);
  // Stops serving and joins the thread.
  ~StatusServer();
  int port() const { return port_; }

 private:
  struct Impl;
  StatusServer(std::unique_ptr<Impl> impl, int port);
  std::unique_ptr<Impl> impl_;
  int port_;
};

}  // namespace quorate
