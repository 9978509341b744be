#include "net/cloud/request.h"

namespace quorate::cloud {

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
