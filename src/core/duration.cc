#include "quorate/duration.h"

#include <ctime>

#include <fmt/format.h>

#include <cctype>

#include "quorate/text.h"

namespace quorate {

Result<std::chrono::milliseconds> ParseDuration(const std::string& text, const std::string& what) {
  auto bad = [&] {
    return Status::InvalidArgument(
        fmt::format("{}: '{}' is not a duration (use e.g. 500ms, 90s, 5m, 1h)", what, Printable(text, 64)));
  };
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  // Nine digits of hours are still far inside milliseconds' range; the cap below does the rest.
  if (digits == 0 || digits > 9) return bad();
  long n = std::stol(text.substr(0, digits));
  std::string unit = text.substr(digits);
  std::chrono::milliseconds d;
  if (unit.empty() || unit == "s") {
    d = std::chrono::seconds(n);
  } else if (unit == "ms") {
    d = std::chrono::milliseconds(n);
  } else if (unit == "m") {
    d = std::chrono::minutes(n);
  } else if (unit == "h") {
    d = std::chrono::hours(n);
  } else {
    return bad();
  }
  if (d.count() <= 0) return bad();
  if (d > kMaxDuration) {
    return Status::InvalidArgument(fmt::format("{}: '{}' is longer than quorate waits for anything (at most {}h)", what,
                                               Printable(text, 64), kMaxDuration.count()));
  }
  return d;
}

std::optional<std::chrono::system_clock::time_point> ParseUtcTimePrefix(const std::string& text, const char** rest) {
  std::tm tm{};
  const char* end = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (end == nullptr || tm.tm_year < 70 || tm.tm_year >= 300) return std::nullopt;
  if (rest != nullptr) *rest = end;
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

std::string FormatUtcTime(std::chrono::system_clock::time_point t) {
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm utc{};
  gmtime_r(&secs, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

}  // namespace quorate
