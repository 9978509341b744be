#include "quorate/json.h"

#include <fmt/format.h>

namespace quorate {

Result<nlohmann::json> ParseForeignJson(const std::string& text) {
  bool too_deep = false;
  // The parser itself keeps its nesting on the heap; refusing each level past the cap keeps the
  // document it builds shallow, and the whole text is refused afterwards.
  auto keep = [&too_deep](int depth, nlohmann::json::parse_event_t event, nlohmann::json&) {
    if (depth > kMaxForeignJsonDepth && (event == nlohmann::json::parse_event_t::object_start ||
                                         event == nlohmann::json::parse_event_t::array_start)) {
      too_deep = true;
      return false;
    }
    return true;
  };
  nlohmann::json doc = nlohmann::json::parse(text, keep, /*allow_exceptions=*/false);
  if (too_deep) return Status::InvalidArgument(fmt::format("JSON nested deeper than {} levels", kMaxForeignJsonDepth));
  if (doc.is_discarded()) {
    // Its size only: the text came from outside and may be anything, a secret a proxy echoed too.
    return Status::InvalidArgument(text.empty() ? std::string("not JSON (empty)")
                                                : fmt::format("not JSON ({} bytes)", text.size()));
  }
  return doc;
}

}  // namespace quorate
