// The one way quorate writes JSON (bucket, registration record, -w json, JSON logs). Names, URLs and
// tokens are validated where they enter, but a writer must not be the place where one that slipped
// through turns into an abort: bytes that are not UTF-8 come out as U+FFFD instead of an exception.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace quorate {

// `indent` as nlohmann's dump: -1 for one line, n for pretty-printed with n spaces.
template <typename Json>
std::string JsonText(const Json& doc, int indent = -1) {
  return doc.dump(indent, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

}  // namespace quorate
