#include "status/status_server.h"

#include <httplib.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>

namespace quorate {
namespace {

// Every decision is exported from the start, at 0, so a rate() over it has a baseline.
constexpr Action kAllActions[] = {Action::kRestart, Action::kJoin, Action::kLateInitial,
                                  Action::kReplace, Action::kNew, Action::kWait};

void Family(std::string& out, const char* name, const char* type, const char* help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

}  // namespace

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

Metrics::Metrics() {
  for (Action a : kAllActions) decisions_[ActionName(a)] = 0;
}

void Metrics::IncEtcdRestarts() {
  std::lock_guard lock(mu_);
  ++etcd_restarts_;
}

void Metrics::RecordDecision(Action action) {
  std::lock_guard lock(mu_);
  ++decisions_[ActionName(action)];
}

void Metrics::SetMembers(int members) {
  std::lock_guard lock(mu_);
  members_ = members;
}

void Metrics::SetIsLearner(bool learner) {
  std::lock_guard lock(mu_);
  is_learner_ = learner;
}

void Metrics::RecordError(const std::string& message, std::chrono::system_clock::time_point at) {
  std::lock_guard lock(mu_);
  last_error_ = message;
  last_error_at_ = at;
}

std::string Metrics::Render() const {
  std::lock_guard lock(mu_);
  std::string out;
  Family(out, "quorate_up", "gauge", "1 while quorate runs.");
  out += "quorate_up 1\n";
  Family(out, "quorate_etcd_restarts_total", "counter",
         "Times quorate restarted etcd after it exited.");
  out += fmt::format("quorate_etcd_restarts_total {}\n", etcd_restarts_);
  Family(out, "quorate_decisions_total", "counter", "Start-up decisions taken, by decision.");
  for (const auto& [decision, count] : decisions_) {
    out += fmt::format("quorate_decisions_total{{decision=\"{}\"}} {}\n", EscapeLabelValue(decision),
                       count);
  }
  Family(out, "quorate_members", "gauge", "Members of the etcd cluster, as last seen.");
  out += fmt::format("quorate_members {}\n", members_);
  Family(out, "quorate_is_learner", "gauge", "1 while this member is a raft learner, else 0.");
  out += fmt::format("quorate_is_learner {}\n", is_learner_ ? 1 : 0);
  Family(out, "quorate_last_error_timestamp_seconds", "gauge",
         "Unix time of the last error; 0 when there was none.");
  double seconds = 0;
  if (last_error_at_) {
    seconds = std::chrono::duration<double>(last_error_at_->time_since_epoch()).count();
  }
  out += fmt::format("quorate_last_error_timestamp_seconds {:.3f}\n", seconds);
  Family(out, "quorate_last_error_info", "gauge",
         "The last error's message as a label, value 1; no sample when there was none.");
  if (last_error_at_) {
    out += fmt::format("quorate_last_error_info{{message=\"{}\"}} 1\n", EscapeLabelValue(last_error_));
  }
  return out;
}

struct StatusServer::Impl {
  httplib::Server server;
  std::thread thread;
  std::atomic<bool> listen_returned{false};
};

StatusServer::StatusServer(std::unique_ptr<Impl> impl, int port) : impl_(std::move(impl)), port_(port) {}

StatusServer::~StatusServer() {
  impl_->server.stop();
  impl_->thread.join();
}

Result<std::unique_ptr<StatusServer>> StatusServer::Start(const std::string& listen, Metrics& metrics,
                                                          StatusChecks checks) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(fmt::format("--status-listen '{}': {}", listen, why));
  };
  size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return bad("not ip:port");
  std::string host = listen.substr(0, colon);
  std::string port_text = listen.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) return bad("no address before the port");
  if (port_text.empty() || port_text.size() > 5 ||
      port_text.find_first_not_of("0123456789") != std::string::npos || std::stoi(port_text) > 65535) {
    return bad("the port is not a number from 0 to 65535");
  }
  int port = std::stoi(port_text);

  auto impl = std::make_unique<Impl>();
  httplib::Server& server = impl->server;
  // httplib's default adds SO_REUSEPORT, which lets a second quorate on the same address bind and
  // silently share the probes; SO_REUSEADDR alone still allows a quick restart.
  server.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });

  auto answer = [](const std::function<Status()>& check, const char* missing, httplib::Response& res) {
    Status s = check ? check() : Status::FailedPrecondition(missing);
    res.status = s.ok() ? 200 : 503;
    res.set_content(s.ok() ? "ok\n" : s.message() + "\n", "text/plain; charset=utf-8");
  };
  server.Get("/healthz", [checks, answer](const httplib::Request&, httplib::Response& res) {
    answer(checks.live, "no liveness check is configured", res);
  });
  server.Get("/readyz", [checks, answer](const httplib::Request&, httplib::Response& res) {
    answer(checks.ready, "no readiness check is configured", res);
  });
  server.Get("/metrics", [&metrics](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.Render(), "text/plain; version=0.0.4; charset=utf-8");
  });

  errno = 0;
  int bound = port == 0 ? server.bind_to_any_port(host) : (server.bind_to_port(host, port) ? port : -1);
  if (bound < 0) {
    std::string why = errno != 0 ? std::strerror(errno) : "cannot resolve or bind it";
    return Status::Unavailable(fmt::format("--status-listen '{}': {}", listen, why));
  }
  Impl& started = *impl;
  impl->thread = std::thread([&started] {
    started.server.listen_after_bind();
    started.listen_returned = true;
  });
  // stop() before the listen loop has begun would be lost, and the destructor's join would hang.
  while (!server.is_running() && !started.listen_returned) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return std::unique_ptr<StatusServer>(new StatusServer(std::move(impl), bound));
}

}  // namespace quorate
