// Local file helpers with the crash-safety quorate promises: a reader never sees half a file,
// and nothing is ever deleted, only moved aside. Local state is private by default (files 0600,
// directories 0700: etcd warns about a data dir others can read); a shared store asks for more.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "quorate/status.h"

namespace quorate {

// Everything quorate reads from local disk (the bucket, TLS files, tokens) is far smaller: a larger
// file was put there by someone else.
inline constexpr size_t kMaxLocalFileBytes = 4 << 20;

// The regular file `path`, whole. It is opened without blocking and checked after opening (no race
// with a rename), so a FIFO, a device or a directory planted there is refused, never waited on;
// NotFound when absent; DataLoss, before reading a byte, when it holds more than `max_bytes`.
Result<std::string> ReadFile(const std::string& path, size_t max_bytes = kMaxLocalFileBytes);
// At most the first `max_bytes` of the regular file `path`, refused as ReadFile refuses.
Result<std::string> ReadFileHead(const std::string& path, size_t max_bytes);
// The DataLoss ReadFile gives for a file of `size` bytes at `where` (a path or a store URL) where
// `max_bytes` is the most that belongs there: the same words for every store.
Status TooLargeToRead(const std::string& where, uint64_t size, size_t max_bytes);
// A hidden (dot-named), uniquely named, fsynced copy of `content` in `path`'s directory, created
// with it (missing directories get `mode` plus search rights where it grants reading); returns its
// name. Readers listing the directory skip dot files, and threads of one process never share a name.
Result<std::string> WriteHiddenTemp(const std::string& path, const std::string& content, int mode = 0600);
// WriteHiddenTemp, rename over `path`, fsync the directory.
Status WriteFileAtomic(const std::string& path, const std::string& content, int mode = 0600);
// WriteFileAtomic unless `path` already holds exactly `content`: true when it wrote.
Result<bool> WriteFileIfChanged(const std::string& path, const std::string& content, int mode = 0600);
Status SyncDir(const std::string& dir);
// Creates the missing directories of `path` with `mode`; existing ones keep theirs.
Status MakeDirs(const std::string& path, int mode = 0700);
bool PathExists(const std::string& path);
// Renames `path` to `path.<suffix>-<UTC time>` and returns the new name.
Result<std::string> MoveAside(const std::string& path, const std::string& suffix);

}  // namespace quorate
