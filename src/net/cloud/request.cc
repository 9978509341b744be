#include "net/cloud/request.h"

#include <fmt/format.h>

namespace quorate::cloud {

std::string PercentEncode(const std::string& text, bool keep_slash) {
  std::string out;
  for (unsigned char c : text) {
    const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
                            c == '_' || c == '.' || c == '~';
    if (unreserved || (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

HttpRequest CloudRequest(std::string base, std::string method, std::string target,
                         std::vector<std::pair<std::string, std::string>> headers, std::string body,
                         Clock::TimePoint deadline, size_t max_body) {
  HttpRequest request;
  request.base_url = std::move(base);
  request.method = std::move(method);
  request.target = std::move(target);
  request.headers = std::move(headers);
  request.body = std::move(body);
  request.timeout = kCallTimeout;
  request.deadline = deadline;
  request.max_body = max_body;
  return request;
}

}  // namespace quorate::cloud
