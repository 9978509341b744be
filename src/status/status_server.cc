#include "status/status_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>

namespace quorate {
namespace {

// Every decision is exported from the start, at 0, so a rate() over it has a baseline.
constexpr Action kAllActions[] = {Action::kRestart, Action::kJoin, Action::kLateInitial,
                                  Action::kReplace, Action::kNew, Action::kWait};

}  // namespace

void AppendFamily(std::string& out, const char* name, const char* type, const char* help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

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
  AppendFamily(out, "quorate_up", "gauge", "1 while quorate runs.");
  out += "quorate_up 1\n";
  AppendFamily(out, "quorate_etcd_restarts_total", "counter", "Times quorate restarted etcd after it exited.");
  out += fmt::format("quorate_etcd_restarts_total {}\n", etcd_restarts_);
  AppendFamily(out, "quorate_decisions_total", "counter", "Start-up decisions taken, by decision.");
  for (const auto& [decision, count] : decisions_) {
    out += fmt::format("quorate_decisions_total{{decision=\"{}\"}} {}\n", EscapeLabelValue(decision),
                       count);
  }
  AppendFamily(out, "quorate_members", "gauge", "Members of the etcd cluster, as last seen.");
  out += fmt::format("quorate_members {}\n", members_);
  AppendFamily(out, "quorate_is_learner", "gauge", "1 while this member is a raft learner, else 0.");
  out += fmt::format("quorate_is_learner {}\n", is_learner_ ? 1 : 0);
  AppendFamily(out, "quorate_last_error_timestamp_seconds", "gauge",
               "Unix time of the last error; 0 when there was none.");
  double seconds = 0;
  if (last_error_at_) {
    seconds = std::chrono::duration<double>(last_error_at_->time_since_epoch()).count();
  }
  out += fmt::format("quorate_last_error_timestamp_seconds {:.3f}\n", seconds);
  AppendFamily(out, "quorate_last_error_info", "gauge",
               "The last error's message as a label, value 1; no sample when there was none.");
  if (last_error_at_) {
    out += fmt::format("quorate_last_error_info{{message=\"{}\"}} 1\n", EscapeLabelValue(last_error_));
  }
  for (const auto& section : sections_) out += section();
  return out;
}

void Metrics::AddSection(std::function<std::string()> render) {
  std::lock_guard lock(mu_);
  sections_.push_back(std::move(render));
}

namespace {

// Each connection has this long, from accept to the last byte of the answer, and sends at most
// kMaxRequestBytes: a client dribbling its headers or saying nothing is dropped, never waited on.
constexpr auto kExchangeDeadline = std::chrono::seconds(2);
constexpr size_t kMaxRequestBytes = 8192;
// Beyond this many open connections the oldest is dropped: a kubelet's probe, which is new, then
// always gets a place, however many strays hold one.
constexpr size_t kMaxConnections = 256;

struct Connection {
  int fd = -1;
  std::chrono::steady_clock::time_point deadline;
  std::string in;
  std::string out;  // the answer, once the request is whole
  size_t sent = 0;
};

struct Answer {
  int status;
  std::string content_type;
  std::string body;
  std::vector<std::string> headers;
};

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 431:
      return "Request Header Fields Too Large";
    default:
      return "Service Unavailable";
  }
}

std::string Render(const Answer& a, bool head) {
  std::string out = fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
                                a.status, Reason(a.status), a.content_type, a.body.size());
  for (const auto& h : a.headers) out += h + "\r\n";
  out += "\r\n";
  if (!head) out += a.body;
  return out;
}

Answer Plain(int status, std::string body) { return {status, "text/plain; charset=utf-8", std::move(body), {}}; }

}  // namespace

// One thread and poll(2) for every connection: a slow or idle client costs a slot, not a worker,
// so /healthz answers whatever strays hold connections open.
struct StatusServer::Impl {
  Impl(Metrics& m, StatusChecks c) : metrics(m), checks(std::move(c)) {}
  ~Impl() {
    for (auto& c : connections) ::close(c.fd);
    if (listen_fd >= 0) ::close(listen_fd);
    if (stop_fd >= 0) ::close(stop_fd);
  }

  Answer Route(const std::string& path) {
    auto check = [](const std::function<Status()>& fn, const char* missing) {
      Status s = fn ? fn() : Status::FailedPrecondition(missing);
      return Plain(s.ok() ? 200 : 503, s.ok() ? "ok\n" : s.message() + "\n");
    };
    if (path == "/healthz") return check(checks.live, "no liveness check is configured");
    if (path == "/readyz") {
      Answer a = check(checks.ready, "no readiness check is configured");
      if (checks.ready_detail) a.body += checks.ready_detail();
      return a;
    }
    if (path == "/metrics") return {200, "text/plain; version=0.0.4; charset=utf-8", metrics.Render(), {}};
    return Plain(404, "not found\n");
  }

