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

HttpRequest CloudRequest(std::string base, std::string method, std::string target,
                         std::vector<std::pair<std::string, std::string>> headers, std::string body,
                         Clock::TimePoint deadline, size_t max_body);

}  // namespace quorate::cloud
