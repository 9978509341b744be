// What every fuzz target shares: the input as text, and the invariants every parser of outside
// input keeps whatever it is given: it returns (no crash, no hang, no throw, no leak), an error says
// something, and what it accepts is safe to write into etcd's config (each target checks that).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "quorate/status.h"
#include "quorate/text.h"

namespace quorate::fuzz {

inline std::string_view Text(const uint8_t* data, size_t size) {
  return std::string_view(reinterpret_cast<const char*>(data), size);
}

// Splits the input at its first NUL into two texts (say a header and a body).
inline std::pair<std::string, std::string> Split(std::string_view in) {
  size_t nul = in.find('\0');
  if (nul == std::string_view::npos) return {std::string(in), {}};
  return {std::string(in.substr(0, nul)), std::string(in.substr(nul + 1))};
}

// An error says what was wrong. Messages may quote raw outside bytes: they are escaped where they
// leave quorate (the log formatter and the final error line both go through Printable).
inline void CheckMessage(const Status& s) {
  if (!s.ok() && s.message().empty()) std::abort();
}

}  // namespace quorate::fuzz
