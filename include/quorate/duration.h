// Durations as the operator writes them (500ms, 90s, 5m, 1h; a bare number is seconds), for the
// CLI's --timeout and a provider's or store's timeout= key. Capped, so that a deadline computed
// from one (now + duration, in nanoseconds) cannot overflow.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "quorate/status.h"

namespace quorate {

// The longest wait quorate accepts anywhere.
inline constexpr std::chrono::hours kMaxDuration{24};

// InvalidArgument naming `what` (the flag or key) when `text` is not a positive duration of at
// most kMaxDuration.
Result<std::chrono::milliseconds> ParseDuration(const std::string& text, const std::string& what);

// "2026-11-24T14:00:00" and anything after it (a fraction, "Z", a counter), read as UTC, as the
// times stores and cloud APIs answer with; nullopt when it does not start so, or names a year
// outside 1970-2199 (system_clock counts nanoseconds: year 2262 and on would overflow it).
std::optional<std::chrono::system_clock::time_point> ParseUtcTimePrefix(const std::string& text,
                                                                        const char** rest = nullptr);

// The same form back: "2026-11-24T14:00:00Z", to the second, in UTC.
std::string FormatUtcTime(std::chrono::system_clock::time_point t);

}  // namespace quorate
