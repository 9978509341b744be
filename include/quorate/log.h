// Logging goes to stderr through spdlog, as text or one JSON object a line; stdout is reserved for
// command output. One info line per decision, with its reason; details at debug.
#pragma once

#include <string>

#include <spdlog/spdlog.h>

namespace quorate {

// `format` is "text" or "json"; `level` is debug|info|warn|error (validated by the config).
void InitLogging(const std::string& format, const std::string& level);

}  // namespace quorate
