// A time as IMDS, STS and the container endpoint write an expiry: 2026-11-24T20:00:00Z.
#pragma once

#include <chrono>
#include <ctime>
#include <string>

namespace quorate {

inline std::string Iso8601(std::chrono::system_clock::time_point t) {
  std::time_t seconds = std::chrono::system_clock::to_time_t(t);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

}  // namespace quorate
