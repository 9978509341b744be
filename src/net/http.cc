#include "quorate/http.h"

// Debian's libcpp-httplib is compiled with OpenSSL and its pkg-config sets this macro for every
// user. Defining it here instead would only hide a header that disagrees with the library.
#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#error "https needs cpp-httplib with CPPHTTPLIB_OPENSSL_SUPPORT (use its pkg-config flags)"
#endif
#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cctype>
#include <functional>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "quorate/text.h"

namespace quorate {
namespace {

using std::chrono::milliseconds;

// Ends the call at the deadline whatever httplib is doing: its own timeouts bound each read, not
// the whole, so a server sending a byte now and then would otherwise hold the call for ever.
// stop() shuts the socket down under httplib's socket lock, which connecting holds, so a stop that
// comes while connecting takes effect as soon as the connection is made. `before_stop` runs first,
// while the connection is as the server left it.
class Watchdog {
 public:
  Watchdog(httplib::Client& client, Clock::TimePoint deadline, std::function<void()> before_stop)
      : thread_([this, &client, deadline, before_stop = std::move(before_stop)] {
          std::unique_lock lock(mu_);
          if (cv_.wait_until(lock, deadline, [this] { return done_; })) return;
          fired_ = true;
          lock.unlock();
          before_stop();
          client.stop();
        }) {}
  ~Watchdog() {
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  bool fired() {
    std::lock_guard lock(mu_);
    return fired_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  bool fired_ = false;
  std::thread thread_;  // last: it starts at once and uses the members above
};

// glibc's tcp_info stops where Linux 3.15 went on; the kernel fills in as much as it is given.
struct TcpInfoWithBytes {
  tcp_info base;
  uint64_t pacing_rate, max_pacing_rate, bytes_acked, bytes_received;
};
static_assert(sizeof(tcp_info) % 8 == 0, "the kernel's next field is 8-byte aligned right after glibc's");

// Bytes the connection received, counted by the kernel (a FIN counts one, so ask before hanging
// up); 0 when unknown.
uint64_t BytesReceived(int fd) {
  TcpInfoWithBytes info{};
  socklen_t len = sizeof info;
  if (fd < 0 || getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0 || len < sizeof info) return 0;
  return info.bytes_received;
}

// RFC 9110's tchar: what a method and a header name are made of.
bool IsTokenChar(unsigned char c) {
  return std::isalnum(c) || std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
}

bool IsToken(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](unsigned char c) { return IsTokenChar(c); });
}

// A control byte (HTAB aside) or DEL: what RFC 9110 keeps out of a header's value.
bool IsFieldControl(unsigned char c) { return (c < 0x20 && c != '\t') || c == 0x7f; }

// Whether any byte would end the request line where it stands: the address and the target go on
// it (and the host into the Host header) as they are, so a space, a tab, a CR, an LF or a NUL there
// is a line or a request of someone else's making.
bool HasLineBreaker(std::string_view text) {
  return std::any_of(text.begin(), text.end(), [](unsigned char c) { return c <= 0x20 || c == 0x7f; });
}

// Why the request cannot go on the wire as it is, or empty. A URL, a path, a host or a token taken
// from an answer (a next page's link, a continuation token) with a CR LF in it would otherwise end
// our line and start the server's: a header of its choosing, or a second request carrying our
// credentials. Checked here, whoever built the request; a header is named, never its value, which
// may be a secret.
std::string UnsafeRequest(const HttpRequest& request) {
  if (!IsToken(request.method)) return "the method is not an HTTP token";
  if (HasLineBreaker(request.base_url)) return "the server's address holds a space or a control byte";
  if (request.target.empty() || HasLineBreaker(request.target)) {
    return "the request target is empty or holds a space or a control byte";
  }
  for (const auto& [name, value] : request.headers) {
    if (!IsToken(name)) return fmt::format("a header name ('{}') is not an HTTP token", Printable(name, 64));
    if (std::any_of(value.begin(), value.end(), [](unsigned char c) { return IsFieldControl(c); })) {
      return fmt::format("header {} holds a CR, LF, NUL or other control byte", name);
    }
  }
  return "";
}

}  // namespace

std::string HttpResponse::Header(const std::string& name) const {
  for (const auto& [key, value] : headers) {
    if (strcasecmp(key.c_str(), name.c_str()) == 0) return value;
  }
  return "";
}

bool IsRetryableHttpStatus(int status) { return status >= 500 || status == 429; }

Status HttpResult::ToStatus(const std::string& what) const {
  switch (failure) {
    case HttpFailure::kNone:
      return Status::Ok();
    case HttpFailure::kTlsSetUp:
    case HttpFailure::kTlsUntrusted:
      return Status::InvalidArgument(fmt::format("{}: {}", what, why));
    default:
      return Status::Unavailable(fmt::format("{}: {}", what, why));
  }
}

HttpResult HttpSend(const HttpRequest& request) {
  assert(request.max_body > 0 && "every body has a cap");
  // Real time on purpose: this is the socket's own clock, with nothing to fake below it.
  const Clock::TimePoint start = std::chrono::steady_clock::now();
  Clock::TimePoint deadline = request.deadline;
  if (request.timeout > milliseconds(0) && start + request.timeout < deadline) deadline = start + request.timeout;
  HttpResult result;
  auto fail = [&](HttpFailure failure, std::string why) {
    result.failure = failure;
    result.why = std::move(why);
    return result;
  };
  // Not tried only once the deadline has passed, and otherwise rounded up, so that a caller seeing a
  // failure the deadline caused also sees the deadline passed (and reports what came before instead).
  if (std::string unsafe = UnsafeRequest(request); !unsafe.empty()) {
    return fail(HttpFailure::kUnsafeRequest, "not sent: " + unsafe);
  }
  if (start >= deadline) return fail(HttpFailure::kNoConnection, "not tried: no time was left");
  const auto budget = std::chrono::ceil<milliseconds>(deadline - start);
  const bool https = request.base_url.rfind("https://", 0) == 0;

  // The certificate and key matter only for https; an http client ignores them.
  httplib::Client client(request.base_url, request.tls.cert_file, request.tls.key_file);
  if (!client.is_valid()) {
    return fail(HttpFailure::kTlsSetUp, fmt::format("cannot use TLS certificate '{}' with key '{}'",
                                                    request.tls.cert_file, request.tls.key_file));
  }
  if (!request.tls.trusted_ca_file.empty()) client.set_ca_cert_path(request.tls.trusted_ca_file.c_str());
  client.enable_server_certificate_verification(true);
  client.set_url_encode(false);
  const auto secs = std::chrono::duration_cast<std::chrono::seconds>(budget);
  const auto usecs = std::chrono::duration_cast<std::chrono::microseconds>(budget - secs);
  client.set_connection_timeout(secs.count(), usecs.count());
  client.set_read_timeout(secs.count(), usecs.count());
  client.set_write_timeout(secs.count(), usecs.count());
  // A descriptor of our own, so the watchdog can look at the socket whatever httplib does with its.
  std::atomic<int> socket_copy{-1};
  client.set_socket_options([&socket_copy](socket_t sock) {
    // Each address tried gets a socket of its own; the last one is the connection.
    int old = socket_copy.exchange(fcntl(sock, F_DUPFD_CLOEXEC, 0));
    if (old >= 0) close(old);
  });

  httplib::Request req;
  req.method = request.method;
  req.path = request.target;
  for (const auto& [name, value] : request.headers) req.set_header(name, value);
  req.body = request.body;
  bool headers_arrived = false;
  uint64_t declared = 0;
  size_t received = 0;
  bool too_large = false;
  req.response_handler = [&](const httplib::Response& res) {
    headers_arrived = true;
    // A HEAD answer's length is that of the body it leaves out.
    if (request.method != "HEAD" && res.has_header("Content-Length")) {
      declared = std::strtoull(res.get_header_value("Content-Length").c_str(), nullptr, 10);
      too_large = declared > request.max_body;
    }
    return !too_large;
  };
  req.content_receiver = [&](const char* data, size_t length, uint64_t, uint64_t) {
    received += length;
    if (received > request.max_body) {
      too_large = true;
      return false;
    }
    result.response.body.append(data, length);
    return true;
  };

  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  bool sent = false;
  bool deadline_hit = false;
  // Over plain http any byte back is the start of an answer; over https the handshake's bytes are
  // not, and only complete headers count.
  std::atomic<bool> bytes_came{false};
  {
    Watchdog watchdog(client, deadline, [&] { bytes_came = !https && BytesReceived(socket_copy) > 0; });
    sent = client.send(req, res, error);
    deadline_hit = watchdog.fired();
  }
  // httplib's own timeouts are the whole budget, counted from later than `start`: a failure they
  // cause comes past the deadline, maybe before a starved watchdog thread got to run.
  const bool failed_at_deadline = deadline_hit || std::chrono::steady_clock::now() >= deadline;
  const bool began = headers_arrived || bytes_came;
  if (socket_copy >= 0) close(socket_copy);

  // A body without a length ends where the connection does, and the watchdog's shutdown looks to
  // httplib like the server's close: an answer the deadline cut is taken for a whole one unless
  // told apart here.
  if (sent && deadline_hit) {
    return fail(HttpFailure::kPartial,
                fmt::format("the answer was not whole within {} ms (cut short after {} bytes of body)", budget.count(),
                            received));
  }
  if (sent) {
    result.response.status = res.status;
    for (const auto& [name, value] : res.headers) result.response.headers.emplace_back(name, value);
    return result;
  }
  if (too_large) {
    return fail(HttpFailure::kTooLarge,
                declared > request.max_body
                    ? fmt::format("its body would be {} bytes, more than the {} allowed", declared, request.max_body)
                    : fmt::format("its body is larger than the {} bytes allowed", request.max_body));
  }
  // A server that refuses our client certificate closes the connection once the handshake is done,
  // which the client sees as a failed write or read, depending on timing.
  const char* refused_hint = https ? "; our TLS certificate refused?" : "";
  if (failed_at_deadline) {
    if (began) {
      return fail(HttpFailure::kPartial,
                  fmt::format("the answer was not whole within {} ms (sent too slowly)", budget.count()));
    }
    if (error == httplib::Error::Connection || error == httplib::Error::ConnectionTimeout) {
      return fail(HttpFailure::kNoConnection, fmt::format("no connection within {} ms", budget.count()));
    }
    return fail(HttpFailure::kNoAnswer, fmt::format("no answer (connection closed, or silent for {} ms)", budget.count()));
  }
  switch (error) {
    case httplib::Error::Connection:
      return fail(HttpFailure::kNoConnection, "cannot connect (refused or unreachable)");
    case httplib::Error::ConnectionTimeout:
      return fail(HttpFailure::kNoConnection, fmt::format("no connection within {} ms", budget.count()));
    case httplib::Error::SSLConnection:
      return fail(HttpFailure::kTls, "TLS handshake failed");
    case httplib::Error::SSLServerVerification:
      return fail(HttpFailure::kTlsUntrusted, "its TLS certificate is not trusted (check the CA file)");
    case httplib::Error::SSLLoadingCerts:
      return fail(HttpFailure::kTlsSetUp,
                  fmt::format("cannot load the trusted CA file '{}'", request.tls.trusted_ca_file));
    case httplib::Error::Write:
      return fail(HttpFailure::kNoAnswer, fmt::format("request not sent (connection closed{})", refused_hint));
    default:
      if (headers_arrived) {
        return fail(HttpFailure::kPartial, fmt::format("the answer broke off after {} bytes of body", received));
      }
      return fail(HttpFailure::kNoAnswer,
                  fmt::format("no answer (connection closed, or silent for {} ms{})", budget.count(), refused_hint));
  }
}


std::optional<std::chrono::seconds> RetryAfter(const HttpResponse& response) {
  const std::string value = response.Header("Retry-After");
  if (value.empty() || value.size() > 6) return std::nullopt;
  int64_t seconds = 0;
  for (char c : value) {
    if (c < '0' || c > '9') return std::nullopt;
    seconds = seconds * 10 + (c - '0');
  }
  return std::chrono::seconds(seconds);
}

HttpResult HttpSendThrottled(HttpRequest request, Clock& clock, const std::function<bool(const HttpResponse&)>& throttled,
                             const std::function<void(HttpRequest&)>& sign) {
  constexpr Clock::Duration kFirstWait = milliseconds(200);
  constexpr Clock::Duration kMaxWait = std::chrono::seconds(5);
  // Without a deadline, a server that throttles for ever must still let the caller go.
  constexpr int kMaxTriesWithoutDeadline = 10;
  Clock::Duration wait = kFirstWait;
  for (int tries = 1;; ++tries) {
    if (sign) sign(request);
    HttpResult result = HttpSend(request);
    if (!result.ok()) return result;
    const HttpResponse& answer = result.response;
    const bool throttle = answer.status == 429 || answer.status == 503 || (throttled && throttled(answer));
    if (!throttle) return result;
    // The server's own figure is followed as it is; our backoff grows only when it names none.
    Clock::Duration pause = wait;
    if (auto asked = RetryAfter(answer)) {
      pause = std::max<Clock::Duration>(*asked, milliseconds(1));
    } else {
      wait = std::min(wait * 2, kMaxWait);
    }
    const Clock::TimePoint now = clock.Now();
    // No time for another try: the throttle is the answer, and says why.
    if (request.deadline == Clock::kNever ? tries == kMaxTriesWithoutDeadline : now + pause >= request.deadline) {
      return result;
    }
    if (!clock.Poll({}, now + pause).ok()) return result;
  }
}

}  // namespace quorate
