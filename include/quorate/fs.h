// Local file helpers with the crash-safety quorate promises: a reader never sees half a file,
// and nothing is ever deleted, only moved aside.
#pragma once

#include <string>

#include "quorate/status.h"

namespace quorate {

Result<std::string> ReadFile(const std::string& path);
// Temp file in the same directory, fsync, rename over `path`, fsync the directory.
Status WriteFileAtomic(const std::string& path, const std::string& content, int mode = 0644);
Status MakeDirs(const std::string& path);
bool PathExists(const std::string& path);
// Renames `path` to `path.<suffix>-<UTC time>` and returns the new name.
Result<std::string> MoveAside(const std::string& path, const std::string& suffix);

}  // namespace quorate
