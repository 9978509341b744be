// JSON that came from outside (a peer, an API server, a store), parsed so that no answer can crash
// quorate: nesting is capped, since copying or printing a document recurses once a level, and
// nothing throws. Bodies are capped in size before they get here (quorate/http.h).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "quorate/status.h"

namespace quorate {

inline constexpr int kMaxForeignJsonDepth = 64;

// The document, or InvalidArgument saying what is wrong ("not JSON (18 bytes)", "nested
// deeper than 64 levels"), for the caller to put behind the source's name and give its own code.
Result<nlohmann::json> ParseForeignJson(const std::string& text);

}  // namespace quorate
