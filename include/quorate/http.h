// One HTTP(S) client for everything quorate reads over HTTP (the etcd peer probe, the S3 store, the
// Kubernetes provider): each call is bounded as a whole by a deadline (connecting, TLS, headers and
// body together) and its body by a size checked as the bytes arrive, so a server that dribbles, never
// ends or sends gigabytes can neither hold quorate past its --timeout nor fill its memory. TLS always
// verifies the server. Callers read the outcome and decide what it means for them.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "quorate/clock.h"
#include "quorate/status.h"
#include "quorate/tls.h"

namespace quorate {

struct HttpRequest {
  std::string base_url;  // scheme://host[:port], an IPv6 host in brackets
  // https only: the certificate and key to present (both empty: none) and the CA bundle the server
  // must chain to (empty: the system roots).
  TlsFiles tls;
  std::string method = "GET";
  std::string target;  // path and query, percent-encoded as they go on the wire
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;  // sent as it is (PUT, POST); give its Content-Type in `headers`
  // The call ends at the earlier of start + timeout and `deadline`, answered or not.
  std::chrono::milliseconds timeout{0};
  Clock::TimePoint deadline = Clock::kNever;
  size_t max_body = 0;  // a body larger than this ends the call
};

struct HttpResponse {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // The first header of that name, compared without case; empty when there is none.
  std::string Header(const std::string& name) const;
};

enum class HttpFailure {
  kNone,
  kNoConnection,  // refused, unreachable, or not connected in the time there was
  kNoAnswer,      // connected, then closed or silent: nothing of an answer came back
  kPartial,       // an answer began but was not whole in time, or broke off
  kTooLarge,      // the body is (or says it is) larger than max_body
  kTls,           // the TLS handshake failed
  kTlsUntrusted,  // the server's certificate does not chain to the CA bundle
  kTlsSetUp,      // our certificate, key or CA bundle cannot be loaded
  // Not sent: a CR, LF, NUL or other byte that would split the request on the wire is in its
  // address, target or a header (the message names the header, never its value).
  kUnsafeRequest,
};

struct HttpResult {
  HttpFailure failure = HttpFailure::kNone;
  std::string why;        // the failure in words, e.g. "no answer (connection closed, or silent for 300 ms)"
  HttpResponse response;  // when failure is kNone

  bool ok() const { return failure == HttpFailure::kNone; }
  // The usual reading, `what` naming the call ("GET https://10.0.0.1:443/api/v1/pods"): our own TLS
  // files and a server they do not vouch for are InvalidArgument (the operator fixes them); silence,
  // slowness, size, a failed handshake and a request not sent as unsafe (its parts came from an
  // answer, which the server may correct) are Unavailable.
  Status ToStatus(const std::string& what) const;
};

// Never throws. The caller reads response.status: every HTTP status is an answer here.
HttpResult HttpSend(const HttpRequest& request);

// 5xx and 429: the server's trouble of the moment, to be asked again later.
bool IsRetryableHttpStatus(int status);

// A cloud API's "slow down": 429 and 503 always, and whatever `throttled` also calls one (EC2 says
// RequestLimitExceeded in a 400). Such an answer is asked again, after its Retry-After (seconds) or
// else after 200 ms doubling up to 5 s, until request.deadline: a throttle is the API working as
// designed, so the call waits it out instead of failing the try. The wait is `clock`'s Poll, so a
// fake clock tests it. Returns the first answer that is not a throttle, a failure to connect or
// answer (the caller's own retry handles those), or, when the time is up, the last throttle.
// `sign` (when given) prepares each try, for signatures that carry the time of sending.
HttpResult HttpSendThrottled(HttpRequest request, Clock& clock,
                             const std::function<bool(const HttpResponse&)>& throttled = {},
                             const std::function<void(HttpRequest&)>& sign = {});
// The wait the answer asks for, from its Retry-After in seconds; nullopt when it names none (an
// HTTP date is not worth honouring over our own backoff).
std::optional<std::chrono::seconds> RetryAfter(const HttpResponse& response);

}  // namespace quorate
