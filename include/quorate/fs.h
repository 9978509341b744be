// Local file helpers with the crash-safety quorate promises: a reader never sees half a file,
// and nothing is ever deleted, only moved aside.
#pragma once

#include <string>

#include "quorate/status.h"

namespace quorate {

Result<std::string> ReadFile(const std::string& path);
// A hidden (dot-named), uniquely named, fsynced copy of `content` in `path`'s directory, created
// with it; returns its name. Readers listing the directory skip dot files, and threads of one
// process never share a name.
Result<std::string> WriteHiddenTemp(const std::string& path, const std::string& content, int mode = 0644);
// WriteHiddenTemp, rename over `path`, fsync the directory.
Status WriteFileAtomic(const std::string& path, const std::string& content, int mode = 0644);
Status SyncDir(const std::string& dir);
Status MakeDirs(const std::string& path);
bool PathExists(const std::string& path);
// Renames `path` to `path.<suffix>-<UTC time>` and returns the new name.
Result<std::string> MoveAside(const std::string& path, const std::string& suffix);

}  // namespace quorate