  // The answer to the request in `in` once its headers are whole; empty while they are not.
  std::string Respond(const std::string& in) {
    size_t end = in.find("\r\n\r\n");
    if (end == std::string::npos) {
      return in.size() < kMaxRequestBytes ? "" : Render(Plain(431, "request headers too large\n"), false);
    }
    std::string_view line(in.data(), in.find("\r\n"));
    size_t sp1 = line.find(' ');
    size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
    if (sp2 == std::string_view::npos || line.substr(sp2 + 1).rfind("HTTP/1.", 0) != 0) {
      return Render(Plain(400, "bad request line\n"), false);
    }
    std::string_view method = line.substr(0, sp1);
    std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    std::string path(target.substr(0, target.find('?')));
    bool head = method == "HEAD";
    if (method != "GET" && !head) {
      Answer a = Plain(405, "only GET and HEAD\n");
      a.headers.push_back("Allow: GET, HEAD");
      return Render(a, false);
    }
    return Render(Route(path), head);
  }

  void Accept() {
    for (;;) {
      int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;  // EAGAIN: all taken; anything else is the client's loss
      if (connections.size() >= kMaxConnections) {
        ::close(connections.front().fd);
        connections.erase(connections.begin());
      }
      connections.push_back({fd, std::chrono::steady_clock::now() + kExchangeDeadline, "", "", 0});
    }
  }

  // False once the connection is done with (answered, closed by the peer, or broken).
  bool Serve(Connection& c, short revents) {
    if (c.out.empty() && (revents & (POLLIN | POLLHUP | POLLERR))) {
      char buf[2048];
      ssize_t n = ::recv(c.fd, buf, std::min(sizeof buf, kMaxRequestBytes - c.in.size()), 0);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return false;
      if (n > 0) c.in.append(buf, static_cast<size_t>(n));
      c.out = Respond(c.in);
    }
    if (!c.out.empty()) {
      ssize_t n = ::send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
      if (n < 0 && errno != EAGAIN && errno != EINTR) return false;
      if (n > 0) c.sent += static_cast<size_t>(n);
      if (c.sent == c.out.size()) return false;
    }
    return true;
  }

  void Loop() {
    std::vector<pollfd> fds;
    for (;;) {
      auto now = std::chrono::steady_clock::now();
      std::erase_if(connections, [&](const Connection& c) {
        if (c.deadline > now) return false;
        ::close(c.fd);
        return true;
      });
      fds = {{stop_fd, POLLIN, 0}, {listen_fd, POLLIN, 0}};
      auto next = now + std::chrono::hours(1);
      for (const auto& c : connections) {
        fds.push_back({c.fd, static_cast<short>(c.out.empty() ? POLLIN : POLLOUT), 0});
        next = std::min(next, c.deadline);
      }
      auto wait = std::chrono::ceil<std::chrono::milliseconds>(next - now).count();
      if (::poll(fds.data(), fds.size(), static_cast<int>(wait)) < 0 && errno != EINTR) return;
      if (fds[0].revents != 0) return;
      // Connections first: Accept may drop the oldest, which would shift them against `fds`.
      std::vector<Connection> kept;
      for (size_t i = 0; i < connections.size(); ++i) {
        Connection& c = connections[i];
        if (fds[i + 2].revents == 0 || Serve(c, fds[i + 2].revents)) {
          kept.push_back(std::move(c));
        } else {
          ::close(c.fd);
        }
      }
      connections = std::move(kept);
      if (fds[1].revents & POLLIN) Accept();
    }
  }

  Metrics& metrics;
  StatusChecks checks;
  int listen_fd = -1;
  int stop_fd = -1;
  std::vector<Connection> connections;
  std::thread thread;
};

StatusServer::StatusServer(std::unique_ptr<Impl> impl, int port) : impl_(std::move(impl)), port_(port) {}

StatusServer::~StatusServer() {
  uint64_t one = 1;
  (void)!::write(impl_->stop_fd, &one, sizeof one);
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

  auto unavailable = [&](const std::string& why) {
    return Status::Unavailable(fmt::format("--status-listen '{}': {}", listen, why));
  };
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), port_text.c_str(), &hints, &found); rc != 0) {
    return unavailable(std::string("cannot resolve it: ") + ::gai_strerror(rc));
  }
  auto impl = std::make_unique<Impl>(metrics, std::move(checks));
  int err = 0;
  for (addrinfo* a = found; a != nullptr && impl->listen_fd < 0; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    // SO_REUSEADDR alone allows a quick restart; SO_REUSEPORT would let a second quorate on the same
    // address bind and silently share the probes.
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 128) == 0) {
      impl->listen_fd = fd;
    } else {
      err = errno;
      ::close(fd);
    }
  }
  ::freeaddrinfo(found);
  if (impl->listen_fd < 0) return unavailable(std::strerror(err));
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  if (::getsockname(impl->listen_fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
    return unavailable(std::strerror(errno));
  }
  int port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                               : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  impl->stop_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (impl->stop_fd < 0) return unavailable(std::string("eventfd: ") + std::strerror(errno));
  Impl& started = *impl;
  impl->thread = std::thread([&started] { started.Loop(); });
  return std::unique_ptr<StatusServer>(new StatusServer(std::move(impl), port));
}

}  // namespace quorate
