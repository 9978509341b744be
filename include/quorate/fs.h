// Local file helpers with the crash-safety quorate promises: a reader never sees half a file,
// and nothing is ever deleted, only moved aside. Local state is private by default (files 0600,
// directories 0700: etcd warns about a data dir others can read); a shared store asks for more.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "quorate/status.h"

namespace quorate {

// Owns a file descriptor: closed on every path out of the scope that opened it.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    reset(other.release());
    return *this;
  }
  void reset(int fd = -1);
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// Everything quorate reads from local disk (the bucket, TLS files, tokens) is far smaller: a larger
// file was put there by someone else.
inline constexpr size_t kMaxLocalFileBytes = 4 << 20;

// The regular file `path`, whole. It is opened without blocking and checked after opening (no race
// with a rename), so a FIFO, a device or a directory planted there is refused, never waited on;
// NotFound when absent; DataLoss, before reading a byte, when it holds more than `max_bytes`.
Result<std::string> ReadFile(const std::string& path, size_t max_bytes = kMaxLocalFileBytes);
// ReadFile of a file already opened (O_NONBLOCK, so a FIFO opened there did not wait) as `fd`;
// `where` names it in messages.
Result<std::string> ReadOpenFile(int fd, const std::string& where, size_t max_bytes);
// At most the first `max_bytes` of the regular file `path`, refused as ReadFile refuses.
Result<std::string> ReadFileHead(const std::string& path, size_t max_bytes);
// The DataLoss ReadFile gives for a file of `size` bytes at `where` (a path or a store URL) where
// `max_bytes` is the most that belongs there: the same words for every store.
Status TooLargeToRead(const std::string& where, uint64_t size, size_t max_bytes);
// A hidden (dot-named), uniquely named, fsynced copy of `content` in `path`'s directory, created
// with it (missing directories get `mode` plus search rights where it grants reading); returns its
// name. Readers listing the directory skip dot files, and threads of one process never share a name.
Result<std::string> WriteHiddenTemp(const std::string& path, const std::string& content, int mode = 0600);
// WriteHiddenTemp for `name` in the open directory `dir_fd` (`dir` names it in messages), which must
// exist: returns the temp file's name in that directory.
Result<std::string> WriteHiddenTempAt(int dir_fd, const std::string& dir, const std::string& name,
                                      const std::string& content, int mode);
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
