// One call of a credential flow or a cloud API, as every cloud's code builds it: the kit's per-call
// timeout, the caller's --timeout as the deadline, and a cap on the answer's size.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "quorate/clock.h"
#include "quorate/http.h"

namespace quorate::cloud {

inline constexpr auto kCallTimeout = std::chrono::seconds(10);

// An error answer as a cloud's body gives it: its code (AWS's Code, ARM's code, Google's reason) and
// message; empty for a body that is none (a proxy's page).
struct ApiError {
  std::string code, message;
};

// RFC 3986's unreserved characters stay, every other byte is %XX (upper case), '/' too unless
// `keep_slash`: a query or form value, or a path segment by segment. SigV4 (UriEncode) and every
// cloud's form, query and object path use it.
std::string PercentEncode(const std::string& text, bool keep_slash = false);

HttpRequest CloudRequest(std::string base, std::string method, std::string target,
                         std::vector<std::pair<std::string, std::string>> headers, std::string body,
                         Clock::TimePoint deadline, size_t max_body);

}  // namespace quorate::cloud
