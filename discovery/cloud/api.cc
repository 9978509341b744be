#include "api.h"

#include <fmt/format.h>

#include "net/cloud/request.h"
#include "quorate/text.h"

namespace quorate::cloud {

Result<std::string> CallApi(const Api& api, HttpRequest request, size_t max_body, const ApiCall& call,
                            const std::function<void(HttpRequest&)>& sign) {
  request.timeout = kCallTimeout;
  request.deadline = api.deadline;
  request.max_body = max_body;
  auto throttled = [&api](const HttpResponse& answer) {
    return api.throttled && api.throttled(answer.status, api.read_error(answer.body));
  };
  HttpResult result = HttpSendThrottled(request, api.clock ? *api.clock : RealClock(), throttled, sign);
  if (!result.ok()) {
    Status s = result.ToStatus(call.what);
    if (result.failure == HttpFailure::kTlsUntrusted && !api.untrusted_fix.empty()) {
      return Status::InvalidArgument(s.message() + "; " + api.untrusted_fix);
    }
    return s;
  }
  const HttpResponse& answer = result.response;
  if (answer.status >= 200 && answer.status < 300) return answer.body;
  const ApiError error = api.read_error(answer.body);
  std::string text = fmt::format("{}: HTTP {}", call.what, answer.status);
  if (!error.code.empty()) text += " " + Printable(error.code, 64);
  if (!error.message.empty()) text += ": " + Printable(error.message, 300);
  const bool refused = answer.status == 401 || answer.status == 403;
  // Revoked or expired early: the next call fetches other credentials.
  if (api.drop && (answer.status == 401 || (api.expired && api.expired(answer.status, error)))) api.drop();
  if (refused && !call.permission.empty() && !api.refusal.empty()) {
    text += "; " + fmt::format(fmt::runtime(api.refusal), call.permission);
  }
  if (answer.status == 404 && !call.not_found.empty()) text += "; " + call.not_found;
  return Status::Unavailable(text);
}

}  // namespace quorate::cloud
