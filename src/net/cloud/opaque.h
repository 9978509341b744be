// Values a cloud hands out only to be sent back (page tokens, session and access tokens, keys):
// quorate never reads them, but they go into a header or a query, so each is checked when it comes
// in. A message about one says what was wrong and its size, never its content, not even a prefix.
#pragma once

#include <cstddef>
#include <string_view>

#include "quorate/status.h"

namespace quorate::cloud {

// Printable ASCII without spaces (0x21-0x7e), 1 to `max_bytes` bytes. Unavailable naming `what`, the
// fault and the size otherwise: whoever answered it is asked again within --timeout.
Status CheckOpaque(std::string_view value, size_t max_bytes, std::string_view what);

}  // namespace quorate::cloud
