#include "net/cloud/opaque.h"

#include <fmt/format.h>

namespace quorate::cloud {

Status CheckOpaque(std::string_view value, size_t max_bytes, std::string_view what) {
  if (value.empty()) return Status::Unavailable(fmt::format("{} is empty", what));
  if (value.size() > max_bytes) {
    return Status::Unavailable(fmt::format("{} is {} bytes, more than the {} a real one has", what, value.size(), max_bytes));
  }
  for (size_t i = 0; i < value.size(); ++i) {
    const auto c = static_cast<unsigned char>(value[i]);
    if (c < 0x21 || c > 0x7e) {
      return Status::Unavailable(fmt::format("{} ({} bytes) holds byte 0x{:02x} at offset {}: a space, a control "
                                             "byte or non-ASCII, which no real one has",
                                             what, value.size(), c, i));
    }
  }
  return Status::Ok();
}

}  // namespace quorate::cloud
